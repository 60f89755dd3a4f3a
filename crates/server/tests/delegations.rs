//! Write delegations on the wire (RFC 8881 §10.4, RFC 9754): granted to a
//! file's sole opener, recalled by every access of anyone else (NFSv4,
//! NFSv3 and NLM alike) while the other caller is told to wait, other
//! clients' GETATTRs answered with what the holder reports in CB_GETATTR,
//! revoked when not returned within a lease, and delegated timestamps set by
//! the holder. And directory delegations (GET_DIR_DELEGATION, RFC 8881
//! §18.39), recalled by every change of the directory's entries or
//! attributes by anyone but the holder.

mod common;

use bytes::Bytes;
use common::v4::*;
use common::*;
use eagernfs_proto::nfs3::{self, StableHow};
use eagernfs_proto::nfs4::*;
use eagernfs_proto::nlm::*;
use eagernfs_server::{Nfs4Config, ServerConfig};
use eagernfs_xdr::Opaque;
use std::time::Duration;

/// One export at /mem, writable by root from loopback.
fn server_with(v4: Nfs4Config) -> TestServer {
    TestServer::start_with(
        ServerConfig { nfs4: v4, ..ServerConfig::default() },
        vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", memory())],
    )
}

fn server() -> TestServer {
    server_with(Nfs4Config::default())
}

/// A client whose back channel has been probed (delegations need one).
fn client(s: &TestServer, name: &str) -> V4 {
    let mut v = V4::connect(s.addr, name);
    assert!(v.wait_callback(|c| matches!(c, Callback::Null)), "CB_NULL probe");
    v
}

/// A file both protocols can name: made over NFSv3, its handle is the NFSv4 one too.
fn v3_file(s: &TestServer, name: &str) -> nfs3::NfsFh3 {
    let mut c = s.client();
    let root = c.root("/mem");
    c.create(&root, name)
}

fn v4_fh(fh: &nfs3::NfsFh3) -> NfsFh4 {
    NfsFh4 { data: Opaque(fh.data.0.clone()) }
}

/// The write delegation an OPEN brought (and whether its times are delegated).
fn write_deleg(d: &OpenDelegation4) -> (Stateid4, bool) {
    match d {
        OpenDelegation4::Write(w) => {
            assert_eq!(w.space_limit, NfsSpaceLimit4::Size(u64::MAX));
            (w.stateid, false)
        }
        OpenDelegation4::WriteAttrsDeleg(w) => (w.stateid, true),
        other => panic!("no write delegation: {other:?}"),
    }
}

fn is_recall_of(c: &Callback, st: &Stateid4) -> bool {
    matches!(c, Callback::Compound(a) if a.argarray.iter().any(|op| matches!(op, CbArgOp::Recall(r) if r.stateid == *st)))
}

fn delegreturn(v: &mut V4, fh: &NfsFh4, st: Stateid4) {
    v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Delegreturn(Delegreturn4Args { deleg_stateid: st }),
    ]);
}

fn getattr4(v: &mut V4, fh: &NfsFh4, bits: &[u32]) -> Result<FileAttrs, Nfsstat4> {
    let r = v.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Getattr(Getattr4Args { attr_request: Bitmap4::from_bits(bits) }),
    ]);
    match r.resarray.last() {
        Some(ResOp::Getattr(Res4::Ok(f))) => Ok(FileAttrs::from_fattr(f).expect("attributes decode")),
        Some(other) => Err(other.status()),
        None => panic!("no result"),
    }
}

