//! Counters with the names of `/proc/fs/ext4/<dev>/mb_stats`, and the `mb_groups` dump.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sync::percpu::{local_add, Local, PerCpu};

/// Per-criterion counters (`s_bal_cX_*`).
#[derive(Default)]
pub struct CrStats {
    pub hits: AtomicU64,
    /// Groups a walk reached (an index walk counts a group at the index hit and again in
    /// `ext4_mb_good_group_nolock`). With size classes, index walks read only the
    /// groups of the classes a stage admits, so groups of other classes are not counted.
    pub groups_considered: AtomicU64,
    pub extents_scanned: AtomicU64,
    pub useless_loops: AtomicU64,
}

/// The live counters of one shard, updated with relaxed atomics.
#[derive(Default)]
pub struct Counters {
    pub reqs: AtomicU64,
    pub success: AtomicU64,
    pub blocks_allocated: AtomicU64,
    pub extents_scanned: AtomicU64,
    pub groups_scanned: AtomicU64,
    pub goal_hits: AtomicU64,
    pub stream_goal_hits: AtomicU64,
    pub len_goal_hits: AtomicU64,
    pub two_order_hits: AtomicU64,
    pub breaks: AtomicU64,
    pub lost: AtomicU64,
    pub buddies_generated: AtomicU64,
    pub bitmap_loads: AtomicU64,
    pub prefetch_loads: AtomicU64,
    /// Bitmap reads an allocating thread did itself and waited for.
    pub sync_loads: AtomicU64,
    /// Loads that found their prefetch read still in flight and waited for it.
    pub prefetch_waits: AtomicU64,
    /// Groups whose bitmaps the group cache dropped.
    pub evictions: AtomicU64,
    pub prefetch_ios: AtomicU64,
    pub prefetch_desc_lookups: AtomicU64,
    pub preallocated: AtomicU64,
    pub discarded: AtomicU64,
    pub prealloc_hits: AtomicU64,
    pub busy_skips: AtomicU64,
    pub enospc_retries: AtomicU64,
    pub commits: AtomicU64,
    /// Groups marked BBITMAP_CORRUPT (each counted once).
    pub corrupt_groups: AtomicU64,
    /// Commits the durable store refused or failed (each retried by the next commit).
    pub commit_failures: AtomicU64,
    pub cr: [CrStats; 5],
    /// Size classes (seed 002, M12): allocations found per stage, indexed by
    /// [`Stage`](crate::group::size_class::Stage) (match, unset, empty, any, shared).
    pub class_stage_hits: [AtomicU64; 5],
    /// Groups claimed by a class, reset to none, skipped for their class, and allocations forced
    /// into a group of another class. A skip is a group a stage reached and rejected: the
    /// index walks read only the groups of the classes a stage admits, so there skips count
    /// the claims that differ in data or CPU (`size_class_per_cpu`); linear walks reach every
    /// group, and skip other classes too.
    pub class_claims: AtomicU64,
    pub class_resets: AtomicU64,
    pub class_skips: AtomicU64,
    pub class_forced: AtomicU64,
}

/// The live counters, one [`Counters`] per thread shard ([`PerCpu`]): every request bumps a
/// dozen of them, and shared counters would make two threads fight over one cache line.
/// `&stats.reqs` derefs to the calling thread's shard; [`Stats::snapshot`] sums all shards.
#[derive(Default)]
pub struct Stats {
    shards: PerCpu<Counters>,
}

