//! `bench compare`: the same workloads against several servers, one Markdown ratio table.
//!
//! For each target (`NAME=URL`, in order) it runs a sequential WRITE and READ stream, the
//! load generator at a few offered rates and a small mount storm, saving each report as
//! gzip-compressed JSON (`NAME-load.json.gz`, ..., and all of them in `compare.json.gz`): the
//! per-call series in them are most of a result directory's bytes, while `table.md` and the
//! plots, which people read in place, stay uncompressed.
//! The first target is the numerator of every ratio (`eagernfs / ganesha`); with three or more
//! targets there is one table per other target. A workload that fails on one target is
//! `n/a` in the table and its error is listed under it, so one broken server does not hide
//! the others' numbers.
//!
//! Targets run one after the other, never at once, so they do not compete for the CPU. A
//! target may have a restart command (`--restart NAME=COMMAND`, run with `sh -c` before each
//! of its workloads): nfs-ganesha 4.3 wedges after ~24k CREATEs, and a fresh server per
//! workload also keeps one workload's leftovers from slowing the next.

use crate::error::BenchError;
use crate::load::chart::{Series, Style, XyChart};
use crate::load::clients::SourceAddrs;
use crate::load::{plot_load, run_load, suffixed, LoadConfig, LoadReport, Schedule};
use crate::machine::{describe_machine, MachineInfo};
use crate::mountstorm::{run_mountstorm, MountstormConfig, MountstormReport};
use crate::report::save_json;
use crate::stream::{plot_stream, run_stream, Direction, StreamConfig, StreamReport};
use crate::table::{Better, RatioTable};
use crate::units::format_bytes;
use eagernfs_client::NfsUrl;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Schema of `bench compare` reports.
pub const COMPARE_SCHEMA: &str = "eagernfs-bench/compare/v1";

/// A server to measure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompareTarget {
    /// Column name (`eagernfs-mem`, `ganesha-vfs`).
    pub name: String,
    /// `nfs://host:port/export?mountport=...`.
    pub url: String,
}

/// What `bench compare` runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareCommand {
    /// The servers; the first is the numerator.
    pub targets: Vec<CompareTarget>,
    /// Restart command per target name.
    pub restarts: BTreeMap<String, String>,
    /// Stream size.
    pub stream_size_bytes: u64,
    /// Stream RPC size.
    pub stream_rpc_size_bytes: u32,
    /// Stream RPCs in flight.
    pub stream_in_flight: u32,
    /// Offered rates of the load workload.
    pub load_rates: Vec<f64>,
    /// Virtual clients of the load workload.
    pub load_clients: u32,
    /// Length of a load step.
    pub load_step: Duration,
    /// Mount storm clients (0: skipped).
    pub mountstorm_clients: u32,
    /// Where reports, plots and `table.md` go.
    pub out_dir: PathBuf,
    /// Progress bars.
    pub progress: bool,
}

impl CompareCommand {
    /// Checks the bounds (each workload checks its own when it runs).
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.targets.len() < 2 {
            return Err(BenchError::Config("bench compare needs at least two --target NAME=URL".into()));
        }
        let mut names: Vec<&str> = self.targets.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return Err(BenchError::Config("--target names must differ".into()));
        }
        if let Some(name) = self.restarts.keys().find(|n| !names.contains(&n.as_str())) {
            return Err(BenchError::Config(format!("--restart {name}=...: no --target of that name")));
        }
        for t in &self.targets {
            t.url.parse::<NfsUrl>().map_err(|e| BenchError::Config(format!("--target {}: {e}", t.name)))?;
            if t.name.contains(['/', '|']) {
                return Err(BenchError::Config(format!("--target name {:?} may not contain / or |", t.name)));
            }
        }
        Ok(())
    }
}

/// Everything measured on one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetResults {
    /// The target.
    pub target: CompareTarget,
    /// Sequential WRITE stream.
    pub stream_write: Option<StreamReport>,
    /// Sequential READ stream.
    pub stream_read: Option<StreamReport>,
    /// Load at the offered rates.
    pub load: Option<LoadReport>,
    /// Mount storm.
    pub mountstorm: Option<MountstormReport>,
    /// Workloads that failed, with why.
    pub errors: BTreeMap<String, String>,
}

