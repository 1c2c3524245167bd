//! The on-disk layout of a [`FileStore`](super::FileStore): superblock, descriptor table and
//! bitmaps, and how each is encoded and checked.
//!
//! ```text
//! offset               size                        contents
//! 0                    4 KiB                       superblock (128 bytes used, crc32c)
//! 4 KiB                groups × 16, 4 KiB aligned  descriptors: free u32, flags u16, 0 u16,
//!                                                  bitmap crc32c u32, descriptor crc32c u32
//! desc end             groups × stride             bitmaps, blocks_per_group / 8 bytes each,
//!                                                  stride rounded up to 512 bytes
//! log_off              log_len                     write-ahead log (see `log`)
//! ```
//!
//! All integers are little-endian. Every checksum is seeded with a per-store random nonce and,
//! for per-group items, the group number, so a block written to the wrong place or left over
//! from an earlier store on the same device fails its check. The superblock is written once,
//! at create, last: a crash during create leaves no valid superblock rather than half a store.

use super::bitmap::bitmap_len;
use super::{GroupFlags, Problem, StoreError};
use crate::geometry::Geometry;

pub(crate) const MAGIC: [u8; 8] = *b"MBALLOC\0";
pub(crate) const VERSION: u32 = 1;
/// Bytes reserved for the superblock; the encoded part is `SB_LEN`.
pub(crate) const SB_AREA: u64 = 4096;
const SB_LEN: usize = 128;
pub(crate) const DESC_LEN: usize = 16;
/// The log's fixed head: two marker sectors, then the record at this offset.
pub(crate) const LOG_HEAD: u64 = 4096;
/// Default log size: two record slots of about 2 MiB.
pub(crate) const DEFAULT_LOG_LEN: u64 = 4 << 20;
/// Largest log a store may have. The allocator splits a commit to fit the log, so a larger one
/// buys nothing, and a superblock claiming more is not trusted with a read that large.
pub const MAX_LOG_LEN: u64 = 1 << 30;

/// Where everything lives; a pure function of geometry and log size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub groups: u32,
    pub desc_off: u64,
    pub bitmap_off: u64,
    pub bitmap_stride: u64,
    pub bitmap_len: usize,
    pub log_off: u64,
    pub log_len: u64,
    pub total: u64,
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

impl Layout {
    pub(crate) fn new(geometry: &Geometry, log_len: u64) -> Result<Self, StoreError> {
        if !(2 * LOG_HEAD..=MAX_LOG_LEN).contains(&log_len) {
            return Err(StoreError::Geometry {
                what: format!(
                    "log_len {log_len} is outside {}..={MAX_LOG_LEN}",
                    2 * LOG_HEAD
                ),
            });
        }
        let groups = geometry.group_count();
        let bitmap_len = bitmap_len(geometry);
        let desc_off = SB_AREA;
        let bitmap_off = desc_off + round_up(u64::from(groups) * DESC_LEN as u64, 4096);
        let bitmap_stride = round_up(bitmap_len as u64, 512);
        let log_off = round_up(bitmap_off + u64::from(groups) * bitmap_stride, 4096);
        let total = log_off
            .checked_add(log_len)
            .ok_or_else(|| StoreError::Geometry {
                what: format!("log_len {log_len} overflows the device size"),
            })?;
        Ok(Layout {
            groups,
            desc_off,
            bitmap_off,
            bitmap_stride,
            bitmap_len,
            log_off,
            log_len,
            total,
        })
    }

    pub(crate) fn desc_at(&self, group: u32) -> u64 {
        self.desc_off + u64::from(group) * DESC_LEN as u64
    }
    pub(crate) fn bitmap_at(&self, group: u32) -> u64 {
        self.bitmap_off + u64::from(group) * self.bitmap_stride
    }
    pub(crate) fn desc_table_len(&self) -> usize {
        self.groups as usize * DESC_LEN
    }
    pub(crate) fn marker_at(&self, slot: u64) -> u64 {
        self.log_off + (slot % 2) * 512
    }
    /// Record slot for commit `seq`: slots alternate so that writing commit `seq` never
    /// overwrites commit `seq - 1`'s record.
    pub(crate) fn record_at(&self, seq: u64) -> u64 {
        self.log_off + LOG_HEAD + (seq % 2) * self.record_capacity()
    }
    /// Bytes in one record slot.
    pub(crate) fn record_capacity(&self) -> u64 {
        ((self.log_len - LOG_HEAD) / 2) & !511
    }
}

/// The superblock's contents once decoded and validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Superblock {
    pub geometry: Geometry,
    pub nonce: u64,
    pub layout: Layout,
}

/// Little-endian reader that reports truncation instead of panicking.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let end = self.at.checked_add(N)?;
        let out = self.bytes.get(self.at..end)?.try_into().ok()?;
        self.at = end;
        Some(out)
    }
    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }
    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    pub(crate) fn bytes8(&mut self) -> Option<[u8; 8]> {
        self.take()
    }
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// crc32c of `parts` in sequence, seeded with the store nonce.
pub(crate) fn checksum(nonce: u64, parts: &[&[u8]]) -> u32 {
    let mut crc = crc32c::crc32c(&nonce.to_le_bytes());
    for p in parts {
        crc = crc32c::crc32c_append(crc, p);
    }
    crc
}

