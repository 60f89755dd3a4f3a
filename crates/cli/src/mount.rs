//! `eagernfs mount` and `eagernfs umount`.
//!
//! `mount` behaves like mount(8): it returns once the file system is
//! usable, exit status 0, or prints why it is not and exits 1. The file
//! system is then served by a daemon process. `-f` keeps it in the
//! foreground instead (logs on stderr; Ctrl-C or SIGTERM unmounts; under a
//! systemd `Type=notify` unit it says `READY=1` once the mount answers).
//!
//! Daemon mode forks *before* anything starts a thread (the runtime, the
//! connections), so the child is a clean copy; the child does the whole
//! mount and tells the parent the outcome through a pipe, and the parent
//! exits with it.
//!
//! `umount` returns once the process serving the mount has exited, as
//! umount(8) of a kernel NFS mount returns once dirty data is written:
//! the server holds an `flock` on a file named after the mount point
//! ([`daemon_lock_path`]) for as long as it lives, and `umount` takes that
//! lock after fusermount has detached the file system. A script that
//! unmounts and then stops the NFS server therefore never cuts off the
//! daemon's last writes, REMOVEs or disk-cache stores.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context};
use clap::Args;
use eagernfs_fuse::{unmount, Mount, MountSpec};

use crate::mount_options::{remount_option, without_system_options, RemountOption};

#[derive(Args, Debug)]
pub(crate) struct MountArgs {
    /// The export: nfs://host[:port]/export[/path][?options]
    url: String,
    /// An existing empty directory to mount on.
    mountpoint: PathBuf,
    /// Options, comma separated (repeatable). NFS (nfs(5) names): ro, rw, rsize=, wsize=,
    /// acregmin=, acregmax=, acdirmin=, acdirmax=, actimeo=, ac, noac, cto, nocto,
    /// lookupcache=all|pos|none, hard, soft, timeo=, retrans=, nconnect=, proto=tcp|udp,
    /// vers=3, port=/nfsport=, mountport=, resvport, noresvport, srcaddr=, uid=, gid=.
    /// Caching: cache=DIR (a disk cache), cachesize=, dirtymax=, eager, noeager. FUSE:
    /// allow_other, allow_root, nodefault_permissions, auto_unmount, fsname=, subtype=, suid,
    /// dev, noexec, noatime, threads=N. Statistics: metrics=ADDR (Prometheus). Those of
    /// mount(8) and systemd (_netdev, nofail, auto, noauto, user, users, defaults, comment=,
    /// x-*) are accepted and ignored, so an fstab option string works here too.
    #[arg(short = 'o', value_name = "OPTIONS")]
    options: Vec<String>,
    /// Stay in the foreground (serve from this process; logs to stderr; under systemd,
    /// Type=notify: READY=1 once the mount answers).
    #[arg(short = 'f', long)]
    foreground: bool,
}

#[derive(Args, Debug)]
pub(crate) struct UmountArgs {
    /// The mount point.
    mountpoint: PathBuf,
    /// Lazy: detach now, finish when the last user is gone.
    #[arg(short = 'z', long)]
    lazy: bool,
}

#[derive(Args, Debug)]
pub(crate) struct SyncArgs {
    /// The mount point.
    mountpoint: PathBuf,
}

/// `eagernfs sync MOUNTPOINT`: the daemon writes back and commits
/// everything it holds, and answers once it is on the server's stable
/// storage. sync(1) and syncfs(2) do not reach a FUSE daemon; this does.
pub(crate) fn run_sync(args: SyncArgs) -> anyhow::Result<()> {
    let mountpoint = &args.mountpoint;
    let path = daemon_socket_path(mountpoint).context("no control socket path for this mount point")?;
    let answer = crate::observe::control::request_waiting(&path, "sync", DAEMON_EXIT_WAIT)
        .with_context(|| format!("asking the daemon serving {} to write back", mountpoint.display()))?;
    if answer["ok"] != serde_json::Value::Bool(true) {
        anyhow::bail!("writing back what {} holds failed: {}", mountpoint.display(), answer["error"]);
    }
    Ok(())
}

/// How long `umount` waits for the daemon to finish its last writes
/// before it returns anyway (saying so). Write-back of what close(2)
/// left is bounded by the mount's own timeouts; this only keeps a wedged
/// daemon from hanging the caller for ever.
const DAEMON_EXIT_WAIT: Duration = Duration::from_secs(120);

pub(crate) fn run_umount(args: UmountArgs) -> anyhow::Result<()> {
    umount(&args.mountpoint, args.lazy)
}

