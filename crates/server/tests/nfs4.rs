//! NFSv4.1/4.2 on the wire: COMPOUND's rules, the pseudo-root, files and
//! attributes, exactly-once replies from the session's slots (also over a
//! new connection), opens and share reservations, locks shared with NLM and
//! taken in a file system that enforces locks itself (CephFS),
//! delegations recalled by an NFSv3 writer, leases and the courteous
//! server, RPC-with-TLS and `xprtsec=`, and bad input (forged stateids, floods of
//! clients and opens).

mod common;

use bytes::Bytes;
use common::v4::*;
use common::*;
use eagernfs_proto::nfs3::{self, StableHow};
use eagernfs_proto::nfs4::*;
use eagernfs_proto::nlm::*;
use eagernfs_server::{Nfs4Config, ServerConfig};
use eagernfs_xdr::Opaque;
use std::sync::Arc;
use std::time::Duration;

fn config(v4: Nfs4Config) -> ServerConfig {
    ServerConfig { nfs4: v4, ..ServerConfig::default() }
}

/// One export at /mem, writable by root from loopback.
fn server_with(v4: Nfs4Config) -> TestServer {
    TestServer::start_with(
        config(v4),
        vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", memory())],
    )
}

fn server() -> TestServer {
    server_with(Nfs4Config::default())
}

fn status_of(r: &Compound4Res) -> Vec<(u32, Nfsstat4)> {
    r.resarray.iter().map(|x| (x.opnum(), x.status())).collect()
}

fn last(r: &Compound4Res) -> &ResOp {
    r.resarray.last().expect("a result")
}

// ------------------------------------------------------------ COMPOUND

#[test]
fn compound_answers_each_misplaced_or_unknown_operation_as_rfc_8881_says() {
    let s = server();
    let mut c = s.client();
    let mut cbs = Vec::new();
    let mut run = |minor, ops| call(&mut c, &compound(minor, ops), &mut cbs);
    // No operations: OK, nothing to do.
    let r = run(1, vec![]);
    assert_eq!((r.status, r.resarray.len()), (Nfsstat4::Ok, 0));
    // Minor versions 0 and 3 are not served: no results at all.
    for minor in [0, 3, 50] {
        let r = run(minor, vec![ArgOp::Putrootfh(())]);
        assert_eq!((r.status, r.resarray.len()), (Nfsstat4::MinorVersMismatch, 0), "minor {minor}");
    }
    // A file operation first, without SEQUENCE.
    let r = run(1, vec![ArgOp::Putrootfh(()), ArgOp::Getfh(())]);
    assert_eq!(status_of(&r), vec![(OP_PUTROOTFH, Nfsstat4::OpNotInSession)]);
    // EXCHANGE_ID without SEQUENCE must be alone.
    let eid = ArgOp::ExchangeId(ExchangeId4Args {
        clientowner: ClientOwner4 { co_verifier: [1; 8], co_ownerid: Opaque::from_static(b"x") },
        flags: 0,
        state_protect: StateProtect4A::None,
        client_impl_id: ImplIdOpt(None),
    });
    let r = run(1, vec![eid.clone(), ArgOp::Putrootfh(())]);
    assert_eq!(status_of(&r), vec![(OP_EXCHANGE_ID, Nfsstat4::NotOnlyOp)]);
    // Undefined operation numbers: OP_ILLEGAL, whatever the number was.
    for n in [0u32, 1, 2, 76, 10044] {
        let r = run(1, vec![ArgOp::Illegal(n)]);
        assert_eq!(status_of(&r), vec![(OP_ILLEGAL, Nfsstat4::OpIllegal)], "op {n}");
    }
    // NFSv4.2 operations are undefined in a 4.1 COMPOUND.
    let seek = ArgOp::Seek(Seek4Args { stateid: Stateid4::ANONYMOUS, offset: 0, what: DataContent4::Data });
    let r = run(1, vec![seek]);
    assert_eq!(status_of(&r), vec![(OP_ILLEGAL, Nfsstat4::OpIllegal)]);
    // A tag that is not UTF-8.
    let bad_tag = Compound4Args { tag: Opaque::from_static(b"\xff\xfe"), minorversion: 1, argarray: vec![] };
    let r = call(&mut c, &bad_tag, &mut cbs);
    assert_eq!((r.status, r.resarray.len()), (Nfsstat4::Inval, 0));

    let mut v = V4::connect(s.addr, "compound-rules");
    // SEQUENCE anywhere but first.
    let seq = v.sequence(1, false);
    let r = v.compound(vec![seq]);
    assert_eq!(status_of(&r)[1], (OP_SEQUENCE, Nfsstat4::SequencePos));
    // NFSv4.0-only operations are not part of 4.1.
    let r = v.compound(vec![ArgOp::ReleaseLockowner(ReleaseLockowner4Args::default())]);
    assert_eq!(status_of(&r)[1], (OP_RELEASE_LOCKOWNER, Nfsstat4::Notsupp));
    // Operations this server does not offer.
    let r = v.compound(vec![ArgOp::NotDecoded(OP_LAYOUTGET)]);
    assert_eq!(status_of(&r)[1], (OP_LAYOUTGET, Nfsstat4::Notsupp));
    // No current file handle.
    let r = v.compound(vec![ArgOp::Getfh(())]);
    assert_eq!(status_of(&r)[1], (OP_GETFH, Nfsstat4::Nofilehandle));
    // Processing stops at the first failure.
    let r = v.compound(vec![ArgOp::Getfh(()), ArgOp::Putrootfh(())]);
    assert_eq!(r.resarray.len(), 2);
    assert_eq!(r.status, Nfsstat4::Nofilehandle);
    // More operations than the session allows (16).
    let mut ops = vec![];
    ops.resize(20, ArgOp::Putrootfh(()));
    let r = v.compound(ops);
    assert_eq!(status_of(&r), vec![(OP_SEQUENCE, Nfsstat4::TooManyOps)]);
}

#[test]
fn an_operation_whose_arguments_do_not_decode_is_badxdr_and_the_header_garbage() {
    let s = server();
    let mut v = V4::connect(s.addr, "badxdr");
    // SEQUENCE, then a READ cut short.
    let mut body =
        eagernfs_xdr::to_vec(&compound(1, vec![v.sequence(0, false), ArgOp::Read(Read4Args::default())]));
    body.truncate(body.len() - 4);
    let h = v.c.header(NFS_PROGRAM, NFS_V4, NFSPROC4_COMPOUND);
    v.c.send_header(&h, &body);
    let mut cbs = Vec::new();
    let r = wait_reply(&mut v.c, h.xid, &mut cbs);
    assert_eq!(status_of(&r), vec![(OP_SEQUENCE, Nfsstat4::Ok), (OP_READ, Nfsstat4::Badxdr)]);
    // A header that does not decode is GARBAGE_ARGS.
    let r = v.c.call_raw(NFS_PROGRAM, NFS_V4, NFSPROC4_COMPOUND, &[0, 0, 0, 9]);
    assert_eq!(r.accept_stat(), eagernfs_rpc::AcceptStat::GarbageArgs);
}

// ------------------------------------------------------------ pseudo-root

#[test]
fn the_pseudo_root_joins_the_exports_and_shows_only_what_the_client_may_use() {
    let s = TestServer::start(vec![
        spec(7, &["/srv/a"], "/srv/a 127.0.0.0/8(rw,insecure,no_root_squash)", memory()),
        spec(8, &["/srv/b"], "/srv/b 10.9.9.9(rw,insecure)", memory()),
        spec(9, &["/data"], "/data 127.0.0.0/8(ro,insecure)", memory()),
    ]);
    let mut v = V4::connect(s.addr, "pseudo");
    let want = Bitmap4::from_bits(&[FATTR4_TYPE, FATTR4_FSID, FATTR4_FILEID, FATTR4_MOUNTED_ON_FILEID]);
    let list = |v: &mut V4, path: &str| -> Vec<String> {
        let mut ops = V4::walk(path);
        ops.push(ArgOp::Readdir(Readdir4Args {
            cookie: 0,
            cookieverf: [0; 8],
            dircount: 4096,
            maxcount: 8192,
            attr_request: Bitmap4::default(),
        }));
        let r = v.ok(ops);
        let ResOp::Readdir(Res4::Ok(d)) = last(&r) else { panic!() };
        assert!(d.eof);
        d.entries.iter().map(|e| String::from_utf8(e.name.to_vec()).unwrap()).collect()
    };
    assert_eq!(list(&mut v, "/"), vec!["data", "srv"]);
    // /srv/b is for another host: not shown, not found.
    assert_eq!(list(&mut v, "/srv"), vec!["a"]);
    let r = v.compound(V4::walk("/srv/b"));
    assert_eq!(r.status, Nfsstat4::Noent);
    // Each export is its own file system; its root says where it is mounted.
    let attrs = |v: &mut V4, path: &str| {
        let mut ops = V4::walk(path);
        ops.push(ArgOp::Getattr(Getattr4Args { attr_request: want.clone() }));
        let r = v.ok(ops);
        let ResOp::Getattr(Res4::Ok(f)) = last(&r) else { panic!() };
        FileAttrs::from_fattr(f).unwrap()
    };
    let srv = attrs(&mut v, "/srv");
    let a = attrs(&mut v, "/srv/a");
    let data = attrs(&mut v, "/data");
    assert_eq!(srv.ftype, Some(NfsFtype4::Dir));
    assert_ne!(srv.fsid, a.fsid);
    assert_ne!(a.fsid, data.fsid);
    assert_eq!(a.mounted_on_fileid, srv.fileid, "the export root is mounted on /srv");
    // LOOKUPP climbs out of an export into the pseudo-root.
    let mut ops = V4::walk("/srv/a");
    ops.extend([ArgOp::Lookupp(()), ArgOp::Getattr(Getattr4Args { attr_request: want.clone() })]);
    let r = v.ok(ops);
    let ResOp::Getattr(Res4::Ok(f)) = last(&r) else { panic!() };
    assert_eq!(FileAttrs::from_fattr(f).unwrap().fileid, srv.fileid);
    // The pseudo-root and read-only exports refuse changes.
    let mk = |dir: &str| {
        let mut ops = V4::walk(dir);
        ops.push(ArgOp::Create(Create4Args {
            objtype: Createtype4::Dir,
            objname: name("new"),
            createattrs: Fattr4::default(),
        }));
        ops
    };
    assert_eq!(v.compound(mk("/srv")).status, Nfsstat4::Rofs);
    assert_eq!(v.compound(mk("/data")).status, Nfsstat4::Rofs);
    v.ok(mk("/srv/a"));
    // SECINFO_NO_NAME: AUTH_SYS, and it consumes the current handle.
    let mut ops = V4::walk("/srv/a");
    ops.extend([ArgOp::SecinfoNoName(SecinfoStyle4::CurrentFh), ArgOp::Getfh(())]);
    let r = v.compound(ops);
    let n = r.resarray.len();
    assert_eq!(r.resarray[n - 2], ResOp::SecinfoNoName(Res4::Ok(Secinfo4ResOk(vec![Secinfo4::Flavor(1)]))));
    assert_eq!(r.status, Nfsstat4::Nofilehandle);
    // A handle of an export this client may not use is refused.
    let fh_b = {
        let mut wire = 8u32.to_be_bytes().to_vec();
        wire.extend_from_slice(&[1u8; 8]);
        NfsFh4 { data: Opaque(Bytes::from(wire)) }
    };
    let r = v.compound(vec![ArgOp::Putfh(Putfh4Args { object: fh_b })]);
    assert_eq!(r.status, Nfsstat4::Access);
    // Forged and short handles.
    let r =
        v.compound(vec![ArgOp::Putfh(Putfh4Args { object: NfsFh4 { data: Opaque::from_static(b"ab") } })]);
    assert_eq!(r.status, Nfsstat4::Badhandle);
    let r = v.compound(vec![ArgOp::Putfh(Putfh4Args {
        object: NfsFh4 { data: Opaque::from_static(b"\0\0\0\x63xxxx") },
    })]);
    assert_eq!(r.status, Nfsstat4::Stale, "an export that is not there");
}

