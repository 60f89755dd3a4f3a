//! Delegations as the mount's cache (issue 36), through real mounts of `eagernfs serve`: a
//! file held under a read delegation is opened, stat'ed and read with no round trip; a change
//! by another client (a second NFSv4 mount, or an NFSv3 mount) recalls the delegation and the
//! holder sees the change at its next open; a holder killed with -9 keeps no one waiting
//! longer than about a lease. Needs root and /dev/fuse (skips otherwise).
//!
//! `EAGERNFS_SHARING_ROUNDS=N` (default 20) sets the rounds of the two-mount test (issue 36
//! asks for 100: `EAGERNFS_SHARING_ROUNDS=100 cargo test -p eagernfs --test fuse_deleg`).

#[macro_use]
mod common;

use common::*;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// `eagernfs stat --json MOUNTPOINT`.
fn stat_json(m: &FuseMount) -> serde_json::Value {
    let mut cmd = Command::new(eagernfs_bin());
    cmd.args(["stat", "--json"]).arg(&m.path);
    let out = run_command(cmd, MOUNT_TIMEOUT);
    out.assert_success("eagernfs stat --json MOUNTPOINT");
    serde_json::from_str(&out.stdout_text()).expect("stat --json gives JSON")
}

/// The round trips the mount made so far (COMPOUNDs, or NFSv3 calls), as
/// scripts/bench-mount.sh counts them.
fn round_trips(m: &FuseMount) -> u64 {
    stat_json(m)["ops"]
        .as_array()
        .expect("a list of calls")
        .iter()
        .filter(|o| o["name"] != "NULL")
        .map(|o| o["calls"].as_u64().unwrap_or(0))
        .sum()
}

/// Delegations the mount holds now, and CB_RECALLs it was sent so far.
fn delegations(m: &FuseMount) -> (u64, u64) {
    let j = stat_json(m);
    (j["nfs4"]["delegations"].as_u64().unwrap_or(0), j["nfs4"]["recalls"].as_u64().unwrap_or(0))
}

/// `find DIR -type f -exec cat {} +` through the mount.
fn cat_all(dir: &Path) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("find '{}' -type f -exec cat {{}} + > /dev/null", dir.display()))
        .status()
        .unwrap();
    assert!(status.success(), "cat of every file under {}", dir.display());
}

