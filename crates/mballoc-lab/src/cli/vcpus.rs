//! `mballoc bench threads --vcpus N,...`: fallocate2 on virtual CPUs in virtual time
//! (`mballoc_lab::vcpus`), and `--calibrate`, the measurement behind its work costs.

#[cfg(feature = "vcpus")]
use std::fmt::Write;

use mballoc::Policy;
#[cfg(feature = "vcpus")]
use mballoc_lab::vcpus::cost::{Machine, Seg};
#[cfg(feature = "vcpus")]
use mballoc_lab::vcpus::{calibrate, run_curve, VcpuConfig, VcpuCurve};

use super::CliError;

#[cfg_attr(not(feature = "vcpus"), allow(dead_code))]
pub struct VcpuArgs {
    pub vcpus: Vec<u32>,
    /// `server` or `local`.
    pub machine: String,
    pub policies: Vec<Policy>,
    pub settings: Vec<String>,
    pub calibrate: bool,
    pub seeds: bool,
    /// The seeds' kernel series, step by step.
    pub series: bool,
    /// With `series`: each server's lines at the cost its 6.18 figure implies (a what-if).
    pub implied_lines: bool,
    /// Seed 003's filesystems to run alone (`all` = every one).
    pub seed003: Vec<String>,
    /// With `calibrate`: an ext4 image whose layout the fallocate3 timing also runs on;
    /// without: fallocate3's curve on that image as the kernel script ran it.
    pub seed003_image: Option<std::path::PathBuf>,
    /// With `seed003_image` and no `calibrate`: seconds counted after 2 s of warm-up.
    pub counted_s: u64,
    /// With `seed003`: commit cycles a point counts (0: a few operations after the mount).
    pub commit_cycles: u32,
    /// With `seed003`: every bitmap in memory from the start.
    pub cached_bitmaps: bool,
    pub svg: Option<std::path::PathBuf>,
    pub json: bool,
}

#[cfg(feature = "vcpus")]
pub(super) fn other(e: impl std::fmt::Display) -> CliError {
    CliError::Other(e.to_string())
}

/// The default binary has no simulator: its library is built without the hooks.
#[cfg(not(feature = "vcpus"))]
pub fn cmd_bench_vcpus(_: &VcpuArgs) -> Result<(), CliError> {
    Err(CliError::Other(
        "--vcpus and --calibrate need the simulator build: cargo build --release -p \
         mballoc-lab --features vcpus"
            .into(),
    ))
}

