//! `bench load`: an SFS-style call-rate generator (Banks 2007, "call rate test").
//!
//! N virtual clients, each its own [`NfsClient`] (its own MOUNT and TCP connection) from its
//! own 127.0.x.y source address, call a weighted mix of NFSv3 procedures ([`mix`]) over a
//! prepared file set ([`fileset`]). A run is a series of steps; each step has a client count
//! and either an offered rate or a closed loop:
//!
//! - **Open loop** (`--rate`, `--rates`, `--ramp`): every client has its own arrival process
//!   at rate/N, Poisson (exponential gaps) or evenly spaced. Each call's latency is measured
//!   from its *intended* send time, not from when it was actually sent: when the server (or
//!   the generator's per-client cap on calls in flight) holds calls back, the wait counts, so
//!   a saturated server shows as rising latency instead of being hidden by a generator that
//!   politely slowed down ("coordinated omission"). Calls that started more than 2 ms late
//!   are counted (`late_starts`): many of them mean the generator, not the server, was short.
//!   tokio's timer wakes on whole milliseconds, so a worker sleeps with it only until 2 ms
//!   before its call and the step's `pacer` wakes it at the intended time, within tens of
//!   µs (the pacer sleeps on a high-resolution `timerfd` until shortly before, then spins
//!   the last stretch, so a low rate costs little CPU). How late each call actually started
//!   is `send_lag`;
//!   `service_latency` (from the actual send) is reported beside the latency too.
//! - **Ramp**: offered rates `start, start×factor, …` until the achieved rate falls below
//!   `saturation` × offered (the server is saturated) or `max` is passed: Banks's curve of
//!   latency against achieved throughput.
//! - **Closed loop** (`--closed-loop K`): each client keeps K calls in flight, as fast as the
//!   server answers: the most a given number of clients can get, for throughput vs clients.
//!
//! A step ends after `step_duration` or `step_ops_max` calls, whichever comes first, then
//! waits for its calls to finish. The achieved rate is the calls answered (successfully or
//! with an error) divided by the time from the step's start to its last answer.
//!
//! # Layout
//! - this file: [`LoadConfig`] → [`run_load`] → [`LoadReport`]; the step runner.
//! - [`mix`]: operations and weights. [`fileset`]: the files the operations use.
//! - [`clients`]: runtime, source addresses, RLIMIT_NOFILE, error kinds (shared with
//!   `mountstorm` and `stream`). [`chart`]: XY charts. `meter`: the progress bar.

pub mod chart;
pub mod clients;
pub mod fileset;
mod meter;
pub mod mix;
mod pacer;
mod v4;

pub(crate) use meter::Meter;

use crate::error::BenchError;
use crate::machine::{describe_machine, MachineInfo};
use crate::report::{save_json, OpStats, RatePoint, StopReason, TargetInfo};
use crate::stats::{duration_ns, LatencyRecorder, LatencySummary};
use crate::units::{format_ns, ops_per_s};
use bytes::Bytes;
use chart::{Series, Style, XyChart};
use clients::{error_kind, raise_nofile_limit, runtime, source_addr, NofileLimit, SourceAddrs, CLIENTS_MAX};
use eagernfs_client::{Cred, NfsClient, NfsError, NfsOps, NfsUrl};
use eagernfs_proto::nfs3::*;
use fileset::{ensure_dir, FileSet, FileSetShape};
use mix::{LoadOp, OpMix};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Schema of `bench load` reports.
pub const LOAD_SCHEMA: &str = "eagernfs-bench/load/v1";

/// A call that starts this much after its intended time counts as a late start: the
/// generator fell behind (every worker of the client busy, or no CPU to spare). The pacer
/// sends within tens of µs when it keeps up; the bound stays 2 ms so that counts compare
/// with reports of the earlier, millisecond-timer generator.
const LATE_START: Duration = Duration::from_millis(2);

/// How calls arrive in an open-loop step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Exponentially distributed gaps: many independent users, as SFS models them.
    Poisson,
    /// Evenly spaced calls.
    Fixed,
}

/// What offered load the steps apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// One step per offered rate (calls per second, all clients together).
    Rates(Vec<f64>),
    /// Offered rates start, start×factor, … up to `max`, stopping at saturation.
    Ramp {
        /// First offered rate.
        start: f64,
        /// Growth per step (> 1).
        factor: f64,
        /// Highest offered rate.
        max: f64,
        /// Saturated when achieved < saturation × offered (0 < saturation ≤ 1).
        saturation: f64,
    },
    /// No offered rate: each client keeps `outstanding` calls in flight.
    ClosedLoop {
        /// Calls in flight per client.
        outstanding: u32,
    },
}

/// The configuration of one `bench load` run.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// The server and directory: `nfs://host[:port]/export/dir?options`.
    pub url: String,
    /// Name of the target in reports (default: the URL).
    pub label: Option<String>,
    /// Client counts to run the schedule with, in order (default `[16]`).
    pub client_counts: Vec<u32>,
    /// How clients choose their source addresses.
    pub source_addrs: SourceAddrs,
    /// The operation mix.
    pub mix: OpMix,
    /// Arrival process of open-loop steps.
    pub arrivals: Arrivals,
    /// The offered load.
    pub schedule: Schedule,
    /// The file set.
    pub fileset: FileSetShape,
    /// Bytes per READ and WRITE.
    pub io_size_bytes: u32,
    /// Length of a step.
    pub step_duration: Duration,
    /// Most calls in one step.
    pub step_ops_max: u64,
    /// Bound on all steps together (preparation not included).
    pub max_duration: Duration,
    /// Bound on calls over all steps.
    pub max_ops: u64,
    /// Most calls one client has in flight in an open-loop step; more wait (and their wait
    /// counts in their latency).
    pub outstanding_max: u32,
    /// Seed of the operation choices and arrival gaps.
    pub seed: u64,
    /// Latencies above this are outliers in the "without outliers" mean.
    pub outlier_threshold: Duration,
    /// Draw a progress bar on a terminal.
    pub progress: bool,
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            label: None,
            client_counts: vec![16],
            source_addrs: SourceAddrs::Auto,
            mix: OpMix::sfs3(),
            arrivals: Arrivals::Poisson,
            schedule: Schedule::Ramp { start: 500.0, factor: 1.5, max: 1e6, saturation: 0.9 },
            fileset: FileSetShape::default(),
            io_size_bytes: 8192,
            step_duration: Duration::from_secs(5),
            step_ops_max: 5_000_000,
            max_duration: Duration::from_secs(120),
            max_ops: 50_000_000,
            outstanding_max: 64,
            seed: 1,
            outlier_threshold: Duration::from_millis(10),
            progress: true,
        }
    }
}

