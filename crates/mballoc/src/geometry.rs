//! Filesystem geometry: block size, cluster size, groups, flex_bg, and block ⇄ (group,
//! offset).
//!
//! mballoc works in clusters (`bigalloc`: 2^k blocks per cluster, `s_cluster_bits`): a group's
//! bitmap and buddy have one bit per cluster, offsets inside a group and every length the
//! allocator handles are clusters, while absolute (physical) and logical positions stay block
//! numbers. Without bigalloc a cluster is one block and the two units coincide. Kernel
//! counterparts: `ext4_get_group_no_and_offset`, `ext4_group_first_block_no`,
//! `EXT4_B2C`/`EXT4_C2B`/`EXT4_NUM_B2C`, `EXT4_CLUSTERS_PER_GROUP`.

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

/// Largest cluster mke2fs makes (`EXT2_MAX_CLUSTER_LOG_SIZE`: 512 MiB).
pub const MAX_CLUSTER_SIZE: u64 = 1 << 29;

/// The shape of the space being allocated: what `mkfs.ext4` decides once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Geometry {
    block_size: u32,
    /// `s_cluster_bits`: log2 of the blocks per cluster (0 without bigalloc). Narrow, with
    /// `group_shift`, so that the geometry (held by errors too) stays at 40 bytes.
    cluster_bits: u8,
    clusters_per_group: u32,
    blocks_count: u64,
    first_data_block: u64,
    flex_bg_size: u32,
    /// Derived, kept because requests ask for them constantly: the group count, and
    /// `log2(blocks per group)` when that is a power of two (block ⇄ group by shifts instead
    /// of 64-bit divisions).
    groups: u32,
    group_shift: Option<u8>,
}

