//! [`NfsClient`]: the NFSv3 wire client, implementing [`NfsOps`].
//!
//! `NfsClient::connect("nfs://server/export/dir?nconnect=4")` mounts the
//! export (see `mount.rs`), opens the NFS connections, and asks FSINFO for
//! the server's transfer sizes: [`NfsClient::rsize`] and
//! [`NfsClient::wsize`] are the smaller of those and the `rsize`/`wsize`
//! options. Each procedure is one RPC; the client is cheap to clone and
//! every clone shares the connections, so many tasks can call at once (the
//! calls are pipelined).
//!
//! # Layout
//! - [`NfsClient`]: constructors, accessors, [`NfsClient::lookup_path`].
//! - the [`NfsOps`] impl: the 22 procedures.
//! - `NfsRes`: turns each `XxxRes` into `Ok(resok)` or `Err(status)`.

use crate::core::Call;
use crate::driver::{RpcClient, TransportConfig};
use crate::mount::{self, Mounted};
use crate::ops::{Cred, NfsError, NfsOps, NfsResult};
use crate::options::{MountOptions, TRANSFER_SIZE_MAX, TRANSFER_SIZE_MIN};
use crate::url::NfsUrl;
use bytes::Bytes;
use eagernfs_proto::nfs3::*;
use eagernfs_xdr::{Decode, Encode, Opaque};
use std::net::SocketAddr;
use std::sync::Arc;

/// An NFSv3 client for one mounted export. Clones share connections.
#[derive(Clone)]
pub struct NfsClient {
    inner: Arc<Inner>,
}

struct Inner {
    rpc: RpcClient,
    mounted: Mounted,
    options: MountOptions,
    /// FSINFO of the export root, asked once at connect.
    fsinfo: Fsinfo3ResOk,
    rsize: u32,
    wsize: u32,
    /// Modifying calls fail with ROFS: `ro` at mount, then what a remount
    /// of the FUSE mount last said.
    read_only: std::sync::atomic::AtomicBool,
    /// Answer NFS3ERR_JUKEBOX ("try again later") by trying again, as a
    /// kernel mount does, instead of returning it (see [`NfsClient::set_retry_jukebox`]).
    retry_jukebox: std::sync::atomic::AtomicBool,
}

/// First wait before a call answered JUKEBOX is sent again; it doubles up
/// to [`JUKEBOX_RETRY_MAX`].
const JUKEBOX_RETRY_MIN: std::time::Duration = std::time::Duration::from_millis(100);
/// Longest wait between tries of a call answered JUKEBOX (Linux waits this
/// long every time: `NFS_JUKEBOX_RETRY_TIME`).
const JUKEBOX_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(5);

impl std::fmt::Debug for NfsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NfsClient")
            .field("server", &self.inner.mounted.nfs_addr)
            .field("export", &self.inner.mounted.export)
            .finish()
    }
}

/// A result enum of a procedure: `Ok(resok)` or `Fail(status, resfail)`.
trait NfsRes: Decode {
    type Ok;
    fn into_result(self) -> NfsResult<Self::Ok>;
}

macro_rules! nfs_res {
    ($($res:ident => $ok:ty),* $(,)?) => {$(
        impl NfsRes for $res {
            type Ok = $ok;
            fn into_result(self) -> NfsResult<$ok> {
                match self {
                    $res::Ok(ok) => Ok(ok),
                    $res::Fail(status, _) => Err(NfsError::Nfs(status)),
                }
            }
        }
    )*};
}

nfs_res! {
    Getattr3Res => Getattr3ResOk,
    Setattr3Res => Setattr3ResOk,
    Lookup3Res => Lookup3ResOk,
    Access3Res => Access3ResOk,
    Readlink3Res => Readlink3ResOk,
    Read3Res => Read3ResOk,
    Write3Res => Write3ResOk,
    Create3Res => Create3ResOk,
    Mkdir3Res => Mkdir3ResOk,
    Symlink3Res => Symlink3ResOk,
    Mknod3Res => Mknod3ResOk,
    Remove3Res => Remove3ResOk,
    Rmdir3Res => Rmdir3ResOk,
    Rename3Res => Rename3ResOk,
    Link3Res => Link3ResOk,
    Readdir3Res => Readdir3ResOk,
    Readdirplus3Res => Readdirplus3ResOk,
    Fsstat3Res => Fsstat3ResOk,
    Fsinfo3Res => Fsinfo3ResOk,
    Pathconf3Res => Pathconf3ResOk,
    Commit3Res => Commit3ResOk,
}

