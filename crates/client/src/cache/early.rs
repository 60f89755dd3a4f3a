//! Creates that return before the server has made the file
//! (`dirops=async`), in a directory this client holds a delegation of.
//!
//! An untar through a synchronous client waits for the server at every
//! file's create (an OPEN that creates: one round trip, of the two or three
//! a small file costs); with `deleg_close=writeback` and `deleg_chmod=hold`
//! it is the only one left. Under a delegation of the directory no other
//! client changes the directory without the server recalling it first, and
//! a directory whose every name this mount knows (`complete`, as after its
//! own MKDIR) tells whether the name is free. So the create can be
//! answered at once, as Linux's CephFS client does under the capabilities
//! of the directory (`nowsync`): the kernel gets an inode number and a
//! file handle chosen here ([`Given`]), the OPEN goes out in the
//! background, and the file, once made, takes those numbers.
//!
//! Until it exists on the server, what the program asks of the file is
//! answered from what the create said (`early_table`): its attributes;
//! writes (up to `EARLY_FILE_BYTES_MAX`); the owner's changes of mode
//! (no set-id bits), times and size, and a chown to the owner it has; with
//! `deleg_close=writeback` its closes. Each is kept, in order, and done on
//! the file once it exists, as if it had come then: the cache then treats
//! it as any other file's (held under the write delegation the OPEN brings,
//! written back on its own schedule). Anything else about the file (a
//! read, another open, fsync, a lock, its name looked up, unlinked or
//! renamed, its directory listed) waits until the file is made and what it
//! owed is done.
//!
//! A file closed soon after its create (within `EARLY_CLOSE_WAIT`), having
//! only been written from its start, given times, a mode and a chown to
//! itself, is made in one call with all of that (`NfsOps::create_written`:
//! over NFSv4 one COMPOUND of OPEN, WRITE, SETATTR, CLOSE): an untar's file
//! costs one round trip, which nobody waits for. Anything waiting for an
//! early file (below), and anything the mount sends about its directory,
//! makes it at once.
//!
//! What keeps this honest:
//! - **Another client that changes the directory waits for them.** The
//!   directory's count of creates in flight is raised before the delegation
//!   is checked (as `dirops` does for REMOVEs); a recall of the delegation
//!   waits for it to drop (`settle_removes`) before giving it back, so the
//!   other client's create of the same name finds ours.
//! - **Only plain cases.** A regular file; no set-id or sticky bits; not
//!   `O_SYNC`/`O_DIRECT`; a directory without the set-group-id bit; and a
//!   server that has made this mount's earlier (waited-for) creates as
//!   their caller, so the owner and group shown are the ones it will give.
//!   The first create of a mount is never early.
//! - **Failures are not lost.** A create the server refuses after all
//!   (out of space, a quota) drops what the file owed, is logged and
//!   counted, and is returned by the next `fsync` of a directory or `sync`
//!   of the mount, as a failed background REMOVE is; the file's later
//!   requests fail (EIO through its open file; ESTALE for the inode, and a
//!   new lookup finds what the server has). Unmount and `sync` wait for
//!   every early file.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eagernfs_proto::nfs3::{Fattr3, Ftype3};

use super::config::{EARLY_CLOSE_WAIT, EARLY_FILE_BYTES_MAX};
use super::early_table::{EarlyFile, Given, Later};
use super::fs::{CachedFs, Entry, Shared};
use super::inode::{coarse_now, Inode};
use super::FsError;
use crate::ops::{Cred, NfsError, NfsOps};

