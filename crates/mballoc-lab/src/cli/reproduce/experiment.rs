//! Runs one seed's experiment: every case twice (base, improved), then one table with our two
//! values, our change in % and the seed's published figure beside it.

use mballoc_lab::report::table::fmt_num;
use mballoc_lab::report::ComparisonTable;
use mballoc_lab::workload::{self, RunResult};
use serde::Serialize;

use super::pairs::{run_pairs, Pairs};
use super::seeds::{Case, Experiment};
use super::sides::sides;
use super::verdict::{verdict, Judged, Status, Verdict};
use crate::cli::parse::fmt_size;
use crate::cli::progress::Bar;

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
    /// Every row with a claim, judged.
    pub judged: Vec<JudgedRow>,
    pub verdict: Verdict,
    /// The seed's claim in a few words (the summary's "published" column).
    pub claim: String,
    #[serde(skip)]
    pub runs: Vec<RunResult>,
}

/// A table row with its claim and the judgement.
#[derive(Debug, Clone, Serialize)]
pub struct JudgedRow {
    /// `workload T=n: metric`, as in the table.
    pub label: String,
    pub base: f64,
    pub improved: f64,
    pub headline: bool,
    /// The seed's words or figures behind the rule.
    pub basis: String,
    pub judged: Judged,
}

impl JudgedRow {
    /// `[pass] label: +12.3%; rule (main claim)`.
    fn render(&self) -> String {
        let mark = match self.judged.status {
            Status::Pass => "pass",
            Status::Better => "pass, better than published",
            Status::Fail => "FAIL",
            Status::NotCounted => " -- ",
        };
        let change = self.judged.change.map_or("n/a".into(), fmt_change);
        let main = if self.headline { " (main claim)" } else { "" };
        format!(
            "    [{mark}] {}: {change}; {}{main}\n",
            self.label, self.judged.rule
        )
    }
}

/// `+12.3%`, or `from 0` for a change from 0 to something.
pub fn fmt_change(d: f64) -> String {
    if d.is_infinite() {
        "from 0".into()
    } else {
        format!("{d:+.1}%")
    }
}

impl SeedReport {
    /// A report with nothing run yet, for tests that judge rows they build themselves.
    #[cfg(test)]
    pub fn empty(seed: &str) -> SeedReport {
        SeedReport {
            seed: seed.into(),
            title: String::new(),
            table: ComparisonTable::new("", "base", "patched"),
            ran: Vec::new(),
            skipped: Vec::new(),
            failed: Vec::new(),
            notes: Vec::new(),
            judged: Vec::new(),
            verdict: Verdict::NotMeasurable,
            claim: String::new(),
            runs: Vec::new(),
        }
    }

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
        if !self.judged.is_empty() {
            s.push_str("criteria:\n");
            let mut basis = "";
            for j in &self.judged {
                if j.basis != basis {
                    basis = &j.basis;
                    s.push_str(&format!("  seed: {basis}\n"));
                }
                s.push_str(&j.render());
            }
        }
        s.push_str(&format!("verdict: {}\n", self.verdict_line()));
        s
    }

    /// The verdict from the judged rows as they stand.
    pub fn rejudge(&mut self) {
        let rows: Vec<(bool, Status)> = self
            .judged
            .iter()
            .map(|j| (j.headline, j.judged.status))
            .collect();
        self.verdict = verdict(&rows);
    }

    /// `not reproduced (2 of 9 judged rows met; a main claim failed)`.
    pub fn verdict_line(&self) -> String {
        let count = |st: Status| self.judged.iter().filter(|j| j.judged.status == st).count();
        let better = count(Status::Better);
        let (pass, fail) = (count(Status::Pass) + better, count(Status::Fail));
        let mut s = self.verdict.words().to_string();
        if pass + fail > 0 {
            s.push_str(&format!(" ({pass} of {} judged rows met", pass + fail));
            if better > 0 {
                s.push_str(&format!(", {better} better than published"));
            }
            if self
                .judged
                .iter()
                .any(|j| j.headline && j.judged.status == Status::Fail)
            {
                s.push_str("; a main claim failed");
            }
            s.push(')');
        } else if self.judged.is_empty() && !(self.failed.is_empty() && self.skipped.is_empty()) {
            s.push_str(" (no case ran)");
        }
        s
    }

    /// Our side of the summary: the first main-claim row as `label a -> b (change)`; for a seed
    /// without one, every counted row's change.
    pub fn ours(&self) -> String {
        let change = |j: &JudgedRow| j.judged.change.map_or("n/a".into(), fmt_change);
        let counted: Vec<&JudgedRow> = self
            .judged
            .iter()
            .filter(|j| j.judged.status != Status::NotCounted)
            .collect();
        if let Some(j) = counted.iter().find(|j| j.headline) {
            return format!(
                "{} {} -> {} ({})",
                j.label,
                fmt_num(j.base),
                fmt_num(j.improved),
                change(j)
            );
        }
        if counted.is_empty() {
            let parts: Vec<String> = self
                .judged
                .iter()
                .map(|j| format!("{} {} (not counted)", j.label, change(j)))
                .collect();
            return if parts.is_empty() {
                "-".into()
            } else {
                parts.join("; ")
            };
        }
        let rows: Vec<(&str, String)> = counted.iter().map(|j| (&*j.label, change(j))).collect();
        grouped(&rows)
    }
}

