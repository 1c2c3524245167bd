//! Typed errors of the report writers.

use std::path::PathBuf;
use thiserror::Error;

/// Why a report could not be written.
#[derive(Debug, Error)]
pub enum ReportError {
    /// Creating or writing the output file failed.
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The record could not be serialised.
    #[error("cannot serialise the record: {0}")]
    Json(#[from] serde_json::Error),
    /// plotters failed to draw.
    #[error("cannot draw {path}: {message}")]
    Plot { path: PathBuf, message: String },
    /// A plot was asked for with nothing to draw.
    #[error("nothing to plot: {0}")]
    EmptyData(&'static str),
    /// A value to plot is NaN or infinite.
    #[error("cannot plot a non-finite value in {0}")]
    NonFinite(&'static str),
    /// Labels and values of a bar chart differ in length.
    #[error("{labels} labels for {values} values")]
    LabelMismatch { labels: usize, values: usize },
}

impl ReportError {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