// ------------------------------------------------------------ files and attributes

fn getattr(v: &mut V4, fh: &NfsFh4, bits: &[u32]) -> FileAttrs {
    let r = v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Getattr(Getattr4Args { attr_request: Bitmap4::from_bits(bits) }),
    ]);
    let ResOp::Getattr(Res4::Ok(f)) = last(&r) else { panic!() };
    FileAttrs::from_fattr(f).unwrap()
}

#[test]
fn files_are_created_written_read_listed_renamed_and_removed_with_their_attributes() {
    let s = server();
    let mut v = V4::connect(s.addr, "files");
    let root = v.fh("/mem");
    let (fh, st, open) = v.open_ok(&root, "f", OPEN4_SHARE_ACCESS_BOTH);
    assert!(open.cinfo.after != 0);
    let change0 = getattr(&mut v, &fh, &[FATTR4_CHANGE]).change.unwrap();
    let w = v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Write(Write4Args {
            stateid: st,
            offset: 0,
            stable: StableHow4::Unstable4,
            data: Bytes::from_static(b"hello world"),
        }),
        ArgOp::Commit(Commit4Args { offset: 0, count: 0 }),
    ]);
    let ResOp::Write(Res4::Ok(wr)) = &w.resarray[2] else { panic!() };
    let ResOp::Commit(Res4::Ok(verf)) = &w.resarray[3] else { panic!() };
    assert_eq!(wr.count, 11);
    assert_eq!(&wr.writeverf, verf, "COMMIT's verifier is the WRITE's");
    let a = getattr(
        &mut v,
        &fh,
        &[
            FATTR4_CHANGE,
            FATTR4_SIZE,
            FATTR4_TYPE,
            FATTR4_OWNER,
            FATTR4_OWNER_GROUP,
            FATTR4_MODE,
            FATTR4_NUMLINKS,
        ],
    );
    assert_eq!(a.size, Some(11));
    assert_eq!(a.ftype, Some(NfsFtype4::Reg));
    assert_eq!(a.owner.as_deref(), Some(&b"0"[..]), "owners go out as numbers");
    assert!(a.change.unwrap() > change0, "the change attribute moved with the write");
    // Every change moves it, even two in a row.
    let mut last_change = a.change.unwrap();
    for i in 0..3u64 {
        v.ok(vec![
            ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
            ArgOp::Write(Write4Args {
                stateid: st,
                offset: i,
                stable: StableHow4::FileSync4,
                data: Bytes::from_static(b"x"),
            }),
        ]);
        let c = getattr(&mut v, &fh, &[FATTR4_CHANGE]).change.unwrap();
        assert!(c > last_change, "write {i}");
        last_change = c;
    }
    // A GETATTR in the WRITE's own COMPOUND (as Linux sends it) sees the write too.
    let r = v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Write(Write4Args {
            stateid: st,
            offset: 11,
            stable: StableHow4::Unstable4,
            data: Bytes::from_static(b"!"),
        }),
        ArgOp::Getattr(Getattr4Args { attr_request: Bitmap4::from_bits(&[FATTR4_CHANGE, FATTR4_SIZE]) }),
    ]);
    let ResOp::Getattr(Res4::Ok(f)) = last(&r) else { panic!() };
    let a = FileAttrs::from_fattr(f).unwrap();
    assert_eq!(a.size, Some(12));
    assert!(a.change.unwrap() > last_change, "the change attribute in the WRITE's COMPOUND");
    assert_eq!(getattr(&mut v, &fh, &[FATTR4_CHANGE]).change, a.change);
    // LOOKUP below a file: NOTDIR, whether or not the name is good.
    for name in ["x", ""] {
        let mut ops = vec![ArgOp::Putfh(Putfh4Args { object: fh.clone() })];
        ops.push(ArgOp::Lookup(Lookup4Args { objname: Opaque(Bytes::copy_from_slice(name.as_bytes())) }));
        assert_eq!(v.compound(ops).status, Nfsstat4::Notdir, "LOOKUP {name:?} in a file");
    }
    let r = v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Read(Read4Args { stateid: st, offset: 6, count: 100 }),
    ]);
    let ResOp::Read(Res4::Ok(rd)) = last(&r) else { panic!() };
    assert_eq!((&rd.data[..], rd.eof), (&b"world!"[..], true));
    // SETATTR: a mode, an owner by name in the id domain; a read-only attribute is INVAL.
    let set = FileAttrs {
        mode: Some(0o640),
        owner_group: Some(Opaque::from_static(b"root@localdomain")),
        ..Default::default()
    };
    let r = v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Setattr(Setattr4Args { stateid: Stateid4::ANONYMOUS, obj_attributes: set.to_fattr() }),
        ArgOp::Getattr(Getattr4Args { attr_request: Bitmap4::from_bits(&[FATTR4_MODE]) }),
    ]);
    let ResOp::Setattr(sr) = &r.resarray[2] else { panic!() };
    assert_eq!(sr.attrsset, Bitmap4::from_bits(&[FATTR4_MODE, FATTR4_OWNER_GROUP]));
    let ResOp::Getattr(Res4::Ok(f)) = last(&r) else { panic!() };
    assert_eq!(FileAttrs::from_fattr(f).unwrap().mode, Some(0o640), "GETATTR in the SETATTR's COMPOUND");
    assert_eq!(getattr(&mut v, &fh, &[FATTR4_MODE]).mode, Some(0o640));
    let bad = FileAttrs { fileid: Some(5), ..Default::default() };
    let r = v.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Setattr(Setattr4Args { stateid: Stateid4::ANONYMOUS, obj_attributes: bad.to_fattr() }),
    ]);
    assert_eq!(r.status, Nfsstat4::Inval);
    let bad =
        FileAttrs { owner: Some(Opaque::from_static(b"nobody-here@elsewhere.org")), ..Default::default() };
    let r = v.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Setattr(Setattr4Args { stateid: Stateid4::ANONYMOUS, obj_attributes: bad.to_fattr() }),
    ]);
    assert_eq!(r.status, Nfsstat4::Badowner);
    // CLOSE answers the invalid stateid; the closed one is gone.
    let r = v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Close(Close4Args { seqid: 0, open_stateid: st }),
    ]);
    assert_eq!(last(&r), &ResOp::Close(Res4::Ok(Stateid4::INVALID)));
    let r = v.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Read(Read4Args { stateid: st, offset: 0, count: 1 }),
    ]);
    assert_eq!(r.status, Nfsstat4::BadStateid);
    // A directory, a symlink, READDIR with attributes, RENAME, LINK, REMOVE.
    v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Create(Create4Args {
            objtype: Createtype4::Dir,
            objname: name("d"),
            createattrs: Fattr4::default(),
        }),
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Create(Create4Args {
            objtype: Createtype4::Lnk(Opaque::from_static(b"f")),
            objname: name("l"),
            createattrs: Fattr4::default(),
        }),
        ArgOp::Readlink(()),
    ]);
    let r = v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Readdir(Readdir4Args {
            cookie: 0,
            cookieverf: [0; 8],
            dircount: 0,
            maxcount: 8192,
            attr_request: Bitmap4::from_bits(&[FATTR4_TYPE, FATTR4_FILEHANDLE, FATTR4_SIZE]),
        }),
    ]);
    let ResOp::Readdir(Res4::Ok(d)) = last(&r) else { panic!() };
    let mut seen: Vec<(String, NfsFtype4)> = d
        .entries
        .iter()
        .map(|e| {
            assert!(e.cookie > 2, "cookies 0, 1 and 2 are never handed out");
            let a = FileAttrs::from_fattr(&e.attrs).unwrap();
            assert!(a.filehandle.is_some());
            (String::from_utf8(e.name.to_vec()).unwrap(), a.ftype.unwrap())
        })
        .collect();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        seen,
        vec![("d".into(), NfsFtype4::Dir), ("f".into(), NfsFtype4::Reg), ("l".into(), NfsFtype4::Lnk)]
    );
    // Reading the directory in small pieces resumes from each cookie.
    let mut cookie = 0;
    let mut verf = [0; 8];
    let mut names = Vec::new();
    loop {
        let r = v.ok(vec![
            ArgOp::Putfh(Putfh4Args { object: root.clone() }),
            ArgOp::Readdir(Readdir4Args {
                cookie,
                cookieverf: verf,
                dircount: 0,
                maxcount: 64,
                attr_request: Bitmap4::default(),
            }),
        ]);
        let ResOp::Readdir(Res4::Ok(d)) = last(&r) else { panic!() };
        assert!(d.entries.len() <= 1);
        names.extend(d.entries.iter().map(|e| e.name.to_vec()));
        if d.eof {
            break;
        }
        cookie = d.entries.last().unwrap().cookie;
        verf = d.cookieverf;
    }
    assert_eq!(names.len(), 3);
    let r = v.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Readdir(Readdir4Args {
            cookie: 0,
            cookieverf: [0; 8],
            dircount: 0,
            maxcount: 20,
            attr_request: Bitmap4::default(),
        }),
    ]);
    assert_eq!(r.status, Nfsstat4::Toosmall);
    let r = v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Savefh(()),
        ArgOp::Rename(Rename4Args { oldname: name("f"), newname: name("g") }),
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Savefh(()),
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Link(Link4Args { newname: name("h") }),
        ArgOp::Remove(Remove4Args { target: name("g") }),
        ArgOp::Remove(Remove4Args { target: name("d") }),
    ]);
    let ResOp::Rename(Res4::Ok(rn)) = &r.resarray[3] else { panic!() };
    assert!(rn.target_cinfo.after > rn.target_cinfo.before);
    assert_eq!(getattr(&mut v, &fh, &[FATTR4_NUMLINKS]).numlinks, Some(1));
    // Names a client may not use.
    for (bad, want) in [
        (&b""[..], Nfsstat4::Inval),
        (b".", Nfsstat4::Badname),
        (b"..", Nfsstat4::Badname),
        (b"a/b", Nfsstat4::Badname),
        (b"\xff", Nfsstat4::Inval),
    ] {
        let r = v.compound(vec![
            ArgOp::Putfh(Putfh4Args { object: root.clone() }),
            ArgOp::Lookup(Lookup4Args { objname: Opaque(Bytes::copy_from_slice(bad)) }),
        ]);
        assert_eq!(r.status, want, "{bad:?}");
    }
    let long = "x".repeat(256);
    let r = v.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Lookup(Lookup4Args { objname: name(&long) }),
    ]);
    assert_eq!(r.status, Nfsstat4::Nametoolong);
}

