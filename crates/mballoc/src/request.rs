//! What a caller asks for and what it gets back (`struct ext4_allocation_request`, and the
//! fields of the `ext4_mballoc_alloc` tracepoint that explain how the answer was found).

use std::fmt;
use std::ops::{BitAnd, BitOr, BitOrAssign};

/// `EXT4_MB_*` allocation hint bits, with the kernel's values.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u32);

impl Flags {
    /// Prefer extending the neighbour: a shorter goal hit is taken.
    pub const HINT_MERGE: Flags = Flags(0x1);
    /// Take the first free extent found (no best-fit search).
    pub const HINT_FIRST: Flags = Flags(0x8);
    /// Data blocks (preallocation and normalisation apply).
    pub const HINT_DATA: Flags = Flags(0x20);
    /// Neither use nor create a preallocation.
    pub const HINT_NOPREALLOC: Flags = Flags(0x40);
    /// Set by the allocator (`ext4_mb_group_or_file`): a request carrying it is refused.
    pub const HINT_GROUP_ALLOC: Flags = Flags(0x80);
    /// Allocate at the goal or fail.
    pub const HINT_GOAL_ONLY: Flags = Flags(0x100);
    /// Try the goal block first.
    pub const HINT_TRY_GOAL: Flags = Flags(0x200);
    /// The blocks were reserved by delayed allocation.
    pub const DELALLOC_RESERVED: Flags = Flags(0x400);
    /// Set by the allocator (`ext4_mb_group_or_file`): a request carrying it is refused.
    pub const STREAM_ALLOC: Flags = Flags(0x800);
    /// May use the root-reserved blocks.
    pub const USE_ROOT_BLOCKS: Flags = Flags(0x1000);
    /// May use the filesystem's reserved pool.
    pub const USE_RESERVED: Flags = Flags(0x2000);
    /// Strict free-count checks (metadata of the allocator itself).
    pub const STRICT_CHECK: Flags = Flags(0x4000);

    const NAMES: [(Flags, &'static str); 12] = [
        (Flags::HINT_MERGE, "HINT_MERGE"),
        (Flags::HINT_FIRST, "HINT_FIRST"),
        (Flags::HINT_DATA, "HINT_DATA"),
        (Flags::HINT_NOPREALLOC, "HINT_NOPREALLOC"),
        (Flags::HINT_GROUP_ALLOC, "HINT_GRP_ALLOC"),
        (Flags::HINT_GOAL_ONLY, "HINT_GOAL_ONLY"),
        (Flags::HINT_TRY_GOAL, "HINT_TRY_GOAL"),
        (Flags::DELALLOC_RESERVED, "DELALLOC_RESV"),
        (Flags::STREAM_ALLOC, "STREAM_ALLOC"),
        (Flags::USE_ROOT_BLOCKS, "USE_ROOT_BLKS"),
        (Flags::USE_RESERVED, "USE_RESV"),
        (Flags::STRICT_CHECK, "STRICT_CHECK"),
    ];

    /// Whether every bit of `other` is set.
    #[inline]
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
    /// Clears the bits of `other`.
    #[inline]
    pub fn remove(&mut self, other: Flags) {
        self.0 &= !other.0;
    }
}

impl BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}
impl BitOrAssign for Flags {
    fn bitor_assign(&mut self, rhs: Flags) {
        self.0 |= rhs.0;
    }
}
impl BitAnd for Flags {
    type Output = Flags;
    fn bitand(self, rhs: Flags) -> Flags {
        Flags(self.0 & rhs.0)
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Flags::NAMES
            .iter()
            .filter(|(b, _)| self.contains(*b))
            .map(|&(_, n)| n)
            .collect();
        if names.is_empty() {
            write!(f, "0")
        } else {
            write!(f, "{}", names.join("|"))
        }
    }
}

/// `EXT4_FREE_BLOCKS_*` bits of `ext4_free_blocks` that change what a free releases, with
/// the kernel's values (the capture's `free.flags` carries them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FreeFlags(pub u32);

