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
    /// Retransmissions answered from the duplicate reply cache.
    replayed: AtomicU64,
    /// WRITE calls by the durability asked for (UNSTABLE, DATA_SYNC, FILE_SYNC):
    /// tells a benchmark or test whether a client writes safely-asynchronously.
    writes_by_stable: [AtomicU64; 3],
    /// Service threads running now, and the most there ever were (the
    /// pools grow under load and shrink when idle).
    threads: AtomicU64,
    threads_peak: AtomicU64,
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

    pub(crate) fn count_replayed(&self) {
        self.replayed.fetch_add(1, Ordering::Relaxed);
    }

    /// Retransmitted non-idempotent calls answered from the duplicate reply cache.
    pub fn replayed(&self) -> u64 {
        self.replayed.load(Ordering::Relaxed)
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
        if self.replayed() > 0 {
            s.push_str(&format!("DRC-REPLAYED {}\n", self.replayed()));
        }
        if self.threads_peak() > 0 {
            s.push_str(&format!("THREADS-PEAK {}\n", self.threads_peak()));
        }
        s
    }
}
