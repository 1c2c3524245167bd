//! The allocator on a durable store, case by case: lazy open, commits that are durable and
//! atomic, frees reusable only after a durable commit, uncommitted work lost on a crash, and
//! failed commits that lose nothing and succeed on retry (whether or not the failed batch
//! reached the disk).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mballoc::store::{
    BitmapBytes, Commit, CommitId, FaultDevice, FaultPlan, FileStore, FileStoreOptions, GroupDesc,
    MemDevice, MemStore, Problem, Store, StoreError, StoreStats,
};
use mballoc::{Allocator, Error, Extent, Flags, Geometry, Request};

/// 8 groups of 1024 one-KiB blocks.
fn geometry() -> Geometry {
    Geometry::new(1024, 1024, 8 * 1024, 0, 1).unwrap()
}

fn opts() -> FileStoreOptions {
    FileStoreOptions { log_len: 64 << 10 }
}

fn new_image() -> Vec<u8> {
    let g = geometry();
    let dev = Arc::new(MemDevice::new(FileStore::required_len(&g, opts()).unwrap()));
    FileStore::create_on(
        dev.clone(),
        g,
        &[mballoc::store::Extent::new(0, 10)],
        opts(),
    )
    .unwrap();
    dev.to_bytes()
}

fn open_mem(image: Vec<u8>) -> (Arc<MemDevice>, Arc<FileStore>, Allocator) {
    let dev = Arc::new(MemDevice::from_bytes(image));
    let store = Arc::new(FileStore::open_on(dev.clone()).unwrap());
    let a = Allocator::open(store.clone()).unwrap();
    (dev, store, a)
}

/// A metadata-style request (no preallocation): exactly `len` blocks near `goal`.
fn req(len: u32, goal: u64) -> Request {
    Request::new(7, 0, len).with_flags(Flags(0)).with_goal(goal)
}

fn used_on_disk(a: &Allocator, block: u64) -> bool {
    let (g, off) = a.geometry().locate(block);
    a.disk_bitmap(g).unwrap().get(off)
}

#[test]
fn open_reads_no_bitmap_until_a_group_is_needed() {
    let (_, store, a) = open_mem(new_image());
    assert_eq!(store.stats().bitmap_loads, 0);
    assert_eq!(a.free_blocks(), 8 * 1024 - 10);
    // 256 groups: one allocation reads its goal group and a prefetch window, not all.
    let g = Geometry::new(1024, 1024, 256 * 1024, 0, 16).unwrap();
    let store = Arc::new(MemStore::new(g, &[]).unwrap());
    let a = Allocator::open(store.clone()).unwrap();
    assert_eq!(store.stats().bitmap_loads, 0);
    a.allocate(&req(4, 3000)).unwrap();
    let loads = store.stats().bitmap_loads;
    assert!((1..64).contains(&loads), "{loads} loads for one allocation");
}

#[test]
fn commit_is_durable_and_uncommitted_allocations_are_free_after_a_crash() {
    let (dev, _, a) = open_mem(new_image());
    let kept = a.allocate(&req(16, 2000)).unwrap().extent;
    assert_eq!(a.commit().unwrap(), 1);
    let lost = a.allocate(&req(16, 5000)).unwrap().extent;
    assert!(used_on_disk(&a, lost.start));
    drop(a); // crash: nothing after the commit reached the store
    let (_, store, b) = open_mem(dev.to_bytes());
    assert_eq!(store.last_commit(), CommitId(1));
    assert!((kept.start..kept.end()).all(|x| used_on_disk(&b, x)));
    assert!((lost.start..lost.end()).all(|x| !used_on_disk(&b, x)));
    assert_eq!(b.free_blocks(), 8 * 1024 - 10 - 16);
    b.check_consistency().unwrap();
}

