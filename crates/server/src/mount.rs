//! The MOUNT program, versions 3 and 1 (RFC 1813 Appendix I).
//!
//! MNT turns an export path (or a directory below one) into the root file
//! handle a client starts from, after the export's client list and port
//! rules allow it. Versions 1 and 2 share everything but MNT, whose v1 reply
//! carries a 32-byte handle; NFSv2 is not served, so a v1 MNT gets an error
//! while DUMP, UMNT, UMNTALL and EXPORT work for every version.

use crate::call::{Call, Outcome};
use crate::{handle, ExportSpec};
use bytes::{Bytes, BytesMut};
use eagernfs_proto::mount::*;
use eagernfs_proto::nfs3::Nfsstat3;
use eagernfs_rpc::AuthFlavor;
use eagernfs_vfs::FileType;
use eagernfs_xdr::{Encode, Opaque};
use std::path::{Component, Path, PathBuf};

/// Most entries the DUMP list remembers; beyond it new mounts are not recorded
/// (the list is advisory: clients do not depend on it).
const MAX_MOUNT_RECORDS: usize = 65_536;

pub(crate) fn dispatch(call: &Call, mut body: Bytes, out: &mut BytesMut) -> Outcome {
    let Ok(args) = MountArgs::decode(call.header.proc_, &mut body) else {
        return Outcome::GarbageArgs;
    };
    let res = match args {
        MountArgs::Null => MountRes::Null,
        MountArgs::Mnt(path) if call.header.vers == MOUNT_V3 => MountRes::Mnt3(mnt(call, &path)),
        // v1/v2 MNT would need a 32-byte NFSv2 handle for an NFSv2 server we do not run.
        MountArgs::Mnt(_) => MountRes::Mnt1(Fhstatus::Fail(Mountstat3::Notsupp as u32)),
        MountArgs::Dump => MountRes::Dump(dump(call)),
        MountArgs::Umnt(path) => {
            // A path MNT would refuse (`..`) was never recorded.
            if let Some(path) = normalise(&path) {
                forget(call, Some(&path));
            }
            MountRes::Umnt
        }
        MountArgs::Umntall => {
            forget(call, None);
            MountRes::Umntall
        }
        MountArgs::Export => MountRes::Export(export_list(call)),
    };
    res.encode(out);
    Outcome::Replied
}

/// Normalise a client's path: absolute, no `.`, no empty components. `..` is refused.
/// The empty path is `/` (libnfs sends it for `nfs://host/file`).
fn normalise(raw: &[u8]) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let p = Path::new(std::ffi::OsStr::from_bytes(raw));
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(n) => out.push(n),
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// The export whose mount path is the longest prefix of `path`, and the rest of the path.
fn find_export<'a>(call: &Call<'a>, path: &Path) -> Option<(&'a ExportSpec, PathBuf)> {
    let mut best: Option<(&ExportSpec, PathBuf, usize)> = None;
    for e in call.exports {
        for mp in &e.mount_paths {
            if let Ok(rest) = path.strip_prefix(mp) {
                let depth = mp.components().count();
                if best.as_ref().is_none_or(|b| depth > b.2) {
                    best = Some((e, rest.to_path_buf(), depth));
                }
            }
        }
    }
    best.map(|(e, rest, _)| (e, rest))
}

fn mnt(call: &Call, raw: &Dirpath) -> Mountres3 {
    let Some(path) = normalise(raw) else {
        return Mountres3::Fail(Mountstat3::Inval);
    };
    let Some((export, rest)) = find_export(call, &path) else {
        tracing::info!(peer = %call.conn.peer.addr, ?path, "MNT of a path that is not exported");
        return Mountres3::Fail(Mountstat3::Noent);
    };
    let options = match call.export_options(export) {
        Ok(o) => o,
        Err(_) => {
            tracing::info!(peer = %call.conn.peer.addr, ?path, "MNT refused: client not allowed");
            return Mountres3::Fail(Mountstat3::Acces);
        }
    };
    let cred = call.credentials(options);
    let fh = match walk(export, &cred, &rest) {
        Ok(fh) => fh,
        Err(stat) => {
            tracing::info!(peer = %call.conn.peer.addr, ?path, ?stat, "MNT refused");
            return Mountres3::Fail(stat);
        }
    };
    remember(call, &path);
    let wire = handle::to_wire(export.id, &fh);
    Mountres3::Ok(Mountres3Ok { fhandle: wire.data, auth_flavors: vec![AuthFlavor::Sys as u32] })
}

/// Most symbolic links followed while resolving one MOUNT path (Linux's MAXSYMLINKS).
const SYMLINKS_MAX: usize = 40;

