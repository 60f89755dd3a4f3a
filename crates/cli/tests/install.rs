//! The Linux install path: what a packager or an admin runs to put eagernfs on a machine, and
//! what the installed pieces promise (`--version`, man pages, completions, the mount(8) helper,
//! the systemd units, `cargo install`).
//!
//! Nothing here changes the machine unless `EAGERNFS_TEST_INSTALL=1` is set: the helper is run
//! from a symlink in a temporary directory, exactly as mount(8) would run it from /sbin.

#[macro_use]
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

/// A stand-in for systemd's notification socket: what a `Type=notify` service tells it.
struct NotifySocket {
    sock: std::os::unix::net::UnixDatagram,
    /// The `NOTIFY_SOCKET` value to give the service.
    env: String,
    _dir: Option<tempfile::TempDir>,
}

impl NotifySocket {
    /// A socket in the file system, `NOTIFY_SOCKET=/path`.
    fn path() -> NotifySocket {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        NotifySocket { sock, env: path.display().to_string(), _dir: Some(dir) }
    }

    /// An abstract socket, `NOTIFY_SOCKET=@name`, as systemd itself uses.
    fn abstract_name() -> NotifySocket {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("eagernfs-test-notify-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let sock = std::os::unix::net::UnixDatagram::bind_addr(&addr).unwrap();
        NotifySocket { sock, env: format!("@{name}"), _dir: None }
    }

    /// The next message, or a panic saying what was awaited.
    fn recv(&self, what: &str, timeout: std::time::Duration) -> String {
        self.sock.set_read_timeout(Some(timeout)).unwrap();
        let mut buf = [0u8; 4096];
        let n = self.sock.recv(&mut buf).unwrap_or_else(|e| panic!("no notification ({what}): {e}"));
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

#[test]
fn serve_tells_systemd_when_it_is_ready_and_when_it_stops() {
    use std::io::BufRead;
    let notify = NotifySocket::abstract_name();
    let export = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(eagernfs_bin());
    cmd.arg("serve")
        .arg(export.path())
        .args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state.path())
        .env("NOTIFY_SOCKET", &notify.env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut server = cmd.spawn().unwrap();
    let ready = notify.recv("READY=1 from serve", SERVER_START_TIMEOUT);
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    let export_path = export.path().canonicalize().unwrap();
    assert!(ready.contains(&format!("STATUS=exporting {}", export_path.display())), "{ready:?}");
    // Ready means bound: the port it announced accepts connections now.
    let mut line = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("eagernfs: listening on ").expect("listening line").to_string();
    assert!(ready.contains(&addr), "STATUS names the address: {ready:?}");
    std::net::TcpStream::connect(&addr).expect("the server accepts once it said READY=1");
    // SAFETY: signalling our own child, not yet reaped.
    unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGTERM) };
    let stopping = notify.recv("STOPPING=1 after SIGTERM", SERVER_STOP_TIMEOUT);
    assert!(stopping.lines().any(|l| l == "STOPPING=1"), "{stopping:?}");
    let status = wait_deadline(&mut server, SERVER_STOP_TIMEOUT).expect("server exits after SIGTERM");
    assert!(status.success(), "{status}");
}

#[test]
fn foreground_mount_tells_systemd_once_the_mount_answers() {
    require_fuse!("foreground_mount_tells_systemd_once_the_mount_answers");
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    std::fs::write(export.path().join("hello"), b"hi\n").unwrap();
    let server = Server::eagernfs(export.path(), &[]);
    let mnt_dir = tempfile::tempdir().unwrap();
    let mountpoint = mnt_dir.path().join("mnt");
    std::fs::create_dir(&mountpoint).unwrap();
    let notify = NotifySocket::path();
    let mut cmd = Command::new(eagernfs_bin());
    cmd.arg("mount")
        .arg(server.url(""))
        .arg(&mountpoint)
        .arg("-f")
        .env("NOTIFY_SOCKET", &notify.env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut daemon = cmd.spawn().unwrap();
    let ready = notify.recv("READY=1 from mount -f", MOUNT_TIMEOUT);
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    assert!(is_mounted(&mountpoint), "READY=1 came before the mount existed");
    assert_eq!(std::fs::read(mountpoint.join("hello")).unwrap(), b"hi\n");
    eagernfs(&["umount", mountpoint.to_str().unwrap()]).assert_success("eagernfs umount");
    let status = wait_deadline(&mut daemon, MOUNT_TIMEOUT).expect("mount -f exits once unmounted");
    assert!(status.success(), "{status}");
}

/// The mount(8) helpers as mount(8) finds them: symlinks to the binary named
/// `mount.fuse.eagernfs` and `umount.fuse.eagernfs`, here in a private directory.
struct Helpers {
    dir: tempfile::TempDir,
}

impl Helpers {
    fn new() -> Helpers {
        let dir = tempfile::tempdir().unwrap();
        for name in ["mount.fuse.eagernfs", "umount.fuse.eagernfs"] {
            std::os::unix::fs::symlink(eagernfs_bin(), dir.path().join(name)).unwrap();
        }
        Helpers { dir }
    }

    /// Run a helper with exactly the arguments given (argv[0] is its name).
    fn run(&self, name: &str, args: &[&str]) -> ToolOutput {
        run_command(
            {
                let mut cmd = Command::new(self.dir.path().join(name));
                cmd.args(args);
                cmd
            },
            MOUNT_TIMEOUT,
        )
    }
}

/// A mount point in a fresh directory (its parent 0755 so any user can reach it).
fn mountpoint() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::Builder::new().prefix("eagernfs-mnt-").tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let path = dir.path().join("mnt");
    std::fs::create_dir(&path).unwrap();
    (dir, path)
}

/// The source and type /proc/self/mounts shows for `path`.
fn mount_entry(path: &Path) -> Option<(String, String)> {
    mount_entry_in("/proc/self/mounts", path)
}

fn mount_entry_in(mounts: &str, path: &Path) -> Option<(String, String)> {
    let text = std::fs::read_to_string(mounts).unwrap();
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1) == Some(&path.to_str().unwrap())).then(|| (f[0].to_string(), f[2].to_string()))
    })
}

