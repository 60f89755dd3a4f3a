//! Per-thread file-system identity: fsuid, fsgid and supplementary groups.
//!
//! The kernel keeps credentials per *thread*. glibc's `setgroups` (and
//! `setuid` and friends) broadcast the change to every thread of the
//! process, which would let one request's identity leak into another's, so
//! we call the raw system calls, which change the calling thread only.
//! fsuid/fsgid are the ids the kernel checks file access against; changing
//! fsuid from 0 to anything else also drops the file capabilities
//! (`CAP_DAC_OVERRIDE`, `CAP_CHOWN`, `CAP_FOWNER`, `CAP_DAC_READ_SEARCH`,
//! `CAP_MKNOD`, …) from the thread's effective set, and setting it back to 0
//! restores them. So the same thread acts as "the server" (fsuid 0, needed
//! for `open_by_handle_at`) or as "the caller" by changing one id.
//!
//! A thread-local cache of the current identity skips the system calls when
//! nothing changes. It starts unknown, because a new thread inherits the
//! identity of whichever thread spawned it. Every entry point of the backend
//! sets the identity it needs before touching the file system, so a stale
//! identity from an earlier request (even one that panicked) is never used.

use std::cell::RefCell;

use crate::{Credentials, FsError, FsResult};

#[derive(Default)]
struct Current {
    fsuid: Option<u32>,
    fsgid: Option<u32>,
    groups: Option<Vec<u32>>,
}

thread_local! {
    static CURRENT: RefCell<Current> = RefCell::new(Current::default());
}

/// `setfsuid` returns the previous value and never fails visibly, so we
/// verify with `setfsuid(-1)` (an invalid id, which changes nothing and
/// returns the current one). Without this check an id the kernel rejects
/// (`u32::MAX`, or one unmapped in our user namespace) would leave the
/// thread running as whoever it was before, possibly root.
fn set_fsuid(uid: u32) -> bool {
    // SAFETY: setfsuid takes an integer and touches no memory.
    unsafe { libc::syscall(libc::SYS_setfsuid, uid as libc::c_long) };
    // SAFETY: as above.
    let now = unsafe { libc::syscall(libc::SYS_setfsuid, -1 as libc::c_long) };
    now as u32 == uid
}

fn set_fsgid(gid: u32) -> bool {
    // SAFETY: setfsgid takes an integer and touches no memory.
    unsafe { libc::syscall(libc::SYS_setfsgid, gid as libc::c_long) };
    // SAFETY: as above.
    let now = unsafe { libc::syscall(libc::SYS_setfsgid, -1 as libc::c_long) };
    now as u32 == gid
}

fn set_groups(groups: &[u32]) -> bool {
    // SAFETY: the kernel reads `groups.len()` gid_t values (u32 on Linux)
    // from the slice, which stays alive for the call. The raw system call
    // changes only the calling thread (unlike glibc's wrapper).
    let r = unsafe { libc::syscall(libc::SYS_setgroups, groups.len() as libc::c_long, groups.as_ptr()) };
    r == 0
}

/// Act as the server: fsuid 0, so the thread has its file capabilities back
/// (`open_by_handle_at` needs `CAP_DAC_READ_SEARCH`). fsgid and groups are
/// left alone: with fsuid 0 they only matter for files the thread creates,
/// and the backend creates files only as the caller.
pub(super) fn become_server() -> FsResult<()> {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        if c.fsuid == Some(0) {
            return Ok(());
        }
        if set_fsuid(0) {
            c.fsuid = Some(0);
            Ok(())
        } else {
            c.fsuid = None;
            Err(FsError::ServerFault)
        }
    })
}

/// Act as `cred` for the file-system calls that follow on this thread.
/// Fails with `Perm` if the kernel refuses one of the ids.
pub(super) fn become_caller(cred: &Credentials) -> FsResult<()> {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        // Groups and gid first: setting them needs CAP_SETGID, which a
        // non-zero fsuid does not drop, so the order is only for tidiness.
        if c.groups.as_deref() != Some(&cred.groups[..]) {
            if !set_groups(&cred.groups) {
                c.groups = None;
                return Err(FsError::Perm);
            }
            c.groups = Some(cred.groups.clone());
        }
        if c.fsgid != Some(cred.gid) {
            if !set_fsgid(cred.gid) {
                c.fsgid = None;
                return Err(FsError::Perm);
            }
            c.fsgid = Some(cred.gid);
        }
        if c.fsuid != Some(cred.uid) {
            if !set_fsuid(cred.uid) {
                c.fsuid = None;
                return Err(FsError::Perm);
            }
            c.fsuid = Some(cred.uid);
        }
        Ok(())
    })
}

fn current_fsgid() -> u32 {
    // SAFETY: setfsgid(-1) changes nothing and returns the current fsgid.
    unsafe { libc::syscall(libc::SYS_setfsgid, -1 as libc::c_long) as u32 }
}

fn current_groups() -> Option<Vec<u32>> {
    let mut groups = vec![0u32; 65536];
    // SAFETY: the kernel writes at most `groups.len()` gid_t values into the
    // buffer, which is writable for that many.
    let n = unsafe { libc::syscall(libc::SYS_getgroups, groups.len() as libc::c_long, groups.as_mut_ptr()) };
    if n < 0 {
        return None;
    }
    groups.truncate(n as usize);
    Some(groups)
}

/// True if this thread can switch identity (has `CAP_SETUID`/`CAP_SETGID`):
/// tries an unprivileged identity, then puts back the thread's original
/// one, because the caller of `LocalBackend::open` is usually the program's
/// main thread and must not find its groups changed.
pub(super) fn can_switch() -> bool {
    let Some(groups) = current_groups() else { return false };
    let original = Credentials { uid: 0, gid: current_fsgid(), groups };
    let probe = Credentials { uid: 65534, gid: 65534, groups: Vec::new() };
    let ok = become_caller(&probe).is_ok();
    // Restoring `original` also returns fsuid to 0.
    become_caller(&original).is_ok() && ok
}
