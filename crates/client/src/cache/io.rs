//! File data: reads through the chunk caches with read-ahead, and
//! write-back (dirty → in flight → unstable → committed) with one flusher
//! task per file.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use eagernfs_proto::nfs3::{
    Commit3ResOk, NfsFh3, Nfsstat3, Sattr3, SetTime, StableHow, WccData, Write3ResOk,
};
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::watch;
use tokio::time::Instant;

use super::budget::{ByteBudget, Release};
use super::config::{CHUNK_BYTES, DROP_BEHIND_BYTES_MIN};
use super::early_table::Later;
use super::extents::{copy_overlap, subtract, BLOCK_BYTES};
use super::fs::{CachedFs, OpenFile, Shared};
use super::inode::{merge_later, Chunk, Inode, InodeState, PendingAttrs, Unstable, SETID_BITS};
use super::{FsError, FsResult};
use crate::ops::{Cred, NfsError, NfsOps, NfsResult, OpenAccess};

/// Dirty runs a flusher looks at per decision: bounds the cost of a
/// decision when random writes leave many small runs.
const RUNS_SCANNED_MAX: usize = 64;
/// COMMITs in a row that may come back with a new verifier before we give
/// up with EIO (a server restarting in a loop).
const RESEND_ROUNDS_MAX: u32 = 8;
/// Times a read retries when our own writes race with its READs.
const READ_RETRIES_MAX: u32 = 3;

impl<C: NfsOps> CachedFs<C> {
    /// Read up to `size` bytes at `offset` through open file `fh`.
    /// Returns fewer at end of file.
    pub async fn read(&self, fh: u64, offset: u64, size: u32) -> FsResult<Bytes> {
        let s = self.shared();
        s.early.settle_fh(fh).await;
        let of = s.handle(fh)?;
        if of.direct {
            return s.read_direct(&of.inode, &of.cred, offset, size).await;
        }
        s.read_inode(&of.inode, &of.cred, offset, size).await
    }

    /// The same as [`CachedFs::read`] when every byte asked for is cached
    /// and the attributes are trusted: answered from the cache at once.
    /// Returns `None` (having changed nothing) otherwise. For callers on a
    /// thread of their own (see [`CachedFs::try_write`]); must be called
    /// inside the runtime's context: read-ahead may start here.
    pub fn try_read(&self, fh: u64, offset: u64, size: u32) -> Option<FsResult<Bytes>> {
        let s = self.shared();
        if s.early.has_fh(fh) {
            return None;
        }
        let of = match s.handle(fh) {
            Ok(of) => of,
            Err(e) => return Some(Err(e)),
        };
        if of.direct {
            return None;
        }
        let inode = &of.inode;
        let mut st = inode.state.lock();
        if !s.trusted(inode, &st, Instant::now()) {
            return None;
        }
        let file_size = st.visible_attr().size;
        if offset >= file_size || size == 0 {
            return Some(Ok(Bytes::new()));
        }
        let end = (offset + size as u64).min(file_size);
        let (first, last) = (offset / CHUNK_BYTES, (end - 1) / CHUNK_BYTES);
        let mut chunks = Vec::with_capacity((last - first + 1) as usize);
        for i in first..=last {
            chunks.push(Some(st.file.chunk(i).filter(|c| c.complete(CHUNK_BYTES))?.clone()));
        }
        s.counters.read_chunk_hits.fetch_add(chunks.len() as u64, Ordering::Relaxed);
        let data = assemble(&st.file, offset, end, first, &chunks);
        s.drop_whole_read(&mut st.file, offset, end, file_size);
        if let Some((from, to)) = s.readahead_window(&mut st.file, offset, end, file_size) {
            drop(st);
            s.start_readahead(inode, &of.cred, from, to);
        }
        Some(Ok(data))
    }

    /// Write `data` at `offset` through open file `fh`. Returns once the
    /// data is in the write-back cache (waiting for room if the mount's
    /// dirty bound, or in eager mode the file's, is reached). A write-back
    /// error not yet reported through this handle is returned instead.
    pub async fn write(&self, fh: u64, offset: u64, data: &[u8]) -> FsResult<u32> {
        self.shared().early.settle_fh(fh).await;
        self.write_now(fh, offset, data).await
    }

    /// [`CachedFs::write`] to a file that exists on the server.
    pub(crate) async fn write_now(&self, fh: u64, offset: u64, data: &[u8]) -> FsResult<u32> {
        let s = self.shared();
        let Some(of) = s.write_checks(fh, offset, data)? else { return Ok(0) };
        s.buffer_write(&of.inode, &of.cred, offset, data).await?;
        if s.cfg.noac || of.sync {
            // nfs(5): noac and sync make writes synchronous, as O_SYNC does.
            s.sync_inode(&of.inode).await?;
            s.take_error(&of.inode, &of.err_seen)?;
        }
        Ok(data.len() as u32)
    }

    /// The same as [`CachedFs::write`] when it can finish at once: the
    /// data fits in the dirty bounds without waiting and the mount is not
    /// `noac`. Returns `None` (having taken and changed nothing) when the
    /// caller must use [`CachedFs::write`] instead.
    ///
    /// This is for callers on a thread of their own, such as a FUSE
    /// request reader: answering there, without a hop to the async
    /// runtime, saves two context switches per call, and keeps the write
    /// path off the runtime's threads, which may be busy sending a 1 MiB
    /// WRITE (the driver yields the CPU between 64 KiB pieces of a send;
    /// a task queued behind it on the same runtime thread would still
    /// wait for all of it). Must be called inside the runtime's context
    /// (`Handle::enter`): write-back may start here.
    pub fn try_write(&self, fh: u64, offset: u64, data: &[u8]) -> Option<FsResult<u32>> {
        let s = self.shared();
        if s.cfg.noac {
            return None;
        }
        match s.early.push_write(fh, offset, data) {
            // Kept for the file, once it exists (`early`).
            Some(true) => return Some(Ok(data.len() as u32)),
            // It holds enough: this one waits for it (`write`).
            Some(false) => return None,
            None => {}
        }
        let of = match s.write_checks(fh, offset, data) {
            Ok(Some(of)) => of,
            Ok(None) => return Some(Ok(0)),
            Err(e) => return Some(Err(e)),
        };
        if of.sync {
            return None;
        }
        let len = data.len() as u64;
        let file_take = match &of.inode.file_budget {
            Some(b) => {
                let n = b.clamp(len);
                if !b.try_acquire(n) {
                    return None;
                }
                n
            }
            None => 0,
        };
        let take = s.budget.clamp(len);
        if !s.budget.try_acquire(take) {
            if let Some(b) = &of.inode.file_budget {
                b.release(file_take, Release::Dropped);
            }
            return None;
        }
        s.buffered(&of.inode, &of.cred, offset, data, take, file_take);
        Some(Ok(data.len() as u32))
    }

    /// A write through `fh` is by a caller who may not keep the file's
    /// set-id bits (FUSE's `FUSE_WRITE_KILL_SUIDGID`: the kernel decided,
    /// from the writer's capabilities, as it does on a local disk). The
    /// server clears them when the data reaches it (a POSIX server writes
    /// with the caller's identity); until the file is clean the cached mode
    /// shows them cleared already, so `fstat` right after `write` agrees
    /// with a local file system.
    ///
    /// Returns whether the mode seen from here changed (a caller with a
    /// cache of its own, the kernel's, should drop it).
    pub fn drop_setid_bits(&self, fh: u64) -> FsResult<bool> {
        if self.shared().early.has_fh(fh) {
            // Made without set-id bits, and given none since (`early`).
            return Ok(false);
        }
        let of = self.shared().handle(fh)?;
        let mut st = of.inode.state.lock();
        let before = st.visible_attr().mode;
        if before & SETID_BITS == 0 {
            return Ok(false);
        }
        st.file.setid_dropped = Some(of.cred.clone());
        Ok(st.visible_attr().mode != before)
    }

