//! Arguments and results of the NFSv4.1 and NFSv4.2 operations this crate
//! models (RFC 8881 §18, RFC 7862 §15). Operations not modelled here (pNFS
//! layouts, SSV, inter-server copy) are answered NFS4ERR_NOTSUPP by a server without decoding their
//! arguments: an error ends the COMPOUND, so nothing after them is read.
//!
//! Results follow one shape where the RFC does: [`Res4`] is the status and,
//! for NFS4_OK only, the result body. The few results that carry data on
//! an error (LOCK and LOCKT on NFS4ERR_DENIED, COPY on
//! NFS4ERR_OFFLOAD_NO_REQS) and SETATTR (whose bitmap follows every status)
//! have types of their own.

use eagernfs_xdr::{
    decode_array, decode_opaque, encode_array, encode_opaque, xdr_enum, xdr_struct, BufMut, Bytes, Decode,
    Encode, Error, Opaque, Result,
};

use super::types::*;
use crate::{decode_list, encode_list};

/// A result: NFS4_OK and the body, or an error status and nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Res4<T> {
    /// NFS4_OK.
    Ok(T),
    /// An error status (never NFS4_OK).
    Err(Nfsstat4),
}

impl<T> Res4<T> {
    /// The status word this result is sent with.
    pub fn status(&self) -> Nfsstat4 {
        match self {
            Res4::Ok(_) => Nfsstat4::Ok,
            Res4::Err(s) => *s,
        }
    }
}

impl<T> From<std::result::Result<T, Nfsstat4>> for Res4<T> {
    fn from(r: std::result::Result<T, Nfsstat4>) -> Self {
        match r {
            Ok(v) => Res4::Ok(v),
            Err(s) => Res4::Err(s),
        }
    }
}

/// A status word for a failure: NFS4_OK here is a server bug, sent as SERVERFAULT.
fn fail_status(s: Nfsstat4) -> Nfsstat4 {
    debug_assert!(!s.is_ok(), "failure with NFS4_OK status");
    if s.is_ok() {
        Nfsstat4::Serverfault
    } else {
        s
    }
}

impl<T: Encode> Encode for Res4<T> {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Res4::Ok(v) => {
                Nfsstat4::Ok.encode(buf);
                v.encode(buf)
            }
            Res4::Err(s) => fail_status(*s).encode(buf),
        }
    }
}
impl<T: Decode> Decode for Res4<T> {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        let s = Nfsstat4::decode(buf)?;
        if s.is_ok() {
            Ok(Res4::Ok(T::decode(buf)?))
        } else {
            Ok(Res4::Err(s))
        }
    }
}

/// A result that is only a status.
pub type StatusRes = Res4<()>;

// ------------------------------------------------------------ ACCESS (§18.1)

/// ACCESS: read data or list a directory.
pub const ACCESS4_READ: u32 = 0x01;
/// ACCESS: look up a name in a directory.
pub const ACCESS4_LOOKUP: u32 = 0x02;
/// ACCESS: rewrite data or change directory entries.
pub const ACCESS4_MODIFY: u32 = 0x04;
/// ACCESS: write beyond the end of a file or add directory entries.
pub const ACCESS4_EXTEND: u32 = 0x08;
/// ACCESS: delete directory entries.
pub const ACCESS4_DELETE: u32 = 0x10;
/// ACCESS: execute a file.
pub const ACCESS4_EXECUTE: u32 = 0x20;

xdr_struct! {
    /// ACCESS arguments (RFC 8881 §18.1).
    #[doc(alias = "ACCESS4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Access4Args { pub access: u32 }
}
xdr_struct! {
    /// ACCESS result (RFC 8881 §18.1).
    #[doc(alias = "ACCESS4resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Access4ResOk { pub supported: u32, pub access: u32 }
}

// ------------------------------------------------------------ CLOSE (§18.2)

xdr_struct! {
    /// CLOSE arguments (RFC 8881 §18.2).
    #[doc(alias = "CLOSE4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Close4Args { pub seqid: Seqid4, pub open_stateid: Stateid4 }
}

// ------------------------------------------------------------ COMMIT (§18.3)

xdr_struct! {
    /// COMMIT arguments (RFC 8881 §18.3).
    #[doc(alias = "COMMIT4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Commit4Args { pub offset: u64, pub count: u32 }
}

// ------------------------------------------------------------ CREATE (§18.4)

/// What CREATE makes (`createtype4`).
#[doc(alias = "createtype4")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Createtype4 {
    /// A symbolic link to this target.
    Lnk(Linktext4),
    /// A block device.
    Blk(Specdata4),
    /// A character device.
    Chr(Specdata4),
    Sock,
    Fifo,
    Dir,
    /// Any other type (the union's default arm): NFS4ERR_BADTYPE.
    Other(u32),
}

impl Encode for Createtype4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Createtype4::Lnk(l) => {
                5u32.encode(buf);
                l.encode(buf)
            }
            Createtype4::Blk(d) => {
                3u32.encode(buf);
                d.encode(buf)
            }
            Createtype4::Chr(d) => {
                4u32.encode(buf);
                d.encode(buf)
            }
            Createtype4::Sock => 6u32.encode(buf),
            Createtype4::Fifo => 7u32.encode(buf),
            Createtype4::Dir => 2u32.encode(buf),
            Createtype4::Other(t) => t.encode(buf),
        }
    }
}
impl Decode for Createtype4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match u32::decode(buf)? {
            5 => Createtype4::Lnk(Linktext4::decode(buf)?),
            3 => Createtype4::Blk(Specdata4::decode(buf)?),
            4 => Createtype4::Chr(Specdata4::decode(buf)?),
            6 => Createtype4::Sock,
            7 => Createtype4::Fifo,
            2 => Createtype4::Dir,
            t => Createtype4::Other(t),
        })
    }
}

xdr_struct! {
    /// CREATE arguments (RFC 8881 §18.4): a non-regular object in the current directory.
    #[doc(alias = "CREATE4args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Create4Args { pub objtype: Createtype4, pub objname: Component4, pub createattrs: Fattr4 }
}
xdr_struct! {
    /// CREATE result (RFC 8881 §18.4).
    #[doc(alias = "CREATE4resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Create4ResOk { pub cinfo: ChangeInfo4, pub attrset: Bitmap4 }
}

// ------------------------------------------------------------ DELEGPURGE, DELEGRETURN (§18.5, §18.6)

xdr_struct! {
    /// DELEGPURGE arguments (RFC 8881 §18.5).
    #[doc(alias = "DELEGPURGE4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Delegpurge4Args { pub clientid: Clientid4 }
}
xdr_struct! {
    /// DELEGRETURN arguments (RFC 8881 §18.6).
    #[doc(alias = "DELEGRETURN4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Delegreturn4Args { pub deleg_stateid: Stateid4 }
}

// ------------------------------------------------------------ GETATTR, GETFH, LINK (§18.7–§18.9)

xdr_struct! {
    /// GETATTR arguments (RFC 8881 §18.7).
    #[doc(alias = "GETATTR4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Getattr4Args { pub attr_request: Bitmap4 }
}
xdr_struct! {
    /// LINK arguments (RFC 8881 §18.9): saved fh is the file, current fh the directory.
    #[doc(alias = "LINK4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Link4Args { pub newname: Component4 }
}

// ------------------------------------------------------------ LOCK, LOCKT, LOCKU (§18.10–§18.12)

