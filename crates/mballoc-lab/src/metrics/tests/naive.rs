//! Deliberately naive reference implementations working block by block on `bool` bitmaps
//! (`true` = free), written independently of the run-based production code.

/// Packs per-group "free" flags into ext4 bitmaps (bit set = in use).
pub fn to_ext4_bitmaps(groups: &[Vec<bool>]) -> Vec<Vec<u8>> {
    groups
        .iter()
        .map(|g| {
            let mut bytes = vec![0u8; g.len().div_ceil(8)];
            for (i, &free) in g.iter().enumerate() {
                if !free {
                    bytes[i / 8] |= 1 << (i % 8);
                }
            }
            bytes
        })
        .collect()
}

/// Maximal free runs `(start, len)` of a flat bitmap.
pub fn runs(bits: &[bool]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bits.len() {
        if bits[i] {
            let s = i;
            while i < bits.len() && bits[i] {
                i += 1;
            }
            out.push((s, i - s));
        } else {
            i += 1;
        }
    }
    out
}

/// fsperf per-group frag_pct by scanning gaps block by block.
pub fn frag_pct(group: &[bool]) -> f64 {
    let r = runs(group);
    let total: usize = r.iter().map(|x| x.1).sum();
    let max = r.iter().map(|x| x.1).max().unwrap_or(0);
    if total == 0 {
        0.0
    } else {
        100.0 * (1.0 - max as f64 / total as f64)
    }
}

/// What e2freefrag's `scan_block_bitmap` accumulates, transcribed loop for loop.
#[derive(Debug, PartialEq)]
pub struct Scan {
    pub hist_counts: [u64; 32],
    pub hist_blocks: [u64; 32],
    pub min: u64,
    pub max: u64,
    pub sum: u64,
    pub count: u64,
    pub free_chunks: u64,
}

/// e2freefrag's per-block chunk loop over the whole device.
pub fn e2freefrag_scan(bits: &[bool], blks_in_chunk: usize) -> Scan {
    let mut s = Scan {
        hist_counts: [0; 32],
        hist_blocks: [0; 32],
        min: u64::MAX,
        max: 0,
        sum: 0,
        count: 0,
        free_chunks: 0,
    };
    let add = |s: &mut Scan, n: u64| {
        let mut idx = 0;
        while (1u64 << (idx + 1)) <= n {
            idx += 1;
        }
        let idx = (idx + 1).min(31);
        s.hist_counts[idx] += 1;
        s.hist_blocks[idx] += n;
        s.min = s.min.min(n);
        s.max = s.max.max(n);
        s.sum += n;
        s.count += 1;
    };
    let total = bits.len();
    let chunks = (total + blks_in_chunk) / blks_in_chunk;
    let mut last = 0u64;
    let mut blk = 0usize;
    for _ in 0..chunks {
        let num = if blk + blks_in_chunk > total {
            total - blk
        } else {
            blks_in_chunk
        };
        let mut chunk_free = 0;
        for _ in 0..num {
            let used = !bits[blk];
            if !used {
                last += 1;
                chunk_free += 1;
            }
            if used && last != 0 {
                add(&mut s, last);
                last = 0;
            }
            blk += 1;
        }
        if chunk_free == blks_in_chunk {
            s.free_chunks += 1;
        }
    }
    if last != 0 {
        add(&mut s, last);
    }
    s
}

/// Buddy counters as "maximal aligned fully-free chunks": chunk `[j·2^k, (j+1)·2^k)` counts at
/// order `k` if it lies in the group, is all free, and `k` is the top order or its order-`k+1`
/// parent is not all free.
pub fn buddy_counters(group: &[bool], max_order: usize) -> Vec<u64> {
    let all_free = |start: usize, size: usize| {
        start + size <= group.len() && group[start..start + size].iter().all(|&b| b)
    };
    let mut counters = vec![0u64; max_order + 1];
    for (k, c) in counters.iter_mut().enumerate() {
        let size = 1 << k;
        let mut start = 0;
        while start + size <= group.len() {
            let parent = start & !((size << 1) - 1);
            if all_free(start, size) && (k == max_order || !all_free(parent, size << 1)) {
                *c += 1;
            }
            start += size;
        }
    }
    counters
}

/// Expands file extents to `(logical, physical)` per block, sorted by logical block.
pub fn blocks_of(file: &[(u64, u64, u64)]) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = file
        .iter()
        .flat_map(|&(l, p, n)| (0..n).map(move |i| (l + i, p + i)))
        .collect();
    v.sort_unstable();
    v
}
