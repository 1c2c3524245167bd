//! Model check of the allocator's lock paths with `shuttle` (randomised and PCT schedules).
//!
//! ```text
//! RUSTFLAGS="--cfg shuttle" cargo test --release -p mballoc --test shuttle
//! ```
//!
//! Under `--cfg shuttle` every mutex of the library is shuttle's, and so are the atomics of
//! the allocator's shared state (`src/sync/mod.rs`: each group's lock-free counts and class, the
//! `bb_state` bits and read marks, the stream goals, the commit ids, the count of groups still
//! to load, …). These tests run the real `Allocator` (not a model of it) while shuttle picks,
//! at every lock, try-lock, unlock and atomic load, store or read-modify-write, which thread
//! runs next: a lock-free test and the act that follows it (a group read as fit and then
//! locked, a `NEED_INIT` bit read and then a bitmap read submitted) are explored with other
//! threads' steps in between. The OS-thread stress tests in `model.rs` meet the interleavings
//! a 2-core machine happens to produce; here each test explores thousands of schedules chosen
//! to reach rare orders (PCT finds any bug that needs at most `depth` ordering constraints
//! with a known probability per run), on a filesystem of four 256-block groups, small enough
//! that the threads fight over the same groups, owners' preallocations and locality groups
//! and keep running out of space. What each checks:
//!
//! * no lock-order cycle (shuttle reports a deadlock when every thread is blocked);
//! * no block handed to two holders (an ownership array claimed on every allocation);
//! * nothing lost: once everything is freed, committed and discarded, the counters and
//!   `check_consistency` agree and every free block can be allocated again.
//!
//! What shuttle does not see: weak memory orderings (it runs every atomic as if `SeqCst`;
//! the `loom` models in `src/group/index.rs`, `src/sync/percpu.rs` and
//! `src/group/class_index.rs` check the orderings of the lock-free index and counters), and
//! the per-thread statistics and counter shards, which stay std's (see `sync::atomic`).
//!
//! Mutations these tests catch (each tried by hand; the tests passed without it):
//! * the ENOSPC discard taking other owners' locks with a blocking lock instead of a try-lock:
//!   a deadlock (`full_filesystem_*`; 1 and 3 of the 3 tests in two runs);
//! * `discard_preallocations` releasing the PAs after dropping the owner's lock: blocks lost
//!   (`wrong_owner_frees_*`: both tests in each of 3 runs);
//! * an eviction that keeps a prefetched read of the group it wrote back: a later load takes
//!   the stale copy, and a held block is free on disk or its free is refused as a free of
//!   free blocks (`lazy_small_cache_*`: at least one of the two tests in each of 4 runs). With only the
//!   mutexes as scheduling points this needed a hand-placed switch point between the
//!   prefetch's `NEED_INIT` test and its submit; the atomics now provide it;
//! * building a group's buddy-cache page-mates (1 KiB blocks) while holding the group's own
//!   lock: two threads building the two mates deadlock (`lazy_small_cache_page_mates`, 2 runs
//!   of 2);
//! * `journal_free` keeping the tid the free read before a commit closed it: that commit
//!   releases a free it did not make durable, and the block is handed out while the store's
//!   last commit still has it in use (`durable_commits_*`: one of the two tests in each of 3
//!   runs).
//!
//! `SHUTTLE_ITERATIONS` sets the schedules per test and strategy (default 3000).
#![cfg(shuttle)]

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use mballoc::store::{CommitId, Store};
use mballoc::Bitmap;
use mballoc::{Allocator, Error, Extent, Geometry, Policy, Request};
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::{thread, Config, Runner};

mod request_support;
use request_support::request;

const BPG: u32 = 256;
const GROUPS: u64 = 4;
/// Blocks in use from the start (group 0's metadata, say).
const RESERVED: u64 = 40;

