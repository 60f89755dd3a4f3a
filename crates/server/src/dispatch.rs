//! From one RPC record to one reply record.
//!
//! The RPC-level checks happen here, in RFC 5531 order: RPC version
//! (RPC_MISMATCH), program (PROG_UNAVAIL), version (PROG_MISMATCH), procedure
//! (PROC_UNAVAIL, from the program's table), credentials (AUTH_ERROR), and
//! arguments (GARBAGE_ARGS). Only then does a program handler run. Each
//! program answers with a body that is encoded straight after the reply
//! header into the buffer that goes to the socket.

use crate::call::{Call, Caller, Connection, Outcome, Ticket, Transport};
use crate::reply::{reply_header_only, Reply};
use crate::stats::Program;
use crate::{drc, ServerState};
use bytes::{Bytes, BytesMut};
use eagernfs_proto::{mount, nfs3, nfs4, nlm, portmap};
use eagernfs_rpc::message::{peek_xid, CredError};
use eagernfs_rpc::record::begin_record;
use eagernfs_rpc::{AcceptStat, AuthFlavor, AuthStat, Message, RejectedReply, ReplyHeader};
use eagernfs_xdr::Encode;

/// Handle one record; `None` means send nothing (it was not a call).
/// `ticket`: the record's place in its connection's READ/WRITE order.
pub(crate) fn handle_record(
    state: &ServerState,
    conn: &Connection,
    record: Bytes,
    ticket: Option<&Ticket>,
) -> Option<Reply> {
    let mut body = record.clone();
    let header = match Message::decode(&mut body) {
        Ok(Message::Call(c)) => c,
        // A reply to one of our NFSv4.1 callbacks (the back channel shares the
        // connection); any other reply sent to a server has no one to go to.
        Ok(Message::Reply(r)) => {
            if let Some(v4) = &state.nfs4 {
                v4.back.reply_arrived(r, body);
            }
            return None;
        }
        Err(e) => {
            // The header itself is malformed (usually a credential that
            // overruns the record). Answer if we can name the call.
            state.stats.count_rejected();
            tracing::debug!(peer = %conn.peer.addr, "malformed RPC header: {e}");
            let xid = peek_xid(&record)?;
            return Some(Reply::from(reply_header_only(ReplyHeader::denied(
                xid,
                RejectedReply::AuthError(AuthStat::BadCred),
            ))));
        }
    };
    let xid = header.xid;
    let reject = |h: ReplyHeader| {
        state.stats.count_rejected();
        Some(Reply::from(reply_header_only(h)))
    };
    if header.rpcvers != eagernfs_rpc::RPC_VERSION {
        return reject(ReplyHeader::denied(xid, RejectedReply::RpcMismatch { low: 2, high: 2 }));
    }
    // Program and version, then procedure (from the program's table).
    let v4 = state.nfs4.is_some() && conn.peer.transport == Transport::Tcp;
    let (program, info) = match header.prog {
        nfs3::NFS_PROGRAM if header.vers == nfs3::NFS_V3 => (Program::Nfs3, nfs3::procedure(header.proc_)),
        // NFSv4 is not served over UDP (RFC 8881 §2.9.1).
        nfs3::NFS_PROGRAM if header.vers == nfs4::NFS_V4 && v4 => {
            (Program::Nfs4, nfs4::procedure(header.proc_))
        }
        nfs3::NFS_PROGRAM => {
            let high = if v4 { 4 } else { 3 };
            return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProgMismatch { low: 3, high }));
        }
        mount::MOUNT_PROGRAM if (1..=3).contains(&header.vers) => {
            (Program::Mount, mount::procedure(header.proc_))
        }
        mount::MOUNT_PROGRAM => {
            return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProgMismatch { low: 1, high: 3 }))
        }
        portmap::PMAP_PROGRAM if header.vers == portmap::PMAP_V2 => {
            (Program::Portmap, portmap::procedure(header.proc_))
        }
        portmap::PMAP_PROGRAM => {
            return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProgMismatch { low: 2, high: 2 }))
        }
        nlm::NLM_PROGRAM if state.locks.is_some() && header.vers == nlm::NLM_V4 => {
            (Program::Nlm, nlm::nlm_procedure(header.proc_))
        }
        nlm::NLM_PROGRAM if state.locks.is_some() => {
            return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProgMismatch { low: 4, high: 4 }))
        }
        nlm::NSM_PROGRAM if state.locks.is_some() && header.vers == nlm::NSM_V1 => {
            (Program::Nsm, nlm::nsm_procedure(header.proc_))
        }
        nlm::NSM_PROGRAM if state.locks.is_some() => {
            return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProgMismatch { low: 1, high: 1 }))
        }
        _ => return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProgUnavail)),
    };
    let Some(info) = info else {
        return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProcUnavail));
    };
    // A head cut off from its cluster, or fenced, answers nothing that could
    // be stale or grant what another head may grant (docs/cluster.md, "Fencing").
    if state.config.lease.as_ref().is_some_and(|l| !l.admit()) {
        return out_of_lease(program, xid, header.proc_);
    }
    // RPC-with-TLS probe (RFC 9289 §4.1): NULL with AUTH_TLS. Answered with the STARTTLS
    // verifier when TLS is configured and the connection is plain TCP; otherwise as an
    // ordinary NULL, which tells the client this server will not start TLS.
    if header.cred.flavor == AuthFlavor::Tls as u32 {
        if header.proc_ != 0 {
            return reject(ReplyHeader::denied(xid, RejectedReply::AuthError(AuthStat::BadCred)));
        }
        if state.config.tls.is_some() && conn.peer.transport == Transport::Tcp && conn.tls.is_none() {
            state.stats.count(program, 0);
            let mut reply = Reply::from(reply_header_only(ReplyHeader::starttls(xid)));
            reply.starttls = true;
            return Some(reply);
        }
    }
    // Credentials. NULL answers anyone (clients probe with AUTH_NONE);
    // otherwise AUTH_SYS, or AUTH_NONE mapped to the anonymous user.
    let caller = match header.auth_sys() {
        Ok(sys) => Caller::Sys(sys),
        Err(CredError::NotAuthSys(f)) if f == AuthFlavor::None as u32 || header.proc_ == 0 => {
            Caller::Anonymous
        }
        Err(CredError::NotAuthSys(_)) => {
            return reject(ReplyHeader::denied(xid, RejectedReply::AuthError(AuthStat::TooWeak)))
        }
        Err(CredError::Malformed(_)) => {
            return reject(ReplyHeader::denied(xid, RejectedReply::AuthError(AuthStat::BadCred)))
        }
    };
    // Non-idempotent calls go through the duplicate reply cache.
    let drc_key = (!info.idempotent)
        .then(|| drc::Key::new(conn.peer.addr.ip(), xid, header.prog, header.vers, header.proc_, &body));
    if let Some(key) = drc_key {
        match state.drc.begin(key) {
            drc::Lookup::New => {}
            drc::Lookup::InProgress => return None,
            drc::Lookup::Replay(reply) => return Some(Reply::from(BytesMut::from(&reply[..]))),
        }
    }
    let exports = state.exports();
    let call = Call { state, exports: &exports, conn, header: &header, caller, ticket };
    let mut out = BytesMut::with_capacity(512);
    let at = begin_record(&mut out);
    ReplyHeader::success(xid).encode(&mut out);
    let outcome = match program {
        Program::Nfs3 => crate::nfs3::dispatch(&call, body, &mut out),
        Program::Nfs4 => crate::nfs4::dispatch(&call, body, &mut out),
        Program::Mount => crate::mount::dispatch(&call, body, &mut out),
        Program::Portmap => crate::portmap::dispatch(&call, body, &mut out),
        Program::Nlm => crate::nlm::dispatch(&call, body, &mut out),
        Program::Nsm => crate::nlm::dispatch_nsm(&call, body, &mut out),
    };
    let failed = match &outcome {
        Outcome::Replied | Outcome::RepliedWithData(_) => None,
        Outcome::GarbageArgs => Some(AcceptStat::GarbageArgs),
        Outcome::ProcUnavail => Some(AcceptStat::ProcUnavail),
    };
    if let Some(stat) = failed {
        if let Some(key) = drc_key {
            state.drc.abandon(key);
        }
        return reject(ReplyHeader::accepted_error(xid, stat));
    }
    state.stats.count(program, header.proc_);
    let tail = match outcome {
        Outcome::RepliedWithData(data) => Some(data),
        _ => None,
    };
    let mut reply = Reply::new(out, at, tail);
    if let Some(key) = drc_key {
        state.drc.finish(key, reply.take_bytes());
    }
    // Checked again: the lease may have run out while the call ran (a head
    // frozen, or cut off, in the middle of it). Its answer is dropped; a
    // retransmission gets it from the DRC if the head answers again.
    if state.config.lease.as_ref().is_some_and(|l| !l.admit()) {
        return out_of_lease(program, xid, header.proc_);
    }
    Some(reply)
}

/// The answer of a head out of its lease: NFSv3 "try again later"
/// (JUKEBOX carries no state, and a Linux client retries it in 5 s on the
/// same connection, not after its 60 s TCP timeout); nothing for the other
/// programs, which have no such answer (an NLM "denied, grace period" would
/// be an answer about locks, and NFSv4's DELAY belongs to a session slot).
fn out_of_lease(program: Program, xid: u32, proc_: u32) -> Option<Reply> {
    match program {
        Program::Nfs3 => crate::nfs3::jukebox_reply(xid, proc_),
        _ => None,
    }
}
