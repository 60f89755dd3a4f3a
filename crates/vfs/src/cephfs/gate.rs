//! The door every call to the cluster goes through: it keeps a slow or dead
//! cluster from taking the server's threads.
//!
//! libcephfs calls cannot be cancelled: a call waiting for an MDS that is
//! down waits until one is up again (a standby takes over, or the daemon is
//! restarted). Left alone, every call of every client would then hold a
//! server thread, and a server with all its threads waiting serves no other
//! export either. So the gate counts the calls inside libcephfs and
//! refuses a new one with [`FsError::Jukebox`] ("try again later", which
//! NFSv3 clients retry after a few seconds, as they do for knfsd) when
//!
//! - a call has been waiting for longer than `stall_after` (the cluster is
//!   not answering: new calls would only wait too), or
//! - `max_inside` calls are already inside and the oldest has waited a
//!   fifth of that: a bound on the threads one CephFS export can hold while
//!   its cluster is slow (a busy export whose calls keep returning is never
//!   refused for its concurrency alone).
//!
//! Calls whose wait grows with the data they move (a COMMIT of a large
//! file) enter as *patient*: they count against `max_inside` but not as a
//! sign of a stalled cluster. As soon as the stalled call returns, the door
//! opens again. Each change is logged once.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::{FsError, FsResult};

/// One call inside: when it entered, and whether its wait says anything
/// about the cluster's health.
#[derive(Clone, Copy)]
struct Inside {
    since: Instant,
    patient: bool,
}

pub(crate) struct Gate {
    inside: Mutex<Vec<Option<Inside>>>,
    stall_after: Duration,
    max_inside: usize,
    /// Whether the last decision was "stalled" (for logging changes once).
    stalled: AtomicBool,
    full: AtomicBool,
    /// Names the export in log lines.
    what: String,
}

/// A call inside the gate; leaving is dropping it.
pub(crate) struct Pass<'a> {
    gate: &'a Gate,
    slot: usize,
}

impl Gate {
    pub(crate) fn new(what: String, stall_after: Duration, max_inside: usize) -> Gate {
        Gate {
            inside: Mutex::new(Vec::new()),
            stall_after,
            max_inside: max_inside.max(1),
            stalled: AtomicBool::new(false),
            full: AtomicBool::new(false),
            what,
        }
    }

    /// Let a call in, or refuse it with `Jukebox` (see the module docs).
    pub(crate) fn enter(&self, patient: bool) -> FsResult<Pass<'_>> {
        let now = Instant::now();
        let mut inside = self.inside.lock();
        let mut count = 0;
        let mut waited = Duration::ZERO;
        for i in inside.iter().flatten() {
            count += 1;
            if !i.patient {
                waited = waited.max(now.saturating_duration_since(i.since));
            }
        }
        if waited >= self.stall_after {
            drop(inside);
            if !self.stalled.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "{}: a call has waited {:.1} s for the cluster (is an MDS up? `ceph fs status`); \
                     answering \"try again later\" (JUKEBOX) until it returns",
                    self.what,
                    waited.as_secs_f64()
                );
            }
            return Err(FsError::Jukebox);
        }
        if count >= self.max_inside && waited >= self.stall_after / 5 {
            drop(inside);
            if !self.full.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "{}: {count} calls are waiting for the cluster at once; answering \"try again later\" \
                     (JUKEBOX) to more until some return",
                    self.what
                );
            }
            return Err(FsError::Jukebox);
        }
        let entry = Some(Inside { since: now, patient });
        let slot = match inside.iter().position(Option::is_none) {
            Some(i) => {
                inside[i] = entry;
                i
            }
            None => {
                inside.push(entry);
                inside.len() - 1
            }
        };
        Ok(Pass { gate: self, slot })
    }

    /// Whether a call is known to be stuck now (for tests and status).
    #[cfg(test)]
    fn is_stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed)
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        let g = self.gate;
        let mut inside = g.inside.lock();
        inside[self.slot] = None;
        let now = Instant::now();
        let count = inside.iter().flatten().count();
        let still_stalled = inside
            .iter()
            .flatten()
            .any(|i| !i.patient && now.saturating_duration_since(i.since) >= g.stall_after);
        drop(inside);
        if !still_stalled && g.stalled.swap(false, Ordering::Relaxed) {
            tracing::info!("{}: the cluster answers again", g.what);
        }
        if count < g.max_inside && g.full.swap(false, Ordering::Relaxed) {
            tracing::info!("{}: calls waiting for the cluster are below the bound again", g.what);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stuck_call_closes_the_door_until_it_returns() {
        let g = Gate::new("test".into(), Duration::from_millis(30), 8);
        let stuck = g.enter(false).unwrap();
        assert!(g.enter(false).is_ok(), "a young call does not stop others");
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(g.enter(false).err(), Some(FsError::Jukebox));
        assert!(g.is_stalled());
        drop(stuck);
        assert!(!g.is_stalled());
        assert!(g.enter(false).is_ok());
    }

    #[test]
    fn a_busy_export_whose_calls_return_is_never_refused() {
        // 128 calls in flight (16 clients × 8 CREATEs in the benchmark) against a bound of 64:
        // the calls inside are young, so the cluster answers and nobody is told to come back.
        // (Refusing at the bound alone answered 36,107 of 46,713 CREATEs JUKEBOX.)
        let g = Gate::new("test".into(), Duration::from_secs(3600), 64);
        let inside: Vec<_> =
            (0..128).map(|i| g.enter(false).unwrap_or_else(|e| panic!("call {i}: {e:?}"))).collect();
        assert_eq!(inside.len(), 128);
        assert!(!g.is_stalled());
    }

    #[test]
    fn patient_calls_count_but_do_not_stall() {
        let g = Gate::new("test".into(), Duration::from_millis(50), 2);
        let commit = g.enter(true).unwrap();
        std::thread::sleep(Duration::from_millis(60));
        let other = g.enter(false).expect("a long COMMIT is not a stalled cluster");
        assert!(g.enter(false).is_ok(), "at the bound, but the calls inside are young");
        std::thread::sleep(Duration::from_millis(15));
        assert_eq!(g.enter(false).err(), Some(FsError::Jukebox), "at the bound and slow: refused");
        drop((commit, other));
        assert!(g.enter(false).is_ok());
    }
}
