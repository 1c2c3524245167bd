//! Seed 003's pieces: device reads in virtual time, one read per bitmap, the switch's
//! effect, determinism (each test well under a second of host time).

use std::sync::Arc;
use std::time::{Duration, Instant};

use mballoc::{Allocator, MemSource, Policy, Request};

use super::cost::Costs;
use super::fallocate3::{
    filesystem, published, run_point, time_operations, Config, Row, FILE_BLOCKS,
};
use super::io::Device;
use super::sched::Sched;
use crate::bench::threads::Volume;

/// Runs `body(me)` on each virtual CPU of `s`, its hook installed.
fn on_vcpus(s: &Arc<Sched>, body: impl Fn(usize)) {
    let bodies = (0..s.cpus())
        .map(|me| {
            let body = &body;
            move || {
                body(me);
                Ok(())
            }
        })
        .collect();
    super::on_cpus(s, bodies).unwrap();
}

/// A cold 1 GiB filesystem (8 groups) whose bitmap reads each take `read`.
fn cold(read: Duration) -> (Volume, Allocator) {
    let vol = Volume::new(1 << 30).unwrap();
    let dev = MemSource::new(vol.geo, vol.used())
        .unwrap()
        .with_load_cost(read);
    let a = Allocator::builder(vol.geo)
        .source(Box::new(dev))
        .cpus(2)
        .tunables(Policy::Linux618.tunables(&vol.geo, 2))
        .lazy(true)
        .prefetch_threads(0)
        .build()
        .unwrap();
    (vol, a)
}

/// A read of 10 virtual seconds, through the library's seam: the reader's clock passes
/// 10 s, the host waits nothing like it (without the seam the source sleeps 10 s per read).
#[test]
fn io_wait_advances_virtual_time_not_host_time() {
    let read = Duration::from_secs(10);
    let (_vol, a) = cold(read);
    let s = Sched::with_device(1, Costs::flat(10, 80, 80, 0), Device::new(1), 0);
    let t0 = Instant::now();
    on_vcpus(&s, |_| {
        a.allocate(&Request::new(12, 0, 8).with_goal(3 * 32768))
            .unwrap();
    });
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let io = s.io_stats();
    assert!(io.reads >= 1, "{io:?}");
    assert!(s.clock(0) >= 10_000_000_000, "{}", s.clock(0));
    assert!(io.wait_ns >= 10_000_000_000, "{io:?}");
}

/// While one CPU waits for a read, the others run: their clocks are not held back.
#[test]
fn others_run_while_a_cpu_waits_for_a_read() {
    let s = Sched::with_device(2, Costs::flat(10, 80, 80, 0), Device::new(1), 0);
    on_vcpus(&s, |me| {
        if me == 0 {
            s.io(0, (1, 7), 1_000_000, true);
        } else {
            for _ in 0..10 {
                s.work(1, 1_000);
            }
        }
    });
    let c = s.clocks();
    assert!(c[0] >= 1_000_000 && c[1] < 20_000, "{c:?}");
}

/// Two CPUs needing the same bitmap at the same time: one device read, both wake when it
/// ends (`ext4_wait_block_bitmap`); a different bitmap is a second read, queued behind the
/// first on a device of depth 1.
#[test]
fn two_vcpus_needing_the_same_bitmap_issue_one_read() {
    let s = Sched::with_device(3, Costs::flat(0, 80, 80, 0), Device::new(1), 0);
    on_vcpus(&s, |me| {
        let block = if me == 2 { 8 } else { 7 };
        s.io(me, (1, block), 1_000_000, true);
    });
    let io = s.io_stats();
    assert_eq!((io.reads, io.shared_waits), (2, 1), "{io:?}");
    let c = s.clocks();
    assert_eq!(
        (c[0], c[1], c[2]),
        (1_000_000, 1_000_000, 2_000_000),
        "{c:?}"
    );
}

