//! A test harness for black-box protocol tests of the server.
//!
//! - [`TestServer`]: an in-process server on its own tokio runtime in a
//!   background thread, listening on an ephemeral loopback port, stopped
//!   (and its `run` result checked) on demand or on drop.
//! - [`Client`]: a small synchronous ONC RPC client over a std `TcpStream`:
//!   raw bytes, single calls, or pipelined calls matched by xid. It can bind
//!   its socket to a chosen source address and port before connecting, so
//!   tests can play a client from an address an export refuses, or one on
//!   a privileged port.
//!
//! Replies are decoded with the same sans-IO crates the server uses, but
//! every check a test makes is on the decoded wire values, so a server that
//! encodes the wrong thing fails the test.
// Each test binary uses a different part of the harness, and `pub` here
// means "for the test files", which the crate-level lint cannot see.
#![allow(dead_code, unreachable_pub)]

pub mod seqops;
pub mod v4;

use bytes::{Bytes, BytesMut};
use eagernfs_proto::mount::{self, Mountres3, MOUNTPROC_MNT, MOUNT_PROGRAM, MOUNT_V3};
use eagernfs_proto::nfs3::*;
use eagernfs_rpc::record::{begin_record, finish_record};
use eagernfs_rpc::{
    AcceptStat, AuthSys, CallHeader, Message, OpaqueAuth, RecordDecoder, ReplyBody, ReplyHeader,
};
use eagernfs_server::{exports, ExportSpec, IoTraceReader, Server, ServerConfig, ServerHandle, Stats};
use eagernfs_vfs::memory::{MemoryBackend, MemoryConfig};
use eagernfs_vfs::Backend;
use eagernfs_xdr::{decode_exact, Decode, Encode, Opaque};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long any single wait on the server may take before the test fails
/// (generous: debug builds on a shared 2-core machine).
pub const WAIT: Duration = Duration::from_secs(20);

/// Build one export's access rules from one exports(5) line.
pub fn access(line: &str) -> exports::Export {
    let (mut parsed, _warnings) =
        exports::parse(line).unwrap_or_else(|e| panic!("bad exports line {line:?}: {e}"));
    assert_eq!(parsed.entries.len(), 1, "one export per line");
    parsed.entries.remove(0)
}

/// A fresh in-memory backend.
pub fn memory() -> Arc<dyn Backend> {
    Arc::new(MemoryBackend::new(MemoryConfig::default()))
}

/// An export with id `id`, reachable by `paths`, access rules from `line`.
pub fn spec(id: u32, paths: &[&str], line: &str, backend: Arc<dyn Backend>) -> ExportSpec {
    ExportSpec { id, mount_paths: paths.iter().map(PathBuf::from).collect(), access: access(line), backend }
}

/// A server running on a background thread.
pub struct TestServer {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// Every listening address, in the order given.
    pub addrs: Vec<SocketAddr>,
    /// The server's call counters.
    pub stats: Arc<Stats>,
    /// READ/WRITE in backend order (empty unless `io_trace_max_events` is set).
    pub trace: IoTraceReader,
    /// Reconfigures the running server (and moves the NFSv4 clock on in tests).
    server_handle: ServerHandle,
    shutdown: CancellationToken,
    thread: Option<JoinHandle<std::io::Result<()>>>,
    /// Receives once `run` has returned, so `stop` can wait with a deadline.
    done: std::sync::mpsc::Receiver<()>,
}

impl TestServer {
    /// A server with the default configuration on 127.0.0.1, port 0.
    pub fn start(exports: Vec<ExportSpec>) -> TestServer {
        Self::start_with(ServerConfig::default(), exports)
    }

    /// A server with `config` on 127.0.0.1, port 0.
    pub fn start_with(config: ServerConfig, exports: Vec<ExportSpec>) -> TestServer {
        Self::start_custom(config, exports, vec!["127.0.0.1:0".parse().unwrap()])
    }

