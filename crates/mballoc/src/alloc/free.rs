//! Frees and commits (`ext4_free_blocks`, `ext4_mb_clear_bb`, `ext4_mb_free_metadata`,
//! `ext4_process_freed_data`); a free that meets a preallocation retires it (see
//! `prealloc::discard`).
//!
//! A free clears the on-disk bitmap and raises the free count at once, but the blocks stay
//! unavailable in-core until the transaction that freed them commits: a crash before the
//! commit could roll the free back, so nobody may reuse them earlier. Without a journal
//! (`Builder::journal(false)`) there is no transaction to wait for, and the blocks go back to
//! the buddy at once, as ext4 does on a filesystem made without one.

use std::sync::atomic::Ordering;

use crate::alloc::allocator::Allocator;
use crate::alloc::context::Ex;
use crate::error::Error;
use smallvec::SmallVec;

use crate::geometry::Geometry;
use crate::group::info::{GroupState, PendingFree};
use crate::group::state;
use crate::request::{Extent, FreeFlags};
use crate::stats::bump;

impl Allocator {
    /// Frees `extent` (blocks `owner` was given) in the running transaction. The blocks can
    /// be allocated again after the next [`Allocator::commit`], or at once on an allocator
    /// built without a journal ([`crate::Builder::journal`]).
    ///
    /// `owner` is the caller's record, not trusted: a live preallocation that handed out any
    /// of these blocks is found by its place in the group and retired (as a truncate does),
    /// whoever owns it, so that a free naming the wrong owner cannot let a block be handed
    /// out twice.
    pub fn free(&self, owner: u64, extent: Extent) -> Result<(), Error> {
        self.free_in_transaction(owner, extent, self.tid.load(Ordering::Relaxed))
    }

    /// [`Allocator::free`] with `ext4_free_blocks`'s flags: with bigalloc a partial cluster
    /// at either end can be kept (see [`Allocator::free_blocks_in_transaction`]).
    pub fn free_with_flags(
        &self,
        owner: u64,
        extent: Extent,
        flags: FreeFlags,
    ) -> Result<(), Error> {
        let tid = self.tid.load(Ordering::Relaxed);
        self.free_blocks_in_transaction(owner, extent, flags, tid)
    }

    /// Frees `extent` as part of transaction `tid` (for callers that run their own journal,
    /// like a trace replay); see [`Allocator::commit_transaction`].
    ///
    /// With bigalloc a partial cluster at either end is freed whole, as `ext4_free_blocks`
    /// does by default; [`Allocator::free_blocks_in_transaction`] can keep it.
    pub fn free_in_transaction(&self, owner: u64, extent: Extent, tid: u64) -> Result<(), Error> {
        self.free_blocks_in_transaction(owner, extent, FreeFlags::default(), tid)
    }

    /// `ext4_free_blocks`: frees blocks `extent` in transaction `tid`, rounded to whole
    /// clusters (bigalloc): a partial cluster at the start or end is freed whole unless
    /// `flags` keeps it (`NOFREE_FIRST_CLUSTER`, `NOFREE_LAST_CLUSTER`: the file still uses
    /// another block of it), and nothing is freed when only kept clusters remain. Without
    /// bigalloc every block is its own cluster and the flags change nothing.
    #[inline]
    pub fn free_blocks_in_transaction(
        &self,
        _owner: u64,
        extent: Extent,
        flags: FreeFlags,
        tid: u64,
    ) -> Result<(), Error> {
        let g = &self.geo;
        if !g.contains(extent.start, u64::from(extent.len)) {
            return Err(Error::OutOfRange {
                start: extent.start,
                len: u64::from(extent.len),
                first_data_block: g.first_data_block(),
                blocks_count: g.blocks_count(),
            });
        }
        let Some(extent) = whole_clusters(g, extent, flags) else {
            return Ok(());
        };
        let clusters = g.b2c(extent.len.into()) as u32;
        let (group, start) = g.locate(extent.start);
        let first = Ex {
            group,
            start,
            len: clusters.min(g.group_len(group) - start),
            logical: 0,
        };
        if first.len == clusters {
            self.free_in_group(extent, first, tid)
        } else {
            self.free_across_groups(extent, tid)
        }
    }