/// What mount(8) 2.38 hands a helper for the fstab line
/// `URL DIR fuse.eagernfs _netdev,nofail,allow_other,user,noauto,x-systemd.automount,comment=x 0 0`
/// (it keeps `_netdev`, `nofail`, `user`, adds `user`'s implied flags, passes `-n`/`-v` first),
/// plus what older versions and the systemd template also pass on.
const MOUNT8_OPTIONS: &str = "rw,noatime,nodiratime,nosuid,noexec,nodev,allow_other,_netdev,nofail,user,users,\
                              uhelper=x,x-systemd.automount,x-systemd.idle-timeout=60,comment=systemd.automount,\
                              X-mount.mkdir,defaults,noauto";

#[test]
fn mount_helper_mounts_with_mount8s_calling_convention() {
    require_fuse!("mount_helper_mounts_with_mount8s_calling_convention");
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    std::fs::write(export.path().join("hello"), b"hi\n").unwrap();
    let server = Server::eagernfs(export.path(), &[]);
    let helpers = Helpers::new();
    let (_keep, mnt) = mountpoint();
    let mnt_s = mnt.to_str().unwrap();
    let url = server.url("");

    // -f (fake): everything is checked, nothing is mounted.
    helpers.run("mount.fuse.eagernfs", &[&url, mnt_s, "-f", "-o", MOUNT8_OPTIONS]).assert_success("-f");
    assert!(mount_entry(&mnt).is_none(), "-f must not mount");

    // An option that is nobody's fails the mount with mount(8)'s status 32, naming it; with
    // -s (sloppy) it is ignored.
    let bad = helpers.run("mount.fuse.eagernfs", &[&url, mnt_s, "-o", "allow_other,frobnicate"]);
    assert_eq!(bad.status.code(), Some(32), "{}", bad.stderr);
    assert!(bad.stderr.contains("frobnicate"), "{}", bad.stderr);
    assert!(mount_entry(&mnt).is_none());

    // The real thing, as mount(8) calls it: SOURCE DIR -n -v -o OPTIONS -t TYPE.
    let out = helpers
        .run("mount.fuse.eagernfs", &[&url, mnt_s, "-n", "-v", "-o", MOUNT8_OPTIONS, "-t", "fuse.eagernfs"]);
    out.assert_success("mount.fuse.eagernfs");
    assert!(out.stderr.contains("x-systemd.automount"), "-v says what was left to mount(8): {}", out.stderr);
    // Mounted with the fstab source verbatim, so `mount -a` sees the line as mounted.
    assert_eq!(mount_entry(&mnt), Some((url.clone(), "fuse.eagernfs".to_string())));
    assert_eq!(std::fs::read(mnt.join("hello")).unwrap(), b"hi\n");
    std::fs::write(mnt.join("from-helper"), b"written through the helper's mount\n").unwrap();
    // `eagernfs umount` removes it like any eagernfs mount.
    eagernfs(&["umount", mnt_s]).assert_success("eagernfs umount");
    assert!(mount_entry(&mnt).is_none());
    assert_eq!(
        std::fs::read(export.path().join("from-helper")).unwrap(),
        b"written through the helper's mount\n"
    );

    // Sloppy, and unmounted by umount(8)'s helper as umount(8) calls it: DIR -n -v -t TYPE.
    helpers
        .run("mount.fuse.eagernfs", &[&url, mnt_s, "-s", "-o", "rw,allow_other,frobnicate,_netdev"])
        .assert_success("mount.fuse.eagernfs -s");
    assert!(mount_entry(&mnt).is_some());
    let out = helpers.run("umount.fuse.eagernfs", &[mnt_s, "-n", "-v", "-t", "fuse.eagernfs"]);
    out.assert_success("umount.fuse.eagernfs");
    assert!(mount_entry(&mnt).is_none());
}

