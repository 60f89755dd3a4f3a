//! Byte-range locks through real FUSE mounts (issue 12): `fcntl` and `flock`
//! from two mounts of one server exclude each other through the server's
//! lock manager (NLM), as two NFS client hosts do; a blocked `F_SETLKW`
//! waits until the holder lets go, and a waiter killed meanwhile leaves no
//! lock behind; locks survive a server restart (reclaimed in the grace
//! period); `nolock` keeps locks on the client.
//!
//! The two mounts are in this one test process: the server sees them as two
//! hosts (each mount names itself by host and mount point) and two owners,
//! so they conflict exactly as two machines' processes would.

#[macro_use]
mod common;

use common::*;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn open(p: &Path) -> File {
    OpenOptions::new().read(true).write(true).create(true).truncate(false).open(p).unwrap()
}

/// `fcntl(F_SETLK/F_SETLKW)`: `Err(errno)` on failure.
fn setlk(f: &File, typ: i32, start: i64, len: i64, wait: bool) -> Result<(), i32> {
    // SAFETY: flock is plain data; zeroed is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = typ as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    let cmd = if wait { libc::F_SETLKW } else { libc::F_SETLK };
    // SAFETY: a valid descriptor and a valid flock struct.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), cmd, &mut fl) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap())
    }
}

/// `fcntl(F_GETLK)`: the conflicting lock's (type, start, len), or `None`.
fn getlk(f: &File, typ: i32, start: i64, len: i64) -> Option<(i32, i64, i64)> {
    // SAFETY: as in `setlk`.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = typ as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    // SAFETY: as in `setlk`.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETLK, &mut fl) };
    assert_eq!(r, 0, "F_GETLK failed: {}", std::io::Error::last_os_error());
    (fl.l_type as i32 != libc::F_UNLCK).then_some((fl.l_type as i32, fl.l_start, fl.l_len))
}

/// `fcntl(F_OFD_SETLK/F_OFD_SETLKW)` on the descriptor's open file description.
fn ofd_setlk(fd: libc::c_int, typ: i32, start: i64, len: i64, wait: bool) -> Result<(), i32> {
    // SAFETY: as in `setlk`; OFD locks want l_pid 0, which zeroed gives.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = typ as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    let cmd = if wait { libc::F_OFD_SETLKW } else { libc::F_OFD_SETLK };
    // SAFETY: a valid descriptor and a valid flock struct.
    let r = unsafe { libc::fcntl(fd, cmd, &mut fl) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap())
    }
}

/// `F_OFD_SETLKW` of a write lock on the whole of `f`, given at most `timeout`.
fn ofd_lock_within(f: &File, timeout: Duration) -> Result<(), String> {
    let fd = f.as_raw_fd();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(ofd_setlk(fd, libc::F_WRLCK, 0, 0, true));
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(errno)) => Err(format!("F_OFD_SETLKW failed: errno {errno}")),
        Err(_) => Err(format!("F_OFD_SETLKW still waiting after {timeout:?}")),
    }
}

fn flock(f: &File, op: i32) -> Result<(), i32> {
    // SAFETY: a valid descriptor.
    let r = unsafe { libc::flock(f.as_raw_fd(), op) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap())
    }
}

/// Lock tests run one at a time: a host has one portmapper entry for its lock manager (the
/// first mount takes it), and the ganesha test registers ganesha's there.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// An eagernfs server (`rw,no_root_squash`, then `extra`) exporting a fresh directory.
fn eagernfs_server(extra: &[&str]) -> (tempfile::TempDir, Server) {
    let export = tempfile::tempdir().unwrap();
    let mut args = vec!["-o", "rw,no_root_squash"];
    args.extend_from_slice(extra);
    let server = Server::eagernfs(export.path(), &args);
    (export, server)
}

fn two_mounts(server: &Server, options: &str) -> (FuseMount, FuseMount) {
    (FuseMount::new(&server.url(""), options), FuseMount::new(&server.url(""), options))
}

#[test]
fn two_mounts_contend_for_ranges_and_a_close_releases() {
    require_fuse!("two_mounts_contend_for_ranges_and_a_close_releases");
    let _serial = serial();
    let (_export, server) = eagernfs_server(&[]);
    contend(&server, "", "");
}

