//! `bench mountstorm`: N clients mount an export and make their first call at once (Banks 2007,
//! "Mountstorm": hundreds of cluster nodes mounting within seconds at job start, which a
//! single-threaded mountd and a badly hashed per-client table turned into timeouts).
//!
//! Each client is its own [`NfsClient`] from its own source address (127.1.x.y by default),
//! so the server sees N distinct hosts: it MOUNTs the export (a TCP connection to the MOUNT
//! service), opens its NFS connection, asks FSINFO (what every client does at mount) and then
//! makes its first GETATTR of the root. The time of a client is from when it starts (after
//! waiting for a concurrency slot, if `--concurrency` limits them) to its GETATTR's answer;
//! the storm's time is from the first start to the last success.
//!
//! Failures are counted by cause (the client's sentence, with the client's own address
//! replaced by `<client>` so 2000 identical refusals are one line). Each client closes its
//! connection after its GETATTR unless asked to keep them all open until the end (what a real
//! cluster does; needs one file descriptor per client, so the soft RLIMIT_NOFILE is raised to
//! the hard limit first).

use crate::error::BenchError;
use crate::load::chart::{Series, Style, XyChart};
use crate::load::clients::{
    error_kind_for, raise_nofile_limit, runtime, source_addr, NofileLimit, CLIENTS_MAX,
};
use crate::load::Meter;
use crate::machine::{describe_machine, MachineInfo};
use crate::report::{save_json, TargetInfo};
use crate::stats::{duration_ns, LatencyRecorder, LatencySummary};
use crate::units::format_ns;
use eagernfs_client::{MountOptions, NfsClient, NfsOps};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Schema of `bench mountstorm` reports.
pub const MOUNTSTORM_SCHEMA: &str = "eagernfs-bench/mountstorm/v1";

/// The configuration of a storm.
#[derive(Debug, Clone, PartialEq)]
pub struct MountstormConfig {
    /// The server's NFS address (`HOST:PORT`).
    pub server: SocketAddr,
    /// The export to mount.
    pub export: String,
    /// Name in reports (default `HOST:PORT EXPORT`).
    pub label: Option<String>,
    /// Clients (default 2000).
    pub clients: u32,
    /// Clients mounting at the same time; `None`: all at once.
    pub concurrency: Option<u32>,
    /// Give clients distinct 127.1.x.y source addresses (off: the system's choice).
    pub distinct_source_addrs: bool,
    /// Mount options of every client (`mountport=` for ganesha, `timeo=`, `retrans=`, ...).
    /// Clients are always soft: a storm must end even when the server never answers.
    pub options: MountOptions,
    /// Keep every connection open until all clients are done.
    pub keep_open: bool,
    /// Bound on the whole storm; clients still waiting then fail as "not done in time".
    pub max_duration: Duration,
    /// Progress bar.
    pub progress: bool,
}

impl Default for MountstormConfig {
    fn default() -> Self {
        let options =
            MountOptions { hard: false, timeo: Duration::from_secs(10), retrans: 2, ..Default::default() };
        Self {
            server: SocketAddr::from(([127, 0, 0, 1], 2049)),
            export: "/".into(),
            label: None,
            clients: 2000,
            concurrency: None,
            distinct_source_addrs: true,
            options,
            keep_open: false,
            max_duration: Duration::from_secs(300),
            progress: true,
        }
    }
}

impl MountstormConfig {
    /// Checks the bounds.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.clients == 0 || self.clients > CLIENTS_MAX {
            return Err(BenchError::Config(format!("--clients must be 1 to {CLIENTS_MAX}")));
        }
        if self.concurrency == Some(0) {
            return Err(BenchError::Config("--concurrency must be at least 1".into()));
        }
        if self.max_duration.is_zero() {
            return Err(BenchError::Config("--max-seconds must be positive".into()));
        }
        if !self.export.starts_with('/') {
            return Err(BenchError::Config(format!("--export {:?} must be an absolute path", self.export)));
        }
        Ok(())
    }
}