    /// The common case: `extent` lies in one group (`c`). The same steps as
    /// [`Allocator::free_across_groups`], without collecting pieces and guards.
    #[inline]
    fn free_in_group(&self, extent: Extent, c: Ex, tid: u64) -> Result<(), Error> {
        // Unlike ext4 (which skips them), a free into a corrupt group is refused outright.
        self.refuse_corrupt([c.group])?;
        self.load_group(c.group)?;
        loop {
            let mut st = self.lock_group(&self.groups[c.group as usize]);
            self.check_allocated(&mut st, c, extent)?;
            self.refuse_corrupt([c.group])?;
            if !st.has_pa_overlapping(c.start, c.len) {
                self.clear_on_disk(&mut st, c, tid);
                drop(st);
                crate::sync::marked(c.group, || self.geo.flex_bg_size());
                return Ok(());
            }
            // Blocks a live PA handed out: retire it first, as a truncate does (owner before
            // group in the lock order), then check again.
            let pas = st.pas_overlapping(c.start, c.len);
            drop(st);
            self.retire_pas(c.group, &pas);
        }
    }

    /// `extent` crosses groups: every group is locked, and every piece checked before any is
    /// changed, so a bad free changes nothing.
    fn free_across_groups(&self, extent: Extent, tid: u64) -> Result<(), Error> {
        let chunks = self.split(extent);
        self.refuse_corrupt(chunks.iter().map(|c| c.group))?;
        for c in &chunks {
            self.load_group(c.group)?;
        }
        loop {
            let mut guards: SmallVec<[_; 2]> = chunks
                .iter()
                .map(|c| self.lock_group(&self.groups[c.group as usize]))
                .collect();
            for (c, st) in chunks.iter().zip(guards.iter_mut()) {
                self.check_allocated(st, *c, extent)?;
            }
            self.refuse_corrupt(chunks.iter().map(|c| c.group))?;
            let live: SmallVec<[_; 2]> = chunks
                .iter()
                .zip(guards.iter())
                .map(|(c, st)| (c.group, st.pas_overlapping(c.start, c.len)))
                .filter(|(_, pas)| !pas.is_empty())
                .collect();
            if live.is_empty() {
                for (c, st) in chunks.iter().zip(guards.iter_mut()) {
                    self.clear_on_disk(st, *c, tid);
                }
                drop(guards);
                for c in &chunks {
                    crate::sync::marked(c.group, || self.geo.flex_bg_size());
                }
                return Ok(());
            }
            drop(guards);
            for (g, pas) in &live {
                self.retire_pas(*g, pas);
            }
        }
    }

    /// Every block of the piece `c` of `extent` must be in use on disk (a double free or a
    /// free of what was never allocated is refused). Called under the group lock.
    #[inline]
    fn check_allocated(&self, st: &mut GroupState, c: Ex, extent: Extent) -> Result<(), Error> {
        // The group cache may have dropped a clean group since `load_group`.
        self.load_locked(&self.groups[c.group as usize], st)?;
        let l = st.loaded.as_ref().expect("loaded above");
        match l.disk.find_next_zero(c.start, c.start + c.len) {
            Some(bad) => Err(Error::NotAllocated {
                start: extent.start,
                len: u64::from(extent.len),
                block: self.geo.block_of(c.group, bad),
            }),
            None => Ok(()),
        }
    }

