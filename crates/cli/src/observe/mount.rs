//! A mount daemon's statistics (`eagernfs stat /mnt/x`, the mount's
//! `metrics=ADDR`): per-operation round trips and execution times,
//! retransmissions, cache hit rates, write-back bytes (Linux's mountstats).
//! Over NFSv4 the round trips are COMPOUNDs, counted by what each is for
//! (its main operation), with the session layer's and the back channel's
//! counters and the operations sent inside them.

use eagernfs_client::cache::CachedFs;
use eagernfs_client::AnyClient;
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

/// An operation and how many times it was sent (inside COMPOUNDs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct OpCount {
    pub(crate) name: String,
    pub(crate) count: u64,
}

/// What an NFSv4 mount's session layer and back channel did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Nfs4Snapshot {
    /// COMPOUNDs answered with a SEQUENCE result.
    pub(crate) compounds: u64,
    /// Operations sent in them, SEQUENCE included.
    pub(crate) operations: Vec<OpCount>,
    /// Requests sent again on their slot (the server was still running the first copy).
    pub(crate) same_slot_retries: u64,
    /// Requests given a lost one's sequence id (SEQ_MISORDERED).
    pub(crate) resequenced: u64,
    /// Answered DELAY or GRACE and tried again.
    pub(crate) delayed: u64,
    pub(crate) sessions: u64,
    pub(crate) client_ids: u64,
    pub(crate) reclaimed_opens: u64,
    pub(crate) reclaimed_locks: u64,
    /// Opens and locks made again as new (the server had no grace for them).
    pub(crate) reopened: u64,
    pub(crate) lost_locks: u64,
    /// SEQUENCEs sent alone to keep the lease.
    pub(crate) renewals: u64,
    pub(crate) binds: u64,
    pub(crate) delegreturns: u64,
    /// Delegations held now (issue 36: the files opened with no round trip).
    #[serde(default)]
    pub(crate) delegations: u64,
    /// Back channel: CB_NULL, CB_COMPOUND (replays among them), CB_RECALL,
    /// CB_GETATTR, refused calls.
    pub(crate) callback_nulls: u64,
    pub(crate) callback_compounds: u64,
    pub(crate) callback_replays: u64,
    pub(crate) recalls: u64,
    pub(crate) callback_getattrs: u64,
    pub(crate) callbacks_refused: u64,
}

/// Everything `eagernfs stat MOUNTPOINT` shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct MountSnapshot {
    pub(crate) source: String,
    pub(crate) mountpoint: String,
    pub(crate) server: String,
    /// The NFS version spoken (`3`, `4.1`, `4.2`).
    #[serde(default)]
    pub(crate) version: String,
    pub(crate) taken_unix_ms: u64,
    /// Round trips by NFSv3 procedure, or by the kind of COMPOUND (NFSv4).
    pub(crate) ops: Vec<OpLine>,
    /// NFSv4's session layer and back channel.
    #[serde(default)]
    pub(crate) nfs4: Option<Nfs4Snapshot>,
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
    /// Opens answered with no call because a delegation vouched for the file.
    #[serde(default)]
    pub(crate) delegated_opens: u64,
    /// Closes that returned before their write-back, under a write
    /// delegation (`deleg_close=writeback`).
    #[serde(default)]
    pub(crate) closes_written_back_later: u64,
    /// Small files read ahead of a program opening a directory's files in
    /// order, and the round trips that read them.
    #[serde(default)]
    pub(crate) files_read_ahead: u64,
    #[serde(default)]
    pub(crate) files_read_ahead_calls: u64,
    /// Directory listings read ahead of a program walking a tree, and of
    /// those the ones a program then read with no call.
    #[serde(default)]
    pub(crate) listings_read_ahead: u64,
    #[serde(default)]
    pub(crate) listings_read_ahead_used: u64,
    /// Unlinks and rmdirs that returned before their REMOVE was answered
    /// (`dirops=async`), and of those the REMOVEs that failed.
    #[serde(default)]
    pub(crate) removes_later: u64,
    #[serde(default)]
    pub(crate) removes_later_failed: u64,
    /// Creates that returned before the server made the file
    /// (`dirops=async`), and of those the ones the server refused.
    #[serde(default)]
    pub(crate) creates_early: u64,
    #[serde(default)]
    pub(crate) creates_early_failed: u64,
    /// Of those, the files made in one call with their data and close.
    #[serde(default)]
    pub(crate) creates_whole: u64,
    /// chmods held for the write-back under a write delegation
    /// (`deleg_chmod=hold`).
    #[serde(default)]
    pub(crate) modes_held: u64,
}

