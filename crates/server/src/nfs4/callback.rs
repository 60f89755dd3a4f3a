//! The back channel (RFC 8881 §2.10.3.1, §20): calls the server makes to a
//! client over a connection the client bound to its session for that
//! purpose, answered on the same connection.
//!
//! The service threads write a callback into the connection's output like a
//! reply (so it never interleaves with one) and hand replies that arrive on
//! it here, matched by xid. One thread sends callbacks and waits for their
//! answers, so no service thread ever waits for a client: CB_NULL probes a
//! newly bound back channel (a session without a working one is reported to
//! its client in every SEQUENCE as SEQ4_STATUS_CB_PATH_DOWN), CB_RECALL
//! asks for a delegation back, CB_GETATTR asks a write delegation's holder
//! for the file's size and change (its answer goes to a [`Probe`]).
//!
//! # Layout
//! - this file: what a session keeps of its back channel ([`BackState`],
//!   [`CbSec`]) and how callbacks reach a connection ([`BackChannel`]).
//! - `service`: the callback thread ([`Callbacks`]), which sends calls
//!   over sessions' back channels and matches their answers.

mod service;

pub(crate) use service::Callbacks;

use bytes::Bytes;
use eagernfs_proto::nfs4::*;
use eagernfs_rpc::{AuthSys, OpaqueAuth};
use eagernfs_xdr::Opaque;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// One CB_GETATTR (RFC 8881 §20.1) and its answer, shared by every GETATTR
/// of another client that waits for it: the write delegation's holder is
/// asked once, however many callers want the file's size and change.
pub(crate) struct Probe {
    /// `None` until answered; then the attributes, or `None` if the call failed.
    answer: Mutex<Option<Option<FileAttrs>>>,
    done: Condvar,
    /// When it was sent: its answer counts only until this plus the wait.
    pub(crate) sent: Instant,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("sent", &self.sent)
            .field("answered", &self.answer.lock().is_some())
            .finish()
    }
}

impl Probe {
    pub(crate) fn new() -> Arc<Probe> {
        Arc::new(Probe { answer: Mutex::new(None), done: Condvar::new(), sent: Instant::now() })
    }

    /// The answer came (or `None`: the call failed or went unanswered).
    pub(crate) fn finish(&self, attrs: Option<FileAttrs>) {
        let mut a = self.answer.lock();
        if a.is_none() {
            *a = Some(attrs);
            self.done.notify_all();
        }
    }

    /// Whether the answer (or the failure) came.
    pub(crate) fn answered(&self) -> bool {
        self.answer.lock().is_some()
    }

    /// Wait for the answer until `until`: `None` if none came by then.
    pub(crate) fn wait_until(&self, until: Instant) -> Option<Option<FileAttrs>> {
        let mut a = self.answer.lock();
        while a.is_none() {
            if self.done.wait_until(&mut a, until).timed_out() {
                break;
            }
        }
        a.clone()
    }
}

/// How calls reach a client's connection: the service threads.
pub(crate) trait BackChannel: Send + Sync {
    /// Queue `record` (record-marked) on connection `conn`; false if it is gone.
    fn send(&self, conn: u64, record: Bytes) -> bool;
    /// Whether connection `conn` is still open.
    fn alive(&self, conn: u64) -> bool;
}

/// How the server authenticates its callbacks, from CREATE_SESSION's list.
#[derive(Debug, Clone)]
pub(crate) enum CbSec {
    None,
    Sys(AuthsysParms),
    /// Only RPCSEC_GSS was offered: no callbacks are possible.
    Unusable,
}

impl CbSec {
    /// The first flavor we can use.
    pub(crate) fn choose(list: &[CallbackSecParms4]) -> CbSec {
        for p in list {
            match p {
                CallbackSecParms4::None => return CbSec::None,
                CallbackSecParms4::Sys(s) => return CbSec::Sys(s.clone()),
                CallbackSecParms4::Gss(_) => {}
            }
        }
        CbSec::Unusable
    }

    fn cred(&self) -> OpaqueAuth {
        match self {
            CbSec::Sys(p) => OpaqueAuth::sys(&AuthSys {
                stamp: p.stamp,
                machine_name: Opaque(p.machinename.0.clone()),
                uid: p.uid,
                gid: p.gid,
                gids: p.gids.0.clone(),
            }),
            CbSec::None | CbSec::Unusable => OpaqueAuth::none(),
        }
    }
}

const PATH_UNKNOWN: u8 = 0;
const PATH_UP: u8 = 1;
const PATH_DOWN: u8 = 2;

/// A session's back channel.
pub(crate) struct BackState {
    inner: Mutex<BackInner>,
    /// The last probe's verdict.
    path: AtomicU8,
}

struct BackInner {
    program: u32,
    sec: CbSec,
    /// Connections bound to the back channel (newest last).
    conns: Vec<u64>,
    /// The sequence id of the back channel's one slot.
    seqid: u32,
}

impl BackState {
    pub(crate) fn new(program: u32, sec: CbSec, conn: Option<u64>) -> BackState {
        BackState {
            inner: Mutex::new(BackInner { program, sec, conns: conn.into_iter().collect(), seqid: 0 }),
            path: AtomicU8::new(PATH_UNKNOWN),
        }
    }

    /// Bind connection `id` to the back channel.
    pub(crate) fn bind(&self, id: u64) {
        let mut b = self.inner.lock();
        b.conns.retain(|c| *c != id);
        b.conns.push(id);
        self.path.store(PATH_UNKNOWN, Ordering::Relaxed);
    }

    /// Whether any connection was bound to it.
    pub(crate) fn has_connection(&self) -> bool {
        !self.inner.lock().conns.is_empty()
    }

    /// BACKCHANNEL_CTL: a new program and security.
    pub(crate) fn control(&self, program: u32, sec: CbSec) {
        let mut b = self.inner.lock();
        b.program = program;
        b.sec = sec;
    }
}
