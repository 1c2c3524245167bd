//! The allocator: groups, indexes, preallocations, stream goals and counters, and the public
//! API. The request path lives in `new_blocks`, `criteria` and `scan`; frees in `free`.

use std::sync::Arc;

use crossbeam_utils::atomic::AtomicCell;

use crate::alloc::prealloc::space::{LocalityGroup, Preallocs};
use crate::error::Error;
use crate::geometry::Geometry;
use crate::group::bitmap::Bitmap;
use crate::group::buddy::Buddy;
use crate::group::class_index::{ClassIndex, Kind};
use crate::group::info::{Group, GroupState, Loaded, NO_HOME};
use crate::group::size_class::SizeClass;
use crate::group::state::{self, GroupStates, StateBits};
use crate::load::cache::{GroupCache, EVICTED};
use crate::load::page::{BuddyPages, DEFAULT_PAGE_SIZE};
use crate::load::readahead::{ReadAhead, Taken};
use crate::load::source::{BitmapSource, MemSource};
use crate::stats::{mb_groups_text, GroupSnapshot, Stats, StatsSnapshot};
use crate::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::sync::percpu::{Padded, PerCpu, PerCpuCounter};
use crate::sync::{Condvar, Mutex};
use crate::tunables::{possible_cpus, Tunables};

/// The ext4 multi-block allocator over one space of blocks. `Send + Sync`: share it with an
/// `Arc` and call it from any number of threads.
pub struct Allocator {
    pub(crate) geo: Geometry,
    /// Copied by every request without a lock or a read-modify-write (a seqlock read: the
    /// kernel reads its sysfs tunables as plain ints), so readers never touch a shared cache
    /// line in write mode and never wait for `set_tunable`.
    pub(crate) tun: AtomicCell<Tunables>,
    /// Serialises `set_tunable` calls.
    tun_writer: Mutex<()>,
    pub(crate) groups: Box<[Group]>,
    /// Every group's `bb_state` bits, packed (see [`StateBits`]).
    pub(crate) state: GroupStates,
    /// Groups whose buddy was never built (`NEED_INIT` set): while none is left, the
    /// prefetch completion has nothing to do and skips its walk.
    pub(crate) uninit: Padded<AtomicU32>,
    /// Groups without a size class: while none is left, the class stages that walk only
    /// class-less groups (unset, empty) have nothing to find and are skipped.
    pub(crate) classless: Padded<AtomicU32>,
    /// `s_mb_largest_free_orders` and `s_mb_avg_fragment_size`, split by size class.
    pub(crate) index: ClassIndex,
    /// `s_mb_last_groups`: one stream goal per slot, each on its own cache lines (the kernel's
    /// array is packed; two CPUs streaming in different slots then share a line). Sized once
    /// for the largest `nr_global_goals` allowed, so that readers need no indirection that
    /// `set_tunable` could swap; only the first `nr_global_goals` are in use.
    pub(crate) goals: Box<[Padded<AtomicU32>]>,
    /// The file system's one `s_md_lock`, where the kernel takes it: around the stream goal
    /// before 6.17 (tunable `goal_md_lock`: every stream allocation queues on it twice), and
    /// for freed extents (`free_md_lock`, every kernel; how often: `free_insert_then_merge`).
    pub(crate) md_lock: Padded<Mutex<MdLock>>,
    /// Inode PAs by owner, locality-group PAs by CPU.
    pub(crate) pa: Preallocs,
    /// Groups with frees waiting for a commit (each once: `GroupState::listed`).
    pub(crate) pending_groups: Padded<Mutex<Vec<u32>>>,
    /// Held by a commit from closing its transaction until its frees are released.
    pub(crate) committing: Padded<Mutex<()>>,
    /// Where tasks wait for a commit to finish (`j_wait_done_commit`): each commit wakes them
    /// when `committed` moves and when it lets go of `committing`.
    pub(crate) commit_done: Padded<(Mutex<()>, Condvar)>,
    /// The last transaction committed and released (0: none yet); written under
    /// `committing`.
    pub(crate) committed: AtomicU64,
    /// The running transaction: frees join it; `commit` closes it.
    pub(crate) tid: Padded<AtomicU64>,
    /// On-disk free blocks (`s_freeclusters_counter`): pending frees count as free.
    pub(crate) free_blocks: PerCpuCounter,
    /// Blocks freed but not yet committed (`s_mb_free_pending`).
    pub(crate) free_pending: PerCpuCounter,
    /// `discard_pa_seq`: bumped (on this thread's shard) whenever blocks enter or leave the
    /// buddy; an ENOSPC retry compares its start value with the sum.
    pub(crate) discard_seq: PerCpu<std::sync::atomic::AtomicU64>,
    /// `s_lock_busy`: contention estimate used by the group-or-file decision.
    pub(crate) lock_busy: Padded<AtomicU32>,
    /// `mb_optimize_scan` as [`Allocator::publish`] reads it, under the group lock: the live
    /// value, not a request's snapshot of the tunables, so that a request that started before
    /// `set_tunable` turned the indexes on cannot publish a group out of them afterwards.
    pub(crate) optimize_scan: Padded<AtomicBool>,
    pub(crate) stats: Stats,
    pub(crate) source: Arc<dyn BitmapSource>,
    /// Prefetch reads in flight (`ext4_read_block_bitmap_nowait`).
    pub(crate) readahead: ReadAhead,
    /// Bound on loaded groups (`Builder::cache_groups`).
    pub(crate) cache: GroupCache,
    pub(crate) cpus: u32,
    /// Frees wait for a commit (`ext4_mb_free_metadata`); false: a filesystem without a
    /// journal, where `ext4_mb_clear_bb` hands freed blocks back to the buddy at once.
    pub(crate) journal: bool,
    /// Which groups share a buddy-cache page (built together; [`Builder::page_size`]).
    pub(crate) pages: BuddyPages,
    /// The durable store and the changes since the last commit (see `durable`).
    pub(crate) durable: Option<crate::load::durable::Durable>,
    pub(crate) corrupt: crate::load::corrupt::CorruptSet,
    /// Test only: class stages walk every class's indexes and leave the class filter to
    /// `class_admits`, group by group, as before the indexes were split by class (the
    /// equivalence test in `criteria` compares the two walks).
    #[cfg(test)]
    pub(crate) walk_all_classes: bool,
    /// Test only: no shortcut of the walks (`unfit_nolock`, whole prefetch windows read from
    /// one word): every group reached goes through the full `good_group_nolock`, every
    /// prefetch window group by group. The equivalence test in `criteria` compares the two,
    /// counters included.
    #[cfg(test)]
    pub(crate) no_walk_shortcuts: bool,
}

