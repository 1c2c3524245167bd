//! Thread scaling on W1 (will-it-scale `fallocate2`): thread `t` owns
//! a private 256-block file, inode `FIRST_FILE_INO + t`, that it fills 2 blocks per request at
//! its end, and frees whole when full (every extent freed, the inode's preallocations dropped,
//! a journal commit). Driven directly on one shared [`Allocator`] over a fresh mkfs.ext4 layout
//! ([`crate::mkfs::layout`]); the figure is allocations per second per thread, for 1, 2, …
//! threads under linux-6.16, linux-6.18 and proposed.
//!
//! Two request patterns ([`Pattern`]):
//!
//! * `fallocate2`, the headline: the requests ext4 itself sends for will-it-scale's
//!   `fallocate(fd, 0, offset, 8192)`. `ext4_alloc_file_blocks` sets
//!   `EXT4_GET_BLOCKS_NO_NORMALIZE` for a range of at most 32767 blocks, which
//!   `ext4_ext_map_blocks` passes to mballoc as `HINT_NOPREALLOC` beside `HINT_DATA`. So
//!   `ext4_mb_normalize_request` returns at once, no preallocation is ever made, and every
//!   request runs `ext4_mb_regular_allocator`: while the file is at most `mb_stream_req`
//!   (16) blocks, `ext4_mb_group_or_file` makes it a locality-group allocation; beyond that a
//!   stream allocation (`STREAM_ALLOC`), which starts its scan from the stream goal and
//!   records the group it found there: one global goal in linux-6.16, the inode's slot
//!   `ino % nr_global_goals` from linux-6.18 on (seed 000). The scan skips groups whose lock
//!   another thread holds (seed 001, not in linux-6.16), and `ext4_mb_prefetch` marks each
//!   group of its window with an atomic test-and-set, which seed 003 (proposed) makes a plain
//!   test first. The goal is the physical end of the last extent
//!   (`ext4_ext_find_goal`), or `ext4_inode_to_goal_block` for an empty file; the left
//!   neighbour comes from the extent list (`ext4_ext_search_left`); `i_size` is the size
//!   before this piece, since mode 0 raises `i_size` after each mapped piece. These are the
//!   requests of the lab's file layer (`fs::Task::fallocate`); a test below compares them
//!   request by request.
//! * `appenders`: plain `HINT_DATA` requests sized to their own end (`i_size` after the
//!   piece), aimed after the last extent, with no goal for an empty file.
//!   `ext4_mb_normalize_request` grows each 2-block request to a window,
//!   `ext4_mb_new_inode_pa` keeps the rest as an inode preallocation and
//!   `ext4_mb_use_inode_pa` serves most of the following requests from it, as for a buffered
//!   appender whose 2-block writebacks are normalised (without writeback's
//!   `DELALLOC_RESERVED | USE_RESERVED` flags). Kept beside `fallocate2` because it measures
//!   the other fast path, the preallocation hit, and is the shape of this benchmark's figures
//!   before `fallocate2` was added (which ran on an empty geometry with owners 1000 + `t`).
//!
//! Beside them, the machine's own ceiling, per pattern: the same threads, each on an allocator
//! of its own (linux-6.18), so nothing is shared but the machine. On a small VM two "cores"
//! rarely give twice the work of one; the shared figure is best read against this one,
//! measured in the same run.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mballoc::{Allocator, Extent, Flags, Geometry, Policy, Request};
use serde::Serialize;

use super::BenchError;
use crate::fs::{clamp_goal, inode_goal, FALLOC_MAX_REQUEST, FIRST_FILE_INO};
use crate::mkfs;

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
    /// Tunables set on top of every policy, the ceiling's included (`--set name=value`).
    pub settings: Vec<String>,
}

