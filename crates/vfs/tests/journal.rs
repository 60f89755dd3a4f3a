//! The intent journal under crashes: every acknowledged write survives a crash
//! at any point, with the device losing what was not synced (whole writes, or
//! a torn prefix of one) and the backend losing what it had not synced either.
//!
//! Two fakes make that crash exact: [`LossyDevice`], a journal device that
//! remembers what was synced, and [`Volatile`], a backend over the memory
//! backend whose files go back to their content at the last `sync_all`.

mod conformance;

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eagernfs_vfs::journal::{JournalOptions, Journaled, LogDevice, Replay};
use eagernfs_vfs::memory::{MemoryBackend, MemoryConfig};
use eagernfs_vfs::{
    Attr, Backend, CreateMode, Created, Credentials, DirEntry, DirInfo, FileHandle, FsError, FsProperties,
    FsResult, FsStat, Lookup, NodeKind, ReadResult, SetAttr, StableHow, Timestamp, Verifier, Wcc,
    WriteResult,
};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

// ----- a journal device that loses what was not synced ------------------------------------------

#[derive(Default)]
struct DeviceState {
    /// What a crash leaves: everything synced.
    durable: Vec<u8>,
    /// What reads see.
    current: Vec<u8>,
    /// Writes since the last sync, in order.
    pending: Vec<(u64, Vec<u8>)>,
    syncs: u64,
    /// Fail every write and sync from now on.
    broken: bool,
}

#[derive(Clone, Default)]
struct LossyDevice(Arc<Mutex<DeviceState>>);

fn put(buf: &mut Vec<u8>, data: &[u8], at: u64) {
    let end = at as usize + data.len();
    if buf.len() < end {
        buf.resize(end, 0);
    }
    buf[at as usize..end].copy_from_slice(data);
}

impl LossyDevice {
    /// The device after a power loss: synced bytes, and of each unsynced write
    /// either all, none, or a prefix cut at a 512-byte sector.
    fn crash(&self, rng: &mut StdRng) -> LossyDevice {
        let st = self.0.lock();
        let mut image = st.durable.clone();
        for (at, data) in &st.pending {
            match rng.gen_range(0..3) {
                0 => {}
                1 => put(&mut image, data, *at),
                _ => {
                    let sectors = data.len().div_ceil(512);
                    let keep = (rng.gen_range(0..=sectors) * 512).min(data.len());
                    put(&mut image, &data[..keep], *at);
                }
            }
        }
        LossyDevice(Arc::new(Mutex::new(DeviceState {
            durable: image.clone(),
            current: image,
            ..DeviceState::default()
        })))
    }

    fn syncs(&self) -> u64 {
        self.0.lock().syncs
    }
}

impl LogDevice for LossyDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let st = self.0.lock();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = st.current.get(offset as usize + i).copied().unwrap_or(0);
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut st = self.0.lock();
        if st.broken {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        put(&mut st.current, buf, offset);
        st.pending.push((offset, buf.to_vec()));
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut st = self.0.lock();
        if st.broken {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        let pending = std::mem::take(&mut st.pending);
        for (at, data) in pending {
            put(&mut st.durable, &data, at);
        }
        st.syncs += 1;
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.0.lock().current.len() as u64)
    }

    fn grow(&self, len: u64) -> io::Result<()> {
        let mut st = self.0.lock();
        if (st.current.len() as u64) < len {
            st.current.resize(len as usize, 0);
            st.durable.resize(len as usize, 0);
        }
        Ok(())
    }
}

// ----- a backend that loses what it did not sync ------------------------------------------------

/// The memory backend, where a "crash" puts every file back as it was at the
/// last `sync_all` (a file made since then comes back empty).
struct Volatile {
    inner: MemoryBackend,
    /// File contents at the last sync.
    synced: Mutex<HashMap<FileHandle, Vec<u8>>>,
    /// Files changed since the last sync.
    touched: Mutex<HashSet<FileHandle>>,
}

fn read_whole(b: &dyn Backend, fh: &FileHandle) -> Vec<u8> {
    let size = b.getattr(fh).unwrap().size;
    let mut out = Vec::new();
    while (out.len() as u64) < size {
        let r = b.read(&Credentials::root(), fh, out.len() as u64, 1 << 20).unwrap();
        if r.data.is_empty() {
            break;
        }
        out.extend_from_slice(&r.data);
    }
    out
}

