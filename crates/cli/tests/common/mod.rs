//! Shared end-to-end harness: starts servers (eagernfs, or nfs-ganesha as the reference) and
//! drives real NFSv3 clients (libnfs-utils and our `nfsop`) against them with bounded timeouts.
//!
//! Layout:
//! - [`Server`]: an eagernfs process (`--listen 127.0.0.1:0`, private `--state-dir`) or a
//!   ganesha instance via `scripts/ganesha.sh`; SIGTERM + wait on drop, `restart()` keeps the
//!   port and the state dir so file handles stay valid.
//! - [`run_tool`], [`nfs_ls`], [`nfs_cp`], [`nfs_cat`]: run a client with a deadline and
//!   capture its output.
//! - [`Nfsop`]: one long-lived `tests/clients/nfsop.c` process (compiled on first use) spoken to
//!   line by line, so a test can keep a file open across a server restart.
//! - [`pattern_bytes`]: the deterministic data pattern nfsop's `pat:SEED:LEN` also produces.
//! - [`ceph`]: the Ceph test cluster (or why a test skips), and heads of a cluster with their
//!   clients.
//! - [`v4`]: a small NFSv4.1 client (a session, COMPOUNDs, AUTH_SYS as any uid).
//!
//! Setting `EAGERNFS_TEST_SERVER=ganesha` makes `Server::eagernfs` start ganesha instead
//! (mapping `-o ro|rw|root_squash|no_root_squash`). That is how the harness and the tests are
//! validated against a known-good server; tests of eagernfs-only contracts consult
//! [`Server::is_ganesha`] and say so when they skip.

// Each test binary uses a different subset of the harness.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

pub(crate) mod ceph;
pub(crate) mod v4;

/// How long a server may take to print its listening line: a bound for a server that hangs,
/// not a guess at how long a start takes. A server bounds its own start (a CephFS export: each
/// step of connecting to the cluster at --ceph-connect-timeout, 30 s), and on a busy 2-core CI
/// machine with a Ceph test cluster beside it a debug build's start took longer than 30 s.
pub(crate) const SERVER_START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a server may take to drain and exit after SIGTERM.
pub(crate) const SERVER_STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default bound for one client tool invocation (a 64 MiB copy takes well under a second).
pub(crate) const TOOL_TIMEOUT: Duration = Duration::from_secs(120);
/// Bound for one nfsop command round trip.
pub(crate) const NFSOP_REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// The first stdout line eagernfs prints once its socket is bound.
const LISTENING_PREFIX: &str = "eagernfs: listening on 127.0.0.1:";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

/// Whether this process runs as root. Ownership and squash tests need it: a non-root server
/// cannot create files owned by anyone else, so those tests skip (with a message) otherwise.
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Prints why a test is skipping; returns true so callers can write `if skip(..) { return }`.
pub(crate) fn skip(test: &str, reason: &str) -> bool {
    eprintln!("SKIP {test}: {reason}");
    true
}

/// True when `EAGERNFS_TEST_SERVER=ganesha` redirects eagernfs tests to ganesha.
pub(crate) fn ganesha_override() -> bool {
    std::env::var("EAGERNFS_TEST_SERVER").map(|v| v == "ganesha").unwrap_or(false)
}

/// Ganesha must start in CI; elsewhere a missing ganesha only skips the reference test.
fn ganesha_required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var_os("EAGERNFS_REQUIRE_GANESHA").is_some()
}

/// Two distinct free loopback ports. Both are held until both are known so they differ; the
/// usual bind-then-release race is acceptable because nothing else on 127.0.0.1 hunts ports.
pub(crate) fn free_ports() -> (u16, u16) {
    let a = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let b = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    (a.local_addr().unwrap().port(), b.local_addr().unwrap().port())
}

enum Flavor {
    Eagernfs {
        /// The running server; `None` only transiently inside `restart`.
        child: Option<Child>,
        /// The arguments after `serve DIR`, replayed on restart.
        extra_args: Vec<String>,
        /// What to serve instead of `dir` (a `cephfs://` URL).
        operand: Option<String>,
    },
    Ganesha {
        /// Passed to `ganesha.sh` via the environment on every (re)start.
        env: Vec<(String, String)>,
    },
}

/// A running NFSv3 server that tests point clients at.
pub(crate) struct Server {
    flavor: Flavor,
    /// The exported directory (absolute, canonical), which is also the MOUNT path.
    dir: PathBuf,
    /// NFS port; also the MOUNT port for eagernfs.
    port: u16,
    mount_port: u16,
    /// Holds the eagernfs `--state-dir` (file-handle key), ganesha's run dir, and server logs;
    /// it lives as long as the server so restarts reuse it.
    scratch: tempfile::TempDir,
}

