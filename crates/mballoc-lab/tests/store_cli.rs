//! `mballoc mkstore / info / fsck` end to end: real files, the real binary, and damage done
//! byte by byte to see fsck name each problem.

use std::path::Path;
use std::process::{Command, Output};

use mballoc::store::FileStore;
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

#[test]
fn mkstore_info_fsck_on_a_fresh_1t_store() {
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
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s");
    for args in [
        ["--size", "12Q"],
        ["--block-size", "3000"],
        ["--size", "100"],
    ] {
        let mut all = vec!["mkstore", path_str(&p)];
        if args[0] != "--size" {
            all.extend(["--size", "1G"]);
        }
        all.extend(args);
        let o = mballoc(&all);
        assert!(!o.status.success(), "{args:?}: {}", text(&o));
    }
}
