//! The mb_optimize_scan indexes: for each order, the set of groups whose largest free order
//! (or average fragment size order) is that order (`s_mb_largest_free_orders[]`,
//! `s_mb_avg_fragment_size[]`, xarrays since 6.17).
//!
//! The kernel iterates each xarray by ascending group number inside `[start, end)` without
//! the group locks; an atomic bitset per order gives the same order and the same lock-free
//! reads, at one bit per group and order. Here the sets are split by size class as well (see
//! `class_index`); a walk over several classes reads their union.

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
    pub fn new(len: u32) -> Self {
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
    /// `insert` raced in between. Returns whether the group was in the set (a class move
    /// re-inserts the group elsewhere only if it was).
    pub fn remove(&self, g: u32) -> bool {
        let w = (g / 64) as usize;
        let bit = 1u64 << (g % 64);
        let old = self.words[w].fetch_and(!bit, Ordering::SeqCst);
        if old & !bit != 0 {
            return old & bit != 0;
        }
        let sbit = 1u64 << (w % 64);
        self.summary[w / 64].fetch_and(!sbit, Ordering::SeqCst);
        if self.words[w].load(Ordering::SeqCst) != 0 {
            self.summary[w / 64].fetch_or(sbit, Ordering::SeqCst);
        }
        old & bit != 0
    }
    /// Whether the set holds no group: every summary bit clear (a summary bit is set while
    /// its word may be non-zero, so a clear summary means an empty set, up to a concurrent
    /// `insert`, as `xa_empty` is racy too).
    pub fn is_empty(&self) -> bool {
        self.summary.iter().all(|s| s.load(Ordering::Relaxed) == 0)
    }
    /// Whether `g` is in the set (a lock-free read, like [`GroupSet::next`]).
    pub fn contains(&self, g: u32) -> bool {
        self.words[(g / 64) as usize].load(Ordering::Relaxed) >> (g % 64) & 1 == 1
    }
    /// First group `>= from` and `< end` in the set.
    pub fn next(&self, from: u32, end: u32) -> Option<u32> {
        self.next_where(from, end, |_| true)
    }
    /// First group `>= from` and `< end` in the set for which `keep` holds: the set's words
    /// are read once each, and only the groups in them are offered to `keep`.
    #[inline]
    pub fn next_where(&self, from: u32, end: u32, keep: impl FnMut(u32) -> bool) -> Option<u32> {
        first_where(
            self.len,
            from,
            end,
            |w| self.words[w].load(Ordering::Relaxed),
            |s| self.summary[s].load(Ordering::Relaxed),
            keep,
        )
    }
    /// [`GroupSet::next_where`] over the union of [`GroupSet::next_in_union`].
    #[inline]
    pub fn next_in_union_where(
        sets: &[GroupSet; 4],
        mask: u8,
        from: u32,
        end: u32,
        keep: impl FnMut(u32) -> bool,
    ) -> Option<u32> {
        first_where(
            sets[0].len,
            from,
            end,
            |w| union(sets, mask, |s| s.words[w].load(Ordering::Relaxed)),
            |i| union(sets, mask, |s| s.summary[i].load(Ordering::Relaxed)),
            keep,
        )
    }
    /// First group `>= from` and `< end` in any of the sets of `sets` that `mask` picks (bit
    /// `i` = `sets[i]`; all of one length): the union is read word by word, so a walk over it
    /// meets its groups in ascending order, as a walk over one set holding them all would.
    #[inline]
    pub fn next_in_union(sets: &[GroupSet; 4], mask: u8, from: u32, end: u32) -> Option<u32> {
        GroupSet::next_in_union_where(sets, mask, from, end, |_| true)
    }
    pub fn count(&self) -> u32 {
        self.words
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones())
            .sum()
    }
}

/// The OR of `read` over the sets of `sets` that `mask` picks.
#[inline(always)]
fn union(sets: &[GroupSet; 4], mask: u8, read: impl Fn(&GroupSet) -> u64) -> u64 {
    (0..4)
        .filter(|&i| mask >> i & 1 == 1)
        .fold(0, |a, i| a | read(&sets[i]))
}

/// First group `>= from` and `< end` that `keep` accepts, of a set of `len` groups read
/// through `word` (the group bits of word `w`) and `summary` (the summary bits of summary
/// word `s`).
#[inline(always)]
fn first_where(
    len: u32,
    from: u32,
    end: u32,
    word: impl Fn(usize) -> u64,
    summary: impl Fn(usize) -> u64,
    mut keep: impl FnMut(u32) -> bool,
) -> Option<u32> {
    let end = end.min(len);
    if from >= end {
        return None;
    }
    let mut w = (from / 64) as usize;
    let mut bits = word(w) & (!0u64 << (from % 64));
    loop {
        while bits != 0 {
            let g = w as u32 * 64 + bits.trailing_zeros();
            if g >= end {
                return None;
            }
            if keep(g) {
                return Some(g);
            }
            bits &= bits - 1;
        }
        w = next_word(w + 1, end, &summary)?;
        bits = word(w);
    }
}

/// First word `>= w` whose summary bit is set, if it starts below `end`.
#[inline(always)]
fn next_word(w: usize, end: u32, summary: &impl Fn(usize) -> u64) -> Option<usize> {
    let words = (end as usize).div_ceil(64);
    if w >= words {
        return None;
    }
    let mut s = w / 64;
    let mut bits = summary(s) & (!0u64 << (w % 64));
    while bits == 0 {
        s += 1;
        if s * 64 >= words {
            return None;
        }
        bits = summary(s);
    }
    let found = s * 64 + bits.trailing_zeros() as usize;
    (found < words).then_some(found)
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
                let odd = model.range(from..end.min(9000).max(from)).find(|g| **g % 3 == 1).copied();
                prop_assert_eq!(s.next_where(from, end, |g| g % 3 == 1), odd, "from {} end {}", from, end);
            }
            prop_assert_eq!(s.count() as usize, model.len());
            prop_assert_eq!(s.is_empty(), model.is_empty());
        }
    }

    proptest! {
        #[test]
        fn union_next_matches_the_merged_set(ops in proptest::collection::vec((0usize..4, 0u32..9000, any::<bool>()), 0..300), mask in 1u8..16, probes in proptest::collection::vec((0u32..9100, 0u32..9100), 1..50)) {
            let sets: [GroupSet; 4] = std::array::from_fn(|_| GroupSet::new(9000));
            let mut model = vec![std::collections::BTreeSet::new(); 4];
            for (i, g, add) in ops {
                if add {
                    sets[i].insert(g);
                    model[i].insert(g);
                } else {
                    prop_assert_eq!(sets[i].remove(g), model[i].remove(&g));
                }
            }
            let merged: std::collections::BTreeSet<u32> = (0..4)
                .filter(|&i| mask >> i & 1 == 1)
                .flat_map(|i| model[i].iter().copied())
                .collect();
            for (from, end) in probes {
                let want = merged.range(from..end.min(9000).max(from)).next().copied();
                prop_assert_eq!(GroupSet::next_in_union(&sets, mask, from, end), want, "from {} end {}", from, end);
                let odd = merged.range(from..end.min(9000).max(from)).find(|g| **g % 3 == 1).copied();
                prop_assert_eq!(GroupSet::next_in_union_where(&sets, mask, from, end, |g| g % 3 == 1), odd, "from {} end {}", from, end);
            }
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
                    thread::spawn(move || {
                        if insert {
                            s.insert(g);
                        } else {
                            s.remove(g);
                        }
                    })
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
