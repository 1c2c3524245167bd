//! offset-allocator (TLSF-like, O(1), frees by handle): the raw-speed reference of the churn.

use offset_allocator::{Allocation, Allocator};

use crate::bench::peer::{RangeAlloc, Runs};
use crate::bench::BenchError;

pub struct OffsetPeer {
    a: Allocator<u32>,
}

impl OffsetPeer {
    /// `max_allocs` sizes the node pool; the churn keeps ~50k live, so 1M never runs
    /// out.
    pub fn new(size: u32, max_allocs: u32) -> OffsetPeer {
        OffsetPeer {
            a: Allocator::with_max_allocs(size, max_allocs),
        }
    }
}

impl RangeAlloc for OffsetPeer {
    type Handle = (Allocation<u32>, u32);
    fn name(&self) -> String {
        "offset-allocator".into()
    }
    fn alloc(&mut self, len: u32, _goal: u64) -> Result<Option<Self::Handle>, BenchError> {
        Ok(self.a.allocate(len).map(|h| (h, len)))
    }
    fn runs(&self, h: &Self::Handle) -> Runs {
        Runs::one(u64::from(h.0.offset), h.1)
    }
    fn free(&mut self, h: Self::Handle) -> Result<(), BenchError> {
        self.a.free(h.0);
        Ok(())
    }
}