// ------------------------------------------------------------ exactly once

/// A reply, replayed: same slot and sequence id on a new connection.
fn replay(s: &TestServer, v: &V4, slot: u32, seqid: u32, ops: Vec<ArgOp>) -> Compound4Res {
    let mut c = s.client();
    let mut all = vec![ArgOp::Sequence(Sequence4Args {
        sessionid: v.sessionid,
        sequenceid: seqid,
        slotid: slot,
        highest_slotid: v.seq.len() as u32 - 1,
        cachethis: true,
    })];
    all.extend(ops);
    let mut cbs = Vec::new();
    call(&mut c, &compound(1, all), &mut cbs)
}

#[test]
fn a_retried_create_and_rename_get_their_first_reply_even_over_a_new_connection() {
    let s = server();
    let mut v = V4::connect(s.addr, "exactly-once");
    let root = v.fh("/mem");
    let mkdir = vec![
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Create(Create4Args {
            objtype: Createtype4::Dir,
            objname: name("once"),
            createattrs: Fattr4::default(),
        }),
        ArgOp::Getfh(()),
    ];
    let seq = v.seq[3];
    let mut all = vec![v.sequence(3, true)];
    all.extend(mkdir.clone());
    let first = v.raw(all);
    assert_eq!(first.status, Nfsstat4::Ok);
    // The connection drops; the client sends the same request again on a new one.
    let again = replay(&s, &v, 3, seq, mkdir.clone());
    assert_eq!(again, first, "the cached reply, not a second CREATE (which would be EXIST)");
    // A different request with the same slot and sequence id is a false retry.
    let other = vec![ArgOp::Putfh(Putfh4Args { object: root.clone() }), ArgOp::Getfh(())];
    assert_eq!(status_of(&replay(&s, &v, 3, seq, other)), vec![(OP_SEQUENCE, Nfsstat4::SeqFalseRetry)]);
    // RENAME likewise: executed once, answered twice.
    let rename = vec![
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Savefh(()),
        ArgOp::Rename(Rename4Args { oldname: name("once"), newname: name("twice") }),
    ];
    let seq = v.seq[3];
    let mut all = vec![v.sequence(3, true)];
    all.extend(rename.clone());
    let first = v.raw(all);
    assert_eq!(first.status, Nfsstat4::Ok);
    let again = replay(&s, &v, 3, seq, rename.clone());
    assert_eq!(again, first, "not NOENT from renaming again");
    // The slot moves on: an old sequence id is misordered, a skipped one too.
    assert_eq!(status_of(&replay(&s, &v, 3, seq - 1, vec![]))[0].1, Nfsstat4::SeqMisordered);
    assert_eq!(status_of(&replay(&s, &v, 3, seq + 2, vec![]))[0].1, Nfsstat4::SeqMisordered);
    // A slot beyond the session's.
    assert_eq!(status_of(&replay(&s, &v, 99, 1, vec![]))[0].1, Nfsstat4::Badslot);
    // The name really moved once.
    let r = v.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Lookup(Lookup4Args { objname: name("twice") }),
    ]);
    assert_eq!(r.status, Nfsstat4::Ok);
}

#[test]
fn a_reply_too_large_to_keep_is_refused_when_asked_to_keep_and_otherwise_not_replayed() {
    let s = server();
    let mut v = V4::connect(s.addr, "uncached");
    let root = v.fh("/mem");
    let (fh, st, _) = v.open_ok(&root, "big", OPEN4_SHARE_ACCESS_BOTH);
    v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Write(Write4Args {
            stateid: st,
            offset: 0,
            stable: StableHow4::FileSync4,
            data: Bytes::from(vec![7u8; 20_000]),
        }),
    ]);
    let read = vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Read(Read4Args { stateid: st, offset: 0, count: 20_000 }),
    ];
    // Asked to cache 20 KB with 8 KiB of cache: REP_TOO_BIG_TO_CACHE.
    let mut all = vec![v.sequence(1, true)];
    all.extend(read.clone());
    let r = v.raw(all);
    assert_eq!(r.status, Nfsstat4::RepTooBigToCache);
    // Not asked: the READ works, and a retry is told the reply was not kept.
    let seq = v.seq[1];
    let mut all = vec![v.sequence(1, false)];
    all.extend(read.clone());
    let r = v.raw(all);
    assert_eq!(r.status, Nfsstat4::Ok);
    let ResOp::Read(Res4::Ok(d)) = last(&r) else { panic!() };
    assert_eq!(d.data.len(), 20_000);
    let mut c = s.client();
    let mut cbs = Vec::new();
    let mut all = vec![ArgOp::Sequence(Sequence4Args {
        sessionid: v.sessionid,
        sequenceid: seq,
        slotid: 1,
        highest_slotid: 7,
        cachethis: false,
    })];
    all.extend(read);
    let r = call(&mut c, &compound(1, all), &mut cbs);
    assert_eq!(status_of(&r), vec![(OP_SEQUENCE, Nfsstat4::RetryUncachedRep)]);
}

// ------------------------------------------------------------ state