/// A `bench compare` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    /// Always [`COMPARE_SCHEMA`].
    pub schema: String,
    /// Version of the tool.
    pub tool_version: String,
    /// Wall-clock start, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// The machine.
    pub machine: MachineInfo,
    /// Per target, in order.
    pub targets: Vec<TargetResults>,
}

/// What `bench compare` produced.
#[derive(Debug, Clone)]
pub struct CompareOutput {
    /// The report.
    pub report: CompareReport,
    /// The tables (also in `table.md`).
    pub markdown: String,
    /// Files written.
    pub files: Vec<PathBuf>,
}

fn restart(command: &CompareCommand, name: &str) -> Result<(), String> {
    let Some(cmd) = command.restarts.get(name) else { return Ok(()) };
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("restart command {cmd:?}: {e}"))?;
    if !status.success() {
        return Err(format!("restart command {cmd:?} failed ({status})"));
    }
    Ok(())
}

/// The mount storm's server, export and options, from a target URL.
fn storm_config(url: &str, clients: u32, progress: bool) -> Result<MountstormConfig, String> {
    let u: NfsUrl = url.parse().map_err(|e| format!("{e}"))?;
    let port = u.nfs_port().unwrap_or(eagernfs_proto::nfs3::NFS_PORT);
    let server = std::net::ToSocketAddrs::to_socket_addrs(&u.host_port(port))
        .map_err(|e| format!("{}: {e}", u.host))?
        .next()
        .ok_or_else(|| format!("{} has no address", u.host))?;
    let mut options = u.options.clone();
    options.hard = false;
    options.timeo = options.timeo.min(Duration::from_secs(10));
    Ok(MountstormConfig {
        server,
        export: u.export.clone().unwrap_or_else(|| u.path.clone()),
        label: None,
        clients,
        concurrency: None,
        distinct_source_addrs: server.ip().is_loopback(),
        options,
        keep_open: false,
        max_duration: Duration::from_secs(120),
        progress,
    })
}

fn log(message: &str) {
    eprintln!("bench compare: {message}");
}

