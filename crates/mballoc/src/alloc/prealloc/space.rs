//! Preallocations: inode PAs (one owner, a logical range mapped to a physical range) and
//! per-CPU locality-group PAs (small files share them, consumed from the start).
//!
//! Kernel counterparts: `struct ext4_prealloc_space`, `struct ext4_locality_group`,
//! `ext4_mb_use_preallocated`, `ext4_mb_use_inode_pa`, `ext4_mb_check_group_pa`,
//! `ext4_mb_add_n_trim`, `ext4_mb_discard_lg_preallocations`.
//!
//! The kernel marks PAs deleted and unlinks them later under RCU; here every PA lives behind
//! its owner's or locality group's mutex and is removed at once, so "deleted" PAs never exist.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use crate::group::buddy::fls;
use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::sync::percpu::Padded;
use crate::sync::Mutex;

/// `PREALLOC_TB_SIZE`: locality-group PA buckets by `min(fls(free) − 1, 9)`.
pub const PREALLOC_TB_SIZE: usize = 10;
/// `ext4_mb_add_n_trim`: trim a bucket holding more than 8 PAs…
const LG_LIST_MAX: usize = 8;
/// …down to 5 (`ext4_mb_discard_lg_preallocations`).
const LG_LIST_TRIM_TO: usize = 5;

/// An inode preallocation: logical blocks `[lstart, lstart + C2B(len))` ↔ physical blocks
/// `[pstart, pstart + C2B(len))`; `len` and `free` count clusters (`pa_len`, `pa_free`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InodePa {
    pub pstart: u64,
    pub lstart: u32,
    pub len: u32,
    /// Clusters not handed out yet (only counts: use may be out of order).
    pub free: u32,
}

impl InodePa {
    /// `pa_logical_end`: the first logical block past the PA, with clusters of
    /// `2^cluster_bits` blocks.
    pub fn lend(&self, cluster_bits: u32) -> u64 {
        u64::from(self.lstart) + (u64::from(self.len) << cluster_bits)
    }
}

/// The PAs of one owner, keyed by logical start (the kernel's `i_prealloc_node` rb-tree).
#[derive(Debug, Default)]
pub struct OwnerPas {
    pub pas: BTreeMap<u32, InodePa>,
}

impl OwnerPas {
    /// Takes out the PA keyed `lstart` if it still starts at `pstart`: a group's list entry
    /// ([`crate::group::info::PaSpan`]) read before its owner's lock may name a PA released since.
    pub fn take_at(&mut self, lstart: u32, pstart: u64) -> Option<InodePa> {
        match self.pas.get(&lstart) {
            Some(pa) if pa.pstart == pstart => self.pas.remove(&lstart),
            _ => None,
        }
    }
    /// The only PA that can hold logical block `l`: the one with the greatest start ≤ `l`
    /// (the predecessor walk of `ext4_mb_use_preallocated`), if it covers `l`.
    pub fn covering(&self, l: u32, cluster_bits: u32) -> Option<InodePa> {
        let (_, pa) = self.pas.range(..=l).next_back()?;
        (u64::from(l) < pa.lend(cluster_bits)).then_some(*pa)
    }
    /// End of the nearest PA left of `l` and start of the nearest PA right of `l`
    /// (`ext4_mb_pa_adjust_overlap`).
    pub fn neighbours(&self, l: u32, cluster_bits: u32) -> (Option<u64>, Option<u64>) {
        let left = self
            .pas
            .range(..l)
            .next_back()
            .map(|(_, pa)| pa.lend(cluster_bits));
        let right = self.pas.range(l..).next().map(|(&s, _)| u64::from(s));
        (left, right)
    }
}

/// One shard of the owner table. Owner numbers are trusted keys (inode numbers), so a
/// multiplicative hash replaces SipHash's flooding resistance, which costs more than the
/// rest of a preallocation hit.
type OwnerMap = HashMap<u64, Arc<Mutex<OwnerPas>>, BuildHasherDefault<OwnerHasher>>;

/// Fibonacci hashing of a `u64` key.
#[derive(Default)]
pub struct OwnerHasher(u64);

