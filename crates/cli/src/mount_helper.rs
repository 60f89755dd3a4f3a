//! `mount.fuse.eagernfs` and `umount.fuse.eagernfs`: what mount(8) and umount(8) run for a
//! file system of type `fuse.eagernfs`, so /etc/fstab lines, `mount -t fuse.eagernfs` and the
//! .mount units systemd makes from fstab work like any other file system's.
//!
//! The `eagernfs` binary acts as a helper when it is called by one of these names (installed as
//! symlinks in /sbin, where libmount looks), with exactly the calling convention of mount(8)'s
//! "EXTERNAL HELPERS":
//!
//! ```text
//! mount.fuse.eagernfs SOURCE DIR [-sfnv] [-N NAMESPACE] [-o OPTIONS] [-t TYPE]
//! umount.fuse.eagernfs DIR [-nlfvr] [-N NAMESPACE] [-t TYPE]
//! ```
//!
//! The mount goes through the same code as `eagernfs mount` (it returns once the mount answers;
//! a daemon serves it). The unmount is `eagernfs umount`: it returns once the daemon has
//! written back and exited, so `systemctl stop`, shutdown and `umount -a` never cut off the last
//! writes by taking the network down under them.
//!
//! Options that belong to mount(8) or systemd rather than to the file system (`_netdev`,
//! `nofail`, `x-systemd.*`, `comment=`, `user`, …) are dropped here
//! ([`without_system_options`]), as every mount helper must; `eagernfs mount -o` drops them too,
//! so one option string serves fstab, the systemd template and the command line. What is known
//! about options lives in `mount_options`, below this helper and `mount`; the helper calls
//! `mount` (mount, remount, unmount), never the reverse.

use std::ffi::OsStr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use crate::mount_options::{is_known, without_system_options};

/// mount(8)'s exit status for "incorrect invocation or permissions".
const EXIT_USAGE: u8 = 1;
/// mount(8)'s exit status for "mount failure" (umount(8) uses it too).
const EXIT_MOUNT_FAILURE: u8 = 32;

/// Which helper the binary was called as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Helper {
    Mount,
    Umount,
}

impl Helper {
    /// The helper `argv[0]` names (`/sbin/mount.fuse.eagernfs`, …), if any. `mount.eagernfs`
    /// is what mount(8) looks for given `-t eagernfs`.
    pub(crate) fn for_program(argv0: &OsStr) -> Option<Helper> {
        match Path::new(argv0).file_name()?.to_str()? {
            "mount.fuse.eagernfs" | "mount.eagernfs" => Some(Helper::Mount),
            "umount.fuse.eagernfs" | "umount.eagernfs" => Some(Helper::Umount),
            _ => None,
        }
    }

    /// Parse the arguments and do the job; the exit status is mount(8)'s convention.
    pub(crate) fn run(self) -> ExitCode {
        let result = match self {
            Helper::Mount => MountHelperArgs::try_parse().map(MountHelperArgs::run),
            Helper::Umount => UmountHelperArgs::try_parse().map(UmountHelperArgs::run),
        };
        let name = match self {
            Helper::Mount => "mount.fuse.eagernfs",
            Helper::Umount => "umount.fuse.eagernfs",
        };
        match result {
            Err(usage) => {
                let _ = usage.print();
                match usage.kind() {
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                        ExitCode::SUCCESS
                    }
                    _ => ExitCode::from(EXIT_USAGE),
                }
            }
            Ok(Ok(())) => ExitCode::SUCCESS,
            Ok(Err(e)) => {
                eprintln!("{name}: {e:#}");
                ExitCode::from(EXIT_MOUNT_FAILURE)
            }
        }
    }
}

/// mount(8)'s helper: mount SOURCE (an nfs:// URL) on DIR.
#[derive(Parser, Debug)]
#[command(
    name = "mount.fuse.eagernfs",
    version = env!("EAGERNFS_VERSION"),
    about = "Mount an NFS export with eagernfs; run by mount(8) for file systems of type fuse.eagernfs",
    after_help = "An /etc/fstab line:\n\n  \
        nfs://server/export  /mnt/share  fuse.eagernfs  _netdev,nofail,allow_other,x-systemd.automount  0 0\n\n\
        Give _netdev: systemd does not know fuse.eagernfs is a network file system, and without it \
        mounts it before the network is up. Options of mount(8) and systemd (_netdev, nofail, auto, \
        noauto, user, users, owner, group, defaults, comment=, x-*, X-*) are accepted and left to \
        them; the rest are those of eagernfs-mount(1). Run by root, the mount gets suid and dev \
        (which mount(8) does not pass on) unless nosuid or nodev is given, as mount.fuse does. \
        `mount -o remount,ro|rw|[no]suid|[no]dev|[no]exec|[no]atime DIR` changes those flags of \
        a mounted file system; other options stay as mounted."
)]
pub(crate) struct MountHelperArgs {
    /// The export: nfs://host[:port]/export[/path][?options].
    source: String,
    /// The directory to mount on.
    mountpoint: PathBuf,
    /// Mount options, comma separated: eagernfs-mount(1)'s, and mount(8)'s own, which are ignored.
    #[arg(short = 'o', value_name = "OPTIONS")]
    options: Vec<String>,
    /// Sloppy: ignore options this file system does not know, instead of failing.
    #[arg(short = 's')]
    sloppy: bool,
    /// Fake: check the source and the options, but do not mount.
    #[arg(short = 'f')]
    fake: bool,
    /// Do not write /etc/mtab (nothing here ever does).
    #[arg(short = 'n')]
    no_mtab: bool,
    /// Say what is being mounted, and which options were left to mount(8).
    #[arg(short = 'v')]
    verbose: bool,
    /// Mount in this mount namespace (a /proc/PID/ns/mnt or /proc/PID/fd/N path, or a PID).
    #[arg(short = 'N', value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// The file system type mount(8) was given (fuse.eagernfs); informational.
    #[arg(short = 't', value_name = "TYPE")]
    fstype: Option<String>,
}

