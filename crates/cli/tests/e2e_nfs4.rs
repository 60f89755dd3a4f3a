//! NFSv4.1 end to end with an independent client: PyPI's nfs-rs (its NFSv4.1 client) mounts
//! eagernfs, creates, writes, reads, lists, renames and removes (`tests/clients/nfsrs_client.py`).
//!
//! nfs-rs is installed by `scripts/install-deps.sh` into a virtual environment
//! (`EAGERNFS_NFSRS_PYTHON`, default `~/.cache/eagernfs/nfs-rs/bin/python`). Where it is missing
//! the test skips, except in CI (`CI` or `EAGERNFS_REQUIRE_NFSRS` set), where it must run.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn nfsrs_python() -> Option<PathBuf> {
    let p = match std::env::var_os("EAGERNFS_NFSRS_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/eagernfs/nfs-rs/bin/python"),
    };
    let ok = Command::new(&p).args(["-c", "import nfs_rs"]).output().is_ok_and(|o| o.status.success());
    ok.then_some(p)
}

fn required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var_os("EAGERNFS_REQUIRE_NFSRS").is_some()
}

#[test]
fn nfs_rs_mounts_nfsv41_and_does_the_file_work() {
    let Some(python) = nfsrs_python() else {
        assert!(!required(), "nfs-rs is required here: run scripts/install-deps.sh");
        skip("nfs_rs_mounts_nfsv41", "nfs-rs not installed (scripts/install-deps.sh installs it)");
        return;
    };
    if ganesha_override() {
        skip("nfs_rs_mounts_nfsv41", "an eagernfs NFSv4.1 test");
        return;
    }
    let dir = tempfile::Builder::new().prefix("eagernfs-nfs4-").tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let server = Server::eagernfs(dir.path(), &["-o", "rw,insecure,no_root_squash"]);
    let uid = if is_root() { 0 } else { unsafe_getuid() };
    let url = format!(
        "nfs://127.0.0.1:{}{}?version=4.1&uid={uid}&gid={uid}&noresvport=true",
        server.port(),
        server.dir().display()
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/clients/nfsrs_client.py");
    let mut cmd = Command::new(&python);
    cmd.arg(&script).arg(&url);
    let out = run_command(cmd, Duration::from_secs(120));
    out.assert_success("nfs-rs");
    assert!(out.stdout_text().contains("\nok"), "{}", out.stdout_text());
    // What the client did is on the server's disk.
    let kept = std::fs::read(dir.path().join("work/kept.txt")).expect("kept.txt on the export");
    assert_eq!(kept, b"nfs-rs was here\n");
    assert!(!dir.path().join("work/sub").exists(), "the client's removals happened");
}

fn unsafe_getuid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}
