//! Hostile clients: `..` past the export root, symlinks pointing outside it, names with
//! slashes, forged file handles, writes to a read-only export, and clients outside the allow
//! list. Each test places a sentinel outside the export and asserts it never shows up.

mod common;

use common::*;
use std::fs;
use std::path::{Path, PathBuf};

const PARENT_SENTINEL: &str = "sentinel-parent-7f3a";
const SECRET_TOKEN: &str = "outside-secret-token-52c1";
const INSIDE_MARKER: &str = "inside-marker";

/// `outer/` holds a sentinel and a secret next to `outer/export/`, the exported directory.
struct Layout {
    outer: tempfile::TempDir,
}

impl Layout {
    fn new() -> Layout {
        let outer = tempfile::tempdir().unwrap();
        fs::write(outer.path().join(PARENT_SENTINEL), b"x").unwrap();
        fs::write(outer.path().join("outside-secret"), SECRET_TOKEN).unwrap();
        let export = outer.path().join("export");
        fs::create_dir(&export).unwrap();
        fs::write(export.join(INSIDE_MARKER), b"inside").unwrap();
        fs::write(export.join("file"), b"file contents").unwrap();
        Layout { outer }
    }

    fn export(&self) -> PathBuf {
        self.outer.path().join("export")
    }
}

fn assert_no_leak(what: &str, text: &str) {
    assert!(!text.contains(PARENT_SENTINEL), "{what} listed the export's parent: {text}");
    assert!(!text.contains(SECRET_TOKEN), "{what} read a file outside the export: {text}");
    assert!(!text.contains("root:x:0:0"), "{what} read /etc/passwd: {text}");
}

/// Lists the directory behind `handle` (if the server gave one) and checks it is the export.
fn assert_handle_is_inside(op: &mut Nfsop, what: &str, handle: &str, root_fileid: u64) {
    let attrs = op.ok(&format!("getattr-raw {handle}"));
    let listing = op.ok(&format!("readdir-raw {handle}"));
    assert_no_leak(what, &listing);
    assert_eq!(field_u64(&attrs, "fileid"), root_fileid, "{what} is not the export root: {attrs}");
    assert!(listing.contains(INSIDE_MARKER), "{what} lists something else: {listing}");
}

#[test]
fn dotdot_never_leaves_the_export() {
    let layout = Layout::new();
    let dir = layout.export();
    let server = Server::eagernfs(&dir, &[]);
    let d = dir.display();

    // Mount paths that climb out: the server must refuse them or stay inside.
    for path in [format!("{d}/.."), format!("{d}/../"), format!("{d}/../.."), format!("{d}/./../export/..")] {
        let out = nfs_ls(&server.url_for_path(&path, ""));
        assert_no_leak(&format!("nfs-ls {path}"), &out.stdout_text());
        match Nfsop::try_start(&server.url_for_path(&path, "")) {
            Ok(mut op) => assert_no_leak(&format!("readdir of mount {path}"), &op.ok("readdir /")),
            Err(reply) => assert!(!reply.is_ok()),
        }
    }

    let mut op = Nfsop::start(&server.url(""));
    let root = op.ok("fh /");
    let root_fileid = field_u64(&op.ok(&format!("getattr-raw {root}")), "fileid");

    // LOOKUP ".." at the root is the root itself (or refused), however often it is repeated.
    for path in ["/..", "/../..", "/../../..", "/./..", "/../export"] {
        match op.cmd(&format!("fh {path}")) {
            Reply::Ok(handle) if path.ends_with("export") => {
                panic!("{path} resolved to {handle}: the export's own name is visible from inside")
            }
            Reply::Ok(handle) => assert_handle_is_inside(&mut op, path, &handle, root_fileid),
            Reply::Err { .. } => {}
        }
    }
    // Path resolution done by libnfs (it sends the components it gets).
    for path in ["/..", "/../..", "/../.."] {
        if let Reply::Ok(listing) = op.cmd(&format!("readdir {path}")) {
            assert_no_leak(&format!("readdir {path}"), &listing);
        }
    }
    // Names are single components: a server that joins paths would resolve these.
    for name in [
        format!("../{PARENT_SENTINEL}"),
        "../outside-secret".to_string(),
        "/etc/passwd".to_string(),
        "./../outside-secret".to_string(),
        format!("{INSIDE_MARKER}/../../outside-secret"),
    ] {
        let reply = op.cmd(&format!("lookup-raw {root} {name}"));
        assert!(!reply.is_ok(), "LOOKUP of the multi-component name {name:?} succeeded: {reply:?}");
    }
}