impl MountHelperArgs {
    fn run(self) -> anyhow::Result<()> {
        let given = self.options.join(",");
        let (mut kept, mut left) = without_system_options(&given);
        if kept.iter().any(|o| o == "remount") {
            if let Some(ns) = &self.namespace {
                enter_mount_namespace(ns)?;
            }
            if self.fake {
                return Ok(());
            }
            return crate::mount::remount(&self.mountpoint, &kept, self.verbose);
        }
        // mount(8) leaves `suid` and `dev` out of what it passes a helper (they are the
        // kernel's defaults, not flags to set) and passes `nosuid`/`nodev` when asked for:
        // as libfuse's mount.fuse does, a mount made by root gets them back unless refused.
        // (A user's mount is always nosuid,nodev: mount(8) adds both for `user`.)
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            for (on, off) in [("suid", "nosuid"), ("dev", "nodev")] {
                if !kept.iter().any(|o| o == off || o == on) {
                    kept.insert(0, on.to_string());
                }
            }
        }
        if self.sloppy {
            let (known, unknown): (Vec<String>, Vec<String>) = kept.into_iter().partition(|o| is_known(o));
            kept = known;
            for o in &unknown {
                eprintln!("mount.fuse.eagernfs: ignoring unknown option '{o}' (-s)");
            }
            left.extend(unknown);
        }
        // mount(8) and `mount -a` recognise a mounted fstab entry by its source: show the
        // source exactly as fstab has it (query included), as mount.fuse3 does.
        if !kept.iter().any(|o| o.starts_with("fsname=")) {
            kept.push(format!("fsname={}", self.source));
        }
        let options = kept.join(",");
        let spec = eagernfs_fuse::MountSpec::parse(&self.source, &self.mountpoint, Some(&options))?;
        if self.verbose {
            eprintln!(
                "mount.fuse.eagernfs: mounting {} on {} with -o {options}{}",
                self.source,
                self.mountpoint.display(),
                if left.is_empty() {
                    String::new()
                } else {
                    format!(" (left to mount(8): {})", left.join(","))
                }
            );
        }
        if self.fake {
            return Ok(());
        }
        if let Some(ns) = &self.namespace {
            enter_mount_namespace(ns)?;
        }
        crate::mount::mount(&spec, false)
    }
}

/// umount(8)'s helper: unmount DIR and wait for its daemon to finish writing back.
#[derive(Parser, Debug)]
#[command(
    name = "umount.fuse.eagernfs",
    version = env!("EAGERNFS_VERSION"),
    about = "Unmount an eagernfs mount and wait until its daemon has written everything back; \
             run by umount(8) for file systems of type fuse.eagernfs"
)]
pub(crate) struct UmountHelperArgs {
    /// The mount point.
    mountpoint: PathBuf,
    /// Lazy: detach now, finish when the last user is gone (does not wait for the daemon).
    #[arg(short = 'l')]
    lazy: bool,
    /// Force: as a plain unmount (FUSE has no forced unmount; the daemon gives up on an
    /// unreachable server by its own timeouts, `soft` or `hard`).
    #[arg(short = 'f')]
    force: bool,
    /// Do not write /etc/mtab (nothing here ever does).
    #[arg(short = 'n')]
    no_mtab: bool,
    /// Say what is being unmounted.
    #[arg(short = 'v')]
    verbose: bool,
    /// On failure remount read-only: not possible for FUSE; accepted so umount -r works.
    #[arg(short = 'r')]
    read_only: bool,
    /// Unmount in this mount namespace (a /proc/PID/ns/mnt or /proc/PID/fd/N path, or a PID).
    #[arg(short = 'N', value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// The file system type umount(8) found (fuse.eagernfs); informational.
    #[arg(short = 't', value_name = "TYPE")]
    fstype: Option<String>,
}

impl UmountHelperArgs {
    fn run(self) -> anyhow::Result<()> {
        if let Some(ns) = &self.namespace {
            enter_mount_namespace(ns)?;
        }
        if self.verbose {
            eprintln!("umount.fuse.eagernfs: unmounting {}", self.mountpoint.display());
        }
        crate::mount::umount(&self.mountpoint, self.lazy)
    }
}

/// Join the mount namespace mount(8) was told to use (`mount -N`), before anything else runs:
/// setns(CLONE_NEWNS) needs a single-threaded process, and the mount daemon forked later
/// stays in it.
fn enter_mount_namespace(ns: &str) -> anyhow::Result<()> {
    let path = match ns.parse::<u32>() {
        Ok(pid) => PathBuf::from(format!("/proc/{pid}/ns/mnt")),
        Err(_) => PathBuf::from(ns),
    };
    let file = std::fs::File::open(&path).with_context(|| format!("mount namespace {}", path.display()))?;
    // SAFETY: setns on a descriptor we own; this process has one thread (nothing has started
    // a runtime yet).
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNS) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("entering mount namespace {}", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_names() {
        assert_eq!(Helper::for_program(OsStr::new("/sbin/mount.fuse.eagernfs")), Some(Helper::Mount));
        assert_eq!(Helper::for_program(OsStr::new("mount.eagernfs")), Some(Helper::Mount));
        assert_eq!(Helper::for_program(OsStr::new("/usr/sbin/umount.fuse.eagernfs")), Some(Helper::Umount));
        assert_eq!(Helper::for_program(OsStr::new("/usr/local/bin/eagernfs")), None);
        assert_eq!(Helper::for_program(OsStr::new("mount.fuse")), None);
    }
}
