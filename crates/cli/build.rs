//! Puts the git revision into `eagernfs --version` (`eagernfs 0.1.0 (git d933afc)`), so a bug
//! report names the exact source a binary came from.
//!
//! Never fails the build: a source tarball or a `cargo install` from a registry has no `.git`
//! (and maybe no git), so the revision is then `unknown`. A packager who builds from a tarball
//! but knows the revision sets `EAGERNFS_GIT_REV`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=EAGERNFS_GIT_REV");
    let rev = std::env::var("EAGERNFS_GIT_REV")
        .ok()
        .filter(|r| !r.trim().is_empty())
        .map(|r| r.trim().to_string())
        .or_else(git_rev)
        .unwrap_or_else(|| "unknown".to_string());
    let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets CARGO_PKG_VERSION");
    println!("cargo:rustc-env=EAGERNFS_VERSION={version} (git {rev})");
}

/// `git rev-parse --short HEAD` in this crate's directory, and the files whose change means
/// HEAD moved (so a commit rebuilds with the new revision, and nothing else re-runs this).
fn git_rev() -> Option<String> {
    let rev = git(&["rev-parse", "--short", "HEAD"])?;
    // HEAD itself (checkout, detached commits), the branch it names (commits on it) and
    // packed-refs (where `git gc` moves branch tips). In a worktree these live in different
    // directories, which `--git-path` knows; only existing files are named, because cargo
    // re-runs a build script every time for a missing one.
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    watched.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git(&["rev-parse", "--git-path", &branch]));
    }
    for path in watched.into_iter().flatten().map(|p| absolute(&p)) {
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    Some(rev)
}

/// `git ARGS` run in the crate directory: its trimmed output, or `None` if git is missing,
/// this is not a repository, or the command fails for any other reason.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(manifest_dir()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
}

/// `--git-path` answers relative to the directory git ran in.
fn absolute(path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        manifest_dir().join(p)
    }
}
