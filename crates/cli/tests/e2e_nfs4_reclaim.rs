//! NFSv4.1 clients told their registration is done (RECLAIM_COMPLETE answered NFS4_OK) can
//! reclaim their state after a server restart (issue 32, item 4): whatever identity the service
//! thread was left with by the call before (a non-root client's), and however many register at
//! once. A client the server does not find in `STATE_DIR/nfs4/clients` after the restart gets
//! NFS4ERR_RECLAIM_BAD for every reclaim.

mod common;

use common::v4::V4;
use common::*;
use eagernfs_proto::nfs4::Nfsstat4;
use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

/// Run `f` with this thread bound to one CPU. A server started from it inherits that affinity,
/// so it keeps one slot for quick calls, and with `--threads-max 1` one service thread runs
/// every call: each call finds the identity the one before left on the thread.
fn on_one_cpu<T>(f: impl FnOnce() -> T) -> T {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: cpu_set_t is plain data; the calls read and write only the sets we own, and
    // pid 0 is this thread.
    unsafe {
        let mut before: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, size, &mut before), 0, "sched_getaffinity");
        let cpu = (0..libc::CPU_SETSIZE as usize).find(|c| libc::CPU_ISSET(*c, &before)).expect("a CPU");
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        assert_eq!(libc::sched_setaffinity(0, size, &one), 0, "sched_setaffinity");
        let result = f();
        libc::sched_setaffinity(0, size, &before);
        result
    }
}

/// Each of `owners` (with its uid) connects again after a restart and reclaims an open of
/// `file` (a path from the pseudo-root), all before any says RECLAIM_COMPLETE (which ends the
/// grace period once every recorded client has); the owners whose reclaim is refused, with the
/// status.
fn reclaims_refused(port: u16, owners: &[(String, u32)], file: &str) -> Vec<String> {
    let fh = V4::connect(port, "looks-up-the-file", 0, 0).fh(file);
    let mut refused = Vec::new();
    let mut reclaimed = Vec::new();
    for (owner, uid) in owners {
        let mut c = V4::connect(port, owner, *uid, *uid);
        match c.reclaim_open(&fh) {
            Nfsstat4::Ok => reclaimed.push((owner, c)),
            status => refused.push(format!("{owner}: {status:?}")),
        }
    }
    for (owner, mut c) in reclaimed {
        assert_eq!(c.reclaim_complete(), Nfsstat4::Ok, "{owner}");
    }
    refused
}

#[test]
fn clients_registered_after_a_non_root_call_reclaim_after_a_restart() {
    if ganesha_override() {
        skip("clients_registered_after_a_non_root_call", "an eagernfs NFSv4.1 test");
        return;
    }
    if !is_root() {
        skip("clients_registered_after_a_non_root_call", "the server must run as root to act as uid 1111");
        return;
    }
    let export = tempfile::tempdir().unwrap();
    fs::set_permissions(export.path(), fs::Permissions::from_mode(0o777)).unwrap();
    fs::write(export.path().join("held"), b"state to reclaim\n").unwrap();
    let args = ["-o", "rw,insecure,no_root_squash", "--threads-min", "1", "--threads-max", "1"];
    let mut server =
        on_one_cpu(|| Server::eagernfs(export.path(), &[&args[..], &["--grace-period", "300"]].concat()));
    let port = server.port();
    let dir = server.dir().display().to_string();

    // A uid-1111 client registers and makes a directory: the service thread now acts as 1111.
    let mut nonroot = V4::connect(port, "client-of-uid-1111", 1111, 1111);
    assert_eq!(nonroot.reclaim_complete(), Nfsstat4::Ok);
    let root_fh = nonroot.fh(&dir);
    assert_eq!(nonroot.mkdir(&root_fh, "made-by-1111"), Nfsstat4::Ok);
    let made = fs::metadata(export.path().join("made-by-1111")).expect("the directory on the export");
    assert_eq!(made.uid(), 1111, "the CREATE ran as uid 1111");

    // Then root clients register; nothing in between touches the file system as anyone else.
    let mut owners: Vec<(String, u32)> = vec![("client-of-uid-1111".into(), 1111)];
    for i in 0..20 {
        let owner = format!("root-client-{i}");
        let mut c = V4::connect(port, &owner, 0, 0);
        assert_eq!(c.reclaim_complete(), Nfsstat4::Ok, "{owner}'s registration");
        owners.push((owner, 0));
    }

    server.restart();
    let refused = reclaims_refused(port, &owners, &format!("{dir}/held"));
    assert!(
        refused.is_empty(),
        "{} of {} clients told they were registered cannot reclaim after the restart: {refused:?}",
        refused.len(),
        owners.len()
    );
}

