//! A look at a call before it is decoded: which NFSv3 procedure, which
//! file, how much data, how stable. The service threads use it to decide
//! whether a call may block (it then hands the connection to another
//! thread before running it) and to keep one file's READs and WRITEs in
//! arrival order. Anything unexpected is "not an NFS I/O call": the real
//! decoder reports the error later.

use eagernfs_proto::nfs3::{NFS3_FHSIZE, NFS_PROGRAM, NFS_V3};
use eagernfs_proto::nfs4::{
    NFS4_FHSIZE, NFS_V4, OP_COMMIT, OP_CREATE, OP_LINK, OP_LOCK, OP_LOCKT, OP_LOCKU, OP_OPEN, OP_PUTFH,
    OP_READ, OP_REMOVE, OP_RENAME, OP_SAVEFH, OP_SEQUENCE, OP_SETATTR, OP_WRITE, UTF8STR_MAX,
};
use eagernfs_proto::nlm::NLM_PROGRAM;

/// NFSv3 procedure numbers this looks at (RFC 1813).
const READ: u32 = 6;
const WRITE: u32 = 7;
const COMMIT: u32 = 21;
/// Procedures that change attributes or names: on a file system that
/// journals them on other machines (CephFS), each waits for that.
const CHANGES_METADATA: [u32; 9] = [2, 8, 9, 10, 11, 12, 13, 14, 15];
/// NFSv4 operations after SEQUENCE and PUTFH that change attributes or
/// names, or take part in locks (SAVEFH starts a Linux client's RENAME and
/// LINK): the NFSv4 counterparts of [`CHANGES_METADATA`] and NLM's calls.
const V4_CHANGES_METADATA: [u32; 10] =
    [OP_SETATTR, OP_CREATE, OP_OPEN, OP_REMOVE, OP_RENAME, OP_LINK, OP_SAVEFH, OP_LOCK, OP_LOCKT, OP_LOCKU];
/// Bytes of READ or WRITE data above which a call counts as slow: a cold
/// 1 MiB READ waits for the disk, a large WRITE may wait for write-back.
const LARGE_IO_BYTES: u32 = 64 * 1024;
/// Largest credential or verifier body RFC 5531 allows.
const AUTH_BODY_MAX: usize = 400;

/// What a call is, as far as scheduling cares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Peeked {
    /// The call may block in the backend for long (COMMIT, a stable or
    /// large WRITE, a large READ): run it on a thread of its own.
    pub(crate) may_block: bool,
    /// An NFSv3 READ or WRITE of this file (a hash of its handle): such
    /// calls of one connection enter the backend in arrival order.
    pub(crate) io_file: Option<u64>,
    /// The export an NFS call is for (the first bytes of its first file
    /// handle: every NFSv3 procedure but NULL starts with one; an NFSv4
    /// COMPOUND's PUTFH after SEQUENCE, when it names an exported object).
    pub(crate) export: Option<u32>,
    /// The call changes attributes or names (SETATTR, CREATE, MKDIR,
    /// SYMLINK, MKNOD, REMOVE, RMDIR, RENAME, LINK; in NFSv4 also OPEN and
    /// the lock operations): it may block if its export's backend waits on
    /// other machines.
    pub(crate) changes_metadata: bool,
    /// A call of the lock manager (which may wait on a file system's own locks).
    pub(crate) nlm: bool,
    /// An NFSv4 COMPOUND: its reply belongs to a session slot, so no one
    /// but the call itself may answer it (no JUKEBOX from a watchdog).
    pub(crate) nfs4: bool,
}

struct Cursor<'a> {
    b: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn u32(&mut self) -> Option<u32> {
        let (head, rest) = self.b.split_first_chunk::<4>()?;
        self.b = rest;
        Some(u32::from_be_bytes(*head))
    }

    fn opaque(&mut self, max: usize) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        if len > max {
            return None;
        }
        let padded = len.checked_add(3)? & !3;
        if self.b.len() < padded {
            return None;
        }
        let (data, rest) = self.b.split_at(padded);
        self.b = rest;
        Some(&data[..len])
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        self.b = self.b.get(n..)?;
        Some(())
    }
}

/// Look at `record` (one RPC message). With `writes_block`, every WRITE may
/// block (an intent journal answers each one after a group commit).
pub(crate) fn peek(record: &[u8], writes_block: bool) -> Peeked {
    inspect(record, writes_block).unwrap_or_default()
}

