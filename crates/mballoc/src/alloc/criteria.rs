//! The search driver: the goal try, then the criteria passes CR_POWER2_ALIGNED …
//! CR_ANY_FREE, each choosing the groups to visit (`ext4_mb_regular_allocator`,
//! `ext4_mb_scan_groups` and its linear / p2-aligned / goal-fast / best-avail walkers), and
//! block-bitmap prefetch (`ext4_mb_might_prefetch`, `ext4_mb_prefetch`,
//! `ext4_mb_prefetch_fini`).

use std::sync::atomic::Ordering;

use crate::alloc::allocator::Allocator;
use crate::alloc::context::{Ctx, Ex, Status};
use crate::error::Error;
use crate::group::buddy::{avg_fragment_order, fls};
use crate::group::class_index::{Kind, Walk, WalkSets};
use crate::group::size_class::{Classes, SizeClass, Stage};
use crate::group::state;
use crate::request::{Criterion, Flags};
use crate::stats::LocalStats;
use crate::tunables::{KernelFlavor, Tunables};

impl Allocator {
    /// `ext4_mb_regular_allocator`. On return `ctx.status` is `Found` (and `ctx.b_ex` is taken
    /// from its group's buddy) or the search failed.
    pub(crate) fn regular_allocator(&self, ctx: &mut Ctx) -> Result<(), Error> {
        if ctx.tun.size_classes && ctx.flags.contains(Flags::HINT_DATA) {
            ctx.class = self.request_class(ctx);
            ctx.home = ctx.req.cpu % self.cpus;
        }
        self.find_by_goal(ctx)?;
        if ctx.status == Status::Found || ctx.flags.contains(Flags::HINT_GOAL_ONLY) {
            return Ok(());
        }
        if ctx.class != SizeClass::None {
            // Before the stream-goal swap below: the request's own goal is btrfs's hint.
            ctx.hint = (ctx.g_ex.start >= 0).then(|| (ctx.g_ex.group, ctx.goal_start()));
            ctx.new_run = ctx.tun.size_class_stream_groups && self.starts_new_run(ctx);
        }
        let i = fls(ctx.g_ex.len);
        ctx.two_order = 0;
        if i >= ctx.tun.mb_order2_req
            && i as usize <= self.geo.num_orders()
            && ctx.g_ex.len.is_power_of_two()
        {
            ctx.two_order = i - 1;
        }
        if ctx.flags.contains(Flags::STREAM_ALLOC) {
            ctx.g_ex.group = self
                .stream_goal(ctx.req.owner, ctx.tun)
                .min(self.geo.group_count() - 1);
            ctx.g_ex.start = -1;
            ctx.flags.remove(Flags::HINT_TRY_GOAL);
        }
        let first_cr = if ctx.two_order > 0 {
            Criterion::Power2Aligned
        } else {
            Criterion::GoalLenFast
        };
        ctx.prefetch_ios = 0;
        ctx.prefetch_idle = self.prefetch_idle(ctx.tun);
        ctx.first_err = None;
        if ctx.class != SizeClass::None && self.class_stages(ctx, first_cr)? {
            return self.finish_regular(ctx);
        }
        ctx.cr = first_cr;
        loop {
            self.run_criteria(ctx)?;
            if ctx.b_ex.len > 0
                && ctx.status != Status::Found
                && !ctx.flags.contains(Flags::HINT_FIRST)
            {
                self.try_best_found(ctx);
                if ctx.status != Status::Found {
                    // Lost chunk: someone took it. One last pass taking the first extent found.
                    ctx.stats.bump(|c| &c.lost);
                    ctx.b_ex = Ex::default();
                    ctx.status = Status::Continue;
                    ctx.flags |= Flags::HINT_FIRST;
                    ctx.cr = Criterion::AnyFree;
                    ctx.cr_done = false;
                    continue;
                }
            }
            break;
        }
        if ctx.status == Status::Found && ctx.class != SizeClass::None {
            ctx.stats.bump(|c| &c.class_stage_hits[Stage::Any as usize]);
        }
        self.finish_regular(ctx)
    }

    /// The size-class stages before the kernel's loop (see [`crate::group::size_class`]): each walks
    /// the criteria below CR_BEST_AVAIL_LEN over the groups its filter admits. True = found.
    fn class_stages(&self, ctx: &mut Ctx, first_cr: Criterion) -> Result<bool, Error> {
        let order = if ctx.new_run {
            &Stage::STREAM_ORDER
        } else {
            &Stage::ORDER
        };
        let n = if ctx.tun.size_class_per_cpu { 4 } else { 3 };
        for &stage in &order[..n] {
            if matches!(stage, Stage::Unset | Stage::Empty)
                && self.classless.load(Ordering::Relaxed) == 0
            {
                continue; // every group has a class: nothing for these stages to find
            }
            ctx.stage = Some(stage);
            ctx.cr = first_cr;
            restart(ctx);
            self.run_criteria(ctx)?;
            if ctx.status == Status::Found {
                ctx.stage = None;
                ctx.stats.bump(|c| &c.class_stage_hits[stage as usize]);
                return Ok(true);
            }
        }
        // Nothing of full length in a fitting group: the kernel's loop over every group.
        ctx.stage = None;
        restart(ctx);
        Ok(false)
    }

    /// The request's class: `btrfs_calc_block_group_size_class` of the length asked for, or,
    /// with `size_class_inherit`, the class of the group that holds the file's preceding block.
    fn request_class(&self, ctx: &Ctx) -> SizeClass {
        let own = SizeClass::of_bytes(u64::from(ctx.o_ex.len) << self.geo.bsbits());
        if !ctx.tun.size_class_inherit
            || ctx.req.pleft == 0
            || ctx.req.pleft >= self.geo.blocks_count()
        {
            return own;
        }
        match self.groups[self.geo.locate(ctx.req.pleft).0 as usize].size_class() {
            SizeClass::None => own,
            c => c,
        }
    }

