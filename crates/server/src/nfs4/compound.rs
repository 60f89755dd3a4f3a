//! COMPOUND (RFC 8881 §16.2): operations run in order until one fails.
//!
//! Each operation is decoded only when its turn comes, and checked against
//! the operation table before it runs: an undefined number (or one from a
//! later minor version) is answered OP_ILLEGAL; an NFSv4.0 operation
//! NFSv4.1 removed, or one this server does not offer, NFS4ERR_NOTSUPP; one
//! that needs a session without SEQUENCE first, NFS4ERR_OP_NOT_IN_SESSION;
//! SEQUENCE anywhere but first, NFS4ERR_SEQUENCE_POS; EXCHANGE_ID and the
//! other session-making operations without SEQUENCE and not alone,
//! NFS4ERR_NOT_ONLY_OP; arguments that do not decode, NFS4ERR_BADXDR;
//! no current file handle where one is needed, NFS4ERR_NOFILEHANDLE.
//!
//! Replies are encoded straight into the output buffer (status, tag and
//! count are patched at the end). Under a session the reply is bounded by
//! the negotiated sizes (NFS4ERR_REP_TOO_BIG, NFS4ERR_REP_TOO_BIG_TO_CACHE
//! for the operation that would cross them) and kept in the slot for a
//! retry. A READ that ends a COMPOUND sends its data from the backend's
//! buffer or pipe, as NFSv3 does.

use super::ctx::Ctx;
use super::session::{request_hash, SeqOutcome, SlotGuard};
use super::Nfs4;
use crate::call::{Call, Outcome};
use crate::reply::Piece;
use bytes::{Bytes, BytesMut};
use eagernfs_proto::nfs4::*;
use eagernfs_xdr::Encode;

/// Decode, run and encode one NFSv4 call (NULL or COMPOUND).
pub(crate) fn dispatch(call: &Call, body: Bytes, out: &mut BytesMut) -> Outcome {
    let Some(v4) = call.state.nfs4.as_ref() else { return Outcome::ProcUnavail };
    match call.header.proc_ {
        eagernfs_proto::nfs4::NFSPROC4_NULL => Outcome::Replied,
        eagernfs_proto::nfs4::NFSPROC4_COMPOUND => run(call, v4, body, out),
        _ => Outcome::ProcUnavail,
    }
}