xdr_struct! {
    /// A lock owner's first lock, from its open (`open_to_lock_owner4`).
    #[doc(alias = "open_to_lock_owner4")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct OpenToLockOwner4 {
        pub open_seqid: Seqid4,
        pub open_stateid: Stateid4,
        pub lock_seqid: Seqid4,
        pub lock_owner: StateOwner4,
    }
}
xdr_struct! {
    /// A lock owner's further lock (`exist_lock_owner4`).
    #[doc(alias = "exist_lock_owner4")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct ExistLockOwner4 { pub lock_stateid: Stateid4, pub lock_seqid: Seqid4 }
}

/// Who locks (`locker4`).
#[doc(alias = "locker4")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locker4 {
    /// A new lock owner, from an open stateid.
    NewOwner(OpenToLockOwner4),
    /// A lock owner with a lock stateid for this file.
    Existing(ExistLockOwner4),
}

impl Encode for Locker4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Locker4::NewOwner(o) => {
                true.encode(buf);
                o.encode(buf)
            }
            Locker4::Existing(e) => {
                false.encode(buf);
                e.encode(buf)
            }
        }
    }
}
impl Decode for Locker4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        if bool::decode(buf)? {
            Ok(Locker4::NewOwner(OpenToLockOwner4::decode(buf)?))
        } else {
            Ok(Locker4::Existing(ExistLockOwner4::decode(buf)?))
        }
    }
}

xdr_struct! {
    /// LOCK arguments (RFC 8881 §18.10).
    #[doc(alias = "LOCK4args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Lock4Args {
        pub locktype: NfsLockType4,
        pub reclaim: bool,
        pub offset: u64,
        pub length: u64,
        pub locker: Locker4,
    }
}
xdr_struct! {
    /// The lock in the way (`LOCK4denied`).
    #[doc(alias = "LOCK4denied")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Lock4Denied {
        pub offset: u64,
        pub length: u64,
        pub locktype: NfsLockType4,
        pub owner: StateOwner4,
    }
}

/// LOCK result (RFC 8881 §18.10, `LOCK4res`).
#[doc(alias = "LOCK4res")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lock4Res {
    /// Granted: the lock stateid.
    Ok(Stateid4),
    /// NFS4ERR_DENIED and the conflicting lock.
    Denied(Lock4Denied),
    /// Any other error.
    Err(Nfsstat4),
}

impl Lock4Res {
    /// The status word.
    pub fn status(&self) -> Nfsstat4 {
        match self {
            Lock4Res::Ok(_) => Nfsstat4::Ok,
            Lock4Res::Denied(_) => Nfsstat4::Denied,
            Lock4Res::Err(s) => *s,
        }
    }
}

impl Encode for Lock4Res {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Lock4Res::Ok(s) => {
                Nfsstat4::Ok.encode(buf);
                s.encode(buf)
            }
            Lock4Res::Denied(d) => {
                Nfsstat4::Denied.encode(buf);
                d.encode(buf)
            }
            Lock4Res::Err(s) if *s == Nfsstat4::Denied => Nfsstat4::Serverfault.encode(buf),
            Lock4Res::Err(s) => fail_status(*s).encode(buf),
        }
    }
}
impl Decode for Lock4Res {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match Nfsstat4::decode(buf)? {
            Nfsstat4::Ok => Lock4Res::Ok(Stateid4::decode(buf)?),
            Nfsstat4::Denied => Lock4Res::Denied(Lock4Denied::decode(buf)?),
            s => Lock4Res::Err(s),
        })
    }
}

xdr_struct! {
    /// LOCKT arguments (RFC 8881 §18.11).
    #[doc(alias = "LOCKT4args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Lockt4Args {
        pub locktype: NfsLockType4,
        pub offset: u64,
        pub length: u64,
        pub owner: StateOwner4,
    }
}

/// LOCKT result (RFC 8881 §18.11, `LOCKT4res`).
#[doc(alias = "LOCKT4res")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lockt4Res {
    /// No conflicting lock.
    Ok,
    /// NFS4ERR_DENIED and the conflicting lock.
    Denied(Lock4Denied),
    /// Any other error.
    Err(Nfsstat4),
}

impl Lockt4Res {
    /// The status word.
    pub fn status(&self) -> Nfsstat4 {
        match self {
            Lockt4Res::Ok => Nfsstat4::Ok,
            Lockt4Res::Denied(_) => Nfsstat4::Denied,
            Lockt4Res::Err(s) => *s,
        }
    }
}

impl Encode for Lockt4Res {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Lockt4Res::Ok => Nfsstat4::Ok.encode(buf),
            Lockt4Res::Denied(d) => {
                Nfsstat4::Denied.encode(buf);
                d.encode(buf)
            }
            Lockt4Res::Err(s) if *s == Nfsstat4::Denied => Nfsstat4::Serverfault.encode(buf),
            Lockt4Res::Err(s) => fail_status(*s).encode(buf),
        }
    }
}
impl Decode for Lockt4Res {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match Nfsstat4::decode(buf)? {
            Nfsstat4::Ok => Lockt4Res::Ok,
            Nfsstat4::Denied => Lockt4Res::Denied(Lock4Denied::decode(buf)?),
            s => Lockt4Res::Err(s),
        })
    }
}

xdr_struct! {
    /// LOCKU arguments (RFC 8881 §18.12).
    #[doc(alias = "LOCKU4args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Locku4Args {
        pub locktype: NfsLockType4,
        pub seqid: Seqid4,
        pub lock_stateid: Stateid4,
        pub offset: u64,
        pub length: u64,
    }
}

// ------------------------------------------------------------ LOOKUP, NVERIFY, VERIFY (§18.13, §18.15, §18.31)

xdr_struct! {
    /// LOOKUP arguments (RFC 8881 §18.13).
    #[doc(alias = "LOOKUP4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Lookup4Args { pub objname: Component4 }
}
xdr_struct! {
    /// VERIFY and NVERIFY arguments (RFC 8881 §18.31, §18.15).
    #[doc(alias = "VERIFY4args")]
    #[doc(alias = "NVERIFY4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Verify4Args { pub obj_attributes: Fattr4 }
}

// ------------------------------------------------------------ OPEN (§18.16)

