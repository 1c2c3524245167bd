//! Pages of ext4's buddy cache: which groups are built together.
//!
//! ext4 keeps every group's in-core bitmap and buddy in the page cache of one internal inode
//! (`s_buddy_cache`), group `g`'s bitmap in its block `2g` and its buddy in block `2g + 1`
//! (`ext4_mb_load_buddy_gfp`, `ext4_mb_get_buddy_page_lock`). A page holds
//! `page_size / block_size` of those blocks, so with two blocks or more per page one page holds
//! both blocks of `blocks_per_page / 2` whole groups; with one block per page (the block as large
//! as the page) the bitmap and buddy of a group sit in two pages of their own. Filling a page
//! (`ext4_mb_init_cache`) reads the bitmaps of, and builds, every group of that page still
//! `NEED_INIT`, whichever group asked: building one group's buddy builds its page-mates too.
//!
//! | page \ block | 1 KiB | 2 KiB | 4 KiB | 16 KiB | 64 KiB |
//! |---|---:|---:|---:|---:|---:|
//! | 4 KiB (x86, most arm64) | 2 | 1 | 1 | - | - |
//! | 16 KiB (arm64, Apple) | 8 | 4 | 2 | 1 | - |
//! | 64 KiB (arm64, ppc64) | 32 | 16 | 8 | 2 | 1 |
//!
//! (groups per page; `-`: Linux 6.18 mounts no block size above the page size.)

use std::ops::Range;

use crate::error::Error;

/// The page size of the machines the stored captures ran on (x86_64).
pub const DEFAULT_PAGE_SIZE: u32 = 4096;

/// The smallest and largest page sizes Linux runs with (4 KiB; 64 KiB on arm64 and ppc64).
const PAGE_SIZES: std::ops::RangeInclusive<u32> = 4096..=65536;

/// How groups share the buddy cache's pages, for one block size and page size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuddyPages {
    page_size: u32,
    /// Groups per page (`groups_per_page` in `ext4_mb_init_cache`), at least 1.
    per_page: u32,
    /// Blocks per page (`blocks_per_page` in `ext4_mb_load_buddy_gfp`), at least 1.
    blocks_per_page: u32,
}

impl BuddyPages {
    /// The layout for `block_size`-byte blocks in `page_size`-byte pages. The page size must
    /// be a power of two from 4 KiB to 64 KiB, and at least the block size.
    pub fn new(block_size: u32, page_size: u32) -> Result<BuddyPages, Error> {
        if !page_size.is_power_of_two() || !PAGE_SIZES.contains(&page_size) {
            return Err(Error::InvalidGeometry {
                field: "page_size",
                value: page_size.into(),
                reason: "a power of two from 4096 to 65536 bytes",
            });
        }
        if page_size < block_size {
            return Err(Error::InvalidGeometry {
                field: "page_size",
                value: page_size.into(),
                reason: "at least the block size (Linux 6.18 mounts no block larger than a page)",
            });
        }
        // ext4_mb_init_cache: groups_per_page = blocks_per_page >> 1, at least 1.
        let blocks_per_page = page_size / block_size;
        Ok(BuddyPages {
            page_size,
            per_page: (blocks_per_page / 2).max(1),
            blocks_per_page,
        })
    }

    /// The page size in bytes.
    pub fn page_size(&self) -> u32 {
        self.page_size
    }

    /// Groups whose bitmap and buddy share one page.
    pub fn groups_per_page(&self) -> u32 {
        self.per_page
    }

    /// The buddy cache's page numbers of group `g`'s bitmap and buddy (`pnum` of blocks
    /// `2g` and `2g + 1` in `ext4_mb_load_buddy_gfp`): two pages when a page holds one
    /// block, the same page twice otherwise.
    pub fn folios_of(&self, g: u32) -> [u64; 2] {
        let block = 2 * u64::from(g);
        let per = u64::from(self.blocks_per_page);
        [block / per, (block + 1) / per]
    }

