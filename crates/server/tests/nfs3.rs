//! NFSv3 semantics through the wire with the memory backend: all 22
//! procedures, READDIR(PLUS) paging, read-only exports, squashing and
//! forged file handles.

mod common;

use common::*;
use eagernfs_proto::nfs3::*;
use eagernfs_rpc::OpaqueAuth;
use eagernfs_xdr::Opaque;
use std::collections::HashSet;

/// The permission bits a read-only export must never grant.
const WRITE_BITS: u32 = ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE;

fn rw_server() -> TestServer {
    TestServer::start(vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", memory())])
}

fn lookup_fh(c: &mut Client, dir: &NfsFh3, name: &str) -> NfsFh3 {
    match c.lookup(dir, name) {
        Lookup3Res::Ok(ok) => ok.object,
        Lookup3Res::Fail(s, _) => panic!("LOOKUP {name} failed: {s:?}"),
    }
}

fn fileid_at(c: &mut Client, dir: &NfsFh3, name: &str) -> u64 {
    let h = lookup_fh(c, dir, name);
    c.attr(&h).fileid
}

fn sattr_mode(mode: u32) -> Sattr3 {
    Sattr3 { mode: Some(mode), ..Default::default() }
}

#[test]
fn every_procedure_with_checked_results() {
    let s = rw_server();
    let mut c = s.client();
    let root = c.root("/mem");

    // NULL (0) and GETATTR (1).
    let r = c.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &());
    assert!(r.body.is_empty());
    let root_attr = c.attr(&root);
    assert_eq!(root_attr.ftype, Ftype3::Dir);
    assert_eq!(root_attr.mode, 0o755);

    // CREATE (8) UNCHECKED with a mode; the reply carries handle, attributes and dir wcc.
    let how = Createhow3::Unchecked(sattr_mode(0o640));
    let Create3Res::Ok(created) = c.create_how(&root, "a", how) else { panic!("CREATE a") };
    let a = created.obj.clone().expect("handle");
    let a_attr = created.obj_attributes.expect("attributes");
    assert_eq!((a_attr.ftype, a_attr.mode, a_attr.size, a_attr.uid), (Ftype3::Reg, 0o640, 0, 0));
    assert!(created.dir_wcc.after.is_some(), "CREATE reports the directory's new attributes");
    // GUARDED over an existing name: EXIST.
    let guarded = c.create_how(&root, "a", Createhow3::Guarded(Sattr3::default()));
    assert_eq!(guarded.status(), Nfsstat3::Exist);

    // LOOKUP (3): the same object, and NOENT with the directory's attributes.
    let Lookup3Res::Ok(found) = c.lookup(&root, "a") else { panic!("LOOKUP a") };
    assert_eq!(found.object, a);
    assert_eq!(found.obj_attributes.unwrap().fileid, a_attr.fileid);
    match c.lookup(&root, "missing") {
        Lookup3Res::Fail(s, fail) => {
            assert_eq!(s, Nfsstat3::Noent);
            assert_eq!(fail.dir_attributes.unwrap().fileid, root_attr.fileid);
        }
        ok => panic!("LOOKUP of a missing name succeeded: {ok:?}"),
    }
    // `..` of the root is the root.
    assert_eq!(fileid_at(&mut c, &root, ".."), root_attr.fileid);

    // WRITE (7) UNSTABLE and FILE_SYNC, READ (6), COMMIT (21).
    let Write3Res::Ok(w1) = c.write(&a, 0, b"hello ", StableHow::Unstable) else { panic!("WRITE") };
    assert_eq!(w1.count, 6);
    let Write3Res::Ok(w2) = c.write(&a, 6, b"world", StableHow::FileSync) else { panic!("WRITE") };
    assert_eq!(w2.committed, StableHow::FileSync, "FILE_SYNC asked, FILE_SYNC given");
    assert_eq!(w2.verf, w1.verf);
    assert_eq!(w2.file_wcc.after.unwrap().size, 11);
    let Read3Res::Ok(rd) = c.read(&a, 0, 100) else { panic!("READ") };
    assert_eq!((&rd.data[..], rd.count, rd.eof), (&b"hello world"[..], 11, true));
    let Read3Res::Ok(rd) = c.read(&a, 6, 3) else { panic!("READ") };
    assert_eq!((&rd.data[..], rd.eof), (&b"wor"[..], false));
    let Read3Res::Ok(rd) = c.read(&a, 1000, 10) else { panic!("READ past the end") };
    assert_eq!((rd.count, rd.eof), (0, true));
    let commit: Commit3Res = c.nfs(NFSPROC3_COMMIT, &Commit3Args { file: a.clone(), offset: 0, count: 0 });
    let Commit3Res::Ok(commit) = commit else { panic!("COMMIT: {commit:?}") };
    assert_eq!(commit.verf, w1.verf, "COMMIT verifier equals WRITE's");
    // A WRITE whose count exceeds the data sent is refused, not padded.
    let mut short = write_args(&a, 0, b"xy", StableHow::FileSync);
    short.count = 10;
    assert_eq!(c.nfs::<_, Write3Res>(NFSPROC3_WRITE, &short).status(), Nfsstat3::Inval);
    assert_eq!(c.attr(&a).size, 11);

    // SETATTR (2): a guard with the wrong ctime is NOT_SYNC and changes nothing.
    let ctime = c.attr(&a).ctime;
    let wrong = Nfstime3 { seconds: ctime.seconds.wrapping_sub(1000), nseconds: ctime.nseconds };
    match c.setattr(&a, sattr_mode(0o600), Some(wrong)) {
        Setattr3Res::Fail(s, _) => assert_eq!(s, Nfsstat3::NotSync),
        ok => panic!("SETATTR with a stale guard succeeded: {ok:?}"),
    }
    assert_eq!(c.attr(&a).mode, 0o640);
    let Setattr3Res::Ok(set) = c.setattr(&a, sattr_mode(0o600), Some(ctime)) else {
        panic!("guarded SETATTR")
    };
    assert_eq!(set.obj_wcc.after.unwrap().mode, 0o600);
    let truncate = Sattr3 { size: Some(5), ..Default::default() };
    assert!(matches!(c.setattr(&a, truncate, None), Setattr3Res::Ok(_)));
    let Read3Res::Ok(rd) = c.read(&a, 0, 100) else { panic!("READ") };
    assert_eq!(&rd.data[..], b"hello");

    // EXCLUSIVE CREATE: a retransmission (same verifier) succeeds with the
    // same file; another client's verifier is EXIST.
    let verf = *b"verf0001";
    let Create3Res::Ok(x1) = c.create_how(&root, "x", Createhow3::Exclusive(verf)) else {
        panic!("EXCLUSIVE")
    };
    let Create3Res::Ok(x2) = c.create_how(&root, "x", Createhow3::Exclusive(verf)) else {
        panic!("EXCLUSIVE retried with the same verifier must succeed")
    };
    let (x1, x2) = (x1.obj.unwrap(), x2.obj.unwrap());
    assert_eq!(c.attr(&x1).fileid, c.attr(&x2).fileid);
    let other = c.create_how(&root, "x", Createhow3::Exclusive(*b"verf0002"));
    assert_eq!(other.status(), Nfsstat3::Exist);

    // MKDIR (9).
    let d = c.mkdir(&root, "d");
    assert_eq!(c.attr(&d).ftype, Ftype3::Dir);
    let again: Mkdir3Res =
        c.nfs(NFSPROC3_MKDIR, &Mkdir3Args { where_: diropargs(&root, "d"), attributes: Sattr3::default() });
    assert_eq!(again.status(), Nfsstat3::Exist);

    // SYMLINK (10) and READLINK (5).
    let target = "../some/where";
    let args = Symlink3Args {
        where_: diropargs(&root, "l"),
        symlink: Symlinkdata3 {
            symlink_attributes: Sattr3::default(),
            symlink_data: Opaque::from_static(b"../some/where"),
        },
    };
    let Symlink3Res::Ok(sl) = c.nfs(NFSPROC3_SYMLINK, &args) else { panic!("SYMLINK") };
    let l = sl.obj.unwrap();
    let la = c.attr(&l);
    assert_eq!((la.ftype, la.size), (Ftype3::Lnk, target.len() as u64));
    let Readlink3Res::Ok(rl) = c.nfs(NFSPROC3_READLINK, &Readlink3Args { symlink: l.clone() }) else {
        panic!("READLINK")
    };
    assert_eq!(&rl.data.0[..], target.as_bytes());
    // READLINK of a regular file is an error.
    let not_link: Readlink3Res = c.nfs(NFSPROC3_READLINK, &Readlink3Args { symlink: a.clone() });
    assert_ne!(not_link.status(), Nfsstat3::Ok);

    // MKNOD (11): a FIFO; a regular file through MKNOD is BADTYPE.
    let args = Mknod3Args { where_: diropargs(&root, "p"), what: Mknoddata3::Fifo(sattr_mode(0o644)) };
    let Mknod3Res::Ok(mk) = c.nfs(NFSPROC3_MKNOD, &args) else { panic!("MKNOD FIFO") };
    assert_eq!(c.attr(&mk.obj.unwrap()).ftype, Ftype3::Fifo);
    let args = Mknod3Args { where_: diropargs(&root, "r"), what: Mknoddata3::Reg };
    assert_eq!(c.nfs::<_, Mknod3Res>(NFSPROC3_MKNOD, &args).status(), Nfsstat3::Badtype);

    // LINK (15): a second name, nlink 2.
    let args = Link3Args { file: a.clone(), link: diropargs(&d, "a2") };
    let Link3Res::Ok(ln) = c.nfs(NFSPROC3_LINK, &args) else { panic!("LINK") };
    if let Some(fa) = ln.file_attributes {
        assert_eq!(fa.nlink, 2);
    }
    assert_eq!(c.attr(&a).nlink, 2);
    assert_eq!(fileid_at(&mut c, &d, "a2"), a_attr.fileid);

    // RENAME (14): the object moves, keeping its identity.
    let args = Rename3Args { from: diropargs(&root, "a"), to: diropargs(&root, "b") };
    assert!(matches!(c.nfs(NFSPROC3_RENAME, &args), Rename3Res::Ok(_)));
    assert_eq!(c.lookup(&root, "a").status(), Nfsstat3::Noent);
    assert_eq!(fileid_at(&mut c, &root, "b"), a_attr.fileid);
    assert_eq!(c.attr(&a).fileid, a_attr.fileid, "the handle survives RENAME");

    // RMDIR (13) of a non-empty directory, REMOVE (12), then RMDIR.
    let rmdir = |c: &mut Client, n: &str| -> Rmdir3Res {
        c.nfs(NFSPROC3_RMDIR, &Rmdir3Args { object: diropargs(&root, n) })
    };
    assert_eq!(rmdir(&mut c, "d").status(), Nfsstat3::Notempty);
    assert!(matches!(c.remove(&d, "a2"), Remove3Res::Ok(_)));
    assert_eq!(c.attr(&a).nlink, 1);
    assert!(matches!(rmdir(&mut c, "d"), Rmdir3Res::Ok(_)));
    assert_eq!(c.lookup(&root, "d").status(), Nfsstat3::Noent);
    assert!(matches!(c.remove(&root, "b"), Remove3Res::Ok(_)));
    assert_eq!(c.remove(&root, "b").status(), Nfsstat3::Noent);
    assert_eq!(c.getattr(&a).status(), Nfsstat3::Stale, "a removed file's handle is stale");
    assert_ne!(rmdir(&mut c, "x").status(), Nfsstat3::Ok, "RMDIR of a file");

    // ACCESS (4): root gets what it asks on its file; uid 1000 only reads the root-owned 0755 root.
    let Access3Res::Ok(acc) = c.access(&x1, ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND) else { panic!() };
    assert_eq!(acc.access, ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND);
    let mut user = s.client();
    user.cred = sys(1000, 1000);
    let Access3Res::Ok(acc) = user.access(&root, ACCESS3_ALL) else { panic!() };
    assert_eq!(acc.access & (ACCESS3_READ | ACCESS3_LOOKUP), ACCESS3_READ | ACCESS3_LOOKUP);
    assert_eq!(acc.access & WRITE_BITS, 0, "uid 1000 may not change a root-owned 0755 directory");
    assert_eq!(
        user.create_how(&root, "u", Createhow3::Unchecked(Sattr3::default())).status(),
        Nfsstat3::Acces
    );

    // READDIR (16) and READDIRPLUS (17) of a small directory.
    let Readdir3Res::Ok(rd) = c.nfs(
        NFSPROC3_READDIR,
        &Readdir3Args { dir: root.clone(), cookie: 0, cookieverf: [0; 8], count: 8192 },
    ) else {
        panic!("READDIR")
    };
    let names: HashSet<Vec<u8>> = rd.reply.entries.iter().map(|e| e.name.0.to_vec()).collect();
    let want: HashSet<Vec<u8>> = [".", "..", "x", "l", "p"].iter().map(|n| n.as_bytes().to_vec()).collect();
    assert_eq!(names, want);
    assert!(rd.reply.eof);
    let args = Readdirplus3Args {
        dir: root.clone(),
        cookie: 0,
        cookieverf: [0; 8],
        dircount: 8192,
        maxcount: 32768,
    };
    let Readdirplus3Res::Ok(rdp) = c.nfs(NFSPROC3_READDIRPLUS, &args) else { panic!("READDIRPLUS") };
    let x_entry = rdp.reply.entries.iter().find(|e| &e.name.0[..] == b"x").expect("x listed");
    assert_eq!(x_entry.name_attributes.unwrap().fileid, c.attr(&x1).fileid);
    assert_eq!(c.attr(x_entry.name_handle.as_ref().unwrap()).fileid, c.attr(&x1).fileid);

    // FSSTAT (18), FSINFO (19), PATHCONF (20).
    let Fsstat3Res::Ok(st) = c.nfs(NFSPROC3_FSSTAT, &Fsstat3Args { fsroot: root.clone() }) else { panic!() };
    assert!(st.tbytes >= st.fbytes && st.fbytes >= st.abytes && st.tbytes > 0, "{st:?}");
    assert!(st.tfiles >= st.ffiles && st.tfiles > 0);
    let Fsinfo3Res::Ok(fi) = c.nfs(NFSPROC3_FSINFO, &Fsinfo3Args { fsroot: root.clone() }) else { panic!() };
    assert!(fi.rtmax >= 1 << 20 && fi.wtmax >= 1 << 20, "rtmax {} wtmax {}", fi.rtmax, fi.wtmax);
    assert!(fi.rtpref <= fi.rtmax && fi.wtpref <= fi.wtmax && fi.maxfilesize > 0);
    assert_eq!(fi.properties & (FSF3_LINK | FSF3_SYMLINK), FSF3_LINK | FSF3_SYMLINK);
    let Pathconf3Res::Ok(pc) = c.nfs(NFSPROC3_PATHCONF, &Pathconf3Args { object: root.clone() }) else {
        panic!()
    };
    assert_eq!(pc.name_max, 255);
    assert!(pc.no_trunc && pc.linkmax >= 1);

    // Names the server must not accept.
    for bad in ["", "a/b", ".", ".."] {
        let st = c.create_how(&root, bad, Createhow3::Unchecked(Sattr3::default())).status();
        assert_ne!(st, Nfsstat3::Ok, "CREATE {bad:?}");
    }
    assert_eq!(c.lookup(&root, "a/b").status(), Nfsstat3::Inval);

    for p in 0..22 {
        assert!(s.stats.nfs3(p) >= 1, "procedure {p} was not exercised");
    }
}

