//! The mb_optimize_scan indexes kept per size class: for each order, one [`GroupSet`] of
//! the largest-free-order index and one of the average-fragment index for each
//! [`SizeClass`], every group in the sets of its current class.
//!
//! Why: a size-class stage (see [`crate::group::size_class`]) may take groups of one class only.
//! Walking one index of every group and rejecting the others one by one cost about 23
//! rejections per request on the churn benchmark; with sets per class a stage reads only the
//! groups of the classes it admits. The kernel's walk (size classes off, or the last stage)
//! reads the union of the classes' sets word by word ([`GroupSet::next_in_union`]), which
//! meets the groups in the ascending order of one set holding them all; while no group was
//! ever classed it reads the none set alone, exactly the kernel's single index.
//!
//! The four classes' sets of one order sit side by side, so that a walk picks its sets with a
//! bit mask and builds nothing per order.
//!
//! A group sits in the sets named by `GroupState::class_index`: `publish` moves it between
//! orders inside that class, a claim or a reset moves it between classes, both under the
//! group lock. Readers walk without locks, as the kernel walks its xarrays.

use crate::group::index::GroupSet;
use crate::group::info::IndexChange;
use crate::group::size_class::{Classes, SizeClass};
use crate::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use crate::sync::percpu::Padded;
// The lists' bookkeeping (join times, their clocks, the on switch) is the library's own, not a
// line the kernel shares: plain atomics that no simulator hook sees.
use std::sync::atomic::{AtomicBool as PlainBool, AtomicU64 as PlainU64, Ordering::Relaxed};

/// Which index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `s_mb_largest_free_orders`.
    Largest,
    /// `s_mb_avg_fragment_size`.
    Avg,
}

/// Both indexes, split by class.
pub struct ClassIndex {
    /// Per order, a set per class (indexed by the class's value).
    largest: Box<[[GroupSet; 4]]>,
    avg: Box<[[GroupSet; 4]]>,
    /// Classes that ever held a group (a bit per class value): set before a group first
    /// enters the class's sets, never cleared. Walks read only these, so that with size
    /// classes never on a walk reads one set per order, as the kernel. Relaxed: a walk that
    /// misses a class just set misses the group being moved, as any lock-free walk may miss a
    /// group in the middle of a move.
    used: AtomicU8,
    /// The lists of kernels before 6.17 (`order_lists`): see [`OrderLists`].
    pub(crate) lists: OrderLists,
}

/// Before 6.17 the two indexes were lists, one per order, each with its rwlock
/// (`s_mb_largest_free_orders[]` / `_locks[]`, `s_mb_avg_fragment_size[]` / `_locks[]`): a
/// group joined the tail of its new order's list at every order change (`list_add_tail` in
/// `mb_set_largest_free_order`, `mb_update_avg_fragment_size`), and the walks
/// (`ext4_mb_choose_next_group_p2_aligned`, `ext4_mb_find_good_group_avg_frag_lists`) took
/// the first good group from the head: the group longest at that order, not the next one
/// after the goal. The sets above hold the members; this keeps, per index and group, the
/// time it joined its set (a tick of a per-index clock), so that a walk can meet the members
/// in the lists' order, and the lists' lock words, written by every walk (`read_lock`,
/// `read_unlock`: the reader count of a `qrwlock` is one word) and every move.
///
/// Kept only while on: stamping is a write to a shared clock at every order change, which
/// 6.18's lock-free indexes do not pay.
pub(crate) struct OrderLists {
    on: PlainBool,
    /// Per index, per group: when it last joined a list (0: never since the lists went on).
    joined: [Box<[PlainU64]>; 2],
    clock: [Padded<PlainU64>; 2],
    /// Per index, per order: the rwlock's word.
    locks: [Box<[Padded<AtomicU32>]>; 2],
}

impl OrderLists {
    fn new(num_orders: usize, groups: u32) -> Self {
        let joined = || (0..groups).map(|_| PlainU64::new(0)).collect();
        let locks = || (0..num_orders).map(|_| Padded(AtomicU32::new(0))).collect();
        OrderLists {
            on: PlainBool::new(false),
            joined: [joined(), joined()],
            clock: [Padded(PlainU64::new(0)), Padded(PlainU64::new(0))],
            locks: [locks(), locks()],
        }
    }

