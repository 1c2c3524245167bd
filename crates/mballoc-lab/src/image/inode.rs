//! Regular files and their extents, read from the inode tables (no directory walk: the inode
//! bitmap says which inodes are in use). The last extent of a file is where the kernel aims
//! its next append (`ext4_ext_find_goal`), and its inode number picks its locality.

use serde::Serialize;

use super::bitmap::test_bit;
use super::csum::{bitmap_csum, ext4_chksum};
use super::desc::GroupDesc;
use super::disk::{le16, le32, Disk};
use super::error::ImageError;
use super::superblock::Superblock;

const S_IFMT: u16 = 0xF000;
const S_IFREG: u16 = 0x8000;
const EXT4_EXTENTS_FL: u32 = 0x0008_0000;
const EXT4_INLINE_DATA_FL: u32 = 0x1000_0000;
const EXTENT_MAGIC: u16 = 0xF30A;
/// Longest initialised extent (`EXT_INIT_MAX_LEN`); longer `ee_len` values mark unwritten ones.
const EXT_INIT_MAX_LEN: u16 = 1 << 15;
/// Deepest extent tree the kernel accepts (`EXT4_MAX_EXTENT_DEPTH`).
const MAX_DEPTH: u16 = 5;

/// One mapped extent of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ImageExtent {
    /// First logical block.
    pub logical: u32,
    /// First physical block.
    pub physical: u64,
    /// Blocks.
    pub len: u32,
    /// Allocated but unwritten (fallocate).
    pub unwritten: bool,
}

/// A regular file of the image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageFile {
    pub ino: u64,
    /// `i_size` in bytes.
    pub size: u64,
    /// Leaf extents in logical order (empty for an empty file or inline data).
    pub extents: Vec<ImageExtent>,
}

/// What the inode scan found: the files, and the parts that failed a check (skipped, as the
/// kernel would refuse to open them).
#[derive(Debug, Default)]
pub struct FileScan {
    pub files: Vec<ImageFile>,
    /// Files mapped by indirect blocks (ext2/ext3 style): counted, not read.
    pub indirect_files: u64,
    pub errors: Vec<ImageError>,
}

/// Scans every initialised group's inode table for regular files.
pub fn scan(disk: &Disk, sb: &Superblock, descs: &[GroupDesc]) -> Result<FileScan, ImageError> {
    let mut out = FileScan::default();
    for (g, d) in descs.iter().enumerate() {
        if d.inode_uninit(sb) {
            continue;
        }
        let g = g as u32;
        let bitmap = match inode_bitmap(disk, sb, d, g) {
            Ok(b) => b,
            Err(e) => {
                out.errors.push(e);
                continue;
            }
        };
        // With descriptor checksums, inodes past `ipg - itable_unused` were never used.
        let used = if sb.has_group_desc_csum() {
            sb.inodes_per_group.saturating_sub(d.itable_unused)
        } else {
            sb.inodes_per_group
        };
        let isz = u64::from(sb.inode_size);
        let table = disk.read(
            d.inode_table * u64::from(sb.block_size),
            (u64::from(used) * isz) as usize,
            "inode table",
        )?;
        for i in 0..used {
            let ino = u64::from(g) * u64::from(sb.inodes_per_group) + u64::from(i) + 1;
            if ino < u64::from(sb.first_ino) || !test_bit(&bitmap, u64::from(i)) {
                continue;
            }
            let raw = &table[(u64::from(i) * isz) as usize..(u64::from(i + 1) * isz) as usize];
            match file(disk, sb, ino, raw) {
                Ok(Some(Inode::Extents(f))) => out.files.push(f),
                Ok(Some(Inode::Indirect)) => out.indirect_files += 1,
                Ok(None) => {}
                Err(e) => out.errors.push(e),
            }
        }
    }
    Ok(out)
}