/// Most steps a ramp takes (500 × 1.5^40 is far past any server).
const RAMP_STEPS_MAX: usize = 40;

impl LoadConfig {
    /// Checks every bound; the message names the flag.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Config(m));
        if self.client_counts.is_empty() || self.client_counts.iter().any(|&n| n == 0 || n > CLIENTS_MAX) {
            return bad(format!("--clients: each count must be 1 to {CLIENTS_MAX}"));
        }
        self.mix.validate().map_err(|m| BenchError::Config(format!("--mix: {m}")))?;
        self.fileset.validate().map_err(|m| BenchError::Config(format!("file set: {m}")))?;
        if !(512..=(1 << 20)).contains(&self.io_size_bytes) {
            return bad("--io-size must be 512 B to 1 MiB".into());
        }
        if u64::from(self.io_size_bytes) > self.fileset.file_size_bytes {
            return bad("--io-size must not exceed --file-size".into());
        }
        if self.step_duration.is_zero() || self.max_duration.is_zero() {
            return bad("--step-seconds and --max-seconds must be positive".into());
        }
        if self.step_ops_max == 0 || self.max_ops == 0 {
            return bad("--step-ops and --max-ops must be positive".into());
        }
        if self.outstanding_max == 0 || self.outstanding_max > 4096 {
            return bad("--outstanding must be 1 to 4096".into());
        }
        let rate_ok = |r: f64| r.is_finite() && r > 0.0 && r <= 1e8;
        match &self.schedule {
            Schedule::Rates(rates) if rates.is_empty() || !rates.iter().all(|&r| rate_ok(r)) => {
                bad("--rate/--rates: rates must be positive (calls per second, at most 1e8)".into())
            }
            Schedule::Ramp { start, factor, max, saturation }
                if !(rate_ok(*start)
                    && rate_ok(*max)
                    && start <= max
                    && *factor > 1.0
                    && factor.is_finite()
                    && *saturation > 0.0
                    && *saturation <= 1.0) =>
            {
                bad("--ramp START:FACTOR:MAX needs 0 < START <= MAX, FACTOR > 1; --saturation in (0, 1]"
                    .into())
            }
            Schedule::ClosedLoop { outstanding } if *outstanding == 0 || *outstanding > 4096 => {
                bad("--closed-loop K needs 1 <= K <= 4096".into())
            }
            _ => Ok(()),
        }
    }
}

/// The settings of a run, echoed into the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSettings {
    /// Client counts, in the order they ran.
    pub client_counts: Vec<u32>,
    /// Whether clients had distinct source addresses.
    pub distinct_source_addrs: bool,
    /// The mix as `OP=WEIGHT,...`.
    pub mix: String,
    /// Arrival process.
    pub arrivals: Arrivals,
    /// Offered load.
    pub schedule: Schedule,
    /// File set shape.
    pub fileset: FileSetShape,
    /// Bytes per READ and WRITE.
    pub io_size_bytes: u32,
    /// Step length bound.
    pub step_seconds: f64,
    /// Step call bound.
    pub step_ops_max: u64,
    /// Whole-run bounds.
    pub max_seconds: f64,
    /// Whole-run call bound.
    pub max_ops: u64,
    /// Per-client in-flight cap of open-loop steps.
    pub outstanding_max: u32,
    /// PRNG seed.
    pub seed: u64,
    /// The open-files limit the run had.
    pub nofile: NofileLimit,
}

/// Why a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepEnd {
    /// Its duration passed.
    Duration,
    /// It issued its call bound (`step_ops_max`, or what was left of `max_ops`).
    Ops,
    /// The run's time bound ended it early.
    RunDuration,
}

/// One step: its rate point (clients, offered, achieved, per operation) and totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadStep {
    /// Clients, offered and achieved rate, calls per operation.
    #[serde(flatten)]
    pub rate: RatePoint,
    /// Calls in flight per client (closed loop only).
    pub closed_loop_outstanding: Option<u32>,
    /// Calls issued; equals `completed_ops` (every call is waited for).
    pub issued_ops: u64,
    /// Calls that failed, all causes.
    pub errors: u64,
    /// Calls that started more than 2 ms after their intended time (open loop).
    pub late_starts: u64,
    /// Latency over all operations, from intended send time to answer.
    pub latency: Option<LatencySummary>,
    /// Latency over all operations, from the actual send to the answer (what the server and
    /// network took, without the generator's own delays).
    pub service_latency: Option<LatencySummary>,
    /// How late calls started, from intended send time to the actual send (open loop; the
    /// generator's own share of `latency`). Absent in reports written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_lag: Option<LatencySummary>,
    /// Why it ended.
    pub ended_by: StepEnd,
}

/// A `bench load` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// Always [`LOAD_SCHEMA`].
    pub schema: String,
    /// Version of the tool.
    pub tool_version: String,
    /// Wall-clock start, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// The machine.
    pub machine: MachineInfo,
    /// The server.
    pub target: TargetInfo,
    /// The settings.
    pub settings: LoadSettings,
    /// Time to connect the clients and prepare the file set.
    pub prepare_ns: u64,
    /// Files written while preparing (0: the file set was reused).
    pub fileset_files_written: u64,
    /// The steps, in the order they ran.
    pub steps: Vec<LoadStep>,
    /// Set when a run bound stopped the schedule before its end.
    pub stopped_early: Option<StopReason>,
}

/// Per-operation counters of one client in one step.
#[derive(Debug, Clone)]
struct OpCounters {
    calls: u64,
    errors: BTreeMap<String, u64>,
    latency: LatencyRecorder,
}

/// What one client measured in a step (behind a mutex only its own calls take).
#[derive(Debug)]
struct ClientTally {
    ops: BTreeMap<LoadOp, OpCounters>,
    service: LatencyRecorder,
    send_lag: LatencyRecorder,
    late_starts: u64,
    last_answer: Option<Instant>,
}

impl ClientTally {
    fn new(outlier: Duration) -> Self {
        Self {
            ops: BTreeMap::new(),
            service: LatencyRecorder::new(outlier),
            send_lag: LatencyRecorder::new(outlier),
            late_starts: 0,
            last_answer: None,
        }
    }
}

