//! Sequential writers running side by side: W11 (Baokun Li's fragmentation check: many tasks
//! fallocating 4 KiB appends to private files, fio `ioengine=falloc bs=4k file_append=1`) and
//! seed 004 (two `dd bs=128K oflag=direct` streams at once; their extents show the
//! preallocation window, 8 MiB against 32 MiB with `mb_max_prealloc_kb`).
//!
//! Every I/O costs the same simulated time, so with one thread the writers take turns
//! round-robin, the closest a deterministic run gets to "at the same time"; with more threads
//! they really race.

use std::time::Instant;

use super::error::LabError;
use super::exec::{run_jobs, Job, JobsOutcome};
use super::measure::Output;
use super::setup::{build, Env, FsSpec};
use super::{Progress, RunConfig};
use crate::fs::{File, Task};

/// W11: 64 tasks × 1 GiB on 200 GiB (laptop: 32 tasks × 32 MiB on 8 GiB).
pub const SPEC_APPENDERS: FsSpec = FsSpec::sized(8 << 30, 200 << 30);
/// Seed 004: 2 × 10 GiB (80K × 128 KiB) on 64 GiB (laptop: 2 × 256 MiB on 4 GiB).
pub const SPEC_SEED004: FsSpec = FsSpec::sized(4 << 30, 64 << 30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    Fallocate,
    Direct,
    /// A buffered write then fsync (delayed allocation placed at writeback).
    Buffered,
}

struct Stream {
    how: How,
    bs: u64,
    count: u64,
    done: u64,
    cpu: u32,
    file: Option<File>,
}

impl Job for Stream {
    fn next_at(&self) -> Option<u64> {
        (self.done < self.count).then_some(self.done)
    }
    fn step(&mut self, t: &mut Task) -> Result<(), LabError> {
        let f = self.file.get_or_insert_with(|| t.fs.create());
        let at = self.done * self.bs;
        match self.how {
            How::Fallocate => t.fallocate(f, at, self.bs, false)?,
            How::Direct => t.write_direct(f, at, self.bs)?,
            How::Buffered => {
                t.write_buffered(f, at, self.bs)?;
                t.fsync(f)?;
            }
        }
        self.done += 1;
        Ok(())
    }
    fn cpu(&self) -> u32 {
        self.cpu
    }
    fn into_files(self: Box<Self>) -> Vec<File> {
        self.file.into_iter().collect()
    }
}

fn run_streams(
    cfg: &RunConfig,
    spec: &FsSpec,
    how: How,
    writers: u64,
    bs: u64,
    count: u64,
    progress: &dyn Progress,
) -> Result<(Env, Output), LabError> {
    let env = build(cfg, spec, progress)?;
    let count = env.lab.ops.unwrap_or(count);
    env.require(writers * count * bs)?;
    let jobs: Vec<Box<dyn Job>> = (0..writers)
        .map(|i| {
            Box::new(Stream {
                how,
                bs,
                count,
                done: 0,
                cpu: env.cpu_of(i as usize),
                file: None,
            }) as Box<dyn Job>
        })
        .collect();
    let (done, elapsed) = run_timed(cfg, &env, jobs, writers * count, progress)?;
    let mut out = Output::new(done.rec, done.files, done.ops, writers as u32, elapsed);
    out.scalar("writers", writers as f64);
    out.scalar("bytes_written", (writers * count * bs) as f64);
    out.scalar(
        "write_mib_per_sec",
        if elapsed > 0.0 {
            (writers * count * bs) as f64 / elapsed / (1 << 20) as f64
        } else {
            0.0
        },
    );
    let mut sizes: Vec<u64> = out
        .files
        .iter()
        .flat_map(|f| crate::metrics::filefrag::merged_runs(&f.map.to_file_extents()))
        .map(|r| r.2 * 4)
        .collect();
    sizes.sort_unstable();
    if let Some(&m) = sizes.get(sizes.len() / 2) {
        out.scalar("median_extent_kb", m as f64);
    }
    Ok((env, out))
}

