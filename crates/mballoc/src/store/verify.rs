//! fsck for a [`FileStore`](super::FileStore) device: recomputes every checksum and every free
//! count from what is on disk, and reports each disagreement as a typed [`Problem`] rather than
//! stopping at the first (the way e2fsck and ZFS's `METASLAB_VERIFY` report).

use std::sync::Arc;

use super::bitmap::BitmapBytes;
use super::checkpoint::DevIo;
use super::device::Device;
use super::format::{bitmap_crc, decode_desc, DiskDesc, Superblock, DESC_LEN};
use super::recovery::{log_state, read_superblock};
use super::{Problem, StoreError};

/// Checks a store device without opening it (no recovery, no writes). Fails only if the
/// superblock is unusable or the device cannot be read.
pub fn verify_device(device: Arc<dyn Device>) -> Result<Vec<Problem>, StoreError> {
    let io = DevIo::new(device);
    let sb = read_superblock(&io)?;
    let table = io.read(
        "read the descriptors",
        sb.layout.desc_off,
        sb.layout.desc_table_len(),
    )?;
    let mut problems = Vec::new();
    for (group, bytes) in (0..sb.layout.groups).zip(table.chunks(DESC_LEN)) {
        match decode_desc(&sb, group, bytes) {
            Ok(d) if !d.is_uninit() => problems.extend(check_bitmap(&io, &sb, group, &d)?),
            Ok(_) => {}
            Err(p) => problems.push(p),
        }
    }
    let (applied, record) = log_state(&io, &sb)?;
    if let Some(rec) = record.filter(|r| r.seq > applied) {
        problems.push(Problem::UnappliedLog { seq: rec.seq });
    }
    Ok(problems)
}

fn check_bitmap(
    io: &DevIo,
    sb: &Superblock,
    group: u32,
    d: &DiskDesc,
) -> Result<Vec<Problem>, StoreError> {
    let bytes = io.read(
        "read a bitmap",
        sb.layout.bitmap_at(group),
        sb.layout.bitmap_len,
    )?;
    let computed = bitmap_crc(sb.nonce, group, &bytes);
    if computed != d.bitmap_crc {
        return Ok(vec![Problem::BitmapChecksum {
            group,
            stored: d.bitmap_crc,
            computed,
        }]);
    }
    Ok(check_counts(
        group,
        d.free,
        &BitmapBytes::from_raw(bytes.into(), sb.geometry.group_len(group)),
    ))
}

/// Free count and padding of one loaded bitmap against its descriptor (shared with MemStore).
pub(crate) fn check_counts(group: u32, descriptor: u32, bitmap: &BitmapBytes) -> Vec<Problem> {
    let mut out = Vec::new();
    let free = bitmap.count_free();
    if free != descriptor {
        out.push(Problem::FreeCountMismatch {
            group,
            descriptor,
            bitmap: free,
        });
    }
    if let Some(bit) = bitmap.first_clear_padding() {
        out.push(Problem::PaddingClear { group, bit });
    }
    out
}
