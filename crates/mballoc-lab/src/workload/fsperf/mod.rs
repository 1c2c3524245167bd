//! The fsperf fragmentation suite (W3–W8), run from fsperf's own fio job files.
//!
//! The job files of josefbacik/fsperf (`frag_tests/*.fio`) are stored in
//! `kernel-frag/jobs/upstream/` and parsed here ([`jobfile`]); `--set scale=S` scales their
//! volumes the way the scaled files of `kernel-frag/jobs/` were made (scale 0.5 gives exactly
//! those files, which the real-kernel reference runs used). Each job copy becomes a [`FioJob`]
//! with its own simulated clock; the scheduler always runs the job whose clock is earliest, as
//! fio's threads run at once. What an I/O costs on that clock is measured ([`costs`]).
//!
//! fio semantics honoured (fio 3.33, `backend.c` / `filesetup.c` / `io_u.c`):
//! * a job without `create_on_open` has its file created by the layout step before any I/O,
//!   and fallocated whole there unless `fallocate=none` (`extend_file`, `native_fallocate`);
//! * a loop issues only whole `bs` I/Os (`fill_io_u`: an I/O past the end is not issued);
//! * `thinktime` stalls after every read/write, not after an fdatasync (`handle_thinktime`);
//! * `fdatasync=N`: an fdatasync after every N writes (`get_rw_ddir`); it writes back (and
//!   allocates) at once and returns when the jbd2 commit of its transaction ends
//!   (`ext4_sync_file`, `jbd2_complete_transaction`); the commits run on the same clock
//!   ([`JournalJob`]) and release the blocks freed before they started when they end, unless
//!   `commit_clock=0`;
//! * `unlink_each_loop`: the file is unlinked at the start of every loop after the first
//!   (`thread_main`, after `clear_io_state` closed it), so the last loop's file survives
//!   unless `unlink=1` unlinks it when the job ends (`close_and_free_files`);
//! * `runtime` without `time_based` ends the job at the first I/O past it;
//! * `file_append`: a loop's writes start at the file's size when it is opened;
//! * files are closed at every loop end and at job end (the last close of a writer drops its
//!   inode preallocations, `ext4_release_file`).
//!
//! `ops=N` caps every job at N I/Os (tests).

pub mod costs;
pub mod jobfile;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use serde_json::json;

use super::error::LabError;
use super::exec::{run_jobs, Job};
use super::measure::Output;
use super::rng::Rng;
use super::settings::LabSettings;
use super::setup::{build, Env, FsSpec};
use super::{Progress, RunConfig};
use crate::fs::{File, Task};
use costs::{Costs, Latency};
use jobfile::{Engine, JobFile, JobSpec, Layout};

/// Upstream fsperf needs 16 GiB (foursizes peaks at 8 GiB of live data); scale 0.5 fits 8 GiB.
pub const SPEC: FsSpec = FsSpec::sized(16 << 30, 16 << 30);

/// One fsperf fragmentation test: its lab name and job files.
pub struct FsperfTest {
    pub name: &'static str,
    /// fsperf's `frag_tests/<file>`.
    pub file: &'static str,
    pub upstream: &'static str,
    /// The scale-0.5 file the reference runs used.
    pub scaled_half: &'static str,
}

macro_rules! test {
    ($name:literal, $file:literal) => {
        FsperfTest {
            name: $name,
            file: $file,
            upstream: include_str!(concat!("../../../../../kernel-frag/jobs/upstream/", $file)),
            scaled_half: include_str!(concat!("../../../../../kernel-frag/jobs/", $file)),
        }
    };
}

/// The six tests.
pub static TESTS: [FsperfTest; 6] = [
    test!(
        "bufferedappendvsfallocate",
        "buffered-append-vs-fallocate.fio"
    ),
    test!("correlatedlifetimes", "correlated-lifetimes.fio"),
    test!("mixedlifetimes", "mixed-lifetimes.fio"),
    test!("foursizes", "four-sizes.fio"),
    test!("funnysizeshigh", "funny-sizes-high.fio"),
    test!("funnysizeslow", "funny-sizes-low.fio"),
];

