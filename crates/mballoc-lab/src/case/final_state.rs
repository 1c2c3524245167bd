//! `final_state.json`: free space on disk after the workload and umount, to check a replay.

use std::path::Path;

use serde::Deserialize;

use super::error::CaseError;

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

    fn check(&self) -> Result<(), String> {
        if self.groups.len() != self.group_count as usize {
            return Err(format!(
                "group_count is {} but there are {} groups",
                self.group_count,
                self.groups.len()
            ));
        }
        for g in &self.groups {
            let sum: u64 = g.free_extents.iter().map(|&(_, len)| len).sum();
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
}
