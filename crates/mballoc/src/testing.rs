//! Checks for arbitrary bytes posing as a store: the entry points of the fuzz targets
//! (`fuzz/`), also run over their saved corpus by plain `cargo test` (`tests/fuzz_corpus.rs`).
//!
//! * [`open_image`]: the bytes are a device image (zero-extended like a sparse file, so that
//!   inputs stay small).
//! * [`replay_log`]: the bytes replace the write-ahead log of a fixed, valid store, so that
//!   recovery replays whatever they hold.
//!
//! Before either is opened for writing, a read-only open must write nothing, refuse to commit
//! and see exactly the store that read-write recovery leaves.
//!
//! Either way the store must refuse the bytes with a typed error, or open and then keep every
//! invariant: descriptors within bounds, each bitmap either valid or reported corrupt, the
//! allocator on top consistent, a commit that works and survives a reopen, and (after a
//! replay) a clean fsck and a second open that needs no replay. A broken invariant is a
//! [`Violation`]; a panic is a bug the fuzzer reports by itself.

use std::sync::{Arc, OnceLock};

use crate::alloc::Allocator;
use crate::geometry::Geometry;
use crate::request::{Extent as Blocks, Flags, Request};
use crate::store::MemDevice;
use crate::store::{Commit, CommitId, Extent, GroupDesc, Store, StoreError};
use crate::store::{FileStore, FileStoreOptions};

/// What the store made of the bytes.
#[derive(Debug)]
pub enum Outcome {
    /// Refused with a typed error (the expected fate of most random bytes).
    Rejected(StoreError),
    /// Opened, and every invariant held.
    Opened(Summary),
}

/// A store that opened.
#[derive(Debug, Default)]
pub struct Summary {
    /// Groups of the store.
    pub groups: u32,
    /// Groups found corrupt (descriptor or bitmap).
    pub corrupt: Vec<u32>,
    /// fsck problems before anything was written.
    pub problems: usize,
    /// The commit recovery replayed at open, if any.
    pub replayed: Option<CommitId>,
    /// Blocks the allocator managed to allocate and commit on top.
    pub allocated: u64,
}

/// An invariant that did not hold: a bug in the store or the allocator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invariant violated: {0}")]
pub struct Violation(pub String);

fn violation(what: impl Into<String>) -> Violation {
    Violation(what.into())
}

/// Longest device [`open_image`] zero-extends to.
pub const MAX_EXTENDED: u64 = 1 << 20;

/// Opens `bytes` as a device image and checks the invariants. If the bytes start with a valid
/// superblock whose layout needs a longer device, at most [`MAX_EXTENDED`] bytes, the image is
/// extended with zeros to that length, as a sparse file reads: the fuzzer then need not carry
/// kilobytes of zeros. Larger claims are left short (and must be refused).
pub fn open_image(bytes: &[u8]) -> Result<Outcome, Violation> {
    let mut image = bytes.to_vec();
    if let Ok(sb) = crate::store::format::decode_superblock(bytes) {
        let need = sb.layout.total;
        if need <= MAX_EXTENDED && need > image.len() as u64 {
            image.resize(need as usize, 0);
        }
    }
    let dev = Arc::new(MemDevice::from_bytes(image));
    check_read_only(&dev)?;
    match FileStore::open_on(dev.clone()) {
        Err(e) => Ok(Outcome::Rejected(e)),
        Ok(store) => exercise(&dev, store).map(Outcome::Opened),
    }
}

/// What a store shows: where its log stands, every descriptor, every bitmap (or that it is
/// corrupt), and which groups are corrupt once all were read.
type View = (
    CommitId,
    Option<CommitId>,
    Vec<GroupDesc>,
    Vec<Option<Vec<u8>>>,
    Vec<u32>,
);

fn view(s: &FileStore) -> View {
    let descs = s.descriptors();
    let bitmaps = (0..s.geometry().group_count())
        .map(|g| s.read_bitmap(g).ok().map(|b| b.as_bytes().to_vec()))
        .collect();
    (
        s.last_commit(),
        s.recovered(),
        descs,
        bitmaps,
        s.corrupt_groups(),
    )
}