impl ThreadsConfig {
    pub fn full() -> ThreadsConfig {
        ThreadsConfig {
            file_blocks: 256,
            chunk: 2,
            fs_bytes: 16 << 30,
            seconds: 1.0,
            threads: thread_counts(),
            settings: Vec::new(),
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

/// How W1's requests are built. Both exist because they stress different paths: ext4's own
/// fallocate2 never preallocates and runs the regular allocator on every request, while
/// normalised appenders mostly hit their inode preallocation (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// What ext4 sends for a 2-block `fallocate`: `HINT_DATA | HINT_NOPREALLOC`, never
    /// normalised, group then stream allocation from the regular allocator.
    Fallocate2,
    /// Plain normalised requests: most are served from an inode preallocation.
    Appenders,
}

impl Pattern {
    pub const ALL: [Pattern; 2] = [Pattern::Fallocate2, Pattern::Appenders];

    pub fn name(self) -> &'static str {
        match self {
            Pattern::Fallocate2 => "fallocate2",
            Pattern::Appenders => "appenders",
        }
    }

    /// One line for the report's heading.
    pub fn describe(self) -> &'static str {
        match self {
            Pattern::Fallocate2 => {
                "ext4's fallocate2 requests: HINT_DATA | HINT_NOPREALLOC, never normalised, no \
                 preallocation; locality-group then stream allocation on every request"
            }
            Pattern::Appenders => {
                "normalised appenders: plain HINT_DATA requests, most served from an inode \
                 preallocation"
            }
        }
    }
}

/// The file system W1 runs on: a fresh mkfs.ext4 layout, its metadata in use as in the lab's
/// workloads, and its inodes per group, which place an empty file's first goal.
pub(crate) struct Volume {
    pub(crate) geo: Geometry,
    used: Vec<(u64, u64)>,
    inodes_per_group: u32,
}

impl Volume {
    pub(crate) fn new(bytes: u64) -> Result<Volume, BenchError> {
        let l = mkfs::layout(bytes)?;
        let geo = Geometry::new(
            mkfs::BLOCK_SIZE as u32,
            l.blocks_per_group,
            l.blocks_count,
            0,
            l.flex_bg_size,
        )?;
        Ok(Volume {
            geo,
            used: l.used,
            inodes_per_group: l.inodes_per_group,
        })
    }

    /// A volume of a given geometry and in-use ranges (an image's).
    #[cfg(feature = "vcpus")]
    pub(crate) fn from_parts(
        geo: Geometry,
        used: Vec<(u64, u64)>,
        inodes_per_group: u32,
    ) -> Volume {
        Volume {
            geo,
            used,
            inodes_per_group,
        }
    }

    /// The layout's metadata in use, as absolute `(start, len)` ranges (the seed 003
    /// filesystems of the `vcpus` build add their fill to it).
    #[cfg_attr(not(feature = "vcpus"), allow(dead_code))]
    pub(crate) fn used(&self) -> &[(u64, u64)] {
        &self.used
    }

    /// A freshly mounted allocator over this volume under `p` with `settings` on top, for
    /// `cpus` CPUs.
    pub(crate) fn allocator(
        &self,
        p: Policy,
        cpus: u32,
        settings: &[String],
    ) -> Result<Allocator, BenchError> {
        Ok(Allocator::builder(self.geo)
            .used(&self.used)
            .cpus(cpus)
            .tunables(super::tunables(p, &self.geo, cpus, settings)?)
            .build()?)
    }
}

/// One thread's private file: its inode, extents and the next logical block.
pub(crate) struct File {
    ino: u64,
    extents: Vec<Extent>,
    pub(crate) place: u32,
}

impl File {
    pub(crate) fn new(ino: u64) -> File {
        File {
            ino,
            extents: Vec::new(),
            place: 0,
        }
    }

    /// The file's inode number.
    #[cfg_attr(not(feature = "vcpus"), allow(dead_code))]
    pub(crate) fn ino(&self) -> u64 {
        self.ino
    }

    /// The next W1 request: `chunk` blocks at `place`, built as `pattern` builds it.
    pub(crate) fn request(&self, pattern: Pattern, chunk: u32, cpu: u32, vol: &Volume) -> Request {
        match pattern {
            Pattern::Fallocate2 => self.fallocate_request(chunk, cpu, vol),
            Pattern::Appenders => self.append_request(chunk, cpu, vol),
        }
    }

