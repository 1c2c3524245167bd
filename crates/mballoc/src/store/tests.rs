//! Unit tests of the two stores: round trips, checksum failures, recovery.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::geometry::Geometry;

fn geometry() -> Geometry {
    // 4 groups of 1024 blocks, the last one short (1000 blocks).
    Geometry::new(1024, 1024, 4072, 0, 1).unwrap()
}

fn ext(start: u64, len: u64) -> Extent {
    Extent::new(start, len)
}

fn alloc(extents: &[(u64, u64)]) -> Commit {
    Commit {
        allocated: extents.iter().map(|&(s, l)| ext(s, l)).collect(),
        freed: vec![],
    }
}

fn free(extents: &[(u64, u64)]) -> Commit {
    Commit {
        allocated: vec![],
        freed: extents.iter().map(|&(s, l)| ext(s, l)).collect(),
    }
}

fn snapshot(s: &dyn Store) -> Vec<Box<[u8]>> {
    (0..s.geometry().group_count())
        .map(|g| s.read_bitmap(g).unwrap().into_bytes())
        .collect()
}

fn mem_image(used: &[Extent]) -> (Arc<MemDevice>, FileStore) {
    let g = geometry();
    let len = FileStore::required_len(&g, opts()).unwrap();
    let dev = Arc::new(MemDevice::new(len));
    let store = FileStore::create_on(dev.clone(), g, used, opts()).unwrap();
    (dev, store)
}

fn opts() -> FileStoreOptions {
    FileStoreOptions { log_len: 64 << 10 }
}

fn reopen(bytes: Vec<u8>) -> Result<FileStore, StoreError> {
    FileStore::open_on(Arc::new(MemDevice::from_bytes(bytes)))
}

/// The contract both stores share.
fn exercise(s: &dyn Store) {
    assert_eq!(s.descriptor(0).unwrap().free, 1024 - 10);
    assert_eq!(
        s.descriptor(3).unwrap(),
        GroupDesc {
            free: 1000,
            flags: GroupFlags::BLOCK_UNINIT
        }
    );
    assert!(s.read_bitmap(0).unwrap().is_used(9));
    assert!(!s.read_bitmap(0).unwrap().is_used(10));
    assert_eq!(s.commit(&alloc(&[(1020, 10)])).unwrap(), CommitId(1));
    assert_eq!(s.descriptor(0).unwrap().free, 1024 - 14);
    assert_eq!(
        s.descriptor(1).unwrap(),
        GroupDesc {
            free: 1018,
            flags: GroupFlags::default()
        }
    );
    let before = snapshot(s);
    assert_eq!(
        s.commit(&alloc(&[(100, 1), (1025, 2)])),
        Err(StoreError::AlreadyAllocated { block: 1025 })
    );
    assert_eq!(
        s.commit(&free(&[(9, 2)])),
        Err(StoreError::NotAllocated { block: 10 })
    );
    assert!(matches!(
        s.commit(&alloc(&[(4070, 5)])),
        Err(StoreError::OutOfRange { .. })
    ));
    assert_eq!(snapshot(s), before, "rejected commits change nothing");
    assert_eq!(s.commit(&Commit::default()).unwrap(), CommitId(1));
    let c = Commit {
        allocated: vec![ext(500, 5)],
        freed: vec![ext(0, 3), ext(502, 1)],
    };
    assert_eq!(s.commit(&c).unwrap(), CommitId(2));
    let b = s.read_bitmap(0).unwrap();
    assert!(!b.is_used(0) && b.is_used(3) && b.is_used(501) && !b.is_used(502));
    assert_eq!(s.descriptor(0).unwrap().free, b.count_free());
    assert_eq!(s.last_commit(), CommitId(2));
    assert!(matches!(
        s.descriptor(4),
        Err(StoreError::NoSuchGroup {
            group: 4,
            groups: 4
        })
    ));
    assert_eq!(s.verify().unwrap(), vec![]);
    assert_eq!(s.stats().commits, 2);
}

#[test]
fn mem_store_contract() {
    exercise(&MemStore::new(geometry(), &[ext(0, 10)]).unwrap());
}

#[test]
fn file_store_contract() {
    exercise(&mem_image(&[ext(0, 10)]).1);
}