impl Volatile {
    fn new() -> Volatile {
        Volatile {
            inner: MemoryBackend::new(MemoryConfig::default()),
            synced: Mutex::new(HashMap::new()),
            touched: Mutex::new(HashSet::new()),
        }
    }

    /// Lose everything not synced.
    fn crash(&self) {
        let root = Credentials::root();
        let synced = self.synced.lock();
        for fh in self.touched.lock().drain() {
            let old = synced.get(&fh).cloned().unwrap_or_default();
            let set = SetAttr { size: Some(0), ..SetAttr::default() };
            self.inner.setattr(&root, &fh, &set, None).unwrap();
            if !old.is_empty() {
                self.inner.write(&root, &fh, 0, &old, StableHow::Unstable).unwrap();
            }
        }
    }
}

impl Backend for Volatile {
    fn root(&self) -> FileHandle {
        self.inner.root()
    }
    fn getattr(&self, fh: &FileHandle) -> FsResult<Attr> {
        self.inner.getattr(fh)
    }
    fn setattr(&self, c: &Credentials, fh: &FileHandle, s: &SetAttr, g: Option<Timestamp>) -> FsResult<Wcc> {
        self.touched.lock().insert(fh.clone());
        self.inner.setattr(c, fh, s, g)
    }
    fn lookup(&self, c: &Credentials, d: &FileHandle, n: &[u8]) -> FsResult<Lookup> {
        self.inner.lookup(c, d, n)
    }
    fn access(&self, c: &Credentials, fh: &FileHandle, w: u32) -> FsResult<(u32, Attr)> {
        self.inner.access(c, fh, w)
    }
    fn readlink(&self, c: &Credentials, fh: &FileHandle) -> FsResult<(Bytes, Attr)> {
        self.inner.readlink(c, fh)
    }
    fn read(&self, c: &Credentials, fh: &FileHandle, o: u64, n: u32) -> FsResult<ReadResult> {
        self.inner.read(c, fh, o, n)
    }
    fn write(
        &self,
        c: &Credentials,
        fh: &FileHandle,
        o: u64,
        d: &[u8],
        s: StableHow,
    ) -> FsResult<WriteResult> {
        assert_eq!(s, StableHow::Unstable, "the journal leaves durability to itself");
        self.touched.lock().insert(fh.clone());
        self.inner.write(c, fh, o, d, s)
    }
    fn create(&self, c: &Credentials, d: &FileHandle, n: &[u8], h: &CreateMode) -> FsResult<Created> {
        let r = self.inner.create(c, d, n, h)?;
        self.touched.lock().insert(r.handle.clone());
        Ok(r)
    }
    fn mkdir(&self, c: &Credentials, d: &FileHandle, n: &[u8], s: &SetAttr) -> FsResult<Created> {
        self.inner.mkdir(c, d, n, s)
    }
    fn symlink(&self, c: &Credentials, d: &FileHandle, n: &[u8], t: &[u8], s: &SetAttr) -> FsResult<Created> {
        self.inner.symlink(c, d, n, t, s)
    }
    fn mknod(
        &self,
        c: &Credentials,
        d: &FileHandle,
        n: &[u8],
        k: NodeKind,
        s: &SetAttr,
    ) -> FsResult<Created> {
        self.inner.mknod(c, d, n, k, s)
    }
    fn remove(&self, c: &Credentials, d: &FileHandle, n: &[u8]) -> FsResult<Wcc> {
        self.inner.remove(c, d, n)
    }
    fn rmdir(&self, c: &Credentials, d: &FileHandle, n: &[u8]) -> FsResult<Wcc> {
        self.inner.rmdir(c, d, n)
    }
    fn rename(
        &self,
        c: &Credentials,
        a: &FileHandle,
        an: &[u8],
        b: &FileHandle,
        bn: &[u8],
    ) -> FsResult<(Wcc, Wcc)> {
        self.inner.rename(c, a, an, b, bn)
    }
    fn link(
        &self,
        c: &Credentials,
        fh: &FileHandle,
        d: &FileHandle,
        n: &[u8],
    ) -> FsResult<(Option<Attr>, Wcc)> {
        self.inner.link(c, fh, d, n)
    }
    fn readdir(
        &self,
        c: &Credentials,
        d: &FileHandle,
        cookie: u64,
        v: Verifier,
        plus: bool,
        sink: &mut dyn FnMut(&DirEntry) -> bool,
    ) -> FsResult<DirInfo> {
        self.inner.readdir(c, d, cookie, v, plus, sink)
    }
    fn fsstat(&self, fh: &FileHandle) -> FsResult<FsStat> {
        self.inner.fsstat(fh)
    }
    fn properties(&self) -> FsProperties {
        self.inner.properties()
    }
    fn commit(&self, _: &Credentials, _: &FileHandle, _: u64, _: u32) -> FsResult<(Wcc, Verifier)> {
        panic!("the journal answers COMMIT itself");
    }
    fn write_verifier(&self) -> Verifier {
        self.inner.write_verifier()
    }
    fn sync_all(&self) -> FsResult<()> {
        let touched: Vec<FileHandle> = self.touched.lock().drain().collect();
        let mut synced = self.synced.lock();
        for fh in touched {
            synced.insert(fh.clone(), read_whole(&self.inner, &fh));
        }
        Ok(())
    }
}

