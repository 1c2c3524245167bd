//! Corrupt groups (`ext4_mark_group_bitmap_corrupted`).
//!
//! A group is corrupt when its bitmap or descriptor failed a checksum in the store, or when
//! its bitmap and descriptor disagree on load. Like ext4, the allocator then never allocates
//! from it and takes its free blocks out of the free counter once, so that `free_blocks()` only
//! counts space that can really be handed out. Unlike ext4, which ignores frees into a corrupt
//! group, a free into one is refused with a typed error: the caller learns that its blocks were
//! not released, and nothing in the group is ever rewritten behind its back.

use std::collections::BTreeMap;

use crate::error::Error;
use crate::sync::Mutex;

/// The groups marked corrupt and why, in group order.
#[derive(Default)]
pub(crate) struct CorruptSet {
    groups: Mutex<BTreeMap<u32, String>>,
}

impl CorruptSet {
    /// Records `group`; `false` if it was already recorded.
    pub(crate) fn insert(&self, group: u32, reason: String) -> bool {
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

    /// The error for touching corrupt group `group`.
    pub(crate) fn error(&self, group: u32) -> Error {
        let reason = self
            .groups
            .lock()
            .get(&group)
            .cloned()
            .unwrap_or_else(|| "block bitmap marked corrupt".into());
        Error::CorruptGroup { group, reason }
    }
}
