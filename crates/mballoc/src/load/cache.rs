//! A bound on the memory of loaded groups: at most `n` group bitmaps (on-disk bitmap + buddy,
//! ~12 KiB each at 4 KiB blocks) stay in memory; loading one more evicts the oldest clean one.
//!
//! Why: a 16 TiB filesystem has 131,072 groups, 1.5 GiB of bitmaps and buddies when all are
//! loaded. The kernel keeps only the small per-group summary (`ext4_group_info`) resident and
//! lets the page cache drop bitmap and buddy pages, regenerating them on the next
//! `ext4_mb_load_buddy`. We do the same: an evicted group keeps its summary, its place in the
//! optimize-scan indexes and its descriptor count, is marked [`EVICTED`], and is reloaded from
//! the source when next needed — so an eviction never changes where later requests go.
//!
//! A group may be evicted only when it is clean: no frees waiting for a commit, nothing held
//! in-core that is not on disk (no preallocation, no allocation between buddy and disk marking:
//! then in-core free == descriptor free), and its on-disk bitmap stored in the source (written
//! back through [`BitmapSource::write_bitmap`](crate::BitmapSource::write_bitmap) when it changed).
//! Victims are taken oldest-loaded first and only with `try_lock`, so a loader holding its own
//! group's lock can never deadlock on a victim.

use std::collections::VecDeque;

use crate::alloc::allocator::Allocator;
use crate::group::info::GroupState;
use crate::stats::bump;
use crate::sync::atomic::{AtomicU32, Ordering};
use crate::sync::Mutex;

/// `bb_state` bit: the group's bitmaps were dropped by the cache (its summary is still valid).
pub(crate) const EVICTED: u32 = 1 << 8;

/// Loaded groups in load order, and the bound.
pub(crate) struct GroupCache {
    limit: Option<u32>,
    order: Mutex<VecDeque<u32>>,
    loaded: AtomicU32,
}

impl GroupCache {
    /// `limit`: most groups kept loaded (`None` = no bound, the default).
    pub(crate) fn new(limit: Option<u32>) -> GroupCache {
        GroupCache {
            limit: limit.map(|n| n.max(1)),
            order: Mutex::new(VecDeque::new()),
            loaded: AtomicU32::new(0),
        }
    }

    /// Groups whose bitmaps are in memory now.
    pub(crate) fn loaded(&self) -> u32 {
        self.loaded.load(Ordering::Relaxed)
    }
}

impl Allocator {
    /// Records that `g` was just loaded and evicts clean groups while over the bound. `g`
    /// itself (whose lock the caller holds) is never a victim.
    pub(crate) fn note_loaded(&self, g: u32) {
        let c = &self.cache;
        c.loaded.fetch_add(1, Ordering::Relaxed);
        let Some(limit) = c.limit else { return };
        let mut order = c.order.lock();
        order.push_back(g);
        let mut tries = order.len();
        while c.loaded() > limit && tries > 0 {
            tries -= 1;
            let Some(v) = order.pop_front() else { break };
            if v == g || !self.try_evict(v) {
                order.push_back(v);
            }
        }
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
        self.cache.loaded.fetch_sub(1, Ordering::Relaxed);
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

    /// Groups whose bitmaps are in memory now (bounded by [`crate::Builder::cache_groups`]).
    pub fn loaded_groups(&self) -> u32 {
        self.cache.loaded()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{Allocator, Extent, Flags, Geometry, Policy, Request};

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
