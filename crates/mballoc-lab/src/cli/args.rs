//! Argument types of the lab's subcommands (clap derive). Values that clap can check on its own
//! (sizes, thread lists, durations, policy and workload names) are checked here, so a typo is a
//! usage error (exit code 2) naming the valid choices before anything runs.

use std::path::PathBuf;

use clap::Args;
use mballoc::Policy;
use mballoc_lab::workload;

use super::parse;

/// A workload name from the catalog; unknown names list the valid ones.
pub fn workload_name(s: &str) -> Result<String, String> {
    let cat = workload::catalog();
    if cat.iter().any(|w| w.name == s) {
        Ok(s.to_string())
    } else {
        let valid: Vec<&str> = cat.iter().map(|w| w.name).collect();
        Err(format!(
            "unknown workload {s:?}; valid workloads: {}",
            valid.join(", ")
        ))
    }
}

/// A policy preset name (`mballoc::Policy::from_name`); its error lists the presets.
pub fn policy_name(s: &str) -> Result<Policy, String> {
    Policy::from_name(s).map_err(|e| e.to_string())
}

/// Options shared by `run` and `compare`: what to run and how big.
#[derive(Args, Debug, Clone)]
pub struct Scenario {
    /// Allocator tunables or lab settings `name=value` (see `mballoc list`), applied on top of
    /// the policy (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse::setting)]
    pub settings: Vec<String>,
    /// Thread counts to run, comma separated; one run per count.
    #[arg(long, value_name = "LIST", default_value = "1", value_parser = thread_list)]
    pub threads: ThreadList,
    /// Filesystem size (binary units: 512M, 16G, up to 16T); default: the workload's own size
    /// for the scale (`--quick` or full).
    #[arg(long, value_name = "SIZE", value_parser = parse::size)]
    pub fs_size: Option<u64>,
    /// Seed of the workload's random choices (a one-thread run is deterministic per seed).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A shorter run of the same workload (seconds, not minutes).
    #[arg(long)]
    pub quick: bool,
    /// Simulated cost of loading one group's bitmap from disk (e.g. 50us; 0 = in memory).
    #[arg(long, value_name = "TIME", default_value = "0", value_parser = parse::duration_ns)]
    pub load_cost: u64,
    /// Start from this ext4 file system's state (image file, `e2image -r` output or block
    /// device, 4 KiB blocks) instead of a fresh layout: its used blocks, BLOCK_UNINIT groups
    /// and files (with their inode numbers); it is only read.
    #[arg(long, value_name = "IMG", conflicts_with = "fs_size", value_parser = image_run)]
    pub image: Option<workload::ImageRun>,
    /// With `--image`: read it even while it is mounted read-write.
    #[arg(long, requires = "image")]
    pub allow_mounted: bool,
    /// Run on these counts of virtual CPUs in virtual time instead (comma separated, 1-128;
    /// the simulator build only; fallocate2 and appenders, `bench threads`' patterns, and
    /// fallocate3's loop, fallocate3 and seed003).
    #[arg(
        long,
        value_name = "LIST",
        value_parser = thread_list,
        conflicts_with_all = ["threads", "image", "load_cost"]
    )]
    pub vcpus: Option<ThreadList>,
    /// With `--vcpus`: whose costs (docs/vcpus/design.md): `server`, published server line costs;
    /// `local`, this machine's; `xeon16`, the 16-core machine whose kernel was measured at
    /// 1-16 processes; `kunpeng920`, `epyc9654x2`, the seeds' servers (their published
    /// one-container speed, server line costs).
    #[arg(long, default_value = "server", value_parser = ["server", "local", "xeon16", "kunpeng920", "epyc9654x2"])]
    pub machine: String,
}

fn image_run(s: &str) -> Result<workload::ImageRun, String> {
    Ok(workload::ImageRun {
        path: s.into(),
        allow_mounted: false,
    })
}

/// Thread counts of a sweep, in the order given, without duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadList(pub Vec<u32>);

pub fn thread_list(s: &str) -> Result<ThreadList, String> {
    parse::threads(s).map(ThreadList)
}

/// Where results go.
#[derive(Args, Debug, Clone, Default)]
pub struct Output {
    /// Print one JSON object per run, one per line, instead of the readable summary.
    #[arg(long)]
    pub json: bool,
    /// Also write JSON, CSV and SVG plots of every run into this folder (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No progress bars.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `mballoc run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Workload name (see `mballoc list`).
    #[arg(value_parser = workload_name)]
    pub workload: String,
    /// Policy preset (see `mballoc list`).
    #[arg(long, default_value = "linux-6.18", value_parser = policy_name)]
    pub policy: Policy,
    #[command(flatten)]
    pub scenario: Scenario,
    #[command(flatten)]
    pub output: Output,
}

