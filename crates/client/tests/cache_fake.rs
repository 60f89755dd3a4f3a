//! An in-memory NFSv3 server model behind the `NfsOps` trait, for the cache
//! layer's tests (included by `cache.rs`; compiled on its own it has no tests).
//!
//! It models what the cache must cope with: UNSTABLE writes live in a
//! volatile copy that a "restart" throws away (with a new write verifier),
//! every change moves mtime/ctime on a logical clock and is reported with
//! WCC data, and calls can be counted, recorded, failed or held. One
//! `Fake` can be cloned into two `CachedFs` to model two clients.
#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use eagernfs_client::ops::{Cred, NfsError, NfsOps, NfsResult};
use eagernfs_proto::nfs3::*;
use eagernfs_xdr::Opaque;
use parking_lot::Mutex;
use tokio::sync::Semaphore;

pub const ROOT_FILEID: u64 = 1000;

#[derive(Clone, Debug)]
enum Content {
    File { stable: Vec<u8>, volatile: Vec<u8> },
    Dir { entries: BTreeMap<Vec<u8>, u64> },
    Link { target: Vec<u8> },
}

#[derive(Clone, Debug)]
struct Node {
    attr: Fattr3,
    content: Content,
}

/// A WRITE as the server saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRec {
    pub fileid: u64,
    pub offset: u64,
    pub len: usize,
    pub stable: StableHow,
}

#[derive(Default)]
struct State {
    nodes: HashMap<u64, Node>,
    next_fileid: u64,
    clock: u32,
    verf: u64,
    calls: HashMap<u32, u64>,
    /// Every call's procedure, in the order calls arrived.
    order: Vec<u32>,
    writes: Vec<WriteRec>,
    reads: Vec<(u64, u64, u32)>,
    /// Procedure → (status, remaining times; None = always).
    failures: HashMap<u32, (Nfsstat3, Option<u32>)>,
    gates: HashMap<u32, Arc<Semaphore>>,
    restart_before_commits: u32,
    readdirplus_notsupp: bool,
    readdir_page_entries: usize,
    /// `Some(preserve)`: opens are held as an NFSv4 server holds them (see `set_opens`).
    opens: Option<bool>,
    /// Every file and directory is held under a delegation (`NfsOps::delegated`).
    delegated: bool,
}

/// The call count under which `close_file` of a held open is recorded (not an NFSv3 procedure).
pub const FAKE_CLOSE: u32 = 1000;

/// The fake server; clones share it.
#[derive(Clone)]
pub struct Fake {
    st: Arc<Mutex<State>>,
}

fn fh_of(fileid: u64) -> NfsFh3 {
    NfsFh3 { data: Opaque::new(Bytes::from(fileid.to_be_bytes().to_vec())).unwrap() }
}

fn fileid_of(fh: &NfsFh3) -> NfsResult<u64> {
    let b: [u8; 8] = fh.data.as_bytes().try_into().map_err(|_| NfsError::Nfs(Nfsstat3::Badhandle))?;
    Ok(u64::from_be_bytes(b))
}

fn wcc_attr(a: &Fattr3) -> WccAttr {
    WccAttr { size: a.size, mtime: a.mtime, ctime: a.ctime }
}

impl State {
    fn tick(&mut self) -> Nfstime3 {
        self.clock += 1;
        Nfstime3 { seconds: 1_700_000_000, nseconds: self.clock }
    }

    fn node(&self, fh: &NfsFh3) -> NfsResult<&Node> {
        self.nodes.get(&fileid_of(fh)?).ok_or(NfsError::Nfs(Nfsstat3::Stale))
    }

    fn node_mut(&mut self, fh: &NfsFh3) -> NfsResult<&mut Node> {
        let id = fileid_of(fh)?;
        self.nodes.get_mut(&id).ok_or(NfsError::Nfs(Nfsstat3::Stale))
    }

