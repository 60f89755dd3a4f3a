//! The eagernfs NFSv3 and NFSv4.1/4.2 server: transports, dispatch, exports and access control.
//!
//! # Layout
//! - [`svc`](crate::svc): the service threads (knfsd's model): a thread
//!   takes a ready socket, reads one call, runs it and sends the reply;
//!   pools that grow under load; bounded connections and calls in flight;
//!   READ/WRITE of a file kept in arrival order.
//! - `dispatch`: one RPC record in, one reply record out: RPC-level checks
//!   (version, program, procedure, authentication), then the program's
//!   procedure table.
//! - `call`: what every program handler is given (`Call`: the connection,
//!   the caller, the exports; `resolve` of a file handle) and answers
//!   (`Outcome`); `reply`: the reply record (`Reply`, its `Piece`s).
//! - `nfs3`: one small handler per NFSv3 procedure, calling the export's
//!   [`Backend`]; `convert` maps backend values to wire types.
//! - `nfs4`: NFSv4.1 and 4.2 (COMPOUND, sessions and their reply caches,
//!   the pseudo-root, opens, locks in NLM's table, read delegations and the
//!   back channel), on the same port and exports.
//! - `mount`, `portmap`: the MOUNT (v1, v3) and portmap (v2) programs,
//!   served on the same port as NFS so clients need no rpcbind.
//! - `nlm`: byte-range locks (NLM v4) and the status monitor (NSM v1), on
//!   the same port: lock table, grace period, GRANTED and SM_NOTIFY callbacks.
//! - `records`: state kept across restarts (the NFSv4 clients that may
//!   reclaim), written by a thread of its own as the process itself, newest
//!   last, concurrent changes sharing one write.
//! - `handle`: wire file handles = export id + backend handle.
//! - [`exports`]: the exports(5) configuration and client matching.
//! - `stats`: per-procedure call counters (the procedure tables name them).
//!
//! A request's path: a service thread reads a record → `dispatch::handle_record`
//! → program handler → backend → reply encoded into one buffer → written to
//! the socket by the same thread.

pub mod cluster;
pub mod exports;

mod call;
mod convert;
mod dispatch;
mod drc;
mod handle;
mod mount;
mod nfs3;
mod nfs4;
mod nlm;
mod portmap;
mod records;
mod reply;
pub mod rpcbind;
#[doc(hidden)]
pub mod sim;
pub mod stats;
mod svc;
pub mod tls;
mod trace;

pub use svc::{PoolMode, SvcConfig};
pub use trace::{IoEvent, IoKind};

use eagernfs_vfs::Backend;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use drc::drc_entries_for_memory;
pub use nfs4::{ClientsChanged, Nfs4Config};
pub use nlm::{HostsChanged, LockConfig, LockHost};
pub use stats::{DrcCounts, Stats, StatsSnapshot};

/// Physical memory, for defaults sized from it (0 if unknown).
pub fn physical_memory_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    if pages <= 0 || page <= 0 {
        return 0;
    }
    pages as u64 * page as u64
}

