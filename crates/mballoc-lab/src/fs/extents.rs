//! A file's extent list: sorted logical → physical runs, as ext4's extent tree holds them.
//!
//! Physically and logically contiguous neighbours of the same kind are merged (ext4 merges an
//! inserted extent with its neighbours, `ext4_ext_try_to_merge`, never an unwritten one with a
//! written one) up to [`MAX_RECORD`] blocks per written record and [`MAX_UNWRITTEN_RECORD`] per
//! unwritten one (`ext4_can_extents_be_merged`), so the record count is what the extent tree
//! holds (and FIEMAP returns) and the goal rules see the same extents as the kernel.

use std::collections::BTreeMap;

use mballoc::Extent;

/// Longest initialised extent record (`EXT_INIT_MAX_LEN`).
pub const MAX_RECORD: u32 = 32768;
/// Longest unwritten extent record (`EXT_UNWRITTEN_MAX_LEN`).
pub const MAX_UNWRITTEN_RECORD: u32 = 32767;

/// A record's physical start, length and whether it is unwritten (fallocated, never written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    physical: u64,
    len: u32,
    unwritten: bool,
}

impl Run {
    /// `ext4_can_extents_be_merged` for `self` followed by `next` (both contiguous already):
    /// same kind, and the sum within that kind's longest record.
    fn can_absorb(&self, next: &Run) -> bool {
        let max = if self.unwritten {
            MAX_UNWRITTEN_RECORD
        } else {
            MAX_RECORD
        };
        self.unwritten == next.unwritten && self.len + next.len <= max
    }
}

/// One mapped run: `logical`, `physical`, `len` in blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub logical: u32,
    pub physical: u64,
    pub len: u32,
}

impl Mapping {
    /// One past the last logical block.
    pub fn logical_end(&self) -> u64 {
        u64::from(self.logical) + u64::from(self.len)
    }
    /// One past the last physical block.
    pub fn physical_end(&self) -> u64 {
        self.physical + u64::from(self.len)
    }
}

/// The sorted, non-overlapping mapped runs of one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtentMap {
    /// logical start → record
    runs: BTreeMap<u32, Run>,
    blocks: u64,
}

impl ExtentMap {
    pub fn new() -> Self {
        Self::default()
    }