fn iterations() -> usize {
    std::env::var("SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

/// Runs `f` under random schedules and under PCT schedules of depth 3.
fn explore<F: Fn() + Send + Sync + 'static>(f: F) {
    let f = Arc::new(f);
    let g = f.clone();
    // The library's atomics are mostly `Relaxed`; shuttle warns that it runs them as `SeqCst`,
    // which the module doc says (and loom covers the orderings that matter).
    let mut config = Config::new();
    config.silence_warnings = true;
    Runner::new(RandomScheduler::new(iterations()), config.clone()).run(move || g());
    Runner::new(PctScheduler::new(3, iterations()), config).run(move || f());
}

/// `lazy_cache`: groups load lazily into a cache of that many; `readers`: prefetch reads run
/// on that many background threads (scheduled by shuttle like the rest).
fn fs(policy: Policy, optimize: bool, lazy_cache: Option<u32>, readers: usize) -> Arc<Allocator> {
    fs_of(X86, policy, optimize, lazy_cache, readers)
}

/// Block size, page size and journal of a test filesystem.
#[derive(Clone, Copy)]
struct Mount {
    block_size: u32,
    page_size: u32,
    journal: bool,
    /// bigalloc: the groups' `BPG` bits count clusters of `2^cluster_bits` blocks.
    cluster_bits: u32,
}

/// 4 KiB blocks in 4 KiB pages, with a journal.
const X86: Mount = Mount {
    block_size: 4096,
    page_size: 4096,
    journal: true,
    cluster_bits: 0,
};

/// [`fs`] mounted as `m`: with 1 KiB blocks in 4 KiB pages, or 4 KiB blocks in 16 KiB pages,
/// two groups share a buddy-cache page, and building one group builds its page-mate too;
/// without a journal frees are reusable at once.
fn fs_of(
    m: Mount,
    policy: Policy,
    optimize: bool,
    lazy_cache: Option<u32>,
    readers: usize,
) -> Arc<Allocator> {
    let blocks = (GROUPS * u64::from(BPG)) << m.cluster_bits;
    let geo = Geometry::with_clusters(m.block_size, m.cluster_bits, BPG, blocks, 0, 4).unwrap();
    let mut t = policy.tunables(&geo, 2);
    t.mb_optimize_scan = optimize;
    let mut b = Allocator::builder(geo)
        .used(&[(0, RESERVED)])
        .tunables(t)
        .cpus(2)
        .page_size(m.page_size)
        .journal(m.journal);
    if let Some(n) = lazy_cache {
        b = b.lazy(true).cache_groups(n).prefetch_threads(readers);
    }
    Arc::new(b.build().unwrap())
}

/// Who holds each cluster (each block without bigalloc; 0: nobody, else thread + 1), and the
/// clusters' `cluster_bits`.
struct Holders(Vec<AtomicU8>, u32);

impl Holders {
    fn new() -> Arc<Holders> {
        Self::of_clusters(0)
    }
    fn of_clusters(bits: u32) -> Arc<Holders> {
        Arc::new(Holders(
            (0..GROUPS * u64::from(BPG))
                .map(|_| AtomicU8::new(0))
                .collect(),
            bits,
        ))
    }
    /// The clusters holding `e`'s blocks.
    fn clusters(&self, e: Extent) -> std::ops::RangeInclusive<u64> {
        (e.start >> self.1)..=((e.end() - 1) >> self.1)
    }
    fn claim(&self, e: Extent, th: u8) {
        for b in self.clusters(e) {
            let prev = self.0[b as usize].swap(th + 1, Ordering::SeqCst);
            assert_eq!(
                prev, 0,
                "cluster {b} handed to thread {th} while held by {prev}"
            );
        }
    }
    fn release(&self, e: Extent) {
        for b in self.clusters(e) {
            self.0[b as usize].store(0, Ordering::SeqCst);
        }
    }
}

/// Frees, commits and discards everything, then checks that nothing was lost: the counters,
/// the buddies against their bitmaps, and every free block allocatable again.
fn drain(a: &Allocator, live: Vec<(u64, Extent)>, owners: impl Iterator<Item = u64>) {
    for (o, e) in live {
        a.free(o, e).unwrap();
    }
    a.commit().unwrap();
    for o in owners {
        a.discard_preallocations(o);
    }
    a.discard_group_preallocations();
    a.check_consistency().unwrap();
    let geo = a.geometry();
    let free = geo.c2b(geo.clusters_count() - geo.num_b2c(RESERVED));
    assert_eq!(a.free_blocks(), free);
    assert_eq!(a.pending_blocks(), 0);
    assert!(a.preallocations().is_empty(), "{:?}", a.preallocations());
    let mut got = 0;
    while let Ok(x) = a.allocate(&request(99, 0, BPG, 2, 0, 0)) {
        got += u64::from(x.extent.len);
    }
    assert_eq!(got, free, "blocks lost");
}

fn worker_owner(th: u64, i: u32) -> u64 {
    1 + th * 10 + u64::from(i % 3)
}

/// Extents a worker still holds when it ends, with their owners.
type Held = Vec<(u64, Extent)>;

/// Worker `th`: eight requests made by `make(owner, i)`, each extent claimed; every third
/// step frees the oldest extent it holds and commits.
fn worker(
    a: &Arc<Allocator>,
    held: &Arc<Holders>,
    th: u64,
    make: impl Fn(u64, u32) -> Request + Send + 'static,
) -> thread::JoinHandle<Held> {
    let (a, held) = (a.clone(), held.clone());
    thread::spawn(move || {
        let mut live = Vec::new();
        for i in 0..8u32 {
            let owner = worker_owner(th, i);
            if let Ok(x) = a.allocate(&make(owner, i)) {
                held.claim(x.extent, th as u8);
                live.push((owner, x.extent));
            }
            if i % 3 == 2 {
                let (o, e) = live.swap_remove(0);
                held.release(e);
                a.free(o, e).unwrap();
                a.commit().unwrap();
            }
        }
        live
    })
}

fn join_all(workers: Vec<thread::JoinHandle<Held>>) -> Held {
    workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect()
}

/// Two threads allocate until refused, then free two thirds and commit, dropping their own
/// PAs now and then; a third drops theirs and the locality groups' and commits. Out of
/// space, a request discards others' PAs group by group with try-locks
/// (`discard_preallocations_for`) while their owners allocate from them.
/// Returns whether a request was refused for want of space.
fn full_filesystem(policy: Policy, optimize: bool) -> bool {
    full_filesystem_of(policy, optimize, 0)
}

/// [`full_filesystem`] with clusters of `2^cluster_bits` blocks.
fn full_filesystem_of(policy: Policy, optimize: bool, cluster_bits: u32) -> bool {
    let mount = Mount {
        cluster_bits,
        ..X86
    };
    let a = fs_of(mount, policy, optimize, None, 0);
    let held = Holders::of_clusters(cluster_bits);
    let workers: Vec<_> = (0..2u64)
        .map(|th| {
            let (a, held) = (a.clone(), held.clone());
            thread::spawn(move || {
                let (mut live, mut refused) = (Vec::new(), 0);
                for i in 0..16u32 {
                    let owner = worker_owner(th, i);
                    // Lengths and goals scaled to the clusters, so that the space runs out.
                    let len = (1 + (i * 53 + th as u32 * 31) % 200) << cluster_bits;
                    let goal = u64::from(i * 97 + th as u32 * 301)
                        % ((GROUPS * u64::from(BPG)) << cluster_bits);
                    let kind = ((i + th as u32) % 4) as u8;
                    let req = request(owner, (i / 3) * 160, len, kind, th as u32, goal);
                    match a.allocate(&req) {
                        Ok(x) => {
                            held.claim(x.extent, th as u8);
                            live.push((owner, x.extent));
                        }
                        Err(Error::NoSpace { .. }) => {
                            refused += 1;
                            let mut k = 0;
                            live.retain(|&(o, e): &(u64, Extent)| {
                                k += 1;
                                if k % 3 == 0 {
                                    return true;
                                }
                                held.release(e);
                                a.free(o, e).unwrap();
                                false
                            });
                            a.commit().unwrap();
                        }
                        Err(e) => panic!("{e}"),
                    }
                    if i % 5 == 4 {
                        a.discard_preallocations(owner);
                    }
                }
                (live, refused)
            })
        })
        .collect();
    let dropper = {
        let a = a.clone();
        thread::spawn(move || {
            for i in 0..3u32 {
                a.discard_preallocations(worker_owner(u64::from(i % 2), i));
                a.discard_group_preallocations();
                a.commit().unwrap();
            }
        })
    };
    let (mut live, mut refused) = (Vec::new(), 0);
    for w in workers {
        let (l, r) = w.join().unwrap();
        live.extend(l);
        refused += r;
    }
    dropper.join().unwrap();
    let owners = (0..2).flat_map(|th| (0..3).map(move |i| worker_owner(th, i)));
    drain(&a, live, owners);
    refused > 0
}

/// Explores `f`, which returns whether its schedule reached the path under test; at least
/// four schedules in five must, or the test would not test that path.
fn explore_reaching<F: Fn() -> bool + Send + Sync + 'static>(what: &'static str, f: F) {
    let (runs, reached) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (r, k) = (runs.clone(), reached.clone());
    explore(move || {
        r.fetch_add(1, Ordering::Relaxed);
        if f() {
            k.fetch_add(1, Ordering::Relaxed);
        }
    });
    let (runs, reached) = (
        runs.load(Ordering::Relaxed),
        reached.load(Ordering::Relaxed),
    );
    assert!(
        reached * 5 >= runs * 4,
        "only {reached} of {runs} schedules {what}"
    );
}

