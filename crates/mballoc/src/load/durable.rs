//! The durable side of loading and committing: a [`Store`] as the bitmap source, and its
//! journal: ext4 with jbd2, in user space.
//!
//! * Opening reads only what the store read at its own open (superblock, descriptors); group
//!   bitmaps come from the store the first time a group is needed ([`StoreSource`]).
//! * `allocate` and `free` change memory only, and note what they changed on disk in a
//!   journal: [`Durable::note_alloc`] (from `mark_diskspace_used`) and
//!   [`Durable::note_free`] (from the free path).
//! * `commit` hands the whole journal to the store as one atomic store commit. Only once that
//!   returned are the freed blocks released to the buddy (`release_committed`), so a block is
//!   never reused while a crash could still bring back the extent that held it.
//! * A batch too large for the store's log is cut into several store commits
//!   ([`fit_commit`]), as jbd2 closes a transaction before it outgrows the journal
//!   (`add_transaction_credits`): no amount of work between two commits can wedge the store.
//!   Allocations go first and frees last, so a crash between the pieces leaks blocks at worst.
//! * A failed store commit loses nothing: the pieces not yet known to be on disk are kept, the
//!   frees stay pending, and the next commit first asks the store where it stands
//!   ([`Store::recover`]) — the failed piece may have reached the disk after all — and then
//!   sends what is still missing.
//!
//! Transaction ids: the journal lock also guards the running transaction id, so a free noted
//! in batch `n` always carries a tid that the commit of batch `n` releases, and a free noted
//! after that commit took its batch always carries a later tid.

use std::sync::Arc;

use crate::error::Error;
use crate::geometry::Geometry;
use crate::group::bitmap::Bitmap;
use crate::load::source::BitmapSource;
use crate::store::delta::push_merged;
use crate::store::{fit_commit, Commit, Extent, Store, StoreError};
use crate::sync::Mutex;

/// A store seen as the allocator's bitmap source.
pub(crate) struct StoreSource(pub(crate) Arc<dyn Store>);

impl BitmapSource for StoreSource {
    fn descriptor_free(&self, group: u32) -> u32 {
        self.0.descriptor(group).map_or(0, |d| d.free)
    }

    fn read_bitmap(&self, group: u32) -> Result<Bitmap, Error> {
        let bytes = self.0.read_bitmap(group)?;
        let bpg = self.0.geometry().clusters_per_group();
        Ok(Bitmap::from_bytes(bytes.as_bytes(), bpg))
    }
}

/// Where commits stand.
struct CommitState {
    /// The store's id of the last commit known to have taken effect.
    durable: u64,
    /// The store commits of a batch that failed, in order, from the one that returned an
    /// error: the first one's fate is settled by [`Store::recover`] before the next commit.
    failed: Vec<Commit>,
}

/// The store, the changes since the last commit, and the commit bookkeeping.
pub(crate) struct Durable {
    store: Arc<dyn Store>,
    journal: Mutex<Commit>,
    commits: Mutex<CommitState>,
}

impl Durable {
    /// Checks that the builder's inputs fit the store.
    pub(crate) fn attach(
        geo: &Geometry,
        store: Arc<dyn Store>,
        used_ranges: usize,
    ) -> Result<Durable, Error> {
        if store.geometry() != *geo {
            return Err(Error::StoreGeometry {
                builder: *geo,
                store: store.geometry(),
            });
        }
        if used_ranges > 0 {
            return Err(Error::UsedWithStore {
                ranges: used_ranges,
            });
        }
        let durable = store.last_commit().0;
        Ok(Durable {
            store,
            journal: Mutex::new(Commit::default()),
            commits: Mutex::new(CommitState {
                durable,
                failed: Vec::new(),
            }),
        })
    }

    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Notes blocks that became used on disk, for the next commit.
    pub(crate) fn note_alloc(&self, e: Extent) {
        push_merged(&mut self.journal.lock().allocated, e);
    }

    /// [`Durable::note_alloc`] for an allocator without a journal, whose allocation may take
    /// blocks freed earlier in the same batch ([`cancel_frees`]).
    pub(crate) fn note_alloc_reusing(&self, e: Extent) {
        let mut j = self.journal.lock();
        let j = &mut *j;
        for rest in cancel_frees(&mut j.freed, e) {
            push_merged(&mut j.allocated, rest);
        }
    }

    /// Notes blocks that became free on disk, for the next commit; `then` runs under the
    /// journal lock (which also guards the running transaction id), and its value is returned.
    pub(crate) fn note_free(&self, e: Extent, then: impl FnOnce() -> u64) -> u64 {
        let mut j = self.journal.lock();
        push_merged(&mut j.freed, e);
        then()
    }

    /// Makes everything noted so far durable: first settles a failed commit, then closes the
    /// journal (`close` runs under the journal lock and returns the transaction it closed)
    /// and sends it. A store failure is `Error::Store`; what did not reach the store is kept
    /// for the next call.
    pub(crate) fn commit(&self, close: impl FnOnce() -> u64) -> Result<u64, Error> {
        let mut cs = self.commits.lock();
        let carried = self.settle(&mut cs)?;
        let (tid, fresh) = {
            let mut j = self.journal.lock();
            (close(), std::mem::take(&mut *j))
        };
        let batch = match carried {
            Some(c) => append(c, fresh),
            None => fresh,
        };
        self.send(&mut cs, batch)?;
        Ok(tid)
    }

