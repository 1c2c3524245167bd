//! Single-thread rate of a simple allocate / free / commit loop on a 4 GiB in-memory
//! filesystem: 8-block fallocate-style requests, 4096 live extents, a commit every 64 frees.
//! Prints the median of 5 runs. `cargo run --release -p mballoc --example alloc_loop`

use std::collections::VecDeque;
use std::time::Instant;

use mballoc::{Allocator, Flags, Geometry, Request};

fn run(ops: u32) -> f64 {
    let geo = Geometry::ext4_default(4 << 30).unwrap();
    let a = Allocator::builder(geo)
        .used(&[(0, 8192)])
        .cpus(1)
        .build()
        .unwrap();
    let mut live = VecDeque::new();
    let flags = Flags::HINT_DATA | Flags::HINT_NOPREALLOC;
    let t = Instant::now();
    for i in 0..ops {
        let owner = u64::from(i % 64) + 12;
        let req = Request::new(owner, (i / 64) * 8 % 100_000, 8)
            .with_flags(flags)
            .with_goal(32768);
        live.push_back((owner, a.allocate(&req).expect("space").extent));
        if live.len() > 4096 {
            let (o, e) = live.pop_front().unwrap();
            a.free(o, e).unwrap();
            if i % 64 == 0 {
                a.commit().expect("no store, cannot fail");
            }
        }
    }
    t.elapsed().as_nanos() as f64 / f64::from(ops)
}

fn main() {
    let mut r: Vec<f64> = (0..5).map(|_| run(200_000)).collect();
    r.sort_by(f64::total_cmp);
    println!(
        "allocate+free+commit loop: median {:.0} ns per op (runs: {:?})",
        r[2],
        r.iter().map(|v| v.round()).collect::<Vec<_>>()
    );
}
