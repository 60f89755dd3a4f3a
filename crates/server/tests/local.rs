//! The server over the local-directory backend, where effects on disk can
//! be checked directly: permissions, squashing, durability and handles that
//! outlive the server. Needs root (the backend switches fsuid per caller).

mod common;

use common::*;
use eagernfs_proto::nfs3::*;
use eagernfs_server::ExportSpec;
use eagernfs_vfs::local::{LocalBackend, LocalConfig};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

const KEY: [u8; 16] = *b"srvtest-key-0001";

fn tempdir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix("eagernfs-srvtest-").tempdir_in("/tmp").unwrap();
    // tempdir makes 0700; other users must be able to search the root.
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn local_spec(root: &Path, key: [u8; 16], options: &str) -> ExportSpec {
    let backend = LocalBackend::open(LocalConfig {
        root: root.to_path_buf(),
        handle_key: key,
        unsafe_async: false,
        journaled: false,
    })
    .expect("the local backend needs root and a file system with file handles");
    spec(1, &["/local"], &format!("/local 127.0.0.0/8({options})"), Arc::new(backend))
}

fn lookup_fh(c: &mut Client, dir: &NfsFh3, name: &str) -> NfsFh3 {
    match c.lookup(dir, name) {
        Lookup3Res::Ok(ok) => ok.object,
        Lookup3Res::Fail(s, _) => panic!("LOOKUP {name} failed: {s:?}"),
    }
}

#[test]
fn file_modes_are_enforced_for_the_caller() {
    let dir = tempdir();
    let secret = dir.path().join("secret");
    fs::write(&secret, b"top secret").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    fs::create_dir(dir.path().join("pub")).unwrap();
    fs::set_permissions(dir.path().join("pub"), fs::Permissions::from_mode(0o777)).unwrap();
    let s = TestServer::start(vec![local_spec(dir.path(), KEY, "rw,insecure,no_root_squash")]);

    let mut user = s.client();
    user.cred = sys(1000, 1000);
    let root = user.root("/local");
    let fh = lookup_fh(&mut user, &root, "secret");
    assert_eq!(user.read(&fh, 0, 100).status(), Nfsstat3::Acces);
    assert_eq!(user.write(&fh, 0, b"pwned", StableHow::FileSync).status(), Nfsstat3::Acces);
    let Access3Res::Ok(acc) = user.access(&fh, ACCESS3_READ | ACCESS3_MODIFY) else { panic!("ACCESS") };
    assert_eq!(acc.access, 0, "uid 1000 has no rights on a root-owned 0600 file");
    // Files uid 1000 creates are its own, on disk.
    let pub_dir = lookup_fh(&mut user, &root, "pub");
    user.create(&pub_dir, "mine");
    let md = fs::metadata(dir.path().join("pub/mine")).unwrap();
    assert_eq!((md.uid(), md.gid()), (1000, 1000));

    // uid 0 with no_root_squash reads it.
    let mut admin = s.client();
    let root = admin.root("/local");
    let fh = lookup_fh(&mut admin, &root, "secret");
    let Read3Res::Ok(rd) = admin.read(&fh, 0, 100) else { panic!("root READ") };
    assert_eq!(&rd.data[..], b"top secret");
    assert_eq!(fs::read(&secret).unwrap(), b"top secret", "the refused WRITE changed nothing");
}

#[test]
fn root_squash_on_disk() {
    let dir = tempdir();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let s = TestServer::start(vec![local_spec(dir.path(), KEY, "rw,insecure,root_squash")]);
    let mut c = s.client();
    let root = c.root("/local");
    c.create(&root, "squashed");
    let md = fs::metadata(dir.path().join("squashed")).unwrap();
    assert_eq!((md.uid(), md.gid()), (65534, 65534), "uid 0 was not squashed on disk");
}