/// A storm's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MountstormReport {
    /// Always [`MOUNTSTORM_SCHEMA`].
    pub schema: String,
    /// Version of the tool.
    pub tool_version: String,
    /// Wall-clock start, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// The machine.
    pub machine: MachineInfo,
    /// The server.
    pub target: TargetInfo,
    /// Clients asked for.
    pub clients: u32,
    /// Concurrency bound (`None`: all at once).
    pub concurrency: Option<u32>,
    /// Whether clients had distinct source addresses.
    pub distinct_source_addrs: bool,
    /// Whether connections stayed open until the end.
    pub keep_open: bool,
    /// The client options, as `-o` text.
    pub options: String,
    /// The open-files limit the storm had.
    pub nofile: NofileLimit,
    /// Clients that mounted and got their GETATTR answered.
    pub succeeded: u32,
    /// Clients that did not.
    pub failed: u32,
    /// Failures by cause.
    pub failures: BTreeMap<String, u64>,
    /// First start to last success (`None` when nothing succeeded).
    pub all_succeeded_ns: Option<u64>,
    /// First start to the last client's end, success or failure.
    pub elapsed_ns: u64,
    /// Per-client time of the successful clients, mount to GETATTR answer.
    pub latency: Option<LatencySummary>,
    /// When each successful client finished, from the first start, in increasing order (the
    /// completion curve).
    pub success_times_ns: Vec<u64>,
}

/// Runs a storm.
pub fn run_mountstorm(config: &MountstormConfig) -> Result<MountstormReport, BenchError> {
    config.validate()?;
    let nofile = raise_nofile_limit();
    let started_unix_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let rt = runtime()?;
    let outcomes = rt.block_on(storm(config));
    let mut failures: BTreeMap<String, u64> = BTreeMap::new();
    let mut recorder = LatencyRecorder::new(Duration::from_secs(1));
    let mut success_times_ns = Vec::new();
    let mut elapsed_ns = 0;
    for o in &outcomes {
        elapsed_ns = elapsed_ns.max(o.end_ns);
        match &o.result {
            Ok(()) => {
                recorder.record(o.end_ns.saturating_sub(o.start_ns));
                success_times_ns.push(o.end_ns);
            }
            Err(cause) => *failures.entry(cause.clone()).or_default() += 1,
        }
    }
    success_times_ns.sort_unstable();
    let succeeded = success_times_ns.len() as u32;
    let label = config.label.clone().unwrap_or_else(|| format!("{} {}", config.server, config.export));
    Ok(MountstormReport {
        schema: MOUNTSTORM_SCHEMA.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        started_unix_s,
        machine: describe_machine(),
        target: TargetInfo {
            label,
            location: format!("{} {}", config.server, config.export),
            fs_type: "nfs-wire".into(),
        },
        clients: config.clients,
        concurrency: config.concurrency,
        distinct_source_addrs: config.distinct_source_addrs,
        keep_open: config.keep_open,
        options: config.options.to_string(),
        nofile,
        succeeded,
        failed: config.clients - succeeded,
        failures,
        all_succeeded_ns: success_times_ns.last().copied(),
        elapsed_ns,
        latency: recorder.summary(),
        success_times_ns,
    })
}

struct Outcome {
    start_ns: u64,
    end_ns: u64,
    result: Result<(), String>,
}

async fn storm(config: &MountstormConfig) -> Vec<Outcome> {
    let meter = Meter::start("clients", config.progress);
    meter.phase("mounting", u64::from(config.clients));
    let counter = meter.counter();
    let slots = Arc::new(tokio::sync::Semaphore::new(
        config.concurrency.unwrap_or(config.clients).min(tokio::sync::Semaphore::MAX_PERMITS as u32) as usize,
    ));
    // Keeps clients alive until the end with --keep-open.
    let kept: Arc<std::sync::Mutex<Vec<NfsClient>>> = Arc::default();
    let t0 = Instant::now();
    let deadline = t0 + config.max_duration;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..config.clients {
        let source = if config.distinct_source_addrs { source_addr(1, 0, i).map(IpAddr::V4) } else { None };
        let mut options = config.options.clone();
        options.hard = false;
        options.srcaddr = source.or(options.srcaddr);
        let (server, export) = (config.server, config.export.clone());
        let (slots, kept, counter, keep_open) =
            (Arc::clone(&slots), Arc::clone(&kept), counter.clone(), config.keep_open);
        tasks.spawn(async move {
            let permit = tokio::time::timeout_at(deadline.into(), slots.acquire_owned()).await;
            let start_ns = duration_ns(t0.elapsed());
            let result = match permit {
                Ok(Ok(_permit)) => {
                    let attempt = async {
                        let c = NfsClient::connect_to(server, &export, options).await?;
                        c.getattr(&c.default_cred(), &c.root()).await?;
                        Ok::<_, eagernfs_client::NfsError>(c)
                    };
                    match tokio::time::timeout_at(deadline.into(), attempt).await {
                        Ok(Ok(c)) => {
                            if keep_open {
                                kept.lock().unwrap_or_else(|e| e.into_inner()).push(c);
                            }
                            Ok(())
                        }
                        Ok(Err(e)) => Err(error_kind_for(&e, source)),
                        Err(_) => Err("not done when --max-seconds ran out".to_string()),
                    }
                }
                _ => Err("not started when --max-seconds ran out".to_string()),
            };
            counter.add(1);
            Outcome { start_ns, end_ns: duration_ns(t0.elapsed()), result }
        });
    }
    let mut outcomes = Vec::with_capacity(config.clients as usize);
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(o) => outcomes.push(o),
            Err(e) => outcomes.push(Outcome {
                start_ns: 0,
                end_ns: duration_ns(t0.elapsed()),
                result: Err(format!("client task failed: {e}")),
            }),
        }
    }
    drop(kept);
    outcomes
}

