//! Seeds 000's and 001's 80- and 96-container figures on virtual CPUs. This machine runs 2
//! tasks, so those rows are "not measurable here" — unless the lab is built with the `vcpus`
//! feature: then the real allocator runs fallocate2 on 80 and 96 virtual CPUs in virtual time
//! (`mballoc_lab::vcpus`, docs/vcpus/), base against patched, and the rows are judged by
//! the same rule as the other published changes (same sign, within a factor of two). They are
//! labelled as the model's, never as measurements. Without the feature the rows say how to
//! get them.

use super::experiment::{JudgedRow, SeedReport};
use super::seeds::CONTAINERS;
use super::verdict::Expect;

/// How to get the simulated rows.
#[cfg_attr(feature = "vcpus", allow(dead_code))]
pub const HOW: &str = "cargo run --release --features vcpus -- reproduce";

/// The label every simulated row starts with.
pub const MODEL: &str = "vCPU model";

/// Whether `j` is a claim only many containers could show.
fn is_container_claim(j: &JudgedRow) -> bool {
    j.judged.rule == Expect::NotMeasurable(CONTAINERS).rule()
}

/// Runs the simulated rows, its points shared between the seeds.
pub struct Simulator {
    #[cfg(feature = "vcpus")]
    points: mballoc_lab::vcpus::seeds::Points,
    #[cfg(feature = "vcpus")]
    warmup_ns: u64,
    #[cfg(feature = "vcpus")]
    horizon_ns: u64,
    #[cfg(feature = "vcpus")]
    quick: bool,
}

/// Virtual time per CPU, warm-up and window: the seeds' own (10 ms each), 1 ms each with
/// `--quick` (fewer calls per point; a shorter warm-up leaves more of the start in the rates).
#[cfg(feature = "vcpus")]
fn window_ns(quick: bool) -> (u64, u64) {
    use mballoc_lab::vcpus::seeds::{WARMUP_NS, WINDOW_NS};
    if quick {
        (1_000_000, 1_000_000)
    } else {
        (WARMUP_NS, WINDOW_NS)
    }
}

impl Simulator {
    #[cfg_attr(not(feature = "vcpus"), allow(unused_variables))]
    pub fn new(quick: bool) -> Simulator {
        #[cfg(feature = "vcpus")]
        {
            use mballoc_lab::vcpus::seeds::{Points, MIN_WINDOW_CALLS};
            let (warmup_ns, horizon_ns) = window_ns(quick);
            // --quick keeps its short windows: seconds, not a verdict's sample.
            let min_calls = if quick { 0 } else { MIN_WINDOW_CALLS };
            Simulator {
                points: Points::new(warmup_ns, horizon_ns).with_min_calls(min_calls),
                warmup_ns,
                horizon_ns,
                quick,
            }
        }
        #[cfg(not(feature = "vcpus"))]
        Simulator {}
    }

    /// Without the simulator: one note on how to get the container rows.
    #[cfg(not(feature = "vcpus"))]
    pub fn attach(&mut self, rep: &mut SeedReport) {
        if rep.judged.iter().any(is_container_claim) {
            rep.notes.push(format!(
                "the 80- and 96-container rows can run on virtual CPUs ({MODEL}, simulated): \
                 {HOW} (docs/vcpus/cli.md)"
            ));
        }
    }

    /// With the simulator: the seed's published container figures, simulated and judged in
    /// place of its "not measurable here" claim.
    #[cfg(feature = "vcpus")]
    pub fn attach(&mut self, rep: &mut SeedReport) {
        if !rep.judged.iter().any(is_container_claim) {
            return;
        }
        let t0 = std::time::Instant::now();
        match self.simulated(&rep.seed) {
            Ok((rows, merging, prose)) => {
                model::add_rows(rep, &rows);
                model::add_merging(rep, &merging);
                model::add_prose(rep, &prose);
                use mballoc_lab::vcpus::seeds::{MAX_WINDOW_NS, MIN_WINDOW_CALLS};
                rep.ran.push(format!(
                    "{MODEL}: fallocate2 on virtual CPUs, {:.0} ms of virtual time per CPU \
                     counted after {:.0} ms of warm-up{}, each row on its server's costs \
                     (published one-container speed, Zen 4 line costs); simulated, not \
                     measured (docs/vcpus/cli.md) ({:.1} s)",
                    self.horizon_ns as f64 / 1e6,
                    self.warmup_ns as f64 / 1e6,
                    if self.quick {
                        String::new()
                    } else {
                        format!(
                            " (longer where that counts under {MIN_WINDOW_CALLS} calls a CPU, \
                             up to {:.0} ms)",
                            MAX_WINDOW_NS as f64 / 1e6
                        )
                    },
                    t0.elapsed().as_secs_f64()
                ));
                rep.notes.push(
                    "Held against a real 16-core kernel, the model follows its 1-to-2 CPU drop; \
                     over the kernel's whole run at 8 and 16 CPUs it keeps the kernel's share \
                     of one CPU's rate within 12 % on 64 GiB, where the kernel forces no \
                     commit, and 1.3-1.5 times it on 4 GiB, where the space truncates free \
                     runs out 1.3-2 times a second (the seeds' 960 GB never does) \
                     (docs/vcpus/kernel-16-core.md, \"The file system's size\")."
                        .into(),
                );
                rep.notes.push(
                    "The seeds' servers mount their SSDs with no linear groups (ext4_mb_init on \
                     a non-rotational device): with mb_optimize_scan=1 a CPU whose goal group \
                     is busy asks the order lists, which hand every such CPU the same head \
                     group. The series' free-path patch, +55-83 % there in the kernel, gains \
                     7-10 % in the model (docs/vcpus/seeds-000-001.md, \"The series, step by step\")."
                        .into(),
                );
            }
            Err(e) => rep.failed.push(format!("{MODEL}: {e}")),
        }
    }
}

