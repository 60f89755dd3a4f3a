//! The NFSv3 program (RFC 1813): one small handler per procedure.
//!
//! Each handler resolves its file handle(s) through [`Call::resolve`]
//! (export routing, client access list, secure port, squash), refuses
//! mutations on read-only exports using the procedure table's `mutates`
//! flag, calls the backend, and maps the outcome to the procedure's result
//! type. Failures still carry the attributes RFC 1813 asks for, fetched
//! after the fact when the backend's error did not include them.

use crate::call::{Call, Outcome, Resolved, Transport};
use crate::convert::{self, createhow, fattr, post_op, sattr, stable, stable_wire, status, timestamp, wcc};
use crate::handle;
use crate::reply::{Piece, Reply};
use crate::trace::{IoEvent, IoKind};
use bytes::{Bytes, BytesMut};
use eagernfs_proto::nfs3::*;
use eagernfs_rpc::record::{begin_record, finish_record};
use eagernfs_rpc::ReplyHeader;
use eagernfs_vfs::{access, NodeKind, ReadData};
use eagernfs_xdr::{Encode, Opaque};

/// Decode, run and encode one NFSv3 call.
pub(crate) fn dispatch(call: &Call, mut body: Bytes, out: &mut BytesMut) -> Outcome {
    let started = std::time::Instant::now();
    let Ok(args) = Nfs3Args::decode(call.header.proc_, &mut body) else {
        return Outcome::GarbageArgs;
    };
    let done = |status: Nfsstat3| {
        let ns = started.elapsed().as_nanos() as u64;
        call.state.stats.nfs3_done(call.conn.peer.addr.ip(), call.header.proc_, status, ns);
    };
    let res = match args {
        Nfs3Args::Null(_) => Nfs3Res::Null(Null3Res {}),
        Nfs3Args::Getattr(a) => Nfs3Res::Getattr(getattr(call, a)),
        Nfs3Args::Setattr(a) => Nfs3Res::Setattr(setattr(call, a)),
        Nfs3Args::Lookup(a) => Nfs3Res::Lookup(lookup(call, a)),
        Nfs3Args::Access(a) => Nfs3Res::Access(access_(call, a)),
        Nfs3Args::Readlink(a) => Nfs3Res::Readlink(readlink(call, a)),
        Nfs3Args::Read(a) => match read(call, a) {
            // The data goes to the socket from the backend's buffer or pipe:
            // encode the results with no data, then make the opaque's length
            // say how much follows.
            Ok((ok, data)) => {
                Read3Res::Ok(ok).encode(out);
                let len_at = out.len() - 4;
                out[len_at..].copy_from_slice(&(data.len() as u32).to_be_bytes());
                done(Nfsstat3::Ok);
                return Outcome::RepliedWithData(data);
            }
            Err(r) => Nfs3Res::Read(*r),
        },
        Nfs3Args::Write(a) => Nfs3Res::Write(write(call, a)),
        Nfs3Args::Create(a) => Nfs3Res::Create(create(call, a)),
        Nfs3Args::Mkdir(a) => Nfs3Res::Mkdir(mkdir(call, a)),
        Nfs3Args::Symlink(a) => Nfs3Res::Symlink(symlink(call, a)),
        Nfs3Args::Mknod(a) => Nfs3Res::Mknod(mknod(call, a)),
        Nfs3Args::Remove(a) => Nfs3Res::Remove(remove(call, a)),
        Nfs3Args::Rmdir(a) => Nfs3Res::Rmdir(rmdir(call, a)),
        Nfs3Args::Rename(a) => Nfs3Res::Rename(rename(call, a)),
        Nfs3Args::Link(a) => Nfs3Res::Link(link(call, a)),
        Nfs3Args::Readdir(a) => Nfs3Res::Readdir(readdir(call, a)),
        Nfs3Args::Readdirplus(a) => Nfs3Res::Readdirplus(readdirplus(call, a)),
        Nfs3Args::Fsstat(a) => Nfs3Res::Fsstat(fsstat(call, a)),
        Nfs3Args::Fsinfo(a) => Nfs3Res::Fsinfo(fsinfo(call, a)),
        Nfs3Args::Pathconf(a) => Nfs3Res::Pathconf(pathconf(call, a)),
        Nfs3Args::Commit(a) => Nfs3Res::Commit(commit(call, a)),
    };
    res.encode(out);
    done(res.status());
    Outcome::Replied
}