/// The same with NLM (NFSv3 mounts).
#[test]
fn two_mounts_contend_for_ranges_and_a_close_releases_over_nfsv3() {
    require_fuse!("two_mounts_contend_for_ranges_and_a_close_releases_over_nfsv3");
    let _serial = serial();
    let (_export, server) = eagernfs_server(&[]);
    contend(&server, "vers=3", "vers=3");
}

/// An NFSv3 mount's NLM locks and an NFSv4.1 mount's LOCKs are in the server's one lock table:
/// they exclude each other, each way round.
#[test]
fn an_nfsv3_mount_and_an_nfsv4_mount_exclude_each_other() {
    require_fuse!("an_nfsv3_mount_and_an_nfsv4_mount_exclude_each_other");
    let _serial = serial();
    let (_export, server) = eagernfs_server(&[]);
    contend(&server, "vers=3", "vers=4.1");
    let (_export, server) = eagernfs_server(&[]);
    contend(&server, "vers=4.1", "vers=3");
}

/// The same cases with nfs-ganesha's lock manager (and the host's rpc.statd) as the server.
#[test]
fn two_mounts_contend_the_same_way_on_nfs_ganesha() {
    require_fuse!("two_mounts_contend_the_same_way_on_nfs_ganesha");
    let _serial = serial();
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    let Some(server) = Server::ganesha_with_locks(export.path()) else { return };
    contend(&server, "", "");
}

/// Mount A (with options `a`) and mount B (`b`) of `server` take and test ranges, whole-file
/// flocks and closes against each other.
fn contend(server: &Server, a: &str, b: &str) {
    let (a, b) = (FuseMount::new(&server.url(""), a), FuseMount::new(&server.url(""), b));
    let fa = open(&a.path("f"));
    let fb = open(&b.path("f"));
    setlk(&fa, libc::F_WRLCK, 0, 100, false).expect("A locks 0..100");
    assert_eq!(setlk(&fb, libc::F_WRLCK, 50, 10, false), Err(libc::EAGAIN), "B overlaps A");
    assert_eq!(
        setlk(&fb, libc::F_RDLCK, 99, 1, false),
        Err(libc::EAGAIN),
        "even a read lock on A's last byte"
    );
    setlk(&fb, libc::F_WRLCK, 100, 0, false).expect("B locks 100 to the end");
    assert_eq!(getlk(&fb, libc::F_WRLCK, 0, 10), Some((libc::F_WRLCK, 0, 100)), "B sees A's lock");
    assert_eq!(getlk(&fa, libc::F_RDLCK, 5000, 1), Some((libc::F_WRLCK, 100, 0)), "A sees B's");
    // A second descriptor of the same process on the same mount is the same owner.
    let fa2 = open(&a.path("f"));
    setlk(&fa2, libc::F_WRLCK, 10, 10, false).expect("same owner: no conflict");
    // flock is a whole-file lock: B's range lock stands in A's way.
    assert_eq!(flock(&fa, libc::LOCK_EX | libc::LOCK_NB), Err(libc::EWOULDBLOCK));
    // Unlocking part of a range frees that part only.
    setlk(&fa, libc::F_UNLCK, 0, 50, false).unwrap();
    setlk(&fb, libc::F_WRLCK, 0, 50, false).expect("the freed half");
    assert_eq!(setlk(&fb, libc::F_WRLCK, 50, 1, false), Err(libc::EAGAIN), "the other half is still A's");
    // Any close by the owner drops all its locks on the file (POSIX).
    drop(fa2);
    setlk(&fb, libc::F_WRLCK, 50, 50, false).expect("A's close released the rest");
    drop(fa);
    drop(fb);
    // With nothing held, flock works across mounts too.
    let (ga, gb) = (open(&a.path("g")), open(&b.path("g")));
    flock(&ga, libc::LOCK_EX | libc::LOCK_NB).expect("A flocks g");
    assert_eq!(flock(&gb, libc::LOCK_SH | libc::LOCK_NB), Err(libc::EWOULDBLOCK));
    flock(&ga, libc::LOCK_UN).unwrap();
    flock(&gb, libc::LOCK_SH | libc::LOCK_NB).expect("after A's LOCK_UN");
    drop(gb);
    // FUSE sends the release of a closed file after close(2) returns, so wait for it.
    flock(&ga, libc::LOCK_EX).expect("B's last close released its flock");
}

