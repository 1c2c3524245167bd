//! The job files as data, the scaling, and fio's loop/unlink/sync rules on small jobs.

use std::sync::Arc;

use mballoc::{Allocator, Geometry};

use super::costs::{Costs, Latency};
use super::jobfile::{Engine, JobFile, Layout};
use super::*;
use crate::fs::Fs;

const MIB: u64 = 1 << 20;

/// Scaling fsperf's files by 0.5 gives exactly the scaled files the reference runs used.
#[test]
fn half_scale_of_the_upstream_files_is_the_reference_job_files() {
    for t in &TESTS {
        let up = JobFile::parse(t.file, t.upstream).unwrap();
        let half = JobFile::parse(t.file, t.scaled_half).unwrap();
        assert_eq!(up.scaled(0.5).unwrap(), half, "{}", t.name);
        assert_eq!(jobs_of(t.name, 0.5).unwrap(), half, "{}", t.name);
        assert_ne!(up, half, "{}", t.name);
    }
}

#[test]
fn upstream_jobs_read_as_published() {
    let b = jobs_of("bufferedappendvsfallocate", 1.0).unwrap();
    let (fa, ap) = (&b.jobs[0], &b.jobs[1]);
    assert_eq!(
        (fa.engine, fa.bs, fa.filesize),
        (Engine::Falloc, 256 * MIB, 256 * MIB)
    );
    assert_eq!((fa.numjobs, fa.loops, fa.thinktime_us), (4, 400, 500_000));
    assert_eq!(fa.runtime_us, Some(20_000_000));
    assert!(fa.unlink && fa.unlink_each_loop && fa.layout == Layout::Whole);
    assert_eq!(
        (ap.engine, ap.bs, ap.filesize, ap.numjobs),
        (Engine::Sync, 64 << 10, 128 * MIB, 32)
    );
    assert!(ap.file_append && ap.create_on_open && ap.fdatasync == 1 && ap.new_group);
    assert_eq!(ap.thinktime_us, 1000);
    let c = jobs_of("correlatedlifetimes", 1.0).unwrap();
    assert!(
        c.jobs[1].unlink_each_loop && !c.jobs[1].unlink,
        "small-short keeps its last file"
    );
    let f = jobs_of("funnysizeshigh", 0.5).unwrap();
    assert_eq!(f.jobs[0].ios_per_loop(), 3);
    assert_eq!(f.jobs[1].ios_per_loop(), 56);
    assert_eq!(f.jobs[2].ios_per_loop(), 508);
    assert!(jobs_of("nosuch", 1.0).is_err());
}

fn small_fs() -> Fs {
    let geo = Geometry::ext4_default(1 << 30).unwrap();
    let a = Allocator::builder(geo).cpus(2).build().unwrap();
    Fs::new(Arc::new(a), 8192, 1 << 20).unwrap()
}

fn costs() -> Costs {
    Costs::fixed(
        &[(4096, 10.0, 0.0), (64 * MIB, 1000.0, 0.0)],
        Some((5, 100)),
    )
}

fn job(text: &str) -> FioJob {
    let spec = JobFile::parse("t.fio", text).unwrap().jobs.remove(0);
    let journal = Arc::new(Mutex::new(CommitClock::new(
        Latency::fixed(100),
        Rng::new(2),
    )));
    FioJob::new(
        spec,
        0,
        &costs(),
        "t",
        Rng::new(1),
        journal,
        &LabSettings::default(),
    )
    .unwrap()
}

/// Runs one job to its end; returns the files it kept and the used blocks after a commit.
fn drive(fs: &Fs, mut j: FioJob) -> (Vec<File>, u64, u64) {
    let mut t = fs.task(0);
    j.lay_out(&mut t).unwrap();
    let mut steps = 0;
    while j.next_at().is_some() {
        j.step(&mut t).unwrap();
        steps += 1;
    }
    fs.commit().unwrap();
    let used = fs.allocator().geometry().blocks_count() - fs.allocator().free_blocks();
    (Box::new(j).into_files(), used, steps)
}

const FALLOC: &str =
    "[j]\nioengine=falloc\nrw=write\nbs=1M\nfilesize=4M\nloops=3\nfallocate=none\n";

#[test]
fn unlink_each_loop_keeps_the_last_file_unless_unlink() {
    let fs = small_fs();
    let base = fs.allocator().geometry().blocks_count() - fs.allocator().free_blocks();
    let (kept, used, _) = drive(&fs, job(&format!("{FALLOC}unlink_each_loop=1\n")));
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].size, 4 * MIB);
    assert_eq!(used - base, 1024, "one 4 MiB file left");

    let fs = small_fs();
    let (kept, used, _) = drive(&fs, job(&format!("{FALLOC}unlink_each_loop=1\nunlink=1\n")));
    assert!(kept.is_empty());
    assert_eq!(used, base);

    // Without unlink_each_loop the loops fallocate the same file again: nothing new.
    let fs = small_fs();
    let (kept, used, _) = drive(&fs, job(FALLOC));
    assert_eq!((kept.len(), used - base), (1, 1024));
}