/// The body of an NFS3ERR_JUKEBOX answer to procedure `proc_`, with no
/// attributes ("try again later": what the service sends for a call still
/// waiting on another machine after its deadline). `None` for NULL and
/// unknown procedures.
pub(crate) fn jukebox_body(proc_: u32) -> Option<BytesMut> {
    // Words after the status in each procedure's failure arm: one per
    // absent post_op_attr, two per wcc_data with neither side.
    let words = match proc_ {
        1 => 0,
        3..=6 | 16..=20 => 1,
        2 | 7..=13 | 21 => 2,
        15 => 3,
        14 => 4,
        _ => return None,
    };
    let mut b = BytesMut::with_capacity(4 + 4 * words);
    Nfsstat3::Jukebox.encode(&mut b);
    for _ in 0..words {
        false.encode(&mut b);
    }
    Some(b)
}

/// An NFSv3 NFS3ERR_JUKEBOX reply to call `xid` of procedure `proc_`.
pub(crate) fn jukebox_reply(xid: u32, proc_: u32) -> Option<Reply> {
    let body = jukebox_body(proc_)?;
    let mut out = BytesMut::with_capacity(48 + body.len());
    let at = begin_record(&mut out);
    ReplyHeader::success(xid).encode(&mut out);
    out.extend_from_slice(&body);
    finish_record(&mut out, at);
    Some(Reply::from(out))
}

impl<'a> Call<'a> {
    /// Resolve `fh` for this procedure, refusing mutations on read-only exports.
    fn target(&self, fh: &NfsFh3) -> Result<Resolved<'a>, Nfsstat3> {
        let r = self.resolve(fh)?;
        let mutates = procedure(self.header.proc_).is_some_and(|p| p.mutates);
        if mutates && r.options.read_only {
            return Err(Nfsstat3::Rofs);
        }
        Ok(r)
    }
}

/// An NFSv4 client holds a delegation of `fh` in `r`'s export (a file, or a
/// directory whose entries this call changes): it is being recalled, and
/// this change must wait (the client retries on JUKEBOX).
/// The counter is read first: with no delegation out (every NFSv3-only
/// server, and most of the time), a WRITE, SETATTR or COMMIT builds no wire
/// handle to look up.
fn delegated(call: &Call, r: &Resolved, fh: &eagernfs_vfs::FileHandle) -> bool {
    call.state
        .nfs4
        .as_ref()
        .is_some_and(|v4| v4.has_delegations() && v4.v3_change(&crate::nfs4::wire_of(r.export.id, fh)))
}

/// An NFSv4 client holds a write delegation of `fh`: it is being recalled,
/// and this READ must wait (JUKEBOX).
fn write_delegated(call: &Call, r: &Resolved, fh: &eagernfs_vfs::FileHandle) -> bool {
    call.state
        .nfs4
        .as_ref()
        .is_some_and(|v4| v4.has_write_delegations() && v4.v3_read(&crate::nfs4::wire_of(r.export.id, fh)))
}

/// As [`delegated`], for the object `name` in directory `r` (REMOVE, RENAME).
fn delegated_child(call: &Call, r: &Resolved, name: &[u8]) -> bool {
    call.state.nfs4.as_ref().is_some_and(|v4| v4.has_delegations())
        && r.export.backend.lookup(&r.cred, &r.fh, name).is_ok_and(|l| delegated(call, r, &l.handle))
}

impl Resolved<'_> {
    /// Attributes for a failure reply (best effort: none if the object is gone).
    fn attr(&self) -> PostOpAttr {
        self.export.backend.getattr(&self.fh).ok().map(|a| fattr(&a))
    }

    /// Wcc data for a failure reply: after-attributes only.
    fn wcc_after(&self) -> WccData {
        WccData { before: None, after: self.attr() }
    }

    fn wire(&self, fh: &eagernfs_vfs::FileHandle) -> NfsFh3 {
        handle::to_wire(self.export.id, fh)
    }
}

/// A name a client may create or remove: non-empty, no `/` or NUL, not `.`/`..`.
fn check_new_name(name: &Filename3) -> Result<(), Nfsstat3> {
    check_lookup_name(name)?;
    if name.as_bytes() == b"." || name.as_bytes() == b".." {
        return Err(Nfsstat3::Exist);
    }
    Ok(())
}

