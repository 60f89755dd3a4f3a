//! `bench stream`: a sequential READ or WRITE of one large file with K RPCs in flight, and the
//! order in which its offsets were seen (Rago, Bohra & Ungureanu, *Eager strategies for NFS
//! I/O*, problems 3 and 4: a sequential transfer reaches the server's disk out of order
//! because many client threads send and many server threads execute, which defeats read-ahead
//! and write coalescing).
//!
//! Three orders are recorded:
//! - `sent`: offsets in the order this client handed calls to its RPC layer (sequential by
//!   construction: one issuer keeps K calls in flight, replacing each as it completes);
//! - `completed`: offsets in the order the replies were taken in;
//! - `backend`: offsets in the order the server's backend executed them, from an eagernfs
//!   server started with `serve --trace-io FILE` (`--server-trace FILE`). The server writes
//!   the file when it shuts down, so the tool waits for it to appear (stop the server).
//!   Lines are `R|W <fileid> <offset> <count>`; the last `rpcs` lines of this transfer's kind
//!   and file are its calls (earlier ones belong to earlier runs or to preparing the file).
//!
//! **Out of order**, as [`OffsetOrder::from_offsets`] defines it: an offset is out of order
//! when a higher offset was seen before it (the transfer had already moved past it). The
//! fraction is those offsets over all offsets: `[0, 2, 1, 3]` has one (1 came after 2), 1/4;
//! `[0, 3, 1, 2]` has two, 2/4. It counts every request a sequential-detecting reader (a
//! disk's or a file system's read-ahead) would see as a step backwards.

use crate::error::BenchError;
use crate::load::chart::{Series, Style, XyChart};
use crate::load::clients::{error_kind, runtime};
use crate::load::{client_url, suffixed, Meter};
use crate::machine::{describe_machine, MachineInfo};
use crate::report::{save_json, OffsetOrder, StopReason, TargetInfo};
use crate::stats::{duration_ns, LatencyRecorder, LatencySummary};
use crate::units::{format_bytes, format_ns, format_rate, mb_per_s};
use bytes::Bytes;
use eagernfs_client::{Cred, NfsClient, NfsError, NfsOps, NfsUrl};
use eagernfs_proto::nfs3::{Createhow3, Fattr3, NfsFh3, Nfsstat3, Sattr3, StableHow};
use futures::stream::{FuturesUnordered, StreamExt};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Schema of `bench stream` reports.
pub const STREAM_SCHEMA: &str = "eagernfs-bench/stream/v1";

/// Offsets kept per order: past this the orders are a prefix of the transfer (a 64 GiB
/// stream of 64 KiB calls fits whole).
pub const OFFSETS_KEPT_MAX: usize = 1 << 20;

/// READ or WRITE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Sequential READ of an existing file (created first if missing or short).
    Read,
    /// Sequential UNSTABLE WRITE of a truncated file, then one COMMIT.
    Write,
}

impl Direction {
    fn name(self) -> &'static str {
        match self {
            Direction::Read => "READ",
            Direction::Write => "WRITE",
        }
    }
}

/// How a WRITE stream asks for durability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stability {
    /// UNSTABLE WRITEs, then one COMMIT of the whole file.
    #[default]
    Unstable,
    /// DATA_SYNC WRITEs, no COMMIT.
    DataSync,
    /// FILE_SYNC WRITEs, no COMMIT.
    FileSync,
}

impl Stability {
    fn wire(self) -> StableHow {
        match self {
            Stability::Unstable => StableHow::Unstable,
            Stability::DataSync => StableHow::DataSync,
            Stability::FileSync => StableHow::FileSync,
        }
    }

    /// The name in RFC 1813.
    pub fn name(self) -> &'static str {
        match self {
            Stability::Unstable => "UNSTABLE",
            Stability::DataSync => "DATA_SYNC",
            Stability::FileSync => "FILE_SYNC",
        }
    }
}

