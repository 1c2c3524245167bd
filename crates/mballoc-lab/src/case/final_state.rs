//! `final_state.json`: free space on disk after the workload and umount, to check a replay.

use std::path::Path;

use serde::Deserialize;

use super::error::CaseError;
use super::initial::InitialState;

/// Free space at the end of the capture.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FinalState {
    pub blocks_count: u64,
    pub group_count: u32,
    pub free_blocks_total: u64,
    pub groups: Vec<FinalGroup>,
}

/// One group's free space at the end.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FinalGroup {
    pub group: u32,
    pub first_block: u64,
    pub blocks: u32,
    pub free: u32,
    /// Free runs `(absolute start, len)`.
    pub free_extents: Vec<(u64, u64)>,
}

impl FinalState {
    /// Reads `final_state.json` and checks that the extents add up to the free counts.
    pub fn load(file: &Path) -> Result<Self, CaseError> {
        let state: FinalState = super::read_json(file)?;
        state
            .check()
            .map_err(|what| CaseError::inconsistent(file, what))?;
        Ok(state)
    }

    /// Group sequence, every free extent inside its group, extents against free counts, and
    /// the total. (Extents inside a group cannot overflow the sum: each is at most the group.)
    fn check(&self) -> Result<(), String> {
        if self.groups.len() != self.group_count as usize {
            return Err(format!(
                "group_count is {} but there are {} groups",
                self.group_count,
                self.groups.len()
            ));
        }
        for (i, g) in self.groups.iter().enumerate() {
            if g.group as usize != i {
                return Err(format!("group entry {i} is group {}", g.group));
            }
            let end = g.first_block.checked_add(u64::from(g.blocks));
            let mut sum = 0u64;
            for &(start, len) in &g.free_extents {
                let inside = start >= g.first_block
                    && start
                        .checked_add(len)
                        .zip(end)
                        .is_some_and(|(e, end)| e <= end);
                if !inside {
                    return Err(format!(
                        "group {}: free extent ({start}, {len}) lies outside its blocks \
                         [{}, +{})",
                        g.group, g.first_block, g.blocks
                    ));
                }
                sum += len;
            }
            if sum != u64::from(g.free) {
                return Err(format!(
                    "group {}: free is {} but free_extents hold {sum} blocks",
                    g.group, g.free
                ));
            }
        }
        let free: u64 = self.groups.iter().map(|g| u64::from(g.free)).sum();
        if free != self.free_blocks_total {
            return Err(format!(
                "free_blocks_total is {} but the groups have {free} free blocks",
                self.free_blocks_total
            ));
        }
        Ok(())
    }

    /// The end state must describe the file system the capture started from: same block
    /// count and the same groups at the same blocks (the replay compares them block by block).
    pub(super) fn check_against(&self, initial: &InitialState) -> Result<(), String> {
        if (self.blocks_count, self.group_count) != (initial.blocks_count, initial.group_count) {
            return Err(format!(
                "{} blocks in {} groups, but the initial state has {} in {}",
                self.blocks_count, self.group_count, initial.blocks_count, initial.group_count
            ));
        }
        for (f, i) in self.groups.iter().zip(&initial.groups) {
            if (f.first_block, f.blocks) != (i.first_block, i.blocks) {
                return Err(format!(
                    "group {} holds [{}, +{}), but [{}, +{}) in the initial state",
                    f.group, f.first_block, f.blocks, i.first_block, i.blocks
                ));
            }
        }
        Ok(())
    }
}
