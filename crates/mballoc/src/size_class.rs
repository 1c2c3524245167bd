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
//! - The goal try (`ext4_mb_find_by_goal`) and existing preallocations ignore classes: extending a
//!   file in place is worth more than class purity.
//!
//! **Pass order** with `size_classes` on (each stage is a walk of the criteria below
//! CR_BEST_AVAIL_LEN, that is CR_POWER2_ALIGNED and CR_GOAL_LEN_FAST, so each stage only takes a
//! full-length extent found through the indexes):
//! 1. `Match`: groups whose class is the request's class;
//! 2. `Unset`: class-less groups that hold data (loaded from an existing filesystem);
//! 3. `Empty`: class-less groups that hold no data;
//! 4. `Any`: the kernel's whole criteria loop (CR_POWER2_ALIGNED … CR_ANY_FREE) over every group,
//!    whatever its class; an allocation into a group of another class leaves that class unchanged
//!    and is counted as forced.
//!
//! With `size_classes` off only stage 4 runs, with no filter: the kernel's loop, unchanged.

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

/// One stage of the class-filtered search (see the module docs for the order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Match = 0,
    Unset = 1,
    Empty = 2,
    Any = 3,
}

impl Stage {
    /// The stages in search order.
    pub const ORDER: [Stage; 4] = [Stage::Match, Stage::Unset, Stage::Empty, Stage::Any];

    /// Whether a group of class `group` (empty or not) may be searched for a request of class
    /// `want` at this stage (`find_free_extent_check_size_class`, made exclusive per stage so
    /// that no group is walked twice).
    pub fn allows(self, want: SizeClass, group: SizeClass, empty: bool) -> bool {
        match self {
            Stage::Match => group == want,
            Stage::Unset => group == SizeClass::None && !empty,
            Stage::Empty => group == SizeClass::None && empty,
            Stage::Any => true,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Stage::Match => "match",
            Stage::Unset => "unset",
            Stage::Empty => "empty",
            Stage::Any => "any",
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
            for &g in &classes {
                for empty in [false, true] {
                    let n = Stage::ORDER[..3]
                        .iter()
                        .filter(|s| s.allows(*want, g, empty))
                        .count();
                    // A group of another class is reached only by the last stage.
                    let expect = usize::from(g == *want || g == SizeClass::None);
                    assert_eq!(n, expect, "{want:?} {g:?} {empty}");
                    assert!(Stage::Any.allows(*want, g, empty));
                }
            }
        }
    }
}
