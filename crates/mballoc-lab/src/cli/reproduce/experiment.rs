//! Runs one seed's experiment: every case twice (base, improved), then one table with our two
//! values, our change in % and the seed's published figure beside it.

use mballoc::tunables::possible_cpus;
use mballoc::{Geometry, Policy};
use mballoc_lab::report::ComparisonTable;
use mballoc_lab::workload::{self, RunConfig, RunResult};
use serde::Serialize;

use super::pairs::{run_pairs, Pairs};
use super::seeds::{Case, Experiment};
use crate::cli::parse::fmt_size;
use crate::cli::progress::Bar;

/// The preset both sides start from.
pub const PRESET: Policy = Policy::Linux618;

/// One seed's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct SeedReport {
    pub seed: String,
    pub title: String,
    pub table: ComparisonTable,
    /// What ran: workload, threads, filesystem size and wall time of each side.
    pub ran: Vec<String>,
    /// Cases not run because this build has no such workload.
    pub skipped: Vec<String>,
    /// Cases that failed, with the error; the other cases still run.
    pub failed: Vec<String>,
    pub notes: Vec<String>,
    #[serde(skip)]
    pub runs: Vec<RunResult>,
}

impl SeedReport {
    /// The table with its notes, as printed by `reproduce`.
    pub fn render(&self) -> String {
        let mut s = format!("seed {} — {}\n", self.seed, self.title);
        if self.table.rows.is_empty() {
            s.push_str("(no case of this seed could run in this build)\n");
        } else {
            s.push_str(&self.table.render());
        }
        for r in &self.ran {
            s.push_str(&format!("ran: {r}\n"));
        }
        for k in &self.skipped {
            s.push_str(&format!("skipped: {k}\n"));
        }
        for f in &self.failed {
            s.push_str(&format!("FAILED: {f}\n"));
        }
        for n in &self.notes {
            s.push_str(&format!("note: {n}\n"));
        }
        s
    }
}

/// `switch=value` for each side; the improved default is read from the preset at this size.
pub fn sides(e: &Experiment, fs_size: u64) -> (String, String) {
    let base = format!("{}={}", e.switch, e.base);
    let improved = match e.improved {
        Some(v) => v.to_string(),
        None => Geometry::ext4_default(fs_size)
            .ok()
            .and_then(|g| PRESET.tunables(&g, possible_cpus()).get(e.switch))
            .unwrap_or_else(|| "default".into()),
    };
    (base, format!("{}={improved}", e.switch))
}

/// The run configuration of one side of a case.
pub fn config(c: &Case, switch: &str, quick: bool) -> RunConfig {
    let mut settings: Vec<String> = c.settings.iter().map(|s| s.to_string()).collect();
    if quick {
        settings.extend(c.quick_settings.iter().map(|s| s.to_string()));
    }
    settings.push(switch.to_string());
    RunConfig {
        workload: c.workload.to_string(),
        policy: PRESET,
        settings,
        threads: c.threads,
        fs_size: if quick { c.quick_size } else { c.full_size },
        seed: 1,
        quick,
        load_cost_ns: c.load_cost_ns,
        image: None,
    }
}

/// Runs every case of `e` whose workload exists, and tabulates the rows. A failing case is
/// recorded in the report and the others still run.
pub fn run_experiment(e: &Experiment, quick: bool, bar: &Bar) -> SeedReport {
    let size = e
        .cases
        .first()
        .map_or(16 << 30, |c| if quick { c.quick_size } else { c.full_size });
    let (base, improved) = sides(e, size);
    let mut table = ComparisonTable::new("", &base, &improved)
        .with_delta_label("diff")
        .with_note_column(&format!("published (seed {})", e.seed));
    let mut report = SeedReport {
        seed: e.seed.to_string(),
        title: e.title.to_string(),
        table: ComparisonTable::new("", "", ""),
        ran: Vec::new(),
        skipped: Vec::new(),
        failed: Vec::new(),
        notes: e.notes.iter().map(|n| n.to_string()).collect(),
        runs: Vec::new(),
    };
    for c in e.cases {
        if !workload::catalog().iter().any(|w| w.name == c.workload) {
            report
                .skipped
                .push(format!("{} (no such workload in this build)", c.workload));
            continue;
        }
        let pairs = match run_pairs(c, &base, &improved, quick, bar) {
            Ok(p) => p,
            Err(e) => {
                report
                    .failed
                    .push(format!("{} T={}: {e}", c.workload, c.threads));
                continue;
            }
        };
        add_rows(&mut table, c, &pairs);
        report.ran.push(ran_line(c, &pairs));
        report.runs.extend(pairs.into_runs());
    }
    report.table = table;
    report
}