#[test]
fn full_filesystem_linux_6_18() {
    explore_reaching("ran out of space", || {
        full_filesystem(Policy::Linux618, false)
    });
}

#[test]
fn full_filesystem_proposed_optimized() {
    explore_reaching("ran out of space", || {
        full_filesystem(Policy::Proposed, true)
    });
}

/// The same with bigalloc clusters of 4 blocks: the claims, refusals, frees (whole clusters)
/// and discards work in clusters, requests in blocks.
#[test]
fn full_filesystem_bigalloc_linux_6_18() {
    explore_reaching("ran out of space", || {
        full_filesystem_of(Policy::Linux618, true, 2)
    });
}

#[test]
fn full_filesystem_linux_6_16_optimized() {
    explore_reaching("ran out of space", || {
        full_filesystem(Policy::Linux616, true)
    });
}

/// One thread appends to a file (its blocks come from the file's inode PA); another frees
/// those blocks naming the wrong owner, which must retire the PA that handed them out
/// whoever owns it (the group's PA list, with the group lock dropped to take the owner's
/// lock: owner before group), and commits; a third discards the file's PAs. A PA that
/// outlived the free would hand the blocks out a second time after the commit.
fn wrong_owner_frees(policy: Policy) {
    let a = fs(policy, true, None, 0);
    let held = Holders::new();
    let handed = Arc::new(shuttle::sync::Mutex::new(Vec::<Extent>::new()));
    let writer = {
        let (a, held, handed) = (a.clone(), held.clone(), handed.clone());
        thread::spawn(move || {
            let mut live = Vec::new();
            for i in 0..10u32 {
                let req = request(1, i * 8, 8, 1, 0, 300);
                if let Ok(x) = a.allocate(&req) {
                    held.claim(x.extent, 0);
                    if i % 2 == 0 {
                        held.release(x.extent);
                        handed.lock().unwrap().push(x.extent);
                    } else {
                        live.push((1, x.extent));
                    }
                }
            }
            live
        })
    };
    let freer = {
        let (a, handed) = (a.clone(), handed.clone());
        thread::spawn(move || {
            for _ in 0..6 {
                let e = handed.lock().unwrap().pop();
                if let Some(e) = e {
                    a.free(2, e).unwrap();
                    a.commit().unwrap();
                }
            }
        })
    };
    let discarder = {
        let a = a.clone();
        thread::spawn(move || {
            a.discard_preallocations(1);
        })
    };
    let live = writer.join().unwrap();
    freer.join().unwrap();
    discarder.join().unwrap();
    let rest: Vec<_> = handed.lock().unwrap().drain(..).map(|e| (2, e)).collect();
    drain(
        &a,
        live.into_iter().chain(rest).collect(),
        [1, 2].into_iter(),
    );
}