impl Server {
    /// Starts `eagernfs serve DIR --listen 127.0.0.1:0 --state-dir <tmp> EXTRA_ARGS...`, or
    /// ganesha with equivalent options when `EAGERNFS_TEST_SERVER=ganesha`.
    pub(crate) fn eagernfs(dir: &Path, extra_args: &[&str]) -> Server {
        let dir = dir.canonicalize().expect("export dir exists");
        if ganesha_override() {
            let env = ganesha_env_for(extra_args);
            return Server::start_ganesha(&dir, env).unwrap_or_else(|e| panic!("{e}"));
        }
        let scratch = tempfile::Builder::new().prefix("eagernfs-server-").tempdir().unwrap();
        fs::create_dir(scratch.path().join("state")).unwrap();
        let extra_args: Vec<String> = extra_args.iter().map(|s| s.to_string()).collect();
        let mut server = Server {
            flavor: Flavor::Eagernfs { child: None, extra_args, operand: None },
            dir,
            port: 0,
            mount_port: 0,
            scratch,
        };
        server.spawn_eagernfs("127.0.0.1:0");
        server
    }

    /// Starts `eagernfs serve OPERAND --listen 127.0.0.1:0 --state-dir <tmp> EXTRA_ARGS...` for
    /// an export clients mount as `mount_path` (a `cephfs://` URL serves its PATH).
    pub(crate) fn eagernfs_serving(operand: &str, mount_path: &Path, extra_args: &[&str]) -> Server {
        let scratch = tempfile::Builder::new().prefix("eagernfs-server-").tempdir().unwrap();
        fs::create_dir(scratch.path().join("state")).unwrap();
        let extra_args: Vec<String> = extra_args.iter().map(|s| s.to_string()).collect();
        let mut server = Server {
            flavor: Flavor::Eagernfs { child: None, extra_args, operand: Some(operand.to_string()) },
            dir: mount_path.to_path_buf(),
            port: 0,
            mount_port: 0,
            scratch,
        };
        server.spawn_eagernfs("127.0.0.1:0");
        server
    }

    /// Starts nfs-ganesha (FSAL VFS) exporting `dir` read-write without root squash. Returns
    /// `None`, after printing why, when ganesha cannot start on this machine; panics instead
    /// when `CI` or `EAGERNFS_REQUIRE_GANESHA` is set, because there it must work.
    pub(crate) fn ganesha(dir: &Path) -> Option<Server> {
        let dir = dir.canonicalize().expect("export dir exists");
        match Server::start_ganesha(&dir, Vec::new()) {
            Ok(server) => Some(server),
            Err(e) if ganesha_required() => panic!("ganesha is required here but failed: {e}"),
            Err(e) => {
                eprintln!("SKIP: ganesha could not start: {e}");
                None
            }
        }
    }

    /// [`Server::ganesha`] with its lock manager (NLM) on, at a free port.
    #[allow(dead_code)] // only the lock tests use it
    pub(crate) fn ganesha_with_locks(dir: &Path) -> Option<Server> {
        let dir = dir.canonicalize().expect("export dir exists");
        let nlm_port =
            TcpListener::bind("127.0.0.1:0").expect("bind a free port").local_addr().unwrap().port();
        let env = vec![("GANESHA_NLM".into(), "1".into()), ("GANESHA_NLM_PORT".into(), nlm_port.to_string())];
        match Server::start_ganesha(&dir, env) {
            Ok(server) => Some(server),
            Err(e) if ganesha_required() => panic!("ganesha is required here but failed: {e}"),
            Err(e) => {
                eprintln!("SKIP: ganesha could not start: {e}");
                None
            }
        }
    }

    /// [`Server::ganesha`] serving NFSv4.1/4.2 only (`Protocols = 4`: no MOUNT, no NFSv3).
    #[allow(dead_code)] // only the NFSv4 mount tests use it
    pub(crate) fn ganesha_nfs4_only(dir: &Path) -> Option<Server> {
        let dir = dir.canonicalize().expect("export dir exists");
        match Server::start_ganesha(&dir, vec![("GANESHA_NFS4".into(), "only".into())]) {
            Ok(server) => Some(server),
            Err(e) if ganesha_required() => panic!("ganesha is required here but failed: {e}"),
            Err(e) => {
                eprintln!("SKIP: ganesha could not start: {e}");
                None
            }
        }
    }

    fn start_ganesha(dir: &Path, mut env: Vec<(String, String)>) -> Result<Server, String> {
        let scratch = tempfile::Builder::new().prefix("eagernfs-ganesha-").tempdir().unwrap();
        let (port, mount_port) = free_ports();
        env.push(("GANESHA_RUN_DIR".into(), scratch.path().join("run").display().to_string()));
        env.push(("GANESHA_MNT_PORT".into(), mount_port.to_string()));
        let server =
            Server { flavor: Flavor::Ganesha { env }, dir: dir.to_path_buf(), port, mount_port, scratch };
        server.ganesha_script("start")?;
        Ok(server)
    }