/// OPEN share access: read.
pub const OPEN4_SHARE_ACCESS_READ: u32 = 0x1;
/// OPEN share access: write.
pub const OPEN4_SHARE_ACCESS_WRITE: u32 = 0x2;
/// OPEN share access: both.
pub const OPEN4_SHARE_ACCESS_BOTH: u32 = 0x3;
/// OPEN share deny: none.
pub const OPEN4_SHARE_DENY_NONE: u32 = 0x0;
/// OPEN share deny: readers.
pub const OPEN4_SHARE_DENY_READ: u32 = 0x1;
/// OPEN share deny: writers.
pub const OPEN4_SHARE_DENY_WRITE: u32 = 0x2;
/// OPEN share deny: both.
pub const OPEN4_SHARE_DENY_BOTH: u32 = 0x3;
/// The delegation wishes in `share_access`.
pub const OPEN4_SHARE_ACCESS_WANT_DELEG_MASK: u32 = 0xff00;
/// No preference about delegations.
pub const OPEN4_SHARE_ACCESS_WANT_NO_PREFERENCE: u32 = 0x0000;
/// Wants a read delegation.
pub const OPEN4_SHARE_ACCESS_WANT_READ_DELEG: u32 = 0x0100;
/// Wants a write delegation.
pub const OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG: u32 = 0x0200;
/// Wants any delegation.
pub const OPEN4_SHARE_ACCESS_WANT_ANY_DELEG: u32 = 0x0300;
/// Wants no delegation.
pub const OPEN4_SHARE_ACCESS_WANT_NO_DELEG: u32 = 0x0400;
/// Cancels a wish.
pub const OPEN4_SHARE_ACCESS_WANT_CANCEL: u32 = 0x0500;
/// Signal when a delegation becomes available.
pub const OPEN4_SHARE_ACCESS_WANT_SIGNAL_DELEG_WHEN_RESRC_AVAIL: u32 = 0x10000;
/// Push a delegation when uncontended.
pub const OPEN4_SHARE_ACCESS_WANT_PUSH_DELEG_WHEN_UNCONTENDED: u32 = 0x20000;
/// Wants the file's access and modify times delegated too (RFC 9754 §5): an
/// `OPEN_DELEGATE_*_ATTRS_DELEG` delegation, whose holder sets them itself.
pub const OPEN4_SHARE_ACCESS_WANT_DELEG_TIMESTAMPS: u32 = 0x10_0000;
/// Wants a delegation instead of an open stateid when one is granted (RFC 9754 §6).
pub const OPEN4_SHARE_ACCESS_WANT_OPEN_XOR_DELEGATION: u32 = 0x20_0000;
/// OPEN result flag: no open stateid came, only a delegation (RFC 9754 §6).
pub const OPEN4_RESULT_NO_OPEN_STATEID: u32 = 0x10;
/// OPEN result flag: byte-range locks are POSIX locks.
pub const OPEN4_RESULT_LOCKTYPE_POSIX: u32 = 0x04;
/// OPEN result flag: a file removed while open stays readable.
pub const OPEN4_RESULT_PRESERVE_UNLINKED: u32 = 0x08;
/// OPEN result flag: the server may send CB_NOTIFY_LOCK.
pub const OPEN4_RESULT_MAY_NOTIFY_LOCK: u32 = 0x20;

/// How OPEN creates (`createhow4`).
#[doc(alias = "createhow4")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Createhow4 {
    /// UNCHECKED4: create, or open an existing file (applying the size attribute).
    Unchecked(Fattr4),
    /// GUARDED4: NFS4ERR_EXIST if the name exists.
    Guarded(Fattr4),
    /// EXCLUSIVE4 (deprecated in 4.1): exactly-once create with a verifier.
    Exclusive(Verifier4),
    /// EXCLUSIVE4_1: exactly-once create with a verifier and attributes.
    Exclusive41 { verf: Verifier4, attrs: Fattr4 },
}

impl Encode for Createhow4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Createhow4::Unchecked(a) => {
                0u32.encode(buf);
                a.encode(buf)
            }
            Createhow4::Guarded(a) => {
                1u32.encode(buf);
                a.encode(buf)
            }
            Createhow4::Exclusive(v) => {
                2u32.encode(buf);
                v.encode(buf)
            }
            Createhow4::Exclusive41 { verf, attrs } => {
                3u32.encode(buf);
                verf.encode(buf);
                attrs.encode(buf)
            }
        }
    }
}
impl Decode for Createhow4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match u32::decode(buf)? {
            0 => Createhow4::Unchecked(Fattr4::decode(buf)?),
            1 => Createhow4::Guarded(Fattr4::decode(buf)?),
            2 => Createhow4::Exclusive(Verifier4::decode(buf)?),
            3 => Createhow4::Exclusive41 { verf: Verifier4::decode(buf)?, attrs: Fattr4::decode(buf)? },
            value => return Err(Error::BadEnum { name: "createmode4", value }),
        })
    }
}

/// Whether OPEN creates (`openflag4`).
#[doc(alias = "openflag4")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Openflag4 {
    /// OPEN4_NOCREATE.
    NoCreate,
    /// OPEN4_CREATE.
    Create(Createhow4),
}

impl Encode for Openflag4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Openflag4::NoCreate => 0u32.encode(buf),
            Openflag4::Create(h) => {
                1u32.encode(buf);
                h.encode(buf)
            }
        }
    }
}
impl Decode for Openflag4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match u32::decode(buf)? {
            0 => Openflag4::NoCreate,
            1 => Openflag4::Create(Createhow4::decode(buf)?),
            value => return Err(Error::BadEnum { name: "opentype4", value }),
        })
    }
}

xdr_enum! {
    /// A delegation's kind (`open_delegation_type4`).
    #[doc(alias = "open_delegation_type4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum OpenDelegationType4 {
        None = 0,
        Read = 1,
        Write = 2,
        NoneExt = 3,
    }
}

/// What OPEN opens and by which right (`open_claim4`).
#[doc(alias = "open_claim4")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenClaim4 {
    /// CLAIM_NULL: this name in the current directory.
    Null(Component4),
    /// CLAIM_PREVIOUS: reclaim of the current file after a server restart.
    Previous(OpenDelegationType4),
    /// CLAIM_DELEGATE_CUR: this name, under a delegation this client holds.
    DelegateCur { delegate_stateid: Stateid4, file: Component4 },
    /// CLAIM_DELEGATE_PREV: this name, under a delegation of the client's previous instance.
    DelegatePrev(Component4),
    /// CLAIM_FH: the current file.
    Fh,
    /// CLAIM_DELEG_CUR_FH: the current file, under this delegation.
    DelegCurFh(Stateid4),
    /// CLAIM_DELEG_PREV_FH: the current file, under a previous delegation.
    DelegPrevFh,
}

impl Encode for OpenClaim4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            OpenClaim4::Null(f) => {
                0u32.encode(buf);
                f.encode(buf)
            }
            OpenClaim4::Previous(t) => {
                1u32.encode(buf);
                t.encode(buf)
            }
            OpenClaim4::DelegateCur { delegate_stateid, file } => {
                2u32.encode(buf);
                delegate_stateid.encode(buf);
                file.encode(buf)
            }
            OpenClaim4::DelegatePrev(f) => {
                3u32.encode(buf);
                f.encode(buf)
            }
            OpenClaim4::Fh => 4u32.encode(buf),
            OpenClaim4::DelegCurFh(s) => {
                5u32.encode(buf);
                s.encode(buf)
            }
            OpenClaim4::DelegPrevFh => 6u32.encode(buf),
        }
    }
}
impl Decode for OpenClaim4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match u32::decode(buf)? {
            0 => OpenClaim4::Null(Component4::decode(buf)?),
            1 => OpenClaim4::Previous(OpenDelegationType4::decode(buf)?),
            2 => OpenClaim4::DelegateCur {
                delegate_stateid: Stateid4::decode(buf)?,
                file: Component4::decode(buf)?,
            },
            3 => OpenClaim4::DelegatePrev(Component4::decode(buf)?),
            4 => OpenClaim4::Fh,
            5 => OpenClaim4::DelegCurFh(Stateid4::decode(buf)?),
            6 => OpenClaim4::DelegPrevFh,
            value => return Err(Error::BadEnum { name: "open_claim_type4", value }),
        })
    }
}

