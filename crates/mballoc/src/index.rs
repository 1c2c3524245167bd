//! The mb_optimize_scan indexes: for each order, the set of groups whose largest free order
//! (or average fragment size order) is that order (`s_mb_largest_free_orders[]`,
//! `s_mb_avg_fragment_size[]`, xarrays since 6.17).
//!
//! The kernel iterates each xarray by ascending group number inside `[start, end)` without
//! the group locks; an atomic bitset per order gives the same order and the same lock-free
//! reads, at one bit per group and order.

use std::sync::atomic::{AtomicU64, Ordering};

/// Groups present at one order, iterated by ascending group number.
pub struct GroupSet {
    words: Box<[AtomicU64]>,
    len: u32,
}

impl GroupSet {
    fn new(len: u32) -> Self {
        GroupSet {
            words: (0..len.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            len,
        }
    }
    pub fn insert(&self, g: u32) {
        self.words[(g / 64) as usize].fetch_or(1 << (g % 64), Ordering::Relaxed);
    }
    pub fn remove(&self, g: u32) {
        self.words[(g / 64) as usize].fetch_and(!(1 << (g % 64)), Ordering::Relaxed);
    }
    #[cfg(test)]
    pub fn contains(&self, g: u32) -> bool {
        self.words[(g / 64) as usize].load(Ordering::Relaxed) >> (g % 64) & 1 == 1
    }
    /// First group `>= from` and `< end` in the set.
    pub fn next(&self, from: u32, end: u32) -> Option<u32> {
        let end = end.min(self.len);
        if from >= end {
            return None;
        }
        let mut w = (from / 64) as usize;
        let mut word = self.words[w].load(Ordering::Relaxed) & (!0u64 << (from % 64));
        loop {
            if word != 0 {
                let g = w as u32 * 64 + word.trailing_zeros();
                return (g < end).then_some(g);
            }
            w += 1;
            if w as u32 * 64 >= end {
                return None;
            }
            word = self.words[w].load(Ordering::Relaxed);
        }
    }
    pub fn count(&self) -> u32 {
        self.words
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones())
            .sum()
    }
}

/// One index: a [`GroupSet`] per order.
pub struct OrderIndex {
    orders: Vec<GroupSet>,
}

impl OrderIndex {
    pub fn new(num_orders: usize, groups: u32) -> Self {
        OrderIndex {
            orders: (0..num_orders).map(|_| GroupSet::new(groups)).collect(),
        }
    }
    pub fn order(&self, o: usize) -> &GroupSet {
        &self.orders[o]
    }
    /// Moves `g` from order `old` to `new` (−1 = absent); `insert` false only removes.
    pub fn relocate(&self, g: u32, old: i32, new: i32, insert: bool) {
        if old >= 0 {
            self.orders[old as usize].remove(g);
        }
        if insert && new >= 0 {
            self.orders[new as usize].insert(g);
        }
    }
    /// Groups per order (the `mb_structs_summary` counts).
    pub fn counts(&self) -> Vec<u32> {
        self.orders.iter().map(GroupSet::count).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascending_range_iteration() {
        let s = GroupSet::new(300);
        for g in [5, 64, 65, 299] {
            s.insert(g);
        }
        assert_eq!(s.next(0, 300), Some(5));
        assert_eq!(s.next(6, 300), Some(64));
        assert_eq!(s.next(66, 299), None);
        assert_eq!(s.next(66, 300), Some(299));
        s.remove(64);
        assert!(!s.contains(64) && s.contains(65));
        assert_eq!(s.next(6, 300), Some(65));
        assert_eq!(s.count(), 3);
    }
}