/// A read-only open of the device must write nothing, refuse to commit, and see exactly what
/// a read-write open of a copy sees after its recovery wrote the log's last commit in place.
fn check_read_only(dev: &Arc<MemDevice>) -> Result<(), Violation> {
    let before = dev.to_bytes();
    let ro = FileStore::open_on_read_only(dev.clone());
    let ro_view = ro.as_ref().ok().map(view);
    if let Ok(s) = &ro {
        let c = Commit {
            allocated: vec![Extent::new(s.geometry().first_data_block(), 1)],
            freed: Vec::new(),
        };
        if !matches!(s.commit(&c), Err(StoreError::ReadOnly { .. })) {
            return Err(violation("a read-only store took a commit"));
        }
    }
    drop(ro);
    if dev.to_bytes() != before {
        return Err(violation("a read-only open wrote to the device"));
    }
    let rw = FileStore::open_on(Arc::new(MemDevice::from_bytes(before)));
    match (ro_view, rw) {
        (Some(ro), Ok(rw)) if ro != view(&rw) => Err(violation(
            "a read-only open sees another store than read-write recovery leaves",
        )),
        (Some(_), Err(e)) => Err(violation(format!("only a read-write open failed: {e}"))),
        (None, Ok(_)) => Err(violation("only a read-only open failed")),
        _ => Ok(()),
    }
}

/// The fixed store under [`replay_log`]: 4 groups of 1024 one-KiB blocks (the last 1000
/// long), a 16 KiB log, a fixed nonce, and two commits made (one record in each log slot).
pub fn replay_base() -> &'static [u8] {
    static BASE: OnceLock<Vec<u8>> = OnceLock::new();
    BASE.get_or_init(|| build_base().expect("the base image is valid by construction"))
}

const BASE_NONCE: u64 = 0x6d62_616c_6c6f_6321;

fn base_geometry() -> Geometry {
    Geometry::new(1024, 1024, 4072, 0, 1).expect("valid geometry")
}

fn base_opts() -> FileStoreOptions {
    FileStoreOptions { log_len: 16 << 10 }
}

fn build_base() -> Result<Vec<u8>, StoreError> {
    let g = base_geometry();
    let dev = Arc::new(MemDevice::new(FileStore::required_len(&g, base_opts())?));
    let used = [Extent::new(0, 50), Extent::new(1500, 700)];
    let store = FileStore::create_with_nonce(dev.clone(), g, &used, base_opts(), BASE_NONCE)?;
    store.commit(&Commit {
        allocated: vec![Extent::new(3100, 40), Extent::new(60, 5)],
        freed: vec![Extent::new(10, 20)],
    })?;
    store.commit(&Commit {
        allocated: vec![Extent::new(900, 300)],
        freed: vec![Extent::new(1600, 100), Extent::new(3110, 10)],
    })?;
    Ok(dev.to_bytes())
}

/// Where [`replay_log`] input goes in the base image: the two markers, then the two record
/// slots (`(offset, capacity)` each).
fn log_places() -> ([u64; 2], [(u64, usize); 2]) {
    let layout = crate::store::format::Layout::new(&base_geometry(), base_opts().log_len)
        .expect("valid layout");
    let cap = layout.record_capacity() as usize;
    (
        [layout.marker_at(0), layout.marker_at(1)],
        [(layout.record_at(0), cap), (layout.record_at(1), cap)],
    )
}

/// Input layout: a mode byte, 32 bytes over marker 0, 32 over marker 1, a little-endian `u16`
/// n, n bytes over record slot 0, the rest over record slot 1. Short input overwrites less;
/// what it does not reach keeps the base image's bytes (real records, for mutations to start
/// from). Mode bit 0 set: the harness then stamps this store's nonce and correct checksums on
/// both markers and both records, so that the fuzzer explores what a record *says* rather
/// than spending its time forging crc32c values.
fn overlay_log(image: &mut [u8], input: &[u8]) {
    let (mode, input) = input.split_first().map_or((0, input), |(m, r)| (*m, r));
    overlay_raw(image, input);
    if mode & 1 == 1 {
        stamp_log(image);
    }
}

fn overlay_raw(image: &mut [u8], input: &[u8]) {
    let (markers, slots) = log_places();
    let mut put = |at: u64, bytes: &[u8], room: usize| {
        let n = bytes.len().min(room);
        image[at as usize..at as usize + n].copy_from_slice(&bytes[..n]);
    };
    let (m0, rest) = input.split_at(input.len().min(32));
    put(markers[0], m0, 32);
    let (m1, rest) = rest.split_at(rest.len().min(32));
    put(markers[1], m1, 32);
    let (len, rest) = rest.split_at(rest.len().min(2));
    let n = match len {
        [a, b] => usize::from(u16::from_le_bytes([*a, *b])),
        _ => 0,
    };
    let (s0, s1) = rest.split_at(rest.len().min(n));
    put(slots[0].0, s0, slots[0].1);
    put(slots[1].0, s1, slots[1].1);
}

/// Writes the nonce and a correct checksum into both markers and both record headers
/// (checksum at byte 28; a record's covers its header and `body_len` body bytes, clamped to
/// the slot).
fn stamp_log(image: &mut [u8]) {
    let (markers, slots) = log_places();
    for m in markers {
        stamp(image, m as usize, 0);
    }
    for (at, cap) in slots {
        let at = at as usize;
        let body = u32::from_le_bytes(image[at + 24..at + 28].try_into().expect("4 bytes"));
        stamp(image, at, (body as usize).min(cap - 32));
    }
}

