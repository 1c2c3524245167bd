//! An image as the starting state of a lab run: the allocator's geometry, the in-use blocks per
//! group as the kernel would load them, the groups still `BLOCK_UNINIT`, the groups whose
//! bitmap fails (left to the allocator's corrupt-group handling, `ext4_mark_group_bitmap_corrupted`)
//! and the regular files with their inode numbers and extents.

use std::collections::BTreeMap;

use mballoc::Bitmap;
use mballoc::{BitmapSource, Geometry, MemSource};

use super::bitmap::{itable_blocks, test_bit};
use super::{Image, ImageError, ImageFile};

/// Block size the lab's file layer models (4 KiB pages and blocks).
pub const RUN_BLOCK_SIZE: u32 = 4096;

/// What a run starts from.
pub struct ImageStart {
    pub geo: Geometry,
    pub inodes_per_group: u32,
    /// In-use ranges `(start, len)`, absolute, within each group's length.
    pub used: Vec<(u64, u64)>,
    /// Metadata blocks per group (superblock backups, descriptors, bitmaps, inode tables,
    /// journal): a group holds data when more of it is in use.
    pub meta_used: Vec<u32>,
    pub block_uninit: Vec<u32>,
    /// Groups whose bitmap cannot be loaded, and why.
    pub corrupt: BTreeMap<u32, String>,
    /// Free blocks per descriptor (`bb_free` before a group's buddy is built).
    pub desc_free: Vec<u32>,
    pub files: Vec<ImageFile>,
}

impl ImageStart {
    /// Reads everything a run needs from `img`. Only 4 KiB blocks: the file layer maps bytes
    /// to 4 KiB blocks.
    pub fn load(img: &Image) -> Result<ImageStart, ImageError> {
        let sb = img.superblock();
        if sb.block_size != RUN_BLOCK_SIZE {
            return Err(ImageError::Unsupported {
                what: format!(
                    "runs from an image need {RUN_BLOCK_SIZE}-byte blocks (the file layer models 4 KiB pages); this one has {}",
                    sb.block_size
                ),
            });
        }
        let geo = Geometry::new(
            sb.block_size,
            sb.blocks_per_group,
            sb.blocks_count,
            sb.first_data_block,
            sb.flex_bg_size(),
        )
        .map_err(|e| ImageError::Unsupported {
            what: format!("geometry: {e}"),
        })?;
        let mut used = Vec::new();
        let mut corrupt = BTreeMap::new();
        for g in 0..sb.group_count() {
            let first = sb.group_first_block(g);
            let len = sb.group_len(g);
            match img.block_bitmap(g) {
                Ok(bits) => used.extend(
                    set_runs(&bits, len).map(|(s, n)| (first + u64::from(s), u64::from(n))),
                ),
                Err(e @ (ImageError::Io { .. } | ImageError::Truncated { .. })) => return Err(e),
                Err(e) => {
                    corrupt.insert(g, e.to_string());
                    used.push((first, u64::from(len)));
                }
            }
        }
        let descs = img.descriptors();
        let block_uninit = (0..sb.group_count())
            .filter(|&g| descs[g as usize].block_uninit(sb) && !corrupt.contains_key(&g))
            .collect();
        let scan = img.files()?;
        Ok(ImageStart {
            geo,
            inodes_per_group: sb.inodes_per_group,
            meta_used: meta_used(img)?,
            used,
            block_uninit,
            corrupt,
            desc_free: descs.iter().map(|d| d.free_blocks).collect(),
            files: scan.files,
        })
    }

    /// The allocator's device: a copy of the bitmaps in memory (a run never writes to the
    /// image), the descriptors' free counts, and the failed groups.
    pub fn source(&self) -> Result<ImageSource, mballoc::Error> {
        Ok(ImageSource {
            mem: MemSource::new(self.geo, &self.used)?
                .with_block_uninit(self.block_uninit.iter().copied())?,
            corrupt: self.corrupt.clone(),
            desc_free: self.desc_free.clone(),
        })
    }
}

/// Metadata blocks per group: what `ext4_init_block_bitmap` marks for every group, wherever
/// flex_bg put each group's tables, plus the journal's blocks.
fn meta_used(img: &Image) -> Result<Vec<u32>, ImageError> {
    let sb = img.superblock();
    let n = sb.group_count();
    let mut per = vec![0u32; n as usize];
    let mut mark = |block: u64, count: u64| {
        for b in block..block + count {
            if b >= sb.first_data_block && b < sb.blocks_count {
                per[((b - sb.first_data_block) / u64::from(sb.blocks_per_group)) as usize] += 1;
            }
        }
    };
    for (g, d) in img.descriptors().iter().enumerate() {
        let g = g as u32;
        mark(sb.group_first_block(g), u64::from(sb.base_meta_blocks(g)));
        mark(d.block_bitmap, 1);
        mark(d.inode_bitmap, 1);
        mark(d.inode_table, itable_blocks(sb));
    }
    for e in img.journal_extents()? {
        mark(e.physical, u64::from(e.len));
    }
    Ok(per)
}

/// A [`BitmapSource`] over an image's state: the in-memory copy, with the groups whose bitmap
/// failed answering `CorruptGroup` as the kernel's load fails, and every group's free count
/// taken from its descriptor, so that a bitmap that disagrees is caught on load as the kernel
/// catches it (`ext4_mb_generate_buddy`).
pub struct ImageSource {
    mem: MemSource,
    corrupt: BTreeMap<u32, String>,
    desc_free: Vec<u32>,
}

impl ImageSource {
    /// Makes every bitmap read wait `cost` (a stand-in for disk latency).
    pub fn with_load_cost(mut self, cost: std::time::Duration) -> Self {
        self.mem = self.mem.with_load_cost(cost);
        self
    }
}

impl BitmapSource for ImageSource {
    fn descriptor_free(&self, group: u32) -> u32 {
        self.desc_free[group as usize]
    }
    fn block_uninit(&self, group: u32) -> bool {
        self.mem.block_uninit(group)
    }
    fn read_bitmap(&self, group: u32) -> Result<Bitmap, mballoc::Error> {
        match self.corrupt.get(&group) {
            Some(reason) => Err(mballoc::Error::CorruptGroup {
                group,
                reason: reason.clone(),
            }),
            None => self.mem.read_bitmap(group),
        }
    }
    fn write_bitmap(&self, group: u32, bitmap: &Bitmap) -> Result<bool, mballoc::Error> {
        self.mem.write_bitmap(group, bitmap)
    }
}

/// Used (set) runs of the first `nbits` bits.
pub(crate) fn set_runs(bits: &[u8], nbits: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < nbits && !test_bit(bits, u64::from(i)) {
            i += 1;
        }
        let s = i;
        while i < nbits && test_bit(bits, u64::from(i)) {
            i += 1;
        }
        (i > s).then_some((s, i - s))
    })
}
