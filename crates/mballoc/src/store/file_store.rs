//! [`FileStore`]: the allocator's state in a file or block device, crash-safe per commit.
//!
//! Open reads the superblock and the descriptor table (16 bytes per group, one read: a
//! 131072-group, 16 TiB store reads 2 MiB) and runs recovery; bitmaps are read and checksummed
//! only when the allocator asks for a group. A commit follows the write-ahead protocol in
//! [`log`](super::log): record, sync, in-place bitmaps and descriptors, sync, marker.
//!
//! Bitmaps read or written are kept in memory (like the kernel's buffer cache) so a commit
//! never has to re-read what it changes; at most one copy per group.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::bitmap::BitmapBytes;
use super::checkpoint::{write_groups, DevIo, GroupImage};
use super::corrupt::{CorruptSet, Why};
use super::delta::{apply_checked, split, GroupDelta};
use super::device::{Access, Device, FileDevice, OpenOptions};
use super::format::{
    bitmap_crc, decode_desc, encode_desc, encode_superblock, new_nonce, DiskDesc, Layout,
    Superblock, DEFAULT_LOG_LEN, DESC_LEN, LOG_HEAD,
};
use super::log::{encode_marker, encode_record, record_len, Record, RecordGroup, MAX_SEQ};
use super::recovery::{desc_for, read_superblock, recover};
use super::verify::verify_device;
use super::{
    Commit, CommitId, Extent, GroupDesc, GroupFlags, Problem, Store, StoreError, StoreStats,
};
use crate::geometry::Geometry;

/// Choices made once, at create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStoreOptions {
    /// Bytes reserved for the write-ahead log, from 8 KiB to [`MAX_LOG_LEN`](super::MAX_LOG_LEN).
    /// One store commit's record must fit in half of what is left after the 4 KiB log head:
    /// 36 bytes, plus 12 per group touched, plus 8 per group-sized piece of an extent.
    /// Default 4 MiB (about 260,000 pieces per store commit). The allocator cuts a larger
    /// commit into several ([`fit_commit`](super::fit_commit)), so the size only sets how
    /// often a very large commit syncs.
    pub log_len: u64,
}

impl Default for FileStoreOptions {
    fn default() -> Self {
        FileStoreOptions {
            log_len: DEFAULT_LOG_LEN,
        }
    }
}

/// What may change after open; guarded by one short-held mutex.
struct State {
    descs: Vec<DiskDesc>,
    /// Corrupt groups and why; their descriptors in `descs` are not to be trusted.
    corrupt: CorruptSet,
    cache: HashMap<u32, Box<[u8]>>,
    seq: u64,
    poisoned: Option<String>,
}

/// A durable store on a [`Device`].
pub struct FileStore {
    io: DevIo,
    sb: Superblock,
    /// Shared by bitmap loads, exclusive for a commit: a load never sees half a commit.
    commit_lock: RwLock<()>,
    state: Mutex<State>,
    loads: AtomicU64,
    commits: AtomicU64,
    recovered: Option<CommitId>,
    access: Access,
}

/// A group's part of a commit once prepared in memory.
struct Prepared {
    group: u32,
    base_uninit: bool,
    delta: GroupDelta,
    bitmap: Box<[u8]>,
    desc: DiskDesc,
}

impl FileStore {
    /// Creates a store in the file at `path` (created or truncated; a block device is used as
    /// is), with `used` blocks marked in use and everything else free.
    pub fn create(path: &Path, geometry: Geometry, used: &[Extent]) -> Result<Self, StoreError> {
        Self::create_with(path, geometry, used, FileStoreOptions::default())
    }

    /// [`create`](FileStore::create) with a choice of log size.
    pub fn create_with(
        path: &Path,
        geometry: Geometry,
        used: &[Extent],
        opts: FileStoreOptions,
    ) -> Result<Self, StoreError> {
        let len = Self::required_len(&geometry, opts)?;
        let dev = FileDevice::create(path, len)?;
        Self::create_on(Arc::new(dev), geometry, used, opts)
    }

