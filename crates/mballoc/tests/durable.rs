//! Model check of the durable allocator: random allocate / free / commit / crash sequences on a
//! `FileStore` over the fault-injecting device, against a reference model that knows, per
//! block, what is on disk, what waits for a commit, and what each commit left durable.
//!
//! Commits may be hit by a failed fsync (the allocator must retry through recovery) or by a
//! power cut at any write (then the machine "crashes"). After every crash the store is reopened
//! and a fresh allocator must see exactly the state of the last commit that took effect —
//! the last one that returned `Ok`, or the failed one if it reached its log record — with
//! uncommitted allocations free again, no block both allocated and free, every counter exact
//! and fsck clean. With and without a journal: without one a freed block may be handed out
//! again before the commit, and the store must still end up with exactly the allocator's
//! bitmaps (a block freed and reallocated in one batch stays in use).

use std::collections::BTreeMap;
use std::sync::Arc;

use mballoc::store::{
    CrashMode, FaultDevice, FaultPlan, FileStore, FileStoreOptions, MemDevice, Store, Tear,
};
use mballoc::{Allocator, Error, Extent, Flags, Geometry, Request};
use proptest::prelude::*;

/// 6 groups of 256 one-KiB blocks, the last one short.
fn geometry() -> Geometry {
    Geometry::new(1024, 256, 6 * 256 - 40, 0, 1).unwrap()
}

fn fresh_image() -> Vec<u8> {
    let g = geometry();
    let opts = FileStoreOptions { log_len: 32 << 10 };
    let dev = Arc::new(MemDevice::new(FileStore::required_len(&g, opts).unwrap()));
    let used = [mballoc::store::Extent::new(0, 20)];
    FileStore::create_on(dev.clone(), g, &used, opts).unwrap();
    dev.to_bytes()
}

#[derive(Debug, Clone)]
enum Fault {
    /// Sync `at` of the commit fails; the device stays up.
    FailSync { at: u64 },
    /// Power is lost at write `at` of the commit (torn or not), then the machine crashes.
    PowerCut { at: u64, torn: bool, seed: u64 },
}

#[derive(Debug, Clone)]
enum Op {
    Alloc {
        len: u32,
        goal: u64,
        kind: u8,
        owner: u64,
    },
    Free {
        pick: usize,
        trim: u32,
    },
    Commit,
    FaultyCommit(Fault),
    Crash {
        seed: u64,
        mode: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let fault = prop_oneof![
        (0u64..2).prop_map(|at| Fault::FailSync { at }),
        (0u64..8, any::<bool>(), any::<u64>()).prop_map(|(at, torn, seed)| Fault::PowerCut {
            at,
            torn,
            seed
        }),
    ];
    prop_oneof![
        8 => (1u32..80, 0u64..1496, 0u8..3, 1u64..5)
            .prop_map(|(len, goal, kind, owner)| Op::Alloc { len, goal, kind, owner }),
        5 => (any::<usize>(), 0u32..4).prop_map(|(pick, trim)| Op::Free { pick, trim }),
        3 => Just(Op::Commit),
        1 => fault.prop_map(Op::FaultyCommit),
        1 => (any::<u64>(), 0u8..3).prop_map(|(seed, mode)| Op::Crash { seed, mode }),
    ]
}

fn request(len: u32, goal: u64, kind: u8, owner: u64) -> Request {
    let r = Request::new(owner, 0, len).with_goal(goal);
    match kind {
        0 => r.with_flags(Flags(0)),
        1 => r.with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC),
        // Data with a preallocation: the surplus stays in memory only.
        _ => r.with_i_size(u64::from(len) * 1024 + 7),
    }
}

/// What a commit left on disk, and the extents that were live then.
#[derive(Debug, Clone)]
struct Durable {
    used: Vec<bool>,
    live: Vec<(u64, Extent)>,
}

/// The reference.
struct Model {
    /// On-disk view now: allocated blocks (pending frees count as free, as on disk).
    used: Vec<bool>,
    /// Freed, not yet allocatable.
    pending: Vec<bool>,
    live: Vec<(u64, Extent)>,
    /// Store commit id → the states the store may hold under it: the last durable commit and,
    /// after failed ones, what each might have made durable.
    states: BTreeMap<u64, Vec<Durable>>,
    /// The store's id of the last commit known to be durable.
    durable_id: u64,
}

impl Model {
    fn new(used_prefix: u64, blocks: u64) -> Model {
        let used: Vec<bool> = (0..blocks).map(|b| b < used_prefix).collect();
        let d = Durable {
            used: used.clone(),
            live: Vec::new(),
        };
        Model {
            pending: vec![false; used.len()],
            used,
            live: Vec::new(),
            states: BTreeMap::from([(0, vec![d])]),
            durable_id: 0,
        }
    }

