//! # mballoc
//!
//! The Linux ext4 multi-block allocator (mballoc, as in Linux 6.18), rebuilt as a thread-safe
//! user-space library: block groups with buddy bitmaps, the criteria passes CR_POWER2_ALIGNED …
//! CR_ANY_FREE, the mb_optimize_scan indexes, goal and stream allocation, request normalisation,
//! inode and per-CPU locality-group preallocation, and frees that become reusable only after
//! commit.

pub mod error;
pub mod geometry;
pub mod store;

pub use error::Error;
pub use geometry::Geometry;
