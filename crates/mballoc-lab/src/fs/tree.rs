//! The blocks of a file's extent tree: which ones the tree needs as its extent count grows and
//! which it gives back as the count shrinks.
//!
//! The inode holds 4 extents in `i_block` (`ext4_ext_space_root`: (60 − 12) / 12). The 5th
//! extent moves them into a leaf block (`ext4_ext_grow_indepth`, depth 0 → 1); each leaf holds
//! 340 extents with 4 KiB blocks (`ext4_ext_space_block`: (4096 − 12) / 12) and a full leaf
//! gets a new one beside it (`ext4_ext_split`); when the root's 4 index slots hold 4 full
//! leaves, the root moves into an index block (depth 1 → 2). Every such block is a 1-block,
//! non-data request. The model assumes extents are added in logical order (appends, holes
//! filled front to back, as the fsperf jobs do), so leaves fill one after the other; inserts
//! in the middle of a full leaf, which split it where the new extent goes, are not followed.

/// Extents (or index entries) the inode's `i_block` holds (`ext4_ext_space_root`).
pub const ROOT_SLOTS: usize = 4;
/// Extents (or index entries) a 4 KiB tree block holds (`ext4_ext_space_block`).
pub const BLOCK_SLOTS: usize = 340;

/// The next block the tree needs, with where `ext4_ext_create_new_leaf` looks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// The first leaf (depth 0 → 1): `ext4_ext_grow_indepth` at depth 0 asks at
    /// `ext4_inode_to_goal_block`.
    FirstLeaf,
    /// An index block (depth 1 → 2): `ext4_ext_grow_indepth` asks just before the first leaf,
    /// with `EXT4_MB_HINT_TRY_GOAL`.
    Index { first_leaf: u64 },
    /// Another leaf (`ext4_ext_split` → `ext4_ext_new_meta_block`): the goal of
    /// `ext4_ext_find_goal` for the extent being inserted.
    Leaf,
}

/// The tree blocks of one file, in logical order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtentTree {
    leaves: Vec<u64>,
    index: Vec<u64>,
}

impl ExtentTree {
    /// Depth as `eh_depth` would say: 0 while the extents fit the inode.
    pub fn depth(&self) -> u32 {
        match (self.leaves.is_empty(), self.index.is_empty()) {
            (true, _) => 0,
            (false, true) => 1,
            (false, false) => 2,
        }
    }

    /// Every tree block, leaves then index blocks.
    pub fn blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.leaves.iter().chain(&self.index).copied()
    }

    /// What the tree needs next to hold `extents` records, if anything.
    pub fn need(&self, extents: usize) -> Option<Need> {
        let leaves = self.leaves.len();
        if leaves == 0 {
            return (extents > ROOT_SLOTS).then_some(Need::FirstLeaf);
        }
        if extents <= leaves * BLOCK_SLOTS {
            return None;
        }
        // The slots above the leaves: the root's while depth is 1, else the index blocks'.
        let index_slots = if self.index.is_empty() {
            ROOT_SLOTS
        } else {
            self.index.len() * BLOCK_SLOTS
        };
        Some(if leaves < index_slots {
            Need::Leaf
        } else {
            Need::Index {
                first_leaf: self.leaves[0],
            }
        })
    }

    /// Records a block allocated for `need`.
    pub fn add(&mut self, need: Need, block: u64) {
        match need {
            Need::FirstLeaf | Need::Leaf => self.leaves.push(block),
            Need::Index { .. } => self.index.push(block),
        }
    }

    /// `ext4_ext_try_to_merge_up`, run after every insert: a depth-1 tree whose only leaf
    /// holds no more than the root can goes back into the inode; returns the freed leaf.
    pub fn merge_up(&mut self, extents: usize) -> Option<u64> {
        if self.index.is_empty() && self.leaves.len() == 1 && extents <= ROOT_SLOTS {
            self.leaves.pop()
        } else {
            None
        }
    }

    /// After a truncate leaves `extents` records: the leaves left empty go
    /// (`ext4_ext_rm_leaf` → `ext4_ext_rm_idx`), and every block goes once the tree is empty
    /// (`ext4_ext_remove_space` resets the depth). A tree never shrinks in depth otherwise.
    pub fn shrink(&mut self, extents: usize) -> Vec<u64> {
        let mut freed = Vec::new();
        if self.leaves.is_empty() {
            return freed;
        }
        // A non-empty tree keeps at least one leaf.
        let keep_leaves = match extents {
            0 => 0,
            n => n.div_ceil(BLOCK_SLOTS).min(self.leaves.len()),
        };
        freed.extend(self.leaves.drain(keep_leaves..));
        let keep_index = self.leaves.len().div_ceil(BLOCK_SLOTS);
        if keep_index < self.index.len() && (self.leaves.is_empty() || keep_index > 0) {
            freed.extend(self.index.drain(keep_index..));
        }
        debug_assert!(extents > 0 || (self.leaves.is_empty() && self.index.is_empty()));
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Grows a tree to `extents` records, block numbers 1000, 1001, ...
    fn grown(extents: usize) -> ExtentTree {
        let mut t = ExtentTree::default();
        let mut next = 1000;
        for n in 1..=extents {
            while let Some(need) = t.need(n) {
                t.add(need, next);
                next += 1;
            }
        }
        t
    }

    #[test]
    fn the_fifth_extent_needs_a_leaf_and_the_341st_another() {
        assert_eq!(grown(4).depth(), 0);
        assert_eq!(ExtentTree::default().need(5), Some(Need::FirstLeaf));
        let t = grown(5);
        assert_eq!((t.depth(), t.blocks().count()), (1, 1));
        assert_eq!(grown(340).blocks().count(), 1);
        assert_eq!(t.need(341), Some(Need::Leaf));
        assert_eq!(grown(341).blocks().count(), 2);
        assert_eq!(grown(4 * 340).blocks().count(), 4);
    }

    #[test]
    fn four_full_leaves_move_the_root_into_an_index_block() {
        let t = grown(4 * 340);
        assert_eq!(t.need(4 * 340 + 1), Some(Need::Index { first_leaf: 1000 }));
        let t = grown(4 * 340 + 1);
        assert_eq!(t.depth(), 2);
        assert_eq!(
            t.blocks().collect::<Vec<_>>(),
            [1000, 1001, 1002, 1003, 1005, 1004]
        );
    }

    #[test]
    fn truncate_frees_empty_leaves_and_everything_at_zero() {
        let mut t = grown(4 * 340 + 1);
        assert_eq!(t.shrink(700), vec![1003, 1005]);
        assert_eq!(t.depth(), 2, "the depth stays");
        assert_eq!(t.shrink(0), vec![1000, 1001, 1002, 1004]);
        assert_eq!(t.depth(), 0);
        // A depth-1 tree keeps its leaf while it holds any extent.
        let mut t = grown(5);
        assert!(t.shrink(2).is_empty());
        assert_eq!(t.merge_up(3), Some(1000));
        assert_eq!(t.depth(), 0);
        assert_eq!(grown(5).merge_up(5), None);
    }
}
