//! Extent-size distribution of allocated space ("average extent size" and the share of data in
//! large extents, the figures allocator patches quote), bucketed like e2freefrag's histogram so that free-space and
//! allocated-space plots line up. Extents are the physically contiguous runs filefrag counts.

use super::error::MetricsError;
use super::filefrag::merged_runs;
use super::files::{sorted_files, FileExtent};
use super::log2_hist::{histogram, percent, SizeBucket};
use serde::Serialize;

/// Distribution of file extent sizes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExtentSizes {
    /// Extents (filefrag runs) over all files.
    pub extents: u64,
    /// Blocks in them.
    pub blocks: u64,
    /// Mean extent size in blocks.
    pub avg_extent_blocks: f64,
    /// Smallest extent in blocks (0 if none).
    pub min_extent_blocks: u64,
    /// Largest extent in blocks.
    pub max_extent_blocks: u64,
    /// Non-empty power-of-two buckets; `percent` is of all file blocks.
    pub histogram: Vec<SizeBucket>,
    /// Percentage of file blocks in extents of at least 8 MiB.
    pub pct_blocks_in_extents_ge_8mib: f64,
}

/// Computes the distribution of `files`' extent sizes.
pub fn extent_sizes(
    files: &[Vec<FileExtent>],
    block_size: u32,
) -> Result<ExtentSizes, MetricsError> {
    super::free_space::check_block_size(block_size)?;
    let lens: Vec<u64> = sorted_files(files)?
        .iter()
        .flat_map(|f| merged_runs(f).into_iter().map(|r| r.2))
        .collect();
    let blocks: u64 = lens.iter().sum();
    let big = (8u64 << 20).div_ceil(u64::from(block_size));
    let in_big: u64 = lens.iter().filter(|&&l| l >= big).sum();
    let n = lens.len() as u64;
    Ok(ExtentSizes {
        extents: n,
        blocks,
        avg_extent_blocks: if n == 0 {
            0.0
        } else {
            blocks as f64 / n as f64
        },
        min_extent_blocks: lens.iter().min().copied().unwrap_or(0),
        max_extent_blocks: lens.iter().max().copied().unwrap_or(0),
        histogram: histogram(lens.iter().copied(), block_size.trailing_zeros(), blocks),
        pct_blocks_in_extents_ge_8mib: percent(in_big, blocks),
    })
}
