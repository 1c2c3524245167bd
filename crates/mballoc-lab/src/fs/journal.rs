//! The journal's commit points. jbd2 commits the running transaction every 5 s, and at once
//! when someone waits for it (fsync after an allocation, or ENOSPC in `ext4_should_retry_alloc`).
//! A simulation has no clock, so the periodic commit happens every `every` file operations.
//! Frees become allocatable only at a commit ([`mballoc::Allocator::free`]), which is why the
//! interval matters for reuse.

use std::sync::atomic::{AtomicU64, Ordering};

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
        })
    }

    /// Counts one operation; commits when the interval is reached.
    pub fn tick(&self, alloc: &Allocator) -> Result<(), mballoc::Error> {
        let n = self.ops.fetch_add(1, Ordering::Relaxed) + 1;
        if n.checked_rem(self.every) == Some(0) {
            self.commit(alloc)?;
        }
        Ok(())
    }

    /// Commits now.
    pub fn commit(&self, alloc: &Allocator) -> Result<(), mballoc::Error> {
        alloc.commit()?;
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