    /// [`CachedFs::flush`] when the file has nothing to write back and no
    /// error to report: answered at once (see `try_lookup`).
    /// And when the write-back may wait for the last close's release
    /// (see [`Shared::close_writes_back_later`]).
    pub fn try_flush(&self, fh: u64) -> Option<FsResult<()>> {
        let s = self.shared();
        if s.early.has_fh(fh) {
            // A file created early (`early`): with `deleg_close=writeback`
            // its close may go before the file is made, as it would under
            // the write delegation the OPEN asks for; else it waits.
            let later = s.cfg.deleg_close_writeback && s.early.push_close(fh, Later::Flush);
            return later.then_some(Ok(()));
        }
        let of = match s.handle(fh) {
            Ok(of) => of,
            Err(e) => return Some(Err(e)),
        };
        if quiet(&of) {
            return Some(Ok(()));
        }
        s.close_writes_back_later(&of).then(|| s.close_now(&of))
    }

    /// [`CachedFs::release`] when the file has nothing to write back and no
    /// error to report: done at once (see `try_lookup`).
    pub fn try_release(&self, fh: u64) -> Option<FsResult<()>> {
        let s = self.shared();
        if s.early.push_close(fh, Later::Release) {
            return Some(Ok(()));
        }
        let of = s.handle(fh).ok()?;
        if !quiet(&of) {
            return None;
        }
        if of.held() {
            // Its open on the server ends with a call.
            return None;
        }
        drop(of);
        let of = s.handles.lock().remove(&fh)?;
        let unused = {
            let mut st = of.inode.state.lock();
            of.count_out(&mut st);
            st.nlookup == 0 && st.open_count == 0 && st.file.settled()
        };
        if unused && of.inode.ino != super::inode::ROOT_INO {
            s.inodes.remove(of.inode.ino);
        }
        Some(Ok(()))
    }

    /// Close-to-open: write back and COMMIT everything before returning
    /// (FUSE calls this on every close of a file descriptor).
    pub async fn flush(&self, fh: u64) -> FsResult<()> {
        self.shared().early.settle_fh(fh).await;
        self.flush_now(fh).await
    }

    /// [`CachedFs::flush`] of a file that exists on the server.
    pub(crate) async fn flush_now(&self, fh: u64) -> FsResult<()> {
        let s = self.shared();
        let of = s.handle(fh)?;
        if s.close_writes_back_later(&of) {
            // Under a write delegation (`deleg_close=writeback`): the
            // write-back goes on from the release that follows the last
            // close, and a recall waits for it.
            return s.close_now(&of);
        }
        // The file's only handle: the open on the server may end with the
        // write-back (see `write_small`). Not for a file the server keeps
        // only for our opens after its last name went.
        let closing = {
            let st = of.inode.state.lock();
            st.open_count == 1 && !st.unlinked_open
        };
        let r = s.sync_inode_closing(&of.inode, closing.then_some(&*of)).await;
        s.take_error(&of.inode, &of.err_seen)?;
        r
    }

    /// fsync: write back and COMMIT, as flush does, and report any
    /// write-back error no fsync through this handle has reported yet
    /// (whether or not a write or close already did).
    pub async fn fsync(&self, fh: u64) -> FsResult<()> {
        let s = self.shared();
        s.early.settle_fh(fh).await;
        let of = s.handle(fh)?;
        let r = s.sync_inode(&of.inode).await;
        // Reported here: a later close need not say it again.
        let _ = s.take_error(&of.inode, &of.err_seen);
        s.take_error(&of.inode, &of.fsync_err_seen)?;
        r
    }

    /// The program has closed handle `fh` (the kernel sent its release):
    /// call at once, before [`CachedFs::release`] runs, so that an unlink
    /// that follows the close does not find the file open (it would give
    /// the name a hidden one instead of removing it).
    pub fn begin_release(&self, fh: u64) {
        if let Ok(of) = self.shared().handle(fh) {
            of.begin_closing();
        }
    }

    /// The last close of a handle: flush, then forget the handle. The
    /// handle is gone even if the flush reports an error.
    pub async fn release(&self, fh: u64) -> FsResult<()> {
        if self.shared().early.push_close(fh, Later::Release) {
            return Ok(());
        }
        self.release_now(fh).await
    }

    /// [`CachedFs::release`] of a file that exists on the server.
    pub(crate) async fn release_now(&self, fh: u64) -> FsResult<()> {
        let s = self.shared();
        let of = s.handle(fh)?;
        of.begin_closing();
        let closing = of.inode.state.lock().open_count == 1;
        // The close may have returned before this write-back (see `flush`):
        // unmount waits for it as for other work left running.
        let later = s.close_writes_back_later(&of).then(|| s.background.start());
        let r = s.sync_inode_closing(&of.inode, closing.then_some(&*of)).await;
        let err = s.take_error(&of.inode, &of.err_seen);
        if let (Some(_), Err(e)) = (&later, &err) {
            // Its close returned already: nobody else will hear of it.
            tracing::warn!("writing back a file closed under a write delegation failed: {e}");
        }
        if of.end_server_open() {
            // Its data is on the server already: a failed CLOSE loses nothing.
            if let Err(e) = s.client.close_file(&of.cred, &of.inode.fh, of.access).await {
                tracing::warn!("closing a file on the server: {e}");
            }
        }
        s.handles.lock().remove(&fh);
        let unused = {
            let mut st = of.inode.state.lock();
            of.count_out(&mut st);
            st.nlookup == 0 && st.open_count == 0 && st.file.settled()
        };
        if unused && of.inode.ino != super::inode::ROOT_INO {
            // The kernel forgot it while it was open.
            s.inodes.remove(of.inode.ino);
        }
        err?;
        r
    }
}

/// Whether `of`'s file has nothing to write back and no error `of` has
/// not reported yet.
fn quiet(of: &OpenFile) -> bool {
    let st = of.inode.state.lock();
    st.file.settled() && st.file.err_seq <= of.err_seen.load(Ordering::Relaxed)
}

/// A small file's data taken for one call (`Shared::take_small`).
struct SmallWrite {
    offset: u64,
    data: Bytes,
    cred: Cred,
    /// The WRITE's attribute-clock tick (its change began).
    gen: u64,
}

/// What `Shared::write_small_then` did.
pub(crate) struct SmallSetattr {
    /// The SETATTR's answer; `None`: the WRITE failed and it was not sent.
    pub(crate) result: Option<NfsResult<WccData>>,
    /// The clock tick to apply its answer at (`InodeState::end_change`).
    pub(crate) gen: u64,
    /// The held changes it carried (now `sending_attrs`).
    pub(crate) held: Option<PendingAttrs>,
    /// Everything it set: the held changes, then the caller's.
    pub(crate) attrs: Sattr3,
}

/// A WRITE or COMMIT to send; `gen` is its attribute-clock tick.
enum Job {
    Write { offset: u64, data: Bytes, stable: StableHow, cred: Cred, gen: u64 },
    Commit { upto: u64, cred: Cred, gen: u64 },
}

enum Done {
    Write { offset: u64, len: u64, gen: u64, result: Result<Write3ResOk, NfsError> },
    Commit { upto: u64, gen: u64, result: Result<Commit3ResOk, NfsError> },
}

impl<C: NfsOps> Shared<C> {
    /// Whether a close of `of` may return before its data is written back
    /// (`deleg_close=writeback`): the file is held under a write
    /// delegation, so no other client can open it before this one writes
    /// back (a recall waits for that, when the layer above has said it
    /// makes recalls write back), and `of` asks for no synchronous writes.
    pub(crate) fn close_writes_back_later(&self, of: &OpenFile) -> bool {
        self.cfg.deleg_close_writeback
            && self.recalls_write_back.load(Ordering::Relaxed)
            && !self.cfg.noac
            && !of.sync
            && !of.direct
            && self.client.write_delegated(&of.inode.fh)
    }

    /// A mode change held for the write-back (`deleg_chmod=hold`) goes to
    /// the server, after the data, before a call the server decides by the
    /// file's mode (ACCESS, OPEN): it must decide by the mode this mount
    /// shows. Rare: a program that chmods a file it is writing seldom
    /// opens it again before closing it. A failure stays on the file, as
    /// any write-back's does.
    pub(crate) async fn send_held_mode(self: &Arc<Self>, inode: &Arc<Inode>) {
        if inode.state.lock().mode_held() {
            let _ = self.sync_inode(inode).await;
        }
    }