#[test]
fn wrong_owner_frees_linux_6_18() {
    explore(|| wrong_owner_frees(Policy::Linux618));
}

#[test]
fn wrong_owner_frees_proposed() {
    explore(|| wrong_owner_frees(Policy::Proposed));
}

/// Two threads allocate, free and commit while a third writes tunables (the scan indexes
/// are rebuilt when `mb_optimize_scan` flips, the busy-group try-lock comes and goes).
fn tunables_under_load(policy: Policy) {
    let a = fs(policy, true, None, 0);
    let held = Holders::new();
    let workers: Vec<_> = (0..2u64)
        .map(|th| {
            worker(&a, &held, th, move |owner, i| {
                request(owner, i * 40, 1 + i * 13 % 40, (i % 4) as u8, th as u32, 0)
            })
        })
        .collect();
    let tuner = {
        let a = a.clone();
        thread::spawn(move || {
            for (name, value) in [
                ("mb_optimize_scan", "0"),
                ("try_lock_groups", "0"),
                ("order_lists", "1"),
                ("mb_optimize_scan", "1"),
                ("try_lock_groups", "1"),
                ("order_lists", "0"),
            ] {
                a.set_tunable(name, value).unwrap();
            }
        })
    };
    let live = join_all(workers);
    tuner.join().unwrap();
    let owners = (0..2).flat_map(|th| (0..3).map(move |i| worker_owner(th, i)));
    drain(&a, live, owners);
}

