//! Seeds 000 and 001 at their own scale: fallocate2 per-CPU rates at 80 and 96 virtual CPUs,
//! base against patched, beside the published figures, judged by sign, by a factor of two
//! (the bar) and by ±25 % (the goal). The published figures are the test, never an input.

use std::collections::BTreeMap;
use std::path::Path;

use mballoc::Policy;
use serde::Serialize;

use super::cost::Machine;
use super::{run_point, VcpuConfig};
use crate::bench::BenchError;
use crate::report::plot::{plot_throughput, Series};

/// One published figure: per-container fallocate ops/s, base and patched.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Published {
    pub seed: &'static str,
    pub machine: &'static str,
    pub optimize_scan: bool,
    pub cpus: u32,
    pub base: f64,
    pub patched: f64,
}

impl Published {
    pub fn change_pct(&self) -> f64 {
        100.0 * (self.patched / self.base - 1.0)
    }
}

const fn p(
    seed: &'static str,
    machine: &'static str,
    optimize_scan: bool,
    cpus: u32,
    base: f64,
    patched: f64,
) -> Published {
    Published {
        seed,
        machine,
        optimize_scan,
        cpus,
        base,
        patched,
    }
}

/// Seed 000's and 001's tables ("Average fallocate operations per container per second").
pub const PUBLISHED: [Published; 8] = [
    p("000", "Kunpeng 920", false, 80, 9636.0, 19628.0),
    p("000", "Kunpeng 920", true, 80, 4834.0, 7129.0),
    p("000", "AMD 9654 x2", false, 96, 22341.0, 53760.0),
    p("000", "AMD 9654 x2", true, 96, 9177.0, 12716.0),
    p("001", "Kunpeng 920", false, 80, 2667.0, 4821.0),
    p("001", "Kunpeng 920", true, 80, 2643.0, 4784.0),
    p("001", "AMD 9654 x2", false, 96, 3450.0, 15371.0),
    p("001", "AMD 9654 x2", true, 96, 3209.0, 6101.0),
];

/// A figure a seed gives in its prose rather than its tables: the kernel before the patch on
/// `from` and on `to` containers, total fallocate calls per second.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Prose {
    pub seed: &'static str,
    /// Whose costs, as [`Published::machine`].
    pub machine: &'static str,
    pub optimize_scan: bool,
    pub from: u32,
    pub to: u32,
    pub from_total: f64,
    pub to_total: f64,
    /// The seed's words.
    pub words: &'static str,
}

impl Prose {
    pub fn change_pct(&self) -> f64 {
        100.0 * (self.to_total / self.from_total - 1.0)
    }
}

/// Seed 001's example of what it fixes ("one container might do 300,000 IOPS, but if you
/// run two at the same time, the total is only 150,000"). It names no machine or setting:
/// the rate is the Kunpeng 920's one-container one (seed 000's 337,597-341,440), and the
/// words before it ("they all try to use the same block group in the same list") are
/// `mb_optimize_scan=1`'s.
pub const PROSE: [Prose; 1] = [Prose {
    seed: "001",
    machine: "Kunpeng 920",
    optimize_scan: true,
    from: 1,
    to: 2,
    from_total: 300_000.0,
    to_total: 150_000.0,
    words: "\"Even just two processes doing this can cut the IOPS in half. For example, one \
            container might do 300,000 IOPS, but if you run two at the same time, the total \
            is only 150,000.\"",
}];

/// A seed's comparison: the kernel just before its patch against the kernel with it, both
/// written as linux-6.18 plus settings, so that the two sides differ in the patch's switch
/// alone.
///
/// The order is the kernel's: both seeds are patches of one series ("ext4: better
/// scalability for ext4 block allocation", merged for 6.17), in which `ext4: add
/// ext4_try_lock_group() to skip busy groups` (seed 001) is the first patch and `ext4:
/// utilize multiple global goals to reduce contention` (seed 000) the fifth. So seed 001's
/// base and patched kernels both had the single stream goal `s_mb_last_group`
/// (`nr_global_goals=1` on both sides), and seed 000's base already skipped busy groups
/// (linux-6.18's `try_lock_groups=1`). Before the fourth patch (`ext4: remove unnecessary
/// s_md_lock on update s_mb_last_group`) the goal was read and written under the global
/// `s_md_lock`: `goal_md_lock=1` on both of seed 001's sides, off on both of seed 000's.
/// Both seeds come before the series' `ext4: convert free groups order lists to xarrays`:
/// with `mb_optimize_scan=1` their kernels chose groups from the per-order lists
/// (`order_lists=1` on every side; seed 000's own diff still frees
/// `s_mb_avg_fragment_size_locks`), and before its `ext4: merge freed extent with existing
/// extents before insertion`: a freed extent took `s_md_lock` once, plus once per merged
/// neighbour (`free_insert_then_merge=1` on every side).
#[derive(Debug, Clone, Copy)]
pub struct SeedPair {
    /// Settings both sides carry on top of linux-6.18.
    pub both: &'static [&'static str],
    /// The patch's switch turned off: what the base side adds.
    pub off: &'static str,
    /// The kernel before the patch as the library's older preset and settings, an
    /// independent spelling of the base that the switch-off checks compare against.
    pub before: (Policy, &'static [&'static str]),
}

