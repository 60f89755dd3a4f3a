//! The NFSv3 call sequences the sequence fuzzer (`sequences.rs`) and the simulator (`sim.rs`)
//! generate and run: operations on a small namespace where names collide, and each call's
//! answer reduced to what must not depend on the backend or on the network.

use super::*;
use proptest::prelude::*;

/// Names in every directory: few, so operations collide.
pub const NAMES: [&str; 3] = ["a", "b", "c"];
/// Symbolic link targets.
pub const TARGETS: [&str; 3] = ["a", "../b", "/nowhere/at/all"];

/// A path from an export's root: indices into [`NAMES`].
pub type P = Vec<u8>;

#[derive(Debug, Clone)]
pub enum Op {
    Create { dir: P, name: u8, how: u8 },
    Mkdir { dir: P, name: u8 },
    Symlink { dir: P, name: u8, target: u8 },
    Link { from: P, dir: P, name: u8 },
    Remove { dir: P, name: u8 },
    Rmdir { dir: P, name: u8 },
    Rename { from_dir: P, from: u8, to_dir: P, to: u8 },
    Write { file: P, offset: u32, len: u16, seed: u8, stable: u8 },
    Read { file: P, offset: u32, len: u16 },
    Truncate { file: P, size: u32 },
    Chmod { obj: P, mode: u16 },
    Getattr { obj: P },
    Readdir { dir: P },
    Readlink { obj: P },
    Commit { file: P },
}

pub fn path() -> impl Strategy<Value = P> {
    proptest::collection::vec(0u8..NAMES.len() as u8, 0..=2)
}

pub fn name() -> impl Strategy<Value = u8> {
    0u8..NAMES.len() as u8
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (path(), name(), 0u8..3).prop_map(|(dir, name, how)| Op::Create { dir, name, how }),
        2 => (path(), name()).prop_map(|(dir, name)| Op::Mkdir { dir, name }),
        1 => (path(), name(), 0u8..TARGETS.len() as u8).prop_map(|(dir, name, target)| Op::Symlink { dir, name, target }),
        1 => (path(), path(), name()).prop_map(|(from, dir, name)| Op::Link { from, dir, name }),
        2 => (path(), name()).prop_map(|(dir, name)| Op::Remove { dir, name }),
        1 => (path(), name()).prop_map(|(dir, name)| Op::Rmdir { dir, name }),
        2 => (path(), name(), path(), name()).prop_map(|(from_dir, from, to_dir, to)| Op::Rename { from_dir, from, to_dir, to }),
        3 => (path(), 0u32..70_000, 0u16..9000, any::<u8>(), 0u8..3)
            .prop_map(|(file, offset, len, seed, stable)| Op::Write { file, offset, len, seed, stable }),
        2 => (path(), 0u32..80_000, 0u16..20_000).prop_map(|(file, offset, len)| Op::Read { file, offset, len }),
        1 => (path(), 0u32..80_000).prop_map(|(file, size)| Op::Truncate { file, size }),
        1 => (path(), 0u16..0o10000).prop_map(|(obj, mode)| Op::Chmod { obj, mode }),
        1 => path().prop_map(|obj| Op::Getattr { obj }),
        1 => path().prop_map(|dir| Op::Readdir { dir }),
        1 => path().prop_map(|obj| Op::Readlink { obj }),
        1 => path().prop_map(|file| Op::Commit { file }),
    ]
}

pub fn name_of(i: u8) -> &'static str {
    NAMES[i as usize]
}

/// What a call answered, reduced to what must not depend on the backend.
pub fn attrs(a: &Fattr3) -> String {
    // A directory's size is the file system's business (ext4: 4096 per block); its link
    // count is 2 plus subdirectories on both.
    let size = if a.ftype == Ftype3::Dir { "-".to_string() } else { a.size.to_string() };
    format!("{:?} mode={:o} nlink={} size={size}", a.ftype, a.mode & 0o7777, a.nlink)
}

pub fn post(a: &PostOpAttr) -> String {
    a.as_ref().map_or("no-attrs".to_string(), attrs)
}

/// One export under test: its root.
pub struct Side {
    pub root: NfsFh3,
}

