//! Recovery at open: find the log's latest record and, if no marker says it was applied,
//! replay it.
//!
//! Replay rebuilds each touched group from its base (all-free if the record says the group was
//! `BLOCK_UNINIT`, else the bitmap on disk, whatever mix of old and new bytes a torn checkpoint
//! left) by applying the record's runs. The runs cover every bit the commit changed and set /
//! clear are idempotent, so the result is exactly the committed bitmap; free counts and
//! checksums are then recomputed from it, never trusted from a possibly torn descriptor.
//! Replay is itself idempotent, so a crash during recovery is recovered the same way. A
//! read-only open does the same rebuild in memory and writes nothing.

use super::bitmap::{count_set, BitmapBytes};
use super::checkpoint::{write_groups, DevIo, GroupImage};
use super::delta::apply_unchecked;
use super::format::{bitmap_crc, decode_superblock, DiskDesc, Superblock, SB_AREA};
use super::log::{
    decode_body, decode_header, decode_marker, encode_marker, Header, Record, MARKER_LEN, MAX_SEQ,
    RECORD_HEADER,
};
use super::replay_check::implausible_replay;
use super::{Access, StoreError};

/// What recovery found and did.
pub(crate) struct Recovered {
    /// The latest commit on disk.
    pub seq: u64,
    /// The commit replayed, if one was.
    pub replayed: Option<u64>,
    /// Bitmaps replay wrote, to seed the cache.
    pub bitmaps: GroupBitmaps,
    /// Groups replay left alone because their bitmap on disk was damaged, and why.
    pub corrupt: Vec<(u32, String)>,
}

/// Groups and their rebuilt bitmaps.
pub(crate) type GroupBitmaps = Vec<(u32, Box<[u8]>)>;

/// Finds the latest commit and replays it if no marker says it was applied. `Access::ReadOnly`
/// replays in memory only: the rebuilt bitmaps come back, nothing is written or synced, and
/// the next read-write open replays the same record on disk.
pub(crate) fn recover(
    io: &DevIo,
    sb: &Superblock,
    access: Access,
) -> Result<Recovered, StoreError> {
    let (applied, record) = log_state(io, sb)?;
    match record {
        Some(rec) if rec.seq > applied && access == Access::ReadOnly => {
            let (bitmaps, corrupt) = rebuild(io, sb, &rec)?;
            Ok(Recovered {
                seq: rec.seq,
                replayed: Some(rec.seq),
                bitmaps,
                corrupt,
            })
        }
        Some(rec) if rec.seq > applied => {
            // The record read back may exist only in a cache (recovery after a failed sync on
            // a live device): make it durable before the first in-place write, or a crash
            // could leave half-replayed groups and no record to finish them.
            io.sync("sync the log record before replay")?;
            let (bitmaps, corrupt) = replay(io, sb, &rec)?;
            let marker = encode_marker(sb.nonce, rec.seq);
            io.write(
                "mark the log applied",
                sb.layout.marker_at(rec.seq),
                &marker,
            )?;
            io.sync("sync the log marker")?;
            Ok(Recovered {
                seq: rec.seq,
                replayed: Some(rec.seq),
                bitmaps,
                corrupt,
            })
        }
        Some(rec) => Ok(Recovered {
            seq: applied.max(rec.seq),
            replayed: None,
            bitmaps: Vec::new(),
            corrupt: Vec::new(),
        }),
        None => Ok(Recovered {
            seq: applied,
            replayed: None,
            bitmaps: Vec::new(),
            corrupt: Vec::new(),
        }),
    }
}

/// The highest applied sequence number and the record in the slot, if intact. Sequence
/// numbers start at 1, so "no intact marker" and "nothing applied" both read as 0.
///
/// A marker may be ahead of every intact record (the applied record rotted after its marker
/// was written): the state in place is then the marker's, and nothing needs replaying. A
/// marker beyond [`MAX_SEQ`] is checksummed nonsense, never a torn write.
pub(crate) fn log_state(io: &DevIo, sb: &Superblock) -> Result<(u64, Option<Record>), StoreError> {
    let applied = read_markers(io, sb)?.unwrap_or(0);
    if applied > MAX_SEQ {
        return Err(StoreError::BadLog {
            seq: applied,
            what: format!("a marker's sequence number is beyond {MAX_SEQ}"),
        });
    }
    Ok((applied, read_record(io, sb)?))
}

/// The highest sequence number an intact marker records.
fn read_markers(io: &DevIo, sb: &Superblock) -> Result<Option<u64>, StoreError> {
    let mut best = None;
    for slot in 0..2 {
        let bytes = io.read("read a log marker", sb.layout.marker_at(slot), MARKER_LEN)?;
        best = best.max(decode_marker(sb.nonce, &bytes));
    }
    Ok(best)
}

/// The latest complete record of this store, from either slot.
fn read_record(io: &DevIo, sb: &Superblock) -> Result<Option<Record>, StoreError> {
    let mut best: Option<Record> = None;
    for slot in 0..2 {
        let rec = read_slot(io, sb, sb.layout.record_at(slot))?;
        if rec.as_ref().map(|r| r.seq) > best.as_ref().map(|b| b.seq) {
            best = rec;
        }
    }
    Ok(best)
}

