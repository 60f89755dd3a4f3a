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
    /// SFS-style call-rate generator (Banks 2007): N virtual clients from distinct 127.0.x.y
    /// addresses call an SFS-like NFSv3 mix over a prepared file set at offered rates (open
    /// loop, latency from the intended send time, calls sent within µs of it), a ramp to
    /// saturation, or a closed loop.
    Load(LoadArgs),
    /// Mount storm (Banks 2007): N clients from distinct 127.1.x.y addresses MOUNT and GETATTR
    /// at once; time until all succeed, failures by cause.
    Mountstorm(MountstormArgs),
    /// Sequential READ or WRITE of one file with K RPCs in flight; offset order as sent, as
    /// completed and (from `serve --trace-io`) as the backend ran them (Rago et al.).
    Stream(StreamArgs),
    /// Runs stream, load and mountstorm against several servers and prints Markdown ratio
    /// tables (first target / each other).
    Compare(CompareArgs),
}

/// Flags of `bench write`.
#[derive(Debug, Clone, clap::Args)]
pub struct WriteArgs {
    /// Where to write: a local directory, a FUSE or NFS mount, or an nfs:// URL
    /// (then written through eagernfs's own caching client, no kernel involved).
    #[arg(value_name = "DIR|URL")]
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
    /// Save the report as JSON to FILE (gzip-compressed when FILE ends in .gz, e.g. r.json.gz).
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
    /// `bench write --json` reports, one per target (.json or .json.gz).
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
    /// Written data the client held over time, one line per report (eagernfs's own client).
    Held,
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
    /// First report (numerator of the ratios), .json or .json.gz.
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
                PlotKindArg::Held => PlotKind::Held,
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
        BenchCommand::Load(args) => run_load_args(&args, out)?,
        BenchCommand::Mountstorm(args) => run_mountstorm_args(&args, out)?,
        BenchCommand::Stream(args) => run_stream_args(&args, out)?,
        BenchCommand::Compare(args) => run_compare_args(&args, out)?,
    }
    Ok(())
}

// ---- the wire-level tools: load, mountstorm, stream, compare ------------------------------

/// Parses `START:FACTOR:MAX` (e.g. `500:1.5:100000`).
fn parse_ramp(text: &str) -> Result<(f64, f64, f64), String> {
    let parts: Vec<&str> = text.split(':').collect();
    let [a, b, c] = parts.as_slice() else {
        return Err(format!("{text:?}: expected START:FACTOR:MAX, e.g. 500:1.5:100000"));
    };
    let num = |t: &str| t.trim().parse::<f64>().map_err(|_| format!("{t:?} is not a number"));
    Ok((num(a)?, num(b)?, num(c)?))
}

fn seconds(flag: &str, s: f64) -> Result<Duration, BenchError> {
    Duration::try_from_secs_f64(s).map_err(|_| BenchError::Config(format!("{flag} {s} is not a duration")))
}

/// `--source-addrs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SourceAddrsArg {
    /// Distinct 127.x.y.z when the server is on loopback.
    Auto,
    /// Always distinct 127.x.y.z.
    Distinct,
    /// The system's choice (one host).
    System,
}

/// `--arrivals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ArrivalsArg {
    /// Exponential gaps.
    Poisson,
    /// Evenly spaced.
    Fixed,
}