#[test]
fn a_free_is_reusable_only_once_its_commit_is_durable() {
    let (dev, _, a) = open_mem(new_image());
    // Take everything, commit, then free one extent.
    let mut got = Vec::new();
    while let Ok(x) = a.allocate(&req(1024, 0)) {
        got.push(x.extent);
    }
    assert_eq!(a.free_blocks(), 0);
    a.commit().unwrap();
    let e = got[3];
    a.free(7, e).unwrap();
    assert!(matches!(
        a.allocate(&req(1, 0)),
        Err(Error::NoSpace { pending, .. }) if pending == u64::from(e.len)
    ));
    // Not durable yet: a crash now keeps the blocks in use.
    let (_, _, before) = open_mem(dev.to_bytes());
    assert!(used_on_disk(&before, e.start));
    a.commit().unwrap();
    assert_eq!(a.allocate(&req(1, 0)).unwrap().extent.start, e.start);
    let (_, _, after) = open_mem(dev.to_bytes());
    assert!(!used_on_disk(&after, e.start + 1));
    assert_eq!(after.free_blocks(), u64::from(e.len));
}

#[test]
fn allocate_then_free_before_commit_leaves_the_blocks_free() {
    let (dev, _, a) = open_mem(new_image());
    let e = a.allocate(&req(8, 100)).unwrap().extent;
    a.free(7, e).unwrap();
    a.commit().unwrap();
    let (_, _, b) = open_mem(dev.to_bytes());
    assert_eq!(b.free_blocks(), 8 * 1024 - 10);
}

#[test]
fn builder_with_a_store_equals_open() {
    let dev = Arc::new(MemDevice::from_bytes(new_image()));
    let store = FileStore::open_on(dev).unwrap();
    let a = Allocator::builder(geometry()).store(store).build().unwrap();
    assert_eq!(a.free_blocks(), 8 * 1024 - 10);
    assert!(a.store().is_some());
    let other = Geometry::new(1024, 1024, 4 * 1024, 0, 1).unwrap();
    let store = MemStore::new(geometry(), &[]).unwrap();
    assert!(matches!(
        Allocator::builder(other).store(store).build(),
        Err(Error::StoreGeometry { .. })
    ));
    let store = MemStore::new(geometry(), &[]).unwrap();
    assert!(matches!(
        Allocator::builder(geometry())
            .used(&[(0, 1)])
            .store(store)
            .build(),
        Err(Error::UsedWithStore { ranges: 1 })
    ));
}

#[test]
fn commit_transaction_is_durable_too() {
    let (dev, _, a) = open_mem(new_image());
    let e = a.allocate(&req(8, 100)).unwrap().extent;
    a.commit_transaction(5).unwrap();
    a.free_in_transaction(7, e, 6).unwrap();
    a.commit_transaction(6).unwrap();
    assert_eq!(a.pending_blocks(), 0);
    let (_, _, b) = open_mem(dev.to_bytes());
    assert_eq!(b.free_blocks(), 8 * 1024 - 10);
}

/// A store that fails its next commit on demand: before touching the inner store, or after
/// the inner commit took effect (an error that lies about the outcome, as an fsync error can).
struct Flaky<S> {
    inner: S,
    fail_before: AtomicBool,
    fail_after: AtomicBool,
}

impl<S: Store> Flaky<S> {
    fn new(inner: S) -> Self {
        Flaky {
            inner,
            fail_before: AtomicBool::new(false),
            fail_after: AtomicBool::new(false),
        }
    }
}

fn eio() -> StoreError {
    StoreError::Io {
        op: "flaky",
        offset: 0,
        kind: std::io::ErrorKind::Other,
        message: "injected".into(),
    }
}

