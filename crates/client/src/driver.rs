//! The tokio driver: TCP connections (or UDP sockets) around [`RpcCore`]
//! state machines.
//!
//! [`RpcClient`] owns `nconnect` connections to one server. Each is a task
//! that owns one [`RpcCore`] and a socket: it reads records with
//! [`RecordDecoder`] and feeds them to the core, sleeps until the core's
//! next timer, connects when the core asks (binding a source address and,
//! as Linux does for root, a privileged source port), and hands records to
//! a writer task that batches them into few `write` calls. Calls are spread
//! over the connections round-robin. Everything about timeouts, retries and
//! matching lives in the core; this file only moves bytes and wakes up.
//!
//! # Several servers
//! A transport may know other addresses of the same service
//! ([`TransportConfig::with_alternates`]: the heads of a cluster that share
//! file handles, from `nfs://h1,h2,h3/…`). The connections of one client
//! share which address is current. A connection that breaks reconnects to
//! the current address; when that connect fails (refused, unreachable, no
//! answer within the connect timeout) or a call reaches its major timeout
//! on a live connection, the current address moves to the next one, and the
//! connection is made there at once, without backoff, until every address
//! has failed once in a row (then the backoff applies as for one server).
//! Outstanding calls are sent again on the new connection, as after any
//! reconnect; the caller sees no error. [`TransportEvent::Moved`] says so.
//!
//! Over UDP (`proto=udp`) a "connection" is a connected UDP socket: each
//! record goes out as one datagram without its record mark, each datagram
//! in is one reply, and losses are the core's retransmission timers'
//! business (an ICMP "port unreachable" is not a disconnect).
//!
//! # Layout
//! - [`TransportConfig`]: where and how to connect.
//! - [`RpcClient`]: `call(prog, vers, proc, cred, args)`, cloneable.
//! - [`TransportEvent`]: connection news (for logs and tests).
//! - `connection_task` / `writer_task` / `connect`: the I/O.

use crate::core::{Call, CoreConfig, CoreStats, Event, Record, RpcCore, RttStats, Token};
use crate::ops::{Cred, NfsError, NfsResult};
use crate::options::MountOptions;
use bytes::{Bytes, BytesMut};
use eagernfs_rpc::auth::{MAX_AUTH_SYS_GROUPS, MAX_MACHINE_NAME};
use eagernfs_rpc::{AuthSys, OpaqueAuth, RecordDecoder};
use eagernfs_xdr::{Encode, Opaque};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::{self, IoSlice};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream, UdpSocket};
use tokio::sync::{broadcast, mpsc, oneshot, Notify};

/// Largest reply record accepted: a full 1 MiB READ or READDIR plus
/// headers and attributes, with room to spare.
pub const REPLY_RECORD_BYTES_MAX: usize = eagernfs_proto::nfs3::MAX_IO_SIZE + 256 * 1024;

/// Where and how to connect.
#[derive(Clone, Debug)]
pub struct TransportConfig {
    /// The server's address (NFS, MOUNT or portmap port).
    pub server: SocketAddr,
    /// Timeouts, retries, hard/soft, slot table.
    pub core: CoreConfig,
    /// Connections to open (`nconnect`), at least 1.
    pub nconnect: usize,
    /// Local address to bind before connecting.
    pub source_addr: Option<IpAddr>,
    /// Bind a source port below 1024 (servers' `secure` default).
    pub resvport: bool,
    /// Largest reply record accepted.
    pub max_record_bytes: usize,
    /// How long one connection attempt may take.
    pub connect_timeout: Duration,
    /// UDP instead of TCP.
    pub udp: bool,
    /// RPC-with-TLS on every connection (`xprtsec=tls|mtls`).
    pub(crate) tls: Option<crate::tls::TlsSetup>,
    /// Other addresses of the same service, moved to in order when
    /// `server` fails (see the module docs).
    pub(crate) alternates: Vec<Peer>,
    /// Who answers calls the server makes on these connections (an
    /// NFSv4.1 back channel); `None`: such calls are dropped.
    pub(crate) call_handler: Option<Arc<dyn CallHandler>>,
}

/// Answers the calls a server makes on a client's own connection (NFSv4.1
/// callbacks: RFC 8881 §2.10.3.1). Called on the connection's task, so it
/// must not block: anything slow (returning a delegation) is spawned.
pub trait CallHandler: Send + Sync + std::fmt::Debug {
    /// `call` is the whole RPC call message (xid first) that arrived on
    /// connection `connection`; the answer is the whole reply message
    /// (xid first, no record mark), or `None` to send nothing.
    fn call(&self, connection: usize, call: Bytes) -> Option<Bytes>;
}

/// One address a transport may connect to, with its TLS setup.
#[derive(Clone, Debug)]
pub(crate) struct Peer {
    pub(crate) addr: SocketAddr,
    pub(crate) tls: Option<crate::tls::TlsSetup>,
}

impl TransportConfig {
    /// The transport `options` describe, to `server`.
    pub fn new(server: SocketAddr, options: &MountOptions) -> Self {
        let mut core = CoreConfig::from_options(options);
        core.first_xid = rand::random();
        TransportConfig {
            server,
            core,
            nconnect: options.nconnect.max(1) as usize,
            source_addr: options.srcaddr,
            resvport: options.resvport_effective(),
            max_record_bytes: REPLY_RECORD_BYTES_MAX,
            // A blackholed server must not hang a call longer than its own
            // timeout would, nor give up before a slow network answers.
            connect_timeout: options.timeo.clamp(Duration::from_secs(2), Duration::from_secs(30)),
            udp: options.udp,
            tls: crate::tls::setup(options, server),
            alternates: Vec::new(),
            call_handler: None,
        }
    }

    /// Answer the server's calls on these connections with `handler` (an
    /// NFSv4.1 client's back channel).
    pub fn with_call_handler(mut self, handler: Arc<dyn CallHandler>) -> Self {
        self.core.accept_calls = true;
        self.call_handler = Some(handler);
        self
    }

