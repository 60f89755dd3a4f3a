//! Sends on time: a wait that ends within microseconds of an instant, for the open loop.
//!
//! tokio's timer wakes on whole milliseconds (a deadline is rounded up to the next tick), so
//! a call that sleeps with it until its intended time goes out up to ~1 ms late, and in an
//! open loop that lag is charged to the server. [`Pacer::sleep_until`] sleeps with tokio
//! until [`COARSE_SLACK`] before the instant, then hands its waker to the pacer: one task per
//! step that keeps the waits in a heap and, for the earliest,
//!
//! 1. sleeps on an [`Alarm`] (a `timerfd` on the runtime's I/O driver: the kernel's
//!    high-resolution timer, so a parked runtime wakes at the microsecond asked for, give or
//!    take the kernel's wake-up latency) until a [`Lead`] before it, then
//! 2. spins the last stretch: wakes what is due, else `yield_now()`s and looks again. A
//!    yielded task runs again only after the worker has run every other ready task and
//!    polled the I/O and timer drivers (tokio defers its wake until then), so the spin never
//!    starves the calls' I/O.
//!
//! The lead is how late the alarm itself wakes the pacer, learnt as the step runs (about its
//! 90th percentile; see [`Lead`]): long enough that most wakes come before the instant, no
//! longer than it need be, because spinning is what went wrong before. The pacer used to
//! spin through the whole [`COARSE_SLACK`], so at 1000 calls/s the runtime never slept: a
//! whole CPU busy however low the rate, and on a machine whose CPUs were all busy the kernel
//! treated the spinning thread as a CPU hog (it used up its fair share) and descheduled it
//! for whole slices, just when it was due to send. Measured on a 2-CPU VM, old pacer
//! against this one, 8 alternating runs each: the `load_timing` test (1000 calls/s, 4
//! clients) idle kept its median send lag (5 → 6 µs) and its process's CPU time fell
//! 0.58 → 0.21 s; under `stress-ng --cpu 2` the median fell 32 µs (16–117) → 8 µs (6–10).
//! `bench load --rate 1000` for 5 s used 4.6 → 1.7 s of CPU. The tail under stress (p99
//! ~4 ms either way) is the calls' own workers waiting for a CPU, which no pacer fixes.
//!
//! With nothing waiting the pacer waits on a [`Notify`] and costs nothing. At high rates the
//! next wait is nearly always within the lead, so it spins as before: near saturation
//! (15–25k calls/s offered, debug build, server on the same 2 CPUs) it reached the rates the
//! old pacer did, or more. One pacer task per step, not one per waiting call: a round of the spin costs
//! one poll and one driver poll however many calls are waiting (at 40k calls/s some 80 are
//! in their last 2 ms at any time, and 80 tasks each yielding would each be polled every
//! round). If a `timerfd` cannot be had, the pacer spins as it used to.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::Notify;

/// How long before its instant a wait stops sleeping with tokio's timer and joins the
/// pacer: the timer wakes up to one tick (1 ms) after its deadline, plus the scheduler's
/// delay when the runtime is busy, and a wait that wakes after its instant has already
/// lost; 2 ms leaves one tick of margin.
pub(crate) const COARSE_SLACK: Duration = Duration::from_millis(2);

/// The pacer's [`Lead`] stays within these: below the minimum a wake is too rarely that
/// early to be worth a timer; above the maximum (half of [`COARSE_SLACK`]) the pacer would
/// spin through most of each wait again, and at least some waits must still get an alarm so
/// that the lead keeps learning (and shrinks again after a burst of late wakes).
const LEAD_MIN: Duration = Duration::from_micros(20);
const LEAD_MAX: Duration = Duration::from_millis(1);

/// How long before a wait's instant the pacer stops sleeping on its alarm and spins: an
/// estimate of the 90th percentile of how late the alarm wakes the pacer. Each wake moves
/// it: up by 1/8 × 0.9 of itself when the wake was later than it, down by 1/8 × 0.1 when
/// not (a streaming quantile estimate: it settles where ~10% of wakes are later). So ~90%
/// of calls are sent by the spin, within µs, and the rest late by the alarm's excess only.
///
/// Learnt rather than fixed because the right value depends on the machine and its load:
/// on the 2-CPU VM it was written on an idle CPU took 50–300 µs to wake from its halt
/// (the lead settled at ~120–250 µs), while with every CPU busy a wake took ~30–60 µs.
/// A fixed 60 µs lead measured median lags of ~30 µs idle; a fixed 300 µs did as well as
/// this but used ~20% more CPU.
struct Lead {
    ns: f64,
}