/// A name LOOKUP accepts: one path component (`.` and `..` allowed).
fn check_lookup_name(name: &Filename3) -> Result<(), Nfsstat3> {
    let n = name.as_bytes();
    if n.is_empty() || n.contains(&b'/') || n.contains(&0) {
        return Err(Nfsstat3::Inval);
    }
    Ok(())
}

fn getattr(call: &Call, a: Getattr3Args) -> Getattr3Res {
    let r = match call.target(&a.object) {
        Ok(r) => r,
        Err(s) => return Getattr3Res::Fail(s, ()),
    };
    match r.export.backend.getattr(&r.fh) {
        Ok(mut attr) => {
            // Under another client's write delegation the holder knows the size, change and times.
            if let Some(v4) = call.state.nfs4.as_ref().filter(|v4| v4.has_write_delegations()) {
                if !v4.v3_getattr(&crate::nfs4::wire_of(r.export.id, &r.fh), &mut attr) {
                    return Getattr3Res::Fail(Nfsstat3::Jukebox, ());
                }
            }
            Getattr3Res::Ok(Getattr3ResOk { obj_attributes: fattr(&attr) })
        }
        Err(e) => Getattr3Res::Fail(status(e), ()),
    }
}

fn setattr(call: &Call, a: Setattr3Args) -> Setattr3Res {
    let r = match call.target(&a.object) {
        Ok(r) => r,
        Err(s) => return Setattr3Res::Fail(s, Default::default()),
    };
    if delegated(call, &r, &r.fh) {
        return Setattr3Res::Fail(Nfsstat3::Jukebox, Setattr3ResFail { obj_wcc: r.wcc_after() });
    }
    let guard = a.guard.map(timestamp);
    match r.export.backend.setattr(&r.cred, &r.fh, &sattr(&a.new_attributes), guard) {
        Ok(w) => Setattr3Res::Ok(Setattr3ResOk { obj_wcc: wcc(&w) }),
        Err(e) => Setattr3Res::Fail(status(e), Setattr3ResFail { obj_wcc: r.wcc_after() }),
    }
}

fn lookup(call: &Call, a: Lookup3Args) -> Lookup3Res {
    let r = match call.target(&a.what.dir) {
        Ok(r) => r,
        Err(s) => return Lookup3Res::Fail(s, Default::default()),
    };
    if let Err(s) = check_lookup_name(&a.what.name) {
        return Lookup3Res::Fail(s, Lookup3ResFail { dir_attributes: r.attr() });
    }
    match r.export.backend.lookup(&r.cred, &r.fh, &a.what.name) {
        Ok(l) => Lookup3Res::Ok(Lookup3ResOk {
            object: r.wire(&l.handle),
            obj_attributes: Some(fattr(&l.attr)),
            dir_attributes: post_op(l.dir_attr.as_ref()),
        }),
        Err(e) => Lookup3Res::Fail(status(e), Lookup3ResFail { dir_attributes: r.attr() }),
    }
}

fn access_(call: &Call, a: Access3Args) -> Access3Res {
    let r = match call.target(&a.object) {
        Ok(r) => r,
        Err(s) => return Access3Res::Fail(s, Default::default()),
    };
    match r.export.backend.access(&r.cred, &r.fh, a.access & access::ALL) {
        Ok((mut granted, attr)) => {
            if r.options.read_only {
                granted &= !(access::MODIFY | access::EXTEND | access::DELETE);
            }
            Access3Res::Ok(Access3ResOk { obj_attributes: Some(fattr(&attr)), access: granted })
        }
        Err(e) => Access3Res::Fail(status(e), Access3ResFail { obj_attributes: r.attr() }),
    }
}

fn readlink(call: &Call, a: Readlink3Args) -> Readlink3Res {
    let r = match call.target(&a.symlink) {
        Ok(r) => r,
        Err(s) => return Readlink3Res::Fail(s, Default::default()),
    };
    match r.export.backend.readlink(&r.cred, &r.fh) {
        Ok((target, attr)) => match Opaque::new(target) {
            Ok(data) => Readlink3Res::Ok(Readlink3ResOk { symlink_attributes: Some(fattr(&attr)), data }),
            Err(_) => {
                Readlink3Res::Fail(Nfsstat3::Nametoolong, Readlink3ResFail { symlink_attributes: r.attr() })
            }
        },
        Err(e) => Readlink3Res::Fail(status(e), Readlink3ResFail { symlink_attributes: r.attr() }),
    }
}