    fn new_node(&mut self, ftype: Ftype3, mode: u32, content: Content) -> u64 {
        let id = self.next_fileid;
        self.next_fileid += 1;
        let t = self.tick();
        let attr = Fattr3 {
            ftype,
            mode,
            nlink: if ftype == Ftype3::Dir { 2 } else { 1 },
            uid: 0,
            gid: 0,
            size: 0,
            used: 0,
            rdev: Specdata3::default(),
            fsid: 7,
            fileid: id,
            atime: t,
            mtime: t,
            ctime: t,
        };
        self.nodes.insert(id, Node { attr, content });
        id
    }

    /// Record a content change of `id`: returns (pre, post) for WCC.
    fn touch(&mut self, id: u64) -> (WccAttr, Fattr3) {
        let t = self.tick();
        let n = self.nodes.get_mut(&id).expect("touch of a live node");
        let pre = wcc_attr(&n.attr);
        if let Content::File { volatile, .. } = &n.content {
            n.attr.size = volatile.len() as u64;
            n.attr.used = n.attr.size;
        }
        n.attr.mtime = t;
        n.attr.ctime = t;
        (pre, n.attr)
    }

    fn dir_entries(&mut self, dir: &NfsFh3) -> NfsResult<&mut BTreeMap<Vec<u8>, u64>> {
        match &mut self.node_mut(dir)?.content {
            Content::Dir { entries } => Ok(entries),
            _ => Err(NfsError::Nfs(Nfsstat3::Notdir)),
        }
    }

    fn add_entry(&mut self, dir: &NfsFh3, name: &[u8], id: u64) -> NfsResult<WccData> {
        let d = fileid_of(dir)?;
        self.dir_entries(dir)?.insert(name.to_vec(), id);
        let (pre, post) = self.touch(d);
        Ok(WccData { before: Some(pre), after: Some(post) })
    }
}

fn write_into(buf: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let end = offset as usize + data.len();
    if buf.len() < end {
        buf.resize(end, 0);
    }
    buf[offset as usize..end].copy_from_slice(data);
}

impl Default for Fake {
    fn default() -> Self {
        Fake::new()
    }
}

/// A directory listing: its attributes and (name, fileid) pairs.
type Listing = (Fattr3, Vec<(Vec<u8>, u64)>);

impl Fake {
    pub fn new() -> Self {
        let mut st =
            State { next_fileid: ROOT_FILEID, verf: 1, readdir_page_entries: 1000, ..State::default() };
        let id = st.new_node(Ftype3::Dir, 0o755, Content::Dir { entries: BTreeMap::new() });
        assert_eq!(id, ROOT_FILEID);
        Fake { st: Arc::new(Mutex::new(st)) }
    }

    // ----- set-up and inspection from tests -----

    /// Create a file in the root with `data` (already stable). Returns its fileid.
    pub fn add_file(&self, name: &str, data: &[u8]) -> u64 {
        let mut st = self.st.lock();
        let id =
            st.new_node(Ftype3::Reg, 0o644, Content::File { stable: data.to_vec(), volatile: data.to_vec() });
        st.nodes.get_mut(&id).unwrap().attr.size = data.len() as u64;
        st.add_entry(&fh_of(ROOT_FILEID), name.as_bytes(), id).unwrap();
        id
    }

    /// A file `name` in the root's subdirectory `dir`, made "by another
    /// client" (nothing of ours is told).
    pub fn add_file_in(&self, dir: &str, name: &str, data: &[u8]) -> u64 {
        let dir_id = self.lookup_id(dir).expect("the directory exists");
        let mut st = self.st.lock();
        let id =
            st.new_node(Ftype3::Reg, 0o644, Content::File { stable: data.to_vec(), volatile: data.to_vec() });
        st.nodes.get_mut(&id).unwrap().attr.size = data.len() as u64;
        st.add_entry(&fh_of(dir_id), name.as_bytes(), id).unwrap();
        id
    }

    /// The fileid the next created object gets.
    pub fn set_next_fileid(&self, id: u64) {
        self.st.lock().next_fileid = id;
    }

    /// Create a directory in the root.
    pub fn add_dir(&self, name: &str) -> u64 {
        let mut st = self.st.lock();
        let id = st.new_node(Ftype3::Dir, 0o755, Content::Dir { entries: BTreeMap::new() });
        st.add_entry(&fh_of(ROOT_FILEID), name.as_bytes(), id).unwrap();
        id
    }

