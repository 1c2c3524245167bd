//! Commits larger than the store's log: the allocator cuts them into store commits that fit
//! (`store::fit_commit`), so no amount of work between two commits can wedge the store, and a
//! failure half-way through the pieces is settled like any failed commit.

use std::sync::Arc;

use mballoc::store::{
    fit_commit, Commit, CommitId, Extent, FaultDevice, FaultPlan, FileStore, FileStoreOptions,
    MemDevice, MemStore, Store, StoreError,
};
use mballoc::{Allocator, Flags, Geometry, Request};
use proptest::prelude::*;

mod store_support;
use store_support::used_blocks;

/// 8 groups of 8192 one-KiB blocks.
fn geometry() -> Geometry {
    Geometry::new(1024, 8192, 8 * 8192, 1, 1).unwrap()
}

/// The smallest log there is: 8 KiB, so two 2 KiB record slots.
fn tiny_log() -> FileStoreOptions {
    FileStoreOptions { log_len: 8 << 10 }
}

/// Allocates `n` single blocks two apart from block 2 (none touch, so none merge).
fn scattered(a: &Allocator, n: u64) -> Vec<mballoc::Extent> {
    (0..n)
        .map(|i| {
            let req = Request::new(1, i as u32, 1)
                .with_flags(Flags::HINT_TRY_GOAL | Flags::HINT_GOAL_ONLY)
                .with_goal(2 + 2 * i);
            a.allocate(&req).unwrap().extent
        })
        .collect()
}

#[test]
fn a_transaction_ten_times_the_log_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    drop(FileStore::create_with(&path, geometry(), &[], tiny_log()).unwrap());
    let n = 12_000;
    let a = Allocator::open_file(&path).unwrap();
    let extents = scattered(&a, n);
    // 8 bytes of log per scattered block: about 96 KB against an 8 KiB log.
    let record = n * 8;
    assert!(record > 10 * tiny_log().log_len, "{record}");
    a.commit().unwrap();
    let pieces = a.store().unwrap().stats().commits;
    println!("{n} scattered allocations ({record} log bytes) committed as {pieces} store commits");
    assert!(pieces >= 48, "{pieces}");
    // Free every other one and commit again: a large commit of frees.
    for e in extents.iter().step_by(2) {
        a.free(1, *e).unwrap();
    }
    a.commit().unwrap();
    drop(a);

    let s = FileStore::open(&path).unwrap();
    assert_eq!(s.recovered(), None);
    assert_eq!(s.verify().unwrap(), vec![]);
    assert_eq!(used_blocks(&s), n / 2);
}

#[test]
fn a_failure_half_way_through_the_pieces_is_settled_by_the_next_commit() {
    let len = FileStore::required_len(&geometry(), tiny_log()).unwrap();
    let dev = Arc::new(MemDevice::new(len));
    drop(FileStore::create_on(dev.clone(), geometry(), &[], tiny_log()).unwrap());
    for at in [1, 2, 7, 8] {
        let fault = Arc::new(FaultDevice::new(dev.to_bytes()));
        let store = Arc::new(FileStore::open_on(fault.clone()).unwrap());
        let a = Allocator::open(store.clone()).unwrap();
        scattered(&a, 2_000);
        fault.set_plan(FaultPlan::FailSync { at });
        assert!(a.commit().is_err(), "sync {at}");
        // Each piece syncs twice (record, then checkpoint): the pieces before sync `at` landed.
        let landed = store.last_commit();
        assert_eq!(landed, CommitId(at / 2), "sync {at}");
        fault.set_plan(FaultPlan::None);
        a.commit().unwrap();
        assert!(store.last_commit() > landed);
        drop(a);
        drop(store);
        let again = FileStore::open_on(fault.clone()).unwrap();
        assert_eq!(again.verify().unwrap(), vec![], "sync {at}");
        assert_eq!(used_blocks(&again), 2_000, "sync {at}");
    }
}

#[test]
fn a_store_commit_too_large_for_the_log_is_refused_whole() {
    let len = FileStore::required_len(&geometry(), tiny_log()).unwrap();
    let store =
        FileStore::create_on(Arc::new(MemDevice::new(len)), geometry(), &[], tiny_log()).unwrap();
    let many = Commit {
        allocated: (0..1000).map(|i| Extent::new(2 + 2 * i, 1)).collect(),
        freed: vec![],
    };
    let err = store.commit(&many).unwrap_err();
    assert!(matches!(err, StoreError::CommitTooLarge { .. }), "{err}");
    assert!(err.to_string().contains("fit_commit"), "{err}");
    assert_eq!(store.last_commit(), CommitId(0));
    let capacity = store.commit_capacity().unwrap();
    for piece in fit_commit(&geometry(), &many, capacity).unwrap() {
        store.commit(&piece).unwrap();
    }
    assert_eq!(used_blocks(&store), 1000);
}

/// A random valid commit over `state` (true = used): allocations of free runs, frees of used
/// runs, some of them runs allocated by the same commit.
fn random_commit(state: &mut [bool], picks: &[(u64, u64, bool)]) -> Commit {
    let mut c = Commit::default();
    let first = 1;
    for &(start, len, free) in picks {
        let start = first + start % (state.len() as u64 - first);
        let len = len.min(state.len() as u64 - start).max(1);
        let range = start as usize..(start + len) as usize;
        if free && state[range.clone()].iter().all(|&u| u) {
            state[range].iter_mut().for_each(|u| *u = false);
            c.freed.push(Extent::new(start, len));
        } else if !free && state[range.clone()].iter().all(|&u| !u) && c.freed.is_empty() {
            state[range].iter_mut().for_each(|u| *u = true);
            c.allocated.push(Extent::new(start, len));
        }
    }
    c
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every piece fits (the store takes it) and the pieces in order leave what the whole
    /// commit leaves on a store without a log.
    #[test]
    fn pieces_fit_and_add_up_to_the_whole(
        picks in proptest::collection::vec((0u64..65536, 1u64..20000, any::<bool>()), 1..400),
        slots in 4u64..12,
    ) {
        let capacity = slots * 512;
        let g = geometry();
        let mut state = vec![false; g.blocks_count() as usize];
        state[0] = true;
        let c = random_commit(&mut state, &picks);
        let pieces = fit_commit(&g, &c, capacity).unwrap();
        let whole = MemStore::new(g, &[]).unwrap();
        whole.commit(&c).unwrap();
        let opts = FileStoreOptions { log_len: 4096 + 2 * capacity };
        let len = FileStore::required_len(&g, opts).unwrap();
        let cut = FileStore::create_on(Arc::new(MemDevice::new(len)), g, &[], opts).unwrap();
        for p in &pieces {
            prop_assert!(!p.is_empty());
            cut.commit(p).unwrap();
        }
        for grp in 0..g.group_count() {
            prop_assert_eq!(
                whole.read_bitmap(grp).unwrap().into_bytes(),
                cut.read_bitmap(grp).unwrap().into_bytes()
            );
        }
    }
}