/// The pair of seed `seed` ("000" or "001").
pub fn pair(seed: &str) -> SeedPair {
    match seed {
        "000" => SeedPair {
            both: &["order_lists=1", "free_insert_then_merge=1"],
            off: "nr_global_goals=1",
            before: (Policy::Linux616, &["try_lock_groups=1", "goal_md_lock=0"]),
        },
        _ => SeedPair {
            both: &[
                "nr_global_goals=1",
                "goal_md_lock=1",
                "order_lists=1",
                "free_insert_then_merge=1",
            ],
            off: "try_lock_groups=0",
            before: (Policy::Linux616, &[]),
        },
    }
}

impl SeedPair {
    /// The settings of one side: `both`, then the switch's off value on the base side.
    pub fn settings(&self, base: bool) -> Vec<String> {
        let mut v: Vec<String> = self.both.iter().map(|s| s.to_string()).collect();
        if base {
            v.push(self.off.to_string());
        }
        v
    }

    /// How a side is labelled on a plot.
    fn label(&self, base: bool) -> String {
        let v = self.settings(base);
        if v.is_empty() {
            "linux-6.18".into()
        } else {
            format!("linux-6.18 {}", v.join(" "))
        }
    }
}

/// One published figure and ours.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub published: Published,
    /// Extra settings on both sides.
    pub variant: String,
    pub base: f64,
    pub patched: f64,
    pub change_pct: f64,
    /// Same sign, within a factor of 2, within ±25 % of the published change.
    pub same_sign: bool,
    pub within_2x: bool,
    pub within_25pct: bool,
}

/// The seeds' points' window: will-it-scale counts after its warm-up, and the seeds' tables
/// are long runs' averages, so each CPU runs [`WARMUP_NS`] before it counts and then counts
/// [`WINDOW_NS`]. A window from the start measures how the CPUs leave their first groups: the
/// 5 ms from a fresh start that these rows used before gave seed 000's patched side 60,242
/// calls/s per CPU on the Kunpeng's costs, the window after 10 ms 77,444
/// (docs/vcpus/seeds-000-001.md, "Warm-up").
pub const WARMUP_NS: u64 = 10_000_000;
pub const WINDOW_NS: u64 = 10_000_000;

/// The fewest calls a point's window counts per CPU, the window lengthened to hold them (up
/// to [`MAX_WINDOW_NS`]): a rate is a sample, and a few dozen calls a CPU are too few. At
/// seed 000's rates a 10 ms window holds 230-780 calls a CPU and its rows move under 10 %
/// from one window to the next; seed 001's base (one goal, waiting group locks) holds 24-44
/// and read 3,244 / 4,629 / 5,553 / 4,124 / 3,440 per CPU after 10 / 20 / 30 / 60 / 100 ms on
/// the Kunpeng's costs, where a 70 ms window read 4,510 and 4,717 after 10 and 30 ms
/// (docs/vcpus/seeds-000-001.md, "Window").
pub const MIN_WINDOW_CALLS: u64 = 250;
pub const MAX_WINDOW_NS: u64 = 100_000_000;

/// A configuration: machine, variant, `mb_optimize_scan`, one side's settings.
type PointKey = (Machine, String, bool, Vec<String>);

/// Per-CPU rates of fallocate2 points, each configuration run once.
pub struct Points {
    /// Virtual time each CPU runs before it counts, and then counts, ns.
    warmup_ns: u64,
    horizon_ns: u64,
    /// The fewest calls a window counts per CPU (0: the window as given).
    min_calls: u64,
    /// (machine, variant, scan, side's settings) -> cpus -> what its point measured.
    done: BTreeMap<PointKey, BTreeMap<u32, Sample>>,
}