/// The configuration of a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamConfig {
    /// The directory: `nfs://host[:port]/export/dir?options`.
    pub url: String,
    /// Name in reports (default: the URL).
    pub label: Option<String>,
    /// READ or WRITE.
    pub direction: Direction,
    /// The file's name in the directory.
    pub file_name: String,
    /// Bytes to transfer.
    pub size_bytes: u64,
    /// Bytes per RPC.
    pub rpc_size_bytes: u32,
    /// RPCs in flight (K).
    pub in_flight: u32,
    /// How WRITEs ask for durability.
    pub stable: Stability,
    /// Bound on the transfer's time.
    pub max_duration: Duration,
    /// Bound on RPCs.
    pub max_rpcs: u64,
    /// The server's `--trace-io` file to read the backend's order from.
    pub server_trace: Option<PathBuf>,
    /// How long to wait for that file to appear.
    pub trace_wait: Duration,
    /// Progress bar.
    pub progress: bool,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            label: None,
            direction: Direction::Read,
            file_name: "eagernfs-stream.dat".into(),
            size_bytes: 256 << 20,
            rpc_size_bytes: 64 << 10,
            in_flight: 16,
            stable: Stability::Unstable,
            max_duration: Duration::from_secs(120),
            max_rpcs: 10_000_000,
            server_trace: None,
            trace_wait: Duration::from_secs(120),
            progress: true,
        }
    }
}

impl StreamConfig {
    /// Checks the bounds.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: &str| Err(BenchError::Config(m.to_string()));
        if self.size_bytes == 0 || self.size_bytes > 1 << 40 {
            return bad("--size must be 1 byte to 1 TiB");
        }
        if !(512..=(1 << 20)).contains(&self.rpc_size_bytes) {
            return bad("--rpc-size must be 512 B to 1 MiB");
        }
        if self.in_flight == 0 || self.in_flight > 1024 {
            return bad("--in-flight must be 1 to 1024");
        }
        if self.max_duration.is_zero() || self.max_rpcs == 0 {
            return bad("--max-seconds and --max-rpcs must be positive");
        }
        if self.file_name.is_empty() || self.file_name.contains('/') || self.file_name == ".." {
            return bad("--file must be a plain file name");
        }
        Ok(())
    }
}

/// A stream's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    /// Always [`STREAM_SCHEMA`].
    pub schema: String,
    /// Version of the tool.
    pub tool_version: String,
    /// Wall-clock start, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// The machine.
    pub machine: MachineInfo,
    /// The server and directory.
    pub target: TargetInfo,
    /// READ or WRITE.
    pub direction: Direction,
    /// Bytes asked for.
    pub size_requested_bytes: u64,
    /// Bytes per RPC.
    pub rpc_size_bytes: u32,
    /// RPCs in flight.
    pub in_flight: u32,
    /// How the WRITEs asked for durability.
    #[serde(default)]
    pub stable: Stability,
    /// Bytes the server answered as already stable (FILE_SYNC or DATA_SYNC):
    /// with an intent journal, UNSTABLE WRITEs are too (early laundering).
    #[serde(default)]
    pub stably_answered_bytes: u64,
    /// The file's fileid (what the server's trace names it by).
    pub fileid: u64,
    /// Time to create, truncate or fill the file before the transfer.
    pub prepare_ns: u64,
    /// Bytes transferred.
    pub bytes: u64,
    /// RPCs made.
    pub rpcs: u64,
    /// Set when a bound stopped the transfer.
    pub stopped_early: Option<StopReason>,
    /// First call to last reply.
    pub transfer_ns: u64,
    /// The closing COMMIT (writes only).
    pub commit_ns: Option<u64>,
    /// Throughput up to the last reply (MB = 10^6 B).
    pub mb_per_s: Option<f64>,
    /// Throughput including the COMMIT (writes only).
    pub mb_per_s_committed: Option<f64>,
    /// Per-RPC latency.
    pub latency: Option<LatencySummary>,
    /// Offsets in sending order.
    pub sent: OffsetOrder,
    /// Offsets in completion order.
    pub completed: OffsetOrder,
    /// Offsets in the backend's execution order, from the server's trace.
    pub backend: Option<OffsetOrder>,
    /// Why `backend` is missing or partial, when it is.
    pub backend_note: Option<String>,
}

/// One line of a server's `--trace-io` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRecord {
    /// `R` (READ) or `W` (WRITE).
    pub write: bool,
    /// The file.
    pub fileid: u64,
    /// Where.
    pub offset: u64,
    /// How many bytes.
    pub count: u64,
}

