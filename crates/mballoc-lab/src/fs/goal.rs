//! Where a file's first block should go when it has no extents yet
//! (`ext4_inode_to_goal_block`), and the clamping mballoc applies to every goal.
//!
//! The inode's group is rounded down to its flex group when flex groups have at least 4
//! members, and a regular file then adds one: the first group of each flex group is left to
//! directories and metadata. With delayed allocation on (the default mount) the kernel returns
//! that group's first block as is; the per-PID colour offset applies only to `nodelalloc`, which
//! the lab does not model. Observed on Linux 6.18: every first allocation of a regular file whose
//! inode lives in group 0 of a flex-16 file system had goal 32768.

use mballoc::Geometry;

/// First regular inode after `lost+found` (ext4 reserves inodes 1–10, lost+found is 11).
pub const FIRST_FILE_INO: u64 = 12;

/// Group holding inode `ino` (inodes are numbered from 1).
pub fn inode_group(ino: u64, inodes_per_group: u32) -> u64 {
    ino.saturating_sub(1) / u64::from(inodes_per_group.max(1))
}

/// `ext4_inode_to_goal_block` for a regular file, with delayed allocation.
pub fn inode_goal(geo: &Geometry, ino: u64, inodes_per_group: u32) -> u64 {
    let mut group = inode_group(ino, inodes_per_group);
    let flex = u64::from(geo.flex_bg_size());
    if flex >= 4 {
        group = (group & !(flex - 1)) + 1;
    }
    let block = geo.first_data_block() + group * geo.blocks_per_group();
    clamp_goal(geo, block)
}

/// `ext4_mb_initialize_context`: a goal outside the file system becomes the first data block.
pub fn clamp_goal(geo: &Geometry, goal: u64) -> u64 {
    if goal < geo.first_data_block() || goal >= geo.blocks_count() {
        geo.first_data_block()
    } else {
        goal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_start_one_group_into_their_flex_group() {
        let geo = Geometry::ext4_default(4 << 30).unwrap(); // 32 groups, flex 16
        assert_eq!(inode_goal(&geo, 12, 8192), 32768);
        // Inode in group 17: flex group 1 starts at group 16, the file goes to group 17.
        assert_eq!(inode_goal(&geo, 17 * 8192 + 5, 8192), 17 * 32768);
        // Inode in group 16 too.
        assert_eq!(inode_goal(&geo, 16 * 8192 + 1, 8192), 17 * 32768);
    }

    #[test]
    fn without_flex_bg_the_inode_group_is_kept_and_goals_are_clamped() {
        let geo = Geometry::new(4096, 32768, 4 * 32768, 0, 1).unwrap();
        assert_eq!(inode_goal(&geo, 2 * 8192 + 3, 8192), 2 * 32768);
        // One-group file system: group 1 does not exist, the goal falls back to block 0.
        let small = Geometry::ext4_default(64 << 20).unwrap();
        assert_eq!(inode_goal(&small, 12, 8192), 0);
        assert_eq!(clamp_goal(&small, 1 << 40), 0);
    }
}
