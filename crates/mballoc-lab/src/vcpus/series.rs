//! The kernel series seeds 000 and 001 belong to, patch by patch, at the seeds' scale.
//!
//! Both seeds are patches of Baokun Li's "ext4: better scalability for ext4 block allocation"
//! (v3, 17 patches, 2025-07-14, merged for 6.17). Seven of its mails carry the same
//! fallocate2 table (80 containers on a Kunpeng 920, 96 on two AMD 9654, `mb_optimize_scan`
//! 0 and 1), each measuring its patch on top of the ones before it, and the cover letter the
//! whole series. The model has a switch for five of those patches, so the series is a ladder
//! of six kernels ([`RUNGS`]), each linux-6.18 plus settings, and every published step is a
//! pair of neighbouring rungs: eleven more checks of the same model beside the seeds' eight,
//! none of them an input. The published figures are in `docs/measurements/ext4-scalability-
//! series.csv` with their sources; [`STEPS`] holds the same numbers.

use serde::Serialize;

use super::cost::{Machine, EPYC9654X2_OPS_1P, KUNPENG920_OPS_1P};
use super::seeds::{Points, MIN_WINDOW_CALLS, WARMUP_NS, WINDOW_NS};
use crate::bench::BenchError;

/// The kernels of the ladder, oldest first: a name and the settings on top of linux-6.18.
/// Each rung drops one setting of the one before it, the switch of one patch.
pub const RUNGS: [(&str, &[&str]); 6] = [
    (
        "before the series",
        &[
            "nr_global_goals=1",
            "goal_md_lock=1",
            "order_lists=1",
            "free_insert_then_merge=1",
            "try_lock_groups=0",
        ],
    ),
    (
        "01 try-lock",
        &[
            "nr_global_goals=1",
            "goal_md_lock=1",
            "order_lists=1",
            "free_insert_then_merge=1",
        ],
    ),
    (
        "04 goal without s_md_lock",
        &[
            "nr_global_goals=1",
            "order_lists=1",
            "free_insert_then_merge=1",
        ],
    ),
    (
        "05 global goals",
        &["order_lists=1", "free_insert_then_merge=1"],
    ),
    ("09 merge before insert", &["order_lists=1"]),
    ("17 xarrays, linear-like", &[]),
];

/// One published row: per-container fallocate ops/s before and after a step.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Figure {
    pub machine: &'static str,
    pub cpus: u32,
    pub optimize_scan: bool,
    pub base: f64,
    pub patched: f64,
}

impl Figure {
    pub fn change_pct(&self) -> f64 {
        100.0 * (self.patched / self.base - 1.0)
    }
}

/// A published step: its patches, the rungs it goes between (`None`: no switch models it),
/// and its four rows.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Step {
    pub patches: &'static str,
    pub subject: &'static str,
    pub rungs: Option<(usize, usize)>,
    pub figures: [Figure; 4],
}

const fn rows(k0: (f64, f64), k1: (f64, f64), a0: (f64, f64), a1: (f64, f64)) -> [Figure; 4] {
    const fn f(machine: &'static str, cpus: u32, scan: bool, v: (f64, f64)) -> Figure {
        Figure {
            machine,
            cpus,
            optimize_scan: scan,
            base: v.0,
            patched: v.1,
        }
    }
    [
        f(KUNPENG, 80, false, k0),
        f(KUNPENG, 80, true, k1),
        f(AMD, 96, false, a0),
        f(AMD, 96, true, a1),
    ]
}

/// The series' two servers, as its tables name them.
const KUNPENG: &str = "Kunpeng 920";
const AMD: &str = "AMD 9654 x2";