/// Something that makes NFSv3 calls: a socket client, or a simulated network.
pub trait Caller {
    /// Call NFSv3 procedure `proc_` with encoded `args`; the decoded result.
    fn nfs_raw(&mut self, proc_: u32, args: Vec<u8>) -> Nfs3Res;
}

impl Caller for Client {
    fn nfs_raw(&mut self, proc_: u32, args: Vec<u8>) -> Nfs3Res {
        let r = self.call_raw(NFS_PROGRAM, NFS_V3, proc_, &args);
        let mut body = r.body.clone();
        Nfs3Res::decode(proc_, &mut body).expect("a reply that decodes")
    }
}

pub fn data(seed: u8, offset: u32, len: u16) -> Vec<u8> {
    (0..len as u32).map(|i| (seed as u32).wrapping_mul(31).wrapping_add(offset + i) as u8).collect()
}

fn call(c: &mut impl Caller, proc_: u32, args: &impl Encode) -> Nfs3Res {
    c.nfs_raw(proc_, enc(args))
}

/// LOOKUP each component from the root; the handle, or the status that stopped the walk.
fn resolve(c: &mut impl Caller, side: &Side, p: &[u8]) -> Result<NfsFh3, Nfsstat3> {
    let mut fh = side.root.clone();
    for &i in p {
        match call(c, 3, &Diropargs3 { dir: fh.clone(), name: fname(i) }) {
            Nfs3Res::Lookup(Lookup3Res::Ok(ok)) => fh = ok.object,
            other => return Err(other.status()),
        }
    }
    Ok(fh)
}

pub fn fname(i: u8) -> Filename3 {
    Opaque::new(Bytes::from_static(name_of(i).as_bytes())).unwrap()
}

