//! Each policy switch of the seeds changes behaviour: every test here runs the same requests
//! with the switch off and on and fails if the switch makes no difference.

use std::time::Duration;

use mballoc::{Allocator, Flags, Geometry, Policy, Request, SizeClass, Tunables};

const BPG: u64 = 32768;

/// Eight 128 MiB groups of 4 KiB blocks; mb_optimize_scan stays off (fewer than 16 groups), so
/// every scan is a linear walk from the goal group.
fn geo() -> Geometry {
    Geometry::new(4096, BPG as u32, 8 * BPG, 0, 16).unwrap()
}

fn build(t: Tunables, used: &[(u64, u64)]) -> Allocator {
    Allocator::builder(geo())
        .used(used)
        .tunables(t)
        .cpus(2)
        .build()
        .unwrap()
}

fn group_of(block: u64) -> u64 {
    block / BPG
}

/// Seed 000: with two stream goals, two big files in different slots start their scans from
/// different groups; with one goal the second file follows the first.
#[test]
fn stream_goal_slots_separate_owners() {
    let land = |goals: u32| {
        let mut t = Policy::Linux618.tunables(&geo(), 2);
        t.set("nr_global_goals", &goals.to_string(), &geo())
            .unwrap();
        let a = build(t, &[(0, BPG)]); // group 0 full
                                       // Owner 0 (slot 0) extends an extent in group 5: the merge goal puts it there, and the
                                       // stream goal of its slot follows.
        let first = Request::new(0, 2048, 32)
            .with_i_size(1 << 30)
            .with_left(2047, 5 * BPG + 100);
        let x = a.allocate(&first).unwrap();
        assert_eq!(group_of(x.extent.start), 5);
        // Owner 1 (slot 1 of 2, slot 0 of 1) has no goal of its own.
        let second = Request::new(1, 0, 32).with_i_size(1 << 30);
        group_of(a.allocate(&second).unwrap().extent.start)
    };
    assert_eq!(land(1), 5, "one goal: the second stream follows the first");
    assert_eq!(
        land(2),
        1,
        "two goals: slot 1 starts from its own goal (group 0 → 1)"
    );
}

/// Seed 001: a group whose lock another thread holds is skipped with `try_lock_groups`, and
/// waited for without it.
#[test]
fn busy_group_is_skipped_only_with_try_lock() {
    let small = Request::new(7, 0, 8).with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC);
    for try_lock in [true, false] {
        let mut t = Policy::Linux618.tunables(&geo(), 2);
        t.try_lock_groups = try_lock;
        let a = build(t, &[(0, BPG)]);
        let got = std::thread::scope(|s| {
            let hold = a.hold_group_lock(1).unwrap();
            let h = s.spawn(|| a.allocate(&small).unwrap());
            if try_lock {
                // Held for the whole allocation.
                let x = h.join().unwrap();
                drop(hold);
                x
            } else {
                // The allocation must wait for group 1; let it reach the lock, then release.
                std::thread::sleep(Duration::from_millis(50));
                drop(hold);
                h.join().unwrap()
            }
        });
        let g = group_of(got.extent.start);
        if try_lock {
            assert_eq!(g, 2, "group 1 is busy: skipped");
            assert!(a.stats().busy_skips >= 1);
        } else {
            assert_eq!(g, 1, "without try-lock the scan waits for group 1");
            assert_eq!(a.stats().busy_skips, 0);
        }
    }
}

/// Seed 002: with size classes, small and large extents go to different groups, a second small
/// extent joins the small group, and an emptied group loses its class.
#[test]
fn size_classes_separate_small_from_large() {
    let direct = Flags::HINT_DATA | Flags::HINT_NOPREALLOC;
    for on in [false, true] {
        let mut t = Policy::Linux618.tunables(&geo(), 2);
        t.size_classes = on;
        let a = build(t, &[(0, 300)]);
        let s1 = a
            .allocate(&Request::new(1, 0, 8).with_flags(direct))
            .unwrap();
        let big = a
            .allocate(&Request::new(2, 0, 4096).with_flags(direct))
            .unwrap();
        let s2 = a
            .allocate(&Request::new(3, 0, 16).with_flags(direct))
            .unwrap();
        let (g1, gb, g2) = (
            group_of(s1.extent.start),
            group_of(big.extent.start),
            group_of(s2.extent.start),
        );
        assert_eq!(big.extent.len, 4096);
        assert_eq!(g1, g2);
        if !on {
            assert_eq!(g1, gb, "no classes: everything packs into group 0");
            assert_eq!(a.group(0).unwrap().size_class, 0);
            continue;
        }
        assert_ne!(g1, gb, "small and large in different groups");
        let class = |g: u64| SizeClass::from_u8(a.group(g as u32).unwrap().size_class);
        assert_eq!(class(g1), SizeClass::Small);
        assert_eq!(class(gb), SizeClass::Large);
        let st = a.stats();
        assert_eq!(st.class_claims, 2);
        assert!(st.class_stage_hits[0] >= 1, "the second small one matched");
        // Empty the large group: its class resets once the free is committed.
        a.free(2, big.extent).unwrap();
        assert_eq!(class(gb), SizeClass::Large, "not before the commit");
        a.commit().unwrap();
        assert_eq!(class(gb), SizeClass::None);
        assert_eq!(a.stats().class_resets, 1);
    }
}

