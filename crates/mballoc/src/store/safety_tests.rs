//! Unit tests of the store under hostile conditions: the one-writer lock, read-only opens,
//! non-regular files, commits larger than the log, and superblocks that claim more than the
//! device holds.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::format::{encode_superblock, new_nonce, Layout, Superblock, DESC_LEN};
use super::*;
use crate::geometry::Geometry;

fn geometry() -> Geometry {
    Geometry::new(1024, 1024, 4072, 0, 1).unwrap()
}

fn opts() -> FileStoreOptions {
    FileStoreOptions { log_len: 16 << 10 }
}

fn alloc(extents: &[(u64, u64)]) -> Commit {
    Commit {
        allocated: extents.iter().map(|&(s, l)| Extent::new(s, l)).collect(),
        freed: vec![],
    }
}

fn file_store(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("store");
    FileStore::create_with(&path, geometry(), &[Extent::new(0, 10)], opts()).unwrap();
    path
}

fn in_use(r: Result<FileStore, StoreError>) -> bool {
    matches!(r, Err(StoreError::InUse { .. }))
}

#[test]
fn one_writer_at_a_time_and_no_reader_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_store(dir.path());
    let writer = FileStore::open(&path).unwrap();
    let second = FileStore::open(&path);
    let msg = second.as_ref().err().map(ToString::to_string).unwrap();
    assert!(in_use(second), "{msg}");
    assert!(
        msg.contains("in use by another process") && msg.contains("store"),
        "{msg}"
    );
    assert!(in_use(FileStore::open_read_only(&path)));
    drop(writer);

    let r1 = FileStore::open_read_only(&path).unwrap();
    let r2 = FileStore::open_read_only(&path).unwrap();
    assert!(in_use(FileStore::open(&path)), "a writer beside readers");
    drop((r1, r2));
    FileStore::open(&path).unwrap();
}

#[test]
fn create_refuses_a_store_in_use_and_leaves_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_store(dir.path());
    let writer = FileStore::open(&path).unwrap();
    writer.commit(&alloc(&[(100, 5)])).unwrap();
    let before = std::fs::read(&path).unwrap();
    let again = FileStore::create_with(&path, geometry(), &[], opts());
    assert!(in_use(again));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "create truncated a live store"
    );
}

#[test]
fn a_waiting_open_gets_the_lock_when_the_writer_goes_or_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_store(dir.path());
    let writer = FileStore::open(&path).unwrap();
    let wait = |d: u64| OpenOptions::default().wait(Some(Duration::from_millis(d)));
    let t = Instant::now();
    let r = FileStore::open_with(&path, wait(60));
    assert!(t.elapsed() >= Duration::from_millis(60));
    assert!(matches!(r, Err(StoreError::InUse { waited_ms, .. }) if waited_ms >= 60));

    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        drop(writer);
    });
    let t = Instant::now();
    FileStore::open_with(&path, wait(10_000)).unwrap();
    assert!(t.elapsed() < Duration::from_secs(5));
    releaser.join().unwrap();
}

#[test]
fn fifos_and_character_devices_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    let t = Instant::now();
    for (path, kind) in [
        (fifo.as_path(), "FIFO"),
        (Path::new("/dev/null"), "character device"),
    ] {
        for r in [FileStore::open_read_only(path), FileStore::open(path)] {
            match r {
                Err(StoreError::NotAStoreFile { kind: k, .. }) => assert_eq!(k, kind),
                other => panic!("{}: {:?}", path.display(), other.err()),
            }
        }
    }
    assert!(matches!(
        FileStore::open(dir.path()),
        Err(StoreError::NotAStoreFile { .. } | StoreError::Io { .. })
    ));
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

/// A store whose last commit reached its log record only.
fn unapplied_image() -> (Vec<u8>, FileStore) {
    let len = FileStore::required_len(&geometry(), opts()).unwrap();
    let dev = Arc::new(MemDevice::new(len));
    drop(FileStore::create_on(dev.clone(), geometry(), &[Extent::new(0, 10)], opts()).unwrap());
    let fault = Arc::new(FaultDevice::new(dev.to_bytes()));
    let s = FileStore::open_on(fault.clone()).unwrap();
    s.commit(&alloc(&[(2000, 30)])).unwrap();
    fault.set_plan(FaultPlan::LoseWrite { at: 1 });
    assert!(s.commit(&alloc(&[(3100, 40), (20, 4)])).is_err());
    (fault.crash(CrashMode::NoneLanded), s)
}

fn state(s: &FileStore) -> (Vec<GroupDesc>, Vec<Box<[u8]>>, CommitId) {
    let bitmaps = (0..s.geometry().group_count())
        .map(|g| s.read_bitmap(g).unwrap().into_bytes())
        .collect();
    (s.descriptors(), bitmaps, s.last_commit())
}

#[test]
fn read_only_open_replays_in_memory_to_what_recovery_writes() {
    let (image, _) = unapplied_image();
    let dev = Arc::new(MemDevice::from_bytes(image.clone()));
    let ro = FileStore::open_on_read_only(dev.clone()).unwrap();
    assert_eq!(ro.recovered(), Some(CommitId(2)));
    let seen = state(&ro);
    assert_eq!(dev.to_bytes(), image, "a read-only open wrote");
    assert_eq!(
        ro.commit(&alloc(&[(500, 1)])),
        Err(StoreError::ReadOnly { op: "commit" })
    );
    assert_eq!(ro.verify().unwrap(), vec![Problem::UnappliedLog { seq: 2 }]);
    assert_eq!(ro.stats().bytes_written, 0);
    assert_eq!(dev.to_bytes(), image);

    let rw = FileStore::open_on(dev.clone()).unwrap();
    assert_eq!(rw.recovered(), Some(CommitId(2)));
    assert_eq!(state(&rw), seen);
    assert_ne!(
        dev.to_bytes(),
        image,
        "the read-write open applies the record"
    );
}

