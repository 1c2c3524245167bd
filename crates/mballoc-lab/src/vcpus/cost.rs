//! What work and interactions cost in virtual time. Every figure is a measurement (this
//! machine, or a published one), never chosen to match the seeds' tables; docs/vcpus/design.md
//! ("Costs") has the same table with its commands.
//!
//! | cost | value | source |
//! |---|---|---|
//! | allocator work between two points | [`Costs::point_ns`] | this machine: `mballoc bench vcpus --calibrate` times the real allocator between its synchronisation points, 1 CPU; scaled so one call costs the kernel's measured `ext4_mb_new_blocks` time |
//! | linux-6.18's prefetch walk in a fallocate2 call | 12.2 % of the allocator time (36 ns for each of the model's 15.0 steps a call; the other points 100 ns) | this machine, `scripts/kernel_prefetch_walk.py --fallocate2 4 --fallocate2 64 --scan 0 --scan 1 --reps 3`, perf samples (docs/measurements/kernel-prefetch-walk-fallocate2.json) |
//! | kernel `ext4_mb_new_blocks`, 1 thread | 4,420 ns | this machine, `scripts/kernel_alloc_time.py --reps 3` (docs/performance.md) |
//! | whole fallocate2 call, 1 process | 1e9 / 127,324 ns (`mb_optimize_scan=0`), 1e9 / 119,170 ns (=1) | this machine, same hour as the line above (docs/performance.md) |
//! | seed 003's fallocate3: kernel time inside `ext4_mb_new_blocks` per operation, and outside it | 1,595,928 ns, 59,779 ns | this machine, `scripts/kernel_fallocate3.py --fill 1.0 --reps 3 --seconds 10 --trace 10` on an aged 802 GiB image (docs/measurements/kernel-fallocate3.json) |
//! | points per fallocate3 operation on that image | 50,777, of them 15,378 prefetch-walk steps | counted by `mballoc bench threads --calibrate --seed003-image IMAGE` at the kernel's commit cadence |
//! | linux-6.18's prefetch walk in that operation's allocator time | 41.6 % (43.2 ns a step; the rest 26.3 ns a point) | this machine, `scripts/kernel_prefetch_walk.py --reps 3`: perf cpu-clock samples with `ext4_mb_prefetch` on the stack over those with `ext4_mb_new_blocks` (docs/measurements/kernel-prefetch-walk.json) |
//! | seed 003's walk step over 6.18's | 0.497 | this machine, `scripts/prefetch_walk_cost.py`: the walk on kernel-shaped data with the kernel's return thunk (38.75 ns a 6.18 step, the kernel's 43.2 within 11 %); 0.529 without the thunk (docs/measurements/prefetch-walk-cost.json) |
//! | `xeon16`: a fallocate3 walk step, linux-6.18's and seed 003's | 16.94 ns, 5.23 ns | that machine: `scripts/prefetch_walk_cost.py` plain build (its kernel runs no return thunk; docs/measurements/prefetch-walk-cost-xeon16.json); its fallocate2 steps stay points |
//! | cache-line transfer, server | 79.5 ns | AnandTech, Zen 4 core-to-core latency, cross-CCX worst case |
//! | cache-line transfer, this machine | 29 ns | `scripts/line_transfer.c` ping-pong, fastest batch of 3 × 50 (other runs under load: 320, 578, 661) |
//! | spinlock hand-off, this machine | 198 ns | `scripts/line_transfer.c` hand-off, fastest batch of 3 × 50 (others: 1,611, 2,596) |
//! | lines moved with a group's data | 3 | the lock word, `GroupState`'s counters, the bitmap words touched |
//! | lines written after the group lock at every marking | 2 | the flex group's `free_clusters` and the bitmap's buffer head (`ext4_mb_mark_context`; `Hook::marked`) |
//! | `xeon16`: each CPU's speed with N busy | 0.94, 0.90, 0.69 of one CPU's at 4, 8, 16 ([`XEON16_CEILING`]) | that machine: threads on allocators of their own, docs/measurements/kernel-fallocate2-xeon16.json |
//! | incremental checksum update (`bitmap_csum=incremental`) | 57 ns (`xeon16`), 43.8 ns (`local`, `server`: 140 × 57 / 182) | the same RFC cover letter, Ice Lake; the others in its proportion, not measured |
//! | crc32c of a 4 KiB block bitmap, under the group lock at every marking (`ext4_block_bitmap_csum_set` in `ext4_mb_mark_context`) | 140 ns (this machine; also `server`, which keeps this machine's work costs), 182 ns (`xeon16`) | this machine: `scripts/bitmap_crc32c.c`, three interleaved SSE4.2 streams as the kernel's x86 crc32c runs them, fastest of 5 batches of 200,000; Intel Xeon (Ice Lake): Baokun Li, "ext4: fast incremental CRC update" RFC cover letter (linux-ext4, 2026-05-08), full crc32c of a 4096-byte bitmap 182 ns. Taken out of the uniform point cost, so one call still costs the kernel's measured time |
//!
//! Why every segment costs the same: `--calibrate` times the allocator between its points on
//! this machine, and on a 2-vCPU VM shared with builds the figures per kind of segment spread
//! by 10× from run to run (the timer's own cost, 26-63 ns, is larger than most segments); the
//! stable part is the atomic-to-atomic segment (7.8-12.8 ns over 5 runs), 38 of a call's 44
//! points. So work is counted in points, and a point is worth the kernel's call time over the
//! model's points per call: a path with more points (a longer scan, more groups tried) costs
//! more, in the kernel's units. One kind of segment has its own price: a step of the
//! prefetch walk (`Seg::WalkSet`, `Seg::WalkTest`), measured apart on the kernel, since seed
//! 003 changes exactly that step ([`Costs::fallocate3`]).

