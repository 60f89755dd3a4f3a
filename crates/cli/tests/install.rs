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

/// The subcommands `eagernfs PATH… --help` lists (without clap's `help`), as the user sees them.
fn subcommands(path: &[&str]) -> Vec<String> {
    let mut args = path.to_vec();
    args.push("--help");
    let out = eagernfs(&args);
    out.assert_success(&format!("eagernfs {args:?}"));
    let text = out.stdout_text();
    let Some((_, listing)) = text.split_once("Commands:\n") else { return Vec::new() };
    listing
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Every command path below `path`, depth first: `["serve"]`, `["bench", "write"]`, …
fn command_tree(path: &[&str]) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    for name in subcommands(path) {
        let mut sub: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        sub.push(name);
        let borrowed: Vec<&str> = sub.iter().map(String::as_str).collect();
        all.extend(command_tree(&borrowed));
        all.push(sub);
    }
    all
}

#[test]
fn man_pages_cover_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("man1");
    eagernfs(&["manpages", out_dir.to_str().unwrap()]).assert_success("eagernfs manpages");
    let tree = command_tree(&[]);
    assert!(tree.iter().any(|p| p == &["bench", "stream"]), "the walk must reach nested commands: {tree:?}");
    for path in tree.iter().map(|p| p.join("-")).chain(std::iter::once(String::new())) {
        let name = if path.is_empty() { "eagernfs.1".to_string() } else { format!("eagernfs-{path}.1") };
        let page = std::fs::read_to_string(out_dir.join(&name))
            .unwrap_or_else(|e| panic!("no man page {name} for `eagernfs {path}`: {e}"));
        assert!(page.contains(".TH"), "{name} is not a man page:\n{page}");
    }
    // The pages carry the flags' help, not just the names.
    let mount = std::fs::read_to_string(out_dir.join("eagernfs-mount.1")).unwrap();
    assert!(mount.contains("allow_other") && mount.contains("nconnect"), "eagernfs-mount.1:\n{mount}");
}

#[test]
fn shell_completions_name_every_subcommand() {
    let top = subcommands(&[]);
    assert!(top.len() >= 10 && top.iter().any(|c| c == "completions"), "{top:?}");
    for shell in ["bash", "zsh", "fish"] {
        let out = eagernfs(&["completions", shell]);
        out.assert_success(&format!("eagernfs completions {shell}"));
        let script = out.stdout_text();
        for name in &top {
            assert!(
                script.split(|c: char| !c.is_alphanumeric() && c != '-').any(|w| w == name),
                "{shell} completion never mentions `{name}`"
            );
        }
    }
    // bash, for real: what the completion function offers after `eagernfs ` and after
    // `eagernfs bench `, as the shell would ask it on TAB.
    let script = eagernfs(&["completions", "bash"]).stdout_text();
    let offered = bash_complete(&script, &["eagernfs", ""]);
    for name in &top {
        assert!(offered.contains(name), "bash does not offer `{name}`: {offered:?}");
    }
    let bench = bash_complete(&script, &["eagernfs", "bench", ""]);
    for name in subcommands(&["bench"]) {
        assert!(bench.contains(&name), "bash does not offer `bench {name}`: {bench:?}");
    }
    assert!(bash_complete(&script, &["eagernfs", "serve", "--exp"]).contains(&"--exports".to_string()));
}

/// The words bash's completion function (from `script`) offers for the command line `words`
/// (the last one being completed).
fn bash_complete(script: &str, words: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eagernfs.bash");
    std::fs::write(&path, script).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source {}; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{}'; COMP_POINT=${{#COMP_LINE}}; \
         _eagernfs eagernfs '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.display(),
        quoted.join(" "),
        words.len() - 1,
        words.join(" "),
        words[words.len() - 1],
        words[words.len().saturating_sub(2)],
    );
    let out = run_tool("bash", ["-c", &program]);
    out.assert_success("bash completion");
    out.stdout_text().lines().map(str::to_owned).collect()
}
