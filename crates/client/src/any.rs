//! [`AnyClient`]: NFSv3 or NFSv4.x, whichever the URL asks for or the
//! server speaks, behind one [`NfsOps`].
//!
//! With `vers=3`, `vers=4`, `vers=4.1` or `vers=4.2` that version is used
//! (`vers=4`: 4.2, else 4.1). Without `vers` the client tries NFSv4.2,
//! then 4.1, then NFSv3, as Linux's mount does: it moves down when the
//! server refuses the version (NFS4ERR_MINOR_VERS_MISMATCH for a minor
//! version, an RPC-level refusal such as PROG_MISMATCH for NFSv4 itself),
//! never when the server cannot be reached (NFSv3 would not fare better).
//! `proto=udp` without `vers` is NFSv3: NFSv4 runs over TCP only.

use crate::nfs::NfsClient;
use crate::ops::{
    CreatedWritten, Cred, FileOpened, FileRead, FileToRead, NameToRemove, NfsError, NfsOps, NfsResult,
    OpenAccess, OpenWant, WriteClosed,
};
use crate::options::{MountOptions, NfsVersion};
use crate::url::NfsUrl;
use crate::v4::{minors_for, Nfs4Client};
use bytes::Bytes;
use eagernfs_proto::nfs3::*;
use eagernfs_proto::nfs4::Nfsstat4;
use std::net::SocketAddr;

/// An NFS client of whichever version was negotiated. Clones share connections.
#[derive(Clone, Debug)]
pub enum AnyClient {
    V3(NfsClient),
    V4(Nfs4Client),
}

/// Whether an NFSv4 attempt that failed with `e` says "this server does not
/// speak that version here" (so the next one is worth trying).
fn refused_version(e: &NfsError) -> bool {
    matches!(e, NfsError::Rpc(_) | NfsError::Nfs4(Nfsstat4::MinorVersMismatch))
}

impl AnyClient {
    /// Connect to the URL's server, choosing the version (module docs).
    pub async fn connect(url: &str) -> NfsResult<AnyClient> {
        let url: NfsUrl = url.parse().map_err(|e| NfsError::Mount(format!("{e}")))?;
        Self::connect_url(&url).await
    }

    /// As [`AnyClient::connect`], for a parsed URL.
    pub async fn connect_url(url: &NfsUrl) -> NfsResult<AnyClient> {
        let vers = url.options.vers;
        // NFSv4 runs over TCP only: proto=udp without vers means NFSv3, as on Linux.
        if vers == Some(NfsVersion::V3) || (vers.is_none() && url.options.udp) {
            return NfsClient::connect_url(url).await.map(AnyClient::V3);
        }
        let mut refusals = Vec::new();
        for &minor in minors_for(vers) {
            match Nfs4Client::connect_minor(url, minor).await {
                Ok(c) => return Ok(AnyClient::V4(c)),
                Err(e) if refused_version(&e) => {
                    tracing::debug!("NFSv4.{minor} refused by {}: {e}", url.authority());
                    refusals.push(format!("NFSv4.{minor}: {e}"));
                }
                Err(e) => return Err(e),
            }
        }
        if vers.is_some() {
            return Err(NfsError::Mount(format!(
                "the server does not speak the NFS version asked for ({})",
                refusals.join("; ")
            )));
        }
        let mut v3 = url.clone();
        v3.options.vers = Some(NfsVersion::V3);
        NfsClient::connect_url(&v3).await.map(AnyClient::V3)
    }

    /// The version spoken.
    pub fn version(&self) -> NfsVersion {
        match self {
            AnyClient::V3(_) => NfsVersion::V3,
            AnyClient::V4(c) => c.version(),
        }
    }

    /// The NFSv4 client, if that is what this is.
    pub fn as_v4(&self) -> Option<&Nfs4Client> {
        match self {
            AnyClient::V4(c) => Some(c),
            AnyClient::V3(_) => None,
        }
    }

    /// The NFSv3 client, if that is what this is.
    pub fn as_v3(&self) -> Option<&NfsClient> {
        match self {
            AnyClient::V3(c) => Some(c),
            AnyClient::V4(_) => None,
        }
    }

