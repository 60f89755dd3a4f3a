//! Sends on time: a wait that ends within microseconds of an instant, for the open loop.
//!
//! tokio's timer wakes on whole milliseconds (a deadline is rounded up to the next tick), so
//! a call that sleeps with it until its intended time goes out up to ~1 ms late, and in an
//! open loop that lag is charged to the server. [`Pacer::sleep_until`] sleeps with tokio
//! until [`COARSE_SLACK`] before the instant, then hands its waker to the pacer: one task per
//! step that, while any wait is due soon, pops the due ones and wakes them, then
//! `yield_now()`s. A yielded task is run again only after the worker has run every other
//! ready task and polled the I/O and timer drivers (tokio defers its wake until then), so
//! the spin never starves the calls' I/O, and it uses only time the runtime would have spent
//! parked. With nothing due within [`COARSE_SLACK`] it waits on a [`Notify`] and costs
//! nothing.
//!
//! The cost: during an open-loop step the runtime's worker never sleeps, so the generator
//! shows a whole CPU busy (`time` reports it) however low the rate; the calls themselves cost
//! what they did (at 64 clients it reached 90k calls/s on one CPU where the millisecond-timer
//! generator topped out at ~72k). On a machine whose CPUs are all busy the kernel treats the
//! spinning thread as a CPU hog and now and then deschedules it for a slice, so the send lag's
//! tail grows to milliseconds there (its median stays at microseconds).
//!
//! One spinning task per step, not one per waiting call: a round of the spin costs one poll
//! and one driver poll however many calls are waiting (at 40k calls/s some 80 are in their
//! last 2 ms at any time, and 80 tasks each yielding would each be polled every round).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long before its instant a wait stops sleeping with tokio's timer and joins the
/// pacer: the timer wakes up to one tick (1 ms) after its deadline, plus the scheduler's
/// delay when the runtime is busy, and a wait that wakes after its instant has already
/// lost; 2 ms leaves one tick of margin.
pub(crate) const COARSE_SLACK: Duration = Duration::from_millis(2);

struct Due {
    at: Instant,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Reverse<Due>>,
    seq: u64,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Signalled on every registration; `notify_one` keeps a permit, so a registration
    /// between the pacer's check and its wait is not lost.
    registered: Notify,
}

/// The waits of one open-loop step; cloned into every worker task. Dropping the
/// [`PacerTask`] ends the spinning task.
#[derive(Clone)]
pub(crate) struct Pacer {
    shared: Arc<Shared>,
}

/// Owns the pacer's task: aborts it when dropped (at the end of the step).
pub(crate) struct PacerTask(tokio::task::JoinHandle<()>);

impl Drop for PacerTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Pacer {
    /// A pacer and its task, spawned on the current runtime.
    pub(crate) fn start() -> (Pacer, PacerTask) {
        let shared = Arc::new(Shared::default());
        let task = tokio::spawn(run(Arc::clone(&shared)));
        (Pacer { shared }, PacerTask(task))
    }

    /// Returns at `at` or within microseconds after it (when the runtime has a free moment:
    /// a busy runtime still delays it by what it is busy with).
    pub(crate) async fn sleep_until(&self, at: Instant) {
        if let Some(coarse) = at.checked_sub(COARSE_SLACK) {
            if coarse > Instant::now() {
                tokio::time::sleep_until(tokio::time::Instant::from_std(coarse)).await;
            }
        }
        poll_fn(|cx| {
            if Instant::now() >= at {
                return Poll::Ready(());
            }
            // First poll, or a spurious one: (re)register. A stale entry only causes one
            // spurious wake of this task later, which is harmless.
            let mut q = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            let seq = q.seq;
            q.seq += 1;
            q.heap.push(Reverse(Due { at, seq, waker: cx.waker().clone() }));
            drop(q);
            self.shared.registered.notify_one();
            Poll::Pending
        })
        .await;
    }
}

/// The spin: wake what is due, yield while anything is waiting, else wait for a registration.
async fn run(shared: Arc<Shared>) {
    let mut wake: Vec<Waker> = Vec::new();
    loop {
        let waiting = {
            let mut q = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            while q.heap.peek().is_some_and(|Reverse(d)| d.at <= now) {
                if let Some(Reverse(d)) = q.heap.pop() {
                    wake.push(d.waker);
                }
            }
            !q.heap.is_empty()
        };
        for w in wake.drain(..) {
            w.wake();
        }
        if waiting {
            tokio::task::yield_now().await;
        } else {
            shared.registered.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits registered out of order each end, none before its instant.
    #[test]
    fn waits_registered_out_of_order_each_end_at_or_after_their_instant() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (pacer, _task) = Pacer::start();
            let base = Instant::now() + Duration::from_millis(5);
            let offsets_us = [3000u64, 100, 2500, 0, 700, 4000, 50];
            let mut set = tokio::task::JoinSet::new();
            for &off in &offsets_us {
                let pacer = pacer.clone();
                set.spawn(async move {
                    let at = base + Duration::from_micros(off);
                    pacer.sleep_until(at).await;
                    let woke = Instant::now();
                    assert!(woke >= at, "woke before its instant");
                });
            }
            let mut ended = 0;
            while let Some(r) = set.join_next().await {
                r.unwrap();
                ended += 1;
            }
            assert_eq!(ended, offsets_us.len());
        });
    }

    /// An instant already past returns at once, without the pacer.
    #[test]
    fn a_past_instant_returns_at_once() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (pacer, task) = Pacer::start();
            drop(task);
            pacer.sleep_until(Instant::now()).await;
            pacer.sleep_until(Instant::now() - Duration::from_millis(5)).await;
        });
    }
}
