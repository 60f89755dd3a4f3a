//! Reading small files ahead of a program that opens a directory's files
//! in listing order (`ahead` decides when and which): one round trip reads
//! several whole, each under a delegation the server grants with it
//! (`NfsOps::read_files`), so their opens, stats and reads then ask
//! nothing, exactly as for a file read before. Without a delegation there
//! is nothing to gain (close-to-open asks at every open), so what comes
//! back without one is not kept, and the directory is not read ahead again.
//!
//! The first window is read beside the cold open that shows the order;
//! later ones in the background, once the program is half-way through the
//! window before. An open of a file being read ahead waits for that read
//! instead of reading the file again.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use eagernfs_proto::nfs3::Ftype3;
use tokio::time::Instant;

use super::ahead::{AheadShared, Listed};
use super::fs::{access_bits, cache_whole, Shared, READ_AT_OPEN_BYTES_MAX};
use super::inode::Inode;
use crate::ops::{Cred, FileToRead, NfsOps};

/// Bytes a small file costs in a reply besides its data (the results of
/// its six operations, attributes included), for keeping a reply in size.
const FILE_REPLY_OVERHEAD: u64 = 512;

/// Inodes marked as being read ahead, unmarked (and their waiters woken)
/// when this is dropped, whether the read finished, failed, or was never
/// run.
struct InFlight {
    ahead: Arc<AheadShared>,
    inos: Vec<u64>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.ahead.state.lock().end(&self.inos);
        self.ahead.done.notify_waiters();
    }
}

/// Files picked to be read ahead in one round trip, marked as in flight.
struct Batch {
    files: Vec<FileToRead>,
    /// Each file's inode and its data generation when picked.
    inodes: Vec<(Arc<Inode>, u64)>,
    _marked: InFlight,
}

impl<C: NfsOps> Shared<C> {
    /// Files read ahead per round trip at most: 0 without delegations or
    /// with a disk cache (which may hold the files already).
    fn files_ahead_max(&self) -> u32 {
        if self.disk.is_some() {
            return 0;
        }
        (self.client.read_files_max() as u32).min(self.cfg.files_ahead_max)
    }

    /// A cold open of `inode` for reading (one that asks the server): if
    /// it continues a program's opens in listing order, read the next
    /// small files of its directory ahead, now. For `cred`, whose access
    /// to them is checked (and cached) as their opens would check it.
    pub(crate) async fn read_files_ahead(&self, inode: &Inode, cred: &Cred) {
        let max = self.files_ahead_max();
        if max == 0 {
            return;
        }
        let Some(listed) = inode.state.lock().listed.clone() else { return };
        let Some(range) = self.files_ahead.state.lock().cold_open(&listed, max) else { return };
        if let Some(batch) = self.pick_ahead(&listed, range) {
            self.read_ahead(&listed, batch, cred).await;
        }
    }

    /// An open of `inode` answered under its delegation: if the program
    /// is far enough into what was read ahead for it, read the next window
    /// in the background.
    pub(crate) fn files_ahead_warm(self: &Arc<Self>, inode: &Inode, cred: &Cred) {
        let max = self.files_ahead_max();
        if max == 0 {
            return;
        }
        let Some(listed) = inode.state.lock().listed.clone() else { return };
        let Some(range) = self.files_ahead.state.lock().warm_open(&listed, max) else { return };
        // Marked now, not when the task runs: an open that gets to one of
        // them first, however busy the machine, waits for this read.
        let Some(batch) = self.pick_ahead(&listed, range) else { return };
        let (me, cred) = (self.clone(), cred.clone());
        // Unmount waits for it (its delegations are returned after).
        let counted = self.background.start();
        self.runtime.spawn(async move {
            let _counted = counted;
            me.read_ahead(&listed, batch, &cred).await;
        });
    }

    /// A cold open of `inode` for reading came back: if it brought a
    /// delegation, the server grants them (again), and reading ahead is
    /// worth it.
    pub(crate) fn files_ahead_opened(&self, inode: &Inode) {
        if self.files_ahead_max() > 0 && self.delegated(inode) {
            self.files_ahead.state.lock().granted();
        }
    }