#[test]
fn mem_store_charges_and_counts_loads() {
    let s = MemStore::new(geometry(), &[])
        .unwrap()
        .with_load_cost(Duration::from_millis(5));
    let t = Instant::now();
    for g in 0..4 {
        s.read_bitmap(g).unwrap();
    }
    assert!(t.elapsed() >= Duration::from_millis(20));
    assert_eq!(s.stats().bitmap_loads, 4);
    s.mark_corrupt(2, "test").unwrap();
    assert!(matches!(
        s.read_bitmap(2),
        Err(StoreError::Corrupt { group: 2, .. })
    ));
    assert_eq!(s.corrupt_groups(), vec![2]);
    assert!(s.descriptor(2).unwrap().flags.contains(GroupFlags::CORRUPT));
}

#[test]
fn file_store_survives_reopen_on_a_real_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let s = FileStore::create(&path, geometry(), &[ext(5, 100)]).unwrap();
    s.commit(&alloc(&[(2000, 300)])).unwrap();
    s.commit(&free(&[(50, 10)])).unwrap();
    let want = (snapshot(&s), s.descriptors());
    drop(s);
    let s = FileStore::open(&path).unwrap();
    assert_eq!((snapshot(&s), s.descriptors()), want);
    assert_eq!(s.last_commit(), CommitId(2));
    assert_eq!(s.recovered(), None);
    assert_eq!(s.verify().unwrap(), vec![]);
}

#[test]
fn flipped_bitmap_byte_corrupts_only_that_group() {
    let (dev, s) = mem_image(&[ext(0, 4072)]);
    let at = s.sb_layout().bitmap_at(1) + 7;
    drop(s);
    let mut bytes = dev.to_bytes();
    bytes[at as usize] ^= 0x20;
    let s = reopen(bytes).unwrap();
    assert!(matches!(
        s.read_bitmap(1),
        Err(StoreError::Corrupt { group: 1, .. })
    ));
    assert_eq!(s.corrupt_groups(), vec![1]);
    for g in [0, 2, 3] {
        assert_eq!(s.read_bitmap(g).unwrap().count_free(), 0);
    }
    assert!(s.descriptor(1).unwrap().flags.contains(GroupFlags::CORRUPT));
    assert!(matches!(
        s.commit(&free(&[(1030, 1)])),
        Err(StoreError::Corrupt { group: 1, .. })
    ));
    assert!(matches!(
        s.verify().unwrap()[..],
        [Problem::BitmapChecksum { group: 1, .. }]
    ));
    assert_eq!(
        s.commit(&free(&[(10, 1)])).unwrap(),
        CommitId(1),
        "other groups still commit"
    );
}

#[test]
fn flipped_descriptor_byte_marks_the_group_at_open() {
    let (dev, s) = mem_image(&[ext(0, 10)]);
    let at = s.sb_layout().desc_at(2);
    drop(s);
    let mut bytes = dev.to_bytes();
    bytes[at as usize] ^= 1;
    let s = reopen(bytes).unwrap();
    assert_eq!(s.corrupt_groups(), vec![2]);
    assert!(s.read_bitmap(2).is_err());
    assert!(s.read_bitmap(0).is_ok());
    assert!(matches!(
        s.verify().unwrap()[..],
        [Problem::DescriptorChecksum { group: 2, .. }]
    ));
}

#[test]
fn flipped_superblock_byte_fails_the_open() {
    let (dev, _) = mem_image(&[]);
    for at in [0, 9, 20, 60, 127] {
        let mut bytes = dev.to_bytes();
        bytes[at] ^= 0x81;
        assert!(
            matches!(reopen(bytes), Err(StoreError::BadSuperblock { .. })),
            "byte {at}"
        );
    }
    assert!(matches!(
        reopen(vec![0; 100]),
        Err(StoreError::BadSuperblock { .. })
    ));
    assert!(matches!(
        reopen(vec![0; 1 << 20]),
        Err(StoreError::BadSuperblock { .. })
    ));
    let mut short = dev.to_bytes();
    short.truncate(short.len() - 1);
    assert!(matches!(
        reopen(short),
        Err(StoreError::BadSuperblock { .. })
    ));
}

/// A store on a fault device plus the state after each commit.
fn faulty(used: &[Extent]) -> (Arc<FaultDevice>, FileStore) {
    let (dev, s) = mem_image(used);
    drop(s);
    let fault = Arc::new(FaultDevice::new(dev.to_bytes()));
    let s = FileStore::open_on(fault.clone()).unwrap();
    (fault, s)
}

