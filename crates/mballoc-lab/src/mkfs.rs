//! A fresh file system laid out the way `mkfs.ext4` (e2fsprogs 1.47.0) lays it out, with
//! 4 KiB blocks: which blocks are in use before anything is written.
//!
//! The kernel captures start from images made by `mkfs.ext4 -q -F -U ... -E
//! lazy_itable_init=0,lazy_journal_init=0,nodiscard` with the stock `mke2fs.conf`. To run
//! the allocator on a "new" file system of any size, the lab needs the same in-use map
//! without running mke2fs. [`layout`] re-derives it by following mke2fs's own decisions, in
//! mke2fs's order, on an extent map of used blocks (never a per-block loop, so 16 TiB takes
//! milliseconds):
//!
//! 1. **Geometry** (`ext2fs_initialize`): groups of 32768 blocks; inode count from the usage
//!    type's inode ratio; inodes per group rounded to fill whole inode-table blocks; a last
//!    group shorter than its own overhead + 50 blocks is dropped; 64-byte descriptors
//!    (`64bit` is in the ext4 defaults); reserved GDT blocks so the fs can grow 1024× (capped
//!    at 1024 blocks, the resize inode's reach).
//! 2. **Superblock + GDT + reserved GDT** in groups 0, 1 and powers of 3, 5, 7 (sparse_super).
//! 3. **Bitmaps and inode tables** (`ext2fs_allocate_group_table` with flex_bg 16): the 16
//!    block bitmaps, then the 16 inode bitmaps, then the 16 inode tables of a flex group,
//!    packed at the first free space of its first group. In the last flex group the stride
//!    between the three arrays is the number of groups it really has, so they stay
//!    contiguous; with a single group the stride stays 16, which leaves two 15-block holes.
//! 4. **Root directory** (1 block), **lost+found** (4 blocks), then the **resize inode**'s
//!    double-indirect block: each the first free block after its goal.
//! 5. **Journal** (`ext2fs_default_journal_size` blocks), `fallocate`d from the first block
//!    of the group with the most free blocks near the middle of the fs (for flex_bg: the
//!    middle flex group's first group or the one after it), in extents of at most 32768
//!    blocks; a fifth extent moves the extent list out of the inode into a leaf block placed
//!    just before the journal.
//!
//! Assumptions (checked against the 1, 4 and 16 GiB captures; the rest follows the 1.47.0
//! source, not a capture):
//! **bigalloc** ([`layout_clustered`], `mkfs.ext4 -O bigalloc -C <cluster size>`): groups of
//! 32768 clusters; at least one inode per cluster (`inode_ratio` raised to the cluster size);
//! the superblocks, GDTs and group tables placed block by block as above (mke2fs lays them out
//! on a sub-cluster bitmap), then the map converted to clusters (a cluster holding any of
//! them is in use), and the files allocated in whole clusters: the root directory, lost+found
//! and the resize inode's block each at the start of the first free cluster after their goal,
//! the journal in free clusters from its goal. Checked against the 16 KiB and 64 KiB captures.
//!
//! * 4 KiB blocks always. Below 512 MiB mke2fs would pick the "small" type with 1 KiB blocks;
//!   here the block size is forced as with `-b 4096`, and the "small" inode ratio (4096)
//!   still applies. From 4 TiB the "big" type (ratio 32768), at 16 TiB "huge" (65536).
//! * At exactly 16 TiB (2^32 blocks) mke2fs drops `resize_inode` (more than 2^32 − 1
//!   blocks with `64bit`): no reserved GDT blocks and no resize inode block.
//! * No orphan file, quota, or `metadata_csum_seed` (none of the captured images has them),
//!   no RAID stride, no meta_bg (it would only start above 16 TiB).
//! * Where the "small" ratio asks for more inodes than one bitmap holds (just above 128 MiB,
//!   where the short last group is dropped), mke2fs shrinks the groups by 8 blocks at a time
//!   until it fits, and so does this: `Layout::blocks_per_group` can then be below 32768.
//! * Sizes are floored to whole blocks; supported are 64 MiB ..= 16 TiB.

use std::collections::BTreeMap;

/// Block size of every layout made here.
pub const BLOCK_SIZE: u64 = 4096;
/// mke2fs's default: one bitmap block's worth of blocks.
pub const BLOCKS_PER_GROUP: u32 = 32768;
/// mke2fs's default `flex_bg_size`.
pub const FLEX_BG_SIZE: u32 = 16;
/// Smallest supported size (bytes).
pub const MIN_BYTES: u64 = 64 << 20;
/// Largest supported size (bytes): 2^32 blocks.
pub const MAX_BYTES: u64 = 16 << 40;

/// Bytes of an inode (mke2fs's default `inode_size`).
pub(crate) const INODE_SIZE: u64 = 256;
/// Group descriptor size with the `64bit` feature.
const DESC_SIZE: u64 = 64;
/// Block numbers the resize inode's double-indirect block can hold.
const ADDR_PER_BLOCK: u64 = BLOCK_SIZE / 4;
/// Longest initialized extent (`EXT_INIT_MAX_LEN`).
const MAX_EXTENT_LEN: u64 = 32768;
/// Extents that fit in the inode itself before a leaf block is needed.
const EXTENTS_IN_INODE: usize = 4;
/// lost+found is grown to 16 KiB.
const LOST_FOUND_BLOCKS: u64 = 4;