// ----- helpers ----------------------------------------------------------------------------------

fn opts(size: u64) -> JournalOptions {
    JournalOptions {
        size_bytes: size,
        owner: *b"journal-test-own",
        // The checkpointer runs on its own schedule too; tests also force it.
        checkpoint_interval: Duration::from_millis(50),
    }
}

fn open(b: &Arc<Volatile>, dev: &LossyDevice, size: u64) -> (Journaled, Replay) {
    Journaled::open(b.clone(), Box::new(dev.clone()), opts(size)).expect("journal opens")
}

fn make_files(b: &Volatile, n: usize) -> Vec<FileHandle> {
    let root = Credentials::root();
    let files = (0..n)
        .map(|i| {
            b.create(&root, &b.root(), format!("f{i}").as_bytes(), &CreateMode::Unchecked(SetAttr::default()))
                .unwrap()
                .handle
        })
        .collect();
    b.sync_all().unwrap();
    files
}

/// Apply a write to the model of acknowledged content.
fn model_write(m: &mut Vec<u8>, offset: u64, data: &[u8]) {
    put(m, data, offset);
}

// ----- the tests --------------------------------------------------------------------------------

/// Random writes and truncations, with crashes at random points (the journal
/// device and the backend both lose what was not synced): after every replay,
/// each file holds exactly what was acknowledged, and the verifier is unchanged.
#[test]
fn acknowledged_data_survives_crashes_at_random_points() {
    let seeds = std::env::var("JOURNAL_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(60u64);
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let backend = Arc::new(Volatile::new());
        let files = make_files(&backend, 4);
        let mut model: Vec<Vec<u8>> = vec![Vec::new(); files.len()];
        let mut dev = LossyDevice::default();
        let (mut j, replay) = open(&backend, &dev, 4 << 20);
        assert!(replay.fresh);
        let verifier = j.write_verifier();
        let root = Credentials::root();
        for round in 0..4 {
            let ops = rng.gen_range(1..120);
            for _ in 0..ops {
                let i = rng.gen_range(0..files.len());
                match rng.gen_range(0..20) {
                    0 => {
                        let size = rng.gen_range(0..300_000u64);
                        let set = SetAttr { size: Some(size), ..SetAttr::default() };
                        j.setattr(&root, &files[i], &set, None).unwrap();
                        model[i].resize(size as usize, 0);
                    }
                    1 => j.sync_all().unwrap(),
                    _ => {
                        let offset = rng.gen_range(0..256 * 1024u64);
                        let len = rng.gen_range(1..64 * 1024usize);
                        let byte = rng.gen::<u8>();
                        let data: Vec<u8> = (0..len).map(|k| byte.wrapping_add(k as u8)).collect();
                        let how = [StableHow::Unstable, StableHow::DataSync, StableHow::FileSync]
                            [rng.gen_range(0..3)];
                        let r = j.write(&root, &files[i], offset, &data, how).unwrap();
                        assert_eq!(r.count as usize, len);
                        assert_eq!(r.committed, StableHow::FileSync, "every journaled write is stable");
                        assert_eq!(r.verifier, verifier);
                        model_write(&mut model[i], offset, &data);
                    }
                }
            }
            // Power loss.
            drop(j);
            backend.crash();
            dev = dev.crash(&mut rng);
            let (again, replay) = open(&backend, &dev, 4 << 20);
            j = again;
            assert!(
                !replay.fresh && !replay.damaged && replay.failed == 0,
                "seed {seed} round {round}: {replay:?}"
            );
            assert!(replay.verifier_kept, "seed {seed} round {round}");
            assert_eq!(
                j.write_verifier(),
                verifier,
                "seed {seed} round {round}: a clean replay keeps the verifier"
            );
            for (i, fh) in files.iter().enumerate() {
                let got = read_whole(&*backend, fh);
                assert!(
                    got == model[i],
                    "seed {seed} round {round} file {i}: {} bytes after replay, {} acknowledged; first difference at {:?}",
                    got.len(),
                    model[i].len(),
                    got.iter().zip(&model[i]).position(|(a, b)| a != b)
                );
            }
        }
    }
}