    /// `size_class_stream_groups`: whether this request starts a new run of its file rather
    /// than continuing one in a group of its class: a file's first blocks (no mapped
    /// neighbour on the left), a window that was to continue the file in place but missed its
    /// goal (normalisation set `HINT_TRY_GOAL`), or a request whose goal lies outside its
    /// class's groups. Locality-group requests pack small files together by design and
    /// never do. Called after the goal try, before the stream-goal swap.
    fn starts_new_run(&self, ctx: &Ctx) -> bool {
        if ctx.flags.contains(Flags::HINT_GROUP_ALLOC) {
            return false;
        }
        ctx.req.pleft == 0
            || ctx.flags.contains(Flags::HINT_TRY_GOAL)
            || self.groups[ctx.g_ex.group as usize].size_class() != ctx.class
    }

    /// Counters and prefetch completion at the end of `ext4_mb_regular_allocator`.
    #[inline(always)]
    fn finish_regular(&self, ctx: &mut Ctx) -> Result<(), Error> {
        if ctx.status == Status::Found {
            ctx.stats.bump(|c| &c.cr[ctx.cr.index()].hits);
            if ctx.flags.contains(Flags::STREAM_ALLOC) && ctx.b_ex.group == ctx.g_ex.group {
                ctx.stats.bump(|c| &c.stream_goal_hits);
            }
        }
        if ctx.status == Status::Break {
            ctx.stats.bump(|c| &c.breaks);
        }
        // With every buddy built no group of the window can need one (the walk would only
        // read `NEED_INIT` bits that are all clear): the common case costs one load here.
        if ctx.prefetch_nr > 0 && self.uninit.load(Ordering::Relaxed) != 0 {
            self.prefetch_fini(ctx.prefetch_grp, ctx.prefetch_nr);
        }
        match ctx.first_err.take() {
            Some(e) if ctx.status != Status::Found => Err(e),
            _ => Ok(()),
        }
    }

    /// The `repeat:` loop: one `ext4_mb_scan_groups` per criterion until found or exhausted.
    fn run_criteria(&self, ctx: &mut Ctx) -> Result<(), Error> {
        while !ctx.cr_done {
            // A size-class stage takes only full-length extents found through the indexes.
            if ctx.stage.is_some() && ctx.cr >= Criterion::BestAvailLen {
                break;
            }
            self.scan_groups(ctx)?;
            if ctx.status != Status::Continue {
                break;
            }
        }
        Ok(())
    }

    fn group_limit(&self, ctx: &Ctx) -> u32 {
        let n = self.geo.group_count();
        if ctx.req.extents {
            return n;
        }
        // s_blockfile_groups: indirect-mapped files cannot address blocks ≥ 2^32.
        let limit = ((1u64 << 32).saturating_sub(self.geo.first_data_block())
            / self.geo.blocks_per_group()) as u32;
        n.min(limit.max(1))
    }

    /// `ext4_mb_scan_groups`: one criterion's walk over the groups.
    fn scan_groups(&self, ctx: &mut Ctx) -> Result<(), Error> {
        let ngroups = self.group_limit(ctx);
        let mut start = ctx.g_ex.group;
        if ctx.tun.flavor == KernelFlavor::V6_18Stable && start >= ngroups {
            start = 0;
        }
        ctx.prefetch_grp = start;
        ctx.prefetch_nr = 0;
        let optimize = ctx.tun.mb_optimize_scan
            && ctx.cr < Criterion::GoalLenSlow
            && (ctx.req.extents || ctx.tun.flavor == KernelFlavor::V6_18Stable);
        if !optimize {
            return self.scan_linear(ctx, ngroups, &mut start, ngroups);
        }
        if ctx.tun.order_lists {
            return self.scan_lists(ctx, ngroups, start);
        }
        if ctx.tun.mb_max_linear_groups > 0 {
            self.scan_linear(ctx, ngroups, &mut start, ctx.tun.mb_max_linear_groups)?;
            if ctx.status != Status::Continue {
                return Ok(());
            }
        }
        let end = if ctx.tun.flavor == KernelFlavor::V6_18Stable {
            ngroups
        } else {
            self.geo.group_count()
        };
        let walk = self.index.walk(self.walk_classes(ctx));
        match ctx.cr {
            Criterion::Power2Aligned => self.scan_p2_aligned(ctx, walk, start, end),
            Criterion::GoalLenFast => self.scan_goal_fast(ctx, walk, start, end),
            Criterion::BestAvailLen => self.scan_best_avail(ctx, walk, start, end),
            _ => Ok(()),
        }
    }

    /// `ext4_mb_scan_groups_linear`: `count` groups from `start`, wrapping with
    /// "g + 1 ≥ ngroups → 0"; a full pass that finds nothing advances the criterion.
    ///
    /// A `count` above the group count (`mb_max_linear_groups` is any u32, as in sysfs) is one
    /// full pass here. The kernel would go round again, revisiting groups that already failed
    /// at this criterion (with 2^32 − 1, for minutes per request), then walk the indexes at
    /// the same criterion, which hold no group the pass did not visit, and advance.
    fn scan_linear(
        &self,
        ctx: &mut Ctx,
        ngroups: u32,
        start: &mut u32,
        count: u32,
    ) -> Result<(), Error> {
        let count = count.min(ngroups);
        let cr = ctx.cr;
        let mut g = *start;
        for _ in 0..count {
            self.scan_group(ctx, g)?;
            if ctx.status != Status::Continue {
                return Ok(());
            }
            g = if g + 1 >= ngroups { 0 } else { g + 1 };
        }
        *start = g;
        if count == ngroups {
            ctx.stats.bump(|c| &c.cr[cr.index()].useless_loops);
            self.advance(ctx);
        }
        Ok(())
    }

    /// `ext4_mb_regular_allocator`'s loop before 6.17, one criterion with `mb_optimize_scan`
    /// (`order_lists`): the goal group first, then before each further visit
    /// `ext4_mb_choose_next_group`: the `mb_max_linear_groups` groups after it, then the
    /// lists' first good group. At most `ngroups` visits, then the next criterion; a list
    /// walk that finds nothing names the next criterion itself (`*new_cr`, `goto repeat`),
    /// whose pass starts at the goal group again. Unlike the xarray walks a pass may visit
    /// one group many times: the lists' head until it stops being good.
    fn scan_lists(&self, ctx: &mut Ctx, ngroups: u32, start: u32) -> Result<(), Error> {
        let cr = ctx.cr;
        let mut g = start;
        let mut linear = ctx.tun.mb_max_linear_groups;
        for i in 0..ngroups {
            if i > 0 {
                if linear > 0 {
                    g = if g + 1 >= ngroups { 0 } else { g + 1 };
                    linear -= 1;
                } else {
                    match self.choose_from_lists(ctx) {
                        Some(next) => g = next,
                        None => return Ok(()),
                    }
                }
            }
            self.scan_group(ctx, g)?;
            if ctx.status != Status::Continue {
                return Ok(());
            }
        }
        ctx.stats.bump(|c| &c.cr[cr.index()].useless_loops);
        if cr == Criterion::BestAvailLen {
            ctx.g_ex.len = ctx.orig_goal_len;
        }
        self.advance(ctx);
        Ok(())
    }

