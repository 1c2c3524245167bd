//! Allocation rate of one durable allocator shared by threads: a W1-like loop (will-it-scale
//! `fallocate2`) on a 16 GiB `MemStore` of 4 KiB blocks. Thread `t` owns a private 256-block
//! file, owner `12 + t`, that it fills 2 blocks per request aimed at the end of its last
//! extent (an empty file aims at its inode's group, as ext4 does), with ext4's fallocate
//! flags (`HINT_DATA | HINT_NOPREALLOC`); every 128 allocations it frees the whole file and
//! commits. Every allocation and free goes through the journal of the running transaction,
//! which is what this measures under threads.
//!
//! Prints allocations per second, in total and per thread, for 1 and 2 threads and then
//! powers of two up to the machine's parallelism (or the thread counts given); and, as the
//! wall-clock rates suffer whenever other work shares the cores, allocations per CPU-second
//! the threads ran (Linux only: a lock wait spent asleep is not in it, one spent spinning is).
//!
//! `cargo run --release -p mballoc --example durable_threads -- [SECONDS [THREADS...]]`
//! (default: 3 seconds per point)

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mballoc::store::MemStore;
use mballoc::{Allocator, Extent, Flags, Geometry, Request};

/// Blocks per request and per file, as W1.
const CHUNK: u32 = 2;
const FILE_BLOCKS: u32 = 256;
/// The first file's owner (inode number), as W1's `FIRST_FILE_INO`.
const FIRST_OWNER: u64 = 12;

/// One thread's private file.
struct File {
    owner: u64,
    extents: Vec<Extent>,
    place: u32,
}

impl File {
    /// The next `fallocate` piece: after the last extent, or in group 1 for an empty file
    /// (`ext4_inode_to_goal_block` for an inode of group 0 with flex groups).
    fn request(&self, geo: &Geometry, cpu: u32) -> Request {
        let goal = self
            .extents
            .last()
            .map_or(geo.group_first_block(1), Extent::end);
        let r = Request::new(self.owner, self.place, CHUNK)
            .with_goal(goal)
            .with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC)
            .with_i_size(u64::from(self.place) * u64::from(geo.block_size()))
            .with_cpu(cpu)
            .with_open_for_write(true);
        match self.extents.last() {
            Some(last) => r.with_left(self.place - 1, last.end() - 1),
            None => r,
        }
    }

    fn add(&mut self, e: Extent) {
        self.place += e.len;
        match self.extents.last_mut() {
            Some(l) if l.end() == e.start => l.len += e.len,
            _ => self.extents.push(e),
        }
    }

    /// Truncate to 0 and commit.
    fn truncate(&mut self, a: &Allocator) {
        for e in self.extents.drain(..) {
            a.free(self.owner, e).expect("free");
        }
        a.commit().expect("MemStore commits do not fail");
        self.place = 0;
    }
}

/// Nanoseconds the calling thread has run on a CPU (Linux's schedstat; 0 elsewhere, where
/// the per-CPU-second figure is left out).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// What one thread did: allocations, and the CPU time it took for them.
struct Work {
    allocs: u64,
    cpu_ns: u64,
}

/// Thread `t`'s loop until `stop`.
fn worker(a: &Allocator, t: u32, stop: &AtomicBool) -> Work {
    let cpu_at_start = thread_cpu_ns();
    let geo = a.geometry();
    let mut file = File {
        owner: FIRST_OWNER + u64::from(t),
        extents: Vec::new(),
        place: 0,
    };
    let mut allocs = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let e = a.allocate(&file.request(geo, t)).expect("space").extent;
        file.add(e);
        allocs += 1;
        if file.place >= FILE_BLOCKS {
            file.truncate(a);
        }
    }
    Work {
        allocs,
        cpu_ns: thread_cpu_ns() - cpu_at_start,
    }
}

/// Each thread's work in about `secs` seconds on a fresh allocator, and the seconds they
/// took (from the threads' start to their join).
fn run_point(threads: u32, secs: f64) -> (Vec<Work>, f64) {
    let geo = Geometry::ext4_default(16 << 30).expect("geometry");
    let store = MemStore::new(geo, &[]).expect("store");
    let a = Allocator::builder(geo)
        .store(store)
        .cpus(threads)
        .build()
        .expect("allocator");
    let stop = AtomicBool::new(false);
    let t = Instant::now();
    let per = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn({
                    let (a, stop) = (&a, &stop);
                    move || worker(a, t, stop)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect()
    });
    (per, t.elapsed().as_secs_f64())
}

/// 1, 2, then powers of two up to the machine's parallelism, and the parallelism itself.
fn default_threads() -> Vec<u32> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let mut v: Vec<u32> = std::iter::successors(Some(1u32), |n| Some(n * 2))
        .take_while(|&n| n <= cores.max(2))
        .collect();
    if !v.contains(&cores) {
        v.push(cores);
    }
    v
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let secs: f64 = args.first().map_or(3.0, |s| s.parse().expect("SECONDS"));
    let threads: Vec<u32> = match args.get(1..).unwrap_or_default() {
        [] => default_threads(),
        list => list.iter().map(|s| s.parse().expect("THREADS")).collect(),
    };
    for n in threads {
        let (per, elapsed) = run_point(n, secs);
        let total: u64 = per.iter().map(|w| w.allocs).sum();
        let cpu_s = per.iter().map(|w| w.cpu_ns).sum::<u64>() as f64 / 1e9;
        let per_cpu = if cpu_s > 0.0 {
            format!("; {:.0} per CPU-second", total as f64 / cpu_s)
        } else {
            String::new()
        };
        let rates: Vec<String> = per
            .iter()
            .map(|w| format!("{:.0}", w.allocs as f64 / elapsed))
            .collect();
        println!(
            "threads {n}: {:.0} allocs/s total, {:.0} per thread (each: {}){per_cpu}",
            total as f64 / elapsed,
            total as f64 / elapsed / f64::from(n),
            rates.join(" "),
        );
    }
}