    /// `fallocate(fd, 0, place · bs, chunk · bs)` as `fs::Task::fallocate` builds it.
    fn fallocate_request(&self, chunk: u32, cpu: u32, vol: &Volume) -> Request {
        let geo = &vol.geo;
        let mut flags = Flags::HINT_DATA;
        if chunk <= FALLOC_MAX_REQUEST {
            flags |= Flags::HINT_NOPREALLOC;
        }
        let goal = self.extents.last().map_or_else(
            || inode_goal(geo, self.ino, vol.inodes_per_group),
            Extent::end,
        );
        let r = Request::new(self.ino, self.place, chunk)
            .with_goal(clamp_goal(geo, goal))
            .with_flags(flags)
            .with_i_size(u64::from(self.place) * u64::from(geo.block_size()))
            .with_cpu(cpu)
            .with_open_for_write(true);
        match self.extents.last() {
            Some(last) => r.with_left(self.place - 1, last.end() - 1),
            None => r,
        }
    }

    /// The appenders' request: sized to its own end, aimed after the last extent if any.
    fn append_request(&self, chunk: u32, cpu: u32, vol: &Volume) -> Request {
        let bs = u64::from(vol.geo.block_size());
        let r = Request::new(self.ino, self.place, chunk)
            .with_cpu(cpu)
            .with_i_size(u64::from(self.place + chunk) * bs);
        match self.extents.last() {
            Some(last) => r
                .with_goal(last.end())
                .with_left(self.place - 1, last.end() - 1),
            None => r,
        }
    }

    /// The file's extents, adjacent pieces merged.
    #[cfg_attr(not(feature = "vcpus"), allow(dead_code))]
    pub(crate) fn extents(&self) -> &[Extent] {
        &self.extents
    }

    pub(crate) fn add(&mut self, e: Extent) {
        self.place += e.len;
        match self.extents.last_mut() {
            Some(l) if l.end() == e.start => l.len += e.len,
            _ => self.extents.push(e),
        }
    }

    /// Truncate to 0: free every extent, drop the PAs, commit.
    pub(crate) fn truncate(&mut self, a: &Allocator) -> Result<(), BenchError> {
        self.truncate_uncommitted(a)?;
        a.commit()?;
        Ok(())
    }

    /// [`File::truncate`] without the commit: the freed blocks wait for the next one.
    pub(crate) fn truncate_uncommitted(&mut self, a: &Allocator) -> Result<(), BenchError> {
        for e in self.extents.drain(..) {
            a.free(self.ino, e)?;
        }
        a.discard_preallocations(self.ino);
        self.place = 0;
        Ok(())
    }
}

