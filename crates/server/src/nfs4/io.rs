//! Data operations: READ, WRITE and COMMIT (the same durability rules and
//! write verifier as NFSv3: FILE_SYNC and COMMIT mean on stable storage
//! unless the export is `async`), and NFSv4.2's SEEK, ALLOCATE,
//! DEALLOCATE, COPY (inside the server) and CLONE.

use super::convert::status;
use super::ctx::Ctx;
use super::fh::{Cur, Obj};
use crate::call::Transport;
use crate::reply::Piece;
use eagernfs_proto::nfs4::*;
use eagernfs_vfs::{FileType, FsError, ReadData, SeekWhat, StableHow, XattrSet};

/// READs asking this much or more are spliced when they end the COMPOUND.
const SPLICE_MIN_BYTES: u32 = 32 * 1024;
/// Reply bytes besides a READ's data: its op number, status, eof and length.
const READ_OVERHEAD_BYTES: usize = 16;

/// Why an object is not a regular file, as READ and WRITE say it.
fn not_regular(o: &Obj) -> Nfsstat4 {
    match o.backend().getattr(&o.fh).map(|a| a.ftype) {
        Ok(FileType::Directory) => Nfsstat4::Isdir,
        Ok(FileType::Symlink) => Nfsstat4::Symlink,
        Ok(FileType::Regular) => Nfsstat4::Inval,
        Ok(_) => Nfsstat4::WrongType,
        Err(e) => status(e),
    }
}

fn file<'a>(ctx: &Ctx<'a, '_>) -> Result<Obj<'a>, Nfsstat4> {
    match ctx.cur()? {
        Cur::Obj(o) => Ok(o.clone()),
        Cur::Pseudo(_) => Err(Nfsstat4::Isdir),
    }
}

/// READ: whether the file ends within the data, and the data (from a pipe
/// when it may be spliced: the READ ends the COMPOUND over TCP).
pub(crate) fn read(ctx: &mut Ctx, a: &Read4Args) -> Result<(bool, Piece), Nfsstat4> {
    let o = file(ctx)?;
    let stateid = ctx.stateid(&a.stateid)?;
    super::state::check_io(ctx, &o, &stateid, false)?;
    super::state::break_delegations(ctx, &o, false)?;
    let cfg = &ctx.call.state.config;
    let count =
        a.count.min(cfg.read_max_bytes).min(ctx.reply_room.saturating_sub(READ_OVERHEAD_BYTES + 4) as u32);
    let splice = cfg.splice_reads.for_peer(ctx.call.conn.peer.addr.ip())
        && ctx.last_op
        && !ctx.cachethis
        && count >= SPLICE_MIN_BYTES
        && ctx.call.conn.peer.transport == Transport::Tcp;
    let turn = if std::mem::replace(&mut ctx.io_turn_taken, true) { None } else { ctx.call.io_turn() };
    let result = if splice {
        o.backend().read_spliced(&o.cred, &o.fh, a.offset, count).map(|s| {
            let data = match s.data {
                ReadData::Buffer(b) => Piece::Bytes(b),
                ReadData::Spliced(p) => Piece::Spliced(p),
            };
            (s.eof, data)
        })
    } else {
        o.backend().read(&o.cred, &o.fh, a.offset, count).map(|r| (r.eof, Piece::Bytes(r.data)))
    };
    drop(turn);
    match result {
        Ok((eof, data)) => {
            let stats = &ctx.call.state.stats;
            stats.count_read_bytes(ctx.call.conn.peer.addr.ip(), data.len() as u64);
            if matches!(data, Piece::Spliced(_)) {
                stats.count_spliced_bytes(data.len() as u64);
            }
            Ok((eof, data))
        }
        Err(FsError::IsDir) => Err(Nfsstat4::Isdir),
        Err(FsError::Inval) | Err(FsError::BadType) => Err(not_regular(&o)),
        Err(e) => Err(status(e)),
    }
}

/// A READ's data in a buffer (for a READ that does not end its COMPOUND; never spliced then).
pub(crate) fn read_into_buffer((eof, data): (bool, Piece)) -> Result<Read4ResOk, Nfsstat4> {
    match data {
        Piece::Bytes(data) => Ok(Read4ResOk { eof, data }),
        Piece::Spliced(_) => Err(Nfsstat4::Serverfault),
    }
}

