//! Every way a call into the allocator can fail. Each variant carries the offending values, and
//! none of them leaves the allocator in a state that later calls cannot use.

use thiserror::Error;

use crate::geometry::{Geometry, GeometryError};
use crate::store::StoreError;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    #[error("invalid geometry: {field} = {value} (must be {reason})")]
    InvalidGeometry {
        field: &'static str,
        value: u64,
        reason: &'static str,
    },

    #[error("used range [{start}, +{len}) lies outside the filesystem of {blocks_count} blocks")]
    UsedRangeOutOfRange {
        start: u64,
        len: u64,
        blocks_count: u64,
    },

    #[error("zero-length request for owner {owner}")]
    ZeroLength { owner: u64 },

    #[error("extent [{start}, +{len}) is outside the filesystem data area [{first_data_block}, {blocks_count})")]
    OutOfRange {
        start: u64,
        len: u64,
        first_data_block: u64,
        blocks_count: u64,
    },

    #[error("invalid request for owner {owner}: {what}")]
    InvalidRequest { owner: u64, what: String },

    #[error("free of [{start}, +{len}): block {block} is not allocated (double free?)")]
    NotAllocated { start: u64, len: u64, block: u64 },

    #[error(
        "free of [{start}, +{len}): block {block} belongs to a preallocation, not to owner {owner}"
    )]
    FreeOfPreallocated {
        owner: u64,
        start: u64,
        len: u64,
        block: u64,
    },

    #[error("no space: {requested} blocks requested, none could be allocated ({free} free, {pending} waiting for commit)")]
    NoSpace {
        requested: u32,
        free: u64,
        pending: u64,
    },

    #[error("the goal block {goal} is not free for {len} blocks (HINT_GOAL_ONLY)")]
    GoalNotFree { goal: u64, len: u32 },

    #[error("unknown tunable {name:?}; valid names: {valid}")]
    UnknownTunable { name: String, valid: String },

    #[error("unknown policy {name:?}; valid policies: {valid}")]
    UnknownPolicy { name: String, valid: String },

    #[error("bad value {value:?} for {name}: allowed {allowed}")]
    InvalidTunable {
        name: String,
        value: String,
        allowed: String,
    },

    #[error("group {group} is corrupt: {reason}")]
    CorruptGroup { group: u32, reason: String },

    #[error("group {group} does not exist (the filesystem has {groups} groups)")]
    NoSuchGroup { group: u32, groups: u32 },

    #[error("store error: {0}")]
    Store(StoreError),

    /// The store refused or failed a commit. Nothing is lost: the allocations stay in memory,
    /// the frees stay pending, and the next `commit()` retries them all.
    #[error(
        "commit failed ({pending} freed blocks stay pending until a commit succeeds): {cause}"
    )]
    CommitFailed { cause: StoreError, pending: u64 },

    /// After a failed commit the store reports a commit id that is neither the allocator's
    /// last durable commit nor the one that failed: someone else committed to it.
    #[error("the store is at commit {found}, expected {expected} or {}", expected + 1)]
    StoreDiverged { expected: u64, found: u64 },

    #[error("the builder's geometry {builder:?} differs from the store's {store:?}")]
    StoreGeometry { builder: Geometry, store: Geometry },

    #[error("{ranges} used ranges given with a store: the store already says what is in use")]
    UsedWithStore { ranges: usize },
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