    fn ganesha_script(&self, action: &str) -> Result<(), String> {
        let Flavor::Ganesha { env } = &self.flavor else { unreachable!("not a ganesha server") };
        let script = repo_root().join("scripts/ganesha.sh");
        let mut cmd = Command::new(&script);
        cmd.arg(action);
        if action == "start" {
            cmd.arg(&self.dir).arg(self.port.to_string()).arg("vfs");
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        // The script bounds its own waits (30 s start, 30 s stop, then SIGKILL).
        let out = run_command(cmd, Duration::from_secs(90));
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("{} {action} failed ({}): {}", script.display(), out.status, out.stderr))
        }
    }

    /// True if this server is ganesha (directly or through `EAGERNFS_TEST_SERVER`).
    pub(crate) fn is_ganesha(&self) -> bool {
        matches!(self.flavor, Flavor::Ganesha { .. })
    }

    fn log_path(&self) -> PathBuf {
        match self.flavor {
            Flavor::Eagernfs { .. } => self.scratch.path().join("eagernfs.log"),
            Flavor::Ganesha { .. } => self.scratch.path().join("run/ganesha.log"),
        }
    }

    fn spawn_eagernfs(&mut self, listen: &str) {
        let log_path = self.log_path();
        let state_dir = self.scratch.path().join("state");
        let Flavor::Eagernfs { child, extra_args, operand } = &mut self.flavor else { unreachable!() };
        let log = fs::OpenOptions::new().create(true).append(true).open(&log_path).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_eagernfs"));
        cmd.arg("serve");
        // `--exports FILE` among the extra arguments replaces the directory operand.
        if let Some(op) = operand {
            cmd.arg(op);
        } else if !extra_args.iter().any(|a| a == "--exports") {
            cmd.arg(&self.dir);
        }
        cmd.args(["--listen", listen])
            .arg("--state-dir")
            .arg(&state_dir)
            .args(extra_args.iter())
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log.try_clone().unwrap()));
        let mut spawned = cmd.spawn().expect("spawn eagernfs");
        let stdout = spawned.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        // Keeps draining stdout after the first line so the server never blocks on a full pipe;
        // later lines go to the log next to stderr.
        thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next();
            let _ = tx.send(first);
            let mut log = log;
            for line in lines.map_while(Result::ok) {
                let _ = writeln!(log, "[stdout] {line}");
            }
        });
        let first = match rx.recv_timeout(SERVER_START_TIMEOUT) {
            Ok(Some(Ok(line))) => line,
            Ok(_) => {
                let status = spawned.wait().ok();
                panic!(
                    "eagernfs exited ({status:?}) without printing its listening line; args: {extra_args:?}\n{}",
                    tail(&log_path, 40)
                );
            }
            Err(_) => {
                let _ = spawned.kill();
                let _ = spawned.wait();
                panic!(
                    "eagernfs printed no listening line within {SERVER_START_TIMEOUT:?}\n{}",
                    tail(&log_path, 40)
                );
            }
        };
        let port = first
            .strip_prefix(LISTENING_PREFIX)
            .and_then(|p| p.trim_end().parse::<u16>().ok())
            .unwrap_or_else(|| {
                let _ = spawned.kill();
                panic!("first stdout line must be `{LISTENING_PREFIX}PORT`, got {first:?}")
            });
        *child = Some(spawned);
        self.port = port;
        self.mount_port = port;
    }

    /// Sends SIGTERM and waits; panics unless the server exits with status 0 in time (graceful
    /// shutdown is part of the CLI contract).
    fn stop_eagernfs(&mut self) {
        let log_path = self.log_path();
        let Flavor::Eagernfs { child, .. } = &mut self.flavor else { unreachable!() };
        let Some(mut child) = child.take() else { return };
        let status = terminate(&mut child, SERVER_STOP_TIMEOUT);
        match status {
            Some(status) if status.success() => {}
            Some(status) => {
                panic!("eagernfs exited with {status} after SIGTERM (want 0)\n{}", tail(&log_path, 40))
            }
            None => panic!(
                "eagernfs did not exit within {SERVER_STOP_TIMEOUT:?} of SIGTERM (killed)\n{}",
                tail(&log_path, 40)
            ),
        }
    }

    /// Stops an eagernfs server gracefully (SIGTERM), asserting it exits 0.
    #[allow(dead_code)] // not every test binary stops servers explicitly
    pub(crate) fn stop(&mut self) {
        if let Flavor::Eagernfs { .. } = self.flavor {
            self.stop_eagernfs();
        }
    }

    /// Stops the server gracefully and starts it again on the same port with the same state
    /// directory, so file handles issued before stay valid.
    pub(crate) fn restart(&mut self) {
        match self.flavor {
            Flavor::Eagernfs { .. } => {
                self.stop_eagernfs();
                let old_port = self.port;
                self.spawn_eagernfs(&format!("127.0.0.1:{old_port}"));
                assert_eq!(self.port, old_port, "restarted server must listen on the same port");
            }
            Flavor::Ganesha { .. } => {
                // ganesha.sh start stops the running instance of the same run dir first.
                self.ganesha_script("start").unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }

    /// Kills an eagernfs server with SIGKILL (no shutdown, no flush) and starts it again on the
    /// same port with the same state directory and arguments: a crash and a restart.
    #[allow(dead_code)] // not every test binary crashes servers
    pub(crate) fn crash_restart(&mut self) {
        let Flavor::Eagernfs { child, .. } = &mut self.flavor else { panic!("not an eagernfs server") };
        if let Some(mut c) = child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let old_port = self.port;
        self.spawn_eagernfs(&format!("127.0.0.1:{old_port}"));
        assert_eq!(self.port, old_port, "restarted server must listen on the same port");
    }

    /// Kills an eagernfs server with SIGKILL (also when it is stopped with SIGSTOP) and waits for
    /// it; [`Server::start_again`] starts it again. Between the two the test may change what is
    /// mounted at the export's path (a power-cut test puts the disk image left behind there).
    #[allow(dead_code)] // not every test binary kills servers
    pub(crate) fn kill(&mut self) {
        let Flavor::Eagernfs { child, .. } = &mut self.flavor else { panic!("not an eagernfs server") };
        if let Some(mut c) = child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts a server [`Server::kill`]ed before on the same port with the same state directory
    /// and arguments.
    #[allow(dead_code)] // not every test binary kills servers
    pub(crate) fn start_again(&mut self) {
        let old_port = self.port;
        self.spawn_eagernfs(&format!("127.0.0.1:{old_port}"));
        assert_eq!(self.port, old_port, "restarted server must listen on the same port");
    }

    /// The process id of a running eagernfs server.
    #[allow(dead_code)] // not every test binary needs it
    pub(crate) fn pid(&self) -> u32 {
        let Flavor::Eagernfs { child: Some(child), .. } = &self.flavor else {
            panic!("not a running eagernfs")
        };
        child.id()
    }

    /// Send `sig` to an eagernfs server process.
    pub(crate) fn signal(&self, sig: libc::c_int) {
        let Flavor::Eagernfs { child: Some(child), .. } = &self.flavor else {
            panic!("not a running eagernfs")
        };
        // SAFETY: signalling our own child, which has not been reaped (we hold it).
        unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    }

    /// The server's state directory (its handle key and control socket).
    pub(crate) fn state_dir(&self) -> PathBuf {
        self.scratch.path().join("state")
    }

    /// The exported directory on disk.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// libnfs URL for `rel` (empty or starting with '/') inside the export, with explicit
    /// ports so no portmapper lookup is involved.
    pub(crate) fn url(&self, rel: &str) -> String {
        self.url_with(rel, "")
    }

    /// Like [`Server::url`] with extra query arguments, e.g. `"uid=1000&gid=1000"`.
    pub(crate) fn url_with(&self, rel: &str, query: &str) -> String {
        self.url_for_path(&format!("{}{rel}", self.dir.display()), query)
    }

    /// A URL for an arbitrary server-side mount path (for `..` and `/` experiments).
    pub(crate) fn url_for_path(&self, path: &str, query: &str) -> String {
        let mut url = format!("nfs://127.0.0.1{path}?nfsport={}&mountport={}", self.port, self.mount_port);
        if !query.is_empty() {
            url.push('&');
            url.push_str(query);
        }
        url
    }

    /// The last lines of the server's log, for failure messages.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        tail(&self.log_path(), lines)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("--- server log tail ---\n{}", self.log_tail(60));
        }
        match self.flavor {
            Flavor::Eagernfs { .. } => {
                if thread::panicking() {
                    // Never panic twice; just make sure the process is gone.
                    if let Flavor::Eagernfs { child: Some(child), .. } = &mut self.flavor {
                        terminate(child, SERVER_STOP_TIMEOUT);
                    }
                } else {
                    self.stop_eagernfs();
                }
            }
            Flavor::Ganesha { .. } => {
                if let Err(e) = self.ganesha_script("stop") {
                    eprintln!("{e}");
                }
            }
        }
    }
}

