//! The virtual-CPU scheduler: N virtual CPUs (coroutines on one thread, `super::coro`),
//! exactly one running at a time, each with a virtual clock. At every synchronisation point
//! of the allocator ([`mballoc::vcpu::Hook`]) the running CPU is charged the work since its
//! last point, then the runnable CPU with the earliest clock (ties: the lowest id) goes next,
//! so that every interaction — a lock taken, a try-lock refused, a cache line moved — happens
//! in virtual-time order. Nothing depends on the host's timing: the same inputs give the same
//! schedule.
//!
//! What an interaction costs ([`Costs`]):
//! * a lock another CPU holds: wait until its release (FIFO, as a queued spinlock), then the
//!   hand-off; a lock last held by another CPU: its data lines move ([`Costs::lines`]);
//! * an atomic on a line another CPU wrote: one transfer; a write to a line others hold: a
//!   transfer, serialised behind the line's previous writer (`free_at`), which is what makes a
//!   contended read-modify-write a queue.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use mballoc::vcpu::{Access, Hook};
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

use super::cost::{Costs, Seg};
use super::io::{Device, IoStats};
use super::lock_kind::LockKind;

/// The most virtual CPUs (a line's sharers are one `u128`).
pub const MAX_VCPUS: usize = 128;

/// Per lock kind, over the whole run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LockStats {
    pub acquisitions: u64,
    /// Acquisitions that found the lock held and queued.
    pub waits: u64,
    pub wait_ns: u64,
    /// Try-locks answered busy (`ext4_try_lock_group` skips) and busy `is_locked` reads.
    pub busy: u64,
    /// Acquisitions by another CPU than the last holder (the data moved).
    pub migrations: u64,
    /// Virtual ns from grant to release, all holders together.
    pub hold_ns: u64,
}

/// What a run counted, all CPUs together.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SchedStats {
    pub locks: BTreeMap<LockKind, LockStats>,
    /// Cache lines that moved to the CPU that touched them (loads and writes).
    pub line_transfers: u64,
    /// The part of `line_transfers` on a walk's words ([`Sched::walk_lines`]: the groups'
    /// `bb_state`), loads and writes.
    pub walk_line_loads: u64,
    pub walk_line_writes: u64,
    /// Time spent queued behind another CPU's write to a line.
    pub line_wait_ns: u64,
    /// The part of `line_wait_ns` on the lab's own lines outside the allocator (the
    /// journal's `j_state_lock` and running transaction, the inode table blocks' buffer
    /// heads).
    pub outside_line_wait_ns: u64,
    /// The part of `line_wait_ns` on the buddy cache's folio reference counts
    /// ([`mballoc::vcpu::folio_line`]).
    pub folio_line_wait_ns: u64,
    /// Writes of those reference counts (`folio_get` and `folio_put`).
    pub folio_refs: u64,
    /// The part of `line_wait_ns` on the lines `ext4_mb_mark_context` writes after the group
    /// lock: the flex groups' free-cluster counters and the bitmaps' buffer heads
    /// ([`mballoc::vcpu::Hook::marked`]).
    pub marking_line_wait_ns: u64,
    /// Hook calls (every synchronisation point).
    pub points: u64,
    /// Times the running CPU changed.
    pub switches: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Runnable,
    Blocked,
    Done,
}

#[derive(Default)]
struct LockState {
    owner: Option<usize>,
    /// The owner's clock when it was granted the lock (after any move of its data).
    since: u64,
    last: Option<usize>,
    /// CPU, since when, and the lock it asked for (its group's, under a hashed lock).
    waiters: VecDeque<(usize, u64, usize)>,
}

/// One cache line's state: which CPUs hold a copy, and until when its last write keeps it.
#[derive(Default)]
struct Line {
    sharers: u128,
    free_at: u64,
}

