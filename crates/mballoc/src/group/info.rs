//! One block group: its lock, its loaded state (on-disk bitmap and buddy), the frees waiting
//! for commit, and the summary values the scans read without the lock (`ext4_group_info`).

use smallvec::SmallVec;

use crate::group::bitmap::Bitmap;
use crate::group::buddy::{avg_fragment_order, Buddy};
use crate::group::size_class::SizeClass;
use crate::sync::atomic::{AtomicI32, AtomicU32, AtomicU8, Ordering};
use crate::sync::Mutex;

/// Clusters freed in a transaction that has not committed yet (`struct ext4_free_data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingFree {
    pub tid: u64,
    pub start: u32,
    pub len: u32,
}

/// A live inode preallocation in this group, as the group knows it (`bb_prealloc_list`): where
/// it lies and whose it is. A free of blocks it handed out finds it here, whichever owner the
/// caller names, so that the PA is retired before those blocks can be reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaSpan {
    /// First cluster, in the group.
    pub start: u32,
    pub len: u32,
    pub owner: u64,
    /// The PA's logical start: its key in the owner's tree.
    pub lstart: u32,
}

impl PaSpan {
    pub fn overlaps(&self, start: u32, len: u32) -> bool {
        self.start < start + len && start < self.start + self.len
    }
}

/// The part of a group that exists only once its bitmap was read.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The on-disk bitmap: blocks handed to owners (not preallocated-but-unused ones).
    pub disk: Bitmap,
    /// In-core bitmap and buddy: disk ∪ preallocations ∪ pending frees.
    pub buddy: Buddy,
}

/// Everything behind the group lock.
#[derive(Debug, Default)]
pub struct GroupState {
    /// Boxed: a group that was never read costs a pointer, and `Group` stays one cache-line pair.
    pub loaded: Option<Box<Loaded>>,
    pub pending: Vec<PendingFree>,
    /// On the allocator's list of groups with frees waiting for a commit.
    pub listed: bool,
    /// Free clusters per the descriptor (on-disk view: pending frees count as free).
    pub desc_free: u32,
    /// Index positions last published (kernel `bb_largest_free_order`,
    /// `bb_avg_fragment_size_order`).
    pub largest_order: i32,
    pub avg_order: i32,
    /// The class whose index sets hold the group ([`crate::group::class_index`]): the class as of
    /// the last claim or reset. Kept with the orders above so that a move reads where the
    /// group's index entries are from the state the lock guards, like an order move.
    pub class_index: SizeClass,
    /// The group's live inode preallocations (see [`PaSpan`]).
    pub inode_pas: Vec<PaSpan>,
}

/// [`Group::class_home`] of a class-less group.
pub const NO_HOME: u32 = u32::MAX;

/// One group, aligned to its own cache lines: threads working in neighbouring groups must not
/// share the line of one group's lock and lock-free summary with the next group's.
#[repr(align(128))]
pub struct Group {
    pub no: u32,
    pub lock: Mutex<GroupState>,
    /// `bb_free`: in-core free clusters, readable without the lock.
    pub free: AtomicU32,
    /// `bb_fragments`.
    pub fragments: AtomicU32,
    /// `bb_largest_free_order` (−1 = none or not initialised).
    pub largest_order: AtomicI32,
    /// Size class of the group's data (seed 002, [`crate::group::size_class::SizeClass`] as `u8`).
    /// Written only under the group lock; read without it by the scans.
    pub class: AtomicU8,
    /// The CPU whose request claimed the class (`size_class_per_cpu`); [`NO_HOME`] while
    /// class-less. Written with `class`, under the group lock.
    pub class_home: AtomicU32,
    /// Free clusters when the allocator was built: back at (or above) this, the group holds no
    /// data allocated since, and its size class resets.
    pub baseline_free: u32,
}

impl Group {
    /// A group not loaded yet: its free count comes from the descriptor.
    pub fn unloaded(no: u32, desc_free: u32) -> Group {
        Group {
            no,
            lock: Mutex::new(GroupState {
                loaded: None,
                pending: Vec::new(),
                listed: false,
                desc_free,
                largest_order: -1,
                avg_order: -1,
                class_index: SizeClass::None,
                inode_pas: Vec::new(),
            }),
            free: AtomicU32::new(desc_free),
            fragments: AtomicU32::new(0),
            largest_order: AtomicI32::new(-1),
            class: AtomicU8::new(0),
            class_home: AtomicU32::new(NO_HOME),
            baseline_free: desc_free,
        }
    }

    pub fn bb_free(&self) -> u32 {
        self.free.load(Ordering::Relaxed)
    }
    pub fn bb_fragments(&self) -> u32 {
        self.fragments.load(Ordering::Relaxed)
    }
    pub fn size_class(&self) -> SizeClass {
        SizeClass::from_u8(self.class.load(Ordering::Relaxed))
    }
    /// Holds nothing allocated since the allocator was built.
    pub fn is_empty(&self) -> bool {
        self.bb_free() >= self.baseline_free
    }
}

