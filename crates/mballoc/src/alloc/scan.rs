//! Visiting one group: the gates that decide whether a group is worth a look, the searches
//! inside it, and the goal try (`ext4_mb_scan_group`, `ext4_mb_good_group_nolock`,
//! `ext4_mb_good_group`, `ext4_mb_simple_scan_group`, `ext4_mb_scan_aligned`,
//! `ext4_mb_complex_scan_group`, `ext4_mb_find_by_goal`); each extent found is weighed by
//! `best_found`.

use std::sync::atomic::Ordering;

use crate::alloc::allocator::Allocator;
use crate::alloc::best_found::{Measure, Verdict};
use crate::alloc::context::{Ctx, Ex, Status};
use crate::error::Error;
use crate::group::info::{Group, GroupState};
use crate::group::runs::Run;
use crate::group::size_class::{Claim, SizeClass};
use crate::group::state;
use crate::request::{Criterion, Flags};
use crate::sync::MutexGuard;

/// `EXT4_MAX_CONTENTION`, `EXT4_CONTENTION_THRESHOLD`.
const MAX_CONTENTION: u32 = 8;
const CONTENTION_THRESHOLD: u32 = 2;
/// `EXT4_FLEX_SIZE_DIR_ALLOC_SCHEME`.
const FLEX_SIZE_DIR_ALLOC_SCHEME: u32 = 4;