/// The human summary.
pub fn summarize_mountstorm(r: &MountstormReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "bench mountstorm: {} · {} clients{} · {} · {}",
        r.target.label,
        r.clients,
        r.concurrency.map_or_else(|| ", all at once".to_string(), |c| format!(", {c} at a time")),
        if r.distinct_source_addrs { "distinct 127.1.x.y sources" } else { "one source address" },
        if r.keep_open { "connections kept open" } else { "each closes after GETATTR" },
    );
    let _ = writeln!(
        out,
        "  result    {} succeeded, {} failed · all succeeded after {} · storm lasted {}",
        r.succeeded,
        r.failed,
        r.all_succeeded_ns
            .filter(|_| r.failed == 0)
            .map_or_else(|| "n/a (not all did)".into(), |ns| format_ns(ns as f64)),
        format_ns(r.elapsed_ns as f64),
    );
    if let Some(l) = &r.latency {
        let _ = writeln!(
            out,
            "  per client mount+GETATTR: mean {} · p50 {} · p90 {} · p99 {} · max {}",
            format_ns(l.mean_ns),
            format_ns(l.p50_ns as f64),
            format_ns(l.p90_ns as f64),
            format_ns(l.p99_ns as f64),
            format_ns(l.max_ns as f64),
        );
    }
    for (cause, n) in &r.failures {
        let _ = writeln!(out, "  failure   {n} × {cause}");
    }
    if r.nofile.soft < u64::from(r.clients) * 2 {
        let _ = writeln!(
            out,
            "  note      open-files limit {} is below 2 per client: failures may be the client's (EMFILE)",
            r.nofile.soft
        );
    }
    out
}

/// Draws `PREFIX-mounted`: clients done against time since the storm began.
pub fn plot_mountstorm(r: &MountstormReport, prefix: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let points =
        r.success_times_ns.iter().enumerate().map(|(i, &ns)| (ns as f64 / 1e6, (i + 1) as f64)).collect();
    XyChart {
        title: format!("Mount storm: {} clients, {}", r.clients, r.target.label),
        x_desc: "time since the storm began (ms)".into(),
        y_desc: "clients mounted with GETATTR answered".into(),
        series: vec![Series { label: r.target.label.clone(), points, style: Style::Dots }],
    }
    .render(&crate::load::suffixed(prefix, "-mounted"))
}

/// `bench mountstorm` with its outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct MountstormCommand {
    /// The storm.
    pub config: MountstormConfig,
    /// Where to save the JSON report.
    pub json_path: Option<PathBuf>,
    /// Plot path prefix.
    pub plot_prefix: Option<PathBuf>,
}

/// What `bench mountstorm` produced.
#[derive(Debug, Clone)]
pub struct MountstormOutput {
    /// The report.
    pub report: MountstormReport,
    /// The human summary.
    pub summary: String,
    /// Files written.
    pub files: Vec<PathBuf>,
}

/// Runs `bench mountstorm` and writes what was asked for. A plot of a storm where nobody
/// mounted is skipped (there is no curve), not an error: the summary says why.
pub fn bench_mountstorm(command: &MountstormCommand) -> Result<MountstormOutput, BenchError> {
    let report = run_mountstorm(&command.config)?;
    let mut files = Vec::new();
    if let Some(path) = &command.json_path {
        save_json(&report, path)?;
        files.push(path.clone());
    }
    if let (Some(prefix), true) = (&command.plot_prefix, report.succeeded > 0) {
        files.extend(plot_mountstorm(&report, prefix)?);
    }
    Ok(MountstormOutput { summary: summarize_mountstorm(&report), report, files })
}
