//! The MOUNT program, versions 3 and 1 (RFC 1813 Appendix I).
//!
//! MNT turns an export path (or a directory below one) into the root file
//! handle a client starts from, after the export's client list and port
//! rules allow it. Versions 1 and 2 share everything but MNT, whose v1 reply
//! carries a 32-byte handle; NFSv2 is not served, so a v1 MNT gets an error
//! while DUMP, UMNT, UMNTALL and EXPORT work for every version.

use crate::dispatch::{Call, Outcome};
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
            forget(call, Some(&path));
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
    // Walk down to a subdirectory of the export, one component at a time,
    // with the caller's credentials (never following symlinks: LOOKUP doesn't).
    let mut fh = export.backend.root();
    for c in rest.components() {
        use std::os::unix::ffi::OsStrExt;
        let name = c.as_os_str().as_bytes();
        match export.backend.lookup(&cred, &fh, name) {
            Ok(l) if l.attr.ftype == FileType::Directory => fh = l.handle,
            Ok(_) => return Mountres3::Fail(Mountstat3::Notdir),
            Err(e) => {
                return Mountres3::Fail(match crate::convert::status(e) {
                    Nfsstat3::Noent => Mountstat3::Noent,
                    Nfsstat3::Acces | Nfsstat3::Perm => Mountstat3::Acces,
                    Nfsstat3::Notdir => Mountstat3::Notdir,
                    _ => Mountstat3::Serverfault,
                })
            }
        }
    }
    remember(call, raw);
    let wire = handle::to_wire(export.id, &fh);
    Mountres3::Ok(Mountres3Ok { fhandle: wire.data, auth_flavors: vec![AuthFlavor::Sys as u32] })
}

fn host(call: &Call) -> Name {
    Opaque::new(call.conn.peer.addr.ip().to_string().into_bytes()).unwrap_or_default()
}

fn remember(call: &Call, path: &Dirpath) {
    let mut mounts = call.state.mounts.lock();
    if mounts.len() < MAX_MOUNT_RECORDS {
        mounts.insert((host(call).0, path.0.clone()));
    }
}

fn forget(call: &Call, path: Option<&Dirpath>) {
    let h = host(call).0;
    let mut mounts = call.state.mounts.lock();
    match path {
        Some(p) => {
            mounts.remove(&(h, p.0.clone()));
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
        assert_eq!(normalise(b"/srv/../etc"), None);
    }
}