#[cfg(feature = "vcpus")]
pub fn cmd_bench_vcpus(a: &VcpuArgs) -> Result<(), CliError> {
    let machine = machine(&a.machine)?;
    if a.calibrate {
        let c = calibrate(200_000).map_err(other)?;
        let mut t = format!(
            "call {:.1} ns (no hook), timing overhead {:.1} ns per point\n{:<22} {:>10} {:>10}\n",
            c.call_ns, c.overhead_ns, "segment ending at", "ns", "per call"
        );
        for ((s, ns), k) in Seg::all().iter().zip(&c.seg_ns).zip(&c.per_call) {
            let _ = writeln!(t, "{:<22} {ns:>10.1} {k:>10.2}", format!("{s:?}"));
        }
        if !a.seed003.is_empty() {
            t.push_str(&seed003_timings(&a.seed003, c.call_ns)?);
        }
        if let Some(path) = &a.seed003_image {
            t.push_str(&image_timings(path)?);
        }
        return super::emit::out(&t);
    }
    if let Some(path) = &a.seed003_image {
        use mballoc_lab::vcpus::fallocate3 as f3;
        let timed = f3::Timed::seconds(2, a.counted_s);
        let lab = mballoc_lab::workload::LabSettings::parse(&a.settings).map_err(other)?;
        check_fallocate3_settings(&a.settings, IMAGE_LAB_SETTINGS)?;
        let points = f3::image_curve(path, machine, timed, &lab, &a.vcpus).map_err(other)?;
        if a.json {
            return super::emit::outln(&serde_json::to_string(&points).map_err(other)?);
        }
        // Every `--set` given is one the run used (the others were refused).
        return super::emit::out(&f3::render_image(&points, timed, &a.settings));
    }
    if let Some(d) = a.svg.as_ref().filter(|_| a.seeds || !a.seed003.is_empty()) {
        std::fs::create_dir_all(d).map_err(other)?;
    }
    if !a.seed003.is_empty() {
        let lab = mballoc_lab::workload::LabSettings::parse(&a.settings).map_err(other)?;
        check_fallocate3_settings(&a.settings, SEED003_LAB_SETTINGS)?;
        let like = |fs| seed003_config(fs, &lab, a.cached_bitmaps, a.commit_cycles);
        return seed003(&a.seed003, &a.vcpus, like, a.svg.as_deref(), a.json);
    }
    if a.series {
        let r = mballoc_lab::vcpus::series::run(&a.settings, a.implied_lines).map_err(other)?;
        if a.json {
            return super::emit::outln(&serde_json::to_string(&r).map_err(other)?);
        }
        return super::emit::out(&mballoc_lab::vcpus::series::render(&r));
    }
    if a.seeds {
        // `--set` replaces the default variants: its settings on both sides of every pair.
        let given = a.settings.join(" ");
        let variants: Vec<&str> = if given.is_empty() {
            vec!["", "prefetch_test_before_set=1"]
        } else {
            vec![given.as_str()]
        };
        let rows =
            mballoc_lab::vcpus::seeds::run(&variants, &a.vcpus, a.svg.as_deref()).map_err(other)?;
        if a.json {
            return super::emit::outln(&serde_json::to_string(&rows).map_err(other)?);
        }
        super::emit::out(&mballoc_lab::vcpus::seeds::render(&rows))?;
        // The same `--set` on both sides of seed 003's pairs, as far as a fallocate3 point
        // takes it (the fallocate2 rows' windows do not apply); each table's header names
        // what its two sides ran with.
        let lab = mballoc_lab::workload::LabSettings::parse(&a.settings).map_err(other)?;
        let like = |fs| seed003_config(fs, &lab, false, 0);
        return seed003(&["all".into()], &a.vcpus, like, a.svg.as_deref(), false);
    }
    let policies = if a.policies.is_empty() {
        vec![Policy::Linux616, Policy::Linux618, Policy::Proposed]
    } else {
        a.policies.clone()
    };
    let curves: Vec<VcpuCurve> = policies
        .iter()
        .map(|&p| run_curve(&VcpuConfig::fallocate2(p, &a.settings, machine), &a.vcpus))
        .collect::<Result<_, _>>()
        .map_err(other)?;
    if a.json {
        let text = serde_json::to_string(&curves).map_err(other)?;
        return super::emit::outln(&text);
    }
    super::emit::out(&render(&curves))
}

/// The lab settings a fallocate3 point on virtual CPUs uses (`--seed003-image`; with `ops`,
/// `--seed003` and seed 003's rows of `--seeds`); the filesystem or the image and the
/// protocol fix the rest (size, use, and for an image the counting), so any other is refused
/// rather than silently ignored.
#[cfg(feature = "vcpus")]
const IMAGE_LAB_SETTINGS: &[&str] = &["line_ns", "line_overlap", "walk_thunk", "bg_locks", "lazy"];
#[cfg(feature = "vcpus")]
pub(super) const SEED003_LAB_SETTINGS: &[&str] = &[
    "line_ns",
    "line_overlap",
    "walk_thunk",
    "bg_locks",
    "lazy",
    "ops",
    "fill",
];