xdr_struct! {
    /// OPEN arguments (RFC 8881 §18.16).
    #[doc(alias = "OPEN4args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Open4Args {
        pub seqid: Seqid4,
        pub share_access: u32,
        pub share_deny: u32,
        pub owner: StateOwner4,
        pub openhow: Openflag4,
        pub claim: OpenClaim4,
    }
}

xdr_struct! {
    /// An access control entry (`nfsace4`): here only the empty one a delegation carries.
    #[doc(alias = "nfsace4")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nfsace4 { pub acetype: u32, pub flag: u32, pub access_mask: u32, pub who: Utf8Str }
}

xdr_struct! {
    /// A read delegation (`open_read_delegation4`).
    #[doc(alias = "open_read_delegation4")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct OpenReadDelegation4 { pub stateid: Stateid4, pub recall: bool, pub permissions: Nfsace4 }
}

/// How much a write delegation may grow the file before flushing (`nfs_space_limit4`).
#[doc(alias = "nfs_space_limit4")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NfsSpaceLimit4 {
    /// NFS_LIMIT_SIZE.
    Size(u64),
    /// NFS_LIMIT_BLOCKS.
    Blocks { num_blocks: u32, bytes_per_block: u32 },
}

impl Encode for NfsSpaceLimit4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            NfsSpaceLimit4::Size(s) => {
                1u32.encode(buf);
                s.encode(buf)
            }
            NfsSpaceLimit4::Blocks { num_blocks, bytes_per_block } => {
                2u32.encode(buf);
                num_blocks.encode(buf);
                bytes_per_block.encode(buf)
            }
        }
    }
}
impl Decode for NfsSpaceLimit4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match u32::decode(buf)? {
            1 => NfsSpaceLimit4::Size(u64::decode(buf)?),
            2 => NfsSpaceLimit4::Blocks { num_blocks: u32::decode(buf)?, bytes_per_block: u32::decode(buf)? },
            value => return Err(Error::BadEnum { name: "limit_by4", value }),
        })
    }
}

xdr_struct! {
    /// A write delegation (`open_write_delegation4`).
    #[doc(alias = "open_write_delegation4")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct OpenWriteDelegation4 {
        pub stateid: Stateid4,
        pub recall: bool,
        pub space_limit: NfsSpaceLimit4,
        pub permissions: Nfsace4,
    }
}

/// Why no delegation came (`why_no_delegation4` values).
pub mod why_no_deleg {
    pub const NOT_WANTED: u32 = 0;
    pub const CONTENTION: u32 = 1;
    pub const RESOURCE: u32 = 2;
    pub const NOT_SUPP_FTYPE: u32 = 3;
    pub const WRITE_DELEG_NOT_SUPP_FTYPE: u32 = 4;
    pub const NOT_SUPP_UPGRADE: u32 = 5;
    pub const NOT_SUPP_DOWNGRADE: u32 = 6;
    pub const CANCELLED: u32 = 7;
    pub const IS_DIR: u32 = 8;
}

/// Why no delegation came, and whether the server will offer one later
/// (`open_none_delegation4`; the flag is present for CONTENTION and RESOURCE only).
#[doc(alias = "open_none_delegation4")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenNoneDelegation4 {
    pub why: u32,
    pub later: Option<bool>,
}

impl Encode for OpenNoneDelegation4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.why.encode(buf);
        if matches!(self.why, why_no_deleg::CONTENTION | why_no_deleg::RESOURCE) {
            self.later.unwrap_or(false).encode(buf);
        }
    }
}
impl Decode for OpenNoneDelegation4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        let why = u32::decode(buf)?;
        if why > why_no_deleg::IS_DIR {
            return Err(Error::BadEnum { name: "why_no_delegation4", value: why });
        }
        let later = matches!(why, why_no_deleg::CONTENTION | why_no_deleg::RESOURCE)
            .then(|| bool::decode(buf))
            .transpose()?;
        Ok(OpenNoneDelegation4 { why, later })
    }
}

/// The delegation OPEN or WANT_DELEGATION gives (`open_delegation4`; RFC 9754 adds the
/// `_ATTRS_DELEG` kinds, whose holder also keeps the file's access and modify times).
#[doc(alias = "open_delegation4")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenDelegation4 {
    None,
    Read(OpenReadDelegation4),
    Write(OpenWriteDelegation4),
    NoneExt(OpenNoneDelegation4),
    /// OPEN_DELEGATE_READ_ATTRS_DELEG (RFC 9754): a read delegation with the access time delegated.
    ReadAttrsDeleg(OpenReadDelegation4),
    /// OPEN_DELEGATE_WRITE_ATTRS_DELEG (RFC 9754): a write delegation with both times delegated.
    WriteAttrsDeleg(OpenWriteDelegation4),
}

impl OpenDelegation4 {
    /// The delegation's stateid and whether it is a write delegation, if one was granted.
    pub fn granted(&self) -> Option<(Stateid4, bool)> {
        match self {
            OpenDelegation4::Read(r) | OpenDelegation4::ReadAttrsDeleg(r) => Some((r.stateid, false)),
            OpenDelegation4::Write(w) | OpenDelegation4::WriteAttrsDeleg(w) => Some((w.stateid, true)),
            OpenDelegation4::None | OpenDelegation4::NoneExt(_) => None,
        }
    }
}

impl Encode for OpenDelegation4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            OpenDelegation4::None => 0u32.encode(buf),
            OpenDelegation4::Read(r) => {
                1u32.encode(buf);
                r.encode(buf)
            }
            OpenDelegation4::Write(w) => {
                2u32.encode(buf);
                w.encode(buf)
            }
            OpenDelegation4::NoneExt(n) => {
                3u32.encode(buf);
                n.encode(buf)
            }
            OpenDelegation4::ReadAttrsDeleg(r) => {
                4u32.encode(buf);
                r.encode(buf)
            }
            OpenDelegation4::WriteAttrsDeleg(w) => {
                5u32.encode(buf);
                w.encode(buf)
            }
        }
    }
}
impl Decode for OpenDelegation4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match u32::decode(buf)? {
            0 => OpenDelegation4::None,
            1 => OpenDelegation4::Read(OpenReadDelegation4::decode(buf)?),
            2 => OpenDelegation4::Write(OpenWriteDelegation4::decode(buf)?),
            3 => OpenDelegation4::NoneExt(OpenNoneDelegation4::decode(buf)?),
            4 => OpenDelegation4::ReadAttrsDeleg(OpenReadDelegation4::decode(buf)?),
            5 => OpenDelegation4::WriteAttrsDeleg(OpenWriteDelegation4::decode(buf)?),
            value => return Err(Error::BadEnum { name: "open_delegation_type4", value }),
        })
    }
}

xdr_struct! {
    /// OPEN result (RFC 8881 §18.16).
    #[doc(alias = "OPEN4resok")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Open4ResOk {
        pub stateid: Stateid4,
        pub cinfo: ChangeInfo4,
        pub rflags: u32,
        pub attrset: Bitmap4,
        pub delegation: OpenDelegation4,
    }
}

xdr_struct! {
    /// OPENATTR arguments (RFC 8881 §18.17).
    #[doc(alias = "OPENATTR4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Openattr4Args { pub createdir: bool }
}

xdr_struct! {
    /// OPEN_DOWNGRADE arguments (RFC 8881 §18.18).
    #[doc(alias = "OPEN_DOWNGRADE4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct OpenDowngrade4Args {
        pub open_stateid: Stateid4,
        pub seqid: Seqid4,
        pub share_access: u32,
        pub share_deny: u32,
    }
}