impl<S: Store> Store for Flaky<S> {
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }
    fn descriptor(&self, group: u32) -> Result<GroupDesc, StoreError> {
        self.inner.descriptor(group)
    }
    fn descriptors(&self) -> Vec<GroupDesc> {
        self.inner.descriptors()
    }
    fn read_bitmap(&self, group: u32) -> Result<BitmapBytes, StoreError> {
        self.inner.read_bitmap(group)
    }
    fn commit(&self, commit: &Commit) -> Result<CommitId, StoreError> {
        if self.fail_before.swap(false, Ordering::SeqCst) {
            return Err(eio());
        }
        let id = self.inner.commit(commit)?;
        if self.fail_after.swap(false, Ordering::SeqCst) {
            return Err(eio());
        }
        Ok(id)
    }
    fn last_commit(&self) -> CommitId {
        self.inner.last_commit()
    }
    fn corrupt_groups(&self) -> Vec<u32> {
        self.inner.corrupt_groups()
    }
    fn verify(&self) -> Result<Vec<Problem>, StoreError> {
        self.inner.verify()
    }
    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }
}

fn on_disk(store: &dyn Store, block: u64) -> bool {
    let (g, off) = store.geometry().locate(block);
    store.read_bitmap(g).unwrap().is_used(off)
}

#[test]
fn a_commit_that_failed_before_the_disk_is_resent() {
    let store = Arc::new(Flaky::new(MemStore::new(geometry(), &[]).unwrap()));
    let a = Allocator::open(store.clone()).unwrap();
    let e = a.allocate(&req(8, 100)).unwrap().extent;
    a.commit().unwrap();
    a.free(7, e).unwrap();
    let f = a.allocate(&req(4, 3000)).unwrap().extent;
    store.fail_before.store(true, Ordering::SeqCst);
    let err = a.commit().unwrap_err();
    assert!(
        matches!(err, Error::CommitFailed { pending: 8, .. }),
        "{err}"
    );
    assert_eq!(a.stats().commit_failures, 1);
    // Nothing reached the store, the free is still pending, the allocator keeps working.
    assert!(on_disk(&*store, e.start) && !on_disk(&*store, f.start));
    assert_eq!(a.pending_blocks(), 8);
    let g = a.allocate(&req(2, 6000)).unwrap().extent;
    a.commit().unwrap();
    assert_eq!(store.last_commit(), CommitId(2));
    assert!(!on_disk(&*store, e.start) && on_disk(&*store, f.start) && on_disk(&*store, g.start));
    assert_eq!(a.pending_blocks(), 0);
    assert_eq!(a.free_blocks(), 8 * 1024 - 6);
}

#[test]
fn a_commit_that_landed_despite_its_error_is_not_sent_twice() {
    let store = Arc::new(Flaky::new(MemStore::new(geometry(), &[]).unwrap()));
    let a = Allocator::open(store.clone()).unwrap();
    let e = a.allocate(&req(8, 100)).unwrap().extent;
    store.fail_after.store(true, Ordering::SeqCst);
    assert!(a.commit().is_err());
    assert_eq!(store.last_commit(), CommitId(1));
    let f = a.allocate(&req(4, 3000)).unwrap().extent;
    a.commit().unwrap(); // would fail with AlreadyAllocated if `e` were sent again
    assert_eq!(store.last_commit(), CommitId(2));
    assert!(on_disk(&*store, e.start) && on_disk(&*store, f.start));
}

#[test]
fn a_failed_fsync_is_retried_through_recovery() {
    let dev = Arc::new(FaultDevice::new(new_image()));
    let store = Arc::new(FileStore::open_on(dev.clone()).unwrap());
    let a = Allocator::open(store.clone()).unwrap();
    let e = a.allocate(&req(8, 100)).unwrap().extent;
    a.commit().unwrap();
    a.free(7, e).unwrap();
    let f = a.allocate(&req(4, 3000)).unwrap().extent;
    for at in 0..2 {
        // Sync 0 guards the log record, sync 1 the in-place checkpoint.
        dev.set_plan(FaultPlan::FailSync { at });
        let err = a.commit().unwrap_err();
        assert!(matches!(err, Error::CommitFailed { .. }), "{err}");
        assert_eq!(a.pending_blocks(), 8, "frees stay pending");
        dev.set_plan(FaultPlan::None);
        a.commit().unwrap();
        assert_eq!(a.pending_blocks(), 0);
        let image = dev.crash(mballoc::store::CrashMode::NoneLanded);
        let (_, _, b) = open_mem(image);
        assert!(!used_on_disk(&b, e.start) && used_on_disk(&b, f.start));
        assert_eq!(b.free_blocks(), a.free_blocks());
        // Re-allocate the freed extent for the next round.
        let exact = req(8, e.start).with_flags(Flags::HINT_TRY_GOAL | Flags::HINT_GOAL_ONLY);
        assert_eq!(a.allocate(&exact).unwrap().extent, Extent::new(e.start, 8));
        a.commit().unwrap();
        a.free(7, e).unwrap();
    }
}