#[test]
fn hundreds_of_clients_registering_at_once_all_reclaim_after_a_restart() {
    if ganesha_override() {
        skip("hundreds_of_clients_registering_at_once", "an eagernfs NFSv4.1 test");
        return;
    }
    const CLIENTS: usize = 300;
    const WAVE: usize = 30;
    let export = tempfile::tempdir().unwrap();
    fs::write(export.path().join("held"), b"state to reclaim\n").unwrap();
    // Eight slots per CPU: many service threads run the registrations at the same time.
    let mut server = Server::eagernfs(
        export.path(),
        &["-o", "rw,insecure,no_root_squash", "--slots-per-cpu", "8", "--grace-period", "300"],
    );
    let port = server.port();
    let dir = server.dir().display().to_string();
    let owners: Vec<(String, u32)> = (0..CLIENTS).map(|i| (format!("concurrent-client-{i:03}"), 0)).collect();
    let mut clients: Vec<V4> = owners.iter().map(|(o, uid)| V4::connect(port, o, *uid, *uid)).collect();
    let record = server.state_dir().join("nfs4/clients");
    // In waves, each all at once: every RECLAIM_COMPLETE of a wave is sent before any reply is
    // read. Each was answered once it was on stable storage, so after a wave the record holds
    // every client registered so far.
    for wave in 0..CLIENTS / WAVE {
        let range = wave * WAVE..(wave + 1) * WAVE;
        let xids: Vec<u32> = clients[range.clone()]
            .iter_mut()
            .map(|c| c.send(vec![eagernfs_proto::nfs4::ArgOp::ReclaimComplete(Default::default())]))
            .collect();
        for ((c, xid), (owner, _)) in clients[range.clone()].iter_mut().zip(xids).zip(&owners[range.clone()])
        {
            assert_eq!(c.recv(xid).status, Nfsstat4::Ok, "{owner}'s registration");
        }
        let text = fs::read_to_string(&record).expect("the clients record");
        let recorded: HashSet<&str> = text.lines().collect();
        let missing: Vec<&String> = owners[..range.end]
            .iter()
            .map(|(o, _)| o)
            .filter(|o| {
                !recorded.contains(o.bytes().map(|b| format!("{b:02x}")).collect::<String>().as_str())
            })
            .collect();
        assert!(
            missing.is_empty(),
            "after wave {wave}, {} of {} registered clients are not recorded: {missing:?}",
            missing.len(),
            range.end
        );
    }
    drop(clients);
    // None failed; concurrent registrations share writes (how many is the machine's timing).
    let out =
        run_tool(eagernfs_bin(), ["stat", "--json", "--state-dir", server.state_dir().to_str().unwrap()]);
    out.assert_success("eagernfs stat --json");
    let v: serde_json::Value = serde_json::from_str(&out.stdout_text()).unwrap();
    assert_eq!(v["stats"]["nfs4_record_failures"].as_u64(), Some(0), "{}", v["stats"]);
    let writes = v["stats"]["nfs4_record_writes"].as_u64().unwrap_or(0);
    assert!((1..=CLIENTS as u64).contains(&writes), "{writes} writes of the record");
    eprintln!("{CLIENTS} registrations in waves of {WAVE}: {writes} writes of the record");

    server.restart();
    let refused = reclaims_refused(port, &owners, &format!("{dir}/held"));
    assert!(
        refused.is_empty(),
        "{} of {CLIENTS} clients told they were registered cannot reclaim after the restart: {refused:?}",
        refused.len()
    );
}
