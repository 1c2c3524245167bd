//! The buddy of one group: its free runs (the in-core view: what may be handed out now) and
//! the per-order chunk counters of the buddy system derived from them.
//!
//! Kernel counterparts: `ext4_mb_generate_buddy`, `ext4_mb_mark_free_simple`,
//! `mb_find_order_for_block`, `mb_find_extent`, `mb_mark_used`, `mb_free_blocks`.
//!
//! The kernel keeps the buddy *canonical*: every free cluster belongs to exactly one maximal
//! aligned power-of-two chunk, the greedy aligned decomposition of its free run. So the buddy
//! is a function of the free runs alone, and we keep those instead of the kernel's per-order
//! bitmaps: a sorted list of runs answers every question the scans ask (the chunk holding a
//! cluster, the next run long enough for a goal, the lowest chunk of an order) with one binary
//! search, and an allocation or a free edits one or two runs and re-counts their chunks.
//! Counters, chunk orders and `mb_find_extent` results are exactly the kernel's (checked
//! against a chunk-by-chunk walk and a from-scratch regeneration in the tests).
//!
//! Nor do we keep the kernel's order-0 in-core bitmap: it is the complement of the runs, and
//! every question asked of it (is this cluster free, is this range wholly in use) is one binary
//! search over them. Dropping it halves a loaded group's memory and takes a 4 KiB bitmap's
//! cache lines off every allocation and every committed free.
use crate::group::bitmap::Bitmap;
use crate::group::runs::{FreeRuns, Run};

#[derive(Clone, Debug)]
pub struct Buddy {
    /// The free clusters below `group_size`; everything else is unavailable (used,
    /// preallocated, freed but not committed, or beyond the end of the group).
    runs: FreeRuns,
    /// Chunks per order; 32 entries so that an order taken from a `u32`'s bit index needs no
    /// bounds check (only `..=max_order` are ever non-zero).
    counters: [u32; 32],
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

/// The greedy aligned decomposition of a free run (`ext4_mb_mark_free_simple`): its maximal
/// chunks as `(start, order)`, in address order.
struct Chunks {
    at: u32,
    end: u32,
    max_order: u32,
}

impl Iterator for Chunks {
    type Item = (u32, u32);
    #[inline]
    fn next(&mut self) -> Option<(u32, u32)> {
        if self.at >= self.end {
            return None;
        }
        let align = self.at.trailing_zeros().min(self.max_order);
        let order = align.min(fls(self.end - self.at) - 1);
        let c = (self.at, order);
        self.at += 1 << order;
        Some(c)
    }
}

impl Buddy {
    /// Builds the buddy of a group from its in-core bitmap (`ext4_mb_generate_buddy`).
    ///
    /// `in_use` covers the group's `valid` clusters; clusters from `valid` up to the bitmap
    /// size are marked in use, as `ext4_mark_bitmap_end` does for the last group.
    pub fn generate(in_use: &Bitmap, valid: u32, group_size: u32, bsbits: u32) -> Buddy {
        let limit = valid.min(group_size);
        let seen = limit.min(in_use.len());
        let mut runs: Vec<Run> = in_use
            .zero_runs(0, seen)
            .map(|(s, l)| Run {
                start: s,
                end: s + l,
            })
            .collect();
        // Clusters the bitmap does not cover but the group holds are free.
        if seen < limit {
            match runs.last_mut() {
                Some(r) if r.end == seen => r.end = limit,
                _ => runs.push(Run {
                    start: seen,
                    end: limit,
                }),
            }
        }
        let mut b = Buddy {
            runs: FreeRuns::new(runs),
            counters: [0; 32],
            group_size,
            max_order: bsbits + 1,
            free: 0,
            fragments: 0,
            first_free: group_size,
        };
        for i in 0..b.runs.len() {
            let r = b.runs.get(i).expect("in range");
            b.first_free = b.first_free.min(r.start);
            b.fragments += 1;
            b.free += r.end - r.start;
            b.count(r, true);
        }
        b
    }