/// A fresh nonce. Uniqueness, not secrecy, is the point: it tells this store's log records
/// apart from those of an earlier store created on the same device.
pub(crate) fn new_nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    h.write_u128(now.map(|d| d.as_nanos()).unwrap_or(0));
    h.write_u32(std::process::id());
    h.finish()
}

/// The 4 KiB superblock area.
pub(crate) fn encode_superblock(sb: &Superblock) -> Vec<u8> {
    let (g, l) = (&sb.geometry, &sb.layout);
    let mut out = Vec::with_capacity(SB_AREA as usize);
    out.extend_from_slice(&MAGIC);
    put_u32(&mut out, VERSION);
    put_u32(&mut out, SB_LEN as u32);
    put_u32(&mut out, g.block_size());
    put_u32(&mut out, g.clusters_per_group());
    put_u64(&mut out, g.blocks_count());
    put_u64(&mut out, g.first_data_block());
    put_u32(&mut out, g.flex_bg_size());
    put_u32(&mut out, l.groups);
    put_u64(&mut out, sb.nonce);
    for v in [
        l.desc_off,
        l.bitmap_off,
        l.bitmap_stride,
        l.log_off,
        l.log_len,
    ] {
        put_u64(&mut out, v);
    }
    out.resize(SB_LEN - 4, 0);
    let crc = crc32c::crc32c(&out);
    put_u32(&mut out, crc);
    out.resize(SB_AREA as usize, 0);
    out
}

fn bad(what: impl Into<String>) -> StoreError {
    StoreError::BadSuperblock { what: what.into() }
}

/// Decodes and validates a superblock: magic, checksum, version, geometry, and a layout that
/// agrees with what the geometry implies (so no stored offset can point anywhere odd).
pub(crate) fn decode_superblock(bytes: &[u8]) -> Result<Superblock, StoreError> {
    let body = bytes
        .get(..SB_LEN)
        .ok_or_else(|| bad(format!("only {} bytes", bytes.len())))?;
    let mut r = Reader::new(body);
    let truncated = || bad("truncated");
    let magic = r.bytes8().ok_or_else(truncated)?;
    if magic != MAGIC {
        return Err(bad(format!(
            "magic {magic:02x?} is not {MAGIC:02x?}: not an mballoc store"
        )));
    }
    let stored = u32::from_le_bytes([body[124], body[125], body[126], body[127]]);
    let computed = crc32c::crc32c(&body[..SB_LEN - 4]);
    if stored != computed {
        return Err(bad(format!(
            "checksum {stored:#010x}, computed {computed:#010x}"
        )));
    }
    let version = r.u32().ok_or_else(truncated)?;
    let sb_len = r.u32().ok_or_else(truncated)?;
    if version != VERSION || sb_len != SB_LEN as u32 {
        return Err(bad(format!(
            "version {version} / length {sb_len}; this build reads {VERSION} / {SB_LEN}"
        )));
    }
    let fields = (|| {
        let geometry = (r.u32()?, r.u32()?, r.u64()?, r.u64()?, r.u32()?);
        let (groups, nonce) = (r.u32()?, r.u64()?);
        let offsets = [r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?];
        Some((geometry, groups, nonce, offsets))
    })();
    let ((bs, bpg, count, first, flex), groups, nonce, offsets) = fields.ok_or_else(truncated)?;
    let geometry = Geometry::new(bs, bpg, count, first, flex).map_err(|e| bad(e.to_string()))?;
    let layout = Layout::new(&geometry, offsets[4]).map_err(|e| bad(e.to_string()))?;
    let expect = [
        layout.desc_off,
        layout.bitmap_off,
        layout.bitmap_stride,
        layout.log_off,
        layout.log_len,
    ];
    if groups != layout.groups || offsets != expect {
        return Err(bad(format!(
            "layout {groups} groups at {offsets:?} disagrees with geometry ({} groups at {expect:?})",
            layout.groups
        )));
    }
    Ok(Superblock {
        geometry,
        nonce,
        layout,
    })
}

/// A descriptor as stored, minus its own checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DiskDesc {
    pub free: u32,
    pub flags: u16,
    pub bitmap_crc: u32,
}

impl DiskDesc {
    /// A group whose bitmap was never written.
    pub(crate) fn uninit(geometry: &Geometry, group: u32) -> Self {
        DiskDesc {
            free: geometry.group_len(group),
            flags: GroupFlags::BLOCK_UNINIT.0,
            bitmap_crc: 0,
        }
    }
    pub(crate) fn is_uninit(&self) -> bool {
        GroupFlags(self.flags).contains(GroupFlags::BLOCK_UNINIT)
    }
}

fn desc_body(d: &DiskDesc) -> [u8; 12] {
    let mut out = [0u8; 12];
    out[0..4].copy_from_slice(&d.free.to_le_bytes());
    out[4..6].copy_from_slice(&d.flags.to_le_bytes());
    out[8..12].copy_from_slice(&d.bitmap_crc.to_le_bytes());
    out
}