#[test]
fn slash_names_the_export() {
    let layout = Layout::new();
    let server = Server::eagernfs(&layout.export(), &[]);
    if server.is_ganesha() && skip("slash_names_the_export", "`/` as the export is an eagernfs contract") {
        return;
    }
    let out = nfs_ls(&server.url_for_path("/", ""));
    out.assert_success("nfs-ls of /");
    assert_no_leak("nfs-ls /", &out.stdout_text());
    assert!(ls_names(&out).iter().any(|n| n == INSIDE_MARKER), "`/` must name the export");
}

#[test]
fn the_empty_mount_path_names_the_export_as_slash_does() {
    let layout = Layout::new();
    let dir = layout.export();
    let server = Server::eagernfs(&dir, &["-o", "rw,insecure,no_root_squash"]);
    if server.is_ganesha()
        && skip("the_empty_mount_path_names_the_export", "`/` as the export is an eagernfs contract")
    {
        return;
    }
    // libnfs reads `nfs://127.0.0.1/NAME` as the file /NAME in the export "" (the path before
    // the last `/`), and sends MNT of "". After the server's answer it lists the exports to find
    // nested ones and gives up on an empty export path by itself ("Export is empty",
    // lib/nfs_v3.c), so the URL says not to look (`auto-traverse-mounts=0`); `nfs://host//NAME`
    // (the export `/`) needs no option.
    let empty = |file: &str| server.url_for_path(file, "auto-traverse-mounts=0");
    let local = tempfile::tempdir().unwrap();
    let upload = local.path().join("upload");
    fs::write(&upload, b"copied in through the empty mount path\n").unwrap();
    nfs_cp(&upload, empty("/copied-in")).assert_success("nfs-cp to nfs://127.0.0.1/copied-in");
    assert_eq!(fs::read(dir.join("copied-in")).unwrap(), b"copied in through the empty mount path\n");
    for url in [empty("/file"), server.url_for_path("//file", "")] {
        let out = nfs_cat(&url);
        out.assert_success(&format!("nfs-cat {url}"));
        assert_eq!(out.stdout, b"file contents", "{url}");
    }
    let back = local.path().join("back");
    nfs_cp(empty("/copied-in"), &back).assert_success("nfs-cp from nfs://127.0.0.1/copied-in");
    assert_eq!(fs::read(&back).unwrap(), fs::read(&upload).unwrap());

    // A client the access list leaves out gets nothing through the empty path either.
    let refusing = Server::eagernfs(&dir, &["-o", "rw,insecure,no_root_squash", "--allow", "127.0.0.2"]);
    for url in [
        refusing.url_for_path("/file", "auto-traverse-mounts=0"),
        refusing.url_for_path("//file", ""),
        refusing.url_for_path("/file", ""),
    ] {
        let out = nfs_cat(&url);
        assert!(!out.status.success(), "{url} read by a client outside the access list");
        assert_no_leak(&url, &out.stdout_text());
        assert!(!out.stdout_text().contains("file contents"), "{url}: {}", out.stdout_text());
    }
    assert!(
        nfs_cat(&refusing.url_for_path("//file", "")).stderr.contains("MNT3ERR_ACCES"),
        "refused at MOUNT"
    );
    assert!(
        nfs_cat(&refusing.url_for_path("/file", "auto-traverse-mounts=0")).stderr.contains("MNT3ERR_ACCES"),
        "the empty path is refused at MOUNT as `/` is"
    );
}

#[test]
fn symlinks_do_not_reach_outside_the_export() {
    let layout = Layout::new();
    let dir = layout.export();
    let link = |target: &str, name: &str| std::os::unix::fs::symlink(target, dir.join(name)).unwrap();
    link("/etc", "etc-link");
    link("/etc/passwd", "passwd-link");
    link("../../", "up-link");
    link("..", "parent-link");
    link("../outside-secret", "secret-link");
    let outer_name = layout.outer.path().file_name().unwrap().to_str().unwrap().to_owned();
    let server = Server::eagernfs(&dir, &[]);

    // Through the stock tools, which resolve symlinks in paths on the client side.
    for rel in [
        "/etc-link/passwd".to_string(),
        "/passwd-link".to_string(),
        "/up-link/etc/passwd".to_string(),
        format!("/up-link/{outer_name}/outside-secret"),
        "/parent-link/outside-secret".to_string(),
        "/secret-link".to_string(),
    ] {
        let cat = nfs_cat(&server.url(&rel));
        assert_no_leak(&format!("nfs-cat {rel}"), &cat.stdout_text());
    }
    for rel in ["/parent-link", "/up-link", "/etc-link"] {
        let ls = nfs_ls(&server.url(rel));
        assert_no_leak(&format!("nfs-ls {rel}"), &ls.stdout_text());
    }

    // Raw calls on the symlinks' own handles: a symlink is not a directory to look into and
    // not a file to read, whatever it points at.
    let mut op = Nfsop::start(&server.url(""));
    assert_eq!(op.ok("readlink /etc-link"), "/etc", "READLINK must return the text, unresolved");
    for (path, inner) in [("/etc-link", "passwd"), ("/parent-link", "outside-secret"), ("/up-link", "etc")] {
        let handle = op.ok(&format!("fh {path}"));
        let reply = op.cmd(&format!("lookup-raw {handle} {inner}"));
        assert!(!reply.is_ok(), "LOOKUP {inner} inside symlink {path} succeeded: {reply:?}");
        if let Reply::Ok(listing) = op.cmd(&format!("readdir-raw {handle}")) {
            panic!("READDIR of symlink {path} succeeded: {listing}");
        }
    }
    for path in ["/secret-link", "/passwd-link"] {
        let handle = op.ok(&format!("fh {path}"));
        match op.cmd(&format!("read-raw {handle} 0 4096")) {
            Reply::Ok(data) => panic!("READ of symlink {path} returned data: {}", hex_text(&data)),
            Reply::Err { .. } => {}
        }
    }
    // Opening through libnfs (client-side resolution against the export root) finds nothing
    // outside, or only things inside.
    for path in ["/secret-link", "/passwd-link"] {
        if let Reply::Ok(id) = op.cmd(&format!("open {path} r")) {
            let data = op.ok(&format!("pread {id} 0 4096"));
            assert_no_leak(&format!("open {path}"), &hex_text(&data));
        }
    }
}