    /// `ext4_mb_choose_next_group_p2_aligned`, `_goal_fast` and `_best_avail` (before 6.17):
    /// the first good group of the lists, orders ascending from the request's (best_avail:
    /// goal lengths descending, the length found kept). None found: the criterion moves on
    /// (`*new_cr`), best_avail's length back to the original goal's.
    fn choose_from_lists(&self, ctx: &mut Ctx) -> Option<u32> {
        let num_orders = self.geo.num_orders();
        match ctx.cr {
            Criterion::Power2Aligned => {
                for order in ctx.two_order as usize..num_orders {
                    if let Some(g) = self.first_in_list(ctx, Kind::Largest, order) {
                        return Some(g);
                    }
                }
                ctx.cr = Criterion::GoalLenFast;
            }
            Criterion::GoalLenFast => {
                for order in avg_fragment_order(ctx.g_ex.len, num_orders)..num_orders {
                    if let Some(g) = self.first_in_list(ctx, Kind::Avg, order) {
                        return Some(g);
                    }
                }
                ctx.cr = if ctx.flags.contains(Flags::HINT_DATA) {
                    Criterion::BestAvailLen
                } else {
                    Criterion::GoalLenSlow
                };
            }
            Criterion::BestAvailLen => {
                let (order, min_order) = self.best_avail_orders(ctx);
                let mut i = order;
                while i >= min_order {
                    ctx.g_ex.len = self.best_avail_len(ctx, i);
                    let frag = avg_fragment_order(ctx.g_ex.len, num_orders);
                    if let Some(g) = self.first_in_list(ctx, Kind::Avg, frag) {
                        return Some(g);
                    }
                    i -= 1;
                }
                ctx.g_ex.len = ctx.orig_goal_len;
                ctx.cr = Criterion::GoalLenSlow;
            }
            // should_optimize_scan is false from CR_GOAL_LEN_SLOW on: never asked.
            _ => self.advance(ctx),
        }
        None
    }

    /// One list of `kind` at `order`: `list_empty` read without the lock, then under its
    /// `read_lock` the members from the head (the group longest at this order first); with
    /// `try_lock_groups` a group whose lock is held is passed over (`spin_is_locked`, the
    /// seed 001 patch's test in the walks); the first that `ext4_mb_good_group` takes.
    fn first_in_list(&self, ctx: &mut Ctx, kind: Kind, order: usize) -> Option<u32> {
        let sets = self
            .index
            .order_sets(kind, order, self.index.walk(Classes::ALL));
        let end = self.geo.group_count();
        let lists = &self.index.lists;
        // The kernel walks linked entries from the head and reads no set: the members are
        // gathered unobserved, and the walk below reads only the entries it reaches.
        let members = crate::sync::unobserved(|| {
            let mut members = Vec::new();
            let mut from = 0;
            while let Some(g) = sets.next(from, end) {
                members.push(g);
                from = g + 1;
            }
            members
        });
        if members.is_empty() {
            return None;
        }
        lists.touch(kind, order);
        // Each join time read once: other CPUs move groups while this one sorts.
        let mut joined: Vec<(u64, u32)> = members
            .into_iter()
            .map(|g| (lists.joined(kind, g), g))
            .collect();
        joined.sort_unstable();
        let cr = ctx.cr;
        let mut found = None;
        for (_, g) in joined {
            ctx.stats.bump(|c| &c.cr[cr.index()].groups_considered);
            let grp = &self.groups[g as usize];
            if ctx.tun.try_lock_groups && grp.lock.is_locked() {
                continue;
            }
            if self.good_group(ctx, grp, cr) {
                found = Some(g);
                break;
            }
        }
        lists.touch(kind, order);
        found
    }

    /// CR_BEST_AVAIL_LEN's range of goal orders: from the goal length's down to at most
    /// `mb_best_avail_max_trim_order` below it, never below the stripe or the original
    /// request (`ext4_mb_scan_groups_best_avail`, and `_choose_next_group_best_avail` before).
    fn best_avail_orders(&self, ctx: &Ctx) -> (i64, i64) {
        let num_orders = self.geo.num_orders() as i64;
        let stripe = i64::from(ctx.tun.stripe);
        let mut order = i64::from(fls(ctx.g_ex.len)) - 1;
        if order - 1 > num_orders {
            order = num_orders;
        }
        let mut min_order = (order - i64::from(ctx.tun.mb_best_avail_max_trim_order)).max(0);
        if stripe > 0 && (1i64 << min_order) < stripe {
            min_order = i64::from(fls(stripe as u32)) - 1;
        }
        if (1i64 << min_order.min(62)) < i64::from(ctx.o_ex.len) {
            min_order = i64::from(fls(ctx.o_ex.len));
        }
        (order, min_order)
    }

    /// CR_BEST_AVAIL_LEN's goal length at order `i`, rounded up to the stripe.
    fn best_avail_len(&self, ctx: &Ctx, i: i64) -> u32 {
        let stripe = i64::from(ctx.tun.stripe);
        let mut len = 1i64 << i.min(31);
        if stripe > 0 {
            len = (len + stripe - 1) / stripe * stripe;
        }
        len.min(i64::from(u32::MAX)) as u32
    }

    /// Next criterion after a failed full pass; past CR_ANY_FREE the search is over.
    fn advance(&self, ctx: &mut Ctx) {
        match ctx.cr.next() {
            Some(n) => ctx.cr = n,
            None => ctx.cr_done = true,
        }
    }

