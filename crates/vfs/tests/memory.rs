//! The memory backend against the conformance suite, plus what only the
//! memory backend promises: capacity limits, instance-scoped handles,
//! READDIR cookie verifiers, and exact results under heavy concurrency.

mod conformance;

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use conformance::{attr, list, mkdir_as, mkfile, pattern, read_all, root, write_all};
use eagernfs_vfs::memory::{MemoryBackend, MemoryConfig};
use eagernfs_vfs::{Backend, CreateMode, FileHandle, FsError, SetAttr, StableHow};
use proptest::prelude::*;

fn backend(max_bytes: u64, max_files: u64) -> MemoryBackend {
    MemoryBackend::new(MemoryConfig { max_bytes, max_files })
}

#[test]
fn conformance_suite() {
    conformance::run_all(&|| Box::new(MemoryBackend::new(MemoryConfig::default())) as Box<dyn Backend>);
}

#[test]
fn check_names_are_unique() {
    let mut names: Vec<_> = conformance::CHECKS.iter().map(|c| c.name).collect();
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n);
    assert!(conformance::CHECKS.iter().any(|c| c.other_users));
}

#[test]
fn nospc_at_byte_capacity() {
    let cap = 1 << 20;
    let b = backend(cap, 100);
    let r = b.root();
    let f = mkfile(&b, &r, "f");
    write_all(&b, &root(), &f, 0, &vec![1; cap as usize]);
    assert_eq!(b.fsstat(&r).unwrap().free_bytes, 0);
    let e = b.write(&root(), &f, cap, b"x", StableHow::FileSync);
    assert_eq!(e.map(|w| w.count), Err(FsError::NoSpc));
    let g = mkfile(&b, &r, "g");
    assert_eq!(b.write(&root(), &g, 0, b"x", StableHow::Unstable).map(|w| w.count), Err(FsError::NoSpc));
    // Overwriting stored bytes and growing by a hole need no space.
    b.write(&root(), &f, 100, b"overwrite", StableHow::FileSync).expect("overwrite at capacity");
    b.setattr(&root(), &g, &SetAttr { size: Some(1 << 30), ..SetAttr::default() }, None)
        .expect("sparse grow");
    // A refused write leaves the file as it was.
    assert_eq!(attr(&b, &f).size, cap);
    // Truncating, replacing by rename and removing give space back.
    b.setattr(&root(), &f, &SetAttr { size: Some(cap / 2), ..SetAttr::default() }, None).unwrap();
    assert_eq!(b.fsstat(&r).unwrap().free_bytes, cap / 2);
    let h = mkfile(&b, &r, "h");
    write_all(&b, &root(), &h, 0, &vec![2; 1000]);
    b.rename(&root(), &r, b"h", &r, b"f").unwrap();
    assert_eq!(b.fsstat(&r).unwrap().free_bytes, cap - 1000);
    b.remove(&root(), &r, b"f").unwrap();
    assert_eq!(b.fsstat(&r).unwrap().free_bytes, cap);
    write_all(&b, &root(), &g, 0, &vec![3; cap as usize]);
    assert_eq!(b.fsstat(&r).unwrap().free_bytes, 0);
}

#[test]
fn nospc_at_file_capacity() {
    let b = backend(1 << 20, 5);
    let r = b.root();
    let s = b.fsstat(&r).unwrap();
    assert_eq!((s.total_files, s.free_files), (5, 4), "the root counts");
    for i in 0..4 {
        mkfile(&b, &r, &format!("f{i}"));
    }
    let none = CreateMode::Guarded(SetAttr::default());
    assert_eq!(b.create(&root(), &r, b"x", &none).map(|c| c.attr.fileid), Err(FsError::NoSpc));
    assert_eq!(b.mkdir(&root(), &r, b"x", &SetAttr::default()).map(|c| c.attr.fileid), Err(FsError::NoSpc));
    assert_eq!(
        b.symlink(&root(), &r, b"x", b"t", &SetAttr::default()).map(|c| c.attr.fileid),
        Err(FsError::NoSpc)
    );
    // A hard link is a name, not an object.
    let f0 = b.lookup(&root(), &r, b"f0").unwrap().handle;
    b.link(&root(), &f0, &r, b"alias").expect("link at file capacity");
    assert_eq!(b.fsstat(&r).unwrap().free_files, 0);
    b.remove(&root(), &r, b"f1").unwrap();
    mkfile(&b, &r, "again");
    b.remove(&root(), &r, b"f0").unwrap();
    assert_eq!(b.fsstat(&r).unwrap().free_files, 0, "f0 lives on as alias");
    b.remove(&root(), &r, b"alias").unwrap();
    assert_eq!(b.fsstat(&r).unwrap().free_files, 1);
}

