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
