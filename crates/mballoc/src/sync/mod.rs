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

/// `folio_get` or `folio_put` on the buddy cache's pages `pnums` (a group's bitmap and buddy,
/// `ext4_mb_load_buddy_gfp` / `ext4_mb_unload_buddy`): the library keeps buddies in the
/// groups, not in a page cache, so there is nothing to count; under `vcpu-hooks` the
/// reference counts' writes go to the thread's hook, the lines that the kernel's CPUs share.
/// The page numbers come from a closure so that a build without the hooks computes nothing
/// (the page arithmetic divides, and a division's zero check is not dead code).
#[inline(always)]
pub(crate) fn folio_refs(pnums: impl FnOnce() -> [u64; 2]) {
    #[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
    {
        let pnums = pnums();
        vcpu::with(|h| pnums.iter().for_each(|&p| h.folio_ref(p)));
    }
    #[cfg(not(all(not(shuttle), feature = "vcpu-hooks")))]
    let _ = pnums;
}

/// `ext4_block_bitmap_csum_set` in `ext4_mb_mark_context`: at every marking of a group's
/// on-disk bitmap, allocation or free, the kernel recomputes the crc32c of the whole bitmap
/// (`bytes` long) before it drops the group lock. The library keeps no checksum of its
/// in-memory bitmaps; under `vcpu-hooks` the thread's hook is told, so that a simulator can
/// charge that work inside the lock hold where the kernel does it.
#[inline(always)]
pub(crate) fn bitmap_csum(bytes: impl FnOnce() -> u32) {
    #[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
    {
        let bytes = bytes();
        vcpu::with(|h| h.bitmap_csum(bytes));
    }
    #[cfg(not(all(not(shuttle), feature = "vcpu-hooks")))]
    let _ = bytes;
}

/// The end of `ext4_mb_mark_context` for group `group`, after `ext4_unlock_group`: the kernel
/// then adds the change to the flex group's free-cluster count (`atomic64_sub` / `atomic64_add`
/// on `struct flex_groups`' `free_clusters`, one counter for `flex` groups) and drops the
/// bitmap's buffer head (`brelse`; `ext4_read_block_bitmap` took it with `get_bh` before the
/// lock). The library keeps neither object: it counts free blocks per group and per CPU, and
/// its bitmaps are not buffers. Under `vcpu-hooks` the thread's hook is told, so that a
/// simulator can move those lines between the CPUs that mark nearby groups.
#[inline(always)]
pub(crate) fn marked(group: u32, flex: impl FnOnce() -> u32) {
    #[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
    {
        let flex = flex();
        vcpu::with(|h| h.marked(group, flex));
    }
    #[cfg(not(all(not(shuttle), feature = "vcpu-hooks")))]
    let _ = (group, flex);
}

/// One group's step of the prefetch walk (`ext4_mb_prefetch`): `f` tests (or, `rmw`, tests
/// and sets) the "bitmap read" mark in the state word at `addr`. Under `vcpu-hooks` the
/// thread's hook hears of it as a walk step ([`vcpu::Hook::walk_step`]) instead of a plain
/// atomic: the kernel's step around that access (the group's `ext4_group_info` looked up,
/// 6.18's descriptor lookup, the locked RMW against a load) costs differently from the
/// allocator's other work between two points, and seed 003 is about exactly that difference.
#[inline(always)]
pub(crate) fn walk_step<R>(addr: usize, rmw: bool, f: impl FnOnce() -> R) -> R {
    #[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
    {
        if vcpu::with(|h| h.walk_step(addr, rmw)).is_some() {
            return vcpu::set_aside(f);
        }
        f()
    }
    #[cfg(not(all(not(shuttle), feature = "vcpu-hooks")))]
    {
        let _ = (addr, rmw);
        f()
    }
}

/// Runs `f` with the thread's hook set aside: reads the library makes for its own
/// bookkeeping where the kernel has nothing to read (the members of an order list, which the
/// kernel keeps linked and this library as a set), so that a simulator does not charge them.
#[inline(always)]
pub(crate) fn unobserved<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
    return vcpu::set_aside(f);
    #[cfg(not(all(not(shuttle), feature = "vcpu-hooks")))]
    f()
}

#[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
pub mod vcpu;