    pub(crate) fn on(&self) -> bool {
        self.on.load(Relaxed)
    }

    /// `read_lock` or `read_unlock` of `kind`'s list at `order` (a write of its lock word).
    pub(crate) fn touch(&self, kind: Kind, order: usize) {
        let w = &self.locks[kind as usize][order].0;
        w.fetch_add(1, Ordering::Relaxed);
    }

    /// When `g` joined its list of `kind` (ascending = the list's order from its head).
    pub(crate) fn joined(&self, kind: Kind, g: u32) -> u64 {
        self.joined[kind as usize][g as usize].load(Relaxed)
    }

    /// `g` joins the tail of `kind`'s list at `order` (under the group lock, and the list's
    /// write lock in the kernel: its word written twice).
    fn join(&self, kind: Kind, g: u32, order: usize) {
        self.touch(kind, order);
        let t = self.clock[kind as usize].0.fetch_add(1, Relaxed) + 1;
        self.joined[kind as usize][g as usize].store(t, Relaxed);
        self.touch(kind, order);
    }

    /// `g` leaves `kind`'s list at `order` (`list_del` under the write lock).
    fn leave(&self, kind: Kind, order: usize) {
        self.touch(kind, order);
        self.touch(kind, order);
    }
}

impl ClassIndex {
    pub fn new(num_orders: usize, groups: u32) -> Self {
        let index = || {
            (0..num_orders)
                .map(|_| std::array::from_fn(|_| GroupSet::new(groups)))
                .collect()
        };
        ClassIndex {
            largest: index(),
            avg: index(),
            used: AtomicU8::new(Classes::of(SizeClass::None).bits()),
            lists: OrderLists::new(num_orders, groups),
        }
    }

    /// Turns the lists on or off. On: every group now in an index joins its list in
    /// ascending group order, as the kernel's lists fill when the buddies are built at
    /// mount (`ext4_mb_generate_buddy` group by group). Under the tunables' writer lock.
    pub fn set_lists(&self, on: bool) {
        if on == self.lists.on() {
            return;
        }
        self.lists.on.store(on, Relaxed);
        if !on {
            return;
        }
        for kind in [Kind::Largest, Kind::Avg] {
            let orders = match kind {
                Kind::Largest => self.largest.len(),
                Kind::Avg => self.avg.len(),
            };
            for g in 0..self.lists.joined[0].len() as u32 {
                for order in 0..orders {
                    if self.sets(kind, order).iter().any(|s| s.contains(g)) {
                        self.lists.join(kind, g, order);
                    }
                }
            }
        }
    }

    /// The sets of every class at `order` of index `kind`.
    fn sets(&self, kind: Kind, order: usize) -> &[GroupSet; 4] {
        match kind {
            Kind::Largest => &self.largest[order],
            Kind::Avg => &self.avg[order],
        }
    }

    /// Moves `g` of class `class` from order `old` to `new` (−1 = absent) of index `kind`;
    /// `insert` false only removes.
    pub fn relocate(&self, kind: Kind, class: SizeClass, g: u32, old: i32, new: i32, insert: bool) {
        let lists = self.lists.on();
        if old >= 0 {
            self.sets(kind, old as usize)[class as usize].remove(g);
            if lists {
                self.lists.leave(kind, old as usize);
            }
        }
        if insert && new >= 0 {
            if lists {
                self.lists.join(kind, g, new as usize);
            }
            self.sets(kind, new as usize)[class as usize].insert(g);
        }
    }

    /// Applies one publish's moves to group `g` of class `class` (`mb_set_largest_free_order`,
    /// `mb_update_avg_fragment_size`): out of its old largest free order always, into the new
    /// one only with the indexes on and free space left; the average-fragment index moves only
    /// with the indexes on. Out of line: most buddy changes move nothing, and the caller
    /// tests for that first.
    #[inline(never)]
    pub fn apply(&self, g: u32, class: SizeClass, c: &IndexChange, optimize_scan: bool) {
        if c.old_largest != c.new_largest {
            let insert = optimize_scan && c.free > 0;
            let (old, new) = (c.old_largest, c.new_largest);
            self.relocate(Kind::Largest, class, g, old, new, insert);
        }
        if optimize_scan && c.old_avg != c.new_avg {
            self.relocate(Kind::Avg, class, g, c.old_avg, c.new_avg, true);
        }
    }

