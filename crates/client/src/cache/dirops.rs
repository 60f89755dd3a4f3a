//! Removes that return before the server answers (`dirops=async`), in a
//! directory this client holds a delegation of.
//!
//! A tree removal (`rm -r`) through a synchronous client costs one round
//! trip per name, and waits for each: the server's answer is the floor of
//! every unlink. Under a delegation of the directory no other client
//! changes it without the server recalling the delegation first, so an
//! unlink can return once its REMOVE is sent, as Linux's CephFS client
//! does for creates and unlinks under the capabilities of the directory
//! (`nowsync`). The REMOVEs go on in the background (at most
//! `REMOVES_IN_FLIGHT_MAX` of the mount's at once), queued per directory:
//! one task per directory sends them, each call carrying every REMOVE
//! queued while the last was out (`NfsOps::remove_names`: over NFSv4 one
//! COMPOUND of up to `REMOVES_PER_CALL`), so an `rm -r` costs a round
//! trip per few names. What the program sees meanwhile is what it would
//! see after them, from the cache (the name is gone).
//!
//! What keeps this honest:
//! - **Another client that changes the directory waits for them.** The
//!   server recalls the delegation before that change; the mount gives it
//!   back only once the directory's REMOVEs are answered
//!   ([`super::CachedFs::settle_removes`], from the recall hook). A client
//!   that only reads the directory may still see a name until its REMOVE
//!   lands (milliseconds): the price of the option, and why it is off by
//!   default.
//! - **Our own later calls see them done.** Anything sent about the
//!   directory's names or attributes (LOOKUP, READDIR, GETATTR, SETATTR,
//!   a create, LINK, RENAME, RMDIR of it) first waits for the directory's
//!   REMOVEs ([`Shared::settle_dir`]): a file created under a name just
//!   removed must not meet the old one, and a `touch` of the directory must
//!   not be followed by a REMOVE that moves its times again.
//! - **Only plain cases.** A file open here (its hidden name), a file with
//!   other links (its link count would be stale meanwhile), a name whose
//!   object or type the cache does not know, a directory not delegated:
//!   the unlink waits for the server as always.
//! - **Failures are not lost.** A REMOVE that fails puts the directory's
//!   names back to "ask the server", is logged and counted, and is
//!   returned by the next `fsync` of a directory or `sync` of the mount
//!   (and unmount waits for every REMOVE).
//!
//! The race with a recall: the directory's count of REMOVEs in flight is
//! raised *before* the delegation is checked. The client marks a recalled
//! delegation as no longer held before the hook looks at that count, so
//! either the hook sees the REMOVE (and waits for it) or the unlink sees
//! no delegation (and waits for the server itself).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use eagernfs_proto::nfs3::{Ftype3, NfsFh3, WccData};

use super::config::REMOVES_PER_CALL;
use super::fs::{CachedFs, Shared};
use super::inode::{Inode, InodeState, QueuedRemove};
use super::FsResult;
use crate::ops::{Cred, NameToRemove, NfsOps, NfsResult};
use tokio::time::Instant;

impl<C: NfsOps> Shared<C> {
    /// Remove `name` (naming `victim`, of the type asked) from `dir` in the
    /// background, if `dirops=async` allows it here; `false`: the caller
    /// removes it and waits. `last`: the REMOVE also gives back the
    /// victim's delegation (see `NfsOps::remove_last_name`).
    pub(crate) async fn remove_later(
        self: &Arc<Self>,
        dir: &Arc<Inode>,
        name: &[u8],
        victim: &Arc<Inode>,
        last: bool,
        cred: &Cred,
    ) -> bool {
        if !self.cfg.dirops_async || !self.recalls_write_back.load(Ordering::Relaxed) {
            return false;
        }
        let plain = match victim.ftype {
            Ftype3::Dir => true,
            Ftype3::Reg => {
                let st = victim.state.lock();
                st.attr.nlink <= 1 && st.open_count == 0
            }
            _ => true,
        };
        if !plain {
            return false;
        }
        // Its own names first: an RMDIR must find the directory empty.
        if victim.is_dir() {
            self.settle_dir(victim).await;
        }
        let Ok(slot) = Arc::clone(&self.dirops_slots).acquire_owned().await else { return false };
        // Counted before the delegation is looked at: see the module docs.
        dir.state.lock().removes_in_flight += 1;
        if !self.delegated(dir) {
            self.remove_landed(dir);
            return false;
        }
        let gen = {
            let mut st = dir.state.lock();
            st.names.remove(name);
            st.begin_change()
        };
        // Its link count and ctime change with the REMOVE.
        victim.state.lock().attr_timeout = std::time::Duration::ZERO;
        self.counters.removes_later.fetch_add(1, Ordering::Relaxed);
        let queued = QueuedRemove {
            name: Bytes::copy_from_slice(name),
            victim: Arc::clone(victim),
            last,
            cred: cred.clone(),
            gen,
            slot,
        };
        let start = {
            let mut st = dir.state.lock();
            st.removes_queue.push(queued);
            !std::mem::replace(&mut st.removes_sending, true)
        };
        if start {
            let counted = self.background.start();
            let (me, dir) = (Arc::clone(self), Arc::clone(dir));
            // On the cache's own runtime, whichever thread the unlink came on.
            self.runtime.spawn(async move {
                me.send_removes(&dir).await;
                drop(counted);
            });
        }
        true
    }

