//! The lock table's hook into a backend that enforces locks itself
//! ([`eagernfs_vfs::FileLocks`]: CephFS), so that a lock granted to an NFS
//! client here also excludes the file system's other clients, and theirs
//! stop ours.
//!
//! The table stays the lock manager's record (owners, queues, grace period,
//! GRANTED callbacks, what a restarted host held); the backend is asked
//! before any grant and told of every release. Owners are 64-bit ids: a
//! hash of NLM's (host, owner handle, svid), the same on every server, so a
//! server taking over another's clients (issue 20) names their locks alike;
//! NFSv4 lock owners can be hashed into the same space. Requests the backend
//! refused wait in the table's queue; a thread of their own retries them
//! and announces what it grants (GRANTED).
//!
//! # Why polling, and how often
//! CephFS tells a client nothing when another client's lock goes, unless
//! the client waits for it in a blocking `ceph_ll_setlk`. That call cannot
//! be cancelled through libcephfs's C API (the interrupt the MDS supports is
//! wired only for FUSE, `Client::ll_interrupt`), so an NLM CANCEL, a client
//! that goes away or a server that stops would leave a request waiting in
//! the MDS, which grants it later to a session that no longer wants it (or
//! that nobody uses any more: held until the MDS evicts it, minutes later),
//! and an unmount waits for it. So requests are polled, as ganesha does:
//! [`FAST_FILES`] of the waiting files (the same ones while they wait) every
//! [`RETRY_FAST`] (the time from another head's unlock to GRANTED is half
//! that on average), all of them every [`RETRY_SLOW`]. A poll is one
//! non-blocking `setlk` to the MDS per waiting request, so the MDS load is
//! bounded: about `FAST_FILES / RETRY_FAST` + (waiting files) / `RETRY_SLOW`
//! polls per second, however often clients ask. The thread sleeps while
//! nothing waits, and is woken by the next refusal.

use bytes::Bytes;
use eagernfs_proto::nfs3::NfsFh3;
use eagernfs_vfs::{Backend, FileHandle, FsError, LockRange};
use eagernfs_xdr::Opaque;
use siphasher::sip::SipHasher24;
use std::hash::Hasher;
use std::sync::Arc;
use std::time::Duration;

use super::locks::{Admit, Held, Mirror, NoMirror, Owner, Range};
use crate::{handle, ExportSpec};

/// How often the first waiting files' requests are tried again.
pub(crate) const RETRY_FAST: Duration = Duration::from_millis(40);
/// How many files are tried every [`RETRY_FAST`].
pub(crate) const FAST_FILES: usize = 16;
/// How often every waiting file's requests are tried again.
pub(crate) const RETRY_SLOW: Duration = Duration::from_millis(500);

/// The 64-bit id of an NLM lock owner, for the file system.
pub(crate) fn owner_id(o: &Owner) -> u64 {
    // A fixed key: the id only has to be the same wherever it is computed.
    let mut h = SipHasher24::new_with_keys(0x6561_6765_726e_6673, 0x6e6c_6d20_6f77_6e65);
    h.write(b"nlm4");
    h.write_usize(o.host.len());
    h.write(&o.host);
    h.write_usize(o.oh.len());
    h.write(&o.oh);
    h.write_i32(o.svid);
    h.finish()
}

pub(crate) fn lock_range(r: Range) -> LockRange {
    LockRange { start: r.start, end: r.end }
}

/// One file of a backend with [`eagernfs_vfs::FileLocks`].
pub(crate) struct BackendMirror {
    backend: Arc<dyn Backend>,
    fh: FileHandle,
}

impl std::fmt::Debug for BackendMirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendMirror").field("fh", &self.fh).finish()
    }
}

impl BackendMirror {
    /// The mirror of `fh` in `backend`, if that backend enforces locks itself.
    pub(crate) fn of(backend: &Arc<dyn Backend>, fh: &FileHandle) -> Option<Arc<BackendMirror>> {
        backend.file_locks()?;
        Some(Arc::new(BackendMirror { backend: backend.clone(), fh: fh.clone() }))
    }
}

impl BackendMirror {
    /// The file system's answer to TEST (a lock of its other clients).
    pub(crate) fn test(&self, want: &Held) -> eagernfs_vfs::FsResult<Option<eagernfs_vfs::LockConflict>> {
        match self.backend.file_locks() {
            Some(fl) => fl.test_lock(&self.fh, owner_id(&want.owner), want.exclusive, lock_range(want.range)),
            None => Ok(None),
        }
    }
}

impl Mirror for BackendMirror {
    fn admit(&self, want: &Held) -> Admit {
        let Some(fl) = self.backend.file_locks() else { return Admit::Granted };
        match fl.try_lock(&self.fh, owner_id(&want.owner), want.exclusive, lock_range(want.range)) {
            Ok(None) => Admit::Granted,
            Ok(Some(_)) => Admit::Denied,
            Err(FsError::Jukebox) => Admit::Unavailable,
            Err(e) => {
                tracing::warn!("taking a lock in the file system failed: {e}; the request waits");
                Admit::Unavailable
            }
        }
    }

    fn release(&self, owner: &Owner, range: Range) {
        if let Some(fl) = self.backend.file_locks() {
            if let Err(e) = fl.unlock(&self.fh, owner_id(owner), lock_range(range)) {
                // It goes at the latest with the file system's session (or when
                // the file is forgotten, which closes what held it).
                tracing::warn!("releasing a lock in the file system failed: {e}");
            }
        }
    }

    fn idle(&self) {
        if let Some(fl) = self.backend.file_locks() {
            fl.forget_file(&self.fh);
        }
    }
}

/// The mirror for the file behind wire handle `fh`: the backend's, or none
/// (an export without its own locks, or one no longer served).
pub(crate) fn mirror_for(exports: &[ExportSpec], fh: &Bytes) -> Box<dyn Mirror> {
    let Ok(data) = Opaque::new(fh.clone()) else { return Box::new(NoMirror) };
    let Ok((id, bfh)) = handle::from_wire(&NfsFh3 { data }) else { return Box::new(NoMirror) };
    match exports.iter().find(|e| e.id == id).and_then(|e| BackendMirror::of(&e.backend, &bfh)) {
        Some(m) => Box::new(ArcMirror(m)),
        None => Box::new(NoMirror),
    }
}

/// A shared mirror as a boxed one.
pub(crate) struct ArcMirror(pub(crate) Arc<BackendMirror>);

impl Mirror for ArcMirror {
    fn admit(&self, want: &Held) -> Admit {
        self.0.admit(want)
    }
    fn release(&self, owner: &Owner, range: Range) {
        self.0.release(owner, range)
    }
    fn idle(&self) {
        self.0.idle()
    }
}