fn stable(s: StableHow4) -> StableHow {
    match s {
        StableHow4::Unstable4 => StableHow::Unstable,
        StableHow4::DataSync4 => StableHow::DataSync,
        StableHow4::FileSync4 => StableHow::FileSync,
    }
}

fn stable4(s: StableHow) -> StableHow4 {
    match s {
        StableHow::Unstable => StableHow4::Unstable4,
        StableHow::DataSync => StableHow4::DataSync4,
        StableHow::FileSync => StableHow4::FileSync4,
    }
}

pub(crate) fn write(ctx: &mut Ctx, a: &Write4Args) -> Result<Write4ResOk, Nfsstat4> {
    let o = ctx.writable()?.clone();
    let stateid = ctx.stateid(&a.stateid)?;
    super::state::check_io(ctx, &o, &stateid, true)?;
    super::state::break_delegations(ctx, &o, true)?;
    if a.offset.checked_add(a.data.len() as u64).is_none() {
        return Err(Nfsstat4::Fbig);
    }
    let max = ctx.call.state.config.write_max_bytes as usize;
    let data = &a.data[..a.data.len().min(max)];
    let stats = &ctx.call.state.stats;
    stats.count_write(match a.stable {
        StableHow4::Unstable4 => eagernfs_proto::nfs3::StableHow::Unstable,
        StableHow4::DataSync4 => eagernfs_proto::nfs3::StableHow::DataSync,
        StableHow4::FileSync4 => eagernfs_proto::nfs3::StableHow::FileSync,
    });
    // The file's next WRITE from this connection may enter once this one's
    // data is placed, before it is durable (their syncs can then be shared).
    let mut turn = if std::mem::replace(&mut ctx.io_turn_taken, true) { None } else { ctx.call.io_turn() };
    let r =
        o.backend().write_then(&o.cred, &o.fh, a.offset, data, stable(a.stable), &mut || drop(turn.take()));
    drop(turn);
    match r {
        Ok(w) => {
            stats.count_written_bytes(ctx.call.conn.peer.addr.ip(), w.count as u64);
            ctx.fresh = w.wcc.after;
            Ok(Write4ResOk { count: w.count, committed: stable4(w.committed), writeverf: w.verifier })
        }
        Err(FsError::IsDir) => Err(Nfsstat4::Isdir),
        Err(FsError::Inval) | Err(FsError::BadType) => Err(not_regular(&o)),
        Err(e) => Err(status(e)),
    }
}

pub(crate) fn commit(ctx: &mut Ctx, a: &Commit4Args) -> Result<Verifier4, Nfsstat4> {
    let o = file(ctx)?;
    if a.offset.checked_add(a.count as u64).is_none() {
        return Err(Nfsstat4::Inval);
    }
    let attr = o.backend().getattr(&o.fh).map_err(status)?;
    match attr.ftype {
        FileType::Regular => {}
        FileType::Directory => return Err(Nfsstat4::Isdir),
        FileType::Symlink => return Err(Nfsstat4::Symlink),
        _ => return Err(Nfsstat4::WrongType),
    }
    match o.backend().commit(&o.cred, &o.fh, a.offset, a.count) {
        Ok((_, verf)) => Ok(verf),
        Err(e) => Err(status(e)),
    }
}

pub(crate) fn allocate(ctx: &mut Ctx, a: &Allocate4Args, deallocate: bool) -> Result<(), Nfsstat4> {
    let o = ctx.writable()?.clone();
    let stateid = ctx.stateid(&a.stateid)?;
    super::state::check_io(ctx, &o, &stateid, true)?;
    super::state::break_delegations(ctx, &o, true)?;
    if a.offset.checked_add(a.length).is_none() {
        return Err(Nfsstat4::Inval);
    }
    let r = if deallocate {
        o.backend().deallocate(&o.cred, &o.fh, a.offset, a.length)
    } else {
        o.backend().allocate(&o.cred, &o.fh, a.offset, a.length)
    };
    match r {
        Ok(()) => Ok(()),
        Err(FsError::IsDir) => Err(Nfsstat4::Isdir),
        Err(FsError::Inval) | Err(FsError::BadType) => Err(not_regular(&o)),
        Err(e) => Err(status(e)),
    }
}