    /// Send `dir`'s queued REMOVEs until none is left: each call carries
    /// every one queued meanwhile (up to `REMOVES_PER_CALL`, one caller's),
    /// so an `rm -r` costs a round trip per few names instead of per name.
    async fn send_removes(self: &Arc<Self>, dir: &Arc<Inode>) {
        loop {
            let batch: Vec<QueuedRemove> = {
                let mut st = dir.state.lock();
                let Some(first) = st.removes_queue.first() else {
                    st.removes_sending = false;
                    return;
                };
                let cred = first.cred.clone();
                let n = st.removes_queue.iter().take(REMOVES_PER_CALL).take_while(|q| q.cred == cred).count();
                st.removes_queue.drain(..n).collect()
            };
            let names: Vec<NameToRemove> = batch
                .iter()
                .map(|q| NameToRemove {
                    name: q.name.clone(),
                    is_dir: q.victim.is_dir(),
                    last_of: q.last.then(|| q.victim.fh.clone()),
                })
                .collect();
            let results = self.client.remove_names(&batch[0].cred, &dir.fh, &names).await;
            for (q, r) in batch.into_iter().zip(results.into_iter().chain(std::iter::repeat_with(|| None))) {
                let r = match r {
                    Some(r) => r,
                    // Not tried: an earlier name of the same call failed.
                    None => {
                        let is_dir = q.victim.is_dir();
                        if q.last {
                            self.client
                                .remove_last_name(&q.cred, &dir.fh, &q.name, is_dir, &q.victim.fh)
                                .await
                        } else {
                            self.client.remove_known(&q.cred, &dir.fh, &q.name, is_dir).await
                        }
                    }
                };
                self.remove_answered(dir, q, r);
            }
        }
    }

    /// `q`'s REMOVE was answered `r`.
    fn remove_answered(&self, dir: &Inode, q: QueuedRemove, r: NfsResult<WccData>) {
        {
            let mut st = dir.state.lock();
            st.end_change(r.as_ref().ok(), q.gen, Instant::now(), self.cfg.ac_bounds(true).0);
            if r.is_err() {
                // The name may still be there: ask the server again.
                st.complete = false;
                st.attr_timeout = std::time::Duration::ZERO;
            }
        }
        q.victim.state.lock().attr_timeout = std::time::Duration::ZERO;
        if let Err(e) = r {
            tracing::warn!(
                "a REMOVE sent after its unlink returned (dirops=async) failed: {} in directory {}: {e}",
                String::from_utf8_lossy(&q.name),
                dir.ino
            );
            self.counters.removes_later_failed.fetch_add(1, Ordering::Relaxed);
            self.dirops_error.lock().get_or_insert(e);
        }
        self.remove_landed(dir);
        drop(q.slot);
    }

    /// One of `dir`'s background REMOVEs was answered (or not sent).
    fn remove_landed(&self, dir: &Inode) {
        {
            let mut st = dir.state.lock();
            st.removes_in_flight = st.removes_in_flight.saturating_sub(1);
        }
        self.dirops_done.notify_waiters();
    }

    /// Wait until every REMOVE of `dir` sent in the background is answered,
    /// and every create answered early made (`early`): before anything
    /// about its names or attributes goes to the server.
    pub(crate) async fn settle_dir(&self, dir: &Inode) {
        // Early files waiting for their close are made now.
        self.early.hurry_parent(dir.ino);
        self.settle_dir_while(dir, |st| st.removes_in_flight > 0 || st.creates_in_flight > 0).await;
    }

    /// Wait until every REMOVE of `dir` sent in the background is answered
    /// (an early create's own OPEN: a name it reuses must be gone first).
    pub(crate) async fn settle_removes_of(&self, dir: &Inode) {
        self.settle_dir_while(dir, |st| st.removes_in_flight > 0).await;
    }

    async fn settle_dir_while(&self, dir: &Inode, busy: impl Fn(&InodeState) -> bool) {
        loop {
            let done = self.dirops_done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if !busy(&dir.state.lock()) {
                return;
            }
            done.await;
        }
    }

    /// The first background REMOVE failure not yet reported (and forget it).
    pub(crate) fn take_dirops_error(&self) -> FsResult<()> {
        match self.dirops_error.lock().take() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

impl<C: NfsOps> CachedFs<C> {
    /// Whether directory `fh` has REMOVEs sent in the background and not
    /// answered yet, or creates answered early whose file is not made yet
    /// (`dirops=async`): a recall of its delegation must wait
    /// for them ([`CachedFs::settle_removes`]) before giving it back.
    pub fn removes_pending(&self, fh: &NfsFh3) -> bool {
        self.shared().inodes.by_fh(fh).is_some_and(|d| {
            let st = d.state.lock();
            st.removes_in_flight > 0 || st.creates_in_flight > 0
        })
    }

    /// Wait until directory `fh`'s background REMOVEs are answered and its
    /// early creates made.
    pub async fn settle_removes(&self, fh: &NfsFh3) {
        if let Some(d) = self.shared().inodes.by_fh(fh) {
            self.shared().settle_dir(&d).await;
        }
    }

    /// `fsync` of directory `ino`: its background REMOVEs answered, and the
    /// first of the mount's that failed and was not reported yet.
    pub async fn fsyncdir(&self, ino: u64) -> FsResult<()> {
        let s = self.shared();
        s.early.settle_parent(ino).await;
        if let Ok(d) = s.inode(ino) {
            s.settle_dir(&d).await;
        }
        s.take_dirops_error()
    }
}
