//! One TCP connection as the service threads see it: record-marked input
//! read one record at a time, replies written by whichever thread finished
//! the call, and the bookkeeping that bounds a connection's calls in
//! flight.
//!
//! A `read` takes what the socket holds, so small calls (often several)
//! arrive with their marks in one system call and wait in a shared buffer;
//! a connection re-armed with a whole call still buffered asks epoll for a
//! thread at once. A large fragment (a WRITE's data) is read exactly, into
//! a reused buffer of its own (`eagernfs_vfs::bufpool`). Output goes straight to the
//! socket from the thread that produced it; only what the socket does not
//! take at once is queued, and a write-readiness registration on a second
//! descriptor of the same socket drains the queue.

use bytes::{Buf, Bytes, BytesMut};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd};

use crate::call;
use crate::reply::{Piece, Reply};
use eagernfs_vfs::bufpool::{BufPool, Loan};

/// Bytes read per `read` when a fragment is large.
const READ_CHUNK_BYTES: usize = 1 << 20;
/// Records longer than this are read into a pooled buffer of their own
/// ([`BufPool`]): a fresh megabyte per WRITE would be mapped, faulted in
/// and zeroed page by page, then unmapped, for every call.
const LARGE_RECORD_BYTES: usize = 16 * 1024;
/// A large fragment with at least this much still to come waits for it
/// whole: the socket's receive low-water mark (`SO_RCVLOWAT`) is raised to
/// what is missing, so the kernel wakes a thread once instead of for every
/// segment (a 1 MiB WRITE came in about ten pieces, each costing the sender
/// a wake-up of this side and this side an epoll round and a `read`).
const LOWAT_MIN_BYTES: usize = 64 * 1024;
/// Smallest buffer allocation for small records, so that many small calls
/// share one allocation (each record keeps its part alive until dropped).
const SMALL_ALLOC_BYTES: usize = 16 * 1024;

/// Where a connection's record reading stands.
#[derive(Debug, Default)]
struct RecvState {
    /// Bytes read and not yet taken: the next record marks and fragments.
    /// A read takes what the socket holds (up to the buffer's room), so one
    /// `read` usually brings a whole small call, mark included, and
    /// sometimes the next calls too; a single-fragment record is split off
    /// this buffer without a copy.
    input: BytesMut,
    /// The earlier fragments of a record sent in several (rare).
    record: BytesMut,
    /// A large fragment being read into a reused buffer of its own.
    large: Option<LargeFragment>,
    /// Records read so far: the next record's arrival number.
    next_seq: u64,
    /// The last read returned less than it asked for: the socket was empty
    /// then, so reading again right after a call would only find it empty.
    drained: bool,
    /// `read` system calls made so far.
    reads: u64,
    /// The receive low-water mark set on the socket (0: the default, 1).
    lowat: usize,
}

/// A fragment over [`LARGE_RECORD_BYTES`] (a WRITE's data), read into a
/// buffer from a [`BufPool`] rather than into `input`.
#[derive(Debug)]
struct LargeFragment {
    buf: Loan,
    /// Its length, from the record mark.
    len: usize,
    /// The mark's last-fragment bit.
    last: bool,
}

impl RecvState {
    /// Account for a read that asked for `want` bytes: the count, or `None`
    /// if the socket was empty.
    fn after_read(&mut self, got: io::Result<usize>, want: usize) -> Result<Option<usize>, RecvEnd> {
        self.reads += 1;
        match got {
            Ok(0) => Err(RecvEnd::Closed),
            Ok(n) => {
                self.drained = n < want;
                Ok(Some(n))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.drained = true;
                Ok(None)
            }
            Err(e) => Err(RecvEnd::Io(e)),
        }
    }