/// Maps the eagernfs `-o` options a test uses onto ganesha.sh's environment.
fn ganesha_env_for(extra_args: &[&str]) -> Vec<(String, String)> {
    // eagernfs defaults: rw,sync,secure,root_squash.
    let mut access = "RW";
    let mut squash = "Root_Squash";
    let mut args = extra_args.iter();
    while let Some(arg) = args.next() {
        match *arg {
            "-o" => {
                let opts = args.next().expect("-o needs a value");
                for opt in opts.split(',') {
                    match opt {
                        "ro" => access = "RO",
                        "rw" => access = "RW",
                        "root_squash" => squash = "Root_Squash",
                        "no_root_squash" => squash = "No_Root_Squash",
                        "all_squash" => squash = "All_Squash",
                        "sync" | "async" | "secure" | "insecure" => {}
                        other => panic!("ganesha mode cannot emulate -o {other}"),
                    }
                }
            }
            other => panic!("ganesha mode cannot emulate eagernfs argument {other}"),
        }
    }
    vec![("GANESHA_ACCESS".into(), access.into()), ("GANESHA_SQUASH".into(), squash.into())]
}

/// SIGTERM, then wait up to `timeout`; SIGKILL after that. Returns the exit status if the
/// process exited on its own.
pub(crate) fn terminate(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
    // SAFETY: plain syscall on our own child's pid, which cannot have been reaped yet because
    // we hold the `Child` and have not waited on it successfully.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = wait_deadline(child, timeout);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    status
}

