//! Many cores on a small machine: the real allocator on N virtual CPUs in virtual time.
//!
//! N virtual CPUs each run will-it-scale's fallocate2 loop (the requests of `bench threads`'
//! `fallocate2` pattern) through one shared [`Allocator`]; the library's `vcpu-hooks` seam
//! reports every lock, try-lock, unlock and shared atomic to a [`sched::Sched`] that lets one
//! CPU run at a time, the one with the earliest virtual clock. Each CPU is a coroutine on the
//! calling thread (`coro`). Work between two points costs what [`cost`] says (measured on
//! this machine, scaled to the kernel's measured allocator time); waits, hand-offs and
//! cache-line transfers cost what the interaction costs.
//! The rest of a `fallocate` call (system call, extent tree, journal handle) is a fixed cost
//! per call, plus the journal's shared lines every handle writes: `start_this_handle` takes
//! `j_state_lock` for reading and bumps the running transaction's `t_updates` and
//! `t_outstanding_credits`; `jbd2_journal_stop` drops `t_updates`. And the inode table
//! block's buffer head, whose reference count each of the call's three
//! `ext4_mark_inode_dirty` takes and drops: the tasks' files have consecutive inode numbers,
//! 16 to a block, so up to 16 CPUs write that line (lab setting `inode_bh`). Not modelled:
//! the free clusters `percpu_counter`'s batch flush (one spinlock per 2·N blocks per CPU:
//! under one lock per 64 calls at 96 CPUs) and `i_rwsem` (one file per task: never shared).
//!
//! Everything a run reports is deterministic — the same configuration gives the same bytes —
//! except `real_s`, the host time it took.

mod coro;
pub mod cost;
pub mod fallocate3;
pub mod io;
pub mod lock_kind;
pub mod placement;
pub mod sched;
pub mod seeds;
pub mod series;
mod yielder;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mballoc::vcpu::{self, Access, Hook};
use mballoc::{Allocator, Policy};
use serde::Serialize;

use crate::bench::threads::{File, Pattern, Volume};
use crate::bench::BenchError;
use crate::fs::FIRST_FILE_INO;
use cost::{Costs, Machine, Seg};
use lock_kind::LockKind;
pub use placement::Placement;
use sched::{Deadlock, Sched, MAX_VCPUS};

/// `j_state_lock`'s line and the running transaction's counters' line: addresses no
/// allocation can have (the first page is never mapped).
const J_STATE_LOCK: usize = 0x40;
const TRANSACTION: usize = 0x80;

/// The inode table blocks' buffer heads' lines, one 64-byte line a block from here (in the
/// same never-mapped first page, room for [`INODE_BLOCK_LINES`] blocks).
const INODE_TABLE_BH: usize = 0x100;
const INODE_BLOCK_LINES: u64 = (0x1000 - INODE_TABLE_BH as u64) / 0x40;

/// Inodes an inode table block holds, as the lab's mkfs lays them out (16: 256-byte inodes
/// in 4 KiB blocks).
const INODES_PER_BLOCK: u64 = crate::mkfs::BLOCK_SIZE / crate::mkfs::INODE_SIZE;

/// The line of the buffer head of the inode table block that holds `ino`: the files the
/// tasks create one after another take consecutive inode numbers (`find_inode_bit` from the
/// parent's group), 16 to a block. Blocks past the reserved page wrap (only at more CPUs than
/// the simulator allows).
fn inode_bh_line(ino: u64) -> usize {
    let block = (ino - 1) / INODES_PER_BLOCK % INODE_BLOCK_LINES;
    INODE_TABLE_BH + 0x40 * block as usize
}

/// One `ext4_mark_inode_dirty` as its shared line sees it: `__ext4_get_inode_loc` finds the
/// inode table block's buffer in the CPU's buffer-head LRU and takes a reference (`get_bh`,
/// an atomic increment of `b_count`); `ext4_mark_iloc_dirty` takes another around
/// `ext4_do_update_inode`, which copies the inode into the buffer (the inode's own 256
/// bytes: no other CPU's line), finds the buffer already in the running transaction
/// (`jbd2_journal_dirty_metadata`'s lockless fast path once `b_modified` is set) and drops
/// the first (`brelse`); then the second goes. Four writes of `b_count` on one CPU, charged
/// as the first and the last: a line another CPU wrote moves once, and what follows on the
/// same CPU finds it here unless another CPU took it in between.
fn mark_inode_dirty(s: &Sched, me: usize, bh: Option<usize>) {
    if let Some(line) = bh {
        s.touch(me, line, Access::Write, None);
        s.touch(me, line, Access::Write, None);
    }
}

