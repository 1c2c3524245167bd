//! The allocator on a durable store (ext4 with jbd2, in user space; see `load::durable`):
//! opening over a store, noting every on-disk change in the journal, and making commits
//! durable before their frees are released.

use std::sync::atomic::Ordering::Relaxed;

use crate::alloc::allocator::Allocator;
use crate::error::Error;
use crate::stats::bump;
use crate::store::{Extent, FileStore, OpenOptions, Store, StoreError};

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
                Err(StoreError::Corrupt { what, .. }) => what,
                _ => "marked corrupt by the store".into(),
            };
            let st = grp.lock.lock();
            self.mark_corrupt(grp, st.desc_free, reason);
        }
    }

    /// Hook: blocks `[start, +len)` of `group` became used on disk. Without a journal they
    /// may have been freed earlier in the same batch.
    pub(crate) fn journal_alloc(&self, group: u32, start: u32, len: u32) {
        if let Some(d) = &self.durable {
            let e = Extent::new(self.geo.block_of(group, start), u64::from(len));
            match self.journal {
                true => d.note_alloc(e),
                false => d.note_alloc_reusing(e),
            }
        }
    }

    /// Hook: blocks `[start, +len)` of `group` became free on disk in transaction `tid`.
    /// Returns the tid the pending free must carry: never one whose commit already took its
    /// batch, or that commit would release a free it did not make durable.
    pub(crate) fn journal_free(&self, group: u32, start: u32, len: u32, tid: u64) -> u64 {
        let Some(d) = &self.durable else { return tid };
        let e = Extent::new(self.geo.block_of(group, start), u64::from(len));
        d.note_free(e, || tid.max(self.tid.load(Relaxed)))
    }

    /// Makes every change so far durable (with a store) and returns the transaction whose
    /// frees may now be released: `upto`, or the running one when `None` (which then closes).
    pub(crate) fn make_durable(&self, upto: Option<u64>) -> Result<u64, Error> {
        let close = || match upto {
            Some(t) => {
                self.tid.fetch_max(t.saturating_add(1), Relaxed);
                t
            }
            None => self.tid.fetch_add(1, Relaxed),
        };
        let Some(d) = &self.durable else {
            return Ok(upto.unwrap_or_else(|| self.tid.fetch_add(1, Relaxed)));
        };
        d.commit(close).map_err(|e| {
            bump(&self.stats.commit_failures);
            match e {
                Error::Store(cause) => Error::CommitFailed {
                    cause,
                    pending: self.pending_blocks(),
                },
                other => other,
            }
        })
    }
}
