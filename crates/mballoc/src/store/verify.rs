//! fsck for a [`FileStore`](super::FileStore) device: recomputes every checksum and every free
//! count from what is on disk, and reports each disagreement as a typed [`Problem`] rather than
//! stopping at the first (the way e2fsck and ZFS's `METASLAB_VERIFY` report).

use std::sync::Arc;

use super::bitmap::BitmapBytes;
use super::checkpoint::DevIo;
use super::device::Device;
use super::file_store::read_superblock;
use super::format::{bitmap_crc, decode_desc, DiskDesc, Superblock, DESC_LEN};
use super::recovery::log_state;
use super::StoreError;

/// One inconsistency found by [`verify_device`] or [`Store::verify`](super::Store::verify).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("group {group}: descriptor checksum {stored:#010x}, computed {computed:#010x}")]
    DescriptorChecksum {
        group: u32,
        stored: u32,
        computed: u32,
    },

    #[error("group {group}: unknown descriptor flags {flags:#x} (reserved field {reserved:#x})")]
    UnknownFlags {
        group: u32,
        flags: u16,
        reserved: u16,
    },

    #[error("group {group}: descriptor says {free} free of {group_len} blocks (uninit: {uninit})")]
    BadFreeCount {
        group: u32,
        free: u32,
        group_len: u32,
        uninit: bool,
    },

    #[error("group {group}: bitmap checksum {stored:#010x}, computed {computed:#010x}")]
    BitmapChecksum {
        group: u32,
        stored: u32,
        computed: u32,
    },

    #[error("group {group}: descriptor counts {descriptor} free blocks, the bitmap {bitmap}")]
    FreeCountMismatch {
        group: u32,
        descriptor: u32,
        bitmap: u32,
    },

    #[error("group {group}: padding bit {bit} past the end of the group is clear")]
    PaddingClear { group: u32, bit: u32 },

    #[error("log record {seq} is complete but not applied (opening the store replays it)")]
    UnappliedLog { seq: u64 },
}

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
