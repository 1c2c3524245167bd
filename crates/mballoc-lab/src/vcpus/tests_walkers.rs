//! The model's price for a prefetch walk that several CPUs run at once over the same groups,
//! against the hardware's: the kernel-shaped walk (`scripts/prefetch_walk_cost.c`) run by 1
//! to 16 threads on the 16-core machine and by 1 and 2 here, every thread over the same 6,417
//! groups from its own start (docs/measurements/walk-walkers.json). That is the mechanism the
//! model gives seed 003's many-task gain: linux-6.18's walk takes every group's line
//! exclusive, so from two walkers on each line comes from the walker before.
//!
//! The model's CPUs here do only that: each step is a walk step's work and a write of the
//! group's word (`Hook::walk_step` with the RMW), on `xeon16`'s and this machine's fallocate3
//! costs. What a step costs over one walker's is the figure compared.

use std::sync::Arc;

use mballoc::vcpu::Access;
use serde_json::Value;

use super::cost::{Costs, Machine, Seg};
use super::sched::Sched;

const GROUPS: usize = 6417;
/// Steps each CPU walks: several laps, so every line has been written by every walker.
const STEPS: usize = 4 * GROUPS;
/// Far from any line the library or the lab names (those start at `KERNEL_LINES`).
const BASE: usize = 1 << 24;

fn measurement() -> Value {
    super::tests16::measurement("walk-walkers.json")
}

/// The stored median ns a 6.18 step of `walkers` threads, on `machine` (`xeon16`) or this
/// machine's `build` (`local`).
fn measured(at: &[&str], walkers: u64) -> f64 {
    let mut v = &measurement();
    for k in at {
        v = &v[*k];
    }
    v.as_array()
        .unwrap()
        .iter()
        .find(|w| w["walkers"] == walkers)
        .unwrap()["median_ns_618"]
        .as_f64()
        .unwrap()
}

/// A fixed shuffle of the groups (the walk visits groups in order; their words' lines are
/// where the slab put them, which the model does not care about: one line per word).
fn order() -> Vec<usize> {
    let mut v: Vec<usize> = (0..GROUPS).collect();
    let mut x = 1u64;
    for i in (1..GROUPS).rev() {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.swap(i, (x >> 33) as usize % (i + 1));
    }
    v
}

/// The model's ns a step for `n` CPUs walking together, the mean over the CPUs, in the
/// steady state: counted after each CPU's first lap, when every line has a last writer.
fn model_step_ns(costs: Costs, n: usize) -> f64 {
    let s = Sched::new(n, costs);
    s.walk_lines(BASE..BASE + GROUPS);
    let order = Arc::new(order());
    let bodies = (0..n)
        .map(|me| {
            let (s, order) = (Arc::clone(&s), Arc::clone(&order));
            move || {
                let mut i = me * GROUPS / n;
                let mut lap = 0;
                for step in 0..STEPS {
                    if step == GROUPS {
                        lap = s.clock(me);
                    }
                    s.touch(me, BASE + order[i], Access::Write, Some(Seg::WalkSet));
                    i = (i + 1) % GROUPS;
                }
                Ok(s.clock(me) - lap)
            }
        })
        .collect();
    let counted: Vec<u64> = super::on_cpus(&s, bodies).unwrap();
    counted.iter().sum::<u64>() as f64 / (n * (STEPS - GROUPS)) as f64
}

/// What a step costs at `n` walkers over one walker's, ns: the model's and the measured.
fn extra(costs: &Costs, at: &[&str], n: usize) -> (f64, f64) {
    let one = model_step_ns(costs.clone(), 1);
    assert!(
        (one - costs.walk_set_ns as f64).abs() < 1e-9,
        "one walker pays its steps alone"
    );
    (
        model_step_ns(costs.clone(), n) - one,
        measured(at, n as u64) - measured(at, 1),
    )
}

