//! Virtual-CPU hooks (cargo feature `vcpu-hooks`, off by default): every point where two
//! CPUs running the allocator interact — a lock, a try-lock, an unlock, a condition-variable
//! wait, a load, store or read-modify-write of a shared atomic — calls the [`Hook`] installed
//! on the calling thread, if any.
//!
//! A simulator (the lab's `--vcpus` mode) runs one virtual CPU at a time, each with its hook
//! installed on the thread while it runs (the lab runs them all as coroutines on one thread):
//! at each hook it charges the work done since the last one to that CPU's virtual clock and
//! decides which virtual CPU goes next. The allocator itself is
//! unchanged: the same code runs, only the synchronisation facade (`crate::sync`) reports
//! what it is about to do.
//!
//! While no hook is installed on any thread, each point costs one relaxed load of the count of
//! installed hooks and a branch; while one is, a point on any thread also reads its own
//! thread-local slot. Without the feature the facade is `parking_lot` and `std` and nothing
//! here exists.
//! A hook sees every lock as the address of its mutex and the name of the data it guards
//! (`std::any::type_name`), which is how a simulator tells group locks from PA locks.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What an atomic access does to its cache line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A plain load: a shared copy of the line.
    Load,
    /// A store or read-modify-write: the line exclusively, every other copy invalidated.
    Write,
}