#[test]
fn tunables_under_load_linux_6_18() {
    explore(|| tunables_under_load(Policy::Linux618));
}

#[test]
fn tunables_under_load_proposed() {
    explore(|| tunables_under_load(Policy::Proposed));
}

/// Lazily loaded groups in a cache of two: loads, evictions (victims taken only with a
/// try-lock), a prefetch reader thread and the requests, frees and commits of two threads
/// race. Every block a thread holds must be in use in its group's bitmap at the end, evicted
/// groups reloaded included. Returns whether a group was evicted and a prefetched bitmap was
/// loaded.
fn lazy_small_cache(policy: Policy, m: Mount) -> bool {
    let a = fs_of(m, policy, true, Some(2), 1);
    let held = Holders::new();
    let workers: Vec<_> = (0..2u64)
        .map(|th| {
            worker(&a, &held, th, move |owner, i| {
                let g = u64::from(i + th as u32 * 2) % GROUPS;
                let goal = g * u64::from(BPG) + u64::from(i % 5) * 40;
                let kind = if i % 4 == 0 { 1 } else { 2 };
                request(owner, i * 40, 1 + i * 11 % 30, kind, th as u32, goal)
            })
        })
        .collect();
    let live = join_all(workers);
    let geo = *a.geometry();
    for g in 0..geo.group_count() {
        let bits = a.disk_bitmap(g).unwrap();
        for i in 0..geo.group_len(g) {
            let b = geo.block_of(g, i) as usize;
            if held.0[b].load(Ordering::Relaxed) != 0 {
                assert!(bits.get(i), "block {b}, held, free on disk");
            }
        }
    }
    let stats = a.stats();
    let reached = stats.evictions > 0 && stats.prefetch_loads > 0;
    let owners = (0..2).flat_map(|th| (0..3).map(move |i| worker_owner(th, i)));
    drain(&a, live, owners);
    reached
}

#[test]
fn lazy_small_cache_linux_6_18() {
    explore_reaching("evicted a group and loaded a prefetched one", || {
        lazy_small_cache(Policy::Linux618, X86)
    });
}

#[test]
fn lazy_small_cache_proposed() {
    explore_reaching("evicted a group and loaded a prefetched one", || {
        lazy_small_cache(Policy::Proposed, X86)
    });
}

/// The same with 1 KiB blocks, where every build also builds the group's buddy-cache
/// page-mate, one group lock at a time, while the other thread may be building the mate.
#[test]
fn lazy_small_cache_page_mates() {
    explore_reaching("evicted a group and loaded a prefetched one", || {
        lazy_small_cache(
            Policy::Linux618,
            Mount {
                block_size: 1024,
                ..X86
            },
        )
    });
}

/// The same without a journal on 16 KiB pages (two 4 KiB-block groups a page): frees go
/// back to the buddy at once, under the group lock, while page builds and evictions race.
#[test]
fn lazy_small_cache_no_journal_16k_pages() {
    explore_reaching("evicted a group and loaded a prefetched one", || {
        lazy_small_cache(
            Policy::Linux618,
            Mount {
                page_size: 16384,
                journal: false,
                ..X86
            },
        )
    });
}