/// jbd2's `start_this_handle` as its shared lines see it: `read_lock(&j_state_lock)`, then
/// the running transaction's counters (`add_transaction_credits`' `atomic_add_return` on
/// `t_outstanding_credits`, `atomic_inc` of `t_updates` and of `t_handle_count`, one line),
/// then `read_unlock`. The three counter writes follow one another, so the line is taken
/// once unless `each`: then each is a write of its own, which another CPU can take the line
/// away between (what a contended line does to back-to-back atomics).
fn handle_start(s: &Sched, me: usize, each: bool) {
    s.touch(me, J_STATE_LOCK, Access::Write, None);
    for _ in 0..if each { 3 } else { 1 } {
        s.touch(me, TRANSACTION, Access::Write, None);
    }
    s.touch(me, J_STATE_LOCK, Access::Write, None);
}

/// `jbd2_journal_stop`'s `stop_this_handle`: `atomic_sub` of `t_outstanding_credits`,
/// `atomic_dec_and_test` of `t_updates` (as [`handle_start`]).
fn handle_stop(s: &Sched, me: usize, each: bool) {
    for _ in 0..if each { 2 } else { 1 } {
        s.touch(me, TRANSACTION, Access::Write, None);
    }
}

/// One simulated configuration.
#[derive(Debug, Clone, Serialize)]
pub struct VcpuConfig {
    pub policy: String,
    /// Tunables on top of the policy (`name=value`), `mb_optimize_scan` among them.
    pub settings: Vec<String>,
    /// The requests each CPU's file sends (`bench threads`' patterns).
    pub pattern: Pattern,
    pub fs_bytes: u64,
    pub file_blocks: u32,
    pub chunk: u32,
    /// Virtual time each CPU runs and counts, ns.
    pub horizon_ns: u64,
    /// Virtual time each CPU runs first without counting, ns: a measurement's warm-up.
    pub warmup_ns: u64,
    pub machine: Machine,
    /// The calls' marks of their inodes share the inode table block's buffer head (the lab
    /// setting `inode_bh`, which [`VcpuConfig::resolved`] applies; on by default).
    pub inode_bh: bool,
    /// Each of a jbd2 handle's atomic writes to the running transaction's counters is a
    /// write of that line of its own (the lab setting `jbd2_rmw=each`, a what-if; off:
    /// one at the handle's start and one at its stop).
    pub jbd2_rmw_each: bool,
}

impl VcpuConfig {
    /// fallocate2 (1 MiB files, 8 KiB calls) on 64 GiB (512 groups: enough for 128 stream
    /// goals, `min(cpus, groups / 4)`), 5 ms of virtual time per CPU.
    pub fn fallocate2(policy: Policy, settings: &[String], machine: Machine) -> VcpuConfig {
        VcpuConfig {
            policy: policy.name().into(),
            settings: settings.to_vec(),
            pattern: Pattern::Fallocate2,
            fs_bytes: 64 << 30,
            file_blocks: 256,
            chunk: 2,
            horizon_ns: 5_000_000,
            warmup_ns: 0,
            machine,
            inode_bh: true,
            jbd2_rmw_each: false,
        }
    }

    /// This configuration with the lab settings `warmup_s` and `duration_s` (virtual seconds)
    /// in place of its own warm-up and window, and `inode_bh` where given: what a point runs,
    /// and what its report says.
    pub fn resolved(&self) -> Result<VcpuConfig, BenchError> {
        Ok(self.resolved_by(&lab_settings(self)?))
    }

