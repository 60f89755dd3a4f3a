//! What every call shares ([`ServerState`]): the configuration, the exports, statistics, the
//! reply cache and each program's own state (the lock manager, the NFSv4 service). Calls carry
//! it to the programs; it stands below them, and below the service threads that serve calls.

use crate::{drc, nfs4, nlm, trace, ExportSpec, ServerConfig, SharedExports, Stats};
use std::sync::Arc;

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
    /// Some export's backend waits on other machines ([`eagernfs_vfs::Backend::remote`]):
    /// lets the hot path skip looking for them when none does.
    pub(crate) any_remote: std::sync::atomic::AtomicBool,
    /// The NFSv4.1/4.2 service, unless it is off.
    pub(crate) nfs4: Option<nfs4::Nfs4>,
}

impl ServerState {
    pub(crate) fn new(config: ServerConfig, exports: Vec<ExportSpec>) -> ServerState {
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