    /// Have the socket reported readable only once `need` more bytes of a
    /// large fragment are here (or at once again, with 0 or a short rest).
    /// Best effort: without it the fragment still arrives, in more wake-ups.
    /// The kernel caps the mark at half the receive buffer it may grow to,
    /// and reports the socket readable anyway when its window or memory runs
    /// short or the peer closes, so a mark can never hold data back for good.
    fn wait_for(&mut self, s: &TcpStream, need: usize) {
        let mark = if need >= LOWAT_MIN_BYTES { need.min(i32::MAX as usize) } else { 0 };
        if mark == self.lowat {
            return;
        }
        let value = mark.max(1) as libc::c_int;
        // SAFETY: setsockopt with a valid descriptor and an int option value.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            self.lowat = mark;
        }
    }

    /// Take a fragment just completed: the record it ends, with its arrival
    /// number, or `None` if more fragments follow.
    fn fragment_done(&mut self, fragment: Bytes, last: bool) -> Option<(Bytes, u64)> {
        if !last {
            self.record.extend_from_slice(&fragment);
            return None;
        }
        let record = if self.record.is_empty() {
            fragment
        } else {
            self.record.extend_from_slice(&fragment);
            self.record.split().freeze()
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        Some((record, seq))
    }
}

/// Why a connection's input ended.
#[derive(Debug)]
pub(crate) enum RecvEnd {
    /// The peer closed (or reset) the connection.
    Closed,
    /// A record larger than allowed: the peer is broken or hostile.
    TooLarge(usize),
    Io(io::Error),
}

/// What the output side holds.
#[derive(Debug, Default)]
pub(crate) struct OutState {
    /// Pieces of replies (or their unwritten ends) waiting for the socket;
    /// `true` marks a reply's last piece.
    queue: VecDeque<(Piece, bool)>,
    /// The write registration is armed (a thread will drain the queue).
    pub(crate) out_armed: bool,
    /// The write descriptor was ever registered with epoll.
    pub(crate) out_registered: bool,
    /// Calls read and not yet fully answered (their replies count until
    /// written, so a client that stops reading cannot grow the queue).
    pub(crate) inflight: usize,
    /// Input is not armed because `inflight` reached the bound.
    pub(crate) in_paused: bool,
    /// No more input: end of stream, an error, or shutdown.
    pub(crate) read_closed: bool,
    /// Writing failed: replies are dropped.
    pub(crate) broken: bool,
    /// Removed from the service (nothing more happens on it).
    pub(crate) gone: bool,
}

/// A connection.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) id: u64,
    /// The pool whose threads serve it.
    pub(crate) pool: usize,
    /// Non-blocking; read by the thread holding the input, written by any
    /// thread holding `out`.
    pub(crate) stream: TcpStream,
    /// A second descriptor of the same socket, registered for write
    /// readiness (epoll keys registrations by descriptor).
    pub(crate) out_fd: TcpStream,
    /// What dispatch needs: the peer, the I/O ordering tickets.
    pub(crate) info: call::Connection,
    recv: Mutex<RecvState>,
    pub(crate) out: Mutex<OutState>,
    /// When (ns on the service's clock) the last whole record arrived.
    pub(crate) activity_ns: std::sync::atomic::AtomicU64,
    /// Since when a record is awaited in part (0: none). Set at connect, so
    /// a connection that never sends a whole call counts as slow too.
    pub(crate) partial_since_ns: std::sync::atomic::AtomicU64,
}

/// Result of trying to write replies.
pub(crate) struct Written {
    /// Replies fully written (each releases one call in flight).
    pub(crate) replies_done: usize,
    /// The socket would block with data still queued.
    pub(crate) blocked: bool,
}

impl Conn {
    pub(crate) fn new(
        id: u64,
        pool: usize,
        stream: TcpStream,
        info: call::Connection,
        now_ns: u64,
    ) -> io::Result<Conn> {
        stream.set_nonblocking(true)?;
        let _ = stream.set_nodelay(true);
        let out_fd = stream.try_clone()?;
        Ok(Conn {
            id,
            pool,
            stream,
            out_fd,
            info,
            recv: Mutex::new(RecvState::default()),
            out: Mutex::new(OutState::default()),
            activity_ns: now_ns.into(),
            partial_since_ns: now_ns.max(1).into(),
        })
    }