impl std::ops::Deref for Stats {
    type Target = Counters;
    #[inline]
    fn deref(&self) -> &Counters {
        self.shards.local()
    }
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Requests (`s_bal_reqs`).
    pub reqs: u64,
    /// Requests that got blocks (`s_bal_success`).
    pub success: u64,
    /// Blocks handed out (`s_bal_allocated`).
    pub blocks_allocated: u64,
    /// Free extents measured (`s_bal_ex_scanned`).
    pub extents_scanned: u64,
    /// Groups whose buddy was searched (`s_bal_groups_scanned`).
    pub groups_scanned: u64,
    /// Allocations that started at the goal (`s_bal_goals`).
    pub goal_hits: u64,
    /// Allocations in the stream goal's group (`s_bal_stream_goals`).
    pub stream_goal_hits: u64,
    /// Allocations of the whole normalised goal length (`s_bal_len_goals`).
    pub len_goal_hits: u64,
    /// Allocations at CR_POWER2_ALIGNED (`s_bal_2orders`).
    pub two_order_hits: u64,
    /// Searches stopped by `mb_max_to_scan` (`s_bal_breaks`).
    pub breaks: u64,
    /// Best extents gone by the time they were taken (`s_mb_lost_chunks`).
    pub lost: u64,
    /// Buddies built from bitmaps (`s_mb_buddies_generated`).
    pub buddies_generated: u64,
    /// Bitmaps read, by allocating threads and by prefetch.
    pub bitmap_loads: u64,
    /// Bitmaps read by prefetch.
    pub prefetch_loads: u64,
    /// Bitmap reads an allocating thread did itself and waited for.
    pub sync_loads: u64,
    /// Loads that found their prefetch read still in flight and waited for it.
    pub prefetch_waits: u64,
    /// Groups whose bitmaps the group cache dropped.
    pub evictions: u64,
    /// Prefetch reads submitted (`ext4_mb_prefetch`).
    pub prefetch_ios: u64,
    /// Descriptor lookups of the prefetch walk (seed 003 makes fewer).
    pub prefetch_desc_lookups: u64,
    /// Blocks put into new preallocations (`s_mb_preallocated`).
    pub preallocated: u64,
    /// Preallocated blocks given back unused (`s_mb_discarded`).
    pub discarded: u64,
    /// Requests served from a preallocation.
    pub prealloc_hits: u64,
    /// Groups skipped because their lock was held (`try_lock_groups`).
    pub busy_skips: u64,
    /// Searches retried after discarding preallocations on ENOSPC.
    pub enospc_retries: u64,
    /// Commits that released frees.
    pub commits: u64,
    /// Groups marked BBITMAP_CORRUPT (each counted once).
    pub corrupt_groups: u64,
    /// Commits the durable store refused or failed.
    pub commit_failures: u64,
    /// Per criterion: hits, groups_considered, extents_scanned, useless_loops.
    pub cr: [[u64; 4]; 5],
    /// Groups of the filesystem.
    pub groups: u32,
    /// Allocations found per size-class stage: match, unset, empty, any.
    pub class_stage_hits: [u64; 5],
    /// Groups claimed by a size class.
    pub class_claims: u64,
    /// Groups whose size class was reset (no data left).
    pub class_resets: u64,
    /// Groups a size-class stage reached and rejected.
    pub class_skips: u64,
    /// Allocations forced into a group of another class.
    pub class_forced: u64,
}

/// Counts one on `c`, a counter of the calling thread's [`Stats`] shard (`&stats.name`).
#[inline]
pub(crate) fn bump(c: &AtomicU64) {
    local_add(c, 1);
}
/// Adds `n` to `c`, a counter of the calling thread's [`Stats`] shard.
#[inline]
pub(crate) fn add(c: &AtomicU64, n: u64) {
    local_add(c, n);
}

/// The calling thread's counters, pinned for one request: each count is then one load and
/// one store, with no thread-local lookup.
#[derive(Clone, Copy)]
pub struct LocalStats<'a>(Local<'a, Counters>);

impl LocalStats<'_> {
    #[inline]
    pub fn bump(self, f: impl FnOnce(&Counters) -> &AtomicU64) {
        self.0.add(f(self.0.get()), 1);
    }
    #[inline]
    pub fn add(self, f: impl FnOnce(&Counters) -> &AtomicU64, n: u64) {
        self.0.add(f(self.0.get()), n);
    }
}

