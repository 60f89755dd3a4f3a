//! XY charts for the wire-level tools, as SVG and PNG: several named series on one chart,
//! drawn as lines with markers (rates, clients) or as dots (an offset per request).
//!
//! The write benchmark's charts in `plot.rs` are specific to its figures; this is the one
//! general chart the call-rate curve, throughput vs clients, mount completion and offset
//! order all are. It embeds the same DejaVu Sans through plotters' `ab_glyph` backend.

use crate::error::BenchError;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

use crate::plot::{colour, err, FONT};

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A line through the points, with a marker on each (a handful of measured points).
    LineWithMarkers,
    /// A small dot per point (thousands of requests).
    Dots,
}

/// One named series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend entry.
    pub label: String,
    /// The points, in drawing order.
    pub points: Vec<(f64, f64)>,
    /// How it is drawn.
    pub style: Style,
}

/// A chart: title, axis names, series.
#[derive(Debug, Clone, PartialEq)]
pub struct XyChart {
    /// Caption.
    pub title: String,
    /// X axis description with its unit.
    pub x_desc: String,
    /// Y axis description with its unit.
    pub y_desc: String,
    /// The series, drawn in order (legend in the same order).
    pub series: Vec<Series>,
}

impl XyChart {
    /// Draws `PREFIX.svg` and `PREFIX.png`; returns both paths. A chart without a single
    /// point is refused: an empty figure in a report would look like a result.
    pub fn render(&self, prefix: &Path) -> Result<Vec<PathBuf>, BenchError> {
        if self.series.iter().all(|s| s.points.is_empty()) {
            return Err(BenchError::Plot { path: prefix.to_path_buf(), message: "no points to plot".into() });
        }
        crate::plot::render(self, prefix)
    }
}

impl crate::plot::Chart for XyChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        let all = self.series.iter().flat_map(|s| &s.points).filter(|p| p.0.is_finite() && p.1.is_finite());
        let x_max = all.clone().map(|p| p.0).fold(0.0, f64::max);
        let y_max = all.map(|p| p.1).fold(0.0, f64::max);
        // Axes start at zero: a call-rate curve or an offset plot read from a cut axis would
        // exaggerate what it shows.
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 24))
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(90)
            .build_cartesian_2d(0f64..(x_max * 1.05).max(1e-9), 0f64..(y_max * 1.15).max(1e-9))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(&self.x_desc)
            .y_desc(&self.y_desc)
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 18))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        for (i, s) in self.series.iter().enumerate() {
            let c = colour(i);
            let points: Vec<(f64, f64)> =
                s.points.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite()).collect();
            match s.style {
                Style::LineWithMarkers => {
                    chart
                        .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))
                        .map_err(err)?
                        .label(s.label.clone())
                        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(3)));
                    // A marker shape per series, so coinciding lines stay distinguishable.
                    match i % 3 {
                        0 => chart.draw_series(points.into_iter().map(|p| Circle::new(p, 5, c.filled()))),
                        1 => chart
                            .draw_series(points.into_iter().map(|p| TriangleMarker::new(p, 7, c.filled()))),
                        _ => {
                            chart.draw_series(points.into_iter().map(|p| Cross::new(p, 6, c.stroke_width(2))))
                        }
                    }
                    .map_err(err)?;
                }
                Style::Dots => {
                    // Later series are drawn smaller, so a series lying exactly on an earlier
                    // one (an in-order backend on top of in-order sends) still shows both.
                    let radius = 3u32.saturating_sub(i as u32).max(1);
                    chart
                        .draw_series(points.into_iter().map(|p| Circle::new(p, radius, c.filled())))
                        .map_err(err)?
                        .label(s.label.clone())
                        .legend(move |(x, y)| Circle::new((x + 10, y), 4, c.filled()));
                }
            }
        }
        chart
            .configure_series_labels()
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(err)
    }
}
