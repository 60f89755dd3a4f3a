//! File handle, attribute and namespace operations (RFC 8881 §18): PUTFH,
//! PUTROOTFH, LOOKUP(P), GETATTR, SETATTR, (N)VERIFY, ACCESS, READLINK,
//! READDIR, CREATE, REMOVE, RENAME, LINK, SECINFO(_NO_NAME), all through the
//! export's backend with the caller's (squashed) credentials. Pseudo
//! directories are read-only and show only what leads to the caller's
//! exports.

use super::attrs::{self, Source};
use super::convert::{check_name, cinfo, status};
use super::ctx::Ctx;
use super::fh::{self, Cur, Obj};
use super::pseudo::Child;
use eagernfs_proto::nfs4::*;
use eagernfs_vfs::{access as acc, FileType, FsError, NodeKind};
use eagernfs_xdr::Opaque;

/// The attributes of `c`.
pub(crate) fn attr_of(ctx: &Ctx, c: &Cur) -> Result<eagernfs_vfs::Attr, Nfsstat4> {
    match c {
        Cur::Pseudo(id) => Ok(attrs::pseudo_attr(ctx.v4, *id)),
        Cur::Obj(o) => o.backend().getattr(&o.fh).map_err(status),
    }
}

/// The fileid of the pseudo directory export root `o` is mounted on, if it is one.
fn mounted_on(ctx: &Ctx, o: &Obj) -> Option<u64> {
    (o.fh == o.export.backend.root())
        .then(|| ctx.tree.parent_of_export.get(&o.export.id).map(|p| *p as u64))
        .flatten()
}

pub(crate) fn putfh(ctx: &mut Ctx, a: &Putfh4Args) -> Result<(), Nfsstat4> {
    let c = fh::parse(ctx.call, &ctx.tree, &a.object)?;
    ctx.set_cur(c);
    Ok(())
}

pub(crate) fn putrootfh(ctx: &mut Ctx) -> Result<(), Nfsstat4> {
    let c = fh::root(ctx.call, &ctx.tree)?;
    ctx.set_cur(c);
    Ok(())
}

/// The object `name` in directory `dir` (a pseudo directory or an exported one).
fn child<'a>(ctx: &Ctx<'a, '_>, dir: &Cur<'a>, name: &[u8]) -> Result<Cur<'a>, Nfsstat4> {
    child_with_attr(ctx, dir, name).map(|(c, _)| c)
}

/// As [`child`], with the child's attributes when the backend gave them.
fn child_with_attr<'a>(
    ctx: &Ctx<'a, '_>,
    dir: &Cur<'a>,
    name: &[u8],
) -> Result<(Cur<'a>, Option<eagernfs_vfs::Attr>), Nfsstat4> {
    match dir {
        Cur::Pseudo(id) => {
            let node = ctx.tree.nodes.get(id).ok_or(Nfsstat4::Stale)?;
            let c = *node.children.get(name).ok_or(Nfsstat4::Noent)?;
            if !ctx.tree.child_visible(ctx.call, c) {
                return Err(Nfsstat4::Noent);
            }
            match c {
                Child::Dir(d) => Ok((Cur::Pseudo(d), None)),
                Child::Export(e) => fh::export_root(ctx.call, e).map(|o| (Cur::Obj(o), None)),
            }
        }
        Cur::Obj(o) => match o.backend().lookup(&o.cred, &o.fh, name) {
            Ok(l) => Ok((Cur::Obj(o.sibling(l.handle)), Some(l.attr))),
            Err(FsError::NotDir) => Err(not_a_directory(o)),
            Err(e) => Err(status(e)),
        },
    }
}

/// NOTDIR, or SYMLINK when the object is a symbolic link (RFC 8881 §18.13.4).
fn not_a_directory(o: &Obj) -> Nfsstat4 {
    match o.backend().getattr(&o.fh) {
        Ok(a) if a.ftype == FileType::Symlink => Nfsstat4::Symlink,
        _ => Nfsstat4::Notdir,
    }
}