/// A virtual client.
struct VirtualClient {
    index: u32,
    nfs: NfsClient,
    /// Its private directory for CREATE/REMOVE.
    scratch: NfsFh3,
    /// With `vers=4.1`: its NFSv4.1 session and its directory's NFSv4 handle.
    v4: Option<(v4::V4Client, eagernfs_proto::nfs4::NfsFh4)>,
    /// Names it created and has not removed yet, oldest first.
    created: Mutex<VecDeque<String>>,
    next_name: AtomicU64,
}

/// What every call of a step shares.
struct Shared {
    set: FileSet,
    /// The file set by NFSv4 handle (with `vers=4.1`).
    set4: Option<v4::V4Set>,
    mix: OpMix,
    cred: Cred,
    io_size: u32,
    file_size: u64,
    payload: Bytes,
    run_tag: u64,
}

/// Runs `bench load`.
pub fn run_load(config: &LoadConfig) -> Result<LoadReport, BenchError> {
    config.validate()?;
    let (raw, v41) = split_version(&config.url)?;
    let url: NfsUrl = raw.parse().map_err(|e| BenchError::Config(format!("{}: {e}", config.url)))?;
    let nofile = raise_nofile_limit();
    let rt = runtime()?;
    rt.block_on(run_async(config, url, nofile, v41))
}

/// The URL without a `vers=4.1` (or `version=`, `nfsvers=`) option, and whether it had one:
/// the load is then called over NFSv4.1 ([`v4`]); the file set is still prepared over NFSv3.
fn split_version(raw: &str) -> Result<(String, bool), BenchError> {
    let Some((base, query)) = raw.split_once('?') else { return Ok((raw.to_string(), false)) };
    let mut v41 = false;
    let mut kept = Vec::new();
    for o in query.split('&').filter(|o| !o.is_empty()) {
        match o.split_once('=') {
            Some(("vers" | "version" | "nfsvers", "4.1")) => v41 = true,
            Some(("vers" | "version" | "nfsvers", "3")) => {}
            Some(("vers" | "version" | "nfsvers", v)) => {
                return Err(BenchError::Config(format!(
                    "{raw}: version {v}: bench load speaks vers=3 or vers=4.1"
                )))
            }
            _ => kept.push(o),
        }
    }
    let url = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    Ok((url, v41))
}