    /// [`Self::resolved`] with this configuration's lab settings already parsed.
    fn resolved_by(&self, lab: &crate::workload::LabSettings) -> VcpuConfig {
        let ns = |s: f64| (s * 1e9).round() as u64;
        VcpuConfig {
            warmup_ns: lab.warmup_s.map_or(self.warmup_ns, ns),
            horizon_ns: lab.duration_s.map_or(self.horizon_ns, ns),
            inode_bh: lab.inode_bh.unwrap_or(self.inode_bh),
            jbd2_rmw_each: self.jbd2_rmw_each || lab.jbd2_rmw_each,
            ..self.clone()
        }
    }

    fn policy(&self) -> Result<Policy, BenchError> {
        self.policy
            .parse()
            .map_err(|_| BenchError::Peer(format!("unknown policy {:?}", self.policy)))
    }

    /// `mb_optimize_scan` as set (the policy's default, 1, otherwise).
    fn optimize_scan(&self) -> bool {
        !self.settings.iter().any(|s| s == "mb_optimize_scan=0")
    }
}

/// Per allocator call, all CPUs together.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PerCall {
    /// Lock acquisitions that queued, per lock.
    pub lock_waits: BTreeMap<LockKind, f64>,
    /// Virtual ns queued, per lock.
    pub lock_wait_ns: BTreeMap<LockKind, f64>,
    /// Virtual ns held, per lock (from the grant to the release).
    pub lock_hold_ns: BTreeMap<LockKind, f64>,
    /// Try-locks and busy checks answered "busy", per lock.
    pub busy: BTreeMap<LockKind, f64>,
    pub groups_scanned: f64,
    /// Calls that found their group the group another CPU allocated in last.
    pub goal_collisions: f64,
    /// Calls whose extent starts at their goal block (the end of the file's last extent, or
    /// the inode's goal for an empty file): the share `ext4_mballoc_alloc`'s orig and result
    /// agree on, which the 16-core kernel measured
    /// (docs/vcpus/kernel-16-core.md).
    pub goal_hits: f64,
    pub line_transfers: f64,
    /// Of those, the groups' `bb_state` words' (a prefetch walk's), by loads and by writes.
    pub walk_line_loads: f64,
    pub walk_line_writes: f64,
    /// Virtual ns queued behind other CPUs' writes to a line: the allocator's atomics, and
    /// the lines outside the allocator.
    pub line_wait_ns: f64,
    /// The part of `line_wait_ns` outside the allocator: the journal's lines every handle
    /// writes and the inode table block's buffer head.
    pub outside_line_wait_ns: f64,
    /// The part of `line_wait_ns` on the buddy folios' reference counts.
    pub folio_line_wait_ns: f64,
    /// The part of `line_wait_ns` on the lines each marking writes after the group lock (flex
    /// groups' free-cluster counters, bitmaps' buffer heads).
    pub marking_line_wait_ns: f64,
    /// Buddy folio reference count writes: 4 per group loaded (`ext4_mb_load_buddy` and
    /// `ext4_mb_unload_buddy`), 4 for the group used.
    pub folio_refs: f64,
    /// Synchronisation points.
    pub points: f64,
}

/// One point: a configuration at N CPUs.
#[derive(Debug, Clone, Serialize)]
pub struct VcpuPoint {
    pub vcpus: u32,
    pub calls: u64,
    /// Predicted: calls per second per CPU.
    pub ops_per_s_per_cpu: f64,
    pub ops_per_s: f64,
    pub per_call: PerCall,
    /// Share of all CPUs' virtual time spent queued on locks and lines.
    pub waiting_share: f64,
    /// Commits forced in the window by an allocation that found no committed free space
    /// while freed blocks waited for one (`ext4_should_retry_alloc`).
    pub forced_commits: u64,
    /// Host seconds the point took (not deterministic).
    #[serde(skip)]
    pub real_s: f64,
}

/// What one virtual CPU did.
struct CpuOut {
    /// Calls that ended in the window, and all calls.
    calls: u64,
    all_calls: u64,
    /// Where the CPU's window began (the warm-up's end) and where it ended.
    from_ns: u64,
    to_ns: u64,
    collisions: u64,
    goal_hits: u64,
    forced_commits: u64,
    /// The file's extents at the end.
    extents: Vec<mballoc::Extent>,
}