pub(crate) fn lookup(ctx: &mut Ctx, name: &Component4) -> Result<(), Nfsstat4> {
    let dir = ctx.cur()?.clone();
    let name = match check_name(name) {
        Ok(n) => n,
        Err(e) => {
            // Not a directory comes first (RFC 8881 §18.13.4); backends say so
            // themselves when the name is good (NotDir), sparing a GETATTR.
            if let Cur::Obj(o) = &dir {
                let a = o.backend().getattr(&o.fh).map_err(status)?;
                match a.ftype {
                    FileType::Directory => {}
                    FileType::Symlink => return Err(Nfsstat4::Symlink),
                    _ => return Err(Nfsstat4::Notdir),
                }
            }
            return Err(e);
        }
    };
    let (c, attr) = child_with_attr(ctx, &dir, name)?;
    ctx.set_cur(c);
    ctx.fresh = attr;
    Ok(())
}

/// The parent of `c`.
fn parent<'a>(ctx: &Ctx<'a, '_>, c: &Cur<'a>) -> Result<Cur<'a>, Nfsstat4> {
    match c {
        Cur::Pseudo(id) => {
            let node = ctx.tree.nodes.get(id).ok_or(Nfsstat4::Stale)?;
            if node.parent == *id {
                return Err(Nfsstat4::Noent);
            }
            Ok(Cur::Pseudo(node.parent))
        }
        Cur::Obj(o) => {
            let a = o.backend().getattr(&o.fh).map_err(status)?;
            match a.ftype {
                FileType::Directory => {}
                FileType::Symlink => return Err(Nfsstat4::Symlink),
                _ => return Err(Nfsstat4::Notdir),
            }
            if o.fh == o.export.backend.root() {
                // Out of the export: its pseudo directory (none for an export at `/`).
                return ctx
                    .tree
                    .parent_of_export
                    .get(&o.export.id)
                    .map(|p| Cur::Pseudo(*p))
                    .ok_or(Nfsstat4::Noent);
            }
            let l = o.backend().lookup(&o.cred, &o.fh, b"..").map_err(status)?;
            Ok(Cur::Obj(o.sibling(l.handle)))
        }
    }
}

pub(crate) fn lookupp(ctx: &mut Ctx) -> Result<(), Nfsstat4> {
    let c = ctx.cur()?.clone();
    let p = parent(ctx, &c)?;
    ctx.set_cur(p);
    Ok(())
}

/// SECINFO and SECINFO_NO_NAME: AUTH_SYS (TLS is a transport, not a flavor).
/// The current file handle is consumed.
fn flavors(ctx: &mut Ctx, target: &Cur) -> Result<Secinfo4ResOk, Nfsstat4> {
    if let Cur::Obj(o) = target {
        // The caller must be allowed in (the client list); the transport it
        // needs is not a flavor and is reported when it tries.
        let _ = o;
    }
    ctx.cur = None;
    ctx.cur_stateid = None;
    Ok(Secinfo4ResOk(vec![Secinfo4::Flavor(1)]))
}

pub(crate) fn secinfo(ctx: &mut Ctx, name: Option<&Component4>) -> Result<Secinfo4ResOk, Nfsstat4> {
    let dir = ctx.cur()?.clone();
    if let Cur::Obj(o) = &dir {
        let a = o.backend().getattr(&o.fh).map_err(status)?;
        if a.ftype != FileType::Directory {
            return Err(Nfsstat4::Notdir);
        }
    }
    let target = match name {
        Some(n) => child(ctx, &dir, check_name(n)?)?,
        None => dir,
    };
    flavors(ctx, &target)
}

pub(crate) fn secinfo_no_name(ctx: &mut Ctx, style: SecinfoStyle4) -> Result<Secinfo4ResOk, Nfsstat4> {
    let c = ctx.cur()?.clone();
    let target = match style {
        SecinfoStyle4::CurrentFh => c,
        SecinfoStyle4::Parent => parent(ctx, &c)?,
    };
    flavors(ctx, &target)
}