/// Flags of `bench load`.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Server and directory: nfs://host[:port]/export/dir?options (the file set goes below it).
    #[arg(value_name = "URL")]
    pub url: String,
    /// Virtual clients; a list (1,4,16) runs the schedule once per count.
    #[arg(long, default_value = "16", value_delimiter = ',', value_name = "N[,N...]")]
    pub clients: Vec<u32>,
    /// One open-loop step at this offered rate (calls/s, all clients together).
    #[arg(long, conflicts_with_all = ["rates", "ramp", "closed_loop"], value_name = "OPS_PER_S")]
    pub rate: Option<f64>,
    /// One open-loop step per offered rate.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["ramp", "closed_loop"], value_name = "LIST")]
    pub rates: Vec<f64>,
    /// Offered rates START, START×FACTOR, ... up to MAX, stopping at saturation (the default,
    /// 500:1.5:1000000).
    #[arg(long, value_parser = parse_ramp, conflicts_with = "closed_loop", value_name = "START:FACTOR:MAX")]
    pub ramp: Option<(f64, f64, f64)>,
    /// A ramp is saturated when achieved < this × offered.
    #[arg(long, default_value_t = 0.9)]
    pub saturation: f64,
    /// Closed loop instead: each client keeps K calls in flight, as fast as answered.
    #[arg(long, value_name = "K")]
    pub closed_loop: Option<u32>,
    /// Arrival process of open-loop steps.
    #[arg(long, value_enum, default_value = "poisson")]
    pub arrivals: ArrivalsArg,
    /// Operation weights, e.g. LOOKUP=27,READ=18,GETATTR=11 (default: SPEC SFS 3.0's mix).
    #[arg(long, default_value = "sfs", value_name = "OP=W,...")]
    pub mix: String,
    /// File-set directory name under the URL's directory.
    #[arg(long, default_value = "eagernfs-load", value_name = "NAME")]
    pub fileset_dir: String,
    /// File-set directories (M).
    #[arg(long, default_value_t = 10)]
    pub dirs: u32,
    /// Files per directory (K).
    #[arg(long, default_value_t = 25)]
    pub files: u32,
    /// Size of each file.
    #[arg(long, default_value = "64KiB", value_parser = parse_size, value_name = "SIZE")]
    pub file_size: u64,
    /// Bytes per READ and WRITE.
    #[arg(long, default_value = "8KiB", value_parser = parse_size, value_name = "SIZE")]
    pub io_size: u64,
    /// Length of each step.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
    pub step_seconds: f64,
    /// Most calls per step.
    #[arg(long, default_value_t = 5_000_000, value_name = "N")]
    pub step_ops: u64,
    /// Bound on all steps together (preparing the file set not included).
    #[arg(long, default_value_t = 120.0, value_name = "SECONDS")]
    pub max_seconds: f64,
    /// Bound on calls over all steps.
    #[arg(long, default_value_t = 50_000_000, value_name = "N")]
    pub max_ops: u64,
    /// Most calls one client has in flight in an open-loop step (more wait, and the wait counts).
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub outstanding: u32,
    /// How clients pick source addresses.
    #[arg(long, value_enum, default_value = "auto")]
    pub source_addrs: SourceAddrsArg,
    /// Seed of the operation choices and arrival gaps.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Name in reports and plots (default: the URL).
    #[arg(long)]
    pub label: Option<String>,
    /// Save the report as JSON to FILE (gzip-compressed when FILE ends in .gz, e.g. r.json.gz).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw PREFIX-callrate.{svg,png} (and PREFIX-clients.{svg,png} for several counts).
    #[arg(long, value_name = "PREFIX")]
    pub plot: Option<PathBuf>,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

impl LoadArgs {
    /// The typed configuration these flags describe.
    pub fn to_config(&self) -> Result<crate::load::LoadConfig, BenchError> {
        use crate::load::{clients::SourceAddrs, Arrivals, Schedule};
        let schedule = if let Some(k) = self.closed_loop {
            Schedule::ClosedLoop { outstanding: k }
        } else if let Some(r) = self.rate {
            Schedule::Rates(vec![r])
        } else if !self.rates.is_empty() {
            Schedule::Rates(self.rates.clone())
        } else {
            let (start, factor, max) = self.ramp.unwrap_or((500.0, 1.5, 1e6));
            Schedule::Ramp { start, factor, max, saturation: self.saturation }
        };
        let io_size_bytes =
            u32::try_from(self.io_size).map_err(|_| BenchError::Config("--io-size is too large".into()))?;
        let config = crate::load::LoadConfig {
            url: self.url.clone(),
            label: self.label.clone(),
            client_counts: self.clients.clone(),
            source_addrs: match self.source_addrs {
                SourceAddrsArg::Auto => SourceAddrs::Auto,
                SourceAddrsArg::Distinct => SourceAddrs::Distinct,
                SourceAddrsArg::System => SourceAddrs::System,
            },
            mix: crate::load::mix::OpMix::parse(&self.mix)
                .map_err(|m| BenchError::Config(format!("--mix: {m}")))?,
            arrivals: match self.arrivals {
                ArrivalsArg::Poisson => Arrivals::Poisson,
                ArrivalsArg::Fixed => Arrivals::Fixed,
            },
            schedule,
            fileset: crate::load::fileset::FileSetShape {
                dir_name: self.fileset_dir.clone(),
                dirs: self.dirs,
                files_per_dir: self.files,
                file_size_bytes: self.file_size,
            },
            io_size_bytes,
            step_duration: seconds("--step-seconds", self.step_seconds)?,
            step_ops_max: self.step_ops,
            max_duration: seconds("--max-seconds", self.max_seconds)?,
            max_ops: self.max_ops,
            outstanding_max: self.outstanding,
            seed: self.seed,
            progress: !self.no_progress,
            ..crate::load::LoadConfig::default()
        };
        config.validate()?;
        Ok(config)
    }
}

