//! M12 — size-class diagnostics (btrfs parity).
//!
//! btrfs (`btrfs_calc_block_group_size_class`, Boris Burkov 2022): a request of `size` bytes is
//! SMALL if `size ≤ 128 KiB`, MEDIUM if `≤ 8 MiB`, else LARGE — upper bounds inclusive; a group
//! starts NONE, takes the class of its first claim, and (since the 2026 fix) resets to NONE when
//! it becomes empty. The lab records, per group, its class and used blocks (possibly at several
//! points in time) plus event counters from the allocator; this module turns them into a census
//! per snapshot, class transitions between snapshots, stale classes on empty groups (what the
//! "never reset" kernels of 2023–2025 leave behind), and the share of forced allocations.

use super::error::MetricsError;
use serde::Serialize;

/// A group's size class (`enum btrfs_block_group_size_class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum SizeClass {
    /// `BTRFS_BG_SZ_NONE`: unclaimed.
    None,
    /// `BTRFS_BG_SZ_SMALL`: ≤ 128 KiB.
    Small,
    /// `BTRFS_BG_SZ_MEDIUM`: ≤ 8 MiB.
    Medium,
    /// `BTRFS_BG_SZ_LARGE`: > 8 MiB.
    Large,
}

/// `btrfs_calc_block_group_size_class(size)` for a request of `bytes` bytes.
pub fn size_class_of(bytes: u64) -> SizeClass {
    if bytes <= 128 << 10 {
        SizeClass::Small
    } else if bytes <= 8 << 20 {
        SizeClass::Medium
    } else {
        SizeClass::Large
    }
}

/// One group at one point in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GroupClass {
    /// Its class.
    pub class: SizeClass,
    /// Blocks in use.
    pub used_blocks: u64,
}

/// Counts of one snapshot, indexed NONE, SMALL, MEDIUM, LARGE.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SizeClassCensus {
    /// Groups per class.
    pub groups_per_class: [u64; 4],
    /// Used blocks per class.
    pub used_blocks_per_class: [u64; 4],
    /// Empty groups still carrying a class (never reset to NONE).
    pub stale_class_groups: u64,
}

/// Allocator-side event counters (the lab's allocator fills them in).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SizeClassEvents {
    /// Allocations satisfied in each search stage 0..=5.
    pub allocs_per_stage: [u64; 6],
    /// Allocations placed in a group of another class with `force`.
    pub forced_wrong_class: u64,
    /// Claims that lost a race (btrfs: -EAGAIN) and moved on.
    pub class_claim_races: u64,
    /// Groups (btrfs: chunks) created during the run.
    pub new_groups: u64,
    /// Groups reset to NONE on becoming empty.
    pub resets_to_none: u64,
}

/// M12 report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeClassReport {
    /// One census per snapshot, in time order.
    pub census: Vec<SizeClassCensus>,
    /// Groups whose class changed between consecutive snapshots (one entry per gap).
    pub class_transitions: Vec<u64>,
    /// Event counters as given.
    pub events: SizeClassEvents,
    /// Σ allocations over stages.
    pub allocs_total: u64,
    /// `forced_wrong_class · 100 / allocs_total`.
    pub forced_wrong_class_pct: f64,
}

fn class_index(c: SizeClass) -> usize {
    match c {
        SizeClass::None => 0,
        SizeClass::Small => 1,
        SizeClass::Medium => 2,
        SizeClass::Large => 3,
    }
}

/// Census of one snapshot; `used_blocks` beyond `blocks_per_group` is an error.
pub fn size_class_census(
    groups: &[GroupClass],
    blocks_per_group: u64,
) -> Result<SizeClassCensus, MetricsError> {
    let mut c = SizeClassCensus {
        groups_per_class: [0; 4],
        used_blocks_per_class: [0; 4],
        stale_class_groups: 0,
    };
    for (g, gc) in groups.iter().enumerate() {
        if gc.used_blocks > blocks_per_group {
            return Err(MetricsError::UsedBeyondGroup {
                group: g,
                used: gc.used_blocks,
                blocks_per_group,
            });
        }
        let i = class_index(gc.class);
        c.groups_per_class[i] += 1;
        c.used_blocks_per_class[i] += gc.used_blocks;
        if gc.used_blocks == 0 && gc.class != SizeClass::None {
            c.stale_class_groups += 1;
        }
    }
    Ok(c)
}

/// Builds the report from snapshots (all with the same group count) and event counters.
pub fn size_class_report(
    snapshots: &[Vec<GroupClass>],
    blocks_per_group: u64,
    events: &SizeClassEvents,
) -> Result<SizeClassReport, MetricsError> {
    let census = snapshots
        .iter()
        .map(|s| size_class_census(s, blocks_per_group))
        .collect::<Result<Vec<_>, _>>()?;
    let class_transitions = snapshots
        .windows(2)
        .map(|w| transitions(&w[0], &w[1]))
        .collect::<Result<Vec<_>, _>>()?;
    let allocs_total: u64 = events.allocs_per_stage.iter().sum();
    Ok(SizeClassReport {
        census,
        class_transitions,
        events: events.clone(),
        allocs_total,
        forced_wrong_class_pct: super::log2_hist::percent(events.forced_wrong_class, allocs_total),
    })
}

fn transitions(a: &[GroupClass], b: &[GroupClass]) -> Result<u64, MetricsError> {
    if a.len() != b.len() {
        return Err(MetricsError::LengthMismatch {
            what: "size-class snapshot",
            expected: a.len(),
            got: b.len(),
        });
    }
    Ok(a.iter().zip(b).filter(|(x, y)| x.class != y.class).count() as u64)
}
