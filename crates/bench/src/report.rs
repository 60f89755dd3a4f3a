//! The JSON reports: what each benchmark writes with `--json`, what the plot and table
//! commands read back.
//!
//! Every report starts with the same header (`schema`, `tool_version`, `started_unix_s`,
//! `machine`, `target`) so a file says what produced it. `schema` names the benchmark and a
//! version (`eagernfs-bench/write/v1`); readers refuse a schema they do not know instead of
//! guessing. Times are integer nanoseconds (`_ns`), throughputs MB/s with MB = 10^6 bytes;
//! a rate that could not be measured (no time elapsed) is `null`.
//!
//! The building blocks below [`WriteReport`] ([`OpStats`], [`RatePoint`], [`OffsetOrder`]) are
//! for the wire-level tools (`bench load`, `bench stream`): per-operation latency percentiles,
//! achieved ops/s and errors, and the order in which offsets were seen.

use crate::error::BenchError;
use crate::machine::MachineInfo;
use crate::spikes::{SpikeConfig, SpikeReport};
use crate::stats::LatencySummary;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The schema name of `bench write` reports.
pub const WRITE_SCHEMA: &str = "eagernfs-bench/write/v1";

/// Where a benchmark ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetInfo {
    /// The name plots and tables use for this target (`--label`, or the path and file system).
    pub label: String,
    /// The directory (or, for wire-level tools, the server URL) that was measured.
    pub location: String,
    /// File system type of the directory (`ext4`, `tmpfs`, `fuse`, ...), or `nfs-wire` for a
    /// server reached through our own client.
    pub fs_type: String,
}

/// A `bench write` result: one run per file size (one for a plain run, several for a sweep).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteReport {
    /// Always [`WRITE_SCHEMA`].
    pub schema: String,
    /// Version of the tool that wrote the report.
    pub tool_version: String,
    /// Wall-clock start, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// The machine.
    pub machine: MachineInfo,
    /// The target directory.
    pub target: TargetInfo,
    /// The settings shared by all runs.
    pub settings: WriteSettings,
    /// One run per file size, in the order they ran.
    pub runs: Vec<WriteRun>,
    /// Sizes of a sweep that did not run because the time bound was used up.
    #[serde(default)]
    pub skipped_sizes_bytes: Vec<u64>,
}

/// The settings of a `bench write`, echoed into the report so it can be rerun.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteSettings {
    /// Bytes per write() call (the paper's 8 KiB).
    pub block_size_bytes: u64,
    /// Whether the file was fsync'd before close.
    pub fsync: bool,
    /// Bound on the whole command's write loops, in seconds.
    pub max_seconds: f64,
    /// Bound on write() calls per run.
    pub max_calls: u64,
    /// Calls slower than this are outliers in the means.
    pub outlier_threshold_ns: u64,
    /// How spikes were defined.
    pub spikes: SpikeConfig,
}

/// Why a run wrote less than the requested size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The time bound (`--max-seconds`) ran out.
    MaxDuration,
    /// The call bound (`--max-calls`) was reached.
    MaxCalls,
}

/// One file written from start to close.
///
/// Elapsed times are measured from just before the file is created (the paper's "beginning of
/// the benchmark") to just after the named step; the throughputs divide `bytes_written` by
/// them, so `mb_per_s_close <= mb_per_s_fsync <= mb_per_s_writes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteRun {
    /// The size asked for.
    pub file_size_requested_bytes: u64,
    /// The bytes actually written (less than requested only when `stopped_early`).
    pub bytes_written: u64,
    /// write() calls made (one latency each).
    pub calls: u64,
    /// Set when a bound stopped the run before the requested size.
    pub stopped_early: Option<StopReason>,
    /// Time to create the file.
    pub create_ns: u64,
    /// Start to the end of the last write().
    pub writes_elapsed_ns: u64,
    /// The fsync call alone (`None` with `--no-fsync`).
    pub fsync_ns: Option<u64>,
    /// Start to the end of fsync (`None` with `--no-fsync`).
    pub fsync_elapsed_ns: Option<u64>,
    /// The close call alone.
    pub close_ns: u64,
    /// Start to the end of close.
    pub close_elapsed_ns: u64,
    /// Throughput up to the last write (the paper's Fig. 1 and 7).
    pub mb_per_s_writes: Option<f64>,
    /// Throughput up to the end of fsync.
    pub mb_per_s_fsync: Option<f64>,
    /// Throughput up to the end of close.
    pub mb_per_s_close: Option<f64>,
    /// Latency of the write() calls (`None` only if no call was made).
    pub latency: Option<LatencySummary>,
    /// Spikes in the write() latencies and their period.
    pub spikes: SpikeReport,
    /// Every write() latency in call order, for the per-call plot; empty when the run was
    /// asked not to keep them (`--no-latencies`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latencies_ns: Vec<u64>,
}