/// W11.
pub fn appenders(cfg: &RunConfig, progress: &dyn Progress) -> Result<(Env, Output), LabError> {
    let (writers, count) = if cfg.quick { (32, 8192) } else { (64, 262_144) };
    run_streams(
        cfg,
        &SPEC_APPENDERS,
        How::Fallocate,
        writers,
        4096,
        count,
        progress,
    )
}

/// `imageappend`: any size (it needs `--image`; the size is the image's).
pub const SPEC_IMAGEAPPEND: FsSpec = FsSpec::sized(1 << 30, 16 << 30);
/// Bytes per append of `imageappend`.
const IMAGE_APPEND_BS: u64 = 64 << 10;

/// `imageappend`: every regular file of the image gets appended to, 64 KiB buffered writes with
/// fsync, round-robin (default 16 per file, 256 at full scale; `ops=N`). Each append aims where
/// the kernel aims it, past the file's last extent (`ext4_ext_find_goal`), so the run shows
/// where the next appends of that file system land and how many new extents they cost.
pub fn imageappend(cfg: &RunConfig, progress: &dyn Progress) -> Result<(Env, Output), LabError> {
    let env = build(cfg, &SPEC_IMAGEAPPEND, progress)?;
    if env.aged_files.is_empty() {
        return Err(LabError::bad(
            "image",
            cfg.image
                .as_ref()
                .map_or("none".into(), |i| i.path.display().to_string()),
            "imageappend appends to an image's regular files: give --image with some",
        ));
    }
    let appends = env.lab.ops.unwrap_or(if cfg.quick { 16 } else { 256 });
    let n = env.aged_files.len() as u64;
    env.require(n * appends * IMAGE_APPEND_BS)?;
    let before: u64 = env.aged_files.iter().map(extent_count).sum();
    let jobs: Vec<Box<dyn Job>> = env
        .aged_files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut file = f.clone();
            file.open = true;
            let start = file.size.div_ceil(IMAGE_APPEND_BS);
            Box::new(Stream {
                how: How::Buffered,
                bs: IMAGE_APPEND_BS,
                count: start + appends,
                done: start,
                cpu: env.cpu_of(i),
                file: Some(file),
            }) as Box<dyn Job>
        })
        .collect();
    let (done, elapsed) = run_timed(cfg, &env, jobs, n * appends, progress)?;
    let after: u64 = done.files.iter().map(extent_count).sum();
    let mut out = Output::new(done.rec, done.files, done.ops, n as u32, elapsed);
    out.scalar("appended_files", n as f64);
    out.scalar("bytes_appended", (n * appends * IMAGE_APPEND_BS) as f64);
    // How many extents (as filefrag counts them) the appends added per file.
    out.scalar(
        "new_extents_per_file",
        (after - before.min(after)) as f64 / n as f64,
    );
    Ok((env, out))
}

/// Runs `jobs` (`total` steps) to the end and commits; returns what they did and the seconds.
fn run_timed(
    cfg: &RunConfig,
    env: &Env,
    jobs: Vec<Box<dyn Job>>,
    total: u64,
    progress: &dyn Progress,
) -> Result<(JobsOutcome, f64), LabError> {
    progress.start(&cfg.workload, total);
    let t0 = Instant::now();
    let done = run_jobs(&cfg.workload, &env.fs, jobs, cfg.threads as usize, progress)?;
    env.fs.commit()?;
    progress.finish();
    Ok((done, t0.elapsed().as_secs_f64()))
}

/// filefrag's extent count of one file.
fn extent_count(f: &File) -> u64 {
    crate::metrics::filefrag::filefrag_count(&f.map.to_file_extents())
}

/// Seed 004.
pub fn seed004(cfg: &RunConfig, progress: &dyn Progress) -> Result<(Env, Output), LabError> {
    let count = if cfg.quick { 2048 } else { 80 * 1024 };
    run_streams(
        cfg,
        &SPEC_SEED004,
        How::Direct,
        2,
        128 << 10,
        count,
        progress,
    )
}