/// Parses a `--trace-io` file: `R|W <fileid> <offset> <count>` per line. A malformed line is
/// an error naming it (a trace we misread would report a wrong order).
pub fn parse_io_trace(text: &str) -> Result<Vec<TraceRecord>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || format!("line {}: {line:?} is not `R|W FILEID OFFSET COUNT`", n + 1);
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        let [kind, fileid, offset, count] = f.as_slice() else { return Err(bad()) };
        let write = match *kind {
            "R" => false,
            "W" => true,
            _ => return Err(bad()),
        };
        let num = |s: &str| s.parse::<u64>().map_err(|_| bad());
        out.push(TraceRecord { write, fileid: num(fileid)?, offset: num(offset)?, count: num(count)? });
    }
    Ok(out)
}

/// The backend's order of this transfer: the offsets of the last `rpcs` records of `fileid`
/// and `direction` (`None` with a note when the trace holds fewer).
pub fn backend_order(
    records: &[TraceRecord],
    direction: Direction,
    fileid: u64,
    rpcs: usize,
) -> (Option<OffsetOrder>, Option<String>) {
    let write = direction == Direction::Write;
    let ours: Vec<u64> =
        records.iter().filter(|r| r.write == write && r.fileid == fileid).map(|r| r.offset).collect();
    if ours.is_empty() {
        return (None, Some(format!("the trace has no {} of fileid {fileid}", direction.name())));
    }
    let note = (ours.len() < rpcs).then(|| {
        format!("the trace has {} of this file's {} calls, {rpcs} were made", ours.len(), direction.name())
    });
    let start = ours.len().saturating_sub(rpcs);
    let kept: Vec<u64> = ours[start..].iter().copied().take(OFFSETS_KEPT_MAX).collect();
    (Some(OffsetOrder::from_offsets("backend", kept)), note)
}

/// Runs a stream.
pub fn run_stream(config: &StreamConfig) -> Result<StreamReport, BenchError> {
    config.validate()?;
    let url: NfsUrl = config.url.parse().map_err(|e| BenchError::Config(format!("{}: {e}", config.url)))?;
    let started_unix_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let rt = runtime()?;
    let mut report = rt.block_on(transfer(config, &url))?;
    report.started_unix_s = started_unix_s;
    if let Some(path) = &config.server_trace {
        match wait_for_trace(path, config.trace_wait) {
            Ok(text) => match parse_io_trace(&text) {
                Ok(records) => {
                    let (order, note) =
                        backend_order(&records, config.direction, report.fileid, report.rpcs as usize);
                    report.backend = order;
                    report.backend_note = note;
                }
                Err(e) => return Err(BenchError::Report { path: path.clone(), message: e }),
            },
            Err(note) => report.backend_note = Some(note),
        }
    }
    Ok(report)
}