    fn snapshot(&self) -> Durable {
        Durable {
            used: self.used.clone(),
            live: self.live.clone(),
        }
    }

    fn allocatable(&self) -> u64 {
        self.used
            .iter()
            .zip(&self.pending)
            .filter(|(u, p)| !**u && !**p)
            .count() as u64
    }

    /// A commit returned `Ok`: everything so far is durable under id `durable_id + 1` (or the
    /// same id if there was nothing to write), including a failed batch it settled.
    fn committed(&mut self, store_id: u64) {
        self.pending.iter_mut().for_each(|p| *p = false);
        self.durable_id = store_id;
        self.states = BTreeMap::from([(store_id, vec![self.snapshot()])]);
    }

    /// A commit failed. Today's state may yet take effect under any id from the next one up
    /// to one past the highest still possible: an earlier failed batch may have landed
    /// (settled by this commit or not) and today's batch may have landed after it.
    fn failed(&mut self) {
        let top = *self.states.keys().last().expect("never empty");
        let now = self.snapshot();
        for id in self.durable_id + 1..=top + 1 {
            self.states.entry(id).or_default().push(now.clone());
        }
    }

    /// After a crash and reopen at `id`.
    fn reopened(&mut self, id: u64, on_disk: &[bool]) -> Result<(), TestCaseError> {
        let Some(candidates) = self.states.get(&id) else {
            return Err(TestCaseError::fail(format!(
                "reopened at commit {id}, expected one of {:?}",
                self.states.keys().collect::<Vec<_>>()
            )));
        };
        let Some(d) = candidates.iter().find(|d| d.used == on_disk).cloned() else {
            return Err(TestCaseError::fail(format!(
                "reopened at commit {id} with a state none of its {} candidates has",
                candidates.len()
            )));
        };
        self.used = d.used.clone();
        self.live = d.live.clone();
        self.pending.iter_mut().for_each(|p| *p = false);
        self.durable_id = id;
        self.states = BTreeMap::from([(id, vec![d])]);
        Ok(())
    }
}

struct World {
    dev: Arc<FaultDevice>,
    store: Arc<FileStore>,
    a: Allocator,
    cache: bool,
    journal: bool,
}

/// Opens the allocator on `image`; `cache`: keep at most 2 groups loaded, so that clean
/// groups are dropped and read back from the store all the time; `journal`: frees wait for a
/// commit.
fn boot(image: Vec<u8>, cache: bool, journal: bool) -> Result<World, TestCaseError> {
    let dev = Arc::new(FaultDevice::new(image));
    let store = Arc::new(
        FileStore::open_on(dev.clone()).map_err(|e| TestCaseError::fail(format!("open: {e}")))?,
    );
    let mut b = Allocator::builder(store.geometry())
        .store(store.clone())
        .journal(journal);
    if cache {
        b = b.cache_groups(2);
    }
    let a = b.build().map_err(|e| TestCaseError::fail(e.to_string()))?;
    Ok(World {
        dev,
        store,
        a,
        cache,
        journal,
    })
}

/// The allocator's on-disk view, block by block.
fn disk_state(w: &World) -> Result<Vec<bool>, TestCaseError> {
    let geo = w.a.geometry();
    let mut used = vec![false; geo.blocks_count() as usize];
    for g in 0..geo.group_count() {
        let disk =
            w.a.disk_bitmap(g)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        for off in 0..geo.group_len(g) {
            used[geo.block_of(g, off) as usize] = disk.get(off);
        }
    }
    Ok(used)
}

/// Everything the allocator and store say must match the model exactly.
fn check(w: &World, m: &Model) -> Result<(), TestCaseError> {
    let geo = w.a.geometry();
    w.a.check_consistency().map_err(TestCaseError::fail)?;
    let disk = disk_state(w)?;
    if let Some(b) = (0..disk.len()).find(|&b| disk[b] != m.used[b]) {
        let (g, off) = geo.locate(b as u64);
        return Err(TestCaseError::fail(format!(
            "block {b} (group {g} offset {off}): allocator says used={}, model {}",
            disk[b], m.used[b]
        )));
    }
    let free = m.used.iter().filter(|&&u| !u).count() as u64;
    prop_assert_eq!(w.a.free_blocks(), free);
    prop_assert_eq!(
        w.a.pending_blocks(),
        m.pending.iter().filter(|&&p| p).count() as u64
    );
    prop_assert!(w.a.corrupt_groups().is_empty());
    Ok(())
}

