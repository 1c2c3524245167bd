//! Free-space fragmentation at the end of a benchmark, the same way for every system: the free
//! runs of a linear space of units are cut into ext4-sized groups (so M4 sees what ext4 would)
//! and summarised with the lab's metrics — M4 (e2freefrag) and M8 (BlueStore scores).

use serde::Serialize;

use crate::bench::peer::Run;
use crate::bench::BenchError;
use crate::metrics::bluestore::bluestore_scores;
use crate::metrics::freefrag::{e2freefrag, FreeFragOptions};
use crate::metrics::{FreeSpace, RunScope};

/// The figures reported per system.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FragSummary {
    pub free_blocks: u64,
    /// M4: `Num. free extent` (device-wide runs, as e2freefrag's offline scan).
    pub free_extents: u64,
    /// M4: `Avg. free extent` in KB.
    pub avg_free_extent_kb: u64,
    /// M4: `Max. free extent` in KB.
    pub max_free_extent_kb: u64,
    /// M4: free 1 MiB chunks, percent of all chunks.
    pub free_1mib_chunks_pct: f64,
    /// M4: percent of free space in extents of at least 8 MiB.
    pub free_pct_in_extents_ge_8mib: f64,
    /// M8: BlueStore `get_fragmentation_score()` (0 = one extent … 1 = all single units).
    pub bluestore_score: f64,
    /// M8: BlueStore `get_fragmentation()`, `(E − 1)/(F − 1)`.
    pub bluestore_fragmentation: f64,
}

/// Summarises `free` (absolute runs in address order) over a space of `size` units taken as
/// `block_size`-byte blocks in groups of `per_group`.
pub fn summarise(
    free: &[Run],
    size: u64,
    per_group: u32,
    block_size: u32,
) -> Result<FragSummary, BenchError> {
    let space = to_free_space(free, size, per_group, block_size)?;
    let ff = e2freefrag(&space, &FreeFragOptions::default())?;
    let bs = bluestore_scores(&space, RunScope::Device);
    Ok(FragSummary {
        free_blocks: ff.free_blocks,
        free_extents: ff.num_free_extent,
        avg_free_extent_kb: ff.avg_free_extent_kb,
        max_free_extent_kb: ff.max_free_extent_kb,
        free_1mib_chunks_pct: ff.chunks.first().map_or(0.0, |c| c.free_chunks_pct),
        free_pct_in_extents_ge_8mib: ff.free_pct_in_extents_ge_8mib,
        bluestore_score: bs.fragmentation_score,
        bluestore_fragmentation: bs.fragmentation,
    })
}

/// Cuts absolute runs at group boundaries into per-group extents.
fn to_free_space(
    free: &[Run],
    size: u64,
    per_group: u32,
    block_size: u32,
) -> Result<FreeSpace, BenchError> {
    let bpg = u64::from(per_group);
    let mut groups = vec![Vec::new(); size.div_ceil(bpg) as usize];
    for &(start, len) in free {
        let (mut s, end) = (start, start + u64::from(len));
        while s < end {
            let g = s / bpg;
            let n = (end - s).min(bpg - s % bpg);
            groups[g as usize].push(((s % bpg) as u32, n as u32));
            s += n;
        }
    }
    Ok(FreeSpace::from_extents(&groups, per_group, block_size)?)
}

/// The complement of `used` runs in `[0, size)`: free space as the harness's live set sees it.
pub fn complement(mut used: Vec<Run>, size: u64) -> Vec<Run> {
    used.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0u64;
    for (s, l) in used {
        if s > at {
            push_split(&mut out, at, s - at);
        }
        at = at.max(s + u64::from(l));
    }
    if at < size {
        push_split(&mut out, at, size - at);
    }
    out
}

/// Pushes a run, split so that every piece fits a `u32` length.
fn push_split(out: &mut Vec<Run>, mut s: u64, mut n: u64) {
    while n > 0 {
        let k = n.min(u64::from(u32::MAX));
        out.push((s, k as u32));
        s += k;
        n -= k;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complement_and_summary() {
        let free = complement(vec![(10, 5), (0, 2), (40000, 100)], 65536);
        assert_eq!(free, vec![(2, 8), (15, 39985), (40100, 25436)]);
        let s = summarise(&free, 65536, 32768, 4096).unwrap();
        assert_eq!(s.free_blocks, 65536 - 107);
        // The run across the group boundary at 32768 counts once device-wide.
        assert_eq!(s.free_extents, 3);
        assert!(s.bluestore_score > 0.0 && s.bluestore_score < 1.0);
    }
}