#[test]
fn handles_of_another_instance_are_stale() {
    let a = MemoryBackend::new(MemoryConfig::default());
    let b = MemoryBackend::new(MemoryConfig::default());
    let fa = mkfile(&a, &a.root(), "f");
    mkfile(&b, &b.root(), "f");
    assert_eq!(b.getattr(&a.root()), Err(FsError::Stale));
    assert_eq!(b.getattr(&fa), Err(FsError::Stale));
    assert_eq!(b.read(&root(), &fa, 0, 1).map(|r| r.eof), Err(FsError::Stale));
    assert_ne!(a.write_verifier(), b.write_verifier(), "each instance has its own write verifier");
    assert!(fa.0.len() <= eagernfs_vfs::MAX_BACKEND_HANDLE);
    // A truncated or re-tagged handle is malformed, not stale.
    assert_eq!(a.getattr(&FileHandle(fa.0.slice(1..))), Err(FsError::BadHandle));
    let mut retag = fa.0.to_vec();
    retag[0] ^= 0xff;
    assert_eq!(a.getattr(&FileHandle(retag.into())), Err(FsError::BadHandle));
}

#[test]
fn readdir_cookie_verifier() {
    let b = MemoryBackend::new(MemoryConfig::default());
    let r = b.root();
    for i in 0..10 {
        mkfile(&b, &r, &format!("f{i}"));
    }
    let mut first = None;
    let info = b
        .readdir(&root(), &r, 0, [0; 8], false, &mut |e| {
            first = Some(e.cookie);
            false
        })
        .unwrap();
    assert_ne!(info.cookieverf, [0; 8]);
    let mut took = 0;
    let mut count = |_: &eagernfs_vfs::DirEntry| {
        took += 1;
        true
    };
    // `.` was refused, so resume from its predecessor: cookie 0 again.
    assert!(b.readdir(&root(), &r, 0, info.cookieverf, false, &mut count).unwrap().eof);
    assert_eq!(took, 12);
    let cookie = first.unwrap();
    assert_eq!(
        b.readdir(&root(), &r, cookie, *b"garbage!", false, &mut |_| true).map(|i| i.eof),
        Err(FsError::BadCookie)
    );
    // A zero verifier is what a client sends after dropping its cache.
    assert!(b.readdir(&root(), &r, cookie, [0; 8], false, &mut |_| true).unwrap().eof);
    assert_eq!(
        b.readdir(&root(), &r, u64::MAX - 1, info.cookieverf, false, &mut |_| true).map(|i| i.eof),
        Err(FsError::BadCookie),
        "a cookie never issued"
    );
}