use serde::Serialize;

use super::lock_kind::LockKind;

/// Where a segment of work ends: the synchronisation point it leads to. Work before an
/// unlock is work done under that lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Seg {
    Lock(LockKind),
    TryLock(LockKind),
    Unlock(LockKind),
    /// One group's step of the prefetch walk ending at its test-and-set of the group's read
    /// mark (linux-6.18's `ext4_mb_prefetch`; `mballoc::vcpu::Hook::walk_step`).
    WalkSet,
    /// The same step ending at a plain test of the mark (seed 003's walk).
    WalkTest,
    Atomic,
    /// From the last point of an allocator call to its return.
    CallEnd,
}

impl Seg {
    /// Every key, in the order `--calibrate` prints them.
    pub fn all() -> Vec<Seg> {
        let mut v = Vec::new();
        for k in LockKind::ALL {
            v.extend([Seg::Lock(k), Seg::TryLock(k), Seg::Unlock(k)]);
        }
        v.extend([Seg::WalkSet, Seg::WalkTest, Seg::Atomic, Seg::CallEnd]);
        v
    }
}

/// Synchronisation points per fallocate2 allocator call (linux-6.18, 1 CPU, 64 GiB), counted
/// by `mballoc bench threads --calibrate`: 46.12 atomics (8 of them the buddy folios'
/// reference counts: `ext4_mb_load_buddy` / `ext4_mb_unload_buddy` on the one group visited,
/// `ext4_mb_use_best_found` / `ext4_mb_release_context` on the group used), 2.02 group
/// try-locks and busy checks, 2.02 group unlocks, 1 group lock, 0.21 others, and the call's
/// end. A count, not a timing: it is the same on every machine.
pub const POINTS_PER_CALL: f64 = 52.4;

/// linux-6.18's prefetch walk in a fallocate2 call: of one process's perf samples with
/// `ext4_mb_new_blocks` on the stack, the share with `ext4_mb_prefetch` too; the median of
/// the four medians (4 and 64 GiB, `mb_optimize_scan` 0 and 1: 0.1225, 0.1218, 0.1254,
/// 0.1187), `scripts/kernel_prefetch_walk.py --fallocate2 4 --fallocate2 64 --scan 0 --scan
/// 1 --reps 3 --seconds 6` (docs/measurements/kernel-prefetch-walk-fallocate2.json).
pub const KERNEL_F2_WALK_SHARE: f64 = 0.1222;

/// Of [`POINTS_PER_CALL`], the prefetch walk's steps (`--calibrate`'s `WalkSet` row).
pub const F2_WALK_STEPS_PER_CALL: f64 = 15.0;

/// The kernel's `ext4_mb_new_blocks`, one thread, this machine (docs/performance.md).
pub const KERNEL_CALL_NS: f64 = 4_420.0;

/// Whole fallocate2 calls by the real kernel, one process, this machine, the same hour as
/// [`KERNEL_CALL_NS`]: ops/s with `mb_optimize_scan` 0 and 1.
pub const KERNEL_OPS_1P: [f64; 2] = [127_324.0, 119_170.0];

/// The kernel's fallocate3 on an aged 802 GiB image at 68 % use (files of 1-16 MiB until
/// full, then 32 % of them removed at random), one task, this machine, 10 s traced after 2 s
/// of warm-up: time inside `ext4_mb_new_blocks` per operation, and the rest of the operation
/// (the loop's system calls, extent tree, truncate, journal handles), ns
/// (`scripts/kernel_fallocate3.py --trace 10`, docs/measurements/kernel-fallocate3.json).
pub const KERNEL_F3_ALLOC_NS_PER_OP: f64 = 1_595_928.0;
pub const KERNEL_F3_OUTSIDE_NS_PER_OP: f64 = 59_779.0;