#[cfg(all(not(loom), not(shuttle), feature = "vcpu-hooks"))]
pub(crate) use hooked::AtomicU64;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicI64, AtomicU64, Ordering};
#[cfg(all(not(loom), shuttle))]
pub(crate) use shuttle::sync::atomic::AtomicU64;
#[cfg(all(not(loom), not(shuttle), not(feature = "vcpu-hooks")))]
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
    #[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
    pub(crate) use super::hooked::{
        AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    };
    #[cfg(shuttle)]
    pub(crate) use shuttle::sync::atomic::{
        AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    };
    pub(crate) use std::sync::atomic::Ordering;
    #[cfg(all(not(shuttle), not(feature = "vcpu-hooks")))]
    pub(crate) use std::sync::atomic::{
        AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    };
}

#[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
pub(crate) use hooked::{Mutex, MutexGuard};
#[cfg(shuttle)]
pub(crate) use model_lock::{Mutex, MutexGuard};
#[cfg(all(not(shuttle), not(feature = "vcpu-hooks")))]
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
    #[cfg(all(not(shuttle), not(feature = "vcpu-hooks")))]
    pub(crate) fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.0.wait(&mut guard);
        guard
    }
    /// Under a virtual-CPU hook the wait is the simulator's: the real lock is let go, the
    /// hook sleeps this CPU until a notify, and the lock is taken again through the hook.
    #[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
    pub(crate) fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        if !vcpu::installed() {
            self.0.wait(&mut guard.inner);
            return guard;
        }
        let cv = self as *const Self as usize;
        let (mutex, lock) = (guard.mutex, guard.mutex.addr());
        guard.release_for(|h| h.wait(cv, lock, std::any::type_name::<T>()));
        mutex.lock()
    }
    #[cfg(shuttle)]
    pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.0.wait(guard).unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn notify_all(&self) {
        #[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
        vcpu::with(|h| h.notify_all(self as *const Self as usize));
        self.0.notify_all();
    }
}

/// A device read of `block` on `dev`, costing `ns()` of device time, reported to the
/// thread's virtual-CPU hook: submitted without waiting (`wait` false, prefetch), or needed
/// now (`wait` true: the hook sleeps this CPU, in virtual time, until the read in flight or a
/// new one ends). True when a hook took it; false (no hook, or no `vcpu-hooks` feature: then
/// this is nothing at all) means the caller's source charges its own time.
#[inline(always)]
pub(crate) fn io(dev: usize, block: u64, ns: impl FnOnce() -> u64, wait: bool) -> bool {
    #[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
    return vcpu::with(|h| match wait {
        true => h.io_wait(dev, block, ns()),
        false => h.io_submit(dev, block, ns()),
    })
    .is_some();
    #[cfg(not(all(not(shuttle), feature = "vcpu-hooks")))]
    {
        let _ = (dev, block, ns, wait);
        false
    }
}