fn unix_now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The client options of a virtual client: soft (a call to a dead server fails, so a step's
/// drain ends) with a 10 s timeout, unless the URL asks otherwise.
pub(crate) fn client_url(url: &NfsUrl, raw: &str, source: Option<std::net::IpAddr>) -> NfsUrl {
    let mut u = url.clone();
    let query = raw.split_once('?').map_or("", |(_, q)| q);
    if !query.split(['&', ',']).any(|o| o == "hard") {
        u.options.hard = false;
    }
    if !query.contains("timeo") {
        u.options.timeo = Duration::from_secs(10);
    }
    if source.is_some() {
        u.options.srcaddr = source;
    }
    u
}

async fn connect_clients(
    config: &LoadConfig,
    url: &NfsUrl,
    n: u32,
    distinct: bool,
) -> Result<Vec<NfsClient>, BenchError> {
    use futures::stream::{self, StreamExt};
    let results: Vec<(u32, Result<NfsClient, NfsError>)> = stream::iter(0..n)
        .map(|i| {
            let source = if distinct { source_addr(0, 1, i).map(std::net::IpAddr::V4) } else { None };
            let u = client_url(url, &config.url, source);
            async move { (i, NfsClient::connect_url(&u).await) }
        })
        // Connecting is a mount storm of its own; keep it small, this is not what we measure.
        .buffer_unordered(32)
        .collect()
        .await;
    let mut clients: Vec<Option<NfsClient>> = vec![None; n as usize];
    for (i, r) in results {
        let c = r.map_err(|e| {
            BenchError::Config(format!("virtual client {i} could not mount {}: {e}", config.url))
        })?;
        clients[i as usize] = Some(c);
    }
    Ok(clients.into_iter().flatten().collect())
}

async fn run_async(
    config: &LoadConfig,
    url: NfsUrl,
    nofile: NofileLimit,
    v41: bool,
) -> Result<LoadReport, BenchError> {
    let started_unix_s = unix_now_s();
    let prepare_start = Instant::now();
    let server_ip = crate::load::clients_server_ip(&url).await?;
    let distinct = config.source_addrs.distinct_for(server_ip);
    let n_max = config.client_counts.iter().copied().max().unwrap_or(1);
    let meter = Meter::start("ops", config.progress);
    meter.phase(&format!("connecting {n_max} clients"), u64::from(n_max));
    let nfs = connect_clients(config, &url, n_max, distinct).await?;
    let first = &nfs[0];
    let cred = first.default_cred();
    let fail = |m: String| BenchError::Config(format!("{}: {m}", config.url));
    let (base, _) = first
        .lookup_path(&cred, first.path_inside())
        .await
        .map_err(|e| fail(format!("cannot find the URL's directory: {}", error_kind(&e))))?;
    meter.phase("preparing the file set", 1);
    let set = fileset::prepare(first, &cred, &base, &config.fileset).await.map_err(fail)?;
    let mut clients = Vec::with_capacity(nfs.len());
    // NFSv4.1: a session per client, and the file set found again by NFSv4 handle.
    let mut set4 = None;
    let base4: Vec<String> = url
        .path
        .split('/')
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .chain([config.fileset.dir_name.clone()])
        .collect();
    for (i, c) in nfs.into_iter().enumerate() {
        let scratch = ensure_dir(&c, &cred, &set.root, &format!("client-{i}")).await.map_err(fail)?;
        let v4 = if v41 {
            let source = if distinct { source_addr(0, 1, i as u32).map(std::net::IpAddr::V4) } else { None };
            let addr = std::net::SocketAddr::new(server_ip, url.nfs_port().unwrap_or(NFS_PORT));
            let owner = format!("eagernfs-bench-{:x}-{i}", rand::random::<u32>());
            let slots = config.outstanding_max.min(128);
            let v = v4::V4Client::connect(addr, source, &cred, owner, slots)
                .await
                .map_err(|e| fail(format!("NFSv4.1 session of client {i}: {}", error_kind(&e))))?;
            let names: Vec<&str> = base4.iter().map(String::as_str).collect();
            if set4.is_none() {
                let found =
                    v4::V4Set::find(&v, &names, set.dirs.len(), config.fileset.files_per_dir as usize)
                        .await
                        .map_err(|e| {
                            fail(format!("finding the file set over NFSv4.1: {}", error_kind(&e)))
                        })?;
                set4 = Some(found);
            }
            let mut path = names.clone();
            let dir = format!("client-{i}");
            path.push(&dir);
            let scratch4 = v
                .walk(&path)
                .await
                .map_err(|e| fail(format!("client-{i} over NFSv4.1: {}", error_kind(&e))))?;
            Some((v, scratch4))
        } else {
            None
        };
        clients.push(Arc::new(VirtualClient {
            index: i as u32,
            nfs: c,
            scratch,
            v4,
            created: Mutex::new(VecDeque::new()),
            next_name: AtomicU64::new(0),
        }));
    }
    let files_written = set.files_written;
    let shared = Arc::new(Shared {
        set,
        set4,
        mix: config.mix.clone(),
        cred,
        io_size: config.io_size_bytes,
        file_size: config.fileset.file_size_bytes,
        payload: Bytes::from(vec![0xa5; config.io_size_bytes as usize]),
        run_tag: rand::random::<u32>() as u64,
    });
    let prepare_ns = duration_ns(prepare_start.elapsed());

    let run_start = Instant::now();
    let run_deadline = run_start + config.max_duration;
    let mut ops_left = config.max_ops;
    let mut steps = Vec::new();
    let mut stopped_early = None;
    let mut seed = config.seed;
    'counts: for &n in &config.client_counts {
        let active = &clients[..n as usize];
        let mut ramp_rate = match config.schedule {
            Schedule::Ramp { start, .. } => Some(start),
            _ => None,
        };
        let mut rates_iter = match &config.schedule {
            Schedule::Rates(r) => r.clone().into_iter(),
            _ => Vec::new().into_iter(),
        };
        for step_index in 0.. {
            let (offered, outstanding) = match &config.schedule {
                Schedule::Rates(_) => match rates_iter.next() {
                    Some(r) => (Some(r), None),
                    None => break,
                },
                Schedule::Ramp { max, .. } => match ramp_rate {
                    Some(r) if r <= *max && step_index < RAMP_STEPS_MAX => (Some(r), None),
                    _ => break,
                },
                Schedule::ClosedLoop { outstanding } => {
                    if step_index > 0 {
                        break;
                    }
                    (None, Some(*outstanding))
                }
            };
            if Instant::now() >= run_deadline {
                stopped_early = Some(StopReason::MaxDuration);
                break 'counts;
            }
            if ops_left == 0 {
                stopped_early = Some(StopReason::MaxCalls);
                break 'counts;
            }
            let cap = config.step_ops_max.min(ops_left);
            let label = match offered {
                Some(r) => format!("{n} clients, {r:.0} ops/s"),
                None => format!("{n} clients, closed loop"),
            };
            let expected =
                offered.map_or(cap, |r| ((r * config.step_duration.as_secs_f64()) as u64).min(cap));
            meter.phase(&label, expected.max(1));
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let step = run_step(StepPlan {
                clients: active,
                shared: &shared,
                offered,
                outstanding,
                arrivals: config.arrivals,
                duration: config.step_duration,
                run_deadline,
                cap,
                outstanding_max: config.outstanding_max,
                outlier: config.outlier_threshold,
                seed,
                counter: meter.counter(),
            })
            .await;
            ops_left -= step.issued_ops.min(ops_left);
            let saturated = match (&config.schedule, step.rate.achieved_ops_per_s, offered) {
                (Schedule::Ramp { saturation, .. }, Some(achieved), Some(offered)) => {
                    achieved < saturation * offered
                }
                _ => false,
            };
            let ended_by_run = step.ended_by == StepEnd::RunDuration;
            steps.push(step);
            if ended_by_run {
                stopped_early = Some(StopReason::MaxDuration);
                break 'counts;
            }
            if saturated {
                break;
            }
            if let (Schedule::Ramp { factor, .. }, Some(r)) = (&config.schedule, ramp_rate) {
                ramp_rate = Some(r * factor);
            }
        }
    }
    drop(meter);
    cleanup(&clients, &shared).await;
    let label = config.label.clone().unwrap_or_else(|| config.url.clone());
    Ok(LoadReport {
        schema: LOAD_SCHEMA.to_string(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_unix_s,
        machine: describe_machine(),
        target: TargetInfo { label, location: config.url.clone(), fs_type: "nfs-wire".into() },
        settings: LoadSettings {
            client_counts: config.client_counts.clone(),
            distinct_source_addrs: distinct,
            mix: config.mix.to_text(),
            arrivals: config.arrivals,
            schedule: config.schedule.clone(),
            fileset: config.fileset.clone(),
            io_size_bytes: config.io_size_bytes,
            step_seconds: config.step_duration.as_secs_f64(),
            step_ops_max: config.step_ops_max,
            max_seconds: config.max_duration.as_secs_f64(),
            max_ops: config.max_ops,
            outstanding_max: config.outstanding_max,
            seed: config.seed,
            nofile,
        },
        prepare_ns,
        fileset_files_written: files_written,
        steps,
        stopped_early,
    })
}

/// The server's address as the clients will reach it (for the loopback check).
pub(crate) async fn clients_server_ip(url: &NfsUrl) -> Result<std::net::IpAddr, BenchError> {
    let port = url.nfs_port().unwrap_or(NFS_PORT);
    eagernfs_client::mount::resolve(&url.host, port)
        .await
        .map(|a| a.ip())
        .map_err(|e| BenchError::Config(format!("{}: {}", url.host, error_kind(&e))))
}

/// Removes the files the clients created and did not remove, so runs do not pile them up
/// (best effort: a failure here does not change the measurements).
async fn cleanup(clients: &[Arc<VirtualClient>], shared: &Shared) {
    for c in clients {
        let names: Vec<String> = c.created.lock().map(|mut q| q.drain(..).collect()).unwrap_or_default();
        for name in names {
            let _ = c.nfs.remove(&shared.cred, &c.scratch, name.as_bytes()).await;
        }
    }
}

struct StepPlan<'a> {
    clients: &'a [Arc<VirtualClient>],
    shared: &'a Arc<Shared>,
    offered: Option<f64>,
    outstanding: Option<u32>,
    arrivals: Arrivals,
    duration: Duration,
    run_deadline: Instant,
    cap: u64,
    outstanding_max: u32,
    outlier: Duration,
    seed: u64,
    counter: meter::MeterCounter,
}