/// The extents of inode `ino` whatever its kind (the journal's, for one).
pub fn extents_of(
    disk: &Disk,
    sb: &Superblock,
    descs: &[GroupDesc],
    ino: u64,
) -> Result<Vec<ImageExtent>, ImageError> {
    let ipg = u64::from(sb.inodes_per_group);
    let (g, i) = ((ino - 1) / ipg, (ino - 1) % ipg);
    let d = descs.get(g as usize).ok_or(ImageError::BadField {
        field: "inode number",
        value: ino,
        reason: "beyond the last group",
    })?;
    let isz = u64::from(sb.inode_size);
    let raw = disk.read(
        d.inode_table * u64::from(sb.block_size) + i * isz,
        isz as usize,
        "inode",
    )?;
    let seed = if sb.has_metadata_csum() {
        Some(verify_inode(sb, ino, &raw)?)
    } else {
        None
    };
    let mut extents = Vec::new();
    if le32(&raw, 0x20) & EXT4_EXTENTS_FL != 0 {
        Walk {
            disk,
            sb,
            ino,
            seed,
            out: &mut extents,
        }
        .node(&raw[0x28..0x28 + 60], None)?;
    }
    Ok(extents)
}

/// The inode bitmap of a group, its checksum checked (`ext4_inode_bitmap_csum_verify`).
fn inode_bitmap(
    disk: &Disk,
    sb: &Superblock,
    d: &GroupDesc,
    g: u32,
) -> Result<Vec<u8>, ImageError> {
    let bs = sb.block_size as usize;
    let bits = disk.read(d.inode_bitmap * bs as u64, bs, "inode bitmap")?;
    if sb.has_metadata_csum() {
        // EXT4_BG_INODE_BITMAP_CSUM_HI_END = 0x3C.
        let n = (sb.inodes_per_group / 8) as usize;
        let computed = bitmap_csum(sb.csum_seed, &bits, n, sb.desc_size, 0x3C);
        if computed != d.inode_bitmap_csum {
            return Err(ImageError::InodeBitmapChecksum {
                group: g,
                stored: d.inode_bitmap_csum,
                computed,
            });
        }
    }
    Ok(bits)
}

enum Inode {
    Extents(ImageFile),
    Indirect,
}

/// A regular file's inode, or `None` for any other kind of inode.
fn file(disk: &Disk, sb: &Superblock, ino: u64, raw: &[u8]) -> Result<Option<Inode>, ImageError> {
    if le16(raw, 0x0) & S_IFMT != S_IFREG || le16(raw, 0x1A) == 0 {
        return Ok(None);
    }
    let seed = if sb.has_metadata_csum() {
        Some(verify_inode(sb, ino, raw)?)
    } else {
        None
    };
    let flags = le32(raw, 0x20);
    let size = u64::from(le32(raw, 0x4)) | u64::from(le32(raw, 0x6C)) << 32;
    if flags & EXT4_INLINE_DATA_FL != 0 {
        return Ok(Some(Inode::Extents(ImageFile {
            ino,
            size,
            extents: Vec::new(),
        })));
    }
    if flags & EXT4_EXTENTS_FL == 0 {
        return Ok(Some(Inode::Indirect));
    }
    let mut extents = Vec::new();
    let mut walk = Walk {
        disk,
        sb,
        ino,
        seed,
        out: &mut extents,
    };
    walk.node(&raw[0x28..0x28 + 60], None)?;
    extents.sort_by_key(|e| e.logical);
    Ok(Some(Inode::Extents(ImageFile { ino, size, extents })))
}