pub(crate) fn getattr(ctx: &mut Ctx, want: &Bitmap4) -> Result<Fattr4, Nfsstat4> {
    attrs::check_readable(want)?;
    let c = ctx.cur()?;
    let mut a = match (&ctx.fresh, c) {
        (Some(a), Cur::Obj(_)) => a.clone(),
        _ => attr_of(ctx, c)?,
    };
    if let Cur::Obj(o) = c {
        // Another client's write delegation: its holder knows the size, change and times.
        let me = ctx.client().ok().map(|c| c.id);
        super::state::delegated_attrs(ctx.v4, &o.wire, me, want, &mut a)?;
    }
    let mounted_on = match c {
        Cur::Obj(o) => mounted_on(ctx, o),
        Cur::Pseudo(_) => None,
    };
    Ok(attrs::encode(ctx.v4, ctx.call, &Source { cur: c, attr: &a, mounted_on }, want))
}

pub(crate) fn setattr(ctx: &mut Ctx, a: &Setattr4Args) -> Setattr4Res {
    let fail = |status| Setattr4Res { status, attrsset: Bitmap4::default() };
    let o = match ctx.writable() {
        Ok(o) => o.clone(),
        Err(s) => return fail(s),
    };
    let mut to = match attrs::decode_setattr(ctx.v4, &a.obj_attributes) {
        Ok(t) => t,
        Err(s) => return fail(s),
    };
    let stateid = match ctx.stateid(&a.stateid) {
        Ok(s) => s,
        Err(s) => return fail(s),
    };
    if to.deleg_atime.is_some() || to.deleg_mtime.is_some() {
        // RFC 9754: times the holder of a write delegation kept itself.
        let times = ctx.client().and_then(|c| {
            super::state::check_deleg_times(ctx.v4, c.id, &stateid, &o.wire, to.deleg_atime, to.deleg_mtime)
        });
        match times {
            Ok((atime, mtime)) => {
                if to.deleg_atime.is_some() {
                    to.set.atime = atime;
                }
                if to.deleg_mtime.is_some() {
                    to.set.mtime = mtime;
                }
            }
            Err(s) => return fail(s),
        }
    }
    if to.set.size.is_some() {
        let attr = match o.backend().getattr(&o.fh) {
            Ok(a) => a,
            Err(e) => return fail(status(e)),
        };
        match attr.ftype {
            FileType::Regular => {}
            FileType::Directory => return fail(Nfsstat4::Isdir),
            _ => return fail(Nfsstat4::Inval),
        }
        if let Err(s) = super::state::check_io(ctx, &o, &stateid, true) {
            return fail(s);
        }
    } else if let Err(s) = super::state::check_stateid_valid(ctx, &stateid) {
        return fail(s);
    }
    if let Err(s) = super::state::break_delegations(ctx, &o, true) {
        return fail(s);
    }
    if to.mask.is_empty() {
        return Setattr4Res { status: Nfsstat4::Ok, attrsset: to.mask };
    }
    match o.backend().setattr(&o.cred, &o.fh, &to.set, None) {
        Ok(wcc) => {
            ctx.fresh = wcc.after;
            Setattr4Res { status: Nfsstat4::Ok, attrsset: to.mask }
        }
        Err(e) => fail(status(e)),
    }
}

pub(crate) fn verify(ctx: &mut Ctx, f: &Fattr4, want_same: bool) -> Result<(), Nfsstat4> {
    let supported = attrs::supported();
    for n in f.attrmask.iter() {
        if !supported.contains(n) {
            return Err(Nfsstat4::Attrnotsupp);
        }
        if is_write_only(n) || n == FATTR4_RDATTR_ERROR {
            return Err(Nfsstat4::Inval);
        }
    }
    FileAttrs::from_fattr(f).map_err(Nfsstat4::from)?;
    let ours = getattr(ctx, &f.attrmask)?;
    let same = ours.attr_vals.0 == f.attr_vals.0;
    match (want_same, same) {
        (true, true) | (false, false) => Ok(()),
        (true, false) => Err(Nfsstat4::NotSame),
        (false, true) => Err(Nfsstat4::Same),
    }
}

pub(crate) fn access(ctx: &mut Ctx, want: u32) -> Result<Access4ResOk, Nfsstat4> {
    let want = want & acc::ALL;
    match ctx.cur()? {
        Cur::Pseudo(_) => {
            Ok(Access4ResOk { supported: want, access: want & (acc::READ | acc::LOOKUP | acc::EXECUTE) })
        }
        Cur::Obj(o) => {
            let (mut granted, attr) = o.backend().access(&o.cred, &o.fh, want).map_err(status)?;
            if o.options.read_only {
                granted &= !(acc::MODIFY | acc::EXTEND | acc::DELETE);
            }
            ctx.fresh = Some(attr);
            Ok(Access4ResOk { supported: want, access: granted })
        }
    }
}

