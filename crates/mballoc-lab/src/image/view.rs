//! What the kernel's buddy load makes of each group (`ext4_mb_init_cache`,
//! `ext4_mb_generate_buddy`) and the reports built on it: `/proc/fs/ext4/<dev>/mb_groups`,
//! e2freefrag's report, and the lab's fragmentation metrics.

use std::fmt::Write as _;

use serde::Serialize;

use super::{Image, ImageError, RawBitmap};
use crate::metrics::filefrag::{file_extents, FileExtents};
use crate::metrics::frag_pct::{fsperf_frag, FragPct};
use crate::metrics::free_space::bitmap_runs;
use crate::metrics::freefrag::{e2freefrag, FreeFrag, FreeFragOptions};
use crate::metrics::mb_groups::{mb_group, mb_group_line, MbGroup, MB_GROUPS_HEADER};
use crate::metrics::{FileExtent, FreeSpace, MetricsError};

/// One group as the kernel sees it after loading its buddy.
#[derive(Debug)]
pub struct GroupView {
    pub group: u32,
    /// Free blocks per the descriptor (`bb_free` before the buddy is built).
    pub desc_free: u32,
    pub block_uninit: bool,
    pub inode_uninit: bool,
    /// The bitmap, or why its load fails (the group is then left alone by the allocator).
    pub bitmap: Result<RawBitmap, ImageError>,
    /// The buddy's view of a loaded bitmap.
    pub mb: Option<MbGroup>,
}

impl GroupView {
    /// `ext4_mb_generate_buddy` marks the bitmap corrupt when it disagrees with the descriptor.
    pub fn inconsistent(&self) -> bool {
        self.mb.as_ref().is_some_and(|m| m.free != self.desc_free)
    }
}

/// Every group of an image.
#[derive(Debug)]
pub struct ImageView {
    pub block_size: u32,
    pub blocks_per_group: u32,
    pub blocks_count: u64,
    pub groups: Vec<GroupView>,
}

