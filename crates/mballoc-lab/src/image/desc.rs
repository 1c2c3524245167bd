//! Group descriptors (`struct ext4_group_desc`, 32 or 64 bytes) with their flags and checksum.

use super::csum::{crc16, ext4_chksum};
use super::disk::{le16, le32, Disk};
use super::error::ImageError;
use super::superblock::Superblock;

/// `EXT4_BG_INODE_UNINIT`: the inode bitmap and table were never used.
pub const BG_INODE_UNINIT: u16 = 0x1;
/// `EXT4_BG_BLOCK_UNINIT`: the block bitmap was never written; it is computed from the layout.
pub const BG_BLOCK_UNINIT: u16 = 0x2;
/// `EXT4_BG_INODE_ZEROED`.
pub const BG_INODE_ZEROED: u16 = 0x4;

/// Offset of `bg_checksum` in a descriptor.
const CHECKSUM_AT: usize = 0x1E;

/// One group's descriptor.
#[derive(Debug, Clone)]
pub struct GroupDesc {
    pub block_bitmap: u64,
    pub inode_bitmap: u64,
    pub inode_table: u64,
    pub free_blocks: u32,
    pub free_inodes: u32,
    pub flags: u16,
    pub itable_unused: u32,
    /// `bg_block_bitmap_csum_lo | hi << 16` (hi only with 64-byte descriptors).
    pub block_bitmap_csum: u32,
    pub inode_bitmap_csum: u32,
    /// The descriptor's own checksum failed (`ext4_group_desc_csum_verify`); the kernel
    /// mounts such a file system read-only only and refuses to initialise a `BLOCK_UNINIT`
    /// bitmap from it.
    pub csum_error: Option<Box<ImageError>>,
}

impl GroupDesc {
    pub fn block_uninit(&self, sb: &Superblock) -> bool {
        sb.has_group_desc_csum() && self.flags & BG_BLOCK_UNINIT != 0
    }

    pub fn inode_uninit(&self, sb: &Superblock) -> bool {
        sb.has_group_desc_csum() && self.flags & BG_INODE_UNINIT != 0
    }
}

/// Reads every group's descriptor (`ext4_group_desc` via `descriptor_loc`).
pub fn read_all(disk: &Disk, sb: &Superblock) -> Result<Vec<GroupDesc>, ImageError> {
    let bs = sb.block_size as usize;
    let ds = sb.desc_size as usize;
    let per = sb.desc_per_block();
    let mut out = Vec::with_capacity(sb.group_count() as usize);
    for nr in 0..sb.gdb_count() {
        let block = disk.read(sb.descriptor_block(nr) * bs as u64, bs, "group descriptors")?;
        for i in 0..per {
            let g = nr * per + i;
            if g >= sb.group_count() {
                break;
            }
            let raw = &block[i as usize * ds..(i as usize + 1) * ds];
            out.push(parse(sb, g, raw));
        }
    }
    Ok(out)
}

fn parse(sb: &Superblock, group: u32, b: &[u8]) -> GroupDesc {
    let wide = b.len() >= 64;
    let hi32 = |at: usize| {
        if wide {
            u64::from(le32(b, at)) << 32
        } else {
            0
        }
    };
    let hi16 = |at: usize| {
        if wide {
            u32::from(le16(b, at)) << 16
        } else {
            0
        }
    };
    let stored = le16(b, CHECKSUM_AT);
    let computed = desc_csum(sb, group, b);
    GroupDesc {
        block_bitmap: u64::from(le32(b, 0x0)) | hi32(0x20),
        inode_bitmap: u64::from(le32(b, 0x4)) | hi32(0x24),
        inode_table: u64::from(le32(b, 0x8)) | hi32(0x28),
        free_blocks: u32::from(le16(b, 0xC)) | hi16(0x2C),
        free_inodes: u32::from(le16(b, 0xE)) | hi16(0x2E),
        flags: le16(b, 0x12),
        itable_unused: u32::from(le16(b, 0x1C)) | hi16(0x32),
        block_bitmap_csum: u32::from(le16(b, 0x18)) | hi16(0x38),
        inode_bitmap_csum: u32::from(le16(b, 0x1A)) | hi16(0x3A),
        csum_error: match computed {
            Some(c) if c != stored => Some(Box::new(ImageError::DescriptorChecksum {
                group,
                stored,
                computed: c,
            })),
            _ => None,
        },
    }
}

/// `ext4_group_desc_csum`: crc32c (metadata_csum, low 16 bits) or crc16 (gdt_csum) of the
/// group number and the descriptor with its checksum field left out; `None` without either.
pub fn desc_csum(sb: &Superblock, group: u32, b: &[u8]) -> Option<u16> {
    let le_group = group.to_le_bytes();
    if sb.has_metadata_csum() {
        let mut c = ext4_chksum(sb.csum_seed, &le_group);
        c = ext4_chksum(c, &b[..CHECKSUM_AT]);
        c = ext4_chksum(c, &[0, 0]);
        c = ext4_chksum(c, &b[CHECKSUM_AT + 2..]);
        return Some((c & 0xFFFF) as u16);
    }
    if !sb.has_group_desc_csum() {
        return None;
    }
    let mut c = crc16(!0, &sb.uuid);
    c = crc16(c, &le_group);
    c = crc16(c, &b[..CHECKSUM_AT]);
    if sb.is_64bit() && b.len() > CHECKSUM_AT + 2 {
        c = crc16(c, &b[CHECKSUM_AT + 2..]);
    }
    Some(c)
}
