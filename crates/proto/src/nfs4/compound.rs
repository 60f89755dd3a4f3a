//! COMPOUND and its operation arrays (RFC 8881 §16.2, `COMPOUND4args`,
//! `COMPOUND4res`, `nfs_argop4`, `nfs_resop4`).
//!
//! A server decodes a COMPOUND one operation at a time
//! ([`Compound4Head`], then [`ArgOp::decode`] per operation) so that it
//! never holds more than one operation's arguments, can stop at the first
//! error, and can answer an operation whose arguments do not decode with
//! NFS4ERR_BADXDR for that operation. A client encodes whole
//! [`Compound4Args`] and decodes whole [`Compound4Res`].

use eagernfs_xdr::{BufMut, Bytes, Decode, Encode, Error, Result};

use super::ops::*;
use super::types::*;
use super::{op_info, OP_ILLEGAL};

/// The start of COMPOUND4args: the tag, the minor version and the number of operations.
#[doc(alias = "COMPOUND4args")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Compound4Head {
    pub tag: Utf8Str,
    pub minorversion: u32,
    /// How many operations follow (not checked against any limit here).
    pub count: u32,
}

impl Encode for Compound4Head {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.tag.encode(buf);
        self.minorversion.encode(buf);
        self.count.encode(buf)
    }
}
impl Decode for Compound4Head {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(Compound4Head {
            tag: Utf8Str::decode(buf)?,
            minorversion: u32::decode(buf)?,
            count: u32::decode(buf)?,
        })
    }
}

/// An operation whose arguments did not decode: answer it with NFS4ERR_BADXDR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("arguments of operation {opnum} do not decode: {error}")]
pub struct OpDecodeError {
    pub opnum: u32,
    pub error: Error,
}

macro_rules! nfs4_ops {
    ($( $number:literal $variant:ident($args:ty, $res:ty); )*) => {
        /// One operation of a COMPOUND and its arguments (`nfs_argop4`).
        #[doc(alias = "nfs_argop4")]
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum ArgOp {
            $(
                #[doc = concat!("Operation ", stringify!($number), ".")]
                $variant($args),
            )*
            /// A defined operation whose arguments this crate does not model
            /// (answered NFS4ERR_NOTSUPP; nothing after it is decoded).
            NotDecoded(u32),
            /// An undefined operation number (answered OP_ILLEGAL; nothing after it is decoded).
            Illegal(u32),
        }

        /// One operation's result (`nfs_resop4`).
        #[doc(alias = "nfs_resop4")]
        // Results live briefly while a reply is built or read; boxing the
        // larger ones would cost an allocation per operation.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum ResOp {
            $(
                #[doc = concat!("Result of operation ", stringify!($number), ".")]
                $variant($res),
            )*
            /// The status of an operation whose results this crate does not
            /// model (never NFS4_OK).
            NotDecoded(u32, Nfsstat4),
            /// OP_ILLEGAL's status (NFS4ERR_OP_ILLEGAL).
            Illegal(Nfsstat4),
        }

        impl ArgOp {
            /// Decode one operation (its number, then its arguments) from the front of `buf`.
            pub fn decode(buf: &mut Bytes) -> std::result::Result<ArgOp, OpDecodeError> {
                let opnum = u32::decode(buf).map_err(|error| OpDecodeError { opnum: OP_ILLEGAL, error })?;
                let wrap = |error| OpDecodeError { opnum, error };
                Ok(match opnum {
                    $( $number => ArgOp::$variant(<$args>::decode(buf).map_err(wrap)?), )*
                    n if op_info(n).is_some() => ArgOp::NotDecoded(n),
                    n => ArgOp::Illegal(n),
                })
            }

            /// The operation number.
            pub fn opnum(&self) -> u32 {
                match self {
                    $( ArgOp::$variant(_) => $number, )*
                    ArgOp::NotDecoded(n) | ArgOp::Illegal(n) => *n,
                }
            }
        }

        impl Encode for ArgOp {
            fn encode<B: BufMut>(&self, buf: &mut B) {
                self.opnum().encode(buf);
                match self {
                    $( ArgOp::$variant(a) => a.encode(buf), )*
                    ArgOp::NotDecoded(_) | ArgOp::Illegal(_) => {}
                }
            }
        }
        impl Decode for ArgOp {
            fn decode(buf: &mut Bytes) -> Result<Self> {
                ArgOp::decode(buf).map_err(|e| e.error)
            }
        }

        impl ResOp {
            /// The operation number this result is sent with (OP_ILLEGAL for [`ResOp::Illegal`]).
            pub fn opnum(&self) -> u32 {
                match self {
                    $( ResOp::$variant(_) => $number, )*
                    ResOp::NotDecoded(n, _) => *n,
                    ResOp::Illegal(_) => OP_ILLEGAL,
                }
            }

            /// The operation's status.
            pub fn status(&self) -> Nfsstat4 {
                match self {
                    $( ResOp::$variant(r) => r.status(), )*
                    ResOp::NotDecoded(_, s) | ResOp::Illegal(s) => *s,
                }
            }
        }

        impl Encode for ResOp {
            fn encode<B: BufMut>(&self, buf: &mut B) {
                self.opnum().encode(buf);
                match self {
                    $( ResOp::$variant(r) => r.encode(buf), )*
                    ResOp::NotDecoded(_, s) | ResOp::Illegal(s) => s.encode(buf),
                }
            }
        }
        impl Decode for ResOp {
            fn decode(buf: &mut Bytes) -> Result<Self> {
                let opnum = u32::decode(buf)?;
                Ok(match opnum {
                    $( $number => ResOp::$variant(<$res>::decode(buf)?), )*
                    OP_ILLEGAL => ResOp::Illegal(Nfsstat4::decode(buf)?),
                    n if op_info(n).is_some() => {
                        let s = Nfsstat4::decode(buf)?;
                        if s.is_ok() {
                            // The body of a result this crate does not model cannot be skipped.
                            return Err(Error::BadEnum { name: "nfs_resop4 (undecoded operation)", value: n });
                        }
                        ResOp::NotDecoded(n, s)
                    }
                    value => return Err(Error::BadEnum { name: "nfs_opnum4", value }),
                })
            }
        }
    };
}

