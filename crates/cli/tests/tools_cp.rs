//! `eagernfs cp` and `eagernfs cat` end to end against `eagernfs serve`: uploads send only
//! UNSTABLE WRITEs (ceil(size / wsize) of them) and exactly one COMMIT, counted by the server;
//! downloads are byte-identical at awkward sizes; a server restart between the WRITEs and the
//! COMMIT (a new write verifier) makes cp resend the data; failures exit 1 with a message a
//! person understands.

mod common;

use common::*;
use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The WRITE size the tests ask for (`?wsize=`), so WRITE counts are predictable.
const WSIZE: usize = 256 * 1024;
const BIG: usize = 64 << 20;

fn eagernfs<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> ToolOutput {
    run_tool(env!("CARGO_BIN_EXE_eagernfs"), args)
}

/// `NAME count` lines of a server's `--stats-file`.
fn read_stats(path: &Path) -> HashMap<String, u64> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("stats file {}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(name, n)| (name.to_string(), n.trim().parse().expect("count")))
        .collect()
}

fn count(stats: &HashMap<String, u64>, name: &str) -> u64 {
    stats.get(name).copied().unwrap_or(0)
}

/// A server exporting a fresh directory read-write without root squash, counting calls (its
/// `--stats-file` counts NFSv3 procedures: the tests that read it use `vers=3`).
fn server_with_stats(stats: &Path) -> (tempfile::TempDir, Server) {
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(
        export.path(),
        &["-o", "rw,no_root_squash", "--stats-file", stats.to_str().unwrap()],
    );
    (export, server)
}

#[test]
fn upload_is_unstable_writes_and_one_commit() {
    if ganesha_override() && skip("upload_is_unstable_writes_and_one_commit", "counts calls at eagernfs") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let stats = scratch.path().join("stats");
    let (_export, mut server) = server_with_stats(&stats);
    let data = pattern_bytes(1, 0, BIG);
    let local = scratch.path().join("big");
    fs::write(&local, &data).unwrap();

    let url = server.url_with("/big", &format!("wsize={WSIZE}&vers=3"));
    let out = eagernfs(&["cp".as_ref(), local.as_os_str(), url.as_ref()]);
    out.assert_success("eagernfs cp up");
    assert!(out.stderr.contains(&format!("copied {BIG} bytes")), "summary: {}", out.stderr);
    server.stop();

    let s = read_stats(&stats);
    let writes = BIG.div_ceil(WSIZE) as u64;
    assert_eq!(count(&s, "WRITE"), writes, "one WRITE per wsize chunk: {s:?}");
    assert_eq!(count(&s, "WRITE/UNSTABLE"), writes, "every WRITE UNSTABLE: {s:?}");
    assert_eq!(count(&s, "WRITE/FILE_SYNC"), 0, "no FILE_SYNC WRITEs: {s:?}");
    assert_eq!(count(&s, "WRITE/DATA_SYNC"), 0, "no DATA_SYNC WRITEs: {s:?}");
    assert_eq!(count(&s, "COMMIT"), 1, "exactly one COMMIT: {s:?}");
    let on_disk = fs::read(server.dir().join("big")).unwrap();
    assert_eq!(on_disk.len(), BIG);
    assert!(on_disk == data, "uploaded bytes differ on disk");
}

