//! `eagernfs mount` when the server goes away, and mounts of a directory
//! below the export.
//!
//! - soft mounts: with the server stopped, an operation that needs the
//!   wire fails with EIO once `timeo × (retrans + 1)` has passed (not
//!   before: the client must have retried), and the mount works again
//!   once the server is back;
//! - hard mounts (the default): the operation blocks, the daemon logs
//!   "not responding", and after the server restarts on the same port the
//!   operation completes with the right data and the daemon logs "OK";
//! - a URL naming a directory inside the export (`?export=` keeps the
//!   server from mounting the directory itself): the mount works there,
//!   over one TCP connection, and unmounting UMNTs the export.
//!
//! Each mount runs in the foreground (`mount -f`) so the test reads its log
//! and knows its pid. Needs root and /dev/fuse; otherwise each test prints
//! why it skips.

#[macro_use]
mod common;

use common::*;
use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long `eagernfs mount` may take to be ready, or to exit once
/// unmounted (debug build, busy 2-core machine).
const MOUNT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a blocked hard-mount operation may take to finish once the
/// server is back: the client's reconnect backoff is at most 10 s.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(60);

/// `major` from nfs(5): `timeo` is in deciseconds, and a call is given up
/// (soft) or reported (hard) after `timeo × (retrans + 1)`.
fn major_window(timeo_ds: u64, retrans: u64) -> Duration {
    Duration::from_millis(timeo_ds * 100 * (retrans + 1))
}

/// `eagernfs mount -f URL DIR -o OPTIONS`, its log read line by line;
/// unmounted (and the daemon reaped) on drop.
struct ForegroundMount {
    _dir: tempfile::TempDir,
    path: PathBuf,
    pid: libc::pid_t,
    /// New log lines, in order.
    lines: Receiver<String>,
    /// Every log line so far, for failure messages.
    log: Arc<Mutex<Vec<String>>>,
    /// Receives the daemon's exit status.
    exited: Receiver<std::io::Result<ExitStatus>>,
}

impl ForegroundMount {
    fn start(url: &str, options: &str) -> ForegroundMount {
        let dir = tempfile::Builder::new().prefix("eagernfs-mnt-").tempdir().unwrap();
        let path = dir.path().join("mnt");
        fs::create_dir(&path).unwrap();
        let mut cmd = Command::new(eagernfs_bin());
        cmd.args(["mount", "-f"]).arg(url).arg(&path);
        if !options.is_empty() {
            cmd.args(["-o", options]);
        }
        // The default filter (info) shows "mounted" and the transport's
        // warnings; a caller's RUST_LOG could hide them.
        cmd.env_remove("RUST_LOG").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn eagernfs mount -f");
        let pid = child.id() as libc::pid_t;
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, lines) = mpsc::channel();
        let log_writer = log.clone();
        // Drains the log for the daemon's whole life so it never blocks on
        // a full pipe.
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                log_writer.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
        });
        let (exit_tx, exited) = mpsc::channel();
        thread::spawn(move || {
            let _ = exit_tx.send(child.wait());
        });
        let mut m = ForegroundMount { _dir: dir, path, pid, lines, log, exited };
        if let Err(why) = m.wait_for_line(|l| l.contains("mounted "), MOUNT_TIMEOUT) {
            m.kill();
            panic!("mount -f {url} -o {options} never became ready: {why}\nlog:\n{}", m.log_text());
        }
        assert!(is_mounted(&m.path), "mount -f reported ready but {} is not mounted", m.path.display());
        m
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Waits for the next log line that satisfies `want`; returns it, or
    /// why not (timeout, or the daemon closed its log).
    fn wait_for_line(&mut self, want: impl Fn(&str) -> bool, timeout: Duration) -> Result<String, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if want(&line) => return Ok(line),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => return Err(format!("no such line within {timeout:?}")),
                Err(RecvTimeoutError::Disconnected) => return Err("the daemon's log ended".into()),
            }
        }
    }

    /// Kills the daemon (if it has not exited) and detaches the mount.
    fn kill(&self) {
        // Once the waiter thread has reaped the daemon its pid may belong to
        // someone else: signal only a daemon not yet reported as exited.
        // (A reap racing this check is possible but needs the pid to be
        // reused within microseconds.)
        if matches!(self.exited.try_recv(), Err(mpsc::TryRecvError::Empty)) {
            // SAFETY: a plain syscall on our own, still running child.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
        let _ = Command::new(eagernfs_bin()).args(["umount", "-z"]).arg(&self.path).status();
    }
}

