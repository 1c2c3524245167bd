//! Per-thread shards of hot counters, standing in for the kernel's per-CPU variables
//! (`percpu_counter`, `DEFINE_PER_CPU`): a thread only writes its own cache line, so
//! counters bumped on every request do not bounce between cores; readers sum the shards.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

/// Shards per variable. Threads beyond this share shards (their updates stay atomic and
/// exact, only the cache-line isolation is lost).
const SHARDS: usize = 32;

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

    /// How far [`PerCpuCounter::read`] can be from the sum.
    pub fn max_error() -> i64 {
        Self::BATCH * SHARDS as i64
    }
}

/// The calling thread's shard number: threads are numbered in the order they first ask.
#[inline]
fn this_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

#[cfg(test)]
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
