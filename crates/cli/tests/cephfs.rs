//! CephFS exports end to end, on the one-node test cluster (`scripts/ceph-cluster.sh start`;
//! `scripts/test` starts it in CI). Without a cluster every test prints SKIP, unless
//! `EAGERNFS_REQUIRE_CEPH=1` says one must be there.
//!
//! - bytes written through `eagernfs mount` of a CephFS export read the same through
//!   `ceph-fuse`, and the other way round, including overwrites after a file was cached;
//! - a lock taken through eagernfs (NLM) stops a conflicting one through ceph-fuse, and the
//!   other way round, with blocked requests granted when the holder lets go;
//! - bad sources fail at start with a message naming the fix (missing conf, library, file
//!   system, path, key, monitors; an MDS that is down);
//! - an MDS that dies under calls gets them answered NFS3ERR_JUKEBOX (or answered late by the
//!   cluster), never left hanging, and service resumes when it is back;
//! - `kill -9` of the server while clients write loses no byte a COMMIT (or FILE_SYNC) covered:
//!   checked through a restarted server and through ceph-fuse;
//! - a session the cluster ends (the server evicted) is replaced without a restart, and the
//!   write verifier changes so clients resend what was not committed; the locks NFS clients
//!   held are taken again in the new session.
//!
//! The tests share the cluster and one of them stops its MDS: they run one at a time.

#[macro_use]
mod common;

use bytes::Bytes;
use common::*;
use eagernfs_client::{NfsClient, NfsError, NfsOps, NfsUrl};
use eagernfs_proto::nfs3::{Createhow3, NfsFh3, Nfsstat3, Sattr3, StableHow};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The test cluster's ceph.conf, or `None` after saying why the test skips.
fn cluster(test: &str) -> Option<PathBuf> {
    ceph::ceph_conf(test, "ceph-fuse/libcephfs", || {
        Path::new("/usr/bin/ceph-fuse").exists()
            && eagernfs_vfs::cephfs::version(eagernfs_vfs::cephfs::LIBRARY).is_ok()
    })
}

/// `scripts/ceph-cluster.sh ACTION` against the cluster of `conf`.
fn cluster_script(conf: &Path, action: &str) {
    let mut cmd = Command::new(repo().join("scripts/ceph-cluster.sh"));
    cmd.arg(action).env("CEPH_CLUSTER_DIR", conf.parent().unwrap());
    let out = run_command(cmd, Duration::from_secs(180));
    assert!(out.status.success(), "ceph-cluster.sh {action}: {}", out.stderr);
}

/// A ceph-fuse mount of `subdir` of the file system, unmounted on drop.
struct CephFuse {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl CephFuse {
    fn new(conf: &Path, subdir: &str) -> CephFuse {
        let dir = tempfile::Builder::new().prefix("ceph-fuse-").tempdir().unwrap();
        let path = dir.path().join("mnt");
        fs::create_dir(&path).unwrap();
        let mut cmd = Command::new("ceph-fuse");
        cmd.arg("--conf").arg(conf).args(["--client_fs", "cephfs", "-r", subdir]).arg(&path);
        // ceph-fuse goes to the background once mounted.
        let out = run_command(cmd, Duration::from_secs(60));
        assert!(out.status.success(), "ceph-fuse {subdir}: {}", out.stderr);
        assert!(is_mounted(&path), "ceph-fuse returned but {} is not mounted", path.display());
        CephFuse { _dir: dir, path }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }
}

impl Drop for CephFuse {
    fn drop(&mut self) {
        let mut cmd = Command::new("umount");
        cmd.arg(&self.path);
        if !run_command(cmd, Duration::from_secs(60)).status.success() {
            let mut lazy = Command::new("umount");
            lazy.arg("-l").arg(&self.path);
            run_command(lazy, Duration::from_secs(60));
        }
    }
}

/// A fresh directory `/NAME` of the file system (mode 0777), removed on drop.
struct CephDir {
    top: CephFuse,
    name: String,
}

impl CephDir {
    fn new(conf: &Path, what: &str) -> CephDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let top = CephFuse::new(conf, "/");
        let name = format!("e2e-{what}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        fs::create_dir(top.path(&name)).unwrap();
        chmod(&top.path(&name), 0o777);
        CephDir { top, name }
    }