/// A file name as the wire type; longer than any server accepts is
/// ENAMETOOLONG, as a local file system would say.
fn filename(name: &[u8]) -> NfsResult<Filename3> {
    Opaque::new(Bytes::copy_from_slice(name)).map_err(|_| NfsError::Nfs(Nfsstat3::Nametoolong))
}

fn dirop(dir: &NfsFh3, name: &[u8]) -> NfsResult<Diropargs3> {
    Ok(Diropargs3 { dir: dir.clone(), name: filename(name)? })
}

/// The transfer size to use: the server's maximum, capped by the option
/// and the transport's maximum, rounded down to whole pages when that
/// leaves anything.
pub(crate) fn transfer_size(server_max: u32, option: Option<u32>, transport_max: u32) -> u32 {
    let want = option.unwrap_or(TRANSFER_SIZE_MAX).min(transport_max);
    let size = if server_max == 0 { want } else { server_max.min(want) };
    if size >= TRANSFER_SIZE_MIN {
        size / TRANSFER_SIZE_MIN * TRANSFER_SIZE_MIN
    } else {
        size.max(512)
    }
}

impl NfsClient {
    /// Mount the export a URL names and connect (see the module docs).
    pub async fn connect(url: &str) -> NfsResult<NfsClient> {
        let url: NfsUrl = url.parse().map_err(|e| NfsError::Mount(format!("{e}")))?;
        Self::connect_url(&url).await
    }

    /// Mount `url`'s export (the longest prefix of its path MOUNT accepts,
    /// or its explicit `export=`) and connect.
    ///
    /// A URL with several addresses (`nfs://h1,h2,h3/…`) mounts through
    /// the first that answers; the others become the transport's fall-back
    /// addresses (see `driver.rs`), after a check that each one that
    /// answers accepts the export's root handle (heads of one cluster share
    /// their handle key; a server that answers ESTALE is not one of them,
    /// and the mount fails rather than meet that at fail-over).
    pub async fn connect_url(url: &NfsUrl) -> NfsResult<NfsClient> {
        if let Some(v) = url.options.vers.filter(|v| *v != crate::options::NfsVersion::V3) {
            return Err(NfsError::Mount(format!(
                "vers={} asks for NFSv4: NfsClient speaks NFSv3 (AnyClient chooses the version)",
                v.as_str()
            )));
        }
        let mut options = url.options.clone();
        // TLS checks the server's certificate against the name the user gave.
        if options.xprtsec != crate::Xprtsec::None
            && options.tls_name.is_none()
            && url.host.parse::<std::net::IpAddr>().is_err()
        {
            options.tls_name = Some(url.host.clone());
        }
        let cred = default_cred(&options);
        let addresses = url.addresses();
        let mut failures = Vec::new();
        for (i, a) in addresses.iter().enumerate() {
            let port = options.nfsport.or(a.port);
            match mount::mount(&a.host, port, &url.path, url.export.as_deref(), &options, &cred).await {
                Ok(mounted) => {
                    let others: Vec<_> = addresses[i + 1..].iter().chain(&addresses[..i]).cloned().collect();
                    let alternates = fall_backs(&others, &mounted, &options, &cred).await?;
                    return Self::start(mounted, options, &alternates).await;
                }
                // Not there now: the next address may be.
                Err(e @ (NfsError::Connection(_) | NfsError::TimedOut)) if addresses.len() > 1 => {
                    failures.push(format!("{a}: {e}"));
                }
                Err(e) => return Err(e),
            }
        }
        Err(NfsError::Connection(format!(
            "no address of {} answered: {}",
            url.authority(),
            failures.join("; ")
        )))
    }