    /// A close that leaves its write-back for later: reports only errors
    /// already known (see [`CachedFs::flush`]).
    fn close_now(&self, of: &OpenFile) -> FsResult<()> {
        self.counters.closes_written_back_later.fetch_add(1, Ordering::Relaxed);
        self.take_error(&of.inode, &of.err_seen)
    }

    /// What every write checks first: the handle, a read-only mount, a
    /// write-back error still to report through this handle, the range.
    /// `None`: an empty write, nothing to do.
    fn write_checks(&self, fh: u64, offset: u64, data: &[u8]) -> FsResult<Option<Arc<super::fs::OpenFile>>> {
        let of = self.handle(fh)?;
        self.check_writable()?;
        self.take_error(&of.inode, &of.err_seen)?;
        if data.is_empty() {
            return Ok(None);
        }
        offset.checked_add(data.len() as u64).ok_or(FsError::Invalid("write beyond 2^64"))?;
        Ok(Some(of))
    }

    /// Report (once per handle) a write-back error the file had.
    pub(crate) fn take_error(&self, inode: &Inode, seen: &std::sync::atomic::AtomicU64) -> FsResult<()> {
        let st = inode.state.lock();
        let seq = st.file.err_seq;
        if seq > seen.load(Ordering::Relaxed) {
            seen.store(seq, Ordering::Relaxed);
            if let Some(e) = &st.file.last_err {
                return Err(e.clone().into());
            }
        }
        Ok(())
    }

    // ----- reads -------------------------------------------------------

    /// A read through an `O_DIRECT` handle: from the server, not through
    /// the data cache (so another client's writes show at once, as on a
    /// kernel NFS mount), with our own unwritten data laid over it.
    async fn read_direct(&self, inode: &Arc<Inode>, cred: &Cred, offset: u64, size: u32) -> FsResult<Bytes> {
        if size == 0 {
            return Ok(Bytes::new());
        }
        let (data, _eof) = self.read_range(inode, cred, offset, size as u64).await?;
        let st = inode.state.lock();
        let server_end = offset + data.len() as u64;
        // Our unwritten data may reach past the server's end of file.
        let end = offset.saturating_add(size as u64).min(st.visible_attr().size.max(server_end));
        if end <= offset {
            return Ok(Bytes::new());
        }
        if end == server_end && !overlap_any(&st.file, offset, end) {
            return Ok(data);
        }
        let mut out = BytesMut::zeroed((end - offset) as usize);
        let n = data.len().min(out.len());
        out[..n].copy_from_slice(&data[..n]);
        overlay_unwritten(&st.file, offset, &mut out);
        Ok(out.freeze())
    }

    pub(crate) async fn read_inode(
        self: &Arc<Self>,
        inode: &Arc<Inode>,
        cred: &Cred,
        offset: u64,
        size: u32,
    ) -> FsResult<Bytes> {
        self.revalidate(inode, cred).await?;
        for attempt in 0.. {
            let (file_size, gen, ra) = {
                let mut st = inode.state.lock();
                let file_size = st.visible_attr().size;
                let end = offset.saturating_add(size as u64).min(file_size);
                let ra = if offset < end {
                    self.readahead_window(&mut st.file, offset, end, file_size)
                } else {
                    None
                };
                (file_size, st.file.gen, ra)
            };
            if offset >= file_size || size == 0 {
                return Ok(Bytes::new());
            }
            let end = (offset + size as u64).min(file_size);
            if let Some((from, to)) = ra {
                self.start_readahead(inode, cred, from, to);
            }
            let first = offset / CHUNK_BYTES;
            let last = (end - 1) / CHUNK_BYTES;
            let chunks = self.chunks_for_read(inode, cred, first, last).await?;
            let mut st = inode.state.lock();
            // A write of ours that started after our READs may have been
            // committed and dropped before we got here: read again.
            if st.file.gen != gen && attempt < READ_RETRIES_MAX {
                continue;
            }
            let data = assemble(&st.file, offset, end, first, &chunks);
            self.drop_whole_read(&mut st.file, offset, end, file_size);
            return Ok(data);
        }
        unreachable!("the loop returns")
    }

    /// Fetch `[from, to)` into the cache in the background.
    fn start_readahead(self: &Arc<Self>, inode: &Arc<Inode>, cred: &Cred, from: u64, to: u64) {
        let (me, inode, cred) = (self.clone(), inode.clone(), cred.clone());
        // Unmount waits for it: its chunks go to the disk cache.
        let counted = self.background.start();
        tokio::spawn(async move {
            let _counted = counted;
            let first = from / CHUNK_BYTES;
            let last = (to - 1) / CHUNK_BYTES;
            // Read-ahead is a hint: a failure shows up when the
            // reader gets there.
            if let Ok(n) = me.fetch_chunks(&inode, &cred, first, last, true).await {
                me.counters.readahead_chunks.fetch_add(n, Ordering::Relaxed);
            }
        });
    }

