//! `serve --exports FILE`: the /etc/exports syntax people already have. Two exports with
//! different client lists and options, served at once; a bad line stops the server before it
//! starts, naming the line and the fix.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_eagernfs");

struct Running {
    child: Child,
    port: u16,
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

fn serve_exports(exports: &str, state: &std::path::Path) -> Running {
    let file = state.join("exports");
    std::fs::write(&file, exports).unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--exports"])
        .arg(&file)
        .args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port = line
        .trim()
        .strip_prefix("eagernfs: listening on 127.0.0.1:")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .unwrap();
    Running { child, port }
}

fn url(port: u16, path: &std::path::Path, rel: &str) -> String {
    format!("nfs://127.0.0.1{}{rel}?nfsport={port}&mountport={port}", path.display())
}

#[test]
fn two_exports_with_their_own_rules() {
    if !is_root() && skip("two_exports_with_their_own_rules", "the local backend needs root") {
        return;
    }
    if ganesha_override() && skip("two_exports_with_their_own_rules", "eagernfs-only feature") {
        return;
    }
    let open = tempfile::tempdir().unwrap();
    let closed = tempfile::tempdir().unwrap();
    let readonly = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    std::fs::write(readonly.path().join("r.txt"), b"read me\n").unwrap();
    let exports = format!(
        "# a comment, then three exports\n\
         {open} 127.0.0.0/8(rw,no_root_squash) \\\n    ::1(rw)\n\
         {closed} 10.9.9.9(rw)\n\
         \"{ro}\" -ro *\n",
        open = open.path().display(),
        closed = closed.path().display(),
        ro = readonly.path().display(),
    );
    let server = serve_exports(&exports, state.path());

    let src = state.path().join("up.bin");
    std::fs::write(&src, pattern_bytes(7, 0, 100_000)).unwrap();
    nfs_cp(&src, url(server.port, open.path(), "/up.bin")).assert_success("cp into the rw export");
    assert_eq!(std::fs::read(open.path().join("up.bin")).unwrap(), pattern_bytes(7, 0, 100_000));

    // The second export is only for 10.9.9.9: we may not even list it.
    let out = nfs_ls(&url(server.port, closed.path(), ""));
    assert!(!out.status.success(), "a client outside the list mounted it: {}", out.stdout_text());

    // The third is read-only for everyone: reads work, writes don't.
    let cat = nfs_cat(&url(server.port, readonly.path(), "/r.txt"));
    cat.assert_success("cat from the ro export");
    assert_eq!(cat.stdout_text(), "read me\n");
    let out = nfs_cp(&src, url(server.port, readonly.path(), "/nope.bin"));
    assert!(!out.status.success(), "write to a ro export succeeded");
    assert!(!readonly.path().join("nope.bin").exists());
}

#[test]
fn a_bad_line_is_named_with_its_fix_and_nothing_starts() {
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("exports");
    std::fs::write(&file, "/srv/a 127.0.0.1(rw)\n\n/srv/b 127.0.0.1(rw,no_root_sqush)\n").unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--exports"])
        .arg(&file)
        .args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state.path());
    let out = run_command(cmd, Duration::from_secs(20));
    assert!(!out.status.success(), "server started with a bad exports file");
    assert!(out.stdout.is_empty(), "server announced it was listening: {}", out.stdout_text());
    assert!(out.stderr.contains("line 3"), "error does not name line 3: {}", out.stderr);
    assert!(out.stderr.contains("no_root_squash"), "error does not suggest the fix: {}", out.stderr);
}
