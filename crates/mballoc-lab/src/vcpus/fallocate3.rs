//! Seed 003's thread curves on virtual CPUs: will-it-scale's fallocate3 (open-s4c fork) on
//! seed 003's filesystems, base (`prefetch_test_before_set=0`, linux-6.18's walk) against
//! patched (`=1`), 1 to 128 virtual CPUs, beside the published tables.
//!
//! The loop of one task (`tests/fallocate3.c`): `open(O_TRUNC)` of its own file (freeing the
//! last round's blocks), one `fallocate(FALLOC_FL_KEEP_SIZE)` of 73,819,750 bytes (18,023
//! blocks: the allocator is called until all are placed, each call aimed after the last
//! extent), `close`. Freed blocks wait for jbd2's next commit (every 5 s of virtual time), as in
//! the kernel, so a task cannot reuse the blocks it just freed.
//!
//! The filesystem: a fresh mkfs layout of the published size, each group filled to the
//! published use with 2-16 holes of random sizes at random places (`workload::prefill`,
//! `Holes::Random`, seed [`Config::fill_seed`], 1 unless a caller asks for another: the lab's
//! stated pattern for aged filesystems, not tuned to these figures), mounted cold: no bitmap
//! in memory (`lazy`), every group read from the device when first needed (`super::io`: a
//! read of the device class's service time, on a queue of its depth), prefetch reads
//! submitted without waiting. One task first runs alone on the
//! cold mount (`Config::mount_ops`: the reads of a first use, reported as the time to the
//! first operation); then the N tasks run, each counting its operations after a warm-up one,
//! as will-it-scale drops its first samples. So the rates are those of a filesystem whose
//! bitmaps the walks need are in memory, as on the seed's "existing" filesystems; groups no
//! walk reached before are read when first needed, in the rates.
//!
//! Costs come from the kernel's own fallocate3 on this machine (`Costs::fallocate3`): on an
//! aged 802 GiB image at 68 % use, one task, the time inside `ext4_mb_new_blocks` per
//! operation over the model's points for the same operations on the same layout is a point;
//! the rest of the operation (system calls, extent tree, truncate, journal handles) is
//! `outside_ns`, measured in the same traced window.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mballoc::vcpu::{self, Access, Hook};
use mballoc::{Allocator, MemSource, Policy};
use serde::Serialize;

use super::cost::{Costs, Machine};
use super::io::{Device, DeviceClass, IoStats};
use super::sched::{Sched, MAX_VCPUS};
use crate::bench::threads::{File, Pattern, Volume};
use crate::bench::BenchError;
use crate::fs::FIRST_FILE_INO;
use crate::workload::prefill::{prefill_ranges, union, Holes};

/// fallocate3's `FILESIZE`, in 4 KiB blocks (73,819,750 bytes).
pub const FILE_BLOCKS: u32 = 18_023;

/// `j_state_lock`'s line and the running transaction's line (as in the fallocate2 loop).
const J_STATE_LOCK: usize = 0x40;
const TRANSACTION: usize = 0x80;

/// jbd2's commit interval (`JBD2_DEFAULT_MAX_COMMIT_AGE`, 5 s): a truncate's frees wait for
/// the next commit, so a task cannot reuse the blocks it just freed (on the measured 802 GiB
/// image, committing at every truncate made the lab scan 20.9 groups an operation where the
/// kernel scanned 225.8; at the kernel's cadence, 233.8).
pub const COMMIT_AGE_NS: u64 = 5_000_000_000;

/// The scheduler's slack for these runs: an operation is thousands of points (the scan and
/// prefetch walks touch every group's state word), each a scheduling step; 1 µs of virtual
/// time (about ten points) is small against an operation (0.1-1 ms) and against a bitmap
/// read. Over a commit cycle at 8 vCPUs (802 GiB), 10 µs gave the same rates within 0.7 %.
pub const SLACK_NS: u64 = 1_000;

/// One of seed 003's filesystems.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Fs {
    /// The key of its rows in the published table (`seed003.csv`).
    pub id: &'static str,
    pub machine: &'static str,
    pub bytes: u64,
    /// Share of blocks in use, 0..1.
    pub used: f64,
    pub device: DeviceClass,
    /// Whether the seed shows it as the mostly free filesystem where the patch must be
    /// neutral (judged within ±5 % rather than by the published change's sign).
    pub neutral: bool,
}

const GIB: u64 = 1 << 30;

/// Seed 003's filesystems: its three "existing" ones and the six 133G images.
pub const FILESYSTEMS: [Fs; 9] = [
    fs(
        "802g-68",
        "Kunpeng 920b",
        802 * GIB,
        0.68,
        DeviceClass::SataSsd,
    ),
    fs("842g-31", "Kunpeng 920", 842 * GIB, 0.31, DeviceClass::Hdd),
    Fs {
        neutral: true,
        ..fs("15t-6", "AMD 9654", 15 << 40, 0.06, DeviceClass::Nvme)
    },
    fs(
        "133g-25-amd",
        "AMD 9654",
        133 * GIB,
        0.25,
        DeviceClass::Nvme,
    ),
    fs(
        "133g-50-amd",
        "AMD 9654",
        133 * GIB,
        0.50,
        DeviceClass::Nvme,
    ),
    fs(
        "133g-75-amd",
        "AMD 9654",
        133 * GIB,
        0.75,
        DeviceClass::Nvme,
    ),
    fs(
        "133g-25-kunpeng",
        "Kunpeng 920b",
        133 * GIB,
        0.25,
        DeviceClass::SataSsd,
    ),
    fs(
        "133g-50-kunpeng",
        "Kunpeng 920b",
        133 * GIB,
        0.50,
        DeviceClass::SataSsd,
    ),
    fs(
        "133g-75-kunpeng",
        "Kunpeng 920b",
        133 * GIB,
        0.75,
        DeviceClass::SataSsd,
    ),
];

impl Fs {
    /// fallocate3 operations the free space holds: each allocates a file's 18,023 blocks
    /// and frees the last one's, whose blocks come back only at the next commit, so between
    /// two commits the tasks together run at most this many (plus one in flight each)
    /// before the allocator finds no space and an ENOSPC forces a commit.
    pub fn free_space_ops(&self) -> f64 {
        self.free_space_ops_on(self.bytes)
    }

    /// [`Fs::free_space_ops`] on a volume of `bytes` filled to this filesystem's share (a
    /// point may run a smaller copy of it, [`Config::bytes`]).
    pub fn free_space_ops_on(&self, bytes: u64) -> f64 {
        (bytes / 4096) as f64 * (1.0 - self.used) / f64::from(FILE_BLOCKS)
    }

    /// The highest rate (ops/s) at which the free space lasts a whole commit interval: above
    /// it the tasks run out of space before jbd2's timer commits.
    pub fn interval_rate(&self) -> f64 {
        self.free_space_ops() * 1e9 / COMMIT_AGE_NS as f64
    }
}

const fn fs(
    id: &'static str,
    machine: &'static str,
    bytes: u64,
    used: f64,
    device: DeviceClass,
) -> Fs {
    Fs {
        id,
        machine,
        bytes,
        used,
        device,
        neutral: false,
    }
}

/// The filesystem named `id`.
pub fn filesystem(id: &str) -> Result<Fs, BenchError> {
    FILESYSTEMS
        .iter()
        .find(|f| f.id == id)
        .copied()
        .ok_or_else(|| {
            let ids: Vec<&str> = FILESYSTEMS.iter().map(|f| f.id).collect();
            BenchError::Peer(format!(
                "unknown seed 003 filesystem {id:?}; known: {}",
                ids.join(", ")
            ))
        })
}

/// One published figure: total ops/s of `tasks` tasks ("perf" in the seed's tables).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Published {
    pub fs: &'static str,
    pub tasks: u32,
    pub base: f64,
    pub patched: f64,
}

