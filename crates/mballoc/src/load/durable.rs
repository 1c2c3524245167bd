//! The allocator on a durable [`Store`]: ext4 with jbd2, in user space.
//!
//! * Opening reads only what the store read at its own open (superblock, descriptors); group
//!   bitmaps come from the store the first time a group is needed ([`StoreSource`]).
//! * `allocate` and `free` change memory only, and note what they changed on disk in a
//!   journal: the hooks [`Allocator::journal_alloc`] (from `mark_diskspace_used`) and
//!   [`Allocator::journal_free`] (from the free path).
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

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::alloc::allocator::Allocator;
use crate::error::Error;
use crate::geometry::Geometry;
use crate::group::bitmap::Bitmap;
use crate::load::source::BitmapSource;
use crate::stats::bump;
use crate::store::delta::push_merged;
use crate::store::{fit_commit, Commit, Extent, FileStore, OpenOptions, Store, StoreError};
use crate::sync::Mutex;

/// A store seen as the allocator's bitmap source.
pub(crate) struct StoreSource(pub(crate) Arc<dyn Store>);

impl BitmapSource for StoreSource {
    fn descriptor_free(&self, group: u32) -> u32 {
        self.0.descriptor(group).map_or(0, |d| d.free)
    }

    fn read_bitmap(&self, group: u32) -> Result<Bitmap, Error> {
        let bytes = self.0.read_bitmap(group)?;
        let bpg = self.0.geometry().blocks_per_group();
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

/// `first` then `then`, allocations before frees as the store applies them.
fn append(mut first: Commit, then: Commit) -> Commit {
    first.allocated.extend(then.allocated);
    first.freed.extend(then.freed);
    first
}

impl Allocator {
    /// An allocator over `store`: geometry, free counts and corrupt groups from the store,
    /// bitmaps read lazily when first needed, every [`commit`](Allocator::commit) durable.
    /// Pass an `Arc` to keep a handle to the store.
    pub fn open<S: Store + 'static>(store: S) -> Result<Allocator, Error> {
        let geo = store.geometry();
        Allocator::builder(geo).store(store).build()
    }

    /// [`open`](Allocator::open) on the [`FileStore`] at `path`: a file or block device made by
    /// `FileStore::create` (`mballoc mkstore`). A bad superblock is
    /// `Error::Store(StoreError::BadSuperblock)`; a store another process has open is
    /// `Error::Store(StoreError::InUse)`. The allocator holds the store's exclusive lock for
    /// its whole life.
    pub fn open_file(path: &std::path::Path) -> Result<Allocator, Error> {
        Allocator::open_file_with(path, OpenOptions::default())
    }

    /// [`open_file`](Allocator::open_file) with a choice of access and lock wait.
    pub fn open_file_with(path: &std::path::Path, opts: OpenOptions) -> Result<Allocator, Error> {
        Allocator::open(FileStore::open_with(path, opts)?)
    }

    /// An allocator over the store at `path` that never writes it (a shared lock, a file the
    /// caller may only read): for looking, or for trying allocations in memory. Its
    /// [`commit`](Allocator::commit) fails with `StoreError::ReadOnly` inside
    /// `Error::CommitFailed`.
    pub fn open_read_only(path: &std::path::Path) -> Result<Allocator, Error> {
        Allocator::open_file_with(path, OpenOptions::read_only())
    }

    /// The durable store under this allocator, if it has one.
    pub fn store(&self) -> Option<&dyn Store> {
        self.durable
            .as_ref()
            .map(|d| d.store().as_ref() as &dyn Store)
    }

    /// After build: mark the groups the store already knows to be corrupt.
    pub(crate) fn adopt_store_corruption(&self) {
        let Some(d) = &self.durable else { return };
        for g in d.store().corrupt_groups() {
            let Some(grp) = self.groups.get(g as usize) else {
                continue;
            };
            let reason = match d.store().read_bitmap(g) {
                Err(crate::store::StoreError::Corrupt { what, .. }) => what,
                _ => "marked corrupt by the store".into(),
            };
            let st = grp.lock.lock();
            self.mark_corrupt(grp, st.desc_free, reason);
        }
    }

    /// Hook: blocks `[start, +len)` of `group` became used on disk.
    pub(crate) fn journal_alloc(&self, group: u32, start: u32, len: u32) {
        if let Some(d) = &self.durable {
            let e = Extent::new(self.geo.block_of(group, start), u64::from(len));
            push_merged(&mut d.journal.lock().allocated, e);
        }
    }

    /// Hook: blocks `[start, +len)` of `group` became free on disk in transaction `tid`.
    /// Returns the tid the pending free must carry: never one whose commit already took its
    /// batch, or that commit would release a free it did not make durable.
    pub(crate) fn journal_free(&self, group: u32, start: u32, len: u32, tid: u64) -> u64 {
        let Some(d) = &self.durable else { return tid };
        let e = Extent::new(self.geo.block_of(group, start), u64::from(len));
        let mut j = d.journal.lock();
        push_merged(&mut j.freed, e);
        tid.max(self.tid.load(Relaxed))
    }

    /// Makes every change so far durable (with a store) and returns the transaction whose
    /// frees may now be released: `upto`, or the running one when `None` (which then closes).
    pub(crate) fn make_durable(&self, upto: Option<u64>) -> Result<u64, Error> {
        let close = |t: Option<u64>| match t {
            Some(t) => {
                self.tid.fetch_max(t.saturating_add(1), Relaxed);
                t
            }
            None => self.tid.fetch_add(1, Relaxed),
        };
        let Some(d) = &self.durable else {
            return Ok(upto.unwrap_or_else(|| self.tid.fetch_add(1, Relaxed)));
        };
        let mut cs = d.commits.lock();
        let carried = d.settle(&mut cs).map_err(|e| {
            bump(&self.stats.commit_failures);
            match e {
                Error::Store(cause) => Error::CommitFailed {
                    cause,
                    pending: self.pending_blocks(),
                },
                other => other,
            }
        })?;
        let (tid, fresh) = {
            let mut j = d.journal.lock();
            (close(upto), std::mem::take(&mut *j))
        };
        let batch = match carried {
            Some(c) => append(c, fresh),
            None => fresh,
        };
        self.send(d, &mut cs, batch)?;
        Ok(tid)
    }

    /// `batch` as one or more store commits, in order; on a failure the pieces from the failed
    /// one on are kept for [`Durable::settle`].
    fn send(&self, d: &Durable, cs: &mut CommitState, batch: Commit) -> Result<(), Error> {
        if batch.is_empty() {
            return Ok(());
        }
        let pieces = match d.pieces(batch) {
            Ok(p) => p,
            Err((cause, batch)) => return Err(self.commit_failed(cs, vec![batch], cause)),
        };
        let mut pieces = pieces.into_iter();
        while let Some(piece) = pieces.next() {
            match d.store.commit(&piece) {
                Ok(id) => cs.durable = id.0,
                Err(cause) => {
                    let rest = std::iter::once(piece).chain(pieces).collect();
                    return Err(self.commit_failed(cs, rest, cause));
                }
            }
        }
        Ok(())
    }

    /// Keeps `unsent` for the next commit and reports the failure.
    fn commit_failed(&self, cs: &mut CommitState, unsent: Vec<Commit>, cause: StoreError) -> Error {
        cs.failed = unsent;
        bump(&self.stats.commit_failures);
        Error::CommitFailed {
            cause,
            pending: self.pending_blocks(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touching_extents_merge() {
        let mut l = Vec::new();
        push_merged(&mut l, Extent::new(10, 5));
        push_merged(&mut l, Extent::new(15, 2));
        push_merged(&mut l, Extent::new(30, 1));
        assert_eq!(l, vec![Extent::new(10, 7), Extent::new(30, 1)]);
    }
}
