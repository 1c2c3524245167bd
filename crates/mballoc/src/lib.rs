//! # mballoc
//!
//! The Linux ext4 multi-block allocator (mballoc, as in Linux 6.18), rebuilt as a thread-safe
//! user-space library: block groups with buddy bitmaps, the criteria passes CR_POWER2_ALIGNED …
//! CR_ANY_FREE, the mb_optimize_scan indexes, goal and stream allocation, request normalisation,
//! inode and per-CPU locality-group preallocation, and frees that become reusable only after
//! commit.

mod allocator;
pub mod bitmap;
pub mod buddy;
mod cache;
mod class_index;
mod context;
mod corrupt;
mod criteria;
mod durable;
pub mod error;
mod free;
pub mod geometry;
mod group;
mod index;
mod new_blocks;
mod normalize;
mod percpu;
pub mod policy;
mod prealloc;
mod readahead;
pub mod request;
mod runs;
mod scan;
pub mod size_class;
pub mod source;
mod state;
pub mod stats;
pub mod store;
mod sync;
#[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
pub mod vcpu;
pub mod tunables;

pub use allocator::{Allocator, Builder, SharedAllocator};
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
