//! Bar charts: frag_pct per group (fsperf), the e2freefrag free-extent histogram, and the
//! extent-size distribution. All share [`plot_bars`]: one labelled bar per category.

use super::{check_finite, plot_err, y_top, PLOT_SIZE};
use crate::metrics::frag_pct::FragPct;
use crate::metrics::log2_hist::SizeBucket;
use crate::report::error::ReportError;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

const BAR: RGBColor = RGBColor(31, 119, 180);

/// Draws one bar per `(label, value)` to an SVG file; `x_desc` names what the categories are.
pub fn plot_bars(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    labels: &[String],
    values: &[f64],
    path: &Path,
) -> Result<(), ReportError> {
    if values.is_empty() {
        return Err(ReportError::EmptyData("bar values"));
    }
    if labels.len() != values.len() {
        return Err(ReportError::LabelMismatch {
            labels: labels.len(),
            values: values.len(),
        });
    }
    check_finite(values, "bar values")?;
    let err = plot_err(path);
    let n = values.len();
    let y_max = values.iter().copied().fold(0.0, f64::max);
    let root = SVGBackend::new(path, PLOT_SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n as f64, 0f64..y_top(y_max))
        .map_err(&err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(&err)?;
    let bars = values.iter().enumerate().map(|(i, &v)| {
        let x = i as f64;
        Rectangle::new([(x + 0.05, 0.0), (x + 0.95, v)], BAR.filled())
    });
    chart.draw_series(bars).map_err(&err)?;
    // Category labels under the bar centres, thinned to about 40 so they stay legible.
    let step = n.div_ceil(40).max(1);
    let style = ("sans-serif", 12)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (i, label) in labels.iter().enumerate().step_by(step) {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&Text::new(label.as_str(), (px, py + 6), style.clone()))
            .map_err(&err)?;
    }
    root.present().map_err(&err)
}

/// fsperf frag_pct of every group.
pub fn plot_frag_pct(frag: &FragPct, path: &Path) -> Result<(), ReportError> {
    let labels: Vec<String> = (0..frag.per_group_frag_pct.len())
        .map(|g| g.to_string())
        .collect();
    plot_bars(
        "frag_pct per group (fsperf)",
        "group",
        "frag_pct",
        &labels,
        &frag.per_group_frag_pct,
        path,
    )
}

/// e2freefrag histogram: percentage of free blocks per free-extent size range.
pub fn plot_free_extent_histogram(hist: &[SizeBucket], path: &Path) -> Result<(), ReportError> {
    plot_buckets(
        "free extent sizes (e2freefrag)",
        "free extent size",
        "% of free blocks",
        hist,
        path,
    )
}

/// Extent-size distribution: percentage of file blocks per extent size range.
pub fn plot_extent_sizes(hist: &[SizeBucket], path: &Path) -> Result<(), ReportError> {
    plot_buckets(
        "file extent sizes",
        "extent size",
        "% of file blocks",
        hist,
        path,
    )
}

fn plot_buckets(
    title: &str,
    x: &str,
    y: &str,
    hist: &[SizeBucket],
    path: &Path,
) -> Result<(), ReportError> {
    let labels: Vec<String> = hist.iter().map(|b| b.range.clone()).collect();
    let values: Vec<f64> = hist.iter().map(|b| b.percent).collect();
    plot_bars(title, x, y, &labels, &values, path)
}
