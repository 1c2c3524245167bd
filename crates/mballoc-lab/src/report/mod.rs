//! Reports for metrics records: aligned A-vs-B comparison tables, JSON and CSV writers, and SVG
//! plots. Everything takes plain (serialisable) data and an output path.

pub mod csv;
pub mod error;
pub mod flatten;
pub mod json;
pub mod plot;
pub mod table;

#[cfg(test)]
mod tests;

pub use csv::{write_csv, write_csv_rows};
pub use error::ReportError;
pub use json::write_json;
pub use plot::{
    plot_bars, plot_extent_sizes, plot_frag_pct, plot_free_extent_histogram, plot_throughput,
    Series,
};
pub use table::ComparisonTable;
