//! A server restart in the middle of a client's work: the client keeps its open file (its file
//! handle) and carries on, no acknowledged data is lost, and the write verifier changes so a
//! client knows to resend UNSTABLE writes that were not committed.

mod common;

use common::*;
use std::fs;

#[test]
fn restart_mid_work_keeps_handles_and_data_and_changes_the_verifier() {
    let export = tempfile::tempdir().unwrap();
    let dir = export.path();
    let mut server = Server::eagernfs(dir, &["-o", "rw,no_root_squash"]);
    let mut op = Nfsop::start(&server.url(""));

    const SEED: u64 = 42;
    let first_len: u64 = 300_000;
    let second_len: u64 = 200_000;
    let id = op.ok("open /work rwc 0644");
    let fh_before = op.ok(&format!("fh-open {id}"));
    assert_eq!(op.ok(&format!("pwrite {id} 0 pat:{SEED}:{first_len}")), first_len.to_string());
    let unstable = op.ok(&format!("write-unstable {id} {first_len} pat:{SEED}:4096"));
    let verf_before = field(&unstable, "verf").expect("verifier");
    assert_eq!(field_u64(&unstable, "count"), 4096, "{unstable}");
    // Same server instance: the verifier is stable, and COMMIT reports the same one.
    let again = op.ok(&format!("write-unstable {id} {} pat:{SEED}:10", first_len + 4096));
    assert_eq!(field(&again, "verf").unwrap(), verf_before, "verifier changed without a restart");
    let commit = op.ok(&format!("commit {id}"));
    assert_eq!(field(&commit, "verf").unwrap(), verf_before, "COMMIT verifier differs from WRITE's");

    server.restart();

    // The same open file (same handle, same libnfs context, reconnected) keeps working.
    let offset = first_len + 4096 + 10;
    assert_eq!(
        op.ok(&format!("pwrite {id} {offset} pat:{SEED}:{second_len}")),
        second_len.to_string(),
        "write on the open file after the restart"
    );
    let total = offset + second_len;
    op.ok(&format!("pverify {id} 0 pat:{SEED}:{total}"));
    assert_eq!(field_u64(&op.ok(&format!("fstat {id}")), "size"), total);

    let unstable = op.ok(&format!("write-unstable {id} {total} pat:{SEED}:100"));
    let verf_after = field(&unstable, "verf").expect("verifier");
    assert_ne!(verf_after, verf_before, "write verifier must change across a server restart");
    let commit = op.ok(&format!("commit {id}"));
    assert_eq!(field(&commit, "verf").unwrap(), verf_after);

    // A handle issued before the restart still names the same file (persistent handle key),
    // and a fresh lookup agrees with it.
    let attrs = op.ok(&format!("getattr-raw {fh_before}"));
    assert_eq!(field_u64(&attrs, "size"), total + 100, "old handle after restart: {attrs}");
    let fh_after = op.ok("fh /work");
    let attrs_after = op.ok(&format!("getattr-raw {fh_after}"));
    assert_eq!(field_u64(&attrs_after, "fileid"), field_u64(&attrs, "fileid"), "lookup after restart");

    op.ok(&format!("fsync {id}"));
    op.ok(&format!("close {id}"));
    drop(op);
    let on_disk = fs::read(dir.join("work")).unwrap();
    assert_eq!(on_disk.len() as u64, total + 100);
    assert!(on_disk == pattern_bytes(SEED, 0, (total + 100) as usize), "file on disk differs");

    // A second restart with nothing open, then a new client: still serving the same tree.
    server.restart();
    let cat = nfs_cat(&server.url("/work"));
    cat.assert_success("nfs-cat after the second restart");
    assert!(cat.stdout == on_disk);
}