/// The model's synchronisation points per fallocate3 operation on that image's layout (the
/// same image, read by the lab), with the kernel's commit cadence (a commit every 3,070
/// operations: 5 s at the kernel's 614 operations a second) over 6,000 operations after the
/// kernel's 1,987 warm-up ones: `mballoc bench threads --calibrate --seed003-image IMAGE`
/// (base side). The lab scans 234.9 groups and makes 4.88 allocator calls an operation there,
/// the kernel 225.8 and 5.38. A count, the same on every machine; held to the model's own by
/// `the_fallocate3_counts_are_the_models_on_the_stored_layout`.
pub const F3_POINTS_PER_OP: f64 = 50_777.0;

/// linux-6.18's prefetch walk (`ext4_mb_prefetch`) inside that operation's allocator time:
/// of one task's CPU samples with `ext4_mb_new_blocks` on the kernel stack, the share with
/// `ext4_mb_prefetch` too (perf cpu-clock, 10 s after 2 s of warm-up, every bitmap read by the
/// mount's prefetch), on the same aged image, median of 3 (`scripts/kernel_prefetch_walk.py`,
/// docs/measurements/kernel-prefetch-walk.json). Times [`KERNEL_F3_ALLOC_NS_PER_OP`]: the
/// walk's ns per operation.
pub const KERNEL_F3_WALK_SHARE: f64 = 0.4161;

/// Of [`F3_POINTS_PER_OP`], the prefetch walk's steps (one a group of each window: the
/// "walk set" column of the same `--calibrate --seed003-image` run, base side). The kernel's
/// walk time over these is what a 6.18 step costs ([`Costs::fallocate3`]).
pub const F3_WALK_STEPS_PER_OP: f64 = 15_378.0;

/// What a seed-003 step (the group's `ext4_group_info` looked up, its mark tested) costs
/// against a 6.18 step (the descriptor and the group info looked up, the mark set with a
/// locked RMW), on kernel-shaped data: `scripts/prefetch_walk_cost.c` built with this
/// machine's kernel's return thunk ("Safe RET", which every kernel `ret` goes through here),
/// 19.25 against 38.75 ns a group, 0.497 (the 6.18 figure 10 % under the kernel's own 43 ns);
/// built without it 3.94 against 7.45 ns, 0.529: a step's returns and its locked RMW weigh
/// alike (`scripts/prefetch_walk_cost.py --runs 3`, docs/measurements/prefetch-walk-cost.json).
pub const WALK_TEST_OVER_SET: f64 = 0.497;

/// The same walk mimic built without the return thunk, against with it: a 6.18 step 7.45
/// against 38.75 ns (`scripts/prefetch_walk_cost.py --runs 3`, the "plain" and
/// "return_thunk" builds of docs/measurements/prefetch-walk-cost.json). What a step would
/// cost on a kernel whose `ret`s go straight back, as on the seed's arm64 Kunpengs, as a
/// share of this machine's kernel's step: the lab's `walk_thunk=0` ([`Costs::without_walk_thunk`]).
pub const WALK_PLAIN_OVER_THUNK: f64 = 7.45 / 38.75;

/// Seed 003's step against 6.18's in the build without the thunk: 3.94 against 7.45 ns.
pub const WALK_TEST_OVER_SET_PLAIN: f64 = 3.94 / 7.45;

/// The same fallocate3 on the same aged image (the script's fill is deterministic: 94,885
/// files made, 30,289 removed, 68.0 % in use on both machines), one task, on the 16-core
/// machine of `XEON16_*`: time inside `ext4_mb_new_blocks` per operation and the rest, ns,
/// 5 s traced after 2 s of warm-up (`scripts/kernel_fallocate3.py --fill 1.0 --tasks
/// 1,2,4,8,16 --reps 3 --warmup 2 --seconds 5 --trace 5`,
/// docs/measurements/kernel-fallocate3-xeon16.json).
pub const XEON16_F3_ALLOC_NS_PER_OP: f64 = 1_417_809.0;
pub const XEON16_F3_OUTSIDE_NS_PER_OP: f64 = 56_005.0;

/// The model's points per operation on that layout at that machine's cadence
/// (`fallocate3::XEON16_CADENCE`): `mballoc bench threads --calibrate --seed003-image IMAGE`,
/// "every 3,393 ops (xeon16)", base side (316.7 groups scanned and 5.51 allocator calls an
/// operation; the kernel's traced window 324.4 and 5.96). A count, the same on every machine;
/// held to the model's own by `the_fallocate3_counts_are_the_models_on_the_stored_layout`.
pub const XEON16_F3_POINTS_PER_OP: f64 = 65_007.0;