/// One CPU's fallocate2 loop until its clock passes the horizon.
fn cpu_loop(
    me: usize,
    s: &Arc<Sched>,
    a: &Allocator,
    vol: &Volume,
    cfg: &VcpuConfig,
    last_group: &Mutex<Vec<Option<u32>>>,
    mut f: File,
) -> Result<CpuOut, BenchError> {
    let (mut calls, mut all_calls, mut collisions, mut goal_hits) = (0, 0, 0, 0);
    let mut forced_commits = 0;
    let half = s.costs().outside_ns / 2;
    let bpg = vol.geo.blocks_per_group();
    let bh = cfg.inode_bh.then(|| inode_bh_line(f.ino()));
    while s.clock(me) < cfg.warmup_ns + cfg.horizon_ns {
        s.work(me, half);
        handle_start(s, me, cfg.jbd2_rmw_each);
        // ext4_mb_new_blocks charges the quota first: dquot_alloc_block marks the inode dirty.
        mark_inode_dirty(s, me, bh);
        let req = f.request(cfg.pattern, cfg.chunk, me as u32, vol);
        let (got, commits) = allocate(a, &req)?;
        s.mark(me, Seg::CallEnd);
        // ext4_ext_insert_extent's ext4_ext_dirty (the extents live in the inode), then
        // ext4_alloc_file_blocks' own after the new size.
        mark_inode_dirty(s, me, bh);
        mark_inode_dirty(s, me, bh);
        // The window counts the calls that end in it, as the scheduler counts what happens
        // in it (a call begun in the warm-up is counted whole, its waits in part).
        let counted = s.clock(me) >= cfg.warmup_ns;
        let hit = got.extent.start == req.goal;
        let g = u32::try_from(got.extent.start / bpg).unwrap_or(u32::MAX);
        let collided = {
            let mut lg = last_group.lock().unwrap_or_else(|e| e.into_inner());
            let c = lg.iter().enumerate().any(|(c, &x)| c != me && x == Some(g));
            lg[me] = Some(g);
            c
        };
        if counted {
            goal_hits += u64::from(hit);
            collisions += u64::from(collided);
            forced_commits += commits;
        }
        handle_stop(s, me, cfg.jbd2_rmw_each);
        s.work(me, half);
        f.add(got.extent);
        calls += u64::from(counted);
        all_calls += 1;
        if f.place >= cfg.file_blocks {
            // The frees wait for jbd2's next commit (`ext4_mb_free_metadata`): every 5 s, far
            // beyond a point's horizon, so none comes unless the space runs out.
            f.truncate_uncommitted(a)?;
        }
    }
    let to_ns = s.clock(me);
    Ok(CpuOut {
        calls,
        all_calls,
        from_ns: cfg.warmup_ns.min(to_ns),
        to_ns,
        collisions,
        goal_hits,
        forced_commits,
        extents: f.extents().to_vec(),
    })
}

/// One allocation and the commits it forced; out of space with frees waiting for a commit, a
/// commit and another try, three times at most (`ext4_should_retry_alloc`).
fn allocate(
    a: &Allocator,
    req: &mballoc::Request,
) -> Result<(mballoc::Allocation, u64), BenchError> {
    let mut retries = 0;
    loop {
        match a.allocate(req) {
            Err(mballoc::Error::NoSpace { pending, .. }) if pending > 0 && retries < 3 => {
                retries += 1;
                a.commit()?;
            }
            Err(source @ mballoc::Error::NoSpace { .. }) => {
                return Err(BenchError::VcpusFull { source })
            }
            r => return Ok((r?, retries)),
        }
    }
}

/// The CPUs' files as a measurement window finds them: will-it-scale runs its tasks for a
/// warm-up before it counts, by which time each task is somewhere in its file's cycle, not
/// all at its start. CPU `me` starts `me / n` of the way through its file (the phases spread
/// evenly), filled round-robin on one thread so the result is the same every time. A window
/// of a few hundred calls per CPU then sees the truncates of steady state in proportion
/// (one per `file_blocks / chunk` calls), where files all starting empty would reach none.
fn staggered_files(
    a: &Allocator,
    vol: &Volume,
    cfg: &VcpuConfig,
    n: u32,
) -> Result<Vec<File>, BenchError> {
    let per_file = cfg.file_blocks / cfg.chunk.max(1);
    let mut files: Vec<File> = (0..n)
        .map(|me| File::new(FIRST_FILE_INO + u64::from(me)))
        .collect();
    let calls = |me: u32| (u64::from(me) * u64::from(per_file) / u64::from(n)) as u32;
    for round in 0..calls(n.saturating_sub(1)) {
        for (me, f) in (0..n).zip(files.iter_mut()) {
            if round < calls(me) {
                let (got, _) = allocate(a, &f.request(cfg.pattern, cfg.chunk, me, vol))?;
                f.add(got.extent);
            }
        }
    }
    Ok(files)
}

