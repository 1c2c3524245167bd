//! The lab's workloads (W1–W14, listed in docs/lab.md) and the seeds' experiments,
//! run on the file layer ([`crate::fs`]) over one shared allocator, with the metrics of
//! [`crate::metrics`] gathered into one [`RunResult`].
//!
//! Every workload takes a seed and is deterministic for a given seed when it runs on one
//! thread; with more threads the tasks really run at the same time on one `Allocator` and only
//! the per-task operation streams are fixed. Fragmentation figures come from
//! operation-count-bounded runs; only throughput loops are time-based.
//!
//! Settings (`RunConfig::settings`, `name=value`) are either allocator tunables
//! ([`mballoc::Tunables::NAMES`]) or lab settings ([`LAB_SETTINGS`]), such as `age=0.75` to age
//! the file system Geriatrix-style before the workload starts.

pub mod aged;
pub mod aging;
mod error;
pub mod exec;
pub mod fragscan;
pub mod fsperf;
pub mod measure;
pub mod prefill;
pub mod rng;
pub mod settings;
pub mod setup;
pub mod streams;
pub mod wis;

use std::collections::BTreeMap;
use std::sync::Arc;

use mballoc::Allocator;

use crate::fs::File;
pub use error::LabError;
pub use settings::LabSettings;
use setup::{Env, FsSpec};

/// One runnable workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadInfo {
    pub name: &'static str,
    pub description: &'static str,
}

/// Lab settings accepted in `RunConfig::settings` besides the allocator tunables.
pub const LAB_SETTINGS: &[(&str, &str)] = &[
    (
        "age",
        "age the fs Geriatrix-style to this utilisation (0..0.95) before the workload",
    ),
    (
        "prefill",
        "pre-fill the fs to this utilisation (0..0.98) without running the allocator (cheap on huge fs)",
    ),
    (
        "commit_ops",
        "journal commit interval in file operations (default 4096)",
    ),
    (
        "duration_s",
        "measured seconds of time-based throughput loops (will-it-scale -s); with --vcpus, \
         virtual seconds each CPU counts (default 0.005)",
    ),
    (
        "warmup_s",
        "warm-up seconds before measuring (will-it-scale: 6 one-second samples; with --vcpus, \
         virtual seconds each CPU runs before it counts)",
    ),
    (
        "ops",
        "operations per task: makes time-based loops count-bounded (deterministic on one thread)",
    ),
    (
        "cpus",
        "possible CPUs of the simulated machine (default: max(threads, 2))",
    ),
    (
        "scale",
        "fsperf tests: volume scale of fsperf's job files (0..1, default 1; 0.5 = the scaled files of kernel-frag/jobs)",
    ),
    (
        "lazy",
        "1: leave group bitmaps unread until needed (default: on for big fs and cold-mount workloads)",
    ),
    (
        "extent_tree",
        "0: files allocate no extent-tree blocks (default 1: a leaf past 4 extents, as ext4)",
    ),
    (
        "cluster_kib",
        "bigalloc cluster size in KiB (8 ..= 262144, a power of two; mkfs.ext4 -O bigalloc -C): `groups` and replays only, runs refuse it",
    ),
    (
        "commit_clock",
        "fsperf tests: 0: every fdatasync commits at once, releasing every free (default 1: jbd2 commits on the simulated clock, a free allocatable when its commit ends; one thread only)",
    ),
    (
        "falloc_start",
        "fsperf tests: 1: each fallocate job makes its first call when real runs of the test made it (kernel-frag/timelines/, at the reference pace) instead of at time 0 (default 0)",
    ),
    (
        "falloc_spread",
        "fsperf tests: 0: every fallocate of a job costs the job's mean latency (default 1: drawn from the distribution fio measured for that job inside the test, kernel-frag/service-times/in-test-shape.json, with that mean)",
    ),
    (
        "ino_reuse",
        "0: every create takes a new inode number (default 1: the lowest free one, so a file created after an unlink gets the unlinked file's number, as ext4's find_inode_bit gives it with a journal)",
    ),
    (
        "journal",
        "0: a filesystem without a journal (mkfs -O ^has_journal): freed blocks are reusable at once, commits release nothing (default 1, or the image's has_journal)",
    ),
    (
        "page_size",
        "page size of the simulated machine in bytes (4096, 16384, 65536): groups sharing a buddy-cache page are built together (default 4096)",
    ),
    (
        "bitmap_csum",
        "virtual CPUs: the block bitmap's crc32c at each marking, full (6.18, default) or incremental (the ext4 incremental-CRC RFC of 2026-05)",
    ),
    (
        "line_ns",
        "virtual CPUs: every cache-line transfer and lock hand-off costs this many ns instead of the machine's measured figure (a what-if; default: the machine's)",
    ),
    (
        "line_overlap",
        "virtual CPUs: 1 = an access to a group's bb_state word (what a prefetch walk visits) whose line no other CPU is moving costs the issuing CPU the measured cost of one of many independent ones (scripts/line_reads.c), not a whole transfer (a what-if; default 0)",
    ),
    (
        "fill",
        "virtual CPUs, seed 003's filesystems (--seed003): the seed of the random fill a point runs on (default 1; which holes a fill makes is incidental, so what moves with it is noise)",
    ),
    (
        "walk_thunk",
        "virtual CPUs, fallocate3: 0 = the prefetch walk's steps priced as on a kernel without this machine's return thunk (Safe RET), as the seed's arm64 servers run: this kernel's step times the walk mimic's plain over thunked build (docs/measurements/prefetch-walk-cost.json), everything else as measured (a what-if; default 1)",
    ),
    (
        "inode_bh",
        "virtual CPUs: each of a fallocate2 call's three ext4_mark_inode_dirty takes and drops a reference to the inode table block's buffer head, one line for the CPUs whose inodes share that block (16 inodes of 256 bytes a 4 KiB block) (default 1; 0: left out)",
    ),
    (
        "jbd2_rmw",
        "virtual CPUs, fallocate2: each = every atomic write a jbd2 handle makes to the running transaction's counters (three at start_this_handle, two at stop_this_handle) a write of that line of its own, which another CPU can take in between; paired (default) = one write at the start, one at the stop (a what-if; docs/vcpus/kernel-16-core.md, 'The rest of the call, measured apart')",
    ),
    (
        "bg_locks",
        "virtual CPUs: group locks shared as the kernel's s_blockgroup_lock shares them, this many hashed spinlocks, group g on lock g mod N (128: NR_BG_LOCKS of a kernel built for 32 or more CPUs); 0: one lock per group (default)",
    ),
];