impl Geometry {
    /// Validates and builds a geometry of one block per cluster.
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
        Self::with_clusters(
            block_size,
            0,
            blocks_per_group,
            blocks_count,
            first_data_block,
            flex_bg_size,
        )
    }

    /// A `bigalloc` geometry: clusters of `2^cluster_bits` blocks, `clusters_per_group`
    /// clusters per group (a multiple of 8, at most `8 * block_size`), `blocks_count` a whole
    /// number of clusters. As mke2fs accepts: a cluster of at most 512 MiB
    /// (`EXT2_MAX_CLUSTER_LOG_SIZE`), fewer than 2^32 blocks per group, and the first data
    /// block 0. `cluster_bits` 0 is [`Geometry::new`].
    pub fn with_clusters(
        block_size: u32,
        cluster_bits: u32,
        clusters_per_group: u32,
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
        let (field, reason) = if cluster_bits == 0 {
            (
                "blocks_per_group",
                "a non-zero multiple of 8, at most 8 * block_size",
            )
        } else {
            (
                "clusters_per_group",
                "a non-zero multiple of 8, at most 8 * block_size",
            )
        };
        if clusters_per_group == 0
            || !clusters_per_group.is_multiple_of(8)
            || clusters_per_group > block_size * 8
        {
            return bad(field, clusters_per_group.into(), reason);
        }
        if cluster_bits > 0 {
            if u64::from(block_size) << cluster_bits.min(40) > MAX_CLUSTER_SIZE {
                return bad(
                    "cluster_bits",
                    cluster_bits.into(),
                    "a cluster of at most 512 MiB (mke2fs)",
                );
            }
            if u64::from(clusters_per_group) << cluster_bits >= 1 << 32 {
                return bad(
                    "cluster_bits",
                    cluster_bits.into(),
                    "fewer than 2^32 blocks per group (mke2fs)",
                );
            }
            if first_data_block != 0 {
                return bad("first_data_block", first_data_block, "0 with bigalloc");
            }
            if blocks_count & ((1 << cluster_bits) - 1) != 0 {
                return bad(
                    "blocks_count",
                    blocks_count,
                    "a whole number of clusters with bigalloc",
                );
            }
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
        let bpg = u64::from(clusters_per_group) << cluster_bits;
        let groups = (blocks_count - first_data_block).div_ceil(bpg);
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
            cluster_bits: cluster_bits as u8,
            clusters_per_group,
            blocks_count,
            first_data_block,
            flex_bg_size,
            groups: groups as u32,
            group_shift: bpg.is_power_of_two().then(|| bpg.trailing_zeros() as u8),
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
    /// `s_cluster_bits`: log2 of the blocks per cluster (0 without bigalloc).
    pub fn cluster_bits(&self) -> u32 {
        u32::from(self.cluster_bits)
    }
    /// Blocks per cluster (`s_cluster_ratio`).
    pub fn cluster_ratio(&self) -> u32 {
        1 << self.cluster_bits()
    }
    /// Clusters per group (`EXT4_CLUSTERS_PER_GROUP`): the bits of a group's bitmap.
    pub fn clusters_per_group(&self) -> u32 {
        self.clusters_per_group
    }
    /// Blocks per group (`EXT4_BLOCKS_PER_GROUP`).
    pub fn blocks_per_group(&self) -> u64 {
        u64::from(self.clusters_per_group) << self.cluster_bits()
    }
    /// `EXT4_C2B`: clusters → blocks.
    #[inline]
    pub fn c2b(&self, clusters: u64) -> u64 {
        clusters << self.cluster_bits()
    }
    /// `EXT4_B2C`: the cluster holding block number `block` (rounds down).
    #[inline]
    pub fn b2c(&self, block: u64) -> u64 {
        block >> self.cluster_bits()
    }
    /// `EXT4_NUM_B2C`: clusters needed to hold `blocks` blocks (rounds up).
    #[inline]
    pub fn num_b2c(&self, blocks: u64) -> u64 {
        (blocks + (u64::from(self.cluster_ratio()) - 1)) >> self.cluster_bits()
    }
    /// `EXT4_PBLK_COFF` / `EXT4_LBLK_COFF`: the offset of a block inside its cluster.
    #[inline]
    pub fn cluster_offset(&self, block: u64) -> u64 {
        block & (u64::from(self.cluster_ratio()) - 1)
    }
    /// Total blocks.
    pub fn blocks_count(&self) -> u64 {
        self.blocks_count
    }
    /// Total clusters (the data area included only from `first_data_block` on).
    pub fn clusters_count(&self) -> u64 {
        self.b2c(self.blocks_count)
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
        self.first_data_block + u64::from(g) * self.blocks_per_group()
    }
    /// Clusters in group `g` (the last group may be short).
    #[inline]
    pub fn group_len(&self, g: u32) -> u32 {
        let first = self.group_first_block(g);
        self.b2c(self.blocks_count - first)
            .min(self.clusters_per_group.into()) as u32
    }
    /// `(group, cluster offset)` of an in-range block (`ext4_get_group_no_and_offset`).
    #[inline]
    pub fn locate(&self, block: u64) -> (u32, u32) {
        let rel = block - self.first_data_block;
        if let Some(shift) = self.group_shift {
            let off = rel & ((1 << shift) - 1);
            return ((rel >> shift) as u32, (off >> self.cluster_bits) as u32);
        }
        let bpg = self.blocks_per_group();
        (
            (rel / bpg) as u32,
            ((rel % bpg) >> self.cluster_bits) as u32,
        )
    }
    /// First block of cluster `offset` of `group` (`ext4_grp_offs_to_block`).
    #[inline]
    pub fn block_of(&self, group: u32, offset: u32) -> u64 {
        self.group_first_block(group) + self.c2b(offset.into())
    }
    /// Whether blocks `[start, start + len)` lie inside the filesystem's data area.
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

    /// `EXT4_B2C`, `EXT4_C2B`, `EXT4_NUM_B2C` and the (group, cluster offset) of a block, with
    /// 16 blocks per cluster (64 KiB clusters of 4 KiB blocks).
    #[test]
    fn clusters_convert_like_the_kernel() {
        let g = Geometry::with_clusters(4096, 4, 32768, 1 << 20, 0, 16).unwrap();
        assert_eq!(g.cluster_ratio(), 16);
        assert_eq!(g.blocks_per_group(), 524_288);
        assert_eq!(g.group_count(), 2);
        assert_eq!(g.clusters_count(), 65536);
        assert_eq!((g.b2c(31), g.b2c(32), g.c2b(3)), (1, 2, 48));
        assert_eq!(
            (g.num_b2c(0), g.num_b2c(1), g.num_b2c(16), g.num_b2c(17)),
            (0, 1, 1, 2)
        );
        assert_eq!(g.cluster_offset(35), 3);
        // Block 524288 + 16 * 262 + 5 is in group 1, cluster 262.
        assert_eq!(g.locate(524_288 + 16 * 262 + 5), (1, 262));
        assert_eq!(g.block_of(1, 262), 524_288 + 16 * 262);
        assert_eq!(g.group_len(1), 32768);
        // A short last group counts its clusters.
        let short = Geometry::with_clusters(4096, 2, 32768, 131_072 + 400, 0, 16).unwrap();
        assert_eq!((short.group_count(), short.group_len(1)), (2, 100));
    }

    /// What mke2fs refuses is refused, with the offending value.
    #[test]
    fn bad_cluster_geometry_is_an_error() {
        let field = |r: Result<Geometry, GeometryError>| match r {
            Err(GeometryError { field, value, .. }) => (field, value),
            other => panic!("{other:?}"),
        };
        // 2^17 blocks of 4 KiB = 512 MiB clusters pass the size, not the group limit.
        assert_eq!(
            field(Geometry::with_clusters(4096, 17, 32768, 1 << 40, 0, 16)),
            ("cluster_bits", 17)
        );
        assert!(Geometry::with_clusters(4096, 16, 32768, 1 << 40, 0, 16).is_ok());
        // 64 KiB blocks: 2^14 of them are 1 GiB.
        assert_eq!(
            field(Geometry::with_clusters(65536, 14, 8, 1 << 20, 0, 16)),
            ("cluster_bits", 14)
        );
        assert_eq!(
            field(Geometry::with_clusters(
                4096,
                2,
                32768,
                (1 << 20) + 2,
                0,
                16
            )),
            ("blocks_count", (1 << 20) + 2)
        );
        assert_eq!(
            field(Geometry::with_clusters(1024, 2, 8192, 1 << 20, 1, 16)),
            ("first_data_block", 1)
        );
        assert_eq!(
            field(Geometry::with_clusters(4096, 2, 65536, 1 << 20, 0, 16)),
            ("clusters_per_group", 65536)
        );
    }
}