nfs4_ops! {
    3 Access(Access4Args, Res4<Access4ResOk>);
    4 Close(Close4Args, Res4<Stateid4>);
    5 Commit(Commit4Args, Res4<Verifier4>);
    6 Create(Create4Args, Res4<Create4ResOk>);
    7 Delegpurge(Delegpurge4Args, StatusRes);
    8 Delegreturn(Delegreturn4Args, StatusRes);
    9 Getattr(Getattr4Args, Res4<Fattr4>);
    10 Getfh((), Res4<NfsFh4>);
    11 Link(Link4Args, Res4<ChangeInfo4>);
    12 Lock(Lock4Args, Lock4Res);
    13 Lockt(Lockt4Args, Lockt4Res);
    14 Locku(Locku4Args, Res4<Stateid4>);
    15 Lookup(Lookup4Args, StatusRes);
    16 Lookupp((), StatusRes);
    17 Nverify(Verify4Args, StatusRes);
    18 Open(Open4Args, Res4<Open4ResOk>);
    19 Openattr(Openattr4Args, StatusRes);
    21 OpenDowngrade(OpenDowngrade4Args, Res4<Stateid4>);
    22 Putfh(Putfh4Args, StatusRes);
    23 Putpubfh((), StatusRes);
    24 Putrootfh((), StatusRes);
    25 Read(Read4Args, Res4<Read4ResOk>);
    26 Readdir(Readdir4Args, Res4<Readdir4ResOk>);
    27 Readlink((), Res4<Linktext4>);
    28 Remove(Remove4Args, Res4<ChangeInfo4>);
    29 Rename(Rename4Args, Res4<Rename4ResOk>);
    31 Restorefh((), StatusRes);
    32 Savefh((), StatusRes);
    33 Secinfo(Secinfo4Args, Res4<Secinfo4ResOk>);
    34 Setattr(Setattr4Args, Setattr4Res);
    37 Verify(Verify4Args, StatusRes);
    38 Write(Write4Args, Res4<Write4ResOk>);
    39 ReleaseLockowner(ReleaseLockowner4Args, StatusRes);
    40 BackchannelCtl(BackchannelCtl4Args, StatusRes);
    41 BindConnToSession(BindConnToSession4Args, Res4<BindConnToSession4ResOk>);
    42 ExchangeId(ExchangeId4Args, Res4<ExchangeId4ResOk>);
    43 CreateSession(CreateSession4Args, Res4<CreateSession4ResOk>);
    44 DestroySession(DestroySession4Args, StatusRes);
    45 FreeStateid(FreeStateid4Args, StatusRes);
    46 GetDirDelegation(GetDirDelegation4Args, Res4<GetDirDelegation4Res>);
    52 SecinfoNoName(SecinfoStyle4, Res4<Secinfo4ResOk>);
    53 Sequence(Sequence4Args, Res4<Sequence4ResOk>);
    55 TestStateid(TestStateid4Args, Res4<TestStateid4ResOk>);
    56 WantDelegation(WantDelegation4Args, Res4<OpenDelegation4>);
    57 DestroyClientid(DestroyClientid4Args, StatusRes);
    58 ReclaimComplete(ReclaimComplete4Args, StatusRes);
    59 Allocate(Allocate4Args, StatusRes);
    60 Copy(Copy4Args, Copy4Res);
    62 Deallocate(Allocate4Args, StatusRes);
    69 Seek(Seek4Args, Res4<Seek4ResOk>);
    71 Clone(Clone4Args, StatusRes);
    72 Getxattr(Getxattr4Args, Res4<Xattrvalue4>);
    73 Setxattr(Setxattr4Args, Res4<ChangeInfo4>);
    74 Listxattrs(Listxattrs4Args, Res4<Listxattrs4ResOk>);
    75 Removexattr(Removexattr4Args, Res4<ChangeInfo4>);
}

