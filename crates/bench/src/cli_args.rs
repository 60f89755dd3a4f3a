//! The `eagernfs bench` command line, as clap derive structs the binary embeds:
//!
//! ```text
//! #[derive(clap::Subcommand)]
//! enum Command {
//!     /// Benchmarks: the papers' experiments, JSON reports and plots.
//!     Bench(eagernfs_bench::cli_args::BenchArgs),
//!     // ...
//! }
//! // ...
//! Command::Bench(args) => eagernfs_bench::cli_args::run(args, &mut std::io::stdout())?,
//! ```
//!
//! Each subcommand converts its flags into the typed config of [`crate::commands`] (checking
//! bounds there, not here), so other front ends can skip clap entirely.

use crate::commands::{
    bench_plot, bench_table, bench_write, PlotCommand, PlotKind, TableCommand, WriteCommand,
};
use crate::error::BenchError;
use crate::plot::ThroughputMetric;
use crate::spikes::SpikeConfig;
use crate::units::{parse_duration, parse_size};
use crate::write::{paper_sweep_sizes, WriteConfig};
use std::path::PathBuf;
use std::time::Duration;

/// `eagernfs bench …`
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The benchmark to run.
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The benchmarks and their report tools.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Sequential write benchmark (Lever & Honeyman 2002): writes a fresh file in fixed
    /// blocks into DIR, timing every write(); reports MB/s after the last write, after fsync
    /// and after close, latency percentiles and periodic latency spikes.
    Write(WriteArgs),
    /// Draws charts from `bench write --json` reports, several targets on one chart.
    Plot(PlotArgs),
    /// Prints a Markdown ratio table comparing two `bench write --json` reports.
    Table(TableArgs),
}

/// Flags of `bench write`.
#[derive(Debug, Clone, clap::Args)]
pub struct WriteArgs {
    /// Directory to write into: a local directory, a FUSE or NFS mount.
    #[arg(value_name = "DIR")]
    pub target: PathBuf,
    /// File size (units: KiB MiB GiB binary, kB MB GB decimal).
    #[arg(long, default_value = "64MiB", value_parser = parse_size, value_name = "SIZE")]
    pub size: u64,
    /// Bytes per write() call.
    #[arg(long, default_value = "8KiB", value_parser = parse_size, value_name = "SIZE")]
    pub block: u64,
    /// Sweep the paper's file sizes, 25 MB to 450 MB (Fig. 1 and 7), instead of --size.
    #[arg(long, conflicts_with = "sizes")]
    pub sweep: bool,
    /// Sweep these file sizes instead of --size (comma-separated, e.g. 25MB,100MB,400MB).
    #[arg(long, value_delimiter = ',', value_parser = parse_size, value_name = "SIZES")]
    pub sizes: Vec<u64>,
    /// Stop writing after this many seconds in total (the run is reported as cut short).
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    pub max_seconds: f64,
    /// Stop a run after this many write() calls.
    #[arg(long, default_value_t = 10_000_000, value_name = "N")]
    pub max_calls: u64,
    /// Calls slower than this are outliers in the "without outliers" mean (e.g. 1ms, 500us).
    #[arg(long, default_value = "1ms", value_parser = parse_duration, value_name = "DURATION")]
    pub outlier: Duration,
    /// A call slower than this many times the median is a spike.
    #[arg(long, default_value_t = 10.0, value_name = "K")]
    pub spike_factor: f64,
    /// Skip fsync before close.
    #[arg(long)]
    pub no_fsync: bool,
    /// Leave the written files in DIR.
    #[arg(long)]
    pub keep: bool,
    /// Name of this target in plots and tables (default: DIR and its file system type).
    #[arg(long)]
    pub label: Option<String>,
    /// Save the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw plots to PREFIX-latency.{svg,png}, PREFIX-histogram.{svg,png} (and, for a sweep,
    /// PREFIX-throughput.{svg,png}).
    #[arg(long, value_name = "PREFIX")]
    pub plot: Option<PathBuf>,
    /// Leave per-call latencies out of the JSON (smaller file; no per-call plot later).
    #[arg(long)]
    pub no_latencies: bool,
    /// Never draw a progress bar (it is only drawn when stderr is a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
}

