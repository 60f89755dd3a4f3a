//! Several heads on one CephFS (`eagernfs serve --node-id N`), on the one-node test cluster
//! (`scripts/ceph-cluster.sh start`; `scripts/test` starts it in CI). Without a cluster the
//! test prints SKIP, unless `EAGERNFS_REQUIRE_CEPH=1` says one must be there.
//!
//! Two heads, each on its own loopback address (127.0.0.11, 127.0.0.12). A client writes and
//! locks through head A; a handle A gave works on B (one handle key, in RADOS); B's client
//! cannot take A's client's lock (a CephFS lock). Head A is killed with SIGKILL and a new
//! head started with A's node id, address and port, but a state directory of its own (as on
//! another machine), takes over: it ends A's CephFS session at once (no MDS session
//! timeout), the client's next call succeeds (the time from the kill is printed), committed
//! data is intact and the write verifier changed (UNSTABLE data is to be resent); during the
//! cluster's grace period B grants no new lock, the client reclaims its lock through the new
//! head, and once the grace period is over B's client is still refused it: nobody else
//! held it meanwhile. The take-over is repeated `EAGERNFS_TAKEOVER_ROUNDS` times (default 2),
//! each during the previous one's grace period, and the times are summarised.

mod common;

use bytes::Bytes;
use common::*;
use eagernfs_client::lock::{LockOwner, LockRange, LockReply};
use eagernfs_client::{LockClient, MountOptions, NfsClient, NfsOps, NfsUrl};
use eagernfs_proto::nfs3::{Createhow3, NfsFh3, Sattr3, StableHow};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The test cluster's ceph.conf, or `None` after saying why the test skips.
fn ceph(test: &str) -> Option<PathBuf> {
    let conf = std::env::var_os("EAGERNFS_CEPH_CONF")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/eagernfs-ceph/ceph.conf"));
    let usable = conf.exists()
        && eagernfs_vfs::cephfs::version(eagernfs_vfs::cephfs::LIBRARY).is_ok()
        && eagernfs_vfs::rados::available(eagernfs_vfs::rados::LIBRARY).is_ok();
    if usable {
        return Some(conf);
    }
    let why = format!(
        "no Ceph test cluster ({} missing, or libcephfs/librados not installed): start one with scripts/ceph-cluster.sh start",
        conf.display()
    );
    if std::env::var("EAGERNFS_REQUIRE_CEPH").as_deref() == Ok("1") {
        panic!("{test}: EAGERNFS_REQUIRE_CEPH=1 but {why}");
    }
    skip(test, &why);
    None
}

/// A free TCP port on `ip` (bound and let go; the head binds it with SO_REUSEADDR).
fn free_port(ip: &str) -> u16 {
    std::net::TcpListener::bind((ip, 0)).unwrap().local_addr().unwrap().port()
}

/// One head: `eagernfs serve cephfs://… --node-id N --listen IP:PORT`, killed on drop.
struct Head {
    child: Child,
    log: PathBuf,
    _state: tempfile::TempDir,
}