impl Drop for ForegroundMount {
    fn drop(&mut self) {
        let mut cmd = Command::new(eagernfs_bin());
        cmd.arg("umount").arg(&self.path);
        let out = run_command(cmd, MOUNT_TIMEOUT);
        if !out.status.success() {
            self.kill();
            if !thread::panicking() {
                panic!(
                    "eagernfs umount {} failed: {}\nlog:\n{}",
                    self.path.display(),
                    out.stderr,
                    self.log_text()
                );
            }
            return;
        }
        match self.exited.recv_timeout(MOUNT_TIMEOUT) {
            Ok(Ok(status)) if status.success() || thread::panicking() => {}
            Ok(status) => {
                panic!("the mount daemon exited with {status:?} after umount\nlog:\n{}", self.log_text())
            }
            Err(_) => {
                self.kill();
                if !thread::panicking() {
                    panic!(
                        "the mount daemon did not exit within {MOUNT_TIMEOUT:?} of umount\nlog:\n{}",
                        self.log_text()
                    );
                }
            }
        }
    }
}

/// Runs `op` and returns its error and how long it took to fail; panics
/// if it succeeds.
#[track_caller]
fn timed_failure<T: std::fmt::Debug>(
    what: &str,
    op: impl FnOnce() -> std::io::Result<T>,
) -> (std::io::Error, Duration) {
    let started = Instant::now();
    let result = op();
    let took = started.elapsed();
    match result {
        Ok(v) => panic!("{what} succeeded with the server stopped: {v:?}"),
        Err(e) => (e, took),
    }
}

/// A soft mount's failure: EIO, no sooner than the major timeout (the
/// client retried for the whole window), and not much later.
#[track_caller]
fn assert_soft_failure(what: &str, err: &std::io::Error, took: Duration, window: Duration, log: &str) {
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{what}: want EIO, got {err}\nlog:\n{log}");
    assert!(took >= window, "{what} failed after {took:?}, before the major timeout {window:?}: no retries");
    let bound = window * 3 + Duration::from_secs(2);
    assert!(
        took <= bound,
        "{what} took {took:?} to fail, more than {bound:?} (window {window:?})\nlog:\n{log}"
    );
    eprintln!("{what}: EIO after {took:?} (window {window:?})");
}

#[test]
fn soft_mount_fails_with_eio_after_the_major_timeout() {
    require_fuse!("soft_mount_fails_with_eio_after_the_major_timeout");
    if ganesha_override()
        && skip(
            "soft_mount_fails_with_eio_after_the_major_timeout",
            "stops, restarts and inspects the eagernfs server",
        )
    {
        return;
    }
    let export = tempfile::tempdir().unwrap();
    let data = pattern_bytes(3, 0, 200 * 1024);
    for name in ["unseen", "seen", "dirty"] {
        fs::write(export.path().join(name), &data).unwrap();
    }
    let mut server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let (timeo_ds, retrans) = (5, 2);
    let window = major_window(timeo_ds, retrans);
    // NFSv3: after the restart an NFSv4 server is in its grace period until every client it
    // knew has reclaimed (here the idle `noac` mount too), and a soft mount gives up on an open
    // the server answers GRACE for as long; NFSv3 reads know no grace.
    let soft = format!("soft,timeo={timeo_ds},retrans={retrans},vers=3");
    let m = ForegroundMount::start(&server.url(""), &soft);
    // noac: every stat asks the server.
    let noac = ForegroundMount::start(&server.url(""), &format!("{soft},noac"));
    assert_eq!(fs::metadata(noac.path("seen")).unwrap().len(), data.len() as u64);
    let dirty = OpenOptions::new().write(true).open(m.path("dirty")).unwrap();

    server.stop();

    // A file this mount never looked up: its LOOKUP needs the wire.
    let (err, took) = timed_failure("read of an unseen file", || fs::read(m.path("unseen")));
    assert_soft_failure("read of an unseen file", &err, took, window, &m.log_text());

    // A file already looked up, stat'ed again with noac: GETATTR.
    let (err, took) = timed_failure("noac stat", || fs::metadata(noac.path("seen")));
    assert_soft_failure("noac stat", &err, took, window, &noac.log_text());

    // Dirty data that must reach the server: the write may be cached, the
    // fsync may not return before the WRITE is answered.
    let (err, took) = timed_failure("write + fsync", || {
        dirty.write_all_at(b"never arrives", 0)?;
        dirty.sync_all()
    });
    assert_soft_failure("write + fsync", &err, took, window, &m.log_text());
    drop(dirty);

    // The server is back (same port, same handles): the soft mount works
    // again without remounting.
    server.restart();
    assert!(fs::read(m.path("unseen")).unwrap() == data, "read after the server came back differs");
    assert_eq!(fs::metadata(noac.path("seen")).unwrap().len(), data.len() as u64);
}