    /// `ext4_mb_clear_bb` for the checked piece `c`: free on disk and in the free count at
    /// once, in-core only after the commit (`ext4_mb_free_metadata`); without a journal, in
    /// core at once too (`mb_free_blocks`: no handle, nothing to wait for).
    fn clear_on_disk(&self, st: &mut GroupState, c: Ex, tid: u64) {
        let l = st.loaded.as_mut().expect("loaded by check_allocated");
        // Freed blocks stay unavailable in-core until their transaction commits.
        debug_assert!(l.buddy.all_used(c.start, c.start + c.len));
        l.disk.clear_range(c.start, c.start + c.len);
        crate::sync::bitmap_csum(|| self.geo.clusters_per_group().div_ceil(8));
        st.desc_free += c.len;
        let tid = self.journal_free(c.group, c.start, c.len, tid);
        self.free_blocks.add(i64::from(c.len));
        if !self.journal {
            l.buddy.free_blocks(c.start, c.len);
            self.after_buddy_free(c.group, st);
            return;
        }
        let merged = st.add_pending(PendingFree {
            tid,
            start: c.start,
            len: c.len,
        });
        // The library's own list is per group and needs nothing global; the setting keeps
        // the kernel's lock, taken under the group lock, for the model.
        for _ in 0..free_md_locks(&self.tun.load(), merged) {
            drop(self.md_lock.lock());
        }
        self.free_pending.add(i64::from(c.len));
        self.list_pending(c.group, st);
        self.check_group(&self.groups[c.group as usize], st);
    }

    /// Puts a group with pending frees on the commit's list, once (under its group lock).
    fn list_pending(&self, g: u32, st: &mut GroupState) {
        if !st.listed {
            st.listed = true;
            self.pending_groups.lock().push(g);
        }
    }

    /// The per-group pieces of `extent` (one, unless it crosses a group boundary).
    fn split(&self, extent: Extent) -> SmallVec<[Ex; 2]> {
        let mut out = SmallVec::new();
        let (mut s, end) = (extent.start, extent.end());
        while s < end {
            let (g, off) = self.geo.locate(s);
            let n = self
                .geo
                .num_b2c(end - s)
                .min(u64::from(self.geo.group_len(g) - off)) as u32;
            out.push(Ex {
                group: g,
                start: off,
                len: n,
                logical: 0,
            });
            s += self.geo.c2b(n.into());
        }
        out
    }

    /// Commits the running transaction: with a store, every allocation and free so far
    /// becomes durable in one atomic store commit; then every block freed in it becomes
    /// allocatable. Returns the committed transaction id. On error nothing is lost: the frees
    /// stay pending and the next commit retries.
    pub fn commit(&self) -> Result<u64, Error> {
        // The running transaction holds everything this thread did before calling.
        self.commit_from(self.tid.load(Ordering::Relaxed))
    }

    /// [`Allocator::commit`] for a caller whose changes are in transaction `want` or earlier.
    ///
    /// One commit at a time, as jbd2 runs them: a commit returns only after every earlier one
    /// has released its frees, so a caller retrying after ENOSPC finds them free even when
    /// another thread's commit took them off the pending list. A caller that finds a commit
    /// under way waits for it to finish, as `jbd2_log_wait_commit` does, not for the commit
    /// lock: a task looping on free, allocate and commit would otherwise take the lock again
    /// and again while the waiter, whose transaction its first commit closed, sleeps on; by
    /// the time the waiter runs, that task has used up what the commits released, and an
    /// ENOSPC retry fails with every free block waiting for a commit.
    fn commit_from(&self, want: u64) -> Result<u64, Error> {
        loop {
            // Acquire: pairs with the commit's Release store, after its release of the frees.
            let done = self.committed.load(Ordering::Acquire);
            if done >= want {
                // Group commit: the commit we waited for closed our transaction, so it
                // carried our changes (they were journaled and listed before it closed, or
                // we would have read a later tid) and released our frees. jbd2 waiters
                // return the same way.
                return Ok(done);
            }
            if let Some(serial) = self.committing.try_lock() {
                let result = self.commit_locked(want);
                drop(serial);
                self.wake_commit_waiters();
                return result;
            }
            self.wait_for_commit(want);
        }
    }