/// `label change` for each row, `; ` between them, except that neighbours measuring the
/// same metric on the same workload share the words their labels begin with: `fallocate2
/// vCPU model ops_per_sec_per_cpu: N=80 scan=0 +145.5%, N=96 scan=0 +198.2%`.
fn grouped(rows: &[(&str, String)]) -> String {
    // A label is `head: metric`; one without a metric stands alone.
    let split = |l: &str| {
        l.rsplit_once(": ")
            .map(|(h, m)| (h.to_string(), m.to_string()))
    };
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let Some((_, metric)) = split(rows[i].0) else {
            parts.push(format!("{} {}", rows[i].0, rows[i].1));
            i += 1;
            continue;
        };
        let first = |l: &str| l.split(' ').next().unwrap_or("").to_string();
        let same = rows[i..]
            .iter()
            .take_while(|(l, _)| {
                split(l).is_some_and(|(_, m)| m == metric) && first(l) == first(rows[i].0)
            })
            .count();
        let group = &rows[i..i + same];
        let heads: Vec<Vec<&str>> = group
            .iter()
            .map(|(l, _)| {
                l.rsplit_once(": ")
                    .map_or("", |(h, _)| h)
                    .split(' ')
                    .collect()
            })
            .collect();
        let common = (0..heads[0].len())
            .take_while(|&w| heads.iter().all(|h| h.len() > w + 1 && h[w] == heads[0][w]))
            .count();
        if same == 1 || common == 0 {
            parts.extend(group.iter().map(|(l, c)| format!("{l} {c}")));
        } else {
            let each: Vec<String> = group
                .iter()
                .zip(&heads)
                .map(|((_, c), h)| format!("{} {c}", h[common..].join(" ")))
                .collect();
            let prefix = heads[0][..common].join(" ");
            parts.push(format!("{prefix} {metric}: {}", each.join(", ")));
        }
        i += same;
    }
    parts.join("; ")
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
        judged: Vec::new(),
        verdict: Verdict::NotMeasurable,
        claim: e.claim.to_string(),
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
        report.judged.extend(judge_rows(c, &pairs));
        report.ran.push(ran_line(c, &pairs));
        report.runs.extend(pairs.into_runs());
    }
    report.table = table;
    report.rejudge();
    report
}

/// The rows of `c` that carry a claim, judged on our medians.
fn judge_rows(c: &Case, pairs: &Pairs) -> Vec<JudgedRow> {
    c.rows
        .iter()
        .filter_map(|r| {
            let claim = r.claim?;
            let (a, b) = pairs.medians(r.metric);
            Some(JudgedRow {
                label: label(c, r.metric),
                base: a,
                improved: b,
                headline: claim.headline,
                basis: claim.basis.split_whitespace().collect::<Vec<_>>().join(" "),
                judged: claim.expect.judge(a, b, pairs.spread(r.metric)),
            })
        })
        .collect()
}

