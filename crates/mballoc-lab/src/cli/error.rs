//! Errors of the command line, each with its exit code: 2 for a usage error (the user asked for
//! something that does not exist or cannot be), 1 for a failure while running.

use std::path::PathBuf;

use mballoc_lab::replay::ReplayError;
use mballoc_lab::report::ReportError;
use mballoc_lab::workload::LabError;
use thiserror::Error;

/// Why a command failed.
#[derive(Debug, Error)]
pub enum CliError {
    /// A bad argument or combination, found after clap's own checks.
    #[error("{0}")]
    Usage(String),
    /// A setting rejected for this filesystem (unknown name or bad value).
    #[error("{setting}: {source}")]
    Setting {
        setting: String,
        #[source]
        source: mballoc::Error,
    },
    /// The filesystem size does not make a valid geometry.
    #[error("bad --fs-size {bytes} bytes: {source}")]
    FsSize {
        bytes: u64,
        #[source]
        source: mballoc::Error,
    },
    /// A workload failed while running.
    #[error("workload {workload} failed: {source}")]
    Workload {
        workload: String,
        #[source]
        source: LabError,
    },
    /// Kernel-trace replay failed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The replay ran but does not agree with the kernel everywhere.
    #[error(
        "the replay disagrees with the kernel: {matched} of {allocs} placements match; \
         cases that differ: {cases}"
    )]
    Disagreement {
        matched: u64,
        allocs: u64,
        cases: String,
    },
    /// A report file could not be written.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// The output folder could not be created.
    #[error("cannot create {path}: {source}")]
    OutDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Stdout was closed by its reader; `main` exits quietly.
    #[error("stdout closed")]
    BrokenPipe,
    /// An ext4 image could not be read.
    #[error(transparent)]
    Image(#[from] mballoc_lab::image::ImageError),
    /// `--vcpus` on a workload the simulator does not drive.
    #[error(
        "--vcpus runs the `bench threads` request patterns and fallocate3's loop only: \
         workload {workload} is not wired to the simulator (accepted: {accepted})"
    )]
    VcpusWorkload { workload: String, accepted: String },
    /// `--vcpus` in a binary built without the simulator.
    #[cfg_attr(feature = "vcpus", allow(dead_code))]
    #[error(
        "--vcpus needs the simulator build: cargo build --release -p mballoc-lab --features \
         vcpus"
    )]
    VcpusBuild,
    /// Anything else from the allocator (e.g. the fresh-filesystem layout).
    #[error("{0}")]
    Other(String),
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_)
            | CliError::Setting { .. }
            | CliError::FsSize { .. }
            | CliError::VcpusWorkload { .. }
            | CliError::VcpusBuild => 2,
            // The user asked for something the workload cannot do: a usage error too.
            CliError::Workload {
                source:
                    LabError::UnknownWorkload { .. }
                    | LabError::BadParameter { .. }
                    | LabError::UnknownSetting { .. }
                    | LabError::TooSmall { .. },
                ..
            } => 2,
            _ => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_exit_2_others_1() {
        assert_eq!(CliError::Usage("x".into()).exit_code(), 2);
        assert_eq!(CliError::Other("x".into()).exit_code(), 1);
        let lab = |source| CliError::Workload {
            workload: "w".into(),
            source,
        };
        assert_eq!(
            lab(LabError::bad("ops", "x", "not a number")).exit_code(),
            2
        );
        assert_eq!(
            lab(LabError::Allocator(mballoc::Error::ZeroLength { owner: 1 })).exit_code(),
            1
        );
    }
}
