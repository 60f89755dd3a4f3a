//! Requests started on the FUSE reader thread, moved to the runtime only
//! when they have to wait for something other than a lane.
//!
//! [`run`] polls a request's future once right here, inside
//! `eagernfs_client::lane::wait_here`: its short read-only calls go out on
//! a lane and their replies come back to this thread, which finishes the
//! request with no runtime thread involved (one wake-up per call, of the
//! thread that waits). When the future waits for anything else (a call a
//! lane does not take, a lock, a fetch another task started), its waker
//! hands it to the runtime, from the thread that woke it, where it
//! finishes as a task.
//!
//! Polling every request here with the replies still coming through the
//! runtime (0387f50) saved context switches but no time; the lanes are
//! what make it pay.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

use parking_lot::Mutex;
use tokio::runtime::Handle;

type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Where a request's future is.
enum State {
    /// Being polled on the reader thread; `woken` if its waker fired
    /// meanwhile.
    Polling { woken: bool },
    /// Waiting for its waker, which spawns it.
    Parked(Task),
    /// Finished, or handed to the runtime (whose own waker it uses from
    /// then on: wake-ups of this one are stale).
    Gone,
}

struct Deferred {
    rt: Handle,
    state: Mutex<State>,
}

impl Wake for Deferred {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut state = self.state.lock();
        match std::mem::replace(&mut *state, State::Gone) {
            State::Polling { .. } => *state = State::Polling { woken: true },
            State::Parked(task) => {
                drop(state);
                self.rt.spawn(task);
            }
            State::Gone => {}
        }
    }
}

/// Run `fut` on this thread until it first waits, then on `rt`.
pub fn run<F>(rt: &Handle, fut: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let deferred = Arc::new(Deferred { rt: rt.clone(), state: Mutex::new(State::Polling { woken: false }) });
    let waker = Waker::from(deferred.clone());
    let mut task: Task = Box::pin(fut);
    let polled = {
        // Timers, sockets and spawns inside the future need the runtime.
        let _rt = rt.enter();
        eagernfs_client::lane::wait_here(|| task.as_mut().poll(&mut Context::from_waker(&waker)))
    };
    let mut state = deferred.state.lock();
    if polled.is_ready() {
        *state = State::Gone;
        return;
    }
    match *state {
        State::Polling { woken: true } => {
            *state = State::Gone;
            drop(state);
            rt.spawn(task);
        }
        _ => *state = State::Parked(task),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::oneshot;

    /// A future that finishes without waiting runs entirely on the
    /// caller's thread.
    #[test]
    fn a_future_that_does_not_wait_runs_here() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
        let here = std::thread::current().id();
        let ran_on = Arc::new(Mutex::new(None));
        let r = ran_on.clone();
        run(rt.handle(), async move {
            *r.lock() = Some(std::thread::current().id());
        });
        assert_eq!(*ran_on.lock(), Some(here));
    }

    /// A future that waits is finished on the runtime once woken, exactly
    /// once, whether the wake-up comes from another thread or the runtime.
    #[test]
    fn a_waiting_future_finishes_on_the_runtime_once() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let finished = Arc::new(AtomicUsize::new(0));
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let mut senders = Vec::new();
        for _ in 0..100 {
            let (tx, rx) = oneshot::channel::<u32>();
            senders.push(tx);
            let f = finished.clone();
            let d = done_tx.clone();
            let here = std::thread::current().id();
            run(rt.handle(), async move {
                let v = rx.await.unwrap();
                // Past the wait, the future runs on a runtime thread.
                assert_ne!(std::thread::current().id(), here);
                f.fetch_add(1, Ordering::SeqCst);
                d.send(v).unwrap();
            });
        }
        assert_eq!(finished.load(Ordering::SeqCst), 0, "nothing finished before its reply");
        for (i, tx) in senders.into_iter().enumerate() {
            if i % 2 == 0 {
                tx.send(i as u32).unwrap();
            } else {
                rt.spawn(async move { tx.send(i as u32).unwrap() });
            }
        }
        let mut got: Vec<u32> = (0..100).map(|_| done_rx.recv().unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        assert_eq!(finished.load(Ordering::SeqCst), 100);
    }

    /// A waker fired while the first poll is still running (a reply that
    /// beat the poll's return) is not lost.
    #[test]
    fn a_wake_during_the_first_poll_is_kept() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        run(rt.handle(), async move {
            tokio::task::yield_now().await; // wakes itself, then returns Pending
            done_tx.send(()).unwrap();
        });
        done_rx.recv_timeout(std::time::Duration::from_secs(10)).expect("the future finished");
    }
}
