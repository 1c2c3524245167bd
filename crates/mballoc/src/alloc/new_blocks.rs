//! The request path from the top (`ext4_mb_new_blocks`): validation, the free-space claim,
//! context setup, existing preallocations, normalisation, the search with its ENOSPC retries,
//! new preallocations, disk marking and context release.

use std::sync::atomic::Ordering;

use crate::alloc::allocator::Allocator;
use crate::alloc::context::{Ctx, Ex, Status};
use crate::alloc::normalize::{group_or_file, normalize};
use crate::alloc::prealloc::space::{LocalityGroup, OwnerPas};
use crate::error::Error;
use crate::group::info::{Group, GroupState, PaSpan};
use crate::request::{Allocation, Criterion, Extent, Flags, NewPa, PaKind, Request, Source};

impl Allocator {
    /// Allocates blocks for `req`. The result may be shorter than asked (like ext4, callers
    /// loop); it is never longer. Errors leave the allocator unchanged.
    ///
    /// With bigalloc the request (logical block, length in blocks) is first widened to whole
    /// clusters as `ext4_ext_map_blocks` does before it calls `ext4_mb_new_blocks`, and the
    /// answer is the caller's part of the clusters found: from the requested block's place in
    /// its cluster on, at most `len` blocks. [`Allocation::goal`], [`Allocation::found`] and
    /// [`Allocation::new_pa`] keep the allocator's cluster units, as the tracepoints print
    /// them.
    pub fn allocate(&self, req: &Request) -> Result<Allocation, Error> {
        self.validate(req)?;
        if self.geo.cluster_bits() == 0 {
            return self.allocate_clusters(req);
        }
        let (whole, offset) = self.whole_clusters(req);
        let mut a = self.allocate_clusters(&whole)?;
        // ext4_ext_map_blocks: the caller's blocks start `offset` into the first cluster.
        let blocks = self.geo.c2b(a.extent.len.into()) - offset;
        a.extent = Extent::new(
            a.extent.start + offset,
            blocks.min(u64::from(req.len)) as u32,
        );
        Ok(a)
    }

    /// The cluster request of a block request (`ext4_ext_map_blocks`: `ar.logical` and
    /// `ar.goal` moved back by the offset of the logical block in its cluster, `ar.len` the
    /// clusters that hold `offset + len` blocks), and that offset.
    fn whole_clusters(&self, req: &Request) -> (Request, u64) {
        let offset = self.geo.cluster_offset(req.logical.into());
        let len = self.geo.num_b2c(offset + u64::from(req.len)) as u32;
        let whole = Request {
            logical: req.logical - offset as u32,
            len,
            goal: req.goal.saturating_sub(offset),
            ..req.clone()
        };
        (whole, offset)
    }

    /// `ext4_mb_new_blocks` on a request whose length counts clusters; the answer's extent
    /// is the first block found and its length in clusters.
    fn allocate_clusters(&self, req: &Request) -> Result<Allocation, Error> {
        let stats = self.stats.pin();
        stats.bump(|c| &c.reqs);
        let tun = self.tun.load();
        // ext4_mb_initialize_context: at most a group's clusters.
        let mut len = req.len.min(self.geo.clusters_per_group());
        if !req.flags.contains(Flags::DELALLOC_RESERVED) {
            // ext4_claim_free_clusters: halve the request until it fits the free count.
            let free = self.free_blocks.read_near(i64::from(len)).max(0) as u64;
            while u64::from(len) > free {
                len /= 2;
                if len == 0 {
                    return Err(self.no_space(req.len));
                }
            }
        }
        // ext4_mb_initialize_context: a goal outside the filesystem starts the search at the
        // first data block. It happens: the block after a file's last extent, when that extent
        // ends the filesystem, is `ext4_ext_find_goal`'s goal for the next append.
        let goal = if req.goal < self.geo.first_data_block() || req.goal >= self.geo.blocks_count()
        {
            self.geo.first_data_block()
        } else {
            req.goal
        };
        let (group, start) = self.geo.locate(goal);
        let o_ex = Ex {
            group,
            start,
            len,
            logical: req.logical,
        };
        let mut ctx = Ctx::new(req, &tun, stats, o_ex, len);
        let group_alloc = group_or_file(&mut ctx, &self.geo, self.fs_is_busy());

        // i_data_sem for the owner's PAs, lg_mutex for the locality group.
        // A request that can create no inode PA (HINT_NOPREALLOC: not normalised) only needs
        // the owner's existing PAs, if any: no entry is created (and dropped) for it.
        let owner_arc = if !ctx.flags.contains(Flags::HINT_DATA) {
            None
        } else if ctx.flags.contains(Flags::HINT_NOPREALLOC) {
            self.pa.owners.get(req.owner)
        } else {
            Some(self.pa.owners.get_or_create(req.owner))
        };
        let mut owner = owner_arc.as_ref().map(|a| a.lock());
        let mut lg = group_alloc.then(|| self.lg(req.cpu).lock());
        let result = self.new_blocks(&mut ctx, owner.as_deref_mut(), lg.as_deref_mut());
        drop(lg);
        // An owner left without PAs loses its entry (checked under its lock: the common case,
        // an owner with a PA, skips the table).
        let now_empty = owner.as_ref().is_some_and(|o| o.pas.is_empty());
        drop(owner);
        drop(owner_arc);
        if now_empty {
            self.pa.owners.forget_if_empty(req.owner);
        }
        if let Ok(a) = &result {
            stats.bump(|c| &c.success);
            stats.add(|c| &c.blocks_allocated, u64::from(a.extent.len));
        }
        result
    }