/// What `s_md_lock` guards here: nothing of its own (the goal slots stay atomics, pending
/// frees are listed per group); its type names the lock for the virtual-CPU simulator.
pub(crate) struct MdLock;

/// A held group lock (see [`Allocator::hold_group_lock`]); released on drop.
#[cfg(feature = "testing")]
pub struct GroupLockHold<'a>(#[allow(dead_code)] crate::sync::MutexGuard<'a, GroupState>);

/// Builds an [`Allocator`]: geometry first, then what is already in use.
pub struct Builder {
    geo: Geometry,
    cache: Option<u32>,
    used: Vec<(u64, u64)>,
    tunables: Option<Tunables>,
    cpus: u32,
    lazy: bool,
    source: Option<Box<dyn BitmapSource>>,
    load_cost: std::time::Duration,
    readers: Option<usize>,
    store: Option<Arc<dyn crate::store::Store>>,
    journal: bool,
    page_size: u32,
}

impl Builder {
    /// Blocks already in use (metadata, existing files), as absolute `(start, len)` ranges.
    pub fn used(mut self, ranges: &[(u64, u64)]) -> Self {
        self.used.extend_from_slice(ranges);
        self
    }
    /// Tunables to start with (default: the kernel's for this geometry).
    pub fn tunables(mut self, t: Tunables) -> Self {
        self.tunables = Some(t);
        self
    }
    /// Number of possible CPUs (locality groups, stream goals). Default: this machine's.
    pub fn cpus(mut self, n: u32) -> Self {
        self.cpus = n.max(1);
        self
    }
    /// Keep at most `n` groups' bitmaps in memory (default: no bound); older clean groups are
    /// dropped and reread from the source when needed again (see the `cache` module).
    pub fn cache_groups(mut self, n: u32) -> Self {
        self.cache = Some(n);
        self
    }
    /// Leave group bitmaps unread until first needed (default: read all at build, as the
    /// kernel's background prefetch does right after mount).
    pub fn lazy(mut self, lazy: bool) -> Self {
        self.lazy = lazy;
        self
    }
    /// Charge this much busy time per bitmap read of the in-memory device (tests of lazy
    /// loading; feature `testing`).
    #[cfg(feature = "testing")]
    pub fn load_cost(mut self, cost: std::time::Duration) -> Self {
        self.load_cost = cost;
        self
    }
    /// Threads that carry out prefetch reads in the background (the disk queue). Default: 4
    /// when lazy, 0 otherwise; 0 = prefetch reads run inline.
    pub fn prefetch_threads(mut self, n: usize) -> Self {
        self.readers = Some(n);
        self
    }
    /// With a journal (the default), freed blocks become allocatable at the commit that
    /// follows the free. `false` models a filesystem made without one (`mkfs.ext4 -O
    /// ^has_journal`): a free hands its blocks back to the buddy at once
    /// (`ext4_mb_clear_bb` without a journal handle skips `ext4_mb_free_metadata`), and a
    /// commit releases nothing; with a store it still makes everything so far durable.
    pub fn journal(mut self, on: bool) -> Self {
        self.journal = on;
        self
    }
    /// The page size, in bytes, of the machine modelled (default 4096): a page of ext4's
    /// buddy cache holds `page_size / block_size / 2` groups (at least one), and building one
    /// of them builds all (`ext4_mb_init_cache`). 16 KiB and 64 KiB are arm64's other page
    /// sizes. Matters only when groups load lazily ([`Builder::lazy`]). A power of two from
    /// 4096 to 65536, at least the block size; anything else fails `build`.
    pub fn page_size(mut self, bytes: u32) -> Self {
        self.page_size = bytes;
        self
    }
    /// Read bitmaps from this source instead of the in-memory device built from `used`.
    pub fn source(mut self, s: Box<dyn BitmapSource>) -> Self {
        self.source = Some(s);
        self
    }