/// READs asking this much or more are spliced (when the connection and the
/// backend allow): below it, copying costs less than a pipe's two system calls.
const SPLICE_MIN_BYTES: u32 = 32 * 1024;

/// A READ's results (with empty `data`) and the data, or the failure.
fn read(call: &Call, a: Read3Args) -> Result<(Read3ResOk, Piece), Box<Read3Res>> {
    let r = match call.target(&a.file) {
        Ok(r) => r,
        Err(s) => return Err(Box::new(Read3Res::Fail(s, Default::default()))),
    };
    if write_delegated(call, &r, &r.fh) {
        return Err(Box::new(Read3Res::Fail(Nfsstat3::Jukebox, Read3ResFail { file_attributes: r.attr() })));
    }
    let count = a.count.min(call.io_max(call.state.config.read_max_bytes));
    // Only a stream takes spliced pages; a datagram needs one buffer.
    let splice = call.state.config.splice_reads.for_peer(call.conn.peer.addr.ip())
        && count >= SPLICE_MIN_BYTES
        && call.conn.peer.transport == Transport::Tcp;
    let turn = call.io_turn();
    let seq = call.state.io_trace.as_ref().map(|t| t.start());
    let result = if splice {
        r.export.backend.read_spliced(&r.cred, &r.fh, a.offset, count).map(|s| {
            let data = match s.data {
                ReadData::Buffer(b) => Piece::Bytes(b),
                ReadData::Spliced(p) => Piece::Spliced(p),
            };
            (data, s.eof, s.attr)
        })
    } else {
        r.export.backend.read(&r.cred, &r.fh, a.offset, count).map(|b| (Piece::Bytes(b.data), b.eof, b.attr))
    };
    drop(turn);
    if let (Some(t), Some(seq)) = (&call.state.io_trace, seq) {
        let fileid = result.as_ref().ok().and_then(|(_, _, attr)| attr.as_ref()).map_or(0, |a| a.fileid);
        t.record(IoEvent { seq, kind: IoKind::Read, fileid, offset: a.offset, count });
    }
    match result {
        Ok((data, eof, attr)) => {
            call.state.stats.count_read_bytes(call.conn.peer.addr.ip(), data.len() as u64);
            if matches!(data, Piece::Spliced(_)) {
                call.state.stats.count_spliced_bytes(data.len() as u64);
            }
            let ok = Read3ResOk {
                file_attributes: post_op(attr.as_ref()),
                count: data.len() as u32,
                eof,
                data: Default::default(),
            };
            Ok((ok, data))
        }
        Err(e) => Err(Box::new(Read3Res::Fail(status(e), Read3ResFail { file_attributes: r.attr() }))),
    }
}

fn write(call: &Call, a: Write3Args) -> Write3Res {
    let r = match call.target(&a.file) {
        Ok(r) => r,
        Err(s) => return Write3Res::Fail(s, Default::default()),
    };
    // The data must be what `count` says; a shorter body is a broken client.
    if (a.data.len() as u64) < a.count as u64 || a.count > call.io_max(call.state.config.write_max_bytes) {
        return Write3Res::Fail(Nfsstat3::Inval, Write3ResFail { file_wcc: r.wcc_after() });
    }
    if delegated(call, &r, &r.fh) {
        return Write3Res::Fail(Nfsstat3::Jukebox, Write3ResFail { file_wcc: r.wcc_after() });
    }
    let data = &a.data[..a.count as usize];
    call.state.stats.count_write(a.stable);
    let mut turn = call.io_turn();
    let seq = call.state.io_trace.as_ref().map(|t| t.start());
    // The file's next WRITE may enter the backend once this one's place is
    // fixed there, before it is durable: their syncs can then be shared.
    let result = r
        .export
        .backend
        .write_then(&r.cred, &r.fh, a.offset, data, stable(a.stable), &mut || drop(turn.take()));
    drop(turn);
    if let (Some(t), Some(seq)) = (&call.state.io_trace, seq) {
        let fileid = result.as_ref().ok().and_then(|w| w.wcc.after.as_ref()).map_or(0, |a| a.fileid);
        t.record(IoEvent { seq, kind: IoKind::Write, fileid, offset: a.offset, count: a.count });
    }
    if let Ok(w) = &result {
        call.state.stats.count_written_bytes(call.conn.peer.addr.ip(), w.count as u64);
    }
    match result {
        Ok(w) => Write3Res::Ok(Write3ResOk {
            file_wcc: wcc(&w.wcc),
            count: w.count,
            committed: stable_wire(w.committed),
            verf: w.verifier,
        }),
        Err(e) => Write3Res::Fail(status(e), Write3ResFail { file_wcc: r.wcc_after() }),
    }
}

