//! Power-of-two size buckets with e2freefrag's numbering and labels, shared by the free-extent
//! histogram (M4) and the extent-size distribution.
//!
//! e2freefrag (`misc/e2freefrag.c`, `update_chunk_stats`): an extent of `n` blocks goes to bucket
//! `⌊log2 n⌋ + 1`, capped at `MAX_HIST − 1 = 31`. `dump_chunk_info` labels bucket `i` with the
//! byte range `[2^(i−1)·bs, 2^i·bs)` printed as `"4K...8K-"`, switching units K→M→G→T each time
//! the running start reaches 1024, and the last bucket's end as `"max"`.

/// e2freefrag's `MAX_HIST`.
pub const MAX_HIST: usize = 32;

/// Bucket of an extent of `blocks` blocks (`blocks ≥ 1`; 0 maps to bucket 0).
pub fn bucket_index(blocks: u64) -> usize {
    match blocks {
        0 => 0,
        n => ((n.ilog2() + 1) as usize).min(MAX_HIST - 1),
    }
}

/// Smallest extent length (blocks) that falls in bucket `i ≥ 1`: `2^(i−1)`.
pub fn bucket_min_blocks(i: usize) -> u64 {
    if i == 0 {
        0
    } else {
        1u64 << (i - 1).min(63)
    }
}

/// The `(start, end)` labels e2freefrag prints for every bucket, e.g. `("4K", "8K-")` for bucket
/// 1 with 4 KiB blocks; the last bucket's end is `"max"`.
pub fn bucket_labels(block_size_bits: u32) -> Vec<(String, String)> {
    const UNITS: &[u8] = b"KMGTPEZY";
    let mut out = Vec::with_capacity(MAX_HIST);
    let mut start: u64 = 0;
    let mut units: u32 = 10;
    let mut unit = 0usize;
    for i in 0..MAX_HIST {
        let shift = (i as u32 + block_size_bits).saturating_sub(units);
        let end = 1u64 << shift.min(63);
        let u = char::from(UNITS[unit.min(UNITS.len() - 1)]);
        let end_label = if i == MAX_HIST - 1 {
            "max".to_string()
        } else {
            format!("{end}{u}-")
        };
        out.push((format!("{start}{u}"), end_label));
        start = end;
        if start == 1 << 10 {
            start = 1;
            units += 10;
            unit += 1;
        }
    }
    out
}

/// A bucket of a power-of-two histogram.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SizeBucket {
    /// e2freefrag bucket number (`⌊log2 n⌋ + 1`).
    pub index: usize,
    /// e2freefrag's printed range, e.g. `"4K...8K-"`.
    pub range: String,
    /// Smallest length in blocks that lands here.
    pub min_blocks: u64,
    /// Number of extents in the bucket.
    pub extents: u64,
    /// Blocks in those extents.
    pub blocks: u64,
    /// `blocks · 100 / total_blocks_of_all_extents`.
    pub percent: f64,
}

/// Buckets `lengths` (in blocks) and keeps only non-empty buckets, like e2freefrag's output.
/// `percent_of` is the denominator for `percent` (e2freefrag: the free-block count).
pub fn histogram(
    lengths: impl IntoIterator<Item = u64>,
    block_size_bits: u32,
    percent_of: u64,
) -> Vec<SizeBucket> {
    let mut counts = [(0u64, 0u64); MAX_HIST];
    for n in lengths {
        let b = &mut counts[bucket_index(n)];
        b.0 += 1;
        b.1 += n;
    }
    let labels = bucket_labels(block_size_bits);
    counts
        .iter()
        .zip(labels)
        .enumerate()
        .filter(|(_, (c, _))| c.0 > 0)
        .map(|(index, (&(extents, blocks), (s, e)))| SizeBucket {
            index,
            range: format!("{s}...{e}"),
            min_blocks: bucket_min_blocks(index),
            extents,
            blocks,
            percent: percent(blocks, percent_of),
        })
        .collect()
}

/// `part · 100 / whole`, 0 when `whole` is 0.
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}