    /// The commit itself, under the commit lock: closes the running transaction unless a
    /// commit since `want` was read already closed it.
    fn commit_locked(&self, want: u64) -> Result<u64, Error> {
        let done = self.committed.load(Ordering::Relaxed);
        if done >= want {
            return Ok(done);
        }
        let tid = self.make_durable(None)?;
        self.release_committed(tid);
        self.committed.store(tid, Ordering::Release);
        // Waiters whose transaction this closed may go now, before the lock is let go.
        self.wake_commit_waiters();
        Ok(tid)
    }

    /// Sleeps until transaction `want` is committed or no commit is under way
    /// (`jbd2_log_wait_commit`). Both are checked under the waiters' lock, which a commit
    /// takes to wake them after changing either, so no wake-up is lost.
    fn wait_for_commit(&self, want: u64) {
        let (lock, cv) = &*self.commit_done;
        let mut g = lock.lock();
        while self.committed.load(Ordering::Acquire) < want && self.committing.is_locked() {
            g = cv.wait(g);
        }
    }

    /// Wakes every task in [`Allocator::wait_for_commit`] (`wake_up(&j_wait_done_commit)`).
    fn wake_commit_waiters(&self) {
        let (lock, cv) = &*self.commit_done;
        let _g = lock.lock();
        cv.notify_all();
    }

    /// Makes the frees of every transaction `<= tid` allocatable (`ext4_process_freed_data`),
    /// after making every change so far durable when there is a store.
    pub fn commit_transaction(&self, tid: u64) -> Result<(), Error> {
        let serial = self.committing.lock();
        let result = self.make_durable(Some(tid)).map(|_| {
            self.release_committed(tid);
            self.committed.fetch_max(tid, Ordering::Release);
        });
        drop(serial);
        self.wake_commit_waiters();
        result
    }

    /// The in-core half of a commit: frees of transactions `<= tid` go back to the buddy.
    fn release_committed(&self, tid: u64) {
        bump(&self.stats.commits);
        let groups = std::mem::take(&mut *self.pending_groups.lock());
        for g in groups {
            let grp = &self.groups[g as usize];
            let mut st = self.lock_group(grp);
            st.listed = false;
            let GroupState {
                pending, loaded, ..
            } = &mut *st;
            let l = loaded
                .as_mut()
                .expect("pending frees only exist in loaded groups");
            let mut released = 0u32;
            pending.retain(|p| {
                if p.tid > tid {
                    return true;
                }
                // Nothing can have taken a pending free's blocks on disk: they were unavailable
                // in-core since the free.
                debug_assert!(l.disk.all_clear(p.start, p.start + p.len), "{p:?}");
                l.buddy.free_blocks(p.start, p.len);
                released += p.len;
                false
            });
            if !pending.is_empty() {
                self.list_pending(g, &mut st);
            }
            if released == 0 {
                continue;
            }
            self.free_pending.add(-i64::from(released));
            self.after_buddy_free(g, &mut st);
        }
    }

    /// After freed blocks went back to group `g`'s buddy (`ext4_free_data_in_buddy`, or
    /// `ext4_mb_clear_bb` without a journal): the group needs trimming again, the blocks
    /// count as entered (`discard_pa_seq`), and the group's summary moves. Under its lock.
    #[inline(always)]
    fn after_buddy_free(&self, g: u32, st: &mut GroupState) {
        self.bits(g).clear(state::WAS_TRIMMED);
        self.bump_discard_seq();
        self.publish(&self.groups[g as usize], st);
    }
}

