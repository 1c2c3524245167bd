//! btrfs-style size classes layered on the criteria loop (seed 002, btrfs
//! `btrfs_calc_block_group_size_class`, `find_free_extent_check_size_class`,
//! `btrfs_use_block_group_size_class`, `btrfs_maybe_reset_size_class`).
//!
//! Why: extents of similar size tend to have similar lifetimes. Keeping small, medium and large
//! data extents in different groups means a freed large extent leaves a large hole instead of a
//! hole salted with long-lived small extents.
//!
//! How it works here:
//! - A request's class comes from the size the caller asked for (`ac_o_ex`), which is what
//!   btrfs's `num_bytes` is (btrfs has no preallocation windows). Not the normalised goal: a
//!   stream of 64 KiB appends reserves 8 or 32 MiB windows, and classifying by the window would
//!   put long-lived appending files with short-lived large fallocates. Small ≤ 128 KiB,
//!   medium ≤ 8 MiB, large above; both limits inclusive, as btrfs.
//! - Only data requests (`EXT4_MB_HINT_DATA`) take part; metadata goes anywhere, as btrfs only
//!   classifies data-only block groups.
//! - A group's class is claimed by the first data allocation into it (under the group lock, so two
//!   racing requests cannot both claim it) and reset to none when the group holds no data again:
//!   its free count is back to what it was when the allocator was built (the btrfs January-2026
//!   reset-when-empty fix). Classes are not persisted (neither are they in btrfs).
//! - Existing preallocations ignore classes: a window was placed by class when it was carved.
//!
//! **Why classes alone fragment ext4** (measured on the fsperf jobs at half volume on 8 GiB;
//! `docs/size-classes.md` has the figures): btrfs reserves one extent per request and grows its
//! set of block groups when its classes run out; ext4 carves preallocation windows, chains
//! goals across group edges and has a fixed set of groups. A port that only filters the group
//! scan leaves most placements to the class-blind goal chains, packs the windows of many
//! growing files into one group of their class (each file's unused window tail becomes a hole
//! when it is discarded at close), classes a file by whatever piece a window left over, and
//! takes the buddy's lowest aligned chunk. Four switches (ours, each measurable alone) make a
//! class describe a file's run and keep that run whole; `proposed` sets the last three, as
//! the first changes nothing measured once they are on:
//! - `size_class_strict_goal`: the goal try refuses a goal inside another class's group.
//! - `size_class_stream_groups`: a request that starts a new run of its file (its first
//!   blocks, a window that missed its goal, or a goal outside its class) walks the empty
//!   groups before its class's groups, so each growing file has a group to grow in and its
//!   discarded window tail rejoins that group's free space. Locality-group requests (small
//!   files) never do: packing them is the point of the locality group.
//! - `size_class_largest_first`: a class stage takes, in the goal's group, the first free
//!   extent at or after the goal, and elsewhere the start of the largest free extent
//!   (btrfs's `btrfs_find_space_for_alloc`, hinted and `use_bytes_index`), so a fresh group
//!   fills front to back.
//! - `size_class_inherit`: a request that extends a file takes the class of the group holding
//!   the file's preceding block.
//!
//! **Pass order** with `size_classes` on (each stage is a walk of the criteria below
//! CR_BEST_AVAIL_LEN, that is CR_POWER2_ALIGNED and CR_GOAL_LEN_FAST, so each stage only takes a
//! full-length extent found through the indexes):
//! 1. `Match`: groups whose class is the request's class (with `size_class_per_cpu`: claimed
//!    by the request's CPU);
//! 2. `Unset`: class-less groups that hold data (loaded from an existing filesystem);
//! 3. `Empty`: class-less groups that hold no data;
//! 4. `Shared` (only with `size_class_per_cpu`): groups of the request's class claimed by
//!    another CPU;
//! 5. `Any`: the kernel's whole criteria loop (CR_POWER2_ALIGNED … CR_ANY_FREE) over every group,
//!    whatever its class; an allocation into a group of another class leaves that class unchanged
//!    and is counted as forced.
//!
//! With `size_classes` off only stage 5 runs, with no filter: the kernel's loop, unchanged.
//!
//! The index walks of a stage read only the indexes of the classes it admits
//! (`Stage::classes`, the `class_index` module), in the same ascending order as one index of
//! every group; [`Stage::allows`] still decides each group reached.
//!
//! **Per-CPU class groups** (`size_class_per_cpu`, ours, not btrfs's): classes gather every
//! thread's small extents into the same few groups, so threads that would stream apart (stream
//! goals, seed 000) meet again on one group lock for every allocation; measured on W1 with two
//! threads, size classes alone took the two-thread rate from 1.8x to 1.1x one thread's. With
//! the switch a group claimed for a class belongs to the claiming CPU (the request's `cpu`, as
//! per-CPU locality groups), each CPU fills its own groups of each class first and claims a new
//! one before using another CPU's. Lifetimes still sort by class; one thread's placement is
//! unchanged.

