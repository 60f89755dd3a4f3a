//! Which of a pool's threads may run quick calls: one *slot* per CPU.
//!
//! A thread needs a slot to wait for sockets and to run calls. Quick calls
//! (most of NFS: GETATTR, LOOKUP, ACCESS, small READ/WRITE from the page
//! cache) keep it: when events arrive faster than one thread serves them,
//! they wait in epoll's ready list for the slot holder, who takes the next
//! one without a context switch, instead of each waking another thread
//! that then competes for the same CPU (Banks: "knfsd wakes a thread for
//! every call … load average of ~120 eats the last few % in the
//! scheduler"). A call that may block (COMMIT, a stable WRITE, a large
//! READ) gives its slot to a waiting thread — or to a new one, up to the
//! pool's bound — before it runs, and so does, through the watchdog, a
//! quick call that turns out to block. A thread whose blocking call is
//! done takes a free slot again or waits for one; a thread that has waited
//! `idle_exit` without getting one ends, down to the minimum. So the pool
//! grows with the number of calls blocked at once, not with the call rate.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

const NO_SLOT: u8 = 0;
const SLOT: u8 = 1;

/// What the watchdog and the pool know about one thread.
#[derive(Debug, Default)]
pub(crate) struct ThreadRec {
    /// When its current call started (ns on the service's clock); 0 while
    /// it waits for work.
    pub(crate) busy_since_ns: AtomicU64,
    /// Whether it holds a slot (`SLOT`) or not.
    slot: AtomicU8,
}

impl ThreadRec {
    pub(crate) fn has_slot(&self) -> bool {
        self.slot.load(Ordering::Acquire) == SLOT
    }
}

#[derive(Debug)]
struct Inner {
    free_slots: usize,
    /// Threads waiting for a slot.
    waiting: usize,
    threads: usize,
    stopping: bool,
}

/// One pool's slots and threads.
#[derive(Debug)]
pub(crate) struct Sched {
    inner: Mutex<Inner>,
    slot_free: Condvar,
    threads_min: usize,
    threads_max: usize,
    /// Every live thread's record, for the watchdog.
    recs: Mutex<Vec<Arc<ThreadRec>>>,
}

/// Whether to start a thread.
#[must_use]
pub(crate) struct Spawn(pub(crate) bool);

impl Sched {
    pub(crate) fn new(slots: usize, threads_min: usize, threads_max: usize) -> Sched {
        let threads_min = threads_min.max(slots);
        Sched {
            inner: Mutex::new(Inner { free_slots: slots, waiting: 0, threads: 0, stopping: false }),
            slot_free: Condvar::new(),
            threads_min,
            threads_max: threads_max.max(threads_min),
            recs: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn threads_min(&self) -> usize {
        self.threads_min
    }

    /// Count a thread about to be started; false if the pool is full.
    pub(crate) fn reserve_thread(&self) -> bool {
        let mut i = self.inner.lock();
        if i.threads >= self.threads_max || i.stopping {
            return false;
        }
        i.threads += 1;
        true
    }

    /// A reserved thread could not be started.
    pub(crate) fn unreserve_thread(&self) {
        self.inner.lock().threads -= 1;
    }

    pub(crate) fn register(&self, rec: &Arc<ThreadRec>) {
        self.recs.lock().push(rec.clone());
    }

    /// Wait for a slot. `false`: the thread should end (it waited
    /// `idle_exit` above the minimum, or the pool is stopping); it is no
    /// longer counted.
    pub(crate) fn acquire(&self, rec: &Arc<ThreadRec>, idle_exit: Duration) -> bool {
        let mut i = self.inner.lock();
        loop {
            if i.stopping {
                i.threads -= 1;
                return false;
            }
            if i.free_slots > 0 {
                i.free_slots -= 1;
                rec.slot.store(SLOT, Ordering::Release);
                return true;
            }
            i.waiting += 1;
            let timed_out = self.slot_free.wait_for(&mut i, idle_exit).timed_out();
            i.waiting -= 1;
            if timed_out && i.free_slots == 0 && i.threads > self.threads_min {
                i.threads -= 1;
                return false;
            }
        }
    }

    /// Give `rec`'s slot up (before a call that may block, or taken away by
    /// the watchdog). Returns whether a thread should be started to use it
    /// (nobody is waiting for it). Does nothing if `rec` holds no slot.
    pub(crate) fn release(&self, rec: &ThreadRec) -> Spawn {
        if rec.slot.compare_exchange(SLOT, NO_SLOT, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Spawn(false);
        }
        let mut i = self.inner.lock();
        i.free_slots += 1;
        if i.waiting > 0 {
            self.slot_free.notify_one();
            return Spawn(false);
        }
        Spawn(!i.stopping && i.threads < self.threads_max)
    }

    /// The thread owning `rec` ends (stop): forget it.
    pub(crate) fn leave(&self, rec: &Arc<ThreadRec>, counted: bool) {
        self.recs.lock().retain(|r| !Arc::ptr_eq(r, rec));
        let mut i = self.inner.lock();
        if rec.slot.swap(NO_SLOT, Ordering::AcqRel) == SLOT {
            i.free_slots += 1;
        }
        if counted {
            i.threads -= 1;
        }
    }

    /// Wake every waiting thread so it ends.
    pub(crate) fn stop(&self) {
        self.inner.lock().stopping = true;
        self.slot_free.notify_all();
    }

    /// Threads holding a slot and busy in one call since before `limit_ns`.
    pub(crate) fn stuck(&self, limit_ns: u64) -> Vec<Arc<ThreadRec>> {
        self.recs
            .lock()
            .iter()
            .filter(|r| {
                let since = r.busy_since_ns.load(Ordering::Acquire);
                r.has_slot() && since != 0 && since < limit_ns
            })
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_slot_goes_to_a_waiter_or_asks_for_a_thread() {
        let s = Sched::new(1, 1, 3);
        assert!(s.reserve_thread());
        let a = Arc::new(ThreadRec::default());
        assert!(s.acquire(&a, Duration::from_secs(5)));
        assert!(s.release(&a).0, "nobody waits: start a thread");
        assert!(!s.release(&a).0, "a second release of the same slot does nothing");
        assert!(s.acquire(&a, Duration::from_secs(5)), "the slot is free again");
    }

    #[test]
    fn idle_threads_above_the_minimum_end() {
        let s = Sched::new(1, 1, 4);
        for _ in 0..2 {
            assert!(s.reserve_thread());
        }
        let a = Arc::new(ThreadRec::default());
        let b = Arc::new(ThreadRec::default());
        assert!(s.acquire(&a, Duration::from_secs(5)));
        assert!(!s.acquire(&b, Duration::from_millis(10)), "no slot for it, above the minimum: it ends");
        assert_eq!(s.inner.lock().threads, 1);
    }

    #[test]
    fn never_more_than_the_maximum() {
        let s = Sched::new(1, 1, 2);
        assert!(s.reserve_thread());
        assert!(s.reserve_thread());
        assert!(!s.reserve_thread());
        let a = Arc::new(ThreadRec::default());
        assert!(s.acquire(&a, Duration::from_secs(5)));
        assert!(!s.release(&a).0, "two threads already: no third");
    }
}