/// Limits and behaviour of the server. Every field is a bound or a choice the
/// operator makes; the binary builds this from flags and files.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Most simultaneous TCP connections (a mount storm of 2000 clients fits).
    pub max_connections: usize,
    /// Most simultaneous TCP connections from one client address: one host
    /// (or a flood from it) cannot take every connection. Further ones are
    /// closed at once (logged once per host, counted in stats).
    pub max_connections_per_host: usize,
    /// A record (one call) that has begun arriving must be whole within
    /// this, or the connection is closed: a sender trickling bytes
    /// (slowloris) cannot hold a connection and its buffer for ever.
    pub record_timeout: std::time::Duration,
    /// A connection with no call for this long and nothing in flight is
    /// closed (knfsd uses 6 minutes); clients reconnect when they need to.
    pub idle_timeout: std::time::Duration,
    /// Most calls of one connection executing at once; further records wait
    /// unread, which pushes back on the client through TCP.
    pub max_requests_per_connection: usize,
    /// Largest RPC record accepted; must exceed the largest WRITE (wtmax) plus headers.
    pub max_record_bytes: usize,
    /// Largest READ payload returned and advertised (FSINFO rtmax).
    pub read_max_bytes: u32,
    /// Largest WRITE payload accepted and advertised (FSINFO wtmax).
    pub write_max_bytes: u32,
    /// Replies of non-idempotent calls remembered for retransmissions
    /// (RENAME, REMOVE, CREATE, …). Should cover the calls of a client's
    /// retry time (about 1.1 s over UDP, a minute over TCP, where losses
    /// are rare) at the highest call rate. Default: from the machine's
    /// memory ([`drc_entries_for_memory`]).
    pub drc_entries: usize,
    /// Record the offsets of READ/WRITE in backend order, keeping at most
    /// this many (`None`: off). See [`Server::io_trace`].
    pub io_trace_max_events: Option<usize>,
    /// Service threads: pools and how many.
    pub svc: SvcConfig,
    /// Also serve NFS, MOUNT and portmap over UDP on every listening
    /// address (same port). Off by default, as on Linux since 5.6: UDP
    /// lets a spoofed source address get replies, and large transfers over
    /// it lose whole calls to one dropped fragment. Transfers are capped at
    /// 32 KiB over UDP; the duplicate reply cache covers retransmissions.
    pub udp: bool,
    /// Byte-range locks (NLM v4 and NSM on the same port).
    pub locks: nlm::LockConfig,
    /// NFSv4.1 and NFSv4.2 (version 4 of the NFS program, same port).
    pub nfs4: nfs4::Nfs4Config,
    /// RPC-with-TLS (RFC 9289): clients that ask get TLS 1.3 with this
    /// configuration ([`tls::server_config`]). `None`: probes are answered
    /// without STARTTLS, and exports that need TLS are unreachable.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// For which clients large READs over TCP are answered by splicing the
    /// file's pages into the socket (no copy through user space) when the
    /// backend can ([`eagernfs_vfs::Backend::read_spliced`]).
    pub splice_reads: SpliceReads,
    /// A head of a cluster answers only while its lease holds (see
    /// [`cluster::Lease`]): NFSv3 calls get NFS3ERR_JUKEBOX, others no reply.
    pub lease: Option<Arc<cluster::Lease>>,
}

/// Which clients get READ data spliced from the page cache into the socket
/// rather than copied through a buffer (READs of 32 KiB and more, over TCP).
///
/// Splicing saves the server both of its copies, and to a client on another
/// host the pages go to the network card untouched. A client on this host (a
/// loopback address: a mount beside its server) copies the bytes out of the
/// socket on this machine's CPUs whichever way they were sent; spliced, its
/// copy is the first touch of pages fresh from the disk, a cost that copying
/// leaves with the server. Measured through `eagernfs mount` on a 2-CPU VM,
/// mount on CPU 0, server on CPU 1 (scripts/bench-dd-read.sh): copied READs
/// read 1 GiB faster than spliced ones cold and warm, and a cold 1 GiB stream
/// cost the client 0.15-0.18 s of CPU copied against 0.65-1.29 s spliced.
/// So by default only clients on other hosts get spliced replies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SpliceReads {
    /// Copy every READ through a buffer.
    Never,
    /// Splice for clients on other hosts; copy for loopback clients.
    #[default]
    Remote,
    /// Splice for every client, also on this host.
    Always,
}

impl SpliceReads {
    /// Whether a READ from `peer` may be spliced.
    pub fn for_peer(self, peer: std::net::IpAddr) -> bool {
        match self {
            SpliceReads::Never => false,
            SpliceReads::Always => true,
            SpliceReads::Remote => !peer.to_canonical().is_loopback(),
        }
    }
}

impl std::str::FromStr for SpliceReads {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "never" => Ok(SpliceReads::Never),
            "remote" => Ok(SpliceReads::Remote),
            "always" => Ok(SpliceReads::Always),
            _ => Err(format!("`{s}` is not a splice mode: use never, remote or always")),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_connections: 4096,
            max_connections_per_host: 1024,
            record_timeout: std::time::Duration::from_secs(30),
            idle_timeout: std::time::Duration::from_secs(360),
            max_requests_per_connection: 128,
            max_record_bytes: (1 << 20) + 64 * 1024,
            read_max_bytes: 1 << 20,
            write_max_bytes: 1 << 20,
            drc_entries: drc_entries_for_memory(physical_memory_bytes()),
            io_trace_max_events: None,
            svc: SvcConfig::default(),
            udp: false,
            locks: nlm::LockConfig::default(),
            nfs4: nfs4::Nfs4Config::default(),
            tls: None,
            splice_reads: SpliceReads::default(),
            lease: None,
        }
    }
}

