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
//!   (`Outcome`); what a call carries: its READ/WRITE order ticket
//!   (`call/order`), what TLS proved (`call/tls_peer`), the reply record
//!   (`reply`: `Reply`, its `Piece`s).
//! - `server_state`: what every call shares (`ServerState`); `config`:
//!   [`ServerConfig`]; `export`: [`ExportSpec`] and the shared export set.
//! - `nfs3`: one small handler per NFSv3 procedure, calling the export's
//!   [`eagernfs_vfs::Backend`]; `convert` maps backend values to wire types.
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
//!
//! Each file uses only what stands below it (docs/ARCHITECTURE.md,
//! "Layering"; `scripts/check-cycles.py` checks it): this file starts and
//! reconfigures the server, the service threads call dispatch, dispatch the
//! programs, the programs `call`, and a call carries `ServerState`.

pub mod cluster;
pub mod exports;

mod call;
mod config;
mod convert;
mod dispatch;
mod drc;
mod export;
mod handle;
mod mount;
mod nfs3;
mod nfs4;
mod nlm;
mod portmap;
mod records;
mod reply;
pub mod rpcbind;
mod server_state;
#[doc(hidden)]
pub mod sim;
pub mod stats;
mod svc;
pub mod tls;
mod trace;

pub use config::{physical_memory_bytes, ServerConfig, SpliceReads};
pub use export::{export_id_for_path, ExportSpec};
pub use svc::{PoolMode, SvcConfig};
pub use trace::{IoEvent, IoKind};

pub(crate) use export::SharedExports;
pub(crate) use server_state::ServerState;

use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use drc::drc_entries_for_memory;
pub use nfs4::{ClientsChanged, Nfs4Config};
pub use nlm::{HostsChanged, LockConfig, LockHost};
pub use stats::{DrcCounts, Stats, StatsSnapshot};

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
