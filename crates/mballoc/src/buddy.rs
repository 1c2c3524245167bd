//! The buddy of one group: the in-core order-0 bitmap plus one bitmap per order 1..=bsbits+1
//! marking the maximal free aligned chunks, and the per-group counters derived from them.
//!
//! Kernel counterparts: `ext4_mb_generate_buddy`, `ext4_mb_mark_free_simple`,
//! `mb_find_order_for_block`, `mb_find_extent`, `mb_mark_used`, `mb_free_blocks`.
//!
//! The kernel keeps the buddy *canonical*: every free cluster belongs to exactly one maximal
//! aligned power-of-two chunk, which is the greedy aligned decomposition of its free run. We
//! rely on that: marking used or freeing removes the decomposition of the affected free runs and
//! inserts the decomposition of the new ones, which yields the same bits and counters as the
//! kernel's split/coalesce walks (checked against a from-scratch regeneration in tests).

use crate::bitmap::Bitmap;

/// Orders supported: block sizes up to 64 KiB give orders 0..=17.
pub const MAX_ORDERS: usize = 18;

#[derive(Clone, Debug)]
pub struct Buddy {
    /// Order 0: bit set = cluster unavailable (used, preallocated, freed but not committed, or
    /// beyond the end of the group). Length `8 * block_size` like `s_mb_maxs[0]`.
    bitmap: Bitmap,
    /// `orders[i]`, i ≥ 1: bit j set = clusters `[j << i, (j + 1) << i)` are a maximal free
    /// chunk. (The kernel stores the inverse: 0 = free chunk.)
    orders: Vec<Bitmap>,
    counters: [u32; MAX_ORDERS],
    /// Clusters per group (`EXT4_CLUSTERS_PER_GROUP`): the bound of scans.
    group_size: u32,
    max_order: u32,
    free: u32,
    fragments: u32,
    first_free: u32,
}

/// `fls`: 1-based index of the most significant set bit, 0 for 0.
#[inline]
pub fn fls(x: u32) -> u32 {
    32 - x.leading_zeros()
}

/// `ffs`: 1-based index of the least significant set bit, 0 for 0.
#[inline]
fn ffs(x: u32) -> u32 {
    if x == 0 {
        0
    } else {
        x.trailing_zeros() + 1
    }
}

impl Buddy {
    /// Builds the buddy of a group from its in-core bitmap (`ext4_mb_generate_buddy`).
    ///
    /// `in_use` covers the group's `valid` clusters; clusters from `valid` up to the bitmap
    /// size are marked in use, as `ext4_mark_bitmap_end` does for the last group.
    pub fn generate(in_use: &Bitmap, valid: u32, group_size: u32, bsbits: u32) -> Buddy {
        let bits = 8u32 << bsbits;
        let mut bitmap = Bitmap::full(bits);
        bitmap.clear_range(0, valid.min(group_size));
        for (s, l) in in_use.one_runs(0, valid.min(in_use.len())) {
            bitmap.set_range(s, s + l);
        }
        let max_order = bsbits + 1;
        let orders = (0..=max_order)
            .map(|i| Bitmap::new(if i == 0 { 0 } else { bits >> i }))
            .collect();
        let mut b = Buddy {
            bitmap,
            orders,
            counters: [0; MAX_ORDERS],
            group_size,
            max_order,
            free: 0,
            fragments: 0,
            first_free: group_size,
        };
        let runs: Vec<(u32, u32)> = b.bitmap.zero_runs(0, group_size).collect();
        for (s, l) in runs {
            b.first_free = b.first_free.min(s);
            b.fragments += 1;
            b.free += l;
            b.decompose(s, l, true);
        }
        b
    }

    pub fn free(&self) -> u32 {
        self.free
    }
    pub fn fragments(&self) -> u32 {
        self.fragments
    }
    pub fn first_free(&self) -> u32 {
        self.first_free
    }
    pub fn counters(&self) -> &[u32] {
        &self.counters[..=self.max_order as usize]
    }
    pub fn bitmap(&self) -> &Bitmap {
        &self.bitmap
    }
    pub fn group_size(&self) -> u32 {
        self.group_size
    }
    pub fn max_order(&self) -> u32 {
        self.max_order
    }