/// Run one COMPOUND.
pub(crate) fn run(call: &Call, v4: &Nfs4, mut body: Bytes, out: &mut BytesMut) -> Outcome {
    let request_len = body.len();
    let Ok(head) = eagernfs_xdr::Decode::decode(&mut body).map(|h: Compound4Head| h) else {
        return Outcome::GarbageArgs;
    };
    let start = out.len();
    Nfsstat4::Ok.encode(out);
    head.tag.encode(out);
    let count_at = out.len();
    0u32.encode(out);
    let patch = |out: &mut BytesMut, status: Nfsstat4, n: u32| {
        out[start..start + 4].copy_from_slice(&(status as u32).to_be_bytes());
        out[count_at..count_at + 4].copy_from_slice(&n.to_be_bytes());
    };
    if head.minorversion == 0 || head.minorversion > NFS4_MINOR_VERSION_MAX {
        patch(out, Nfsstat4::MinorVersMismatch, 0);
        return Outcome::Replied;
    }
    if std::str::from_utf8(&head.tag).is_err() {
        patch(out, Nfsstat4::Inval, 0);
        return Outcome::Replied;
    }
    let mut ctx = Ctx {
        call,
        v4,
        tree: v4.pseudo.get(call),
        minor: head.minorversion,
        cur: None,
        saved: None,
        cur_stateid: None,
        saved_stateid: None,
        session: None,
        cachethis: false,
        last_op: false,
        reply_room: usize::MAX,
        io_turn_taken: false,
        fresh: None,
    };
    let mut guard: Option<SlotGuard> = None;
    let mut tail: Option<Piece> = None;
    let mut status = Nfsstat4::Ok;
    let mut n = 0u32;
    // A journaled export's changes are made durable once for the whole
    // COMPOUND, before its reply, instead of a log write per operation
    // (a small file's WRITE, SETATTR and CLOSE come in one). Where the first
    // operation that waited stands in the reply, and its number and index.
    let deferred = eagernfs_vfs::journal::DeferredDurability::begin();
    let mut first_deferred: Option<(usize, u32, u32)> = None;
    for i in 0..head.count {
        let op_start = out.len();
        n += 1;
        let op = match ArgOp::decode(&mut body) {
            Ok(op) => op,
            Err(e) => {
                // An operation number that is not there at all is not an operation.
                let opnum = if e.opnum == OP_ILLEGAL { OP_ILLEGAL } else { e.opnum };
                status = Nfsstat4::Badxdr;
                error_result(out, opnum, status);
                break;
            }
        };
        let opnum = op.opnum();
        call.state.stats.count_nfs4_op(opnum);
        if let Err((num, s)) = admissible(&ctx, &op, i, head.count) {
            status = s;
            error_result(out, num, s);
            break;
        }
        ctx.last_op = i + 1 == head.count;
        if !matches!(op, ArgOp::Getattr(_) | ArgOp::Getfh(())) {
            ctx.fresh = None;
        }
        if let Some(s) = &ctx.session {
            // READ and READDIR shorten their results to fit the reply; one the
            // client asked to keep that will not fit the cache is refused after.
            ctx.reply_room = (s.fore.ca_maxresponsesize as usize).saturating_sub(out.len() - start);
        }
        let s = match op {
            ArgOp::Sequence(a) => {
                let request = request_hash(&head.tag, &body);
                match v4.sequence(call, &a, head.count, request_len, request) {
                    Ok((SeqOutcome::Replay(reply), _)) => {
                        // The whole reply again, exactly as first sent.
                        out.truncate(start);
                        out.extend_from_slice(&reply);
                        return Outcome::Replied;
                    }
                    Ok((SeqOutcome::New(g), ok)) => {
                        ctx.session = Some(g.session.clone());
                        ctx.cachethis = a.cachethis;
                        guard = Some(g);
                        ResOp::Sequence(Res4::Ok(ok)).encode(out);
                        Nfsstat4::Ok
                    }
                    Err(s) => {
                        ResOp::Sequence(Res4::Err(s)).encode(out);
                        s
                    }
                }
            }
            ArgOp::Read(a) if ctx.last_op && !ctx.cachethis => {
                // The data goes to the socket from the backend's buffer or pipe.
                match super::io::read(&mut ctx, &a) {
                    Ok((eof, data)) => {
                        OP_READ.encode(out);
                        Nfsstat4::Ok.encode(out);
                        eof.encode(out);
                        (data.len() as u32).encode(out);
                        tail = Some(data);
                        Nfsstat4::Ok
                    }
                    Err(s) => {
                        error_result(out, OP_READ, s);
                        s
                    }
                }
            }
            op => {
                let r = execute(&mut ctx, op);
                r.encode(out);
                r.status()
            }
        };
        status = s;
        if first_deferred.is_none() && deferred.pending() > 0 {
            first_deferred = Some((op_start, opnum, n));
        }
        // The reply must fit what the session allows (the tail counts too).
        if let Some(sess) = &ctx.session {
            let len = out.len() - start + tail.as_ref().map_or(0, |t| t.len() + 3);
            let limit = if len > sess.fore.ca_maxresponsesize as usize {
                Some(Nfsstat4::RepTooBig)
            } else if ctx.cachethis && len > sess.fore.ca_maxresponsesize_cached as usize {
                Some(Nfsstat4::RepTooBigToCache)
            } else {
                None
            };
            if let Some(e) = limit {
                out.truncate(op_start);
                tail = None;
                status = e;
                error_result(out, opnum, e);
            }
        }
        if status != Nfsstat4::Ok {
            break;
        }
    }
    if let Err(e) = deferred.finish() {
        // The log failed: what the first deferring operation changed is not
        // durable, so it is answered NFS4ERR_IO and nothing after it is.
        tracing::error!("journal: {e}");
        if let Some((at, opnum, k)) = first_deferred {
            out.truncate(at);
            tail = None;
            status = Nfsstat4::Io;
            n = k;
            error_result(out, opnum, status);
        }
    }
    patch(out, status, n);
    if let Some(g) = guard {
        let cached_max = g.session.fore.ca_maxresponsesize_cached as usize;
        let len = out.len() - start + tail.as_ref().map_or(0, |t| t.len() + 3);
        let keep = if len <= cached_max {
            let mut r = BytesMut::with_capacity(len);
            r.extend_from_slice(&out[start..]);
            match &tail {
                None => Some(r.freeze()),
                // A READ small enough to keep: its data was not copied yet.
                Some(Piece::Bytes(b)) => {
                    r.extend_from_slice(b);
                    r.extend_from_slice(&[0u8; 3][..(4 - b.len() % 4) % 4]);
                    Some(r.freeze())
                }
                Some(Piece::Spliced(_)) => None,
            }
        } else {
            None
        };
        g.finish(keep);
    }
    match tail {
        Some(t) => Outcome::RepliedWithData(t),
        None => Outcome::Replied,
    }
}

/// An error result: the operation number (OP_ILLEGAL for an illegal one) and the status.
fn error_result(out: &mut BytesMut, opnum: u32, status: Nfsstat4) {
    opnum.encode(out);
    status.encode(out);
    if opnum == OP_SETATTR {
        // SETATTR's bitmap follows any status.
        Bitmap4::default().encode(out);
    }
}