/// What [`Points`] keeps of a point.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Calls per second per CPU.
    per_cpu: f64,
    /// Counted calls whose extent did not start at the goal block, the end of the file's
    /// last extent, per call: the extents a call adds to its file instead of growing one.
    new_extents: f64,
}

impl Points {
    /// Points that count `horizon_ns` of virtual time per CPU after `warmup_ns`.
    pub fn new(warmup_ns: u64, horizon_ns: u64) -> Points {
        Points {
            warmup_ns,
            horizon_ns,
            min_calls: 0,
            done: BTreeMap::new(),
        }
    }

    /// The same, a window that counts fewer than `calls` calls per CPU run again, as long as
    /// it needs to count them ([`MIN_WINDOW_CALLS`]; at most [`MAX_WINDOW_NS`]).
    pub fn with_min_calls(self, calls: u64) -> Points {
        Points {
            min_calls: calls,
            ..self
        }
    }

    /// The window that holds `self.min_calls` calls a CPU, from a run of `horizon_ns` that
    /// counted `calls` on `n` CPUs; `None` if that one held enough.
    fn longer_window(&self, horizon_ns: u64, calls: u64, n: u32) -> Option<u64> {
        let per_cpu = calls / u64::from(n.max(1));
        if per_cpu >= self.min_calls || horizon_ns >= MAX_WINDOW_NS {
            return None;
        }
        let need = horizon_ns.saturating_mul(self.min_calls) / per_cpu.max(1);
        let ms = 1_000_000;
        Some((need.div_ceil(ms) * ms).min(MAX_WINDOW_NS))
    }

    /// Per-CPU ops/s of linux-6.18 with `mb_optimize_scan`, the variant's settings and
    /// `side` (one side of a seed's pair, or a rung of the series) on `n` virtual CPUs of
    /// `machine`.
    pub(crate) fn rate(
        &mut self,
        machine: Machine,
        variant: &str,
        scan: bool,
        side: Vec<String>,
        n: u32,
    ) -> Result<f64, BenchError> {
        Ok(self.sample(machine, variant, scan, side, n)?.per_cpu)
    }

    /// The point of [`Points::rate`], run once a configuration.
    fn sample(
        &mut self,
        machine: Machine,
        variant: &str,
        scan: bool,
        side: Vec<String>,
        n: u32,
    ) -> Result<Sample, BenchError> {
        let mut settings = vec![format!("mb_optimize_scan={}", u8::from(scan))];
        settings.extend(variant.split_whitespace().map(String::from));
        settings.extend(side.iter().cloned());
        let key = (machine, variant.to_string(), scan, side);
        if let Some(&r) = self.done.get(&key).and_then(|m| m.get(&n)) {
            return Ok(r);
        }
        let mut cfg = VcpuConfig::fallocate2(Policy::Linux618, &settings, machine);
        cfg.horizon_ns = self.horizon_ns;
        cfg.warmup_ns = self.warmup_ns;
        let mut point = run_point(&cfg, n)?;
        if let Some(longer) = self.longer_window(cfg.horizon_ns, point.calls, n) {
            cfg.horizon_ns = longer;
            point = run_point(&cfg, n)?;
        }
        assert!(
            (0.0..=1.0).contains(&point.per_call.goal_hits),
            "a call hits its goal at most once"
        );
        let r = Sample {
            per_cpu: point.ops_per_s_per_cpu,
            new_extents: 1.0 - point.per_call.goal_hits,
        };
        self.done.entry(key).or_default().insert(n, r);
        Ok(r)
    }

    /// One published figure and ours, base against patched at its CPU count.
    pub fn row(&mut self, pb: Published, variant: &str) -> Result<Row, BenchError> {
        let pair = pair(pb.seed);
        let m = Machine::of_row(pb.machine);
        let base = self.rate(m, variant, pb.optimize_scan, pair.settings(true), pb.cpus)?;
        let patched = self.rate(m, variant, pb.optimize_scan, pair.settings(false), pb.cpus)?;
        Ok(Row::judge(pb, variant, base, patched))
    }

