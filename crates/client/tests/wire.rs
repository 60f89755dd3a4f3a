//! The wire client against an in-process eagernfs server: every procedure,
//! pipelining, nconnect, soft and hard mounts, reconnect after a restart,
//! AUTH_SYS identity, mount errors and URL path resolution.

// The server's black-box test harness (TestServer, export specs).
#[path = "../../server/tests/common/mod.rs"]
mod common;

use bytes::Bytes;
use common::{memory, spec, TestServer, WAIT};
use eagernfs_client::driver::{RpcClient, TransportConfig, TransportEvent};
use eagernfs_client::{Cred, MountOptions, NfsClient, NfsError, NfsOps, NfsUrl};
use eagernfs_proto::nfs3::*;
use eagernfs_rpc::RecordDecoder;
use eagernfs_server::ServerConfig;
use eagernfs_vfs::local::{LocalBackend, LocalConfig};
use std::future::Future;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

/// Fail the test instead of hanging it.
async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(WAIT, f).await.expect("test step timed out")
}

fn mem_server() -> TestServer {
    TestServer::start(vec![spec(
        1,
        &["/export"],
        "/export 127.0.0.0/8(rw,insecure,no_root_squash)",
        memory(),
    )])
}

fn url(s: &TestServer, path: &str, query: &str) -> String {
    let q = if query.is_empty() { String::new() } else { format!("?{query}") };
    format!("nfs://127.0.0.1:{}{path}{q}", s.addr.port())
}

fn root() -> Cred {
    Cred::root()
}

fn mode(m: u32) -> Sattr3 {
    Sattr3 { mode: Some(m), ..Default::default() }
}

fn handle(fh: Option<NfsFh3>) -> NfsFh3 {
    fh.expect("the server returned a handle")
}

