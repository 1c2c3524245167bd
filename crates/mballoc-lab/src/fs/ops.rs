//! The file operations: each turns into allocator requests built the way ext4 builds them
//! (see the table in the module above), or into frees.

use std::time::Instant;

use mballoc::{Allocation, Error, Extent, Flags, Request};

use super::error::FsError;
use super::file::File;
use super::goal::{clamp_goal, inode_goal};
use super::tree::Need;
use super::Task;

/// Longest fallocate request (`EXT_UNWRITTEN_MAX_LEN`), and the range length up to which
/// fallocate asks for no normalisation (`EXT4_GET_BLOCKS_NO_NORMALIZE`).
pub const FALLOC_MAX_REQUEST: u32 = 32767;
/// Longest extent writeback maps at once (`MAX_WRITEPAGES_EXTENT_LEN`).
pub const WRITEBACK_MAX_REQUEST: u32 = 2048;
/// Retries after ENOSPC (`ext4_should_retry_alloc` gives up after its third).
const ENOSPC_RETRIES: u32 = 3;

/// `ext4_should_retry_alloc`, from the counts the failed allocation reported: retry after a
/// forced commit while frees wait for one; with none waiting, another task's commit may have
/// released them after our search failed (read after it), so retry while any block is free.
/// Without a journal (`journal` false) never: there is no commit to wait for.
pub(crate) fn should_retry_alloc(free: u64, pending: u64, retries: u32, journal: bool) -> bool {
    journal && retries < ENOSPC_RETRIES && (pending > 0 || free > 0)
}
/// Longest direct-I/O request (`EXT_INIT_MAX_LEN`).
const DIRECT_MAX_REQUEST: u32 = 32768;
const BLOCK_BITS: u32 = 12;
/// ext4 logical blocks are 32-bit.
const MAX_LOGICAL: u64 = u32::MAX as u64;

/// What an allocation was for, to name in its error: the range `[logical, +wanted)` of file
/// `ino`, `mapped` blocks of it done, the call at block `at`.
struct Want {
    ino: u64,
    logical: u64,
    wanted: u64,
    mapped: u64,
    at: u64,
}

/// How the requests of one operation are built.
#[derive(Clone, Copy)]
enum Mode {
    /// `new_size` is `Some(offset + len)` unless `KEEP_SIZE`.
    Fallocate {
        new_size: Option<u64>,
    },
    Writeback,
    Direct,
}

impl Mode {
    /// Fallocate maps unwritten extents (`EXT4_GET_BLOCKS_CREATE_UNWRIT_EXT`).
    fn unwritten(self) -> bool {
        matches!(self, Mode::Fallocate { .. })
    }

    /// Flags of the tree-block requests `ext4_ext_insert_extent` makes: writeback's
    /// `EXT4_GET_BLOCKS_DELALLOC_RESERVE` gives `DELALLOC_RESERVED` and its
    /// `METADATA_NOFAIL` gives `USE_RESERVED`; never `HINT_DATA`.
    fn tree_flags(self) -> Flags {
        match self {
            Mode::Writeback => Flags::DELALLOC_RESERVED | Flags::USE_RESERVED,
            Mode::Fallocate { .. } | Mode::Direct => Flags::default(),
        }
    }

    fn cap(self) -> u32 {
        match self {
            Mode::Fallocate { .. } => FALLOC_MAX_REQUEST,
            Mode::Writeback => WRITEBACK_MAX_REQUEST,
            Mode::Direct => DIRECT_MAX_REQUEST,
        }
    }
}

/// Block range `[first, end)` covering bytes `[offset, offset + len)`.
fn block_range(ino: u64, offset: u64, len: u64) -> Result<(u32, u32), FsError> {
    let end_byte = offset
        .checked_add(len)
        .ok_or(FsError::RangeTooLarge { ino, offset, len })?;
    let first = offset >> BLOCK_BITS;
    let end = end_byte.div_ceil(1 << BLOCK_BITS);
    if end > MAX_LOGICAL {
        return Err(FsError::RangeTooLarge { ino, offset, len });
    }
    Ok((first as u32, end as u32))
}

