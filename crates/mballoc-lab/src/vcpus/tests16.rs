//! The model against a 16-core machine's own kernel (docs/measurements/kernel-fallocate2-xeon16.json):
//! the same workload, the same 4 GiB file system, that machine's work and line costs
//! (`--machine xeon16`). Nothing of that file's curve was used to set a cost: the costs are its
//! one-process figures and its line transfers; the curve at 2-16 processes is the check.

use mballoc::Policy;
use serde_json::Value;

use super::cost::{Machine, XEON16_CALL_NS, XEON16_HANDOFF_NS, XEON16_OPS_1P, XEON16_TRANSFER_NS};
use super::*;
use crate::bench::median;

fn stored() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/measurements/kernel-fallocate2-xeon16.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
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
    let set = vec![format!("mb_optimize_scan={}", u8::from(scan))];
    let cfg = VcpuConfig {
        fs_bytes: 4 << 30,
        horizon_ns: 1_000_000,
        ..VcpuConfig::fallocate2(Policy::Linux618, &set, Machine::Xeon16)
    };
    run_point(&cfg, n).unwrap().ops_per_s / f64::from(n)
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

/// Beyond 2 CPUs the model keeps more of its per-CPU rate than that kernel does. The measured
/// ratios, model over kernel per CPU (each relative to its own 1-CPU rate), per (CPUs, scan):
/// none within ±25 %. A change to the model that moves any of them by more than a tenth turns
/// this red until the table (and docs/vcpus.md) says what the model does now.
const CURVE: [(u32, bool, f64); 6] = [
    (4, false, 1.27),
    (4, true, 1.36),
    (8, false, 1.79),
    (8, true, 1.81),
    (16, false, 2.53),
    (16, true, 2.54),
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
        let cfg = VcpuConfig {
            fs_bytes: 4 << 30,
            horizon_ns: 1_000_000,
            ..VcpuConfig::fallocate2(
                Policy::Linux618,
                &["mb_optimize_scan=1".to_string()],
                Machine::Xeon16,
            )
        };
        let model = run_point(&cfg, n).unwrap().per_call.goal_hits;
        assert!(
            (model / kernel - 1.0).abs() <= 0.25,
            "{n} CPUs: model {model:.3}, kernel {kernel:.3}"
        );
    }
}
