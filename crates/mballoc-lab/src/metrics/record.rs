//! Convenience bundles: every free-space metric of one state, and every file metric of one set
//! of files, so a run can be summarised (and written as JSON/CSV) with one call.

use super::bluestore::{bluestore_scores, BlueStoreScores};
use super::e4defrag::{e4defrag_score, E4DefragScore};
use super::error::MetricsError;
use super::extent_sizes::{extent_sizes, ExtentSizes};
use super::extfrag::{extfrag_of_space, ExtfragIndices};
use super::filefrag::{file_extents, FileExtents};
use super::files::FileExtent;
use super::frag_pct::{fsperf_frag, FragPct};
use super::free_space::{FreeSpace, RunScope};
use super::freefrag::{e2freefrag, FreeFrag, FreeFragOptions};
use super::layout::{layout_score, LayoutScore};
use super::xfs::{xfs_frag, xfs_freesp, XfsFrag, XfsFreesp};
use serde::Serialize;

/// M2, M4, M8, M9 (freesp) and M11 of one free-space state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreeSpaceReport {
    /// M2 (fsperf).
    pub fsperf: FragPct,
    /// M4 (e2freefrag, default options).
    pub e2freefrag: FreeFrag,
    /// M8 (BlueStore, device-wide runs).
    pub bluestore: BlueStoreScores,
    /// M9 freesp.
    pub xfs_freesp: XfsFreesp,
    /// M11.
    pub extfrag: ExtfragIndices,
}

/// Computes every free-space metric of `space` with default options.
pub fn free_space_report(space: &FreeSpace) -> Result<FreeSpaceReport, MetricsError> {
    Ok(FreeSpaceReport {
        fsperf: fsperf_frag(space),
        e2freefrag: e2freefrag(space, &FreeFragOptions::default())?,
        bluestore: bluestore_scores(space, RunScope::Device),
        xfs_freesp: xfs_freesp(space),
        extfrag: extfrag_of_space(space),
    })
}

/// M5, M6, M9 (frag), M10 and the extent-size distribution of one set of files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileReport {
    /// M5 (filefrag).
    pub filefrag: FileExtents,
    /// M6 (e4defrag -c).
    pub e4defrag: E4DefragScore,
    /// M9 frag.
    pub xfs_frag: XfsFrag,
    /// M10 static layout score.
    pub layout: LayoutScore,
    /// Extent-size distribution.
    pub extent_sizes: ExtentSizes,
}

/// Computes every file metric; `groups_per_flex` is 1 without flex_bg (ext4 default: 16).
pub fn file_report(
    files: &[Vec<FileExtent>],
    blocks_per_group: u32,
    groups_per_flex: u32,
    block_size: u32,
) -> Result<FileReport, MetricsError> {
    Ok(FileReport {
        filefrag: file_extents(files, block_size)?,
        e4defrag: e4defrag_score(files, blocks_per_group, groups_per_flex, block_size)?,
        xfs_frag: xfs_frag(files)?,
        layout: layout_score(files)?,
        extent_sizes: extent_sizes(files, block_size)?,
    })
}