/// Ours, on top of seed 002: with `size_class_per_cpu`, small extents from two CPUs go to two
/// groups (each claimed by its CPU), a CPU's next small extent joins its own group, and once
/// its groups are gone a CPU would rather claim a fresh group than share; without the switch
/// both CPUs fill one small group.
#[test]
fn per_cpu_class_groups_keep_cpus_apart() {
    let direct = Flags::HINT_DATA | Flags::HINT_NOPREALLOC;
    for per_cpu in [false, true] {
        let mut t = Policy::Linux618.tunables(&geo(), 2);
        t.size_classes = true;
        t.size_class_per_cpu = per_cpu;
        let a = build(t, &[(0, 300)]);
        let small = |owner: u64, cpu: u32| {
            let r = Request::new(owner, 0, 8).with_flags(direct).with_cpu(cpu);
            group_of(a.allocate(&r).unwrap().extent.start)
        };
        let (c0, c1, c0_again, c1_again) = (small(1, 0), small(2, 1), small(3, 0), small(4, 1));
        assert_eq!(c0, c0_again, "a CPU's small extents share its group");
        assert_eq!(c1, c1_again);
        let class = |g: u64| SizeClass::from_u8(a.group(g as u32).unwrap().size_class);
        assert_eq!(class(c0), SizeClass::Small);
        let st = a.stats();
        if per_cpu {
            assert_ne!(c0, c1, "each CPU claimed a small group of its own");
            assert_eq!(st.class_claims, 2);
            assert_eq!(
                st.class_stage_hits[0], 2,
                "the second extents matched their own CPU's group"
            );
            assert_eq!(st.class_stage_hits[4], 0, "nothing had to share");
        } else {
            assert_eq!(c0, c1, "classes alone put both CPUs in one group");
            assert_eq!(st.class_claims, 1);
        }
    }
}

/// With `size_class_per_cpu`, a CPU with no group of its own and none left to claim uses
/// another CPU's group of its class (stage `shared`) before any group of another class.
#[test]
fn per_cpu_class_groups_share_before_mixing_classes() {
    let geo = Geometry::new(4096, BPG as u32, 2 * BPG, 0, 1).unwrap();
    let mut t = Policy::Linux618.tunables(&geo, 2);
    t.size_classes = true;
    t.size_class_per_cpu = true;
    let a = Allocator::builder(geo)
        .used(&[(0, 64)])
        .tunables(t)
        .cpus(2)
        .build()
        .unwrap();
    let direct = Flags::HINT_DATA | Flags::HINT_NOPREALLOC;
    let take = |owner: u64, len: u32, cpu: u32| {
        let r = Request::new(owner, 0, len).with_flags(direct).with_cpu(cpu);
        group_of(a.allocate(&r).unwrap().extent.start)
    };
    let small0 = take(1, 8, 0);
    let large0 = take(2, 4096, 0);
    assert_ne!(small0, large0, "CPU 0 claimed both groups, one per class");
    let small1 = take(3, 8, 1);
    assert_eq!(small1, small0, "CPU 1 shares CPU 0's small group");
    let st = a.stats();
    assert_eq!(st.class_stage_hits[4], 1, "through the shared stage");
    assert_eq!(st.class_forced, 0, "not into the large group");
}

/// Seed 002: a metadata request is never classified or filtered.
#[test]
fn size_classes_leave_metadata_alone() {
    let mut t = Policy::Proposed.tunables(&geo(), 2);
    t.size_classes = true;
    let a = build(t, &[(0, 300)]);
    let m = a
        .allocate(&Request::new(1, 0, 1).with_flags(Flags(0)))
        .unwrap();
    assert_eq!(group_of(m.extent.start), 0);
    assert_eq!(a.group(0).unwrap().size_class, 0);
    assert_eq!(a.stats().class_claims, 0);
}

