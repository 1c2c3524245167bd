//! Line plot of throughput against thread count, one line per policy (will-it-scale sweep).

use super::{check_finite, plot_err, y_top, PLOT_SIZE};
use crate::report::error::ReportError;
use plotters::prelude::*;
use std::path::Path;

/// One policy's sweep: `(threads, ops_per_sec)` points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label (policy name).
    pub label: String,
    /// Points, plotted in the given order.
    pub points: Vec<(f64, f64)>,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// Plots ops/s against threads for each series to an SVG file.
pub fn plot_throughput(title: &str, series: &[Series], path: &Path) -> Result<(), ReportError> {
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    if all.is_empty() {
        return Err(ReportError::EmptyData("throughput series"));
    }
    check_finite(all.iter().flat_map(|p| [&p.0, &p.1]), "throughput series")?;
    let x_max = all.iter().map(|p| p.0).fold(1.0, f64::max);
    // Thread counts are whole numbers: ticks on whole steps only (a one-thread run would
    // otherwise get 0.0, 0.2, ... 1.0), about eight of them at most.
    let x_step = (x_max / 8.0).ceil().max(1.0);
    let y_max = all.iter().map(|p| p.1).fold(0.0, f64::max);
    let err = plot_err(path);
    let root = SVGBackend::new(path, PLOT_SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (0f64..x_max + x_step / 2.0).step(x_step),
            0f64..y_top(y_max),
        )
        .map_err(&err)?;
    chart
        .configure_mesh()
        .x_desc("threads")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc("ops/s")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(&err)?;
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(&err)?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(&err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(&err)?;
    root.present().map_err(&err)
}