    /// Another client writes (stably) into file `id`.
    pub fn poke(&self, id: u64, offset: u64, data: &[u8]) {
        let mut st = self.st.lock();
        if let Content::File { stable, volatile } = &mut st.nodes.get_mut(&id).unwrap().content {
            write_into(stable, offset, data);
            write_into(volatile, offset, data);
        }
        st.touch(id);
    }

    /// Another client removes `name` from the root.
    pub fn remove_name(&self, name: &str) {
        let mut st = self.st.lock();
        st.dir_entries(&fh_of(ROOT_FILEID)).unwrap().remove(name.as_bytes());
        st.touch(ROOT_FILEID);
    }

    /// What the file holds on stable storage (survives a restart).
    pub fn stable(&self, id: u64) -> Vec<u8> {
        match &self.st.lock().nodes[&id].content {
            Content::File { stable, .. } => stable.clone(),
            _ => panic!("not a file"),
        }
    }

    /// What the server would answer to a READ now.
    pub fn contents(&self, id: u64) -> Vec<u8> {
        match &self.st.lock().nodes[&id].content {
            Content::File { volatile, .. } => volatile.clone(),
            _ => panic!("not a file"),
        }
    }

    pub fn lookup_id(&self, name: &str) -> Option<u64> {
        match &self.st.lock().nodes[&ROOT_FILEID].content {
            Content::Dir { entries } => entries.get(name.as_bytes()).copied(),
            _ => None,
        }
    }

    /// Calls of procedure `proc` (an `NFSPROC3_*` number) so far.
    pub fn calls(&self, proc: u32) -> u64 {
        self.st.lock().calls.get(&proc).copied().unwrap_or(0)
    }

    /// Yield to the runtime until a call of `proc` has reached the server
    /// (one held at a [`gate`](Self::gate) counts: it is out).
    pub async fn until_called(&self, proc: u32) {
        while self.calls(proc) == 0 {
            tokio::task::yield_now().await;
        }
    }

    /// The procedures called so far, in order.
    pub fn call_order(&self) -> Vec<u32> {
        self.st.lock().order.clone()
    }

    /// Attributes of `id` on the server.
    pub fn attr(&self, id: u64) -> Fattr3 {
        self.st.lock().nodes[&id].attr
    }

    /// Every WRITE so far, in the order they reached the server.
    pub fn writes(&self) -> Vec<WriteRec> {
        self.st.lock().writes.clone()
    }

    /// Every READ so far as (fileid, offset, count).
    pub fn reads(&self) -> Vec<(u64, u64, u32)> {
        self.st.lock().reads.clone()
    }

    pub fn reset_counts(&self) {
        let mut st = self.st.lock();
        st.calls.clear();
        st.order.clear();
        st.writes.clear();
        st.reads.clear();
    }

    /// The server restarts: unstable data is lost, the verifier changes.
    pub fn restart(&self) {
        let mut st = self.st.lock();
        st.verf += 1;
        for n in st.nodes.values_mut() {
            if let Content::File { stable, volatile } = &mut n.content {
                *volatile = stable.clone();
                n.attr.size = volatile.len() as u64;
            }
        }
    }

    /// Restart just before each of the next `n` COMMITs is handled.
    pub fn restart_before_commits(&self, n: u32) {
        self.st.lock().restart_before_commits = n;
    }

    /// Fail calls of `proc` with `status`, `times` times (None: always).
    pub fn fail(&self, proc: u32, status: Nfsstat3, times: Option<u32>) {
        self.st.lock().failures.insert(proc, (status, times));
    }

    pub fn clear_failures(&self) {
        self.st.lock().failures.clear();
    }

    /// Hold calls of `proc` until the returned semaphore gets permits
    /// (one permit lets one call through).
    pub fn gate(&self, proc: u32) -> Arc<Semaphore> {
        let s = Arc::new(Semaphore::new(0));
        self.st.lock().gates.insert(proc, s.clone());
        s
    }