impl Lead {
    fn new() -> Lead {
        Lead { ns: 200_000.0 }
    }

    fn get(&self) -> Duration {
        Duration::from_nanos(self.ns as u64)
    }

    /// Learns from one wake of the alarm, `late` after the instant it was set for.
    fn record(&mut self, late: Duration) {
        let late = late.as_nanos() as f64;
        self.ns *= if late > self.ns { 1.0 + 0.9 / 8.0 } else { 1.0 - 0.1 / 8.0 };
        self.ns = self.ns.clamp(LEAD_MIN.as_nanos() as f64, LEAD_MAX.as_nanos() as f64);
    }
}

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

/// The pacer's loop: wake what is due; with the next wait within the lead, yield and look
/// again; further off, sleep on the alarm until the lead before it (or until a
/// registration, which may be sooner); with nothing waiting, wait for a registration.
async fn run(shared: Arc<Shared>) {
    let mut alarm = Alarm::new().ok();
    let mut lead = Lead::new();
    let mut wake: Vec<Waker> = Vec::new();
    loop {
        let next = {
            let mut q = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            while q.heap.peek().is_some_and(|Reverse(d)| d.at <= now) {
                if let Some(Reverse(d)) = q.heap.pop() {
                    wake.push(d.waker);
                }
            }
            q.heap.peek().map(|Reverse(d)| d.at)
        };
        if !wake.is_empty() {
            for w in wake.drain(..) {
                w.wake();
            }
            // Let them run before this task sets its alarm: a yielded task runs after the
            // worker's other ready tasks, and the woken calls are sent ~10-30 µs sooner
            // (measured, debug build) than if they waited for the alarm's system calls.
            tokio::task::yield_now().await;
            continue;
        }
        let Some(next) = next else {
            shared.registered.notified().await;
            continue;
        };
        let wake_at = next.checked_sub(lead.get()).filter(|&w| w > Instant::now());
        match (wake_at, alarm.as_mut()) {
            (Some(wake_at), Some(a)) => {
                if a.set(wake_at).is_err() {
                    // Not expected of a timerfd; spin as before rather than sleep past a wait.
                    alarm = None;
                    continue;
                }
                let registered = shared.registered.notified();
                tokio::select! {
                    r = a.ring() => match r {
                        Ok(()) => lead.record(Instant::now().saturating_duration_since(wake_at)),
                        Err(_) => alarm = None,
                    },
                    () = registered => {}
                }
            }
            // Within the lead of the next wait, or no alarm: one round of the spin.
            _ => tokio::task::yield_now().await,
        }
    }
}

/// A `timerfd` on the runtime's I/O driver: a wake at a set instant, to the microsecond
/// (the kernel's high-resolution timer, without the timer slack of `epoll_wait`'s timeout).
struct Alarm {
    fd: AsyncFd<OwnedFd>,
    /// The instant it is set for, so a wait for the same instant does not set it again.
    set_for: Option<Instant>,
}

impl Alarm {
    fn new() -> io::Result<Alarm> {
        // SAFETY: plain syscall; the fd it returns is owned by nothing else.
        let fd =
            unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an OwnedFd's fd stays open, and the same, for as long as it is owned.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(Alarm { fd, set_for: None })
    }

    /// Rings at `at` (as a relative time from now: `Instant` is `CLOCK_MONOTONIC` on Linux
    /// but offers no conversion, and the two clock readings are ns apart).
    fn set(&mut self, at: Instant) -> io::Result<()> {
        if self.set_for == Some(at) {
            return Ok(());
        }
        // A zero value would disarm it.
        let after = at.saturating_duration_since(Instant::now()).max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid timerfd and a valid itimerspec; the old value is not asked for.
        if unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } != 0 {
            self.set_for = None;
            return Err(io::Error::last_os_error());
        }
        self.set_for = Some(at);
        Ok(())
    }

    /// Waits until it rings. Setting it again resets it, so a readiness left from before
    /// may read nothing: then it waits on.
    async fn ring(&mut self) -> io::Result<()> {
        loop {
            let mut guard = self.fd.readable().await?;
            let mut expirations = [0u8; 8];
            match guard.try_io(|fd| {
                // SAFETY: reads 8 bytes into an 8-byte buffer.
                let n = unsafe { libc::read(fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            }) {
                Ok(r) => {
                    self.set_for = None;
                    return r;
                }
                Err(_would_block) => continue,
            }
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
