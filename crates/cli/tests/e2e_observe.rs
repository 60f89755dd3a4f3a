//! Running eagernfs as a service (issue 10): `eagernfs stat` over the control socket,
//! Prometheus `/metrics`, the status page in a real (headless) browser, and reloading the
//! exports file with `eagernfs reload` and SIGHUP.
//!
//! Clients are libnfs's tools and nfsop, so what is counted is what an independent client did.

mod common;

use common::*;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn eagernfs(args: &[&str]) -> ToolOutput {
    let mut cmd = Command::new(eagernfs_bin());
    cmd.args(args);
    run_command(cmd, TOOL_TIMEOUT)
}

fn upload(server: &Server, name: &str, bytes: usize) {
    let scratch = tempfile::tempdir().unwrap();
    let src = scratch.path().join("src");
    std::fs::write(&src, pattern_bytes(5, 0, bytes)).unwrap();
    nfs_cp(&src, server.url(&format!("/{name}"))).assert_success("upload");
}

/// A plain HTTP/1.1 GET; the body.
fn http_get(port: u16, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    body.to_string()
}

#[test]
fn stat_reports_the_calls_of_a_running_server() {
    if ganesha_override() && skip("stat_reports_the_calls_of_a_running_server", "eagernfs-only feature") {
        return;
    }
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash,insecure"]);
    upload(&server, "f", 300_000);
    nfs_ls(&server.url("")).assert_success("ls");
    let state = server.state_dir();
    let sock = state.join("control.sock");
    assert_eq!(std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777, 0o600, "root only");

    let out = eagernfs(&["stat", "--state-dir", state.to_str().unwrap()]);
    out.assert_success("eagernfs stat");
    let text = out.stdout_text();
    // A table row: the procedure's name, then its call count.
    let row = |name: &str| {
        text.lines()
            .find(|l| {
                let mut w = l.split_whitespace();
                w.next() == Some(name) && w.next().is_some_and(|c| c.parse::<u64>().is_ok())
            })
            .map(str::to_string)
    };
    let write = row("WRITE").unwrap_or_else(|| panic!("no WRITE row in\n{text}"));
    let calls: u64 = write.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(calls >= 1, "{write}");
    assert!(row("READDIRPLUS").is_some() || row("READDIR").is_some(), "the ls is counted:\n{text}");
    assert!(text.contains("127.0.0.1"), "the client host is listed:\n{text}");
    assert!(text.contains(&export.path().canonicalize().unwrap().display().to_string()), "exports listed");

    let json = eagernfs(&["stat", "--json", "--state-dir", state.to_str().unwrap()]);
    json.assert_success("eagernfs stat --json");
    let v: serde_json::Value = serde_json::from_str(&json.stdout_text()).unwrap();
    assert_eq!(v["stats"]["bytes_written"].as_u64(), Some(300_000));

    // The socket goes with the server.
    drop(server);
    assert!(!sock.exists(), "control socket left behind");
    let gone = eagernfs(&["stat", "--state-dir", state.to_str().unwrap()]);
    assert!(!gone.status.success());
    assert!(gone.stderr.contains("is the server running"), "{}", gone.stderr);
}