/// Seed 003's point on `fs` with `lab`'s settings: its tunables on both sides, its line
/// costs, hashed group locks and operations counted (`ops`); `cached` (or `lazy=0`): every
/// bitmap in memory from the start; `cycles` commit cycles counted (0: a few operations
/// after the mount).
#[cfg(feature = "vcpus")]
pub(super) fn seed003_config(
    fs: mballoc_lab::vcpus::fallocate3::Fs,
    lab: &mballoc_lab::workload::LabSettings,
    cached: bool,
    cycles: u32,
) -> mballoc_lab::vcpus::fallocate3::Config {
    mballoc_lab::vcpus::fallocate3::Config {
        bg_locks: lab.bg_locks,
        cached_bitmaps: cached || lab.lazy == Some(false),
        line_ns: lab.line_ns,
        line_overlap: lab.line_overlap,
        walk_thunk: lab.walk_thunk,
        fill_seed: lab.fill.unwrap_or(1),
        tunables: lab.tunables.clone(),
        ..mballoc_lab::vcpus::fallocate3::Config::new(fs, false)
            .with_commit_cycles(cycles)
            .with_ops(lab.ops)
    }
}

/// Refuses a `--set` that a fallocate3 point would not use, naming it.
#[cfg(feature = "vcpus")]
pub(super) fn check_fallocate3_settings(settings: &[String], lab: &[&str]) -> Result<(), CliError> {
    for kv in settings {
        let name = kv.split_once('=').map_or(kv.as_str(), |(n, _)| n).trim();
        if !lab.contains(&name) && !mballoc::Tunables::NAMES.contains(&name) {
            return Err(CliError::Usage(format!(
                "--set {kv}: a fallocate3 point takes the allocator's tunables and the lab \
                 settings {}; its filesystem or image and its protocol fix the rest",
                lab.join(", ")
            )));
        }
    }
    Ok(())
}

/// The library's fallocate3 operation on an ext4 image's layout, one task, with a commit at
/// every truncate (as the simulation) and at the kernel's cadence.
#[cfg(feature = "vcpus")]
fn image_timings(path: &std::path::Path) -> Result<String, CliError> {
    use mballoc_lab::vcpus::fallocate3::{
        time_operations_on_image, Cadence, IMAGE_COUNTED_OPS, KERNEL_CADENCE, XEON16_CADENCE,
    };
    let mut t = format!(
        "\nfallocate3 on {}, one task, reads free\n{}",
        path.display(),
        timing_header("commits")
    );
    let cadences = [
        (
            "at every truncate",
            Cadence {
                warm: 3,
                commit_every: 1,
            },
            8,
            5,
        ),
        (
            "every 3,070 ops (kernel)",
            KERNEL_CADENCE,
            IMAGE_COUNTED_OPS,
            1,
        ),
        (
            "every 3,393 ops (xeon16)",
            XEON16_CADENCE,
            XEON16_CADENCE.commit_every,
            1,
        ),
    ];
    for (name, cadence, ops, reps) in cadences {
        for patched in [false, true] {
            let o = time_operations_on_image(path, patched, cadence, ops, reps).map_err(other)?;
            t.push_str(&timing_row(name, &o));
        }
    }
    Ok(t)
}

/// Seed 003's filesystems named in `ids` (`all`: every one).
#[cfg(feature = "vcpus")]
fn filesystems(ids: &[String]) -> Result<Vec<mballoc_lab::vcpus::fallocate3::Fs>, CliError> {
    use mballoc_lab::vcpus::fallocate3::{filesystem, FILESYSTEMS};
    if ids.iter().any(|i| i == "all") {
        return Ok(FILESYSTEMS.to_vec());
    }
    ids.iter()
        .map(|i| filesystem(i.trim()))
        .collect::<Result<_, _>>()
        .map_err(other)
}

/// The columns of a plain fallocate3 timing, the first named `first`.
#[cfg(feature = "vcpus")]
fn timing_header(first: &str) -> String {
    format!(
        "{first:<28} {:>7} {:>10} {:>10} {:>9} {:>8} {:>8} {:>9} {:>9}\n",
        "patched", "ns/op", "points/op", "ns/point", "calls", "groups", "walk set", "walk test"
    )
}

