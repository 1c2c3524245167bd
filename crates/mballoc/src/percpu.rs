//! Per-thread shards of hot counters, standing in for the kernel's per-CPU variables
//! (`percpu_counter`, `DEFINE_PER_CPU`): a thread only writes its own cache line, so
//! counters bumped on every request do not bounce between cores; readers sum the shards.

use crate::sync::{AtomicI64, Ordering};

/// Shards per variable. Threads beyond this share shards (their updates stay atomic and
/// exact, only the cache-line isolation is lost).
#[cfg(not(loom))]
const SHARDS: usize = 32;
/// Two shards under the loom model check, whose state grows with every atomic (and three
/// threads are enough to make two share one).
#[cfg(loom)]
const SHARDS: usize = 2;

/// A value alone on its cache lines (128 bytes: adjacent-line prefetch pairs lines), for
/// per-thread shards and for neighbouring locks that different threads take.
#[repr(align(128))]
#[derive(Default, Debug)]
pub struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

pub struct PerCpu<T> {
    shards: Box<[Padded<T>]>,
}

impl<T: Default> Default for PerCpu<T> {
    fn default() -> Self {
        PerCpu {
            shards: (0..SHARDS).map(|_| Padded(T::default())).collect(),
        }
    }
}

impl<T> PerCpu<T> {
    /// The calling thread's shard (`this_cpu_ptr`).
    #[inline]
    pub fn local(&self) -> &T {
        &self.shards[this_shard()].0
    }

    /// Every shard, for sums (`for_each_possible_cpu`).
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.shards.iter().map(|p| &p.0)
    }
}

/// A counter read far more cheaply than exactly (`struct percpu_counter`): each thread adds
/// to its own shard and folds it into the shared total once it drifts `BATCH` away, so the
/// shared cache line is written once per `BATCH` units instead of on every update.
pub struct PerCpuCounter {
    total: AtomicI64,
    shards: PerCpu<AtomicI64>,
}

impl PerCpuCounter {
    /// `percpu_counter_batch` (the kernel's is `max(32, 2 * nr_cpus)`).
    pub const BATCH: i64 = 32;

    pub fn new(v: i64) -> PerCpuCounter {
        PerCpuCounter {
            total: AtomicI64::new(v),
            shards: PerCpu::default(),
        }
    }

    /// `percpu_counter_add_batch`.
    #[inline]
    pub fn add(&self, v: i64) {
        let s = self.shards.local();
        let n = s.fetch_add(v, Ordering::Relaxed) + v;
        if n.abs() >= Self::BATCH {
            s.fetch_sub(n, Ordering::Relaxed);
            self.total.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// `percpu_counter_read`: the shared total, off by at most `BATCH` per shard.
    #[inline]
    pub fn read(&self) -> i64 {
        self.total.load(Ordering::Relaxed)
    }

    /// `percpu_counter_sum`: exact when no update runs concurrently.
    pub fn sum(&self) -> i64 {
        self.read()
            + self
                .shards
                .iter()
                .map(|s| s.load(Ordering::Relaxed))
                .sum::<i64>()
    }

    /// [`PerCpuCounter::read`], or the exact sum when the read lies within the counter's
    /// possible error of `need` (`ext4_has_free_clusters`' watermark: four times the error):
    /// cheap while far from the limit, exact near it.
    pub fn read_near(&self, need: i64) -> i64 {
        let approx = self.read();
        if approx - need < 4 * Self::max_error() {
            self.sum()
        } else {
            approx
        }
    }

    /// How far [`PerCpuCounter::read`] can be from the sum.
    pub fn max_error() -> i64 {
        Self::BATCH * SHARDS as i64
    }
}

/// The calling thread's shard number: threads are numbered in the order they first ask.
#[cfg(not(loom))]
#[inline]
fn this_shard() -> usize {
    use crate::sync::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

/// Under loom: loom atomics cannot sit in a `static`, and a shared counter would add an
/// atomic (and its interleavings) to every model. A model must also pick the same shard in
/// every execution, which rules out hashing loom's `ThreadId` (it carries the execution's
/// id); its `Debug` form prints the thread's index within the execution (`ThreadId(2)`:
/// main is 0, then spawn order), so thread `i` takes shard `i % SHARDS`.
#[cfg(loom)]
fn this_shard() -> usize {
    let id = format!("{:?}", loom::thread::current().id());
    let n: usize = id
        .trim_start_matches("ThreadId(")
        .trim_end_matches(')')
        .parse()
        .expect("loom ThreadId's Debug form is ThreadId(<index>)");
    n % SHARDS
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn sums_every_thread_exactly() {
        let c: PerCpu<AtomicU64> = PerCpu::default();
        std::thread::scope(|s| {
            for _ in 0..(SHARDS + 8) {
                s.spawn(|| {
                    for _ in 0..1000 {
                        c.local().fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        let total: u64 = c.iter().map(|a| a.load(Ordering::Relaxed)).sum();
        assert_eq!(total, 1000 * (SHARDS as u64 + 8));
    }

    #[test]
    fn counter_sum_is_exact_and_read_is_close() {
        let c = PerCpuCounter::new(1_000_000);
        std::thread::scope(|s| {
            for t in 0..6i64 {
                let c = &c;
                s.spawn(move || {
                    for i in 0..10_000i64 {
                        c.add(if (i + t) % 3 == 0 { -7 } else { 5 });
                    }
                });
            }
        });
        let want: i64 = 1_000_000
            + (0..6i64)
                .map(|t| {
                    (0..10_000i64)
                        .map(|i| if (i + t) % 3 == 0 { -7 } else { 5 })
                        .sum::<i64>()
                })
                .sum::<i64>();
        assert_eq!(c.sum(), want);
        assert!((c.read() - want).abs() <= PerCpuCounter::max_error());
    }
}

/// Model checks (`RUSTFLAGS="--cfg loom" cargo test --release -p mballoc --lib loom_`).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Each worker adds 20 then 20: the second add crosses `BATCH` and folds the shard into
    /// the total, racing the other worker's adds.
    fn two_workers(share_a_shard: bool) {
        let c = Arc::new(PerCpuCounter::new(100));
        let worker = |c: &Arc<PerCpuCounter>| {
            let c = c.clone();
            thread::spawn(move || {
                c.add(20);
                c.add(20);
                this_shard()
            })
        };
        let a = worker(&c);
        if share_a_shard {
            // Thread i takes shard i % SHARDS: an idle thread in between puts the next
            // worker on the first one's shard.
            for _ in 1..SHARDS {
                thread::spawn(|| ()).join().unwrap();
            }
        }
        let b = worker(&c);
        let (sa, sb) = (a.join().unwrap(), b.join().unwrap());
        assert_eq!(sa == sb, share_a_shard, "shards {sa} and {sb}");
        assert_eq!(c.sum(), 180);
        assert!((c.read() - 180).abs() <= PerCpuCounter::max_error());
    }

    /// Two threads on their own shards, both folding into the shared total.
    #[test]
    fn loom_counter_sum_exact_and_read_close() {
        loom::model(|| two_workers(false));
    }

    /// Two threads on one shard: one's add can land between the other's `fetch_add` and the
    /// `fetch_sub` of what it folds.
    #[test]
    fn loom_counter_shared_shard_sum_exact() {
        loom::model(|| two_workers(true));
    }
}