/// Claims one of the step's `cap` calls; `false` once they are all taken.
fn claim(issued: &AtomicU64, cap: u64) -> bool {
    issued.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < cap).then_some(n + 1)).is_ok()
}

async fn run_step(plan: StepPlan<'_>) -> LoadStep {
    let n = plan.clients.len();
    let start = Instant::now();
    let step_deadline = (start + plan.duration).min(plan.run_deadline);
    let issued = Arc::new(AtomicU64::new(0));
    let tallies: Vec<Arc<Mutex<ClientTally>>> =
        (0..n).map(|_| Arc::new(Mutex::new(ClientTally::new(plan.outlier)))).collect();
    let mut tasks = tokio::task::JoinSet::new();
    // Open loop only: a closed loop sends each call when the previous one is answered.
    let (pacer, pacer_task) = plan.offered.map(|_| pacer::Pacer::start()).unzip();
    for (i, client) in plan.clients.iter().enumerate() {
        let ctx = CallCtx {
            client: Arc::clone(client),
            shared: Arc::clone(plan.shared),
            tally: Arc::clone(&tallies[i]),
            outlier: plan.outlier,
            counter: plan.counter.clone(),
        };
        let issued = Arc::clone(&issued);
        let cap = plan.cap;
        let seed = plan.seed ^ (i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d);
        match (plan.offered, plan.outstanding) {
            (Some(rate), _) => {
                let per_client = rate / n as f64;
                let arrivals = plan.arrivals;
                tasks.spawn(open_loop(
                    ctx,
                    pacer.clone().expect("an open-loop step has a pacer"),
                    per_client,
                    arrivals,
                    start,
                    step_deadline,
                    issued,
                    cap,
                    plan.outstanding_max,
                    seed,
                ));
            }
            (None, outstanding) => {
                for k in 0..outstanding.unwrap_or(1) {
                    let ctx = ctx.clone();
                    let issued = Arc::clone(&issued);
                    let seed = seed.wrapping_add(u64::from(k));
                    tasks.spawn(closed_loop(ctx, step_deadline, issued, cap, seed));
                }
            }
        }
    }
    while tasks.join_next().await.is_some() {}
    drop(pacer_task);
    let issued_ops = issued.load(Ordering::Relaxed);
    let ended_by = if issued_ops >= plan.cap {
        StepEnd::Ops
    } else if step_deadline < start + plan.duration {
        StepEnd::RunDuration
    } else {
        StepEnd::Duration
    };
    summarize_step(&plan, n, start, issued_ops, ended_by, &tallies)
}

fn summarize_step(
    plan: &StepPlan<'_>,
    n: usize,
    start: Instant,
    issued_ops: u64,
    ended_by: StepEnd,
    tallies: &[Arc<Mutex<ClientTally>>],
) -> LoadStep {
    let mut per_op: BTreeMap<LoadOp, OpCounters> = BTreeMap::new();
    let mut late_starts = 0;
    let mut last: Option<Instant> = None;
    let mut service = LatencyRecorder::new(plan.outlier);
    let mut send_lag = LatencyRecorder::new(plan.outlier);
    for t in tallies {
        let t = t.lock().unwrap_or_else(|e| e.into_inner());
        late_starts += t.late_starts;
        service.merge(&t.service);
        send_lag.merge(&t.send_lag);
        last = last.max(t.last_answer);
        for (op, c) in &t.ops {
            let entry = per_op.entry(*op).or_insert_with(|| OpCounters {
                calls: 0,
                errors: BTreeMap::new(),
                latency: LatencyRecorder::new(plan.outlier),
            });
            entry.calls += c.calls;
            for (k, v) in &c.errors {
                *entry.errors.entry(k.clone()).or_default() += v;
            }
            entry.latency.merge(&c.latency);
        }
    }
    let mut all = LatencyRecorder::new(plan.outlier);
    let mut completed_ops = 0;
    let mut errors = 0;
    let mut ops = Vec::new();
    for op in LoadOp::ALL {
        let Some(c) = per_op.get(&op) else { continue };
        all.merge(&c.latency);
        completed_ops += c.calls;
        errors += c.errors.values().sum::<u64>();
        ops.push(OpStats {
            op: op.name().to_string(),
            calls: c.calls,
            errors: c.errors.clone(),
            latency: c.latency.summary(),
        });
    }
    let elapsed_ns = last.map_or(0, |l| duration_ns(l.saturating_duration_since(start)));
    LoadStep {
        rate: RatePoint {
            clients: n as u32,
            offered_ops_per_s: plan.offered,
            elapsed_ns,
            completed_ops,
            achieved_ops_per_s: ops_per_s(completed_ops, elapsed_ns),
            ops,
        },
        closed_loop_outstanding: plan.outstanding.filter(|_| plan.offered.is_none()),
        issued_ops,
        errors,
        late_starts,
        latency: all.summary(),
        service_latency: service.summary(),
        // A closed loop sends each call at the instant it calls its intended time.
        send_lag: plan.offered.and_then(|_| send_lag.summary()),
        ended_by,
    }
}

#[derive(Clone)]
struct CallCtx {
    client: Arc<VirtualClient>,
    shared: Arc<Shared>,
    tally: Arc<Mutex<ClientTally>>,
    outlier: Duration,
    counter: meter::MeterCounter,
}

impl CallCtx {
    /// Makes one call and records it against `intended` (its intended send time).
    async fn call(&self, op: LoadOp, pick: Pick, intended: Instant) {
        let started = Instant::now();
        let (ran, result) = execute(&self.client, &self.shared, op, pick).await;
        let done = Instant::now();
        let latency_ns = duration_ns(done.saturating_duration_since(intended));
        let mut t = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        let lag = started.saturating_duration_since(intended);
        if lag > LATE_START {
            t.late_starts += 1;
        }
        t.send_lag.record(duration_ns(lag));
        t.last_answer = t.last_answer.max(Some(done));
        t.service.record(duration_ns(done.saturating_duration_since(started)));
        let outlier = self.outlier;
        let c = t.ops.entry(ran).or_insert_with(|| OpCounters {
            calls: 0,
            errors: BTreeMap::new(),
            latency: LatencyRecorder::new(outlier),
        });
        c.calls += 1;
        c.latency.record(latency_ns);
        if let Err(e) = result {
            *c.errors.entry(error_kind(&e)).or_default() += 1;
        }
        drop(t);
        self.counter.add(1);
    }
}

