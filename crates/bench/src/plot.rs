//! Plots as SVG and PNG: the paper's figures, drawn from reports.
//!
//! - [`plot_latency_per_call`]: latency of every write() call in call order (Fig. 2–4, 6).
//! - [`plot_latency_histogram`]: distribution of write() latency, several targets overlaid
//!   (Fig. 5).
//! - [`plot_throughput_vs_size`]: MB/s against file size, one line per target (Fig. 1, 7).
//!
//! Each function writes `PREFIX.svg` and `PREFIX.png` and returns both paths. Text is drawn
//! with an embedded DejaVu Sans (plotters' `ab_glyph` feature), so PNGs need no fontconfig or
//! freetype and render the same on every machine.

use crate::error::BenchError;
use crate::report::{WriteReport, WriteRun};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Once;

/// Pixel size of every chart (the SVG uses the same user units).
const SIZE: (u32, u32) = (1200, 720);
pub(crate) const FONT: &str = "sans-serif";

/// Line colours, in order, for series on one chart: distinct in colour and in brightness.
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 100, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(90, 90, 90),
    RGBColor(188, 189, 34),
];

pub(crate) fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

fn register_fonts() {
    static FONTS: Once = Once::new();
    FONTS.call_once(|| {
        // The bytes are valid TrueType shipped by the `dejavu` crate; if registering failed,
        // drawing would report "font unavailable" on the first label, which is the error a
        // user would see, so there is nothing better to do with this result.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// A chart that can be drawn on any plotters backend.
pub(crate) trait Chart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

fn with_extension(prefix: &Path, extension: &str) -> PathBuf {
    let mut name = OsString::from(prefix.as_os_str());
    name.push(".");
    name.push(extension);
    PathBuf::from(name)
}

pub(crate) fn render(chart: &impl Chart, prefix: &Path) -> Result<Vec<PathBuf>, BenchError> {
    register_fonts();
    let svg = with_extension(prefix, "svg");
    let png = with_extension(prefix, "png");
    let fail = |path: &Path, message: String| BenchError::Plot { path: path.to_path_buf(), message };
    {
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        chart.draw(&root).map_err(|m| fail(&svg, m))?;
        root.present().map_err(|e| fail(&svg, e.to_string()))?;
    }
    {
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        chart.draw(&root).map_err(|m| fail(&png, m))?;
        root.present().map_err(|e| fail(&png, e.to_string()))?;
    }
    Ok(vec![svg, png])
}

pub(crate) fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The value at quantile `q` of a series (nearest rank), 0 when empty.
fn quantile(samples: &[u64], q: f64) -> u64 {
    if samples.is_empty() {
        return 0;
    }
    let mut sorted = samples.to_vec();
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    *sorted.select_nth_unstable(rank).1
}

struct LatencyPerCall<'a> {
    title: &'a str,
    latencies_ns: &'a [u64],
    spike_threshold_ns: Option<u64>,
}

impl Chart for LatencyPerCall<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        let calls = self.latencies_ns.len() as u64;
        let max_us = self.latencies_ns.iter().copied().max().unwrap_or(1) as f64 / 1e3;
        let mut chart = ChartBuilder::on(root)
            .caption(self.title, (FONT, 24))
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(0..calls.max(1), 0f64..(max_us * 1.05).max(1e-3))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("write() call")
            .y_desc("latency (µs)")
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 18))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        // Small dots, as in the paper: a line through 50,000 points would hide the spikes'
        // spacing, which is what the figure is for.
        chart
            .draw_series(
                self.latencies_ns
                    .iter()
                    .enumerate()
                    .map(|(i, &ns)| Circle::new((i as u64, ns as f64 / 1e3), 2, colour(0).filled())),
            )
            .map_err(err)?
            .label(format!("{calls} calls"))
            .legend(|(x, y)| Circle::new((x + 10, y), 4, colour(0).filled()));
        if let Some(threshold) = self.spike_threshold_ns {
            let y = threshold as f64 / 1e3;
            if y <= max_us * 1.05 {
                chart
                    .draw_series(LineSeries::new([(0, y), (calls, y)], colour(1).stroke_width(2)))
                    .map_err(err)?
                    .label("spike threshold")
                    .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], colour(1).stroke_width(2)));
            }
        }
        chart
            .configure_series_labels()
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(err)
    }
}

