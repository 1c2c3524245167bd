//! A commit cut into per-group runs, and applying runs to a bitmap.
//!
//! Both stores and the log share this: the log record stores exactly these runs, and replaying
//! a record is applying them again. Set and clear are idempotent, so replaying a record whose
//! in-place writes already (partly) landed gives the same bitmap; that is what makes recovery
//! correct after a torn checkpoint.

use std::collections::BTreeMap;

use super::bitmap::{clear_range, first_clear, first_set, set_range};
use super::{Commit, Extent, StoreError};
use crate::geometry::Geometry;

/// Mark used (allocation) or mark free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Set,
    Clear,
}

/// Bits `[start, start + len)` of one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub start: u32,
    pub len: u32,
    pub op: Op,
}

/// The runs a commit applies to one group, in application order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupDelta {
    pub group: u32,
    pub runs: Vec<Run>,
}

/// Checks that `e` lies inside the data area.
pub(crate) fn check_extent(geometry: &Geometry, e: &Extent) -> Result<(), StoreError> {
    if geometry.contains(e.start, e.len) {
        return Ok(());
    }
    Err(StoreError::OutOfRange {
        start: e.start,
        len: e.len,
        first_data_block: geometry.first_data_block(),
        blocks_count: geometry.blocks_count(),
    })
}

/// Cuts the commit at group boundaries: allocations first, then frees, groups ascending.
pub(crate) fn split(geometry: &Geometry, commit: &Commit) -> Result<Vec<GroupDelta>, StoreError> {
    let mut by_group: BTreeMap<u32, Vec<Run>> = BTreeMap::new();
    for (op, extents) in [(Op::Set, &commit.allocated), (Op::Clear, &commit.freed)] {
        for e in extents {
            check_extent(geometry, e)?;
            for_each_piece(geometry, e, |group, start, len| {
                by_group
                    .entry(group)
                    .or_default()
                    .push(Run { start, len, op });
            });
        }
    }
    Ok(by_group
        .into_iter()
        .map(|(group, runs)| GroupDelta { group, runs })
        .collect())
}

/// Appends `e` to `list`, merging it into the last extent when they touch.
pub(crate) fn push_merged(list: &mut Vec<Extent>, e: Extent) {
    if let Some(last) = list.last_mut() {
        if last.start + last.len == e.start {
            last.len += e.len;
            return;
        }
    }
    list.push(e);
}

/// Calls `f(group, offset, len)` for each group-sized piece of an in-range extent.
pub(crate) fn for_each_piece(geometry: &Geometry, e: &Extent, mut f: impl FnMut(u32, u32, u32)) {
    let end = e.start + e.len;
    let mut at = e.start;
    while at < end {
        let (group, offset) = geometry.locate(at);
        let room = u64::from(geometry.group_len(group) - offset);
        let len = room.min(end - at);
        f(group, offset, len as u32);
        at += len;
    }
}

/// Applies runs to a bitmap, checking each against the bits it changes: an allocation must
/// find its blocks free and a free must find them used. Stops at the first violation; the
/// caller applies to a copy, so a rejected commit changes nothing.
pub(crate) fn apply_checked(
    geometry: &Geometry,
    group: u32,
    bitmap: &mut [u8],
    runs: &[Run],
) -> Result<(), StoreError> {
    for r in runs {
        let bad = match r.op {
            Op::Set => first_set(bitmap, r.start, r.len).map(|off| StoreError::AlreadyAllocated {
                block: geometry.block_of(group, off),
            }),
            Op::Clear => first_clear(bitmap, r.start, r.len).map(|off| StoreError::NotAllocated {
                block: geometry.block_of(group, off),
            }),
        };
        if let Some(e) = bad {
            return Err(e);
        }
        apply_run(bitmap, r);
    }
    Ok(())
}

/// Applies runs without checks: recovery, where the in-place state may already be the result.
pub(crate) fn apply_unchecked(bitmap: &mut [u8], runs: &[Run]) {
    for r in runs {
        apply_run(bitmap, r);
    }
}

fn apply_run(bitmap: &mut [u8], r: &Run) {
    match r.op {
        Op::Set => set_range(bitmap, r.start, r.len),
        Op::Clear => clear_range(bitmap, r.start, r.len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_cuts_at_group_boundaries_and_orders_allocs_first() {
        let g = Geometry::new(1024, 64, 200, 0, 1).unwrap();
        let c = Commit {
            allocated: vec![Extent::new(60, 10)],
            freed: vec![Extent::new(5, 1)],
        };
        let d = split(&g, &c).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].group, 0);
        assert_eq!(
            d[0].runs,
            vec![
                Run {
                    start: 60,
                    len: 4,
                    op: Op::Set
                },
                Run {
                    start: 5,
                    len: 1,
                    op: Op::Clear
                }
            ]
        );
        assert_eq!(
            d[1].runs,
            vec![Run {
                start: 0,
                len: 6,
                op: Op::Set
            }]
        );
    }

    #[test]
    fn out_of_range_and_empty_extents_are_rejected() {
        let g = Geometry::new(1024, 64, 200, 0, 1).unwrap();
        for e in [
            Extent::new(190, 20),
            Extent::new(0, 0),
            Extent::new(u64::MAX, 2),
        ] {
            let c = Commit {
                allocated: vec![e],
                freed: vec![],
            };
            assert!(
                matches!(split(&g, &c), Err(StoreError::OutOfRange { .. })),
                "{e:?}"
            );
        }
    }

    #[test]
    fn checked_apply_reports_the_first_bad_block() {
        let g = Geometry::new(1024, 64, 200, 0, 1).unwrap();
        let mut bm = vec![0u8; 8];
        let set = [Run {
            start: 8,
            len: 4,
            op: Op::Set,
        }];
        apply_checked(&g, 1, &mut bm, &set).unwrap();
        let again = [Run {
            start: 6,
            len: 4,
            op: Op::Set,
        }];
        assert_eq!(
            apply_checked(&g, 1, &mut bm, &again),
            Err(StoreError::AlreadyAllocated { block: 64 + 8 })
        );
        let free = [Run {
            start: 10,
            len: 4,
            op: Op::Clear,
        }];
        assert_eq!(
            apply_checked(&g, 1, &mut bm, &free),
            Err(StoreError::NotAllocated { block: 64 + 12 })
        );
    }
}