/// Create `n` files named `f00000`… in `dir`, pipelined in batches.
fn populate(c: &mut Client, dir: &NfsFh3, n: usize) -> HashSet<String> {
    let names: Vec<String> = (0..n).map(|i| format!("f{i:05}")).collect();
    for batch in names.chunks(100) {
        let calls: Vec<_> = batch
            .iter()
            .map(|nm| {
                let a =
                    Create3Args { where_: diropargs(dir, nm), how: Createhow3::Guarded(Sattr3::default()) };
                (NFS_PROGRAM, NFS_V3, NFSPROC3_CREATE, enc(&a))
            })
            .collect();
        let (_, replies) = c.pipeline(&calls);
        for r in replies.values() {
            assert!(matches!(r.results::<Create3Res>(), Create3Res::Ok(_)));
        }
    }
    names.into_iter().collect()
}

#[test]
fn readdir_and_readdirplus_page_through_5000_entries() {
    let s = rw_server();
    let mut c = s.client();
    let root = c.root("/mem");
    let dir = c.mkdir(&root, "big");
    let mut want = populate(&mut c, &dir, 5000);
    want.insert(".".into());
    want.insert("..".into());

    // READDIR with a 1 KiB reply limit.
    let (mut cookie, mut verf, mut seen, mut calls) = (0u64, [0u8; 8], HashSet::new(), 0);
    loop {
        let count = 1024;
        let r = c.call(
            NFS_PROGRAM,
            NFS_V3,
            NFSPROC3_READDIR,
            &Readdir3Args { dir: dir.clone(), cookie, cookieverf: verf, count },
        );
        assert!(
            r.body.len() <= count as usize,
            "READDIR reply of {} bytes exceeds count {count}",
            r.body.len()
        );
        let Readdir3Res::Ok(ok) = r.results() else { panic!("READDIR at cookie {cookie}") };
        calls += 1;
        for e in &ok.reply.entries {
            let n = String::from_utf8(e.name.0.to_vec()).unwrap();
            assert!(seen.insert(n.clone()), "{n} listed twice");
        }
        if ok.reply.eof {
            break;
        }
        assert!(!ok.reply.entries.is_empty(), "no progress and no eof");
        cookie = ok.reply.entries.last().unwrap().cookie;
        verf = ok.cookieverf;
        assert!(calls < 5000, "READDIR does not end");
    }
    assert_eq!(seen, want);
    assert!(calls > 50, "1 KiB pages: expected many calls, got {calls}");

    // A cookie with a verifier the server never issued: BAD_COOKIE.
    let mut forged = verf;
    forged[7] ^= 0x55;
    forged[0] |= 1;
    let bad: Readdir3Res =
        c.nfs(NFSPROC3_READDIR, &Readdir3Args { dir: dir.clone(), cookie, cookieverf: forged, count: 1024 });
    assert_eq!(bad.status(), Nfsstat3::BadCookie);

    // READDIRPLUS with small dircount and maxcount; attributes and handles match.
    let (mut cookie, mut verf, mut seen) = (0u64, [0u8; 8], HashSet::new());
    loop {
        let maxcount = 4096;
        let args = Readdirplus3Args { dir: dir.clone(), cookie, cookieverf: verf, dircount: 512, maxcount };
        let r = c.call(NFS_PROGRAM, NFS_V3, NFSPROC3_READDIRPLUS, &args);
        assert!(r.body.len() <= maxcount as usize, "READDIRPLUS reply exceeds maxcount");
        let Readdirplus3Res::Ok(ok) = r.results() else { panic!("READDIRPLUS at cookie {cookie}") };
        for e in &ok.reply.entries {
            let n = String::from_utf8(e.name.0.to_vec()).unwrap();
            if let Some(a) = &e.name_attributes {
                assert_eq!(a.fileid, e.fileid, "{n}: attributes of another file");
            }
            assert!(seen.insert(n.clone()), "{n} listed twice");
        }
        if ok.reply.eof {
            break;
        }
        assert!(!ok.reply.entries.is_empty(), "no progress and no eof");
        cookie = ok.reply.entries.last().unwrap().cookie;
        verf = ok.cookieverf;
    }
    assert_eq!(seen, want);

    // A count too small for even one entry.
    let tiny: Readdir3Res =
        c.nfs(NFSPROC3_READDIR, &Readdir3Args { dir: dir.clone(), cookie: 0, cookieverf: [0; 8], count: 60 });
    assert_eq!(tiny.status(), Nfsstat3::Toosmall);
    let args =
        Readdirplus3Args { dir: dir.clone(), cookie: 0, cookieverf: [0; 8], dircount: 60, maxcount: 100 };
    assert_eq!(c.nfs::<_, Readdirplus3Res>(NFSPROC3_READDIRPLUS, &args).status(), Nfsstat3::Toosmall);
    // READDIR of a file is NOTDIR.
    let f = lookup_fh(&mut c, &dir, "f00000");
    let notdir: Readdir3Res =
        c.nfs(NFSPROC3_READDIR, &Readdir3Args { dir: f, cookie: 0, cookieverf: [0; 8], count: 4096 });
    assert_eq!(notdir.status(), Nfsstat3::Notdir);
}