    pub fn rsize(&self) -> u32 {
        match self {
            AnyClient::V3(c) => c.rsize(),
            AnyClient::V4(c) => c.rsize(),
        }
    }

    pub fn wsize(&self) -> u32 {
        match self {
            AnyClient::V3(c) => c.wsize(),
            AnyClient::V4(c) => c.wsize(),
        }
    }

    pub fn options(&self) -> &MountOptions {
        match self {
            AnyClient::V3(c) => c.options(),
            AnyClient::V4(c) => c.options(),
        }
    }

    /// The export (NFSv3) or the root directory's path (NFSv4).
    pub fn export(&self) -> &str {
        match self {
            AnyClient::V3(c) => c.export(),
            AnyClient::V4(c) => c.export(),
        }
    }

    /// The URL's path below [`AnyClient::export`].
    pub fn path_inside(&self) -> &str {
        match self {
            AnyClient::V3(c) => c.path_inside(),
            AnyClient::V4(c) => c.path_inside(),
        }
    }

    pub fn server(&self) -> SocketAddr {
        match self {
            AnyClient::V3(c) => c.server(),
            AnyClient::V4(c) => c.server(),
        }
    }

    pub fn server_fsinfo(&self) -> &Fsinfo3ResOk {
        match self {
            AnyClient::V3(c) => c.server_fsinfo(),
            AnyClient::V4(c) => c.server_fsinfo(),
        }
    }

    pub fn rpc(&self) -> &crate::driver::RpcClient {
        match self {
            AnyClient::V3(c) => c.rpc(),
            AnyClient::V4(c) => c.rpc(),
        }
    }

    pub fn default_cred(&self) -> Cred {
        match self {
            AnyClient::V3(c) => c.default_cred(),
            AnyClient::V4(c) => c.default_cred(),
        }
    }

    pub fn set_retry_jukebox(&self, on: bool) {
        match self {
            AnyClient::V3(c) => c.set_retry_jukebox(on),
            AnyClient::V4(c) => c.set_retry_jukebox(on),
        }
    }

    /// Over NFSv4: ask for delegations and keep at most `max` of them, for
    /// a caching layer that uses them ([`NfsOps::delegated`]); `on` false
    /// returns every delegation a server grants. Nothing over NFSv3.
    pub fn set_delegations(&self, on: bool, max: u32) {
        if let AnyClient::V4(c) = self {
            c.set_want_delegations(on);
            c.set_delegations_max(max);
        }
    }

    pub fn set_read_only(&self, ro: bool) {
        match self {
            AnyClient::V3(c) => c.set_read_only(ro),
            AnyClient::V4(c) => c.set_read_only(ro),
        }
    }

    /// Handle and attributes of `path` below the root (NFSv4: one COMPOUND).
    pub async fn lookup_path(&self, cred: &Cred, path: &str) -> NfsResult<(NfsFh3, Fattr3)> {
        match self {
            AnyClient::V3(c) => c.lookup_path(cred, path).await,
            AnyClient::V4(c) => c.lookup_path(cred, path).await,
        }
    }

    /// A client rooted at `root` over the same connections.
    pub async fn rooted_at(&self, root: NfsFh3) -> NfsResult<AnyClient> {
        match self {
            AnyClient::V3(c) => c.rooted_at(root).await.map(AnyClient::V3),
            AnyClient::V4(c) => c.rooted_at(root).await.map(AnyClient::V4),
        }
    }

    /// UMNT (NFSv3) or the end of the session (NFSv4).
    pub async fn unmount(&self) -> NfsResult<()> {
        match self {
            AnyClient::V3(c) => c.unmount().await,
            AnyClient::V4(c) => c.unmount().await,
        }
    }

    pub fn shares_connections_with(&self, other: &AnyClient) -> bool {
        match (self, other) {
            (AnyClient::V3(a), AnyClient::V3(b)) => a.shares_connections_with(b),
            (AnyClient::V4(a), AnyClient::V4(b)) => a.shares_connections_with(b),
            _ => false,
        }
    }
}