/// The mount daemon's view of itself.
pub(crate) struct MountObserver {
    pub(crate) cache: CachedFs<AnyClient>,
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
            version: self.cache.client().version().as_str().to_string(),
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
        if let Some(v4) = self.cache.client().as_v4() {
            // Round trips are COMPOUNDs, by kind; the RPC layer sees them all as one procedure.
            let ms = |ns: u64| ns as f64 / 1e6;
            for k in v4.session_stats().compound_kinds() {
                let avg = if k.calls == 0 { 0.0 } else { ms(k.rtt_sum_ns) / k.calls as f64 };
                s.ops.push(OpLine {
                    name: k.name.to_string(),
                    calls: k.calls,
                    errors: k.errors,
                    rtt_avg_ms: avg,
                    rtt_max_ms: ms(k.rtt_max_ns),
                    exec_avg_ms: avg,
                    exec_max_ms: ms(k.rtt_max_ns),
                });
            }
            s.nfs4 = Some(nfs4_snapshot(v4));
        }
        for ((prog, proc_), t) in rpc.op_times().into_iter().filter(|_| s.nfs4.is_none()) {
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
        s.delegated_opens = c.delegated_opens;
        s.closes_written_back_later = c.closes_written_back_later;
        (s.files_read_ahead, s.files_read_ahead_calls) = (c.files_read_ahead, c.files_read_ahead_calls);
        (s.listings_read_ahead, s.listings_read_ahead_used) =
            (c.listings_read_ahead, c.listings_read_ahead_used);
        (s.removes_later, s.removes_later_failed) = (c.removes_later, c.removes_later_failed);
        (s.creates_early, s.creates_early_failed) = (c.creates_early, c.creates_early_failed);
        s.creates_whole = c.creates_whole;
        s.modes_held = c.modes_held;
        (s.dirty_bytes, s.unstable_bytes) = self.cache.write_back_bytes();
        s.cached_bytes = self.cache.cached_bytes();
        s
    }
}