/// The random choices of one call, drawn by the (single-threaded) generator so a seed
/// reproduces the sequence of calls each client makes.
#[derive(Debug, Clone, Copy)]
struct Pick {
    dir: usize,
    file: usize,
    block: u64,
}

fn pick(rng: &mut StdRng, shared: &Shared) -> (LoadOp, Pick) {
    let op = shared.mix.pick(rng);
    let dir = rng.gen_range(0..shared.set.dirs.len());
    let file = rng.gen_range(0..shared.set.dirs[dir].files.len());
    let blocks = (shared.file_size / u64::from(shared.io_size)).max(1);
    (op, Pick { dir, file, block: rng.gen_range(0..blocks) })
}

/// One client's arrivals: the intended time of its next call and the random choices, drawn
/// in order from one generator so a seed reproduces the sequence of calls.
struct Arrival {
    rng: StdRng,
    next_s: f64,
    mean_gap_s: f64,
    arrivals: Arrivals,
    /// No more calls this step.
    done: bool,
}

impl Arrival {
    fn gap(&mut self) -> f64 {
        match self.arrivals {
            // Inverse transform of an exponential; 1 - u is in (0, 1], so ln is finite.
            Arrivals::Poisson => -(1.0 - self.rng.gen::<f64>()).ln() * self.mean_gap_s,
            Arrivals::Fixed => self.mean_gap_s,
        }
    }
}

/// Open loop for one client: `outstanding_max` worker tasks take the client's arrivals in
/// order, each waiting (on the step's [`pacer::Pacer`]) until its call's intended time and
/// then making it. When every
/// worker is busy the next call starts late, and its latency still counts from its intended
/// time. (A task per call costs the generator more CPU than the calls it measures.)
#[allow(clippy::too_many_arguments)]
async fn open_loop(
    ctx: CallCtx,
    pacer: pacer::Pacer,
    rate: f64,
    arrivals: Arrivals,
    start: Instant,
    deadline: Instant,
    issued: Arc<AtomicU64>,
    cap: u64,
    outstanding_max: u32,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mean_gap_s = 1.0 / rate;
    // The first arrival is a gap after the start too (Fixed: clients evenly staggered by a
    // random phase, so N clients do not all fire at the same instant).
    let first = match arrivals {
        Arrivals::Poisson => -(1.0 - rng.gen::<f64>()).ln() * mean_gap_s,
        Arrivals::Fixed => rng.gen::<f64>() * mean_gap_s,
    };
    let arrival = Arc::new(Mutex::new(Arrival { rng, next_s: first, mean_gap_s, arrivals, done: false }));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..outstanding_max.max(1) {
        let (ctx, arrival, issued, pacer) =
            (ctx.clone(), Arc::clone(&arrival), Arc::clone(&issued), pacer.clone());
        workers.spawn(async move {
            loop {
                let (intended, op, p) = {
                    let mut a = arrival.lock().unwrap_or_else(|e| e.into_inner());
                    let intended = start + Duration::from_secs_f64(a.next_s);
                    if a.done || intended >= deadline || !claim(&issued, cap) {
                        a.done = true;
                        break;
                    }
                    let (op, p) = pick(&mut a.rng, &ctx.shared);
                    let gap = a.gap();
                    a.next_s += gap;
                    (intended, op, p)
                };
                pacer.sleep_until(intended).await;
                ctx.call(op, p, intended).await;
            }
        });
    }
    while workers.join_next().await.is_some() {}
}

async fn closed_loop(ctx: CallCtx, deadline: Instant, issued: Arc<AtomicU64>, cap: u64, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    while Instant::now() < deadline && claim(&issued, cap) {
        let (op, p) = pick(&mut rng, &ctx.shared);
        ctx.call(op, p, Instant::now()).await;
    }
}

/// Runs `op`; returns the operation that actually ran (a REMOVE with nothing to remove runs
/// as a CREATE) and its outcome.
async fn execute(c: &VirtualClient, s: &Shared, op: LoadOp, p: Pick) -> (LoadOp, Result<(), NfsError>) {
    if let (Some((v, scratch)), Some(set4)) = (&c.v4, &s.set4) {
        return execute_v4(c, v, scratch, set4, s, op, p).await;
    }
    let nfs = &c.nfs;
    let cred = &s.cred;
    let dir = &s.set.dirs[p.dir];
    let file = &dir.files[p.file];
    let offset = p.block * u64::from(s.io_size);
    let result = match op {
        LoadOp::Lookup => nfs.lookup(cred, &dir.fh, format!("f{}", p.file).as_bytes()).await.map(drop),
        LoadOp::Getattr => nfs.getattr(cred, file).await.map(drop),
        LoadOp::Read => nfs.read(cred, file, offset, s.io_size).await.map(drop),
        LoadOp::Write => {
            nfs.write(cred, file, offset, s.payload.clone(), StableHow::Unstable).await.map(drop)
        }
        LoadOp::Commit => nfs.commit(cred, file, 0, 0).await.map(drop),
        LoadOp::Access => nfs
            .access(
                cred,
                file,
                ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_EXECUTE,
            )
            .await
            .map(drop),
        LoadOp::Readdirplus => nfs.readdirplus(cred, &dir.fh, 0, [0; 8], 4096, 32768).await.map(drop),
        LoadOp::Readdir => nfs.readdir(cred, &dir.fh, 0, [0; 8], 8192).await.map(drop),
        LoadOp::Readlink => nfs.readlink(cred, &dir.link).await.map(drop),
        LoadOp::Setattr => {
            nfs.setattr(cred, file, Sattr3 { mode: Some(0o644), ..Default::default() }, None).await.map(drop)
        }
        LoadOp::Fsstat => nfs.fsstat(cred, &nfs.root()).await.map(drop),
        LoadOp::Remove => {
            let name = c.created.lock().ok().and_then(|mut q| q.pop_front());
            match name {
                Some(name) => return (op, nfs.remove(cred, &c.scratch, name.as_bytes()).await.map(drop)),
                None => return (LoadOp::Create, create(c, s).await),
            }
        }
        LoadOp::Create => create(c, s).await,
    };
    (op, result)
}

