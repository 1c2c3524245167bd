//! The README's example, compiled by `cargo test` and checked against the README by
//! `tests/readme.rs`: `cargo run -p mballoc --example quickstart`.
use mballoc::{Allocator, Geometry, Request};

fn main() -> Result<(), mballoc::Error> {
    // 1 GiB of 4 KiB blocks (8 groups); blocks 0..5000 already in use.
    let geo = Geometry::ext4_default(1 << 30)?;
    let a = Allocator::new(geo, &[(0, 5000)])?;
    // Owner (inode) 12 asks for 256 blocks at logical block 0 of a 1 MiB file.
    let got = a.allocate(&Request::new(12, 0, 256).with_i_size(1 << 20))?;
    println!(
        "got {} blocks at {} ({:?})",
        got.extent.len, got.extent.start, got.criterion
    );
    // A free is on disk at once; its blocks are reusable after the commit.
    a.free(12, got.extent)?;
    a.commit()?;
    println!("free blocks after the commit: {}", a.free_blocks());
    Ok(())
}
