//! Seed 000's claim on files held against this machine's kernel
//! (docs/measurements/kernel-goal-files.json, `scripts/kernel_goal_files.py`): 6.18 gives a
//! file system one stream goal per four groups up to its possible CPUs, so on this 2-CPU
//! machine 512 MiB (4 groups) has one goal, the kernel before seed 000, and 2 GiB (16
//! groups) two. fallocate2 with `mb_optimize_scan=0`, the share of calls that started a new
//! extent (the result not at the call's goal block), kernel medians of 3 against the model
//! on this machine's costs under the kernel's protocol: the calls of 0.5 s after 1.5 s of a
//! fresh file system (by then both sizes have run out of space and forced a commit).

use mballoc::Policy;
use serde_json::Value;

use super::cost::Machine;
use super::tests16::measurement;
use super::*;

fn stored() -> Value {
    measurement("kernel-goal-files.json")
}

/// The kernel's median share of calls that started a new extent.
fn kernel(j: &Value, size: &str, n: u32) -> f64 {
    j["medians"][format!("{size}/{n}")].as_f64().unwrap()
}

/// fallocate2 as the kernel script ran it, on this machine's costs: a fresh file system of
/// `bytes`, `mb_optimize_scan=0`, counting `horizon_ns` after `warmup_ns`.
fn on_local(bytes: u64, warmup_ns: u64, horizon_ns: u64) -> VcpuConfig {
    VcpuConfig {
        fs_bytes: bytes,
        warmup_ns,
        horizon_ns,
        ..VcpuConfig::fallocate2(
            Policy::Linux618,
            &["mb_optimize_scan=0".to_string()],
            Machine::Local,
        )
    }
}

/// The model's, on a file system of `bytes`, over the trace's window.
fn model(bytes: u64, n: u32) -> f64 {
    let cfg = on_local(bytes, 1_500_000_000, 500_000_000);
    1.0 - run_point(&cfg, n).unwrap().per_call.goal_hits
}

/// Two goals, two CPUs: the model's calls miss their goal block 1.36 times as often as the
/// kernel's (0.025 of the calls against 0.018; the kernel's three runs 0.017-0.027).
/// Recorded here; the test fails if the ratio moves by more than a tenth or comes within
/// ±25 % (then the entry goes).
const KNOWN_TWO_GOALS_MISS: f64 = 1.36;

#[test]
fn one_goal_makes_new_extents_as_the_kernels_does() {
    let j = stored();
    // The model mounts with the machine's possible CPUs as the kernel counted them.
    assert_eq!(j["possible_cpus"], "0-1");
    let within = |m: f64, k: f64| (m / k - 1.0).abs() <= 0.25;
    let (one_goal, two_goals) = (512u64 << 20, 2u64 << 30);
    for (size, bytes) in [("512M", one_goal), ("2G", two_goals)] {
        let (m, k) = (model(bytes, 1), kernel(&j, size, 1));
        assert!(within(m, k), "{size}, one CPU: model {m:.4}, kernel {k:.4}");
    }
    let (m1, k1) = (model(one_goal, 2), kernel(&j, "512M", 2));
    assert!(
        within(m1, k1),
        "one goal, two CPUs: model {m1:.4}, kernel {k1:.4}"
    );
    let (m2, k2) = (model(two_goals, 2), kernel(&j, "2G", 2));
    assert!(!within(m2, k2), "two goals, two CPUs: model {m2:.4} within ±25 % of the kernel's {k2:.4} again: drop the known miss");
    assert!(
        (m2 / k2 / KNOWN_TWO_GOALS_MISS - 1.0).abs() <= 0.10,
        "two goals, two CPUs: model {m2:.4} / kernel {k2:.4}, recorded {KNOWN_TWO_GOALS_MISS}"
    );
    // The seed's claim, on both: one goal makes many times the new extents of two.
    assert!(k1 > 10.0 * k2, "kernel: one goal {k1:.4}, two {k2:.4}");
    assert!(m1 > 10.0 * m2, "model: one goal {m1:.4}, two {m2:.4}");
}

/// The kernel's median total calls a second on `size` with `n` processes (fallocate2's own
/// count: 3 s after 1 s of warm-up).
fn kernel_ops(j: &Value, size: &str, n: u32) -> f64 {
    let v: Vec<f64> = j["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["size"] == size && r["processes"] == n)
        .map(|r| r["ops_s"].as_f64().unwrap())
        .collect();
    crate::bench::median(&v)
}

/// The model's total calls a second under the same count.
fn model_ops(bytes: u64, n: u32) -> f64 {
    let cfg = on_local(bytes, 1_000_000_000, 3_000_000_000);
    run_point(&cfg, n).unwrap().ops_per_s
}

/// What one goal costs two processes in calls: each keeps a share of one process's rate,
/// lower with one goal than with two, and the model's shares are the kernel's within ±15 %
/// (the bar the 1→2 ratio is held to).
#[test]
fn one_goal_costs_two_processes_as_it_costs_the_kernels() {
    let j = stored();
    let mut shares = Vec::new();
    for (size, bytes) in [("512M", 512u64 << 20), ("2G", 2u64 << 30)] {
        let kernel = kernel_ops(&j, size, 2) / 2.0 / kernel_ops(&j, size, 1);
        let model = model_ops(bytes, 2) / 2.0 / model_ops(bytes, 1);
        assert!(
            (model / kernel - 1.0).abs() <= 0.15,
            "{size}: share of one process's rate at two, model {model:.3}, kernel {kernel:.3}"
        );
        shares.push((model, kernel));
    }
    let ((m1, k1), (m2, k2)) = (shares[0], shares[1]);
    assert!(
        k2 > k1 && m2 > m1,
        "one goal {m1:.3} / {k1:.3}, two {m2:.3} / {k2:.3}"
    );
}