/// Runs `bodies` on the virtual CPUs of `s` ([`coro::run_cpus`]); a virtual deadlock is an
/// error, as is any CPU's.
pub(crate) fn on_cpus<T, F>(s: &Arc<Sched>, bodies: Vec<F>) -> Result<Vec<T>, BenchError>
where
    F: FnOnce() -> Result<T, BenchError>,
{
    coro::run_cpus(s, bodies)
        .map_err(|Deadlock| BenchError::Peer("virtual CPUs deadlocked".into()))?
        .into_iter()
        .collect()
}

/// The lab settings among `cfg`'s (the rest are the allocator's tunables).
fn lab_settings(cfg: &VcpuConfig) -> Result<crate::workload::LabSettings, BenchError> {
    crate::workload::LabSettings::parse(&cfg.settings).map_err(|e| BenchError::Peer(e.to_string()))
}

/// Runs `cfg` on `n` virtual CPUs.
pub fn run_point(cfg: &VcpuConfig, n: u32) -> Result<VcpuPoint, BenchError> {
    run_detailed(cfg, n).map(|r| r.point)
}

/// A point with its end state's placement.
#[derive(Debug, Clone, Serialize)]
pub struct VcpuRun {
    pub point: VcpuPoint,
    pub placement: Placement,
}

/// Runs `cfg` on `n` virtual CPUs and measures where the data went.
pub fn run_with_placement(cfg: &VcpuConfig, n: u32) -> Result<VcpuRun, BenchError> {
    let r = run_detailed(cfg, n)?;
    let placement = placement::placement(&r.allocator, &r.geo, &r.files)?;
    Ok(VcpuRun {
        point: r.point,
        placement,
    })
}

/// A point and the state it ended in.
struct Detailed {
    point: VcpuPoint,
    allocator: Allocator,
    geo: mballoc::Geometry,
    files: Vec<Vec<mballoc::Extent>>,
}

