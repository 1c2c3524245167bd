//! M8 — Ceph BlueStore fragmentation scores (`src/os/bluestore/Allocator.cc`, AVL allocator).
//!
//! `get_fragmentation_score()`: a free extent of `v` bytes is worth `score(v)`, which grows
//! faster than linearly. With `sc = ⌊log2 v⌋` and `x = (v − 2^sc) / 2^sc`:
//! `score(v) = 2^sc·S[sc]·(1 − x) + 2^(sc+1)·S[sc+1]·x`, `S[0] = 1`, `S[i] = S[i−1]·m(i)` with
//! `m(i) = 1.2` for `i ≤ 20` (≤ 1 MiB), `(1.0·(i − 20) + 1.2·(27 − i)) / 7` for `20 < i < 27`,
//! and `1.0` for `i ≥ 27` (≥ 128 MiB). Then `ideal = score(Σv)`,
//! `terrible = (Σv / block_size)·score(block_size)` and
//! `fragmentation_score = (ideal − Σ score(v)) / (ideal − terrible)`: 0 = one free extent,
//! 1 = all free space in single blocks.
//!
//! Note: Allocator.cc's `push_next_scale` picks the multiplier by the index of the scale being
//! *appended* (`ss = scales.size()`); we follow the code. The same recurrence
//! indexed by the previous element would differ only for 21 ≤ i ≤ 27.
//! Degenerate maps where `ideal == terrible` (no free space, or exactly one free block) have no
//! possible fragmentation and score 0 (Ceph would divide 0 by 0).
//!
//! `get_fragmentation()` (AVL/Btree/Hybrid): with `F` free allocation units and `E` free extents,
//! `0` if `F ≤ 1`, else `(E − 1) / (F − 1)`.

use super::free_space::{FreeSpace, RunScope};
use serde::Serialize;

/// Both BlueStore figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlueStoreScores {
    /// `get_fragmentation_score()`, 0 (none) … 1 (absolute).
    pub fragmentation_score: f64,
    /// `get_fragmentation()`, `(E − 1) / (F − 1)`.
    pub fragmentation: f64,
    /// `E`: free extents.
    pub free_extents: u64,
    /// `F`: free allocation units (blocks).
    pub free_units: u64,
}

/// `m(i)`, the multiplier from `S[i−1]` to `S[i]`.
fn multiplier(i: u32) -> f64 {
    const SMALL_P2: u32 = 20;
    const HUGE_P2: u32 = 27;
    if i >= HUGE_P2 {
        1.0
    } else if i > SMALL_P2 {
        (1.0 * f64::from(i - SMALL_P2) + 1.2 * f64::from(HUGE_P2 - i))
            / f64::from(HUGE_P2 - SMALL_P2)
    } else {
        1.2
    }
}

/// The scale table `S[0..=64]`.
fn scales() -> Vec<f64> {
    let mut s = vec![1.0f64];
    for i in 1..=64 {
        let prev = s[i as usize - 1];
        s.push(prev * multiplier(i));
    }
    s
}

/// `score(v)` for a free extent of `v > 0` bytes (0 for `v = 0`).
pub fn extent_score(v: u64) -> f64 {
    score_with(&scales(), v)
}

fn score_with(s: &[f64], v: u64) -> f64 {
    if v == 0 {
        return 0.0;
    }
    let sc = v.ilog2() as usize;
    let base = 1u64 << sc;
    let x = (v - base) as f64 / base as f64;
    base as f64 * s[sc] * (1.0 - x) + 2.0 * base as f64 * s[sc + 1] * x
}

/// `get_fragmentation_score` of free extents given in bytes.
pub fn fragmentation_score(extent_bytes: &[u64], block_size: u64) -> f64 {
    let s = scales();
    let sum: u64 = extent_bytes.iter().sum();
    let score_sum: f64 = extent_bytes.iter().map(|&v| score_with(&s, v)).sum();
    let ideal = score_with(&s, sum);
    let terrible = (sum / block_size.max(1)) as f64 * score_with(&s, block_size);
    let span = ideal - terrible;
    if span.abs() <= f64::EPSILON * ideal.abs() {
        return 0.0;
    }
    (ideal - score_sum) / span
}

/// `get_fragmentation`: `(E − 1)/(F − 1)`, 0 when `F ≤ 1`.
pub fn fragmentation(free_extents: u64, free_units: u64) -> f64 {
    if free_units <= 1 {
        0.0
    } else {
        free_extents.saturating_sub(1) as f64 / (free_units - 1) as f64
    }
}

/// Both scores of `space`'s free runs under `scope` (BlueStore's allocator is device-wide:
/// `RunScope::Device` is the faithful choice; `PerGroup` scores what ext4 can actually use).
pub fn bluestore_scores(space: &FreeSpace, scope: RunScope) -> BlueStoreScores {
    let bs = u64::from(space.block_size());
    let runs = space.runs(scope);
    let bytes: Vec<u64> = runs.iter().map(|r| r.1 * bs).collect();
    let free_units = space.free_blocks();
    BlueStoreScores {
        fragmentation_score: fragmentation_score(&bytes, bs),
        fragmentation: fragmentation(runs.len() as u64, free_units),
        free_extents: runs.len() as u64,
        free_units,
    }
}
