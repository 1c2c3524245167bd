//! Giving preallocations back: on the owner's request, when a free meets them, and on the
//! ENOSPC path (`ext4_discard_preallocations`, `ext4_mb_release_inode_pa`,
//! `ext4_mb_release_group_pa`, `ext4_mb_discard_preallocations`,
//! `ext4_mb_discard_group_preallocations`).

use crate::alloc::allocator::Allocator;
use crate::alloc::context::Ex;
use crate::alloc::prealloc::space::{GroupPa, InodePa, LocalityGroup, OwnerPas};
use crate::group::info::PaSpan;
use crate::stats::add;

impl Allocator {
    /// Releases the unused part of every inode preallocation of `owner` (on close, truncate,
    /// unlink: `ext4_discard_preallocations`). Returns the blocks released.
    ///
    /// The PAs are released before the owner's lock is dropped, as the kernel releases them
    /// under `i_data_sem`: a free by the owner that finds no PA must find its blocks already
    /// back in the buddy. Released after the lock, a PA could outlive a free and commit of
    /// blocks it had handed out, and `release_inode_pa` would then skip its unused blocks
    /// for good.
    pub fn discard_preallocations(&self, owner: u64) -> u64 {
        let Some(arc) = self.pa.owners.get(owner) else {
            return 0;
        };
        let mut o = arc.lock();
        let freed = std::mem::take(&mut o.pas)
            .values()
            .map(|pa| self.release_inode_pa(pa))
            .sum();
        drop(o);
        drop(arc);
        self.pa.owners.forget_if_empty(owner);
        freed
    }

    /// Retires the PAs of group `g` in `pas`, whoever owns them: the PA leaves its owner's
    /// tree and its unused blocks go back to the buddy, under the owner's lock.
    pub(crate) fn retire_pas(&self, g: u32, pas: &[PaSpan]) {
        for span in pas {
            let pstart = self.geo.block_of(g, span.start);
            let arc = self.pa.owners.get(span.owner);
            let mut o = arc.as_ref().map(|a| a.lock());
            match o.as_mut().and_then(|o| o.take_at(span.lstart, pstart)) {
                Some(pa) => {
                    self.release_inode_pa(&pa);
                }
                // Released by another thread while we waited for the owner's lock (which
                // unregistered it); drop the entry in case it is still there.
                None => self
                    .lock_group(&self.groups[g as usize])
                    .inode_pas
                    .retain(|p| p != span),
            }
            drop(o);
            drop(arc);
            self.pa.owners.forget_if_empty(span.owner);
        }
    }

    /// `ext4_mb_release_inode_pa`: hand back the PA's clusters that are still clear on disk
    /// (never given out) and not waiting for a commit.
    pub(crate) fn release_inode_pa(&self, pa: &InodePa) -> u64 {
        let (g, off) = self.geo.locate(pa.pstart);
        let grp = &self.groups[g as usize];
        let mut st = self.lock_group(grp);
        st.unregister_pa(off);
        let pending = st.pending.clone();
        let Some(l) = st.loaded.as_mut() else {
            return 0;
        };
        let mut runs: Vec<(u32, u32)> = l.disk.zero_runs(off, off + pa.len).collect();
        for p in &pending {
            runs = runs
                .into_iter()
                .flat_map(|r| subtract(r, (p.start, p.len)))
                .collect();
        }
        let mut freed = 0u64;
        for (s, n) in runs {
            if l.buddy.all_used(s, s + n) {
                l.buddy.free_blocks(s, n);
                freed += u64::from(n);
            }
        }
        debug_assert!(freed <= u64::from(pa.len), "{freed} freed from {pa:?}");
        self.after_release(grp, &mut st, freed);
        freed
    }

    /// `ext4_mb_release_group_pa`: a locality-group PA is entirely unused.
    pub(crate) fn release_group_pa(&self, pa: &GroupPa) -> u64 {
        let (g, off) = self.geo.locate(pa.pstart);
        self.release_in_core(Ex {
            group: g,
            start: off,
            len: pa.len,
            logical: 0,
        })
    }

    /// Returns in-core-only clusters (never on disk) to the buddy.
    pub(crate) fn release_in_core(&self, ex: Ex) -> u64 {
        let grp = &self.groups[ex.group as usize];
        let mut st = self.lock_group(grp);
        let Some(l) = st.loaded.as_mut() else {
            return 0;
        };
        debug_assert!(l.disk.all_clear(ex.start, ex.start + ex.len));
        l.buddy.free_blocks(ex.start, ex.len);
        self.after_release(grp, &mut st, u64::from(ex.len));
        u64::from(ex.len)
    }

    fn after_release(
        &self,
        grp: &crate::group::info::Group,
        st: &mut crate::group::info::GroupState,
        freed: u64,
    ) {
        if freed == 0 {
            return;
        }
        add(&self.stats.discarded, freed);
        self.bump_discard_seq();
        self.publish(grp, st);
    }