/// The same walk mimic on the 16-core machine, its plain build (`scripts/prefetch_walk_cost.py
/// --runs 3` there, docs/measurements/prefetch-walk-cost-xeon16.json): its kernel runs no
/// return thunk (`spec_rstack_overflow` and `retbleed` "Not affected" there), so the plain
/// build is what its kernel's walk does. A 6.18 step 16.94 ns, a seed-003 step 5.23 ns: the
/// locked RMW that seed 003 skips weighs more on that Xeon (a tight loop of them on lines of
/// its own: 11.5 ns each, `scripts/walk_lines.c`) than on this machine (3.6 ns).
pub const XEON16_WALK_SET_NS: f64 = 16.94;
pub const XEON16_WALK_TEST_OVER_SET: f64 = 5.23 / 16.94;

/// Of [`XEON16_F3_POINTS_PER_OP`], the prefetch walk's steps (the "walk set" column of the
/// same `--calibrate --seed003-image` run at that machine's cadence).
pub const XEON16_F3_WALK_STEPS_PER_OP: f64 = 19_689.0;

/// Lines another core wrote last, visited many at a time (`scripts/line_reads.c`: 2,048
/// shuffled lines, medians of 4 CPU pairs × 3 runs there, of 3 runs here;
/// docs/measurements/line-reads.json): ns a line with independent loads and with a locked OR
/// on each, against 72.6 / 117.2 ns when each load waits for the last. A core keeps about ten
/// such misses in flight.
pub const XEON16_OVERLAP_NS: (u64, u64) = (6, 12);
pub const LOCAL_OVERLAP_NS: (u64, u64) = (6, 15);

/// Published core-to-core latency (AnandTech, Zen 4 review, "up to 79.5 ns" across CCXs).
pub const SERVER_TRANSFER_NS: u64 = 80;
/// This machine: `scripts/line_transfer.c`.
pub const LOCAL_TRANSFER_NS: u64 = 29;
pub const LOCAL_HANDOFF_NS: u64 = 198;

/// A 16-core machine measured once, end to end (docs/measurements/kernel-fallocate2-xeon16.json:
/// an Intel Xeon, family 6 model 207, 16 vCPUs of one KVM guest, kernel 6.18.44): the
/// kernel's time in `ext4_mb_new_blocks` per fallocate2 call, one process, traced (median of
/// 2 runs, `mb_optimize_scan` 0 and 1) — `scripts/kernel_fallocate2_scale.py --trace-reps 2`.
pub const XEON16_CALL_NS: [f64; 2] = [1_374.0, 1_372.0];
/// Whole fallocate2 calls per second there, one process, untraced (median of 3).
pub const XEON16_OPS_1P: [f64; 2] = [397_247.0, 395_060.0];
/// `scripts/line_transfer.c` there, the median of the CPU pairs 0-1, 0-2, 0-8 and 0-15
/// (transfer 54.7-64.4 ns, hand-off 195-245 ns).
pub const XEON16_TRANSFER_NS: u64 = 63;
pub const XEON16_HANDOFF_NS: u64 = 224;

/// The 16-core machine's own scaling with nothing shared: per-thread throughput of N threads
/// each driving an allocator of its own (`mballoc bench threads`, fallocate2 pattern, 16 GiB
/// each), over one thread's: `fallocate2_ceiling_per_thread_ratio` of
/// docs/measurements/kernel-fallocate2-xeon16.json. What a busier machine takes from every CPU
/// (clock, shared caches, the host) whatever the work shares; see [`Machine::ceiling`].
pub const XEON16_CEILING: [(u32, f64); 4] = [(2, 1.02), (4, 0.94), (8, 0.90), (16, 0.69)];

/// The kernel's crc32c of a 4 KiB block bitmap, ns: this machine (`scripts/bitmap_crc32c.c`,
/// three interleaved SSE4.2 streams, fastest of 5 batches) and an Intel Xeon (Ice Lake)
/// as published with the incremental-CRC RFC for ext4 (2026-05-08 cover letter: 182 ns for a
/// full 4096-byte bitmap).
pub const LOCAL_CSUM_4K_NS: f64 = 140.0;
pub const XEON_CSUM_4K_NS: f64 = 182.0;

/// The same RFC's incremental update of that checksum after a marking (the cover letter's
/// "flip" of a 4096-byte bitmap on the same Ice Lake Xeon): 57 ns, whatever the bitmap's
/// size. Not measured on this machine: `local` and `server` take this machine's full
/// checksum in the published proportion, 140 × 57 / 182 = 43.8 ns.
pub const XEON_CSUM_FLIP_NS: f64 = 57.0;

/// The seeds' two servers, one container, the kernel before the series seeds 000 and 001
/// belong to (its cover letter: "ext4: better scalability for ext4 block allocation" v3,
/// 2025-07-14, P1 columns; stored in docs/measurements/ext4-scalability-series.csv and held
/// to it by `the_steps_are_the_stored_tables`), fallocate2 ops/s with `mb_optimize_scan` 0
/// and 1. Their one-CPU speed, the same for both sides of every pair and every step; their
/// many-container figures stay the test.
pub const KUNPENG920_OPS_1P: [f64; 2] = [314_065.0, 316_344.0];
pub const EPYC9654X2_OPS_1P: [f64; 2] = [205_851.0, 207_373.0];