    /// Also connect to `addrs`, in order, when the server fails: other
    /// heads serving the same file handles. Duplicates are dropped.
    pub fn with_alternates(mut self, addrs: &[SocketAddr], options: &MountOptions) -> Self {
        for &addr in addrs {
            if addr != self.server && !self.alternates.iter().any(|p| p.addr == addr) {
                self.alternates.push(Peer { addr, tls: crate::tls::setup(options, addr) });
            }
        }
        self
    }

    /// Every address, `server` first.
    fn peers(&self) -> Vec<Peer> {
        let first = Peer { addr: self.server, tls: self.tls.clone() };
        std::iter::once(first).chain(self.alternates.iter().cloned()).collect()
    }
}

/// Connection news, broadcast to [`RpcClient::subscribe`]rs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportEvent {
    /// Connection `connection` is up, from `local`.
    Connected { connection: usize, local: SocketAddr },
    /// A connection attempt failed.
    ConnectFailed { connection: usize, error: String },
    /// An established connection broke.
    Disconnected { connection: usize },
    /// A hard mount's call hit a major timeout ("server not responding").
    NotResponding { connection: usize },
    /// The server answered again ("server OK").
    ServerOk { connection: usize },
    /// Connection `connection` is up at another of the transport's
    /// addresses than its last connection was: `from` failed.
    Moved { connection: usize, from: SocketAddr, to: SocketAddr },
}

/// Per-connection counters.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    /// Calls handed to this connection.
    pub calls: AtomicU64,
    /// Successful connects.
    pub connects: AtomicU64,
    /// Failed connection attempts.
    pub connect_failures: AtomicU64,
    /// The core's counters, as of its last change.
    pub core: Mutex<CoreStats>,
    /// The local address of the current (or last) connection.
    pub local_addr: Mutex<Option<SocketAddr>>,
    /// Round trips by (program, procedure), as of the core's last reply.
    pub rtt: Mutex<std::collections::BTreeMap<(u32, u32), RttStats>>,
}

/// Calls of one kind as callers saw them: from submission to result,
/// waiting for a slot and retransmissions included (mountstats's
/// "execute" time).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OpTimes {
    pub calls: u64,
    pub errors: u64,
    pub exec_sum_ns: u64,
    pub exec_max_ns: u64,
}

/// One call handed to a connection task.
struct Request {
    call: Call,
    reply: oneshot::Sender<NfsResult<Bytes>>,
}

/// Largest record a caller writes itself (see [`RpcClient::send_direct`]);
/// larger ones (WRITE data) go to the writer task, which sends them in
/// pieces and lets other threads run in between.
const DIRECT_RECORD_BYTES_MAX: usize = 64 * 1024;

/// What a connection's task and its callers share.
struct Shared {
    core: RpcCore,
    /// Who waits for each submitted call.
    waiters: HashMap<Token, oneshot::Sender<NfsResult<Bytes>>>,
    /// The socket, while callers may write to it themselves: a plain TCP
    /// connection that is up. Cleared before the connection is dropped, so
    /// the descriptor is open whenever it is here.
    direct_fd: Option<RawFd>,
    /// The writer task of the current connection.
    writer_tx: Option<mpsc::UnboundedSender<Record>>,
    /// Records were handed to the writer task and not all written yet:
    /// everything goes through it until it has caught up (records must
    /// not interleave on the stream).
    writer_busy: bool,
    /// When the connection task wakes up by itself next (`None`: only
    /// when something wakes it).
    task_wakes_at: Option<Instant>,
}

impl Shared {
    fn new(core: RpcCore) -> Self {
        Shared {
            core,
            waiters: HashMap::new(),
            direct_fd: None,
            writer_tx: None,
            writer_busy: false,
            task_wakes_at: None,
        }
    }

    /// Send every record the core has ready: written here when the socket
    /// takes it at once, otherwise (and from then on, until the writer has
    /// caught up) through the writer task.
    fn transmit(&mut self, now: Instant) {
        while let Some(record) = self.core.poll_transmit(now) {
            let mut record = record;
            if !self.writer_busy && record.len() <= DIRECT_RECORD_BYTES_MAX {
                if let Some(fd) = self.direct_fd {
                    match send_nonblocking(fd, &record) {
                        Ok(n) if n == record.len() => continue,
                        Ok(n) => record = record_after(&record, n),
                        // Full socket buffer, or a broken connection (the
                        // writer meets the error again and reports it).
                        Err(_) => {}
                    }
                }
            }
            if let Some(tx) = &self.writer_tx {
                self.writer_busy = true;
                // A send error means the writer died; `writer_failed` reports it.
                let _ = tx.send(record);
            }
        }
    }
}

/// Write as much of `record` as the socket takes without waiting.
fn send_nonblocking(fd: RawFd, record: &Record) -> io::Result<usize> {
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(1 + record.tail.len());
    for b in std::iter::once(&record.head).chain(record.tail.iter()) {
        if !b.is_empty() {
            iov.push(libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: b.len() });
        }
    }
    // SAFETY: a zeroed msghdr is valid; it points at `iov`, which points at
    // buffers that outlive the call; `fd` is an open socket (see
    // `Shared::direct_fd`).
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len() as _;
        libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// What is left of `record` after its first `n` bytes were sent.
fn record_after(record: &Record, mut n: usize) -> Record {
    let mut pieces: Vec<Bytes> = Vec::with_capacity(1 + record.tail.len());
    for b in std::iter::once(&record.head).chain(record.tail.iter()) {
        if n >= b.len() {
            n -= b.len();
        } else {
            pieces.push(b.slice(n..));
            n = 0;
        }
    }
    let mut it = pieces.into_iter();
    let head = it.next().unwrap_or_default();
    Record { head, tail: it.collect::<Vec<_>>().into() }
}

/// A client for ONC RPC over TCP to one server; clones share the
/// connections. Dropping the last clone closes them.
#[derive(Clone)]
pub struct RpcClient {
    inner: Arc<Inner>,
}

