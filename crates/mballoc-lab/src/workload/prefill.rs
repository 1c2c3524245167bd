//! Synthetic pre-filled states: used ranges handed to the allocator's builder, so that a big
//! file system starts full and fragmented without running the allocator (every group stays
//! unloaded until a request needs it, as after a mount). The blocks belong to no tracked file.
//!
//! Each group keeps about `(1 − util) · group_len` free blocks in a few holes placed at random
//! inside equal slots of the group; with `max_hole` every hole is shorter than that (the
//! mb_optimize_scan test's "no free 2 MiB run anywhere").

use mballoc::Geometry;

use super::rng::Rng;

/// How the free space of each group is cut.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Holes {
    /// 2–16 holes of random relative sizes.
    Random,
    /// Holes of `max/2 ..= max` blocks, as many as the free space needs.
    AtMost(u32),
}

/// Free runs `(start_in_group, len)` of one group of `len` blocks with `free` blocks free.
fn group_holes(len: u32, free: u32, holes: Holes, rng: &mut Rng) -> Vec<(u32, u32)> {
    if free == 0 || len == 0 {
        return Vec::new();
    }
    let sizes: Vec<u32> = match holes {
        Holes::Random => {
            let k = rng.range(2, 16) as usize;
            let w: Vec<u64> = (0..k).map(|_| rng.range(1, 100)).collect();
            let sum: u64 = w.iter().sum();
            w.iter()
                .map(|&x| ((u64::from(free) * x) / sum).max(1) as u32)
                .collect()
        }
        Holes::AtMost(max) => {
            let max = max.max(1);
            let mut left = free;
            let mut v = Vec::new();
            while left > 0 {
                let n = (rng.range(u64::from(max.div_ceil(2)), u64::from(max)) as u32).min(left);
                v.push(n);
                left -= n;
            }
            v
        }
    };
    let slot = len / sizes.len() as u32;
    sizes
        .iter()
        .enumerate()
        .filter(|_| slot > 1)
        .map(|(i, &n)| {
            let n = n.min(slot - 1).max(1);
            let off = rng.below(u64::from(slot - n)) as u32;
            (i as u32 * slot + off, n)
        })
        .collect()
}

/// Used ranges (absolute, sorted, one or more per group) that leave every group about
/// `1 − util` free in holes cut as `holes` says.
pub fn prefill_ranges(geo: &Geometry, util: f64, holes: Holes, seed: u64) -> Vec<(u64, u64)> {
    let mut rng = Rng::new(seed ^ 0x5052_4546_494c_4c00);
    let mut out = Vec::new();
    for g in 0..geo.group_count() {
        let len = geo.group_len(g);
        let free = ((1.0 - util).clamp(0.0, 1.0) * f64::from(len)).round() as u32;
        let base = geo.group_first_block(g);
        let mut at = 0u32;
        for (s, n) in group_holes(len, free, holes, &mut rng) {
            if s > at {
                out.push((base + u64::from(at), u64::from(s - at)));
            }
            at = s + n;
        }
        if at < len {
            out.push((base + u64::from(at), u64::from(len - at)));
        }
    }
    out
}

/// Sorted union of two sets of `(start, len)` ranges.
pub fn union(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut all: Vec<(u64, u64)> = a.iter().chain(b).copied().filter(|r| r.1 > 0).collect();
    all.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(all.len());
    for (s, n) in all {
        match out.last_mut() {
            Some(last) if s <= last.0 + last.1 => {
                let end = (last.0 + last.1).max(s + n);
                last.1 = end - last.0;
            }
            _ => out.push((s, n)),
        }
    }
    out
}

/// Per group, the free runs `(start_in_group, len)` left by sorted, merged `used` ranges.
pub fn free_runs(geo: &Geometry, used: &[(u64, u64)]) -> Vec<Vec<(u32, u32)>> {
    let mut groups = Vec::with_capacity(geo.group_count() as usize);
    let mut i = 0usize;
    for g in 0..geo.group_count() {
        let start = geo.group_first_block(g);
        let end = start + u64::from(geo.group_len(g));
        let mut at = start;
        let mut runs = Vec::new();
        while i < used.len() && used[i].0 < end {
            let (s, n) = used[i];
            if s + n <= at {
                i += 1;
                continue;
            }
            if s > at {
                runs.push(((at - start) as u32, (s - at) as u32));
            }
            at = at.max((s + n).min(end));
            if s + n > end {
                break; // continues into the next group
            }
            i += 1;
        }
        if at < end {
            runs.push(((at - start) as u32, (end - at) as u32));
        }
        groups.push(runs);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefill_hits_the_target_and_respects_the_hole_cap() {
        let geo = Geometry::ext4_default(1 << 30).unwrap();
        let used = prefill_ranges(&geo, 0.5, Holes::AtMost(511), 3);
        let free = free_runs(&geo, &union(&used, &[]));
        for g in &free {
            let total: u32 = g.iter().map(|r| r.1).sum();
            assert!(g.iter().all(|r| r.1 <= 511), "{g:?}");
            assert!((15_000..=16_384).contains(&total), "{total}");
        }
        let used = prefill_ranges(&geo, 0.75, Holes::Random, 3);
        let free = free_runs(&geo, &union(&used, &[]));
        let total: u64 = free.iter().flatten().map(|r| u64::from(r.1)).sum();
        let want = geo.blocks_count() / 4;
        assert!(total.abs_diff(want) < want / 50, "{total} vs {want}");
    }

    #[test]
    fn union_and_free_runs_by_hand() {
        let geo = Geometry::new(4096, 64, 128, 0, 1).unwrap();
        let used = union(&[(0, 10), (60, 10)], &[(5, 10), (100, 4)]);
        assert_eq!(used, vec![(0, 15), (60, 10), (100, 4)]);
        let free = free_runs(&geo, &used);
        assert_eq!(free[0], vec![(15, 45)]);
        assert_eq!(free[1], vec![(6, 30), (40, 24)]);
    }
}