fn nfs4_snapshot(v4: &eagernfs_client::Nfs4Client) -> Nfs4Snapshot {
    use std::sync::atomic::Ordering::Relaxed;
    let st = v4.session_stats();
    let cb = v4.callback_stats();
    Nfs4Snapshot {
        compounds: st.compounds.load(Relaxed),
        operations: st
            .ops()
            .into_iter()
            .map(|(name, count)| OpCount { name: name.to_string(), count })
            .collect(),
        same_slot_retries: st.same_slot_retries.load(Relaxed),
        resequenced: st.resequenced.load(Relaxed),
        delayed: st.delayed.load(Relaxed),
        sessions: st.sessions.load(Relaxed),
        client_ids: st.client_ids.load(Relaxed),
        reclaimed_opens: st.reclaimed_opens.load(Relaxed),
        reclaimed_locks: st.reclaimed_locks.load(Relaxed),
        reopened: st.reopened.load(Relaxed),
        lost_locks: st.lost_locks.load(Relaxed),
        renewals: st.renewals.load(Relaxed),
        binds: st.binds.load(Relaxed),
        delegreturns: st.delegreturns.load(Relaxed),
        delegations: v4.delegation_count() as u64,
        callback_nulls: cb.nulls.load(Relaxed),
        callback_compounds: cb.compounds.load(Relaxed),
        callback_replays: cb.replays.load(Relaxed),
        recalls: cb.recalls.load(Relaxed),
        callback_getattrs: cb.getattrs.load(Relaxed),
        callbacks_refused: cb.refused.load(Relaxed),
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
            // `eagernfs sync MOUNTPOINT`: sync(1) does not reach a FUSE daemon.
            "sync" => match self.runtime.block_on(self.cache.sync_all()) {
                Ok(()) => serde_json::json!({ "ok": true }),
                Err(e) => serde_json::json!({ "ok": false, "error": e.to_string() }),
            },
            other => serde_json::json!({
                "ok": false,
                "error": format!("unknown command {other:?} (stats, sync, remount-ro, remount-rw)")
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
    let version = if s.version.is_empty() { String::new() } else { format!(" · NFSv{}", s.version) };
    let _ = writeln!(
        o,
        "{} mounted on {} · server {}{version} · {} connection(s)",
        s.source, s.mountpoint, s.server, s.connections
    );
    let _ = writeln!(
        o,
        "transport: {} connects · {} retransmissions · {} major timeouts · {} resent after reconnect",
        s.connects, s.retransmissions, s.major_timeouts, s.resent_after_reconnect
    );
    // NFSv3's read-only calls and NFSv4's COMPOUNDs that change nothing.
    let _ = writeln!(
        o,
        "lanes: {} calls waited for on the reader thread · {} lanes connected · {} given up",
        s.lane_calls, s.lane_connects, s.lane_failures
    );
    if let Some(v4) = &s.nfs4 {
        let _ = writeln!(
                o,
                "session: {} sessions · {} client ids · {} renewals · {} binds · retries: {} on the same slot, {} resequenced, {} after DELAY/GRACE",
                v4.sessions, v4.client_ids, v4.renewals, v4.binds, v4.same_slot_retries, v4.resequenced, v4.delayed
            );
        let _ = writeln!(
                o,
                "recovery: {} opens and {} locks reclaimed · {} made again · {} locks lost · {} delegations returned",
                v4.reclaimed_opens, v4.reclaimed_locks, v4.reopened, v4.lost_locks, v4.delegreturns
            );
        let _ = writeln!(
                o,
                "delegations: {} held · {} opens answered under one with no call · {} closes written back after returning · {} files read ahead in {} round trips · {} directory listings read ahead, {} of them used",
                v4.delegations, s.delegated_opens, s.closes_written_back_later, s.files_read_ahead, s.files_read_ahead_calls,
                s.listings_read_ahead, s.listings_read_ahead_used
            );
        if s.removes_later > 0 {
            let _ = writeln!(
                o,
                "removes: {} returned before their REMOVE was answered (dirops=async) · {} of those failed",
                s.removes_later, s.removes_later_failed
            );
        }
        if s.creates_early > 0 {
            let _ = writeln!(
                o,
                "creates: {} returned before the server made the file (dirops=async) · {} made with their data in one call · {} failed",
                s.creates_early, s.creates_whole, s.creates_early_failed
            );
        }
        if s.modes_held > 0 {
            let _ = writeln!(
                o,
                "chmods held for the write-back under a write delegation (deleg_chmod=hold): {}",
                s.modes_held
            );
        }
        let _ = writeln!(
                o,
                "back channel: {} CB_NULL · {} CB_COMPOUND ({} replayed) · {} recalls · {} CB_GETATTR · {} refused",
                v4.callback_nulls,
                v4.callback_compounds,
                v4.callback_replays,
                v4.recalls,
                v4.callback_getattrs,
                v4.callbacks_refused
            );
    }
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
    if s.nfs4.is_some() {
        let _ = writeln!(o, "\nCOMPOUNDs (round trips) by their main operation:");
    }
    let _ = writeln!(
        o,
        "\n{:<16} {:>9} {:>7} {:>10} {:>10} {:>11} {:>11}",
        "operation", "calls", "errors", "rtt ms", "rtt max", "exec ms", "exec max"
    );
    for op in &s.ops {
        let _ = writeln!(
            o,
            "{:<16} {:>9} {:>7} {:>10.3} {:>10.3} {:>11.3} {:>11.3}",
            op.name, op.calls, op.errors, op.rtt_avg_ms, op.rtt_max_ms, op.exec_avg_ms, op.exec_max_ms
        );
    }
    if let Some(v4) = &s.nfs4 {
        // One line, so that tools reading the table above (one call kind a
        // line) do not count operations as round trips.
        let ops: Vec<String> = v4.operations.iter().map(|op| format!("{} {}", op.name, op.count)).collect();
        let _ = writeln!(o, "\noperations sent in {} COMPOUNDs: {}", v4.compounds, ops.join(" · "));
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
    let name = "eagernfs_client_info";
    let _ = writeln!(o, "# HELP {name} The mount, by the NFS version it speaks.\n# TYPE {name} gauge");
    let _ = writeln!(o, "{name}{{mountpoint=\"{mp}\",version=\"{}\"}} 1", s.version);
    if let Some(v4) = &s.nfs4 {
        let name = "eagernfs_client_nfs4_operations_total";
        let _ = writeln!(
            o,
            "# HELP {name} NFSv4 operations sent in COMPOUNDs, by operation.\n# TYPE {name} counter"
        );
        for op in &v4.operations {
            let _ = writeln!(o, "{name}{{mountpoint=\"{mp}\",operation=\"{}\"}} {}", op.name, op.count);
        }
        for (name, help, v) in [
            ("eagernfs_client_nfs4_sessions_total", "Sessions made.", v4.sessions),
            ("eagernfs_client_nfs4_client_ids_total", "Client ids obtained.", v4.client_ids),
            ("eagernfs_client_nfs4_renewals_total", "SEQUENCEs sent alone to keep the lease.", v4.renewals),
            ("eagernfs_client_nfs4_retries_total", "Requests sent again after DELAY or GRACE.", v4.delayed),
            (
                "eagernfs_client_nfs4_same_slot_retries_total",
                "Requests sent again on their slot.",
                v4.same_slot_retries,
            ),
            (
                "eagernfs_client_nfs4_reclaimed_opens_total",
                "Opens reclaimed after a restart.",
                v4.reclaimed_opens,
            ),
            (
                "eagernfs_client_nfs4_reclaimed_locks_total",
                "Locks reclaimed after a restart.",
                v4.reclaimed_locks,
            ),
            (
                "eagernfs_client_nfs4_lost_locks_total",
                "Locks neither reclaimed nor granted again.",
                v4.lost_locks,
            ),
            ("eagernfs_client_nfs4_recalls_total", "Delegations recalled (CB_RECALL).", v4.recalls),
        ] {
            let _ =
                writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{mountpoint=\"{mp}\"}} {v}");
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
