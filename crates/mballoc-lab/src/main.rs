//! `mballoc`: the lab's command line. Each subcommand's arguments and logic live in `cli/`;
//! this file only names the subcommands and routes them.

mod cli;
mod store_cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cli::args::{CompareArgs, GroupsArgs, ReplayArgs, ReproduceArgs, RunArgs};
use cli::CliError;

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
    /// Print the mb_groups dump of a fresh in-memory filesystem.
    Groups(GroupsArgs),
    /// Replay kernel captures and compare every placement with the kernel's.
    Replay(ReplayArgs),
    // Durable store commands (store_cli.rs).
    /// Create a durable allocator store file: `mkstore PATH --size 1T [--block-size 4K]`.
    Mkstore(store_cli::MkstoreArgs),
    /// A store's geometry, free space, groups and corrupt groups (descriptors only).
    Info(store_cli::InfoArgs),
    /// Verify every checksum and free count of a store; exits non-zero naming each problem.
    Fsck(store_cli::FsckArgs),
}

fn dispatch(cmd: Cmd) -> Result<(), CliError> {
    match cmd {
        Cmd::Run(a) => cli::run::cmd_run(&a),
        Cmd::Compare(a) => cli::run::cmd_compare(&a),
        Cmd::Reproduce(a) => cli::reproduce::cmd_reproduce(&a),
        Cmd::List => cli::emit::out(&cli::list::render()),
        Cmd::Groups(a) => cli::replay::cmd_groups(&a),
        Cmd::Replay(a) => cli::replay::cmd_replay(&a),
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
            eprintln!("mballoc: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
