//! `mballoc run|compare fallocate3|seed003 --vcpus N,...`: will-it-scale's fallocate3 loop
//! (`open(O_TRUNC)`, then a `fallocate` of 18,023 blocks, 70.4 MiB) on N virtual CPUs, on the
//! workload's own filesystem: its size (`--fs-size`, or the workload's at the scale), its fill
//! (fresh for `fallocate3`, 75 % in random holes for `seed003`, or `--set prefill=`), over
//! this machine's device. The simulation is seed 003's (`mballoc_lab::vcpus::fallocate3`):
//! every task's truncate frees wait for a jbd2 commit, group-state lines move between CPUs,
//! and a bitmap not yet in memory is a device read the CPU waits for. `bench threads
//! --seed003` runs the same loop on the seed's servers' filesystems, with their published
//! rows.

use std::collections::BTreeMap;

use mballoc::{Geometry, Policy};
use mballoc_lab::vcpus::fallocate3::{self as f3, Config, Point};
use mballoc_lab::workload::{default_fs_size, default_prefill, LabSettings};
use serde::Serialize;

use super::args::Output;
use super::config::validate_settings;
use super::emit::outln;
use super::vcpus::{
    check_fallocate3_settings, check_out, check_vcpus, comparison, emit_compare, emit_run, label,
    labels, machine, other, seed003_config, VcpuPoint, VcpuSide, SEED003_LAB_SETTINGS,
};
use super::CliError;

/// The workloads whose loop is fallocate3's.
const WORKLOADS: [&str; 2] = ["fallocate3", "seed003"];

/// Whether `workload` runs here rather than on `bench threads`' request patterns.
pub fn drives(workload: &str) -> bool {
    WORKLOADS.contains(&workload)
}

/// One point, as `--json` prints it.
#[derive(Debug, Clone, Serialize)]
struct RunOut {
    workload: &'static str,
    config: Config,
    point: Point,
}

/// The workload's name with a static lifetime (the filesystem's id).
fn id(workload: &str) -> Result<&'static str, CliError> {
    WORKLOADS
        .into_iter()
        .find(|w| *w == workload)
        .ok_or_else(|| CliError::Other(format!("{workload} is not fallocate3's loop")))
}

/// The preset's own `prefetch_test_before_set`: the point's seed-003 switch unless a `--set`
/// changes it (the point applies the switch, then the tunables).
fn preset_tests_first(policy: Policy, geo: &Geometry) -> bool {
    policy.tunables(geo, 1).prefetch_test_before_set
}

/// The point configuration of `side`, checked: its policy and `--set`s on the workload's
/// filesystem, on `--machine`'s costs.
fn config(side: &VcpuSide) -> Result<Config, CliError> {
    validate_settings(side.policy, &side.settings, side.fs_size)?;
    let allowed: Vec<&str> = SEED003_LAB_SETTINGS
        .iter()
        .copied()
        .chain(["prefill"])
        .collect();
    check_fallocate3_settings(&side.settings, &allowed)?;
    let lab = LabSettings::parse(&side.settings).map_err(other)?;
    let id = id(side.workload)?;
    let bytes = match side.fs_size {
        Some(b) => b,
        None => default_fs_size(id, side.quick).map_err(other)?,
    };
    let used = match lab.prefill {
        Some(u) => u,
        None => default_prefill(id).map_err(other)?,
    };
    let geo = super::config::geometry(bytes)?;
    let mut cfg = seed003_config(f3::lab_fs(id, bytes, used), &lab, false, 0);
    cfg.policy = side.policy;
    cfg.patched = preset_tests_first(side.policy, &geo);
    cfg.machine = machine(&side.machine)?;
    Ok(cfg)
}