/// Shared tail of CREATE, MKDIR, SYMLINK and MKNOD.
// The error is built once per failed create and returned straight up: no need to box it.
#[allow(clippy::result_large_err)]
fn created(
    r: &Resolved,
    res: eagernfs_vfs::FsResult<eagernfs_vfs::Created>,
) -> Result<Create3ResOk, (Nfsstat3, WccData)> {
    match res {
        Ok(c) => Ok(Create3ResOk {
            obj: Some(r.wire(&c.handle)),
            obj_attributes: Some(fattr(&c.attr)),
            dir_wcc: wcc(&c.dir_wcc),
        }),
        Err(e) => Err((status(e), r.wcc_after())),
    }
}

macro_rules! create_like {
    ($name:ident, $args:ty, $res:ident, $ok:ident, $fail:ident, |$r:ident, $a:ident| $call:expr) => {
        fn $name(call: &Call, $a: $args) -> $res {
            let $r = match call.target(&$a.where_.dir) {
                Ok(r) => r,
                Err(s) => return $res::Fail(s, Default::default()),
            };
            if let Err(s) = check_new_name(&$a.where_.name) {
                return $res::Fail(s, $fail { dir_wcc: $r.wcc_after() });
            }
            if delegated(call, &$r, &$r.fh) {
                return $res::Fail(Nfsstat3::Jukebox, $fail { dir_wcc: $r.wcc_after() });
            }
            match created(&$r, $call) {
                Ok(ok) => {
                    $res::Ok($ok { obj: ok.obj, obj_attributes: ok.obj_attributes, dir_wcc: ok.dir_wcc })
                }
                Err((s, dir_wcc)) => $res::Fail(s, $fail { dir_wcc }),
            }
        }
    };
}

create_like!(create, Create3Args, Create3Res, Create3ResOk, Create3ResFail, |r, a| {
    r.export.backend.create(&r.cred, &r.fh, &a.where_.name, &createhow(&a.how))
});

create_like!(mkdir, Mkdir3Args, Mkdir3Res, Mkdir3ResOk, Mkdir3ResFail, |r, a| {
    r.export.backend.mkdir(&r.cred, &r.fh, &a.where_.name, &sattr(&a.attributes))
});

create_like!(symlink, Symlink3Args, Symlink3Res, Symlink3ResOk, Symlink3ResFail, |r, a| {
    r.export.backend.symlink(
        &r.cred,
        &r.fh,
        &a.where_.name,
        &a.symlink.symlink_data,
        &sattr(&a.symlink.symlink_attributes),
    )
});

create_like!(mknod, Mknod3Args, Mknod3Res, Mknod3ResOk, Mknod3ResFail, |r, a| {
    let (kind, set) = match &a.what {
        Mknoddata3::Chr(d) => {
            (NodeKind::CharDevice { major: d.spec.specdata1, minor: d.spec.specdata2 }, &d.dev_attributes)
        }
        Mknoddata3::Blk(d) => {
            (NodeKind::BlockDevice { major: d.spec.specdata1, minor: d.spec.specdata2 }, &d.dev_attributes)
        }
        Mknoddata3::Sock(s) => (NodeKind::Socket, s),
        Mknoddata3::Fifo(s) => (NodeKind::Fifo, s),
        // Regular files, directories and links have their own procedures.
        Mknoddata3::Reg | Mknoddata3::Dir | Mknoddata3::Lnk => {
            return Mknod3Res::Fail(Nfsstat3::Badtype, Mknod3ResFail { dir_wcc: r.wcc_after() })
        }
    };
    r.export.backend.mknod(&r.cred, &r.fh, &a.where_.name, kind, &sattr(set))
});