/// Runs W1 with `pattern`, one thread per entry of `allocs` (the same allocator repeated, or
/// one each), for `seconds`; returns the total allocations.
fn run_point(
    allocs: &[&Allocator],
    pattern: Pattern,
    vol: &Volume,
    cfg: &ThreadsConfig,
) -> Result<u64, BenchError> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0u32..)
            .zip(allocs)
            .map(|(t, &a)| {
                let stop = &stop;
                s.spawn(move || -> Result<u64, BenchError> {
                    let mut f = File::new(FIRST_FILE_INO + u64::from(t));
                    let mut ops = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let got = a.allocate(&f.request(pattern, cfg.chunk, t, vol))?;
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

/// One (pattern, policy, thread count) point.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadsPoint {
    pub pattern: Pattern,
    pub system: String,
    pub policy: String,
    pub threads: u32,
    /// Median over runs of allocations per second, all threads together.
    pub ops_per_s: f64,
    pub ops_per_s_per_thread: f64,
    /// ns per allocation per thread (`1e9 / ops_per_s_per_thread`).
    pub ns_per_op: f64,
    /// `ops_per_s(T) / (T · ops_per_s(1))` (will-it-scale's scalability), same pattern and
    /// policy.
    pub scalability: f64,
    pub runs_ops_per_s: Vec<f64>,
    /// This point's `ns_per_op` over every other point's of the same pattern.
    pub ratio_vs: BTreeMap<String, f64>,
}

/// The thread-scaling report. Every summary map is keyed by pattern first.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadsReport {
    pub config: ThreadsConfig,
    pub runs: u32,
    pub points: Vec<ThreadsPoint>,
    /// `ops/s per thread` at 2 threads over 1 thread, per policy.
    pub two_vs_one: BTreeMap<Pattern, BTreeMap<String, f64>>,
    /// linux-6.18 over linux-6.16 per-thread rate, per thread count.
    pub v618_vs_v616: BTreeMap<Pattern, BTreeMap<u32, f64>>,
    /// proposed over linux-6.18 per-thread rate, per thread count.
    pub proposed_vs_v618: BTreeMap<Pattern, BTreeMap<u32, f64>>,
    /// The machine's ceiling per thread count above 1: the per-thread rate of that many
    /// threads on allocators of their own (linux-6.18) over one thread's on a shared one.
    pub ceiling: BTreeMap<Pattern, BTreeMap<u32, f64>>,
    /// Runs (allocations per second, all threads together) behind `ceiling`.
    pub ceiling_runs_ops_per_s: BTreeMap<Pattern, BTreeMap<u32, Vec<f64>>>,
}

const POLICIES: [Policy; 3] = [Policy::Linux616, Policy::Linux618, Policy::Proposed];
/// The policy of the ceiling runs.
const CEILING_POLICY: Policy = Policy::Linux618;

/// `a / b`, or 0 when `b` is not positive (a point that measured nothing).
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// Runs W1 for every pattern, policy and thread count, `runs` times each, interleaved: run 1
/// of every point (ceilings included), then run 2, … so that the VM's drifts hit all alike.
pub fn run_threads(cfg: &ThreadsConfig, runs: u32) -> Result<ThreadsReport, BenchError> {
    let vol = Volume::new(cfg.fs_bytes)?;
    let keys: Vec<(Pattern, Policy, u32)> = Pattern::ALL
        .iter()
        .flat_map(|&pat| {
            POLICIES
                .iter()
                .flat_map(move |&p| cfg.threads.iter().map(move |&t| (pat, p, t)))
        })
        .collect();
    let cpus = cfg.threads.iter().copied().max().unwrap_or(1);
    let timed = |allocs: &[&Allocator], pattern: Pattern| -> Result<f64, BenchError> {
        let t0 = Instant::now();
        let ops = run_point(allocs, pattern, &vol, cfg)?;
        Ok(ops as f64 / t0.elapsed().as_secs_f64())
    };
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); keys.len()];
    let mut own: BTreeMap<Pattern, BTreeMap<u32, Vec<f64>>> = BTreeMap::new();
    for _ in 0..runs.max(1) {
        for (i, &(pat, p, t)) in keys.iter().enumerate() {
            let a = vol.allocator(p, cpus, &cfg.settings)?;
            rates[i].push(timed(&vec![&a; t as usize], pat)?);
        }
        for pat in Pattern::ALL {
            for &t in cfg.threads.iter().filter(|&&t| t > 1) {
                let each: Vec<Allocator> = (0..t)
                    .map(|_| vol.allocator(CEILING_POLICY, cpus, &cfg.settings))
                    .collect::<Result<_, _>>()?;
                let refs: Vec<&Allocator> = each.iter().collect();
                let rate = timed(&refs, pat)?;
                own.entry(pat).or_default().entry(t).or_default().push(rate);
            }
        }
    }
    let points = summarise_points(&keys, &rates);
    Ok(ThreadsReport {
        config: cfg.clone(),
        runs: runs.max(1),
        two_vs_one: two_vs_one(&points),
        v618_vs_v616: policy_ratio(&points, &cfg.threads, Policy::Linux618, Policy::Linux616),
        proposed_vs_v618: policy_ratio(&points, &cfg.threads, Policy::Proposed, Policy::Linux618),
        ceiling: ceiling(&points, &own),
        ceiling_runs_ops_per_s: own
            .into_iter()
            .map(|(pat, by_t)| {
                let rounded = by_t
                    .into_iter()
                    .map(|(t, r)| (t, r.iter().map(|v| v.round()).collect()))
                    .collect();
                (pat, rounded)
            })
            .collect(),
        points,
    })
}