/// Flags of `bench mountstorm`.
#[derive(Debug, Clone, clap::Args)]
pub struct MountstormArgs {
    /// The server's NFS address.
    #[arg(value_name = "HOST:PORT")]
    pub server: std::net::SocketAddr,
    /// The export to mount.
    #[arg(long, value_name = "PATH")]
    pub export: String,
    /// Clients.
    #[arg(long, default_value_t = 2000)]
    pub clients: u32,
    /// Clients mounting at the same time (default: all at once).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<u32>,
    /// The MOUNT service's port (ganesha: NFS port + 1; default: the NFS port, then rpcbind).
    #[arg(long, value_name = "PORT")]
    pub mount_port: Option<u16>,
    /// Client mount options (nfs(5) names: timeo=, retrans=, resvport, ...). Clients are soft.
    #[arg(short = 'o', long, default_value = "timeo=100,retrans=2", value_name = "OPTIONS")]
    pub options: String,
    /// Every client from the system's source address instead of distinct 127.1.x.y.
    #[arg(long)]
    pub same_source: bool,
    /// Keep every connection open until all clients are done.
    #[arg(long)]
    pub keep_open: bool,
    /// Bound on the storm.
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    pub max_seconds: f64,
    /// Name in reports.
    #[arg(long)]
    pub label: Option<String>,
    /// Save the report as JSON to FILE (gzip-compressed when FILE ends in .gz, e.g. r.json.gz).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw PREFIX-mounted.{svg,png}.
    #[arg(long, value_name = "PREFIX")]
    pub plot: Option<PathBuf>,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

impl MountstormArgs {
    /// The typed configuration these flags describe.
    pub fn to_config(&self) -> Result<crate::mountstorm::MountstormConfig, BenchError> {
        let mut options = eagernfs_client::MountOptions::parse(&self.options)
            .map_err(|e| BenchError::Config(format!("-o: {e}")))?;
        options.hard = false;
        if let Some(p) = self.mount_port {
            options.mountport = Some(p);
        }
        let config = crate::mountstorm::MountstormConfig {
            server: self.server,
            export: self.export.clone(),
            label: self.label.clone(),
            clients: self.clients,
            concurrency: self.concurrency,
            distinct_source_addrs: !self.same_source,
            options,
            keep_open: self.keep_open,
            max_duration: seconds("--max-seconds", self.max_seconds)?,
            progress: !self.no_progress,
        };
        config.validate()?;
        Ok(config)
    }
}

/// `--direction` of `bench stream`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DirectionArg {
    /// Sequential READ.
    Read,
    /// Sequential UNSTABLE WRITE, then COMMIT.
    Write,
}

/// `--stable` of `bench stream`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StableArg {
    /// UNSTABLE WRITEs, then one COMMIT.
    Unstable,
    /// DATA_SYNC WRITEs.
    DataSync,
    /// FILE_SYNC WRITEs.
    FileSync,
}

