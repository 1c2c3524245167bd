//! Crash tests for `FileStore`: random commit sequences, checked against a reference model,
//! with power cut at every write, every write torn, and every sync failing, under several
//! page-cache outcomes. After each crash the store is reopened and must hold exactly the state
//! of the last commit that returned `Ok`, or (for a commit that returned an error) the state
//! after it — never a mix — with every checksum and descriptor count intact. Recovery itself is
//! then crashed at each of its writes, and a recovered store must keep committing.

mod store_support;

use std::sync::Arc;
use std::time::Instant;

use mballoc::store::{
    Commit, CommitId, CrashMode, Device, FaultDevice, FaultPlan, FileStore, FileStoreOptions,
    MemDevice, Store, Tear,
};
use mballoc::Geometry;
use proptest::prelude::*;
use store_support::{check_descriptors, random_commit, random_used, store_bitmaps, Model, Rng};

/// A commit sequence, the state after each commit, and the disk image before the first.
struct Scenario {
    commits: Vec<Commit>,
    /// `states[k]`: the model after `k` commits.
    states: Vec<Model>,
    /// `bitmaps[k]`: `states[k]` as per-group bitmaps.
    bitmaps: Vec<Vec<Vec<u8>>>,
    image: Vec<u8>,
}

fn opts() -> FileStoreOptions {
    FileStoreOptions { log_len: 32 << 10 }
}

fn scenario(geometry: Geometry, seed: u64, n: usize) -> Scenario {
    let mut rng = Rng(seed);
    let used = random_used(&mut rng, &geometry);
    let dev = Arc::new(MemDevice::new(
        FileStore::required_len(&geometry, opts()).unwrap(),
    ));
    FileStore::create_on(dev.clone(), geometry, &used, opts()).unwrap();
    let mut states = vec![Model::new(geometry, &used)];
    let mut commits = Vec::new();
    for _ in 0..n {
        let mut m = states.last().unwrap().clone();
        let c = random_commit(&mut rng, &m);
        m.apply(&c);
        commits.push(c);
        states.push(m);
    }
    let bitmaps = states.iter().map(Model::bitmaps).collect();
    Scenario {
        commits,
        states,
        bitmaps,
        image: dev.to_bytes(),
    }
}

/// Runs the scenario's commits on a fault device armed with `plan` until one fails.
/// Returns the device and how many commits returned `Ok`.
fn run(s: &Scenario, plan: FaultPlan) -> (Arc<FaultDevice>, usize) {
    let dev = Arc::new(FaultDevice::new(s.image.clone()));
    let store = FileStore::open_on(dev.clone()).unwrap();
    dev.set_plan(plan);
    let mut ok = 0;
    for c in &s.commits {
        match store.commit(c) {
            Ok(id) => {
                assert_eq!(id, CommitId(ok as u64 + 1));
                ok += 1;
            }
            Err(_) => break,
        }
    }
    (dev, ok)
}

/// Which state a store holds: `Some(k)` if it is exactly `states[k]` for an allowed `k`.
fn check_state(s: &Scenario, store: &dyn Store, allowed: &[usize]) -> Result<usize, String> {
    if !store.corrupt_groups().is_empty() {
        return Err(format!("corrupt groups {:?}", store.corrupt_groups()));
    }
    let problems = store.verify().map_err(|e| e.to_string())?;
    if !problems.is_empty() {
        return Err(format!("fsck: {problems:?}"));
    }
    // Identify the state by its commit id (two commits can leave the same bitmaps, e.g. one
    // that allocates and frees the same run), then demand the bitmaps match exactly.
    let k = store.last_commit().0 as usize;
    if !allowed.contains(&k) {
        return Err(format!("last_commit {k} is none of {allowed:?}"));
    }
    let got = store_bitmaps(store);
    if s.bitmaps[k] != got {
        let any = s.bitmaps.iter().position(|b| *b == got);
        return Err(format!(
            "last_commit {k} but the bitmaps are not its state (they match {any:?})"
        ));
    }
    check_descriptors(store, &s.states[k])?;
    Ok(k)
}