    /// What seed `pb.seed`'s pair does to its files at `pb`'s CPU count: the new extents a
    /// call makes, base and patched (the points of [`Points::row`], not run again).
    pub fn merging(&mut self, pb: Published) -> Result<Merging, BenchError> {
        let pair = pair(pb.seed);
        let m = Machine::of_row(pb.machine);
        let scan = pb.optimize_scan;
        let base = self.sample(m, "", scan, pair.settings(true), pb.cpus)?;
        let patched = self.sample(m, "", scan, pair.settings(false), pb.cpus)?;
        Ok(Merging {
            published: pb,
            base: base.new_extents,
            patched: patched.new_extents,
        })
    }

    /// Our totals for a prose figure: the seed's base side on `p.from` and on `p.to` CPUs,
    /// calls per second of all CPUs together.
    pub fn prose(&mut self, p: Prose) -> Result<(f64, f64), BenchError> {
        let base = pair(p.seed).settings(true);
        let m = Machine::of_row(p.machine);
        let scan = p.optimize_scan;
        let from = self.rate(m, "", scan, base.clone(), p.from)? * f64::from(p.from);
        let to = self.rate(m, "", scan, base, p.to)? * f64::from(p.to);
        Ok((from, to))
    }
}

/// The seeds whose words say what their patch does to files ([`Merging`]).
pub const MERGING_SEEDS: [&str; 1] = ["000"];

/// Seed 000's account of why one stream goal hurts files as well as speed: "when multiple
/// processes allocate blocks, having just one global goal means they all fight over the same
/// group. This drastically lowers the chances of extents merging and leads to much worse
/// file fragmentation." It publishes no figure for it, so the claim is a direction: fewer
/// new extents a call with the patch. A fallocate2 call whose extent starts at its goal
/// (the block after the file's last) merges into that extent (`ext4_ext_try_to_merge`);
/// any other call starts a new one.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Merging {
    pub published: Published,
    /// New extents per call, base and patched.
    pub base: f64,
    pub patched: f64,
}

impl Row {
    /// Our base and patched rates against the published change.
    pub fn judge(published: Published, variant: &str, base: f64, patched: f64) -> Row {
        let change_pct = 100.0 * (patched / base - 1.0);
        let ratio = change_pct / published.change_pct();
        Row {
            published,
            variant: variant.to_string(),
            base,
            patched,
            change_pct,
            same_sign: ratio > 0.0,
            within_2x: (0.5..=2.0).contains(&ratio),
            within_25pct: (0.75..=1.25).contains(&ratio),
        }
    }
}

/// One published figure's curve: per-CPU rates of its base and patched sides at each CPU
/// count, ascending, its own count among them.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    pub published: Published,
    pub variant: String,
    pub base: Vec<(u32, f64)>,
    pub patched: Vec<(u32, f64)>,
}

impl Points {
    /// `pb`'s base and patched sides under `variant` at `cpus` and at `pb.cpus`.
    pub fn curve(
        &mut self,
        pb: Published,
        variant: &str,
        cpus: &[u32],
    ) -> Result<Curve, BenchError> {
        let pair = pair(pb.seed);
        let m = Machine::of_row(pb.machine);
        let mut ns: Vec<u32> = cpus.to_vec();
        ns.push(pb.cpus);
        ns.sort_unstable();
        ns.dedup();
        let mut c = Curve {
            published: pb,
            variant: variant.to_string(),
            base: Vec::new(),
            patched: Vec::new(),
        };
        for n in ns {
            let scan = pb.optimize_scan;
            c.base
                .push((n, self.rate(m, variant, scan, pair.settings(true), n)?));
            c.patched
                .push((n, self.rate(m, variant, scan, pair.settings(false), n)?));
        }
        Ok(c)
    }
}

impl Curve {
    /// The file a curve is drawn into: `seed000-80-scan0.svg` (`-variant` after a variant's).
    pub fn file_name(&self) -> String {
        let pb = self.published;
        format!(
            "seed{}-{}-scan{}{}.svg",
            pb.seed,
            pb.cpus,
            u8::from(pb.optimize_scan),
            if self.variant.is_empty() {
                ""
            } else {
                "-variant"
            }
        )
    }