/// Hex from nfsop's pread/read-raw output, as lossy text, for leak checks.
fn hex_text(payload: &str) -> String {
    let hex = payload.rsplit(' ').next().unwrap_or("");
    String::from_utf8_lossy(&from_hex(hex)).into_owned()
}

fn assert_bad_handle(op: &mut Nfsop, what: &str, handle: &str) {
    let kind = op.err(&format!("getattr-raw {handle}"));
    assert!(
        kind == "NFS3ERR_BADHANDLE" || kind == "NFS3ERR_STALE",
        "GETATTR of {what} gave {kind}, want NFS3ERR_BADHANDLE or NFS3ERR_STALE"
    );
}

#[test]
fn forged_file_handles_are_rejected() {
    let layout = Layout::new();
    let dir = layout.export();
    let server = Server::eagernfs(&dir, &["-o", "rw,no_root_squash"]);
    let mut op = Nfsop::start(&server.url(""));
    let valid = from_hex(&op.ok("fh /file"));
    assert!(!valid.is_empty() && valid.len() <= 64, "handle length {}", valid.len());
    op.ok(&format!("getattr-raw {}", to_hex(&valid)));

    // Random handles of several lengths, and the empty handle.
    for (seed, len) in [(1u64, 32usize), (2, 64), (3, 8), (4, valid.len())] {
        assert_bad_handle(
            &mut op,
            &format!("{len} random bytes (seed {seed})"),
            &to_hex(&random_bytes(seed, len)),
        );
    }
    assert_bad_handle(&mut op, "the empty handle", "-");
    // Longer than NFS3_FHSIZE: any error will do (GARBAGE_ARGS is right), success is not.
    let reply = op.cmd(&format!("getattr-raw {}", to_hex(&random_bytes(5, 65))));
    assert!(!reply.is_ok(), "a 65-byte handle was accepted: {reply:?}");

    // The valid handle with any single byte flipped must not name any file.
    for i in 0..valid.len() {
        let mut forged = valid.clone();
        forged[i] ^= 0x5a;
        assert_bad_handle(&mut op, &format!("the valid handle with byte {i} flipped"), &to_hex(&forged));
    }

    // Forged handles get nothing out of READ, WRITE or LOOKUP either.
    let mut flipped = valid.clone();
    *flipped.last_mut().unwrap() ^= 1;
    let forged = to_hex(&flipped);
    assert!(!op.cmd(&format!("read-raw {forged} 0 100")).is_ok(), "READ through a forged handle");
    assert!(
        !op.cmd(&format!("write-unstable-raw {forged} 0 hex:6576696c")).is_ok(),
        "WRITE through a forged handle"
    );
    assert!(!op.cmd(&format!("lookup-raw {forged} x")).is_ok(), "LOOKUP through a forged handle");
    let random = to_hex(&random_bytes(6, 32));
    assert!(!op.cmd(&format!("write-unstable-raw {random} 0 hex:6576696c")).is_ok());
    assert_eq!(fs::read(dir.join("file")).unwrap(), b"file contents", "a forged write landed");
}

fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>, u32)> {
    use std::os::unix::fs::MetadataExt;
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = fs::symlink_metadata(e.path()).unwrap();
            let data = if meta.is_file() { fs::read(e.path()).unwrap() } else { Vec::new() };
            (e.file_name().to_string_lossy().into_owned(), data, meta.mode())
        })
        .collect();
    entries.sort();
    entries
}

