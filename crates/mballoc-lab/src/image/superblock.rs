//! The ext4 superblock (`struct ext4_super_block`): the fields the allocator's view needs,
//! the features that change the layout, and the `metadata_csum` checksum seed.

use super::csum::ext4_chksum;
use super::disk::{le16, le32};
use super::error::ImageError;

/// Byte offset of the primary superblock.
pub const SUPERBLOCK_OFFSET: u64 = 1024;
/// Bytes in the superblock.
pub const SUPERBLOCK_SIZE: usize = 1024;
const MAGIC: u16 = 0xEF53;

// Feature bits (`EXT4_FEATURE_*`).
pub const COMPAT_HAS_JOURNAL: u32 = 0x0004;
pub const COMPAT_SPARSE_SUPER2: u32 = 0x0200;
pub const INCOMPAT_RECOVER: u32 = 0x0004;
pub const INCOMPAT_JOURNAL_DEV: u32 = 0x0008;
pub const INCOMPAT_META_BG: u32 = 0x0010;
pub const INCOMPAT_64BIT: u32 = 0x0080;
pub const INCOMPAT_FLEX_BG: u32 = 0x0200;
pub const INCOMPAT_CSUM_SEED: u32 = 0x2000;
pub const RO_COMPAT_SPARSE_SUPER: u32 = 0x0001;
pub const RO_COMPAT_GDT_CSUM: u32 = 0x0010;
pub const RO_COMPAT_BIGALLOC: u32 = 0x0200;
pub const RO_COMPAT_METADATA_CSUM: u32 = 0x0400;

/// The superblock fields the reader uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    pub blocks_count: u64,
    pub free_blocks_count: u64,
    pub first_data_block: u64,
    pub block_size: u32,
    pub blocks_per_group: u32,
    pub clusters_per_group: u32,
    pub inodes_per_group: u32,
    pub inodes_count: u32,
    pub first_ino: u32,
    pub inode_size: u32,
    pub feature_compat: u32,
    pub feature_incompat: u32,
    pub feature_ro_compat: u32,
    pub reserved_gdt_blocks: u32,
    pub desc_size: u32,
    pub first_meta_bg: u32,
    /// `s_journal_inum` (0: no internal journal).
    pub journal_inum: u32,
    pub log_groups_per_flex: u32,
    /// `s_backup_bgs` (sparse_super2).
    pub backup_bgs: [u32; 2],
    /// `s_csum_seed` of the kernel: `s_checksum_seed` or crc32c of the UUID.
    pub csum_seed: u32,
    pub uuid: [u8; 16],
}

impl Superblock {
    /// Parses and checks the 1024 bytes of a superblock.
    pub fn parse(b: &[u8]) -> Result<Superblock, ImageError> {
        assert_eq!(b.len(), SUPERBLOCK_SIZE, "a superblock is 1024 bytes");
        let magic = le16(b, 0x38);
        if magic != MAGIC {
            return Err(ImageError::BadMagic { magic });
        }
        let incompat = le32(b, 0x60);
        let ro_compat = le32(b, 0x64);
        let is64 = incompat & INCOMPAT_64BIT != 0;
        let hi = |at: usize| {
            if is64 {
                u64::from(le32(b, at)) << 32
            } else {
                0
            }
        };
        let log_bs = le32(b, 0x18);
        if log_bs > 6 {
            return Err(bad("s_log_block_size", log_bs.into(), "at most 6 (64 KiB)"));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[0x68..0x78]);
        let desc_size = if is64 { u32::from(le16(b, 0xFE)) } else { 32 };
        let sb = Superblock {
            blocks_count: u64::from(le32(b, 0x4)) | hi(0x150),
            free_blocks_count: u64::from(le32(b, 0xC)) | hi(0x158),
            first_data_block: u64::from(le32(b, 0x14)),
            block_size: 1024 << log_bs,
            blocks_per_group: le32(b, 0x20),
            clusters_per_group: le32(b, 0x24),
            inodes_per_group: le32(b, 0x28),
            inodes_count: le32(b, 0x0),
            first_ino: if le32(b, 0x4C) == 0 {
                11
            } else {
                le32(b, 0x54)
            },
            inode_size: if le32(b, 0x4C) == 0 {
                128
            } else {
                u32::from(le16(b, 0x58))
            },
            feature_compat: le32(b, 0x5C),
            feature_incompat: incompat,
            feature_ro_compat: ro_compat,
            reserved_gdt_blocks: u32::from(le16(b, 0xCE)),
            desc_size,
            first_meta_bg: le32(b, 0x104),
            journal_inum: if le32(b, 0x5C) & 0x4 != 0 {
                le32(b, 0xE0)
            } else {
                0
            },
            log_groups_per_flex: u32::from(b[0x174]),
            backup_bgs: [le32(b, 0x24C), le32(b, 0x250)],
            csum_seed: if incompat & INCOMPAT_CSUM_SEED != 0 {
                le32(b, 0x270)
            } else {
                ext4_chksum(!0, &uuid)
            },
            uuid,
        };
        sb.check(b)?;
        Ok(sb)
    }