    /// Turning the indexes on: group `g` back in the largest-free-order index at `order`
    /// (with free space), which it left if its order changed while they were off.
    pub fn reinsert_largest(&self, g: u32, class: SizeClass, order: i32, free: bool) {
        self.relocate(Kind::Largest, class, g, order, order, free);
    }

    /// Moves group `g` from the sets of class `from` to those of `to`, at the orders where
    /// it sits (`largest`, `avg`; −1 = absent). A set the group is not in stays without it:
    /// the largest-free index leaves out groups with no free space or published with optimize
    /// scan off. Inserted before removed, to keep short the time in which a walk can miss the
    /// group (lock-free walks may miss a group in the middle of a move, as they may one moving
    /// between orders; the checks under the lock decide). Called under the group lock: no
    /// other writer touches `g`'s bits meanwhile, so `contains` is exact.
    pub fn move_group(&self, g: u32, from: SizeClass, to: SizeClass, largest: i32, avg: i32) {
        if from == to {
            return;
        }
        self.mark_used(to);
        for (kind, order) in [(Kind::Largest, largest), (Kind::Avg, avg)] {
            if order < 0 {
                continue;
            }
            let sets = self.sets(kind, order as usize);
            if sets[from as usize].contains(g) {
                sets[to as usize].insert(g);
                sets[from as usize].remove(g);
            }
        }
    }

    /// Where group `g` sits in index `kind`: every (order, class) whose set holds it (test
    /// support: a group is in at most one set of each index).
    pub fn places_of(&self, kind: Kind, g: u32) -> Vec<(i32, SizeClass)> {
        let index = match kind {
            Kind::Largest => &self.largest,
            Kind::Avg => &self.avg,
        };
        let classes = [
            SizeClass::None,
            SizeClass::Small,
            SizeClass::Medium,
            SizeClass::Large,
        ];
        let mut out = Vec::new();
        for (order, sets) in index.iter().enumerate() {
            for c in classes {
                if sets[c as usize].contains(g) {
                    out.push((order as i32, c));
                }
            }
        }
        out
    }

    fn mark_used(&self, c: SizeClass) {
        let bit = Classes::of(c).bits();
        if self.used.load(Ordering::Relaxed) & bit == 0 {
            self.used.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// A walk of the classes `classes`: those of them in use, and the other classes in use.
    #[inline]
    pub fn walk(&self, classes: Classes) -> Walk {
        let used = self.used.load(Ordering::Relaxed);
        Walk {
            walked: used & classes.bits(),
            passed: used & !classes.bits(),
        }
    }

    /// The sets of one order as `walk` sees them.
    #[inline]
    pub fn order_sets(&self, kind: Kind, order: usize, walk: Walk) -> OrderSets<'_> {
        OrderSets {
            sets: self.sets(kind, order),
            walk,
        }
    }

    /// Groups per order over all classes (the `mb_structs_summary` counts): largest-free
    /// order, then average fragment.
    pub fn counts(&self) -> (Vec<u32>, Vec<u32>) {
        let count = |index: &[[GroupSet; 4]]| {
            index
                .iter()
                .map(|sets| sets.iter().map(GroupSet::count).sum())
                .collect()
        };
        (count(&self.largest), count(&self.avg))
    }
}

/// The classes one walk reads (`walked`) and those in use that it passes over (`passed`),
/// a bit per class value; taken once per criterion's walk.
#[derive(Debug, Clone, Copy)]
pub struct Walk {
    walked: u8,
    passed: u8,
}

/// One order's sets as one walk sees them.
pub struct OrderSets<'a> {
    sets: &'a [GroupSet; 4],
    walk: Walk,
}

