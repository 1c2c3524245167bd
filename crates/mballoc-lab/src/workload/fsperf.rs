//! The fsperf fragmentation suite (W3–W8): fio jobs that fallocate big short-lived files beside
//! many small long-lived appenders, run as concurrent jobs on simulated time.
//!
//! fio jobs without `stonewall` run at the same time; what decides the layout is how their I/Os
//! interleave. Each job here has its own clock: an I/O costs a modelled service time, then the
//! job's `thinktime`; the scheduler always runs the job whose clock is earliest. The service
//! times are a model **[inferred]**, not a measurement: a fallocate call costs 50 µs + 10 µs
//! per MiB; a buffered write + fdatasync costs 12 ms, chosen so that bufferedappendvsfallocate's
//! 32 appenders span about the 27 s the published run took (`elapsed 27.3`), during which each
//! of its 4 fallocate jobs completes its ≤ 40 loops of 20 s. fio issues only whole `bs` I/Os,
//! so a 1 GiB file in 129 MiB calls gets 7 of them.
//!
//! The whole suite is cheap for the allocator (each test under about 2 s in a release build:
//! at most ~1 M allocation calls), so laptop scale (`quick`) runs the job files as published,
//! on the same 16 GiB file system; `ops=N` caps every job at N I/Os for tests.

use std::time::Instant;

use serde_json::json;

use super::error::LabError;
use super::exec::{run_jobs, Job};
use super::measure::Output;
use super::setup::{build, Env, FsSpec};
use super::{Progress, RunConfig};
use crate::fs::{File, Task};

const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;
const GIB: u64 = 1 << 30;
const SYNC_WRITE_US: u64 = 12_000;

pub const SPEC: FsSpec = FsSpec::sized(16 << 30, 16 << 30);

fn falloc_cost_us(bytes: u64) -> u64 {
    50 + bytes * 10 / MIB
}

/// A fio `ioengine=falloc` job: `loops` × (a `file`-byte file filled by `bs`-byte fallocate
/// calls), unlinked after each loop (and at the end unless `keep_last`).
#[derive(Debug, Clone)]
pub struct FallocSpec {
    pub name: &'static str,
    pub file: u64,
    pub bs: u64,
    pub loops: u64,
    pub think_us: u64,
    pub runtime_us: Option<u64>,
    pub keep_last: bool,
}

/// A fio `ioengine=sync` appender: `writes` buffered `bs`-byte appends, each followed by
/// fdatasync; the file is kept.
#[derive(Debug, Clone)]
pub struct AppendSpec {
    pub name: &'static str,
    pub jobs: u32,
    pub bs: u64,
    pub writes: u64,
    pub think_us: u64,
}

struct FallocJob {
    s: FallocSpec,
    cpu: u32,
    clock: u64,
    loop_i: u64,
    call_i: u64,
    file: Option<File>,
    kept: Option<File>,
}

impl FallocJob {
    fn calls_per_loop(&self) -> u64 {
        (self.s.file / self.s.bs).max(1)
    }
    fn done(&self) -> bool {
        self.loop_i >= self.s.loops || self.s.runtime_us.is_some_and(|r| self.clock >= r)
    }
}

impl Job for FallocJob {
    fn next_at(&self) -> Option<u64> {
        (!self.done()).then_some(self.clock)
    }
    fn step(&mut self, t: &mut Task) -> Result<(), LabError> {
        let f = self.file.get_or_insert_with(|| t.fs.create());
        t.fallocate(f, self.call_i * self.s.bs, self.s.bs, false)?;
        self.call_i += 1;
        self.clock += falloc_cost_us(self.s.bs) + self.s.think_us;
        if self.call_i == self.calls_per_loop() {
            self.call_i = 0;
            self.loop_i += 1;
            let last = self.loop_i == self.s.loops;
            if let Some(f) = self.file.take() {
                if last && self.s.keep_last {
                    self.kept = Some(f);
                } else {
                    t.unlink(f)?;
                }
            }
        }
        if self.done() {
            if let Some(f) = self.file.take() {
                t.unlink(f)?; // fio unlink=1 at the end of a capped job
            }
        }
        Ok(())
    }
    fn cpu(&self) -> u32 {
        self.cpu
    }
    fn into_files(self: Box<Self>) -> Vec<File> {
        self.kept.into_iter().collect()
    }
}