#[test]
fn hard_mount_blocks_until_the_server_is_back() {
    require_fuse!("hard_mount_blocks_until_the_server_is_back");
    if ganesha_override()
        && skip(
            "hard_mount_blocks_until_the_server_is_back",
            "stops, restarts and inspects the eagernfs server",
        )
    {
        return;
    }
    let export = tempfile::tempdir().unwrap();
    let data = pattern_bytes(5, 0, 300 * 1024 + 17);
    fs::write(export.path().join("old"), &data).unwrap();
    let mut server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let port = server.port();
    let (timeo_ds, retrans) = (5, 1);
    let window = major_window(timeo_ds, retrans);
    // No `hard`: it is the default.
    let mut m = ForegroundMount::start(&server.url(""), &format!("timeo={timeo_ds},retrans={retrans}"));
    assert!(fs::read_dir(m.path("")).unwrap().count() == 1);

    server.stop();

    // A read of a file not looked up yet, and a create + write + fsync:
    // both need the server.
    let (read_tx, read_rx) = mpsc::channel();
    let read_path = m.path("old");
    thread::spawn(move || {
        let _ = read_tx.send(fs::read(read_path));
    });
    let (write_tx, write_rx) = mpsc::channel();
    let (write_path, written) = (m.path("new"), pattern_bytes(6, 0, 100 * 1024));
    let to_write = written.clone();
    thread::spawn(move || {
        let result = File::create(&write_path).and_then(|f| {
            f.write_all_at(&to_write, 0)?;
            f.sync_all()
        });
        let _ = write_tx.send(result);
    });

    // A major timeout passed for at least one call with nothing answering.
    let not_responding = format!("NFS server 127.0.0.1:{port} not responding");
    if let Err(why) = m.wait_for_line(|l| l.contains(&not_responding), RECOVERY_TIMEOUT) {
        panic!("no '{not_responding}' in the log: {why}\nlog:\n{}", m.log_text());
    }
    // Both calls are past the point where a soft mount would have failed
    // them; give a wrong failure one more window to show.
    match read_rx.recv_timeout(window) {
        Err(RecvTimeoutError::Timeout) => {}
        other => panic!("the read finished while the server was down: {other:?}"),
    }
    match write_rx.recv_timeout(window) {
        Err(RecvTimeoutError::Timeout) => {}
        other => panic!("the write finished while the server was down: {other:?}"),
    }

    let down_since = Instant::now();
    server.restart();
    let got = read_rx.recv_timeout(RECOVERY_TIMEOUT).unwrap_or_else(|e| {
        panic!(
            "the read did not finish within {RECOVERY_TIMEOUT:?} of the restart: {e}\nlog:\n{}",
            m.log_text()
        )
    });
    let got = got.unwrap_or_else(|e| panic!("the blocked read failed: {e}\nlog:\n{}", m.log_text()));
    assert!(got == data, "the blocked read returned other data ({} bytes)", got.len());
    let wrote = write_rx.recv_timeout(RECOVERY_TIMEOUT).unwrap_or_else(|e| {
        panic!(
            "the write did not finish within {RECOVERY_TIMEOUT:?} of the restart: {e}\nlog:\n{}",
            m.log_text()
        )
    });
    wrote.unwrap_or_else(|e| panic!("the blocked write failed: {e}\nlog:\n{}", m.log_text()));
    assert!(
        fs::read(export.path().join("new")).unwrap() == written,
        "the written file differs on the server"
    );
    eprintln!("blocked operations finished {:?} after the restart", down_since.elapsed());

    let ok = format!("NFS server 127.0.0.1:{port} OK");
    if let Err(why) = m.wait_for_line(|l| l.contains(&ok), RECOVERY_TIMEOUT) {
        panic!("no '{ok}' in the log after the restart: {why}\nlog:\n{}", m.log_text());
    }
}