    /// Ops/s per virtual CPU against virtual CPUs, base and patched, the published points
    /// beside them.
    pub fn plot(&self, path: &Path) -> Result<(), BenchError> {
        let pb = self.published;
        let pair = pair(pb.seed);
        let xy = |v: &[(u32, f64)]| v.iter().map(|&(n, r)| (f64::from(n), r)).collect();
        let series = [
            Series {
                label: format!("base ({})", pair.label(true)),
                points: xy(&self.base),
            },
            Series {
                label: format!("patched ({})", pair.label(false)),
                points: xy(&self.patched),
            },
            Series {
                label: format!("published base, {}", pb.machine),
                points: vec![(f64::from(pb.cpus), pb.base)],
            },
            Series {
                label: format!("published patched, {}", pb.machine),
                points: vec![(f64::from(pb.cpus), pb.patched)],
            },
        ];
        let title = format!(
            "seed {} fallocate2, mb_optimize_scan={} {}: ops/s per vCPU",
            pb.seed,
            u8::from(pb.optimize_scan),
            self.variant
        );
        plot_throughput(&title, &series, path).map_err(|e| BenchError::Peer(e.to_string()))
    }

    /// The curve as a table: per-CPU rates and the change at each count, the published
    /// figure on its own count's line.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let pb = self.published;
        let mut t = format!(
            "seed {} fallocate2 on {}, mb_optimize_scan={}{}: ops/s per vCPU\n{:>5} {:>9} {:>9} {:>8}\n",
            pb.seed,
            pb.machine,
            u8::from(pb.optimize_scan),
            if self.variant.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.variant)
            },
            "vcpus",
            "base",
            "patched",
            "change"
        );
        for (&(n, b), &(_, p)) in self.base.iter().zip(&self.patched) {
            let _ = write!(
                t,
                "{n:>5} {b:>9.0} {p:>9.0} {:>+7.1}%",
                100.0 * (p / b - 1.0)
            );
            if n == pb.cpus {
                let _ = write!(
                    t,
                    "   published {:.0} -> {:.0}, {:+.1}%",
                    pb.base,
                    pb.patched,
                    pb.change_pct()
                );
            }
            t.push('\n');
        }
        t
    }
}

/// Runs every published configuration under each `variant` (settings on both sides; `""`
/// for linux-6.18 as it is), at `cpus` virtual CPUs for the curves (the published counts are
/// always run), drawing a curve per seed, `mb_optimize_scan` and variant into `svg_dir`.
pub fn run(
    variants: &[&str],
    cpus: &[u32],
    svg_dir: Option<&Path>,
) -> Result<Vec<Row>, BenchError> {
    let mut rows = Vec::new();
    let mut points = Points::new(WARMUP_NS, WINDOW_NS).with_min_calls(MIN_WINDOW_CALLS);
    for &variant in variants {
        for pb in PUBLISHED {
            let curve = points.curve(pb, variant, cpus)?;
            rows.push(points.row(pb, variant)?);
            if let Some(dir) = svg_dir {
                curve.plot(&dir.join(curve.file_name()))?;
            }
        }
    }
    Ok(rows)
}

/// The rows as a table.
pub fn render(rows: &[Row]) -> String {
    use std::fmt::Write;
    let mut t = format!(
        "{:<4} {:<12} {:>4} {:>5} {:>9} {:>9} {:>8} {:>9} {:>5} {:>4} {:>5}  {}\n",
        "seed",
        "machine",
        "scan",
        "vcpus",
        "base",
        "patched",
        "change",
        "published",
        "sign",
        "x2",
        "±25%",
        "variant"
    );
    let yn = |b: bool| if b { "yes" } else { "no" };
    for r in rows {
        let _ = writeln!(
            t,
            "{:<4} {:<12} {:>4} {:>5} {:>9.0} {:>9.0} {:>+7.1}% {:>+8.1}% {:>5} {:>4} {:>5}  {}",
            r.published.seed,
            r.published.machine,
            u8::from(r.published.optimize_scan),
            r.published.cpus,
            r.base,
            r.patched,
            r.change_pct,
            r.published.change_pct(),
            yn(r.same_sign),
            yn(r.within_2x),
            yn(r.within_25pct),
            if r.variant.is_empty() {
                "linux-6.18"
            } else {
                &r.variant
            }
        );
    }
    t
}

#[cfg(test)]
mod tests {
    //! The switch-off checks: each seed's patched side with its switch turned off is its base,
    //! byte for byte, and the same as the kernel before the patch spelt independently (the
    //! older preset); with the switch on the run differs.

    use super::*;

