//! Byte-range locks through the server's lock manager (NLM v4), and their
//! recovery when the server restarts.
//!
//! [`LockClient`] makes the calls (TEST, LOCK, UNLOCK, CANCEL) as one
//! client host named `caller_name`, and remembers every lock it holds.
//! While it holds any, a keeper task asks the server's status monitor for
//! its state number every [`KEEPER_PERIOD`]: a new number means the server
//! restarted and forgot its locks, so every remembered lock is reclaimed
//! (LOCK with `reclaim`), which the server grants during its grace period
//! before anyone else may lock. On start, [`LockClient::announce_restart`]
//! tells the server this host restarted (SM_NOTIFY), which frees the locks
//! a previous run of it still held. When the NFS transport moves to another
//! head of a cluster (a URL of several addresses), every remembered lock is
//! reclaimed through that head at once.
//!
//! Where the lock manager is: on the NFS port (eagernfs serves NLM and NSM
//! there), else wherever the portmapper says (nfs-ganesha, knfsd).

mod callback;

use crate::driver::RpcClient;
use crate::mount::{getport, side_client};
use crate::ops::{Cred, NfsError, NfsResult};
use crate::options::MountOptions;
use bytes::Bytes;
use eagernfs_proto::nfs3::NfsFh3;
use eagernfs_proto::nlm::*;
use eagernfs_xdr::{Decode, Opaque};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often a client holding locks checks that the server did not restart.
pub const KEEPER_PERIOD: Duration = Duration::from_secs(2);

/// A lock owner: `oh` and `svid` as NLM names them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockOwner {
    pub oh: Bytes,
    pub svid: i32,
}

/// A byte range: `len` 0 means to the end of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockRange {
    pub offset: u64,
    pub len: u64,
}

impl LockRange {
    fn end(&self) -> u64 {
        if self.len == 0 {
            u64::MAX
        } else {
            self.offset.saturating_add(self.len)
        }
    }
    fn from_bounds(start: u64, end: u64) -> LockRange {
        LockRange { offset: start, len: if end == u64::MAX { 0 } else { end - start } }
    }
}

/// The answer to LOCK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockReply {
    Granted,
    /// Held by someone else (and not queued).
    Denied,
    /// Queued on the server: ask again (or wait for GRANTED).
    Blocked,
    /// The server restarted recently and grants only reclaims: ask again later.
    Grace,
}

/// Who holds a conflicting lock (TEST).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub exclusive: bool,
    pub owner: LockOwner,
    pub range: LockRange,
}

/// Locks this client holds on one file for one owner: `(start, end, exclusive)`.
type Ranges = Vec<(u64, u64, bool)>;

/// Record `start..end` as held (replacing what the owner held there).
fn ranges_apply(r: &mut Ranges, start: u64, end: u64, exclusive: bool) {
    ranges_release(r, start, end);
    r.push((start, end, exclusive));
}

/// Forget `start..end`.
fn ranges_release(r: &mut Ranges, start: u64, end: u64) {
    let mut kept = Vec::with_capacity(r.len() + 1);
    for &(s, e, x) in r.iter() {
        if e <= start || end <= s {
            kept.push((s, e, x));
            continue;
        }
        if s < start {
            kept.push((s, start, x));
        }
        if end < e {
            kept.push((end, e, x));
        }
    }
    *r = kept;
}

struct Inner {
    rpc: RpcClient,
    /// The server host's status monitor (NSM): on the NFS port for eagernfs,
    /// the host's rpc.statd otherwise.
    nsm: RpcClient,
    caller_name: Opaque<LM_MAXSTRLEN>,
    /// Our NSM state number, sent with each LOCK.
    state: i32,
    /// The server's NSM state number when we last looked (0: not yet).
    server_state: AtomicI32,
    /// Locks held, by (file handle, owner).
    held: parking_lot::Mutex<HashMap<(Bytes, LockOwner), Ranges>>,
    cookie: AtomicU32,
    /// Lock calls share it, a reclaim takes it alone: a lock taken while the
    /// server restarts is reclaimed, not lost, and lock calls do not wait for
    /// each other.
    reclaiming: tokio::sync::RwLock<()>,
    /// Woken by the server's GRANTED calls, when our callback service gets them.
    news: Arc<tokio::sync::Notify>,
    granted_callbacks: Arc<std::sync::atomic::AtomicU64>,
    callbacks: parking_lot::Mutex<Option<Arc<callback::Callbacks>>>,
}