#[test]
fn a_dead_device_fails_commits_but_not_the_allocator() {
    let dev = Arc::new(FaultDevice::new(new_image()));
    let store = FileStore::open_on(dev.clone()).unwrap();
    let a = Allocator::open(store).unwrap();
    a.allocate(&req(8, 100)).unwrap();
    dev.set_plan(FaultPlan::LoseWrite { at: 0 });
    assert!(matches!(a.commit(), Err(Error::CommitFailed { .. })));
    assert!(matches!(a.commit(), Err(Error::CommitFailed { .. })));
    // In memory the allocator goes on (a group already loaded still serves).
    a.allocate(&req(8, 100)).unwrap();
    a.check_consistency().unwrap();
}

/// Threads allocating, freeing and committing at once. If a free could be released by a
/// commit that did not carry it, its blocks would be reallocated while still used in the
/// store, and a later store commit would fail with `AlreadyAllocated`.
#[test]
fn concurrent_frees_and_commits_never_reuse_a_block_early() {
    threads_on_the_store(None);
}

/// The same with at most two of the eight groups loaded and two background readers: clean
/// groups are dropped and read back from the store while the threads allocate, free and
/// commit, and prefetch reads race both.
#[test]
fn concurrent_work_on_a_small_cache_reloads_groups_from_the_store() {
    let a = threads_on_the_store(Some(2));
    assert!(a.stats().evictions > 0, "the cache never evicted");
}

