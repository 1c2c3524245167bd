//! M11 — buddy-order fragmentation indices, after Linux `mm/vmstat.c` (debugfs `extfrag/`).
//!
//! From free-chunk counts `n_k` per order (ext4's `bb_counters`, "pages" = blocks), for a
//! request of order `j`: `free_pages = Σ n_k·2^k`, `free_blocks_total = Σ n_k`,
//! `free_blocks_suitable = Σ_{k≥j} n_k·2^(k−j)`.
//! * unusable free space index `F_u(j) = (free_pages − suitable·2^j) / free_pages`, 1 if
//!   nothing is free (`unusable_free_index`);
//! * fragmentation index (`__fragmentation_index`): 0 if no free blocks, −1 if a suitable
//!   chunk exists, else `1 − (1 + free_pages/2^j) / free_blocks_total`.
//!
//! Both are given as the exact fraction and as the kernel's integer thousandths.

use super::free_space::FreeSpace;
use super::mb_groups::{mb_groups, total_counters};
use serde::Serialize;

/// Indices for one request order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OrderIndex {
    /// Request order `j`.
    pub order: u32,
    /// Free chunks from which an order-`j` request could be carved.
    pub free_blocks_suitable: u64,
    /// `F_u(j)` in [0, 1].
    pub unusable_index: f64,
    /// Kernel `unusable_free_index` (×1000, integer division).
    pub unusable_index_milli: u64,
    /// `F_i(j)`: −1 if a suitable chunk exists, else in [0, 1).
    pub extfrag_index: f64,
    /// Kernel `__fragmentation_index` (×1000, integer division; −1000 when suitable).
    pub extfrag_index_milli: i64,
}

/// Indices for every order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExtfragIndices {
    /// `Σ n_k·2^k`.
    pub free_pages: u64,
    /// `Σ n_k`.
    pub free_blocks_total: u64,
    /// One entry per order `0..counters.len()`.
    pub orders: Vec<OrderIndex>,
}

/// Computes the indices for orders `0..counters.len()` from `counters[k] = n_k`.
pub fn extfrag_indices(counters: &[u64]) -> ExtfragIndices {
    let free_pages: u64 = counters.iter().enumerate().map(|(k, &n)| n << k).sum();
    let total: u64 = counters.iter().sum();
    let orders = (0..counters.len() as u32)
        .map(|j| order_index(counters, j, free_pages, total))
        .collect();
    ExtfragIndices {
        free_pages,
        free_blocks_total: total,
        orders,
    }
}

/// The indices of `space`, with `n_k` summed over all groups' buddy decompositions.
pub fn extfrag_of_space(space: &FreeSpace) -> ExtfragIndices {
    extfrag_indices(&total_counters(&mb_groups(space)))
}

fn order_index(counters: &[u64], j: u32, free_pages: u64, total: u64) -> OrderIndex {
    let suitable: u64 = counters
        .iter()
        .enumerate()
        .skip(j as usize)
        .map(|(k, &n)| n << (k as u32 - j))
        .sum();
    let requested = 1u64 << j;
    let (unusable, unusable_milli) = match free_pages {
        0 => (1.0, 1000),
        f => (
            (f - (suitable << j)) as f64 / f as f64,
            (f - (suitable << j)) * 1000 / f,
        ),
    };
    let (frag, frag_milli) = if total == 0 {
        (0.0, 0)
    } else if suitable > 0 {
        (-1.0, -1000)
    } else {
        (
            1.0 - (1.0 + free_pages as f64 / requested as f64) / total as f64,
            1000 - ((1000 + free_pages * 1000 / requested) / total) as i64,
        )
    };
    OrderIndex {
        order: j,
        free_blocks_suitable: suitable,
        unusable_index: unusable,
        unusable_index_milli: unusable_milli,
        extfrag_index: frag,
        extfrag_index_milli: frag_milli,
    }
}