/// One plain fallocate3 timing under [`timing_header`].
#[cfg(feature = "vcpus")]
fn timing_row(first: &str, o: &mballoc_lab::vcpus::fallocate3::OpTiming) -> String {
    format!(
        "{first:<28} {:>7} {:>10.0} {:>10.0} {:>9.2} {:>8.2} {:>8.1} {:>9.0} {:>9.0}\n",
        u8::from(o.patched),
        o.ns_per_op,
        o.points_per_op,
        o.ns_per_point,
        o.calls_per_op,
        o.groups_scanned_per_op,
        o.walk_sets_per_op,
        o.walk_tests_per_op
    )
}

/// The library's own fallocate3 operations on seed 003's filesystems as the simulation builds
/// them, one task, beside fallocate2's plain call (`call_ns`, the same run).
#[cfg(feature = "vcpus")]
fn seed003_timings(ids: &[String], call_ns: f64) -> Result<String, CliError> {
    use mballoc_lab::vcpus::fallocate3 as f3;
    let chosen = filesystems(ids)?;
    let mut t = format!(
        "\nfallocate3, one task, reads free, the library's own time (fallocate2 call: \
         {call_ns:.1} ns)\n{}",
        timing_header("fs")
    );
    for fs in chosen {
        for patched in [false, true] {
            let o = f3::time_operations(&f3::Config::new(fs, patched), 8, 5).map_err(other)?;
            t.push_str(&timing_row(o.fs, &o));
        }
    }
    Ok(t)
}

/// Seed 003's fallocate3 curves on the filesystems `ids` (`all`: every one), at `vcpus`
/// (judged where they are published task counts), each point as `like` configures it for its
/// filesystem, one SVG each into `svg`.
#[cfg(feature = "vcpus")]
fn seed003(
    ids: &[String],
    vcpus: &[u32],
    like: impl Fn(mballoc_lab::vcpus::fallocate3::Fs) -> mballoc_lab::vcpus::fallocate3::Config,
    svg: Option<&std::path::Path>,
    json: bool,
) -> Result<(), CliError> {
    use mballoc_lab::vcpus::fallocate3 as f3;
    let chosen = filesystems(ids)?;
    let mut ns: Vec<u32> = vcpus.to_vec();
    ns.sort_unstable();
    ns.dedup();
    let mut curves = Vec::new();
    for fs in chosen {
        let c = f3::run_curve(fs, &ns, &like(fs)).map_err(other)?;
        if let Some(dir) = svg {
            f3::plot(&c, &dir.join(format!("seed003-{}.svg", fs.id))).map_err(other)?;
        }
        if !json {
            super::emit::out(&f3::render(std::slice::from_ref(&c)))?;
        }
        curves.push(c);
    }
    if json {
        return super::emit::outln(&serde_json::to_string(&curves).map_err(other)?);
    }
    Ok(())
}