#[test]
fn a_write_delegation_goes_to_a_sole_opener_and_not_when_another_client_has_the_file_open() {
    let s = server();
    let mut a = client(&s, "writer");
    let mut b = client(&s, "reader");
    let root = a.fh("/mem");
    // Alone: a write delegation with no space limit, whose stateid writes and reads.
    let (fh, _, open) =
        a.open_ok(&root, "solo", OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG);
    let (st, times) = write_deleg(&open.delegation);
    assert!(!times, "times are delegated only when asked for");
    let r = a.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Write(Write4Args {
            stateid: st,
            offset: 0,
            stable: StableHow4::FileSync4,
            data: Bytes::from_static(b"under delegation"),
        }),
        ArgOp::Read(Read4Args { stateid: st, offset: 0, count: 64 }),
    ]);
    let Some(ResOp::Read(Res4::Ok(d))) = r.resarray.last() else { panic!("{r:?}") };
    assert_eq!(&d.data[..], b"under delegation");
    // Opening it again, the holder gets the same delegation.
    let (_, _, again) = a.open_ok(&root, "solo", OPEN4_SHARE_ACCESS_WRITE);
    assert_eq!(write_deleg(&again.delegation).0, st);
    // A file another client has open: no write delegation, and the wish is answered with why.
    let (_, _, _) = b.open_ok(&root, "shared", OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_NO_DELEG);
    let (_, _, open) =
        a.open_ok(&root, "shared", OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG);
    assert_eq!(
        open.delegation,
        OpenDelegation4::NoneExt(OpenNoneDelegation4 { why: why_no_deleg::CONTENTION, later: Some(false) })
    );
    // A client that wants none gets none, and says so.
    let (_, _, open) =
        a.open_ok(&root, "unwanted", OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_NO_DELEG);
    assert_eq!(
        open.delegation,
        OpenDelegation4::NoneExt(OpenNoneDelegation4 { why: why_no_deleg::NOT_WANTED, later: None })
    );
    // A write delegation is not for an open without write access.
    let (_, _, open) =
        a.open_ok(&root, "readonly", OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG);
    assert!(matches!(open.delegation, OpenDelegation4::NoneExt(_)), "{:?}", open.delegation);
    // The operator can turn them off: readers still get read delegations.
    let s2 = server_with(Nfs4Config { write_delegations: false, ..Nfs4Config::default() });
    let mut c = client(&s2, "writer");
    let root = c.fh("/mem");
    let (_, _, open) = c.open_ok(&root, "f", OPEN4_SHARE_ACCESS_BOTH);
    assert_eq!(open.delegation, OpenDelegation4::None);
    let (_, _, open) = c.open_ok(&root, "g", OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_READ_DELEG);
    assert!(matches!(open.delegation, OpenDelegation4::Read(_)), "{:?}", open.delegation);
}

/// Everything another client may do that must wait for a write delegation's return.
#[derive(Debug, Clone, Copy)]
enum Access {
    V4Open,
    V4Read,
    V4Write,
    V4Setattr,
    V4Remove,
    V4Rename,
    V4Link,
    V4Lockt,
    V3Read,
    V3Write,
    V3Setattr,
    V3Remove,
    V3Rename,
    V3Link,
    NlmLock,
}

impl Access {
    const ALL: [Access; 15] = [
        Access::V4Open,
        Access::V4Read,
        Access::V4Write,
        Access::V4Setattr,
        Access::V4Remove,
        Access::V4Rename,
        Access::V4Link,
        Access::V4Lockt,
        Access::V3Read,
        Access::V3Write,
        Access::V3Setattr,
        Access::V3Remove,
        Access::V3Rename,
        Access::V3Link,
        Access::NlmLock,
    ];