fn test_named(name: &str) -> Option<&'static FsperfTest> {
    TESTS.iter().find(|t| t.name == name)
}

/// The jobs of `test` at `scale` (1 = as published).
pub fn jobs_of(test: &str, scale: f64) -> Result<JobFile, LabError> {
    let t = test_named(test).ok_or_else(|| LabError::UnknownWorkload {
        name: test.to_string(),
        valid: super::names(),
    })?;
    let bad = |e: jobfile::JobFileError| LabError::bad("job file", t.file, e);
    JobFile::parse(t.file, t.upstream)
        .and_then(|f| f.scaled(scale))
        .map_err(bad)
}

/// At most `ops` I/Os per job: fewer loops (falloc) or a shorter file (appenders).
fn capped(mut j: JobSpec, ops: u64) -> JobSpec {
    match j.engine {
        Engine::Falloc => j.loops = j.loops.min(ops.div_ceil(j.ios_per_loop())).max(1),
        Engine::Sync => {
            j.filesize = j.filesize.min(ops * j.bs);
            j.loops = 1;
        }
    }
    j
}

/// Bytes live at the worst moment: every kept appender file at its end, one file per falloc job.
fn footprint(jobs: &[JobSpec]) -> u64 {
    jobs.iter()
        .map(|j| {
            let one = j.ios_per_loop() * j.bs.div_ceil(4096) * 4096;
            let per_job = match j.engine {
                Engine::Sync if j.file_append && !j.unlink_each_loop => one * j.loops,
                _ => one,
            };
            u64::from(j.numjobs) * per_job
        })
        .sum()
}

fn planned_ios(jobs: &[JobSpec]) -> u64 {
    jobs.iter()
        .map(|j| u64::from(j.numjobs) * j.loops * j.ios_per_loop())
        .sum()
}

/// What one job copy does next.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Next {
    /// The next write or fallocate (opening a new file first after an unlink).
    Io,
    /// The fdatasync due after the last write.
    Sync,
    /// The job is over: close or unlink its file.
    Finish,
    Done,
}

/// jbd2's periodic commit: a transaction commits at the latest this long after it opened
/// (`j_commit_interval`, 5 s by default).
pub const COMMIT_INTERVAL_US: u64 = 5_000_000;

/// jbd2's commits on simulated time. An fdatasync waits for the commit of the transaction
/// holding its changes (`jbd2_complete_transaction`). One commit runs at a time; everything
/// that arrives while one runs joins the next, so the waiters of one commit return together
/// (group commit). A commit closes the running transaction when it starts and makes its frees
/// allocatable when it ends ([`JournalJob`] runs both on the clock).
pub struct CommitClock {
    /// The latest commit: `[start, end)`; it has not started while `start` is ahead.
    start: u64,
    end: u64,
    duration: Latency,
    rng: Rng,
    /// Commits scheduled and not yet started, `(start, end)` in order, kept for a
    /// [`JournalJob`] (`None` without one).
    scheduled: Option<VecDeque<(u64, u64)>>,
    /// fdatasyncs served and their total wait, µs.
    waits: u64,
    waited_us: u64,
}

impl CommitClock {
    pub fn new(duration: Latency, rng: Rng) -> CommitClock {
        CommitClock {
            start: 0,
            end: 0,
            duration,
            rng,
            scheduled: None,
            waits: 0,
            waited_us: 0,
        }
    }

    /// Keeps the commits it schedules for a [`JournalJob`] to run.
    pub fn with_journal_job(mut self) -> CommitClock {
        self.scheduled = Some(VecDeque::new());
        self
    }

    /// Mean fdatasync latency so far, µs (0 before the first).
    pub fn mean_wait_us(&self) -> f64 {
        self.waited_us as f64 / self.waits.max(1) as f64
    }

    /// When an fdatasync issued at `t` returns.
    pub fn wait(&mut self, t: u64) -> u64 {
        if t >= self.start {
            // A new commit, after the one in progress or at once; else join the next one,
            // scheduled but not started.
            self.schedule(self.end.max(t));
        }
        self.waits += 1;
        self.waited_us += self.end - t;
        self.end
    }