/// The allocator on an in-memory durable store: two threads allocate, free and commit while
/// a third commits (the journal lock and the commit lock, frees released only after their
/// batch is durable, or at once without a journal). After a final commit an allocator opened on the store sees exactly the
/// live one's disk bitmaps and free count, every held block used. (A second allocator opened
/// on the store while the first still commits is not a supported use: it reads descriptors
/// at open and bitmaps later, so a commit between the two makes them disagree.)
fn durable_commits(policy: Policy, journal: bool) {
    use mballoc::store::{Extent as StoreExtent, MemStore};
    let geo = Geometry::new(4096, BPG, GROUPS * u64::from(BPG), 0, 4).unwrap();
    let store = Arc::new(MemStore::new(geo, &[StoreExtent::new(0, RESERVED)]).unwrap());
    let a = Arc::new(
        Allocator::builder(geo)
            .tunables(policy.tunables(&geo, 2))
            .cpus(2)
            .store(store.clone())
            .journal(journal)
            .build()
            .unwrap(),
    );
    let held = Holders::new();
    let workers: Vec<_> = (0..2u64)
        .map(|th| {
            let (a, held, store) = (a.clone(), held.clone(), store.clone());
            thread::spawn(move || {
                let mut live = Vec::new();
                for i in 0..8u32 {
                    let owner = worker_owner(th, i);
                    let goal = u64::from(i * 131 + th as u32 * 517) % (GROUPS * u64::from(BPG));
                    let req = request(owner, i * 40, 1 + i * 17 % 60, 2, th as u32, goal);
                    let before = store.last_commit();
                    if let Ok(x) = a.allocate(&req) {
                        held.claim(x.extent, th as u8);
                        live.push((owner, x.extent));
                        if journal {
                            reused_only_when_durable(&*store, before, x.extent);
                        }
                    }
                    if i % 2 == 1 {
                        let (o, e) = live.swap_remove(0);
                        held.release(e);
                        a.free(o, e).unwrap();
                    }
                    if i % 4 == 3 {
                        a.commit().unwrap();
                    }
                }
                live
            })
        })
        .collect();
    let committer = {
        let a = a.clone();
        thread::spawn(move || {
            for _ in 0..3 {
                a.commit().unwrap();
            }
        })
    };
    let live = join_all(workers);
    committer.join().unwrap();
    a.commit().unwrap();
    let b = Allocator::open(store.clone()).unwrap();
    assert_eq!(b.free_blocks(), a.free_blocks());
    for g in 0..GROUPS as u32 {
        assert_eq!(
            b.disk_bitmap(g).unwrap(),
            a.disk_bitmap(g).unwrap(),
            "group {g}"
        );
    }
    for &(_, e) in &live {
        for x in e.start..e.end() {
            let (g, off) = geo.locate(x);
            assert!(
                b.disk_bitmap(g).unwrap().get(off),
                "held block {x} free after reopen"
            );
        }
    }
    drop(b);
    drain(&a, live, std::iter::empty());
}

/// A block handed out must be free in the store's last commit: a freed block is reused only
/// once the free is durable, or a crash could bring back the extent that held it. Checked
/// when no commit landed since `before` (read before the allocation): one that did may hold
/// the allocation itself.
fn reused_only_when_durable(store: &dyn Store, before: CommitId, e: Extent) {
    let geo = store.geometry();
    let mut stored = Vec::new();
    for x in e.start..e.end() {
        let (g, off) = geo.locate(x);
        let bits = store.read_bitmap(g).unwrap();
        stored.push(Bitmap::from_bytes(bits.as_bytes(), geo.clusters_per_group()).get(off));
    }
    if store.last_commit() == before {
        let used: Vec<u64> = (e.start..e.end())
            .zip(stored)
            .filter(|p| p.1)
            .map(|p| p.0)
            .collect();
        assert!(
            used.is_empty(),
            "blocks {used:?} handed out, still used in the last commit"
        );
    }
}

#[test]
fn durable_commits_linux_6_18() {
    explore(|| durable_commits(Policy::Linux618, true));
}

#[test]
fn durable_commits_proposed() {
    explore(|| durable_commits(Policy::Proposed, true));
}

/// Without a journal a freed block can be handed out again before the commit, even while
/// another thread's commit takes the batch: the store must still end with exactly the
/// allocator's bitmaps (a block freed and reallocated before a commit stays in use).
#[test]
fn durable_commits_no_journal() {
    explore(|| durable_commits(Policy::Linux618, false));
}