/// `mballoc compare`.
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Workload name (see `mballoc list`).
    #[arg(value_parser = workload_name)]
    pub workload: String,
    /// The two policies to compare: `--policy A --policy B` (A is the baseline); one policy
    /// serves both sides when `--set-a`/`--set-b` tell them apart.
    #[arg(long = "policy", required = true, num_args = 1, value_parser = policy_name)]
    pub policies: Vec<Policy>,
    /// Settings for A only (on top of `--set`), e.g. to compare one switch within a preset.
    #[arg(long = "set-a", value_name = "NAME=VALUE", value_parser = parse::setting)]
    pub set_a: Vec<String>,
    /// Settings for B only (on top of `--set`).
    #[arg(long = "set-b", value_name = "NAME=VALUE", value_parser = parse::setting)]
    pub set_b: Vec<String>,
    #[command(flatten)]
    pub scenario: Scenario,
    #[command(flatten)]
    pub output: Output,
}

/// `mballoc reproduce`.
#[derive(Args, Debug, Clone)]
pub struct ReproduceArgs {
    /// Laptop scale: every experiment shortened so the whole command takes minutes.
    #[arg(long)]
    pub quick: bool,
    /// Folder of kernel captures (default: the repository's kernel-cases/).
    #[arg(long, value_name = "DIR")]
    pub traces: Option<PathBuf>,
    /// Only these seeds' experiments (ids like 000, 002; repeatable; default all).
    #[arg(long = "only", value_name = "SEED")]
    pub only: Vec<String>,
    /// Skip the kernel-trace fidelity proof.
    #[arg(long)]
    pub no_fidelity: bool,
    /// The virtual-CPU counts of the seeds' curves (comma separated, 1-128; the simulator
    /// build only): seeds 000's and 001's fallocate2 curves (beside each row's own count) and
    /// seed 003's fallocate3 curves, drawn even with `--quick`. Default: 1,16,32,64,128 and
    /// 1,2,4,8,16,32,64,128, none with `--quick`. The judged rows keep the seeds' counts.
    #[arg(long, value_name = "LIST", value_parser = thread_list)]
    pub vcpus: Option<ThreadList>,
    #[command(flatten)]
    pub output: Output,
}

/// `mballoc groups`.
#[derive(Args, Debug, Clone)]
pub struct GroupsArgs {
    /// Filesystem size (e.g. 4G, 512M, 16T) of the fresh layout printed without `--image`.
    #[arg(long, default_value = "1G", value_parser = parse::size, conflicts_with = "image")]
    pub fs_size: u64,
    /// Print the groups of this ext4 file system instead (image file, `e2image -r` output or
    /// block device), as the kernel's mb_groups would after a mount.
    #[arg(long, value_name = "IMG")]
    pub image: Option<PathBuf>,
    /// Read the image even if it is mounted read-write (its state may be inconsistent).
    #[arg(long, requires = "image")]
    pub allow_mounted: bool,
    /// Layout settings `name=value` of the fresh file system: `cluster_kib` (bigalloc).
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse::setting, conflicts_with = "image")]
    pub settings: Vec<String>,
}

/// An ext4 image to read.
#[derive(Args, Debug, Clone)]
pub struct ImageArg {
    /// The ext4 file system: an image file, `e2image -r` output or a block device.
    #[arg(long, value_name = "IMG")]
    pub image: PathBuf,
    /// Read the image even if it is mounted read-write (its state may be inconsistent).
    #[arg(long)]
    pub allow_mounted: bool,
}

/// `mballoc freefrag`.
#[derive(Args, Debug, Clone)]
pub struct FreefragArgs {
    #[command(flatten)]
    pub image: ImageArg,
    /// Print one JSON object instead of e2freefrag's text.
    #[arg(long)]
    pub json: bool,
}

/// `mballoc frag`.
#[derive(Args, Debug, Clone)]
pub struct FragArgs {
    #[command(flatten)]
    pub image: ImageArg,
    /// Print one JSON object instead of the text summary.
    #[arg(long)]
    pub json: bool,
    /// Also write a per-group heat map (frag_pct) to this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Also write the image's allocation state (geometry, `BLOCK_UNINIT` groups, in-use
    /// ranges) to this layout file, gzip-compressed: what the lab can start from without the
    /// image (`bench threads --vcpus N --seed003-image FILE`; docs/vcpus/seed-003.md).
    #[arg(long, value_name = "FILE")]
    pub layout: Option<PathBuf>,
}

/// `mballoc replay`.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// Case directories, or folders holding them.
    #[arg(required = true)]
    pub cases: Vec<PathBuf>,
    /// Print one JSON object.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the Markdown table of docs/fidelity.md (one row per case and a total).
    #[arg(long)]
    pub markdown: bool,
    /// Mismatches to print per case.
    #[arg(long, default_value_t = 10)]
    pub show: usize,
    /// Replay each case's request stream on this ext4 image instead (what-if: where would
    /// these requests land there?); nothing is compared with the kernel then.
    #[arg(long, value_name = "IMG")]
    pub image: Option<PathBuf>,
    /// With `--image`: the policy whose tunables run (default: the capture's own tunables).
    #[arg(long, requires = "image", value_parser = policy_name)]
    pub policy: Option<Policy>,
    /// With `--image`: read it even while it is mounted read-write.
    #[arg(long, requires = "image")]
    pub allow_mounted: bool,
}