#[test]
fn read_only_file_opens_and_stays_byte_for_byte() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let (image, _) = unapplied_image();
    std::fs::write(&path, &image).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let a = crate::Allocator::open_read_only(&path).unwrap();
    assert_eq!(a.store().unwrap().last_commit(), CommitId(2));
    let got = a.allocate(&crate::Request::new(1, 0, 8)).unwrap().extent;
    let err = a.commit().unwrap_err();
    assert!(
        matches!(
            &err,
            crate::Error::CommitFailed {
                cause: StoreError::ReadOnly { .. },
                ..
            }
        ),
        "{err}"
    );
    drop(a);
    assert_eq!(std::fs::read(&path).unwrap(), image);
    assert!(got.len == 8);
}

/// A file as long as `groups` groups need, holding nothing but a valid superblock.
fn sparse_claim(path: &Path, groups: u64) -> Superblock {
    let geometry = Geometry::new(1024, 8192, groups * 8192, 0, 16).unwrap();
    let layout = Layout::new(&geometry, 4 << 20).unwrap();
    let sb = Superblock {
        geometry,
        nonce: new_nonce(),
        layout,
    };
    let f = std::fs::File::create(path).unwrap();
    f.set_len(layout.total).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &encode_superblock(&sb), 0).unwrap();
    sb
}

#[test]
fn a_sparse_file_claiming_millions_of_groups_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    for groups in [1 << 22, 1 << 26] {
        let path = dir.path().join(format!("claim-{groups}"));
        sparse_claim(&path, groups);
        let t = Instant::now();
        let r = FileStore::open_read_only(&path);
        let took = t.elapsed();
        println!("{groups} groups claimed: refused in {took:?}");
        match r {
            Err(StoreError::BadSuperblock { what }) => assert!(what.contains("hole"), "{what}"),
            other => panic!("{groups} groups: {:?}", other.err()),
        }
        assert!(took < Duration::from_millis(200), "{took:?}");
        assert!(verify_device(Arc::new(
            FileDevice::open(&path, OpenOptions::read_only()).unwrap()
        ))
        .is_err());
    }
}

#[test]
fn a_zeroed_descriptor_table_opens_in_linear_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zeroed");
    let groups = 1u32 << 20;
    let sb = sparse_claim(&path, u64::from(groups));
    // Zeros really written: the table is on the device, and every descriptor fails.
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let zeros = vec![0u8; groups as usize * DESC_LEN];
    std::os::unix::fs::FileExt::write_all_at(&f, &zeros, sb.layout.desc_off).unwrap();
    let t = Instant::now();
    let s = FileStore::open_read_only(&path).unwrap();
    let corrupt = s.corrupt_groups();
    let took = t.elapsed();
    println!("{groups} zeroed descriptors: open and list in {took:?}");
    assert_eq!(corrupt.len(), groups as usize);
    assert!(matches!(
        s.read_bitmap(groups - 1),
        Err(StoreError::Corrupt { what, .. }) if what.contains("descriptor checksum")
    ));
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn a_log_larger_than_the_format_allows_is_refused() {
    let big = FileStoreOptions {
        log_len: MAX_LOG_LEN + 1,
    };
    assert!(matches!(
        FileStore::required_len(&geometry(), big),
        Err(StoreError::Geometry { .. })
    ));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("never");
    assert!(FileStore::create_with(&path, geometry(), &[], big).is_err());
    assert!(!path.exists(), "a refused create left a file behind");
}

/// Power lost at any write of a `create_on` over a device that holds a store: the device
/// afterwards either opens as the old store, whole, or as the new one, whole, or not at all
/// (no superblock). Never the old superblock over a half-written new table, which opened as
/// the old store with groups it could not read.
#[test]
fn a_create_cut_short_over_an_old_store_leaves_it_whole_or_refused() {
    let len = FileStore::required_len(&geometry(), opts()).unwrap();
    let dev = Arc::new(MemDevice::new(len));
    let old = FileStore::create_on(dev.clone(), geometry(), &[Extent::new(0, 10)], opts()).unwrap();
    old.commit(&alloc(&[(2000, 30)])).unwrap();
    let old_state = state(&old);
    drop(old);
    let old_image = dev.to_bytes();
    let new_used = [Extent::new(0, 10), Extent::new(1500, 700)];
    let new_state = {
        let d = Arc::new(MemDevice::from_bytes(old_image.clone()));
        state(&FileStore::create_on(d, geometry(), &new_used, opts()).unwrap())
    };
    let mut cut = 0;
    for at in 0.. {
        let fault = Arc::new(FaultDevice::new(old_image.clone()));
        fault.set_plan(FaultPlan::LoseWrite { at });
        if FileStore::create_on(fault.clone(), geometry(), &new_used, opts()).is_ok() {
            break;
        }
        cut += 1;
        for mode in [
            CrashMode::NoneLanded,
            CrashMode::AllLanded,
            CrashMode::Random { seed: at },
        ] {
            let image = fault.crash(mode);
            match FileStore::open_on(Arc::new(MemDevice::from_bytes(image))) {
                Ok(s) => {
                    let seen = state(&s);
                    assert!(
                        seen == old_state || seen == new_state,
                        "write {at}, {mode:?}: opened as neither store"
                    );
                    assert!(s.verify().unwrap().is_empty(), "write {at}, {mode:?}");
                }
                Err(e) => assert!(
                    matches!(e, StoreError::BadSuperblock { .. }),
                    "write {at}, {mode:?}: {e}"
                ),
            }
        }
    }
    assert!(cut > 3, "the create made only {cut} writes");
}