impl Stats {
    /// The calling thread's counters for the length of a request.
    #[inline]
    pub fn pin(&self) -> LocalStats<'_> {
        LocalStats(self.shards.pin())
    }

    pub fn snapshot(&self, groups: u32) -> StatsSnapshot {
        let l = |f: &dyn Fn(&Counters) -> &AtomicU64| -> u64 {
            self.shards
                .iter()
                .map(|c| f(c).load(Ordering::Relaxed))
                .sum()
        };
        StatsSnapshot {
            reqs: l(&|c| &c.reqs),
            success: l(&|c| &c.success),
            blocks_allocated: l(&|c| &c.blocks_allocated),
            extents_scanned: l(&|c| &c.extents_scanned),
            groups_scanned: l(&|c| &c.groups_scanned),
            goal_hits: l(&|c| &c.goal_hits),
            stream_goal_hits: l(&|c| &c.stream_goal_hits),
            len_goal_hits: l(&|c| &c.len_goal_hits),
            two_order_hits: l(&|c| &c.two_order_hits),
            breaks: l(&|c| &c.breaks),
            lost: l(&|c| &c.lost),
            buddies_generated: l(&|c| &c.buddies_generated),
            bitmap_loads: l(&|c| &c.bitmap_loads),
            prefetch_loads: l(&|c| &c.prefetch_loads),
            sync_loads: l(&|c| &c.sync_loads),
            prefetch_waits: l(&|c| &c.prefetch_waits),
            evictions: l(&|c| &c.evictions),
            prefetch_ios: l(&|c| &c.prefetch_ios),
            prefetch_desc_lookups: l(&|c| &c.prefetch_desc_lookups),
            preallocated: l(&|c| &c.preallocated),
            discarded: l(&|c| &c.discarded),
            prealloc_hits: l(&|c| &c.prealloc_hits),
            busy_skips: l(&|c| &c.busy_skips),
            enospc_retries: l(&|c| &c.enospc_retries),
            commits: l(&|c| &c.commits),
            corrupt_groups: l(&|c| &c.corrupt_groups),
            commit_failures: l(&|c| &c.commit_failures),
            cr: std::array::from_fn(|i| {
                [
                    l(&|c| &c.cr[i].hits),
                    l(&|c| &c.cr[i].groups_considered),
                    l(&|c| &c.cr[i].extents_scanned),
                    l(&|c| &c.cr[i].useless_loops),
                ]
            }),
            groups,
            class_stage_hits: std::array::from_fn(|i| l(&|c| &c.class_stage_hits[i])),
            class_claims: l(&|c| &c.class_claims),
            class_resets: l(&|c| &c.class_resets),
            class_skips: l(&|c| &c.class_skips),
            class_forced: l(&|c| &c.class_forced),
        }
    }
}

