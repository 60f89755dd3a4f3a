//! Prometheus text exposition (format 0.0.4) of the server's statistics.
//!
//! Names follow Prometheus's conventions: a `eagernfs_server_` prefix,
//! base units in the name (`_seconds`, `_bytes`), `_total` on counters, one
//! `# HELP` and `# TYPE` per family, labels for what varies (procedure,
//! status, client).

use eagernfs_server::stats::PROM_BOUNDS_S;
use eagernfs_server::StatsSnapshot;
use std::fmt::Write as _;

/// Label values are quoted; `\`, `"` and newlines escaped.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

struct Out(String);

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", esc(v));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }
}

/// The whole exposition for one snapshot.
pub(crate) fn render_server(s: &StatsSnapshot) -> String {
    let mut o = Out(String::with_capacity(16 * 1024));
    o.family("eagernfs_server_start_time_seconds", "gauge", "Unix time the server started.");
    o.sample("eagernfs_server_start_time_seconds", &[], s.started_unix_s);

    o.family("eagernfs_server_calls_total", "counter", "RPC calls served, by program and procedure.");
    for p in &s.nfs3 {
        o.sample("eagernfs_server_calls_total", &[("program", "nfs3"), ("procedure", &p.name)], p.calls);
    }
    for (name, n) in &s.mount {
        o.sample("eagernfs_server_calls_total", &[("program", "mount"), ("procedure", name)], n);
    }
    for (name, n) in &s.portmap {
        o.sample("eagernfs_server_calls_total", &[("program", "portmap"), ("procedure", name)], n);
    }
    for (name, n) in &s.nlm {
        o.sample("eagernfs_server_calls_total", &[("program", "nlm"), ("procedure", name)], n);
    }
    for (name, n) in &s.nsm {
        o.sample("eagernfs_server_calls_total", &[("program", "nsm"), ("procedure", name)], n);
    }
    o.family("eagernfs_server_locks_held", "gauge", "Byte-range locks (NLM) held by clients now.");
    o.sample("eagernfs_server_locks_held", &[], s.locks_held);
    o.family("eagernfs_server_locks_waiting", "gauge", "Blocking lock requests (NLM) waiting now.");
    o.sample("eagernfs_server_locks_waiting", &[], s.locks_waiting);

    o.family(
        "eagernfs_server_call_duration_seconds",
        "histogram",
        "Time the server spent on each NFSv3 call, from decoding to the encoded reply.",
    );
    for p in &s.nfs3 {
        let mut cumulative = 0;
        for (i, bound) in PROM_BOUNDS_S.iter().enumerate() {
            cumulative += p.latency.buckets.get(i).copied().unwrap_or(0);
            let le = format!("{bound}");
            o.sample(
                "eagernfs_server_call_duration_seconds_bucket",
                &[("procedure", &p.name), ("le", &le)],
                cumulative,
            );
        }
        cumulative += p.latency.buckets.last().copied().unwrap_or(0);
        o.sample(
            "eagernfs_server_call_duration_seconds_bucket",
            &[("procedure", &p.name), ("le", "+Inf")],
            cumulative,
        );
        o.sample(
            "eagernfs_server_call_duration_seconds_sum",
            &[("procedure", &p.name)],
            p.latency.sum_ns as f64 / 1e9,
        );
        o.sample("eagernfs_server_call_duration_seconds_count", &[("procedure", &p.name)], p.latency.count);
    }

    o.family(
        "eagernfs_server_nfs4_record_writes_total",
        "counter",
        "Writes of the NFSv4 clients that may reclaim after a restart (one may carry many registrations).",
    );
    o.sample("eagernfs_server_nfs4_record_writes_total", &[], s.nfs4_record_writes);
    o.family(
        "eagernfs_server_nfs4_record_failures_total",
        "counter",
        "Failed writes of the NFSv4 clients that may reclaim (their registrations are retried, not confirmed).",
    );
    o.sample("eagernfs_server_nfs4_record_failures_total", &[], s.nfs4_record_failures);
    o.family("eagernfs_server_rejected_calls_total", "counter", "Calls refused at the RPC level.");
    o.sample("eagernfs_server_rejected_calls_total", &[], s.rejected);
    o.family("eagernfs_server_udp_calls_total", "counter", "Calls that arrived over UDP.");
    o.sample("eagernfs_server_udp_calls_total", &[], s.udp_calls);
    o.family(
        "eagernfs_server_remote_jukebox_total",
        "counter",
        "Calls of exports on a cluster answered JUKEBOX because the cluster had not answered in time.",
    );
    o.sample("eagernfs_server_remote_jukebox_total", &[], s.remote_jukebox);
    o.family("eagernfs_server_read_bytes_total", "counter", "READ data returned.");
    o.sample("eagernfs_server_read_bytes_total", &[], s.bytes_read);
    o.family(
        "eagernfs_server_read_spliced_bytes_total",
        "counter",
        "READ data spliced from the page cache into the socket (part of read_bytes_total).",
    );
    o.sample("eagernfs_server_read_spliced_bytes_total", &[], s.bytes_read_spliced);
    o.family("eagernfs_server_written_bytes_total", "counter", "WRITE data accepted.");
    o.sample("eagernfs_server_written_bytes_total", &[], s.bytes_written);
    o.family("eagernfs_server_writes_total", "counter", "WRITE calls by the stability the client asked for.");
    for (how, n) in [
        ("unstable", s.writes_unstable),
        ("data_sync", s.writes_data_sync),
        ("file_sync", s.writes_file_sync),
    ] {
        o.sample("eagernfs_server_writes_total", &[("stable", how)], n);
    }
    o.family(
        "eagernfs_server_drc_lookups_total",
        "counter",
        "Duplicate reply cache lookups of non-idempotent calls, by outcome.",
    );
    for (result, n) in [("miss", s.drc.misses), ("hit", s.drc.hits), ("in_progress", s.drc.in_progress)] {
        o.sample("eagernfs_server_drc_lookups_total", &[("result", result)], n);
    }
    o.family(
        "eagernfs_server_drc_evictions_total",
        "counter",
        "Replies forgotten to keep the cache bounded.",
    );
    o.sample("eagernfs_server_drc_evictions_total", &[], s.drc.evicted);
    o.family("eagernfs_server_errors_total", "counter", "NFSv3 results other than NFS3_OK, by status.");
    for (status, n) in &s.errors {
        o.sample("eagernfs_server_errors_total", &[("status", status)], n);
    }
    o.family("eagernfs_server_connections", "gauge", "Open client connections.");
    o.sample("eagernfs_server_connections", &[], s.connections_open);
    o.family("eagernfs_server_connections_accepted_total", "counter", "Connections accepted.");
    o.sample("eagernfs_server_connections_accepted_total", &[], s.connections_accepted);
    o.family(
        "eagernfs_server_connections_dropped_total",
        "counter",
        "Connections the server closed to protect others: host_limit (too many from one host), slow (a record not sent in time), idle.",
    );
    for (reason, n) in [
        ("host_limit", s.connections_refused_host_limit),
        ("slow", s.connections_closed_slow),
        ("idle", s.connections_closed_idle),
    ] {
        o.sample("eagernfs_server_connections_dropped_total", &[("reason", reason)], n);
    }
    o.family("eagernfs_server_threads", "gauge", "Service threads running (they follow the load).");
    o.sample("eagernfs_server_threads", &[], s.threads);
    o.family(
        "eagernfs_server_client_calls_total",
        "counter",
        "NFSv3 calls per client host (at most 4096 hosts).",
    );
    for c in &s.clients {
        o.sample("eagernfs_server_client_calls_total", &[("client", &c.addr.to_string())], c.calls);
    }
    o.0
}