impl Published {
    pub fn change_pct(&self) -> f64 {
        100.0 * (self.patched / self.base - 1.0)
    }
}

/// The seed's tables, parsed from the stored copy (`seed003.csv`).
pub fn published() -> Vec<Published> {
    include_str!("seed003.csv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let id = f.first()?.trim();
            let fs = FILESYSTEMS.iter().find(|x| x.id == id)?;
            Some(Published {
                fs: fs.id,
                tasks: f.get(1)?.trim().parse().ok()?,
                base: f.get(2)?.trim().parse().ok()?,
                patched: f.get(3)?.trim().parse().ok()?,
            })
        })
        .collect()
}

/// One simulated configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub fs: Fs,
    /// The allocator's preset before the device's settings, the seed's switch and
    /// [`Config::tunables`] (`linux-6.18` in the seed's experiment).
    #[serde(serialize_with = "policy_name")]
    pub policy: Policy,
    /// `prefetch_test_before_set`: the seed's switch (false = base).
    pub patched: bool,
    /// Operations one task runs alone on the cold mount before the N tasks start.
    pub mount_ops: u32,
    /// Operations each task runs before its counted ones (the start, when every task's
    /// first call aims at the same place).
    pub warm_ops: u32,
    /// Operations counted over all tasks: each task counts `ops / N` (at least 2), so a
    /// point costs the host about the same at every N and the total stays near `ops`.
    /// Unused when `commit_cycles` > 0.
    pub ops: u32,
    /// When > 0, count the operations of this many whole commit cycles instead of `ops`
    /// (`Window::cycles`).
    pub commit_cycles: u32,
    /// jbd2's commit interval, ns (ext4's `commit=` mount option; 5 s by default).
    pub commit_interval_ns: u64,
    /// The kernel's hashed group locks (the lab's `bg_locks`; 0: one lock per group).
    pub bg_locks: u32,
    /// Every block bitmap in memory before the first task runs, as ext4's mount-time
    /// background prefetch leaves them once it has finished (the lazyinit request
    /// `EXT4_LI_MODE_PREFETCH_BBITMAP`, made unless `no_prefetch_block_bitmaps`). Off: a cold
    /// mount, each bitmap read from the device when first needed.
    pub cached_bitmaps: bool,
    /// Bytes of the filesystem actually built (`fs.bytes`, unless a test shrinks it).
    pub bytes: u64,
    /// The scheduler's slack (`Sched::with_device`).
    pub slack_ns: u64,
    /// Whose costs the tasks run on ([`Costs::fallocate3`]): the seed's servers keep this
    /// machine's work costs (`server`); `xeon16` its own kernel's.
    pub machine: Machine,
    /// An ext4 image whose layout the point runs on instead of `fs`'s fill (the image
    /// `scripts/kernel_fallocate3.py` aged and measured the kernel on).
    pub image: Option<std::path::PathBuf>,
    /// Count as the kernel script's `--tasks` runs do ([`Timed`]) instead of by operations
    /// or commit cycles.
    pub timed: Option<Timed>,
    /// The lab's `line_ns`: every line transfer and hand-off at this cost (a what-if).
    pub line_ns: Option<u64>,
    /// The lab's `line_overlap` ([`Costs::with_line_overlap`]; a what-if).
    pub line_overlap: bool,
    /// The lab's `walk_thunk` (default on): off, the prefetch walk's steps are priced as on a
    /// kernel without the return thunk ([`Costs::without_walk_thunk`]; a what-if).
    pub walk_thunk: bool,
    /// The seed of the random-hole fill (`Holes::Random`); which holes a fill makes is
    /// incidental, so a figure that changes with it is our noise (`reproduce` runs three).
    pub fill_seed: u64,
    /// Allocator tunables on top of the 6.18 preset and the seed's switch (a run's `--set
    /// name=value`), applied at the mount as every other point applies its settings; a
    /// later one wins, so `prefetch_test_before_set=1` here runs the patched side.
    pub tunables: Vec<String>,
}

fn policy_name<S: serde::Serializer>(p: &Policy, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.name())
}

/// The kernel script's protocol (`scripts/kernel_fallocate3.py --tasks`): every task starts
/// at once on the mounted filesystem and counts the operations it starts between `warm_ns`
/// and `warm_ns + count_ns` of its clock, over the time from `warm_ns` to the end of its last
/// counted one; a point is the sum of the tasks' rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Timed {
    pub warm_ns: u64,
    pub count_ns: u64,
}

impl Timed {
    /// The 16-core kernel's runs: 2 s of warm-up and 5 s counted (docs/measurements/
    /// kernel-fallocate3-xeon16.json).
    pub const KERNEL: Timed = Timed::seconds(2, 5);

    /// `warm` s of warm-up, `count` s counted.
    pub const fn seconds(warm: u64, count: u64) -> Timed {
        Timed {
            warm_ns: warm * 1_000_000_000,
            count_ns: count * 1_000_000_000,
        }
    }

    fn end_ns(self) -> u64 {
        self.warm_ns + self.count_ns
    }
}

impl Config {
    /// `fs` with the default counts: 2 operations alone on the cold mount, then per task 1
    /// not counted, and 16 counted over all tasks.
    pub fn new(fs: Fs, patched: bool) -> Config {
        Config {
            fs,
            policy: Policy::Linux618,
            patched,
            mount_ops: 2,
            warm_ops: 1,
            ops: 16,
            commit_cycles: 0,
            commit_interval_ns: COMMIT_AGE_NS,
            bg_locks: 0,
            cached_bitmaps: false,
            bytes: fs.bytes,
            slack_ns: SLACK_NS,
            machine: Machine::Server,
            image: None,
            timed: None,
            line_ns: None,
            line_overlap: false,
            walk_thunk: true,
            fill_seed: 1,
            tunables: Vec::new(),
        }
    }

    /// The settings beyond the seed's switch and the protocol, as `--set` spells them: the
    /// tunables, then the lab's line costs.
    pub fn extra_settings(&self) -> Vec<String> {
        let mut v = self.tunables.clone();
        v.extend(self.line_ns.map(|ns| format!("line_ns={ns}")));
        if self.line_overlap {
            v.push("line_overlap=1".into());
        }
        if !self.walk_thunk {
            v.push("walk_thunk=0".into());
        }
        if self.fill_seed != 1 {
            v.push(format!("fill={}", self.fill_seed));
        }
        v
    }

    /// The allocator settings of this point's mount: `first` (the device's), the seed's
    /// switch, then [`Config::tunables`].
    fn settings(&self, first: Vec<String>) -> Vec<String> {
        let mut v = first;
        v.push(format!(
            "prefetch_test_before_set={}",
            u8::from(self.patched)
        ));
        v.extend(self.tunables.iter().cloned());
        v
    }

    /// The kernel script's runs on its aged image, as `machine` ran them: the image's layout
    /// (or its layout file's) with every bitmap in memory (the kernel's mount-time prefetch
    /// reads them all within seconds of the mount: 0.9-3.4 s on this machine, most of it a
    /// random start delay, docs/measurements/kernel-prefetch-time.json; so by the end of the
    /// 2 s warm-up or early in the counted 5 s), no task alone first, counted as `timed`,
    /// base side.
    pub fn kernel_image(path: &std::path::Path, machine: Machine, timed: Timed) -> Config {
        Config {
            mount_ops: 0,
            cached_bitmaps: true,
            machine,
            image: Some(path.to_path_buf()),
            timed: Some(timed),
            ..Config::new(IMAGE_FS, false)
        }
    }
}

/// What a point on an image reports as its filesystem: the image gives its size and use
/// (so a point on one counts by time, [`Timed`], not by the free space's cycles); it was
/// mounted over a loop device on a file in the page cache (this machine's read cost).
pub const IMAGE_FS: Fs = Fs {
    id: "image",
    machine: "the measuring machine",
    bytes: 0,
    used: 0.0,
    device: DeviceClass::Local,
    neutral: false,
};

