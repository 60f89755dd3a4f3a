//! Reused buffers for bulk data: READ data in the local backend, large
//! records (a WRITE's data) on the server's receive side.
//!
//! The data is handed on as `Bytes` and used from that buffer, with no copy
//! (a READ reply is sent from it; a WRITE's data is a slice of its record
//! until `pwrite` has copied it). Allocating a fresh 1 MiB buffer each time
//! means glibc maps it, the kernel zero-fills 256 pages on first touch, and
//! then unmaps it: more CPU than copying the data once. So buffers come
//! from a pool and go back to it when the last `Bytes` of the data is
//! dropped; their pages stay mapped. Buffers are never zeroed either: the
//! system call that fills one writes what it returns and nothing else is
//! exposed.
//!
//! The pool holds at most [`POOLED_BYTES_MAX`]; a buffer that does not fit
//! is freed as usual. [`BufPool::trim`], called periodically, frees half
//! of the free buffers each time no buffer was taken since the last call,
//! so a pool that has gone quiet gives its memory back within seconds.

use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::Arc;

/// Smallest buffer handed out: small READs share a size class.
const CLASS_MIN_BYTES: usize = 4096;
/// Bytes kept in the pool at most (free buffers only).
pub const POOLED_BYTES_MAX: usize = 64 << 20;

/// Free buffers by size class (a power of two).
#[derive(Debug, Default)]
pub struct BufPool {
    free: Mutex<Free>,
}

#[derive(Debug, Default)]
struct Free {
    /// Index `k`: buffers of capacity `CLASS_MIN_BYTES << k`.
    classes: Vec<Vec<Vec<u8>>>,
    bytes: usize,
    /// A buffer was taken since the last trim.
    used: bool,
}

fn class_of(len: usize) -> (usize, usize) {
    let size = len.max(CLASS_MIN_BYTES).next_power_of_two();
    ((size / CLASS_MIN_BYTES).trailing_zeros() as usize, size)
}

/// A pooled buffer on loan; it goes back to the pool when dropped.
pub struct Loan {
    buf: Vec<u8>,
    pool: Arc<BufPool>,
}

impl std::fmt::Debug for Loan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loan").field("len", &self.buf.len()).field("capacity", &self.buf.capacity()).finish()
    }
}

impl AsRef<[u8]> for Loan {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        self.pool.give_back(buf);
    }
}

impl BufPool {
    /// An empty buffer with room for `len` bytes.
    pub fn take(self: &Arc<Self>, len: usize) -> Loan {
        let (k, size) = class_of(len);
        let reused = {
            let mut f = self.free.lock();
            f.used = true;
            let found = f.classes.get_mut(k).and_then(Vec::pop);
            if let Some(b) = &found {
                f.bytes -= b.capacity();
            }
            found
        };
        let mut buf = reused.unwrap_or_else(|| Vec::with_capacity(size));
        buf.clear();
        Loan { buf, pool: self.clone() }
    }

    fn give_back(&self, buf: Vec<u8>) {
        let cap = buf.capacity();
        if cap < CLASS_MIN_BYTES || !cap.is_power_of_two() {
            return;
        }
        let (k, _) = class_of(cap);
        let mut f = self.free.lock();
        if f.bytes + cap > POOLED_BYTES_MAX {
            return;
        }
        if f.classes.len() <= k {
            f.classes.resize_with(k + 1, Vec::new);
        }
        f.bytes += cap;
        f.classes[k].push(buf);
    }

    /// Free half of the free buffers (rounded up; the oldest of each
    /// class) if none was taken since the last call; returns how many.
    pub fn trim(&self) -> usize {
        let mut f = self.free.lock();
        if std::mem::take(&mut f.used) {
            return 0;
        }
        let total: usize = f.classes.iter().map(Vec::len).sum();
        let mut left = total.div_ceil(2);
        let mut freed_bytes = 0;
        for class in f.classes.iter_mut() {
            let n = left.min(class.len());
            freed_bytes += class.drain(..n).map(|b| b.capacity()).sum::<usize>();
            left -= n;
        }
        f.bytes -= freed_bytes;
        total.div_ceil(2)
    }

    /// Bytes held by free buffers.
    #[cfg(test)]
    pub fn pooled_bytes(&self) -> usize {
        self.free.lock().bytes
    }

    /// Free buffers held.
    #[cfg(test)]
    fn pooled_count(&self) -> usize {
        self.free.lock().classes.iter().map(Vec::len).sum()
    }
}

impl Loan {
    /// Fill the buffer with `fill`, which gets the spare room (uninitialised)
    /// and returns how many bytes it wrote at its start.
    ///
    /// # Safety
    /// `fill` must return a count no larger than the slice it got, and must
    /// have initialised that many bytes at the slice's start.
    pub unsafe fn fill_with(
        &mut self,
        fill: impl FnOnce(&mut [std::mem::MaybeUninit<u8>]) -> std::io::Result<usize>,
    ) -> std::io::Result<usize> {
        let n = fill(self.buf.spare_capacity_mut())?;
        // SAFETY: the caller promises `n` bytes past the length were written.
        unsafe { self.buf.set_len(self.buf.len() + n) };
        Ok(n)
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Append `data` (within the room the buffer was taken with, or growing
    /// it: a grown buffer is not pooled again).
    pub fn extend_from_slice(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The data as `Bytes` that return the buffer to the pool when dropped.
    pub fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_and_are_reused() {
        let pool = Arc::new(BufPool::default());
        let mut loan = pool.take(1 << 20);
        // SAFETY: writes exactly the count it returns.
        unsafe {
            loan.fill_with(|spare| {
                for b in &mut spare[..5] {
                    b.write(7);
                }
                Ok(5)
            })
        }
        .unwrap();
        let data = loan.into_bytes();
        assert_eq!(&data[..], &[7; 5]);
        let half = data.slice(1..3);
        drop(data);
        assert_eq!(pool.pooled_bytes(), 0, "still lent while a slice lives");
        drop(half);
        assert_eq!(pool.pooled_bytes(), 1 << 20);
        let again = pool.take(700_000);
        assert_eq!(pool.pooled_bytes(), 0, "the same class is reused");
        assert_eq!(again.len(), 0, "handed out empty");
    }

    #[test]
    fn free_buffers_are_freed_when_unused() {
        let pool = Arc::new(BufPool::default());
        let held: Vec<_> = (0..8).map(|_| pool.take(100_000).into_bytes()).collect();
        drop(held);
        assert_eq!(pool.pooled_count(), 8);
        // Taken since the last trim: all kept.
        assert_eq!(pool.trim(), 0);
        assert_eq!(pool.pooled_count(), 8);
        // Then, unused: half each time, down to none.
        let mut left = Vec::new();
        while pool.pooled_count() > 0 {
            pool.trim();
            left.push(pool.pooled_count());
        }
        assert_eq!(left, [4, 2, 1, 0]);
        assert_eq!(pool.pooled_bytes(), 0);
        // A take between trims keeps the rest.
        drop(pool.take(100_000).into_bytes());
        drop(pool.take(100_000).into_bytes());
        assert_eq!(pool.pooled_count(), 1);
        assert_eq!(pool.trim(), 0);
    }

    #[test]
    fn the_pool_is_bounded() {
        let pool = Arc::new(BufPool::default());
        let loans: Vec<_> = (0..(POOLED_BYTES_MAX >> 20) + 4).map(|_| pool.take(1 << 20)).collect();
        drop(loans);
        assert!(pool.pooled_bytes() <= POOLED_BYTES_MAX);
    }
}
