//! The write-ahead log: what makes one commit atomic across groups.
//!
//! ```text
//! log_off + 0      marker slot 0  (32 bytes in its own sector)  \ "record `seq` is applied";
//! log_off + 512    marker slot 1  (32 bytes in its own sector)  / slot = seq % 2
//! log_off + 4096   record slot 0  \ (log_len - 4096) / 2 bytes each;
//!   + slot size    record slot 1  / commit `seq` goes to slot seq % 2
//! a record:
//!   header: magic u32, version u32, nonce u64, seq u64, body_len u32, crc32c u32
//!           (crc over the first 28 header bytes and the body)
//!   body:   group count u32, then per group: group u32, flags u32 (bit 0: bitmap was
//!           BLOCK_UNINIT before), run count u32, runs × (start u32, len u32 | 1 << 31 if set)
//! ```
//!
//! A commit writes its record, syncs, writes bitmaps and descriptors in place, syncs, then
//! writes a marker without syncing (a lost marker only costs an idempotent replay).
//!
//! Record slots alternate. While commit `n + 1`'s record is being written (and may tear), the
//! other slot still holds commit `n`'s intact record, so recovery always finds the latest
//! committed sequence number even if `n`'s marker never reached the disk; replaying `n` again is
//! harmless. A torn record fails its checksum and is ignored: its commit never returned `Ok`.
//! Markers alternate too, so a torn marker never loses the last applied number.

use std::collections::HashSet;

use super::delta::{check_extent, for_each_piece, push_merged, Op, Run};
use super::format::{put_u32, put_u64, Reader};
use super::StoreError;
use super::{Commit, Extent};
use crate::geometry::Geometry;

const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"MBLR");
const MARKER_MAGIC: u32 = u32::from_le_bytes(*b"MBLM");
const LOG_VERSION: u32 = 1;
pub(crate) const RECORD_HEADER: usize = 32;
pub(crate) const MARKER_LEN: usize = 32;
const SET_BIT: u32 = 1 << 31;
/// Highest commit sequence number a log may hold: a store committing a million times a
/// second would need 146,000 years to get there, so a record beyond it is not ours.
pub(crate) const MAX_SEQ: u64 = 1 << 62;

/// One commit, as the log stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub seq: u64,
    pub groups: Vec<RecordGroup>,
}

/// A group's part of a record. `base_uninit` says the group's bitmap was never written before
/// this commit, so replay must start from an all-free bitmap rather than the stale bytes on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordGroup {
    pub group: u32,
    pub base_uninit: bool,
    pub runs: Vec<Run>,
}

/// Bytes of a record before its first group entry: the header and the group count.
pub(crate) const RECORD_FIXED: u64 = RECORD_HEADER as u64 + 4;
/// Bytes of a group entry before its runs: group, flags, run count.
pub(crate) const GROUP_ENTRY: u64 = 12;
/// Bytes of one run.
pub(crate) const RUN_ENTRY: u64 = 8;

/// Bytes `rec` will take in the log.
pub(crate) fn record_len(rec: &Record) -> u64 {
    let groups: u64 = rec
        .groups
        .iter()
        .map(|g| GROUP_ENTRY + RUN_ENTRY * g.runs.len() as u64)
        .sum();
    RECORD_FIXED + groups
}

pub(crate) fn encode_record(nonce: u64, rec: &Record) -> Vec<u8> {
    let mut body = Vec::with_capacity(record_len(rec) as usize);
    put_u32(&mut body, rec.groups.len() as u32);
    for g in &rec.groups {
        put_u32(&mut body, g.group);
        put_u32(&mut body, u32::from(g.base_uninit));
        put_u32(&mut body, g.runs.len() as u32);
        for r in &g.runs {
            put_u32(&mut body, r.start);
            put_u32(&mut body, r.len | if r.op == Op::Set { SET_BIT } else { 0 });
        }
    }
    let mut out = Vec::with_capacity(RECORD_HEADER + body.len());
    put_u32(&mut out, RECORD_MAGIC);
    put_u32(&mut out, LOG_VERSION);
    put_u64(&mut out, nonce);
    put_u64(&mut out, rec.seq);
    put_u32(&mut out, body.len() as u32);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out), &body);
    put_u32(&mut out, crc);
    out.extend_from_slice(&body);
    out
}

/// A record header that belongs to this store: its sequence number, body length and checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub seq: u64,
    pub body_len: u32,
    crc: u32,
    prefix_crc: u32,
}

impl Header {
    /// The checksum state after the header, to feed a body through piece by piece.
    pub(crate) fn crc_start(&self) -> u32 {
        self.prefix_crc
    }
    /// Whether a body fed through from [`crc_start`](Self::crc_start) matches the header.
    pub(crate) fn crc_matches(&self, crc: u32) -> bool {
        crc == self.crc
    }
}