/// Established TCP connections from process `pid` to local port `port`:
/// its socket inodes (/proc/PID/fd) matched against /proc/net/tcp{,6}.
fn tcp_connections_to(pid: libc::pid_t, port: u16) -> usize {
    let inodes: HashSet<String> = fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter_map(|target| {
            let t = target.to_str()?;
            Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let mut n = 0;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(rem), Some(state), Some(inode)) = (f.get(2), f.get(3), f.get(9)) else { continue };
            let rem_port = rem.rsplit_once(':').and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            // 01 is TCP_ESTABLISHED.
            if rem_port == Some(port) && *state == "01" && inodes.contains(*inode) {
                n += 1;
            }
        }
    }
    n
}

/// The server's MOUNT DUMP list: the paths clients have mounted and not
/// yet UMNTed.
fn mount_dump(port: u16) -> Vec<String> {
    use eagernfs_client::{mount::side_client, Cred, MountOptions};
    use eagernfs_proto::mount::{MountRes, MOUNTPROC_DUMP, MOUNT_PROGRAM, MOUNT_V3};
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let client = side_client(addr, &MountOptions::default());
        let cred = Cred::root();
        let call = client.call(MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC_DUMP, &cred, &());
        let mut body = tokio::time::timeout(TOOL_TIMEOUT, call).await.expect("DUMP timed out").expect("DUMP");
        match MountRes::decode(MOUNT_V3, MOUNTPROC_DUMP, &mut body).expect("DUMP reply decodes") {
            MountRes::Dump(list) => {
                list.0.iter().map(|m| String::from_utf8_lossy(&m.ml_directory.0).into_owned()).collect()
            }
            other => panic!("DUMP answered {other:?}"),
        }
    })
}

#[test]
fn mount_below_the_export_uses_one_connection_and_umnts() {
    require_fuse!("mount_below_the_export_uses_one_connection_and_umnts");
    if ganesha_override()
        && skip(
            "mount_below_the_export_uses_one_connection_and_umnts",
            "stops, restarts and inspects the eagernfs server",
        )
    {
        return;
    }
    let export = tempfile::tempdir().unwrap();
    let disk = export.path().canonicalize().unwrap();
    fs::create_dir_all(disk.join("sub/dir")).unwrap();
    fs::write(disk.join("sub/dir/existing"), b"inside sub/dir").unwrap();
    fs::write(disk.join("top"), b"at the export's root").unwrap();
    let server = Server::eagernfs(&disk, &["-o", "rw,no_root_squash"]);
    let export_path = disk.display().to_string();
    // `export=`: MNT the export itself, so the mount reaches sub/dir by
    // LOOKUP and serves it with a client rooted there.
    let url = server.url_with("/sub/dir", &format!("export={export_path}"));
    // NFSv3: MNT and UMNT are what is checked (NFSv4 has no MOUNT).
    let m = ForegroundMount::start(&url, "vers=3");

    let names: Vec<String> =
        fs::read_dir(m.path("")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names, ["existing"], "the mount's root is sub/dir");
    assert_eq!(fs::read(m.path("existing")).unwrap(), b"inside sub/dir");
    fs::write(m.path("made"), b"written through the mount").unwrap();
    assert_eq!(fs::read(disk.join("sub/dir/made")).unwrap(), b"written through the mount");
    assert!(!disk.join("made").exists(), "the write landed at the export's root");

    // MNT's side connection closes once the mount is made; what stays is
    // the NFS connection, one for the export and its subdirectory alike,
    // and the lanes its reader threads made for short calls (which
    // `eagernfs stat` counts). Wait for the side connection to go (a
    // bounded poll of a condition).
    let lanes = || -> usize {
        let mut cmd = Command::new(eagernfs_bin());
        cmd.args(["stat", "--json", m.path("").to_str().unwrap()]);
        let json: serde_json::Value =
            serde_json::from_str(&run_command(cmd, MOUNT_TIMEOUT).stdout_text()).unwrap();
        let made = json["lane_connects"].as_u64().expect("lane_connects in eagernfs stat --json");
        let failed = json["lane_failures"].as_u64().expect("lane_failures in eagernfs stat --json");
        (made - failed) as usize
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut n, mut l) = (tcp_connections_to(m.pid, server.port()), lanes());
    while n != 1 + l && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
        (n, l) = (tcp_connections_to(m.pid, server.port()), lanes());
    }
    assert_eq!(n, 1 + l, "the mount holds {n} connections to the server, {l} of them lanes");
    assert!(l <= eagernfs_client::lane::LANES_MAX, "{l} lanes");

    assert_eq!(mount_dump(server.port()), std::slice::from_ref(&export_path), "the server records the MNT");
    drop(m);
    assert!(mount_dump(server.port()).is_empty(), "unmounting did not UMNT {export_path}");
}
