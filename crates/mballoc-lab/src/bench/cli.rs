//! The `mballoc bench` command, kept here so that `main.rs` holds one variant and one match arm.

use super::churn::{run_churn, ChurnConfig};
use mballoc::Policy;

use super::huge::{run_huge, HugeConfig};
use super::peers::System;
use super::report::BenchReport;
use super::threads::{run_threads, ThreadsConfig};
use super::BenchError;

/// Which benchmarks to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Churn,
    Threads,
    Huge,
    All,
}

impl std::str::FromStr for Which {
    type Err = BenchError;
    fn from_str(s: &str) -> Result<Which, BenchError> {
        match s {
            "churn" => Ok(Which::Churn),
            "threads" => Ok(Which::Threads),
            "huge" => Ok(Which::Huge),
            "all" => Ok(Which::All),
            _ => Err(BenchError::UnknownBench(s.to_string())),
        }
    }
}

/// Options of `mballoc bench`.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub which: Which,
    /// Runs per system (the median is reported); default 5, quick 2.
    pub runs: Option<u32>,
    pub quick: bool,
    /// Churn systems to run: those whose name contains one of these (empty = all).
    pub only: Vec<String>,
    /// Tunables (`name=value`) set on top of every mballoc policy of every benchmark.
    pub settings: Vec<String>,
}

/// Runs what `opts` selects.
pub fn run(opts: &BenchOptions) -> Result<BenchReport, BenchError> {
    let runs = opts.runs.unwrap_or(if opts.quick { 2 } else { 5 });
    if runs == 0 {
        return Err(BenchError::BadOption {
            name: "--runs",
            value: "0".into(),
            why: "at least one run",
        });
    }
    let want = |w: Which| opts.which == w || opts.which == Which::All;
    let mut rep = BenchReport {
        quick: opts.quick,
        ..BenchReport::default()
    };
    if want(Which::Churn) {
        let cfg = ChurnConfig {
            settings: opts.settings.clone(),
            ..if opts.quick {
                ChurnConfig::quick()
            } else {
                ChurnConfig::full()
            }
        };
        if let Some(o) = opts
            .only
            .iter()
            .find(|o| !System::ALL.iter().any(|s| s.name().contains(o.as_str())))
        {
            let known: Vec<String> = System::ALL.iter().map(|s| s.name()).collect();
            return Err(BenchError::NoSuchSystem {
                only: o.clone(),
                known: known.join(", "),
            });
        }
        let systems: Vec<System> = System::ALL
            .into_iter()
            .filter(|s| opts.only.is_empty() || opts.only.iter().any(|o| s.name().contains(o)))
            .collect();
        rep.churn = Some(run_churn(&cfg, &systems, runs)?);
    }
    if want(Which::Threads) {
        let cfg = ThreadsConfig {
            settings: opts.settings.clone(),
            ..if opts.quick {
                ThreadsConfig::quick()
            } else {
                ThreadsConfig::full()
            }
        };
        rep.threads = Some(run_threads(&cfg, runs)?);
    }
    if want(Which::Huge) {
        let cfg = HugeConfig {
            settings: opts.settings.clone(),
            ..if opts.quick {
                HugeConfig::quick()
            } else {
                HugeConfig::full()
            }
        };
        rep.huge = Some(run_huge(&cfg, &[Policy::Linux618, Policy::Proposed])?);
    }
    Ok(rep)
}