    /// Try it on `name` (handle `fh`) in /mem; `true` if it went through, `false` if told to wait.
    fn run(self, v: &mut V4, c3: &mut Client, name: &str, fh: &nfs3::NfsFh3) -> bool {
        let root3 = c3.root("/mem");
        let root = v.fh("/mem");
        let fh4 = v4_fh(fh);
        let v4 = |r: Compound4Res| match r.status {
            Nfsstat4::Ok => true,
            Nfsstat4::Delay => false,
            other => panic!("{self:?}: {other:?} {r:?}"),
        };
        let v3 = |s: nfs3::Nfsstat3| match s {
            nfs3::Nfsstat3::Ok => true,
            nfs3::Nfsstat3::Jukebox => false,
            other => panic!("{self:?}: {other:?}"),
        };
        let put = ArgOp::Putfh(Putfh4Args { object: fh4.clone() });
        let link_name = format!("{name}.link");
        match self {
            Access::V4Open => {
                v4(v.open(&root, name, OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_NO_DELEG, false))
            }
            Access::V4Read => v4(v.compound(vec![
                put,
                ArgOp::Read(Read4Args { stateid: Stateid4::ANONYMOUS, offset: 0, count: 8 }),
            ])),
            Access::V4Write => v4(v.compound(vec![
                put,
                ArgOp::Write(Write4Args {
                    stateid: Stateid4::ANONYMOUS,
                    offset: 0,
                    stable: StableHow4::FileSync4,
                    data: Bytes::from_static(b"other"),
                }),
            ])),
            Access::V4Setattr => v4(v.compound(vec![
                put,
                ArgOp::Setattr(Setattr4Args {
                    stateid: Stateid4::ANONYMOUS,
                    obj_attributes: FileAttrs { mode: Some(0o640), ..Default::default() }.to_fattr(),
                }),
            ])),
            Access::V4Remove => v4(v.compound(vec![
                ArgOp::Putfh(Putfh4Args { object: root }),
                ArgOp::Remove(Remove4Args { target: name_of(name) }),
            ])),
            Access::V4Rename => v4(v.compound(vec![
                ArgOp::Putfh(Putfh4Args { object: root.clone() }),
                ArgOp::Savefh(()),
                ArgOp::Rename(Rename4Args {
                    oldname: name_of(name),
                    newname: name_of(&format!("{name}.moved")),
                }),
            ])),
            Access::V4Link => v4(v.compound(vec![
                put,
                ArgOp::Savefh(()),
                ArgOp::Putfh(Putfh4Args { object: root }),
                ArgOp::Link(Link4Args { newname: name_of(&link_name) }),
            ])),
            Access::V4Lockt => {
                let r = v.compound(vec![
                    put,
                    ArgOp::Lockt(Lockt4Args {
                        locktype: NfsLockType4::WriteLt,
                        offset: 0,
                        length: 10,
                        owner: StateOwner4 { clientid: v.clientid, owner: Opaque::from_static(b"tester") },
                    }),
                ]);
                match r.resarray.last() {
                    Some(ResOp::Lockt(Lockt4Res::Ok)) => true,
                    Some(ResOp::Lockt(Lockt4Res::Err(Nfsstat4::Delay))) => false,
                    other => panic!("{self:?}: {other:?}"),
                }
            }
            Access::V3Read => v3(c3.read(fh, 0, 8).status()),
            Access::V3Write => v3(c3.write(fh, 0, b"v3", StableHow::FileSync).status()),
            Access::V3Setattr => {
                v3(c3.setattr(fh, nfs3::Sattr3 { size: Some(1), ..Default::default() }, None).status())
            }
            Access::V3Remove => v3(c3.remove(&root3, name).status()),
            Access::V3Rename => v3(c3
                .nfs::<_, nfs3::Rename3Res>(
                    nfs3::NFSPROC3_RENAME,
                    &nfs3::Rename3Args {
                        from: diropargs(&root3, name),
                        to: diropargs(&root3, &format!("{name}.moved")),
                    },
                )
                .status()),
            Access::V3Link => v3(c3
                .nfs::<_, nfs3::Link3Res>(
                    nfs3::NFSPROC3_LINK,
                    &nfs3::Link3Args { file: fh.clone(), link: diropargs(&root3, &link_name) },
                )
                .status()),
            Access::NlmLock => {
                let alock = Nlm4Lock {
                    caller_name: Opaque::from_static(b"v3host"),
                    fh: Opaque(fh.data.0.clone()),
                    oh: Opaque::from_static(b"v3owner"),
                    svid: 42,
                    l_offset: 0,
                    l_len: 10,
                };
                let args = Nlm4LockArgs {
                    cookie: Opaque::from_static(b"c"),
                    block: false,
                    exclusive: true,
                    alock,
                    reclaim: false,
                    state: 1,
                };
                let r: Nlm4Res = c3.call(NLM_PROGRAM, NLM_V4, proc4::LOCK, &args).results();
                match r.stat {
                    Nlm4Stats::Granted => true,
                    Nlm4Stats::DeniedGracePeriod => false,
                    other => panic!("{self:?}: {other:?}"),
                }
            }
        }
    }
}

fn name_of(s: &str) -> Component4 {
    Opaque(Bytes::copy_from_slice(s.as_bytes()))
}

#[test]
fn every_access_by_anyone_else_recalls_a_write_delegation_and_waits_for_its_return() {
    let s = server();
    let mut holder = client(&s, "holder");
    let mut other = client(&s, "other");
    let mut c3 = s.client();
    let root = holder.fh("/mem");
    for (i, access) in Access::ALL.into_iter().enumerate() {
        let name = format!("f{i}");
        let fh3 = v3_file(&s, &name);
        let (fh, _, open) = holder.open_ok(&root, &name, OPEN4_SHARE_ACCESS_BOTH);
        let (st, _) = write_deleg(&open.delegation);
        holder.callbacks.clear();
        // The other caller waits while the delegation is out, and the holder is asked for it.
        assert!(!access.run(&mut other, &mut c3, &name, &fh3), "{access:?} went through a write delegation");
        assert!(holder.wait_callback(|c| is_recall_of(c, &st)), "{access:?}: CB_RECALL");
        assert!(!access.run(&mut other, &mut c3, &name, &fh3), "{access:?} before the return");
        // Once it is back, the access goes through.
        delegreturn(&mut holder, &fh, st);
        assert!(access.run(&mut other, &mut c3, &name, &fh3), "{access:?} after the return");
    }
}

