//! `eagernfs stat` reports: the server's (like `nfsstat -s`; with `--watch`,
//! rates per interval like `nfsiostat`).

use anyhow::{Context, Result};
use eagernfs_server::StatsSnapshot;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use super::control;

fn mib(b: u64) -> String {
    let b = b as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    }
}

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// Fetch the server's statistics through its control socket.
pub(crate) fn fetch(path: &Path) -> Result<(StatsSnapshot, serde_json::Value)> {
    let v = control::request(path, "stats")?;
    if let Some(err) = v.get("error") {
        anyhow::bail!("the server said: {err}");
    }
    let snap: StatsSnapshot = serde_json::from_value(v.get("stats").cloned().unwrap_or_default())
        .context("reading the statistics")?;
    Ok((snap, v))
}

/// The full report of one snapshot.
pub(crate) fn render(s: &StatsSnapshot, doc: &serde_json::Value) -> String {
    let mut o = String::new();
    let listen: Vec<String> = doc["listen"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let total: u64 = s.nfs3.iter().map(|p| p.calls).sum();
    let _ = writeln!(
        o,
        "eagernfs server {} · up {:.1} h · {} connections ({} accepted{}) · {} threads (peak {})",
        listen.join(", "),
        s.uptime_s / 3600.0,
        s.connections_open,
        s.connections_accepted,
        {
            let dropped = [
                (s.connections_refused_host_limit, "over the per-host limit"),
                (s.connections_closed_slow, "too slow"),
                (s.connections_closed_idle, "idle"),
            ];
            dropped
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|(n, why)| format!(", {n} closed {why}"))
                .collect::<String>()
        },
        s.threads,
        s.threads_peak
    );
    let _ = writeln!(
        o,
        "NFSv3 calls {total} · rejected {} · over UDP {} · read {} ({} spliced) · written {}",
        s.rejected,
        s.udp_calls,
        mib(s.bytes_read),
        mib(s.bytes_read_spliced),
        mib(s.bytes_written)
    );
    let commits = s.nfs3.iter().find(|p| p.name == "COMMIT").map_or(0, |p| p.calls);
    let _ = writeln!(
        o,
        "WRITE stability: unstable {} · data_sync {} · file_sync {} · COMMIT {commits}",
        s.writes_unstable, s.writes_data_sync, s.writes_file_sync
    );
    let _ = writeln!(
        o,
        "reply cache: {} hits · {} misses · {} dropped in progress · {} evicted",
        s.drc.hits, s.drc.misses, s.drc.in_progress, s.drc.evicted
    );
    if let Some(line) = crate::cluster::status_line(&doc["cluster"]) {
        let _ = writeln!(o, "{line}");
    }
    let _ = writeln!(
        o,
        "\n{:<12} {:>10} {:>6} {:>9} {:>9} {:>9}",
        "procedure", "calls", "%", "p50 ms", "p99 ms", "max ms"
    );
    for p in &s.nfs3 {
        let pct = if total > 0 { 100.0 * p.calls as f64 / total as f64 } else { 0.0 };
        let _ = writeln!(
            o,
            "{:<12} {:>10} {:>6.1} {:>9} {:>9} {:>9}",
            p.name,
            p.calls,
            pct,
            ms(p.latency.p50_ns),
            ms(p.latency.p99_ns),
            ms(p.latency.max_ns)
        );
    }
    if !s.mount.is_empty() {
        let m: Vec<String> = s.mount.iter().map(|(n, c)| format!("{n} {c}")).collect();
        let _ = writeln!(o, "MOUNT: {}", m.join(" · "));
    }
    if !s.nlm.is_empty() || !s.nsm.is_empty() || s.locks_held > 0 || s.locks_waiting > 0 {
        let m: Vec<String> = s.nlm.iter().chain(&s.nsm).map(|(n, c)| format!("{n} {c}")).collect();
        let _ = writeln!(
            o,
            "locks: {} held, {} waiting, {} GRANTED callbacks ({} undelivered) · NLM/NSM: {}",
            s.locks_held,
            s.locks_waiting,
            s.lock_callbacks_delivered,
            s.lock_callbacks_failed,
            if m.is_empty() { "-".to_string() } else { m.join(" · ") }
        );
    }
    if s.nfs4_record_writes > 0 {
        let _ = writeln!(
            o,
            "NFSv4 clients that may reclaim: {} writes of the record{}",
            s.nfs4_record_writes,
            match s.nfs4_record_failures {
                0 => String::new(),
                n => format!(", {n} FAILED (registering clients are told to retry; see the log)"),
            }
        );
    }
    if !s.errors.is_empty() {
        let e: Vec<String> = s.errors.iter().map(|(n, c)| format!("{n} {c}")).collect();
        let _ = writeln!(o, "\nerrors: {}", e.join(" · "));
    }
    if let Some(last) = s.recent_errors.last() {
        let _ = writeln!(o, "last error: {} {} from {}", last.procedure, last.status, last.client);
    }
    if let Some(exports) = doc["exports"].as_array() {
        let _ = writeln!(o, "\nexports:");
        for e in exports {
            let _ = writeln!(
                o,
                "  {}  {}",
                e["path"].as_str().unwrap_or("?"),
                e["clients"].as_str().unwrap_or("")
            );
            let j = &e["journal"];
            if j.is_object() {
                let n = |k: &str| j[k].as_u64().unwrap_or(0);
                let per_write = n("records") as f64 / n("log_writes").max(1) as f64;
                let _ =
                    writeln!(
                    o,
                    "    journal: {} records ({}) in {} log writes ({per_write:.1} each), {} of {} in use, \
                     {} checkpoints, {} waits for space{}",
                    n("records"),
                    mib(n("bytes")),
                    n("log_writes"),
                    mib(n("used_bytes")),
                    mib(n("size_bytes")),
                    n("checkpoints"),
                    n("space_waits"),
                    if n("space_waits") > 0 { " (writers waited: a larger --journal-size helps)" } else { "" }
                );
            }
        }
    }
    let _ =
        writeln!(o, "\n{:<40} {:>10} {:>12} {:>12} {:>7}", "client", "calls", "read", "written", "idle s");
    for c in s.clients.iter().take(20) {
        let _ = writeln!(
            o,
            "{:<40} {:>10} {:>12} {:>12} {:>7}",
            c.addr.to_string(),
            c.calls,
            mib(c.bytes_read),
            mib(c.bytes_written),
            c.idle_s
        );
    }
    if s.clients.len() > 20 {
        let _ = writeln!(o, "… and {} more hosts", s.clients.len() - 20);
    }
    o
}