/// Exports over one shared backend, with different options.
fn shared_server() -> TestServer {
    let backend = memory();
    TestServer::start(vec![
        spec(1, &["/rw"], "/rw 127.0.0.0/8(rw,insecure,no_root_squash)", backend.clone()),
        spec(2, &["/ro"], "/ro 127.0.0.0/8(ro,insecure,no_root_squash)", backend.clone()),
        spec(3, &["/squash"], "/squash 127.0.0.0/8(rw,insecure,root_squash)", backend.clone()),
        spec(4, &["/all"], "/all 127.0.0.0/8(rw,insecure,all_squash,anonuid=1234,anongid=4321)", backend),
    ])
}

#[test]
fn a_read_only_export_refuses_every_change() {
    let s = shared_server();
    let mut admin = s.client();
    let rw_root = admin.root("/rw");
    let f = admin.create(&rw_root, "f");
    admin.write(&f, 0, b"keep", StableHow::FileSync);
    admin.mkdir(&rw_root, "d");

    let mut c = s.client();
    let root = c.root("/ro");
    let f = lookup_fh(&mut c, &root, "f");
    let Read3Res::Ok(rd) = c.read(&f, 0, 10) else { panic!("READ on a ro export") };
    assert_eq!(&rd.data[..], b"keep");

    assert_eq!(c.write(&f, 0, b"XXXX", StableHow::FileSync).status(), Nfsstat3::Rofs);
    assert_eq!(c.create_how(&root, "new", Createhow3::Unchecked(Sattr3::default())).status(), Nfsstat3::Rofs);
    assert_eq!(c.create_how(&root, "new", Createhow3::Exclusive([1; 8])).status(), Nfsstat3::Rofs);
    assert_eq!(c.setattr(&f, sattr_mode(0o777), None).status(), Nfsstat3::Rofs);
    assert_eq!(c.setattr(&f, Sattr3 { size: Some(0), ..Default::default() }, None).status(), Nfsstat3::Rofs);
    assert_eq!(c.remove(&root, "f").status(), Nfsstat3::Rofs);
    let st = |r: Nfsstat3| assert_eq!(r, Nfsstat3::Rofs);
    st(c.nfs::<_, Mkdir3Res>(
        NFSPROC3_MKDIR,
        &Mkdir3Args { where_: diropargs(&root, "m"), attributes: Sattr3::default() },
    )
    .status());
    st(c.nfs::<_, Rmdir3Res>(NFSPROC3_RMDIR, &Rmdir3Args { object: diropargs(&root, "d") }).status());
    st(c.nfs::<_, Rename3Res>(
        NFSPROC3_RENAME,
        &Rename3Args { from: diropargs(&root, "f"), to: diropargs(&root, "g") },
    )
    .status());
    st(c.nfs::<_, Link3Res>(NFSPROC3_LINK, &Link3Args { file: f.clone(), link: diropargs(&root, "h") })
        .status());
    let sym = Symlink3Args {
        where_: diropargs(&root, "s"),
        symlink: Symlinkdata3 {
            symlink_attributes: Sattr3::default(),
            symlink_data: Opaque::from_static(b"t"),
        },
    };
    st(c.nfs::<_, Symlink3Res>(NFSPROC3_SYMLINK, &sym).status());
    let node = Mknod3Args { where_: diropargs(&root, "p"), what: Mknoddata3::Fifo(Sattr3::default()) };
    st(c.nfs::<_, Mknod3Res>(NFSPROC3_MKNOD, &node).status());

    // ACCESS never grants a change, on files or directories, whoever asks.
    for obj in [&root, &f] {
        let Access3Res::Ok(acc) = c.access(obj, ACCESS3_ALL) else { panic!("ACCESS") };
        assert_eq!(acc.access & WRITE_BITS, 0, "ro export granted {:#x}", acc.access);
        assert_ne!(acc.access & ACCESS3_READ, 0);
    }

    // Nothing changed, as seen through the rw export.
    let f_rw = lookup_fh(&mut admin, &rw_root, "f");
    let Read3Res::Ok(rd) = admin.read(&f_rw, 0, 10) else { panic!() };
    assert_eq!(&rd.data[..], b"keep");
    for n in ["f", "d"] {
        assert!(matches!(admin.lookup(&rw_root, n), Lookup3Res::Ok(_)));
    }
    for n in ["new", "m", "g", "h", "s", "p"] {
        assert_eq!(admin.lookup(&rw_root, n).status(), Nfsstat3::Noent, "{n} was created on a ro export");
    }
}

