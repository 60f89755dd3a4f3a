//! `eagernfs ls`, `stat`, `mkdir` and `rm` end to end against `eagernfs serve`: a 1000-entry
//! directory lists every name exactly once (across several READDIRPLUS replies) with the
//! right sizes; `mkdir -p` and `rm -r` round-trip a tree; stat shows the attributes.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::fs;

fn eagernfs(args: &[&str]) -> ToolOutput {
    run_tool(env!("CARGO_BIN_EXE_eagernfs"), args)
}

#[test]
fn ls_lists_a_thousand_names_once_with_their_sizes() {
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let dir = server.dir().join("many");
    fs::create_dir(&dir).unwrap();
    let mut want = BTreeMap::new();
    for i in 0..1000usize {
        // Long-ish names so the listing needs several READDIRPLUS replies.
        let name = format!("entry-with-a-longish-name-{i:04}");
        let size = (i * 37) % 5000;
        fs::write(dir.join(&name), vec![b'x'; size]).unwrap();
        want.insert(name, size as u64);
    }
    fs::write(dir.join(".hidden"), b"h").unwrap();

    let url = server.url("/many");
    let out = eagernfs(&["ls", &url]);
    out.assert_success("ls");
    let names: Vec<String> = out.stdout_text().lines().map(str::to_owned).collect();
    let want_names: Vec<String> = want.keys().cloned().collect();
    assert_eq!(names, want_names, "every name once, sorted, dot files hidden");

    let out = eagernfs(&["ls", "-l", &url]);
    out.assert_success("ls -l");
    let text = out.stdout_text();
    let mut lines = text.lines();
    assert!(lines.next().is_some_and(|l| l.starts_with("total ")), "{text}");
    let mut seen = BTreeMap::new();
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.len(), 9, "mode links uid gid size month day time name: {line:?}");
        assert!(fields[0].starts_with("-rw"), "{line:?}");
        let size: u64 = fields[4].parse().unwrap();
        assert!(seen.insert(fields[8].to_string(), size).is_none(), "{} listed twice", fields[8]);
    }
    assert_eq!(seen, want, "ls -l names and sizes");

    let out = eagernfs(&["ls", "-a", &url]);
    out.assert_success("ls -a");
    assert!(out.stdout_text().lines().any(|l| l == ".hidden"), "-a shows dot files");

    // A file URL lists just that file.
    let one = eagernfs(&["ls", "-l", &server.url("/many/entry-with-a-longish-name-0003")]);
    one.assert_success("ls -l of a file");
    let line = one.stdout_text();
    assert_eq!(line.lines().count(), 1, "{line}");
    assert_eq!(line.split_whitespace().nth(4), Some("111"), "size of entry 3 is 3 * 37: {line}");
    assert!(line.trim_end().ends_with("entry-with-a-longish-name-0003"), "{line}");
}

#[test]
fn ls_recursive_and_symlinks() {
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    fs::create_dir_all(server.dir().join("t/sub/deeper")).unwrap();
    fs::write(server.dir().join("t/sub/deeper/f"), b"12345").unwrap();
    std::os::unix::fs::symlink("sub/deeper/f", server.dir().join("t/link")).unwrap();

    let url = server.url("/t");
    let out = eagernfs(&["ls", "-R", &url]);
    out.assert_success("ls -R");
    let text = out.stdout_text();
    let base = url.split('?').next().unwrap();
    let want = format!("{base}:\nlink\nsub\n\n{base}/sub:\ndeeper\n\n{base}/sub/deeper:\nf\n");
    assert_eq!(text, want);

    let out = eagernfs(&["ls", "-l", &url]);
    out.assert_success("ls -l");
    let text = out.stdout_text();
    let link = text.lines().find(|l| l.starts_with('l')).unwrap_or_else(|| panic!("no link line: {text}"));
    assert!(link.ends_with("link -> sub/deeper/f"), "{link}");
    let sub = text.lines().find(|l| l.ends_with(" sub")).unwrap();
    assert!(sub.starts_with("drwx"), "{sub}");
}

#[test]
fn mkdir_p_and_rm_r_round_trip() {
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);

    eagernfs(&["mkdir", "-p", &server.url("/a/b/c")]).assert_success("mkdir -p");
    assert!(server.dir().join("a/b/c").is_dir());
    eagernfs(&["mkdir", "-p", &server.url("/a/b/c")]).assert_success("mkdir -p of an existing tree");

    let again = eagernfs(&["mkdir", &server.url("/a/b")]);
    assert_eq!(again.status.code(), Some(1), "{}", again.stderr);
    assert!(again.stderr.contains("File exists"), "{}", again.stderr);
    let no_parent = eagernfs(&["mkdir", &server.url("/x/y")]);
    assert_eq!(no_parent.status.code(), Some(1), "{}", no_parent.stderr);
    assert!(no_parent.stderr.contains("No such file or directory"), "{}", no_parent.stderr);

    eagernfs(&["mkdir", "-m", "700", &server.url("/a/private")]).assert_success("mkdir -m");
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(server.dir().join("a/private")).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700);

    for (i, p) in ["a/f1", "a/b/f2", "a/b/c/f3"].iter().enumerate() {
        fs::write(server.dir().join(p), vec![b'z'; i * 1000]).unwrap();
    }
    std::os::unix::fs::symlink("nowhere", server.dir().join("a/b/dangling")).unwrap();

    let no_r = eagernfs(&["rm", &server.url("/a")]);
    assert_eq!(no_r.status.code(), Some(1), "{}", no_r.stderr);
    assert!(no_r.stderr.contains("Is a directory"), "{}", no_r.stderr);
    assert!(server.dir().join("a/b/c/f3").exists());

    eagernfs(&["rm", &server.url("/a/f1")]).assert_success("rm of a file");
    assert!(!server.dir().join("a/f1").exists());

    eagernfs(&["rm", "-r", &server.url("/a")]).assert_success("rm -r");
    assert!(!server.dir().join("a").exists(), "tree removed");

    let gone = eagernfs(&["rm", "-r", &server.url("/a")]);
    assert_eq!(gone.status.code(), Some(1), "{}", gone.stderr);
    assert!(gone.stderr.contains("No such file or directory"), "{}", gone.stderr);
    eagernfs(&["rm", "-f", &server.url("/a")]).assert_success("rm -f of a missing file");
}

#[test]
fn stat_shows_every_attribute() {
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let path = server.dir().join("f");
    fs::write(&path, vec![0u8; 12345]).unwrap();
    chmod(&path, 0o4751);
    let meta = fs::metadata(&path).unwrap();
    use std::os::unix::fs::MetadataExt;

    let out = eagernfs(&["stat", &server.url("/f")]);
    out.assert_success("stat");
    let text = out.stdout_text();
    assert!(text.contains("  File: f\n"), "{text}");
    assert!(text.contains("Size: 12345 "), "{text}");
    assert!(text.contains("regular file"), "{text}");
    assert!(text.contains("Access: (4751/-rwsr-x--x)"), "{text}");
    assert!(text.contains(&format!("Inode: {} ", meta.ino())), "{text}");
    assert!(text.contains(&format!("Uid: ({:>5})", meta.uid())), "{text}");
    assert!(text.contains(&format!("Links: {}", meta.nlink())), "{text}");
    for label in ["Access: 2", "Modify: 2", "Change: 2", "Used: ", "Fsid: ", "Handle: "] {
        assert!(text.contains(label), "missing {label:?}: {text}");
    }
    let missing = eagernfs(&["stat", &server.url("/nope")]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(missing.stderr.contains("No such file or directory (NFS3ERR_NOENT)"), "{}", missing.stderr);
}
