//! One function per `eagernfs bench` subcommand: typed configuration in, typed result out.
//! The binary parses its flags into these structs (see [`crate::cli_args`] for the clap
//! version), calls the function and prints `summary`.

use crate::error::BenchError;
use crate::plot::{
    plot_latency_histogram, plot_latency_per_call, plot_throughput_vs_size, throughput_series,
    HistogramSeries, ThroughputMetric,
};
use crate::report::{load_write_report, save_json, WriteReport};
use crate::summary::summarize_write;
use crate::table::compare_write_reports;
use crate::units::format_bytes;
use crate::write::{run_write, DirectoryTarget, WriteConfig};
use crate::write_nfs::NfsTarget;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// `bench write` against a directory.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteCommand {
    /// Directory to create the benchmark files in.
    pub target_dir: PathBuf,
    /// Name of the target in plots and tables (default: its path and file system type).
    pub label: Option<String>,
    /// The benchmark's parameters and bounds.
    pub config: WriteConfig,
    /// Where to save the JSON report.
    pub json_path: Option<PathBuf>,
    /// Path prefix for plots (`PREFIX-latency.svg`, `PREFIX-latency.png`, ...).
    pub plot_prefix: Option<PathBuf>,
}

/// What `bench write` produced.
#[derive(Debug, Clone)]
pub struct WriteOutput {
    /// The full report (also saved as JSON when asked).
    pub report: WriteReport,
    /// The human summary to print.
    pub summary: String,
    /// Files written (JSON and plots).
    pub files: Vec<PathBuf>,
}

/// Runs `bench write`, then saves the JSON and draws the plots that were asked for.
pub fn bench_write(command: &WriteCommand) -> Result<WriteOutput, BenchError> {
    // An nfs:// URL is written through eagernfs's own client; anything else is a directory.
    let report = match command.target_dir.to_str().filter(|t| t.starts_with("nfs://")) {
        Some(url) => run_write(&NfsTarget::connect(url, command.label.clone())?, &command.config)?,
        None => {
            run_write(&DirectoryTarget::new(&command.target_dir, command.label.clone())?, &command.config)?
        }
    };
    let mut files = Vec::new();
    if let Some(path) = &command.json_path {
        save_json(&report, path)?;
        files.push(path.clone());
    }
    if let Some(prefix) = &command.plot_prefix {
        files.extend(plot_write_report(&report, prefix)?);
    }
    Ok(WriteOutput { summary: summarize_write(&report), report, files })
}

fn suffixed(prefix: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(prefix.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

/// Draws a report's plots: per-call latency and a histogram for each run that kept its
/// latencies, and throughput against size when there are several runs.
///
/// File names: one run gives `PREFIX-latency` and `PREFIX-histogram`; a sweep gives
/// `PREFIX-throughput` and `PREFIX-<size>-latency`, `PREFIX-<size>-histogram` (each as `.svg`
/// and `.png`).
pub fn plot_write_report(report: &WriteReport, prefix: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = Vec::new();
    let target = &report.target.label;
    let block = format_bytes(report.settings.block_size_bytes);
    if report.runs.len() > 1 {
        let series: Vec<_> = [ThroughputMetric::Writes, ThroughputMetric::Fsync, ThroughputMetric::Close]
            .into_iter()
            .filter(|&m| m != ThroughputMetric::Fsync || report.settings.fsync)
            .map(|m| throughput_series(report, m, Some(m.name())))
            .collect();
        let title = format!("Sequential write throughput, {target}, {block} writes");
        files.extend(plot_throughput_vs_size(&title, &series, &suffixed(prefix, "-throughput"))?);
    }
    for run in &report.runs {
        if run.latencies_ns.is_empty() {
            continue;
        }
        let size = format_bytes(run.bytes_written);
        let run_prefix = if report.runs.len() > 1 {
            suffixed(prefix, &format!("-{}", size.replace(' ', "")))
        } else {
            prefix.to_path_buf()
        };
        let title = format!("write() latency per call, {size} file, {target}");
        files.extend(plot_latency_per_call(
            &title,
            &run.latencies_ns,
            Some(run.spikes.threshold_ns),
            &suffixed(&run_prefix, "-latency"),
        )?);
        let title = format!("write() latency distribution, {size} file, {block} writes");
        let series = [HistogramSeries { label: target.clone(), latencies_ns: &run.latencies_ns }];
        files.extend(plot_latency_histogram(&title, &series, &suffixed(&run_prefix, "-histogram"))?);
        if !run.held_samples.is_empty() {
            let title = format!("Written data held by the client, {size} file, {target}");
            files.extend(
                held_chart(title, vec![held_series(target, run)]).render(&suffixed(&run_prefix, "-held"))?,
            );
        }
    }
    Ok(files)
}

/// Which chart `bench plot` draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotKind {
    /// Throughput against file size, one line per report (Fig. 1, 7).
    Throughput(ThroughputMetric),
    /// Latency distribution, one outline per report, of its largest run (Fig. 5).
    Histogram,
    /// Latency per call of each report's largest run, one chart per report (Fig. 2–4, 6).
    Latency,
    /// Data the client held over time in each report's largest run, one line per report.
    Held,
}

/// `bench plot`: charts from saved `bench write` reports, several targets on one chart.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotCommand {
    /// JSON reports, one per target.
    pub inputs: Vec<PathBuf>,
    /// Legend names, in input order (missing ones default to each report's target label).
    pub labels: Vec<String>,
    /// The chart.
    pub kind: PlotKind,
    /// Output path prefix (`.svg` and `.png` are appended).
    pub output_prefix: PathBuf,
    /// Chart title (a default names the benchmark).
    pub title: Option<String>,
}

