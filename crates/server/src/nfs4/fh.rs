//! NFSv4 file handles: a pseudo directory's (4 bytes, its node id) or an
//! exported object's (the same bytes as its NFSv3 handle: export id and
//! backend handle), and their resolution to an export with the caller's
//! rights there, under the same rules as NFSv3 (client list, `secure`,
//! `xprtsec`, squashing).

use super::pseudo::{Child, Tree};
use crate::call::{Call, Refusal};
use crate::exports::ExportOptions;
use crate::handle::EXPORT_ID_BYTES;
use crate::ExportSpec;
use bytes::Bytes;
use eagernfs_proto::nfs4::{NfsFh4, Nfsstat4};
use eagernfs_vfs::{Credentials, FileHandle, MAX_BACKEND_HANDLE};
use eagernfs_xdr::Opaque;

/// A file handle the caller may use.
#[derive(Clone, Debug)]
pub(crate) enum Cur<'a> {
    /// A pseudo directory (its node id).
    Pseudo(u32),
    /// An object in an export.
    Obj(Obj<'a>),
}

/// An exported object and the caller's rights on its export.
#[derive(Clone, Debug)]
pub(crate) struct Obj<'a> {
    pub(crate) export: &'a ExportSpec,
    pub(crate) options: &'a ExportOptions,
    pub(crate) cred: Credentials,
    pub(crate) fh: FileHandle,
    /// The wire handle (also the key of the object's state and locks).
    pub(crate) wire: Bytes,
}

impl<'a> Obj<'a> {
    /// Another object of the same export.
    pub(crate) fn sibling(&self, fh: FileHandle) -> Obj<'a> {
        let wire = wire_of(self.export.id, &fh);
        Obj { export: self.export, options: self.options, cred: self.cred.clone(), fh, wire }
    }

    /// The backend.
    pub(crate) fn backend(&self) -> &'a dyn eagernfs_vfs::Backend {
        &*self.export.backend
    }
}

impl Cur<'_> {
    /// The handle as the client sees it.
    pub(crate) fn wire(&self) -> NfsFh4 {
        match self {
            Cur::Pseudo(id) => NfsFh4 { data: Opaque(Bytes::copy_from_slice(&id.to_be_bytes())) },
            Cur::Obj(o) => NfsFh4 { data: Opaque(o.wire.clone()) },
        }
    }
}

/// The wire bytes of `fh` in export `id`: the NFSv3 handle, so both
/// versions name (and lock) a file alike.
pub(crate) fn wire_of(id: u32, fh: &FileHandle) -> Bytes {
    let mut v = Vec::with_capacity(EXPORT_ID_BYTES + fh.0.len());
    v.extend_from_slice(&id.to_be_bytes());
    v.extend_from_slice(&fh.0);
    Bytes::from(v)
}

/// The status for a caller an export refuses.
pub(crate) fn refused(r: Refusal) -> Nfsstat4 {
    match r {
        Refusal::NotListed => Nfsstat4::Access,
        Refusal::Transport => Nfsstat4::Wrongsec,
        Refusal::Port => Nfsstat4::Perm,
    }
}

/// An object of export `export` with the caller's rights there.
pub(crate) fn in_export<'a>(
    call: &Call<'a>,
    export: &'a ExportSpec,
    fh: FileHandle,
) -> Result<Obj<'a>, Nfsstat4> {
    let options = call.export_access(export).map_err(refused)?;
    let cred = call.credentials(options);
    let wire = wire_of(export.id, &fh);
    Ok(Obj { export, options, cred, fh, wire })
}

/// The root of export `id`.
pub(crate) fn export_root<'a>(call: &Call<'a>, id: u32) -> Result<Obj<'a>, Nfsstat4> {
    let export = call.exports.iter().find(|e| e.id == id).ok_or(Nfsstat4::Stale)?;
    in_export(call, export, export.backend.root())
}

/// Resolve a wire handle (PUTFH).
pub(crate) fn parse<'a>(call: &Call<'a>, tree: &Tree, wire: &NfsFh4) -> Result<Cur<'a>, Nfsstat4> {
    let b = &wire.data.0;
    if b.len() == EXPORT_ID_BYTES {
        let id = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        // A pseudo directory that is gone (the exports changed) is stale; one
        // the caller may not see does not exist for it either.
        return match tree.nodes.get(&id) {
            Some(_) if tree.visible(call, id) => Ok(Cur::Pseudo(id)),
            _ => Err(Nfsstat4::Stale),
        };
    }
    if b.len() < EXPORT_ID_BYTES || b.len() > EXPORT_ID_BYTES + MAX_BACKEND_HANDLE {
        return Err(Nfsstat4::Badhandle);
    }
    let id = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    // A well-formed handle for an export we no longer serve is stale, not bad.
    let export = call.exports.iter().find(|e| e.id == id).ok_or(Nfsstat4::Stale)?;
    let options = call.export_access(export).map_err(refused)?;
    let cred = call.credentials(options);
    Ok(Cur::Obj(Obj { export, options, cred, fh: FileHandle(b.slice(EXPORT_ID_BYTES..)), wire: b.clone() }))
}

/// The root (PUTROOTFH): the pseudo-root, or an export at `/`.
pub(crate) fn root<'a>(call: &Call<'a>, tree: &Tree) -> Result<Cur<'a>, Nfsstat4> {
    match tree.root {
        Child::Dir(id) => Ok(Cur::Pseudo(id)),
        Child::Export(e) => export_root(call, e).map(Cur::Obj),
    }
}
