//! RPC call and reply headers (RFC 5531 §9).
//!
//! A call is a [`CallHeader`] followed by procedure arguments; a reply is a
//! [`ReplyHeader`] followed, on success, by procedure results. This module
//! parses and writes the headers only; the bytes after them belong to the
//! program (NFS, MOUNT, portmap).

use crate::auth::{AuthStat, AuthSys, OpaqueAuth};
use bytes::{BufMut, Bytes};
use eagernfs_xdr::{Decode, Encode, Error};

const CALL: u32 = 0;
const REPLY: u32 = 1;
const MSG_ACCEPTED: u32 = 0;
const MSG_DENIED: u32 = 1;

/// The header of a call (`call_body` with its xid).
#[derive(Debug, Clone, PartialEq, Eq)]
#[doc(alias = "call_body")]
pub struct CallHeader {
    pub xid: u32,
    /// Must be 2; the server answers anything else with RPC_MISMATCH.
    pub rpcvers: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    pub cred: OpaqueAuth,
    pub verf: OpaqueAuth,
}

/// Why a credential could not be used as AUTH_SYS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredError {
    /// The flavor is not AUTH_SYS (the caller decides whether that is acceptable).
    NotAuthSys(u32),
    /// The body did not parse as `authsys_parms`.
    Malformed(Error),
}

impl CallHeader {
    /// The AUTH_SYS credential carried by this call.
    pub fn auth_sys(&self) -> Result<AuthSys, CredError> {
        if self.cred.flavor != crate::AuthFlavor::Sys as u32 {
            return Err(CredError::NotAuthSys(self.cred.flavor));
        }
        AuthSys::from_body(&self.cred.body.0).map_err(CredError::Malformed)
    }
}

impl Encode for CallHeader {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.xid.encode(buf);
        CALL.encode(buf);
        self.rpcvers.encode(buf);
        self.prog.encode(buf);
        self.vers.encode(buf);
        self.proc_.encode(buf);
        self.cred.encode(buf);
        self.verf.encode(buf);
    }
}

/// What an accepted call's outcome was (`accept_stat` and its arms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptStat {
    /// Results follow.
    Success,
    /// The program is not served here.
    ProgUnavail,
    /// The program is served, but not this version: the supported range.
    ProgMismatch { low: u32, high: u32 },
    /// The program has no such procedure.
    ProcUnavail,
    /// The arguments did not decode.
    GarbageArgs,
    /// The server failed (e.g. out of memory).
    SystemErr,
}

/// Why a call was rejected (`rejected_reply`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectedReply {
    /// The RPC version was not 2: the range supported.
    RpcMismatch { low: u32, high: u32 },
    /// Authentication failed.
    AuthError(AuthStat),
}

/// The body of a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyBody {
    Accepted { verf: OpaqueAuth, stat: AcceptStat },
    Denied(RejectedReply),
}

/// A reply header: xid and body (results, if any, follow).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyHeader {
    pub xid: u32,
    pub body: ReplyBody,
}

impl ReplyHeader {
    /// An accepted, successful reply with an AUTH_NONE verifier.
    pub fn success(xid: u32) -> Self {
        ReplyHeader { xid, body: ReplyBody::Accepted { verf: OpaqueAuth::none(), stat: AcceptStat::Success } }
    }

    /// The answer to an RPC-with-TLS probe: success with the STARTTLS verifier.
    pub fn starttls(xid: u32) -> Self {
        ReplyHeader {
            xid,
            body: ReplyBody::Accepted { verf: OpaqueAuth::starttls(), stat: AcceptStat::Success },
        }
    }

    /// An accepted reply with a non-success status (no results follow).
    pub fn accepted_error(xid: u32, stat: AcceptStat) -> Self {
        ReplyHeader { xid, body: ReplyBody::Accepted { verf: OpaqueAuth::none(), stat } }
    }

    /// A denied reply.
    pub fn denied(xid: u32, why: RejectedReply) -> Self {
        ReplyHeader { xid, body: ReplyBody::Denied(why) }
    }
}

