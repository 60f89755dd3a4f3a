//! COMPOUNDs as the client sends them (sans-IO): the operations after
//! SEQUENCE are encoded into one call, a WRITE's data is sent from the
//! caller's buffer without a copy, and [`Reply`] reads the results back in
//! order, turning a failed operation's status into the client's error.

use super::status;
use crate::core::Call;
use crate::ops::{NfsError, NfsResult};
use bytes::{BufMut, Bytes, BytesMut};
use eagernfs_proto::nfs4::*;
use eagernfs_rpc::OpaqueAuth;
use eagernfs_xdr::{Encode, Opaque};

/// Bytes already encoded, written as they are.
struct Raw<'a>(&'a [u8]);

impl Encode for Raw<'_> {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        buf.put_slice(self.0)
    }
}

/// Bytes an operation of a COMPOUND usually takes (a PUTFH of a 32-byte
/// handle is 40, a GETATTR 16, a LOOKUP 8 and its name).
const OP_BYTES_TYPICAL: usize = 48;

/// A COMPOUND's arguments: its head, SEQUENCE and the operations.
struct Args<'a> {
    minor: u32,
    count: u32,
    sequence: Option<Sequence4Args>,
    ops: &'a [ArgOp],
}

impl Encode for Args<'_> {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        Compound4Head { tag: Opaque::default(), minorversion: self.minor, count: self.count }.encode(buf);
        if let Some(s) = &self.sequence {
            ArgOp::Sequence(s.clone()).encode(buf);
        }
        for op in self.ops {
            op.encode(buf);
        }
    }
}

/// WRITE payloads at least this large go on the wire from the caller's
/// buffer; smaller ones are cheaper to copy than to send as an iovec.
const ZERO_COPY_MIN_BYTES: usize = 4096;

/// The call for `SEQUENCE` (if any) followed by `ops`, as `auth`.
pub(crate) fn encode(minor: u32, sequence: Option<Sequence4Args>, ops: &[ArgOp], auth: &OpaqueAuth) -> Call {
    let count = ops.len() as u32 + u32::from(sequence.is_some());
    // A large WRITE's data goes after the head, not copied into it.
    let split =
        ops.iter().position(|op| matches!(op, ArgOp::Write(w) if w.data.len() >= ZERO_COPY_MIN_BYTES));
    let Some(at) = split else {
        // Encoded straight into the call's record: no buffer of its own to
        // copy from, and room for what a COMPOUND of `ops` usually takes
        // (a record grown from the header's size was reallocated per call).
        let args = Args { minor, count, sequence, ops };
        let hint = 64 + ops.len() * OP_BYTES_TYPICAL;
        return Call::new(NFS_PROGRAM, NFS_V4, NFSPROC4_COMPOUND, auth, &args, hint);
    };
    let mut head = BytesMut::with_capacity(256);
    Args { minor, count, sequence, ops: &ops[..at] }.encode(&mut head);
    let ArgOp::Write(w) = &ops[at] else { unreachable!("found above") };
    OP_WRITE.encode(&mut head);
    w.stateid.encode(&mut head);
    w.offset.encode(&mut head);
    w.stable.encode(&mut head);
    let mut after = BytesMut::new();
    for op in &ops[at + 1..] {
        op.encode(&mut after);
    }
    Call::with_opaque_between(
        NFS_PROGRAM,
        NFS_V4,
        NFSPROC4_COMPOUND,
        auth,
        &Raw(&head),
        w.data.clone(),
        after.freeze(),
    )
}

/// Operations that change nothing on the server, neither files nor state:
/// a COMPOUND of only these (after SEQUENCE) may go on a lane
/// ([`crate::lane`]), as NFSv3's read-only procedures do. READ is one (its
/// stateid is only checked), and GET_DIR_DELEGATION (a second copy gets the
/// delegation the first granted: the server grants a client one per
/// directory); OPEN, CLOSE, LOCK, DELEGRETURN and every operation that
/// changes a file are not.
const CHANGES_NOTHING: [u32; 17] = [
    OP_ACCESS,
    OP_GET_DIR_DELEGATION,
    OP_GETATTR,
    OP_GETFH,
    OP_LOOKUP,
    OP_LOOKUPP,
    OP_NVERIFY,
    OP_PUTFH,
    OP_PUTPUBFH,
    OP_PUTROOTFH,
    OP_READ,
    OP_READDIR,
    OP_READLINK,
    OP_RESTOREFH,
    OP_SAVEFH,
    OP_SECINFO_NO_NAME,
    OP_VERIFY,
];

