//! A thin, safe face on epoll(7) and eventfd(2): only what the service
//! threads need.
//!
//! Every registration is one-shot (`EPOLLONESHOT`): an event disarms the
//! descriptor until the thread that took it re-arms it, so exactly one
//! thread owns a socket's input (or output) at a time. Several threads may
//! wait on one epoll at once; the kernel wakes one of them per event
//! (epoll waiters are exclusive), so there is no thundering herd.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// What a registration waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Interest {
    /// Readable, or the peer closed / reset.
    Read,
    /// Writable.
    Write,
    /// At once: input is already buffered in user space, which epoll cannot
    /// see, so the registration also waits for "writable", which a socket
    /// almost always is (one whose peer has stopped reading is the
    /// exception; its buffered calls wait until the peer reads again).
    ReadNow,
}

impl Interest {
    fn bits(self) -> u32 {
        let base = (libc::EPOLLONESHOT | libc::EPOLLRDHUP) as u32;
        match self {
            Interest::Read => base | libc::EPOLLIN as u32,
            Interest::Write => base | libc::EPOLLOUT as u32,
            Interest::ReadNow => base | (libc::EPOLLIN | libc::EPOLLOUT) as u32,
        }
    }
}

/// An epoll instance.
#[derive(Debug)]
pub(crate) struct Epoll {
    fd: OwnedFd,
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Epoll {
    pub(crate) fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; the result is a new descriptor we own.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
        Ok(Epoll { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        check(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(|_| ())
    }

    /// Register `fd` (one-shot) and arm it for `interest`, reporting `token`.
    pub(crate) fn add(&self, fd: RawFd, interest: Interest, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, interest.bits(), token)
    }

    /// Re-arm a registered `fd` after its event was taken.
    pub(crate) fn rearm(&self, fd: RawFd, interest: Interest, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, interest.bits(), token)
    }

    /// Register a descriptor that stays ready (the stop eventfd): level
    /// triggered, not one-shot, so every waiting thread sees it.
    pub(crate) fn add_level(&self, fd: RawFd, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, token)
    }

    /// Forget `fd`. Errors are ignored: the descriptor may already be gone.
    pub(crate) fn remove(&self, fd: RawFd) {
        let _ = self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0);
    }

    /// Wait for one event (for ever if `timeout` is `None`); `None` after
    /// `timeout` without one. EINTR is reported as a timeout (the caller
    /// loops anyway).
    pub(crate) fn wait_one(&self, timeout: Option<Duration>) -> io::Result<Option<u64>> {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as libc::c_int);
        // SAFETY: room for exactly one event is passed, and maxevents says 1.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), &mut ev, 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(None);
            }
            return Err(e);
        }
        Ok((n == 1).then_some(ev.u64))
    }
}

/// An eventfd that, once signalled, stays readable: the stop signal.
#[derive(Debug)]
pub(crate) struct Flag {
    fd: OwnedFd,
}

impl Flag {
    pub(crate) fn new() -> io::Result<Flag> {
        // SAFETY: plain syscall; the result is a new descriptor we own.
        let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: just created, owned by nobody else.
        Ok(Flag { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Make the flag readable (idempotent: it is never read back).
    pub(crate) fn raise(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64. A full counter (EAGAIN)
        // still leaves it readable, which is all that matters.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