#[test]
fn share_reservations_exclude_other_owners_and_stateids_are_checked() {
    let s = server();
    let mut a = V4::connect(s.addr, "share-a");
    let mut b = V4::connect(s.addr, "share-b");
    let root = a.fh("/mem");
    // A opens for reading and denies writers.
    let r = a.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Open(Open4Args {
            seqid: 0,
            share_access: OPEN4_SHARE_ACCESS_READ,
            share_deny: OPEN4_SHARE_DENY_WRITE,
            owner: StateOwner4 { clientid: a.clientid, owner: Opaque::from_static(b"o") },
            openhow: Openflag4::Create(Createhow4::Guarded(Fattr4::default())),
            claim: OpenClaim4::Null(name("locked")),
        }),
        ArgOp::Getfh(()),
    ]);
    assert_eq!(r.status, Nfsstat4::Ok);
    let ResOp::Open(Res4::Ok(open)) = &r.resarray[2] else { panic!() };
    let ResOp::Getfh(Res4::Ok(fh)) = &r.resarray[3] else { panic!() };
    let a_st = open.stateid;
    assert_eq!(a_st.seqid, 1);
    // B may read (asking for no delegation, which A's upgrade below would have to recall), but not write.
    let no_deleg = OPEN4_SHARE_ACCESS_WANT_NO_DELEG;
    assert_eq!(b.open(&root, "locked", OPEN4_SHARE_ACCESS_READ | no_deleg, false).status, Nfsstat4::Ok);
    assert_eq!(b.open(&root, "locked", OPEN4_SHARE_ACCESS_WRITE, false).status, Nfsstat4::ShareDenied);
    // Nor write with the anonymous stateid.
    let r = b.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Write(Write4Args {
            stateid: Stateid4::ANONYMOUS,
            offset: 0,
            stable: StableHow4::FileSync4,
            data: Bytes::from_static(b"x"),
        }),
    ]);
    assert_eq!(r.status, Nfsstat4::Locked);
    // A's stateid is A's: B cannot use it, nor a forged one, nor an old seqid.
    let r = b.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Read(Read4Args { stateid: a_st, offset: 0, count: 1 }),
    ]);
    assert_eq!(r.status, Nfsstat4::BadStateid);
    let forged = Stateid4 { seqid: 1, other: [0x5a; 12] };
    let r = a.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Read(Read4Args { stateid: forged, offset: 0, count: 1 }),
    ]);
    assert_eq!(r.status, Nfsstat4::BadStateid);
    // A second OPEN by the same owner upgrades the same stateid (another owner of
    // A's would be refused: the first open denies writers).
    assert_eq!(a.open(&root, "locked", OPEN4_SHARE_ACCESS_BOTH, false).status, Nfsstat4::ShareDenied);
    let up = a.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Open(Open4Args {
            seqid: 0,
            share_access: OPEN4_SHARE_ACCESS_BOTH,
            share_deny: OPEN4_SHARE_DENY_NONE,
            owner: StateOwner4 { clientid: a.clientid, owner: Opaque::from_static(b"o") },
            openhow: Openflag4::NoCreate,
            claim: OpenClaim4::Null(name("locked")),
        }),
    ]);
    let ResOp::Open(Res4::Ok(open2)) = &up.resarray[2] else { panic!("{up:?}") };
    assert_eq!((open2.stateid.other, open2.stateid.seqid), (a_st.other, 2));
    let r = a.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Read(Read4Args { stateid: a_st, offset: 0, count: 1 }),
    ]);
    assert_eq!(r.status, Nfsstat4::OldStateid);
    let r = a.ok(vec![ArgOp::TestStateid(TestStateid4Args(vec![
        open2.stateid,
        a_st,
        forged,
        Stateid4::ANONYMOUS,
    ]))]);
    let ResOp::TestStateid(Res4::Ok(t)) = last(&r) else { panic!() };
    assert_eq!(t.0, vec![Nfsstat4::Ok, Nfsstat4::OldStateid, Nfsstat4::BadStateid, Nfsstat4::BadStateid]);
    // OPEN_DOWNGRADE only to modes it had.
    let r = a.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::OpenDowngrade(OpenDowngrade4Args {
            open_stateid: open2.stateid,
            seqid: 0,
            share_access: OPEN4_SHARE_ACCESS_READ,
            share_deny: OPEN4_SHARE_DENY_BOTH,
        }),
    ]);
    assert_eq!(r.status, Nfsstat4::Inval);
    a.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::OpenDowngrade(OpenDowngrade4Args {
            open_stateid: open2.stateid,
            seqid: 0,
            share_access: OPEN4_SHARE_ACCESS_READ,
            share_deny: OPEN4_SHARE_DENY_NONE,
        }),
    ]);
    // Now B may write.
    assert_eq!(b.open(&root, "locked", OPEN4_SHARE_ACCESS_WRITE, false).status, Nfsstat4::Ok);
}

/// A file both protocols can name: made over NFSv3, its handle is the NFSv4 one too.
fn v3_file(s: &TestServer, name: &str) -> nfs3::NfsFh3 {
    let mut c = s.client();
    let root = c.root("/mem");
    c.create(&root, name)
}

fn nlm_lock(c: &mut Client, fh: &nfs3::NfsFh3, offset: u64, len: u64, unlock: bool) -> Nlm4Stats {
    let alock = Nlm4Lock {
        caller_name: Opaque::from_static(b"v3host"),
        fh: Opaque(fh.data.0.clone()),
        oh: Opaque::from_static(b"v3owner"),
        svid: 42,
        l_offset: offset,
        l_len: len,
    };
    let cookie = Opaque::from_static(b"c");
    let r: Nlm4Res = if unlock {
        c.call(NLM_PROGRAM, NLM_V4, proc4::UNLOCK, &Nlm4UnlockArgs { cookie, alock }).results()
    } else {
        let args = Nlm4LockArgs { cookie, block: false, exclusive: true, alock, reclaim: false, state: 1 };
        c.call(NLM_PROGRAM, NLM_V4, proc4::LOCK, &args).results()
    };
    r.stat
}

#[test]
fn nfsv3_and_nfsv41_locks_on_the_same_bytes_exclude_each_other() {
    let s = server();
    let v3fh = v3_file(&s, "shared");
    let fh = NfsFh4 { data: Opaque(v3fh.data.0.clone()) };
    let mut v = V4::connect(s.addr, "locker");
    let root = v.fh("/mem");
    // No write delegation: its holder could lock locally, so NLM would wait for its return.
    let (fh4, st, _) = v.open_ok(&root, "shared", OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_NO_DELEG);
    assert_eq!(fh4, fh, "both protocols name the file alike");
    let lock = |v: &mut V4, locker: Locker4, offset, length| {
        v.compound(vec![
            ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
            ArgOp::Lock(Lock4Args {
                locktype: NfsLockType4::WriteLt,
                reclaim: false,
                offset,
                length,
                locker,
            }),
        ])
    };
    let new_owner = Locker4::NewOwner(OpenToLockOwner4 {
        open_seqid: 0,
        open_stateid: st,
        lock_seqid: 0,
        lock_owner: StateOwner4 { clientid: v.clientid, owner: Opaque::from_static(b"lk") },
    });
    // NFSv4.1 locks bytes 0..100.
    let r = lock(&mut v, new_owner, 0, 100);
    let ResOp::Lock(Lock4Res::Ok(lock_st)) = last(&r) else { panic!("{r:?}") };
    let lock_st = *lock_st;
    // An NFSv3 client cannot lock bytes 50..60, but can 100..200.
    let mut c3 = s.client();
    assert_eq!(nlm_lock(&mut c3, &v3fh, 50, 10, false), Nlm4Stats::Denied);
    assert_eq!(nlm_lock(&mut c3, &v3fh, 100, 100, false), Nlm4Stats::Granted);
    // NFSv4.1 cannot lock the NFSv3 client's bytes: told who holds them.
    let r =
        lock(&mut v, Locker4::Existing(ExistLockOwner4 { lock_stateid: lock_st, lock_seqid: 0 }), 150, 10);
    let ResOp::Lock(Lock4Res::Denied(d)) = last(&r) else { panic!("{r:?}") };
    assert_eq!((d.offset, d.length, d.locktype), (100, 100, NfsLockType4::WriteLt));
    let r = v.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Lockt(Lockt4Args {
            locktype: NfsLockType4::ReadLt,
            offset: 0,
            length: u64::MAX,
            owner: StateOwner4 { clientid: v.clientid, owner: Opaque::from_static(b"other") },
        }),
    ]);
    assert_eq!(r.status, Nfsstat4::Denied);
    // The NFSv3 client lets go; NFSv4.1 takes it. Then NFSv4.1 unlocks and NFSv3 gets 0..100.
    assert_eq!(nlm_lock(&mut c3, &v3fh, 100, 100, true), Nlm4Stats::Granted);
    let r =
        lock(&mut v, Locker4::Existing(ExistLockOwner4 { lock_stateid: lock_st, lock_seqid: 0 }), 150, 10);
    let ResOp::Lock(Lock4Res::Ok(st2)) = last(&r) else { panic!("{r:?}") };
    // CLOSE and FREE_STATEID refuse while locks are held.
    let r = v.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Close(Close4Args { seqid: 0, open_stateid: st }),
    ]);
    assert_eq!(r.status, Nfsstat4::LocksHeld);
    let r = v.compound(vec![ArgOp::FreeStateid(FreeStateid4Args { stateid: *st2 })]);
    assert_eq!(r.status, Nfsstat4::LocksHeld);
    v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Locku(Locku4Args {
            locktype: NfsLockType4::WriteLt,
            seqid: 0,
            lock_stateid: *st2,
            offset: 0,
            length: u64::MAX,
        }),
    ]);
    assert_eq!(nlm_lock(&mut c3, &v3fh, 0, 100, false), Nlm4Stats::Granted);
}

#[test]
fn a_read_delegation_is_recalled_when_an_nfsv3_client_writes_the_file() {
    let s = server();
    let v3fh = v3_file(&s, "cached");
    let mut v = V4::connect(s.addr, "delegated");
    // The back channel is probed (CB_NULL) before delegations are handed out.
    assert!(v.wait_callback(|c| matches!(c, Callback::Null)), "CB_NULL probe");
    let root = v.fh("/mem");
    let (fh, st, open) =
        v.open_ok(&root, "cached", OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_READ_DELEG);
    let OpenDelegation4::Read(deleg) = open.delegation else {
        panic!("no read delegation: {:?}", open.delegation)
    };
    // The NFSv3 client's WRITE must wait: JUKEBOX while the delegation is recalled.
    let mut c3 = s.client();
    let w = c3.write(&v3fh, 0, b"v3 was here", StableHow::FileSync);
    assert_eq!(w.status(), nfs3::Nfsstat3::Jukebox);
    let is_recall = |c: &Callback| matches!(c, Callback::Compound(a) if a.argarray.iter().any(|op| matches!(op, CbArgOp::Recall(_))));
    assert!(v.wait_callback(is_recall), "CB_RECALL");
    let recalled = v.callbacks.iter().find_map(|c| match c {
        Callback::Compound(a) => a.argarray.iter().find_map(|op| match op {
            CbArgOp::Recall(r) => Some(r.clone()),
            _ => None,
        }),
        Callback::Null | Callback::Getattr(_) => None,
    });
    let recalled = recalled.expect("a CB_RECALL");
    assert_eq!(recalled.stateid, deleg.stateid);
    assert_eq!(recalled.fh, fh);
    // Still waiting until the client gives it back.
    assert_eq!(c3.write(&v3fh, 0, b"v3 was here", StableHow::FileSync).status(), nfs3::Nfsstat3::Jukebox);
    v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Delegreturn(Delegreturn4Args { deleg_stateid: deleg.stateid }),
    ]);
    assert_eq!(c3.write(&v3fh, 0, b"v3 was here", StableHow::FileSync).status(), nfs3::Nfsstat3::Ok);
    // The v4 client reads what NFSv3 wrote.
    let r = v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Read(Read4Args { stateid: st, offset: 0, count: 64 }),
    ]);
    let ResOp::Read(Res4::Ok(d)) = last(&r) else { panic!() };
    assert_eq!(&d.data[..], b"v3 was here");
}