/// Flags of `bench stream`.
#[derive(Debug, Clone, clap::Args)]
pub struct StreamArgs {
    /// Server and directory: nfs://host[:port]/export/dir?options.
    #[arg(value_name = "URL")]
    pub url: String,
    /// READ or WRITE.
    #[arg(long, value_enum, default_value = "read")]
    pub direction: DirectionArg,
    /// The file's name in the directory.
    #[arg(long, default_value = "eagernfs-stream.dat", value_name = "NAME")]
    pub file: String,
    /// Bytes to transfer.
    #[arg(long, default_value = "256MiB", value_parser = parse_size, value_name = "SIZE")]
    pub size: u64,
    /// Bytes per RPC.
    #[arg(long, default_value = "64KiB", value_parser = parse_size, value_name = "SIZE")]
    pub rpc_size: u64,
    /// RPCs in flight.
    #[arg(long, default_value_t = 16, value_name = "K")]
    pub in_flight: u32,
    /// How WRITEs ask for durability: `unstable` (then one COMMIT at the end),
    /// `data-sync` or `file-sync` (each WRITE durable before its reply; no COMMIT).
    #[arg(long, value_enum, default_value = "unstable")]
    pub stable: StableArg,
    /// Bound on the transfer.
    #[arg(long, default_value_t = 120.0, value_name = "SECONDS")]
    pub max_seconds: f64,
    /// Bound on RPCs.
    #[arg(long, default_value_t = 10_000_000, value_name = "N")]
    pub max_rpcs: u64,
    /// An eagernfs server's `serve --trace-io` file: report the backend's order too (the
    /// server writes it at shutdown; the tool waits for it).
    #[arg(long, value_name = "FILE")]
    pub server_trace: Option<PathBuf>,
    /// How long to wait for the server's trace.
    #[arg(long, default_value_t = 120.0, value_name = "SECONDS")]
    pub trace_wait: f64,
    /// Name in reports.
    #[arg(long)]
    pub label: Option<String>,
    /// Save the report as JSON to FILE (gzip-compressed when FILE ends in .gz, e.g. r.json.gz).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw PREFIX-offsets.{svg,png}.
    #[arg(long, value_name = "PREFIX")]
    pub plot: Option<PathBuf>,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

impl StreamArgs {
    /// The typed configuration these flags describe.
    pub fn to_config(&self) -> Result<crate::stream::StreamConfig, BenchError> {
        let config = crate::stream::StreamConfig {
            url: self.url.clone(),
            label: self.label.clone(),
            direction: match self.direction {
                DirectionArg::Read => crate::stream::Direction::Read,
                DirectionArg::Write => crate::stream::Direction::Write,
            },
            file_name: self.file.clone(),
            size_bytes: self.size,
            rpc_size_bytes: u32::try_from(self.rpc_size)
                .map_err(|_| BenchError::Config("--rpc-size is too large".into()))?,
            in_flight: self.in_flight,
            stable: match self.stable {
                StableArg::Unstable => crate::stream::Stability::Unstable,
                StableArg::DataSync => crate::stream::Stability::DataSync,
                StableArg::FileSync => crate::stream::Stability::FileSync,
            },
            max_duration: seconds("--max-seconds", self.max_seconds)?,
            max_rpcs: self.max_rpcs,
            server_trace: self.server_trace.clone(),
            trace_wait: seconds("--trace-wait", self.trace_wait)?,
            progress: !self.no_progress,
        };
        config.validate()?;
        Ok(config)
    }
}

/// Flags of `bench compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// A server to measure, as NAME=URL (nfs://host:port/export?mountport=...); repeat. The
    /// first is the numerator of every ratio.
    #[arg(long = "target", required = true, value_name = "NAME=URL")]
    pub targets: Vec<String>,
    /// A shell command to run before each workload of target NAME (e.g. restart ganesha,
    /// which wedges after ~24k creates), as NAME=COMMAND; repeat.
    #[arg(long = "restart", value_name = "NAME=COMMAND")]
    pub restarts: Vec<String>,
    /// Stream size (read and write).
    #[arg(long, default_value = "64MiB", value_parser = parse_size, value_name = "SIZE")]
    pub stream_size: u64,
    /// Stream RPC size.
    #[arg(long, default_value = "64KiB", value_parser = parse_size, value_name = "SIZE")]
    pub stream_rpc_size: u64,
    /// Stream RPCs in flight.
    #[arg(long, default_value_t = 16)]
    pub stream_in_flight: u32,
    /// Offered rates of the load workload.
    #[arg(long, value_delimiter = ',', default_value = "1000,3000,10000", value_name = "LIST")]
    pub load_rates: Vec<f64>,
    /// Virtual clients of the load workload.
    #[arg(long, default_value_t = 16)]
    pub load_clients: u32,
    /// Seconds per load step.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
    pub load_step_seconds: f64,
    /// Clients of the mount storm (0 skips it).
    #[arg(long, default_value_t = 200)]
    pub mountstorm_clients: u32,
    /// Directory for the reports (gzip-compressed, NAME-WORKLOAD.json.gz and compare.json.gz),
    /// plots and table.md.
    #[arg(long, short, value_name = "DIR")]
    pub out: PathBuf,
    /// Never draw progress bars.
    #[arg(long)]
    pub no_progress: bool,
}