pub(crate) fn readlink(ctx: &mut Ctx) -> Result<Linktext4, Nfsstat4> {
    let o = ctx.obj(Nfsstat4::Inval)?;
    match o.backend().readlink(&o.cred, &o.fh) {
        Ok((target, _)) => Opaque::new(target).map_err(|_| Nfsstat4::Nametoolong),
        Err(FsError::Inval) => {
            // Not a symbolic link: a directory says so.
            match o.backend().getattr(&o.fh) {
                Ok(a) if a.ftype == FileType::Directory => Err(Nfsstat4::Isdir),
                _ => Err(Nfsstat4::Inval),
            }
        }
        Err(e) => Err(status(e)),
    }
}

/// Bytes of a READDIR reply besides its entries: status, verifier, list end, eof.
const READDIR_FIXED_BYTES: usize = 4 + 8 + 4 + 4;

pub(crate) fn readdir(ctx: &mut Ctx, a: &Readdir4Args) -> Result<Readdir4ResOk, Nfsstat4> {
    attrs::check_readable(&a.attr_request)?;
    if a.cookie == 1 || a.cookie == 2 {
        return Err(Nfsstat4::BadCookie);
    }
    let max = (a.maxcount as usize)
        .min(ctx.call.state.config.read_max_bytes as usize)
        .min(ctx.reply_room.saturating_sub(8));
    if max < READDIR_FIXED_BYTES + 16 {
        return Err(Nfsstat4::Toosmall);
    }
    let budget = max - READDIR_FIXED_BYTES;
    // dircount bounds the cookie-and-name part; a tiny one is only a hint.
    let dir_budget = if a.dircount == 0 { usize::MAX } else { (a.dircount as usize).max(512) };
    let dir = ctx.cur()?.clone();
    let mut entries = Vec::new();
    let (mut used, mut dir_used) = (0usize, 0usize);
    // Takes the entry by value: it was built for this reply, so a copy would only cost
    // allocations (a name and an attribute buffer per entry, a large share of a READDIR's time).
    let mut fits = |e: Entry4, entries: &mut Vec<Entry4>| {
        let len = e.encoded_len();
        let dlen = 8 + e.name.len();
        if used + len > budget || (dir_used + dlen > dir_budget && !entries.is_empty()) {
            return false;
        }
        used += len;
        dir_used += dlen;
        entries.push(e);
        true
    };
    let want = &a.attr_request;
    let rdattr_error = want.contains(FATTR4_RDATTR_ERROR);
    match &dir {
        Cur::Pseudo(id) => {
            let node = ctx.tree.nodes.get(id).ok_or(Nfsstat4::Stale)?;
            let mut eof = true;
            for (i, (name, child)) in node.children.iter().enumerate() {
                let cookie = i as u64 + 3;
                if cookie <= a.cookie || !ctx.tree.child_visible(ctx.call, *child) {
                    continue;
                }
                let c = match child {
                    Child::Dir(d) => Ok(Cur::Pseudo(*d)),
                    Child::Export(e) => fh::export_root(ctx.call, *e).map(Cur::Obj),
                };
                let attrs = entry_attrs(ctx, c, want, rdattr_error, Some(*id as u64))?;
                let e = Entry4 { cookie, name: Opaque(name.clone()), attrs };
                if !fits(e, &mut entries) {
                    eof = false;
                    break;
                }
            }
            if entries.is_empty() && !eof {
                return Err(Nfsstat4::Toosmall);
            }
            Ok(Readdir4ResOk { cookieverf: [0; 8], entries, eof })
        }
        Cur::Obj(o) => {
            let a_dir = o.backend().getattr(&o.fh).map_err(status)?;
            if a_dir.ftype != FileType::Directory {
                return Err(Nfsstat4::Notdir);
            }
            let plus = want.iter().any(|n| n != FATTR4_RDATTR_ERROR && n != FATTR4_FILEID);
            let mut failed = None;
            let info = o.backend().readdir(&o.cred, &o.fh, a.cookie, a.cookieverf, plus, &mut |d| {
                if d.name.as_ref() == b"." || d.name.as_ref() == b".." {
                    return true;
                }
                let Ok(name) = Opaque::new(d.name.clone()) else { return true };
                let attrs = if plus {
                    match (&d.attr, &d.handle) {
                        (Some(attr), Some(h)) => {
                            let c = Cur::Obj(o.sibling(h.clone()));
                            Ok(attrs::encode(
                                ctx.v4,
                                ctx.call,
                                &Source { cur: &c, attr, mounted_on: None },
                                want,
                            ))
                        }
                        // Gone between listing and looking: its error, if asked for.
                        _ => Err(Nfsstat4::Noent),
                    }
                } else {
                    Ok(FileAttrs {
                        fileid: want.contains(FATTR4_FILEID).then_some(d.fileid),
                        rdattr_error: rdattr_error.then_some(Nfsstat4::Ok),
                        ..Default::default()
                    }
                    .to_fattr())
                };
                let attrs = match attrs {
                    Ok(f) => f,
                    Err(s) if rdattr_error => {
                        FileAttrs { rdattr_error: Some(s), ..Default::default() }.to_fattr()
                    }
                    Err(s) => {
                        failed = Some(s);
                        return false;
                    }
                };
                fits(Entry4 { cookie: d.cookie, name, attrs }, &mut entries)
            });
            let info = info.map_err(status)?;
            if let Some(s) = failed {
                if entries.is_empty() {
                    return Err(s);
                }
            }
            if entries.is_empty() && !info.eof {
                return Err(Nfsstat4::Toosmall);
            }
            let eof = info.eof && failed.is_none();
            Ok(Readdir4ResOk { cookieverf: info.cookieverf, entries, eof })
        }
    }
}

