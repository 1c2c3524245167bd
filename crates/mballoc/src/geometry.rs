//! Filesystem geometry: block size, groups, flex_bg, and block ⇄ (group, offset).
//!
//! mballoc works in clusters; this crate supports one block per cluster (no bigalloc), so a
//! "block" here is the allocation unit everywhere. Kernel counterpart:
//! `ext4_get_group_no_and_offset`, `ext4_group_first_block_no`.

/// A geometry no filesystem can have: the field at fault, its value and what it must be.
/// The crate's `Error` takes it in as `Error::InvalidGeometry`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid geometry: {field} = {value} (must be {reason})")]
pub struct GeometryError {
    /// The argument at fault.
    pub field: &'static str,
    /// Its value.
    pub value: u64,
    /// What it must be.
    pub reason: &'static str,
}

/// The shape of the space being allocated: what `mkfs.ext4` decides once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Geometry {
    block_size: u32,
    blocks_per_group: u32,
    blocks_count: u64,
    first_data_block: u64,
    flex_bg_size: u32,
    /// Derived, kept because requests ask for them constantly: the group count, and
    /// `log2(blocks_per_group)` when that is a power of two (block ⇄ group by shifts instead
    /// of 64-bit divisions).
    groups: u32,
    group_shift: Option<u32>,
}

impl Geometry {
    /// Validates and builds a geometry.
    ///
    /// * `block_size`: bytes, a power of two in 1 KiB ..= 64 KiB.
    /// * `blocks_per_group`: a multiple of 8, at most `8 * block_size` (one bitmap block).
    /// * `blocks_count`: total blocks, more than `first_data_block`.
    /// * `first_data_block`: 0, or 1 with 1 KiB blocks (as ext4).
    /// * `flex_bg_size`: groups per flex group, a power of two; 1 means no flex_bg.
    pub fn new(
        block_size: u32,
        blocks_per_group: u32,
        blocks_count: u64,
        first_data_block: u64,
        flex_bg_size: u32,
    ) -> Result<Self, GeometryError> {
        let bad = |field: &'static str, value: u64, reason: &'static str| {
            Err(GeometryError {
                field,
                value,
                reason,
            })
        };
        if !block_size.is_power_of_two() || !(1024..=65536).contains(&block_size) {
            return bad(
                "block_size",
                block_size.into(),
                "a power of two from 1024 to 65536",
            );
        }
        if blocks_per_group == 0
            || !blocks_per_group.is_multiple_of(8)
            || blocks_per_group > block_size * 8
        {
            return bad(
                "blocks_per_group",
                blocks_per_group.into(),
                "a non-zero multiple of 8, at most 8 * block_size",
            );
        }
        if first_data_block > 1 || (first_data_block == 1 && block_size != 1024) {
            return bad(
                "first_data_block",
                first_data_block,
                "0, or 1 with 1 KiB blocks",
            );
        }
        if blocks_count <= first_data_block {
            return bad("blocks_count", blocks_count, "more than first_data_block");
        }
        let groups = (blocks_count - first_data_block).div_ceil(blocks_per_group.into());
        if groups > u64::from(u32::MAX) {
            return bad("blocks_count", blocks_count, "at most 2^32 - 1 groups");
        }
        if flex_bg_size == 0 || !flex_bg_size.is_power_of_two() || flex_bg_size > (1 << 31) {
            return bad(
                "flex_bg_size",
                flex_bg_size.into(),
                "a power of two (1 = no flex_bg)",
            );
        }
        Ok(Geometry {
            block_size,
            blocks_per_group,
            blocks_count,
            first_data_block,
            flex_bg_size,
            groups: groups as u32,
            group_shift: blocks_per_group
                .is_power_of_two()
                .then(|| blocks_per_group.trailing_zeros()),
        })
    }

    /// A geometry laid out like `mkfs.ext4` would for `bytes` of space with 4 KiB blocks:
    /// 32768 blocks per group and flex_bg 16.
    pub fn ext4_default(bytes: u64) -> Result<Self, GeometryError> {
        Self::new(4096, 32768, bytes / 4096, 0, 16)
    }