    /// Keep the allocator's state in `store` (see [`Allocator::open`]): bitmaps and free
    /// counts come from it, and every `commit` is durable in it. Also makes loading lazy
    /// (call `.lazy(false)` afterwards to read every bitmap at build).
    pub fn store<S: crate::store::Store + 'static>(mut self, store: S) -> Self {
        let store: Arc<dyn crate::store::Store> = Arc::new(store);
        self.source = Some(Box::new(crate::load::durable::StoreSource(store.clone())));
        self.store = Some(store);
        self.lazy = true;
        self
    }

    /// The allocator: groups from the source (or the store), every bitmap read now unless
    /// lazy. Errors: a geometry or used ranges the source refuses, a store that does not fit.
    pub fn build(self) -> Result<Allocator, Error> {
        let geo = self.geo;
        if self.store.is_some() && geo.cluster_bits() > 0 {
            // The store's format has no cluster size.
            return Err(Error::Unsupported {
                what: "a store with bigalloc clusters",
                cluster_bits: geo.cluster_bits(),
            });
        }
        let pages = BuddyPages::new(geo.block_size(), self.page_size)?;
        let durable = self
            .store
            .map(|s| crate::load::durable::Durable::attach(&geo, s, self.used.len()))
            .transpose()?;
        let source: Arc<dyn BitmapSource> = match self.source {
            Some(s) => Arc::from(s),
            None => Arc::new(MemSource::new(geo, &self.used)?.with_load_cost(self.load_cost)),
        };
        let readers = self.readers.unwrap_or(if self.lazy { 4 } else { 0 });
        let tun = self
            .tunables
            .unwrap_or_else(|| Tunables::for_geometry(&geo, self.cpus));
        if tun.stripe > 0 && geo.cluster_bits() > 0 {
            return Err(Error::Unsupported {
                what: "a RAID stripe with bigalloc clusters",
                cluster_bits: geo.cluster_bits(),
            });
        }
        let n = geo.group_count();
        let groups: Box<[Group]> = (0..n)
            .map(|g| Group::unloaded(g, source.descriptor_free(g)))
            .collect();
        let free: i64 = groups.iter().map(|g| i64::from(g.bb_free())).sum();
        let a = Allocator {
            geo,
            index: ClassIndex::new(geo.num_orders(), n),
            goals: (0..crate::tunables::max_global_goals(&geo))
                .map(|_| Padded(AtomicU32::new(0)))
                .collect(),
            tun: AtomicCell::new(tun),
            tun_writer: Mutex::new(()),
            groups,
            state: GroupStates::new(n, state::NEED_INIT),
            uninit: Padded(AtomicU32::new(n)),
            classless: Padded(AtomicU32::new(n)),
            pa: Preallocs::new(self.cpus),
            pending_groups: Padded(Mutex::new(Vec::new())),
            md_lock: Padded(Mutex::new(MdLock)),
            committing: Padded(Mutex::new(())),
            commit_done: Padded((Mutex::new(()), Condvar::default())),
            committed: AtomicU64::new(0),
            tid: Padded(AtomicU64::new(1)),
            free_blocks: PerCpuCounter::new(free),
            free_pending: PerCpuCounter::new(0),
            discard_seq: PerCpu::default(),
            lock_busy: Padded(AtomicU32::new(0)),
            optimize_scan: Padded(AtomicBool::new(tun.mb_optimize_scan)),
            stats: Stats::default(),
            readahead: ReadAhead::new(source.clone(), readers),
            cache: GroupCache::new(self.cache),
            source,
            cpus: self.cpus,
            journal: self.journal,
            pages,
            durable,
            corrupt: Default::default(),
            #[cfg(test)]
            walk_all_classes: false,
            #[cfg(test)]
            no_walk_shortcuts: false,
        };
        a.index.set_lists(tun.order_lists);
        for g in (0..n).filter(|&g| a.source.block_uninit(g)) {
            a.bits(g).set(state::BLOCK_UNINIT);
        }
        a.adopt_store_corruption();
        if !self.lazy {
            for g in 0..n {
                a.load_group(g)?;
            }
        }
        Ok(a)
    }
}

/// Where the group locks lie, for a simulator: see [`Allocator::group_lock_span`].
#[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLockSpan {
    /// The address group 0's lock reports to a [`crate::vcpu::Hook`].
    pub first: usize,
    /// The distance between two consecutive groups' lock addresses.
    pub stride: usize,
    /// How many groups (and locks) there are.
    pub groups: u32,
}