    pub fn ungate(&self, proc: u32) {
        if let Some(s) = self.st.lock().gates.remove(&proc) {
            s.add_permits(1 << 20);
        }
    }

    pub fn set_readdirplus_notsupp(&self, on: bool) {
        self.st.lock().readdirplus_notsupp = on;
    }

    pub fn set_readdir_page_entries(&self, n: usize) {
        self.st.lock().readdir_page_entries = n;
    }

    /// Answer `open_file` and `create_open` as a server with opens does: the open is held
    /// (ended by `close_file`, counted as [`FAKE_CLOSE`]), and with `preserve` the server says
    /// it keeps a removed file for the open (OPEN4_RESULT_PRESERVE_UNLINKED). This model never
    /// forgets a removed file anyway, so reads through its handle go on either way.
    /// Say every object is held under a delegation (or none is).
    pub fn set_delegated(&self, on: bool) {
        self.st.lock().delegated = on;
    }

    pub fn set_opens(&self, preserve: Option<bool>) {
        self.st.lock().opens = preserve;
    }

    /// Count the call, apply failure injection and gates.
    async fn enter(&self, proc: u32) -> NfsResult<()> {
        let gate = {
            let mut st = self.st.lock();
            *st.calls.entry(proc).or_default() += 1;
            st.order.push(proc);
            if let Some((status, times)) = st.failures.get_mut(&proc) {
                let status = *status;
                match times {
                    Some(0) => {}
                    Some(n) => {
                        *n -= 1;
                        return Err(NfsError::Nfs(status));
                    }
                    None => return Err(NfsError::Nfs(status)),
                }
            }
            st.gates.get(&proc).cloned()
        };
        if let Some(g) = gate {
            g.acquire().await.expect("gate open").forget();
        }
        // A reply is never instantaneous: let other tasks run, as a
        // network round trip would.
        tokio::task::yield_now().await;
        Ok(())
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> NfsResult<T>) -> NfsResult<T> {
        f(&mut self.st.lock())
    }

    fn entries_of(&self, dir: &NfsFh3) -> NfsResult<Listing> {
        self.with(|st| {
            let n = st.node(dir)?;
            let Content::Dir { entries } = &n.content else { return Err(NfsError::Nfs(Nfsstat3::Notdir)) };
            let parent = fileid_of(dir)?;
            let mut v = vec![(b".".to_vec(), parent), (b"..".to_vec(), ROOT_FILEID)];
            v.extend(entries.iter().map(|(k, v)| (k.clone(), *v)));
            Ok((n.attr, v))
        })
    }
}

impl NfsOps for Fake {
    fn root(&self) -> NfsFh3 {
        fh_of(ROOT_FILEID)
    }

    fn delegated(&self, _fh: &NfsFh3) -> bool {
        self.st.lock().delegated
    }

    async fn open_file(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        want: eagernfs_client::OpenWant,
    ) -> NfsResult<eagernfs_client::FileOpened> {
        // The trait's default (ACCESS, else GETATTR), then the open.
        let mut out = eagernfs_client::FileOpened::default();
        if let Some(mask) = want.check {
            let r = self.access(cred, fh, mask).await?;
            out.access = Some(r.access);
            out.attrs = r.obj_attributes;
        }
        if want.attrs && out.attrs.is_none() {
            out.attrs = Some(self.getattr(cred, fh).await?);
        }
        if let Some(preserve) = self.st.lock().opens {
            out.held = true;
            out.preserve_unlinked = preserve;
        }
        Ok(out)
    }

    async fn close_file(
        &self,
        _cred: &Cred,
        _fh: &NfsFh3,
        _access: eagernfs_client::OpenAccess,
    ) -> NfsResult<()> {
        self.enter(FAKE_CLOSE).await
    }

    async fn null(&self) -> NfsResult<()> {
        self.enter(NFSPROC3_NULL).await
    }

    async fn getattr(&self, _cred: &Cred, fh: &NfsFh3) -> NfsResult<Fattr3> {
        self.enter(NFSPROC3_GETATTR).await?;
        self.with(|st| Ok(st.node(fh)?.attr))
    }

