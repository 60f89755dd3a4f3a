//! Lanes: short calls the calling thread sends and waits for itself.
//!
//! Through the shared connections a call is a chain of hand-offs: the
//! caller writes it, the connection task wakes on the reply (an epoll
//! wake-up on a runtime thread), and wakes the caller's task in turn. On a
//! FUSE mount reading small files that chain, twice per file, is most of
//! what the mount adds to the round trips themselves (issue 18, floorfs).
//!
//! A lane is a connection of its own, plain blocking TCP, used by one
//! thread at a time: the caller writes the call, blocks in `recv` until
//! the reply is there and decodes it — the kernel wakes that very thread,
//! and nothing else runs. Only threads that asked for it use lanes (FUSE
//! reader threads, inside [`wait_here`]), and only for calls the server
//! runs at most once even if they arrive twice: NFSv3's that change
//! nothing ([`eligible`]), and NFSv4.1 COMPOUNDs that either change nothing
//! (lookups, attributes, listings, READ) or ask the server to keep their
//! reply in the session slot (`cachethis`: creates, removes, renames,
//! SETATTR, OPEN, a small file's write and close), which the session layer
//! vouches for (`RpcClient::submit_once_only`; the server binds a lane to
//! the session's fore channel at its first SEQUENCE, as SP4_NONE has it).
//! A lane that fails — refused, broken, or no answer within
//! [`LANE_WAIT_MAX`] — is closed and the call goes to the shared
//! connections as any other, where timeouts, retransmission, reconnects
//! and fail-over are the core's business. Sending such a call twice is
//! harmless: an NFSv4.1 request goes again with its slot and sequence id,
//! and the server answers it from the slot's cached reply, or DELAY while
//! the first copy still runs. After a failure lanes rest for
//! [`LANE_BACKOFF`] so a sick server does not cost every call the wait.
//! The price: on a soft mount, a call whose lane stalled fails that wait
//! (at most 1 s, or `timeo`) later than the shared connections alone would
//! fail it.
//!
//! Lanes are made in the background (a task connects, binding the source
//! address and privileged port as the shared connections do), at most
//! [`LANES_MAX`], and kept in an idle pool; a call that finds none idle
//! takes the shared connections. Not used with RPC-with-TLS or UDP.

use crate::core::Call;
use crate::ops::NfsResult;
use bytes::{Bytes, BytesMut};
use eagernfs_rpc::RecordDecoder;
use parking_lot::Mutex;
use std::cell::Cell;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Lanes per client at most (a mount has two FUSE reader threads by default).
pub const LANES_MAX: usize = 4;

/// How long a lane call may wait for its reply before the lane is given
/// up and the call goes to the shared connections (never longer than the
/// mount's `timeo`).
pub const LANE_WAIT_MAX: Duration = Duration::from_secs(1);

/// How long lanes rest after one failed.
pub const LANE_BACKOFF: Duration = Duration::from_secs(2);

/// Bytes read from the socket at a time (more when a reply is larger).
const RECV_BYTES: usize = 16 * 1024;

thread_local! {
    static WAITS_HERE: Cell<bool> = const { Cell::new(false) };
}

/// Run `f` with this thread's eligible calls sent on lanes, waiting for
/// their replies here. For threads whose blocking costs nobody else: a
/// FUSE reader thread, while other reader threads take the next requests.
/// Never on a runtime worker thread.
pub fn wait_here<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            WAITS_HERE.with(|w| w.set(self.0));
        }
    }
    let _restore = Restore(WAITS_HERE.with(|w| w.replace(true)));
    f()
}

/// Whether this thread is inside [`wait_here`].
pub(crate) fn may_wait_here() -> bool {
    WAITS_HERE.with(Cell::get)
}

/// NFSv3 procedures that read and change nothing, so a call sent on a lane
/// and again on the shared connections does no harm: NULL, GETATTR,
/// LOOKUP, ACCESS, READLINK, READ, READDIR, READDIRPLUS, FSSTAT, FSINFO,
/// PATHCONF.
pub fn eligible(prog: u32, vers: u32, proc_: u32) -> bool {
    prog == eagernfs_proto::nfs3::NFS_PROGRAM
        && vers == eagernfs_proto::nfs3::NFS_V3
        && matches!(proc_, 0 | 1 | 3 | 4 | 5 | 6 | 16 | 17 | 18 | 19 | 20)
}

/// Counters, for `mountstats`-style output and tests.
#[derive(Debug, Default)]
pub struct LaneStats {
    /// Calls answered on a lane.
    pub calls: AtomicU64,
    /// Eligible calls that went to the shared connections because no lane
    /// was idle (or lanes were resting).
    pub no_lane: AtomicU64,
    /// Lanes given up (an error or no answer in time); their call went to
    /// the shared connections.
    pub failures: AtomicU64,
    /// Lanes connected.
    pub connects: AtomicU64,
}

/// One blocking connection.
pub(crate) struct Lane {
    stream: std::net::TcpStream,
    peer: SocketAddr,
    decoder: RecordDecoder,
    buf: BytesMut,
}

