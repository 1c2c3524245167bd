//! What one task saw of the allocator: wall time of every allocation call (M3, the analogue of
//! fsperf's `find_free_extent` latency), groups scanned, and which groups it changed (so the
//! metrics can read only those back from the allocator and take the rest from the initial
//! layout, which keeps a 16 TiB file system lazy).

use std::collections::HashSet;

use mballoc::{Allocation, Extent, Geometry, Request};

/// Per-task counters. Merge the tasks' recorders with [`Recorder::merge`] at the end.
#[derive(Debug, Default, Clone)]
pub struct Recorder {
    /// ns per `Allocator::allocate` call, in call order.
    pub latencies_ns: Vec<u64>,
    /// Allocation calls that returned blocks.
    pub calls: u64,
    /// Σ `groups_scanned` of those calls.
    pub groups_scanned: u64,
    /// Blocks allocated.
    pub blocks_allocated: u64,
    /// Blocks freed.
    pub blocks_freed: u64,
    /// Commits forced by ENOSPC before a retry.
    pub enospc_commits: u64,
    /// Extent-tree blocks allocated (leaves and index blocks).
    pub tree_blocks: u64,
    /// Requests answered from a preallocation.
    pub prealloc_hits: u64,
    /// Groups whose on-disk bitmap this task changed.
    pub touched: HashSet<u32>,
    /// Every request with its answer, when [`Recorder::logging`] was asked for (tests, traces).
    pub log: Option<Vec<(Request, Extent)>>,
}

impl Recorder {
    /// A recorder that also keeps every request and its answer.
    pub fn logging() -> Recorder {
        Recorder {
            log: Some(Vec::new()),
            ..Recorder::default()
        }
    }

    pub(crate) fn allocated(&mut self, geo: &Geometry, req: &Request, a: &Allocation, ns: u64) {
        if let Some(log) = &mut self.log {
            log.push((req.clone(), a.extent));
        }
        self.latencies_ns.push(ns);
        self.calls += 1;
        self.groups_scanned += u64::from(a.groups_scanned);
        self.blocks_allocated += u64::from(a.extent.len);
        if a.source == mballoc::Source::Prealloc {
            self.prealloc_hits += 1;
        }
        self.touch(geo, a.extent.start, u64::from(a.extent.len));
    }

    pub(crate) fn freed(&mut self, geo: &Geometry, start: u64, len: u64) {
        self.blocks_freed += len;
        self.touch(geo, start, len);
    }

    fn touch(&mut self, geo: &Geometry, start: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (first, _) = geo.locate(start);
        let (last, _) = geo.locate(start + len - 1);
        for g in first..=last {
            self.touched.insert(g);
        }
    }

    /// Adds `other`'s counters to this one (latencies appended in order).
    pub fn merge(&mut self, other: Recorder) {
        self.latencies_ns.extend(other.latencies_ns);
        self.calls += other.calls;
        self.groups_scanned += other.groups_scanned;
        self.blocks_allocated += other.blocks_allocated;
        self.blocks_freed += other.blocks_freed;
        self.enospc_commits += other.enospc_commits;
        self.prealloc_hits += other.prealloc_hits;
        self.tree_blocks += other.tree_blocks;
        self.touched.extend(other.touched);
        if let (Some(mine), Some(theirs)) = (&mut self.log, other.log) {
            mine.extend(theirs);
        }
    }
}
