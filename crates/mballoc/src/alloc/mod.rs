//! The allocator and its request path, stage by stage: a request enters at `new_blocks`
//! (`ext4_mb_new_blocks`), gets an allocation `context`, is `normalize`d, is served from an
//! existing preallocation if one covers it (`prealloc`), else the `criteria` passes choose
//! groups that `scan` visits, keeping the `best_found` extent; what is left over becomes a new
//! preallocation. Frees, commits and discards come back through `free` and `prealloc`.

pub(crate) mod allocator;
pub(crate) mod best_found;
pub(crate) mod context;
pub(crate) mod criteria;
pub(crate) mod free;
pub(crate) mod journal;
pub(crate) mod loading;
pub(crate) mod new_blocks;
pub(crate) mod normalize;
pub(crate) mod prealloc;
pub(crate) mod scan;

#[cfg(feature = "testing")]
pub use allocator::GroupLockHold;
#[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
pub use allocator::GroupLockSpan;
pub use allocator::{Allocator, Builder, SharedAllocator};
