//! `mballoc mkstore / info / fsck` end to end: real files, the real binary, and damage done
//! byte by byte to see fsck name each problem.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mballoc::store::{CrashMode, Extent, FaultDevice, FaultPlan, FileStore, Store};
use mballoc::{Allocator, Flags, Request};

fn mballoc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mballoc"))
        .args(args)
        .output()
        .expect("run mballoc")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// A 1 GiB store of 4 KiB blocks (8 groups) with one committed allocation in group 3.
fn store_with_group_3_written(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("store");
    let o = mballoc(&["mkstore", path_str(&path), "--size", "1G"]);
    assert!(o.status.success(), "{}", text(&o));
    let a = Allocator::open_file(&path).unwrap();
    // An exact-goal request: a plain one may land in the first group of the flex group, as
    // ext4 skips never-read groups at the cheap criteria.
    let req = Request::new(1, 0, 100)
        .with_flags(Flags::HINT_TRY_GOAL | Flags::HINT_GOAL_ONLY)
        .with_goal(3 * 32768 + 10);
    let e = a.allocate(&req).unwrap().extent;
    assert_eq!(a.geometry().locate(e.start).0, 3);
    a.commit().unwrap();
    path
}

fn flip_byte(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x20;
    std::fs::write(path, bytes).unwrap();
}

/// Tests of this binary run one at a time. A store's `flock` belongs to the open file
/// description, which a child process forked by another test shares until its `exec` closes
/// it: a store this process opened and closed could still look in use for a moment.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn mkstore_info_fsck_on_a_fresh_1t_store() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big");
    let p = path_str(&path);
    let o = mballoc(&["mkstore", p, "--size", "1T", "--block-size", "4K"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("8192 groups"), "{}", text(&o));

    let o = mballoc(&["info", p]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for want in [
        "block size:       4096",
        "blocks:           268435456 (1.00 TiB)",
        "groups:           8192",
        "free blocks:      268435456 of 268435456",
        "corrupt groups:   none",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    let o = mballoc(&["fsck", p]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("clean"));

    // Refuses to overwrite without --force, accepts with it.
    let o = mballoc(&["mkstore", p, "--size", "1G"]);
    assert!(!o.status.success() && text(&o).contains("--force"));
    let o = mballoc(&["mkstore", p, "--size", "1G", "--force"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn info_shows_allocations_and_groups() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = store_with_group_3_written(dir.path());
    let o = mballoc(&["info", path_str(&path), "--groups"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!("free blocks:      {} of", 8 * 32768 - 100)),
        "{out}"
    );
    assert!(out.contains("last commit:      1"), "{out}");
    assert!(out.contains("never written:    7 groups"), "{out}");
    assert!(
        out.contains(&format!("\n3       {:<8} \n", 32768 - 100)),
        "{out}"
    );
}

#[test]
fn fsck_names_a_group_whose_bitmap_was_damaged() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = store_with_group_3_written(dir.path());
    assert!(mballoc(&["fsck", path_str(&path)]).status.success());
    let at = FileStore::open(&path).unwrap().bitmap_offset(3).unwrap();
    flip_byte(&path, at + 1000);
    let o = mballoc(&["fsck", path_str(&path)]);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("group 3: bitmap checksum"), "{out}");
    assert!(out.contains("1 problem(s) found"), "{out}");
}

#[test]
fn fsck_and_info_name_a_damaged_descriptor() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = store_with_group_3_written(dir.path());
    let at = FileStore::open(&path)
        .unwrap()
        .descriptor_offset(5)
        .unwrap();
    flip_byte(&path, at);
    let o = mballoc(&["fsck", path_str(&path)]);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("group 5: descriptor checksum"), "{out}");
    let o = mballoc(&["info", path_str(&path)]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("corrupt groups:   1 [5]"), "{out}");
}

#[test]
fn a_damaged_superblock_is_a_clear_error() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = store_with_group_3_written(dir.path());
    flip_byte(&path, 30);
    for cmd in ["info", "fsck"] {
        let o = mballoc(&[cmd, path_str(&path)]);
        let out = text(&o);
        assert!(!o.status.success(), "{cmd}: {out}");
        assert!(out.contains("bad superblock"), "{cmd}: {out}");
    }
    let missing = dir.path().join("missing");
    let o = mballoc(&["fsck", path_str(&missing)]);
    assert!(!o.status.success());
}

#[test]
fn bad_sizes_are_errors() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s");
    for args in [
        ["--size", "12Q"],
        ["--block-size", "3000"],
        ["--size", "100"],
        ["--log-size", "9999P"],
        ["--log-size", "4K"],
        ["--log-size", "2G"],
    ] {
        let mut all = vec!["mkstore", path_str(&p)];
        if args[0] != "--size" {
            all.extend(["--size", "1G"]);
        }
        all.extend(args);
        let o = mballoc(&all);
        let out = text(&o);
        assert!(!o.status.success(), "{args:?}: {out}");
        assert!(
            out.contains(args[0]),
            "{args:?}: the error does not name it: {out}"
        );
        assert!(!out.contains("I/O error"), "{args:?}: {out}");
        assert!(!p.exists(), "{args:?} left a file behind");
    }
}