struct Inner {
    /// Every address, the configured server first.
    peers: Arc<Vec<Peer>>,
    /// Which of `peers` connections go to now (shared by the connection tasks).
    current: Arc<AtomicUsize>,
    /// One sender per connection task.
    connections: Vec<mpsc::Sender<Request>>,
    /// Each connection's core and socket, for calls sent by their caller.
    shared: Vec<Arc<Mutex<Shared>>>,
    /// Wakes a connection task whose timer a direct call moved earlier.
    kicks: Vec<Arc<Notify>>,
    /// Round-robin position.
    next: AtomicUsize,
    /// AUTH_SYS machine name: this host's name, truncated to 255 bytes.
    machine_name: Opaque<MAX_MACHINE_NAME>,
    stats: Arc<Vec<ConnectionStats>>,
    events: broadcast::Sender<TransportEvent>,
    /// Per (program, procedure) execution times.
    ops: Mutex<std::collections::BTreeMap<(u32, u32), OpTimes>>,
    /// Blocking connections for short calls from threads that wait for
    /// their replies themselves (see [`crate::lane`]); `None` over TLS
    /// or UDP.
    lanes: Option<Arc<crate::lane::Lanes>>,
    /// How lanes connect: as the shared connections do.
    lane_connect: LaneConnect,
}

/// What a background lane connect needs.
#[derive(Clone)]
struct LaneConnect {
    source: Option<IpAddr>,
    resvport: bool,
    timeout: Duration,
    wait: Duration,
    max_record_bytes: usize,
}

impl std::fmt::Debug for RpcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcClient")
            .field("server", &self.server())
            .field("connections", &self.inner.connections.len())
            .finish()
    }
}

impl RpcClient {
    /// Start the connection tasks (on the current tokio runtime). Nothing
    /// connects until the first call.
    pub fn new(config: TransportConfig) -> RpcClient {
        let n = config.nconnect.max(1);
        let (events, _) = broadcast::channel(256);
        let stats: Arc<Vec<ConnectionStats>> = Arc::new((0..n).map(|_| ConnectionStats::default()).collect());
        let peers = Arc::new(config.peers());
        let current = Arc::new(AtomicUsize::new(0));
        let lanes =
            (!config.udp && config.tls.is_none() && config.alternates.iter().all(|p| p.tls.is_none()))
                .then(|| Arc::new(crate::lane::Lanes::new()));
        let lane_connect = LaneConnect {
            source: config.source_addr,
            resvport: config.resvport,
            timeout: config.connect_timeout.min(crate::lane::LANE_WAIT_MAX),
            wait: config.core.timeo.min(crate::lane::LANE_WAIT_MAX),
            max_record_bytes: config.max_record_bytes,
        };
        let mut connections = Vec::with_capacity(n);
        let mut shared = Vec::with_capacity(n);
        let mut kicks = Vec::with_capacity(n);
        for i in 0..n {
            // The channel only hands calls over; the core's queue is the
            // real bound (the task stops reading at `queue_max`).
            let (tx, rx) = mpsc::channel(64);
            connections.push(tx);
            let mut cfg = config.clone();
            // Distinct xid ranges per connection keep xids unique per client,
            // which the server's duplicate cache relies on.
            cfg.core.first_xid = config.core.first_xid.wrapping_add((i as u32) << 24);
            let sh = Arc::new(Mutex::new(Shared::new(RpcCore::new(cfg.core.clone(), Instant::now()))));
            let kick = Arc::new(Notify::new());
            shared.push(sh.clone());
            kicks.push(kick.clone());
            let addrs = Peers { peers: peers.clone(), current: current.clone() };
            tokio::spawn(connection_task(i, cfg, addrs, rx, sh, kick, stats.clone(), events.clone()));
        }
        RpcClient {
            inner: Arc::new(Inner {
                peers,
                current,
                connections,
                shared,
                kicks,
                next: AtomicUsize::new(0),
                machine_name: machine_name(),
                stats,
                events,
                ops: Mutex::new(std::collections::BTreeMap::new()),
                lanes,
                lane_connect,
            }),
        }
    }

    /// The server this client talks to now (of several addresses, the
    /// current one).
    pub fn server(&self) -> SocketAddr {
        let i = self.inner.current.load(Ordering::Relaxed);
        self.inner.peers[i % self.inner.peers.len()].addr
    }

    /// Every address this client may talk to, the first configured first.
    pub fn servers(&self) -> Vec<SocketAddr> {
        self.inner.peers.iter().map(|p| p.addr).collect()
    }

    /// The AUTH_SYS credential for `cred`: uid, gid, the first 16 groups,
    /// and this host's name.
    pub fn auth_sys(&self, cred: &Cred) -> OpaqueAuth {
        OpaqueAuth::sys(&AuthSys {
            stamp: 0,
            machine_name: self.inner.machine_name.clone(),
            uid: cred.uid,
            gid: cred.gid,
            gids: cred.groups.iter().copied().take(MAX_AUTH_SYS_GROUPS).collect(),
        })
    }

    /// Call `prog`/`vers`/`proc_` with `args` as `cred`; the results are the
    /// bytes after the reply header. RPC-level refusals are
    /// [`NfsError::Rpc`] with a sentence naming the problem.
    pub async fn call<A: Encode + ?Sized>(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        cred: &Cred,
        args: &A,
    ) -> NfsResult<Bytes> {
        self.call_sized(prog, vers, proc_, cred, args, 256).await
    }

    /// [`RpcClient::call`] with the expected size of the encoded arguments
    /// (a WRITE's payload), so the record is allocated once.
    pub async fn call_sized<A: Encode + ?Sized>(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        cred: &Cred,
        args: &A,
        args_len_hint: usize,
    ) -> NfsResult<Bytes> {
        let call = Call::new(prog, vers, proc_, &self.auth_sys(cred), args, args_len_hint);
        self.submit(call).await
    }

    /// Send an already-built call.
    pub async fn submit(&self, call: Call) -> NfsResult<Bytes> {
        self.submit_maybe_laned(call, false).await
    }