/// Unmount and, unless `lazy`, wait for the daemon serving the mount to
/// exit (`eagernfs umount`, and umount(8)'s helper).
pub(crate) fn umount(mountpoint: &Path, lazy: bool) -> anyhow::Result<()> {
    // Opened before the unmount: the daemon exits soon after it.
    let lock = daemon_lock_path(mountpoint).and_then(|p| File::open(p).ok());
    unmount(mountpoint, lazy)?;
    // A lazy unmount detaches now and finishes when the last user is gone:
    // nothing to wait for yet.
    if let (Some(lock), false) = (lock, lazy) {
        if !wait_for_lock(lock, DAEMON_EXIT_WAIT) {
            eprintln!(
                "eagernfs umount: unmounted, but the daemon serving {} is still writing back after {} s",
                mountpoint.display(),
                DAEMON_EXIT_WAIT.as_secs()
            );
        }
    }
    Ok(())
}

/// The file the process serving `mountpoint` keeps locked while it runs:
/// in `/run/eagernfs` for root, `$XDG_RUNTIME_DIR/eagernfs` (or
/// `/tmp/eagernfs-UID`) otherwise, named by a hash of the mount point's
/// canonical path. The parent is canonicalized, not the mount point: a
/// dead FUSE mount cannot be stat'ed. `None` if the path cannot be formed.
pub(crate) fn daemon_lock_path(mountpoint: &Path) -> Option<PathBuf> {
    let name = mountpoint.file_name()?;
    let parent = match mountpoint.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.canonicalize().ok()?,
        _ => std::env::current_dir().ok()?,
    };
    let canonical = parent.join(name);
    // FNV-1a: stable across releases, so an old daemon's lock is found.
    let hash = canonical
        .as_os_str()
        .as_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3));
    Some(runtime_dir().join(format!("mount-{hash:016x}.lock")))
}

fn runtime_dir() -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        return PathBuf::from("/run/eagernfs");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("eagernfs"),
        _ => std::env::temp_dir().join(format!("eagernfs-{uid}")),
    }
}

/// The control socket of the daemon serving `mountpoint` (`eagernfs stat
/// MOUNTPOINT`): next to its lock file.
pub(crate) fn daemon_socket_path(mountpoint: &Path) -> Option<PathBuf> {
    daemon_lock_path(mountpoint).map(|p| p.with_extension("sock"))
}

/// Start what lets people watch the mount: its control socket (statistics
/// for `eagernfs stat MOUNTPOINT`) and, with `-o metrics=ADDR`, Prometheus
/// `/metrics`. Failing costs only the statistics, so it is logged, not fatal.
fn observe(mount: &Mount, spec: &MountSpec) -> Option<crate::observe::control::SocketGuard> {
    let observer = std::sync::Arc::new(crate::observe::mount::MountObserver {
        cache: mount.cache().clone(),
        source: spec.source(),
        mountpoint: mount.mountpoint().display().to_string(),
        runtime: mount.runtime().handle().clone(),
    });
    let _rt = mount.runtime().enter();
    if let Some(addr) = &spec.fuse.metrics {
        let started = crate::observe::http::parse_addr(addr)
            .and_then(|a| mount.runtime().block_on(crate::observe::http::serve(a, observer.clone())));
        match started {
            Ok(bound) => tracing::info!("mount statistics on http://{bound}/metrics"),
            Err(e) => tracing::warn!("{e:#}"),
        }
    }
    let path = daemon_socket_path(mount.mountpoint())?;
    match crate::observe::control::serve(&path, observer) {
        Ok(guard) => Some(guard),
        Err(e) => {
            tracing::warn!("no statistics socket for this mount: {e:#}");
            None
        }
    }
}

/// Create and lock the daemon's lock file for `mountpoint`; the lock
/// lasts as long as the returned file is open (the process's life).
/// Failing only costs `umount` its wait, so it is logged, not fatal.
fn hold_daemon_lock(mountpoint: &Path) -> Option<File> {
    let path = daemon_lock_path(mountpoint)?;
    let dir = path.parent()?;
    let made = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    let file = made.and_then(|()| {
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(&path)
    });
    match file {
        // SAFETY: flock on a descriptor we own.
        Ok(f) if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 => Some(f),
        Ok(_) => {
            tracing::warn!(
                "{} is locked by another process; umount will not wait for this one",
                path.display()
            );
            None
        }
        Err(e) => {
            tracing::warn!("cannot create {}: {e}; umount will not wait for this daemon", path.display());
            None
        }
    }
}