/// Which machine's interaction costs a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Machine {
    /// Published server figures (the seeds' machines).
    Server,
    /// This machine's measured figures (the 1-2 process check against the real kernel).
    Local,
    /// The 16-core machine of `XEON16_*`: its own kernel's work costs and line costs, so
    /// that the model's 1-16 CPU curve can be held against that kernel's measured one.
    Xeon16,
    /// Seed 000's and 001's Kunpeng 920: its published one-container fallocate2 rate
    /// ([`KUNPENG920_OPS_1P`]), this machine's split of a call between allocator and the rest,
    /// and `server`'s line costs (no published core-to-core figure for it was found).
    Kunpeng920,
    /// Their two AMD 9654: the same from [`EPYC9654X2_OPS_1P`], Zen 4's line costs.
    Epyc9654x2,
}

impl Machine {
    /// Every machine, in `--machine`'s order.
    pub const ALL: [Machine; 5] = [
        Machine::Server,
        Machine::Local,
        Machine::Xeon16,
        Machine::Kunpeng920,
        Machine::Epyc9654x2,
    ];

    /// The machine `--machine NAME` picks.
    pub fn from_name(name: &str) -> Option<Machine> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The name `--machine` takes for it.
    pub fn name(self) -> &'static str {
        match self {
            Machine::Server => "server",
            Machine::Local => "local",
            Machine::Xeon16 => "xeon16",
            Machine::Kunpeng920 => "kunpeng920",
            Machine::Epyc9654x2 => "epyc9654x2",
        }
    }

    /// Whether its file system's device is rotational, for what the mount sets from it
    /// ([`super::io::mount_settings`]). The seeds' servers: non-rotational, both tables say
    /// "960GB SSD". `local`: this machine's loop images ([`DeviceClass::Local`]); `server`
    /// keeps this machine's work costs and its device too. `xeon16`: its loop images lie
    /// under `/tmp` on a virtio disk that says it is rotational, and so do the loop devices
    /// (`rotational` 1, `mb_max_linear_groups` 4 after mounting:
    /// docs/measurements/kernel-fallocate2-xeon16-sizes.json).
    ///
    /// [`DeviceClass::Local`]: super::io::DeviceClass::Local
    pub fn rotational(self) -> bool {
        !matches!(self, Machine::Kunpeng920 | Machine::Epyc9654x2)
    }

    /// The machine a seed's published row was measured on ("Kunpeng 920", "AMD 9654 x2").
    pub fn of_row(name: &str) -> Machine {
        if name.starts_with("Kunpeng") {
            Machine::Kunpeng920
        } else {
            Machine::Epyc9654x2
        }
    }

    /// How much faster than this machine a seed's server runs one fallocate2 call (its
    /// published one-container rate over ours, the same kernel era): its work costs are
    /// this machine's divided by it; 1 for the others.
    fn speedup(self, scan: bool) -> f64 {
        let i = usize::from(scan);
        match self {
            Machine::Kunpeng920 => KUNPENG920_OPS_1P[i] / KERNEL_OPS_1P[i],
            Machine::Epyc9654x2 => EPYC9654X2_OPS_1P[i] / KERNEL_OPS_1P[i],
            Machine::Server | Machine::Local | Machine::Xeon16 => 1.0,
        }
    }

    /// The kernel's one-process allocator call (ns) and whole-call rate (ops/s) under
    /// `mb_optimize_scan` = `scan`. The seeds' servers were not measured by us: `server`
    /// keeps this machine's work costs and changes only the line costs.
    fn kernel_call(self, scan: bool) -> (f64, f64) {
        let i = usize::from(scan);
        let k = self.speedup(scan);
        match self {
            Machine::Xeon16 => (XEON16_CALL_NS[i], XEON16_OPS_1P[i]),
            _ => (KERNEL_CALL_NS / k, KERNEL_OPS_1P[i] * k),
        }
    }

    /// The kernel's crc32c of a 4 KiB block bitmap, ns (`server` keeps this machine's work
    /// costs, as [`Machine::kernel_call`]).
    fn csum_4k(self, scan: bool) -> f64 {
        match self {
            Machine::Xeon16 => XEON_CSUM_4K_NS,
            _ => LOCAL_CSUM_4K_NS / self.speedup(scan),
        }
    }

    /// The share of its one-CPU speed each CPU keeps while `n` CPUs are busy with work that
    /// shares nothing: measured on `xeon16` at 2-16 threads ([`XEON16_CEILING`]; between two
    /// counts the log-linear blend, past 16 the 16-thread figure, never above 1). The seeds'
    /// servers and this 2-vCPU machine were not measured so: 1, a CPU as fast at N as alone.
    pub fn ceiling(self, n: u32) -> f64 {
        match self {
            Machine::Xeon16 => blend(&XEON16_CEILING, n).min(1.0),
            _ => 1.0,
        }
    }

    /// The incremental update of a bitmap's checksum after a marking, ns
    /// ([`XEON_CSUM_FLIP_NS`]).
    /// `csum_4k`: the machine's full checksum, which the others' update is in proportion to.
    fn csum_flip(self, csum_4k: f64) -> f64 {
        match self {
            Machine::Xeon16 => XEON_CSUM_FLIP_NS,
            _ => csum_4k * XEON_CSUM_FLIP_NS / XEON_CSUM_4K_NS,
        }
    }

    /// What a load and a locked operation of a line another core wrote cost when many such
    /// are in flight ([`XEON16_OVERLAP_NS`]); the others take this machine's figures (the
    /// seeds' AMD 9654 is of this machine's family; nothing was measured on a Kunpeng).
    fn overlap(self) -> (u64, u64) {
        match self {
            Machine::Xeon16 => XEON16_OVERLAP_NS,
            _ => LOCAL_OVERLAP_NS,
        }
    }

    /// Cache-line transfer and lock hand-off, ns.
    fn lines(self) -> (u64, u64) {
        match self {
            Machine::Server | Machine::Kunpeng920 | Machine::Epyc9654x2 => {
                (SERVER_TRANSFER_NS, SERVER_TRANSFER_NS)
            }
            Machine::Local => (LOCAL_TRANSFER_NS, LOCAL_HANDOFF_NS),
            Machine::Xeon16 => (XEON16_TRANSFER_NS, XEON16_HANDOFF_NS),
        }
    }
}