/// The series' published tables (v3), each step's base the previous step's patched figure.
/// 15 and 17 are one step here: the model's xarrays are 17's walk, and 15's own walk (the
/// lists' order over xarrays) has no switch; their figures are 15's base and 17's patched.
pub const STEPS: [Step; 7] = [
    Step {
        patches: "01",
        subject: "ext4: add ext4_try_lock_group() to skip busy groups (seed 001)",
        rungs: Some((0, 1)),
        figures: rows(
            (2667.0, 4821.0),
            (2643.0, 4784.0),
            (3450.0, 15371.0),
            (3209.0, 6101.0),
        ),
    },
    Step {
        patches: "04",
        subject: "ext4: remove unnecessary s_md_lock on update s_mb_last_group",
        rungs: Some((1, 2)),
        figures: rows(
            (4821.0, 9636.0),
            (4784.0, 4834.0),
            (15371.0, 22341.0),
            (6101.0, 9177.0),
        ),
    },
    Step {
        patches: "05",
        subject: "ext4: utilize multiple global goals to reduce contention (seed 000)",
        rungs: Some((2, 3)),
        figures: rows(
            (9636.0, 19628.0),
            (4834.0, 7129.0),
            (22341.0, 53760.0),
            (9177.0, 12716.0),
        ),
    },
    Step {
        patches: "08",
        subject: "ext4: convert sbi->s_mb_free_pending to atomic_t",
        rungs: None,
        figures: rows(
            (19628.0, 20043.0),
            (7129.0, 7290.0),
            (53760.0, 54999.0),
            (12716.0, 13497.0),
        ),
    },
    Step {
        patches: "09",
        subject: "ext4: merge freed extent with existing extents before insertion",
        rungs: Some((3, 4)),
        figures: rows(
            (20043.0, 20097.0),
            (7290.0, 13318.0),
            (54999.0, 53603.0),
            (13497.0, 20887.0),
        ),
    },
    Step {
        patches: "15+17",
        subject: "ext4: convert free groups order lists to xarrays; implement linear-like \
                  traversal across order xarrays",
        rungs: Some((4, 5)),
        figures: rows(
            (20097.0, 20049.0),
            (13318.0, 19342.0),
            (53603.0, 52125.0),
            (20887.0, 50331.0),
        ),
    },
    Step {
        patches: "00",
        subject: "the whole series (cover letter)",
        rungs: Some((0, 5)),
        figures: rows(
            (2667.0, 20049.0),
            (2643.0, 19342.0),
            (3450.0, 52125.0),
            (3209.0, 50331.0),
        ),
    },
];

/// The cover letter's one-container rows: the kernel before the series and after it, one
/// process on each server. Not a step of the chain: its base is the seeds' servers' speed
/// ([`KUNPENG920_OPS_1P`], [`EPYC9654X2_OPS_1P`]), an input of the model; what it checks is
/// the rest of the call's path: how much the walks of the last rung cost one CPU against the
/// first's.
pub const ONE_CONTAINER: Step = Step {
    patches: "00",
    subject: "the whole series, one container (cover letter)",
    rungs: Some((0, RUNGS.len() - 1)),
    figures: [
        one(KUNPENG, false, (KUNPENG920_OPS_1P[0], 316_724.0)),
        one(KUNPENG, true, (KUNPENG920_OPS_1P[1], 328_324.0)),
        one(AMD, false, (EPYC9654X2_OPS_1P[0], 215_136.0)),
        one(AMD, true, (EPYC9654X2_OPS_1P[1], 209_431.0)),
    ],
};

const fn one(machine: &'static str, scan: bool, v: (f64, f64)) -> Figure {
    Figure {
        machine,
        cpus: 1,
        optimize_scan: scan,
        base: v.0,
        patched: v.1,
    }
}

/// A published change under 10 % either way is judged as "no large change": ours must be
/// under 10 % too. Its sign is noise (the seeds' own one-container rows move 2-6 %).
pub const SMALL_PCT: f64 = 10.0;

/// The cover letter's curve before the series: average ops/s per container at 1 to 64
/// containers (the v1 posting's Kunpeng 920, whose 64-container figure it repeats).
pub const BEFORE_CURVE: [(u32, f64); 7] = [
    (1, 295_287.0),
    (2, 70_665.0),
    (4, 33_865.0),
    (8, 19_387.0),
    (16, 10_104.0),
    (32, 5_588.0),
    (64, 3_588.0),
];

/// The line transfer, ns, at which the model's journal ceiling is `machine`'s published
/// linux-6.18 rate (the last rung, `mb_optimize_scan=0`): every call writes the running
/// transaction's line twice (`start_this_handle`, `jbd2_journal_stop`), so all CPUs together
/// make at most 1 / (2 t) calls a second, and t = 1e9 / (2 · CPUs · rate). A fit to that
/// figure, for `--implied-lines` only: what the machine's interconnect would have to cost if
/// that ceiling were what held its kernel (docs/vcpus/seeds-000-001.md, "What line
/// cost the kernel's figures imply").
pub fn implied_line_ns(machine: &str) -> Option<u64> {
    let last = RUNGS.len() - 1;
    STEPS
        .iter()
        .filter(|s| s.rungs.is_some_and(|(_, b)| b == last))
        .flat_map(|s| s.figures)
        .find(|f| f.machine == machine && !f.optimize_scan)
        .map(|f| (1e9 / (2.0 * f64::from(f.cpus) * f.patched)).round() as u64)
}