    /// [`RpcClient::submit`] for a call its caller knows the server runs at
    /// most once, whatever its program and even if it arrives twice (an
    /// NFSv4.1 COMPOUND that changes nothing, or whose reply the server
    /// keeps in its session slot): a thread inside
    /// [`crate::lane::wait_here`] may send it on a lane, as NFSv3's
    /// read-only procedures. If the lane fails, the same call goes to the
    /// shared connections.
    pub async fn submit_once_only(&self, call: Call) -> NfsResult<Bytes> {
        self.submit_maybe_laned(call, true).await
    }

    async fn submit_maybe_laned(&self, call: Call, once_only: bool) -> NfsResult<Bytes> {
        let started = Instant::now();
        let key = (call.prog, call.proc_);
        let call = match self.try_lane(call, once_only) {
            Ok(result) => {
                self.record_op(key, started, &result);
                return result;
            }
            Err(call) => call,
        };
        let n = self.inner.connections.len();
        let i = self.inner.next.fetch_add(1, Ordering::Relaxed) % n;
        self.submit_to(i, call, key, started).await
    }

    /// Send `call` on connection `connection` (of `nconnect`, counted from
    /// 0; taken modulo their number), never on a lane: for calls that
    /// belong to one connection (NFSv4.1's BIND_CONN_TO_SESSION).
    pub async fn submit_on(&self, connection: usize, call: Call) -> NfsResult<Bytes> {
        let key = (call.prog, call.proc_);
        let i = connection % self.inner.connections.len();
        self.submit_to(i, call, key, Instant::now()).await
    }

    /// How many connections (`nconnect`) this client spreads calls over.
    pub fn connection_count(&self) -> usize {
        self.inner.connections.len()
    }

    async fn submit_to(&self, i: usize, call: Call, key: (u32, u32), started: Instant) -> NfsResult<Bytes> {
        self.inner.stats[i].calls.fetch_add(1, Ordering::Relaxed);
        let shut = || NfsError::Connection("the RPC client has shut down".into());
        let rx = match self.send_direct(i, call) {
            Ok(rx) => rx,
            Err(call) => {
                let (tx, rx) = oneshot::channel();
                self.inner.connections[i].send(Request { call, reply: tx }).await.map_err(|_| shut())?;
                rx
            }
        };
        let result = rx.await.map_err(|_| shut())?;
        self.record_op(key, started, &result);
        result
    }

    fn record_op(&self, key: (u32, u32), started: Instant, result: &NfsResult<Bytes>) {
        let ns = started.elapsed().as_nanos() as u64;
        let mut ops = self.inner.ops.lock();
        let t = ops.entry(key).or_default();
        t.calls += 1;
        t.errors += u64::from(result.is_err());
        t.exec_sum_ns += ns;
        t.exec_max_ns = t.exec_max_ns.max(ns);
    }

    /// Send `call` on a lane and wait for its reply on this thread, if this
    /// thread asked for that ([`crate::lane::wait_here`]) and the call is
    /// one a lane may carry (`once_only`: its caller says the server runs
    /// it at most once); otherwise give it back. Starts a lane's connect in the
    /// background when none was idle.
    fn try_lane(&self, call: Call, once_only: bool) -> Result<NfsResult<Bytes>, Call> {
        let Some(lanes) = &self.inner.lanes else { return Err(call) };
        if !crate::lane::may_wait_here()
            || !(once_only || crate::lane::eligible(call.prog, call.vers, call.proc_))
            || !call.is_contiguous()
            || call.len() > DIRECT_RECORD_BYTES_MAX
        {
            return Err(call);
        }
        let server = self.server();
        match lanes.call(server, call) {
            crate::lane::LaneOutcome::Answered(result) => Ok(result),
            crate::lane::LaneOutcome::NotTaken { call, connect: make_lane } => {
                if make_lane {
                    let lanes = lanes.clone();
                    let c = self.inner.lane_connect.clone();
                    tokio::spawn(async move {
                        let made = connect(server, false, c.source, c.resvport, None, c.timeout, None).await;
                        let lane = match made {
                            Ok(Connected::Stream(s)) => s
                                .into_std()
                                .and_then(|s| crate::lane::Lane::new(s, server, c.wait, c.max_record_bytes)),
                            Ok(_) => Err(io::Error::other("not a plain TCP connection")),
                            Err(e) => Err(e),
                        };
                        match lane {
                            Ok(lane) => lanes.add(lane),
                            Err(e) => {
                                tracing::debug!("lane to {server}: {e}");
                                lanes.connect_failed();
                            }
                        }
                    });
                }
                Err(call)
            }
        }
    }

    /// Lane counters (`None`: this client has no lanes: TLS or UDP).
    pub fn lane_stats(&self) -> Option<&crate::lane::LaneStats> {
        self.inner.lanes.as_deref().map(|l| &l.stats)
    }

    /// Send `call` from the caller's thread: submit it to connection `i`'s
    /// core and write it to the socket here, so a call costs no hand-off to
    /// the connection task (a thread wake-up each, the largest part of a
    /// small call's cost through a FUSE mount). The task still reads the
    /// reply, and runs timers, reconnects and whatever cannot be written
    /// at once. Gives the call back when this connection cannot take it
    /// that way: not connected, not plain TCP, a large record, the queue
    /// full, or records already waiting for the writer task.
    fn send_direct(&self, i: usize, call: Call) -> Result<oneshot::Receiver<NfsResult<Bytes>>, Call> {
        if call.len() > DIRECT_RECORD_BYTES_MAX {
            return Err(call);
        }
        let mut s = self.inner.shared[i].lock();
        if s.direct_fd.is_none() || s.writer_busy || !s.core.is_connected() || !s.core.can_submit() {
            return Err(call);
        }
        let now = Instant::now();
        let token = s.core.submit(now, call);
        let (tx, rx) = oneshot::channel();
        s.waiters.insert(token, tx);
        s.transmit(now);
        // The task sleeps until `wakes_at` at the latest; a call whose
        // first timer comes sooner must wake it (it never does when the
        // task's heartbeat is shorter than `timeo`).
        let kick = match (s.core.poll_timeout(), s.task_wakes_at) {
            (Some(t), Some(w)) => t < w,
            (Some(_), None) => true,
            (None, _) => false,
        };
        drop(s);
        if kick {
            self.inner.kicks[i].notify_one();
        }
        Ok(rx)
    }

