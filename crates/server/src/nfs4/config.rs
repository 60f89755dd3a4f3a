//! How the NFSv4.1/4.2 service behaves ([`Nfs4Config`]): the operator's choices and bounds,
//! which the binary fills from flags and the state directory.

use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;

/// Writes the owner ids of every client that may reclaim state after a
/// restart, whenever that set changes (so it survives one): returns once
/// they are on stable storage, or why they are not. Called on a thread of
/// the server's own that acts as the process (never a service thread, which
/// acts as the client it last served), one call at a time, the newest set
/// last; a client finishing its registration (RECLAIM_COMPLETE) is answered
/// only once a set that holds it is written.
pub type ClientsChanged = Arc<dyn Fn(&[Bytes]) -> Result<(), String> + Send + Sync>;

/// How the NFSv4.1/4.2 service behaves. Every field is a bound or a choice
/// the operator makes; the binary fills it from flags and the state directory.
#[derive(Clone)]
pub struct Nfs4Config {
    /// Serve NFSv4.1 and NFSv4.2 at all.
    pub enabled: bool,
    /// How long a client's state lasts without a call (`lease_time`).
    pub lease: Duration,
    /// After a restart with clients that held state, only their reclaims
    /// are granted for this long (or until each said RECLAIM_COMPLETE).
    pub grace_period: Duration,
    /// Different for every start of the server: client ids, session ids and
    /// stateids carry it, so those of an earlier start are recognised.
    pub boot_epoch: u32,
    /// Owner ids of the clients that held state when the server last
    /// stopped: they, and only they, may reclaim in the grace period.
    pub previous_clients: Vec<Bytes>,
    /// Persist the set of clients that may reclaim (durably; see [`ClientsChanged`]).
    pub on_clients_changed: Option<ClientsChanged>,
    /// Most client records kept at once; beyond it, clients whose lease
    /// ran out go first, and then EXCHANGE_ID answers NFS4ERR_DELAY.
    pub max_clients: usize,
    /// Most sessions one client may hold.
    pub max_sessions_per_client: usize,
    /// Most slots (requests in flight) in one session.
    pub max_slots: u32,
    /// Largest reply one slot caches for a retry.
    pub max_cached_reply_bytes: u32,
    /// Most operations in one COMPOUND.
    pub max_ops: u32,
    /// Most stateids (opens, locks, delegations) over all clients; beyond
    /// it, lapsed clients' state goes first, then OPEN and LOCK answer
    /// NFS4ERR_DELAY.
    pub max_stateids: usize,
    /// Hand out delegations to clients with a working back channel.
    pub delegations: bool,
    /// Hand out write delegations too (with `delegations`): a client that
    /// alone has a file open for writing then writes, and changes its size
    /// and times, without telling the server until it is asked.
    pub write_delegations: bool,
    /// The NFSv4 id domain: an owner `name@domain` with this domain is
    /// looked up in the password and group databases (numeric owners, and
    /// `number@any-domain`, are always accepted; owners are sent as numbers).
    pub id_domain: String,
}

impl Default for Nfs4Config {
    fn default() -> Self {
        Nfs4Config {
            enabled: true,
            lease: Duration::from_secs(90),
            grace_period: Duration::from_secs(90),
            boot_epoch: 1,
            previous_clients: Vec::new(),
            on_clients_changed: None,
            max_clients: 64 * 1024,
            max_sessions_per_client: 16,
            max_slots: 128,
            max_cached_reply_bytes: 8 * 1024,
            max_ops: 64,
            max_stateids: 1 << 20,
            delegations: true,
            write_delegations: true,
            id_domain: "localdomain".into(),
        }
    }
}

impl std::fmt::Debug for Nfs4Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nfs4Config")
            .field("enabled", &self.enabled)
            .field("lease", &self.lease)
            .field("grace_period", &self.grace_period)
            .field("boot_epoch", &self.boot_epoch)
            .field("previous_clients", &self.previous_clients.len())
            .field("max_clients", &self.max_clients)
            .field("max_slots", &self.max_slots)
            .field("delegations", &self.delegations)
            .field("write_delegations", &self.write_delegations)
            .field("id_domain", &self.id_domain)
            .finish()
    }
}