    /// One order of index `kind` as `walk` reads it. The kernel's case (the one class in use
    /// is walked) reads its set alone, through code made for one set, as before the indexes
    /// were split by class.
    #[inline(always)]
    fn scan_order(
        &self,
        ctx: &mut Ctx,
        kind: Kind,
        order: usize,
        walk: Walk,
        start: u32,
        end: u32,
    ) -> Result<(), Error> {
        let sets = self.index.order_sets(kind, order, walk);
        // `ext4_mb_scan_groups_largest_free_order_range` and `_avg_frag_order_range` skip an
        // empty order with `xa_empty`: one read of the xarray's head, a line that changes only
        // when the xarray empties or fills. The sets have no such word, so they are asked
        // unobserved, as the lists' `list_empty` is ([`Self::first_in_list`]): a simulator's
        // point prices the kernel's average work between two shared accesses, which this read
        // is not. A walk that passes over other classes' groups still runs: it may owe their
        // prefetch step.
        if !sets.passes_over() && crate::sync::unobserved(|| sets.is_empty()) {
            return Ok(());
        }
        match sets.alone() {
            Some(set) => self.scan_index_range(ctx, set, start, end),
            None => self.scan_index_range(ctx, &sets, start, end),
        }
    }

    /// `ext4_mb_scan_groups_xa_range`: groups of one index order in `[start, end)`, ascending.
    /// Reads the sets of the classes the current stage admits (see [`crate::group::class_index`]):
    /// the groups of the other classes are not visited (nor counted in `groups_considered`),
    /// only their prefetch point is honoured ([`Self::prefetch_passed`]). A class stage
    /// passes over the groups too fragmented for the goal the same way
    /// ([`Self::stage_passes_unfit`]).
    fn scan_index_range(
        &self,
        ctx: &mut Ctx,
        sets: &impl WalkSets,
        start: u32,
        end: u32,
    ) -> Result<(), Error> {
        if start >= end || end > self.geo.group_count() {
            return Ok(());
        }
        // With the prefetch steps idle a group the stage passes over costs nothing but its
        // test, done inside the set walk; the group found has passed it (if another CPU has
        // changed its counts since, the visit's own checks turn it down).
        let quick = ctx.prefetch_idle && self.stage_filters_unfit(ctx);
        let len = ctx.g_ex.len;
        let mut g = start;
        loop {
            let next = if quick {
                sets.next_where(g, end, |x| self.fits_idle(x, len))
            } else {
                sets.next(g, end)
            };
            let Some(found) = next else { break };
            self.prefetch_passed(ctx, sets, g, found);
            if !quick && self.stage_passes_unfit(ctx, found) {
                // The visit would have started with the prefetch step and ended in a no.
                self.might_prefetch(ctx, found);
                g = found + 1;
                continue;
            }
            ctx.stats.bump(|c| &c.cr[ctx.cr.index()].groups_considered);
            self.scan_group(ctx, found)?;
            if ctx.status != Status::Continue {
                return Ok(());
            }
            g = found + 1;
        }
        self.prefetch_passed(ctx, sets, g, end);
        Ok(())
    }

    /// A size-class stage (`proposed`) walks past the groups whose lock-free counts show an
    /// average free fragment below the goal ([`Self::unfit_counts`]), as it walks past the
    /// groups of other classes: they are neither visited nor counted in `groups_considered`
    /// (nor met by the busy and class checks), only their prefetch step is taken. A visit
    /// would have turned them down too, so placement is unchanged; what the stage saves is a
    /// visit per rejected group: size classes pack groups until their average fragment sits
    /// just under the requests, and churn's stages met about five such groups per request.
    /// The kernel's walk (no stage) visits and counts every group, as ext4 does.
    #[inline(always)]
    fn stage_passes_unfit(&self, ctx: &Ctx, g: u32) -> bool {
        self.stage_filters_unfit(ctx) && self.unfit_counts(ctx, &self.groups[g as usize])
    }

    /// Whether the walk is a size-class stage's, which passes over unfit groups.
    #[inline(always)]
    fn stage_filters_unfit(&self, ctx: &Ctx) -> bool {
        #[cfg(test)]
        if self.walk_all_classes {
            return false;
        }
        ctx.stage.is_some()
            && matches!(ctx.cr, Criterion::GoalLenFast | Criterion::BestAvailLen)
            && !ctx.flags.contains(Flags::STRICT_CHECK)
    }

    /// [`Self::stage_passes_unfit`]'s test in reverse, once the prefetch steps are idle: then
    /// every buddy is built (no `NEED_INIT` left to send a group to the full checks), and a
    /// passed-over group has no prefetch step to take, so the set walk can test it in place.
    #[inline(always)]
    fn fits_idle(&self, g: u32, len: u32) -> bool {
        let grp = &self.groups[g as usize];
        crate::alloc::scan::fragments_fit(grp.bb_free(), grp.bb_fragments(), len)
    }

    /// The classes whose index sets the current stage walks; the kernel's walk takes them all.
    fn walk_classes(&self, ctx: &Ctx) -> Classes {
        #[cfg(test)]
        if self.walk_all_classes {
            return Classes::ALL;
        }
        ctx.stage.map_or(Classes::ALL, |s| s.classes(ctx.class))
    }

    /// A walk of one index over every class would have visited the groups of other classes
    /// in `[from, to)`, and every visit starts with `ext4_mb_might_prefetch`, which acts only
    /// at the prefetch point: run it where the walk passed over that point. The bitmap reads
    /// (lazy loading, and so placement) stay as they were with every group visited. Always
    /// inline: it runs before every visit and mostly returns at once; left out of line (as
    /// LLVM did once the idle test joined it) it cost `proposed` 3 % more instructions on
    /// the churn.
    #[inline(always)]
    fn prefetch_passed(&self, ctx: &mut Ctx, sets: &impl WalkSets, from: u32, to: u32) {
        if sets.passes_over() && !ctx.prefetch_idle && (from..to).contains(&ctx.prefetch_grp) {
            self.prefetch_passed_point(ctx, sets, from, to);
        }
    }

    /// [`Self::prefetch_passed`] once the prefetch point lies in the range: prefetch while
    /// the point is a passed-over group, as the visits in ascending order would.
    fn prefetch_passed_point(&self, ctx: &mut Ctx, sets: &impl WalkSets, mut from: u32, to: u32) {
        loop {
            let p = ctx.prefetch_grp;
            if p < from || p >= to || !sets.passed(p) {
                return;
            }
            self.might_prefetch(ctx, p);
            if ctx.prefetch_grp == p {
                return;
            }
            from = p + 1;
        }
    }

