//! From a URL and a mount point to a served FUSE mount, and back.
//!
//! [`Mount::start`] does everything that can fail — checks the mount
//! point, MOUNTs the export, sets up the cache, mounts FUSE and completes
//! the kernel's INIT handshake — and returns only when the mount is
//! usable, so a caller (the `eagernfs mount` command) can report success
//! or the reason for failure before it detaches. [`Mount::run`] then
//! serves requests until the file system is unmounted, and writes back
//! whatever is still cached before returning.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use eagernfs_client::cache::{CachedFs, FsError};
use eagernfs_client::{AnyClient, LockClient, MountOptions, NfsError, NfsUrl, OptionError, UrlError};
use eagernfs_proto::nfs3::{Ftype3, Nfsstat3};
use fuser::{Config, MountOption, Session, SessionACL, SessionUnmounter};
use tokio::runtime::Runtime;

use crate::callbacks::MountCallbacks;
use crate::fs::NfsFuse;
use crate::options::{apply_mount_options, FuseOptions};

/// What to mount where.
#[derive(Clone, Debug)]
pub struct MountSpec {
    /// The export (and path inside it), with every NFS option in
    /// `url.options`: the URL's query first, then `-o`.
    pub url: NfsUrl,
    /// Where to mount.
    pub mountpoint: PathBuf,
    /// The FUSE layer's options.
    pub fuse: FuseOptions,
}

/// Why a mount did not happen. Each message says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// The URL does not parse.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// An `-o` option is unknown or has a bad value.
    #[error(transparent)]
    Option(#[from] OptionError),
    /// The mount point is missing or not a directory.
    #[error("mount point {path}: {why}")]
    MountPoint { path: PathBuf, why: String },
    /// The server could not be reached, or refused the export.
    #[error("cannot mount {url}: {source}")]
    Server { url: String, source: NfsError },
    /// The URL's path inside the export does not exist.
    #[error("cannot mount {url}: no {path} inside export {export}")]
    NoSuchPath { url: String, export: String, path: String },
    /// The URL's path inside the export does not name a directory.
    #[error("cannot mount {url}: {path} inside export {export} is not a directory")]
    NotADirectory { url: String, export: String, path: String },
    /// The cache layer could not start (root attributes, `cache=DIR`).
    #[error("cannot mount {url}: {source}")]
    Cache { url: String, source: FsError },
    /// FUSE refused: no /dev/fuse, no fusermount3, not allowed.
    #[error("cannot mount FUSE at {}: {source}{hint}", path.display())]
    Fuse { path: PathBuf, source: io::Error, hint: &'static str },
    /// The async runtime could not start (out of threads or memory).
    #[error("cannot start the runtime: {0}")]
    Runtime(io::Error),
}

impl MountSpec {
    /// Parse the command's arguments: `url`, `mountpoint` and an optional
    /// `-o` list (NFS options and FUSE options, in any order).
    pub fn parse(url: &str, mountpoint: &Path, options: Option<&str>) -> Result<MountSpec, MountError> {
        let mut url: NfsUrl = url.parse()?;
        let mut fuse = FuseOptions::new();
        if let Some(list) = options {
            apply_mount_options(list, &mut url.options, &mut fuse)?;
        }
        Ok(MountSpec { url, mountpoint: mountpoint.to_path_buf(), fuse })
    }

    /// The URL without its query, for messages and /proc/mounts.
    pub fn source(&self) -> String {
        format!("nfs://{}{}", self.url.authority(), self.url.path)
    }

    fn fuse_config(&self) -> Config {
        let f = &self.fuse;
        // fsname goes into a comma-separated option string.
        let fsname = f.fsname.clone().unwrap_or_else(|| self.source()).replace(',', "%2C");
        let mut opts = vec![
            MountOption::FSName(fsname),
            MountOption::Subtype(f.subtype.clone().unwrap_or_else(|| "eagernfs".into())),
            if f.suid { MountOption::Suid } else { MountOption::NoSuid },
            if f.dev { MountOption::Dev } else { MountOption::NoDev },
            if self.url.options.ro { MountOption::RO } else { MountOption::RW },
        ];
        if f.noexec {
            opts.push(MountOption::NoExec);
        }
        if f.noatime {
            opts.push(MountOption::NoAtime);
        }
        if f.default_permissions {
            opts.push(MountOption::DefaultPermissions);
        }
        if f.auto_unmount {
            opts.push(MountOption::AutoUnmount);
        }
        let mut config = Config::default();
        config.mount_options = opts;
        config.acl = if f.allow_other {
            SessionACL::All
        } else if f.allow_root {
            SessionACL::RootAndOwner
        } else {
            SessionACL::Owner
        };
        config.n_threads = Some(f.reader_threads);
        // Each reader thread gets its own /dev/fuse descriptor, so they
        // do not contend on one queue.
        config.clone_fd = f.reader_threads > 1;
        config
    }
}

/// The mount point as an absolute path (a daemon leaves the caller's
/// working directory, and /proc/mounts shows absolute paths).
fn check_mountpoint(path: &Path) -> Result<PathBuf, MountError> {
    let why = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return path
                .canonicalize()
                .map_err(|e| MountError::MountPoint { path: path.into(), why: e.to_string() })
        }
        Ok(_) => "not a directory".to_string(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => "does not exist (create it with mkdir)".to_string(),
        Err(e) => e.to_string(),
    };
    Err(MountError::MountPoint { path: path.to_path_buf(), why })
}