impl Task<'_> {
    /// `fallocate(fd, mode, offset, len)` with mode 0 or `FALLOC_FL_KEEP_SIZE`: allocates every
    /// hole of the range (unwritten extents).
    pub fn fallocate(
        &mut self,
        f: &mut File,
        offset: u64,
        len: u64,
        keep_size: bool,
    ) -> Result<(), FsError> {
        if len == 0 {
            return Err(FsError::ZeroLength {
                ino: f.ino,
                op: "fallocate",
                offset,
            });
        }
        let (first, end) = block_range(f.ino, offset, len)?;
        let mut flags = Flags::HINT_DATA;
        if end - first <= FALLOC_MAX_REQUEST {
            flags |= Flags::HINT_NOPREALLOC;
        }
        let new_size = (!keep_size).then_some(offset + len);
        let result = self.fill_range(f, first, end, flags, Mode::Fallocate { new_size });
        if let (Ok(()), Some(n)) = (&result, new_size) {
            f.size = f.size.max(n);
        }
        self.fs.journal.tick(&self.fs.alloc)?;
        result
    }

    /// A buffered `write()`: the blocks become dirty; nothing is allocated until [`Self::fsync`]
    /// (delayed allocation).
    pub fn write_buffered(&mut self, f: &mut File, offset: u64, len: u64) -> Result<(), FsError> {
        if len == 0 {
            return Err(FsError::ZeroLength {
                ino: f.ino,
                op: "write",
                offset,
            });
        }
        let (first, end) = block_range(f.ino, offset, len)?;
        for (s, n) in f.map.holes(first, end - first) {
            f.mark_dirty(s, n);
        }
        f.size = f.size.max(offset + len);
        Ok(())
    }

    /// `fsync`/`fdatasync`: writeback places every dirty run, then the journal commits (the
    /// inode changed), which also makes earlier frees reusable; under a timed journal the
    /// caller runs that commit on its clock.
    pub fn fsync(&mut self, f: &mut File) -> Result<(), FsError> {
        let runs: Vec<(u32, u32)> = f.dirty.iter().map(|(&s, &n)| (s, n)).collect();
        let had_dirty = !runs.is_empty();
        let mut result = Ok(());
        for (s, n) in runs {
            result = self.fill_range(f, s, s + n, Self::writeback_flags(), Mode::Writeback);
            if result.is_err() {
                break;
            }
            f.dirty.remove(&s);
        }
        if had_dirty {
            self.fs.journal.sync(&self.fs.alloc)?;
        }
        self.fs.journal.tick(&self.fs.alloc)?;
        result
    }

    fn writeback_flags() -> Flags {
        Flags::HINT_DATA | Flags::DELALLOC_RESERVED | Flags::USE_RESERVED
    }

    /// An `O_DIRECT` write: holes are allocated at once, with the size before the write.
    pub fn write_direct(&mut self, f: &mut File, offset: u64, len: u64) -> Result<(), FsError> {
        if len == 0 {
            return Err(FsError::ZeroLength {
                ino: f.ino,
                op: "direct write",
                offset,
            });
        }
        let (first, end) = block_range(f.ino, offset, len)?;
        let result = self.fill_range(f, first, end, Flags::HINT_DATA, Mode::Direct);
        if result.is_ok() {
            f.size = f.size.max(offset + len);
        }
        self.fs.journal.tick(&self.fs.alloc)?;
        result
    }

    /// `ftruncate(fd, new_size)`: drops the inode's preallocations, frees every block past the
    /// new end (deferred until the next commit) and discards dirty pages there. Like
    /// `ext4_setattr`, this also runs when the size does not shrink.
    pub fn truncate(&mut self, f: &mut File, new_size: u64) -> Result<(), FsError> {
        let keep = new_size.div_ceil(1 << BLOCK_BITS).min(MAX_LOGICAL) as u32;
        self.fs.alloc.discard_preallocations(f.ino);
        f.drop_dirty_from(keep);
        let mut freed = f.map.truncate(keep);
        freed.extend(
            f.tree
                .shrink(f.map.len())
                .into_iter()
                .map(|b| Extent::new(b, 1)),
        );
        f.size = new_size;
        let result = self.free_extents(f.ino, &freed);
        self.fs.journal.tick(&self.fs.alloc)?;
        result
    }

    /// Deletes the file: every block freed, preallocations dropped, its inode number free for
    /// the next create (`ext4_evict_inode` → `ext4_free_inode`).
    pub fn unlink(&mut self, mut f: File) -> Result<(), FsError> {
        f.open = false;
        self.truncate(&mut f, 0)?;
        self.fs.release_ino(f.ino);
        Ok(())
    }

    /// The last close of a writer (`ext4_release_file`): unused preallocations go back.
    pub fn close(&mut self, f: &mut File) {
        f.open = false;
        self.fs.alloc.discard_preallocations(f.ino);
    }

    fn free_extents(&mut self, ino: u64, extents: &[Extent]) -> Result<(), FsError> {
        let geo = *self.fs.alloc.geometry();
        let tid = self.fs.journal.free_tid();
        for e in extents {
            match tid {
                Some(t) => self.fs.alloc.free_in_transaction(ino, *e, t),
                None => self.fs.alloc.free(ino, *e),
            }
            .map_err(|source| FsError::Allocator {
                ino,
                logical: 0,
                source,
            })?;
            self.rec.freed(&geo, e.start, u64::from(e.len));
        }
        Ok(())
    }

    /// Allocates every hole of `[first, end)`.
    fn fill_range(
        &mut self,
        f: &mut File,
        first: u32,
        end: u32,
        flags: Flags,
        mode: Mode,
    ) -> Result<(), FsError> {
        for (start, len) in f.map.holes(first, end - first) {
            self.fill_hole(f, start, start + len, flags, mode)?;
        }
        Ok(())
    }

    /// Allocates `[start, end)`, which is unmapped, one request at a time: each request asks
    /// for what is left (up to the mode's cap) and may get less.
    fn fill_hole(
        &mut self,
        f: &mut File,
        start: u32,
        end: u32,
        flags: Flags,
        mode: Mode,
    ) -> Result<(), FsError> {
        let mut at = start;
        let mut retries = 0;
        while at < end {
            let len = (end - at).min(mode.cap());
            if let Mode::Fallocate {
                new_size: Some(n), ..
            } = mode
            {
                // ext4_alloc_file_blocks raises i_size after every mapped piece.
                f.size = f.size.max(n.min(u64::from(at) << BLOCK_BITS));
            }
            let req = self.request(f, at, len, flags);
            let want = Want {
                ino: f.ino,
                logical: u64::from(start),
                wanted: u64::from(end - start),
                mapped: u64::from(at - start),
                at: u64::from(at),
            };
            if let Some(a) = self.attempt(&req, &mut retries, want)? {
                // ext4_ext_find_goal for a new leaf sees the tree before the insert.
                let leaf_goal = f.map.find_goal(at);
                f.map
                    .insert_as(at, a.extent.start, a.extent.len, mode.unwritten());
                if self.fs.extent_tree_blocks {
                    self.grow_tree(f, at, leaf_goal, mode)?;
                }
                at += a.extent.len;
            }
        }
        Ok(())
    }

    /// `ext4_ext_insert_extent` after inserting at `at`: the tree blocks the new extent count
    /// needs (`ext4_ext_create_new_leaf`), then `ext4_ext_try_to_merge_up`.
    fn grow_tree(
        &mut self,
        f: &mut File,
        at: u32,
        leaf_goal: Option<u64>,
        mode: Mode,
    ) -> Result<(), FsError> {
        let geo = *self.fs.alloc.geometry();
        let n = f.map.len();
        let home = inode_goal(&geo, f.ino, self.fs.inodes_per_group);
        while let Some(need) = f.tree.need(n) {
            let (goal, flags) = match need {
                // ext4_ext_grow_indepth at depth 0: the goal is ext4_inode_to_goal_block.
                Need::FirstLeaf => (home, mode.tree_flags()),
                // ext4_ext_grow_indepth at depth 1: just before the first leaf.
                Need::Index { first_leaf } if first_leaf > geo.first_data_block() => {
                    (first_leaf - 1, mode.tree_flags() | Flags::HINT_TRY_GOAL)
                }
                Need::Index { .. } => (home, mode.tree_flags()),
                // ext4_ext_new_meta_block: ext4_ext_find_goal on the path to `at`.
                Need::Leaf => (leaf_goal.unwrap_or(home), mode.tree_flags()),
            };
            let block = self.allocate_tree_block(f, at, goal, flags)?;
            f.tree.add(need, block);
        }
        if let Some(b) = f.tree.merge_up(n) {
            self.free_extents(f.ino, &[Extent::new(b, 1)])?;
        }
        Ok(())
    }

    /// One tree block (`ext4_new_meta_blocks`: one block, logical 0, no neighbours), retried
    /// after a commit like data.
    fn allocate_tree_block(
        &mut self,
        f: &File,
        at: u32,
        goal: u64,
        flags: Flags,
    ) -> Result<u64, FsError> {
        let geo = *self.fs.alloc.geometry();
        let req = Request::new(f.ino, 0, 1)
            .with_goal(clamp_goal(&geo, goal))
            .with_flags(flags)
            .with_i_size(f.size)
            .with_cpu(self.cpu)
            .with_open_for_write(f.open);
        let mut retries = 0;
        loop {
            let want = Want {
                ino: f.ino,
                logical: u64::from(at),
                wanted: 1,
                mapped: 0,
                at: u64::from(at),
            };
            if let Some(a) = self.attempt(&req, &mut retries, want)? {
                self.rec.tree_blocks += 1;
                return Ok(a.extent.start);
            }
        }
    }

    /// One allocator call, recorded: `Some` with its blocks, `None` when ENOSPC is to be
    /// retried (`ext4_should_retry_alloc`; after a commit when frees wait for one), else the
    /// error naming `want`. `retries` counts the tries since the last success.
    fn attempt(
        &mut self,
        req: &Request,
        retries: &mut u32,
        want: Want,
    ) -> Result<Option<Allocation>, FsError> {
        let t = Instant::now();
        let got = self.fs.alloc.allocate(req);
        let ns = t.elapsed().as_nanos() as u64;
        match got {
            Ok(a) => {
                let geo = *self.fs.alloc.geometry();
                self.rec.allocated(&geo, req, &a, ns);
                *retries = 0;
                Ok(Some(a))
            }
            Err(Error::NoSpace { free, pending, .. })
                if should_retry_alloc(free, pending, *retries, self.fs.alloc.journal()) =>
            {
                if pending > 0 {
                    self.rec.enospc_commits += 1;
                    self.fs.journal.commit(&self.fs.alloc)?;
                }
                *retries += 1;
                Ok(None)
            }
            Err(Error::NoSpace { free, pending, .. }) => Err(FsError::NoSpace {
                ino: want.ino,
                logical: want.logical,
                wanted: want.wanted,
                mapped: want.mapped,
                free,
                pending,
            }),
            Err(source) => Err(FsError::Allocator {
                ino: want.ino,
                logical: want.at,
                source,
            }),
        }
    }

    /// The request for `[at, +len)` of `f`: goal from the extent list or the inode's group,
    /// neighbours from the extent list.
    fn request(&self, f: &File, at: u32, len: u32, flags: Flags) -> Request {
        let geo = self.fs.alloc.geometry();
        let goal = f
            .map
            .find_goal(at)
            .unwrap_or_else(|| inode_goal(geo, f.ino, self.fs.inodes_per_group));
        let (lleft, pleft) = f.map.left_of(at);
        let (lright, pright) = f.map.right_of(at);
        Request::new(f.ino, at, len)
            .with_goal(clamp_goal(geo, goal))
            .with_flags(flags)
            .with_i_size(f.size)
            .with_cpu(self.cpu)
            .with_open_for_write(f.open)
            .with_left(lleft, pleft)
            .with_right(lright, pright)
    }
}