struct AppendJob {
    bs: u64,
    writes: u64,
    think_us: u64,
    cpu: u32,
    clock: u64,
    done: u64,
    file: Option<File>,
}

impl Job for AppendJob {
    fn next_at(&self) -> Option<u64> {
        (self.done < self.writes).then_some(self.clock)
    }
    fn step(&mut self, t: &mut Task) -> Result<(), LabError> {
        let f = self.file.get_or_insert_with(|| t.fs.create());
        let at = f.size;
        t.write_buffered(f, at, self.bs)?;
        t.fsync(f)?;
        self.done += 1;
        self.clock += SYNC_WRITE_US + self.think_us;
        Ok(())
    }
    fn cpu(&self) -> u32 {
        self.cpu
    }
    fn into_files(self: Box<Self>) -> Vec<File> {
        self.file.into_iter().collect()
    }
}

/// One fsperf test: its fallocate jobs and appenders.
#[derive(Debug, Clone)]
pub struct Suite {
    pub falloc: Vec<FallocSpec>,
    pub append: Vec<AppendSpec>,
}

impl Suite {
    /// At most `ops` I/Os per job (`ops=N`): fewer loops or appends, same sizes.
    fn cap(mut self, ops: u64) -> Suite {
        for f in &mut self.falloc {
            let per_loop = (f.file / f.bs).max(1);
            f.loops = f.loops.min(ops.div_ceil(per_loop)).max(1);
        }
        for a in &mut self.append {
            a.writes = a.writes.min(ops);
        }
        self
    }

    /// Bytes live at the worst moment: every appender's file plus every fallocate job's file.
    fn footprint(&self) -> u64 {
        let a: u64 = self
            .append
            .iter()
            .map(|a| u64::from(a.jobs) * a.writes * a.bs.div_ceil(4096) * 4096)
            .sum();
        let f: u64 = self.falloc.iter().map(|f| f.file / f.bs * f.bs).sum();
        a + f
    }

    fn planned_ops(&self) -> u64 {
        let f: u64 = self
            .falloc
            .iter()
            .map(|f| (f.file / f.bs).max(1) * f.loops)
            .sum();
        let a: u64 = self
            .append
            .iter()
            .map(|a| u64::from(a.jobs) * a.writes)
            .sum();
        f + a
    }

    fn jobs(&self, cpus: u32) -> Vec<Box<dyn Job>> {
        let mut v: Vec<Box<dyn Job>> = Vec::new();
        for s in &self.falloc {
            v.push(Box::new(FallocJob {
                s: s.clone(),
                cpu: v.len() as u32 % cpus,
                clock: 0,
                loop_i: 0,
                call_i: 0,
                file: None,
                kept: None,
            }));
        }
        for a in &self.append {
            for _ in 0..a.jobs {
                v.push(Box::new(AppendJob {
                    bs: a.bs,
                    writes: a.writes,
                    think_us: a.think_us,
                    cpu: v.len() as u32 % cpus,
                    clock: 0,
                    done: 0,
                    file: None,
                }));
            }
        }
        v
    }
}

fn falloc(name: &'static str, file: u64, bs: u64, loops: u64) -> FallocSpec {
    FallocSpec {
        name,
        file,
        bs,
        loops,
        think_us: 0,
        runtime_us: None,
        keep_last: false,
    }
}

fn appenders(name: &'static str, bs: u64, total: u64) -> AppendSpec {
    AppendSpec {
        name,
        jobs: 32,
        bs,
        writes: total / bs,
        think_us: 0,
    }
}