#[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
impl GroupLockSpan {
    /// The group whose lock reports `addr`, if it is a group lock of this allocator.
    pub fn group_of(&self, addr: usize) -> Option<u32> {
        let off = addr.checked_sub(self.first)?;
        let g = off / self.stride;
        (off % self.stride == 0 && g < self.groups as usize).then_some(g as u32)
    }
}

#[cfg(all(not(shuttle), feature = "vcpu-hooks"))]
impl Allocator {
    /// The group locks' addresses as a hook sees them. The library keeps one lock per group;
    /// the kernel hashes its groups onto `NR_BG_LOCKS` spinlocks (`bgl_lock_ptr`: group `g`
    /// takes lock `g & (NR_BG_LOCKS - 1)`), so a simulator of the kernel maps each group lock
    /// to its hashed one with this.
    pub fn group_lock_span(&self) -> GroupLockSpan {
        let addr = |g: usize| &self.groups[g].lock as *const _ as usize;
        GroupLockSpan {
            first: addr(0),
            stride: std::mem::size_of::<Group>(),
            groups: self.groups.len() as u32,
        }
    }

    /// The addresses the groups' `bb_state` words report to a hook: the words a prefetch walk
    /// reads and (6.18) writes one group after another, none waiting on the last.
    pub fn group_state_span(&self) -> std::ops::Range<usize> {
        let addr = |g: u32| self.state.get(g) as *const StateBits as usize;
        let last = self.groups.len() as u32 - 1;
        addr(0)..addr(last) + std::mem::size_of::<StateBits>()
    }
}

impl Allocator {
    /// Starts building an allocator for `geo`.
    pub fn builder(geo: Geometry) -> Builder {
        Builder {
            geo,
            cache: None,
            used: Vec::new(),
            tunables: None,
            cpus: possible_cpus(),
            lazy: false,
            source: None,
            load_cost: std::time::Duration::ZERO,
            readers: None,
            store: None,
            journal: true,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }

    /// An allocator with the kernel's defaults over `geo`, with `used` ranges taken.
    pub fn new(geo: Geometry, used: &[(u64, u64)]) -> Result<Allocator, Error> {
        Self::builder(geo).used(used).build()
    }

    /// The geometry the allocator was built for.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Whether frees wait for a commit ([`Builder::journal`]).
    pub fn journal(&self) -> bool {
        self.journal
    }

    /// The page size modelled, in bytes ([`Builder::page_size`]).
    pub fn page_size(&self) -> u32 {
        self.pages.page_size()
    }

    /// A copy of the current tunables.
    pub fn tunables(&self) -> Tunables {
        self.tun.load()
    }

    /// Sets one tunable by name (see [`Tunables::set`]); takes effect for later requests.
    pub fn set_tunable(&self, name: &str, value: &str) -> Result<(), Error> {
        let _writer = self.tun_writer.lock();
        let t = self.tun.load();
        let mut new = t;
        new.set(name, value, &self.geo)?;
        if new.nr_global_goals != t.nr_global_goals {
            // The kernel allocates the new goals zeroed.
            for g in &self.goals[..new.nr_global_goals as usize] {
                g.store(0, Ordering::Relaxed);
            }
        }
        if new.mb_optimize_scan != t.mb_optimize_scan {
            // Like a remount: every group is published again under the new setting, after
            // the setting itself (a publish under a group lock taken after ours reads it).
            // With the indexes off, a group whose largest free order changed left the
            // largest-order index and was not put back (`mb_set_largest_free_order` inserts
            // only with optimize scan on), so turning them on puts every group back.
            self.optimize_scan
                .store(new.mb_optimize_scan, Ordering::Relaxed);
            for g in self.groups.iter() {
                let mut st = g.lock.lock();
                self.publish(g, &mut st);
                if new.mb_optimize_scan {
                    let free = g.bb_free() > 0;
                    self.index
                        .reinsert_largest(g.no, st.class_index, st.largest_order, free);
                }
            }
        }
        if new.order_lists != t.order_lists {
            self.index.set_lists(new.order_lists);
        }
        self.tun.store(new);
        Ok(())
    }

    /// Free blocks as the on-disk descriptors count them (pending frees included).
    pub fn free_blocks(&self) -> u64 {
        // The counters count clusters (`s_freeclusters_counter`).
        self.geo.c2b(self.free_blocks.sum().max(0) as u64)
    }
    /// Blocks freed but waiting for a commit before they can be reused.
    pub fn pending_blocks(&self) -> u64 {
        self.geo.c2b(self.free_pending.sum().max(0) as u64)
    }

    /// The counters of `/proc/fs/ext4/<dev>/mb_stats`.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot(self.geo.group_count())
    }

    /// Whether group `g`'s buddy has been built (`!EXT4_MB_GRP_NEED_INIT`), without building
    /// it. A lazily built allocator builds a group's buddy when a request or free first needs
    /// it or when a prefetch window is finished (`ext4_mb_prefetch_fini`); a group the cache
    /// has since evicted counts as built, as the kernel never drops a buddy.
    pub fn buddy_built(&self, g: u32) -> Result<bool, Error> {
        let groups = self.geo.group_count();
        if g >= groups {
            return Err(Error::NoSuchGroup { group: g, groups });
        }
        Ok(!self.bits(g).need_init())
    }

