//! M4 — free-extent report, as e2freefrag (`misc/e2freefrag.c`) prints it.
//!
//! e2freefrag's offline scan walks the block bitmap; free extents are maximal runs of free
//! blocks, not broken at group boundaries (`RunScope::Device`; the online FSMAP path reports per
//! group, `RunScope::PerGroup`). Per extent of `n` blocks: histogram bucket `⌊log2 n⌋ + 1`,
//! min/max/sum. Reported: `Min./Max. free extent` in KB (`blocks · (bs >> 10)`),
//! `Avg. free extent = (Σn / count) · (bs >> 10)` with integer division, `Num. free extent`,
//! and per chunk size (`-c`, default 1 MiB): `Total chunks = (blocks + blks_per_chunk) >>
//! log2(blks_per_chunk)` (sic) and `Free chunks` = chunk-aligned chunks whose blocks are all free.
//! We add the "% of free space in extents ≥ 8 MiB" figure the ext4 fallocate commit quotes.

use super::error::MetricsError;
use super::free_space::{FreeSpace, RunScope};
use super::log2_hist::{histogram, percent, SizeBucket};
use serde::Serialize;
use std::fmt::Write as _;

/// e2freefrag's default chunk size (1 MiB).
pub const DEFAULT_CHUNK_BYTES: u64 = 1 << 20;
const EIGHT_MIB: u64 = 8 << 20;

/// Options of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreeFragOptions {
    /// Chunk sizes in bytes to count free chunks for (e2freefrag `-c`, one run per size).
    pub chunk_bytes: Vec<u64>,
    /// Whether runs merge across group boundaries (offline scan: `Device`).
    pub scope: RunScope,
}

impl Default for FreeFragOptions {
    fn default() -> Self {
        Self {
            chunk_bytes: vec![DEFAULT_CHUNK_BYTES],
            scope: RunScope::Device,
        }
    }
}

/// Free-chunk counts for one chunk size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChunkCount {
    /// Chunk size in bytes.
    pub chunk_bytes: u64,
    /// Blocks per chunk.
    pub chunk_blocks: u64,
    /// e2freefrag's `Total chunks`.
    pub total_chunks: u64,
    /// Chunk-aligned chunks entirely free.
    pub free_chunks: u64,
    /// `free_chunks · 100 / total_chunks`.
    pub free_chunks_pct: f64,
}

/// The e2freefrag report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreeFrag {
    /// Block size in bytes.
    pub block_size: u32,
    /// Blocks on the device.
    pub total_blocks: u64,
    /// Free blocks.
    pub free_blocks: u64,
    /// `free_blocks · 100 / total_blocks`.
    pub free_pct: f64,
    /// One entry per requested chunk size.
    pub chunks: Vec<ChunkCount>,
    /// Smallest free extent in KB (0 if none).
    pub min_free_extent_kb: u64,
    /// Largest free extent in KB.
    pub max_free_extent_kb: u64,
    /// `(Σ blocks / count) · (bs >> 10)`, integer arithmetic as e2freefrag.
    pub avg_free_extent_kb: u64,
    /// Number of free extents.
    pub num_free_extent: u64,
    /// Non-empty buckets of `HISTOGRAM OF FREE EXTENT SIZES`.
    pub histogram: Vec<SizeBucket>,
    /// Percentage of free blocks that lie in extents of at least 8 MiB.
    pub free_pct_in_extents_ge_8mib: f64,
}

