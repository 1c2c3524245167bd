//! The durable side of the allocator: where each group's block bitmap and descriptor live.
//!
//! The allocator reads a group's bitmap lazily, the first time it needs the group
//! ([`Store::read_bitmap`]), keeps its own in-memory buddy from then on, and at commit hands the
//! store every change since the last commit ([`Store::commit`]). This mirrors ext4, where
//! `ext4_read_block_bitmap` fills the buddy cache and jbd2 makes bitmap and descriptor updates
//! atomic per transaction (`ext4_mb_mark_diskspace_used`, deferred frees released by
//! `ext4_free_data_in_buddy` after the commit).
//!
//! Two stores:
//! * [`MemStore`]: in memory, with an optional per-load cost so lazy-load effects can be
//!   measured without a disk.
//! * [`FileStore`]: a file or block device in this crate's own format, with per-group
//!   checksums and a write-ahead log that makes each commit atomic across groups.
//!
//! Devices ([`Device`]) abstract the I/O; [`FaultDevice`] injects dropped and torn writes and
//! failed syncs and models a page cache, for crash tests.

mod bitmap;
mod checkpoint;
mod corrupt;
pub(crate) mod delta;
mod device;
mod error;
mod fault;
mod file_store;
pub(crate) mod format;
pub(crate) mod log;
mod mem_store;
mod recovery;
mod replay_check;
mod verify;

use crate::geometry::Geometry;

pub use bitmap::BitmapBytes;
pub use device::{Access, Device, FileDevice, MemDevice, OpenOptions};
pub use error::{Problem, StoreError};
pub use fault::{CrashMode, FaultDevice, FaultPlan, Tear};
pub use file_store::{FileStore, FileStoreOptions};
pub use format::MAX_LOG_LEN;
pub use log::fit_commit;
pub use mem_store::{LoadCost, MemStore};
pub use verify::verify_device;

/// The persistent interface the allocator core programs against.
///
/// All methods take `&self`: loads of different groups may run in parallel, and a commit
/// excludes loads only while it applies.
pub trait Store: Send + Sync {
    /// The geometry the store was created with.
    fn geometry(&self) -> Geometry;

    /// Group `group`'s descriptor. Cheap: descriptors are loaded when the store opens.
    fn descriptor(&self, group: u32) -> Result<GroupDesc, StoreError>;

    /// Every group's descriptor, in group order (one lock, for the allocator's start-up).
    fn descriptors(&self) -> Vec<GroupDesc>;

    /// Group `group`'s bitmap as of the last commit, checksum verified. A checksum failure
    /// returns [`StoreError::Corrupt`] and the group stays corrupt until reopened.
    fn read_bitmap(&self, group: u32) -> Result<BitmapBytes, StoreError>;

    /// Applies every allocation and free since the last commit, atomically across groups:
    /// after a crash the store holds either all of it or none of it. `allocated` is applied
    /// before `freed`, so a block allocated and freed within one commit ends up free.
    /// An empty commit does nothing and returns the current id.
    fn commit(&self, commit: &Commit) -> Result<CommitId, StoreError>;

    /// The id of the last commit that took effect (0 = the state at creation).
    fn last_commit(&self) -> CommitId;

    /// Groups found corrupt so far (by open or by a bitmap load), ascending.
    fn corrupt_groups(&self) -> Vec<u32>;

    /// fsck: recomputes every checksum and free count from what is stored.
    fn verify(&self) -> Result<Vec<Problem>, StoreError>;

    /// Counters: loads, commits, bytes written.
    fn stats(&self) -> StoreStats;

    /// Brings the store back to a known state after a failed [`commit`](Store::commit) and
    /// returns the last commit that took effect: the one before the failure, or the failed one
    /// itself if it reached the disk after all. The allocator calls this before retrying, so
    /// that it neither loses nor repeats a commit. Stores that cannot be left half-way by a
    /// failure just report [`last_commit`](Store::last_commit).
    fn recover(&self) -> Result<CommitId, StoreError> {
        Ok(self.last_commit())
    }