    /// `CacheConfig::drop_whole_reads`: a read that took the whole file from
    /// its start (a `cat` of a small file) leaves nothing cached here; the
    /// kernel's page cache holds it.
    fn drop_whole_read(&self, f: &mut super::inode::FileData, offset: u64, end: u64, file_size: u64) {
        if self.cfg.drop_whole_reads && offset == 0 && end >= file_size {
            let n = f.remove_chunks(..);
            self.counters.dropped_behind_chunks.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Update the sequential-read detector; returns a byte range to
    /// prefetch if the reader is sequential and the prefetched lead is
    /// down to half the window. A sequential reader's chunks far enough
    /// behind it are dropped here (`CacheConfig::drop_behind`).
    fn readahead_window(
        &self,
        f: &mut super::inode::FileData,
        offset: u64,
        end: u64,
        file_size: u64,
    ) -> Option<(u64, u64)> {
        let window = self.cfg.readahead_bytes;
        let sequential = offset == f.ra_next
            || (f.ra_seq > 0 && offset > f.ra_next.saturating_sub(CHUNK_BYTES) && offset <= f.ra_next);
        if sequential {
            f.ra_seq = f.ra_seq.saturating_add(1);
        } else {
            f.ra_seq = 0;
            f.ra_until = 0;
        }
        f.ra_next = end;
        if sequential && self.cfg.drop_behind {
            let below = offset.saturating_sub(window.max(DROP_BEHIND_BYTES_MIN)) / CHUNK_BYTES;
            if below > 0 {
                let n = f.remove_chunks(..below);
                self.counters.dropped_behind_chunks.fetch_add(n, Ordering::Relaxed);
            }
        }
        if window == 0 || f.ra_seq == 0 {
            return None;
        }
        // Prefetch whole chunks past the one the reader is in.
        let chunk_end = end.div_ceil(CHUNK_BYTES) * CHUNK_BYTES;
        let target = (chunk_end + window).min(file_size);
        if f.ra_until >= chunk_end + window / 2 || target <= chunk_end {
            return None;
        }
        let from = f.ra_until.max(chunk_end);
        f.ra_until = target;
        (from < target).then_some((from, target))
    }

    /// The chunks `first..=last`, from memory, disk or the server.
    async fn chunks_for_read(
        self: &Arc<Self>,
        inode: &Arc<Inode>,
        cred: &Cred,
        first: u64,
        last: u64,
    ) -> FsResult<Vec<Option<Chunk>>> {
        let mut out = vec![None; (last - first + 1) as usize];
        for attempt in 0..READ_RETRIES_MAX + 1 {
            let mut missing = false;
            {
                let st = inode.state.lock();
                for (i, slot) in out.iter_mut().enumerate() {
                    if slot.is_none() {
                        *slot = st.file.chunk(first + i as u64).filter(|c| c.complete(CHUNK_BYTES)).cloned();
                        missing |= slot.is_none();
                        if attempt == 0 {
                            let counter = if slot.is_some() {
                                &self.counters.read_chunk_hits
                            } else {
                                &self.counters.read_chunk_misses
                            };
                            counter.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
            if !missing {
                return Ok(out);
            }
            if attempt == READ_RETRIES_MAX {
                break;
            }
            let fetched = self.fetch_chunks_into(inode, cred, first, last, false).await?;
            for (i, c) in fetched {
                out[(i - first) as usize].get_or_insert(c);
            }
        }
        // Evicted or invalidated as fast as we could fetch it: writers are
        // busy beside us. A read must still return data (old, new or a mix,
        // as on any NFS mount), so READ what is missing for this caller
        // alone, without caching it.
        let missing: Vec<u64> =
            out.iter().enumerate().filter(|(_, c)| c.is_none()).map(|(i, _)| first + i as u64).collect();
        for (i, c) in self.read_chunks(inode, cred, &missing).await? {
            out[(i - first) as usize].get_or_insert(c);
        }
        Ok(out)
    }

    /// READ chunks `indexes` (ascending) from the server, consecutive ones
    /// together in READs of up to rsize, all at once. Caches nothing.
    async fn read_chunks(&self, inode: &Inode, cred: &Cred, indexes: &[u64]) -> FsResult<Vec<(u64, Chunk)>> {
        let per_read = (self.cfg.rsize as u64 / CHUNK_BYTES).max(1);
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &i in indexes {
            match runs.last_mut() {
                Some((start, n)) if *start + *n == i && *n < per_read => *n += 1,
                _ => runs.push((i, 1)),
            }
        }
        let reads =
            runs.iter().map(|&(start, n)| self.read_range(inode, cred, start * CHUNK_BYTES, n * CHUNK_BYTES));
        let results = futures::future::join_all(reads).await;
        let mut got = Vec::with_capacity(indexes.len());
        for ((start, n), r) in runs.into_iter().zip(results) {
            let (data, eof) = r?;
            for k in 0..n {
                let lo = ((k * CHUNK_BYTES) as usize).min(data.len());
                let hi = (lo + CHUNK_BYTES as usize).min(data.len());
                if lo == hi && !eof {
                    break;
                }
                // Past end of file a chunk is empty and final: the reader
                // sees zeros there unless we wrote something.
                got.push((start + k, Chunk::of_read(&data, lo, hi - lo, eof && hi == data.len())));
            }
        }
        Ok(got)
    }

    /// Fetch missing chunks `first..=last` into the cache (read-ahead).
    /// Returns how many this call fetched.
    pub(crate) async fn fetch_chunks(
        self: &Arc<Self>,
        inode: &Arc<Inode>,
        cred: &Cred,
        first: u64,
        last: u64,
        ahead: bool,
    ) -> FsResult<u64> {
        Ok(self.fetch_chunks_into(inode, cred, first, last, ahead).await?.len() as u64)
    }

    /// Fetch the chunks in `first..=last` that are neither cached nor being
    /// fetched by someone else (whom we wait for unless `ahead`), from the
    /// disk cache or with READs of up to rsize. Returns the chunks this
    /// call obtained.
    async fn fetch_chunks_into(
        self: &Arc<Self>,
        inode: &Arc<Inode>,
        cred: &Cred,
        first: u64,
        last: u64,
        ahead: bool,
    ) -> FsResult<Vec<(u64, Chunk)>> {
        let mut mine: Vec<u64> = Vec::new();
        let mut waits: Vec<watch::Receiver<()>> = Vec::new();
        let mut senders: Vec<watch::Sender<()>> = Vec::new();
        let (gen, validator) = {
            let mut st = inode.state.lock();
            for i in first..=last {
                if st.file.chunk(i).is_some_and(|c| c.complete(CHUNK_BYTES)) {
                    continue;
                }
                if let Some(rx) = st.file.fetching.get(&i) {
                    waits.push(rx.clone());
                    continue;
                }
                let (tx, rx) = watch::channel(());
                st.file.fetching.insert(i, rx);
                senders.push(tx);
                mine.push(i);
            }
            (st.file.gen, st.validator)
        };
        // Whatever happens below (errors, cancellation), the chunks we
        // claimed are released for others to fetch.
        let _claim = FetchClaim { inode: inode.clone(), chunks: mine.clone(), _senders: senders };
        let mut got: Vec<(u64, Chunk)> = Vec::new();
        let mut need: Vec<u64> = Vec::new();
        if let Some(disk) = &self.disk {
            let (disk, key, ids) = (disk.clone(), inode.disk_key.clone(), mine.clone());
            let loaded = tokio::task::spawn_blocking(move || {
                ids.into_iter().map(|i| (i, disk.load(&key, i, &validator))).collect::<Vec<_>>()
            })
            .await
            .map_err(|e| FsError::Io(e.to_string()))?;
            for (i, hit) in loaded {
                match hit {
                    Some((data, eof)) => {
                        self.counters.disk_hits.fetch_add(1, Ordering::Relaxed);
                        got.push((i, Chunk::alone(data, eof)));
                    }
                    None => need.push(i),
                }
            }
        } else {
            need = mine.clone();
        }
        got.extend(self.read_chunks(inode, cred, &need).await?);
        let mut inserted = Vec::new();
        let mut to_disk = Vec::new();
        {
            let mut st = inode.state.lock();
            // Only data read under the current validator may be kept.
            if st.file.gen == gen {
                for (i, c) in &got {
                    if c.complete(CHUNK_BYTES) {
                        st.file.insert_chunk(*i, c.clone());
                        inserted.push((inode.ino, *i));
                        if !c.data.is_empty() {
                            to_disk.push((*i, c.clone()));
                        }
                    }
                }
            }
        }
        self.note_inserted(inserted);
        if let (Some(disk), false) = (&self.disk, to_disk.is_empty()) {
            let (disk, key) = (disk.clone(), inode.disk_key.clone());
            // Stored before we return so a restart right after finds it.
            let _ = tokio::task::spawn_blocking(move || {
                for (i, c) in to_disk {
                    disk.store(&key, i, &validator, &c.data, c.eof);
                }
            })
            .await;
        }
        if !ahead {
            for mut rx in waits {
                // The sender is dropped when that fetch ends, either way.
                let _ = rx.changed().await;
            }
        }
        Ok(got)
    }

    /// READ `[offset, offset + len)`, in rsize pieces if needed. Returns
    /// the bytes (short at end of file) and whether end of file was reached.
    async fn read_range(&self, inode: &Inode, cred: &Cred, offset: u64, len: u64) -> FsResult<(Bytes, bool)> {
        let mut parts: Vec<Bytes> = Vec::new();
        let mut pos = offset;
        let end = offset + len;
        let mut eof = false;
        while pos < end {
            let count = (end - pos).min(self.cfg.rsize as u64) as u32;
            let gen = self.clock.tick();
            let r = self.client.read(cred, &inode.fh, pos, count).await?;
            if let Some(a) = r.file_attributes {
                self.fresh_attrs(inode, a, gen, false);
            }
            let n = r.data.len().min(count as usize);
            pos += n as u64;
            parts.push(r.data.slice(..n));
            if r.eof || n == 0 {
                eof = true;
                break;
            }
        }
        let data = if parts.len() == 1 {
            parts.pop().expect("one part")
        } else {
            let mut b = BytesMut::with_capacity((pos - offset) as usize);
            for p in parts {
                b.extend_from_slice(&p);
            }
            b.freeze()
        };
        Ok((data, eof))
    }

    /// Account freshly cached chunks and evict the oldest beyond the bound.
    pub(crate) fn note_inserted(&self, inserted: Vec<(u64, u64)>) {
        if inserted.is_empty() {
            return;
        }
        let max = self.cfg.memory_cache_bytes_max;
        let victims: Vec<(u64, u64)> = {
            let mut fifo = self.mem_fifo.lock();
            fifo.extend(inserted);
            let mut v = Vec::new();
            let over = self.mem_bytes.load(Ordering::Relaxed).saturating_sub(max);
            let mut to_free = over;
            // Entries for chunks already gone are skipped cheaply; the
            // queue is also kept within a few times the chunks that fit.
            let queue_max = (2 * max / CHUNK_BYTES + 1024) as usize;
            while let Some(front) = fifo.front().copied() {
                if to_free == 0 && fifo.len() <= queue_max {
                    break;
                }
                fifo.pop_front();
                v.push(front);
                to_free = to_free.saturating_sub(CHUNK_BYTES);
            }
            v
        };
        for (ino, idx) in victims {
            if let Some(inode) = self.inodes.get(ino) {
                inode.state.lock().file.remove_chunk(idx);
            }
        }
    }

    // ----- writes ------------------------------------------------------

    /// Put `data` into the file's dirty set once there is room.
    async fn buffer_write(
        self: &Arc<Self>,
        inode: &Arc<Inode>,
        cred: &Cred,
        offset: u64,
        data: &[u8],
    ) -> FsResult<()> {
        let len = data.len() as u64;
        // Eager mode: the file's own bound first (Rago: the writer waits
        // for its file's write-back, not for everybody's).
        let file_take = match &inode.file_budget {
            Some(b) => {
                let n = b.clamp(len);
                if !b.try_acquire(n) {
                    inode.state.lock().file.background = true;
                    self.ensure_flusher(inode);
                    b.acquire(n).await;
                }
                n
            }
            None => 0,
        };
        let take = self.budget.clamp(len);
        if !self.budget.try_acquire(take) {
            // No room: everybody's dirty data must start moving.
            self.kick_all_dirty();
            self.counters.writes_waited.fetch_add(1, Ordering::Relaxed);
            if let Some(w) = self.budget.acquire(take).await {
                if w.releases > 1 {
                    self.counters.writes_waited_several_releases.fetch_add(1, Ordering::Relaxed);
                }
                if w.last == Release::Commit {
                    self.counters.writes_waited_on_commit.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.buffered(inode, cred, offset, data, take, file_take);
        Ok(())
    }

    /// Put `data` into the file's dirty set, holding `take` bytes of the
    /// mount's budget and `file_take` of the file's; start write-back if
    /// it is due.
    fn buffered(
        self: &Arc<Self>,
        inode: &Arc<Inode>,
        cred: &Cred,
        offset: u64,
        data: &[u8],
        take: u64,
        file_take: u64,
    ) {
        let len = data.len() as u64;
        let kick = {
            let mut st = inode.state.lock();
            let f = &mut st.file;
            let grown = f.dirty.insert(offset, data);
            // Held bytes must equal dirty bytes: give back what overwrote
            // dirty data, take what a clamped huge write did not.
            settle(&self.budget, take, grown);
            if let Some(b) = &inode.file_budget {
                settle(b, file_take, grown);
            }
            f.gen += 1;
            let end = offset + len;
            f.remove_chunks(offset / CHUNK_BYTES..=(end - 1) / CHUNK_BYTES);
            f.written_end = f.written_end.max(end);
            // Not settled any more: this write is not on the server yet.
            f.written_settled = None;
            f.written_at = Some(super::inode::coarse_now());
            f.write_cred = cred.clone();
            // A write after a deferred explicit mtime sets the time itself.
            if let Some(p) = &mut f.pending_attrs {
                p.attrs.mtime = SetTime::DontChange;
            }
            if let Some(s) = &mut f.sending_attrs {
                s.mtime = SetTime::DontChange;
            }
            // Past half the mount's bound: write-behind starts here.
            let starts = !f.background && self.budget.used() * 2 >= self.budget.limit();
            f.background |= starts;
            // Only the run this write landed in can have become full.
            let full = f.dirty.run_len_at(end - 1).is_some_and(|n| n >= self.cfg.wsize as u64)
                || end.is_multiple_of(BLOCK_BYTES);
            // Wake the flusher only when it has something new to send: a
            // running flusher finds later pieces itself, and waking it on
            // every write() cost a context switch per call.
            starts || ((f.background || self.cfg.eager) && full)
        };
        self.dirty_inodes.lock().insert(inode.ino, inode.clone());
        if kick {
            self.ensure_flusher(inode);
        }
    }

    /// Write back files that were already dirty at the previous tick and
    /// still are: data waits at most about one and a half `dirty_expire`
    /// periods. Returns the files dirty now, to compare at the next tick.
    pub(crate) fn expire_dirty(
        self: &Arc<Self>,
        seen_before: &std::collections::HashSet<u64>,
    ) -> std::collections::HashSet<u64> {
        let files: Vec<Arc<Inode>> = self.dirty_inodes.lock().values().cloned().collect();
        let mut now = std::collections::HashSet::new();
        for f in files {
            now.insert(f.ino);
            if seen_before.contains(&f.ino) {
                let attrs_waiting = {
                    let mut st = f.state.lock();
                    st.file.expired = true;
                    st.file.pending_attrs.is_some()
                };
                self.ensure_flusher(&f);
                if attrs_waiting {
                    // Attribute changes of a file kept open for long go out
                    // with its expired data, not only at close.
                    let (me, f, counted) = (self.clone(), f.clone(), self.background.start());
                    tokio::spawn(async move {
                        let _counted = counted;
                        let _ = me.sync_inode(&f).await;
                    });
                }
            }
        }
        now
    }

    /// Push every file with dirty data into background write-back.
    pub(crate) fn kick_all_dirty(self: &Arc<Self>) {
        let files: Vec<Arc<Inode>> = self.dirty_inodes.lock().values().cloned().collect();
        for f in files {
            f.state.lock().file.background = true;
            self.ensure_flusher(&f);
        }
    }

    /// Wake the flushers of other files that hold uncommitted data and
    /// are not committing it: under pressure their `next_job` commits.
    fn kick_committers(self: &Arc<Self>, except: &Arc<Inode>) {
        let files: Vec<Arc<Inode>> = self.dirty_inodes.lock().values().cloned().collect();
        for f in files {
            if Arc::ptr_eq(&f, except) {
                continue;
            }
            let holds = {
                let st = f.state.lock();
                !st.file.unstable.is_empty() && st.file.commit_in_flight.is_none()
            };
            if holds {
                self.ensure_flusher(&f);
            }
        }
    }

    /// Start the file's flusher, or wake it if it runs.
    pub(crate) fn ensure_flusher(self: &Arc<Self>, inode: &Arc<Inode>) {
        let start = {
            let mut st = inode.state.lock();
            !std::mem::replace(&mut st.file.flusher_running, true)
        };
        if start {
            tokio::spawn(flusher(self.clone(), inode.clone()));
        } else {
            inode.kick.notify_one();
        }
    }

    /// Write back and COMMIT everything the file holds; returns when it is
    /// clean. Errors are recorded on the file (see `take_error`).
    pub(crate) async fn sync_inode(self: &Arc<Self>, inode: &Arc<Inode>) -> FsResult<()> {
        self.sync_inode_closing(inode, None).await
    }

    /// [`Shared::sync_inode`] for the last close of `closing`, whose open on
    /// the server may end with the write-back (`NfsOps::write_close`).
    pub(crate) async fn sync_inode_closing(
        self: &Arc<Self>,
        inode: &Arc<Inode>,
        closing: Option<&OpenFile>,
    ) -> FsResult<()> {
        if inode.state.lock().file.settled() {
            return Ok(());
        }
        self.write_small(inode, closing).await;
        self.write_back(inode).await;
        // Deferred attribute changes go after the data: an explicit mtime
        // must be the last word, after the WRITEs that move it.
        let pending = inode.state.lock().file.take_pending_attrs();
        if let Some(p) = pending {
            self.send_attrs(inode, p.attrs, &p.cred).await.ok();
        }
        self.unregister_if_clean(inode);
        Ok(())
    }

    /// A small file's whole write-back in one call: when everything to
    /// send is one dirty run of at most `wsize` bytes and nothing is moving,
    /// it goes FILE_SYNC (no COMMIT: the data is on stable storage when the
    /// close returns) with the attribute changes held for the close (the
    /// same caller's) after it, and with the end of `closing`'s open on the
    /// server: `NfsOps::write_close` (NFSv4 sends it all in one COMPOUND;
    /// NFSv3 sends WRITE, then SETATTR, as the flusher would). Otherwise,
    /// nothing: the flusher and `send_attrs` do it.
    async fn write_small(self: &Arc<Self>, inode: &Arc<Inode>, closing: Option<&OpenFile>) {
        let Some(small) = self.take_small(inode, None) else { return };
        let cred = small.cred.clone();
        let held = {
            let mut st = inode.state.lock();
            let same_caller = st.file.pending_attrs.as_ref().is_some_and(|p| p.cred == cred);
            let attrs = if same_caller { st.file.take_pending_attrs().map(|p| p.attrs) } else { None };
            attrs.map(|a| (a, st.begin_change()))
        };
        let close = closing.filter(|of| of.cred == cred && of.held()).map(|of| of.access);
        let (setattr, after) = self.send_small(inode, small, held.map(|(a, _)| a), close.zip(closing)).await;
        if let Some((attrs, _)) = held {
            let attrs_gen = after;
            let mut st = inode.state.lock();
            match setattr {
                Some(r) => {
                    st.end_change(r.as_ref().ok(), attrs_gen, Instant::now(), self.cfg.ac_bounds(false).0);
                    // As `send_attrs`: who may do what may have changed.
                    st.access.clear();
                    if let Err(e) = r {
                        st.file.record_error(e);
                    }
                }
                None => {
                    // Not sent (the WRITE failed): they are held again.
                    st.end_change(None, attrs_gen, Instant::now(), self.cfg.ac_bounds(false).0);
                    let pending = st.file.pending_attrs.take();
                    let mut again = PendingAttrs { attrs, cred: cred.clone() };
                    if let Some(later) = pending {
                        merge_later(&mut again.attrs, &later.attrs);
                    }
                    st.file.pending_attrs = Some(again);
                }
            }
            st.file.sending_attrs = None;
            if st.file.pending_attrs.is_none() {
                st.file.attrs_held_at = None;
            }
        }
        inode.progress.notify_waiters();
    }

    /// A SETATTR by `cred` of a regular file that must be on the server when
    /// it returns, after the data written before it: when that data is a
    /// small file's (see [`Shared::write_small`]) and `cred` wrote it, the
    /// data, the changes held for the close (the same caller's) and `attrs`
    /// go in one call (`NfsOps::write_close`; NFSv3 sends WRITE, then
    /// SETATTR, as the flusher and `CachedFs::setattr` would). `None` when it
    /// does not apply (nothing was done). Otherwise the SETATTR's answer
    /// (`None` if the WRITE failed and it was not sent) with the clock tick
    /// its change began at, the held changes it carried, and what it set.
    pub(crate) async fn write_small_then(
        self: &Arc<Self>,
        inode: &Arc<Inode>,
        attrs: &Sattr3,
        cred: &Cred,
    ) -> Option<SmallSetattr> {
        let small = self.take_small(inode, Some(cred))?;
        let (held, merged) = {
            let mut st = inode.state.lock();
            let same_caller = st.file.pending_attrs.as_ref().is_some_and(|p| p.cred == *cred);
            let held = if same_caller { st.file.take_pending_attrs() } else { None };
            let mut merged = held.as_ref().map_or(Sattr3::default(), |p| p.attrs);
            merge_later(&mut merged, attrs);
            st.begin_change();
            (held, merged)
        };
        let (result, gen) = self.send_small(inode, small, Some(merged), None).await;
        Some(SmallSetattr { result, gen, held, attrs: merged })
    }

    /// Take the file's data for one FILE_SYNC call if it is a small file's:
    /// one dirty run of at most `wsize` bytes, nothing in flight, unstable
    /// or being committed, no flusher and no SETATTR out (and, with `by`,
    /// written by that caller). The data moves to `inflight`, as the
    /// flusher's WRITEs do.
    fn take_small(&self, inode: &Inode, by: Option<&Cred>) -> Option<SmallWrite> {
        let mut st = inode.state.lock();
        let f = &st.file;
        let quiet = !f.flusher_running
            && f.inflight.is_empty()
            && f.unstable.is_empty()
            && f.commit_in_flight.is_none()
            && f.sending_attrs.is_none()
            && by.is_none_or(|c| *c == f.write_cred);
        let runs: Vec<(u64, usize)> = f.dirty.iter().take(2).collect();
        let (offset, len) = match runs[..] {
            [run] if quiet && run.1 as u64 <= self.cfg.wsize as u64 => run,
            _ => return None,
        };
        let cred = f.write_cred.clone();
        let data = st.file.dirty.take_front(offset, len);
        st.file.inflight.insert(offset, data.clone());
        self.inflight_total.fetch_add(len as u64, Ordering::Relaxed);
        let gen = st.begin_change();
        Some(SmallWrite { offset, data, cred, gen })
    }

    /// Send `small` FILE_SYNC with `attrs` after it (and the end of the open
    /// of `close`, whose access is given), and apply the WRITE's answer as a
    /// flusher's. Returns the SETATTR's answer (`None`: not sent), and the
    /// clock tick to apply it at: one taken once the WRITE's answer is in,
    /// since the SETATTR's attributes come after the data (they are the
    /// server's word on the size and times the write left).
    async fn send_small(
        self: &Arc<Self>,
        inode: &Arc<Inode>,
        small: SmallWrite,
        attrs: Option<Sattr3>,
        close: Option<(OpenAccess, &OpenFile)>,
    ) -> (Option<NfsResult<WccData>>, u64) {
        let SmallWrite { offset, data, cred, gen } = small;
        let len = data.len() as u64;
        let r = self.client.write_close(&cred, &inode.fh, offset, data, attrs, close.map(|c| c.0)).await;
        let (write, setattr, closed) = match r {
            Ok(w) => (Ok(w.write), w.setattr, w.closed),
            Err(e) => (Err(e), None, false),
        };
        if let (true, Some((_, of))) = (closed, close) {
            of.end_server_open();
        }
        self.complete(inode, Done::Write { offset, len, gen, result: write });
        (setattr, self.clock.tick())
    }

    /// Write back and COMMIT the file's data, and wait for any SETATTR
    /// already carrying deferred changes; held changes stay held.
    pub(crate) async fn write_back(self: &Arc<Self>, inode: &Arc<Inode>) {
        {
            let st = inode.state.lock();
            if st.file.clean() && st.file.sending_attrs.is_none() {
                return;
            }
        }
        inode.state.lock().file.flush_waiters += 1;
        let guard = FlushWaiter(inode.clone());
        loop {
            let notified = inode.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (clean, attrs_out) = {
                let st = inode.state.lock();
                (st.file.clean(), st.file.sending_attrs.is_some())
            };
            if clean && !attrs_out {
                break;
            }
            if !clean {
                self.ensure_flusher(inode);
            }
            // Else another flush's SETATTR carries deferred changes: this
            // one returns only once they are on the server too.
            notified.await;
        }
        drop(guard);
    }

    /// One SETATTR carrying `attrs`, the deferred changes just moved to
    /// `sending_attrs` (and, from `CachedFs::setattr`, the caller's own
    /// change after them). A failure is also recorded on the file and
    /// reported by the next write, close or fsync, as a write-back error
    /// is: a deferred change's caller was told it succeeded.
    pub(crate) async fn send_attrs(
        &self,
        inode: &Arc<Inode>,
        attrs: Sattr3,
        cred: &Cred,
    ) -> Result<WccData, NfsError> {
        let gen = inode.state.lock().begin_change();
        let r = self.client.setattr(cred, &inode.fh, attrs, None).await;
        {
            let mut st = inode.state.lock();
            st.end_change(r.as_ref().ok(), gen, Instant::now(), self.cfg.ac_bounds(false).0);
            // A chmod or chown changes who may do what; even a failed
            // SETATTR may have changed something before failing.
            st.access.clear();
            st.file.sending_attrs = None;
            if st.file.pending_attrs.is_none() {
                st.file.attrs_held_at = None;
            }
            if let Err(e) = &r {
                st.file.record_error(e.clone());
            }
        }
        inode.progress.notify_waiters();
        r
    }

    /// Drop a file from the write-back registry once it is clean. The
    /// registry lock is taken first, so a writer registering the file
    /// again cannot be lost between the check and the removal.
    pub(crate) fn unregister_if_clean(&self, inode: &Inode) {
        let mut reg = self.dirty_inodes.lock();
        if inode.state.lock().file.settled() {
            reg.remove(&inode.ino);
        }
    }

    /// Pick the next WRITE or COMMIT for a file, if one may go now.
    fn next_job(
        &self,
        st: &mut InodeState,
        file_budget: Option<&ByteBudget>,
        stalled: &mut bool,
    ) -> Option<Job> {
        let cfg = &self.cfg;
        let f = &mut st.file;
        // COMMIT when a flush is waiting and everything is written, or
        // early when unstable data piles up (memory pressure).
        if f.commit_in_flight.is_none() && !f.unstable.is_empty() {
            let flushing = (f.flush_waiters > 0 || f.expired) && f.dirty.is_empty() && f.inflight.is_empty();
            let pressure = f.unstable_bytes >= cfg.commit_bytes
                || self.unstable_total.load(Ordering::Relaxed) * 2 >= cfg.unstable_bytes_max;
            if flushing || pressure {
                if flushing {
                    f.expired = false;
                }
                let upto = f.next_unstable_id - 1;
                f.commit_in_flight = Some(upto);
                let cred = f.write_cred.clone();
                let gen = st.begin_change();
                return Some(Job::Commit { upto, cred, gen });
            }
        }
        if f.inflight.len() >= cfg.writes_in_flight_max || f.dirty.is_empty() {
            return None;
        }
        let wsize = cfg.wsize as u64;
        // Full pieces go when write-back is wanted at all; a short piece
        // only when someone is waiting for it (flush, a blocked writer):
        // otherwise the run may still grow into a full WRITE.
        let waiting = f.flush_waiters > 0
            || f.expired
            || cfg.noac
            || self.budget.has_waiters()
            || file_budget.is_some_and(|b| b.has_waiters());
        if !(waiting || f.background || cfg.eager) {
            return None;
        }
        let free = |start: u64, n: u64| match f.inflight.range(..start + n).next_back() {
            Some((o, d)) => o + d.len() as u64 <= start,
            None => true,
        };
        // In offset order: the first run whose next full piece may go,
        // else (if someone waits) the first whose short piece may.
        let runs = || f.dirty.iter().take(RUNS_SCANNED_MAX);
        // A run that reached its block's end cannot grow forward any more:
        // it is as full as it gets (runs never cross a block).
        let full = |s: u64, len: usize| len as u64 >= wsize || (s + len as u64).is_multiple_of(BLOCK_BYTES);
        let mut pick = runs()
            .find(|&(s, len)| full(s, len) && free(s, (len as u64).min(wsize)))
            .map(|(s, len)| (s, (len as u64).min(wsize)));
        if pick.is_none() && waiting {
            pick = runs().map(|(s, len)| (s, (len as u64).min(wsize))).find(|&(s, n)| free(s, n));
        }
        let (start, n) = pick?;
        let held = self.unstable_total.load(Ordering::Relaxed) + self.inflight_total.load(Ordering::Relaxed);
        if held + n > cfg.unstable_bytes_max {
            *stalled = true;
            if !f.stalled {
                f.stalled = true;
                self.counters.flusher_stalls_on_unstable.fetch_add(1, Ordering::Relaxed);
            }
            return None;
        }
        f.stalled = false;
        // Someone waits for all of it to be stable (close, fsync) and this
        // one WRITE is all there is: FILE_SYNC, and no COMMIT after it (the
        // Linux client's FLUSH_COND_STABLE). One round trip instead of two
        // for every small file closed after writing.
        let last_and_only = f.flush_waiters > 0
            && f.dirty.bytes() == n
            && f.inflight.is_empty()
            && f.unstable.is_empty()
            && f.commit_in_flight.is_none();
        let data = f.dirty.take_front(start, n as usize);
        f.inflight.insert(start, data.clone());
        self.inflight_total.fetch_add(n, Ordering::Relaxed);
        let cred = f.write_cred.clone();
        let sync_opens = f.sync_opens;
        let gen = st.begin_change();
        // Synchronous writers get FILE_SYNC: their data is stable when the
        // WRITE returns, with no COMMIT (nfs(5) `sync`, O_SYNC, noac).
        let stable = if cfg.noac || cfg.sync || sync_opens > 0 || last_and_only {
            StableHow::FileSync
        } else {
            StableHow::Unstable
        };

        Some(Job::Write { offset: start, data, stable, cred, gen })
    }

    /// Apply a finished WRITE or COMMIT to the file's state.
    fn complete(self: &Arc<Self>, inode: &Arc<Inode>, done: Done) {
        let now = Instant::now();
        let min = self.cfg.ac_bounds(false).0;
        let mut st = inode.state.lock();
        match done {
            Done::Write { offset, len, gen, result } => {
                let data = st.file.inflight.remove(&offset).expect("in-flight write is recorded");
                // Chunks read before the server had this data are stale now,
                // and so is any READ still out that may have passed it.
                st.file.remove_chunks(offset / CHUNK_BYTES..=(offset + len - 1) / CHUNK_BYTES);
                st.file.gen += 1;
                self.inflight_total.fetch_sub(len, Ordering::Relaxed);
                self.budget.release(len, Release::WriteDone);
                if let Some(b) = &inode.file_budget {
                    b.release(len, Release::WriteDone);
                }
                st.end_change(result.as_ref().ok().map(|r| &r.file_wcc), gen, now, min);
                match result {
                    Ok(r) => {
                        let count = (r.count as usize).min(data.len());
                        if count < data.len() {
                            // A short write: the rest goes back to be sent again.
                            let rest = data.slice(count..);
                            let added = st.file.dirty.insert_under(offset + count as u64, &rest);
                            self.budget.force_acquire(added);
                        }
                        if r.committed == StableHow::Unstable && count > 0 {
                            let f = &mut st.file;
                            let id = f.next_unstable_id;
                            f.next_unstable_id += 1;
                            f.unstable
                                .insert(id, Unstable { offset, data: data.slice(..count), verf: r.verf });
                            f.unstable_bytes += count as u64;
                            let total =
                                self.unstable_total.fetch_add(count as u64, Ordering::Relaxed) + count as u64;
                            self.counters.unstable_bytes_peak.fetch_max(total, Ordering::Relaxed);
                        }
                    }
                    Err(e) => {
                        // The server did not take it: what it holds for this
                        // range is unknown, so cached chunks go too.
                        st.invalidate_data();
                        st.file.record_error(e);
                    }
                }
            }
            Done::Commit { upto, gen, result } => {
                st.file.commit_in_flight = None;
                st.end_change(result.as_ref().ok().map(|r| &r.file_wcc), gen, now, min);
                let ids: Vec<u64> = st.file.unstable.range(..=upto).map(|(k, _)| *k).collect();
                // Newest first, so older data put back never covers newer.
                let mut newer: Vec<std::ops::Range<u64>> = st
                    .file
                    .unstable
                    .range(upto + 1..)
                    .map(|(_, u)| u.offset..u.offset + u.data.len() as u64)
                    .chain(st.file.inflight.iter().map(|(o, d)| *o..o + d.len() as u64))
                    .collect();
                let mut resent = 0u64;
                let mut dropped = 0u64;
                for id in ids.into_iter().rev() {
                    let u = st.file.unstable.remove(&id).expect("id was just listed");
                    let range = u.offset..u.offset + u.data.len() as u64;
                    dropped += u.data.len() as u64;
                    match &result {
                        Ok(c) if c.verf == u.verf => {}
                        Ok(_) => {
                            // The server restarted since this WRITE: resend.
                            for gap in subtract(range.clone(), &newer) {
                                let lo = (gap.start - u.offset) as usize;
                                let hi = (gap.end - u.offset) as usize;
                                let added = st.file.dirty.insert_under(gap.start, &u.data.slice(lo..hi));
                                self.budget.force_acquire(added);
                                resent += added;
                            }
                        }
                        Err(_) => {}
                    }
                    newer.push(range);
                }
                st.file.unstable_bytes -= dropped;
                self.unstable_total.fetch_sub(dropped, Ordering::Relaxed);
                match result {
                    Ok(_) if resent > 0 => {
                        self.counters.resent_bytes.fetch_add(resent, Ordering::Relaxed);
                        st.file.resend_rounds += 1;
                        // Data we put back must be written before the flush returns.
                        st.file.background = true;
                        if st.file.resend_rounds > RESEND_ROUNDS_MAX {
                            let lost = st.file.dirty.clear();
                            self.budget.release(lost, Release::Dropped);
                            st.file.record_error(NfsError::Nfs(Nfsstat3::Io));
                        }
                    }
                    Ok(_) => st.file.resend_rounds = 0,
                    Err(e) => st.file.record_error(e),
                }
            }
        }
        if st.file.dirty.is_empty() {
            st.file.background = false;
        }
        if st.file.clean() {
            // The server has everything: its attributes are the truth, once
            // one sent from now on arrives.
            st.settle_writes();
            st.file.setid_dropped = None;
        }
        let clean = st.file.clean();
        drop(st);
        if clean {
            self.unregister_if_clean(inode);
        }
        // Every completion frees in-flight or unstable room.
        {
            let parked: Vec<Arc<Inode>> = std::mem::take(&mut *self.stalled.lock());
            for p in parked {
                if !Arc::ptr_eq(&p, inode) {
                    self.ensure_flusher(&p);
                }
            }
        }
    }
}

/// Give back bytes taken for a write beyond what it added to the dirty
/// set, or take what it added beyond them.
fn settle(b: &super::budget::ByteBudget, taken: u64, grown: u64) {
    if taken > grown {
        b.release(taken - grown, Release::Dropped);
    } else if grown > taken {
        b.force_acquire(grown - taken);
    }
}

/// The read result: cached chunk bytes (zeros past the server's end of
/// file), with our unwritten data laid over them, oldest first.
fn assemble(
    f: &super::inode::FileData,
    offset: u64,
    end: u64,
    first: u64,
    chunks: &[Option<Chunk>],
) -> Bytes {
    let len = (end - offset) as usize;
    // Chunks of one READ, consecutive in its buffer, nothing of ours over
    // them: hand out a slice of that buffer, no copy (a 1 MiB kernel read
    // spans 16 chunks of one 1 MiB READ).
    if let Some(slice) = one_buffer(chunks, offset - first * CHUNK_BYTES, len) {
        if !overlap_any(f, offset, end) {
            return slice;
        }
    }
    let mut out = BytesMut::zeroed(len);
    for (i, c) in chunks.iter().enumerate() {
        if let Some(c) = c {
            copy_overlap((first + i as u64) * CHUNK_BYTES, &c.data, offset, &mut out);
        }
    }
    overlay_unwritten(f, offset, &mut out);
    out.freeze()
}

/// Lay our data the server may not have yet over `out` (the file's bytes
/// from `offset`), oldest first: committed-pending, in flight, dirty.
fn overlay_unwritten(f: &super::inode::FileData, offset: u64, out: &mut [u8]) {
    let end = offset + out.len() as u64;
    for u in f.unstable.values() {
        copy_overlap(u.offset, &u.data, offset, out);
    }
    for (o, d) in f.inflight.range(..end) {
        copy_overlap(*o, d, offset, out);
    }
    f.dirty.overlay(offset, out);
}

/// `len` bytes from `skip` into the concatenation of `chunks`, if they are
/// all present and lie back to back in one READ's buffer.
fn one_buffer(chunks: &[Option<Chunk>], skip: u64, len: usize) -> Option<Bytes> {
    let first = chunks.first()?.as_ref()?;
    let mut next = first.at + first.data.len();
    let mut have = first.data.len();
    for c in &chunks[1..] {
        let c = c.as_ref()?;
        let same = c.whole.as_ptr() == first.whole.as_ptr() && c.whole.len() == first.whole.len();
        if !same || c.at != next {
            return None;
        }
        next += c.data.len();
        have += c.data.len();
    }
    let lo = first.at + skip as usize;
    (skip as usize + len <= have).then(|| first.whole.slice(lo..lo + len))
}

/// Whether any of our unwritten data overlaps `[lo, hi)`.
fn overlap_any(f: &super::inode::FileData, lo: u64, hi: u64) -> bool {
    let hit = |o: u64, n: usize| o < hi && o + n as u64 > lo;
    f.dirty.overlaps(lo, hi)
        || f.inflight.range(..hi).next_back().is_some_and(|(o, d)| hit(*o, d.len()))
        || f.unstable.values().any(|u| hit(u.offset, u.data.len()))
}

/// Chunks this task is fetching; released when dropped.
struct FetchClaim {
    inode: Arc<Inode>,
    chunks: Vec<u64>,
    _senders: Vec<watch::Sender<()>>,
}

impl Drop for FetchClaim {
    fn drop(&mut self) {
        let mut st = self.inode.state.lock();
        for i in &self.chunks {
            st.file.fetching.remove(i);
        }
        // The senders drop after this, waking the waiters.
    }
}

/// Counts a caller waiting in flush/fsync; undone when it returns or is
/// cancelled.
struct FlushWaiter(Arc<Inode>);

impl Drop for FlushWaiter {
    fn drop(&mut self) {
        self.0.state.lock().file.flush_waiters -= 1;
    }
}

async fn run_job<C: NfsOps>(shared: Arc<Shared<C>>, fh: NfsFh3, job: Job) -> Done {
    match job {
        Job::Write { offset, data, stable, cred, gen } => {
            let len = data.len() as u64;
            let result = shared.client.write(&cred, &fh, offset, data, stable).await;
            Done::Write { offset, len, gen, result }
        }
        Job::Commit { upto, cred, gen } => {
            // offset 0, count 0: the whole file.
            let result = shared.client.commit(&cred, &fh, 0, 0).await;
            Done::Commit { upto, gen, result }
        }
    }
}

/// One per file with write-back work: sends WRITEs (several in flight,
/// in offset order) and COMMITs, applies their results, and exits when
/// nothing may be sent and nothing is outstanding.
async fn flusher<C: NfsOps>(shared: Arc<Shared<C>>, inode: Arc<Inode>) {
    let mut running = FuturesUnordered::new();
    loop {
        let mut stalled = false;
        let exit = {
            // Deciding to exit under the same lock `ensure_flusher` takes
            // means a write arriving now either sees us running (and its
            // kick brings us back here) or starts a new flusher.
            let mut st = inode.state.lock();
            while let Some(job) = shared.next_job(&mut st, inode.file_budget.as_ref(), &mut stalled) {
                running.push(run_job(shared.clone(), inode.fh.clone(), job));
            }
            if running.is_empty() {
                st.file.flusher_running = false;
            }
            running.is_empty()
        };
        if stalled {
            shared.stalled.lock().push(inode.clone());
            // Whoever holds the unstable bytes must COMMIT them.
            shared.kick_committers(&inode);
        }
        if exit {
            inode.progress.notify_waiters();
            return;
        }
        tokio::select! {
            Some(done) = running.next() => {
                shared.complete(&inode, done);
                inode.progress.notify_waiters();
            }
            _ = inode.kick.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_chunks_of_one_read_are_handed_out_without_a_copy() {
        let read = Bytes::from((0..=255u8).cycle().take(4 * CHUNK_BYTES as usize).collect::<Vec<_>>());
        let c = CHUNK_BYTES as usize;
        let chunks: Vec<Option<Chunk>> =
            (0..4).map(|i| Some(Chunk::of_read(&read, i * c, c, i == 3))).collect();
        let got = one_buffer(&chunks[1..3], 100, c + 50).expect("one buffer");
        assert_eq!(got.as_ptr(), read[c + 100..].as_ptr(), "a slice of the READ's buffer");
        assert_eq!(&got[..], &read[c + 100..2 * c + 150]);
        // A chunk from elsewhere (another READ, the disk cache) breaks the run.
        let mut mixed = chunks.clone();
        mixed[2] = Some(Chunk::alone(read.slice(2 * c..3 * c), false));
        assert!(one_buffer(&mixed[1..3], 0, 2 * c).is_none());
        // A missing chunk, or more than the chunks hold.
        assert!(one_buffer(&[chunks[0].clone(), None], 0, 10).is_none());
        assert!(one_buffer(&chunks[3..], 0, c + 1).is_none());
    }
}
