//! The callback program (RFC 8881 §20): what a server sends a client over
//! the back channel of a session, and the client's answers. Only the
//! operations this server sends are modelled: CB_SEQUENCE, CB_RECALL
//! (return a delegation), CB_RECALL_ANY and CB_NOTIFY_LOCK.

use eagernfs_xdr::{decode_array, encode_array, xdr_struct, BufMut, Bytes, Decode, Encode, Error, Result};

use super::ops::{Res4, StatusRes};
use super::types::*;

/// The callback program number clients register by default (`NFS4_CALLBACK`).
pub const NFS4_CALLBACK: u32 = 0x4000_0000;
/// The callback program's version.
pub const NFS_CB_VERSION: u32 = 1;
/// CB_NULL.
pub const CB_NULL: u32 = 0;
/// CB_COMPOUND.
pub const CB_COMPOUND: u32 = 1;

/// OP_CB_GETATTR.
pub const OP_CB_GETATTR: u32 = 3;
/// OP_CB_RECALL.
pub const OP_CB_RECALL: u32 = 4;
/// OP_CB_RECALL_ANY.
pub const OP_CB_RECALL_ANY: u32 = 8;
/// OP_CB_SEQUENCE.
pub const OP_CB_SEQUENCE: u32 = 11;
/// OP_CB_NOTIFY_LOCK.
pub const OP_CB_NOTIFY_LOCK: u32 = 13;
/// OP_CB_ILLEGAL.
pub const OP_CB_ILLEGAL: u32 = 10044;

xdr_struct! {
    /// A call the client should order this callback after (`referring_call4`).
    #[doc(alias = "referring_call4")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct ReferringCall4 { pub sequenceid: Sequenceid4, pub slotid: Slotid4 }
}

/// Referring calls of one session (`referring_call_list4`).
#[doc(alias = "referring_call_list4")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReferringCallList4 {
    pub sessionid: Sessionid4,
    pub calls: Vec<ReferringCall4>,
}

impl Encode for ReferringCallList4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.sessionid.encode(buf);
        encode_array(buf, &self.calls)
    }
}
impl Decode for ReferringCallList4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(ReferringCallList4 { sessionid: Sessionid4::decode(buf)?, calls: decode_array(buf, 64)? })
    }
}

/// CB_SEQUENCE arguments (RFC 8881 §20.9).
#[doc(alias = "CB_SEQUENCE4args")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CbSequence4Args {
    pub sessionid: Sessionid4,
    pub sequenceid: Sequenceid4,
    pub slotid: Slotid4,
    pub highest_slotid: Slotid4,
    pub cachethis: bool,
    pub referring_call_lists: Vec<ReferringCallList4>,
}

impl Encode for CbSequence4Args {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.sessionid.encode(buf);
        self.sequenceid.encode(buf);
        self.slotid.encode(buf);
        self.highest_slotid.encode(buf);
        self.cachethis.encode(buf);
        encode_array(buf, &self.referring_call_lists)
    }
}
impl Decode for CbSequence4Args {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(CbSequence4Args {
            sessionid: Sessionid4::decode(buf)?,
            sequenceid: u32::decode(buf)?,
            slotid: u32::decode(buf)?,
            highest_slotid: u32::decode(buf)?,
            cachethis: bool::decode(buf)?,
            referring_call_lists: decode_array(buf, 16)?,
        })
    }
}

xdr_struct! {
    /// CB_SEQUENCE result (RFC 8881 §20.9).
    #[doc(alias = "CB_SEQUENCE4resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct CbSequence4ResOk {
        pub sessionid: Sessionid4,
        pub sequenceid: Sequenceid4,
        pub slotid: Slotid4,
        pub highest_slotid: Slotid4,
        pub target_highest_slotid: Slotid4,
    }
}

xdr_struct! {
    /// CB_RECALL arguments (RFC 8881 §20.2): return this delegation.
    #[doc(alias = "CB_RECALL4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct CbRecall4Args { pub stateid: Stateid4, pub truncate: bool, pub fh: NfsFh4 }
}

xdr_struct! {
    /// CB_GETATTR arguments (RFC 8881 §20.1): the attributes of a file the
    /// client holds a write delegation of (its size and change attribute,
    /// which only the client knows while it writes under the delegation).
    /// The result is a `fattr4` (`Res4<Fattr4>`). Not an arm of [`CbArgOp`]:
    /// a client reads it where the operation number says so.
    #[doc(alias = "CB_GETATTR4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct CbGetattr4Args { pub fh: NfsFh4, pub attr_request: Bitmap4 }
}