/// `ext4_inode_csum_verify`; returns the inode's checksum seed (`ei->i_csum_seed`), which
/// its extent blocks' checksums continue from.
fn verify_inode(sb: &Superblock, ino: u64, raw: &[u8]) -> Result<u32, ImageError> {
    let gen = &raw[0x64..0x68];
    let seed = ext4_chksum(ext4_chksum(sb.csum_seed, &(ino as u32).to_le_bytes()), gen);
    let mut c = ext4_chksum(seed, &raw[..0x7C]);
    c = ext4_chksum(c, &[0, 0]);
    c = ext4_chksum(c, &raw[0x7E..128]);
    let mut stored = u32::from(le16(raw, 0x7C));
    let mut wide = false;
    if raw.len() > 128 {
        let extra = u32::from(le16(raw, 0x80));
        c = ext4_chksum(c, &raw[0x80..0x82]);
        let mut at = 0x82;
        if 128 + extra >= 0x84 {
            c = ext4_chksum(c, &[0, 0]);
            stored |= u32::from(le16(raw, 0x82)) << 16;
            wide = true;
            at += 2;
        }
        c = ext4_chksum(c, &raw[at..]);
    }
    let computed = if wide { c } else { c & 0xFFFF };
    if computed != stored {
        return Err(ImageError::InodeChecksum {
            ino,
            stored,
            computed,
        });
    }
    Ok(seed)
}

/// A walk down one file's extent tree (`ext4_find_extent`'s checks on the way).
struct Walk<'a> {
    disk: &'a Disk,
    sb: &'a Superblock,
    ino: u64,
    seed: Option<u32>,
    out: &'a mut Vec<ImageExtent>,
}

impl Walk<'_> {
    /// One node: the root in the inode (`block` None) or an extent block.
    fn node(&mut self, b: &[u8], block: Option<u64>) -> Result<(), ImageError> {
        let blk = block.unwrap_or(0);
        let ino = self.ino;
        let bad = |reason: String| ImageError::BadExtentTree {
            ino,
            block: blk,
            reason,
        };
        if le16(b, 0) != EXTENT_MAGIC {
            return Err(bad(format!("magic {:#06x}", le16(b, 0))));
        }
        let (entries, max, depth) = (le16(b, 2), le16(b, 4), le16(b, 6));
        if entries > max || 12 + 12 * usize::from(max) > b.len() {
            return Err(bad(format!("{entries} entries, room for {max}")));
        }
        if depth > MAX_DEPTH {
            return Err(bad(format!("depth {depth}")));
        }
        if let (Some(seed), Some(_)) = (self.seed, block) {
            // ext4_extent_block_csum: crc32c of the header and all `max` slots.
            let end = 12 + 12 * usize::from(max);
            let (stored, computed) = (le32(b, end), ext4_chksum(seed, &b[..end]));
            if stored != computed {
                return Err(bad(format!(
                    "checksum {stored:#010x}, computed {computed:#010x}"
                )));
            }
        }
        for k in 0..usize::from(entries) {
            let e = &b[12 + 12 * k..24 + 12 * k];
            if depth == 0 {
                self.leaf(e)?;
            } else {
                let child = u64::from(le32(e, 4)) | u64::from(le16(e, 8)) << 32;
                if child <= self.sb.first_data_block || child >= self.sb.blocks_count {
                    return Err(bad(format!("index points at block {child}")));
                }
                let bs = self.sb.block_size as usize;
                let data = self.disk.read(child * bs as u64, bs, "extent block")?;
                if le16(&data, 6) + 1 != depth {
                    return Err(ImageError::BadExtentTree {
                        ino: self.ino,
                        block: child,
                        reason: format!("depth {} under a node of depth {depth}", le16(&data, 6)),
                    });
                }
                self.node(&data, Some(child))?;
            }
        }
        Ok(())
    }

    fn leaf(&mut self, e: &[u8]) -> Result<(), ImageError> {
        let raw_len = le16(e, 4);
        let (len, unwritten) = if raw_len > EXT_INIT_MAX_LEN {
            (raw_len - EXT_INIT_MAX_LEN, true)
        } else {
            (raw_len, false)
        };
        let physical = u64::from(le32(e, 8)) | u64::from(le16(e, 6)) << 32;
        if len == 0
            || physical < self.sb.first_data_block
            || physical + u64::from(len) > self.sb.blocks_count
        {
            return Err(ImageError::BadExtentTree {
                ino: self.ino,
                block: physical,
                reason: format!("extent of {len} blocks at {physical} outside the file system"),
            });
        }
        self.out.push(ImageExtent {
            logical: le32(e, 0),
            physical,
            len: u32::from(len),
            unwritten,
        });
        Ok(())
    }
}