/// The same through the allocator: two CPUs allocating in the same cold group read each
/// bitmap once (the second waits for the first's load behind the group's lock).
#[test]
fn two_vcpus_loading_one_group_read_it_once() {
    let (_vol, a) = cold(Duration::from_micros(100));
    let s = Sched::with_device(2, Costs::flat(10, 80, 80, 0), Device::new(4), 0);
    on_vcpus(&s, |me| {
        a.allocate(&Request::new(12 + me as u64, 0, 8).with_goal(3 * 32768 + 100))
            .unwrap();
    });
    let io = s.io_stats();
    assert_eq!(io.reads, a.stats().bitmap_loads, "{io:?}");
    assert!(io.reads >= 1);
}

/// A small seed 003 configuration: 4 GiB filled as 802g-68, 4 CPUs, few operations.
fn small(patched: bool) -> Config {
    let fs = filesystem("802g-68").unwrap();
    Config {
        bytes: 4 << 30,
        mount_ops: 1,
        ops: 8,
        ..Config::new(fs, patched)
    }
}

/// The switch changes the path: linux-6.18's walk writes every group's read mark (a line
/// moved whenever another CPU wrote it last), the seed's tests it first.
#[test]
fn the_switch_changes_the_prefetch_walk() {
    let base = run_point(&small(false), 4).unwrap();
    let patched = run_point(&small(true), 4).unwrap();
    assert!(
        base.line_transfers_per_op > patched.line_transfers_per_op * 1.2,
        "base {} patched {}",
        base.line_transfers_per_op,
        patched.line_transfers_per_op
    );
}

/// With every bitmap in memory from the start nothing is read from the device, at the mount
/// or after (a cold mount reads), and the switch still changes the walk: the prefetch walk's
/// read marks are written whether or not a read is needed.
#[test]
fn cached_bitmaps_read_nothing_and_keep_the_seeds_mechanism() {
    let cached = |patched| Config {
        cached_bitmaps: true,
        ..small(patched)
    };
    let cold = run_point(&small(false), 2).unwrap();
    assert!(cold.mount_io.reads > 0, "{:?}", cold.mount_io);
    let base = run_point(&cached(false), 4).unwrap();
    let patched = run_point(&cached(true), 4).unwrap();
    for p in [&base, &patched] {
        assert_eq!((p.mount_io.reads, p.io.reads, p.bitmap_loads), (0, 0, 0));
    }
    assert!(
        base.line_transfers_per_op > patched.line_transfers_per_op * 1.2,
        "base {} patched {}",
        base.line_transfers_per_op,
        patched.line_transfers_per_op
    );
}

/// The plain timing counts the same points for the same operations every time (the count
/// is the model's unit of work; only the ns are host-dependent).
#[test]
fn an_operations_points_are_counted_the_same_every_time() {
    let one = time_operations(&small(false), 2, 1).unwrap();
    let two = time_operations(&small(false), 2, 1).unwrap();
    assert!(one.points_per_op > 1_000.0, "{} points", one.points_per_op);
    assert_eq!(one.points_per_op, two.points_per_op);
    assert!(one.ns_per_point > 0.0);
}

/// A truncate's frees wait for jbd2's commit, every 5 s of virtual time: a point's few
/// operations (milliseconds) commit only as each task ends, so no task reuses the blocks it
/// just freed (red when the operation commits at its truncate: 11 commits).
#[test]
fn frees_wait_for_the_journal_commit() {
    let p = run_point(&small(false), 2).unwrap();
    assert_eq!(p.commits, 2, "{} commits by 2 tasks", p.commits);
}