/// Crash now, reopen, and check the state is the one the store says it committed last.
fn crash(w: &mut World, m: &mut Model, mode: CrashMode) -> Result<(), TestCaseError> {
    let image = w.dev.crash(mode);
    *w = boot(image, w.cache, w.journal)?;
    let id = w.store.last_commit().0;
    m.reopened(id, &disk_state(w)?)?;
    let problems = w
        .store
        .verify()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(problems.is_empty(), "fsck after reopen: {:?}", problems);
    check(w, m)
}

fn commit(w: &World, m: &mut Model) -> Result<(), TestCaseError> {
    match w.a.commit() {
        Ok(_) => {
            m.committed(w.store.last_commit().0);
            Ok(())
        }
        Err(e) => Err(TestCaseError::fail(format!("commit: {e}"))),
    }
}

fn faulty_commit(w: &mut World, m: &mut Model, f: &Fault) -> Result<(), TestCaseError> {
    let plan = match *f {
        Fault::FailSync { at } => FaultPlan::FailSync { at },
        Fault::PowerCut {
            at, torn: false, ..
        } => FaultPlan::LoseWrite { at },
        Fault::PowerCut {
            at,
            torn: true,
            seed,
        } => FaultPlan::TearWrite {
            at,
            tear: Tear::Sectors { seed },
        },
    };
    w.dev.set_plan(plan);
    let result = w.a.commit();
    w.dev.set_plan(FaultPlan::None);
    match result {
        Ok(_) => m.committed(w.store.last_commit().0),
        Err(Error::CommitFailed { .. }) => m.failed(),
        Err(e) => return Err(TestCaseError::fail(format!("faulty commit: {e}"))),
    }
    if let Fault::PowerCut { seed, .. } = *f {
        if w.dev.is_dead() {
            return crash(w, m, CrashMode::Random { seed });
        }
    }
    Ok(())
}

fn alloc(w: &World, m: &mut Model, req: &Request) -> Result<(), TestCaseError> {
    match w.a.allocate(req) {
        Ok(got) => {
            let e = got.extent;
            prop_assert!(e.len >= 1 && e.len <= req.len);
            for b in e.start..e.end() {
                let (u, p) = (m.used[b as usize], m.pending[b as usize]);
                prop_assert!(
                    !u && !p,
                    "block {} handed out while used {} pending {}",
                    b,
                    u,
                    p
                );
                m.used[b as usize] = true;
            }
            m.live.push((req.owner, e));
        }
        Err(Error::NoSpace { .. }) => prop_assert!(m.allocatable() < u64::from(req.len)),
        Err(e) => return Err(TestCaseError::fail(format!("allocate: {e}"))),
    }
    Ok(())
}

fn free(w: &World, m: &mut Model, pick: usize, trim: u32) -> Result<(), TestCaseError> {
    if m.live.is_empty() {
        return Ok(());
    }
    let (owner, mut e) = m.live.swap_remove(pick % m.live.len());
    if trim > 0 && e.len > trim {
        m.live.push((owner, Extent::new(e.start, e.len - trim)));
        e = Extent::new(e.start + u64::from(e.len - trim), trim);
    }
    w.a.free(owner, e)
        .map_err(|err| TestCaseError::fail(format!("free {e:?}: {err}")))?;
    for b in e.start..e.end() {
        m.used[b as usize] = false;
        m.pending[b as usize] = w.journal;
    }
    Ok(())
}

fn run(ops: Vec<Op>, cache: bool, journal: bool) -> Result<(), TestCaseError> {
    let geo = geometry();
    let mut w = boot(fresh_image(), cache, journal)?;
    let mut m = Model::new(20, geo.blocks_count());
    for op in &ops {
        match op {
            Op::Alloc {
                len,
                goal,
                kind,
                owner,
            } => alloc(&w, &mut m, &request(*len, *goal, *kind, *owner))?,
            Op::Free { pick, trim } => free(&w, &mut m, *pick, *trim)?,
            Op::Commit => commit(&w, &mut m)?,
            Op::FaultyCommit(f) => faulty_commit(&mut w, &mut m, f)?,
            Op::Crash { seed, mode } => {
                let mode = match mode {
                    0 => CrashMode::NoneLanded,
                    1 => CrashMode::AllLanded,
                    _ => CrashMode::Random { seed: *seed },
                };
                crash(&mut w, &mut m, mode)?;
            }
        }
        check(&w, &m)?;
    }
    // Whatever happened, a final commit and crash must keep all of it.
    commit(&w, &mut m)?;
    crash(&mut w, &mut m, CrashMode::NoneLanded)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn durable_allocator_matches_the_model(
        ops in prop::collection::vec(op(), 1..60),
        cache in any::<bool>(),
        journal in any::<bool>(),
    ) {
        run(ops, cache, journal)?;
    }
}