#[test]
fn mount_helper_mounts_in_the_namespace_mount8_names() {
    require_fuse!("mount_helper_mounts_in_the_namespace_mount8_names");
    use std::io::BufRead;
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    let server = Server::eagernfs(export.path(), &[]);
    let helpers = Helpers::new();
    let (_keep, mnt) = mountpoint();
    // A process in a mount namespace of its own that lives until its stdin closes; it says
    // "ready" once unshare has made the namespace.
    let mut holder = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", "echo ready; exec cat"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("unshare (util-linux)");
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let ns = format!("/proc/{}/ns/mnt", holder.id());
    let theirs = format!("/proc/{}/mounts", holder.id());
    let mnt_s = mnt.to_str().unwrap();
    helpers
        .run("mount.fuse.eagernfs", &[&server.url(""), mnt_s, "-o", "allow_other", "-N", &ns])
        .assert_success("mount.fuse.eagernfs -N");
    assert!(mount_entry_in(&theirs, &mnt).is_some(), "mounted in the namespace -N named");
    assert!(mount_entry(&mnt).is_none(), "and not in ours");
    helpers.run("umount.fuse.eagernfs", &[mnt_s, "-N", &ns]).assert_success("umount.fuse.eagernfs -N");
    assert!(mount_entry_in(&theirs, &mnt).is_none());
    drop(holder.stdin.take());
    wait_deadline(&mut holder, MOUNT_TIMEOUT).expect("the namespace holder exits");
}