#[test]
fn metrics_speak_prometheus() {
    if ganesha_override() && skip("metrics_speak_prometheus", "eagernfs-only feature") {
        return;
    }
    let export = tempfile::tempdir().unwrap();
    let (port, _) = free_ports();
    let metrics = format!("127.0.0.1:{port}");
    let server =
        Server::eagernfs(export.path(), &["-o", "rw,no_root_squash,insecure", "--metrics", &metrics]);
    upload(&server, "f", 100_000);
    let text = http_get(port, "/metrics");
    assert!(text.contains("# TYPE eagernfs_server_calls_total counter"), "{text}");
    assert!(text.contains("eagernfs_server_written_bytes_total 100000"), "{text}");
    let write_calls = text
        .lines()
        .find(|l| l.starts_with("eagernfs_server_calls_total{program=\"nfs3\",procedure=\"WRITE\"}"))
        .unwrap_or_else(|| panic!("no WRITE counter:\n{text}"));
    assert!(write_calls.rsplit(' ').next().unwrap().parse::<u64>().unwrap() >= 1);
    // Histogram buckets are cumulative and end in +Inf = _count.
    let bucket = |le: &str| -> u64 {
        let key = format!("eagernfs_server_call_duration_seconds_bucket{{procedure=\"WRITE\",le=\"{le}\"}}");
        text.lines().find(|l| l.starts_with(&key)).unwrap().rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(bucket("0.001") <= bucket("0.01") && bucket("0.01") <= bucket("+Inf"));
    let count = text
        .lines()
        .find(|l| l.starts_with("eagernfs_server_call_duration_seconds_count{procedure=\"WRITE\"}"))
        .unwrap();
    assert_eq!(count.rsplit(' ').next().unwrap().parse::<u64>().unwrap(), bucket("+Inf"));
    let api: serde_json::Value = serde_json::from_str(&http_get(port, "/api/stats")).unwrap();
    assert!(api["stats"]["nfs3"].as_array().unwrap().iter().any(|p| p["name"] == "WRITE"));
}

#[test]
fn a_journaled_export_shows_its_journal_in_stat_and_metrics() {
    if ganesha_override()
        && skip("a_journaled_export_shows_its_journal_in_stat_and_metrics", "eagernfs-only feature")
    {
        return;
    }
    let export = tempfile::tempdir().unwrap();
    let journal_dir = tempfile::tempdir().unwrap();
    let journal = journal_dir.path().join("journal");
    let (port, _) = free_ports();
    let metrics = format!("127.0.0.1:{port}");
    let server = Server::eagernfs(
        export.path(),
        &[
            "-o",
            "rw,no_root_squash,insecure",
            "--metrics",
            &metrics,
            "--journal",
            journal.to_str().unwrap(),
            "--journal-size",
            "8MiB",
        ],
    );
    upload(&server, "f", 200_000);
    let state = server.state_dir();
    let json = eagernfs(&["stat", "--json", "--state-dir", state.to_str().unwrap()]);
    json.assert_success("eagernfs stat --json");
    let v: serde_json::Value = serde_json::from_str(&json.stdout_text()).unwrap();
    let j = &v["exports"][0]["journal"];
    let n = |k: &str| j[k].as_u64().unwrap_or_else(|| panic!("no journal.{k} in {v}"));
    assert!(n("records") >= 1 && n("log_writes") >= 1, "{j}");
    assert!(n("bytes") >= 200_000, "the uploaded data went through the log: {j}");
    assert_eq!(n("size_bytes"), 8 << 20);
    let text = eagernfs(&["stat", "--state-dir", state.to_str().unwrap()]);
    text.assert_success("eagernfs stat");
    assert!(text.stdout_text().contains("journal: "), "{}", text.stdout_text());
    let prom = http_get(port, "/metrics");
    let export_path = export.path().canonicalize().unwrap().display().to_string();
    let records = prom
        .lines()
        .find(|l| l.starts_with(&format!("eagernfs_journal_records_total{{export=\"{export_path}\"}}")))
        .unwrap_or_else(|| panic!("no journal records counter:\n{prom}"));
    assert_eq!(records.rsplit(' ').next().unwrap().parse::<u64>().unwrap(), n("records"));
    assert!(prom.contains("# TYPE eagernfs_journal_log_writes_total counter"), "{prom}");
}

/// The headless browser this machine has, if any.
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().map(|o| o.status.success()).unwrap_or(false))
}

/// Loads `url` in headless chromium, lets its scripts run for `ms` of (virtual) time, and
/// returns the DOM as it is then.
fn browser_dom(browser: &str, url: &str, ms: u32) -> String {
    let mut cmd = Command::new(browser);
    cmd.args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("--virtual-time-budget={ms}"))
        .arg(url);
    let out = run_command(cmd, Duration::from_secs(120));
    out.assert_success("chromium --dump-dom");
    out.stdout_text()
}

/// `attr="value"` of the element with `id`, from a serialized DOM.
fn attr_of(dom: &str, id: &str, attr: &str) -> Option<String> {
    let start = dom.find(&format!("id=\"{id}\""))?;
    let tag_end = start + dom[start..].find('>')?;
    let tag = &dom[start..tag_end];
    let at = tag.find(&format!("{attr}=\""))? + attr.len() + 2;
    Some(tag[at..at + tag[at..].find('"')?].to_string())
}

