//! M5 — extents per file, counted as e2fsprogs' `filefrag` counts them.
//!
//! filefrag (`misc/filefrag.c`, `filefrag_fiemap`) walks the FIEMAP records in logical order,
//! remembering the previous record `last` (initially all zeros). A record starts a new extent
//! only if `logical ≠ 0` and `physical ≠ last.physical + (logical − last.logical)` and
//! `physical ≠ last.physical + last.len`; otherwise it continues the current one (and the first
//! record always makes the count at least 1). So records that are physically contiguous — e.g.
//! ext4's 32,768-block extent splits, or one allocation per append landing back to back — count
//! once. Baokun Li's "avg. extents per file" is the mean of this count; his "average extent
//! size" is total blocks over total counted extents.

use super::error::MetricsError;
use super::files::{file_blocks, sorted_files, FileExtent};
use serde::Serialize;

/// filefrag's count for one file's records, already sorted by logical block.
pub fn filefrag_count(sorted: &[FileExtent]) -> u64 {
    merged_runs(sorted).len() as u64
}

/// The physically contiguous runs filefrag sees, as `(first_logical, first_physical, blocks)`:
/// consecutive records are merged exactly when filefrag would not count a new extent.
pub fn merged_runs(sorted: &[FileExtent]) -> Vec<FileExtent> {
    let mut runs: Vec<FileExtent> = Vec::new();
    let mut last: FileExtent = (0, 0, 0);
    for &rec in sorted {
        let (logical, physical, len) = rec;
        let expected = last.1.wrapping_add(logical.wrapping_sub(last.0));
        let expected_dense = last.1.wrapping_add(last.2);
        let new_extent = logical != 0 && physical != expected && physical != expected_dense;
        match runs.last_mut() {
            Some(run) if !new_extent => run.2 += len,
            _ => runs.push(rec),
        }
        last = rec;
    }
    runs
}

/// How many files have a given extent count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExtentCountBucket {
    /// filefrag extent count.
    pub extents: u64,
    /// Files with exactly that many extents.
    pub files: u64,
}

/// M5 summary over a set of files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileExtents {
    /// Number of files (files with no extents count, with 0 extents).
    pub files: u64,
    /// Σ filefrag counts.
    pub total_extents: u64,
    /// Mean filefrag count per file ("Avg. extents per file").
    pub extents_per_file: f64,
    /// Largest filefrag count.
    pub extents_per_file_max: u64,
    /// Files per extent count, ascending.
    pub extents_per_file_distribution: Vec<ExtentCountBucket>,
    /// Σ mapped blocks.
    pub total_blocks: u64,
    /// `total_blocks · bs / 1024 / total_extents` (KiB).
    pub avg_extent_size_kb: f64,
    /// filefrag count of each file, in input order.
    pub per_file_extents: Vec<u64>,
}

/// Computes M5 over `files` with `block_size`-byte blocks.
pub fn file_extents(
    files: &[Vec<FileExtent>],
    block_size: u32,
) -> Result<FileExtents, MetricsError> {
    super::free_space::check_block_size(block_size)?;
    let files = sorted_files(files)?;
    let per_file: Vec<u64> = files.iter().map(|f| filefrag_count(f)).collect();
    let total_extents: u64 = per_file.iter().sum();
    let total_blocks: u64 = files.iter().map(|f| file_blocks(f)).sum();
    let n = per_file.len() as u64;
    Ok(FileExtents {
        files: n,
        total_extents,
        extents_per_file: ratio(total_extents as f64, n as f64),
        extents_per_file_max: per_file.iter().max().copied().unwrap_or(0),
        extents_per_file_distribution: distribution(&per_file),
        total_blocks,
        avg_extent_size_kb: ratio(
            total_blocks as f64 * f64::from(block_size) / 1024.0,
            total_extents as f64,
        ),
        per_file_extents: per_file,
    })
}

fn distribution(per_file: &[u64]) -> Vec<ExtentCountBucket> {
    let mut map = std::collections::BTreeMap::<u64, u64>::new();
    for &c in per_file {
        *map.entry(c).or_default() += 1;
    }
    map.into_iter()
        .map(|(extents, files)| ExtentCountBucket { extents, files })
        .collect()
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}
