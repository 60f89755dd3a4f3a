//! `-o` options of a FUSE mount: the NFS ones go to [`MountOptions`], the
//! rest are FUSE's own (`allow_other`, `default_permissions`, `fsname=`…).
//!
//! The NFS parser answers [`OptionError::Unknown`] for a name it does not
//! know; only then is the name tried as a FUSE option, so an NFS option
//! can never be shadowed and a typo in either set is still an error.

use eagernfs_client::{MountOptions, OptionError};

/// Mount options that belong to the FUSE layer, not to NFS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FuseOptions {
    /// `allow_other`: let every user use the mount (each request still
    /// goes to the server with that user's uid and groups). Without it
    /// only the mounting user (and nobody else, not even root) gets in.
    pub allow_other: bool,
    /// `allow_root`: the mounting user and root.
    pub allow_root: bool,
    /// `default_permissions` (the default): the kernel checks mode bits
    /// against the cached attributes on every path component and before
    /// every operation, as a local file system does. Without it FUSE never
    /// asks anyone about search permission on a directory whose entries
    /// the kernel has cached, nor about write permission for `truncate`,
    /// nor about opening a FIFO or device node: a user denied a directory
    /// could still reach files below it through a cached path. The server
    /// still decides every call (root squashing, ACLs, its own groups) on
    /// top of this. `nodefault_permissions` leaves every decision to the
    /// server and the ACCESS cache (open and access(2) only), for exports
    /// whose server-side identity mapping (`all_squash`, `anonuid`) makes
    /// mode bits seen from here wrong, accepting those gaps.
    pub default_permissions: bool,
    /// `auto_unmount`: unmount when the daemon dies (needs `allow_other`
    /// or `allow_root`, a fusermount3 restriction).
    pub auto_unmount: bool,
    /// `fsname=`: the source shown in /proc/mounts (default: the URL
    /// without its query).
    pub fsname: Option<String>,
    /// `subtype=`: shown as `fuse.SUBTYPE` (default `eagernfs`).
    pub subtype: Option<String>,
    /// `nosuid`/`suid`: honour set-id bits (default: no, as mount(8) does
    /// for user mounts and as is safe for a network file system).
    pub suid: bool,
    /// `nodev`/`dev`: device files usable (default: no).
    pub dev: bool,
    /// `noexec`: refuse to execute binaries from the mount.
    pub noexec: bool,
    /// `noatime`: don't update access times on read.
    pub noatime: bool,
    /// `threads=N` (ours): kernel-request reader threads. Requests run on
    /// the async runtime anyway; more readers only help very busy mounts.
    pub reader_threads: usize,
    /// `metrics=ADDR` (ours): the mount daemon serves Prometheus `/metrics`
    /// and `/api/stats` there (a bare port means 127.0.0.1:PORT).
    pub metrics: Option<String>,
    /// `read_ahead_kb=N` (ours): the kernel's read-ahead for the mount, in
    /// KiB (its `/sys/class/bdi/…/read_ahead_kb`, set when mounted as root).
    /// FUSE starts every mount at 128 KiB, which keeps a sequential reader
    /// of a fast server waiting on one 128 KiB request after another.
    pub read_ahead_kb: u32,
}

/// The kernel read-ahead a mount gets unless `read_ahead_kb=` says: four
/// 1 MiB READs ahead of a sequential reader (1 GiB `dd` after dropping the
/// caches, on this project's test machine: 128 KiB 2.7–4.7 s, 1 MiB
/// 2.1–2.8 s, 4 MiB 1.6–2.3 s).
pub const READ_AHEAD_KB_DEFAULT: u32 = 4096;
/// Largest `read_ahead_kb=`.
pub const READ_AHEAD_KB_MAX: u32 = 1 << 20;

/// Request reader threads when `threads=` is not given.
pub const READER_THREADS_DEFAULT: usize = 2;
/// More reader threads than this buy nothing: each only reads a request
/// and hands it to the runtime.
pub const READER_THREADS_MAX: usize = 16;

impl FuseOptions {
    /// The defaults (`threads=2`, `default_permissions`, nosuid, nodev).
    pub fn new() -> Self {
        FuseOptions {
            reader_threads: READER_THREADS_DEFAULT,
            default_permissions: true,
            read_ahead_kb: READ_AHEAD_KB_DEFAULT,
            ..FuseOptions::default()
        }
    }