/// A store whose second commit reached only its log record, as a crash leaves it.
fn store_with_unapplied_log(dir: &Path) -> std::path::PathBuf {
    let path = store_with_group_3_written(dir);
    let fault = Arc::new(FaultDevice::new(std::fs::read(&path).unwrap()));
    let s = FileStore::open_on(fault.clone()).unwrap();
    fault.set_plan(FaultPlan::LoseWrite { at: 1 });
    let c = mballoc::store::Commit {
        allocated: vec![Extent::new(5 * 32768, 64)],
        freed: vec![],
    };
    assert!(s.commit(&c).is_err());
    std::fs::write(&path, fault.crash(CrashMode::NoneLanded)).unwrap();
    path
}

#[test]
fn info_and_fsck_change_no_byte_of_a_store_with_an_unapplied_log() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = store_with_unapplied_log(dir.path());
    let before = std::fs::read(&path).unwrap();
    let o = mballoc(&["info", path_str(&path)]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("last commit:      2"), "{out}");
    assert!(
        out.contains("unapplied log:    commit 2 replayed in memory"),
        "{out}"
    );
    let o = mballoc(&["fsck", path_str(&path)]);
    assert!(
        text(&o).contains("log record 2 is complete but not applied"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read(&path).unwrap(), before, "info or fsck wrote");
    // The next writer applies it.
    drop(FileStore::open(&path).unwrap());
    assert_ne!(std::fs::read(&path).unwrap(), before);
    assert!(mballoc(&["fsck", path_str(&path)]).status.success());
}

#[test]
fn info_and_fsck_beside_a_live_writer_refuse_and_change_nothing() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = store_with_group_3_written(dir.path());
    let writer = Allocator::open_file(&path).unwrap();
    writer.allocate(&Request::new(2, 0, 10)).unwrap();
    writer.commit().unwrap();
    let before = std::fs::read(&path).unwrap();
    for cmd in ["info", "fsck"] {
        let o = mballoc(&[cmd, path_str(&path)]);
        let out = text(&o);
        assert!(!o.status.success(), "{cmd}: {out}");
        assert!(out.contains("in use by another process"), "{cmd}: {out}");
    }
    let t = Instant::now();
    let o = mballoc(&["info", path_str(&path), "--wait", "0.3"]);
    assert!(!o.status.success() && t.elapsed() >= Duration::from_millis(300));
    assert_eq!(std::fs::read(&path).unwrap(), before, "a reader wrote");

    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        drop(writer);
    });
    let o = mballoc(&["fsck", path_str(&path), "--wait", "30"]);
    assert!(o.status.success(), "{}", text(&o));
    closer.join().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn a_fifo_or_character_device_is_refused_at_once() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let t = Instant::now();
    for p in [path_str(&fifo), "/dev/null"] {
        for cmd in ["info", "fsck"] {
            let o = mballoc(&[cmd, p]);
            let out = text(&o);
            assert!(!o.status.success(), "{cmd} {p}: {out}");
            assert!(out.contains("not a regular file or block device"), "{out}");
        }
    }
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

/// A store of 2^20 groups (8 TiB of 1 KiB blocks): 16 MiB of descriptors.
fn million_group_store(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("million");
    let o = mballoc(&[
        "mkstore",
        path_str(&path),
        "--size",
        "8T",
        "--block-size",
        "1K",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("1048576 groups"), "{}", text(&o));
    path
}

#[test]
fn hostile_sparse_store_is_refused_and_zeroed_descriptors_cost_linear_time() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = million_group_store(dir.path());
    let len = std::fs::metadata(&path).unwrap().len();

    // Only the superblock, in a file as long as the layout: a 4 KiB store claiming it all.
    let hostile = dir.path().join("hostile");
    let sb = std::fs::read(&path).unwrap()[..4096].to_vec();
    std::fs::write(&hostile, sb).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&hostile)
        .unwrap()
        .set_len(len)
        .unwrap();
    let t = Instant::now();
    let o = mballoc(&["info", path_str(&hostile)]);
    let took = t.elapsed();
    println!("info refused a hostile 4 KiB store of 2^20 groups in {took:?}");
    assert!(
        !o.status.success() && text(&o).contains("hole"),
        "{}",
        text(&o)
    );
    assert!(took < Duration::from_secs(2), "{took:?}");

    // Every descriptor zeroed, the zeros really written: every group corrupt.
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &vec![0u8; 16 << 20], 4096).unwrap();
    let t = Instant::now();
    let o = mballoc(&["info", path_str(&path)]);
    let took = t.elapsed();
    println!("info on 2^20 zeroed descriptors: {took:?}");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("corrupt groups:   1048576 [0, 1, 2,"),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("free blocks:      0 of 0"),
        "{}",
        text(&o)
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn fsck_says_what_it_does_not_check() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = store_with_group_3_written(dir.path());
    let o = mballoc(&["fsck", path_str(&path)]);
    assert!(
        text(&o).contains("the unused rest of the log is not checked"),
        "{}",
        text(&o)
    );
}