xdr_struct! {
    /// CB_RECALL_ANY arguments (RFC 8881 §20.6): keep at most this many objects.
    #[doc(alias = "CB_RECALL_ANY4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct CbRecallAny4Args { pub objects_to_keep: u32, pub type_mask: Bitmap4 }
}

xdr_struct! {
    /// CB_NOTIFY_LOCK arguments (RFC 8881 §20.11): a lock the client waited for may be free.
    #[doc(alias = "CB_NOTIFY_LOCK4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct CbNotifyLock4Args { pub fh: NfsFh4, pub lock_owner: StateOwner4 }
}

/// One callback operation (`nfs_cb_argop4`).
#[doc(alias = "nfs_cb_argop4")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CbArgOp {
    Sequence(CbSequence4Args),
    Recall(CbRecall4Args),
    RecallAny(CbRecallAny4Args),
    NotifyLock(CbNotifyLock4Args),
    /// Any other operation number: not decoded.
    Other(u32),
}

impl CbArgOp {
    /// The operation number.
    pub fn opnum(&self) -> u32 {
        match self {
            CbArgOp::Sequence(_) => OP_CB_SEQUENCE,
            CbArgOp::Recall(_) => OP_CB_RECALL,
            CbArgOp::RecallAny(_) => OP_CB_RECALL_ANY,
            CbArgOp::NotifyLock(_) => OP_CB_NOTIFY_LOCK,
            CbArgOp::Other(n) => *n,
        }
    }
}

impl Encode for CbArgOp {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.opnum().encode(buf);
        match self {
            CbArgOp::Sequence(a) => a.encode(buf),
            CbArgOp::Recall(a) => a.encode(buf),
            CbArgOp::RecallAny(a) => a.encode(buf),
            CbArgOp::NotifyLock(a) => a.encode(buf),
            CbArgOp::Other(_) => {}
        }
    }
}
impl Decode for CbArgOp {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match u32::decode(buf)? {
            OP_CB_SEQUENCE => CbArgOp::Sequence(CbSequence4Args::decode(buf)?),
            OP_CB_RECALL => CbArgOp::Recall(CbRecall4Args::decode(buf)?),
            OP_CB_RECALL_ANY => CbArgOp::RecallAny(CbRecallAny4Args::decode(buf)?),
            OP_CB_NOTIFY_LOCK => CbArgOp::NotifyLock(CbNotifyLock4Args::decode(buf)?),
            n => CbArgOp::Other(n),
        })
    }
}

/// One callback operation's result (`nfs_cb_resop4`).
#[doc(alias = "nfs_cb_resop4")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CbResOp {
    Sequence(Res4<CbSequence4ResOk>),
    Recall(StatusRes),
    RecallAny(StatusRes),
    NotifyLock(StatusRes),
    /// Any other operation's status (never NFS4_OK: its body is not modelled).
    Other(u32, Nfsstat4),
}

impl CbResOp {
    /// The operation's status.
    pub fn status(&self) -> Nfsstat4 {
        match self {
            CbResOp::Sequence(r) => r.status(),
            CbResOp::Recall(r) | CbResOp::RecallAny(r) | CbResOp::NotifyLock(r) => r.status(),
            CbResOp::Other(_, s) => *s,
        }
    }

    /// The operation number.
    pub fn opnum(&self) -> u32 {
        match self {
            CbResOp::Sequence(_) => OP_CB_SEQUENCE,
            CbResOp::Recall(_) => OP_CB_RECALL,
            CbResOp::RecallAny(_) => OP_CB_RECALL_ANY,
            CbResOp::NotifyLock(_) => OP_CB_NOTIFY_LOCK,
            CbResOp::Other(n, _) => *n,
        }
    }
}

impl Encode for CbResOp {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.opnum().encode(buf);
        match self {
            CbResOp::Sequence(r) => r.encode(buf),
            CbResOp::Recall(r) | CbResOp::RecallAny(r) | CbResOp::NotifyLock(r) => r.encode(buf),
            CbResOp::Other(_, s) => s.encode(buf),
        }
    }
}
impl Decode for CbResOp {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match u32::decode(buf)? {
            OP_CB_SEQUENCE => CbResOp::Sequence(Res4::decode(buf)?),
            OP_CB_RECALL => CbResOp::Recall(StatusRes::decode(buf)?),
            OP_CB_RECALL_ANY => CbResOp::RecallAny(StatusRes::decode(buf)?),
            OP_CB_NOTIFY_LOCK => CbResOp::NotifyLock(StatusRes::decode(buf)?),
            n => {
                let s = Nfsstat4::decode(buf)?;
                if s.is_ok() {
                    return Err(Error::BadEnum { name: "nfs_cb_resop4 (undecoded operation)", value: n });
                }
                CbResOp::Other(n, s)
            }
        })
    }
}