/// The simulator's side of the seam. Every method runs on the thread that does the act, for
/// the virtual CPU whose hook is installed; it may suspend that CPU until the simulator lets
/// it go on.
pub trait Hook {
    /// Before taking `lock` (a mutex guarding a `what`): return once the simulator has
    /// granted it to this CPU. The real lock is taken right after, and must be free.
    fn lock(&self, lock: usize, what: &'static str);
    /// A try-lock: `true` grants the lock as [`Hook::lock`] does; `false` is "busy".
    fn try_lock(&self, lock: usize, what: &'static str) -> bool;
    /// Right after the real unlock.
    fn unlock(&self, lock: usize, what: &'static str);
    /// Whether another CPU holds `lock` now (the racy `spin_is_locked` read).
    fn is_locked(&self, lock: usize, what: &'static str) -> bool;
    /// A condition-variable wait: `lock` (already really unlocked) is released in the
    /// simulation and this CPU sleeps until [`Hook::notify_all`] on `cv`; the caller then
    /// takes `lock` again through [`Hook::lock`].
    fn wait(&self, cv: usize, lock: usize, what: &'static str);
    /// Wakes every CPU waiting on `cv`.
    fn notify_all(&self, cv: usize);
    /// An access to the atomic at `addr`.
    fn atomic(&self, addr: usize, access: Access);
    /// `folio_get` or `folio_put` on page `pnum` of the buddy cache (`s_buddy_cache`): an
    /// atomic read-modify-write of that folio's reference count, a line of its own per page.
    /// By default the write of [`folio_line`]`(pnum)`.
    fn folio_ref(&self, pnum: u64) {
        self.atomic(folio_line(pnum), Access::Write);
    }
    /// One group's step of the prefetch walk (`ext4_mb_prefetch`), at the group's state word
    /// `addr`: a write of its line when `rmw` (linux-6.18's `test_and_set_bit`, or seed 003's
    /// set of a clear mark), else a load (seed 003's test of a mark set long ago). By default
    /// the atomic access it is.
    fn walk_step(&self, addr: usize, rmw: bool) {
        self.atomic(addr, if rmw { Access::Write } else { Access::Load });
    }
    /// The kernel's crc32c of a whole `bytes`-long block bitmap, under the group lock
    /// (`ext4_block_bitmap_csum_set` in `ext4_mb_mark_context`): work the library does not
    /// do. Default: nothing.
    fn bitmap_csum(&self, bytes: u32) {
        let _ = bytes;
    }
    /// `ext4_mb_mark_context` of group `group` has dropped the group lock (`crate::sync`'s
    /// `marked`): the flex group's `free_clusters` counter (one per `flex` groups,
    /// [`flex_line`]) is updated and the bitmap's buffer head, taken before the lock, is
    /// released ([`bh_line`]). Default: nothing.
    fn marked(&self, group: u32, flex: u32) {
        let _ = (group, flex);
    }
    /// A device read of block `block` of device `dev`, `ns` long, is submitted and the CPU
    /// goes on (`ext4_read_block_bitmap_nowait` from prefetch). A read of the same block
    /// already submitted is not issued again. Default: nothing (a hook without a device).
    fn io_submit(&self, dev: usize, block: u64, ns: u64) {
        let _ = (dev, block, ns);
    }
    /// This CPU needs block `block` of device `dev` (`ext4_wait_block_bitmap`): if a read of
    /// it was submitted, it waits for that read to finish (the buffer lock: a second reader
    /// never issues its own read); if none was, it submits one of `ns` and waits for it.
    /// A read finished before costs nothing (the buffer is up to date). Default: nothing.
    fn io_wait(&self, dev: usize, block: u64, ns: u64) {
        let _ = (dev, block, ns);
    }
    /// The virtual CPU this hook runs, if it stands for one: its per-CPU counters then live
    /// in a shard of their own ([`cpu`]), as each kernel CPU's do, whatever OS thread runs
    /// it (a simulator may run every virtual CPU on one thread). Default: none.
    fn cpu(&self) -> Option<usize> {
        None
    }
}

/// Where [`Hook::folio_ref`] reports page `pnum`'s reference count: an address above every
/// user-space address (57 bits at most), so it is never an atomic of the allocator's.
pub fn folio_line(pnum: u64) -> usize {
    KERNEL_LINES + usize::try_from(pnum).map_or(RANGE - 1, |p| p.min(RANGE - 1))
}

/// The first address of the kernel lines the library has no object for, above every
/// user-space address (57 bits at most), so that none is ever an atomic of the allocator's:
/// the buddy cache's folios ([`folio_line`]), then the flex groups' counters
/// ([`flex_line`]), then the bitmaps' buffer heads ([`bh_line`]), each range 2^58 lines.
const KERNEL_LINES: usize = 1 << 60;
const RANGE: usize = 1 << 58;

/// Whether `addr` is one of [`folio_line`]'s.
pub fn is_folio_line(addr: usize) -> bool {
    (KERNEL_LINES..KERNEL_LINES + RANGE).contains(&addr)
}

/// The line of flex group `fg`'s `struct flex_groups` (`free_clusters`, `free_inodes`,
/// `used_dirs`): each is allocated on its own (`ext4_alloc_flex_bg_array`), so one line per
/// flex group is the least sharing the kernel can have (slab neighbours may share more).
pub fn flex_line(fg: u32) -> usize {
    KERNEL_LINES + RANGE + fg as usize
}

/// The line of group `group`'s block-bitmap buffer head (`b_count`).
pub fn bh_line(group: u32) -> usize {
    KERNEL_LINES + 2 * RANGE + group as usize
}

thread_local! {
    static HOOK: Cell<Option<Rc<dyn Hook>>> = const { Cell::new(None) };
    /// The installed hook's [`Hook::cpu`], read on every per-CPU counter update.
    static CPU: Cell<Option<usize>> = const { Cell::new(None) };
}

/// How many hooks are installed in this process, on all threads. While none is, a
/// synchronisation point costs one relaxed load of this count and no thread-local access, so
/// a real-time run after a simulation (`reproduce` measures both in one process) runs the
/// library at the speed it has before any. A thread sees its own install's increment in
/// program order; another thread that reads a stale count only looks into its own (empty)
/// thread-local slot.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// How many hooks are installed now, on all threads. A run that measures the library in
/// real time (the lab's non-simulated rows) expects 0: a hook installed anywhere sends every
/// synchronisation point of every thread to its thread-local slot.
pub fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Whether no hook is installed anywhere: the fast path of every synchronisation point.
#[inline(always)]
fn none_live() -> bool {
    LIVE.load(Ordering::Relaxed) == 0
}

/// Installs `hook` on the calling thread until the returned guard is dropped.
pub fn install(hook: Rc<dyn Hook>) -> Installed {
    LIVE.fetch_add(1, Ordering::Relaxed);
    CPU.with(|c| c.set(hook.cpu()));
    HOOK.with(|h| h.set(Some(hook)));
    Installed(std::marker::PhantomData)
}

/// Removes the thread's hook on drop; not `Send`, so it is dropped on the thread it was made.
pub struct Installed(std::marker::PhantomData<*const ()>);

impl Installed {
    /// Puts `hook` on the thread in place of the one installed, or none (`None`: nothing is
    /// reported until the next swap), keeping this guard and the count of live hooks: a
    /// simulator that switches virtual CPUs at every scheduling step swaps instead of
    /// installing and dropping, which would write the shared count twice a step.
    pub fn swap(&self, hook: Option<Rc<dyn Hook>>) {
        CPU.with(|c| c.set(hook.as_ref().and_then(|h| h.cpu())));
        HOOK.with(|h| h.set(hook));
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        HOOK.with(|h| h.set(None));
        CPU.with(|c| c.set(None));
        let was = LIVE.fetch_sub(1, Ordering::Relaxed);
        assert!(was > 0, "a hook guard dropped with no hook installed");
    }
}

/// The virtual CPU the calling thread runs now ([`Hook::cpu`] of its hook), if any.
#[inline]
pub fn cpu() -> Option<usize> {
    if none_live() {
        return None;
    }
    CPU.with(Cell::get)
}

/// Runs `f` with the calling thread's hook (if any) taken off, so that nothing `f` does is
/// reported; the hook is put back after.
pub(crate) fn set_aside<R>(f: impl FnOnce() -> R) -> R {
    if none_live() {
        return f();
    }
    let hook = HOOK.with(Cell::take);
    let r = f();
    HOOK.with(|h| h.set(hook));
    r
}

/// Runs `f` with the calling thread's hook, if one is installed.
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&dyn Hook) -> R) -> Option<R> {
    if none_live() {
        return None;
    }
    HOOK.with(|h| {
        let hook = h.take()?;
        let r = f(&*hook);
        h.set(Some(hook));
        Some(r)
    })
}

/// Whether the calling thread has a hook.
pub(crate) fn installed() -> bool {
    !none_live()
        && HOOK.with(|h| {
            let hook = h.take();
            let some = hook.is_some();
            h.set(hook);
            some
        })
}
