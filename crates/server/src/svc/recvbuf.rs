//! Reused receive buffers for large records (a WRITE's data, mostly).
//!
//! A record larger than [`LARGE_RECORD_BYTES`] is read into a buffer of its
//! own, and the call keeps it until it is done (a WRITE's data is a slice of
//! it until `pwritev` has copied it into the file). Allocated afresh for
//! every call, such a buffer comes from `mmap` (glibc maps allocations of a
//! megabyte), and the kernel faults in and zeroes every page of it while
//! `read` fills it, then unmaps it when the call drops it: on a stream of
//! 1 MiB WRITEs that was 7 % of the server's CPU. Here a dropped record's
//! buffer goes back to an idle list and the next large record of the same
//! size class reuses its pages, already mapped.
//!
//! Size classes are multiples of 64 KiB, so a 1 MiB WRITE (its data plus
//! about 200 bytes of header) takes a 1088 KiB buffer and a 64 KiB WRITE a
//! 128 KiB one, never one sized for the largest record. The idle list is
//! bounded in count and bytes; a buffer that would exceed either is freed.
//! It also shrinks when unused: the service's watchdog calls [`RecvBuffers::trim`]
//! every second, and each call that finds no buffer taken since the last one
//! frees half of the idle buffers, so a server that has gone quiet returns
//! the memory within seconds.

use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::Arc;

/// Records longer than this are read into a reused buffer of their own.
pub(crate) const LARGE_RECORD_BYTES: usize = 16 * 1024;
/// Buffer capacities are multiples of this.
const CLASS_BYTES: usize = 64 * 1024;
/// Idle buffers kept at most.
const IDLE_MAX: usize = 64;
/// Bytes of idle buffers kept at most.
const IDLE_BYTES_MAX: usize = 96 << 20;

/// The idle buffers, shared by every connection of a service.
#[derive(Debug, Default)]
pub(crate) struct RecvBuffers {
    idle: Mutex<Idle>,
}

#[derive(Debug, Default)]
struct Idle {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
    /// A buffer was taken since the last trim.
    used: bool,
}

/// The capacity of the buffer for a record of `len` bytes.
fn class(len: usize) -> usize {
    len.max(1).div_ceil(CLASS_BYTES) * CLASS_BYTES
}

impl RecvBuffers {
    pub(crate) fn new() -> Arc<RecvBuffers> {
        Arc::new(RecvBuffers::default())
    }

    /// An empty buffer with room for `len` bytes: an idle one of the same
    /// class if there is one, else a new one.
    pub(crate) fn take(&self, len: usize) -> Vec<u8> {
        let cap = class(len);
        {
            let mut idle = self.idle.lock();
            idle.used = true;
            if let Some(i) = idle.bufs.iter().rposition(|b| b.capacity() == cap) {
                let b = idle.bufs.swap_remove(i);
                idle.bytes -= cap;
                return b;
            }
        }
        Vec::with_capacity(cap)
    }

    /// `buf` as a record: shared without a copy, and back on the idle list
    /// when the last slice of it is dropped.
    pub(crate) fn freeze(self: &Arc<Self>, buf: Vec<u8>) -> Bytes {
        Bytes::from_owner(Lent { buf, home: Arc::clone(self) })
    }

    fn give_back(&self, mut buf: Vec<u8>) {
        let cap = buf.capacity();
        if !cap.is_multiple_of(CLASS_BYTES) {
            return;
        }
        buf.clear();
        let mut idle = self.idle.lock();
        if idle.bufs.len() < IDLE_MAX && idle.bytes + cap <= IDLE_BYTES_MAX {
            idle.bytes += cap;
            idle.bufs.push(buf);
        }
    }

    /// Free half of the idle buffers if none was taken since
    /// the last call; returns how many were freed.
    pub(crate) fn trim(&self) -> usize {
        let mut idle = self.idle.lock();
        if std::mem::take(&mut idle.used) {
            return 0;
        }
        let n = idle.bufs.len().div_ceil(2);
        let freed: usize = idle.bufs.drain(..n).map(|b| b.capacity()).sum();
        idle.bytes -= freed;
        n
    }

    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.idle.lock().bufs.len()
    }
}

/// A buffer lent to a record.
struct Lent {
    buf: Vec<u8>,
    home: Arc<RecvBuffers>,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.home.give_back(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_record_lends_its_pages_to_the_next_of_its_class() {
        let pool = RecvBuffers::new();
        let mut b = pool.take(1 << 20 | 200);
        assert_eq!(b.capacity(), (1 << 20) + CLASS_BYTES);
        b.extend_from_slice(&[7u8; (1 << 20) + 200]);
        let ptr = b.as_ptr();
        let record = pool.freeze(b);
        let data = record.slice(200..);
        drop(record);
        assert_eq!(pool.idle_count(), 0, "a slice still holds the buffer");
        assert!(data.iter().all(|&x| x == 7));
        drop(data);
        assert_eq!(pool.idle_count(), 1);
        // Another class does not take it; the same class does, emptied.
        let small = pool.take(100 * 1024);
        assert_eq!(small.capacity(), 2 * CLASS_BYTES);
        assert_ne!(small.as_ptr(), ptr);
        let again = pool.take((1 << 20) + 150);
        assert_eq!(again.as_ptr(), ptr);
        assert!(again.is_empty());
        assert_eq!(pool.idle_count(), 0);
    }

    #[test]
    fn idle_buffers_are_freed_when_unused() {
        let pool = RecvBuffers::new();
        let held: Vec<Bytes> = (0..8).map(|_| pool.freeze(pool.take(100_000))).collect();
        drop(held);
        assert_eq!(pool.idle_count(), 8);
        // Taken since the last trim: all kept.
        assert_eq!(pool.trim(), 0);
        assert_eq!(pool.idle_count(), 8);
        // Then, unused: half each time, down to none.
        let mut left = Vec::new();
        while pool.idle_count() > 0 {
            pool.trim();
            left.push(pool.idle_count());
        }
        assert_eq!(left, [4, 2, 1, 0]);
        assert_eq!(pool.idle.lock().bytes, 0);
        // A take between trims keeps the rest.
        drop(pool.freeze(pool.take(100_000)));
        drop(pool.freeze(pool.take(100_000)));
        assert_eq!(pool.idle_count(), 1);
        assert_eq!(pool.trim(), 0);
    }

    #[test]
    fn the_idle_list_is_bounded() {
        let pool = RecvBuffers::new();
        let held: Vec<Bytes> = (0..IDLE_MAX + 10).map(|_| pool.freeze(pool.take(20_000))).collect();
        drop(held);
        assert_eq!(pool.idle_count(), IDLE_MAX);
        let big = (IDLE_BYTES_MAX / (4 << 20)) + 5;
        let pool = RecvBuffers::new();
        let held: Vec<Bytes> = (0..big).map(|_| pool.freeze(pool.take(4 << 20))).collect();
        drop(held);
        assert!(pool.idle.lock().bytes <= IDLE_BYTES_MAX);
        assert_eq!(pool.idle_count(), IDLE_BYTES_MAX / (4 << 20));
    }
}