#[test]
fn the_layout_step_fallocates_the_whole_file_unless_none() {
    let fs = small_fs();
    let mut t = fs.task(0);
    let mut j = job("[j]\nioengine=falloc\nrw=write\nbs=1M\nfilesize=4M\n");
    j.lay_out(&mut t).unwrap();
    assert_eq!(j.file.as_ref().unwrap().map.blocks(), 1024);
    let mut j = job(FALLOC);
    j.lay_out(&mut t).unwrap();
    assert_eq!(j.file.as_ref().unwrap().map.blocks(), 0);
    let mut j = job("[j]\nioengine=sync\nrw=write\nbs=1M\nfilesize=4M\ncreate_on_open=1\n");
    j.lay_out(&mut t).unwrap();
    assert!(j.file.is_none());
}

/// The unlink of a loop's file waits for the next loop's start: a 500 ms thinktime keeps it
/// allocated that long.
#[test]
fn a_loops_file_lives_through_its_thinktime() {
    let fs = small_fs();
    let mut t = fs.task(0);
    let mut j = job(&format!(
        "{FALLOC}unlink_each_loop=1\nunlink=1\nthinktime=500ms\n"
    ));
    j.lay_out(&mut t).unwrap();
    for _ in 0..4 {
        j.step(&mut t).unwrap();
    }
    assert_eq!(j.next_at(), Some(4 * (500_000 + costs().falloc_us(MIB))));
    assert_eq!(j.file.as_ref().unwrap().map.blocks(), 1024);
    j.step(&mut t).unwrap(); // loop 2 starts: the old file goes, a new one gets 1 MiB
    assert_eq!(j.file.as_ref().unwrap().map.blocks(), 256);
}

#[test]
fn runtime_caps_the_loops() {
    let fs = small_fs();
    let text =
        format!("{FALLOC}unlink_each_loop=1\nunlink=1\nloops=400\nthinktime=1s\nruntime=10s\n");
    let j = job(&text);
    let cost = costs().falloc_us(MIB) + 1_000_000;
    let (_, _, steps) = drive(&fs, j);
    // I/Os start while the clock is below 10 s, then one step finishes the job.
    assert_eq!(steps, 10_000_000u64.div_ceil(cost) + 1);
}

/// fdatasync after every write but the loop's last (do_io stops first): that one is written
/// back by the syncfs after the run.
#[test]
fn appenders_sync_every_write_but_the_last() {
    let fs = small_fs();
    let mut j = job(
        "[a]\nioengine=sync\nrw=write\nbs=64K\nfilesize=256K\nfdatasync=1\nfile_append=1\ncreate_on_open=1\nthinktime=1ms\n",
    );
    let mut t = fs.task(0);
    let mut syncs = 0;
    while j.next_at().is_some() {
        if j.next == Next::Sync {
            syncs += 1;
        }
        j.step(&mut t).unwrap();
    }
    assert_eq!(syncs, 3);
    let files = Box::new(j).into_files();
    assert_eq!(files[0].size, 256 << 10);
    assert_eq!(files[0].dirty_blocks(), 16);
    assert_eq!(files[0].map.blocks(), 48);
}

#[test]
fn ops_caps_every_job() {
    let j = jobs_of("mixedlifetimes", 0.5).unwrap();
    let c: Vec<JobSpec> = j.jobs.into_iter().map(|s| capped(s, 20)).collect();
    assert_eq!(c[0].loops, 5); // 4 calls per loop
    assert_eq!(c[2].loops, 1); // 512 calls per loop
    assert_eq!(c[3].ios_per_loop(), 20);
    assert_eq!(planned_ios(&c), 20 + 20 + 512 + 32 * 20);
}

/// Group commit: an fdatasync during a commit waits for the next one, and every fdatasync that
/// arrives before that next one starts returns with it.
#[test]
fn fdatasyncs_during_a_commit_share_the_next() {
    let mut c = CommitClock::new(Latency::fixed(10), Rng::new(1));
    assert_eq!(c.wait(0), 10); // idle journal: a commit at once
    assert_eq!(c.wait(3), 20); // during it: the next, 10..20
    assert_eq!(c.wait(9), 20); // joins that one
    assert_eq!(c.wait(12), 30); // during 10..20: 20..30
    assert_eq!(c.wait(45), 55); // idle again
    assert_eq!(c.mean_wait_us(), (10 + 17 + 11 + 18 + 10) as f64 / 5.0);
}