    /// One group's state (loads its bitmap if needed, like reading `mb_groups`). A group whose
    /// bitmap failed its checksum shows as corrupt and not loaded.
    pub fn group(&self, g: u32) -> Result<GroupSnapshot, Error> {
        let (grp, st) = match self.loaded_group(g) {
            Err(Error::CorruptGroup { .. }) if self.corrupt.contains(g) => {
                return Ok(self.unloaded_snapshot(g))
            }
            other => other?,
        };
        let l = st.loaded.as_ref().expect("loaded by loaded_group");
        Ok(GroupSnapshot {
            group: g,
            free: l.buddy.free(),
            fragments: l.buddy.fragments(),
            first_free: l.buddy.first_free(),
            counters: l.buddy.counters().to_vec(),
            corrupt: self.bits(g).is_corrupt(),
            loaded: true,
            pending: st.pending.iter().map(|p| p.len).sum(),
            desc_free: st.desc_free,
            largest_free_order: l.buddy.largest_free_order(),
            size_class: grp.size_class() as u8,
        })
    }

    /// Every group's state.
    pub fn groups(&self) -> Result<Vec<GroupSnapshot>, Error> {
        (0..self.geo.group_count()).map(|g| self.group(g)).collect()
    }

    /// The `/proc/fs/ext4/<dev>/mb_groups` text.
    pub fn mb_groups(&self) -> Result<String, Error> {
        Ok(mb_groups_text(&self.groups()?))
    }

    /// Groups per order in the largest-free-order and average-fragment indexes
    /// (`mb_structs_summary`).
    pub fn index_counts(&self) -> (Vec<u32>, Vec<u32>) {
        self.index.counts()
    }

    /// Free extents of a group's in-core bitmap as `(start_in_group, len)`: what the
    /// allocator can hand out now.
    pub fn free_extents(&self, g: u32) -> Result<Vec<(u32, u32)>, Error> {
        self.with_loaded(g, |l| l.buddy.free_runs().collect())
    }

    /// The on-disk view of a group: blocks in use by owners.
    pub fn disk_bitmap(&self, g: u32) -> Result<Bitmap, Error> {
        self.with_loaded(g, |l| l.disk.clone())
    }

    fn with_loaded<T>(&self, g: u32, f: impl FnOnce(&Loaded) -> T) -> Result<T, Error> {
        let (_, st) = self.loaded_group(g)?;
        Ok(f(st.loaded.as_ref().expect("loaded by loaded_group")))
    }

    /// Group `g`, loaded and locked; an unknown group number is an error.
    fn loaded_group(
        &self,
        g: u32,
    ) -> Result<(&Group, crate::sync::MutexGuard<'_, GroupState>), Error> {
        let grp = self.groups.get(g as usize).ok_or(Error::NoSuchGroup {
            group: g,
            groups: self.geo.group_count(),
        })?;
        // Built first through `load_group`, which also builds its page-mates without
        // holding this group's lock.
        self.load_group(g)?;
        let mut st = grp.lock.lock();
        self.load_locked(grp, &mut st)?;
        Ok((grp, st))
    }

    /// Reads a group's bitmap and builds its buddy if not done yet (`ext4_mb_init_group`),
    /// and, if its buddy was never built, the unbuilt groups that share its buddy-cache page.
    /// Inline: every group a scan visits asks, and nearly always it is loaded.
    #[inline]
    pub(crate) fn load_group(&self, g: u32) -> Result<(), Error> {
        if !self.bits(g).has(state::NEED_INIT | EVICTED) {
            return Ok(());
        }
        self.load_unloaded(g)
    }

    /// [`Self::load_group`] for a group that was not loaded when it asked.
    #[inline(never)]
    fn load_unloaded(&self, g: u32) -> Result<(), Error> {
        let grp = &self.groups[g as usize];
        if self.bits(g).need_init() {
            // Mates first: a bounded cache then evicts a mate rather than `g`, which the
            // caller is about to use.
            self.build_page_mates(g);
        }
        let mut st = grp.lock.lock();
        self.load_locked(grp, &mut st)
    }

    /// `ext4_mb_init_cache` builds every unbuilt group of the page it fills: with 1 KiB blocks
    /// and 4 KiB pages a group's page-mate, with 64 KiB pages and 4 KiB blocks seven mates
    /// ([`BuddyPages`]). One lock at a time (never two groups' locks together). A mate whose
    /// bitmap fails to load stays unbuilt; the request that needs it reports the error.
    fn build_page_mates(&self, g: u32) {
        if self.pages.groups_per_page() <= 1 {
            return;
        }
        let page = self.pages.page_of(g, self.geo.group_count());
        for m in page.filter(|&m| m != g && self.bits(m).need_init()) {
            let grp = &self.groups[m as usize];
            let mut st = grp.lock.lock();
            let _ = self.load_locked(grp, &mut st);
        }
    }