/// Reopens a crash image and checks it; returns the recovered state's index and whether
/// recovery replayed the log.
fn recover_and_check(
    s: &Scenario,
    image: Vec<u8>,
    ok: usize,
) -> Result<(usize, bool, Vec<u8>), String> {
    let dev = Arc::new(MemDevice::from_bytes(image));
    let store = FileStore::open_on(dev.clone()).map_err(|e| format!("reopen: {e}"))?;
    let allowed: Vec<usize> = (ok..=(ok + 1).min(s.commits.len())).collect();
    let k = check_state(s, &store, &allowed)?;
    Ok((k, store.recovered().is_some(), dev.to_bytes()))
}

/// A recovered store must keep working: one more commit, then reopen.
fn commit_after_recovery(s: &Scenario, image: Vec<u8>, k: usize, seed: u64) -> Result<(), String> {
    let dev = Arc::new(MemDevice::from_bytes(image));
    let store = FileStore::open_on(dev.clone()).map_err(|e| e.to_string())?;
    let mut m = s.states[k].clone();
    let c = random_commit(&mut Rng(seed), &m);
    m.apply(&c);
    let id = store
        .commit(&c)
        .map_err(|e| format!("commit after recovery: {e}"))?;
    if id != CommitId(k as u64 + 1) {
        return Err(format!("commit after recovery got {id:?}, want {}", k + 1));
    }
    drop(store);
    let store = FileStore::open_on(Arc::new(MemDevice::from_bytes(dev.to_bytes())))
        .map_err(|e| e.to_string())?;
    if store_bitmaps(&store) != m.bitmaps() || store.last_commit() != id {
        return Err("state after the post-recovery commit is wrong".into());
    }
    Ok(())
}

/// Crashes recovery itself at each of its writes; every outcome must recover to state `k`.
/// Returns the number of crash points run.
fn crash_recovery(s: &Scenario, image: &[u8], k: usize, seed: u64) -> Result<usize, String> {
    let dry = Arc::new(FaultDevice::new(image.to_vec()));
    FileStore::open_on(dry.clone()).map_err(|e| e.to_string())?;
    let writes = dry.writes();
    for at in 0..writes {
        let dev = Arc::new(FaultDevice::new(image.to_vec()));
        let tear = Tear::Sectors { seed: seed ^ at };
        dev.set_plan(if at % 2 == 0 {
            FaultPlan::LoseWrite { at }
        } else {
            FaultPlan::TearWrite { at, tear }
        });
        if FileStore::open_on(dev.clone()).is_ok() {
            return Err(format!("recovery survived a power cut at write {at}"));
        }
        let again = dev.crash(CrashMode::Random {
            seed: seed.wrapping_add(at),
        });
        let store = FileStore::open_on(Arc::new(MemDevice::from_bytes(again)))
            .map_err(|e| e.to_string())?;
        check_state(s, &store, &[k])
            .map_err(|e| format!("after a crash in recovery at write {at}: {e}"))?;
    }
    Ok(writes as usize)
}

/// The plans and crash modes tried for one scenario.
fn crash_points(writes: u64, syncs: u64, seed: u64) -> Vec<(FaultPlan, CrashMode)> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for at in 0..writes {
        for mode in [
            CrashMode::NoneLanded,
            CrashMode::AllLanded,
            CrashMode::Random { seed: rng.next() },
        ] {
            out.push((FaultPlan::LoseWrite { at }, mode));
        }
        let prefix = Tear::Prefix(rng.below(1100) as usize);
        out.push((
            FaultPlan::TearWrite { at, tear: prefix },
            CrashMode::Random { seed: rng.next() },
        ));
        let sectors = Tear::Sectors { seed: rng.next() };
        out.push((
            FaultPlan::TearWrite { at, tear: sectors },
            CrashMode::NoneLanded,
        ));
    }
    for at in 0..syncs {
        for mode in [
            CrashMode::NoneLanded,
            CrashMode::AllLanded,
            CrashMode::Random { seed: rng.next() },
        ] {
            out.push((FaultPlan::FailSync { at }, mode));
        }
    }
    out
}

#[derive(Default, Debug)]
struct Tally {
    crash_points: usize,
    replayed: usize,
    in_flight_new: usize,
    recovery_crash_points: usize,
}