/// One row per metric of the case: `workload T=n: metric`, our two medians and the seed's
/// figure.
fn add_rows(t: &mut ComparisonTable, c: &Case, pairs: &Pairs) {
    for r in c.rows {
        let label = format!("{} T={}: {}", c.workload, c.threads, r.metric);
        let (a, b) = pairs.medians(r.metric);
        match r.published {
            Some(p) => t.row_note(&label, a, b, p),
            None => t.row(&label, a, b),
        };
    }
}

/// `fallocate2 T=2 on 4G, 3 runs per side alternating, median (base 4.0 s, improved 4.0 s)`.
fn ran_line(c: &Case, pairs: &Pairs) -> String {
    let size = pairs.base.first().map_or(0, |r| r.fs_size);
    let secs = |runs: &[RunResult]| runs.iter().map(|r| r.elapsed_s).sum::<f64>();
    let mut s = format!("{} T={} on {}", c.workload, c.threads, fmt_size(size));
    if c.load_cost_ns > 0 {
        s.push_str(&format!(", {} us per bitmap load", c.load_cost_ns / 1000));
    }
    if pairs.base.len() > 1 {
        s.push_str(&format!(
            ", {} runs per side alternating, medians",
            pairs.base.len()
        ));
    }
    s.push_str(&format!(
        " (base {:.1} s, improved {:.1} s)",
        secs(&pairs.base),
        secs(&pairs.improved)
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::super::seeds::EXPERIMENTS;
    use super::*;

    #[test]
    fn sides_differ_only_in_the_switch() {
        for e in &EXPERIMENTS {
            let (b, i) = sides(e, 4 << 30);
            assert!(
                b.starts_with(e.switch) && i.starts_with(e.switch),
                "{b} {i}"
            );
            assert_ne!(b, i, "seed {}: base and improved must differ", e.seed);
            for c in e.cases {
                let cb = config(c, &b, true);
                let ci = config(c, &i, true);
                assert_eq!(
                    cb.settings[..cb.settings.len() - 1],
                    ci.settings[..ci.settings.len() - 1]
                );
                assert_eq!(
                    (cb.policy, cb.threads, cb.fs_size),
                    (ci.policy, ci.threads, ci.fs_size)
                );
            }
        }
    }

    #[test]
    fn every_published_figure_is_quoted_from_its_seed() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/seeds");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return; // the seeds live beside the repository; nothing to check without them
        };
        let texts: Vec<(String, String)> = entries
            .flatten()
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                (name, std::fs::read_to_string(e.path()).unwrap_or_default())
            })
            .collect();
        for e in &EXPERIMENTS {
            let Some((_, text)) = texts.iter().find(|(n, _)| n.starts_with(e.seed)) else {
                continue;
            };
            for c in e.cases {
                for r in c.rows {
                    for num in r.published.into_iter().flat_map(figures) {
                        assert!(
                            text.contains(&num),
                            "seed {}: {num} not in the seed text",
                            e.seed
                        );
                    }
                }
            }
        }
    }

    /// The numbers of a quote (`+47.4%`, `4834`, `20734.49`), as they must appear in the seed.
    fn figures(quote: &str) -> Vec<String> {
        quote
            .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '%'))
            .map(|w| w.trim_matches('.').trim_end_matches('%'))
            .filter(|w| w.len() >= 3 && w.chars().any(|c| c.is_ascii_digit()))
            .map(str::to_string)
            .collect()
    }
}
