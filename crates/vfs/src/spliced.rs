//! READ data that never passes through user space.
//!
//! A READ answered by copying costs the server two copies of every byte:
//! `pread` from the page cache into a buffer, and `sendmsg` from the buffer
//! into the socket. With `splice(2)` the file's page-cache pages are moved
//! into a pipe by reference (no copy), and later from the pipe into the
//! socket, again by reference: the server never touches the data. knfsd
//! answers READ the same way (its "splice read").
//!
//! The file-to-pipe step happens when the READ is executed, where blocking
//! on the disk is expected; it also tells exactly how many bytes there are,
//! so the reply's `count` is never a promise the file might break by
//! shrinking. The pipe-to-socket step happens when the reply is written and
//! never waits for the disk: the pages are already in the pipe. Like any
//! reader of the page cache, a READ may see a concurrent WRITE of the same
//! range in part.
//!
//! Pipes are reused from a bounded [`PipePool`]; a pipe goes back to the
//! pool only when it is empty.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;

/// Size of a pipe buffer slot: one page.
const PAGE: usize = 4096;

/// What each pipe is asked to hold: enough for a 1 MiB READ (the usual
/// `rsize`), the most an unprivileged pipe may hold by default
/// (`/proc/sys/fs/pipe-max-size`).
const PIPE_BYTES: usize = 1 << 20;

/// A pipe's two ends, both non-blocking.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    /// A new pipe of (up to) `bytes` capacity; returns it and what it got.
    fn new(bytes: usize) -> io::Result<(Pipe, usize)> {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 just returned these two descriptors; we own them.
        let pipe =
            unsafe { Pipe { read: OwnedFd::from_raw_fd(fds[0]), write: OwnedFd::from_raw_fd(fds[1]) } };
        // SAFETY: F_SETPIPE_SZ / F_GETPIPE_SZ take and return integers.
        unsafe { libc::fcntl(pipe.write.as_raw_fd(), libc::F_SETPIPE_SZ, bytes as libc::c_int) };
        // SAFETY: as above.
        let got = unsafe { libc::fcntl(pipe.write.as_raw_fd(), libc::F_GETPIPE_SZ) };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((pipe, got as usize))
    }
}

/// Reusable pipes for spliced READs.
pub struct PipePool {
    free: Mutex<Vec<Pipe>>,
    /// Most idle pipes kept (each holds two descriptors).
    keep: usize,
    /// Capacity of every pipe in the pool (what the kernel granted).
    capacity: usize,
}

impl PipePool {
    /// A pool keeping at most `keep` idle pipes. `None` when this system
    /// cannot make a pipe big enough to be worth it (then copy instead).
    pub fn new(keep: usize) -> Option<Arc<PipePool>> {
        let (first, capacity) = Pipe::new(PIPE_BYTES).ok()?;
        if capacity < 64 * 1024 {
            return None;
        }
        Some(Arc::new(PipePool { free: Mutex::new(vec![first]), keep, capacity }))
    }

    /// Whether `len` bytes starting at file `offset` fit one pipe: each
    /// page the range touches takes a slot.
    pub fn fits(&self, offset: u64, len: usize) -> bool {
        let first = (offset % PAGE as u64) as usize;
        (first + len).div_ceil(PAGE) <= self.capacity / PAGE
    }

    fn take(&self) -> io::Result<Pipe> {
        if let Some(p) = self.free.lock().pop() {
            return Ok(p);
        }
        let (p, got) = Pipe::new(self.capacity)?;
        if got < self.capacity {
            // The user's pipe memory is used up (pipe-user-pages-soft): the
            // caller copies instead, as for any other shortage.
            return Err(io::Error::from_raw_os_error(libc::ENOMEM));
        }
        Ok(p)
    }

    fn give_back(&self, p: Pipe) {
        let mut free = self.free.lock();
        if free.len() < self.keep {
            free.push(p);
        }
    }

    /// Move up to `len` bytes of `file` at `offset` into a pipe (by
    /// reference, blocking on the disk if they are not cached). Fewer come
    /// back at the end of the file. The range must [`fits`](Self::fits).
    pub fn splice_from(
        self: &Arc<Self>,
        file: BorrowedFd<'_>,
        offset: u64,
        len: usize,
    ) -> io::Result<Spliced> {
        debug_assert!(self.fits(offset, len));
        let pipe = self.take()?;
        let mut data = Spliced { pipe: Some(pipe), len: 0, pool: Arc::clone(self) };
        while data.len < len {
            let mut off = (offset + data.len as u64) as libc::loff_t;
            let want = len - data.len;
            let w = data.pipe.as_ref().map_or(-1, |p| p.write.as_raw_fd());
            // SAFETY: both descriptors are open; `off` is a valid loff_t the
            // kernel updates. The pipe is non-blocking and has room for the
            // whole range (`fits`), so only the file may make this wait.
            let n = unsafe {
                libc::splice(file.as_raw_fd(), &mut off, w, std::ptr::null_mut(), want, libc::SPLICE_F_MOVE)
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    // The pipe is full after all (a range that touches more
                    // pages than counted): answer with what is in it.
                    io::ErrorKind::WouldBlock if data.len > 0 => break,
                    _ => return Err(e),
                }
            }
            if n == 0 {
                break;
            }
            data.len += n as usize;
        }
        Ok(data)
    }
}