/// Whether the calling thread runs under a virtual-CPU hook (never without `vcpu-hooks`).
#[inline(always)]
pub(crate) fn virtual_time() -> bool {
    #[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
    return vcpu::installed();
    #[cfg(not(all(not(shuttle), feature = "vcpu-hooks")))]
    false
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

/// `parking_lot`'s mutex and `std`'s atomics with every lock, try-lock, unlock and atomic
/// access reported to the thread's virtual-CPU hook first ([`crate::vcpu`]), under the cargo
/// feature `vcpu-hooks`. With no hook installed they behave as the plain types.
#[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
#[allow(dead_code)] // the full interface of the types it stands for
mod hooked {
    use std::mem::ManuallyDrop;
    use std::ops::{Deref, DerefMut};
    use std::sync::atomic::Ordering;

    use super::vcpu::{self, Access};

    #[derive(Default, Debug)]
    pub struct Mutex<T>(parking_lot::Mutex<T>);

    pub struct MutexGuard<'a, T> {
        pub(super) inner: ManuallyDrop<parking_lot::MutexGuard<'a, T>>,
        pub(super) mutex: &'a Mutex<T>,
    }

    impl<T> Mutex<T> {
        pub const fn new(value: T) -> Self {
            Mutex(parking_lot::Mutex::new(value))
        }
        pub(super) fn addr(&self) -> usize {
            self as *const Self as usize
        }
        fn what() -> &'static str {
            std::any::type_name::<T>()
        }
        pub fn lock(&self) -> MutexGuard<'_, T> {
            vcpu::with(|h| h.lock(self.addr(), Self::what()));
            MutexGuard {
                inner: ManuallyDrop::new(self.0.lock()),
                mutex: self,
            }
        }
        pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            if vcpu::with(|h| h.try_lock(self.addr(), Self::what())) == Some(false) {
                return None;
            }
            Some(MutexGuard {
                inner: ManuallyDrop::new(self.0.try_lock()?),
                mutex: self,
            })
        }
        pub fn is_locked(&self) -> bool {
            vcpu::with(|h| h.is_locked(self.addr(), Self::what()))
                .unwrap_or_else(|| self.0.is_locked())
        }
        pub fn get_mut(&mut self) -> &mut T {
            self.0.get_mut()
        }
        pub fn into_inner(self) -> T {
            self.0.into_inner()
        }
    }

    impl<'a, T> MutexGuard<'a, T> {
        /// Lets the real lock go and, if a hook is installed, runs `f` with it instead of
        /// reporting an unlock (a condition-variable wait reports its own release).
        pub(super) fn release_for(self, f: impl FnOnce(&dyn vcpu::Hook)) {
            let mut me = ManuallyDrop::new(self);
            // SAFETY: `me` is never used again nor dropped; the inner guard is dropped once.
            unsafe { ManuallyDrop::drop(&mut me.inner) };
            vcpu::with(f);
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            &self.inner
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            &mut self.inner
        }
    }

    impl<T> Drop for MutexGuard<'_, T> {
        fn drop(&mut self) {
            // SAFETY: dropped once, here; `release_for` forgets the guard instead.
            unsafe { ManuallyDrop::drop(&mut self.inner) };
            vcpu::with(|h| h.unlock(self.mutex.addr(), Mutex::<T>::what()));
        }
    }

    /// Reports an access to the atomic at `a`.
    #[inline]
    fn touch<A>(a: &A, access: Access) {
        vcpu::with(|h| h.atomic(a as *const A as usize, access));
    }

    /// Read-modify-writes of one value: `name(&self, v, ordering)`, each a write of the line.
    macro_rules! rmw {
        ($t:ty; $($op:ident),*) => {
            $(
                #[inline]
                pub fn $op(&self, v: $t, o: Ordering) -> $t {
                    touch(self, Access::Write);
                    self.0.$op(v, o)
                }
            )*
        };
    }

    /// Compare-and-exchange, strong and weak: a write of the line even when it fails (the
    /// CPU takes the line exclusively either way).
    macro_rules! cas {
        ($t:ty; $($op:ident),*) => {
            $(
                #[inline]
                pub fn $op(&self, c: $t, n: $t, s: Ordering, f: Ordering) -> Result<$t, $t> {
                    touch(self, Access::Write);
                    self.0.$op(c, n, s, f)
                }
            )*
        };
    }

    macro_rules! atomic_common {
        ($name:ident, $std:ident, $t:ty) => {
            #[derive(Default, Debug)]
            #[repr(transparent)]
            pub struct $name(std::sync::atomic::$std);

            impl $name {
                pub const fn new(v: $t) -> Self {
                    $name(std::sync::atomic::$std::new(v))
                }
                #[inline]
                pub fn load(&self, o: Ordering) -> $t {
                    touch(self, Access::Load);
                    self.0.load(o)
                }
                #[inline]
                pub fn store(&self, v: $t, o: Ordering) {
                    touch(self, Access::Write);
                    self.0.store(v, o)
                }
                rmw!($t; swap, fetch_or, fetch_and);
                cas!($t; compare_exchange, compare_exchange_weak);
                #[inline]
                pub fn fetch_update(
                    &self,
                    s: Ordering,
                    f: Ordering,
                    g: impl FnMut($t) -> Option<$t>,
                ) -> Result<$t, $t> {
                    // A closure that declines makes it a load (`atomic_add_unless` at 0).
                    let r = self.0.fetch_update(s, f, g);
                    touch(self, if r.is_ok() { Access::Write } else { Access::Load });
                    r
                }
                pub fn get_mut(&mut self) -> &mut $t {
                    self.0.get_mut()
                }
                pub fn into_inner(self) -> $t {
                    self.0.into_inner()
                }
            }
        };
    }

    macro_rules! atomic_int {
        ($name:ident, $std:ident, $t:ty) => {
            atomic_common!($name, $std, $t);
            impl $name {
                rmw!($t; fetch_add, fetch_sub, fetch_max, fetch_min);
            }
        };
    }

    atomic_common!(AtomicBool, AtomicBool, bool);
    atomic_int!(AtomicI32, AtomicI32, i32);
    atomic_int!(AtomicU32, AtomicU32, u32);
    atomic_int!(AtomicU64, AtomicU64, u64);
    atomic_int!(AtomicU8, AtomicU8, u8);
    atomic_int!(AtomicUsize, AtomicUsize, usize);
}