    pub(crate) fn load_locked(&self, grp: &Group, st: &mut GroupState) -> Result<(), Error> {
        if st.loaded.is_some() {
            return Ok(());
        }
        if self.corrupt.contains(grp.no) {
            return Err(self.corrupt_error(grp.no));
        }
        // ext4_wait_block_bitmap: a prefetched buffer is used as is (waiting if its read is
        // still in flight); otherwise this thread reads it now, synchronously.
        // Under a virtual-CPU hook: wait, in virtual time, for the read in flight or a new
        // one (a second loader of the group waits for the first's read, behind the lock).
        self.readahead.wait_device(grp.no);
        let read = match self.readahead.take(grp.no) {
            Taken::Ready(r, waited) => {
                if waited {
                    crate::stats::bump(&self.stats.prefetch_waits);
                }
                r
            }
            Taken::NotSubmitted => {
                crate::stats::bump(&self.stats.bitmap_loads);
                crate::stats::bump(&self.stats.sync_loads);
                self.source.read_bitmap(grp.no)
            }
        };
        let disk = match read {
            Ok(d) => d,
            Err(e) => return Err(self.load_failed(grp, st, e)),
        };
        let bpg = self.geo.clusters_per_group();
        let buddy = Buddy::generate(&disk, self.geo.group_len(grp.no), bpg, self.geo.bsbits());
        if buddy.free() != st.desc_free {
            // ext4_mb_generate_buddy: "block bitmap and bg descriptor inconsistent".
            let delta = i64::from(buddy.free()) - i64::from(st.desc_free);
            self.free_blocks.add(delta);
            let reason = format!(
                "block bitmap has {} free blocks, descriptor {}",
                buddy.free(),
                st.desc_free
            );
            st.desc_free = buddy.free();
            self.mark_corrupt(grp, st.desc_free, reason);
        }
        st.loaded = Some(Box::new(Loaded { disk, buddy }));
        crate::stats::bump(&self.stats.buddies_generated);
        self.publish(grp, st);
        let bits = self.bits(grp.no);
        if bits.need_init() {
            // Under the group lock: no other loader can clear it meanwhile.
            self.uninit.fetch_sub(1, Ordering::Relaxed);
        }
        bits.clear(state::NEED_INIT | state::BLOCK_UNINIT | EVICTED);
        self.note_loaded(grp.no);
        Ok(())
    }

    /// After a buddy change: publish the summary and move the group in its class's indexes
    /// (`mb_set_largest_free_order`, `mb_update_avg_fragment_size`). Under the group lock.
    pub(crate) fn publish(&self, grp: &Group, st: &mut GroupState) {
        let optimize_scan = self.optimize_scan.load(Ordering::Relaxed);
        let zombies = || self.index.lists.on();
        let c = st.publish(grp, optimize_scan, zombies, self.geo.num_orders());
        if c.old_largest != c.new_largest || (optimize_scan && c.old_avg != c.new_avg) {
            self.index.apply(grp.no, st.class_index, &c, optimize_scan);
        }
        // btrfs_maybe_reset_size_class: a group with no data left loses its class. Classes are
        // only ever set with `size_classes` on, so this is one compare when off (the index
        // class is the group's class: both change together, under this lock).
        if st.class_index != SizeClass::None && c.free >= grp.baseline_free {
            self.set_class(grp, st, SizeClass::None, NO_HOME);
            crate::stats::bump(&self.stats.class_resets);
        }
        self.check_group(grp, st);
    }

    /// With the `aggressive-check` feature: [`GroupState::check`] on a group that is not
    /// corrupt (a corrupt group's views disagree by definition), panicking with what broke.
    /// Without it, nothing.
    #[inline(always)]
    pub(crate) fn check_group(&self, grp: &Group, st: &GroupState) {
        #[cfg(feature = "aggressive-check")]
        if !self.bits(grp.no).is_corrupt() {
            if let Err(e) = st.check(self.geo.group_len(grp.no), self.geo.bsbits()) {
                panic!("group {}: {e}", grp.no);
            }
        }
        #[cfg(not(feature = "aggressive-check"))]
        let _ = (grp, st);
    }