/// A workload's own filesystem, as `mballoc run fallocate3|seed003 --vcpus` runs it: `bytes`
/// with `used` of its blocks taken in random holes (`Holes::Random`, as the workload's
/// prefill), over this machine's device (a bitmap read of 10.2 µs, one at a time). It has no
/// published rows.
pub fn lab_fs(id: &'static str, bytes: u64, used: f64) -> Fs {
    Fs {
        machine: "this machine",
        ..fs(id, "", bytes, used, DeviceClass::Local)
    }
}

impl Config {
    /// Counts `ops` operations over all tasks ([`Config::ops`]) where given.
    pub fn with_ops(self, ops: Option<u64>) -> Config {
        Config {
            ops: ops.map_or(self.ops, |n| u32::try_from(n).unwrap_or(u32::MAX)),
            ..self
        }
    }

    /// Counts `cycles` whole commit cycles ([`Config::commit_cycles`]; 0: a few operations
    /// after the mount).
    pub fn with_commit_cycles(self, cycles: u32) -> Config {
        Config {
            commit_cycles: cycles,
            ..self
        }
    }
}

/// No task runs past this much virtual time (a guard against a run that never ends).
const MAX_VIRTUAL_NS: u64 = 60_000_000_000;

/// One point of a curve.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub vcpus: u32,
    /// Total ops/s of all tasks (the seed's "perf"): the sum of each task's rate over its
    /// counted operations.
    pub ops_per_s: f64,
    /// Operations the rate counts, all tasks, and the virtual time they span (ns; per task,
    /// summed, when counting operations; the commit cycles' when counting cycles).
    pub counted_ops: u64,
    pub window_ns: u64,
    /// Virtual time of the first operation on the cold mount, ns (the reads it waits for).
    pub first_op_ns: u64,
    /// The device on the cold mount, then while the N tasks ran.
    pub mount_io: IoStats,
    pub io: IoStats,
    /// Bitmaps loaded while the N tasks ran, prefetch reads among them.
    pub bitmap_loads: u64,
    pub prefetch_loads: u64,
    /// Journal commits while the N tasks ran (every 5 s of virtual time, or forced by an
    /// ENOSPC; and one as each task ends): a truncate's frees wait for one.
    pub commits: u64,
    /// The tasks' own commits (timer or ENOSPC; not the ones as each task ends), and those
    /// forced by an ENOSPC (`ext4_should_retry_alloc`).
    pub journal_commits: u64,
    pub forced_commits: u64,
    /// Short commit cycles the window holds besides its full ones (`Cycles::full`).
    pub short_cycles: u64,
    /// Per counted operation, as the kernel script's `--trace-tasks` counts them ([`Timed`]
    /// windows only): allocator calls, groups scanned, and µs inside the allocator (summed over
    /// the tasks, waits included).
    pub window_calls_per_op: Option<f64>,
    pub window_groups_per_op: Option<f64>,
    pub window_alloc_us_per_op: Option<f64>,
    /// When each of the tasks' commits ended, virtual ns from the tasks' start (the kernel
    /// script's `--commits` records when each began; the model's commits take no time).
    pub commits_ns: Vec<u64>,
    /// Groups whose buddy was searched, per operation of the N tasks.
    pub groups_scanned_per_op: f64,
    /// Cache lines moved between CPUs, per operation of the N tasks (the group state words
    /// linux-6.18's prefetch walk writes are among them).
    pub line_transfers_per_op: f64,
    /// Host seconds (not deterministic).
    #[serde(skip)]
    pub real_s: f64,
}

/// The allocator and volume of a point: seed 003's fs (or the image's layout), cold, or
/// with every bitmap in memory ([`Config::cached_bitmaps`]: read before the point begins,
/// so those reads cost it nothing, in virtual time or the host's).
fn mount(cfg: &Config, n: u32) -> Result<(Volume, Allocator), BenchError> {
    match &cfg.image {
        Some(path) => mount_image(
            path,
            cfg.policy,
            n.max(2),
            &cfg.settings(Vec::new()),
            !cfg.cached_bitmaps,
        ),
        None if cfg.cached_bitmaps => mount_with(cfg, n, 0),
        None => mount_with(cfg, n, cfg.fs.device.service_ns()),
    }
}

/// An allocator over an ext4 image's layout, or a layout file's ([`crate::image::Layout`]),
/// for `cpus` CPUs, the 6.18 preset with `settings`; `lazy`: bitmaps read when first needed.
fn mount_image(
    path: &std::path::Path,
    policy: Policy,
    cpus: u32,
    settings: &[String],
    lazy: bool,
) -> Result<(Volume, Allocator), BenchError> {
    use crate::image::{Image, ImageStart, Layout, OpenOptions};
    let peer = |e: &dyn std::fmt::Display| BenchError::Peer(format!("{}: {e}", path.display()));
    let layout = if Layout::is_layout_file(path) {
        Layout::load(path).map_err(|e| peer(&e))?
    } else {
        let img = Image::open(path, OpenOptions::default()).map_err(|e| peer(&e))?;
        Layout::of_image(&ImageStart::load(&img).map_err(|e| peer(&e))?)
    };
    let vol = Volume::from_parts(layout.geo, layout.used.clone(), layout.inodes_per_group);
    let a = Allocator::builder(layout.geo)
        .source(Box::new(layout.source()?))
        .cpus(cpus)
        .tunables(crate::bench::tunables(policy, &layout.geo, cpus, settings)?)
        .lazy(lazy)
        .prefetch_threads(0)
        .build()?;
    Ok((vol, a))
}

/// [`mount`] with reads of `read_ns` each (0 for the plain timings of [`time_operations`]).
fn mount_with(cfg: &Config, n: u32, read_ns: u64) -> Result<(Volume, Allocator), BenchError> {
    let vol = Volume::new(cfg.bytes)?;
    let geo = vol.geo;
    let used = union(
        vol.used(),
        &prefill_ranges(&geo, cfg.fs.used, Holes::Random, cfg.fill_seed),
    );
    let dev = MemSource::new(geo, &used)?.with_load_cost(std::time::Duration::from_nanos(read_ns));
    let cpus = n.max(2);
    let settings = cfg.settings(cfg.fs.device.mount_settings());
    let a = Allocator::builder(geo)
        .source(Box::new(dev))
        .cpus(cpus)
        .tunables(crate::bench::tunables(cfg.policy, &geo, cpus, &settings)?)
        .lazy(!cfg.cached_bitmaps)
        .prefetch_threads(0)
        .build()?;
    Ok((vol, a))
}

/// The allocator's part of one fallocate3 operation: the truncate of `open(O_TRUNC)`, then
/// the fallocate's calls until the file's blocks are placed.
fn allocator_part(
    a: &Allocator,
    vol: &Volume,
    f: &mut File,
    cpu: u32,
    commit: bool,
) -> Result<(), BenchError> {
    if commit {
        f.truncate(a)?;
    } else {
        f.truncate_uncommitted(a)?;
    }
    while f.place < FILE_BLOCKS {
        let req = f.request(Pattern::Fallocate2, FILE_BLOCKS - f.place, cpu, vol);
        let got = a.allocate(&req)?;
        f.add(got.extent);
    }
    Ok(())
}

/// Counts the synchronisation points the scheduler would see, and does nothing else: every
/// point, and of them the prefetch walk's steps (sets, tests).
#[derive(Default)]
struct PointCounter(std::cell::Cell<u64>, std::cell::Cell<[u64; 2]>);

impl PointCounter {
    fn bump(&self) {
        self.0.set(self.0.get() + 1);
    }
}