fn inspect(record: &[u8], writes_block: bool) -> Option<Peeked> {
    let mut c = Cursor { b: record };
    let _xid = c.u32()?;
    if c.u32()? != 0 {
        return None; // not a call
    }
    let _rpcvers = c.u32()?;
    let (prog, vers, proc_) = (c.u32()?, c.u32()?, c.u32()?);
    if prog == NLM_PROGRAM {
        return Some(Peeked { nlm: proc_ != 0, ..Peeked::default() });
    }
    if prog != NFS_PROGRAM || (vers != NFS_V3 && vers != NFS_V4) {
        return None;
    }
    for _ in 0..2 {
        let _flavor = c.u32()?;
        c.opaque(AUTH_BODY_MAX)?;
    }
    if vers == NFS_V4 {
        return inspect_compound(&mut c, proc_, writes_block);
    }
    if proc_ == 0 {
        return None;
    }
    let fh = c.opaque(NFS3_FHSIZE)?;
    let export = fh.first_chunk::<4>().map(|b| u32::from_be_bytes(*b));
    let plain = Peeked { export, changes_metadata: CHANGES_METADATA.contains(&proc_), ..Peeked::default() };
    match proc_ {
        COMMIT => Some(Peeked { may_block: true, ..plain }),
        READ | WRITE => {
            c.skip(8)?; // offset
            let count = c.u32()?;
            let stable_write = proc_ == WRITE && (c.u32()? != 0 || writes_block);
            Some(Peeked {
                may_block: stable_write || count > LARGE_IO_BYTES,
                io_file: Some(fnv1a(fh)),
                ..plain
            })
        }
        _ => Some(plain),
    }
}

/// An NFSv4 COMPOUND shaped as a client sends it: SEQUENCE, PUTFH, then
/// READ, WRITE or COMMIT, or an operation that changes metadata (anything
/// after them does not change the verdict).
fn inspect_compound(c: &mut Cursor, proc_: u32, writes_block: bool) -> Option<Peeked> {
    if proc_ != 1 {
        return None;
    }
    c.opaque(UTF8STR_MAX)?; // tag
    c.skip(8)?; // minor version, operation count
    if c.u32()? != OP_SEQUENCE {
        return None;
    }
    c.skip(16 + 4 * 4)?; // session id, sequence id, slot, highest slot, cachethis
    if c.u32()? != OP_PUTFH {
        return None;
    }
    let fh = c.opaque(NFS4_FHSIZE)?;
    // A pseudo directory's handle is its 4-byte node id: no export.
    let export = fh.first_chunk::<4>().filter(|_| fh.len() > 4).map(|b| u32::from_be_bytes(*b));
    let plain = Peeked { export, nfs4: true, ..Peeked::default() };
    match c.u32()? {
        OP_COMMIT => Some(Peeked { may_block: true, ..plain }),
        OP_READ => {
            c.skip(16 + 8)?; // stateid, offset
            let count = c.u32()?;
            Some(Peeked { may_block: count > LARGE_IO_BYTES, io_file: Some(fnv1a(fh)), ..plain })
        }
        OP_WRITE => {
            c.skip(16 + 8)?; // stateid, offset
            let stable = c.u32()? != 0 || writes_block;
            let len = c.u32()?;
            Some(Peeked { may_block: stable || len > LARGE_IO_BYTES, io_file: Some(fnv1a(fh)), ..plain })
        }
        op => Some(Peeked { changes_metadata: V4_CHANGES_METADATA.contains(&op), ..plain }),
    }
}

fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| (h ^ u64::from(*x)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(prog: u32, proc_: u32, args: &[u32]) -> Vec<u8> {
        let mut v: Vec<u32> = vec![7, 0, 2, prog, 3, proc_];
        // AUTH_SYS with a 4-byte body, then AUTH_NONE.
        v.extend([1, 4, 0xdead, 0, 0]);
        v.extend_from_slice(args);
        v.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    /// fh of 8 bytes, offset, count, (stable).
    fn io_args(fh: u32, count: u32, stable: Option<u32>) -> Vec<u32> {
        let mut a = vec![8, fh, fh, 0, 4096, count];
        a.extend(stable);
        a
    }

    #[test]
    fn classifies_nfs_calls() {
        let p = |proc_, args: &[u32]| peek(&call(NFS_PROGRAM, proc_, args), false);
        let r = p(READ, &io_args(1, 8192, None));
        assert_eq!(r, Peeked { may_block: false, io_file: r.io_file, export: Some(1), ..Peeked::default() });
        assert!(r.io_file.is_some());
        assert!(p(READ, &io_args(1, 1 << 20, None)).may_block);
        assert!(!p(WRITE, &io_args(1, 8192, Some(0))).may_block, "small UNSTABLE");
        assert!(p(WRITE, &io_args(1, 8192, Some(2))).may_block, "FILE_SYNC");
        assert!(p(COMMIT, &[8, 1, 1]).may_block);
        assert_eq!(p(1, &[]), Peeked::default(), "GETATTR without its handle");
        assert_eq!(p(1, &[8, 7, 7]), Peeked { export: Some(7), ..Peeked::default() }, "GETATTR");
        for proc_ in [2, 8, 9, 10, 11, 12, 13, 14, 15] {
            let m = p(proc_, &[8, 0x0102_0304, 9]);
            assert_eq!((m.export, m.changes_metadata), (Some(0x0102_0304), true), "proc {proc_}");
            assert!(!m.may_block, "blocks only if its export waits on other machines");
        }
        assert!(!p(4, &[8, 1, 1, 0]).changes_metadata, "ACCESS");
        assert!(peek(&call(NLM_PROGRAM, 2, &[]), false).nlm, "NLM LOCK");
        assert!(!peek(&call(NLM_PROGRAM, 0, &[]), false).nlm, "NLM NULL");
        let a = p(READ, &io_args(1, 10, None)).io_file;
        let b = p(WRITE, &io_args(2, 10, Some(0))).io_file;
        assert_ne!(a, b, "different files");
    }

    #[test]
    fn with_a_journal_every_write_may_block() {
        let unstable = call(NFS_PROGRAM, WRITE, &io_args(1, 8192, Some(0)));
        assert!(peek(&unstable, true).may_block);
        assert!(!peek(&call(NFS_PROGRAM, READ, &io_args(1, 8192, None)), true).may_block);
    }

    /// NFSv4: SEQUENCE, PUTFH, then the I/O operation.
    fn compound(op: u32, args: &[u32]) -> Vec<u8> {
        let mut v: Vec<u32> = vec![9, 0, 2, NFS_PROGRAM, NFS_V4, 1];
        v.extend([1, 4, 0xdead, 0, 0]);
        v.extend([0, 1, 3]); // empty tag, minor version 1, three operations
        v.extend([OP_SEQUENCE, 1, 2, 3, 4, 5, 0, 0, 0]);
        v.extend([OP_PUTFH, 8, 7, 7]);
        v.push(op);
        v.extend_from_slice(args);
        v.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    #[test]
    fn classifies_nfsv4_compounds() {
        let stateid = [0u32; 4];
        let io = |count: u32, stable: Option<u32>| {
            let mut a = stateid.to_vec();
            a.extend([0, 0]);
            match stable {
                Some(s) => a.extend([s, count]),
                None => a.push(count),
            }
            a
        };
        let r = peek(&compound(OP_READ, &io(8192, None)), false);
        assert!(!r.may_block && r.io_file.is_some());
        assert!(peek(&compound(OP_READ, &io(1 << 20, None)), false).may_block);
        assert!(!peek(&compound(OP_WRITE, &io(8192, Some(0))), false).may_block, "small UNSTABLE");
        assert!(peek(&compound(OP_WRITE, &io(8192, Some(2))), false).may_block, "FILE_SYNC");
        assert!(peek(&compound(OP_WRITE, &io(8192, Some(0))), true).may_block, "behind a journal");
        assert!(peek(&compound(OP_COMMIT, &[0, 0, 0]), false).may_block);
        let getattr = peek(&compound(9, &[1, 2]), false);
        assert_eq!(getattr, Peeked { export: Some(7), nfs4: true, ..Peeked::default() }, "GETATTR");
        for op in V4_CHANGES_METADATA {
            let m = peek(&compound(op, &[0, 0]), false);
            assert_eq!((m.export, m.changes_metadata, m.may_block), (Some(7), true, false), "op {op}");
        }
        assert!(!peek(&compound(15, &[0]), false).changes_metadata, "LOOKUP");
        // A pseudo-root directory's handle (4 bytes, its node id) names no export.
        let mut pseudo = compound(OP_OPEN, &[0]);
        let at = pseudo.windows(4).position(|w| w == OP_PUTFH.to_be_bytes()).unwrap() + 4;
        pseudo.splice(at..at + 12, [4u32, 7].iter().flat_map(|w| w.to_be_bytes()));
        let p = peek(&pseudo, false);
        assert_eq!((p.export, p.changes_metadata, p.nfs4), (None, true, true), "{p:?}");
        // The handle's bytes name the file, as for NFSv3.
        let fh = [0, 0, 0, 7, 0, 0, 0, 7];
        assert_eq!(peek(&compound(OP_READ, &io(8192, None)), false).io_file, Some(fnv1a(&fh)));
    }

    #[test]
    fn anything_odd_is_plain() {
        assert_eq!(peek(&call(100005, READ, &io_args(1, 1 << 20, None)), false), Peeked::default(), "MOUNT");
        let mut short = call(NFS_PROGRAM, READ, &io_args(1, 8192, None));
        short.truncate(short.len() - 4);
        assert_eq!(peek(&short, false), Peeked::default());
        assert_eq!(peek(&[], false), Peeked::default());
        let huge_fh = call(NFS_PROGRAM, READ, &[1000, 0, 0]);
        assert_eq!(peek(&huge_fh, false), Peeked::default());
    }
}
