//! The server's statistics: what `eagernfs stat`, `/metrics` and the status
//! page show, and what tests assert.
//!
//! Calls are counted at dispatch, after the RPC-level checks pass, so a
//! count means the procedure ran. Everything a call touches is a relaxed
//! atomic (counters, latency histogram buckets) except the per-client table
//! and the ring of recent errors, each a short critical section.
//! [`Stats::snapshot`] copies it all into a plain, serializable
//! [`StatsSnapshot`].
//!
//! # Layout
//! - `histogram`: lock-free latency histograms (percentiles, Prometheus
//!   buckets).
//! - `clients`: calls and bytes per client host, bounded.

mod clients;
mod histogram;

pub use clients::ClientSnapshot;
pub use histogram::{HistogramSnapshot, PROM_BOUNDS_S};

use clients::ClientTable;
use eagernfs_proto::nfs3::{Nfsstat3, NFS3_PROCEDURES};
use histogram::Histogram;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Recent errors kept for the status page.
const RECENT_ERRORS_MAX: usize = 64;

/// One failed call, for the status page.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ErrorEvent {
    /// When (ms since the Unix epoch).
    pub at_unix_ms: u64,
    pub client: IpAddr,
    /// Procedure name (`CREATE`).
    pub procedure: String,
    /// Status name (`NFS3ERR_NOSPC`).
    pub status: String,
}

/// Everything counted, as of one moment.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StatsSnapshot {
    /// When the server started and when this was taken (s since the epoch).
    pub started_unix_s: u64,
    pub taken_unix_ms: u64,
    pub uptime_s: f64,
    /// NFSv3 procedures that ran at least once: name, calls, latency.
    pub nfs3: Vec<ProcSnapshot>,
    /// MOUNT and portmap calls by procedure name.
    pub mount: Vec<(String, u64)>,
    pub portmap: Vec<(String, u64)>,
    /// Lock manager (NLM v4) and status monitor (NSM) calls by procedure name.
    #[serde(default)]
    pub nlm: Vec<(String, u64)>,
    #[serde(default)]
    pub nsm: Vec<(String, u64)>,
    /// NFSv4 COMPOUND calls, and operations by name.
    #[serde(default)]
    pub nfs4_compounds: u64,
    #[serde(default)]
    pub nfs4_ops: Vec<(String, u64)>,
    /// NFSv4 client records, sessions and stateids (opens, locks, delegations) held now.
    #[serde(default)]
    pub nfs4_clients: u64,
    #[serde(default)]
    pub nfs4_sessions: u64,
    #[serde(default)]
    pub nfs4_stateids: u64,
    /// Writes of the NFSv4 clients that may reclaim after a restart (one write
    /// carries any number of registrations), and those that failed (clients
    /// registering meanwhile are told to retry).
    #[serde(default)]
    pub nfs4_record_writes: u64,
    #[serde(default)]
    pub nfs4_record_failures: u64,
    /// Byte-range locks held now, and lock requests waiting (blocked) now.
    #[serde(default)]
    pub locks_held: u64,
    #[serde(default)]
    pub locks_waiting: u64,
    /// GRANTED callbacks to clients: answered, and not delivered (the client polls instead).
    #[serde(default)]
    pub lock_callbacks_delivered: u64,
    #[serde(default)]
    pub lock_callbacks_failed: u64,
    /// Calls refused at the RPC level (bad program, version, credentials, arguments).
    pub rejected: u64,
    pub udp_calls: u64,
    /// Calls of exports on a cluster answered NFS3ERR_JUKEBOX because the
    /// cluster had not answered them in time (see `SvcConfig::remote_reply_after`).
    #[serde(default)]
    pub remote_jukebox: u64,
    pub bytes_read: u64,
    /// Of `bytes_read`, what went from the page cache to the socket by splice
    /// (never copied through the server's memory).
    #[serde(default)]
    pub bytes_read_spliced: u64,
    pub bytes_written: u64,
    /// WRITE calls by stability asked for.
    pub writes_unstable: u64,
    pub writes_data_sync: u64,
    pub writes_file_sync: u64,
    pub drc: DrcCounts,
    /// Non-OK NFSv3 results by status name.
    pub errors: Vec<(String, u64)>,
    pub recent_errors: Vec<ErrorEvent>,
    pub clients: Vec<ClientSnapshot>,
    pub connections_open: u64,
    pub connections_accepted: u64,
    /// Connections closed at once because their host had `max_connections_per_host` open.
    #[serde(default)]
    pub connections_refused_host_limit: u64,
    /// Connections closed because a record did not arrive whole within the record timeout
    /// (a slow or stalled sender: slowloris).
    #[serde(default)]
    pub connections_closed_slow: u64,
    /// Connections closed after the idle timeout with nothing in flight.
    #[serde(default)]
    pub connections_closed_idle: u64,
    pub threads: u64,
    pub threads_peak: u64,
}