/// Seed 004: a big file being written streams through preallocation windows of
/// `mb_max_prealloc_kb`.
#[test]
fn prealloc_window_follows_mb_max_prealloc_kb() {
    let pa_len = |kb: &str| {
        let mut t = Policy::Linux618.tunables(&geo(), 2);
        t.set("mb_max_prealloc_kb", kb, &geo()).unwrap();
        let a = build(t, &[(0, 300)]);
        let x = a
            .allocate(&Request::new(1, 8192, 32).with_i_size(1 << 30))
            .unwrap();
        let pa = x
            .new_pa
            .expect("a streaming write makes an inode preallocation");
        u64::from(pa.len) * 4096
    };
    assert_eq!(pa_len("8192"), 8 << 20);
    assert_eq!(pa_len("32768"), 32 << 20);
    assert_eq!(
        Policy::Proposed.tunables(&geo(), 2).mb_max_prealloc_kb,
        32768
    );
}

/// A 64-group filesystem whose first 48 groups are full but for a few scattered blocks: the
/// first allocations must read many bitmaps.
fn full_fs(t: Tunables, readers: usize) -> Allocator {
    let geo = Geometry::ext4_default(8 << 30).unwrap();
    let mut used = Vec::new();
    for g in 0..48u64 {
        for k in 0..8u64 {
            used.push((g * BPG + k * 4096, 4090));
        }
    }
    Allocator::builder(geo)
        .used(&used)
        .tunables(t)
        .cpus(2)
        .lazy(true)
        .prefetch_threads(readers)
        .build()
        .unwrap()
}

fn run_requests(a: &Allocator) {
    for i in 0..24u64 {
        let r = Request::new(i, 0, 512).with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC);
        a.allocate(&r).unwrap();
    }
    a.check_consistency().unwrap();
}

/// Seed 003 context: prefetch turns synchronous bitmap reads into background reads.
#[test]
fn prefetch_cuts_synchronous_loads() {
    let geo = Geometry::ext4_default(8 << 30).unwrap();
    let mut counts = Vec::new();
    for prefetch in ["0", "64"] {
        let mut t = Policy::Linux618.tunables(&geo, 2);
        t.set("mb_prefetch", prefetch, &geo).unwrap();
        let a = full_fs(t, 2);
        run_requests(&a);
        let s = a.stats();
        counts.push((s.sync_loads, s.prefetch_loads));
    }
    let (off, on) = (counts[0], counts[1]);
    assert_eq!(off.1, 0, "no prefetch reads with mb_prefetch=0");
    assert!(on.1 > 0, "prefetch read ahead: {on:?}");
    assert!(on.0 < off.0, "synchronous loads drop: {off:?} → {on:?}");
}

/// Seed 003: testing the "already read" bit before setting it skips the descriptor work for
/// groups prefetched before.
#[test]
fn prefetch_test_before_set_skips_descriptor_lookups() {
    let geo = Geometry::ext4_default(8 << 30).unwrap();
    let mut lookups = Vec::new();
    for test_first in [false, true] {
        let mut t = Policy::Linux618.tunables(&geo, 2);
        t.prefetch_test_before_set = test_first;
        let a = full_fs(t, 0);
        run_requests(&a);
        let s = a.stats();
        lookups.push((s.prefetch_desc_lookups, s.prefetch_loads));
    }
    assert_eq!(lookups[0].1, lookups[1].1, "same reads either way");
    assert!(
        lookups[1].0 < lookups[0].0,
        "fewer descriptor lookups: {lookups:?}"
    );
}

/// Size classes with every placement switch of `proposed` set to `on`, the rest as 6.18.
fn class_tunables(strict: bool, stream_groups: bool, largest: bool, inherit: bool) -> Tunables {
    let mut t = Policy::Linux618.tunables(&geo(), 2);
    t.size_classes = true;
    t.size_class_strict_goal = strict;
    t.size_class_stream_groups = stream_groups;
    t.size_class_largest_first = largest;
    t.size_class_inherit = inherit;
    t
}

const DIRECT: Flags = Flags(Flags::HINT_DATA.0 | Flags::HINT_NOPREALLOC.0);