    /// Highest order with a free chunk, or −1 (`mb_set_largest_free_order`).
    pub fn largest_free_order(&self) -> i32 {
        (0..=self.max_order as usize)
            .rev()
            .find(|&o| self.counters[o] > 0)
            .map_or(-1, |o| o as i32)
    }

    /// Whether cluster `c` is free in the in-core bitmap.
    #[inline]
    pub fn is_free(&self, c: u32) -> bool {
        c < self.group_size && !self.bitmap.get(c)
    }

    /// Greedy aligned decomposition of the free run `[first, first + len)`
    /// (`ext4_mb_mark_free_simple`), adding (`add`) or removing its chunks.
    fn decompose(&mut self, mut first: u32, mut len: u32, add: bool) {
        let border = 2u32 << (self.max_order - 1);
        while len > 0 {
            let max = ffs(first | border) - 1;
            let order = max.min(fls(len) - 1);
            if add {
                self.counters[order as usize] += 1;
            } else {
                self.counters[order as usize] -= 1;
            }
            if order > 0 {
                let bm = &mut self.orders[order as usize];
                if add {
                    bm.set(first >> order);
                } else {
                    bm.clear(first >> order);
                }
            }
            first += 1 << order;
            len -= 1 << order;
        }
    }

    /// Order of the maximal free chunk holding the free cluster `c` (`mb_find_order_for_block`).
    ///
    /// The buddy is canonical, so that order is the largest `o` for which the aligned `2^o`
    /// block around `c` is entirely free: the cluster's own bitmap word answers up to order 6,
    /// the order bitmaps above.
    #[inline]
    fn order_for_block(&self, c: u32) -> u32 {
        let free = !self.bitmap.word(c / 64);
        let bit = c % 64;
        let mut o = 0;
        while o < 6 && o < self.max_order {
            let size = 2u32 << o;
            let mask = if size == 64 {
                !0u64
            } else {
                ((1u64 << size) - 1) << (bit & !(size - 1))
            };
            if free & mask != mask {
                return o;
            }
            o += 1;
        }
        while o < self.max_order && !self.orders[o as usize].get(c >> o) {
            o += 1;
        }
        o
    }

    /// Takes the maximal chunk `[start, start + 2^order)` out of the buddy.
    #[inline]
    fn remove_chunk(&mut self, start: u32, order: u32) {
        self.counters[order as usize] -= 1;
        if order > 0 {
            self.orders[order as usize].clear(start >> order);
        }
    }

    /// Adds the chunk `[start, start + 2^order)`, merging it with its free buddy as long as
    /// there is one (`mb_buddy_mark_free`). Its clusters must be clear in the bitmap already.
    fn insert_merging(&mut self, mut start: u32, mut order: u32) {
        while order < self.max_order {
            let buddy = start ^ (1 << order);
            // An order-0 buddy is a free cluster whose pair (our chunk) was in use, so it is a
            // chunk of order 0 exactly.
            let free_chunk = if order == 0 {
                !self.bitmap.get(buddy)
            } else {
                self.orders[order as usize].get(buddy >> order)
            };
            if !free_chunk {
                break;
            }
            self.remove_chunk(buddy, order);
            start = start.min(buddy);
            order += 1;
        }
        self.counters[order as usize] += 1;
        if order > 0 {
            self.orders[order as usize].set(start >> order);
        }
    }

    /// The free extent starting at `block`, grown chunk by chunk until it reaches `needed` or
    /// meets a used cluster (`mb_find_extent`). Buddy-granular: it can be longer than `needed`.
    /// Returns 0 if `block` is not free.
    ///
    /// Closed form of the kernel's walk: it ends at the first used cluster if one lies within
    /// `needed`, else at the end of the chunk holding the `needed`-th cluster.
    pub fn find_extent(&self, block: u32, needed: u32) -> u32 {
        if block >= self.group_size || self.bitmap.get(block) {
            return 0;
        }
        let lim = self.bitmap.len();
        let last = block.saturating_add(needed.max(1) - 1);
        let len = if let Some(u) = self
            .bitmap
            .find_next_set(block, last.saturating_add(1).min(lim))
        {
            u - block
        } else if last >= lim {
            lim - block
        } else {
            let o = self.order_for_block(last);
            (last | ((1u32 << o) - 1)) + 1 - block
        };
        len.min(self.group_size - block)
    }