    /// Opens the store at `path` for writing, recovering the last commit if a crash
    /// interrupted it. Holds the store's exclusive lock until dropped: another process's open
    /// fails at once with [`StoreError::InUse`] (see [`open_with`](Self::open_with) to wait).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, OpenOptions::default())
    }

    /// Opens the store at `path` without ever writing to it, under a shared lock: works on a
    /// file the caller may only read. A commit the log holds but the store has not applied is
    /// replayed in memory only; [`commit`](Store::commit) fails with [`StoreError::ReadOnly`].
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, OpenOptions::read_only())
    }

    /// Opens the store at `path` with the access and lock wait of `opts`.
    pub fn open_with(path: &Path, opts: OpenOptions) -> Result<Self, StoreError> {
        let dev = FileDevice::open(path, opts)?;
        Self::open_device(Arc::new(dev), opts.access)
    }

    /// Bytes a device must hold for this geometry.
    pub fn required_len(geometry: &Geometry, opts: FileStoreOptions) -> Result<u64, StoreError> {
        Ok(Layout::new(geometry, opts.log_len)?.total)
    }

    /// Creates a store on any device at least [`required_len`](Self::required_len) long.
    /// Groups no `used` extent touches are `BLOCK_UNINIT` and their bitmaps are not written.
    /// The superblock goes last, so a crash during create leaves a device that will not open.
    pub fn create_on(
        device: Arc<dyn Device>,
        geometry: Geometry,
        used: &[Extent],
        opts: FileStoreOptions,
    ) -> Result<Self, StoreError> {
        Self::create_with_nonce(device, geometry, used, opts, new_nonce())
    }

    /// [`create_on`](Self::create_on) with a chosen nonce: only for images that must be the
    /// same on every run (the fuzz harness), never for real stores.
    pub(crate) fn create_with_nonce(
        device: Arc<dyn Device>,
        geometry: Geometry,
        used: &[Extent],
        opts: FileStoreOptions,
        nonce: u64,
    ) -> Result<Self, StoreError> {
        let layout = Layout::new(&geometry, opts.log_len)?;
        let io = DevIo::new(device.clone());
        let have = io.len()?;
        if have < layout.total {
            return Err(StoreError::DeviceTooSmall {
                need: layout.total,
                have,
            });
        }
        let sb = Superblock {
            geometry,
            nonce,
            layout,
        };
        let bitmaps = initial_bitmaps(&geometry, used)?;
        write_initial(&io, &sb, &bitmaps)?;
        Self::open_on(device)
    }

    /// Opens a store on `device` for reading and writing: superblock, recovery, descriptors.
    /// No lock: the caller owns the device.
    pub fn open_on(device: Arc<dyn Device>) -> Result<Self, StoreError> {
        Self::open_device(device, Access::ReadWrite)
    }

    /// [`open_read_only`](Self::open_read_only) on any device: nothing is ever written to it.
    pub fn open_on_read_only(device: Arc<dyn Device>) -> Result<Self, StoreError> {
        Self::open_device(device, Access::ReadOnly)
    }

    fn open_device(device: Arc<dyn Device>, access: Access) -> Result<Self, StoreError> {
        let io = DevIo::new(device);
        let sb = read_superblock(&io)?;
        let rec = recover(&io, &sb, access)?;
        let (mut descs, mut corrupt) = read_table(&io, &sb)?;
        // A read-only replay left the disk as it was: its groups are what it rebuilt.
        for (group, bitmap) in &rec.bitmaps {
            descs[*group as usize] = desc_for(&sb, *group, bitmap);
            corrupt.clear(*group);
        }
        for (group, why) in rec.corrupt {
            corrupt.mark(group, why);
        }
        let state = State {
            descs,
            corrupt,
            cache: rec.bitmaps.into_iter().collect(),
            seq: rec.seq,
            poisoned: None,
        };
        Ok(FileStore {
            io,
            sb,
            commit_lock: RwLock::new(()),
            state: Mutex::new(state),
            loads: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            recovered: rec.replayed.map(CommitId),
            access,
        })
    }

    /// Whether the store may write.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The commit that recovery replayed when this store was opened, if any (for a read-only
    /// store: replayed in memory, still unapplied on disk).
    pub fn recovered(&self) -> Option<CommitId> {
        self.recovered
    }

    /// The device underneath (for fsck tools and tests).
    pub fn device(&self) -> Arc<dyn Device> {
        self.io.device()
    }

    /// Byte offset of group `group`'s bitmap on the device (for tools that inspect or damage
    /// a store on purpose); `None` past the last group.
    pub fn bitmap_offset(&self, group: u32) -> Option<u64> {
        (group < self.sb.layout.groups).then(|| self.sb.layout.bitmap_at(group))
    }

    /// Byte offset of group `group`'s 16-byte descriptor on the device.
    pub fn descriptor_offset(&self, group: u32) -> Option<u64> {
        (group < self.sb.layout.groups).then(|| self.sb.layout.desc_at(group))
    }

    /// Where the write-ahead log lives: `(offset, length)` in bytes.
    pub fn log_area(&self) -> (u64, u64) {
        (self.sb.layout.log_off, self.sb.layout.log_len)
    }

    /// After a failed commit: recovery again, as at open, on the live device. The failed commit
    /// either reached its log record (then recovery applies it) or did not (then nothing of it
    /// is on disk), so afterwards memory and disk agree again and commits may resume.
    fn recover_poisoned(&self) -> Result<CommitId, StoreError> {
        let rec = recover(&self.io, &self.sb, Access::ReadWrite)?;
        let (descs, corrupt) = read_table(&self.io, &self.sb)?;
        let mut st = self.state.lock();
        st.descs = descs;
        st.corrupt.absorb(corrupt);
        for (group, what) in rec.corrupt {
            st.corrupt.mark(group, what);
        }
        // The cache may be behind the disk: an earlier recovery attempt may have replayed the
        // failed commit and then failed itself. Start again from what recovery rebuilt now.
        st.cache = rec.bitmaps.into_iter().collect();
        st.seq = rec.seq;
        st.poisoned = None;
        Ok(CommitId(rec.seq))
    }

    #[cfg(test)]
    pub(crate) fn sb_layout(&self) -> Layout {
        self.sb.layout
    }

    fn check_group(&self, group: u32) -> Result<(), StoreError> {
        let groups = self.sb.layout.groups;
        if group < groups {
            Ok(())
        } else {
            Err(StoreError::NoSuchGroup { group, groups })
        }
    }

    /// A group's current bitmap bytes: from the cache, synthesised for `BLOCK_UNINIT`, or read
    /// and checked. The caller holds `commit_lock` (either way).
    fn load(&self, group: u32) -> Result<Box<[u8]>, StoreError> {
        let desc = {
            let st = self.state.lock();
            if let Some(why) = st.corrupt.why(group) {
                return Err(self.corrupt_error(group, why));
            }
            if let Some(b) = st.cache.get(&group) {
                return Ok(b.clone());
            }
            st.descs[group as usize]
        };
        self.loads.fetch_add(1, Relaxed);
        let bytes = self.read_checked(group, &desc);
        let mut st = self.state.lock();
        match bytes {
            Ok(b) => {
                st.cache.insert(group, b.clone());
                Ok(b)
            }
            Err(StoreError::Corrupt { group, what }) => {
                st.corrupt.mark(group, what.clone());
                Err(StoreError::Corrupt { group, what })
            }
            Err(e) => Err(e),
        }
    }

    /// The error for a load of corrupt `group`; a bad descriptor's details are decoded again.
    fn corrupt_error(&self, group: u32, why: Why<'_>) -> StoreError {
        let what = match why {
            Why::Other(what) => what.to_string(),
            Why::Descriptor => self
                .io
                .read("read a descriptor", self.sb.layout.desc_at(group), DESC_LEN)
                .ok()
                .and_then(|b| decode_desc(&self.sb, group, &b).err())
                .map_or_else(
                    || "descriptor failed its check at open".to_string(),
                    |p| p.to_string(),
                ),
        };
        StoreError::Corrupt { group, what }
    }

    /// Reads a group's bitmap from disk and checks its checksum and padding.
    fn read_checked(&self, group: u32, desc: &DiskDesc) -> Result<Box<[u8]>, StoreError> {
        let geometry = &self.sb.geometry;
        if desc.is_uninit() {
            return Ok(BitmapBytes::all_free(geometry, group).into_bytes());
        }
        let at = self.sb.layout.bitmap_at(group);
        let bytes = self
            .io
            .read("read a bitmap", at, self.sb.layout.bitmap_len)?
            .into_boxed_slice();
        let computed = bitmap_crc(self.sb.nonce, group, &bytes);
        if computed != desc.bitmap_crc {
            let what = format!(
                "bitmap checksum {:#010x}, computed {computed:#010x}",
                desc.bitmap_crc
            );
            return Err(StoreError::Corrupt { group, what });
        }
        let bitmap = BitmapBytes::from_raw(bytes, geometry.group_len(group));
        if let Some(bit) = bitmap.first_clear_padding() {
            return Err(StoreError::Corrupt {
                group,
                what: format!("padding bit {bit} is clear"),
            });
        }
        Ok(bitmap.into_bytes())
    }

    /// Applies each group's runs to a copy of its bitmap, checking them; nothing is written.
    fn prepare(&self, deltas: Vec<GroupDelta>) -> Result<Vec<Prepared>, StoreError> {
        let mut out = Vec::with_capacity(deltas.len());
        for delta in deltas {
            let group = delta.group;
            let base_uninit = self.state.lock().descs[group as usize].is_uninit();
            let mut bitmap = self.load(group)?;
            apply_checked(&self.sb.geometry, group, &mut bitmap, &delta.runs)?;
            let desc = desc_for(&self.sb, group, &bitmap);
            out.push(Prepared {
                group,
                base_uninit,
                delta,
                bitmap,
                desc,
            });
        }
        Ok(out)
    }

    /// The write-ahead protocol for one commit.
    fn write_commit(&self, seq: u64, record: &[u8], groups: &[Prepared]) -> Result<(), StoreError> {
        let layout = &self.sb.layout;
        self.io
            .write("write the log record", layout.record_at(seq), record)?;
        self.io.sync("sync the log record")?;
        let images: Vec<GroupImage<'_>> = groups
            .iter()
            .map(|p| GroupImage {
                group: p.group,
                desc: p.desc,
                bitmap: &p.bitmap,
            })
            .collect();
        write_groups(&self.io, &self.sb, &images)?;
        self.io.sync("sync the checkpoint")?;
        self.io.write(
            "mark the log applied",
            layout.marker_at(seq),
            &encode_marker(self.sb.nonce, seq),
        )
    }

    fn commit_locked(&self, commit: &Commit) -> Result<CommitId, StoreError> {
        let seq = {
            let st = self.state.lock();
            if let Some(cause) = &st.poisoned {
                return Err(StoreError::Poisoned {
                    cause: cause.clone(),
                });
            }
            st.seq
        };
        if commit.is_empty() {
            return Ok(CommitId(seq));
        }
        if self.access == Access::ReadOnly {
            return Err(StoreError::ReadOnly { op: "commit" });
        }
        if seq >= MAX_SEQ {
            return Err(StoreError::BadLog {
                seq,
                what: "no sequence numbers left".into(),
            });
        }
        let groups = self.prepare(split(&self.sb.geometry, commit)?)?;
        let record = Record {
            seq: seq + 1,
            groups: groups
                .iter()
                .map(|p| RecordGroup {
                    group: p.group,
                    base_uninit: p.base_uninit,
                    runs: p.delta.runs.clone(),
                })
                .collect(),
        };
        let (bytes, capacity) = (record_len(&record), self.sb.layout.record_capacity());
        if bytes > capacity {
            return Err(StoreError::CommitTooLarge { bytes, capacity });
        }
        let encoded = encode_record(self.sb.nonce, &record);
        if let Err(e) = self.write_commit(seq + 1, &encoded, &groups) {
            self.state.lock().poisoned = Some(e.to_string());
            return Err(e);
        }
        let mut st = self.state.lock();
        for p in groups {
            st.descs[p.group as usize] = p.desc;
            st.cache.insert(p.group, p.bitmap);
        }
        st.seq = seq + 1;
        self.commits.fetch_add(1, Relaxed);
        Ok(CommitId(seq + 1))
    }
}

