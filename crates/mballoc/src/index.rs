//! The mb_optimize_scan indexes: for each order, the set of groups whose largest free order
//! (or average fragment size order) is that order (`s_mb_largest_free_orders[]`,
//! `s_mb_avg_fragment_size[]`, xarrays since 6.17).
//!
//! The kernel iterates each xarray by ascending group number inside `[start, end)` without
//! the group locks; an atomic bitset per order gives the same order and the same lock-free
//! reads, at one bit per group and order.

use crate::sync::{AtomicU64, Ordering};

/// Groups present at one order, iterated by ascending group number.
///
/// Two levels: a bit per group, and a summary bit per 64-group word that is set while the
/// word may be non-zero. A huge filesystem's index is mostly empty at most orders (131072
/// groups = 2048 words per order), and a scan over all orders must not read every word.
pub struct GroupSet {
    words: Box<[AtomicU64]>,
    summary: Box<[AtomicU64]>,
    len: u32,
}

impl GroupSet {
    fn new(len: u32) -> Self {
        let words = len.div_ceil(64);
        GroupSet {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            summary: (0..words.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            len,
        }
    }
    /// The word first, then its summary bit: a reader that sees the summary bit finds the
    /// group (SeqCst orders the pair against a concurrent `remove` of the word's last group).
    /// A summary bit already set is only read: a remover that clears it after that read
    /// re-reads the word, sees this group and sets it again.
    pub fn insert(&self, g: u32) {
        let w = (g / 64) as usize;
        self.words[w].fetch_or(1 << (g % 64), Ordering::SeqCst);
        let sbit = 1u64 << (w % 64);
        let summary = &self.summary[w / 64];
        if summary.load(Ordering::SeqCst) & sbit == 0 {
            summary.fetch_or(sbit, Ordering::SeqCst);
        }
    }
    /// Clears the group; the summary bit goes only if the word is empty, re-set if an
    /// `insert` raced in between.
    pub fn remove(&self, g: u32) {
        let w = (g / 64) as usize;
        let bit = 1u64 << (g % 64);
        if self.words[w].fetch_and(!bit, Ordering::SeqCst) & !bit != 0 {
            return;
        }
        let sbit = 1u64 << (w % 64);
        self.summary[w / 64].fetch_and(!sbit, Ordering::SeqCst);
        if self.words[w].load(Ordering::SeqCst) != 0 {
            self.summary[w / 64].fetch_or(sbit, Ordering::SeqCst);
        }
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
            w = self.next_word(w + 1, end)?;
            word = self.words[w].load(Ordering::Relaxed);
        }
    }
    /// First word `>= w` whose summary bit is set, if it starts below `end`.
    fn next_word(&self, w: usize, end: u32) -> Option<usize> {
        let words = (end as usize).div_ceil(64);
        if w >= words {
            return None;
        }
        let mut s = w / 64;
        let mut bits = self.summary[s].load(Ordering::Relaxed) & (!0u64 << (w % 64));
        while bits == 0 {
            s += 1;
            if s * 64 >= words {
                return None;
            }
            bits = self.summary[s].load(Ordering::Relaxed);
        }
        let found = s * 64 + bits.trailing_zeros() as usize;
        (found < words).then_some(found)
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn next_matches_a_sorted_set(ops in proptest::collection::vec((0u32..9000, any::<bool>()), 0..300), probes in proptest::collection::vec((0u32..9100, 0u32..9100), 1..50)) {
            let s = GroupSet::new(9000);
            let mut model = std::collections::BTreeSet::new();
            for (g, add) in ops {
                if add {
                    s.insert(g);
                    model.insert(g);
                } else {
                    s.remove(g);
                    model.remove(&g);
                }
            }
            for (from, end) in probes {
                let want = model.range(from..end.min(9000).max(from)).next().copied();
                prop_assert_eq!(s.next(from, end), want, "from {} end {}", from, end);
            }
            prop_assert_eq!(s.count() as usize, model.len());
        }
    }

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

/// Model checks of the insert/remove protocol on one word
/// (`RUSTFLAGS="--cfg loom" cargo test --release -p mballoc --lib loom_`).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// The quiescent invariant: every non-zero word has its summary bit (a set bit over an
    /// empty word is allowed: it only costs a scan one word read).
    fn assert_consistent(s: &GroupSet) {
        for (w, word) in s.words.iter().enumerate() {
            let word = word.load(Ordering::SeqCst);
            let summary = s.summary[w / 64].load(Ordering::SeqCst) >> (w % 64) & 1 == 1;
            assert!(
                word == 0 || summary,
                "word {w} = {word:#x} without its summary bit"
            );
        }
    }

    /// Groups 3 and 5 of word 1 (groups 67 and 69), so that `next(0, ..)` reaches them
    /// through the summary bit (the first word is read without it).
    const W1: u32 = 64;

    /// Group 3 inserted while group 5, the word's only group, is removed: the remover's
    /// summary clear must not hide group 3.
    #[test]
    fn loom_insert_races_remove_of_last_group() {
        loom::model(|| {
            let s = Arc::new(GroupSet::new(128));
            s.insert(W1 + 5);
            let a = {
                let s = s.clone();
                thread::spawn(move || s.insert(W1 + 3))
            };
            let b = {
                let s = s.clone();
                thread::spawn(move || s.remove(W1 + 5))
            };
            a.join().unwrap();
            b.join().unwrap();
            assert_consistent(&s);
            assert!(s.contains(W1 + 3) && !s.contains(W1 + 5));
            assert_eq!(s.next(0, 128), Some(W1 + 3));
            assert_eq!(s.next(W1 + 4, 128), None);
        });
    }

    /// One thread inserts and removes group 1 while another inserts group 2 of the same
    /// word: whichever order, group 2 stays findable.
    #[test]
    fn loom_interleaved_insert_remove_same_word() {
        loom::model(|| {
            let s = Arc::new(GroupSet::new(128));
            let a = {
                let s = s.clone();
                thread::spawn(move || {
                    s.insert(W1 + 1);
                    s.remove(W1 + 1);
                })
            };
            let b = {
                let s = s.clone();
                thread::spawn(move || s.insert(W1 + 2))
            };
            a.join().unwrap();
            b.join().unwrap();
            assert_consistent(&s);
            assert_eq!(s.next(0, 128), Some(W1 + 2));
            assert_eq!(s.count(), 1);
        });
    }

    /// The word's two groups removed by two threads while a third inserts another: both
    /// removers may see the word empty and clear the summary bit, after the insert set it.
    #[test]
    fn loom_two_removers_race_insert() {
        loom::model(|| {
            let s = Arc::new(GroupSet::new(128));
            s.insert(W1 + 1);
            s.insert(W1 + 2);
            let threads: Vec<_> = [(W1 + 1, false), (W1 + 2, false), (W1 + 3, true)]
                .into_iter()
                .map(|(g, insert)| {
                    let s = s.clone();
                    thread::spawn(move || if insert { s.insert(g) } else { s.remove(g) })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            assert_consistent(&s);
            assert_eq!(s.next(0, 128), Some(W1 + 3));
            assert_eq!(s.count(), 1);
        });
    }
}