    async fn setattr(
        &self,
        _cred: &Cred,
        fh: &NfsFh3,
        attrs: Sattr3,
        _guard: Option<Nfstime3>,
    ) -> NfsResult<WccData> {
        self.enter(NFSPROC3_SETATTR).await?;
        self.with(|st| {
            let id = fileid_of(fh)?;
            let n = st.node_mut(fh)?;
            if let Some(m) = attrs.mode {
                n.attr.mode = m;
            }
            n.attr.uid = attrs.uid.unwrap_or(n.attr.uid);
            n.attr.gid = attrs.gid.unwrap_or(n.attr.gid);
            if let Some(size) = attrs.size {
                match &mut n.content {
                    Content::File { stable, volatile } => {
                        volatile.resize(size as usize, 0);
                        stable.resize(size as usize, 0);
                    }
                    _ => return Err(NfsError::Nfs(Nfsstat3::Isdir)),
                }
            }
            let (pre, _) = st.touch(id);
            let n = st.nodes.get_mut(&id).expect("just touched");
            if attrs.size.is_none() {
                // Only a size change moves mtime by itself.
                n.attr.mtime = pre.mtime;
            }
            for (set, field) in [(attrs.atime, &mut n.attr.atime), (attrs.mtime, &mut n.attr.mtime)] {
                match set {
                    SetTime::SetToClientTime(t) => *field = t,
                    SetTime::SetToServerTime => *field = n.attr.ctime,
                    SetTime::DontChange => {}
                }
            }
            Ok(WccData { before: Some(pre), after: Some(n.attr) })
        })
    }

    async fn lookup(&self, _cred: &Cred, dir: &NfsFh3, name: &[u8]) -> NfsResult<Lookup3ResOk> {
        self.enter(NFSPROC3_LOOKUP).await?;
        self.with(|st| {
            let dattr = st.node(dir)?.attr;
            let id = *st.dir_entries(dir)?.get(name).ok_or(NfsError::Nfs(Nfsstat3::Noent))?;
            let a = st.nodes[&id].attr;
            Ok(Lookup3ResOk { object: fh_of(id), obj_attributes: Some(a), dir_attributes: Some(dattr) })
        })
    }

    async fn access(&self, _cred: &Cred, fh: &NfsFh3, mask: u32) -> NfsResult<Access3ResOk> {
        self.enter(NFSPROC3_ACCESS).await?;
        self.with(|st| Ok(Access3ResOk { obj_attributes: Some(st.node(fh)?.attr), access: mask }))
    }

    async fn readlink(&self, _cred: &Cred, fh: &NfsFh3) -> NfsResult<Readlink3ResOk> {
        self.enter(NFSPROC3_READLINK).await?;
        self.with(|st| {
            let n = st.node(fh)?;
            match &n.content {
                Content::Link { target } => Ok(Readlink3ResOk {
                    symlink_attributes: Some(n.attr),
                    data: Opaque::new(Bytes::from(target.clone())).unwrap(),
                }),
                _ => Err(NfsError::Nfs(Nfsstat3::Inval)),
            }
        })
    }

    async fn read(&self, _cred: &Cred, fh: &NfsFh3, offset: u64, count: u32) -> NfsResult<Read3ResOk> {
        {
            let mut st = self.st.lock();
            let id = fileid_of(fh)?;
            st.reads.push((id, offset, count));
        }
        self.enter(NFSPROC3_READ).await?;
        self.with(|st| {
            let n = st.node(fh)?;
            let Content::File { volatile, .. } = &n.content else {
                return Err(NfsError::Nfs(Nfsstat3::Isdir));
            };
            let start = (offset as usize).min(volatile.len());
            let end = (start + count as usize).min(volatile.len());
            Ok(Read3ResOk {
                file_attributes: Some(n.attr),
                count: (end - start) as u32,
                eof: end == volatile.len(),
                data: Bytes::copy_from_slice(&volatile[start..end]),
            })
        })
    }