impl OrderSets<'_> {
    /// The one set to read when the walk takes one class and passes over none: the kernel's
    /// single index, read as the kernel reads it.
    #[inline]
    pub fn alone(&self) -> Option<&GroupSet> {
        let w = self.walk.walked;
        (self.walk.passed == 0 && w.is_power_of_two())
            .then(|| &self.sets[w.trailing_zeros() as usize & 3])
    }
}

/// What an index walk reads: the groups it visits, in ascending order, and those of other
/// classes that it passes over.
pub trait WalkSets {
    /// First visited group `>= from` and `< end`.
    fn next(&self, from: u32, end: u32) -> Option<u32>;
    /// First visited group `>= from` and `< end` that `keep` accepts.
    fn next_where(&self, from: u32, end: u32, keep: impl FnMut(u32) -> bool) -> Option<u32>;
    /// Whether no visited group is in the sets, at any position (`xa_empty`).
    fn is_empty(&self) -> bool;
    /// Whether the walk passes over the groups of some class in use.
    fn passes_over(&self) -> bool;
    /// Whether `g` is one of the groups the walk passes over.
    fn passed(&self, g: u32) -> bool;
}

/// One set read alone ([`OrderSets::alone`]).
impl WalkSets for GroupSet {
    #[inline]
    fn next(&self, from: u32, end: u32) -> Option<u32> {
        GroupSet::next(self, from, end)
    }
    #[inline]
    fn next_where(&self, from: u32, end: u32, keep: impl FnMut(u32) -> bool) -> Option<u32> {
        GroupSet::next_where(self, from, end, keep)
    }
    #[inline]
    fn is_empty(&self) -> bool {
        GroupSet::is_empty(self)
    }
    #[inline]
    fn passes_over(&self) -> bool {
        false
    }
    fn passed(&self, _g: u32) -> bool {
        false
    }
}