#[test]
fn status_page_shows_live_numbers_in_a_real_browser() {
    if ganesha_override() && skip("status_page_shows_live_numbers", "eagernfs-only feature") {
        return;
    }
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have chromium (scripts/install-deps.sh installs it)"
        );
        skip("status_page_shows_live_numbers_in_a_real_browser", "no chromium here");
        return;
    };
    let export = tempfile::tempdir().unwrap();
    let (port, _) = free_ports();
    let metrics = format!("127.0.0.1:{port}");
    let server =
        Server::eagernfs(export.path(), &["-o", "rw,no_root_squash,insecure", "--metrics", &metrics]);
    // Load while the page watches: one libnfs client writing back to back, so every one of the
    // page's polls (milliseconds apart in real time under chromium's virtual time) sees calls.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut op = Nfsop::start(&server.url(""));
    let id = op.ok("open /load rwc 0644");
    assert_eq!(op.ok(&format!("pwrite {id} 0 pat:9:4096")), "4096", "the load runs before the page loads");
    let loader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            // Bounded: the page is read within seconds; 200k writes is far beyond that.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 200_000 {
                op.ok(&format!("pwrite {id} {} pat:9:4096", (n % 64) * 4096));
                n += 1;
            }
            n
        })
    };
    let dom = browser_dom(browser, &format!("http://127.0.0.1:{port}/"), 5000);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let uploads = loader.join().unwrap();
    assert!(uploads > 0);
    let rate: f64 = attr_of(&dom, "total-rate", "data-value").expect("rate tile").parse().unwrap();
    assert!(rate > 0.0, "the page computed no call rate from live numbers");
    let points: u64 = attr_of(&dom, "rate-chart", "data-points").expect("chart").parse().unwrap();
    assert!(points > 0, "the rate chart drew nothing");
    let series = attr_of(&dom, "rate-chart", "data-series").unwrap();
    assert!(series.split(',').any(|s| s == "WRITE"), "WRITE is charted: {series}");
    assert!(dom.contains("<td>WRITE</td>"), "the procedure table lists WRITE");
    assert!(dom.contains(&export.path().canonicalize().unwrap().display().to_string()), "exports listed");
    drop(server);
}

fn write_exports(file: &Path, lines: &[String]) {
    std::fs::write(file, lines.join("\n") + "\n").unwrap();
}

#[test]
fn reload_applies_a_changed_exports_file_and_refuses_a_bad_one() {
    if ganesha_override() && skip("reload_applies_a_changed_exports_file", "eagernfs-only feature") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(a.join("f"), b"in a").unwrap();
    let (a, b) = (a.canonicalize().unwrap(), b.canonicalize().unwrap());
    let file = root.path().join("exports");
    let rule = "127.0.0.0/8(rw,no_root_squash,insecure)";
    write_exports(&file, &[format!("{} {rule}", a.display())]);
    let server = Server::eagernfs(&a, &["--exports", file.to_str().unwrap()]);
    let state = server.state_dir();
    let reload = || eagernfs(&["reload", "--state-dir", state.to_str().unwrap()]);
    let url_b = server.url_for_path(b.to_str().unwrap(), "");
    assert!(!nfs_ls(&url_b).status.success(), "b is not exported yet");
    // A client holds a file of a open across the reloads.
    let mut held = Nfsop::start(&server.url_for_path(a.to_str().unwrap(), ""));
    let id = held.ok("open /f r");

    // Added: b. Changed: a becomes read-only.
    write_exports(
        &file,
        &[format!("{} 127.0.0.0/8(ro,insecure)", a.display()), format!("{} {rule}", b.display())],
    );
    let out = reload();
    out.assert_success("eagernfs reload");
    assert!(out.stdout_text().contains("added"), "{}", out.stdout_text());
    nfs_ls(&url_b).assert_success("b after the reload");
    let scratch = tempfile::tempdir().unwrap();
    let src = scratch.path().join("x");
    std::fs::write(&src, b"x").unwrap();
    let refused = nfs_cp(&src, server.url_for_path(&format!("{}/new", a.display()), ""));
    assert!(!refused.status.success(), "a is read-only now");
    assert_eq!(held.ok(&format!("pread {id} 0 4")), "696e2061", "the open file still reads");

    // A bad file is refused whole: b stays, a stays read-only.
    write_exports(&file, &[format!("{} {rule}", b.display()), "/nonexistent( 127.0.0.1".into()]);
    let bad = reload();
    assert!(!bad.status.success(), "a bad exports file was accepted");
    assert!(bad.stderr.contains("line 2"), "the error names the line: {}", bad.stderr);
    nfs_ls(&url_b).assert_success("b after a refused reload");
    assert_eq!(held.ok(&format!("pread {id} 0 4")), "696e2061", "a is still exported");

    // Removed: a, this time by SIGHUP. Its handles are stale from the next call.
    write_exports(&file, &[format!("{} {rule}", b.display())]);
    server.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + WAIT_FOR_RELOAD;
    loop {
        match held.cmd(&format!("pread {id} 0 4")) {
            // libnfs turns the status into an errno; the server's count says which.
            Reply::Err { .. } => break,
            Reply::Ok(_) => {
                assert!(std::time::Instant::now() < deadline, "SIGHUP did not reload");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    nfs_ls(&url_b).assert_success("b after SIGHUP");
    let stats = eagernfs(&["stat", "--json", "--state-dir", state.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&stats.stdout_text()).unwrap();
    let stale = v["stats"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e[0] == "NFS3ERR_STALE" && e[1].as_u64() > Some(0));
    assert!(stale, "the removed export's handle was answered NFS3ERR_STALE: {}", v["stats"]["errors"]);
    drop(held);
    drop(server);
}

/// SIGHUP is asynchronous: how long the test may poll for its effect.
const WAIT_FOR_RELOAD: Duration = Duration::from_secs(30);
