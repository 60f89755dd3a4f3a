//! A mount daemon's statistics (`eagernfs stat /mnt/x`, the mount's
//! `metrics=ADDR`): per-operation round trips and execution times,
//! retransmissions, cache hit rates, write-back bytes (Linux's mountstats).

use eagernfs_client::cache::CachedFs;
use eagernfs_client::NfsClient;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

use super::{control, http};

/// One kind of call, as the mount saw it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct OpLine {
    pub(crate) name: String,
    pub(crate) calls: u64,
    pub(crate) errors: u64,
    /// From the last transmission to the reply.
    pub(crate) rtt_avg_ms: f64,
    pub(crate) rtt_max_ms: f64,
    /// From the caller's submission to its result (queueing and
    /// retransmissions included).
    pub(crate) exec_avg_ms: f64,
    pub(crate) exec_max_ms: f64,
}

/// Everything `eagernfs stat MOUNTPOINT` shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct MountSnapshot {
    pub(crate) source: String,
    pub(crate) mountpoint: String,
    pub(crate) server: String,
    pub(crate) taken_unix_ms: u64,
    pub(crate) ops: Vec<OpLine>,
    pub(crate) connections: u64,
    pub(crate) connects: u64,
    pub(crate) retransmissions: u64,
    pub(crate) major_timeouts: u64,
    pub(crate) resent_after_reconnect: u64,
    /// Calls a FUSE reader thread sent on a lane and waited for itself.
    #[serde(default)]
    pub(crate) lane_calls: u64,
    /// Lanes given up (no answer in time, or broken); their calls went to
    /// the shared connections.
    #[serde(default)]
    pub(crate) lane_failures: u64,
    /// Lanes connected.
    #[serde(default)]
    pub(crate) lane_connects: u64,
    pub(crate) attr_hits: u64,
    pub(crate) attr_misses: u64,
    pub(crate) lookup_hits: u64,
    pub(crate) lookup_misses: u64,
    pub(crate) read_chunk_hits: u64,
    pub(crate) read_chunk_misses: u64,
    pub(crate) readahead_chunks: u64,
    pub(crate) disk_hits: u64,
    pub(crate) dirty_bytes: u64,
    pub(crate) unstable_bytes: u64,
    pub(crate) cached_bytes: u64,
    pub(crate) dirty_bytes_peak: u64,
    pub(crate) writes_waited: u64,
    pub(crate) resent_bytes: u64,
}

/// The mount daemon's view of itself.
pub(crate) struct MountObserver {
    pub(crate) cache: CachedFs<NfsClient>,
    pub(crate) source: String,
    pub(crate) mountpoint: String,
    /// Where the cache's own tasks run (a remount waits for write-back).
    pub(crate) runtime: tokio::runtime::Handle,
}

fn proc_name(prog: u32, proc_: u32) -> String {
    match prog {
        eagernfs_proto::nfs3::NFS_PROGRAM => eagernfs_proto::nfs3::name_of(proc_).unwrap_or("?").to_string(),
        eagernfs_proto::mount::MOUNT_PROGRAM => format!("MOUNT.{proc_}"),
        _ => format!("{prog}.{proc_}"),
    }
}

