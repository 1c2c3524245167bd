//! Seed 003's workload against a real kernel on a machine the model knows: fallocate3 by 1 to
//! 16 tasks at once on the kernel's own aged layouts (802 GiB at 68 % in use, 842 GiB at 31 %;
//! stored as layout files), the model on `xeon16`'s costs, against the 16-core machine's
//! kernel (docs/measurements/kernel-fallocate3-xeon16.json). The costs come from that kernel's
//! one-task traced run on 802 GiB alone: its 842 GiB figures and every many-task figure are
//! predictions. The tests run 1, 2 and 8 tasks (about 3 minutes of host time in all); the
//! 4- and 16-task points are in docs/vcpus/seed-003.md ("Against the 16-core kernel") with
//! their command.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use super::cost::Machine;
use super::fallocate3::{run_point, Config, Point, Timed};

const FS: [&str; 2] = ["802g-68", "842g-31"];

fn measurements() -> Value {
    super::tests16::measurement("kernel-fallocate3-xeon16.json")
}

/// The kernel's runs on `fs` that counted a curve: per guest, the median total ops/s at each
/// task count.
fn kernel_curves(fs: &str) -> Vec<(u64, BTreeMap<u32, f64>)> {
    let j = measurements();
    j["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["fs"] == fs && r["tasks"].is_array())
        .map(|r| {
            let medians = r["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    let n = t["tasks"].as_u64().unwrap() as u32;
                    (n, t["median_ops_per_s"].as_f64().unwrap())
                })
                .collect();
            (r["guest"].as_u64().unwrap(), medians)
        })
        .collect()
}

/// The kernel's traced run on `fs` with `n` tasks: `key` per operation.
fn kernel_traced(fs: &str, n: u32, key: &str) -> f64 {
    let j = measurements();
    let run = j["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["fs"] == fs && r["traced_tasks"].is_array())
        .unwrap();
    run["traced_tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tasks"] == n)
        .unwrap()[key]
        .as_f64()
        .unwrap()
}

/// The model's point on `fs`'s stored layout with `n` tasks, as the kernel script ran it;
/// each point is run once for all the tests that need it.
fn model(fs: &'static str, n: u32) -> Point {
    type Cells = BTreeMap<(&'static str, u32), Arc<OnceLock<Point>>>;
    static CELLS: Mutex<Cells> = Mutex::new(BTreeMap::new());
    let cell = CELLS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry((fs, n))
        .or_default()
        .clone();
    cell.get_or_init(|| {
        let layout = PathBuf::from(format!(
            "{}/../../docs/measurements/aged-{fs}.layout.gz",
            env!("CARGO_MANIFEST_DIR")
        ));
        let cfg = Config::kernel_image(&layout, Machine::Xeon16, Timed::KERNEL);
        run_point(&cfg, n).unwrap()
    })
    .clone()
}

fn within(model: f64, kernel: f64, band: f64) -> bool {
    (model / kernel - 1.0).abs() <= band
}

/// One task: on 802 GiB the costs were taken from this run's traced twin, so agreement there
/// is a consistency check; on 842 GiB (not calibrated on: 119 groups scanned an operation
/// against 413) it is a prediction, of the rate and of the time inside the allocator.
#[test]
fn one_task_runs_at_the_16_core_kernels_rate_on_a_layout_it_was_not_calibrated_on() {
    for fs in FS {
        let m = model(fs, 1);
        for (guest, k) in kernel_curves(fs) {
            assert!(
                within(m.ops_per_s, k[&1], 0.15),
                "{fs}, guest {guest}: model {:.0} ops/s, kernel {:.0}",
                m.ops_per_s,
                k[&1]
            );
        }
        let (model_us, kernel_us) = (
            m.window_alloc_us_per_op.unwrap(),
            kernel_traced(fs, 1, "allocator_us_per_op"),
        );
        assert!(
            within(model_us, kernel_us, 0.25),
            "{fs}: {model_us:.0} µs in the allocator an operation, kernel {kernel_us:.0}"
        );
    }
}

/// Two tasks add little to one (the free space one task uses in a commit interval is most of
/// what there is), on both layouts, on every guest.
#[test]
fn two_tasks_add_as_little_as_the_kernels() {
    for fs in FS {
        let ratio = model(fs, 2).ops_per_s / model(fs, 1).ops_per_s;
        for (guest, k) in kernel_curves(fs) {
            let kernel = k[&2] / k[&1];
            assert!(
                within(ratio, kernel, 0.15),
                "{fs}, guest {guest}: 2 tasks over 1 {ratio:.3}, kernel {kernel:.3}"
            );
        }
    }
}

/// At 8 tasks the free space runs out before jbd2's 5 s timer, ENOSPC forces commits
/// (`ext4_should_retry_alloc`) and the rate jumps: the kernel's first commit began 1.8-2.1 s
/// into its 8-task runs and 5.0 s into its 2-task runs, and its 8-task rate is 2.8-3.0 times
/// its 2-task one. The model: no forced commit at 2 tasks, its first commit forced and before
/// 4.5 s at 8, and a jump of more than half.
#[test]
fn eight_tasks_force_commits_and_jump_as_the_kernels_do() {
    for fs in FS {
        let (two, eight) = (model(fs, 2), model(fs, 8));
        assert_eq!(two.forced_commits, 0, "{fs}: 2 tasks");
        assert!(eight.forced_commits >= 1, "{fs}: 8 tasks");
        assert!(
            eight.commits_ns[0] < 4_500_000_000,
            "{fs}: {:?}",
            eight.commits_ns
        );
        let jump = eight.ops_per_s / two.ops_per_s;
        assert!(jump > 1.5, "{fs}: 8 tasks over 2 {jump:.2}");
        for (guest, k) in kernel_curves(fs) {
            assert!(
                k[&8] / k[&2] > 2.0,
                "{fs}, guest {guest}: the kernel's jump"
            );
        }
    }
}

/// Where the model misses: its 8-task rate over the kernel's (the guest-2 run, which both
/// layouts have), recorded. Fails if a share moves by more than a tenth (something changed:
/// look, then record) or comes within ±25 % (drop it from the list).
const KNOWN_EIGHT_TASK_SHARES: [(&str, f64); 2] = [("802g-68", 0.674), ("842g-31", 0.698)];

#[test]
fn eight_tasks_run_below_the_kernels_rate_as_recorded() {
    for (fs, recorded) in KNOWN_EIGHT_TASK_SHARES {
        let k = kernel_curves(fs)
            .into_iter()
            .find(|(g, _)| *g == 2)
            .unwrap()
            .1;
        let share = model(fs, 8).ops_per_s / k[&8];
        assert!(
            !within(share, 1.0, 0.25),
            "{fs}: {share:.3} of the kernel's 8-task rate is within ±25 %: drop the known miss"
        );
        assert!(
            (share / recorded - 1.0).abs() <= 0.10,
            "{fs}: {share:.3} of the kernel's 8-task rate, recorded {recorded}"
        );
    }
}
