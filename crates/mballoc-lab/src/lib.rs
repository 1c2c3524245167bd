//! The mballoc lab: everything that drives or observes the allocator (kernel-trace replay,
//! workloads, metrics, reports). The `mballoc` binary is its command line.

pub mod bench;
pub mod case;
pub mod fs;
pub mod image;
pub mod metrics;
pub mod mkfs;
pub mod replay;
pub mod report;
#[cfg(feature = "vcpus")]
pub mod vcpus;
pub mod workload;
