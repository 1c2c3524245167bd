//! Why an image could not be read, or which part of it failed a check. Every variant names the
//! offending values (the group, the inode, the stored and computed checksums).

use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;

/// Every way reading an ext4 image can fail.
#[derive(Debug, Clone, Error)]
pub enum ImageError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: Arc<std::io::Error>,
    },

    #[error("{path}: the image ends at byte {size}, reading {len} bytes at {offset} ({what})")]
    Truncated {
        path: PathBuf,
        what: &'static str,
        offset: u64,
        len: usize,
        size: u64,
    },

    /// `ext4_check_geometry`'s refusal: the superblock claims more blocks than the image or
    /// device holds (a copy cut short, or a device smaller than the file system made on it).
    #[error(
        "{path}: bad geometry: block count {blocks_count} exceeds size of device ({device_blocks} \
         blocks of {block_size} bytes)"
    )]
    ShortDevice {
        path: PathBuf,
        blocks_count: u64,
        device_blocks: u64,
        block_size: u32,
    },

    #[error("not an ext4 file system: superblock magic {magic:#06x}, expected 0xef53")]
    BadMagic { magic: u16 },

    #[error("unsupported file system: {what}")]
    Unsupported { what: String },

    #[error("bad superblock field {field} = {value}: {reason}")]
    BadField {
        field: &'static str,
        value: u64,
        reason: &'static str,
    },

    #[error("superblock checksum {stored:#010x}, computed {computed:#010x}")]
    SuperblockChecksum { stored: u32, computed: u32 },

    #[error("group {group}: descriptor checksum {stored:#06x}, computed {computed:#06x}")]
    DescriptorChecksum {
        group: u32,
        stored: u16,
        computed: u16,
    },

    #[error("group {group}: block bitmap checksum {stored:#010x}, computed {computed:#010x}")]
    BlockBitmapChecksum {
        group: u32,
        stored: u32,
        computed: u32,
    },

    #[error("group {group}: inode bitmap checksum {stored:#010x}, computed {computed:#010x}")]
    InodeBitmapChecksum {
        group: u32,
        stored: u32,
        computed: u32,
    },

    #[error(
        "group {group}: block bitmap does not mark the group's own {what} block {block} in use"
    )]
    MetadataNotInUse {
        group: u32,
        what: &'static str,
        block: u64,
    },

    #[error("group {group}: {what} at block {block} lies outside the file system ({blocks_count} blocks)")]
    MetadataOutOfRange {
        group: u32,
        what: &'static str,
        block: u64,
        blocks_count: u64,
    },

    #[error("inode {ino}: checksum {stored:#010x}, computed {computed:#010x}")]
    InodeChecksum {
        ino: u64,
        stored: u32,
        computed: u32,
    },

    #[error("inode {ino}: extent block {block}: {reason}")]
    BadExtentTree {
        ino: u64,
        block: u64,
        reason: String,
    },

    #[error("{path}: layout file line {line}: {reason}")]
    Layout {
        path: PathBuf,
        /// 1-based; 0 when the file ended early or the header's values disagree.
        line: usize,
        reason: String,
    },

    #[error("metrics: {0}")]
    Metrics(#[from] crate::metrics::MetricsError),

    #[error("{path} is mounted read-write on {mount_point} (via {device}): its bitmaps change while they are read; unmount it, mount it read-only, or pass --allow-mounted")]
    MountedReadWrite {
        path: PathBuf,
        device: String,
        mount_point: String,
    },
}

impl ImageError {
    /// The kernel's words for this failure in `mb_groups` (`ext4_decode_error` of the errno
    /// the bitmap load returned): a checksum failure is `-EFSBADCRC`, a bitmap that contradicts
    /// the layout `-EFSCORRUPTED`.
    pub fn kernel_text(&self) -> &'static str {
        match self {
            ImageError::DescriptorChecksum { .. }
            | ImageError::BlockBitmapChecksum { .. }
            | ImageError::InodeBitmapChecksum { .. }
            | ImageError::InodeChecksum { .. }
            | ImageError::SuperblockChecksum { .. } => "Filesystem failed CRC",
            ImageError::Io { .. } | ImageError::Truncated { .. } => "IO failure",
            _ => "Corrupt filesystem",
        }
    }
}
