//! Process-crash test: a child process commits to a real `FileStore` file in a loop and is
//! killed with SIGKILL at random moments, 20 times. After each kill the parent reopens the
//! store and checks it holds exactly the state of the last commit the child started or the one
//! before it, reproduced from the same deterministic commit generator.
//!
//! The child is this test binary run again with `CHILD_ENV` set, filtered to
//! `child_process_entry`; without the variable that test does nothing. The child stops by
//! itself after `CHILD_MAX_COMMITS` commits, `CHILD_DEADLINE`, or when its stdout is closed.

mod store_support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use mballoc::store::{CommitId, FileStore, Store};
use mballoc::Geometry;
use store_support::{check_descriptors, random_commit, store_bitmaps, Model, Rng};

const CHILD_ENV: &str = "MBALLOC_STORE_KILL_CHILD";
/// Commits per child run; bounds the parent's replay of the generator too.
const CHILD_MAX_COMMITS: u64 = 5_000;
const CHILD_DEADLINE: Duration = Duration::from_secs(20);
const KILLS: usize = 20;

fn geometry() -> Geometry {
    Geometry::new(1024, 8192, 8192 * 6 - 500, 0, 1).unwrap()
}

/// The commit with id `id` is a pure function of the state before it and `id`.
fn commit_for(m: &Model, id: u64) -> mballoc::store::Commit {
    random_commit(&mut Rng(0x5eed ^ id.wrapping_mul(0x9e37_79b9)), m)
}

/// The child: commit forever, announcing each commit before and after.
fn child(path: &Path) {
    let store = FileStore::open(path).expect("child: open");
    let mut m = Model::from_store(&store);
    let mut id = store.last_commit().0;
    let (start, first) = (Instant::now(), id);
    let mut out = std::io::stdout().lock();
    while id - first < CHILD_MAX_COMMITS && start.elapsed() < CHILD_DEADLINE {
        let c = commit_for(&m, id + 1);
        if writeln!(out, "begin {}", id + 1)
            .and_then(|_| out.flush())
            .is_err()
        {
            return;
        }
        let got = store.commit(&c).expect("child: commit");
        assert_eq!(got, CommitId(id + 1));
        id += 1;
        m.apply(&c);
        if writeln!(out, "ok {id}").and_then(|_| out.flush()).is_err() {
            return;
        }
    }
}

#[test]
fn child_process_entry() {
    if let Some(path) = std::env::var_os(CHILD_ENV) {
        child(Path::new(&path));
    }
}

/// What the child said before it died: the last commit it began and the last it finished.
#[derive(Debug, Default)]
struct Progress {
    begun: Option<u64>,
    done: Option<u64>,
}

/// Starts the child, kills it after `delay`, and collects its progress.
fn run_child(path: &Path, delay: Duration) -> Progress {
    let mut child = store_support::child_command("child_process_entry", CHILD_ENV, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().unwrap();
    let reader = thread::spawn(move || {
        let mut p = Progress::default();
        // Anywhere in a line: with one test thread libtest prints "test child_process_entry
        // ... " before the test runs and without a newline, so the first "begin" shares its
        // line (read as the line's first word, it was lost: a kill between the first begin and
        // the first ok then found one commit more than announced).
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let words: Vec<&str> = line.split_whitespace().collect();
            for w in words.windows(2) {
                match (w[0], w[1].parse().ok()) {
                    ("begin", Some(n)) => p.begun = Some(n),
                    ("ok", Some(n)) => p.done = Some(n),
                    _ => {}
                }
            }
        }
        p
    });
    thread::sleep(delay);
    let _ = child.kill(); // SIGKILL; fails only if the child already exited
    child.wait().expect("wait for child");
    reader.join().expect("reader thread")
}

#[test]
fn sigkill_during_commits_recovers_to_the_last_started_or_finished_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let geometry = geometry();
    let mut rng = Rng(77);
    let used = store_support::random_used(&mut rng, &geometry);
    drop(FileStore::create(&path, geometry, &used).unwrap());
    let mut m = Model::new(geometry, &used);
    let mut id = 0u64;
    let mut replays = 0;
    for round in 0..KILLS {
        let delay = Duration::from_millis(30 + rng.below(120));
        let p = run_child(&path, delay);
        // Reproduce the child's commits up to the last one it began, keeping the last two.
        let begun = p.begun.unwrap_or(id);
        let (mut prev, mut last) = ((id, m.clone()), (id, m.clone()));
        while last.0 < begun {
            let mut next = last.1.clone();
            next.apply(&commit_for(&last.1, last.0 + 1));
            let k = last.0 + 1;
            prev = std::mem::replace(&mut last, (k, next));
        }
        let store = FileStore::open(&path).unwrap_or_else(|e| panic!("round {round}: reopen: {e}"));
        replays += usize::from(store.recovered().is_some());
        let got = store.last_commit().0;
        let lowest = p.done.unwrap_or(id).max(begun.saturating_sub(1)).max(id);
        assert!(
            (lowest..=begun).contains(&got),
            "round {round}: recovered {got}, want {lowest}..={begun} ({p:?})"
        );
        let want = if got == last.0 { &last.1 } else { &prev.1 };
        assert_eq!(
            store_bitmaps(&store),
            want.bitmaps(),
            "round {round}: commit {got}'s bitmaps"
        );
        check_descriptors(&store, want).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(store.verify().unwrap(), vec![], "round {round}");
        assert!(store.corrupt_groups().is_empty());
        (id, m) = (got, want.clone());
    }
    assert!(id > 0, "the child never committed");
    eprintln!("{KILLS} kills, {id} commits survived, {replays} reopenings replayed the log");
}