    pub fn free(&self) -> u32 {
        self.free
    }
    /// Counts `extra` free clusters the runs do not hold: an inconsistent group, for tests.
    #[cfg(all(test, not(loom)))] // its only callers are the plain unit tests
    pub(crate) fn inflate_free(&mut self, extra: u32) {
        self.free += extra;
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
    /// The in-core order-0 bitmap the kernel keeps (bit set = unavailable), `8 * block_size`
    /// bits like `s_mb_maxs[0]`, built from the runs (checks and tests).
    pub fn in_use_bitmap(&self) -> Bitmap {
        let mut bm = Bitmap::full(1 << (self.max_order + 2));
        for r in self.free_runs() {
            bm.clear_range(r.0, r.0 + r.1);
        }
        bm
    }
    /// The free runs, in address order.
    #[inline]
    pub fn runs(&self) -> &[Run] {
        self.runs.as_slice()
    }
    /// The free runs as `(start, len)`, in address order.
    pub fn free_runs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        (0..self.runs.len()).filter_map(|i| self.runs.get(i).map(|r| (r.start, r.len())))
    }
    /// Whether every cluster of `[start, end)` is unavailable (no free run meets it).
    #[inline]
    pub fn all_used(&self, start: u32, end: u32) -> bool {
        self.runs
            .get(self.runs.run_from(start))
            .is_none_or(|r| r.start >= end)
    }

    /// Highest order with a free chunk, or −1 (`mb_set_largest_free_order`).
    pub fn largest_free_order(&self) -> i32 {
        (0..=self.max_order as usize)
            .rev()
            .find(|&o| self.counters[o] > 0)
            .map_or(-1, |o| o as i32)
    }

    /// Whether cluster `c` is free in-core.
    #[inline]
    pub fn is_free(&self, c: u32) -> bool {
        self.run_at(c).is_some()
    }

    #[inline]
    fn chunks(&self, r: Run) -> Chunks {
        Chunks {
            at: r.start,
            end: r.end,
            max_order: self.max_order,
        }
    }

    /// Adds (`add`) or removes the chunks of the free run `r` to or from the counters.
    ///
    /// Closed form of the greedy decomposition: with `m` the run's last `2^h`-aligned point
    /// (`h` the highest bit where start and end differ), the chunks left of `m` are the set bits
    /// of `m - start` and those right of it the set bits of `end - m`; a bit above the top
    /// order stands for `2^(bit - top)` chunks of the top order.
    #[inline]
    fn count(&mut self, r: Run, add: bool) {
        if r.start >= r.end {
            return;
        }
        let h = fls(r.start ^ r.end) - 1;
        let m = (r.end >> h) << h;
        let top = self.max_order;
        let below = (1u32 << top) - 1;
        let (left, right) = (m - r.start, r.end - m);
        // Bits at or above the top order: `bits >> top` chunks of the top order in all.
        let tops = (left >> top) + (right >> top);
        // One chunk per set bit below it (each order at most once per side).
        let (mut a, mut b) = (left & below, right & below);
        let c = &mut self.counters;
        if add {
            c[top as usize & 31] += tops;
            while a != 0 {
                c[a.trailing_zeros() as usize & 31] += 1;
                a &= a - 1;
            }
            while b != 0 {
                c[b.trailing_zeros() as usize & 31] += 1;
                b &= b - 1;
            }
        } else {
            c[top as usize & 31] -= tops;
            while a != 0 {
                c[a.trailing_zeros() as usize & 31] -= 1;
                a &= a - 1;
            }
            while b != 0 {
                c[b.trailing_zeros() as usize & 31] -= 1;
                b &= b - 1;
            }
        }
    }

    /// The run holding the cluster `c`, if it is free.
    #[inline]
    fn run_at(&self, c: u32) -> Option<(usize, Run)> {
        let i = self.runs.run_from(c);
        self.runs.get(i).filter(|r| r.start <= c).map(|r| (i, r))
    }

    /// Order of the maximal chunk holding the free cluster `c` of run `r`
    /// (`mb_find_order_for_block`): the largest aligned block around `c` inside the run.
    ///
    /// The aligned `2^o` block around `c` starts at or after `r.start` exactly while `c` and
    /// `r.start - 1` differ above bit `o`, and ends at or before `r.end` exactly while `c`
    /// and `r.end` do: the two highest differing bits bound the order.
    #[inline]
    fn order_in(&self, r: Run, c: u32) -> u32 {
        let left = if r.start == 0 {
            u32::MAX
        } else {
            fls(c ^ (r.start - 1)) - 1
        };
        let right = fls(c ^ r.end) - 1;
        left.min(right).min(self.max_order)
    }