/// The operation table's rules for operation `i` of `count`.
fn admissible(ctx: &Ctx, op: &ArgOp, i: u32, count: u32) -> Result<(), (u32, Nfsstat4)> {
    let opnum = op.opnum();
    let Some(info) = op_info(opnum) else { return Err((OP_ILLEGAL, Nfsstat4::OpIllegal)) };
    if info.minor_min > ctx.minor {
        return Err((OP_ILLEGAL, Nfsstat4::OpIllegal));
    }
    if info.minor_max < ctx.minor {
        return Err((opnum, Nfsstat4::Notsupp));
    }
    match info.position {
        Position::First if i > 0 => return Err((opnum, Nfsstat4::SequencePos)),
        Position::First => {}
        Position::SoleOrInSession if i == 0 && count > 1 => return Err((opnum, Nfsstat4::NotOnlyOp)),
        Position::SoleOrInSession => {}
        Position::InSession if i == 0 => return Err((opnum, Nfsstat4::OpNotInSession)),
        Position::InSession => {}
    }
    if matches!(op, ArgOp::NotDecoded(_)) {
        return Err((opnum, Nfsstat4::Notsupp));
    }
    if info.needs_fh && ctx.cur.is_none() {
        return Err((opnum, Nfsstat4::Nofilehandle));
    }
    Ok(())
}