    /// Orders `first..` of index `kind`, each over `[start, end)` and then `[0, start)`, as
    /// the kernel's order loops walk them. True = the walk ended the criterion's search.
    fn scan_orders(
        &self,
        ctx: &mut Ctx,
        kind: Kind,
        first: usize,
        walk: Walk,
        start: u32,
        end: u32,
    ) -> Result<bool, Error> {
        for (s, e) in two_passes(start, end) {
            for order in first..self.geo.num_orders() {
                self.scan_order(ctx, kind, order, walk, s, e)?;
                if ctx.status != Status::Continue {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// `ext4_mb_scan_groups_p2_aligned`: largest-free-order index, orders ascending from
    /// `ac_2order`, goal..end then 0..goal.
    fn scan_p2_aligned(
        &self,
        ctx: &mut Ctx,
        walk: Walk,
        start: u32,
        end: u32,
    ) -> Result<(), Error> {
        let first = ctx.two_order as usize;
        if self.scan_orders(ctx, Kind::Largest, first, walk, start, end)? {
            return Ok(());
        }
        ctx.stats.bump(|c| &c.cr[ctx.cr.index()].useless_loops);
        ctx.cr = Criterion::GoalLenFast;
        Ok(())
    }

    /// `ext4_mb_scan_groups_goal_fast`: average-fragment index from the goal length's order.
    fn scan_goal_fast(&self, ctx: &mut Ctx, walk: Walk, start: u32, end: u32) -> Result<(), Error> {
        let first = avg_fragment_order(ctx.g_ex.len, self.geo.num_orders());
        if self.scan_orders(ctx, Kind::Avg, first, walk, start, end)? {
            return Ok(());
        }
        ctx.stats.bump(|c| &c.cr[ctx.cr.index()].useless_loops);
        ctx.cr = if ctx.flags.contains(Flags::HINT_DATA) {
            Criterion::BestAvailLen
        } else {
            Criterion::GoalLenSlow
        };
        Ok(())
    }

    /// `ext4_mb_scan_groups_best_avail`: trim the goal length by up to
    /// `mb_best_avail_max_trim_order` orders (never below the original request), one
    /// average-fragment order per length. The range of lengths is computed once: the kernel's
    /// `wrap_around` label comes after it, so the pass over the groups before the goal tries
    /// the same lengths again, from the longest (a kernel capture of a nearly full,
    /// fragmented filesystem showed it: recomputed from the trimmed length, the second pass
    /// trimmed further and found extents the kernel never considered).
    fn scan_best_avail(
        &self,
        ctx: &mut Ctx,
        walk: Walk,
        start: u32,
        end: u32,
    ) -> Result<(), Error> {
        let (order, min_order) = self.best_avail_orders(ctx);
        for (s, e) in two_passes(start, end) {
            let mut i = order;
            while i >= min_order {
                ctx.g_ex.len = self.best_avail_len(ctx, i);
                let frag = avg_fragment_order(ctx.g_ex.len, self.geo.num_orders());
                self.scan_order(ctx, Kind::Avg, frag, walk, s, e)?;
                if ctx.status != Status::Continue {
                    return Ok(());
                }
                i -= 1;
            }
        }
        ctx.g_ex.len = ctx.orig_goal_len;
        ctx.stats.bump(|c| &c.cr[ctx.cr.index()].useless_loops);
        ctx.cr = Criterion::GoalLenSlow;
        Ok(())
    }

    /// `ext4_mb_might_prefetch`: when the scan reaches the prefetch point, read ahead the
    /// bitmaps of the rest of the flex group. Always inline: every visited group calls it and
    /// it returns at once but at the prefetch point; with a second caller
    /// ([`Self::prefetch_passed_point`]) LLVM stopped inlining it into `scan_group`.
    #[inline(always)]
    pub(crate) fn might_prefetch(&self, ctx: &mut Ctx, g: u32) {
        if g != ctx.prefetch_grp
            || ctx.prefetch_idle
            || !(ctx.cr.expensive() || ctx.prefetch_ios < ctx.tun.mb_prefetch_limit)
        {
            return;
        }
        let mut nr = ctx.tun.mb_prefetch;
        let flex = self.geo.flex_bg_size();
        if flex > 1 {
            nr = nr.min(flex - (g & (flex - 1)));
        }
        ctx.prefetch_nr = nr;
        ctx.prefetch_grp = self.prefetch(
            ctx.stats,
            g,
            nr,
            &mut ctx.prefetch_ios,
            ctx.tun.prefetch_test_before_set,
        );
    }

    /// `ext4_mb_prefetch`: for `nr` groups from `g`, read the bitmap of every group not
    /// prefetched before, still uninitialised and with free blocks. Returns the group after.
    /// Always inline, into [`Self::might_prefetch`]: with that inlined into two callers,
    /// LLVM left this out of line, about 20 more instructions per request on the churn
    /// benchmark.
    #[inline(always)]
    fn prefetch(
        &self,
        stats: LocalStats,
        mut g: u32,
        nr: u32,
        ios: &mut u32,
        test_before_set: bool,
    ) -> u32 {
        let n = self.geo.group_count();
        if !test_before_set {
            // 6.18 looks the descriptor up first, for every group of the window.
            stats.add(|c| &c.prefetch_desc_lookups, u64::from(nr));
        }
        for _ in 0..nr {
            let bits = self.bits(g);
            // EXT4_MB_GRP_TEST_AND_SET_READ, on the group's own state word: 6.18 always sets
            // with an atomic RMW; seed 003 tests first, so a mark set long ago costs a plain
            // load.
            let already = (test_before_set && bits.walk_test(state::BBITMAP_READ))
                || bits.walk_test_and_set(state::BBITMAP_READ);
            if !already && bits.need_init() {
                if test_before_set {
                    stats.bump(|c| &c.prefetch_desc_lookups);
                }
                // Submit the read and go on; the buddy is built later (prefetch_fini or on
                // demand) from the finished buffer.
                if self.groups[g as usize].bb_free() > 0 && self.readahead.submit(g) {
                    stats.bump(|c| &c.bitmap_loads);
                    stats.bump(|c| &c.prefetch_loads);
                    // A BLOCK_UNINIT bitmap is computed at once: its buffer is up to date,
                    // which ext4_mb_prefetch does not count as an I/O.
                    if !self.bits(g).has(state::BLOCK_UNINIT) {
                        stats.bump(|c| &c.prefetch_ios);
                        *ios += 1;
                    }
                }
            }
            g = if g + 1 >= n { 0 } else { g + 1 };
        }
        g
    }

    /// Whether this request's prefetch steps can do nothing at all. A window reads only
    /// groups that still need their buddy built, and counts only those; once none is left
    /// (`uninit` is 0, and `NEED_INIT` is never set again) a window can only set read marks,
    /// which nothing but later windows look at, and the completion has nothing to build. With
    /// the marks tested before they are set (seed 003) the walks then skip the prefetch point's
    /// bookkeeping altogether: the same reads, counts and placements
    /// (`walk_shortcuts_change_nothing`). (`uninit` drops just before the last loader clears
    /// its group's `NEED_INIT`, under that group's lock: a window skipped then would only have
    /// read ahead a bitmap that is being read.) 6.18's own walk keeps setting every mark of
    /// the window with an atomic RMW, the shared-line writes seed 003 is about, so it keeps
    /// them. Under a virtual-CPU hook the walks are never skipped: the kernel's seed-003 walk
    /// still loops over its window, testing each mark, and that loop is work a simulation
    /// has to charge (`crate::sync::walk_step`).
    pub(crate) fn prefetch_idle(&self, tun: &Tunables) -> bool {
        tun.prefetch_test_before_set
            && !self.no_walk_shortcuts()
            && !crate::sync::virtual_time()
            && self.uninit.load(Ordering::Relaxed) == 0
    }

    /// See [`Allocator::no_walk_shortcuts`] (always false outside tests).
    #[inline(always)]
    pub(crate) fn no_walk_shortcuts(&self) -> bool {
        #[cfg(test)]
        return self.no_walk_shortcuts;
        #[cfg(not(test))]
        false
    }

    /// `ext4_mb_prefetch_fini`: initialise the groups of the last window (walking back).
    /// The caller skips it once every buddy is built.
    fn prefetch_fini(&self, mut g: u32, nr: u32) {
        let n = self.geo.group_count();
        for _ in 0..nr {
            g = if g == 0 { n - 1 } else { g - 1 };
            let grp = &self.groups[g as usize];
            if self.bits(g).need_init() && grp.bb_free() > 0 && self.load_group(g).is_err() {
                break;
            }
        }
    }
}

/// A fresh search: what one stage found (and failed to use) does not carry into the next.
fn restart(ctx: &mut Ctx) {
    ctx.cr_done = false;
    ctx.status = Status::Continue;
    ctx.found = 0;
    ctx.b_ex = Ex::default();
}

/// `[start, end)` then, if `start > 0`, `[0, start)`.
fn two_passes(start: u32, end: u32) -> impl Iterator<Item = (u32, u32)> {
    std::iter::once((start, end)).chain((start > 0).then_some((0, start)))
}

/// The per-class index walks against the walk they replace (one walk over every class, the
/// class filter applied group by group in `class_admits`): the same request sequence through
/// two allocators under the `proposed` tunables, one of each, must place every extent alike.
#[cfg(all(test, not(loom)))]
mod tests {
    use crate::alloc::allocator::Allocator;
    use crate::error::Error;
    use crate::geometry::Geometry;
    use crate::group::class_index::Kind;
    use crate::group::size_class::SizeClass;
    use crate::policy::Policy;
    use crate::request::{Criterion, Extent, Flags, Request};
    use crate::stats::StatsSnapshot;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Alloc {
            owner: u64,
            len: u32,
            kind: u8,
            cpu: u32,
            goal: u64,
        },
        Free {
            pick: usize,
            trim: u32,
        },
        Commit,
        Discard {
            owner: u64,
        },
    }

    const GROUPS: u64 = 24;
    const BPG: u32 = 8192;

    fn op() -> impl Strategy<Value = Op> {
        let blocks = GROUPS * u64::from(BPG);
        prop_oneof![
            8 => (1u64..16, 1u32..4000, 0u8..4, 0u32..2, 0..blocks).prop_map(|(owner, len, kind, cpu, goal)| Op::Alloc { owner, len, kind, cpu, goal }),
            4 => (any::<usize>(), 0u32..8).prop_map(|(pick, trim)| Op::Free { pick, trim }),
            1 => Just(Op::Commit),
            1 => (1u64..16).prop_map(|owner| Op::Discard { owner }),
        ]
    }

    /// Small files (locality groups), files with inode preallocation, data without
    /// preallocation and metadata: every class, and requests without one.
    fn request(owner: u64, logical: u32, len: u32, kind: u8, cpu: u32, goal: u64) -> Request {
        let r = Request::new(owner, logical, len)
            .with_cpu(cpu)
            .with_goal(goal);
        match kind {
            0 => Request::new(owner, logical, len % 8 + 1)
                .with_cpu(cpu)
                .with_goal(goal)
                .with_i_size(u64::from(logical + len % 8 + 1) * 4096),
            1 => r.with_i_size(u64::from(logical + len) * 4096 + 12_345),
            2 => r.with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC),
            _ => r.with_flags(Flags(0)),
        }
    }

    /// `policy` with the optimised scan, loading bitmaps lazily with prefetch reads inline
    /// (deterministic), so that the walks' prefetch points matter too.
    fn allocator(policy: Policy, walk_all_classes: bool, no_walk_shortcuts: bool) -> Allocator {
        let geo = Geometry::new(4096, BPG, GROUPS * u64::from(BPG) - 1000, 0, 8).unwrap();
        let mut t = policy.tunables(&geo, 2);
        t.mb_optimize_scan = true;
        let mut a = Allocator::builder(geo)
            .used(&[(0, 300), (5 * u64::from(BPG) + 77, 3000)])
            .tunables(t)
            .cpus(2)
            .lazy(true)
            .prefetch_threads(0)
            .build()
            .unwrap();
        a.walk_all_classes = walk_all_classes;
        a.no_walk_shortcuts = no_walk_shortcuts;
        a
    }

    /// The counters, less those that count the walk itself (groups reached, and rejected).
    fn placement_stats(a: &Allocator) -> StatsSnapshot {
        let mut s = a.stats();
        for cr in s.cr.iter_mut() {
            cr[1] = 0;
        }
        s.class_skips = 0;
        s
    }

    /// Runs `ops` on both allocators: same answers, same blocks, same indexes, and the same
    /// counters; with `exact` also those that count the walk itself.
    fn run(old: Allocator, new: Allocator, ops: Vec<Op>, exact: bool) -> Result<(), TestCaseError> {
        let mut live: Vec<(u64, Extent)> = Vec::new();
        for (logical, op) in (0u32..).step_by(4096).zip(ops) {
            match op {
                Op::Alloc {
                    owner,
                    len,
                    kind,
                    cpu,
                    goal,
                } => {
                    let req = request(owner, logical, len, kind, cpu, goal);
                    let (a, b) = (old.allocate(&req), new.allocate(&req));
                    prop_assert_eq!(format!("{a:?}"), format!("{b:?}"), "{:?}", req);
                    if let Ok(got) = b {
                        live.push((owner, got.extent));
                    }
                }
                Op::Free { pick, trim } if !live.is_empty() => {
                    let (owner, e) = live.swap_remove(pick % live.len());
                    let e = if trim > 0 && e.len > trim {
                        live.push((owner, Extent::new(e.start, e.len - trim)));
                        Extent::new(e.start + u64::from(e.len - trim), trim)
                    } else {
                        e
                    };
                    prop_assert_eq!(old.free(owner, e).is_ok(), new.free(owner, e).is_ok());
                }
                Op::Free { .. } => {}
                Op::Commit => {
                    let (a, b): (Result<u64, Error>, _) = (old.commit(), new.commit());
                    prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
                }
                Op::Discard { owner } => prop_assert_eq!(
                    old.discard_preallocations(owner),
                    new.discard_preallocations(owner)
                ),
            }
        }
        if exact {
            prop_assert_eq!(old.stats(), new.stats());
        } else {
            prop_assert_eq!(placement_stats(&old), placement_stats(&new));
            prop_assert!(new.stats().class_skips <= old.stats().class_skips);
        }
        prop_assert_eq!(old.index_counts(), new.index_counts());
        prop_assert_eq!(old.groups().unwrap(), new.groups().unwrap());
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
        #[test]
        fn class_walks_place_as_the_filtered_walk(ops in proptest::collection::vec(op(), 1..200)) {
            let p = Policy::Proposed;
            run(allocator(p, true, false), allocator(p, false, false), ops, false)?;
        }

        /// The walks' shortcuts (groups rejected on their lock-free counts, prefetch windows
        /// read whole) change nothing, not even a counter, under the kernel's policy and ours.
        #[test]
        fn walk_shortcuts_change_nothing(ops in proptest::collection::vec(op(), 1..200), proposed in any::<bool>()) {
            let p = if proposed { Policy::Proposed } else { Policy::Linux618 };
            run(allocator(p, false, true), allocator(p, false, false), ops, true)?;
        }
    }

    /// The prefetch steps go idle only with the marks tested first, and only once every
    /// group's buddy is built; 6.18's test-and-set walk never does.
    #[test]
    fn prefetch_goes_idle_once_every_buddy_is_built() {
        for (policy, can_idle) in [(Policy::Proposed, true), (Policy::Linux618, false)] {
            let a = allocator(policy, false, false);
            assert!(
                !a.prefetch_idle(&a.tun.load()),
                "{policy:?} with unbuilt groups"
            );
            for g in 0..GROUPS as u32 - 1 {
                a.load_group(g).unwrap();
            }
            assert!(
                !a.prefetch_idle(&a.tun.load()),
                "{policy:?}: one group left"
            );
            a.load_group(GROUPS as u32 - 1).unwrap();
            assert_eq!(a.prefetch_idle(&a.tun.load()), can_idle, "{policy:?}");
        }
    }

    /// Every group free only in 64-block runs, so a 100-block request fails the cheap
    /// criteria everywhere and each linear pass goes all the way round.
    fn striped(linear: u32) -> Allocator {
        let geo = Geometry::new(4096, BPG, GROUPS * u64::from(BPG), 0, 8).unwrap();
        let used: Vec<(u64, u64)> = (0..geo.blocks_count())
            .step_by(128)
            .map(|b| (b, 64))
            .collect();
        let mut t = Policy::Linux618.tunables(&geo, 2);
        t.mb_optimize_scan = true;
        t.mb_max_linear_groups = linear;
        Allocator::builder(geo)
            .used(&used)
            .tunables(t)
            .cpus(2)
            .build()
            .unwrap()
    }

    #[test]
    fn a_linear_count_past_the_group_count_is_one_full_pass() {
        // With mb_max_linear_groups = 2^32 - 1 each failing criterion once made 2^32 group
        // visits (minutes per request); now it is one pass round the groups.
        let place = |a: &Allocator| -> Vec<Extent> {
            (0..6u64)
                .map(|i| {
                    let req = Request::new(7, 0, 100)
                        .with_goal(i * 3 * u64::from(BPG) + 5)
                        .with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC);
                    a.allocate(&req).unwrap().extent
                })
                .collect()
        };
        let full = striped(GROUPS as u32);
        let huge = striped(u32::MAX);
        let got = place(&huge);
        assert_eq!(got, place(&full));
        // Each request went once round all the groups at CR_GOAL_LEN_FAST (the cheap
        // criterion really failed everywhere), then took a 64-block run at CR_GOAL_LEN_SLOW.
        assert!(got.iter().all(|e| e.len == 64), "{got:?}");
        let cr = huge.stats().cr;
        assert_eq!(cr[1][1], 6 * GROUPS, "{cr:?}");
        assert_eq!(cr[3][0], 6, "{cr:?}");
    }

    /// CR_BEST_AVAIL_LEN's pass over the groups before the goal tries the lengths of the
    /// first pass again (`ext4_mb_scan_groups_best_avail`: its `wrap_around` label follows
    /// the order range). Group 2, before the stream goal, is free only in 40-block runs;
    /// group 13, the goal, in 8-block runs. The 512-block goal (a 2 MiB normalised window)
    /// may be trimmed to 64 at the least, which neither group's average run reaches, so the
    /// search ends at CR_GOAL_LEN_SLOW with the goal length restored. Recomputing the range
    /// from the trimmed 64 would trim on to 32 and take group 2 at CR_BEST_AVAIL_LEN (what a
    /// kernel capture of a nearly full filesystem caught).
    #[test]
    fn best_avail_wraps_around_with_the_same_lengths() {
        let geo = Geometry::new(4096, BPG, GROUPS * u64::from(BPG), 0, 8).unwrap();
        let runs = |g: u64, run: u64, n: u64| -> Vec<(u64, u64)> {
            (0..n)
                .map(|i| (g * u64::from(BPG) + i * (run + 1), run))
                .collect()
        };
        let mut used = Vec::new();
        let mut at = 0;
        for (s, n) in runs(13, 8, 300) {
            used.push((at, s - at));
            at = s + n;
        }
        used.push((at, geo.blocks_count() - at));
        let a = optimized(geo, &used, false);
        // A first stream request finds group 13, the only one with room, and leaves the
        // stream goal of its slot (owners 9 and 11 share it: two goals) there.
        let file = |owner: u64| Request::new(owner, 0, 1).with_i_size(4 << 20);
        let first = a.allocate(&file(9)).unwrap();
        assert_eq!(first.found.group, 13, "{first:?}");
        // Then group 2 gets its 40-block runs.
        for (s, n) in runs(2, 40, 20) {
            a.free(
                0,
                Extent {
                    start: s,
                    len: n as u32,
                },
            )
            .unwrap();
        }
        a.commit().unwrap();
        let got = a.allocate(&file(11)).unwrap();
        assert_eq!(
            got.criterion,
            crate::request::Criterion::GoalLenSlow,
            "{got:?}"
        );
        assert_eq!(got.goal.len, 512, "the goal length is restored: {got:?}");
        assert_eq!(got.found.group, 13, "{got:?}");
    }

    /// A fully built linux-6.18 allocator on `used` with the optimised scan, no linear groups
    /// first, and `order_lists` as given.
    fn optimized(geo: Geometry, used: &[(u64, u64)], order_lists: bool) -> Allocator {
        let mut t = Policy::Linux618.tunables(&geo, 2);
        t.mb_optimize_scan = true;
        t.mb_max_linear_groups = 0;
        t.order_lists = order_lists;
        Allocator::builder(geo)
            .used(used)
            .tunables(t)
            .cpus(2)
            .build()
            .unwrap()
    }

    /// An `optimized` allocator whose only free space is one 128-block run at the start of
    /// each group of `groups` (ascending).
    fn free_runs_of_128(groups: &[u64], order_lists: bool) -> Allocator {
        let bpg = u64::from(BPG);
        let geo = Geometry::new(4096, BPG, GROUPS * bpg, 0, 8).unwrap();
        let mut used = Vec::new();
        let mut at = 0;
        for &g in groups {
            used.push((at, g * bpg - at));
            at = g * bpg + 128;
        }
        used.push((at, geo.blocks_count() - at));
        optimized(geo, &used, order_lists)
    }

    /// A data request of `len` blocks aimed at `goal`, without preallocation.
    fn data(owner: u64, len: u32, goal: u64) -> Request {
        Request::new(owner, 0, len)
            .with_goal(goal)
            .with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC)
    }