#[test]
fn durable_log_record_is_replayed_into_uninit_groups_over_garbage() {
    let (fault, s) = faulty(&[ext(0, 10)]);
    // Garbage where group 3's never-written bitmap lives: replay must not start from it.
    fault
        .write_at(&[0xa5; 128], s.sb_layout().bitmap_at(3))
        .unwrap();
    fault.sync().unwrap();
    let c = alloc(&[(20, 5), (3100, 7)]);
    let want = {
        let m = MemStore::new(geometry(), &[ext(0, 10)]).unwrap();
        m.commit(&c).unwrap();
        snapshot(&m)
    };
    fault.set_plan(FaultPlan::LoseWrite { at: 1 });
    assert!(matches!(s.commit(&c), Err(StoreError::Io { .. })));
    assert!(matches!(s.commit(&c), Err(StoreError::Poisoned { .. })));
    let s = reopen(fault.crash(CrashMode::NoneLanded)).unwrap();
    assert_eq!(s.recovered(), Some(CommitId(1)));
    assert_eq!(s.last_commit(), CommitId(1));
    assert_eq!(snapshot(&s), want);
    assert_eq!(s.verify().unwrap(), vec![]);
}

#[test]
fn torn_log_record_is_ignored() {
    let (fault, s) = faulty(&[ext(0, 10)]);
    let before = snapshot(&s);
    fault.set_plan(FaultPlan::TearWrite {
        at: 0,
        tear: Tear::Prefix(40),
    });
    assert!(s.commit(&alloc(&[(20, 5)])).is_err());
    let s = reopen(fault.crash(CrashMode::AllLanded)).unwrap();
    assert_eq!(s.recovered(), None);
    assert_eq!(s.last_commit(), CommitId(0));
    assert_eq!(snapshot(&s), before);
}

#[test]
fn verify_reports_an_unapplied_record_and_open_applies_it() {
    let (fault, s) = faulty(&[]);
    fault.set_plan(FaultPlan::LoseWrite { at: 1 });
    assert!(s.commit(&alloc(&[(0, 1)])).is_err());
    let image = fault.crash(CrashMode::NoneLanded);
    let problems = verify_device(Arc::new(MemDevice::from_bytes(image.clone()))).unwrap();
    assert_eq!(problems, vec![Problem::UnappliedLog { seq: 1 }]);
    let dev = Arc::new(MemDevice::from_bytes(image));
    FileStore::open_on(dev.clone()).unwrap();
    assert_eq!(verify_device(dev).unwrap(), vec![]);
}

#[test]
fn a_new_store_never_replays_an_old_stores_log() {
    let (dev, s) = mem_image(&[]);
    s.commit(&alloc(&[(0, 500)])).unwrap();
    drop(s);
    let s = FileStore::create_on(dev.clone(), geometry(), &[], opts()).unwrap();
    assert_eq!(s.last_commit(), CommitId(0));
    assert_eq!(s.read_bitmap(0).unwrap().count_free(), 1024);
}

#[test]
fn oversized_commit_is_refused_before_any_write() {
    let small = FileStoreOptions { log_len: 8192 };
    let dev = Arc::new(MemDevice::new(
        FileStore::required_len(&geometry(), small).unwrap(),
    ));
    let s = FileStore::create_on(dev, geometry(), &[], small).unwrap();
    let written = s.stats().bytes_written;
    let many: Vec<(u64, u64)> = (0..4000).step_by(2).map(|b| (b, 1)).collect();
    let c = alloc(&many);
    assert!(matches!(
        s.commit(&c),
        Err(StoreError::CommitTooLarge { .. })
    ));
    assert_eq!(s.stats().bytes_written, written);
    assert_eq!(s.commit(&alloc(&[(1, 1)])).unwrap(), CommitId(1));
}