impl StatsSnapshot {
    /// The text of `/proc/fs/ext4/<dev>/mb_stats` (`ext4_seq_mb_stats_show`), plus our own
    /// lines for loads, prefetch and busy-group skips.
    pub fn to_proc_text(&self) -> String {
        let mut s = String::from("mballoc:\n");
        let _ = writeln!(s, "\treqs: {}", self.reqs);
        let _ = writeln!(s, "\tsuccess: {}", self.success);
        let _ = writeln!(s, "\tgroups_scanned: {}", self.groups_scanned);
        let names = [
            "cr_p2_aligned_stats",
            "cr_goal_fast_stats",
            "cr_best_avail_stats",
            "cr_goal_slow_stats",
            "cr_any_free_stats",
        ];
        for (name, c) in names.iter().zip(self.cr.iter()) {
            let _ = writeln!(s, "\t{name}:");
            let _ = writeln!(s, "\t\thits: {}", c[0]);
            let _ = writeln!(s, "\t\tgroups_considered: {}", c[1]);
            let _ = writeln!(s, "\t\textents_scanned: {}", c[2]);
            let _ = writeln!(s, "\t\tuseless_loops: {}", c[3]);
        }
        let _ = writeln!(s, "\textents_scanned: {}", self.extents_scanned);
        let _ = writeln!(s, "\t\tgoal_hits: {}", self.goal_hits);
        let _ = writeln!(s, "\t\tstream_goal_hits: {}", self.stream_goal_hits);
        let _ = writeln!(s, "\t\tlen_goal_hits: {}", self.len_goal_hits);
        let _ = writeln!(s, "\t\t2^n_hits: {}", self.two_order_hits);
        let _ = writeln!(s, "\t\tbreaks: {}", self.breaks);
        let _ = writeln!(s, "\t\tlost: {}", self.lost);
        let _ = writeln!(
            s,
            "\tbuddies_generated: {}/{}",
            self.buddies_generated, self.groups
        );
        let _ = writeln!(s, "\tpreallocated: {}", self.preallocated);
        let _ = writeln!(s, "\tdiscarded: {}", self.discarded);
        let _ = writeln!(s, "\tbitmap_loads: {}", self.bitmap_loads);
        let _ = writeln!(s, "\tprefetch_loads: {}", self.prefetch_loads);
        let _ = writeln!(s, "\tsync_loads: {}", self.sync_loads);
        let _ = writeln!(s, "\tprefetch_waits: {}", self.prefetch_waits);
        let _ = writeln!(s, "\tcache_evictions: {}", self.evictions);
        let _ = writeln!(s, "\tbusy_group_skips: {}", self.busy_skips);
        let h = &self.class_stage_hits;
        if h.iter().sum::<u64>() > 0 || self.class_claims > 0 {
            let _ = writeln!(
                s,
                "\tsize_class_hits: match {} unset {} empty {} shared {} any {}",
                h[0], h[1], h[2], h[4], h[3]
            );
            let _ = writeln!(
                s,
                "\tsize_class: claims {} resets {} skips {} forced {}",
                self.class_claims, self.class_resets, self.class_skips, self.class_forced
            );
        }
        let _ = writeln!(s, "\tcorrupt_groups: {}", self.corrupt_groups);
        let _ = writeln!(s, "\tcommit_failures: {}", self.commit_failures);
        s
    }
}

/// One group's line of `/proc/fs/ext4/<dev>/mb_groups`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSnapshot {
    /// Group number.
    pub group: u32,
    /// Free clusters in-core (`bb_free`).
    pub free: u32,
    /// Free fragments (`bb_fragments`).
    pub fragments: u32,
    /// First free cluster (`bb_first_free`).
    pub first_free: u32,
    /// Free buddy chunks per order (orders past bsbits+1 are absent).
    pub counters: Vec<u32>,
    /// Marked BBITMAP_CORRUPT.
    pub corrupt: bool,
    /// Its bitmap is in memory.
    pub loaded: bool,
    /// Clusters freed but not committed yet.
    pub pending: u32,
    /// Free clusters per the descriptor (on-disk view).
    pub desc_free: u32,
    /// Highest order with a free chunk, −1 for none (`bb_largest_free_order`).
    pub largest_free_order: i32,
    /// Size class (seed 002) as `SizeClass as u8`.
    pub size_class: u8,
}

/// The `mb_groups` text (`ext4_mb_seq_groups_show`): 14 order columns, as the kernel prints.
pub fn mb_groups_text(groups: &[GroupSnapshot]) -> String {
    let mut s = String::from("#group: free  frags first [ 2^0   2^1   2^2   2^3   2^4   2^5   2^6   2^7   2^8   2^9   2^10  2^11  2^12  2^13  ]\n");
    for g in groups {
        let _ = write!(
            s,
            "#{:<5}: {:<5} {:<5} {:<5} [",
            g.group, g.free, g.fragments, g.first_free
        );
        for i in 0..14 {
            let _ = write!(s, " {:<5}", g.counters.get(i).copied().unwrap_or(0));
        }
        s.push_str(" ]");
        if g.corrupt {
            s.push_str(" Block bitmap corrupted!");
        }
        s.push('\n');
    }
    s
}