impl Encode for ReplyHeader {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.xid.encode(buf);
        REPLY.encode(buf);
        match &self.body {
            ReplyBody::Accepted { verf, stat } => {
                MSG_ACCEPTED.encode(buf);
                verf.encode(buf);
                match stat {
                    AcceptStat::Success => 0u32.encode(buf),
                    AcceptStat::ProgUnavail => 1u32.encode(buf),
                    AcceptStat::ProgMismatch { low, high } => {
                        2u32.encode(buf);
                        low.encode(buf);
                        high.encode(buf);
                    }
                    AcceptStat::ProcUnavail => 3u32.encode(buf),
                    AcceptStat::GarbageArgs => 4u32.encode(buf),
                    AcceptStat::SystemErr => 5u32.encode(buf),
                }
            }
            ReplyBody::Denied(why) => {
                MSG_DENIED.encode(buf);
                match why {
                    RejectedReply::RpcMismatch { low, high } => {
                        0u32.encode(buf);
                        low.encode(buf);
                        high.encode(buf);
                    }
                    RejectedReply::AuthError(stat) => {
                        1u32.encode(buf);
                        (*stat as u32).encode(buf);
                    }
                }
            }
        }
    }
}

fn decode_reply_body(buf: &mut Bytes) -> eagernfs_xdr::Result<ReplyBody> {
    match u32::decode(buf)? {
        MSG_ACCEPTED => {
            let verf = OpaqueAuth::decode(buf)?;
            let stat = match u32::decode(buf)? {
                0 => AcceptStat::Success,
                1 => AcceptStat::ProgUnavail,
                2 => AcceptStat::ProgMismatch { low: u32::decode(buf)?, high: u32::decode(buf)? },
                3 => AcceptStat::ProcUnavail,
                4 => AcceptStat::GarbageArgs,
                5 => AcceptStat::SystemErr,
                v => return Err(Error::BadEnum { name: "accept_stat", value: v }),
            };
            Ok(ReplyBody::Accepted { verf, stat })
        }
        MSG_DENIED => {
            let why = match u32::decode(buf)? {
                0 => RejectedReply::RpcMismatch { low: u32::decode(buf)?, high: u32::decode(buf)? },
                1 => {
                    let v = u32::decode(buf)?;
                    RejectedReply::AuthError(
                        AuthStat::from_u32(v).ok_or(Error::BadEnum { name: "auth_stat", value: v })?,
                    )
                }
                v => return Err(Error::BadEnum { name: "reject_stat", value: v }),
            };
            Ok(ReplyBody::Denied(why))
        }
        v => Err(Error::BadEnum { name: "reply_stat", value: v }),
    }
}

/// An RPC message header: a call or a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Call(CallHeader),
    Reply(ReplyHeader),
}

impl Message {
    /// Decode the header from the front of `buf`, leaving the arguments or results in it.
    ///
    /// A call whose header is cut short still yields its xid through
    /// [`peek_xid`], so the server can answer GARBAGE_ARGS-style errors.
    pub fn decode(buf: &mut Bytes) -> eagernfs_xdr::Result<Message> {
        let xid = u32::decode(buf)?;
        match u32::decode(buf)? {
            CALL => Ok(Message::Call(CallHeader {
                xid,
                rpcvers: u32::decode(buf)?,
                prog: u32::decode(buf)?,
                vers: u32::decode(buf)?,
                proc_: u32::decode(buf)?,
                cred: OpaqueAuth::decode(buf)?,
                verf: OpaqueAuth::decode(buf)?,
            })),
            REPLY => Ok(Message::Reply(ReplyHeader { xid, body: decode_reply_body(buf)? })),
            v => Err(Error::BadEnum { name: "msg_type", value: v }),
        }
    }
}