    /// Before 6.17 (`order_lists`) the walk takes the group that has been longest at its
    /// largest free order (the head of that order's list), where 6.17's xarray walk takes
    /// the first one at or after the goal group. Groups 3 and 10 each have one free
    /// 128-block run (order 7), everything else is used; group 3 leaves order 7 and comes
    /// back (64 blocks taken, then freed and committed), so its list reads [10, 3]. A
    /// request of 8 blocks with its goal in group 2: the xarrays give group 3, the lists 10.
    #[test]
    fn lists_give_the_group_longest_at_its_order_not_the_next_after_the_goal() {
        let bpg = u64::from(BPG);
        let place = |order_lists: bool| {
            let a = free_runs_of_128(&[3, 10], order_lists);
            let half = a.allocate(&data(1, 64, 3 * bpg)).unwrap();
            assert_eq!(half.extent.start, 3 * bpg, "{half:?}");
            a.free(1, half.extent).unwrap();
            a.commit().unwrap();
            let got = a.allocate(&data(2, 8, 2 * bpg + 5)).unwrap();
            assert_eq!(
                got.criterion,
                crate::request::Criterion::Power2Aligned,
                "{got:?}"
            );
            got.found.group
        };
        assert_eq!(place(false), 3, "xarrays: the first group after the goal");
        assert_eq!(place(true), 10, "lists: the head of order 7's list");
    }