/// `op` over NFSv4.1, as the COMPOUND a Linux client sends for the same system call.
async fn execute_v4(
    c: &VirtualClient,
    v: &v4::V4Client,
    scratch: &eagernfs_proto::nfs4::NfsFh4,
    set: &v4::V4Set,
    s: &Shared,
    op: LoadOp,
    p: Pick,
) -> (LoadOp, Result<(), NfsError>) {
    use eagernfs_proto::nfs4::*;
    use eagernfs_xdr::Opaque;
    let dir = &set.dirs[p.dir];
    let file = &dir.files[p.file];
    let offset = p.block * u64::from(s.io_size);
    let put = |fh: &NfsFh4| ArgOp::Putfh(Putfh4Args { object: fh.clone() });
    let name = |n: &str| Opaque(Bytes::copy_from_slice(n.as_bytes()));
    let getattr = || ArgOp::Getattr(Getattr4Args { attr_request: v4::basic_attrs() });
    let (ops, cachethis, ran) = match op {
        LoadOp::Lookup => (
            vec![
                put(&dir.fh),
                ArgOp::Lookup(Lookup4Args { objname: name(&format!("f{}", p.file)) }),
                ArgOp::Getfh(()),
                getattr(),
            ],
            false,
            op,
        ),
        LoadOp::Getattr => (vec![put(file), getattr()], false, op),
        LoadOp::Read => (
            vec![
                put(file),
                ArgOp::Read(Read4Args { stateid: Stateid4::ANONYMOUS, offset, count: s.io_size }),
            ],
            false,
            op,
        ),
        LoadOp::Write => (
            vec![
                put(file),
                ArgOp::Write(Write4Args {
                    stateid: Stateid4::ANONYMOUS,
                    offset,
                    stable: StableHow4::Unstable4,
                    data: s.payload.clone(),
                }),
                getattr(),
            ],
            false,
            op,
        ),
        LoadOp::Commit => (vec![put(file), ArgOp::Commit(Commit4Args { offset: 0, count: 0 })], false, op),
        LoadOp::Access => {
            (vec![put(file), ArgOp::Access(Access4Args { access: 0x2f }), getattr()], false, op)
        }
        LoadOp::Readdirplus => (
            vec![
                put(&dir.fh),
                ArgOp::Readdir(Readdir4Args {
                    cookie: 0,
                    cookieverf: [0; 8],
                    dircount: 4096,
                    maxcount: 32768,
                    attr_request: v4::basic_attrs(),
                }),
            ],
            false,
            op,
        ),
        LoadOp::Readdir => (
            vec![
                put(&dir.fh),
                ArgOp::Readdir(Readdir4Args {
                    cookie: 0,
                    cookieverf: [0; 8],
                    dircount: 8192,
                    maxcount: 8192,
                    attr_request: Bitmap4::from_bits(&[FATTR4_FILEID]),
                }),
            ],
            false,
            op,
        ),
        LoadOp::Readlink => (vec![put(&dir.link), ArgOp::Readlink(())], false, op),
        LoadOp::Setattr => {
            let set = FileAttrs { mode: Some(0o644), ..Default::default() };
            (
                vec![
                    put(file),
                    ArgOp::Setattr(Setattr4Args {
                        stateid: Stateid4::ANONYMOUS,
                        obj_attributes: set.to_fattr(),
                    }),
                    getattr(),
                ],
                true,
                op,
            )
        }
        LoadOp::Fsstat => (
            vec![
                put(file),
                ArgOp::Getattr(Getattr4Args { attr_request: Bitmap4::from_bits(&FATTR4_FSSTAT) }),
            ],
            false,
            op,
        ),
        LoadOp::Remove => match c.created.lock().ok().and_then(|mut q| q.pop_front()) {
            Some(n) => {
                (vec![put(scratch), ArgOp::Remove(Remove4Args { target: name(&n) }), getattr()], true, op)
            }
            None => return (LoadOp::Create, create_v4(c, v, scratch, s).await),
        },
        LoadOp::Create => return (op, create_v4(c, v, scratch, s).await),
    };
    (ran, v.ok(ops, cachethis).await.map(drop))
}

/// CREATE over NFSv4.1: OPEN(create) and CLOSE of the open it made, in one COMPOUND.
async fn create_v4(
    c: &VirtualClient,
    v: &v4::V4Client,
    scratch: &eagernfs_proto::nfs4::NfsFh4,
    s: &Shared,
) -> Result<(), NfsError> {
    use eagernfs_proto::nfs4::*;
    use eagernfs_xdr::Opaque;
    let seq = c.next_name.fetch_add(1, Ordering::Relaxed);
    let name = format!("n{:x}-{}-{seq}", s.run_tag, c.index);
    let attrs = FileAttrs { mode: Some(0o644), ..Default::default() }.to_fattr();
    v.ok(
        vec![
            ArgOp::Putfh(Putfh4Args { object: scratch.clone() }),
            ArgOp::Open(Open4Args {
                seqid: 0,
                share_access: OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                share_deny: OPEN4_SHARE_DENY_NONE,
                owner: StateOwner4 { clientid: 0, owner: Opaque::from_static(b"load") },
                openhow: Openflag4::Create(Createhow4::Unchecked(attrs)),
                claim: OpenClaim4::Null(Opaque(Bytes::from(name.clone()))),
            }),
            ArgOp::Getfh(()),
            ArgOp::Close(Close4Args { seqid: 0, open_stateid: Stateid4::CURRENT }),
        ],
        true,
    )
    .await?;
    if let Ok(mut q) = c.created.lock() {
        q.push_back(name);
    }
    Ok(())
}

async fn create(c: &VirtualClient, s: &Shared) -> Result<(), NfsError> {
    let seq = c.next_name.fetch_add(1, Ordering::Relaxed);
    // The run tag keeps names of an interrupted earlier run from colliding with ours.
    let name = format!("n{:x}-{}-{seq}", s.run_tag, c.index);
    let how = Createhow3::Unchecked(Sattr3 { mode: Some(0o644), ..Default::default() });
    c.nfs.create(&s.cred, &c.scratch, name.as_bytes(), how).await?;
    if let Ok(mut q) = c.created.lock() {
        q.push_back(name);
    }
    Ok(())
}