/// One table per curve: the prediction, then what explains it, per call.
#[cfg(feature = "vcpus")]
pub fn render(curves: &[VcpuCurve]) -> String {
    let mut t = String::new();
    for c in curves {
        let _ = writeln!(
            t,
            "fallocate2 on virtual CPUs: {} {} (--machine {} costs), {} µs virtual per CPU counted after {} µs",
            c.config.policy,
            c.config.settings.join(" "),
            c.config.machine.name(),
            c.config.horizon_ns / 1000,
            c.config.warmup_ns / 1000
        );
        let _ = writeln!(
            t,
            "{:>5} {:>12} {:>12} {:>8} {:>9} {:>10} {:>10} {:>9} {:>9} {:>9} {:>8} {:>7}",
            "vcpus",
            "ops/s/cpu",
            "ops/s",
            "waiting",
            "grp waits",
            "grp wait ns",
            "grp held ns",
            "busy skip",
            "groups",
            "collide",
            "lines",
            "real s"
        );
        for p in &c.points {
            let k = mballoc_lab::vcpus::lock_kind::LockKind::Group;
            let get = |m: &std::collections::BTreeMap<_, f64>| m.get(&k).copied().unwrap_or(0.0);
            let _ = writeln!(
                t,
                "{:>5} {:>12.0} {:>12.0} {:>7.1}% {:>9.3} {:>10.0} {:>10.0} {:>9.3} {:>9.2} {:>9.3} {:>8.2} {:>7.1}",
                p.vcpus,
                p.ops_per_s_per_cpu,
                p.ops_per_s,
                100.0 * p.waiting_share,
                get(&p.per_call.lock_waits),
                get(&p.per_call.lock_wait_ns),
                get(&p.per_call.lock_hold_ns),
                get(&p.per_call.busy),
                p.per_call.groups_scanned,
                p.per_call.goal_collisions,
                p.per_call.line_transfers,
                p.real_s
            );
        }
        t.push('\n');
    }
    t
}

/// Workloads `mballoc run/compare --vcpus` drives: `bench threads`' request patterns (a
/// private 1 MiB file per CPU, 8 KiB requests), and will-it-scale's fallocate3 loop on the
/// workload's own filesystem (`fallocate3`, `seed003`); the other workloads are not wired to
/// the simulator.
pub const VCPU_WORKLOADS: [&str; 4] = ["fallocate2", "appenders", "fallocate3", "seed003"];

/// The most virtual CPUs (`vcpus::sched::MAX_VCPUS`; known here in every build).
pub const MAX_VCPUS: u32 = 128;

/// What every build can check about `--vcpus`: the workload and the counts.
pub fn check_vcpus(workload: &str, counts: &[u32]) -> Result<(), CliError> {
    if !VCPU_WORKLOADS.contains(&workload) {
        return Err(CliError::VcpusWorkload {
            workload: workload.to_string(),
            accepted: VCPU_WORKLOADS.join(", "),
        });
    }
    if let Some(n) = counts.iter().find(|&&n| n == 0 || n > MAX_VCPUS) {
        return Err(CliError::Usage(format!(
            "--vcpus {n}: between 1 and {MAX_VCPUS} virtual CPUs"
        )));
    }
    Ok(())
}

/// One side of `run`/`compare --vcpus`: a policy, its settings, the scenario's size and scale.
#[cfg_attr(not(feature = "vcpus"), allow(dead_code))]
pub struct VcpuSide<'a> {
    pub workload: &'a str,
    pub policy: Policy,
    pub settings: Vec<String>,
    pub fs_size: Option<u64>,
    pub quick: bool,
    /// `--machine`'s name.
    pub machine: String,
}

/// `--machine`'s name as the simulator's cost profile.
#[cfg(feature = "vcpus")]
pub(super) fn machine(name: &str) -> Result<Machine, CliError> {
    Machine::from_name(name).ok_or_else(|| {
        CliError::Other(format!(
            "unknown --machine {name:?}: one of {}",
            Machine::ALL.map(Machine::name).join(", ")
        ))
    })
}

/// The default binary has no simulator: the request is checked, then refused.
#[cfg(not(feature = "vcpus"))]
pub fn cmd_run_vcpus(
    side: &VcpuSide,
    counts: &[u32],
    _: &super::args::Output,
) -> Result<(), CliError> {
    check_vcpus(side.workload, counts)?;
    Err(CliError::VcpusBuild)
}

/// As [`cmd_run_vcpus`]: both sides run the same workload.
#[cfg(not(feature = "vcpus"))]
pub fn cmd_compare_vcpus(
    a: &VcpuSide,
    _: &VcpuSide,
    counts: &[u32],
    out: &super::args::Output,
) -> Result<(), CliError> {
    cmd_run_vcpus(a, counts, out)
}