    /// A server listening on every address of `listen`.
    /// [`TestServer::addr`] is the first listener's address.
    pub fn start_custom(
        config: ServerConfig,
        exports: Vec<ExportSpec>,
        listen: Vec<SocketAddr>,
    ) -> TestServer {
        log_warnings();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done) = std::sync::mpsc::channel();
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("tokio runtime");
            let result = rt.block_on(async move {
                let server = Server::bind(config, exports, &listen).await.expect("bind");
                tx.send((server.local_addrs(), server.stats(), server.io_trace(), server.handle())).unwrap();
                server.run(token).await
            });
            let _ = done_tx.send(());
            result
        });
        let (addrs, stats, trace, server_handle) = rx.recv_timeout(WAIT).expect("server did not start");
        TestServer {
            addr: addrs[0],
            addrs,
            stats,
            trace,
            server_handle,
            shutdown,
            thread: Some(thread),
            done,
        }
    }

    /// What reconfigures the running server.
    pub fn handle(&self) -> ServerHandle {
        self.server_handle.clone()
    }

    /// The token that stops the server (for tests that cancel mid-flight).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// A client connected from an ephemeral port with AUTH_SYS uid 0.
    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Cancel the server and wait for `run` to return; fails the test if it
    /// does not return in time or returns an error.
    pub fn stop(mut self) {
        self.shutdown.cancel();
        self.done.recv_timeout(WAIT).expect("Server::run did not return after cancellation");
        let result = self.thread.take().unwrap().join().expect("server thread panicked");
        result.expect("Server::run failed");
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(t) = self.thread.take() {
            // Don't hang a failing test forever on a server that won't stop.
            if self.done.recv_timeout(WAIT).is_ok() {
                let _ = t.join();
            }
        }
    }
}

/// An AUTH_SYS credential for `uid`/`gid` with no supplementary groups.
pub fn sys(uid: u32, gid: u32) -> OpaqueAuth {
    OpaqueAuth::sys(&AuthSys {
        stamp: 1,
        machine_name: Opaque::from_static(b"tester"),
        uid,
        gid,
        gids: vec![],
    })
}

/// A decoded reply: the header and whatever followed it.
#[derive(Debug)]
pub struct Reply {
    pub header: ReplyHeader,
    pub body: Bytes,
}

impl Reply {
    /// The accept status; panics (failing the test) on a denied reply.
    pub fn accept_stat(&self) -> AcceptStat {
        match &self.header.body {
            ReplyBody::Accepted { stat, .. } => *stat,
            ReplyBody::Denied(why) => panic!("call denied: {why:?}"),
        }
    }

    /// The results of a successful call, which must decode as `T` using every byte.
    pub fn results<T: Decode>(&self) -> T {
        assert_eq!(self.accept_stat(), AcceptStat::Success, "call not successful");
        decode_exact(self.body.clone()).unwrap_or_else(|e| panic!("results do not decode: {e}"))
    }
}

/// A synchronous RPC client over one TCP connection.
pub struct Client {
    stream: TcpStream,
    decoder: RecordDecoder,
    buf: BytesMut,
    next_xid: u32,
    /// The credential sent with every call made through [`Client::call`].
    pub cred: OpaqueAuth,
}

impl Client {
    /// Connect from an ephemeral port, AUTH_SYS uid 0.
    pub fn connect(addr: SocketAddr) -> Client {
        Self::from_stream(TcpStream::connect(addr).expect("connect"))
    }