/// The human summary: one line per step.
pub fn summarize_load(report: &LoadReport) -> String {
    let mut out = String::new();
    let s = &report.settings;
    let _ = writeln!(
        out,
        "bench load: {} · mix {} · {:?} arrivals · {} B I/O · {} CPUs",
        report.target.label,
        if s.mix == OpMix::sfs3().to_text() { "SFS 3.0".to_string() } else { s.mix.clone() },
        s.arrivals,
        s.io_size_bytes,
        report.machine.cpus,
    );
    let _ = writeln!(
        out,
        "  file set  {} dirs × {} files × {} B ({} written while preparing, {} to prepare)",
        s.fileset.dirs,
        s.fileset.files_per_dir,
        s.fileset.file_size_bytes,
        report.fileset_files_written,
        format_ns(report.prepare_ns as f64),
    );
    let _ = writeln!(
        out,
        "  {:>7} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6}",
        "clients",
        "offered",
        "achieved",
        "calls",
        "mean",
        "p50",
        "p99",
        "svc p99",
        "lag p99",
        "errors",
        "late"
    );
    for step in &report.steps {
        let r = &step.rate;
        let (mean, p50, p99) =
            step.latency.as_ref().map_or(("n/a".into(), "n/a".into(), "n/a".into()), |l| {
                (format_ns(l.mean_ns), format_ns(l.p50_ns as f64), format_ns(l.p99_ns as f64))
            });
        let offered = match (r.offered_ops_per_s, step.closed_loop_outstanding) {
            (Some(o), _) => format!("{o:.0}/s"),
            (None, Some(k)) => format!("closed×{k}"),
            (None, None) => "closed".into(),
        };
        let _ = writeln!(
            out,
            "  {:>7} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6}",
            r.clients,
            offered,
            r.achieved_ops_per_s.map_or_else(|| "n/a".into(), |a| format!("{a:.0}/s")),
            r.completed_ops,
            mean,
            p50,
            p99,
            step.service_latency.as_ref().map_or_else(|| "n/a".into(), |l| format_ns(l.p99_ns as f64)),
            step.send_lag.as_ref().map_or_else(|| "n/a".into(), |l| format_ns(l.p99_ns as f64)),
            step.errors,
            step.late_starts,
        );
    }
    let mut causes: BTreeMap<String, u64> = BTreeMap::new();
    for step in &report.steps {
        for op in &step.rate.ops {
            for (k, v) in &op.errors {
                *causes.entry(format!("{} {k}", op.op)).or_default() += v;
            }
        }
    }
    for (cause, count) in causes {
        let _ = writeln!(out, "  error     {count} × {cause}");
    }
    if let Some(reason) = report.stopped_early {
        let _ = writeln!(
            out,
            "  stopped early by {}",
            match reason {
                StopReason::MaxDuration => "--max-seconds",
                StopReason::MaxCalls => "--max-ops",
            }
        );
    }
    out
}

/// Draws `PREFIX-callrate` (mean and p99 latency against achieved ops/s, a line per client
/// count: Banks's call-rate curve) and, with several client counts, `PREFIX-clients` (the
/// highest achieved ops/s per client count).
pub fn plot_load(report: &LoadReport, prefix: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = Vec::new();
    let mut series = Vec::new();
    let mut counts: Vec<u32> = report.steps.iter().map(|s| s.rate.clients).collect();
    counts.dedup();
    for &n in &counts {
        let steps: Vec<&LoadStep> = report.steps.iter().filter(|s| s.rate.clients == n).collect();
        let point = |f: fn(&LatencySummary) -> f64| -> Vec<(f64, f64)> {
            steps
                .iter()
                .filter_map(|s| Some((s.rate.achieved_ops_per_s?, f(s.latency.as_ref()?) / 1e6)))
                .collect()
        };
        series.push(Series {
            label: format!("{n} clients, mean"),
            points: point(|l| l.mean_ns),
            style: Style::LineWithMarkers,
        });
        series.push(Series {
            label: format!("{n} clients, p99"),
            points: point(|l| l.p99_ns as f64),
            style: Style::LineWithMarkers,
        });
    }
    let chart = XyChart {
        title: format!("Call rate: latency vs achieved throughput, {}", report.target.label),
        x_desc: "achieved ops/s".into(),
        y_desc: "latency from intended send (ms)".into(),
        series,
    };
    files.extend(chart.render(&suffixed(prefix, "-callrate"))?);
    if counts.len() > 1 {
        let points = counts
            .iter()
            .map(|&n| {
                let best = report
                    .steps
                    .iter()
                    .filter(|s| s.rate.clients == n)
                    .filter_map(|s| s.rate.achieved_ops_per_s)
                    .fold(0.0, f64::max);
                (f64::from(n), best)
            })
            .collect();
        let chart = XyChart {
            title: format!("Throughput vs clients, {}", report.target.label),
            x_desc: "virtual clients".into(),
            y_desc: "highest achieved ops/s".into(),
            series: vec![Series {
                label: report.target.label.clone(),
                points,
                style: Style::LineWithMarkers,
            }],
        };
        files.extend(chart.render(&suffixed(prefix, "-clients"))?);
    }
    Ok(files)
}

pub(crate) fn suffixed(prefix: &Path, suffix: &str) -> PathBuf {
    let mut name = std::ffi::OsString::from(prefix.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

/// `bench load` with its outputs: runs, saves the JSON, draws the plots.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadCommand {
    /// The run.
    pub config: LoadConfig,
    /// Where to save the JSON report.
    pub json_path: Option<PathBuf>,
    /// Plot path prefix.
    pub plot_prefix: Option<PathBuf>,
}

/// What `bench load` produced.
#[derive(Debug, Clone)]
pub struct LoadOutput {
    /// The report.
    pub report: LoadReport,
    /// The human summary.
    pub summary: String,
    /// Files written.
    pub files: Vec<PathBuf>,
}

/// Runs `bench load` and writes what was asked for.
pub fn bench_load(command: &LoadCommand) -> Result<LoadOutput, BenchError> {
    let report = run_load(&command.config)?;
    let mut files = Vec::new();
    if let Some(path) = &command.json_path {
        save_json(&report, path)?;
        files.push(path.clone());
    }
    if let Some(prefix) = &command.plot_prefix {
        files.extend(plot_load(&report, prefix)?);
    }
    Ok(LoadOutput { summary: summarize_load(&report), report, files })
}
