//! `initial_state.json`: geometry and the exact free space when the traced mount started.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::bitmap;
use super::error::CaseError;

/// The file system as the trace found it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct InitialState {
    pub block_size: u32,
    pub cluster_size: u32,
    pub blocks_count: u64,
    pub blocks_per_group: u32,
    pub group_count: u32,
    pub first_data_block: u64,
    pub flex_bg_size: u32,
    pub inodes_per_group: Option<u32>,
    pub inode_size: Option<u32>,
    /// Root-reserved block count (not a location).
    pub reserved_blocks: Option<u64>,
    pub reserved_gdt_blocks: Option<u32>,
    #[serde(default)]
    pub features: Vec<String>,
    pub journal_inode: Option<u64>,
    /// Free blocks over all groups.
    pub free_blocks_total: u64,
    /// Blocks of root dir, lost+found, resize inode, journal...: name → inclusive ranges.
    #[serde(default)]
    pub special_inode_blocks: BTreeMap<String, Vec<(u64, u64)>>,
    /// Every inode that existed when the trace started, by number.
    #[serde(default)]
    pub inodes: BTreeMap<u64, InodeInfo>,
    pub groups: Vec<GroupState>,
}

/// Size and mode of an inode that existed at the start.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct InodeInfo {
    /// Bytes.
    pub size: u64,
    /// `st_mode`, decimal.
    pub mode: u32,
    pub path: Option<String>,
}

/// One block group at the start of the trace.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct GroupState {
    pub group: u32,
    pub first_block: u64,
    pub blocks: u32,
    /// Free blocks, from the bitmap (checked on load).
    pub free: u32,
    /// The group descriptor's free count.
    pub free_desc: Option<u32>,
    /// BLOCK_UNINIT / INODE_UNINIT / ITABLE_ZEROED.
    #[serde(default)]
    pub flags: Vec<String>,
    /// Free runs `(absolute start, len)`.
    pub free_extents: Vec<(u64, u64)>,
    /// The decoded on-disk block bitmap (`bitmap_b64`).
    #[serde(rename = "bitmap_b64", deserialize_with = "bitmap::from_base64")]
    pub bitmap: Vec<u8>,
    /// Used blocks per owner (superblock, gdt, inode_tables, journal, ...).
    #[serde(default)]
    pub used_by: BTreeMap<String, u64>,
    pub block_bitmap: Option<u64>,
    pub inode_bitmap: Option<u64>,
    /// Inclusive block range of the inode table.
    pub inode_table: Option<(u64, u64)>,
    /// The kernel's buddy summary right after mount.
    pub kernel_mb_groups: Option<KernelMbGroup>,
}

/// `/proc/fs/ext4/<dev>/mb_groups` for one group: what a model's buddy must show.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KernelMbGroup {
    pub free: u32,
    pub frags: u32,
    pub first_free: u32,
    /// Free buddy chunks of order 0..=13.
    pub buddy_counts: Vec<u32>,
}

impl GroupState {
    /// In-use runs `(absolute start, len)` of this group, from its bitmap.
    pub fn used_ranges(&self) -> Vec<(u64, u64)> {
        self.absolute(bitmap::runs(&self.bitmap, self.blocks.into(), true))
    }

    /// Free runs `(absolute start, len)` of this group, from its bitmap.
    pub fn free_ranges(&self) -> Vec<(u64, u64)> {
        self.absolute(bitmap::runs(&self.bitmap, self.blocks.into(), false))
    }

    fn absolute(&self, runs: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
        runs.into_iter()
            .map(|(s, len)| (self.first_block + s, len))
            .collect()
    }

    /// Checks the bitmap against `free` and `free_extents`; `None` if they agree.
    fn inconsistency(&self) -> Option<String> {
        let g = self.group;
        if (self.bitmap.len() as u64) * 8 < u64::from(self.blocks) {
            return Some(format!(
                "group {g}: bitmap has {} bytes, too few for {} blocks",
                self.bitmap.len(),
                self.blocks
            ));
        }
        let free = self.free_ranges();
        let bitmap_free: u64 = free.iter().map(|&(_, len)| len).sum();
        if bitmap_free != u64::from(self.free) {
            return Some(format!(
                "group {g}: free is {} but the bitmap has {bitmap_free} free blocks",
                self.free
            ));
        }
        if free != self.free_extents {
            return Some(format!("group {g}: free_extents disagree with the bitmap"));
        }
        None
    }
}

