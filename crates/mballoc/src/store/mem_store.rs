//! [`MemStore`]: the store contract with nothing durable behind it, for tests, simulations and
//! engines that persist allocation state some other way.
//!
//! It can charge a configurable cost per bitmap load, so that the effects of lazy group
//! loading (the kernel's `ext4_mb_load_buddy` reading a bitmap from disk through
//! `ext4_read_block_bitmap`) can be measured without a disk; the cost is paid outside any lock, like I/O
//! waits, so parallel loads overlap.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::bitmap::{bitmap_len, count_set, BitmapBytes};
use super::delta::{apply_checked, apply_unchecked, split};
use super::verify::check_counts;
use super::{
    Commit, CommitId, Extent, GroupDesc, GroupFlags, Problem, Store, StoreError, StoreStats,
};
use crate::geometry::Geometry;
use crate::sync::Mutex;

/// What one bitmap load costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadCost {
    /// Nothing.
    #[default]
    Free,
    /// Sleep: models waiting on a device (other threads keep the CPU).
    Sleep(Duration),
    /// Busy-wait: models CPU work such as checksumming (the thread keeps the CPU).
    Spin(Duration),
}

impl LoadCost {
    fn pay(self) {
        match self {
            LoadCost::Free => {}
            LoadCost::Sleep(d) => std::thread::sleep(d),
            LoadCost::Spin(d) => {
                let until = Instant::now() + d;
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

struct State {
    descs: Vec<GroupDesc>,
    /// `None`: the group is `BLOCK_UNINIT` (all free), so a huge store costs no memory upfront.
    bitmaps: Vec<Option<Box<[u8]>>>,
    corrupt: BTreeMap<u32, String>,
    seq: u64,
}

/// An in-memory store.
pub struct MemStore {
    geometry: Geometry,
    state: Mutex<State>,
    cost: LoadCost,
    loads: AtomicU64,
    commits: AtomicU64,
}

impl MemStore {
    /// A store with `used` blocks in use (overlaps allowed) and the rest free.
    pub fn new(geometry: Geometry, used: &[Extent]) -> Result<Self, StoreError> {
        let groups = geometry.group_count() as usize;
        let mut bitmaps: Vec<Option<Box<[u8]>>> = vec![None; groups];
        let mut descs: Vec<GroupDesc> = (0..geometry.group_count())
            .map(|g| GroupDesc {
                free: geometry.group_len(g),
                flags: GroupFlags::BLOCK_UNINIT,
            })
            .collect();
        for d in split(
            &geometry,
            &Commit {
                allocated: used.to_vec(),
                freed: Vec::new(),
            },
        )? {
            let mut bitmap = BitmapBytes::all_free(&geometry, d.group).into_bytes();
            apply_unchecked(&mut bitmap, &d.runs);
            descs[d.group as usize] = desc_of(&geometry, d.group, &bitmap);
            bitmaps[d.group as usize] = Some(bitmap);
        }
        let state = State {
            descs,
            bitmaps,
            corrupt: BTreeMap::new(),
            seq: 0,
        };
        Ok(MemStore {
            geometry,
            state: Mutex::new(state),
            cost: LoadCost::Free,
            loads: AtomicU64::new(0),
            commits: AtomicU64::new(0),
        })
    }

    /// Every bitmap load sleeps for `cost` (a device read).
    pub fn with_load_cost(self, cost: Duration) -> Self {
        self.with_cost(LoadCost::Sleep(cost))
    }

    /// Every bitmap load costs `cost`.
    pub fn with_cost(mut self, cost: LoadCost) -> Self {
        self.cost = cost;
        self
    }

    /// Makes `group` fail its next and every later load, as a bad checksum would.
    pub fn mark_corrupt(&self, group: u32, what: &str) -> Result<(), StoreError> {
        self.check_group(group)?;
        self.state.lock().corrupt.insert(group, what.to_string());
        Ok(())
    }

    fn check_group(&self, group: u32) -> Result<(), StoreError> {
        let groups = self.geometry.group_count();
        if group < groups {
            Ok(())
        } else {
            Err(StoreError::NoSuchGroup { group, groups })
        }
    }

    fn bitmap_of(&self, st: &State, group: u32) -> Box<[u8]> {
        match &st.bitmaps[group as usize] {
            Some(b) => b.clone(),
            None => BitmapBytes::all_free(&self.geometry, group).into_bytes(),
        }
    }
}

fn desc_of(geometry: &Geometry, group: u32, bitmap: &[u8]) -> GroupDesc {
    let len = geometry.group_len(group);
    GroupDesc {
        free: len - count_set(bitmap, 0, len),
        flags: GroupFlags::default(),
    }
}

fn public(st: &State, group: u32) -> GroupDesc {
    let mut d = st.descs[group as usize];
    if st.corrupt.contains_key(&group) {
        d.flags.0 |= GroupFlags::CORRUPT.0;
    }
    d
}

impl Store for MemStore {
    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn descriptor(&self, group: u32) -> Result<GroupDesc, StoreError> {
        self.check_group(group)?;
        Ok(public(&self.state.lock(), group))
    }

    fn descriptors(&self) -> Vec<GroupDesc> {
        let st = self.state.lock();
        (0..self.geometry.group_count())
            .map(|g| public(&st, g))
            .collect()
    }

    fn read_bitmap(&self, group: u32) -> Result<BitmapBytes, StoreError> {
        self.check_group(group)?;
        let bytes = {
            let st = self.state.lock();
            if let Some(what) = st.corrupt.get(&group) {
                return Err(StoreError::Corrupt {
                    group,
                    what: what.clone(),
                });
            }
            self.bitmap_of(&st, group)
        };
        self.loads.fetch_add(1, Relaxed);
        self.cost.pay();
        Ok(BitmapBytes::from_raw(bytes, self.geometry.group_len(group)))
    }

    /// Validates every group on copies, then installs them all under one lock.
    fn commit(&self, commit: &Commit) -> Result<CommitId, StoreError> {
        let mut st = self.state.lock();
        if commit.is_empty() {
            return Ok(CommitId(st.seq));
        }
        let mut staged = Vec::new();
        for d in split(&self.geometry, commit)? {
            if let Some(what) = st.corrupt.get(&d.group) {
                return Err(StoreError::Corrupt {
                    group: d.group,
                    what: what.clone(),
                });
            }
            let mut bitmap = self.bitmap_of(&st, d.group);
            apply_checked(&self.geometry, d.group, &mut bitmap, &d.runs)?;
            staged.push((d.group, bitmap));
        }
        for (group, bitmap) in staged {
            st.descs[group as usize] = desc_of(&self.geometry, group, &bitmap);
            st.bitmaps[group as usize] = Some(bitmap);
        }
        st.seq += 1;
        self.commits.fetch_add(1, Relaxed);
        Ok(CommitId(st.seq))
    }

    fn last_commit(&self) -> CommitId {
        CommitId(self.state.lock().seq)
    }

    fn corrupt_groups(&self) -> Vec<u32> {
        self.state.lock().corrupt.keys().copied().collect()
    }

    fn verify(&self) -> Result<Vec<Problem>, StoreError> {
        let st = self.state.lock();
        let mut out = Vec::new();
        for (g, bitmap) in st.bitmaps.iter().enumerate() {
            let group = g as u32;
            let len = self.geometry.group_len(group);
            match bitmap {
                Some(b) if b.len() == bitmap_len(&self.geometry) => {
                    let b = BitmapBytes::from_raw(b.clone(), len);
                    out.extend(check_counts(group, st.descs[g].free, &b));
                }
                Some(_) => out.push(Problem::BadFreeCount {
                    group,
                    free: st.descs[g].free,
                    group_len: len,
                    uninit: false,
                }),
                None if st.descs[g].free != len => {
                    out.push(Problem::BadFreeCount {
                        group,
                        free: st.descs[g].free,
                        group_len: len,
                        uninit: true,
                    });
                }
                None => {}
            }
        }
        Ok(out)
    }

    fn stats(&self) -> StoreStats {
        StoreStats {
            bitmap_loads: self.loads.load(Relaxed),
            commits: self.commits.load(Relaxed),
            ..StoreStats::default()
        }
    }
}
