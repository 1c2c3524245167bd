//! The journal's commit points. jbd2 commits the running transaction every 5 s, and at once
//! when someone waits for it (fsync after an allocation, or ENOSPC in `ext4_should_retry_alloc`).
//! A simulation without a clock commits every `every` file operations and at every fsync that
//! wrote back data. Frees become allocatable only at a commit ([`mballoc::Allocator::free`]),
//! which is why the interval matters for reuse.
//!
//! A workload with a clock drives the commits itself ([`Journal::set_timed`]): a commit
//! closes the running transaction when it starts ([`Journal::close`]) and releases the frees
//! of the transactions it closed when it ends ([`Journal::release`]), as jbd2 does: blocks
//! freed while a commit runs belong to the next transaction, and nothing freed becomes
//! allocatable before the commit carrying it has finished (`ext4_process_freed_data` runs
//! from the commit callback).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use mballoc::Allocator;

use super::error::FsError;

/// Default commit interval in file operations.
pub const DEFAULT_COMMIT_OPS: u64 = 4096;

/// Counts file operations and commits every `every` of them.
#[derive(Debug)]
pub struct Journal {
    every: u64,
    ops: AtomicU64,
    commits: AtomicU64,
    /// Commits are started and ended by the caller's clock, not by operations or fsync.
    timed: AtomicBool,
    /// The running transaction under a timed journal (frees carry it).
    running: AtomicU64,
}

impl Journal {
    pub fn new(every: u64) -> Result<Journal, FsError> {
        if every == 0 {
            return Err(FsError::BadCommitInterval(every));
        }
        Ok(Journal {
            every,
            ops: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            timed: AtomicBool::new(false),
            running: AtomicU64::new(1),
        })
    }

    /// Hands the commit points to the caller's clock: operations and fsync no longer commit;
    /// [`Journal::close`] and [`Journal::release`] do (an ENOSPC retry and
    /// [`Journal::commit`] still commit at once, as a forced jbd2 commit does).
    pub fn set_timed(&self) {
        self.timed.store(true, Ordering::Relaxed);
    }

    pub fn is_timed(&self) -> bool {
        self.timed.load(Ordering::Relaxed)
    }

    /// The transaction a free made now belongs to: `None` under the allocator's own
    /// transactions (untimed).
    pub fn free_tid(&self) -> Option<u64> {
        self.is_timed()
            .then(|| self.running.load(Ordering::Relaxed))
    }

    /// Counts one operation; commits when the interval is reached (untimed only).
    pub fn tick(&self, alloc: &Allocator) -> Result<(), mballoc::Error> {
        let n = self.ops.fetch_add(1, Ordering::Relaxed) + 1;
        if !self.is_timed() && n.checked_rem(self.every) == Some(0) {
            self.commit(alloc)?;
        }
        Ok(())
    }

    /// The commit an fsync that wrote back data waits for: at once when untimed; a timed
    /// journal's caller schedules it.
    pub fn sync(&self, alloc: &Allocator) -> Result<(), mballoc::Error> {
        if self.is_timed() {
            return Ok(());
        }
        self.commit(alloc)
    }

    /// Commits now: everything freed so far becomes allocatable.
    pub fn commit(&self, alloc: &Allocator) -> Result<(), mballoc::Error> {
        if self.is_timed() {
            let tid = self.close();
            return self.release(alloc, tid);
        }
        alloc.commit()?;
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A timed commit starts: the running transaction closes (later frees go to the next
    /// one); returns its id for [`Journal::release`].
    pub fn close(&self) -> u64 {
        self.running.fetch_add(1, Ordering::Relaxed)
    }

    /// A timed commit ends: the frees of every transaction up to `tid` become allocatable.
    pub fn release(&self, alloc: &Allocator, tid: u64) -> Result<(), mballoc::Error> {
        alloc.commit_transaction(tid)?;
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// File operations counted so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }

    /// Commits made through this journal.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    pub fn every(&self) -> u64 {
        self.every
    }
}