/// Nonce at byte 8, crc32c of bytes `..28` and of `covered` bytes after the 32-byte header.
fn stamp(image: &mut [u8], at: usize, covered: usize) {
    image[at + 8..at + 16].copy_from_slice(&BASE_NONCE.to_le_bytes());
    let crc = crc32c::crc32c(&image[at..at + 28]);
    let crc = crc32c::crc32c_append(crc, &image[at + 32..at + 32 + covered]);
    image[at + 28..at + 32].copy_from_slice(&crc.to_le_bytes());
}

/// The [`replay_log`] input that reproduces the base image's own log (a seed).
pub fn replay_seed() -> Vec<u8> {
    let base = replay_base();
    let (markers, slots) = log_places();
    let take = |at: u64, n: usize| base[at as usize..at as usize + n].to_vec();
    let record = |at: u64| {
        let body_len = u32::from_le_bytes(take(at + 24, 4).try_into().expect("4 bytes"));
        take(at, 32 + body_len as usize)
    };
    let (r0, r1) = (record(slots[0].0), record(slots[1].0));
    let mut out = vec![0u8];
    out.extend(take(markers[0], 32));
    out.extend(take(markers[1], 32));
    out.extend((r0.len() as u16).to_le_bytes());
    out.extend(r0);
    out.extend(r1);
    out
}

/// Replaces the base store's log with `input`, opens (recovering), and checks the invariants.
pub fn replay_log(input: &[u8]) -> Result<Outcome, Violation> {
    let mut image = replay_base().to_vec();
    overlay_log(&mut image, input);
    let dev = Arc::new(MemDevice::from_bytes(image));
    check_read_only(&dev)?;
    let store = match FileStore::open_on(dev.clone()) {
        Err(e) => return Ok(Outcome::Rejected(e)),
        Ok(s) => s,
    };
    // The base is clean; replay rewrites whole groups with fresh checksums and counts, or
    // (for a record that does not fit the bitmap it claims to change) leaves them alone and
    // reports them corrupt.
    let problems = store
        .verify()
        .map_err(|e| violation(format!("fsck: {e}")))?;
    if !problems.is_empty() {
        return Err(violation(format!("fsck after recovery: {problems:?}")));
    }
    let skip = store.corrupt_groups();
    let bitmaps = all_bitmaps(&store, &skip)?;
    let again = FileStore::open_on(dev.clone())
        .map_err(|e| violation(format!("second open after recovery: {e}")))?;
    if again.recovered().is_some() || again.last_commit() != store.last_commit() {
        return Err(violation(format!(
            "second open replayed {:?} / moved from commit {:?} to {:?}",
            again.recovered(),
            store.last_commit(),
            again.last_commit()
        )));
    }
    if all_bitmaps(&again, &skip)? != bitmaps {
        return Err(violation("second open sees other bitmaps"));
    }
    drop(again);
    exercise(&dev, store).map(Outcome::Opened)
}

/// Every group's bitmap but those in `skip`.
fn all_bitmaps(store: &FileStore, skip: &[u32]) -> Result<Vec<Vec<u8>>, Violation> {
    (0..store.geometry().group_count())
        .filter(|g| !skip.contains(g))
        .map(|g| {
            store
                .read_bitmap(g)
                .map(|b| b.as_bytes().to_vec())
                .map_err(|e| violation(format!("group {g} after recovery: {e}")))
        })
        .collect()
}