fn crash_scenario(geometry: Geometry, seed: u64, commits: usize, tally: &mut Tally) {
    let s = scenario(geometry, seed, commits);
    let (dry, ok) = run(&s, FaultPlan::None);
    assert_eq!(ok, commits);
    for (i, (plan, mode)) in crash_points(dry.writes(), dry.syncs(), seed)
        .into_iter()
        .enumerate()
    {
        let (dev, ok) = run(&s, plan);
        assert!(ok < commits, "seed {seed}: {plan:?} never fired");
        let image = dev.crash(mode);
        let ctx = format!("seed {seed}, {plan:?}, {mode:?}, {ok} commits ok");
        let (k, replayed, recovered) =
            recover_and_check(&s, image.clone(), ok).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        tally.crash_points += 1;
        tally.in_flight_new += usize::from(k > ok);
        if replayed {
            tally.replayed += 1;
            if i % 8 == 0 {
                let n = crash_recovery(&s, &image, k, seed ^ i as u64)
                    .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                tally.recovery_crash_points += n;
            }
        }
        if i % 3 == 0 {
            commit_after_recovery(&s, recovered, k, seed ^ (i as u64) << 8)
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        }
    }
}

/// 1 KiB blocks, first_data_block 1, a short last group: the awkward geometry.
fn small_1k() -> Geometry {
    Geometry::new(1024, 8192, 1 + 8192 * 5 + 3001, 1, 1).unwrap()
}

/// ext4's default group shape, four groups.
fn ext4_like() -> Geometry {
    Geometry::new(4096, 32768, 4 * 32768, 0, 16).unwrap()
}

#[test]
fn every_crash_point_recovers_to_a_committed_state() {
    let t = Instant::now();
    let mut tally = Tally::default();
    for seed in 0..20 {
        crash_scenario(small_1k(), 1000 + seed, 10, &mut tally);
    }
    for seed in 0..12 {
        crash_scenario(ext4_like(), 2000 + seed, 10, &mut tally);
    }
    let total = tally.crash_points + tally.recovery_crash_points;
    eprintln!("{tally:?}: {total} crash points in {:.1?}", t.elapsed());
    assert!(
        tally.crash_points >= 10_000,
        "only {} crash points",
        tally.crash_points
    );
    assert!(tally.replayed > 0 && tally.in_flight_new > 0, "{tally:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Without faults, FileStore, MemStore and the model agree after every commit, and an
    /// invalid commit (a double allocation or a double free) is refused and changes nothing.
    #[test]
    fn stores_agree_with_the_model(seed in any::<u64>(), n in 1usize..12) {
        let geometry = small_1k();
        let mut rng = Rng(seed);
        let used = random_used(&mut rng, &geometry);
        let dev = Arc::new(MemDevice::new(FileStore::required_len(&geometry, opts()).unwrap()));
        let file = FileStore::create_on(dev.clone(), geometry, &used, opts()).unwrap();
        let mem = mballoc::store::MemStore::new(geometry, &used).unwrap();
        let mut m = Model::new(geometry, &used);
        for _ in 0..n {
            let c = random_commit(&mut rng, &m);
            m.apply(&c);
            prop_assert_eq!(file.commit(&c).unwrap(), mem.commit(&c).unwrap());
            if let Some(e) = c.allocated.iter().find(|e| m.used[e.start as usize]) {
                let again = Commit { allocated: vec![mballoc::store::Extent::new(e.start, 1)], freed: vec![] };
                prop_assert!(file.commit(&again).is_err() && mem.commit(&again).is_err());
            }
            prop_assert_eq!(store_bitmaps(&file), m.bitmaps());
            prop_assert_eq!(store_bitmaps(&mem), m.bitmaps());
            prop_assert_eq!(file.descriptors(), mem.descriptors());
        }
        let reopened = FileStore::open_on(Arc::new(MemDevice::from_bytes(dev.to_bytes()))).unwrap();
        prop_assert_eq!(store_bitmaps(&reopened), m.bitmaps());
        prop_assert_eq!(reopened.verify().unwrap(), vec![]);
        prop_assert_eq!(dev.len().unwrap(), FileStore::required_len(&geometry, opts()).unwrap());
    }
}