/// Calls of one operation (an NFS procedure, or `write` for a file system call).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpStats {
    /// Operation name (`GETATTR`, `READ`, `write`, ...).
    pub op: String,
    /// Calls that got an answer, successful or not.
    pub calls: u64,
    /// Failed calls by cause (`NFS3ERR_NOENT`, `timeout`, `connection reset`, ...).
    #[serde(default)]
    pub errors: BTreeMap<String, u64>,
    /// Latency of the answered calls.
    pub latency: Option<LatencySummary>,
}

/// One measurement interval of a load generator: an offered rate (or none: as fast as
/// possible) and what the server achieved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatePoint {
    /// Virtual clients (connections) active.
    pub clients: u32,
    /// Calls per second asked for; `None` when unthrottled.
    pub offered_ops_per_s: Option<f64>,
    /// Length of the interval.
    pub elapsed_ns: u64,
    /// Calls answered in the interval, all operations.
    pub completed_ops: u64,
    /// `completed_ops` per second.
    pub achieved_ops_per_s: Option<f64>,
    /// Per-operation breakdown.
    pub ops: Vec<OpStats>,
}

/// The order in which a sequential transfer's offsets were seen (Rago et al., problems 3–4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OffsetOrder {
    /// Who saw them: `client` (replies as they arrived) or `backend` (the server's trace).
    pub observer: String,
    /// Offsets in arrival order (possibly a bounded prefix of a long transfer).
    pub offsets: Vec<u64>,
    /// Requests whose offset was below one that arrived before them.
    pub out_of_order: u64,
    /// `out_of_order` over the number of offsets (0 to 1).
    pub out_of_order_fraction: f64,
}

impl OffsetOrder {
    /// Counts out-of-order arrivals: an offset is out of order when a higher offset arrived
    /// before it, i.e. the transfer had already moved past it.
    pub fn from_offsets(observer: &str, offsets: Vec<u64>) -> Self {
        let mut highest: Option<u64> = None;
        let mut out_of_order = 0u64;
        for &offset in &offsets {
            match highest {
                Some(h) if offset < h => out_of_order += 1,
                _ => highest = Some(offset),
            }
        }
        let out_of_order_fraction =
            if offsets.is_empty() { 0.0 } else { out_of_order as f64 / offsets.len() as f64 };
        Self { observer: observer.to_string(), offsets, out_of_order, out_of_order_fraction }
    }
}

/// Writes a report as pretty JSON (a trailing newline included, so it diffs well).
pub fn save_json<T: Serialize>(value: &T, path: &Path) -> Result<(), BenchError> {
    let mut text = serde_json::to_string_pretty(value)
        .map_err(|e| BenchError::Report { path: path.to_path_buf(), message: e.to_string() })?;
    text.push('\n');
    std::fs::write(path, text).map_err(|e| BenchError::io("write", path, e))
}

/// Reads a `bench write` report, refusing any other schema.
pub fn load_write_report(path: &Path) -> Result<WriteReport, BenchError> {
    load_with_schema(path, WRITE_SCHEMA)
}

fn load_with_schema<T: DeserializeOwned>(path: &Path, schema: &str) -> Result<T, BenchError> {
    let text = std::fs::read_to_string(path).map_err(|e| BenchError::io("read", path, e))?;
    let bad = |message: String| BenchError::Report { path: path.to_path_buf(), message };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let found = value.get("schema").and_then(|s| s.as_str()).unwrap_or("(none)");
    if found != schema {
        return Err(bad(format!("schema is {found:?}, expected {schema:?}")));
    }
    serde_json::from_value(value).map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_order_counts_offsets_below_the_highest_seen() {
        let o = OffsetOrder::from_offsets("client", vec![0, 8, 24, 16, 32, 40, 48, 56]);
        assert_eq!(o.out_of_order, 1);
        assert_eq!(o.out_of_order_fraction, 1.0 / 8.0);
        // Two requests overtaken by one: both count.
        let o = OffsetOrder::from_offsets("backend", vec![0, 24, 8, 16, 32]);
        assert_eq!(o.out_of_order, 2);
        assert_eq!(OffsetOrder::from_offsets("client", vec![]).out_of_order_fraction, 0.0);
    }
}