/// One NFSv3 procedure.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProcSnapshot {
    pub name: String,
    pub calls: u64,
    /// Time the server spent on each call (decode to reply encoded).
    pub latency: HistogramSnapshot,
}

/// Call counts by program and procedure number.
#[derive(Debug)]
pub struct Stats {
    nfs3: [AtomicU64; 22],
    mount: [AtomicU64; 6],
    portmap: [AtomicU64; 6],
    nlm: [AtomicU64; 24],
    nsm: [AtomicU64; 7],
    /// NFSv4 procedures (NULL, COMPOUND) and operations by number (the
    /// last slot counts undefined operation numbers).
    nfs4: [AtomicU64; 2],
    nfs4_ops: [AtomicU64; 77],
    /// NFSv4 client records, sessions and stateids now (gauges the NFSv4 service keeps).
    pub(crate) nfs4_clients: AtomicU64,
    pub(crate) nfs4_sessions: AtomicU64,
    pub(crate) nfs4_stateids: AtomicU64,
    /// Writes of the NFSv4 clients that may reclaim, and the failed ones.
    pub(crate) nfs4_record_writes: AtomicU64,
    pub(crate) nfs4_record_failures: AtomicU64,
    /// Locks held and requests waiting (gauges the lock manager keeps).
    pub(crate) locks_held: AtomicU64,
    pub(crate) locks_waiting: AtomicU64,
    pub(crate) lock_callbacks_delivered: AtomicU64,
    pub(crate) lock_callbacks_failed: AtomicU64,
    /// Calls refused before reaching a procedure (bad program, version, auth, garbage).
    rejected: AtomicU64,
    /// The duplicate reply cache's work.
    pub(crate) drc: DrcCounters,
    /// WRITE calls by the durability asked for (UNSTABLE, DATA_SYNC, FILE_SYNC):
    /// tells a benchmark or test whether a client writes safely-asynchronously.
    writes_by_stable: [AtomicU64; 3],
    /// Calls that arrived over UDP.
    udp_calls: AtomicU64,
    /// Remote calls answered JUKEBOX at their deadline.
    remote_jukebox: AtomicU64,
    /// Service threads running now, and the most there ever were (the
    /// pools grow under load and shrink when idle).
    threads: AtomicU64,
    threads_peak: AtomicU64,
    /// Time spent per NFSv3 call, by procedure.
    latency: Box<[Histogram]>,
    bytes_read: AtomicU64,
    bytes_read_spliced: AtomicU64,
    bytes_written: AtomicU64,
    /// Results by status, indexed like `Nfsstat3::ALL`.
    statuses: [AtomicU64; 29],
    recent_errors: Mutex<VecDeque<ErrorEvent>>,
    clients: ClientTable,
    connections_open: AtomicU64,
    connections_accepted: AtomicU64,
    connections_refused_host_limit: AtomicU64,
    connections_closed_slow: AtomicU64,
    connections_closed_idle: AtomicU64,
    started: Instant,
    started_unix_s: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            nfs3: Default::default(),
            mount: Default::default(),
            portmap: Default::default(),
            nlm: Default::default(),
            nsm: Default::default(),
            nfs4: Default::default(),
            nfs4_ops: [const { AtomicU64::new(0) }; 77],
            nfs4_clients: AtomicU64::new(0),
            nfs4_sessions: AtomicU64::new(0),
            nfs4_stateids: AtomicU64::new(0),
            nfs4_record_writes: AtomicU64::new(0),
            nfs4_record_failures: AtomicU64::new(0),
            locks_held: AtomicU64::new(0),
            locks_waiting: AtomicU64::new(0),
            lock_callbacks_delivered: AtomicU64::new(0),
            lock_callbacks_failed: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            drc: DrcCounters::default(),
            writes_by_stable: Default::default(),
            udp_calls: AtomicU64::new(0),
            remote_jukebox: AtomicU64::new(0),
            threads: AtomicU64::new(0),
            threads_peak: AtomicU64::new(0),
            latency: (0..NFS3_PROCEDURES.len()).map(|_| Histogram::default()).collect(),
            bytes_read: AtomicU64::new(0),
            bytes_read_spliced: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            statuses: Default::default(),
            recent_errors: Mutex::new(VecDeque::with_capacity(RECENT_ERRORS_MAX)),
            clients: ClientTable::default(),
            connections_open: AtomicU64::new(0),
            connections_accepted: AtomicU64::new(0),
            connections_refused_host_limit: AtomicU64::new(0),
            connections_closed_slow: AtomicU64::new(0),
            connections_closed_idle: AtomicU64::new(0),
            started: Instant::now(),
            started_unix_s: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        }
    }
}

