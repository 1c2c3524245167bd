//! M10 — layout scores from the aging literature.
//!
//! Static layout score (Smith & Seltzer, SIGMETRICS'97): over a file's blocks in logical order,
//! the fraction of blocks that have a predecessor and sit at `physical(previous) + 1`; 1.0 is
//! perfectly contiguous. The aggregate is `Σ contiguous / Σ blocks-with-predecessor` over files.
//! Dynamic layout score (Conway et al., FAST'17): the same fraction over a block I/O trace — the
//! share of requested blocks that follow the previously requested block.

use super::error::MetricsError;
use super::files::{sorted_files, FileExtent};
use serde::Serialize;

/// Static layout score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayoutScore {
    /// Aggregate score (1.0 if no block has a predecessor).
    pub layout_score: f64,
    /// Blocks placed right after their logical predecessor.
    pub contiguous_blocks: u64,
    /// Blocks that have a logical predecessor (blocks − 1 per non-empty file).
    pub blocks_with_predecessor: u64,
    /// Per-file score; `None` for files with fewer than two blocks.
    pub per_file: Vec<Option<f64>>,
}

/// `(contiguous, with_predecessor)` for one file sorted by logical block.
pub fn file_layout_counts(sorted: &[FileExtent]) -> (u64, u64) {
    let blocks: u64 = sorted.iter().map(|e| e.2).sum();
    let within: u64 = sorted.iter().map(|e| e.2 - 1).sum();
    let across = sorted
        .windows(2)
        .filter(|w| w[1].1 == w[0].1 + w[0].2)
        .count() as u64;
    (within + across, blocks.saturating_sub(1))
}

/// Computes the static layout score of `files`.
pub fn layout_score(files: &[Vec<FileExtent>]) -> Result<LayoutScore, MetricsError> {
    let files = sorted_files(files)?;
    let counts: Vec<(u64, u64)> = files.iter().map(|f| file_layout_counts(f)).collect();
    let contiguous = counts.iter().map(|c| c.0).sum();
    let with_pred = counts.iter().map(|c| c.1).sum();
    Ok(LayoutScore {
        layout_score: fraction(contiguous, with_pred),
        contiguous_blocks: contiguous,
        blocks_with_predecessor: with_pred,
        per_file: counts
            .iter()
            .map(|&(c, p)| (p > 0).then(|| c as f64 / p as f64))
            .collect(),
    })
}

/// Dynamic layout score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DynamicLayoutScore {
    /// Fraction of requested blocks contiguous with the previous one (1.0 for < 2 blocks).
    pub dynamic_layout_score: f64,
    /// Blocks following their predecessor in the trace.
    pub contiguous_blocks: u64,
    /// Requested blocks minus one.
    pub blocks_with_predecessor: u64,
}

/// Computes the dynamic layout score of a trace of `(physical_block, len)` requests in issue
/// order. Zero-length requests are skipped.
pub fn dynamic_layout_score(trace: &[(u64, u64)]) -> DynamicLayoutScore {
    let reqs: Vec<(u64, u64)> = trace.iter().copied().filter(|r| r.1 > 0).collect();
    let blocks: u64 = reqs.iter().map(|r| r.1).sum();
    let within: u64 = reqs.iter().map(|r| r.1 - 1).sum();
    let across = reqs
        .windows(2)
        .filter(|w| Some(w[1].0) == w[0].0.checked_add(w[0].1))
        .count() as u64;
    let with_pred = blocks.saturating_sub(1);
    DynamicLayoutScore {
        dynamic_layout_score: fraction(within + across, with_pred),
        contiguous_blocks: within + across,
        blocks_with_predecessor: with_pred,
    }
}

fn fraction(a: u64, b: u64) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}
