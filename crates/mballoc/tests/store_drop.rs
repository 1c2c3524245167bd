//! Dropping an allocator lets go of its store at once: its prefetch readers, which hold the
//! store too, are joined by the drop.
//!
//! A binary of its own: `flock` locks belong to the open file description, which a child
//! process forked by another test of the same binary shares until its `exec` closes it, so a
//! test that spawns processes beside this one could hold the lock for a moment after the drop.

use mballoc::store::FileStore;
use mballoc::{Allocator, Geometry, Request};

#[test]
fn dropping_an_allocator_releases_the_store_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let geo = Geometry::new(4096, 32768, 4 * 32768, 0, 1).unwrap();
    drop(FileStore::create(&path, geo, &[]).unwrap());
    for _ in 0..20 {
        let a = Allocator::open_file(&path).unwrap();
        a.allocate(&Request::new(1, 0, 1).with_goal(0)).unwrap();
        drop(a);
        drop(FileStore::open(&path).unwrap());
    }
}