/// The job files of §2.2 of the design document.
pub fn suite(workload: &str) -> Option<Suite> {
    Some(match workload {
        "bufferedappendvsfallocate" => Suite {
            falloc: (0..4)
                .map(|_| FallocSpec {
                    think_us: 500_000,
                    runtime_us: Some(20_000_000),
                    ..falloc("fallocate", 256 * MIB, 256 * MIB, 400)
                })
                .collect(),
            append: vec![AppendSpec {
                think_us: 1000,
                ..appenders("buffered-append", 64 * KIB, 128 * MIB)
            }],
        },
        "correlatedlifetimes" => Suite {
            falloc: vec![
                falloc("large-short", GIB, 128 * MIB, 100),
                FallocSpec {
                    keep_last: true,
                    ..falloc("small-short", 128 * MIB, 128 * KIB, 1000)
                },
            ],
            append: vec![],
        },
        "mixedlifetimes" => Suite {
            falloc: vec![
                FallocSpec {
                    think_us: 10_000,
                    ..falloc("large-long", GIB, 128 * MIB, 100)
                },
                falloc("large-short", GIB, 128 * MIB, 100),
                falloc("small-short", 128 * MIB, 128 * KIB, 1000),
            ],
            append: vec![appenders("small-long", 128 * KIB, 128 * MIB)],
        },
        "foursizes" => Suite {
            falloc: vec![
                falloc("huge", 2 * GIB, 2 * GIB, 100),
                falloc("large", GIB, 128 * MIB, 100),
                falloc("medium", GIB, 8 * MIB, 100),
            ],
            append: vec![appenders("small", 128 * KIB, 128 * MIB)],
        },
        "funnysizeshigh" => Suite {
            falloc: vec![
                falloc("large", GIB, 129 * MIB, 100),
                falloc("medium", GIB, 9 * MIB, 100),
            ],
            append: vec![appenders("small", 129 * KIB, 128 * MIB)],
        },
        "funnysizeslow" => Suite {
            falloc: vec![
                falloc("large", GIB, 127 * MIB, 100),
                falloc("medium", GIB, 7 * MIB, 100),
            ],
            append: vec![appenders("small", 127 * KIB, 128 * MIB)],
        },
        _ => return None,
    })
}

/// Runs one fsperf test.
pub fn run(cfg: &RunConfig, progress: &dyn Progress) -> Result<(Env, Output), LabError> {
    let full = suite(&cfg.workload).ok_or_else(|| LabError::UnknownWorkload {
        name: cfg.workload.clone(),
        valid: super::names(),
    })?;
    let suite = full;
    let env = build(cfg, &SPEC, progress)?;
    let suite = match env.lab.ops {
        Some(n) => suite.cap(n),
        None => suite,
    };
    env.require(suite.footprint())?;
    let jobs = suite.jobs(env.cpus);
    let n_jobs = jobs.len() as u32;
    progress.start(&cfg.workload, suite.planned_ops());
    let t0 = Instant::now();
    let done = run_jobs(&cfg.workload, &env.fs, jobs, cfg.threads as usize, progress)?;
    env.fs.commit()?;
    progress.finish();
    let elapsed = t0.elapsed().as_secs_f64();
    let mut out = Output::new(done.rec, done.files, done.ops, n_jobs, elapsed);
    out.scalar("sim_elapsed_s", done.sim_us as f64 / 1e6);
    out.scalar("jobs", f64::from(n_jobs));
    out.detail.insert(
        "jobs".into(),
        json!({
            "falloc": suite.falloc.iter().map(|f| json!({
                "name": f.name, "file": f.file, "bs": f.bs, "loops": f.loops,
                "think_us": f.think_us, "runtime_us": f.runtime_us, "keep_last": f.keep_last,
            })).collect::<Vec<_>>(),
            "append": suite.append.iter().map(|a| json!({
                "name": a.name, "jobs": a.jobs, "bs": a.bs, "writes": a.writes,
                "think_us": a.think_us,
            })).collect::<Vec<_>>(),
        }),
    );
    Ok((env, out))
}