    /// Read until one whole record is here. `Ok(None)`: the socket has no
    /// more data for now (what was read is kept for the next call).
    /// Only the thread that took the input event calls this. `after_call`:
    /// the caller just ran a call of this connection and looks for another
    /// before re-arming; if the last read found the socket empty, no read
    /// is tried (re-arming reports anything that arrived since).
    pub(crate) fn recv_record(
        &self,
        max_record_bytes: usize,
        after_call: bool,
        buffers: &std::sync::Arc<BufPool>,
    ) -> Result<Option<(Bytes, u64)>, RecvEnd> {
        let mut guard = self.recv.lock();
        let st = &mut *guard;
        let mut skip_read = after_call && st.drained;
        loop {
            if let Some(large) = &mut st.large {
                let need = large.len - large.buf.len();
                if need == 0 {
                    st.wait_for(&self.stream, 0);
                    let LargeFragment { buf, last, .. } = st.large.take().expect("checked");
                    if let Some(record) = st.fragment_done(buf.into_bytes(), last) {
                        return Ok(Some(record));
                    }
                    continue;
                }
                if skip_read {
                    st.drained = false;
                    return Ok(None);
                }
                let want = need.min(READ_CHUNK_BYTES);
                // SAFETY: read_spare initialises exactly the count it returns,
                // at most the `want` bytes it is given.
                let got =
                    unsafe { large.buf.fill_with(|spare| read_spare(&self.stream, &mut spare[..want])) };
                let missing = large.len - large.buf.len();
                if st.after_read(got, want)?.is_none() {
                    st.wait_for(&self.stream, missing);
                    return Ok(None);
                }
                skip_read = false;
                continue;
            }
            // A whole fragment in the buffer?
            let need = if let Some((last, len)) = fragment_mark(&st.input) {
                let total = st.record.len() + len;
                if total > max_record_bytes {
                    return Err(RecvEnd::TooLarge(total));
                }
                if st.input.len() - 4 >= len {
                    st.input.advance(4);
                    let fragment = st.input.split_to(len).freeze();
                    if let Some(record) = st.fragment_done(fragment, last) {
                        return Ok(Some(record));
                    }
                    continue;
                }
                if len > LARGE_RECORD_BYTES {
                    // Everything after the mark is the start of this fragment
                    // (it is not whole): it moves to the fragment's own buffer.
                    let mut buf = buffers.take(len);
                    buf.extend_from_slice(&st.input[4..]);
                    st.input.clear();
                    st.large = Some(LargeFragment { buf, len, last });
                    continue;
                }
                4 + len - st.input.len()
            } else {
                4 - st.input.len()
            };
            if skip_read {
                st.drained = false;
                return Ok(None);
            }
            // Nothing buffered: take the whole buffer back if no record still
            // uses it (no allocation), so that one read can take a call of
            // up to 16 KiB (an 8 KiB WRITE) rather than its first part.
            if st.input.is_empty() && st.input.capacity() < SMALL_ALLOC_BYTES {
                let _ = st.input.try_reclaim(SMALL_ALLOC_BYTES);
            }
            // Room for the rest of this fragment, or for several small calls.
            let room = st.input.capacity() - st.input.len();
            if room < need || room < 512 {
                let len = st.input.len();
                st.input.reserve(need.max(SMALL_ALLOC_BYTES - len.min(SMALL_ALLOC_BYTES)));
            }
            let want = st.input.capacity() - st.input.len();
            let got = read_spare(&self.stream, &mut st.input.spare_capacity_mut()[..want]);
            if let Ok(n) = got {
                // SAFETY: the kernel wrote `n` bytes past the old length.
                unsafe { st.input.set_len(st.input.len() + n) };
            }
            if st.after_read(got, want)?.is_none() {
                return Ok(None);
            }
            skip_read = false;
        }
    }

    /// A whole fragment (a call, usually) waits in the buffer.
    pub(crate) fn has_whole_fragment(&self) -> bool {
        let st = self.recv.lock();
        fragment_mark(&st.input).is_some_and(|(_, len)| st.input.len() - 4 >= len)
    }

    /// Bytes read past the last whole record (the start of the next one).
    pub(crate) fn has_buffered_input(&self) -> bool {
        let st = self.recv.lock();
        !st.input.is_empty() || !st.record.is_empty() || st.large.is_some()
    }

