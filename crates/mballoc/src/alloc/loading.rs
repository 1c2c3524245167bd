//! The allocator's side of loading groups: what it does when a group enters memory under
//! the cache bound (evicting clean ones, `load::cache`), and when a group turns out corrupt
//! (`ext4_mark_group_bitmap_corrupted`, `load::corrupt`): it is never allocated from again,
//! its free blocks leave the free counter once, and frees into it are refused.

use crate::alloc::allocator::Allocator;
use crate::error::Error;
use crate::group::info::{Group, GroupState};
use crate::group::state;
use crate::load::cache::EVICTED;
use crate::stats::{bump, GroupSnapshot};

impl Allocator {
    /// Records that `g` was just loaded and evicts clean groups while over the bound. `g`
    /// itself (whose lock the caller holds) is never a victim.
    pub(crate) fn note_loaded(&self, g: u32) {
        self.cache.note_loaded(g, |v| self.try_evict(v));
    }

    /// Drops `v`'s bitmaps if it is clean and unlocked; true if it is no longer loaded.
    fn try_evict(&self, v: u32) -> bool {
        let grp = &self.groups[v as usize];
        let Some(mut st) = grp.lock.try_lock() else {
            return false;
        };
        if st.loaded.is_none() {
            return true;
        }
        if self.bits(v).is_corrupt() || !self.write_back_if_clean(v, &st) {
            return false;
        }
        // A prefetched copy read before the write-back would bring back an older bitmap.
        self.readahead.discard(v);
        st.loaded = None;
        self.bits(v).set(EVICTED);
        self.cache.evicted();
        bump(&self.stats.evictions);
        true
    }

    /// Whether the group is clean, writing its on-disk bitmap back first if the source's copy
    /// differs. A source that cannot take the write keeps the group loaded.
    fn write_back_if_clean(&self, v: u32, st: &GroupState) -> bool {
        let Some(l) = &st.loaded else { return true };
        if !st.pending.is_empty() || l.buddy.free() != st.desc_free {
            return false;
        }
        match self.source.read_bitmap(v) {
            Ok(stored) if stored == l.disk => true,
            Ok(_) => self.source.write_bitmap(v, &l.disk).unwrap_or(false),
            Err(_) => false,
        }
    }

    /// Groups whose bitmaps are in memory now (bounded by [`Builder::cache_groups`](crate::alloc::allocator::Builder::cache_groups)).
    pub fn loaded_groups(&self) -> u32 {
        self.cache.loaded()
    }

    /// Marks `grp` corrupt (once): flag it BBITMAP_CORRUPT and stop counting its `desc_free`
    /// blocks as free. The caller holds the group lock and passes the group's `desc_free`.
    pub(crate) fn mark_corrupt(&self, grp: &Group, desc_free: u32, reason: String) {
        if !self.corrupt.insert(grp.no, reason) {
            return;
        }
        self.bits(grp.no).set(state::BBITMAP_CORRUPT);
        self.free_blocks.add(-i64::from(desc_free));
        bump(&self.stats.corrupt_groups);
    }

    /// Groups marked corrupt so far, with the reason, in group order.
    pub fn corrupt_groups(&self) -> Vec<(u32, String)> {
        self.corrupt.snapshot().into_iter().collect()
    }

    /// The error for touching corrupt group `group`.
    pub(crate) fn corrupt_error(&self, group: u32) -> Error {
        self.corrupt.error(group)
    }

    /// A bitmap load failed: a checksum failure marks the group corrupt, so no later scan
    /// tries it again; any other error (I/O) leaves the group to be retried.
    pub(crate) fn load_failed(&self, grp: &Group, st: &GroupState, e: Error) -> Error {
        if let Error::CorruptGroup { reason, .. } = &e {
            self.mark_corrupt(grp, st.desc_free, reason.clone());
        }
        e
    }

    /// Refuses a free that touches a corrupt group, before anything changes.
    pub(crate) fn refuse_corrupt(
        &self,
        groups: impl IntoIterator<Item = u32>,
    ) -> Result<(), Error> {
        match groups.into_iter().find(|&g| self.bits(g).is_corrupt()) {
            Some(g) => Err(self.corrupt_error(g)),
            None => Ok(()),
        }
    }

    /// The snapshot of a group whose bitmap could not be loaded: what its descriptor says.
    pub(crate) fn unloaded_snapshot(&self, g: u32) -> GroupSnapshot {
        let grp = &self.groups[g as usize];
        let st = grp.lock.lock();
        GroupSnapshot {
            group: g,
            free: 0,
            fragments: 0,
            first_free: 0,
            counters: Vec::new(),
            corrupt: self.bits(g).is_corrupt(),
            loaded: false,
            pending: 0,
            desc_free: st.desc_free,
            largest_free_order: -1,
            size_class: grp.size_class() as u8,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::alloc::allocator::Allocator;
    use crate::geometry::Geometry;
    use crate::policy::Policy;
    use crate::request::{Extent, Flags, Request};

    /// 4 groups of 2048 blocks, lazily loaded, at most one loaded, prefetch reads inline.
    fn allocator() -> Allocator {
        let geo = Geometry::new(4096, 2048, 4 * 2048, 0, 4).unwrap();
        Allocator::builder(geo)
            .lazy(true)
            .cpus(1)
            .tunables(Policy::Linux618.tunables(&geo, 1))
            .cache_groups(1)
            .prefetch_threads(0)
            .build()
            .unwrap()
    }

    fn take(a: &Allocator, goal: u64, len: u32) -> Extent {
        let flags = Flags::HINT_DATA | Flags::HINT_NOPREALLOC | Flags::HINT_TRY_GOAL;
        let req = Request::new(7, 0, len).with_goal(goal).with_flags(flags);
        a.allocate(&req).unwrap().extent
    }

    /// A prefetch read that copied a group's bitmap while the group was loaded (a window
    /// that saw `NEED_INIT` just before another thread's load cleared it submits it late) must
    /// not be what the group is reloaded from after its eviction: the copy predates the
    /// allocations written back at eviction. (Found by `threads_on_lazy_groups_with_a_small_cache`
    /// as "block bitmap has 2048 free blocks, descriptor …" on a reload.)
    #[test]
    fn a_group_is_never_reloaded_from_a_read_older_than_its_eviction() {
        let a = allocator();
        assert_eq!(take(&a, 2048 + 10, 100).start, 2048 + 10);
        // The late prefetch: group 1 is loaded, its source copy still all free.
        assert!(a.readahead.submit(1));
        // Loading group 2 evicts group 1, writing its 100 blocks back.
        assert_eq!(take(&a, 2 * 2048 + 10, 5).start, 2 * 2048 + 10);
        assert_eq!(a.loaded_groups(), 1);
        // Group 1 comes back with its 100 blocks in use, not corrupt.
        assert_eq!(take(&a, 2048 + 110, 5).start, 2048 + 110);
        let g = a.group(1).unwrap();
        assert_eq!(g.free, 2048 - 105, "{g:?}");
        a.check_consistency().unwrap();
    }
}
