//! The MOUNT program on the wire (RFC 1813 Appendix I) and the export
//! access rules it shares with NFS: client address lists and `secure` ports.

mod common;

use bytes::Bytes;
use common::*;
use eagernfs_proto::mount::*;
use eagernfs_proto::nfs3::*;
use eagernfs_rpc::{AcceptStat, OpaqueAuth};
use eagernfs_xdr::Opaque;
use std::net::SocketAddr;

fn dirpath(p: &str) -> Dirpath {
    Opaque::new(Bytes::copy_from_slice(p.as_bytes())).unwrap()
}

fn dump(c: &mut Client) -> Vec<(String, String)> {
    let list: Mountlist = c.call(MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC_DUMP, &()).results();
    list.0
        .iter()
        .map(|m| {
            (
                String::from_utf8(m.ml_hostname.0.to_vec()).unwrap(),
                String::from_utf8(m.ml_directory.0.to_vec()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn mnt_export_path_alias_and_refusals() {
    let s = TestServer::start(vec![spec(
        7,
        &["/mem", "/"],
        "/mem 127.0.0.0/8(rw,insecure,no_root_squash)",
        memory(),
    )]);
    let mut c = s.client();
    let by_path = c.root("/mem");
    let by_alias = c.root("/");
    assert_eq!(by_path, by_alias, "both mount paths name the same root");
    // Redundant slashes and `.` are the same path.
    assert_eq!(c.root("//mem/./"), by_path);
    assert_eq!(c.attr(&by_path).ftype, Ftype3::Dir);
    // MNT v3 offers AUTH_SYS.
    let Mountres3::Ok(ok) = c.mnt("/mem") else { panic!() };
    assert!(ok.auth_flavors.contains(&1), "{:?}", ok.auth_flavors);

    // A subdirectory of the export is mountable; a missing one is not.
    let sub = c.mkdir(&by_path, "sub");
    assert_eq!(c.root("/mem/sub"), sub);
    assert_eq!(c.mnt("/mem/missing").status(), Mountstat3::Noent);
    // A file is not a directory to mount.
    c.create(&by_path, "file");
    assert_eq!(c.mnt("/mem/file").status(), Mountstat3::Notdir);

    // `..` never escapes, however it is spelled.
    for p in ["/mem/../etc", "/../etc", "/mem/sub/../../etc", ".."] {
        let st = c.mnt(p).status();
        assert_ne!(st, Mountstat3::Ok, "MNT {p:?} must be refused");
    }
}

#[test]
fn mnt_of_an_unexported_path_is_noent() {
    let s = TestServer::start(vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure)", memory())]);
    let mut c = s.client();
    assert_eq!(c.mnt("/etc").status(), Mountstat3::Noent);
    assert_eq!(c.mnt("/").status(), Mountstat3::Noent);
    // A prefix of the name is not the export.
    assert_eq!(c.mnt("/me").status(), Mountstat3::Noent);
    assert_eq!(c.mnt("/memory").status(), Mountstat3::Noent);
    // MNT v1 has no NFSv3 handle to give: refused, not a garbage handle.
    let r: Fhstatus = c.call(MOUNT_PROGRAM, MOUNT_V1, MOUNTPROC_MNT, &dirpath("/mem")).results();
    assert!(matches!(r, Fhstatus::Fail(_)), "{r:?}");
}

#[test]
fn a_client_outside_the_access_list_is_refused() {
    let s = TestServer::start(vec![spec(
        1,
        &["/only2"],
        "/only2 127.0.0.2(rw,insecure,no_root_squash)",
        memory(),
    )]);
    let from = |ip: [u8; 4]| Client::connect_from(s.addr, SocketAddr::from((ip, 0))).expect("connect");

    let mut allowed = from([127, 0, 0, 2]);
    let root = allowed.root("/only2");
    let file = allowed.create(&root, "f");
    assert!(matches!(allowed.getattr(&file), Getattr3Res::Ok(_)));

    let mut outsider = from([127, 0, 0, 9]);
    assert_eq!(outsider.mnt("/only2").status(), Mountstat3::Acces);
    // Handles obtained elsewhere are no key: every procedure says ACCES.
    match outsider.getattr(&root) {
        Getattr3Res::Fail(s, _) => assert_eq!(s, Nfsstat3::Acces),
        ok => panic!("outsider GETATTR succeeded: {ok:?}"),
    }
    assert_eq!(outsider.lookup(&root, "f").status(), Nfsstat3::Acces);
    assert_eq!(outsider.read(&file, 0, 10).status(), Nfsstat3::Acces);
    assert_eq!(outsider.write(&file, 0, b"x", StableHow::FileSync).status(), Nfsstat3::Acces);
    assert_eq!(outsider.remove(&root, "f").status(), Nfsstat3::Acces);
    // The file is still there and unchanged.
    assert_eq!(allowed.attr(&file).size, 0);
    assert!(matches!(allowed.lookup(&root, "f"), Lookup3Res::Ok(_)));
    // NULL stays open to anyone (clients probe with it).
    assert_eq!(outsider.call(NFS_PROGRAM, NFS_V3, 0, &()).accept_stat(), AcceptStat::Success);
}

#[test]
fn a_secure_export_wants_a_privileged_source_port() {
    let s = TestServer::start(vec![spec(1, &["/sec"], "/sec 127.0.0.0/8(rw,no_root_squash)", memory())]);
    let mut privileged = Client::connect_privileged(s.addr);
    assert!(privileged.local_addr().port() < 1024);
    let root = privileged.root("/sec");
    assert!(matches!(privileged.getattr(&root), Getattr3Res::Ok(_)));
    privileged.create(&root, "f");

    let mut high = s.client();
    assert!(high.local_addr().port() >= 1024);
    assert_eq!(high.mnt("/sec").status(), Mountstat3::Acces);
    match high.getattr(&root) {
        Getattr3Res::Fail(s, _) => assert_eq!(s, Nfsstat3::Perm),
        ok => panic!("GETATTR from an unprivileged port succeeded: {ok:?}"),
    }
    assert_eq!(high.lookup(&root, "f").status(), Nfsstat3::Perm);
    assert_eq!(high.remove(&root, "f").status(), Nfsstat3::Perm);
    assert!(matches!(privileged.lookup(&root, "f"), Lookup3Res::Ok(_)));
}

#[test]
fn dump_umnt_and_export() {
    let s = TestServer::start(vec![
        spec(1, &["/mem", "/alias"], "/mem 127.0.0.0/8(rw,insecure)", memory()),
        spec(2, &["/other"], "/other 127.0.0.3(ro,insecure)", memory()),
    ]);
    let mut c = s.client();
    c.cred = OpaqueAuth::none();
    assert!(dump(&mut c).is_empty(), "no mounts yet");
    c.cred = sys(0, 0);
    c.root("/mem");
    let host = c.local_addr().ip().to_string();
    assert_eq!(dump(&mut c), vec![(host.clone(), "/mem".to_string())]);
    // A refused MNT is not recorded.
    assert_eq!(c.mnt("/other").status(), Mountstat3::Acces);
    assert_eq!(c.mnt("/nope").status(), Mountstat3::Noent);
    assert_eq!(dump(&mut c), vec![(host.clone(), "/mem".to_string())]);

    let r = c.call(MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC_UMNT, &dirpath("/mem"));
    assert_eq!(r.accept_stat(), AcceptStat::Success);
    assert!(r.body.is_empty());
    assert!(dump(&mut c).is_empty(), "UMNT removes the entry");

    c.root("/mem");
    c.root("/alias");
    assert_eq!(dump(&mut c).len(), 2);
    let r = c.call(MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC_UMNTALL, &());
    assert_eq!(r.accept_stat(), AcceptStat::Success);
    assert!(dump(&mut c).is_empty(), "UMNTALL removes every entry of this host");

    let exports: Exports = c.call(MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC_EXPORT, &()).results();
    let dirs: Vec<String> =
        exports.0.iter().map(|e| String::from_utf8(e.ex_dir.0.to_vec()).unwrap()).collect();
    for want in ["/mem", "/alias", "/other"] {
        assert!(dirs.iter().any(|d| d == want), "EXPORT lacks {want}: {dirs:?}");
    }
    let other = exports.0.iter().find(|e| &e.ex_dir.0[..] == b"/other").unwrap();
    let groups: Vec<&[u8]> = other.ex_groups.0.iter().map(|g| &g.0[..]).collect();
    assert_eq!(groups, [&b"127.0.0.3"[..]], "EXPORT names the allowed clients");
    // MOUNT v1 EXPORT and DUMP work too.
    let v1: Exports = c.call(MOUNT_PROGRAM, MOUNT_V1, MOUNTPROC_EXPORT, &()).results();
    assert_eq!(v1, exports);
}

#[test]
fn the_empty_path_names_what_slash_names() {
    // One export that `/` names too, as `eagernfs serve DIR` sets it up.
    let s = TestServer::start(vec![spec(
        3,
        &["/mem", "/"],
        "/mem 127.0.0.0/8(rw,insecure,no_root_squash)",
        memory(),
    )]);
    let mut c = s.client();
    let by_slash = c.root("/");
    // libnfs's `nfs://host/file` sends MNT of "" (the path before the file's name).
    assert_eq!(c.root(""), by_slash, "MNT of the empty path gives the root `/` gives");
    assert_eq!(c.root("."), by_slash);
    assert_eq!(c.root("/mem"), by_slash);
    // MOUNT v1 answers both alike (no NFSv2 handle for either).
    let v1 = |c: &mut Client, p: &str| -> Fhstatus {
        c.call(MOUNT_PROGRAM, MOUNT_V1, MOUNTPROC_MNT, &dirpath(p)).results()
    };
    assert_eq!(v1(&mut c, ""), v1(&mut c, "/"));
    // DUMP and UMNT know them as one path: the mount of "" is the mount of `/`.
    let host = c.local_addr().ip().to_string();
    let listed = dump(&mut c);
    assert!(listed.contains(&(host.clone(), "/".to_string())), "{listed:?}");
    assert!(!listed.iter().any(|(_, p)| p.is_empty()), "{listed:?}");
    assert_eq!(listed.len(), 2, "`/` (also as `` and `.`) and /mem: {listed:?}");
    for (mount, unmount) in [("", "/"), ("/", "")] {
        c.root(mount);
        let r = c.call(MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC_UMNT, &dirpath(unmount));
        assert_eq!(r.accept_stat(), AcceptStat::Success);
        let left = dump(&mut c);
        assert!(
            !left.iter().any(|(_, p)| p == "/" || p.is_empty()),
            "MNT {mount:?}, UMNT {unmount:?}: {left:?}"
        );
    }

    // The empty path reaches nothing `/` does not: not past an access list, not an export
    // `/` does not name.
    let only2 = TestServer::start(vec![spec(1, &["/o", "/"], "/o 127.0.0.2(rw,insecure)", memory())]);
    let mut outsider =
        Client::connect_from(only2.addr, SocketAddr::from(([127, 0, 0, 9], 0))).expect("connect");
    assert_eq!(outsider.mnt("/").status(), Mountstat3::Acces);
    assert_eq!(outsider.mnt("").status(), Mountstat3::Acces);
    let mut inside =
        Client::connect_from(only2.addr, SocketAddr::from(([127, 0, 0, 2], 0))).expect("connect");
    assert_eq!(inside.root(""), inside.root("/"));
    let two = TestServer::start(vec![
        spec(1, &["/a"], "/a 127.0.0.0/8(rw,insecure)", memory()),
        spec(2, &["/b"], "/b 127.0.0.0/8(rw,insecure)", memory()),
    ]);
    let mut c = two.client();
    assert_eq!(c.mnt("/").status(), Mountstat3::Noent, "several exports: `/` names none");
    assert_eq!(c.mnt("").status(), Mountstat3::Noent);
}