    /// Marks `[start, start + len)` used (`mb_mark_used`). Every cluster must be free.
    /// Returns the kernel's `tail | buddy << 16` value: the length still to mark and the order
    /// of the first chunk that had to be split, or 0 if no chunk was split.
    ///
    /// Only the chunks overlapping the range change: each is removed and its parts outside the
    /// range go back as their greedy aligned decomposition (which is maximal, since the
    /// neighbouring range is now in use), so a small allocation from a large free run costs a
    /// few chunk operations rather than a walk of the run.
    pub fn mark_used(&mut self, start: u32, len: u32) -> u32 {
        debug_assert!(len > 0 && start + len <= self.group_size);
        debug_assert!(
            self.bitmap.all_clear(start, start + len),
            "mark_used of a used cluster"
        );
        let end = start + len;
        let left_free = start > 0 && !self.bitmap.get(start - 1);
        let right_free = end < self.bitmap.len() && !self.bitmap.get(end);
        match (left_free, right_free) {
            (true, true) => self.fragments += 1,
            (false, false) => self.fragments -= 1,
            _ => {}
        }
        self.free -= len;
        if self.first_free == start {
            self.first_free += len;
        }
        let mut ret = 0;
        let mut p = start;
        while p < end {
            let order = self.order_for_block(p);
            let cs = p & !((1u32 << order) - 1);
            let ce = cs + (1 << order);
            if ret == 0 && (cs != p || ce > end) {
                ret = (end - p) | (order << 16);
            }
            self.remove_chunk(cs, order);
            if cs < start {
                self.decompose(cs, start - cs, true);
            }
            if ce > end {
                self.decompose(end, ce - end, true);
            }
            p = ce;
        }
        self.bitmap.set_range(start, end);
        ret
    }

    /// Frees `[first, first + count)` into the buddy (`mb_free_blocks`). Every cluster must be
    /// in use; callers check (a double free is a caller error, reported before we get here).
    ///
    /// The range goes in as its greedy aligned pieces, each merged upward with its free buddy
    /// (later pieces merge with earlier ones), which yields the canonical buddy.
    pub fn free_blocks(&mut self, first: u32, count: u32) {
        debug_assert!(count > 0 && first + count <= self.group_size);
        debug_assert!(
            self.bitmap.all_set(first, first + count),
            "double free inside the buddy"
        );
        let end = first + count;
        let left_free = first > 0 && !self.bitmap.get(first - 1);
        let right_free = end < self.bitmap.len() && !self.bitmap.get(end);
        match (left_free, right_free) {
            (true, true) => self.fragments -= 1,
            (false, false) => self.fragments += 1,
            _ => {}
        }
        let border = 1u32 << self.max_order;
        let mut p = first;
        while p < end {
            let order = (ffs(p | border) - 1).min(fls(end - p) - 1);
            self.bitmap.clear_range(p, p + (1 << order));
            self.insert_merging(p, order);
            p += 1 << order;
        }
        self.free += count;
        self.first_free = self.first_free.min(first);
    }

    /// Lowest-addressed free chunk of exactly `order` (the simple scan's pick).
    pub fn first_chunk_of_order(&self, order: u32) -> Option<u32> {
        if order == 0 {
            // Order-0 chunks are singletons; the kernel never asks (ac_2order ≥ 1).
            return None;
        }
        let bm = &self.orders[order as usize];
        bm.find_next_set(0, bm.len()).map(|k| k << order)
    }

    /// First free cluster at or after `from`.
    pub fn next_free(&self, from: u32) -> Option<u32> {
        self.bitmap.find_next_zero(from, self.group_size)
    }
    /// First used cluster at or after `from` (or the group size).
    pub fn next_used(&self, from: u32) -> u32 {
        self.bitmap
            .find_next_set(from, self.group_size)
            .unwrap_or(self.group_size)
    }