#[test]
fn file_sync_writes_reach_the_disk_and_handles_survive_a_restart() {
    let dir = tempdir();
    let s = TestServer::start(vec![local_spec(dir.path(), KEY, "rw,insecure,no_root_squash")]);
    let mut c = s.client();
    let root = c.root("/local");
    let f = c.create(&root, "durable");
    let Write3Res::Ok(w) = c.write(&f, 0, b"on the platter", StableHow::FileSync) else { panic!("WRITE") };
    assert_eq!(w.committed, StableHow::FileSync);
    assert_eq!(fs::read(dir.path().join("durable")).unwrap(), b"on the platter");
    let Write3Res::Ok(u) = c.write(&f, 3, b"THE", StableHow::Unstable) else { panic!("WRITE") };
    let Commit3Res::Ok(commit) =
        c.nfs(NFSPROC3_COMMIT, &Commit3Args { file: f.clone(), offset: 0, count: 0 })
    else {
        panic!("COMMIT")
    };
    assert_eq!(commit.verf, u.verf);
    assert_eq!(fs::read(dir.path().join("durable")).unwrap(), b"on THE platter");
    let fileid = c.attr(&f).fileid;
    assert_eq!(fileid, fs::metadata(dir.path().join("durable")).unwrap().ino());
    let verf_before = w.verf;
    drop(c);
    s.stop();

    // A new server over the same directory and key accepts the old handles.
    let s = TestServer::start(vec![local_spec(dir.path(), KEY, "rw,insecure,no_root_squash")]);
    let mut c = s.client();
    assert_eq!(c.attr(&f).fileid, fileid, "a handle from before the restart");
    assert_eq!(c.attr(&root).ftype, Ftype3::Dir);
    let Read3Res::Ok(rd) = c.read(&f, 0, 100) else { panic!("READ after restart") };
    assert_eq!(&rd.data[..], b"on THE platter");
    let Write3Res::Ok(w) = c.write(&f, 0, b"O", StableHow::Unstable) else { panic!("WRITE after restart") };
    assert_ne!(w.verf, verf_before, "the write verifier must change across server instances");
    drop(c);
    s.stop();

    // Another key: the old handles are refused.
    let s =
        TestServer::start(vec![local_spec(dir.path(), *b"another-key-0002", "rw,insecure,no_root_squash")]);
    let mut c = s.client();
    let st = c.getattr(&f).status();
    assert!(st == Nfsstat3::Badhandle || st == Nfsstat3::Stale, "a handle under another key answered {st:?}");
}

/// Content of the file the READ tests use: every byte depends on its offset.
fn patterned(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[1]).collect()
}

/// Pipeline READs of `ranges` and check each reply against `content`.
fn check_reads(c: &mut Client, fh: &NfsFh3, content: &[u8], ranges: &[(u64, u32)]) {
    let calls: Vec<_> = ranges
        .iter()
        .map(|&(offset, count)| {
            let args = Read3Args { file: fh.clone(), offset, count };
            (NFS_PROGRAM, NFS_V3, NFSPROC3_READ, eagernfs_xdr::to_vec(&args))
        })
        .collect();
    let (xids, replies) = c.pipeline(&calls);
    for (xid, &(offset, count)) in xids.iter().zip(ranges) {
        let Read3Res::Ok(ok) = replies[xid].results::<Read3Res>() else {
            panic!("READ {offset}+{count} failed")
        };
        let start = (offset as usize).min(content.len());
        let end = (start + count as usize).min(content.len());
        assert_eq!(ok.count as usize, end - start, "count of READ {offset}+{count}");
        assert!(ok.data[..] == content[start..end], "data of READ {offset}+{count} differs from the file");
        assert_eq!(ok.eof, end == content.len(), "eof of READ {offset}+{count}");
    }
}