pub(crate) fn seek(ctx: &mut Ctx, a: &Seek4Args) -> Result<Seek4ResOk, Nfsstat4> {
    let o = file(ctx)?;
    let stateid = ctx.stateid(&a.stateid)?;
    super::state::check_io(ctx, &o, &stateid, false)?;
    // Where data and holes are depends on a write delegation's unwritten data.
    super::state::break_delegations(ctx, &o, false)?;
    let what = match a.what {
        DataContent4::Data => SeekWhat::Data,
        DataContent4::Hole => SeekWhat::Hole,
    };
    match o.backend().seek(&o.cred, &o.fh, a.offset, what) {
        Ok((eof, offset)) => Ok(Seek4ResOk { eof, offset }),
        Err(FsError::IsDir) => Err(Nfsstat4::Isdir),
        Err(FsError::Inval) | Err(FsError::BadType) => Err(not_regular(&o)),
        Err(e) => Err(status(e)),
    }
}

/// Most bytes one COPY moves (the client asks again for the rest): a
/// service thread is not held for a whole file.
const COPY_MAX_BYTES: u64 = 256 << 20;

/// The saved file (the source of COPY and CLONE) and the current one (the destination).
fn source_and_destination<'a>(ctx: &Ctx<'a, '_>) -> Result<(Obj<'a>, Obj<'a>), Nfsstat4> {
    let dst = ctx.writable()?.clone();
    let src = match ctx.saved()? {
        Cur::Obj(o) => o.clone(),
        Cur::Pseudo(_) => return Err(Nfsstat4::Isdir),
    };
    if src.export.id != dst.export.id {
        return Err(Nfsstat4::Xdev);
    }
    Ok((src, dst))
}

pub(crate) fn copy(ctx: &mut Ctx, a: &Copy4Args) -> Result<Copy4ResOk, Nfsstat4> {
    if !a.source_server.0.is_empty() {
        // Copies between servers are not offered.
        return Err(Nfsstat4::Notsupp);
    }
    let (src, dst) = source_and_destination(ctx)?;
    let src_state = ctx.stateid(&a.src_stateid)?;
    let dst_state = ctx.stateid(&a.dst_stateid)?;
    super::state::check_io(ctx, &src, &src_state, false)?;
    super::state::check_io(ctx, &dst, &dst_state, true)?;
    super::state::break_delegations(ctx, &src, false)?;
    super::state::break_delegations(ctx, &dst, true)?;
    let len = if a.count == 0 { COPY_MAX_BYTES } else { a.count.min(COPY_MAX_BYTES) };
    let to_end = a.count == 0;
    let n = match dst.backend().copy_range(
        &dst.cred,
        &src.fh,
        a.src_offset,
        &dst.fh,
        a.dst_offset,
        if to_end { 0 } else { len },
    ) {
        Ok(n) => n,
        Err(FsError::IsDir) => return Err(Nfsstat4::Isdir),
        Err(FsError::Inval) | Err(FsError::BadType) => return Err(not_regular(&dst)),
        Err(e) => return Err(status(e)),
    };
    Ok(Copy4ResOk {
        response: WriteResponse4 {
            callback_id: CallbackId(None),
            count: n,
            committed: StableHow4::Unstable4,
            writeverf: dst.backend().write_verifier(),
        },
        requirements: CopyRequirements4 { consecutive: true, synchronous: true },
    })
}

pub(crate) fn clone(ctx: &mut Ctx, a: &Clone4Args) -> Result<(), Nfsstat4> {
    let (src, dst) = source_and_destination(ctx)?;
    let src_state = ctx.stateid(&a.src_stateid)?;
    let dst_state = ctx.stateid(&a.dst_stateid)?;
    super::state::check_io(ctx, &src, &src_state, false)?;
    super::state::check_io(ctx, &dst, &dst_state, true)?;
    super::state::break_delegations(ctx, &src, false)?;
    super::state::break_delegations(ctx, &dst, true)?;
    match dst.backend().clone_range(&dst.cred, &src.fh, a.src_offset, &dst.fh, a.dst_offset, a.count) {
        Ok(()) => Ok(()),
        Err(FsError::IsDir) => Err(Nfsstat4::Isdir),
        Err(e) => Err(status(e)),
    }
}

// ------------------------------------------------------------ extended attributes (RFC 8276)