    /// Write queued replies, then `replies`, as far as the socket takes
    /// them (several per system call). Call with `out` locked.
    pub(crate) fn write_locked(
        &self,
        out: &mut OutState,
        replies: impl IntoIterator<Item = Reply>,
    ) -> Written {
        for r in replies {
            let mut pieces = r.into_pieces().peekable();
            while let Some(p) = pieces.next() {
                out.queue.push_back((p, pieces.peek().is_none()));
            }
        }
        let mut done = 0;
        if out.broken {
            done += out.queue.iter().filter(|(_, last)| *last).count();
            out.queue.clear();
            return Written { replies_done: done, blocked: false };
        }
        loop {
            let queued = out.queue.len();
            let Some((front, last)) = out.queue.front_mut() else { break };
            // A READ's data in a pipe goes by splice; runs of buffers by one sendmsg.
            let sent = match front {
                Piece::Spliced(data) => match data.send_to(self.stream.as_fd(), queued > 1) {
                    Ok(_) => {
                        if data.is_empty() {
                            let last = *last;
                            out.queue.pop_front();
                            done += usize::from(last);
                        }
                        Ok(())
                    }
                    Err(e) => Err(e),
                },
                Piece::Bytes(_) => write_vectored(&self.stream, &out.queue).map(|mut n| {
                    // Empty pieces (never queued today) must not stall the loop.
                    while let Some((Piece::Bytes(front), last)) = out.queue.front_mut() {
                        if n == 0 && !front.is_empty() {
                            break;
                        }
                        if n >= front.len() {
                            n -= front.len();
                            done += usize::from(*last);
                            out.queue.pop_front();
                        } else {
                            front.advance(n);
                            n = 0;
                        }
                    }
                }),
            };
            match sent {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Written { replies_done: done, blocked: true };
                }
                Err(e) => {
                    tracing::debug!(peer = %self.info.peer.addr, "writing a reply failed: {e}");
                    out.broken = true;
                    done += out.queue.iter().filter(|(_, last)| *last).count();
                    out.queue.clear();
                }
            }
        }
        Written { replies_done: done, blocked: false }
    }

    /// Queue a call the server makes (an NFSv4.1 callback) behind the
    /// replies already queued; it is not a reply, so it releases no call.
    /// Write it with [`Conn::write_locked`].
    pub(crate) fn queue_call(&self, out: &mut OutState, record: Bytes) {
        out.queue.push_back((Piece::Bytes(record), false));
    }

    /// Nothing left to write.
    pub(crate) fn out_idle(out: &OutState) -> bool {
        out.queue.is_empty()
    }
}

/// The record mark at the start of `input`, if all 4 bytes are there:
/// whether its fragment is the record's last, and the fragment's length.
fn fragment_mark(input: &[u8]) -> Option<(bool, usize)> {
    let word = u32::from_be_bytes(input.get(..4)?.try_into().ok()?);
    Some((word & 0x8000_0000 != 0, (word & 0x7fff_ffff) as usize))
}