/// Polls `try_wait` until the child exits or the deadline passes.
pub(crate) fn wait_deadline(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// What a finished client process produced.
pub(crate) struct ToolOutput {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
    /// True if the deadline passed and the process was killed.
    pub(crate) timed_out: bool,
}

impl ToolOutput {
    pub(crate) fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Panics with everything useful unless the tool succeeded.
    #[track_caller]
    pub(crate) fn assert_success(&self, what: &str) -> &Self {
        assert!(
            self.status.success() && !self.timed_out,
            "{what}: status {} (timed out: {})\nstderr: {}\nstdout: {}",
            self.status,
            self.timed_out,
            self.stderr,
            String::from_utf8_lossy(&self.stdout[..self.stdout.len().min(2000)])
        );
        self
    }
}

/// Runs `cmd` to completion or until `timeout`, capturing stdout and stderr.
pub(crate) fn run_command(mut cmd: Command, timeout: Duration) -> ToolOutput {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let err_reader = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err.read_to_end(&mut buf);
        buf
    });
    let (status, timed_out) = match wait_deadline(&mut child, timeout) {
        Some(status) => (status, false),
        None => {
            let _ = child.kill();
            (child.wait().expect("wait after kill"), true)
        }
    };
    ToolOutput {
        status,
        stdout: out_reader.join().unwrap(),
        stderr: String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned(),
        timed_out,
    }
}

/// Runs a client program with arguments under [`TOOL_TIMEOUT`].
pub(crate) fn run_tool<I, S>(program: &str, args: I) -> ToolOutput
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(program);
    cmd.args(args);
    run_command(cmd, TOOL_TIMEOUT)
}

pub(crate) fn nfs_ls(url: &str) -> ToolOutput {
    run_tool("nfs-ls", [url])
}

pub(crate) fn nfs_cat(url: &str) -> ToolOutput {
    run_tool("nfs-cat", [url])
}

/// `nfs-cp SRC DST`; either side may be a local path or an nfs:// URL.
pub(crate) fn nfs_cp(src: impl AsRef<OsStr>, dst: impl AsRef<OsStr>) -> ToolOutput {
    run_tool("nfs-cp", [src.as_ref(), dst.as_ref()])
}

/// Names from `nfs-ls` output (the last whitespace-separated field of each line; our test
/// names never contain spaces).
pub(crate) fn ls_names(out: &ToolOutput) -> Vec<String> {
    out.stdout_text().lines().filter_map(|l| l.split_whitespace().last()).map(str::to_owned).collect()
}

/// The byte nfsop's `pat:SEED:LEN` puts at absolute file offset `offset` (a 64-bit mix, so
/// data landing at the wrong offset is caught). Must match `pattern_byte` in nfsop.c.
pub(crate) fn pattern_byte(seed: u64, offset: u64) -> u8 {
    let mut h = offset.wrapping_add(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    h ^= h >> 30;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 31;
    h as u8
}

/// `len` pattern bytes as written at file offset `offset`.
pub(crate) fn pattern_bytes(seed: u64, offset: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| pattern_byte(seed, offset + i)).collect()
}

/// Deterministic pseudo-random bytes (splitmix64) for forged handles; reproducible by seed.
pub(crate) fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) as u8
        })
        .collect()
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn from_hex(hex: &str) -> Vec<u8> {
    assert_eq!(hex.len() % 2, 0, "odd-length hex {hex:?}");
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect()
}

/// Makes a directory world-writable (root-squashed clients create files in it).
pub(crate) fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// `chown` by numeric ids (std has no portable one before 1.73's unix extension).
pub(crate) fn chown(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
}