/// Flags of `bench plot`.
#[derive(Debug, Clone, clap::Args)]
pub struct PlotArgs {
    /// The chart: throughput (vs file size), histogram (latency distribution), latency (per call).
    #[arg(long, value_enum, default_value = "throughput")]
    pub kind: PlotKindArg,
    /// For --kind throughput: which throughput.
    #[arg(long, value_enum, default_value = "writes")]
    pub metric: MetricArg,
    /// Legend names in input order (comma-separated; default: each report's target label).
    #[arg(long, value_delimiter = ',')]
    pub labels: Vec<String>,
    /// Chart title.
    #[arg(long)]
    pub title: Option<String>,
    /// Output path prefix (.svg and .png are appended).
    #[arg(long, short, value_name = "PREFIX")]
    pub output: PathBuf,
    /// `bench write --json` reports, one per target.
    #[arg(required = true, value_name = "REPORT")]
    pub inputs: Vec<PathBuf>,
}

/// `--kind` of `bench plot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlotKindArg {
    /// Throughput against file size, one line per report.
    Throughput,
    /// Latency distribution, one outline per report.
    Histogram,
    /// Latency of every call, one chart per report.
    Latency,
}

/// `--metric` of `bench plot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricArg {
    /// Up to the last write().
    Writes,
    /// Up to the end of fsync.
    Fsync,
    /// Up to the end of close.
    Close,
}

/// Flags of `bench table`.
#[derive(Debug, Clone, clap::Args)]
pub struct TableArgs {
    /// First report (numerator of the ratios).
    pub a: PathBuf,
    /// Second report.
    pub b: PathBuf,
    /// Column names, comma-separated.
    #[arg(long, value_delimiter = ',', default_values = ["eagernfs", "ganesha"])]
    pub names: Vec<String>,
}

impl WriteArgs {
    /// The typed command these flags describe.
    pub fn to_command(&self) -> Result<WriteCommand, BenchError> {
        let sizes_bytes = if self.sweep {
            paper_sweep_sizes()
        } else if !self.sizes.is_empty() {
            self.sizes.clone()
        } else {
            vec![self.size]
        };
        let max_duration = Duration::try_from_secs_f64(self.max_seconds).map_err(|_| {
            BenchError::Config(format!("--max-seconds {} is not a duration", self.max_seconds))
        })?;
        let config = WriteConfig {
            sizes_bytes,
            block_size_bytes: usize::try_from(self.block)
                .map_err(|_| BenchError::Config("--block is too large".into()))?,
            max_duration,
            max_calls: self.max_calls,
            outlier_threshold: self.outlier,
            spikes: SpikeConfig { factor: self.spike_factor, ..SpikeConfig::default() },
            fsync: !self.no_fsync,
            keep_files: self.keep,
            keep_latencies: !self.no_latencies,
            progress: !self.no_progress,
        };
        config.validate()?;
        Ok(WriteCommand {
            target_dir: self.target.clone(),
            label: self.label.clone(),
            config,
            json_path: self.json.clone(),
            plot_prefix: self.plot.clone(),
        })
    }
}

impl PlotArgs {
    /// The typed command these flags describe.
    pub fn to_command(&self) -> PlotCommand {
        let metric = match self.metric {
            MetricArg::Writes => ThroughputMetric::Writes,
            MetricArg::Fsync => ThroughputMetric::Fsync,
            MetricArg::Close => ThroughputMetric::Close,
        };
        PlotCommand {
            inputs: self.inputs.clone(),
            labels: self.labels.clone(),
            kind: match self.kind {
                PlotKindArg::Throughput => PlotKind::Throughput(metric),
                PlotKindArg::Histogram => PlotKind::Histogram,
                PlotKindArg::Latency => PlotKind::Latency,
            },
            output_prefix: self.output.clone(),
            title: self.title.clone(),
        }
    }
}

/// Runs a parsed `eagernfs bench …` command, printing its summary and the files it wrote to
/// `out` (the progress bar, if any, goes to stderr).
pub fn run(args: BenchArgs, out: &mut dyn std::io::Write) -> Result<(), BenchError> {
    let print = |out: &mut dyn std::io::Write, text: &str| {
        out.write_all(text.as_bytes()).map_err(|e| BenchError::io("write", "<stdout>", e))
    };
    match args.command {
        BenchCommand::Write(args) => {
            let output = bench_write(&args.to_command()?)?;
            print(out, &output.summary)?;
            for file in &output.files {
                print(out, &format!("wrote {}\n", file.display()))?;
            }
        }
        BenchCommand::Plot(args) => {
            for file in bench_plot(&args.to_command())? {
                print(out, &format!("wrote {}\n", file.display()))?;
            }
        }
        BenchCommand::Table(args) => {
            let [a_name, b_name]: [String; 2] = args
                .names
                .try_into()
                .map_err(|_| BenchError::Config("--names takes two names, e.g. eagernfs,ganesha".into()))?;
            let command = TableCommand { a: args.a, b: args.b, a_name, b_name };
            print(out, &bench_table(&command)?)?;
        }
    }
    Ok(())
}