#[test]
fn a_recall_that_found_no_back_channel_is_sent_again_over_a_newly_bound_connection() {
    let s = server();
    let v3fh = v3_file(&s, "roaming");
    let mut v = V4::connect(s.addr, "roamer");
    assert!(v.wait_callback(|c| matches!(c, Callback::Null)), "CB_NULL probe");
    let root = v.fh("/mem");
    let (fh, _, open) =
        v.open_ok(&root, "roaming", OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_READ_DELEG);
    let OpenDelegation4::Read(deleg) = open.delegation else { panic!("no delegation") };
    // The client's connection (its back channel) goes away; then an NFSv3 writer needs the file.
    v.c = s.client();
    let mut c3 = s.client();
    assert_eq!(c3.write(&v3fh, 0, b"x", StableHow::FileSync).status(), nfs3::Nfsstat3::Jukebox);
    // The client binds its new connection to the session's back channel: the recall comes.
    v.callbacks.clear();
    let r = v.raw(vec![ArgOp::BindConnToSession(BindConnToSession4Args {
        sessid: v.sessionid,
        dir: ChannelDirFromClient4::BackOrBoth,
        use_conn_in_rdma_mode: false,
    })]);
    assert_eq!(r.status, Nfsstat4::Ok, "{r:?}");
    let is_recall = |c: &Callback| matches!(c, Callback::Compound(a) if a.argarray.iter().any(|op| matches!(op, CbArgOp::Recall(r) if r.stateid == deleg.stateid)));
    assert!(v.wait_callback(is_recall), "CB_RECALL over the new connection");
    v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh }),
        ArgOp::Delegreturn(Delegreturn4Args { deleg_stateid: deleg.stateid }),
    ]);
    assert_eq!(c3.write(&v3fh, 0, b"x", StableHow::FileSync).status(), nfs3::Nfsstat3::Ok);
}

#[test]
fn a_delegation_not_returned_within_a_lease_is_revoked() {
    let s = server();
    let handle = s.handle();
    let v3fh = v3_file(&s, "kept");
    let mut v = V4::connect(s.addr, "stubborn");
    assert!(v.wait_callback(|c| matches!(c, Callback::Null)), "CB_NULL probe");
    let root = v.fh("/mem");
    let (fh, _, open) =
        v.open_ok(&root, "kept", OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_READ_DELEG);
    let OpenDelegation4::Read(deleg) = open.delegation else { panic!("no delegation") };
    let mut c3 = s.client();
    assert_eq!(c3.write(&v3fh, 0, b"x", StableHow::FileSync).status(), nfs3::Nfsstat3::Jukebox);
    // The client never returns it. A lease later, the writer goes ahead.
    handle.advance_nfs4_clock(Duration::from_secs(91));
    assert_eq!(c3.write(&v3fh, 0, b"x", StableHow::FileSync).status(), nfs3::Nfsstat3::Ok);
    // The holder hears of it in SEQUENCE and finds the stateid revoked.
    let r = v.ok(vec![]);
    let ResOp::Sequence(Res4::Ok(seq)) = &r.resarray[0] else { panic!() };
    assert_ne!(seq.status_flags & SEQ4_STATUS_RECALLABLE_STATE_REVOKED, 0);
    let r = v.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh }),
        ArgOp::Delegreturn(Delegreturn4Args { deleg_stateid: deleg.stateid }),
    ]);
    assert_eq!(r.status, Nfsstat4::DelegRevoked);
    v.ok(vec![ArgOp::FreeStateid(FreeStateid4Args { stateid: deleg.stateid })]);
    let r = v.ok(vec![]);
    let ResOp::Sequence(Res4::Ok(seq)) = &r.resarray[0] else { panic!() };
    assert_eq!(seq.status_flags & SEQ4_STATUS_RECALLABLE_STATE_REVOKED, 0);
}

#[test]
fn a_client_that_never_renews_keeps_its_state_until_someone_needs_it() {
    let s = server();
    let handle = s.handle();
    let mut a = V4::connect(s.addr, "lapsed");
    let mut b = V4::connect(s.addr, "needy");
    let root = a.fh("/mem");
    let r = a.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Open(Open4Args {
            seqid: 0,
            share_access: OPEN4_SHARE_ACCESS_BOTH,
            share_deny: OPEN4_SHARE_DENY_BOTH,
            owner: StateOwner4 { clientid: a.clientid, owner: Opaque::from_static(b"o") },
            openhow: Openflag4::Create(Createhow4::Unchecked(Fattr4::default())),
            claim: OpenClaim4::Null(name("mine")),
        }),
    ]);
    assert_eq!(r.status, Nfsstat4::Ok);
    assert_eq!(b.open(&root, "mine", OPEN4_SHARE_ACCESS_READ, false).status, Nfsstat4::ShareDenied);
    // A goes quiet for two leases; B keeps renewing.
    handle.advance_nfs4_clock(Duration::from_secs(100));
    b.ok(vec![]);
    handle.advance_nfs4_clock(Duration::from_secs(100));
    // Courteous: A's state is kept for as long as nobody conflicts... but B does now.
    assert_eq!(b.open(&root, "mine", OPEN4_SHARE_ACCESS_READ, false).status, Nfsstat4::Ok);
    // A comes back to find its session gone: it must start over.
    let r = a.compound(vec![]);
    assert_eq!(status_of(&r), vec![(OP_SEQUENCE, Nfsstat4::Badsession)]);
}

// ------------------------------------------------------------ a file system's own locks

/// The locks of a memory backend whose "file system" enforces locks itself,
/// as CephFS does: what the server took there, per owner id, and the locks
/// of the file system's other clients.
struct LockingFs {
    fs: std::sync::Mutex<FsLocks>,
}

#[derive(Default)]
struct FsLocks {
    /// This server's locks: owner id, exclusive, range.
    ours: Vec<(u64, bool, eagernfs_vfs::LockRange)>,
    /// Another client's exclusive lock.
    theirs: Option<eagernfs_vfs::LockRange>,
    /// Files the lock manager let go of.
    forgotten: usize,
}

fn overlap(a: eagernfs_vfs::LockRange, b: eagernfs_vfs::LockRange) -> bool {
    a.start < b.end && b.start < a.end
}

impl FsLocks {
    fn conflict(&self, range: eagernfs_vfs::LockRange) -> Option<eagernfs_vfs::LockConflict> {
        let r = self.theirs.filter(|t| overlap(*t, range))?;
        Some(eagernfs_vfs::LockConflict { exclusive: true, range: r, pid: 4242 })
    }

    fn cut(&mut self, owner: u64, range: eagernfs_vfs::LockRange) {
        let mut out = Vec::new();
        for &(o, x, r) in &self.ours {
            if o != owner || !overlap(r, range) {
                out.push((o, x, r));
                continue;
            }
            if r.start < range.start {
                out.push((o, x, eagernfs_vfs::LockRange { start: r.start, end: range.start }));
            }
            if range.end < r.end {
                out.push((o, x, eagernfs_vfs::LockRange { start: range.end, end: r.end }));
            }
        }
        self.ours = out;
    }
}

impl eagernfs_vfs::FileLocks for LockingFs {
    fn try_lock(
        &self,
        _fh: &eagernfs_vfs::FileHandle,
        owner: u64,
        exclusive: bool,
        range: eagernfs_vfs::LockRange,
    ) -> eagernfs_vfs::FsResult<Option<eagernfs_vfs::LockConflict>> {
        let mut fs = self.fs.lock().unwrap();
        if let Some(c) = fs.conflict(range) {
            return Ok(Some(c));
        }
        fs.cut(owner, range);
        fs.ours.push((owner, exclusive, range));
        Ok(None)
    }

    fn test_lock(
        &self,
        _fh: &eagernfs_vfs::FileHandle,
        _owner: u64,
        _exclusive: bool,
        range: eagernfs_vfs::LockRange,
    ) -> eagernfs_vfs::FsResult<Option<eagernfs_vfs::LockConflict>> {
        Ok(self.fs.lock().unwrap().conflict(range))
    }

    fn unlock(
        &self,
        _fh: &eagernfs_vfs::FileHandle,
        owner: u64,
        range: eagernfs_vfs::LockRange,
    ) -> eagernfs_vfs::FsResult<()> {
        self.fs.lock().unwrap().cut(owner, range);
        Ok(())
    }

    fn forget_file(&self, _fh: &eagernfs_vfs::FileHandle) {
        self.fs.lock().unwrap().forgotten += 1;
    }
}

impl Hooks for LockingFs {
    fn file_locks(&self) -> Option<&dyn eagernfs_vfs::FileLocks> {
        Some(self)
    }
}