#[test]
fn read_only_export_refuses_every_write() {
    let layout = Layout::new();
    let dir = layout.export();
    fs::create_dir(dir.join("sub")).unwrap();
    // Permissions would allow everything, so only the read-only export can refuse.
    chmod(&dir, 0o777);
    chmod(&dir.join("file"), 0o666);
    let before = snapshot(&dir);
    let server = Server::eagernfs(&dir, &["-o", "ro,no_root_squash"]);
    let mut op = Nfsop::start(&server.url(""));

    for cmd in [
        "mkdir /newdir",
        "open /newfile wc 0644",
        "unlink /file",
        "rmdir /sub",
        "rename /file /moved",
        "link /file /hard",
        "symlink /file /sym",
        "chmod /file 0600",
        "truncate /file 0",
    ] {
        assert_eq!(op.err(cmd), "EROFS", "`{cmd}` on a read-only export");
    }
    let handle = op.ok("fh /file");
    assert_eq!(op.err(&format!("write-unstable-raw {handle} 0 hex:6576696c")), "NFS3ERR_ROFS");

    let scratch = tempfile::tempdir().unwrap();
    let local = scratch.path().join("upload");
    fs::write(&local, b"upload").unwrap();
    let up = nfs_cp(&local, server.url("/uploaded"));
    assert!(!up.status.success(), "nfs-cp onto a read-only export succeeded");

    // Reads still work.
    let cat = nfs_cat(&server.url("/file"));
    cat.assert_success("nfs-cat on a read-only export");
    assert_eq!(cat.stdout, b"file contents");
    drop(op);
    assert_eq!(snapshot(&dir), before, "the read-only export's directory changed");
}

#[test]
fn clients_outside_the_allow_list_cannot_mount() {
    let layout = Layout::new();
    if ganesha_override() && skip("clients_outside_the_allow_list_cannot_mount", "eagernfs --allow") {
        return;
    }
    let server = Server::eagernfs(&layout.export(), &["--allow", "10.0.0.0/8"]);
    let out = nfs_ls(&server.url(""));
    assert!(!out.status.success(), "nfs-ls from 127.0.0.1 mounted an export allowing only 10/8");
    assert!(!out.stdout_text().contains(INSIDE_MARKER));
    match Nfsop::try_start(&server.url("")) {
        Ok(_) => panic!("nfsop mounted from outside the allow list"),
        Err(reply) => assert_eq!(reply.err_kind(), Some("MOUNT"), "{reply:?}"),
    }
}

/// MOUNT resolves symbolic links inside the export as rpc.mountd does (issue 12, item 8), and
/// never lets one lead out: a link to `..`, to the export's parent, or to an absolute path
/// outside the export is refused.
#[test]
fn mount_follows_symlinks_inside_the_export_and_never_out() {
    let layout = Layout::new();
    let dir = layout.export();
    fs::create_dir_all(dir.join("subdir/subdir2")).unwrap();
    fs::write(dir.join("subdir/subdir2/deep-marker"), b"deep").unwrap();
    std::os::unix::fs::symlink("subdir", dir.join("link")).unwrap();
    std::os::unix::fs::symlink(dir.join("subdir"), dir.join("abslink")).unwrap();
    std::os::unix::fs::symlink("subdir/../subdir/subdir2", dir.join("dotted")).unwrap();
    std::os::unix::fs::symlink("..", dir.join("up")).unwrap();
    std::os::unix::fs::symlink(layout.outer.path(), dir.join("parent")).unwrap();
    std::os::unix::fs::symlink("/etc", dir.join("etc")).unwrap();
    std::os::unix::fs::symlink("loop", dir.join("loop")).unwrap();
    let server = Server::eagernfs(&dir, &[]);
    let canon = dir.canonicalize().unwrap();
    let d = canon.display();

    for path in [format!("{d}/link/subdir2"), format!("{d}/abslink/subdir2"), format!("{d}/dotted")] {
        let mut op = Nfsop::try_start(&server.url_for_path(&path, ""))
            .unwrap_or_else(|e| panic!("MOUNT {path} through a symlink inside the export: {e:?}"));
        let listing = op.ok("readdir /");
        assert!(listing.contains("deep-marker"), "{path} mounted something else: {listing}");
    }
    for path in [
        format!("{d}/up"),
        format!("{d}/up/export"),
        format!("{d}/parent"),
        format!("{d}/etc"),
        format!("{d}/link/../up"),
        format!("{d}/loop"),
    ] {
        let out = nfs_ls(&server.url_for_path(&path, ""));
        assert_no_leak(&format!("nfs-ls {path}"), &out.stdout_text());
        match Nfsop::try_start(&server.url_for_path(&path, "")) {
            Ok(mut op) => panic!("MOUNT {path} succeeded: {}", op.ok("readdir /")),
            Err(reply) => assert!(!reply.is_ok()),
        }
    }
}