/// The duplicate reply cache's counters (atomics, bumped by `drc`).
#[derive(Debug, Default)]
pub(crate) struct DrcCounters {
    pub(crate) misses: AtomicU64,
    pub(crate) hits: AtomicU64,
    pub(crate) in_progress: AtomicU64,
    pub(crate) evicted: AtomicU64,
}

/// What the duplicate reply cache did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DrcCounts {
    /// Non-idempotent calls seen for the first time (executed and remembered).
    pub misses: u64,
    /// Retransmissions answered with the remembered reply.
    pub hits: u64,
    /// Retransmissions dropped because the original was still running.
    pub in_progress: u64,
    /// Replies forgotten to stay within the cache's size.
    pub evicted: u64,
}

/// The RPC programs we count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    Nfs3,
    Mount,
    Portmap,
    Nlm,
    Nsm,
    Nfs4,
}

impl Stats {
    pub(crate) fn count(&self, prog: Program, proc_: u32) {
        let table: &[AtomicU64] = match prog {
            Program::Nfs3 => &self.nfs3,
            Program::Mount => &self.mount,
            Program::Portmap => &self.portmap,
            Program::Nlm => &self.nlm,
            Program::Nsm => &self.nsm,
            Program::Nfs4 => &self.nfs4,
        };
        if let Some(c) = table.get(proc_ as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One NFSv4 operation ran (or was answered: illegal, misplaced).
    pub(crate) fn count_nfs4_op(&self, opnum: u32) {
        let i = (opnum as usize).min(self.nfs4_ops.len() - 1);
        self.nfs4_ops[i].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_write(&self, stable: eagernfs_proto::nfs3::StableHow) {
        self.writes_by_stable[stable as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// WRITE calls that asked for `stable`.
    pub fn writes(&self, stable: eagernfs_proto::nfs3::StableHow) -> u64 {
        self.writes_by_stable[stable as usize].load(Ordering::Relaxed)
    }

    /// An NFSv3 call from `client` finished with `status` after `ns`.
    pub(crate) fn nfs3_done(&self, client: IpAddr, proc_: u32, status: Nfsstat3, ns: u64) {
        if let Some(h) = self.latency.get(proc_ as usize) {
            h.record(ns);
        }
        if let Some(i) = Nfsstat3::ALL.iter().position(|s| *s == status) {
            self.statuses[i].fetch_add(1, Ordering::Relaxed);
        }
        self.clients.call(client, self.started.elapsed().as_secs());
        // NOENT is the normal answer of a LOOKUP for a name that is not
        // there; the ring is for what someone should look at.
        if status != Nfsstat3::Ok && status != Nfsstat3::Noent {
            let mut ring = self.recent_errors.lock();
            if ring.len() == RECENT_ERRORS_MAX {
                ring.pop_front();
            }
            ring.push_back(ErrorEvent {
                at_unix_ms: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
                client,
                procedure: eagernfs_proto::nfs3::name_of(proc_).unwrap_or("?").to_string(),
                status: status_name(status),
            });
        }
    }

    pub(crate) fn count_read_bytes(&self, client: IpAddr, n: u64) {
        self.bytes_read.fetch_add(n, Ordering::Relaxed);
        self.clients.read(client, n);
    }

    /// READ data sent by splice (also counted by [`Self::count_read_bytes`]).
    pub(crate) fn count_spliced_bytes(&self, n: u64) {
        self.bytes_read_spliced.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn count_written_bytes(&self, client: IpAddr, n: u64) {
        self.bytes_written.fetch_add(n, Ordering::Relaxed);
        self.clients.wrote(client, n);
    }

    pub(crate) fn connection_opened(&self) {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_closed(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_refused_host_limit(&self) {
        self.connections_refused_host_limit.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_closed_slow(&self) {
        self.connections_closed_slow.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_closed_idle(&self) {
        self.connections_closed_idle.fetch_add(1, Ordering::Relaxed);
    }

    /// Everything, as of now.
    pub fn snapshot(&self) -> StatsSnapshot {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        use eagernfs_proto::nfs3::StableHow;
        let nfs3 = NFS3_PROCEDURES
            .iter()
            .filter(|p| self.nfs3(p.number) > 0)
            .map(|p| ProcSnapshot {
                name: p.name.to_string(),
                calls: self.nfs3(p.number),
                latency: self.latency[p.number as usize].snapshot(),
            })
            .collect();
        let named = |table: &[AtomicU64], procs: &[eagernfs_proto::ProcInfo]| {
            procs
                .iter()
                .filter_map(|p| {
                    let c = table.get(p.number as usize).map_or(0, n);
                    (c > 0).then(|| (p.name.to_string(), c))
                })
                .collect()
        };
        let errors = Nfsstat3::ALL
            .iter()
            .zip(&self.statuses)
            .filter(|(s, c)| **s != Nfsstat3::Ok && n(c) > 0)
            .map(|(s, c)| (status_name(*s), n(c)))
            .collect();
        let now_s = self.started.elapsed().as_secs();
        StatsSnapshot {
            started_unix_s: self.started_unix_s,
            taken_unix_ms: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
            uptime_s: self.started.elapsed().as_secs_f64(),
            nfs3,
            mount: named(&self.mount, &eagernfs_proto::mount::MOUNT_PROCEDURES),
            portmap: named(&self.portmap, &eagernfs_proto::portmap::PORTMAP_PROCEDURES),
            nlm: named(&self.nlm, &eagernfs_proto::nlm::NLM4_PROCEDURES),
            nsm: named(&self.nsm, &eagernfs_proto::nlm::NSM_PROCEDURES),
            nfs4_compounds: n(&self.nfs4[1]),
            nfs4_ops: self
                .nfs4_ops
                .iter()
                .enumerate()
                .filter(|(_, c)| n(c) > 0)
                .map(|(i, c)| (eagernfs_proto::nfs4::op_name(i as u32).to_string(), n(c)))
                .collect(),
            nfs4_clients: n(&self.nfs4_clients),
            nfs4_sessions: n(&self.nfs4_sessions),
            nfs4_stateids: n(&self.nfs4_stateids),
            nfs4_record_writes: n(&self.nfs4_record_writes),
            nfs4_record_failures: n(&self.nfs4_record_failures),
            locks_held: n(&self.locks_held),
            locks_waiting: n(&self.locks_waiting),
            lock_callbacks_delivered: n(&self.lock_callbacks_delivered),
            lock_callbacks_failed: n(&self.lock_callbacks_failed),
            rejected: self.rejected(),
            udp_calls: self.udp_calls(),
            remote_jukebox: n(&self.remote_jukebox),
            bytes_read: n(&self.bytes_read),
            bytes_read_spliced: n(&self.bytes_read_spliced),
            bytes_written: n(&self.bytes_written),
            writes_unstable: self.writes(StableHow::Unstable),
            writes_data_sync: self.writes(StableHow::DataSync),
            writes_file_sync: self.writes(StableHow::FileSync),
            drc: self.drc_counts(),
            errors,
            recent_errors: self.recent_errors.lock().iter().cloned().collect(),
            clients: self.clients.snapshot(now_s),
            connections_open: n(&self.connections_open),
            connections_accepted: n(&self.connections_accepted),
            connections_refused_host_limit: n(&self.connections_refused_host_limit),
            connections_closed_slow: n(&self.connections_closed_slow),
            connections_closed_idle: n(&self.connections_closed_idle),
            threads: self.threads(),
            threads_peak: self.threads_peak(),
        }
    }

    pub(crate) fn count_remote_jukebox(&self) {
        self.remote_jukebox.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_udp_call(&self) {
        self.udp_calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Calls that arrived over UDP.
    pub fn udp_calls(&self) -> u64 {
        self.udp_calls.load(Ordering::Relaxed)
    }

    pub(crate) fn thread_started(&self) {
        let now = self.threads.fetch_add(1, Ordering::Relaxed) + 1;
        self.threads_peak.fetch_max(now, Ordering::Relaxed);
    }

    pub(crate) fn thread_ended(&self) {
        self.threads.fetch_sub(1, Ordering::Relaxed);
    }

    /// Service threads running now.
    /// Byte-range locks held now (NLM and NFSv4).
    pub fn locks_held(&self) -> u64 {
        self.locks_held.load(Ordering::Relaxed)
    }

    pub fn threads(&self) -> u64 {
        self.threads.load(Ordering::Relaxed)
    }

    /// Most service threads that ever ran at once.
    pub fn threads_peak(&self) -> u64 {
        self.threads_peak.load(Ordering::Relaxed)
    }

    /// Retransmitted non-idempotent calls answered from the duplicate reply cache.
    pub fn replayed(&self) -> u64 {
        self.drc.hits.load(Ordering::Relaxed)
    }

    /// The duplicate reply cache's counters.
    pub fn drc_counts(&self) -> DrcCounts {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DrcCounts {
            misses: n(&self.drc.misses),
            hits: n(&self.drc.hits),
            in_progress: n(&self.drc.in_progress),
            evicted: n(&self.drc.evicted),
        }
    }

    /// How many times NFSv3 procedure `proc_` ran.
    pub fn nfs3(&self, proc_: u32) -> u64 {
        self.nfs3.get(proc_ as usize).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// How many times MOUNT procedure `proc_` ran.
    pub fn mount(&self, proc_: u32) -> u64 {
        self.mount.get(proc_ as usize).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Calls refused at the RPC level.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// `NAME count` lines for every NFSv3 procedure that ran at least once,
    /// then WRITE split by stability (`WRITE/UNSTABLE n`, …) and replays.
    /// Tests and scripts parse this (it is logged at shutdown): keep the format.
    pub fn summary(&self) -> String {
        use eagernfs_proto::nfs3::StableHow;
        let mut s = String::new();
        for p in NFS3_PROCEDURES.iter() {
            let n = self.nfs3(p.number);
            if n > 0 {
                s.push_str(&format!("{} {}\n", p.name, n));
            }
        }
        for (how, name) in [
            (StableHow::Unstable, "UNSTABLE"),
            (StableHow::DataSync, "DATA_SYNC"),
            (StableHow::FileSync, "FILE_SYNC"),
        ] {
            let n = self.writes(how);
            if n > 0 {
                s.push_str(&format!("WRITE/{name} {n}\n"));
            }
        }
        let drc = self.drc_counts();
        if drc.hits > 0 {
            s.push_str(&format!("DRC-REPLAYED {}\n", drc.hits));
        }
        if drc.in_progress > 0 {
            s.push_str(&format!("DRC-IN-PROGRESS {}\n", drc.in_progress));
        }
        if self.threads_peak() > 0 {
            s.push_str(&format!("THREADS-PEAK {}\n", self.threads_peak()));
        }
        s
    }
}

/// `NFS3ERR_NOSPC`, `NFS3_OK`: the RFC's name of a status.
pub fn status_name(s: Nfsstat3) -> String {
    match s {
        Nfsstat3::Ok => "NFS3_OK".to_string(),
        Nfsstat3::NotSync => "NFS3ERR_NOT_SYNC".to_string(),
        Nfsstat3::BadCookie => "NFS3ERR_BAD_COOKIE".to_string(),
        other => format!("NFS3ERR_{}", format!("{other:?}").to_ascii_uppercase()),
    }
}