/// One published row and ours.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    pub patches: &'static str,
    pub figure: Figure,
    /// Our per-CPU rates before and after; `None` where no switch models the step.
    pub ours: Option<(f64, f64)>,
    /// `pass`, `FAIL` or `--` (not modelled).
    pub verdict: &'static str,
    /// How it was judged.
    pub rule: &'static str,
}

impl Checked {
    fn judge(patches: &'static str, figure: Figure, ours: Option<(f64, f64)>) -> Checked {
        let Some((b, p)) = ours else {
            return Checked {
                patches,
                figure,
                ours,
                verdict: "--",
                rule: "not modelled",
            };
        };
        let (pub_pct, our_pct) = (figure.change_pct(), 100.0 * (p / b - 1.0));
        let (ok, rule) = if pub_pct.abs() < SMALL_PCT {
            (our_pct.abs() < SMALL_PCT, "under 10 % both")
        } else {
            let ratio = our_pct / pub_pct;
            if (0.75..=1.25).contains(&ratio) {
                (true, "within ±25 %")
            } else {
                ((0.5..=2.0).contains(&ratio), "within ×2")
            }
        };
        Checked {
            patches,
            figure,
            ours,
            verdict: if ok { "pass" } else { "FAIL" },
            rule,
        }
    }

    pub fn our_pct(&self) -> Option<f64> {
        self.ours.map(|(b, p)| 100.0 * (p / b - 1.0))
    }
}

/// The series' rows and the curve before it.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesReport {
    /// With `--implied-lines`: each machine's line cost ([`implied_line_ns`]); the rows that
    /// end at 6.18 are then not judged.
    pub implied_lines: Vec<(&'static str, u64)>,
    pub rows: Vec<Checked>,
    /// (CPUs, published per-container rate over one container's, ours the same way).
    pub before_curve: Vec<(u32, f64, f64)>,
}

/// A rung's settings on top of linux-6.18.
pub(crate) fn rung(i: usize) -> Vec<String> {
    RUNGS[i].1.iter().map(|s| s.to_string()).collect()
}

/// Runs every modelled step's rows and the curve before the series, with `extra` settings
/// (tunables or lab settings such as `warmup_s`) on every rung, before the rung's own, as
/// `--seeds` puts its variants before each side's; counted as the seeds' rows are (after
/// [`WARMUP_NS`], for [`WINDOW_NS`]).
/// With `implied_lines`, every row runs with its machine's [`implied_line_ns`] (a what-if,
/// fitted to the 6.18 rows, which are then not judged).
pub fn run(extra: &[String], implied_lines: bool) -> Result<SeriesReport, BenchError> {
    let variant = extra.join(" ");
    let mut points = Points::new(WARMUP_NS, WINDOW_NS).with_min_calls(MIN_WINDOW_CALLS);
    let lines = |machine: &str| implied_lines.then(|| implied_line_ns(machine)).flatten();
    let mut rate = |machine: &str, r: usize, scan: bool, n: u32| {
        let mut settings = rung(r);
        settings.extend(lines(machine).map(|ns| format!("line_ns={ns}")));
        points.rate(Machine::of_row(machine), &variant, scan, settings, n)
    };
    let last = RUNGS.len() - 1;
    let mut rows = Vec::new();
    for step in STEPS.iter().chain([&ONE_CONTAINER]) {
        for f in step.figures {
            let ours = match step.rungs {
                Some((a, b)) => Some((
                    rate(f.machine, a, f.optimize_scan, f.cpus)?,
                    rate(f.machine, b, f.optimize_scan, f.cpus)?,
                )),
                None => None,
            };
            let mut checked = Checked::judge(step.patches, f, ours);
            if implied_lines && f.cpus > 1 && step.rungs.is_some_and(|(_, b)| b == last) {
                checked.verdict = "--";
                checked.rule = "fitted: its 6.18 figure set line_ns";
            }
            rows.push(checked);
        }
    }
    // The cover letter does not say which mb_optimize_scan (1 was the default) nor which
    // machine (the v1 posting's Kunpeng 920, 64 containers).
    let one = rate(KUNPENG, 0, true, 1)?;
    let mut before_curve = Vec::new();
    for (n, published) in BEFORE_CURVE {
        let ours = rate(KUNPENG, 0, true, n)? / one;
        before_curve.push((n, published / BEFORE_CURVE[0].1, ours));
    }
    let implied_lines = [KUNPENG, AMD]
        .into_iter()
        .filter_map(|m| lines(m).map(|ns| (m, ns)))
        .collect();
    Ok(SeriesReport {
        implied_lines,
        rows,
        before_curve,
    })
}