fn run_detailed(cfg: &VcpuConfig, n: u32) -> Result<Detailed, BenchError> {
    if n == 0 || n as usize > MAX_VCPUS {
        return Err(BenchError::Peer(format!(
            "--vcpus {n}: between 1 and {MAX_VCPUS}"
        )));
    }
    let t0 = Instant::now();
    let vol = Volume::new(cfg.fs_bytes)?;
    let lab = lab_settings(cfg)?;
    if !lab.walk_thunk {
        return Err(BenchError::Peer(
            "walk_thunk=0 prices fallocate3's walk (seed 003's points); a fallocate2 call's \
             total is its machine's measured speed"
                .into(),
        ));
    }
    let cfg = &cfg.resolved_by(&lab);
    let mut settings = io::mount_settings(cfg.machine.rotational());
    settings.extend_from_slice(&lab.tunables);
    let a = vol.allocator(cfg.policy()?, n.max(2), &settings)?;
    let costs = Costs::new(cfg.machine, cfg.optimize_scan())
        .with_incremental_csum(lab.incremental_csum)
        .with_line_ns(lab.line_ns)
        .with_line_overlap(lab.line_overlap)
        .on_cpus(n);
    let s = Sched::new(n as usize, costs);
    s.walk_lines(a.group_state_span());
    if lab.bg_locks > 0 {
        s.hash_group_locks(a.group_lock_span(), lab.bg_locks);
    }
    s.count_from(cfg.warmup_ns);
    let last_group = Mutex::new(vec![None; n as usize]);
    let files = staggered_files(&a, &vol, cfg, n)?;
    let groups_before = a.stats().groups_scanned;
    let bodies = (0..n as usize)
        .zip(files)
        .map(|(me, f)| {
            let (s, a, vol, lg) = (&s, &a, &vol, &last_group);
            move || cpu_loop(me, s, a, vol, cfg, lg, f)
        })
        .collect();
    let outs = on_cpus(&s, bodies)?;
    let (mut calls, mut all_calls, mut busy_ns) = (0, 0, 0);
    let (mut collisions, mut goal_hits, mut forced_commits) = (0, 0, 0);
    let mut files = Vec::with_capacity(outs.len());
    for o in outs {
        calls += o.calls;
        all_calls += o.all_calls;
        busy_ns += o.to_ns - o.from_ns;
        collisions += o.collisions;
        goal_hits += o.goal_hits;
        forced_commits += o.forced_commits;
        files.push(o.extents);
    }
    let st = s.stats();
    let per = |x: f64| if calls > 0 { x / calls as f64 } else { 0.0 };
    // The library counts groups for all calls together: warm-up and window alike.
    let scanned = (a.stats().groups_scanned - groups_before) as f64 / all_calls.max(1) as f64;
    let mut pc = PerCall {
        groups_scanned: scanned,
        goal_collisions: per(collisions as f64),
        goal_hits: per(goal_hits as f64),
        line_transfers: per(st.line_transfers as f64),
        walk_line_loads: per(st.walk_line_loads as f64),
        walk_line_writes: per(st.walk_line_writes as f64),
        line_wait_ns: per((st.line_wait_ns - st.outside_line_wait_ns) as f64),
        outside_line_wait_ns: per(st.outside_line_wait_ns as f64),
        folio_line_wait_ns: per(st.folio_line_wait_ns as f64),
        marking_line_wait_ns: per(st.marking_line_wait_ns as f64),
        folio_refs: per(st.folio_refs as f64),
        points: per(st.points as f64),
        ..PerCall::default()
    };
    let mut waited = st.line_wait_ns;
    for (&k, l) in &st.locks {
        pc.lock_waits.insert(k, per(l.waits as f64));
        pc.lock_wait_ns.insert(k, per(l.wait_ns as f64));
        pc.lock_hold_ns.insert(k, per(l.hold_ns as f64));
        pc.busy.insert(k, per(l.busy as f64));
        waited += l.wait_ns;
    }
    let secs = busy_ns as f64 / 1e9 / f64::from(n);
    let ops_per_s = calls as f64 / secs.max(1e-12);
    let point = VcpuPoint {
        vcpus: n,
        calls,
        ops_per_s_per_cpu: ops_per_s / f64::from(n),
        ops_per_s,
        per_call: pc,
        waiting_share: waited as f64 / (busy_ns as f64).max(1.0),
        forced_commits,
        real_s: t0.elapsed().as_secs_f64(),
    };
    Ok(Detailed {
        point,
        allocator: a,
        geo: vol.geo,
        files,
    })
}

/// A curve: one configuration over CPU counts.
#[derive(Debug, Clone, Serialize)]
pub struct VcpuCurve {
    pub config: VcpuConfig,
    pub points: Vec<VcpuPoint>,
}

pub fn run_curve(cfg: &VcpuConfig, vcpus: &[u32]) -> Result<VcpuCurve, BenchError> {
    Ok(VcpuCurve {
        config: cfg.resolved()?,
        points: vcpus
            .iter()
            .map(|&n| run_point(cfg, n))
            .collect::<Result<_, _>>()?,
    })
}

/// Times the allocator between its synchronisation points (one thread, no scheduler): the
/// measurement behind `bench threads --calibrate`'s table. Keys are [`Seg::all`].
struct Calibrator {
    last: Cell<Instant>,
    sums: RefCell<Vec<(f64, u64)>>,
}

impl Calibrator {
    fn mark(&self, s: Seg) {
        let now = Instant::now();
        let i = Seg::all().iter().position(|&x| x == s).unwrap_or(0);
        let mut sums = self.sums.borrow_mut();
        sums[i].0 += (now - self.last.get()).as_nanos() as f64;
        sums[i].1 += 1;
        drop(sums);
        self.last.set(Instant::now());
    }
}

