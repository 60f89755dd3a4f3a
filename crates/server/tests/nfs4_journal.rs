//! NFSv4.1 over a journaled export (`--journal`): the changes of one COMPOUND
//! share one log write, made before the reply; and when the log fails, the
//! first change it could not make durable is answered NFS4ERR_IO and nothing
//! after it is answered at all.

mod common;

use bytes::Bytes;
use common::v4::*;
use common::*;
use eagernfs_proto::nfs4::*;
use eagernfs_vfs::journal::{JournalOptions, Journaled, LogDevice};
use eagernfs_vfs::Backend;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A log in a file that starts failing its writes when told to.
struct Failing {
    file: File,
    fail: Arc<AtomicBool>,
}

impl LogDevice for Failing {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        LogDevice::read_at(&self.file, buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.file.write_all_at(buf, offset)
    }
    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn grow(&self, len: u64) -> io::Result<()> {
        LogDevice::grow(&self.file, len)
    }
}

struct Setup {
    server: TestServer,
    journal: Arc<Journaled>,
    fail: Arc<AtomicBool>,
    _dir: tempfile::TempDir,
}

/// A memory export behind a journal in a temporary file.
fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.path().join("journal"))
        .unwrap();
    let fail = Arc::new(AtomicBool::new(false));
    let dev = Failing { file, fail: fail.clone() };
    let opts = JournalOptions { size_bytes: 16 << 20, ..JournalOptions::default() };
    let (journal, _) = Journaled::open(memory(), Box::new(dev), opts).unwrap();
    let journal = Arc::new(journal);
    let backend: Arc<dyn Backend> = journal.clone();
    let server =
        TestServer::start(vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", backend)]);
    Setup { server, journal, fail, _dir: dir }
}

/// WRITE FILE_SYNC, SETATTR of the mode and CLOSE of an open file, in one COMPOUND (as the
/// mount closes a small file it wrote).
fn write_chmod_close(fh: &NfsFh4, st: Stateid4, data: &'static [u8]) -> Vec<ArgOp> {
    let set = FileAttrs { mode: Some(0o600), ..Default::default() };
    vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Write(Write4Args {
            stateid: st,
            offset: 0,
            stable: StableHow4::FileSync4,
            data: Bytes::from_static(data),
        }),
        ArgOp::Setattr(Setattr4Args { stateid: st, obj_attributes: set.to_fattr() }),
        ArgOp::Close(Close4Args { seqid: 0, open_stateid: st }),
    ]
}

#[test]
fn the_changes_of_one_compound_share_one_log_write_made_before_the_reply() {
    let s = setup();
    let mut v = V4::connect(s.server.addr, "journal-groups");
    let root = v.fh("/mem");
    let (fh, st, _) = v.open_ok(&root, "f", OPEN4_SHARE_ACCESS_BOTH);
    let before = s.journal.stats();
    let r = v.ok(write_chmod_close(&fh, st, b"hello"));
    let after = s.journal.stats();
    assert!(matches!(&r.resarray[2], ResOp::Write(Res4::Ok(w)) if w.committed == StableHow4::FileSync4));
    assert_eq!(after.records - before.records, 2, "the WRITE and the SETATTR are each recorded");
    assert_eq!(after.groups - before.groups, 1, "and written to the log together");
    // Durable when answered: the log holds everything appended.
    assert_eq!(after.used_bytes % 4096, 0, "the group was written out whole");
    let getattr = v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
        ArgOp::Getattr(Getattr4Args { attr_request: Bitmap4::from_bits(&[FATTR4_SIZE, FATTR4_MODE]) }),
    ]);
    let ResOp::Getattr(Res4::Ok(f)) = getattr.resarray.last().unwrap() else { panic!() };
    let a = FileAttrs::from_fattr(f).unwrap();
    assert_eq!((a.size, a.mode), (Some(5), Some(0o600)));
}

#[test]
fn when_the_log_fails_the_first_deferred_change_is_an_io_error_and_nothing_after_is_answered() {
    let s = setup();
    let mut v = V4::connect(s.server.addr, "journal-fails");
    let root = v.fh("/mem");
    let (fh, st, _) = v.open_ok(&root, "f", OPEN4_SHARE_ACCESS_BOTH);
    s.fail.store(true, Ordering::SeqCst);
    let r = v.compound(write_chmod_close(&fh, st, b"lost"));
    assert_eq!(r.status, Nfsstat4::Io);
    let ops: Vec<(u32, Nfsstat4)> = r.resarray.iter().map(|x| (x.opnum(), x.status())).collect();
    assert_eq!(
        ops,
        [(OP_SEQUENCE, Nfsstat4::Ok), (OP_PUTFH, Nfsstat4::Ok), (OP_WRITE, Nfsstat4::Io)],
        "the WRITE, the first change not made durable, fails; SETATTR and CLOSE are not answered"
    );
}