/// Connect to the export the spec names (NFSv4.2, 4.1 or 3: see
/// `AnyClient`) and set up the cache over it. Returns the cache and the
/// client that MOUNTed (for UMNT, or the end of the session, later).
pub async fn connect(spec: &MountSpec) -> Result<(CachedFs<AnyClient>, AnyClient), MountError> {
    let url = spec.source();
    let server_err = |source| MountError::Server { url: url.clone(), source };
    let client = AnyClient::connect_url(&spec.url).await.map_err(server_err)?;
    // As a kernel mount: a server's "busy, try later" (JUKEBOX) is waited out, not an error.
    client.set_retry_jukebox(true);
    // Over NFSv4 delegations are the cache (`-o nodeleg` turns them off):
    // a file this mount holds one of is opened and read with no round trip.
    let opts = &spec.url.options;
    client.set_delegations(opts.delegations, opts.delegations_max);
    let inside = client.path_inside().to_string();
    // A URL below the export: the mount's root is that directory, served
    // by a client whose root handle is it, over the same connections (a
    // second one would cost the server a socket and the client a second
    // reconnect, and "not responding" report, whenever the server restarts).
    // UMNT still goes through `client`, which names the mounted export.
    let root_client = if inside == "/" {
        client.clone()
    } else {
        let (fh, attr) = match client.lookup_path(&client.default_cred(), &inside).await {
            Ok(found) => found,
            Err(NfsError::Nfs(Nfsstat3::Noent)) => {
                return Err(MountError::NoSuchPath { url, export: client.export().into(), path: inside })
            }
            Err(e) => return Err(server_err(e)),
        };
        if attr.ftype != Ftype3::Dir {
            return Err(MountError::NotADirectory { url, export: client.export().into(), path: inside });
        }
        client.rooted_at(fh).await.map_err(server_err)?
    };
    // In front of the kernel's page cache, a file read whole in one request
    // needs no second copy here (see `CacheConfig::drop_whole_reads`).
    let fs = CachedFs::new_adjusted(root_client, &spec.url.options, |c| c.drop_whole_reads = true)
        .await
        .map_err(|source| MountError::Cache { url, source })?;
    Ok((fs, client))
}

