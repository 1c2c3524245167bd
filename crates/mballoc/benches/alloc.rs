//! Criterion benches of the allocator's hot paths (speed is measured here and by
//! `mballoc bench`, never by tests):
//!
//! * `alloc_free_commit` — allocate 8 blocks, free the oldest of 4096 live extents, commit
//!   every 64 frees (the `alloc_loop` example as a criterion bench);
//! * `churn_pair` — one pair of the lab's churn benchmark at a smaller scale (2^20
//!   blocks, 3,000 live of 1–256 blocks): free a random live allocation, allocate a new one
//!   near the end of the previous one, commit every 64 frees.
//!
//! `cargo bench -p mballoc`

use std::collections::VecDeque;

use criterion::{criterion_group, criterion_main, Criterion};
use mballoc::{Allocator, Extent, Flags, Geometry, Policy, Request};

/// SplitMix64: the same stream on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// A closed-file, no-preallocation request: exactly `len` blocks are searched for.
fn direct(len: u32, goal: u64) -> Request {
    Request::new(11, 0, len)
        .with_goal(goal)
        .with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC)
        .with_i_size(u64::from(len) * 4096)
        .with_open_for_write(false)
}

fn alloc_free_commit(c: &mut Criterion) {
    let geo = Geometry::ext4_default(4 << 30).unwrap();
    let a = Allocator::builder(geo)
        .used(&[(0, 8192)])
        .cpus(1)
        .build()
        .unwrap();
    let mut live: VecDeque<Extent> = VecDeque::new();
    let mut i = 0u64;
    c.bench_function("alloc_free_commit", |b| {
        b.iter(|| {
            i += 1;
            live.push_back(a.allocate(&direct(8, 32768)).expect("space").extent);
            if live.len() > 4096 {
                a.free(11, live.pop_front().unwrap()).unwrap();
                if i.is_multiple_of(64) {
                    a.commit().unwrap();
                }
            }
        })
    });
}

fn churn_pair(c: &mut Criterion) {
    for policy in [Policy::Linux618, Policy::Proposed] {
        let geo = Geometry::new(4096, 32768, 1 << 20, 0, 16).unwrap();
        let a = Allocator::builder(geo)
            .cpus(1)
            .tunables(policy.tunables(&geo, 1))
            .build()
            .unwrap();
        let mut rng = Rng(7);
        let mut goal = 0;
        let mut live: Vec<Extent> = (0..3000)
            .map(|_| {
                let e = a
                    .allocate(&direct(1 + rng.below(256) as u32, goal))
                    .unwrap()
                    .extent;
                goal = e.end() % geo.blocks_count();
                e
            })
            .collect();
        let mut frees = 0u32;
        c.bench_function(&format!("churn_pair/{}", policy.name()), |b| {
            b.iter(|| {
                let i = rng.below(live.len() as u64) as usize;
                a.free(11, live.swap_remove(i)).unwrap();
                frees += 1;
                if frees.is_multiple_of(64) {
                    a.commit().unwrap();
                }
                let e = a
                    .allocate(&direct(1 + rng.below(256) as u32, goal))
                    .unwrap()
                    .extent;
                goal = e.end() % geo.blocks_count();
                live.push(e);
            })
        });
    }
}

criterion_group!(benches, alloc_free_commit, churn_pair);
criterion_main!(benches);