#[test]
fn another_clients_getattr_is_answered_with_what_the_holder_reports_in_cb_getattr() {
    let s = server();
    let mut holder = client(&s, "holder");
    let mut other = client(&s, "other");
    let root = holder.fh("/mem");
    let fh3 = v3_file(&s, "written");
    let (fh, _, open) = holder.open_ok(&root, "written", OPEN4_SHARE_ACCESS_BOTH);
    let (st, _) = write_deleg(&open.delegation);
    let before = getattr4(&mut holder, &fh, &[FATTR4_CHANGE, FATTR4_SIZE]).unwrap();
    let granted_change = before.change.unwrap();
    assert_eq!(before.size, Some(0));
    let is_getattr = |c: &Callback| matches!(c, Callback::Getattr(_));
    // Unmodified: the holder reports the change it was granted with; others see the server's attributes.
    holder.cb_getattr = Some(FileAttrs { change: Some(granted_change), size: Some(0), ..Default::default() });
    let addr = s.addr;
    let v3fh = fh3.clone();
    let t = std::thread::spawn(move || {
        let mut c3 = Client::connect(addr);
        c3.getattr(&v3fh)
    });
    assert!(holder.wait_callback(is_getattr), "CB_GETATTR for an NFSv3 GETATTR");
    let nfs3::Getattr3Res::Ok(a) = t.join().unwrap() else { panic!("v3 GETATTR failed") };
    assert_eq!(a.obj_attributes.size, 0);
    // Modified: the holder's size, and a change the file never had before.
    holder.callbacks.clear();
    holder.cb_getattr =
        Some(FileAttrs { change: Some(granted_change + 1), size: Some(12345), ..Default::default() });
    let t = std::thread::spawn(move || {
        let mut c3 = Client::connect(addr);
        c3.getattr(&fh3)
    });
    assert!(holder.wait_callback(is_getattr), "CB_GETATTR");
    let nfs3::Getattr3Res::Ok(a3) = t.join().unwrap() else { panic!("v3 GETATTR failed") };
    assert_eq!(a3.obj_attributes.size, 12345);
    let other_fh = fh.clone();
    let t = std::thread::spawn(move || {
        getattr4(&mut other, &other_fh, &[FATTR4_CHANGE, FATTR4_SIZE]).map(|a| (a, other))
    });
    let started = std::time::Instant::now();
    while !t.is_finished() && started.elapsed() < WAIT {
        holder.ok(vec![]);
    }
    let (a4, mut other) = t.join().unwrap().expect("NFSv4 GETATTR");
    assert_eq!(a4.size, Some(12345));
    assert!(a4.change.unwrap() > granted_change, "change moved on: {a4:?} vs {granted_change}");
    // A holder that cannot say has its delegation recalled; meanwhile others wait.
    holder.callbacks.clear();
    holder.cb_getattr = None;
    let other_fh = fh.clone();
    let t = std::thread::spawn(move || getattr4(&mut other, &other_fh, &[FATTR4_SIZE]));
    assert!(holder.wait_callback(|c| is_recall_of(c, &st)), "CB_RECALL after a failed CB_GETATTR");
    assert_eq!(t.join().unwrap().unwrap_err(), Nfsstat4::Delay);
    delegreturn(&mut holder, &fh, st);
}