/// Wait until nobody holds `lock` (the daemon exited), at most `timeout`.
fn wait_for_lock(lock: File, timeout: Duration) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    // flock has no timeout: block in a thread, and stop caring about it
    // (the process exits) if it takes too long.
    std::thread::spawn(move || {
        // SAFETY: flock on a descriptor this thread owns.
        let r = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
        let _ = tx.send(r);
    });
    matches!(rx.recv_timeout(timeout), Ok(0))
}

pub(crate) fn run_mount(args: MountArgs) -> anyhow::Result<()> {
    // fstab's and systemd's options (_netdev, nofail, x-systemd.*…) are theirs: accepted here
    // too, so one option string works in fstab, the systemd template and on the command line.
    let (options, _) = without_system_options(&args.options.join(","));
    if options.iter().any(|o| o == "remount") {
        return remount(&args.mountpoint, &options, false);
    }
    let spec = MountSpec::parse(&args.url, &args.mountpoint, Some(&options.join(",")))?;
    mount(&spec, args.foreground)
}

/// `mount -o remount,OPTIONS MOUNTPOINT` of an eagernfs mount: change the
/// per-mount flags (ro/rw, nosuid/suid, nodev/dev, noexec/exec, atime
/// variants) with mount(2)'s MS_REMOUNT, keeping the others as they are,
/// and tell the mount daemon about ro/rw (a mount made `ro` refuses
/// changes itself; remounted `ro`, it first writes back what it holds).
/// Options that cannot change without a new mount (the NFS ones, FUSE's
/// own, and those the kernel shows for the mount, which mount(8) passes on
/// for a mount not in fstab) are accepted when mount(8) repeats them, and
/// ignored; an option nobody knows is an error. `verbose`: say what is done.
pub(crate) fn remount(mountpoint: &Path, options: &[String], verbose: bool) -> anyhow::Result<()> {
    let path = std::ffi::CString::new(mountpoint.as_os_str().as_bytes())?;
    // SAFETY: statvfs fills the zeroed struct; the path is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("{}", mountpoint.display()));
    }
    let mut flags: libc::c_ulong = libc::MS_REMOUNT;
    for (st_flag, ms_flag) in [
        (libc::ST_RDONLY, libc::MS_RDONLY),
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    let mut ignored = Vec::new();
    for o in options.iter().filter(|o| o.as_str() != "remount") {
        match remount_option(o) {
            RemountOption::Flag { flag, set: true } => flags |= flag,
            RemountOption::Flag { flag, set: false } => flags &= !flag,
            RemountOption::AsMounted => ignored.push(o.as_str()),
            RemountOption::Unknown => anyhow::bail!("unknown mount option '{o}'"),
        }
    }
    if verbose && !ignored.is_empty() {
        eprintln!("remount: kept as mounted (a remount cannot change them): {}", ignored.join(","));
    }
    let read_only = flags & libc::MS_RDONLY != 0;
    let socket = daemon_socket_path(mountpoint);
    let tell_daemon = |ro: bool| -> anyhow::Result<()> {
        let command = if ro { "remount-ro" } else { "remount-rw" };
        let path = socket.as_ref().context("no control socket path for this mount point")?;
        let answer = crate::observe::control::request(path, command)
            .with_context(|| format!("telling the daemon serving {} ({command})", mountpoint.display()))?;
        if answer["ok"] != serde_json::Value::Bool(true) {
            anyhow::bail!(
                "the daemon serving {} refused {command}: {}",
                mountpoint.display(),
                answer["error"]
            );
        }
        Ok(())
    };
    // Writable: the daemon first, so writes the kernel lets through are taken.
    if !read_only {
        tell_daemon(false)?;
    }
    // SAFETY: a remount of an existing mount point: no source, type or data.
    let r =
        unsafe { libc::mount(std::ptr::null(), path.as_ptr(), std::ptr::null(), flags, std::ptr::null()) };
    if r != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("remounting {}", mountpoint.display()));
    }
    // Read-only: the kernel now refuses new writes (and refused the remount
    // while files were open for writing); the daemon writes back the rest.
    if read_only {
        tell_daemon(true)?;
    }
    Ok(())
}