#[test]
fn squash_options_map_callers() {
    let s = shared_server();
    let mut admin = s.client();
    let rw_root = admin.root("/rw");
    // Let everyone create in the root, and keep one file root-only.
    assert!(matches!(admin.setattr(&rw_root, sattr_mode(0o777), None), Setattr3Res::Ok(_)));
    let secret = admin.create(&rw_root, "secret");
    admin.write(&secret, 0, b"s3cret", StableHow::FileSync);
    assert!(matches!(admin.setattr(&secret, sattr_mode(0o600), None), Setattr3Res::Ok(_)));

    // root_squash: uid 0 becomes 65534:65534.
    let mut root_caller = s.client();
    let sq_root = root_caller.root("/squash");
    let f = root_caller.create(&sq_root, "by_squashed_root");
    let a = root_caller.attr(&f);
    assert_eq!((a.uid, a.gid), (65534, 65534));
    // …and so may not read root's 0600 file.
    let secret_sq = lookup_fh(&mut root_caller, &sq_root, "secret");
    assert_eq!(root_caller.read(&secret_sq, 0, 10).status(), Nfsstat3::Acces);
    // Other users are untouched by root_squash.
    let mut user = s.client();
    user.cred = sys(1000, 100);
    let f = user.create(&sq_root, "by_1000");
    let a = user.attr(&f);
    assert_eq!((a.uid, a.gid), (1000, 100));
    // The same uid 0 over the no_root_squash export stays root.
    let Read3Res::Ok(rd) = admin.read(&secret, 0, 10) else { panic!("root READ") };
    assert_eq!(&rd.data[..], b"s3cret");

    // all_squash,anonuid=1234,anongid=4321: everyone is 1234:4321.
    let all_root = user.root("/all");
    let f = user.create(&all_root, "by_1000_all");
    let a = user.attr(&f);
    assert_eq!((a.uid, a.gid), (1234, 4321));
    let f = root_caller.create(&all_root, "by_root_all");
    assert_eq!(root_caller.attr(&f).uid, 1234);

    // AUTH_NONE is anonymous: 65534 on the rw export (even with no_root_squash)…
    let mut anon = s.client();
    anon.cred = OpaqueAuth::none();
    let f = anon.create(&rw_root, "by_anon");
    let a = anon.attr(&f);
    assert_eq!((a.uid, a.gid), (65534, 65534));
    assert_eq!(anon.read(&secret, 0, 10).status(), Nfsstat3::Acces);
    // …and the export's anonuid where one is set.
    let f = anon.create(&all_root, "by_anon_all");
    assert_eq!(anon.attr(&f).uid, 1234);
}

