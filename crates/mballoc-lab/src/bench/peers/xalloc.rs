//! xalloc's `SysTlsf<u32>` (good-fit TLSF over an external space, frees by region handle).

use xalloc::{SysTlsf, SysTlsfRegion};

use crate::bench::peer::{RangeAlloc, Runs};
use crate::bench::BenchError;

pub struct XallocPeer {
    a: SysTlsf<u32>,
}

impl XallocPeer {
    pub fn new(size: u32, capacity: usize) -> XallocPeer {
        XallocPeer {
            a: SysTlsf::with_capacity(size, capacity),
        }
    }
}

impl RangeAlloc for XallocPeer {
    type Handle = (SysTlsfRegion, u32, u32);
    fn name(&self) -> String {
        "xalloc".into()
    }
    fn alloc(&mut self, len: u32, _goal: u64) -> Result<Option<Self::Handle>, BenchError> {
        Ok(self.a.alloc(len).map(|(r, off)| (r, off, len)))
    }
    fn runs(&self, h: &Self::Handle) -> Runs {
        Runs::one(u64::from(h.1), h.2)
    }
    fn free(&mut self, h: Self::Handle) -> Result<(), BenchError> {
        self.a
            .dealloc(h.0)
            .map_err(|_| BenchError::Peer(format!("xalloc: foreign region at {}", h.1)))
    }
}
