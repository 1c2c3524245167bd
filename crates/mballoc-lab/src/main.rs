//! `mballoc`: the lab's command line. Each subcommand's arguments and logic live in `cli/`;
//! this file only names the subcommands and routes them.

mod cli;
mod store_cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cli::args::{
    CompareArgs, FragArgs, FreefragArgs, GroupsArgs, ReplayArgs, ReproduceArgs, RunArgs,
};
use cli::CliError;
use mballoc_lab::bench;

/// mballoc: the ext4 multi-block allocator (Linux 6.18) lab.
#[derive(Parser)]
#[command(name = "mballoc", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a workload once per thread count and print its metrics.
    Run(RunArgs),
    /// Run a workload under two policies and print a side-by-side table with the change in %.
    Compare(CompareArgs),
    /// The main job: the kernel-trace fidelity proof, then the seeds' experiments.
    Reproduce(ReproduceArgs),
    /// Workloads, metrics, policies and tunables, one line each.
    List,
    /// Print the mb_groups dump of a fresh in-memory filesystem, or of an ext4 image.
    Groups(GroupsArgs),
    /// Print what e2freefrag prints for an ext4 image.
    Freefrag(FreefragArgs),
    /// Fragmentation of an ext4 image: frag_pct per group, free extents, extents per file.
    Frag(FragArgs),
    /// Replay kernel captures and compare every placement with the kernel's.
    Replay(ReplayArgs),
    /// Benchmarks: churn against peer allocators, thread scaling, a huge aged filesystem.
    Bench(BenchArgs),
    /// Create a durable allocator store file: `mkstore PATH --size 1T [--block-size 4K]`.
    Mkstore(store_cli::MkstoreArgs),
    /// A store's geometry, free space, groups and corrupt groups (descriptors only).
    Info(store_cli::InfoArgs),
    /// Verify every checksum and free count of a store; exits non-zero naming each problem.
    Fsck(store_cli::FsckArgs),
}

#[derive(clap::Args)]
struct BenchArgs {
    /// churn, threads, huge or all.
    #[arg(default_value = "all")]
    which: bench::cli::Which,
    /// Runs per system (the median is reported; default 5, 2 with --quick).
    #[arg(long)]
    runs: Option<u32>,
    /// Small variants that finish in seconds.
    #[arg(long)]
    quick: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Only the churn systems whose names contain one of these (comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Set a tunable on top of every mballoc policy, e.g. `--set prefetch_test_before_set=1`
    /// (repeatable; `mballoc list` shows the names).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// `threads` only: run fallocate2 on these counts of virtual CPUs in virtual time
    /// (e.g. 1,2,4,8,16,32,64,96,128) instead of this machine's threads (docs/vcpus/).
    #[arg(long, value_parser = cli::args::thread_list, value_name = "N,N,...")]
    vcpus: Option<cli::args::ThreadList>,
    /// With --vcpus: whose costs: published server line costs, this machine's, the
    /// measured 16-core machine's, or the seeds' servers' (docs/vcpus/design.md).
    #[arg(long, default_value = "server", value_parser = ["server", "local", "xeon16", "kunpeng920", "epyc9654x2"])]
    machine: String,
    /// With --vcpus: policies to run (default linux-6.16, linux-6.18, proposed).
    #[arg(long, value_delimiter = ',')]
    policy: Vec<mballoc::Policy>,
    /// Time the allocator between its synchronisation points (one thread) and print the
    /// table behind the --vcpus work costs.
    #[arg(long)]
    calibrate: bool,
    /// With --vcpus: seeds 000 and 001 at their published CPU counts (80, 96), base against
    /// patched, beside the published figures; the --vcpus counts draw the curves.
    #[arg(long)]
    seeds: bool,
    /// With --vcpus: the kernel series seeds 000 and 001 belong to, patch by patch, at 80
    /// and 96 CPUs beside every published step, and its curve before the series.
    #[arg(long)]
    series: bool,
    /// With --series: a what-if, every line transfer and hand-off at the cost each server's
    /// 6.18 figure implies under the journal's ceiling (fitted to those rows, which are then
    /// not judged).
    #[arg(long, requires = "series")]
    implied_lines: bool,
    /// With --seeds: write one SVG curve per published figure into this folder.
    #[arg(long, value_name = "DIR")]
    svg: Option<std::path::PathBuf>,
    /// With --vcpus: only seed 003's fallocate3 curves on these of its filesystems
    /// (802g-68, 842g-31, 15t-6, 133g-{25,50,75}-{amd,kunpeng}, or `all`); --seeds runs
    /// them all after seeds 000 and 001.
    #[arg(long, value_delimiter = ',', value_name = "FS,...")]
    seed003: Vec<String>,
    /// With --seed003: count each point over this many jbd2 commit cycles after one of
    /// warm-up (will-it-scale's steady state) instead of a few operations after the mount.
    #[arg(long, value_name = "N", requires = "seed003")]
    commit_cycles: Option<u32>,
    /// With --seed003: start with every block bitmap in memory, as ext4's mount-time
    /// background prefetch leaves them once done (`no_prefetch_block_bitmaps` not given),
    /// instead of a cold mount that reads each when first needed.
    #[arg(long, requires = "seed003")]
    cached_bitmaps: bool,
    /// With --calibrate: also time the library's fallocate3 operation on this ext4 image's
    /// layout (the one `scripts/kernel_fallocate3.py` measured the kernel on). With --vcpus:
    /// fallocate3's curve on that layout as the script's `--tasks` runs (2 s of warm-up, 5 s
    /// counted), on --machine's costs.
    #[arg(long, value_name = "IMAGE")]
    seed003_image: Option<std::path::PathBuf>,
    /// With --seed003-image and --vcpus: seconds each point counts after its 2 s of warm-up
    /// (the kernel script's `--seconds`: 5 on the 16-core machine, 10 on this one).
    #[arg(
        long,
        value_name = "S",
        default_value_t = 5,
        requires = "seed003_image"
    )]
    counted_s: u64,
}