/// Why no layout could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MkfsError {
    #[error("file system of {bytes} bytes is smaller than the supported minimum of {min} bytes")]
    TooSmall { bytes: u64, min: u64 },
    #[error("file system of {bytes} bytes is larger than the supported maximum of {max} bytes")]
    TooLarge { bytes: u64, max: u64 },
    /// mke2fs's limits: a cluster of 2 to 2^16 blocks of 4 KiB (fewer than 2^32 blocks per
    /// group of 32768 clusters).
    #[error(
        "cluster of {cluster_bytes} bytes: bigalloc clusters are 8 KiB ..= 256 MiB, a power of two"
    )]
    ClusterSize { cluster_bytes: u64 },
    /// mke2fs would fail here too (only reachable through a bug or a pathological size).
    #[error("no room for {what} ({blocks} blocks) near block {near}")]
    NoSpace {
        what: &'static str,
        blocks: u64,
        near: u64,
    },
}

/// mke2fs's usage type, chosen from the size; it sets the inode ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageType {
    /// Below 512 MiB: one inode per 4 KiB.
    Small,
    /// Below 4 TiB: one inode per 16 KiB.
    Default,
    /// Below 16 TiB: one inode per 32 KiB.
    Big,
    /// 16 TiB and more: one inode per 64 KiB.
    Huge,
}

impl UsageType {
    fn for_bytes(bytes: u64) -> Self {
        match bytes {
            b if b < 512 << 20 => UsageType::Small,
            b if b < 4 << 40 => UsageType::Default,
            b if b < 16 << 40 => UsageType::Big,
            _ => UsageType::Huge,
        }
    }

    /// Bytes of file system per inode (`inode_ratio` in mke2fs.conf).
    pub fn inode_ratio(self) -> u64 {
        match self {
            UsageType::Small => 4096,
            UsageType::Default => 16384,
            UsageType::Big => 32768,
            UsageType::Huge => 65536,
        }
    }
}

/// Where mke2fs put one group's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupLayout {
    pub group: u32,
    pub first_block: u64,
    pub blocks: u32,
    /// Free blocks in this group after mkfs.
    pub free: u32,
    /// Holds a superblock and GDT (primary or backup).
    pub has_super: bool,
    pub block_bitmap: u64,
    pub inode_bitmap: u64,
    /// First block of the inode table (`Layout::inode_table_blocks` long).
    pub inode_table: u64,
}

/// A freshly made file system: geometry plus every block in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub blocks_count: u64,
    pub blocks_per_group: u32,
    /// log2 of the blocks per cluster (0 without bigalloc).
    pub cluster_bits: u32,
    pub flex_bg_size: u32,
    pub usage_type: UsageType,
    pub inodes_per_group: u32,
    pub inode_table_blocks: u32,
    pub desc_blocks: u32,
    pub reserved_gdt_blocks: u32,
    pub groups: Vec<GroupLayout>,
    /// In-use runs `(absolute start, len)`, sorted, split at group boundaries.
    pub used: Vec<(u64, u64)>,
    /// Root directory block.
    pub root_dir: u64,
    /// lost+found's blocks, as runs.
    pub lost_found: Vec<(u64, u64)>,
    /// The resize inode's double-indirect block (absent at 16 TiB).
    pub resize_inode_block: Option<u64>,
    /// Journal extents `(start, len)` in logical order.
    pub journal: Vec<(u64, u64)>,
    /// The journal's extent leaf block, if it has more than 4 extents.
    pub journal_leaf: Option<u64>,
}

impl Layout {
    /// Number of groups.
    pub fn group_count(&self) -> u32 {
        self.groups.len() as u32
    }

    /// Blocks of the journal.
    pub fn journal_blocks(&self) -> u64 {
        self.journal.iter().map(|&(_, len)| len).sum()
    }

    /// Free blocks over all groups.
    pub fn free_blocks_total(&self) -> u64 {
        self.groups.iter().map(|g| u64::from(g.free)).sum()
    }

    /// In-use runs of one group (empty for a group number past the end).
    pub fn group_used(&self, group: u32) -> &[(u64, u64)] {
        let Some(g) = self.groups.get(group as usize) else {
            return &[];
        };
        let end = g.first_block + u64::from(g.blocks);
        let lo = self.used.partition_point(|&(s, _)| s < g.first_block);
        let hi = self.used.partition_point(|&(s, _)| s < end);
        &self.used[lo..hi]
    }

    /// The groups mkfs.ext4 leaves `BLOCK_UNINIT` (its default `metadata_csum` makes the
    /// kernel honour the flag): every group but the last whose only blocks in use are its
    /// superblock and descriptor backup, which `ext4_init_block_bitmap` recomputes. A group
    /// holding a flex group's bitmaps and inode tables, or the journal, was written. Checked
    /// against every fresh capture (`matches_the_fresh_captures`).
    pub fn block_uninit_groups(&self) -> Vec<u32> {
        let last = self.group_count().saturating_sub(1);
        self.groups
            .iter()
            .filter(|g| g.group != last)
            .filter(|g| {
                let backup = 1 + u64::from(self.desc_blocks) + u64::from(self.reserved_gdt_blocks);
                // Whole clusters with bigalloc.
                let backup = backup.next_multiple_of(1 << self.cluster_bits);
                match self.group_used(g.group) {
                    [] => !g.has_super,
                    [run] => g.has_super && *run == (g.first_block, backup),
                    _ => false,
                }
            })
            .map(|g| g.group)
            .collect()
    }

    /// Free runs `(absolute start, len)` of one group.
    pub fn group_free_extents(&self, group: u32) -> Vec<(u64, u64)> {
        let Some(g) = self.groups.get(group as usize) else {
            return Vec::new();
        };
        let mut free = Vec::new();
        let mut at = g.first_block;
        for &(start, len) in self.group_used(group) {
            if start > at {
                free.push((at, start - at));
            }
            at = start + len;
        }
        let end = g.first_block + u64::from(g.blocks);
        if end > at {
            free.push((at, end - at));
        }
        free
    }
}