impl Hasher for OwnerHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// All owners' PA trees. Each owner has its own mutex, held for the whole allocation like the
/// kernel's `i_data_sem`, so PAs of one owner never race.
pub struct OwnerTable {
    shards: Vec<Padded<Mutex<OwnerMap>>>,
    /// Entries in all shards: lets a lookup skip the shard lock when there are none (owners
    /// that never preallocate, like a storage engine's `HINT_NOPREALLOC` extents).
    entries: Padded<AtomicUsize>,
}

impl OwnerTable {
    pub fn new() -> Self {
        OwnerTable {
            shards: (0..64)
                .map(|_| Padded(Mutex::new(OwnerMap::default())))
                .collect(),
            entries: Padded(AtomicUsize::new(0)),
        }
    }
    fn shard(&self, owner: u64) -> &Mutex<OwnerMap> {
        &self.shards[(owner.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize]
    }
    pub fn get_or_create(&self, owner: u64) -> Arc<Mutex<OwnerPas>> {
        self.shard(owner)
            .lock()
            .entry(owner)
            .or_insert_with(|| {
                self.entries.fetch_add(1, Ordering::Relaxed);
                Arc::default()
            })
            .clone()
    }
    pub fn get(&self, owner: u64) -> Option<Arc<Mutex<OwnerPas>>> {
        if self.entries.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.shard(owner).lock().get(&owner).cloned()
    }
    /// Drops the owner's entry if it holds no PA and nobody else uses it.
    pub fn forget_if_empty(&self, owner: u64) {
        let mut shard = self.shard(owner).lock();
        if let Some(e) = shard.get(&owner) {
            if Arc::strong_count(e) == 1 && e.try_lock().is_some_and(|p| p.pas.is_empty()) {
                shard.remove(&owner);
                self.entries.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
    pub fn all(&self) -> Vec<(u64, Arc<Mutex<OwnerPas>>)> {
        self.shards
            .iter()
            .flat_map(|s| {
                s.lock()
                    .iter()
                    .map(|(&o, p)| (o, p.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

impl Default for OwnerTable {
    fn default() -> Self {
        Self::new()
    }
}

/// A locality-group PA: blocks `[pstart, pstart + C2B(len))`, `len` clusters, all of it free
/// (consumed from the start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupPa {
    pub pstart: u64,
    pub len: u32,
}

/// A per-CPU locality group (`struct ext4_locality_group`).
#[derive(Debug, Default)]
pub struct LocalityGroup {
    pub lists: [Vec<GroupPa>; PREALLOC_TB_SIZE],
}

/// Bucket of a PA with `free` clusters.
pub fn bucket(free: u32) -> usize {
    ((fls(free).max(1) - 1) as usize).min(PREALLOC_TB_SIZE - 1)
}

impl LocalityGroup {
    /// The PA to serve `len` clusters near `goal`: over buckets `bucket(len)..`, the PA with
    /// `len` or more free and the smallest distance to the goal, earlier ones winning ties
    /// (`ext4_mb_check_group_pa`). Returns (bucket, index).
    pub fn best_for(&self, len: u32, goal: u64) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize, u64)> = None;
        for b in bucket(len)..PREALLOC_TB_SIZE {
            for (i, pa) in self.lists[b].iter().enumerate() {
                if pa.len < len {
                    continue;
                }
                let d = goal.abs_diff(pa.pstart);
                if best.is_none_or(|(_, _, bd)| d < bd) {
                    best = Some((b, i, d));
                }
            }
        }
        best.map(|(b, i, _)| (b, i))
    }

    /// Re-inserts a PA with free space left, sorted by free count inside its bucket, and
    /// returns the PAs trimmed from that bucket if it grew past 8 (`ext4_mb_add_n_trim`).
    /// The PA being inserted is in use, so it is never trimmed.
    pub fn add_n_trim(&mut self, pa: GroupPa) -> Vec<GroupPa> {
        let b = bucket(pa.len);
        let list = &mut self.lists[b];
        let pos = list
            .iter()
            .position(|t| pa.len < t.len)
            .unwrap_or(list.len());
        list.insert(pos, pa);
        let mut total = list.len();
        let mut trimmed = Vec::new();
        if total > LG_LIST_MAX {
            let (mut i, mut keep) = (0, pos);
            while i < list.len() && total > LG_LIST_TRIM_TO {
                if i == keep {
                    i += 1;
                    continue;
                }
                trimmed.push(list.remove(i));
                if i < keep {
                    keep -= 1;
                }
                total -= 1;
            }
        }
        trimmed
    }

    pub fn take_all(&mut self) -> Vec<GroupPa> {
        self.lists.iter_mut().flat_map(std::mem::take).collect()
    }
    /// Takes out the PAs `pick` chooses, keeping the others in their order.
    pub fn take_where(&mut self, mut pick: impl FnMut(&GroupPa) -> bool) -> Vec<GroupPa> {
        let mut out = Vec::new();
        for list in &mut self.lists {
            list.retain(|pa| {
                let take = pick(pa);
                if take {
                    out.push(*pa);
                }
                !take
            });
        }
        out
    }
}

/// The preallocation stage's state: every owner's inode PAs, and one locality group per
/// possible CPU (`s_locality_groups`).
pub(crate) struct Preallocs {
    pub(crate) owners: OwnerTable,
    lgs: Box<[Padded<Mutex<LocalityGroup>>]>,
}

impl Preallocs {
    /// No PA yet, `cpus` empty locality groups.
    pub(crate) fn new(cpus: u32) -> Preallocs {
        Preallocs {
            owners: OwnerTable::new(),
            lgs: (0..cpus)
                .map(|_| Padded(Mutex::new(LocalityGroup::default())))
                .collect(),
        }
    }

    /// Locality group `i` (see `Allocator::lg_index`).
    #[inline]
    pub(crate) fn lg(&self, i: usize) -> &Mutex<LocalityGroup> {
        &self.lgs[i]
    }

    /// Every locality group, in index order.
    pub(crate) fn lgs(&self) -> impl Iterator<Item = &Mutex<LocalityGroup>> {
        self.lgs.iter().map(|lg| &**lg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_is_the_predecessor_only() {
        let mut o = OwnerPas::default();
        o.pas.insert(
            0,
            InodePa {
                pstart: 1000,
                lstart: 0,
                len: 128,
                free: 128,
            },
        );
        o.pas.insert(
            256,
            InodePa {
                pstart: 5000,
                lstart: 256,
                len: 64,
                free: 64,
            },
        );
        assert_eq!(o.covering(100, 0).map(|p| p.pstart), Some(1000));
        assert_eq!(o.covering(128, 0), None);
        assert_eq!(o.covering(300, 0).map(|p| p.pstart), Some(5000));
        assert_eq!(o.neighbours(200, 0), (Some(128), Some(256)));
        // With 2 blocks per cluster the first PA's 128 clusters reach logical block 256.
        assert_eq!(o.covering(255, 0), None);
        assert_eq!(o.covering(255, 1).map(|p| p.pstart), Some(1000));
        assert_eq!(o.neighbours(200, 1), (Some(256), Some(256)));
    }

    #[test]
    fn group_pa_choice_by_distance() {
        let mut lg = LocalityGroup::default();
        lg.add_n_trim(GroupPa {
            pstart: 100,
            len: 300,
        });
        lg.add_n_trim(GroupPa {
            pstart: 5000,
            len: 500,
        });
        lg.add_n_trim(GroupPa {
            pstart: 9000,
            len: 3,
        });
        assert_eq!(lg.best_for(4, 4000), Some((8, 1)));
        assert_eq!(lg.best_for(4, 0), Some((8, 0)));
        assert_eq!(lg.best_for(400, 0), Some((8, 1)));
        assert_eq!(lg.best_for(600, 0), None);
    }

    #[test]
    fn trims_buckets_past_eight_keeping_the_new_one() {
        let mut lg = LocalityGroup::default();
        for i in 0..8 {
            assert!(lg
                .add_n_trim(GroupPa {
                    pstart: i * 1000,
                    len: 300 + i as u32
                })
                .is_empty());
        }
        let trimmed = lg.add_n_trim(GroupPa {
            pstart: 99_000,
            len: 256,
        });
        assert_eq!(trimmed.len(), 4);
        assert_eq!(lg.lists[8].len(), 5);
        assert!(lg.lists[8].iter().any(|p| p.pstart == 99_000));
    }
}