/// Counting commit cycles: on a small full filesystem the tasks use the free space up within
/// jbd2's interval, an ENOSPC forces each commit, and the point counts the operations between
/// the first commit and the one `commit_cycles` later: none of the warm-up cycle, and no
/// more per cycle than the free space holds (red when the window also counts the warm-up
/// cycle: 51 operations where 2 × 18.6 fit).
#[test]
fn a_point_can_count_whole_commit_cycles() {
    let cfg = Config {
        commit_cycles: 2,
        ..small(false)
    };
    let p = run_point(&cfg, 2).unwrap();
    assert_eq!(p.journal_commits, 3, "{p:?}");
    assert!(p.forced_commits >= 2, "{p:?}");
    // 4 GiB at 68 %: about 335,000 free blocks, 18 files of 18,023; each task has one
    // operation in flight when the space runs out.
    let free_ops = (cfg.bytes / 4096) as f64 * (1.0 - cfg.fs.used) / f64::from(FILE_BLOCKS);
    assert!(p.counted_ops > 0, "{p:?}");
    assert!(
        p.counted_ops as f64 <= 2.0 * (free_ops + 2.0),
        "{} operations in 2 cycles, {free_ops:.1} fit",
        p.counted_ops
    );
    let rate = p.counted_ops as f64 * 1e9 / p.window_ns as f64;
    assert!((p.ops_per_s - rate).abs() < 1e-6 * rate, "{p:?}");
    // With a commit interval shorter than the time the free space lasts, the timer ends
    // every cycle: none forced, each cycle at least the interval long.
    let timed = Config {
        commit_interval_ns: 2_000_000,
        slack_ns: 10_000,
        ..cfg
    };
    let p = run_point(&timed, 4).unwrap();
    assert_eq!((p.journal_commits, p.forced_commits), (3, 0), "{p:?}");
    assert!(p.counted_ops > 0 && p.window_ns >= 4_000_000, "{p:?}");
}

#[test]
fn the_same_seed003_point_gives_the_same_bytes() {
    let one = serde_json::to_string(&run_point(&small(false), 3).unwrap()).unwrap();
    let two = serde_json::to_string(&run_point(&small(false), 3).unwrap()).unwrap();
    assert_eq!(one, two);
}

/// The verdict: the published sign within ×2 passes, the opposite sign fails; on the
/// neutral filesystem only |change| ≤ 5 % passes.
#[test]
fn seed003_rows_are_judged_by_sign_size_and_neutral_band() {
    let p = published();
    assert_eq!(p.len(), 72);
    let kp = p
        .iter()
        .find(|r| r.fs == "802g-68" && r.tasks == 8)
        .unwrap();
    let ok = Row::judge(*kp, false, 1000.0, 1000.0 * (1.0 + kp.change_pct() / 100.0));
    assert!(ok.same_sign && ok.within_2x && ok.within_25pct);
    let bad = Row::judge(*kp, false, 1000.0, 900.0);
    assert!(!bad.same_sign && !bad.within_2x);
    let amd = p.iter().find(|r| r.fs == "15t-6" && r.tasks == 8).unwrap();
    assert!(Row::judge(*amd, true, 1000.0, 1040.0).within_2x);
    assert!(!Row::judge(*amd, true, 1000.0, 1060.0).within_2x);
}

