//! Errors of the benchmarks: a system failing, a peer that is not built in, a broken invariant
//! found by the harness's own checks.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("mballoc: {0}")]
    Alloc(#[from] mballoc::Error),
    #[error("mkfs: {0}")]
    Mkfs(#[from] crate::mkfs::MkfsError),
    #[error("{0}")]
    Peer(String),
    #[error("not available: {0}")]
    Unavailable(String),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("metrics: {0}")]
    Metrics(#[from] crate::metrics::MetricsError),
    /// A virtual-CPU run filled its file system: the run, not the allocator, was too big.
    #[error(
        "the file system filled up on virtual CPUs ({source}); raise --fs-size or shorten \
         duration_s"
    )]
    VcpusFull {
        #[source]
        source: mballoc::Error,
    },
    #[error("{system}: no space for {len} units with {live} allocations live")]
    NoSpace {
        system: String,
        len: u32,
        live: usize,
    },
    #[error("{system}: runs {a:?} and {b:?} overlap or leave the space of {size} units")]
    Overlap {
        system: String,
        a: (u64, u32),
        b: (u64, u32),
        size: u64,
    },
    /// A `--set` the allocator rejects (unknown name or bad value).
    #[error("{setting}: {source}")]
    Setting {
        setting: String,
        #[source]
        source: mballoc::Error,
    },
    #[error("unknown benchmark {0:?}; valid: churn, threads, huge, all")]
    UnknownBench(String),
    #[error("bad option {name} = {value}: {why}")]
    BadOption {
        name: &'static str,
        value: String,
        why: &'static str,
    },
    /// An `--only` that no churn system's name contains: it would have run nothing.
    #[error("--only {only}: no churn system's name contains it; the systems are {known}")]
    NoSuchSystem { only: String, known: String },
}

impl From<mballoc::GeometryError> for BenchError {
    fn from(e: mballoc::GeometryError) -> Self {
        BenchError::Alloc(e.into())
    }
}
