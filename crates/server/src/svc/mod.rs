//! The service threads: knfsd's execution model (Banks, "Making the Linux
//! NFS server suck faster") in user space.
//!
//! A thread waits for a socket with something to do, takes it, reads one
//! call, runs it and writes the reply itself: a call costs no hand-off
//! between threads, so no context switch beyond the wake-up of the thread
//! that takes it. Each socket's registration is one-shot, so one thread
//! at a time reads a connection; it re-arms the socket *before* running a
//! call that may block (COMMIT, a stable or large WRITE, a large READ),
//! letting another thread take the connection's next call, and *after* a
//! quick one, reading the next call itself (up to [`BATCH_MAX`] in a row).
//!
//! Threads come in pools (one for the whole server, or one per CPU with
//! each pool's threads bound to its CPU and each connection served by one
//! pool). A pool has one *slot* per CPU; only a thread holding a slot waits
//! for sockets and runs quick calls, so quick calls never make threads
//! compete for a CPU (see `sched`). A call that may block goes to a pool
//! of its own (`slow`), so blocked calls never hold the threads quick calls
//! need; a watchdog gives the slot of a quick call still running after
//! [`STUCK`] (it turned out to block) to another thread. Each pool grows
//! with the calls blocked at once, up to [`SvcConfig::threads_max`]
//! together, and threads idle for [`SvcConfig::idle_exit`] end, down to
//! [`SvcConfig::threads_min`].
//!
//! Bounds: at most `max_connections` connections (the listener is not
//! re-armed beyond that, so further clients wait in the backlog), at most
//! `max_requests_per_connection` calls of one connection read and not yet
//! answered (input is not re-armed beyond that, which pushes back on the
//! client through TCP). A reply counts until it is written, so a client
//! that stops reading cannot make the server queue without bound.
//!
//! Shutdown: stop accepting; keep serving until no call has arrived for
//! [`DRAIN_IDLE`] (at most [`DRAIN_MAX`]); stop reading; wait for calls in
//! flight and their replies (at most twice `DRAIN_MAX`); stop the threads.
//!
//! # Layout
//! - `config`: the pools and thread limits ([`SvcConfig`]), which the
//!   server's configuration holds.
//! - `epoll`: one-shot registrations and the stop flag.
//! - `conn`: a connection's record reading, reply writing, bookkeeping.
//! - `peek`: which calls may block, and which are READ/WRITE of a file.
//! - `sched`: slots, waiting threads, growing and shrinking.
//! - `slow`: the threads that run calls that may block.

mod config;
mod conn;
mod deadline;
mod epoll;
mod peek;
mod sched;
mod slow;

pub use config::{PoolMode, SvcConfig};

use crate::call::{self, Peer, Ticket, TlsPeer, Transport};
use crate::dispatch;
use crate::reply::Reply;
use crate::ServerState;
use conn::{Conn, OutState, RecvEnd};
use deadline::ReplyTo;
use epoll::{Epoll, Flag, Interest};
use parking_lot::{Condvar, Mutex, RwLock};
use sched::{Sched, ThreadRec};
use slow::{SlowJob, SlowPool};
use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Quick calls one thread serves from a connection before letting others
/// have a turn (fairness between connections sharing a thread).
const BATCH_MAX: usize = 16;
/// A quick call running longer than this has its slot given to another
/// thread by the watchdog (it is probably waiting for the disk).
pub(crate) const STUCK: Duration = Duration::from_millis(3);
/// How often the watchdog looks while calls are arriving, and while not.
const WATCH_BUSY: Duration = Duration::from_millis(2);
const WATCH_IDLE: Duration = Duration::from_millis(50);
/// Replies held back to leave in one send at most this many bytes (more
/// goes out at once).
const REPLY_BATCH_BYTES: usize = 256 * 1024;
/// Connections accepted per listener wake-up (a mount storm arrives at once).
const ACCEPT_BATCH: usize = 256;
/// At shutdown, serving goes on until no call has arrived for this long…
pub(crate) const DRAIN_IDLE: Duration = Duration::from_millis(50);
/// …or for this long in any case.
pub(crate) const DRAIN_MAX: Duration = Duration::from_secs(2);

/// Replies of a run of quick calls, not sent yet.
#[derive(Default)]
struct Replies {
    list: Vec<Reply>,
    bytes: usize,
    /// Calls that needed no reply (still to be counted as answered).
    none: usize,
}

impl Replies {
    fn add(&mut self, reply: Option<Reply>) {
        match reply {
            Some(r) => {
                self.bytes += r.head.len() + r.tail.as_ref().map_or(0, |t| t.len());
                self.list.push(r);
            }
            None => self.none += 1,
        }
    }
}

// Tokens in epoll events: an id and what the event is about.
const KIND_BITS: u32 = 3;
const KIND_IN: u64 = 0;
const KIND_OUT: u64 = 1;
const KIND_LISTENER: u64 = 2;
const KIND_STOP: u64 = 3;
const KIND_UDP: u64 = 4;

/// Room for the largest UDP datagram (65,507 bytes of payload over IPv4).
const UDP_DATAGRAM_MAX: usize = 64 * 1024;

fn token(id: u64, kind: u64) -> u64 {
    (id << KIND_BITS) | kind
}

/// A group of threads sharing one epoll.
struct Pool {
    epoll: Epoll,
    /// The CPU its threads are bound to (per-CPU pools).
    cpu: Option<usize>,
    sched: Sched,
}