    async fn write(
        &self,
        _cred: &Cred,
        fh: &NfsFh3,
        offset: u64,
        data: Bytes,
        stable: StableHow,
    ) -> NfsResult<Write3ResOk> {
        {
            let mut st = self.st.lock();
            let id = fileid_of(fh)?;
            st.writes.push(WriteRec { fileid: id, offset, len: data.len(), stable });
        }
        self.enter(NFSPROC3_WRITE).await?;
        self.with(|st| {
            let id = fileid_of(fh)?;
            let verf = st.verf.to_be_bytes();
            let n = st.node_mut(fh)?;
            let Content::File { stable: s, volatile } = &mut n.content else {
                return Err(NfsError::Nfs(Nfsstat3::Isdir));
            };
            write_into(volatile, offset, &data);
            if stable != StableHow::Unstable {
                *s = volatile.clone();
            }
            let (pre, post) = st.touch(id);
            Ok(Write3ResOk {
                file_wcc: WccData { before: Some(pre), after: Some(post) },
                count: data.len() as u32,
                committed: stable,
                verf,
            })
        })
    }

    async fn create(
        &self,
        _cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        how: Createhow3,
    ) -> NfsResult<Create3ResOk> {
        self.enter(NFSPROC3_CREATE).await?;
        self.with(|st| {
            if let Some(&id) = st.dir_entries(dir)?.get(name) {
                if matches!(how, Createhow3::Guarded(_)) {
                    return Err(NfsError::Nfs(Nfsstat3::Exist));
                }
                let a = st.nodes[&id].attr;
                let d = st.node(dir)?.attr;
                return Ok(Create3ResOk {
                    obj: Some(fh_of(id)),
                    obj_attributes: Some(a),
                    dir_wcc: WccData { before: Some(wcc_attr(&d)), after: Some(d) },
                });
            }
            let mode = match how {
                Createhow3::Unchecked(a) | Createhow3::Guarded(a) => a.mode.unwrap_or(0o644),
                Createhow3::Exclusive(_) => 0o644,
            };
            let id = st.new_node(Ftype3::Reg, mode, Content::File { stable: vec![], volatile: vec![] });
            let dir_wcc = st.add_entry(dir, name, id)?;
            Ok(Create3ResOk { obj: Some(fh_of(id)), obj_attributes: Some(st.nodes[&id].attr), dir_wcc })
        })
    }

    async fn mkdir(&self, _cred: &Cred, dir: &NfsFh3, name: &[u8], attrs: Sattr3) -> NfsResult<Mkdir3ResOk> {
        self.enter(NFSPROC3_MKDIR).await?;
        self.with(|st| {
            if st.dir_entries(dir)?.contains_key(name) {
                return Err(NfsError::Nfs(Nfsstat3::Exist));
            }
            let id = st.new_node(
                Ftype3::Dir,
                attrs.mode.unwrap_or(0o755),
                Content::Dir { entries: BTreeMap::new() },
            );
            let dir_wcc = st.add_entry(dir, name, id)?;
            Ok(Mkdir3ResOk { obj: Some(fh_of(id)), obj_attributes: Some(st.nodes[&id].attr), dir_wcc })
        })
    }

    async fn symlink(
        &self,
        _cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        target: &[u8],
        _attrs: Sattr3,
    ) -> NfsResult<Symlink3ResOk> {
        self.enter(NFSPROC3_SYMLINK).await?;
        self.with(|st| {
            if st.dir_entries(dir)?.contains_key(name) {
                return Err(NfsError::Nfs(Nfsstat3::Exist));
            }
            let id = st.new_node(Ftype3::Lnk, 0o777, Content::Link { target: target.to_vec() });
            st.nodes.get_mut(&id).unwrap().attr.size = target.len() as u64;
            let dir_wcc = st.add_entry(dir, name, id)?;
            Ok(Symlink3ResOk { obj: Some(fh_of(id)), obj_attributes: Some(st.nodes[&id].attr), dir_wcc })
        })
    }