/// Run one operation (all but SEQUENCE and a READ that sends its data as the tail).
fn execute(ctx: &mut Ctx, op: ArgOp) -> ResOp {
    use super::{fsops, io, state};
    let v4 = ctx.v4;
    let call = ctx.call;
    match op {
        // ---- file handles
        ArgOp::Putfh(a) => ResOp::Putfh(fsops::putfh(ctx, &a).into()),
        ArgOp::Putrootfh(()) => ResOp::Putrootfh(fsops::putrootfh(ctx).into()),
        ArgOp::Putpubfh(()) => ResOp::Putpubfh(fsops::putrootfh(ctx).into()),
        ArgOp::Getfh(()) => ResOp::Getfh(ctx.cur().map(|c| c.wire()).into()),
        ArgOp::Savefh(()) => {
            ctx.saved = ctx.cur.clone();
            ctx.saved_stateid = ctx.cur_stateid;
            ResOp::Savefh(Res4::OK)
        }
        ArgOp::Restorefh(()) => match ctx.saved.clone() {
            Some(s) => {
                ctx.cur = Some(s);
                ctx.cur_stateid = ctx.saved_stateid;
                ResOp::Restorefh(Res4::OK)
            }
            None => ResOp::Restorefh(Res4::Err(Nfsstat4::Restorefh)),
        },
        ArgOp::Lookup(a) => ResOp::Lookup(fsops::lookup(ctx, &a.objname).into()),
        ArgOp::Lookupp(()) => ResOp::Lookupp(fsops::lookupp(ctx).into()),
        ArgOp::Secinfo(a) => ResOp::Secinfo(fsops::secinfo(ctx, Some(&a.name)).into()),
        ArgOp::SecinfoNoName(style) => ResOp::SecinfoNoName(fsops::secinfo_no_name(ctx, style).into()),
        ArgOp::Openattr(_) => ResOp::Openattr(Res4::Err(Nfsstat4::Notsupp)),
        // ---- attributes and the namespace
        ArgOp::Getattr(a) => ResOp::Getattr(fsops::getattr(ctx, &a.attr_request).into()),
        ArgOp::Setattr(a) => ResOp::Setattr(fsops::setattr(ctx, &a)),
        ArgOp::Verify(a) => ResOp::Verify(fsops::verify(ctx, &a.obj_attributes, true).into()),
        ArgOp::Nverify(a) => ResOp::Nverify(fsops::verify(ctx, &a.obj_attributes, false).into()),
        ArgOp::Access(a) => ResOp::Access(fsops::access(ctx, a.access).into()),
        ArgOp::Readlink(()) => ResOp::Readlink(fsops::readlink(ctx).into()),
        ArgOp::Readdir(a) => ResOp::Readdir(fsops::readdir(ctx, &a).into()),
        ArgOp::Create(a) => ResOp::Create(fsops::create(ctx, &a).into()),
        ArgOp::Remove(a) => ResOp::Remove(fsops::remove(ctx, &a.target).into()),
        ArgOp::Rename(a) => ResOp::Rename(fsops::rename(ctx, &a).into()),
        ArgOp::Link(a) => ResOp::Link(fsops::link(ctx, &a.newname).into()),
        // ---- data
        ArgOp::Read(a) => ResOp::Read(io::read(ctx, &a).and_then(io::read_into_buffer).into()),
        ArgOp::Write(a) => ResOp::Write(io::write(ctx, &a).into()),
        ArgOp::Commit(a) => ResOp::Commit(io::commit(ctx, &a).into()),
        ArgOp::Allocate(a) => ResOp::Allocate(io::allocate(ctx, &a, false).map(|_| ()).into()),
        ArgOp::Deallocate(a) => ResOp::Deallocate(io::allocate(ctx, &a, true).map(|_| ()).into()),
        ArgOp::Seek(a) => ResOp::Seek(io::seek(ctx, &a).into()),
        ArgOp::Copy(a) => ResOp::Copy(match io::copy(ctx, &a) {
            Ok(r) => Copy4Res::Ok(r),
            Err(s) => Copy4Res::Err(s),
        }),
        ArgOp::Clone(a) => ResOp::Clone(io::clone(ctx, &a).into()),
        ArgOp::Getxattr(a) => ResOp::Getxattr(io::getxattr(ctx, &a).into()),
        ArgOp::Setxattr(a) => ResOp::Setxattr(io::setxattr(ctx, &a).into()),
        ArgOp::Listxattrs(a) => ResOp::Listxattrs(io::listxattrs(ctx, &a).into()),
        ArgOp::Removexattr(a) => ResOp::Removexattr(io::removexattr(ctx, &a).into()),
        // ---- state
        ArgOp::Open(a) => ResOp::Open(state::open(ctx, &a).into()),
        ArgOp::Close(a) => ResOp::Close(state::close(ctx, &a).into()),
        ArgOp::OpenDowngrade(a) => ResOp::OpenDowngrade(state::open_downgrade(ctx, &a).into()),
        ArgOp::Lock(a) => ResOp::Lock(state::lock(ctx, &a)),
        ArgOp::Lockt(a) => ResOp::Lockt(state::lockt(ctx, &a)),
        ArgOp::Locku(a) => ResOp::Locku(state::locku(ctx, &a).into()),
        ArgOp::FreeStateid(a) => ResOp::FreeStateid(state::free_stateid(ctx, &a.stateid).into()),
        ArgOp::TestStateid(a) => ResOp::TestStateid(state::test_stateid(ctx, &a.0).into()),
        ArgOp::Delegreturn(a) => ResOp::Delegreturn(state::delegreturn(ctx, &a.deleg_stateid).into()),
        ArgOp::Delegpurge(_) => ResOp::Delegpurge(Res4::Err(Nfsstat4::Notsupp)),
        ArgOp::WantDelegation(a) => ResOp::WantDelegation(state::want_delegation(ctx, &a).into()),
        ArgOp::GetDirDelegation(a) => ResOp::GetDirDelegation(state::get_dir_delegation(ctx, &a).into()),
        ArgOp::ReleaseLockowner(_) => ResOp::ReleaseLockowner(Res4::Err(Nfsstat4::Notsupp)),
        // ---- sessions
        ArgOp::ExchangeId(a) => ResOp::ExchangeId(v4.exchange_id(call, &a)),
        ArgOp::CreateSession(a) => ResOp::CreateSession(v4.create_session(call, &a, ctx.minor)),
        ArgOp::DestroySession(a) => {
            let current = ctx.session.clone();
            if current.as_ref().is_some_and(|s| s.id == a.sessionid) && !ctx.last_op {
                // Destroying the session this COMPOUND runs in must come last.
                ResOp::DestroySession(Res4::Err(Nfsstat4::NotOnlyOp))
            } else {
                ResOp::DestroySession(v4.destroy_session(call, &a, current.as_deref()))
            }
        }
        ArgOp::DestroyClientid(a) => ResOp::DestroyClientid(v4.destroy_clientid(&a)),
        ArgOp::BindConnToSession(a) => ResOp::BindConnToSession(v4.bind_conn(call, &a)),
        ArgOp::ReclaimComplete(a) => ResOp::ReclaimComplete(match ctx.client() {
            Ok(c) => v4.reclaim_complete(c, &a),
            Err(s) => Res4::Err(s),
        }),
        ArgOp::BackchannelCtl(a) => ResOp::BackchannelCtl(match &ctx.session {
            Some(s) => {
                s.back.control(a.cb_program, super::callback::CbSec::choose(&a.sec_parms.0));
                Res4::OK
            }
            None => Res4::Err(Nfsstat4::OpNotInSession),
        }),
        // The loop runs SEQUENCE itself; `admissible` refuses it anywhere else.
        ArgOp::Sequence(_) => ResOp::Sequence(Res4::Err(Nfsstat4::SequencePos)),
        ArgOp::NotDecoded(n) => ResOp::NotDecoded(n, Nfsstat4::Notsupp),
        ArgOp::Illegal(_) => ResOp::Illegal(Nfsstat4::OpIllegal),
    }
}