/// The class of a group's data, or of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(u8)]
pub enum SizeClass {
    /// No class yet (a group no data request has claimed).
    #[default]
    None = 0,
    /// At most 128 KiB.
    Small = 1,
    /// Above 128 KiB, at most 8 MiB.
    Medium = 2,
    /// Above 8 MiB.
    Large = 3,
}

/// Upper bound of the small class in bytes (inclusive).
pub const SMALL_MAX: u64 = 128 << 10;
/// Upper bound of the medium class in bytes (inclusive).
pub const MEDIUM_MAX: u64 = 8 << 20;

impl SizeClass {
    /// `btrfs_calc_block_group_size_class`.
    pub fn of_bytes(bytes: u64) -> SizeClass {
        if bytes <= SMALL_MAX {
            SizeClass::Small
        } else if bytes <= MEDIUM_MAX {
            SizeClass::Medium
        } else {
            SizeClass::Large
        }
    }

    /// From the stored byte; unknown values read as none.
    pub fn from_u8(v: u8) -> SizeClass {
        match v {
            1 => SizeClass::Small,
            2 => SizeClass::Medium,
            3 => SizeClass::Large,
            _ => SizeClass::None,
        }
    }

    /// Short name for reports (`none`, `small`, `medium`, `large`).
    pub fn name(self) -> &'static str {
        match self {
            SizeClass::None => "none",
            SizeClass::Small => "small",
            SizeClass::Medium => "medium",
            SizeClass::Large => "large",
        }
    }
}

/// A set of classes, a bit per [`SizeClass`] value: the classes whose index sets a walk
/// reads (see [`crate::group::class_index`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Classes(u8);

impl Classes {
    pub(crate) const ALL: Classes = Classes(0b1111);

    pub(crate) fn of(c: SizeClass) -> Classes {
        Classes(1 << c as u8)
    }
    /// A bit per class value.
    pub(crate) fn bits(self) -> u8 {
        self.0
    }
    #[cfg(all(test, not(loom)))] // its only callers are the plain unit tests
    pub(crate) fn from_bits(bits: u8) -> Classes {
        Classes(bits & Classes::ALL.0)
    }
    #[cfg(test)]
    pub(crate) fn has(self, c: SizeClass) -> bool {
        self.0 >> c as u8 & 1 == 1
    }
}

/// One stage of the class-filtered search (see the module docs for the order). The values
/// index the per-stage counters (`class_stage_hits`); [`Stage::ORDER`] is the search order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Match = 0,
    Unset = 1,
    Empty = 2,
    Any = 3,
    Shared = 4,
}

/// A group's claim as a stage sees it: its class, whether it holds data, and whether the
/// requesting CPU claimed it (always true without `size_class_per_cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub class: SizeClass,
    pub empty: bool,
    pub own: bool,
}