#[test]
fn large_reads_are_spliced_from_the_page_cache_and_match_the_file() {
    let dir = tempdir();
    let content = patterned(3 << 20);
    fs::write(dir.path().join("big"), &content).unwrap();
    let ranges: &[(u64, u32)] = &[
        (0, 1 << 20),
        // Unaligned: touches one page more than 1 MiB holds, so it is copied instead.
        (1, 1 << 20),
        (4095, 65_536),
        (100, 40_000),
        // Small: copied.
        (12_345, 8192),
        // Cut by the end of the file (what is left fits a pipe), and past it.
        ((3 << 20) - 1000, 1 << 20),
        (5 << 20, 65_536),
    ];
    use eagernfs_server::SpliceReads;
    for splice in [SpliceReads::Always, SpliceReads::Remote, SpliceReads::Never] {
        let config = eagernfs_server::ServerConfig { splice_reads: splice, ..Default::default() };
        let s =
            TestServer::start_with(config, vec![local_spec(dir.path(), KEY, "rw,insecure,no_root_squash")]);
        let mut c = s.client();
        let root = c.root("/local");
        let fh = lookup_fh(&mut c, &root, "big");
        check_reads(&mut c, &fh, &content, ranges);
        let spliced = s.stats.snapshot().bytes_read_spliced;
        if splice == SpliceReads::Always {
            // (0, 1 MiB), (4095, 64 KiB), (100, 40000) and the 1000 bytes before the end.
            assert_eq!(spliced, (1 << 20) + 65_536 + 40_000 + 1000, "READs of 32 KiB and more are spliced");
        } else {
            // The test client is on a loopback address: `remote` copies for it.
            assert_eq!(spliced, 0, "{splice:?}: every READ is copied");
        }
        s.stop();
    }
}

#[test]
fn spliced_replies_survive_a_client_that_reads_slowly() {
    // 24 MiB of replies to a client that reads none until every call is sent: the socket fills,
    // so spliced data is left in pipes, queued, and sent as the client drains it.
    let dir = tempdir();
    let content = patterned(4 << 20);
    fs::write(dir.path().join("big"), &content).unwrap();
    let config = eagernfs_server::ServerConfig {
        splice_reads: eagernfs_server::SpliceReads::Always,
        ..Default::default()
    };
    let s = TestServer::start_with(config, vec![local_spec(dir.path(), KEY, "rw,insecure,no_root_squash")]);
    let mut c = s.client();
    let root = c.root("/local");
    let fh = lookup_fh(&mut c, &root, "big");
    let ranges: Vec<(u64, u32)> = (0..24).map(|i| ((i % 4) << 20, 1 << 20)).collect();
    check_reads(&mut c, &fh, &content, &ranges);
    assert_eq!(s.stats.snapshot().bytes_read_spliced, 24 << 20);
    // The connection is still in step: a further call is answered.
    check_reads(&mut c, &fh, &content, &[(7, 100)]);
    s.stop();
}

#[test]
fn a_removed_directory_is_stale_to_readdir_and_every_other_procedure() {
    let dir = tempdir();
    let s = TestServer::start(vec![local_spec(dir.path(), KEY, "rw,insecure,no_root_squash")]);
    let mut c = s.client();
    let root = c.root("/local");
    removed_dir_handle_is_stale(&mut c, &root, "gone");
    // Removed on disk behind the server's back (by another NFS server, or
    // locally), after the server has used the directory's handle.
    let d = c.mkdir(&root, "behind");
    c.create(&d, "f");
    assert_eq!(c.attr(&d).ftype, Ftype3::Dir);
    fs::remove_file(dir.path().join("behind/f")).unwrap();
    fs::remove_dir(dir.path().join("behind")).unwrap();
    let rd: Readdir3Res =
        c.nfs(NFSPROC3_READDIR, &Readdir3Args { dir: d.clone(), cookie: 0, cookieverf: [0; 8], count: 8192 });
    assert_eq!(rd.status(), Nfsstat3::Stale, "READDIR of a directory removed on disk");
    assert_eq!(c.getattr(&d).status(), Nfsstat3::Stale, "GETATTR of a directory removed on disk");
}

#[test]
fn a_removed_directory_is_stale_to_nfsv4_readdir_and_every_other_operation() {
    let dir = tempdir();
    let s = TestServer::start(vec![local_spec(dir.path(), KEY, "rw,insecure,no_root_squash")]);
    let mut v = common::v4::V4::connect(s.addr, "removed-dir");
    let root = v.fh("/local");
    common::v4::removed_dir_handle_is_stale_v4(&mut v, &root, "gone");
}
