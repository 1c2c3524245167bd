//! The bounded group cache: loaded groups never exceed the bound while every group is clean,
//! evicted groups come back with exactly the blocks they had, and allocations stay correct
//! against a per-block reference model.

use mballoc::{Allocator, Extent, Flags, Geometry, Policy, Request};
use proptest::prelude::*;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum B {
    Free,
    Used,
    Pending,
}

/// 32 groups of 2048 blocks, at most `bound` loaded.
fn allocator(bound: u32) -> (Geometry, Allocator) {
    let geo = Geometry::new(4096, 2048, 32 * 2048, 0, 4).unwrap();
    let a = Allocator::builder(geo)
        .lazy(true)
        .cpus(2)
        .tunables(Policy::Linux618.tunables(&geo, 2))
        .cache_groups(bound)
        .build()
        .unwrap();
    (geo, a)
}

/// An owner-less request that leaves no preallocation behind.
fn request(len: u32, goal: u64) -> Request {
    Request::new(7, 0, len)
        .with_goal(goal)
        .with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC)
        .with_i_size(u64::from(len) * 4096)
        .with_open_for_write(false)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn loaded_groups_stay_bounded_and_allocations_match_the_model(
        ops in proptest::collection::vec((any::<bool>(), 1u32..600, 0u64..65536, any::<prop::sample::Index>()), 1..150),
        bound in 2u32..6,
    ) {
        let (geo, a) = allocator(bound);
        let mut model = vec![B::Free; geo.blocks_count() as usize];
        let mut live: Vec<Extent> = Vec::new();
        for (alloc, len, goal, pick) in ops {
            if alloc || live.is_empty() {
                let Ok(got) = a.allocate(&request(len, goal)) else { continue };
                for b in got.extent.start..got.extent.end() {
                    prop_assert_eq!(model[b as usize], B::Free, "block {} handed out twice", b);
                    model[b as usize] = B::Used;
                }
                live.push(got.extent);
            } else {
                let e = live.swap_remove(pick.index(live.len()));
                a.free(7, e).unwrap();
                for b in e.start..e.end() {
                    model[b as usize] = B::Pending;
                }
                a.commit().unwrap();
                for s in model.iter_mut().filter(|s| **s == B::Pending) {
                    *s = B::Free;
                }
            }
            // Every group is clean between operations, so the bound holds exactly.
            prop_assert!(a.loaded_groups() <= bound, "{} groups loaded, bound {}", a.loaded_groups(), bound);
        }
        a.check_consistency().map_err(TestCaseError::fail)?;
        // Reading every group back (reloading evicted ones) gives the model's free space.
        for g in 0..geo.group_count() {
            let mut free = vec![false; 2048];
            for (s, n) in a.free_extents(g).unwrap() {
                for i in s..s + n {
                    free[i as usize] = true;
                }
            }
            for (i, &f) in free.iter().enumerate() {
                let b = geo.block_of(g, i as u32) as usize;
                prop_assert_eq!(f, model[b] == B::Free, "group {} block {}", g, i);
            }
            prop_assert!(a.loaded_groups() <= bound);
        }
    }
}

#[test]
fn evicted_groups_come_back_as_they_were_and_are_counted() {
    let (geo, a) = allocator(2);
    let got = a.allocate(&request(100, 0)).unwrap();
    assert_eq!(geo.locate(got.extent.start).0, 0);
    // Touch every other group: group 0 must be dropped (it is clean) and written back.
    for g in 1..geo.group_count() {
        a.free_extents(g).unwrap();
        assert!(a.loaded_groups() <= 2);
    }
    let evicted = a.stats().evictions;
    assert!(evicted >= 30, "evictions {evicted}");
    let free: u32 = a.free_extents(0).unwrap().iter().map(|&(_, n)| n).sum();
    assert_eq!(free, 2048 - 100);
    assert!(!a.group(0).unwrap().corrupt);
    // The freed blocks are reusable after a commit even when the group was reloaded between.
    a.free(7, got.extent).unwrap();
    a.commit().unwrap();
    for g in 1..geo.group_count() {
        a.free_extents(g).unwrap();
    }
    assert_eq!(a.free_blocks(), geo.blocks_count());
    a.check_consistency().unwrap();
}

#[test]
fn groups_with_pending_frees_stay_loaded() {
    let (geo, a) = allocator(2);
    let got = a.allocate(&request(50, 0)).unwrap();
    a.free(7, got.extent).unwrap(); // not committed: group 0 is not clean
    for g in 1..geo.group_count() {
        a.free_extents(g).unwrap();
    }
    // Group 0 could not be dropped; the bound is exceeded by exactly that group.
    assert!(a.loaded_groups() <= 3);
    a.commit().unwrap();
    assert_eq!(a.group(0).unwrap().free, 2048);
    a.check_consistency().unwrap();
}

#[test]
fn without_a_bound_nothing_is_evicted() {
    let geo = Geometry::new(4096, 2048, 8 * 2048, 0, 4).unwrap();
    let a = Allocator::builder(geo).cpus(1).build().unwrap();
    assert_eq!(a.loaded_groups(), 8);
    assert_eq!(a.stats().evictions, 0);
}