    /// Wait while inode `ino` is being read ahead: its open then finds it
    /// cached under a delegation (or reads it itself if that failed).
    pub(crate) async fn wait_files_ahead(&self, ino: u64) {
        loop {
            let done = self.files_ahead.done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if !self.files_ahead.state.lock().in_flight(ino) {
                return;
            }
            done.await;
        }
    }

    /// Of `listed`'s entries in `range`, the small regular files with
    /// nothing cached, nothing of ours and no open here, as many as one
    /// reply holds, marked as being read ahead.
    fn pick_ahead(&self, listed: &Listed, range: Range<u32>) -> Option<Batch> {
        let count = self.cfg.rsize.min(READ_AT_OPEN_BYTES_MAX as u32);
        let room = u64::from(self.cfg.rsize);
        let mut bytes = 0;
        let mut inodes = Vec::new();
        let mut files = Vec::new();
        let mut marked = InFlight { ahead: self.files_ahead.clone(), inos: Vec::new() };
        for &ino in &listed.page[range.start as usize..range.end as usize] {
            let Some(file) = self.inodes.get(ino) else { continue };
            if file.ftype != Ftype3::Reg || self.delegated(&file) {
                continue;
            }
            let (size, file_gen) = {
                let st = file.state.lock();
                let size = st.visible_attr().size;
                // Nothing of ours in it, nothing cached, no one using it.
                let idle = st.file.settled() && st.file.no_chunks() && st.open_count == 0;
                if !idle || size > READ_AT_OPEN_BYTES_MAX {
                    continue;
                }
                (size, st.file.gen)
            };
            bytes += size.min(u64::from(count)) + FILE_REPLY_OVERHEAD;
            if bytes > room {
                break;
            }
            if !self.files_ahead.state.lock().begin(ino) {
                continue;
            }
            marked.inos.push(ino);
            // What an open for reading asks.
            let check = access_bits(&file, libc::R_OK).1;
            files.push(FileToRead { fh: file.fh.clone(), count, check });
            inodes.push((file, file_gen));
        }
        (!files.is_empty()).then_some(Batch { files, inodes, _marked: marked })
    }

    /// Read `batch` in one round trip, for `cred`, and keep what comes
    /// under a delegation; then unmark it.
    async fn read_ahead(&self, listed: &Listed, batch: Batch, cred: &Cred) {
        let Batch { files, inodes: picked, _marked } = &batch;
        let gen = self.clock.tick();
        let read = match self.client.read_files(cred, files).await {
            Ok(read) => read,
            Err(e) => {
                tracing::debug!("reading {} files ahead failed: {e}", files.len());
                return;
            }
        };
        self.counters.files_read_ahead_calls.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut delegated = 0u64;
        let mut inserted = Vec::new();
        for got in read {
            let Some((file, file_gen)) = picked.get(got.index) else { continue };
            let mut st = file.state.lock();
            if let Some(granted) = got.access {
                st.remember_access(cred, files[got.index].check, granted);
            }
            if let Some(a) = got.attrs {
                st.fresh_attrs(a, gen, now, self.cfg.ac_bounds(false), true);
            }
            if !got.delegated {
                continue;
            }
            delegated += 1;
            // As at an open that reads a file whole: the data goes with
            // these attributes if nothing of ours came between.
            if let Some((data, eof)) = &got.data {
                if st.file.gen == *file_gen && st.attr_gen == gen && st.file.clean() {
                    inserted.extend(cache_whole(&mut st, file.ino, data, *eof));
                }
            }
        }
        self.note_inserted(inserted);
        self.counters.files_read_ahead.fetch_add(delegated, Ordering::Relaxed);
        if delegated == 0 {
            self.files_ahead.state.lock().refused(listed);
        } else {
            self.files_ahead.state.lock().granted();
        }
        // The results are in place: now the waiting opens may look.
        drop(batch);
    }
}
