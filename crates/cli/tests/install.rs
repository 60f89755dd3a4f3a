//! The Linux install path: what a packager or an admin runs to put eagernfs on a machine, and
//! what the installed pieces promise (`--version`, man pages, completions, the mount(8) helper,
//! the systemd units, `cargo install`).
//!
//! Nothing here changes the machine unless `EAGERNFS_TEST_INSTALL=1` is set: the helper is run
//! from a symlink in a temporary directory, exactly as mount(8) would run it from /sbin.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

fn repo_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// `eagernfs ARGS` under the tool timeout.
fn eagernfs(args: &[&str]) -> ToolOutput {
    run_tool(eagernfs_bin(), args)
}

#[test]
fn version_names_the_git_revision() {
    let out = eagernfs(&["--version"]);
    out.assert_success("eagernfs --version");
    let mut git = Command::new("git");
    git.args(["rev-parse", "--short", "HEAD"]).current_dir(repo_root());
    let rev = git
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    assert_eq!(out.stdout_text().trim_end(), format!("eagernfs {} (git {rev})", env!("CARGO_PKG_VERSION")));
}