/// Wait for a transport event matching `want`.
async fn wait_event(rx: &mut broadcast::Receiver<TransportEvent>, want: impl Fn(&TransportEvent) -> bool) {
    within(async {
        loop {
            match rx.recv().await {
                Ok(e) if want(&e) => return,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("event channel: {e}"),
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_procedure_round_trips() {
    let s = mem_server();
    let c = within(NfsClient::connect(&url(&s, "/export", "wsize=65536"))).await.unwrap();
    assert_eq!(c.export(), "/export");
    assert_eq!(c.path_inside(), "/");
    assert_eq!(c.wsize(), 65536, "min(server wtmax, wsize option)");
    assert_eq!(c.rsize(), 1 << 20, "the server's rtmax");
    let cr = root();
    let r = c.root();

    c.null().await.unwrap();
    assert_eq!(c.getattr(&cr, &r).await.unwrap().ftype, Ftype3::Dir);
    assert!(c.fsinfo(&cr, &r).await.unwrap().wtmax >= 65536);
    assert!(c.fsstat(&cr, &r).await.unwrap().tbytes > 0);
    assert!(c.pathconf(&cr, &r).await.unwrap().name_max >= 255);
    assert_eq!(
        c.access(&cr, &r, ACCESS3_READ | ACCESS3_LOOKUP).await.unwrap().access,
        ACCESS3_READ | ACCESS3_LOOKUP
    );

    let d = handle(c.mkdir(&cr, &r, b"d", mode(0o755)).await.unwrap().obj);
    let f = handle(c.create(&cr, &d, b"f", Createhow3::Unchecked(mode(0o644))).await.unwrap().obj);
    assert_eq!(c.lookup(&cr, &d, b"f").await.unwrap().object, f);
    assert_eq!(c.lookup(&cr, &d, b"nope").await.unwrap_err(), NfsError::Nfs(Nfsstat3::Noent));

    let w = c.write(&cr, &f, 0, Bytes::from_static(b"hello world"), StableHow::Unstable).await.unwrap();
    assert_eq!(w.count, 11);
    let commit = c.commit(&cr, &f, 0, 0).await.unwrap();
    assert_eq!(commit.verf, w.verf, "same server instance, same verifier");
    let rd = c.read(&cr, &f, 6, 100).await.unwrap();
    assert_eq!((&rd.data[..], rd.eof), (&b"world"[..], true));

    c.setattr(&cr, &f, Sattr3 { size: Some(5), ..Default::default() }, None).await.unwrap();
    assert_eq!(c.getattr(&cr, &f).await.unwrap().size, 5);
    // A guard that does not match the ctime is NOT_SYNC.
    let bad_guard = Some(Nfstime3 { seconds: 1, nseconds: 0 });
    assert_eq!(
        c.setattr(&cr, &f, mode(0o600), bad_guard).await.unwrap_err(),
        NfsError::Nfs(Nfsstat3::NotSync)
    );

    let l = handle(c.symlink(&cr, &d, b"l", b"f", Sattr3::default()).await.unwrap().obj);
    assert_eq!(&c.readlink(&cr, &l).await.unwrap().data[..], b"f");
    c.link(&cr, &f, &d, b"hard").await.unwrap();
    assert_eq!(c.getattr(&cr, &f).await.unwrap().nlink, 2);
    c.mknod(&cr, &d, b"p", Mknoddata3::Fifo(mode(0o600))).await.unwrap();

    let rd = c.readdir(&cr, &d, 0, [0; 8], 8192).await.unwrap();
    let mut names: Vec<Vec<u8>> = rd.reply.entries.iter().map(|e| e.name.to_vec()).collect();
    names.sort();
    let want: Vec<&[u8]> = vec![b".", b"..", b"f", b"hard", b"l", b"p"];
    assert_eq!(names, want);
    let rdp = c.readdirplus(&cr, &d, 0, [0; 8], 8192, 65536).await.unwrap();
    let f_entry = rdp.reply.entries.iter().find(|e| &e.name[..] == b"f").unwrap();
    assert_eq!(f_entry.name_handle.as_ref(), Some(&f));

    c.rename(&cr, &d, b"f", &r, b"moved").await.unwrap();
    assert_eq!(c.lookup(&cr, &r, b"moved").await.unwrap().object, f);
    for name in [&b"hard"[..], b"l", b"p"] {
        c.remove(&cr, &d, name).await.unwrap();
    }
    c.rmdir(&cr, &r, b"d").await.unwrap();
    assert_eq!(c.remove(&cr, &r, b"d").await.unwrap_err(), NfsError::Nfs(Nfsstat3::Noent));
    // A name longer than NFS allows fails here, as a local file system would.
    assert_eq!(c.lookup(&cr, &r, &[b'x'; 300]).await.unwrap_err(), NfsError::Nfs(Nfsstat3::Nametoolong));

    // Each procedure reached the server (MOUNT's FSINFO included).
    for p in 0..22 {
        assert!(s.stats.nfs3(p) >= 1, "procedure {p} never reached the server");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_calls_are_pipelined_on_one_connection() {
    let s = mem_server();
    let c = within(NfsClient::connect(&url(&s, "/export", ""))).await.unwrap();
    let f = handle(c.create(&root(), &c.root(), b"f", Createhow3::Unchecked(mode(0o644))).await.unwrap().obj);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..400u64 {
        let (c, f) = (c.clone(), f.clone());
        tasks.spawn(async move {
            let data = Bytes::from(vec![(i % 251) as u8; 512]);
            c.write(&root(), &f, i * 512, data, StableHow::Unstable).await.unwrap();
            let back = c.read(&root(), &f, i * 512, 512).await.unwrap();
            assert!(back.data.iter().all(|b| *b == (i % 251) as u8));
        });
    }
    within(async {
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
    })
    .await;
    assert_eq!(c.getattr(&root(), &f).await.unwrap().size, 400 * 512);
    let stats = &c.rpc().connection_stats()[0];
    assert_eq!(stats.connects.load(std::sync::atomic::Ordering::Relaxed), 1, "one connection");
    let core = *stats.core.lock();
    assert!(core.in_flight_max > 8, "calls were pipelined: at most {} in flight", core.in_flight_max);
    assert_eq!(core.retransmissions, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nconnect_spreads_calls_over_four_connections() {
    let s = mem_server();
    let c = within(NfsClient::connect(&url(&s, "/export", "nconnect=4"))).await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..200 {
        let c = c.clone();
        tasks.spawn(async move { c.getattr(&root(), &c.root()).await.unwrap() });
    }
    within(async {
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
    })
    .await;
    let stats = c.rpc().connection_stats();
    assert_eq!(stats.len(), 4);
    let mut ports = std::collections::HashSet::new();
    for (i, st) in stats.iter().enumerate() {
        let calls = st.calls.load(std::sync::atomic::Ordering::Relaxed);
        // 201 calls (FSINFO + 200) round-robin: 50 or 51 each.
        assert!((50..=51).contains(&calls), "connection {i} carried {calls} calls");
        assert_eq!(st.connects.load(std::sync::atomic::Ordering::Relaxed), 1);
        ports.insert(st.local_addr.lock().expect("connected").port());
    }
    assert_eq!(ports.len(), 4, "four distinct TCP connections");
}

/// A TCP listener that accepts connections and never answers, counting the
/// RPC records it receives.
async fn black_hole() -> (SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let records = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = records.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            let counter = counter.clone();
            tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                let mut dec = RecordDecoder::new(1 << 20);
                let mut buf = bytes::BytesMut::new();
                while sock.read_buf(&mut buf).await.is_ok_and(|n| n > 0) {
                    while let Ok(Some(_)) = dec.decode(&mut buf) {
                        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    (addr, records)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soft_mount_times_out_after_timeo_times_retrans_plus_one() {
    let (addr, records) = black_hole().await;
    let options = MountOptions::parse("soft,timeo=4,retrans=2,noresvport").unwrap();
    let rpc = RpcClient::new(TransportConfig::new(addr, &options));
    let start = Instant::now();
    let r = within(rpc.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &root(), &())).await;
    let elapsed = start.elapsed();
    assert_eq!(r.unwrap_err(), NfsError::TimedOut);
    // timeo × (retrans + 1) = 0.4 s × 3.
    assert!(elapsed >= Duration::from_millis(1150), "gave up early: {elapsed:?}");
    assert!(elapsed < Duration::from_millis(2500), "gave up late: {elapsed:?}");
    // Sent at 0, retransmitted at timeo; the next retry (at 3 × timeo) is
    // the major timeout.
    assert_eq!(records.load(std::sync::atomic::Ordering::Relaxed), 2);
    assert_eq!(rpc.connection_stats()[0].core.lock().retransmissions, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_fails_at_once_with_a_clear_message() {
    // A port nothing listens on: bound (so no other process can take it
    // meanwhile, as a released port can be on a busy machine) but never
    // listening, so a connect is refused.
    let reserved = tokio::net::TcpSocket::new_v4().unwrap();
    reserved.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = reserved.local_addr().unwrap();
    let start = Instant::now();
    // MOUNT there too: otherwise the client falls back to the portmapper on
    // port 111, which on a machine running rpcbind may name another server.
    let url = format!("nfs://127.0.0.1:{p}/export?mountport={p}", p = addr.port());
    let e = within(NfsClient::connect(&url)).await.unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(&format!("cannot connect to {addr}: connection refused")), "{msg}");
    assert!(start.elapsed() < Duration::from_secs(5), "hard mount must not retry a first connect for ever");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_mount_keeps_trying_and_completes_when_the_server_is_back() {
    let s = mem_server();
    let addr = s.addr;
    let c = within(NfsClient::connect(&url(&s, "/export", "hard,timeo=3,retrans=1"))).await.unwrap();
    c.null().await.unwrap();
    let mut events = c.rpc().subscribe();
    s.stop();

    let pending = tokio::spawn({
        let c = c.clone();
        async move { c.null().await }
    });
    // The call outlives refused reconnects and a major timeout (0.6 s)...
    wait_event(&mut events, |e| matches!(e, TransportEvent::ConnectFailed { .. })).await;
    wait_event(&mut events, |e| matches!(e, TransportEvent::NotResponding { .. })).await;
    assert!(!pending.is_finished(), "a hard mount does not give up");
    // ...and completes once a server listens on the port again.
    let s2 = TestServer::start_custom(
        ServerConfig::default(),
        vec![spec(1, &["/export"], "/export 127.0.0.0/8(rw,insecure,no_root_squash)", memory())],
        vec![addr],
    );
    within(pending).await.unwrap().unwrap();
    wait_event(&mut events, |e| matches!(e, TransportEvent::ServerOk { .. })).await;
    assert!(s2.stats.nfs3(NFSPROC3_NULL) >= 1);
}

fn local_server(dir: &Path, key: [u8; 16], listen: SocketAddr) -> TestServer {
    let backend = LocalBackend::open(LocalConfig {
        root: dir.to_path_buf(),
        handle_key: key,
        unsafe_async: false,
        journaled: false,
    })
    .expect("local backend");
    TestServer::start_custom(
        ServerConfig::default(),
        vec![spec(7, &["/local"], "/local 127.0.0.0/8(rw,insecure,no_root_squash)", Arc::new(backend))],
        vec![listen],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_made_while_the_server_restarts_completes() {
    let dir = tempfile::tempdir().unwrap();
    let key = [7u8; 16];
    let s = local_server(dir.path(), key, "127.0.0.1:0".parse().unwrap());
    let addr = s.addr;
    let c = within(NfsClient::connect(&url(&s, "/local", "timeo=5,retrans=2"))).await.unwrap();
    let f = handle(c.create(&root(), &c.root(), b"f", Createhow3::Unchecked(mode(0o644))).await.unwrap().obj);
    c.write(&root(), &f, 0, Bytes::from_static(b"before"), StableHow::FileSync).await.unwrap();
    let fileid = c.getattr(&root(), &f).await.unwrap().fileid;
    let mut events = c.rpc().subscribe();
    s.stop();

    let pending = tokio::spawn({
        let (c, f) = (c.clone(), f.clone());
        async move { c.read(&root(), &f, 0, 100).await }
    });
    wait_event(&mut events, |e| matches!(e, TransportEvent::ConnectFailed { .. })).await;
    assert!(!pending.is_finished());
    let s2 = local_server(dir.path(), key, addr);
    let rd = within(pending).await.unwrap().unwrap();
    assert_eq!(&rd.data[..], b"before", "the handle from before the restart still works");
    assert_eq!(c.getattr(&root(), &f).await.unwrap().fileid, fileid);
    assert!(s2.stats.nfs3(NFSPROC3_READ) >= 1);
    let reconnects = c.rpc().connection_stats()[0].connects.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(reconnects, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_sys_identity_reaches_the_server() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let s = local_server(dir.path(), [1; 16], "127.0.0.1:0".parse().unwrap());
    let c = within(NfsClient::connect(&url(&s, "/local", ""))).await.unwrap();
    let user = Cred { uid: 1000, gid: 1001, groups: (2000..2020).collect() };
    let f = c.create(&user, &c.root(), b"mine", Createhow3::Unchecked(mode(0o600))).await.unwrap();
    let attrs = f.obj_attributes.unwrap();
    assert_eq!((attrs.uid, attrs.gid), (1000, 1001));
    let meta = std::fs::metadata(dir.path().join("mine")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (1000, 1001), "owner on disk");
    // Another user is refused by the file's mode.
    let other = Cred { uid: 1002, gid: 1002, groups: vec![] };
    let fh = handle(f.obj);
    assert_eq!(c.read(&other, &fh, 0, 10).await.unwrap_err(), NfsError::Nfs(Nfsstat3::Acces));
    assert_eq!(c.read(&user, &fh, 0, 10).await.unwrap().count, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mount_errors_say_why() {
    let s = TestServer::start(vec![
        spec(1, &["/export"], "/export 127.0.0.0/8(rw,insecure,no_root_squash)", memory()),
        spec(2, &["/only2"], "/only2 127.0.0.2(rw,insecure)", memory()),
        spec(3, &["/sec"], "/sec 127.0.0.0/8(rw,no_root_squash)", memory()),
    ]);
    // Not allowed from 127.0.0.1...
    let e = within(NfsClient::connect(&url(&s, "/only2", ""))).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "mount failed: export /only2 not allowed for this client address 127.0.0.1 (MNT3ERR_ACCES)"
    );
    // ...but allowed from 127.0.0.2.
    let c = within(NfsClient::connect(&url(&s, "/only2", "srcaddr=127.0.0.2"))).await.unwrap();
    assert_eq!(c.rpc().local_addr().unwrap().ip().to_string(), "127.0.0.2");
    c.getattr(&root(), &c.root()).await.unwrap();

    let e = within(NfsClient::connect(&url(&s, "/nope/deeper", ""))).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "mount failed: no such export /nope/deeper (MNT3ERR_NOENT) — exports are: /export, /only2, /sec"
    );

    // A `secure` export: root binds a privileged port by default...
    let c = within(NfsClient::connect(&url(&s, "/sec", ""))).await.unwrap();
    assert!(c.rpc().local_addr().unwrap().port() < 1024, "resvport is on for root");
    c.getattr(&root(), &c.root()).await.unwrap();
    // ...and without one the export refuses us, saying so.
    let e = within(NfsClient::connect(&url(&s, "/sec", "noresvport"))).await.unwrap_err();
    assert!(e.to_string().contains("export /sec not allowed for this client address"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_below_the_export_resolves() {
    let s = mem_server();
    let c = within(NfsClient::connect(&url(&s, "/export", ""))).await.unwrap();
    let d = handle(c.mkdir(&root(), &c.root(), b"dir", mode(0o755)).await.unwrap().obj);
    let f = handle(c.create(&root(), &d, b"file", Createhow3::Unchecked(mode(0o644))).await.unwrap().obj);

    // The longest prefix MOUNT accepts (eagernfs mounts subdirectories).
    let c2 = within(NfsClient::connect(&url(&s, "/export/dir/file", ""))).await.unwrap();
    assert_eq!((c2.export(), c2.path_inside()), ("/export/dir", "/file"));
    let (fh, attrs) = c2.lookup_path(&root(), c2.path_inside()).await.unwrap();
    assert_eq!(fh, f);
    assert_eq!(attrs.ftype, Ftype3::Reg);

    // An explicit export.
    let u: NfsUrl = url(&s, "/export/dir/file", "export=/export").parse().unwrap();
    let c3 = within(NfsClient::connect_url(&u)).await.unwrap();
    assert_eq!((c3.export(), c3.path_inside()), ("/export", "/dir/file"));
    assert_eq!(c3.lookup_path(&root(), c3.path_inside()).await.unwrap().0, f);
    assert_eq!(c3.lookup_path(&root(), "/dir/missing").await.unwrap_err(), NfsError::Nfs(Nfsstat3::Noent));

    // connect_to: an address and an exact export.
    let c4 = within(NfsClient::connect_to(s.addr, "/export", MountOptions::default())).await.unwrap();
    assert_eq!(c4.root(), c.root());
    c4.unmount().await.unwrap();

    // No port in the URL: the portmapper (here eagernfs itself, which
    // answers GETPORT on its own port) names the NFS port.
    let u = format!("nfs://127.0.0.1/export?pmapport={}", s.addr.port());
    let c5 = within(NfsClient::connect(&u)).await.unwrap();
    assert_eq!(c5.server(), s.addr);
    assert_eq!(c5.root(), c.root());
    // An explicit MOUNT port.
    let u = url(&s, "/export", &format!("mountport={}", s.addr.port()));
    assert_eq!(within(NfsClient::connect(&u)).await.unwrap().root(), c.root());

    // A read-only mount refuses changes locally.
    let ro = within(NfsClient::connect(&url(&s, "/export", "ro"))).await.unwrap();
    assert_eq!(ro.remove(&root(), &ro.root(), b"dir").await.unwrap_err(), NfsError::Nfs(Nfsstat3::Rofs));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv6_urls_connect() {
    let s = TestServer::start_custom(
        ServerConfig::default(),
        vec![spec(1, &["/export"], "/export *(rw,insecure,no_root_squash)", memory())],
        vec!["[::1]:0".parse().unwrap()],
    );
    let c = within(NfsClient::connect(&format!("nfs://[::1]:{}/export", s.addr.port()))).await.unwrap();
    assert_eq!(c.server(), s.addr);
    assert!(c.rpc().local_addr().unwrap().is_ipv6());
    assert_eq!(c.getattr(&root(), &c.root()).await.unwrap().ftype, Ftype3::Dir);
}

/// A UDP relay between a client and `server` that drops every `drop_every`-th datagram in
/// each direction (calls and replies both get lost). Returns the address clients use.
fn lossy_udp_relay(server: SocketAddr, drop_every: usize) -> SocketAddr {
    use std::net::UdpSocket;
    let front = UdpSocket::bind("127.0.0.1:0").unwrap();
    let back = UdpSocket::bind("127.0.0.1:0").unwrap();
    back.connect(server).unwrap();
    let addr = front.local_addr().unwrap();
    let client: Arc<std::sync::Mutex<Option<SocketAddr>>> = Arc::default();
    let (f2, b2, c2) = (front.try_clone().unwrap(), back.try_clone().unwrap(), client.clone());
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut n = 0usize;
        while let Ok((len, from)) = front.recv_from(&mut buf) {
            *client.lock().unwrap() = Some(from);
            n += 1;
            if !n.is_multiple_of(drop_every) {
                let _ = back.send(&buf[..len]);
            }
        }
    });
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut n = 0usize;
        while let Ok(len) = b2.recv(&mut buf) {
            n += 1;
            let to = *c2.lock().unwrap();
            if let (Some(to), true) = (to, !n.is_multiple_of(drop_every)) {
                let _ = f2.send_to(&buf[..len], to);
            }
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proto_udp_survives_lost_calls_and_replies() {
    let config = ServerConfig { udp: true, ..ServerConfig::default() };
    let s = TestServer::start_with(
        config,
        vec![spec(1, &["/export"], "/export 127.0.0.0/8(rw,insecure,no_root_squash)", memory())],
    );
    // Every 5th datagram is lost each way; retransmissions after 0.1 s.
    let relay = lossy_udp_relay(s.addr, 5);
    let u = format!("nfs://127.0.0.1:{}/export?proto=udp&timeo=1&retrans=20", relay.port());
    let c = within(NfsClient::connect(&u)).await.unwrap();
    assert_eq!((c.rsize(), c.wsize()), (32 * 1024, 32 * 1024), "UDP transfers fit a datagram");
    // Namespace calls: a retransmitted CREATE or REMOVE whose reply was lost must get its
    // first answer from the duplicate reply cache, not EXIST or NOENT.
    for i in 0..20 {
        let name = format!("f{i}");
        let created =
            within(c.create(&root(), &c.root(), name.as_bytes(), Createhow3::Guarded(mode(0o644)))).await;
        let f = handle(created.unwrap_or_else(|e| panic!("CREATE {name}: {e}")).obj);
        let data = Bytes::from(vec![i as u8; 40_000]);
        let mut off = 0;
        while off < data.len() {
            let end = (off + 32 * 1024).min(data.len());
            within(c.write(&root(), &f, off as u64, data.slice(off..end), StableHow::FileSync))
                .await
                .unwrap();
            off = end;
        }
        let back = within(c.read(&root(), &f, 0, 32 * 1024)).await.unwrap();
        assert_eq!(back.data.len(), 32 * 1024);
        assert!(back.data.iter().all(|b| *b == i as u8));
        within(c.remove(&root(), &c.root(), name.as_bytes()))
            .await
            .unwrap_or_else(|e| panic!("REMOVE {name}: {e}"));
    }
    let core = *c.rpc().connection_stats()[0].core.lock();
    assert!(core.retransmissions > 0, "nothing was lost: the relay did not work");
    assert!(s.stats.udp_calls() > 100, "the calls went over UDP");
    assert!(
        s.stats.drc_counts().hits > 0 || s.stats.drc_counts().in_progress > 0,
        "{:?}",
        s.stats.drc_counts()
    );
}

/// A server that answers every call with an empty success, and says on
/// `seen` each time a whole call has arrived.
fn null_server() -> (SocketAddr, std::sync::mpsc::Receiver<u32>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (seen, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        let mut decoder = RecordDecoder::new(1 << 20);
        let mut buf = bytes::BytesMut::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = match sock.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            while let Ok(Some(record)) = decoder.decode(&mut buf) {
                let xid = u32::from_be_bytes(record[..4].try_into().unwrap());
                // xid, REPLY, MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS.
                let mut reply = vec![0x80, 0, 0, 24];
                for w in [xid, 1, 0, 0, 0, 0] {
                    reply.extend_from_slice(&w.to_be_bytes());
                }
                if sock.write_all(&reply).is_err() {
                    return;
                }
                let _ = seen.send(xid);
            }
        }
    });
    (addr, rx)
}

/// A call leaves from the caller's thread: with the runtime not running
/// at all (nothing can wake the connection task), polling the call once
/// puts it on the wire. The mount relies on this to save a thread wake-up
/// per call (`RpcClient::send_direct`).
#[test]
fn a_call_is_written_by_the_thread_that_makes_it() {
    let (addr, seen) = null_server();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = rt.block_on(async { RpcClient::new(TransportConfig::new(addr, &MountOptions::default())) });
    let cred = root();
    // The first call connects (through the connection task).
    rt.block_on(within(client.call(100_003, 3, 0, &cred, &()))).expect("first call");
    seen.recv_timeout(WAIT).expect("the first call arrived");

    // Now nobody drives the runtime: poll the next call once, by hand.
    let mut call = Box::pin(client.call(100_003, 3, 0, &cred, &()));
    let waker = std::task::Waker::noop();
    let polled = {
        let _rt = rt.enter();
        call.as_mut().poll(&mut std::task::Context::from_waker(waker))
    };
    assert!(polled.is_pending(), "the reply cannot be read while the runtime is idle");
    seen.recv_timeout(Duration::from_secs(10))
        .expect("the call reached the server without the runtime running: sent by its caller");
    // The runtime reads the reply.
    rt.block_on(within(call)).expect("second call");
}

/// `nfs://A,B/…`: two servers on one directory with one handle key, as the heads of a cluster
/// are. The client mounts through A; A stops; the next calls go to B with no error, A's
/// handles work there, and B's write verifier differs (so UNSTABLE data is resent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_of_two_servers_moves_to_the_other_when_one_stops() {
    let dir = tempfile::tempdir().unwrap();
    let key = [9u8; 16];
    let a = local_server(dir.path(), key, "127.0.0.1:0".parse().unwrap());
    let b = local_server(dir.path(), key, "127.0.0.1:0".parse().unwrap());
    let (addr_a, addr_b) = (a.addr, b.addr);
    let u = format!("nfs://{addr_a},{addr_b}/local?timeo=5,retrans=1");
    let c = within(NfsClient::connect(&u)).await.unwrap();
    assert_eq!(c.server(), addr_a, "the first address that answers");
    assert_eq!(c.rpc().servers(), vec![addr_a, addr_b]);
    let f = handle(c.create(&root(), &c.root(), b"f", Createhow3::Unchecked(mode(0o644))).await.unwrap().obj);
    c.write(&root(), &f, 0, Bytes::from_static(b"committed"), StableHow::FileSync).await.unwrap();
    let verf_a = c.write(&root(), &f, 9, Bytes::from_static(b"+"), StableHow::Unstable).await.unwrap().verf;
    let mut events = c.rpc().subscribe();
    a.stop();

    let rd = within(c.read(&root(), &f, 0, 100)).await.expect("a read after A stopped");
    assert_eq!(&rd.data[..], b"committed+");
    wait_event(
        &mut events,
        |e| matches!(e, TransportEvent::Moved { from, to, .. } if *from == addr_a && *to == addr_b),
    )
    .await;
    assert_eq!(c.server(), addr_b);
    let w = c.write(&root(), &f, 10, Bytes::from_static(b"!"), StableHow::Unstable).await.unwrap();
    assert_ne!(w.verf, verf_a, "another server, another write verifier");
    let commit = c.commit(&root(), &f, 0, 0).await.unwrap();
    assert_eq!(commit.verf, w.verf);
    assert!(b.stats.nfs3(NFSPROC3_READ) >= 1 && b.stats.nfs3(NFSPROC3_COMMIT) >= 1);
}

/// The first address is down at mount time: the mount goes through the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_whose_first_address_is_down_mounts_through_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let b = local_server(dir.path(), [3; 16], "127.0.0.1:0".parse().unwrap());
    // A port nobody listens on (bound, then let go).
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let c = within(NfsClient::connect(&format!("nfs://{dead},{}/local", b.addr))).await.unwrap();
    assert_eq!(c.server(), b.addr);
    // The dead one stays a fall-back, after the one in use.
    assert_eq!(c.rpc().servers(), vec![b.addr, dead]);
    c.getattr(&root(), &c.root()).await.unwrap();
    // None answers: the error names every address.
    drop(c);
    b.stop();
    let e =
        within(NfsClient::connect(&format!("nfs://{dead},127.0.0.1:1/local"))).await.unwrap_err().to_string();
    assert!(e.contains("no address of") && e.contains(&dead.to_string()) && e.contains("127.0.0.1:1"), "{e}");
}

/// A second address that does not know the first's file handles (another handle key: not a
/// head of the same cluster) fails the mount, rather than answering ESTALE at fail-over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_whose_servers_do_not_share_handles_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = local_server(dir.path(), [4; 16], "127.0.0.1:0".parse().unwrap());
    let b = local_server(dir.path(), [5; 16], "127.0.0.1:0".parse().unwrap());
    let e = within(NfsClient::connect(&format!("nfs://{},{}/local", a.addr, b.addr))).await.unwrap_err();
    let e = e.to_string();
    assert!(e.contains(&b.addr.to_string()) && e.contains("does not accept the file handles"), "{e}");
}

/// A server that takes the connection but never answers: a hard mount's call reaches its
/// major timeout and moves to the next address, where it completes; a refused address is
/// passed over at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_or_refusing_server_is_passed_over() {
    let s = mem_server();
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((c, _)) = silent.accept().await {
            conns.push(c); // read nothing, answer nothing
        }
    });
    let options: MountOptions = "hard,timeo=3,retrans=1".parse().unwrap();
    let rpc =
        RpcClient::new(TransportConfig::new(silent_addr, &options).with_alternates(&[s.addr], &options));
    let mut events = rpc.subscribe();
    let started = Instant::now();
    within(rpc.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &root(), &())).await.unwrap();
    let took = started.elapsed();
    wait_event(&mut events, |e| matches!(e, TransportEvent::Moved { to, .. } if *to == s.addr)).await;
    // One major window (0.6 s) and a connect, not the reconnect backoff.
    assert!(took >= Duration::from_millis(600) && took < Duration::from_secs(10), "{took:?}");
    assert_eq!(rpc.server(), s.addr);
    held.abort();

    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let rpc = RpcClient::new(TransportConfig::new(dead, &options).with_alternates(&[s.addr], &options));
    within(rpc.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &root(), &()))
        .await
        .expect("passed over the refused address");
    assert_eq!(rpc.server(), s.addr);
}