/// The points from each key's runs: medians, per-thread rates, scalability and, within each
/// pattern, the ratios between points.
fn summarise_points(keys: &[(Pattern, Policy, u32)], rates: &[Vec<f64>]) -> Vec<ThreadsPoint> {
    let mut points: Vec<ThreadsPoint> = keys
        .iter()
        .zip(rates)
        .map(|(&(pat, p, t), r)| {
            let total = super::median(r);
            let per = total / f64::from(t);
            ThreadsPoint {
                pattern: pat,
                system: format!("mballoc/{} x{t}", p.name()),
                policy: p.name().into(),
                threads: t,
                ops_per_s: total,
                ops_per_s_per_thread: per,
                ns_per_op: ratio(1e9, per),
                scalability: 0.0,
                runs_ops_per_s: r.iter().map(|v| v.round()).collect(),
                ratio_vs: BTreeMap::new(),
            }
        })
        .collect();
    let snapshot = points.clone();
    for q in &mut points {
        let one = per_thread(&snapshot, q.pattern, &q.policy, 1);
        q.scalability = ratio(q.ops_per_s_per_thread, one);
    }
    for pat in Pattern::ALL {
        let mut of_pattern: Vec<&mut ThreadsPoint> =
            points.iter_mut().filter(|q| q.pattern == pat).collect();
        super::fill_ratios(
            &mut of_pattern,
            |q| (&q.system, q.ns_per_op),
            |q| &mut q.ratio_vs,
        );
    }
    points
}

/// The per-thread rate of one point (0 if it was not measured).
fn per_thread(points: &[ThreadsPoint], pat: Pattern, policy: &str, t: u32) -> f64 {
    points
        .iter()
        .find(|q| q.pattern == pat && q.policy == policy && q.threads == t)
        .map_or(0.0, |q| q.ops_per_s_per_thread)
}

/// Per pattern and policy: the per-thread rate at 2 threads over 1 thread's.
fn two_vs_one(points: &[ThreadsPoint]) -> BTreeMap<Pattern, BTreeMap<String, f64>> {
    Pattern::ALL
        .iter()
        .map(|&pat| {
            let by_policy = POLICIES
                .iter()
                .map(|p| {
                    let (one, two) = (
                        per_thread(points, pat, p.name(), 1),
                        per_thread(points, pat, p.name(), 2),
                    );
                    (p.name().to_string(), ratio(two, one))
                })
                .collect();
            (pat, by_policy)
        })
        .collect()
}

/// Per pattern and thread count: `new`'s per-thread rate over `old`'s.
fn policy_ratio(
    points: &[ThreadsPoint],
    threads: &[u32],
    new: Policy,
    old: Policy,
) -> BTreeMap<Pattern, BTreeMap<u32, f64>> {
    Pattern::ALL
        .iter()
        .map(|&pat| {
            let by_t = threads
                .iter()
                .map(|&t| {
                    let (n, o) = (
                        per_thread(points, pat, new.name(), t),
                        per_thread(points, pat, old.name(), t),
                    );
                    (t, ratio(n, o))
                })
                .collect();
            (pat, by_t)
        })
        .collect()
}

