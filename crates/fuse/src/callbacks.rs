//! The mount's answers to an NFSv4 server's callbacks (see
//! `eagernfs_client::v4::CallbackHooks`):
//! - **CB_RECALL** of a delegation of a file the cache still holds
//!   unwritten data or attribute changes of (a close under a write
//!   delegation with `deleg_close=writeback` returns before its
//!   write-back): written back and committed first, then DELEGRETURN, so
//!   whoever the server recalled it for opens the file with our data in
//!   it. A file with nothing unwritten is given back at once.
//! - **CB_GETATTR** (another client asks the size or change of a file we
//!   write under a write delegation): while data is unwritten, its size as
//!   we show it and a change attribute that says "modified" and moves with
//!   every write. With nothing unwritten, the change attribute the file had
//!   when the delegation was granted (kept from the OPEN's GETATTR) and its
//!   size: the server sees the file unmodified, answers with its own
//!   attributes (which are right) and keeps the delegation out (RFC 8881
//!   §10.4.3). Only a delegation whose grant carried no attributes is
//!   answered "not such a file", which makes the server recall it.
//! - **CB_RECALL** of a delegation of a directory with REMOVEs still in
//!   flight (`dirops=async`): DELEGRETURN once they are answered, so the
//!   change the server recalled it for comes after them.
//! - **CB_NOTIFY_LOCK**: wakes the waiters of blocked locks (`locks4`).

use std::sync::Arc;

use eagernfs_client::cache::{CachedFs, WeakCachedFs};
use eagernfs_client::v4::CallbackHooks;
use eagernfs_client::{AnyClient, Nfs4Client};
use eagernfs_proto::nfs3::NfsFh3;
use eagernfs_proto::nfs4::{Bitmap4, FileAttrs, NfsFh4, StateOwner4, Stateid4, FATTR4_SIZE};
use tokio::sync::Notify;

/// The high bit marks a change attribute the holder made up: any value
/// other than the one the file had when the delegation was granted tells
/// the server the file was modified (RFC 8881 §10.4.3); the rest counts
/// our writes, so each new write reads as a new change.
const MODIFIED: u64 = 1 << 63;

/// See the module docs.
pub(crate) struct MountCallbacks {
    fs: WeakCachedFs<AnyClient>,
    client: Nfs4Client,
    /// Woken by CB_NOTIFY_LOCK.
    pub(crate) lock_wakeups: Notify,
}

impl MountCallbacks {
    /// Answer `client`'s callbacks for the cache `fs` over it, from now on.
    pub(crate) fn install(fs: &CachedFs<AnyClient>, client: &Nfs4Client) -> Arc<MountCallbacks> {
        let me = Arc::new(MountCallbacks {
            fs: fs.downgrade(),
            client: client.clone(),
            lock_wakeups: Notify::new(),
        });
        client.set_callback_hooks(Some(me.clone()));
        fs.set_recalls_write_back(true);
        // Directories made here, held from the start, take creates and
        // removes that do not wait.
        client.set_delegate_new_dirs(fs.config().dirops_async);
        me
    }
}

fn fh3(fh: &NfsFh4) -> NfsFh3 {
    NfsFh3 { data: eagernfs_xdr::Opaque(fh.data.0.clone()) }
}

impl CallbackHooks for MountCallbacks {
    fn recall(&self, fh: &NfsFh4, stateid: &Stateid4, _truncate: bool) -> bool {
        let Some(fs) = self.fs.upgrade() else { return false };
        let file = fh3(fh);
        if fs.removes_pending(&file) {
            // A directory whose names were removed with `dirops=async`: the
            // change the recall is for waits until they are on the server.
            let (client, fh, stateid) = (self.client.clone(), fh.clone(), *stateid);
            tokio::spawn(async move {
                fs.settle_removes(&file).await;
                if let Err(e) = client.return_delegation(&fh, stateid).await {
                    tracing::warn!("NFSv4 DELEGRETURN after the directory's REMOVEs failed: {e}");
                }
            });
            return true;
        }
        if fs.unwritten(&file).is_none() {
            return false;
        }
        let (client, fh, stateid) = (self.client.clone(), fh.clone(), *stateid);
        tokio::spawn(async move {
            if let Err(e) = fs.write_back_file(&file).await {
                // The RFC leaves a holder that cannot write back nothing
                // better: the delegation goes back, the error stays on the
                // file for its open handles (and in the log).
                tracing::warn!("writing back a recalled file failed: {e}");
            }
            if let Err(e) = client.return_delegation(&fh, stateid).await {
                tracing::warn!("NFSv4 DELEGRETURN after writing back failed: {e}");
            }
        });
        true
    }

    fn getattr(&self, fh: &NfsFh4, mask: &Bitmap4) -> Option<FileAttrs> {
        let fs = self.fs.upgrade()?;
        let file = fh3(fh);
        let (change, size) = match fs.unwritten(&file) {
            Some(u) => (MODIFIED | (u.writes & !MODIFIED), u.size),
            None => {
                // Settled: everything is on the server. The grant's change
                // attribute says "unmodified"; the size is the cache's (what
                // was written back may have moved it since the grant).
                let granted = self.client.write_delegation_granted(&file)?;
                (granted.change, fs.cached_size(&file).unwrap_or(granted.size))
            }
        };
        Some(FileAttrs {
            change: Some(change),
            size: mask.contains(FATTR4_SIZE).then_some(size),
            ..FileAttrs::default()
        })
    }

    fn lock_available(&self, _fh: &NfsFh4, _owner: &StateOwner4) {
        self.lock_wakeups.notify_waiters();
    }
}
