//! M9 — XFS-style metrics from `xfs_db` (`db/frag.c`, `db/freesp.c`).
//!
//! `frag`: `actual` = number of extent records, `ideal` = number of logically contiguous runs (a
//! run starts at the first record and wherever `startoff ≠ prev.startoff + prev.blockcount`, so
//! only holes split it); `fragmentation factor = (actual − ideal) · 100 / actual` (0 if no
//! records) and "average extents per file" = `actual / ideal`.
//! `freesp`: per allocation group (here: per group, runs never cross groups) a histogram of free
//! extents with power-of-two bins `[2^i, 2^(i+1) − 1]` (the last capped at the group size),
//! printing only non-empty bins, `pct = blocks · 100 / total_free_blocks`, and the `-s` totals.

use super::error::MetricsError;
use super::files::{sorted_files, FileExtent};
use super::free_space::{FreeSpace, RunScope};
use super::log2_hist::percent;
use serde::Serialize;

/// `xfs_db frag` output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct XfsFrag {
    /// Extent records.
    pub actual: u64,
    /// Logically contiguous runs.
    pub ideal: u64,
    /// `(actual − ideal) · 100 / actual`.
    pub frag_factor_pct: f64,
    /// `actual / ideal` ("Files on this filesystem average N extents per file").
    pub avg_extents_per_file: f64,
}

/// Number of logically contiguous runs of one file (records sorted by logical block).
pub fn ideal_runs(sorted: &[FileExtent]) -> u64 {
    let breaks = sorted
        .windows(2)
        .filter(|w| w[1].0 != w[0].0 + w[0].2)
        .count();
    if sorted.is_empty() {
        0
    } else {
        breaks as u64 + 1
    }
}

/// Computes `xfs_db frag` over `files`.
pub fn xfs_frag(files: &[Vec<FileExtent>]) -> Result<XfsFrag, MetricsError> {
    let files = sorted_files(files)?;
    let actual: u64 = files.iter().map(|f| f.len() as u64).sum();
    let ideal: u64 = files.iter().map(|f| ideal_runs(f)).sum();
    Ok(XfsFrag {
        actual,
        ideal,
        frag_factor_pct: if actual == 0 {
            0.0
        } else {
            (actual - ideal) as f64 * 100.0 / actual as f64
        },
        avg_extents_per_file: if ideal == 0 {
            0.0
        } else {
            actual as f64 / ideal as f64
        },
    })
}

/// One `freesp` bin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreespBin {
    /// Smallest length in the bin.
    pub from: u64,
    /// Largest length in the bin.
    pub to: u64,
    /// Free extents in the bin.
    pub extents: u64,
    /// Free blocks in those extents.
    pub blocks: u64,
    /// `blocks · 100 / total_free_blocks`.
    pub pct: f64,
}

/// `xfs_db freesp -s` output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct XfsFreesp {
    /// Non-empty bins, ascending.
    pub bins: Vec<FreespBin>,
    /// Total free extents.
    pub total_free_extents: u64,
    /// Total free blocks.
    pub total_free_blocks: u64,
    /// `total_free_blocks / total_free_extents`.
    pub average_free_extent_size: f64,
}

/// Computes `freesp` with power-of-two bins over every group.
pub fn xfs_freesp(space: &FreeSpace) -> XfsFreesp {
    let bpg = u64::from(space.blocks_per_group());
    let mut bins = [(0u64, 0u64); 64];
    for (_, len) in space.runs(RunScope::PerGroup) {
        let b = &mut bins[len.ilog2() as usize];
        b.0 += 1;
        b.1 += len;
    }
    let total_blocks = space.free_blocks();
    let total_extents: u64 = bins.iter().map(|b| b.0).sum();
    let out = bins
        .iter()
        .enumerate()
        .filter(|(_, b)| b.0 > 0)
        .map(|(i, &(extents, blocks))| FreespBin {
            from: 1 << i,
            to: ((1u64 << i) * 2 - 1).min(bpg),
            extents,
            blocks,
            pct: percent(blocks, total_blocks),
        })
        .collect();
    XfsFreesp {
        bins: out,
        total_free_extents: total_extents,
        total_free_blocks: total_blocks,
        average_free_extent_size: if total_extents == 0 {
            0.0
        } else {
            total_blocks as f64 / total_extents as f64
        },
    }
}