#[test]
fn download_and_cat_are_byte_identical() {
    let export = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    for size in [0usize, 1, (1 << 20) + 7, BIG] {
        let data = pattern_bytes(size as u64 + 3, 0, size);
        let name = format!("down-{size}");
        fs::write(server.dir().join(&name), &data).unwrap();
        let local = scratch.path().join(&name);
        let url = server.url(&format!("/{name}"));
        eagernfs(&["cp".as_ref(), url.as_ref(), local.as_os_str()])
            .assert_success(&format!("cp down {size}"));
        let got = fs::read(&local).unwrap();
        assert_eq!(got.len(), size, "downloaded length for {size}");
        assert!(got == data, "downloaded bytes differ for size {size}");

        // Copying into a directory keeps the name.
        let into = scratch.path().join(format!("dir-{size}"));
        fs::create_dir(&into).unwrap();
        eagernfs(&["cp".as_ref(), "--no-fsync".as_ref(), url.as_ref(), into.as_os_str()])
            .assert_success(&format!("cp down into a directory {size}"));
        assert!(fs::read(into.join(&name)).unwrap() == data, "copy into a directory differs for {size}");

        let cat = eagernfs(&["cat", url.as_str()]);
        cat.assert_success(&format!("cat {size}"));
        assert_eq!(cat.stdout.len(), size, "cat length for {size}");
        assert!(cat.stdout == data, "cat bytes differ for size {size}");
    }
    // cat of several URLs concatenates them in order.
    let (a, b) = (server.url("/down-1"), server.url(&format!("/down-{}", (1 << 20) + 7)));
    let cat = eagernfs(&["cat", a.as_str(), b.as_str()]);
    cat.assert_success("cat two files");
    let mut want = fs::read(server.dir().join("down-1")).unwrap();
    want.extend(fs::read(server.dir().join(format!("down-{}", (1 << 20) + 7))).unwrap());
    assert!(cat.stdout == want, "cat of two files is not their concatenation");
}

#[test]
fn url_to_url_and_recursive_copies_round_trip() {
    let export = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);

    // A local tree: nested directories, an empty file, a multi-chunk file, a symbolic link.
    let tree = scratch.path().join("tree");
    fs::create_dir_all(tree.join("a/b")).unwrap();
    fs::write(tree.join("empty"), b"").unwrap();
    fs::write(tree.join("a/mid"), pattern_bytes(9, 0, 300_001)).unwrap();
    fs::write(tree.join("a/b/deep"), pattern_bytes(10, 0, 5)).unwrap();
    std::os::unix::fs::symlink("a/mid", tree.join("link")).unwrap();

    eagernfs(&["cp".as_ref(), "-r".as_ref(), tree.as_os_str(), server.url("/").as_ref()])
        .assert_success("cp -r up");
    assert!(fs::read(server.dir().join("tree/a/mid")).unwrap() == pattern_bytes(9, 0, 300_001));
    assert_eq!(fs::read(server.dir().join("tree/a/b/deep")).unwrap(), pattern_bytes(10, 0, 5));
    assert_eq!(fs::read_link(server.dir().join("tree/link")).unwrap(), Path::new("a/mid"));

    let back = scratch.path().join("back");
    eagernfs(&["cp".as_ref(), "-r".as_ref(), server.url("/tree").as_ref(), back.as_os_str()])
        .assert_success("cp -r down");
    assert!(fs::read(back.join("a/mid")).unwrap() == pattern_bytes(9, 0, 300_001));
    assert_eq!(fs::read(back.join("a/b/deep")).unwrap(), pattern_bytes(10, 0, 5));
    assert_eq!(fs::read(back.join("empty")).unwrap(), b"");
    assert_eq!(fs::read_link(back.join("link")).unwrap(), Path::new("a/mid"));

    // Without -r a directory is refused.
    let out = eagernfs(&["cp".as_ref(), tree.as_os_str(), server.url("/").as_ref()]);
    assert_eq!(out.status.code(), Some(1), "cp of a directory without -r: {}", out.stderr);
    assert!(out.stderr.contains("is a directory (use -r)"), "{}", out.stderr);

    // URL to URL (same server, new name), several chunks.
    let (src, dst) = (server.url_with("/tree/a/mid", "rsize=65536"), server.url("/copied"));
    eagernfs(&["cp", src.as_str(), dst.as_str()]).assert_success("cp URL to URL");
    assert!(fs::read(server.dir().join("copied")).unwrap() == pattern_bytes(9, 0, 300_001));
}

