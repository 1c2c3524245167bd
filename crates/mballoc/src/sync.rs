//! The synchronisation primitives the model checkers swap in.
//!
//! * Atomics of the lock-free structures that the `loom` model checks cover
//!   ([`crate::index::GroupSet`], [`crate::percpu::PerCpuCounter`]): loom's under
//!   `--cfg loom`, std's otherwise.
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

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicI64, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

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

/// A point where the shuttle model check may switch threads, placed after a lock-free read
/// whose answer the code then acts on (a racy test-then-act): shuttle switches only at its
/// own primitives, and std atomics are not among them. Nothing outside the model check.
#[inline(always)]
pub(crate) fn switch_point() {
    #[cfg(shuttle)]
    shuttle::thread::yield_now();
}

/// Starts a background thread (the prefetch readers): an OS thread, or a shuttle thread that
/// the model check schedules with the rest.
pub(crate) fn spawn(name: &str, f: impl FnOnce() + Send + 'static) {
    #[cfg(not(shuttle))]
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("spawning a background thread");
    #[cfg(shuttle)]
    {
        let _ = name;
        shuttle::thread::spawn(f);
    }
}

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
