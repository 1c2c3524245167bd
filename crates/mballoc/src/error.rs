//! Every way a call into the allocator can fail. Each variant carries the offending values, and
//! none of them leaves the allocator in a state that later calls cannot use.

use thiserror::Error;

use crate::geometry::{Geometry, GeometryError};
use crate::store::StoreError;

/// Why a call into the allocator failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// The geometry given is impossible (see [`GeometryError`]).
    #[error("invalid geometry: {field} = {value} (must be {reason})")]
    InvalidGeometry {
        /// The argument at fault.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What it must be.
        reason: &'static str,
    },

    /// A range given as already in use lies outside the filesystem.
    #[error("used range [{start}, +{len}) lies outside the filesystem of {blocks_count} blocks")]
    UsedRangeOutOfRange {
        /// First block of the extent.
        start: u64,
        /// Its length in blocks.
        len: u64,
        /// Blocks of the filesystem.
        blocks_count: u64,
    },

    /// A request for no blocks.
    #[error("zero-length request for owner {owner}")]
    ZeroLength {
        /// The owner (inode) named.
        owner: u64,
    },

    /// An extent outside the filesystem's data area.
    #[error("extent [{start}, +{len}) is outside the filesystem data area [{first_data_block}, {blocks_count})")]
    OutOfRange {
        /// First block of the extent.
        start: u64,
        /// Its length in blocks.
        len: u64,
        /// The first data block.
        first_data_block: u64,
        /// Blocks of the filesystem.
        blocks_count: u64,
    },

    /// A request the allocator cannot serve as asked (flags only it may set, neighbours outside the file or the filesystem).
    #[error("invalid request for owner {owner}: {what}")]
    InvalidRequest {
        /// The owner (inode) named.
        owner: u64,
        /// What is wrong.
        what: String,
    },

    /// A free of a block that is not allocated.
    #[error("free of [{start}, +{len}): block {block} is not allocated (double free?)")]
    NotAllocated {
        /// First block of the extent.
        start: u64,
        /// Its length in blocks.
        len: u64,
        /// The first block at fault.
        block: u64,
    },

    /// A free of a block that a preallocation holds and never handed out.
    #[error(
        "free of [{start}, +{len}): block {block} belongs to a preallocation, not to owner {owner}"
    )]
    FreeOfPreallocated {
        /// The owner (inode) named.
        owner: u64,
        /// First block of the extent.
        start: u64,
        /// Its length in blocks.
        len: u64,
        /// The first block at fault.
        block: u64,
    },

    /// Nothing could be allocated, even after discarding preallocations and committing.
    #[error("no space: {requested} blocks requested, none could be allocated ({free} free, {pending} waiting for commit)")]
    NoSpace {
        /// Blocks requested.
        requested: u32,
        /// Free blocks at the time.
        free: u64,
        /// Freed blocks waiting for a commit.
        pending: u64,
    },

    /// `HINT_GOAL_ONLY` and the goal is not free.
    #[error("the goal block {goal} is not free for {len} blocks (HINT_GOAL_ONLY)")]
    GoalNotFree {
        /// The goal block.
        goal: u64,
        /// Blocks wanted there.
        len: u32,
    },

    /// A tunable name no [`Tunables`](crate::Tunables) field has.
    #[error("unknown tunable {name:?}; valid names: {valid}")]
    UnknownTunable {
        /// The name given.
        name: String,
        /// The names accepted.
        valid: String,
    },

    /// A policy name no [`Policy`](crate::Policy) preset has.
    #[error("unknown policy {name:?}; valid policies: {valid}")]
    UnknownPolicy {
        /// The name given.
        name: String,
        /// The names accepted.
        valid: String,
    },

    /// A tunable value outside what the kernel accepts.
    #[error("bad value {value:?} for {name}: allowed {allowed}")]
    InvalidTunable {
        /// The name given.
        name: String,
        /// The value given.
        value: String,
        /// What is accepted.
        allowed: String,
    },

    /// The group is corrupt: never allocated from, frees into it refused.
    #[error("group {group} is corrupt: {reason}")]
    CorruptGroup {
        /// The group.
        group: u32,
        /// Why it is corrupt.
        reason: String,
    },

    /// A group number past the last group.
    #[error("group {group} does not exist (the filesystem has {groups} groups)")]
    NoSuchGroup {
        /// The group.
        group: u32,
        /// Groups of the filesystem.
        groups: u32,
    },

    /// The durable store failed.
    #[error("store error: {0}")]
    Store(StoreError),

    /// The store refused or failed a commit. Nothing is lost: the allocations stay in memory,
    /// the frees stay pending, and the next `commit()` retries them all.
    #[error(
        "commit failed ({pending} freed blocks stay pending until a commit succeeds): {cause}"
    )]
    CommitFailed {
        /// What the store reported.
        cause: StoreError,
        /// Freed blocks waiting for a commit.
        pending: u64,
    },

    /// After a failed commit the store reports a commit id that is neither the allocator's
    /// last durable commit nor the one that failed: someone else committed to it.
    #[error("the store is at commit {found}, expected {expected} or {}", expected + 1)]
    StoreDiverged {
        /// The last commit the allocator knows durable.
        expected: u64,
        /// The commit the store reports.
        found: u64,
    },

    /// A combination bigalloc clusters do not support here (a store, a RAID stripe).
    #[error("{what} is not supported (clusters of 2^{cluster_bits} blocks)")]
    Unsupported {
        /// What was asked for.
        what: &'static str,
        /// The geometry's `cluster_bits`.
        cluster_bits: u32,
    },

    /// The builder was given a geometry other than the store's.
    #[error("the builder's geometry {builder:?} differs from the store's {store:?}")]
    StoreGeometry {
        /// The builder's geometry.
        builder: Geometry,
        /// The store's geometry.
        store: Geometry,
    },

    /// Used ranges given together with a store, which already knows what is in use.
    #[error("{ranges} used ranges given with a store: the store already says what is in use")]
    UsedWithStore {
        /// How many ranges were given.
        ranges: usize,
    },
}

impl From<GeometryError> for Error {
    fn from(e: GeometryError) -> Self {
        let GeometryError {
            field,
            value,
            reason,
        } = e;
        Error::InvalidGeometry {
            field,
            value,
            reason,
        }
    }
}

/// Lets the allocator core use `?` on store calls. Corruption keeps its group so the allocator
/// can mark the group and carry on; everything else becomes the generic `Store` variant.
impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Corrupt { group, what } => Error::CorruptGroup {
                group,
                reason: what,
            },
            StoreError::NoSuchGroup { group, groups } => Error::NoSuchGroup { group, groups },
            other => Error::Store(other),
        }
    }
}