    /// The `cephfs://` URL of this directory.
    fn url(&self, conf: &Path) -> String {
        format!("cephfs://admin@cephfs/{}?conf={}", self.name, conf.display())
    }

    fn mount_path(&self) -> PathBuf {
        PathBuf::from(format!("/{}", self.name))
    }
}

impl Drop for CephDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(self.top.path(&self.name));
    }
}

/// An eagernfs server exporting `dir` read-write (and `extra`).
fn serve(conf: &Path, dir: &CephDir, extra: &[&str]) -> Server {
    let url = dir.url(conf);
    let mut args = vec!["-o", "rw,no_root_squash"];
    args.extend_from_slice(extra);
    Server::eagernfs_serving(&url, &dir.mount_path(), &args)
}

fn write_file(path: &Path, data: &[u8]) {
    let mut f = File::create(path).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn files_are_byte_identical_through_eagernfs_and_ceph_fuse() {
    require_fuse!("files_are_byte_identical_through_eagernfs_and_ceph_fuse");
    let Some(conf) = cluster("files_are_byte_identical_through_eagernfs_and_ceph_fuse") else { return };
    let _one = serial();
    let dir = CephDir::new(&conf, "bytes");
    let server = serve(&conf, &dir, &[]);
    let nfs = FuseMount::new(&server.url(""), "vers=3");
    let ceph = CephFuse::new(&conf, &dir.mount_path().display().to_string());

    // eagernfs → ceph-fuse: sizes around CephFS's 4 MiB objects and the client's 1 MiB blocks.
    for (i, len) in [0usize, 1, 4095, 65537, (1 << 20) + 3, (4 << 20) + 1, 9 << 20].into_iter().enumerate() {
        let data = pattern_bytes(i as u64, 0, len);
        write_file(&nfs.path(&format!("n{i}")), &data);
        assert!(
            fs::read(ceph.path(&format!("n{i}"))).unwrap() == data,
            "n{i} ({len} bytes) through ceph-fuse"
        );
    }
    // ceph-fuse → eagernfs.
    for (i, len) in [2usize, 1 << 20, (4 << 20) + 7].into_iter().enumerate() {
        let data = pattern_bytes(100 + i as u64, 0, len);
        write_file(&ceph.path(&format!("c{i}")), &data);
        assert!(fs::read(nfs.path(&format!("c{i}"))).unwrap() == data, "c{i} ({len} bytes) through eagernfs");
    }
    // A file eagernfs has read (and cached) changes through ceph-fuse: the next open
    // through eagernfs sees the change (close-to-open; the server's cache is kept coherent
    // by the MDS's capabilities).
    let mut model = fs::read(nfs.path("n5")).unwrap();
    let patch = pattern_bytes(777, 0, 100_000);
    {
        let mut f = OpenOptions::new().write(true).open(ceph.path("n5")).unwrap();
        f.seek(SeekFrom::Start(3 << 20)).unwrap();
        f.write_all(&patch).unwrap();
        f.sync_all().unwrap();
    }
    model[3 << 20..(3 << 20) + patch.len()].copy_from_slice(&patch);
    let mut got = Vec::new();
    File::open(nfs.path("n5")).unwrap().read_to_end(&mut got).unwrap();
    assert!(got == model, "an overwrite through ceph-fuse is seen through eagernfs");
    // And the other way: append through eagernfs, read through ceph-fuse.
    {
        let mut f = OpenOptions::new().append(true).open(nfs.path("c1")).unwrap();
        f.write_all(b"tail").unwrap();
        f.sync_all().unwrap();
    }
    let c1 = fs::read(ceph.path("c1")).unwrap();
    assert_eq!(c1.len(), (1 << 20) + 4);
    assert_eq!(&c1[1 << 20..], b"tail");
    // Names made on one side are seen on the other.
    fs::create_dir(nfs.path("made-by-nfs")).unwrap();
    write_file(&nfs.path("made-by-nfs/x"), b"x");
    assert_eq!(fs::read(ceph.path("made-by-nfs/x")).unwrap(), b"x");
    fs::rename(ceph.path("made-by-nfs/x"), ceph.path("moved-by-ceph")).unwrap();
    assert_eq!(fs::read(nfs.path("moved-by-ceph")).unwrap(), b"x");
}

/// `fcntl(F_SETLK/F_SETLKW)`: `Err(errno)` on failure.
fn setlk(f: &File, typ: i32, start: i64, len: i64, wait: bool) -> Result<(), i32> {
    // SAFETY: flock is plain data; zeroed is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = typ as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    let cmd = if wait { libc::F_SETLKW } else { libc::F_SETLK };
    // SAFETY: a valid descriptor and flock.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), cmd, &mut fl) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap())
    }
}