// ------------------------------------------------------------ PUTFH, READ, READDIR (§18.19–§18.23)

xdr_struct! {
    /// PUTFH arguments (RFC 8881 §18.19).
    #[doc(alias = "PUTFH4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Putfh4Args { pub object: NfsFh4 }
}
xdr_struct! {
    /// READ arguments (RFC 8881 §18.22).
    #[doc(alias = "READ4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Read4Args { pub stateid: Stateid4, pub offset: u64, pub count: u32 }
}

/// READ result (RFC 8881 §18.22): the data is shared, not copied.
#[doc(alias = "READ4resok")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Read4ResOk {
    pub eof: bool,
    pub data: Bytes,
}

impl Encode for Read4ResOk {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.eof.encode(buf);
        encode_opaque(buf, &self.data)
    }
}
impl Decode for Read4ResOk {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(Read4ResOk { eof: bool::decode(buf)?, data: decode_opaque(buf, MAX_IO_SIZE)? })
    }
}

xdr_struct! {
    /// READDIR arguments (RFC 8881 §18.23).
    #[doc(alias = "READDIR4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Readdir4Args {
        pub cookie: u64,
        pub cookieverf: Verifier4,
        pub dircount: u32,
        pub maxcount: u32,
        pub attr_request: Bitmap4,
    }
}
xdr_struct! {
    /// One directory entry (`entry4`, without its list link).
    #[doc(alias = "entry4")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Entry4 { pub cookie: u64, pub name: Component4, pub attrs: Fattr4 }
}

impl Entry4 {
    /// Bytes this entry takes in a reply, its list link included.
    pub fn encoded_len(&self) -> usize {
        4 + 8
            + crate::opaque_len(self.name.len())
            + 4
            + 4 * self.attrs.attrmask.0.len()
            + crate::opaque_len(self.attrs.attr_vals.len())
    }
}

/// READDIR result (RFC 8881 §18.23): the verifier, entries and end-of-directory flag.
#[doc(alias = "READDIR4resok")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Readdir4ResOk {
    pub cookieverf: Verifier4,
    pub entries: Vec<Entry4>,
    pub eof: bool,
}

impl Encode for Readdir4ResOk {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.cookieverf.encode(buf);
        encode_list(buf, &self.entries);
        self.eof.encode(buf)
    }
}
impl Decode for Readdir4ResOk {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(Readdir4ResOk {
            cookieverf: Verifier4::decode(buf)?,
            entries: decode_list(buf)?,
            eof: bool::decode(buf)?,
        })
    }
}

// ------------------------------------------------------------ REMOVE, RENAME (§18.25, §18.26)

xdr_struct! {
    /// REMOVE arguments (RFC 8881 §18.25).
    #[doc(alias = "REMOVE4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Remove4Args { pub target: Component4 }
}
xdr_struct! {
    /// RENAME arguments (RFC 8881 §18.26): saved fh is the source directory, current fh the target.
    #[doc(alias = "RENAME4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Rename4Args { pub oldname: Component4, pub newname: Component4 }
}
xdr_struct! {
    /// RENAME result (RFC 8881 §18.26).
    #[doc(alias = "RENAME4resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Rename4ResOk { pub source_cinfo: ChangeInfo4, pub target_cinfo: ChangeInfo4 }
}

// ------------------------------------------------------------ SECINFO (§18.29), SECINFO_NO_NAME (§18.45)

xdr_struct! {
    /// SECINFO arguments (RFC 8881 §18.29).
    #[doc(alias = "SECINFO4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Secinfo4Args { pub name: Component4 }
}
xdr_struct! {
    /// An RPCSEC_GSS mechanism (`rpcsec_gss_info`).
    #[doc(alias = "rpcsec_gss_info")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct RpcsecGssInfo { pub oid: Opaque<SEC_OID_MAX>, pub qop: u32, pub service: u32 }
}

/// One security flavor an object accepts (`secinfo4`).
#[doc(alias = "secinfo4")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Secinfo4 {
    /// RPCSEC_GSS with this mechanism.
    Gss(RpcsecGssInfo),
    /// Any other flavor (AUTH_NONE 0, AUTH_SYS 1, …; never 6).
    Flavor(u32),
}

impl Encode for Secinfo4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Secinfo4::Gss(g) => {
                6u32.encode(buf);
                g.encode(buf)
            }
            Secinfo4::Flavor(f) => f.encode(buf),
        }
    }
}
impl Decode for Secinfo4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match u32::decode(buf)? {
            6 => Secinfo4::Gss(RpcsecGssInfo::decode(buf)?),
            f => Secinfo4::Flavor(f),
        })
    }
}

/// SECINFO's list of flavors (`SECINFO4resok`).
#[doc(alias = "SECINFO4resok")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Secinfo4ResOk(pub Vec<Secinfo4>);

impl Encode for Secinfo4ResOk {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_array(buf, &self.0)
    }
}
impl Decode for Secinfo4ResOk {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        decode_array(buf, SEC_PARMS_MAX).map(Secinfo4ResOk)
    }
}

xdr_enum! {
    /// Which object SECINFO_NO_NAME asks about (`secinfo_style4`).
    #[doc(alias = "secinfo_style4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum SecinfoStyle4 {
        CurrentFh = 0,
        Parent = 1,
    }
}

// ------------------------------------------------------------ SETATTR (§18.30)

xdr_struct! {
    /// SETATTR arguments (RFC 8881 §18.30).
    #[doc(alias = "SETATTR4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Setattr4Args { pub stateid: Stateid4, pub obj_attributes: Fattr4 }
}

/// SETATTR result (RFC 8881 §18.30): the bitmap of what was set follows every status.
#[doc(alias = "SETATTR4res")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setattr4Res {
    pub status: Nfsstat4,
    pub attrsset: Bitmap4,
}

impl Encode for Setattr4Res {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.status.encode(buf);
        self.attrsset.encode(buf)
    }
}
impl Decode for Setattr4Res {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(Setattr4Res { status: Nfsstat4::decode(buf)?, attrsset: Bitmap4::decode(buf)? })
    }
}

impl Setattr4Res {
    /// The status word.
    pub fn status(&self) -> Nfsstat4 {
        self.status
    }
}

// ------------------------------------------------------------ WRITE (§18.32), RELEASE_LOCKOWNER (§18.37 of 7530)

/// WRITE arguments (RFC 8881 §18.32): the data is shared with the receive buffer.
#[doc(alias = "WRITE4args")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write4Args {
    pub stateid: Stateid4,
    pub offset: u64,
    pub stable: StableHow4,
    pub data: Bytes,
}

impl Encode for Write4Args {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.stateid.encode(buf);
        self.offset.encode(buf);
        self.stable.encode(buf);
        encode_opaque(buf, &self.data)
    }
}
impl Decode for Write4Args {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(Write4Args {
            stateid: Stateid4::decode(buf)?,
            offset: u64::decode(buf)?,
            stable: StableHow4::decode(buf)?,
            data: decode_opaque(buf, MAX_IO_SIZE)?,
        })
    }
}

xdr_struct! {
    /// WRITE result (RFC 8881 §18.32).
    #[doc(alias = "WRITE4resok")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Write4ResOk { pub count: u32, pub committed: StableHow4, pub writeverf: Verifier4 }
}