/// Compiles `tests/clients/NAME.c` with `extra` flags into the cargo target dir (next to the
/// eagernfs binary under test) and returns the binary's path.
fn compile_c_client(name: &str, extra: &[String]) -> PathBuf {
    let source = repo_root().join(format!("tests/clients/{name}.c"));
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_eagernfs")).parent().unwrap().join(format!("{name}-client"));
    fs::create_dir_all(&bin_dir).unwrap();
    let target = bin_dir.join(name);
    // Several test binaries may compile at once: build under a unique name, then rename
    // atomically over the final path.
    let tmp = bin_dir.join(format!("{name}.tmp.{}", std::process::id()));
    let mut cmd = Command::new("cc");
    cmd.args(["-O2", "-g", "-Wall", "-Wextra", "-Werror", "-o"]).arg(&tmp).arg(&source).args(extra);
    run_command(cmd, Duration::from_secs(120)).assert_success(&format!("compile tests/clients/{name}.c"));
    fs::rename(&tmp, &target).unwrap();
    target
}

/// Path of the compiled nfsop client, built once per test process from tests/clients/nfsop.c.
pub(crate) fn nfsop_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let flags = run_tool("pkg-config", ["--cflags", "--libs", "libnfs"]);
        flags.assert_success("pkg-config libnfs (run scripts/install-deps.sh)");
        let flags: Vec<String> = flags.stdout_text().split_whitespace().map(str::to_owned).collect();
        compile_c_client("nfsop", &flags)
    })
}

/// Path of the compiled fsx checker (tests/clients/fsx.c), built once per test process.
pub(crate) fn fsx_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| compile_c_client("fsx", &[]))
}

/// Who runs a [`posixop`]: root, or a uid with a primary gid and supplementary groups.
#[derive(Clone, Debug)]
pub(crate) struct As {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) groups: Vec<u32>,
}

impl As {
    pub(crate) fn root() -> As {
        As { uid: 0, gid: 0, groups: vec![] }
    }

    /// `nobody` (65534), the usual unprivileged test user.
    pub(crate) fn nobody() -> As {
        As { uid: 65534, gid: 65534, groups: vec![] }
    }
}

/// Runs `tests/clients/posixop.c` once as `who` and returns its one-line answer: exactly one
/// POSIX call (or fixed sequence) made by that user, through whatever mount the paths name.
#[track_caller]
pub(crate) fn posixop(who: &As, args: &[&str]) -> Reply {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    let bin = BINARY.get_or_init(|| compile_c_client("posixop", &[]));
    let mut cmd = Command::new(bin);
    cmd.args(args);
    let (uid, gid, groups) = (who.uid, who.gid, who.groups.clone());
    // SAFETY: only async-signal-safe calls (setgroups/setgid/setuid) between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                || libc::setgid(gid) != 0
                || libc::setuid(uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = run_command(cmd, TOOL_TIMEOUT);
    let text = out.stdout_text();
    let line = text.lines().next().unwrap_or_else(|| {
        panic!("posixop {args:?} as {who:?} printed nothing ({}): {}", out.status, out.stderr)
    });
    Reply::parse(line)
}

/// One nfsop reply line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `ok PAYLOAD` (payload may be empty).
    Ok(String),
    /// `err KIND MESSAGE`, e.g. kind `EACCES` or `NFS3ERR_STALE`.
    Err { kind: String, message: String },
}

impl Reply {
    fn parse(line: &str) -> Reply {
        if line == "ok" {
            return Reply::Ok(String::new());
        }
        if let Some(rest) = line.strip_prefix("ok ") {
            return Reply::Ok(rest.to_owned());
        }
        let rest = line.strip_prefix("err ").unwrap_or(line);
        let (kind, message) = rest.split_once(' ').unwrap_or((rest, ""));
        Reply::Err { kind: kind.to_owned(), message: message.to_owned() }
    }

    pub(crate) fn is_ok(&self) -> bool {
        matches!(self, Reply::Ok(_))
    }

    /// The error kind, or `None` for `ok`.
    pub(crate) fn err_kind(&self) -> Option<&str> {
        match self {
            Reply::Ok(_) => None,
            Reply::Err { kind, .. } => Some(kind),
        }
    }
}

/// Parses `key=value` fields from a reply payload such as nfsop's `stat` output.
pub(crate) fn field(payload: &str, key: &str) -> Option<String> {
    payload
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')).map(str::to_owned))
}

/// A numeric field; modes are printed in octal with a leading 0.
pub(crate) fn field_u64(payload: &str, key: &str) -> u64 {
    let v = field(payload, key).unwrap_or_else(|| panic!("no {key}= in {payload:?}"));
    if v.len() > 1 && v.starts_with('0') {
        u64::from_str_radix(&v[1..], 8).unwrap()
    } else {
        v.parse().unwrap()
    }
}