/// Plots the latency of every call in order (Fig. 2–4, 6). `spike_threshold_ns` draws the
/// spike detector's threshold as a horizontal line.
pub fn plot_latency_per_call(
    title: &str,
    latencies_ns: &[u64],
    spike_threshold_ns: Option<u64>,
    prefix: &Path,
) -> Result<Vec<PathBuf>, BenchError> {
    if latencies_ns.is_empty() {
        return Err(BenchError::Plot { path: prefix.to_path_buf(), message: "no latencies to plot".into() });
    }
    render(&LatencyPerCall { title, latencies_ns, spike_threshold_ns }, prefix)
}

/// One target's latencies for a histogram.
#[derive(Debug, Clone)]
pub struct HistogramSeries<'a> {
    /// Legend entry (the target's label).
    pub label: String,
    /// One latency per call.
    pub latencies_ns: &'a [u64],
}

/// Bins in a latency histogram.
const HISTOGRAM_BINS: usize = 60;

struct LatencyHistogram<'a> {
    title: &'a str,
    series: &'a [HistogramSeries<'a>],
}

impl Chart for LatencyHistogram<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        // The axis ends at 1.5 times the largest p99: the slowest 1% would otherwise squash
        // everything else into the first bins (the per-call plot is where they show). Calls
        // past the axis are counted in the legend instead.
        let p99_max = self.series.iter().map(|s| quantile(s.latencies_ns, 0.99)).max().unwrap_or(1);
        let cap_ns = p99_max.max(1) as f64 * 1.5;
        let bin_ns = cap_ns / HISTOGRAM_BINS as f64;
        let mut binned = Vec::new();
        let mut y_max = 0f64;
        for s in self.series {
            let mut counts = vec![0u64; HISTOGRAM_BINS];
            let mut beyond = 0u64;
            for &ns in s.latencies_ns {
                let bin = (ns as f64 / bin_ns) as usize;
                match counts.get_mut(bin) {
                    Some(c) => *c += 1,
                    None => beyond += 1,
                }
            }
            let total = s.latencies_ns.len().max(1) as f64;
            let percent: Vec<f64> = counts.iter().map(|&c| c as f64 * 100.0 / total).collect();
            y_max = percent.iter().copied().fold(y_max, f64::max);
            binned.push((percent, beyond));
        }
        let cap_us = cap_ns / 1e3;
        let mut chart = ChartBuilder::on(root)
            .caption(self.title, (FONT, 24))
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..cap_us, 0f64..(y_max * 1.1).max(1.0))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("write() latency (µs)")
            .y_desc("% of calls")
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 18))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        for (i, (s, (percent, beyond))) in self.series.iter().zip(&binned).enumerate() {
            // A step outline per series, so several targets overlay without hiding each other.
            let bin_us = bin_ns / 1e3;
            let steps = percent
                .iter()
                .enumerate()
                .flat_map(|(b, &p)| [(b as f64 * bin_us, p), ((b + 1) as f64 * bin_us, p)]);
            let c = colour(i);
            chart
                .draw_series(LineSeries::new(steps, c.stroke_width(2)))
                .map_err(err)?
                .label(format!("{} ({} calls, {} beyond the axis)", s.label, s.latencies_ns.len(), beyond))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(3)));
        }
        chart
            .configure_series_labels()
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(err)
    }
}

/// Plots the latency distribution of one or more targets on one chart (Fig. 5).
pub fn plot_latency_histogram(
    title: &str,
    series: &[HistogramSeries<'_>],
    prefix: &Path,
) -> Result<Vec<PathBuf>, BenchError> {
    if series.is_empty() || series.iter().all(|s| s.latencies_ns.is_empty()) {
        return Err(BenchError::Plot { path: prefix.to_path_buf(), message: "no latencies to plot".into() });
    }
    render(&LatencyHistogram { title, series }, prefix)
}

/// Which of a write run's three throughputs to plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThroughputMetric {
    /// Up to the last write() (the paper's Fig. 1 and 7).
    Writes,
    /// Up to the end of fsync.
    Fsync,
    /// Up to the end of close.
    Close,
}