#[test]
fn nfsv41_locks_on_a_file_system_that_enforces_locks_are_taken_there_too() {
    let fs = Arc::new(Wrapped { inner: memory(), hooks: LockingFs { fs: Default::default() } });
    let s = TestServer::start_with(
        config(Nfs4Config::default()),
        vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", fs.clone())],
    );
    let handle = s.handle();
    let mut a = V4::connect(s.addr, "first");
    let mut b = V4::connect(s.addr, "second");
    let root = a.fh("/mem");
    // Two clients share the file: no write delegation for the first.
    let (fh, st_a, _) = a.open_ok(&root, "f", OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_NO_DELEG);
    let (_, st_b, _) = b.open_ok(&root, "f", OPEN4_SHARE_ACCESS_BOTH);
    let lock = |v: &mut V4, st: Stateid4, owner: &'static [u8], offset, length| {
        let locker = Locker4::NewOwner(OpenToLockOwner4 {
            open_seqid: 0,
            open_stateid: st,
            lock_seqid: 0,
            lock_owner: StateOwner4 { clientid: v.clientid, owner: Opaque::from_static(owner) },
        });
        let args = Lock4Args { locktype: NfsLockType4::WriteLt, reclaim: false, offset, length, locker };
        v.compound(vec![ArgOp::Putfh(Putfh4Args { object: fh.clone() }), ArgOp::Lock(args)])
    };
    let ours = |fs: &LockingFs| {
        let mut v: Vec<_> =
            fs.fs.lock().unwrap().ours.iter().map(|&(o, x, r)| (o, x, r.start, r.end)).collect();
        v.sort();
        v
    };

    // A's lock is taken in the file system before it is granted.
    let r = lock(&mut a, st_a, b"a", 0, 100);
    let ResOp::Lock(Lock4Res::Ok(lock_a)) = last(&r) else { panic!("{r:?}") };
    let lock_a = *lock_a;
    let held = ours(&fs);
    assert_eq!(held.len(), 1, "{held:?}");
    let owner_a = held[0].0;
    assert_eq!(held[0], (owner_a, true, 0, 100));

    // Another client of the file system holds 200..300: B is refused with its range,
    // by LOCK and by LOCKT, and nothing is left behind.
    fs.fs.lock().unwrap().theirs = Some(eagernfs_vfs::LockRange { start: 200, end: 300 });
    let r = lock(&mut b, st_b, b"b", 250, 10);
    let ResOp::Lock(Lock4Res::Denied(d)) = last(&r) else { panic!("{r:?}") };
    assert_eq!((d.offset, d.length, d.owner.clientid), (200, 100, 0));
    let r = b.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Lockt(Lockt4Args {
            locktype: NfsLockType4::ReadLt,
            offset: 299,
            length: 1,
            owner: StateOwner4 { clientid: b.clientid, owner: Opaque::from_static(b"b") },
        }),
    ]);
    let ResOp::Lockt(Lockt4Res::Denied(d)) = last(&r) else { panic!("{r:?}") };
    assert_eq!((d.offset, d.length), (200, 100));
    assert_eq!(ours(&fs), vec![(owner_a, true, 0, 100)]);
    fs.fs.lock().unwrap().theirs = None;

    // LOCKU is passed on; with nothing left in the table the file is let go.
    let r = a.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Locku(Locku4Args {
            locktype: NfsLockType4::WriteLt,
            seqid: 0,
            lock_stateid: lock_a,
            offset: 40,
            length: 20,
        }),
    ]);
    let ResOp::Locku(Res4::Ok(lock_a)) = last(&r) else { panic!("{r:?}") };
    let lock_a = *lock_a;
    assert_eq!(ours(&fs), vec![(owner_a, true, 0, 40), (owner_a, true, 60, 100)]);
    let forgotten = fs.fs.lock().unwrap().forgotten;
    a.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Locku(Locku4Args {
            locktype: NfsLockType4::WriteLt,
            seqid: 0,
            lock_stateid: lock_a,
            offset: 0,
            length: u64::MAX,
        }),
    ]);
    assert_eq!(ours(&fs), vec![]);
    assert_eq!(fs.fs.lock().unwrap().forgotten, forgotten + 1, "the file is let go");

    // A locks again and goes quiet; when B needs the bytes, A's lease is over: its
    // lock goes from the file system too, and B's is taken there.
    let r = lock(&mut a, st_a, b"a2", 0, 10);
    assert!(matches!(last(&r), ResOp::Lock(Lock4Res::Ok(_))), "{r:?}");
    handle.advance_nfs4_clock(Duration::from_secs(100));
    b.ok(vec![]);
    handle.advance_nfs4_clock(Duration::from_secs(100));
    let r = lock(&mut b, st_b, b"b", 0, 10);
    assert!(matches!(last(&r), ResOp::Lock(Lock4Res::Ok(_))), "{r:?}");
    let held = ours(&fs);
    assert_eq!(held.len(), 1, "only B's lock: {held:?}");
    assert_ne!(held[0].0, owner_a);
    assert_eq!((held[0].1, held[0].2, held[0].3), (true, 0, 10));
}

// ------------------------------------------------------------ bounds

fn exchange_id(c: &mut Client, owner: &str) -> Res4<ExchangeId4ResOk> {
    let eid = ArgOp::ExchangeId(ExchangeId4Args {
        clientowner: ClientOwner4 { co_verifier: [3; 8], co_ownerid: Opaque(Bytes::from(owner.to_string())) },
        flags: EXCHGID4_FLAG_USE_NON_PNFS,
        state_protect: StateProtect4A::None,
        client_impl_id: ImplIdOpt(None),
    });
    let mut cbs = Vec::new();
    let r = call(c, &compound(1, vec![eid]), &mut cbs);
    let ResOp::ExchangeId(e) = r.resarray.into_iter().next().unwrap() else { panic!() };
    e
}

#[test]
fn ten_thousand_client_ids_stay_within_the_bound_and_nfsv3_keeps_working() {
    let s = server_with(Nfs4Config { max_clients: 1000, ..Nfs4Config::default() });
    // A real client first: confirmed, with a session.
    let mut v = V4::connect(s.addr, "steady");
    let mut c = s.client();
    let mut ids = std::collections::HashSet::new();
    for i in 0..10_000 {
        let Res4::Ok(e) = exchange_id(&mut c, &format!("flood-{i}")) else {
            panic!("EXCHANGE_ID {i} refused")
        };
        assert!(ids.insert(e.clientid), "client ids are distinct");
        if i % 1000 == 999 {
            assert!(s.stats.snapshot().nfs4_clients <= 1000, "bounded at {i}");
        }
    }
    // Unconfirmed records made room; the confirmed client was never touched.
    v.ok(vec![ArgOp::Putrootfh(())]);
    let mut c3 = s.client();
    let root = c3.root("/mem");
    assert_eq!(c3.getattr(&root).status(), nfs3::Nfsstat3::Ok);
}

#[test]
fn a_flood_of_opens_is_delayed_at_the_bound_not_served_without_limit() {
    let s = server_with(Nfs4Config { max_stateids: 256, ..Nfs4Config::default() });
    let mut v = V4::connect(s.addr, "opener");
    let root = v.fh("/mem");
    let mut opened = Vec::new();
    let mut delayed = 0;
    for i in 0..300 {
        // Opens alone: a write delegation would be a second stateid each.
        let r =
            v.open(&root, &format!("f{i}"), OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_NO_DELEG, true);
        match r.status {
            Nfsstat4::Ok => {
                let ResOp::Open(Res4::Ok(o)) = &r.resarray[2] else { panic!() };
                let ResOp::Getfh(Res4::Ok(fh)) = &r.resarray[3] else { panic!() };
                opened.push((fh.clone(), o.stateid));
            }
            Nfsstat4::Delay => delayed += 1,
            other => panic!("OPEN {i}: {other:?}"),
        }
    }
    assert_eq!(opened.len(), 256);
    assert_eq!(delayed, 44);
    assert!(s.stats.snapshot().nfs4_stateids <= 256);
    // NFSv3 is unaffected; closing one makes room for another open.
    let mut c3 = s.client();
    let r3 = c3.root("/mem");
    assert_eq!(c3.getattr(&r3).status(), nfs3::Nfsstat3::Ok);
    let (fh, st) = opened.pop().unwrap();
    v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh }),
        ArgOp::Close(Close4Args { seqid: 0, open_stateid: st }),
    ]);
    let one_more =
        v.open(&root, "one-more", OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_NO_DELEG, true);
    assert_eq!(one_more.status, Nfsstat4::Ok);
}

