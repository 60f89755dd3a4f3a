//! For the tests on the one-node Ceph test cluster (`scripts/ceph-cluster.sh start`;
//! `scripts/test` starts it in CI): finding the cluster (or saying why a test skips), and heads
//! of a cluster (`eagernfs serve cephfs://… --node-id N`) with their clients.

use super::skip;
use bytes::Bytes;
use eagernfs_client::lock::LockOwner;
use eagernfs_client::{LockClient, MountOptions, NfsClient, NfsUrl};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// How long a head may take to say it listens: a bound for a head that hangs, not a guess at how
/// long a start takes. A head bounds its own start: connecting to RADOS and each RADOS call
/// (--ceph-connect-timeout, 30 s), the other heads' confirmation of a grace period
/// (--cluster-confirm-timeout, 10 s), a lease (--cluster-lease, 5 s), the CephFS mount (30 s
/// per step); on a busy machine with a slow test cluster a take-over's start took longer than
/// 30 s (issue 32), and the head would have come up.
pub(crate) const HEAD_START_TIMEOUT: Duration = Duration::from_secs(180);

/// The test cluster's ceph.conf (`EAGERNFS_CEPH_CONF`, else the default of
/// `scripts/ceph-cluster.sh`), or `None` after saying why `test` skips: the conf is missing,
/// or `have` says that what else the test needs (`needs`, e.g. "libcephfs/librados") is not
/// installed. With `EAGERNFS_REQUIRE_CEPH=1` either is a panic instead.
pub(crate) fn ceph_conf(test: &str, needs: &str, have: impl FnOnce() -> bool) -> Option<PathBuf> {
    let conf = std::env::var_os("EAGERNFS_CEPH_CONF")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/eagernfs-ceph/ceph.conf"));
    if conf.exists() && have() {
        return Some(conf);
    }
    let why = format!(
        "no Ceph test cluster ({} missing, or {needs} not installed): start one with scripts/ceph-cluster.sh start",
        conf.display()
    );
    if std::env::var("EAGERNFS_REQUIRE_CEPH").as_deref() == Ok("1") {
        panic!("{test}: EAGERNFS_REQUIRE_CEPH=1 but {why}");
    }
    skip(test, &why);
    None
}

/// [`ceph_conf`] for a test of heads, which need libcephfs and librados.
pub(crate) fn heads_ceph_conf(test: &str) -> Option<PathBuf> {
    ceph_conf(test, "libcephfs/librados", || {
        eagernfs_vfs::cephfs::version(eagernfs_vfs::cephfs::LIBRARY).is_ok()
            && eagernfs_vfs::rados::available(eagernfs_vfs::rados::LIBRARY).is_ok()
    })
}

/// A free TCP port on `ip` (bound and let go; the head binds it with SO_REUSEADDR).
pub(crate) fn free_port(ip: &str) -> u16 {
    std::net::TcpListener::bind((ip, 0)).unwrap().local_addr().unwrap().port()
}

/// `IP:PORT`, the port free on `ip`.
pub(crate) fn addr_on(ip: &str) -> String {
    format!("{ip}:{}", free_port(ip))
}

/// This process's id and the clock's nanoseconds: names that no other run of a test used.
pub(crate) fn unique() -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{}-{t}", std::process::id())
}

/// A runtime for the clients of a test (two worker threads).
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// A client of the head at `addr`, mounted on its root.
pub(crate) async fn client(addr: &str) -> NfsClient {
    let url: NfsUrl = format!("nfs://{addr}/").parse().unwrap();
    NfsClient::connect_url(&url).await.expect("mount")
}

/// A lock client named `name` beside client `c`.
pub(crate) async fn locker(c: &NfsClient, name: &str) -> LockClient {
    LockClient::connect(c.rpc(), c.server(), &MountOptions::default(), name).await.expect("lock manager")
}