    /// Connect from `source` (address and port; port 0 = any). Binding a
    /// loopback address other than 127.0.0.1 and a port below 1024 both work
    /// for root on Linux.
    pub fn connect_from(addr: SocketAddr, source: SocketAddr) -> std::io::Result<Client> {
        // tokio's TcpSocket binds before connecting, which std's TcpStream
        // cannot; a throwaway current-thread runtime drives the connect.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let stream = rt.block_on(async {
            let sock = tokio::net::TcpSocket::new_v4()?;
            sock.set_reuseaddr(true)?;
            sock.bind(source)?;
            sock.connect(addr).await
        })?;
        let std = stream.into_std()?;
        std.set_nonblocking(false)?;
        Ok(Self::from_stream(std))
    }

    /// The connection itself (for tests that watch it close).
    #[allow(dead_code)]
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }

    /// Connect from a random free privileged port (512..1024) on 127.0.0.1.
    pub fn connect_privileged(addr: SocketAddr) -> Client {
        let start: u16 = 512 + rand::random::<u16>() % 512;
        for i in 0..512u16 {
            let port = 512 + (start - 512 + i) % 512;
            let source = SocketAddr::from(([127, 0, 0, 1], port));
            if let Ok(c) = Self::connect_from(addr, source) {
                return c;
            }
        }
        panic!("no free privileged source port");
    }

    fn from_stream(stream: TcpStream) -> Client {
        stream.set_read_timeout(Some(WAIT)).unwrap();
        stream.set_write_timeout(Some(WAIT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            decoder: RecordDecoder::new(4 << 20),
            buf: BytesMut::new(),
            next_xid: rand::random::<u32>() & 0x0fff_ffff,
            cred: sys(0, 0),
        }
    }

    /// The client's own address (to compare with DUMP).
    pub fn local_addr(&self) -> SocketAddr {
        self.stream.local_addr().unwrap()
    }

    /// A fresh xid.
    pub fn xid(&mut self) -> u32 {
        self.next_xid = self.next_xid.wrapping_add(1);
        self.next_xid
    }

    /// Write bytes as they are (framing is the caller's business).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// Write bytes, reporting failure instead of failing the test (the
    /// server may close the connection while a test is still sending).
    pub fn try_send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// One call message (header + already-encoded args), unframed.
    pub fn call_message(header: &CallHeader, args: &[u8]) -> Vec<u8> {
        let mut v = eagernfs_xdr::to_vec(header);
        v.extend_from_slice(args);
        v
    }

    /// Frame `payload` as one single-fragment record.
    pub fn record(payload: &[u8]) -> BytesMut {
        let mut out = BytesMut::with_capacity(payload.len() + 4);
        let at = begin_record(&mut out);
        out.extend_from_slice(payload);
        finish_record(&mut out, at);
        out
    }

    /// A call header with this client's credential.
    pub fn header(&mut self, prog: u32, vers: u32, proc_: u32) -> CallHeader {
        CallHeader {
            xid: self.xid(),
            rpcvers: 2,
            prog,
            vers,
            proc_,
            cred: self.cred.clone(),
            verf: OpaqueAuth::none(),
        }
    }

    /// Send a call with this client's credential; returns its xid.
    pub fn send_call<A: Encode + ?Sized>(&mut self, prog: u32, vers: u32, proc_: u32, args: &A) -> u32 {
        let h = self.header(prog, vers, proc_);
        self.send_header(&h, &eagernfs_xdr::to_vec(args));
        h.xid
    }

    /// Send `header` followed by raw argument bytes as one record.
    pub fn send_header(&mut self, header: &CallHeader, args: &[u8]) {
        let rec = Self::record(&Self::call_message(header, args));
        self.send_raw(&rec);
    }

    /// The next complete record, or `None` if the server closed the connection.
    pub fn recv_record(&mut self) -> Option<Bytes> {
        loop {
            if let Some(r) = self.decoder.decode(&mut self.buf).expect("reply framing") {
                return Some(r);
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    assert!(self.buf.is_empty(), "connection closed inside a record");
                    return None;
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("receive failed (timed out?): {e}"),
            }
        }
    }

    /// The next message, a reply or a call (an NFSv4.1 callback), with the
    /// bytes after its header; `None` if the server closed the connection.
    pub fn recv_any(&mut self) -> Option<(Message, Bytes)> {
        let mut rec = self.recv_record()?;
        let m = Message::decode(&mut rec).expect("message header decodes");
        Some((m, rec))
    }

    /// The next reply; panics if the connection closed or it is not a reply.
    pub fn recv(&mut self) -> Reply {
        let mut rec = self.recv_record().expect("server closed the connection");
        match Message::decode(&mut rec).expect("reply header decodes") {
            Message::Reply(header) => Reply { header, body: rec },
            Message::Call(c) => panic!("server sent a call: {c:?}"),
        }
    }

    /// The next reply if one arrives within `timeout`; `None` on timeout.
    /// Panics if the connection closes.
    pub fn recv_within(&mut self, timeout: Duration) -> Option<Reply> {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
        let result = loop {
            if let Some(mut rec) = self.decoder.decode(&mut self.buf).expect("reply framing") {
                match Message::decode(&mut rec).expect("reply header decodes") {
                    Message::Reply(header) => break Some(Reply { header, body: rec }),
                    Message::Call(c) => panic!("server sent a call: {c:?}"),
                }
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("server closed the connection"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    break None
                }
                Err(e) => panic!("receive failed: {e}"),
            }
        };
        self.stream.set_read_timeout(Some(WAIT)).unwrap();
        result
    }

    /// Whether the server closes the connection (EOF or reset) before sending anything more.
    pub fn closed(&mut self) -> bool {
        self.recv_record().is_none()
    }

    /// Send a call and wait for its reply (which must carry the same xid).
    pub fn call<A: Encode + ?Sized>(&mut self, prog: u32, vers: u32, proc_: u32, args: &A) -> Reply {
        let xid = self.send_call(prog, vers, proc_, args);
        let r = self.recv();
        assert_eq!(r.header.xid, xid, "reply xid");
        r
    }

    /// Send a call whose arguments are already encoded and wait for its reply.
    pub fn call_raw(&mut self, prog: u32, vers: u32, proc_: u32, args: &[u8]) -> Reply {
        let h = self.header(prog, vers, proc_);
        self.send_header(&h, args);
        let r = self.recv();
        assert_eq!(r.header.xid, h.xid, "reply xid");
        r
    }

    /// Send every call in `calls` in one write, then collect one reply per
    /// call, keyed by xid (the server may answer in any order). Returns the
    /// xids in sending order and the replies.
    pub fn pipeline(&mut self, calls: &[(u32, u32, u32, Vec<u8>)]) -> (Vec<u32>, HashMap<u32, Reply>) {
        let mut out = BytesMut::new();
        let mut xids = Vec::with_capacity(calls.len());
        for (prog, vers, proc_, args) in calls {
            let h = self.header(*prog, *vers, *proc_);
            xids.push(h.xid);
            out.extend_from_slice(&Self::record(&Self::call_message(&h, args)));
        }
        self.send_raw(&out);
        let mut replies = HashMap::with_capacity(calls.len());
        for _ in 0..calls.len() {
            let r = self.recv();
            assert!(xids.contains(&r.header.xid), "reply to an xid never sent: {}", r.header.xid);
            let prev = replies.insert(r.header.xid, r);
            assert!(prev.is_none(), "two replies to one xid");
        }
        (xids, replies)
    }

    // ---- NFSv3 and MOUNT helpers: each sends one call and decodes its results.

    /// Call NFSv3 procedure `proc_` and decode its results as `R`.
    pub fn nfs<A: Encode, R: Decode>(&mut self, proc_: u32, args: &A) -> R {
        self.call(NFS_PROGRAM, NFS_V3, proc_, args).results()
    }

    /// MNT (v3) `path`.
    pub fn mnt(&mut self, path: &str) -> Mountres3 {
        let p: mount::Dirpath = Opaque::new(Bytes::copy_from_slice(path.as_bytes())).unwrap();
        self.call(MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC_MNT, &p).results()
    }

    /// The root handle of export `path` (MNT must succeed).
    pub fn root(&mut self, path: &str) -> NfsFh3 {
        match self.mnt(path) {
            Mountres3::Ok(ok) => NfsFh3 { data: Opaque(ok.fhandle.0) },
            Mountres3::Fail(s) => panic!("MNT {path} failed: {s:?}"),
        }
    }

    pub fn getattr(&mut self, fh: &NfsFh3) -> Getattr3Res {
        self.nfs(NFSPROC3_GETATTR, &Getattr3Args { object: fh.clone() })
    }

    /// Attributes of `fh` (GETATTR must succeed).
    pub fn attr(&mut self, fh: &NfsFh3) -> Fattr3 {
        match self.getattr(fh) {
            Getattr3Res::Ok(ok) => ok.obj_attributes,
            Getattr3Res::Fail(s, _) => panic!("GETATTR failed: {s:?}"),
        }
    }

    pub fn lookup(&mut self, dir: &NfsFh3, name: &str) -> Lookup3Res {
        self.nfs(NFSPROC3_LOOKUP, &Lookup3Args { what: diropargs(dir, name) })
    }

    /// CREATE with an arbitrary `how`.
    pub fn create_how(&mut self, dir: &NfsFh3, name: &str, how: Createhow3) -> Create3Res {
        self.nfs(NFSPROC3_CREATE, &Create3Args { where_: diropargs(dir, name), how })
    }

    /// CREATE UNCHECKED mode 0644 (must succeed); returns the new handle.
    pub fn create(&mut self, dir: &NfsFh3, name: &str) -> NfsFh3 {
        let how = Createhow3::Unchecked(Sattr3 { mode: Some(0o644), ..Default::default() });
        match self.create_how(dir, name, how) {
            Create3Res::Ok(ok) => ok.obj.expect("CREATE returned a handle"),
            Create3Res::Fail(s, _) => panic!("CREATE {name} failed: {s:?}"),
        }
    }

    /// MKDIR mode 0755 (must succeed); returns the new handle.
    pub fn mkdir(&mut self, dir: &NfsFh3, name: &str) -> NfsFh3 {
        let args = Mkdir3Args {
            where_: diropargs(dir, name),
            attributes: Sattr3 { mode: Some(0o755), ..Default::default() },
        };
        match self.nfs(NFSPROC3_MKDIR, &args) {
            Mkdir3Res::Ok(ok) => ok.obj.expect("MKDIR returned a handle"),
            Mkdir3Res::Fail(s, _) => panic!("MKDIR {name} failed: {s:?}"),
        }
    }

    pub fn write(&mut self, fh: &NfsFh3, offset: u64, data: &[u8], stable: StableHow) -> Write3Res {
        self.nfs(NFSPROC3_WRITE, &write_args(fh, offset, data, stable))
    }

    pub fn read(&mut self, fh: &NfsFh3, offset: u64, count: u32) -> Read3Res {
        self.nfs(NFSPROC3_READ, &Read3Args { file: fh.clone(), offset, count })
    }

    pub fn setattr(&mut self, fh: &NfsFh3, set: Sattr3, guard: Option<Nfstime3>) -> Setattr3Res {
        self.nfs(NFSPROC3_SETATTR, &Setattr3Args { object: fh.clone(), new_attributes: set, guard })
    }

    pub fn access(&mut self, fh: &NfsFh3, want: u32) -> Access3Res {
        self.nfs(NFSPROC3_ACCESS, &Access3Args { object: fh.clone(), access: want })
    }

    pub fn remove(&mut self, dir: &NfsFh3, name: &str) -> Remove3Res {
        self.nfs(NFSPROC3_REMOVE, &Remove3Args { object: diropargs(dir, name) })
    }
}

