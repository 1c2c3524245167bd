//! Positional I/O under a store: a file or block device, memory, or (in `fault`) a device that
//! fails on purpose. Keeping the store on this narrow trait is what lets crash tests cut power
//! at any single write.

use std::fs::File;
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustix::fs::{fcntl_getfl, fcntl_setfl, flock, FlockOperation, OFlags};

use super::StoreError;

/// Byte-addressed storage with an explicit durability point.
///
/// Writes may sit in a cache until [`sync`](Device::sync) returns; a store must not assume any
/// order among unsynced writes, nor that a write lands whole.
pub trait Device: Send + Sync {
    /// Fills `buf` from `offset`; reading past the end is an error.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every write issued so far durable.
    fn sync(&self) -> io::Result<()>;
    /// Current size in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the device holds no bytes.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Bytes the device really holds, where that can be less than [`len`](Device::len): a
    /// sparse file's allocated blocks. `None`: every byte up to `len` is real.
    fn allocated_len(&self) -> io::Result<Option<u64>> {
        Ok(None)
    }
}

/// How a store file is opened, and so which lock it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Access {
    /// Read and write, under an exclusive lock held for the device's life: one writer at a
    /// time, and no reader beside it.
    #[default]
    ReadWrite,
    /// `O_RDONLY` under a shared lock: any number of readers, no writer beside them. The
    /// store never writes (a write would fail with `EBADF` anyway).
    ReadOnly,
}

impl Access {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Access::ReadWrite => "read-write",
            Access::ReadOnly => "read-only",
        }
    }
}

/// How to open a store file: which access, and how long to wait for another process's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenOptions {
    /// Read-write (one writer) or read-only.
    pub access: Access,
    /// `None`: fail at once with [`StoreError::InUse`] if another process holds a conflicting
    /// lock. `Some(d)`: retry for up to `d` first.
    pub lock_wait: Option<Duration>,
}

impl OpenOptions {
    /// Read-only, no waiting.
    pub fn read_only() -> Self {
        OpenOptions {
            access: Access::ReadOnly,
            lock_wait: None,
        }
    }

    /// With `lock_wait` (see [`OpenOptions::lock_wait`]).
    pub fn wait(self, lock_wait: Option<Duration>) -> Self {
        OpenOptions { lock_wait, ..self }
    }
}

/// How often a waiting open retries the lock.
const LOCK_POLL: Duration = Duration::from_millis(10);

/// A regular file or a block device, via `pread`/`pwrite`/`fdatasync`, holding an advisory
/// `flock(2)` on it for as long as it is open (see [`Access`]).
///
/// The lock only binds processes that take it: every open through this type does, a `dd` or
/// an editor does not. `flock` on NFS is emulated with byte-range locks by Linux (and may not
/// reach other clients on old servers), and a block device shared between hosts is not
/// locked across them at all.
#[derive(Debug)]
pub struct FileDevice {
    file: File,
}

impl FileDevice {
    /// Opens an existing file or block device and takes its lock. A FIFO, socket or character
    /// device is refused ([`StoreError::NotAStoreFile`]) without blocking: the open itself is
    /// non-blocking, and the type is checked before any read.
    pub fn open(path: &Path, opts: OpenOptions) -> Result<Self, StoreError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(opts.access == Access::ReadWrite)
            .custom_flags(OFlags::NONBLOCK.bits() as i32)
            .open(path)
            .map_err(|e| open_error(path, &e))?;
        check_kind(path, &file)?;
        clear_nonblock(path, &file)?;
        lock(path, &file, opts)?;
        Ok(FileDevice { file })
    }

    /// Opens or creates `path` for writing, takes the exclusive lock, and only then sizes a
    /// regular file to exactly `len` bytes (sparse, so a 16 TiB store costs only what is
    /// written). A block device must already be large enough. A file this call created is
    /// removed again if sizing it fails.
    pub fn create(path: &Path, len: u64) -> Result<Self, StoreError> {
        let existed = std::fs::symlink_metadata(path).is_ok();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(OFlags::NONBLOCK.bits() as i32)
            .open(path)
            .map_err(|e| open_error(path, &e))?;
        let sized = check_kind(path, &file)
            .and_then(|()| clear_nonblock(path, &file))
            .and_then(|()| lock(path, &file, OpenOptions::default()))
            .and_then(|()| size_new(path, &file, len));
        if let Err(e) = sized {
            if !existed {
                drop(file);
                let _ = std::fs::remove_file(path);
            }
            return Err(e);
        }
        Ok(FileDevice { file })
    }

    /// A device on a file the caller opened; no type check and no lock.
    pub fn from_file(file: File) -> Self {
        FileDevice { file }
    }
}

fn open_error(path: &Path, e: &io::Error) -> StoreError {
    StoreError::io_at(path, "open the store file", 0, e)
}