/// `fcntl(F_GETLK)`: whether a lock of another owner stands in the way.
fn conflicting(f: &File, typ: i32, start: i64, len: i64) -> bool {
    // SAFETY: as in `setlk`.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = typ as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    // SAFETY: as in `setlk`.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETLK, &mut fl) };
    assert_eq!(r, 0, "F_GETLK: {}", std::io::Error::last_os_error());
    fl.l_type as i32 != libc::F_UNLCK
}

fn open_rw(p: &Path) -> File {
    OpenOptions::new().read(true).write(true).create(true).truncate(false).open(p).unwrap()
}

/// Take a write lock on `f` in a thread that waits for it; the receiver gets the result.
fn wait_for_lock(
    f: File,
    start: i64,
    len: i64,
) -> (mpsc::Receiver<Result<(), i32>>, std::thread::JoinHandle<File>) {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = setlk(&f, libc::F_WRLCK, start, len, true);
        let _ = tx.send(r);
        f
    });
    (rx, t)
}

#[test]
fn a_lock_through_eagernfs_excludes_ceph_fuse_and_the_other_way_round() {
    require_fuse!("a_lock_through_eagernfs_excludes_ceph_fuse_and_the_other_way_round");
    let Some(conf) = cluster("a_lock_through_eagernfs_excludes_ceph_fuse_and_the_other_way_round") else {
        return;
    };
    let _one = serial();
    let dir = CephDir::new(&conf, "locks");
    let server = serve(&conf, &dir, &[]);
    let nfs = FuseMount::new(&server.url(""), "vers=3");
    let ceph = CephFuse::new(&conf, &dir.mount_path().display().to_string());
    write_file(&nfs.path("f"), b"locked file");

    // eagernfs holds 0..100: ceph-fuse may not take any of it, and sees it in F_GETLK.
    let a = open_rw(&nfs.path("f"));
    setlk(&a, libc::F_WRLCK, 0, 100, false).expect("lock through eagernfs");
    let c = open_rw(&ceph.path("f"));
    assert_eq!(
        setlk(&c, libc::F_WRLCK, 50, 10, false),
        Err(libc::EAGAIN),
        "ceph-fuse overlaps eagernfs's lock"
    );
    assert_eq!(
        setlk(&c, libc::F_RDLCK, 99, 1, false),
        Err(libc::EAGAIN),
        "even a read lock on its last byte"
    );
    assert!(conflicting(&c, libc::F_RDLCK, 0, 1), "ceph-fuse's F_GETLK sees eagernfs's lock");
    setlk(&c, libc::F_WRLCK, 100, 10, false).expect("ceph-fuse takes what eagernfs does not hold");
    // A waiting ceph-fuse lock gets the range once eagernfs lets go.
    let (got, t) = wait_for_lock(c, 0, 10);
    assert!(
        got.recv_timeout(Duration::from_millis(500)).is_err(),
        "ceph-fuse must wait while eagernfs holds it"
    );
    setlk(&a, libc::F_UNLCK, 0, 100, false).unwrap();
    assert_eq!(
        got.recv_timeout(Duration::from_secs(30)),
        Ok(Ok(())),
        "granted to ceph-fuse after the unlock"
    );
    let c = t.join().unwrap();

    // ceph-fuse holds 0..10 and 100..110: eagernfs is refused there (NLM DENIED), and
    // F_GETLK through eagernfs sees ceph-fuse's lock.
    assert_eq!(
        setlk(&a, libc::F_WRLCK, 5, 1, false),
        Err(libc::EAGAIN),
        "eagernfs overlaps ceph-fuse's lock"
    );
    assert!(conflicting(&a, libc::F_WRLCK, 100, 5), "eagernfs's F_GETLK sees ceph-fuse's lock");
    setlk(&a, libc::F_WRLCK, 20, 10, false).expect("a free range through eagernfs");
    // A blocked request through eagernfs is granted (GRANTED callback) once ceph-fuse lets go.
    let a2 = open_rw(&nfs.path("f"));
    let (got, t) = wait_for_lock(a2, 0, 10);
    assert!(
        got.recv_timeout(Duration::from_millis(1500)).is_err(),
        "eagernfs must wait while ceph-fuse holds it"
    );
    setlk(&c, libc::F_UNLCK, 0, 0, false).unwrap();
    assert_eq!(
        got.recv_timeout(Duration::from_secs(30)),
        Ok(Ok(())),
        "granted through eagernfs after the unlock"
    );
    let a2 = t.join().unwrap();
    // And ceph-fuse is now refused the range eagernfs just got.
    assert_eq!(setlk(&c, libc::F_WRLCK, 0, 1, false), Err(libc::EAGAIN));
    // Closing every eagernfs descriptor releases its locks in CephFS too.
    drop(a);
    drop(a2);
    let deadline = Instant::now() + Duration::from_secs(30);
    while setlk(&c, libc::F_WRLCK, 0, 0, false).is_err() {
        assert!(Instant::now() < deadline, "eagernfs's locks outlived its last close");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `eagernfs serve ARGS`: it must exit unsuccessfully within `within`; its stderr.
fn serve_fails(args: &[&str], within: Duration) -> String {
    let state = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(eagernfs_bin());
    cmd.arg("serve").args(args).args(["--listen", "127.0.0.1:0", "--state-dir"]).arg(state.path());
    let started = Instant::now();
    let out = run_command(cmd, within + Duration::from_secs(30));
    assert!(!out.status.success(), "serve {args:?} should fail; stderr: {}", out.stderr);
    assert!(started.elapsed() < within, "serve {args:?} took {:?} to fail", started.elapsed());
    out.stderr
}

#[test]
fn bad_sources_fail_at_start_with_a_message_that_names_the_fix() {
    let Some(conf) = cluster("bad_sources_fail_at_start_with_a_message_that_names_the_fix") else { return };
    let _one = serial();
    let c = conf.display().to_string();
    let quick = Duration::from_secs(20);
    let e = serve_fails(&["cephfs://admin@cephfs/?conf=/no/such/ceph.conf"], quick);
    assert!(
        e.contains("cannot read the Ceph configuration /no/such/ceph.conf") && e.contains("?conf="),
        "{e}"
    );
    let e = serve_fails(&[&format!("cephfs://admin@nosuchfs/?conf={c}")], quick);
    assert!(e.contains("no file system named \"nosuchfs\"") && e.contains("ceph fs ls"), "{e}");
    let e = serve_fails(&[&format!("cephfs://admin@cephfs/no/such/dir?conf={c}")], quick);
    assert!(e.contains("/no/such/dir does not exist in file system \"cephfs\""), "{e}");
    let e = serve_fails(&[&format!("cephfs://nobody@cephfs/?conf={c}")], quick);
    assert!(e.contains("cannot connect") && e.contains("client.nobody's key"), "{e}");
    let e = serve_fails(&[&format!("cephfs://cephfs/?conf={c}"), "--libcephfs", "/no/libcephfs.so.2"], quick);
    assert!(e.contains("apt-get install libcephfs2"), "{e}");
    let e = serve_fails(&["cephfs://admin@cephfs/a/../b"], quick);
    assert!(e.contains("may not contain \"..\"") && e.contains("cephfs://[ID@]FSNAME/PATH"), "{e}");
    // Monitors that do not answer (the right cluster, a wrong port): a bounded wait, then why.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("ceph.conf");
    let text = fs::read_to_string(&conf).unwrap();
    let text: String =
        text.lines()
            .map(|l| {
                if l.starts_with("mon host") {
                    "mon host = v2:127.0.0.1:9".to_string()
                } else {
                    l.to_string()
                }
            })
            .map(|l| l + "\n")
            .collect();
    fs::write(&bad, text).unwrap();
    let e = serve_fails(
        &[&format!("cephfs://admin@cephfs/?conf={}", bad.display()), "--ceph-connect-timeout", "3"],
        quick,
    );
    assert!(e.contains("cannot connect to the cluster") && e.contains("ceph -s"), "{e}");
}

async fn connect(server: &Server) -> NfsClient {
    let url: NfsUrl = server.url("").parse().expect("url");
    NfsClient::connect_url(&url).await.expect("mount")
}

async fn create(c: &NfsClient, name: &str) -> Result<NfsFh3, NfsError> {
    let cred = c.default_cred();
    let how = Createhow3::Unchecked(Sattr3 { mode: Some(0o644), ..Default::default() });
    let made = c.create(&cred, &c.root(), name.as_bytes(), how).await?;
    match made.obj {
        Some(fh) => Ok(fh),
        None => Ok(c.lookup(&cred, &c.root(), name.as_bytes()).await?.object),
    }
}

#[test]
fn a_dead_mds_is_answered_jukebox_never_a_hang_and_service_resumes() {
    let Some(conf) = cluster("a_dead_mds_is_answered_jukebox_never_a_hang_and_service_resumes") else {
        return;
    };
    let _one = serial();
    // Whatever happens below, the MDS is up again afterwards for the other tests.
    struct MdsBack<'a>(&'a Path);
    impl Drop for MdsBack<'_> {
        fn drop(&mut self) {
            cluster_script(self.0, "start-mds");
        }
    }
    let _back = MdsBack(&conf);
    let dir = CephDir::new(&conf, "mds");

    // An MDS down at start: the server gives up after its connect timeout, saying what to check.
    cluster_script(&conf, "stop-mds");
    let e = serve_fails(&[&dir.url(&conf), "--ceph-connect-timeout", "5"], Duration::from_secs(40));
    assert!(e.contains("mounting failed") && e.contains("ceph fs status"), "{e}");
    cluster_script(&conf, "start-mds");

    // Calls under a dying MDS: each gets an answer within the deadline (JUKEBOX, or an
    // answer from the client's cache), never silence.
    let server = serve(&conf, &dir, &["--ceph-stall-after", "2", "--cluster-reply-after", "4"]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let c = rt.block_on(connect(&server));
    let cred = c.default_cred();
    let fh = rt.block_on(create(&c, "before")).expect("create with the MDS up");
    rt.block_on(c.write(&cred, &fh, 0, Bytes::from_static(b"kept"), StableHow::FileSync)).expect("write");
    // A client that waits JUKEBOX out, as the FUSE mount does.
    let patient = rt.block_on(connect(&server));
    patient.set_retry_jukebox(true);
    cluster_script(&conf, "stop-mds");
    let waiting = rt.spawn(async move { create(&patient, "waited-out").await });
    let mut jukeboxes = 0;
    for i in 0..3 {
        let started = Instant::now();
        let r = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(30), create(&c, &format!("during-{i}"))).await
        });
        let took = started.elapsed();
        match r {
            Err(_) => panic!("CREATE {i} got no answer within 30 s of the MDS going down"),
            Ok(Err(NfsError::Nfs(Nfsstat3::Jukebox))) => jukeboxes += 1,
            Ok(Err(e)) => panic!("CREATE {i}: {e} (want JUKEBOX while the MDS is down)"),
            Ok(Ok(_)) => panic!("CREATE {i} succeeded with no MDS"),
        }
        assert!(took < Duration::from_secs(8), "CREATE {i} took {took:?}: the deadline is 4 s");
    }
    assert_eq!(jukeboxes, 3);
    // The patient client was answered JUKEBOX meanwhile too, and still waits.
    assert!(!waiting.is_finished(), "a JUKEBOX answer reached a client that waits it out");
    // The data read before is still served (from the client's cache or the OSD).
    let got = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(30), c.read(&cred, &fh, 0, 100)).await });
    match got {
        Err(_) => panic!("READ got no answer within 30 s of the MDS going down"),
        Ok(Ok(r)) => assert_eq!(&r.data[..], b"kept"),
        Ok(Err(NfsError::Nfs(Nfsstat3::Jukebox))) => {}
        Ok(Err(e)) => panic!("READ: {e}"),
    }
    // The MDS comes back: new calls succeed again within a bounded time.
    cluster_script(&conf, "start-mds");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        match rt.block_on(create(&c, "after")) {
            Ok(_) => break,
            Err(NfsError::Nfs(Nfsstat3::Jukebox)) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(500))
            }
            Err(e) => panic!("CREATE after the MDS came back: {e}"),
        }
    }
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(90), waiting).await })
        .expect("the waiting CREATE completes once the MDS is back")
        .unwrap()
        .expect("the waiting CREATE succeeds");
    let r = rt.block_on(c.read(&cred, &fh, 0, 100)).expect("read after the MDS came back");
    assert_eq!(&r.data[..], b"kept");
    let stats = server.log_tail(200);
    assert!(!stats.contains("panicked"), "{stats}");
}