#[test]
fn a_write_delegation_not_returned_within_a_lease_is_revoked_and_the_other_writer_goes_ahead() {
    let s = server();
    let handle = s.handle();
    let v3fh = v3_file(&s, "kept");
    let mut holder = client(&s, "stubborn");
    let root = holder.fh("/mem");
    let (fh, _, open) = holder.open_ok(&root, "kept", OPEN4_SHARE_ACCESS_BOTH);
    let (st, _) = write_deleg(&open.delegation);
    let mut c3 = s.client();
    assert_eq!(c3.write(&v3fh, 0, b"x", StableHow::FileSync).status(), nfs3::Nfsstat3::Jukebox);
    assert!(holder.wait_callback(|c| is_recall_of(c, &st)), "CB_RECALL");
    // The holder never returns it. A lease later, the writer goes ahead.
    handle.advance_nfs4_clock(Duration::from_secs(91));
    assert_eq!(c3.write(&v3fh, 0, b"x", StableHow::FileSync).status(), nfs3::Nfsstat3::Ok);
    // The holder's writes through it now fail: its data is not silently taken.
    let r = holder.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: fh }),
        ArgOp::Write(Write4Args {
            stateid: st,
            offset: 0,
            stable: StableHow4::FileSync4,
            data: Bytes::from_static(b"late"),
        }),
    ]);
    assert_eq!(r.status, Nfsstat4::DelegRevoked);
    let ResOp::Sequence(Res4::Ok(seq)) = &holder.ok(vec![]).resarray[0] else { panic!() };
    assert_ne!(seq.status_flags & SEQ4_STATUS_RECALLABLE_STATE_REVOKED, 0);
}

#[test]
fn delegated_timestamps_set_by_the_holder_are_what_others_see() {
    let s = server();
    let mut holder = client(&s, "stamper");
    let mut other = client(&s, "onlooker");
    let root = holder.fh("/mem");
    // The server says it delegates timestamps.
    let caps = getattr4(&mut holder, &root, &[FATTR4_SUPPORTED_ATTRS, FATTR4_OPEN_ARGUMENTS]).unwrap();
    assert!(caps.supported_attrs.unwrap().contains(FATTR4_OPEN_ARGUMENTS));
    let oa = caps.open_arguments.expect("open_arguments");
    assert!(oa.oa_share_access_want.contains(open_args_want::DELEG_TIMESTAMPS));
    let (fh, _, open) =
        holder.open_ok(&root, "stamped", OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_DELEG_TIMESTAMPS);
    let (st, times) = write_deleg(&open.delegation);
    assert!(times, "OPEN_DELEGATE_WRITE_ATTRS_DELEG");
    let granted = getattr4(&mut holder, &fh, &[FATTR4_TIME_MODIFY, FATTR4_TIME_ACCESS]).unwrap();
    let granted_mtime = granted.time_modify.unwrap();
    // The holder writes (the server stamps its own mtime), then sets the time it wrote at.
    holder.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Write(Write4Args {
            stateid: st,
            offset: 0,
            stable: StableHow4::FileSync4,
            data: Bytes::from_static(b"stamped"),
        }),
    ]);
    let wrote_at = Nfstime4 { seconds: granted_mtime.seconds, nseconds: granted_mtime.nseconds + 1 };
    let wrote_at = if wrote_at.nseconds >= 1_000_000_000 {
        Nfstime4 { seconds: wrote_at.seconds + 1, nseconds: 0 }
    } else {
        wrote_at
    };
    let set = |v: &mut V4, stateid, t| {
        v.compound(vec![
            ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
            ArgOp::Setattr(Setattr4Args {
                stateid,
                obj_attributes: FileAttrs { time_deleg_modify: Some(t), ..Default::default() }.to_fattr(),
            }),
        ])
    };
    // Only the holder may, with its delegation's stateid.
    assert_eq!(set(&mut other, Stateid4::ANONYMOUS, wrote_at).status, Nfsstat4::BadStateid);
    assert_eq!(set(&mut holder, Stateid4::ANONYMOUS, wrote_at).status, Nfsstat4::BadStateid);
    assert_eq!(set(&mut holder, st, wrote_at).status, Nfsstat4::Ok);
    // A time from before the delegation is left alone.
    let old = Nfstime4 { seconds: granted_mtime.seconds - 100, nseconds: 0 };
    assert_eq!(set(&mut holder, st, old).status, Nfsstat4::Ok);
    delegreturn(&mut holder, &fh, st);
    let seen = getattr4(&mut other, &fh, &[FATTR4_TIME_MODIFY, FATTR4_SIZE]).unwrap();
    assert_eq!(seen.time_modify, Some(wrote_at), "the holder's time, not the server's write time");
    assert_eq!(seen.size, Some(7));
}