/// One exported tree.
pub struct ExportSpec {
    /// Stable identity written into every file handle of this export; must
    /// not change across restarts (from `fsid=` or a hash of the path).
    pub id: u32,
    /// The paths clients may mount it by (the first is the canonical one).
    pub mount_paths: Vec<PathBuf>,
    /// Who may mount it and with which options.
    pub access: exports::Export,
    /// The file system behind it.
    pub backend: Arc<dyn Backend>,
}

impl std::fmt::Debug for ExportSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportSpec").field("id", &self.id).field("mount_paths", &self.mount_paths).finish()
    }
}

/// Derive a stable export id from its path (used when no `fsid=` is given).
pub fn export_id_for_path(path: &std::path::Path) -> u32 {
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let mut h: u32 = 0x811c_9dc5;
    for b in path.as_os_str().as_encoded_bytes() {
        h ^= *b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The exports, replaced whole by [`ServerHandle::replace_exports`]; calls take
/// the set of their start.
pub(crate) type SharedExports = Arc<parking_lot::RwLock<Arc<Vec<ExportSpec>>>>;

/// State shared by every connection.
pub(crate) struct ServerState {
    pub(crate) config: ServerConfig,
    /// The exports now; replaced whole by a reload, so each call sees one
    /// consistent configuration (it takes the `Arc` once, at its start).
    pub(crate) exports: SharedExports,
    pub(crate) stats: Arc<Stats>,
    /// Replies of non-idempotent calls, for retransmissions.
    pub(crate) drc: drc::Drc,
    /// READ/WRITE order as the backend saw it, when asked for.
    pub(crate) io_trace: Option<trace::IoTrace>,
    /// (client address, path) pairs recorded by MNT for DUMP.
    pub(crate) mounts: parking_lot::Mutex<std::collections::BTreeSet<(bytes::Bytes, bytes::Bytes)>>,
    /// The lock manager, unless locks are off.
    pub(crate) locks: Option<nlm::LockManager>,
    /// Some export's backend waits on other machines ([`Backend::remote`]):
    /// lets the hot path skip looking for them when none does.
    any_remote: std::sync::atomic::AtomicBool,
    /// The NFSv4.1/4.2 service, unless it is off.
    pub(crate) nfs4: Option<nfs4::Nfs4>,
}

impl ServerState {
    fn new(config: ServerConfig, exports: Vec<ExportSpec>) -> ServerState {
        let stats = Arc::new(Stats::default());
        // One lock table for NLM and NFSv4, so their clients exclude each other.
        let lock_table = Arc::new(nlm::locks::LockTable::new(config.locks.max_locks, Some(stats.clone())));
        let any_remote = exports.iter().any(|e| e.backend.remote());
        // Shared with NFSv4, which finds a file's lock mirror when a client's locks go.
        let exports: SharedExports = Arc::new(parking_lot::RwLock::new(Arc::new(exports)));
        ServerState {
            drc: drc::Drc::new(config.drc_entries, stats.clone()),
            io_trace: config.io_trace_max_events.map(trace::IoTrace::new),
            locks: config
                .locks
                .enabled
                .then(|| nlm::LockManager::new(&config.locks, lock_table.clone(), stats.clone())),
            nfs4: config
                .nfs4
                .enabled
                .then(|| nfs4::Nfs4::new(config.nfs4.clone(), lock_table, exports.clone(), stats.clone())),
            config,
            any_remote: std::sync::atomic::AtomicBool::new(any_remote),
            exports,
            stats,
            mounts: Default::default(),
        }
    }

    /// Whether some export's backend waits on other machines.
    pub(crate) fn any_remote(&self) -> bool {
        self.any_remote.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether export `id`'s backend waits on other machines.
    pub(crate) fn is_remote(&self, id: u32) -> bool {
        self.any_remote() && self.exports().iter().any(|e| e.id == id && e.backend.remote())
    }

    /// The exports a call starting now uses.
    pub(crate) fn exports(&self) -> Arc<Vec<ExportSpec>> {
        self.exports.read().clone()
    }
}

/// Two exports may not share an id (the first bytes of every file handle).
fn check_export_ids(exports: &[ExportSpec]) -> Result<(), ServerError> {
    if exports.is_empty() {
        return Err(ServerError::NoExports);
    }
    for (i, e) in exports.iter().enumerate() {
        if exports[..i].iter().any(|o| o.id == e.id) {
            return Err(ServerError::DuplicateExportId(e.id));
        }
    }
    Ok(())
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("two exports share the id {0:#x}; give one an explicit fsid= option")]
    DuplicateExportId(u32),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("no exports configured: add a line to the exports file, e.g. `/srv/nfs 192.168.1.0/24(rw)`, or give a directory to serve")]
    NoExports,
}

/// An NFSv3 + MOUNT + portmap server bound to its listening sockets.
pub struct Server {
    state: Arc<ServerState>,
    listeners: Vec<TcpListener>,
    /// UDP sockets (several per address, `SO_REUSEPORT`), when UDP is on.
    udp: Vec<std::net::UdpSocket>,
}

impl Server {
    /// Check the configuration and bind every address in `listen`.
    pub async fn bind(
        config: ServerConfig,
        exports: Vec<ExportSpec>,
        listen: &[SocketAddr],
    ) -> Result<Server, ServerError> {
        check_export_ids(&exports)?;
        let mut listeners = Vec::new();
        let mut udp = Vec::new();
        for addr in listen {
            let l = bind_reuseaddr(*addr).map_err(|source| ServerError::Bind { addr: *addr, source })?;
            if config.udp {
                // The same port as TCP (resolved if it was 0); one socket
                // per CPU so receiving spreads (Banks: one UDP socket is a
                // bottleneck).
                let port_addr = l.local_addr().map_err(|source| ServerError::Bind { addr: *addr, source })?;
                for _ in 0..udp_sockets_per_address() {
                    let u = bind_udp(port_addr)
                        .map_err(|source| ServerError::Bind { addr: port_addr, source })?;
                    udp.push(u);
                }
            }
            listeners.push(l);
        }
        let state = Arc::new(ServerState::new(config, exports));
        Ok(Server { state, listeners, udp })
    }

    /// The addresses actually bound (port 0 resolved).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.iter().filter_map(|l| l.local_addr().ok()).collect()
    }

    /// Something that changes the exports of the running server (reload).
    pub fn handle(&self) -> ServerHandle {
        ServerHandle(self.state.clone())
    }

    /// Whether UDP is served (on the same ports as TCP).
    pub fn serves_udp(&self) -> bool {
        !self.udp.is_empty()
    }

    /// Per-procedure call counters.
    pub fn stats(&self) -> Arc<Stats> {
        self.state.stats.clone()
    }

    /// A handle to read the I/O trace after [`Server::run`] returns (empty
    /// unless `io_trace_max_events` was set).
    pub fn io_trace(&self) -> IoTraceReader {
        IoTraceReader(self.state.clone())
    }

    /// Serve until `shutdown` is cancelled, then drain connections and flush
    /// every export to stable storage.
    pub async fn run(self, shutdown: CancellationToken) -> std::io::Result<()> {
        let listeners =
            self.listeners.into_iter().map(|l| l.into_std()).collect::<std::io::Result<Vec<_>>>()?;
        // RPC-with-TLS: handshakes and relays run on threads of their own.
        let (tls_tx, tls_rx) = tokio::sync::mpsc::unbounded_channel::<tls::Handover>();
        let tls_config = self.state.config.tls.clone();
        let svc = svc::Svc::start(
            self.state.clone(),
            self.state.config.svc.clone(),
            listeners,
            self.udp,
            tls_config.is_some().then_some(tls_tx),
        )?;
        let tls_relay = match tls_config {
            Some(config) => Some(start_tls_relay(config, tls_rx, Arc::downgrade(&svc))?),
            None => None,
        };
        let locks = &self.state.config.locks;
        if locks.enabled && locks.callbacks {
            nlm::notify_restart(locks.previous_hosts.clone(), locks.nsm_state);
        }
        shutdown.cancelled().await;
        let state = self.state.clone();
        tokio::task::spawn_blocking(move || {
            svc.shutdown();
            for e in state.exports().iter() {
                if let Err(err) = e.backend.sync_all() {
                    tracing::error!(export = ?e.mount_paths, "sync at shutdown failed: {err}");
                }
            }
        })
        .await
        .map_err(std::io::Error::other)?;
        drop(tls_relay);
        Ok(())
    }
}

