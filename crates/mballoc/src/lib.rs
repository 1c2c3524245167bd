//! # mballoc
//!
//! The Linux ext4 multi-block allocator (mballoc, as in Linux 6.18), rebuilt as a thread-safe
//! user-space library: block groups with buddy bitmaps, the criteria passes CR_POWER2_ALIGNED …
//! CR_ANY_FREE, the mb_optimize_scan indexes, goal and stream allocation, request normalisation,
//! inode and per-CPU locality-group preallocation, and frees that become reusable only after
//! commit.
//!
//! ```
//! use mballoc::{Allocator, Geometry, Request};
//!
//! let a = Allocator::new(Geometry::ext4_default(1 << 30)?, &[(0, 5000)])?;
//! let got = a.allocate(&Request::new(12, 0, 256).with_i_size(1 << 20))?;
//! a.free(12, got.extent)?;
//! a.commit()?;
//! # Ok::<(), mballoc::Error>(())
//! ```
//!
//! ## The pipeline
//!
//! A request ([`Request`]) goes through the stages of `ext4_mb_new_blocks`, each a module of
//! `alloc/`:
//!
//! 1. **Entry** (`new_blocks`): validation, the claim on the free count, the allocation
//!    context (`context`).
//! 2. **Normalisation** (`normalize`): group or file, and the window to search for.
//! 3. **Preallocations** (`prealloc`): a hit in the owner's inode PA or the CPU's locality
//!    group ends the request; otherwise what the search finds beyond the request becomes a new
//!    PA, and PAs go back on discard, on a free that meets them and on ENOSPC.
//! 4. **Criteria** (`criteria`): the goal try, the size-class stages, then the passes
//!    CR_POWER2_ALIGNED … CR_ANY_FREE choose the groups to visit, with bitmap prefetch.
//! 5. **Scan** (`scan`): one group, gated without and with its lock, searched simply, aligned
//!    or completely; each extent found is weighed by **best found** (`best_found`).
//! 6. **Marking**: the blocks become used on disk, in the journal when a [`store`] is
//!    attached.
//!
//! Frees ([`Allocator::free`]) clear the disk bitmap at once; the blocks return to the buddy
//! after [`Allocator::commit`]. Underneath: `group/` (a group's bitmap, buddy, state and the scan
//! indexes), `load/` (where bitmaps come from: a [`BitmapSource`], readahead, the cache bound,
//! corrupt groups, a durable store), [`store`] (the durable format), `sync/` (the primitives the
//! model checkers swap in). Settings: [`Tunables`] and the [`Policy`] presets.
//!
//! ## Features
//!
//! * `testing`: the module `testing` (entry points for the fuzz targets and their corpus
//!   test) and test hooks (`Allocator::hold_group_lock`, `Builder::load_cost`). Off by
//!   default; the crate's own tests and `fuzz/` turn it on.
//! * `aggressive-check`: after every change of a group, the whole buddy against a
//!   regeneration and the group's bitmap, free counts, pending frees and preallocations against
//!   each other (the kernel's `AGGRESSIVE_CHECK`); slow, for the model-based tests.

#![warn(missing_docs)]

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
#[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
pub use sync::vcpu;

#[cfg(feature = "testing")]
pub mod testing;

#[cfg(feature = "testing")]
pub use alloc::GroupLockHold;
#[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
pub use alloc::GroupLockSpan;
pub use alloc::{Allocator, Builder, SharedAllocator};
pub use error::Error;
pub use geometry::{Geometry, GeometryError};
pub use group::bitmap::Bitmap;
pub use group::size_class::SizeClass;
pub use load::source::{BitmapSource, MemSource};
pub use policy::{apply_settings, Policy};
pub use request::{
    Allocation, Criterion, Extent, Flags, FreeFlags, GroupExtent, NewPa, PaKind, Request, Source,
};
pub use stats::{GroupSnapshot, StatsSnapshot};
pub use tunables::{possible_cpus, KernelFlavor, Tunables};
