//! The best extent of a search: measuring each extent found against the goal, deciding
//! when the best so far is good enough, and taking it out of the buddy
//! (`ext4_mb_measure_extent`, `ext4_mb_check_limits`, `ext4_mb_use_best_found`,
//! `ext4_mb_try_best_found`).

use crate::alloc::allocator::Allocator;
use crate::alloc::context::{Ctx, Ex, Status};
use crate::group::info::{Group, GroupState};
use crate::request::Flags;

impl Allocator {
    /// `ext4_mb_check_limits`: stop after `mb_max_to_scan` extents; use a sufficient best
    /// once the group is done or `mb_min_to_scan` extents were seen. True = use `b_ex` now.
    pub(crate) fn check_limits(&self, ctx: &mut Ctx, group: u32, finish_group: bool) -> bool {
        if ctx.status == Status::Found {
            return false;
        }
        if ctx.found > ctx.tun.mb_max_to_scan && !ctx.flags.contains(Flags::HINT_FIRST) {
            ctx.status = Status::Break;
            return false;
        }
        if ctx.b_ex.len < ctx.g_ex.len {
            return false;
        }
        // The kernel would BUG if the best lay in another group; it cannot, as a sufficient
        // best is always used before its group is left.
        (finish_group || ctx.found > ctx.tun.mb_min_to_scan) && ctx.b_ex.group == group
    }

    /// `ext4_mb_use_best_found`: take `b_ex` (cut to the goal length) out of the buddy.
    /// Preallocation of the surplus is done by the caller once the group lock is dropped.
    pub(crate) fn use_best_found(&self, ctx: &mut Ctx, grp: &Group, st: &mut GroupState) {
        let Some(l) = st.loaded.as_mut() else { return };
        ctx.b_ex.len = ctx.b_ex.len.min(ctx.g_ex.len);
        ctx.b_ex.logical = ctx.g_ex.logical;
        let ret = l.buddy.mark_used(ctx.b_ex.start, ctx.b_ex.len);
        // The context pins the group's folios until ext4_mb_release_context.
        crate::sync::folio_refs(|| self.pages.folios_of(ctx.b_ex.group));
        self.bump_discard_seq();
        self.publish(grp, st);
        self.claim_class(ctx, grp, st);
        ctx.f_ex = ctx.b_ex;
        ctx.status = Status::Found;
        ctx.tail = ret & 0xffff;
        ctx.buddy = ret >> 16;
        if ctx.flags.contains(Flags::STREAM_ALLOC) {
            self.set_stream_goal(ctx.req.owner, ctx.tun, ctx.f_ex.group);
        }
    }

    /// `ext4_mb_try_best_found`: after the passes, take the remembered best if still free.
    pub(crate) fn try_best_found(&self, ctx: &mut Ctx) {
        let ex = ctx.b_ex;
        let grp = &self.groups[ex.group as usize];
        let mut st = self.lock_group(grp);
        if self.bits(ex.group).is_corrupt() || self.load_locked(grp, &mut st).is_err() {
            return;
        }
        let Some(l) = st.loaded.as_ref() else { return };
        let max = l.buddy.find_extent(ex.start, ex.len);
        if max > 0 {
            ctx.b_ex = Ex { len: max, ..ex };
            self.use_best_found(ctx, grp, &mut st);
        }
    }
}

/// What one measured extent decided.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Continue,
    /// Use the best extent now.
    Use,
    /// `mb_max_to_scan` extents seen: stop searching (`AC_STATUS_BREAK`).
    Break,
}

/// The complex scan's running state, in locals rather than the context: the best extent so
/// far and the extents seen (`ac_b_ex`, `ac_found`).
pub(crate) struct Measure {
    best: Ex,
    found: u32,
    /// Extents seen in this scan (for the per-criterion counter).
    seen: u32,
    pub(crate) goal: u32,
    group: u32,
    first: bool,
    max_to_scan: u32,
    min_to_scan: u32,
}

impl Measure {
    pub(crate) fn new(ctx: &Ctx, group: u32) -> Measure {
        Measure {
            best: ctx.b_ex,
            found: ctx.found,
            seen: 0,
            goal: ctx.g_ex.len,
            group,
            first: ctx.flags.contains(Flags::HINT_FIRST),
            max_to_scan: ctx.tun.mb_max_to_scan,
            min_to_scan: ctx.tun.mb_min_to_scan,
        }
    }

    /// `ext4_mb_measure_extent` followed by `ext4_mb_check_limits(ac, e4b, 0)`.
    #[inline]
    pub(crate) fn measure(&mut self, ex: Ex) -> Verdict {
        self.found += 1;
        self.seen += 1;
        if self.first || ex.len == self.goal {
            self.best = ex;
            return Verdict::Use;
        }
        if self.best.len == 0 {
            self.best = ex;
            return Verdict::Continue;
        }
        if self.best.len < self.goal {
            if ex.len > self.best.len {
                self.best = ex;
            }
        } else if ex.len > self.goal && ex.len < self.best.len {
            self.best = ex;
        }
        if self.found > self.max_to_scan && !self.first {
            return Verdict::Break;
        }
        if self.best.len < self.goal {
            return Verdict::Continue;
        }
        // The kernel would BUG if the best lay in another group; it cannot, as a sufficient
        // best is always used before its group is left.
        if self.found > self.min_to_scan && self.best.group == self.group {
            Verdict::Use
        } else {
            Verdict::Continue
        }
    }

    /// Writes the state back into the context.
    pub(crate) fn store(&self, ctx: &mut Ctx) {
        ctx.b_ex = self.best;
        ctx.found = self.found;
        ctx.cx_found[ctx.cr.index()] += self.seen;
    }
}