/// A log much smaller than what is written: writers wait for the checkpointer
/// instead of failing, and everything still arrives.
#[test]
fn a_full_log_makes_writers_wait_for_the_checkpointer() {
    let backend = Arc::new(Volatile::new());
    let files = make_files(&backend, 2);
    let dev = LossyDevice::default();
    let (j, _) = open(&backend, &dev, 4 << 20);
    let root = Credentials::root();
    let block: Vec<u8> = (0..256 * 1024).map(|k| (k % 251) as u8).collect();
    // 40 MiB through a 4 MiB log.
    for n in 0..160u64 {
        let fh = &files[(n % 2) as usize];
        j.write(&root, fh, (n / 2) * block.len() as u64, &block, StableHow::FileSync).unwrap();
    }
    let stats = j.stats();
    assert!(stats.space_waits > 0 && stats.checkpoints > 0, "{stats:?}");
    assert!(stats.used_bytes <= stats.size_bytes, "{stats:?}");
    for fh in &files {
        let got = read_whole(&*backend, fh);
        assert_eq!(got.len(), 80 * block.len());
        assert!(got.chunks(block.len()).all(|c| c == block.as_slice()));
    }
}

/// Concurrent writers to overlapping ranges of one file: replay leaves the file
/// exactly as it was when the writes were answered (backend writes and records
/// are in the same order), and many writes share one device sync.
#[test]
fn concurrent_overlapping_writes_replay_in_the_order_they_happened() {
    let backend = Arc::new(Volatile::new());
    let files = make_files(&backend, 1);
    let dev = LossyDevice::default();
    let (j, _) = open(&backend, &dev, 64 << 20);
    let j = Arc::new(j);
    let syncs_before = dev.syncs();
    std::thread::scope(|s| {
        for t in 0..8u8 {
            let (j, fh) = (j.clone(), files[0].clone());
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(t as u64);
                for _ in 0..200 {
                    let offset = rng.gen_range(0..64 * 1024u64);
                    let data = vec![t.wrapping_mul(31).wrapping_add(rng.gen()); rng.gen_range(1..8192)];
                    j.write(&Credentials::root(), &fh, offset, &data, StableHow::FileSync).unwrap();
                }
            });
        }
    });
    let before = read_whole(&*backend, &files[0]);
    let stats = j.stats();
    assert_eq!(stats.records, 1600);
    assert!(dev.syncs() - syncs_before <= stats.groups + stats.checkpoints + 1);
    drop(j);
    backend.crash();
    let dev = dev.crash(&mut StdRng::seed_from_u64(99));
    let (_j, replay) = open(&backend, &dev, 64 << 20);
    assert!(replay.verifier_kept, "{replay:?}");
    assert!(read_whole(&*backend, &files[0]) == before, "replay reordered overlapping writes");
}