/// `dir` + `name` as diropargs3.
pub fn diropargs(dir: &NfsFh3, name: &str) -> Diropargs3 {
    Diropargs3 { dir: dir.clone(), name: Opaque::new(Bytes::copy_from_slice(name.as_bytes())).unwrap() }
}

/// WRITE arguments with `count` equal to the data length.
pub fn write_args(fh: &NfsFh3, offset: u64, data: &[u8], stable: StableHow) -> Write3Args {
    Write3Args {
        file: fh.clone(),
        offset,
        count: data.len() as u32,
        stable,
        data: Bytes::copy_from_slice(data),
    }
}

/// Encode any value (call arguments) to bytes.
pub fn enc<T: Encode + ?Sized>(v: &T) -> Vec<u8> {
    eagernfs_xdr::to_vec(v)
}

/// A handle made of `bytes`.
pub fn fh(bytes: &[u8]) -> NfsFh3 {
    NfsFh3 { data: Opaque(Bytes::copy_from_slice(bytes)) }
}

/// What a test's backend does besides passing its calls on (see [`Wrapped`]): by default,
/// nothing.
pub trait Hooks: Send + Sync + 'static {
    /// Runs before a COMMIT goes on to the wrapped backend (it may block).
    fn before_commit(&self) {}

    /// The answer to [`Backend::file_locks`]: locks the "file system" enforces itself.
    fn file_locks(&self) -> Option<&dyn eagernfs_vfs::FileLocks> {
        None
    }
}