    /// The free extent starting at `block`, grown chunk by chunk until it reaches `needed` or
    /// meets a used cluster (`mb_find_extent`). Buddy-granular: it can be longer than `needed`.
    /// Returns 0 if `block` is not free.
    ///
    /// Closed form of the kernel's walk: it ends at the run's end if that lies within
    /// `needed`, else at the end of the chunk holding the `needed`-th cluster.
    pub fn find_extent(&self, block: u32, needed: u32) -> u32 {
        match self.run_at(block) {
            Some((_, r)) => self.extent_in(r, block, needed),
            None => 0,
        }
    }

    /// [`Buddy::find_extent`] for `block` inside the free run `r`.
    #[inline]
    pub fn extent_in(&self, r: Run, block: u32, needed: u32) -> u32 {
        let last = block.saturating_add(needed.max(1) - 1);
        if last >= r.end {
            return r.end - block;
        }
        let o = self.order_in(r, last);
        (last | ((1u32 << o) - 1)) + 1 - block
    }

    /// Marks `[start, start + len)` used (`mb_mark_used`). Every cluster must be free.
    /// Returns the kernel's `tail | buddy << 16` value: the length still to mark and the order
    /// of the first chunk that had to be split, or 0 if no chunk was split.
    ///
    /// The run holding the range loses its chunks and its parts left and right of the range
    /// gain theirs: the kernel's splits end in the same canonical buddy.
    pub fn mark_used(&mut self, start: u32, len: u32) -> u32 {
        let end = start + len;
        let Some((i, r)) = self.run_at(start).filter(|(_, r)| end <= r.end && len > 0) else {
            debug_assert!(false, "mark_used of a used cluster: [{start}, {end})");
            return 0;
        };
        let ret = self.split_chunk(r, start, end);
        self.count(r, false);
        let (left, right) = (Run { end: start, ..r }, Run { start: end, ..r });
        match (start > r.start, end < r.end) {
            (true, true) => {
                self.runs.set(i, left);
                self.runs.insert(i + 1, right);
                self.fragments += 1;
            }
            (true, false) => self.runs.set(i, left),
            (false, true) => self.runs.set(i, right),
            (false, false) => {
                self.runs.remove(i);
                self.fragments -= 1;
            }
        }
        if start > r.start {
            self.count(left, true);
        }
        if end < r.end {
            self.count(right, true);
        }
        self.free -= len;
        if self.first_free == start {
            self.first_free += len;
        }
        self.check_after("mark_used", start, len);
        ret
    }

    /// `mb_mark_used`'s walk: from `start`, whole chunks inside `[start, end)` are taken as they
    /// are; the first chunk that is not (it starts before `start` or ends after `end`) is split.
    ///
    /// Closed form: the chunks are a partition of the run, so if the chunk holding `start`
    /// begins before it, that is the one; otherwise every chunk up to the one holding
    /// `end - 1` lies inside the range, and that last one is split if it ends after `end`.
    #[inline]
    fn split_chunk(&self, r: Run, start: u32, end: u32) -> u32 {
        let o = self.order_in(r, start);
        if start & ((1 << o) - 1) != 0 {
            return (end - start) | (o << 16);
        }
        let last = end - 1;
        let o = self.order_in(r, last);
        let cs = last & !((1u32 << o) - 1);
        if cs + (1 << o) > end {
            (end - cs) | (o << 16)
        } else {
            0
        }
    }