/// Damage inside the synced log (not at its end) is detected: replay reports
/// it and the verifier changes, so clients know to resend.
#[test]
fn damage_in_the_middle_of_the_log_changes_the_verifier() {
    let backend = Arc::new(Volatile::new());
    let files = make_files(&backend, 1);
    let dev = LossyDevice::default();
    // A long checkpoint interval: the log keeps its records.
    let o = JournalOptions { checkpoint_interval: Duration::from_secs(3600), ..opts(16 << 20) };
    let (j, _) = Journaled::open(backend.clone(), Box::new(dev.clone()), o.clone()).unwrap();
    let verifier = j.write_verifier();
    for n in 0..20u64 {
        j.write(&Credentials::root(), &files[0], n * 8192, &[n as u8; 8192], StableHow::FileSync).unwrap();
    }
    drop(j);
    backend.crash();
    // Flip a byte in the third record's data (records start 8 KiB into the device).
    {
        let mut st = dev.0.lock();
        let at = 8192 + 2 * 8192 + 100;
        st.current[at] ^= 0xff;
        st.durable[at] ^= 0xff;
    }
    let (j, replay) = Journaled::open(backend.clone(), Box::new(dev.clone()), o).unwrap();
    assert!(replay.damaged && !replay.verifier_kept, "{replay:?}");
    assert_ne!(j.write_verifier(), verifier);
}

#[test]
fn a_journal_of_another_export_or_with_damaged_headers_is_refused() {
    let backend = Arc::new(Volatile::new());
    let dev = LossyDevice::default();
    drop(open(&backend, &dev, 4 << 20));
    let other = JournalOptions { owner: *b"some-other-owner", ..opts(4 << 20) };
    let e = Journaled::open(backend.clone(), Box::new(dev.clone()), other).err().expect("refused");
    assert!(e.to_string().contains("another export"), "{e}");
    {
        let mut st = dev.0.lock();
        st.current[20] ^= 1;
        st.current[4096 + 20] ^= 1;
    }
    let e = Journaled::open(backend, Box::new(dev), opts(4 << 20)).err().expect("refused");
    assert!(e.to_string().contains("damaged"), "{e}");
}

/// A device that fails: the write is not acknowledged, and neither is any later one.
#[test]
fn a_failing_device_fails_writes_instead_of_acknowledging_them() {
    let backend = Arc::new(Volatile::new());
    let files = make_files(&backend, 1);
    let dev = LossyDevice::default();
    let (j, _) = open(&backend, &dev, 4 << 20);
    let root = Credentials::root();
    j.write(&root, &files[0], 0, b"fine", StableHow::FileSync).unwrap();
    dev.0.lock().broken = true;
    assert_eq!(j.write(&root, &files[0], 0, b"lost", StableHow::FileSync).err(), Some(FsError::Io));
    dev.0.lock().broken = false;
    assert_eq!(j.write(&root, &files[0], 0, b"late", StableHow::Unstable).err(), Some(FsError::Io));
    assert_eq!(j.commit(&root, &files[0], 0, 0).err(), Some(FsError::Io));
}

/// A truncation after writes is not undone by replaying the writes.
#[test]
fn replay_does_not_bring_back_truncated_data() {
    let backend = Arc::new(Volatile::new());
    let files = make_files(&backend, 1);
    let dev = LossyDevice::default();
    let (j, _) = open(&backend, &dev, 4 << 20);
    let root = Credentials::root();
    j.write(&root, &files[0], 0, &[7u8; 10_000], StableHow::Unstable).unwrap();
    j.setattr(&root, &files[0], &SetAttr { size: Some(100), ..SetAttr::default() }, None).unwrap();
    j.write(&root, &files[0], 200, b"tail", StableHow::Unstable).unwrap();
    drop(j);
    backend.crash();
    let dev = dev.crash(&mut StdRng::seed_from_u64(1));
    let _j = open(&backend, &dev, 4 << 20);
    let mut want = vec![7u8; 100];
    want.resize(200, 0);
    want.extend_from_slice(b"tail");
    assert_eq!(read_whole(&*backend, &files[0]), want);
}

/// The journal in front of the memory backend passes the backend conformance suite.
#[test]
fn conformance_suite_through_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let n = std::sync::atomic::AtomicUsize::new(0);
    conformance::run_all(&|| {
        let path = dir.path().join(format!("j{}", n.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
        let inner: Arc<dyn Backend> = Arc::new(MemoryBackend::new(MemoryConfig::default()));
        let (j, _) = Journaled::open_file(inner, &path, opts(4 << 20)).unwrap();
        Box::new(j) as Box<dyn Backend>
    });
}