    /// The ENOSPC path (`ext4_mb_discard_preallocations`): groups in order from group 0, each
    /// group's preallocations all released (`ext4_mb_discard_group_preallocations`), until
    /// `needed` clusters are freed (0: more than a group holds, so every group). A PA whose
    /// owner or locality group another request holds is in use and passed over; while any
    /// was and too little was freed, up to three passes. The requester's own PAs (`owner`,
    /// `lg`: their locks are the caller's) are released like the others. Returns the
    /// clusters freed.
    ///
    /// Group by group, not all at once: a kernel capture of a filesystem run out of space
    /// showed the retry find the blocks of group 0's PAs while later groups kept theirs.
    pub(crate) fn discard_preallocations_for(
        &self,
        needed: u32,
        mut owner: Option<(u64, &mut OwnerPas)>,
        mut lg: Option<(usize, &mut LocalityGroup)>,
    ) -> u64 {
        let mut needed = if needed == 0 {
            i64::from(self.geo.clusters_per_group()) + 1
        } else {
            i64::from(needed)
        };
        let mut freed = 0;
        for _ in 0..3 {
            let mut busy = false;
            for g in 0..self.geo.group_count() {
                if needed <= 0 {
                    break;
                }
                let n = self.discard_group_pas(g, &mut owner, &mut lg, &mut busy);
                freed += n;
                needed -= n as i64;
            }
            if needed <= 0 || !busy {
                break;
            }
        }
        freed
    }

    /// Every preallocation of group `g` not in use elsewhere, released; `busy` set if one
    /// was in use. Returns the clusters freed.
    fn discard_group_pas(
        &self,
        g: u32,
        owner: &mut Option<(u64, &mut OwnerPas)>,
        lg: &mut Option<(usize, &mut LocalityGroup)>,
        busy: &mut bool,
    ) -> u64 {
        self.discard_group_inode_pas(g, owner, busy) + self.discard_group_lg_pas(g, lg, busy)
    }

    /// The inode PAs of group `g` (its list), each released under its owner's lock.
    fn discard_group_inode_pas(
        &self,
        g: u32,
        owner: &mut Option<(u64, &mut OwnerPas)>,
        busy: &mut bool,
    ) -> u64 {
        let spans = self.lock_group(&self.groups[g as usize]).inode_pas.clone();
        let mut freed = 0;
        for span in &spans {
            let pstart = self.geo.block_of(g, span.start);
            // Nothing if its owner released it since the list was read.
            let release = |o: &mut OwnerPas| {
                o.take_at(span.lstart, pstart)
                    .map_or(0, |pa| self.release_inode_pa(&pa))
            };
            match owner {
                Some((id, o)) if *id == span.owner => freed += release(o),
                _ => {
                    let Some(arc) = self.pa.owners.get(span.owner) else {
                        continue;
                    };
                    match arc.try_lock() {
                        Some(mut o) => freed += release(&mut o),
                        None => {
                            *busy = true;
                            continue;
                        }
                    }
                    drop(arc);
                    self.pa.owners.forget_if_empty(span.owner);
                }
            }
        }
        freed
    }

    /// The locality-group PAs in group `g`, from every CPU's locality group.
    fn discard_group_lg_pas(
        &self,
        g: u32,
        lg: &mut Option<(usize, &mut LocalityGroup)>,
        busy: &mut bool,
    ) -> u64 {
        let in_g = |pa: &GroupPa| self.geo.locate(pa.pstart).0 == g;
        let mut freed = 0;
        for (i, mutex) in self.pa.lgs().enumerate() {
            let taken = match lg {
                Some((mine, l)) if *mine == i => l.take_where(in_g),
                _ => match mutex.try_lock() {
                    Some(mut l) => l.take_where(in_g),
                    None => {
                        *busy = true;
                        continue;
                    }
                },
            };
            freed += taken
                .iter()
                .map(|pa| self.release_group_pa(pa))
                .sum::<u64>();
        }
        freed
    }

    /// Releases every locality-group preallocation (what an unmount does to them).
    pub fn discard_group_preallocations(&self) -> u64 {
        self.pa
            .lgs()
            .map(|lg| {
                lg.lock()
                    .take_all()
                    .iter()
                    .map(|pa| self.release_group_pa(pa))
                    .sum::<u64>()
            })
            .sum()
    }
}

/// `r` minus `cut`, both `(start, len)`.
fn subtract(r: (u32, u32), cut: (u32, u32)) -> Vec<(u32, u32)> {
    let (rs, re) = (r.0, r.0 + r.1);
    let (cs, ce) = (cut.0, cut.0 + cut.1);
    if ce <= rs || re <= cs {
        return vec![r];
    }
    let mut out = Vec::new();
    if cs > rs {
        out.push((rs, cs - rs));
    }
    if ce < re {
        out.push((ce, re - ce));
    }
    out
}