#[test]
fn a_getattr_waiting_for_cb_getattr_lets_the_answer_in_on_its_own_connection() {
    // pynfs runs several clients' sessions over one connection: the holder's
    // CB_GETATTR answer then arrives on the connection whose GETATTR waits for it.
    let s = server();
    let mut holder = client(&s, "holder");
    let mut other = client(&s, "other");
    let root = holder.fh("/mem");
    let (fh, _, open) = holder.open_ok(&root, "shared-conn", OPEN4_SHARE_ACCESS_BOTH);
    let (st, _) = write_deleg(&open.delegation);
    let granted = getattr4(&mut holder, &fh, &[FATTR4_CHANGE]).unwrap().change.unwrap();
    // The holder's back channel moves to the other client's connection.
    let r = other.raw(vec![ArgOp::BindConnToSession(BindConnToSession4Args {
        sessid: holder.sessionid,
        dir: ChannelDirFromClient4::BackOrBoth,
        use_conn_in_rdma_mode: false,
    })]);
    assert_eq!(r.status, Nfsstat4::Ok, "{r:?}");
    // That connection answers the holder's callbacks (the other client's loop does it for it).
    other.cb_getattr = Some(FileAttrs { change: Some(granted + 1), size: Some(42), ..Default::default() });
    let a = getattr4(&mut other, &fh, &[FATTR4_SIZE, FATTR4_CHANGE]).expect("GETATTR answered, not DELAY");
    assert!(other.callbacks.iter().any(|c| matches!(c, Callback::Getattr(_))), "CB_GETATTR came on it");
    assert_eq!(a.size, Some(42));
    delegreturn(&mut holder, &fh, st);
}

/// GET_DIR_DELEGATION of `dir`: the stateid, or `None` for GDD4_UNAVAIL.
fn get_dir_delegation(v: &mut V4, dir: &NfsFh4) -> Result<Option<Stateid4>, Nfsstat4> {
    let r = v.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: dir.clone() }),
        ArgOp::GetDirDelegation(GetDirDelegation4Args::default()),
    ]);
    match r.resarray.last() {
        Some(ResOp::GetDirDelegation(Res4::Ok(GetDirDelegation4Res::Granted(ok)))) => {
            assert!(ok.notification.is_empty(), "no notifications are offered: every change recalls");
            Ok(Some(ok.stateid))
        }
        Some(ResOp::GetDirDelegation(Res4::Ok(GetDirDelegation4Res::Unavail { .. }))) => Ok(None),
        Some(other) => Err(other.status()),
        None => panic!("no result"),
    }
}

/// What another client (NFSv4 or NFSv3) may do to a directory's entries or attributes.
#[derive(Debug, Clone, Copy)]
enum DirChange {
    V4Create,
    V4Mkdir,
    V4Remove,
    V4RenameIn,
    V4RenameOut,
    V4Link,
    V4Chmod,
    V3Create,
    V3Mkdir,
    V3Remove,
    V3Rmdir,
    V3Rename,
    V3Link,
    V3Chmod,
}

impl DirChange {
    const ALL: [DirChange; 14] = [
        DirChange::V4Create,
        DirChange::V4Mkdir,
        DirChange::V4Remove,
        DirChange::V4RenameIn,
        DirChange::V4RenameOut,
        DirChange::V4Link,
        DirChange::V4Chmod,
        DirChange::V3Create,
        DirChange::V3Mkdir,
        DirChange::V3Remove,
        DirChange::V3Rmdir,
        DirChange::V3Rename,
        DirChange::V3Link,
        DirChange::V3Chmod,
    ];