    /// Mount exactly `export` of the server at `addr` (its NFS port; MOUNT
    /// on that port, at `mountport=`, or through the portmapper) and connect.
    pub async fn connect_to(addr: SocketAddr, export: &str, options: MountOptions) -> NfsResult<NfsClient> {
        let cred = default_cred(&options);
        let host = addr.ip().to_string();
        let mounted = mount::mount(&host, Some(addr.port()), export, Some(export), &options, &cred).await?;
        Self::start(mounted, options, &[]).await
    }

    /// Connect to the NFS service at `addr` with a root handle obtained
    /// elsewhere (no MOUNT call). Fails only if FSINFO on `root` fails.
    pub async fn with_root(addr: SocketAddr, root: NfsFh3, options: MountOptions) -> NfsResult<NfsClient> {
        let mounted = Mounted {
            nfs_addr: addr,
            mount_addr: addr,
            export: "/".into(),
            path_inside: "/".into(),
            root,
            auth_flavors: vec![],
        };
        Self::start(mounted, options, &[]).await
    }

    /// A client whose root is `root` (a directory inside this export,
    /// e.g. from [`NfsClient::lookup_path`]), over this client's
    /// connections: no new TCP connection, no MOUNT call. One FSINFO on
    /// `root` sets the transfer sizes, because the directory may be on
    /// another of the server's file systems with other limits.
    ///
    /// The result still names this client's export, so
    /// [`NfsClient::unmount`] on either one UMNTs the export that was
    /// mounted; its [`NfsClient::path_inside`] is `/` (it is rooted at the
    /// path). The connections close when the last client sharing them is
    /// dropped.
    pub async fn rooted_at(&self, root: NfsFh3) -> NfsResult<NfsClient> {
        let mounted = Mounted { root, path_inside: "/".into(), ..self.inner.mounted.clone() };
        let c = Self::start_on(self.inner.rpc.clone(), mounted, self.inner.options.clone()).await?;
        c.set_retry_jukebox(self.inner.retry_jukebox.load(std::sync::atomic::Ordering::Relaxed));
        Ok(c)
    }

