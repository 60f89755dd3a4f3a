//! State the server must find again after a restart (the NFSv4 clients that
//! may reclaim), written by one thread of its own.
//!
//! Why a thread: service threads run with the file-system identity of the
//! caller they last served (the local backend sets fsuid, fsgid and groups
//! per thread), so a record written from one is written as some client's
//! uid: refused in the server's 0700 state directory, or made with that
//! owner. And several threads writing one file at once race: on a shared
//! temporary name, and on which list lands last.
//!
//! So one writer thread, acting as the process itself, does every write.
//! Callers hand it the newest state and, where a reply must not go out
//! before the state is on stable storage, wait for it. Writes coalesce:
//! while one is under way, newer states replace each other, and the next
//! write carries the newest; concurrent callers share one write (a group
//! commit), and the newest state is always the last one written.
//!
//! Every state handed over gets the next generation number. Since a write
//! carries the newest state there is, writing generation `g` makes every
//! generation up to `g` durable. A failed write is not retried by itself:
//! the next state handed over (or a caller that finds the newest state
//! failed, [`Recorder::ticket`]) makes the writer try again.

use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Writes one state durably (the binary's file handling), or says why not.
pub(crate) type Sink<T> = Box<dyn FnMut(&T) -> Result<(), String> + Send>;

/// What a write did (for statistics): `Ok`, or the error.
pub(crate) type Outcome = Box<dyn Fn(Result<(), &str>) + Send>;

/// Why a state a caller waited for is not known to be on stable storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotRecorded {
    /// The write that carried it failed (and no later one succeeded).
    Failed(String),
    /// Not written within the time the caller could wait.
    TimedOut,
}

/// The writer of one state record. Dropping it lets the writer finish what
/// it was given (waiting a bounded time) and stop.
pub(crate) struct Recorder<T> {
    shared: Arc<Shared<T>>,
}

struct Shared<T> {
    inner: Mutex<Inner<T>>,
    /// Wakes the writer: a new state, or stop.
    work: Condvar,
    /// Wakes callers waiting for a generation.
    done: Condvar,
}

struct Inner<T> {
    /// The newest state handed over and not yet taken by the writer.
    next: Option<T>,
    /// The generation of the newest state handed over (0: none yet; the
    /// state found on disk at the start is generation 0, durable).
    submitted: u64,
    /// Every generation up to this one is on stable storage.
    written: u64,
    /// The newest generation whose write failed (0: none), and why.
    failed: u64,
    error: String,
    /// The writer has taken a state and not finished writing it.
    writing: bool,
    /// No more states come: the writer stops once idle.
    stop: bool,
    /// The writer thread ended (or never started).
    gone: bool,
}

impl<T: Send + 'static> Recorder<T> {
    /// Start the writer thread `name`, which writes with `sink` and reports
    /// each write to `outcome`.
    pub(crate) fn start(name: &str, mut sink: Sink<T>, outcome: Outcome) -> std::io::Result<Recorder<T>> {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                next: None,
                submitted: 0,
                written: 0,
                failed: 0,
                error: String::new(),
                writing: false,
                stop: false,
                gone: false,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        let s = shared.clone();
        let what = name.to_string();
        std::thread::Builder::new().name(name.into()).spawn(move || {
            act_as_the_process(&what);
            writer(&s, &mut sink, &outcome);
            s.inner.lock().gone = true;
            s.done.notify_all();
        })?;
        Ok(Recorder { shared })
    }

    /// Hand the writer `state`, the newest there is (it replaces any the
    /// writer has not taken yet); its generation. Callers hand states over
    /// in the order they were made (under the lock that guards the state),
    /// so the newest is written last.
    pub(crate) fn submit(&self, state: T) -> u64 {
        let mut i = self.shared.inner.lock();
        i.submitted += 1;
        i.next = Some(state);
        self.shared.work.notify_one();
        i.submitted
    }

    /// The generation a caller must see written to know that the state as
    /// it is now is on stable storage, or `None` if it already is.
    /// `changed`: the caller has just changed the state (`state()` makes
    /// it); then it is handed over. So is the same state again when the
    /// newest write failed and nothing newer is on its way: a caller asking
    /// again (a client retrying) makes the writer try again.
    pub(crate) fn ticket(&self, changed: bool, state: impl FnOnce() -> T) -> Option<u64> {
        let retry = {
            let i = self.shared.inner.lock();
            if !changed && i.written >= i.submitted {
                return None;
            }
            !changed && i.next.is_none() && !i.writing && i.failed == i.submitted
        };
        if changed || retry {
            return Some(self.submit(state()));
        }
        Some(self.shared.inner.lock().submitted)
    }

    /// Wait until generation `generation` is on stable storage, its write
    /// failed, or `timeout` passed.
    pub(crate) fn wait(&self, generation: u64, timeout: Duration) -> Result<(), NotRecorded> {
        let deadline = Instant::now() + timeout;
        let mut i = self.shared.inner.lock();
        loop {
            if i.written >= generation {
                return Ok(());
            }
            if i.failed >= generation {
                return Err(NotRecorded::Failed(i.error.clone()));
            }
            if i.gone {
                return Err(NotRecorded::Failed("the writer thread is gone".into()));
            }
            if self.shared.done.wait_until(&mut i, deadline).timed_out() {
                return Err(NotRecorded::TimedOut);
            }
        }
    }
}

