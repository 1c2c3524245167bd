//! SVG plots (plotters, SVG backend only — no fonts or bitmap backends to build): throughput
//! against threads, frag_pct per group, free-extent histogram, extent-size distribution. Every
//! function takes the data and an output path and returns `Result<(), ReportError>`.

mod bars;
mod line;

pub use bars::{plot_bars, plot_extent_sizes, plot_frag_pct, plot_free_extent_histogram};
pub use line::{plot_throughput, Series};

use super::error::ReportError;
use std::path::Path;

/// Canvas size of every plot, in SVG user units.
pub const PLOT_SIZE: (u32, u32) = (900, 540);

/// Maps any plotters error to a [`ReportError::Plot`] naming the file.
fn plot_err<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> ReportError + '_ {
    move |e| ReportError::Plot {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Rejects NaN and infinities, which plotters cannot place.
fn check_finite<'a>(
    values: impl IntoIterator<Item = &'a f64>,
    what: &'static str,
) -> Result<(), ReportError> {
    if values.into_iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(ReportError::NonFinite(what))
    }
}

/// A y-axis top that leaves headroom and is never zero.
fn y_top(max: f64) -> f64 {
    if max > 0.0 {
        max * 1.1
    } else {
        1.0
    }
}
