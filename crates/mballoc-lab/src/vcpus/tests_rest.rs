//! The rest of a fallocate call, without the allocator, against the 16-core kernel's:
//! `scripts/fallocate_rest.c` runs will-it-scale's 8 KiB fallocate on a range that is already
//! allocated (the system call, the inode lock, one jbd2 handle and one inode update; mballoc
//! never called), 1 to 16 processes at once (docs/measurements/kernel-fallocate-rest-xeon16.json).
//! The model holds that part of a call fixed but for its shared lines: the handle's
//! `j_state_lock` and running-transaction writes and the inode table block's buffer head
//! (`cpu_loop`). Here the model's CPUs run exactly that part: half the measured one-process
//! time, the handle's start, one `ext4_mark_inode_dirty`, the handle's stop, the other half,
//! on `xeon16`'s line costs and its measured no-sharing ceiling. Nothing of the curve is
//! taken: the work is the one-process time alone.

use std::sync::Arc;

use serde_json::Value;

use super::cost::{Costs, Machine};
use super::sched::Sched;
use super::{handle_start, handle_stop, inode_bh_line, mark_inode_dirty};
use crate::fs::FIRST_FILE_INO;

/// Virtual time each CPU runs.
const HORIZON_NS: u64 = 2_000_000;

fn measurement() -> Value {
    super::tests16::measurement("kernel-fallocate-rest-xeon16.json")
}

/// The kernel's per-process calls a second in `mode` at `n` processes (median of 3).
fn kernel(mode: &str, n: u64) -> f64 {
    measurement()["modes"][mode]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["workers"] == n)
        .unwrap()["median_per_worker_ops_s"]
        .as_f64()
        .unwrap()
}

/// The model's calls a second per CPU for `n` CPUs each looping over the rest of a call,
/// which costs `call_ns` on one CPU; `each`: the lab's `jbd2_rmw=each`.
fn model(n: usize, call_ns: f64, each: bool) -> f64 {
    let mut costs = Costs::new(Machine::Xeon16, true);
    costs.outside_ns = call_ns.round() as u64;
    let costs = costs.on_cpus(n as u32);
    let half = costs.outside_ns / 2;
    let s = Sched::new(n, costs);
    let bodies = (0..n)
        .map(|me| {
            let s = Arc::clone(&s);
            move || {
                // The tasks' files, made one after another: consecutive inodes.
                let bh = Some(inode_bh_line(FIRST_FILE_INO + me as u64));
                let mut calls = 0u64;
                while s.clock(me) < HORIZON_NS {
                    s.work(me, half);
                    handle_start(&s, me, each);
                    mark_inode_dirty(&s, me, bh);
                    handle_stop(&s, me, each);
                    s.work(me, half);
                    calls += 1;
                }
                Ok(calls as f64 * 1e9 / s.clock(me) as f64)
            }
        })
        .collect();
    let rates: Vec<f64> = super::on_cpus(&s, bodies).unwrap();
    rates.iter().sum::<f64>() / n as f64
}

/// The model's shared lines leave its CPUs more of one CPU's rate than the kernel's
/// processes keep on the rest of a call, at every count: at 2 the model adds 190 ns a call
/// (757 → 946) where the kernel adds 361 (757 → 1,118), and from 8 on the kernel's rest of a
/// call stops scaling (3.2-3.5 M calls a second in all at 8 and 16 processes) where the
/// model's lines let it run on. Known misses, recorded as the model's share of one CPU's rate
/// over the kernel's: red if one moves by a tenth, or comes within ±15 % (then the record
/// goes).
#[test]
fn the_rest_of_a_call_scales_better_in_the_model_than_on_the_16_core_kernel() {
    let one = kernel("rest", 1);
    let call_ns = 1e9 / one;
    let m1 = model(1, call_ns, false);
    assert!((m1 / one - 1.0).abs() < 0.01, "{m1} against {one}");
    for (n, recorded) in [(2, 1.18), (4, 1.43), (8, 2.03), (16, 2.28)] {
        let r = (model(n as usize, call_ns, false) / m1) / (kernel("rest", n) / one);
        assert!(
            (r / recorded - 1.0).abs() < 0.1 && (r - 1.0).abs() > 0.15,
            "{n} CPUs: model over kernel {r:.3} (recorded {recorded})"
        );
    }
}

/// With each of the handle's five counter writes a write of its own (`jbd2_rmw=each`, as
/// jbd2's source makes them), the model's rest of a call stops scaling where the kernel's
/// does: 8 and 16 CPUs within ±10 % of the kernel's share of one process's rate (the
/// transaction's line then passes 5 writes a handle at 63 ns each: 3.2 M handles a second,
/// the kernel's 3.2-3.5 M). At 4 it runs below the kernel (0.76 of its share) and at 2
/// above (1.18, one CPU rarely takes the line between the other's back-to-back writes):
/// recorded, red if either moves by a tenth. One CPU costs the same either way.
#[test]
fn with_each_journal_write_apart_the_rest_of_a_call_stops_where_the_kernels_does() {
    let one = kernel("rest", 1);
    let call_ns = 1e9 / one;
    let m1 = model(1, call_ns, true);
    assert!((m1 / model(1, call_ns, false) - 1.0).abs() < 1e-9);
    let share = |n: u64| (model(n as usize, call_ns, true) / m1) / (kernel("rest", n) / one);
    for n in [8, 16] {
        let r = share(n);
        assert!((r - 1.0).abs() <= 0.1, "{n} CPUs: model over kernel {r:.3}");
    }
    for (n, recorded) in [(2, 1.18), (4, 0.76)] {
        let r = share(n);
        assert!(
            (r / recorded - 1.0).abs() < 0.1,
            "{n} CPUs: model over kernel {r:.3} (recorded {recorded})"
        );
    }
}