/// A seed's simulated rows: its published container figures, what its patch does to files
/// where its words say (`seeds::MERGING_SEEDS`), and its prose figures, all on shared points.
#[cfg(feature = "vcpus")]
type Simulated = (
    Vec<mballoc_lab::vcpus::seeds::Row>,
    Vec<mballoc_lab::vcpus::seeds::Merging>,
    Vec<(mballoc_lab::vcpus::seeds::Prose, (f64, f64))>,
);

#[cfg(feature = "vcpus")]
impl Simulator {
    /// The simulated rows of `seed` ([`Simulated`]).
    fn simulated(&mut self, seed: &str) -> Result<Simulated, mballoc_lab::bench::BenchError> {
        use mballoc_lab::vcpus::seeds::{MERGING_SEEDS, PROSE, PUBLISHED};
        let published: Vec<_> = PUBLISHED
            .iter()
            .filter(|p| p.seed == seed)
            .copied()
            .collect();
        let mut rows = Vec::new();
        for &p in &published {
            rows.push(self.points.row(p, "")?);
        }
        let mut merging = Vec::new();
        if MERGING_SEEDS.contains(&seed) {
            for &p in &published {
                merging.push(self.points.merging(p)?);
            }
        }
        let mut prose = Vec::new();
        for &p in PROSE.iter().filter(|p| p.seed == seed) {
            prose.push((p, self.points.prose(p)?));
        }
        Ok((rows, merging, prose))
    }
}

/// The virtual CPU counts of seeds 000's and 001's curves, beside each row's own count.
#[cfg(feature = "vcpus")]
pub const CURVE_VCPUS: [u32; 5] = [1, 16, 32, 64, 128];

#[cfg(feature = "vcpus")]
impl Simulator {
    /// Seeds 000's and 001's curves: each published row's base and patched sides at
    /// `vcpus` (`reproduce --vcpus`; else [`CURVE_VCPUS`], and none with `--quick`) and its
    /// own count, on the rows' windows, printed as a note (not judged: the seeds publish one
    /// count) and drawn under `svg_dir` as `seed000-80-scan0.svg` (ops/s per vCPU against
    /// vCPUs, the published points beside).
    pub fn curves(
        &mut self,
        rep: &mut SeedReport,
        vcpus: Option<&[u32]>,
        svg_dir: Option<&std::path::Path>,
    ) {
        use mballoc_lab::vcpus::seeds::PUBLISHED;
        let rows: Vec<_> = PUBLISHED.iter().filter(|p| p.seed == rep.seed).collect();
        let Some(counts) = curve_counts(self.quick, vcpus, &CURVE_VCPUS) else {
            return;
        };
        if rows.is_empty() {
            return;
        }
        let t0 = std::time::Instant::now();
        let mut drawn = 0;
        for &&pb in &rows {
            let curve = match self.points.curve(pb, "", counts) {
                Ok(c) => c,
                Err(e) => {
                    rep.failed.push(format!("{MODEL} fallocate2 curve: {e}"));
                    continue;
                }
            };
            rep.notes
                .push(format!("{MODEL} curve, not judged:\n{}", curve.render()));
            if let Some(dir) = svg_dir {
                let name = curve.file_name();
                let plot = |path: &std::path::Path| curve.plot(path).map_err(|e| e.to_string());
                drawn += usize::from(draw(rep, dir, &name, "fallocate2 curve", plot));
            }
        }
        rep.ran.push(format!(
            "{MODEL}: the rows' curves at {} virtual CPUs and each row's own count{} ({:.1} s)",
            self::counts(counts),
            drawn_in(svg_dir, drawn),
            t0.elapsed().as_secs_f64()
        ));
    }
}