impl Hook for PointCounter {
    fn lock(&self, _: usize, _: &'static str) {
        self.bump();
    }
    fn try_lock(&self, _: usize, _: &'static str) -> bool {
        self.bump();
        true
    }
    fn unlock(&self, _: usize, _: &'static str) {
        self.bump();
    }
    fn is_locked(&self, _: usize, _: &'static str) -> bool {
        self.bump();
        false
    }
    fn wait(&self, _: usize, _: usize, _: &'static str) {}
    fn notify_all(&self, _: usize) {}
    fn atomic(&self, _: usize, _: Access) {
        self.bump();
    }
    fn walk_step(&self, _: usize, rmw: bool) {
        self.bump();
        let mut w = self.1.get();
        w[usize::from(!rmw)] += 1;
        self.1.set(w);
    }
    fn folio_ref(&self, _: u64) {
        self.bump();
    }
}

/// What the library's own fallocate3 operation costs on this machine, one task, reads free.
#[derive(Debug, Clone, Serialize)]
pub struct OpTiming {
    pub fs: &'static str,
    pub patched: bool,
    /// Median over `reps` of the mean real ns of an operation's allocator part, no hook.
    pub ns_per_op: f64,
    /// Synchronisation points of an operation (the same operations under a counting hook).
    pub points_per_op: f64,
    pub ns_per_point: f64,
    /// Of those points, the prefetch walk's steps: test-and-sets (linux-6.18's, and seed
    /// 003's of a clear mark) and plain tests (seed 003's of a set one).
    pub walk_sets_per_op: f64,
    pub walk_tests_per_op: f64,
    /// Allocator calls per operation (`ext4_mb_new_blocks`).
    pub calls_per_op: f64,
    /// Groups whose buddy was searched, per operation (`ac_groups_scanned`).
    pub groups_scanned_per_op: f64,
}

/// Times `ops` operations of one task on `cfg`'s filesystem, `reps` times, after the cold mount's
/// operations and a warm-up one (reads cost nothing here: what is timed is the walk and
/// scan work between the points), and counts their points. The measurement behind
/// `mballoc bench threads --calibrate --seed003 FS` (docs/vcpus/seed-003.md, "What a point
/// of fallocate3 costs").
pub fn time_operations(cfg: &Config, ops: u32, reps: u32) -> Result<OpTiming, BenchError> {
    let (vol, a) = mount_with(cfg, 1, 0)?;
    let cadence = Cadence {
        warm: cfg.mount_ops + cfg.warm_ops,
        commit_every: 1,
    };
    time_on(&vol, &a, cfg.fs.id, cfg.patched, cadence, ops, reps)
}

/// [`time_operations`] on an ext4 image's layout instead of the lab's fill (the image
/// `scripts/kernel_fallocate3.py` measured the kernel on), 3 operations before the counted
/// ones.
pub fn time_operations_on_image(
    path: &std::path::Path,
    patched: bool,
    cadence: Cadence,
    ops: u32,
    reps: u32,
) -> Result<OpTiming, BenchError> {
    let settings = [format!("prefetch_test_before_set={}", u8::from(patched))];
    let (vol, a) = mount_image(path, Policy::Linux618, 2, &settings, true)?;
    time_on(&vol, &a, "image", patched, cadence, ops, reps)
}

/// How a plain timing runs its operations: `warm` before the counted ones, and a commit
/// after every `commit_every` operations' truncates (1: at each, as the simulation does;
/// the kernel's jbd2 commits every 5 s, `JBD2_DEFAULT_MAX_COMMIT_AGE`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Cadence {
    pub warm: u32,
    pub commit_every: u32,
}

/// The kernel's cadence on the measured image (docs/measurements/kernel-fallocate3.json): its
/// 2 s warm-up, 1,987 operations (median of its runs), then a commit every 3,070 operations
/// (jbd2's 5 s at its 614 operations a second).
pub const KERNEL_CADENCE: Cadence = Cadence {
    warm: 1_987,
    commit_every: 3_070,
};

/// The 16-core machine's kernel on the same image (docs/measurements/
/// kernel-fallocate3-xeon16.json): 3,393 operations in its 5 s traced window (679 a second),
/// after 2 s of warm-up at that rate (1,358), a commit every 5 s.
pub const XEON16_CADENCE: Cadence = Cadence {
    warm: 1_358,
    commit_every: 3_393,
};

/// Operations counted at the kernel's cadence: about its 10 s measuring window (6,040 traced).
pub const IMAGE_COUNTED_OPS: u32 = 6_000;

/// Warm-up operations, then `ops` counted under a counting hook, then `reps` plain timings.
fn time_on(
    vol: &Volume,
    a: &Allocator,
    fs: &'static str,
    patched: bool,
    cadence: Cadence,
    ops: u32,
    reps: u32,
) -> Result<OpTiming, BenchError> {
    let mut f = File::new(FIRST_FILE_INO);
    let every = cadence.commit_every.max(1);
    let mut done = 0u32;
    let mut op = |f: &mut File| {
        done = done.wrapping_add(1);
        allocator_part(a, vol, f, 0, done.is_multiple_of(every))
    };
    for _ in 0..cadence.warm {
        op(&mut f)?;
    }
    let counter = Rc::new(PointCounter::default());
    let before = a.stats();
    let installed = vcpu::install(Rc::clone(&counter) as Rc<dyn Hook>);
    for _ in 0..ops {
        op(&mut f)?;
    }
    drop(installed);
    let after = a.stats();
    let per_op = |x: u64| x as f64 / f64::from(ops.max(1));
    let points_per_op = per_op(counter.0.get());
    let [walk_sets, walk_tests] = counter.1.get();
    let mut times = Vec::new();
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        for _ in 0..ops {
            op(&mut f)?;
        }
        times.push(t0.elapsed().as_nanos() as f64 / f64::from(ops.max(1)));
    }
    times.sort_by(f64::total_cmp);
    let ns_per_op = times[times.len() / 2];
    Ok(OpTiming {
        fs,
        patched,
        ns_per_op,
        points_per_op,
        ns_per_point: ns_per_op / points_per_op.max(1.0),
        walk_sets_per_op: per_op(walk_sets),
        walk_tests_per_op: per_op(walk_tests),
        calls_per_op: per_op(after.reqs - before.reqs),
        groups_scanned_per_op: per_op(after.groups_scanned - before.groups_scanned),
    })
}

