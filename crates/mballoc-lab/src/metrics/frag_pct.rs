//! M2 — per-group fragmentation percentage, as fsperf's `btrfs-frag-view` computes it.
//!
//! fsperf (`src/frag/src/main.rs`): for each block group, the free extents are the gaps between
//! allocated extents; `frag_pct = 100 · (1 − max_free / total_free)`, 0 when nothing is free.
//! `bg_count` counts every group; only groups holding data are considered, those with
//! `frag_pct == 0` are dropped (that is fsperf's threshold: strictly greater than zero), and
//! `fragmented_bg_count`, `frag_pct_mean/min/p50/p95/p99/max` describe the rest (all 0 if none).
//! p50 is statrs' median; p95/p99 are statrs' R-8 percentiles.

use super::error::MetricsError;
use super::free_space::{FreeSpace, GroupExtent};
use super::quantile::{mean, median, quantile_r8, sorted};
use serde::Serialize;

/// fsperf's fragmentation summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FragPct {
    /// All groups, fragmented or not.
    pub bg_count: usize,
    /// Data groups with `frag_pct > 0`.
    pub fragmented_bg_count: usize,
    /// Mean over the fragmented data groups.
    pub frag_pct_mean: f64,
    /// Minimum over the fragmented data groups.
    pub frag_pct_min: f64,
    /// Median (statrs `median`).
    pub frag_pct_p50: f64,
    /// statrs R-8 95th percentile.
    pub frag_pct_p95: f64,
    /// statrs R-8 99th percentile.
    pub frag_pct_p99: f64,
    /// Maximum.
    pub frag_pct_max: f64,
    /// `frag_pct` of every group, by group number (not filtered).
    pub per_group_frag_pct: Vec<f64>,
}

/// `100 · (1 − max_free / total_free)` for one group's free extents; 0 if none are free.
pub fn group_frag_pct(free: &[GroupExtent]) -> f64 {
    let total: u64 = free.iter().map(|&(_, l)| u64::from(l)).sum();
    let max = free.iter().map(|&(_, l)| u64::from(l)).max().unwrap_or(0);
    if total == 0 {
        return 0.0;
    }
    100.0 * (1.0 - max as f64 / total as f64)
}

/// fsperf statistics, treating every group with at least one used block as a data group
/// (ext4 groups hold data; fsperf keeps only block groups containing a data extent).
pub fn fsperf_frag(space: &FreeSpace) -> FragPct {
    let bpg = u64::from(space.blocks_per_group());
    let is_data: Vec<bool> = (0..space.group_count())
        .map(|g| space.group_free(g) < bpg)
        .collect();
    summarise(space, &is_data)
}

/// fsperf statistics with an explicit data-group mask (one entry per group), for captures that
/// know which groups hold only metadata.
pub fn fsperf_frag_masked(space: &FreeSpace, is_data: &[bool]) -> Result<FragPct, MetricsError> {
    if is_data.len() != space.group_count() {
        return Err(MetricsError::LengthMismatch {
            what: "data-group mask",
            expected: space.group_count(),
            got: is_data.len(),
        });
    }
    Ok(summarise(space, is_data))
}

fn summarise(space: &FreeSpace, is_data: &[bool]) -> FragPct {
    let per_group: Vec<f64> = space.groups().iter().map(|g| group_frag_pct(g)).collect();
    let fragmented: Vec<f64> = per_group
        .iter()
        .zip(is_data)
        .filter(|&(&pct, &data)| data && pct > 0.0)
        .map(|(&pct, _)| pct)
        .collect();
    let s = sorted(&fragmented);
    FragPct {
        bg_count: per_group.len(),
        fragmented_bg_count: s.len(),
        frag_pct_mean: mean(&s),
        frag_pct_min: s.first().copied().unwrap_or(0.0),
        frag_pct_p50: median(&s),
        frag_pct_p95: quantile_r8(&s, 0.95),
        frag_pct_p99: quantile_r8(&s, 0.99),
        frag_pct_max: s.last().copied().unwrap_or(0.0),
        per_group_frag_pct: per_group,
    }
}