/// Reads a record header; `None` if it is not one of this store's (never written, torn, or left
/// by an earlier store) or claims a body larger than the log.
pub(crate) fn decode_header(nonce: u64, bytes: &[u8], capacity: u64) -> Option<Header> {
    let mut r = Reader::new(bytes);
    let (magic, version, n, seq, body_len, crc) =
        (r.u32()?, r.u32()?, r.u64()?, r.u64()?, r.u32()?, r.u32()?);
    let fits = u64::from(body_len) + RECORD_HEADER as u64 <= capacity;
    if magic != RECORD_MAGIC || version != LOG_VERSION || n != nonce || !fits {
        return None;
    }
    let prefix_crc = crc32c::crc32c(bytes.get(..RECORD_HEADER - 4)?);
    Some(Header {
        seq,
        body_len,
        crc,
        prefix_crc,
    })
}

/// Decodes a record body. `Ok(None)`: the checksum fails, i.e. a torn write of a commit that
/// never returned. `Err`: the checksum holds but the contents are impossible (a bug).
pub(crate) fn decode_body(
    geometry: &Geometry,
    h: &Header,
    body: &[u8],
) -> Result<Option<Record>, StoreError> {
    if crc32c::crc32c_append(h.prefix_crc, body) != h.crc {
        return Ok(None);
    }
    let bad = |what: String| StoreError::BadLog { seq: h.seq, what };
    if h.seq == 0 || h.seq > MAX_SEQ {
        return Err(bad(format!(
            "sequence number {} is outside 1..={MAX_SEQ}",
            h.seq
        )));
    }
    let mut r = Reader::new(body);
    let count = r.u32().ok_or_else(|| bad("no group count".into()))?;
    let mut groups: Vec<RecordGroup> = Vec::new();
    for i in 0..count {
        let g = decode_group(geometry, &mut r).map_err(|w| bad(format!("group entry {i}: {w}")))?;
        if groups.last().is_some_and(|prev| prev.group >= g.group) {
            return Err(bad(format!("group {} out of order", g.group)));
        }
        groups.push(g);
    }
    if r.u32().is_some() {
        return Err(bad("trailing bytes after the last group".into()));
    }
    Ok(Some(Record { seq: h.seq, groups }))
}

fn decode_group(geometry: &Geometry, r: &mut Reader<'_>) -> Result<RecordGroup, String> {
    let (group, flags, n) = (|| Some((r.u32()?, r.u32()?, r.u32()?)))().ok_or("truncated")?;
    if group >= geometry.group_count() || flags > 1 {
        return Err(format!("group {group} flags {flags:#x}"));
    }
    let group_len = geometry.group_len(group);
    let mut runs = Vec::new();
    for _ in 0..n {
        let (start, raw) = (|| Some((r.u32()?, r.u32()?)))().ok_or("truncated run")?;
        let len = raw & !SET_BIT;
        let op = if raw & SET_BIT != 0 {
            Op::Set
        } else {
            Op::Clear
        };
        if len == 0 || u64::from(start) + u64::from(len) > u64::from(group_len) {
            return Err(format!(
                "run [{start}, +{len}) outside the group's {group_len} blocks"
            ));
        }
        runs.push(Run { start, len, op });
    }
    Ok(RecordGroup {
        group,
        base_uninit: flags == 1,
        runs,
    })
}

pub(crate) fn encode_marker(nonce: u64, seq: u64) -> [u8; MARKER_LEN] {
    let mut out = Vec::with_capacity(MARKER_LEN);
    put_u32(&mut out, MARKER_MAGIC);
    put_u32(&mut out, LOG_VERSION);
    put_u64(&mut out, nonce);
    put_u64(&mut out, seq);
    put_u32(&mut out, 0);
    let crc = crc32c::crc32c(&out);
    put_u32(&mut out, crc);
    let mut fixed = [0u8; MARKER_LEN];
    fixed.copy_from_slice(&out);
    fixed
}

/// The sequence number a marker says is applied, if the marker is intact and this store's.
pub(crate) fn decode_marker(nonce: u64, bytes: &[u8]) -> Option<u64> {
    let mut r = Reader::new(bytes);
    let (magic, version, n, seq, _, crc) =
        (r.u32()?, r.u32()?, r.u64()?, r.u64()?, r.u32()?, r.u32()?);
    let ok = magic == MARKER_MAGIC
        && version == LOG_VERSION
        && n == nonce
        && crc == crc32c::crc32c(bytes.get(..MARKER_LEN - 4)?);
    ok.then_some(seq)
}