/// Walk `rest` down from the export's root, one component at a time, with the caller's
/// credentials, as rpc.mountd's `realpath` does: symbolic links inside the export are followed
/// (a relative target from the link's directory, an absolute one naming a path under the
/// export's own path), but nothing ever leaves the export: `..` above its root, or a target
/// outside it, is refused.
fn walk(
    export: &ExportSpec,
    cred: &eagernfs_vfs::Credentials,
    rest: &Path,
) -> Result<eagernfs_vfs::FileHandle, Mountstat3> {
    use std::os::unix::ffi::OsStrExt;
    let status = |e| match crate::convert::status(e) {
        Nfsstat3::Noent => Mountstat3::Noent,
        Nfsstat3::Acces | Nfsstat3::Perm => Mountstat3::Acces,
        Nfsstat3::Notdir => Mountstat3::Notdir,
        _ => Mountstat3::Serverfault,
    };
    // The directories from the root down to where the walk is.
    let mut stack = vec![export.backend.root()];
    // Components still to walk, the next one last.
    let mut todo: Vec<Vec<u8>> = rest.components().rev().map(|c| c.as_os_str().as_bytes().to_vec()).collect();
    let mut links = 0;
    while let Some(name) = todo.pop() {
        let here = stack.last().expect("the root stays").clone();
        match name.as_slice() {
            b"" | b"." => continue,
            b".." => {
                if stack.len() == 1 {
                    return Err(Mountstat3::Acces); // above the export's root
                }
                stack.pop();
                continue;
            }
            _ => {}
        }
        let l = export.backend.lookup(cred, &here, &name).map_err(status)?;
        match l.attr.ftype {
            FileType::Directory => stack.push(l.handle),
            FileType::Symlink => {
                links += 1;
                if links > SYMLINKS_MAX {
                    return Err(Mountstat3::Inval);
                }
                let (target, _) = export.backend.readlink(cred, &l.handle).map_err(status)?;
                let target = Path::new(std::ffi::OsStr::from_bytes(&target));
                let relative = if target.is_absolute() {
                    // Only a path under the export's own directory names something in it.
                    let inside = export.mount_paths.first().and_then(|mp| target.strip_prefix(mp).ok());
                    let Some(inside) = inside else { return Err(Mountstat3::Acces) };
                    stack.truncate(1);
                    inside.to_path_buf()
                } else {
                    target.to_path_buf()
                };
                for c in relative.components().rev() {
                    match c {
                        Component::Normal(n) => todo.push(n.as_bytes().to_vec()),
                        Component::ParentDir => todo.push(b"..".to_vec()),
                        Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                    }
                }
            }
            _ => return Err(Mountstat3::Notdir),
        }
    }
    Ok(stack.pop().expect("the root stays"))
}

fn host(call: &Call) -> Name {
    Opaque::new(call.conn.peer.addr.ip().to_string().into_bytes()).unwrap_or_default()
}

/// Record a mount for DUMP by its normalised path, as rpc.mountd records the path it
/// resolved: every spelling of one path (``, `/`, `//mem/./`) is one record, and UMNT of any
/// of them removes it.
fn remember(call: &Call, path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let mut mounts = call.state.mounts.lock();
    if mounts.len() < MAX_MOUNT_RECORDS {
        mounts.insert((host(call).0, Bytes::copy_from_slice(path.as_os_str().as_bytes())));
    }
}

fn forget(call: &Call, path: Option<&Path>) {
    use std::os::unix::ffi::OsStrExt;
    let h = host(call).0;
    let mut mounts = call.state.mounts.lock();
    match path {
        Some(p) => {
            mounts.remove(&(h, Bytes::copy_from_slice(p.as_os_str().as_bytes())));
        }
        None => mounts.retain(|(mh, _)| *mh != h),
    }
}

fn dump(call: &Call) -> Mountlist {
    let mounts = call.state.mounts.lock();
    Mountlist(
        mounts
            .iter()
            .map(|(h, p)| Mountbody { ml_hostname: Opaque(h.clone()), ml_directory: Opaque(p.clone()) })
            .collect(),
    )
}

fn export_list(call: &Call) -> Exports {
    use std::os::unix::ffi::OsStrExt;
    Exports(
        call.exports
            .iter()
            .flat_map(|e| {
                let groups = Groups(
                    e.access
                        .clients
                        .iter()
                        .filter_map(|c| Opaque::new(c.matcher.to_string().into_bytes()).ok())
                        .collect(),
                );
                e.mount_paths.iter().filter_map(move |p| {
                    Some(Exportnode {
                        ex_dir: Opaque::new(Bytes::copy_from_slice(p.as_os_str().as_bytes())).ok()?,
                        ex_groups: groups.clone(),
                    })
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::normalise;
    use std::path::PathBuf;

    #[test]
    fn paths_are_normalised_and_dotdot_refused() {
        assert_eq!(normalise(b"/srv//data/./x/"), Some(PathBuf::from("/srv/data/x")));
        assert_eq!(normalise(b"srv"), Some(PathBuf::from("/srv")));
        assert_eq!(normalise(b"/"), Some(PathBuf::from("/")));
        // libnfs's `nfs://host/file` mounts the empty path: the same as `/`.
        assert_eq!(normalise(b""), Some(PathBuf::from("/")));
        assert_eq!(normalise(b"."), Some(PathBuf::from("/")));
        assert_eq!(normalise(b"/srv/../etc"), None);
    }
}