/// Many threads write their own files (in several directories, in
/// shuffled pieces) and a shared file (disjoint ranges), while others list
/// the directories and read; every byte is checked at the end.
#[test]
fn concurrent_writers_and_listers() {
    let b = MemoryBackend::new(MemoryConfig { max_bytes: 1 << 30, max_files: 10_000 });
    let r = b.root();
    let dirs: Vec<FileHandle> = (0..4).map(|i| mkdir_as(&b, &root(), &r, &format!("d{i}"), 0o777)).collect();
    let shared = mkfile(&b, &r, "shared");
    let writers = 8usize;
    let files_per_writer = 6usize;
    let piece = 7_919usize;
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for w in 0..writers {
            let (b, dirs, shared) = (&b, &dirs, &shared);
            handles.push(s.spawn(move || {
                for k in 0..files_per_writer {
                    let dir = &dirs[(w + k) % dirs.len()];
                    let f = mkfile(b, dir, &format!("w{w}-{k}"));
                    let data = pattern(100_000 + w * 1000 + k, (w * 100 + k) as u64);
                    // Write the pieces back to front, starting at a
                    // per-writer place: holes get filled in later.
                    let n = data.len().div_ceil(piece);
                    let mut order: Vec<usize> = (0..n).rev().collect();
                    order.rotate_left(w % n);
                    for p in order {
                        let (from, to) = (p * piece, ((p + 1) * piece).min(data.len()));
                        b.write(&root(), &f, from as u64, &data[from..to], StableHow::Unstable).unwrap();
                    }
                    let slot = pattern(4096, 1000 + w as u64);
                    b.write(
                        &root(),
                        shared,
                        ((w * files_per_writer + k) * 4096) as u64,
                        &slot,
                        StableHow::FileSync,
                    )
                    .unwrap();
                }
            }));
        }
        let listers: Vec<_> = (0..3)
            .map(|i| {
                let (b, dirs, done) = (&b, &dirs, &done);
                s.spawn(move || {
                    let mut rounds = 0u64;
                    while !done.load(Ordering::Acquire) {
                        let listed = list(b, &dirs[i % dirs.len()], 5);
                        let counts = conformance::name_counts(&listed);
                        assert!(counts.values().all(|&c| c == 1), "a name listed twice");
                        // READDIRPLUS and reads of whatever is there must not fail either.
                        for e in conformance::list_as(b, &root(), &dirs[(i + 1) % dirs.len()], 50, true) {
                            if let (Some(h), Some(a)) = (&e.handle, &e.attr) {
                                if a.ftype == eagernfs_vfs::FileType::Regular {
                                    b.read(&root(), h, 0, 65536).expect("read while writing");
                                }
                            }
                        }
                        rounds += 1;
                    }
                    rounds
                })
            })
            .collect();
        for h in handles {
            h.join().expect("writer");
        }
        done.store(true, Ordering::Release);
        for l in listers {
            assert!(l.join().expect("lister") > 0);
        }
    });
    let mut total = 0;
    for w in 0..writers {
        for k in 0..files_per_writer {
            let dir = &dirs[(w + k) % dirs.len()];
            let f = b.lookup(&root(), dir, format!("w{w}-{k}").as_bytes()).unwrap().handle;
            let want = pattern(100_000 + w * 1000 + k, (w * 100 + k) as u64);
            total += want.len() as u64;
            assert!(read_all(&b, &f) == want, "content of w{w}-{k}");
        }
    }
    let got = read_all(&b, &shared);
    for w in 0..writers {
        for k in 0..files_per_writer {
            let at = (w * files_per_writer + k) * 4096;
            assert!(got[at..at + 4096] == pattern(4096, 1000 + w as u64)[..], "shared slot {w}/{k}");
        }
    }
    total += got.len() as u64;
    let s = b.fsstat(&r).unwrap();
    assert_eq!(s.total_bytes - s.free_bytes, total, "capacity accounting matches the data");
    for d in &dirs {
        assert_eq!(list(&b, d, 1000).len(), 2 + writers * files_per_writer / dirs.len());
    }
}