    /// Execution times by (program, procedure).
    pub fn op_times(&self) -> std::collections::BTreeMap<(u32, u32), OpTimes> {
        self.inner.ops.lock().clone()
    }

    /// Connection news from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<TransportEvent> {
        self.inner.events.subscribe()
    }

    /// Per-connection counters (one entry per `nconnect` connection).
    pub fn connection_stats(&self) -> &[ConnectionStats] {
        &self.inner.stats
    }

    /// The local address of the most recent connection of connection 0.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        *self.inner.stats[0].local_addr.lock()
    }
}

/// This host's name (`localhost` if it has none).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates
    // when the name fits, and we stop at the first NUL or the buffer's end.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// This host's name for AUTH_SYS.
fn machine_name() -> Opaque<MAX_MACHINE_NAME> {
    let name = hostname();
    let name = &name.as_bytes()[..name.len().min(MAX_MACHINE_NAME)];
    Opaque::new(Bytes::copy_from_slice(name)).unwrap_or_default()
}

/// A live connection as the task holds it.
struct Conn {
    io: ConnIo,
    /// The socket, for callers' own writes (plain TCP only).
    direct_fd: Option<RawFd>,
    buf: BytesMut,
    writer_tx: mpsc::UnboundedSender<Record>,
    /// Fires if the writer task fails.
    writer_failed: oneshot::Receiver<io::Error>,
    writer: tokio::task::JoinHandle<()>,
}

/// How a connection receives.
enum ConnIo {
    /// TCP (or TLS over it): a byte stream cut into records.
    Stream { reader: Box<dyn tokio::io::AsyncRead + Send + Unpin>, decoder: RecordDecoder },
    /// UDP: each datagram is one reply.
    Datagram { sock: Arc<UdpSocket> },
}

impl Drop for Conn {
    fn drop(&mut self) {
        // A writer blocked on a dead peer must not outlive its connection.
        self.writer.abort();
    }
}

/// A socket just connected.
enum Connected {
    Stream(TcpStream),
    /// TCP after the RPC-with-TLS handshake.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    Datagram(UdpSocket),
}

impl Connected {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Connected::Stream(s) => s.local_addr(),
            Connected::Tls(s) => s.get_ref().0.local_addr(),
            Connected::Datagram(s) => s.local_addr(),
        }
    }
}

/// What a connection delivered.
enum Input {
    /// Bytes appended to the buffer (a stream), or one datagram in it.
    Data,
    /// The stream ended or failed.
    Closed(Option<io::Error>),
    /// A datagram socket reported an error about an earlier send (ICMP):
    /// not fatal, the retransmission timers deal with the loss.
    Transient(io::Error),
}

/// What woke the connection task.
enum Wake {
    Request(Option<Request>),
    Input(Input),
    Connected(io::Result<Connected>),
    Timer,
}

type ConnectFuture = std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<Connected>> + Send>>;

/// What the connection tasks of one client share: the addresses, and which
/// one is current.
struct Peers {
    peers: Arc<Vec<Peer>>,
    current: Arc<AtomicUsize>,
}

impl Peers {
    fn current(&self) -> usize {
        self.current.load(Ordering::Relaxed) % self.peers.len()
    }