/// A pseudo directory entry's attributes (or its error, when asked for).
fn entry_attrs(
    ctx: &Ctx,
    c: Result<Cur, Nfsstat4>,
    want: &Bitmap4,
    rdattr_error: bool,
    mounted_on: Option<u64>,
) -> Result<Fattr4, Nfsstat4> {
    let r = c.and_then(|c| {
        let a = attr_of(ctx, &c)?;
        let on = matches!(c, Cur::Obj(_)).then_some(mounted_on).flatten();
        Ok(attrs::encode(ctx.v4, ctx.call, &Source { cur: &c, attr: &a, mounted_on: on }, want))
    });
    match r {
        Ok(f) => Ok(f),
        Err(s) if rdattr_error => Ok(FileAttrs { rdattr_error: Some(s), ..Default::default() }.to_fattr()),
        Err(s) => Err(s),
    }
}

/// The current directory, which this operation changes: another client's
/// delegation of it is recalled first (NFS4ERR_DELAY meanwhile).
fn writable_dir<'a>(ctx: &Ctx<'a, '_>) -> Result<Obj<'a>, Nfsstat4> {
    let o = ctx.writable()?.clone();
    let a = o.backend().getattr(&o.fh).map_err(status)?;
    if a.ftype != FileType::Directory {
        return Err(Nfsstat4::Notdir);
    }
    super::state::break_delegations(ctx, &o, true)?;
    Ok(o)
}

pub(crate) fn create(ctx: &mut Ctx, a: &Create4Args) -> Result<Create4ResOk, Nfsstat4> {
    if let Createtype4::Other(_) = a.objtype {
        return Err(Nfsstat4::Badtype);
    }
    let dir = writable_dir(ctx)?;
    let name = check_name(&a.objname)?;
    let to = attrs::decode_set(ctx.v4, &a.createattrs)?;
    let b = dir.backend();
    let r = match &a.objtype {
        Createtype4::Dir => b.mkdir(&dir.cred, &dir.fh, name, &to.set),
        Createtype4::Lnk(target) => {
            if target.is_empty() {
                return Err(Nfsstat4::Inval);
            }
            b.symlink(&dir.cred, &dir.fh, name, target, &to.set)
        }
        Createtype4::Blk(d) => b.mknod(
            &dir.cred,
            &dir.fh,
            name,
            NodeKind::BlockDevice { major: d.specdata1, minor: d.specdata2 },
            &to.set,
        ),
        Createtype4::Chr(d) => b.mknod(
            &dir.cred,
            &dir.fh,
            name,
            NodeKind::CharDevice { major: d.specdata1, minor: d.specdata2 },
            &to.set,
        ),
        Createtype4::Sock => b.mknod(&dir.cred, &dir.fh, name, NodeKind::Socket, &to.set),
        Createtype4::Fifo => b.mknod(&dir.cred, &dir.fh, name, NodeKind::Fifo, &to.set),
        Createtype4::Other(_) => return Err(Nfsstat4::Badtype),
    };
    let c = r.map_err(status)?;
    let ok = Create4ResOk { cinfo: cinfo(&c.dir_wcc), attrset: to.mask };
    ctx.set_cur(Cur::Obj(dir.sibling(c.handle)));
    Ok(ok)
}