/// Threads move directories back and forth between two parents (and try
/// to move them into each other) while others create and remove inside
/// them: no deadlock, no lost or duplicated directory, link counts exact.
#[test]
fn concurrent_directory_renames_keep_the_tree_whole() {
    let b = MemoryBackend::new(MemoryConfig::default());
    let r = b.root();
    let a = mkdir_as(&b, &root(), &r, "a", 0o777);
    let c = mkdir_as(&b, &root(), &r, "c", 0o777);
    let n = 6;
    for i in 0..n {
        mkdir_as(&b, &root(), &a, &format!("m{i}"), 0o777);
    }
    std::thread::scope(|s| {
        for t in 0..4usize {
            let (b, a, c) = (&b, &a, &c);
            s.spawn(move || {
                for round in 0..400usize {
                    let i = (round + t) % n;
                    let name = format!("m{i}");
                    let (from, to) = if (round / n + t) % 2 == 0 { (a, c) } else { (c, a) };
                    match b.rename(&root(), from, name.as_bytes(), to, name.as_bytes()) {
                        Ok(_) | Err(FsError::NoEnt) => {}
                        Err(e) => panic!("rename {name}: {e:?}"),
                    }
                    // Try to move one m-directory into another: either it works
                    // (both are siblings) or the source is already gone.
                    let j = (i + 1) % n;
                    // Each directory nests under its own name, so no rename
                    // replaces (and so destroys) another moving directory.
                    let nested = format!("nested-{name}");
                    if let Ok(target) = b.lookup(&root(), to, format!("m{j}").as_bytes()) {
                        match b.rename(&root(), to, name.as_bytes(), &target.handle, nested.as_bytes()) {
                            Ok(_) => {
                                b.rename(&root(), &target.handle, nested.as_bytes(), to, name.as_bytes())
                                    .expect("move a nested directory back up");
                            }
                            Err(FsError::NoEnt | FsError::Inval | FsError::Stale) => {}
                            Err(e) => panic!("nest {name}: {e:?}"),
                        }
                    }
                }
            });
        }
    });
    // Pull every nested directory back up and count: each m-directory exists once.
    let mut found: HashMap<String, usize> = HashMap::new();
    let mut stack = vec![r.clone()];
    let mut dirs_seen = 0;
    while let Some(d) = stack.pop() {
        let listed = list(&b, &d, 100);
        let mut subdirs = 0;
        for e in listed.iter().filter(|e| &e.name[..] != b"." && &e.name[..] != b"..") {
            let l = b.lookup(&root(), &d, &e.name).unwrap();
            assert_eq!(l.attr.ftype, eagernfs_vfs::FileType::Directory);
            subdirs += 1;
            let name = String::from_utf8_lossy(&e.name).into_owned();
            if name.starts_with('m') || name.starts_with("nested-") {
                *found.entry(format!("{}", l.attr.fileid)).or_default() += 1;
            }
            stack.push(l.handle);
        }
        assert_eq!(attr(&b, &d).nlink, 2 + subdirs, "nlink of a directory is 2 + subdirectories");
        dirs_seen += 1;
    }
    assert_eq!(found.len(), n, "every moved directory is still in the tree");
    assert!(found.values().all(|&c| c == 1), "and only once");
    assert_eq!(dirs_seen, 1 + 2 + n);
}

// ------------------------------------------------------------ model test