static CATALOG: &[WorkloadInfo] = &[
    WorkloadInfo {
        name: "fallocate2",
        description: "W1 will-it-scale fallocate2: per task 8 KiB fallocates to 1 MiB, truncate, repeat (ops/s per task)",
    },
    WorkloadInfo {
        name: "fallocate3",
        description: "W2 open-s4c fallocate3: per task truncate + one 70.4 MiB KEEP_SIZE fallocate (ops/s, bitmap loads)",
    },
    WorkloadInfo {
        name: "bufferedappendvsfallocate",
        description: "W3 fsperf: 4 x 256 MiB short-lived fallocates (500 ms apart, 20 s) against 32 x 64 KiB fdatasync appenders",
    },
    WorkloadInfo {
        name: "correlatedlifetimes",
        description: "W4 fsperf: 128 MiB-in-1 GiB large-short files beside 128 KiB-in-128 MiB small-short files",
    },
    WorkloadInfo {
        name: "mixedlifetimes",
        description: "W5 fsperf: large-long, large-short, small-short fallocates and 32 small-long appenders",
    },
    WorkloadInfo {
        name: "foursizes",
        description: "W6 fsperf: 2 GiB, 128 MiB, 8 MiB fallocate streams and 32 x 128 KiB appenders (class boundaries)",
    },
    WorkloadInfo {
        name: "funnysizeshigh",
        description: "W7 fsperf: 129 MiB and 9 MiB fallocate streams and 32 x 129 KiB appenders",
    },
    WorkloadInfo {
        name: "funnysizeslow",
        description: "W8 fsperf: 127 MiB and 7 MiB fallocate streams and 32 x 127 KiB appenders",
    },
    WorkloadInfo {
        name: "fragscan",
        description: "W10 mb_optimize_scan test: no free 2 MiB run anywhere, then 3 runs of 10 x 2 MiB writes",
    },
    WorkloadInfo {
        name: "imageappend",
        description: "with --image: 64 KiB buffered appends + fsync to every regular file of the image (where do the next appends land?)",
    },
    WorkloadInfo {
        name: "appenders",
        description: "W11 Baokun fragmentation check: tasks append 4 KiB direct writes to private files",
    },
    WorkloadInfo {
        name: "aging",
        description: "W14 Geriatrix-style aging: create/delete churn at a target utilisation (Agrawal sizes)",
    },
    WorkloadInfo {
        name: "seed003",
        description: "seed 003: fallocate3 on a big, full, freshly mounted fs: bitmap loads, prefetch, first-op time",
    },
    WorkloadInfo {
        name: "seed004",
        description: "seed 004: two tasks write 128 KiB direct-I/O chunks at once; extent sizes vs mb_max_prealloc_kb",
    },
];

/// Every runnable workload, one line each.
pub fn catalog() -> &'static [WorkloadInfo] {
    CATALOG
}