fn remove(call: &Call, a: Remove3Args) -> Remove3Res {
    let r = match call.target(&a.object.dir) {
        Ok(r) => r,
        Err(s) => return Remove3Res::Fail(s, Default::default()),
    };
    if let Err(s) = check_new_name(&a.object.name) {
        let s = if s == Nfsstat3::Exist { Nfsstat3::Inval } else { s };
        return Remove3Res::Fail(s, Remove3ResFail { dir_wcc: r.wcc_after() });
    }
    if delegated(call, &r, &r.fh) || delegated_child(call, &r, &a.object.name) {
        return Remove3Res::Fail(Nfsstat3::Jukebox, Remove3ResFail { dir_wcc: r.wcc_after() });
    }
    match r.export.backend.remove(&r.cred, &r.fh, &a.object.name) {
        Ok(w) => Remove3Res::Ok(Remove3ResOk { dir_wcc: wcc(&w) }),
        Err(e) => Remove3Res::Fail(status(e), Remove3ResFail { dir_wcc: r.wcc_after() }),
    }
}

fn rmdir(call: &Call, a: Rmdir3Args) -> Rmdir3Res {
    let r = match call.target(&a.object.dir) {
        Ok(r) => r,
        Err(s) => return Rmdir3Res::Fail(s, Default::default()),
    };
    if let Err(s) = check_new_name(&a.object.name) {
        let s = if s == Nfsstat3::Exist { Nfsstat3::Inval } else { s };
        return Rmdir3Res::Fail(s, Rmdir3ResFail { dir_wcc: r.wcc_after() });
    }
    if delegated(call, &r, &r.fh) || delegated_child(call, &r, &a.object.name) {
        return Rmdir3Res::Fail(Nfsstat3::Jukebox, Rmdir3ResFail { dir_wcc: r.wcc_after() });
    }
    match r.export.backend.rmdir(&r.cred, &r.fh, &a.object.name) {
        Ok(w) => Rmdir3Res::Ok(Rmdir3ResOk { dir_wcc: wcc(&w) }),
        Err(e) => Rmdir3Res::Fail(status(e), Rmdir3ResFail { dir_wcc: r.wcc_after() }),
    }
}

fn rename(call: &Call, a: Rename3Args) -> Rename3Res {
    let fail = |s, from: Option<&Resolved>, to: Option<&Resolved>| {
        Rename3Res::Fail(
            s,
            Rename3ResFail {
                fromdir_wcc: from.map(|r| r.wcc_after()).unwrap_or_default(),
                todir_wcc: to.map(|r| r.wcc_after()).unwrap_or_default(),
            },
        )
    };
    let from = match call.target(&a.from.dir) {
        Ok(r) => r,
        Err(s) => return fail(s, None, None),
    };
    let to = match call.target(&a.to.dir) {
        Ok(r) => r,
        Err(s) => return fail(s, Some(&from), None),
    };
    if from.export.id != to.export.id {
        return fail(Nfsstat3::Xdev, Some(&from), Some(&to));
    }
    if let Err(s) = check_new_name(&a.from.name).and_then(|_| check_new_name(&a.to.name)) {
        let s = if s == Nfsstat3::Exist { Nfsstat3::Inval } else { s };
        return fail(s, Some(&from), Some(&to));
    }
    if delegated(call, &from, &from.fh)
        || delegated(call, &to, &to.fh)
        || delegated_child(call, &from, &a.from.name)
        || delegated_child(call, &to, &a.to.name)
    {
        return fail(Nfsstat3::Jukebox, Some(&from), Some(&to));
    }
    match from.export.backend.rename(&from.cred, &from.fh, &a.from.name, &to.fh, &a.to.name) {
        Ok((f, t)) => Rename3Res::Ok(Rename3ResOk { fromdir_wcc: wcc(&f), todir_wcc: wcc(&t) }),
        Err(e) => fail(status(e), Some(&from), Some(&to)),
    }
}

fn link(call: &Call, a: Link3Args) -> Link3Res {
    let file = match call.target(&a.file) {
        Ok(r) => r,
        Err(s) => return Link3Res::Fail(s, Default::default()),
    };
    let dir = match call.target(&a.link.dir) {
        Ok(r) => r,
        Err(s) => {
            return Link3Res::Fail(s, Link3ResFail { file_attributes: file.attr(), ..Default::default() })
        }
    };
    let fail =
        |s| Link3Res::Fail(s, Link3ResFail { file_attributes: file.attr(), linkdir_wcc: dir.wcc_after() });
    if file.export.id != dir.export.id {
        return fail(Nfsstat3::Xdev);
    }
    if let Err(s) = check_new_name(&a.link.name) {
        return fail(s);
    }
    if delegated(call, &file, &file.fh) || delegated(call, &dir, &dir.fh) {
        return fail(Nfsstat3::Jukebox);
    }
    match file.export.backend.link(&file.cred, &file.fh, &dir.fh, &a.link.name) {
        Ok((attr, w)) => {
            Link3Res::Ok(Link3ResOk { file_attributes: post_op(attr.as_ref()), linkdir_wcc: wcc(&w) })
        }
        Err(e) => fail(status(e)),
    }
}

