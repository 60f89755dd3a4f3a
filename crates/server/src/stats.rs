//! Per-procedure call counters.
//!
//! Counted at dispatch, after the RPC-level checks pass, so a count means the
//! procedure ran. Tests and benchmarks read them (for example, "the client sent
//! exactly one COMMIT"); they are relaxed atomics, one cache line apart per
//! program is not needed at this rate.

use eagernfs_proto::nfs3::NFS3_PROCEDURES;
use std::sync::atomic::{AtomicU64, Ordering};

/// Call counts by program and procedure number.
#[derive(Debug, Default)]
pub struct Stats {
    nfs3: [AtomicU64; 22],
    mount: [AtomicU64; 6],
    portmap: [AtomicU64; 6],
    /// Calls refused before reaching a procedure (bad program, version, auth, garbage).
    rejected: AtomicU64,
    /// The duplicate reply cache's work.
    pub(crate) drc: DrcCounters,
    /// WRITE calls by the durability asked for (UNSTABLE, DATA_SYNC, FILE_SYNC):
    /// tells a benchmark or test whether a client writes safely-asynchronously.
    writes_by_stable: [AtomicU64; 3],
    /// Calls that arrived over UDP.
    udp_calls: AtomicU64,
    /// Service threads running now, and the most there ever were (the
    /// pools grow under load and shrink when idle).
    threads: AtomicU64,
    threads_peak: AtomicU64,
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
}

impl Stats {
    pub(crate) fn count(&self, prog: Program, proc_: u32) {
        let table: &[AtomicU64] = match prog {
            Program::Nfs3 => &self.nfs3,
            Program::Mount => &self.mount,
            Program::Portmap => &self.portmap,
        };
        if let Some(c) = table.get(proc_ as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
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