/// Whether the COMPOUND of SEQUENCE and `ops` changes nothing on the server
/// (see [`CHANGES_NOTHING`]): sending it twice does no harm.
pub(crate) fn changes_nothing(ops: &[ArgOp]) -> bool {
    ops.iter().all(|op| CHANGES_NOTHING.contains(&op.opnum()))
}

/// A COMPOUND's results, read in the order the operations were sent.
#[derive(Debug)]
pub(crate) struct Reply {
    /// The COMPOUND's status: the last operation's.
    pub(crate) status: Nfsstat4,
    results: std::vec::IntoIter<ResOp>,
}

macro_rules! results {
    ($( $name:ident => $op:ident $variant:ident -> $ty:ty; )*) => {
        impl Reply {
            $(
                #[doc = concat!("The next result, which must be ", stringify!($op), "'s and a success.")]
                pub(crate) fn $name(&mut self) -> NfsResult<$ty> {
                    match self.op($op)? {
                        ResOp::$variant(Res4::Ok(v)) => Ok(v),
                        r => Err(mismatch(&r, $op)),
                    }
                }
            )*
        }
    };
}

results! {
    getattr => OP_GETATTR Getattr -> Fattr4;
    getfh => OP_GETFH Getfh -> NfsFh4;
    access => OP_ACCESS Access -> Access4ResOk;
    readlink => OP_READLINK Readlink -> Linktext4;
    read => OP_READ Read -> Read4ResOk;
    write => OP_WRITE Write -> Write4ResOk;
    commit => OP_COMMIT Commit -> Verifier4;
    create => OP_CREATE Create -> Create4ResOk;
    open => OP_OPEN Open -> Open4ResOk;
    close => OP_CLOSE Close -> Stateid4;
    downgrade => OP_OPEN_DOWNGRADE OpenDowngrade -> Stateid4;
    remove => OP_REMOVE Remove -> ChangeInfo4;
    rename => OP_RENAME Rename -> Rename4ResOk;
    link => OP_LINK Link -> ChangeInfo4;
    readdir => OP_READDIR Readdir -> Readdir4ResOk;
    locku => OP_LOCKU Locku -> Stateid4;
    exchange_id => OP_EXCHANGE_ID ExchangeId -> ExchangeId4ResOk;
    create_session => OP_CREATE_SESSION CreateSession -> CreateSession4ResOk;
    bind_conn => OP_BIND_CONN_TO_SESSION BindConnToSession -> BindConnToSession4ResOk;
}

impl Reply {
    /// The next result if it is GETATTR's and a success: attributes after a
    /// change, which may fail without undoing it.
    pub(crate) fn getattr_opt(&mut self) -> Option<Fattr4> {
        match self.results.next() {
            Some(ResOp::Getattr(Res4::Ok(v))) => Some(v),
            _ => None,
        }
    }

    /// The next result if it is GETFH's and a success.
    pub(crate) fn getfh_opt(&mut self) -> Option<NfsFh4> {
        match self.results.next() {
            Some(ResOp::Getfh(Res4::Ok(v))) => Some(v),
            _ => None,
        }
    }
}

/// A result that passed [`Reply::op`]'s checks but is not the variant
/// expected (only a result this crate does not model can be).
fn mismatch(r: &ResOp, opnum: u32) -> NfsError {
    NfsError::BadReply(format!("{} result of an unexpected form: {:?}", op_name(opnum), r.status()))
}

impl Reply {
    pub(crate) fn new(res: Compound4Res) -> Reply {
        Reply { status: res.status, results: res.resarray.into_iter() }
    }

    /// The next result: operation `opnum`'s, and a success; its status as
    /// the error otherwise (or the COMPOUND's, if the server stopped before
    /// it).
    pub(crate) fn op(&mut self, opnum: u32) -> NfsResult<ResOp> {
        match self.results.next() {
            Some(r) if r.opnum() != opnum => Err(NfsError::BadReply(format!(
                "the server answered {} where {} was sent",
                op_name(r.opnum()),
                op_name(opnum)
            ))),
            Some(r) if !r.status().is_ok() => Err(status::error(r.status())),
            Some(r) => Ok(r),
            None if self.status.is_ok() => {
                Err(NfsError::BadReply(format!("no result for {} in a successful COMPOUND", op_name(opnum))))
            }
            None => Err(status::error(self.status)),
        }
    }

    /// No result is left: the server stopped before the operations still
    /// to be read (or answered them all).
    pub(crate) fn exhausted(&self) -> bool {
        self.results.len() == 0
    }

    /// The next result, which must be a success of `opnum` (for results
    /// with no body: PUTFH, LOOKUP, SAVEFH, …).
    pub(crate) fn ok(&mut self, opnum: u32) -> NfsResult<()> {
        self.op(opnum).map(|_| ())
    }