/// Each journaled export's intent journal (`--journal`), labelled by export path.
pub(crate) fn render_journals(journals: &[(String, eagernfs_vfs::journal::JournalStats)]) -> String {
    let mut o = Out(String::new());
    if journals.is_empty() {
        return o.0;
    }
    type Get = fn(&eagernfs_vfs::journal::JournalStats) -> u64;
    let families: [(&str, &str, &str, Get); 7] = [
        ("eagernfs_journal_records_total", "counter", "Records appended to the intent journal.", |j| {
            j.records
        }),
        ("eagernfs_journal_record_bytes_total", "counter", "Bytes of records appended.", |j| j.bytes),
        (
            "eagernfs_journal_log_writes_total",
            "counter",
            "Group commits: log writes made durable, each carrying one or more records.",
            |j| j.groups,
        ),
        (
            "eagernfs_journal_space_waits_total",
            "counter",
            "Appends that waited for a checkpoint to free space (the journal is too small).",
            |j| j.space_waits,
        ),
        ("eagernfs_journal_checkpoints_total", "counter", "Checkpoints that freed log space.", |j| {
            j.checkpoints
        }),
        (
            "eagernfs_journal_used_bytes",
            "gauge",
            "Log bytes between the checkpoint and the last append.",
            |j| j.used_bytes,
        ),
        ("eagernfs_journal_size_bytes", "gauge", "Size of the log area.", |j| j.size_bytes),
    ];
    for (name, kind, help, get) in families {
        o.family(name, kind, help);
        for (export, j) in journals {
            o.sample(name, &[("export", export)], get(j));
        }
    }
    o.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_declared_once_and_every_line_parses() {
        let mut snap = StatsSnapshot::default();
        snap.nfs3.push(eagernfs_server::stats::ProcSnapshot {
            name: "GETATTR".into(),
            calls: 3,
            latency: eagernfs_server::stats::HistogramSnapshot {
                count: 3,
                sum_ns: 3_000_000,
                buckets: {
                    let mut b = vec![0; PROM_BOUNDS_S.len() + 1];
                    b[5] = 3;
                    b
                },
                ..Default::default()
            },
        });
        snap.errors.push(("NFS3ERR_NOENT".into(), 2));
        let text = render_server(&snap);
        let mut types = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                assert!(types.insert(rest.split(' ').next().unwrap().to_string()), "declared twice: {line}");
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let (name_labels, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "value of {line}");
            let name = name_labels.split('{').next().unwrap();
            let family = name.trim_end_matches("_bucket").trim_end_matches("_sum").trim_end_matches("_count");
            assert!(types.contains(name) || types.contains(family), "{name} has no TYPE line before it");
        }
        assert!(text
            .contains("eagernfs_server_call_duration_seconds_bucket{procedure=\"GETATTR\",le=\"0.001\"} 3"));
        assert!(text
            .contains("eagernfs_server_call_duration_seconds_bucket{procedure=\"GETATTR\",le=\"+Inf\"} 3"));
        assert!(text.contains("eagernfs_server_errors_total{status=\"NFS3ERR_NOENT\"} 2"));
        assert_eq!(esc("a\"b\\c\n"), "a\\\"b\\\\c\\n");
    }
}