/// Lays out a fresh ext4 file system of `bytes` bytes as mkfs.ext4 1.47.0 would.
pub fn layout(bytes: u64) -> Result<Layout, MkfsError> {
    layout_with(bytes, true)
}

/// [`layout`], with a journal or (`journal` false) as `mkfs.ext4 -O ^has_journal` makes it:
/// the same layout without the journal's blocks.
pub fn layout_with(bytes: u64, journal: bool) -> Result<Layout, MkfsError> {
    layout_of(bytes, journal, 0)
}

/// Largest `cluster_bits` with 4 KiB blocks: 32768 clusters per group must stay below 2^32
/// blocks (`ext2fs_initialize`).
pub const MAX_CLUSTER_BITS: u32 = 16;

/// [`layout`] with bigalloc: clusters of `2^cluster_bits` blocks (`mkfs.ext4 -O bigalloc -C
/// 4096 << cluster_bits`); `cluster_bits` 0 is [`layout`].
pub fn layout_clustered(bytes: u64, cluster_bits: u32) -> Result<Layout, MkfsError> {
    layout_of(bytes, true, cluster_bits)
}

/// The layout with or without a journal, in clusters of `2^cluster_bits` blocks.
pub fn layout_of(bytes: u64, journal: bool, cluster_bits: u32) -> Result<Layout, MkfsError> {
    if cluster_bits > MAX_CLUSTER_BITS {
        return Err(MkfsError::ClusterSize {
            cluster_bytes: BLOCK_SIZE << cluster_bits.min(40),
        });
    }
    if bytes < MIN_BYTES {
        return Err(MkfsError::TooSmall {
            bytes,
            min: MIN_BYTES,
        });
    }
    if bytes > MAX_BYTES {
        return Err(MkfsError::TooLarge {
            bytes,
            max: MAX_BYTES,
        });
    }
    let geo = Geo::new(
        bytes / BLOCK_SIZE,
        UsageType::for_bytes(bytes),
        cluster_bits,
    );
    let mut map = BlockMap::new(geo.blocks_count);
    reserve_super_and_gdt(&geo, &mut map);
    let tables = allocate_tables(&geo, &mut map)?;
    // ext2fs_convert_subcluster_bitmap: from here on a cluster is used or free as a whole.
    map.round_to_clusters(cluster_bits);
    let files = make_files(&geo, &mut map, journal)?;
    Ok(finish(&geo, &map, &tables, files))
}

// ---------------------------------------------------------------------------------------------
// Geometry (ext2fs_initialize)

/// The numbers mke2fs settles before it places anything.
#[derive(Debug, Clone)]
struct Geo {
    usage: UsageType,
    cluster_bits: u32,
    blocks_count: u64,
    bpg: u64,
    groups: u64,
    desc_blocks: u64,
    reserved_gdt: u64,
    inodes_per_group: u64,
    itable_blocks: u64,
    resize_inode: bool,
}

impl Geo {
    /// `device_blocks`: the size in blocks before mke2fs trims a too-short last group.
    fn new(device_blocks: u64, usage: UsageType, cluster_bits: u32) -> Self {
        // bigalloc: whole clusters only.
        let device_blocks = device_blocks & !((1u64 << cluster_bits) - 1);
        // More than 2^32 - 1 blocks with 64bit: mke2fs drops resize_inode.
        let resize_inode = device_blocks <= u64::from(u32::MAX);
        // mke2fs: no more inodes than clusters.
        let ratio = usage.inode_ratio().max(BLOCK_SIZE << cluster_bits);
        let inodes = device_blocks * BLOCK_SIZE / ratio;
        let mut bpg = u64::from(BLOCKS_PER_GROUP) << cluster_bits;
        let mut blocks = device_blocks;
        loop {
            let geo = Self::try_shape(usage, blocks, bpg, inodes, resize_inode);
            match geo {
                Shape::Done(geo) => {
                    return Geo {
                        cluster_bits,
                        ..geo
                    }
                }
                // Too many inodes for one bitmap block: mke2fs shrinks the groups (by 8
                // clusters).
                Shape::ShrinkGroups => {
                    bpg -= 8 << cluster_bits;
                    blocks = device_blocks;
                }
                Shape::DropLastGroup(rem) => blocks -= rem,
            }
        }
    }

    fn try_shape(usage: UsageType, blocks: u64, bpg: u64, inodes: u64, resize: bool) -> Shape {
        let groups = blocks.div_ceil(bpg);
        let desc_blocks = groups.div_ceil(BLOCK_SIZE / DESC_SIZE);
        let ipg = inodes.max(12).div_ceil(groups);
        if ipg > BLOCK_SIZE * 8 {
            return Shape::ShrinkGroups;
        }
        let (inodes_per_group, itable_blocks) = fill_inode_table(ipg, groups);
        let reserved_gdt = if resize {
            reserved_gdt_blocks(blocks, bpg, desc_blocks)
        } else {
            0
        };
        let geo = Geo {
            usage,
            cluster_bits: 0,
            blocks_count: blocks,
            bpg,
            groups,
            desc_blocks,
            reserved_gdt,
            inodes_per_group,
            itable_blocks,
            resize_inode: resize,
        };
        let rem = blocks % bpg;
        let mut overhead = 2 + itable_blocks;
        if has_super(groups - 1) {
            overhead += 1 + desc_blocks + reserved_gdt;
        }
        if rem != 0 && rem < overhead + 50 && groups > 1 {
            return Shape::DropLastGroup(rem);
        }
        Shape::Done(geo)
    }

