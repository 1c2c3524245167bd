use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mballoc::{Allocator, Geometry};
use mballoc_lab::replay;

mod store_cli;

/// mballoc: the ext4 multi-block allocator (Linux 6.18) lab.
#[derive(Parser)]
#[command(name = "mballoc", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print the mb_groups dump of a fresh in-memory filesystem.
    Groups {
        /// Filesystem size (e.g. 4G, 512M, 16T).
        #[arg(long, default_value = "1G")]
        fs_size: String,
    },
    /// The main job. Today: the fidelity proof (every stored kernel capture replayed and
    /// compared). The seeds' base-vs-improved experiments join it with the workloads.
    Reproduce {
        /// Folder of kernel captures (default: ../shared/kernel-traces beside the repository).
        #[arg(long)]
        traces: Option<PathBuf>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Replay kernel captures and compare every placement with the kernel's.
    Replay {
        /// Case directories, or folders holding them.
        #[arg(required = true)]
        cases: Vec<PathBuf>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Mismatches to print per case.
        #[arg(long, default_value_t = 10)]
        show: usize,
    },
    // Durable store commands (store_cli.rs).
    /// Create a durable allocator store file: `mkstore PATH --size 1T [--block-size 4K]`.
    Mkstore(store_cli::MkstoreArgs),
    /// A store's geometry, free space, groups and corrupt groups (descriptors only).
    Info(store_cli::InfoArgs),
    /// Verify every checksum and free count of a store; exits non-zero naming each problem.
    Fsck(store_cli::FsckArgs),
}

/// Parses sizes like `4G`, `512M`, `16T`, `1048576` (bytes, binary units).
fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| {
        format!("bad size {s:?}: expected a number with an optional K/M/G/T suffix")
    })?;
    let shift = match unit.to_ascii_uppercase().trim_end_matches(['B', 'I']) {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("bad size unit in {s:?}: use K, M, G or T")),
    };
    n.checked_shl(shift)
        .filter(|v| v >> shift == n)
        .ok_or_else(|| format!("size {s:?} is too large"))
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Mkstore(a) => store_cli::mkstore(&a),
        Cmd::Info(a) => store_cli::info(&a),
        Cmd::Fsck(a) => store_cli::fsck(&a),
        Cmd::Groups { fs_size } => {
            let bytes = parse_size(&fs_size)?;
            let layout = mballoc_lab::mkfs::layout(bytes).map_err(|e| e.to_string())?;
            let geo = Geometry::new(
                4096,
                layout.blocks_per_group,
                layout.blocks_count,
                0,
                layout.flex_bg_size,
            )
            .map_err(|e| e.to_string())?;
            let a = Allocator::new(geo, &layout.used).map_err(|e| e.to_string())?;
            print!("{}", a.mb_groups().map_err(|e| e.to_string())?);
            Ok(())
        }
        Cmd::Reproduce { traces, json } => {
            let dir = traces.unwrap_or_else(default_traces);
            if !dir.is_dir() {
                return Err(format!(
                    "no kernel captures at {} (pass --traces DIR)",
                    dir.display()
                ));
            }
            if !json {
                println!(
                    "Fidelity: Linux 6.18 captures in {} replayed through mballoc",
                    dir.display()
                );
            }
            run(Cli {
                cmd: Cmd::Replay {
                    cases: vec![dir],
                    json,
                    show: 10,
                },
            })?;
            if !json {
                println!("\nThe seeds' experiments (stream goals, try-lock, size classes, prefetch, prealloc window) are not in this build yet.");
            }
            Ok(())
        }
        Cmd::Replay { cases, json, show } => {
            let rep = replay::replay_paths(&cases).map_err(|e| e.to_string())?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&rep).map_err(|e| e.to_string())?
                );
                return Ok(());
            }
            println!(
                "{:<22} {:>7} {:>7} {:>9} {:>6} {:>10}",
                "case", "allocs", "matched", "agreement", "path", "final_diff"
            );
            for c in &rep.cases {
                println!(
                    "{:<22} {:>7} {:>7} {:>8.2}% {:>6} {:>10}",
                    c.name,
                    c.allocs,
                    c.matched,
                    100.0 * c.agreement,
                    c.path_matched,
                    c.final_diff_blocks
                );
            }
            println!(
                "{:<22} {:>7} {:>7} {:>8.2}%",
                "all",
                rep.allocs,
                rep.matched,
                100.0 * rep.agreement
            );
            for c in &rep.cases {
                for m in c.mismatches.iter().take(show) {
                    println!(
                        "{}: seq {} ino {} lblk {} len {}: kernel {} ours {} — {}",
                        c.name, m.seq, m.ino, m.lblk, m.len, m.kernel, m.ours, m.first_difference
                    );
                }
            }
            Ok(())
        }
    }
}

/// `shared/kernel-traces` beside the repository (the checkout's parent holds `shared/`).
fn default_traces() -> PathBuf {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    for candidate in [
        repo.join("../shared/kernel-traces"),
        repo.join("shared/kernel-traces"),
        PathBuf::from("../shared/kernel-traces"),
    ] {
        if candidate.is_dir() {
            return candidate;
        }
    }
    PathBuf::from("../shared/kernel-traces")
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mballoc: {e}");
            ExitCode::FAILURE
        }
    }
}