/// Open-file-description locks belong to the open file: another open
/// file (on this mount or another) is refused while it is open anywhere
/// (a dup keeps it open), they go with its last close, and a waiter in
/// `F_OFD_SETLKW` then gets the lock.
#[test]
fn ofd_locks_go_with_the_last_close_of_their_open_file() {
    require_fuse!("ofd_locks_go_with_the_last_close_of_their_open_file");
    ofd_locks_go_with_the_last_close_of_their_open_file_over("");
}

/// The same with NLM (NFSv3 mounts).
#[test]
fn ofd_locks_go_with_the_last_close_of_their_open_file_over_nfsv3() {
    require_fuse!("ofd_locks_go_with_the_last_close_of_their_open_file_over_nfsv3");
    ofd_locks_go_with_the_last_close_of_their_open_file_over("vers=3");
}

fn ofd_locks_go_with_the_last_close_of_their_open_file_over(vers: &str) {
    let _serial = serial();
    let (_export, server) = eagernfs_server(&[]);
    let (a, b) = two_mounts(&server, vers);
    let holder = open(&a.path("f"));
    ofd_setlk(holder.as_raw_fd(), libc::F_WRLCK, 0, 100, false).expect("first OFD lock");
    let other = open(&a.path("f"));
    assert_eq!(ofd_setlk(other.as_raw_fd(), libc::F_WRLCK, 10, 10, false), Err(libc::EAGAIN), "same mount");
    let remote = open(&b.path("f"));
    assert_eq!(ofd_setlk(remote.as_raw_fd(), libc::F_RDLCK, 99, 1, false), Err(libc::EAGAIN), "other mount");
    // A duplicate keeps the open file, and so its lock.
    // SAFETY: dup of a valid descriptor.
    let dup = unsafe { libc::dup(holder.as_raw_fd()) };
    assert!(dup >= 0);
    drop(holder);
    assert_eq!(
        ofd_setlk(other.as_raw_fd(), libc::F_WRLCK, 10, 10, false),
        Err(libc::EAGAIN),
        "the lock stays while a duplicate is open"
    );
    // A waiter on the other mount, woken by the last close.
    let (tx, rx) = mpsc::channel();
    let remote_fd = remote.as_raw_fd();
    let waiter = std::thread::spawn(move || {
        let r = ofd_setlk(remote_fd, libc::F_WRLCK, 0, 100, true);
        tx.send(r).unwrap();
    });
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "the waiter waits while the lock is held");
    // SAFETY: closing the descriptor dup returned.
    assert_eq!(unsafe { libc::close(dup) }, 0);
    let got = rx.recv_timeout(Duration::from_secs(30)).expect("the waiter got the lock after the last close");
    assert_eq!(got, Ok(()));
    waiter.join().unwrap();
    assert_eq!(
        ofd_setlk(other.as_raw_fd(), libc::F_WRLCK, 10, 10, false),
        Err(libc::EAGAIN),
        "the waiter holds it"
    );
    drop(remote);
    // FUSE sends the release of a closed file in the background, so the
    // lock is freed just after close(2) returns: wait for it, as a program
    // using F_OFD_SETLKW would.
    ofd_lock_within(&other, Duration::from_secs(30)).expect("free once the waiter's file closed");
    // A process that exits with an OFD lock loses it (python3: struct flock
    // is packed by hand; 37 is F_OFD_SETLK).
    drop(other);
    let path = a.path("f");
    let script = format!(
        "exec 3<>{p}; python3 -c 'import fcntl,struct,os; fcntl.fcntl(3, 37, struct.pack(\"hhqqi\", fcntl.F_WRLCK, 0, 0, 0, 0)); print(\"locked\", flush=True)'",
        p = path.display()
    );
    let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("locked"),
        "child: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = open(&b.path("f"));
    ofd_lock_within(&again, Duration::from_secs(30)).expect("an exited process's OFD lock is gone");
}

#[test]
fn a_blocked_lock_waits_for_the_holder_and_a_killed_waiter_leaves_nothing() {
    require_fuse!("a_blocked_lock_waits_for_the_holder_and_a_killed_waiter_leaves_nothing");
    a_blocked_lock_waits_for_the_holder_and_a_killed_waiter_leaves_nothing_over("");
}

/// The same with NLM (NFSv3 mounts).
#[test]
fn a_blocked_lock_waits_for_the_holder_and_a_killed_waiter_leaves_nothing_over_nfsv3() {
    require_fuse!("a_blocked_lock_waits_for_the_holder_and_a_killed_waiter_leaves_nothing_over_nfsv3");
    a_blocked_lock_waits_for_the_holder_and_a_killed_waiter_leaves_nothing_over("vers=3");
}

