//! The fuzz targets' saved corpus (`fuzz/corpus/<target>/`) as a regression test: every file
//! goes through the same entry point as in `cargo +nightly fuzz run <target>`, in plain
//! `cargo test`, and must give a typed outcome with no violated invariant and no panic.
//!
//! `cargo test -p mballoc --test fuzz_corpus -- --ignored write_seeds` (re)writes the seed
//! files the corpus started from.

use std::path::PathBuf;
use std::sync::Arc;

use mballoc::store::{Extent, FileStore, FileStoreOptions, MemDevice};
use mballoc::testing::{open_image, replay_base, replay_log, replay_seed, trim_zeros, Outcome};
use mballoc::Geometry;

fn corpus(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// Runs `check` over every file of `target`'s corpus; returns (files, opened).
fn run_corpus(
    target: &str,
    check: fn(&[u8]) -> Result<Outcome, mballoc::testing::Violation>,
) -> (usize, usize) {
    let dir = corpus(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut opened = 0;
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        match check(&bytes) {
            Ok(Outcome::Opened(_)) => opened += 1,
            Ok(Outcome::Rejected(_)) => {}
            Err(v) => panic!("{}: {v}", f.display()),
        }
    }
    println!("{target}: {} files, {opened} opened", files.len());
    (files.len(), opened)
}

#[test]
fn open_store_corpus_gives_typed_outcomes() {
    let (files, opened) = run_corpus("open_store", open_image);
    assert!(files >= 2, "corpus missing: {files} files");
    assert!(opened >= 1, "no corpus file opens: {opened} of {files}");
}

#[test]
fn replay_log_corpus_gives_typed_outcomes() {
    let (files, opened) = run_corpus("replay_log", replay_log);
    assert!(files >= 2, "corpus missing: {files} files");
    assert!(opened >= 1, "no corpus file opens: {opened} of {files}");
}

/// A small fresh store image: 3 groups of 64 one-KiB blocks (the last short), 8 KiB log.
fn tiny_image(used: &[Extent]) -> Vec<u8> {
    let g = Geometry::new(1024, 64, 170, 1, 1).unwrap();
    let opts = FileStoreOptions { log_len: 8192 };
    let dev = Arc::new(MemDevice::new(FileStore::required_len(&g, opts).unwrap()));
    FileStore::create_on(dev.clone(), g, used, opts).unwrap();
    dev.to_bytes()
}

#[test]
#[ignore = "writes the seed files into fuzz/corpus"]
fn write_seeds() {
    let write = |target: &str, name: &str, bytes: &[u8]| {
        std::fs::create_dir_all(corpus(target)).unwrap();
        std::fs::write(corpus(target).join(name), bytes).unwrap();
    };
    write("open_store", "seed-base", trim_zeros(replay_base()));
    write(
        "open_store",
        "seed-tiny-empty",
        trim_zeros(&tiny_image(&[])),
    );
    let used = tiny_image(&[Extent::new(1, 20), Extent::new(60, 50)]);
    write("open_store", "seed-tiny-used", trim_zeros(&used));
    write("replay_log", "seed-own-log", &replay_seed());
    let mut cleared = replay_seed();
    cleared[1..65].fill(0);
    write("replay_log", "seed-markers-cleared", &cleared);
    let mut stamped = replay_seed();
    stamped[0] = 1;
    write("replay_log", "seed-stamped", &stamped);
}