/// One fallocate3 operation of `f`'s task on CPU `me`: open(O_TRUNC), fallocate, close.
fn operation(
    me: usize,
    s: &Sched,
    a: &Allocator,
    vol: &Volume,
    f: &mut File,
    journal: &Journal,
) -> Result<OpStats, BenchError> {
    let mut op = OpStats::default();
    let outside = s.costs().outside_ns;
    s.work(me, outside / 2);
    // open(O_TRUNC): the last round's blocks go back, and wait for jbd2's next commit
    // (`ext4_mb_free_metadata`), at most COMMIT_AGE_NS of virtual time away.
    f.truncate_uncommitted(a)?;
    journal.commit_if_expired(me, s, a)?;
    s.touch(me, J_STATE_LOCK, Access::Write, None);
    s.touch(me, TRANSACTION, Access::Write, None);
    let mut retries = 0;
    while f.place < FILE_BLOCKS {
        let req = f.request(Pattern::Fallocate2, FILE_BLOCKS - f.place, me as u32, vol);
        let t0 = s.clock(me);
        let got = a.allocate(&req);
        // `ext4_mb_new_blocks` from entry to exit, as the kernel script's trace times it.
        op.alloc_ns += s.clock(me) - t0;
        op.calls += 1;
        match got {
            Ok(got) => {
                op.groups += u64::from(got.groups_scanned);
                f.add(got.extent);
            }
            // ext4_should_retry_alloc: force a commit and try again, three times at most.
            Err(mballoc::Error::NoSpace { pending, .. }) if pending > 0 && retries < 3 => {
                retries += 1;
                journal.force(me, s, a)?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    s.touch(me, TRANSACTION, Access::Write, None);
    s.work(me, outside - outside / 2);
    Ok(op)
}

/// What one operation's allocator calls did, as `scripts/kernel_fallocate3.py
/// --trace-tasks` reads them from the kernel's tracepoints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct OpStats {
    /// Allocator calls (`ext4_mb_new_blocks`), the ones that found no space among them.
    calls: u64,
    /// Groups whose buddy the calls scanned (the successful calls': the kernel's
    /// `ext4_mballoc_alloc` fires for those only).
    groups: u64,
    /// Virtual ns inside the calls, waits included.
    alloc_ns: u64,
}

impl std::ops::AddAssign for OpStats {
    fn add_assign(&mut self, o: OpStats) {
        self.calls += o.calls;
        self.groups += o.groups;
        self.alloc_ns += o.alloc_ns;
    }
}

/// jbd2 as the tasks see it: when the running transaction commits, and the commits so far.
/// A commit is the library's (the pending frees become free); its time is charged to the CPU
/// that runs it, the task that found its timer expired or that forced it (in the kernel the
/// jbd2 thread commits and that task waits for it). The commit's journal writes are not
/// modelled: a commit takes only the library's work.
struct Journal {
    /// Virtual time at which the running transaction's timer runs out (`t_expires`: the
    /// commit interval after the last commit).
    expires: AtomicU64,
    interval_ns: u64,
    /// The commits of the run, in order: when each ended and how many operations the tasks
    /// had ended by then.
    ends: std::sync::Mutex<Vec<Commit>>,
    /// Operations the tasks have ended.
    ops: AtomicU64,
    /// Commits forced by an ENOSPC.
    forced: AtomicU64,
}

impl Journal {
    fn new(interval_ns: u64) -> Journal {
        Journal {
            expires: AtomicU64::new(interval_ns),
            interval_ns,
            ends: std::sync::Mutex::new(Vec::new()),
            ops: AtomicU64::new(0),
            forced: AtomicU64::new(0),
        }
    }

    /// The commit interval has passed since the last commit (`jbd2`'s commit timer). The
    /// first CPU to see it commits; the library's commit has synchronisation points, where
    /// other CPUs run, and they must not start the same commit again.
    fn commit_if_expired(&self, me: usize, s: &Sched, a: &Allocator) -> Result<(), BenchError> {
        let now = s.clock(me);
        let due = self.expires.load(Ordering::Relaxed);
        if now >= due
            && self
                .expires
                .compare_exchange(due, u64::MAX, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.commit(me, s, a)?;
        }
        Ok(())
    }

    /// `ext4_should_retry_alloc`: `jbd2_journal_force_commit_nested`.
    fn force(&self, me: usize, s: &Sched, a: &Allocator) -> Result<(), BenchError> {
        self.forced.fetch_add(1, Ordering::Relaxed);
        self.expires.store(u64::MAX, Ordering::Relaxed);
        self.commit(me, s, a)
    }

    /// Runs the commit; the next transaction's timer starts when it ends.
    fn commit(&self, me: usize, s: &Sched, a: &Allocator) -> Result<(), BenchError> {
        a.commit()?;
        let now = s.clock(me);
        self.expires
            .store(now + self.interval_ns, Ordering::Relaxed);
        let ops = self.ops.load(Ordering::Relaxed);
        self.log().push(Commit { ns: now, ops });
        Ok(())
    }

    fn log(&self) -> std::sync::MutexGuard<'_, Vec<Commit>> {
        self.ends.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`Cycles::end`] over the commits so far.
    fn window_end(&self, cycles: &Cycles) -> Option<usize> {
        cycles.end(&self.log())
    }
}

/// A commit of the tasks' journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Commit {
    /// When it ended, virtual ns.
    ns: u64,
    /// Operations the tasks had ended by then.
    ops: u64,
}

/// What a window of whole commit cycles ([`Config::commit_cycles`]) counts.
#[derive(Debug, Clone, Copy)]
struct Cycles {
    /// Full cycles to count after the first commit.
    count: usize,
    /// jbd2's commit interval: a cycle its timer ended lasted at least this long.
    interval_ns: u64,
    /// Half the operations the free space of the point's volume holds
    /// ([`Fs::free_space_ops_on`]).
    min_ops: u64,
}

impl Cycles {
    fn new(cfg: &Config) -> Option<Cycles> {
        let free_ops = cfg.fs.free_space_ops_on(cfg.bytes);
        (cfg.commit_cycles > 0).then(|| Cycles {
            count: cfg.commit_cycles as usize,
            interval_ns: cfg.commit_interval_ns,
            min_ops: (free_ops / 2.0).floor().max(1.0) as u64,
        })
    }

    /// Whether the cycle from commit `a` to commit `b` is a full one: its commit came from
    /// jbd2's timer (the interval had passed) or from an ENOSPC once the tasks had used at
    /// least half the free space. A short cycle is an ENOSPC's forced commit soon after
    /// another, which found little freed: a real event, kept inside the window, but not a
    /// sample of the steady state by itself (one of 59 operations in 0.38 ms once stood for
    /// a whole point, 154,145 ops/s against 1,300-3,500 around it).
    fn full(&self, a: Commit, b: Commit) -> bool {
        b.ns - a.ns >= self.interval_ns || b.ops - a.ops >= self.min_ops
    }

    /// The index of the commit that ends the window: the first after which `count` full
    /// cycles have followed the first commit (the end of the warm-up cycle).
    fn end(&self, log: &[Commit]) -> Option<usize> {
        assert!(self.count > 0, "a window of no cycles");
        let mut full = 0;
        for (i, w) in log.windows(2).enumerate() {
            full += usize::from(self.full(w[0], w[1]));
            if full == self.count {
                return Some(i + 1);
            }
        }
        None
    }
}

/// When the tasks of a run stop.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// Each task its `want` operations, then more (not counted) until every task has
    /// counted its own, so that no task's counted operations run with fewer tasks around.
    Ops(usize),
    /// Every task once the window's last commit has ended (`Window::cycles`).
    Cycles(Cycles),
    /// Every task once its clock has passed this virtual time ([`Timed`]).
    Until(u64),
}

/// What the tasks of one run share besides the allocator.
struct Tasks {
    /// Tasks that have counted all their operations ([`Stop::Ops`]).
    done: AtomicUsize,
    journal: Journal,
    stop: Stop,
}

impl Tasks {
    /// Whether a task with `ops` operations done, its clock at `now`, goes on.
    fn more(&self, ops: usize, now: u64, n: usize) -> bool {
        match &self.stop {
            Stop::Ops(want) => ops < *want || self.done.load(Ordering::Relaxed) < n,
            Stop::Cycles(c) => self.journal.window_end(c).is_none(),
            Stop::Until(end) => now < *end,
        }
    }
}

/// CPU `me`'s task: operations until `shared.stop` says it is done. Returns the end of each
/// of its operations, ns, and what its allocator calls did.
fn cpu_loop(
    me: usize,
    ino: u64,
    s: &Arc<Sched>,
    a: &Allocator,
    vol: &Volume,
    shared: &Tasks,
) -> Result<Vec<(u64, OpStats)>, BenchError> {
    let mut f = File::new(ino);
    let mut ends = Vec::new();
    let n = s.clocks().len();
    while shared.more(ends.len(), s.clock(me), n) && s.clock(me) < MAX_VIRTUAL_NS {
        let op = operation(me, s, a, vol, &mut f, &shared.journal)?;
        ends.push((s.clock(me), op));
        shared.journal.ops.fetch_add(1, Ordering::Relaxed);
        if matches!(shared.stop, Stop::Ops(want) if ends.len() == want) {
            shared.done.fetch_add(1, Ordering::Relaxed);
        }
    }
    // The task's file goes and is committed: after the lone task's mount-time operations
    // the N tasks start on a file system without pending frees, as on a long-used one.
    f.truncate(a)?;
    Ok(ends)
}