/// A backend that passes every call on to `inner`, except where `hooks` step in. It
/// dereferences to the hooks, so a test reads their state as the backend's.
pub struct Wrapped<H> {
    pub inner: Arc<dyn Backend>,
    pub hooks: H,
}

impl<H> std::ops::Deref for Wrapped<H> {
    type Target = H;
    fn deref(&self) -> &H {
        &self.hooks
    }
}

/// A backend whose COMMITs wait at a gate until the test opens it, so a test can hold calls
/// blocked in the backend (as a COMMIT waiting for a slow disk is). Everything else goes
/// straight to the wrapped backend.
pub type GatedCommits = Wrapped<CommitGate>;

pub struct CommitGate {
    gate: std::sync::Mutex<GateState>,
    changed: std::sync::Condvar,
}

#[derive(Default)]
struct GateState {
    open: bool,
    waiting: usize,
}

impl GatedCommits {
    pub fn new(inner: Arc<dyn Backend>) -> Arc<GatedCommits> {
        Arc::new(Wrapped {
            inner,
            hooks: CommitGate {
                gate: std::sync::Mutex::new(GateState::default()),
                changed: std::sync::Condvar::new(),
            },
        })
    }
}

impl CommitGate {
    /// Wait until `n` COMMITs are held at the gate; false after `timeout`.
    pub fn wait_for_waiting(&self, n: usize, timeout: Duration) -> bool {
        let g = self.gate.lock().unwrap();
        let (g, _) = self.changed.wait_timeout_while(g, timeout, |g| g.waiting < n).unwrap();
        g.waiting >= n
    }