    /// `batch` as one or more store commits, in order; on a failure the pieces from the failed
    /// one on are kept for [`Durable::settle`].
    fn send(&self, cs: &mut CommitState, batch: Commit) -> Result<(), Error> {
        if batch.is_empty() {
            return Ok(());
        }
        let pieces = match self.pieces(batch) {
            Ok(p) => p,
            Err((cause, batch)) => return Err(Self::keep(cs, vec![batch], cause)),
        };
        let mut pieces = pieces.into_iter();
        while let Some(piece) = pieces.next() {
            match self.store.commit(&piece) {
                Ok(id) => cs.durable = id.0,
                Err(cause) => {
                    let rest = std::iter::once(piece).chain(pieces).collect();
                    return Err(Self::keep(cs, rest, cause));
                }
            }
        }
        Ok(())
    }

    /// Keeps `unsent` for the next commit and reports the failure.
    fn keep(cs: &mut CommitState, unsent: Vec<Commit>, cause: StoreError) -> Error {
        cs.failed = unsent;
        Error::Store(cause)
    }

    /// Settles a failed commit: `Some(batch)`, what must be sent again, or `None` if all of
    /// it landed.
    fn settle(&self, cs: &mut CommitState) -> Result<Option<Commit>, Error> {
        if cs.failed.is_empty() {
            return Ok(None);
        }
        let found = self.store.recover().map_err(Error::Store)?.0;
        if found == cs.durable + 1 {
            cs.durable = found;
            cs.failed.remove(0);
        } else if found != cs.durable {
            let expected = cs.durable;
            return Err(Error::StoreDiverged { expected, found });
        }
        Ok(std::mem::take(&mut cs.failed).into_iter().reduce(append))
    }

    /// `batch` as store commits that each fit the store's log; on an error, `batch` back.
    fn pieces(&self, batch: Commit) -> Result<Vec<Commit>, (StoreError, Commit)> {
        match self.store.commit_capacity() {
            Some(capacity) => {
                fit_commit(&self.store.geometry(), &batch, capacity).map_err(|e| (e, batch))
            }
            None => Ok(vec![batch]),
        }
    }
}

/// `first` then `then`, allocations before frees as the store applies them. An allocation
/// of `then` that reuses blocks `first` freed (possible only without a journal: with one,
/// `first`'s frees stay pending until it is durable) cancels that free (see [`cancel_frees`]).
fn append(mut first: Commit, then: Commit) -> Commit {
    for e in then.allocated {
        for rest in cancel_frees(&mut first.freed, e) {
            push_merged(&mut first.allocated, rest);
        }
    }
    first.freed.extend(then.freed);
    first
}

/// Blocks `e` allocated after a free of some of them in the same batch, which only an
/// allocator without a journal does: a store applies a batch's allocations before its frees,
/// so a freed-then-reallocated block listed in both would end up free. The free of the
/// overlap is dropped from `freed` (the block was in use before the free and is in use again:
/// no change), and the parts of `e` that no free covered are returned, to be listed as
/// allocated. `freed` holds disjoint extents (a block is freed again only after an allocation
/// that took it out of the list).
fn cancel_frees(freed: &mut Vec<Extent>, e: Extent) -> Vec<Extent> {
    let end = |x: &Extent| x.start + x.len;
    let mut rest = vec![e];
    if freed
        .iter()
        .all(|f| f.start >= end(&e) || end(f) <= e.start)
    {
        return rest;
    }
    let mut kept = Vec::with_capacity(freed.len() + 1);
    for f in freed.drain(..) {
        let (s, t) = (f.start.max(e.start), end(&f).min(end(&e)));
        if s >= t {
            kept.push(f);
            continue;
        }
        kept.extend(outside(f, s, t));
        rest = rest.into_iter().flat_map(|r| outside(r, s, t)).collect();
    }
    *freed = kept;
    rest
}

/// The parts of `x` outside `[s, t)`.
fn outside(x: Extent, s: u64, t: u64) -> impl Iterator<Item = Extent> {
    let (a, b) = (x.start, x.start + x.len);
    [(a, b.min(s)), (a.max(t), b)]
        .into_iter()
        .filter(|&(from, to)| from < to)
        .map(|(from, to)| Extent::new(from, to - from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reallocation_cancels_the_free_of_its_blocks() {
        let mut freed = vec![Extent::new(10, 10), Extent::new(40, 5)];
        // Blocks 15..25: 15..20 were freed in the batch, 20..25 were not.
        let rest = cancel_frees(&mut freed, Extent::new(15, 10));
        assert_eq!(rest, vec![Extent::new(20, 5)]);
        assert_eq!(freed, vec![Extent::new(10, 5), Extent::new(40, 5)]);
        // Inside one free: both sides of it stay freed.
        let rest = cancel_frees(&mut freed, Extent::new(41, 2));
        assert!(rest.is_empty());
        assert_eq!(
            freed,
            vec![Extent::new(10, 5), Extent::new(40, 1), Extent::new(43, 2)]
        );
        // No overlap: nothing changes.
        assert_eq!(
            cancel_frees(&mut freed, Extent::new(0, 10)),
            vec![Extent::new(0, 10)]
        );
        assert_eq!(freed.len(), 3);
    }

    #[test]
    fn a_carried_batch_freed_what_the_next_reallocates() {
        let failed = Commit {
            allocated: vec![Extent::new(100, 4)],
            freed: vec![Extent::new(8, 8)],
        };
        let fresh = Commit {
            allocated: vec![Extent::new(8, 8)],
            freed: vec![Extent::new(100, 4)],
        };
        let both = append(failed, fresh);
        assert_eq!(both.allocated, vec![Extent::new(100, 4)]);
        assert_eq!(both.freed, vec![Extent::new(100, 4)]);
    }

    #[test]
    fn touching_extents_merge() {
        let mut l = Vec::new();
        push_merged(&mut l, Extent::new(10, 5));
        push_merged(&mut l, Extent::new(15, 2));
        push_merged(&mut l, Extent::new(30, 1));
        assert_eq!(l, vec![Extent::new(10, 7), Extent::new(30, 1)]);
    }
}