    /// A window that counts too few calls a CPU is lengthened to hold the minimum, in whole
    /// milliseconds, never past the cap; one that holds enough, or a rule of 0, is kept.
    #[test]
    fn a_window_too_short_to_count_enough_calls_is_lengthened() {
        let p = Points::new(WARMUP_NS, WINDOW_NS).with_min_calls(MIN_WINDOW_CALLS);
        // Seed 001's base: 30 calls a CPU in 10 ms -> 250 need 83.3 ms.
        assert_eq!(p.longer_window(10_000_000, 30 * 80, 80), Some(84_000_000));
        assert_eq!(p.longer_window(10_000_000, 250 * 80, 80), None);
        assert_eq!(p.longer_window(10_000_000, 80, 80), Some(MAX_WINDOW_NS));
        assert_eq!(p.longer_window(10_000_000, 0, 80), Some(MAX_WINDOW_NS));
        assert_eq!(p.longer_window(MAX_WINDOW_NS, 80, 80), None);
        let fixed = Points::new(WARMUP_NS, WINDOW_NS);
        assert_eq!(fixed.longer_window(10_000_000, 80, 80), None);
    }

    /// Seed 000's claim on files reads the rows' own points: nothing runs again, and a call
    /// makes one new extent at most.
    #[test]
    fn merging_reads_the_rows_points() {
        let mut p = Points::new(100_000, 100_000);
        let pb = Published {
            cpus: 8,
            ..PUBLISHED[0]
        };
        p.row(pb, "").unwrap();
        let points = |p: &Points| p.done.values().map(BTreeMap::len).sum::<usize>();
        let before = points(&p);
        let m = p.merging(pb).unwrap();
        assert_eq!(points(&p), before);
        assert!([m.base, m.patched].iter().all(|x| (0.0..=1.0).contains(x)));
    }

    /// A curve holds each asked count and the published one, once and in order; its table
    /// puts the published figure on that count's line, and its SVG is drawn.
    #[test]
    fn a_curve_runs_each_count_and_the_published_one() {
        let mut p = Points::new(100_000, 100_000);
        let pb = PUBLISHED[0];
        let c = p.curve(pb, "", &[2, 1, pb.cpus]).unwrap();
        let counts = |v: &[(u32, f64)]| v.iter().map(|&(n, _)| n).collect::<Vec<_>>();
        assert_eq!(counts(&c.base), vec![1, 2, pb.cpus]);
        assert_eq!(counts(&c.patched), counts(&c.base));
        assert!(c.base.iter().chain(&c.patched).all(|&(_, r)| r > 0.0));
        // The points are the rows' own: a row after the curve runs nothing new.
        let row = p.row(pb, "").unwrap();
        assert_eq!((row.base, row.patched), (c.base[2].1, c.patched[2].1));
        let text = c.render();
        let line = text.lines().find(|l| l.contains("published")).unwrap();
        assert!(
            line.trim_start().starts_with(&pb.cpus.to_string()),
            "{text}"
        );
        let dir = std::env::temp_dir().join(format!("mballoc-seed-curve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(c.file_name());
        c.plot(&path).unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// One point's JSON (everything but the host time): 8 CPUs, 300 µs of virtual time each.
    fn point(policy: Policy, settings: Vec<String>, scan: bool) -> String {
        let mut all = vec![format!("mb_optimize_scan={}", u8::from(scan))];
        all.extend(settings);
        let mut cfg = VcpuConfig::fallocate2(policy, &all, Machine::Server);
        cfg.horizon_ns = 300_000;
        serde_json::to_string(&run_point(&cfg, 8).expect("runs")).expect("serialises")
    }

    fn check(seed: &str) {
        let pair = pair(seed);
        for scan in [false, true] {
            let on = point(Policy::Linux618, pair.settings(false), scan);
            let off = point(Policy::Linux618, pair.settings(true), scan);
            let (p, s) = pair.before;
            let before = point(p, s.iter().map(|x| x.to_string()).collect(), scan);
            assert_eq!(
                off, before,
                "seed {seed}, scan {scan}: switch off is not the base"
            );
            assert_ne!(
                on, off,
                "seed {seed}, scan {scan}: the switch changes nothing"
            );
        }
    }

    #[test]
    fn seed_000_without_its_goals_is_its_base() {
        check("000");
    }

    #[test]
    fn seed_001_without_its_try_lock_is_its_base() {
        check("001");
    }

    #[test]
    fn the_two_sides_differ_in_one_setting() {
        for seed in ["000", "001"] {
            let pair = pair(seed);
            let (base, patched) = (pair.settings(true), pair.settings(false));
            assert_eq!(base.len(), patched.len() + 1, "{seed}");
            assert_eq!(&base[..patched.len()], &patched[..], "{seed}");
        }
    }
}
