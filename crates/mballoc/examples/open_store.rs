//! How long opening a durable allocator takes: a 16 TiB store (131,072 groups of 4 KiB
//! blocks) in a sparse temporary file, created, then opened cold five times (store, then
//! allocator), with one allocation and one commit after each open.
//!
//! `cargo run --release -p mballoc --example open_store`

use std::time::Instant;

use mballoc::store::FileStore;
use mballoc::{Allocator, Flags, Geometry, Request};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("16t.store");
    let geo = Geometry::ext4_default(16 << 40)?;
    let t = Instant::now();
    drop(FileStore::create(&path, geo, &[])?);
    println!("create: {:.1} ms ({} groups)", ms(t), geo.group_count());
    let mut opens = Vec::new();
    for run in 0..5u64 {
        let t = Instant::now();
        let store = FileStore::open(&path)?;
        let store_ms = ms(t);
        let a = Allocator::open(store)?;
        let open_ms = ms(t);
        let t = Instant::now();
        let req = Request::new(1, 0, 256)
            .with_flags(Flags(0))
            .with_goal(run * 1_000_000_000);
        a.allocate(&req)?;
        let alloc_ms = ms(t);
        let t = Instant::now();
        a.commit()?;
        let commit_ms = ms(t);
        let loads = a.store().map_or(0, |s| s.stats().bitmap_loads);
        println!(
            "open {run}: store {store_ms:.1} ms, store + allocator {open_ms:.1} ms; \
             first allocation {alloc_ms:.2} ms ({loads} bitmaps read); commit {commit_ms:.2} ms"
        );
        opens.push(open_ms);
    }
    opens.sort_by(f64::total_cmp);
    println!("median open (store + allocator): {:.1} ms", opens[2]);
    Ok(())
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