#[test]
fn forged_handles_never_succeed() {
    let (a, b) = (memory(), memory());
    let s = TestServer::start(vec![
        spec(0x0a0a_0a0a, &["/a"], "/a 127.0.0.0/8(rw,insecure,no_root_squash)", a),
        spec(0x0b0b_0b0b, &["/b"], "/b 127.0.0.0/8(rw,insecure,no_root_squash)", b),
    ]);
    let mut c = s.client();
    let root_a = c.root("/a");
    let root_b = c.root("/b");
    let file = c.create(&root_a, "f");
    c.write(&file, 0, b"data", StableHow::FileSync);
    let valid = file.data.0.to_vec();
    assert!(valid.len() > 4);

    let mut forged: Vec<Vec<u8>> = vec![
        (0..32).map(|_| rand::random::<u8>()).collect(),
        vec![],
        vec![0x0a, 0x0a, 0x0a],
        vec![0x0a, 0x0a, 0x0a, 0x0a],
        [&[0x0a, 0x0a, 0x0a, 0x0a][..], &[7]].concat(),
        [&[0x0a, 0x0a, 0x0a, 0x0a][..], &(0..20).map(|_| rand::random::<u8>()).collect::<Vec<_>>()].concat(),
        [&[0x0a, 0x0a, 0x0a, 0x0a][..], &[0xff; 60]].concat(),
        // Export A's handle presented as export B's.
        [&[0x0b, 0x0b, 0x0b, 0x0b][..], &valid[4..]].concat(),
        [&root_b.data.0[..4], &root_a.data.0[4..]].concat(),
        // An id no export has.
        [&[0xee, 0xee, 0xee, 0xee][..], &valid[4..]].concat(),
        // Truncated and extended.
        valid[..valid.len() - 1].to_vec(),
        [&valid[..], &[0]].concat(),
    ];
    for i in 0..valid.len() {
        for bit in [0x01u8, 0x80] {
            let mut v = valid.clone();
            v[i] ^= bit;
            forged.push(v);
        }
    }
    let refused = |st: Nfsstat3, what: &str, h: &[u8]| {
        assert!(
            st == Nfsstat3::Badhandle || st == Nfsstat3::Stale,
            "{what} with forged handle {h:02x?} answered {st:?}"
        );
    };
    for h in &forged {
        let fh = fh(h);
        refused(c.getattr(&fh).status(), "GETATTR", h);
        refused(c.read(&fh, 0, 10).status(), "READ", h);
        refused(c.write(&fh, 0, b"EVIL", StableHow::FileSync).status(), "WRITE", h);
        refused(c.setattr(&fh, sattr_mode(0o777), None).status(), "SETATTR", h);
        refused(c.lookup(&fh, "f").status(), "LOOKUP", h);
        refused(c.remove(&fh, "f").status(), "REMOVE", h);
        refused(c.access(&fh, ACCESS3_ALL).status(), "ACCESS", h);
    }
    // The real file is untouched.
    let Read3Res::Ok(rd) = c.read(&file, 0, 10) else { panic!() };
    assert_eq!(&rd.data[..], b"data");
    assert_eq!(c.attr(&file).mode, 0o644);
}

#[test]
fn a_removed_directory_is_stale_to_readdir_and_every_other_procedure() {
    let s = rw_server();
    let mut c = s.client();
    let root = c.root("/mem");
    removed_dir_handle_is_stale(&mut c, &root, "gone");
}