    /// Gives the group class `class`, claimed by CPU `home` (a reset: none and [`NO_HOME`]):
    /// the values the scans read without the lock, then the index sets that hold the group.
    /// Under the group lock, like `publish`'s order moves.
    pub(crate) fn set_class(&self, grp: &Group, st: &mut GroupState, class: SizeClass, home: u32) {
        match (st.class_index, class) {
            (SizeClass::None, SizeClass::None) => {}
            (SizeClass::None, _) => {
                self.classless.fetch_sub(1, Ordering::Relaxed);
            }
            (_, SizeClass::None) => {
                self.classless.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        debug_assert!(self.classless.load(Ordering::Relaxed) <= self.geo.group_count());
        grp.class_home.store(home, Ordering::Relaxed);
        grp.class.store(class as u8, Ordering::Relaxed);
        let (largest, avg) = (st.largest_order, st.avg_order);
        self.index
            .move_group(grp.no, st.class_index, class, largest, avg);
        st.class_index = class;
    }

    /// Blocks entered or left a buddy: bump this thread's `discard_pa_seq`.
    pub(crate) fn bump_discard_seq(&self) {
        crate::sync::percpu::local_add(self.discard_seq.local(), 1);
    }

    /// `ext4_get_discard_pa_seq_sum`.
    pub(crate) fn discard_seq_sum(&self) -> u64 {
        self.discard_seq
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .sum()
    }

    /// Checks every loaded group's buddy against a regeneration from its bitmap, and the
    /// global counters against the groups (test support; cheap enough for property tests).
    pub fn check_consistency(&self) -> Result<(), String> {
        // Corrupt groups' free blocks are not counted (`mark_corrupt`).
        let corrupt = self.corrupt.snapshot();
        let optimize = self.optimize_scan.load(Ordering::Relaxed);
        let mut disk_free = 0i64;
        let mut pending = 0i64;
        let mut registered = Vec::new();
        let mut classless = 0u32;
        for grp in self.groups.iter() {
            let st = grp.lock.lock();
            classless += u32::from(st.class_index == SizeClass::None);
            if let Some(l) = &st.loaded {
                l.buddy
                    .check(self.geo.bsbits())
                    .map_err(|e| format!("group {}: {e}", grp.no))?;
                let len = self.geo.group_len(grp.no);
                let df = len - l.disk.count_ones(0, len);
                if df != st.desc_free {
                    return Err(format!(
                        "group {}: descriptor free {} != disk bitmap {df}",
                        grp.no, st.desc_free
                    ));
                }
                for p in &st.pending {
                    if !l.buddy.all_used(p.start, p.start + p.len)
                        || !l.disk.all_clear(p.start, p.start + p.len)
                    {
                        return Err(format!(
                            "group {}: pending free {:?} not held in-core / clear on disk",
                            grp.no, p
                        ));
                    }
                }
                // Everything on disk is in use in-core too.
                for (s, n) in l.disk.one_runs(0, len) {
                    if !l.buddy.all_used(s, s + n) {
                        return Err(format!(
                            "group {}: disk-used [{s}, +{n}) free in-core",
                            grp.no
                        ));
                    }
                }
                if l.buddy.free() != grp.bb_free() {
                    return Err(format!("group {}: bb_free mirror stale", grp.no));
                }
            }
            self.check_indexed(grp, &st, optimize)?;
            registered.extend(st.inode_pas.iter().map(|p| {
                let pstart = self.geo.block_of(grp.no, p.start);
                (pstart, p.len, p.owner, p.lstart)
            }));
            if !corrupt.contains_key(&grp.no) {
                disk_free += i64::from(st.desc_free);
            }
            pending += st.pending.iter().map(|p| i64::from(p.len)).sum::<i64>();
        }
        let counted = self.free_blocks.sum();
        if counted != disk_free {
            return Err(format!(
                "free counter {counted} != sum of descriptors {disk_free}"
            ));
        }
        let p = self.free_pending.sum();
        if p != pending {
            return Err(format!(
                "pending counter {p} != sum of pending frees {pending}"
            ));
        }
        let counted = self.classless.load(Ordering::Relaxed);
        if counted != classless {
            return Err(format!(
                "{counted} groups counted without a class, {classless} have none"
            ));
        }
        self.check_registered(registered)
    }

    /// The groups' lists of inode PAs (`(pstart, len, owner, lstart)`) against the owners'
    /// trees: the same PAs, each once.
    fn check_registered(&self, mut registered: Vec<(u64, u32, u64, u32)>) -> Result<(), String> {
        let mut live: Vec<_> = self
            .pa
            .owners
            .all()
            .into_iter()
            .flat_map(|(o, arc)| {
                let pas = arc.lock();
                pas.pas
                    .values()
                    .map(|pa| (pa.pstart, pa.len, o, pa.lstart))
                    .collect::<Vec<_>>()
            })
            .collect();
        registered.sort_unstable();
        live.sort_unstable();
        if registered != live {
            return Err(format!(
                "groups list inode PAs {registered:?}, owners hold {live:?}"
            ));
        }
        Ok(())
    }

    /// The group's place in the optimize-scan indexes, against its published orders: in the
    /// average-fragment index exactly at its order (kept while the indexes are off too); in
    /// the largest-free-order index exactly at its order when the indexes are on, at most
    /// there when they are off (a change of order then removes the group without a new
    /// insertion); always in the sets of its class.
    fn check_indexed(&self, grp: &Group, st: &GroupState, optimize: bool) -> Result<(), String> {
        let at = |order: i32| {
            if order >= 0 {
                vec![(order, st.class_index)]
            } else {
                vec![]
            }
        };
        let avg = self.index.places_of(Kind::Avg, grp.no);
        if avg != at(st.avg_order) {
            return Err(format!(
                "group {}: average-fragment index holds it at {avg:?}, its order is {} ({:?})",
                grp.no, st.avg_order, st.class_index
            ));
        }
        let largest = self.index.places_of(Kind::Largest, grp.no);
        let want = at(st.largest_order);
        if largest != want && (optimize || !largest.is_empty()) {
            return Err(format!(
                "group {}: largest-order index holds it at {largest:?}, its order is {} ({:?})",
                grp.no, st.largest_order, st.class_index
            ));
        }
        Ok(())
    }

    /// Group `g`'s `bb_state` bits.
    #[inline]
    pub(crate) fn bits(&self, g: u32) -> &StateBits {
        self.state.get(g)
    }

    /// The stream goal slot of `owner` (`i_ino % s_mb_nr_global_goals`).
    fn goal_slot(&self, owner: u64, nr_goals: u32) -> &AtomicU32 {
        let n = u64::from(nr_goals).clamp(1, self.goals.len() as u64);
        &self.goals[(owner % n) as usize]
    }

    /// The stream goal of `owner` (`ext4_mb_regular_allocator`).
    pub(crate) fn stream_goal(&self, owner: u64, tun: &Tunables) -> u32 {
        let _md = tun.goal_md_lock.then(|| self.md_lock.lock());
        self.goal_slot(owner, tun.nr_global_goals)
            .load(Ordering::Relaxed)
    }

    /// Moves `owner`'s stream goal to `group` (`ext4_mb_use_best_found`, under the group
    /// lock: with `goal_md_lock` the group's lock is held while queueing on `s_md_lock`).
    pub(crate) fn set_stream_goal(&self, owner: u64, tun: &Tunables, group: u32) {
        let _md = tun.goal_md_lock.then(|| self.md_lock.lock());
        self.goal_slot(owner, tun.nr_global_goals)
            .store(group, Ordering::Relaxed);
    }

    pub(crate) fn lg(&self, cpu: u32) -> &Mutex<LocalityGroup> {
        self.pa.lg(self.lg_index(cpu))
    }

    /// Which locality group CPU `cpu` uses (its index in `lgs`).
    pub(crate) fn lg_index(&self, cpu: u32) -> usize {
        (cpu % self.cpus) as usize
    }

    /// Holds group `g`'s lock until the returned guard drops, as another thread working in the
    /// group would (tests of the contention paths, seed 001; feature `testing`).
    #[cfg(feature = "testing")]
    pub fn hold_group_lock(&self, g: u32) -> Result<GroupLockHold<'_>, Error> {
        let grp = self.groups.get(g as usize).ok_or(Error::NoSuchGroup {
            group: g,
            groups: self.geo.group_count(),
        })?;
        Ok(GroupLockHold(grp.lock.lock()))
    }

    /// Owners that currently hold inode preallocations, with their count.
    pub fn preallocations(&self) -> Vec<(u64, usize)> {
        self.pa
            .owners
            .all()
            .into_iter()
            .map(|(o, p)| (o, p.lock().pas.len()))
            .filter(|&(_, n)| n > 0)
            .collect()
    }
}

/// Shared handle, for convenience.
pub type SharedAllocator = Arc<Allocator>;

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn allocator_is_send_and_sync() {
        assert_send_sync::<Allocator>();
    }