/// Per pattern and thread count: the ceiling runs' per-thread rate over one thread's on a
/// shared allocator, both under [`CEILING_POLICY`].
fn ceiling(
    points: &[ThreadsPoint],
    own: &BTreeMap<Pattern, BTreeMap<u32, Vec<f64>>>,
) -> BTreeMap<Pattern, BTreeMap<u32, f64>> {
    own.iter()
        .map(|(&pat, by_t)| {
            let one = per_thread(points, pat, CEILING_POLICY.name(), 1);
            let per_t = by_t
                .iter()
                .map(|(&t, r)| (t, ratio(super::median(r) / f64::from(t), one)))
                .collect();
            (pat, per_t)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use mballoc::{Allocation, PaKind, Source};

    use super::*;
    use crate::fs::{Fs, Recorder};

    /// Two groups: the inode goal (group 1) exists, and a build takes no time.
    const FS_BYTES: u64 = 256 << 20;
    const FILE_BLOCKS: u32 = 256;
    const CHUNK: u32 = 2;

    /// One file of `pattern` filled from empty to `FILE_BLOCKS` on `a` by thread 0: the file
    /// and every request with its answer.
    fn fill(pattern: Pattern, vol: &Volume, a: &Allocator) -> (File, Vec<(Request, Allocation)>) {
        let mut f = File::new(FIRST_FILE_INO);
        let mut log = Vec::new();
        while f.place < FILE_BLOCKS {
            let r = f.request(pattern, CHUNK, 0, vol);
            let got = a.allocate(&r).unwrap();
            f.add(got.extent);
            log.push((r, got));
        }
        (f, log)
    }

    #[test]
    fn fallocate2_sends_what_the_file_layer_sends() {
        let vol = Volume::new(FS_BYTES).unwrap();
        let a = vol.allocator(Policy::Linux618, 1, &[]).unwrap();
        let (_, bench) = fill(Pattern::Fallocate2, &vol, &a);

        // will-it-scale's loop through the lab's file layer, on an identical allocator.
        let alloc = Arc::new(vol.allocator(Policy::Linux618, 1, &[]).unwrap());
        let fs = Fs::new(alloc, vol.inodes_per_group, u64::MAX).unwrap();
        let mut t = fs.task(0);
        t.rec = Recorder::logging();
        let mut f = fs.create();
        assert_eq!(f.ino, FIRST_FILE_INO);
        let piece = u64::from(CHUNK) * 4096;
        for i in 0..u64::from(FILE_BLOCKS / CHUNK) {
            t.fallocate(&mut f, i * piece, piece, false).unwrap();
        }
        let layer = t.rec.log.unwrap();

        assert_eq!(bench.len(), layer.len());
        for ((r, got), (want, placed)) in bench.iter().zip(&layer) {
            assert_eq!(r, want);
            assert_eq!(got.extent, *placed, "{r:?}");
        }
    }

    #[test]
    fn fallocate2_never_preallocates_and_streams_past_the_small_file_phase() {
        let vol = Volume::new(FS_BYTES).unwrap();
        let first_group = inode_goal(&vol.geo, FIRST_FILE_INO, vol.inodes_per_group)
            / u64::from(vol.geo.clusters_per_group());
        for p in POLICIES {
            let a = vol.allocator(p, 2, &[]).unwrap();
            let free = a.free_blocks();
            let stream_req = a.tunables().mb_stream_req;
            let (mut f, log) = fill(Pattern::Fallocate2, &vol, &a);
            // The empty file's goal is its inode's (`ext4_inode_to_goal_block`), not block 0.
            assert_eq!(u64::from(log[0].1.goal.group), first_group, "{p}");
            let (mut group, mut stream) = (0, 0);
            for (r, got) in &log {
                assert!(
                    got.new_pa.is_none() && got.pa_used.is_none(),
                    "{p}: {got:?}"
                );
                assert_eq!(got.source, Source::Scan, "{p}");
                if r.logical + r.len <= stream_req {
                    assert!(got.flags.contains(Flags::HINT_GROUP_ALLOC), "{p}: {got:?}");
                    group += 1;
                } else {
                    assert!(got.flags.contains(Flags::STREAM_ALLOC), "{p}: {got:?}");
                    assert!(!got.flags.contains(Flags::HINT_GROUP_ALLOC), "{p}: {got:?}");
                    stream += 1;
                }
                assert!(a.preallocations().is_empty(), "{p}");
            }
            assert_eq!(
                (group, stream),
                (stream_req / CHUNK, (FILE_BLOCKS - stream_req) / CHUNK)
            );
            assert_eq!(a.stats().preallocated, 0, "{p}");
            f.truncate(&a).unwrap();
            assert_eq!(
                a.free_blocks(),
                free,
                "{p}: the truncate gave every block back"
            );
        }
    }

    #[test]
    fn appenders_are_served_from_inode_preallocations() {
        let vol = Volume::new(FS_BYTES).unwrap();
        for p in POLICIES {
            let a = vol.allocator(p, 2, &[]).unwrap();
            let free = a.free_blocks();
            let (mut f, log) = fill(Pattern::Appenders, &vol, &a);
            let made = log
                .iter()
                .filter(|(_, g)| g.new_pa.is_some_and(|pa| pa.kind == PaKind::Inode))
                .count();
            let hits = log
                .iter()
                .filter(|(_, g)| g.source == Source::Prealloc && g.pa_used == Some(PaKind::Inode))
                .count();
            assert!(made > 0, "{p}: no inode preallocation made");
            assert!(2 * hits > log.len(), "{p}: {hits} PA hits of {}", log.len());
            assert!(a.stats().preallocated > 0, "{p}");
            f.truncate(&a).unwrap();
            assert!(
                a.preallocations().is_empty(),
                "{p}: the truncate dropped them"
            );
            assert_eq!(a.free_blocks(), free, "{p}");
        }
    }
}