/// Run `op` on one side; the answer as a line.
pub fn run(c: &mut impl Caller, side: &Side, op: &Op) -> String {
    macro_rules! at {
        ($p:expr) => {
            match resolve(c, side, $p) {
                Ok(fh) => fh,
                Err(s) => return format!("resolve {s:?}"),
            }
        };
    }
    let sattr = |mode: u32| Sattr3 { mode: Some(mode), ..Default::default() };
    match op {
        Op::Create { dir, name, how } => {
            let dir = at!(dir);
            let how = match how {
                0 => Createhow3::Unchecked(sattr(0o644)),
                1 => Createhow3::Guarded(sattr(0o640)),
                _ => Createhow3::Exclusive(*b"verf0001"),
            };
            let r = call(c, 8, &Create3Args { where_: Diropargs3 { dir, name: fname(*name) }, how });
            match r {
                Nfs3Res::Create(Create3Res::Ok(ok)) => format!("OK {}", post(&ok.obj_attributes)),
                other => format!("{:?}", other.status()),
            }
        }
        Op::Mkdir { dir, name } => {
            let dir = at!(dir);
            let r = call(
                c,
                9,
                &Mkdir3Args { where_: Diropargs3 { dir, name: fname(*name) }, attributes: sattr(0o755) },
            );
            match r {
                Nfs3Res::Mkdir(Mkdir3Res::Ok(ok)) => format!("OK {}", post(&ok.obj_attributes)),
                other => format!("{:?}", other.status()),
            }
        }
        Op::Symlink { dir, name, target } => {
            let dir = at!(dir);
            let symlink = Symlinkdata3 {
                symlink_attributes: Sattr3::default(),
                symlink_data: Opaque::new(Bytes::from_static(TARGETS[*target as usize].as_bytes())).unwrap(),
            };
            let r = call(c, 10, &Symlink3Args { where_: Diropargs3 { dir, name: fname(*name) }, symlink });
            format!("{:?}", r.status())
        }
        Op::Link { from, dir, name } => {
            let file = at!(from);
            let dir = at!(dir);
            let r = call(c, 15, &Link3Args { file, link: Diropargs3 { dir, name: fname(*name) } });
            match r {
                Nfs3Res::Link(Link3Res::Ok(ok)) => format!("OK {}", post(&ok.file_attributes)),
                other => format!("{:?}", other.status()),
            }
        }
        Op::Remove { dir, name } => {
            let dir = at!(dir);
            format!("{:?}", call(c, 12, &Diropargs3 { dir, name: fname(*name) }).status())
        }
        Op::Rmdir { dir, name } => {
            let dir = at!(dir);
            format!("{:?}", call(c, 13, &Diropargs3 { dir, name: fname(*name) }).status())
        }
        Op::Rename { from_dir, from, to_dir, to } => {
            let fd = at!(from_dir);
            let td = at!(to_dir);
            let args = Rename3Args {
                from: Diropargs3 { dir: fd, name: fname(*from) },
                to: Diropargs3 { dir: td, name: fname(*to) },
            };
            format!("{:?}", call(c, 14, &args).status())
        }
        Op::Write { file, offset, len, seed, stable } => {
            let fh = at!(file);
            let stable = [StableHow::Unstable, StableHow::DataSync, StableHow::FileSync][*stable as usize];
            let bytes = data(*seed, *offset, *len);
            match call(c, 7, &write_args(&fh, *offset as u64, &bytes, stable)) {
                Nfs3Res::Write(Write3Res::Ok(ok)) => {
                    format!("OK count={} {}", ok.count, post(&ok.file_wcc.after))
                }
                other => format!("{:?}", other.status()),
            }
        }
        Op::Read { file, offset, len } => {
            let fh = at!(file);
            match call(c, 6, &Read3Args { file: fh, offset: *offset as u64, count: *len as u32 }) {
                Nfs3Res::Read(Read3Res::Ok(ok)) => {
                    let sum: u64 = ok.data.iter().enumerate().map(|(i, b)| (i as u64 + 1) * *b as u64).sum();
                    format!("OK count={} eof={} sum={sum} {}", ok.count, ok.eof, post(&ok.file_attributes))
                }
                other => format!("{:?}", other.status()),
            }
        }
        Op::Truncate { file, size } => {
            let fh = at!(file);
            let set = Sattr3 { size: Some(*size as u64), ..Default::default() };
            match call(c, 2, &Setattr3Args { object: fh, new_attributes: set, guard: None }) {
                Nfs3Res::Setattr(Setattr3Res::Ok(ok)) => format!("OK {}", post(&ok.obj_wcc.after)),
                other => format!("{:?}", other.status()),
            }
        }
        Op::Chmod { obj, mode } => {
            let fh = at!(obj);
            match call(c, 2, &Setattr3Args { object: fh, new_attributes: sattr(*mode as u32), guard: None }) {
                Nfs3Res::Setattr(Setattr3Res::Ok(ok)) => format!("OK {}", post(&ok.obj_wcc.after)),
                other => format!("{:?}", other.status()),
            }
        }
        Op::Getattr { obj } => {
            let fh = at!(obj);
            match call(c, 1, &fh) {
                Nfs3Res::Getattr(Getattr3Res::Ok(ok)) => format!("OK {}", attrs(&ok.obj_attributes)),
                other => format!("{:?}", other.status()),
            }
        }
        Op::Readdir { dir } => {
            let fh = at!(dir);
            let mut names = Vec::new();
            let (mut cookie, mut verf) = (0u64, [0u8; 8]);
            for _ in 0..100 {
                let args = Readdir3Args { dir: fh.clone(), cookie, cookieverf: verf, count: 512 };
                match call(c, 16, &args) {
                    Nfs3Res::Readdir(Readdir3Res::Ok(ok)) => {
                        for e in &ok.reply.entries {
                            names.push(String::from_utf8_lossy(&e.name).into_owned());
                            cookie = e.cookie;
                        }
                        verf = ok.cookieverf;
                        if ok.reply.eof {
                            names.sort();
                            return format!("OK {names:?}");
                        }
                    }
                    other => return format!("{:?}", other.status()),
                }
            }
            "READDIR never reached eof".into()
        }
        Op::Readlink { obj } => {
            let fh = at!(obj);
            match call(c, 5, &fh) {
                Nfs3Res::Readlink(Readlink3Res::Ok(ok)) => format!("OK {:?}", ok.data),
                other => format!("{:?}", other.status()),
            }
        }
        Op::Commit { file } => {
            let fh = at!(file);
            format!("{:?}", call(c, 21, &Commit3Args { file: fh, offset: 0, count: 0 }).status())
        }
    }
}
