//! The one interface every system in a side-by-side benchmark is driven through
//! (reduced to what the churn needs): allocate a run of units near a goal,
//! free what an allocation returned, and say where free space is at the end.
//!
//! Each system keeps its own handle type, because some free by handle (offset-allocator,
//! xalloc) and others by range (mballoc, libext2fs, the bitmap): forcing one representation
//! would charge a lookup to the systems that do not need it.

use crate::bench::BenchError;

/// A run of units `[start, start + len)`.
pub type Run = (u64, u32);

/// A range allocator over `[0, size)` units.
pub trait RangeAlloc {
    /// What `free` needs back.
    type Handle;
    /// The name used in reports (`mballoc/linux-6.18`, `offset-allocator`, …).
    fn name(&self) -> String;
    /// Allocates `len` units, preferably at `goal` (systems without goals ignore it).
    /// `Ok(None)` is "no space"; errors are failures of the system itself.
    fn alloc(&mut self, len: u32, goal: u64) -> Result<Option<Self::Handle>, BenchError>;
    /// The runs an allocation occupies (one for all peers; mballoc may split).
    fn runs(&self, h: &Self::Handle) -> Runs;
    /// Frees an allocation.
    fn free(&mut self, h: Self::Handle) -> Result<(), BenchError>;
    /// Makes frees reusable (mballoc's journal commit); a no-op elsewhere.
    fn settle(&mut self) {}
    /// The system's own view of its free runs, in address order, when it can give one.
    /// `None`: the harness derives free space from its live set instead.
    fn free_runs(&mut self) -> Option<Vec<Run>> {
        None
    }
}

/// The runs of one allocation: the first inline (the common case costs no heap allocation),
/// any further ones on the heap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runs {
    pub first: Run,
    pub more: Vec<Run>,
}

impl Runs {
    pub fn one(start: u64, len: u32) -> Runs {
        Runs {
            first: (start, len),
            more: Vec::new(),
        }
    }
    pub fn count(&self) -> usize {
        1 + self.more.len()
    }
    pub fn iter(&self) -> impl Iterator<Item = Run> + '_ {
        std::iter::once(self.first).chain(self.more.iter().copied())
    }
}
