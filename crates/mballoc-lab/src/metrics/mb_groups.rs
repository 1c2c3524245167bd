//! M7 — the per-group summary of ext4's `/proc/fs/ext4/<dev>/mb_groups`.
//!
//! ext4 (`ext4_mb_generate_buddy`, `ext4_mb_mark_free_simple`): `free` = free blocks, `frags` =
//! maximal free runs, `first` = first free block (the group size if none). Each run is split
//! greedily into aligned power-of-two chunks — at position `p` with `len` left, the order is
//! `min(ffs(p | border) − 1, fls(len) − 1)` with `border = 2 << blocksize_bits`, so no chunk
//! exceeds order `blocksize_bits + 1` — and `bb_counters[order]` counts them. Derived:
//! `largest_free_order` (highest order with a chunk, −1 if none) and
//! `avg_fragment_size_order = clamp(fls(free / frags) − 2, 0, MB_NUM_ORDERS − 1)`
//! (`mb_avg_fragment_size_order`, −1 when there are no fragments), `MB_NUM_ORDERS = bits + 2`.

use super::free_space::{FreeSpace, GroupExtent};
use serde::Serialize;
use std::fmt::Write as _;

/// Columns printed by `mb_groups` (`2^0` … `2^13`).
pub const MB_GROUPS_COLUMNS: usize = 14;

/// One `mb_groups` line plus the derived orders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MbGroup {
    /// Group number.
    pub group: usize,
    /// `bb_free`.
    pub free: u32,
    /// `bb_fragments`.
    pub frags: u32,
    /// `bb_first_free`.
    pub first: u32,
    /// `bb_counters[order]`: `max(14, blocksize_bits + 2)` entries (orders above
    /// `blocksize_bits + 1` are 0); `mb_groups` prints the first 14.
    pub counters: Vec<u64>,
    /// `bb_largest_free_order`, −1 if the group is full.
    pub largest_free_order: i32,
    /// `bb_free / bb_fragments` (integer), 0 if full.
    pub avg_fragment_size: u32,
    /// `mb_avg_fragment_size_order`, −1 if full.
    pub avg_fragment_size_order: i32,
}

/// Buddy decomposition counts for one run at group offset `first` (`ext4_mb_mark_free_simple`).
pub fn buddy_chunks(mut first: u32, mut len: u32, block_size_bits: u32, counters: &mut [u64]) {
    let max_order = block_size_bits + 1;
    while len > 0 {
        let align = if first == 0 {
            max_order
        } else {
            first.trailing_zeros().min(max_order)
        };
        let order = align.min(len.ilog2());
        if let Some(c) = counters.get_mut(order as usize) {
            *c += 1;
        }
        first += 1 << order;
        len -= 1 << order;
    }
}

/// The `mb_groups` line of one group.
pub fn mb_group(group: usize, free: &[GroupExtent], bpg: u32, block_size_bits: u32) -> MbGroup {
    let mut counters = vec![0u64; MB_GROUPS_COLUMNS.max(block_size_bits as usize + 2)];
    for &(s, l) in free {
        buddy_chunks(s, l, block_size_bits, &mut counters);
    }
    let total: u32 = free.iter().map(|e| e.1).sum();
    let frags = free.len() as u32;
    let avg = total.checked_div(frags).unwrap_or(0);
    MbGroup {
        group,
        free: total,
        frags,
        first: free.first().map_or(bpg, |e| e.0),
        largest_free_order: counters
            .iter()
            .rposition(|&c| c > 0)
            .map_or(-1, |o| o as i32),
        avg_fragment_size: avg,
        avg_fragment_size_order: avg_order(frags, avg, block_size_bits),
        counters,
    }
}

fn avg_order(frags: u32, avg: u32, bits: u32) -> i32 {
    if frags == 0 {
        return -1;
    }
    let fls = 32 - avg.leading_zeros() as i32;
    let num_orders = bits as i32 + 2;
    (fls - 2).clamp(0, num_orders - 1)
}

/// Every group's `mb_groups` line.
pub fn mb_groups(space: &FreeSpace) -> Vec<MbGroup> {
    (0..space.group_count())
        .map(|g| {
            mb_group(
                g,
                space.group(g),
                space.blocks_per_group(),
                space.block_size_bits(),
            )
        })
        .collect()
}

/// `bb_counters` summed over all groups (the `n_k` of the buddy-order indices, M11).
pub fn total_counters(groups: &[MbGroup]) -> Vec<u64> {
    let len = groups.iter().map(|g| g.counters.len()).max().unwrap_or(0);
    let mut sum = vec![0u64; len];
    for g in groups {
        for (s, c) in sum.iter_mut().zip(&g.counters) {
            *s += c;
        }
    }
    sum
}

/// The header line of `/proc/fs/ext4/<dev>/mb_groups`.
pub const MB_GROUPS_HEADER: &str = "#group: free  frags first [ 2^0   2^1   2^2   2^3   2^4   \
     2^5   2^6   2^7   2^8   2^9   2^10  2^11  2^12  2^13  ]\n";

/// One group's line, without the newline (`ext4_mb_seq_groups_show`).
pub fn mb_group_line(g: &MbGroup) -> String {
    let mut s = format!(
        "#{:<5}: {:<5} {:<5} {:<5} [",
        g.group, g.free, g.frags, g.first
    );
    for c in g.counters.iter().take(MB_GROUPS_COLUMNS) {
        let _ = write!(s, " {c:<5}");
    }
    s.push_str(" ]");
    s
}

/// The lines in `/proc/fs/ext4/<dev>/mb_groups` layout.
pub fn render_mb_groups(groups: &[MbGroup]) -> String {
    let mut s = String::from(MB_GROUPS_HEADER);
    for g in groups {
        s.push_str(&mb_group_line(g));
        s.push('\n');
    }
    s
}