/// The rounding of `ext4_free_blocks`: `extent` (blocks) grown to whole clusters, or shrunk
/// where `flags` keeps a partial first or last cluster; `None` if nothing is left to free.
/// The result starts on a cluster and is a whole number of clusters long.
pub(crate) fn whole_clusters(geo: &Geometry, extent: Extent, flags: FreeFlags) -> Option<Extent> {
    if geo.cluster_bits() == 0 {
        return Some(extent);
    }
    let ratio = u64::from(geo.cluster_ratio());
    let (mut block, mut count) = (extent.start, u64::from(extent.len));
    let overflow = geo.cluster_offset(block);
    if overflow > 0 {
        if flags.contains(FreeFlags::NOFREE_FIRST_CLUSTER) {
            let skip = ratio - overflow;
            if count <= skip {
                return None;
            }
            block += skip;
            count -= skip;
        } else {
            block -= overflow;
            count += overflow;
        }
    }
    let overflow = geo.cluster_offset(count);
    if overflow > 0 {
        if flags.contains(FreeFlags::NOFREE_LAST_CLUSTER) {
            if count <= overflow {
                return None;
            }
            count -= overflow;
        } else {
            count += ratio - overflow;
        }
    }
    debug_assert!(geo.cluster_offset(block) == 0 && geo.cluster_offset(count) == 0);
    Some(Extent::new(block, count as u32))
}

