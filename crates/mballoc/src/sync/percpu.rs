//! Per-thread shards of hot counters, standing in for the kernel's per-CPU variables
//! (`percpu_counter`, `DEFINE_PER_CPU`): a thread only writes its own cache line, so
//! counters bumped on every request do not bounce between cores; readers sum the shards.
//!
//! A live thread owns its shard outright (it claims a free one on first use and hands it back
//! when it exits), so, like `this_cpu_add` with preemption off, it updates it with a plain
//! load and store instead of a locked read-modify-write: a dozen counters per request cost a
//! dozen ordinary stores. Threads beyond the owned shards share one overflow shard and add
//! atomically there; either way every count is exact.

use crate::sync::{AtomicI64, Ordering};

/// Owned shards per variable (plus one overflow shard for threads beyond them).
#[cfg(not(loom))]
const SHARDS: usize = 32;
/// Two shards under the loom model check, whose state grows with every atomic (and three
/// threads are enough to make two share one).
#[cfg(loom)]
const SHARDS: usize = 2;

/// Shards of the virtual CPUs a simulator runs ([`crate::sync::vcpu`]), after the threads'
/// owned shards and the overflow shard: one per virtual CPU, whichever OS thread runs it
/// (a simulator runs them all on one), so that no two share a line, as no two kernel CPUs
/// share a per-CPU variable.
#[cfg(all(not(loom), not(shuttle), feature = "vcpu-hooks"))]
const VCPU_SHARDS: usize = 128;
#[cfg(not(all(not(loom), not(shuttle), feature = "vcpu-hooks")))]
const VCPU_SHARDS: usize = 0;

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

/// A boxed slice whose elements share no cache line with any other allocation: 128 bytes of
/// unused elements sit on each side. Flat, so an element costs one bounds check to reach
/// (per-group arrays read on every request).
pub struct Isolated<T> {
    items: Box<[T]>,
}

impl<T> Isolated<T> {
    /// Elements that fill 128 bytes.
    const PAD: usize = 128usize.div_ceil(if std::mem::size_of::<T>() == 0 {
        1
    } else {
        std::mem::size_of::<T>()
    });

    /// `n` elements made by `f`.
    pub fn new(n: usize, mut f: impl FnMut() -> T) -> Isolated<T> {
        Isolated {
            items: (0..n + 2 * Self::PAD).map(|_| f()).collect(),
        }
    }

    #[inline]
    pub fn get(&self, i: usize) -> &T {
        &self.items[Self::PAD + i]
    }
}

pub struct PerCpu<T> {
    shards: Box<[Padded<T>]>,
}

impl<T: Default> Default for PerCpu<T> {
    fn default() -> Self {
        PerCpu {
            shards: (0..=SHARDS + VCPU_SHARDS)
                .map(|_| Padded(T::default()))
                .collect(),
        }
    }
}

impl<T> PerCpu<T> {
    /// The calling thread's shard (`this_cpu_ptr`). Update its atomics with [`local_add`].
    #[inline]
    pub fn local(&self) -> &T {
        &self.shards[this_shard().0].0
    }

    /// The calling thread's shard, looked up once for a whole request (`get_cpu_ptr`).
    #[inline]
    pub fn pin(&self) -> Local<'_, T> {
        let (i, owned) = this_shard();
        Local {
            shard: &self.shards[i].0,
            owned,
        }
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
    /// On its own lines: folds from any thread write it.
    total: Padded<AtomicI64>,
    shards: PerCpu<AtomicI64>,
}

impl PerCpuCounter {
    /// `percpu_counter_batch` (the kernel's is `max(32, 2 * nr_cpus)`).
    pub const BATCH: i64 = 32;

    pub fn new(v: i64) -> PerCpuCounter {
        PerCpuCounter {
            total: Padded(AtomicI64::new(v)),
            shards: PerCpu::default(),
        }
    }

    /// `percpu_counter_add_batch`.
    #[inline]
    pub fn add(&self, v: i64) {
        let (i, owned) = this_shard();
        let s = &self.shards.shards[i].0;
        if owned {
            // Nobody else writes this shard: a plain read and write.
            let n = s.load(Ordering::Relaxed) + v;
            if n.abs() >= Self::BATCH {
                s.store(0, Ordering::Relaxed);
                self.total.fetch_add(n, Ordering::Relaxed);
            } else {
                s.store(n, Ordering::Relaxed);
            }
            return;
        }
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
        Self::BATCH * (SHARDS + 1 + VCPU_SHARDS) as i64
    }
}

/// A thread's shard of a [`PerCpu`] and whether the thread owns it (see [`PerCpu::pin`]).
pub struct Local<'a, T> {
    shard: &'a T,
    owned: bool,
}

impl<T> Clone for Local<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Local<'_, T> {}

impl<'a, T> Local<'a, T> {
    #[inline]
    pub fn get(&self) -> &'a T {
        self.shard
    }
    /// Adds `n` to `c`, a counter of this shard: a plain load and store when owned.
    #[inline]
    pub fn add(&self, c: &std::sync::atomic::AtomicU64, n: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.owned {
            c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
        } else {
            c.fetch_add(n, Relaxed);
        }
    }
}