struct State {
    running: usize,
    /// The earliest runnable CPU other than the running one (clock, id; `None` inside: no
    /// other), as found at the last full look and valid while no other CPU's clock or
    /// status has changed since; `None`: look again.
    others: Option<Option<(u64, usize)>>,
    clock: Vec<u64>,
    status: Vec<Status>,
    locks: HashMap<usize, LockState>,
    /// Every line the simulation has seen, by its atomic's address.
    lines: HashMap<usize, Line>,
    cvs: HashMap<usize, Vec<usize>>,
    stats: SchedStats,
    /// Events of a CPU whose clock is still before this (its warm-up) go to `warm`, which
    /// nothing reads: the window counts only what happens once each CPU is in it.
    count_from: u64,
    warm: SchedStats,
    /// The disk bitmap reads wait on (`super::io`).
    device: Device,
    /// The kernel's hashed group locks ([`Sched::hash_group_locks`]), if modelled.
    bgl: Option<Bgl>,
    /// With `bgl`: the CPU that last held each group's own data (by its lock's address).
    group_last: HashMap<usize, usize>,
    /// The walk's words ([`Sched::walk_lines`]): with `line_overlap`, the only accesses that
    /// overlap.
    walk: Option<std::ops::Range<usize>>,
}

/// `s_blockgroup_lock`: the kernel's groups share `locks` spinlocks, group `g` taking lock
/// `g & (locks - 1)` (`bgl_lock_ptr`; `NR_BG_LOCKS` is 128 on kernels built for 32 CPUs or
/// more), each on a line of its own (`____cacheline_aligned_in_smp`).
#[derive(Debug, Clone, Copy)]
struct Bgl {
    span: mballoc::GroupLockSpan,
    locks: u32,
}

/// Where the hashed locks' keys start: far from any heap address a real lock reports.
const BGL_KEY: usize = usize::MAX - (1 << 20);

impl State {
    /// The lock the simulation arbitrates for a lock the library takes: a group lock's
    /// hashed lock when the kernel's sharing is modelled, else the lock itself.
    fn key(&self, lock: usize, kind: LockKind) -> usize {
        match self.bgl {
            Some(b) if kind == LockKind::Group => b
                .span
                .group_of(lock)
                .map_or(lock, |g| BGL_KEY + (g & (b.locks - 1)) as usize),
            _ => lock,
        }
    }

    /// Where CPU `me`'s events count: the run's figures once its clock is in the window.
    fn stats_of(&mut self, me: usize) -> &mut SchedStats {
        if self.clock[me] >= self.count_from {
            &mut self.stats
        } else {
            &mut self.warm
        }
    }
}

/// The shared scheduler; each virtual CPU reaches it through its [`VcpuHook`].
pub struct Sched {
    st: Mutex<State>,
    costs: Costs,
    /// How far (ns) the running CPU may run past the earliest other runnable one before it
    /// hands over (0: never, exact order). See [`Sched::with_device`].
    slack_ns: u64,
}

/// A virtual deadlock: no CPU can run, some wait for locks or wake-ups.
#[derive(Debug)]
pub struct Deadlock;

impl Sched {
    /// `n` CPUs, CPU 0 first to run.
    pub fn new(n: usize, costs: Costs) -> Arc<Sched> {
        Sched::with_device(n, costs, Device::new(1), 0)
    }

    /// `n` CPUs whose bitmap reads queue on `device` (`super::io`). With
    /// `slack_ns` > 0 the running CPU goes on while its clock is less than `slack_ns` past
    /// the earliest other runnable CPU's: far fewer switches on long walks, at the
    /// price of interactions ordered only to within `slack_ns` (a lock may go to a CPU up
    /// to `slack_ns` later in virtual time than to one that asks after it).
    pub fn with_device(n: usize, costs: Costs, device: Device, slack_ns: u64) -> Arc<Sched> {
        assert!((1..=MAX_VCPUS).contains(&n), "1..={MAX_VCPUS} vCPUs");
        Arc::new(Sched {
            st: Mutex::new(State {
                running: 0,
                others: None,
                clock: vec![0; n],
                status: vec![Status::Runnable; n],
                locks: HashMap::default(),
                lines: HashMap::default(),
                cvs: HashMap::default(),
                stats: SchedStats::default(),
                count_from: 0,
                warm: SchedStats::default(),
                device,
                bgl: None,
                walk: None,
                group_last: HashMap::default(),
            }),
            costs,
            slack_ns,
        })
    }

