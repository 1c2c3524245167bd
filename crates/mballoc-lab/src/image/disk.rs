//! Read-only access to the image: a file (raw image, `e2image -r` output) or a block device,
//! opened without write permission so that nothing can be written to it.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::error::ImageError;

/// An open image.
pub struct Disk {
    file: File,
    path: PathBuf,
    size: u64,
}

impl Disk {
    /// Opens `path` read-only; its size is found by seeking to the end (a block device
    /// reports length 0 in its metadata).
    pub fn open(path: &Path) -> Result<Disk, ImageError> {
        let io = |source: std::io::Error| ImageError::Io {
            path: path.to_path_buf(),
            source: source.into(),
        };
        let mut file = File::open(path).map_err(io)?;
        let size = file.seek(SeekFrom::End(0)).map_err(io)?;
        Ok(Disk {
            file,
            path: path.to_path_buf(),
            size,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the image.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// `len` bytes at `offset`; short images are a typed error naming `what` was read.
    pub fn read(&self, offset: u64, len: usize, what: &'static str) -> Result<Vec<u8>, ImageError> {
        if offset.checked_add(len as u64).is_none_or(|e| e > self.size) {
            return Err(ImageError::Truncated {
                path: self.path.clone(),
                what,
                offset,
                len,
                size: self.size,
            });
        }
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|source| ImageError::Io {
                path: self.path.clone(),
                source: source.into(),
            })?;
        Ok(buf)
    }
}

/// Little-endian field readers over an on-disk structure.
pub(crate) fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub(crate) fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