impl WalkSets for OrderSets<'_> {
    #[inline]
    fn next(&self, from: u32, end: u32) -> Option<u32> {
        match self.walk.walked {
            0 => None,
            m if m.is_power_of_two() => self.sets[m.trailing_zeros() as usize & 3].next(from, end),
            m => GroupSet::next_in_union(self.sets, m, from, end),
        }
    }
    #[inline]
    fn next_where(&self, from: u32, end: u32, keep: impl FnMut(u32) -> bool) -> Option<u32> {
        match self.walk.walked {
            0 => None,
            m if m.is_power_of_two() => {
                self.sets[m.trailing_zeros() as usize & 3].next_where(from, end, keep)
            }
            m => GroupSet::next_in_union_where(self.sets, m, from, end, keep),
        }
    }
    #[inline]
    fn is_empty(&self) -> bool {
        (0..4).all(|i| self.walk.walked >> i & 1 == 0 || self.sets[i].is_empty())
    }
    #[inline]
    fn passes_over(&self) -> bool {
        self.walk.passed != 0
    }
    fn passed(&self, g: u32) -> bool {
        (0..4).any(|i| self.walk.passed >> i & 1 == 1 && self.sets[i].contains(g))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// The kernel's case reads its set alone; the walk through [`OrderSets`] must agree.
    fn check_alone(sets: &OrderSets) -> Result<(), TestCaseError> {
        if let Some(set) = sets.alone() {
            for g in 0..GROUPS {
                prop_assert_eq!(set.next(g, GROUPS), WalkSets::next(sets, g, GROUPS));
            }
        }
        Ok(())
    }

    const GROUPS: u32 = 700;
    const ORDERS: usize = 4;
    const CLASSES: [SizeClass; 4] = [
        SizeClass::None,
        SizeClass::Small,
        SizeClass::Medium,
        SizeClass::Large,
    ];

    /// A group's place: its class and its order in the largest-free index (−1 = absent).
    #[derive(Clone, Copy, Debug)]
    struct Place {
        class: SizeClass,
        order: i32,
    }

    /// Moves as `publish` and `set_class` make them: to another order, or to another class.
    #[derive(Clone, Debug)]
    enum Op {
        Order(u32, i32),
        Class(u32, SizeClass),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..GROUPS, -1..ORDERS as i32).prop_map(|(g, o)| Op::Order(g, o)),
            (0..GROUPS, 0..4usize).prop_map(|(g, c)| Op::Class(g, CLASSES[c])),
        ]
    }

    /// Every walk, walked set by set with the passed-over groups, against the one-index walk
    /// it replaces: every group of the order in ascending order, filtered by class.
    fn check_walks(ix: &ClassIndex, model: &BTreeMap<u32, Place>) -> Result<(), TestCaseError> {
        for order in 0..ORDERS {
            let all: Vec<(u32, SizeClass)> = model
                .iter()
                .filter(|(_, p)| p.order == order as i32)
                .map(|(&g, p)| (g, p.class))
                .collect();
            for bits in 1..16u8 {
                let walk = Classes::from_bits(bits);
                let sets = ix.order_sets(Kind::Largest, order, ix.walk(walk));
                check_alone(&sets)?;
                let mut got = Vec::new();
                let mut g = 0;
                while let Some(f) = sets.next(g, GROUPS) {
                    got.push(f);
                    g = f + 1;
                }
                let want: Vec<u32> = all
                    .iter()
                    .filter(|(_, c)| walk.has(*c))
                    .map(|&(g, _)| g)
                    .collect();
                prop_assert_eq!(&got, &want, "order {} classes {:#b}", order, bits);
                for g in 0..GROUPS {
                    let passed = all.iter().any(|&(x, c)| x == g && !walk.has(c));
                    prop_assert_eq!(sets.passed(g), passed, "group {}", g);
                }
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn class_walks_match_the_filtered_walk(ops in proptest::collection::vec(op(), 0..400)) {
            let ix = ClassIndex::new(ORDERS, GROUPS);
            let mut model: BTreeMap<u32, Place> = (0..GROUPS)
                .map(|g| (g, Place { class: SizeClass::None, order: -1 }))
                .collect();
            for op in ops {
                match op {
                    Op::Order(g, o) => {
                        let p = model.get_mut(&g).unwrap();
                        ix.relocate(Kind::Largest, p.class, g, p.order, o, true);
                        p.order = o;
                    }
                    Op::Class(g, c) => {
                        let p = model.get_mut(&g).unwrap();
                        ix.move_group(g, p.class, c, p.order, -1);
                        p.class = c;
                    }
                }
            }
            check_walks(&ix, &model)?;
            let per_order = (0..ORDERS)
                .map(|o| model.values().filter(|p| p.order == o as i32).count() as u32)
                .collect::<Vec<_>>();
            prop_assert_eq!(ix.counts().0, per_order);
        }
    }

    #[test]
    fn unused_classes_are_not_read() {
        let ix = ClassIndex::new(ORDERS, GROUPS);
        ix.relocate(Kind::Largest, SizeClass::None, 5, -1, 2, true);
        let sets = ix.order_sets(Kind::Largest, 2, ix.walk(Classes::ALL));
        assert!(!sets.passes_over());
        assert_eq!(sets.alone().and_then(|s| s.next(0, GROUPS)), Some(5));
        ix.move_group(5, SizeClass::None, SizeClass::Small, 2, -1);
        let small = ix.order_sets(Kind::Largest, 2, ix.walk(Classes::of(SizeClass::Small)));
        assert_eq!(small.next(0, GROUPS), Some(5));
        assert!(small.passes_over() && !small.passed(5));
        let none = ix.order_sets(Kind::Largest, 2, ix.walk(Classes::of(SizeClass::None)));
        assert!(none.passed(5) && none.next(0, GROUPS).is_none());
    }
}

/// Model checks of how `Allocator::publish` and `set_tunable`'s switch of `mb_optimize_scan`
/// meet in the largest-free-order index
/// (`RUSTFLAGS="--cfg loom" cargo test --release -p mballoc --lib loom_`).
///
/// The index moves are the library's own ([`ClassIndex::apply`],
/// [`ClassIndex::reinsert_largest`], over loom's atomics in [`GroupSet`]); the skeleton around
/// them is the allocator's, written out here because the allocator's group locks are not
/// loom's: a request changes the group's order and publishes it under the group lock, reading
/// the live `optimize_scan` mirror there; `set_tunable` stores the mirror first, then takes
/// every group lock in turn and, turning the indexes on, puts the group back at its order.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicBool;
    use loom::sync::{Arc, Mutex};
    use loom::thread;

    const G: u32 = 3;
    const ORDERS: usize = 4;

    /// One group (its largest free order behind its lock), the indexes and the mirror.
    struct Fs {
        index: ClassIndex,
        optimize_scan: AtomicBool,
        order: Mutex<i32>,
    }

    /// A group at order 3 with free space, indexed there, with the indexes now at `on`.
    fn fs(on: bool) -> Arc<Fs> {
        let index = ClassIndex::new(ORDERS, 64);
        index.relocate(Kind::Largest, SizeClass::None, G, -1, 3, true);
        Arc::new(Fs {
            index,
            optimize_scan: AtomicBool::new(on),
            order: Mutex::new(3),
        })
    }

    /// How a request learns whether the indexes are on.
    #[derive(Clone, Copy)]
    enum Reads {
        /// The live mirror, under the group lock (`Allocator::publish`).
        Live,
        /// A copy taken when the request began (what an earlier `publish` read, before it took the live mirror under the group lock).
        Snapshot(bool),
    }

    /// A request whose buddy change takes the group's largest free order to `to`.
    fn request(fs: &Fs, to: i32, reads: Reads) {
        let mut order = fs.order.lock().unwrap();
        let on = match reads {
            Reads::Live => fs.optimize_scan.load(Ordering::Relaxed),
            Reads::Snapshot(on) => on,
        };
        let change = IndexChange {
            old_largest: *order,
            new_largest: to,
            old_avg: 0,
            new_avg: 0,
            free: 1,
        };
        fs.index.apply(G, SizeClass::None, &change, on);
        *order = to;
    }

    /// `set_tunable("mb_optimize_scan", on)` for the one group.
    fn switch(fs: &Fs, on: bool) {
        fs.optimize_scan.store(on, Ordering::Relaxed);
        let order = fs.order.lock().unwrap();
        if on {
            fs.index.reinsert_largest(G, SizeClass::None, *order, true);
        }
    }

    /// A request and the switch, concurrently; returns the group's final order and where
    /// the index holds it.
    fn race(on_before: bool, reads: Reads) -> (i32, Vec<(i32, SizeClass)>) {
        let fs = fs(on_before);
        let req = {
            let fs = fs.clone();
            thread::spawn(move || request(&fs, 2, reads))
        };
        let sw = {
            let fs = fs.clone();
            thread::spawn(move || switch(&fs, !on_before))
        };
        req.join().unwrap();
        sw.join().unwrap();
        let order = *fs.order.lock().unwrap();
        (order, fs.index.places_of(Kind::Largest, G))
    }

    /// Turning the indexes on while a request moves the group: whichever runs first, the
    /// group ends in the index at its order (a CR_POWER2_ALIGNED walk finds it).
    #[test]
    fn loom_publish_races_turning_indexes_on() {
        loom::model(|| {
            let (order, places) = race(false, Reads::Live);
            assert_eq!(places, vec![(order, SizeClass::None)]);
        });
    }

    /// The same race with the request's snapshot (indexes off when it began): the model
    /// checker finds the order in which the group is lost, the bug the live mirror fixed.
    #[test]
    #[should_panic(expected = "assertion")]
    fn loom_publish_with_a_stale_snapshot_loses_the_group() {
        loom::model(|| {
            let (order, places) = race(false, Reads::Snapshot(false));
            assert_eq!(places, vec![(order, SizeClass::None)]);
        });
    }

    /// Turning the indexes off while a request moves the group: the group is at most at its
    /// order (off, a move only removes), never left at a stale order.
    #[test]
    fn loom_publish_races_turning_indexes_off() {
        loom::model(|| {
            let (order, places) = race(true, Reads::Live);
            assert!(
                places.is_empty() || places == vec![(order, SizeClass::None)],
                "{places:?} at order {order}"
            );
        });
    }
}
