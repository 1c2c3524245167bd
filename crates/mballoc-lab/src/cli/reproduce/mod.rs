//! `mballoc reproduce`: the main job. First the fidelity proof (every stored Linux 6.18 capture
//! replayed through the allocator), then each seed's experiment at laptop scale — base against
//! improved, only the seed's switch differing — one table per seed with the seed's published
//! figure beside ours, the seed's claims judged, one verdict per seed and a summary at the end.

pub mod experiment;
pub mod pairs;
pub mod seeds;
pub mod sides;
pub mod summary;
pub mod vcpu;
pub mod vcpu003;
pub mod verdict;

use std::path::Path;
use std::time::Instant;

use mballoc_lab::replay::{self, ReplayReport};
use mballoc_lab::report;
use serde::Serialize;

use super::args::ReproduceArgs;
use super::emit::outln;
use super::error::CliError;
use super::outdir;
use super::progress::Bar;
use super::replay::{default_traces, render};
use experiment::{run_experiment, SeedReport};
use seeds::{Experiment, EXPERIMENTS};

/// Everything `reproduce --json` prints and `--out` saves as `reproduce.json`.
#[derive(Debug, Serialize)]
struct Reproduction {
    quick: bool,
    fidelity: Option<ReplayReport>,
    seeds: Vec<SeedReport>,
    elapsed_s: f64,
}

/// `--vcpus` of `reproduce`: counts of 1 to 128, in the simulator build.
fn check_curve_vcpus(counts: &[u32]) -> Result<(), CliError> {
    use super::vcpus::MAX_VCPUS;
    if let Some(n) = counts.iter().find(|&&n| n == 0 || n > MAX_VCPUS) {
        return Err(CliError::Usage(format!(
            "--vcpus {n}: between 1 and {MAX_VCPUS} virtual CPUs"
        )));
    }
    if cfg!(feature = "vcpus") {
        Ok(())
    } else {
        Err(CliError::VcpusBuild)
    }
}

/// `mballoc reproduce`.
pub fn cmd_reproduce(a: &ReproduceArgs) -> Result<(), CliError> {
    let t0 = Instant::now();
    let chosen = select(&a.only)?;
    let curve_vcpus = a.vcpus.as_ref().map(|l| l.0.as_slice());
    if let Some(counts) = curve_vcpus {
        check_curve_vcpus(counts)?;
    }
    if let Some(dir) = &a.output.out {
        outdir::check_writable(dir)?;
    }
    let fidelity = if a.no_fidelity { None } else { fidelity(a)? };
    let bar = Bar::for_terminal(a.output.quiet);
    if !a.output.json {
        outln(summary::SEED_LEGEND)?;
    }
    let mut seeds = Vec::new();
    let mut simulator = vcpu::Simulator::new(a.quick);
    for e in chosen {
        let mut rep = run_experiment(e, a.quick, &bar);
        simulator.attach(&mut rep);
        #[cfg(feature = "vcpus")]
        {
            let svg_dir = (a.output.out.as_ref()).map(|d| d.join(format!("seed-{}", rep.seed)));
            simulator.curves(&mut rep, curve_vcpus, svg_dir.as_deref());
            vcpu003::attach(&mut rep, a.quick, curve_vcpus, svg_dir.as_deref());
        }
        if !a.output.json {
            outln(&rep.render())?;
        }
        seeds.push(rep);
    }
    let all = Reproduction {
        quick: a.quick,
        fidelity,
        seeds,
        elapsed_s: t0.elapsed().as_secs_f64(),
    };
    if a.output.json {
        outln(&serde_json::to_string(&all).map_err(|e| CliError::Other(e.to_string()))?)?;
    } else {
        outln(&summary::render(&all.seeds))?;
        outln(&format!("reproduce took {:.1} s", all.elapsed_s))?;
        if a.output.out.is_none() {
            outln(summary::OUT_HINT)?;
        }
    }
    if let Some(dir) = &a.output.out {
        save(dir, &all, a.output.quiet)?;
    }
    let failed: Vec<String> = all
        .seeds
        .iter()
        .flat_map(|s| {
            s.failed
                .iter()
                .map(move |f| format!("seed {}: {f}", s.seed))
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::Other(format!(
            "{} case(s) failed: {}",
            failed.len(),
            failed.join("; ")
        )))
    }
}

/// The experiments named by `--only` (all when empty); an unknown id lists the valid ones.
fn select(only: &[String]) -> Result<Vec<&'static Experiment>, CliError> {
    if only.is_empty() {
        return Ok(EXPERIMENTS.iter().collect());
    }
    only.iter()
        .map(|id| {
            EXPERIMENTS
                .iter()
                .find(|e| e.seed == id.trim())
                .ok_or_else(|| {
                    let valid: Vec<&str> = EXPERIMENTS.iter().map(|e| e.seed).collect();
                    CliError::Usage(format!(
                        "unknown seed {id:?}; valid seeds: {}",
                        valid.join(", ")
                    ))
                })
        })
        .collect()
}

/// The kernel-trace replay. A missing `--traces DIR` is an error; a missing default folder only
/// skips the proof (the experiments do not need it).
fn fidelity(a: &ReproduceArgs) -> Result<Option<ReplayReport>, CliError> {
    let dir = a.traces.clone().unwrap_or_else(default_traces);
    if !dir.is_dir() {
        if a.traces.is_some() {
            return Err(CliError::Usage(format!(
                "no kernel captures at {} (--traces DIR)",
                dir.display()
            )));
        }
        eprintln!(
            "note: no kernel captures at {}; skipping the fidelity proof (pass --traces DIR)",
            dir.display()
        );
        return Ok(None);
    }
    let rep = replay::replay_paths(std::slice::from_ref(&dir))?;
    if !a.output.json {
        outln(&format!(
            "Fidelity: Linux 6.18 captures in {} replayed through mballoc",
            dir.display()
        ))?;
        outln(&render(&rep, 10))?;
        outln(summary::FIDELITY_LEGEND)?;
    }
    Ok(Some(rep))
}

/// `--out DIR`: `reproduce.json`, then each seed's runs under `seed-<id>/`.
fn save(dir: &Path, all: &Reproduction, quiet: bool) -> Result<(), CliError> {
    std::fs::create_dir_all(dir).map_err(|source| CliError::OutDir {
        path: dir.to_path_buf(),
        source,
    })?;
    report::write_json(all, &dir.join("reproduce.json"))?;
    let mut n = 1;
    for s in &all.seeds {
        if !s.runs.is_empty() {
            n += outdir::write_all(&dir.join(format!("seed-{}", s.seed)), &s.runs)?.len();
        }
    }
    if !quiet {
        eprintln!("wrote {n} files to {}", dir.display());
    }
    Ok(())
}
