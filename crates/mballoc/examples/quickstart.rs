//! The README's example, compiled by `cargo test` and checked against the README by
//! `tests/readme.rs`: `cargo run -p mballoc --example quickstart`.
use mballoc::{Allocator, Geometry, Request};

fn main() -> Result<(), mballoc::Error> {
    let geo = Geometry::ext4_default(1 << 30)?; // 1 GiB, 4 KiB blocks, 8 groups
    let a = Allocator::new(geo, &[(0, 5000)])?; // blocks 0..5000 already in use
    // Owner (inode) 12 asks for 256 blocks at logical block 0 of a 1 MiB file.
    let got = a.allocate(&Request::new(12, 0, 256).with_i_size(1 << 20))?;
    println!(
        "got {} blocks at {} ({:?})",
        got.extent.len, got.extent.start, got.criterion
    );
    a.free(12, got.extent)?; // on disk at once…
    a.commit()?; // …reusable after the commit
    println!("free blocks after the commit: {}", a.free_blocks());
    Ok(())
}