/// The counts a curve runs at: those `reproduce --vcpus` gave, else `default` except with
/// `--quick` (no curves).
#[cfg(feature = "vcpus")]
pub(super) fn curve_counts<'a>(
    quick: bool,
    given: Option<&'a [u32]>,
    default: &'a [u32],
) -> Option<&'a [u32]> {
    given.or((!quick).then_some(default))
}

/// Draws one curve into `dir` (made if missing) as `name` with `plot`; a failure goes to the
/// report's failures as `what SVG: error`, the run going on. Whether it was drawn.
#[cfg(feature = "vcpus")]
pub(super) fn draw(
    rep: &mut SeedReport,
    dir: &std::path::Path,
    name: &str,
    what: &str,
    plot: impl FnOnce(&std::path::Path) -> Result<(), String>,
) -> bool {
    let drew = std::fs::create_dir_all(dir)
        .map_err(|e| e.to_string())
        .and_then(|()| plot(&dir.join(name)));
    match drew {
        Ok(()) => true,
        Err(e) => {
            rep.failed.push(format!("{MODEL} {what} SVG: {e}"));
            false
        }
    }
}

/// `1, 16, 32`: the counts a curve ran at, for its `ran:` line.
#[cfg(feature = "vcpus")]
pub(super) fn counts(n: &[u32]) -> String {
    n.iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `, 4 drawn in DIR` when curves were drawn into `svg_dir`, else nothing.
#[cfg(feature = "vcpus")]
pub(super) fn drawn_in(svg_dir: Option<&std::path::Path>, drawn: usize) -> String {
    match svg_dir {
        Some(d) => format!(", {drawn} drawn in {}", d.display()),
        None => String::new(),
    }
}

#[cfg(feature = "vcpus")]
mod model {
    use mballoc_lab::vcpus::seeds::{Merging, Prose, Row};

    use super::super::experiment::{JudgedRow, SeedReport};
    use super::super::verdict::Expect;
    use super::{is_container_claim, MODEL};

    /// Same sign and within a factor of two of the published change: the bar every other
    /// published change is judged by (seed 004's `Near`).
    const FACTOR: f64 = 2.0;

    /// `fallocate2 vCPU model N=80 scan=0: ops_per_sec_per_cpu`.
    fn label(r: &Row) -> String {
        format!(
            "fallocate2 {MODEL} N={} scan={}: ops_per_sec_per_cpu",
            r.published.cpus,
            u8::from(r.published.optimize_scan)
        )
    }

    /// Replaces the seed's container claims by `rows`, each in the table and judged (the
    /// model is deterministic: no spread), and judges the seed again.
    pub fn add_rows(rep: &mut SeedReport, rows: &[Row]) {
        let basis = rep
            .judged
            .iter()
            .find(|j| is_container_claim(j))
            .map(|j| j.basis.clone())
            .unwrap_or_default();
        rep.judged.retain(|j| !is_container_claim(j));
        for r in rows {
            let p = r.published;
            let label = label(r);
            let note = format!(
                "{:+.1}% (P{} {} -> {}, {}, mb_optimize_scan={})",
                p.change_pct(),
                p.cpus,
                p.base,
                p.patched,
                p.machine,
                u8::from(p.optimize_scan)
            );
            let basis = format!("{basis} (simulated: {MODEL})");
            let sides = (r.base, r.patched);
            push(rep, label, &note, sides, near(p.change_pct()), basis);
        }
        rep.rejudge();
    }

    /// Same sign and within [`FACTOR`] of a published change, no noise band (the model is
    /// deterministic).
    fn near(published: f64) -> Expect {
        Expect::Near {
            published,
            factor: FACTOR,
            noise: 0.0,
        }
    }

    /// One simulated row: in the seed's table with `note` beside it, and judged by `expect`.
    fn push(
        rep: &mut SeedReport,
        label: String,
        note: &str,
        (base, improved): (f64, f64),
        expect: Expect,
        basis: String,
    ) {
        rep.table.row_note(&label, base, improved, note);
        rep.judged.push(JudgedRow {
            label,
            base,
            improved,
            headline: false,
            basis,
            judged: expect.judge(base, improved, 0.0),
        });
    }

    /// The seed's words on files, which [`Merging`] turns into a direction.
    pub const MERGING_CLAIM: &str = "one global goal \"drastically lowers the chances of \
                                     extents merging and leads to much worse file \
                                     fragmentation\" when many processes allocate (no figure)";

    /// Seed 000's claim on files at each published CPU count: fewer new extents a call with
    /// the patch, judged as a direction (deterministic: no noise band).
    pub fn add_merging(rep: &mut SeedReport, rows: &[Merging]) {
        for m in rows {
            let p = m.published;
            let label = format!(
                "fallocate2 {MODEL} N={} scan={}: new_extents_per_call",
                p.cpus,
                u8::from(p.optimize_scan)
            );
            let note = format!("fewer ({}, {} CPUs; no figure)", p.machine, p.cpus);
            let basis = format!("{MERGING_CLAIM} (simulated: {MODEL})");
            let lower = Expect::Lower { noise: 0.0 };
            push(rep, label, &note, (m.base, m.patched), lower, basis);
        }
        rep.rejudge();
    }

    /// A seed's prose figure: its base side's total on `from` and on `to` CPUs, judged as
    /// the tables are (same sign, within a factor of two of the change the words give).
    pub fn add_prose(rep: &mut SeedReport, rows: &[(Prose, (f64, f64))]) {
        for &(p, (from, to)) in rows {
            let label = format!(
                "fallocate2 {MODEL} base N={}->{} scan={}: ops_per_sec (all CPUs)",
                p.from,
                p.to,
                u8::from(p.optimize_scan)
            );
            let note = format!(
                "{:+.1}% ({} -> {} in all, {} -> {} containers, before the patch; an example \
                 in prose)",
                p.change_pct(),
                p.from_total,
                p.to_total,
                p.from,
                p.to
            );
            let basis = format!("{} (simulated: {MODEL}, {} costs)", p.words, p.machine);
            push(rep, label, &note, (from, to), near(p.change_pct()), basis);
        }
        rep.rejudge();
    }
}

#[cfg(test)]
mod tests {

    use super::super::experiment::{JudgedRow, SeedReport};
    use super::super::verdict::{Expect, Status};
    use super::*;

    /// `reproduce --vcpus` draws the curves at its counts, with or without `--quick`;
    /// without it, the default counts, and none with `--quick`.
    #[cfg(feature = "vcpus")]
    #[test]
    fn curves_run_at_the_given_counts_or_the_default_ones() {
        let given: &[u32] = &[1, 4];
        assert_eq!(curve_counts(true, Some(given), &CURVE_VCPUS), Some(given));
        assert_eq!(curve_counts(false, Some(given), &CURVE_VCPUS), Some(given));
        assert_eq!(
            curve_counts(false, None, &CURVE_VCPUS),
            Some(&CURVE_VCPUS[..])
        );
        assert_eq!(curve_counts(true, None, &CURVE_VCPUS), None);
    }

    /// `f` of each of `seed`'s published container figures.
    #[cfg(feature = "vcpus")]
    fn of_seed<T>(seed: &str, f: impl Fn(mballoc_lab::vcpus::seeds::Published) -> T) -> Vec<T> {
        use mballoc_lab::vcpus::seeds::PUBLISHED;
        PUBLISHED
            .iter()
            .filter(|p| p.seed == seed)
            .map(|&p| f(p))
            .collect()
    }

    /// A seed's report with its container claim as `reproduce` leaves it.
    fn report(seed: &str) -> SeedReport {
        let expect = Expect::NotMeasurable(CONTAINERS);
        SeedReport {
            judged: vec![JudgedRow {
                label: "fallocate2 T=2: ops_per_sec_per_task".into(),
                base: 1.0,
                improved: 2.0,
                headline: false,
                basis: "+80.7% .. +345% for 80 and 96 containers".into(),
                judged: expect.judge(1.0, 2.0, 0.0),
            }],
            ..SeedReport::empty(seed)
        }
    }

    /// Without the simulator the container rows stay uncounted and say how to get them.
    #[cfg(not(feature = "vcpus"))]
    #[test]
    fn without_the_simulator_container_rows_say_how() {
        let mut rep = report("001");
        Simulator::new(true).attach(&mut rep);
        assert_eq!(rep.judged.len(), 1);
        assert_eq!(rep.judged[0].judged.status, Status::NotCounted);
        let shown = rep.render();
        assert!(shown.contains(HOW), "{shown}");
        assert!(shown.contains("verdict: not measurable here"), "{shown}");
    }

    /// With the simulator the container claim becomes judged rows, labelled as the model's,
    /// the verdict following them: a change of the published sign within a factor of two
    /// passes, the opposite sign fails. The rates are given, not simulated (fast).
    #[cfg(feature = "vcpus")]
    #[test]
    fn simulated_container_rows_are_judged() {
        use mballoc_lab::vcpus::seeds::Row;
        let judged = |factor: f64| {
            let rows = of_seed("001", |p| {
                let patched = 1000.0 * (1.0 + factor * p.change_pct() / 100.0);
                Row::judge(p, "", 1000.0, patched)
            });
            let mut rep = report("001");
            model::add_rows(&mut rep, &rows);
            rep
        };
        let rep = judged(1.0);
        assert_eq!(rep.judged.len(), 4, "{}", rep.render());
        assert!(rep.judged.iter().all(|j| j.label.contains(MODEL)));
        assert!(rep.judged.iter().all(|j| j.judged.status == Status::Pass));
        assert_eq!(
            rep.verdict,
            super::super::verdict::Verdict::Reproduced,
            "{}",
            rep.render()
        );
        assert!(rep.render().contains(MODEL));
        let rep = judged(-1.0);
        assert!(rep.judged.iter().all(|j| j.judged.status == Status::Fail));
        assert_eq!(
            rep.verdict,
            super::super::verdict::Verdict::NotReproduced,
            "{}",
            rep.render()
        );
    }

    /// Seed 000's claim on files is judged by direction at each published count: fewer new
    /// extents a call with the patch passes, as many or more fails, and the seed's verdict
    /// follows. The figures are given, not simulated (fast).
    #[cfg(feature = "vcpus")]
    #[test]
    fn the_claim_on_files_is_judged_by_direction() {
        use mballoc_lab::vcpus::seeds::Merging;
        let judged = |patched: f64| {
            let rows = of_seed("000", |published| Merging {
                published,
                base: 0.9,
                patched,
            });
            let mut rep = report("000");
            model::add_merging(&mut rep, &rows);
            rep
        };
        let rep = judged(0.4);
        let files: Vec<_> = rep
            .judged
            .iter()
            .filter(|j| j.label.ends_with("new_extents_per_call"))
            .collect();
        assert_eq!(files.len(), 4, "{}", rep.render());
        assert!(files.iter().all(|j| j.judged.status == Status::Pass));
        assert!(files.iter().all(|j| j.basis.contains("extents merging")));
        for patched in [0.9, 1.0] {
            let rep = judged(patched);
            assert!(rep
                .judged
                .iter()
                .filter(|j| j.label.ends_with("new_extents_per_call"))
                .all(|j| j.judged.status == Status::Fail));
            assert_ne!(
                rep.verdict,
                super::super::verdict::Verdict::Reproduced,
                "{}",
                rep.render()
            );
        }
    }

    /// A prose figure is judged as the tables are: our base side's total from one count to
    /// the other against the change the words give, the row named as the model's.
    #[cfg(feature = "vcpus")]
    #[test]
    fn a_prose_figure_is_judged_like_a_table() {
        use mballoc_lab::vcpus::seeds::PROSE;
        let p = PROSE[0];
        assert_eq!((p.seed, p.from, p.to), ("001", 1, 2));
        assert!((p.change_pct() + 50.0).abs() < 1e-9);
        let judged = |to: f64| {
            let mut rep = report("001");
            model::add_prose(&mut rep, &[(p, (300_000.0, to))]);
            let row = rep.judged.last().unwrap().clone();
            assert!(row.label.contains(MODEL) && row.label.contains("N=1->2"));
            assert!(row.basis.contains("300,000"), "{}", row.basis);
            row.judged.status
        };
        assert_eq!(judged(150_000.0), Status::Pass);
        assert_eq!(judged(200_000.0), Status::Pass);
        // -22 %: under half the published fall.
        assert_eq!(judged(234_000.0), Status::Fail);
        assert_eq!(judged(330_000.0), Status::Fail);
    }

    /// The simulator itself, 4 virtual CPUs for 0.2 ms after 0.1 ms: the row gets a counted
    /// status.
    #[cfg(feature = "vcpus")]
    #[test]
    fn a_small_simulation_is_judged() {
        use mballoc_lab::vcpus::seeds::{Points, Published, PUBLISHED};
        let mut points = Points::new(100_000, 200_000);
        let rows: Vec<_> = PUBLISHED
            .iter()
            .filter(|p| p.seed == "000")
            .take(1)
            .map(|&p| points.row(Published { cpus: 4, ..p }, "").unwrap())
            .collect();
        let mut rep = report("000");
        model::add_rows(&mut rep, &rows);
        assert_eq!(rep.judged.len(), 1);
        assert_ne!(rep.judged[0].judged.status, Status::NotCounted);
    }
}