/// A seed-003 walk step's price from a 6.18 step's: the walk mimic's ratio of the two
/// ([`WALK_TEST_OVER_SET`] on this machine's kernel, [`XEON16_WALK_TEST_OVER_SET`] on
/// `xeon16`'s for its fallocate3).
fn test_step(ratio: f64, walk_set_ns: f64) -> u64 {
    (walk_set_ns * ratio).round() as u64
}

/// `table`'s value at `n` (pairs by ascending count): log-linear between two counts, the
/// first pair's value below it (1 at one CPU), the last pair's past it.
fn blend(table: &[(u32, f64)], n: u32) -> f64 {
    let x = f64::from(n.max(1)).log2();
    let mut prev = (0.0, 1.0);
    for &(c, v) in table {
        let cx = f64::from(c).log2();
        if x <= cx {
            let t = if cx > prev.0 {
                (x - prev.0) / (cx - prev.0)
            } else {
                1.0
            };
            return prev.1 + t * (v - prev.1);
        }
        prev = (cx, v);
    }
    prev.1
}

/// One run's costs.
#[derive(Debug, Clone, Serialize)]
pub struct Costs {
    pub machine: Machine,
    /// Allocator work between two synchronisation points, ns.
    pub point_ns: u64,
    pub transfer_ns: u64,
    pub handoff_ns: u64,
    /// The fallocate call outside the allocator, ns.
    pub outside_ns: u64,
    /// The kernel's crc32c of a 4 KiB block bitmap, ns: charged under the group lock at every
    /// marking of a bitmap, in proportion to its size.
    pub csum_4k_ns: f64,
    /// The share of its one-CPU speed each CPU keeps at this run's CPU count
    /// ([`Machine::ceiling`]); the work figures above are already divided by it.
    pub ceiling: f64,
    /// With the incremental checksum (`bitmap_csum=incremental`): what a marking's checksum
    /// costs instead, ns, whatever the bitmap's size.
    pub csum_flip_ns: Option<f64>,
    /// With `line_overlap`: what a load and a write of a walk's word whose line no other CPU
    /// is moving cost the issuing CPU (`Machine::overlap`); the line stays in flight for the
    /// whole transfer, so a CPU that wants it meanwhile waits as before.
    pub overlap_ns: Option<(u64, u64)>,
    /// One group's step of the prefetch walk, ns: linux-6.18's (`Seg::WalkSet`) and seed
    /// 003's (`Seg::WalkTest`). Where the kernel's walk was measured (fallocate2 and
    /// fallocate3 on this machine's kernel, and the machines that take its split) its own
    /// price; on `xeon16` the walk mimic's there for fallocate3, a point for fallocate2.
    /// Seed 003's step is the mimic's share of 6.18's ([`WALK_TEST_OVER_SET`],
    /// [`XEON16_WALK_TEST_OVER_SET`] for `xeon16`'s fallocate3).
    pub walk_set_ns: u64,
    pub walk_test_ns: u64,
}

