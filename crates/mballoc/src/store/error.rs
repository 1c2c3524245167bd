//! Everything a store can report. Values are plain data (no `io::Error` inside) so errors can be
//! cloned into the allocator's own error type and compared in tests.

use std::io;

use thiserror::Error;

/// Why a store call failed. Each variant carries the offending values.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    /// The device refused a read, write or sync. After a failed write or sync inside
    /// [`commit`](super::Store::commit) the store is poisoned: reopen it to recover.
    #[error("I/O error during {op} at byte {offset}: {kind:?}: {message}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// Byte offset on the device.
        offset: u64,
        /// The I/O error's kind.
        kind: io::ErrorKind,
        /// The I/O error, with the file when known.
        message: String,
    },

    /// A group's descriptor or bitmap failed its checksum (or is otherwise unusable). The group is
    /// remembered as corrupt and never rewritten by the store.
    #[error("group {group} is corrupt: {what}")]
    Corrupt {
        /// The group.
        group: u32,
        /// What is wrong.
        what: String,
    },

    /// The superblock is missing, torn, from another format, or describes an impossible layout.
    #[error("bad superblock: {what}")]
    BadSuperblock {
        /// What is wrong.
        what: String,
    },

    /// A log record passed its checksum but does not make sense: a bug, not a torn write.
    #[error("write-ahead log record {seq} is invalid: {what}")]
    BadLog {
        /// The record's sequence number.
        seq: u64,
        /// What is wrong.
        what: String,
    },

    /// A group number past the last group.
    #[error("group {group} does not exist (the store has {groups} groups)")]
    NoSuchGroup {
        /// The group.
        group: u32,
        /// Groups of the store.
        groups: u32,
    },

    /// An extent outside the store's data area.
    #[error(
        "extent [{start}, +{len}) is outside the data area [{first_data_block}, {blocks_count})"
    )]
    OutOfRange {
        /// First block of the extent.
        start: u64,
        /// Its length in blocks.
        len: u64,
        /// The first data block.
        first_data_block: u64,
        /// Blocks of the store.
        blocks_count: u64,
    },

    /// A commit allocates a block that is already in use on disk (or twice in one commit).
    #[error("commit allocates block {block}, which is already in use")]
    AlreadyAllocated {
        /// The block.
        block: u64,
    },

    /// A commit frees a block that is not in use on disk (a double free).
    #[error("commit frees block {block}, which is not in use")]
    NotAllocated {
        /// The block.
        block: u64,
    },

    /// The commit's log record does not fit the log area chosen at create time; nothing was
    /// written. Cut it with [`fit_commit`](super::fit_commit), as the allocator does.
    #[error("commit needs a {bytes}-byte log record but a log slot holds {capacity} bytes; cut it with store::fit_commit")]
    CommitTooLarge {
        /// Bytes the record needs.
        bytes: u64,
        /// Bytes a log slot holds.
        capacity: u64,
    },

    /// The device is smaller than the layout needs.
    #[error("device holds {have} bytes but the store needs {need}")]
    DeviceTooSmall {
        /// Bytes the layout needs.
        need: u64,
        /// Bytes the device holds.
        have: u64,
    },

    /// A geometry the store cannot represent.
    #[error("invalid geometry: {what}")]
    Geometry {
        /// What is wrong.
        what: String,
    },

    /// Another process holds a lock that conflicts with this open: a writer's exclusive lock,
    /// or (for a read-write open) readers' shared locks.
    #[error(
        "{path}: in use by another process (this {access} open waited {waited_ms} ms for its lock)"
    )]
    InUse {
        /// The file.
        path: String,
        /// `read-write` or `read-only`.
        access: &'static str,
        /// How long the open waited for its lock.
        waited_ms: u64,
    },

    /// A store lives in a regular file or on a block device; `kind` is what `path` is instead.
    #[error("{path} is a {kind}, not a regular file or block device")]
    NotAStoreFile {
        /// The file.
        path: String,
        /// What it is instead (a directory, a FIFO, ...).
        kind: &'static str,
    },

    /// The store was opened read-only and was asked to change.
    #[error("the store was opened read-only: cannot {op}")]
    ReadOnly {
        /// The change asked for.
        op: &'static str,
    },

    /// An earlier commit failed half-way through its I/O; what is on disk is only known after
    /// recovery, so the store refuses further commits until it is reopened.
    #[error("store is poisoned by an earlier failed commit ({cause}); reopen it to recover")]
    Poisoned {
        /// The failure that poisoned it.
        cause: String,
    },
}

impl StoreError {
    /// Wraps an I/O error with what was being done and where.
    pub(crate) fn io(op: &'static str, offset: u64, e: &io::Error) -> Self {
        StoreError::Io {
            op,
            offset,
            kind: e.kind(),
            message: e.to_string(),
        }
    }

    /// [`io`](Self::io), naming the file.
    pub(crate) fn io_at(
        path: &std::path::Path,
        op: &'static str,
        offset: u64,
        e: &io::Error,
    ) -> Self {
        StoreError::Io {
            op,
            offset,
            kind: e.kind(),
            message: format!("{}: {e}", path.display()),
        }
    }
}

/// One inconsistency found by [`verify_device`](super::verify_device) or [`Store::verify`](super::Store::verify).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A descriptor fails its checksum.
    #[error("group {group}: descriptor checksum {stored:#010x}, computed {computed:#010x}")]
    DescriptorChecksum {
        /// The group.
        group: u32,
        /// The checksum stored.
        stored: u32,
        /// The checksum computed.
        computed: u32,
    },

    /// A descriptor has flags this format does not know.
    #[error("group {group}: unknown descriptor flags {flags:#x} (reserved field {reserved:#x})")]
    UnknownFlags {
        /// The group.
        group: u32,
        /// The flags stored.
        flags: u16,
        /// The reserved field.
        reserved: u16,
    },

    /// A descriptor's free count is impossible for its group.
    #[error("group {group}: descriptor says {free} free of {group_len} blocks (uninit: {uninit})")]
    BadFreeCount {
        /// The group.
        group: u32,
        /// The free count stored.
        free: u32,
        /// Blocks of the group.
        group_len: u32,
        /// Whether the group is `BLOCK_UNINIT`.
        uninit: bool,
    },

    /// A bitmap fails its checksum.
    #[error("group {group}: bitmap checksum {stored:#010x}, computed {computed:#010x}")]
    BitmapChecksum {
        /// The group.
        group: u32,
        /// The checksum stored.
        stored: u32,
        /// The checksum computed.
        computed: u32,
    },

    /// A descriptor's free count differs from its bitmap's.
    #[error("group {group}: descriptor counts {descriptor} free blocks, the bitmap {bitmap}")]
    FreeCountMismatch {
        /// The group.
        group: u32,
        /// Free blocks per the descriptor.
        descriptor: u32,
        /// Free blocks per the bitmap.
        bitmap: u32,
    },

    /// A bit past the end of the last group is clear (it must read as in use).
    #[error("group {group}: padding bit {bit} past the end of the group is clear")]
    PaddingClear {
        /// The group.
        group: u32,
        /// The bit.
        bit: u32,
    },

    /// The log holds a committed record not yet applied in place.
    #[error("log record {seq} is complete but not applied (opening the store replays it)")]
    UnappliedLog {
        /// The record's sequence number.
        seq: u64,
    },
}
