//! Asynchronous block-bitmap reads for prefetch, the user-space stand-in for
//! `ext4_read_block_bitmap_nowait` + the buffer cache.
//!
//! Why: on a big, mostly full filesystem the first allocations after "mount" must read many
//! group bitmaps. The kernel's prefetch (`ext4_mb_prefetch`) submits those reads without waiting,
//! so they proceed in parallel with the scan; the buddies are built later, by
//! `ext4_mb_prefetch_fini` or on demand, from buffers that are by then up to date. Here a small
//! pool of reader threads plays the disk queue: [`ReadAhead::submit`] queues a read and returns,
//! [`ReadAhead::take`] hands the finished bitmap to the loader, waiting only if the read is still
//! in flight. Placement never depends on I/O timing: a group's `NEED_INIT` bit is cleared only
//! when an allocating thread builds its buddy, exactly as in the kernel.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::sync::mpsc::{channel, Sender};
use crate::sync::{Condvar, Mutex};

use crate::error::Error;
use crate::group::bitmap::Bitmap;
use crate::load::source::BitmapSource;

#[derive(Default)]
struct Reads {
    /// Submitted, not finished.
    in_flight: HashSet<u32>,
    /// In flight but discarded ([`ReadAhead::discard`]): dropped when it finishes, and never
    /// handed to a loader.
    void: HashSet<u32>,
    /// Finished, not yet taken by a loader.
    done: HashMap<u32, Result<Bitmap, Error>>,
}

#[derive(Default)]
struct Shared {
    reads: Mutex<Reads>,
    finished: Condvar,
}

/// What happened to a [`ReadAhead::take`].
pub(crate) enum Taken {
    /// No read of this group was submitted: the caller reads it itself.
    NotSubmitted,
    /// The prefetched bitmap (`waited`: the read was still in flight).
    Ready(Result<Bitmap, Error>, bool),
}

/// The reader pool; reads run inline when it has no threads.
pub(crate) struct ReadAhead {
    shared: Arc<Shared>,
    source: Arc<dyn BitmapSource>,
    queue: Option<Mutex<Sender<u32>>>,
    /// The readers, joined on drop: each holds the source, so a store (and its lock on the
    /// store file) is released when the allocator is dropped, not some time after.
    threads: Vec<crate::sync::JoinHandle>,
}

impl ReadAhead {
    /// `threads` readers over `source`; 0 = every read runs inline in `submit`. The readers stop
    /// when the `ReadAhead` is dropped.
    pub(crate) fn new(source: Arc<dyn BitmapSource>, threads: usize) -> ReadAhead {
        let shared = Arc::new(Shared::default());
        let mut handles = Vec::with_capacity(threads);
        let queue = (threads > 0).then(|| {
            let (tx, rx) = channel::<u32>();
            let rx = Arc::new(Mutex::new(rx));
            for _ in 0..threads {
                let (rx, shared, source) = (rx.clone(), shared.clone(), source.clone());
                handles.push(crate::sync::spawn("mballoc-readahead", move || loop {
                    let next = rx.lock().recv();
                    let Ok(g) = next else { return };
                    let r = source.read_bitmap(g);
                    finish(&shared, g, r);
                }));
            }
            Mutex::new(tx)
        });
        ReadAhead {
            shared,
            source,
            queue,
            threads: handles,
        }
    }

    /// Queues a read of `group` unless one is already queued or finished. False = nothing new.
    pub(crate) fn submit(&self, group: u32) -> bool {
        {
            let mut r = self.shared.reads.lock();
            if r.in_flight.contains(&group) || r.done.contains_key(&group) {
                return false;
            }
            r.in_flight.insert(group);
        }
        // Under a virtual-CPU hook the device time is the simulator's: queued here, waited
        // for by the loader that takes the bitmap (`wait_device`).
        crate::sync::io(
            self.device(),
            u64::from(group),
            || self.source.read_ns(group),
            false,
        );
        match &self.queue {
            Some(q) if q.lock().send(group).is_ok() => {}
            _ => finish(&self.shared, group, self.source.read_bitmap(group)),
        }
        true
    }

    /// The source's address: the device a virtual-CPU hook queues this allocator's reads on.
    fn device(&self) -> usize {
        Arc::as_ptr(&self.source) as *const () as usize
    }

    /// `ext4_wait_block_bitmap` in virtual time: the loader of `group` waits for the read in
    /// flight, or for its own new one. Nothing without a virtual-CPU hook (the source's
    /// `read_bitmap` then waits in real time itself).
    pub(crate) fn wait_device(&self, group: u32) {
        crate::sync::io(
            self.device(),
            u64::from(group),
            || self.source.read_ns(group),
            true,
        );
    }

    /// The result of a submitted read of `group`, waiting for it if still in flight.
    pub(crate) fn take(&self, group: u32) -> Taken {
        let mut r = self.shared.reads.lock();
        let mut waited = false;
        loop {
            if let Some(done) = r.done.remove(&group) {
                return Taken::Ready(done, waited);
            }
            if !r.in_flight.contains(&group) || r.void.contains(&group) {
                return Taken::NotSubmitted;
            }
            waited = true;
            r = self.shared.finished.wait(r);
        }
    }

    /// Forgets every read of `group`, finished or in flight: the cache has just written the
    /// group back on eviction, so a copy read before may be older than what the source now
    /// holds, and the group's next load must read the source afresh. Called under the group's
    /// lock.
    ///
    /// Why it is needed: a prefetch window tests `NEED_INIT` without the group lock, so it can
    /// submit a read of a group that another thread has just loaded; that read copies the
    /// source while the loaded group moves on. In the kernel the prefetched buffer is the
    /// bitmap itself, so no copy can go stale; here the source is a separate store.
    pub(crate) fn discard(&self, group: u32) {
        let mut r = self.shared.reads.lock();
        r.done.remove(&group);
        if r.in_flight.contains(&group) {
            r.void.insert(group);
        }
    }
}

impl Drop for ReadAhead {
    /// Closes the queue, which ends every reader once its current read is done, and waits.
    fn drop(&mut self) {
        self.queue = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn finish(shared: &Shared, group: u32, result: Result<Bitmap, Error>) {
    let mut r = shared.reads.lock();
    r.in_flight.remove(&group);
    if !r.void.remove(&group) {
        r.done.insert(group, result);
    }
    shared.finished.notify_all();
}