/// How often the watchdog looks for slow and idle connections.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// Hosts remembered for log-once messages.
const LOGGED_HOSTS_MAX: usize = 4096;

/// The running service.
pub(crate) struct Svc {
    state: Arc<ServerState>,
    cfg: SvcConfig,
    pools: Vec<Pool>,
    listeners: Vec<TcpListener>,
    /// UDP sockets; socket `i` is served by pool `i % pools`.
    udp: Vec<UdpSocket>,
    /// Listeners not re-armed because `max_connections` was reached.
    listeners_paused: Mutex<Vec<bool>>,
    conns: RwLock<HashMap<u64, Arc<Conn>>>,
    conn_count: AtomicUsize,
    /// Open connections per client address (`max_connections_per_host`).
    per_host: Mutex<HashMap<std::net::IpAddr, usize>>,
    /// Hosts already named in a log line about a connection limit or
    /// timeout (each is logged once; at most [`LOGGED_HOSTS_MAX`]).
    logged_hosts: Mutex<std::collections::HashSet<(std::net::IpAddr, &'static str)>>,
    next_id: AtomicU64,
    next_pool: AtomicUsize,
    accepting: AtomicBool,
    reading: AtomicBool,
    stop: Flag,
    /// Calls read and not fully answered, over all connections.
    inflight_total: AtomicUsize,
    /// When the last call arrived (ns since `epoch`), for the drain.
    last_call_ns: AtomicU64,
    epoch: Instant,
    stopped: AtomicBool,
    /// Calls that may block, and their threads.
    slow: SlowPool,
    /// Reused buffers for large records.
    recv_buffers: Arc<eagernfs_vfs::bufpool::BufPool>,
    /// Calls of remote exports now running, for their deadline.
    deadlines: deadline::Deadlines,
    /// Threads alive (service threads, slow threads and the watchdog), to
    /// wait for at shutdown.
    alive: Mutex<usize>,
    all_gone: Condvar,
    /// Connections that asked for TLS go here once the STARTTLS reply is written.
    tls_tx: Option<tokio::sync::mpsc::UnboundedSender<crate::tls::Handover>>,
}

/// Whether `record` is an RPC-with-TLS probe: a call whose credential flavor is AUTH_TLS
/// (xid, message type, RPC version, program, version, procedure, then the flavor).
fn is_tls_probe(record: &[u8]) -> bool {
    record.len() >= 28
        && u32::from_be_bytes([record[24], record[25], record[26], record[27]])
            == eagernfs_rpc::AuthFlavor::Tls as u32
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return vec![0];
    }
    // SAFETY: CPU_ISSET reads the set we own.
    (0..libc::CPU_SETSIZE as usize).filter(|c| unsafe { libc::CPU_ISSET(*c, &set) }).collect()
}

fn bind_to_cpu(cpu: usize) {
    // SAFETY: as above; CPU_SET writes into the set we own.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; `set` is valid.
    let _ = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
}

impl Svc {
    /// Start serving `listeners` with the pools' first threads.
    pub(crate) fn start(
        state: Arc<ServerState>,
        cfg: SvcConfig,
        listeners: Vec<TcpListener>,
        udp: Vec<UdpSocket>,
        tls_tx: Option<tokio::sync::mpsc::UnboundedSender<crate::tls::Handover>>,
    ) -> io::Result<Arc<Svc>> {
        let cpus = allowed_cpus();
        let (pool_cpus, slots): (Vec<Option<usize>>, usize) = match cfg.pools {
            PoolMode::Global => (vec![None], cpus.len().max(1) * cfg.slots_per_cpu.max(1)),
            PoolMode::PerCpu => (cpus.into_iter().map(Some).collect(), cfg.slots_per_cpu.max(1)),
        };
        let per_pool_max = (cfg.threads_max / pool_cpus.len()).max(1);
        let stop = Flag::new()?;
        let mut pools = Vec::new();
        for cpu in pool_cpus {
            let epoll = Epoll::new()?;
            epoll.add_level(stop.raw(), token(0, KIND_STOP))?;
            pools.push(Pool { epoll, cpu, sched: Sched::new(slots, cfg.threads_min, per_pool_max) });
        }
        for (i, l) in listeners.iter().enumerate() {
            l.set_nonblocking(true)?;
            pools[0].epoll.add(l.as_raw_fd(), Interest::Read, token(i as u64, KIND_LISTENER))?;
        }
        for (i, u) in udp.iter().enumerate() {
            u.set_nonblocking(true)?;
            pools[i % pools.len()].epoll.add(u.as_raw_fd(), Interest::Read, token(i as u64, KIND_UDP))?;
        }
        let svc = Arc::new(Svc {
            listeners_paused: Mutex::new(vec![false; listeners.len()]),
            listeners,
            udp,
            state,
            cfg: cfg.clone(),
            pools,
            conns: RwLock::new(HashMap::new()),
            per_host: Mutex::new(HashMap::new()),
            logged_hosts: Mutex::new(std::collections::HashSet::new()),
            conn_count: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            next_pool: AtomicUsize::new(0),
            accepting: AtomicBool::new(true),
            reading: AtomicBool::new(true),
            stop,
            inflight_total: AtomicUsize::new(0),
            last_call_ns: AtomicU64::new(0),
            epoch: Instant::now(),
            stopped: AtomicBool::new(false),
            slow: SlowPool::new(cfg.threads_max, cfg.idle_exit),
            recv_buffers: Arc::default(),
            deadlines: Default::default(),
            alive: Mutex::new(0),
            all_gone: Condvar::new(),
            tls_tx,
        });
        if let Some(v4) = &svc.state.nfs4 {
            // NFSv4.1 callbacks go out on clients' connections. Attached before any thread
            // serves a call: a CREATE_SESSION served first would find no way to probe its back
            // channel, and the session would stay "callback path down" (no delegations).
            let svc_dyn: Arc<dyn crate::nfs4::BackChannel> = svc.clone();
            v4.back.attach(Arc::downgrade(&svc_dyn));
        }
        for p in 0..svc.pools.len() {
            for _ in 0..svc.pools[p].sched.threads_min() {
                if !svc.spawn_thread(p) {
                    svc.shutdown();
                    return Err(io::Error::other("cannot start service threads"));
                }
            }
        }
        *svc.alive.lock() += 1;
        let watcher = svc.clone();
        if let Err(e) =
            std::thread::Builder::new().name("eagernfs-watch".into()).spawn(move || watcher.watchdog())
        {
            svc.thread_gone();
            svc.shutdown();
            return Err(e);
        }
        Ok(svc)
    }