/// Bytes of a READDIR(PLUS) reply that are not entries: status, dir
/// attributes (assumed present), cookie verifier, list end and eof.
const READDIR_OVERHEAD: usize = NFS3_STATUS_LEN + 4 + FATTR3_LEN + 8 + 4 + 4;

fn readdir(call: &Call, a: Readdir3Args) -> Readdir3Res {
    let r = match call.target(&a.dir) {
        Ok(r) => r,
        Err(s) => return Readdir3Res::Fail(s, Default::default()),
    };
    let budget = (a.count.min(call.io_max(call.state.config.read_max_bytes)) as usize)
        .saturating_sub(READDIR_OVERHEAD);
    let mut used = 0;
    let mut entries = Vec::new();
    let res = r.export.backend.readdir(&r.cred, &r.fh, a.cookie, a.cookieverf, false, &mut |e| {
        let Ok(name) = Opaque::new(e.name.clone()) else { return true };
        let entry = Entry3 { fileid: e.fileid, name, cookie: e.cookie };
        let len = entry.encoded_len();
        if used + len > budget {
            return false;
        }
        used += len;
        entries.push(entry);
        true
    });
    match res {
        Ok(info) if entries.is_empty() && !info.eof => {
            Readdir3Res::Fail(Nfsstat3::Toosmall, Readdir3ResFail { dir_attributes: r.attr() })
        }
        Ok(info) => Readdir3Res::Ok(Readdir3ResOk {
            dir_attributes: post_op(info.dir_attr.as_ref()),
            cookieverf: info.cookieverf,
            reply: Dirlist3 { entries, eof: info.eof },
        }),
        Err(e) => Readdir3Res::Fail(status(e), Readdir3ResFail { dir_attributes: r.attr() }),
    }
}

fn readdirplus(call: &Call, a: Readdirplus3Args) -> Readdirplus3Res {
    let r = match call.target(&a.dir) {
        Ok(r) => r,
        Err(s) => return Readdirplus3Res::Fail(s, Default::default()),
    };
    let max_budget = (a.maxcount.min(call.io_max(call.state.config.read_max_bytes)) as usize)
        .saturating_sub(READDIR_OVERHEAD);
    // dircount bounds the READDIR-shaped part (fileid, name, cookie); a
    // zero or tiny dircount would starve the reply, so treat it as a hint
    // no smaller than one page.
    let dir_budget = (a.dircount as usize).max(4096);
    let (mut used, mut dir_used) = (0, 0);
    let mut entries = Vec::new();
    let export_id = r.export.id;
    let res = r.export.backend.readdir(&r.cred, &r.fh, a.cookie, a.cookieverf, true, &mut |e| {
        let Ok(name) = Opaque::new(e.name.clone()) else { return true };
        let entry = Entryplus3 {
            fileid: e.fileid,
            name,
            cookie: e.cookie,
            name_attributes: post_op(e.attr.as_ref()),
            name_handle: e.handle.as_ref().map(|h| handle::to_wire(export_id, h)),
        };
        let len = entry.encoded_len();
        let dlen = entry.dircount_len();
        if used + len > max_budget || dir_used + dlen > dir_budget {
            return false;
        }
        used += len;
        dir_used += dlen;
        entries.push(entry);
        true
    });
    match res {
        Ok(info) if entries.is_empty() && !info.eof => {
            Readdirplus3Res::Fail(Nfsstat3::Toosmall, Readdirplus3ResFail { dir_attributes: r.attr() })
        }
        Ok(info) => Readdirplus3Res::Ok(Readdirplus3ResOk {
            dir_attributes: post_op(info.dir_attr.as_ref()),
            cookieverf: info.cookieverf,
            reply: Dirlistplus3 { entries, eof: info.eof },
        }),
        Err(e) => Readdirplus3Res::Fail(status(e), Readdirplus3ResFail { dir_attributes: r.attr() }),
    }
}