    fn check(&self, b: &[u8]) -> Result<(), ImageError> {
        if self.has_metadata_csum() {
            // ext4_superblock_csum: crc32c of everything before s_checksum.
            let (stored, computed) = (le32(b, 0x3FC), ext4_chksum(!0, &b[..0x3FC]));
            if stored != computed {
                return Err(ImageError::SuperblockChecksum { stored, computed });
            }
        }
        if self.feature_ro_compat & RO_COMPAT_BIGALLOC != 0 {
            return Err(ImageError::Unsupported {
                what: "bigalloc (the allocator model works in blocks, not clusters)".into(),
            });
        }
        if self.feature_incompat & INCOMPAT_JOURNAL_DEV != 0 {
            return Err(ImageError::Unsupported {
                what: "an external journal device, not a file system".into(),
            });
        }
        let bits = self.block_size * 8;
        if self.blocks_per_group == 0
            || self.blocks_per_group > bits
            || !self.blocks_per_group.is_multiple_of(8)
        {
            return Err(bad(
                "s_blocks_per_group",
                self.blocks_per_group.into(),
                "a multiple of 8, at most 8 x block size",
            ));
        }
        if self.clusters_per_group != self.blocks_per_group {
            return Err(bad(
                "s_clusters_per_group",
                self.clusters_per_group.into(),
                "equal to s_blocks_per_group without bigalloc",
            ));
        }
        if self.inodes_per_group == 0 || self.inodes_per_group > bits {
            return Err(bad(
                "s_inodes_per_group",
                self.inodes_per_group.into(),
                "1 to 8 x block size",
            ));
        }
        if self.inode_size < 128
            || !self.inode_size.is_power_of_two()
            || self.inode_size > self.block_size
        {
            return Err(bad(
                "s_inode_size",
                self.inode_size.into(),
                "a power of two from 128 to the block size",
            ));
        }
        if self.desc_size < 32
            || !self.desc_size.is_power_of_two()
            || self.desc_size > 1024
            || (self.is_64bit() && self.desc_size < 64)
        {
            return Err(bad(
                "s_desc_size",
                self.desc_size.into(),
                "a power of two, 64 to 1024 with 64bit",
            ));
        }
        if self.first_data_block >= self.blocks_count {
            return Err(bad(
                "s_first_data_block",
                self.first_data_block,
                "below s_blocks_count",
            ));
        }
        Ok(())
    }

    pub fn is_64bit(&self) -> bool {
        self.feature_incompat & INCOMPAT_64BIT != 0
    }

    pub fn has_metadata_csum(&self) -> bool {
        self.feature_ro_compat & RO_COMPAT_METADATA_CSUM != 0
    }