    /// The largest log record one [`commit`](Store::commit) may need, where the store has
    /// such a limit; a larger commit fails with [`StoreError::CommitTooLarge`] and changes
    /// nothing. [`fit_commit`] cuts a commit to fit (the allocator does so at every commit).
    fn commit_capacity(&self) -> Option<u64> {
        None
    }
}

/// A shared store is a store: lets a caller keep a handle (for its own stats, or to look at
/// the store after the allocator is gone) while the allocator owns another.
impl<S: Store + ?Sized> Store for std::sync::Arc<S> {
    fn geometry(&self) -> Geometry {
        (**self).geometry()
    }
    fn descriptor(&self, group: u32) -> Result<GroupDesc, StoreError> {
        (**self).descriptor(group)
    }
    fn descriptors(&self) -> Vec<GroupDesc> {
        (**self).descriptors()
    }
    fn read_bitmap(&self, group: u32) -> Result<BitmapBytes, StoreError> {
        (**self).read_bitmap(group)
    }
    fn commit(&self, commit: &Commit) -> Result<CommitId, StoreError> {
        (**self).commit(commit)
    }
    fn last_commit(&self) -> CommitId {
        (**self).last_commit()
    }
    fn corrupt_groups(&self) -> Vec<u32> {
        (**self).corrupt_groups()
    }
    fn verify(&self) -> Result<Vec<Problem>, StoreError> {
        (**self).verify()
    }
    fn stats(&self) -> StoreStats {
        (**self).stats()
    }
    fn recover(&self) -> Result<CommitId, StoreError> {
        (**self).recover()
    }
    fn commit_capacity(&self) -> Option<u64> {
        (**self).commit_capacity()
    }
}

/// A group descriptor: what the allocator needs to know about a group without loading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupDesc {
    /// Free blocks in the group (ext4's `bg_free_blocks_count`).
    pub free: u32,
    /// `BLOCK_UNINIT`, `CORRUPT`.
    pub flags: GroupFlags,
}

/// Per-group flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GroupFlags(pub u16);

impl GroupFlags {
    /// The bitmap has never been written: every block is free (ext4's `EXT4_BG_BLOCK_UNINIT`).
    /// Lets a fresh 16 TiB store be created without writing 512 MiB of zeroes.
    pub const BLOCK_UNINIT: GroupFlags = GroupFlags(1);
    /// In memory only: the group failed a checksum; never allocate from it.
    pub const CORRUPT: GroupFlags = GroupFlags(1 << 15);
    /// The flags a descriptor may carry on disk.
    pub(crate) const ON_DISK: u16 = 1;

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: GroupFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

/// A run of absolute blocks `[start, start + len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Extent {
    /// First block.
    pub start: u64,
    /// Blocks.
    pub len: u64,
}

impl Extent {
    /// `len` blocks from `start`.
    pub fn new(start: u64, len: u64) -> Self {
        Extent { start, len }
    }
}

/// Everything that changed since the last commit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Commit {
    /// Extents that became used. Each block must be free on disk before the commit.
    pub allocated: Vec<Extent>,
    /// Extents that became free. Each block must be used once `allocated` is applied.
    pub freed: Vec<Extent>,
}

impl Commit {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.allocated.is_empty() && self.freed.is_empty()
    }
}

/// The sequence number of a commit; ids grow by one per non-empty commit and survive reopen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct CommitId(pub u64);

/// What a store has done since it was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    /// `read_bitmap` calls that had to produce a bitmap from the backing store (a disk read, or
    /// for `MemStore` a copy plus the configured load cost).
    pub bitmap_loads: u64,
    /// Non-empty commits that succeeded.
    pub commits: u64,
    /// Bytes written to the device (FileStore only).
    pub bytes_written: u64,
    /// Device syncs issued (FileStore only).
    pub syncs: u64,
}

#[cfg(test)]
mod safety_tests;
#[cfg(test)]
mod tests;