fn threads_on_the_store(cache: Option<u32>) -> Arc<Allocator> {
    let store = Arc::new(MemStore::new(geometry(), &[]).unwrap());
    let mut b = Allocator::builder(geometry()).store(store.clone());
    if let Some(n) = cache {
        b = b.cache_groups(n).prefetch_threads(2);
    }
    let a = Arc::new(b.build().unwrap());
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                let mut live = std::collections::VecDeque::new();
                for i in 0..3000u64 {
                    let len = 1 + (i * 7 + t) as u32 % 8;
                    if let Ok(x) = a.allocate(&req(len, (t * 2048 + i * 13) % 8192)) {
                        live.push_back(x.extent);
                    }
                    if live.len() > 24 {
                        a.free(7, live.pop_front().unwrap()).unwrap();
                    }
                    if i % 3 == t % 3 {
                        a.commit().expect("commit under concurrency");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    a.commit().unwrap();
    a.check_consistency().unwrap();
    let geo = geometry();
    for g in 0..geo.group_count() {
        let mine = a.disk_bitmap(g).unwrap();
        let theirs = store.read_bitmap(g).unwrap();
        assert!(
            (0..geo.group_len(g)).all(|o| mine.get(o) == theirs.is_used(o)),
            "group {g}"
        );
    }
    a
}

/// What the threads of the test below share. Every allocator call holds `quiet` for reading;
/// `check_consistency`, whose global counters only add up between calls, holds it for writing.
struct Shared<'a> {
    a: &'a Allocator,
    store: &'a MemStore,
    threads: u32,
    quiet: std::sync::RwLock<()>,
}

impl Shared<'_> {
    /// Runs one allocator call while no check runs.
    fn call<R>(&self, f: impl FnOnce(&Allocator) -> R) -> R {
        let _running = self.quiet.read().unwrap();
        f(self.a)
    }

    /// `check_consistency` while no call runs.
    fn check(&self) {
        let _alone = self.quiet.write().unwrap();
        self.a.check_consistency().unwrap();
    }

    /// Allocation `i` of thread `t`: the even ones in its home group, the odd ones in another
    /// thread's (so groups and journal shards are shared too). Unless a commit landed
    /// meanwhile, the blocks must be free in the store, or a free was released before the
    /// commit that made it durable.
    fn allocate(&self, t: u32, i: u32) -> Extent {
        let geo = self.a.geometry();
        let home = |t: u32| t * (geo.group_count() / self.threads);
        let group = if i.is_multiple_of(2) {
            home(t)
        } else {
            home((t + i / 2) % self.threads)
        };
        let goal = geo.group_first_block(group) + u64::from(i % 64);
        let before = self.store.last_commit();
        let e = self
            .call(|a| a.allocate(&req(1 + i % 8, goal)))
            .unwrap()
            .extent;
        let (g, off) = geo.locate(e.start);
        let on_store = self.store.read_bitmap(g).unwrap();
        let reused = (off..off + e.len).find(|&o| on_store.is_used(o));
        if let (Some(o), true) = (reused, self.store.last_commit() == before) {
            panic!("thread {t} step {i}: got {e:?}, but block {o} of group {g} is still used in the store");
        }
        e
    }

    /// Thread `t`: allocations, each followed by a free of its oldest extent once it holds
    /// `KEEP`, a commit every `COMMIT_EVERY` (staggered between threads) and a check every
    /// `CHECK_EVERY` commits. Returns what it holds at the end, after its last commit.
    fn work(&self, t: u32) -> Vec<Extent> {
        const STEPS: u32 = 5000;
        const KEEP: usize = 24;
        const COMMIT_EVERY: u32 = 4;
        const CHECK_EVERY: u32 = 64;
        let mut live = std::collections::VecDeque::new();
        for i in 0..STEPS {
            live.push_back(self.allocate(t, i));
            if live.len() > KEEP {
                let e = live.pop_front().unwrap();
                self.call(|a| a.free(7, e)).unwrap();
            }
            if i % COMMIT_EVERY == t % COMMIT_EVERY {
                self.call(Allocator::commit).unwrap();
                if (i / COMMIT_EVERY).is_multiple_of(CHECK_EVERY) {
                    self.check();
                }
            }
        }
        self.call(Allocator::commit).unwrap();
        live.into()
    }
}

/// Threads allocating, freeing and committing at once, each into its own journal shard and
/// into shared ones. No free may be released before a commit made it durable (checked on
/// every allocation), and once the last commit returned the store holds exactly what the
/// threads hold: reopened, every held block is used and everything else is free.
#[test]
fn concurrent_commits_make_exactly_the_held_blocks_durable() {
    // Many groups, so a commit locks many journal shards; more threads than cores, so
    // threads are preempted mid-commit and mid-free.
    let geo = Geometry::new(1024, 256, 64 * 256, 0, 1).unwrap();
    let store = Arc::new(MemStore::new(geo, &[]).unwrap());
    let a = Allocator::open(store.clone()).unwrap();
    let free_at_start = a.free_blocks();
    let shared = Shared {
        a: &a,
        store: &store,
        threads: 16,
        quiet: std::sync::RwLock::new(()),
    };
    let held: Vec<Extent> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..shared.threads)
            .map(|t| {
                s.spawn({
                    let shared = &shared;
                    move || shared.work(t)
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert_eq!(a.pending_blocks(), 0);
    a.check_consistency().unwrap();
    let b = Allocator::open(store.clone()).unwrap();
    let held_blocks: u64 = held.iter().map(|e| u64::from(e.len)).sum();
    assert_eq!(b.free_blocks(), free_at_start - held_blocks);
    for e in &held {
        assert!(
            (e.start..e.end()).all(|x| used_on_disk(&b, x)),
            "{e:?} not durable"
        );
    }
}