    pub fn costs(&self) -> &Costs {
        &self.costs
    }

    /// Arbitrates the group locks of the allocator whose locks lie at `span` as the kernel's
    /// `locks` hashed spinlocks (a power of two): two groups that share one wait for each
    /// other, and a try-lock or `spin_is_locked` on one sees the other held. The lock word
    /// moves with the hashed lock, the group's own data with the group. Set before the CPUs
    /// start.
    /// The lines of `span` are a walk's (the groups' `bb_state` words,
    /// `Allocator::group_state_span`): one CPU reads and writes them one group after another,
    /// no access waiting on the last, so with `line_overlap` their transfers overlap; an
    /// access to any other line is one the work after it needs, and costs a whole transfer.
    pub fn walk_lines(&self, span: std::ops::Range<usize>) {
        self.state().walk = Some(span);
    }

    pub fn hash_group_locks(&self, span: mballoc::GroupLockSpan, locks: u32) {
        assert!(locks.is_power_of_two(), "{locks} hashed group locks");
        self.state().bgl = Some(Bgl { span, locks });
    }

    /// Counts only events at virtual times from `ns` on (each CPU's own clock): the time
    /// before is every CPU's warm-up. Set before the CPUs start.
    pub fn count_from(&self, ns: u64) {
        self.state().count_from = ns;
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The number of virtual CPUs.
    pub fn cpus(&self) -> usize {
        self.state().clock.len()
    }

    /// The CPU whose turn it is, or `None` once every CPU is done.
    pub(super) fn turn(&self) -> Option<usize> {
        let st = self.state();
        let done = st.status.iter().all(|&s| s == Status::Done);
        (!done).then_some(st.running)
    }

    /// Suspends CPU `me` until it is the running one.
    fn wait_turn<'a>(&'a self, me: usize, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        while st.running != me {
            drop(st);
            super::yielder::suspend();
            st = self.state();
        }
        st
    }