    /// jbd2's commit timer at `t`: with no commit running or due, one starts once the
    /// running transaction is [`COMMIT_INTERVAL_US`] old (it opened when the last commit
    /// started).
    pub fn timer(&mut self, t: u64) {
        if t >= self.end && t >= self.start + COMMIT_INTERVAL_US {
            self.schedule(t);
        }
    }

    fn schedule(&mut self, start: u64) {
        self.start = start;
        self.end = start + self.duration.at(self.rng.unit());
        if let Some(q) = self.scheduled.as_mut() {
            q.push_back((self.start, self.end));
        }
    }
}

/// Runs jbd2's commits on the scheduler's clock: at a commit's start the running transaction
/// closes (`jbd2_journal_commit_transaction` switching to a new one); at its end the frees it
/// carried become allocatable (`ext4_journal_commit_callback` → `ext4_process_freed_data`).
/// Blocks freed while it runs wait for the next commit.
pub struct JournalJob {
    clock: Arc<Mutex<CommitClock>>,
    /// Commits under way: `(end, transaction)`.
    running: VecDeque<(u64, u64)>,
}

impl JournalJob {
    pub fn new(clock: Arc<Mutex<CommitClock>>) -> JournalJob {
        JournalJob {
            clock,
            running: VecDeque::new(),
        }
    }

    /// The next start (`false`) or end (`true`) due; an end first on a tie (the previous
    /// commit finishes before the next begins).
    fn next_event(&self) -> Option<(u64, bool)> {
        let start = self
            .clock
            .lock()
            .scheduled
            .as_ref()
            .and_then(|q| q.front())
            .map(|&(s, _)| (s, false));
        let end = self.running.front().map(|&(e, _)| (e, true));
        match (start, end) {
            (Some(s), Some(e)) => Some(if e.0 <= s.0 { e } else { s }),
            (s, e) => s.or(e),
        }
    }
}

impl Job for JournalJob {
    fn next_at(&self) -> Option<u64> {
        self.next_event().map(|(at, _)| at)
    }

    fn step(&mut self, t: &mut Task) -> Result<(), LabError> {
        let journal = t.fs.journal();
        match self.next_event() {
            Some((_, true)) => {
                let (_, tid) = self.running.pop_front().expect("an end is due");
                journal.release(t.fs.allocator(), tid)?;
            }
            Some((_, false)) => {
                let (_, end) = self
                    .clock
                    .lock()
                    .scheduled
                    .as_mut()
                    .and_then(|q| q.pop_front())
                    .expect("a start is due");
                self.running.push_back((end, journal.close()));
            }
            None => {}
        }
        Ok(())
    }

    fn cpu(&self) -> u32 {
        0
    }

    fn into_files(self: Box<Self>) -> Vec<File> {
        Vec::new()
    }

    fn counts_ops(&self) -> bool {
        false
    }
}

/// One copy of a fio job on simulated time.
pub struct FioJob {
    spec: JobSpec,
    cpu: u32,
    clock: u64,
    /// Latency of a write or fallocate.
    io: Latency,
    /// When an fdatasync returns: the journal commit it waits for.
    journal: Arc<Mutex<CommitClock>>,
    /// Draws this copy's latencies.
    rng: Rng,
    loop_us: u64,
    loop_i: u64,
    io_i: u64,
    next: Next,
    file: Option<File>,
    /// Where this loop's writes start (the size at open under `file_append`).
    base: u64,
    /// The previous loop's file, unlinked when the next loop starts.
    unlink_pending: bool,
    kept: Vec<File>,
}

