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
        op: &'static str,
        offset: u64,
        kind: io::ErrorKind,
        message: String,
    },

    /// A group's descriptor or bitmap failed its checksum (or is otherwise unusable). The group is
    /// remembered as corrupt and never rewritten by the store.
    #[error("group {group} is corrupt: {what}")]
    Corrupt { group: u32, what: String },

    /// The superblock is missing, torn, from another format, or describes an impossible layout.
    #[error("bad superblock: {what}")]
    BadSuperblock { what: String },

    /// A log record passed its checksum but does not make sense: a bug, not a torn write.
    #[error("write-ahead log record {seq} is invalid: {what}")]
    BadLog { seq: u64, what: String },

    #[error("group {group} does not exist (the store has {groups} groups)")]
    NoSuchGroup { group: u32, groups: u32 },

    #[error(
        "extent [{start}, +{len}) is outside the data area [{first_data_block}, {blocks_count})"
    )]
    OutOfRange {
        start: u64,
        len: u64,
        first_data_block: u64,
        blocks_count: u64,
    },

    /// A commit allocates a block that is already in use on disk (or twice in one commit).
    #[error("commit allocates block {block}, which is already in use")]
    AlreadyAllocated { block: u64 },

    /// A commit frees a block that is not in use on disk (a double free).
    #[error("commit frees block {block}, which is not in use")]
    NotAllocated { block: u64 },

    /// The commit's log record does not fit the log area chosen at create time; nothing was
    /// written. Cut it with [`fit_commit`](super::fit_commit), as the allocator does.
    #[error("commit needs a {bytes}-byte log record but a log slot holds {capacity} bytes; cut it with store::fit_commit")]
    CommitTooLarge { bytes: u64, capacity: u64 },

    /// The device is smaller than the layout needs.
    #[error("device holds {have} bytes but the store needs {need}")]
    DeviceTooSmall { need: u64, have: u64 },

    /// A geometry the store cannot represent.
    #[error("invalid geometry: {what}")]
    Geometry { what: String },

    /// Another process holds a lock that conflicts with this open: a writer's exclusive lock,
    /// or (for a read-write open) readers' shared locks.
    #[error(
        "{path}: in use by another process (this {access} open waited {waited_ms} ms for its lock)"
    )]
    InUse {
        path: String,
        access: &'static str,
        waited_ms: u64,
    },

    /// A store lives in a regular file or on a block device; `kind` is what `path` is instead.
    #[error("{path} is a {kind}, not a regular file or block device")]
    NotAStoreFile { path: String, kind: &'static str },

    /// The store was opened read-only and was asked to change.
    #[error("the store was opened read-only: cannot {op}")]
    ReadOnly { op: &'static str },

    /// An earlier commit failed half-way through its I/O; what is on disk is only known after
    /// recovery, so the store refuses further commits until it is reopened.
    #[error("store is poisoned by an earlier failed commit ({cause}); reopen it to recover")]
    Poisoned { cause: String },
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