pub(crate) fn remove(ctx: &mut Ctx, target: &Component4) -> Result<ChangeInfo4, Nfsstat4> {
    let dir = writable_dir(ctx)?;
    let name = check_name(target)?;
    let l = dir.backend().lookup(&dir.cred, &dir.fh, name).map_err(status)?;
    let victim = dir.sibling(l.handle);
    super::state::break_delegations(ctx, &victim, true)?;
    let is_dir = l.attr.ftype == FileType::Directory;
    let w = if is_dir {
        dir.backend().rmdir(&dir.cred, &dir.fh, name)
    } else {
        dir.backend().remove(&dir.cred, &dir.fh, name)
    };
    let w = w.map_err(status)?;
    super::state::object_removed(ctx, &victim, is_dir);
    Ok(cinfo(&w))
}

pub(crate) fn rename(ctx: &mut Ctx, a: &Rename4Args) -> Result<Rename4ResOk, Nfsstat4> {
    let to = writable_dir(ctx)?;
    let from = match ctx.saved()? {
        Cur::Obj(o) => o.clone(),
        Cur::Pseudo(_) => return Err(Nfsstat4::Xdev),
    };
    if from.export.id != to.export.id {
        return Err(Nfsstat4::Xdev);
    }
    let from_attr = from.backend().getattr(&from.fh).map_err(status)?;
    if from_attr.ftype != FileType::Directory {
        return Err(Nfsstat4::Notdir);
    }
    let old = check_name(&a.oldname)?;
    let new = check_name(&a.newname)?;
    super::state::break_delegations(ctx, &from, true)?;
    if let Ok(l) = from.backend().lookup(&from.cred, &from.fh, old) {
        super::state::break_delegations(ctx, &from.sibling(l.handle), true)?;
    }
    let replaced = match to.backend().lookup(&to.cred, &to.fh, new) {
        Ok(l) => {
            let victim = to.sibling(l.handle);
            super::state::break_delegations(ctx, &victim, true)?;
            Some((victim, l.attr.ftype == FileType::Directory))
        }
        Err(_) => None,
    };
    let (fw, tw) = from.backend().rename(&from.cred, &from.fh, old, &to.fh, new).map_err(status)?;
    if let Some((victim, is_dir)) = replaced {
        // A rename of a name onto itself (or onto another name of the same
        // file) removes nothing: the handle still works, so nothing is dropped.
        super::state::object_removed(ctx, &victim, is_dir);
    }
    Ok(Rename4ResOk { source_cinfo: cinfo(&fw), target_cinfo: cinfo(&tw) })
}

pub(crate) fn link(ctx: &mut Ctx, newname: &Component4) -> Result<ChangeInfo4, Nfsstat4> {
    let dir = writable_dir(ctx)?;
    let file = match ctx.saved()? {
        Cur::Obj(o) => o.clone(),
        Cur::Pseudo(_) => return Err(Nfsstat4::Xdev),
    };
    if file.export.id != dir.export.id {
        return Err(Nfsstat4::Xdev);
    }
    let fa = file.backend().getattr(&file.fh).map_err(status)?;
    if fa.ftype == FileType::Directory {
        return Err(Nfsstat4::Isdir);
    }
    let name = check_name(newname)?;
    // A new name changes the file (its link count and ctime).
    super::state::break_delegations(ctx, &file, true)?;
    let (_, w) = file.backend().link(&file.cred, &file.fh, &dir.fh, name).map_err(status)?;
    Ok(cinfo(&w))
}