    /// Eight groups, optimize scan on; then 30,000 blocks taken at the start of each group
    /// (the goal try, so the placement is the same whatever the indexes).
    fn fill_with_optimize_toggled(toggle: bool) -> Allocator {
        let geo = Geometry::new(4096, 32768, 8 * 32768, 0, 16).unwrap();
        let mut t = crate::policy::Policy::Linux618.tunables(&geo, 2);
        t.mb_optimize_scan = true;
        let a = Allocator::builder(geo)
            .used(&[(0, 100)])
            .tunables(t)
            .cpus(2)
            .build()
            .unwrap();
        if toggle {
            a.set_tunable("mb_optimize_scan", "0").unwrap();
        }
        for g in 0..8u64 {
            let req = crate::request::Request::new(5, 0, 30_000)
                .with_goal(g * 32768 + 200)
                .with_flags(
                    crate::request::Flags::HINT_DATA
                        | crate::request::Flags::HINT_NOPREALLOC
                        | crate::request::Flags::HINT_TRY_GOAL,
                );
            assert_eq!(a.allocate(&req).unwrap().extent.start, g * 32768 + 200);
        }
        if toggle {
            a.set_tunable("mb_optimize_scan", "1").unwrap();
        }
        a
    }

    #[test]
    fn turning_optimize_scan_back_on_indexes_every_group() {
        // Every group's largest free order fell from 13 to 11 while the indexes were off; it
        // left the largest-order index then, and must be back once they are on again.
        let toggled = fill_with_optimize_toggled(true);
        let (largest, avg) = toggled.index_counts();
        assert_eq!(largest.iter().sum::<u32>(), 8, "{largest:?}");
        assert_eq!(avg.iter().sum::<u32>(), 8, "{avg:?}");
        assert_eq!(
            toggled.index_counts(),
            fill_with_optimize_toggled(false).index_counts()
        );
    }
}