/// The xid of a message, if at least 8 bytes are present and it is a call.
pub fn peek_xid(record: &[u8]) -> Option<u32> {
    if record.len() < 8 || record[4..8] != CALL.to_be_bytes() {
        return None;
    }
    Some(u32::from_be_bytes([record[0], record[1], record[2], record[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AuthFlavor;
    use eagernfs_xdr::{to_vec, Opaque};
    use proptest::prelude::*;

    fn call(cred: OpaqueAuth) -> CallHeader {
        CallHeader { xid: 7, rpcvers: 2, prog: 100003, vers: 3, proc_: 1, cred, verf: OpaqueAuth::none() }
    }

    #[test]
    fn call_round_trip_leaves_args() {
        let sys = AuthSys {
            stamp: 1,
            machine_name: Opaque::from_static(b"host"),
            uid: 1000,
            gid: 100,
            gids: vec![4, 24],
        };
        let c = call(OpaqueAuth::sys(&sys));
        let mut bytes = to_vec(&c);
        bytes.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let mut b = Bytes::from(bytes);
        let m = Message::decode(&mut b).unwrap();
        assert_eq!(m, Message::Call(c.clone()));
        assert_eq!(&b[..], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(c.auth_sys().unwrap(), sys);
    }

    #[test]
    fn auth_sys_with_17_groups_is_malformed() {
        let sys = AuthSys { gids: (0..17).collect(), ..Default::default() };
        let c = call(OpaqueAuth::sys(&sys));
        assert!(matches!(c.auth_sys(), Err(CredError::Malformed(Error::TooLong { len: 17, max: 16 }))));
        let none = call(OpaqueAuth::none());
        assert_eq!(none.auth_sys(), Err(CredError::NotAuthSys(AuthFlavor::None as u32)));
    }

    #[test]
    fn oversized_credential_is_rejected() {
        let mut bytes = to_vec(&call(OpaqueAuth::none()));
        // Rewrite the credential length (offset 28) to 401.
        bytes[28..32].copy_from_slice(&401u32.to_be_bytes());
        bytes.extend_from_slice(&[0; 420]);
        assert!(matches!(
            Message::decode(&mut Bytes::from(bytes)),
            Err(Error::TooLong { len: 401, max: 400 })
        ));
    }

    #[test]
    fn every_reply_kind_round_trips() {
        let stats = [
            AcceptStat::Success,
            AcceptStat::ProgUnavail,
            AcceptStat::ProgMismatch { low: 2, high: 3 },
            AcceptStat::ProcUnavail,
            AcceptStat::GarbageArgs,
            AcceptStat::SystemErr,
        ];
        let mut replies: Vec<ReplyHeader> =
            stats.iter().map(|s| ReplyHeader::accepted_error(9, *s)).collect();
        replies.push(ReplyHeader::denied(9, RejectedReply::RpcMismatch { low: 2, high: 2 }));
        for a in [AuthStat::BadCred, AuthStat::TooWeak, AuthStat::Failed] {
            replies.push(ReplyHeader::denied(9, RejectedReply::AuthError(a)));
        }
        for r in replies {
            let mut b = Bytes::from(to_vec(&r));
            assert_eq!(Message::decode(&mut b).unwrap(), Message::Reply(r));
            assert!(b.is_empty());
        }
    }

    #[test]
    fn rpc_mismatch_wire_format() {
        // RFC 5531 §9: xid, REPLY, MSG_DENIED, RPC_MISMATCH, low, high.
        let r = ReplyHeader::denied(0x01020304, RejectedReply::RpcMismatch { low: 2, high: 2 });
        assert_eq!(to_vec(&r), [1, 2, 3, 4, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2]);
    }

    #[test]
    fn peek_xid_only_for_calls() {
        assert_eq!(peek_xid(&[0, 0, 0, 5, 0, 0, 0, 0, 9]), Some(5));
        assert_eq!(peek_xid(&[0, 0, 0, 5, 0, 0, 0, 1]), None);
        assert_eq!(peek_xid(&[0, 0, 0]), None);
    }

    proptest! {
        #[test]
        fn decode_never_panics(data in proptest::collection::vec(any::<u8>(), 0..128)) {
            crate::fuzzing::decode_message(&data);
        }

        #[test]
        fn auth_sys_round_trip(stamp: u32, uid: u32, gid: u32,
                               name in proptest::collection::vec(any::<u8>(), 0..=255),
                               gids in proptest::collection::vec(any::<u32>(), 0..=16)) {
            let sys = AuthSys { stamp, machine_name: Opaque(Bytes::from(name)), uid, gid, gids };
            let body = Bytes::from(to_vec(&sys));
            prop_assert_eq!(AuthSys::from_body(&body).unwrap(), sys);
        }
    }
}
