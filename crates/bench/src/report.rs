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
//!
//! A report saved under a name ending in `.gz` (`w.json.gz`) is gzip-compressed: the per-call
//! series (every write()'s latency, every offset) are most of a report's bytes and shrink 4-9x,
//! which keeps results committed under `docs/benchmarks/` small. Readers accept either form
//! and tell them apart by content, not by name; `zcat w.json.gz | jq .` reads one by hand.

use crate::error::BenchError;
use crate::machine::MachineInfo;
use crate::spikes::{SpikeConfig, SpikeReport};
use crate::stats::LatencySummary;
use flate2::{read::MultiGzDecoder, Compression, GzBuilder};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
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
    /// Most written data the client held at once (dirty, in flight, or kept until COMMIT),
    /// when the target can tell (eagernfs's own client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_peak_bytes: Option<u64>,
    /// `[ns since the file was created, bytes held]` after some of the write() calls
    /// (Rago et al.'s early laundering shows here: data the server answers as stable is let go).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_samples: Vec<[u64; 2]>,
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

/// The first two bytes of every gzip file (RFC 1952); JSON text never starts with them.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The largest report a reader accepts, in uncompressed bytes. A run at `--max-calls`' default
/// (10M write() calls) keeps ~150 MB of per-call latencies (~15 bytes each), so this leaves
/// room several times over, while a corrupt or hostile `.gz` cannot make a reader inflate
/// until memory runs out.
pub const REPORT_MAX_BYTES: u64 = 1 << 30;

/// Whether `save_json` compresses a report saved at `path`: its name ends in `.gz`.
fn is_gzip_path(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

/// Writes a report as pretty JSON (a trailing newline included, so it diffs well),
/// gzip-compressed when the file name ends in `.gz`.
///
/// The compressed form is reproducible, like `gzip -9 -n`: best compression, and neither a
/// file name nor a time in the header, so the same report always gives the same bytes.
pub fn save_json<T: Serialize>(value: &T, path: &Path) -> Result<(), BenchError> {
    let mut text = serde_json::to_vec_pretty(value)
        .map_err(|e| BenchError::Report { path: path.to_path_buf(), message: e.to_string() })?;
    text.push(b'\n');
    let bytes = if is_gzip_path(path) {
        // RFC 1952 operating system 3 (Unix), what gzip itself writes here.
        let mut encoder = GzBuilder::new().operating_system(3).write(Vec::new(), Compression::best());
        encoder
            .write_all(&text)
            .and_then(|()| encoder.finish())
            .map_err(|e| BenchError::io("compress", path, e))?
    } else {
        text
    };
    std::fs::write(path, bytes).map_err(|e| BenchError::io("write", path, e))
}

/// Reads a report's JSON text, inflating it when the file is gzip-compressed. Compression is
/// recognised by the gzip magic bytes, not the name, so a report renamed by hand still reads;
/// concatenated gzip members are read in order, as `zcat` does.
pub fn read_report_text(path: &Path) -> Result<Vec<u8>, BenchError> {
    let bad = |message: String| BenchError::Report { path: path.to_path_buf(), message };
    let mut raw = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(REPORT_MAX_BYTES + 1).read_to_end(&mut raw))
        .map_err(|e| BenchError::io("read", path, e))?;
    let text = if raw.starts_with(&GZIP_MAGIC) {
        let mut text = Vec::new();
        MultiGzDecoder::new(raw.as_slice())
            .take(REPORT_MAX_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(|e| bad(format!("gzip-compressed but unreadable ({e}); `gzip -t` checks the file")))?;
        text
    } else {
        raw
    };
    if text.len() as u64 > REPORT_MAX_BYTES {
        return Err(bad(format!("larger than {REPORT_MAX_BYTES} bytes uncompressed: not a report")));
    }
    Ok(text)
}

/// Reads a `bench write` report (`.json` or `.json.gz`), refusing any other schema.
pub fn load_write_report(path: &Path) -> Result<WriteReport, BenchError> {
    load_report(path, WRITE_SCHEMA)
}

/// Reads any report (`.json` or `.json.gz`) whose `schema` is `schema`, refusing any other:
/// `load_report::<LoadReport>(path, LOAD_SCHEMA)`, `load_report::<CompareReport>(..)`, ...
pub fn load_report<T: DeserializeOwned>(path: &Path, schema: &str) -> Result<T, BenchError> {
    let text = read_report_text(path)?;
    let bad = |message: String| BenchError::Report { path: path.to_path_buf(), message };
    let value: serde_json::Value = serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))?;
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

    fn sample() -> serde_json::Value {
        let latencies_ns: Vec<u64> = (0..5000).map(|i| 4000 + (i * 7919) % 3000).collect();
        serde_json::json!({ "schema": "test/v1", "latencies_ns": latencies_ns })
    }

    #[test]
    fn a_gz_name_saves_compressed_reproducible_bytes_that_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let (plain, packed) = (dir.path().join("r.json"), dir.path().join("r.json.gz"));
        save_json(&sample(), &plain).unwrap();
        save_json(&sample(), &packed).unwrap();
        let (plain_bytes, packed_bytes) = (std::fs::read(&plain).unwrap(), std::fs::read(&packed).unwrap());
        assert!(plain_bytes.starts_with(b"{"), "a .json name stays plain text");
        assert!(packed_bytes.starts_with(&GZIP_MAGIC), "a .gz name is compressed");
        assert!(
            packed_bytes.len() * 3 < plain_bytes.len(),
            "{} vs {}",
            packed_bytes.len(),
            plain_bytes.len()
        );
        // Header: no name flag, no time, best compression, Unix, as `gzip -9 -n` writes it.
        assert_eq!(&packed_bytes[3..10], &[0, 0, 0, 0, 0, 2, 3]);
        save_json(&sample(), &packed).unwrap();
        assert_eq!(std::fs::read(&packed).unwrap(), packed_bytes, "the same report, the same bytes");
        assert_eq!(read_report_text(&packed).unwrap(), plain_bytes);
        assert_eq!(load_report::<serde_json::Value>(&packed, "test/v1").unwrap(), sample());
        // Content decides, not the name: a compressed report renamed to .json still reads.
        let renamed = dir.path().join("renamed.json");
        std::fs::rename(&packed, &renamed).unwrap();
        assert_eq!(load_report::<serde_json::Value>(&renamed, "test/v1").unwrap(), sample());
    }

    #[test]
    fn a_truncated_gz_report_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cut.json.gz");
        save_json(&sample(), &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let e = load_report::<serde_json::Value>(&path, "test/v1").unwrap_err().to_string();
        assert!(e.contains("cut.json.gz") && e.contains("gzip"), "{e}");
    }
}
