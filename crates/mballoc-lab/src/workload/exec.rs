//! Running tasks: real OS threads sharing the allocator, a deterministic scheduler for
//! concurrent jobs on simulated time, and will-it-scale's sampling loop for throughput.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::error::LabError;
use super::Progress;
use crate::fs::{File, Fs, Recorder, Task};
use crate::metrics::throughput::{wis_throughput, Throughput, WisConfig};

/// Runs `f(i)` for `i in 0..n` on `n` scoped threads; the first error wins; a panicking worker
/// becomes an error naming the workload.
pub fn threads<T: Send>(
    workload: &str,
    n: usize,
    f: impl Fn(usize) -> Result<T, LabError> + Sync,
) -> Result<Vec<T>, LabError> {
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..n).map(|i| s.spawn(move || f(i))).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|p| {
                    Err(LabError::WorkerPanicked {
                        workload: workload.to_string(),
                        message: p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default(),
                    })
                })
            })
            .collect()
    })
}

/// One concurrent job of a workload (a fio job, a will-it-scale task): a sequence of I/Os on
/// its own simulated clock.
pub trait Job: Send {
    /// Simulated time (µs) of the next I/O; `None` once the job is done.
    fn next_at(&self) -> Option<u64>;
    /// Performs the next I/O and advances the clock.
    fn step(&mut self, t: &mut Task) -> Result<(), LabError>;
    /// The CPU this job runs on.
    fn cpu(&self) -> u32;
    /// Files the job leaves behind.
    fn into_files(self: Box<Self>) -> Vec<File>;
    /// Whether its steps are the workload's operations (counted in `ops`); a job that only
    /// keeps time for the others (a journal's commits) says no.
    fn counts_ops(&self) -> bool {
        true
    }
}

/// What a set of jobs produced.
pub struct JobsOutcome {
    pub rec: Recorder,
    pub files: Vec<File>,
    pub ops: u64,
    /// Latest simulated time reached (µs).
    pub sim_us: u64,
}

/// Runs `jobs` on `n_threads` threads. Each thread owns the jobs `i % n_threads == thread` and
/// always runs the one whose clock is earliest (ties: lowest index), so with one thread the
/// interleaving is fixed by the jobs alone; with more, the threads race for real.
pub fn run_jobs(
    workload: &str,
    fs: &Fs,
    jobs: Vec<Box<dyn Job>>,
    n_threads: usize,
    progress: &dyn Progress,
) -> Result<JobsOutcome, LabError> {
    let n_threads = n_threads.clamp(1, jobs.len().max(1));
    let mut buckets: Vec<Vec<Box<dyn Job>>> = (0..n_threads).map(|_| Vec::new()).collect();
    for (i, j) in jobs.into_iter().enumerate() {
        buckets[i % n_threads].push(j);
    }
    let buckets: Vec<std::sync::Mutex<Vec<Box<dyn Job>>>> =
        buckets.into_iter().map(std::sync::Mutex::new).collect();
    let parts = threads(workload, n_threads, |i| {
        let mine = std::mem::take(&mut *buckets[i].lock().unwrap_or_else(|e| e.into_inner()));
        run_bucket(mine, fs.task(0), progress)
    })?;
    let mut out = JobsOutcome {
        rec: Recorder::default(),
        files: Vec::new(),
        ops: 0,
        sim_us: 0,
    };
    for p in parts {
        out.rec.merge(p.rec);
        out.files.extend(p.files);
        out.ops += p.ops;
        out.sim_us = out.sim_us.max(p.sim_us);
    }
    Ok(out)
}

fn run_bucket(
    mut jobs: Vec<Box<dyn Job>>,
    mut t: Task<'_>,
    progress: &dyn Progress,
) -> Result<JobsOutcome, LabError> {
    let (mut ops, mut sim_us, mut pending) = (0u64, 0u64, 0u64);
    loop {
        let next = jobs
            .iter()
            .enumerate()
            .filter_map(|(i, j)| j.next_at().map(|at| (at, i)))
            .min();
        let Some((at, i)) = next else { break };
        sim_us = sim_us.max(at);
        t.cpu = jobs[i].cpu();
        jobs[i].step(&mut t)?;
        if !jobs[i].counts_ops() {
            continue;
        }
        ops += 1;
        pending += 1;
        if pending == 256 {
            progress.inc(pending);
            pending = 0;
        }
    }
    progress.inc(pending);
    let files = jobs.into_iter().flat_map(|j| j.into_files()).collect();
    Ok(JobsOutcome {
        rec: t.rec,
        files,
        ops,
        sim_us,
    })
}

/// will-it-scale's sampling: `warmup` + `measured` samples of `interval` each.
#[derive(Debug, Clone, Copy)]
pub struct Sampling {
    pub interval: Duration,
    pub warmup: usize,
    pub measured: usize,
}

impl Sampling {
    /// 1 s samples, 6 warm-up, 5 measured (will-it-scale -s 5); laptop scale: 0.2 s, 2, 5.
    pub fn for_scale(quick: bool, duration_s: Option<f64>, warmup_s: Option<f64>) -> Sampling {
        let interval = if quick {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(1)
        };
        let secs = interval.as_secs_f64();
        let count = |s: f64| ((s / secs).round() as usize).max(1);
        Sampling {
            interval,
            // A warm-up of 0 s asks for none; any other rounds to at least one sample.
            warmup: warmup_s.map_or(if quick { 2 } else { 6 }, |s| {
                if s == 0.0 {
                    0
                } else {
                    count(s)
                }
            }),
            measured: duration_s.map_or(5, count),
        }
    }
}

/// Runs `body(i, stop, counter)` on `n` threads while sampling their counters; returns M1 and
/// the per-task results.
pub fn timed<T: Send>(
    workload: &str,
    n: usize,
    s: Sampling,
    progress: &dyn Progress,
    body: impl Fn(usize, &AtomicBool, &AtomicU64) -> Result<T, LabError> + Sync,
) -> Result<(Throughput, Vec<T>), LabError> {
    let counters: Vec<Padded> = (0..n).map(|_| Padded::default()).collect();
    let stop = AtomicBool::new(false);
    let samples = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            progress.start(workload, (s.warmup + s.measured) as u64);
            let mut rows = Vec::with_capacity(s.warmup + s.measured);
            let mut prev = vec![0u64; n];
            let mut next = Instant::now() + s.interval;
            for _ in 0..s.warmup + s.measured {
                if stop.load(Ordering::Relaxed) {
                    break; // a worker failed
                }
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                next += s.interval;
                let now: Vec<u64> = counters
                    .iter()
                    .map(|c| c.0.load(Ordering::Relaxed))
                    .collect();
                rows.push(
                    now.iter()
                        .zip(&prev)
                        .map(|(a, b)| a - b)
                        .collect::<Vec<u64>>(),
                );
                prev = now;
                progress.inc(1);
            }
            stop.store(true, Ordering::Relaxed);
            progress.finish();
            rows
        });
        let res = threads(workload, n, |i| body(i, &stop, &counters[i].0));
        stop.store(true, Ordering::Relaxed);
        let rows = sampler.join().unwrap_or_default();
        res.map(|r| (rows, r))
    })?;
    let (rows, results) = samples;
    let cfg = WisConfig {
        warmup_samples: s.warmup,
        interval_secs: s.interval.as_secs_f64(),
    };
    Ok((wis_throughput(&rows, &cfg)?, results))
}

/// A counter alone on its cache lines (will-it-scale's 256-byte stride).
#[derive(Default)]
#[repr(align(256))]
struct Padded(AtomicU64);
