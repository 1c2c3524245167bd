//! will-it-scale's allocator tests: W1 `fallocate2`, W2 `fallocate3`, and seed 003's
//! experiment (fallocate3 on a big, full, freshly mounted file system).
//!
//! Time-based by default (M1 with will-it-scale's sampling: warm-up samples dropped, the
//! average of the measured ones); with `ops=N` every task runs exactly N operations instead,
//! which makes a single-task run deterministic.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use super::error::LabError;
use super::exec::{threads, timed, Sampling};
use super::measure::Output;
use super::prefill::Holes;
use super::setup::{build, Env, FsSpec};
use super::{Progress, RunConfig};
use crate::fs::{File, Recorder, Task};

/// fallocate2: `FILESIZE` 1 MiB, `BUFLEN` 8 KiB.
const F2_FILE: u64 = 1 << 20;
const F2_CHUNK: u64 = 8 << 10;
/// fallocate3: `FILESIZE` (73,819,750 B ≈ 18,023 blocks).
pub const F3_FILE: u64 = 73_819_750;

pub const SPEC_F2: FsSpec = FsSpec::sized(4 << 30, 16 << 30);
pub const SPEC_F3: FsSpec = FsSpec {
    lazy: true,
    ..FsSpec::sized(16 << 30, 64 << 30)
};
/// Seed 003: a big file system, 75 % full in small holes, nothing read at mount.
pub const SPEC_SEED003: FsSpec = FsSpec {
    lazy: true,
    prefill: Some((0.75, Holes::Random)),
    ..FsSpec::sized(128 << 30, 1 << 40)
};

/// One will-it-scale task: its loop body, run until stopped or for a fixed count.
trait Loop {
    fn op(&mut self, t: &mut Task) -> Result<(), LabError>;
    fn into_file(self) -> File;
}

struct Fallocate2 {
    f: File,
    place: u64,
}

impl Loop for Fallocate2 {
    fn op(&mut self, t: &mut Task) -> Result<(), LabError> {
        t.fallocate(&mut self.f, self.place, F2_CHUNK, false)?;
        self.place += F2_CHUNK;
        if self.place >= F2_FILE {
            t.truncate(&mut self.f, 0)?;
            self.place = 0;
        }
        Ok(())
    }
    fn into_file(self) -> File {
        self.f
    }
}

struct Fallocate3 {
    f: File,
}

impl Loop for Fallocate3 {
    fn op(&mut self, t: &mut Task) -> Result<(), LabError> {
        // open(O_TRUNC): ext4_setattr truncates even at size 0, freeing the blocks past EOF.
        self.f.open = true;
        t.truncate(&mut self.f, 0)?;
        t.fallocate(&mut self.f, 0, F3_FILE, true)?;
        t.close(&mut self.f);
        Ok(())
    }
    fn into_file(self) -> File {
        self.f
    }
}

/// Per task: what it recorded, its file, its op count and when its first op finished.
type TaskOut = (Recorder, File, u64, u64);

fn run_loops<L: Loop>(
    env: &Env,
    progress: &dyn Progress,
    make: impl Fn(&Env) -> L + Sync,
) -> Result<(Output, u64), LabError> {
    let n = env.cfg.threads as usize;
    let start = Instant::now();
    let body = |i: usize, stop: &AtomicBool, counter: &AtomicU64| -> Result<TaskOut, LabError> {
        let mut t = env.fs.task(env.cpu_of(i));
        let mut l = make(env);
        let (mut ops, mut first_ns) = (0u64, 0u64);
        while !stop.load(Ordering::Relaxed) && env.lab.ops.is_none_or(|max| ops < max) {
            l.op(&mut t)?;
            ops += 1;
            if ops == 1 {
                first_ns = start.elapsed().as_nanos() as u64;
            }
            counter.fetch_add(1, Ordering::Relaxed);
        }
        Ok((t.rec, l.into_file(), ops, first_ns))
    };
    let (throughput, parts) = match env.lab.ops {
        Some(max) => {
            progress.start(&env.cfg.workload, max * n as u64);
            let stop = AtomicBool::new(false);
            let parts = threads(&env.cfg.workload, n, |i| {
                let c = AtomicU64::new(0);
                let r = body(i, &stop, &c);
                progress.inc(max);
                r
            })?;
            progress.finish();
            (None, parts)
        }
        None => {
            let s = Sampling::for_scale(env.cfg.quick, env.lab.duration_s, env.lab.warmup_s);
            let (tp, parts) = timed(&env.cfg.workload, n, s, progress, body)?;
            (Some(tp), parts)
        }
    };
    let elapsed = start.elapsed().as_secs_f64();
    let mut rec = Recorder::default();
    let (mut files, mut ops, mut first) = (Vec::new(), 0, u64::MAX);
    for (r, f, o, fst) in parts {
        rec.merge(r);
        files.push(f);
        ops += o;
        if o > 0 {
            first = first.min(fst);
        }
    }
    let mut out = Output::new(rec, files, ops, n as u32, elapsed);
    out.throughput = throughput;
    Ok((out, if first == u64::MAX { 0 } else { first }))
}

/// W1.
pub fn fallocate2(cfg: &RunConfig, progress: &dyn Progress) -> Result<(Env, Output), LabError> {
    let env = build(cfg, &SPEC_F2, progress)?;
    env.require(u64::from(cfg.threads) * F2_FILE * 2)?;
    let (out, _) = run_loops(&env, progress, |e| Fallocate2 {
        f: e.fs.create(),
        place: 0,
    })?;
    Ok((env, out))
}

/// W2 and seed 003 (which only differ in their file system).
fn fallocate3_on(
    cfg: &RunConfig,
    spec: &FsSpec,
    progress: &dyn Progress,
) -> Result<(Env, Output), LabError> {
    let env = build(cfg, spec, progress)?;
    env.require(u64::from(cfg.threads) * F3_FILE * 2)?;
    let (mut out, first_ns) = run_loops(&env, progress, |e| Fallocate3 { f: e.fs.create() })?;
    out.scalar("time_to_first_op_ns", first_ns as f64);
    out.scalar(
        "footprint_blocks",
        f64::from(cfg.threads) * F3_FILE.div_ceil(4096) as f64,
    );
    Ok((env, out))
}

/// W2.
pub fn fallocate3(cfg: &RunConfig, progress: &dyn Progress) -> Result<(Env, Output), LabError> {
    fallocate3_on(cfg, &SPEC_F3, progress)
}

/// Seed 003.
pub fn seed003(cfg: &RunConfig, progress: &dyn Progress) -> Result<(Env, Output), LabError> {
    fallocate3_on(cfg, &SPEC_SEED003, progress)
}