    /// Mapped blocks.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Number of extent records.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Records in logical order.
    pub fn iter(&self) -> impl Iterator<Item = Mapping> + '_ {
        self.runs.iter().map(|(&logical, r)| Mapping {
            logical,
            physical: r.physical,
            len: r.len,
        })
    }

    /// The last record starting at or before `lblk` (ext4's binary search in a leaf).
    fn at_or_before(&self, lblk: u32) -> Option<Mapping> {
        self.runs
            .range(..=lblk)
            .next_back()
            .map(|(&logical, r)| Mapping {
                logical,
                physical: r.physical,
                len: r.len,
            })
    }

    /// The first record starting after `lblk`.
    fn after(&self, lblk: u32) -> Option<Mapping> {
        use std::ops::Bound::{Excluded, Unbounded};
        self.runs
            .range((Excluded(lblk), Unbounded))
            .next()
            .map(|(&logical, r)| Mapping {
                logical,
                physical: r.physical,
                len: r.len,
            })
    }

    /// The record containing `lblk`, if it is mapped.
    pub fn lookup(&self, lblk: u32) -> Option<Mapping> {
        self.at_or_before(lblk)
            .filter(|m| u64::from(lblk) < m.logical_end())
    }

    /// `ext4_ext_find_goal` on a file with extents: continue the record the search lands on
    /// (the last one starting at or before `lblk`, else the first) by the logical distance.
    /// `None` when the file has no extents (the caller falls back to the inode's group).
    pub fn find_goal(&self, lblk: u32) -> Option<u64> {
        let m = self.at_or_before(lblk).or_else(|| self.after(lblk))?;
        Some(if lblk >= m.logical {
            m.physical + u64::from(lblk - m.logical)
        } else {
            m.physical.saturating_sub(u64::from(m.logical - lblk))
        })
    }

    /// `ext4_ext_search_left`: last logical and physical block of the nearest record ending
    /// before `lblk`, or `(0, 0)`.
    pub fn left_of(&self, lblk: u32) -> (u32, u64) {
        match self.at_or_before(lblk) {
            Some(m) if m.logical_end() <= u64::from(lblk) => {
                (m.logical + m.len - 1, m.physical_end() - 1)
            }
            Some(m) if m.logical < lblk => {
                // lblk is inside m (callers ask only for holes; keep it defined).
                (lblk - 1, m.physical + u64::from(lblk - 1 - m.logical))
            }
            _ => (0, 0),
        }
    }

    /// `ext4_ext_search_right`: first logical and physical block of the nearest record
    /// starting after `lblk`, or `(0, 0)`.
    pub fn right_of(&self, lblk: u32) -> (u32, u64) {
        self.after(lblk).map_or((0, 0), |m| (m.logical, m.physical))
    }

    /// Unmapped runs `(logical, len)` inside `[lblk, lblk + len)`.
    pub fn holes(&self, lblk: u32, len: u32) -> Vec<(u32, u32)> {
        let end = u64::from(lblk) + u64::from(len);
        let mut at = u64::from(lblk);
        let mut out = Vec::new();
        if let Some(m) = self.at_or_before(lblk) {
            at = at.max(m.logical_end());
        }
        for (&l, r) in self.runs.range(lblk..) {
            let n = r.len;
            if u64::from(l) >= end {
                break;
            }
            if u64::from(l) > at {
                out.push((at as u32, (u64::from(l) - at) as u32));
            }
            at = at.max(u64::from(l) + u64::from(n));
        }
        if at < end {
            out.push((at as u32, (end - at) as u32));
        }
        out
    }

    /// Maps `[logical, +len)` to `physical` as a written extent. The range must be unmapped
    /// (the file layer only fills holes); contiguous neighbours are merged up to [`MAX_RECORD`].
    pub fn insert(&mut self, logical: u32, physical: u64, len: u32) {
        self.insert_as(logical, physical, len, false);
    }

    /// Maps `[logical, +len)` to `physical`, unwritten (fallocate) or written; merges with the
    /// contiguous neighbours of the same kind as `ext4_ext_try_to_merge` does.
    pub fn insert_as(&mut self, logical: u32, physical: u64, len: u32, unwritten: bool) {
        debug_assert!(len > 0 && self.holes(logical, len) == vec![(logical, len)]);
        self.blocks += u64::from(len);
        let mut start = logical;
        let mut run = Run {
            physical,
            len,
            unwritten,
        };
        if let Some((&l, &left)) = self.runs.range(..=logical).next_back() {
            let touches = u64::from(l) + u64::from(left.len) == u64::from(logical)
                && left.physical + u64::from(left.len) == physical;
            if touches && left.can_absorb(&run) {
                self.runs.remove(&l);
                start = l;
                run = Run {
                    len: left.len + len,
                    ..left
                };
            }
        }
        let end = u64::from(start) + u64::from(run.len);
        if let Ok(end32) = u32::try_from(end) {
            if let Some(&right) = self.runs.get(&end32) {
                if right.physical == run.physical + u64::from(run.len) && run.can_absorb(&right) {
                    self.runs.remove(&end32);
                    run.len += right.len;
                }
            }
        }
        self.runs.insert(start, run);
    }

    /// Unmaps every block at or after `lblk`; returns the physical extents released.
    pub fn truncate(&mut self, lblk: u32) -> Vec<Extent> {
        let mut out = Vec::new();
        if let Some(m) = self.at_or_before(lblk) {
            if m.logical < lblk && m.logical_end() > u64::from(lblk) {
                let keep = lblk - m.logical;
                if let Some(r) = self.runs.get_mut(&m.logical) {
                    r.len = keep;
                }
                out.push(Extent::new(m.physical + u64::from(keep), m.len - keep));
            }
        }
        let tail: Vec<u32> = self.runs.range(lblk..).map(|(&l, _)| l).collect();
        for l in tail {
            if let Some(r) = self.runs.remove(&l) {
                out.push(Extent::new(r.physical, r.len));
            }
        }
        self.blocks -= out.iter().map(|e| u64::from(e.len)).sum::<u64>();
        out
    }

    /// As `(logical, physical, len)` triples, the metrics' file format.
    pub fn to_file_extents(&self) -> Vec<crate::metrics::FileExtent> {
        self.iter()
            .map(|m| (u64::from(m.logical), m.physical, u64::from(m.len)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(runs: &[(u32, u64, u32)]) -> ExtentMap {
        let mut m = ExtentMap::new();
        for &(l, p, n) in runs {
            m.insert(l, p, n);
        }
        m
    }

    #[test]
    fn contiguous_inserts_merge_and_gaps_do_not() {
        let m = map(&[(0, 100, 2), (2, 102, 2), (4, 200, 4)]);
        let v: Vec<_> = m.iter().map(|x| (x.logical, x.physical, x.len)).collect();
        assert_eq!(v, vec![(0, 100, 4), (4, 200, 4)]);
        assert_eq!(m.blocks(), 8);
        // Filling a hole between two runs that continue it merges all three.
        let m = map(&[(0, 10, 2), (4, 14, 2), (2, 12, 2)]);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn records_stop_at_ext_init_max_len() {
        let m = map(&[(0, 0, MAX_RECORD), (MAX_RECORD, u64::from(MAX_RECORD), 1)]);
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn unwritten_records_stop_at_32767_and_do_not_merge_with_written_ones() {
        let mut m = ExtentMap::new();
        m.insert_as(0, 0, MAX_UNWRITTEN_RECORD, true);
        m.insert_as(
            MAX_UNWRITTEN_RECORD,
            u64::from(MAX_UNWRITTEN_RECORD),
            1,
            true,
        );
        assert_eq!(m.len(), 2, "EXT_UNWRITTEN_MAX_LEN");
        let mut m = ExtentMap::new();
        m.insert_as(0, 100, 4, true);
        m.insert_as(4, 104, 4, false);
        assert_eq!(m.len(), 2, "unwritten and written never merge");
        m.insert_as(8, 108, 4, false);
        m.insert_as(12, 112, 4, true);
        assert_eq!(m.len(), 3);
        // Filling a hole between two unwritten records of the same kind merges all three.
        let mut m = ExtentMap::new();
        m.insert_as(0, 10, 2, true);
        m.insert_as(4, 14, 2, true);
        m.insert_as(2, 12, 2, true);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn goal_continues_the_nearest_record() {
        // ext4_ext_find_goal: pblk + (lblk - ee_block) of the record at or before lblk.
        let m = map(&[(0, 33282, 2)]);
        assert_eq!(m.find_goal(2), Some(33284));
        let m = map(&[(0, 32897, 15964)]);
        assert_eq!(m.find_goal(15964), Some(48861));
        // A hole further right: the logical distance is kept.
        assert_eq!(m.find_goal(16000), Some(32897 + 16000));
        // Before the first record: go back by the distance.
        let m = map(&[(10, 1000, 5)]);
        assert_eq!(m.find_goal(4), Some(994));
        assert_eq!(ExtentMap::new().find_goal(0), None);
    }

    #[test]
    fn neighbours_are_last_left_and_first_right_blocks() {
        let m = map(&[(0, 33282, 2), (10, 5000, 3)]);
        assert_eq!(m.left_of(2), (1, 33283));
        assert_eq!(m.right_of(2), (10, 5000));
        assert_eq!(m.left_of(13), (12, 5002));
        assert_eq!(m.right_of(13), (0, 0));
        assert_eq!(ExtentMap::new().left_of(5), (0, 0));
    }

    #[test]
    fn holes_and_truncate() {
        let mut m = map(&[(2, 100, 3), (8, 200, 2)]);
        assert_eq!(m.holes(0, 12), vec![(0, 2), (5, 3), (10, 2)]);
        assert_eq!(m.holes(3, 2), vec![]);
        assert_eq!(m.holes(4, 6), vec![(5, 3)]);
        let freed = m.truncate(3);
        assert_eq!(freed, vec![Extent::new(101, 2), Extent::new(200, 2)]);
        assert_eq!(m.blocks(), 1);
        assert_eq!(m.truncate(0), vec![Extent::new(100, 1)]);
        assert!(m.is_empty());
    }
}