    /// Make the change to `dir` (named `dir_name` in /mem, holding a file `f` and a directory
    /// `sub`): `true` if it went through, `false` if the caller was told to wait.
    fn run(self, v: &mut V4, c3: &mut Client, dir_name: &str) -> bool {
        let v4 = |r: Compound4Res| match r.status {
            Nfsstat4::Ok => true,
            Nfsstat4::Delay => false,
            s => panic!("{self:?}: {s:?}"),
        };
        let v3 = |s: nfs3::Nfsstat3| match s {
            nfs3::Nfsstat3::Ok => true,
            nfs3::Nfsstat3::Jukebox => false,
            s => panic!("{self:?}: {s:?}"),
        };
        let root = v.fh("/mem");
        let dir = v.fh(&format!("/mem/{dir_name}"));
        let put = |fh: &NfsFh4| ArgOp::Putfh(Putfh4Args { object: fh.clone() });
        let root3 = c3.root("/mem");
        let dir3 = c3.root(&format!("/mem/{dir_name}"));
        let outside = format!("{dir_name}.outside");
        let mode = |m: u32| FileAttrs { mode: Some(m), ..FileAttrs::default() }.to_fattr();
        match self {
            DirChange::V4Create => v4(v.open(&dir, "new", OPEN4_SHARE_ACCESS_READ, true)),
            DirChange::V4Mkdir => v4(v.compound(vec![
                put(&dir),
                ArgOp::Create(Create4Args {
                    objtype: Createtype4::Dir,
                    objname: name_of("newdir"),
                    createattrs: Fattr4::default(),
                }),
            ])),
            DirChange::V4Remove => {
                v4(v.compound(vec![put(&dir), ArgOp::Remove(Remove4Args { target: name_of("f") })]))
            }
            DirChange::V4RenameIn => {
                c3.create(&root3, &outside);
                v4(v.compound(vec![
                    put(&root),
                    ArgOp::Savefh(()),
                    put(&dir),
                    ArgOp::Rename(Rename4Args { oldname: name_of(&outside), newname: name_of("moved-in") }),
                ]))
            }
            DirChange::V4RenameOut => v4(v.compound(vec![
                put(&dir),
                ArgOp::Savefh(()),
                put(&root),
                ArgOp::Rename(Rename4Args { oldname: name_of("f"), newname: name_of(&outside) }),
            ])),
            DirChange::V4Link => {
                let file = c3.create(&root3, &outside);
                v4(v.compound(vec![
                    put(&v4_fh(&file)),
                    ArgOp::Savefh(()),
                    put(&dir),
                    ArgOp::Link(Link4Args { newname: name_of("linked") }),
                ]))
            }
            DirChange::V4Chmod => v4(v.compound(vec![
                put(&dir),
                ArgOp::Setattr(Setattr4Args { stateid: Stateid4::ANONYMOUS, obj_attributes: mode(0o750) }),
            ])),
            DirChange::V3Create => {
                v3(c3.create_how(&dir3, "new", nfs3::Createhow3::Unchecked(Default::default())).status())
            }
            DirChange::V3Mkdir => v3(c3
                .nfs::<_, nfs3::Mkdir3Res>(
                    nfs3::NFSPROC3_MKDIR,
                    &nfs3::Mkdir3Args { where_: diropargs(&dir3, "newdir"), attributes: Default::default() },
                )
                .status()),
            DirChange::V3Remove => v3(c3.remove(&dir3, "f").status()),
            DirChange::V3Rmdir => v3(c3
                .nfs::<_, nfs3::Rmdir3Res>(
                    nfs3::NFSPROC3_RMDIR,
                    &nfs3::Rmdir3Args { object: diropargs(&dir3, "sub") },
                )
                .status()),
            DirChange::V3Rename => v3(c3
                .nfs::<_, nfs3::Rename3Res>(
                    nfs3::NFSPROC3_RENAME,
                    &nfs3::Rename3Args { from: diropargs(&dir3, "f"), to: diropargs(&dir3, "f.renamed") },
                )
                .status()),
            DirChange::V3Link => {
                let file = c3.create(&root3, &outside);
                v3(c3
                    .nfs::<_, nfs3::Link3Res>(
                        nfs3::NFSPROC3_LINK,
                        &nfs3::Link3Args { file, link: diropargs(&dir3, "linked") },
                    )
                    .status())
            }
            DirChange::V3Chmod => {
                v3(c3.setattr(&dir3, nfs3::Sattr3 { mode: Some(0o750), ..Default::default() }, None).status())
            }
        }
    }
}

#[test]
fn a_directory_delegation_is_recalled_by_every_change_of_its_entries_or_attributes_by_anyone_else() {
    let s = server();
    let mut holder = client(&s, "holder");
    let mut other = client(&s, "other");
    let mut c3 = s.client();
    let root3 = c3.root("/mem");
    // Only directories.
    let file = v4_fh(&v3_file(&s, "plain"));
    assert_eq!(get_dir_delegation(&mut holder, &file), Err(Nfsstat4::Notdir));
    for (i, change) in DirChange::ALL.into_iter().enumerate() {
        let dir_name = format!("d{i}");
        let dir3 = c3.mkdir(&root3, &dir_name);
        c3.create(&dir3, "f");
        c3.mkdir(&dir3, "sub");
        let dir = v4_fh(&dir3);
        let st = get_dir_delegation(&mut holder, &dir).expect("granted").expect("not GDD4_UNAVAIL");
        // Asked again: the same delegation.
        assert_eq!(get_dir_delegation(&mut holder, &dir), Ok(Some(st)), "{change:?}");
        // The holder's own changes recall nothing.
        holder.callbacks.clear();
        let (_, open_st, _) = holder.open_ok(&dir, "holders-own", OPEN4_SHARE_ACCESS_READ);
        assert!(
            !holder.callbacks.iter().any(|c| is_recall_of(c, &st)),
            "{change:?}: the holder's own create"
        );
        let _ = open_st;
        // Anyone else's change waits, and the holder is asked for the delegation.
        assert!(
            !change.run(&mut other, &mut c3, &dir_name),
            "{change:?} went through a directory delegation"
        );
        assert!(holder.wait_callback(|c| is_recall_of(c, &st)), "{change:?}: CB_RECALL");
        assert!(!change.run(&mut other, &mut c3, &dir_name), "{change:?} before the return");
        delegreturn(&mut holder, &dir, st);
        assert!(change.run(&mut other, &mut c3, &dir_name), "{change:?} after the return");
        // Just recalled: none again for a while (the directory is in use by others).
        assert_eq!(get_dir_delegation(&mut holder, &dir), Ok(None), "{change:?}: granted again at once");
    }
}