/// Operations on a flat directory of a few names, for the model test.
#[derive(Clone, Debug)]
enum Op {
    Create(usize),
    Write(usize, u64, usize, u64),
    Truncate(usize, u64),
    Remove(usize),
    Rename(usize, usize),
    Link(usize, usize),
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

fn op() -> impl Strategy<Value = Op> {
    let name = 0..NAMES.len();
    prop_oneof![
        name.clone().prop_map(Op::Create),
        (name.clone(), 0..300_000u64, 0..100_000usize, any::<u64>())
            .prop_map(|(n, o, l, s)| Op::Write(n, o, l, s)),
        (name.clone(), 0..300_000u64).prop_map(|(n, s)| Op::Truncate(n, s)),
        name.clone().prop_map(Op::Remove),
        (name.clone(), name.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
        (name.clone(), name).prop_map(|(a, b)| Op::Link(a, b)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The backend agrees with a model (names → objects → bytes) after any
    /// sequence of operations, including hard links shared between names,
    /// and its capacity accounting equals the model's stored data.
    #[test]
    fn agrees_with_a_model(ops in proptest::collection::vec(op(), 1..40)) {
        let b = MemoryBackend::new(MemoryConfig::default());
        let r = b.root();
        let mut names: HashMap<usize, usize> = HashMap::new(); // name → object
        let mut objects: HashMap<usize, Vec<u8>> = HashMap::new();
        let mut handles: HashMap<usize, FileHandle> = HashMap::new(); // object → handle
        let mut next_obj = 0;
        for op in ops {
            match op {
                Op::Create(n) => {
                    let res = b.create(&root(), &r, NAMES[n].as_bytes(), &CreateMode::Guarded(SetAttr::default()));
                    match names.entry(n) {
                        Entry::Occupied(_) => prop_assert_eq!(res.err(), Some(FsError::Exist)),
                        Entry::Vacant(slot) => {
                            let c = res.unwrap();
                            slot.insert(next_obj);
                            objects.insert(next_obj, Vec::new());
                            handles.insert(next_obj, c.handle);
                            next_obj += 1;
                        }
                    }
                }
                Op::Write(n, off, len, seed) => {
                    if let Some(&o) = names.get(&n) {
                        let data = pattern(len, seed);
                        b.write(&root(), &handles[&o], off, &data, StableHow::Unstable).unwrap();
                        let m = objects.get_mut(&o).unwrap();
                        if len > 0 {
                            let end = off as usize + len;
                            if m.len() < end { m.resize(end, 0); }
                            m[off as usize..end].copy_from_slice(&data);
                        }
                    }
                }
                Op::Truncate(n, size) => {
                    if let Some(&o) = names.get(&n) {
                        b.setattr(&root(), &handles[&o], &SetAttr { size: Some(size), ..SetAttr::default() }, None).unwrap();
                        objects.get_mut(&o).unwrap().resize(size as usize, 0);
                    }
                }
                Op::Remove(n) => {
                    let res = b.remove(&root(), &r, NAMES[n].as_bytes());
                    match names.remove(&n) {
                        Some(o) => {
                            res.unwrap();
                            if !names.values().any(|&x| x == o) {
                                objects.remove(&o);
                                prop_assert_eq!(b.getattr(&handles.remove(&o).unwrap()).err(), Some(FsError::Stale));
                            }
                        }
                        None => prop_assert_eq!(res.err(), Some(FsError::NoEnt)),
                    }
                }
                Op::Rename(x, y) => {
                    let res = b.rename(&root(), &r, NAMES[x].as_bytes(), &r, NAMES[y].as_bytes());
                    match names.get(&x).copied() {
                        None => prop_assert_eq!(res.err(), Some(FsError::NoEnt)),
                        Some(o) => {
                            res.unwrap();
                            if names.get(&y) != Some(&o) {
                                if let Some(old) = names.insert(y, o) {
                                    if !names.values().any(|&v| v == old) {
                                        objects.remove(&old);
                                        handles.remove(&old);
                                    }
                                }
                                names.remove(&x);
                            }
                        }
                    }
                }
                Op::Link(x, y) => {
                    let res = match names.get(&x) {
                        Some(&o) => b.link(&root(), &handles[&o], &r, NAMES[y].as_bytes()).map(|_| ()),
                        None => Err(FsError::NoEnt),
                    };
                    match (names.get(&x).copied(), names.contains_key(&y)) {
                        (Some(o), false) => { res.unwrap(); names.insert(y, o); }
                        (Some(_), true) => prop_assert_eq!(res.err(), Some(FsError::Exist)),
                        (None, _) => prop_assert!(res.is_err()),
                    }
                }
            }
        }
        let mut stored = 0u64;
        for (n, o) in &names {
            let h = b.lookup(&root(), &r, NAMES[*n].as_bytes()).unwrap().handle;
            let a = attr(&b, &h);
            prop_assert_eq!(a.nlink as usize, names.values().filter(|&&v| v == *o).count());
            prop_assert!(read_all(&b, &h) == objects[o], "content of {}", NAMES[*n]);
        }
        for (o, data) in &objects {
            stored += attr(&b, &handles[o]).used;
            prop_assert!(attr(&b, &handles[o]).size == data.len() as u64);
        }
        let s = b.fsstat(&r).unwrap();
        prop_assert_eq!(s.total_bytes - s.free_bytes, stored);
        prop_assert_eq!(list(&b, &r, 3).len(), names.len() + 2);
    }
}