    /// Try a call the server answered NFS3ERR_JUKEBOX ("busy, try again
    /// later": a CephFS head waiting for the cluster, such as for the
    /// capabilities of a dead head's session) again after a pause, 0.1 s
    /// doubling to 5 s, instead of returning the error: on a hard mount
    /// until it is answered otherwise, on a soft one for at most its major
    /// timeout. What a kernel mount does, and what the FUSE mount asks
    /// for; off by default, so this client shows the server's answers as
    /// they are.
    pub fn set_retry_jukebox(&self, on: bool) {
        self.inner.retry_jukebox.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Run `attempt` until it is answered other than JUKEBOX, if this
    /// client retries JUKEBOX (see [`NfsClient::set_retry_jukebox`]).
    async fn with_jukebox_retry<T, F, Fut>(&self, proc_: u32, attempt: F) -> NfsResult<T>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = NfsResult<T>>,
    {
        let started = std::time::Instant::now();
        let mut wait = JUKEBOX_RETRY_MIN;
        loop {
            let r = attempt().await;
            let retry = matches!(r, Err(NfsError::Nfs(Nfsstat3::Jukebox)))
                && self.inner.retry_jukebox.load(std::sync::atomic::Ordering::Relaxed)
                && (self.inner.options.hard
                    || started.elapsed() + wait
                        < crate::core::CoreConfig::from_options(&self.inner.options).major_window());
            if !retry {
                return r;
            }
            tracing::debug!(
                "{} answered JUKEBOX (busy); trying again in {wait:?}",
                name_of(proc_).unwrap_or("NFS call")
            );
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(JUKEBOX_RETRY_MAX);
        }
    }

    async fn start(
        mounted: Mounted,
        options: MountOptions,
        alternates: &[SocketAddr],
    ) -> NfsResult<NfsClient> {
        let config = TransportConfig::new(mounted.nfs_addr, &options).with_alternates(alternates, &options);
        let rpc = RpcClient::new(config);
        Self::start_on(rpc, mounted, options).await
    }

    /// Ask FSINFO on `mounted.root` over `rpc` and build the client.
    async fn start_on(rpc: RpcClient, mounted: Mounted, options: MountOptions) -> NfsResult<NfsClient> {
        let cred = default_cred(&options);
        let args = Fsinfo3Args { fsroot: mounted.root.clone() };
        let body = rpc.call(NFS_PROGRAM, NFS_V3, NFSPROC3_FSINFO, &cred, &args).await?;
        let fsinfo = decode::<Fsinfo3Res>(NFSPROC3_FSINFO, body)?.into_result()?;
        let rsize = transfer_size(fsinfo.rtmax, options.rsize, options.transfer_size_max());
        let wsize = transfer_size(fsinfo.wtmax, options.wsize, options.transfer_size_max());
        let read_only = std::sync::atomic::AtomicBool::new(options.ro);
        let retry_jukebox = std::sync::atomic::AtomicBool::new(false);
        Ok(NfsClient {
            inner: Arc::new(Inner { rpc, mounted, options, fsinfo, rsize, wsize, read_only, retry_jukebox }),
        })
    }

    /// Whether `self` and `other` send their calls over the same
    /// connections (clones, or one made from the other by
    /// [`NfsClient::rooted_at`]).
    pub fn shares_connections_with(&self, other: &NfsClient) -> bool {
        std::ptr::eq(self.inner.rpc.connection_stats().as_ptr(), other.inner.rpc.connection_stats().as_ptr())
    }

    /// Largest READ to send: min(server rtmax, `rsize` option).
    pub fn rsize(&self) -> u32 {
        self.inner.rsize
    }

    /// Largest WRITE to send: min(server wtmax, `wsize` option).
    pub fn wsize(&self) -> u32 {
        self.inner.wsize
    }

    /// The options the client was made with.
    pub fn options(&self) -> &MountOptions {
        &self.inner.options
    }

    /// The export path MOUNT accepted.
    pub fn export(&self) -> &str {
        &self.inner.mounted.export
    }

    /// The URL's path below the export (`/` for the export itself); look it
    /// up with [`NfsClient::lookup_path`].
    pub fn path_inside(&self) -> &str {
        &self.inner.mounted.path_inside
    }

    /// The server's NFS address (of several, the one in use now).
    pub fn server(&self) -> SocketAddr {
        self.inner.rpc.server()
    }

    /// The export root's FSINFO, as answered at connect.
    pub fn server_fsinfo(&self) -> &Fsinfo3ResOk {
        &self.inner.fsinfo
    }

    /// The RPC transport (connection statistics and events).
    pub fn rpc(&self) -> &RpcClient {
        &self.inner.rpc
    }

    /// The credential the options ask for (`uid=`/`gid=`), else this
    /// process's.
    pub fn default_cred(&self) -> Cred {
        default_cred(&self.inner.options)
    }

    /// Walk `path` (`/`-separated, relative to the export root) with
    /// LOOKUP, one component at a time. Symbolic links are not followed.
    /// Returns the handle and attributes of the last component.
    pub async fn lookup_path(&self, cred: &Cred, path: &str) -> NfsResult<(NfsFh3, Fattr3)> {
        let mut fh = self.root();
        let mut attrs: Option<Fattr3> = None;
        for comp in path.split('/').filter(|c| !c.is_empty() && *c != ".") {
            let res = self.lookup(cred, &fh, comp.as_bytes()).await?;
            fh = res.object;
            attrs = res.obj_attributes;
        }
        let attrs = match attrs {
            Some(a) => a,
            None => self.getattr(cred, &fh).await?,
        };
        Ok((fh, attrs))
    }

    /// Tell the server we are done with the export (MOUNT UMNT; advisory).
    pub async fn unmount(&self) -> NfsResult<()> {
        let m = &self.inner.mounted;
        // MOUNT on the NFS port (eagernfs): the head in use now, which may
        // not be the one that mounted.
        let addr = if m.mount_addr == m.nfs_addr { self.inner.rpc.server() } else { m.mount_addr };
        let client = mount::side_client(addr, &self.inner.options);
        mount::umnt(&client, &self.default_cred(), &self.inner.mounted.export).await
    }

    /// One NFSv3 call, decoded into its success arm.
    async fn call<A: Encode, R: NfsRes>(
        &self,
        cred: &Cred,
        proc_: u32,
        args: &A,
        args_len_hint: usize,
    ) -> NfsResult<R::Ok> {
        self.with_jukebox_retry(proc_, || async {
            let body =
                self.inner.rpc.call_sized(NFS_PROGRAM, NFS_V3, proc_, cred, args, args_len_hint).await?;
            decode::<R>(proc_, body)?.into_result()
        })
        .await
    }

    /// Refuse modifying calls (`true`), or allow them again: the FUSE
    /// mount's remount. Only this client: one made by `rooted_at` keeps its own.
    pub fn set_read_only(&self, read_only: bool) {
        self.inner.read_only.store(read_only, std::sync::atomic::Ordering::Relaxed);
    }

    /// A modifying call on a `ro` mount fails here, as a read-only local
    /// file system would.
    fn writable(&self) -> NfsResult<()> {
        if self.inner.read_only.load(std::sync::atomic::Ordering::Relaxed) {
            Err(NfsError::Nfs(Nfsstat3::Rofs))
        } else {
            Ok(())
        }
    }
}

fn decode<R: Decode>(proc_: u32, mut body: Bytes) -> NfsResult<R> {
    R::decode(&mut body)
        .map_err(|e| NfsError::BadReply(format!("{} reply: {e}", name_of(proc_).unwrap_or("NFS"))))
}

/// How long the mount waits for a fall-back address to answer the check of
/// the root handle; one that does not answer in time is kept untested (it
/// may be down now and up at fail-over).
const FALL_BACK_CHECK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The NFS addresses of `others` (the URL's addresses after the one that
/// mounted), each checked, in parallel, to accept the export's root handle.
/// An address that cannot be resolved or does not answer is kept or
/// skipped with a warning; one that answers ESTALE fails the mount.
async fn fall_backs(
    others: &[crate::url::Address],
    mounted: &Mounted,
    options: &MountOptions,
    cred: &Cred,
) -> NfsResult<Vec<SocketAddr>> {
    let mut checks = Vec::with_capacity(others.len());
    for a in others {
        let port = options.nfsport.or(a.port).unwrap_or(mounted.nfs_addr.port());
        let addr = match mount::resolve(&a.host, port).await {
            Ok(addr) => addr,
            Err(e) => {
                tracing::warn!("fall-back address {a} skipped: {e}");
                continue;
            }
        };
        let (root, options, cred) = (mounted.root.clone(), options.clone(), cred.clone());
        checks.push((
            addr,
            tokio::spawn(async move {
                let side = mount::side_client(addr, &options);
                let args = Fsinfo3Args { fsroot: root };
                let call = async {
                    let body = side.call(NFS_PROGRAM, NFS_V3, NFSPROC3_FSINFO, &cred, &args).await?;
                    decode::<Fsinfo3Res>(NFSPROC3_FSINFO, body)?.into_result()
                };
                tokio::time::timeout(FALL_BACK_CHECK_WAIT, call).await
            }),
        ));
    }
    let mut out = Vec::with_capacity(checks.len());
    for (addr, check) in checks {
        match check.await {
            Ok(Ok(Ok(_))) => {}
            Ok(Ok(Err(e @ NfsError::Nfs(Nfsstat3::Stale | Nfsstat3::Badhandle)))) => {
                return Err(NfsError::Mount(format!(
                    "{addr} does not accept the file handles of {} ({e}): the addresses of one URL must be heads of one cluster (eagernfs serve --node-id N, one --cluster-namespace)",
                    mounted.nfs_addr
                )));
            }
            Ok(Ok(Err(e))) => tracing::warn!("fall-back address {addr} not usable now ({e}); kept"),
            Ok(Err(_)) => tracing::warn!(
                "fall-back address {addr} did not answer within {} s; kept",
                FALL_BACK_CHECK_WAIT.as_secs()
            ),
            Err(e) => tracing::warn!("checking fall-back address {addr} failed: {e}; kept"),
        }
        out.push(addr);
    }
    Ok(out)
}

/// The credential `uid=`/`gid=` ask for, else this process's.
pub(crate) fn default_cred(options: &MountOptions) -> Cred {
    let mut cred = Cred::current_process();
    if let Some(uid) = options.uid {
        cred.uid = uid;
    }
    if let Some(gid) = options.gid {
        cred.gid = gid;
        cred.groups.clear();
    }
    cred
}

impl NfsOps for NfsClient {
    fn root(&self) -> NfsFh3 {
        self.inner.mounted.root.clone()
    }

    async fn null(&self) -> NfsResult<()> {
        let cred = self.default_cred();
        self.inner.rpc.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &cred, &()).await.map(|_| ())
    }

    async fn getattr(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Fattr3> {
        let args = Getattr3Args { object: fh.clone() };
        Ok(self.call::<_, Getattr3Res>(cred, NFSPROC3_GETATTR, &args, 0).await?.obj_attributes)
    }

    async fn setattr(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        attrs: Sattr3,
        guard: Option<Nfstime3>,
    ) -> NfsResult<WccData> {
        self.writable()?;
        let args = Setattr3Args { object: fh.clone(), new_attributes: attrs, guard };
        Ok(self.call::<_, Setattr3Res>(cred, NFSPROC3_SETATTR, &args, 0).await?.obj_wcc)
    }

    async fn lookup(&self, cred: &Cred, dir: &NfsFh3, name: &[u8]) -> NfsResult<Lookup3ResOk> {
        let args = Lookup3Args { what: dirop(dir, name)? };
        self.call::<_, Lookup3Res>(cred, NFSPROC3_LOOKUP, &args, 0).await
    }

    async fn access(&self, cred: &Cred, fh: &NfsFh3, mask: u32) -> NfsResult<Access3ResOk> {
        let args = Access3Args { object: fh.clone(), access: mask };
        self.call::<_, Access3Res>(cred, NFSPROC3_ACCESS, &args, 0).await
    }

    async fn readlink(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Readlink3ResOk> {
        let args = Readlink3Args { symlink: fh.clone() };
        self.call::<_, Readlink3Res>(cred, NFSPROC3_READLINK, &args, 0).await
    }

    async fn read(&self, cred: &Cred, fh: &NfsFh3, offset: u64, count: u32) -> NfsResult<Read3ResOk> {
        let args = Read3Args { file: fh.clone(), offset, count };
        self.call::<_, Read3Res>(cred, NFSPROC3_READ, &args, 0).await
    }

    async fn write(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        offset: u64,
        data: Bytes,
        stable: StableHow,
    ) -> NfsResult<Write3ResOk> {
        self.writable()?;
        let args = Write3Args { file: fh.clone(), offset, count: data.len() as u32, stable, data };
        // The data goes on the wire from the caller's buffer, not copied.
        let rpc = &self.inner.rpc;
        self.with_jukebox_retry(NFSPROC3_WRITE, || async {
            let call = Call::with_opaque_tail(
                NFS_PROGRAM,
                NFS_V3,
                NFSPROC3_WRITE,
                &rpc.auth_sys(cred),
                &Write3ArgsHead(&args),
                args.data.clone(),
            );
            decode::<Write3Res>(NFSPROC3_WRITE, rpc.submit(call).await?)?.into_result()
        })
        .await
    }

    async fn create(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        how: Createhow3,
    ) -> NfsResult<Create3ResOk> {
        self.writable()?;
        let args = Create3Args { where_: dirop(dir, name)?, how };
        self.call::<_, Create3Res>(cred, NFSPROC3_CREATE, &args, 0).await
    }

    async fn mkdir(&self, cred: &Cred, dir: &NfsFh3, name: &[u8], attrs: Sattr3) -> NfsResult<Mkdir3ResOk> {
        self.writable()?;
        let args = Mkdir3Args { where_: dirop(dir, name)?, attributes: attrs };
        self.call::<_, Mkdir3Res>(cred, NFSPROC3_MKDIR, &args, 0).await
    }

    async fn symlink(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        target: &[u8],
        attrs: Sattr3,
    ) -> NfsResult<Symlink3ResOk> {
        self.writable()?;
        let symlink_data =
            Opaque::new(Bytes::copy_from_slice(target)).map_err(|_| NfsError::Nfs(Nfsstat3::Nametoolong))?;
        let args = Symlink3Args {
            where_: dirop(dir, name)?,
            symlink: Symlinkdata3 { symlink_attributes: attrs, symlink_data },
        };
        self.call::<_, Symlink3Res>(cred, NFSPROC3_SYMLINK, &args, 0).await
    }

    async fn mknod(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        what: Mknoddata3,
    ) -> NfsResult<Mknod3ResOk> {
        self.writable()?;
        let args = Mknod3Args { where_: dirop(dir, name)?, what };
        self.call::<_, Mknod3Res>(cred, NFSPROC3_MKNOD, &args, 0).await
    }

    async fn remove(&self, cred: &Cred, dir: &NfsFh3, name: &[u8]) -> NfsResult<WccData> {
        self.writable()?;
        let args = Remove3Args { object: dirop(dir, name)? };
        Ok(self.call::<_, Remove3Res>(cred, NFSPROC3_REMOVE, &args, 0).await?.dir_wcc)
    }

    async fn rmdir(&self, cred: &Cred, dir: &NfsFh3, name: &[u8]) -> NfsResult<WccData> {
        self.writable()?;
        let args = Rmdir3Args { object: dirop(dir, name)? };
        Ok(self.call::<_, Rmdir3Res>(cred, NFSPROC3_RMDIR, &args, 0).await?.dir_wcc)
    }

    async fn rename(
        &self,
        cred: &Cred,
        from_dir: &NfsFh3,
        from_name: &[u8],
        to_dir: &NfsFh3,
        to_name: &[u8],
    ) -> NfsResult<Rename3ResOk> {
        self.writable()?;
        let args = Rename3Args { from: dirop(from_dir, from_name)?, to: dirop(to_dir, to_name)? };
        self.call::<_, Rename3Res>(cred, NFSPROC3_RENAME, &args, 0).await
    }

    async fn link(&self, cred: &Cred, fh: &NfsFh3, dir: &NfsFh3, name: &[u8]) -> NfsResult<Link3ResOk> {
        self.writable()?;
        let args = Link3Args { file: fh.clone(), link: dirop(dir, name)? };
        self.call::<_, Link3Res>(cred, NFSPROC3_LINK, &args, 0).await
    }

    async fn readdir(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        cookie: u64,
        verf: Cookieverf3,
        count: u32,
    ) -> NfsResult<Readdir3ResOk> {
        let args = Readdir3Args { dir: dir.clone(), cookie, cookieverf: verf, count };
        self.call::<_, Readdir3Res>(cred, NFSPROC3_READDIR, &args, 0).await
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
        let args = Readdirplus3Args { dir: dir.clone(), cookie, cookieverf: verf, dircount, maxcount };
        self.call::<_, Readdirplus3Res>(cred, NFSPROC3_READDIRPLUS, &args, 0).await
    }

    async fn fsstat(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Fsstat3ResOk> {
        let args = Fsstat3Args { fsroot: fh.clone() };
        self.call::<_, Fsstat3Res>(cred, NFSPROC3_FSSTAT, &args, 0).await
    }

    async fn fsinfo(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Fsinfo3ResOk> {
        let args = Fsinfo3Args { fsroot: fh.clone() };
        self.call::<_, Fsinfo3Res>(cred, NFSPROC3_FSINFO, &args, 0).await
    }

    async fn pathconf(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Pathconf3ResOk> {
        let args = Pathconf3Args { object: fh.clone() };
        self.call::<_, Pathconf3Res>(cred, NFSPROC3_PATHCONF, &args, 0).await
    }

    async fn commit(&self, cred: &Cred, fh: &NfsFh3, offset: u64, count: u32) -> NfsResult<Commit3ResOk> {
        let args = Commit3Args { file: fh.clone(), offset, count };
        self.call::<_, Commit3Res>(cred, NFSPROC3_COMMIT, &args, 0).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_sizes() {
        let max = TRANSFER_SIZE_MAX;
        assert_eq!(transfer_size(1 << 20, None, max), 1 << 20);
        assert_eq!(transfer_size(1 << 20, Some(65536), max), 65536);
        assert_eq!(transfer_size(32768, Some(65536), max), 32768);
        assert_eq!(transfer_size(100_000, None, max), 98304, "whole pages");
        assert_eq!(transfer_size(0, Some(8192), max), 8192, "server says nothing: the option");
        assert_eq!(transfer_size(1000, None, max), 1000);
        assert_eq!(transfer_size(1 << 20, Some(1 << 20), 32 * 1024), 32 * 1024, "UDP caps at 32 KiB");
    }

    /// An in-process server with one in-memory export, `/export`, on an
    /// ephemeral loopback port; stops when the token is cancelled.
    async fn memory_server() -> (SocketAddr, tokio_util::sync::CancellationToken) {
        use eagernfs_server::{exports, ExportSpec, Server, ServerConfig};
        use eagernfs_vfs::memory::{MemoryBackend, MemoryConfig};
        let (mut parsed, _) = exports::parse("/export 127.0.0.0/8(rw,insecure,no_root_squash)").unwrap();
        let spec = ExportSpec {
            id: 1,
            mount_paths: vec!["/export".into()],
            access: parsed.entries.remove(0),
            backend: Arc::new(MemoryBackend::new(MemoryConfig::default())),
        };
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server = Server::bind(ServerConfig::default(), vec![spec], &[listen]).await.unwrap();
        let addr = server.local_addrs()[0];
        let token = tokio_util::sync::CancellationToken::new();
        tokio::spawn(server.run(token.clone()));
        (addr, token)
    }

    /// Successful connects over all of a client's connections.
    fn connects(c: &NfsClient) -> u64 {
        c.rpc().connection_stats().iter().map(|s| s.connects.load(std::sync::atomic::Ordering::Relaxed)).sum()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rooted_client_shares_the_connection() {
        // Fail instead of hanging (generous: debug build, busy machine).
        let wait = std::time::Duration::from_secs(60);
        tokio::time::timeout(wait, rooted_client_shares_the_connection_body()).await.expect("test timed out");
    }

    async fn rooted_client_shares_the_connection_body() {
        let (addr, stop) = memory_server().await;
        let url = format!("nfs://127.0.0.1:{}/export/sub?nconnect=2", addr.port());
        let cred = Cred::root();
        // The path does not exist yet: connect mounts /export and keeps /sub.
        let c = NfsClient::connect(&url).await.unwrap();
        assert_eq!((c.export(), c.path_inside()), ("/export", "/sub"));
        let sub = c.mkdir(&cred, &c.root(), b"sub", Sattr3::default()).await.unwrap().obj.unwrap();
        let (found, _) = c.lookup_path(&cred, c.path_inside()).await.unwrap();
        assert_eq!(found, sub);
        let before = connects(&c);
        assert!(before >= 1, "the calls above connected");

        let r = c.rooted_at(sub.clone()).await.unwrap();
        assert!(r.shares_connections_with(&c) && c.shares_connections_with(&r));
        assert_eq!(r.root(), sub);
        assert_eq!((r.export(), r.path_inside()), ("/export", "/"));
        assert_eq!((r.rsize(), r.wsize()), (c.rsize(), c.wsize()));
        // Work through the rooted client lands in the directory, and opens
        // no connection of its own.
        let f = r
            .create(&cred, &r.root(), b"f", Createhow3::Unchecked(Sattr3::default()))
            .await
            .unwrap()
            .obj
            .unwrap();
        r.write(&cred, &f, 0, Bytes::from_static(b"hello"), StableHow::FileSync).await.unwrap();
        let (via_parent, attrs) = c.lookup_path(&cred, "/sub/f").await.unwrap();
        assert_eq!((via_parent, attrs.size), (f.clone(), 5));
        // Both nconnect connections in use, through both clients: each
        // connected once.
        for _ in 0..4 {
            r.getattr(&cred, &f).await.unwrap();
            c.getattr(&cred, &f).await.unwrap();
        }
        assert_eq!(connects(&r), connects(&c));
        assert!(connects(&c) <= 2, "nconnect=2 but {} connects", connects(&c));

        // A separately connected client does not share.
        let other = NfsClient::connect(&url).await.unwrap();
        assert!(!other.shares_connections_with(&c));
        // A rooted client keeps the connections alive after its parent is dropped.
        drop(c);
        assert_eq!(r.read(&cred, &f, 0, 5).await.unwrap().data, Bytes::from_static(b"hello"));
        r.unmount().await.unwrap();
        stop.cancel();
    }
}