fn read_slot(io: &DevIo, sb: &Superblock, at: u64) -> Result<Option<Record>, StoreError> {
    let head = io.read("read a log record header", at, RECORD_HEADER)?;
    let Some(h) = decode_header(sb.nonce, &head, sb.layout.record_capacity()) else {
        return Ok(None);
    };
    if !body_crc_matches(io, &h, at + RECORD_HEADER as u64)? {
        return Ok(None);
    }
    let body = io.read(
        "read a log record",
        at + RECORD_HEADER as u64,
        h.body_len as usize,
    )?;
    decode_body(&sb.geometry, &h, &body)
}

/// Checks a record body's checksum reading it a piece at a time, so that a header claiming a
/// body of hundreds of megabytes over a hole costs a bounded buffer, not that much memory.
fn body_crc_matches(io: &DevIo, h: &Header, at: u64) -> Result<bool, StoreError> {
    const PIECE: u64 = 1 << 20;
    let (mut crc, mut done, len) = (h.crc_start(), 0u64, u64::from(h.body_len));
    while done < len {
        let n = PIECE.min(len - done);
        let piece = io.read("read a log record", at + done, n as usize)?;
        crc = crc32c::crc32c_append(crc, &piece);
        done += n;
    }
    Ok(h.crc_matches(crc))
}

/// Rewrites every group the record touches and syncs; a group whose base on disk is damaged
/// is left alone and returned as corrupt (see `replay_check`).
fn replay(
    io: &DevIo,
    sb: &Superblock,
    rec: &Record,
) -> Result<(GroupBitmaps, Vec<(u32, String)>), StoreError> {
    let (rebuilt, corrupt) = rebuild(io, sb, rec)?;
    let descs: Vec<DiskDesc> = rebuilt.iter().map(|(g, b)| desc_for(sb, *g, b)).collect();
    let images: Vec<GroupImage<'_>> = rebuilt
        .iter()
        .zip(&descs)
        .map(|((group, bitmap), desc)| GroupImage {
            group: *group,
            desc: *desc,
            bitmap,
        })
        .collect();
    write_groups(io, sb, &images)?;
    io.sync("sync the replayed groups")?;
    Ok((rebuilt, corrupt))
}

/// Every group the record touches, rebuilt in memory from its base and the record's runs;
/// groups whose base on disk is damaged come back apart, as corrupt.
fn rebuild(
    io: &DevIo,
    sb: &Superblock,
    rec: &Record,
) -> Result<(GroupBitmaps, Vec<(u32, String)>), StoreError> {
    let mut rebuilt = Vec::with_capacity(rec.groups.len());
    let mut corrupt = Vec::new();
    for g in &rec.groups {
        let mut bitmap = if g.base_uninit {
            BitmapBytes::all_free(&sb.geometry, g.group).into_bytes()
        } else {
            let at = sb.layout.bitmap_at(g.group);
            io.read("read a bitmap to replay", at, sb.layout.bitmap_len)?
                .into_boxed_slice()
        };
        apply_unchecked(&mut bitmap, &g.runs);
        match implausible_replay(io, sb, rec.seq, g, &bitmap)? {
            Some(why) => corrupt.push((g.group, why)),
            None => rebuilt.push((g.group, bitmap)),
        }
    }
    Ok((rebuilt, corrupt))
}

/// The descriptor that matches a written bitmap.
pub(crate) fn desc_for(sb: &Superblock, group: u32, bitmap: &[u8]) -> DiskDesc {
    let len = sb.geometry.group_len(group);
    let free = len - count_set(bitmap, 0, len);
    DiskDesc {
        free,
        flags: 0,
        bitmap_crc: bitmap_crc(sb.nonce, group, bitmap),
    }
}

/// Reads and validates the superblock, and checks the device against it before anything the
/// superblock sizes is allocated: the device must be as long as the layout, and (where it can
/// be sparse) really hold enough bytes for the descriptor table that create wrote in full.
pub(crate) fn read_superblock(io: &DevIo) -> Result<Superblock, StoreError> {
    let have = io.len()?;
    if have < SB_AREA {
        return Err(StoreError::BadSuperblock {
            what: format!("device holds only {have} bytes"),
        });
    }
    let sb = decode_superblock(&io.read("read the superblock", 0, SB_AREA as usize)?)?;
    if have < sb.layout.total {
        let what = format!(
            "device holds {have} bytes but the layout needs {}",
            sb.layout.total
        );
        return Err(StoreError::BadSuperblock { what });
    }
    check_allocated(io, &sb)?;
    Ok(sb)
}

/// A sparse file can claim any length for free, so length alone does not bound the work a
/// superblock asks for. Create writes every descriptor, and each carries a 4-byte checksum that
/// no compression removes, so a genuine store holds at least a quarter of its table's bytes;
/// one eighth leaves a margin. Less means most of the table is a hole: not a store.
fn check_allocated(io: &DevIo, sb: &Superblock) -> Result<(), StoreError> {
    let Some(real) = io.allocated_len()? else {
        return Ok(());
    };
    let table = sb.layout.desc_table_len() as u64;
    if real >= table / 8 {
        return Ok(());
    }
    Err(StoreError::BadSuperblock {
        what: format!(
            "{} groups need a {table}-byte descriptor table, but the device holds only {real} \
             bytes of data (the rest is a hole): not a store",
            sb.layout.groups
        ),
    })
}
