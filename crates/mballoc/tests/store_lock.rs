//! One writer per store, across processes: this test binary is run again as a child that
//! opens a store file with `Allocator::open_file`, allocates, commits, and reports. A second
//! writer process must be refused at once while the first holds the store, and racing writer
//! processes must never both commit (without the lock both allocate the same blocks, both
//! commits return `Ok`, and the store keeps only one of them).
//!
//! The child is this binary filtered to `child_process_entry` with `CHILD_ENV` naming the
//! store; without the variable that test does nothing.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Stdio};
use std::time::{Duration, Instant};

use mballoc::store::{FileStore, Store};
use mballoc::{Allocator, Geometry, Request};

mod store_support;

const CHILD_ENV: &str = "MBALLOC_STORE_LOCK_CHILD";
/// `hold`: after the commit, keep the store until stdin closes. `once`: exit after it.
const ROLE_ENV: &str = "MBALLOC_STORE_LOCK_ROLE";
const BLOCKS: u32 = 100;

fn geometry() -> Geometry {
    Geometry::new(4096, 32768, 4 * 32768, 0, 1).unwrap()
}

/// The child: open, allocate `BLOCKS` blocks near block 0, commit, say `OK <commit id>` or
/// `ERR <error>`.
fn child(path: &Path, hold: bool) {
    let mut out = std::io::stdout().lock();
    let result = Allocator::open_file(path).and_then(|a| {
        a.allocate(&Request::new(1, 0, BLOCKS).with_goal(0))?;
        let id = a.commit().map(|_| a.store().map(|s| s.last_commit().0))?;
        Ok((a, id))
    });
    match result {
        Ok((a, id)) => {
            writeln!(out, "\nOK {}", id.unwrap_or(0)).unwrap();
            out.flush().unwrap();
            if hold {
                let _ = std::io::stdin().read_to_end(&mut Vec::new());
            }
            drop(a);
        }
        Err(e) => writeln!(out, "\nERR {e}").unwrap(),
    }
}

/// Tests of this binary run one at a time. A store's `flock` belongs to the open file
/// description, which a child process forked by another test shares until its `exec` closes
/// it: a store this process opened and closed could still look in use for a moment.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn child_process_entry() {
    let _serial = serial();
    if let Some(path) = std::env::var_os(CHILD_ENV) {
        let hold = std::env::var(ROLE_ENV).is_ok_and(|r| r == "hold");
        child(Path::new(&path), hold);
    }
}

fn spawn(path: &Path, role: &str) -> Child {
    store_support::child_command("child_process_entry", CHILD_ENV, path)
        .env(ROLE_ENV, role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child")
}

/// The child's `OK ...` or `ERR ...` line.
fn report(out: ChildStdout) -> String {
    BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("OK") || l.starts_with("ERR"))
        .unwrap_or_else(|| "no report".into())
}

fn new_store(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("store");
    drop(FileStore::create(&path, geometry(), &[]).unwrap());
    path
}

/// Blocks in use in the store at `path`, after a clean fsck.
fn used_blocks(path: &Path) -> u64 {
    let s = FileStore::open(path).unwrap();
    assert_eq!(s.verify().unwrap(), vec![]);
    store_support::used_blocks(&s)
}

#[test]
fn a_second_writer_process_is_refused_at_once() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = new_store(dir.path());
    let mut first = spawn(&path, "hold");
    let first_out = first.stdout.take().unwrap();
    let mut first_lines = BufReader::new(first_out).lines().map_while(Result::ok);
    let said = first_lines.find(|l| l.starts_with("OK") || l.starts_with("ERR"));
    assert_eq!(said.as_deref(), Some("OK 1"));

    let t = Instant::now();
    let mut second = spawn(&path, "once");
    let said = report(second.stdout.take().unwrap());
    second.wait().unwrap();
    assert!(
        said.starts_with("ERR") && said.contains("in use by another process"),
        "second writer: {said}"
    );
    assert!(said.contains(path.to_str().unwrap()), "{said}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());

    drop(first.stdin.take());
    first.wait().unwrap();
    let mut third = spawn(&path, "once");
    assert_eq!(report(third.stdout.take().unwrap()), "OK 2");
    third.wait().unwrap();
    assert_eq!(used_blocks(&path), 2 * u64::from(BLOCKS));
}

#[test]
fn racing_writer_processes_never_both_lose_a_commit() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = new_store(dir.path());
    let mut committed = 0;
    let mut refused = 0;
    for _ in 0..6 {
        let mut kids: Vec<Child> = (0..2).map(|_| spawn(&path, "once")).collect();
        for k in &mut kids {
            let said = report(k.stdout.take().unwrap());
            k.wait().unwrap();
            if said.starts_with("OK") {
                committed += 1;
            } else {
                assert!(said.contains("in use by another process"), "{said}");
                refused += 1;
            }
        }
    }
    println!("12 racing writers: {committed} committed, {refused} refused");
    assert_eq!(used_blocks(&path), committed * u64::from(BLOCKS));
}