    /// Let every held and future COMMIT through.
    pub fn open(&self) {
        self.gate.lock().unwrap().open = true;
        self.changed.notify_all();
    }
}

impl Hooks for CommitGate {
    fn before_commit(&self) {
        let mut g = self.gate.lock().unwrap();
        g.waiting += 1;
        self.changed.notify_all();
        let mut g = self.changed.wait_while(g, |g| !g.open).unwrap();
        g.waiting -= 1;
    }
}

impl<H: Hooks> Backend for Wrapped<H> {
    fn root(&self) -> eagernfs_vfs::FileHandle {
        self.inner.root()
    }
    fn getattr(&self, fh: &eagernfs_vfs::FileHandle) -> eagernfs_vfs::FsResult<eagernfs_vfs::Attr> {
        self.inner.getattr(fh)
    }
    fn setattr(
        &self,
        cred: &eagernfs_vfs::Credentials,
        fh: &eagernfs_vfs::FileHandle,
        set: &eagernfs_vfs::SetAttr,
        guard: Option<eagernfs_vfs::Timestamp>,
    ) -> eagernfs_vfs::FsResult<eagernfs_vfs::Wcc> {
        self.inner.setattr(cred, fh, set, guard)
    }
    fn lookup(
        &self,
        cred: &eagernfs_vfs::Credentials,
        dir: &eagernfs_vfs::FileHandle,
        name: &[u8],
    ) -> eagernfs_vfs::FsResult<eagernfs_vfs::Lookup> {
        self.inner.lookup(cred, dir, name)
    }
    fn access(
        &self,
        cred: &eagernfs_vfs::Credentials,
        fh: &eagernfs_vfs::FileHandle,
        want: u32,
    ) -> eagernfs_vfs::FsResult<(u32, eagernfs_vfs::Attr)> {
        self.inner.access(cred, fh, want)
    }
    fn readlink(
        &self,
        cred: &eagernfs_vfs::Credentials,
        fh: &eagernfs_vfs::FileHandle,
    ) -> eagernfs_vfs::FsResult<(Bytes, eagernfs_vfs::Attr)> {
        self.inner.readlink(cred, fh)
    }
    fn read(
        &self,
        cred: &eagernfs_vfs::Credentials,
        fh: &eagernfs_vfs::FileHandle,
        offset: u64,
        count: u32,
    ) -> eagernfs_vfs::FsResult<eagernfs_vfs::ReadResult> {
        self.inner.read(cred, fh, offset, count)
    }
    fn write(
        &self,
        cred: &eagernfs_vfs::Credentials,
        fh: &eagernfs_vfs::FileHandle,
        offset: u64,
        data: &[u8],
        stable: eagernfs_vfs::StableHow,
    ) -> eagernfs_vfs::FsResult<eagernfs_vfs::WriteResult> {
        self.inner.write(cred, fh, offset, data, stable)
    }
    fn create(
        &self,
        cred: &eagernfs_vfs::Credentials,
        dir: &eagernfs_vfs::FileHandle,
        name: &[u8],
        how: &eagernfs_vfs::CreateMode,
    ) -> eagernfs_vfs::FsResult<eagernfs_vfs::Created> {
        self.inner.create(cred, dir, name, how)
    }
    fn mkdir(
        &self,
        cred: &eagernfs_vfs::Credentials,
        dir: &eagernfs_vfs::FileHandle,
        name: &[u8],
        set: &eagernfs_vfs::SetAttr,
    ) -> eagernfs_vfs::FsResult<eagernfs_vfs::Created> {
        self.inner.mkdir(cred, dir, name, set)
    }
    fn symlink(
        &self,
        cred: &eagernfs_vfs::Credentials,
        dir: &eagernfs_vfs::FileHandle,
        name: &[u8],
        target: &[u8],
        set: &eagernfs_vfs::SetAttr,
    ) -> eagernfs_vfs::FsResult<eagernfs_vfs::Created> {
        self.inner.symlink(cred, dir, name, target, set)
    }
    fn mknod(
        &self,
        cred: &eagernfs_vfs::Credentials,
        dir: &eagernfs_vfs::FileHandle,
        name: &[u8],
        kind: eagernfs_vfs::NodeKind,
        set: &eagernfs_vfs::SetAttr,
    ) -> eagernfs_vfs::FsResult<eagernfs_vfs::Created> {
        self.inner.mknod(cred, dir, name, kind, set)
    }
    fn remove(
        &self,
        cred: &eagernfs_vfs::Credentials,
        dir: &eagernfs_vfs::FileHandle,
        name: &[u8],
    ) -> eagernfs_vfs::FsResult<eagernfs_vfs::Wcc> {
        self.inner.remove(cred, dir, name)
    }
    fn rmdir(
        &self,
        cred: &eagernfs_vfs::Credentials,
        dir: &eagernfs_vfs::FileHandle,
        name: &[u8],
    ) -> eagernfs_vfs::FsResult<eagernfs_vfs::Wcc> {
        self.inner.rmdir(cred, dir, name)
    }
    fn rename(
        &self,
        cred: &eagernfs_vfs::Credentials,
        from_dir: &eagernfs_vfs::FileHandle,
        from_name: &[u8],
        to_dir: &eagernfs_vfs::FileHandle,
        to_name: &[u8],
    ) -> eagernfs_vfs::FsResult<(eagernfs_vfs::Wcc, eagernfs_vfs::Wcc)> {
        self.inner.rename(cred, from_dir, from_name, to_dir, to_name)
    }
    fn link(
        &self,
        cred: &eagernfs_vfs::Credentials,
        fh: &eagernfs_vfs::FileHandle,
        dir: &eagernfs_vfs::FileHandle,
        name: &[u8],
    ) -> eagernfs_vfs::FsResult<(Option<eagernfs_vfs::Attr>, eagernfs_vfs::Wcc)> {
        self.inner.link(cred, fh, dir, name)
    }
    fn readdir(
        &self,
        cred: &eagernfs_vfs::Credentials,
        dir: &eagernfs_vfs::FileHandle,
        cookie: u64,
        cookieverf: eagernfs_vfs::Verifier,
        plus: bool,
        sink: &mut dyn FnMut(&eagernfs_vfs::DirEntry) -> bool,
    ) -> eagernfs_vfs::FsResult<eagernfs_vfs::DirInfo> {
        self.inner.readdir(cred, dir, cookie, cookieverf, plus, sink)
    }
    fn fsstat(&self, fh: &eagernfs_vfs::FileHandle) -> eagernfs_vfs::FsResult<eagernfs_vfs::FsStat> {
        self.inner.fsstat(fh)
    }
    fn properties(&self) -> eagernfs_vfs::FsProperties {
        self.inner.properties()
    }
    fn commit(
        &self,
        cred: &eagernfs_vfs::Credentials,
        fh: &eagernfs_vfs::FileHandle,
        offset: u64,
        count: u32,
    ) -> eagernfs_vfs::FsResult<(eagernfs_vfs::Wcc, eagernfs_vfs::Verifier)> {
        self.hooks.before_commit();
        self.inner.commit(cred, fh, offset, count)
    }
    fn write_verifier(&self) -> eagernfs_vfs::Verifier {
        self.inner.write_verifier()
    }
    fn sync_all(&self) -> eagernfs_vfs::FsResult<()> {
        self.inner.sync_all()
    }
    fn file_locks(&self) -> Option<&dyn eagernfs_vfs::FileLocks> {
        self.hooks.file_locks()
    }
}