/// Checks an opened store, then drives an allocator on it: allocate, free, commit, reopen.
fn exercise(dev: &Arc<MemDevice>, store: FileStore) -> Result<Summary, Violation> {
    let geo = store.geometry();
    let mut summary = Summary {
        groups: geo.group_count(),
        replayed: store.recovered(),
        ..Summary::default()
    };
    check_groups(&store)?;
    summary.problems = store
        .verify()
        .map_err(|e| violation(format!("fsck of an opened store: {e}")))?
        .len();
    summary.corrupt = store.corrupt_groups();
    let before = store.last_commit();
    // Inline bitmap reads: the same run for the same bytes, and no threads per input.
    let a = Allocator::builder(geo)
        .store(store)
        .prefetch_threads(0)
        .build()
        .map_err(|e| violation(format!("open: {e}")))?;
    let got = allocate_some(&a, &geo);
    if let Some(first) = got.first() {
        a.free(1, *first)
            .map_err(|e| violation(format!("free of {first:?} just allocated: {e}")))?;
    }
    a.check_consistency().map_err(violation)?;
    match a.commit() {
        Ok(_) => {}
        // A log at the last sequence number takes no more commits, with a typed error.
        Err(crate::error::Error::CommitFailed {
            cause: StoreError::BadLog { .. },
            ..
        }) if !got.is_empty() && before.0 >= crate::store::log::MAX_SEQ => return Ok(summary),
        Err(e) => return Err(violation(format!("commit: {e}"))),
    }
    drop(a);
    let again = FileStore::open_on(dev.clone()).map_err(|e| violation(format!("reopen: {e}")))?;
    let expect = CommitId(before.0 + u64::from(!got.is_empty()));
    if again.last_commit() != expect || again.recovered().is_some() {
        return Err(violation(format!(
            "reopen at {:?} (replayed {:?}), expected {expect:?}",
            again.last_commit(),
            again.recovered()
        )));
    }
    for (i, e) in got.iter().enumerate() {
        for b in e.start..e.end() {
            let (g, off) = geo.locate(b);
            let used = again
                .read_bitmap(g)
                .map_err(|err| violation(format!("group {g} after commit: {err}")))?
                .is_used(off);
            if used != (i > 0) {
                return Err(violation(format!("block {b} used={used} after reopen")));
            }
        }
        summary.allocated += if i > 0 { u64::from(e.len) } else { 0 };
    }
    Ok(summary)
}

/// Every descriptor within bounds; every bitmap valid or reported corrupt.
fn check_groups(store: &FileStore) -> Result<(), Violation> {
    let geo = store.geometry();
    let descs = store.descriptors();
    if descs.len() != geo.group_count() as usize {
        return Err(violation(format!("{} descriptors", descs.len())));
    }
    for (g, d) in (0..).zip(&descs) {
        if d.free > geo.group_len(g) {
            return Err(violation(format!("group {g}: {} free", d.free)));
        }
        match store.read_bitmap(g) {
            Ok(b) if b.first_clear_padding().is_some() => {
                return Err(violation(format!("group {g}: padding clear")));
            }
            Ok(_) => {}
            Err(StoreError::Corrupt { group, .. }) if group == g => {
                if !store.corrupt_groups().contains(&g) {
                    return Err(violation(format!("group {g} corrupt but not listed")));
                }
            }
            Err(e) => return Err(violation(format!("group {g}: {e}"))),
        }
    }
    Ok(())
}

/// A few allocations of growing size; the typed errors of a full or damaged store are fine.
fn allocate_some(a: &Allocator, geo: &Geometry) -> Vec<Blocks> {
    let goals = [0, geo.blocks_count() / 2, geo.blocks_count() - 1];
    [1u32, 8, 100]
        .iter()
        .zip(goals)
        .filter_map(|(&len, goal)| {
            let req = Request::new(1, 0, len).with_flags(Flags(0)).with_goal(goal);
            a.allocate(&req).ok().map(|x| x.extent)
        })
        .collect()
}

/// `bytes` without its trailing zeros: what [`open_image`] needs to rebuild it (seeds).
pub fn trim_zeros(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    &bytes[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_image_and_its_own_log_open_cleanly() {
        let out = open_image(replay_base()).unwrap();
        assert!(
            matches!(out, Outcome::Opened(Summary { problems: 0, .. })),
            "{out:?}"
        );
        let out = open_image(trim_zeros(replay_base())).unwrap();
        assert!(
            matches!(out, Outcome::Opened(Summary { problems: 0, .. })),
            "{out:?}"
        );
        let out = replay_log(&replay_seed()).unwrap();
        assert!(
            matches!(out, Outcome::Opened(Summary { replayed: None, .. })),
            "{out:?}"
        );
    }

    #[test]
    fn a_cleared_marker_replays_the_latest_record() {
        let mut input = replay_seed();
        input[1..65].fill(0);
        match replay_log(&input).unwrap() {
            Outcome::Opened(s) => assert_eq!(s.replayed, Some(CommitId(2))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn stamping_makes_an_edited_record_count() {
        // Raise the latest record's sequence number past the markers: only with correct
        // checksums does recovery take it and replay it.
        let mut input = replay_seed();
        let seq_at = 1 + 64 + 2 + 16;
        input[seq_at] = 9;
        match replay_log(&input).unwrap() {
            Outcome::Opened(s) => assert_eq!(s.replayed, None, "a torn record is ignored"),
            other => panic!("{other:?}"),
        }
        input[0] = 1;
        match replay_log(&input).unwrap() {
            Outcome::Opened(s) => assert_eq!(s.replayed, Some(CommitId(9))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn junk_is_rejected_not_a_violation() {
        assert!(matches!(open_image(&[]), Ok(Outcome::Rejected(_))));
        assert!(matches!(
            open_image(&[0xff; 5000]),
            Ok(Outcome::Rejected(_))
        ));
        assert!(replay_log(&[0xab; 300]).is_ok());
    }
}