/// The server's lock manager, as this host and mount point (so a restart of
/// this mount frees what the last run of it held: SM_NOTIFY). `None`, with
/// a warning, when the server has none: lock calls then fail with ENOLCK, as
/// on a kernel mount of a server without lockd (`nolock` keeps them local).
async fn connect_locks(
    client: &eagernfs_client::NfsClient,
    options: &MountOptions,
    mountpoint: &Path,
) -> Option<LockClient> {
    let name = format!("{}:{}", eagernfs_client::driver::hostname(), mountpoint.display());
    match LockClient::connect(client.rpc(), client.server(), options, &name).await {
        Ok(locks) => {
            if let Err(e) = locks.announce_restart().await {
                tracing::warn!("could not tell the server's status monitor that {name} started: {e}");
            }
            // GRANTED callbacks, where this host's portmapper lets us take them.
            if let Some(local) = client.rpc().local_addr() {
                match locks.start_callbacks(local.ip(), options).await {
                    Ok(true) => tracing::info!("lock callbacks (NLM GRANTED) registered with the portmapper"),
                    Ok(false) => tracing::info!(
                        "another lock manager is registered on this host: blocked locks are polled"
                    ),
                    Err(e) => tracing::info!("no lock callbacks ({e}): blocked locks are polled"),
                }
            }
            Some(locks)
        }
        Err(e) => {
            tracing::warn!("no byte-range locks through the server ({e}); fcntl/flock will fail with ENOLCK (mount with nolock to keep them local)");
            None
        }
    }
}

/// A mounted, ready file system, not yet serving.
pub struct Mount {
    session: Session<NfsFuse<AnyClient>>,
    /// The cache the session serves, for statistics.
    cache: CachedFs<AnyClient>,
    /// Runs the request tasks; kept here so it outlives the session.
    runtime: Runtime,
    mountpoint: PathBuf,
    /// Set when this process mounted /dev/fuse itself ([`DirectMount`]):
    /// detaches the mount if the session fails or ends.
    _direct: Option<DirectMount>,
}

/// A FUSE mount root makes with mount(2) itself, as libfuse does, so the
/// kernel records its type as `fuse.SUBTYPE` (`fuse.eagernfs`). fuser's
/// own direct mount always says plain `fuse`: then umount(8) never runs
/// `umount.fuse.eagernfs` (which waits for the daemon's write-back), and
/// `findmnt -t fuse.eagernfs` finds nothing. Others go through
/// fusermount3, which already records the subtype.
struct DirectMount {
    mountpoint: std::ffi::CString,
    /// The mount's device (`MAJ:MIN` in /proc/self/mountinfo), so the
    /// guard detaches only this mount, never one that is under it
    /// (systemd's automount point) or that replaced it.
    device: Option<String>,
}

impl DirectMount {
    /// Mount `/dev/fuse` on `mountpoint` with the spec's options; `None`
    /// when this process may not (not root, `auto_unmount`, which needs
    /// fusermount3's watcher, or EPERM in a container): fuser then asks
    /// fusermount3.
    fn mount(
        spec: &MountSpec,
        mountpoint: &Path,
        config: &Config,
    ) -> io::Result<Option<(std::os::fd::OwnedFd, DirectMount)>> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || spec.fuse.auto_unmount {
            return Ok(None);
        }
        let f = &spec.fuse;
        let fd: std::os::fd::OwnedFd =
            std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse")?.into();
        let rootmode = std::fs::metadata(mountpoint)?.mode() & libc::S_IFMT;
        // SAFETY: getuid/getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let mut data = format!(
            "fd={},rootmode={rootmode:o},user_id={uid},group_id={gid}",
            std::os::fd::AsRawFd::as_raw_fd(&fd)
        );
        if f.default_permissions {
            data.push_str(",default_permissions");
        }
        // allow_root is allow_other in the kernel; the session refuses
        // everyone but root and the owner (as fuser's own mount does).
        if config.acl != SessionACL::Owner {
            data.push_str(",allow_other");
        }
        let mut flags: libc::c_ulong = 0;
        for (on, flag) in [
            (!f.suid, libc::MS_NOSUID),
            (!f.dev, libc::MS_NODEV),
            (f.noexec, libc::MS_NOEXEC),
            (f.noatime, libc::MS_NOATIME),
            (spec.url.options.ro, libc::MS_RDONLY),
        ] {
            if on {
                flags |= flag;
            }
        }
        let cstr =
            |s: &[u8]| std::ffi::CString::new(s).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e));
        let source = cstr(f.fsname.clone().unwrap_or_else(|| spec.source()).as_bytes())?;
        let fstype = cstr(format!("fuse.{}", f.subtype.as_deref().unwrap_or("eagernfs")).as_bytes())?;
        let target = cstr(mountpoint.as_os_str().as_bytes())?;
        let data = cstr(data.as_bytes())?;
        // SAFETY: every pointer is a NUL-terminated string that outlives the call.
        let r = unsafe {
            libc::mount(source.as_ptr(), target.as_ptr(), fstype.as_ptr(), flags, data.as_ptr().cast())
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EPERM) => Ok(None),
                _ => Err(e),
            };
        }
        let device = top_mount_device(mountpoint);
        Ok(Some((fd, DirectMount { mountpoint: target, device })))
    }
}