impl ImageView {
    pub fn build(img: &Image) -> Result<ImageView, ImageError> {
        let sb = img.superblock();
        let bits = sb.block_size.trailing_zeros();
        let groups = (0..sb.group_count())
            .map(|g| {
                let d = &img.descriptors()[g as usize];
                let bitmap = img.block_bitmap(g);
                if let Err(ImageError::Io { .. } | ImageError::Truncated { .. }) = &bitmap {
                    return Err(bitmap.expect_err("matched an error"));
                }
                let mb = bitmap.as_ref().ok().map(|b| {
                    mb_group(
                        g as usize,
                        &bitmap_runs(b, sb.blocks_per_group),
                        sb.blocks_per_group,
                        bits,
                    )
                });
                Ok(GroupView {
                    group: g,
                    desc_free: d.free_blocks,
                    block_uninit: d.block_uninit(sb),
                    inode_uninit: d.inode_uninit(sb),
                    bitmap,
                    mb,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ImageView {
            block_size: sb.block_size,
            blocks_per_group: sb.blocks_per_group,
            blocks_count: sb.blocks_count,
            groups,
        })
    }

    /// `/proc/fs/ext4/<dev>/mb_groups` as its first read after a mount prints it
    /// (`ext4_mb_seq_groups_show`): a group whose load fails shows the error's text.
    pub fn mb_groups_text(&self) -> String {
        let mut s = String::from(MB_GROUPS_HEADER);
        for g in &self.groups {
            match (&g.mb, &g.bitmap) {
                (Some(m), _) => {
                    s.push_str(&mb_group_line(m));
                    if g.inconsistent() {
                        s.push_str(" Block bitmap corrupted!");
                    }
                }
                (None, Err(e)) => {
                    let _ = write!(s, "#{:<5}: {}", g.group, e.kernel_text());
                }
                (None, Ok(_)) => unreachable!("a loaded bitmap always has its buddy view"),
            }
            s.push('\n');
        }
        s
    }

    /// The first group whose bitmap cannot be loaded, as an error.
    pub fn first_error(&self) -> Option<&ImageError> {
        self.groups.iter().find_map(|g| g.bitmap.as_ref().err())
    }

    /// Free space per group; a group whose bitmap failed counts as full (the allocator never
    /// uses it).
    pub fn free_space(&self) -> Result<FreeSpace, MetricsError> {
        let full = vec![0xFFu8; self.block_size as usize];
        let bitmaps: Vec<Vec<u8>> = self
            .groups
            .iter()
            .map(|g| g.bitmap.as_ref().unwrap_or(&full).clone())
            .collect();
        FreeSpace::from_bitmaps(&bitmaps, self.blocks_per_group, self.block_size)
    }

    /// e2freefrag's report (offline bitmap scan, no `-c`): `Device:` and `Blocksize:` lines,
    /// then the totals and histogram. e2freefrag stops at a bitmap it cannot read; so does
    /// this.
    pub fn freefrag(&self, device_name: &str) -> Result<(FreeFrag, String), ImageError> {
        if let Some(e) = self.first_error() {
            return Err(e.clone());
        }
        let ff = free_extents(&self.free_space()?, Some(self.blocks_count))?;
        let text = format!(
            "Device: {device_name}\nBlocksize: {} bytes\n{}",
            self.block_size,
            ff.render()
        );
        Ok((ff, text))
    }
}

/// The lab's fragmentation figures for an image.
#[derive(Debug, Serialize)]
pub struct FragReport {
    pub block_size: u32,
    pub blocks_count: u64,
    pub groups: u32,
    /// Groups whose bitmap could not be loaded, with the reason.
    pub bad_groups: Vec<(u32, String)>,
    pub block_uninit_groups: Vec<u32>,
    /// fsperf's frag_pct, per group and summarised.
    pub frag_pct: FragPct,
    /// The buddy's view per group (mb_groups' columns plus the derived orders).
    pub mb_groups: Vec<MbGroup>,
    /// Free extents (e2freefrag's figures and histogram).
    pub free_extents: FreeFrag,
    /// Extents per file as filefrag counts them.
    pub file_extents: FileExtents,
    /// Files mapped by indirect blocks (not counted above).
    pub indirect_files: u64,
    /// Inodes or inode bitmaps that failed a check.
    pub file_errors: Vec<String>,
}

impl ImageView {
    /// fsperf frag_pct, the free-extent histogram and extents per file.
    pub fn frag_report(&self, img: &Image) -> Result<FragReport, ImageError> {
        let space = self.free_space()?;
        let free_extents = free_extents(&space, Some(self.blocks_count))?;
        let scan = img.files()?;
        let files: Vec<Vec<FileExtent>> = scan
            .files
            .iter()
            .map(|f| {
                f.extents
                    .iter()
                    .map(|e| (u64::from(e.logical), e.physical, u64::from(e.len)))
                    .collect()
            })
            .collect();
        Ok(FragReport {
            block_size: self.block_size,
            blocks_count: self.blocks_count,
            groups: self.groups.len() as u32,
            bad_groups: self
                .groups
                .iter()
                .filter_map(|g| g.bitmap.as_ref().err().map(|e| (g.group, e.to_string())))
                .collect(),
            block_uninit_groups: self
                .groups
                .iter()
                .filter(|g| g.block_uninit)
                .map(|g| g.group)
                .collect(),
            frag_pct: fsperf_frag(&space),
            mb_groups: self.groups.iter().filter_map(|g| g.mb.clone()).collect(),
            free_extents,
            file_extents: file_extents(&files, self.block_size)?,
            indirect_files: scan.indirect_files,
            file_errors: scan.errors.iter().map(ToString::to_string).collect(),
        })
    }
}

/// e2freefrag's figures without `-c`; with `blocks_count`, totals over the superblock's block
/// count (e2freefrag divides by `ext2fs_blocks_count`, not by whole groups).
pub(crate) fn free_extents(
    space: &FreeSpace,
    blocks_count: Option<u64>,
) -> Result<FreeFrag, MetricsError> {
    let opts = FreeFragOptions {
        chunk_bytes: Vec::new(),
        ..FreeFragOptions::default()
    };
    let mut ff = e2freefrag(space, &opts)?;
    if let Some(n) = blocks_count {
        ff.total_blocks = n;
        ff.free_pct = ff.free_blocks as f64 * 100.0 / n as f64;
    }
    Ok(ff)
}