/// What the index update needs to know after a buddy change.
pub struct IndexChange {
    pub old_largest: i32,
    pub new_largest: i32,
    pub old_avg: i32,
    pub new_avg: i32,
    pub free: u32,
}

impl GroupState {
    /// `ext4_mb_free_metadata`: records a free waiting for its transaction's commit, merged
    /// into a pending free of the same transaction that ends where it starts or starts where
    /// it ends (`ext4_freed_extents_can_be_merged`), else inserted in place. `pending` stays
    /// sorted by start, so the neighbours are found by a binary search, as the kernel finds
    /// them in `bb_free_root`. Returns how many neighbours it merged with (0, 1 or 2): what
    /// decides how often the kernel takes `s_md_lock` for it (`Allocator::free_md_locks`).
    pub fn add_pending(&mut self, p: PendingFree) -> u8 {
        let at = self.pending.partition_point(|q| q.start < p.start);
        debug_assert!(
            self.pending
                .get(at)
                .is_none_or(|q| q.start >= p.start + p.len),
            "pending frees overlap at {p:?}"
        );
        let joins_prev = at > 0 && {
            let q = self.pending[at - 1];
            q.tid == p.tid && q.start + q.len == p.start
        };
        let joins_next = self
            .pending
            .get(at)
            .is_some_and(|q| q.tid == p.tid && p.start + p.len == q.start);
        match (joins_prev, joins_next) {
            (true, true) => {
                let next = self.pending.remove(at);
                self.pending[at - 1].len += p.len + next.len;
                2
            }
            (true, false) => {
                self.pending[at - 1].len += p.len;
                1
            }
            (false, true) => {
                let q = &mut self.pending[at];
                q.start = p.start;
                q.len += p.len;
                1
            }
            (false, false) => {
                self.pending.insert(at, p);
                0
            }
        }
    }

    /// Forgets the registered PA that starts at `start` (retired or used up).
    pub fn unregister_pa(&mut self, start: u32) {
        if let Some(i) = self.inode_pas.iter().position(|p| p.start == start) {
            self.inode_pas.swap_remove(i);
        }
    }

    #[inline]
    pub fn has_pa_overlapping(&self, start: u32, len: u32) -> bool {
        self.inode_pas.iter().any(|p| p.overlaps(start, len))
    }

    /// The registered PAs overlapping `[start, start + len)`.
    pub fn pas_overlapping(&self, start: u32, len: u32) -> SmallVec<[PaSpan; 2]> {
        self.inode_pas
            .iter()
            .filter(|p| p.overlaps(start, len))
            .copied()
            .collect()
    }

    /// The invariants that keep a loaded group's views in step (whole-structure, so only the
    /// `aggressive-check` feature runs it after every change; see `Allocator::check_group`):
    /// the buddy matches a regeneration; the descriptor's free count is the on-disk bitmap's;
    /// every cluster free in-core is free on disk; a pending free is free on disk and not yet
    /// free in-core; a live inode preallocation is unavailable in-core (its unused part is
    /// the owner's, its used part is on disk).
    #[cfg_attr(not(any(test, feature = "aggressive-check")), allow(dead_code))]
    pub fn check(&self, group_len: u32, bsbits: u32) -> Result<(), String> {
        let Some(l) = &self.loaded else {
            return Ok(());
        };
        l.buddy.check(bsbits)?;
        let disk_free = group_len - l.disk.count_ones(0, group_len);
        if disk_free != self.desc_free {
            return Err(format!(
                "descriptor free {} != on-disk bitmap free {disk_free}",
                self.desc_free
            ));
        }
        if let Some((s, n)) = l
            .buddy
            .free_runs()
            .find(|&(s, n)| !l.disk.all_clear(s, s + n))
        {
            return Err(format!("[{s}, +{n}) free in-core but in use on disk"));
        }
        for p in &self.pending {
            let end = p.start + p.len;
            if !l.disk.all_clear(p.start, end) || !l.buddy.all_used(p.start, end) {
                return Err(format!("pending free {p:?} in use on disk or free in-core"));
            }
        }
        for pa in &self.inode_pas {
            if !l.buddy.all_used(pa.start, pa.start + pa.len) {
                return Err(format!("inode preallocation {pa:?} free in-core"));
            }
        }
        Ok(())
    }