/// `dirs` directories of `per_dir` small files each, made on the server's side.
fn small_tree(export: &Path, dirs: usize, per_dir: usize) {
    for d in 0..dirs {
        let dir = export.join(format!("src/d{d}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..per_dir {
            let seed = (d * 1000 + f) as u64;
            fs::write(dir.join(format!("f{f}")), pattern_bytes(seed, 0, (seed * 7919 % 20_000) as usize))
                .unwrap();
        }
    }
}

fn eagernfs_only(server: &Server, test: &str) -> bool {
    server.is_ganesha() && skip(test, "eagernfs's delegations")
}

/// Issue 36's target: a second `cat` of an unchanged tree whose files the mount holds read
/// delegations of costs no round trip per file (only directories may be revalidated), where
/// close-to-open without delegations (`-o nodeleg`) asks at every open.
#[test]
fn a_second_cat_of_files_held_under_read_delegations_asks_nothing() {
    require_fuse!("a_second_cat_of_files_held_under_read_delegations_asks_nothing");
    let export = tempfile::tempdir().unwrap();
    let (dirs, per_dir) = (4, 50);
    let files = (dirs * per_dir) as u64;
    small_tree(export.path(), dirs, per_dir);
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    if eagernfs_only(&server, "a_second_cat_of_files_held_under_read_delegations_asks_nothing") {
        return;
    }
    for (opts, delegated) in [("", true), ("nodeleg", false)] {
        let m = FuseMount::new(&server.url(""), opts);
        cat_all(&m.path("src"));
        let held = delegations(&m).0;
        let before = round_trips(&m);
        cat_all(&m.path("src"));
        let second = round_trips(&m) - before;
        let opens = stat_json(&m)["delegated_opens"].as_u64().unwrap_or(0);
        eprintln!(
            "-o {opts:?}: {held} delegations held, second cat {second} round trips, {opens} opens under one"
        );
        if delegated {
            assert_eq!(held, files, "a read delegation of every file read");
            assert!(opens >= files, "every open of the second cat answered under a delegation: {opens}");
            // Directories may be revalidated and listed again (their attributes' period).
            assert!(second <= 3 * dirs as u64 + 2, "second cat of {files} files: {second} round trips");
        } else {
            assert_eq!(held, 0, "nodeleg: none kept");
            assert!(second >= files, "nodeleg: close-to-open asks at every open ({second} round trips)");
        }
    }
}

/// Two NFSv4 mounts of one server, each writing what the other then reads, in rounds of
/// random sizes (some past the 256 KiB a small file is read whole at its open): the reader
/// holds a read delegation of the file from the round before, the writer's open makes the
/// server recall it, and the reader's next open sees exactly the new data.
#[test]
fn what_one_mount_writes_the_other_reads_at_its_next_open() {
    require_fuse!("what_one_mount_writes_the_other_reads_at_its_next_open");
    let rounds: usize =
        std::env::var("EAGERNFS_SHARING_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    if eagernfs_only(&server, "what_one_mount_writes_the_other_reads_at_its_next_open") {
        return;
    }
    let a = FuseMount::new(&server.url(""), "");
    let b = FuseMount::new(&server.url(""), "");
    // One file per round, so the server's pause after a recall (no new delegation of that
    // file for a few seconds) never keeps a round from starting under a delegation.
    // Made on the server's side: a file made through a mount would bring that mount a write
    // delegation, which the other's first read would recall.
    let name = |i: usize| format!("f{i}");
    for i in 0..rounds {
        fs::write(export.path().join(name(i)), format!("first version of {i}")).unwrap();
    }
    for i in 0..rounds {
        for m in [&a, &b] {
            assert_eq!(fs::read_to_string(m.path(&name(i))).unwrap(), format!("first version of {i}"));
        }
    }
    let (held_a, _) = delegations(&a);
    let (held_b, _) = delegations(&b);
    assert!(held_b >= rounds as u64 && held_a >= rounds as u64, "both hold delegations: {held_a}, {held_b}");
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for i in 0..rounds {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = (seed % 400_000) as usize;
        let data = pattern_bytes(seed, 0, len);
        let (writer, reader) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        fs::write(writer.path(&name(i)), &data).unwrap();
        let got = fs::read(reader.path(&name(i))).unwrap();
        assert!(
            got == data,
            "round {i}: read {} bytes where {len} were written on the other mount",
            got.len()
        );
        assert_eq!(fs::metadata(reader.path(&name(i))).unwrap().len(), len as u64, "round {i}: size");
    }
    let (_, recalls_a) = delegations(&a);
    let (_, recalls_b) = delegations(&b);
    assert!(
        recalls_a + recalls_b >= rounds as u64,
        "each round's write recalled the reader's delegation: {recalls_a} + {recalls_b} recalls"
    );
}

/// An NFSv3 client's change recalls the NFSv4 mount's read delegation (its WRITE waits,
/// JUKEBOX, until the delegation is returned), and the mount sees the change at its next open.
#[test]
fn a_change_through_nfsv3_recalls_the_delegation_and_shows_at_the_next_open() {
    require_fuse!("a_change_through_nfsv3_recalls_the_delegation_and_shows_at_the_next_open");
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    fs::write(export.path().join("f"), b"before").unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    if eagernfs_only(&server, "a_change_through_nfsv3_recalls_the_delegation") {
        return;
    }
    let v4 = FuseMount::new(&server.url(""), "");
    let v3 = FuseMount::new(&server.url(""), "vers=3");
    assert_eq!(fs::read(v4.path("f")).unwrap(), b"before");
    assert_eq!(delegations(&v4), (1, 0));
    // Held: opening, stat'ing and reading again asks nothing.
    let before = round_trips(&v4);
    for _ in 0..3 {
        assert_eq!(fs::read(v4.path("f")).unwrap(), b"before");
        assert_eq!(fs::metadata(v4.path("f")).unwrap().len(), 6);
    }
    assert_eq!(round_trips(&v4) - before, 0, "reads under the delegation ask nothing");
    for round in 0..3 {
        let text = format!("after, {round} through NFSv3");
        fs::write(v3.path("f"), &text).unwrap();
        assert_eq!(fs::read_to_string(v4.path("f")).unwrap(), text, "round {round}");
    }
    let (_, recalls) = delegations(&v4);
    assert!(recalls >= 1, "the NFSv3 change recalled the delegation");
}

/// kill -9 of a mount's daemon while it holds delegations: another mount's conflicting open
/// waits for the server to give up on the dead one (a lease after its last renewal, at
/// most), then goes through; what the dead mount's program had fsync'ed is on the server.
/// (Read delegations: the dirty data a write delegation would hold is issue 36's item 4.)
#[test]
fn a_killed_mount_holding_delegations_keeps_another_waiting_at_most_about_a_lease() {
    require_fuse!("a_killed_mount_holding_delegations_keeps_another_waiting_at_most_about_a_lease");
    const LEASE: Duration = Duration::from_secs(5);
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    fs::write(export.path().join("held"), b"read by the mount that dies").unwrap();
    let lease = LEASE.as_secs().to_string();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash", "--lease-time", &lease]);
    if eagernfs_only(&server, "a_killed_mount_holding_delegations") {
        return;
    }
    let a = FuseMount::new(&server.url(""), "");
    let b = FuseMount::new(&server.url(""), "");
    {
        use std::io::Write;
        let mut f = fs::File::create(a.path("synced")).unwrap();
        f.write_all(b"fsync'ed before the kill").unwrap();
        f.sync_all().unwrap();
    }
    assert_eq!(fs::read(a.path("held")).unwrap(), b"read by the mount that dies");
    assert_eq!(fs::read(a.path("synced")).unwrap(), b"fsync'ed before the kill");
    let (held, _) = delegations(&a);
    assert!(held >= 1, "the mount about to die holds a read delegation");
    for pid in mount_daemons(&a.path) {
        // SAFETY: kill(2) of a pid we found running `eagernfs mount` on our mount point.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    let killed = Instant::now();
    fs::write(b.path("held"), b"written by the other mount").unwrap();
    let waited = killed.elapsed();
    eprintln!("the write waited {waited:?} for the dead mount's delegation (lease {LEASE:?})");
    // The server recalls, finds no one answering, and expires the dead client once its
    // lease (renewed at most a third of a lease before the kill) has run out.
    assert!(waited <= 2 * LEASE + Duration::from_secs(5), "waited {waited:?}");
    assert_eq!(fs::read(export.path().join("held")).unwrap(), b"written by the other mount");
    assert_eq!(fs::read(b.path("synced")).unwrap(), b"fsync'ed before the kill");
}

/// Close-to-open in front of the kernel's attribute cache: a file another client made longer
/// reads whole at the next open even while the kernel's cached attributes (with the old size)
/// are still within their period. The open revalidates in the mount, which then makes the
/// kernel drop those attributes (a read stops at the size the kernel believes). Over NFSv3 and
/// over NFSv4 without delegations (with them, the recall is what ends the trust: above).
#[test]
fn a_file_made_longer_elsewhere_reads_whole_at_the_next_open() {
    require_fuse!("a_file_made_longer_elsewhere_reads_whole_at_the_next_open");
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    for opts in ["vers=3", "nodeleg"] {
        let name = format!("f-{opts}");
        fs::write(export.path().join(&name), b"short").unwrap();
        // acregmin=60: the kernel may keep the attributes for a minute.
        let m = FuseMount::new(&server.url(""), &format!("{opts},acregmin=60,acregmax=60"));
        assert_eq!(fs::read(m.path(&name)).unwrap(), b"short");
        assert_eq!(fs::metadata(m.path(&name)).unwrap().len(), 5);
        let other = FuseMount::new(&server.url(""), "vers=3");
        fs::write(other.path(&name), b"much longer than before").unwrap();
        drop(other);
        assert_eq!(fs::read(m.path(&name)).unwrap(), b"much longer than before", "-o {opts}");
    }
}

/// An unmount gives every delegation back before it ends its session and client id: a
/// client id that still holds some cannot be destroyed (CLIENTID_BUSY), and the server would
/// keep them, making the next writer wait on a recall no one answers until the lease ran out.
#[test]
fn an_unmount_returns_its_delegations_and_keeps_no_writer_waiting() {
    require_fuse!("an_unmount_returns_its_delegations_and_keeps_no_writer_waiting");
    const LEASE: Duration = Duration::from_secs(30);
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    for i in 0..50 {
        fs::write(export.path().join(format!("f{i}")), format!("file {i}")).unwrap();
    }
    let lease = LEASE.as_secs().to_string();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash", "--lease-time", &lease]);
    if eagernfs_only(&server, "an_unmount_returns_its_delegations") {
        return;
    }
    let a = FuseMount::new(&server.url(""), "");
    for i in 0..50 {
        assert_eq!(fs::read_to_string(a.path(&format!("f{i}"))).unwrap(), format!("file {i}"));
    }
    assert_eq!(delegations(&a).0, 50);
    drop(a);
    let b = FuseMount::new(&server.url(""), "");
    let started = Instant::now();
    for i in 0..50 {
        fs::write(b.path(&format!("f{i}")), b"rewritten").unwrap();
    }
    let waited = started.elapsed();
    assert!(waited < LEASE / 3, "50 writes after the holder's unmount took {waited:?}");
}