#[test]
fn sixteen_tib_store_opens_fast() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big");
    let g = Geometry::ext4_default(16 << 40).unwrap();
    assert_eq!(g.group_count(), 131072);
    FileStore::create(&path, g, &[ext(0, 1 << 20)]).unwrap();
    let t = Instant::now();
    let s = FileStore::open(&path).unwrap();
    let took = t.elapsed();
    eprintln!(
        "16 TiB store ({} groups) opened in {took:?}",
        g.group_count()
    );
    assert!(took < Duration::from_millis(500), "open took {took:?}");
    assert_eq!(s.descriptor(0).unwrap().free, 0);
    assert_eq!(s.descriptor(131071).unwrap().free, 32768);
    assert_eq!(s.stats().bitmap_loads, 0);
}

#[test]
fn device_too_small_is_refused() {
    let dev = Arc::new(MemDevice::new(4096));
    let err = FileStore::create_on(dev, geometry(), &[], opts())
        .err()
        .unwrap();
    assert!(matches!(err, StoreError::DeviceTooSmall { have: 4096, .. }));
}

#[test]
fn loads_never_see_half_a_commit() {
    let (_, s) = mem_image(&[]);
    let s = Arc::new(s);
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || {
                for _ in 0..300 {
                    // Commits allocate blocks 0, 1, 2, ... one at a time, each commit spanning
                    // groups 0 and 1: a reader must always see a prefix, equal in both groups.
                    let (a, b) = (s.read_bitmap(0).unwrap(), s.read_bitmap(1).unwrap());
                    let used = (0..1024).take_while(|&o| a.is_used(o)).count() as u32;
                    assert_eq!(a.count_free(), 1024 - used, "group 0 has a gap");
                    assert!(b.count_free() <= 1024 - used, "group 1 behind group 0");
                }
            })
        })
        .collect();
    for i in 0..200u64 {
        s.commit(&alloc(&[(i, 1), (1024 + i, 1)])).unwrap();
    }
    readers.into_iter().for_each(|r| r.join().unwrap());
    assert_eq!(s.descriptor(1).unwrap().free, 1024 - 200);
}

#[test]
fn verify_refuses_a_superblock_larger_than_the_device() {
    let (dev, _) = mem_image(&[]);
    let mut bytes = dev.to_bytes();
    bytes.truncate(8192);
    let err = verify_device(Arc::new(MemDevice::from_bytes(bytes))).unwrap_err();
    assert!(matches!(err, StoreError::BadSuperblock { .. }), "{err}");
}

/// A commit whose record is durable but whose marker and checkpoint never landed (power lost
/// at write 1), over group 0 which already holds data: the image recovery starts from.
fn unapplied_commit_over_group_0() -> (Vec<u8>, format::Layout) {
    let (fault, s) = faulty(&[ext(0, 10)]);
    let layout = s.sb_layout();
    fault.set_plan(FaultPlan::LoseWrite { at: 1 });
    assert!(s.commit(&alloc(&[(20, 5), (2000, 3)])).is_err());
    (fault.crash(CrashMode::NoneLanded), layout)
}

#[test]
fn replay_over_an_intact_base_is_clean() {
    let (image, _) = unapplied_commit_over_group_0();
    let s = reopen(image).unwrap();
    assert_eq!(s.recovered(), Some(CommitId(1)));
    assert!(s.corrupt_groups().is_empty());
    assert!(s.read_bitmap(0).unwrap().is_used(22));
}

#[test]
fn replay_does_not_launder_a_damaged_bitmap() {
    let (mut image, layout) = unapplied_commit_over_group_0();
    // Damage group 0's bitmap outside the bits the commit changes (block 100).
    let at = layout.bitmap_at(0) as usize + 100 / 8;
    image[at] ^= 1 << (100 % 8);
    let dev = Arc::new(MemDevice::from_bytes(image.clone()));
    let s = FileStore::open_on(dev.clone()).unwrap();
    assert_eq!(s.recovered(), Some(CommitId(1)));
    assert_eq!(s.corrupt_groups(), vec![0]);
    assert!(matches!(
        s.read_bitmap(0),
        Err(StoreError::Corrupt { group: 0, what }) if what.contains("neither")
    ));
    // Group 1 was replayed; group 0 was left exactly as found, for fsck.
    assert!(s.read_bitmap(1).unwrap().is_used(2000 - 1024));
    let len = layout.bitmap_len;
    assert_eq!(
        dev.to_bytes()[at - 12..at - 12 + len],
        image[at - 12..at - 12 + len]
    );
    assert!(matches!(
        s.verify().unwrap()[..],
        [Problem::BitmapChecksum { group: 0, .. }]
    ));
}