    /// Start a thread in pool `p` if it is below its bound.
    fn spawn_thread(self: &Arc<Self>, p: usize) -> bool {
        if !self.pools[p].sched.reserve_thread() {
            return false;
        }
        *self.alive.lock() += 1;
        let svc = self.clone();
        match std::thread::Builder::new().name(format!("eagernfs-svc{p}")).spawn(move || svc.worker(p)) {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!("cannot start a service thread: {e}");
                self.pools[p].sched.unreserve_thread();
                self.thread_gone();
                false
            }
        }
    }

    /// Run `job` on a slow thread (started if none is idle).
    fn submit_slow(self: &Arc<Self>, job: SlowJob) {
        if !self.slow.submit(job) {
            return;
        }
        *self.alive.lock() += 1;
        let svc = self.clone();
        let spawned = std::thread::Builder::new().name("eagernfs-slow".into()).spawn(move || {
            svc.state.stats.thread_started();
            while let Some(job) = svc.slow.next() {
                svc.run_slow(job);
            }
            svc.state.stats.thread_ended();
            svc.thread_gone();
        });
        if let Err(e) = spawned {
            tracing::warn!("cannot start a thread for slow calls: {e}");
            self.thread_gone();
            if let Some(job) = self.slow.thread_not_started() {
                self.run_slow(job);
            }
        }
    }

    fn run_slow(&self, job: SlowJob) {
        match job {
            SlowJob::Tcp { conn, record, ticket, remote } => {
                let to = remote.then(|| ReplyTo::Tcp(conn.clone()));
                // Answered by the watchdog already: counted then, nothing to send.
                let Some(reply) = self.run_call_to(to, &conn.info, record, ticket) else { return };
                let mut out = conn.out.lock();
                let (released, blocked) = match reply {
                    Some(r) => {
                        let w = conn.write_locked(&mut out, Some(r));
                        (w.replies_done, w.blocked)
                    }
                    None => (1, false),
                };
                self.after_output(&conn, &mut out, released, blocked);
            }
            SlowJob::Udp { socket, src, local_port, record, remote } => {
                let conn = call::Connection::new(Peer { addr: src, local_port, transport: Transport::Udp });
                let to = remote.then_some(ReplyTo::Udp { socket, src });
                if let Some(Some(reply)) = self.run_call_to(to, &conn, record, None) {
                    self.send_udp_reply(socket, src, reply);
                }
                self.inflight_total.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// The calling thread gives its slot up (it is about to block).
    fn hand_off(self: &Arc<Self>, p: usize, rec: &ThreadRec) {
        if self.pools[p].sched.release(rec).0 {
            self.spawn_thread(p);
        }
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Give the slots of threads stuck in a quick call to others.
    fn watchdog(self: Arc<Self>) {
        let mut swept = self.now_ns();
        while !self.stopped.load(Ordering::Acquire) {
            if self.now_ns().saturating_sub(swept) >= SWEEP_EVERY.as_nanos() as u64 {
                swept = self.now_ns();
                self.sweep_connections();
                self.recv_buffers.trim();
            }
            let now = self.now_ns();
            let recent = now.saturating_sub(self.last_call_ns.load(Ordering::Relaxed)) < 100_000_000;
            std::thread::sleep(if recent { WATCH_BUSY } else { WATCH_IDLE });
            let limit = self.now_ns().saturating_sub(STUCK.as_nanos() as u64);
            for p in 0..self.pools.len() {
                for rec in self.pools[p].sched.stuck(limit) {
                    self.hand_off(p, &rec);
                }
            }
            if self.state.any_remote() {
                for o in self.deadlines.overdue(self.now_ns()) {
                    self.answer_overdue(o);
                }
            }
        }
        self.thread_gone();
    }

    fn thread_gone(&self) {
        let mut alive = self.alive.lock();
        *alive -= 1;
        if *alive == 0 {
            self.all_gone.notify_all();
        }
    }

    fn worker(self: Arc<Self>, p: usize) {
        let pool = &self.pools[p];
        if let Some(cpu) = pool.cpu {
            bind_to_cpu(cpu);
        }
        self.state.stats.thread_started();
        let rec = Arc::new(ThreadRec::default());
        pool.sched.register(&rec);
        loop {
            if !rec.has_slot() && !pool.sched.acquire(&rec, self.cfg.idle_exit) {
                pool.sched.leave(&rec, false);
                break;
            }
            rec.busy_since_ns.store(0, Ordering::Release);
            let tok = match pool.epoll.wait_one(None) {
                Ok(Some(t)) => t,
                Ok(None) => continue,
                Err(e) => {
                    tracing::error!("epoll_wait failed: {e}; service thread ends");
                    pool.sched.leave(&rec, true);
                    break;
                }
            };
            let (id, kind) = (tok >> KIND_BITS, tok & ((1 << KIND_BITS) - 1));
            if kind == KIND_STOP {
                pool.sched.leave(&rec, true);
                break;
            }
            rec.busy_since_ns.store(self.now_ns().max(1), Ordering::Release);
            match kind {
                KIND_LISTENER => self.accept(id as usize),
                KIND_IN => {
                    if let Some(c) = self.conn(id) {
                        self.serve_input(&c);
                    }
                }
                KIND_OUT => {
                    if let Some(c) = self.conn(id) {
                        self.drain_output(&c);
                    }
                }
                KIND_UDP => self.serve_udp(id as usize),
                _ => {}
            }
        }
        self.state.stats.thread_ended();
        self.thread_gone();
    }

    fn conn(&self, id: u64) -> Option<Arc<Conn>> {
        self.conns.read().get(&id).cloned()
    }

    /// Write a call we make (an NFSv4.1 callback) on connection `id`, like
    /// a reply but not counted as one. False if the connection is gone.
    fn send_call(&self, id: u64, record: bytes::Bytes) -> bool {
        let Some(c) = self.conn(id) else { return false };
        let mut out = c.out.lock();
        if out.gone || out.broken {
            return false;
        }
        c.queue_call(&mut out, record);
        let w = c.write_locked(&mut out, None);
        self.after_output(&c, &mut out, w.replies_done, w.blocked);
        true
    }

    // ----- connections ------------------------------------------------

    fn accept(self: &Arc<Self>, i: usize) {
        let listener = &self.listeners[i];
        for _ in 0..ACCEPT_BATCH {
            if !self.accepting.load(Ordering::Acquire) {
                return;
            }
            if self.conn_count.load(Ordering::Acquire) >= self.state.config.max_connections {
                self.listeners_paused.lock()[i] = true;
                // A connection may have closed meanwhile and found us unpaused.
                if self.conn_count.load(Ordering::Acquire) < self.state.config.max_connections {
                    self.listeners_paused.lock()[i] = false;
                    continue;
                }
                return;
            }
            match listener.accept() {
                Ok((stream, peer)) => self.add_conn(stream, peer),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e)
                    if e.raw_os_error() == Some(libc::EMFILE) || e.raw_os_error() == Some(libc::ENFILE) =>
                {
                    // Out of descriptors: take no more until a connection closes.
                    tracing::warn!("accept failed: {e}; waiting for a connection to close");
                    self.listeners_paused.lock()[i] = true;
                    return;
                }
                Err(e) => {
                    // ECONNABORTED and the like concern one client only.
                    tracing::debug!("accept failed: {e}");
                }
            }
        }
        self.arm_listener(i);
    }

    fn arm_listener(&self, i: usize) {
        if let Err(e) = self.pools[0].epoll.rearm(
            self.listeners[i].as_raw_fd(),
            Interest::Read,
            token(i as u64, KIND_LISTENER),
        ) {
            tracing::error!("cannot re-arm listener: {e}");
        }
    }

    fn add_conn(&self, stream: TcpStream, peer: SocketAddr) {
        let local_port = match stream.local_addr() {
            Ok(a) => a.port(),
            Err(_) => return,
        };
        let info = call::Connection::new(Peer { addr: peer, local_port, transport: Transport::Tcp });
        self.add_connection(stream, info);
    }

    /// Serve a connection relayed from TLS (`stream` is the service end of its socket pair).
    pub(crate) fn adopt(&self, stream: TcpStream, peer: Peer, tls: TlsPeer) {
        let info = call::Connection::with_tls(peer, tls);
        self.add_connection(stream, info);
    }

    fn add_connection(&self, stream: TcpStream, mut info: call::Connection) {
        let peer = info.peer.addr;
        let limit = self.state.config.max_connections_per_host;
        {
            let mut hosts = self.per_host.lock();
            let n = hosts.entry(peer.ip()).or_insert(0);
            if *n >= limit {
                drop(hosts);
                self.state.stats.connection_refused_host_limit();
                self.log_once(peer.ip(), "host-limit", || {
                    format!(
                        "client {} has {limit} connections open (max_connections_per_host): closing further ones",
                        peer.ip()
                    )
                });
                return; // dropping the stream closes it
            }
            *n += 1;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        info.id = id;
        let pool = self.next_pool.fetch_add(1, Ordering::Relaxed) % self.pools.len();
        let conn = match Conn::new(id, pool, stream, info, self.now_ns()) {
            Ok(c) => Arc::new(c),
            Err(e) => {
                tracing::debug!(%peer, "cannot set up connection: {e}");
                self.host_closed(peer.ip());
                return;
            }
        };
        self.conns.write().insert(id, conn.clone());
        self.conn_count.fetch_add(1, Ordering::AcqRel);
        self.state.stats.connection_opened();
        if let Err(e) =
            self.pools[pool].epoll.add(conn.stream.as_raw_fd(), Interest::Read, token(id, KIND_IN))
        {
            tracing::warn!(%peer, "cannot watch connection: {e}");
            self.close(&conn, &mut conn.out.lock());
        }
    }

    fn arm_input(&self, c: &Conn) {
        if !self.reading.load(Ordering::Acquire) {
            self.input_ended(c);
            return;
        }
        // A whole call already read into the connection's buffer (it came in
        // one read with the previous ones) leaves the socket with nothing
        // epoll would report: ask to be woken at once instead.
        let interest = if c.has_whole_fragment() { Interest::ReadNow } else { Interest::Read };
        let r = self.pools[c.pool].epoll.rearm(c.stream.as_raw_fd(), interest, token(c.id, KIND_IN));
        if let Err(e) = r {
            tracing::debug!(peer = %c.info.peer.addr, "cannot re-arm connection: {e}");
            self.input_ended(c);
        }
    }

    /// After a call of `c` was counted in flight: pause its input if it
    /// has as many calls in flight as allowed (a thread writing one of their
    /// replies re-arms it). Whether there is room for more.
    fn pause_input_if_full(&self, c: &Conn, max_inflight: usize) -> bool {
        let mut out = c.out.lock();
        out.in_paused = out.inflight >= max_inflight;
        !out.in_paused
    }

    /// Read and run calls of `c`; its input event was ours. Replies of
    /// quick calls served in a row leave together (one send for several),
    /// before anything that may block and when the run ends.
    fn serve_input(self: &Arc<Self>, c: &Arc<Conn>) {
        let max_inflight = self.state.config.max_requests_per_connection;
        let mut replies = Replies::default();
        for n in 0..BATCH_MAX {
            if !self.reading.load(Ordering::Acquire) || c.out.lock().read_closed {
                // Shutting down (or already closing): read nothing more.
                self.send_replies(c, &mut replies);
                return self.input_ended(c);
            }
            let (record, seq) =
                match c.recv_record(self.state.config.max_record_bytes, n > 0, &self.recv_buffers) {
                    Ok(Some(r)) => {
                        let now = self.now_ns();
                        c.activity_ns.store(now, Ordering::Release);
                        c.partial_since_ns.store(0, Ordering::Release);
                        r
                    }
                    Ok(None) => {
                        if c.partial_since_ns.load(Ordering::Acquire) == 0 && c.has_buffered_input() {
                            c.partial_since_ns.store(self.now_ns().max(1), Ordering::Release);
                        }
                        self.send_replies(c, &mut replies);
                        return self.arm_input(c);
                    }
                    Err(end) => {
                        match end {
                            RecvEnd::Closed => {}
                            RecvEnd::TooLarge(n) => tracing::warn!(
                                peer = %c.info.peer.addr,
                                "closing connection: record of {n} bytes exceeds the maximum of {}",
                                self.state.config.max_record_bytes
                            ),
                            RecvEnd::Io(e) => {
                                tracing::debug!(peer = %c.info.peer.addr, "connection ended: {e}")
                            }
                        }
                        self.send_replies(c, &mut replies);
                        return self.input_ended(c);
                    }
                };
            self.last_call_ns.store(self.now_ns(), Ordering::Relaxed);
            let peeked = peek::peek(&record, self.cfg.writes_block);
            {
                let mut out = c.out.lock();
                out.inflight += 1;
                self.inflight_total.fetch_add(1, Ordering::AcqRel);
            }
            // The ticket is taken before anyone can read the next call, so
            // a later call never finds this one missing from the order.
            let ticket = peeked.io_file.map(|f| c.info.order.ticket(seq, f));
            if self.tls_tx.is_some() && c.info.tls.is_none() && is_tls_probe(&record) {
                // Nobody may read this connection again: TLS bytes come next.
                let reply = self.run_call(&c.info, record, ticket);
                let starttls = reply.as_ref().is_some_and(|r| r.starttls);
                replies.add(reply);
                if starttls {
                    return self.start_tls(c, replies);
                }
                self.send_replies(c, &mut replies);
                return self.arm_input(c);
            }
            let last;
            if self.may_block(&peeked) {
                // A slow thread runs it and replies; this one reads on.
                // Queued before anyone else can read the connection, so one
                // connection's slow calls queue in arrival order, which the
                // ticket order relies on (a slow thread waiting for an
                // earlier ticket whose call is queued behind it would wait
                // for ever once every slow thread did the same). That is
                // why input is paused only after the call is queued: a
                // paused connection is re-armed by whichever thread writes
                // a reply, and another thread could then read and queue the
                // next call ahead of this one.
                let remote = self.is_remote_call(&peeked);
                self.submit_slow(SlowJob::Tcp { conn: c.clone(), record, ticket, remote });
                let room = self.pause_input_if_full(c, max_inflight);
                last = !room || n + 1 == BATCH_MAX;
                if last && room {
                    self.arm_input(c);
                }
            } else {
                let room = self.pause_input_if_full(c, max_inflight);
                // An NFSv4 call may wait for a write delegation's holder to answer
                // CB_GETATTR, whose answer can come on this very connection (one
                // connection may carry several clients' sessions): others must read it.
                let may_wait_for_client =
                    peeked.nfs4 && self.state.nfs4.as_ref().is_some_and(|v4| v4.has_write_delegations());
                last = !room || n + 1 == BATCH_MAX || may_wait_for_client;
                if last && room {
                    // Someone else reads the next call while this one runs.
                    self.arm_input(c);
                }
                let to = self.is_remote_call(&peeked).then(|| ReplyTo::Tcp(c.clone()));
                if let Some(reply) = self.run_call_to(to, &c.info, record, ticket) {
                    replies.add(reply);
                }
            }
            if last || replies.bytes >= REPLY_BATCH_BYTES {
                self.send_replies(c, &mut replies);
            }
            if last {
                return;
            }
        }
    }

    /// Whether the call `p` describes should run on a slow-call thread.
    fn may_block(&self, p: &peek::Peeked) -> bool {
        p.may_block || (self.cfg.metadata_blocks && p.changes_metadata) || self.waits_on_other_machines(p)
    }

    /// Whether a call changing metadata, or a lock call, goes to an export
    /// whose backend waits on other machines for it (a CephFS: its MDS
    /// journals every change): such calls run on slow-call threads, so a
    /// slow cluster holds those, not the threads quick calls need.
    fn waits_on_other_machines(&self, p: &peek::Peeked) -> bool {
        if !(p.changes_metadata || p.nlm) || !self.state.any_remote() {
            return false;
        }
        match p.export {
            Some(id) if !p.nlm => self.state.is_remote(id),
            _ => true,
        }
    }

    /// Whether the call `p` describes is an NFSv3 call for an export whose
    /// backend waits on other machines (it then runs under a deadline).
    /// NFSv4 calls never do: their replies belong to session slots, and a
    /// call waiting on a stalled cluster is answered NFS4ERR_DELAY by the
    /// backend's own gate instead.
    fn is_remote_call(&self, p: &peek::Peeked) -> bool {
        !p.nfs4 && self.state.any_remote() && p.export.is_some_and(|id| self.state.is_remote(id))
    }

    /// Run one call as [`Svc::run_call`]; with `to`, under the deadline of
    /// remote calls. `None`: the watchdog answered it already (its answer
    /// is dropped, and it was counted as answered then).
    fn run_call_to(
        &self,
        to: Option<ReplyTo>,
        conn: &call::Connection,
        record: bytes::Bytes,
        ticket: Option<Ticket>,
    ) -> Option<Option<Reply>> {
        let registered = to.and_then(|to| {
            // Calls that move data (the ones that may block anyway) get longer.
            let patient = peek::peek(&record, self.cfg.writes_block).may_block;
            let wait = self.cfg.remote_reply_after.as_nanos() as u64;
            let wait = if patient { wait.saturating_mul(deadline::PATIENT_FACTOR) } else { wait };
            self.deadlines.register(to, &record, self.now_ns().saturating_add(wait))
        });
        let reply = self.run_call(conn, record, ticket);
        match registered {
            Some(r) => self.deadlines.finish(r).then_some(reply),
            None => Some(reply),
        }
    }

    /// The watchdog's NFS3ERR_JUKEBOX for a remote call past its deadline.
    fn answer_overdue(&self, o: deadline::Overdue) {
        tracing::debug!(xid = o.xid, proc_ = o.proc_, "a call still waits on its cluster: answered JUKEBOX");
        self.state.stats.count_remote_jukebox();
        let Some(reply) = crate::nfs3::jukebox_reply(o.xid, o.proc_) else { return };
        match o.to {
            ReplyTo::Tcp(c) => {
                let mut out = c.out.lock();
                if out.gone {
                    return;
                }
                // This is the call's answer: it counts as done once written.
                let w = c.write_locked(&mut out, Some(reply));
                self.after_output(&c, &mut out, w.replies_done, w.blocked);
            }
            // The call's thread counts it done when it returns.
            ReplyTo::Udp { socket, src } => self.send_udp_reply(socket, src, reply),
        }
    }

    /// Run one call; its reply (record-marked), if it has one.
    fn run_call(
        &self,
        conn: &call::Connection,
        record: bytes::Bytes,
        ticket: Option<Ticket>,
    ) -> Option<Reply> {
        let state = &self.state;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            dispatch::handle_record(state, conn, record, ticket.as_ref())
        }));
        drop(ticket);
        match result {
            Ok(r) => r,
            Err(_) => {
                tracing::error!(peer = %conn.peer.addr, "a call panicked; it gets no reply");
                None
            }
        }
    }

    fn arm_udp(&self, i: usize) {
        if !self.reading.load(Ordering::Acquire) {
            return;
        }
        let pool = &self.pools[i % self.pools.len()].epoll;
        if let Err(e) = pool.rearm(self.udp[i].as_raw_fd(), Interest::Read, token(i as u64, KIND_UDP)) {
            tracing::error!("cannot re-arm a UDP socket: {e}");
        }
    }

    /// Serve datagrams from UDP socket `i`: each is one call, answered with
    /// one datagram to its source. The socket is re-armed before a call
    /// that may block, so other threads take the next datagrams meanwhile.
    fn serve_udp(self: &Arc<Self>, i: usize) {
        let sock = &self.udp[i];
        let local_port = sock.local_addr().map_or(0, |a| a.port());
        let mut buf = vec![0u8; UDP_DATAGRAM_MAX];
        for n in 0..BATCH_MAX {
            if !self.reading.load(Ordering::Acquire) {
                return;
            }
            let (len, src) = match sock.recv_from(&mut buf) {
                Ok(x) => x,
                Err(e) => {
                    if e.kind() != io::ErrorKind::WouldBlock {
                        // An ICMP error from an earlier reply, usually.
                        tracing::debug!("UDP receive: {e}");
                    }
                    return self.arm_udp(i);
                }
            };
            self.last_call_ns.store(self.now_ns(), Ordering::Relaxed);
            self.state.stats.count_udp_call();
            let record = bytes::Bytes::copy_from_slice(&buf[..len]);
            let peeked = peek::peek(&record, self.cfg.writes_block);
            let may_block = self.may_block(&peeked);
            self.inflight_total.fetch_add(1, Ordering::AcqRel);
            if may_block {
                let remote = self.is_remote_call(&peeked);
                self.submit_slow(SlowJob::Udp { socket: i, src, local_port, record, remote });
            } else {
                let conn = call::Connection::new(Peer { addr: src, local_port, transport: Transport::Udp });
                let to = self.is_remote_call(&peeked).then_some(ReplyTo::Udp { socket: i, src });
                if let Some(Some(reply)) = self.run_call_to(to, &conn, record, None) {
                    self.send_udp_reply(i, src, reply);
                }
                self.inflight_total.fetch_sub(1, Ordering::AcqRel);
            }
            if n + 1 == BATCH_MAX {
                return self.arm_udp(i);
            }
        }
    }

    /// Answer a UDP call: one datagram, the message without TCP's record
    /// mark.
    fn send_udp_reply(&self, socket: usize, src: SocketAddr, mut reply: Reply) {
        let reply = reply.take_bytes();
        if let Err(e) = self.udp[socket].send_to(&reply[4..], src) {
            tracing::debug!(peer = %src, "UDP reply of {} bytes not sent: {e}", reply.len() - 4);
        }
    }

    /// Write `replies` (and count the calls that had none as answered).
    fn send_replies(&self, c: &Conn, replies: &mut Replies) {
        if replies.list.is_empty() && replies.none == 0 {
            return;
        }
        let mut out = c.out.lock();
        let w = c.write_locked(&mut out, replies.list.drain(..));
        let released = w.replies_done + replies.none;
        replies.none = 0;
        replies.bytes = 0;
        self.after_output(c, &mut out, released, w.blocked);
    }

    fn drain_output(&self, c: &Arc<Conn>) {
        let mut out = c.out.lock();
        if out.gone {
            return;
        }
        out.out_armed = false;
        let w = c.write_locked(&mut out, None);
        self.after_output(c, &mut out, w.replies_done, w.blocked);
    }

    /// Bookkeeping after replies were written: `released` calls are done;
    /// the socket is `blocked` with replies queued.
    fn after_output(&self, c: &Conn, out: &mut OutState, released: usize, blocked: bool) {
        out.inflight -= released;
        self.inflight_total.fetch_sub(released, Ordering::AcqRel);
        if out.gone {
            return;
        }
        if blocked && !out.out_armed {
            let pool = &self.pools[c.pool].epoll;
            let (fd, tok) = (c.out_fd.as_raw_fd(), token(c.id, KIND_OUT));
            let r = if out.out_registered {
                pool.rearm(fd, Interest::Write, tok)
            } else {
                pool.add(fd, Interest::Write, tok)
            };
            match r {
                Ok(()) => {
                    out.out_registered = true;
                    out.out_armed = true;
                }
                Err(e) => {
                    // Replies cannot be delivered: drop them and the connection.
                    tracing::warn!(peer = %c.info.peer.addr, "cannot watch for write room: {e}; closing");
                    out.read_closed = true;
                    out.broken = true;
                    let dropped = c.write_locked(out, None).replies_done;
                    out.inflight -= dropped;
                    self.inflight_total.fetch_sub(dropped, Ordering::AcqRel);
                }
            }
        }
        let resume =
            out.in_paused && !out.read_closed && out.inflight < self.state.config.max_requests_per_connection;
        if resume {
            out.in_paused = false;
        }
        if out.read_closed && out.inflight == 0 && Conn::out_idle(out) {
            self.close(c, out);
            return;
        }
        if resume {
            self.arm_input(c);
        }
    }

    /// The STARTTLS reply is in `replies`: write it, let go of the connection
    /// (it stays open) and hand it to the TLS relay. A connection with
    /// anything else going on is closed instead.
    fn start_tls(&self, c: &Arc<Conn>, mut replies: Replies) {
        self.send_replies(c, &mut replies);
        let Some(tx) = &self.tls_tx else { return self.input_ended(c) };
        let mut out = c.out.lock();
        if out.gone || out.broken || out.inflight > 0 || !Conn::out_idle(&out) {
            drop(out);
            tracing::info!(peer = %c.info.peer.addr, "STARTTLS with calls still in flight: closing");
            return self.input_ended(c);
        }
        if c.has_buffered_input() {
            // The client sent on before the STARTTLS reply (RFC 9289 says to
            // wait for it); what we read of it would be missing from TLS.
            drop(out);
            tracing::info!(peer = %c.info.peer.addr, "data after the TLS probe, before its reply: closing");
            return self.input_ended(c);
        }
        let stream = match c.stream.try_clone() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(peer = %c.info.peer.addr, "cannot hand the connection to TLS: {e}");
                return self.close(c, &mut out);
            }
        };
        self.forget(c, &mut out);
        if tx.send(crate::tls::Handover { stream, peer: c.info.peer }).is_err() {
            tracing::warn!(peer = %c.info.peer.addr, "the TLS relay has stopped: closing");
        }
    }

    /// No more input on `c`: close it once its calls are answered.
    fn input_ended(&self, c: &Conn) {
        let mut out = c.out.lock();
        out.read_closed = true;
        out.in_paused = false;
        if !out.gone && out.inflight == 0 && Conn::out_idle(&out) {
            self.close(c, &mut out);
        }
    }

    fn close(&self, c: &Conn, out: &mut OutState) {
        if out.gone {
            return;
        }
        let _ = c.stream.shutdown(std::net::Shutdown::Both);
        self.forget(c, out);
    }

    /// Stop serving `c` without touching the socket itself.
    fn forget(&self, c: &Conn, out: &mut OutState) {
        if out.gone {
            return;
        }
        out.gone = true;
        let pool = &self.pools[c.pool].epoll;
        pool.remove(c.stream.as_raw_fd());
        if out.out_registered {
            pool.remove(c.out_fd.as_raw_fd());
        }
        self.conns.write().remove(&c.id);
        self.host_closed(c.info.peer.addr.ip());
        self.state.stats.connection_closed();
        let left = self.conn_count.fetch_sub(1, Ordering::AcqRel) - 1;
        if left < self.state.config.max_connections && self.accepting.load(Ordering::Acquire) {
            let mut paused = self.listeners_paused.lock();
            for (i, p) in paused.iter_mut().enumerate() {
                if *p {
                    *p = false;
                    self.arm_listener(i);
                }
            }
        }
    }

    fn host_closed(&self, ip: std::net::IpAddr) {
        let mut hosts = self.per_host.lock();
        if let Some(n) = hosts.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                hosts.remove(&ip);
            }
        }
    }

    /// Log `what` about `host` once per kind of event (a flood would
    /// otherwise flood the log too).
    fn log_once(&self, host: std::net::IpAddr, kind: &'static str, what: impl FnOnce() -> String) {
        let mut logged = self.logged_hosts.lock();
        if logged.len() < LOGGED_HOSTS_MAX && logged.insert((host, kind)) {
            tracing::warn!("{} (logged once per host)", what());
        }
    }

    /// Close connections that hold a slot without using it: a record begun
    /// and not finished within `record_timeout` (a trickling sender), or
    /// nothing at all for `idle_timeout` with no call in flight. Their input
    /// is shut down; the thread that then reads the end closes them as any
    /// ended connection, after answering what is in flight.
    fn sweep_connections(&self) {
        let now = self.now_ns();
        let record_ns = self.state.config.record_timeout.as_nanos() as u64;
        let idle_ns = self.state.config.idle_timeout.as_nanos() as u64;
        let conns: Vec<Arc<Conn>> = self.conns.read().values().cloned().collect();
        for c in conns {
            let partial = c.partial_since_ns.load(Ordering::Acquire);
            let ip = c.info.peer.addr.ip();
            let (kind, what) = if partial != 0 && now.saturating_sub(partial) > record_ns {
                self.state.stats.connection_closed_slow();
                ("slow", "a call took longer than the record timeout to arrive (a slow or stalled sender)")
            } else if partial == 0
                && now.saturating_sub(c.activity_ns.load(Ordering::Acquire)) > idle_ns
                && c.out.lock().inflight == 0
            {
                self.state.stats.connection_closed_idle();
                ("idle", "idle for longer than the idle timeout")
            } else {
                continue;
            };
            self.log_once(ip, kind, || format!("closing connection from {}: {what}", c.info.peer.addr));
            // Nothing more is read: the reader sees the end and closes it.
            c.partial_since_ns.store(0, Ordering::Release);
            c.activity_ns.store(u64::MAX / 2, Ordering::Release);
            let _ = c.stream.shutdown(std::net::Shutdown::Read);
        }
    }

    // ----- shutdown ---------------------------------------------------

    /// Stop accepting, drain, stop the threads (see the module docs).
    /// Blocks until every thread has ended.
    pub(crate) fn shutdown(&self) {
        self.accepting.store(false, Ordering::Release);
        for l in &self.listeners {
            self.pools[0].epoll.remove(l.as_raw_fd());
            // Stop listening now, not when the last reference to the service
            // goes: a client connecting during the drain is refused instead of
            // waiting in the backlog for an accept that never comes.
            // SAFETY: shutdown takes a descriptor we own and an integer.
            unsafe { libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR) };
        }
        let started = Instant::now();
        loop {
            let last = Duration::from_nanos(self.last_call_ns.load(Ordering::Relaxed));
            let quiet = self.epoch.elapsed().saturating_sub(last);
            if quiet >= DRAIN_IDLE || started.elapsed() >= DRAIN_MAX {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.reading.store(false, Ordering::Release);
        for (i, u) in self.udp.iter().enumerate() {
            self.pools[i % self.pools.len()].epoll.remove(u.as_raw_fd());
        }
        // Connections waiting for input get none now; the others end when
        // their thread tries to re-arm them.
        let conns: Vec<Arc<Conn>> = self.conns.read().values().cloned().collect();
        for c in conns {
            self.input_ended(&c);
        }
        let deadline = Instant::now() + DRAIN_MAX * 2;
        while self.inflight_total.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if self.inflight_total.load(Ordering::Acquire) > 0 {
            tracing::warn!(
                "{} call(s) or replies still pending at shutdown; closing their connections",
                self.inflight_total.load(Ordering::Acquire)
            );
        }
        self.stopped.store(true, Ordering::Release);
        self.slow.stop();
        self.stop.raise();
        for p in &self.pools {
            p.sched.stop();
        }
        let mut alive = self.alive.lock();
        while *alive > 0 {
            self.all_gone.wait(&mut alive);
        }
        drop(alive);
        self.conns.write().clear();
    }
}

impl crate::nfs4::BackChannel for Svc {
    fn send(&self, conn: u64, record: bytes::Bytes) -> bool {
        self.send_call(conn, record)
    }

    fn alive(&self, conn: u64) -> bool {
        self.conn(conn).is_some_and(|c| {
            let out = c.out.lock();
            !out.gone && !out.broken && !out.read_closed
        })
    }
}