impl Stage {
    /// The stages in search order.
    pub const ORDER: [Stage; 5] = [
        Stage::Match,
        Stage::Unset,
        Stage::Empty,
        Stage::Shared,
        Stage::Any,
    ];

    /// The order for a stream window with `size_class_stream_groups`: an empty group first,
    /// so the stream can keep growing in place behind its window.
    pub const STREAM_ORDER: [Stage; 5] = [
        Stage::Empty,
        Stage::Match,
        Stage::Unset,
        Stage::Shared,
        Stage::Any,
    ];

    /// Whether a group with claim `g` may be searched for a request of class `want` at this
    /// stage (`find_free_extent_check_size_class`, made exclusive per stage so that no group
    /// is walked twice).
    pub fn allows(self, want: SizeClass, g: Claim) -> bool {
        match self {
            Stage::Match => g.class == want && g.own,
            Stage::Unset => g.class == SizeClass::None && !g.empty,
            Stage::Empty => g.class == SizeClass::None && g.empty,
            Stage::Shared => g.class == want && !g.own,
            Stage::Any => true,
        }
    }

    /// The classes whose groups this stage may take for a request of class `want`: those
    /// whose index sets it walks. [`Stage::allows`] still decides each group (its data and
    /// its CPU).
    pub(crate) fn classes(self, want: SizeClass) -> Classes {
        match self {
            Stage::Match | Stage::Shared => Classes::of(want),
            Stage::Unset | Stage::Empty => Classes::of(SizeClass::None),
            Stage::Any => Classes::ALL,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_are_inclusive_like_btrfs() {
        assert_eq!(SizeClass::of_bytes(4096), SizeClass::Small);
        assert_eq!(SizeClass::of_bytes(131_072), SizeClass::Small);
        assert_eq!(SizeClass::of_bytes(131_073), SizeClass::Medium);
        assert_eq!(SizeClass::of_bytes(8_388_608), SizeClass::Medium);
        assert_eq!(SizeClass::of_bytes(8_388_609), SizeClass::Large);
        for c in [
            SizeClass::None,
            SizeClass::Small,
            SizeClass::Medium,
            SizeClass::Large,
        ] {
            assert_eq!(SizeClass::from_u8(c as u8), c);
        }
    }

    #[test]
    fn stages_partition_the_groups() {
        let classes = [
            SizeClass::None,
            SizeClass::Small,
            SizeClass::Medium,
            SizeClass::Large,
        ];
        for want in &classes[1..] {
            for &class in &classes {
                for empty in [false, true] {
                    for own in [false, true] {
                        let g = Claim { class, empty, own };
                        let n = Stage::ORDER[..4]
                            .iter()
                            .filter(|s| s.allows(*want, g))
                            .count();
                        // A group of another class is reached only by the last stage.
                        let expect = usize::from(class == *want || class == SizeClass::None);
                        assert_eq!(n, expect, "{want:?} {g:?}");
                        assert!(Stage::Any.allows(*want, g));
                    }
                }
            }
        }
        // Each stage walks exactly the classes it may admit.
        for want in &classes[1..] {
            for stage in Stage::ORDER {
                for &class in &classes {
                    let admits = [false, true].iter().any(|&empty| {
                        [false, true].iter().any(|&own| {
                            let g = Claim { class, empty, own };
                            stage.allows(*want, g)
                        })
                    });
                    assert_eq!(
                        stage.classes(*want).has(class),
                        admits,
                        "{stage:?} {class:?}"
                    );
                }
            }
        }
        // Another CPU's group of the class waits until after the unclaimed ones.
        let theirs = Claim {
            class: SizeClass::Small,
            empty: false,
            own: false,
        };
        assert!(!Stage::Match.allows(SizeClass::Small, theirs));
        assert!(Stage::Shared.allows(SizeClass::Small, theirs));
    }
}
