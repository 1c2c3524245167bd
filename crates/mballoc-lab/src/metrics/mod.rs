//! Allocator metrics M1–M12 (defined in docs/lab.md), as pure
//! functions of plain data: per-group free extents or bitmaps, per-file extent lists, latency
//! samples, operation counters, per-group size classes. Nothing here depends on the allocator's
//! internals, so the same code measures the Rust allocator, a kernel capture or a hand-built
//! example. Every result is a `serde::Serialize` struct named with the reference tool's fields.
//!
//! | metric | module | reference |
//! |---|---|---|
//! | M1 throughput | [`throughput`] | will-it-scale, LKP |
//! | M2 frag_pct | [`frag_pct`] | fsperf btrfs-frag-view |
//! | M3 latency | [`latency`] | fsperf LatencyTracing |
//! | M4 free extents | [`freefrag`] | e2freefrag |
//! | M5 extents per file | [`filefrag`] | filefrag |
//! | M6 defrag score | [`e4defrag`] | e4defrag -c |
//! | M7 mb_groups | [`mb_groups`] | ext4 /proc mb_groups |
//! | M8 BlueStore | [`bluestore`] | Ceph Allocator.cc |
//! | M9 XFS | [`xfs`] | xfs_db frag / freesp |
//! | M10 layout | [`layout`] | Smith & Seltzer; Conway et al. |
//! | M11 extfrag | [`extfrag`] | Linux mm/vmstat.c |
//! | M12 size classes | [`size_class`] | btrfs size classes |

pub mod bluestore;
pub mod e4defrag;
pub mod error;
pub mod extent_sizes;
pub mod extfrag;
pub mod filefrag;
pub mod files;
pub mod frag_pct;
pub mod free_space;
pub mod freefrag;
pub mod latency;
pub mod layout;
pub mod log2_hist;
pub mod mb_groups;
pub mod quantile;
pub mod record;
pub mod size_class;
pub mod throughput;
pub mod xfs;

#[cfg(test)]
mod tests;

pub use error::MetricsError;
pub use files::FileExtent;
pub use free_space::{FreeSpace, GroupExtent, RunScope};
