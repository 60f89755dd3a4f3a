//! Durability deferred to the end of a request ([`DeferredDurability`]).
//!
//! An NFSv4 COMPOUND may change several things the journal records — a
//! small file's WRITE, the SETATTR of its times and its CLOSE come in one —
//! and its reply goes out only after its last operation. Waiting for the
//! log at each operation costs a log write each (a single-threaded client
//! has nobody to share a group with); waiting once, before the reply, makes
//! them one. Inside a scope a journal only notes how far its log must be
//! durable; the scope's end waits for that, and the caller answers only then
//! (or answers the first deferring operation's error if the log failed).

use std::cell::RefCell;
use std::io;
use std::marker::PhantomData;
use std::sync::Arc;

/// A log that can be waited for (the journal's core).
pub(crate) trait Durable: Send + Sync {
    /// Return once everything before `lsn` is durable.
    fn wait_durable(&self, lsn: u64) -> io::Result<()>;
}

/// What one thread's open scope has deferred.
#[derive(Default)]
struct Pending {
    /// Each journal appended to, with the log position it must reach.
    logs: Vec<(Arc<dyn Durable>, u64)>,
    /// Waits deferred so far (each a change that would have waited).
    count: usize,
}

thread_local! {
    static PENDING: RefCell<Option<Pending>> = const { RefCell::new(None) };
}

/// If this thread is inside a scope, note that `log` must be durable up to
/// `lsn` before the scope ends, and return true; false means wait now.
pub(crate) fn defer(log: &Arc<dyn Durable>, lsn: u64) -> bool {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let Some(p) = p.as_mut() else { return false };
        p.count += 1;
        match p.logs.iter_mut().find(|(l, _)| Arc::ptr_eq(l, log)) {
            Some((_, at)) => *at = (*at).max(lsn),
            None => p.logs.push((log.clone(), lsn)),
        }
        true
    })
}

/// A scope on this thread within which the journal's waits for durability
/// are put off to its end. The end ([`finish`](Self::finish), or the drop)
/// waits for all of them; nothing changed inside the scope may be answered
/// before that. A scope opened inside another changes nothing: the outer one
/// waits.
#[must_use = "the changes are durable only once the scope is finished"]
pub struct DeferredDurability {
    outer: bool,
    /// Tied to the thread whose waits it holds.
    _thread: PhantomData<*const ()>,
}

impl DeferredDurability {
    /// Open a scope on this thread.
    pub fn begin() -> DeferredDurability {
        let outer = PENDING.with(|p| {
            let mut p = p.borrow_mut();
            let outer = p.is_none();
            if outer {
                *p = Some(Pending::default());
            }
            outer
        });
        DeferredDurability { outer, _thread: PhantomData }
    }

    /// How many waits were deferred so far: it grows at each operation that
    /// changed something the journal records.
    pub fn pending(&self) -> usize {
        PENDING.with(|p| p.borrow().as_ref().map_or(0, |p| p.count))
    }

    /// End the scope: wait until everything deferred in it is durable. An
    /// error means the log failed and those changes must not be answered as
    /// done.
    pub fn finish(mut self) -> io::Result<()> {
        self.wait()
    }

    fn wait(&mut self) -> io::Result<()> {
        if !self.outer {
            return Ok(());
        }
        self.outer = false;
        let pending = PENDING.with(|p| p.borrow_mut().take()).unwrap_or_default();
        let mut result = Ok(());
        for (log, lsn) in pending.logs {
            if let Err(e) = log.wait_durable(lsn) {
                result = Err(e);
            }
        }
        result
    }
}

impl Drop for DeferredDurability {
    fn drop(&mut self) {
        if let Err(e) = self.wait() {
            tracing::error!("journal: changes of a request not durable: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Default)]
    struct Counting {
        waits: AtomicU64,
        reached: AtomicU64,
    }

    impl Durable for Counting {
        fn wait_durable(&self, lsn: u64) -> io::Result<()> {
            self.waits.fetch_add(1, Ordering::SeqCst);
            self.reached.fetch_max(lsn, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn waits_inside_a_scope_become_one_wait_for_the_furthest_at_its_end() {
        let c = Arc::new(Counting::default());
        let log: Arc<dyn Durable> = c.clone();
        assert!(!defer(&log, 10), "no scope: wait now");
        let scope = DeferredDurability::begin();
        assert!(defer(&log, 10));
        assert!(defer(&log, 30));
        assert!(defer(&log, 20));
        let inner = DeferredDurability::begin();
        assert!(defer(&log, 25));
        inner.finish().unwrap();
        assert_eq!(c.waits.load(Ordering::SeqCst), 0, "an inner scope leaves the waiting to the outer");
        assert_eq!(scope.pending(), 4);
        scope.finish().unwrap();
        assert_eq!(c.waits.load(Ordering::SeqCst), 1);
        assert_eq!(c.reached.load(Ordering::SeqCst), 30);
        assert!(!defer(&log, 40), "the scope is over");
    }

    #[test]
    fn a_scope_dropped_without_finish_still_waits() {
        let c = Arc::new(Counting::default());
        let log: Arc<dyn Durable> = c.clone();
        {
            let _scope = DeferredDurability::begin();
            assert!(defer(&log, 7));
        }
        assert_eq!(c.reached.load(Ordering::SeqCst), 7);
    }
}