impl Lane {
    /// A lane over `stream` (connected to `peer`): made blocking, with
    /// `wait` as its send and receive timeout.
    pub(crate) fn new(
        stream: std::net::TcpStream,
        peer: SocketAddr,
        wait: Duration,
        max_record_bytes: usize,
    ) -> io::Result<Lane> {
        stream.set_nonblocking(false)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(wait))?;
        stream.set_write_timeout(Some(wait))?;
        Ok(Lane { stream, peer, decoder: RecordDecoder::new(max_record_bytes), buf: BytesMut::new() })
    }

    /// Send `call` with `xid` and return its reply record. Any error
    /// leaves the lane unusable.
    fn exchange(&mut self, xid: u32, call: &mut Call) -> io::Result<Bytes> {
        let record = call.set_xid(xid);
        self.stream.write_all(record)?;
        loop {
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(reply)) => {
                    return if crate::core::peek_reply_xid(&reply) == Some(xid) {
                        Ok(reply)
                    } else {
                        // One call at a time on a lane: anything else is a
                        // broken server.
                        Err(io::Error::new(io::ErrorKind::InvalidData, "reply to another call"))
                    };
                }
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
            }
            self.buf.reserve(RECV_BYTES);
            let spare = self.buf.spare_capacity_mut();
            // SAFETY: `spare` is writable memory of `spare.len()` bytes owned
            // by `buf`; recv writes at most that many and we mark exactly the
            // bytes it reports as initialised.
            let n = unsafe { libc::recv(self.stream.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len(), 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the server closed the lane"));
            }
            // SAFETY: recv initialised the first `n` spare bytes.
            unsafe { self.buf.set_len(self.buf.len() + n as usize) };
        }
    }
}

/// A client's lanes.
pub(crate) struct Lanes {
    idle: Mutex<Vec<Lane>>,
    /// Lanes that exist or are being connected.
    open: AtomicUsize,
    /// No new lanes and no lane calls before this.
    resting_until: Mutex<Option<Instant>>,
    next_xid: AtomicU32,
    pub(crate) stats: LaneStats,
}

/// What a lane call came to.
pub(crate) enum LaneOutcome {
    /// The server answered (the result may still be an RPC-level refusal).
    Answered(NfsResult<Bytes>),
    /// No lane took it: send it on the shared connections. `connect` is
    /// set when a new lane should be made (in the background).
    NotTaken { call: Call, connect: bool },
}

impl Lanes {
    pub(crate) fn new() -> Lanes {
        Lanes {
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            resting_until: Mutex::new(None),
            next_xid: AtomicU32::new(rand::random()),
            stats: LaneStats::default(),
        }
    }

    fn resting(&self, now: Instant) -> bool {
        matches!(*self.resting_until.lock(), Some(t) if now < t)
    }

    /// Make room for one more lane if the pool is not full: the caller
    /// then connects one and [`Lanes::add`]s it (or
    /// [`Lanes::connect_failed`]).
    fn reserve_connect(&self) -> bool {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < LANES_MAX).then_some(n + 1))
            .is_ok()
    }

    /// A lane connected in the background joins the idle pool.
    pub(crate) fn add(&self, lane: Lane) {
        self.stats.connects.fetch_add(1, Ordering::Relaxed);
        self.idle.lock().push(lane);
    }

    /// A background connect failed: lanes rest.
    pub(crate) fn connect_failed(&self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
        self.rest();
    }

    fn rest(&self) {
        *self.resting_until.lock() = Some(Instant::now() + LANE_BACKOFF);
    }

    /// Send `call` on an idle lane to `server`, waiting here.
    pub(crate) fn call(&self, server: SocketAddr, mut call: Call) -> LaneOutcome {
        if self.resting(Instant::now()) {
            self.stats.no_lane.fetch_add(1, Ordering::Relaxed);
            return LaneOutcome::NotTaken { call, connect: false };
        }
        let lane = {
            let mut idle = self.idle.lock();
            loop {
                match idle.pop() {
                    // Fail-over moved the client: lanes to the old address go.
                    Some(l) if l.peer != server => {
                        self.open.fetch_sub(1, Ordering::AcqRel);
                    }
                    other => break other,
                }
            }
        };
        let Some(mut lane) = lane else {
            self.stats.no_lane.fetch_add(1, Ordering::Relaxed);
            return LaneOutcome::NotTaken { call, connect: self.reserve_connect() };
        };
        let xid = self.next_xid.fetch_add(1, Ordering::Relaxed);
        match lane.exchange(xid, &mut call) {
            Ok(reply) => {
                self.idle.lock().push(lane);
                self.stats.calls.fetch_add(1, Ordering::Relaxed);
                LaneOutcome::Answered(crate::core::reply_result(call.prog, call.vers, call.proc_, reply))
            }
            Err(e) => {
                tracing::debug!("lane to {server} given up: {e}");
                drop(lane);
                self.open.fetch_sub(1, Ordering::AcqRel);
                self.stats.failures.fetch_add(1, Ordering::Relaxed);
                self.rest();
                LaneOutcome::NotTaken { call, connect: false }
            }
        }
    }
}
