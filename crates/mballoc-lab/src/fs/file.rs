//! A regular file: its inode number (the allocator's owner), extent list, size and the dirty
//! blocks that delayed allocation has not placed yet.

use std::collections::BTreeMap;

use super::extents::ExtentMap;
use super::tree::ExtentTree;

/// One file. Owned by the task that writes it; the allocator is shared.
#[derive(Debug, Clone)]
pub struct File {
    /// Inode number: owner of the allocator's inode preallocations and stream-goal slot key.
    pub ino: u64,
    /// Mapped blocks.
    pub map: ExtentMap,
    /// The extent tree's own blocks (leaves, index blocks) once the map outgrows the inode.
    pub tree: ExtentTree,
    /// `i_size` in bytes.
    pub size: u64,
    /// Open for write (`inode_is_open_for_write`): drives mballoc's group-or-file decision.
    pub open: bool,
    /// Dirty, not yet allocated blocks: start → len (delalloc).
    pub(crate) dirty: BTreeMap<u32, u32>,
}

impl File {
    pub(crate) fn new(ino: u64) -> File {
        File {
            ino,
            map: ExtentMap::new(),
            tree: ExtentTree::default(),
            size: 0,
            open: true,
            dirty: BTreeMap::new(),
        }
    }

    /// Blocks written but not yet allocated.
    pub fn dirty_blocks(&self) -> u64 {
        self.dirty.values().map(|&n| u64::from(n)).sum()
    }

    /// Adds `[start, +len)` to the dirty set, merging touching runs.
    pub(crate) fn mark_dirty(&mut self, start: u32, len: u32) {
        let (mut s, mut e) = (u64::from(start), u64::from(start) + u64::from(len));
        let touching: Vec<(u32, u32)> = self
            .dirty
            .range(..=e as u32)
            .filter(|&(&ds, &dn)| u64::from(ds) + u64::from(dn) >= s)
            .map(|(&ds, &dn)| (ds, dn))
            .collect();
        for (ds, dn) in touching {
            self.dirty.remove(&ds);
            s = s.min(u64::from(ds));
            e = e.max(u64::from(ds) + u64::from(dn));
        }
        self.dirty.insert(s as u32, (e - s) as u32);
    }

    /// Drops dirty blocks at or after `lblk` (a truncate discards them).
    pub(crate) fn drop_dirty_from(&mut self, lblk: u32) {
        let runs: Vec<(u32, u32)> = self.dirty.iter().map(|(&s, &n)| (s, n)).collect();
        self.dirty.clear();
        for (s, n) in runs {
            if s < lblk {
                self.dirty.insert(s, n.min(lblk - s));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_runs_merge_and_truncate() {
        let mut f = File::new(12);
        f.mark_dirty(0, 4);
        f.mark_dirty(4, 4);
        f.mark_dirty(10, 2);
        f.mark_dirty(3, 2);
        assert_eq!(
            f.dirty.iter().map(|(&s, &n)| (s, n)).collect::<Vec<_>>(),
            vec![(0, 8), (10, 2)]
        );
        assert_eq!(f.dirty_blocks(), 10);
        f.drop_dirty_from(6);
        assert_eq!(
            f.dirty.iter().map(|(&s, &n)| (s, n)).collect::<Vec<_>>(),
            vec![(0, 6)]
        );
    }
}
