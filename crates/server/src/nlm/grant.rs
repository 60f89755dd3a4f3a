//! Granting locks: what a blocked request leaves behind for its GRANTED callback ([`Grant`]),
//! the grace period that holds new grants back ([`GraceState`], [`Gated`]), and the thread that
//! retries the requests a file system refused ([`start_retrying`]; how often, and why it polls:
//! `mirror`).

use super::locks::{Admit, Held, LockTable, Mirror, Owner, Range, Waiter};
use super::mirror::{BackendMirror, FAST_FILES, RETRY_FAST, RETRY_SLOW};
use eagernfs_proto::nlm::Nlm4TestArgs;
use std::net::IpAddr;
use std::sync::{Arc, Weak};
use std::time::Instant;

/// What a blocked request needs to be announced when granted.
#[derive(Debug, Clone)]
pub(crate) struct Grant {
    pub(super) addr: IpAddr,
    pub(super) args: Nlm4TestArgs,
    /// The file's file system, when it takes part in locks (to try the
    /// request again there).
    pub(super) mirror: Option<Arc<BackendMirror>>,
}

impl Grant {
    /// The notice of an NFSv4 request, which never waits in the queue
    /// (NFSv4 clients poll a lock they wait for), so nothing announces it.
    pub(crate) fn never_queued(addr: IpAddr) -> Grant {
        Grant { addr, args: Nlm4TestArgs::default(), mirror: None }
    }
}

/// This server's grace period and the cluster's.
pub(crate) struct GraceState {
    pub(super) until: Option<Instant>,
    /// Every previous host has reclaimed: the grace period is over early.
    pub(super) reclaims_over: std::sync::atomic::AtomicBool,
    pub(super) cluster: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl GraceState {
    pub(crate) fn in_grace(&self) -> bool {
        let own = self.until.is_some_and(|t| Instant::now() < t)
            && !self.reclaims_over.load(std::sync::atomic::Ordering::Acquire);
        own || self.cluster.as_ref().is_some_and(|g| g.load(std::sync::atomic::Ordering::Acquire))
    }
}

/// A file's mirror that grants nothing new while a grace period is in force
/// ([`Mirror::open`]): for every path that may grant a lock that is not a
/// reclaim (LOCK, and the waiters UNLOCK, CANCEL, a host's restart and the
/// retrying thread grant).
pub(crate) struct Gated<M> {
    pub(crate) inner: M,
    pub(crate) grace: Arc<GraceState>,
}

impl<'a, M: std::ops::Deref<Target = dyn Mirror + 'a>> Mirror for Gated<M> {
    fn admit(&self, want: &Held) -> Admit {
        self.inner.admit(want)
    }
    fn release(&self, owner: &Owner, range: Range) {
        self.inner.release(owner, range)
    }
    fn idle(&self) {
        self.inner.idle()
    }
    fn open(&self) -> bool {
        !self.grace.in_grace() && self.inner.open()
    }
}

/// Wakes the retrying thread (a request was refused: there is something to poll).
#[derive(Default)]
pub(crate) struct Retrier {
    pokes: parking_lot::Mutex<u64>,
    woken: parking_lot::Condvar,
}

impl Retrier {
    pub(crate) fn poke(&self) {
        *self.pokes.lock() += 1;
        self.woken.notify_one();
    }
}

/// Start the thread that retries refused requests (once per server), which
/// ends with the table. `announce` sends GRANTED for what it grants; nothing
/// is granted while `grace` is in force.
pub(crate) fn start_retrying(
    table: Weak<LockTable<Grant>>,
    grace: Arc<GraceState>,
    announce: impl Fn(Vec<Waiter<Grant>>) + Send + 'static,
) -> Arc<Retrier> {
    let retrier = Arc::new(Retrier::default());
    let r = retrier.clone();
    let spawned = std::thread::Builder::new().name("nlm-retry".into()).spawn(move || {
        let mut seen = 0;
        let mut last_full = std::time::Instant::now();
        loop {
            let Some(t) = table.upgrade() else { return };
            let waiting: Vec<_> = t.files_waiting().into_iter().filter(|(_, n)| n.mirror.is_some()).collect();
            let full = last_full.elapsed() >= RETRY_SLOW;
            if full {
                last_full = std::time::Instant::now();
            }
            let n = if full { waiting.len() } else { waiting.len().min(FAST_FILES) };
            for (fh, notice) in &waiting[..n] {
                if let Some(m) = &notice.mirror {
                    // Nothing is granted in a grace period, not even what was queued before it.
                    let m = Gated { inner: &**m as &dyn Mirror, grace: grace.clone() };
                    let granted = t.retry(fh, &m);
                    if !granted.is_empty() {
                        announce(granted);
                    }
                }
            }
            let idle = waiting.is_empty();
            drop((t, waiting));
            if idle {
                // Nothing to poll: sleep until a refusal pokes (looking at
                // least every RETRY_SLOW, so the thread sees the table go).
                let mut p = r.pokes.lock();
                if *p == seen {
                    r.woken.wait_for(&mut p, RETRY_SLOW);
                }
                seen = *p;
            }
            // A poke does not shorten this: the refused request was tried
            // just now, and the MDS sees at most one pass per RETRY_FAST.
            std::thread::sleep(RETRY_FAST);
        }
    });
    if let Err(e) = spawned {
        tracing::error!(
            "no thread to retry locks the file system refused ({e}): such requests wait until a release here"
        );
    }
    retrier
}