/// Adds `n` to `c`, a counter in the calling thread's shard of some [`PerCpu`] (from
/// [`PerCpu::local`]): a plain load and store when the thread owns the shard, an atomic add in
/// the overflow shard.
#[inline]
pub fn local_add(c: &std::sync::atomic::AtomicU64, n: u64) {
    use std::sync::atomic::Ordering::Relaxed;
    if this_shard().1 {
        c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
    } else {
        c.fetch_add(n, Relaxed);
    }
}

/// The calling thread's shard and whether the thread owns it: the lowest shard no live thread
/// holds, claimed on first use and released when the thread exits (the release and the next
/// claim order the old owner's last stores before the new owner's first load); the overflow
/// shard `SHARDS`, shared, when all are held or the thread is past its thread-locals' end.
#[cfg(not(loom))]
#[inline]
fn this_shard() -> (usize, bool) {
    #[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
    if let Some(cpu) = crate::sync::vcpu::cpu() {
        // Owned: only that virtual CPU writes it, and a simulator runs one at a time.
        assert!(
            cpu < VCPU_SHARDS,
            "virtual CPU {cpu} of at most {VCPU_SHARDS}"
        );
        return (SHARDS + 1 + cpu, true);
    }
    let i = SHARD.get();
    if i < SHARDS as u32 {
        return (i as usize, true);
    }
    if i == SHARDS as u32 {
        return (SHARDS, false);
    }
    claim_shard()
}

#[cfg(not(loom))]
const UNCLAIMED: u32 = u32::MAX;

/// Shards held by live threads, one bit each.
#[cfg(not(loom))]
static CLAIMED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[cfg(not(loom))]
thread_local! {
    /// The thread's shard (`SHARDS`: the overflow one), `UNCLAIMED` before the first use. A
    /// plain `const` cell: reading it is one load, with no lazy-initialisation check.
    static SHARD: std::cell::Cell<u32> = const { std::cell::Cell::new(UNCLAIMED) };
    /// Hands the shard back when the thread exits (touched once, at the claim).
    static RELEASE: Release = const { Release };
}

#[cfg(not(loom))]
struct Release;

#[cfg(not(loom))]
impl Drop for Release {
    fn drop(&mut self) {
        let i = SHARD.replace(SHARDS as u32);
        if i < SHARDS as u32 {
            CLAIMED.fetch_and(!(1u64 << i), std::sync::atomic::Ordering::Release);
        }
    }
}

#[cold]
#[cfg(not(loom))]
fn claim_shard() -> (usize, bool) {
    use std::sync::atomic::Ordering::{Acquire, Relaxed};
    // A thread whose destructors already ran (or are running) cannot register a release.
    if RELEASE.try_with(|_| ()).is_err() {
        SHARD.set(SHARDS as u32);
        return (SHARDS, false);
    }
    let all = (1u64 << SHARDS) - 1;
    let mut held = CLAIMED.load(Relaxed);
    let index = loop {
        let free = !held & all;
        if free == 0 {
            break SHARDS;
        }
        let i = free.trailing_zeros() as usize;
        match CLAIMED.compare_exchange_weak(held, held | 1 << i, Acquire, Relaxed) {
            Ok(_) => break i,
            Err(now) => held = now,
        }
    };
    SHARD.set(index as u32);
    (index, index < SHARDS)
}

/// Under loom: loom atomics cannot sit in a `static`, and a shared counter would add an
/// atomic (and its interleavings) to every model. A model must also pick the same shard in
/// every execution, which rules out hashing loom's `ThreadId` (it carries the execution's
/// id); its `Debug` form prints the thread's index within the execution (`ThreadId(2)`:
/// main is 0, then spawn order), so thread `i` takes shard `i % SHARDS`.
/// No thread owns a shard under loom: the models check the shared, atomic path.
#[cfg(loom)]
fn this_shard() -> (usize, bool) {
    let id = format!("{:?}", loom::thread::current().id());
    let n: usize = id
        .trim_start_matches("ThreadId(")
        .trim_end_matches(')')
        .parse()
        .expect("loom ThreadId's Debug form is ThreadId(<index>)");
    (n % SHARDS, false)
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
                        local_add(c.local(), 1);
                    }
                });
            }
        });
        let total: u64 = c.iter().map(|a| a.load(Ordering::Relaxed)).sum();
        assert_eq!(total, 1000 * (SHARDS as u64 + 8));
    }

    /// Shards handed back by exited threads are claimed again, and what their earlier owners
    /// counted stays counted.
    #[test]
    fn shards_are_reused_and_keep_their_counts() {
        let c: PerCpu<AtomicU64> = PerCpu::default();
        for round in 1..=3u64 {
            std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| {
                        for _ in 0..500 {
                            local_add(c.local(), 1);
                        }
                    });
                }
            });
            let total: u64 = c.iter().map(|a| a.load(Ordering::Relaxed)).sum();
            assert_eq!(total, round * 2000);
        }
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
        assert_eq!(sa == sb, share_a_shard, "shards {sa:?} and {sb:?}");
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