/// `size_class_strict_goal`: a small request whose goal lies in a large group is not placed
/// at that goal; without the switch the goal try puts it there (a forced allocation).
#[test]
fn strict_goal_keeps_a_class_out_of_another_classes_group() {
    for strict in [false, true] {
        let a = build(class_tunables(strict, false, false, false), &[(0, 300)]);
        let large = Request::new(1, 0, 8192).with_flags(DIRECT);
        let big = a.allocate(&large).unwrap().extent;
        let g = group_of(big.start);
        let goal = big.start + u64::from(big.len);
        let small = Request::new(2, 0, 8)
            .with_flags(Flags(DIRECT.0 | Flags::HINT_TRY_GOAL.0))
            .with_goal(goal);
        let got = a.allocate(&small).unwrap().extent;
        if strict {
            assert_ne!(
                group_of(got.start),
                g,
                "the large group refused the small goal"
            );
            assert_eq!(a.stats().class_forced, 0);
        } else {
            assert_eq!(got.start, goal, "the goal try ignores classes");
            assert_eq!(a.stats().class_forced, 1);
        }
    }
}

/// `size_class_stream_groups`: a file's first blocks (32 blocks: past `mb_stream_req`, so
/// not a locality-group request) open an empty group instead of joining
/// another file's group of the same class, and the file's next blocks continue in place.
#[test]
fn stream_groups_give_each_new_file_room_to_grow() {
    for spread in [false, true] {
        let a = build(class_tunables(true, spread, true, false), &[(0, 300)]);
        let a1 = a
            .allocate(&Request::new(1, 0, 32).with_flags(DIRECT))
            .unwrap()
            .extent;
        let b1 = a
            .allocate(&Request::new(2, 0, 32).with_flags(DIRECT))
            .unwrap()
            .extent;
        let next = Request::new(1, 32, 32)
            .with_flags(DIRECT)
            .with_left(31, a1.start + 31)
            .with_goal(a1.start + 32);
        let a2 = a.allocate(&next).unwrap().extent;
        if spread {
            assert_ne!(
                group_of(a1.start),
                group_of(b1.start),
                "file 2 opened a group"
            );
            assert_eq!(a2.start, a1.start + 32, "file 1 grew in place");
        } else {
            assert_eq!(
                group_of(a1.start),
                group_of(b1.start),
                "both files share a group"
            );
            assert_ne!(
                a2.start,
                a1.start + 32,
                "file 2 sits where file 1 would grow"
            );
        }
    }
}

/// `size_class_largest_first`: a class stage fills a fresh group from its first free block;
/// the buddy's aligned search leaves a gap behind the blocks already in use.
#[test]
fn largest_first_leaves_no_gap_behind_metadata() {
    for largest in [false, true] {
        // Every group starts with 1,025 blocks in use, as a group with a superblock backup.
        let used: Vec<(u64, u64)> = (0..8).map(|g| (g * BPG, 1025)).collect();
        let a = build(class_tunables(true, true, largest, false), &used);
        let got = a
            .allocate(&Request::new(1, 0, 32).with_flags(DIRECT))
            .unwrap()
            .extent;
        let offset = got.start % BPG;
        if largest {
            assert_eq!(offset, 1025, "right behind the blocks in use");
        } else {
            assert_eq!(offset, 1056, "the first 32-aligned chunk");
        }
    }
}

/// `size_class_inherit`: the short tail of a medium file (a window's leftover) keeps to the
/// file's medium group; classed by its own length it is small, and a strict goal sends it to
/// another group.
#[test]
fn inherit_keeps_a_files_tail_in_its_group() {
    for inherit in [false, true] {
        let a = build(class_tunables(true, true, true, inherit), &[(0, 300)]);
        let head = a
            .allocate(&Request::new(1, 0, 64).with_flags(DIRECT))
            .unwrap()
            .extent;
        assert_eq!(
            SizeClass::from_u8(a.group(group_of(head.start) as u32).unwrap().size_class),
            SizeClass::Medium
        );
        let end = head.start + u64::from(head.len);
        let tail = Request::new(1, 64, 8)
            .with_flags(Flags(DIRECT.0 | Flags::HINT_TRY_GOAL.0))
            .with_left(63, end - 1)
            .with_goal(end);
        let got = a.allocate(&tail).unwrap().extent;
        if inherit {
            assert_eq!(got.start, end, "the tail continues the file");
        } else {
            assert_ne!(
                group_of(got.start),
                group_of(head.start),
                "a small tail moved out"
            );
        }
    }
}
