//! Corrupt groups (`ext4_mark_group_bitmap_corrupted`).
//!
//! A group is corrupt when its bitmap or descriptor failed a checksum in the store, or when
//! its bitmap and descriptor disagree on load. Like ext4, the allocator then never allocates
//! from it and takes its free blocks out of the free counter once, so that `free_blocks()` only
//! counts space that can really be handed out. Unlike ext4, which ignores frees into a corrupt
//! group, a free into one is refused with a typed error: the caller learns that its blocks were
//! not released, and nothing in the group is ever rewritten behind its back.

use std::collections::BTreeMap;

use crate::alloc::allocator::Allocator;
use crate::error::Error;
use crate::group::info::{Group, GroupState};
use crate::group::state;
use crate::stats::{bump, GroupSnapshot};
use crate::sync::Mutex;

/// The groups marked corrupt and why, in group order.
#[derive(Default)]
pub(crate) struct CorruptSet {
    groups: Mutex<BTreeMap<u32, String>>,
}

impl CorruptSet {
    /// Records `group`; `false` if it was already recorded.
    fn insert(&self, group: u32, reason: String) -> bool {
        let mut g = self.groups.lock();
        if g.contains_key(&group) {
            return false;
        }
        g.insert(group, reason);
        true
    }

    pub(crate) fn contains(&self, group: u32) -> bool {
        self.groups.lock().contains_key(&group)
    }

    pub(crate) fn snapshot(&self) -> BTreeMap<u32, String> {
        self.groups.lock().clone()
    }
}

impl Allocator {
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
        let reason = self
            .corrupt
            .snapshot()
            .remove(&group)
            .unwrap_or_else(|| "block bitmap marked corrupt".into());
        Error::CorruptGroup { group, reason }
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