impl FioJob {
    fn new(
        spec: JobSpec,
        cpu: u32,
        costs: &Costs,
        test: &str,
        rng: Rng,
        journal: Arc<Mutex<CommitClock>>,
        lab: &LabSettings,
    ) -> Result<FioJob, LabError> {
        let (io, start) = match spec.engine {
            Engine::Falloc => (
                costs.falloc_job(&spec.name, spec.bs, lab.falloc_spread),
                if lab.falloc_start {
                    costs.falloc_start_us(spec.bs)
                } else {
                    0
                },
            ),
            Engine::Sync => (costs.append(test)?.0, 0),
        };
        Ok(FioJob {
            loop_us: costs.loop_us(spec.bs),
            spec,
            cpu,
            clock: start,
            io,
            journal,
            rng,
            loop_i: 0,
            io_i: 0,
            next: Next::Io,
            file: None,
            base: 0,
            unlink_pending: false,
            kept: Vec::new(),
        })
    }

    /// fio's layout step, before any job starts (`setup_files` → `extend_file`).
    fn lay_out(&mut self, t: &mut Task) -> Result<(), LabError> {
        if !self.spec.laid_out() {
            return Ok(());
        }
        let mut f = t.fs.create();
        if self.spec.layout == Layout::Whole {
            t.fallocate(&mut f, 0, self.spec.filesize, false)?;
        }
        self.file = Some(f);
        Ok(())
    }

    fn over(&self) -> bool {
        self.loop_i >= self.spec.loops || self.spec.runtime_us.is_some_and(|r| self.clock >= r)
    }

    /// The next write/fallocate, opening (and first unlinking) at a loop start.
    fn io(&mut self, t: &mut Task) -> Result<(), LabError> {
        self.journal.lock().timer(self.clock);
        if self.io_i == 0 {
            if self.unlink_pending {
                if let Some(old) = self.file.take() {
                    t.unlink(old)?;
                }
                self.unlink_pending = false;
                self.clock += self.loop_us;
            }
            let f = self.file.get_or_insert_with(|| t.fs.create());
            f.open = true;
            self.base = if self.spec.file_append { f.size } else { 0 };
        }
        let f = self.file.as_mut().expect("opened above");
        let at = self.base + self.io_i * self.spec.bs;
        match self.spec.engine {
            Engine::Falloc => t.fallocate(f, at, self.spec.bs, false)?,
            Engine::Sync => t.write_buffered(f, at, self.spec.bs)?,
        }
        self.clock += self.io.at(self.rng.unit()) + self.spec.thinktime_us;
        self.io_i += 1;
        // do_io stops once the loop's bytes are issued: the fdatasync due after its last write
        // is never issued, and that write stays dirty.
        let loop_end = self.io_i == self.spec.ios_per_loop();
        let sync_due =
            !loop_end && self.spec.fdatasync > 0 && self.io_i.is_multiple_of(self.spec.fdatasync);
        if loop_end {
            self.io_i = 0;
            self.loop_i += 1;
            close(t, f); // clear_io_state closes the files
            self.unlink_pending = self.spec.unlink_each_loop;
        }
        self.next = if sync_due {
            Next::Sync
        } else {
            self.after_io()
        };
        Ok(())
    }

    fn after_io(&self) -> Next {
        if self.over() {
            Next::Finish
        } else {
            Next::Io
        }
    }

    fn sync(&mut self, t: &mut Task) -> Result<(), LabError> {
        if let Some(f) = self.file.as_mut() {
            t.fsync(f)?;
        }
        self.clock = self.journal.lock().wait(self.clock);
        self.next = self.after_io();
        Ok(())
    }

    /// `close_and_free_files`: unlink under `unlink`, else the file stays (its dirty blocks
    /// wait for the syncfs after the run).
    fn finish(&mut self, t: &mut Task) -> Result<(), LabError> {
        if let Some(mut f) = self.file.take() {
            if self.spec.unlink {
                t.unlink(f)?;
            } else {
                close(t, &mut f);
                self.kept.push(f);
            }
        }
        self.next = Next::Done;
        Ok(())
    }
}

/// The last close of a writer (`ext4_release_file`): preallocations are dropped only when no
/// delayed-allocation blocks are reserved, i.e. nothing is dirty.
fn close(t: &mut Task, f: &mut File) {
    if f.dirty_blocks() == 0 {
        t.close(f);
    } else {
        f.open = false;
    }
}

