//! A read-only ext4 reader: superblock and features, group descriptors with their flags and
//! checksums, block bitmaps as the kernel loads them (computed for `BLOCK_UNINIT` groups), and
//! each regular file's extents. It reads raw images, `e2image -r` output and block devices,
//! and never opens them for writing.
//!
//! Written by hand because no maintained library exposes these structures: `ext4-view` (a
//! pure-Rust reader) offers files and directories by path, not descriptors, bitmaps or extent
//! lists, and libext2fs, which has them all, would make the lab need `libext2fs-dev` to build.
//! The on-disk structures are checked against e2fsprogs' own output (dumpe2fs, debugfs,
//! e2freefrag) and the kernel's `mb_groups` in the tests.

mod bitmap;
mod csum;
mod desc;
mod disk;
mod error;
mod inode;
mod layout;
mod mounted;
pub mod replay;
pub mod start;
mod superblock;
mod svg;
mod view;

use std::path::Path;

pub use bitmap::{init_block_bitmap, itable_blocks, RawBitmap};
pub use csum::{crc16, ext4_chksum};
pub use desc::{GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT, BG_INODE_ZEROED};
pub use disk::Disk;
pub use error::ImageError;
pub use inode::{FileScan, ImageExtent, ImageFile};
pub use layout::Layout;
pub use start::{ImageSource, ImageStart};
pub use superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
pub use svg::heat_map;
pub use view::{FragReport, GroupView, ImageView};

/// How to open an image.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// Read a file system that is mounted read-write (or whose journal needs recovery) anyway.
    pub allow_mounted: bool,
}

/// An open ext4 image: superblock and descriptors read and checked.
pub struct Image {
    disk: Disk,
    sb: Superblock,
    descs: Vec<GroupDesc>,
}

impl Image {
    /// Opens `path` read-only. A superblock that fails its checksum, an unsupported feature or
    /// a read-write mount (unless allowed) is an error; a descriptor that fails its checksum
    /// is not (the kernel mounts such a file system read-only) but is reported per group.
    pub fn open(path: &Path, opts: OpenOptions) -> Result<Image, ImageError> {
        if !opts.allow_mounted {
            mounted::check_not_mounted_rw(path)?;
        }
        let disk = Disk::open(path)?;
        let raw = disk.read(SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE, "superblock")?;
        let sb = Superblock::parse(&raw)?;
        // ext4_check_geometry: a file system larger than its device does not mount. An image
        // cut short would otherwise read whole as long as its metadata came first.
        let device_blocks = disk.size() / u64::from(sb.block_size);
        if sb.blocks_count > device_blocks {
            return Err(ImageError::ShortDevice {
                path: path.to_path_buf(),
                blocks_count: sb.blocks_count,
                device_blocks,
                block_size: sb.block_size,
            });
        }
        if sb.needs_recovery() && !opts.allow_mounted {
            return Err(ImageError::Unsupported {
                what: "the journal needs recovery (the file system was not unmounted cleanly); \
                       replay it with e2fsck or a mount first, or pass --allow-mounted"
                    .into(),
            });
        }
        let descs = desc::read_all(&disk, &sb)?;
        Ok(Image { disk, sb, descs })
    }

    pub fn path(&self) -> &Path {
        self.disk.path()
    }

    pub fn superblock(&self) -> &Superblock {
        &self.sb
    }

    pub fn descriptors(&self) -> &[GroupDesc] {
        &self.descs
    }

    /// Group `g`'s block bitmap as the kernel would load it, or the error its load returns.
    pub fn block_bitmap(&self, g: u32) -> Result<RawBitmap, ImageError> {
        assert!(g < self.sb.group_count(), "group {g} out of range");
        bitmap::block_bitmap(&self.disk, &self.sb, &self.descs, g)
    }

    /// The regular files with their extents.
    pub fn files(&self) -> Result<FileScan, ImageError> {
        inode::scan(&self.disk, &self.sb, &self.descs)
    }

    /// The journal inode's extents (an internal journal; none for an external one).
    pub fn journal_extents(&self) -> Result<Vec<ImageExtent>, ImageError> {
        match self.sb.journal_inum {
            0 => Ok(Vec::new()),
            ino => inode::extents_of(&self.disk, &self.sb, &self.descs, u64::from(ino)),
        }
    }

    /// Every group's bitmap and what the kernel's buddy load makes of it.
    pub fn view(&self) -> Result<ImageView, ImageError> {
        ImageView::build(self)
    }
}