/// How often `ext4_mb_free_metadata` takes `s_md_lock` for a freed extent that merged with
/// `merged` pending neighbours. Before 6.17 the extent was inserted first and each merged
/// neighbour left the transaction's list (`list_del`) under the lock, then the extent joined
/// it (`list_add_tail`): 1 + merged. Since `ext4: merge freed extent with existing extents
/// before insertion` the extent merges into its neighbour first (no lock), a second merge
/// removes that neighbour's list entry (`ext4_merge_freed_extents`), and only an extent that
/// merged with nothing is added: 1, 0, 1.
fn free_md_locks(tun: &crate::tunables::Tunables, merged: u8) -> u8 {
    debug_assert!(merged <= 2, "an extent has two neighbours, not {merged}");
    match (tun.free_md_lock, tun.free_insert_then_merge, merged) {
        (false, _, _) => 0,
        (true, true, m) => 1 + m,
        (true, false, 1) => 0,
        (true, false, _) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::Geometry;
    use std::sync::mpsc;
    use std::time::Duration;

    /// `ext4_free_blocks`'s rounding with 4 blocks per cluster: partial clusters are freed
    /// whole unless a flag keeps them; nothing is left when only kept clusters remain.
    #[test]
    fn frees_round_to_whole_clusters() {
        let g = Geometry::with_clusters(4096, 2, 32768, 1 << 20, 0, 16).unwrap();
        let round = |start, len, flags| whole_clusters(&g, Extent::new(start, len), flags);
        let none = FreeFlags::default();
        let (first, last) = (
            FreeFlags::NOFREE_FIRST_CLUSTER,
            FreeFlags::NOFREE_LAST_CLUSTER,
        );
        assert_eq!(round(8, 8, none), Some(Extent::new(8, 8)));
        assert_eq!(round(9, 2, none), Some(Extent::new(8, 4)));
        assert_eq!(round(9, 8, none), Some(Extent::new(8, 12)));
        assert_eq!(round(9, 8, first), Some(Extent::new(12, 8)));
        assert_eq!(round(9, 8, last), Some(Extent::new(8, 8)));
        assert_eq!(round(9, 8, first | last), Some(Extent::new(12, 4)));
        assert_eq!(round(9, 2, first), None);
        assert_eq!(round(8, 3, last), None);
        // One block per cluster: the flags change nothing.
        let plain = Geometry::ext4_default(1 << 30).unwrap();
        let e = Extent::new(9, 3);
        assert_eq!(whole_clusters(&plain, e, first | last), Some(e));
    }

    /// A free of blocks shared with a partial cluster the file keeps frees only the other
    /// clusters; the kept cluster stays allocated, and freeing its last block frees it.
    #[test]
    fn partial_cluster_frees_keep_what_the_file_uses() {
        let g = Geometry::with_clusters(4096, 4, 32768, 1 << 20, 0, 16).unwrap();
        let a = Allocator::builder(g).cpus(1).build().unwrap();
        let req = crate::Request::new(12, 0, 64).with_goal(16 * 100);
        let got = a.allocate(&req).unwrap().extent;
        assert_eq!((got.start % 16, got.len), (0, 64));
        let before = a.free_blocks();
        // Blocks 8..40 of the file: cluster 0 and 2 are kept (partial), cluster 1 is freed.
        let tid = 1;
        let mid = Extent::new(got.start + 8, 32);
        let keep = FreeFlags::NOFREE_FIRST_CLUSTER | FreeFlags::NOFREE_LAST_CLUSTER;
        a.free_blocks_in_transaction(12, mid, keep, tid).unwrap();
        assert_eq!(a.free_blocks(), before + 16);
        // The kept clusters are still in use: freeing them again is no double free.
        a.free_blocks_in_transaction(12, Extent::new(got.start, 8), FreeFlags::default(), tid)
            .unwrap();
        assert_eq!(a.free_blocks(), before + 32);
        // Cluster 1 was freed already: a default free touching it is a double free.
        assert!(a
            .free_blocks_in_transaction(
                12,
                Extent::new(got.start + 16, 1),
                FreeFlags::default(),
                tid
            )
            .is_err());
    }

    /// A task waiting for a commit returns once the commit that closed its transaction is
    /// done, even while the committing task holds on to the commit lock (as it does when it
    /// commits again at once: an ENOSPC loop of free, allocate and commit). A waiter that
    /// must win the commit lock to return never does here, and in a workload only after the
    /// other task's later commits, each giving that task time to use up what was released.
    #[test]
    fn a_commit_waiter_returns_when_its_transaction_is_committed() {
        let a = Allocator::builder(Geometry::ext4_default(1 << 30).unwrap())
            .cpus(2)
            .build()
            .unwrap();
        let want = a.tid.load(Ordering::Relaxed);
        // Another task's commit is under way, and that task keeps the lock throughout.
        let serial = a.committing.lock();
        let (returned, result) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| returned.send(a.commit_from(want)).unwrap());
            // Give the waiter time to find the commit under way and sleep.
            std::thread::sleep(Duration::from_millis(100));
            assert!(
                result.try_recv().is_err(),
                "returned before its transaction was committed"
            );
            let closed = a.commit_locked(want).unwrap();
            assert_eq!(closed, want);
            let got = result.recv_timeout(Duration::from_secs(10));
            // Let a waiter still asleep go, so that a failure is reported, not a hang.
            drop(serial);
            a.wake_commit_waiters();
            assert_eq!(
                got.expect("the waiter did not return while the commit lock was held")
                    .unwrap(),
                closed
            );
        });
    }

    /// A waiter whose transaction is still open when the commit under way ends commits it
    /// itself once the lock is free.
    #[test]
    fn a_commit_waiter_commits_what_the_commit_under_way_left_open() {
        let a = Allocator::builder(Geometry::ext4_default(1 << 30).unwrap())
            .cpus(2)
            .build()
            .unwrap();
        let serial = a.committing.lock();
        let (returned, result) = mpsc::channel();
        std::thread::scope(|s| {
            // Its changes are in the transaction after the one being committed.
            let want = a.tid.load(Ordering::Relaxed) + 1;
            let waiter = &a;
            s.spawn(move || returned.send(waiter.commit_from(want)).unwrap());
            std::thread::sleep(Duration::from_millis(100));
            let closed = a.commit_locked(a.tid.load(Ordering::Relaxed)).unwrap();
            drop(serial);
            a.wake_commit_waiters();
            let got = result.recv_timeout(Duration::from_secs(10));
            assert_eq!(got.expect("the waiter did not return").unwrap(), closed + 1);
        });
    }
}
