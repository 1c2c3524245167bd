//! `mballoc`: the lab's command line. Each subcommand's arguments and logic live in `cli/`;
//! this file only names the subcommands and routes them.

mod cli;

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
}

fn dispatch(cmd: Cmd) -> Result<(), CliError> {
    match cmd {
        Cmd::Run(a) => cli::run::cmd_run(&a),
        Cmd::Compare(a) => cli::run::cmd_compare(&a),
        Cmd::Reproduce(a) => cli::reproduce::cmd_reproduce(&a),
        Cmd::List => cli::emit::out(&cli::list::render()),
        Cmd::Groups(a) => cli::replay::cmd_groups(&a),
        Cmd::Replay(a) => cli::replay::cmd_replay(&a),
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