#[test]
fn after_a_restart_only_previous_clients_reclaim_until_they_are_done() {
    let recorded = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Vec<u8>>::new()));
    let r2 = recorded.clone();
    let s = server_with(Nfs4Config {
        previous_clients: vec![Bytes::from_static(b"reclaimer")],
        grace_period: Duration::from_secs(60),
        on_clients_changed: Some(std::sync::Arc::new(move |owners: &[Bytes]| {
            *r2.lock().unwrap() = owners.iter().map(|o| o.to_vec()).collect();
            Ok(())
        })),
        ..Nfs4Config::default()
    });
    let v3fh = v3_file(&s, "held");
    let fh = NfsFh4 { data: Opaque(v3fh.data.0.clone()) };
    let mut old = V4::connect_with(s.client(), "reclaimer", 1, 4, false);
    let mut new = V4::connect_with(s.client(), "newcomer", 1, 4, false);
    let root = new.fh("/mem");
    let reclaim = |v: &mut V4| {
        let owner = StateOwner4 { clientid: v.clientid, owner: Opaque::from_static(b"o") };
        v.compound(vec![
            ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
            ArgOp::Open(Open4Args {
                seqid: 0,
                share_access: OPEN4_SHARE_ACCESS_BOTH,
                share_deny: OPEN4_SHARE_DENY_NONE,
                owner,
                openhow: Openflag4::NoCreate,
                claim: OpenClaim4::Previous(OpenDelegationType4::None),
            }),
        ])
    };
    // In the grace period: the newcomer may not open or reclaim; the previous client reclaims.
    new.ok(vec![ArgOp::ReclaimComplete(ReclaimComplete4Args { one_fs: false })]);
    assert_eq!(new.open(&root, "held", OPEN4_SHARE_ACCESS_READ, false).status, Nfsstat4::Grace);
    assert_eq!(reclaim(&mut new).status, Nfsstat4::ReclaimBad);
    assert_eq!(reclaim(&mut old).status, Nfsstat4::Ok);
    // NLM shares the lock table, so it grants no new lock while NFSv4 clients reclaim.
    let mut v3 = s.client();
    assert_eq!(nlm_lock(&mut v3, &v3fh, 0, 10, false), Nlm4Stats::DeniedGracePeriod);
    // Until the previous client says it is done, non-reclaim opens wait; then they go ahead.
    assert_eq!(old.open(&root, "held", OPEN4_SHARE_ACCESS_READ, false).status, Nfsstat4::Grace);
    old.ok(vec![ArgOp::ReclaimComplete(ReclaimComplete4Args { one_fs: false })]);
    let r = old.compound(vec![ArgOp::ReclaimComplete(ReclaimComplete4Args { one_fs: false })]);
    assert_eq!(r.status, Nfsstat4::CompleteAlready);
    assert_eq!(reclaim(&mut old).status, Nfsstat4::NoGrace, "the grace period ended with the last reclaimer");
    assert_eq!(new.open(&root, "held", OPEN4_SHARE_ACCESS_READ, false).status, Nfsstat4::Ok);
    assert_eq!(nlm_lock(&mut v3, &v3fh, 0, 10, false), Nlm4Stats::Granted);
    // Both are now recorded as clients that may reclaim after the next restart.
    let mut owners = recorded.lock().unwrap().clone();
    owners.sort();
    assert_eq!(owners, vec![b"newcomer".to_vec(), b"reclaimer".to_vec()]);
}

#[test]
fn a_client_that_cannot_be_recorded_is_not_told_its_registration_is_done() {
    // The record cannot be written (a full disk, say) until `healthy` is set.
    let healthy = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let recorded = Arc::new(std::sync::Mutex::new(Vec::<Vec<u8>>::new()));
    let (h, r) = (healthy.clone(), recorded.clone());
    let s = server_with(Nfs4Config {
        on_clients_changed: Some(Arc::new(move |owners: &[Bytes]| {
            if !h.load(std::sync::atomic::Ordering::SeqCst) {
                return Err("No space left on device".into());
            }
            *r.lock().unwrap() = owners.iter().map(|o| o.to_vec()).collect();
            Ok(())
        })),
        ..Nfs4Config::default()
    });
    let mut v = V4::connect_with(s.client(), "unrecordable", 1, 4, false);
    let root = v.fh("/mem");
    let complete =
        |v: &mut V4| v.compound(vec![ArgOp::ReclaimComplete(ReclaimComplete4Args { one_fs: false })]).status;
    // Not recorded: not done. It may get no state that a restart would not let it reclaim.
    assert_eq!(complete(&mut v), Nfsstat4::Delay);
    assert_eq!(complete(&mut v), Nfsstat4::Delay, "asking again tries the write again");
    assert_eq!(v.open(&root, "f", OPEN4_SHARE_ACCESS_BOTH, true).status, Nfsstat4::Grace);
    let stats = s.stats.snapshot();
    assert!(stats.nfs4_record_failures >= 2, "failures counted: {}", stats.nfs4_record_failures);
    assert_eq!(stats.nfs4_record_failures, stats.nfs4_record_writes);
    // The disk has room again: the client's next try is recorded, and it carries on.
    healthy.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(complete(&mut v), Nfsstat4::Ok);
    assert_eq!(*recorded.lock().unwrap(), vec![b"unrecordable".to_vec()]);
    assert_eq!(v.open(&root, "f", OPEN4_SHARE_ACCESS_BOTH, true).status, Nfsstat4::Ok);
    assert_eq!(complete(&mut v), Nfsstat4::CompleteAlready);
}

#[test]
fn the_grace_period_ends_by_the_clock_when_a_previous_client_never_returns() {
    let s = server_with(Nfs4Config {
        previous_clients: vec![Bytes::from_static(b"gone-for-good")],
        grace_period: Duration::from_secs(30),
        ..Nfs4Config::default()
    });
    let mut v = V4::connect(s.addr, "patient");
    let root = v.fh("/mem");
    assert_eq!(v.open(&root, "x", OPEN4_SHARE_ACCESS_BOTH, true).status, Nfsstat4::Grace);
    s.handle().advance_nfs4_clock(Duration::from_secs(31));
    assert_eq!(v.open(&root, "x", OPEN4_SHARE_ACCESS_BOTH, true).status, Nfsstat4::Ok);
}

#[test]
fn client_ids_of_another_start_are_stale() {
    let s1 = server_with(Nfs4Config { boot_epoch: 5, ..Nfs4Config::default() });
    let mut c = s1.client();
    let Res4::Ok(e1) = exchange_id(&mut c, "restarting") else { panic!() };
    drop(c);
    s1.stop();
    let s2 = server_with(Nfs4Config { boot_epoch: 6, ..Nfs4Config::default() });
    let mut c = s2.client();
    let Res4::Ok(e2) = exchange_id(&mut c, "restarting") else { panic!() };
    assert_ne!(e1.clientid, e2.clientid, "a new start never hands out an earlier start's client id");
    let cs = ArgOp::CreateSession(CreateSession4Args {
        clientid: e1.clientid,
        sequence: 1,
        flags: 0,
        fore_chan_attrs: ChannelAttrs4 {
            ca_maxrequestsize: 8192,
            ca_maxresponsesize: 8192,
            ca_maxoperations: 8,
            ca_maxrequests: 1,
            ..Default::default()
        },
        back_chan_attrs: ChannelAttrs4 {
            ca_maxrequestsize: 8192,
            ca_maxresponsesize: 8192,
            ca_maxoperations: 8,
            ca_maxrequests: 1,
            ..Default::default()
        },
        cb_program: CB_PROG,
        sec_parms: SecParmsList(vec![CallbackSecParms4::None]),
    });
    let mut cbs = Vec::new();
    let r = call(&mut c, &compound(1, vec![cs]), &mut cbs);
    assert_eq!(r.status, Nfsstat4::StaleClientid);
}

#[test]
fn mangled_compounds_are_answered_and_nothing_breaks() {
    use rand::{Rng, SeedableRng};
    let s = server();
    let mut v = V4::connect(s.addr, "mangler");
    let root = v.fh("/mem");
    let (fh, st, _) = v.open_ok(&root, "target", OPEN4_SHARE_ACCESS_BOTH);
    // Valid COMPOUNDs of many operations, each then damaged at random (bytes flipped, cut
    // short, lengths inflated): every one must get an RPC reply, and the server must go on.
    let templates: Vec<Vec<u8>> = vec![
        eagernfs_xdr::to_vec(&compound(
            1,
            vec![
                v.sequence(5, true),
                ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
                ArgOp::Write(Write4Args {
                    stateid: st,
                    offset: 3,
                    stable: StableHow4::FileSync4,
                    data: Bytes::from_static(b"abc"),
                }),
                ArgOp::Getattr(Getattr4Args {
                    attr_request: Bitmap4::from_bits(&[FATTR4_SIZE, FATTR4_CHANGE]),
                }),
            ],
        )),
        eagernfs_xdr::to_vec(&compound(
            2,
            vec![
                v.sequence(6, false),
                ArgOp::Putfh(Putfh4Args { object: root.clone() }),
                ArgOp::Open(Open4Args {
                    seqid: 0,
                    share_access: OPEN4_SHARE_ACCESS_READ,
                    share_deny: 0,
                    owner: StateOwner4 { clientid: v.clientid, owner: Opaque::from_static(b"m") },
                    openhow: Openflag4::Create(Createhow4::Exclusive41 {
                        verf: [1; 8],
                        attrs: FileAttrs { mode: Some(0o600), ..Default::default() }.to_fattr(),
                    }),
                    claim: OpenClaim4::Null(name("mangled")),
                }),
                ArgOp::Lock(Lock4Args {
                    locktype: NfsLockType4::ReadLt,
                    reclaim: false,
                    offset: 0,
                    length: 10,
                    locker: Locker4::NewOwner(OpenToLockOwner4 {
                        open_seqid: 0,
                        open_stateid: Stateid4::CURRENT,
                        lock_seqid: 0,
                        lock_owner: StateOwner4 { clientid: v.clientid, owner: Opaque::from_static(b"l") },
                    }),
                }),
                ArgOp::Readdir(Readdir4Args {
                    cookie: 0,
                    cookieverf: [0; 8],
                    dircount: 100,
                    maxcount: 1000,
                    attr_request: Bitmap4::from_bits(&[FATTR4_TYPE]),
                }),
                ArgOp::Setxattr(Setxattr4Args {
                    option: SetxattrOption4::Either,
                    key: name("k"),
                    value: Opaque::from_static(b"v"),
                }),
            ],
        )),
    ];
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x4e46_5334);
    let mut c = s.client();
    for i in 0..3000 {
        let mut b = templates[i % templates.len()].clone();
        match rng.gen_range(0..3) {
            0 => {
                for _ in 0..rng.gen_range(1..6) {
                    let at = rng.gen_range(0..b.len());
                    b[at] = rng.gen();
                }
            }
            1 => b.truncate(rng.gen_range(0..b.len())),
            _ => {
                let at = rng.gen_range(0..b.len() / 4) * 4;
                b[at..at + 4].copy_from_slice(&rng.gen_range(0x7fff_0000u32..=u32::MAX).to_be_bytes());
            }
        }
        let r = c.call_raw(NFS_PROGRAM, NFS_V4, NFSPROC4_COMPOUND, &b);
        assert!(
            matches!(
                r.accept_stat(),
                eagernfs_rpc::AcceptStat::Success | eagernfs_rpc::AcceptStat::GarbageArgs
            ),
            "mangled COMPOUND {i}: {:?}",
            r.accept_stat()
        );
    }
    // Everyone carries on: this session, a new client, NFSv3.
    let r = v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Getattr(Getattr4Args { attr_request: Bitmap4::from_bits(&[FATTR4_SIZE]) }),
    ]);
    assert_eq!(r.status, Nfsstat4::Ok);
    V4::connect(s.addr, "after-the-storm").ok(vec![ArgOp::Putrootfh(())]);
    let mut c3 = s.client();
    let r3 = c3.root("/mem");
    assert_eq!(c3.getattr(&r3).status(), nfs3::Nfsstat3::Ok);
}

