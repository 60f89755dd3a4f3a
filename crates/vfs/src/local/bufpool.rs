//! Reused buffers for READ data.
//!
//! A READ reply's data is handed up as `Bytes` and sent from that buffer
//! (no copy into the reply). Allocating a fresh 1 MiB buffer per READ means
//! glibc maps it, the kernel zero-fills 256 pages on first touch, and then
//! unmaps it: more CPU than copying the data out of the page cache. So
//! buffers come from a small pool and go back to it when the last `Bytes`
//! of the data is dropped (after the reply is written); their pages stay
//! mapped. Buffers are never zeroed either: `pread` writes what it returns
//! and nothing else is exposed.
//!
//! The pool holds at most [`POOLED_BYTES_MAX`]; a buffer that does not fit
//! is freed as usual.

use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::Arc;

/// Smallest buffer handed out: small READs share a size class.
const CLASS_MIN_BYTES: usize = 4096;
/// Bytes kept in the pool at most (free buffers only).
pub(super) const POOLED_BYTES_MAX: usize = 64 << 20;

/// Free buffers by size class (a power of two).
#[derive(Default)]
pub(super) struct BufPool {
    free: Mutex<Free>,
}

#[derive(Default)]
struct Free {
    /// Index `k`: buffers of capacity `CLASS_MIN_BYTES << k`.
    classes: Vec<Vec<Vec<u8>>>,
    bytes: usize,
}

fn class_of(len: usize) -> (usize, usize) {
    let size = len.max(CLASS_MIN_BYTES).next_power_of_two();
    ((size / CLASS_MIN_BYTES).trailing_zeros() as usize, size)
}

/// A pooled buffer on loan; it goes back to the pool when dropped.
pub(super) struct Loan {
    buf: Vec<u8>,
    pool: Arc<BufPool>,
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
    pub(super) fn take(self: &Arc<Self>, len: usize) -> Loan {
        let (k, size) = class_of(len);
        let reused = {
            let mut f = self.free.lock();
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

    /// Bytes held by free buffers.
    #[cfg(test)]
    pub(super) fn pooled_bytes(&self) -> usize {
        self.free.lock().bytes
    }
}

impl Loan {
    /// Fill the buffer with `fill`, which gets the spare room (uninitialised)
    /// and returns how many bytes it wrote at its start.
    ///
    /// # Safety
    /// `fill` must return a count no larger than the slice it got, and must
    /// have initialised that many bytes at the slice's start.
    pub(super) unsafe fn fill_with(
        &mut self,
        fill: impl FnOnce(&mut [std::mem::MaybeUninit<u8>]) -> std::io::Result<usize>,
    ) -> std::io::Result<usize> {
        let n = fill(self.buf.spare_capacity_mut())?;
        // SAFETY: the caller promises `n` bytes past the length were written.
        unsafe { self.buf.set_len(self.buf.len() + n) };
        Ok(n)
    }

    /// Bytes written so far.
    pub(super) fn len(&self) -> usize {
        self.buf.len()
    }

    /// The data as `Bytes` that return the buffer to the pool when dropped.
    pub(super) fn into_bytes(self) -> Bytes {
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
    fn the_pool_is_bounded() {
        let pool = Arc::new(BufPool::default());
        let loans: Vec<_> = (0..(POOLED_BYTES_MAX >> 20) + 4).map(|_| pool.take(1 << 20)).collect();
        drop(loans);
        assert!(pool.pooled_bytes() <= POOLED_BYTES_MAX);
    }
}
