//! The free-space input shared by the free-space metrics (M2, M4, M7, M8, M9, M11).
//!
//! Free space is plain data: per group, the free extents `(start_in_group, len)` in blocks, plus
//! the geometry (blocks per group, block size). It can come from the allocator, from a kernel
//! capture (e.g. a dumped block bitmap) or be written by hand. The constructor validates it and
//! normalises every group to *maximal* free runs (sorted, touching extents merged), because all
//! the tools we imitate (fsperf, e2freefrag, ext4's buddy, BlueStore) look at maximal runs.

use super::error::MetricsError;

/// A free extent inside one group: `(start_in_group, len)` in blocks.
pub type GroupExtent = (u32, u32);

/// Whether free runs that touch across a group boundary count as one run.
///
/// e2freefrag's offline bitmap scan ignores group boundaries (`Device`); ext4 itself, fsperf
/// (per block group) and xfs_db freesp (per AG) never merge across them (`PerGroup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum RunScope {
    /// One run per maximal free run inside a group.
    PerGroup,
    /// Runs that end at a group's last block and continue at the next group's block 0 merge.
    #[default]
    Device,
}

/// Validated free space of a device made of equal-sized groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreeSpace {
    block_size: u32,
    blocks_per_group: u32,
    groups: Vec<Vec<GroupExtent>>,
}

/// Checks that `block_size` is a power of two in the ext4 range 1 KiB..=64 KiB.
pub fn check_block_size(block_size: u32) -> Result<(), MetricsError> {
    if block_size.is_power_of_two() && (1024..=65536).contains(&block_size) {
        Ok(())
    } else {
        Err(MetricsError::BadBlockSize(block_size))
    }
}

impl FreeSpace {
    /// Builds free space from per-group free extents. Extents may be unsorted and may touch
    /// (they are merged); zero-length, overlapping or out-of-group extents are errors.
    pub fn from_extents(
        groups: &[Vec<GroupExtent>],
        blocks_per_group: u32,
        block_size: u32,
    ) -> Result<Self, MetricsError> {
        check_geometry(blocks_per_group, block_size)?;
        let groups = groups
            .iter()
            .enumerate()
            .map(|(g, ext)| normalise_group(g, ext, blocks_per_group))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            block_size,
            blocks_per_group,
            groups,
        })
    }

    /// Builds free space from per-group block bitmaps in ext4's on-disk convention: bit `i` of
    /// the group (byte `i / 8`, bit `i % 8`, least significant first) is 1 when block `i` is in
    /// use. Bits past `blocks_per_group` are ignored.
    pub fn from_bitmaps(
        bitmaps: &[Vec<u8>],
        blocks_per_group: u32,
        block_size: u32,
    ) -> Result<Self, MetricsError> {
        check_geometry(blocks_per_group, block_size)?;
        let need = blocks_per_group.div_ceil(8) as usize;
        let mut groups = Vec::with_capacity(bitmaps.len());
        for (group, bits) in bitmaps.iter().enumerate() {
            if bits.len() < need {
                return Err(MetricsError::BitmapTooShort {
                    group,
                    got: bits.len(),
                    need,
                });
            }
            groups.push(bitmap_runs(bits, blocks_per_group));
        }
        Ok(Self {
            block_size,
            blocks_per_group,
            groups,
        })
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// log2 of the block size (10..=16).
    pub fn block_size_bits(&self) -> u32 {
        self.block_size.trailing_zeros()
    }

    /// Blocks in every group.
    pub fn blocks_per_group(&self) -> u32 {
        self.blocks_per_group
    }

    /// Number of groups.
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Blocks on the device (`groups * blocks_per_group`).
    pub fn total_blocks(&self) -> u64 {
        self.groups.len() as u64 * u64::from(self.blocks_per_group)
    }

    /// The maximal free runs of group `g`, sorted by start (empty if `g` is out of range).
    pub fn group(&self, g: usize) -> &[GroupExtent] {
        self.groups.get(g).map_or(&[], Vec::as_slice)
    }

    /// All groups' maximal free runs.
    pub fn groups(&self) -> &[Vec<GroupExtent>] {
        &self.groups
    }

    /// Free blocks in group `g`.
    pub fn group_free(&self, g: usize) -> u64 {
        self.group(g).iter().map(|&(_, l)| u64::from(l)).sum()
    }

    /// Free blocks on the device.
    pub fn free_blocks(&self) -> u64 {
        (0..self.groups.len()).map(|g| self.group_free(g)).sum()
    }

    /// Free runs as `(absolute_start_block, len)`, in address order, under `scope`.
    pub fn runs(&self, scope: RunScope) -> Vec<(u64, u64)> {
        let bpg = u64::from(self.blocks_per_group);
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (g, ext) in self.groups.iter().enumerate() {
            for &(s, l) in ext {
                let start = g as u64 * bpg + u64::from(s);
                let len = u64::from(l);
                match out.last_mut() {
                    Some(last) if scope == RunScope::Device && last.0 + last.1 == start => {
                        last.1 += len;
                    }
                    _ => out.push((start, len)),
                }
            }
        }
        out
    }
}

fn check_geometry(blocks_per_group: u32, block_size: u32) -> Result<(), MetricsError> {
    check_block_size(block_size)?;
    if blocks_per_group == 0 {
        return Err(MetricsError::ZeroBlocksPerGroup);
    }
    Ok(())
}

/// Sorts, validates and merges one group's extents into maximal runs.
fn normalise_group(
    group: usize,
    extents: &[GroupExtent],
    blocks_per_group: u32,
) -> Result<Vec<GroupExtent>, MetricsError> {
    let mut sorted = extents.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<GroupExtent> = Vec::with_capacity(sorted.len());
    for (start, len) in sorted {
        check_extent(group, start, len, blocks_per_group)?;
        match out.last_mut() {
            Some(last) if last.0 + last.1 > start => {
                return Err(MetricsError::OverlappingExtents {
                    group,
                    first: last.0,
                    second: start,
                });
            }
            Some(last) if last.0 + last.1 == start => last.1 += len,
            _ => out.push((start, len)),
        }
    }
    Ok(out)
}

fn check_extent(group: usize, start: u32, len: u32, bpg: u32) -> Result<(), MetricsError> {
    if len == 0 {
        return Err(MetricsError::ZeroLengthExtent { group, start });
    }
    if u64::from(start) + u64::from(len) > u64::from(bpg) {
        return Err(MetricsError::ExtentBeyondGroup {
            group,
            start,
            len,
            blocks_per_group: bpg,
        });
    }
    Ok(())
}

/// Maximal runs of zero bits in the first `nbits` bits of an ext4-style bitmap.
pub(crate) fn bitmap_runs(bits: &[u8], nbits: u32) -> Vec<GroupExtent> {
    let mut runs = Vec::new();
    let mut run_start: Option<u32> = None;
    for i in 0..nbits {
        let used = bits[(i / 8) as usize] & (1 << (i % 8)) != 0;
        match (used, run_start) {
            (false, None) => run_start = Some(i),
            (true, Some(s)) => {
                runs.push((s, i - s));
                run_start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = run_start {
        runs.push((s, nbits - s));
    }
    runs
}