impl Res4<()> {
    /// NFS4_OK with no body.
    pub const OK: StatusRes = Res4::Ok(());
}

/// A whole COMPOUND request (`COMPOUND4args`), for clients and tests.
#[doc(alias = "COMPOUND4args")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Compound4Args {
    pub tag: Utf8Str,
    pub minorversion: u32,
    pub argarray: Vec<ArgOp>,
}

/// Most operations a whole [`Compound4Args`] or [`Compound4Res`] decodes
/// (a server decodes one at a time and applies the session's limit).
pub const COMPOUND_OPS_MAX: usize = 1024;

impl Encode for Compound4Args {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        Compound4Head {
            tag: self.tag.clone(),
            minorversion: self.minorversion,
            count: self.argarray.len() as u32,
        }
        .encode(buf);
        for op in &self.argarray {
            op.encode(buf);
        }
    }
}
impl Decode for Compound4Args {
    /// Decodes every operation; stops after an undecodable one (NotDecoded
    /// or Illegal), whose arguments cannot be skipped.
    fn decode(buf: &mut Bytes) -> Result<Self> {
        let head = Compound4Head::decode(buf)?;
        if head.count as usize > COMPOUND_OPS_MAX {
            return Err(Error::TooLong { len: head.count as usize, max: COMPOUND_OPS_MAX });
        }
        let mut argarray = Vec::new();
        for _ in 0..head.count {
            let op = <ArgOp as Decode>::decode(buf)?;
            let last = matches!(op, ArgOp::NotDecoded(_) | ArgOp::Illegal(_));
            argarray.push(op);
            if last {
                break;
            }
        }
        Ok(Compound4Args { tag: head.tag, minorversion: head.minorversion, argarray })
    }
}

/// A whole COMPOUND reply (`COMPOUND4res`).
#[doc(alias = "COMPOUND4res")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compound4Res {
    /// The status of the last operation run (NFS4_OK if all ran).
    pub status: Nfsstat4,
    pub tag: Utf8Str,
    pub resarray: Vec<ResOp>,
}

impl Encode for Compound4Res {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.status.encode(buf);
        self.tag.encode(buf);
        (self.resarray.len() as u32).encode(buf);
        for r in &self.resarray {
            r.encode(buf);
        }
    }
}
impl Decode for Compound4Res {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        let status = Nfsstat4::decode(buf)?;
        let tag = Utf8Str::decode(buf)?;
        let n = u32::decode(buf)? as usize;
        if n > COMPOUND_OPS_MAX {
            return Err(Error::TooLong { len: n, max: COMPOUND_OPS_MAX });
        }
        let mut resarray = Vec::with_capacity(n.min(buf.len() / 8));
        for _ in 0..n {
            resarray.push(ResOp::decode(buf)?);
        }
        Ok(Compound4Res { status, tag, resarray })
    }
}