/// The TLS relay: a runtime of its own (one thread per CPU) taking the connections the service
/// threads hand over. It stops when the service does (the channel closes).
fn start_tls_relay(
    config: Arc<rustls::ServerConfig>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<tls::Handover>,
    svc: std::sync::Weak<svc::Svc>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("eagernfs-tls")
        .enable_all()
        .build()?;
    std::thread::Builder::new().name("eagernfs-tls-accept".into()).spawn(move || {
        rt.block_on(async move {
            while let Some(h) = rx.recv().await {
                let (config, svc) = (config.clone(), svc.clone());
                tokio::spawn(tls::serve(config, h, move |stream, peer, tls| {
                    if let Some(svc) = svc.upgrade() {
                        svc.adopt(stream, peer, tls);
                    }
                }));
            }
        });
    })
}

/// Reconfigures a running server.
#[derive(Clone)]
pub struct ServerHandle(Arc<ServerState>);

impl ServerHandle {
    /// The exports in use.
    pub fn exports(&self) -> Arc<Vec<ExportSpec>> {
        self.0.exports()
    }

    /// Move the NFSv4 service's clock on (leases, grace periods and recall
    /// deadlines), so tests need not wait them out.
    #[doc(hidden)]
    pub fn advance_nfs4_clock(&self, by: std::time::Duration) {
        if let Some(v4) = &self.0.nfs4 {
            v4.clock.advance(by);
        }
    }