    /// SETATTR's result (its bitmap follows every status).
    pub(crate) fn setattr(&mut self) -> NfsResult<Bitmap4> {
        match self.op(OP_SETATTR)? {
            ResOp::Setattr(r) => Ok(r.attrsset),
            r => Err(mismatch(&r, OP_SETATTR)),
        }
    }

    /// LOCK's result: the lock stateid, or the lock in the way.
    pub(crate) fn lock(&mut self) -> NfsResult<Result<Stateid4, Lock4Denied>> {
        match self.results.next() {
            Some(ResOp::Lock(Lock4Res::Ok(s))) => Ok(Ok(s)),
            Some(ResOp::Lock(Lock4Res::Denied(d))) => Ok(Err(d)),
            Some(ResOp::Lock(Lock4Res::Err(s))) => Err(status::error(s)),
            Some(r) => Err(mismatch(&r, OP_LOCK)),
            None => Err(status::error(self.status)),
        }
    }

    /// LOCKT's result: `None` if nothing is in the way.
    pub(crate) fn lockt(&mut self) -> NfsResult<Option<Lock4Denied>> {
        match self.results.next() {
            Some(ResOp::Lockt(Lockt4Res::Ok)) => Ok(None),
            Some(ResOp::Lockt(Lockt4Res::Denied(d))) => Ok(Some(d)),
            Some(ResOp::Lockt(Lockt4Res::Err(s))) => Err(status::error(s)),
            Some(r) => Err(mismatch(&r, OP_LOCKT)),
            None => Err(status::error(self.status)),
        }
    }

    /// Skip the next result whatever it is (an operation whose outcome the
    /// caller does not need, such as a trailing CLOSE).
    pub(crate) fn skip(&mut self) -> Option<ResOp> {
        self.results.next()
    }

    /// The status of the first `main` operations (after SEQUENCE): OK if
    /// all of them ran and succeeded, else the COMPOUND's. Operations added
    /// after them for another purpose (CLOSEs riding along) do not decide
    /// whether the request is tried again.
    pub(crate) fn main_status(&self, main: usize) -> Nfsstat4 {
        let r = self.results.as_slice();
        if r.len() >= main && r[..main].iter().all(|x| x.status().is_ok()) {
            Nfsstat4::Ok
        } else {
            self.status
        }
    }

    /// Keep the results of the first `main` operations (with their status,
    /// see [`Reply::main_status`]); returns the rest.
    pub(crate) fn split_off(&mut self, main: usize) -> Vec<ResOp> {
        self.split_off_after(main, main)
    }

    /// Keep the results of the first `own` operations, with the status of
    /// the first `main` of them (see [`Reply::main_status`]); returns the
    /// rest.
    pub(crate) fn split_off_after(&mut self, main: usize, own: usize) -> Vec<ResOp> {
        let status = self.main_status(main);
        let mut all: Vec<ResOp> = std::mem::take(&mut self.results).collect();
        let tail = all.split_off(own.min(all.len()));
        self.results = all.into_iter();
        self.status = status;
        tail
    }
}