/// Runs every workload against every target, saves the reports and plots, and returns the
/// tables.
pub fn bench_compare(command: &CompareCommand) -> Result<CompareOutput, BenchError> {
    command.validate()?;
    std::fs::create_dir_all(&command.out_dir).map_err(|e| BenchError::io("create", &command.out_dir, e))?;
    let started_unix_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut files = Vec::new();
    let mut results = Vec::new();
    for target in &command.targets {
        let name = &target.name;
        let path = |what: &str| command.out_dir.join(format!("{name}-{what}"));
        let mut r = TargetResults {
            target: target.clone(),
            stream_write: None,
            stream_read: None,
            load: None,
            mountstorm: None,
            errors: BTreeMap::new(),
        };
        for direction in [Direction::Write, Direction::Read] {
            let what = match direction {
                Direction::Write => "stream-write",
                Direction::Read => "stream-read",
            };
            log(&format!("{name}: {what}"));
            let config = StreamConfig {
                url: target.url.clone(),
                label: Some(name.clone()),
                direction,
                size_bytes: command.stream_size_bytes,
                rpc_size_bytes: command.stream_rpc_size_bytes,
                in_flight: command.stream_in_flight,
                progress: command.progress,
                ..StreamConfig::default()
            };
            let outcome =
                restart(command, name).and_then(|()| run_stream(&config).map_err(|e| e.to_string()));
            match outcome {
                Ok(report) => {
                    save_json(&report, &path(&format!("{what}.json.gz")))?;
                    files.push(path(&format!("{what}.json.gz")));
                    files.extend(plot_stream(&report, &path(what))?);
                    match direction {
                        Direction::Write => r.stream_write = Some(report),
                        Direction::Read => r.stream_read = Some(report),
                    }
                }
                Err(e) => {
                    log(&format!("{name}: {what} failed: {e}"));
                    r.errors.insert(what.into(), e);
                }
            }
        }
        if !command.load_rates.is_empty() {
            log(&format!("{name}: load at {:?} ops/s", command.load_rates));
            let config = LoadConfig {
                url: target.url.clone(),
                label: Some(name.clone()),
                client_counts: vec![command.load_clients],
                source_addrs: SourceAddrs::Auto,
                schedule: Schedule::Rates(command.load_rates.clone()),
                step_duration: command.load_step,
                max_duration: command.load_step * (command.load_rates.len() as u32 + 1),
                progress: command.progress,
                ..LoadConfig::default()
            };
            match restart(command, name).and_then(|()| run_load(&config).map_err(|e| e.to_string())) {
                Ok(report) => {
                    save_json(&report, &path("load.json.gz"))?;
                    files.push(path("load.json.gz"));
                    files.extend(plot_load(&report, &path("load"))?);
                    r.load = Some(report);
                }
                Err(e) => {
                    log(&format!("{name}: load failed: {e}"));
                    r.errors.insert("load".into(), e);
                }
            }
        }
        if command.mountstorm_clients > 0 {
            log(&format!("{name}: mount storm of {} clients", command.mountstorm_clients));
            let outcome = restart(command, name)
                .and_then(|()| storm_config(&target.url, command.mountstorm_clients, command.progress))
                .and_then(|mut c| {
                    c.label = Some(name.clone());
                    run_mountstorm(&c).map_err(|e| e.to_string())
                });
            match outcome {
                Ok(report) => {
                    save_json(&report, &path("mountstorm.json.gz"))?;
                    files.push(path("mountstorm.json.gz"));
                    r.mountstorm = Some(report);
                }
                Err(e) => {
                    log(&format!("{name}: mount storm failed: {e}"));
                    r.errors.insert("mountstorm".into(), e);
                }
            }
        }
        results.push(r);
    }
    let report = CompareReport {
        schema: COMPARE_SCHEMA.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        started_unix_s,
        machine: describe_machine(),
        targets: results,
    };
    let json = command.out_dir.join("compare.json.gz");
    save_json(&report, &json)?;
    files.push(json);
    files.extend(plot_compare(&report, &command.out_dir)?);
    let markdown = compare_markdown(&report, command);
    let table = command.out_dir.join("table.md");
    std::fs::write(&table, &markdown).map_err(|e| BenchError::io("write", &table, e))?;
    files.push(table);
    Ok(CompareOutput { report, markdown, files })
}