/// Each call goes to the version's client.
macro_rules! both {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            AnyClient::V3($c) => $e.await,
            AnyClient::V4($c) => $e.await,
        }
    };
}

impl NfsOps for AnyClient {
    fn root(&self) -> NfsFh3 {
        match self {
            AnyClient::V3(c) => c.root(),
            AnyClient::V4(c) => c.root(),
        }
    }

    async fn null(&self) -> NfsResult<()> {
        both!(self, c => c.null())
    }

    async fn getattr(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Fattr3> {
        both!(self, c => c.getattr(cred, fh))
    }

    async fn setattr(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        attrs: Sattr3,
        guard: Option<Nfstime3>,
    ) -> NfsResult<WccData> {
        both!(self, c => c.setattr(cred, fh, attrs, guard))
    }

    async fn lookup(&self, cred: &Cred, dir: &NfsFh3, name: &[u8]) -> NfsResult<Lookup3ResOk> {
        both!(self, c => c.lookup(cred, dir, name))
    }

    async fn access(&self, cred: &Cred, fh: &NfsFh3, mask: u32) -> NfsResult<Access3ResOk> {
        both!(self, c => c.access(cred, fh, mask))
    }

    async fn readlink(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Readlink3ResOk> {
        both!(self, c => c.readlink(cred, fh))
    }

    async fn read(&self, cred: &Cred, fh: &NfsFh3, offset: u64, count: u32) -> NfsResult<Read3ResOk> {
        both!(self, c => c.read(cred, fh, offset, count))
    }

    async fn write(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        offset: u64,
        data: Bytes,
        stable: StableHow,
    ) -> NfsResult<Write3ResOk> {
        both!(self, c => c.write(cred, fh, offset, data, stable))
    }

    async fn create(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        how: Createhow3,
    ) -> NfsResult<Create3ResOk> {
        both!(self, c => c.create(cred, dir, name, how))
    }

    async fn mkdir(&self, cred: &Cred, dir: &NfsFh3, name: &[u8], attrs: Sattr3) -> NfsResult<Mkdir3ResOk> {
        both!(self, c => c.mkdir(cred, dir, name, attrs))
    }

    async fn symlink(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        target: &[u8],
        attrs: Sattr3,
    ) -> NfsResult<Symlink3ResOk> {
        both!(self, c => c.symlink(cred, dir, name, target, attrs))
    }

    async fn mknod(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        what: Mknoddata3,
    ) -> NfsResult<Mknod3ResOk> {
        both!(self, c => c.mknod(cred, dir, name, what))
    }

    async fn remove(&self, cred: &Cred, dir: &NfsFh3, name: &[u8]) -> NfsResult<WccData> {
        both!(self, c => c.remove(cred, dir, name))
    }

    async fn rmdir(&self, cred: &Cred, dir: &NfsFh3, name: &[u8]) -> NfsResult<WccData> {
        both!(self, c => c.rmdir(cred, dir, name))
    }

    async fn rename(
        &self,
        cred: &Cred,
        from_dir: &NfsFh3,
        from_name: &[u8],
        to_dir: &NfsFh3,
        to_name: &[u8],
    ) -> NfsResult<Rename3ResOk> {
        both!(self, c => c.rename(cred, from_dir, from_name, to_dir, to_name))
    }

    async fn link(&self, cred: &Cred, fh: &NfsFh3, dir: &NfsFh3, name: &[u8]) -> NfsResult<Link3ResOk> {
        both!(self, c => c.link(cred, fh, dir, name))
    }

    async fn readdir(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        cookie: u64,
        verf: Cookieverf3,
        count: u32,
    ) -> NfsResult<Readdir3ResOk> {
        both!(self, c => c.readdir(cred, dir, cookie, verf, count))
    }

    async fn readdirplus(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        cookie: u64,
        verf: Cookieverf3,
        dircount: u32,
        maxcount: u32,
    ) -> NfsResult<Readdirplus3ResOk> {
        both!(self, c => c.readdirplus(cred, dir, cookie, verf, dircount, maxcount))
    }

    async fn fsstat(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Fsstat3ResOk> {
        both!(self, c => c.fsstat(cred, fh))
    }

    async fn fsinfo(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Fsinfo3ResOk> {
        both!(self, c => c.fsinfo(cred, fh))
    }

    async fn pathconf(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Pathconf3ResOk> {
        both!(self, c => c.pathconf(cred, fh))
    }

    async fn commit(&self, cred: &Cred, fh: &NfsFh3, offset: u64, count: u32) -> NfsResult<Commit3ResOk> {
        both!(self, c => c.commit(cred, fh, offset, count))
    }

    async fn open_file(&self, cred: &Cred, fh: &NfsFh3, want: OpenWant) -> NfsResult<FileOpened> {
        both!(self, c => c.open_file(cred, fh, want))
    }

    async fn close_file(&self, cred: &Cred, fh: &NfsFh3, access: OpenAccess) -> NfsResult<()> {
        both!(self, c => c.close_file(cred, fh, access))
    }

    fn delegated(&self, fh: &NfsFh3) -> bool {
        match self {
            AnyClient::V3(_) => false,
            AnyClient::V4(c) => c.delegated(fh),
        }
    }

    fn write_delegated(&self, fh: &NfsFh3) -> bool {
        match self {
            AnyClient::V3(_) => false,
            AnyClient::V4(c) => c.write_delegated(fh),
        }
    }

    fn read_files_max(&self) -> usize {
        match self {
            AnyClient::V3(_) => 0,
            AnyClient::V4(c) => c.read_files_max(),
        }
    }

    fn lists_ahead(&self) -> bool {
        match self {
            AnyClient::V3(_) => false,
            AnyClient::V4(c) => c.lists_ahead(),
        }
    }

    async fn readdirplus_ahead(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        parent_fileid: u64,
        dircount: u32,
        maxcount: u32,
    ) -> NfsResult<Option<Readdirplus3ResOk>> {
        both!(self, c => c.readdirplus_ahead(cred, dir, parent_fileid, dircount, maxcount))
    }

    async fn read_files(&self, cred: &Cred, files: &[FileToRead]) -> NfsResult<Vec<FileRead>> {
        both!(self, c => c.read_files(cred, files))
    }

    async fn create_open(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        how: Createhow3,
        access: OpenAccess,
    ) -> NfsResult<(Create3ResOk, FileOpened)> {
        both!(self, c => NfsOps::create_open(c, cred, dir, name, how, access))
    }

    async fn write_close(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        offset: u64,
        data: Bytes,
        attrs: Option<Sattr3>,
        close: Option<OpenAccess>,
    ) -> NfsResult<WriteClosed> {
        both!(self, c => NfsOps::write_close(c, cred, fh, offset, data, attrs, close))
    }

    fn creates_written(&self) -> bool {
        match self {
            AnyClient::V3(c) => c.creates_written(),
            AnyClient::V4(c) => NfsOps::creates_written(c),
        }
    }

    async fn create_written(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        attrs: Sattr3,
        data: Bytes,
        then: Option<Sattr3>,
    ) -> NfsResult<CreatedWritten> {
        both!(self, c => NfsOps::create_written(c, cred, dir, name, attrs, data, then))
    }

    async fn getattr_listed_dir(&self, cred: &Cred, dir: &NfsFh3) -> NfsResult<Fattr3> {
        both!(self, c => c.getattr_listed_dir(cred, dir))
    }

    async fn remove_known(&self, cred: &Cred, dir: &NfsFh3, name: &[u8], is_dir: bool) -> NfsResult<WccData> {
        both!(self, c => c.remove_known(cred, dir, name, is_dir))
    }

    async fn remove_last_name(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        is_dir: bool,
        victim: &NfsFh3,
    ) -> NfsResult<WccData> {
        both!(self, c => c.remove_last_name(cred, dir, name, is_dir, victim))
    }

    async fn remove_names(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        names: &[NameToRemove],
    ) -> Vec<Option<NfsResult<WccData>>> {
        both!(self, c => c.remove_names(cred, dir, names))
    }
}