/// The report as two tables.
pub fn render(r: &SeriesReport) -> String {
    use std::fmt::Write;
    let mut t = String::from(
        "ext4: better scalability for ext4 block allocation (v3), step by step: per-CPU \
         fallocate2 ops/s, ours (each row on its server's costs) against the published per-container figures\n",
    );
    if !r.implied_lines.is_empty() {
        let each: Vec<String> = r
            .implied_lines
            .iter()
            .map(|(m, ns)| format!("{m} {ns} ns"))
            .collect();
        let _ = writeln!(
            t,
            "what-if: every line transfer and hand-off at the cost each server's 6.18 figure \
             implies under the journal's ceiling ({}): a fit, so the rows ending at 6.18 are \
             not judged",
            each.join(", ")
        );
    }
    let _ = writeln!(
        t,
        "{:<6} {:<12} {:>5} {:>4} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9}  verdict",
        "patch",
        "machine",
        "cpus",
        "scan",
        "ours base",
        "patched",
        "ours",
        "pub base",
        "patched",
        "published"
    );
    for c in &r.rows {
        let f = c.figure;
        let (ob, op, pct) = match (c.ours, c.our_pct()) {
            (Some((b, p)), Some(x)) => (format!("{b:.0}"), format!("{p:.0}"), format!("{x:+.1}%")),
            _ => ("-".into(), "-".into(), "-".into()),
        };
        let _ = writeln!(
            t,
            "{:<6} {:<12} {:>5} {:>4} {:>9} {:>9} {:>8} {:>9.0} {:>9.0} {:>+8.1}%  [{}] {}",
            c.patches,
            f.machine,
            f.cpus,
            u8::from(f.optimize_scan),
            ob,
            op,
            pct,
            f.base,
            f.patched,
            f.change_pct(),
            c.verdict,
            c.rule
        );
    }
    let judged = r.rows.iter().filter(|c| c.verdict != "--").count();
    let met = r.rows.iter().filter(|c| c.verdict == "pass").count();
    let _ = writeln!(
        t,
        "{met} of {judged} modelled rows met (changes under {SMALL_PCT:.0} % judged as under \
         {SMALL_PCT:.0} % both; else within ±25 % or ×2)\n"
    );
    let _ = writeln!(
        t,
        "Before the series, per-container rate over one container's (cover letter; ours: the \
         first rung, mb_optimize_scan=1)\n{:>5} {:>10} {:>8} {:>10}",
        "cpus", "published", "ours", "ours/pub"
    );
    for &(n, p, o) in &r.before_curve {
        let _ = writeln!(t, "{n:>5} {p:>10.3} {o:>8.3} {:>10.2}", o / p);
    }
    t
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::vcpus::seeds::pair;

    /// Seeds 000 and 001 are two of the ladder's steps: their pairs are its rungs, so the
    /// seeds' rows and the series' rows run the same kernels.
    #[test]
    fn the_seeds_pairs_are_rungs_of_the_ladder() {
        let rung = |i: usize| -> Vec<String> {
            let mut v: Vec<String> = RUNGS[i].1.iter().map(|s| s.to_string()).collect();
            v.sort();
            v
        };
        let side = |seed: &str, base: bool| {
            let mut v = pair(seed).settings(base);
            v.sort();
            v
        };
        assert_eq!(side("001", true), rung(0));
        assert_eq!(side("001", false), rung(1));
        assert_eq!(side("000", true), rung(2));
        assert_eq!(side("000", false), rung(3));
    }

    /// Each rung drops exactly one setting of the one before, and the last is linux-6.18.
    #[test]
    fn each_rung_is_one_switch_from_the_last() {
        for w in RUNGS.windows(2) {
            let (a, b) = (w[0].1, w[1].1);
            assert_eq!(a.len(), b.len() + 1, "{} -> {}", w[0].0, w[1].0);
            assert!(b.iter().all(|s| a.contains(s)), "{} -> {}", w[0].0, w[1].0);
        }
        assert!(RUNGS[RUNGS.len() - 1].1.is_empty());
    }

    /// The published tables chain: each step's base is the step before's patched figure
    /// (as published), and the cover letter's totals are the chain's ends.
    #[test]
    fn the_published_steps_chain() {
        let (steps, whole) = STEPS.split_at(STEPS.len() - 1);
        for w in steps.windows(2) {
            for (a, b) in w[0].figures.iter().zip(&w[1].figures) {
                assert_eq!(a.patched, b.base, "{} -> {}", w[0].patches, w[1].patches);
            }
        }
        for (i, f) in whole[0].figures.iter().enumerate() {
            assert_eq!(f.base, steps[0].figures[i].base);
            assert_eq!(f.patched, steps[steps.len() - 1].figures[i].patched);
        }
    }

    /// [`STEPS`], [`BEFORE_CURVE`] and the seeds' servers' one-container speeds are the
    /// stored reference tables, number for number.
    #[test]
    fn the_steps_are_the_stored_tables() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/measurements/");
        let text = std::fs::read_to_string(format!("{dir}ext4-scalability-series.csv"))
            .expect("stored series table");
        let mut tables = BTreeMap::new();
        for line in text.lines().skip(1) {
            let patch = line.split(',').next().expect("patch");
            // After the quoted subject: message id, machine, containers, scan, base, patched.
            let rest: Vec<&str> = line
                .rsplit('"')
                .next()
                .expect("fields")
                .split(',')
                .collect();
            let num = |i: usize| rest[i].parse::<f64>().expect("number");
            tables.insert(
                (
                    patch.to_string(),
                    rest[2].to_string(),
                    num(3) as u32,
                    num(4) == 1.0,
                ),
                (num(5), num(6)),
            );
        }
        let find = |patch: &str, f: &Figure| {
            tables[&(
                patch.to_string(),
                f.machine.to_string(),
                f.cpus,
                f.optimize_scan,
            )]
        };
        for step in STEPS.iter().chain([&ONE_CONTAINER]) {
            for f in step.figures {
                let (base, patched) = match step.patches {
                    "15+17" => (find("15", &f).0, find("17", &f).1),
                    p => find(p, &f),
                };
                assert_eq!(
                    (f.base, f.patched),
                    (base, patched),
                    "{} {f:?}",
                    step.patches
                );
            }
        }
        let curve = std::fs::read_to_string(format!("{dir}ext4-scalability-before-series.csv"))
            .expect("stored curve");
        let stored: Vec<(u32, f64)> = curve
            .lines()
            .skip(1)
            .map(|l| {
                let (n, r) = l.split_once(',').expect("two fields");
                (n.parse().expect("count"), r.parse().expect("rate"))
            })
            .collect();
        assert_eq!(stored, BEFORE_CURVE);
        // The seeds' servers' one-container speed is the cover letter's P1 base column.
        use crate::vcpus::cost::{EPYC9654X2_OPS_1P, KUNPENG920_OPS_1P};
        for (machine, p1) in [(KUNPENG, KUNPENG920_OPS_1P), (AMD, EPYC9654X2_OPS_1P)] {
            for scan in [false, true] {
                let key = ("00".to_string(), machine.to_string(), 1, scan);
                assert_eq!(
                    tables[&key].0,
                    p1[usize::from(scan)],
                    "{machine} scan {scan}"
                );
            }
        }
    }

    /// The what-if's line costs are each server's published 6.18 rate (scan=0) under the
    /// journal's ceiling, 1 / (2 t) calls a second: 1e9 / (2 × 80 × 20,049) and
    /// 1e9 / (2 × 96 × 52,125).
    #[test]
    fn the_implied_line_cost_puts_the_ceiling_at_the_published_6_18_rate() {
        assert_eq!(implied_line_ns(KUNPENG), Some(312));
        assert_eq!(implied_line_ns(AMD), Some(100));
        assert_eq!(implied_line_ns("Xeon"), None);
        for (machine, cpus, rate) in [(KUNPENG, 80.0, 20049.0), (AMD, 96.0, 52125.0)] {
            let t = implied_line_ns(machine).unwrap() as f64;
            let ceiling = 1e9 / (2.0 * t) / cpus;
            assert!(
                (ceiling / rate - 1.0).abs() < 0.01,
                "{machine}: {ceiling} against {rate}"
            );
        }
    }

    /// The verdict rule: small published changes need a small change of ours, large ones
    /// the same sign within ×2; an unmodelled step is not judged.
    #[test]
    fn small_changes_are_judged_by_size_large_ones_by_ratio() {
        let f = |b: f64, p: f64| Figure {
            machine: "m",
            cpus: 80,
            optimize_scan: false,
            base: b,
            patched: p,
        };
        let v = |fig: Figure, ours: Option<(f64, f64)>| Checked::judge("x", fig, ours).verdict;
        assert_eq!(v(f(100.0, 102.0), Some((100.0, 108.0))), "pass");
        assert_eq!(v(f(100.0, 102.0), Some((100.0, 150.0))), "FAIL");
        assert_eq!(v(f(100.0, 200.0), Some((100.0, 160.0))), "pass");
        assert_eq!(v(f(100.0, 200.0), Some((100.0, 140.0))), "FAIL");
        assert_eq!(v(f(100.0, 200.0), Some((100.0, 60.0))), "FAIL");
        assert_eq!(v(f(100.0, 200.0), None), "--");
    }
}
