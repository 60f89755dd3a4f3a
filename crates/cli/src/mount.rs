//! `eagernfs mount` and `eagernfs umount`.
//!
//! `mount` behaves like mount(8): it returns once the file system is
//! usable, exit status 0, or prints why it is not and exits 1. The file
//! system is then served by a daemon process. `-f` keeps it in the
//! foreground instead (logs on stderr; Ctrl-C or SIGTERM unmounts).
//!
//! Daemon mode forks *before* anything starts a thread (the runtime, the
//! connections), so the child is a clean copy; the child does the whole
//! mount and tells the parent the outcome through a pipe, and the parent
//! exits with it.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;

use anyhow::{anyhow, Context};
use clap::Args;
use eagernfs_fuse::{unmount, Mount, MountSpec};

#[derive(Args, Debug)]
pub(crate) struct MountArgs {
    /// The export: nfs://host[:port]/export[/path][?options]
    url: String,
    /// An existing empty directory to mount on.
    mountpoint: PathBuf,
    /// Options, comma separated (repeatable). NFS (nfs(5) names): ro, rw, rsize=, wsize=,
    /// acregmin=, acregmax=, acdirmin=, acdirmax=, actimeo=, noac, cto, nocto,
    /// lookupcache=all|pos|none, hard, soft, timeo=, retrans=, nconnect=, cache=DIR, eager,
    /// nfsport=, mountport=. FUSE: allow_other, allow_root, default_permissions,
    /// auto_unmount, fsname=, subtype=, suid, dev, noexec, noatime, threads=N.
    #[arg(short = 'o', value_name = "OPTIONS")]
    options: Vec<String>,
    /// Stay in the foreground (serve from this process; logs to stderr).
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

pub(crate) fn run_umount(args: UmountArgs) -> anyhow::Result<()> {
    unmount(&args.mountpoint, args.lazy)?;
    Ok(())
}

pub(crate) fn run_mount(args: MountArgs) -> anyhow::Result<()> {
    let options = (!args.options.is_empty()).then(|| args.options.join(","));
    let spec = MountSpec::parse(&args.url, &args.mountpoint, options.as_deref())?;
    if args.foreground {
        let mount = Mount::start(&spec)?;
        tracing::info!("mounted {} on {}", spec.source(), spec.mountpoint.display());
        return serve(mount);
    }
    daemonize_and_mount(&spec)
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