/// `scripts/install.sh --destdir` stages the whole install: the binary runs, the helpers are
/// symlinks where mount(8) looks, man pages (helpers in section 8), completions, and units whose
/// commands name the installed binary.
#[test]
fn install_script_stages_everything_a_machine_needs() {
    let root = tempfile::tempdir().unwrap();
    let out = run_command(
        {
            let mut cmd = Command::new(repo_root().join("scripts/install.sh"));
            cmd.args(["--bin", eagernfs_bin(), "--destdir"])
                .arg(root.path())
                .args(["--prefix", "/usr/local"]);
            cmd
        },
        MOUNT_TIMEOUT,
    );
    out.assert_success("scripts/install.sh");
    let r = root.path();
    let installed = r.join("usr/local/bin/eagernfs");
    let version = run_tool(installed.to_str().unwrap(), ["--version"]);
    version.assert_success("the installed binary");
    assert!(version.stdout_text().starts_with("eagernfs "), "{}", version.stdout_text());
    for helper in ["mount.fuse.eagernfs", "umount.fuse.eagernfs"] {
        let link = std::fs::read_link(r.join("sbin").join(helper)).unwrap();
        assert_eq!(link, Path::new("/usr/local/bin/eagernfs"), "{helper}");
    }
    for page in
        ["man1/eagernfs.1", "man1/eagernfs-serve.1", "man1/eagernfs-mount.1", "man8/mount.fuse.eagernfs.8"]
    {
        let text = std::fs::read_to_string(r.join("usr/local/share/man").join(page)).unwrap();
        assert!(text.contains(".TH"), "{page} is a man page");
    }
    let bash =
        std::fs::read_to_string(r.join("usr/local/share/bash-completion/completions/eagernfs")).unwrap();
    assert!(bash.contains("complete"), "bash completion");
    for unit in ["eagernfs.service", "eagernfs-mount@.service"] {
        let text = std::fs::read_to_string(r.join("etc/systemd/system").join(unit)).unwrap();
        assert!(!text.contains("@BINDIR@"), "{unit}: binary path filled in");
        assert!(text.contains("ExecStart=/usr/local/bin/eagernfs "), "{unit}");
    }
    assert!(r.join("etc/eagernfs/exports").exists() && r.join("etc/default/eagernfs").exists());
}