    /// Frees `[first, first + count)` into the buddy (`mb_free_blocks`). Every cluster must be
    /// in use; callers check (a double free is a caller error, reported before we get here).
    ///
    /// The range joins the free runs on either side; the merged run's chunks replace theirs,
    /// the canonical buddy the kernel's merging walk ends in.
    pub fn free_blocks(&mut self, first: u32, count: u32) {
        let end = first + count;
        let i = self.runs.run_starting_from(first);
        let prev = i.checked_sub(1).and_then(|k| self.runs.get(k));
        let next = self.runs.get(i);
        debug_assert!(
            count > 0
                && end <= self.group_size
                && prev.is_none_or(|r| r.end <= first)
                && next.is_none_or(|r| r.start >= end),
            "double free inside the buddy: [{first}, {end})"
        );
        let left = prev.filter(|r| r.end == first);
        let right = next.filter(|r| r.start == end);
        let mut merged = Run { start: first, end };
        if let Some(l) = left {
            self.count(l, false);
            merged.start = l.start;
        }
        if let Some(r) = right {
            self.count(r, false);
            merged.end = r.end;
        }
        match (left.is_some(), right.is_some()) {
            (true, true) => {
                self.runs.set(i - 1, merged);
                self.runs.remove(i);
                self.fragments -= 1;
            }
            (true, false) => self.runs.set(i - 1, merged),
            (false, true) => self.runs.set(i, merged),
            (false, false) => {
                self.runs.insert(i, merged);
                self.fragments += 1;
            }
        }
        self.count(merged, true);
        self.free += count;
        self.first_free = self.first_free.min(first);
        self.check_after("free_blocks", first, count);
    }

    /// With the `aggressive-check` feature (the kernel's `AGGRESSIVE_CHECK`, whose
    /// `mb_check_buddy` runs after every `mb_mark_used` and `mb_free_blocks`): the whole buddy
    /// against a regeneration from its runs after every change. Without it, nothing.
    #[inline(always)]
    fn check_after(&self, what: &str, start: u32, len: u32) {
        #[cfg(feature = "aggressive-check")]
        if let Err(e) = self.check(self.max_order - 1) {
            panic!("buddy inconsistent after {what} of [{start}, +{len}): {e}");
        }
        #[cfg(not(feature = "aggressive-check"))]
        let _ = (what, start, len);
    }

    /// Lowest-addressed free chunk of exactly `order` (the simple scan's pick).
    pub fn first_chunk_of_order(&self, order: u32) -> Option<u32> {
        if order == 0 || order > self.max_order {
            // Order-0 chunks are singletons; the kernel never asks (ac_2order ≥ 1).
            return None;
        }
        let mut i = self.runs.next_long(0, 1 << order);
        while let Some(k) = i {
            let r = self.runs.get(k).expect("index from next_long");
            if let Some((s, _)) = self.chunks(r).find(|&(_, o)| o == order) {
                return Some(s);
            }
            i = self.runs.next_long(k + 1, 1 << order);
        }
        None
    }

    /// First free cluster at or after `from` (tests: the scans walk the runs).
    #[cfg(test)]
    pub fn next_free(&self, from: u32) -> Option<u32> {
        self.runs
            .get(self.runs.run_from(from))
            .map(|r| r.start.max(from))
    }
    /// First used cluster at or after `from` (or the group size).
    #[cfg(test)]
    pub fn next_used(&self, from: u32) -> u32 {
        match self.run_at(from) {
            Some((_, r)) => r.end,
            None => from.min(self.group_size),
        }
    }

    /// The extents the complex scan measures from `from`, in address order: the free runs
    /// (with `skip_short`, only those with at least `needed` clusters from their start or
    /// `from`) cut into `mb_find_extent(needed)` pieces, as the kernel's walk that restarts
    /// at the end of each measured extent.
    #[cfg(test)]
    pub fn scan_extents(&self, from: u32, needed: u32, skip_short: bool) -> ScanExtents<'_> {
        ScanExtents {
            buddy: self,
            idx: self.runs.run_from(from),
            at: from,
            needed,
            skip_short,
        }
    }

    /// The first position `>= from` from which at least `len` clusters are free.
    #[cfg(test)]
    pub fn next_fit(&self, from: u32, len: u32) -> Option<u32> {
        self.scan_extents(from, len, true).next().map(|(s, _)| s)
    }

    /// Checks the runs' invariants and every derived value against a regeneration (test
    /// support).
    pub fn check(&self, bsbits: u32) -> Result<(), String> {
        let mut prev: Option<Run> = None;
        for i in 0..self.runs.len() {
            let r = self.runs.get(i).expect("in range");
            if r.start >= r.end || r.end > self.group_size || prev.is_some_and(|p| p.end >= r.start)
            {
                return Err(format!("free runs not sorted, disjoint and apart at {r:?}"));
            }
            prev = Some(r);
        }
        let inuse = self.in_use_bitmap();
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
        if fresh.runs != self.runs {
            return Err("free runs differ from regeneration".into());
        }
        Ok(())
    }
}