/// What to run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub workload: String,
    pub policy: mballoc::Policy,
    /// `name=value`: allocator tunables or [`LAB_SETTINGS`].
    pub settings: Vec<String>,
    pub threads: u32,
    /// Bytes; 0 picks the workload's default for the scale.
    pub fs_size: u64,
    pub seed: u64,
    /// Laptop scale (seconds), else the spec's scale.
    pub quick: bool,
    /// Busy time per bitmap load of the in-memory device, ns (seed 003).
    pub load_cost_ns: u64,
    /// Start from this ext4 image's state instead of a fresh layout (`fs_size` is then the
    /// image's).
    pub image: Option<ImageRun>,
}

/// An ext4 image a run starts from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRun {
    pub path: std::path::PathBuf,
    /// Read it even while it is mounted read-write.
    pub allow_mounted: bool,
}

/// Progress reporting hooks (a progress bar in the CLI).
pub trait Progress: Sync {
    fn start(&self, what: &str, total: u64);
    fn inc(&self, n: u64);
    fn finish(&self);
}

/// A [`Progress`] that shows nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _what: &str, _total: u64) {}
    fn inc(&self, _n: u64) {}
    fn finish(&self) {}
}

/// The outcome of one run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunResult {
    pub workload: String,
    pub policy: String,
    pub settings: Vec<String>,
    pub threads: u32,
    pub fs_size: u64,
    /// The ext4 image the run started from, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    pub seed: u64,
    pub elapsed_s: f64,
    /// Flat metrics under the names docs/lab.md defines.
    pub scalars: BTreeMap<String, f64>,
    /// Plottable series: `frag_pct_per_group`, `free_extent_histogram`,
    /// `extent_size_distribution`, ...
    pub series: BTreeMap<String, Vec<(f64, f64)>>,
    /// The full metric structs as JSON.
    pub detail: serde_json::Value,
}

/// The names of [`catalog`], comma-separated (for error messages).
pub fn names() -> String {
    catalog()
        .iter()
        .map(|w| w.name)
        .collect::<Vec<_>>()
        .join(", ")
}

type Runner = fn(&RunConfig, &dyn Progress) -> Result<(Env, measure::Output), LabError>;

/// The runner and file-system spec of a workload.
fn lookup(name: &str) -> Option<(Runner, &'static FsSpec)> {
    Some(match name {
        "fallocate2" => (wis::fallocate2 as Runner, &wis::SPEC_F2),
        "fallocate3" => (wis::fallocate3, &wis::SPEC_F3),
        "seed003" => (wis::seed003, &wis::SPEC_SEED003),
        "bufferedappendvsfallocate"
        | "correlatedlifetimes"
        | "mixedlifetimes"
        | "foursizes"
        | "funnysizeshigh"
        | "funnysizeslow" => (fsperf::run, &fsperf::SPEC),
        "fragscan" => (fragscan::run, &fragscan::SPEC),
        "appenders" => (streams::appenders, &streams::SPEC_APPENDERS),
        "imageappend" => (streams::imageappend, &streams::SPEC_IMAGEAPPEND),
        "seed004" => (streams::seed004, &streams::SPEC_SEED004),
        "aging" => (aged::run, &aged::SPEC),
        _ => return None,
    })
}

fn unknown(name: &str) -> LabError {
    LabError::UnknownWorkload {
        name: name.to_string(),
        valid: names(),
    }
}

/// The file-system size a workload uses when `RunConfig::fs_size` is 0.
pub fn default_fs_size(workload: &str, quick: bool) -> Result<u64, LabError> {
    let (_, spec) = lookup(workload).ok_or_else(|| unknown(workload))?;
    Ok(if quick {
        spec.quick_bytes
    } else {
        spec.full_bytes
    })
}

/// The share of blocks a workload's filesystem starts with in use when no `prefill=` says
/// otherwise (0 for a fresh one).
pub fn default_prefill(workload: &str) -> Result<f64, LabError> {
    let (_, spec) = lookup(workload).ok_or_else(|| unknown(workload))?;
    Ok(spec.prefill.map_or(0.0, |(used, _)| used))
}

/// A run's result together with the end state it was measured on.
pub struct Outcome {
    pub result: RunResult,
    /// The allocator after the run (committed).
    pub allocator: Arc<Allocator>,
    /// The workload's surviving files.
    pub files: Vec<File>,
}

/// Runs one workload and keeps its end state (tests, further analysis).
pub fn run_detailed(cfg: &RunConfig, progress: &dyn Progress) -> Result<Outcome, LabError> {
    let (runner, _) = lookup(&cfg.workload).ok_or_else(|| unknown(&cfg.workload))?;
    let (env, out) = runner(cfg, progress)?;
    env.fs.commit()?;
    let files = out.files.clone();
    let mut result = measure::finish(&env, out)?;
    result.settings = cfg.settings.clone();
    Ok(Outcome {
        result,
        allocator: env.fs.allocator_arc(),
        files,
    })
}

/// Runs one workload.
pub fn run(cfg: &RunConfig, progress: &dyn Progress) -> Result<RunResult, LabError> {
    run_detailed(cfg, progress).map(|o| o.result)
}