/// The 16 bytes of group `group`'s descriptor.
pub(crate) fn encode_desc(nonce: u64, group: u32, d: &DiskDesc) -> [u8; DESC_LEN] {
    let body = desc_body(d);
    let crc = checksum(nonce, &[&group.to_le_bytes(), &body]);
    let mut out = [0u8; DESC_LEN];
    out[..12].copy_from_slice(&body);
    out[12..].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes group `group`'s descriptor from its 16 bytes, checking checksum, flags and counts.
pub(crate) fn decode_desc(sb: &Superblock, group: u32, bytes: &[u8]) -> Result<DiskDesc, Problem> {
    let mut r = Reader::new(bytes);
    let fields = (|| Some((r.u32()?, r.u16()?, r.u16()?, r.u32()?, r.u32()?)))();
    let Some((free, flags, reserved, bitmap_crc, stored)) = fields else {
        return Err(Problem::DescriptorChecksum {
            group,
            stored: 0,
            computed: 0,
        });
    };
    let body = bytes.get(..12).unwrap_or_default();
    let computed = checksum(sb.nonce, &[&group.to_le_bytes(), body]);
    if stored != computed {
        return Err(Problem::DescriptorChecksum {
            group,
            stored,
            computed,
        });
    }
    if flags & !GroupFlags::ON_DISK != 0 || reserved != 0 {
        return Err(Problem::UnknownFlags {
            group,
            flags,
            reserved,
        });
    }
    let d = DiskDesc {
        free,
        flags,
        bitmap_crc,
    };
    let group_len = sb.geometry.group_len(group);
    if free > group_len || (d.is_uninit() && free != group_len) {
        return Err(Problem::BadFreeCount {
            group,
            free,
            group_len,
            uninit: d.is_uninit(),
        });
    }
    Ok(d)
}

/// The checksum of group `group`'s bitmap bytes.
pub(crate) fn bitmap_crc(nonce: u64, group: u32, bytes: &[u8]) -> u32 {
    checksum(nonce, &[&group.to_le_bytes(), bytes])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb() -> Superblock {
        let geometry = Geometry::new(4096, 32768, 100_000, 0, 16).unwrap();
        let layout = Layout::new(&geometry, DEFAULT_LOG_LEN).unwrap();
        Superblock {
            geometry,
            nonce: 0x1234_5678_9abc_def0,
            layout,
        }
    }

    #[test]
    fn superblock_round_trips() {
        let s = sb();
        let bytes = encode_superblock(&s);
        assert_eq!(bytes.len(), SB_AREA as usize);
        assert_eq!(decode_superblock(&bytes).unwrap(), s);
    }

    #[test]
    fn any_flipped_superblock_byte_is_an_error() {
        let bytes = encode_superblock(&sb());
        for i in 0..SB_LEN {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(
                matches!(decode_superblock(&b), Err(StoreError::BadSuperblock { .. })),
                "byte {i}"
            );
        }
        assert!(decode_superblock(&bytes[..10]).is_err());
        assert!(decode_superblock(&[]).is_err());
    }

    #[test]
    fn descriptor_round_trips_and_detects_damage() {
        let s = sb();
        let d = DiskDesc {
            free: 1000,
            flags: 0,
            bitmap_crc: 0xdead_beef,
        };
        let bytes = encode_desc(s.nonce, 2, &d);
        assert_eq!(decode_desc(&s, 2, &bytes), Ok(d));
        assert!(matches!(
            decode_desc(&s, 1, &bytes),
            Err(Problem::DescriptorChecksum { .. })
        ));
        let mut b = bytes;
        b[0] ^= 1;
        assert!(matches!(
            decode_desc(&s, 2, &b),
            Err(Problem::DescriptorChecksum { .. })
        ));
        assert!(decode_desc(&s, 2, &bytes[..5]).is_err());
    }

    #[test]
    fn impossible_free_counts_are_rejected() {
        let s = sb();
        let last = s.layout.groups - 1;
        let too_many = DiskDesc {
            free: s.geometry.group_len(last) + 1,
            flags: 0,
            bitmap_crc: 0,
        };
        let bytes = encode_desc(s.nonce, last, &too_many);
        assert!(matches!(
            decode_desc(&s, last, &bytes),
            Err(Problem::BadFreeCount { .. })
        ));
        let uninit = DiskDesc::uninit(&s.geometry, last);
        assert_eq!(
            decode_desc(&s, last, &encode_desc(s.nonce, last, &uninit)),
            Ok(uninit)
        );
    }

    #[test]
    fn layout_is_aligned_and_ordered() {
        let l = sb().layout;
        assert_eq!(l.desc_off % 4096, 0);
        assert_eq!(l.bitmap_off % 4096, 0);
        assert!(l.bitmap_at(l.groups - 1) + l.bitmap_len as u64 <= l.log_off);
        assert_eq!(l.total, l.log_off + l.log_len);
    }
}
