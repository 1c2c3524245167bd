//! The churn benchmark's floor: what one free + allocate pair costs mballoc when the search
//! costs nothing.
//!
//! Why: the churn goal asks for offset-allocator's speed. This measures the part of a pair no
//! search can remove — request set-up, the goal check, buddy and bitmap edits, the checked
//! free, its journal entry and the commit that returns it — by allocating, in the same
//! churn, exactly an extent known to be free (one released by an earlier commit) with its
//! start as the goal and `HINT_TRY_GOAL`, so every request is served by
//! `ext4_mb_find_by_goal` (the run counts the requests that scanned no group). The normal churn
//! (the benchmark's seeded stream and request) runs in the same process on the same loop for
//! comparison, and offset-allocator on `bench churn`'s own loop for the ratio the goal is
//! stated in.
//!
//! `cargo run --release -p mballoc-lab --example churn_floor -- [POLICY] [--quick] [--runs N]
//! [--floor-only]` (`--floor-only` for profiling the floor alone)
use std::collections::VecDeque;
use std::time::Instant;

use mballoc::{Allocator, Extent, Flags, Geometry, Policy};
use mballoc_lab::bench::churn::{churn_once, ChurnConfig};
use mballoc_lab::bench::peers::mballoc::{request, OWNER};
use mballoc_lab::bench::peers::offset::OffsetPeer;
use mballoc_lab::bench::rng::Rng;

/// Mode of one run: the churn's own goals, or a goal that is always free.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Churn,
    Floor,
}

struct Loop {
    a: Allocator,
    mode: Mode,
    rng: Rng,
    live: Vec<(u64, u32)>,
    /// Extents freed since the last commit (not allocatable yet).
    pending: Vec<(u64, u32)>,
    /// Extents a commit has made allocatable and nothing has taken since (floor only).
    ready: VecDeque<(u64, u32)>,
    since_commit: u32,
    goal: u64,
    /// Requests served without scanning a group (by `ext4_mb_find_by_goal`).
    unscanned: u64,
}

impl Loop {
    fn new(
        policy: Policy,
        mode: Mode,
        cfg: &ChurnConfig,
    ) -> Result<Loop, Box<dyn std::error::Error>> {
        let geo = Geometry::new(4096, cfg.per_group, cfg.size, 0, 16)?;
        let a = Allocator::builder(geo)
            .cpus(1)
            .tunables(policy.tunables(&geo, 1))
            .build()?;
        Ok(Loop {
            a,
            mode,
            rng: Rng::new(cfg.seed),
            live: Vec::with_capacity(cfg.prefill as usize + 1),
            pending: Vec::new(),
            ready: VecDeque::new(),
            since_commit: 0,
            goal: 0,
            unscanned: 0,
        })
    }

    /// The churn peer's request (`bench::peers::mballoc::request`): exact, never
    /// preallocated. `try_goal` adds `HINT_TRY_GOAL`: the goal block itself is tried first.
    fn alloc(
        &mut self,
        len: u32,
        goal: u64,
        try_goal: bool,
    ) -> Result<(u64, u32), Box<dyn std::error::Error>> {
        let mut req = request(self.a.geometry(), len, goal);
        if try_goal {
            req.flags |= Flags::HINT_TRY_GOAL;
        }
        let r = self.a.allocate(&req)?;
        if r.extent.len != len {
            return Err(format!("asked {len} blocks, got {}", r.extent.len).into());
        }
        self.unscanned += u64::from(r.groups_scanned == 0);
        self.goal = r.extent.end();
        Ok((r.extent.start, r.extent.len))
    }

    fn free(&mut self, e: (u64, u32), every: u32) -> Result<(), mballoc::Error> {
        self.a.free(OWNER, Extent::new(e.0, e.1))?;
        self.pending.push(e);
        self.since_commit += 1;
        if self.since_commit >= every {
            self.a.commit()?;
            if self.mode == Mode::Floor {
                self.ready.extend(self.pending.drain(..));
            }
            self.pending.clear();
            self.since_commit = 0;
        }
        Ok(())
    }

    /// One pair: free a random live extent, then allocate (churn: a random length at the end
    /// of the previous allocation; floor: the oldest extent a commit made free, at its start).
    /// Out of line so a profiler can count the pairs alone
    /// (`valgrind --tool=callgrind --toggle-collect='*Loop::pair*'`).
    #[inline(never)]
    fn pair(&mut self, cfg: &ChurnConfig) -> Result<(), Box<dyn std::error::Error>> {
        let i = self.rng.below(self.live.len() as u64) as usize;
        let e = self.live.swap_remove(i);
        self.free(e, cfg.commit_every)?;
        let len = self.rng.range_inclusive(1, cfg.max_len);
        let got = match self.ready.pop_front() {
            Some((start, n)) => self.alloc(n, start, true)?,
            None => self.alloc(len, self.goal, false)?,
        };
        self.live.push(got);
        Ok(())
    }
}

fn run(
    policy: Policy,
    mode: Mode,
    cfg: &ChurnConfig,
) -> Result<(f64, u64), Box<dyn std::error::Error>> {
    let mut l = Loop::new(policy, mode, cfg)?;
    for _ in 0..cfg.prefill {
        let len = l.rng.range_inclusive(1, cfg.max_len);
        let got = l.alloc(len, l.goal, false)?;
        l.live.push(got);
    }
    l.unscanned = 0;
    let t = Instant::now();
    for _ in 0..cfg.pairs {
        l.pair(cfg)?;
    }
    let ns = t.elapsed().as_nanos() as f64 / f64::from(cfg.pairs);
    Ok((ns, l.unscanned))
}

/// The median (NaN for no runs).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = if args.iter().any(|a| a == "--quick") {
        ChurnConfig::quick()
    } else {
        ChurnConfig::full()
    };
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .map_or(Ok(5), |s| s.parse::<usize>())?;
    let policy = args
        .iter()
        .find(|a| !a.starts_with("--") && a.parse::<usize>().is_err())
        .map_or(Ok(Policy::Linux618), |s| Policy::from_name(s))?;
    let floor_only = args.iter().any(|a| a == "--floor-only");
    let (mut churn, mut floor, mut offset) = (Vec::new(), Vec::new(), Vec::new());
    let mut hits = (0, 0);
    for _ in 0..runs.max(1) {
        if !floor_only {
            let (ns, h) = run(policy, Mode::Churn, &cfg)?;
            churn.push(ns);
            hits.0 = h;
        }
        let (ns, h) = run(policy, Mode::Floor, &cfg)?;
        floor.push(ns);
        hits.1 = h;
        if !floor_only {
            let mut peer = OffsetPeer::new(u32::try_from(cfg.size)?, 1 << 20);
            offset.push(churn_once(&mut peer, &cfg)?.ns_per_pair);
        }
    }
    let (c, f, o) = (median(churn), median(floor), median(offset));
    println!(
        "policy {policy}, {} pairs, medians of {} alternating runs",
        cfg.pairs, runs
    );
    println!(
        "churn: {c:.0} ns/pair, served without a scan: {} of {}",
        hits.0, cfg.pairs
    );
    println!(
        "floor: {f:.0} ns/pair, served without a scan: {} of {}",
        hits.1, cfg.pairs
    );
    println!("offset-allocator churn: {o:.0} ns/pair");
    println!(
        "floor / churn: {:.2}; floor / offset-allocator: {:.2}",
        f / c,
        f / o
    );
    Ok(())
}