fn a_blocked_lock_waits_for_the_holder_and_a_killed_waiter_leaves_nothing_over(vers: &str) {
    let _serial = serial();
    let (_export, server) = eagernfs_server(&[]);
    let (a, b) = two_mounts(&server, vers);
    let fa = open(&a.path("f"));
    setlk(&fa, libc::F_WRLCK, 0, 0, false).unwrap();

    // A process waiting in flock(1) on mount B, killed while it waits: its
    // request must be withdrawn (it must not hang, nor get the lock later).
    let mut waiter = Command::new("flock")
        .arg("-x")
        .arg(b.path("f"))
        .arg("true")
        .stdin(Stdio::null())
        .spawn()
        .expect("flock(1) from util-linux");
    assert!(wait_deadline(&mut waiter, Duration::from_millis(300)).is_none(), "flock(1) must wait for A");
    waiter.kill().unwrap();
    let status = wait_deadline(&mut waiter, Duration::from_secs(30));
    assert!(status.is_some(), "a killed waiter must not stay stuck in the kernel");

    // A thread waiting in F_SETLKW on mount B gets the lock once A closes.
    let fb = open(&b.path("f"));
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = setlk(&fb, libc::F_WRLCK, 0, 10, true);
        tx.send(r).unwrap();
        fb
    });
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "B must wait while A holds the lock");
    drop(fa);
    let got = rx.recv_timeout(Duration::from_secs(30)).expect("B's F_SETLKW returns once A closed");
    assert_eq!(got, Ok(()));
    let fb = t.join().unwrap();
    // The killed waiter holds nothing: only B's range is taken.
    let fa = open(&a.path("f"));
    setlk(&fa, libc::F_WRLCK, 10, 0, false).expect("the killed flock(1) left no lock");
    assert_eq!(setlk(&fa, libc::F_WRLCK, 0, 1, false), Err(libc::EAGAIN));
    drop(fb);
}

#[test]
fn locks_are_reclaimed_after_a_server_restart() {
    require_fuse!("locks_are_reclaimed_after_a_server_restart");
    let _serial = serial();
    let (_export, mut server) = eagernfs_server(&["--grace-period", "8"]);
    // NFSv3: NLM, with the host recorded by the server's status monitor.
    let (a, b) = two_mounts(&server, "vers=3");
    let fa = open(&a.path("f"));
    setlk(&fa, libc::F_WRLCK, 0, 100, false).unwrap();
    server.restart();
    let hosts = std::fs::read_to_string(server.state_dir().join("nsm/hosts")).unwrap();
    assert!(hosts.contains(&a.path.display().to_string()), "the holder was recorded: {hosts}");
    // B asks during the grace period: its client retries until the period ends;
    // by then A's client has reclaimed, so B is refused.
    let fb = open(&b.path("f"));
    assert_eq!(setlk(&fb, libc::F_WRLCK, 50, 1, false), Err(libc::EAGAIN), "A's lock survived the restart");
    setlk(&fb, libc::F_WRLCK, 100, 1, false).expect("outside A's range");
    drop(fa);
    setlk(&fb, libc::F_WRLCK, 50, 1, false).expect("after A's close");
}

/// NFSv4: the holder's client reclaims its lock (LOCK with `reclaim`) in the grace period after
/// the server restarts, so another client is still refused the range.
#[test]
fn nfsv4_locks_are_reclaimed_after_a_server_restart() {
    require_fuse!("nfsv4_locks_are_reclaimed_after_a_server_restart");
    let _serial = serial();
    // An NFSv4 client learns of a restart at its next call, and an idle one renews its lease
    // after a third of it: a short lease gets the idle holder back within the grace period
    // (the defaults, a 90 s lease and grace period, leave it time the same way).
    let (_export, mut server) = eagernfs_server(&["--grace-period", "12", "--lease-time", "6"]);
    let (a, b) = two_mounts(&server, "vers=4.1");
    let fa = open(&a.path("f"));
    setlk(&fa, libc::F_WRLCK, 0, 100, false).unwrap();
    let fb = open(&b.path("f"));
    server.restart();
    // B asks during the grace period: the server answers GRACE until A's and B's clients have
    // reclaimed (B's client retries); A's lock is back by then.
    assert_eq!(setlk(&fb, libc::F_WRLCK, 50, 1, false), Err(libc::EAGAIN), "A's lock survived the restart");
    setlk(&fb, libc::F_WRLCK, 100, 1, false).expect("outside A's range");
    drop(fa);
    setlk(&fb, libc::F_WRLCK, 50, 1, false).expect("after A's close");
}