    /// `ext4_has_group_desc_csum`: descriptors carry a checksum and the `*_UNINIT` flags count.
    pub fn has_group_desc_csum(&self) -> bool {
        self.has_metadata_csum() || self.feature_ro_compat & RO_COMPAT_GDT_CSUM != 0
    }

    /// `has_journal`: without it ext4 frees blocks at once, with no transaction to wait for.
    pub fn has_journal(&self) -> bool {
        self.feature_compat & COMPAT_HAS_JOURNAL != 0
    }

    pub fn has_flex_bg(&self) -> bool {
        self.feature_incompat & INCOMPAT_FLEX_BG != 0
    }

    pub fn has_meta_bg(&self) -> bool {
        self.feature_incompat & INCOMPAT_META_BG != 0
    }

    /// The journal holds transactions not yet written home: the bitmaps are not the state.
    pub fn needs_recovery(&self) -> bool {
        self.feature_incompat & INCOMPAT_RECOVER != 0
    }

    pub fn group_count(&self) -> u32 {
        (self.blocks_count - self.first_data_block).div_ceil(u64::from(self.blocks_per_group))
            as u32
    }

    /// Groups per flex group (1 without flex_bg).
    pub fn flex_bg_size(&self) -> u32 {
        if self.has_flex_bg() {
            1 << self.log_groups_per_flex.min(31)
        } else {
            1
        }
    }

    pub fn desc_per_block(&self) -> u32 {
        self.block_size / self.desc_size
    }

    /// Blocks holding the group descriptor table (`s_gdb_count`).
    pub fn gdb_count(&self) -> u32 {
        self.group_count().div_ceil(self.desc_per_block())
    }

    /// First block of group `g`.
    pub fn group_first_block(&self, g: u32) -> u64 {
        self.first_data_block + u64::from(g) * u64::from(self.blocks_per_group)
    }

    /// Blocks in group `g` (the last one may be short).
    pub fn group_len(&self, g: u32) -> u32 {
        (self.blocks_count - self.group_first_block(g)).min(u64::from(self.blocks_per_group)) as u32
    }

    /// `ext4_bg_has_super`.
    pub fn bg_has_super(&self, g: u32) -> bool {
        if g == 0 {
            return true;
        }
        if self.feature_compat & COMPAT_SPARSE_SUPER2 != 0 {
            return self.backup_bgs.contains(&g);
        }
        if g <= 1 || self.feature_ro_compat & RO_COMPAT_SPARSE_SUPER == 0 {
            return true;
        }
        g % 2 == 1 && [3u32, 5, 7].iter().any(|&b| is_power_of(g, b))
    }

    /// `ext4_num_base_meta_clusters`: superblock backup, descriptor blocks and reserved GDT
    /// blocks at the start of group `g`.
    pub fn base_meta_blocks(&self, g: u32) -> u32 {
        let sup = u32::from(self.bg_has_super(g));
        let dpb = self.desc_per_block();
        if !self.has_meta_bg() || g < self.first_meta_bg.saturating_mul(dpb) {
            if sup == 0 {
                return 0;
            }
            return sup + self.gdb_nometa() + self.reserved_gdt_blocks;
        }
        // ext4_bg_num_gdb_meta: the first, second and last group of a meta group hold its
        // descriptor block.
        let first = g / dpb * dpb;
        sup + u32::from(g == first || g == first + 1 || g == first + dpb - 1)
    }

    /// Descriptor blocks in the classic table (`ext4_bg_num_gdb_nometa`): all of them, or
    /// `s_first_meta_bg` with meta_bg.
    fn gdb_nometa(&self) -> u32 {
        if self.has_meta_bg() {
            self.first_meta_bg
        } else {
            self.gdb_count()
        }
    }

    /// `descriptor_loc`: the block holding descriptor block `nr`.
    pub fn descriptor_block(&self, nr: u32) -> u64 {
        if !self.has_meta_bg() || nr < self.first_meta_bg {
            return self.first_data_block + 1 + u64::from(nr);
        }
        let bg = self.desc_per_block() * nr;
        self.group_first_block(bg) + u64::from(self.bg_has_super(bg))
    }
}