    /// `failed` (an index into `peers`) failed: make the next address
    /// current, unless another connection already moved on from it.
    fn move_from(&self, failed: usize) -> usize {
        let next = (failed + 1) % self.peers.len();
        match self.current.compare_exchange(failed, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => next,
            Err(now) => now % self.peers.len(),
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn connection_task(
    index: usize,
    config: TransportConfig,
    addrs: Peers,
    mut requests: mpsc::Receiver<Request>,
    shared: Arc<Mutex<Shared>>,
    kick: Arc<Notify>,
    stats: Arc<Vec<ConnectionStats>>,
    events: broadcast::Sender<TransportEvent>,
) {
    let my_stats = &stats[index];
    let mut conn: Option<Conn> = None;
    let mut connecting: Option<ConnectFuture> = None;
    // The source port of the last connection, tried first on reconnect so
    // the server's duplicate reply cache recognises our retransmissions.
    let mut last_port: Option<u16> = None;
    let mut last_stats = CoreStats::default();
    // Callers send their own calls (`RpcClient::send_direct`) without
    // waking this task, so it looks at the core's timers at least this
    // often: a call's first timer is `timeo` away, never sooner.
    let heartbeat = (config.core.timeo / 2).clamp(Duration::from_millis(10), Duration::from_secs(5));
    let mut completed: Vec<(oneshot::Sender<NfsResult<Bytes>>, NfsResult<Bytes>)> = Vec::new();
    // Calls from the server, answered with the lock released.
    let mut server_calls: Vec<Bytes> = Vec::new();
    // The address being connected to or used (an index into the peers), the
    // one of the last connection that came up, and connects that failed in
    // a row (at most one round of the addresses goes without backoff).
    let mut using = addrs.current();
    let mut last_up = using;
    let mut failed_in_row = 0usize;
    let several = addrs.peers.len() > 1;
    loop {
        let now = Instant::now();
        let (wakes_at, accept, server) = {
            let mut guard = shared.lock();
            let s = &mut *guard;
            if conn.is_none() && connecting.is_none() && s.core.wants_connect(now) {
                s.core.on_connecting();
                using = addrs.current();
                let peer = &addrs.peers[using];
                // The old source port only helps the server that saw it.
                let port = last_port.filter(|_| using == last_up);
                connecting = Some(Box::pin(connect(
                    peer.addr,
                    config.udp,
                    config.source_addr,
                    config.resvport,
                    port,
                    config.connect_timeout,
                    peer.tls.clone(),
                )));
            }
            let server = addrs.peers[using].addr;
            if conn.is_some() {
                s.transmit(now);
            }
            while let Some(event) = s.core.poll_event() {
                match event {
                    Event::Completed(token, result) => {
                        if let Some(tx) = s.waiters.remove(&token) {
                            completed.push((tx, result));
                        }
                    }
                    Event::NotResponding => {
                        tracing::warn!("NFS server {server} not responding, still trying");
                        let _ = events.send(TransportEvent::NotResponding { connection: index });
                    }
                    Event::ServerOk => {
                        tracing::warn!("NFS server {server} OK");
                        let _ = events.send(TransportEvent::ServerOk { connection: index });
                    }
                    Event::Call(record) => server_calls.push(record),
                }
            }
            let st = s.core.stats();
            if st != last_stats {
                *my_stats.core.lock() = st;
                // Round trips change only with replies, which change the stats.
                my_stats.rtt.lock().clone_from(s.core.rtt_stats());
                last_stats = st;
            }
            let wakes_at = match s.core.poll_timeout() {
                Some(t) => t.min(now + heartbeat),
                None => now + heartbeat,
            };
            s.task_wakes_at = Some(wakes_at);
            (wakes_at, s.core.can_submit(), server)
        };
        // Answers go out with the lock released: a waiter may run at once.
        for (tx, result) in completed.drain(..) {
            let _ = tx.send(result);
        }
        if !server_calls.is_empty() {
            answer_server_calls(&config, index, &mut server_calls, &shared);
        }

        let timer = Some(tokio::time::Instant::from_std(wakes_at));
        let wake = tokio::select! {
            r = requests.recv(), if accept => Wake::Request(r),
            r = input(conn.as_mut()) => Wake::Input(r),
            r = maybe(connecting.as_mut()) => Wake::Connected(r),
            _ = sleep_until(timer) => Wake::Timer,
            _ = kick.notified() => Wake::Timer,
        };
        let now = Instant::now();
        let mut guard = shared.lock();
        let s = &mut *guard;
        match wake {
            Wake::Request(Some(req)) => {
                let token = s.core.submit(now, req.call);
                s.waiters.insert(token, req.reply);
            }
            // Every RpcClient clone is gone, so no one awaits an answer.
            Wake::Request(None) => {
                s.direct_fd = None;
                return;
            }
            Wake::Input(Input::Data) => {
                let c = conn.as_mut().expect("input only from a connection");
                match &mut c.io {
                    ConnIo::Datagram { .. } => {
                        let datagram = c.buf.split().freeze();
                        s.core.handle_record(now, datagram);
                    }
                    ConnIo::Stream { decoder, .. } => loop {
                        match decoder.decode(&mut c.buf) {
                            Ok(Some(record)) => s.core.handle_record(now, record),
                            Ok(None) => break,
                            Err(e) => {
                                tracing::warn!("NFS server {server}: {e}; reconnecting");
                                drop_connection(&mut conn, s, now, index, &events);
                                break;
                            }
                        }
                    },
                }
            }
            Wake::Input(Input::Transient(e)) => {
                tracing::debug!("UDP socket {index} to {server}: {e}");
            }
            Wake::Input(Input::Closed(e)) => {
                if let Some(e) = e {
                    tracing::debug!("connection {index} to {server} failed: {e}");
                }
                drop_connection(&mut conn, s, now, index, &events);
            }
            Wake::Connected(r) => {
                connecting = None;
                match r.and_then(|sock| Ok((sock.local_addr()?, sock))) {
                    Ok((local, sock)) => {
                        failed_in_row = 0;
                        if using != last_up {
                            let from = addrs.peers[last_up].addr;
                            tracing::warn!("NFS server {from} failed: connection {index} now at {server}");
                            let _ =
                                events.send(TransportEvent::Moved { connection: index, from, to: server });
                            last_up = using;
                        }
                        last_port = Some(local.port());
                        *my_stats.local_addr.lock() = Some(local);
                        my_stats.connects.fetch_add(1, Ordering::Relaxed);
                        let c = start_connection(sock, config.max_record_bytes, shared.clone());
                        s.direct_fd = c.direct_fd;
                        s.writer_tx = Some(c.writer_tx.clone());
                        s.writer_busy = false;
                        conn = Some(c);
                        s.core.on_connected(now);
                        let _ = events.send(TransportEvent::Connected { connection: index, local });
                    }
                    Err(e) => {
                        let error = connect_error_message(server, &e);
                        my_stats.connect_failures.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!("{error}");
                        failed_in_row += 1;
                        if several {
                            let next = addrs.move_from(using);
                            tracing::info!("{error}; trying {}", addrs.peers[next].addr);
                        }
                        if several && failed_in_row < addrs.peers.len() {
                            // Another address may answer: try it now.
                            s.core.on_connect_failed_try_next(now);
                        } else {
                            failed_in_row = 0;
                            s.core.on_connect_failed(now, &error);
                        }
                        let _ = events.send(TransportEvent::ConnectFailed { connection: index, error });
                    }
                }
            }
            Wake::Timer => {
                let before = s.core.stats().major_timeouts;
                s.core.handle_timeout(now);
                if several && conn.is_some() && s.core.stats().major_timeouts > before {
                    // Connected, but the server does not answer: another may.
                    let next = addrs.move_from(using);
                    tracing::warn!(
                        "NFS server {server} did not answer within the major timeout; moving to {}",
                        addrs.peers[next].addr
                    );
                    drop_connection(&mut conn, s, now, index, &events);
                }
            }
        }
    }
}

fn drop_connection(
    conn: &mut Option<Conn>,
    s: &mut Shared,
    now: Instant,
    index: usize,
    events: &broadcast::Sender<TransportEvent>,
) {
    // Callers stop writing to the socket before it can be closed.
    s.direct_fd = None;
    s.writer_tx = None;
    s.writer_busy = false;
    if conn.take().is_some() {
        s.core.on_disconnect(now);
        let _ = events.send(TransportEvent::Disconnected { connection: index });
    }
}

/// Answer the calls the server made (see [`CallHandler`]) and send the
/// answers, before any call still waiting to be written.
fn answer_server_calls(
    config: &TransportConfig,
    index: usize,
    calls: &mut Vec<Bytes>,
    shared: &Arc<Mutex<Shared>>,
) {
    let Some(handler) = &config.call_handler else {
        calls.clear();
        return;
    };
    let replies: Vec<Record> = calls
        .drain(..)
        .filter_map(|c| handler.call(index, c))
        .map(|reply| {
            let mut framed = BytesMut::with_capacity(4 + reply.len());
            let at = eagernfs_rpc::record::begin_record(&mut framed);
            framed.extend_from_slice(&reply);
            eagernfs_rpc::record::finish_record(&mut framed, at);
            Record { head: framed.freeze(), tail: Arc::from(Vec::new()) }
        })
        .collect();
    if replies.is_empty() {
        return;
    }
    let now = Instant::now();
    let mut s = shared.lock();
    for r in replies {
        s.core.queue_reply(r);
    }
    s.transmit(now);
}

/// Read more bytes (or one datagram) from the connection, or report the
/// writer's failure. Pending for ever when there is no connection.
async fn input(conn: Option<&mut Conn>) -> Input {
    let Some(c) = conn else { return std::future::pending().await };
    match &mut c.io {
        ConnIo::Stream { reader, .. } => {
            if c.buf.capacity() - c.buf.len() < 16 * 1024 {
                c.buf.reserve(64 * 1024);
            }
            tokio::select! {
                r = reader.read_buf(&mut c.buf) => match r {
                    Ok(0) => Input::Closed(None),
                    Ok(_) => Input::Data,
                    Err(e) => Input::Closed(Some(e)),
                },
                e = &mut c.writer_failed => {
                    Input::Closed(Some(e.unwrap_or_else(|_| io::Error::other("writer stopped"))))
                }
            }
        }
        ConnIo::Datagram { sock } => {
            c.buf.clear();
            c.buf.reserve(UDP_DATAGRAM_BYTES_MAX);
            tokio::select! {
                r = sock.recv_buf(&mut c.buf) => match r {
                    Ok(_) => Input::Data,
                    Err(e) => Input::Transient(e),
                },
                e = &mut c.writer_failed => {
                    Input::Closed(Some(e.unwrap_or_else(|_| io::Error::other("writer stopped"))))
                }
            }
        }
    }
}

/// Room for the largest UDP datagram.
const UDP_DATAGRAM_BYTES_MAX: usize = 64 * 1024;

async fn maybe(f: Option<&mut ConnectFuture>) -> io::Result<Connected> {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn start_connection(sock: Connected, max_record_bytes: usize, shared: Arc<Mutex<Shared>>) -> Conn {
    let (writer_tx, rx) = mpsc::unbounded_channel();
    let (failed_tx, writer_failed) = oneshot::channel();
    let mut direct_fd = None;
    let (io, writer) = match sock {
        Connected::Stream(stream) => {
            let _ = stream.set_nodelay(true);
            direct_fd = Some(stream.as_raw_fd());
            let (reader, writer) = stream.into_split();
            let writer = tokio::spawn(writer_task(writer, rx, failed_tx, Some(shared)));
            (
                ConnIo::Stream { reader: Box::new(reader), decoder: RecordDecoder::new(max_record_bytes) },
                writer,
            )
        }
        Connected::Tls(stream) => {
            let _ = stream.get_ref().0.set_nodelay(true);
            let (reader, writer) = tokio::io::split(*stream);
            let writer = tokio::spawn(writer_task(writer, rx, failed_tx, None));
            (
                ConnIo::Stream { reader: Box::new(reader), decoder: RecordDecoder::new(max_record_bytes) },
                writer,
            )
        }
        Connected::Datagram(sock) => {
            let sock = Arc::new(sock);
            let writer = tokio::spawn(datagram_writer_task(sock.clone(), rx, failed_tx));
            (ConnIo::Datagram { sock }, writer)
        }
    };
    Conn { io, direct_fd, buf: BytesMut::with_capacity(64 * 1024), writer_tx, writer_failed, writer }
}

/// Send each record as one datagram: the message without its record mark.
async fn datagram_writer_task(
    sock: Arc<UdpSocket>,
    mut records: mpsc::UnboundedReceiver<Record>,
    failed: oneshot::Sender<io::Error>,
) {
    let mut datagram = Vec::with_capacity(UDP_DATAGRAM_BYTES_MAX);
    while let Some(r) = records.recv().await {
        datagram.clear();
        datagram.extend_from_slice(r.head.get(4..).unwrap_or_default());
        for t in r.tail.iter() {
            datagram.extend_from_slice(t);
        }
        match sock.send(&datagram).await {
            Ok(_) => {}
            // ICMP news about an earlier datagram, or a full buffer: this
            // one is lost, and its retransmission timer will send it again.
            Err(e)
                if matches!(e.raw_os_error(), Some(libc::ECONNREFUSED) | Some(libc::ENOBUFS))
                    || e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => {
                let _ = failed.send(e);
                return;
            }
        }
    }
}

/// Write records as they come, many per `writev` when they queue up.
///
/// The channel is unbounded, but what flows through it is bounded by the
/// core: at most `slots_max` calls are outstanding, and each is queued
/// again only after a timeout or a reconnect (which starts a new writer).
async fn writer_task<W: tokio::io::AsyncWrite + Unpin + Send>(
    mut writer: W,
    mut records: mpsc::UnboundedReceiver<Record>,
    failed: oneshot::Sender<io::Error>,
    shared: Option<Arc<Mutex<Shared>>>,
) {
    let mut batch: Vec<Record> = Vec::new();
    while let Some(first) = records.recv().await {
        let mut pieces = 1 + first.tail.len();
        batch.push(first);
        while pieces < WRITEV_PIECES_MAX {
            match records.try_recv() {
                Ok(r) => {
                    pieces += 1 + r.tail.len();
                    batch.push(r);
                }
                Err(_) => break,
            }
        }
        if let Err(e) = write_records(&mut writer, &batch).await {
            let _ = failed.send(e);
            return;
        }
        batch.clear();
        if let Some(shared) = &shared {
            // Caught up: callers may write themselves again. Records are
            // only queued with this lock held, so none can slip in between.
            let mut s = shared.lock();
            if records.is_empty() {
                s.writer_busy = false;
            }
        }
    }
}

/// Buffers handed to one `writev`: enough to batch many small calls,
/// well below the kernel's limit (`UIO_MAXIOV`, 1024).
const WRITEV_PIECES_MAX: usize = 64;

/// Write `batch` in order, heads and tails straight from their buffers.
async fn write_records<W: tokio::io::AsyncWrite + Unpin>(w: &mut W, batch: &[Record]) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = batch
        .iter()
        .flat_map(|r| std::iter::once(&r.head).chain(r.tail.iter()))
        .filter(|b| !b.is_empty())
        .map(|b| IoSlice::new(b))
        .collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let n = {
            // At most SEND_CHUNK_BYTES per call (see there).
            let mut room = SEND_CHUNK_BYTES;
            let mut chunk = Vec::with_capacity(rest.len().min(WRITEV_PIECES_MAX));
            for s in rest.iter() {
                if room == 0 {
                    break;
                }
                let take = s.len().min(room);
                chunk.push(IoSlice::new(&s[..take]));
                room -= take;
            }
            w.write_vectored(&chunk).await?
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut rest, n);
        if !rest.is_empty() {
            std::thread::yield_now();
        }
    }
    Ok(())
}

/// Bytes handed to the kernel per send; the thread yields the CPU between
/// them. Sending a 1 MiB WRITE is about half a millisecond of CPU (copy
/// and loopback delivery), and the scheduler does not take the CPU from
/// a thread before its slice ends (a tick, several ms), so an application
/// whose write() reply is ready waited for the whole send. After each
/// 64 KiB piece `sched_yield` lets whatever else is runnable go first,
/// and costs a microsecond when nothing is.
const SEND_CHUNK_BYTES: usize = 64 * 1024;

/// Linux's default range for reserved source ports (`min_resvport`..`max_resvport`).
const RESVPORT_MIN: u16 = 665;
const RESVPORT_MAX: u16 = 1023;

/// Connect to `server` from `source` (any address if `None`), from a
/// privileged port if `resvport`, preferring `last_port`.
async fn connect(
    server: SocketAddr,
    udp: bool,
    source: Option<IpAddr>,
    resvport: bool,
    last_port: Option<u16>,
    timeout: Duration,
    tls: Option<crate::tls::TlsSetup>,
) -> io::Result<Connected> {
    let ip = source.unwrap_or(match server {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    });
    let mut ports: Vec<u16> = Vec::new();
    if let Some(p) = last_port.filter(|p| !resvport || *p <= RESVPORT_MAX) {
        ports.push(p);
    }
    if resvport {
        // Start at a random place so many clients on one host do not all
        // fight over the same ports.
        let span = RESVPORT_MAX - RESVPORT_MIN + 1;
        let start = rand::random::<u16>() % span;
        ports.extend((0..span).map(|i| RESVPORT_MAX - (start + i) % span));
    } else {
        ports.push(0);
    }
    if udp {
        // Binding and "connecting" a datagram socket is local: no timeout.
        let mut last_err = io::Error::new(io::ErrorKind::AddrInUse, "no free privileged source port");
        for port in ports {
            match std::net::UdpSocket::bind(SocketAddr::new(ip, port)) {
                Ok(s) => {
                    s.set_nonblocking(true)?;
                    let s = UdpSocket::from_std(s)?;
                    s.connect(server).await?;
                    return Ok(Connected::Datagram(s));
                }
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => last_err = e,
                Err(e) => return Err(e),
            }
        }
        return Err(last_err);
    }
    let attempt = async {
        let mut last_err = io::Error::new(io::ErrorKind::AddrInUse, "no free privileged source port");
        for port in ports {
            let socket = match server {
                SocketAddr::V4(_) => TcpSocket::new_v4()?,
                SocketAddr::V6(_) => TcpSocket::new_v6()?,
            };
            // Lets us take back the port of a connection that just closed.
            socket.set_reuseaddr(true)?;
            match socket.bind(SocketAddr::new(ip, port)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                    last_err = e;
                    continue;
                }
                Err(e) => return Err(e),
            }
            match socket.connect(server).await {
                Ok(s) => return Ok(Connected::Stream(s)),
                // Our (address, port) pair is still tied to the server's
                // (e.g. TIME_WAIT): take the next port.
                Err(e) if matches!(e.kind(), io::ErrorKind::AddrInUse | io::ErrorKind::AddrNotAvailable) => {
                    last_err = e;
                }
                Err(e) => return Err(e),
            }
        }
        Err(last_err)
    };
    let connected = match tokio::time::timeout(timeout, attempt).await {
        Ok(r) => r?,
        Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "connection attempt timed out")),
    };
    match (connected, tls) {
        (Connected::Stream(s), Some(setup)) => {
            Ok(Connected::Tls(Box::new(crate::tls::start(s, &setup, server).await?)))
        }
        (c, _) => Ok(c),
    }
}

/// A failed connect as a sentence: "cannot connect to 10.0.0.1:2049:
/// connection refused (is an NFS server running there?)".
pub fn connect_error_message(server: SocketAddr, e: &io::Error) -> String {
    let why = match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => "connection refused (is an NFS server running there?)".to_string(),
        Some(libc::EHOSTUNREACH) | Some(libc::ENETUNREACH) => "no route to host".to_string(),
        Some(libc::EADDRNOTAVAIL) => "the source address is not available on this host".to_string(),
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "not allowed to bind the source port (privileged ports need root; try noresvport)".to_string()
        }
        _ if e.kind() == io::ErrorKind::TimedOut => "no answer (connection attempt timed out)".to_string(),
        _ => e.to_string(),
    };
    format!("cannot connect to {server}: {why}")
}
