//! Errors of the file layer: each names the file (inode) and the range that failed.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FsError {
    /// No space even after committing the running transaction and retrying once (what ext4
    /// does before it returns ENOSPC). `mapped` blocks of the range were allocated before.
    #[error("inode {ino}: no space for logical blocks [{logical}, +{wanted}) ({mapped} mapped before ENOSPC; {free} free, {pending} waiting for commit)")]
    NoSpace {
        ino: u64,
        logical: u64,
        wanted: u64,
        mapped: u64,
        free: u64,
        pending: u64,
    },

    /// The allocator refused a request or a free for another reason.
    #[error("inode {ino}: allocator error at logical block {logical}: {source}")]
    Allocator {
        ino: u64,
        logical: u64,
        #[source]
        source: mballoc::Error,
    },

    /// A journal commit failed (only a durable store can fail one).
    #[error("journal commit failed: {0}")]
    Commit(#[from] mballoc::Error),

    /// A byte range that does not fit ext4's 2^32 logical blocks.
    #[error("inode {ino}: byte range [{offset}, +{len}) is beyond ext4's 2^32 - 1 logical blocks")]
    RangeTooLarge { ino: u64, offset: u64, len: u64 },

    /// A zero-length write or fallocate (the kernel returns EINVAL for fallocate).
    #[error("inode {ino}: zero-length {op} at offset {offset}")]
    ZeroLength {
        ino: u64,
        op: &'static str,
        offset: u64,
    },

    /// A journal commit interval of zero operations.
    #[error("commit interval must be at least one operation, got {0}")]
    BadCommitInterval(u64),
}