impl FreeFlags {
    /// bigalloc: a partial cluster at the start is still used by the file; keep it.
    pub const NOFREE_FIRST_CLUSTER: FreeFlags = FreeFlags(0x10);
    /// bigalloc: a partial cluster at the end is still used by the file; keep it.
    pub const NOFREE_LAST_CLUSTER: FreeFlags = FreeFlags(0x20);

    /// Whether every bit of `other` is set.
    #[inline]
    pub fn contains(self, other: FreeFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for FreeFlags {
    type Output = FreeFlags;
    fn bitor(self, rhs: FreeFlags) -> FreeFlags {
        FreeFlags(self.0 | rhs.0)
    }
}

/// One allocation request. Build it with [`Request::new`] and the `with_*` setters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Owner (inode number): selects the stream goal slot and owns inode preallocations.
    pub owner: u64,
    /// Logical block of the request inside the owner.
    pub logical: u32,
    /// Blocks wanted (with bigalloc the allocator asks for the clusters that hold them).
    pub len: u32,
    /// Physical goal block (out of range goals fall back to the first data block, like ext4).
    pub goal: u64,
    /// Logical block of the nearest mapped neighbour on the left (0 = none).
    pub lleft: u32,
    /// Physical block of that left neighbour.
    pub pleft: u64,
    /// Logical block of the nearest mapped neighbour on the right (0 = none).
    pub lright: u32,
    /// Physical block of that right neighbour.
    pub pright: u64,
    /// Allocation hints (`EXT4_MB_HINT_*`).
    pub flags: Flags,
    /// The owner's size in bytes (`i_size`): drives normalisation and the stream decision.
    pub i_size: u64,
    /// Whether the owner is open for write (`inode_is_open_for_write`).
    pub open_for_write: bool,
    /// CPU of the caller: locality groups are per CPU.
    pub cpu: u32,
    /// Whether the owner is an extent-mapped inode (v6.18 optimises scans only for those).
    pub extents: bool,
}

impl Request {
    /// A data request (`HINT_DATA`) of `len` blocks at logical block `logical` of `owner`,
    /// with the owner open for write and sized to the end of the request.
    pub fn new(owner: u64, logical: u32, len: u32) -> Request {
        Request {
            owner,
            logical,
            len,
            goal: 0,
            lleft: 0,
            pleft: 0,
            lright: 0,
            pright: 0,
            flags: Flags::HINT_DATA,
            i_size: 0,
            open_for_write: true,
            cpu: 0,
            extents: true,
        }
    }
    /// With physical goal block `goal`.
    pub fn with_goal(mut self, goal: u64) -> Self {
        self.goal = goal;
        self
    }
    /// With the hint bits `flags` (replacing `HINT_DATA`).
    pub fn with_flags(mut self, flags: Flags) -> Self {
        self.flags = flags;
        self
    }
    /// With the owner's size in bytes.
    pub fn with_i_size(mut self, i_size: u64) -> Self {
        self.i_size = i_size;
        self
    }
    /// From CPU `cpu` (which locality group).
    pub fn with_cpu(mut self, cpu: u32) -> Self {
        self.cpu = cpu;
        self
    }
    /// Whether the owner is open for write.
    pub fn with_open_for_write(mut self, open: bool) -> Self {
        self.open_for_write = open;
        self
    }
    /// With the nearest mapped neighbour on the left.
    pub fn with_left(mut self, lleft: u32, pleft: u64) -> Self {
        self.lleft = lleft;
        self.pleft = pleft;
        self
    }
    /// With the nearest mapped neighbour on the right.
    pub fn with_right(mut self, lright: u32, pright: u64) -> Self {
        self.lright = lright;
        self.pright = pright;
        self
    }
}

/// A run of physical blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Extent {
    /// First block.
    pub start: u64,
    /// Blocks.
    pub len: u32,
}

impl Extent {
    /// `len` blocks from `start`.
    pub fn new(start: u64, len: u32) -> Extent {
        Extent { start, len }
    }
    /// The block after the last.
    pub fn end(&self) -> u64 {
        self.start + u64::from(self.len)
    }
}