/// A measurement stored in docs/measurements.
fn stored(name: &str) -> serde_json::Value {
    let path = format!(
        "{}/../../docs/measurements/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The fallocate3 costs are the stored kernel measurement's figures, not numbers of their
/// own: red when either is edited without the other.
#[test]
fn fallocate3_costs_are_the_stored_kernel_measurement() {
    use super::cost::{KERNEL_F3_ALLOC_NS_PER_OP, KERNEL_F3_OUTSIDE_NS_PER_OP};
    let j = stored("kernel-fallocate3.json");
    let t = &j["traced"];
    let alloc = t["allocator_us_per_op"].as_f64().unwrap() * 1e3;
    let outside = (t["op_us"].as_f64().unwrap() - t["allocator_us_per_op"].as_f64().unwrap()) * 1e3;
    assert!(
        (alloc - KERNEL_F3_ALLOC_NS_PER_OP).abs() < 1.0,
        "{alloc} against {KERNEL_F3_ALLOC_NS_PER_OP}"
    );
    assert!(
        (outside - KERNEL_F3_OUTSIDE_NS_PER_OP).abs() < 1.0,
        "{outside} against {KERNEL_F3_OUTSIDE_NS_PER_OP}"
    );
    assert_eq!(j["size_gib"], 802);
    assert_eq!(j["traced"]["lost_events"], 0);
    // The cadence the points were counted at: the kernel's warm-up and 5 s of its rate.
    let median = j["median_ops_per_s"].as_f64().unwrap();
    let every = f64::from(super::fallocate3::KERNEL_CADENCE.commit_every);
    assert!(
        (every - 5.0 * median).abs() <= 5.0,
        "{every} against 5 s × {median}"
    );
    let mut warm: Vec<u64> = j["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["warmup_ops"].as_u64().unwrap())
        .collect();
    warm.sort_unstable();
    assert_eq!(
        u64::from(super::fallocate3::KERNEL_CADENCE.warm),
        warm[warm.len() / 2]
    );
}

/// The prefetch walk's prices are the stored measurements': the kernel's walk share on the
/// 802 GiB image, and seed 003's step over 6.18's from the kernel-shaped walk built with the
/// kernel's return thunk; on `xeon16` that walk's plain build there. And that walk
/// reproduces the kernel's own step: its 6.18 figure within ±15 % of the kernel's walk time
/// over the model's steps (red if the program stops resembling the kernel's walk, or the
/// stored step count drifts from the model's).
#[test]
fn the_walks_prices_are_the_stored_measurements() {
    use super::cost::{
        Costs, Machine, F3_WALK_STEPS_PER_OP, KERNEL_F3_ALLOC_NS_PER_OP, KERNEL_F3_WALK_SHARE,
        WALK_TEST_OVER_SET, XEON16_F3_ALLOC_NS_PER_OP, XEON16_F3_POINTS_PER_OP,
        XEON16_F3_WALK_STEPS_PER_OP, XEON16_WALK_SET_NS, XEON16_WALK_TEST_OVER_SET,
    };
    let k = stored("kernel-prefetch-walk.json");
    let img = &k["images"][0];
    assert_eq!(
        img["size_bytes"], 861_140_942_848u64,
        "the 802 GiB image first"
    );
    let share = img["median"]["walk_over_alloc"].as_f64().unwrap();
    assert!(
        (share - KERNEL_F3_WALK_SHARE).abs() < 5e-4,
        "{share} against {KERNEL_F3_WALK_SHARE}"
    );
    let m = stored("prefetch-walk-cost.json");
    let thunk = &m["builds"]["return_thunk"]["median"];
    let ratio = thunk["seed003_over_618"].as_f64().unwrap();
    assert!(
        (ratio - WALK_TEST_OVER_SET).abs() < 5e-4,
        "{ratio} against {WALK_TEST_OVER_SET}"
    );
    let kernel_step = KERNEL_F3_WALK_SHARE * KERNEL_F3_ALLOC_NS_PER_OP / F3_WALK_STEPS_PER_OP;
    let mimic = thunk["ns_618"].as_f64().unwrap();
    assert!(
        (mimic / kernel_step - 1.0).abs() < 0.15,
        "the kernel-shaped walk's 6.18 step {mimic} ns against the kernel's {kernel_step:.1}"
    );
    let c = Costs::fallocate3(Machine::Local);
    assert_eq!(c.walk_set_ns, kernel_step.round() as u64);
    assert_eq!(
        c.walk_test_ns,
        (kernel_step * WALK_TEST_OVER_SET).round() as u64
    );
    // `xeon16`: the mimic's plain build there (its kernel runs no return thunk), its
    // points the rest of its kernel's allocator time.
    let x16 = stored("prefetch-walk-cost-xeon16.json");
    assert_eq!(x16["spec_rstack_overflow"], "Not affected");
    let plain = &x16["builds"]["plain"]["median"];
    let (set, test) = (
        plain["ns_618"].as_f64().unwrap(),
        plain["ns_seed003"].as_f64().unwrap(),
    );
    assert!((set - XEON16_WALK_SET_NS).abs() < 1e-9, "{set}");
    assert!(
        (test / set - XEON16_WALK_TEST_OVER_SET).abs() < 1e-9,
        "{test}"
    );
    let x = Costs::fallocate3(Machine::Xeon16);
    assert_eq!(x.walk_set_ns, set.round() as u64);
    assert_eq!(x.walk_test_ns, test.round() as u64);
    let whole = x.point_ns as f64 * (XEON16_F3_POINTS_PER_OP - XEON16_F3_WALK_STEPS_PER_OP)
        + set * XEON16_F3_WALK_STEPS_PER_OP;
    assert!(
        (whole / XEON16_F3_ALLOC_NS_PER_OP - 1.0).abs() < 0.01,
        "{whole}"
    );
    // Its fallocate2 calls keep a step a point (their walk was not sampled there).
    let f2 = Costs::new(Machine::Xeon16, true);
    assert_eq!(f2.walk_set_ns, f2.point_ns);
}

/// `walk_thunk=0` prices the walk's steps from the stored mimic's two builds (plain over
/// thunked for a 6.18 step, seed 003's over 6.18's in the plain build), leaves every other
/// cost alone, and makes one task's operation cheaper on both sides by what the steps no
/// longer cost; where it has no meaning (fallocate2's measured call, `xeon16`) it is refused.
#[test]
fn a_walk_without_the_return_thunk_is_the_mimics_plain_build() {
    use super::cost::{Costs, Machine, WALK_PLAIN_OVER_THUNK, WALK_TEST_OVER_SET_PLAIN};
    let m = stored("prefetch-walk-cost.json");
    let ns = |build: &str, k: &str| m["builds"][build]["median"][k].as_f64().unwrap();
    let plain = ns("plain", "ns_618") / ns("return_thunk", "ns_618");
    assert!((plain - WALK_PLAIN_OVER_THUNK).abs() < 1e-9, "{plain}");
    let test = ns("plain", "ns_seed003") / ns("plain", "ns_618");
    assert!((test - WALK_TEST_OVER_SET_PLAIN).abs() < 1e-9, "{test}");

    let c = Costs::fallocate3(Machine::Local);
    let free = c.clone().without_walk_thunk();
    let set = c.walk_set_ns as f64 * WALK_PLAIN_OVER_THUNK;
    assert_eq!(free.walk_set_ns, set.round() as u64);
    assert_eq!(
        free.walk_test_ns,
        (set * WALK_TEST_OVER_SET_PLAIN).round() as u64
    );
    assert!(free.walk_test_ns < free.walk_set_ns && free.walk_set_ns < c.walk_test_ns);
    assert_eq!(
        (free.point_ns, free.outside_ns, free.transfer_ns),
        (c.point_ns, c.outside_ns, c.transfer_ns)
    );

    let one = |patched, thunk| {
        let cfg = Config {
            cached_bitmaps: true,
            walk_thunk: thunk,
            ..small(patched)
        };
        run_point(&cfg, 1).unwrap()
    };
    for patched in [false, true] {
        let (with, without) = (one(patched, true), one(patched, false));
        assert!(
            without.ops_per_s > with.ops_per_s,
            "patched {patched}: {} against {}",
            without.ops_per_s,
            with.ops_per_s
        );
        assert_eq!(without.groups_scanned_per_op, with.groups_scanned_per_op);
    }
    let xeon = Config {
        walk_thunk: false,
        machine: Machine::Xeon16,
        ..small(false)
    };
    let err = run_point(&xeon, 1).unwrap_err().to_string();
    assert!(err.contains("walk_thunk=0"), "{err}");
}

/// The counts the fallocate3 costs divide by are the model's own on the stored layout of the
/// kernel's image, at the kernel's cadence: points and walk steps per operation (red when a
/// library change moves them and the costs are not recounted: `mballoc bench threads
/// --calibrate --seed003-image IMAGE`).
#[test]
fn the_fallocate3_counts_are_the_models_on_the_stored_layout() {
    use super::cost::{
        F3_POINTS_PER_OP, F3_WALK_STEPS_PER_OP, XEON16_F3_POINTS_PER_OP,
        XEON16_F3_WALK_STEPS_PER_OP,
    };
    use super::fallocate3::{
        time_operations_on_image, IMAGE_COUNTED_OPS, KERNEL_CADENCE, XEON16_CADENCE,
    };
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/measurements/aged-802g-68.layout.gz"
    );
    let count = |patched| {
        let path = std::path::Path::new(path);
        time_operations_on_image(path, patched, KERNEL_CADENCE, IMAGE_COUNTED_OPS, 1).unwrap()
    };
    let o = count(false);
    let near = |a: f64, b: f64| (a / b - 1.0).abs() < 0.005;
    assert!(near(o.points_per_op, F3_POINTS_PER_OP), "{o:?}");
    assert!(near(o.walk_sets_per_op, F3_WALK_STEPS_PER_OP), "{o:?}");
    assert_eq!(o.walk_tests_per_op, 0.0);
    // Seed 003's walk tests where 6.18's sets, group for group.
    let p = count(true);
    assert!(near(p.walk_tests_per_op, o.walk_sets_per_op), "{p:?}");
    // The 16-core machine's cadence, over its 5 s window.
    let x = time_operations_on_image(
        std::path::Path::new(path),
        false,
        XEON16_CADENCE,
        XEON16_CADENCE.commit_every,
        1,
    )
    .unwrap();
    assert!(near(x.points_per_op, XEON16_F3_POINTS_PER_OP), "{x:?}");
    assert!(
        near(x.walk_sets_per_op, XEON16_F3_WALK_STEPS_PER_OP),
        "{x:?}"
    );
}

/// fallocate2's walk steps are priced as measured: the stored share (the median of the
/// four configurations' medians), the model's steps a call recounted, and the local costs
/// made of them (red when the measurement, the count or the split is edited alone).
#[test]
fn fallocate2s_walk_is_priced_as_the_kernels() {
    use super::cost::{
        Costs, Machine, Seg, F2_WALK_STEPS_PER_CALL, KERNEL_CALL_NS, KERNEL_F2_WALK_SHARE,
        LOCAL_CSUM_4K_NS, POINTS_PER_CALL,
    };
    let j = stored("kernel-prefetch-walk-fallocate2.json");
    let mut kernel: Vec<f64> = j["configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["median_walk_over_alloc"].as_f64().unwrap())
        .collect();
    assert_eq!(kernel.len(), 4);
    kernel.sort_by(f64::total_cmp);
    let median = (kernel[1] + kernel[2]) / 2.0;
    assert!((median - KERNEL_F2_WALK_SHARE).abs() < 5e-4, "{median}");
    let c = super::calibrate(20_000).unwrap();
    let at = |s: Seg| c.per_call[Seg::all().iter().position(|&x| x == s).unwrap()];
    let points: f64 = c.per_call.iter().sum();
    assert!((points / POINTS_PER_CALL - 1.0).abs() < 0.01, "{points}");
    let steps = at(Seg::WalkSet) + at(Seg::WalkTest);
    assert!(
        (steps / F2_WALK_STEPS_PER_CALL - 1.0).abs() < 0.01,
        "{steps}"
    );
    let local = Costs::new(Machine::Local, false);
    let walk = KERNEL_F2_WALK_SHARE * KERNEL_CALL_NS;
    assert_eq!(
        local.walk_set_ns,
        (walk / F2_WALK_STEPS_PER_CALL).round() as u64
    );
    let rest = (KERNEL_CALL_NS - LOCAL_CSUM_4K_NS - walk) / (POINTS_PER_CALL - steps);
    assert!((local.point_ns as f64 - rest).abs() <= 1.0, "{local:?}");
    // One call still costs the kernel's measured time.
    let whole = local.point_ns as f64 * (POINTS_PER_CALL - F2_WALK_STEPS_PER_CALL)
        + local.walk_set_ns as f64 * F2_WALK_STEPS_PER_CALL
        + local.csum_4k_ns;
    assert!((whole / KERNEL_CALL_NS - 1.0).abs() < 0.01, "{whole}");
}