/// Most operations in a CB_COMPOUND decoded.
pub const CB_COMPOUND_OPS_MAX: usize = 16;

/// A CB_COMPOUND of CB_SEQUENCE and CB_GETATTR (RFC 8881 §20.1), the one
/// way a server asks for a file's attributes: kept apart from [`CbArgOp`],
/// which does not model CB_GETATTR (its result carries a `fattr4`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CbGetattrCompound4Args {
    pub tag: Utf8Str,
    pub minorversion: u32,
    pub callback_ident: u32,
    pub sequence: CbSequence4Args,
    pub getattr: CbGetattr4Args,
}

impl Encode for CbGetattrCompound4Args {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.tag.encode(buf);
        self.minorversion.encode(buf);
        self.callback_ident.encode(buf);
        2u32.encode(buf);
        OP_CB_SEQUENCE.encode(buf);
        self.sequence.encode(buf);
        OP_CB_GETATTR.encode(buf);
        self.getattr.encode(buf);
    }
}

/// The answer to a [`CbGetattrCompound4Args`]: the compound's status, and
/// CB_GETATTR's result if the client got that far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CbGetattrCompound4Res {
    pub status: Nfsstat4,
    pub getattr: Option<Res4<Fattr4>>,
}

impl Decode for CbGetattrCompound4Res {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        let status = Nfsstat4::decode(buf)?;
        let _tag = Utf8Str::decode(buf)?;
        let n = u32::decode(buf)? as usize;
        if n > CB_COMPOUND_OPS_MAX {
            return Err(Error::TooLong { len: n, max: CB_COMPOUND_OPS_MAX });
        }
        let mut getattr = None;
        for _ in 0..n {
            if buf.len() >= 4 && buf[..4] == OP_CB_GETATTR.to_be_bytes() {
                let _ = u32::decode(buf)?;
                getattr = Some(Res4::<Fattr4>::decode(buf)?);
                break;
            }
            let op = CbResOp::decode(buf)?;
            if !op.status().is_ok() {
                break;
            }
        }
        Ok(CbGetattrCompound4Res { status, getattr })
    }
}

/// CB_COMPOUND arguments (`CB_COMPOUND4args`).
#[doc(alias = "CB_COMPOUND4args")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CbCompound4Args {
    pub tag: Utf8Str,
    pub minorversion: u32,
    pub callback_ident: u32,
    pub argarray: Vec<CbArgOp>,
}

impl Encode for CbCompound4Args {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.tag.encode(buf);
        self.minorversion.encode(buf);
        self.callback_ident.encode(buf);
        encode_array(buf, &self.argarray)
    }
}
impl Decode for CbCompound4Args {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        let tag = Utf8Str::decode(buf)?;
        let minorversion = u32::decode(buf)?;
        let callback_ident = u32::decode(buf)?;
        let n = u32::decode(buf)? as usize;
        if n > CB_COMPOUND_OPS_MAX {
            return Err(Error::TooLong { len: n, max: CB_COMPOUND_OPS_MAX });
        }
        let mut argarray = Vec::with_capacity(n);
        for _ in 0..n {
            let op = CbArgOp::decode(buf)?;
            let last = matches!(op, CbArgOp::Other(_));
            argarray.push(op);
            if last {
                break;
            }
        }
        Ok(CbCompound4Args { tag, minorversion, callback_ident, argarray })
    }
}

/// CB_COMPOUND result (`CB_COMPOUND4res`).
#[doc(alias = "CB_COMPOUND4res")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CbCompound4Res {
    pub status: Nfsstat4,
    pub tag: Utf8Str,
    pub resarray: Vec<CbResOp>,
}

impl Encode for CbCompound4Res {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.status.encode(buf);
        self.tag.encode(buf);
        encode_array(buf, &self.resarray)
    }
}
impl Decode for CbCompound4Res {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(CbCompound4Res {
            status: Nfsstat4::decode(buf)?,
            tag: Utf8Str::decode(buf)?,
            resarray: decode_array(buf, CB_COMPOUND_OPS_MAX)?,
        })
    }
}