impl Costs {
    /// The costs for `machine` under `mb_optimize_scan` = `scan`.
    pub fn new(machine: Machine, scan: bool) -> Costs {
        let (call_ns, ops_1p) = machine.kernel_call(scan);
        let whole = 1e9 / ops_1p;
        let (transfer_ns, handoff_ns) = machine.lines();
        let csum_4k_ns = machine.csum_4k(scan);
        // The call's one marking (`ext4_mb_mark_diskspace_used`) checksums the bitmap: that
        // part of the measured call is charged where it happens, the rest over the points.
        // A truncate's frees checksum too; at one extent freed per 128 calls their share of
        // the measured rest of the call (1.1 ns a call) stays in `outside_ns`.
        // The prefetch walk's steps at their measured share of the call (this machine's
        // kernel). On `xeon16` a fallocate2 step stays a point: that kernel's fallocate2 walk
        // was not sampled (no perf there), and the walk mimic's price, which its fallocate3
        // takes, moves the whole-run check at 8 CPUs on 64 GiB from 1.12 to 1.15 times the
        // kernel's share (docs/vcpus/seed-003.md, "The prefetch walk's steps at their own
        // price").
        let work = (call_ns - csum_4k_ns).max(0.0);
        let (point_ns, walk_set) = match machine {
            Machine::Xeon16 => {
                let p = work / POINTS_PER_CALL;
                (p, p)
            }
            _ => {
                let walk = KERNEL_F2_WALK_SHARE * call_ns;
                (
                    (work - walk) / (POINTS_PER_CALL - F2_WALK_STEPS_PER_CALL),
                    walk / F2_WALK_STEPS_PER_CALL,
                )
            }
        };
        let point_ns = point_ns.round() as u64;
        Costs {
            machine,
            point_ns,
            transfer_ns,
            handoff_ns,
            outside_ns: (whole - call_ns).max(0.0).round() as u64,
            csum_4k_ns,
            ceiling: 1.0,
            csum_flip_ns: None,
            overlap_ns: None,
            walk_set_ns: walk_set.round() as u64,
            walk_test_ns: test_step(WALK_TEST_OVER_SET, walk_set),
        }
    }

    /// With `on`, an access to a walk's word (`Sched::walk_lines`) whose line no other CPU is
    /// moving costs the issuing CPU the machine's overlapped figure (`Machine::overlap`)
    /// instead of a whole transfer.
    pub fn with_line_overlap(self, on: bool) -> Costs {
        Costs {
            overlap_ns: on.then(|| self.machine.overlap()),
            ..self
        }
    }

    /// With `on`, every marking's checksum is the incremental update (`Machine::csum_flip`)
    /// instead of the whole bitmap's: what the ext4 incremental-CRC RFC would change. The
    /// rest of the call keeps its measured cost (the full checksum was already taken out of
    /// the points), so a call gets cheaper by the difference, inside the group lock.
    pub fn with_incremental_csum(self, on: bool) -> Costs {
        Costs {
            csum_flip_ns: on.then(|| self.machine.csum_flip(self.csum_4k_ns)),
            ..self
        }
    }

    /// With `ns`, every cache-line transfer and lock hand-off costs `ns` instead of the
    /// machine's figure: the lab's `line_ns`, for interconnects no published figure covers.
    pub fn with_line_ns(self, ns: Option<u64>) -> Costs {
        match ns {
            Some(ns) => Costs {
                transfer_ns: ns,
                handoff_ns: ns,
                ..self
            },
            None => self,
        }
    }

    /// These costs on `n` busy CPUs: every CPU's work (allocator points, the bitmap checksum,
    /// the call outside the allocator) slowed by the machine's own scaling
    /// ([`Machine::ceiling`]); line transfers and hand-offs as measured.
    pub fn on_cpus(self, n: u32) -> Costs {
        let c = self.machine.ceiling(n);
        assert!(
            c > 0.0 && c <= 1.0,
            "a ceiling is a share of one CPU's speed"
        );
        let slow = |ns: u64| (ns as f64 / c).round() as u64;
        Costs {
            point_ns: slow(self.point_ns),
            walk_set_ns: slow(self.walk_set_ns),
            walk_test_ns: slow(self.walk_test_ns),
            outside_ns: slow(self.outside_ns),
            csum_4k_ns: self.csum_4k_ns / c,
            csum_flip_ns: self.csum_flip_ns.map(|f| f / c),
            ceiling: self.ceiling * c,
            ..self
        }
    }