/// NFSv4: a client killed while it holds a lock keeps it until its lease runs out; then the
/// server lets another client have it (a courteous server keeps a lapsed client's state only
/// until someone needs it).
#[test]
fn a_killed_nfsv4_client_s_locks_are_freed_when_its_lease_ends() {
    require_fuse!("a_killed_nfsv4_client_s_locks_are_freed_when_its_lease_ends");
    let _serial = serial();
    let lease_s = 4;
    let (_export, server) = eagernfs_server(&["--lease-time", &lease_s.to_string()]);
    let (a, b) = two_mounts(&server, "vers=4.1");
    let fa = open(&a.path("f"));
    setlk(&fa, libc::F_WRLCK, 0, 0, false).unwrap();
    // B opens before the kill: A, the file's sole opener, may hold a write delegation, which
    // B's open recalls; after the kill that recall would go unanswered and B's open itself would
    // wait out A's lease (fuse_deleg.rs tests that), which is not what this test is about.
    let fb = open(&b.path("f"));
    let daemons = mount_daemons(&a.path);
    assert_eq!(daemons.len(), 1, "one daemon serves mount A");
    let killed = std::time::Instant::now();
    // SAFETY: plain kill(2) of a process this test started.
    unsafe { libc::kill(daemons[0] as libc::pid_t, libc::SIGKILL) };
    drop(fa);
    assert_eq!(setlk(&fb, libc::F_WRLCK, 0, 1, false), Err(libc::EAGAIN), "the lease still holds");
    // Poll as a program would, bounded well past the lease.
    let deadline = killed + Duration::from_secs(lease_s * 10);
    loop {
        match setlk(&fb, libc::F_WRLCK, 0, 1, false) {
            Ok(()) => break,
            Err(libc::EAGAIN) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200))
            }
            other => panic!("B did not get the dead client's lock after its lease: {other:?}"),
        }
    }
    assert!(
        killed.elapsed() >= Duration::from_secs(lease_s),
        "freed before the lease could have run out ({:?})",
        killed.elapsed()
    );
    // The dead mount goes; a live one takes its place for the harness to unmount.
    let mut lazy = Command::new(eagernfs_bin());
    lazy.args(["umount", "-z"]).arg(&a.path);
    run_command(lazy, MOUNT_TIMEOUT).assert_success("eagernfs umount -z");
    let mut again = Command::new(eagernfs_bin());
    again.arg("mount").arg(server.url("")).arg(&a.path);
    run_command(again, MOUNT_TIMEOUT).assert_success("eagernfs mount (again)");
}

#[test]
fn nolock_keeps_locks_on_the_client() {
    require_fuse!("nolock_keeps_locks_on_the_client");
    let _serial = serial();
    let (_export, server) = eagernfs_server(&[]);
    let (a, b) = two_mounts(&server, "nolock");
    let fa = open(&a.path("f"));
    let fb = open(&b.path("f"));
    setlk(&fa, libc::F_WRLCK, 0, 0, false).unwrap();
    setlk(&fb, libc::F_WRLCK, 0, 0, false).expect("local locks do not reach the other mount");
    // Within one mount they still exclude (the kernel keeps them): a child
    // process is another owner.
    let out = Command::new("flock").args(["-n", "-x"]).arg(a.path("g")).arg("true").output().unwrap();
    assert!(out.status.success());
    let fg = open(&a.path("g"));
    flock(&fg, libc::LOCK_EX).unwrap();
    let out = Command::new("flock").args(["-n", "-x"]).arg(a.path("g")).arg("true").output().unwrap();
    assert!(!out.status.success(), "a local flock excludes on its own mount");
}