/// Computes the e2freefrag report of `space`.
pub fn e2freefrag(space: &FreeSpace, opts: &FreeFragOptions) -> Result<FreeFrag, MetricsError> {
    let bs = space.block_size();
    let runs = space.runs(opts.scope);
    let lens: Vec<u64> = runs.iter().map(|r| r.1).collect();
    let free = space.free_blocks();
    let total = space.total_blocks();
    let chunks = opts
        .chunk_bytes
        .iter()
        .map(|&c| chunk_count(space, c))
        .collect::<Result<Vec<_>, _>>()?;
    let kb = u64::from(bs >> 10);
    let count = lens.len() as u64;
    let sum: u64 = lens.iter().sum();
    let big_blocks = EIGHT_MIB.div_ceil(u64::from(bs));
    let in_big: u64 = lens.iter().filter(|&&n| n >= big_blocks).sum();
    Ok(FreeFrag {
        block_size: bs,
        total_blocks: total,
        free_blocks: free,
        free_pct: percent(free, total),
        chunks,
        min_free_extent_kb: lens.iter().min().copied().unwrap_or(0) * kb,
        max_free_extent_kb: lens.iter().max().copied().unwrap_or(0) * kb,
        avg_free_extent_kb: sum.checked_div(count).unwrap_or(0) * kb,
        num_free_extent: count,
        histogram: histogram(lens.iter().copied(), space.block_size_bits(), free),
        free_pct_in_extents_ge_8mib: percent(in_big, free),
    })
}

/// Free chunks of `chunk_bytes`: chunks are aligned to block 0 of the device and counted from
/// the bitmap regardless of groups (e2freefrag's offline scan), so device-wide runs are used.
fn chunk_count(space: &FreeSpace, chunk_bytes: u64) -> Result<ChunkCount, MetricsError> {
    let bs = u64::from(space.block_size());
    if !chunk_bytes.is_power_of_two() || chunk_bytes < bs {
        return Err(MetricsError::BadChunkSize {
            chunk_bytes,
            block_size: space.block_size(),
        });
    }
    let per = chunk_bytes / bs;
    let total_chunks = (space.total_blocks() + per) >> per.trailing_zeros();
    let free_chunks = space
        .runs(RunScope::Device)
        .iter()
        .map(|&(s, l)| ((s + l) / per).saturating_sub(s.div_ceil(per)))
        .sum();
    Ok(ChunkCount {
        chunk_bytes,
        chunk_blocks: per,
        total_chunks,
        free_chunks,
        free_chunks_pct: percent(free_chunks, total_chunks),
    })
}

impl FreeFrag {
    /// The report in e2freefrag's text layout (from `Total blocks:` on; no device line).
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "Total blocks: {}\nFree blocks: {} ({:.1}%)\n",
            self.total_blocks, self.free_blocks, self.free_pct
        );
        for c in &self.chunks {
            let _ = write!(
                s,
                "\nChunksize: {} bytes ({} blocks)\nTotal chunks: {}\nFree chunks: {} ({:.1}%)\n",
                c.chunk_bytes, c.chunk_blocks, c.total_chunks, c.free_chunks, c.free_chunks_pct
            );
        }
        let _ = write!(
            s,
            "\nMin. free extent: {} KB \nMax. free extent: {} KB\nAvg. free extent: {} KB\n\
             Num. free extent: {}\n\nHISTOGRAM OF FREE EXTENT SIZES:\n",
            self.min_free_extent_kb,
            self.max_free_extent_kb,
            self.avg_free_extent_kb,
            self.num_free_extent
        );
        // e2freefrag: "%s :  %12s  %12s  %7s" with the four column titles.
        s.push_str("Extent Size Range :  Free extents   Free Blocks  Percent\n");
        for b in &self.histogram {
            let _ = writeln!(s, "{}", render_bucket(b));
        }
        s
    }
}

/// One histogram line: `%5lu%c...%7s  :  %12lu  %12lu  %6.2f%%`.
fn render_bucket(b: &SizeBucket) -> String {
    let (start, end) = b.range.split_once("...").unwrap_or((&b.range, ""));
    let end = if end == "max" { "max " } else { end };
    format!(
        "{:>6}...{:>7}  :  {:>12}  {:>12}  {:>6.2}%",
        start, end, b.extents, b.blocks, b.percent
    )
}