/// One ratio table per target after the first: first / that target.
pub fn compare_markdown(report: &CompareReport, command: &CompareCommand) -> String {
    let mut out = String::new();
    let Some((first, others)) = report.targets.split_first() else { return out };
    for other in others {
        let mut t = RatioTable::new(
            format!("{} vs {}", first.target.name, other.target.name),
            &first.target.name,
            &other.target.name,
        );
        let both = |f: &dyn Fn(&TargetResults) -> Option<f64>| (f(first), f(other));
        let stream = format!(
            "{}, {} RPCs, {} in flight",
            format_bytes(command.stream_size_bytes),
            format_bytes(u64::from(command.stream_rpc_size_bytes)),
            command.stream_in_flight
        );
        let (a, b) = both(&|r| r.stream_write.as_ref()?.mb_per_s_committed);
        t.push(format!("stream WRITE {stream}: MB/s incl. COMMIT"), "MB/s", a, b, Better::Higher);
        let (a, b) = both(&|r| r.stream_read.as_ref()?.mb_per_s);
        t.push(format!("stream READ {stream}: MB/s"), "MB/s", a, b, Better::Higher);
        let (a, b) = both(&|r| Some(r.stream_write.as_ref()?.completed.out_of_order_fraction * 100.0));
        t.push("stream WRITE: replies out of order", "%", a, b, Better::Lower);
        let (a, b) = both(&|r| Some(r.stream_read.as_ref()?.completed.out_of_order_fraction * 100.0));
        t.push("stream READ: replies out of order", "%", a, b, Better::Lower);
        for (i, rate) in command.load_rates.iter().enumerate() {
            let step = |r: &TargetResults| r.load.as_ref().and_then(|l| l.steps.get(i)).cloned();
            let label = format!("load SFS mix, {} clients, offered {rate:.0}/s", command.load_clients);
            let (a, b) = both(&|r| step(r)?.rate.achieved_ops_per_s);
            t.push(format!("{label}: achieved"), "ops/s", a, b, Better::Higher);
            let (a, b) = both(&|r| Some(step(r)?.latency?.p50_ns as f64));
            t.push(format!("{label}: p50 latency"), "ns", a, b, Better::Lower);
            let (a, b) = both(&|r| Some(step(r)?.latency?.p99_ns as f64));
            t.push(format!("{label}: p99 latency"), "ns", a, b, Better::Lower);
            let (a, b) = both(&|r| Some(step(r)?.errors as f64));
            t.push(format!("{label}: errors"), "calls", a, b, Better::Lower);
        }
        if command.mountstorm_clients > 0 {
            let n = command.mountstorm_clients;
            let storm = |r: &TargetResults| r.mountstorm.clone();
            let (a, b) = both(&|r| {
                let s = storm(r)?;
                // "All mounted" only means something when all did.
                Some(s.all_succeeded_ns.filter(|_| s.failed == 0)? as f64)
            });
            t.push(format!("mount storm, {n} clients: all mounted after"), "ns", a, b, Better::Lower);
            let (a, b) = both(&|r| Some(storm(r)?.latency?.p99_ns as f64));
            t.push(format!("mount storm, {n} clients: p99 mount+GETATTR"), "ns", a, b, Better::Lower);
            let (a, b) = both(&|r| Some(f64::from(storm(r)?.failed)));
            t.push(format!("mount storm, {n} clients: failed"), "clients", a, b, Better::Lower);
        }
        out.push_str(&t.to_markdown());
        out.push('\n');
    }
    for r in &report.targets {
        for (workload, e) in &r.errors {
            let _ = writeln!(out, "- {} {workload} failed: {e}", r.target.name);
        }
    }
    out
}

/// Charts with every target on one chart: `callrate` (p99 latency against achieved ops/s)
/// and `mountstorm` (clients mounted against time).
pub fn plot_compare(report: &CompareReport, dir: &std::path::Path) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = Vec::new();
    let series: Vec<Series> = report
        .targets
        .iter()
        .filter_map(|r| {
            let load = r.load.as_ref()?;
            let points = load
                .steps
                .iter()
                .filter_map(|s| Some((s.rate.achieved_ops_per_s?, s.latency.as_ref()?.p99_ns as f64 / 1e6)))
                .collect();
            Some(Series { label: r.target.name.clone(), points, style: Style::LineWithMarkers })
        })
        .collect();
    if series.iter().any(|s| !s.points.is_empty()) {
        let chart = XyChart {
            title: "Call rate: p99 latency vs achieved throughput (SFS mix)".into(),
            x_desc: "achieved ops/s".into(),
            y_desc: "p99 latency from intended send (ms)".into(),
            series,
        };
        files.extend(chart.render(&suffixed(&dir.join("compare"), "-callrate"))?);
    }
    let series: Vec<Series> = report
        .targets
        .iter()
        .filter_map(|r| {
            let s = r.mountstorm.as_ref()?;
            let points = s
                .success_times_ns
                .iter()
                .enumerate()
                .map(|(i, &ns)| (ns as f64 / 1e6, (i + 1) as f64))
                .collect();
            Some(Series { label: r.target.name.clone(), points, style: Style::Dots })
        })
        .collect();
    if series.iter().any(|s| !s.points.is_empty()) {
        let chart = XyChart {
            title: "Mount storm: clients mounted with GETATTR answered".into(),
            x_desc: "time since the storm began (ms)".into(),
            y_desc: "clients".into(),
            series,
        };
        files.extend(chart.render(&suffixed(&dir.join("compare"), "-mountstorm"))?);
    }
    Ok(files)
}