    /// Bytes per block.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// log2 of the block size (the kernel's `bsbits`).
    pub fn bsbits(&self) -> u32 {
        self.block_size.trailing_zeros()
    }
    /// Clusters per group (`EXT4_CLUSTERS_PER_GROUP`).
    pub fn blocks_per_group(&self) -> u32 {
        self.blocks_per_group
    }
    /// Blocks of the filesystem (`s_blocks_count`).
    pub fn blocks_count(&self) -> u64 {
        self.blocks_count
    }
    /// The first block groups count from (`s_first_data_block`).
    pub fn first_data_block(&self) -> u64 {
        self.first_data_block
    }
    /// Groups per flex group (1: no flex_bg).
    pub fn flex_bg_size(&self) -> u32 {
        self.flex_bg_size
    }
    /// Number of block groups.
    #[inline]
    pub fn group_count(&self) -> u32 {
        self.groups
    }
    /// `MB_NUM_ORDERS`: orders 0 ..= bsbits + 1.
    pub fn num_orders(&self) -> usize {
        self.bsbits() as usize + 2
    }
    /// First block of group `g`.
    #[inline]
    pub fn group_first_block(&self, g: u32) -> u64 {
        self.first_data_block + u64::from(g) * u64::from(self.blocks_per_group)
    }
    /// Blocks in group `g` (the last group may be short).
    #[inline]
    pub fn group_len(&self, g: u32) -> u32 {
        let first = self.group_first_block(g);
        (self.blocks_count - first).min(self.blocks_per_group.into()) as u32
    }
    /// `(group, offset)` of an in-range block.
    #[inline]
    pub fn locate(&self, block: u64) -> (u32, u32) {
        let rel = block - self.first_data_block;
        if let Some(shift) = self.group_shift {
            return (
                (rel >> shift) as u32,
                (rel as u32) & (self.blocks_per_group - 1),
            );
        }
        let bpg = u64::from(self.blocks_per_group);
        ((rel / bpg) as u32, (rel % bpg) as u32)
    }
    /// Absolute block of `(group, offset)`.
    #[inline]
    pub fn block_of(&self, group: u32, offset: u32) -> u64 {
        self.group_first_block(group) + u64::from(offset)
    }
    /// Whether `[start, start + len)` lies inside the filesystem's data area.
    pub fn contains(&self, start: u64, len: u64) -> bool {
        len > 0
            && start >= self.first_data_block
            && start
                .checked_add(len)
                .is_some_and(|end| end <= self.blocks_count)
    }
    /// Total size in bytes.
    pub fn bytes(&self) -> u64 {
        self.blocks_count * u64::from(self.block_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_gib_has_eight_groups() {
        let g = Geometry::ext4_default(1 << 30).unwrap();
        assert_eq!(g.group_count(), 8);
        assert_eq!(g.num_orders(), 14);
        assert_eq!(g.locate(32768 + 5), (1, 5));
        assert_eq!(g.block_of(1, 5), 32773);
    }

    #[test]
    fn short_last_group() {
        let g = Geometry::new(4096, 32768, 32768 + 100, 0, 16).unwrap();
        assert_eq!(g.group_count(), 2);
        assert_eq!(g.group_len(1), 100);
    }

    #[test]
    fn bad_geometry_is_an_error() {
        assert!(matches!(
            Geometry::new(3000, 32768, 1 << 20, 0, 16),
            Err(GeometryError {
                field: "block_size",
                ..
            })
        ));
        assert!(Geometry::new(4096, 65536, 1 << 20, 0, 16).is_err());
        assert!(Geometry::new(4096, 32768, 0, 0, 16).is_err());
        assert!(Geometry::new(4096, 32768, 1 << 20, 0, 3).is_err());
        assert!(Geometry::new(1024, 8192, 1 << 20, 1, 16).is_ok());
    }
}