/// Runs `bench plot`; returns the files written.
pub fn bench_plot(command: &PlotCommand) -> Result<Vec<PathBuf>, BenchError> {
    if command.inputs.is_empty() {
        return Err(BenchError::Config("bench plot needs at least one JSON report".into()));
    }
    let reports = command.inputs.iter().map(|p| load_write_report(p)).collect::<Result<Vec<_>, _>>()?;
    let label = |i: usize| command.labels.get(i).cloned().unwrap_or_else(|| reports[i].target.label.clone());
    // The largest run that kept its latencies stands for a report in latency charts.
    let largest = |r: &WriteReport| {
        r.runs.iter().filter(|run| !run.latencies_ns.is_empty()).max_by_key(|run| run.bytes_written).cloned()
    };
    match command.kind {
        PlotKind::Throughput(metric) => {
            let series: Vec<_> = reports
                .iter()
                .enumerate()
                .map(|(i, r)| throughput_series(r, metric, Some(&label(i))))
                .collect();
            let title = command
                .title
                .clone()
                .unwrap_or_else(|| format!("Sequential write throughput, MB/s {}", metric.name()));
            plot_throughput_vs_size(&title, &series, &command.output_prefix)
        }
        PlotKind::Histogram => {
            let runs: Vec<_> = reports.iter().map(largest).collect();
            // A target silently missing from a comparison chart would mislead: refuse instead.
            if let Some(i) = runs.iter().position(Option::is_none) {
                return Err(BenchError::Report {
                    path: command.inputs[i].clone(),
                    message: "no run kept its per-call latencies (run without --no-latencies)".into(),
                });
            }
            let series: Vec<_> = runs
                .iter()
                .enumerate()
                .filter_map(|(i, run)| {
                    run.as_ref().map(|run| HistogramSeries {
                        label: format!("{}, {}", label(i), format_bytes(run.bytes_written)),
                        latencies_ns: &run.latencies_ns,
                    })
                })
                .collect();
            let title = command.title.clone().unwrap_or_else(|| "write() latency distribution".to_string());
            plot_latency_histogram(&title, &series, &command.output_prefix)
        }
        PlotKind::Held => {
            let mut series = Vec::new();
            for (i, report) in reports.iter().enumerate() {
                let run =
                    report.runs.iter().filter(|r| !r.held_samples.is_empty()).max_by_key(|r| r.bytes_written);
                let Some(run) = run else {
                    return Err(BenchError::Report {
                        path: command.inputs[i].clone(),
                        message: "no run recorded held memory (only eagernfs's own client, nfs://, does)"
                            .into(),
                    });
                };
                series.push(held_series(&label(i), run));
            }
            let title =
                command.title.clone().unwrap_or_else(|| "Written data held by the client".to_string());
            held_chart(title, series).render(&command.output_prefix)
        }
        PlotKind::Latency => {
            let mut files = Vec::new();
            for (i, report) in reports.iter().enumerate() {
                let Some(run) = largest(report) else {
                    return Err(BenchError::Report {
                        path: command.inputs[i].clone(),
                        message: "no run kept its per-call latencies (run without --no-latencies)".into(),
                    });
                };
                let prefix = if reports.len() == 1 {
                    command.output_prefix.clone()
                } else {
                    suffixed(&command.output_prefix, &format!("-{}", i + 1))
                };
                let title = command.title.clone().unwrap_or_else(|| {
                    format!(
                        "write() latency per call, {} file, {}",
                        format_bytes(run.bytes_written),
                        label(i)
                    )
                });
                files.extend(plot_latency_per_call(
                    &title,
                    &run.latencies_ns,
                    Some(run.spikes.threshold_ns),
                    &prefix,
                )?);
            }
            Ok(files)
        }
    }
}

/// One run's held-memory samples as a chart series: seconds, MiB.
fn held_series(label: &str, run: &crate::report::WriteRun) -> crate::load::chart::Series {
    crate::load::chart::Series {
        label: format!("{label} (peak {})", format_bytes(run.held_peak_bytes.unwrap_or(0))),
        points: run
            .held_samples
            .iter()
            .map(|&[t, b]| (t as f64 / 1e9, b as f64 / (1 << 20) as f64))
            .collect(),
        style: crate::load::chart::Style::Dots,
    }
}

fn held_chart(title: String, series: Vec<crate::load::chart::Series>) -> crate::load::chart::XyChart {
    crate::load::chart::XyChart {
        title,
        x_desc: "seconds since the file was created".into(),
        y_desc: "MiB held (dirty, in flight, kept until COMMIT)".into(),
        series,
    }
}

/// `bench table`: a Markdown ratio table of two `bench write` reports.
#[derive(Debug, Clone, PartialEq)]
pub struct TableCommand {
    /// First report (the numerator of the ratios).
    pub a: PathBuf,
    /// Second report.
    pub b: PathBuf,
    /// Column name of the first (`eagernfs`).
    pub a_name: String,
    /// Column name of the second (`ganesha`).
    pub b_name: String,
}

/// Runs `bench table`; returns the Markdown.
pub fn bench_table(command: &TableCommand) -> Result<String, BenchError> {
    let a = load_write_report(&command.a)?;
    let b = load_write_report(&command.b)?;
    Ok(compare_write_reports(&a, &b, &command.a_name, &command.b_name).to_markdown())
}