impl<C: NfsOps> Shared<C> {
    /// Answer a create of `name` in `dir` at once and make the file in the
    /// background, if `dirops=async` allows it here (see the module docs).
    /// `None`: the caller creates it and waits.
    pub(crate) fn create_early(
        self: &Arc<Self>,
        dir: &Arc<Inode>,
        name: &[u8],
        mode: u32,
        flags: i32,
        cred: &Cred,
    ) -> Option<(Entry, u64)> {
        if !self.cfg.dirops_async || self.cfg.noac || !self.recalls_write_back.load(Ordering::Relaxed) {
            return None;
        }
        if mode & 0o7000 != 0 || flags & (libc::O_DIRECT | libc::O_DSYNC) != 0 || !dir.is_dir() {
            return None;
        }
        if !self.early.owner_kept() || !self.early.may_add(dir.ino, name) {
            return None;
        }
        let fsid = {
            let st = dir.state.lock();
            if !st.complete || st.names.contains_key(name) || st.attr.mode & libc::S_ISGID != 0 {
                return None;
            }
            st.attr.fsid
        };
        let slot = Arc::clone(&self.dirops_slots).try_acquire_owned().ok()?;
        // Counted before the delegation is looked at: see the module docs.
        dir.state.lock().creates_in_flight += 1;
        if !self.delegated(dir) {
            self.create_landed(dir);
            return None;
        }
        let ino = self.inodes.reserve();
        let given = Given {
            ino,
            // Any number but 0 (see `Inode::generation`).
            generation: ((ino.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32).max(1),
            fh: self.next_handle.fetch_add(1, Ordering::Relaxed),
        };
        let now = coarse_now();
        let attr = Fattr3 {
            ftype: Ftype3::Reg,
            mode: mode & 0o7777,
            nlink: 1,
            uid: cred.uid,
            gid: cred.gid,
            size: 0,
            used: 0,
            rdev: Default::default(),
            fsid,
            fileid: ino,
            atime: now,
            mtime: now,
            ctime: now,
        };
        let name = Bytes::copy_from_slice(name);
        self.early.add(EarlyFile::new(dir.ino, name.clone(), given, attr));
        self.counters.creates_early.fetch_add(1, Ordering::Relaxed);
        let counted = self.background.start();
        let (me, dir, cred) = (Arc::clone(self), Arc::clone(dir), cred.clone());
        // On the cache's own runtime, whichever thread the create came on.
        self.runtime.spawn(async move {
            me.make_early(&dir, &name, mode, flags, &cred, given).await;
            drop(slot);
            drop(counted);
        });
        // The attributes change as the server makes the file: the kernel
        // asks each time (and its stat meanwhile is answered from the table).
        Some((Entry { ino, attr, ttl: Duration::ZERO, generation: given.generation }, given.fh))
    }

    /// Make early file `given` on the server, then do what it owes.
    async fn make_early(
        self: &Arc<Self>,
        dir: &Arc<Inode>,
        name: &[u8],
        mode: u32,
        flags: i32,
        cred: &Cred,
        given: Given,
    ) {
        let fs = CachedFs::from_shared(Arc::clone(self));
        // A small file closed soon after (an untar's) is made, written and
        // closed in one call: it waits here for its close, a little.
        let whole = if self.client.creates_written() {
            self.early.ready(given.ino, EARLY_CLOSE_WAIT).await;
            let max = u64::from(self.cfg.wsize).min(EARLY_FILE_BYTES_MAX);
            self.early.take_whole(given.ino, max)
        } else {
            None
        };
        let made = match whole {
            Some(w) => {
                self.counters.creates_whole.fetch_add(1, Ordering::Relaxed);
                fs.create_written_in(dir, name, cred, given, w.mode, Bytes::from(w.data), w.then).await
            }
            None => fs.create_in(dir, name, mode, flags, cred, true, Some(given)).await.map(drop),
        };
        self.create_landed(dir);
        if let Err(e) = made {
            tracing::warn!(
                "a create answered before the server made the file (dirops=async) failed: {} in directory {}: {e}",
                String::from_utf8_lossy(name),
                dir.ino
            );
            // Kept for the next fsync before anyone waiting for the file wakes.
            self.counters.creates_early_failed.fetch_add(1, Ordering::Relaxed);
            self.note_late_error(e);
            let owed = self.early.abandon(given.ino);
            tracing::debug!("{owed} requests about it dropped");
            return;
        }
        while let Some(op) = self.early.next(given.ino) {
            let r = match op {
                Later::Write { offset, data } => fs.write_now(given.fh, offset, &data).await.map(drop),
                Later::Setattr { attrs, cred } => fs.setattr_now(given.ino, attrs, &cred).await.map(drop),
                Later::Flush => fs.flush_now(given.fh).await,
                Later::Release => {
                    // Its write-back may take a round trip: nothing that
                    // follows waits for it (an unlink now finds the file
                    // closed), only unmount and sync do.
                    fs.begin_release(given.fh);
                    let counted = self.background.start();
                    let fs = fs.clone();
                    self.runtime.spawn(async move {
                        if let Err(e) = fs.release_now(given.fh).await {
                            tracing::warn!("closing a file created early: {e}");
                            fs.shared().note_late_error(e);
                        }
                        drop(counted);
                    });
                    Ok(())
                }
                Later::Forget(n) => {
                    fs.forget_now(given.ino, n);
                    Ok(())
                }
            };
            if let Err(e) = r {
                tracing::warn!(
                    "a request answered before the server made the file (dirops=async) failed: {} in directory {}: {e}",
                    String::from_utf8_lossy(name),
                    dir.ino
                );
                self.note_late_error(e);
            }
        }
    }

    /// One of `dir`'s early creates was answered (or not sent).
    fn create_landed(&self, dir: &Inode) {
        {
            let mut st = dir.state.lock();
            st.creates_in_flight = st.creates_in_flight.saturating_sub(1);
        }
        self.dirops_done.notify_waiters();
    }

    /// A failure nobody waited for: the next directory fsync or mount sync
    /// returns it.
    pub(crate) fn note_late_error(&self, e: FsError) {
        let e = match e {
            FsError::Nfs(e) => e,
            other => NfsError::Connection(other.to_string()),
        };
        self.dirops_error.lock().get_or_insert(e);
    }
}

impl<C: NfsOps> CachedFs<C> {
    /// Wait until inode `ino` is not a file created early (made on the
    /// server, and what it owed done): before a request that names it and
    /// is not one `CachedFs` takes for it itself (a lock).
    pub async fn settle_early(&self, ino: u64) {
        self.shared().early.settle_ino(ino).await;
    }
}
