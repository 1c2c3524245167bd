//! Corruption seen through the allocator: a bitmap or descriptor that fails its checksum
//! marks its group corrupt (never allocated from, frees refused, counted in stats, never
//! rewritten), a bitmap that disagrees with its descriptor too, and a bad superblock is a clear
//! error on open.

use std::sync::Arc;

use mballoc::store::{
    BitmapBytes, Commit, CommitId, Device, FileStore, FileStoreOptions, GroupDesc, MemDevice,
    MemStore, Problem, Store, StoreError, StoreStats,
};
use mballoc::{Allocator, Error, Extent, Flags, Geometry, Request};

fn geometry() -> Geometry {
    Geometry::new(1024, 1024, 8 * 1024, 0, 1).unwrap()
}

fn opts() -> FileStoreOptions {
    FileStoreOptions { log_len: 64 << 10 }
}

fn req(len: u32, goal: u64) -> Request {
    Request::new(7, 0, len).with_flags(Flags(0)).with_goal(goal)
}

/// A store whose group 2 holds a committed allocation (so its bitmap is on disk), and the
/// extent allocated there.
fn image_with_group_2_written() -> (Vec<u8>, Extent) {
    let g = geometry();
    let dev = Arc::new(MemDevice::new(FileStore::required_len(&g, opts()).unwrap()));
    let store = FileStore::create_on(dev.clone(), g, &[], opts()).unwrap();
    let a = Allocator::open(store).unwrap();
    let exact = req(16, 2 * 1024 + 100).with_flags(Flags::HINT_TRY_GOAL | Flags::HINT_GOAL_ONLY);
    let e = a.allocate(&exact).unwrap().extent;
    assert_eq!(a.geometry().locate(e.start).0, 2);
    a.commit().unwrap();
    (dev.to_bytes(), e)
}

fn offsets(image: &[u8]) -> (u64, u64) {
    let s = FileStore::open_on(Arc::new(MemDevice::from_bytes(image.to_vec()))).unwrap();
    (s.bitmap_offset(2).unwrap(), s.descriptor_offset(3).unwrap())
}

/// Allocates everything the allocator will give; returns the groups used.
fn drain(a: &Allocator) -> Vec<u32> {
    let mut groups = Vec::new();
    while let Ok(x) = a.allocate(&req(64, 0)) {
        groups.push(a.geometry().locate(x.extent.start).0);
    }
    groups
}

#[test]
fn a_bitmap_checksum_failure_marks_the_group_corrupt() {
    let (mut image, e) = image_with_group_2_written();
    let (bitmap_at, _) = offsets(&image);
    image[bitmap_at as usize + 50] ^= 0x10;
    let dev = Arc::new(MemDevice::from_bytes(image.clone()));
    let a = Allocator::open(FileStore::open_on(dev.clone()).unwrap()).unwrap();
    assert_eq!(a.stats().corrupt_groups, 0, "bitmaps are not read at open");

    let snap = a.group(2).unwrap();
    assert!(snap.corrupt && !snap.loaded);
    assert_eq!(a.stats().corrupt_groups, 1);
    let listed = a.corrupt_groups();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0, 2);
    assert!(listed[0].1.contains("checksum"), "{}", listed[0].1);
    assert!(a.mb_groups().unwrap().contains("Block bitmap corrupted!"));
    // Its free blocks no longer count; allocation never goes there.
    assert_eq!(a.free_blocks(), 7 * 1024);
    assert!(!drain(&a).contains(&2));
    assert!(matches!(
        a.free(7, e),
        Err(Error::CorruptGroup { group: 2, .. })
    ));
    a.commit().unwrap();
    a.check_consistency().unwrap();
    // Never rewritten: the damaged bytes are still there for fsck.
    let at = bitmap_at as usize;
    let after = dev.to_bytes();
    assert_eq!(after[at..at + 128], image[at..at + 128]);
    let problems = FileStore::open_on(dev).unwrap().verify().unwrap();
    assert!(matches!(
        problems[..],
        [Problem::BitmapChecksum { group: 2, .. }]
    ));
}

