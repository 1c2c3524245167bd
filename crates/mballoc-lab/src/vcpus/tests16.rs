//! The model against a 16-core machine's own kernel (docs/measurements/kernel-fallocate2-xeon16.json):
//! the same workload, the same 4 GiB file system, that machine's work and line costs
//! (`--machine xeon16`). Nothing of that file's curve was used to set a cost: the costs are its
//! one-process figures and its line transfers; the curve at 2-16 processes is the check.

use mballoc::Policy;
use serde_json::Value;

use super::cost::{
    Costs, Machine, XEON16_CALL_NS, XEON16_CEILING, XEON16_HANDOFF_NS, XEON16_OPS_1P,
    XEON16_TRANSFER_NS,
};
use super::*;
use crate::bench::median;

/// A stored measurement of docs/measurements/.
pub(super) fn measurement(file: &str) -> Value {
    let path = format!(
        "{}/../../docs/measurements/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn stored() -> Value {
    measurement("kernel-fallocate2-xeon16.json")
}

/// fallocate2 as the 16-core kernel ran it: linux-6.18 on `gib` GiB with `mb_optimize_scan`
/// = `scan`, on that machine's costs, counting `horizon_ns` after `warmup_ns`.
fn on_xeon16(gib: u64, scan: bool, warmup_ns: u64, horizon_ns: u64) -> VcpuConfig {
    let set = [format!("mb_optimize_scan={}", u8::from(scan))];
    VcpuConfig {
        fs_bytes: gib << 30,
        warmup_ns,
        horizon_ns,
        ..VcpuConfig::fallocate2(Policy::Linux618, &set, Machine::Xeon16)
    }
}

/// The kernel's whole-call rate per process at `n` processes (median of 3).
fn kernel_per_process(j: &Value, scan: bool, n: u32) -> f64 {
    let total = j["curve"][if scan { "1" } else { "0" }][n.to_string()]["median_total_ops_s"]
        .as_f64()
        .unwrap();
    total / f64::from(n)
}

/// The model per CPU at `n` CPUs, as the kernel ran: 4 GiB, linux-6.18, `scan`.
fn model_per_cpu(scan: bool, n: u32) -> f64 {
    run_point(&on_xeon16(4, scan, 0, 1_000_000), n)
        .unwrap()
        .ops_per_s
        / f64::from(n)
}

#[test]
fn xeon16_costs_are_the_stored_measurement() {
    let j = stored();
    for (i, scan) in ["0", "1"].into_iter().enumerate() {
        let call = j["traced"][scan]["1"]["median_alloc_ns"].as_f64().unwrap();
        assert!(
            (call - XEON16_CALL_NS[i]).abs() < 1.0,
            "{call} against {XEON16_CALL_NS:?}"
        );
        let ops = j["curve"][scan]["1"]["median_total_ops_s"]
            .as_f64()
            .unwrap();
        assert!(
            (ops - XEON16_OPS_1P[i]).abs() < 1.0,
            "{ops} against {XEON16_OPS_1P:?}"
        );
    }
    let pairs = j["line_transfer"].as_array().unwrap();
    let of = |k: &str| {
        median(
            &pairs
                .iter()
                .map(|p| p[k].as_f64().unwrap())
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(of("transfer_ns").round() as u64, XEON16_TRANSFER_NS);
    assert_eq!(of("handoff_ns").round() as u64, XEON16_HANDOFF_NS);
    let ceiling = &j["library_threads_ops_s_per_thread"]["fallocate2_ceiling_per_thread_ratio"];
    for (n, share) in XEON16_CEILING {
        let stored = ceiling[n.to_string()].as_f64().unwrap();
        assert!(
            (stored - share).abs() < 1e-9,
            "{n}: {stored} against {share}"
        );
    }
}

/// The machine's own scaling slows every CPU's work, not its lines: at 16 CPUs a point,
/// the checksum and the call outside the allocator cost 1 / 0.69 of one CPU's; between two
/// measured counts the share is blended on a log scale; one CPU and the unmeasured machines
/// keep their speed.
#[test]
fn a_busy_xeon16_slows_every_cpus_work_by_its_measured_ceiling() {
    let one = Costs::new(Machine::Xeon16, false);
    let at16 = one.clone().on_cpus(16);
    assert_eq!(at16.point_ns, (one.point_ns as f64 / 0.69).round() as u64);
    assert_eq!(
        at16.outside_ns,
        (one.outside_ns as f64 / 0.69).round() as u64
    );
    assert!((at16.csum_4k_ns - one.csum_4k_ns / 0.69).abs() < 1e-9);
    assert_eq!(
        (at16.transfer_ns, at16.handoff_ns),
        (one.transfer_ns, one.handoff_ns)
    );
    assert_eq!(one.clone().on_cpus(1).point_ns, one.point_ns);
    assert_eq!(
        Machine::Xeon16.ceiling(2),
        1.0,
        "1.02 measured: never faster than alone"
    );
    let mid = Machine::Xeon16.ceiling(11);
    let x = (11f64.log2() - 3.0) / 1.0;
    assert!((mid - (0.90 + x * (0.69 - 0.90))).abs() < 1e-9, "{mid}");
    assert_eq!(Machine::Xeon16.ceiling(128), 0.69);
    for n in [1, 2, 16, 96] {
        assert_eq!(Machine::Server.ceiling(n), 1.0);
        assert_eq!(Machine::Local.ceiling(n), 1.0);
    }
}

/// `bitmap_csum=incremental` (the ext4 incremental-CRC RFC): each marking's checksum costs
/// the published 57 ns update instead of the 182 ns full checksum on `xeon16` (43.8 ns, the
/// same proportion of this machine's 140 ns, on the others), inside the group lock: one CPU's
/// group lock is held 125 ns less per marking, and nothing else changes at one CPU.
#[test]
fn the_incremental_checksum_shortens_each_marking_by_the_published_difference() {
    let full = Costs::new(Machine::Xeon16, false);
    let inc = full.clone().with_incremental_csum(true);
    assert_eq!((full.csum_ns(4096), inc.csum_ns(4096)), (182, 57));
    assert_eq!(
        inc.csum_ns(1024),
        57,
        "an update costs the same for any bitmap size"
    );
    let local = Costs::new(Machine::Local, false).with_incremental_csum(true);
    assert_eq!(local.csum_ns(4096), 44);
    assert_eq!(
        inc.point_ns, full.point_ns,
        "the rest of the call keeps its cost"
    );
    let held = |csum: &str| {
        let cfg = VcpuConfig {
            fs_bytes: 4 << 30,
            horizon_ns: 300_000,
            ..VcpuConfig::fallocate2(
                Policy::Linux618,
                &[format!("bitmap_csum={csum}")],
                Machine::Xeon16,
            )
        };
        let p = run_point(&cfg, 1).unwrap();
        (
            p.per_call.lock_hold_ns[&super::lock_kind::LockKind::Group],
            p.calls,
        )
    };
    let ((h_full, calls), (h_inc, _)) = (held("full"), held("incremental"));
    // One marking per call (a truncate's frees would add some: none in this window).
    let saved = h_full - h_inc;
    assert!(
        (124.5..=125.0 * 1.1).contains(&saved),
        "{saved:.1} ns a call saved over {calls} calls"
    );
    let bad = VcpuConfig::fallocate2(
        Policy::Linux618,
        &["bitmap_csum=half".into()],
        Machine::Xeon16,
    );
    let e = run_point(&bad, 1).unwrap_err().to_string();
    assert!(e.contains("full or incremental"), "{e}");
}

/// The 1-2 check of the 2-vCPU machine, on a second machine with other costs: its kernel
/// loses a third of its per-process rate at 2 processes (0.65-0.67), the 2-vCPU machine's
/// under a tenth; the model, given each machine's costs, follows both.
#[test]
fn two_vcpus_scale_as_two_processes_of_the_16_core_kernel() {
    let j = stored();
    for scan in [false, true] {
        let kernel = kernel_per_process(&j, scan, 2) / kernel_per_process(&j, scan, 1);
        let model = model_per_cpu(scan, 2) / model_per_cpu(scan, 1);
        assert!(
            (model / kernel - 1.0).abs() <= 0.15,
            "scan {scan}: model {model:.3}, kernel {kernel:.3}"
        );
    }
}

/// Beyond 2 CPUs the model keeps more of its per-CPU rate than that kernel does on 4 GiB, a
/// string of forced commits there (docs/vcpus/kernel-16-core.md, "The file system's size"; this model run is
/// 1 ms from a fresh file system, not the kernel's whole run). The measured ratios, model over
/// kernel per CPU (each relative to its own 1-CPU rate), per (CPUs, scan): none within ±25 %. A change to the model that moves any of them by more than a tenth turns
/// this red until the table (and docs/vcpus/kernel-16-core.md) says what the model does now.
const CURVE: [(u32, bool, f64); 6] = [
    (4, false, 1.15),
    (4, true, 1.22),
    (8, false, 1.54),
    (8, true, 1.52),
    (16, false, 1.73),
    (16, true, 1.81),
];

#[test]
fn the_16_core_curve_beyond_two_cpus_is_as_recorded() {
    let j = stored();
    let mut now = Vec::new();
    let mut off = Vec::new();
    for &(n, scan, recorded) in &CURVE {
        let model = model_per_cpu(scan, n) / model_per_cpu(scan, 1);
        let kernel = kernel_per_process(&j, scan, n) / kernel_per_process(&j, scan, 1);
        let ratio = model / kernel;
        now.push(format!("({n}, {scan}, {ratio:.2})"));
        if (ratio / recorded - 1.0).abs() > 0.10 {
            off.push(format!(
                "{n} CPUs scan {scan}: {ratio:.2} against {recorded}"
            ));
        }
    }
    assert!(
        off.is_empty(),
        "{}; the table now: {}",
        off.join("; "),
        now.join(", ")
    );
}

/// Where the calls land, against the 16-core kernel's `ext4_mballoc_alloc` events (the share
/// whose result starts at the requested goal block; 3,000 events each, `mb_optimize_scan=1`,
/// taken in a second run on the file system a first run had used): 0.98 at 4 processes, 0.29
/// at 16. The model's CPUs lose their goals as the kernel's do, within ±25 %; a model whose
/// CPUs never met (or always did) would miss one of the two.
///
/// Known miss: at 16 CPUs over this test's 1 ms window the model keeps 0.46 of its goals
/// (0.42 before the inode table block's line, `inode_bh`; 0.25 before the machine's measured
/// 16-thread speed, `Machine::ceiling`), and 0.21 over 5 ms: the share at 16 depends on the
/// window, on either side of the kernel's 0.29. Recorded here; the test fails if it moves by
/// more than a tenth or comes back within ±25 % (then the entry goes).
const KNOWN_GOAL_HIT_MISSES: [(u32, f64); 1] = [(16, 0.461)];

#[test]
fn calls_keep_their_goal_block_as_often_as_the_16_core_kernels() {
    let j = stored();
    for n in [4u32, 16] {
        let kernel = j["contention"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["workers"] == n)
            .unwrap()["goal_block_hit_share"]
            .as_f64()
            .unwrap();
        let cfg = on_xeon16(4, true, 0, 1_000_000);
        let model = run_point(&cfg, n).unwrap().per_call.goal_hits;
        let within = (model / kernel - 1.0).abs() <= 0.25;
        match KNOWN_GOAL_HIT_MISSES.iter().find(|m| m.0 == n) {
            Some(&(_, recorded)) => {
                assert!(!within, "{n} CPUs: {model:.3} against the kernel's {kernel:.3} is within ±25 % again: drop the known miss");
                assert!(
                    (model / recorded - 1.0).abs() <= 0.10,
                    "{n} CPUs: model {model:.3}, recorded miss {recorded}"
                );
            }
            None => assert!(within, "{n} CPUs: model {model:.3}, kernel {kernel:.3}"),
        }
    }
}

/// The second look at that machine (docs/measurements/kernel-fallocate2-xeon16-sizes.json):
/// the curve on file systems of 4, 16 and 64 GiB with the journal's commits counted.
fn sizes() -> Value {
    measurement("kernel-fallocate2-xeon16-sizes.json")
}

/// The guest's loop devices and the disk under them say they are rotational, and its ext4
/// mounted them with 4 linear groups: `--machine xeon16` mounts as that kernel did.
#[test]
fn the_16_core_guest_mounts_as_its_kernel_did() {
    let j = sizes();
    assert_eq!(j["device"]["loop_rotational"], 1);
    let linear = j["device"]["default_mb_max_linear_groups"]
        .as_u64()
        .unwrap();
    assert!(Machine::Xeon16.rotational());
    assert_eq!(
        super::io::mount_settings(Machine::Xeon16.rotational()),
        vec![format!("mb_max_linear_groups={linear}")]
    );
}

/// The model under the kernel's own protocol (`fallocate2 -w 1 -t 3` on a freshly made file
/// system of `gib` GiB): 1 s of virtual warm-up, then 3 s counted.
fn model_whole_run(gib: u64, n: u32) -> VcpuPoint {
    run_point(&on_xeon16(gib, true, 1_000_000_000, 3_000_000_000), n).unwrap()
}

/// The kernel per process on `gib` GiB at `n` processes, images synced before each run
/// (median of 3), and its forced commits a second.
fn kernel_synced(j: &Value, gib: u64, n: u32) -> (f64, f64) {
    let m = &j["synced"]["median"][format!("{gib}/{n}")];
    (
        m["median_total_ops_s"].as_f64().unwrap() / f64::from(n),
        m["median_commits_per_s"].as_f64().unwrap(),
    )
}

/// Over the kernel's whole run, 8 CPUs keep the share of one CPU's rate that its 8 processes
/// keep where the journal never forces a commit (64 GiB: no commit in the kernel's run, none
/// in the model's), within ±15 %. On 4 GiB the kernel's run is a string of forced commits
/// (3.25 a second at 8 processes), and so is the model's: the freed blocks stay busy until a
/// commit and the file system runs out of committed space several times a second; late in
/// such cycles the kernel's truncates free 95-122 extents a 1 MiB file. There the model keeps
/// 1.29 times the kernel's share of one CPU's rate (known miss, recorded: red if it moves by
/// more than a tenth, or comes within ±15 %; then the entry goes).
#[test]
fn over_the_kernels_whole_run_8_cpus_follow_it_where_no_commit_is_forced() {
    let j = sizes();
    let mut report = Vec::new();
    for gib in [64u64, 4] {
        let (k1, _) = kernel_synced(&j, gib, 1);
        let (k8, k_commits) = kernel_synced(&j, gib, 8);
        let (m1, m8) = (model_whole_run(gib, 1), model_whole_run(gib, 8));
        let share = (m8.ops_per_s_per_cpu / m1.ops_per_s_per_cpu) / (k8 / k1);
        report.push(format!(
            "{gib} GiB: share {share:.3}, kernel {k_commits} commits/s, model {} commits",
            m8.forced_commits
        ));
        if gib == 64 {
            assert_eq!((k_commits, m8.forced_commits), (0.0, 0), "{report:?}");
            assert!((share - 1.0).abs() <= 0.15, "{report:?}");
            continue;
        }
        assert!(k_commits > 1.0 && m8.forced_commits > 1, "{report:?}");
        let recorded = 1.29;
        assert!(
            (share - 1.0).abs() > 0.15,
            "{share:.3} within ±15 % now, drop the known miss ({report:?})"
        );
        assert!(
            (share / recorded - 1.0).abs() <= 0.10,
            "{share:.3} against the recorded {recorded} ({report:?})"
        );
    }
}

/// Every median stored in the sizes file is the median of the runs stored beside it, and the
/// 4 GiB runs forced commits where the 64 GiB ones forced none: the figures the checks above
/// read are the measurement's, not edited.
#[test]
fn the_sizes_files_medians_are_its_runs() {
    let j = sizes();
    for part in ["sizes", "bases", "curve16", "synced"] {
        let runs = j[part]["runs"].as_array().unwrap();
        for (key, m) in j[part]["median"].as_object().unwrap() {
            let (size, n) = key.split_once('/').unwrap();
            let mine = |field: &str| {
                let v: Vec<f64> = runs
                    .iter()
                    .filter(|r| r["size"] == size && r["workers"].as_u64() == n.parse().ok())
                    .map(|r| r[field].as_f64().unwrap())
                    .collect();
                assert_eq!(v.len() as u64, m["runs"].as_u64().unwrap(), "{part} {key}");
                median(&v)
            };
            let ops = mine("total_ops_s");
            assert!(
                (ops - m["median_total_ops_s"].as_f64().unwrap()).abs() < 1.0,
                "{part} {key}: {ops}"
            );
            let commits = mine("commits_per_s");
            assert!(
                (commits - m["median_commits_per_s"].as_f64().unwrap()).abs() < 0.01,
                "{part} {key}: {commits}"
            );
        }
    }
    for r in j["synced"]["runs"].as_array().unwrap() {
        let forced = r["commits"].as_u64().unwrap();
        match r["size"].as_str().unwrap() {
            "64" => assert_eq!(forced, 0, "{r}"),
            _ => assert!(forced >= 2, "{r}"),
        }
    }
}
