//! The synchronisation primitives the model checkers swap in.
//!
//! * Atomics of the lock-free structures that the `loom` model checks cover
//!   ([`crate::group::index::GroupSet`], [`crate::sync::percpu::PerCpuCounter`]): loom's under
//!   `--cfg loom`, std's otherwise (the index's are `shuttle`'s under `--cfg shuttle`).
//! * The other atomics of the allocator's shared state ([`atomic`]): `shuttle`'s under
//!   `--cfg shuttle`, so that the model check also switches threads between a lock-free read
//!   and what the code does with it.
//! * The allocator's mutexes (group locks, owners' PA locks, locality groups, the pending-free
//!   list, the commit and tunable locks): `parking_lot`'s normally, and under `--cfg shuttle` a
//!   thin wrapper with the same interface over `shuttle`'s, so that the `shuttle` model check
//!   (`tests/shuttle.rs`) schedules the real allocator's lock paths: every lock, try-lock and
//!   unlock is a point where it may switch threads, and a lock-order cycle is a reported
//!   deadlock instead of a hang.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test --release -p mballoc --lib loom_
//! RUSTFLAGS="--cfg shuttle" cargo test --release -p mballoc --test shuttle
//! ```

pub(crate) mod percpu;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicI64, AtomicU64, Ordering};
#[cfg(all(not(loom), shuttle))]
pub(crate) use shuttle::sync::atomic::AtomicU64;
#[cfg(all(not(loom), not(shuttle)))]
pub(crate) use std::sync::atomic::AtomicU64;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicI64, Ordering};

/// The atomics of the allocator's shared state that requests read and write between lock
/// holds: each group's lock-free counts and class, the `bb_state` bits and read marks, the
/// stream goals, the count of groups still to load, the commit ids, the contention gauge, the
/// cache's load count and the locality groups' entry counts. `std`'s normally; `shuttle`'s
/// under `--cfg shuttle`, where every load, store and read-modify-write is a point at which
/// the model check may switch threads, so a lock-free test and the act that follows it (a
/// group read as fit and then locked, a `NEED_INIT` bit read and then a read submitted) are
/// explored with other threads' steps in between.
///
/// Not here: the per-thread shards (statistics, `percpu_counter` stand-ins, the discard
/// sequence), which their owner updates with a plain load and store: shuttle runs every model
/// thread on one OS thread, so its threads would share one shard and, with the load and the
/// store made separate steps, lose each other's updates; they stay std's, whose steps are
/// never split.
pub(crate) mod atomic {
    #[cfg(shuttle)]
    pub(crate) use shuttle::sync::atomic::{
        AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    };
    pub(crate) use std::sync::atomic::Ordering;
    #[cfg(not(shuttle))]
    pub(crate) use std::sync::atomic::{
        AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    };
}

#[cfg(shuttle)]
pub(crate) use model_lock::{Mutex, MutexGuard};
#[cfg(not(shuttle))]
pub(crate) use parking_lot::{Mutex, MutexGuard};
#[cfg(shuttle)]
pub(crate) use shuttle::sync::mpsc;
#[cfg(not(shuttle))]
pub(crate) use std::sync::mpsc;

/// A condition variable whose `wait` takes the guard and gives it back (the one form both
/// `parking_lot` and `shuttle` can offer).
#[derive(Default)]
pub(crate) struct Condvar(
    #[cfg(not(shuttle))] parking_lot::Condvar,
    #[cfg(shuttle)] shuttle::sync::Condvar,
);

impl Condvar {
    #[cfg(not(shuttle))]
    pub(crate) fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.0.wait(&mut guard);
        guard
    }
    #[cfg(shuttle)]
    pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.0.wait(guard).unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}

/// Starts a background thread (the prefetch readers): an OS thread, or a shuttle thread that
/// the model check schedules with the rest.
pub(crate) fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> JoinHandle {
    #[cfg(not(shuttle))]
    return std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("spawning a background thread");
    #[cfg(shuttle)]
    {
        let _ = name;
        shuttle::thread::spawn(f)
    }
}

/// What [`spawn`] returns, to wait for the thread's end.
#[cfg(not(shuttle))]
pub(crate) type JoinHandle = std::thread::JoinHandle<()>;
#[cfg(shuttle)]
pub(crate) type JoinHandle = shuttle::thread::JoinHandle<()>;

/// `parking_lot`'s mutex interface over `shuttle`'s mutex (no poisoning: a panicking test
/// fails the whole model check anyway).
#[cfg(shuttle)]
mod model_lock {
    pub type MutexGuard<'a, T> = shuttle::sync::MutexGuard<'a, T>;

    #[derive(Default, Debug)]
    pub struct Mutex<T>(shuttle::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub fn new(value: T) -> Self {
            Mutex(shuttle::sync::Mutex::new(value))
        }
        pub fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }
        pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            match self.0.try_lock() {
                Ok(g) => Some(g),
                Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        }
        /// shuttle has no `is_locked`: a try-lock released at once answers the same question
        /// (and is a scheduling point, as the racy read it models is).
        pub fn is_locked(&self) -> bool {
            self.try_lock().is_none()
        }
    }
}
