//! What eagernfs knows about mount options, for `eagernfs mount -o` and mount(8)'s helper
//! alike: which belong to mount(8) or systemd ([`without_system_options`]), which are ours
//! ([`is_known`]), which the kernel shows for a FUSE mount ([`is_kernel_fuse_option`]), and what
//! a remount does with each ([`remount_option`]). Below both `mount` and `mount_helper`.

/// Split a `-o` list into what the file system gets and what belongs to mount(8) or systemd
/// (returned second, for messages). mount(8) passes some of these on to helpers (`_netdev`,
/// `nofail`, `user`, `users`, `user=NAME` for a user mount…), older versions pass `x-*` too,
/// and the systemd template hands over whatever the admin copied from fstab.
pub(crate) fn without_system_options(list: &str) -> (Vec<String>, Vec<String>) {
    list.split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(str::to_owned)
        .partition(|o| !is_system_option(o))
}

fn is_system_option(option: &str) -> bool {
    let name = option.split_once('=').map_or(option, |(n, _)| n);
    // mount(8)'s and systemd's own: comments, automount and timeout settings, who may mount.
    if name.starts_with("x-") || name.starts_with("X-") {
        return true;
    }
    matches!(
        name,
        "defaults"
            | "auto"
            | "noauto"
            | "user"
            | "nouser"
            | "users"
            | "owner"
            | "group"
            | "_netdev"
            | "nofail"
            | "comment"
            | "helper"
            | "uhelper"
            // Access-time variants mount(8) passes along: a FUSE mount keeps no atimes of its
            // own (the server does), so there is nothing for them to change.
            | "nodiratime"
            | "diratime"
            | "strictatime"
            | "nostrictatime"
            | "lazytime"
            | "nolazytime"
            // Kernel message verbosity for the file system: ours logs to its own stderr.
            | "silent"
            | "loud"
    )
}

/// Whether eagernfs's own option parser accepts `option` (for `-s`, and
/// for what a remount may repeat).
pub(crate) fn is_known(option: &str) -> bool {
    let (name, _) = option.split_once('=').unwrap_or((option, ""));
    let mut nfs = eagernfs_client::MountOptions::default();
    let mut fuse = eagernfs_fuse::FuseOptions::new();
    !matches!(
        eagernfs_fuse::apply_mount_options(option, &mut nfs, &mut fuse),
        Err(eagernfs_client::OptionError::Unknown(n)) if n == name
    )
}

/// Options the kernel shows for a FUSE mount (Linux's `fuse_show_options`: `user_id=`,
/// `group_id=`, `default_permissions`, `allow_other`, `max_read=`, `blksize=`) and the mount
/// data a FUSE mount is made with (`fd=`, `rootmode=`). mount(8) hands them back to the helper
/// on a remount of a mount that is not in fstab, taken from /proc/self/mountinfo: they describe
/// the mount as it was made, and no remount can change them.
pub(crate) fn is_kernel_fuse_option(option: &str) -> bool {
    let (name, value) = match option.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (option, None),
    };
    match value {
        Some(_) => matches!(name, "user_id" | "group_id" | "max_read" | "blksize" | "rootmode" | "fd"),
        None => matches!(name, "default_permissions" | "allow_other"),
    }
}

/// The mount flags a remount can change, by option name: (flag, set by the
/// option or cleared by it). Everything else is fixed for the mount's life.
pub(crate) const REMOUNT_FLAGS: &[(&str, libc::c_ulong, bool)] = &[
    ("ro", libc::MS_RDONLY, true),
    ("rw", libc::MS_RDONLY, false),
    ("nosuid", libc::MS_NOSUID, true),
    ("suid", libc::MS_NOSUID, false),
    ("nodev", libc::MS_NODEV, true),
    ("dev", libc::MS_NODEV, false),
    ("noexec", libc::MS_NOEXEC, true),
    ("exec", libc::MS_NOEXEC, false),
    ("noatime", libc::MS_NOATIME, true),
    ("atime", libc::MS_NOATIME, false),
    ("relatime", libc::MS_RELATIME, true),
    ("norelatime", libc::MS_RELATIME, false),
];

/// What `mount -o remount,OPTION` does with one option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RemountOption {
    /// Sets (`set`) or clears a per-mount flag of mount(2).
    Flag { flag: libc::c_ulong, set: bool },
    /// Fixed for the mount's life (an NFS or FUSE option, or the kernel's own): mount(8)
    /// repeats it from fstab or /proc/self/mountinfo; it is kept as mounted.
    AsMounted,
    /// Nobody's option: an error.
    Unknown,
}

/// What a remount does with `option` (one of a `-o` list, mount(8)'s and systemd's own
/// already taken out).
pub(crate) fn remount_option(option: &str) -> RemountOption {
    match REMOUNT_FLAGS.iter().find(|(name, _, _)| *name == option) {
        Some(&(_, flag, set)) => RemountOption::Flag { flag, set },
        None if is_known(option) || is_kernel_fuse_option(option) => RemountOption::AsMounted,
        None => RemountOption::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_options_are_left_to_mount8() {
        let (kept, left) = without_system_options(
            "rw,_netdev,nofail,allow_other,x-systemd.automount,x-systemd.mount-timeout=30,\
             X-mount.mkdir,comment=systemd.automount,noauto,user=alice,users,defaults,nodiratime,timeo=50",
        );
        assert_eq!(kept, ["rw", "allow_other", "timeo=50"]);
        assert_eq!(left.len(), 11, "{left:?}");
    }

    #[test]
    fn sloppy_knows_our_options() {
        assert!(is_known("allow_other") && is_known("timeo=50") && is_known("nconnect=4"));
        // A known option with a bad value is not "unknown": -s must not hide the mistake.
        assert!(is_known("timeo=x"));
        assert!(!is_known("frobnicate") && !is_known("sec=krb5p"));
    }

    #[test]
    fn a_remount_keeps_what_the_kernel_shows_for_the_mount() {
        // /proc/self/mountinfo of a mount by root, as mount(8) passes it for a mount not in fstab.
        for o in [
            "user_id=0",
            "group_id=0",
            "default_permissions",
            "allow_other",
            "max_read=131072",
            "blksize=4096",
            "rootmode=40000",
            "fd=7",
        ] {
            assert_eq!(remount_option(o), RemountOption::AsMounted, "{o}");
        }
        assert_eq!(remount_option("ro"), RemountOption::Flag { flag: libc::MS_RDONLY, set: true });
        assert_eq!(remount_option("rw"), RemountOption::Flag { flag: libc::MS_RDONLY, set: false });
        assert_eq!(remount_option("timeo=50"), RemountOption::AsMounted);
        // The kernel's names with a value they never carry, and nobody's options, stay errors.
        for o in ["user_id", "blksize", "frobnicate", "sec=krb5p"] {
            assert_eq!(remount_option(o), RemountOption::Unknown, "{o}");
        }
    }
}
