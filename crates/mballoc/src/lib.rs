//! # mballoc
//!
//! The Linux ext4 multi-block allocator (mballoc, as in Linux 6.18), rebuilt as a thread-safe
//! user-space library: block groups with buddy bitmaps, the criteria passes CR_POWER2_ALIGNED …
//! CR_ANY_FREE, the mb_optimize_scan indexes, goal and stream allocation, request normalisation,
//! inode and per-CPU locality-group preallocation, and frees that become reusable only after
//! commit.

mod alloc;
pub mod error;
pub mod geometry;
mod group;
mod load;
pub mod policy;
pub mod request;
pub mod stats;
pub mod store;
mod sync;
#[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
pub use sync::vcpu;
pub mod tunables;

pub use group::{bitmap, buddy, size_class};
pub use load::source;

pub use alloc::{Allocator, Builder, SharedAllocator};
pub use error::Error;
pub use geometry::Geometry;
pub use policy::{apply_settings, Policy};
pub use request::{
    Allocation, Criterion, Extent, Flags, GroupExtent, NewPa, PaKind, Request, Source,
};
pub use size_class::SizeClass;
pub use source::{BitmapSource, MemSource};
pub use stats::{GroupSnapshot, StatsSnapshot};
pub use tunables::{KernelFlavor, Tunables};
