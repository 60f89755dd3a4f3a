//! Write-back under write delegations (`deleg_close=writeback`): what the
//! layer that answers the server's callbacks (the FUSE mount) asks of the
//! cache. While this client holds a file's write delegation no other
//! client can open it, so a close may return before the data is on the
//! server (see `Shared::close_writes_back_later`, used by `io`'s flush);
//! a recall must then write back first and give the delegation back
//! after, and a CB_GETATTR is answered with the size only this client
//! knows (or, with nothing unwritten, the size it shows).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use eagernfs_proto::nfs3::NfsFh3;

use super::fs::{CachedFs, Shared};
use super::inode::Inode;
use super::FsResult;
use crate::ops::NfsOps;

/// A [`CachedFs`] that does not keep the cache alive (for callback hooks
/// the client below the cache holds: a strong reference would be a cycle).
pub struct WeakCachedFs<C: NfsOps>(Weak<Shared<C>>);

impl<C: NfsOps> WeakCachedFs<C> {
    /// The cache, if it is still there.
    pub fn upgrade(&self) -> Option<CachedFs<C>> {
        self.0.upgrade().map(CachedFs::from_shared)
    }
}

/// What a file holds that the server has not seen: its size as this
/// client shows it, and a count that moves with every write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unwritten {
    pub size: u64,
    pub writes: u64,
}

impl<C: NfsOps> CachedFs<C> {
    /// A reference to the cache that does not keep it alive.
    pub fn downgrade(&self) -> WeakCachedFs<C> {
        WeakCachedFs(Arc::downgrade(self.shared()))
    }

    /// The caller answers recalls of write delegations by writing back
    /// first ([`CachedFs::write_back_file`]), then giving the delegation
    /// back: only then does `deleg_close=writeback` let closes return
    /// before their write-back.
    pub fn set_recalls_write_back(&self, on: bool) {
        self.shared().recalls_write_back.store(on, Ordering::Relaxed);
    }

    /// What file `fh` holds that is not on the server yet (data, deferred
    /// attribute changes, a write-back still running); `None`: nothing.
    pub fn unwritten(&self, fh: &NfsFh3) -> Option<Unwritten> {
        let inode = self.shared().inodes.by_fh(fh)?;
        let st = inode.state.lock();
        if st.file.settled() {
            return None;
        }
        Some(Unwritten { size: st.visible_attr().size, writes: st.file.gen })
    }

    /// The size file `fh` has as this cache shows it; `None`: not cached.
    pub fn cached_size(&self, fh: &NfsFh3) -> Option<u64> {
        let inode = self.shared().inodes.by_fh(fh)?;
        let size = inode.state.lock().visible_attr().size;
        Some(size)
    }

    /// Write back and commit everything file `fh` holds (a recall of its
    /// delegation: before the DELEGRETURN). Returns once it is on the
    /// server, or the write-back failed (the error, also kept for the
    /// file's open handles as any write-back error is).
    pub async fn write_back_file(&self, fh: &NfsFh3) -> FsResult<()> {
        let s = self.shared();
        let Some(inode) = s.inodes.by_fh(fh) else { return Ok(()) };
        let before = inode.state.lock().file.err_seq;
        s.sync_inode(&inode).await?;
        error_since(&inode, before)
    }
}

/// The file's last write-back error, if one came after error count `before`.
fn error_since(inode: &Inode, before: u64) -> FsResult<()> {
    let st = inode.state.lock();
    match &st.file.last_err {
        Some(e) if st.file.err_seq > before => Err(e.clone().into()),
        _ => Ok(()),
    }
}