/// What the tasks of one run did.
struct Ran {
    /// Each task's operation ends, ns.
    ends: Vec<Vec<u64>>,
    /// What each of those operations' allocator calls did.
    ops: Vec<Vec<OpStats>>,
    /// The commits of the run, in order.
    commits: Vec<Commit>,
    /// Commits forced by an ENOSPC.
    forced: u64,
}

/// Runs `n` tasks, one per virtual CPU, on `a` until `stop`.
fn run_tasks(
    s: &Arc<Sched>,
    a: &Allocator,
    vol: &Volume,
    first_ino: u64,
    stop: Stop,
    commit_interval_ns: u64,
) -> Result<Ran, BenchError> {
    let n = s.clocks().len();
    let shared = Tasks {
        done: AtomicUsize::new(0),
        journal: Journal::new(commit_interval_ns),
        stop,
    };
    let bodies = (0..n)
        .map(|me| {
            let shared = &shared;
            move || cpu_loop(me, first_ino + me as u64, s, a, vol, shared)
        })
        .collect();
    let ops: Vec<Vec<(u64, OpStats)>> = super::on_cpus(s, bodies)?;
    let commits = shared.journal.log().clone();
    Ok(Ran {
        ends: ops
            .iter()
            .map(|o| o.iter().map(|&(end, _)| end).collect())
            .collect(),
        ops: ops
            .into_iter()
            .map(|o| o.into_iter().map(|(_, op)| op).collect())
            .collect(),
        commits,
        forced: shared.journal.forced.load(Ordering::Relaxed),
    })
}

/// Runs `cfg` on `n` virtual CPUs: one task alone on the cold mount for `mount_ops`
/// operations (the reads of a first use; none when 0), then `n` tasks.
pub fn run_point(cfg: &Config, n: u32) -> Result<Point, BenchError> {
    if cfg.image.is_some() && cfg.timed.is_none() {
        return Err(BenchError::Peer(
            "fallocate3 on an image counts as the kernel script does (a timed window)".into(),
        ));
    }
    if n == 0 || n as usize > MAX_VCPUS || cfg.ops == 0 {
        return Err(BenchError::Peer(format!(
            "fallocate3 on {n} vCPUs counting {} operations each: 1..={MAX_VCPUS} vCPUs, at \
             least one operation",
            cfg.ops
        )));
    }
    if !cfg.walk_thunk && cfg.machine == Machine::Xeon16 {
        return Err(BenchError::Peer(
            "walk_thunk=0 on xeon16: its kernel runs no return thunk, and its walk's steps are \
             already priced as the walk mimic's plain build there"
                .into(),
        ));
    }
    let t0 = Instant::now();
    let (vol, a) = mount(cfg, n)?;
    let costs = Costs::fallocate3(cfg.machine)
        .with_line_ns(cfg.line_ns)
        .with_line_overlap(cfg.line_overlap);
    let costs = if cfg.walk_thunk {
        costs
    } else {
        costs.without_walk_thunk()
    };
    let alone = Sched::with_device(
        1,
        costs.clone().on_cpus(1),
        Device::new(cfg.fs.device.depth()),
        cfg.slack_ns,
    );
    let mut first_op_ns = 0;
    if cfg.mount_ops > 0 {
        let stop = Stop::Ops(cfg.mount_ops as usize);
        let mount_ends = run_tasks(
            &alone,
            &a,
            &vol,
            FIRST_FILE_INO + MAX_VCPUS as u64,
            stop,
            cfg.commit_interval_ns,
        )?;
        first_op_ns = mount_ends.ends[0].first().copied().unwrap_or(0);
    }
    // The N tasks' clocks start at 0: the reads of the mount carry over, shifted.
    let device = alone.device().rebased(alone.clock(0));
    let s = Sched::with_device(n as usize, costs.on_cpus(n), device, cfg.slack_ns);
    s.walk_lines(a.group_state_span());
    if cfg.bg_locks > 0 {
        s.hash_group_locks(a.group_lock_span(), cfg.bg_locks);
    }
    let before = a.stats();
    let warm = cfg.warm_ops as usize;
    let counted = cfg.ops.div_ceil(n).max(2) as usize;
    // One commit cycle of warm-up (the tasks' start and the mount's state behind them),
    // then the counted ones.
    let cycles = Cycles::new(cfg);
    let stop = match (cfg.timed, cycles) {
        (Some(t), _) => Stop::Until(t.end_ns()),
        (None, Some(c)) => Stop::Cycles(c),
        (None, None) => Stop::Ops(warm + counted),
    };
    let ran = run_tasks(&s, &a, &vol, FIRST_FILE_INO, stop, cfg.commit_interval_ns)?;
    let after = a.stats();
    let window = match stop {
        Stop::Until(_) => Window::timed(&ran, cfg.timed.unwrap_or(Timed::KERNEL)),
        Stop::Cycles(c) => Window::cycles(&ran, &c)?,
        Stop::Ops(_) => Window::ops(&ran.ends, warm, counted),
    };
    let all_ops = ran.ends.iter().map(Vec::len).sum::<usize>().max(1) as f64;
    Ok(Point {
        vcpus: n,
        ops_per_s: window.ops_per_s,
        counted_ops: window.ops,
        window_ns: window.ns,
        short_cycles: window.short_cycles,
        commits_ns: ran.commits.iter().map(|c| c.ns).collect(),
        window_calls_per_op: window.per_op(|c| c.calls as f64),
        window_groups_per_op: window.per_op(|c| c.groups as f64),
        window_alloc_us_per_op: window.per_op(|c| c.alloc_ns as f64 / 1e3),
        forced_commits: ran.forced,
        first_op_ns,
        mount_io: alone.io_stats(),
        io: s.io_stats(),
        bitmap_loads: after.bitmap_loads - before.bitmap_loads,
        commits: after.commits - before.commits,
        journal_commits: ran.commits.len() as u64,
        prefetch_loads: after.prefetch_loads - before.prefetch_loads,
        groups_scanned_per_op: (after.groups_scanned - before.groups_scanned) as f64 / all_ops,
        line_transfers_per_op: s.stats().line_transfers as f64 / all_ops,
        real_s: t0.elapsed().as_secs_f64(),
    })
}

/// Which operations of a run a point's rate counts, and the rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Total ops/s of all tasks.
    pub ops_per_s: f64,
    /// Operations counted, all tasks.
    pub ops: u64,
    /// Virtual time counted, ns (per task, summed over tasks for `Window::ops`).
    pub ns: u64,
    /// Short commit cycles inside a window of cycles (`Cycles::full`).
    pub short_cycles: u64,
    /// The counted operations' allocator calls ([`Window::timed`] only).
    calls: Option<OpStats>,
}

impl Window {
    /// `f` of the counted operations' calls, per counted operation.
    fn per_op(&self, f: impl Fn(&OpStats) -> f64) -> Option<f64> {
        self.calls.as_ref().map(|c| f(c) / self.ops.max(1) as f64)
    }

    /// Each task's rate over its operations `warm..warm + counted` (from the end of its last
    /// warm-up operation, or its start, to the end of its last counted one), summed: a few
    /// operations soon after the mount, before the first commit.
    fn ops(ends: &[Vec<u64>], warm: usize, counted: usize) -> Window {
        let spans: Vec<u64> = ends
            .iter()
            .map(|e| {
                let from = if warm == 0 { 0 } else { e[warm - 1] };
                (e[warm + counted - 1] - from).max(1)
            })
            .collect();
        Window {
            ops_per_s: spans.iter().map(|&d| counted as f64 * 1e9 / d as f64).sum(),
            ops: (counted * ends.len()) as u64,
            ns: spans.iter().sum(),
            short_cycles: 0,
            calls: None,
        }
    }