    /// Serve `exports` from the next call on (calls already running finish
    /// with the old set). Handles of an export that is gone answer
    /// NFS3ERR_STALE; a changed client list or option applies to the next
    /// call. Fails, changing nothing, if the set is empty or two exports
    /// share an id.
    pub fn replace_exports(&self, exports: Vec<ExportSpec>) -> Result<(), ServerError> {
        check_export_ids(&exports)?;
        // Raised before calls can see a remote export, never lowered (a call
        // may still be running on one that left).
        if exports.iter().any(|e| e.backend.remote()) {
            self.0.any_remote.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        *self.0.exports.write() = Arc::new(exports);
        Ok(())
    }
}

/// Reads the I/O trace of a server (see [`ServerConfig::io_trace_max_events`]).
pub struct IoTraceReader(Arc<ServerState>);

impl IoTraceReader {
    /// Every recorded READ/WRITE, in the order the backend ran them.
    pub fn events(&self) -> Vec<IoEvent> {
        self.0.io_trace.as_ref().map(|t| t.events()).unwrap_or_default()
    }
}

/// Bind with SO_REUSEADDR so a restarted server can take its port back at
/// once while old connections sit in TIME_WAIT.
fn bind_reuseaddr(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let sock =
        if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    sock.set_reuseaddr(true)?;
    sock.bind(addr)?;
    sock.listen(1024)
}

/// UDP sockets per listening address: one per CPU this process may use
/// (the kernel spreads datagrams over `SO_REUSEPORT` sockets by source).
fn udp_sockets_per_address() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(8)
}

/// Receive buffer asked for each UDP socket: a burst of calls waits here
/// instead of being dropped (the kernel caps it at net.core.rmem_max).
const UDP_RECV_BUFFER_BYTES: usize = 4 << 20;

fn bind_udp(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    let _ = sock.set_recv_buffer_size(UDP_RECV_BUFFER_BYTES);
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    Ok(sock.into())
}

#[cfg(test)]
mod tests {
    use super::SpliceReads;
    use std::net::IpAddr;

    #[test]
    fn remote_splicing_copies_for_loopback_clients_only() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for local in ["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"] {
            assert!(!SpliceReads::Remote.for_peer(ip(local)), "{local} is this host");
            assert!(SpliceReads::Always.for_peer(ip(local)));
        }
        for remote in ["10.0.0.7", "192.168.1.2", "2001:db8::1", "::ffff:10.1.2.3"] {
            assert!(SpliceReads::Remote.for_peer(ip(remote)), "{remote} is another host");
            assert!(!SpliceReads::Never.for_peer(ip(remote)));
        }
        assert_eq!("remote".parse(), Ok(SpliceReads::Remote));
        assert_eq!(SpliceReads::default(), SpliceReads::Remote);
        let e = "sometimes".parse::<SpliceReads>().unwrap_err();
        assert!(e.contains("never, remote or always"), "{e}");
    }
}