    async fn mknod(
        &self,
        _cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        what: Mknoddata3,
    ) -> NfsResult<Mknod3ResOk> {
        self.enter(NFSPROC3_MKNOD).await?;
        self.with(|st| {
            let ftype = what.ftype();
            if matches!(ftype, Ftype3::Reg | Ftype3::Dir | Ftype3::Lnk) {
                return Err(NfsError::Nfs(Nfsstat3::Badtype));
            }
            let id = st.new_node(ftype, 0o644, Content::File { stable: vec![], volatile: vec![] });
            let dir_wcc = st.add_entry(dir, name, id)?;
            Ok(Mknod3ResOk { obj: Some(fh_of(id)), obj_attributes: Some(st.nodes[&id].attr), dir_wcc })
        })
    }

    async fn remove(&self, _cred: &Cred, dir: &NfsFh3, name: &[u8]) -> NfsResult<WccData> {
        self.enter(NFSPROC3_REMOVE).await?;
        self.with(|st| {
            st.dir_entries(dir)?.remove(name).ok_or(NfsError::Nfs(Nfsstat3::Noent))?;
            let (pre, post) = st.touch(fileid_of(dir)?);
            Ok(WccData { before: Some(pre), after: Some(post) })
        })
    }

    async fn rmdir(&self, cred: &Cred, dir: &NfsFh3, name: &[u8]) -> NfsResult<WccData> {
        self.enter(NFSPROC3_RMDIR).await?;
        // Same bookkeeping as REMOVE in this model (no emptiness check
        // needed by the tests); counted under RMDIR only.
        self.with(|st| {
            let id = st.dir_entries(dir)?.remove(name).ok_or(NfsError::Nfs(Nfsstat3::Noent))?;
            let _ = (id, cred);
            let (pre, post) = st.touch(fileid_of(dir)?);
            Ok(WccData { before: Some(pre), after: Some(post) })
        })
    }

    async fn rename(
        &self,
        _cred: &Cred,
        from_dir: &NfsFh3,
        from_name: &[u8],
        to_dir: &NfsFh3,
        to_name: &[u8],
    ) -> NfsResult<Rename3ResOk> {
        self.enter(NFSPROC3_RENAME).await?;
        self.with(|st| {
            let id = st.dir_entries(from_dir)?.remove(from_name).ok_or(NfsError::Nfs(Nfsstat3::Noent))?;
            let (fpre, fpost) = st.touch(fileid_of(from_dir)?);
            st.dir_entries(to_dir)?.insert(to_name.to_vec(), id);
            let (tpre, tpost) = st.touch(fileid_of(to_dir)?);
            Ok(Rename3ResOk {
                fromdir_wcc: WccData { before: Some(fpre), after: Some(fpost) },
                todir_wcc: WccData { before: Some(tpre), after: Some(tpost) },
            })
        })
    }

    async fn link(&self, _cred: &Cred, fh: &NfsFh3, dir: &NfsFh3, name: &[u8]) -> NfsResult<Link3ResOk> {
        self.enter(NFSPROC3_LINK).await?;
        self.with(|st| {
            let id = fileid_of(fh)?;
            st.node_mut(fh)?.attr.nlink += 1;
            let linkdir_wcc = st.add_entry(dir, name, id)?;
            Ok(Link3ResOk { file_attributes: Some(st.nodes[&id].attr), linkdir_wcc })
        })
    }

    async fn readdir(
        &self,
        _cred: &Cred,
        dir: &NfsFh3,
        cookie: u64,
        _verf: Cookieverf3,
        _count: u32,
    ) -> NfsResult<Readdir3ResOk> {
        self.enter(NFSPROC3_READDIR).await?;
        let (dattr, all) = self.entries_of(dir)?;
        let page = self.st.lock().readdir_page_entries;
        let entries: Vec<Entry3> = all
            .iter()
            .enumerate()
            .skip(cookie as usize)
            .take(page)
            .map(|(i, (name, id))| Entry3 {
                fileid: *id,
                name: Opaque::new(Bytes::from(name.clone())).unwrap(),
                cookie: i as u64 + 1,
            })
            .collect();
        let eof = cookie as usize + entries.len() >= all.len();
        Ok(Readdir3ResOk {
            dir_attributes: Some(dattr),
            cookieverf: [9; 8],
            reply: Dirlist3 { entries, eof },
        })
    }

