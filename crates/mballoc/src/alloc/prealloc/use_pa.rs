//! Serving a request from an existing preallocation (`ext4_mb_use_preallocated`,
//! `ext4_mb_use_inode_pa`, `ext4_mb_use_group_pa`, `ext4_mb_pa_goal_check`).

use crate::alloc::allocator::Allocator;
use crate::alloc::context::{Ctx, Ex, Status};
use crate::alloc::prealloc::space::{InodePa, LocalityGroup, OwnerPas};
use crate::error::Error;
use crate::request::{Allocation, Flags, PaKind, Source};

impl Allocator {
    /// `ext4_mb_use_preallocated`: the owner's PA covering the logical block, else (small
    /// files) the locality-group PA nearest the goal.
    pub(crate) fn use_preallocated(
        &self,
        ctx: &mut Ctx,
        owner: Option<&mut OwnerPas>,
        lg: Option<&mut LocalityGroup>,
    ) -> Result<Option<Allocation>, Error> {
        if !ctx.flags.contains(Flags::HINT_DATA) {
            return Ok(None);
        }
        let l = ctx.o_ex.logical;
        if let Some(owner) = owner {
            if let Some(pa) = owner
                .covering(l, self.geo.cluster_bits())
                .filter(|pa| pa.free > 0 && self.pa_goal_check(ctx, pa))
            {
                let ex = self.use_inode_pa(ctx, &pa);
                let n = ex.len;
                let used_up = (pa.free <= n).then(|| self.geo.locate(pa.pstart).1);
                if self.mark_pa_blocks_used(ex, used_up)? {
                    let entry = owner
                        .pas
                        .get_mut(&pa.lstart)
                        .expect("covering PA is in the tree");
                    entry.free -= n.min(entry.free);
                    if entry.free == 0 {
                        owner.pas.remove(&pa.lstart);
                    }
                    ctx.b_ex = ex;
                    ctx.f_ex = ex;
                    ctx.status = Status::Found;
                    return Ok(Some(self.answer(
                        ctx,
                        Source::Prealloc,
                        None,
                        Some(PaKind::Inode),
                    )));
                }
                // Part of this PA was handed out already (the owner reused a logical range
                // without discarding): retire the PA rather than give a block twice.
                owner.pas.remove(&pa.lstart);
                self.release_inode_pa(&pa);
            }
        }
        if let Some(lg) = lg.filter(|_| ctx.flags.contains(Flags::HINT_GROUP_ALLOC)) {
            let goal = self.geo.block_of(ctx.g_ex.group, ctx.goal_start());
            if let Some((b, i)) = lg.best_for(ctx.o_ex.len, goal) {
                let mut pa = lg.lists[b].remove(i);
                let (g, off) = self.geo.locate(pa.pstart);
                let ex = Ex {
                    group: g,
                    start: off,
                    len: ctx.o_ex.len,
                    logical: ctx.o_ex.logical,
                };
                ctx.b_ex = ex;
                ctx.f_ex = ex;
                ctx.status = Status::Found;
                self.mark_diskspace_used(ex, None)?;
                // ext4_mb_release_context: the PA moves on by the clusters used.
                pa.pstart += self.geo.c2b(ex.len.into());
                pa.len -= ex.len;
                if pa.len > 0 {
                    for t in lg.add_n_trim(pa) {
                        self.release_group_pa(&t);
                    }
                }
                return Ok(Some(self.answer(
                    ctx,
                    Source::Prealloc,
                    None,
                    Some(PaKind::Group),
                )));
            }
        }
        Ok(None)
    }

    /// `ext4_mb_pa_goal_check`: with GOAL_ONLY, a PA serves only if it maps the goal.
    fn pa_goal_check(&self, ctx: &Ctx, pa: &InodePa) -> bool {
        if !ctx.flags.contains(Flags::HINT_GOAL_ONLY) {
            return true;
        }
        let into = u64::from(ctx.g_ex.logical.saturating_sub(pa.lstart));
        let start = pa.pstart + into;
        self.geo.block_of(ctx.g_ex.group, ctx.goal_start()) == start
            && u64::from(ctx.g_ex.len) <= u64::from(pa.len).saturating_sub(self.geo.b2c(into))
    }

    /// `ext4_mb_use_inode_pa`: the part of `pa` that maps the request's logical block on, in
    /// blocks as the kernel computes it (the PA's logical start need not be cluster-aligned),
    /// at most the request's clusters.
    pub(crate) fn use_inode_pa(&self, ctx: &Ctx, pa: &InodePa) -> Ex {
        let l = ctx.o_ex.logical;
        let start = pa.pstart + u64::from(l - pa.lstart);
        let end = (pa.pstart + self.geo.c2b(pa.len.into()))
            .min(start + self.geo.c2b(ctx.o_ex.len.into()));
        let (group, off) = self.geo.locate(start);
        Ex {
            group,
            start: off,
            len: self.geo.num_b2c(end - start) as u32,
            logical: l,
        }
    }

    /// `ext4_mb_mark_diskspace_used` for the blocks of an inode PA, if they are all still
    /// clear on disk (one lock hold for the check and the marking); `false`, with nothing
    /// changed, if the owner was given some of them already. `used_up`: the PA's start in the
    /// group when this use empties it, so that it leaves the group's list in the same hold.
    fn mark_pa_blocks_used(&self, ex: Ex, used_up: Option<u32>) -> Result<bool, Error> {
        let grp = &self.groups[ex.group as usize];
        let mut st = grp.lock.lock();
        let clear = st
            .loaded
            .as_ref()
            .is_some_and(|l| l.disk.all_clear(ex.start, ex.start + ex.len));
        if clear {
            self.mark_locked(grp, &mut st, ex)?;
            if let Some(start) = used_up {
                st.unregister_pa(start);
            }
        }
        drop(st);
        if clear {
            crate::sync::marked(ex.group, || self.geo.flex_bg_size());
            self.free_blocks.add(-i64::from(ex.len));
        }
        Ok(clear)
    }
}