/// The journal job closes a transaction when a commit starts and releases its frees when it
/// ends; jbd2's timer starts one 5 s after the last when nobody waits.
#[test]
fn commits_release_frees_at_their_end_on_the_clock() {
    let fs = small_fs();
    fs.journal().set_timed();
    let a = fs.allocator_arc();
    let clock = Arc::new(Mutex::new(
        CommitClock::new(Latency::fixed(100), Rng::new(1)).with_journal_job(),
    ));
    let mut jj = JournalJob::new(Arc::clone(&clock));
    let mut t = fs.task(0);
    assert_eq!(jj.next_at(), None);
    let mut f = fs.create();
    t.fallocate(&mut f, 0, MIB, false).unwrap();
    t.unlink(f).unwrap();
    assert_eq!(clock.lock().wait(50), 150);
    assert_eq!(jj.next_at(), Some(50));
    jj.step(&mut t).unwrap(); // starts: the unlink is in it
    let mut g = fs.create();
    t.fallocate(&mut g, 0, MIB, false).unwrap();
    t.unlink(g).unwrap(); // during the commit: the next transaction
    assert_eq!(jj.next_at(), Some(150));
    assert_eq!(a.pending_blocks(), 512);
    jj.step(&mut t).unwrap(); // ends
    assert_eq!(a.pending_blocks(), 256);
    assert_eq!(jj.next_at(), None);
    // Nobody syncs: the timer commits once the transaction is 5 s old, not before.
    clock.lock().timer(50 + COMMIT_INTERVAL_US - 1);
    assert_eq!(jj.next_at(), None);
    clock.lock().timer(50 + COMMIT_INTERVAL_US);
    assert_eq!(jj.next_at(), Some(50 + COMMIT_INTERVAL_US));
    jj.step(&mut t).unwrap();
    jj.step(&mut t).unwrap();
    assert_eq!(a.pending_blocks(), 0);
    assert!(!jj.counts_ops());
}

/// `test` at scale 0.5 on 8 GiB, linux-6.18, seed 1, at most `ops` I/Os per job.
fn half_scale(test: &str, ops: u64, extra: &[&str]) -> crate::workload::RunResult {
    half_scale_seed(test, ops, 1, extra)
}

/// [`half_scale`] with another seed.
fn half_scale_seed(test: &str, ops: u64, seed: u64, extra: &[&str]) -> crate::workload::RunResult {
    let mut settings = vec!["scale=0.5".to_string(), format!("ops={ops}")];
    settings.extend(extra.iter().map(|s| s.to_string()));
    let cfg = crate::workload::RunConfig {
        workload: test.into(),
        policy: mballoc::Policy::Linux618,
        settings,
        threads: 1,
        fs_size: 8 << 30,
        seed,
        quick: false,
        load_cost_ns: 0,
        image: None,
    };
    crate::workload::run(&cfg, &crate::workload::NoProgress).unwrap()
}

/// `commit_clock=0` goes back to a commit at every fdatasync that wrote back data; by default
/// the 32 appenders share commits (group commit), far fewer than their fdatasyncs.
#[test]
fn the_commit_clock_setting_switches_group_commit() {
    let commits = |extra: &[&str]| half_scale("funnysizeslow", 20, extra).scalars["commits"];
    // 32 appenders × 19 fdatasyncs (none after a loop's last write), then the syncfs's.
    let each = commits(&["commit_clock=0"]);
    assert!(each >= (32 * 19) as f64, "{each}");
    let clocked = commits(&[]);
    assert!(
        clocked >= 19.0 && clocked < each / 4.0,
        "{clocked} of {each}"
    );
    assert!(crate::workload::settings::LabSettings::parse(&["commit_clock=2".into()]).is_err());
}

/// `falloc_start=1` holds foursizes' 1 GiB job back to its measured first call: the run ends
/// later on the simulated clock than with every job starting at once.
#[test]
fn measured_first_calls_delay_the_large_fallocate_jobs() {
    let elapsed = |extra: &[&str]| half_scale("foursizes", 4, extra).scalars["sim_elapsed_s"];
    let (at_once, measured) = (elapsed(&[]), elapsed(&["falloc_start=1"]));
    assert!(measured > at_once + 1.0, "{measured} vs {at_once}");
    assert!(crate::workload::settings::LabSettings::parse(&["falloc_start=2".into()]).is_err());
}

/// A test of fallocate jobs alone has no other draw than the fallocate latencies: with their
/// spread two seeds interleave the jobs differently and end apart; at the mean
/// (`falloc_spread=0`) every seed is the same run.
#[test]
fn fallocate_latency_spread_makes_the_seed_matter() {
    let end = |seed: u64, extra: &[&str]| {
        let r = half_scale_seed("correlatedlifetimes", 64, seed, extra);
        (r.scalars["sim_elapsed_s"], r.scalars["frag_pct_mean"])
    };
    assert_eq!(end(1, &["falloc_spread=0"]), end(2, &["falloc_spread=0"]));
    assert_ne!(end(1, &[]).0, end(2, &[]).0);
    assert_eq!(end(3, &[]), end(3, &[]));
    assert!(crate::workload::settings::LabSettings::parse(&["falloc_spread=x".into()]).is_err());
}