    fn validate(&self, req: &Request) -> Result<(), Error> {
        if req.len == 0 {
            return Err(Error::ZeroLength { owner: req.owner });
        }
        let g = &self.geo;
        let bad = |what: String| {
            Err(Error::InvalidRequest {
                owner: req.owner,
                what,
            })
        };
        // The kernel sets these in `ext4_mb_group_or_file` and no caller passes them (a
        // preset HINT_GROUP_ALLOC would reach `ext4_mb_normalize_group_request` without a
        // locality group: a BUG_ON there; here a goal of `mb_group_prealloc` blocks, 0 when
        // group preallocation is off).
        let decided = req.flags & (Flags::HINT_GROUP_ALLOC | Flags::STREAM_ALLOC);
        if decided.0 != 0 {
            return bad(format!(
                "flags {decided:?} are the allocator's group-or-file decision, not a request's"
            ));
        }
        if u64::from(req.logical) + u64::from(req.len) > u64::from(u32::MAX) {
            return bad(format!(
                "logical {} + len {} passes 2^32 - 1",
                req.logical, req.len
            ));
        }
        if req.pleft != 0 && (req.pleft >= g.blocks_count() || req.lleft >= req.logical) {
            return bad(format!(
                "left neighbour {}@{} must lie before logical {} and inside the filesystem",
                req.lleft, req.pleft, req.logical
            ));
        }
        if req.pright != 0
            && (req.pright >= g.blocks_count()
                || u64::from(req.lright) < u64::from(req.logical) + u64::from(req.len))
        {
            return bad(format!(
                "right neighbour {}@{} must lie after the request and inside the filesystem",
                req.lright, req.pright
            ));
        }
        Ok(())
    }

    pub(crate) fn no_space(&self, requested: u32) -> Error {
        Error::NoSpace {
            requested,
            free: self.free_blocks(),
            pending: self.pending_blocks(),
        }
    }

    fn new_blocks(
        &self,
        ctx: &mut Ctx,
        mut owner: Option<&mut OwnerPas>,
        mut lg: Option<&mut LocalityGroup>,
    ) -> Result<Allocation, Error> {
        if let Some(a) = self.use_preallocated(ctx, owner.as_deref_mut(), lg.as_deref_mut())? {
            ctx.stats.bump(|c| &c.prealloc_hits);
            return Ok(a);
        }
        normalize(ctx, &self.geo, owner.as_deref());
        let mut retries = 0;
        // ext4_mb_new_blocks reads this CPU's sequence; the retry compares it with the sum.
        let mut seq = self.discard_seq.local().load(Ordering::Relaxed);
        loop {
            self.regular_allocator(ctx)?;
            if ctx.status == Status::Found {
                break;
            }
            retries += 1;
            if retries < 3
                && self.should_retry(ctx, owner.as_deref_mut(), lg.as_deref_mut(), &mut seq)
            {
                ctx.stats.bump(|c| &c.enospc_retries);
                ctx.status = Status::Continue;
                ctx.b_ex = Ex::default();
                ctx.cr_done = false;
                continue;
            }
            if ctx.flags.contains(Flags::HINT_GOAL_ONLY) {
                return Err(Error::GoalNotFree {
                    goal: ctx.req.goal,
                    len: ctx.o_ex.len,
                });
            }
            return Err(self.no_space(ctx.req.len));
        }
        let (mut new_pa, mut register) = (None, None);
        if ctx.o_ex.len < ctx.b_ex.len {
            new_pa = match (ctx.flags.contains(Flags::HINT_GROUP_ALLOC), lg, owner) {
                (true, Some(lg), _) => Some(self.new_group_pa(ctx, lg)),
                (false, _, Some(owner)) => {
                    let (created, span) = self.new_inode_pa(ctx, owner);
                    register = span;
                    Some(created)
                }
                _ => {
                    // Cannot happen (surplus needs normalisation), but never leak blocks.
                    let surplus = Ex {
                        start: ctx.b_ex.start + ctx.o_ex.len,
                        len: ctx.b_ex.len - ctx.o_ex.len,
                        ..ctx.b_ex
                    };
                    self.release_in_core(surplus);
                    ctx.b_ex.len = ctx.o_ex.len;
                    None
                }
            };
        }
        self.mark_diskspace_used(ctx.b_ex, register)?;
        // ext4_mb_release_context: the folios ext4_mb_use_best_found pinned.
        crate::sync::folio_refs(|| self.pages.folios_of(ctx.b_ex.group));
        if ctx.b_ex.len == ctx.orig_goal_len {
            ctx.stats.bump(|c| &c.len_goal_hits);
        }
        if ctx.g_ex.group == ctx.b_ex.group && ctx.g_ex.start == i64::from(ctx.b_ex.start) {
            ctx.stats.bump(|c| &c.goal_hits);
        }
        ctx.stats.add(|c| &c.extents_scanned, u64::from(ctx.found));
        ctx.stats
            .add(|c| &c.groups_scanned, u64::from(ctx.groups_scanned));
        for (i, n) in ctx.cx_found.iter().enumerate() {
            if *n > 0 {
                ctx.stats.add(|c| &c.cr[i].extents_scanned, u64::from(*n));
            }
        }
        Ok(self.answer(ctx, Source::Scan, new_pa, None))
    }

