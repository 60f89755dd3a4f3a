//! What one COMPOUND's operations share ([`Ctx`]): the call, the service, the current and
//! saved file handles and stateids, the session. Below every operation module and the
//! COMPOUND loop that runs them.

use super::fh::{Cur, Obj};
use super::pseudo::Tree;
use super::session::Session;
use super::Nfs4;
use crate::call::Call;
use eagernfs_proto::nfs4::*;
use std::sync::Arc;

/// What one COMPOUND's operations share.
pub(crate) struct Ctx<'a, 'c> {
    pub(crate) call: &'c Call<'a>,
    pub(crate) v4: &'a Nfs4,
    pub(crate) tree: Arc<Tree>,
    pub(crate) minor: u32,
    pub(crate) cur: Option<Cur<'a>>,
    pub(crate) saved: Option<Cur<'a>>,
    /// The current stateid (RFC 8881 §16.2.3.1.2), and the saved one.
    pub(crate) cur_stateid: Option<Stateid4>,
    pub(crate) saved_stateid: Option<Stateid4>,
    /// The session of this COMPOUND's SEQUENCE.
    pub(crate) session: Option<Arc<Session>>,
    /// SEQUENCE asked for the reply to be cached.
    pub(crate) cachethis: bool,
    /// This is the COMPOUND's last operation (a READ may then send its data as the tail).
    pub(crate) last_op: bool,
    /// Room left in the reply (under a session), for READ and READDIR to fit.
    pub(crate) reply_room: usize,
    /// The first READ or WRITE took the call's place in its connection's
    /// I/O order (the service threads gave the COMPOUND one, see `svc::peek`).
    pub(crate) io_turn_taken: bool,
    /// The current file handle's attributes as the operation just run left
    /// them (LOOKUP, ACCESS, SETATTR, WRITE get them anyway), so that the
    /// GETATTR clients send after it need not ask the backend again, just as
    /// NFSv3 returns post-operation attributes. Dropped before every other
    /// operation but GETFH.
    pub(crate) fresh: Option<eagernfs_vfs::Attr>,
}

impl<'a> Ctx<'a, '_> {
    /// The current file handle (the table already refused operations that need one without it).
    pub(crate) fn cur(&self) -> Result<&Cur<'a>, Nfsstat4> {
        self.cur.as_ref().ok_or(Nfsstat4::Nofilehandle)
    }

    /// Make `c` the current file handle; the current stateid no longer applies.
    pub(crate) fn set_cur(&mut self, c: Cur<'a>) {
        self.cur = Some(c);
        self.cur_stateid = None;
    }

    /// The client of this COMPOUND's session.
    pub(crate) fn client(&self) -> Result<&Arc<super::session::Client>, Nfsstat4> {
        self.session.as_ref().map(|s| &s.client).ok_or(Nfsstat4::OpNotInSession)
    }

    /// `s`, with the current stateid substituted for the special one that names it.
    pub(crate) fn stateid(&self, s: &Stateid4) -> Result<Stateid4, Nfsstat4> {
        if *s == Stateid4::CURRENT {
            return self.cur_stateid.ok_or(Nfsstat4::BadStateid);
        }
        Ok(*s)
    }
}

impl<'a> Ctx<'a, '_> {
    /// The current object, in an export (a pseudo directory is `or`).
    pub(crate) fn obj(&self, or: Nfsstat4) -> Result<&Obj<'a>, Nfsstat4> {
        match self.cur()? {
            Cur::Obj(o) => Ok(o),
            Cur::Pseudo(_) => Err(or),
        }
    }

    /// The current object, which this operation will change: read-only
    /// exports and the pseudo-root refuse with NFS4ERR_ROFS.
    pub(crate) fn writable(&self) -> Result<&Obj<'a>, Nfsstat4> {
        let o = self.obj(Nfsstat4::Rofs)?;
        if o.options.read_only {
            return Err(Nfsstat4::Rofs);
        }
        Ok(o)
    }

    /// The saved file handle (LINK, RENAME, COPY, CLONE).
    pub(crate) fn saved(&self) -> Result<&Cur<'a>, Nfsstat4> {
        self.saved.as_ref().ok_or(Nfsstat4::Nofilehandle)
    }
}