/// Clients opening, locking, taking delegations and writing the same files at once, while
/// new client ids arrive and the clock runs past leases as the traffic goes on (so sweeps,
/// recalls, revocations and expiries all happen under it): every thread finishes, with no
/// lock-order hang, and a client whose state expired starts over.
#[test]
fn concurrent_state_traffic_with_leases_running_out_finishes() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let s = server_with(Nfs4Config { max_clients: 64, ..Nfs4Config::default() });
    let addr = s.addr;
    let handle = s.handle();
    let progress = std::sync::Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for t in 0..4usize {
        let progress = progress.clone();
        threads.push(std::thread::spawn(move || {
            let mut v = V4::connect(addr, &format!("busy-{t}"));
            let mut root = v.fh("/mem");
            for i in 0..150usize {
                progress.fetch_add(1, Ordering::Relaxed);
                let file = format!("shared-{}", i % 5);
                let access = if (i + t) % 3 == 0 { OPEN4_SHARE_ACCESS_BOTH } else { OPEN4_SHARE_ACCESS_READ };
                let r = v.open(&root, &file, access, true);
                if r.status == Nfsstat4::Badsession {
                    // Its lease ran out and someone needed its state: start over.
                    v = V4::connect(addr, &format!("busy-{t}-{i}"));
                    root = v.fh("/mem");
                    continue;
                }
                let (Some(ResOp::Open(Res4::Ok(o))), Some(ResOp::Getfh(Res4::Ok(fh)))) =
                    (r.resarray.get(2), r.resarray.get(3))
                else {
                    // DELAY while a delegation is recalled, SHARE_DENIED: legitimate here.
                    continue;
                };
                let (fh, st) = (fh.clone(), o.stateid);
                if access == OPEN4_SHARE_ACCESS_BOTH {
                    v.compound(vec![
                        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
                        ArgOp::Write(Write4Args {
                            stateid: st,
                            offset: i as u64,
                            stable: StableHow4::Unstable4,
                            data: Bytes::from_static(b"x"),
                        }),
                        ArgOp::Lock(Lock4Args {
                            locktype: NfsLockType4::WriteLt,
                            reclaim: false,
                            offset: t as u64 * 100,
                            length: 10,
                            locker: Locker4::NewOwner(OpenToLockOwner4 {
                                open_seqid: 0,
                                open_stateid: st,
                                lock_seqid: 0,
                                lock_owner: StateOwner4 {
                                    clientid: v.clientid,
                                    owner: Opaque::from_static(b"lk"),
                                },
                            }),
                        }),
                    ]);
                }
                if let OpenDelegation4::Read(d) = &o.delegation {
                    if i % 2 == 0 {
                        v.compound(vec![
                            ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
                            ArgOp::Delegreturn(Delegreturn4Args { deleg_stateid: d.stateid }),
                        ]);
                    }
                }
            }
        }));
    }
    let passer = std::thread::spawn(move || {
        let mut c = Client::connect(addr);
        for i in 0..300 {
            let _ = exchange_id(&mut c, &format!("passer-by-{i}"));
        }
    });
    // Time moves on with the traffic: a lease's worth every 60 operations.
    let mut next = 60;
    while threads.iter().any(|t| !t.is_finished()) {
        if progress.load(Ordering::Relaxed) >= next {
            handle.advance_nfs4_clock(Duration::from_secs(45));
            next += 60;
        }
        std::thread::yield_now();
    }
    for t in threads {
        t.join().expect("a client thread panicked");
    }
    passer.join().expect("EXCHANGE_ID thread panicked");
    assert!(next > 60 * 5, "the clock moved on several times under traffic");
    // The server still answers everyone.
    V4::connect(s.addr, "afterwards").ok(vec![ArgOp::Putrootfh(())]);
    assert!(s.stats.snapshot().nfs4_clients <= 64);
}

/// A plaintext door to `server` through RPC-with-TLS: a local listener whose one connection is
/// carried over TLS to `server` (the AUTH_TLS probe, the handshake, then a relay), as a
/// TLS-capable client's transport would carry it.
fn tls_door(server: std::net::SocketAddr, ca_pem: &str) -> std::net::SocketAddr {
    use eagernfs_rpc::{AcceptStat, CallHeader, Message, OpaqueAuth, ReplyBody, STARTTLS};
    use eagernfs_xdr::Encode;
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let door = listener.local_addr().unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut tls_config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls_config.alpn_protocols = vec![b"sunrpc".to_vec()];
    std::thread::spawn(move || {
        let (plain, _) = listener.accept().unwrap();
        let mut tcp = std::net::TcpStream::connect(server).unwrap();
        // The probe: NULL with AUTH_TLS; the answer's verifier is STARTTLS.
        let mut call = Vec::new();
        CallHeader {
            xid: 1,
            rpcvers: 2,
            prog: NFS_PROGRAM,
            vers: NFS_V4,
            proc_: 0,
            cred: OpaqueAuth::tls(),
            verf: OpaqueAuth::none(),
        }
        .encode(&mut call);
        let mut record = (0x8000_0000u32 | call.len() as u32).to_be_bytes().to_vec();
        record.extend_from_slice(&call);
        tcp.write_all(&record).unwrap();
        let mut mark = [0u8; 4];
        tcp.read_exact(&mut mark).unwrap();
        let mut reply = vec![0u8; (u32::from_be_bytes(mark) & 0x7fff_ffff) as usize];
        tcp.read_exact(&mut reply).unwrap();
        let Ok(Message::Reply(r)) = Message::decode(&mut Bytes::from(reply)) else { panic!("probe reply") };
        let ReplyBody::Accepted { verf, stat: AcceptStat::Success } = r.body else { panic!("probe refused") };
        assert_eq!(verf.body.as_bytes(), STARTTLS);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            tcp.set_nonblocking(true).unwrap();
            plain.set_nonblocking(true).unwrap();
            let tcp = tokio::net::TcpStream::from_std(tcp).unwrap();
            let mut plain = tokio::net::TcpStream::from_std(plain).unwrap();
            let name = rustls::pki_types::ServerName::IpAddress(server.ip().into());
            let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls_config));
            let mut tls = connector.connect(name, tcp).await.expect("TLS handshake");
            let _ = tokio::io::copy_bidirectional(&mut plain, &mut tls).await;
        });
    });
    door
}

#[test]
fn an_export_that_requires_tls_is_served_over_rpc_with_tls_and_wrongsec_without() {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
    let ca_key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, "test CA");
    let ca = p.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    p.subject_alt_names.push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    let cert = p.signed_by(&key, &ca, &ca_key).unwrap();
    let tls =
        eagernfs_server::tls::server_config(cert.pem().as_bytes(), key.serialize_pem().as_bytes(), None)
            .unwrap();
    let s = TestServer::start_with(
        ServerConfig { tls: Some(tls), ..ServerConfig::default() },
        vec![
            spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash,xprtsec=tls)", memory()),
            spec(2, &["/open"], "/open 127.0.0.0/8(rw,insecure,no_root_squash)", memory()),
        ],
    );
    // Without TLS: the pseudo-root and the plain export serve; the TLS export is WRONGSEC.
    let mut plain = V4::connect(s.addr, "plain");
    plain.fh("/open");
    let r = plain.compound(V4::walk("/mem"));
    assert_eq!(r.status, Nfsstat4::Wrongsec, "{r:?}");
    // Over RPC-with-TLS the session, a file's create, write and read all work.
    let mut v = V4::connect(tls_door(s.addr, &ca.pem()), "over-tls");
    let root = v.fh("/mem");
    let (fh, st, _) = v.open_ok(&root, "secret", OPEN4_SHARE_ACCESS_BOTH);
    v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Write(Write4Args {
            stateid: st,
            offset: 0,
            stable: StableHow4::FileSync4,
            data: Bytes::from_static(b"through TLS"),
        }),
    ]);
    let r = v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh }),
        ArgOp::Read(Read4Args { stateid: st, offset: 0, count: 100 }),
    ]);
    let ResOp::Read(Res4::Ok(rd)) = last(&r) else { panic!() };
    assert_eq!(&rd.data[..], b"through TLS");
}

#[test]
fn a_removed_directory_is_stale_to_readdir_and_every_other_operation() {
    let s = server();
    let mut v = V4::connect(s.addr, "removed-dir");
    let root = v.fh("/mem");
    removed_dir_handle_is_stale_v4(&mut v, &root, "gone");
}