/// Waits for the server's trace: it exists, is not empty, and did not change over 200 ms
/// (the server writes it once, at shutdown; a half-written file must not be read).
fn wait_for_trace(path: &Path, wait: Duration) -> Result<String, String> {
    let deadline = Instant::now() + wait;
    let mut told = false;
    let mut last: Option<String> = None;
    loop {
        match std::fs::read_to_string(path) {
            Ok(text) if !text.is_empty() => {
                if last.as_deref() == Some(text.as_str()) {
                    return Ok(text);
                }
                last = Some(text);
            }
            _ => {
                if !told {
                    eprintln!(
                        "bench stream: waiting up to {:.0} s for the server's trace {} (stop the server to write it)",
                        wait.as_secs_f64(),
                        path.display()
                    );
                    told = true;
                }
            }
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the server's trace {} did not appear within {:.0} s",
                path.display(),
                wait.as_secs_f64()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn fail(url: &str, what: &str, e: NfsError) -> BenchError {
    BenchError::Config(format!("{url}: {what}: {}", error_kind(&e)))
}

async fn prepare(c: &NfsClient, cred: &Cred, config: &StreamConfig) -> Result<(NfsFh3, Fattr3), BenchError> {
    let url = &config.url;
    let (dir, _) = c
        .lookup_path(cred, c.path_inside())
        .await
        .map_err(|e| fail(url, "cannot find the URL's directory", e))?;
    let name = config.file_name.as_bytes();
    let existing = match c.lookup(cred, &dir, name).await {
        Ok(found) => Some(found.object),
        Err(NfsError::Nfs(Nfsstat3::Noent)) => None,
        Err(e) => return Err(fail(url, "LOOKUP of the file", e)),
    };
    let fh = match existing {
        Some(fh) => fh,
        None => {
            let how = Createhow3::Unchecked(Sattr3 { mode: Some(0o644), ..Default::default() });
            let made =
                c.create(cred, &dir, name, how).await.map_err(|e| fail(url, "CREATE of the file", e))?;
            match made.obj {
                Some(fh) => fh,
                None => {
                    c.lookup(cred, &dir, name).await.map_err(|e| fail(url, "LOOKUP of the file", e))?.object
                }
            }
        }
    };
    let attrs = c.getattr(cred, &fh).await.map_err(|e| fail(url, "GETATTR of the file", e))?;
    match config.direction {
        Direction::Write => {
            c.setattr(cred, &fh, Sattr3 { size: Some(0), ..Default::default() }, None)
                .await
                .map_err(|e| fail(url, "truncating the file", e))?;
        }
        Direction::Read if attrs.size < config.size_bytes => {
            // Filled with the same pipelined writes, not measured.
            let chunk = c.wsize().clamp(4096, 1 << 20);
            let data = Bytes::from(vec![0x3c; chunk as usize]);
            let mut pending = FuturesUnordered::new();
            let mut offset = attrs.size;
            while offset < config.size_bytes || !pending.is_empty() {
                while offset < config.size_bytes && pending.len() < 16 {
                    let n = (config.size_bytes - offset).min(u64::from(chunk)) as usize;
                    pending.push(c.write(cred, &fh, offset, data.slice(..n), StableHow::Unstable));
                    offset += n as u64;
                }
                if let Some(r) = pending.next().await {
                    r.map_err(|e| fail(url, "filling the file to read", e))?;
                }
            }
            c.commit(cred, &fh, 0, 0).await.map_err(|e| fail(url, "COMMIT of the filled file", e))?;
        }
        Direction::Read => {}
    }
    Ok((fh, attrs))
}

async fn transfer(config: &StreamConfig, url: &NfsUrl) -> Result<StreamReport, BenchError> {
    let c = NfsClient::connect_url(&client_url(url, &config.url, None))
        .await
        .map_err(|e| fail(&config.url, "mount", e))?;
    let cred = c.default_cred();
    let prepare_start = Instant::now();
    let (fh, attrs) = prepare(&c, &cred, config).await?;
    let prepare_ns = duration_ns(prepare_start.elapsed());

    let rpc = u64::from(config.rpc_size_bytes);
    let total_rpcs = config.size_bytes.div_ceil(rpc).min(config.max_rpcs);
    let meter = Meter::start("RPCs", config.progress);
    meter.phase(&format!("{} {}", config.direction.name(), format_bytes(config.size_bytes)), total_rpcs);
    let counter = meter.counter();
    let payload = Bytes::from(vec![0xc3; config.rpc_size_bytes as usize]);
    let mut latency = LatencyRecorder::new(Duration::from_millis(10));
    let mut sent = Vec::new();
    let mut completed = Vec::new();
    // Bytes the server answered as already stable (FILE_SYNC or DATA_SYNC).
    let stably = std::sync::atomic::AtomicU64::new(0);
    let mut pending = FuturesUnordered::new();
    let start = Instant::now();
    let deadline = start + config.max_duration;
    let mut next_offset = 0u64;
    let mut issued = 0u64;
    let mut bytes = 0u64;
    let mut stopped_early = None;
    let mut last_reply = start;
    loop {
        while pending.len() < config.in_flight as usize && next_offset < config.size_bytes {
            if issued >= config.max_rpcs {
                stopped_early = Some(StopReason::MaxCalls);
                break;
            }
            if Instant::now() >= deadline {
                stopped_early = Some(StopReason::MaxDuration);
                break;
            }
            let offset = next_offset;
            let count = (config.size_bytes - offset).min(rpc) as u32;
            let (c, cred, fh, data) = (&c, &cred, &fh, payload.slice(..count as usize));
            let direction = config.direction;
            let (stable, stably) = (config.stable, &stably);
            pending.push(async move {
                let t = Instant::now();
                let r = match direction {
                    Direction::Read => c.read(cred, fh, offset, count).await.map(|r| u64::from(r.count)),
                    Direction::Write => c.write(cred, fh, offset, data, stable.wire()).await.map(|r| {
                        if r.committed != StableHow::Unstable {
                            stably.fetch_add(u64::from(r.count), std::sync::atomic::Ordering::Relaxed);
                        }
                        u64::from(r.count)
                    }),
                };
                (offset, t, r)
            });
            if sent.len() < OFFSETS_KEPT_MAX {
                sent.push(offset);
            }
            next_offset += u64::from(count);
            issued += 1;
        }
        let Some((offset, t, result)) = pending.next().await else { break };
        let now = Instant::now();
        last_reply = now;
        latency.record(duration_ns(now - t));
        let n = result
            .map_err(|e| fail(&config.url, &format!("{} at offset {offset}", config.direction.name()), e))?;
        bytes += n;
        if completed.len() < OFFSETS_KEPT_MAX {
            completed.push(offset);
        }
        counter.add(1);
    }
    let transfer_ns = duration_ns(last_reply - start);
    drop(pending);
    let commit_ns = match config.direction {
        Direction::Write if config.stable == Stability::Unstable => {
            let t = Instant::now();
            c.commit(&cred, &fh, 0, 0).await.map_err(|e| fail(&config.url, "COMMIT", e))?;
            Some(duration_ns(t.elapsed()))
        }
        _ => None,
    };
    drop(meter);
    Ok(StreamReport {
        schema: STREAM_SCHEMA.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        started_unix_s: 0,
        machine: describe_machine(),
        target: TargetInfo {
            label: config.label.clone().unwrap_or_else(|| config.url.clone()),
            location: config.url.clone(),
            fs_type: "nfs-wire".into(),
        },
        direction: config.direction,
        size_requested_bytes: config.size_bytes,
        rpc_size_bytes: config.rpc_size_bytes,
        in_flight: config.in_flight,
        stable: config.stable,
        stably_answered_bytes: stably.load(std::sync::atomic::Ordering::Relaxed),
        fileid: attrs.fileid,
        prepare_ns,
        bytes,
        rpcs: issued,
        stopped_early,
        transfer_ns,
        commit_ns,
        mb_per_s: mb_per_s(bytes, transfer_ns),
        mb_per_s_committed: commit_ns.and_then(|c| mb_per_s(bytes, transfer_ns + c)),
        latency: latency.summary(),
        sent: OffsetOrder::from_offsets("client-sent", sent),
        completed: OffsetOrder::from_offsets("client-completed", completed),
        backend: None,
        backend_note: None,
    })
}

/// The human summary.
pub fn summarize_stream(r: &StreamReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "bench stream: {}{} {} of {} · {} per RPC · {} in flight · {}",
        r.direction.name(),
        match r.direction {
            Direction::Write => format!(" {}", r.stable.name()),
            Direction::Read => String::new(),
        },
        r.target.label,
        format_bytes(r.bytes),
        format_bytes(u64::from(r.rpc_size_bytes)),
        r.in_flight,
        r.machine.kernel,
    );
    if r.direction == Direction::Write {
        let _ = writeln!(
            out,
            "  stable    {} of {} answered FILE_SYNC/DATA_SYNC by the server",
            format_bytes(r.stably_answered_bytes),
            format_bytes(r.bytes)
        );
    }
    let _ = writeln!(
        out,
        "  MB/s      {} to the last reply{} · {} RPCs in {}{}",
        format_rate(r.mb_per_s),
        r.mb_per_s_committed.map_or(String::new(), |m| format!(" · {} with COMMIT", format_rate(Some(m)))),
        r.rpcs,
        format_ns(r.transfer_ns as f64),
        match r.stopped_early {
            Some(StopReason::MaxDuration) => " (stopped by --max-seconds)",
            Some(StopReason::MaxCalls) => " (stopped by --max-rpcs)",
            None => "",
        },
    );
    if let Some(l) = &r.latency {
        let _ = writeln!(
            out,
            "  latency   mean {} · p50 {} · p99 {} · max {}",
            format_ns(l.mean_ns),
            format_ns(l.p50_ns as f64),
            format_ns(l.p99_ns as f64),
            format_ns(l.max_ns as f64)
        );
    }
    let line = |out: &mut String, name: &str, o: &OffsetOrder| {
        let _ = writeln!(
            out,
            "  order     {name:<17} {} of {} out of order ({:.2}%)",
            o.out_of_order,
            o.offsets.len(),
            o.out_of_order_fraction * 100.0
        );
    };
    line(&mut out, "client sent", &r.sent);
    line(&mut out, "client completed", &r.completed);
    if let Some(b) = &r.backend {
        line(&mut out, "server backend", b);
    }
    if let Some(note) = &r.backend_note {
        let _ = writeln!(out, "  note      {note}");
    }
    out
}

/// Draws `PREFIX-offsets`: offset (MiB) against arrival index, one series per observer.
pub fn plot_stream(r: &StreamReport, prefix: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let series_of = |label: &str, o: &OffsetOrder| Series {
        label: format!("{label} ({:.1}% out of order)", o.out_of_order_fraction * 100.0),
        points: o.offsets.iter().enumerate().map(|(i, &off)| (i as f64, off as f64 / 1048576.0)).collect(),
        style: Style::Dots,
    };
    let mut series = vec![series_of("client sent", &r.sent), series_of("client completed", &r.completed)];
    if let Some(b) = &r.backend {
        series.push(series_of("server backend", b));
    }
    XyChart {
        title: format!(
            "{} offset order, {} in {} RPCs, {} in flight, {}",
            r.direction.name(),
            format_bytes(r.bytes),
            format_bytes(u64::from(r.rpc_size_bytes)),
            r.in_flight,
            r.target.label
        ),
        x_desc: "arrival index".into(),
        y_desc: "offset (MiB)".into(),
        series,
    }
    .render(&suffixed(prefix, "-offsets"))
}

/// `bench stream` with its outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamCommand {
    /// The transfer.
    pub config: StreamConfig,
    /// Where to save the JSON report.
    pub json_path: Option<PathBuf>,
    /// Plot path prefix.
    pub plot_prefix: Option<PathBuf>,
}

/// What `bench stream` produced.
#[derive(Debug, Clone)]
pub struct StreamOutput {
    /// The report.
    pub report: StreamReport,
    /// The human summary.
    pub summary: String,
    /// Files written.
    pub files: Vec<PathBuf>,
}

/// Runs `bench stream` and writes what was asked for.
pub fn bench_stream(command: &StreamCommand) -> Result<StreamOutput, BenchError> {
    let report = run_stream(&command.config)?;
    let mut files = Vec::new();
    if let Some(path) = &command.json_path {
        save_json(&report, path)?;
        files.push(path.clone());
    }
    if let Some(prefix) = &command.plot_prefix {
        files.extend(plot_stream(&report, prefix)?);
    }
    Ok(StreamOutput { summary: summarize_stream(&report), report, files })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_examples_of_out_of_order() {
        let o = OffsetOrder::from_offsets("x", vec![0, 2, 1, 3]);
        assert_eq!((o.out_of_order, o.out_of_order_fraction), (1, 0.25));
        let o = OffsetOrder::from_offsets("x", vec![0, 3, 1, 2]);
        assert_eq!((o.out_of_order, o.out_of_order_fraction), (2, 0.5));
    }

    #[test]
    fn trace_lines_parse_and_bad_lines_are_named() {
        let t = parse_io_trace("W 7 0 4096\nR 7 4096 10\n\n").unwrap();
        assert_eq!(
            t,
            vec![
                TraceRecord { write: true, fileid: 7, offset: 0, count: 4096 },
                TraceRecord { write: false, fileid: 7, offset: 4096, count: 10 },
            ]
        );
        let e = parse_io_trace("W 7 0 4096\nX 7 0 1\n").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        assert!(parse_io_trace("W 7 0").is_err());
        assert!(parse_io_trace("W 7 -1 3").is_err());
    }

    #[test]
    fn the_backend_order_is_the_last_calls_of_this_file_and_kind() {
        // An earlier run's writes of the same file, another file, reads: all ignored.
        let text = "W 5 0 1\nW 5 1 1\nW 9 0 1\nR 5 0 1\nW 5 0 1\nW 5 2 1\nW 5 1 1\nW 5 3 1\n";
        let records = parse_io_trace(text).unwrap();
        let (order, note) = backend_order(&records, Direction::Write, 5, 4);
        let order = order.unwrap();
        assert_eq!(order.offsets, vec![0, 2, 1, 3]);
        assert_eq!(order.out_of_order_fraction, 0.25);
        assert_eq!(note, None);
        let (order, note) = backend_order(&records, Direction::Read, 5, 3);
        assert_eq!(order.unwrap().offsets, vec![0]);
        assert!(note.unwrap().contains("1 of this file's READ calls, 3 were made"));
        assert_eq!(backend_order(&records, Direction::Read, 6, 1).0, None);
    }
}