    /// The groups of the page that holds group `g`'s bitmap and buddy, cut at `group_count`
    /// (`first_group = page_index * blocks_per_page / 2` in `ext4_mb_init_cache`).
    pub fn page_of(&self, g: u32, group_count: u32) -> Range<u32> {
        debug_assert!(g < group_count, "group {g} of {group_count}");
        let first = g - g % self.per_page;
        first..(first + self.per_page).min(group_count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's arithmetic, written out as `ext4_mb_get_buddy_page_lock` and
    /// `ext4_mb_init_cache` do it: the page of block `2g`, and the groups that page covers.
    fn kernel_page_groups(g: u32, block_size: u32, page_size: u32, ngroups: u32) -> Vec<u32> {
        let blocks_per_page = page_size / block_size;
        let pnum = (g * 2) / blocks_per_page;
        // The buddy, block 2g + 1, is on the same page when a page holds two blocks or more.
        if blocks_per_page >= 2 {
            assert_eq!((g * 2 + 1) / blocks_per_page, pnum);
        }
        let groups_per_page = (blocks_per_page >> 1).max(1);
        let first_group = pnum * blocks_per_page / 2;
        (first_group..first_group + groups_per_page)
            .filter(|&x| x < ngroups)
            .collect()
    }

    #[test]
    fn pages_hold_the_groups_the_kernel_puts_there() {
        for page in [4096, 16384, 65536] {
            for block in [1024, 2048, 4096, 16384, 65536]
                .into_iter()
                .filter(|&b| b <= page)
            {
                let p = BuddyPages::new(block, page).unwrap();
                for ngroups in [1, 7, 64, 101] {
                    for g in 0..ngroups {
                        let ours: Vec<u32> = p.page_of(g, ngroups).collect();
                        assert_eq!(
                            ours,
                            kernel_page_groups(g, block, page, ngroups),
                            "group {g} of {ngroups}, {block}-byte blocks, {page}-byte pages"
                        );
                        assert!(ours.contains(&g));
                    }
                }
            }
        }
    }

    #[test]
    fn a_groups_folios_are_the_pages_of_its_two_blocks() {
        let folios = |b, p, g| BuddyPages::new(b, p).unwrap().folios_of(g);
        assert_eq!(
            folios(4096, 4096, 5),
            [10, 11],
            "one block a page: two folios"
        );
        assert_eq!(
            folios(2048, 4096, 5),
            [5, 5],
            "bitmap and buddy share a page"
        );
        assert_eq!(folios(4096, 65536, 9), [1, 1], "groups 8-15 share page 1");
        for (block, page) in [(1024, 4096), (4096, 16384), (1024, 65536)] {
            for g in 0..64 {
                let [bitmap, buddy] = folios(block, page, g);
                assert_eq!(
                    bitmap, buddy,
                    "group {g}, {block}-byte blocks, {page}-byte pages"
                );
                let first = kernel_page_groups(g, block, page, 64)[0];
                assert_eq!(bitmap, u64::from(first / (page / block / 2).max(1)));
            }
        }
    }

    #[test]
    fn groups_per_page_by_block_and_page_size() {
        let per = |b, p| BuddyPages::new(b, p).unwrap().groups_per_page();
        assert_eq!(per(4096, 4096), 1);
        assert_eq!(
            per(1024, 4096),
            2,
            "1 KiB blocks on x86 already pair groups"
        );
        assert_eq!(per(2048, 4096), 1);
        assert_eq!(per(4096, 16384), 2);
        assert_eq!(per(4096, 65536), 8);
        assert_eq!(per(1024, 65536), 32);
        assert_eq!(per(65536, 65536), 1);
    }

    #[test]
    fn impossible_page_sizes_are_errors_naming_the_value() {
        for (block, page) in [
            (4096, 8192 + 1),
            (4096, 2048),
            (1024, 1 << 17),
            (65536, 16384),
        ] {
            let e = BuddyPages::new(block, page).unwrap_err();
            assert!(
                matches!(e, Error::InvalidGeometry { field: "page_size", value, .. } if value == u64::from(page)),
                "{e:?}"
            );
        }
    }
}