/// Mount `spec`: in this process until unmounted (`foreground`), or in a
/// daemon, returning once the mount answers (`eagernfs mount`, and
/// mount(8)'s helper).
pub(crate) fn mount(spec: &MountSpec, foreground: bool) -> anyhow::Result<()> {
    if foreground {
        let mount = Mount::start(spec)?;
        let _lock = hold_daemon_lock(mount.mountpoint());
        let _stats = observe(&mount, spec);
        tracing::info!("mounted {} on {}", spec.source(), spec.mountpoint.display());
        // A Type=notify unit (dist/systemd/eagernfs-mount@.service) is started once the mount
        // answers, so units ordered after it find files there.
        crate::sd_notify::notify_or_log(&format!(
            "READY=1\nSTATUS=serving {} on {}",
            spec.source(),
            spec.mountpoint.display()
        ));
        return serve(mount);
    }
    daemonize_and_mount(spec)
}

/// Serve until unmounted; SIGINT/SIGTERM unmount (which fails, and is
/// reported, while files on the mount are in use).
fn serve(mount: Mount) -> anyhow::Result<()> {
    let mountpoint = mount.mountpoint().to_path_buf();
    mount.runtime().spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
        else {
            tracing::warn!("cannot handle signals; unmount with `eagernfs umount`");
            return;
        };
        loop {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            let mp = mountpoint.clone();
            match tokio::task::spawn_blocking(move || unmount(&mp, false)).await {
                Ok(Ok(())) => return,
                Ok(Err(e)) => tracing::warn!("{e}; still serving"),
                Err(e) => tracing::warn!("unmount task failed: {e}"),
            }
        }
    });
    mount.run().context("serving the FUSE mount")
}

/// What the daemon tells the waiting parent: one line, `OK` or the error.
const READY: &[u8] = b"OK\n";

fn daemonize_and_mount(spec: &MountSpec) -> anyhow::Result<()> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors it is given room for.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe");
    }
    // SAFETY: both descriptors were just created and are owned here only.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the process has one thread (nothing has started a runtime
    // or a connection yet), so the child is a consistent copy.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(std::io::Error::last_os_error()).context("fork"),
        0 => {
            drop(read_end);
            let code = daemon_child(spec, write_end);
            std::process::exit(code);
        }
        child => {
            drop(write_end);
            wait_for_daemon(child, read_end)
        }
    }
}

fn wait_for_daemon(child: libc::pid_t, read_end: OwnedFd) -> anyhow::Result<()> {
    let mut msg = Vec::new();
    // Returns at EOF: the child closed its end (after "OK" or an error)
    // or died.
    let _ = std::fs::File::from(read_end).read_to_end(&mut msg);
    if msg == READY {
        return Ok(());
    }
    if !msg.is_empty() {
        return Err(anyhow!("{}", String::from_utf8_lossy(&msg).trim_end()));
    }
    let mut status = 0;
    // SAFETY: `child` is our child; status is a valid out pointer.
    unsafe { libc::waitpid(child, &mut status, 0) };
    Err(anyhow!("the mount daemon exited before the mount was ready (wait status {status:#x})"))
}

fn daemon_child(spec: &MountSpec, write_end: OwnedFd) -> i32 {
    let mut pipe = std::fs::File::from(write_end);
    // A new session: the daemon is not killed with the terminal.
    // SAFETY: setsid has no preconditions.
    unsafe { libc::setsid() };
    // From here on the parent speaks for us: an error goes through the
    // pipe, and log lines would land on the terminal after it returned.
    detach_stdio();
    let mount = match Mount::start(spec) {
        Ok(m) => m,
        Err(e) => {
            let _ = pipe.write_all(format!("{e}\n").as_bytes());
            return 1;
        }
    };
    // Held until this process exits: `umount` waits for that.
    let _lock = hold_daemon_lock(mount.mountpoint());
    let _stats = observe(&mount, spec);
    // Leave the caller's directory: it may be on a file system someone
    // wants to unmount.
    let _ = std::env::set_current_dir("/");
    // If the parent is gone there is nobody to tell; the mount works,
    // so keep serving it.
    let _ = pipe.write_all(READY);
    drop(pipe);
    match serve(mount) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// Point stdin/stdout/stderr at /dev/null, as a daemon does (the
/// parent's terminal may go away). The working directory stays until the
/// mount is made, so a relative mount point still means what it said.
fn detach_stdio() {
    let devnull: OsString = "/dev/null".into();
    if let Ok(f) = std::fs::OpenOptions::new().read(true).write(true).open(devnull) {
        use std::os::fd::AsRawFd;
        for fd in 0..=2 {
            // SAFETY: dup2 onto the standard descriptors, from one we own.
            unsafe { libc::dup2(f.as_raw_fd(), fd) };
        }
    }
}