    fn group_first(&self, group: u64) -> u64 {
        group * self.bpg
    }

    fn group_last(&self, group: u64) -> u64 {
        (self.group_first(group) + self.bpg).min(self.blocks_count) - 1
    }

    /// Last group of `group`'s flex group (the fs may end before a full 16).
    fn flex_last_group(&self, group: u64) -> u64 {
        (group | (u64::from(FLEX_BG_SIZE) - 1)).min(self.groups - 1)
    }
}

/// One attempt at the geometry.
enum Shape {
    Done(Geo),
    ShrinkGroups,
    DropLastGroup(u64),
}

/// Inodes per group rounded up to whole inode-table blocks and down to a multiple of 8,
/// keeping the total below 2^32: `(inodes_per_group, inode_table_blocks)`.
fn fill_inode_table(mut ipg: u64, groups: u64) -> (u64, u64) {
    loop {
        let blocks = (ipg * INODE_SIZE).div_ceil(BLOCK_SIZE);
        let filled = (blocks * BLOCK_SIZE / INODE_SIZE) & !7;
        if filled * groups <= u64::from(u32::MAX) {
            return (filled, (filled * INODE_SIZE).div_ceil(BLOCK_SIZE));
        }
        ipg -= 1;
    }
}

/// Reserved GDT blocks: enough descriptors for 1024× the size (at most 2^32 blocks), but no
/// more than the resize inode can point to (`calc_reserved_gdt_blocks`).
fn reserved_gdt_blocks(blocks: u64, bpg: u64, desc_blocks: u64) -> u64 {
    let max_blocks = if blocks < u64::from(u32::MAX) / 1024 {
        blocks * 1024
    } else {
        u64::from(u32::MAX)
    };
    let groups = max_blocks.div_ceil(bpg);
    let wanted = groups
        .div_ceil(BLOCK_SIZE / DESC_SIZE)
        .saturating_sub(desc_blocks);
    wanted.min(ADDR_PER_BLOCK)
}

/// sparse_super: groups 0 and 1 and the powers of 3, 5 and 7 hold superblock backups.
pub fn has_super(group: u64) -> bool {
    group <= 1 || (group % 2 == 1 && [3, 5, 7].iter().any(|&b| is_power_of(group, b)))
}

fn is_power_of(n: u64, base: u64) -> bool {
    let mut power = 1;
    while power < n {
        power *= base;
    }
    power == n
}

// ---------------------------------------------------------------------------------------------
// Placement

fn reserve_super_and_gdt(geo: &Geo, map: &mut BlockMap) {
    for group in (0..geo.groups).filter(|&g| has_super(g)) {
        let first = geo.group_first(group);
        let len = (1 + geo.desc_blocks + geo.reserved_gdt).min(geo.blocks_count - first);
        map.mark(first, len);
    }
}

/// Per-group metadata locations: `(block bitmap, inode bitmap, inode table)`.
type Tables = Vec<(u64, u64, u64)>;

/// Places every group's bitmaps and inode table, group by group, as
/// `ext2fs_allocate_group_table` does with flex_bg.
fn allocate_tables(geo: &Geo, map: &mut BlockMap) -> Result<Tables, MkfsError> {
    let mut tables: Tables = Vec::with_capacity(geo.groups as usize);
    for group in 0..geo.groups {
        let prev = tables.last().copied();
        let placed = allocate_group_tables(geo, map, group, prev)?;
        tables.push(placed);
    }
    Ok(tables)
}

fn allocate_group_tables(
    geo: &Geo,
    map: &mut BlockMap,
    group: u64,
    prev: Option<(u64, u64, u64)>,
) -> Result<(u64, u64, u64), MkfsError> {
    let flex = u64::from(FLEX_BG_SIZE);
    let last_grp = geo.flex_last_group(group);
    let rem = last_grp - group + 1;
    let last_blk = geo.group_last(last_grp);
    let starts_flex = group & (flex - 1) == 0;
    // Stride between the bitmap arrays and the table array of a flex group.
    let stride = if starts_flex && last_grp == geo.groups - 1 {
        match last_grp & (flex - 1) {
            0 => flex,
            n => n + 1,
        }
    } else {
        flex
    };
    let prev = prev.filter(|_| !starts_flex);

    let hint = prev.map_or(0, |p| p.0 + 1);
    let bb = place_bitmap(geo, map, group, hint, rem, last_blk, "block bitmap")?;
    let hint = prev.map_or(bb + stride, |p| p.1 + 1);
    let ib = place_bitmap(geo, map, group, hint, rem, last_blk, "inode bitmap")?;
    let hint = prev.map_or(ib + stride, |p| p.2 + geo.itable_blocks);
    let start = flexbg_offset(geo, map, group, hint, rem, geo.itable_blocks);
    let it = map
        .find_free(start, last_blk, geo.itable_blocks)
        .ok_or(MkfsError::NoSpace {
            what: "inode table",
            blocks: geo.itable_blocks,
            near: start,
        })?;
    map.mark(it, geo.itable_blocks);
    Ok((bb, ib, it))
}

fn place_bitmap(
    geo: &Geo,
    map: &mut BlockMap,
    group: u64,
    hint: u64,
    rem: u64,
    last_blk: u64,
    what: &'static str,
) -> Result<u64, MkfsError> {
    let start = flexbg_offset(geo, map, group, hint, rem, 1);
    let block = map
        .find_free(start, last_blk, 1)
        .or_else(|| map.find_free(geo.group_first(group), last_blk, 1))
        .ok_or(MkfsError::NoSpace {
            what,
            blocks: 1,
            near: start,
        })?;
    map.mark(block, 1);
    Ok(block)
}

