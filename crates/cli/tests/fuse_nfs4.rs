//! `eagernfs mount` over NFSv4.1/4.2 (issue 34): the version it negotiates and shows, the
//! round trips an untar, a cold `cat` and an `rm -r` cost per file (as `eagernfs stat` counts
//! them: COMPOUNDs), and an untar that goes on through kill -9 and restarts of the server
//! with no error and the same tree at the end. Needs root and /dev/fuse (skips otherwise).
//!
//! `EAGERNFS_RESTART_ROUNDS=N` (default 2) sets how many times the untar test kills the
//! server (`scripts/restart-untar.sh` runs it with 10).

#[macro_use]
mod common;

use common::*;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long an untar through the mount may take, kills and grace periods included (a debug
/// build on a busy machine).
const UNTAR_TIMEOUT: Duration = Duration::from_secs(600);

/// `eagernfs stat MOUNTPOINT`'s text.
fn stat_text(m: &FuseMount) -> String {
    let mut cmd = Command::new(eagernfs_bin());
    cmd.arg("stat").arg(&m.path);
    let out = run_command(cmd, MOUNT_TIMEOUT);
    out.assert_success("eagernfs stat MOUNTPOINT");
    out.stdout_text()
}

/// The round trips a mount made so far, from `eagernfs stat`'s text: the rows of its table of
/// calls (by NFSv3 procedure, or by the kind of NFSv4 COMPOUND), as scripts/bench-mount.sh adds
/// them.
fn round_trips_in(text: &str) -> u64 {
    table_rows(text).filter(|(name, _)| *name != "NULL").map(|(_, calls)| calls).sum()
}

/// The calls in the row `name` of `eagernfs stat`'s table of calls (0 if it has none).
fn row_calls(text: &str, name: &str) -> u64 {
    table_rows(text).filter(|(n, _)| *n == name).map(|(_, calls)| calls).sum()
}

/// The rows of `eagernfs stat`'s table of calls: name and calls.
fn table_rows(text: &str) -> impl Iterator<Item = (&str, u64)> {
    text.lines().filter_map(|l| {
        let mut w = l.split_whitespace();
        let name = w.next()?;
        let calls: u64 = w.next()?.parse().ok()?;
        name.chars().all(|c| c.is_ascii_uppercase() || c == '_').then_some((name, calls))
    })
}

/// A tree of `dirs` directories holding `per_dir` small files each (sizes from 0 to 20 KB, some
/// modes other than the default), and a symbolic link per directory, packed with tar.
fn make_tree(root: &Path, dirs: usize, per_dir: usize) -> PathBuf {
    let src = root.join("src");
    for d in 0..dirs {
        let dir = src.join(format!("d{d:03}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..per_dir {
            let seed = (d * 1000 + f) as u64;
            let len = (seed * 7919 % 20_000) as usize;
            let path = dir.join(format!("f{f:03}.h"));
            fs::write(&path, pattern_bytes(seed, 0, len)).unwrap();
            let mode = if f % 7 == 0 { 0o600 } else { 0o644 };
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        }
        std::os::unix::fs::symlink("f000.h", dir.join("link")).unwrap();
    }
    let tar = root.join("tree.tar");
    let out = run_tool("tar", ["-cf", tar.to_str().unwrap(), "-C", root.to_str().unwrap(), "src"]);
    out.assert_success("tar -cf");
    tar
}

/// Every name under `a` and `b`, with type, mode, size, mtime, owner and contents (or link
/// target): the first difference, if any.
fn tree_difference(a: &Path, b: &Path) -> Option<String> {
    fn walk(root: &Path, rel: &Path, out: &mut Vec<(PathBuf, String, Vec<u8>)>) {
        let mut names: Vec<_> =
            fs::read_dir(root.join(rel)).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        for n in names {
            let r = rel.join(&n);
            let p = root.join(&r);
            let md = fs::symlink_metadata(&p).unwrap();
            let ft = md.file_type();
            let (kind, content) = if ft.is_symlink() {
                ("link", fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes())
            } else if ft.is_dir() {
                ("dir", Vec::new())
            } else {
                ("file", fs::read(&p).unwrap())
            };
            let mtime = if ft.is_dir() { 0 } else { md.mtime() };
            let mode = if ft.is_symlink() { 0 } else { md.mode() };
            let desc = format!(
                "{kind} mode {mode:o} size {} mtime {mtime} owner {}:{}",
                content.len(),
                md.uid(),
                md.gid()
            );
            out.push((r.clone(), desc, content));
            if ft.is_dir() {
                walk(root, &r, out);
            }
        }
    }
    let (mut x, mut y) = (Vec::new(), Vec::new());
    walk(a, Path::new(""), &mut x);
    walk(b, Path::new(""), &mut y);
    for (i, (p, d, c)) in x.iter().enumerate() {
        let Some((q, e, k)) = y.get(i) else { return Some(format!("{} missing", p.display())) };
        if p != q {
            return Some(format!("{} where {} was expected", q.display(), p.display()));
        }
        if d != e || c != k {
            return Some(format!(
                "{}: {e} where the source has {d} (contents equal: {})",
                p.display(),
                c == k
            ));
        }
    }
    (y.len() > x.len()).then(|| format!("{} is extra", y[x.len()].0.display()))
}

#[test]
fn a_mount_negotiates_nfsv4_2_and_vers_3_still_gives_nfsv3() {
    require_fuse!("a_mount_negotiates_nfsv4_2_and_vers_3_still_gives_nfsv3");
    let export = tempfile::tempdir().unwrap();
    fs::write(export.path().join("f"), b"both versions").unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    if server.is_ganesha() && skip("a_mount_negotiates_nfsv4_2", "eagernfs's NFSv4.2") {
        return;
    }
    for (opts, version) in [("", "4.2"), ("vers=4.1", "4.1"), ("vers=3", "3")] {
        let m = FuseMount::new(&server.url(""), opts);
        assert_eq!(fs::read(m.path("f")).unwrap(), b"both versions");
        let text = stat_text(&m);
        assert!(text.contains(&format!("· NFSv{version} ·")), "-o {opts:?} speaks NFSv{version}:\n{text}");
        let mut cmd = Command::new(eagernfs_bin());
        cmd.args(["stat", "--json"]).arg(&m.path);
        let json: serde_json::Value =
            serde_json::from_str(&run_command(cmd, MOUNT_TIMEOUT).stdout_text()).unwrap();
        assert_eq!(json["version"], version);
        assert_eq!(json["nfs4"].is_object(), version != "3", "NFSv4's counters: {json}");
        if version != "3" {
            assert!(text.contains("operations sent in"), "{text}");
            assert!(text.lines().any(|l| l.starts_with("OPEN ")), "a row of OPEN COMPOUNDs:\n{text}");
        }
    }
}

/// nfs-ganesha serving NFSv4 only (no MOUNT, no NFSv3): the mount speaks NFSv4.x to it.
#[test]
fn a_mount_of_nfs_ganesha_serving_nfsv4_only_speaks_nfsv4() {
    require_fuse!("a_mount_of_nfs_ganesha_serving_nfsv4_only_speaks_nfsv4");
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    let Some(server) = Server::ganesha_nfs4_only(export.path()) else { return };
    let m = FuseMount::new(&server.url(""), "");
    let text = stat_text(&m);
    assert!(text.contains("· NFSv4."), "{text}");
    fs::create_dir(m.path("d")).unwrap();
    fs::write(m.path("d/f"), b"through ganesha").unwrap();
    assert_eq!(fs::read(export.path().join("d/f")).unwrap(), b"through ganesha");
    assert_eq!(fs::read(m.path("d/f")).unwrap(), b"through ganesha");
    // A tree walked from a fresh mount: listings are read ahead only under delegations of
    // directories, which ganesha does not grant; the walk sees the tree all the same.
    for i in 0..3 {
        fs::create_dir_all(export.path().join(format!("d/s{i}/t"))).unwrap();
    }
    drop(m);
    let m = FuseMount::new(&server.url(""), "");
    let walk = run_tool("find", [m.path("d").to_str().unwrap()]);
    walk.assert_success("find");
    assert_eq!(walk.stdout_text().lines().count(), 1 + 1 + 3 * 2, "{}", walk.stdout_text());
    let subdirs: Vec<String> =
        (0..3).map(|i| m.path(&format!("d/s{i}")).to_str().unwrap().to_string()).collect();
    run_tool("rm", std::iter::once("-r".to_string()).chain(subdirs)).assert_success("rm -r");
    fs::remove_file(m.path("d/f")).unwrap();
    fs::remove_dir(m.path("d")).unwrap();
    assert!(fs::read_dir(export.path()).unwrap().next().is_none(), "removed on the server");
}

/// Issue 34's round trips through the mount, for a tree of small files: an untar costs two
/// per file (OPEN that creates; WRITE + SETATTR + CLOSE at the close), a cold `cat` one (OPEN +
/// READ + CLOSE), an `rm -r` one (REMOVE), plus what the directories cost (MKDIR and tar's
/// three attribute changes per directory, a READDIR each for `find`, an RMDIR each) and the
/// symbolic links (SYMLINK and tar's two attribute changes).
#[test]
fn small_files_cost_two_round_trips_to_untar_and_one_to_cat_or_remove() {
    require_fuse!("small_files_cost_two_round_trips_to_untar_and_one_to_cat_or_remove");
    let work = tempfile::tempdir().unwrap();
    let (dirs, per_dir) = (4, 50);
    let files = (dirs * per_dir) as u64;
    let tar = make_tree(work.path(), dirs, per_dir);
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    if server.is_ganesha() && skip("small_files_cost_two_round_trips", "counts eagernfs's NFSv4.2") {
        return;
    }
    let m = FuseMount::new(&server.url(""), "");
    let before = stat_text(&m);
    run_tool("tar", ["-xf", tar.to_str().unwrap(), "-C", m.path.to_str().unwrap()]).assert_success("untar");
    let text = stat_text(&m);
    drop(m);
    assert!(tree_difference(&work.path().join("src"), &export.path().join("src")).is_none());
    // A file tar chmods after writing it (a mode other than the one it created it with) has
    // its data, held times and owner, and the chmod in one COMPOUND while still open; its
    // CLOSE is left to ride on the next COMPOUND of the same user (the next file's OPEN). A
    // CLOSE-only COMPOUND is one that waited the client's 50 ms (CLOSE_DELAY) with nothing to
    // ride on: correct behaviour (the server's open is not kept for long), which tar does not
    // wait for and whose count depends only on how long tar was kept off the CPU between a
    // close and its next call (none on an idle machine, a few under `stress-ng`): not counted
    // here. Before the fix of issue 34 such CLOSEs also went after 0-40 ms, when the client's
    // task that sends them woke on its own schedule (crates/client/tests/v4.rs tests that).
    let lone_closes = row_calls(&text, "CLOSE") - row_calls(&before, "CLOSE");
    let untar = round_trips_in(&text) - round_trips_in(&before) - lone_closes;
    // Per directory (and `src`): MKDIR, and tar's utimes, chown and chmod at the end; per
    // symbolic link (one per directory below `src`): SYMLINK, and tar's utimes and chown of
    // the link; and the LOOKUP that finds no `src`. (The empty file costs its OPEN and, at
    // close, a SETATTR carrying its times and owner: two as well.)
    let dir_calls = 4 * (dirs as u64 + 1) + 3 * dirs as u64 + 1;
    assert!(
        untar <= 2 * files + dir_calls,
        "untar of {files} files: {untar} round trips (and {lone_closes} CLOSEs alone)\n{text}"
    );

    // Cold: a new mount. Its attributes are trusted for 10 minutes (`actimeo`): with the
    // default `acregmin` of 3 s, a file whose listed attributes are older than that when `cat`
    // reaches it costs a GETATTR at the kernel's LOOKUP before its OPEN (correct: that is how
    // the client notices a file another client replaced), and on a busy machine `cat` of 200
    // files takes longer than 3 s (seen: 242 round trips; with 4 s between `find` and `cat`,
    // 407, a GETATTR and an OPEN per file). What is counted here is the files' own calls.
    let m = FuseMount::new(&server.url(""), "actimeo=600");
    let before = stat_text(&m);
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("find '{}' -type f -exec cat {{}} + > /dev/null", m.path("src").display()))
        .status()
        .unwrap();
    assert!(out.success());
    let text = stat_text(&m);
    let cat = round_trips_in(&text) - round_trips_in(&before);
    // A READDIR (and the LOOKUP that finds it) per directory.
    assert!(
        cat <= files + 2 * dirs as u64 + 5,
        "cold cat of {files} files: {cat} round trips\nbefore:\n{before}\nafter:\n{text}"
    );

    let before = text;
    fs::remove_dir_all(m.path("src")).unwrap();
    let text = stat_text(&m);
    let rm = round_trips_in(&text) - round_trips_in(&before);
    assert!(
        rm <= files + 3 * dirs as u64 + 5,
        "rm -r of {files} files: {rm} round trips\nbefore:\n{before}\nafter:\n{text}"
    );
    eprintln!(
        "{files} files: untar {:.2} (and {lone_closes} CLOSEs alone), cold cat {:.2}, rm -r {:.2} round trips per file",
        untar as f64 / files as f64,
        cat as f64 / files as f64,
        rm as f64 / files as f64
    );
}

/// Issue 34: kill -9 of the server, and a restart, while an untar runs through an NFSv4.1
/// mount: the untar finishes with no error and the tree is the same. The mount's client finds
/// the server's new boot, makes a new client id and session, reclaims its opens in the grace
/// period and sends again what had no answer.
#[test]
fn an_untar_through_an_nfsv4_1_mount_goes_on_through_kill_9_of_the_server() {
    require_fuse!("an_untar_through_an_nfsv4_1_mount_goes_on_through_kill_9_of_the_server");
    let rounds: usize =
        std::env::var("EAGERNFS_RESTART_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let work = tempfile::tempdir().unwrap();
    let (dirs, per_dir) = (12, 60);
    let files = dirs * per_dir;
    let tar = make_tree(work.path(), dirs, per_dir);
    let export = tempfile::tempdir().unwrap();
    let mut server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash", "--grace-period", "10"]);
    if server.is_ganesha() && skip("an_untar_through_an_nfsv4_1_mount", "kills eagernfs") {
        return;
    }
    let m = FuseMount::new(&server.url(""), "vers=4.1");
    let started = Instant::now();
    let mut untar = Command::new("tar")
        .args(["-xf", tar.to_str().unwrap(), "-C", m.path.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let landed = |export: &Path| -> usize {
        let src = export.join("src");
        fs::read_dir(&src)
            .map(|ds| ds.map_while(Result::ok).map(|d| fs::read_dir(d.path()).map_or(0, |f| f.count())).sum())
            .unwrap_or(0)
    };
    for round in 1..=rounds {
        // Kill at evenly spaced points of the untar (the server's disk shows how far it got).
        let at = files * round / (rounds + 1);
        let deadline = Instant::now() + UNTAR_TIMEOUT;
        while landed(export.path()) < at {
            assert!(
                untar.try_wait().unwrap().is_none(),
                "the untar ended before kill {round} (at {at} files)"
            );
            assert!(Instant::now() < deadline, "the untar did not reach {at} files");
            std::thread::sleep(Duration::from_millis(20));
        }
        server.crash_restart();
        eprintln!(
            "kill -9 {round} of {rounds} at {} files, {:?} in",
            landed(export.path()),
            started.elapsed()
        );
    }
    let status = wait_deadline(&mut untar, UNTAR_TIMEOUT).expect("the untar finishes");
    let mut err = String::new();
    std::io::Read::read_to_string(untar.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success() && err.is_empty(), "tar failed ({status}): {err}");
    eprintln!("untar of {files} files through {rounds} kills: {:?}", started.elapsed());
    let text = stat_text(&m);
    drop(m);
    if let Some(d) = tree_difference(&work.path().join("src"), &export.path().join("src")) {
        panic!("the tree differs after {rounds} kills: {d}\nmount statistics:\n{text}");
    }
}