impl Job for FioJob {
    fn next_at(&self) -> Option<u64> {
        (self.next != Next::Done).then_some(self.clock)
    }

    fn step(&mut self, t: &mut Task) -> Result<(), LabError> {
        match self.next {
            Next::Io if self.over() => self.finish(t),
            Next::Io => self.io(t),
            Next::Sync => self.sync(t),
            Next::Finish => self.finish(t),
            Next::Done => Ok(()),
        }
    }

    fn cpu(&self) -> u32 {
        self.cpu
    }

    fn into_files(self: Box<Self>) -> Vec<File> {
        self.kept
    }
}

/// Runs one fsperf test.
pub fn run(cfg: &RunConfig, progress: &dyn Progress) -> Result<(Env, Output), LabError> {
    let env = build(cfg, &SPEC, progress)?;
    let scale = env.lab.scale.unwrap_or(1.0);
    let specs: Vec<JobSpec> = jobs_of(&cfg.workload, scale)?
        .jobs
        .into_iter()
        .map(|j| match env.lab.ops {
            Some(n) => capped(j, n),
            None => j,
        })
        .collect();
    env.require(footprint(&specs))?;
    let costs = Costs::measured(&cfg.workload)?;
    // The commits need one clock: with several threads each runs its own jobs' clocks, and the
    // journal keeps committing at every fdatasync.
    let commit_clock = env.lab.commit_clock && cfg.threads == 1;
    let mut clock = CommitClock::new(costs.commit(), Rng::for_task(cfg.seed, u64::MAX));
    if commit_clock {
        env.fs.journal().set_timed();
        clock = clock.with_journal_job();
    }
    let journal = Arc::new(Mutex::new(clock));
    let mut jobs: Vec<FioJob> = Vec::new();
    for s in &specs {
        for _ in 0..s.numjobs {
            let i = jobs.len() as u64;
            let cpu = (i % u64::from(env.cpus)) as u32;
            let rng = Rng::for_task(cfg.seed, i);
            jobs.push(FioJob::new(
                s.clone(),
                cpu,
                &costs,
                &cfg.workload,
                rng,
                Arc::clone(&journal),
                &env.lab,
            )?);
        }
    }
    let mut setup = env.fs.task(0);
    for j in &mut jobs {
        j.lay_out(&mut setup)?;
    }
    let n_jobs = jobs.len() as u32;
    progress.start(&cfg.workload, planned_ios(&specs));
    let t0 = Instant::now();
    // First, so that it wins ties: a commit due at `t` starts or ends before any I/O at `t`.
    let clock_job =
        commit_clock.then(|| Box::new(JournalJob::new(Arc::clone(&journal))) as Box<dyn Job>);
    let boxed: Vec<Box<dyn Job>> = clock_job
        .into_iter()
        .chain(jobs.into_iter().map(|j| Box::new(j) as Box<dyn Job>))
        .collect();
    let mut done = run_jobs(
        &cfg.workload,
        &env.fs,
        boxed,
        cfg.threads as usize,
        progress,
    )?;
    // The syncfs before unmounting writes back what no fdatasync did.
    for f in done.files.iter_mut().filter(|f| f.dirty_blocks() > 0) {
        setup.fsync(f)?;
    }
    done.rec.merge(setup.rec);
    env.fs.commit()?;
    progress.finish();
    let elapsed = t0.elapsed().as_secs_f64();
    let mut out = Output::new(done.rec, done.files, done.ops, n_jobs, elapsed);
    out.scalar("sim_elapsed_s", done.sim_us as f64 / 1e6);
    out.scalar("sim_fdatasync_mean_us", journal.lock().mean_wait_us());
    out.scalar("jobs", f64::from(n_jobs));
    out.scalar("scale", scale);
    out.detail.insert(
        "jobs".into(),
        json!({ "scale": scale, "specs": specs, "costs": costs.describe() }),
    );
    Ok((env, out))
}

#[cfg(test)]
mod tests;