/// Bitmaps for the groups `used` touches (overlapping ranges are fine).
fn initial_bitmaps(
    geometry: &Geometry,
    used: &[Extent],
) -> Result<BTreeMap<u32, Box<[u8]>>, StoreError> {
    let deltas = split(
        geometry,
        &Commit {
            allocated: used.to_vec(),
            freed: Vec::new(),
        },
    )?;
    let mut out = BTreeMap::new();
    for d in deltas {
        let mut bitmap = BitmapBytes::all_free(geometry, d.group).into_bytes();
        super::delta::apply_unchecked(&mut bitmap, &d.runs);
        out.insert(d.group, bitmap);
    }
    Ok(out)
}

/// Everything but the superblock, sync, then the superblock, sync.
fn write_initial(
    io: &DevIo,
    sb: &Superblock,
    bitmaps: &BTreeMap<u32, Box<[u8]>>,
) -> Result<(), StoreError> {
    // A device that held a store keeps that store's superblock until the new one is written
    // last: cut short in between, it opened as the old store over the new table, its groups
    // unreadable. Zero it first, durably, so that a create cut short leaves no store at all.
    let sb_bytes = encode_superblock(sb);
    io.write(
        "invalidate the old superblock",
        0,
        &vec![0u8; sb_bytes.len()],
    )?;
    io.sync("sync the invalidated superblock")?;
    let mut table = Vec::with_capacity(sb.layout.desc_table_len());
    for group in 0..sb.layout.groups {
        let desc = match bitmaps.get(&group) {
            Some(b) => desc_for(sb, group, b),
            None => DiskDesc::uninit(&sb.geometry, group),
        };
        table.extend_from_slice(&encode_desc(sb.nonce, group, &desc));
    }
    for (group, bitmap) in bitmaps {
        io.write(
            "write an initial bitmap",
            sb.layout.bitmap_at(*group),
            bitmap,
        )?;
    }
    io.write("write the descriptors", sb.layout.desc_off, &table)?;
    // Clear the markers and both record headers so nothing from an earlier use of the device
    // can pass for ours (the nonce already makes that unlikely; this makes it certain).
    io.write(
        "clear the log markers",
        sb.layout.log_off,
        &vec![0u8; LOG_HEAD as usize],
    )?;
    for slot in 0..2 {
        io.write("clear a log slot", sb.layout.record_at(slot), &[0u8; 512])?;
    }
    io.sync("sync the new store")?;
    io.write("write the superblock", 0, &sb_bytes)?;
    io.sync("sync the superblock")
}