/// Lock owners named `names`, with svids 1, 2, …
pub(crate) fn owners<const N: usize>(names: [&'static str; N]) -> [LockOwner; N] {
    let mut svid = 0;
    names.map(|name| {
        svid += 1;
        LockOwner { oh: Bytes::from_static(name.as_bytes()), svid }
    })
}

/// One head: `eagernfs serve cephfs://admin@cephfs/ --node-id N --listen IP:PORT` on the test
/// cluster, sharing its state in RADOS (pool cephfs_data) with the heads of the same namespace.
/// Stopped on drop, cleanly (see the `Drop`).
pub(crate) struct Head {
    pub(crate) child: Child,
    /// Its stderr.
    pub(crate) log: PathBuf,
    /// Its `--state-dir`.
    pub(crate) state: PathBuf,
    /// A temporary directory holding `state` and `log`, removed with the head.
    pub(crate) dir: Option<tempfile::TempDir>,
}

/// A head's first stdout line, when it comes.
pub(crate) type Ready = Receiver<Option<std::io::Result<String>>>;

impl Head {
    /// Start a head with a state directory of its own and wait until it listens.
    pub(crate) fn start(conf: &Path, ns: &str, node: u32, listen: &str, grace_s: u32) -> Head {
        let (head, ready) = Head::spawn(conf, ns, node, listen, grace_s);
        head.ready(node, ready, HEAD_START_TIMEOUT)
    }

    /// Start the process with a state directory of its own; [`Head::ready`] waits until it
    /// listens.
    pub(crate) fn spawn(conf: &Path, ns: &str, node: u32, listen: &str, grace_s: u32) -> (Head, Ready) {
        let dir = tempfile::Builder::new().prefix("eagernfs-head-").tempdir().unwrap();
        let state = dir.path().join("state");
        let cmd = Head::command(conf, ns, node, listen, grace_s, &state);
        let (mut head, ready) = Head::spawn_command(cmd, state, dir.path().join("log"));
        head.dir = Some(dir);
        (head, ready)
    }

    /// The command line of a head with state directory `state`, for a test to add to.
    pub(crate) fn command(
        conf: &Path,
        ns: &str,
        node: u32,
        listen: &str,
        grace_s: u32,
        state: &Path,
    ) -> Command {
        let url = format!("cephfs://admin@cephfs/?conf={}", conf.display());
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_eagernfs"));
        cmd.args(["serve", &url, "--listen", listen, "-o", "rw,no_root_squash"])
            .arg("--state-dir")
            .arg(state)
            .args(["--node-id", &node.to_string(), "--cluster-pool", "cephfs_data"])
            .args(["--cluster-namespace", ns, "--grace-period", &grace_s.to_string()]);
        cmd
    }

    /// Run `cmd` (from [`Head::command`]), its stderr to `log`.
    pub(crate) fn spawn_command(mut cmd: Command, state: PathBuf, log: PathBuf) -> (Head, Ready) {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn eagernfs");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(lines.next());
            for _ in lines.by_ref() {}
        });
        (Head { child, log, state, dir: None }, rx)
    }

    /// Wait up to `timeout` until head `node` says it listens; a panic with its log if not.
    pub(crate) fn ready(mut self, node: u32, ready: Ready, timeout: Duration) -> Head {
        match ready.recv_timeout(timeout) {
            Ok(Some(Ok(line))) if line.starts_with("eagernfs: listening on ") => self,
            other => {
                let status = self.child.try_wait();
                let _ = self.child.kill();
                panic!(
                    "head {node} (pid {}) did not start ({other:?}; exit status {status:?}):\n{}",
                    self.child.id(),
                    self.log()
                )
            }
        }
    }

    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub(crate) fn state_dir(&self) -> &Path {
        &self.state
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait (at most `timeout`) until the head's log says `what`; a panic with the log if it
    /// does not, or if the head exits first.
    pub(crate) fn wait_log(&mut self, what: &str, timeout: Duration) {
        let t0 = Instant::now();
        while !self.log().contains(what) {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("head (pid {}) exited ({status}) before saying {what:?}:\n{}", self.pid(), self.log());
            }
            assert!(t0.elapsed() < timeout, "head did not say {what:?} within {timeout:?}:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL, and reap it. A frozen head (SIGSTOP) is thawed first.
    pub(crate) fn kill9(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: a signal to our own child, not yet reaped (so the pid is still its).
            unsafe { libc::kill(self.pid(), libc::SIGCONT) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM; how long until it exited (at most 30 s), which it must do with success.
    pub(crate) fn terminate(&mut self) -> Duration {
        let t0 = Instant::now();
        // SAFETY: our own child's pid.
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(status.success(), "head exited with {status} after SIGTERM:\n{}", self.log());
                return t0.elapsed();
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "head still running 30 s after SIGTERM");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Head {
    /// A clean stop, so its CephFS session ends: a killed head's session keeps its
    /// capabilities (on the root directory too) until the MDS times it out, 60 s, and every
    /// other client's CREATE there waits that long; and an MDS restart waits for the sessions
    /// it knows to reconnect. A frozen head is thawed first; SIGKILL if it does not exit
    /// within 10 s.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: signals to our own child, not yet reaped.
            unsafe {
                libc::kill(self.pid(), libc::SIGCONT);
                libc::kill(self.pid(), libc::SIGTERM);
            }
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        self.kill9();
    }
}