    /// Hands the turn to the runnable CPU with the earliest clock if that is not `me` (or
    /// `me` cannot run), and waits for `me`'s next turn.
    fn reschedule<'a>(&'a self, me: usize, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        // The common case, decided without looking at every CPU: `me` runs on while it is
        // the earliest, or within the slack of the earliest other.
        if st.status[me] == Status::Runnable {
            let others = match st.others {
                Some(o) => o,
                None => {
                    let o = (0..st.clock.len())
                        .filter(|&c| c != me && st.status[c] == Status::Runnable)
                        .map(|c| (st.clock[c], c))
                        .min();
                    st.others = Some(o);
                    o
                }
            };
            let goes_on = others.is_none_or(|o| {
                (st.clock[me], me) < o || st.clock[me] < o.0.saturating_add(self.slack_ns)
            });
            if goes_on {
                return st;
            }
        }
        st.others = None;
        let next = (0..st.clock.len())
            .filter(|&c| st.status[c] == Status::Runnable)
            .min_by_key(|&c| (st.clock[c], c));
        match next {
            Some(n) if n == me => st,
            Some(n)
                if st.status[me] == Status::Runnable
                    && st.clock[me] < st.clock[n].saturating_add(self.slack_ns) =>
            {
                st
            }
            Some(n) => {
                st.running = n;
                st.stats_of(me).switches += 1;
                if st.status[me] == Status::Done {
                    return st;
                }
                self.wait_turn(me, st)
            }
            None if st.status.iter().all(|&s| s == Status::Done) => st,
            None => {
                drop(st);
                std::panic::panic_any(Deadlock);
            }
        }
    }

    /// Charges `me` the segment that ends here and lets earlier CPUs go first.
    fn point<'a>(&'a self, me: usize, seg: Option<Seg>) -> MutexGuard<'a, State> {
        let mut st = self.state();
        debug_assert_eq!(st.running, me, "only the running CPU reaches a point");
        st.clock[me] += seg.map_or(0, |s| self.costs.segment(s));
        st.stats_of(me).points += 1;
        self.reschedule(me, st)
    }

    /// CPU `me` is done: it never runs again.
    pub fn finish(&self, me: usize) {
        let mut st = self.state();
        st.status[me] = Status::Done;
        drop(self.reschedule(me, st));
    }

    /// Charges `me` the allocator's work up to here (the end of a call).
    pub fn mark(&self, me: usize, seg: Seg) {
        drop(self.point(me, Some(seg)));
    }

    /// CPU `me`'s clock.
    pub fn clock(&self, me: usize) -> u64 {
        self.state().clock[me]
    }

    /// `me` works `ns` without interacting (the lab's own costs, outside the allocator).
    pub fn work(&self, me: usize, ns: u64) {
        let mut st = self.state();
        st.clock[me] += ns;
        drop(self.reschedule(me, st));
    }

    /// An access by `me` to the line of `addr` (an allocator atomic, or one of the lab's
    /// kernel-wide lines): a transfer unless `me` holds the line as needed.
    pub fn touch(&self, me: usize, addr: usize, access: Access, seg: Option<Seg>) {
        let mut st = self.point(me, seg);
        let transfer = self.costs.transfer_ns;
        let bit = 1u128 << me;
        let now = st.clock[me];
        // One line per atomic, not per 64 bytes of address: which atomics share a line would
        // depend on the heap's layout, and the library pads its shared atomics apart anyway.
        let folio = mballoc::vcpu::is_folio_line(addr);
        let marking = addr >= mballoc::vcpu::flex_line(0);
        if folio {
            st.stats_of(me).folio_refs += 1;
        }
        // With `line_overlap`, an access to a walk's word that finds its line settled costs
        // what one of many independent misses costs (the line itself stays in flight for the
        // whole transfer); an access to any other line, or to a line still in flight, waits
        // and pays the whole transfer (what follows depends on it).
        let overlap = self.costs.overlap_ns;
        let walk = st.walk.as_ref().is_some_and(|w| w.contains(&addr));
        let line = st.lines.entry(addr).or_default();
        let (cost, waited) = match access {
            Access::Load if line.sharers & bit != 0 || line.sharers == 0 => (0, 0),
            Access::Load => {
                line.sharers |= bit;
                match overlap {
                    Some((load, _)) if walk => (load.min(transfer), 0),
                    _ => (transfer, 0),
                }
            }
            Access::Write if line.sharers & !bit == 0 => {
                line.sharers = bit;
                (0, 0)
            }
            Access::Write => {
                let start = now.max(line.free_at);
                line.free_at = start + transfer;
                line.sharers = bit;
                match overlap {
                    Some((_, rmw)) if start == now && walk => (rmw.min(transfer), 0),
                    _ => (start - now + transfer, start - now),
                }
            }
        };
        st.clock[me] += cost;
        if cost > 0 {
            let stats = st.stats_of(me);
            stats.line_transfers += 1;
            if walk {
                match access {
                    Access::Load => stats.walk_line_loads += 1,
                    Access::Write => stats.walk_line_writes += 1,
                }
            }
            stats.line_wait_ns += waited;
            if marking {
                stats.marking_line_wait_ns += waited;
            } else if seg.is_none() {
                stats.outside_line_wait_ns += waited;
            }
            if folio {
                stats.folio_line_wait_ns += waited;
            }
        }
    }

    /// Makes `me` the owner of a free `lock`, charging its data's move if another CPU held
    /// it last.
    fn grant(&self, st: &mut State, me: usize, lock: usize, data: usize, kind: LockKind) {
        let lines = self.costs.lines(kind);
        let l = st.locks.entry(lock).or_default();
        debug_assert!(l.owner.is_none(), "granting a held lock");
        l.owner = Some(me);
        let moved = l.last.is_some_and(|p| p != me);
        l.last = Some(me);
        // A hashed lock: its word moves with it, the group's own lines with the group.
        let moved_lines = if lock == data {
            u64::from(moved) * lines
        } else {
            let data_moved = st.group_last.insert(data, me).is_some_and(|p| p != me);
            u64::from(moved) + u64::from(data_moved) * lines.saturating_sub(1)
        };
        let stats = st.stats_of(me);
        let s = stats.locks.entry(kind).or_default();
        s.acquisitions += 1;
        if moved {
            s.migrations += 1;
        }
        if moved_lines > 0 {
            stats.line_transfers += moved_lines;
            st.clock[me] += moved_lines * self.costs.transfer_ns;
        }
        let now = st.clock[me];
        if let Some(l) = st.locks.get_mut(&lock) {
            l.since = now;
        }
    }

    fn lock(&self, me: usize, data: usize, kind: LockKind) {
        let mut st = self.point(me, Some(Seg::Lock(kind)));
        let lock = st.key(data, kind);
        let held = st.locks.get(&lock).and_then(|l| l.owner);
        match held {
            None => self.grant(&mut st, me, lock, data, kind),
            Some(o) => {
                assert_ne!(o, me, "a CPU re-locking a lock it holds ({kind:?})");
                let now = st.clock[me];
                st.locks
                    .entry(lock)
                    .or_default()
                    .waiters
                    .push_back((me, now, data));
                st.status[me] = Status::Blocked;
                drop(self.reschedule(me, st));
            }
        }
    }

    fn try_lock(&self, me: usize, data: usize, kind: LockKind) -> bool {
        let mut st = self.point(me, Some(Seg::TryLock(kind)));
        let lock = st.key(data, kind);
        if st.locks.get(&lock).is_some_and(|l| l.owner.is_some()) {
            st.stats_of(me).locks.entry(kind).or_default().busy += 1;
            return false;
        }
        self.grant(&mut st, me, lock, data, kind);
        true
    }

    fn is_locked(&self, me: usize, data: usize, kind: LockKind) -> bool {
        let mut st = self.point(me, Some(Seg::TryLock(kind)));
        let lock = st.key(data, kind);
        let busy = st
            .locks
            .get(&lock)
            .is_some_and(|l| l.owner.is_some_and(|o| o != me));
        if busy {
            st.stats_of(me).locks.entry(kind).or_default().busy += 1;
        }
        busy
    }

    /// Releases `lock` at `me`'s clock; the first waiter gets it after the hand-off.
    fn release(&self, st: &mut State, me: usize, data: usize, kind: LockKind) {
        let lock = st.key(data, kind);
        let now = st.clock[me];
        let handoff = self.costs.handoff_ns;
        let l = st
            .locks
            .get_mut(&lock)
            .expect("releasing a lock never taken");
        assert_eq!(l.owner, Some(me), "a CPU releasing a lock it does not hold");
        l.owner = None;
        // Only the part in the window counts: a hold or a wait begun in the warm-up too.
        let held = now - l.since.max(st.count_from.min(now));
        st.stats_of(me).locks.entry(kind).or_default().hold_ns += held;
        let l = st.locks.get_mut(&lock).expect("just seen");
        if let Some((w, since, wants)) = l.waiters.pop_front() {
            st.others = None;
            st.clock[w] = st.clock[w].max(now) + handoff;
            st.status[w] = Status::Runnable;
            let waited = st.clock[w] - since.max(st.count_from.min(st.clock[w]));
            // A wait counts where it ends (a warm-up's that ends in the window, its part).
            let s = st.stats_of(w).locks.entry(kind).or_default();
            s.waits += 1;
            s.wait_ns += waited;
            self.grant(st, w, lock, wants, kind);
        }
    }

    fn unlock(&self, me: usize, lock: usize, kind: LockKind) {
        let mut st = self.point(me, Some(Seg::Unlock(kind)));
        self.release(&mut st, me, lock, kind);
    }

    fn wait(&self, me: usize, cv: usize, lock: usize, kind: LockKind) {
        let mut st = self.point(me, Some(Seg::Unlock(kind)));
        self.release(&mut st, me, lock, kind);
        st.cvs.entry(cv).or_default().push(me);
        st.status[me] = Status::Blocked;
        drop(self.reschedule(me, st));
    }

    fn notify_all(&self, me: usize, cv: usize) {
        let mut st = self.point(me, Some(Seg::Atomic));
        let now = st.clock[me];
        st.others = None;
        for w in st.cvs.remove(&cv).unwrap_or_default() {
            st.clock[w] = st.clock[w].max(now);
            st.status[w] = Status::Runnable;
        }
    }

    /// `me` submits a read (prefetch) and goes on; or (`wait`) needs it and sleeps until it
    /// ends, the others running meanwhile (`super::io`).
    pub fn io(&self, me: usize, key: (usize, u64), ns: u64, wait: bool) {
        let mut st = self.point(me, Some(Seg::Atomic));
        let now = st.clock[me];
        if wait {
            st.clock[me] = st.device.wait(now, key, ns);
        } else {
            st.device.submit(now, key, ns);
        }
        drop(self.reschedule(me, st));
    }

    pub fn io_stats(&self) -> IoStats {
        self.state().device.stats.clone()
    }

    /// The device as it is now (its reads and queue), for a run that goes on from here.
    pub fn device(&self) -> Device {
        self.state().device.clone()
    }

    /// Each CPU's clock, ns.
    pub fn clocks(&self) -> Vec<u64> {
        self.state().clock.clone()
    }

    pub fn stats(&self) -> SchedStats {
        self.state().stats.clone()
    }
}