/// Lock calls to one server as one client host. Clones share everything.
#[derive(Clone)]
pub struct LockClient(Arc<Inner>);

fn stat_err(s: Nlm4Stats) -> NfsError {
    use eagernfs_proto::nfs3::Nfsstat3;
    match s {
        Nlm4Stats::StaleFh => NfsError::Nfs(Nfsstat3::Stale),
        Nlm4Stats::Rofs => NfsError::Nfs(Nfsstat3::Rofs),
        Nlm4Stats::Fbig => NfsError::Nfs(Nfsstat3::Fbig),
        Nlm4Stats::DeniedNolocks => NfsError::NoLocks,
        other => NfsError::Rpc(format!("lock manager answered {other:?}")),
    }
}

impl LockClient {
    /// Find the lock manager of the server `nfs` talks to (at `nfs_addr`)
    /// and speak to it as `caller_name`. `Err` when the server has none
    /// (mount with `nolock` then).
    pub async fn connect(
        nfs: &RpcClient,
        nfs_addr: SocketAddr,
        options: &MountOptions,
        caller_name: &str,
    ) -> NfsResult<LockClient> {
        let cred = Cred::root();
        let (rpc, nsm) = if nfs.call(NLM_PROGRAM, NLM_V4, proc4::NULL, &cred, &()).await.is_ok() {
            (nfs.clone(), nfs.clone())
        } else {
            let pmap = side_client(SocketAddr::new(nfs_addr.ip(), options.pmapport), options);
            let nlm = find(&pmap, nfs_addr, options, NLM_PROGRAM, NLM_V4, "lock manager").await?;
            let nsm = find(&pmap, nfs_addr, options, NSM_PROGRAM, NSM_V1, "status monitor").await?;
            (nlm, nsm)
        };
        let name = caller_name.as_bytes();
        let caller_name = Opaque::new(Bytes::copy_from_slice(&name[..name.len().min(LM_MAXSTRLEN)]))
            .map_err(|e| NfsError::Rpc(e.to_string()))?;
        // A state number that grows with each start of this host (odd: up).
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_secs());
        let state = ((now as i32) & 0x3fff_fffe) | 1;
        let client = LockClient(Arc::new(Inner {
            rpc,
            nsm,
            caller_name,
            state,
            server_state: AtomicI32::new(0),
            held: Default::default(),
            cookie: AtomicU32::new(1),
            reclaiming: tokio::sync::RwLock::new(()),
            news: Default::default(),
            granted_callbacks: Default::default(),
            callbacks: Default::default(),
        }));
        client.follow_moves();
        Ok(client)
    }

    /// When the transport moves to another of its addresses (another head
    /// of a cluster, `nfs://h1,h2/…`), reclaim every held lock there at
    /// once. Not only when its status monitor's state number differs: the
    /// numbers of two heads are unrelated (two heads started once each both
    /// say 1), and the new head's lock manager holds none of our locks.
    fn follow_moves(&self) {
        let mut events = self.0.rpc.subscribe();
        let weak: Weak<Inner> = Arc::downgrade(&self.0);
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        rt.spawn(async move {
            loop {
                match events.recv().await {
                    Ok(crate::driver::TransportEvent::Moved { from, to, .. }) => {
                        let Some(inner) = weak.upgrade() else { return };
                        tracing::info!("lock manager moved from {from} to {to} with the NFS connection");
                        LockClient(inner).reclaim_after_move().await;
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if weak.strong_count() == 0 {
                            return;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }

    /// Take the server's GRANTED calls on `ip` (this host's address as the
    /// server sees it), registered with this host's portmapper if no live lock
    /// manager is. `Ok(false)`: listening, but another lock manager holds the
    /// registration, so grants are learned by asking again.
    pub async fn start_callbacks(&self, ip: IpAddr, options: &MountOptions) -> NfsResult<bool> {
        let service = callback::start(ip, self.0.news.clone(), self.0.granted_callbacks.clone(), options)
            .await
            .map_err(|e| NfsError::Connection(format!("cannot listen for lock callbacks on {ip}: {e}")))?;
        let service = Arc::new(service);
        *self.0.callbacks.lock() = Some(service.clone());
        service.register().await
    }

    /// Remove the callback service's registration (when the mount stops).
    pub async fn stop_callbacks(&self) {
        let service = self.0.callbacks.lock().take();
        if let Some(s) = service {
            s.unregister().await;
        }
    }

    /// GRANTED calls received from the server.
    pub fn granted_callbacks(&self) -> u64 {
        self.0.granted_callbacks.load(Ordering::Relaxed)
    }

    /// Wait until the server says something was granted, or `most` passes.
    pub async fn wait_for_grant(&self, most: Duration) {
        let _ = tokio::time::timeout(most, self.0.news.notified()).await;
    }

    /// The name this client locks as.
    pub fn caller_name(&self) -> String {
        String::from_utf8_lossy(&self.0.caller_name).into_owned()
    }

    fn cookie(&self) -> Netobj {
        Opaque(Bytes::copy_from_slice(&self.0.cookie.fetch_add(1, Ordering::Relaxed).to_be_bytes()))
    }

    fn alock(&self, fh: &NfsFh3, owner: &LockOwner, range: LockRange) -> Nlm4Lock {
        Nlm4Lock {
            caller_name: self.0.caller_name.clone(),
            fh: Opaque(fh.data.0.clone()),
            oh: Opaque(owner.oh.clone()),
            svid: owner.svid,
            l_offset: range.offset,
            l_len: range.len,
        }
    }

    async fn call<A: eagernfs_xdr::Encode, R: Decode>(
        &self,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &A,
    ) -> NfsResult<R> {
        let rpc = if prog == NSM_PROGRAM { &self.0.nsm } else { &self.0.rpc };
        let mut body = rpc.call(prog, vers, proc_, &Cred::root(), args).await?;
        R::decode(&mut body).map_err(|e| NfsError::BadReply(format!("lock manager reply: {e}")))
    }

    /// Tell the server this host (re)started: locks a previous run of it
    /// held there are released (SM_NOTIFY to the server's status monitor).
    /// Also learns the server's state number.
    pub async fn announce_restart(&self) -> NfsResult<()> {
        let args = StatChge { mon_name: Opaque(self.0.caller_name.0.clone()), state: self.0.state };
        self.0.nsm.call(NSM_PROGRAM, NSM_V1, sm::NOTIFY, &Cred::root(), &args).await?;
        let s = self.server_state().await?;
        self.0.server_state.store(s, Ordering::Relaxed);
        Ok(())
    }

    /// The server's NSM state number (it changes when the server restarts).
    pub async fn server_state(&self) -> NfsResult<i32> {
        let name = SmName { mon_name: Opaque(self.0.caller_name.0.clone()) };
        let r: SmStatRes = self.call(NSM_PROGRAM, NSM_V1, sm::STAT, &name).await?;
        Ok(r.state)
    }

    /// Who, if anyone, holds a lock that conflicts with this one.
    pub async fn test(
        &self,
        fh: &NfsFh3,
        owner: &LockOwner,
        range: LockRange,
        exclusive: bool,
    ) -> NfsResult<Result<Option<Conflict>, LockReply>> {
        let args = Nlm4TestArgs { cookie: self.cookie(), exclusive, alock: self.alock(fh, owner, range) };
        let r: Nlm4TestRes = self.call(NLM_PROGRAM, NLM_V4, proc4::TEST, &args).await?;
        Ok(match r.stat {
            Nlm4TestReply::Other(Nlm4Stats::Granted) => Ok(None),
            Nlm4TestReply::Denied(h) => Ok(Some(Conflict {
                exclusive: h.exclusive,
                owner: LockOwner { oh: h.oh.0, svid: h.svid },
                range: LockRange { offset: h.l_offset, len: h.l_len },
            })),
            Nlm4TestReply::Other(Nlm4Stats::DeniedGracePeriod) => Err(LockReply::Grace),
            Nlm4TestReply::Other(s) => return Err(stat_err(s)),
        })
    }

    /// Ask for a lock (`block`: queue it on the server if held elsewhere).
    pub async fn lock(
        &self,
        fh: &NfsFh3,
        owner: &LockOwner,
        range: LockRange,
        exclusive: bool,
        block: bool,
    ) -> NfsResult<LockReply> {
        let turn = self.0.reclaiming.read().await;
        let r = self.lock_call(fh, owner, range, exclusive, block, false).await?;
        drop(turn);
        if r == LockReply::Grace {
            // The server restarted: ours first.
            self.check_server().await;
        }
        if r == LockReply::Granted {
            self.remember(fh, owner, range, exclusive);
        }
        Ok(r)
    }

    async fn lock_call(
        &self,
        fh: &NfsFh3,
        owner: &LockOwner,
        range: LockRange,
        exclusive: bool,
        block: bool,
        reclaim: bool,
    ) -> NfsResult<LockReply> {
        let args = Nlm4LockArgs {
            cookie: self.cookie(),
            block,
            exclusive,
            alock: self.alock(fh, owner, range),
            reclaim,
            state: self.0.state,
        };
        let r: Nlm4Res = self.call(NLM_PROGRAM, NLM_V4, proc4::LOCK, &args).await?;
        Ok(match r.stat {
            Nlm4Stats::Granted => LockReply::Granted,
            Nlm4Stats::Denied | Nlm4Stats::Deadlck => LockReply::Denied,
            Nlm4Stats::Blocked => LockReply::Blocked,
            Nlm4Stats::DeniedGracePeriod => LockReply::Grace,
            s => return Err(stat_err(s)),
        })
    }

    fn remember(&self, fh: &NfsFh3, owner: &LockOwner, range: LockRange, exclusive: bool) {
        let first = {
            let mut held = self.0.held.lock();
            let was_empty = held.is_empty();
            let r = held.entry((fh.data.0.clone(), owner.clone())).or_default();
            ranges_apply(r, range.offset, range.end(), exclusive);
            was_empty
        };
        if first {
            self.start_keeper();
        }
    }

    /// Withdraw a blocked request; if the server had granted it meanwhile,
    /// give the lock back.
    pub async fn cancel(
        &self,
        fh: &NfsFh3,
        owner: &LockOwner,
        range: LockRange,
        exclusive: bool,
    ) -> NfsResult<()> {
        let args = Nlm4CancArgs {
            cookie: self.cookie(),
            block: true,
            exclusive,
            alock: self.alock(fh, owner, range),
        };
        let r: Nlm4Res = self.call(NLM_PROGRAM, NLM_V4, proc4::CANCEL, &args).await?;
        if r.stat == Nlm4Stats::Denied {
            // Not queued any more: granted just now (or never queued).
            self.unlock(fh, owner, range).await?;
        }
        Ok(())
    }

    /// Release a range.
    pub async fn unlock(&self, fh: &NfsFh3, owner: &LockOwner, range: LockRange) -> NfsResult<()> {
        let args = Nlm4UnlockArgs { cookie: self.cookie(), alock: self.alock(fh, owner, range) };
        let r: Nlm4Res = self.call(NLM_PROGRAM, NLM_V4, proc4::UNLOCK, &args).await?;
        {
            let mut held = self.0.held.lock();
            let key = (fh.data.0.clone(), owner.clone());
            if let Some(r) = held.get_mut(&key) {
                ranges_release(r, range.offset, range.end());
                if r.is_empty() {
                    held.remove(&key);
                }
            }
        }
        match r.stat {
            Nlm4Stats::Granted | Nlm4Stats::DeniedGracePeriod => Ok(()),
            s => Err(stat_err(s)),
        }
    }

    /// Whether `owner` may hold locks on `fh` (so a close must release them).
    pub fn holds(&self, fh: &NfsFh3, owner: &LockOwner) -> bool {
        self.0.held.lock().contains_key(&(fh.data.0.clone(), owner.clone()))
    }

    /// Locks held now (ranges), for statistics and tests.
    pub fn held_count(&self) -> usize {
        self.0.held.lock().values().map(Vec::len).sum()
    }

    /// If the server restarted since we last looked, reclaim every lock.
    async fn check_server(&self) {
        if self.0.held.lock().is_empty() {
            return;
        }
        let Ok(now) = self.server_state().await else { return };
        let before = self.0.server_state.swap(now, Ordering::Relaxed);
        if before != 0 && before != now {
            self.reclaim_all().await;
        }
    }

    /// The lock manager is another head now: learn its state number and
    /// reclaim everything held.
    async fn reclaim_after_move(&self) {
        if self.0.held.lock().is_empty() {
            return;
        }
        if let Ok(now) = self.server_state().await {
            self.0.server_state.store(now, Ordering::Relaxed);
        }
        self.reclaim_all().await;
    }

    async fn reclaim_all(&self) {
        let _turn = self.0.reclaiming.write().await;
        let locks: Vec<((Bytes, LockOwner), Ranges)> =
            self.0.held.lock().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let (mut ok, mut lost) = (0, 0);
        for ((fh, owner), ranges) in locks {
            let fh = NfsFh3 { data: Opaque(fh) };
            for (s, e, x) in ranges {
                let range = LockRange::from_bounds(s, e);
                match self.lock_call(&fh, &owner, range, x, false, true).await {
                    Ok(LockReply::Granted) => ok += 1,
                    other => {
                        lost += 1;
                        tracing::error!("lock reclaim after a server restart failed ({other:?}): the lock on {range:?} is lost");
                    }
                }
            }
        }
        tracing::info!(
            reclaimed = ok,
            lost,
            "the server restarted or another head took over: locks reclaimed"
        );
    }

    fn start_keeper(&self) {
        let weak: Weak<Inner> = Arc::downgrade(&self.0);
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        rt.spawn(async move {
            loop {
                tokio::time::sleep(KEEPER_PERIOD).await;
                let Some(inner) = weak.upgrade() else { return };
                let client = LockClient(inner);
                if client.0.held.lock().is_empty() {
                    return; // the next first lock starts a new keeper
                }
                client.check_server().await;
            }
        });
    }
}

/// Where the portmapper at `pmap` says `prog`/`vers` listens on the server, as a client.
async fn find(
    pmap: &RpcClient,
    nfs_addr: SocketAddr,
    options: &MountOptions,
    prog: u32,
    vers: u32,
    what: &str,
) -> NfsResult<RpcClient> {
    let port = getport(pmap, &Cred::root(), prog, vers, options).await?.ok_or_else(|| {
        NfsError::Rpc(format!(
            "{} has no {what} (program {prog} is not registered with its portmapper); mount with nolock to keep locks local",
            nfs_addr.ip()
        ))
    })?;
    Ok(RpcClient::new(crate::driver::TransportConfig::new(SocketAddr::new(nfs_addr.ip(), port), options)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_ranges_split_and_replace() {
        let mut r = Ranges::new();
        ranges_apply(&mut r, 0, 100, true);
        ranges_release(&mut r, 40, 60);
        r.sort();
        assert_eq!(r, vec![(0, 40, true), (60, 100, true)]);
        ranges_apply(&mut r, 30, 70, false);
        r.sort();
        assert_eq!(r, vec![(0, 30, true), (30, 70, false), (70, 100, true)]);
        ranges_release(&mut r, 0, u64::MAX);
        assert!(r.is_empty());
        assert_eq!(LockRange::from_bounds(5, u64::MAX), LockRange { offset: 5, len: 0 });
    }
}