    /// The kernel script's count ([`Timed`]): each task's operations that start in the
    /// window (the first at 0, each next one at its predecessor's end), over the time from
    /// the window's start to the end of its last counted one, summed. A task that starts
    /// none counts 0.
    fn timed(ran: &Ran, t: Timed) -> Window {
        let (mut rate, mut ops, mut ns) = (0.0, 0u64, 0u64);
        let mut calls = OpStats::default();
        for (e, stats) in ran.ends.iter().zip(&ran.ops) {
            let starts = std::iter::once(0).chain(e.iter().copied());
            let counted: Vec<(u64, OpStats)> = starts
                .zip(e.iter().zip(stats))
                .filter(|&(start, _)| start >= t.warm_ns && start < t.end_ns())
                .map(|(_, (&end, &op))| (end, op))
                .collect();
            let Some(&(last, _)) = counted.last() else {
                continue;
            };
            let span = (last - t.warm_ns).max(1);
            rate += counted.len() as f64 * 1e9 / span as f64;
            ops += counted.len() as u64;
            ns += span;
            for &(_, op) in &counted {
                calls += op;
            }
        }
        Window {
            ops_per_s: rate,
            ops,
            ns,
            short_cycles: 0,
            calls: Some(calls),
        }
    }

    /// The operations that end between the first commit of the run and the commit that
    /// ends `cycles`' full cycles after it ([`Cycles::end`]), all tasks together, over that
    /// time: will-it-scale's steady state, in which each jbd2 commit hands the frees of its
    /// transaction back and the tasks use them up again (on a full filesystem before the
    /// commit interval ends, when an ENOSPC forces the next commit, `ext4_should_retry_alloc`).
    fn cycles(ran: &Ran, cycles: &Cycles) -> Result<Window, BenchError> {
        let (Some(first), Some(last)) = (ran.commits.first(), cycles.end(&ran.commits)) else {
            return Err(BenchError::Peer(format!(
                "fallocate3: {} commits in {} s of virtual time, not {} full cycles after the \
                 first",
                ran.commits.len(),
                MAX_VIRTUAL_NS / 1_000_000_000,
                cycles.count
            )));
        };
        let (from, to) = (first.ns, ran.commits[last].ns);
        let ops = ran
            .ends
            .iter()
            .flatten()
            .filter(|&&t| t > from && t <= to)
            .count() as u64;
        let ns = (to - from).max(1);
        Ok(Window {
            ops_per_s: ops as f64 * 1e9 / ns as f64,
            ops,
            ns,
            short_cycles: (last - cycles.count) as u64,
            calls: None,
        })
    }
}

/// One filesystem's curves and the published figures beside them.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    pub fs: Fs,
    /// How the points counted ([`Config::commit_cycles`], [`Config::slack_ns`]).
    pub commit_cycles: u32,
    pub slack_ns: u64,
    /// [`Config::bg_locks`].
    pub bg_locks: u32,
    /// [`Config::cached_bitmaps`].
    pub cached_bitmaps: bool,
    /// What else both sides ran with: [`Config::tunables`] and the lab's line costs.
    pub settings: Vec<String>,
    pub base: Vec<Point>,
    pub patched: Vec<Point>,
    pub published: Vec<Published>,
}

/// One published row and ours, judged.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub published: Published,
    pub base: f64,
    pub patched: f64,
    pub change_pct: f64,
    /// For an improvement: same sign, within ×2, within ±25 % of the published change. For
    /// the neutral filesystem: |ours| ≤ 5 % (all three flags alike).
    pub same_sign: bool,
    pub within_2x: bool,
    pub within_25pct: bool,
}

/// The neutral filesystem's band, %.
pub const NEUTRAL_PCT: f64 = 5.0;

impl Row {
    pub fn judge(published: Published, neutral: bool, base: f64, patched: f64) -> Row {
        let change_pct = 100.0 * (patched / base - 1.0);
        let (same_sign, within_2x, within_25pct) = if neutral {
            let ok = change_pct.abs() <= NEUTRAL_PCT;
            (ok, ok, ok)
        } else {
            let ratio = change_pct / published.change_pct();
            (
                ratio > 0.0,
                (0.5..=2.0).contains(&ratio),
                (0.75..=1.25).contains(&ratio),
            )
        };
        Row {
            published,
            base,
            patched,
            change_pct,
            same_sign,
            within_2x,
            within_25pct,
        }
    }
}

impl Curve {
    /// The judged rows at the published task counts this curve ran.
    pub fn rows(&self) -> Vec<Row> {
        let at = |pts: &[Point], n: u32| pts.iter().find(|p| p.vcpus == n).map(|p| p.ops_per_s);
        self.published
            .iter()
            .filter_map(|p| {
                let (b, q) = (at(&self.base, p.tasks)?, at(&self.patched, p.tasks)?);
                Some(Row::judge(*p, self.fs.neutral, b, q))
            })
            .collect()
    }
}

/// Runs `fs`'s base and patched curves at `vcpus`, each point as `like` says (its `fs` and
/// `patched` aside).
pub fn run_curve(fs: Fs, vcpus: &[u32], like: &Config) -> Result<Curve, BenchError> {
    let side = |patched: bool| -> Result<Vec<Point>, BenchError> {
        let cfg = Config {
            fs,
            patched,
            bytes: fs.bytes,
            ..like.clone()
        };
        vcpus.iter().map(|&n| run_point(&cfg, n)).collect()
    };
    Ok(Curve {
        fs,
        commit_cycles: like.commit_cycles,
        slack_ns: like.slack_ns,
        bg_locks: like.bg_locks,
        cached_bitmaps: like.cached_bitmaps,
        settings: like.extra_settings(),
        base: side(false)?,
        patched: side(true)?,
        published: published().into_iter().filter(|p| p.fs == fs.id).collect(),
    })
}

/// How long the free space lasts at the published rates: the rows above
/// [`Fs::interval_rate`] ran out of space between two of jbd2's timed commits.
fn free_space_note(c: &Curve) -> String {
    let over = |f: fn(&Published) -> f64| {
        c.published
            .iter()
            .filter(|p| f(p) > c.fs.interval_rate())
            .count()
    };
    format!(
        "free space: {:.0} operations between commits, {:.0} ops/s over jbd2's 5 s; published \
         rows faster (out of space before the timer commits): base {} of {}, patched {} of {}",
        c.fs.free_space_ops(),
        c.fs.interval_rate(),
        over(|p| p.base),
        c.published.len(),
        over(|p| p.patched),
        c.published.len()
    )
}

/// The curve as an SVG: total ops/s against vCPUs, base and patched, published points.
pub fn plot(c: &Curve, path: &std::path::Path) -> Result<(), BenchError> {
    use crate::report::plot::{plot_throughput, Series};
    let line = |pts: &[Point]| {
        pts.iter()
            .map(|p| (f64::from(p.vcpus), p.ops_per_s))
            .collect()
    };
    let pubs = |f: fn(&Published) -> f64| {
        c.published
            .iter()
            .map(|p| (f64::from(p.tasks), f(p)))
            .collect()
    };
    let series = [
        Series {
            label: "base (prefetch_test_before_set=0)".into(),
            points: line(&c.base),
        },
        Series {
            label: "patched (prefetch_test_before_set=1)".into(),
            points: line(&c.patched),
        },
        Series {
            label: format!("published base, {}", c.fs.machine),
            points: pubs(|p| p.base),
        },
        Series {
            label: format!("published patched, {}", c.fs.machine),
            points: pubs(|p| p.patched),
        },
    ];
    let title = format!(
        "seed 003 fallocate3, {} ({:.0} % used, {:?}): total ops/s per vCPU count",
        c.fs.id,
        c.fs.used * 100.0,
        c.fs.device
    );
    plot_throughput(&title, &series, path).map_err(|e| BenchError::Peer(e.to_string()))
}