/// Descriptors per read of the table: bounds the buffer whatever the table's size.
const TABLE_PIECE: u32 = 1 << 16;

/// Reads and decodes every descriptor, a piece at a time; a bad one marks its group corrupt
/// instead of failing the open.
fn read_table(io: &DevIo, sb: &Superblock) -> Result<(Vec<DiskDesc>, CorruptSet), StoreError> {
    let groups = sb.layout.groups;
    let mut descs = Vec::with_capacity(groups as usize);
    let mut corrupt = CorruptSet::new(groups);
    let mut first = 0;
    while first < groups {
        let n = TABLE_PIECE.min(groups - first);
        let at = sb.layout.desc_at(first);
        let piece = io.read("read the descriptors", at, n as usize * DESC_LEN)?;
        for (group, bytes) in (first..first + n).zip(piece.chunks(DESC_LEN)) {
            match decode_desc(sb, group, bytes) {
                Ok(d) => descs.push(d),
                Err(_) => {
                    corrupt.mark_descriptor(group);
                    descs.push(DiskDesc::default());
                }
            }
        }
        first += n;
    }
    Ok((descs, corrupt))
}

impl Store for FileStore {
    fn geometry(&self) -> Geometry {
        self.sb.geometry
    }

    fn descriptor(&self, group: u32) -> Result<GroupDesc, StoreError> {
        self.check_group(group)?;
        let st = self.state.lock();
        Ok(public_desc(&st, group))
    }