#[test]
fn verifier_change_before_commit_resends_the_data() {
    if ganesha_override() && skip("verifier_change_before_commit_resends_the_data", "restarts eagernfs") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let stats = scratch.path().join("stats");
    let (_export, mut server) = server_with_stats(&stats);
    let data = pattern_bytes(2, 0, BIG);
    let local = scratch.path().join("big");
    fs::write(&local, &data).unwrap();
    let gate = scratch.path().join("gate");
    let ready = scratch.path().join("gate.ready");
    fs::write(&gate, b"").unwrap();

    let url = server.url_with("/big", &format!("wsize={WSIZE}&vers=3"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_eagernfs"));
    cmd.arg("cp").arg(&local).arg(&url).env("EAGERNFS_CP_PAUSE_BEFORE_COMMIT", &gate);
    let cp = std::thread::spawn(move || run_command(cmd, TOOL_TIMEOUT));

    // cp announces that every WRITE is acknowledged and it is about to COMMIT.
    let deadline = Instant::now() + TOOL_TIMEOUT;
    while !ready.exists() {
        assert!(Instant::now() < deadline, "cp never reached its COMMIT");
        assert!(!cp.is_finished(), "cp exited before its COMMIT");
        std::thread::sleep(Duration::from_millis(10));
    }
    server.restart(); // new process, same port and handles, new write verifier
    let before = read_stats(&stats);
    assert_eq!(count(&before, "WRITE/UNSTABLE"), BIG.div_ceil(WSIZE) as u64, "{before:?}");
    assert_eq!(count(&before, "COMMIT"), 0, "the gate holds the COMMIT back: {before:?}");
    fs::remove_file(&gate).unwrap();

    let out = cp.join().unwrap();
    out.assert_success("cp across a server restart");
    assert!(
        out.stderr
            .contains(&format!("resent {BIG} bytes after the server restarted (write verifier changed)")),
        "cp must say it resent everything: {}",
        out.stderr
    );
    server.stop();
    let after = read_stats(&stats);
    // The new server saw the first COMMIT (answered with its new verifier), every chunk again,
    // and the COMMIT that made them durable.
    assert_eq!(count(&after, "WRITE/UNSTABLE"), BIG.div_ceil(WSIZE) as u64, "{after:?}");
    assert_eq!(count(&after, "WRITE/FILE_SYNC"), 0, "{after:?}");
    assert_eq!(count(&after, "COMMIT"), 2, "{after:?}");
    let on_disk = fs::read(server.dir().join("big")).unwrap();
    assert_eq!(on_disk.len(), BIG);
    assert!(on_disk == data, "file differs on disk after the resend");
}

#[test]
fn copy_to_a_read_only_export_says_so() {
    let export = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "ro,no_root_squash"]);
    let local = scratch.path().join("f");
    fs::write(&local, b"hello").unwrap();
    let url = server.url("/f");
    let out = eagernfs(&["cp".as_ref(), local.as_os_str(), url.as_ref()]);
    assert_eq!(out.status.code(), Some(1), "cp to a ro export must exit 1: {}", out.stderr);
    assert!(out.stderr.contains("eagernfs: cp: nfs://"), "names the tool and the URL: {}", out.stderr);
    assert!(out.stderr.contains("Read-only file system"), "says why: {}", out.stderr);
    assert!(!server.dir().join("f").exists());
}

#[test]
fn reading_a_private_file_as_another_user_is_denied() {
    if !is_root() && skip("reading_a_private_file_as_another_user_is_denied", "needs root to own the file") {
        return;
    }
    let export = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o755);
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let secret = server.dir().join("secret");
    fs::write(&secret, b"root only").unwrap();
    chown(&secret, 0, 0);
    chmod(&secret, 0o600);

    let url = server.url_with("/secret", "uid=1000&gid=1000");
    let cat = eagernfs(&["cat", url.as_str()]);
    assert_eq!(cat.status.code(), Some(1), "cat as uid 1000: {}", cat.stderr);
    assert!(cat.stderr.contains("Permission denied"), "{}", cat.stderr);
    assert!(cat.stdout.is_empty(), "no data may leak: {:?}", cat.stdout);

    let local = scratch.path().join("copy");
    let cp = eagernfs(&["cp".as_ref(), url.as_ref(), local.as_os_str()]);
    assert_eq!(cp.status.code(), Some(1), "cp as uid 1000: {}", cp.stderr);
    assert!(cp.stderr.contains("eagernfs: cp: nfs://"), "{}", cp.stderr);
    assert!(cp.stderr.contains("Permission denied (NFS3ERR_ACCES)"), "{}", cp.stderr);

    // The owner can read it.
    let cat = eagernfs(&["cat", server.url("/secret").as_str()]);
    cat.assert_success("cat as root");
    assert_eq!(cat.stdout, b"root only");
}