    /// Seed 003's fallocate3 runs: a point is the kernel's allocator time per fallocate3
    /// operation over that operation's points, measured on the same layout (26 ns, the walk's
    /// steps apart, below; a fallocate2 point is 100 ns: the kernel's per-call costs spread
    /// over ~10,000 points a call instead of 52); `outside_ns` is the whole rest of a
    /// fallocate3 operation; the interaction costs as [`Costs::new`] with
    /// `mb_optimize_scan=1`.
    /// The bitmap checksums stay inside the measured per-operation time as well as being
    /// charged at each marking: about 5 markings × 140 ns against 1.6 ms an operation (0.04 %).
    /// `xeon16` takes its own kernel's figures on the same image ([`XEON16_F3_ALLOC_NS_PER_OP`]);
    /// every other machine this machine's.
    ///
    /// The prefetch walk's steps have their own price (this machine's kernel, the same image:
    /// [`KERNEL_F3_WALK_SHARE`] of the allocator time over the model's
    /// [`F3_WALK_STEPS_PER_OP`]; on `xeon16`, whose kernel's walk was not sampled, the walk
    /// mimic's step there, [`XEON16_WALK_SET_NS`]), and the points are the rest of the
    /// allocator time over the rest of the points.
    pub fn fallocate3(machine: Machine) -> Costs {
        let (point, walk_set, outside, test_over_set) = match machine {
            Machine::Xeon16 => {
                let walk = XEON16_WALK_SET_NS * XEON16_F3_WALK_STEPS_PER_OP;
                (
                    (XEON16_F3_ALLOC_NS_PER_OP - walk)
                        / (XEON16_F3_POINTS_PER_OP - XEON16_F3_WALK_STEPS_PER_OP),
                    XEON16_WALK_SET_NS,
                    XEON16_F3_OUTSIDE_NS_PER_OP,
                    XEON16_WALK_TEST_OVER_SET,
                )
            }
            _ => {
                let walk = KERNEL_F3_WALK_SHARE * KERNEL_F3_ALLOC_NS_PER_OP;
                (
                    (KERNEL_F3_ALLOC_NS_PER_OP - walk) / (F3_POINTS_PER_OP - F3_WALK_STEPS_PER_OP),
                    walk / F3_WALK_STEPS_PER_OP,
                    KERNEL_F3_OUTSIDE_NS_PER_OP,
                    WALK_TEST_OVER_SET,
                )
            }
        };
        Costs {
            point_ns: point.round() as u64,
            walk_set_ns: walk_set.round() as u64,
            walk_test_ns: test_step(test_over_set, walk_set),
            outside_ns: outside.round() as u64,
            ..Costs::new(machine, true)
        }
    }

    /// The prefetch walk's steps as a kernel without the return thunk would price them (the
    /// lab's `walk_thunk=0`, a what-if): a 6.18 step [`WALK_PLAIN_OVER_THUNK`] of this
    /// machine's kernel's, seed 003's [`WALK_TEST_OVER_SET_PLAIN`] of that; every other cost
    /// as it was, so an operation gets cheaper by what its steps no longer cost. Only where
    /// the walk was measured on this machine's kernel (fallocate3 off `xeon16`, whose kernel
    /// runs no thunk: its steps are already the mimic's plain build).
    pub fn without_walk_thunk(self) -> Costs {
        assert!(
            self.machine != Machine::Xeon16,
            "xeon16's kernel runs no return thunk: its steps are already the plain build's"
        );
        let set = self.walk_set_ns as f64 * WALK_PLAIN_OVER_THUNK;
        Costs {
            walk_set_ns: set.round() as u64,
            walk_test_ns: (set * WALK_TEST_OVER_SET_PLAIN).round() as u64,
            ..self
        }
    }

    /// Costs with every figure given: for tests.
    pub fn flat(point_ns: u64, transfer_ns: u64, handoff_ns: u64, outside_ns: u64) -> Costs {
        Costs {
            machine: Machine::Server,
            point_ns,
            transfer_ns,
            handoff_ns,
            outside_ns,
            csum_4k_ns: 0.0,
            ceiling: 1.0,
            csum_flip_ns: None,
            overlap_ns: None,
            walk_set_ns: point_ns,
            walk_test_ns: test_step(WALK_TEST_OVER_SET, point_ns as f64),
        }
    }

    /// The kernel's crc32c of a `bytes`-long block bitmap, ns.
    pub fn csum_ns(&self, bytes: u32) -> u64 {
        match self.csum_flip_ns {
            Some(flip) => flip.round() as u64,
            None => (self.csum_4k_ns * f64::from(bytes) / 4096.0).round() as u64,
        }
    }

    /// The work of a segment ending at `s`: a point, whatever its kind (see the module doc),
    /// but for the prefetch walk's steps.
    pub fn segment(&self, s: Seg) -> u64 {
        match s {
            Seg::WalkSet => self.walk_set_ns,
            Seg::WalkTest => self.walk_test_ns,
            _ => self.point_ns,
        }
    }

    /// Cache lines that move with a lock's data when another CPU held it last.
    pub fn lines(&self, k: LockKind) -> u64 {
        match k {
            LockKind::Group => 3,
            _ => 1,
        }
    }
}
