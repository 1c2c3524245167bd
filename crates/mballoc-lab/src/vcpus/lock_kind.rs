//! The kinds of lock a simulation tells apart, named from the type of the data they guard:
//! what the scheduler's statistics and the work model's segments are keyed by.

use serde::Serialize;

/// The locks a simulation tells apart, from the type of the data they guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockKind {
    /// `ext4_lock_group` (a group's `GroupState`).
    Group,
    /// An inode's preallocation list (`ei->i_prealloc_lock`).
    InodePa,
    /// The owner map's shard (finding an inode's PA list).
    PaShard,
    /// A locality group's `lg_mutex`.
    Lg,
    /// The file system's `s_md_lock`: around the stream goal (`goal_md_lock`) and on the
    /// free path (`free_md_lock`).
    Md,
    /// Commit, pending frees, tunables and the rest.
    Other,
}

impl LockKind {
    pub const ALL: [LockKind; 6] = [
        LockKind::Group,
        LockKind::InodePa,
        LockKind::PaShard,
        LockKind::Lg,
        LockKind::Md,
        LockKind::Other,
    ];

    /// From `std::any::type_name` of the guarded data.
    pub fn of(what: &str) -> LockKind {
        if what.ends_with("GroupState") {
            LockKind::Group
        } else if what.ends_with("OwnerPas") {
            LockKind::InodePa
        } else if what.contains("OwnerPas>") {
            LockKind::PaShard
        } else if what.ends_with("LocalityGroup") {
            LockKind::Lg
        } else if what.ends_with("MdLock") {
            LockKind::Md
        } else {
            LockKind::Other
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LockKind::Group => "group",
            LockKind::InodePa => "inode-pa",
            LockKind::PaShard => "pa-shard",
            LockKind::Lg => "lg",
            LockKind::Md => "md",
            LockKind::Other => "other",
        }
    }
}