#[cfg(feature = "vcpus")]
pub use sim::{
    check_out, cmd_compare_vcpus, cmd_run_vcpus, comparison, emit_compare, emit_run, label, labels,
    VcpuPoint,
};

#[cfg(feature = "vcpus")]
mod sim {
    use std::collections::BTreeMap;

    use mballoc_lab::bench::threads::Pattern;
    use mballoc_lab::report::ComparisonTable;
    use mballoc_lab::vcpus::{run_with_placement, VcpuConfig, VcpuCurve, VcpuRun};
    use serde::Serialize;

    use super::super::args::Output;
    use super::super::config::validate_settings;
    use super::super::emit::outln;
    use super::super::outdir::{self, VcpuRow};
    use super::{check_vcpus, machine, other, render, CliError, VcpuSide};

    /// Virtual time each CPU runs: as `bench threads --vcpus` (5 ms), 1 ms with `--quick`.
    const HORIZON_NS: u64 = 5_000_000;
    const QUICK_HORIZON_NS: u64 = 1_000_000;

    /// One run on N virtual CPUs, as `--json` prints it.
    #[derive(Debug, Clone, Serialize)]
    pub struct VcpuRunOut {
        pub workload: String,
        pub config: VcpuConfig,
        #[serde(flatten)]
        pub run: VcpuRun,
    }

    /// The configuration of `side`, checked.
    fn config(side: &VcpuSide) -> Result<VcpuConfig, CliError> {
        validate_settings(side.policy, &side.settings, side.fs_size)?;
        let mut cfg = VcpuConfig::fallocate2(side.policy, &side.settings, machine(&side.machine)?);
        cfg.pattern = match side.workload {
            "appenders" => Pattern::Appenders,
            _ => Pattern::Fallocate2,
        };
        cfg.fs_bytes = side.fs_size.unwrap_or(cfg.fs_bytes);
        cfg.horizon_ns = if side.quick {
            QUICK_HORIZON_NS
        } else {
            HORIZON_NS
        };
        // The window `warmup_s` and `duration_s` set, as the points run it and the report says.
        cfg.resolved().map_err(other)
    }

    /// `side` on each count of virtual CPUs.
    pub fn run_side(side: &VcpuSide, counts: &[u32]) -> Result<Vec<VcpuRunOut>, CliError> {
        check_vcpus(side.workload, counts)?;
        let cfg = config(side)?;
        counts
            .iter()
            .map(|&n| {
                Ok(VcpuRunOut {
                    workload: side.workload.to_string(),
                    config: cfg.clone(),
                    run: run_with_placement(&cfg, n).map_err(other)?,
                })
            })
            .collect()
    }

    /// Every figure of a run under one flat name, for tables and comparisons.
    pub fn scalars(r: &VcpuRunOut) -> BTreeMap<String, f64> {
        let p = &r.run.point;
        let pc = &p.per_call;
        let mut s = BTreeMap::from([
            ("ops_per_s_per_cpu".to_string(), p.ops_per_s_per_cpu),
            ("ops_per_s".into(), p.ops_per_s),
            ("calls".into(), p.calls as f64),
            ("forced_commits".into(), p.forced_commits as f64),
            ("waiting_share".into(), p.waiting_share),
            ("groups_scanned_per_call".into(), pc.groups_scanned),
            ("goal_collisions_per_call".into(), pc.goal_collisions),
            ("goal_hits_per_call".into(), pc.goal_hits),
            ("line_transfers_per_call".into(), pc.line_transfers),
            ("line_wait_ns_per_call".into(), pc.line_wait_ns),
            (
                "outside_line_wait_ns_per_call".into(),
                pc.outside_line_wait_ns,
            ),
            ("folio_line_wait_ns_per_call".into(), pc.folio_line_wait_ns),
            (
                "marking_line_wait_ns_per_call".into(),
                pc.marking_line_wait_ns,
            ),
            ("folio_refs_per_call".into(), pc.folio_refs),
            ("points_per_call".into(), pc.points),
        ]);
        let per_lock = [
            ("lock_waits", &pc.lock_waits),
            ("lock_wait_ns", &pc.lock_wait_ns),
            ("lock_hold_ns", &pc.lock_hold_ns),
            ("busy", &pc.busy),
        ];
        for (name, m) in per_lock {
            for (k, v) in m {
                s.insert(format!("{name}_per_call.{}", k.name()), *v);
            }
        }
        let pl = &r.run.placement;
        for (k, v) in [
            ("files", pl.files as f64),
            ("extents_per_file", pl.extents_per_file),
            ("mean_extent_blocks", pl.mean_extent_blocks),
            ("data_bg_count", pl.data_bg_count as f64),
            ("fragmented_bg_count", pl.fragmented_bg_count as f64),
            ("frag_pct_mean", pl.frag_pct_mean),
            ("free_extents", pl.free_extents as f64),
        ] {
            s.insert(k.into(), v);
        }
        s
    }