    async fn readdirplus(
        &self,
        _cred: &Cred,
        dir: &NfsFh3,
        cookie: u64,
        _verf: Cookieverf3,
        _dircount: u32,
        _maxcount: u32,
    ) -> NfsResult<Readdirplus3ResOk> {
        self.enter(NFSPROC3_READDIRPLUS).await?;
        if self.st.lock().readdirplus_notsupp {
            return Err(NfsError::Nfs(Nfsstat3::Notsupp));
        }
        let (dattr, all) = self.entries_of(dir)?;
        let st = self.st.lock();
        let entries: Vec<Entryplus3> = all
            .iter()
            .enumerate()
            .skip(cookie as usize)
            .take(st.readdir_page_entries)
            .map(|(i, (name, id))| Entryplus3 {
                fileid: *id,
                name: Opaque::new(Bytes::from(name.clone())).unwrap(),
                cookie: i as u64 + 1,
                name_attributes: st.nodes.get(id).map(|n| n.attr),
                name_handle: Some(fh_of(*id)),
            })
            .collect();
        let eof = cookie as usize + entries.len() >= all.len();
        Ok(Readdirplus3ResOk {
            dir_attributes: Some(dattr),
            cookieverf: [9; 8],
            reply: Dirlistplus3 { entries, eof },
        })
    }

    async fn fsstat(&self, _cred: &Cred, fh: &NfsFh3) -> NfsResult<Fsstat3ResOk> {
        self.enter(NFSPROC3_FSSTAT).await?;
        self.with(|st| {
            Ok(Fsstat3ResOk {
                obj_attributes: Some(st.node(fh)?.attr),
                tbytes: 1 << 30,
                fbytes: 1 << 29,
                abytes: 1 << 28,
                tfiles: 1000,
                ffiles: 500,
                afiles: 400,
                invarsec: 0,
            })
        })
    }

    async fn fsinfo(&self, _cred: &Cred, fh: &NfsFh3) -> NfsResult<Fsinfo3ResOk> {
        self.enter(NFSPROC3_FSINFO).await?;
        self.with(|st| {
            Ok(Fsinfo3ResOk {
                obj_attributes: Some(st.node(fh)?.attr),
                rtmax: 65536,
                rtpref: 65536,
                rtmult: 4096,
                wtmax: 65536,
                wtpref: 65536,
                wtmult: 4096,
                dtpref: 8192,
                maxfilesize: u64::MAX,
                time_delta: Nfstime3 { seconds: 0, nseconds: 1 },
                properties: FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME,
            })
        })
    }

    async fn pathconf(&self, _cred: &Cred, fh: &NfsFh3) -> NfsResult<Pathconf3ResOk> {
        self.enter(NFSPROC3_PATHCONF).await?;
        self.with(|st| {
            Ok(Pathconf3ResOk {
                obj_attributes: Some(st.node(fh)?.attr),
                linkmax: 32000,
                name_max: 255,
                no_trunc: true,
                chown_restricted: true,
                case_insensitive: false,
                case_preserving: true,
            })
        })
    }

    async fn commit(&self, _cred: &Cred, fh: &NfsFh3, _offset: u64, _count: u32) -> NfsResult<Commit3ResOk> {
        {
            let mut st = self.st.lock();
            if st.restart_before_commits > 0 {
                st.restart_before_commits -= 1;
                drop(st);
                self.restart();
            }
        }
        self.enter(NFSPROC3_COMMIT).await?;
        self.with(|st| {
            let id = fileid_of(fh)?;
            let verf = st.verf.to_be_bytes();
            let n = st.node_mut(fh)?;
            if let Content::File { stable, volatile } = &mut n.content {
                *stable = volatile.clone();
            }
            let a = st.nodes[&id].attr;
            Ok(Commit3ResOk { file_wcc: WccData { before: Some(wcc_attr(&a)), after: Some(a) }, verf })
        })
    }
}