impl Drop for DirectMount {
    fn drop(&mut self) {
        // After a normal unmount there is nothing left to do; after a
        // failed handshake, or a session that ended with the mount still
        // there, this removes the dead mount.
        use std::os::unix::ffi::OsStrExt;
        let path = Path::new(std::ffi::OsStr::from_bytes(self.mountpoint.as_bytes()));
        if self.device.is_some() && top_mount_device(path) == self.device {
            // SAFETY: a NUL-terminated path we own.
            unsafe { libc::umount2(self.mountpoint.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// The device (`MAJ:MIN`) of the topmost mount on `mountpoint`, from
/// /proc/self/mountinfo (later lines are mounted later, so on top).
fn top_mount_device(mountpoint: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = mountpoint.to_str()?;
    info.lines().rev().find_map(|line| {
        let mut fields = line.split(' ');
        let device = fields.nth(2)?;
        // Field 5 is the mount point, with space, tab, newline and
        // backslash written as octal escapes.
        let point = fields.nth(1)?;
        (unescape_mountinfo(point) == want).then(|| device.to_string())
    })
}

fn unescape_mountinfo(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 4).and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(char::from(c));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

impl Mount {
    /// Connect, mount, and complete the kernel handshake. The mount is
    /// usable when this returns; requests wait until [`Mount::run`].
    pub fn start(spec: &MountSpec) -> Result<Mount, MountError> {
        let mountpoint = check_mountpoint(&spec.mountpoint)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("eagernfs-fuse")
            .build()
            .map_err(MountError::Runtime)?;
        let (fs, client) = runtime.block_on(connect(spec))?;
        let cache = fs.clone();
        let local_lock = spec.url.options.local_lock;
        // NFSv4: the server's callbacks are answered from the cache (a
        // recall writes back first), and wake blocked locks.
        let callbacks = match &client {
            AnyClient::V4(v4) => Some(MountCallbacks::install(&fs, v4)),
            AnyClient::V3(_) => None,
        };
        let fsfs = NfsFuse::new(fs, runtime.handle().clone());
        // Locks: NFSv4's own (LOCK, LOCKU, LOCKT), or NFSv3's NLM.
        let fsfs = match (&client, local_lock) {
            (_, eagernfs_client::LocalLock::All) => fsfs.with_locks(None, local_lock),
            (AnyClient::V4(v4), _) => {
                let cb = callbacks.unwrap_or_else(|| MountCallbacks::install(&cache, v4));
                fsfs.with_v4_locks(v4.clone(), cb, local_lock)
            }
            (AnyClient::V3(v3), _) => {
                let locks = runtime.block_on(connect_locks(v3, &spec.url.options, &mountpoint));
                fsfs.with_locks(locks, local_lock)
            }
        };
        let fsfs = fsfs.umnt_on_destroy(client);
        let notifier = fsfs.notifier_slot();
        let fuse_err = |source: io::Error| {
            let hint = fuse_hint(&source);
            MountError::Fuse { path: mountpoint.clone(), source, hint }
        };
        let config = spec.fuse_config();
        let (session, direct) = match DirectMount::mount(spec, &mountpoint, &config).map_err(fuse_err)? {
            Some((fd, direct)) => {
                // On failure `direct` is dropped, which detaches the mount just made.
                let session = Session::from_fd(fsfs, fd, config.acl, config).map_err(fuse_err)?;
                (session, Some(direct))
            }
            None => (Session::new(fsfs, &mountpoint, &config).map_err(fuse_err)?, None),
        };
        let _ = notifier.set(session.notifier());
        set_read_ahead(&mountpoint, spec.fuse.read_ahead_kb);
        Ok(Mount { session, cache, runtime, mountpoint, _direct: direct })
    }

    /// Something that unmounts this file system from another thread (a
    /// signal handler), which makes [`Mount::run`] return.
    pub fn unmounter(&mut self) -> SessionUnmounter {
        self.session.unmount_callable()
    }

    /// The runtime the requests run on (for signal handling).
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The caching layer the mount serves (its statistics, its client's).
    pub fn cache(&self) -> &CachedFs<AnyClient> {
        &self.cache
    }

    /// Where it is mounted (absolute).
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Serve requests until unmounted, then write back cached data.
    pub fn run(self) -> io::Result<()> {
        let Mount { session, runtime, cache, _direct, .. } = self;
        drop(cache);
        let r = session.run();
        drop(_direct);
        // Tasks still running answer requests nobody waits for any more.
        runtime.shutdown_timeout(std::time::Duration::from_secs(5));
        r
    }
}

/// Set the kernel's read-ahead for the FUSE mount at `mountpoint` (its
/// backing device's `read_ahead_kb`). After the INIT handshake, which caps
/// it at what the kernel offered (128 KiB). Only root may; anyone else
/// keeps the kernel's value, which is logged, not an error.
fn set_read_ahead(mountpoint: &Path, kib: u32) {
    let Some(device) = top_mount_device(mountpoint) else { return };
    let knob = PathBuf::from(format!("/sys/class/bdi/{device}/read_ahead_kb"));
    if let Err(e) = std::fs::write(&knob, kib.to_string()) {
        tracing::info!("read-ahead stays the kernel's: cannot write {}: {e}", knob.display());
    }
}

fn fuse_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOENT) => " (is fuse3 installed? fusermount3 and /dev/fuse are needed)",
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (allow_other needs 'user_allow_other' in /etc/fuse.conf, or run as root)"
        }
        Some(libc::ENODEV) => " (the fuse kernel module is not loaded: modprobe fuse)",
        _ => "",
    }
}

/// Why an unmount failed.
#[derive(Debug, thiserror::Error)]
pub enum UnmountError {
    /// Neither fusermount3 nor fusermount could be run.
    #[error("cannot run fusermount3: {0} (is fuse3 installed?)")]
    NoFusermount(io::Error),
    /// fusermount refused; its own message says why (busy, not mounted).
    #[error("unmounting {} failed: {message}", path.display())]
    Refused { path: PathBuf, message: String },
}

/// Unmount a FUSE mount (`fusermount3 -u`, `-z` when `lazy`). The daemon
/// serving it writes back what it still holds and exits.
pub fn unmount(mountpoint: &Path, lazy: bool) -> Result<(), UnmountError> {
    let mut last = None;
    for tool in ["fusermount3", "fusermount"] {
        let mut cmd = Command::new(tool);
        cmd.arg(if lazy { "-uz" } else { "-u" }).arg(mountpoint);
        match cmd.output() {
            Ok(out) if out.status.success() => return Ok(()),
            Ok(out) => {
                let message = String::from_utf8_lossy(&out.stderr).trim().to_string();
                return Err(UnmountError::Refused { path: mountpoint.to_path_buf(), message });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => last = Some(e),
            Err(e) => return Err(UnmountError::NoFusermount(e)),
        }
    }
    Err(UnmountError::NoFusermount(last.unwrap_or_else(|| io::Error::from(io::ErrorKind::NotFound))))
}