/// Where the next metadata element of a flex group goes: right after the previous one if
/// there is room within the next `rem` elements' worth (capped at a quarter group), else the
/// first place in the flex group with room for all of them, else any room at all.
fn flexbg_offset(geo: &Geo, map: &BlockMap, group: u64, hint: u64, rem: u64, elem: u64) -> u64 {
    let size = (rem * elem).min(geo.bpg / 4);
    if hint != 0 && hint < geo.blocks_count {
        if let Some(b) = map.find_free(hint, hint + size, elem) {
            return b;
        }
    }
    let flex = u64::from(FLEX_BG_SIZE);
    let start = geo.group_first(group / flex * flex);
    let last_blk = geo.group_last(geo.flex_last_group(group));
    map.find_free(start, last_blk, size)
        .or_else(|| map.find_free(start, last_blk, elem))
        .or_else(|| map.find_free(0, last_blk, elem))
        .unwrap_or(0)
}

/// The blocks of the files mke2fs creates.
struct Files {
    root_dir: u64,
    lost_found: Vec<(u64, u64)>,
    resize_inode_block: Option<u64>,
    journal: Vec<(u64, u64)>,
    journal_leaf: Option<u64>,
}

/// Root directory, lost+found, resize inode and (`journal`) journal, in mke2fs's order.
fn make_files(geo: &Geo, map: &mut BlockMap, journal: bool) -> Result<Files, MkfsError> {
    // Inodes 2 and 11 live in group 0, whose flex group starts at block 0: goal 0.
    let root_dir = alloc_block(map, 0, "root directory")?;
    let mut lost_found = BlockMap::new(geo.blocks_count);
    let mut last = alloc_block(map, 0, "lost+found")?;
    lost_found.mark(last, 1);
    for _ in 1..LOST_FOUND_BLOCKS {
        // ext2fs_expand_dir: the goal is the directory's last block; with bigalloc the next
        // block of a cluster the directory holds goes in that cluster.
        let ratio = 1u64 << geo.cluster_bits;
        last = if (last + 1) % ratio != 0 {
            last + 1
        } else {
            alloc_block(map, last, "lost+found")?
        };
        lost_found.mark(last, 1);
    }
    let resize_inode_block = if geo.resize_inode {
        // res_gdt.c: superblock (block 0) + GDT + reserved GDT + 2 + one inode table.
        let goal = geo.desc_blocks + geo.reserved_gdt + 2 + geo.itable_blocks;
        Some(alloc_block(map, goal, "resize inode")?)
    } else {
        None
    };
    let journal = match journal {
        true => make_journal(geo, map)?,
        false => Journal {
            extents: Vec::new(),
            leaf: None,
        },
    };
    Ok(Files {
        root_dir,
        lost_found: lost_found.runs().collect(),
        resize_inode_block,
        journal: journal.extents,
        journal_leaf: journal.leaf,
    })
}

/// `ext2fs_new_block2` + mark: the first free block from `goal`, or with bigalloc (a map
/// of whole clusters) the first block of the first free cluster, whose every block is then in
/// use.
fn alloc_block(map: &mut BlockMap, goal: u64, what: &'static str) -> Result<u64, MkfsError> {
    // ext2fs_new_block3: the goal's cluster.
    let goal = goal & !((1u64 << map.cluster_bits) - 1);
    let block = map.new_block(goal).ok_or(MkfsError::NoSpace {
        what,
        blocks: 1,
        near: goal,
    })?;
    map.mark(block, 1 << map.cluster_bits);
    Ok(block)
}

/// Journal size for a file system of `blocks` blocks (`ext2fs_default_journal_size`).
pub fn journal_blocks(blocks: u64) -> u64 {
    const TIERS: [(u64, u64); 8] = [
        (32768, 1024),
        (256 * 1024, 4096),
        (512 * 1024, 8192),
        (4096 * 1024, 16384),
        (8192 * 1024, 32768),
        (16384 * 1024, 65536),
        (32768 * 1024, 131072),
        (u64::MAX, 262144),
    ];
    TIERS
        .iter()
        .find(|&&(below, _)| blocks < below)
        .map_or(262144, |&(_, size)| size)
}

/// fallocates the journal from its goal: extents of at most 32768 blocks over the free runs
/// from the goal on; when the fifth extent is added, the extent list moves to a leaf block
/// whose goal is the block before the first extent.
fn make_journal(geo: &Geo, map: &mut BlockMap) -> Result<Journal, MkfsError> {
    let mut left = journal_blocks(geo.blocks_count);
    let goal = journal_goal(geo, map);
    let mut pblk = map.first_free(goal).unwrap_or(goal);
    let mut extents = Vec::new();
    let mut leaf = None;
    while left > 0 {
        let (start, len) =
            map.new_range(pblk, left.min(MAX_EXTENT_LEN))
                .ok_or(MkfsError::NoSpace {
                    what: "journal",
                    blocks: left,
                    near: pblk,
                })?;
        map.mark(start, len);
        extents.push((start, len));
        if extents.len() == EXTENTS_IN_INODE + 1 {
            leaf = Some(alloc_block(
                map,
                extents[0].0.saturating_sub(1),
                "journal extent leaf",
            )?);
        }
        left -= len;
        pblk = start + len;
        if pblk >= geo.blocks_count {
            pblk = 0;
        }
    }
    Ok(Journal { extents, leaf })
}