fn label(c: &Case, metric: &str) -> String {
    format!("{} T={}: {metric}", c.workload, c.threads)
}

/// One row per metric of the case: `workload T=n: metric`, our two medians and the seed's
/// figure.
fn add_rows(t: &mut ComparisonTable, c: &Case, pairs: &Pairs) {
    for r in c.rows {
        let label = label(c, r.metric);
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
        s.push_str(&format!(
            ", {:.1} us per bitmap load",
            c.load_cost_ns as f64 / 1000.0
        ));
    }
    if pairs.base.len() > 1 {
        s.push_str(&format!(
            ", {} runs per side alternating, medians",
            pairs.base.len()
        ));
        if cfg!(feature = "vcpus") {
            // Every synchronisation point of the simulator build tests for a hook (16.5 % more
            // instructions on the churn benchmark with none installed): a timed row here is
            // not the default build's library.
            s.push_str(", timed on the simulator build's hooked library");
        }
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
    use super::super::seeds::{Claim, EXPERIMENTS};
    use super::super::verdict::Expect;
    use super::*;

    /// The summary's cell: neighbours of one metric share their labels' first words; a lone
    /// row, rows without a metric and rows with nothing in common keep their whole labels.
    #[test]
    fn the_summary_groups_neighbours_of_one_metric() {
        let r = |l: &'static str, c: &str| (l, c.to_string());
        let rows = [
            r(
                "fallocate2 vCPU model N=80 scan=0: ops_per_sec_per_cpu",
                "+145.5%",
            ),
            r(
                "fallocate2 vCPU model N=96 scan=1: ops_per_sec_per_cpu",
                "+70.6%",
            ),
            r(
                "fallocate2 vCPU model N=80 scan=0: new_extents_per_call",
                "-63.6%",
            ),
            r("seed003 T=1: ops_per_sec", "-8.4%"),
            r("seed003 T=2: ops_per_sec", "-5.2%"),
            r("fallocate3 vCPU model 802g-68 N=2: ops_per_sec", "+125.3%"),
            r("fallocate3 vCPU model 15t-6 N=8: ops_per_sec", "+0.8%"),
            r("fallocate2 T=1: ops_per_sec_per_task", "-1.0%"),
            r("no metric here", "+2.0%"),
            r("a T=1: frag", "-9.0%"),
            r("b T=1: frag", "-8.0%"),
        ];
        assert_eq!(
            grouped(&rows),
            "fallocate2 vCPU model ops_per_sec_per_cpu: N=80 scan=0 +145.5%, N=96 scan=1 \
             +70.6%; fallocate2 vCPU model N=80 scan=0: new_extents_per_call -63.6%; \
             seed003 ops_per_sec: T=1 -8.4%, T=2 -5.2%; fallocate3 vCPU model ops_per_sec: \
             802g-68 N=2 +125.3%, 15t-6 N=8 +0.8%; fallocate2 T=1: ops_per_sec_per_task -1.0%; no metric here +2.0%; a T=1: frag \
             -9.0%; b T=1: frag -8.0%"
        );
        assert_eq!(grouped(&[]), "");
    }

    /// Seed 002's main claim needs size classes: with them off on both sides (the improved
    /// side no different from the base), its verdict must be `not reproduced`. The two cases of
    /// the main claim only, to keep the test short.
    #[test]
    fn seed_002_without_size_classes_is_not_reproduced() {
        let e = Experiment {
            improved: Some("0"),
            cases: &EXPERIMENTS[2].cases[..2],
            ..EXPERIMENTS[2]
        };
        assert_eq!(e.switch, "size_classes");
        let rep = run_experiment(&e, true, &Bar::new(false));
        assert!(rep.failed.is_empty(), "{:?}", rep.failed);
        assert_eq!(rep.verdict, Verdict::NotReproduced, "{}", rep.render());
        let shown = rep.render();
        assert!(shown.contains("verdict: not reproduced"), "{shown}");
        assert!(shown.contains("a main claim failed"), "{shown}");
    }

    /// Seed 002 reproduces with `proposed`'s size-class placement, and does not when a file's
    /// new run joins its class's groups instead of opening an empty one
    /// (`size_class_stream_groups=0`: classes as btrfs ports them, windows packed together).
    /// bufferedappendvsfallocate alone, the main claim.
    #[test]
    fn seed_002_verdict_follows_the_class_placement() {
        let full = &EXPERIMENTS[2];
        assert_eq!(full.seed, "002");
        assert_eq!(full.cases[0].rows[0].metric, "frag_pct_mean");
        // The fragmentation rows only (deterministic); the wall-time latency rows stay out of
        // a test. Const slices are needed for `cases`: leak the two one-element arrays.
        let frag = |settings: &'static [&'static str]| -> &'static [Case] {
            Box::leak(Box::new([Case {
                settings,
                rows: &full.cases[0].rows[..4],
                reps: 1,
                ..full.cases[0]
            }]))
        };
        let judge = |cases| run_experiment(&Experiment { cases, ..*full }, true, &Bar::new(false));
        let rep = judge(frag(full.cases[0].settings));
        assert_eq!(rep.verdict, Verdict::Reproduced, "{}", rep.render());
        let rep = judge(frag(&["scale=0.5", "size_class_stream_groups=0"]));
        assert_eq!(rep.verdict, Verdict::NotReproduced, "{}", rep.render());
    }

    /// Seed 004 reproduces (32 MiB windows give extents within a factor of two of the
    /// published +300 %), and does not when the switch is left at its base value.
    #[test]
    fn seed_004_verdict_follows_the_switch() {
        let e = &EXPERIMENTS[4];
        assert_eq!(e.seed, "004");
        let rep = run_experiment(e, true, &Bar::new(false));
        assert_eq!(rep.verdict, Verdict::Reproduced, "{}", rep.render());
        let unchanged = Experiment {
            improved: Some(e.base),
            ..*e
        };
        let rep = run_experiment(&unchanged, true, &Bar::new(false));
        assert_eq!(rep.verdict, Verdict::NotReproduced, "{}", rep.render());
    }

    /// Rows that only many containers could show are not counted: seed 001 has no other claim.
    #[test]
    fn container_figures_are_not_measurable_here() {
        let e = &EXPERIMENTS[1];
        let rows: Vec<(bool, Status)> = e
            .cases
            .iter()
            .flat_map(|c| c.rows)
            .filter_map(|r| r.claim)
            .map(|c| (c.headline, c.expect.judge(2643.0, 4784.0, 0.0).status))
            .collect();
        assert!(!rows.is_empty());
        assert!(rows.iter().all(|&(_, s)| s == Status::NotCounted));
        assert_eq!(verdict(&rows), Verdict::NotMeasurable);
    }

    /// Every bound of a `Within` claim is a figure of the seed's own text.
    #[test]
    fn published_ranges_are_quoted_from_the_seed() {
        for (e, text) in with_seed_texts() {
            for r in e.cases.iter().flat_map(|c| c.rows) {
                if let Some(Claim {
                    expect: Expect::Within { lo, hi, .. },
                    ..
                }) = r.claim
                {
                    for v in [lo, hi] {
                        let num = format!("{:.2}", v.abs());
                        let short = num.trim_end_matches('0').trim_end_matches('.');
                        assert!(
                            text.contains(&num) || text.contains(&format!("{short}%")),
                            "seed {}: {v} not in the seed text",
                            e.seed
                        );
                    }
                }
            }
        }
    }

    /// Each experiment with its seed's text (`shared/seeds/<id>_*.txt` beside the repository);
    /// nothing where the seeds are not there.
    fn with_seed_texts() -> Vec<(&'static Experiment, String)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/seeds");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let texts: Vec<(String, std::path::PathBuf)> = entries
            .flatten()
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .collect();
        EXPERIMENTS
            .iter()
            .filter_map(|e| {
                let (_, path) = texts.iter().find(|(n, _)| n.starts_with(e.seed))?;
                Some((e, std::fs::read_to_string(path).unwrap_or_default()))
            })
            .collect()
    }

    #[test]
    fn every_published_figure_is_quoted_from_its_seed() {
        for (e, text) in with_seed_texts() {
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