impl ThroughputMetric {
    /// How the metric is named in legends and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ThroughputMetric::Writes => "after last write",
            ThroughputMetric::Fsync => "after fsync",
            ThroughputMetric::Close => "after close",
        }
    }

    fn of(self, run: &WriteRun) -> Option<f64> {
        match self {
            ThroughputMetric::Writes => run.mb_per_s_writes,
            ThroughputMetric::Fsync => run.mb_per_s_fsync,
            ThroughputMetric::Close => run.mb_per_s_close,
        }
    }
}

/// One line on a throughput-vs-size chart.
#[derive(Debug, Clone, PartialEq)]
pub struct ThroughputSeries {
    /// Legend entry.
    pub label: String,
    /// (file size in bytes, MB/s), in increasing size.
    pub points: Vec<(u64, f64)>,
}

/// The series for one report: its runs' `metric`, by file size (runs cut short by a bound
/// are left out: their size is not the size on the axis).
pub fn throughput_series(
    report: &WriteReport,
    metric: ThroughputMetric,
    label: Option<&str>,
) -> ThroughputSeries {
    let mut points: Vec<(u64, f64)> = report
        .runs
        .iter()
        .filter(|r| r.stopped_early.is_none())
        .filter_map(|r| metric.of(r).map(|v| (r.bytes_written, v)))
        .collect();
    points.sort_by_key(|p| p.0);
    let label = label.map_or_else(|| format!("{}, {}", report.target.label, metric.name()), str::to_string);
    ThroughputSeries { label, points }
}

struct ThroughputVsSize<'a> {
    title: &'a str,
    series: &'a [ThroughputSeries],
}

impl Chart for ThroughputVsSize<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        let points = self.series.iter().flat_map(|s| &s.points);
        let x_max = points.clone().map(|p| p.0 as f64 / 1e6).fold(0.0, f64::max);
        let y_max = points.map(|p| p.1).fold(0.0, f64::max);
        let mut chart = ChartBuilder::on(root)
            .caption(self.title, (FONT, 24))
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..(x_max * 1.05).max(1.0), 0f64..(y_max * 1.15).max(1.0))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("file size (MB)")
            .y_desc("throughput (MB/s)")
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 18))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        for (i, s) in self.series.iter().enumerate() {
            let c = colour(i);
            // Earlier series are drawn first and thicker, and each has its own marker, so lines
            // that coincide (fsync and close on a local disk) still show both.
            let width = 5u32.saturating_sub(i as u32).max(2);
            let xy: Vec<(f64, f64)> = s.points.iter().map(|&(b, v)| (b as f64 / 1e6, v)).collect();
            chart
                .draw_series(LineSeries::new(xy.clone(), c.stroke_width(width)))
                .map_err(err)?
                .label(s.label.clone())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(width)));
            match i % 3 {
                0 => chart.draw_series(xy.into_iter().map(|p| Circle::new(p, 5, c.filled()))).map_err(err)?,
                1 => chart
                    .draw_series(xy.into_iter().map(|p| TriangleMarker::new(p, 7, c.filled())))
                    .map_err(err)?,
                _ => chart
                    .draw_series(xy.into_iter().map(|p| Cross::new(p, 6, c.stroke_width(2))))
                    .map_err(err)?,
            };
        }
        chart
            .configure_series_labels()
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(err)
    }
}

/// Plots throughput against file size, one line per series (Fig. 1 and 7).
pub fn plot_throughput_vs_size(
    title: &str,
    series: &[ThroughputSeries],
    prefix: &Path,
) -> Result<Vec<PathBuf>, BenchError> {
    if series.iter().all(|s| s.points.is_empty()) {
        return Err(BenchError::Plot {
            path: prefix.to_path_buf(),
            message: "no throughput points to plot".into(),
        });
    }
    render(&ThroughputVsSize { title, series }, prefix)
}