impl Allocator {
    /// `ext4_lock_group`: try first; on contention bump `s_lock_busy` and wait.
    pub(crate) fn lock_group<'a>(&self, grp: &'a Group) -> MutexGuard<'a, GroupState> {
        if let Some(g) = self.try_lock_group(grp) {
            return g;
        }
        let _ = self
            .lock_busy
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some((v + 1).min(MAX_CONTENTION))
            });
        grp.lock.lock()
    }

    /// `ext4_try_lock_group`: success lowers `s_lock_busy`, failure leaves it.
    pub(crate) fn try_lock_group<'a>(&self, grp: &'a Group) -> Option<MutexGuard<'a, GroupState>> {
        let g = grp.lock.try_lock()?;
        let _ = self
            .lock_busy
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
        Some(g)
    }

    /// `ext4_fs_is_busy`.
    pub(crate) fn fs_is_busy(&self) -> bool {
        self.lock_busy.load(Ordering::Relaxed) > CONTENTION_THRESHOLD
    }

    /// `ext4_mb_scan_group`: visit one group at the current criterion.
    pub(crate) fn scan_group(&self, ctx: &mut Ctx, g: u32) -> Result<(), Error> {
        self.might_prefetch(ctx, g);
        let grp = &self.groups[g as usize];
        let cr = ctx.cr;
        let skip_busy = ctx.tun.try_lock_groups && cr < Criterion::AnyFree;
        if skip_busy && grp.lock.is_locked() {
            ctx.stats.bump(|c| &c.busy_skips);
            return Ok(());
        }
        if !self.class_admits(ctx, grp) {
            return Ok(());
        }
        if self.unfit_nolock(ctx, grp) {
            ctx.stats.bump(|c| &c.cr[cr.index()].groups_considered);
            return Ok(());
        }
        match self.good_group_nolock(ctx, grp, cr) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) => {
                ctx.first_err.get_or_insert(e);
                return Ok(());
            }
        }
        self.load_group(g)?;
        // ext4_mb_load_buddy takes a reference on the group's bitmap and buddy folios before
        // the try-lock, and ext4_mb_unload_buddy drops them after the unlock, busy or not.
        let folios = || self.pages.folios_of(g);
        crate::sync::folio_refs(folios);
        self.lock_and_scan(ctx, grp, skip_busy);
        crate::sync::folio_refs(folios);
        Ok(())
    }

    /// The locked part of `ext4_mb_scan_group`: `ext4_try_lock_group` (a busy group is
    /// skipped) or `ext4_lock_group`, the re-check, the search, `ext4_unlock_group`.
    fn lock_and_scan(&self, ctx: &mut Ctx, grp: &Group, skip_busy: bool) {
        let mut st = if skip_busy {
            match self.try_lock_group(grp) {
                Some(st) => st,
                None => {
                    ctx.stats.bump(|c| &c.busy_skips);
                    return;
                }
            }
        } else {
            self.lock_group(grp)
        };
        // Re-checked under the lock: another request may have claimed the group meanwhile
        // (btrfs returns -EAGAIN from the claim for the same race).
        if self.good_group(ctx, grp, ctx.cr) && self.class_admits(ctx, grp) {
            self.scan_in_group(ctx, grp, &mut st);
        }
    }

    /// A quick no from the lock-free counts, before `ext4_mb_good_group_nolock`: at
    /// CR_GOAL_LEN_FAST and CR_BEST_AVAIL_LEN a group whose average free fragment is below
    /// the goal cannot pass `ext4_mb_good_group`, and `good_group_nolock` would only count it
    /// and say no (it never loads a group that needs no init). Index walks meet many such
    /// groups when the groups of their order sit just under the goal length; this answers
    /// them without the criterion dispatch of the full checks. Same answer and same count.
    #[inline(always)]
    fn unfit_nolock(&self, ctx: &Ctx, grp: &Group) -> bool {
        !self.no_walk_shortcuts() && self.unfit_counts(ctx, grp)
    }

    /// Whether `good_group_nolock` would turn `grp` down at once at this criterion for its
    /// average free fragment alone: at CR_GOAL_LEN_FAST / CR_BEST_AVAIL_LEN, read without
    /// the lock, outside STRICT_CHECK and for a group that needs no init.
    #[inline(always)]
    pub(crate) fn unfit_counts(&self, ctx: &Ctx, grp: &Group) -> bool {
        matches!(ctx.cr, Criterion::GoalLenFast | Criterion::BestAvailLen)
            && !ctx.flags.contains(Flags::STRICT_CHECK)
            && !fragments_fit(grp.bb_free(), grp.bb_fragments(), ctx.g_ex.len)
            && !self.bits(grp.no).need_init()
    }

    /// The size-class filter of the current stage (`find_free_extent_check_size_class`). The
    /// index walks only reach groups of the classes the stage admits (see
    /// [`crate::group::class_index`]), so there it rejects on the rest of the claim (data for the
    /// unset / empty stages, the CPU with `size_class_per_cpu`); linear walks reach every
    /// group and it rejects on the class too. It is also the final check under the lock.
    /// Always inline: the kernel's walk (no stage) calls it for every group it visits, and
    /// out of line (as LLVM left it once the virtual-CPU hooks grew `scan_group`) the call
    /// cost more than the test.
    #[inline(always)]
    fn class_admits(&self, ctx: &Ctx, grp: &Group) -> bool {
        let Some(stage) = ctx.stage else { return true };
        let claim = Claim {
            class: grp.size_class(),
            empty: grp.is_empty(),
            own: !ctx.tun.size_class_per_cpu || grp.class_home.load(Ordering::Relaxed) == ctx.home,
        };
        let ok = stage.allows(ctx.class, claim);
        if !ok {
            ctx.stats.bump(|c| &c.class_skips);
        }
        ok
    }

    /// `btrfs_use_block_group_size_class`: the first data allocation claims a class-less group
    /// (and moves it to the class's indexes); one into a group of another class leaves it as
    /// it is. Called under the group lock.
    pub(crate) fn claim_class(&self, ctx: &Ctx, grp: &Group, st: &mut GroupState) {
        if ctx.class == SizeClass::None {
            return;
        }
        match grp.size_class() {
            SizeClass::None => {
                self.set_class(grp, st, ctx.class, ctx.home);
                ctx.stats.bump(|c| &c.class_claims);
            }
            c if c != ctx.class => ctx.stats.bump(|c| &c.class_forced),
            _ => {}
        }
    }

    /// `ext4_mb_good_group_nolock`: cheap checks from the lock-free summary, and buddy
    /// initialisation of never-loaded groups where the criterion allows it.
    fn good_group_nolock(&self, ctx: &Ctx, grp: &Group, cr: Criterion) -> Result<bool, Error> {
        ctx.stats.bump(|c| &c.cr[cr.index()].groups_considered);
        let free = if ctx.flags.contains(Flags::STRICT_CHECK) {
            let _st = self.lock_group(grp);
            grp.bb_free()
        } else {
            grp.bb_free()
        };
        let bits = self.bits(grp.no);
        if free == 0 || (cr < Criterion::AnyFree && free < ctx.g_ex.len) || bits.is_corrupt() {
            return Ok(false);
        }
        if bits.need_init() {
            // The cheap criteria do not wait for a bitmap read, except for the first group
            // of a flex group (metadata goes there) and a group whose bitmap needs no read.
            let flex = self.geo.flex_bg_size();
            let first_of_flex = flex > 1 && grp.no.is_multiple_of(flex);
            if !cr.expensive() && !first_of_flex && !bits.has(state::BLOCK_UNINIT) {
                return Ok(false);
            }
            self.load_group(grp.no)?;
        }
        Ok(self.good_group(ctx, grp, cr))
    }

    /// `ext4_mb_good_group`: is this group worth scanning at `cr`?
    pub(crate) fn good_group(&self, ctx: &Ctx, grp: &Group, cr: Criterion) -> bool {
        if self.bits(grp.no).is_corrupt() {
            return false;
        }
        let (free, frags) = (grp.bb_free(), grp.bb_fragments());
        if free == 0 || frags == 0 {
            return false;
        }
        match cr {
            Criterion::Power2Aligned => {
                let flex = self.geo.flex_bg_size();
                if ctx.flags.contains(Flags::HINT_DATA)
                    && flex >= FLEX_SIZE_DIR_ALLOC_SCHEME
                    && grp.no.is_multiple_of(flex)
                {
                    return false;
                }
                if free < ctx.g_ex.len {
                    return false;
                }
                ctx.two_order as usize >= self.geo.num_orders()
                    || grp.largest_order.load(Ordering::Relaxed) >= ctx.two_order as i32
            }
            Criterion::GoalLenFast | Criterion::BestAvailLen => {
                fragments_fit(free, frags, ctx.g_ex.len)
            }
            Criterion::GoalLenSlow => free >= ctx.g_ex.len,
            Criterion::AnyFree => true,
        }
    }

    /// `__ext4_mb_scan_group`.
    fn scan_in_group(&self, ctx: &mut Ctx, grp: &Group, st: &mut GroupState) {
        ctx.groups_scanned += 1;
        if ctx.stage.is_some() && ctx.tun.size_class_largest_first {
            return self.largest_fit(ctx, grp, st);
        }
        if ctx.cr == Criterion::Power2Aligned {
            return self.simple_scan(ctx, grp, st);
        }
        let stripe = ctx.tun.stripe;
        let stripe_aligned = stripe >= 1 && ctx.g_ex.len.is_multiple_of(stripe);
        if matches!(ctx.cr, Criterion::GoalLenFast | Criterion::BestAvailLen) && stripe_aligned {
            self.aligned_scan(ctx, grp, st);
        }
        if ctx.status == Status::Continue {
            self.complex_scan(ctx, grp, st);
        }
    }

    /// `size_class_largest_first`: where a class stage takes its extent, as btrfs's
    /// `btrfs_find_space_for_alloc` does: in the goal's group (btrfs's hinted block group) the
    /// first free extent at or after the goal that holds the whole goal length; elsewhere, or
    /// when none follows the goal, the start of the group's largest free extent
    /// (`use_bytes_index`). A class stage takes only full-length extents.
    fn largest_fit(&self, ctx: &mut Ctx, grp: &Group, st: &mut GroupState) {
        let Some(l) = st.loaded.as_ref() else { return };
        let want = ctx.g_ex.len;
        let runs = l.buddy.runs();
        let hinted = ctx
            .hint
            .filter(|&(g, _)| g == grp.no)
            .and_then(|(_, goal)| {
                runs.iter()
                    .filter(|r| r.end > goal)
                    .map(|r| Run {
                        start: r.start.max(goal),
                        end: r.end,
                    })
                    .find(|r| r.len() >= want)
            });
        // The first of equal runs: address order breaks ties, as a front-to-back fill wants.
        let largest = || runs.iter().rev().max_by_key(|r| r.len()).copied();
        let Some(r) = hinted.or_else(largest).filter(|r| r.len() >= want) else {
            return;
        };
        ctx.found += 1;
        ctx.cx_found[ctx.cr.index()] += 1;
        ctx.b_ex = Ex {
            group: grp.no,
            start: r.start,
            len: r.len(),
            logical: 0,
        };
        self.use_best_found(ctx, grp, st);
    }

    /// `ext4_mb_simple_scan_group`: the lowest free chunk of the smallest order ≥ `2^ac_2order`.
    fn simple_scan(&self, ctx: &mut Ctx, grp: &Group, st: &mut GroupState) {
        let Some(l) = st.loaded.as_ref() else { return };
        for order in ctx.two_order..self.geo.num_orders() as u32 {
            if l.buddy.counters()[order as usize] == 0 {
                continue;
            }
            let Some(k) = l.buddy.first_chunk_of_order(order) else {
                let reason = format!("buddy counts a free chunk of order {order} but has none");
                self.mark_corrupt(grp, st.desc_free, reason);
                return;
            };
            ctx.found += 1;
            ctx.cx_found[ctx.cr.index()] += 1;
            ctx.b_ex = Ex {
                group: grp.no,
                start: k,
                len: 1 << order,
                logical: 0,
            };
            self.use_best_found(ctx, grp, st);
            ctx.stats.bump(|c| &c.two_order_hits);
            return;
        }
    }

    /// `ext4_mb_scan_aligned`: stripe-aligned starts, first one with a full stripe free.
    fn aligned_scan(&self, ctx: &mut Ctx, grp: &Group, st: &mut GroupState) {
        let stripe = u64::from(ctx.tun.stripe);
        let first_block = self.geo.group_first_block(grp.no);
        let first = first_block.div_ceil(stripe) * stripe - first_block;
        let bpg = u64::from(self.geo.clusters_per_group());
        let mut i = first;
        while i < bpg {
            let hit = st.loaded.as_ref().and_then(|l| {
                let s = i as u32;
                (l.buddy.is_free(s))
                    .then(|| l.buddy.find_extent(s, stripe as u32))
                    .filter(|&m| u64::from(m) >= stripe)
            });
            if let Some(max) = hit {
                ctx.found += 1;
                ctx.cx_found[ctx.cr.index()] += 1;
                ctx.b_ex = Ex {
                    group: grp.no,
                    start: i as u32,
                    len: max,
                    logical: 0,
                };
                self.use_best_found(ctx, grp, st);
                return;
            }
            i += stripe;
        }
    }

    /// `ext4_mb_complex_scan_group`: walk the free extents of the group in address order,
    /// measuring each (`ext4_mb_measure_extent`) until one is used or the limits stop the walk.
    ///
    /// One pass over the group's free runs. At the cheap criteria the kernel skips free
    /// extents shorter than the goal unmeasured; here whole short runs are stepped over at
    /// once. A long run is measured in `mb_find_extent` pieces, as the kernel's walk restarts
    /// at the end of each measured extent.
    ///
    /// A group whose runs disagree with its free count is marked corrupt, as the kernel does,
    /// and nothing measured in it is kept: the kernel still uses its best extent there, which
    /// takes the group's free blocks off the free count a second time; here no block of an
    /// inconsistent group is handed out and the counters stay exact.
    #[inline(never)]
    fn complex_scan(&self, ctx: &mut Ctx, grp: &Group, st: &mut GroupState) {
        let Some(l) = st.loaded.as_ref() else { return };
        let skip_short = !ctx.cr.expensive();
        let mut m = Measure::new(ctx, grp.no);
        let mut free = l.buddy.free();
        let mut verdict = Verdict::Continue;
        let mut exhausted = true;
        let runs = l.buddy.runs();
        let mut i = 0;
        'runs: while free > 0 {
            if skip_short {
                // Step over the runs too short for the goal (the kernel's unmeasured skips).
                let goal = m.goal;
                match runs[i..].iter().position(|r| r.end - r.start >= goal) {
                    Some(k) => i += k,
                    None => break,
                }
            }
            let Some(&r) = runs.get(i) else { break };
            let mut s = r.start;
            loop {
                let len = l.buddy.extent_in(r, s, m.goal);
                if free < len {
                    // More free clusters in the runs than counted: the bitmap is inconsistent
                    // (the kernel's "free clusters as per group info. But got %d blocks").
                    let reason = format!(
                        "free runs hold more than the {} free clusters counted",
                        l.buddy.free()
                    );
                    return self.mark_corrupt(grp, st.desc_free, reason);
                }
                verdict = m.measure(Ex {
                    group: grp.no,
                    start: s,
                    len,
                    logical: 0,
                });
                free -= len;
                s += len;
                if verdict != Verdict::Continue {
                    exhausted = false;
                    break 'runs;
                }
                if s >= r.end || (skip_short && r.end - s < m.goal) {
                    break;
                }
            }
            i += 1;
        }
        if free == 0 {
            exhausted = false;
        }
        if exhausted && free > 0 && !skip_short {
            // Free clusters counted but not found: the bitmap is inconsistent (the
            // kernel's "free clusters as per group info. But bitmap says 0").
            let reason = format!("{free} free clusters counted but not in the free runs");
            return self.mark_corrupt(grp, st.desc_free, reason);
        }
        m.store(ctx);
        if verdict == Verdict::Break {
            ctx.status = Status::Break;
        }
        if verdict == Verdict::Use || self.check_limits(ctx, grp.no, true) {
            self.use_best_found(ctx, grp, st);
        }
    }

    /// `size_class_strict_goal`: a goal inside a group of another class is not tried (the
    /// request goes to the class stages), unless the caller allows nothing but the goal.
    fn goal_class_refused(&self, ctx: &Ctx, grp: &Group) -> bool {
        if !ctx.tun.size_class_strict_goal
            || ctx.class == SizeClass::None
            || ctx.flags.contains(Flags::HINT_GOAL_ONLY)
        {
            return false;
        }
        let c = grp.size_class();
        let refused = c != SizeClass::None && c != ctx.class;
        if refused {
            ctx.stats.bump(|c| &c.class_skips);
        }
        refused
    }

    /// `ext4_mb_find_by_goal`: try exactly the goal (merge goals, GOAL_ONLY requests).
    pub(crate) fn find_by_goal(&self, ctx: &mut Ctx) -> Result<(), Error> {
        if !ctx.flags.contains(Flags::HINT_TRY_GOAL) && !ctx.flags.contains(Flags::HINT_GOAL_ONLY) {
            return Ok(());
        }
        let grp = &self.groups[ctx.g_ex.group as usize];
        if grp.bb_free() == 0 || self.goal_class_refused(ctx, grp) {
            return Ok(());
        }
        if let Err(e) = self.load_group(grp.no) {
            return if ctx.flags.contains(Flags::HINT_GOAL_ONLY) {
                Err(e)
            } else {
                Ok(())
            };
        }
        // ext4_mb_find_by_goal holds the folios (ext4_mb_load_buddy) around its lock, too.
        let folios = || self.pages.folios_of(grp.no);
        crate::sync::folio_refs(folios);
        self.goal_in_group(ctx, grp);
        crate::sync::folio_refs(folios);
        Ok(())
    }

    /// The locked part of `ext4_mb_find_by_goal`: the goal's extent, used if it fits.
    fn goal_in_group(&self, ctx: &mut Ctx, grp: &Group) {
        let mut st = self.lock_group(grp);
        if self.bits(grp.no).is_corrupt() {
            return;
        }
        let Some(l) = st.loaded.as_ref() else {
            return;
        };
        let start = ctx.goal_start();
        let max = l.buddy.find_extent(start, ctx.g_ex.len);
        let stripe = ctx.tun.stripe;
        let accept = if max >= ctx.g_ex.len && stripe > 0 && ctx.g_ex.len == stripe {
            self.geo
                .block_of(grp.no, start)
                .is_multiple_of(u64::from(stripe))
        } else {
            max >= ctx.g_ex.len || (max > 0 && ctx.flags.contains(Flags::HINT_MERGE))
        };
        if accept {
            ctx.found += 1;
            ctx.b_ex = Ex {
                group: grp.no,
                start,
                len: max,
                logical: 0,
            };
            self.use_best_found(ctx, grp, &mut st);
        }
    }
}