impl MountObserver {
    pub(crate) fn snapshot(&self) -> MountSnapshot {
        let rpc = self.cache.client().rpc();
        let conns = rpc.connection_stats();
        let mut rtt: std::collections::BTreeMap<(u32, u32), (u64, u64, u64)> = Default::default();
        let mut s = MountSnapshot {
            source: self.source.clone(),
            mountpoint: self.mountpoint.clone(),
            server: rpc.server().to_string(),
            taken_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            connections: conns.len() as u64,
            ..MountSnapshot::default()
        };
        for c in conns {
            let core = *c.core.lock();
            s.retransmissions += core.retransmissions;
            s.major_timeouts += core.major_timeouts;
            s.resent_after_reconnect += core.resent_after_reconnect;
            s.connects += c.connects.load(std::sync::atomic::Ordering::Relaxed);
            for (k, r) in c.rtt.lock().iter() {
                let e = rtt.entry(*k).or_default();
                e.0 += r.count;
                e.1 += r.sum_ns;
                e.2 = e.2.max(r.max_ns);
            }
        }
        if let Some(l) = rpc.lane_stats() {
            use std::sync::atomic::Ordering::Relaxed;
            (s.lane_calls, s.lane_failures, s.lane_connects) =
                (l.calls.load(Relaxed), l.failures.load(Relaxed), l.connects.load(Relaxed));
        }
        for ((prog, proc_), t) in rpc.op_times() {
            let (rc, rsum, rmax) = rtt.get(&(prog, proc_)).copied().unwrap_or_default();
            let avg = |sum: u64, n: u64| if n == 0 { 0.0 } else { sum as f64 / n as f64 / 1e6 };
            s.ops.push(OpLine {
                name: proc_name(prog, proc_),
                calls: t.calls,
                errors: t.errors,
                rtt_avg_ms: avg(rsum, rc),
                rtt_max_ms: rmax as f64 / 1e6,
                exec_avg_ms: avg(t.exec_sum_ns, t.calls),
                exec_max_ms: t.exec_max_ns as f64 / 1e6,
            });
        }
        let c = self.cache.stats();
        (s.attr_hits, s.attr_misses, s.lookup_hits, s.lookup_misses) =
            (c.attr_hits, c.attr_misses, c.lookup_hits, c.lookup_misses);
        (s.read_chunk_hits, s.read_chunk_misses, s.readahead_chunks, s.disk_hits) =
            (c.read_chunk_hits, c.read_chunk_misses, c.readahead_chunks, c.disk_hits);
        (s.dirty_bytes_peak, s.writes_waited, s.resent_bytes) =
            (c.dirty_bytes_peak, c.writes_waited, c.resent_bytes);
        (s.dirty_bytes, s.unstable_bytes) = self.cache.write_back_bytes();
        s.cached_bytes = self.cache.cached_bytes();
        s
    }
}

impl control::Responder for MountObserver {
    fn respond(&self, command: &str) -> serde_json::Value {
        match command {
            "stats" => serde_json::to_value(self.snapshot()).unwrap_or_default(),
            // `mount -o remount,ro|rw`: the kernel refuses writes to a read-only
            // mount itself, but a mount made `ro` refuses them here too, and
            // must stop when it is remounted writable.
            "remount-ro" | "remount-rw" => {
                let ro = command == "remount-ro";
                let cache = self.cache.clone();
                if !ro {
                    cache.client().set_read_only(false);
                }
                match self.runtime.block_on(cache.set_read_only(ro)) {
                    Ok(()) => {
                        cache.client().set_read_only(ro);
                        serde_json::json!({ "ok": true, "read_only": ro })
                    }
                    Err(e) => serde_json::json!({ "ok": false, "error": e.to_string() }),
                }
            }
            other => serde_json::json!({
                "ok": false,
                "error": format!("unknown command {other:?} (stats, remount-ro, remount-rw)")
            }),
        }
    }
}

impl http::Source for MountObserver {
    fn json(&self) -> serde_json::Value {
        serde_json::to_value(self.snapshot()).unwrap_or_default()
    }

    fn prometheus(&self) -> String {
        render_prometheus(&self.snapshot())
    }
}

fn pct(hits: u64, misses: u64) -> String {
    if hits + misses == 0 {
        "-".into()
    } else {
        format!("{:.1} %", 100.0 * hits as f64 / (hits + misses) as f64)
    }
}