/// The rows of `curves` as a table: vCPUs | base | patched | ours % | published %.
pub fn render(curves: &[Curve]) -> String {
    use std::fmt::Write;
    let yn = |b: bool| if b { "yes" } else { "no" };
    let mut t = String::new();
    for c in curves {
        let _ = writeln!(
            t,
            "seed 003 fallocate3 on {} ({}, {:.0} % used, {:?}){}",
            c.fs.id,
            c.fs.machine,
            c.fs.used * 100.0,
            c.fs.device,
            if c.fs.neutral {
                ": must stay within ±5 %"
            } else {
                ""
            }
        );
        let counted = if c.commit_cycles > 0 {
            format!("{} commit cycle(s) after one of warm-up", c.commit_cycles)
        } else {
            "operations after the mount (the counted column), before any commit".to_string()
        };
        let _ = writeln!(
            t,
            "counted: {counted}; scheduler slack {} µs; group locks: {}; bitmaps: {}{}\n{}",
            c.slack_ns / 1000,
            match c.bg_locks {
                0 => "one per group".to_string(),
                n => format!("{n} hashed"),
            },
            if c.cached_bitmaps {
                "all in memory from the start (the mount's background prefetch done)"
            } else {
                "cold mount, each read when first needed"
            },
            if c.settings.is_empty() {
                String::new()
            } else {
                format!("; both sides: {}", c.settings.join(" "))
            },
            free_space_note(c)
        );
        let _ = writeln!(
            t,
            "{:>5} {:>10} {:>10} {:>8} {:>10} {:>5} {:>4} {:>5} {:>13} {:>15}",
            "vcpus",
            "base",
            "patched",
            "ours",
            "published",
            "sign",
            "x2",
            "±25%",
            "counted b/p",
            "commits b/p"
        );
        let rows: BTreeMap<u32, Row> = c
            .rows()
            .into_iter()
            .map(|r| (r.published.tasks, r))
            .collect();
        for (b, p) in c.base.iter().zip(&c.patched) {
            let ours = 100.0 * (p.ops_per_s / b.ops_per_s - 1.0);
            let judged = rows.get(&b.vcpus).map_or_else(
                || format!("{:>10} {:>5} {:>4} {:>5}", "-", "", "", ""),
                |r| {
                    format!(
                        "{:>+9.1}% {:>5} {:>4} {:>5}",
                        r.published.change_pct(),
                        yn(r.same_sign),
                        yn(r.within_2x),
                        yn(r.within_25pct)
                    )
                },
            );
            // Commits: the tasks' own, of which forced by an ENOSPC in brackets.
            let commits = |q: &Point| format!("{}({})", q.journal_commits, q.forced_commits);
            let _ = writeln!(
                t,
                "{:>5} {:>10.0} {:>10.0} {:>+7.1}% {} {:>13} {:>15}",
                b.vcpus,
                b.ops_per_s,
                p.ops_per_s,
                ours,
                judged,
                format!("{}/{}", b.counted_ops, p.counted_ops),
                format!("{}/{}", commits(b), commits(p))
            );
        }
    }
    t
}

/// The kernel script's `--tasks` runs on its aged image, as the model runs them on `machine`'s
/// costs ([`Config::kernel_image`]): one point per task count, linux-6.18 with `lab`'s
/// allocator tunables (`prefetch_test_before_set=1`: seed 003's patched side), its line costs,
/// hashed group locks and (`lazy=1`) a cold mount.
pub fn image_curve(
    path: &std::path::Path,
    machine: Machine,
    timed: Timed,
    lab: &crate::workload::LabSettings,
    vcpus: &[u32],
) -> Result<Vec<Point>, BenchError> {
    let cfg = Config {
        line_ns: lab.line_ns,
        line_overlap: lab.line_overlap,
        walk_thunk: lab.walk_thunk,
        bg_locks: lab.bg_locks,
        cached_bitmaps: !lab.lazy.unwrap_or(false),
        tunables: lab.tunables.clone(),
        ..Config::kernel_image(path, machine, timed)
    };
    vcpus.iter().map(|&n| run_point(&cfg, n)).collect()
}

/// [`image_curve`]'s points: total and per-task rates, each task's against one task's, and
/// what the tasks met (commits, forced ones, groups scanned, lines moved).
/// `settings`: what the points ran with beyond linux-6.18 (their label).
pub fn render_image(points: &[Point], timed: Timed, settings: &[String]) -> String {
    use std::fmt::Write;
    let one = points.iter().find(|p| p.vcpus == 1).map(|p| p.ops_per_s);
    let mut t = format!(
        "fallocate3 on the image, {}, {} s of warm-up and {} s counted as the kernel script \
         runs; calls, groups and allocator µs per counted operation\n{:>5} {:>9} {:>9} {:>9} \
         {:>6} {:>7} {:>9} {:>7} {:>11} {:>7}  commits at, s\n",
        std::iter::once("linux-6.18")
            .chain(settings.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        timed.warm_ns as f64 / 1e9,
        timed.count_ns as f64 / 1e9,
        "tasks",
        "ops/s",
        "per task",
        "vs one",
        "calls",
        "groups",
        "alloc µs",
        "forced",
        "lines/op",
        "host s"
    );
    for p in points {
        let per = p.ops_per_s / f64::from(p.vcpus);
        let at: Vec<String> = p
            .commits_ns
            .iter()
            .map(|&ns| format!("{:.2}", ns as f64 / 1e9))
            .collect();
        let _ = writeln!(
            t,
            "{:>5} {:>9.1} {:>9.1} {:>9} {:>6.2} {:>7.1} {:>9.1} {:>7} {:>11.1} {:>7.1}  {}",
            p.vcpus,
            p.ops_per_s,
            per,
            one.map_or("-".into(), |o| format!("{:.3}", per / o)),
            p.window_calls_per_op.unwrap_or(f64::NAN),
            p.window_groups_per_op.unwrap_or(f64::NAN),
            p.window_alloc_us_per_op.unwrap_or(f64::NAN),
            p.forced_commits,
            p.line_transfers_per_op,
            p.real_s,
            at.join(" ")
        );
    }
    t
}

#[cfg(test)]
mod cycle_tests {
    use super::{Commit, Cycles};

    /// A window of cycles ends once it holds its count of full cycles: one that jbd2's timer
    /// ended, or one that used half the free space. A short cycle (an ENOSPC's commit soon
    /// after another, few operations) stays inside the window but does not end it.
    #[test]
    fn a_short_cycle_does_not_end_the_window() {
        let one = Cycles {
            count: 1,
            interval_ns: 5_000,
            min_ops: 100,
        };
        let at = |ns, ops| Commit { ns, ops };
        // The warm-up ends at 1,000; a cycle of 59 operations in 380 ns; then a full one.
        let log = [at(1_000, 500), at(1_380, 559), at(3_000, 1_500)];
        assert_eq!(one.end(&log[..2]), None, "the short cycle alone");
        assert_eq!(
            one.end(&log),
            Some(2),
            "the full cycle after it ends the window"
        );
        assert_eq!(
            one.end(&[at(1_000, 500), at(6_000, 510)]),
            Some(1),
            "a cycle the timer ended is full whatever it held"
        );
        assert_eq!(
            one.end(&[at(1_000, 500), at(1_500, 600)]),
            Some(1),
            "a cycle that used half the free space is full however short"
        );
        let two = Cycles { count: 2, ..one };
        assert_eq!(two.end(&log), None);
        assert_eq!(two.end(&[log[0], log[2], at(4_000, 2_000)]), Some(2));
    }
}