/// A live nfsop process with one libnfs context (one mount) for its whole life.
pub(crate) struct Nfsop {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr_path: PathBuf,
    _stderr_dir: tempfile::TempDir,
    url: String,
}

impl Nfsop {
    /// Mounts `url`; panics if the mount fails.
    #[track_caller]
    pub(crate) fn start(url: &str) -> Nfsop {
        Nfsop::try_start(url).unwrap_or_else(|e| panic!("nfsop could not mount {url}: {e:?}"))
    }

    /// Mounts `url`, returning the mount's error reply (e.g. `err MOUNT ...`) on refusal.
    pub(crate) fn try_start(url: &str) -> Result<Nfsop, Reply> {
        let stderr_dir = tempfile::tempdir().unwrap();
        let stderr_path = stderr_dir.path().join("stderr");
        let mut child = Command::new(nfsop_binary())
            .arg(url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(fs::File::create(&stderr_path).unwrap())
            .spawn()
            .expect("spawn nfsop");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut op =
            Nfsop { child, stdin, lines: rx, stderr_path, _stderr_dir: stderr_dir, url: url.to_owned() };
        match op.next_reply("(mount)") {
            Reply::Ok(s) if s == "mounted" => Ok(op),
            other => Err(other),
        }
    }

    fn next_reply(&mut self, cmd: &str) -> Reply {
        match self.lines.recv_timeout(NFSOP_REPLY_TIMEOUT) {
            Ok(line) => Reply::parse(&line),
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                panic!(
                    "nfsop gave no reply to {cmd:?} within {NFSOP_REPLY_TIMEOUT:?} (url {})\nstderr: {}",
                    self.url,
                    tail(&self.stderr_path, 20)
                )
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().ok();
                Reply::Err {
                    kind: "EXITED".into(),
                    message: format!("nfsop exited ({status:?}): {}", tail(&self.stderr_path, 20)),
                }
            }
        }
    }

    /// Sends one command line and returns its reply.
    pub(crate) fn cmd(&mut self, line: &str) -> Reply {
        assert!(!line.contains('\n'), "one command per line");
        let stdin = self.stdin.as_mut().expect("nfsop stdin open");
        if writeln!(stdin, "{line}").and_then(|_| stdin.flush()).is_err() {
            return Reply::Err { kind: "EXITED".into(), message: tail(&self.stderr_path, 20) };
        }
        self.next_reply(line)
    }

    /// Sends a command that must succeed; returns the payload.
    #[track_caller]
    pub(crate) fn ok(&mut self, line: &str) -> String {
        match self.cmd(line) {
            Reply::Ok(payload) => payload,
            Reply::Err { kind, message } => panic!("nfsop `{line}` failed: {kind} {message}"),
        }
    }

    /// Sends a command that must fail; returns the error kind.
    #[track_caller]
    pub(crate) fn err(&mut self, line: &str) -> String {
        match self.cmd(line) {
            Reply::Ok(payload) => panic!("nfsop `{line}` unexpectedly succeeded: {payload}"),
            Reply::Err { kind, .. } => kind,
        }
    }
}

impl Drop for Nfsop {
    fn drop(&mut self) {
        // Closing stdin lets nfsop close files and unmount cleanly; kill if it lingers.
        drop(self.stdin.take());
        if wait_deadline(&mut self.child, Duration::from_secs(10)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ----- FUSE mounts ------------------------------------------------------

/// How long `eagernfs mount` may take to report (debug build, busy CI).
pub(crate) const MOUNT_TIMEOUT: Duration = Duration::from_secs(60);

/// A mount made with `eagernfs mount` (daemon mode), unmounted on drop.
pub(crate) struct FuseMount {
    /// Holds the mount point directory; its parent is 0755 so that
    /// non-root test users can reach it.
    _dir: tempfile::TempDir,
    pub(crate) path: PathBuf,
}

impl FuseMount {
    pub(crate) fn new(url: &str, options: &str) -> FuseMount {
        let dir = tempfile::Builder::new().prefix("eagernfs-mnt-").tempdir().unwrap();
        chmod(dir.path(), 0o755);
        let path = dir.path().join("mnt");
        fs::create_dir(&path).unwrap();
        let mut cmd = Command::new(eagernfs_bin());
        cmd.arg("mount").arg(url).arg(&path);
        if !options.is_empty() {
            cmd.args(["-o", options]);
        }
        let out = run_command(cmd, MOUNT_TIMEOUT);
        assert!(out.status.success(), "eagernfs mount {url} -o {options} failed: {}", out.stderr);
        assert!(is_mounted(&path), "mount returned success but {} is not mounted", path.display());
        FuseMount { _dir: dir, path }
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.path.clone()
        } else {
            self.path.join(rel)
        }
    }
}

impl Drop for FuseMount {
    fn drop(&mut self) {
        let mut cmd = Command::new(eagernfs_bin());
        cmd.arg("umount").arg(&self.path);
        let out = run_command(cmd, MOUNT_TIMEOUT);
        if !out.status.success() {
            // Leave nothing mounted behind a failed test.
            let mut lazy = Command::new(eagernfs_bin());
            lazy.args(["umount", "-z"]).arg(&self.path);
            run_command(lazy, MOUNT_TIMEOUT);
            if !std::thread::panicking() {
                panic!("eagernfs umount {} failed: {}", self.path.display(), out.stderr);
            }
        }
    }
}

/// The `eagernfs` binary under test.
pub(crate) fn eagernfs_bin() -> &'static str {
    env!("CARGO_BIN_EXE_eagernfs")
}

/// Why FUSE tests cannot run here, if they cannot.
pub(crate) fn fuse_unavailable() -> Option<&'static str> {
    if !is_root() {
        return Some("needs root (FUSE mounts, setuid children)");
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing");
    }
    None
}

