//! Where group bitmaps come from when a group is first needed: the allocator never reads a
//! bitmap before it must, like ext4 reading block bitmaps on demand (and seed 003's prefetch
//! makes those reads cheap on big, full filesystems).

use std::time::Duration;

use crate::error::Error;
use crate::geometry::Geometry;
use crate::group::bitmap::Bitmap;

/// A supplier of on-disk group bitmaps and descriptor free counts.
pub trait BitmapSource: Send + Sync {
    /// Free blocks of a group per its descriptor (cheap: no bitmap read).
    fn descriptor_free(&self, group: u32) -> u32;
    /// Whether the group's descriptor is `EXT4_BG_BLOCK_UNINIT` on a filesystem with group
    /// descriptor checksums (`metadata_csum` or `uninit_bg`): its bitmap was never written and
    /// is computed from the layout, so reading it costs no I/O. ext4 treats such a group
    /// differently while its buddy is not built yet: the cheap criteria load it instead of
    /// passing it over (`ext4_mb_good_group_nolock`), and its prefetch is not counted against
    /// `mb_prefetch_limit` (`ext4_mb_prefetch`). Default: no such groups.
    fn block_uninit(&self, group: u32) -> bool {
        let _ = group;
        false
    }
    /// Reads a group's bitmap (bit set = in use), `blocks_per_group` bits.
    fn read_bitmap(&self, group: u32) -> Result<Bitmap, Error>;
    /// Device time one read of the group's bitmap takes, ns (0: no device read, as for a
    /// `BLOCK_UNINIT` group). Asked only under a virtual-CPU hook, which then charges the
    /// read in virtual time instead of the source waiting in real time. Default: 0.
    fn read_ns(&self, group: u32) -> u64 {
        let _ = group;
        0
    }
    /// Stores a group's on-disk bitmap so that a later `read_bitmap` returns it (the group
    /// cache writes a changed group back before dropping it). `Ok(false)`: this source keeps
    /// no writes, and such groups stay loaded.
    fn write_bitmap(&self, group: u32, bitmap: &Bitmap) -> Result<bool, Error> {
        let _ = (group, bitmap);
        Ok(false)
    }
}

/// The built-in in-memory device: used ranges per group, with an optional cost charged per
/// bitmap read so that lazy loading and prefetch can be measured without a disk.
pub struct MemSource {
    geo: Geometry,
    used: Vec<parking_lot::RwLock<Vec<(u32, u32)>>>,
    load_cost: Duration,
    /// Groups whose descriptor says `BLOCK_UNINIT` (see [`BitmapSource::block_uninit`]).
    block_uninit: Vec<bool>,
}

impl MemSource {
    /// Splits absolute used ranges into per-group runs; out-of-range input is an error.
    pub fn new(geo: Geometry, used: &[(u64, u64)]) -> Result<Self, Error> {
        let mut per_group = vec![Vec::new(); geo.group_count() as usize];
        for &(start, len) in used {
            if len == 0 {
                continue;
            }
            if start
                .checked_add(len)
                .is_none_or(|e| e > geo.blocks_count())
            {
                return Err(Error::UsedRangeOutOfRange {
                    start,
                    len,
                    blocks_count: geo.blocks_count(),
                });
            }
            // Blocks before the first data block (the 1 KiB boot block) belong to no group.
            // With bigalloc a cluster holding any used block is used.
            let mut s = start.max(geo.first_data_block());
            s -= geo.cluster_offset(s);
            let end = start + len;
            while s < end {
                let (g, off) = geo.locate(s);
                let n = geo.num_b2c(end - s).min(u64::from(geo.group_len(g) - off)) as u32;
                per_group[g as usize].push((off, n));
                s += geo.c2b(n.into());
            }
        }
        Ok(MemSource {
            geo,
            used: per_group
                .into_iter()
                .map(parking_lot::RwLock::new)
                .collect(),
            load_cost: Duration::ZERO,
            block_uninit: vec![false; geo.group_count() as usize],
        })
    }

    /// Marks `groups` as `BLOCK_UNINIT` in their descriptors (see
    /// [`BitmapSource::block_uninit`]), as on a freshly made filesystem: their used blocks
    /// should be their metadata only, and reading their bitmap costs no load cost. A group
    /// past the end is an error.
    pub fn with_block_uninit(
        mut self,
        groups: impl IntoIterator<Item = u32>,
    ) -> Result<Self, Error> {
        for g in groups {
            let count = self.geo.group_count();
            let slot = self
                .block_uninit
                .get_mut(g as usize)
                .ok_or(Error::NoSuchGroup {
                    group: g,
                    groups: count,
                })?;
            *slot = true;
        }
        Ok(self)
    }

    /// Makes every bitmap read wait `cost` (a stand-in for disk latency).
    pub fn with_load_cost(mut self, cost: Duration) -> Self {
        self.load_cost = cost;
        self
    }

    fn bitmap(&self, group: u32) -> Bitmap {
        let mut b = Bitmap::new(self.geo.clusters_per_group());
        b.set_range(self.geo.group_len(group), self.geo.clusters_per_group());
        for &(s, l) in self.used[group as usize].read().iter() {
            b.set_range(s, s + l);
        }
        b
    }
}

impl BitmapSource for MemSource {
    fn descriptor_free(&self, group: u32) -> u32 {
        self.bitmap(group)
            .count_ones(0, self.geo.clusters_per_group())
            .abs_diff(self.geo.clusters_per_group())
    }
    fn block_uninit(&self, group: u32) -> bool {
        self.block_uninit
            .get(group as usize)
            .copied()
            .unwrap_or(false)
    }
    fn read_bitmap(&self, group: u32) -> Result<Bitmap, Error> {
        // Disk latency: the reader waits, it does not compute. A BLOCK_UNINIT bitmap is
        // computed from the layout, with no read. Under a virtual-CPU hook the loader has
        // charged the read in virtual time already (`read_ns`).
        let ns = self.read_ns(group);
        if ns > 0 && !crate::sync::virtual_time() {
            std::thread::sleep(Duration::from_nanos(ns));
        }
        Ok(self.bitmap(group))
    }
    fn read_ns(&self, group: u32) -> u64 {
        // The free test first: every load asks, and most sources cost nothing.
        if self.load_cost.is_zero() || self.block_uninit(group) {
            0
        } else {
            u64::try_from(self.load_cost.as_nanos()).unwrap_or(u64::MAX)
        }
    }
    fn write_bitmap(&self, group: u32, bitmap: &Bitmap) -> Result<bool, Error> {
        let len = self.geo.group_len(group).min(bitmap.len());
        *self.used[group as usize].write() = bitmap.one_runs(0, len).collect();
        Ok(true)
    }
}