/// What happened between two snapshots, per second (`--watch`).
pub(crate) fn render_interval(prev: &StatsSnapshot, cur: &StatsSnapshot) -> String {
    let dt = ((cur.taken_unix_ms.saturating_sub(prev.taken_unix_ms)) as f64 / 1000.0).max(0.001);
    let mut o = String::new();
    let calls = |s: &StatsSnapshot, name: &str| s.nfs3.iter().find(|p| p.name == name).map_or(0, |p| p.calls);
    let total: u64 =
        cur.nfs3.iter().map(|p| p.calls).sum::<u64>() - prev.nfs3.iter().map(|p| p.calls).sum::<u64>();
    let _ = writeln!(
        o,
        "{:.0} calls/s · read {:.2} MB/s · written {:.2} MB/s · {} connections · {} threads · {} errors/s",
        total as f64 / dt,
        cur.bytes_read.saturating_sub(prev.bytes_read) as f64 / dt / 1e6,
        cur.bytes_written.saturating_sub(prev.bytes_written) as f64 / dt / 1e6,
        cur.connections_open,
        cur.threads,
        (cur.errors.iter().map(|e| e.1).sum::<u64>() - prev.errors.iter().map(|e| e.1).sum::<u64>()) as f64
            / dt,
    );
    let _ = writeln!(o, "{:<12} {:>10} {:>9} {:>9}", "procedure", "calls/s", "p50 ms", "p99 ms");
    for p in &cur.nfs3 {
        let n = p.calls - calls(prev, &p.name);
        if n > 0 {
            let _ = writeln!(
                o,
                "{:<12} {:>10.1} {:>9} {:>9}",
                p.name,
                n as f64 / dt,
                ms(p.latency.p50_ns),
                ms(p.latency.p99_ns)
            );
        }
    }
    o
}

/// `eagernfs stat` for the server whose control socket is `path`.
pub(crate) fn run_server(path: &Path, watch: Option<Duration>, json: bool) -> Result<()> {
    let (mut prev, doc) = fetch(path)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
        if watch.is_none() {
            return Ok(());
        }
    } else {
        print!("{}", render(&prev, &doc));
    }
    let Some(every) = watch else { return Ok(()) };
    loop {
        std::thread::sleep(every);
        let (cur, doc) = fetch(path)?;
        if json {
            println!("{}", serde_json::to_string(&doc)?);
        } else {
            println!();
            print!("{}", render_interval(&prev, &cur));
        }
        prev = cur;
    }
}

/// `eagernfs stat MOUNTPOINT`: the mount daemon's statistics.
pub(crate) fn run_mount(mountpoint: &Path, watch: Option<Duration>, json: bool) -> Result<()> {
    let sock = crate::mount::daemon_socket_path(mountpoint)
        .with_context(|| format!("{} is not a mount point name", mountpoint.display()))?;
    loop {
        let v = control::request(&sock, "stats").with_context(|| {
            format!("{} is not served by a running eagernfs mount daemon", mountpoint.display())
        })?;
        if json {
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            let s: super::mount::MountSnapshot =
                serde_json::from_value(v).context("reading the statistics")?;
            print!("{}", super::mount::render(&s));
        }
        let Some(every) = watch else { return Ok(()) };
        std::thread::sleep(every);
        println!();
    }
}