/// Make directory `name` under `root` holding a file, list it once (so any
/// cache of the server or backend has seen it), empty and remove it, then
/// check that every operation on the removed directory's handle is STALE:
/// above all READDIR and READDIRPLUS, whose empty "OK" listing would let a
/// client believe the directory is still there and empty.
pub fn removed_dir_handle_is_stale(c: &mut Client, root: &NfsFh3, name: &str) {
    let d = c.mkdir(root, name);
    c.create(&d, "inside");
    let readdir = |c: &mut Client| -> Readdir3Res {
        c.nfs(NFSPROC3_READDIR, &Readdir3Args { dir: d.clone(), cookie: 0, cookieverf: [0; 8], count: 8192 })
    };
    let readdirplus = |c: &mut Client| -> Readdirplus3Res {
        let args = Readdirplus3Args {
            dir: d.clone(),
            cookie: 0,
            cookieverf: [0; 8],
            dircount: 8192,
            maxcount: 32768,
        };
        c.nfs(NFSPROC3_READDIRPLUS, &args)
    };
    assert!(matches!(readdir(c), Readdir3Res::Ok(_)), "READDIR of the live directory");
    assert!(matches!(readdirplus(c), Readdirplus3Res::Ok(_)), "READDIRPLUS of the live directory");
    assert!(matches!(c.remove(&d, "inside"), Remove3Res::Ok(_)));
    let rmdir: Rmdir3Res = c.nfs(NFSPROC3_RMDIR, &Rmdir3Args { object: diropargs(root, name) });
    assert_eq!(rmdir.status(), Nfsstat3::Ok, "RMDIR {name}");

    assert_eq!(readdir(c).status(), Nfsstat3::Stale, "READDIR of a removed directory");
    assert_eq!(readdirplus(c).status(), Nfsstat3::Stale, "READDIRPLUS of a removed directory");
    assert_eq!(c.getattr(&d).status(), Nfsstat3::Stale, "GETATTR of a removed directory");
    assert_eq!(c.lookup(&d, "inside").status(), Nfsstat3::Stale, "LOOKUP in a removed directory");
    assert_eq!(c.access(&d, ACCESS3_READ).status(), Nfsstat3::Stale, "ACCESS of a removed directory");
    let create = Createhow3::Unchecked(Sattr3::default());
    assert_eq!(c.create_how(&d, "new", create).status(), Nfsstat3::Stale, "CREATE in a removed directory");
    let mkdir: Mkdir3Res =
        c.nfs(NFSPROC3_MKDIR, &Mkdir3Args { where_: diropargs(&d, "sub"), attributes: Sattr3::default() });
    assert_eq!(mkdir.status(), Nfsstat3::Stale, "MKDIR in a removed directory");
    assert_eq!(c.remove(&d, "inside").status(), Nfsstat3::Stale, "REMOVE in a removed directory");
    let rmdir: Rmdir3Res = c.nfs(NFSPROC3_RMDIR, &Rmdir3Args { object: diropargs(&d, "sub") });
    assert_eq!(rmdir.status(), Nfsstat3::Stale, "RMDIR in a removed directory");
    assert_eq!(
        c.setattr(&d, Sattr3 { mode: Some(0o700), ..Default::default() }, None).status(),
        Nfsstat3::Stale
    );
}

/// Warnings (and worse) of the servers under test go to the test's captured
/// output, shown when it fails: an answer such as NFS3ERR_IO then comes with
/// the errno behind it. RUST_LOG chooses more.
pub fn log_warnings() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        // Another test binary's common module may have set one already.
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
    });
}
