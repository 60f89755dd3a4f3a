//! NFSv4.1 and NFSv4.2 (RFC 8881, RFC 7862): version 4 of the NFS program,
//! on the same port and the same exports as NFSv3.
//!
//! A call is a COMPOUND of operations run in order against a current (and
//! saved) file handle until one fails. Sessions (SEQUENCE first in every
//! COMPOUND) give each request a slot whose last reply is kept, so a retry
//! gets that reply instead of a second execution: exactly once, also over a
//! new connection. Opens, byte-range locks and delegations are state the
//! server keeps per client, named by stateids and kept alive by the
//! client's lease.
//!
//! # Layout
//! - this file: the service's shared state ([`Nfs4`]), below `Call`: it
//!   holds the tables below (`config`: [`Nfs4Config`]).
//! - `compound`: the program's entry point and the COMPOUND loop: position
//!   rules from the operation table, current/saved file handle and stateid,
//!   reply size limits, the slot's reply cache, one small handler per
//!   operation; `ctx`: what one COMPOUND's operations share, `convert`:
//!   their common helpers.
//! - `session`: client records, sessions and their slot tables, leases and
//!   the grace period; `session/ops`: EXCHANGE_ID, CREATE_SESSION,
//!   SEQUENCE, BIND_CONN_TO_SESSION, DESTROY_*; `session/expiry`: a
//!   client's lease and its end.
//! - `fh`, `pseudo`: file handles and the pseudo-root that joins the
//!   exports (each its own fsid), with the same access rules as NFSv3.
//! - `attrs`: backend attributes to `fattr4` and back; owners as numbers or
//!   `name@domain`.
//! - `fsops`: the namespace and attribute operations; `io`: READ, WRITE,
//!   COMMIT and the NFSv4.2 data operations.
//! - `state`: opens with share reservations, byte-range locks on the lock
//!   table NLM uses (so NFSv3 and NFSv4 clients exclude each other), and
//!   read and write delegations (the table; `state/ops`: the operations;
//!   `state/deleg`: CB_GETATTR for others' GETATTRs, delegated timestamps);
//!   `callback`: the back channel (CB_RECALL; `callback/service`: its thread).
//!
//! The tables and the shared state stand below `Call`; the operations above
//! it, each on what it uses (docs/ARCHITECTURE.md, "Layering").

mod attrs;
mod callback;
mod compound;
mod config;
mod convert;
mod ctx;
mod fh;
mod fsops;
mod io;
mod pseudo;
mod session;
mod state;

pub(crate) use callback::BackChannel;
pub(crate) use compound::dispatch;
pub use config::{ClientsChanged, Nfs4Config};
pub(crate) use fh::wire_of;

use crate::nlm::locks::LockTable;
use crate::nlm::Grant;
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The service's clock: monotonic nanoseconds, which tests may move on
/// (leases, grace and recall deadlines are all measured with it).
pub(crate) struct Clock {
    base: Instant,
    offset_ns: AtomicU64,
}

impl Clock {
    fn new() -> Clock {
        Clock { base: Instant::now(), offset_ns: AtomicU64::new(0) }
    }

    /// Nanoseconds since the service started.
    pub(crate) fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64 + self.offset_ns.load(Ordering::Relaxed)
    }

    /// Move time on by `d` (tests).
    pub(crate) fn advance(&self, d: Duration) {
        self.offset_ns.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }
}

/// The NFSv4 service's state, shared by every call.
pub(crate) struct Nfs4 {
    pub(crate) config: Nfs4Config,
    pub(crate) clock: Clock,
    /// Wall-clock time of the start (pseudo directories' times).
    pub(crate) started: eagernfs_vfs::Timestamp,
    /// Clients and sessions.
    pub(crate) sessions: session::Sessions,
    /// Opens, locks and delegations.
    pub(crate) state: state::StateTable,
    /// The pseudo-root, rebuilt when the exports change.
    pseudo: pseudo::Cache,
    /// Where callbacks go out (the service threads), once they run.
    pub(crate) back: callback::Callbacks,
    /// This server's name for EXCHANGE_ID (`so_major_id`, scope).
    pub(crate) server_name: Bytes,
}

impl Nfs4 {
    pub(crate) fn new(
        config: Nfs4Config,
        locks: Arc<LockTable<Grant>>,
        exports: crate::SharedExports,
        stats: Arc<crate::Stats>,
    ) -> Nfs4 {
        let clock = Clock::new();
        let now = clock.now_ns();
        let started = {
            let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            eagernfs_vfs::Timestamp { secs: d.as_secs() as i64, nsecs: d.subsec_nanos() }
        };
        Nfs4 {
            sessions: session::Sessions::new(&config, now, stats.clone()),
            state: state::StateTable::new(locks, exports, config.max_stateids, stats.clone()),
            pseudo: Default::default(),
            back: callback::Callbacks::new(stats),
            server_name: Bytes::from(crate::nlm::hostname().into_bytes()),
            started,
            clock,
            config,
        }
    }

    /// Whether NFSv4 clients may still reclaim state from before a restart:
    /// NLM grants no new locks then either, so a lock an NFSv4 client held
    /// cannot go to an NFSv3 client while the first is reclaiming it.
    pub(crate) fn in_grace(&self) -> bool {
        self.sessions.in_grace(self.clock.now_ns())
    }

    /// Lease time in seconds, as `lease_time` reports it.
    pub(crate) fn lease_secs(&self) -> u32 {
        self.config.lease.as_secs().clamp(1, u32::MAX as u64) as u32
    }
}