/// A file name as a component; empty or longer than any server takes is
/// refused here, as a local file system would.
pub(crate) fn component(name: &[u8]) -> NfsResult<Component4> {
    if name.is_empty() {
        return Err(NfsError::Nfs(eagernfs_proto::nfs3::Nfsstat3::Inval));
    }
    if name.len() > eagernfs_proto::nfs3::NFS3_NAME_MAX {
        return Err(NfsError::Nfs(eagernfs_proto::nfs3::Nfsstat3::Nametoolong));
    }
    Ok(Opaque(Bytes::copy_from_slice(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_split_after_its_own_results_with_the_status_of_those_that_decide() {
        // READDIR's COMPOUND with a GET_DIR_DELEGATION asked in passing (refused), then CLOSEs riding along.
        let res = Compound4Res {
            status: Nfsstat4::Notsupp,
            tag: Default::default(),
            resarray: vec![
                ResOp::Putfh(Res4::OK),
                ResOp::Getattr(Res4::Ok(Fattr4::default())),
                ResOp::Putfh(Res4::OK),
                ResOp::GetDirDelegation(Res4::Err(Nfsstat4::Notsupp)),
            ],
        };
        let mut r = Reply::new(res.clone());
        assert_eq!(r.main_status(2), Nfsstat4::Ok);
        assert_eq!(r.main_status(4), Nfsstat4::Notsupp);
        let tail = r.split_off_after(2, 4);
        assert!(tail.is_empty(), "the riders never ran: {tail:?}");
        assert_eq!(r.status, Nfsstat4::Ok, "the request itself succeeded");
        assert_eq!(r.results.len(), 4, "its own results stay, the refused one too");
        let mut r = Reply::new(res);
        assert_eq!(r.split_off(2).len(), 2);
        assert_eq!(r.results.len(), 2);
    }

    fn args_of(call: &Call) -> Compound4Args {
        let mut rec = call.wire_bytes().slice(4..);
        let _ = eagernfs_rpc::Message::decode(&mut rec).unwrap();
        eagernfs_xdr::decode_exact(rec).unwrap()
    }

    #[test]
    fn a_compound_goes_on_the_wire_as_compound4args_encodes_it() {
        let fh = NfsFh4 { data: Opaque::from_static(b"a file handle") };
        let seq = Sequence4Args {
            sessionid: [9; 16],
            sequenceid: 7,
            slotid: 1,
            highest_slotid: 3,
            cachethis: false,
        };
        let ops: Vec<ArgOp> = (0..40)
            .flat_map(|i| {
                [
                    ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
                    ArgOp::Lookup(Lookup4Args { objname: Opaque(Bytes::from(format!("name-{i}"))) }),
                    ArgOp::Getattr(Getattr4Args { attr_request: Bitmap4::from_bits(&[1, 3, 4, 33, 53]) }),
                ]
            })
            .collect();
        for n in [0, 1, 3, ops.len()] {
            for sequence in [None, Some(seq.clone())] {
                let mut argarray: Vec<ArgOp> = sequence.clone().map(ArgOp::Sequence).into_iter().collect();
                argarray.extend(ops[..n].iter().cloned());
                let args = Compound4Args { tag: Opaque::default(), minorversion: 1, argarray };
                let want = Call::new(NFS_PROGRAM, NFS_V4, NFSPROC4_COMPOUND, &OpaqueAuth::none(), &args, 0);
                let got = encode(1, sequence, &ops[..n], &OpaqueAuth::none());
                assert_eq!(got.wire_bytes(), want.wire_bytes(), "{n} operations");
            }
        }
    }

    #[test]
    fn a_large_write_is_sent_from_its_buffer_and_decodes_as_the_same_compound() {
        let data = Bytes::from(vec![7u8; 10_001]);
        let ops = vec![
            ArgOp::Putfh(Putfh4Args { object: NfsFh4 { data: Opaque::from_static(b"fh") } }),
            ArgOp::Write(Write4Args {
                stateid: Stateid4::ANONYMOUS,
                offset: 5,
                stable: StableHow4::FileSync4,
                data: data.clone(),
            }),
            ArgOp::Getattr(Getattr4Args { attr_request: Bitmap4::from_bits(&[FATTR4_SIZE]) }),
        ];
        let seq = Sequence4Args {
            sessionid: [1; 16],
            sequenceid: 2,
            slotid: 3,
            highest_slotid: 4,
            cachethis: true,
        };
        let call = encode(2, Some(seq.clone()), &ops, &OpaqueAuth::none());
        assert!(!call.is_contiguous(), "the data is not copied");
        let back = args_of(&call);
        assert_eq!(back.minorversion, 2);
        let mut want = vec![ArgOp::Sequence(seq)];
        want.extend(ops.clone());
        assert_eq!(back.argarray, want);
        // Small writes are copied, and decode the same.
        let mut small = ops;
        if let ArgOp::Write(w) = &mut small[1] {
            w.data = Bytes::from_static(b"abc");
        }
        let call = encode(1, None, &small, &OpaqueAuth::none());
        assert!(call.is_contiguous());
        assert_eq!(args_of(&call).argarray, small);
    }

    #[test]
    fn results_are_read_in_order_and_failures_become_errors() {
        let res = Compound4Res {
            status: Nfsstat4::Noent,
            tag: Opaque::default(),
            resarray: vec![ResOp::Putfh(Res4::OK), ResOp::Lookup(Res4::Err(Nfsstat4::Noent))],
        };
        let mut r = Reply::new(res.clone());
        r.ok(OP_PUTFH).unwrap();
        assert_eq!(r.ok(OP_LOOKUP), Err(NfsError::Nfs(eagernfs_proto::nfs3::Nfsstat3::Noent)));
        assert_eq!(r.getfh(), Err(NfsError::Nfs(eagernfs_proto::nfs3::Nfsstat3::Noent)), "stopped before it");
        let mut r = Reply::new(res);
        assert!(matches!(r.getattr(), Err(NfsError::BadReply(m)) if m.contains("PUTFH")));
    }
}