/// Cuts `commit` into commits whose log records each fit in `capacity` bytes, applied one after
/// another to the same effect: allocations before frees (as within one commit), extents in
/// their order, an extent cut only at group boundaries, touching extents of a piece merged.
/// Each piece is valid on its own, so a crash between two leaves blocks allocated and not yet
/// freed (leaked until the next check), never a block free that is in use.
///
/// The size of each piece is counted as the log counts it (see `log::record_len`): a fixed
/// part, then per group touched an entry, and per group-sized piece of an extent a run.
pub fn fit_commit(
    geometry: &Geometry,
    commit: &Commit,
    capacity: u64,
) -> Result<Vec<Commit>, StoreError> {
    let smallest = RECORD_FIXED + GROUP_ENTRY + RUN_ENTRY;
    if capacity < smallest {
        return Err(StoreError::CommitTooLarge {
            bytes: smallest,
            capacity,
        });
    }
    let mut out = Vec::new();
    let mut cur = Commit::default();
    let mut groups = HashSet::new();
    let mut used = RECORD_FIXED;
    for (op, extents) in [(Op::Set, &commit.allocated), (Op::Clear, &commit.freed)] {
        for e in extents {
            check_extent(geometry, e)?;
            for_each_piece(geometry, e, |group, start, len| {
                let cost =
                    |g: &HashSet<u32>| RUN_ENTRY + GROUP_ENTRY * u64::from(!g.contains(&group));
                if used + cost(&groups) > capacity {
                    out.push(std::mem::take(&mut cur));
                    groups.clear();
                    used = RECORD_FIXED;
                }
                used += cost(&groups);
                groups.insert(group);
                let list = match op {
                    Op::Set => &mut cur.allocated,
                    Op::Clear => &mut cur.freed,
                };
                push_merged(
                    list,
                    Extent::new(geometry.block_of(group, start), u64::from(len)),
                );
            });
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry() -> Geometry {
        Geometry::new(1024, 1024, 4000, 0, 1).unwrap()
    }

    fn record() -> Record {
        let run = |start, len, op| Run { start, len, op };
        Record {
            seq: 42,
            groups: vec![
                RecordGroup {
                    group: 0,
                    base_uninit: false,
                    runs: vec![run(3, 5, Op::Set), run(9, 1, Op::Clear)],
                },
                RecordGroup {
                    group: 3,
                    base_uninit: true,
                    runs: vec![run(0, 928, Op::Set)],
                },
            ],
        }
    }

    fn decode(bytes: &[u8]) -> Result<Option<Record>, StoreError> {
        let Some(h) = decode_header(7, bytes, 1 << 20) else {
            return Ok(None);
        };
        let body = &bytes[RECORD_HEADER..][..h.body_len as usize];
        decode_body(&geometry(), &h, body)
    }

    #[test]
    fn record_round_trips() {
        let bytes = encode_record(7, &record());
        assert_eq!(bytes.len() as u64, record_len(&record()));
        assert_eq!(decode(&bytes).unwrap(), Some(record()));
    }

    #[test]
    fn any_damaged_byte_makes_the_record_absent() {
        let bytes = encode_record(7, &record());
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            let got = decode_header(7, &b, 1 << 20).map(|h| {
                let body = b
                    .get(RECORD_HEADER..RECORD_HEADER + h.body_len as usize)
                    .unwrap_or(&[]);
                decode_body(&geometry(), &h, body)
            });
            assert!(matches!(got, None | Some(Ok(None))), "byte {i}: {got:?}");
        }
    }

    #[test]
    fn other_stores_records_are_ignored() {
        let bytes = encode_record(8, &record());
        assert_eq!(decode(&bytes).unwrap(), None);
    }

    #[test]
    fn checksummed_nonsense_is_an_error() {
        let mut rec = record();
        rec.groups[1].group = 99;
        assert!(matches!(
            decode(&encode_record(7, &rec)),
            Err(StoreError::BadLog { seq: 42, .. })
        ));
        let mut rec = record();
        rec.groups[0].runs[0].len = 2000;
        assert!(decode(&encode_record(7, &rec)).is_err());
    }

    #[test]
    fn impossible_sequence_numbers_are_an_error() {
        for seq in [0, MAX_SEQ + 1, u64::MAX] {
            let rec = Record { seq, ..record() };
            assert!(
                matches!(
                    decode(&encode_record(7, &rec)),
                    Err(StoreError::BadLog { .. })
                ),
                "seq {seq}"
            );
        }
        let rec = Record {
            seq: MAX_SEQ,
            ..record()
        };
        assert!(decode(&encode_record(7, &rec)).unwrap().is_some());
    }

    #[test]
    fn marker_round_trips_and_rejects_damage() {
        let m = encode_marker(7, 99);
        assert_eq!(decode_marker(7, &m), Some(99));
        assert_eq!(decode_marker(8, &m), None);
        for i in 0..MARKER_LEN {
            let mut b = m;
            b[i] ^= 4;
            assert_eq!(decode_marker(7, &b), None, "byte {i}");
        }
    }
}