/// TEST_STATEID of one stateid: OK while the server holds it.
fn test_stateid(v: &mut V4, st: Stateid4) -> Nfsstat4 {
    let r = v.ok(vec![ArgOp::TestStateid(TestStateid4Args(vec![st]))]);
    let Some(ResOp::TestStateid(Res4::Ok(t))) = r.resarray.last() else { panic!("{r:?}") };
    t.0[0]
}

fn close(v: &mut V4, fh: &NfsFh4, st: Stateid4) {
    v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Close(Close4Args { seqid: 0, open_stateid: st }),
    ]);
}

fn remove(v: &mut V4, dir: &NfsFh4, name: &str) {
    v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: dir.clone() }),
        ArgOp::Remove(Remove4Args { target: name_of(name) }),
    ]);
}

/// A client that removes the last name of a file or directory it holds a delegation of, and
/// does not give it back first, could never give it back (the handle is stale): the server
/// drops it rather than keep it until the client id ends. Not while the object lives on:
/// another name, an open of it, or a rename onto another name of itself.
#[test]
fn the_delegation_of_an_object_whose_last_name_is_removed_is_dropped_and_no_sooner() {
    let s = server();
    let mut a = client(&s, "remover");
    let root = a.fh("/mem");
    let want = OPEN4_SHARE_ACCESS_BOTH | OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG;
    // One name: gone with it.
    let (fh, open_st, open) = a.open_ok(&root, "one", want);
    let (st, _) = write_deleg(&open.delegation);
    close(&mut a, &fh, open_st);
    assert_eq!(test_stateid(&mut a, st), Nfsstat4::Ok);
    remove(&mut a, &root, "one");
    assert_eq!(test_stateid(&mut a, st), Nfsstat4::BadStateid, "dropped with the file's last name");
    // Two names: the file lives on under the other, and so does its delegation.
    let (fh, open_st, open) = a.open_ok(&root, "two", want);
    let (st, _) = write_deleg(&open.delegation);
    a.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Savefh(()),
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Link(Link4Args { newname: name_of("two-again") }),
    ]);
    close(&mut a, &fh, open_st);
    remove(&mut a, &root, "two");
    assert_eq!(test_stateid(&mut a, st), Nfsstat4::Ok, "another name is left");
    remove(&mut a, &root, "two-again");
    assert_eq!(test_stateid(&mut a, st), Nfsstat4::BadStateid, "the last name went");
    // Still open: kept (the open's holder may still use the file).
    let (_, open_st, open) = a.open_ok(&root, "open", want);
    let (st, _) = write_deleg(&open.delegation);
    remove(&mut a, &root, "open");
    assert_eq!(test_stateid(&mut a, st), Nfsstat4::Ok, "an open of it is left");
    assert_eq!(test_stateid(&mut a, open_st), Nfsstat4::Ok);
    // A directory: gone with its RMDIR.
    a.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Create(Create4Args {
            objtype: Createtype4::Dir,
            objname: name_of("dir"),
            createattrs: Fattr4::default(),
        }),
    ]);
    let dir = a.fh("/mem/dir");
    let st = get_dir_delegation(&mut a, &dir).expect("GET_DIR_DELEGATION").expect("granted");
    remove(&mut a, &root, "dir");
    assert_eq!(test_stateid(&mut a, st), Nfsstat4::BadStateid, "dropped with the directory");
}
