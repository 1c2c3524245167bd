//! New preallocations from the surplus of a normalised allocation
//! (`ext4_mb_new_preallocation`, `ext4_mb_new_inode_pa`, `ext4_mb_new_group_pa`).

use crate::alloc::allocator::Allocator;
use crate::alloc::context::Ctx;
use crate::alloc::prealloc::space::{GroupPa, InodePa, LocalityGroup, OwnerPas};
use crate::group::info::PaSpan;
use crate::request::{NewPa, PaKind};
use crate::stats::add;

impl Allocator {
    /// `ext4_mb_new_inode_pa`: keep the surplus of a normalised allocation for the owner.
    pub(crate) fn new_inode_pa(
        &self,
        ctx: &mut Ctx,
        owner: &mut OwnerPas,
    ) -> (NewPa, Option<PaSpan>) {
        if ctx.b_ex.len < ctx.orig_goal_len {
            // Place the shorter extent inside the original window, covering the request:
            // right-aligned, else left-aligned, else at the request.
            // extent_logical_end(): logical blocks, lengths in clusters.
            let c2b = |clusters: u32| self.geo.c2b(clusters.into());
            let win_end = u64::from(ctx.g_ex.logical) + c2b(ctx.orig_goal_len);
            let o_end = u64::from(ctx.o_ex.logical) + c2b(ctx.o_ex.len);
            let right = win_end - c2b(ctx.b_ex.len);
            ctx.b_ex.logical = if u64::from(ctx.o_ex.logical) >= right {
                right as u32
            } else if o_end <= u64::from(ctx.g_ex.logical) + c2b(ctx.b_ex.len) {
                ctx.g_ex.logical
            } else {
                ctx.o_ex.logical
            };
        }
        let pstart = self.geo.block_of(ctx.b_ex.group, ctx.b_ex.start);
        let mut pa = InodePa {
            pstart,
            lstart: ctx.b_ex.logical,
            len: ctx.b_ex.len,
            free: ctx.b_ex.len,
        };
        add(&self.stats.preallocated, u64::from(pa.len));
        let created = NewPa {
            kind: PaKind::Inode,
            pstart,
            lstart: u64::from(pa.lstart),
            len: pa.len,
        };
        // ext4_mb_use_inode_pa: carve the request out of it.
        ctx.b_ex = self.use_inode_pa(ctx, &pa);
        pa.free -= ctx.b_ex.len;
        let span = (pa.free > 0).then(|| {
            owner.pas.insert(pa.lstart, pa);
            PaSpan {
                start: self.geo.locate(pa.pstart).1,
                len: pa.len,
                owner: ctx.req.owner,
                lstart: pa.lstart,
            }
        });
        (created, span)
    }

    /// `ext4_mb_new_group_pa`: keep the surplus for the CPU's locality group.
    pub(crate) fn new_group_pa(&self, ctx: &mut Ctx, lg: &mut LocalityGroup) -> NewPa {
        let pstart = self.geo.block_of(ctx.b_ex.group, ctx.b_ex.start);
        let created = NewPa {
            kind: PaKind::Group,
            pstart,
            lstart: pstart,
            len: ctx.b_ex.len,
        };
        add(&self.stats.preallocated, u64::from(ctx.b_ex.len));
        let used = ctx.o_ex.len;
        let rest = GroupPa {
            pstart: pstart + self.geo.c2b(used.into()),
            len: ctx.b_ex.len - used,
        };
        ctx.b_ex.len = used;
        ctx.b_ex.logical = ctx.o_ex.logical;
        for t in lg.add_n_trim(rest) {
            self.release_group_pa(&t);
        }
        created
    }
}