const BLOCK: u64 = 64 * 1024;

fn block(round: u64, n: u64) -> Bytes {
    Bytes::from(pattern_bytes(round * 1_000_003 + n, n * BLOCK, BLOCK as usize))
}

/// `kill -9` while 4 writers send UNSTABLE WRITEs with COMMITs (and some FILE_SYNC): every
/// block a FILE_SYNC or a COMMIT with its WRITE's verifier covered reads back after the
/// restart, through the server and through ceph-fuse; and the verifier changed.
#[test]
fn committed_writes_survive_kill_9() {
    let Some(conf) = cluster("committed_writes_survive_kill_9") else { return };
    let _one = serial();
    let rounds: u64 = std::env::var("EAGERNFS_CRASH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let dir = CephDir::new(&conf, "crash");
    let mut server = serve(&conf, &dir, &[]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let _in_runtime = rt.enter();
    let mut files = Vec::new();
    let mut verifiers = Vec::new();
    for round in 0..rounds {
        let durable: Arc<Mutex<Vec<u64>>> = Arc::default();
        let c = Arc::new(rt.block_on(connect(&server)));
        let fh = rt.block_on(create(&c, &format!("plain-{round}"))).expect("create");
        let tasks: Vec<_> = (0..4u64)
            .map(|w| {
                let (c, fh, durable) = (c.clone(), fh.clone(), durable.clone());
                rt.spawn(async move {
                    let cred = c.default_cred();
                    let mut pending = Vec::new();
                    let mut verf = None;
                    for n in (w..2048).step_by(4) {
                        if n % 5 == 0 {
                            let Ok(r) =
                                c.write(&cred, &fh, n * BLOCK, block(round, n), StableHow::FileSync).await
                            else {
                                break;
                            };
                            assert_ne!(r.committed, StableHow::Unstable, "FILE_SYNC answered unstable");
                            durable.lock().unwrap().push(n);
                            continue;
                        }
                        let Ok(r) =
                            c.write(&cred, &fh, n * BLOCK, block(round, n), StableHow::Unstable).await
                        else {
                            break;
                        };
                        verf = Some(r.verf);
                        pending.push(n);
                        if pending.len() == 8 {
                            let Ok(done) = c.commit(&cred, &fh, 0, 0).await else { break };
                            if Some(done.verf) == verf {
                                durable.lock().unwrap().append(&mut pending);
                            } else {
                                pending.clear();
                            }
                        }
                    }
                    verf
                })
            })
            .collect();
        // Crash once some blocks are durable (at a point that differs by round).
        let want = 10 + 37 * round as usize;
        let deadline = Instant::now() + Duration::from_secs(60);
        while durable.lock().unwrap().len() < want {
            assert!(Instant::now() < deadline, "round {round}: writes too slow");
            std::thread::sleep(Duration::from_millis(2));
        }
        server.crash_restart();
        for t in tasks {
            t.abort();
            if let Ok(Some(v)) = rt.block_on(t) {
                verifiers.push(v);
            }
        }
        drop(c);
        files.push((round, std::mem::take(&mut *durable.lock().unwrap())));
        // Through the restarted server.
        let c = rt.block_on(connect(&server));
        let cred = c.default_cred();
        for (r, blocks) in &files {
            let fh = rt
                .block_on(c.lookup(&cred, &c.root(), format!("plain-{r}").as_bytes()))
                .expect("lookup after the crash")
                .object;
            for &n in blocks {
                let got =
                    rt.block_on(c.read(&cred, &fh, n * BLOCK, BLOCK as u32)).expect("read after the crash");
                assert!(
                    got.data == block(*r, n),
                    "round {r} block {n}: committed data lost after round {round}'s crash"
                );
            }
        }
        let fh = rt.block_on(create(&c, "probe")).expect("create after the crash");
        let after =
            rt.block_on(c.write(&cred, &fh, 0, Bytes::from_static(b"x"), StableHow::Unstable)).unwrap().verf;
        assert!(!verifiers.contains(&after), "round {round}: the verifier survived a crash");
    }
    // Through ceph-fuse: the same bytes are in CephFS itself.
    let ceph = CephFuse::new(&conf, &dir.mount_path().display().to_string());
    for (r, blocks) in &files {
        let mut f = File::open(ceph.path(&format!("plain-{r}"))).unwrap();
        for &n in blocks {
            let mut buf = vec![0u8; BLOCK as usize];
            f.seek(SeekFrom::Start(n * BLOCK)).unwrap();
            f.read_exact(&mut buf).unwrap();
            assert!(buf == block(*r, n), "round {r} block {n}: not in CephFS");
        }
    }
}

/// The MDS session ids the server's log names (`mounted as client.N`, `connected again as client.N`).
fn session_ids(server: &Server) -> Vec<u64> {
    server
        .log_tail(400)
        .split("client.")
        .skip(1)
        .filter_map(|t| t.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .collect()
}

#[test]
fn an_evicted_server_connects_again_and_changes_its_verifier() {
    let Some(conf) = cluster("an_evicted_server_connects_again_and_changes_its_verifier") else { return };
    let _one = serial();
    let dir = CephDir::new(&conf, "evict");
    let server = serve(&conf, &dir, &[]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let c = rt.block_on(connect(&server));
    let cred = c.default_cred();
    let fh = rt.block_on(create(&c, "kept")).expect("create");
    rt.block_on(c.write(&cred, &fh, 0, Bytes::from_static(b"committed"), StableHow::FileSync)).unwrap();
    let before =
        rt.block_on(c.write(&cred, &fh, 100, Bytes::from_static(b"x"), StableHow::Unstable)).unwrap().verf;
    let id = *session_ids(&server).first().expect("the server logs its session id");
    let mut cmd = Command::new("ceph");
    cmd.arg("--conf").arg(&conf).args(["tell", "mds.a", "client", "evict"]).arg(format!("id={id}"));
    let out = run_command(cmd, Duration::from_secs(60));
    assert!(out.status.success(), "ceph tell mds.a client evict: {}", out.stderr);
    // Calls meanwhile: JUKEBOX (come back) or an answer, never an error or silence; within
    // a bounded time the server has a new session and everything works again.
    let deadline = Instant::now() + Duration::from_secs(60);
    let after = loop {
        let r = rt.block_on(async {
            tokio::time::timeout(
                Duration::from_secs(30),
                c.write(&cred, &fh, 200, Bytes::from_static(b"y"), StableHow::Unstable),
            )
            .await
        });
        match r {
            Err(_) => panic!("a WRITE got no answer within 30 s of the eviction"),
            Ok(Ok(w)) if w.verf != before => break w.verf,
            Ok(Ok(_)) | Ok(Err(NfsError::Nfs(Nfsstat3::Jukebox))) => {}
            Ok(Err(e)) => panic!("WRITE after the eviction: {e}"),
        }
        assert!(Instant::now() < deadline, "no new session within 60 s of the eviction");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_ne!(after, before, "the verifier changed: what was not committed is to be resent");
    assert!(session_ids(&server).iter().any(|&n| n != id), "a new session: {}", server.log_tail(20));
    let r = rt.block_on(c.read(&cred, &fh, 0, 9)).expect("read after the new session");
    assert_eq!(&r.data[..], b"committed", "committed data survives the eviction");
}

#[test]
fn locks_are_taken_again_in_the_session_that_replaces_an_evicted_one() {
    require_fuse!("locks_are_taken_again_in_the_session_that_replaces_an_evicted_one");
    let Some(conf) = cluster("locks_are_taken_again_in_the_session_that_replaces_an_evicted_one") else {
        return;
    };
    let _one = serial();
    let dir = CephDir::new(&conf, "evict-locks");
    let server = serve(&conf, &dir, &[]);
    let nfs = FuseMount::new(&server.url(""), "vers=3");
    let ceph = CephFuse::new(&conf, &dir.mount_path().display().to_string());
    write_file(&nfs.path("f"), b"locked file");
    let a = open_rw(&nfs.path("f"));
    setlk(&a, libc::F_WRLCK, 0, 100, false).expect("lock through eagernfs");
    setlk(&a, libc::F_UNLCK, 40, 10, false).expect("a hole in it");
    let c = open_rw(&ceph.path("f"));
    assert_eq!(setlk(&c, libc::F_WRLCK, 50, 1, false), Err(libc::EAGAIN));

    // The cluster ends the server's session, and with it its CephFS locks.
    let id = *session_ids(&server).first().expect("the server logs its session id");
    let mut cmd = Command::new("ceph");
    cmd.arg("--conf").arg(&conf).args(["tell", "mds.a", "client", "evict"]).arg(format!("id={id}"));
    let out = run_command(cmd, Duration::from_secs(60));
    assert!(out.status.success(), "ceph tell mds.a client evict: {}", out.stderr);
    // A call notices; the new session takes the locks again.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !server.log_tail(50).contains("lock(s) taken again") {
        let _ = fs::write(nfs.path("poke"), b"a call to the cluster");
        assert!(Instant::now() < deadline, "no new session within 60 s: {}", server.log_tail(30));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        server.log_tail(50).contains("2 lock(s) taken again in the new session, 0 lost"),
        "{}",
        server.log_tail(30)
    );
    // ceph-fuse is still kept out of both pieces, and may take the hole.
    assert_eq!(setlk(&c, libc::F_WRLCK, 50, 1, false), Err(libc::EAGAIN), "after the eviction");
    assert_eq!(setlk(&c, libc::F_WRLCK, 0, 1, false), Err(libc::EAGAIN), "after the eviction");
    setlk(&c, libc::F_WRLCK, 40, 10, false).expect("the hole is free");
    setlk(&c, libc::F_UNLCK, 40, 10, false).unwrap();
    // A release through eagernfs reaches the new session.
    setlk(&a, libc::F_UNLCK, 0, 100, false).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while setlk(&c, libc::F_WRLCK, 0, 0, false).is_err() {
        assert!(Instant::now() < deadline, "eagernfs's unlock did not reach the new session");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// As on a local export (fuse_mount.rs): a file removed or renamed over while open through the
/// mount of a CephFS export is gone from CephFS after its last close, and ceph-fuse sees no
/// hidden name left.
#[test]
fn files_removed_while_open_are_gone_after_their_last_close_on_cephfs() {
    require_fuse!("files_removed_while_open_are_gone_after_their_last_close_on_cephfs");
    let Some(conf) = cluster("files_removed_while_open_are_gone_after_their_last_close_on_cephfs") else {
        return;
    };
    let _one = serial();
    let dir = CephDir::new(&conf, "silly");
    let server = serve(&conf, &dir, &[]);
    let nfs = FuseMount::new(&server.url(""), "vers=3");
    files_removed_while_open_leave_nothing(&nfs);
    let ceph = CephFuse::new(&conf, &dir.mount_path().display().to_string());
    let left: Vec<_> = fs::read_dir(ceph.path("")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "left in CephFS: {left:?}");
}