    /// Before 6.17 a group that filled up stayed in the average-fragment list of its last
    /// order ("zombie groups", fixed by "ext4: fix zombie groups in average fragment size
    /// lists"): walks of that list pass over it, and choose as before. Group 10 has one free
    /// 128-block run (average-fragment order 6), and group 3 either the same run, then filled,
    /// or nothing from the start. A 6-block request (not a power of two: the
    /// average-fragment walk) aimed at full group 2 lands in group 10 every time; the lists
    /// consider one group more when group 3 filled up, the xarrays none.
    #[test]
    fn a_full_group_stays_in_its_last_average_fragment_list_before_6_17() {
        let bpg = u64::from(BPG);
        let run = |order_lists: bool, filled: bool| {
            let a = free_runs_of_128(if filled { &[3, 10] } else { &[10] }, order_lists);
            if filled {
                let fill = a.allocate(&data(1, 128, 3 * bpg)).unwrap();
                assert_eq!(fill.extent, Extent::new(3 * bpg, 128), "{fill:?}");
            }
            let places = a.index.places_of(Kind::Avg, 3);
            let before = a.stats().cr[Criterion::GoalLenFast.index()][1];
            let got = a.allocate(&data(2, 6, 2 * bpg + 5)).unwrap();
            let considered = a.stats().cr[Criterion::GoalLenFast.index()][1] - before;
            a.check_consistency().unwrap();
            assert_eq!(got.found.group, 10, "{got:?}");
            (places, considered)
        };
        let (zombie, with_zombie) = run(true, true);
        let (_, never_free) = run(true, false);
        assert_eq!(
            zombie,
            vec![(6, SizeClass::None)],
            "6.16: still in order 6's list"
        );
        assert_eq!(with_zombie, never_free + 1, "the lists pass over group 3");
        let (gone, xa_filled) = run(false, true);
        let (_, xa_never) = run(false, false);
        assert!(gone.is_empty(), "6.17 on: out of every list, {gone:?}");
        assert_eq!(xa_filled, xa_never, "the xarrays never meet it");
    }
}