xdr_struct! {
    /// RELEASE_LOCKOWNER arguments (RFC 7530 §16.37; not part of NFSv4.1).
    #[doc(alias = "RELEASE_LOCKOWNER4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct ReleaseLockowner4Args { pub lock_owner: StateOwner4 }
}

// ------------------------------------------------------------ sessions (§18.33–§18.37, §18.46)

xdr_struct! {
    /// BACKCHANNEL_CTL arguments (RFC 8881 §18.33).
    #[doc(alias = "BACKCHANNEL_CTL4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct BackchannelCtl4Args { pub cb_program: u32, pub sec_parms: SecParmsList }
}

xdr_enum! {
    /// Which channels the client wants a connection for (`channel_dir_from_client4`).
    #[doc(alias = "channel_dir_from_client4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ChannelDirFromClient4 {
        Fore = 1,
        Back = 2,
        ForeOrBoth = 3,
        BackOrBoth = 7,
    }
}
xdr_enum! {
    /// Which channels the server bound the connection to (`channel_dir_from_server4`).
    #[doc(alias = "channel_dir_from_server4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ChannelDirFromServer4 {
        Fore = 1,
        Back = 2,
        Both = 3,
    }
}

xdr_struct! {
    /// BIND_CONN_TO_SESSION arguments (RFC 8881 §18.34).
    #[doc(alias = "BIND_CONN_TO_SESSION4args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct BindConnToSession4Args {
        pub sessid: Sessionid4,
        pub dir: ChannelDirFromClient4,
        pub use_conn_in_rdma_mode: bool,
    }
}
xdr_struct! {
    /// BIND_CONN_TO_SESSION result (RFC 8881 §18.34).
    #[doc(alias = "BIND_CONN_TO_SESSION4resok")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct BindConnToSession4ResOk {
        pub sessid: Sessionid4,
        pub dir: ChannelDirFromServer4,
        pub use_conn_in_rdma_mode: bool,
    }
}

/// EXCHANGE_ID flag: the server supports referrals.
pub const EXCHGID4_FLAG_SUPP_MOVED_REFER: u32 = 0x0000_0001;
/// EXCHANGE_ID flag: the server supports migration.
pub const EXCHGID4_FLAG_SUPP_MOVED_MIGR: u32 = 0x0000_0002;
/// EXCHANGE_ID flag: fence operations.
pub const EXCHGID4_FLAG_SUPP_FENCE_OPS: u32 = 0x0000_0004;
/// EXCHANGE_ID flag: stateids bound to the principal.
pub const EXCHGID4_FLAG_BIND_PRINC_STATEID: u32 = 0x0000_0100;
/// EXCHANGE_ID flag: a plain (non-pNFS) server.
pub const EXCHGID4_FLAG_USE_NON_PNFS: u32 = 0x0001_0000;
/// EXCHANGE_ID flag: a pNFS metadata server.
pub const EXCHGID4_FLAG_USE_PNFS_MDS: u32 = 0x0002_0000;
/// EXCHANGE_ID flag: a pNFS data server.
pub const EXCHGID4_FLAG_USE_PNFS_DS: u32 = 0x0004_0000;
/// The pNFS role flags.
pub const EXCHGID4_FLAG_MASK_PNFS: u32 = 0x0007_0000;
/// EXCHANGE_ID flag: update the confirmed record (client), or reply to one (server).
pub const EXCHGID4_FLAG_UPD_CONFIRMED_REC_A: u32 = 0x4000_0000;
/// EXCHANGE_ID flag: the client id was already confirmed.
pub const EXCHGID4_FLAG_CONFIRMED_R: u32 = 0x8000_0000;
/// Every flag a client may send.
pub const EXCHGID4_FLAG_MASK_A: u32 = 0x4007_0103;
/// Every flag a server may send.
pub const EXCHGID4_FLAG_MASK_R: u32 = 0x8007_0103;

xdr_struct! {
    /// EXCHANGE_ID arguments (RFC 8881 §18.35).
    #[doc(alias = "EXCHANGE_ID4args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ExchangeId4Args {
        pub clientowner: ClientOwner4,
        pub flags: u32,
        pub state_protect: StateProtect4A,
        pub client_impl_id: ImplIdOpt,
    }
}
xdr_struct! {
    /// EXCHANGE_ID result (RFC 8881 §18.35).
    #[doc(alias = "EXCHANGE_ID4resok")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ExchangeId4ResOk {
        pub clientid: Clientid4,
        pub sequenceid: Sequenceid4,
        pub flags: u32,
        pub state_protect: StateProtect4R,
        pub server_owner: ServerOwner4,
        pub server_scope: Opaque<NFS4_OPAQUE_LIMIT>,
        pub server_impl_id: ImplIdOpt,
    }
}

/// CREATE_SESSION flag: a persistent reply cache.
pub const CREATE_SESSION4_FLAG_PERSIST: u32 = 0x1;
/// CREATE_SESSION flag: this connection also carries the back channel.
pub const CREATE_SESSION4_FLAG_CONN_BACK_CHAN: u32 = 0x2;
/// CREATE_SESSION flag: RDMA.
pub const CREATE_SESSION4_FLAG_CONN_RDMA: u32 = 0x4;

xdr_struct! {
    /// CREATE_SESSION arguments (RFC 8881 §18.36).
    #[doc(alias = "CREATE_SESSION4args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CreateSession4Args {
        pub clientid: Clientid4,
        pub sequence: Sequenceid4,
        pub flags: u32,
        pub fore_chan_attrs: ChannelAttrs4,
        pub back_chan_attrs: ChannelAttrs4,
        pub cb_program: u32,
        pub sec_parms: SecParmsList,
    }
}
xdr_struct! {
    /// CREATE_SESSION result (RFC 8881 §18.36).
    #[doc(alias = "CREATE_SESSION4resok")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CreateSession4ResOk {
        pub sessionid: Sessionid4,
        pub sequence: Sequenceid4,
        pub flags: u32,
        pub fore_chan_attrs: ChannelAttrs4,
        pub back_chan_attrs: ChannelAttrs4,
    }
}

xdr_struct! {
    /// DESTROY_SESSION arguments (RFC 8881 §18.37).
    #[doc(alias = "DESTROY_SESSION4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct DestroySession4Args { pub sessionid: Sessionid4 }
}
xdr_struct! {
    /// FREE_STATEID arguments (RFC 8881 §18.38).
    #[doc(alias = "FREE_STATEID4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct FreeStateid4Args { pub stateid: Stateid4 }
}

xdr_struct! {
    /// SEQUENCE arguments (RFC 8881 §18.46).
    #[doc(alias = "SEQUENCE4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Sequence4Args {
        pub sessionid: Sessionid4,
        pub sequenceid: Sequenceid4,
        pub slotid: Slotid4,
        pub highest_slotid: Slotid4,
        pub cachethis: bool,
    }
}

