//! Device access with typed errors and counters, and the in-place half of a commit: writing
//! group bitmaps and descriptors where they live. Shared by commit and by recovery's replay.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use super::device::Device;
use super::format::{encode_desc, DiskDesc, Superblock, DESC_LEN};
use super::StoreError;

/// A device plus counters; every error says which step failed and where.
pub(crate) struct DevIo {
    dev: Arc<dyn Device>,
    written: AtomicU64,
    syncs: AtomicU64,
}

impl DevIo {
    pub(crate) fn new(dev: Arc<dyn Device>) -> Self {
        DevIo {
            dev,
            written: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        }
    }

    pub(crate) fn device(&self) -> Arc<dyn Device> {
        self.dev.clone()
    }

    pub(crate) fn read(
        &self,
        op: &'static str,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>, StoreError> {
        let mut buf = vec![0u8; len];
        self.dev
            .read_at(&mut buf, offset)
            .map_err(|e| StoreError::io(op, offset, &e))?;
        Ok(buf)
    }

    pub(crate) fn write(
        &self,
        op: &'static str,
        offset: u64,
        buf: &[u8],
    ) -> Result<(), StoreError> {
        self.dev
            .write_at(buf, offset)
            .map_err(|e| StoreError::io(op, offset, &e))?;
        self.written.fetch_add(buf.len() as u64, Relaxed);
        Ok(())
    }

    pub(crate) fn sync(&self, op: &'static str) -> Result<(), StoreError> {
        self.syncs.fetch_add(1, Relaxed);
        self.dev.sync().map_err(|e| StoreError::io(op, 0, &e))
    }

    pub(crate) fn len(&self) -> Result<u64, StoreError> {
        self.dev
            .len()
            .map_err(|e| StoreError::io("size the device", 0, &e))
    }

    pub(crate) fn allocated_len(&self) -> Result<Option<u64>, StoreError> {
        self.dev
            .allocated_len()
            .map_err(|e| StoreError::io("stat the device", 0, &e))
    }

    pub(crate) fn bytes_written(&self) -> u64 {
        self.written.load(Relaxed)
    }

    pub(crate) fn syncs(&self) -> u64 {
        self.syncs.load(Relaxed)
    }
}

/// A group's new on-disk state.
pub(crate) struct GroupImage<'a> {
    pub group: u32,
    pub desc: DiskDesc,
    pub bitmap: &'a [u8],
}

/// Writes bitmaps, then descriptors, for `images` (ascending by group). Descriptors of
/// consecutive groups go out in one write; untouched neighbours are never rewritten, so a
/// descriptor that failed its checksum stays as found for fsck to see.
pub(crate) fn write_groups(
    io: &DevIo,
    sb: &Superblock,
    images: &[GroupImage<'_>],
) -> Result<(), StoreError> {
    for img in images {
        io.write("write a bitmap", sb.layout.bitmap_at(img.group), img.bitmap)?;
    }
    let mut i = 0;
    while i < images.len() {
        let first = images[i].group;
        let mut buf = Vec::new();
        while i < images.len() && images[i].group == first + (buf.len() / DESC_LEN) as u32 {
            buf.extend_from_slice(&encode_desc(sb.nonce, images[i].group, &images[i].desc));
            i += 1;
        }
        io.write("write descriptors", sb.layout.desc_at(first), &buf)?;
    }
    Ok(())
}