    /// The first position `>= from` from which at least `len` clusters are free: what the
    /// complex scan at a cheap criterion would measure next after skipping the shorter runs
    /// one by one. `None` when no such run is left.
    ///
    /// Any free run of at least `len >= 2^(k+1) - 1` clusters holds an aligned chunk of order
    /// `k` or more, so the buddy's order bitmaps (1/2^k the size of the cluster bitmap) find
    /// the candidate runs without visiting the short ones.
    pub fn next_fit(&self, from: u32, len: u32) -> Option<u32> {
        let mut i = from;
        if i < self.group_size && !self.bitmap.get(i) {
            match self.free_for(i, len) {
                Ok(()) => return Some(i),
                Err(used) => i = used,
            }
        }
        let k = (fls(len.saturating_add(1)) - 1).saturating_sub(1);
        loop {
            let c = self.next_chunk(i, k)?;
            // The run's start lies less than 2^(k+1) before `c` (only smaller chunks precede
            // the first chunk of order ≥ k in a run), so this look back is short.
            let a = self.bitmap.find_prev_set(c).map_or(0, |p| p + 1).max(i);
            match self.free_for(a, len) {
                Ok(()) => return Some(a),
                Err(used) => i = used,
            }
        }
    }

    /// Whether `len` clusters are free from the free cluster `a`; if not, the first cluster
    /// after `a` in use (or the group end). Looks at no more than `len` clusters.
    #[inline]
    fn free_for(&self, a: u32, len: u32) -> Result<(), u32> {
        let end = a.saturating_add(len);
        if end > self.group_size {
            return Err(self.next_used(a));
        }
        match self.bitmap.find_next_set(a, end) {
            None => Ok(()),
            Some(u) => Err(u),
        }
    }

    /// Start of the lowest free chunk of order `>= k` starting at or after `from`.
    fn next_chunk(&self, from: u32, k: u32) -> Option<u32> {
        if k == 0 {
            return self.next_free(from);
        }
        let mut best = self.group_size;
        for o in k..=self.max_order {
            let bm = &self.orders[o as usize];
            let lo = from.div_ceil(1 << o);
            let hi = best.div_ceil(1 << o).min(bm.len());
            if let Some(j) = bm.find_next_set(lo, hi) {
                best = best.min(j << o);
            }
        }
        (best < self.group_size).then_some(best)
    }

    /// Checks every derived value against a regeneration from the bitmap (test support).
    pub fn check(&self, bsbits: u32) -> Result<(), String> {
        let mut inuse = Bitmap::new(self.group_size);
        for (s, l) in self.bitmap.one_runs(0, self.group_size) {
            inuse.set_range(s, s + l);
        }
        let fresh = Buddy::generate(&inuse, self.group_size, self.group_size, bsbits);
        if fresh.counters != self.counters {
            return Err(format!(
                "counters {:?} != regenerated {:?}",
                self.counters(),
                fresh.counters()
            ));
        }
        if fresh.free != self.free || fresh.fragments != self.fragments {
            return Err(format!(
                "free/frags {}/{} != regenerated {}/{}",
                self.free, self.fragments, fresh.free, fresh.fragments
            ));
        }
        if self.first_free > fresh.first_free {
            return Err(format!(
                "first_free {} beyond the first free {}",
                self.first_free, fresh.first_free
            ));
        }
        if fresh.orders != self.orders {
            return Err("buddy bitmaps differ from regeneration".into());
        }
        Ok(())
    }
}