impl InitialState {
    /// In-use runs `(absolute start, len)` of every group, in block order. Runs are not
    /// merged across group boundaries (a group's bitmap is all a run can come from).
    pub fn used_ranges(&self) -> Vec<(u64, u64)> {
        self.groups
            .iter()
            .flat_map(GroupState::used_ranges)
            .collect()
    }

    /// The groups whose descriptor is `BLOCK_UNINIT` on a filesystem with group descriptor
    /// checksums (`metadata_csum` or `uninit_bg`); without checksums ext4 ignores the flag.
    pub fn block_uninit_groups(&self) -> Vec<u32> {
        let csum = self
            .features
            .iter()
            .any(|f| f == "metadata_csum" || f == "uninit_bg");
        self.groups
            .iter()
            .filter(|g| csum && g.flags.iter().any(|f| f == "BLOCK_UNINIT"))
            .map(|g| g.group)
            .collect()
    }

    /// Whether the filesystem has a journal (`has_journal`); without one a free is reusable
    /// at once.
    pub fn has_journal(&self) -> bool {
        self.features.iter().any(|f| f == "has_journal")
    }

    /// Total in-use blocks.
    pub fn used_blocks(&self) -> u64 {
        self.used_ranges().iter().map(|&(_, len)| len).sum()
    }

    /// The allocator's geometry of this file system: with bigalloc, clusters of
    /// `cluster_size` bytes and `blocks_per_group / ratio` clusters per group.
    pub fn geometry(&self) -> Result<mballoc::Geometry, mballoc::GeometryError> {
        let ratio = (self.cluster_size / self.block_size.max(1)).max(1);
        if !ratio.is_power_of_two() || !self.cluster_size.is_multiple_of(self.block_size.max(1)) {
            return Err(mballoc::GeometryError {
                field: "cluster_size",
                value: self.cluster_size.into(),
                reason: "a power-of-two multiple of the block size",
            });
        }
        let bits = ratio.trailing_zeros();
        mballoc::Geometry::with_clusters(
            self.block_size,
            bits,
            self.blocks_per_group >> bits,
            self.blocks_count,
            self.first_data_block,
            self.flex_bg_size.max(1),
        )
    }

    /// Reads and checks `initial_state.json`.
    pub fn load(file: &Path) -> Result<Self, CaseError> {
        let state: InitialState = super::read_json(file)?;
        state
            .check()
            .map_err(|what| CaseError::inconsistent(file, what))?;
        Ok(state)
    }

    /// Geometry, group sequence, bitmaps vs free counts, and the totals.
    fn check(&self) -> Result<(), String> {
        if self.groups.len() != self.group_count as usize {
            return Err(format!(
                "group_count is {} but there are {} groups",
                self.group_count,
                self.groups.len()
            ));
        }
        let bpg = u64::from(self.blocks_per_group);
        for (i, g) in self.groups.iter().enumerate() {
            // Checked: the numbers come from a file (a hostile one must not overflow).
            let first = (i as u64)
                .checked_mul(bpg)
                .and_then(|o| o.checked_add(self.first_data_block));
            if g.group as usize != i || Some(g.first_block) != first {
                return Err(format!(
                    "group entry {i} is group {} at block {}, expected group {i} at {}",
                    g.group,
                    g.first_block,
                    first.map_or("an overflowing block".into(), |f| f.to_string())
                ));
            }
            // Every group is full-sized but the last, which ends at `blocks_count`.
            let len = self.blocks_count.saturating_sub(g.first_block).min(bpg);
            if u64::from(g.blocks) != len {
                return Err(format!(
                    "group {i} has {} blocks, expected {len} ({} per group, {} in all)",
                    g.blocks, self.blocks_per_group, self.blocks_count
                ));
            }
            if let Some(what) = g.inconsistency() {
                return Err(what);
            }
        }
        self.check_totals()
    }

    fn check_totals(&self) -> Result<(), String> {
        let blocks: u64 = self.groups.iter().map(|g| u64::from(g.blocks)).sum();
        if blocks.checked_add(self.first_data_block) != Some(self.blocks_count) {
            return Err(format!(
                "blocks_count is {} but the groups hold {blocks} blocks",
                self.blocks_count
            ));
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
