//! One block group: its lock, its loaded state (on-disk bitmap and buddy), the frees waiting
//! for commit, and the summary values the scans read without the lock (`ext4_group_info`).

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering};

use parking_lot::Mutex;

use crate::bitmap::Bitmap;
use crate::buddy::{avg_fragment_order, Buddy};
use crate::percpu::Isolated;
use crate::size_class::SizeClass;

/// `bb_state` bits.
pub mod state {
    /// Buddy not generated yet (`EXT4_GROUP_INFO_NEED_INIT_BIT`).
    pub const NEED_INIT: u32 = 1 << 0;
    /// `EXT4_GROUP_INFO_WAS_TRIMMED_BIT`.
    pub const WAS_TRIMMED: u32 = 1 << 1;
    /// Block bitmap inconsistent: never allocated from, frees ignored.
    pub const BBITMAP_CORRUPT: u32 = 1 << 2;
}

/// `EXT4_GROUP_INFO_BBITMAP_READ_BIT` of every group: prefetch already issued once, never
/// cleared. A bitset of its own, apart from the other state bits, because 6.18 sets it with an
/// atomic read-modify-write on every prefetch walk (seed 003): those writes bounce the one
/// line they hit between CPUs, and that line should hold nothing else that requests read.
pub struct ReadMarks(Isolated<AtomicU64>);

impl ReadMarks {
    pub fn new(groups: u32) -> ReadMarks {
        ReadMarks(Isolated::new(groups.div_ceil(64) as usize, || {
            AtomicU64::new(0)
        }))
    }
    /// The word holding `g`'s mark, and the mark's bit in it.
    #[inline]
    pub fn word(&self, g: u32) -> (&AtomicU64, u64) {
        (self.0.get((g / 64) as usize), 1 << (g % 64))
    }
}

/// Every group's `bb_state` bits, packed and isolated from other allocations.
pub struct GroupStates(Isolated<StateBits>);

impl GroupStates {
    /// `groups` groups, each with `bits` set.
    pub fn new(groups: u32, bits: u32) -> GroupStates {
        GroupStates(Isolated::new(groups as usize, || StateBits::new(bits)))
    }
    #[inline]
    pub fn get(&self, g: u32) -> &StateBits {
        self.0.get(g as usize)
    }
}

/// One group's `bb_state` bits.
///
/// They live apart from [`Group`], all groups' together in one dense array, because every
/// request's prefetch walk reads the bits of up to a flex group of groups: packed, that is one
/// cache line, rarely written, not sixteen group lines that other CPUs are busy locking and
/// updating.
#[derive(Debug)]
pub struct StateBits(AtomicU32);

impl StateBits {
    pub fn new(bits: u32) -> StateBits {
        StateBits(AtomicU32::new(bits))
    }
    #[inline]
    pub fn has(&self, f: u32) -> bool {
        self.0.load(Ordering::Relaxed) & f != 0
    }
    #[inline]
    pub fn set(&self, f: u32) {
        self.0.fetch_or(f, Ordering::Relaxed);
    }
    /// Clears `f`; a plain load when none of it is set (no write to a shared line).
    #[inline]
    pub fn clear(&self, f: u32) {
        if self.has(f) {
            self.0.fetch_and(!f, Ordering::Relaxed);
        }
    }
    #[inline]
    pub fn is_corrupt(&self) -> bool {
        self.has(state::BBITMAP_CORRUPT)
    }
    #[inline]
    pub fn need_init(&self) -> bool {
        self.has(state::NEED_INIT)
    }
}

/// Clusters freed in a transaction that has not committed yet (`struct ext4_free_data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingFree {
    pub tid: u64,
    pub start: u32,
    pub len: u32,
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
    /// Size class of the group's data (seed 002, [`crate::size_class::SizeClass`] as `u8`).
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
    /// Publishes the buddy's summary to the lock-free fields and returns the index moves the
    /// caller must apply (`mb_set_largest_free_order`, `mb_update_avg_fragment_size`).
    pub fn publish(&mut self, g: &Group, optimize_scan: bool, num_orders: usize) -> IndexChange {
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
        // mb_update_avg_fragment_size returns at once while optimize scan is off.
        if optimize_scan {
            self.avg_order = if frags == 0 {
                -1
            } else {
                avg_fragment_order(free / frags, num_orders) as i32
            };
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