/// `ext4_mb_good_group`'s test at CR_GOAL_LEN_FAST / CR_BEST_AVAIL_LEN: the average free
/// fragment (`free / fragments`) holds the goal length.
#[inline(always)]
pub(crate) fn fragments_fit(free: u32, frags: u32, len: u32) -> bool {
    frags > 0 && free / frags >= len
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::alloc::allocator::Allocator;
    use crate::error::Error;
    use crate::geometry::Geometry;
    use crate::request::{Extent, Flags, Request};

    const BPG: u64 = 8192;

    /// Group 0 full; group 1 free only in four runs of 50 blocks, at offsets 1000 … 4000.
    fn four_short_runs() -> Allocator {
        let geo = Geometry::new(4096, BPG as u32, 2 * BPG, 0, 1).unwrap();
        let mut used = vec![(0, BPG + 1000)];
        for k in 1..4 {
            used.push((BPG + 1000 * k + 50, 950));
        }
        used.push((BPG + 4050, BPG - 4050));
        Allocator::builder(geo).used(&used).build().unwrap()
    }

    /// A group whose free count claims 1,000 clusters more than its runs hold.
    fn inflate(a: &Allocator, g: usize) {
        let grp = &a.groups[g];
        let mut st = a.lock_group(grp);
        st.loaded.as_mut().unwrap().buddy.inflate_free(1000);
        a.publish(grp, &mut st);
    }

    #[test]
    fn a_group_whose_runs_disagree_with_its_count_is_marked_corrupt_and_not_used() {
        let a = four_short_runs();
        assert_eq!(a.free_blocks(), 200);
        inflate(&a, 1);
        // 100 blocks: no run is long enough at the cheap criteria; CR_GOAL_LEN_SLOW walks all
        // four runs and finds 1,000 counted clusters missing.
        let req = Request::new(7, 0, 100).with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC);
        match a.allocate(&req) {
            Err(Error::NoSpace { free, .. }) => assert_eq!(free, 0),
            other => panic!("expected ENOSPC, got {other:?}"),
        }
        let corrupt = a.corrupt_groups();
        assert_eq!(corrupt.len(), 1, "{corrupt:?}");
        assert_eq!(corrupt[0].0, 1);
        assert!(
            corrupt[0].1.contains("1000 free clusters"),
            "{}",
            corrupt[0].1
        );
        // Its blocks left the free count once, none was handed out, and frees into it are
        // refused.
        assert_eq!(a.free_blocks(), 0);
        assert_eq!(a.stats().corrupt_groups, 1);
        assert!(matches!(
            a.free(7, Extent::new(BPG + 10, 1)),
            Err(Error::CorruptGroup { group: 1, .. })
        ));
    }

    #[test]
    fn a_consistent_group_gives_its_best_short_run() {
        // The control: without the inflated count the same request takes a 50-block run.
        let a = four_short_runs();
        let req = Request::new(7, 0, 100).with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC);
        let got = a.allocate(&req).unwrap();
        assert_eq!(got.extent.len, 50);
        assert!(a.corrupt_groups().is_empty());
        a.check_consistency().unwrap();
    }
}