#[test]
fn a_descriptor_checksum_failure_is_seen_at_open() {
    let (mut image, _) = image_with_group_2_written();
    let (_, desc_at) = offsets(&image);
    image[desc_at as usize + 1] ^= 0x01;
    let a = Allocator::open(FileStore::open_on(Arc::new(MemDevice::from_bytes(image))).unwrap())
        .unwrap();
    assert_eq!(a.stats().corrupt_groups, 1);
    assert_eq!(a.corrupt_groups()[0].0, 3);
    assert!(a.group(3).unwrap().corrupt);
    assert_eq!(a.free_blocks(), 7 * 1024 - 16);
    assert!(!drain(&a).contains(&3));
    let in_3 = Extent::new(3 * 1024 + 5, 1);
    assert!(matches!(
        a.free(7, in_3),
        Err(Error::CorruptGroup { group: 3, .. })
    ));
}

#[test]
fn a_bad_superblock_is_a_clear_error_on_open() {
    let (image, _) = image_with_group_2_written();
    let mut bad = image.clone();
    bad[40] ^= 0x01;
    let err = FileStore::open_on(Arc::new(MemDevice::from_bytes(bad))).err();
    assert!(
        matches!(&err, Some(StoreError::BadSuperblock { what }) if what.contains("checksum")),
        "{err:?}"
    );
    let zeros = vec![0u8; image.len()];
    let err = FileStore::open_on(Arc::new(MemDevice::from_bytes(zeros))).err();
    assert!(
        matches!(&err, Some(StoreError::BadSuperblock { what }) if what.contains("not an mballoc store")),
        "{err:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    std::fs::write(&path, vec![0u8; 8192]).unwrap();
    let err = Allocator::open_file(&path).err();
    assert!(
        matches!(&err, Some(Error::Store(StoreError::BadSuperblock { .. }))),
        "{err:?}"
    );
}

#[test]
fn a_group_the_store_marked_corrupt_is_skipped_from_the_start() {
    let store = Arc::new(MemStore::new(geometry(), &[]).unwrap());
    store.mark_corrupt(5, "test damage").unwrap();
    let a = Allocator::open(store).unwrap();
    assert_eq!(a.corrupt_groups(), vec![(5, "test damage".to_string())]);
    assert_eq!(a.free_blocks(), 7 * 1024);
    let used = drain(&a);
    assert!(!used.contains(&5) && used.len() == 7 * 1024 / 64);
    a.commit().unwrap();
    a.check_consistency().unwrap();
}

/// A store whose group-1 descriptor claims more free blocks than its bitmap has.
struct LyingDescriptor(MemStore);

impl Store for LyingDescriptor {
    fn geometry(&self) -> Geometry {
        self.0.geometry()
    }
    fn descriptor(&self, group: u32) -> Result<GroupDesc, StoreError> {
        let mut d = self.0.descriptor(group)?;
        if group == 1 {
            d.free += 100;
        }
        Ok(d)
    }
    fn descriptors(&self) -> Vec<GroupDesc> {
        (0..self.geometry().group_count())
            .map(|g| self.descriptor(g).unwrap())
            .collect()
    }
    fn read_bitmap(&self, group: u32) -> Result<BitmapBytes, StoreError> {
        self.0.read_bitmap(group)
    }
    fn commit(&self, commit: &Commit) -> Result<CommitId, StoreError> {
        self.0.commit(commit)
    }
    fn last_commit(&self) -> CommitId {
        self.0.last_commit()
    }
    fn corrupt_groups(&self) -> Vec<u32> {
        self.0.corrupt_groups()
    }
    fn verify(&self) -> Result<Vec<Problem>, StoreError> {
        self.0.verify()
    }
    fn stats(&self) -> StoreStats {
        self.0.stats()
    }
}

#[test]
fn a_bitmap_that_disagrees_with_its_descriptor_marks_the_group_corrupt() {
    let used = [mballoc::store::Extent::new(1024, 300)];
    let store = LyingDescriptor(MemStore::new(geometry(), &used).unwrap());
    let a = Allocator::open(store).unwrap();
    assert_eq!(a.free_blocks(), 8 * 1024 - 300 + 100);
    let snap = a.group(1).unwrap();
    assert!(snap.corrupt && snap.loaded);
    assert!(a.corrupt_groups()[0].1.contains("descriptor"));
    assert_eq!(a.free_blocks(), 7 * 1024);
    assert!(!drain(&a).contains(&1));
    a.check_consistency().unwrap();
}

#[test]
fn corruption_found_later_does_not_disturb_commits_of_other_groups() {
    let (mut image, _) = image_with_group_2_written();
    let (bitmap_at, _) = offsets(&image);
    image[bitmap_at as usize] ^= 0x80;
    let dev = Arc::new(MemDevice::from_bytes(image));
    let a = Allocator::open(FileStore::open_on(dev.clone()).unwrap()).unwrap();
    let got = drain(&a);
    assert!(!got.is_empty() && !got.contains(&2));
    a.commit().unwrap();
    let b = Allocator::open(FileStore::open_on(dev.clone()).unwrap()).unwrap();
    // Everything but group 2 is allocated and committed; group 2's descriptor is intact.
    assert_eq!(b.free_blocks(), 1024 - 16);
    assert_eq!(b.stats().corrupt_groups, 0, "group 2 not read yet");
    let problems = FileStore::open_on(dev.clone() as Arc<dyn Device>)
        .unwrap()
        .verify()
        .unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
}

/// Four threads, with goals all over the filesystem, meet a group whose bitmap fails its
/// checksum while two background readers prefetch and a cache of three keeps evicting: the
/// group is found corrupt once (however many threads load it at once), nothing is ever
/// allocated there, no block is handed out twice, and every other group's bitmap in the store
/// ends up exactly as the allocator has it.
#[test]
fn threads_meet_a_corrupt_group_on_a_small_cache() {
    use std::sync::atomic::{AtomicU8, Ordering};
    for round in 0..4 {
        let (mut image, _) = image_with_group_2_written();
        let (bitmap_at, _) = offsets(&image);
        image[bitmap_at as usize + 7] ^= 0x04;
        let dev = Arc::new(MemDevice::from_bytes(image.clone()));
        let store = Arc::new(FileStore::open_on(dev.clone()).unwrap());
        let a = Arc::new(
            Allocator::builder(geometry())
                .store(store.clone())
                .cache_groups(3)
                .prefetch_threads(2)
                .build()
                .unwrap(),
        );
        let geo = geometry();
        let owners: Arc<Vec<AtomicU8>> =
            Arc::new((0..geo.blocks_count()).map(|_| AtomicU8::new(0)).collect());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let (a, owners) = (a.clone(), owners.clone());
                std::thread::spawn(move || {
                    let mut live = std::collections::VecDeque::new();
                    for i in 0..1500u64 {
                        let len = 1 + (i * 7 + t) as u32 % 24;
                        let goal = (t * 2 + i * 3 + round) % 8 * 1024 + i % 500;
                        match a.allocate(&req(len, goal)) {
                            Ok(x) => {
                                let e = x.extent;
                                assert_ne!(
                                    geo.locate(e.start).0,
                                    2,
                                    "allocated in the corrupt group"
                                );
                                for b in e.start..e.end() {
                                    let prev =
                                        owners[b as usize].swap(t as u8 + 1, Ordering::SeqCst);
                                    assert_eq!(prev, 0, "block {b} to {t}, held by {prev}");
                                }
                                live.push_back(e);
                            }
                            Err(Error::NoSpace { .. }) => {}
                            Err(e) => panic!("thread {t}: {e}"),
                        }
                        if live.len() > 40 {
                            let e = live.pop_front().unwrap();
                            for b in e.start..e.end() {
                                owners[b as usize].store(0, Ordering::SeqCst);
                            }
                            a.free(7, e).unwrap();
                        }
                        if i % 5 == t % 5 {
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
        let listed = a.corrupt_groups();
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].0, 2);
        assert_eq!(a.stats().corrupt_groups, 1);
        assert!(a.stats().evictions > 0, "the cache never evicted");
        // The store: group 2 never rewritten, every other group as the allocator has it.
        let at = bitmap_at as usize;
        assert_eq!(dev.to_bytes()[at..at + 128], image[at..at + 128]);
        for g in (0..geo.group_count()).filter(|&g| g != 2) {
            let mine = a.disk_bitmap(g).unwrap();
            let theirs = store.read_bitmap(g).unwrap();
            assert!(
                (0..geo.group_len(g)).all(|o| mine.get(o) == theirs.is_used(o)),
                "group {g}"
            );
        }
        let used: u64 = owners
            .iter()
            .filter(|o| o.load(Ordering::Relaxed) != 0)
            .count() as u64;
        // Free: the seven good groups less what the threads hold (group 2 counts nothing).
        assert_eq!(a.free_blocks(), 7 * 1024 - used);
    }
}