/// Read into `spare` (a buffer's unused capacity, not zeroed first).
fn read_spare(s: &TcpStream, spare: &mut [std::mem::MaybeUninit<u8>]) -> io::Result<usize> {
    loop {
        // SAFETY: `spare` is valid for writes of its length; the kernel
        // initialises the `n` bytes it reports.
        let n = unsafe { libc::read(s.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Replies sent per system call at most.
const IOVECS_MAX: usize = 64;

/// `sendmsg` of the buffers at the front of `queue` (at most
/// [`IOVECS_MAX`], up to the first spliced piece, which is then flagged to
/// follow at once with `MSG_MORE`).
fn write_vectored(s: &TcpStream, queue: &VecDeque<(Piece, bool)>) -> io::Result<usize> {
    let mut iov: [libc::iovec; IOVECS_MAX] =
        [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; IOVECS_MAX];
    let mut n = 0;
    let mut flags = libc::MSG_NOSIGNAL;
    for (p, _) in queue.iter().take(IOVECS_MAX) {
        let Piece::Bytes(b) = p else {
            flags |= libc::MSG_MORE;
            break;
        };
        iov[n] = libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: b.len() };
        n += 1;
    }
    // SAFETY: a zeroed msghdr is valid (no address, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = n;
    loop {
        // SAFETY: `msg` points at `n` iovecs describing live buffers that
        // outlive the call. MSG_NOSIGNAL: a closed peer is an error here,
        // never a SIGPIPE.
        let r = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, flags) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::{Peer, Transport};
    use std::io::Write;
    use std::net::TcpListener;

    fn pair() -> (Conn, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, peer) = l.accept().unwrap();
        let info = call::Connection::new(Peer { addr: peer, local_port: 0, transport: Transport::Tcp });
        (Conn::new(1, 0, server, info, 1).unwrap(), client)
    }

    /// One record of `len` bytes, each byte its index.
    fn record(len: usize) -> Vec<u8> {
        let mut v = (0x8000_0000u32 | len as u32).to_be_bytes().to_vec();
        v.extend((0..len).map(|i| i as u8));
        v
    }

    /// Wait until the server's socket is readable (no sleeping: poll(2)).
    fn readable(c: &Conn) {
        let mut p = libc::pollfd { fd: c.stream.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        assert_eq!(unsafe { libc::poll(&mut p, 1, 10_000) }, 1, "no data within 10 s");
    }

    /// A client with one call in flight, as at queue depth 1: each 8 KiB
    /// WRITE-sized call (8400 bytes) is taken by one `read` once the call
    /// before it is done, rather than its first part by one read into the
    /// room the last call left and the rest by another.
    #[test]
    fn a_call_under_16_kib_takes_one_read_when_nothing_holds_the_buffer() {
        let (c, mut client) = pair();
        let bufs = std::sync::Arc::new(BufPool::default());
        let calls = 20;
        for _ in 0..calls {
            client.write_all(&record(8400)).unwrap();
            let rec = loop {
                readable(&c);
                if let Some((rec, _)) = c.recv_record(1 << 20, false, &bufs).unwrap() {
                    break rec;
                }
            };
            assert_eq!(rec.len(), 8400);
            assert!(rec.iter().enumerate().all(|(i, &b)| b == i as u8));
            drop(rec);
        }
        let reads = c.recv.lock().reads;
        // Loopback delivers each 8 KiB send whole; allow a rare split.
        assert!(reads <= calls + 2, "{reads} reads for {calls} calls");
    }

    /// Whether the server's socket is readable right now.
    fn readable_now(c: &Conn) -> bool {
        let mut p = libc::pollfd { fd: c.stream.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    /// A large fragment read in part makes the socket report readable only
    /// once the rest is here, not at each piece of it; once it is whole the
    /// mark is gone, so a small call after it is reported at once.
    #[test]
    fn a_large_fragment_in_part_waits_for_its_rest_and_a_small_call_after_it_does_not() {
        let (c, mut client) = pair();
        let bufs = std::sync::Arc::new(BufPool::default());
        let len = 512 * 1024;
        let whole = record(len);
        client.write_all(&whole[..32 * 1024]).unwrap();
        readable(&c);
        assert!(c.recv_record(1 << 20, false, &bufs).unwrap().is_none());
        // Loopback hands the bytes over within the write.
        client.write_all(&whole[32 * 1024..96 * 1024]).unwrap();
        assert!(!readable_now(&c), "64 KiB of the missing 480 KiB made the socket readable");
        let rest = whole[96 * 1024..].to_vec();
        let mut writer = client.try_clone().unwrap();
        let t = std::thread::spawn(move || writer.write_all(&rest).unwrap());
        let rec = loop {
            readable(&c);
            if let Some((rec, _)) = c.recv_record(1 << 20, false, &bufs).unwrap() {
                break rec;
            }
        };
        t.join().unwrap();
        assert_eq!(rec.len(), len);
        assert!(rec.iter().enumerate().all(|(i, &b)| b == i as u8));
        client.write_all(&record(200)).unwrap();
        assert!(readable_now(&c), "a small call after the large one is not reported");
        let (small, _) = c.recv_record(1 << 20, false, &bufs).unwrap().expect("the small call");
        assert_eq!(small.len(), 200);
    }

    /// While records still use the buffer (calls in flight), small calls
    /// keep sharing it: no new allocation per call.
    #[test]
    fn small_calls_in_flight_share_one_buffer() {
        let (c, mut client) = pair();
        let bufs = std::sync::Arc::new(BufPool::default());
        let mut all = Vec::new();
        for _ in 0..10 {
            all.extend_from_slice(&record(200));
        }
        client.write_all(&all).unwrap();
        let mut held = Vec::new();
        while held.len() < 10 {
            readable(&c);
            while let Some((rec, _)) = c.recv_record(1 << 20, false, &bufs).unwrap() {
                held.push(rec);
            }
        }
        let first = held[0].as_ptr() as usize;
        assert!(held.iter().all(|r| (r.as_ptr() as usize).abs_diff(first) < SMALL_ALLOC_BYTES));
    }
}
