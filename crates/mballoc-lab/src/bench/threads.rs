//! Thread scaling on W1 (will-it-scale fallocate2, workloads-and-metrics §6): every thread owns
//! a private 256-block file that it fills 2 blocks at a time, each request aimed at the
//! physical end of the file's last extent, and frees whole (a truncate, then a journal commit)
//! when full. Driven directly on one shared [`Allocator`]; the figure is allocations per second
//! per thread, for 1, 2, … threads under linux-6.16 and linux-6.18.
//!
//! Beside them, the machine's own ceiling: the same threads, each on an allocator of its own
//! (linux-6.18), so nothing is shared but the machine. On a small VM two "cores" rarely give
//! twice the work of one; the shared figure is best read against this one, measured in the
//! same run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mballoc::{Allocator, Extent, Geometry, Policy, Request};
use serde::Serialize;

use super::BenchError;

/// W1's parameters.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadsConfig {
    /// Blocks per file (`FILE`).
    pub file_blocks: u32,
    /// Blocks per request (`CHUNK`).
    pub chunk: u32,
    /// Filesystem size in bytes.
    pub fs_bytes: u64,
    /// Measured time per point.
    pub seconds: f64,
    pub threads: Vec<u32>,
}

impl ThreadsConfig {
    pub fn full() -> ThreadsConfig {
        ThreadsConfig {
            file_blocks: 256,
            chunk: 2,
            fs_bytes: 16 << 30,
            seconds: 1.0,
            threads: thread_counts(),
        }
    }
    pub fn quick() -> ThreadsConfig {
        ThreadsConfig {
            fs_bytes: 1 << 30,
            seconds: 0.05,
            ..ThreadsConfig::full()
        }
    }
}

/// 1, 2, then powers of two up to this machine's parallelism, and that number itself.
pub fn thread_counts() -> Vec<u32> {
    let n = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
    let mut v = vec![1, 2];
    let mut t = 4;
    while t < n {
        v.push(t);
        t *= 2;
    }
    if n > 2 {
        v.push(n);
    }
    v
}

/// One thread's private file: its extents and the next logical block.
struct File {
    owner: u64,
    extents: Vec<Extent>,
    place: u32,
}

impl File {
    /// The next W1 request: `chunk` blocks at `place`, aimed after the last extent.
    fn request(&self, chunk: u32, cpu: u32, bs: u64) -> Request {
        let mut r = Request::new(self.owner, self.place, chunk)
            .with_cpu(cpu)
            .with_i_size(u64::from(self.place + chunk) * bs);
        if let Some(last) = self.extents.last() {
            r = r
                .with_goal(last.end())
                .with_left(self.place - 1, last.end() - 1);
        }
        r
    }

    fn add(&mut self, e: Extent) {
        self.place += e.len;
        match self.extents.last_mut() {
            Some(l) if l.end() == e.start => l.len += e.len,
            _ => self.extents.push(e),
        }
    }

    /// Truncate to 0: free every extent, drop the PAs, commit.
    fn truncate(&mut self, a: &Allocator) -> Result<(), BenchError> {
        for e in self.extents.drain(..) {
            a.free(self.owner, e)?;
        }
        a.discard_preallocations(self.owner);
        a.commit()?;
        self.place = 0;
        Ok(())
    }
}

/// Runs W1 with one thread per entry of `allocs` (the same allocator repeated, or one each)
/// for `seconds`; returns the total allocations.
fn run_point(allocs: &[&Allocator], cfg: &ThreadsConfig) -> Result<u64, BenchError> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0u32..)
            .zip(allocs)
            .map(|(t, &a)| {
                let stop = &stop;
                let bs = u64::from(a.geometry().block_size());
                s.spawn(move || -> Result<u64, BenchError> {
                    let mut f = File {
                        owner: 1000 + u64::from(t),
                        extents: Vec::new(),
                        place: 0,
                    };
                    let mut ops = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let got = a.allocate(&f.request(cfg.chunk, t, bs))?;
                        f.add(got.extent);
                        ops += 1;
                        if f.place >= cfg.file_blocks {
                            f.truncate(a)?;
                        }
                    }
                    f.truncate(a)?;
                    Ok(ops)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(cfg.seconds));
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(BenchError::Peer("W1 thread panicked".into())))
            })
            .sum()
    })
}

/// One (policy, thread count) point.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadsPoint {
    pub system: String,
    pub policy: String,
    pub threads: u32,
    /// Median over runs of allocations per second, all threads together.
    pub ops_per_s: f64,
    pub ops_per_s_per_thread: f64,
    /// ns per allocation per thread (`1e9 / ops_per_s_per_thread`).
    pub ns_per_op: f64,
    /// `ops_per_s(T) / (T · ops_per_s(1))` (will-it-scale's scalability).
    pub scalability: f64,
    pub runs_ops_per_s: Vec<f64>,
    /// This point's `ns_per_op` over every other point's.
    pub ratio_vs: std::collections::BTreeMap<String, f64>,
}