    /// The placement lines under the counters' table.
    fn placement_table(runs: &[VcpuRunOut]) -> String {
        let mut t = format!(
            "{:>5} {:>6} {:>12} {:>13} {:>9} {:>11} {:>9} {:>12}\n",
            "vcpus",
            "files",
            "extents/file",
            "mean extent",
            "data bgs",
            "fragmented",
            "frag %",
            "free extents"
        );
        for r in runs {
            let p = &r.run.placement;
            t.push_str(&format!(
                "{:>5} {:>6} {:>12.2} {:>13.1} {:>9} {:>11} {:>9.2} {:>12}\n",
                r.run.point.vcpus,
                p.files,
                p.extents_per_file,
                p.mean_extent_blocks,
                p.data_bg_count,
                p.fragmented_bg_count,
                p.frag_pct_mean,
                p.free_extents
            ));
        }
        t
    }

    /// `--out DIR` of a vCPU run: checked before anything runs.
    pub fn check_out(out: &Output) -> Result<(), CliError> {
        out.out.as_deref().map_or(Ok(()), outdir::check_writable)
    }

    /// `--out DIR`: the points as files ([`outdir::write_vcpus`], `rate` plotted against
    /// vCPUs), said on stderr unless `--quiet`.
    pub fn save(
        out: &Output,
        workload: &str,
        rate: &str,
        rows: &[VcpuRow],
    ) -> Result<(), CliError> {
        let Some(dir) = &out.out else { return Ok(()) };
        let files = outdir::write_vcpus(dir, workload, rate, rows)?;
        if !out.quiet {
            eprintln!("wrote {} files to {}", files.len(), dir.display());
        }
        Ok(())
    }

    /// What `--json` and `--out` need of one simulated point, whatever its workload.
    pub trait VcpuPoint: Serialize {
        /// The figure `--out` plots against vCPUs.
        const RATE: &'static str;
        fn vcpus(&self) -> u32;
        /// Every figure under one flat name (tables, CSV).
        fn scalars(&self) -> BTreeMap<String, f64>;
    }

    impl VcpuPoint for VcpuRunOut {
        const RATE: &'static str = "ops_per_s_per_cpu";
        fn vcpus(&self) -> u32 {
            self.run.point.vcpus
        }
        fn scalars(&self) -> BTreeMap<String, f64> {
            scalars(self)
        }
    }

    /// `side`'s points as `--out` writes them.
    fn rows<P: VcpuPoint>(side: &str, points: &[P]) -> Result<Vec<VcpuRow>, CliError> {
        points
            .iter()
            .map(|p| {
                Ok(VcpuRow {
                    label: side.to_string(),
                    vcpus: p.vcpus(),
                    scalars: p.scalars(),
                    json: serde_json::to_value(p).map_err(other)?,
                })
            })
            .collect()
    }

