//! Where a virtual-CPU run put its data, in the lab's usual terms: the files' extents at the
//! end of the run (extents per file, mean extent length) and the committed free space of every
//! group (fsperf's `frag_pct` over the groups that hold file data, free extents). The same
//! functions of [`crate::metrics`] as every workload's summary, on the simulated end state.

use mballoc::{Allocator, Extent, Geometry};
use serde::Serialize;

use crate::bench::BenchError;
use crate::metrics::frag_pct::fsperf_frag_masked;
use crate::metrics::free_space::{FreeSpace, GroupExtent};

/// The end state's placement figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Placement {
    /// Files alive at the end (one per CPU).
    pub files: u64,
    /// Extents per file, adjacent pieces merged as the extent tree merges them.
    pub extents_per_file: f64,
    /// Mean extent length, blocks.
    pub mean_extent_blocks: f64,
    /// Groups holding a block of a live file.
    pub data_bg_count: u64,
    /// Data groups whose free space is split (`frag_pct > 0`), and their mean `frag_pct`.
    pub fragmented_bg_count: u64,
    pub frag_pct_mean: f64,
    /// Free extents over the whole file system.
    pub free_extents: u64,
}

/// The placement of `files` (each file's extents, merged) on `a` after a commit.
pub fn placement(
    a: &Allocator,
    geo: &Geometry,
    files: &[Vec<Extent>],
) -> Result<Placement, BenchError> {
    a.commit()?;
    let groups: Vec<Vec<GroupExtent>> = (0..geo.group_count())
        .map(|g| -> Result<Vec<GroupExtent>, BenchError> {
            let len = geo.group_len(g);
            Ok(a.disk_bitmap(g)?.zero_runs(0, len).collect())
        })
        .collect::<Result<_, _>>()?;
    let space = FreeSpace::from_extents(&groups, geo.clusters_per_group(), geo.block_size())?;
    let mut is_data = vec![false; groups.len()];
    for e in files.iter().flatten().filter(|e| e.len > 0) {
        let (first, _) = geo.locate(e.start);
        let (last, _) = geo.locate(e.end() - 1);
        for d in &mut is_data[first as usize..=last as usize] {
            *d = true;
        }
    }
    let frag = fsperf_frag_masked(&space, &is_data)?;
    let extents: usize = files.iter().map(Vec::len).sum();
    let blocks: u64 = files.iter().flatten().map(|e| u64::from(e.len)).sum();
    let per = |x: f64, n: usize| if n > 0 { x / n as f64 } else { 0.0 };
    Ok(Placement {
        files: files.len() as u64,
        extents_per_file: per(extents as f64, files.len()),
        mean_extent_blocks: per(blocks as f64, extents),
        data_bg_count: is_data.iter().filter(|&&d| d).count() as u64,
        fragmented_bg_count: frag.fragmented_bg_count as u64,
        frag_pct_mean: frag.frag_pct_mean,
        free_extents: groups.iter().map(|g| g.len() as u64).sum(),
    })
}