/// SEQUENCE status flag: no back channel works.
pub const SEQ4_STATUS_CB_PATH_DOWN: u32 = 0x0001;
/// SEQUENCE status flag: every piece of the client's state was revoked after its lease expired.
pub const SEQ4_STATUS_EXPIRED_ALL_STATE_REVOKED: u32 = 0x0008;
/// SEQUENCE status flag: some state was revoked after the lease expired.
pub const SEQ4_STATUS_EXPIRED_SOME_STATE_REVOKED: u32 = 0x0010;
/// SEQUENCE status flag: an administrator revoked state.
pub const SEQ4_STATUS_ADMIN_STATE_REVOKED: u32 = 0x0020;
/// SEQUENCE status flag: a delegation was revoked (not returned in time).
pub const SEQ4_STATUS_RECALLABLE_STATE_REVOKED: u32 = 0x0040;
/// SEQUENCE status flag: reclaim is needed.
pub const SEQ4_STATUS_RESTART_RECLAIM_NEEDED: u32 = 0x0100;
/// SEQUENCE status flag: this session has no back channel.
pub const SEQ4_STATUS_CB_PATH_DOWN_SESSION: u32 = 0x0200;
/// SEQUENCE status flag: the back channel failed.
pub const SEQ4_STATUS_BACKCHANNEL_FAULT: u32 = 0x0400;

xdr_struct! {
    /// SEQUENCE result (RFC 8881 §18.46).
    #[doc(alias = "SEQUENCE4resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Sequence4ResOk {
        pub sessionid: Sessionid4,
        pub sequenceid: Sequenceid4,
        pub slotid: Slotid4,
        pub highest_slotid: Slotid4,
        pub target_highest_slotid: Slotid4,
        pub status_flags: u32,
    }
}

/// TEST_STATEID arguments (RFC 8881 §18.48).
#[doc(alias = "TEST_STATEID4args")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TestStateid4Args(pub Vec<Stateid4>);

impl Encode for TestStateid4Args {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_array(buf, &self.0)
    }
}
impl Decode for TestStateid4Args {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        decode_array(buf, TEST_STATEIDS_MAX).map(TestStateid4Args)
    }
}

/// TEST_STATEID result (RFC 8881 §18.48): a status per stateid.
#[doc(alias = "TEST_STATEID4resok")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TestStateid4ResOk(pub Vec<Nfsstat4>);

impl Encode for TestStateid4ResOk {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_array(buf, &self.0)
    }
}
impl Decode for TestStateid4ResOk {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        decode_array(buf, TEST_STATEIDS_MAX).map(TestStateid4ResOk)
    }
}

/// What WANT_DELEGATION asks about (`deleg_claim4`).
#[doc(alias = "deleg_claim4")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DelegClaim4 {
    Fh,
    DelegPrevFh,
    Previous(OpenDelegationType4),
}

impl Encode for DelegClaim4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            DelegClaim4::Fh => 4u32.encode(buf),
            DelegClaim4::DelegPrevFh => 6u32.encode(buf),
            DelegClaim4::Previous(t) => {
                1u32.encode(buf);
                t.encode(buf)
            }
        }
    }
}
impl Decode for DelegClaim4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match u32::decode(buf)? {
            4 => DelegClaim4::Fh,
            6 => DelegClaim4::DelegPrevFh,
            1 => DelegClaim4::Previous(OpenDelegationType4::decode(buf)?),
            value => return Err(Error::BadEnum { name: "deleg_claim4", value }),
        })
    }
}

xdr_struct! {
    /// WANT_DELEGATION arguments (RFC 8881 §18.49).
    #[doc(alias = "WANT_DELEGATION4args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct WantDelegation4Args { pub want: u32, pub claim: DelegClaim4 }
}
xdr_struct! {
    /// GET_DIR_DELEGATION arguments (RFC 8881 §18.39): a delegation of the
    /// current directory, and which changes the client would like to be
    /// told of (notifications) rather than have it recalled for.
    #[doc(alias = "GET_DIR_DELEGATION4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct GetDirDelegation4Args {
        pub signal_deleg_avail: bool,
        pub notification_types: Bitmap4,
        pub child_attr_delay: Nfstime4,
        pub dir_attr_delay: Nfstime4,
        pub child_attributes: Bitmap4,
        pub dir_attributes: Bitmap4,
    }
}
xdr_struct! {
    /// A directory delegation granted (`GET_DIR_DELEGATION4resok`).
    #[doc(alias = "GET_DIR_DELEGATION4resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct GetDirDelegation4ResOk {
        pub cookieverf: Verifier4,
        pub stateid: Stateid4,
        /// The notifications the server will send (none: every change recalls).
        pub notification: Bitmap4,
        pub child_attributes: Bitmap4,
        pub dir_attributes: Bitmap4,
    }
}

/// GET_DIR_DELEGATION's NFS4_OK result (`GET_DIR_DELEGATION4res_non_fatal`):
/// the delegation, or why not (GDD4_UNAVAIL), which is no error.
#[doc(alias = "GET_DIR_DELEGATION4res_non_fatal")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetDirDelegation4Res {
    /// GDD4_OK.
    Granted(GetDirDelegation4ResOk),
    /// GDD4_UNAVAIL, and whether the server will signal (CB_RECALLABLE_OBJ_AVAIL) when one is.
    Unavail { will_signal: bool },
}

/// `gddrnf4_status`: GDD4_OK.
pub const GDD4_OK: u32 = 0;
/// `gddrnf4_status`: GDD4_UNAVAIL.
pub const GDD4_UNAVAIL: u32 = 1;

impl Encode for GetDirDelegation4Res {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            GetDirDelegation4Res::Granted(ok) => {
                GDD4_OK.encode(buf);
                ok.encode(buf);
            }
            GetDirDelegation4Res::Unavail { will_signal } => {
                GDD4_UNAVAIL.encode(buf);
                will_signal.encode(buf);
            }
        }
    }
}
impl Decode for GetDirDelegation4Res {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        match u32::decode(buf)? {
            GDD4_OK => Ok(GetDirDelegation4Res::Granted(GetDirDelegation4ResOk::decode(buf)?)),
            GDD4_UNAVAIL => Ok(GetDirDelegation4Res::Unavail { will_signal: bool::decode(buf)? }),
            value => Err(Error::BadEnum { name: "gddrnf4_status", value }),
        }
    }
}
xdr_struct! {
    /// DESTROY_CLIENTID arguments (RFC 8881 §18.50).
    #[doc(alias = "DESTROY_CLIENTID4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct DestroyClientid4Args { pub clientid: Clientid4 }
}
xdr_struct! {
    /// RECLAIM_COMPLETE arguments (RFC 8881 §18.51).
    #[doc(alias = "RECLAIM_COMPLETE4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct ReclaimComplete4Args { pub one_fs: bool }
}

// ------------------------------------------------------------ NFSv4.2 (RFC 7862 §15)

xdr_struct! {
    /// ALLOCATE and DEALLOCATE arguments (RFC 7862 §15.1, §15.4).
    #[doc(alias = "ALLOCATE4args")]
    #[doc(alias = "DEALLOCATE4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Allocate4Args { pub stateid: Stateid4, pub offset: u64, pub length: u64 }
}

/// Where a copy's source is (`netloc4`).
#[doc(alias = "netloc4")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Netloc4 {
    Name(Utf8Str),
    Url(Utf8Str),
    Netaddr(Netaddr4),
}

impl Encode for Netloc4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Netloc4::Name(n) => {
                1u32.encode(buf);
                n.encode(buf)
            }
            Netloc4::Url(u) => {
                2u32.encode(buf);
                u.encode(buf)
            }
            Netloc4::Netaddr(a) => {
                3u32.encode(buf);
                a.encode(buf)
            }
        }
    }
}
impl Decode for Netloc4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match u32::decode(buf)? {
            1 => Netloc4::Name(Utf8Str::decode(buf)?),
            2 => Netloc4::Url(Utf8Str::decode(buf)?),
            3 => Netloc4::Netaddr(Netaddr4::decode(buf)?),
            value => return Err(Error::BadEnum { name: "netloc_type4", value }),
        })
    }
}