#[test]
fn a_killed_client_s_locks_are_freed_when_it_mounts_again() {
    require_fuse!("a_killed_client_s_locks_are_freed_when_it_mounts_again");
    let _serial = serial();
    let (_export, server) = eagernfs_server(&[]);
    // NFSv3: the status monitor's notification (SM_NOTIFY) frees them.
    let (a, b) = two_mounts(&server, "vers=3");
    let fa = open(&a.path("f"));
    setlk(&fa, libc::F_WRLCK, 0, 0, false).unwrap();
    let daemons = mount_daemons(&a.path);
    assert_eq!(daemons.len(), 1, "one daemon serves mount A");
    // SAFETY: plain kill(2) of a process this test started.
    unsafe { libc::kill(daemons[0] as libc::pid_t, libc::SIGKILL) };
    drop(fa);
    // A crashed client's locks stay (the server cannot tell a crash from a
    // slow client) until that host says it restarted.
    let fb = open(&b.path("f"));
    assert_eq!(setlk(&fb, libc::F_WRLCK, 0, 1, false), Err(libc::EAGAIN));
    // The same mount again (same host, same mount point): its status
    // monitor call frees what the dead run held.
    let mut lazy = Command::new(eagernfs_bin());
    lazy.args(["umount", "-z"]).arg(&a.path);
    run_command(lazy, MOUNT_TIMEOUT).assert_success("eagernfs umount -z");
    let mut again = Command::new(eagernfs_bin());
    again.arg("mount").arg(server.url("")).arg(&a.path).args(["-o", "vers=3"]);
    run_command(again, MOUNT_TIMEOUT).assert_success("eagernfs mount (again)");
    setlk(&fb, libc::F_WRLCK, 0, 1, false).expect("the dead mount's lock was freed");
    drop(fb);
}

/// With a portmapper on this host, the first mount takes the server's GRANTED calls: a waiter
/// is woken by the server when the holder lets go (counted by the server as delivered).
#[test]
fn a_granted_callback_wakes_the_waiter() {
    require_fuse!("a_granted_callback_wakes_the_waiter");
    let _serial = serial();
    if !ensure_rpcbind() {
        return;
    }
    let (_export, server) = eagernfs_server(&[]);
    // The waiter's mount first: it registers the host's lock manager (NLM: NFSv3).
    let w = FuseMount::new(&server.url(""), "vers=3");
    let h = FuseMount::new(&server.url(""), "vers=3");
    let fh = open(&h.path("f"));
    setlk(&fh, libc::F_WRLCK, 0, 0, false).unwrap();
    let fw = open(&w.path("f"));
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        tx.send(setlk(&fw, libc::F_WRLCK, 0, 0, true)).unwrap();
        fw
    });
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "W must wait while H holds the lock");
    drop(fh);
    assert_eq!(rx.recv_timeout(Duration::from_secs(30)).expect("W is granted the lock"), Ok(()));
    let fw = t.join().unwrap();
    let out =
        run_tool(eagernfs_bin(), ["stat", "--json", "--state-dir", server.state_dir().to_str().unwrap()]);
    out.assert_success("eagernfs stat --json");
    let v: serde_json::Value = serde_json::from_str(&out.stdout_text()).unwrap();
    assert!(
        v["stats"]["lock_callbacks_delivered"].as_u64().unwrap_or(0) >= 1,
        "the server's GRANTED call reached the waiting mount: {}",
        v["stats"]
    );
    drop(fw);
}

/// Start rpcbind if nothing answers on port 111; false (test skipped) if it is not installed.
fn ensure_rpcbind() -> bool {
    let answers = || {
        Command::new("rpcinfo")
            .args(["-p", "127.0.0.1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if answers() {
        return true;
    }
    // Detached (its own session), as scripts/ganesha.sh starts it; it outlives the test.
    let spawned = Command::new("setsid")
        .args(["rpcbind", "-f"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    if spawned.is_err() {
        skip("a_granted_callback_wakes_the_waiter", "rpcbind is not installed");
        return false;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !answers() {
        assert!(std::time::Instant::now() < deadline, "rpcbind did not answer within 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

#[test]
fn local_lock_flock_keeps_flock_local_and_sends_fcntl_to_the_server() {
    require_fuse!("local_lock_flock_keeps_flock_local_and_sends_fcntl_to_the_server");
    let _serial = serial();
    let (_export, server) = eagernfs_server(&[]);
    let (a, b) = two_mounts(&server, "local_lock=flock");
    let (fa, fb) = (open(&a.path("f")), open(&b.path("f")));
    flock(&fa, libc::LOCK_EX | libc::LOCK_NB).expect("A flocks");
    flock(&fb, libc::LOCK_EX | libc::LOCK_NB).expect("flock is local: B's mount does not see A's");
    setlk(&fa, libc::F_WRLCK, 0, 10, false).expect("A's fcntl lock");
    assert_eq!(
        setlk(&fb, libc::F_WRLCK, 5, 1, false),
        Err(libc::EAGAIN),
        "fcntl locks still go to the server"
    );
}
