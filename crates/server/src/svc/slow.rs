//! Threads for calls that may block: COMMIT, a stable or large WRITE, a
//! large READ.
//!
//! A service thread that reads such a call hands it here and goes on
//! reading and running quick calls, so no number of slow calls can take
//! the threads quick calls need: with a slow disk, 64 COMMITs waiting in
//! `fdatasync` used to hold every thread of the pool while GETATTRs
//! queued behind them (a 250 ms stall of the whole server at 24 k
//! calls/s). The thread that runs a slow call also writes its reply.
//!
//! The pool starts empty, adds a thread whenever a call arrives and none is
//! idle (up to its bound), and a thread idle for `idle_exit` ends.

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::conn::Conn;
use crate::call::Ticket;

/// A call waiting for a slow thread.
pub(crate) enum SlowJob {
    /// From a TCP connection: the reply goes back on it.
    /// `remote`: for an export whose backend waits on other machines (the
    /// call runs under their deadline).
    Tcp { conn: Arc<Conn>, record: Bytes, ticket: Option<Ticket>, remote: bool },
    /// From UDP socket `socket`: the reply goes to `src`.
    Udp { socket: usize, src: SocketAddr, local_port: u16, record: Bytes, remote: bool },
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<SlowJob>,
    idle: usize,
    threads: usize,
    stopping: bool,
}

/// The queue of slow calls and the bookkeeping of its threads.
pub(crate) struct SlowPool {
    queue: Mutex<Queue>,
    ready: Condvar,
    threads_max: usize,
    idle_exit: Duration,
}

impl SlowPool {
    pub(crate) fn new(threads_max: usize, idle_exit: Duration) -> SlowPool {
        SlowPool {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            threads_max: threads_max.max(1),
            idle_exit,
        }
    }

    /// Queue `job`. Returns whether the caller should start a thread for
    /// it (none is idle and the pool is below its bound; the thread is
    /// already counted).
    pub(crate) fn submit(&self, job: SlowJob) -> bool {
        let mut q = self.queue.lock();
        q.jobs.push_back(job);
        if q.idle > 0 {
            self.ready.notify_one();
            return false;
        }
        if q.threads < self.threads_max && !q.stopping {
            q.threads += 1;
            return true;
        }
        false
    }

    /// A thread counted by `submit` could not be started. Returns a job
    /// nobody else will run (no thread is left), to run on the caller.
    pub(crate) fn thread_not_started(&self) -> Option<SlowJob> {
        let mut q = self.queue.lock();
        q.threads -= 1;
        if q.threads == 0 {
            q.jobs.pop_front()
        } else {
            None
        }
    }

    /// The next job for a slow thread; `None`: the thread ends (idle for
    /// `idle_exit`, or stopping) and is no longer counted.
    pub(crate) fn next(&self) -> Option<SlowJob> {
        let mut q = self.queue.lock();
        loop {
            if let Some(j) = q.jobs.pop_front() {
                return Some(j);
            }
            if q.stopping {
                q.threads -= 1;
                return None;
            }
            q.idle += 1;
            let timed_out = self.ready.wait_for(&mut q, self.idle_exit).timed_out();
            q.idle -= 1;
            if timed_out && q.jobs.is_empty() {
                q.threads -= 1;
                return None;
            }
        }
    }

    /// Let every idle thread end once the queue is empty.
    pub(crate) fn stop(&self) {
        self.queue.lock().stopping = true;
        self.ready.notify_all();
    }
}