    pub(crate) fn answer(
        &self,
        ctx: &Ctx,
        source: Source,
        new_pa: Option<NewPa>,
        pa_used: Option<PaKind>,
    ) -> Allocation {
        Allocation {
            extent: Extent::new(
                self.geo.block_of(ctx.b_ex.group, ctx.b_ex.start),
                ctx.b_ex.len,
            ),
            source,
            goal: ctx.g_ex,
            found: ctx.f_ex.as_group_extent(),
            criterion: if source == Source::Scan {
                ctx.cr
            } else {
                Criterion::Power2Aligned
            },
            after_all_passes: source == Source::Scan && ctx.cr_done,
            groups_scanned: ctx.groups_scanned,
            extents_scanned: ctx.found,
            flags: ctx.flags,
            new_pa,
            pa_used,
        }
    }

    /// `ext4_mb_mark_diskspace_used`: the blocks become the caller's on disk; a new inode
    /// PA they were carved from joins the group's list in the same lock hold.
    pub(crate) fn mark_diskspace_used(
        &self,
        ex: Ex,
        register: Option<PaSpan>,
    ) -> Result<(), Error> {
        let grp = &self.groups[ex.group as usize];
        let mut st = grp.lock.lock();
        self.mark_locked(grp, &mut st, ex)?;
        st.inode_pas.extend(register);
        drop(st);
        crate::sync::marked(ex.group, || self.geo.flex_bg_size());
        self.free_blocks.add(-i64::from(ex.len));
        Ok(())
    }

    /// The locked part of the marking; the caller takes the blocks off the global free count
    /// once the group lock is released (the lock is held as briefly as the kernel's, which
    /// updates its per-CPU free counter after `ext4_unlock_group` too).
    pub(crate) fn mark_locked(
        &self,
        grp: &Group,
        st: &mut GroupState,
        ex: Ex,
    ) -> Result<(), Error> {
        if self.bits(ex.group).is_corrupt() {
            return Err(self.corrupt_error(ex.group));
        }
        let Some(l) = st.loaded.as_mut() else {
            return Err(Error::CorruptGroup {
                group: ex.group,
                reason: "allocation from an unloaded group".into(),
            });
        };
        if !l.disk.all_clear(ex.start, ex.start + ex.len)
            || !l.buddy.all_used(ex.start, ex.start + ex.len)
        {
            let reason = format!(
                "allocated [{}, +{}) overlaps blocks in use",
                ex.start, ex.len
            );
            self.mark_corrupt(grp, st.desc_free, reason.clone());
            return Err(Error::CorruptGroup {
                group: ex.group,
                reason,
            });
        }
        l.disk.set_range(ex.start, ex.start + ex.len);
        crate::sync::bitmap_csum(|| self.geo.clusters_per_group().div_ceil(8));
        // In-core free never exceeds on-disk free: every block free in-core is free on disk.
        debug_assert!(l.buddy.free() <= st.desc_free - ex.len);
        self.journal_alloc(ex.group, ex.start, ex.len);
        st.desc_free -= ex.len;
        self.check_group(grp, st);
        Ok(())
    }

    /// `ext4_mb_discard_preallocations_should_retry`: free every preallocation we can, retry
    /// if that freed something or anything changed since the last try.
    fn should_retry(
        &self,
        ctx: &mut Ctx,
        owner: Option<&mut OwnerPas>,
        lg: Option<&mut LocalityGroup>,
        seq: &mut u64,
    ) -> bool {
        // ext4_mb_discard_preallocations_should_retry: as many clusters as the request.
        let freed = self.discard_preallocations_for(
            ctx.o_ex.len,
            owner.map(|o| (ctx.req.owner, o)),
            lg.map(|l| (self.lg_index(ctx.req.cpu), l)),
        );
        if freed > 0 {
            return true;
        }
        let now = self.discard_seq_sum();
        if !ctx.flags.contains(Flags::STRICT_CHECK) || now != *seq {
            ctx.flags |= Flags::STRICT_CHECK;
            *seq = now;
            return true;
        }
        false
    }
}