    fn descriptors(&self) -> Vec<GroupDesc> {
        let st = self.state.lock();
        (0..self.sb.layout.groups)
            .map(|g| public_desc(&st, g))
            .collect()
    }

    fn read_bitmap(&self, group: u32) -> Result<BitmapBytes, StoreError> {
        self.check_group(group)?;
        let _shared = self.commit_lock.read();
        let bytes = self.load(group)?;
        Ok(BitmapBytes::from_raw(
            bytes,
            self.sb.geometry.group_len(group),
        ))
    }

    fn commit(&self, commit: &Commit) -> Result<CommitId, StoreError> {
        let _exclusive = self.commit_lock.write();
        self.commit_locked(commit)
    }

    fn last_commit(&self) -> CommitId {
        CommitId(self.state.lock().seq)
    }

    fn corrupt_groups(&self) -> Vec<u32> {
        self.state.lock().corrupt.groups()
    }

    fn verify(&self) -> Result<Vec<Problem>, StoreError> {
        let _shared = self.commit_lock.read();
        verify_device(self.io.device())
    }

    fn stats(&self) -> StoreStats {
        StoreStats {
            bitmap_loads: self.loads.load(Relaxed),
            commits: self.commits.load(Relaxed),
            bytes_written: self.io.bytes_written(),
            syncs: self.io.syncs(),
        }
    }

    fn commit_capacity(&self) -> Option<u64> {
        Some(self.sb.layout.record_capacity())
    }

    fn recover(&self) -> Result<CommitId, StoreError> {
        let _exclusive = self.commit_lock.write();
        let (poisoned, seq) = {
            let st = self.state.lock();
            (st.poisoned.is_some(), st.seq)
        };
        if poisoned {
            self.recover_poisoned()
        } else {
            Ok(CommitId(seq))
        }
    }
}

/// The descriptor the allocator sees: corrupt groups are flagged, and report no free space if
/// their descriptor itself is bad.
fn public_desc(st: &State, group: u32) -> GroupDesc {
    let d = st.descs[group as usize];
    let mut flags = GroupFlags(d.flags);
    if st.corrupt.contains(group) {
        flags.0 |= GroupFlags::CORRUPT.0;
    }
    GroupDesc {
        free: d.free,
        flags,
    }
}
