//! A file layer like ext4's on top of the allocator: files with extent lists, goals and
//! neighbour hints computed as ext4 computes them, fallocate split as ext4 splits it, buffered
//! writes with delayed allocation placed at fsync, direct I/O allocating at once, truncate and
//! unlink freeing through the allocator's deferred frees, and a journal that commits every few
//! operations and on ENOSPC.
//!
//! | operation | requests | flags (`EXT4_MB_*`) | i_size passed |
//! |---|---|---|---|
//! | [`Task::fallocate`] | one per hole, ≤ 32767 blocks each (`EXT_UNWRITTEN_MAX_LEN`) | `HINT_DATA`, plus `HINT_NOPREALLOC` when the whole range is ≤ 32767 blocks (`EXT4_GET_BLOCKS_NO_NORMALIZE`) | grows with each mapped piece unless `KEEP_SIZE` |
//! | [`Task::fsync`] (buffered writeback) | one per contiguous dirty run, ≤ 2048 blocks each (`MAX_WRITEPAGES_EXTENT_LEN`) | `HINT_DATA \| DELALLOC_RESERVED \| USE_RESERVED` | the file's size |
//! | [`Task::write_direct`] | one per hole, ≤ 32768 blocks each | `HINT_DATA` | the size before the write |
//!
//! These match the kernel captures in `kernel-cases/` (flags 96/32 for fallocate,
//! 9248 for writeback). Every request may return fewer blocks than asked; the layer loops.
//!
//! A file whose extents outgrow the inode's 4 slots also gets extent-tree blocks (see
//! [`ExtentTree`]): 1-block requests without `HINT_DATA` (no normalisation, no preallocation),
//! made right after the data request that added the extent, as `ext4_ext_insert_extent` does,
//! and freed by truncate and unlink. [`Fs::set_extent_tree_blocks`] turns them off.

mod error;
mod extents;
mod file;
mod goal;
mod journal;
mod ops;
mod recorder;
mod tree;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use mballoc::Allocator;
use parking_lot::Mutex;

pub use error::FsError;
pub use extents::{ExtentMap, Mapping, MAX_RECORD, MAX_UNWRITTEN_RECORD};
pub use file::File;
pub use goal::{clamp_goal, inode_goal, inode_group, FIRST_FILE_INO};
pub use journal::{Journal, DEFAULT_COMMIT_OPS};
pub use ops::{FALLOC_MAX_REQUEST, WRITEBACK_MAX_REQUEST};
pub use recorder::Recorder;
pub use tree::{ExtentTree, Need, BLOCK_SLOTS, ROOT_SLOTS};

/// A mounted file system: the shared allocator, inode numbering and the journal.
pub struct Fs {
    alloc: Arc<Allocator>,
    inodes_per_group: u32,
    next_ino: AtomicU64,
    /// Inode numbers below `next_ino` freed by an unlink, handed out again first when
    /// `reuse_inos`.
    free_inos: Mutex<BTreeSet<u64>>,
    reuse_inos: bool,
    journal: Journal,
    /// Whether files allocate extent-tree blocks (see [`ExtentTree`]).
    extent_tree_blocks: bool,
}

impl Fs {
    /// A file system over `alloc` with `inodes_per_group` inodes per group (from the mkfs
    /// layout) committing every `commit_every` file operations.
    pub fn new(
        alloc: Arc<Allocator>,
        inodes_per_group: u32,
        commit_every: u64,
    ) -> Result<Fs, FsError> {
        Ok(Fs {
            alloc,
            inodes_per_group: inodes_per_group.max(1),
            next_ino: AtomicU64::new(FIRST_FILE_INO),
            free_inos: Mutex::new(BTreeSet::new()),
            reuse_inos: false,
            journal: Journal::new(commit_every)?,
            extent_tree_blocks: true,
        })
    }

    /// Models (the default) or leaves out the extent tree's own blocks.
    pub fn set_extent_tree_blocks(&mut self, on: bool) {
        self.extent_tree_blocks = on;
    }

    /// Hands an unlinked file's inode number to the next create, as ext4 does (off for a bare
    /// `Fs`, where every create takes a number never used; the lab's runs turn it on unless
    /// `ino_reuse=0`).
    pub fn set_reuse_inos(&mut self, on: bool) {
        self.reuse_inos = on;
    }

    pub fn extent_tree_blocks(&self) -> bool {
        self.extent_tree_blocks
    }

    pub fn allocator(&self) -> &Allocator {
        &self.alloc
    }

    /// A shared handle to the allocator.
    pub fn allocator_arc(&self) -> Arc<Allocator> {
        Arc::clone(&self.alloc)
    }

    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    pub fn inodes_per_group(&self) -> u32 {
        self.inodes_per_group
    }

    /// Creates an empty file, open for write: with [`Fs::set_reuse_inos`] the lowest inode
    /// number an unlink freed, else the next never used. ext4 takes the first free bit of the
    /// parent directory's group (`__ext4_new_inode` → `find_inode_bit` from bit 0; with a
    /// journal a just-freed inode is not held back), so a file created after an unlink gets
    /// the unlinked file's number; the number picks the file's stream goal slot
    /// (`ino % nr_global_goals`) and its goal group.
    pub fn create(&self) -> File {
        let reused = self.free_inos.lock().pop_first();
        File::new(reused.unwrap_or_else(|| self.next_ino.fetch_add(1, Ordering::Relaxed)))
    }

    /// Creates a file with a given inode number (for workloads that fix inode numbers).
    pub fn create_with_ino(&self, ino: u64) -> File {
        self.free_inos.lock().remove(&ino);
        self.next_ino.fetch_max(ino + 1, Ordering::Relaxed);
        File::new(ino)
    }

    /// `ino` is free again (its file was unlinked and evicted).
    fn release_ino(&self, ino: u64) {
        if !self.reuse_inos {
            return;
        }
        let fresh = self.free_inos.lock().insert(ino);
        debug_assert!(fresh, "inode {ino} freed twice");
    }

    /// The inode number the next [`Fs::create`] will use.
    pub fn next_ino(&self) -> u64 {
        self.next_ino.load(Ordering::Relaxed)
    }

    /// The same files on a freshly mounted allocator (after an unmount: preallocations gone,
    /// bitmaps to be read again): inode numbering continues where it was.
    pub fn remounted(&self, alloc: Arc<Allocator>) -> Fs {
        Fs {
            alloc,
            inodes_per_group: self.inodes_per_group,
            next_ino: AtomicU64::new(self.next_ino()),
            free_inos: Mutex::new(self.free_inos.lock().clone()),
            reuse_inos: self.reuse_inos,
            journal: Journal::new(self.journal.every()).expect("interval already validated"),
            extent_tree_blocks: self.extent_tree_blocks,
        }
    }

    /// A task (one client thread) running on `cpu`.
    pub fn task(&self, cpu: u32) -> Task<'_> {
        Task {
            fs: self,
            cpu,
            rec: Recorder::default(),
        }
    }

    /// Commits the running transaction now (syncfs).
    pub fn commit(&self) -> Result<(), FsError> {
        self.journal.commit(&self.alloc)?;
        Ok(())
    }
}

/// One client of the file system: its CPU (locality groups are per CPU) and what it recorded.
pub struct Task<'a> {
    pub fs: &'a Fs,
    pub cpu: u32,
    pub rec: Recorder,
}

#[cfg(test)]
mod tests;