impl<T> Drop for Recorder<T> {
    fn drop(&mut self) {
        /// How long a stopping server waits for the last state to be written.
        const FINISH_MAX: Duration = Duration::from_secs(5);
        let deadline = Instant::now() + FINISH_MAX;
        let mut i = self.shared.inner.lock();
        i.stop = true;
        self.shared.work.notify_one();
        while !i.gone {
            if self.shared.done.wait_until(&mut i, deadline).timed_out() {
                tracing::warn!("a state record was still being written when the server stopped");
                return;
            }
        }
    }
}

/// The writer thread's loop: take the newest state, write it, tell the waiters.
fn writer<T>(s: &Shared<T>, sink: &mut Sink<T>, outcome: &Outcome) {
    loop {
        let (state, generation) = {
            let mut i = s.inner.lock();
            loop {
                if let Some(state) = i.next.take() {
                    i.writing = true;
                    break (state, i.submitted);
                }
                if i.stop {
                    return;
                }
                s.work.wait(&mut i);
            }
        };
        let result = sink(&state);
        drop(state);
        // Counted before anyone waiting hears of it.
        outcome(result.as_ref().map(|_| ()).map_err(String::as_str));
        {
            let mut i = s.inner.lock();
            i.writing = false;
            match &result {
                Ok(()) => i.written = i.written.max(generation),
                Err(e) => {
                    i.failed = i.failed.max(generation);
                    i.error.clone_from(e);
                }
            }
        }
        s.done.notify_all();
    }
}