/// Where the journal went: its extents in logical order, and the extent leaf block if any.
struct Journal {
    extents: Vec<(u64, u64)>,
    leaf: Option<u64>,
}

/// First block of the group mke2fs picks for the journal (`get_midpoint_journal_block`):
/// around the middle group, the one with the most free blocks; with flex_bg the candidates
/// are the middle flex group's first group (or the next non-full one) and its successor.
fn journal_goal(geo: &Geo, map: &BlockMap) -> u64 {
    let flex = u64::from(FLEX_BG_SIZE);
    let free = |g: u64| {
        let (first, end) = (geo.group_first(g), geo.group_last(g) + 1);
        end - first - map.used_between(first, end)
    };
    let mut group = geo.blocks_count / 2 / geo.bpg;
    let start = if group > flex {
        group &= !(flex - 1);
        while group < geo.groups && free(group) == 0 {
            group += 1;
        }
        if group == geo.groups {
            group = 0;
        }
        group
    } else {
        group.saturating_sub(1)
    };
    let end = if group + 1 < geo.groups {
        group + 1
    } else {
        group
    };
    let mut best = start;
    for g in start + 1..=end {
        if free(g) > free(best) {
            best = g;
        }
    }
    geo.group_first(best)
}

// ---------------------------------------------------------------------------------------------
// Result

fn finish(geo: &Geo, map: &BlockMap, tables: &Tables, files: Files) -> Layout {
    let used = split_at_groups(map.runs(), geo.bpg);
    let mut used_per_group = vec![0u64; geo.groups as usize];
    for &(start, len) in &used {
        used_per_group[(start / geo.bpg) as usize] += len;
    }
    let groups = tables
        .iter()
        .enumerate()
        .map(|(g, &(bb, ib, it))| {
            let group = g as u64;
            let blocks = geo.group_last(group) + 1 - geo.group_first(group);
            GroupLayout {
                group: g as u32,
                first_block: geo.group_first(group),
                blocks: blocks as u32,
                free: (blocks - used_per_group[g]) as u32,
                has_super: has_super(group),
                block_bitmap: bb,
                inode_bitmap: ib,
                inode_table: it,
            }
        })
        .collect();
    Layout {
        blocks_count: geo.blocks_count,
        blocks_per_group: geo.bpg as u32,
        cluster_bits: geo.cluster_bits,
        flex_bg_size: FLEX_BG_SIZE,
        usage_type: geo.usage,
        inodes_per_group: geo.inodes_per_group as u32,
        inode_table_blocks: geo.itable_blocks as u32,
        desc_blocks: geo.desc_blocks as u32,
        reserved_gdt_blocks: geo.reserved_gdt as u32,
        groups,
        used,
        root_dir: files.root_dir,
        lost_found: files.lost_found,
        resize_inode_block: files.resize_inode_block,
        journal: files.journal,
        journal_leaf: files.journal_leaf,
    }
}

