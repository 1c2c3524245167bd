//! Block bitmaps as the kernel obtains them (`ext4_read_block_bitmap_nowait`,
//! `ext4_validate_block_bitmap`): computed for `BLOCK_UNINIT` groups, read and checked
//! otherwise. A group whose bitmap cannot be trusted gets the error the kernel's load returns.

use super::csum::bitmap_csum;
use super::desc::GroupDesc;
use super::disk::Disk;
use super::error::ImageError;
use super::superblock::Superblock;

/// A group's block bitmap in the on-disk convention (bit set = in use), one block long.
pub type RawBitmap = Vec<u8>;

fn set_bit(b: &mut [u8], i: u64) {
    b[(i / 8) as usize] |= 1 << (i % 8);
}

pub(crate) fn test_bit(b: &[u8], i: u64) -> bool {
    b[(i / 8) as usize] & (1 << (i % 8)) != 0
}

/// The block bitmap of group `g` as the kernel would load it.
pub fn block_bitmap(
    disk: &Disk,
    sb: &Superblock,
    descs: &[GroupDesc],
    g: u32,
) -> Result<RawBitmap, ImageError> {
    let d = &descs[g as usize];
    if d.block_uninit(sb) {
        // ext4_init_block_bitmap refuses a descriptor that fails its checksum.
        if let Some(e) = &d.csum_error {
            return Err((**e).clone());
        }
        return Ok(init_block_bitmap(sb, d, g));
    }
    check_in_range(sb, g, "block bitmap", d.block_bitmap)?;
    let bs = sb.block_size as usize;
    let bits = disk.read(d.block_bitmap * bs as u64, bs, "block bitmap")?;
    validate(sb, d, g, &bits)?;
    Ok(bits)
}

/// `ext4_init_block_bitmap`: the superblock backup and descriptor blocks at the start of the
/// group, the group's own bitmaps and inode table where they lie inside it, and the bits past
/// the group's end (`ext4_mark_bitmap_end`). With flex_bg the group's tables usually lie in
/// the flex group's first group, whose bitmap is on disk.
pub fn init_block_bitmap(sb: &Superblock, d: &GroupDesc, g: u32) -> RawBitmap {
    let mut b = vec![0u8; sb.block_size as usize];
    for i in 0..u64::from(sb.base_meta_blocks(g)) {
        set_bit(&mut b, i);
    }
    let first = sb.group_first_block(g);
    let len = u64::from(sb.group_len(g));
    let itable_blocks = itable_blocks(sb);
    let own = [d.block_bitmap, d.inode_bitmap]
        .into_iter()
        .chain(d.inode_table..d.inode_table + itable_blocks);
    for blk in own {
        if (first..first + len).contains(&blk) {
            set_bit(&mut b, blk - first);
        }
    }
    for i in len..u64::from(sb.block_size) * 8 {
        set_bit(&mut b, i);
    }
    b
}

/// Blocks of one group's inode table.
pub fn itable_blocks(sb: &Superblock) -> u64 {
    (u64::from(sb.inodes_per_group) * u64::from(sb.inode_size)).div_ceil(u64::from(sb.block_size))
}

/// `ext4_read_block_bitmap_nowait`'s range check of the bitmap's location.
fn check_in_range(
    sb: &Superblock,
    g: u32,
    what: &'static str,
    block: u64,
) -> Result<(), ImageError> {
    if block <= sb.first_data_block || block >= sb.blocks_count {
        return Err(ImageError::MetadataOutOfRange {
            group: g,
            what,
            block,
            blocks_count: sb.blocks_count,
        });
    }
    Ok(())
}

/// `ext4_validate_block_bitmap`: the checksum first (`-EFSBADCRC`), then, without flex_bg,
/// that the group's own bitmaps and inode table are marked in use (`ext4_valid_block_bitmap`,
/// `-EFSCORRUPTED`).
fn validate(sb: &Superblock, d: &GroupDesc, g: u32, bits: &[u8]) -> Result<(), ImageError> {
    if sb.has_metadata_csum() {
        // EXT4_BG_BLOCK_BITMAP_CSUM_HI_END = 0x3A.
        let n = (sb.clusters_per_group / 8) as usize;
        let computed = bitmap_csum(sb.csum_seed, bits, n, sb.desc_size, 0x3A);
        if computed != d.block_bitmap_csum {
            return Err(ImageError::BlockBitmapChecksum {
                group: g,
                stored: d.block_bitmap_csum,
                computed,
            });
        }
    }
    if sb.has_flex_bg() {
        return Ok(());
    }
    let first = sb.group_first_block(g);
    let tables = [
        ("block bitmap", d.block_bitmap),
        ("inode bitmap", d.inode_bitmap),
    ]
    .into_iter()
    .chain((d.inode_table..d.inode_table + itable_blocks(sb)).map(|b| ("inode table", b)));
    for (what, block) in tables {
        let inside = block >= first && block - first < u64::from(sb.blocks_per_group);
        if !inside || !test_bit(bits, block - first) {
            return Err(ImageError::MetadataNotInUse {
                group: g,
                what,
                block,
            });
        }
    }
    Ok(())
}