/// An xattr name: non-empty UTF-8 of at most NAME_MAX bytes.
fn xattr_name(n: &[u8]) -> Result<&[u8], Nfsstat4> {
    if n.is_empty() || std::str::from_utf8(n).is_err() {
        return Err(Nfsstat4::Inval);
    }
    if n.len() > eagernfs_vfs::NAME_MAX {
        return Err(Nfsstat4::Nametoolong);
    }
    Ok(n)
}

fn xattr_status(e: FsError) -> Nfsstat4 {
    match e {
        FsError::NoEnt => Nfsstat4::Noxattr,
        FsError::FBig => Nfsstat4::Xattr2big,
        e => status(e),
    }
}

fn xattr_obj<'a>(ctx: &Ctx<'a, '_>, write: bool) -> Result<Obj<'a>, Nfsstat4> {
    if write {
        ctx.writable().cloned()
    } else {
        ctx.obj(Nfsstat4::Notsupp).cloned()
    }
}

pub(crate) fn getxattr(ctx: &mut Ctx, a: &Getxattr4Args) -> Result<Xattrvalue4, Nfsstat4> {
    let o = xattr_obj(ctx, false)?;
    let v = o.backend().getxattr(&o.cred, &o.fh, xattr_name(&a.name)?).map_err(xattr_status)?;
    eagernfs_xdr::Opaque::new(v).map_err(|_| Nfsstat4::Xattr2big)
}

pub(crate) fn setxattr(ctx: &mut Ctx, a: &Setxattr4Args) -> Result<ChangeInfo4, Nfsstat4> {
    let o = xattr_obj(ctx, true)?;
    // It changes the file (its ctime): others' delegations go first.
    super::state::break_delegations(ctx, &o, true)?;
    let how = match a.option {
        SetxattrOption4::Either => XattrSet::Either,
        SetxattrOption4::Create => XattrSet::Create,
        SetxattrOption4::Replace => XattrSet::Replace,
    };
    let before = o.backend().getattr(&o.fh).map_err(status)?;
    o.backend().setxattr(&o.cred, &o.fh, xattr_name(&a.key)?, &a.value, how).map_err(xattr_status)?;
    Ok(change_around(&o, &before))
}

pub(crate) fn removexattr(ctx: &mut Ctx, a: &Removexattr4Args) -> Result<ChangeInfo4, Nfsstat4> {
    let o = xattr_obj(ctx, true)?;
    super::state::break_delegations(ctx, &o, true)?;
    let before = o.backend().getattr(&o.fh).map_err(status)?;
    o.backend().removexattr(&o.cred, &o.fh, xattr_name(&a.name)?).map_err(xattr_status)?;
    Ok(change_around(&o, &before))
}

fn change_around(o: &Obj, before: &eagernfs_vfs::Attr) -> ChangeInfo4 {
    let b = super::attrs::change_of(before.ctime);
    let a = o.backend().getattr(&o.fh).map(|a| super::attrs::change_of(a.ctime)).unwrap_or(b);
    ChangeInfo4 { atomic: false, before: b, after: a }
}

/// LISTXATTRS: names from `cookie` (an index) on, as many as fit `maxcount`.
pub(crate) fn listxattrs(ctx: &mut Ctx, a: &Listxattrs4Args) -> Result<Listxattrs4ResOk, Nfsstat4> {
    let o = xattr_obj(ctx, false)?;
    let mut names = o.backend().listxattr(&o.cred, &o.fh).map_err(xattr_status)?;
    names.sort();
    let start = usize::try_from(a.cookie).map_err(|_| Nfsstat4::BadCookie)?;
    if start > names.len() {
        return Err(Nfsstat4::BadCookie);
    }
    // The reply's fixed part: cookie, array length, eof.
    let mut used = 16usize;
    let max = (a.maxcount as usize).min(ctx.reply_room);
    let mut out = Vec::new();
    for n in &names[start..] {
        let len = eagernfs_proto::opaque_len(n.len());
        if used + len > max {
            break;
        }
        used += len;
        out.push(eagernfs_xdr::Opaque(n.clone()));
    }
    if out.is_empty() && start < names.len() {
        return Err(Nfsstat4::Toosmall);
    }
    let next = start + out.len();
    Ok(Listxattrs4ResOk { cookie: next as u64, names: XattrNames(out), eof: next == names.len() })
}