    /// `--out` and `--json` of a run's points: the files written, the JSON lines printed.
    /// Whether it printed them (the caller prints its table otherwise).
    pub fn emit_run<P: VcpuPoint>(
        out: &Output,
        workload: &str,
        side: &str,
        points: &[P],
    ) -> Result<bool, CliError> {
        save(out, workload, P::RATE, &rows(side, points)?)?;
        if out.json {
            for p in points {
                outln(&serde_json::to_string(p).map_err(other)?)?;
            }
        }
        Ok(out.json)
    }

    /// `--out` and `--json` of a comparison's two sides (labelled `la` and `lb`): the files
    /// written, each count's two points printed as JSON lines. Whether it printed them.
    pub fn emit_compare<P: VcpuPoint>(
        out: &Output,
        workload: &str,
        (la, lb): (&str, &str),
        (a, b): (&[P], &[P]),
    ) -> Result<bool, CliError> {
        let mut all = rows(la, a)?;
        all.extend(rows(lb, b)?);
        save(out, workload, P::RATE, &all)?;
        if out.json {
            for (x, y) in a.iter().zip(b) {
                outln(&serde_json::to_string(x).map_err(other)?)?;
                outln(&serde_json::to_string(y).map_err(other)?)?;
            }
        }
        Ok(out.json)
    }

    /// `mballoc run WORKLOAD --vcpus N,...`.
    pub fn cmd_run_vcpus(side: &VcpuSide, counts: &[u32], out: &Output) -> Result<(), CliError> {
        check_out(out)?;
        let runs = run_side(side, counts)?;
        if emit_run(out, side.workload, &label(side), &runs)? {
            return Ok(());
        }
        let curve = VcpuCurve {
            config: runs[0].config.clone(),
            points: runs.iter().map(|r| r.run.point.clone()).collect(),
        };
        outln(&format!(
            "{} ({:?} requests)\n{}{}",
            side.workload,
            curve.config.pattern,
            render(std::slice::from_ref(&curve)),
            placement_table(&runs)
        ))
    }

    /// `mballoc compare WORKLOAD --policy A --policy B --vcpus N,...`: a table per count.
    pub fn cmd_compare_vcpus(
        a: &VcpuSide,
        b: &VcpuSide,
        counts: &[u32],
        out: &Output,
    ) -> Result<(), CliError> {
        check_out(out)?;
        let ra = run_side(a, counts)?;
        let rb = run_side(b, counts)?;
        let (la, lb) = labels(a, b);
        if emit_compare(out, a.workload, (&la, &lb), (&ra, &rb))? {
            return Ok(());
        }
        for (x, y) in ra.iter().zip(&rb) {
            let title = format!(
                "{} · {} virtual CPUs · {} µs virtual each",
                a.workload,
                x.run.point.vcpus,
                x.config.horizon_ns / 1000
            );
            outln(&comparison(&title, (&la, &lb), &scalars(x), &scalars(y)))?;
        }
        Ok(())
    }

    /// A side's label: its policy and settings.
    pub fn label(side: &VcpuSide) -> String {
        std::iter::once(side.policy.name())
            .chain(side.settings.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The two sides' column labels ([`label`]), prefixed A and B when alike.
    pub fn labels(a: &VcpuSide, b: &VcpuSide) -> (String, String) {
        let (la, lb) = (label(a), label(b));
        if la == lb {
            return (format!("A: {la}"), format!("B: {lb}"));
        }
        (la, lb)
    }

    /// One count's side-by-side table: every figure either side has, in name order.
    pub fn comparison(
        title: &str,
        (la, lb): (&str, &str),
        sa: &BTreeMap<String, f64>,
        sb: &BTreeMap<String, f64>,
    ) -> String {
        let mut t = ComparisonTable::new(title, la, lb).with_delta_label("diff");
        let mut keys: Vec<&String> = sa.keys().chain(sb.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let get = |m: &BTreeMap<String, f64>| m.get(k).copied().unwrap_or(f64::NAN);
            t.row(k, get(sa), get(sb));
        }
        t.render()
    }
}