/// As the real-time loop requires (`Env::require`): room for two files a task, the one it
/// writes and the one whose blocks wait for the commit.
fn require_room(workload: &str, cfg: &Config, counts: &[u32]) -> Result<(), CliError> {
    let n = counts.iter().copied().max().unwrap_or(1);
    let file = u64::from(f3::FILE_BLOCKS) * 4096;
    let needed = 2 * u64::from(n) * file;
    let available = (cfg.bytes as f64 * (1.0 - cfg.fs.used)) as u64;
    if needed > available {
        return Err(CliError::Workload {
            workload: workload.to_string(),
            source: mballoc_lab::workload::LabError::TooSmall {
                workload: workload.to_string(),
                needed,
                available,
            },
        });
    }
    Ok(())
}

fn run_side(side: &VcpuSide, counts: &[u32]) -> Result<Vec<RunOut>, CliError> {
    check_vcpus(side.workload, counts)?;
    let cfg = config(side)?;
    require_room(side.workload, &cfg, counts)?;
    let workload = id(side.workload)?;
    counts
        .iter()
        .map(|&n| {
            Ok(RunOut {
                workload,
                config: cfg.clone(),
                point: f3::run_point(&cfg, n).map_err(other)?,
            })
        })
        .collect()
}

/// Every figure of a point under one flat name.
fn scalars(p: &Point) -> BTreeMap<String, f64> {
    BTreeMap::from([
        ("ops_per_s".to_string(), p.ops_per_s),
        (
            "ops_per_s_per_task".into(),
            p.ops_per_s / f64::from(p.vcpus),
        ),
        ("counted_ops".into(), p.counted_ops as f64),
        ("first_op_us".into(), p.first_op_ns as f64 / 1e3),
        ("groups_scanned_per_op".into(), p.groups_scanned_per_op),
        ("line_transfers_per_op".into(), p.line_transfers_per_op),
        ("bitmap_loads".into(), p.bitmap_loads as f64),
        ("prefetch_loads".into(), p.prefetch_loads as f64),
        (
            "device_reads".into(),
            (p.mount_io.reads + p.io.reads) as f64,
        ),
        (
            "device_wait_us".into(),
            (p.mount_io.wait_ns + p.io.wait_ns) as f64 / 1e3,
        ),
        ("commits".into(), p.commits as f64),
        ("forced_commits".into(), p.forced_commits as f64),
    ])
}

/// What the points ran on and how they counted: the heading of both outputs.
fn heading(workload: &str, cfg: &Config) -> String {
    format!(
        "{workload} on virtual CPUs: {} GiB, {:.0} % used in random holes, a bitmap read {:.1} µs \
         ({}), {:?} costs; {} operation(s) of one task on the mount, then {} per task, then {} \
         counted over the tasks (at least 2 each)",
        cfg.bytes >> 30,
        100.0 * cfg.fs.used,
        cfg.fs.device.service_ns() as f64 / 1e3,
        if cfg.cached_bitmaps {
            "none: every bitmap in memory"
        } else {
            "each bitmap when first needed"
        },
        cfg.machine,
        cfg.mount_ops,
        cfg.warm_ops,
        cfg.ops
    )
}

/// The points of one side: total and per-task rates, each task's against one task's, and
/// what the tasks met.
fn render(workload: &str, label: &str, runs: &[RunOut]) -> String {
    use std::fmt::Write;
    let one = runs
        .iter()
        .find(|r| r.point.vcpus == 1)
        .map(|r| r.point.ops_per_s);
    let mut t = format!(
        "{}\n{label}\n{:>5} {:>10} {:>10} {:>7} {:>10} {:>9} {:>8} {:>7} {:>8} {:>7} {:>7}\n",
        heading(workload, &runs[0].config),
        "tasks",
        "ops/s",
        "per task",
        "vs one",
        "groups/op",
        "lines/op",
        "loads",
        "reads",
        "commits",
        "forced",
        "host s"
    );
    for r in runs {
        let p = &r.point;
        let per = p.ops_per_s / f64::from(p.vcpus);
        let _ = writeln!(
            t,
            "{:>5} {:>10.1} {:>10.1} {:>7} {:>10.1} {:>9.1} {:>8} {:>7} {:>8} {:>7} {:>7.1}",
            p.vcpus,
            p.ops_per_s,
            per,
            one.map_or("-".into(), |o| format!("{:.3}", per / o)),
            p.groups_scanned_per_op,
            p.line_transfers_per_op,
            p.bitmap_loads,
            p.mount_io.reads + p.io.reads,
            p.commits,
            p.forced_commits,
            p.real_s
        );
    }
    t
}