/// Make this thread act as the process itself: fsuid and fsgid back to the
/// effective ids. A new thread inherits its creator's per-thread identity,
/// and the creator may be a thread that last served some client.
pub(crate) fn act_as_the_process(what: &str) {
    // SAFETY: geteuid and getegid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // SAFETY: setfsuid/setfsgid take an integer and change only this thread;
    // an invalid id (-1) changes nothing and returns the current one.
    let (fsuid, fsgid) = unsafe {
        libc::syscall(libc::SYS_setfsgid, gid as libc::c_long);
        libc::syscall(libc::SYS_setfsuid, uid as libc::c_long);
        (
            libc::syscall(libc::SYS_setfsuid, -1 as libc::c_long) as u32,
            libc::syscall(libc::SYS_setfsgid, -1 as libc::c_long) as u32,
        )
    };
    if (fsuid, fsgid) != (uid, gid) {
        tracing::error!(
            "{what}: cannot act as uid {uid} gid {gid} (still fsuid {fsuid} fsgid {fsgid}): its writes may be refused"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A recorder whose sink sends each state it writes to the returned
    /// channel, and first waits for a go from the other channel.
    fn gated() -> (Recorder<u32>, mpsc::Receiver<u32>, mpsc::SyncSender<Result<(), String>>) {
        let (wrote_tx, wrote) = mpsc::channel();
        let (go, go_rx) = mpsc::sync_channel::<Result<(), String>>(64);
        let sink: Sink<u32> = Box::new(move |v: &u32| {
            let r = go_rx.recv_timeout(Duration::from_secs(30)).expect("the test lets the write go");
            wrote_tx.send(*v).unwrap();
            r
        });
        (Recorder::start("test-records", sink, Box::new(|_| {})).unwrap(), wrote, go)
    }

    #[test]
    fn states_handed_over_during_a_write_share_the_next_one_and_the_newest_lands_last() {
        let (r, wrote, go) = gated();
        let first = r.submit(1);
        // The writer has taken 1 and waits for the go; 2..=50 arrive meanwhile.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !r.shared.inner.lock().writing {
            assert!(Instant::now() < deadline, "the writer never took the first state");
            std::thread::yield_now();
        }
        let last = (2..=50).fold(first, |_, v| r.submit(v));
        go.send(Ok(())).unwrap();
        go.send(Ok(())).unwrap();
        r.wait(last, Duration::from_secs(30)).unwrap();
        assert_eq!(r.wait(first, Duration::ZERO), Ok(()));
        assert_eq!(
            wrote.try_iter().collect::<Vec<_>>(),
            vec![1, 50],
            "two writes: the first, and the newest"
        );
        assert_eq!(r.ticket(false, || unreachable!()), None, "nothing left unwritten");
    }

    #[test]
    fn a_failed_write_is_reported_and_asking_again_writes_again() {
        let (r, wrote, go) = gated();
        let g = r.ticket(true, || 7).unwrap();
        go.send(Err("No space left on device".into())).unwrap();
        assert_eq!(
            r.wait(g, Duration::from_secs(30)),
            Err(NotRecorded::Failed("No space left on device".into()))
        );
        assert_eq!(wrote.recv().unwrap(), 7);
        // Nothing changed, but the newest state is not on disk: a second ask hands it over again.
        let again = r.ticket(false, || 7).expect("not durable yet");
        assert!(again > g);
        go.send(Ok(())).unwrap();
        assert_eq!(r.wait(again, Duration::from_secs(30)), Ok(()));
        assert_eq!(r.ticket(false, || unreachable!()), None);
    }

    #[test]
    fn a_write_that_does_not_finish_in_time_times_out() {
        let (r, _wrote, go) = gated();
        let g = r.submit(1);
        assert_eq!(r.wait(g, Duration::from_millis(20)), Err(NotRecorded::TimedOut));
        // A caller asking meanwhile waits for the write under way (no second one).
        assert_eq!(r.ticket(false, || unreachable!()), Some(g));
        go.send(Ok(())).unwrap();
        assert_eq!(r.wait(g, Duration::from_secs(30)), Ok(()));
    }

    #[test]
    fn the_writer_acts_as_the_process_whoever_started_it() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP: only root can change a thread's fsuid");
            return;
        }
        // A thread that last acted as uid 1111 (as a service thread after a client's call)
        // starts the writer; the writer still writes as the process.
        let seen = std::thread::spawn(|| {
            // SAFETY: changes only this thread's fsuid/fsgid.
            unsafe {
                libc::syscall(libc::SYS_setfsgid, 1111 as libc::c_long);
                libc::syscall(libc::SYS_setfsuid, 1111 as libc::c_long);
                assert_eq!(libc::syscall(libc::SYS_setfsuid, -1 as libc::c_long), 1111);
            }
            let (tx, rx) = mpsc::channel();
            let sink: Sink<()> = Box::new(move |_: &()| {
                // SAFETY: -1 changes nothing and returns the current ids.
                let ids = unsafe {
                    (
                        libc::syscall(libc::SYS_setfsuid, -1 as libc::c_long),
                        libc::syscall(libc::SYS_setfsgid, -1 as libc::c_long),
                    )
                };
                tx.send(ids).unwrap();
                Ok(())
            });
            let r = Recorder::start("test-identity", sink, Box::new(|_| {})).unwrap();
            let g = r.submit(());
            r.wait(g, Duration::from_secs(30)).unwrap();
            rx.recv().unwrap()
        })
        .join()
        .unwrap();
        // SAFETY: as above.
        let (uid, gid) = unsafe { (libc::geteuid() as i64, libc::getegid() as i64) };
        assert_eq!(seen, (uid, gid));
    }
}
