//! [`ByteBudget`]: byte-wise flow control for writers.
//!
//! Writers take bytes from the budget before buffering data and the
//! write-back path gives them back as each WRITE completes. A writer that
//! finds no room waits in FIFO order and is let in by the first release
//! that makes room for it: there is no "flush everything every N calls"
//! (Lever & Honeyman's Fig. 2 spikes) and no waiting for a COMMIT. Each
//! waiter records how many releases it took and what kind the last one
//! was, so tests can check those properties structurally.

use std::collections::VecDeque;

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// What gave bytes back to a budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// A WRITE completed (its bytes are no longer dirty).
    WriteDone,
    /// A COMMIT completed.
    Commit,
    /// Data was dropped (overwritten, truncated, failed, or a writer left).
    Dropped,
}

/// How a wait for room ended.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WaitOutcome {
    /// Releases that happened while waiting, including the one that let us in.
    pub(crate) releases: u32,
    /// The release that let us in.
    pub(crate) last: Release,
}

struct Waiter {
    need: u64,
    releases: u32,
    tx: oneshot::Sender<WaitOutcome>,
}

struct State {
    used: u64,
    peak: u64,
    waiters: VecDeque<Waiter>,
}

/// A bound on bytes with FIFO waiters.
pub(crate) struct ByteBudget {
    limit: u64,
    state: Mutex<State>,
}

impl ByteBudget {
    pub(crate) fn new(limit: u64) -> Self {
        ByteBudget {
            limit: limit.max(1),
            state: Mutex::new(State { used: 0, peak: 0, waiters: VecDeque::new() }),
        }
    }

    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    pub(crate) fn used(&self) -> u64 {
        self.state.lock().used
    }

    /// Most bytes ever held at once.
    pub(crate) fn peak(&self) -> u64 {
        self.state.lock().peak
    }

    pub(crate) fn has_waiters(&self) -> bool {
        !self.state.lock().waiters.is_empty()
    }

    /// A request larger than the whole budget is clamped to it, so a huge
    /// write() still gets in once everything else has drained.
    pub(crate) fn clamp(&self, n: u64) -> u64 {
        n.min(self.limit)
    }

    /// Take `n` bytes (already clamped) if there is room and nobody is
    /// queued ahead. Never waits.
    pub(crate) fn try_acquire(&self, n: u64) -> bool {
        let mut s = self.state.lock();
        // Writers that gave up waiting must not hold the queue.
        s.waiters.retain(|w| !w.tx.is_closed());
        if s.waiters.is_empty() && s.used + n <= self.limit {
            s.used += n;
            s.peak = s.peak.max(s.used);
            true
        } else {
            false
        }
    }

    /// Wait for `n` bytes (already clamped). If the returned future is
    /// dropped before it is let in, the bytes are not taken; if it is
    /// dropped just after, [`ByteBudget::release`] takes them back.
    pub(crate) async fn acquire(&self, n: u64) -> Option<WaitOutcome> {
        let rx = {
            let mut s = self.state.lock();
            s.waiters.retain(|w| !w.tx.is_closed());
            if s.waiters.is_empty() && s.used + n <= self.limit {
                s.used += n;
                s.peak = s.peak.max(s.used);
                return None;
            }
            let (tx, rx) = oneshot::channel();
            s.waiters.push_back(Waiter { need: n, releases: 0, tx });
            rx
        };
        // The sender is only dropped after sending, and the budget lives as
        // long as the mount, so this cannot fail; treat it as "let in".
        Some(rx.await.unwrap_or(WaitOutcome { releases: 0, last: Release::Dropped }))
    }

    /// Take bytes without waiting, even beyond the limit: for data that
    /// must go back into the dirty set (a resend after a server restart).
    pub(crate) fn force_acquire(&self, n: u64) {
        let mut s = self.state.lock();
        s.used += n;
        s.peak = s.peak.max(s.used);
    }

    /// Give `n` bytes back and let in as many queued writers as now fit.
    pub(crate) fn release(&self, n: u64, why: Release) {
        if n == 0 {
            return;
        }
        let mut s = self.state.lock();
        s.used = s.used.saturating_sub(n);
        for w in s.waiters.iter_mut() {
            w.releases += 1;
        }
        while let Some(w) = s.waiters.front() {
            if s.used + w.need > self.limit {
                break;
            }
            let w = s.waiters.pop_front().expect("front exists");
            let outcome = WaitOutcome { releases: w.releases, last: why };
            if w.tx.send(outcome).is_ok() {
                s.used += w.need;
                s.peak = s.peak.max(s.used);
            }
            // A waiter that went away takes nothing: try the next one.
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_enter_in_order_on_the_first_release_that_fits() {
        let b = std::sync::Arc::new(ByteBudget::new(100));
        assert!(b.try_acquire(100));
        let b2 = b.clone();
        let w = tokio::spawn(async move { b2.acquire(30).await });
        tokio::task::yield_now().await;
        assert!(b.has_waiters());
        assert!(!b.try_acquire(1), "a newcomer must not overtake a waiter");
        b.release(20, Release::WriteDone);
        tokio::task::yield_now().await;
        assert!(b.has_waiters());
        b.release(20, Release::WriteDone);
        let out = w.await.unwrap().expect("had to wait");
        assert_eq!(out.releases, 2);
        assert_eq!(out.last, Release::WriteDone);
        assert_eq!(b.used(), 90);
        assert_eq!(b.peak(), 100);
    }

    #[tokio::test]
    async fn a_dropped_waiter_takes_nothing() {
        let b = ByteBudget::new(10);
        assert!(b.try_acquire(10));
        {
            let f = b.acquire(5);
            tokio::pin!(f);
            assert!(futures::poll!(f.as_mut()).is_pending());
        }
        b.release(10, Release::Dropped);
        assert_eq!(b.used(), 0);
        assert!(!b.has_waiters());
    }
}