impl VcpuPoint for RunOut {
    const RATE: &'static str = "ops_per_s_per_task";
    fn vcpus(&self) -> u32 {
        self.point.vcpus
    }
    fn scalars(&self) -> BTreeMap<String, f64> {
        scalars(&self.point)
    }
}

/// `mballoc run fallocate3|seed003 --vcpus N,...`.
pub fn cmd_run(side: &VcpuSide, counts: &[u32], out: &Output) -> Result<(), CliError> {
    check_out(out)?;
    let runs = run_side(side, counts)?;
    if emit_run(out, side.workload, &label(side), &runs)? {
        return Ok(());
    }
    outln(&render(side.workload, &label(side), &runs))
}

/// `mballoc compare fallocate3|seed003 --policy A --policy B --vcpus N,...`: a table per count.
pub fn cmd_compare(
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
    outln(&heading(a.workload, &ra[0].config))?;
    for (x, y) in ra.iter().zip(&rb) {
        let title = format!("{} · {} virtual CPUs", a.workload, x.point.vcpus);
        outln(&comparison(
            &title,
            (&la, &lb),
            &scalars(&x.point),
            &scalars(&y.point),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A side of `workload` as `run` builds it.
    fn side<'a>(workload: &'a str, policy: Policy, settings: &[&str]) -> VcpuSide<'a> {
        VcpuSide {
            workload,
            policy,
            settings: settings.iter().map(|s| s.to_string()).collect(),
            fs_size: None,
            quick: true,
            machine: "server".into(),
        }
    }

    /// Each side runs its own preset's seed-003 switch, and a `--set` overrides it; the
    /// workloads keep their own filesystem and fill.
    #[test]
    fn a_side_is_its_policy_on_the_workloads_filesystem() {
        let base = config(&side("seed003", Policy::Linux618, &[])).unwrap();
        assert!(!base.patched);
        assert_eq!(base.policy, Policy::Linux618);
        assert_eq!(base.fs.used, 0.75);
        assert_eq!(base.bytes, 128 << 30, "seed003 at the quick scale");
        let proposed = config(&side("seed003", Policy::Proposed, &[])).unwrap();
        assert!(proposed.patched, "proposed tests the read mark first");
        let set = ["prefetch_test_before_set=1", "prefill=0.5"];
        let patched = config(&side("fallocate3", Policy::Linux618, &set)).unwrap();
        assert_eq!(patched.fs.used, 0.5);
        assert!(
            patched.tunables.iter().any(|t| t == set[0]),
            "the --set is applied after the switch: {:?}",
            patched.tunables
        );
        let fresh = config(&side("fallocate3", Policy::Linux618, &[])).unwrap();
        assert_eq!(fresh.fs.used, 0.0);
        let bad = config(&side("fallocate3", Policy::Linux618, &["duration_s=2"]));
        assert!(matches!(bad, Err(CliError::Usage(_))), "{:?}", bad.err());
    }

    /// A filesystem too small for two files a task is refused before any point runs, as the
    /// real-time loop refuses it, naming what it needs.
    #[test]
    fn a_filesystem_without_room_for_the_files_is_refused() {
        let small = VcpuSide {
            fs_size: Some(256 << 20),
            ..side("fallocate3", Policy::Linux618, &[])
        };
        let file = u64::from(f3::FILE_BLOCKS) * 4096;
        assert!(run_side(&small, &[1]).is_ok(), "two files fit in 256 MiB");
        match run_side(&small, &[1, 2]) {
            Err(CliError::Workload {
                source: mballoc_lab::workload::LabError::TooSmall { needed, .. },
                ..
            }) => assert_eq!(needed, 4 * file),
            other => panic!("{:?}", other.err()),
        }
    }
}
