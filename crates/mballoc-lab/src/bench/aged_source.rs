//! A procedural [`BitmapSource`]: every group's bitmap is generated on demand from
//! `(seed, group)`, so a 16 TiB filesystem "aged" to ~75 % use costs no aging run and no
//! memory until a group is read.
//!
//! Pattern per group: its own fill target (uniform in 75 % ± 12 %, a few groups full), then
//! alternating used and free runs from a random phase. Free runs are log-uniform in 1..=1024
//! blocks (mostly small holes, a few large ones, like an aged ext4 free-space histogram); used
//! runs are exponential with the mean that gives the group's target. The descriptor count is
//! computed from the same runs, so it always matches the bitmap. Written-back groups (the group
//! cache evicting a changed group) are kept in an overlay and win over the pattern.

use std::collections::HashMap;

use mballoc::Bitmap;
use mballoc::{BitmapSource, Error, Geometry};
use parking_lot::RwLock;

use super::rng::Rng;

pub struct AgedSource {
    geo: Geometry,
    seed: u64,
    overlay: RwLock<HashMap<u32, Bitmap>>,
}

impl AgedSource {
    pub fn new(geo: Geometry, seed: u64) -> AgedSource {
        AgedSource {
            geo,
            seed,
            overlay: RwLock::new(HashMap::new()),
        }
    }

    /// Used runs `(start, len)` of group `g`'s generated pattern.
    fn used_runs(&self, g: u32, mut f: impl FnMut(u32, u32)) {
        let len = self.geo.group_len(g);
        let mut rng = Rng::new(self.seed ^ u64::from(g).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        if rng.below(50) == 0 {
            f(0, len); // ~2 % of groups are full
            return;
        }
        let fill = 0.63 + 0.24 * (rng.below(1 << 20) as f64 / f64::from(1 << 20));
        // Mean of log-uniform 1..=1024 is 1023 / ln 1024 ≈ 147.6.
        let mean_used = 147.6 * fill / (1.0 - fill);
        let mut at = rng.below(u64::from(len.min(512))) as u32;
        if at > 0 {
            f(0, at);
        }
        while at < len {
            let free = (1024f64.powf(rng.below(1 << 20) as f64 / f64::from(1 << 20))) as u32;
            at = at.saturating_add(free.max(1));
            if at >= len {
                break;
            }
            let u = -(1.0 - rng.below(1 << 30) as f64 / f64::from(1 << 30)).ln() * mean_used;
            let n = (u as u32).clamp(1, len - at);
            f(at, n);
            at += n;
        }
    }

    /// Groups written back so far (their bitmaps are held in memory).
    pub fn overlay_groups(&self) -> usize {
        self.overlay.read().len()
    }
}

impl BitmapSource for AgedSource {
    fn descriptor_free(&self, group: u32) -> u32 {
        if let Some(b) = self.overlay.read().get(&group) {
            return self.geo.group_len(group) - b.count_ones(0, self.geo.group_len(group));
        }
        let mut used = 0;
        self.used_runs(group, |_, n| used += n);
        self.geo.group_len(group) - used
    }

    fn read_bitmap(&self, group: u32) -> Result<Bitmap, Error> {
        if let Some(b) = self.overlay.read().get(&group) {
            return Ok(b.clone());
        }
        let bpg = self.geo.clusters_per_group();
        let mut b = Bitmap::new(bpg);
        b.set_range(self.geo.group_len(group), bpg);
        self.used_runs(group, |s, n| b.set_range(s, s + n));
        Ok(b)
    }

    fn write_bitmap(&self, group: u32, bitmap: &Bitmap) -> Result<bool, Error> {
        self.overlay.write().insert(group, bitmap.clone());
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_fragmented_and_about_three_quarters_full() {
        let geo = Geometry::ext4_default(64 << 30).unwrap();
        let s = AgedSource::new(geo, 1);
        let (mut used, mut total, mut runs) = (0u64, 0u64, 0u64);
        for g in 0..geo.group_count() {
            let b = s.read_bitmap(g).unwrap();
            assert_eq!(b, s.read_bitmap(g).unwrap());
            let free = s.descriptor_free(g);
            assert_eq!(free, 32768 - b.count_ones(0, 32768));
            used += u64::from(32768 - free);
            total += 32768;
            runs += b.zero_runs(0, 32768).count() as u64;
        }
        let fill = used as f64 / total as f64;
        assert!((0.70..0.80).contains(&fill), "fill {fill}");
        assert!(
            runs / u64::from(geo.group_count()) > 20,
            "free runs per group {runs}"
        );
        // A write-back wins over the pattern.
        let mut b = s.read_bitmap(3).unwrap();
        b.clear_range(0, 32768);
        assert!(s.write_bitmap(3, &b).unwrap());
        assert_eq!(s.descriptor_free(3), 32768);
    }
}