/// Source servers of an inter-server copy (`netloc4 x<>`); at most 16.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetlocList(pub Vec<Netloc4>);

impl Encode for NetlocList {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_array(buf, &self.0)
    }
}
impl Decode for NetlocList {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        decode_array(buf, 16).map(NetlocList)
    }
}

xdr_struct! {
    /// COPY arguments (RFC 7862 §15.2): saved fh is the source, current fh the destination.
    #[doc(alias = "COPY4args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Copy4Args {
        pub src_stateid: Stateid4,
        pub dst_stateid: Stateid4,
        pub src_offset: u64,
        pub dst_offset: u64,
        pub count: u64,
        pub consecutive: bool,
        pub synchronous: bool,
        pub source_server: NetlocList,
    }
}

/// An asynchronous operation's stateid, if any (`stateid4 x<1>`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallbackId(pub Option<Stateid4>);

impl Encode for CallbackId {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.0.encode(buf)
    }
}
impl Decode for CallbackId {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        match u32::decode(buf)? {
            0 => Ok(CallbackId(None)),
            1 => Ok(CallbackId(Some(Stateid4::decode(buf)?))),
            len => Err(Error::TooLong { len: len as usize, max: 1 }),
        }
    }
}

xdr_struct! {
    /// How much a copy wrote and how durably (`write_response4`).
    #[doc(alias = "write_response4")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct WriteResponse4 {
        pub callback_id: CallbackId,
        pub count: u64,
        pub committed: StableHow4,
        pub writeverf: Verifier4,
    }
}
xdr_struct! {
    /// What the copy did (`copy_requirements4`).
    #[doc(alias = "copy_requirements4")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct CopyRequirements4 { pub consecutive: bool, pub synchronous: bool }
}
xdr_struct! {
    /// COPY result (RFC 7862 §15.2).
    #[doc(alias = "COPY4resok")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Copy4ResOk { pub response: WriteResponse4, pub requirements: CopyRequirements4 }
}

/// COPY result (RFC 7862 §15.2, `COPY4res`).
#[doc(alias = "COPY4res")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Copy4Res {
    Ok(Copy4ResOk),
    /// NFS4ERR_OFFLOAD_NO_REQS and what the server could do.
    OffloadNoReqs(CopyRequirements4),
    Err(Nfsstat4),
}

impl Copy4Res {
    /// The status word.
    pub fn status(&self) -> Nfsstat4 {
        match self {
            Copy4Res::Ok(_) => Nfsstat4::Ok,
            Copy4Res::OffloadNoReqs(_) => Nfsstat4::OffloadNoReqs,
            Copy4Res::Err(s) => *s,
        }
    }
}

impl Encode for Copy4Res {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Copy4Res::Ok(r) => {
                Nfsstat4::Ok.encode(buf);
                r.encode(buf)
            }
            Copy4Res::OffloadNoReqs(r) => {
                Nfsstat4::OffloadNoReqs.encode(buf);
                r.encode(buf)
            }
            Copy4Res::Err(s) if *s == Nfsstat4::OffloadNoReqs => Nfsstat4::Serverfault.encode(buf),
            Copy4Res::Err(s) => fail_status(*s).encode(buf),
        }
    }
}
impl Decode for Copy4Res {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match Nfsstat4::decode(buf)? {
            Nfsstat4::Ok => Copy4Res::Ok(Copy4ResOk::decode(buf)?),
            Nfsstat4::OffloadNoReqs => Copy4Res::OffloadNoReqs(CopyRequirements4::decode(buf)?),
            s => Copy4Res::Err(s),
        })
    }
}

xdr_struct! {
    /// CLONE arguments (RFC 7862 §15.13): saved fh is the source, current fh the destination.
    #[doc(alias = "CLONE4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Clone4Args {
        pub src_stateid: Stateid4,
        pub dst_stateid: Stateid4,
        pub src_offset: u64,
        pub dst_offset: u64,
        pub count: u64,
    }
}

xdr_enum! {
    /// Data or hole (`data_content4`).
    #[doc(alias = "data_content4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum DataContent4 {
        Data = 0,
        Hole = 1,
    }
}
xdr_struct! {
    /// SEEK arguments (RFC 7862 §15.11).
    #[doc(alias = "SEEK4args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Seek4Args { pub stateid: Stateid4, pub offset: u64, pub what: DataContent4 }
}
xdr_struct! {
    /// SEEK result (RFC 7862 §15.11).
    #[doc(alias = "seek_res4")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Seek4ResOk { pub eof: bool, pub offset: u64 }
}

// ------------------------------------------------------------ extended attributes (RFC 8276)

/// Longest extended attribute value decoded (Linux's `XATTR_SIZE_MAX`).
pub const XATTR_VALUE_MAX: usize = 64 * 1024;
/// Most names in one LISTXATTRS reply decoded.
pub const XATTR_NAMES_MAX: usize = 4096;
/// ACCESS: read extended attributes (RFC 8276 §8.4.1).
pub const ACCESS4_XAREAD: u32 = 0x40;
/// ACCESS: write extended attributes.
pub const ACCESS4_XAWRITE: u32 = 0x80;
/// ACCESS: list extended attributes.
pub const ACCESS4_XALIST: u32 = 0x100;

/// An extended attribute's value (`xattrvalue4`).
#[doc(alias = "xattrvalue4")]
pub type Xattrvalue4 = Opaque<XATTR_VALUE_MAX>;

xdr_struct! {
    /// GETXATTR arguments (RFC 8276 §8.4.2).
    #[doc(alias = "GETXATTR4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Getxattr4Args { pub name: Component4 }
}

xdr_enum! {
    /// Whether SETXATTR creates, replaces or either (`setxattr_option4`).
    #[doc(alias = "setxattr_option4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum SetxattrOption4 {
        Either = 0,
        Create = 1,
        Replace = 2,
    }
}

xdr_struct! {
    /// SETXATTR arguments (RFC 8276 §8.4.3).
    #[doc(alias = "SETXATTR4args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Setxattr4Args { pub option: SetxattrOption4, pub key: Component4, pub value: Xattrvalue4 }
}

xdr_struct! {
    /// LISTXATTRS arguments (RFC 8276 §8.4.4).
    #[doc(alias = "LISTXATTRS4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Listxattrs4Args { pub cookie: u64, pub maxcount: u32 }
}

/// Attribute names (`xattrkey4 x<>`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct XattrNames(pub Vec<Component4>);

impl Encode for XattrNames {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_array(buf, &self.0)
    }
}
impl Decode for XattrNames {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        decode_array(buf, XATTR_NAMES_MAX).map(XattrNames)
    }
}

xdr_struct! {
    /// LISTXATTRS result (RFC 8276 §8.4.4).
    #[doc(alias = "LISTXATTRS4resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Listxattrs4ResOk { pub cookie: u64, pub names: XattrNames, pub eof: bool }
}

xdr_struct! {
    /// REMOVEXATTR arguments (RFC 8276 §8.4.5).
    #[doc(alias = "REMOVEXATTR4args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Removexattr4Args { pub name: Component4 }
}