/// mountstats-like report.
pub(crate) fn render(s: &MountSnapshot) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} mounted on {} · server {} · {} connection(s)",
        s.source, s.mountpoint, s.server, s.connections
    );
    let _ = writeln!(
        o,
        "transport: {} connects · {} retransmissions · {} major timeouts · {} resent after reconnect",
        s.connects, s.retransmissions, s.major_timeouts, s.resent_after_reconnect
    );
    let _ = writeln!(
        o,
        "lanes: {} calls waited for on the reader thread · {} lanes connected · {} given up",
        s.lane_calls, s.lane_connects, s.lane_failures
    );
    let _ = writeln!(
        o,
        "cache hit rates: attributes {} · lookups {} · read chunks {} · disk cache hits {} · read-ahead chunks {}",
        pct(s.attr_hits, s.attr_misses),
        pct(s.lookup_hits, s.lookup_misses),
        pct(s.read_chunk_hits, s.read_chunk_misses),
        s.disk_hits,
        s.readahead_chunks
    );
    let _ = writeln!(
        o,
        "write-back: {} B dirty or in flight · {} B unstable (awaiting COMMIT) · peak {} B · {} writes waited · {} B resent · {} B clean cached",
        s.dirty_bytes, s.unstable_bytes, s.dirty_bytes_peak, s.writes_waited, s.resent_bytes, s.cached_bytes
    );
    let _ = writeln!(
        o,
        "\n{:<12} {:>9} {:>7} {:>10} {:>10} {:>11} {:>11}",
        "operation", "calls", "errors", "rtt ms", "rtt max", "exec ms", "exec max"
    );
    for op in &s.ops {
        let _ = writeln!(
            o,
            "{:<12} {:>9} {:>7} {:>10.3} {:>10.3} {:>11.3} {:>11.3}",
            op.name, op.calls, op.errors, op.rtt_avg_ms, op.rtt_max_ms, op.exec_avg_ms, op.exec_max_ms
        );
    }
    o
}

fn render_prometheus(s: &MountSnapshot) -> String {
    let mut o = String::new();
    let mp = s.mountpoint.replace('\\', "\\\\").replace('"', "\\\"");
    // Each family's samples together, after its HELP and TYPE (the format
    // requires one group per metric).
    type PerOp = fn(&OpLine) -> f64;
    let per_op: [(&str, &str, &str, PerOp); 4] = [
        ("eagernfs_client_rpc_calls_total", "counter", "NFS calls the mount made, by operation.", |op| {
            op.calls as f64
        }),
        ("eagernfs_client_rpc_errors_total", "counter", "Calls that failed, by operation.", |op| {
            op.errors as f64
        }),
        (
            "eagernfs_client_rpc_rtt_seconds_total",
            "counter",
            "Sum of round-trip times, by operation.",
            |op| op.rtt_avg_ms * op.calls as f64 / 1e3,
        ),
        (
            "eagernfs_client_rpc_exec_seconds_total",
            "counter",
            "Sum of execution times (queue and retries included), by operation.",
            |op| op.exec_avg_ms * op.calls as f64 / 1e3,
        ),
    ];
    for (name, kind, help, value) in per_op {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for op in &s.ops {
            let _ = writeln!(o, "{name}{{mountpoint=\"{mp}\",operation=\"{}\"}} {}", op.name, value(op));
        }
    }
    for (name, kind, help, v) in [
        (
            "eagernfs_client_retransmissions_total",
            "counter",
            "Calls sent again after a timeout.",
            s.retransmissions,
        ),
        (
            "eagernfs_client_lane_calls_total",
            "counter",
            "Calls a FUSE reader thread sent on a lane and waited for itself.",
            s.lane_calls,
        ),
        (
            "eagernfs_client_lane_failures_total",
            "counter",
            "Lanes given up; their calls went to the shared connections.",
            s.lane_failures,
        ),
        (
            "eagernfs_client_major_timeouts_total",
            "counter",
            "Major timeouts (server not responding).",
            s.major_timeouts,
        ),
        (
            "eagernfs_client_dirty_bytes",
            "gauge",
            "Bytes written and not yet acknowledged by the server.",
            s.dirty_bytes,
        ),
        (
            "eagernfs_client_unstable_bytes",
            "gauge",
            "Bytes acknowledged UNSTABLE, awaiting COMMIT.",
            s.unstable_bytes,
        ),
        ("eagernfs_client_cached_bytes", "gauge", "Clean file data cached in memory.", s.cached_bytes),
        (
            "eagernfs_client_attr_cache_hits_total",
            "counter",
            "Attribute lookups served from the cache.",
            s.attr_hits,
        ),
        (
            "eagernfs_client_attr_cache_misses_total",
            "counter",
            "Attribute lookups that asked the server.",
            s.attr_misses,
        ),
        (
            "eagernfs_client_read_chunk_hits_total",
            "counter",
            "Read chunks found in memory.",
            s.read_chunk_hits,
        ),
        ("eagernfs_client_read_chunk_misses_total", "counter", "Read chunks fetched.", s.read_chunk_misses),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{mountpoint=\"{mp}\"}} {v}");
    }
    o
}