    /// Apply one FUSE option. `Err(Unknown)` if it is not one of ours.
    fn apply(&mut self, name: &str, value: Option<&str>) -> Result<(), OptionError> {
        let flag = |v: Option<&str>| match v {
            None => Ok(true),
            Some(_) => Err(OptionError::UnexpectedValue(name.to_string())),
        };
        match name {
            "allow_other" => self.allow_other = flag(value)?,
            "allow_root" => self.allow_root = flag(value)?,
            "default_permissions" => self.default_permissions = flag(value)?,
            "nodefault_permissions" => self.default_permissions = !flag(value)?,
            "auto_unmount" => self.auto_unmount = flag(value)?,
            "suid" => self.suid = flag(value)?,
            "nosuid" => self.suid = !flag(value)?,
            "dev" => self.dev = flag(value)?,
            "nodev" => self.dev = !flag(value)?,
            "exec" => self.noexec = !flag(value)?,
            "noexec" => self.noexec = flag(value)?,
            "atime" | "relatime" => self.noatime = !flag(value)?,
            "noatime" => self.noatime = flag(value)?,
            "fsname" => self.fsname = Some(need(name, value)?.to_string()),
            "subtype" => self.subtype = Some(need(name, value)?.to_string()),
            "metrics" => self.metrics = Some(need(name, value)?.to_string()),
            "read_ahead_kb" => {
                let v = need(name, value)?;
                let n: u32 = v.parse().map_err(|_| bad(name, v, "not a number"))?;
                if n > READ_AHEAD_KB_MAX {
                    return Err(bad(name, v, &format!("must be at most {READ_AHEAD_KB_MAX}")));
                }
                self.read_ahead_kb = n;
            }
            "threads" => {
                let v = need(name, value)?;
                let n: usize = v.parse().map_err(|_| bad(name, v, "not a number"))?;
                if !(1..=READER_THREADS_MAX).contains(&n) {
                    return Err(bad(name, v, &format!("must be 1..={READER_THREADS_MAX}")));
                }
                self.reader_threads = n;
            }
            // mount(8) passes these along; they mean nothing here.
            "defaults" | "_netdev" | "user" | "nouser" | "auto" | "noauto" => {}
            _ => return Err(OptionError::Unknown(name.to_string())),
        }
        Ok(())
    }
}

fn need<'a>(name: &str, value: Option<&'a str>) -> Result<&'a str, OptionError> {
    value.ok_or_else(|| OptionError::MissingValue(name.to_string()))
}

fn bad(name: &str, value: &str, why: &str) -> OptionError {
    OptionError::BadValue { name: name.to_string(), value: value.to_string(), why: why.to_string() }
}

/// Apply a `-o a,b=c` list: NFS options onto `nfs` (which already holds
/// the URL's query options, so `-o` wins as it comes later), the others
/// onto `fuse`. An option neither knows is an error naming it.
pub fn apply_mount_options(
    list: &str,
    nfs: &mut MountOptions,
    fuse: &mut FuseOptions,
) -> Result<(), OptionError> {
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, value) = match item.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (item, None),
        };
        match nfs.apply_option(name, value) {
            Err(OptionError::Unknown(_)) => fuse.apply(name, value)?,
            other => other?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nfs_and_fuse_options_are_split() {
        let mut nfs = MountOptions::default();
        let mut fuse = FuseOptions::new();
        apply_mount_options("allow_other,ro,timeo=50,fsname=srv:/x,noac,threads=4", &mut nfs, &mut fuse)
            .unwrap();
        assert!(fuse.allow_other && fuse.default_permissions);
        assert_eq!(fuse.fsname.as_deref(), Some("srv:/x"));
        assert_eq!(fuse.reader_threads, 4);
        assert!(nfs.ro);
        assert_eq!(nfs.timeo, std::time::Duration::from_secs(5));
        // noac is an NFS option; it must not have been taken as FUSE's.
        assert_eq!(nfs, {
            let mut o = MountOptions::default();
            o.apply_list("ro,timeo=50,noac", ',').unwrap();
            o
        });
    }

    #[test]
    fn unknown_and_malformed_options_are_errors() {
        let mut nfs = MountOptions::default();
        let mut fuse = FuseOptions::new();
        let e = apply_mount_options("allow_othr", &mut nfs, &mut fuse).unwrap_err();
        assert_eq!(e, OptionError::Unknown("allow_othr".into()));
        assert!(matches!(
            apply_mount_options("allow_other=1", &mut nfs, &mut fuse),
            Err(OptionError::UnexpectedValue(_))
        ));
        assert!(matches!(
            apply_mount_options("threads=0", &mut nfs, &mut fuse),
            Err(OptionError::BadValue { .. })
        ));
        // A bad value of an NFS option is reported as such, not as unknown.
        assert!(matches!(
            apply_mount_options("timeo=x", &mut nfs, &mut fuse),
            Err(OptionError::BadValue { .. })
        ));
    }

    #[test]
    fn read_ahead_is_ours_and_bounded() {
        let mut nfs = MountOptions::default();
        let mut fuse = FuseOptions::new();
        assert_eq!(fuse.read_ahead_kb, READ_AHEAD_KB_DEFAULT);
        apply_mount_options("read_ahead_kb=512", &mut nfs, &mut fuse).unwrap();
        assert_eq!(fuse.read_ahead_kb, 512);
        assert!(matches!(
            apply_mount_options("read_ahead_kb=99999999", &mut nfs, &mut fuse),
            Err(OptionError::BadValue { .. })
        ));
        assert!(matches!(
            apply_mount_options("read_ahead_kb", &mut nfs, &mut fuse),
            Err(OptionError::MissingValue(_))
        ));
    }

    #[test]
    fn later_options_win() {
        let mut nfs = MountOptions::default();
        let mut fuse = FuseOptions::new();
        apply_mount_options("suid,nosuid,noexec,exec", &mut nfs, &mut fuse).unwrap();
        assert!(!fuse.suid && !fuse.noexec);
        assert!(fuse.default_permissions, "the kernel checks mode bits unless told not to");
        apply_mount_options("nodefault_permissions", &mut nfs, &mut fuse).unwrap();
        assert!(!fuse.default_permissions);
        apply_mount_options("nodefault_permissions,default_permissions", &mut nfs, &mut fuse).unwrap();
        assert!(fuse.default_permissions);
    }
}