impl Hook for Calibrator {
    fn lock(&self, _: usize, what: &'static str) {
        self.mark(Seg::Lock(LockKind::of(what)));
    }
    fn try_lock(&self, _: usize, what: &'static str) -> bool {
        self.mark(Seg::TryLock(LockKind::of(what)));
        true
    }
    fn unlock(&self, _: usize, what: &'static str) {
        self.mark(Seg::Unlock(LockKind::of(what)));
    }
    fn is_locked(&self, _: usize, what: &'static str) -> bool {
        self.mark(Seg::TryLock(LockKind::of(what)));
        false
    }
    fn wait(&self, _: usize, _: usize, _: &'static str) {}
    fn notify_all(&self, _: usize) {}
    fn atomic(&self, _: usize, _: Access) {
        self.mark(Seg::Atomic);
    }
    fn walk_step(&self, _: usize, rmw: bool) {
        self.mark(if rmw { Seg::WalkSet } else { Seg::WalkTest });
    }
}

/// The calibration's result.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    /// Per [`Seg::all`] key: mean ns, and points per call.
    pub seg_ns: Vec<f64>,
    pub per_call: Vec<f64>,
    /// Mean ns per call, no hook installed.
    pub call_ns: f64,
    /// The timing's own cost per point, taken off every key.
    pub overhead_ns: f64,
}

/// Runs `calls` fallocate2 calls (linux-6.18, one thread) twice: once plain, for the time
/// per call, once with the `Calibrator`, for where that time goes.
pub fn calibrate(calls: u64) -> Result<Calibration, BenchError> {
    let vol = Volume::new(64 << 30)?;
    let run = |hooked: Option<&Rc<Calibrator>>| -> Result<f64, BenchError> {
        let a = vol.allocator(Policy::Linux618, 2, &[])?;
        let mut f = File::new(FIRST_FILE_INO);
        let t0 = Instant::now();
        for _ in 0..calls {
            let req = f.request(Pattern::Fallocate2, 2, 0, &vol);
            if let Some(c) = hooked {
                c.last.set(Instant::now());
            }
            let got = a.allocate(&req)?;
            if let Some(c) = hooked {
                c.mark(Seg::CallEnd);
            }
            f.add(got.extent);
            if f.place >= 256 {
                f.truncate(&a)?;
            }
        }
        Ok(t0.elapsed().as_nanos() as f64 / calls as f64)
    };
    let call_ns = run(None)?;
    let c = Rc::new(Calibrator {
        last: Cell::new(Instant::now()),
        sums: RefCell::new(vec![(0.0, 0); Seg::all().len()]),
    });
    // The timing's own cost: points with nothing between them.
    let reps = 1_000_000;
    for _ in 0..reps {
        c.mark(Seg::Atomic);
    }
    let atomic = Seg::all().iter().position(|&x| x == Seg::Atomic);
    let overhead_ns = c.sums.borrow()[atomic.expect("a key")].0 / reps as f64;
    *c.sums.borrow_mut() = vec![(0.0, 0); Seg::all().len()];
    let installed = vcpu::install(Rc::clone(&c) as Rc<dyn Hook>);
    run(Some(&c))?;
    drop(installed);
    let sums = c.sums.borrow();
    let raw: Vec<f64> = sums
        .iter()
        .map(|&(t, k)| {
            if k == 0 {
                0.0
            } else {
                (t / k as f64 - overhead_ns).max(0.0)
            }
        })
        .collect();
    let per_call: Vec<f64> = sums.iter().map(|&(_, k)| k as f64 / calls as f64).collect();
    // Scale so a call's points add up to the plain call's time.
    let total: f64 = raw.iter().zip(&per_call).map(|(t, k)| t * k).sum();
    let scale = if total > 0.0 { call_ns / total } else { 1.0 };
    Ok(Calibration {
        seg_ns: raw.iter().map(|t| t * scale).collect(),
        per_call,
        call_ns,
        overhead_ns,
    })
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests003;
#[cfg(test)]
mod tests003_xeon16;
#[cfg(test)]
mod tests16;
#[cfg(test)]
mod tests_goal_files;
#[cfg(test)]
mod tests_rest;
#[cfg(test)]
mod tests_walkers;