/// Iterator of [`Buddy::scan_extents`]: `(start, len)` pairs.
#[cfg(test)]
pub struct ScanExtents<'a> {
    buddy: &'a Buddy,
    idx: usize,
    at: u32,
    needed: u32,
    skip_short: bool,
}

#[cfg(test)]
impl Iterator for ScanExtents<'_> {
    type Item = (u32, u32);
    #[inline]
    fn next(&mut self) -> Option<(u32, u32)> {
        let runs = &self.buddy.runs;
        loop {
            let r = runs.get(self.idx)?;
            let s = r.start.max(self.at);
            if s < r.end && (!self.skip_short || r.end - s >= self.needed) {
                let len = self.buddy.extent_in(r, s, self.needed);
                self.at = s + len;
                return Some((s, len));
            }
            self.idx += 1;
            if self.skip_short {
                // Every later run starts after `at`: only the long ones are measured.
                self.idx = runs.next_long(self.idx, self.needed)?;
            }
        }
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

    /// Observed with the kernel's mb_groups: metadata in 0..129 leaves one chunk each of orders
    /// 0..=6 and 8..=12 and three of order 13.
    #[test]
    fn generation_matches_kernel_example() {
        let b = group_with_used(&[(0, 129)]);
        assert_eq!(b.counters(), &[1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 3]);
        assert_eq!((b.free(), b.fragments(), b.first_free()), (32639, 1, 129));
        assert_eq!(b.largest_free_order(), 13);
    }

    /// `mb_find_extent` grows the extent chunk by chunk.
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

    /// The kernel's per-order buddy bitmaps, built independently from the cluster bitmap
    /// (`ext4_mb_generate_buddy` with `ext4_mb_mark_free_simple`): `orders[o]` bit `j` set =
    /// `[j << o, (j + 1) << o)` is a maximal free chunk.
    fn kernel_orders(b: &Buddy) -> Vec<Bitmap> {
        let bm = b.in_use_bitmap();
        let bits = bm.len();
        let mut orders: Vec<Bitmap> = (0..=b.max_order).map(|o| Bitmap::new(bits >> o)).collect();
        let border = 1u32 << b.max_order;
        for (mut first, mut len) in bm.zero_runs(0, b.group_size) {
            while len > 0 {
                let order = (first | border)
                    .trailing_zeros()
                    .min(31 - len.leading_zeros());
                orders[order as usize].set(first >> order);
                first += 1 << order;
                len -= 1 << order;
            }
        }
        orders
    }

    /// `mb_find_order_for_block` on the kernel's bitmaps.
    fn order_at(orders: &[Bitmap], c: u32) -> u32 {
        (0..orders.len() as u32)
            .find(|&o| orders[o as usize].get(c >> o))
            .expect("free cluster in no chunk")
    }

    /// The kernel's chunk-by-chunk `mb_find_extent`, as a reference for the closed form.
    fn find_extent_walk(b: &Buddy, block: u32, needed: u32) -> u32 {
        let bm = b.in_use_bitmap();
        if block >= b.group_size || bm.get(block) {
            return 0;
        }
        let orders = kernel_orders(b);
        let mut order = order_at(&orders, block);
        let mut len = (1u32 << order) - (block & ((1u32 << order) - 1));
        let mut idx = block >> order;
        while needed > len {
            if idx + 1 >= orders[order as usize].len() {
                break;
            }
            let next = (idx + 1) << order;
            if bm.get(next) {
                break;
            }
            order = order_at(&orders, next);
            idx = next >> order;
            len += 1 << order;
        }
        len.min(b.group_size - block)
    }

    /// `mb_mark_used`'s return value from the kernel's bitmaps: the first chunk the range
    /// does not cover whole.
    fn mark_used_ret_walk(b: &Buddy, start: u32, len: u32) -> u32 {
        let orders = kernel_orders(b);
        let (end, mut p) = (start + len, start);
        while p < end {
            let order = order_at(&orders, p);
            let cs = p & !((1u32 << order) - 1);
            let ce = cs + (1 << order);
            if cs != p || ce > end {
                return (end - p) | (order << 16);
            }
            p = ce;
        }
        0
    }

    /// Builds a 4000-cluster group (bitmap of 4096) with `used` marked.
    fn sample(used: &[(u32, u32)]) -> Buddy {
        let mut bm = Bitmap::new(4096);
        for &(s, l) in used {
            bm.set_range(s, (s + l).min(4096));
        }
        Buddy::generate(&bm, 4000, 4000, 9)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn find_extent_matches_kernel_walk(used in proptest::collection::vec((0u32..4096, 1u32..300), 0..40), probes in proptest::collection::vec((0u32..4096, 1u32..5000), 1..40)) {
            let b = sample(&used);
            for (block, needed) in probes {
                prop_assert_eq!(b.find_extent(block, needed), find_extent_walk(&b, block, needed), "block {} needed {}", block, needed);
            }
        }

        #[test]
        fn order_in_matches_kernel_bitmaps(used in proptest::collection::vec((0u32..4096, 1u32..300), 0..60), probes in proptest::collection::vec(0u32..4000, 1..40)) {
            let b = sample(&used);
            let orders = kernel_orders(&b);
            for c in probes {
                if let Some((_, r)) = b.run_at(c) {
                    prop_assert_eq!(b.order_in(r, c), order_at(&orders, c), "cluster {}", c);
                }
            }
        }

        #[test]
        fn chunks_match_kernel_bitmaps(used in proptest::collection::vec((0u32..4096, 1u32..300), 0..60)) {
            let b = sample(&used);
            let orders = kernel_orders(&b);
            for o in 0..=b.max_order {
                let kernel = orders[o as usize].count_ones(0, orders[o as usize].len());
                prop_assert_eq!(b.counters()[o as usize], kernel, "order {}", o);
                let first = orders[o as usize].find_next_set(0, orders[o as usize].len()).map(|j| j << o);
                let want = if o == 0 { None } else { first };
                prop_assert_eq!(b.first_chunk_of_order(o), want, "order {}", o);
            }
        }

        #[test]
        fn mark_used_return_matches_kernel_walk(used in proptest::collection::vec((0u32..4096, 1u32..300), 0..40), at in 0u32..4000, len in 1u32..600) {
            let mut b = sample(&used);
            if let Some(s) = b.next_free(at) {
                let room = b.next_used(s) - s;
                let len = len.min(room);
                let want = mark_used_ret_walk(&b, s, len);
                prop_assert_eq!(b.mark_used(s, len), want);
                prop_assert!(b.check(9).is_ok(), "{:?}", b.check(9));
            }
        }

        #[test]
        fn scan_matches_kernel_walk(used in proptest::collection::vec((0u32..4096, 1u32..200), 0..80), from in 0u32..4096, len in 1u32..600) {
            let b = sample(&used);
            // The walk of the complex scan over the bitmap: from `from`, skip the free runs
            // shorter than `len`.
            let bm = &b.in_use_bitmap();
            let mut i = from;
            let naive = loop {
                let Some(s) = bm.find_next_zero(i, 4000) else { break None };
                let j = bm.find_next_set(s, 4000).unwrap_or(4000);
                if j - s >= len {
                    break Some(s);
                }
                i = j;
            };
            prop_assert_eq!(b.next_fit(from, len), naive);
            prop_assert_eq!(b.next_free(from), bm.find_next_zero(from, 4000));
            let walk: Vec<(u32, u32)> = b.scan_extents(from, len, false).collect();
            let mut i = from;
            let mut kernel = Vec::new();
            while let Some(s) = bm.find_next_zero(i, 4000) {
                let l = find_extent_walk(&b, s, len);
                kernel.push((s, l));
                i = s + l;
            }
            prop_assert_eq!(walk, kernel);
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
                let runs: Vec<(u32, u32)> = b.free_runs().collect();
                prop_assert_eq!(runs, used.zero_runs(0, 4096).collect::<Vec<_>>());
                let orders = kernel_orders(&b);
                for o in 0..=b.max_order {
                    prop_assert_eq!(b.counters()[o as usize], orders[o as usize].count_ones(0, orders[o as usize].len()));
                }
            }
        }
    }
}