impl Head {
    fn start(conf: &Path, namespace: &str, node: u32, listen: &str, grace_s: u32) -> Head {
        let state = tempfile::Builder::new().prefix("eagernfs-head-").tempdir().unwrap();
        let log = state.path().join("log");
        let url = format!("cephfs://admin@cephfs/?conf={}", conf.display());
        let mut child = Command::new(env!("CARGO_BIN_EXE_eagernfs"))
            .args(["serve", &url, "--listen", listen, "-o", "rw,no_root_squash"])
            .arg("--state-dir")
            .arg(state.path().join("state"))
            .args(["--node-id", &node.to_string(), "--cluster-pool", "cephfs_data"])
            .args(["--cluster-namespace", namespace, "--grace-period", &grace_s.to_string()])
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
        match rx.recv_timeout(SERVER_START_TIMEOUT) {
            Ok(Some(Ok(line))) if line.starts_with("eagernfs: listening on ") => {}
            other => {
                let _ = child.kill();
                panic!(
                    "head {node} did not start ({other:?}):\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
            }
        }
        Head { child, log, _state: state }
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn state_dir(&self) -> PathBuf {
        self._state.path().join("state")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Head {
    fn drop(&mut self) {
        // A clean stop: a head killed here would leave its CephFS session, and the caps it
        // holds on the root, to the MDS's session timeout (60 s), stalling the next test's
        // CREATE there and any MDS restart.
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: a signal to our own child.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.kill9();
    }
}

async fn client(addr: &str) -> NfsClient {
    let url: NfsUrl = format!("nfs://{addr}/").parse().unwrap();
    NfsClient::connect_url(&url).await.expect("mount")
}

async fn locker(c: &NfsClient, name: &str) -> LockClient {
    LockClient::connect(c.rpc(), c.server(), &MountOptions::default(), name).await.expect("lock manager")
}

#[test]
fn a_new_head_takes_over_a_killed_ones_clients_data_and_locks() {
    let Some(conf) = ceph("a_new_head_takes_over_a_killed_ones_clients_data_and_locks") else { return };
    let ns = format!("e2e-{}-{}", std::process::id(), rand_suffix());
    let grace_s = 8;
    let (addr_a, addr_b) = (
        format!("127.0.0.11:{}", free_port("127.0.0.11")),
        format!("127.0.0.12:{}", free_port("127.0.0.12")),
    );
    let mut a = Head::start(&conf, &ns, 1, &addr_a, grace_s);
    let b = Head::start(&conf, &ns, 2, &addr_b, grace_s);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();

    // Through A: a file, committed data, an UNSTABLE write, a lock.
    let ca = rt.block_on(client(&addr_a));
    let cred = ca.default_cred();
    let name = format!("takeover-{ns}");
    let how = Createhow3::Unchecked(Sattr3 { mode: Some(0o644), ..Default::default() });
    let made = rt.block_on(ca.create(&cred, &ca.root(), name.as_bytes(), how)).expect("create");
    let fh: NfsFh3 = made.obj.expect("CREATE returns the handle");
    rt.block_on(ca.write(&cred, &fh, 0, Bytes::from_static(b"committed"), StableHow::FileSync)).unwrap();
    let verf_a =
        rt.block_on(ca.write(&cred, &fh, 100, Bytes::from_static(b"x"), StableHow::Unstable)).unwrap().verf;
    let lx = rt.block_on(locker(&ca, "client-x"));
    // Learns the server's NSM state number, so a change of it is seen as a restart.
    rt.block_on(lx.announce_restart()).unwrap();
    let (ox, oy) = (
        LockOwner { oh: Bytes::from_static(b"owner-x"), svid: 1 },
        LockOwner { oh: Bytes::from_static(b"owner-y"), svid: 2 },
    );
    let range = LockRange { offset: 0, len: 10 };
    assert_eq!(rt.block_on(lx.lock(&fh, &ox, range, true, false)).unwrap(), LockReply::Granted);

    // Through B: A's handle works (one key), A's client's lock excludes B's client.
    let cb = rt.block_on(client(&addr_b));
    let r = rt.block_on(cb.read(&cb.default_cred(), &fh, 0, 9)).expect("A's handle read through B");
    assert_eq!(&r.data[..], b"committed");
    let ly = rt.block_on(locker(&cb, "client-y"));
    assert_eq!(rt.block_on(ly.lock(&fh, &oy, range, true, false)).unwrap(), LockReply::Denied);

    // A dies; a new head takes node 1 and A's address. Again, for as many rounds as asked
    // (EAGERNFS_TAKEOVER_ROUNDS, default 2): a take-over during the last one's grace period.
    let rounds: usize =
        std::env::var("EAGERNFS_TAKEOVER_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(2);
    let mut verf = verf_a;
    let mut figures = Vec::new();
    for round in 1..=rounds {
        a.kill9();
        let killed = Instant::now();
        a = Head::start(&conf, &ns, 1, &addr_a, grace_s);
        let started = killed.elapsed();
        let resumed = loop {
            let r = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(5), ca.getattr(&cred, &fh)).await
            });
            if let Ok(Ok(_)) = r {
                break killed.elapsed();
            }
            assert!(killed.elapsed() < Duration::from_secs(60), "no answer within 60 s of the kill: {r:?}");
        };
        eprintln!(
            "take-over {round}: new head listening {started:?} after the kill; first successful call {resumed:?} after it"
        );
        figures.push(resumed);
        if std::env::var_os("EAGERNFS_TEST_VERBOSE").is_some() {
            eprintln!("{}", a.log());
        }
        assert!(a.log().contains("took over node 1"), "{}", a.log());
        assert!(
            a.log().contains("confirmed by every live head"),
            "head B confirmed the grace period before A's session was ended:\n{}",
            a.log()
        );

        // Data: the committed bytes are there; the verifier changed, so UNSTABLE data is resent.
        let r = rt.block_on(ca.read(&cred, &fh, 0, 9)).expect("read through the new head");
        assert_eq!(&r.data[..], b"committed");
        let now = rt
            .block_on(ca.write(&cred, &fh, 100, Bytes::from_static(b"x"), StableHow::Unstable))
            .unwrap()
            .verf;
        assert_ne!(verf, now, "a new head, a new write verifier");
        verf = now;

        // Grace: B grants no new lock (A's lock is gone from CephFS with A's session).
        assert_eq!(rt.block_on(ly.lock(&fh, &oy, range, true, false)).unwrap(), LockReply::Grace);
        // `eagernfs stat` of B shows the cluster in its grace period, node 1 needing it.
        let out = run_tool(
            env!("CARGO_BIN_EXE_eagernfs"),
            [
                std::ffi::OsStr::new("stat"),
                "--json".as_ref(),
                "--state-dir".as_ref(),
                b.state_dir().as_os_str(),
            ],
        );
        out.assert_success("stat");
        let doc: serde_json::Value = serde_json::from_str(&out.stdout_text()).unwrap();
        let c = &doc["cluster"];
        assert_eq!((c["node"].as_u64(), c["in_grace"].as_bool()), (Some(2), Some(true)), "{c}");
        assert!(c["nodes"].as_array().unwrap().iter().any(|n| n["node"] == 1 && n["need"] == true), "{c}");
        // X asks for more, hears of the grace period, and so reclaims what it held.
        let more = LockRange { offset: 20, len: 10 };
        assert_eq!(rt.block_on(lx.lock(&fh, &ox, more, true, false)).unwrap(), LockReply::Grace);
    }
    figures.sort();
    eprintln!(
        "take-over, kill -9 to the first successful call, {rounds} rounds: min {:?} median {:?} max {:?}",
        figures[0],
        figures[figures.len() / 2],
        figures[figures.len() - 1]
    );
    // Until the grace period ends (cluster-wide), B answers Grace; then Denied: X holds it.
    let deadline = Instant::now() + Duration::from_secs(grace_s as u64 + 30);
    loop {
        match rt.block_on(ly.lock(&fh, &oy, range, true, false)).unwrap() {
            LockReply::Grace => {}
            LockReply::Denied => break,
            other => panic!("B's client got {other:?} for the lock X held (and reclaimed): {}", b.log()),
        }
        assert!(Instant::now() < deadline, "the grace period never ended:\n{}", a.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(lx.holds(&fh, &ox), "X still holds its lock");
    drop(b);
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as u64
}

/// Runs everywhere (no cluster needed): the flags' errors say what to do.
#[test]
fn a_head_without_cephfs_or_librados_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let serve = |operand: &str, extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_eagernfs"));
        cmd.args(["serve", operand, "--listen", "127.0.0.1:0", "--state-dir"]).arg(&state).args(extra);
        let out = run_command(cmd, Duration::from_secs(60));
        assert!(!out.status.success(), "serve {operand} {extra:?} must fail");
        out.stderr
    };
    let e = serve(dir.path().to_str().unwrap(), &["--node-id", "1"]);
    assert!(e.contains("heads share a CephFS") && e.contains("leave out --node-id"), "{e}");
    // librados is looked for before anything else of Ceph: this fails the same on a machine
    // without any Ceph library.
    let e = serve(
        "cephfs://admin@cephfs/?conf=/nonexistent/ceph.conf",
        &["--node-id", "1", "--librados", "libnot-rados-eagernfs.so.9"],
    );
    assert!(e.contains("apt-get install librados2"), "{e}");
}
