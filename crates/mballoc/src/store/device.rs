//! Positional I/O under a store: a file or block device, memory, or (in `fault`) a device that
//! fails on purpose. Keeping the store on this narrow trait is what lets crash tests cut power
//! at any single write.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;

use parking_lot::Mutex;

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
}

/// A regular file or a block device, via `pread`/`pwrite`/`fdatasync`.
#[derive(Debug)]
pub struct FileDevice {
    file: File,
}

impl FileDevice {
    /// Opens an existing file or block device for reading and writing.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(FileDevice { file })
    }

    /// Opens or creates `path`. A regular file is sized to exactly `len` bytes (sparse, so a
    /// 16 TiB store costs only what is written); a block device must already be large enough.
    pub fn create(path: &Path, len: u64) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        if file.metadata()?.file_type().is_file() {
            file.set_len(0)?;
            file.set_len(len)?;
        }
        Ok(FileDevice { file })
    }

    pub fn from_file(file: File) -> Self {
        FileDevice { file }
    }
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