/// Return from the calling test (saying why) when FUSE tests cannot run.
#[allow(unused_macros)] // only the FUSE test binaries use it
macro_rules! require_fuse {
    ($name:expr) => {
        if let Some(why) = fuse_unavailable() {
            skip($name, why);
            return;
        }
    };
}

/// Pids of `eagernfs mount` processes whose command line names `mountpoint`.
#[allow(dead_code)] // only some FUSE test binaries kill daemons
pub(crate) fn mount_daemons(mountpoint: &Path) -> Vec<u32> {
    let want = mountpoint.as_os_str().as_encoded_bytes();
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().map_while(Result::ok) {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else { continue };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.contains(&&b"mount"[..]) && args.contains(&want) {
            pids.push(pid);
        }
    }
    pids
}

/// Whether `path` is a mount point now, per /proc/self/mounts.
pub(crate) fn is_mounted(path: &Path) -> bool {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    let want = path.to_str().unwrap();
    mounts.lines().any(|l| l.split_whitespace().nth(1) == Some(want))
}

/// How long a mount may take to REMOVE the hidden name of a file unlinked while open after its
/// last close (FUSE's release comes after close(2) returns, and the REMOVE after that).
pub(crate) const HIDDEN_NAME_GONE_TIMEOUT: Duration = Duration::from_secs(30);

/// Through mount `m`: a file removed while open, and one renamed over while open, are gone
/// from the server after their last close, whichever thread of the mount sees that close, so
/// the directory that held them can be removed. `rmdir` through the mount is the check: the
/// server refuses it (ENOTEMPTY) while a hidden `.nfs…` name is left.
#[allow(dead_code)] // only the FUSE test binaries mount
pub(crate) fn files_removed_while_open_leave_nothing(m: &FuseMount) {
    let dir = m.path("gone-at-last-close");
    fs::create_dir(&dir).unwrap();
    // `touch u; exec 4<u; rm u; exec 4<&-`
    fs::write(dir.join("u"), b"unlinked while open").unwrap();
    let open = fs::File::open(dir.join("u")).unwrap();
    fs::remove_file(dir.join("u")).unwrap();
    let mut data = String::new();
    (&open).read_to_string(&mut data).unwrap();
    assert_eq!(data, "unlinked while open", "an open file can still be read after rm");
    let names: Vec<String> =
        fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(names.iter().all(|n| n.starts_with(".nfs")), "only a hidden name is left: {names:?}");
    drop(open);
    // `mv a b` while `b` is open.
    fs::write(dir.join("a"), b"a").unwrap();
    fs::write(dir.join("b"), b"b").unwrap();
    let open = fs::File::open(dir.join("b")).unwrap();
    fs::rename(dir.join("a"), dir.join("b")).unwrap();
    drop(open);
    fs::remove_file(dir.join("b")).unwrap();
    // Both last closes are done; their REMOVEs follow. Wait for the directory to empty.
    let deadline = Instant::now() + HIDDEN_NAME_GONE_TIMEOUT;
    loop {
        match fs::remove_dir(&dir) {
            Ok(()) => break,
            Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) && Instant::now() < deadline => {
                // The mount has not removed the hidden names yet: ask again once it may have.
                thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                let left: Vec<String> = fs::read_dir(&dir)
                    .map(|d| d.map(|e| e.unwrap().file_name().into_string().unwrap()).collect())
                    .unwrap_or_default();
                panic!("rmdir after the last closes: {e}; left in the directory: {left:?}");
            }
        }
    }
    assert!(fs::metadata(&dir).is_err(), "the directory is gone");
}
