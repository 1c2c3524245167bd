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
//! back through [`BitmapSource::write_bitmap`](crate::load::source::BitmapSource::write_bitmap) when it changed).
//! Victims are taken oldest-loaded first and only with `try_lock`, so a loader holding its own
//! group's lock can never deadlock on a victim.

use std::collections::VecDeque;

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

    /// Records that `g` was just loaded and, while over the bound, offers the oldest loaded
    /// groups to `try_evict` (true: it is no longer loaded). `g` itself (whose lock the
    /// caller holds) is never offered.
    pub(crate) fn note_loaded(&self, g: u32, mut try_evict: impl FnMut(u32) -> bool) {
        self.loaded.fetch_add(1, Ordering::Relaxed);
        let Some(limit) = self.limit else { return };
        let mut order = self.order.lock();
        order.push_back(g);
        let mut tries = order.len();
        while self.loaded() > limit && tries > 0 {
            tries -= 1;
            let Some(v) = order.pop_front() else { break };
            if v == g || !try_evict(v) {
                order.push_back(v);
            }
        }
    }

    /// One loaded group fewer: its bitmaps were dropped.
    pub(crate) fn evicted(&self) {
        self.loaded.fetch_sub(1, Ordering::Relaxed);
    }
}
