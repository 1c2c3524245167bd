//! Why a workload could not run. Bad input (an unknown workload, a setting that does not parse,
//! a file system too small for the workload) is reported with the offending values, never by a
//! panic.

use thiserror::Error;

use crate::fs::FsError;

/// Every way [`super::run`] can fail.
#[derive(Debug, Error)]
pub enum LabError {
    #[error("unknown workload {name:?}; valid workloads: {valid}")]
    UnknownWorkload { name: String, valid: String },

    #[error("bad parameter {name} = {value:?}: {reason}")]
    BadParameter {
        name: String,
        value: String,
        reason: String,
    },

    #[error("unknown setting {name:?}; lab settings: {lab}; allocator tunables: {tunables}")]
    UnknownSetting {
        name: String,
        lab: String,
        tunables: String,
    },

    #[error("workload {workload} needs about {needed} bytes of free space, the file system has {available} (raise --fs-size)")]
    TooSmall {
        workload: String,
        needed: u64,
        available: u64,
    },

    #[error("file system layout: {0}")]
    Mkfs(#[from] crate::mkfs::MkfsError),

    #[error("allocator: {0}")]
    Allocator(#[from] mballoc::Error),

    #[error("file layer: {0}")]
    Fs(#[from] FsError),

    #[error("image: {0}")]
    Image(#[from] crate::image::ImageError),

    #[error("metrics: {0}")]
    Metrics(#[from] crate::metrics::MetricsError),

    #[error("{what} is not supported")]
    Unsupported { what: String },

    #[error("a worker thread of {workload} panicked: {message}")]
    WorkerPanicked { workload: String, message: String },
}

impl LabError {
    /// A `BadParameter` from anything printable.
    pub fn bad(name: &str, value: impl ToString, reason: impl ToString) -> LabError {
        LabError::BadParameter {
            name: name.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        }
    }
}

impl From<mballoc::GeometryError> for LabError {
    fn from(e: mballoc::GeometryError) -> Self {
        LabError::Allocator(e.into())
    }
}
