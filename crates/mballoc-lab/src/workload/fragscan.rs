//! W10 — Harshad Shirwadkar's mb_optimize_scan test, scaled: a file system with no free 2 MiB
//! run anywhere (every group half free, in holes of at most 511 blocks), freshly mounted (no
//! bitmap read), then three consecutive runs of `dd bs=2M count=10` (10 × 2 MiB buffered
//! writes, placed at fsync). Run 1 pays for the cold groups; the published numbers were
//! 5m1.9s / 2m28.4s / 2m26.5s without the optimised scan and 2m47.6s / 0.611 s / 1.255 s with
//! it (65 TB). Per run we report wall time, groups considered, useless loops and bitmap loads.

use std::time::Instant;

use super::error::LabError;
use super::measure::Output;
use super::prefill::Holes;
use super::setup::{build, Env, FsSpec};
use super::{Progress, RunConfig};

/// 32 GiB at laptop scale, 1 TiB at full scale; half full in holes < 2 MiB, lazy.
pub const SPEC: FsSpec = FsSpec {
    lazy: true,
    prefill: Some((0.5, Holes::AtMost(511))),
    prefill_holes: Holes::AtMost(511),
    ..FsSpec::sized(32 << 30, 1 << 40)
};

const RUNS: usize = 3;
const WRITE: u64 = 2 << 20;
const COUNT: u64 = 10;

fn considered(s: &mballoc::StatsSnapshot) -> (u64, u64) {
    s.cr.iter().fold((0, 0), |(c, u), x| (c + x[1], u + x[3]))
}

/// Runs W10.
pub fn run(cfg: &RunConfig, progress: &dyn Progress) -> Result<(Env, Output), LabError> {
    let env = build(cfg, &SPEC, progress)?;
    env.require(RUNS as u64 * COUNT * WRITE)?;
    let a = env.fs.allocator();
    let mut t = env.fs.task(0);
    let mut files = Vec::new();
    let mut per_run = Vec::new();
    progress.start(&cfg.workload, RUNS as u64);
    let t0 = Instant::now();
    for _ in 0..RUNS {
        let before = a.stats();
        let start = Instant::now();
        let mut f = env.fs.create();
        for i in 0..COUNT {
            t.write_buffered(&mut f, i * WRITE, WRITE)?;
        }
        t.fsync(&mut f)?;
        t.close(&mut f);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let after = a.stats();
        let (c0, u0) = considered(&before);
        let (c1, u1) = considered(&after);
        per_run.push((
            ms,
            c1 - c0,
            u1 - u0,
            after.bitmap_loads - before.bitmap_loads,
            f.map.len(),
        ));
        files.push(f);
        progress.inc(1);
    }
    progress.finish();
    let elapsed = t0.elapsed().as_secs_f64();
    let rec = std::mem::take(&mut t.rec);
    let mut out = Output::new(rec, files, RUNS as u64, 1, elapsed);
    for (i, (ms, cons, useless, loads, extents)) in per_run.iter().enumerate() {
        let k = i + 1;
        out.scalar(&format!("run{k}_ms"), *ms);
        out.scalar(&format!("run{k}_groups_considered"), *cons as f64);
        out.scalar(&format!("run{k}_useless_loops"), *useless as f64);
        out.scalar(&format!("run{k}_bitmap_loads"), *loads as f64);
        out.scalar(&format!("run{k}_extents"), *extents as f64);
    }
    out.series.insert(
        "run_ms".into(),
        per_run
            .iter()
            .enumerate()
            .map(|(i, r)| ((i + 1) as f64, r.0))
            .collect(),
    );
    Ok((env, out))
}