/// Bytes of a file waiting in a pipe, to be moved into a socket.
pub struct Spliced {
    /// `None` only while being dropped.
    pipe: Option<Pipe>,
    /// Bytes still in the pipe.
    len: usize,
    pool: Arc<PipePool>,
}

impl std::fmt::Debug for Spliced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spliced").field("len", &self.len).finish()
    }
}

impl Spliced {
    /// Bytes not yet sent.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Move as much as `sock` takes without blocking; the count moved.
    /// `WouldBlock` when it takes nothing. `more`: further data follows at
    /// once (`SPLICE_F_MORE`, so the last segment is not sent short).
    pub fn send_to(&mut self, sock: BorrowedFd<'_>, more: bool) -> io::Result<usize> {
        let Some(pipe) = &self.pipe else { return Ok(0) };
        let flags =
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK | if more { libc::SPLICE_F_MORE } else { 0 };
        loop {
            // SAFETY: both descriptors are open; null offsets mean "the
            // descriptors' own positions", as pipes and sockets require.
            let n = unsafe {
                libc::splice(
                    pipe.read.as_raw_fd(),
                    std::ptr::null_mut(),
                    sock.as_raw_fd(),
                    std::ptr::null_mut(),
                    self.len,
                    flags,
                )
            };
            if n >= 0 {
                self.len -= (n as usize).min(self.len);
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// The bytes still in the pipe, copied out (for a datagram or a reply
    /// cache, which need one buffer).
    pub fn into_bytes(mut self) -> io::Result<Bytes> {
        let mut buf = BytesMut::zeroed(self.len);
        let mut at = 0;
        let fd = self.pipe.as_ref().map_or(-1, |p| p.read.as_raw_fd());
        while at < buf.len() {
            // SAFETY: `buf[at..]` is valid for writes of its length.
            let n = unsafe { libc::read(fd, buf[at..].as_mut_ptr().cast(), buf.len() - at) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                break;
            }
            at += n as usize;
            self.len -= n as usize;
        }
        buf.truncate(at);
        Ok(buf.freeze())
    }
}

impl Drop for Spliced {
    fn drop(&mut self) {
        // Only an empty pipe is reused; one with data left is closed.
        if let Some(p) = self.pipe.take() {
            if self.len == 0 {
                self.pool.give_back(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    fn file_with(bytes: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    #[test]
    fn a_range_goes_through_a_pipe_into_a_socket_unchanged() {
        let pool = PipePool::new(4).expect("pipes of at least 64 KiB");
        let content: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let f = file_with(&content);
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let mut d = pool.splice_from(f.as_fd(), 1234, 200_000).unwrap();
        assert_eq!(d.len(), 200_000);
        // The socket takes what its buffer holds; read and send until done.
        let mut got = Vec::new();
        let mut chunk = vec![0u8; 65536];
        while !d.is_empty() {
            match d.send_to(b.as_fd(), false) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
            a.set_nonblocking(true).unwrap();
            while let Ok(n) = a.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&chunk[..n]);
            }
        }
        drop(b);
        a.set_nonblocking(false).unwrap();
        a.read_to_end(&mut got).unwrap();
        assert_eq!(got, &content[1234..201_234]);
    }

    #[test]
    fn the_end_of_the_file_shortens_the_range_and_pipes_are_reused() {
        let pool = PipePool::new(1).unwrap();
        let f = file_with(b"hello, pipes");
        let d = pool.splice_from(f.as_fd(), 7, 4096).unwrap();
        assert_eq!(d.len(), 5);
        assert_eq!(&d.into_bytes().unwrap()[..], b"pipes");
        // The emptied pipe went back; the next range reuses it.
        assert_eq!(pool.free.lock().len(), 1);
        let d = pool.splice_from(f.as_fd(), 100, 10).unwrap();
        assert!(d.is_empty());
        drop(d);
        assert_eq!(pool.free.lock().len(), 1);
    }

    #[test]
    fn a_pipe_dropped_with_data_is_not_reused() {
        let pool = PipePool::new(4).unwrap();
        let f = file_with(&[1u8; 10_000]);
        let before = pool.free.lock().len();
        let d = pool.splice_from(f.as_fd(), 0, 10_000).unwrap();
        assert_eq!(pool.free.lock().len(), before - 1);
        drop(d);
        // Its bytes would otherwise lead the next reply.
        assert_eq!(pool.free.lock().len(), before - 1);
    }

    #[test]
    fn fits_counts_the_pages_a_range_touches() {
        let pool = PipePool::new(1).unwrap();
        let cap = pool.capacity;
        assert!(pool.fits(0, cap));
        assert!(!pool.fits(1, cap));
        assert!(pool.fits(4096, cap));
        assert!(pool.fits(100, cap - 4096));
    }
}