fn fsstat(call: &Call, a: Fsstat3Args) -> Fsstat3Res {
    let r = match call.target(&a.fsroot) {
        Ok(r) => r,
        Err(s) => return Fsstat3Res::Fail(s, Default::default()),
    };
    match r.export.backend.fsstat(&r.fh) {
        Ok(s) => Fsstat3Res::Ok(Fsstat3ResOk {
            obj_attributes: r.attr(),
            tbytes: s.total_bytes,
            fbytes: s.free_bytes,
            abytes: s.avail_bytes,
            tfiles: s.total_files,
            ffiles: s.free_files,
            afiles: s.avail_files,
            // The file system can change at any moment.
            invarsec: 0,
        }),
        Err(e) => Fsstat3Res::Fail(status(e), Fsstat3ResFail { obj_attributes: r.attr() }),
    }
}

fn fsinfo(call: &Call, a: Fsinfo3Args) -> Fsinfo3Res {
    let r = match call.target(&a.fsroot) {
        Ok(r) => r,
        Err(s) => return Fsinfo3Res::Fail(s, Default::default()),
    };
    let attr = match r.export.backend.getattr(&r.fh) {
        Ok(a) => a,
        Err(e) => return Fsinfo3Res::Fail(status(e), Default::default()),
    };
    let p = r.export.backend.properties();
    let cfg = &call.state.config;
    let mut properties = FSF3_HOMOGENEOUS | FSF3_CANSETTIME;
    if p.supports_hard_links {
        properties |= FSF3_LINK;
    }
    if p.supports_symlinks {
        properties |= FSF3_SYMLINK;
    }
    Fsinfo3Res::Ok(Fsinfo3ResOk {
        obj_attributes: Some(fattr(&attr)),
        rtmax: call.io_max(cfg.read_max_bytes),
        rtpref: call.io_max(cfg.read_max_bytes),
        rtmult: 4096,
        wtmax: call.io_max(cfg.write_max_bytes),
        wtpref: call.io_max(cfg.write_max_bytes),
        wtmult: 4096,
        dtpref: 64 * 1024,
        maxfilesize: p.max_file_size,
        time_delta: convert::time(p.time_delta),
        properties,
    })
}

fn pathconf(call: &Call, a: Pathconf3Args) -> Pathconf3Res {
    let r = match call.target(&a.object) {
        Ok(r) => r,
        Err(s) => return Pathconf3Res::Fail(s, Default::default()),
    };
    let attr = match r.export.backend.getattr(&r.fh) {
        Ok(a) => a,
        Err(e) => return Pathconf3Res::Fail(status(e), Default::default()),
    };
    let p = r.export.backend.properties();
    Pathconf3Res::Ok(Pathconf3ResOk {
        obj_attributes: Some(fattr(&attr)),
        linkmax: p.link_max,
        name_max: p.name_max,
        no_trunc: true,
        chown_restricted: true,
        case_insensitive: p.case_insensitive,
        case_preserving: p.case_preserving,
    })
}

fn commit(call: &Call, a: Commit3Args) -> Commit3Res {
    let r = match call.target(&a.file) {
        Ok(r) => r,
        Err(s) => return Commit3Res::Fail(s, Default::default()),
    };
    match r.export.backend.commit(&r.cred, &r.fh, a.offset, a.count) {
        Ok((w, verf)) => Commit3Res::Ok(Commit3ResOk { file_wcc: wcc(&w), verf }),
        Err(e) => Commit3Res::Fail(status(e), Commit3ResFail { file_wcc: r.wcc_after() }),
    }
}

#[cfg(test)]
mod jukebox_tests {
    use super::*;

    #[test]
    fn every_procedure_s_jukebox_answer_decodes_as_its_result() {
        for proc_ in 1..=21u32 {
            let body = jukebox_body(proc_).unwrap_or_else(|| panic!("proc {proc_}")).freeze();
            let mut rest = body.clone();
            let res = Nfs3Res::decode(proc_, &mut rest).unwrap_or_else(|e| panic!("proc {proc_}: {e}"));
            assert_eq!(res.status(), Nfsstat3::Jukebox, "proc {proc_}");
            assert!(rest.is_empty(), "proc {proc_}: {} bytes left over", rest.len());
        }
        assert!(jukebox_body(0).is_none() && jukebox_body(22).is_none());
    }
}