    /// Publishes the buddy's summary to the lock-free fields and returns the index moves the
    /// caller must apply (`mb_set_largest_free_order`, `mb_update_avg_fragment_size`).
    /// `keep_full`, asked only for a group with no free fragment: whether it keeps its
    /// average-fragment order, as before 6.17 (see below).
    pub fn publish(
        &mut self,
        g: &Group,
        optimize_scan: bool,
        keep_full: impl FnOnce() -> bool,
        num_orders: usize,
    ) -> IndexChange {
        let (free, frags, largest) = match &self.loaded {
            Some(l) => (
                l.buddy.free(),
                l.buddy.fragments(),
                l.buddy.largest_free_order(),
            ),
            None => (self.desc_free, 0, -1),
        };
        g.free.store(free, Ordering::Relaxed);
        g.fragments.store(frags, Ordering::Relaxed);
        g.largest_order.store(largest, Ordering::Relaxed);
        let old_largest = std::mem::replace(&mut self.largest_order, largest);
        let old_avg = self.avg_order;
        // mb_update_avg_fragment_size returns at once while optimize scan is off. Before
        // 6.17 it returned too when `bb_fragments == 0`: a group that filled up stayed in the
        // list of its last order, a "zombie" every walk of that list passes over ("ext4: fix
        // zombie groups in average fragment size lists"). Decisions do not change (a full
        // group is never good); the walks get longer.
        if optimize_scan {
            match free.checked_div(frags) {
                Some(avg) => self.avg_order = avg_fragment_order(avg, num_orders) as i32,
                None if keep_full() => {}
                None => self.avg_order = -1,
            }
        }
        IndexChange {
            old_largest,
            new_largest: largest,
            old_avg,
            new_avg: self.avg_order,
            free,
        }
    }
}

#[cfg(test)]
mod check_tests {
    use super::*;

    /// A group of 64 clusters: 0..8 on disk, 8..16 pending, 16..24 an inode PA, rest free.
    fn group() -> GroupState {
        let mut disk = Bitmap::new(64);
        disk.set_range(0, 8);
        disk.set_range(16, 20);
        let mut in_core = disk.clone();
        in_core.set_range(8, 24);
        GroupState {
            loaded: Some(Box::new(Loaded {
                disk,
                buddy: Buddy::generate(&in_core, 64, 64, 3),
            })),
            pending: vec![PendingFree {
                tid: 1,
                start: 8,
                len: 8,
            }],
            desc_free: 52,
            inode_pas: vec![PaSpan {
                start: 16,
                len: 8,
                owner: 7,
                lstart: 0,
            }],
            ..GroupState::default()
        }
    }

    #[test]
    fn a_consistent_group_passes_and_each_broken_view_is_named() {
        assert_eq!(group().check(64, 3), Ok(()));
        let mut g = group();
        g.desc_free += 1;
        assert!(g.check(64, 3).unwrap_err().contains("descriptor free"));
        let mut g = group();
        g.loaded.as_mut().unwrap().disk.set(40);
        g.desc_free -= 1;
        assert!(g.check(64, 3).unwrap_err().contains("in use on disk"));
        let mut g = group();
        g.pending[0].start = 30;
        assert!(g.check(64, 3).unwrap_err().contains("pending free"));
        let mut g = group();
        g.inode_pas[0].start = 40;
        assert!(g.check(64, 3).unwrap_err().contains("inode preallocation"));
    }
}

#[cfg(test)]
mod size_tests {
    /// Groups sit in one array of 131,072 on a 16 TiB filesystem: one 128-byte block each.
    #[test]
    fn a_group_is_one_cache_line_pair() {
        assert_eq!(std::mem::size_of::<super::Group>(), 128);
    }
}

#[cfg(test)]
mod pending_tests {
    use super::*;

    fn p(tid: u64, start: u32, len: u32) -> PendingFree {
        PendingFree { tid, start, len }
    }

    /// `ext4_mb_free_metadata`'s merge: a free joins a neighbour of its own transaction on
    /// either side (or both, closing the gap), never one of another transaction, and the
    /// list stays sorted; only a free that joins nothing is a new entry.
    #[test]
    fn pending_frees_merge_with_neighbours_of_their_own_transaction() {
        let mut st = GroupState::default();
        assert_eq!(st.add_pending(p(1, 10, 2)), 0);
        assert_eq!(st.add_pending(p(1, 20, 2)), 0);
        assert_eq!(st.add_pending(p(1, 12, 3)), 1, "joins the left one");
        assert_eq!(st.add_pending(p(1, 18, 2)), 1, "joins the right one");
        assert_eq!(st.pending, vec![p(1, 10, 5), p(1, 18, 4)]);
        assert_eq!(st.add_pending(p(1, 15, 3)), 2, "closes the gap");
        assert_eq!(st.pending, vec![p(1, 10, 12)]);
        assert_eq!(st.add_pending(p(2, 22, 1)), 0, "another transaction");
        assert_eq!(
            st.add_pending(p(2, 4, 6)),
            0,
            "ends where tid 1 starts, other tid"
        );
        assert_eq!(st.pending, vec![p(2, 4, 6), p(1, 10, 12), p(2, 22, 1)]);
        assert_eq!(st.add_pending(p(2, 23, 1)), 1);
        assert_eq!(st.pending.last(), Some(&p(2, 22, 2)));
    }
}