/// `mb_avg_fragment_size_order`: the avg-fragment index of a length.
pub fn avg_fragment_order(len: u32, num_orders: usize) -> usize {
    let order = fls(len) as i32 - 2;
    order.clamp(0, num_orders as i32 - 1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn group_with_used(ranges: &[(u32, u32)]) -> Buddy {
        let mut used = Bitmap::new(32768);
        for &(s, l) in ranges {
            used.set_range(s, s + l);
        }
        Buddy::generate(&used, 32768, 32768, 12)
    }

    /// Design doc §2.4 (observed): metadata in 0..129 leaves one chunk each of orders
    /// 0..=6 and 8..=12 and three of order 13.
    #[test]
    fn generation_matches_kernel_example() {
        let b = group_with_used(&[(0, 129)]);
        assert_eq!(b.counters(), &[1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 3]);
        assert_eq!((b.free(), b.fragments(), b.first_free()), (32639, 1, 129));
        assert_eq!(b.largest_free_order(), 13);
    }

    /// Design doc §3.11 worked example: find_extent grows chunk by chunk.
    #[test]
    fn find_extent_is_buddy_granular() {
        let b = group_with_used(&[(0, 129), (512, 1024), (2048, 2048)]);
        assert_eq!(b.find_extent(1536, 394), 512);
        assert_eq!(b.find_extent(4096, 394), 4096);
        assert_eq!(b.find_extent(129, 394), 383);
        assert_eq!(b.find_extent(0, 1), 0);
    }

    #[test]
    fn mark_used_reports_the_broken_chunk() {
        let mut b = group_with_used(&[(0, 129), (512, 1024), (2048, 2048)]);
        let ret = b.mark_used(1536, 394);
        assert_eq!(ret >> 16, 9, "a 512 chunk (order 9) was broken");
        assert_eq!(ret & 0xffff, 394);
        b.check(12).unwrap();
    }

    /// The kernel's chunk-by-chunk `mb_find_extent`, as a reference for the closed form.
    fn find_extent_walk(b: &Buddy, block: u32, needed: u32) -> u32 {
        if block >= b.group_size || b.bitmap.get(block) {
            return 0;
        }
        let order_at = |c: u32| {
            (1..=b.max_order)
                .find(|&o| b.orders[o as usize].get(c >> o))
                .unwrap_or(0)
        };
        let mut order = order_at(block);
        let mut len = (1u32 << order) - (block & ((1u32 << order) - 1));
        let mut idx = block >> order;
        while needed > len {
            let max = if order == 0 {
                b.bitmap.len()
            } else {
                b.orders[order as usize].len()
            };
            if idx + 1 >= max {
                break;
            }
            let next = (idx + 1) << order;
            if b.bitmap.get(next) {
                break;
            }
            order = order_at(next);
            idx = next >> order;
            len += 1 << order;
        }
        len.min(b.group_size - block)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn find_extent_matches_kernel_walk(used in proptest::collection::vec((0u32..4096, 1u32..300), 0..40), probes in proptest::collection::vec((0u32..4096, 1u32..5000), 1..40)) {
            let mut bm = Bitmap::new(4096);
            for (s, l) in used {
                bm.set_range(s, (s + l).min(4096));
            }
            let b = Buddy::generate(&bm, 4000, 4000, 9);
            for (block, needed) in probes {
                prop_assert_eq!(b.find_extent(block, needed), find_extent_walk(&b, block, needed), "block {} needed {}", block, needed);
            }
        }

        #[test]
        fn next_fit_matches_run_walk(used in proptest::collection::vec((0u32..4096, 1u32..200), 0..80), from in 0u32..4096, len in 1u32..600) {
            let mut bm = Bitmap::new(4096);
            for (s, l) in used {
                bm.set_range(s, (s + l).min(4096));
            }
            let b = Buddy::generate(&bm, 4096, 4096, 9);
            // The walk of the complex scan: from `from`, skip free runs shorter than `len`.
            let mut i = from;
            let naive = loop {
                let Some(s) = b.next_free(i) else { break None };
                let j = b.next_used(s);
                if j - s >= len {
                    break Some(s);
                }
                i = j;
            };
            prop_assert_eq!(b.next_fit(from, len), naive);
        }

        #[test]
        fn incremental_matches_regeneration(ops in proptest::collection::vec((0u32..4096, 1u32..300, any::<bool>()), 1..60)) {
            let mut used = Bitmap::new(4096);
            let mut b = Buddy::generate(&used, 4096, 4096, 9);
            for (start, len, alloc) in ops {
                let end = (start + len).min(4096);
                if alloc {
                    if let Some(s) = used.find_next_zero(start, end) {
                        let e = used.find_next_set(s, end).unwrap_or(end);
                        b.mark_used(s, e - s);
                        used.set_range(s, e);
                    }
                } else if let Some(s) = used.find_next_set(start, end) {
                    let e = used.find_next_zero(s, end).unwrap_or(end);
                    b.free_blocks(s, e - s);
                    used.clear_range(s, e);
                }
                prop_assert!(b.check(9).is_ok(), "{:?}", b.check(9));
                prop_assert_eq!(b.free(), 4096 - used.count_ones(0, 4096));
            }
        }
    }
}
