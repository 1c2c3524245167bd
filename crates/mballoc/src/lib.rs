//! # mballoc
//!
//! The Linux ext4 multi-block allocator (mballoc, as in Linux 6.18), rebuilt as a thread-safe
//! user-space library: block groups with buddy bitmaps, the criteria passes CR_POWER2_ALIGNED …
//! CR_ANY_FREE, the mb_optimize_scan indexes, goal and stream allocation, request normalisation,
//! inode and per-CPU locality-group preallocation, and frees that become reusable only after
//! commit.

mod alloc;
mod error;
mod geometry;
mod group;
mod load;
mod policy;
mod request;
mod stats;
pub mod store;
mod sync;
mod tunables;

#[cfg(feature = "testing")]
pub mod testing;

#[cfg(feature = "testing")]
pub use alloc::GroupLockHold;
pub use alloc::{Allocator, Builder, SharedAllocator};
pub use error::Error;
pub use geometry::{Geometry, GeometryError};
pub use group::bitmap::Bitmap;
pub use group::size_class::SizeClass;
pub use load::source::{BitmapSource, MemSource};
pub use policy::{apply_settings, Policy};
pub use request::{
    Allocation, Criterion, Extent, Flags, GroupExtent, NewPa, PaKind, Request, Source,
};
pub use stats::{GroupSnapshot, StatsSnapshot};
pub use tunables::{possible_cpus, KernelFlavor, Tunables};
