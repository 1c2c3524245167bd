//! M6 — the `e4defrag -c` fragmentation score (e2fsprogs `misc/e4defrag.c`).
//!
//! Per file with blocks: `now` = number of FIEMAP records (`get_logical_count`, no merging),
//! `best = ⌊(blocks − 1) / (blocks_per_group · groups_per_flex)⌋ + 1` (`get_best_count`; without
//! flex_bg `groups_per_flex = 1`). Over all files: `ratio = (Σnow − Σbest) · 100 / Σblocks`,
//! `score = ratio > 10 ? 80 + 20·ratio/100 : 8·ratio` (`CALC_SCORE`; 0–30 "no problem", 31–55
//! "a little bit fragmented", > 55 "needs defrag"), `Average size per extent =
//! Σblocks · (bs / 1024) / Σnow` KB in integer arithmetic.

use super::error::MetricsError;
use super::files::{file_blocks, sorted_files, FileExtent};
use serde::Serialize;

/// e4defrag's `BOUND_SCORE`: a score above it "needs defragmentation".
pub const BOUND_SCORE: f64 = 55.0;

/// The e4defrag -c summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct E4DefragScore {
    /// Files with at least one block (e4defrag skips empty files).
    pub files: u64,
    /// Σ now ("Total extents").
    pub total_extents: u64,
    /// Σ best ("best extents").
    pub best_extents: u64,
    /// Σ blocks.
    pub total_blocks: u64,
    /// `(Σnow − Σbest) · 100 / Σblocks`.
    pub ratio: f64,
    /// `CALC_SCORE(ratio)`.
    pub score: f64,
    /// "Average size per extent" in KB (integer division).
    pub avg_size_per_extent_kb: u64,
    /// `score > 55`.
    pub needs_defrag: bool,
}

/// e4defrag's best extent count for a file of `blocks` blocks.
pub fn best_count(blocks: u64, blocks_per_group: u32, groups_per_flex: u32) -> u64 {
    let span = u64::from(blocks_per_group) * u64::from(groups_per_flex);
    match (blocks, span) {
        (0, _) | (_, 0) => 0,
        _ => (blocks - 1) / span + 1,
    }
}

/// `CALC_SCORE`.
pub fn calc_score(ratio: f64) -> f64 {
    if ratio > 10.0 {
        80.0 + 20.0 * ratio / 100.0
    } else {
        8.0 * ratio
    }
}

/// Computes the score over `files`. `groups_per_flex` is `1 << s_log_groups_per_flex` (use 1
/// without flex_bg).
pub fn e4defrag_score(
    files: &[Vec<FileExtent>],
    blocks_per_group: u32,
    groups_per_flex: u32,
    block_size: u32,
) -> Result<E4DefragScore, MetricsError> {
    super::free_space::check_block_size(block_size)?;
    if blocks_per_group == 0 {
        return Err(MetricsError::ZeroBlocksPerGroup);
    }
    if !groups_per_flex.is_power_of_two() {
        return Err(MetricsError::BadGroupsPerFlex(groups_per_flex));
    }
    let files = sorted_files(files)?;
    let (mut n, mut now, mut best, mut blocks) = (0u64, 0u64, 0u64, 0u64);
    for f in files.iter().filter(|f| file_blocks(f) > 0) {
        let b = file_blocks(f);
        n += 1;
        now += f.len() as u64;
        best += best_count(b, blocks_per_group, groups_per_flex);
        blocks += b;
    }
    let ratio = if blocks == 0 {
        0.0
    } else {
        (now as f64 - best as f64) * 100.0 / blocks as f64
    };
    let score = calc_score(ratio);
    Ok(E4DefragScore {
        files: n,
        total_extents: now,
        best_extents: best,
        total_blocks: blocks,
        ratio,
        score,
        avg_size_per_extent_kb: (blocks * u64::from(block_size / 1024))
            .checked_div(now)
            .unwrap_or(0),
        needs_defrag: score > BOUND_SCORE,
    })
}