/// The thread-scaling report.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadsReport {
    pub config: ThreadsConfig,
    pub runs: u32,
    pub points: Vec<ThreadsPoint>,
    /// `ops/s per thread` at 2 threads over 1 thread, per policy.
    pub two_vs_one: std::collections::BTreeMap<String, f64>,
    /// linux-6.18 over linux-6.16 per-thread rate, per thread count.
    pub v618_vs_v616: std::collections::BTreeMap<u32, f64>,
    /// The machine's ceiling per thread count above 1: the per-thread rate of that many
    /// threads on allocators of their own (linux-6.18) over one thread's on a shared one.
    pub ceiling: std::collections::BTreeMap<u32, f64>,
    /// Runs (allocations per second, all threads together) behind `ceiling`.
    pub ceiling_runs_ops_per_s: std::collections::BTreeMap<u32, Vec<f64>>,
}

/// Runs W1 for every policy and thread count, `runs` times each (interleaved).
pub fn run_threads(cfg: &ThreadsConfig, runs: u32) -> Result<ThreadsReport, BenchError> {
    let policies = [Policy::Linux616, Policy::Linux618];
    let geo = Geometry::ext4_default(cfg.fs_bytes)?;
    let keys: Vec<(Policy, u32)> = policies
        .iter()
        .flat_map(|&p| cfg.threads.iter().map(move |&t| (p, t)))
        .collect();
    let cpus = cfg.threads.iter().copied().max().unwrap_or(1);
    let build = |p: Policy| -> Result<Allocator, BenchError> {
        Ok(Allocator::builder(geo)
            .cpus(cpus)
            .tunables(p.tunables(&geo, cpus))
            .build()?)
    };
    let timed = |allocs: &[&Allocator]| -> Result<f64, BenchError> {
        let t0 = Instant::now();
        let ops = run_point(allocs, cfg)?;
        Ok(ops as f64 / t0.elapsed().as_secs_f64())
    };
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); keys.len()];
    let mut own: std::collections::BTreeMap<u32, Vec<f64>> = Default::default();
    for _ in 0..runs.max(1) {
        for (i, &(p, t)) in keys.iter().enumerate() {
            let a = build(p)?;
            rates[i].push(timed(&vec![&a; t as usize])?);
        }
        for &t in cfg.threads.iter().filter(|&&t| t > 1) {
            let each: Vec<Allocator> = (0..t)
                .map(|_| build(Policy::Linux618))
                .collect::<Result<_, _>>()?;
            let refs: Vec<&Allocator> = each.iter().collect();
            own.entry(t).or_default().push(timed(&refs)?);
        }
    }
    let mut points: Vec<ThreadsPoint> = keys
        .iter()
        .zip(&rates)
        .map(|(&(p, t), r)| {
            let total = super::median(r);
            let per = total / f64::from(t);
            ThreadsPoint {
                system: format!("mballoc/{} x{t}", p.name()),
                policy: p.name().into(),
                threads: t,
                ops_per_s: total,
                ops_per_s_per_thread: per,
                ns_per_op: if per > 0.0 { 1e9 / per } else { 0.0 },
                scalability: 0.0,
                runs_ops_per_s: r.iter().map(|v| v.round()).collect(),
                ratio_vs: Default::default(),
            }
        })
        .collect();
    let per = |pts: &[ThreadsPoint], pol: &str, t: u32| {
        pts.iter()
            .find(|q| q.policy == pol && q.threads == t)
            .map_or(0.0, |q| q.ops_per_s_per_thread)
    };
    let snapshot = points.clone();
    for q in &mut points {
        let one = per(&snapshot, &q.policy, 1);
        q.scalability = if one > 0.0 {
            q.ops_per_s_per_thread / one
        } else {
            0.0
        };
    }
    super::fill_ratios(
        &mut points,
        |q| (&q.system, q.ns_per_op),
        |q| &mut q.ratio_vs,
    );
    let two_vs_one = policies
        .iter()
        .map(|p| {
            let (one, two) = (per(&points, p.name(), 1), per(&points, p.name(), 2));
            (
                p.name().to_string(),
                if one > 0.0 { two / one } else { 0.0 },
            )
        })
        .collect();
    let v618_vs_v616 = cfg
        .threads
        .iter()
        .map(|&t| {
            let (old, new) = (per(&points, "linux-6.16", t), per(&points, "linux-6.18", t));
            (t, if old > 0.0 { new / old } else { 0.0 })
        })
        .collect();
    let one = per(&points, Policy::Linux618.name(), 1);
    let ceiling = own
        .iter()
        .map(|(&t, r)| {
            let per_thread = super::median(r) / f64::from(t);
            (t, if one > 0.0 { per_thread / one } else { 0.0 })
        })
        .collect();
    Ok(ThreadsReport {
        config: cfg.clone(),
        runs: runs.max(1),
        points,
        two_vs_one,
        v618_vs_v616,
        ceiling,
        ceiling_runs_ops_per_s: own
            .into_iter()
            .map(|(t, r)| (t, r.iter().map(|v| v.round()).collect()))
            .collect(),
    })
}
