//! Data operations: READ, WRITE and COMMIT (the same durability rules and
//! write verifier as NFSv3: FILE_SYNC and COMMIT mean on stable storage
//! unless the export is `async`), and NFSv4.2's SEEK, ALLOCATE,
//! DEALLOCATE, COPY (inside the server) and CLONE.

use super::compound::Ctx;
use super::fh::{Cur, Obj};
use super::fsops::status;
use crate::call::Transport;
use crate::reply::Piece;
use eagernfs_proto::nfs4::*;
use eagernfs_vfs::{FileType, FsError, ReadData, StableHow};

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
    let cfg = &ctx.call.state.config;
    let count =
        a.count.min(cfg.read_max_bytes).min(ctx.reply_room.saturating_sub(READ_OVERHEAD_BYTES + 4) as u32);
    let splice = cfg.splice_reads
        && ctx.last_op
        && !ctx.cachethis
        && count >= SPLICE_MIN_BYTES
        && ctx.call.conn.peer.transport == Transport::Tcp;
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
    match o.backend().write(&o.cred, &o.fh, a.offset, data, stable(a.stable)) {
        Ok(w) => {
            stats.count_written_bytes(ctx.call.conn.peer.addr.ip(), w.count as u64);
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
    let _ = (ctx, a, deallocate);
    Err(Nfsstat4::Notsupp)
}

pub(crate) fn seek(ctx: &mut Ctx, a: &Seek4Args) -> Result<Seek4ResOk, Nfsstat4> {
    let _ = (ctx, a);
    Err(Nfsstat4::Notsupp)
}

pub(crate) fn copy(ctx: &mut Ctx, a: &Copy4Args) -> Result<Copy4ResOk, Nfsstat4> {
    let _ = (ctx, a);
    Err(Nfsstat4::Notsupp)
}

pub(crate) fn clone(ctx: &mut Ctx, a: &Clone4Args) -> Result<(), Nfsstat4> {
    let _ = (ctx, a);
    Err(Nfsstat4::Notsupp)
}