/// The hook of one virtual CPU (installed while it runs, `super::coro`).
pub struct VcpuHook {
    pub sched: Arc<Sched>,
    pub me: usize,
}

impl Hook for VcpuHook {
    fn lock(&self, lock: usize, what: &'static str) {
        self.sched.lock(self.me, lock, LockKind::of(what));
    }
    fn try_lock(&self, lock: usize, what: &'static str) -> bool {
        self.sched.try_lock(self.me, lock, LockKind::of(what))
    }
    fn unlock(&self, lock: usize, what: &'static str) {
        self.sched.unlock(self.me, lock, LockKind::of(what));
    }
    fn is_locked(&self, lock: usize, what: &'static str) -> bool {
        self.sched.is_locked(self.me, lock, LockKind::of(what))
    }
    fn wait(&self, cv: usize, lock: usize, what: &'static str) {
        self.sched.wait(self.me, cv, lock, LockKind::of(what));
    }
    fn notify_all(&self, cv: usize) {
        self.sched.notify_all(self.me, cv);
    }
    fn atomic(&self, addr: usize, access: Access) {
        self.sched.touch(self.me, addr, access, Some(Seg::Atomic));
    }
    /// A prefetch walk's step: the access to the group's state word, with the step's own
    /// price ([`super::cost::Costs::segment`]) instead of a point's.
    fn walk_step(&self, addr: usize, rmw: bool) {
        let (access, seg) = match rmw {
            true => (Access::Write, Seg::WalkSet),
            false => (Access::Load, Seg::WalkTest),
        };
        self.sched.touch(self.me, addr, access, Some(seg));
    }
    fn bitmap_csum(&self, bytes: u32) {
        let ns = self.sched.costs.csum_ns(bytes);
        self.sched.work(self.me, ns);
    }
    /// The flex group's counter and the bitmap's buffer head: writes with no allocator work
    /// charged (they are part of the kernel's measured call time already). The buffer head's
    /// `get_bh` before the lock and `brelse` after it are one write here: the second finds the
    /// line still held unless another CPU took it in between.
    fn marked(&self, group: u32, flex: u32) {
        let fg = group / flex.max(1);
        self.sched
            .touch(self.me, mballoc::vcpu::bh_line(group), Access::Write, None);
        self.sched
            .touch(self.me, mballoc::vcpu::flex_line(fg), Access::Write, None);
    }
    fn io_submit(&self, dev: usize, block: u64, ns: u64) {
        self.sched.io(self.me, (dev, block), ns, false);
    }
    fn io_wait(&self, dev: usize, block: u64, ns: u64) {
        self.sched.io(self.me, (dev, block), ns, true);
    }
    fn cpu(&self) -> Option<usize> {
        Some(self.me)
    }
}