/// Cuts runs at group boundaries, so each run belongs to one group.
fn split_at_groups(runs: impl Iterator<Item = (u64, u64)>, bpg: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for (mut start, len) in runs {
        let end = start + len;
        while start < end {
            let group_end = (start / bpg + 1) * bpg;
            let piece_end = end.min(group_end);
            out.push((start, piece_end - start));
            start = piece_end;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The used-block map

/// In-use blocks as disjoint, non-adjacent runs `start → end` (exclusive), with the searches
/// libext2fs runs on its block bitmap.
#[derive(Debug, Clone)]
struct BlockMap {
    total: u64,
    runs: BTreeMap<u64, u64>,
    /// Set by [`BlockMap::round_to_clusters`]: every run is whole clusters of this many
    /// bits, and [`alloc_block`] takes a whole cluster.
    cluster_bits: u32,
}

impl BlockMap {
    fn new(total: u64) -> Self {
        BlockMap {
            total,
            runs: BTreeMap::new(),
            cluster_bits: 0,
        }
    }

    /// Every cluster of `2^bits` blocks holding a used block becomes used as a whole.
    fn round_to_clusters(&mut self, bits: u32) {
        let ratio = 1u64 << bits;
        let runs: Vec<(u64, u64)> = self.runs().collect();
        for (s, len) in runs {
            let start = s - s % ratio;
            self.mark(start, (s + len).next_multiple_of(ratio) - start);
        }
        self.cluster_bits = bits;
    }

    fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.runs.iter().map(|(&s, &e)| (s, e - s))
    }

    /// Marks `[start, start + len)` in use, merging with touching runs.
    fn mark(&mut self, start: u64, len: u64) {
        let (mut start, mut end) = (start, (start + len).min(self.total));
        if start >= end {
            return;
        }
        if let Some((&s, &e)) = self.runs.range(..=start).next_back() {
            if e >= start {
                start = s;
                end = end.max(e);
            }
        }
        let swallowed: Vec<u64> = self.runs.range(start..=end).map(|(&s, _)| s).collect();
        for s in swallowed {
            if let Some(e) = self.runs.remove(&s) {
                end = end.max(e);
            }
        }
        self.runs.insert(start, end);
    }

    /// The used run holding `b`, if any.
    fn run_at(&self, b: u64) -> Option<(u64, u64)> {
        let (&s, &e) = self.runs.range(..=b).next_back()?;
        (e > b).then_some((s, e))
    }

    /// First free block at or after `from`.
    fn first_free(&self, from: u64) -> Option<u64> {
        let b = self.run_at(from).map_or(from, |(_, e)| e);
        (b < self.total).then_some(b)
    }

    /// Length of the free run starting at the free block `b`.
    fn free_len(&self, b: u64) -> u64 {
        let next = self.runs.range(b..).next().map_or(self.total, |(&s, _)| s);
        next - b
    }

    /// `ext2fs_get_free_blocks2`: the first `b` in `[start, finish)` with `[b, b + num)`
    /// free and inside the fs; a `finish` not past `start` wraps around the end.
    fn find_free(&self, start: u64, finish: u64, num: u64) -> Option<u64> {
        if finish > start {
            self.find_free_in(start, finish, num)
        } else {
            self.find_free_in(start, self.total, num)
                .or_else(|| self.find_free_in(0, finish, num))
        }
    }

    fn find_free_in(&self, start: u64, finish: u64, num: u64) -> Option<u64> {
        let mut b = start;
        loop {
            b = self.first_free(b)?;
            if b >= finish || b + num > self.total {
                return None;
            }
            let len = self.free_len(b);
            if len >= num {
                return Some(b);
            }
            b += len;
        }
    }

    /// `ext2fs_new_block2`: the first free block from `goal`, wrapping to the start.
    fn new_block(&self, goal: u64) -> Option<u64> {
        let goal = if goal >= self.total { 0 } else { goal };
        self.first_free(goal)
            .or_else(|| self.first_free(0).filter(|&b| b < goal))
    }

    /// `ext2fs_new_range` without flags: the first free run from `goal` (wrapping), cut to
    /// at most `len` blocks.
    fn new_range(&self, goal: u64, len: u64) -> Option<(u64, u64)> {
        let start = self.new_block(goal)?;
        Some((start, self.free_len(start).min(len)))
    }

    /// Used blocks in `[start, end)`.
    fn used_between(&self, start: u64, end: u64) -> u64 {
        let first = self.run_at(start).map_or(start, |(s, _)| s);
        self.runs
            .range(first..end)
            .map(|(&s, &e)| e.min(end).saturating_sub(s.max(start)))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Instant;

    use super::*;
    use crate::case::{find_cases, Case, InitialState};

    const GIB: u64 = 1 << 30;

    /// Inclusive `[first, last]` ranges into merged `(start, len)` runs.
    fn merged(ranges: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let mut map = BlockMap::new(u64::MAX);
        for &(first, last) in ranges {
            map.mark(first, last + 1 - first);
        }
        map.runs().collect()
    }

    /// Every group of `layout` against a captured fresh image.
    fn compare_with_capture(layout: &Layout, init: &InitialState) {
        assert_eq!(layout.blocks_count, init.blocks_count);
        assert_eq!(layout.group_count(), init.group_count);
        assert_eq!(Some(layout.inodes_per_group), init.inodes_per_group);
        assert_eq!(Some(layout.reserved_gdt_blocks), init.reserved_gdt_blocks);
        assert_eq!(layout.block_uninit_groups(), init.block_uninit_groups());
        for (ours, theirs) in layout.groups.iter().zip(&init.groups) {
            let g = ours.group;
            assert_eq!(ours.free, theirs.free, "group {g} free");
            assert_eq!(
                layout.group_free_extents(g),
                theirs.free_extents,
                "group {g} extents"
            );
            assert_eq!(Some(ours.block_bitmap), theirs.block_bitmap, "group {g}");
            assert_eq!(Some(ours.inode_bitmap), theirs.inode_bitmap, "group {g}");
            let table_end = ours.inode_table + u64::from(layout.inode_table_blocks) - 1;
            assert_eq!(
                Some((ours.inode_table, table_end)),
                theirs.inode_table,
                "group {g}"
            );
        }
        let special = &init.special_inode_blocks;
        let journal = special.get("journal").map_or(vec![], |j| merged(j));
        assert_eq!(journal, layout.journal);
        assert_eq!(special["root_dir"], [(layout.root_dir, layout.root_dir)]);
        let lf: Vec<_> = layout
            .lost_found
            .iter()
            .map(|&(s, l)| (s, s + l - 1))
            .collect();
        assert_eq!(special["lost+found"], lf);
        let dind = layout.resize_inode_block.expect("resize inode");
        assert!(special["resize_inode"].contains(&(dind, dind)));
        assert_eq!(layout.free_blocks_total(), init.free_blocks_total);
    }

    /// Every capture taken on a fresh (not aged) image must match `layout(size)` exactly;
    /// the 1, 4 and 16 GiB falloc cases at least must be among them.
    #[test]
    fn matches_the_fresh_captures() {
        let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernel-cases");
        assert!(traces.is_dir(), "{} is missing", traces.display());
        let mut checked = Vec::new();
        for dir in find_cases(&[traces]).unwrap() {
            let case = Case::load(&dir).unwrap_or_else(|e| panic!("{e}"));
            if case.meta.aging.is_some() {
                continue;
            }
            let bytes = case.initial.blocks_count * u64::from(case.initial.block_size);
            let bits = (case.initial.cluster_size / case.initial.block_size).trailing_zeros();
            let l = layout_of(bytes, case.initial.has_journal(), bits).unwrap();
            compare_with_capture(&l, &case.initial);
            checked.push(case.name);
        }
        for name in [
            "falloc-1g-mixed",
            "falloc-4g-mixed",
            "falloc-16g-scan0",
            "bigalloc16k-4g-falloc",
            "bigalloc64k-4g-falloc",
            "nojournal-1g-falloc",
            "nojournal-4g-fallocate2",
        ] {
            assert!(
                checked.iter().any(|c| c == name),
                "{name} not checked: {checked:?}"
            );
        }
    }

    #[test]
    fn one_gib_by_hand() {
        // Known from the 1 GiB capture, so this runs without the captures too.
        let l = layout(GIB).unwrap();
        assert_eq!(
            (l.group_count(), l.desc_blocks, l.reserved_gdt_blocks),
            (8, 1, 127)
        );
        assert_eq!(l.group_used(0), [(0, 4247)]);
        assert_eq!(l.group_used(1), [(32768, 129)]);
        assert_eq!(l.group_used(2), []);
        assert_eq!(l.journal, [(131072, 8192)]);
        assert_eq!(
            (l.groups[7].block_bitmap, l.groups[7].inode_table),
            (136, 145 + 7 * 512)
        );
        assert_eq!(l.free_blocks_total(), 249189);
    }

    /// Structural checks that hold for any size.
    fn check_invariants(l: &Layout) {
        let mut at = 0;
        for &(start, len) in &l.used {
            assert!(
                start >= at && len > 0,
                "runs sorted, disjoint: {start}+{len} after {at}"
            );
            assert_eq!(
                start / u64::from(l.blocks_per_group),
                (start + len - 1) / u64::from(l.blocks_per_group)
            );
            at = start + len;
        }
        assert!(at <= l.blocks_count);
        let used: u64 = l.used.iter().map(|&(_, len)| len).sum();
        assert_eq!(used + l.free_blocks_total(), l.blocks_count);
        assert_eq!(l.journal_blocks(), journal_blocks(l.blocks_count));
        assert_eq!(l.journal.len() > EXTENTS_IN_INODE, l.journal_leaf.is_some());
        let is_used = |b: u64| {
            let i = l.used.partition_point(|&(s, _)| s <= b);
            i > 0 && b < l.used[i - 1].0 + l.used[i - 1].1
        };
        for g in &l.groups {
            assert!(is_used(g.block_bitmap) && is_used(g.inode_bitmap) && is_used(g.inode_table));
            assert!(!g.has_super || is_used(g.first_block));
        }
    }

    #[test]
    fn sizes_across_the_range_are_consistent() {
        let mib = 1u64 << 20;
        let sizes = [
            64 * mib,
            100 * mib + 12345,
            128 * mib + 4096,
            200 * mib,
            511 * mib,
            512 * mib,
            GIB + 123 * 4096,
            3 * GIB,
            20 * GIB,
            200 * GIB,
            5 << 40,
        ];
        for bytes in sizes {
            let l = layout(bytes).unwrap_or_else(|e| panic!("{bytes}: {e}"));
            check_invariants(&l);
        }
    }

    #[test]
    fn small_single_group_keeps_flex_stride_holes() {
        // One group: bitmaps and table are 16 blocks apart; root and lost+found fill the
        // first hole, the journal the rest of the holes and then runs after the table.
        let l = layout(64 << 20).unwrap();
        assert_eq!(
            (l.group_count(), l.usage_type, l.reserved_gdt_blocks),
            (1, UsageType::Small, 7)
        );
        let g = &l.groups[0];
        assert_eq!((g.block_bitmap, g.inode_bitmap, g.inode_table), (9, 25, 41));
        assert_eq!(l.root_dir, 10);
        assert_eq!(l.lost_found, [(11, 4)]);
        assert_eq!(l.journal[0], (15, 10));
        check_invariants(&l);
    }

    #[test]
    fn large_journal_gets_a_leaf_before_it() {
        let l = layout(256 * GIB).unwrap();
        assert_eq!(l.journal.len(), 8);
        let first = l.journal[0].0;
        assert_eq!(l.journal_leaf, Some(first - 1));
    }

    #[test]
    fn sixteen_tib_is_quick_and_has_no_resize_inode() {
        let t = Instant::now();
        let l = layout(MAX_BYTES).unwrap();
        assert!(t.elapsed().as_secs() < 5, "took {:?}", t.elapsed());
        assert_eq!(l.group_count(), 131072);
        assert_eq!(l.usage_type, UsageType::Huge);
        assert_eq!((l.reserved_gdt_blocks, l.resize_inode_block), (0, None));
        assert_eq!(l.inode_table_blocks, 128);
        check_invariants(&l);
    }

    #[test]
    fn sizes_out_of_range_are_errors() {
        assert!(matches!(
            layout(MIN_BYTES - 1),
            Err(MkfsError::TooSmall { .. })
        ));
        assert!(matches!(
            layout(MAX_BYTES + 4096),
            Err(MkfsError::TooLarge { .. })
        ));
    }

    #[test]
    fn block_map_merges_and_searches() {
        let mut m = BlockMap::new(100);
        m.mark(10, 5);
        m.mark(20, 5);
        m.mark(15, 5); // bridges the two runs
        assert_eq!(m.runs().collect::<Vec<_>>(), [(10, 15)]);
        m.mark(40, 10);
        assert_eq!(m.find_free(0, 100, 10), Some(0));
        assert_eq!(m.find_free(5, 100, 10), Some(25));
        assert_eq!(m.find_free(5, 25, 10), None); // a start must lie before `finish`
        assert_eq!(m.find_free(30, 100, 20), Some(50));
        assert_eq!(m.find_free(95, 10, 5), Some(95));
        assert_eq!(m.find_free(96, 10, 5), Some(0)); // wraps
        assert_eq!(m.new_range(12, 100), Some((25, 15)));
        assert_eq!(m.used_between(12, 45), 13 + 5);
        assert_eq!(m.new_block(99), Some(99));
    }

    #[test]
    fn sparse_super_groups() {
        let backups: Vec<u64> = (0..100).filter(|&g| has_super(g)).collect();
        assert_eq!(backups, [0, 1, 3, 5, 7, 9, 25, 27, 49, 81]);
    }
}