/// The 16-core machine: each step of a second walker costs 12 ns more (a line the walker
/// before wrote, fetched while the step's other work runs), rising to 20 ns at 16. The
/// model's default charges a whole transfer (63 ns) on every such line: a known miss, 5.2×
/// at 2 walkers and 3.2× at 16, which fails if it moves by a tenth or comes within ±25 %.
/// `line_overlap` charges the overlapped write of `scripts/line_reads.c` (12 ns), which
/// holds 2 and 4 walkers within ±25 % and stays below from 8 on (0.60 at 16, recorded).
#[test]
fn concurrent_walks_cost_the_16_core_machine_less_than_a_transfer_a_step() {
    let at = ["xeon16", "walkers"];
    let costs = Costs::fallocate3(Machine::Xeon16);
    let overlapped = costs.clone().with_line_overlap(true);
    let known = |what: &str, model: f64, real: f64, recorded: f64| {
        let r = model / real;
        assert!(
            (r / recorded - 1.0).abs() < 0.1 && (r - 1.0).abs() > 0.25,
            "{what}: {model:.1} ns against {real:.1}, {r:.2} (recorded {recorded})"
        );
    };
    let (m2, k2) = extra(&costs, &at, 2);
    let (m16, k16) = extra(&costs, &at, 16);
    known("whole transfer, 2 walkers", m2, k2, 5.22);
    known("whole transfer, 16 walkers", m16, k16, 3.17);
    for n in [2, 4] {
        let (m, k) = extra(&overlapped, &at, n);
        assert!(
            (m / k - 1.0).abs() < 0.25,
            "line_overlap, {n} walkers: {m:.1} ns against {k:.1}"
        );
    }
    let (o16, k16) = extra(&overlapped, &at, 16);
    known("line_overlap, 16 walkers", o16, k16, 0.60);
}

/// This machine (a Zen 4, as the seed's AMD 9654), the walk built with its kernel's return
/// thunk: a second walker adds 2.0 ns a step, a twentieth of a step. The model charges this
/// machine's transfer (29 ns) or, with `line_overlap`, 15 ns: known misses of 14.2× and
/// 7.35×. On the seed's servers' costs (`--machine server`) the charge is 80 ns, 39×.
#[test]
fn concurrent_walks_cost_this_machine_almost_nothing_more() {
    let at = ["local", "return_thunk"];
    let known = |what: &str, costs: Costs, recorded: f64| {
        let (m, k) = extra(&costs, &at, 2);
        let r = m / k;
        assert!(
            (r / recorded - 1.0).abs() < 0.1,
            "{what}: {m:.1} ns against {k:.1}, {r:.2} (recorded {recorded})"
        );
    };
    let costs = Costs::fallocate3(Machine::Local);
    known("whole transfer", costs.clone(), 14.2);
    known("line_overlap", costs.with_line_overlap(true), 7.35);
    let (m, k) = extra(&Costs::fallocate3(Machine::Server), &at, 2);
    assert!(m / k > 25.0, "server: {m:.1} ns against {k:.1}");
}

/// Seed 003's step does not write: walkers add almost nothing to it on either machine
/// (at most 3.3 ns on the 16-core machine, 0.2 here), and the model charges nothing.
#[test]
fn a_walk_that_tests_first_shares_its_lines() {
    let m = measurement();
    let seed003 = |v: &Value, n: u64| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|w| w["walkers"] == n)
            .unwrap()["median_ns_seed003"]
            .as_f64()
            .unwrap()
    };
    let x = &m["xeon16"]["walkers"];
    for n in [2, 4, 8, 12, 16] {
        let more = seed003(x, n) - seed003(x, 1);
        assert!((0.0..4.0).contains(&more), "{n} walkers: +{more:.2} ns");
    }
    let l = &m["local"]["return_thunk"];
    assert!((seed003(l, 2) - seed003(l, 1)).abs() < 1.0);
    // The model: a test that finds the line shared costs the step alone.
    let costs = Costs::fallocate3(Machine::Xeon16);
    let s = Sched::new(2, costs.clone());
    s.walk_lines(BASE..BASE + GROUPS);
    let bodies = (0..2)
        .map(|me| {
            let s = Arc::clone(&s);
            move || {
                for i in 0..GROUPS {
                    s.touch(me, BASE + i, Access::Load, Some(Seg::WalkTest));
                }
                Ok(())
            }
        })
        .collect();
    super::on_cpus(&s, bodies).unwrap();
    let per_step = s.clocks()[1] as f64 / GROUPS as f64;
    assert!(
        (per_step - costs.walk_test_ns as f64).abs() < 1e-9,
        "{per_step}"
    );
}
