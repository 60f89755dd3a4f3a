//! Calls from the server to clients: NLM GRANTED (a blocked lock request was
//! granted) and NSM SM_NOTIFY (this server restarted: reclaim your locks).
//!
//! The client's lock manager and status monitor are found through the
//! portmapper on the client's address (port 111), as knfsd's lockd and statd
//! do. Both are best effort and bounded: one background thread, a queue of at
//! most [`QUEUE`] grants (more are dropped), timeouts on every step. A client
//! that misses a GRANTED finds its lock granted when it asks again (clients
//! re-send a blocked LOCK periodically); one that misses SM_NOTIFY notices
//! the restart from the server's NSM state number.

use crate::rpcbind::{connect, getport, rpc_call};
use eagernfs_proto::nlm::{proc4, sm, Nlm4TestArgs, StatChge, NLM_PROGRAM, NLM_V4, NSM_PROGRAM, NSM_V1};
use eagernfs_proto::portmap::PMAP_PORT;
use eagernfs_rpc::{AuthSys, OpaqueAuth};
use eagernfs_xdr::Opaque;
use std::net::{IpAddr, SocketAddr};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};

use super::LockHost;

/// Most grants waiting to be announced.
const QUEUE: usize = 1024;

/// Hands grants to the callback thread.
#[derive(Clone)]
pub(crate) struct Sender(SyncSender<(IpAddr, Nlm4TestArgs)>);

impl Sender {
    pub(crate) fn start(
        stats: std::sync::Arc<crate::Stats>,
        lease: Option<std::sync::Arc<crate::cluster::Lease>>,
    ) -> Sender {
        let (tx, rx) = sync_channel::<(IpAddr, Nlm4TestArgs)>(QUEUE);
        let spawned = std::thread::Builder::new().name("nlm-callback".into()).spawn(move || {
            let mut xid = 1u32;
            for (addr, args) in rx {
                xid = xid.wrapping_add(1);
                if lease.as_ref().is_some_and(|l| !l.admit()) {
                    // A head out of its lease grants nothing (docs/cluster.md, "Fencing").
                    tracing::debug!(client = %addr, "GRANTED callback not sent: this head's lease does not hold");
                    continue;
                }
                match granted(addr, &args, xid) {
                    Ok(()) => {
                        stats.lock_callbacks_delivered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(e) => {
                        stats.lock_callbacks_failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tracing::debug!(client = %addr, "GRANTED callback not delivered ({e}); the client will ask again");
                    }
                }
            }
        });
        if let Err(e) = spawned {
            tracing::warn!("no thread for NLM callbacks ({e}); clients learn of grants by asking again");
        }
        Sender(tx)
    }

    /// Queue a GRANTED call to the client at `addr`.
    pub(crate) fn granted(&self, addr: IpAddr, args: Nlm4TestArgs) {
        if let Err(TrySendError::Full(_)) = self.0.try_send((addr, args)) {
            tracing::debug!(client = %addr, "GRANTED callback queue full; the client will ask again");
        }
    }
}

/// Our host name, as the name we give in callbacks.
pub(crate) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates or truncates.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn cred() -> OpaqueAuth {
    OpaqueAuth::sys(&AuthSys {
        stamp: 0,
        machine_name: Opaque::new(hostname().into_bytes()).unwrap_or_default(),
        uid: 0,
        gid: 0,
        gids: Vec::new(),
    })
}

/// Find `prog` v`vers` at `addr` and connect to it.
fn reach(addr: IpAddr, prog: u32, vers: u32) -> Result<std::net::TcpStream, String> {
    let pm = SocketAddr::new(addr, PMAP_PORT);
    let port = getport(pm, prog, vers).map_err(|e| e.to_string())?;
    let port = port.ok_or_else(|| format!("program {prog} v{vers} is not registered at {addr}"))?;
    connect(SocketAddr::new(addr, port)).map_err(|e| e.to_string())
}

fn granted(addr: IpAddr, args: &Nlm4TestArgs, xid: u32) -> Result<(), String> {
    let mut s = reach(addr, NLM_PROGRAM, NLM_V4)?;
    rpc_call(&mut s, xid, NLM_PROGRAM, NLM_V4, proc4::GRANTED, cred(), args).map_err(|e| e.to_string())?;
    Ok(())
}

/// Tell every host that held locks before this start that we restarted
/// (SM_NOTIFY with our new state), in the background.
pub(crate) fn notify_restart(hosts: Vec<LockHost>, state: i32) {
    if hosts.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new().name("nsm-notify".into()).spawn(move || {
        let me = hostname();
        for (i, h) in hosts.iter().enumerate() {
            let args = StatChge { mon_name: Opaque::new(me.clone().into_bytes()).unwrap_or_default(), state };
            let sent = reach(h.addr, NSM_PROGRAM, NSM_V1).and_then(|mut s| {
                rpc_call(&mut s, i as u32 + 1, NSM_PROGRAM, NSM_V1, sm::NOTIFY, cred(), &args)
                    .map_err(|e| e.to_string())
            });
            match sent {
                Ok(_) => tracing::info!(client = %h.addr, host = %h.name, "told of our restart (SM_NOTIFY)"),
                Err(e) => tracing::info!(
                    client = %h.addr, host = %h.name,
                    "could not tell of our restart ({e}); it reclaims when it notices the new NSM state"
                ),
            }
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("no thread to send SM_NOTIFY ({e})");
    }
}