fn bad(field: &'static str, value: u64, reason: &'static str) -> ImageError {
    ImageError::BadField {
        field,
        value,
        reason,
    }
}

fn is_power_of(n: u32, base: u32) -> bool {
    let mut p = 1u64;
    while p < u64::from(n) {
        p *= u64::from(base);
    }
    p == u64::from(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A superblock with the given features, 4 KiB blocks, 32768 blocks per group, 64 groups,
    /// 32-byte descriptors (128 per block).
    fn sb(compat: u32, incompat: u32, ro_compat: u32) -> Superblock {
        Superblock {
            blocks_count: 64 * 32768,
            free_blocks_count: 0,
            first_data_block: 0,
            block_size: 4096,
            blocks_per_group: 32768,
            clusters_per_group: 32768,
            inodes_per_group: 8192,
            inodes_count: 64 * 8192,
            first_ino: 11,
            inode_size: 256,
            feature_compat: compat,
            feature_incompat: incompat,
            feature_ro_compat: ro_compat,
            reserved_gdt_blocks: 15,
            desc_size: 32,
            first_meta_bg: 0,
            journal_inum: 0,
            log_groups_per_flex: 4,
            backup_bgs: [1, 63],
            csum_seed: 0,
            uuid: [0; 16],
        }
    }

    /// `ext4_bg_has_super`: sparse_super keeps backups in 0, 1 and powers of 3, 5, 7;
    /// sparse_super2 only in `s_backup_bgs`; without either, every group.
    #[test]
    fn superblock_backups_follow_the_features() {
        let sparse = sb(0, 0, RO_COMPAT_SPARSE_SUPER);
        let with: Vec<u32> = (0..64).filter(|&g| sparse.bg_has_super(g)).collect();
        assert_eq!(with, vec![0, 1, 3, 5, 7, 9, 25, 27, 49]);
        let two = sb(COMPAT_SPARSE_SUPER2, 0, RO_COMPAT_SPARSE_SUPER);
        let with: Vec<u32> = (0..64).filter(|&g| two.bg_has_super(g)).collect();
        assert_eq!(with, vec![0, 1, 63]);
        assert!((0..64).all(|g| sb(0, 0, 0).bg_has_super(g)));
    }

    /// `ext4_num_base_meta_clusters`: superblock + descriptor blocks + reserved GDT blocks in a
    /// backup group; with meta_bg past `s_first_meta_bg`, one descriptor block in the first,
    /// second and last group of each meta group.
    #[test]
    fn base_metadata_follows_meta_bg() {
        let classic = sb(0, 0, RO_COMPAT_SPARSE_SUPER);
        assert_eq!(classic.gdb_count(), 1);
        assert_eq!(classic.base_meta_blocks(0), 1 + 1 + 15);
        assert_eq!(classic.base_meta_blocks(2), 0);
        let mut meta = sb(0, INCOMPAT_META_BG, RO_COMPAT_SPARSE_SUPER);
        meta.blocks_count = 300 * 32768;
        meta.reserved_gdt_blocks = 0;
        // Descriptor block 0 is classic, the rest meta_bg: groups 128.. are meta groups.
        meta.first_meta_bg = 1;
        assert_eq!(meta.base_meta_blocks(0), 1 + 1);
        assert_eq!(meta.base_meta_blocks(128), 1); // first of its meta group, no backup
        assert_eq!(meta.base_meta_blocks(129), 1);
        assert_eq!(meta.base_meta_blocks(130), 0);
        assert_eq!(meta.base_meta_blocks(243), 1); // 3^5: a backup superblock, no descriptors
        assert_eq!(meta.base_meta_blocks(255), 1); // last of its meta group
        assert_eq!(meta.descriptor_block(0), 1);
        assert_eq!(meta.descriptor_block(1), 128 * 32768);
        assert_eq!(meta.descriptor_block(2), 256 * 32768);
    }
}