impl CompareArgs {
    /// The typed command these flags describe.
    pub fn to_command(&self) -> Result<crate::compare::CompareCommand, BenchError> {
        let split = |flag: &str, t: &str| -> Result<(String, String), BenchError> {
            t.split_once('=')
                .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
                .filter(|(n, v)| !n.is_empty() && !v.is_empty())
                .ok_or_else(|| BenchError::Config(format!("{flag} {t:?}: expected NAME=VALUE")))
        };
        let targets = self
            .targets
            .iter()
            .map(|t| split("--target", t).map(|(name, url)| crate::compare::CompareTarget { name, url }))
            .collect::<Result<Vec<_>, _>>()?;
        let restarts = self.restarts.iter().map(|t| split("--restart", t)).collect::<Result<Vec<_>, _>>()?;
        let command = crate::compare::CompareCommand {
            targets,
            restarts: restarts.into_iter().collect(),
            stream_size_bytes: self.stream_size,
            stream_rpc_size_bytes: u32::try_from(self.stream_rpc_size)
                .map_err(|_| BenchError::Config("--stream-rpc-size is too large".into()))?,
            stream_in_flight: self.stream_in_flight,
            load_rates: self.load_rates.clone(),
            load_clients: self.load_clients,
            load_step: seconds("--load-step-seconds", self.load_step_seconds)?,
            mountstorm_clients: self.mountstorm_clients,
            out_dir: self.out.clone(),
            progress: !self.no_progress,
        };
        command.validate()?;
        Ok(command)
    }
}

fn print_output(out: &mut dyn std::io::Write, summary: &str, files: &[PathBuf]) -> Result<(), BenchError> {
    let mut text = summary.to_string();
    for f in files {
        text.push_str(&format!("wrote {}\n", f.display()));
    }
    out.write_all(text.as_bytes()).map_err(|e| BenchError::io("write", "<stdout>", e))
}

/// Runs `bench load`.
pub fn run_load_args(args: &LoadArgs, out: &mut dyn std::io::Write) -> Result<(), BenchError> {
    let command = crate::load::LoadCommand {
        config: args.to_config()?,
        json_path: args.json.clone(),
        plot_prefix: args.plot.clone(),
    };
    let o = crate::load::bench_load(&command)?;
    print_output(out, &o.summary, &o.files)
}

/// Runs `bench mountstorm`.
pub fn run_mountstorm_args(args: &MountstormArgs, out: &mut dyn std::io::Write) -> Result<(), BenchError> {
    let command = crate::mountstorm::MountstormCommand {
        config: args.to_config()?,
        json_path: args.json.clone(),
        plot_prefix: args.plot.clone(),
    };
    let o = crate::mountstorm::bench_mountstorm(&command)?;
    print_output(out, &o.summary, &o.files)
}

/// Runs `bench stream`.
pub fn run_stream_args(args: &StreamArgs, out: &mut dyn std::io::Write) -> Result<(), BenchError> {
    let command = crate::stream::StreamCommand {
        config: args.to_config()?,
        json_path: args.json.clone(),
        plot_prefix: args.plot.clone(),
    };
    let o = crate::stream::bench_stream(&command)?;
    print_output(out, &o.summary, &o.files)
}

/// Runs `bench compare`.
pub fn run_compare_args(args: &CompareArgs, out: &mut dyn std::io::Write) -> Result<(), BenchError> {
    let o = crate::compare::bench_compare(&args.to_command()?)?;
    print_output(out, &o.markdown, &o.files)
}
