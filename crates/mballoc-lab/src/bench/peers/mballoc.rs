//! mballoc itself as a churn peer: owner-less, direct, one-extent requests.
//!
//! Request shape, and why: `HINT_DATA | HINT_NOPREALLOC` with the request as a whole closed
//! file (`logical 0`, `i_size = len` blocks, not open for write). ext4's group-or-file decision
//! then neither streams nor creates an inode preallocation ("a closed file's last extent"), and
//! normalisation returns at once on `HINT_NOPREALLOC`, so exactly `len` blocks are searched for
//! and no preallocation is ever left behind: the comparison with exact-size allocators is fair.
//! The goal is the end of the previous allocation, like libext2fs's next-fit (others ignore it).
//!
//! Frees become reusable only after a commit; the peer commits after every `commit_every`
//! frees, like a journal commit every few dozen operations.

use mballoc::{Allocator, Error, Extent, Flags, Geometry, Policy, Request};

use crate::bench::peer::{RangeAlloc, Run, Runs};
use crate::bench::BenchError;

/// The owner number used for every request (no per-owner state is kept for it).
pub const OWNER: u64 = 11;

pub struct MballocPeer {
    a: Allocator,
    policy: Policy,
    commit_every: u32,
    since_commit: u32,
}

/// The churn's request for `len` blocks at `goal` (wrapped into the filesystem): owner
/// [`OWNER`], a closed file of exactly `len` blocks, `HINT_DATA | HINT_NOPREALLOC` (see the
/// module doc for why).
pub fn request(geo: &Geometry, len: u32, goal: u64) -> Request {
    Request::new(OWNER, 0, len)
        .with_goal(goal % geo.blocks_count())
        .with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC)
        .with_i_size(u64::from(len) * u64::from(geo.block_size()))
        .with_open_for_write(false)
}

impl MballocPeer {
    /// A filesystem of `geo` with nothing in use, under `policy` with `settings` on top, for
    /// `cpus` CPUs.
    pub fn new(
        geo: Geometry,
        policy: Policy,
        cpus: u32,
        commit_every: u32,
        settings: &[String],
    ) -> Result<MballocPeer, BenchError> {
        let a = Allocator::builder(geo)
            .cpus(cpus)
            .tunables(crate::bench::tunables(policy, &geo, cpus, settings)?)
            .build()?;
        Ok(MballocPeer {
            a,
            policy,
            commit_every: commit_every.max(1),
            since_commit: 0,
        })
    }

    pub fn allocator(&self) -> &Allocator {
        &self.a
    }

    /// Frees what a failed multi-extent allocation already took.
    fn undo<'a>(&mut self, got: impl Iterator<Item = &'a Run>) -> Result<(), BenchError> {
        for &(s, l) in got {
            self.a.free(OWNER, Extent::new(s, l))?;
        }
        Ok(())
    }
}

impl RangeAlloc for MballocPeer {
    type Handle = Runs;
    fn name(&self) -> String {
        format!("mballoc/{}", self.policy.name())
    }
    fn alloc(&mut self, len: u32, goal: u64) -> Result<Option<Runs>, BenchError> {
        let mut first = None;
        let mut more: Vec<Run> = Vec::new();
        let (mut left, mut goal) = (len, goal);
        while left > 0 {
            match self.a.allocate(&request(self.a.geometry(), left, goal)) {
                Ok(r) => {
                    let run = (r.extent.start, r.extent.len);
                    match first {
                        None => first = Some(run),
                        Some(_) => more.push(run),
                    }
                    left -= r.extent.len;
                    goal = r.extent.end();
                }
                Err(Error::NoSpace { .. }) => {
                    self.undo(first.iter().chain(&more))?;
                    return Ok(None);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(first.map(|first| Runs { first, more }))
    }
    fn runs(&self, h: &Runs) -> Runs {
        h.clone()
    }
    fn free(&mut self, h: Runs) -> Result<(), BenchError> {
        for (s, l) in h.iter() {
            self.a.free(OWNER, Extent::new(s, l))?;
        }
        self.since_commit += 1;
        if self.since_commit >= self.commit_every {
            self.a.commit()?;
            self.since_commit = 0;
        }
        Ok(())
    }
    fn settle(&mut self) {
        // An in-memory allocator's commit has nothing that can fail (no store attached).
        let _ = self.a.commit();
        self.since_commit = 0;
    }
    fn free_runs(&mut self) -> Option<Vec<Run>> {
        self.a.commit().ok()?;
        let geo = *self.a.geometry();
        let mut out = Vec::new();
        for g in 0..geo.group_count() {
            for (s, l) in self.a.free_extents(g).ok()? {
                out.push((geo.block_of(g, s), l));
            }
        }
        Some(out)
    }
}