/// Only regular files and block devices hold a store.
fn check_kind(path: &Path, file: &File) -> Result<(), StoreError> {
    let t = file
        .metadata()
        .map_err(|e| StoreError::io_at(path, "stat the store file", 0, &e))?
        .file_type();
    let kind = if t.is_file() || t.is_block_device() {
        return Ok(());
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_dir() {
        "directory"
    } else {
        "special file"
    };
    Err(StoreError::NotAStoreFile {
        path: path.display().to_string(),
        kind,
    })
}

/// The open was non-blocking only so that a FIFO could not hang it; regular files and block
/// devices ignore the flag, but clear it so the descriptor is an ordinary one.
fn clear_nonblock(path: &Path, file: &File) -> Result<(), StoreError> {
    let err = |e: rustix::io::Errno| StoreError::io_at(path, "clear O_NONBLOCK", 0, &e.into());
    let flags = fcntl_getfl(file).map_err(err)?;
    fcntl_setfl(file, flags - OFlags::NONBLOCK).map_err(err)
}

/// Takes the lock `opts` asks for, retrying every [`LOCK_POLL`] for up to `opts.lock_wait`.
fn lock(path: &Path, file: &File, opts: OpenOptions) -> Result<(), StoreError> {
    let op = match opts.access {
        Access::ReadWrite => FlockOperation::NonBlockingLockExclusive,
        Access::ReadOnly => FlockOperation::NonBlockingLockShared,
    };
    let start = Instant::now();
    loop {
        match flock(file, op) {
            Ok(()) => return Ok(()),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                let waited = start.elapsed();
                if waited >= opts.lock_wait.unwrap_or_default() {
                    return Err(StoreError::InUse {
                        path: path.display().to_string(),
                        access: opts.access.name(),
                        waited_ms: waited.as_millis() as u64,
                    });
                }
                std::thread::sleep(LOCK_POLL);
            }
            Err(e) => return Err(StoreError::io_at(path, "lock the store file", 0, &e.into())),
        }
    }
}

/// Sizes a regular file to `len` (block devices are used as they are).
fn size_new(path: &Path, file: &File, len: u64) -> Result<(), StoreError> {
    let err = |e: io::Error| StoreError::io_at(path, "size the store file", len, &e);
    if file.metadata().map_err(err)?.file_type().is_file() {
        file.set_len(0).map_err(err)?;
        file.set_len(len).map_err(err)?;
    }
    Ok(())
}

impl Device for FileDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }
    /// `fdatasync`: the store never changes the file size after create, so data is enough.
    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    /// Seeking to the end works for block devices too, where metadata reports 0.
    fn len(&self) -> io::Result<u64> {
        (&self.file).seek(SeekFrom::End(0))
    }
    /// A regular file's `st_blocks`; `None` for a block device (never sparse).
    fn allocated_len(&self) -> io::Result<Option<u64>> {
        let meta = self.file.metadata()?;
        Ok(meta.file_type().is_file().then(|| meta.blocks() * 512))
    }
}

/// A device in memory: every write is immediately "durable". Writes past the end grow it.
#[derive(Debug, Default)]
pub struct MemDevice {
    bytes: Mutex<Vec<u8>>,
}

impl MemDevice {
    /// `len` zero bytes.
    pub fn new(len: u64) -> Self {
        Self::from_bytes(vec![0; len as usize])
    }

    /// A device holding `bytes`.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        MemDevice {
            bytes: Mutex::new(bytes),
        }
    }

    /// A copy of the contents (for corrupting in tests, or for a crash image).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.bytes.lock().clone()
    }
}

/// The byte range `[offset, offset + len)` as indices into a buffer of `size` bytes, if it fits.
pub(crate) fn span(offset: u64, len: usize, size: usize) -> Option<std::ops::Range<usize>> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(len)?;
    (end <= size).then_some(start..end)
}

/// Copies `buf` into `bytes` at `offset`, growing `bytes` as needed.
pub(crate) fn write_into(bytes: &mut Vec<u8>, buf: &[u8], offset: u64) -> io::Result<()> {
    let start = usize::try_from(offset).map_err(|_| io::Error::other("offset too large"))?;
    let end = start
        .checked_add(buf.len())
        .ok_or_else(|| io::Error::other("offset too large"))?;
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[start..end].copy_from_slice(buf);
    Ok(())
}

pub(crate) fn read_from(bytes: &[u8], buf: &mut [u8], offset: u64) -> io::Result<()> {
    let r = span(offset, buf.len(), bytes.len())
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of device"))?;
    buf.copy_from_slice(&bytes[r]);
    Ok(())
}

impl Device for MemDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        read_from(&self.bytes.lock(), buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        write_into(&mut self.bytes.lock(), buf, offset)
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.bytes.lock().len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_device_reads_what_was_written_and_refuses_past_end() {
        let d = MemDevice::new(16);
        d.write_at(b"abc", 14).unwrap();
        assert_eq!(d.len().unwrap(), 17);
        let mut buf = [0u8; 3];
        d.read_at(&mut buf, 14).unwrap();
        assert_eq!(&buf, b"abc");
        assert!(d.read_at(&mut buf, 15).is_err());
        assert!(d.read_at(&mut buf, u64::MAX).is_err());
    }

    #[test]
    fn file_device_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let d = FileDevice::create(&dir.path().join("dev"), 1 << 20).unwrap();
        assert_eq!(d.len().unwrap(), 1 << 20);
        d.write_at(b"hello", 4096).unwrap();
        d.sync().unwrap();
        let mut buf = [0u8; 5];
        d.read_at(&mut buf, 4096).unwrap();
        assert_eq!(&buf, b"hello");
    }
}