fn cmd_bench(a: BenchArgs) -> Result<(), CliError> {
    if a.calibrate || a.vcpus.is_some() {
        return cli::vcpus::cmd_bench_vcpus(&cli::vcpus::VcpuArgs {
            vcpus: a.vcpus.map(|l| l.0).unwrap_or_default(),
            machine: a.machine,
            policies: a.policy,
            settings: a.set,
            calibrate: a.calibrate,
            seeds: a.seeds,
            series: a.series,
            implied_lines: a.implied_lines,
            seed003: a.seed003,
            seed003_image: a.seed003_image,
            counted_s: a.counted_s,
            commit_cycles: a.commit_cycles.unwrap_or(0),
            cached_bitmaps: a.cached_bitmaps,
            svg: a.svg,
            json: a.json,
        });
    }
    let opts = bench::cli::BenchOptions {
        which: a.which,
        runs: a.runs,
        quick: a.quick,
        only: a.only,
        settings: a.set,
    };
    let rep = bench::cli::run(&opts).map_err(|e| match e {
        bench::BenchError::Setting { setting, source } => CliError::Setting { setting, source },
        e => CliError::Other(e.to_string()),
    })?;
    if a.json {
        let text = serde_json::to_string(&rep).map_err(|e| CliError::Other(e.to_string()))?;
        cli::emit::outln(&text)
    } else {
        cli::emit::out(&rep.render())
    }
}

fn dispatch(cmd: Cmd) -> Result<(), CliError> {
    match cmd {
        Cmd::Run(a) => cli::run::cmd_run(&a),
        Cmd::Compare(a) => cli::run::cmd_compare(&a),
        Cmd::Reproduce(a) => cli::reproduce::cmd_reproduce(&a),
        Cmd::List => cli::emit::out(&cli::list::render()),
        Cmd::Groups(a) => cli::replay::cmd_groups(&a),
        Cmd::Freefrag(a) => cli::image::cmd_freefrag(&a),
        Cmd::Frag(a) => cli::image::cmd_frag(&a),
        Cmd::Replay(a) => cli::replay::cmd_replay(&a),
        Cmd::Bench(a) => cmd_bench(a),
        Cmd::Mkstore(a) => store_cli::mkstore(&a).map_err(CliError::Other),
        Cmd::Info(a) => store_cli::info(&a).map_err(CliError::Other),
        Cmd::Fsck(a) => store_cli::fsck(&a).map_err(CliError::Other),
    }
}

fn main() -> ExitCode {
    match dispatch(Cli::parse().cmd) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader closed the pipe (`| head`): nothing left to say.
        Err(CliError::BrokenPipe) => ExitCode::from(141),
        Err(e) => {
            // The same prefix as clap's own usage errors.
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