/// The server unit's ExecStart, run as systemd would (its environment file's options, a
/// NOTIFY_SOCKET): it starts, says READY=1, serves the exports file, and reloads on SIGHUP
/// (the unit's ExecReload). `systemd-analyze verify` accepts both units when it is installed.
#[test]
fn the_server_units_command_line_starts_and_reloads() {
    let unit = std::fs::read_to_string(repo_root().join("dist/systemd/eagernfs.service")).unwrap();
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("ExecStart");
    let export = tempfile::tempdir().unwrap();
    let etc = tempfile::tempdir().unwrap();
    let exports = etc.path().join("exports");
    std::fs::write(&exports, format!("{} 127.0.0.1(rw,no_root_squash)\n", export.path().display())).unwrap();
    let state = etc.path().join("state");
    // The unit's words, with this machine's paths for the binary and /etc.
    let args: Vec<String> = exec
        .split_whitespace()
        .skip(1)
        .map(|w| match w {
            "/etc/eagernfs/exports" => exports.display().to_string(),
            "/var/lib/eagernfs" => state.display().to_string(),
            other => other.to_string(),
        })
        .flat_map(
            |w| if w == "$EAGERNFS_OPTS" { vec!["--listen".into(), "127.0.0.1:0".into()] } else { vec![w] },
        )
        .collect();
    assert_eq!(args[0], "serve", "{exec}");
    let notify = NotifySocket::path();
    let mut server = Command::new(eagernfs_bin())
        .args(&args)
        .env("NOTIFY_SOCKET", &notify.env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ready = notify.recv("READY=1", SERVER_START_TIMEOUT);
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    // ExecReload: SIGHUP re-reads the exports file; the control socket in the unit's state
    // directory answers `eagernfs reload` too.
    let reload = run_tool(eagernfs_bin(), ["reload", "--state-dir", state.to_str().unwrap()]);
    reload.assert_success("eagernfs reload against the unit's state directory");
    // SAFETY: signalling our own child, not yet reaped.
    unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGHUP) };
    unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGTERM) };
    let status = wait_deadline(&mut server, SERVER_STOP_TIMEOUT).expect("exits after SIGTERM");
    assert!(status.success(), "{status}");

    if Command::new("systemd-analyze").arg("--version").output().is_err() {
        eprintln!("skipping systemd-analyze verify: not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = Path::new(eagernfs_bin()).parent().unwrap().display().to_string();
    for (unit, name) in [
        ("eagernfs.service", "eagernfs.service"),
        ("eagernfs-mount@.service", "eagernfs-mount@mnt-x.service"),
    ] {
        let text = std::fs::read_to_string(repo_root().join("dist/systemd").join(unit)).unwrap();
        std::fs::write(dir.path().join(name), text.replace("@BINDIR@", &bin_dir)).unwrap();
        let out = run_command(
            {
                let mut cmd = Command::new("systemd-analyze");
                cmd.args(["verify", "--man=no"])
                    .arg(dir.path().join(name))
                    .env("SYSTEMD_LOG_LEVEL", "warning");
                cmd
            },
            MOUNT_TIMEOUT,
        );
        out.assert_success(&format!("systemd-analyze verify {unit}"));
        assert!(!out.stderr.contains(name), "systemd-analyze complains about {unit}: {}", out.stderr);
    }
}

/// An /etc/fstab line, as mount(8) and umount(8) run it: in a mount namespace of its own where
/// /usr/sbin holds only our helpers (so nothing is installed on this machine), `mount -T FSTAB
/// DIR` mounts through mount.fuse.eagernfs with fstab's options, a write reaches the server, and
/// `umount DIR` goes through umount.fuse.eagernfs.
#[test]
fn an_fstab_line_mounts_and_unmounts_through_mount8() {
    require_fuse!("an_fstab_line_mounts_and_unmounts_through_mount8");
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    let server = Server::eagernfs(export.path(), &[]);
    let helpers = Helpers::new();
    let (_keep, mnt) = mountpoint();
    let fstab = helpers.dir.path().join("fstab");
    std::fs::write(
        &fstab,
        format!(
            "# written by the test\n{} {} fuse.eagernfs _netdev,nofail,allow_other,x-systemd.automount,x-systemd.idle-timeout=60 0 0\n",
            server.url(""),
            mnt.display()
        ),
    )
    .unwrap();
    let script = format!(
        "set -e\n\
         mount --bind {helpers} /usr/sbin\n\
         mount -T {fstab} {mnt}\n\
         grep -q ' {mnt} fuse.eagernfs ' /proc/self/mounts\n\
         echo 'through fstab' > {mnt}/from-fstab\n\
         umount {mnt}\n\
         if grep -q ' {mnt} ' /proc/self/mounts; then echo still mounted; exit 1; fi\n",
        helpers = helpers.dir.path().display(),
        fstab = fstab.display(),
        mnt = mnt.display(),
    );
    let out = run_command(
        {
            let mut cmd = Command::new("unshare");
            cmd.args(["--mount", "--propagation", "private", "sh", "-c", &script]);
            cmd
        },
        MOUNT_TIMEOUT,
    );
    out.assert_success("mount -T fstab / umount in a private namespace");
    // umount(8) returned after the helper waited for the daemon: the data is on the server.
    assert_eq!(std::fs::read(export.path().join("from-fstab")).unwrap(), b"through fstab\n");
}

/// What fstab asks of mount(8) for a mount's flags and remounts (issue 22, items 5 and 6), run
/// through real mount(8) and our helper as in [`an_fstab_line_mounts_and_unmounts_through_mount8`]:
/// - `suid,dev` in fstab (which mount(8) does not pass to helpers) gives a mount without
///   `nosuid`/`nodev`, as libfuse's mount.fuse does for root; `nosuid,nodev` are kept;
/// - `mount -o remount,ro DIR` makes writes fail with EROFS and `remount,rw` allows them again;
/// - an `ro` fstab mount remounted `rw` takes writes (the daemon is told, not only the kernel).
#[test]
fn fstab_flags_and_remounts_go_through_the_helper() {
    require_fuse!("fstab_flags_and_remounts_go_through_the_helper");
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let helpers = Helpers::new();
    let (_keep_a, a) = mountpoint();
    let (_keep_b, b) = mountpoint();
    let (_keep_c, c) = mountpoint();
    let fstab = helpers.dir.path().join("fstab");
    let url = server.url("");
    std::fs::write(
        &fstab,
        format!(
            "{url} {a} fuse.eagernfs suid,dev,allow_other 0 0\n\
             {url} {b} fuse.eagernfs nosuid,nodev 0 0\n\
             {url} {c} fuse.eagernfs ro 0 0\n",
            a = a.display(),
            b = b.display(),
            c = c.display()
        ),
    )
    .unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let script = format!(
        "set -e\n\
         mount --bind {helpers} /usr/sbin\n\
         mount -T {fstab} {a}\n\
         mount -T {fstab} {b}\n\
         grep ' {a} ' /proc/self/mounts > {out}/a-flags\n\
         grep ' {b} ' /proc/self/mounts > {out}/b-flags\n\
         mknod {a}/null c 1 3\n\
         echo through-a-device > {a}/null\n\
         echo before > {a}/before\n\
         mount -T {fstab} -o remount,ro {a}\n\
         grep ' {a} ' /proc/self/mounts > {out}/a-ro-flags\n\
         if {{ echo refused > {a}/refused; }} 2> {out}/a-ro-err; then echo 'a write after remount,ro succeeded'; exit 1; fi\n\
         mount -T {fstab} -o remount,rw {a}\n\
         echo after > {a}/after\n\
         mount -T {fstab} {c}\n\
         if echo refused > {c}/refused-c 2>/dev/null; then echo 'a write to an ro mount succeeded'; exit 1; fi\n\
         mount -T {fstab} -o remount,rw {c}\n\
         echo from-c > {c}/from-c\n\
         umount {a}\n\
         umount {b}\n\
         umount {c}\n",
        helpers = helpers.dir.path().display(),
        fstab = fstab.display(),
        a = a.display(),
        b = b.display(),
        c = c.display(),
        out = out_dir.path().display(),
    );
    let out = run_command(
        {
            let mut cmd = Command::new("unshare");
            cmd.args(["--mount", "--propagation", "private", "sh", "-c", &script]);
            cmd
        },
        MOUNT_TIMEOUT,
    );
    out.assert_success("mounts, remounts and unmounts through mount(8) in a private namespace");
    let read = |name: &str| {
        std::fs::read_to_string(out_dir.path().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let flags = |line: String| {
        line.split_whitespace().nth(3).unwrap().split(',').map(str::to_owned).collect::<Vec<_>>()
    };
    let a_flags = flags(read("a-flags"));
    assert!(!a_flags.iter().any(|f| f == "nosuid" || f == "nodev"), "suid,dev in fstab: {a_flags:?}");
    let b_flags = flags(read("b-flags"));
    assert!(b_flags.iter().any(|f| f == "nosuid") && b_flags.iter().any(|f| f == "nodev"), "{b_flags:?}");
    let a_ro = flags(read("a-ro-flags"));
    assert!(a_ro.iter().any(|f| f == "ro"), "remount,ro: {a_ro:?}");
    assert!(!a_ro.iter().any(|f| f == "nosuid"), "a remount keeps the other flags: {a_ro:?}");
    assert!(read("a-ro-err").contains("Read-only file system"), "{}", read("a-ro-err"));
    assert_eq!(std::fs::read(export.path().join("before")).unwrap(), b"before\n");
    assert_eq!(std::fs::read(export.path().join("after")).unwrap(), b"after\n");
    assert!(!export.path().join("refused").exists());
    assert!(!export.path().join("refused-c").exists());
    assert_eq!(std::fs::read(export.path().join("from-c")).unwrap(), b"from-c\n");
}

/// Issue 32, item 3: `mount -o remount,ro DIR` of a mount that is not in fstab. mount(8) then
/// takes the options from /proc/self/mountinfo and hands the helper the kernel's own FUSE
/// options (`user_id=0,group_id=0,default_permissions,allow_other`), which the helper once
/// refused ("unknown mount option 'user_id=0'"). Through real mount(8) and our helper in a
/// namespace of its own, with an empty fstab: a mount made by `mount -t fuse.eagernfs`,
/// remounted `ro` (a write fails with EROFS, /proc/self/mounts says `ro`) and `rw` again (a
/// write reaches the server), then unmounted by umount(8).
#[test]
fn remounts_of_a_mount_not_in_fstab_go_through_the_helper() {
    require_fuse!("remounts_of_a_mount_not_in_fstab_go_through_the_helper");
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let helpers = Helpers::new();
    let (_keep, mnt) = mountpoint();
    let fstab = helpers.dir.path().join("fstab");
    std::fs::write(&fstab, "# nothing here: the mount below is not in fstab\n").unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let script = format!(
        "set -e\n\
         mount --bind {helpers} /usr/sbin\n\
         mount -T {fstab} -t fuse.eagernfs -o allow_other '{url}' {mnt}\n\
         grep ' {mnt} ' /proc/self/mounts > {out}/flags\n\
         echo before > {mnt}/before\n\
         mount -T {fstab} -o remount,ro {mnt} 2> {out}/ro-err\n\
         grep ' {mnt} ' /proc/self/mounts > {out}/ro-flags\n\
         if {{ echo refused > {mnt}/refused; }} 2> {out}/write-err; then echo 'a write after remount,ro succeeded'; exit 1; fi\n\
         mount -T {fstab} -o remount,rw {mnt} 2> {out}/rw-err\n\
         grep ' {mnt} ' /proc/self/mounts > {out}/rw-flags\n\
         echo after > {mnt}/after\n\
         umount {mnt}\n",
        helpers = helpers.dir.path().display(),
        fstab = fstab.display(),
        url = server.url(""),
        mnt = mnt.display(),
        out = out_dir.path().display(),
    );
    let out = run_command(
        {
            let mut cmd = Command::new("unshare");
            cmd.args(["--mount", "--propagation", "private", "sh", "-c", &script]);
            cmd
        },
        MOUNT_TIMEOUT,
    );
    let read = |name: &str| std::fs::read_to_string(out_dir.path().join(name)).unwrap_or_default();
    out.assert_success(&format!(
        "mount, remount ro and rw, umount through mount(8) without fstab (remount,ro: {:?}; remount,rw: {:?})",
        read("ro-err"),
        read("rw-err")
    ));
    let flags = |line: String| {
        line.split_whitespace().nth(3).unwrap_or_default().split(',').map(str::to_owned).collect::<Vec<_>>()
    };
    // What mount(8) hands back on a remount: the kernel's own options are in the entry.
    let mounted = flags(read("flags"));
    assert!(mounted.iter().any(|f| f.starts_with("user_id=")), "{mounted:?}");
    let ro = flags(read("ro-flags"));
    assert!(ro.iter().any(|f| f == "ro"), "remount,ro: {ro:?}");
    assert!(read("write-err").contains("Read-only file system"), "{}", read("write-err"));
    let rw = flags(read("rw-flags"));
    assert!(rw.iter().any(|f| f == "rw"), "remount,rw: {rw:?}");
    assert_eq!(std::fs::read(export.path().join("before")).unwrap(), b"before\n");
    assert_eq!(std::fs::read(export.path().join("after")).unwrap(), b"after\n");
    assert!(!export.path().join("refused").exists());
}