/// The allocation criteria (`enum criteria`), in pass order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Criterion {
    /// `CR_POWER2_ALIGNED`: a buddy chunk of the request's power-of-two order.
    Power2Aligned = 0,
    /// `CR_GOAL_LEN_FAST`: a group whose indexes promise the goal length.
    GoalLenFast = 1,
    /// `CR_BEST_AVAIL_LEN`: the goal length trimmed to what the indexes offer.
    BestAvailLen = 2,
    /// `CR_GOAL_LEN_SLOW`: every group with enough free blocks, searched completely.
    GoalLenSlow = 3,
    /// `CR_ANY_FREE`: whatever is free.
    AnyFree = 4,
}

impl Criterion {
    /// Every criterion, in pass order.
    pub const ALL: [Criterion; 5] = [
        Criterion::Power2Aligned,
        Criterion::GoalLenFast,
        Criterion::BestAvailLen,
        Criterion::GoalLenSlow,
        Criterion::AnyFree,
    ];
    /// The kernel's name, as tracepoints print it.
    pub fn name(self) -> &'static str {
        match self {
            Criterion::Power2Aligned => "CR_POWER2_ALIGNED",
            Criterion::GoalLenFast => "CR_GOAL_LEN_FAST",
            Criterion::BestAvailLen => "CR_BEST_AVAIL_LEN",
            Criterion::GoalLenSlow => "CR_GOAL_LEN_SLOW",
            Criterion::AnyFree => "CR_ANY_FREE",
        }
    }
    /// `ext4_mb_cr_expensive`.
    pub fn expensive(self) -> bool {
        self >= Criterion::GoalLenSlow
    }
    /// Position in pass order (the kernel's numeric value).
    pub fn index(self) -> usize {
        self as usize
    }
    pub(crate) fn next(self) -> Option<Criterion> {
        Criterion::ALL.get(self as usize + 1).copied()
    }
}

/// An extent inside one group, as the kernel's `struct ext4_free_extent` prints it
/// (`group/start/len@logical`). `start == -1` marks a stream goal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupExtent {
    /// Group number.
    pub group: u32,
    /// First block in the group (`-1`: a stream goal).
    pub start: i64,
    /// Blocks.
    pub len: u32,
    /// Logical block of the owner it maps.
    pub logical: u32,
}

/// Where the answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The group scan (`ext4_mb_regular_allocator`).
    Scan,
    /// An existing preallocation.
    Prealloc,
}

/// Kind of a preallocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaKind {
    /// Belongs to one owner, maps a logical range.
    Inode,
    /// Belongs to a per-CPU locality group, consumed from its start.
    Group,
}

/// A preallocation created by a request (the `ext4_mb_new_*_pa` tracepoints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewPa {
    /// Inode or locality-group PA.
    pub kind: PaKind,
    /// First physical block.
    pub pstart: u64,
    /// First logical block (a group PA: its physical start, as the tracepoint prints it).
    pub lstart: u64,
    /// Blocks.
    pub len: u32,
}

/// The answer to one request: the blocks, and how they were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// Blocks given to the caller (may be shorter than asked; callers loop).
    pub extent: Extent,
    /// The scan or an existing preallocation.
    pub source: Source,
    /// The goal after normalisation, stream-goal substitution and trimming (`ac_g_ex`).
    pub goal: GroupExtent,
    /// The extent taken from the buddy (`ac_f_ex`): the whole new PA when one was created.
    pub found: GroupExtent,
    /// Criterion at which the search ended (`CR_POWER2_ALIGNED` for a goal hit).
    pub criterion: Criterion,
    /// Every criterion's pass ended without an extent of the goal length, and the best one
    /// seen was taken after them (`ext4_mb_try_best_found` with `ac_criteria` at
    /// `EXT4_MB_NUM_CRS`: the kernel's tracepoint then reports criterion 5). `criterion` is
    /// CR_ANY_FREE.
    pub after_all_passes: bool,
    /// Groups whose buddy was scanned (`ac_groups_scanned`).
    pub groups_scanned: u32,
    /// Free extents measured (`ac_found`).
    pub extents_scanned: u32,
    /// The context's flags after the group-or-file decision and normalisation.
    pub flags: Flags,
    /// The preallocation this request created, if any.
    pub new_pa: Option<NewPa>,
    /// Kind of the existing preallocation used (`Source::Prealloc`).
    pub pa_used: Option<PaKind>,
}
