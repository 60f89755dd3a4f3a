//! Changes of names and attributes as the journal records them, and their
//! encoding (the data of a `KIND_META` record).
//!
//! Each record says which name now names which object (by handle), so that
//! replay can work out where the log leaves every name it touched
//! (`journal.rs`, `Replayer`): a create records the new object's handle and
//! every attribute it was answered with (to make it again if a crash took it
//! back), a rename the handle of the object it moved; SETATTR records the
//! values the object had afterwards (a time set to "now" as the time it got).
//!
//! # Encoding
//! One byte of operation, then its fields in order: handles, names and short
//! values as a `u16` length and bytes, extended attribute values as a `u32`
//! length and bytes, numbers little-endian, optional attributes as a presence
//! byte. Decoding checks every length against what is left and against the
//! limits a field may have, so a record that passed its CRC but is not one of
//! ours decodes to `None`, never a panic.

use crate::{NodeKind, SetAttr, SetTime, Timestamp, NAME_MAX, SYMLINK_TARGET_BYTES_MAX, XATTR_VALUE_MAX};

/// The longest handle a record holds (as the log's `HANDLE_MAX`).
const HANDLE_MAX: usize = super::log::HANDLE_MAX;

/// What a created object is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum What {
    File,
    Dir,
    Symlink(Vec<u8>),
    Node(NodeKind),
}

/// One change of names or attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Meta {
    /// `obj` was made as `name` in `dir` (CREATE of a new file, MKDIR,
    /// SYMLINK, MKNOD) with the attributes `attr` (mode, owner, size, times).
    Create { dir: Vec<u8>, name: Vec<u8>, obj: Vec<u8>, what: What, attr: SetAttr },
    /// `obj` got the name `name` in `dir` too.
    Link { obj: Vec<u8>, dir: Vec<u8>, name: Vec<u8> },
    /// `name` in `dir` was removed (REMOVE or RMDIR).
    Remove { dir: Vec<u8>, name: Vec<u8> },
    /// `obj` moved from `from_name` in `from_dir` to `to_name` in `to_dir`
    /// (replacing whatever was there).
    Rename { from_dir: Vec<u8>, from_name: Vec<u8>, to_dir: Vec<u8>, to_name: Vec<u8>, obj: Vec<u8> },
    /// `obj`'s attributes became these (fields not changed are `None`).
    SetAttr { obj: Vec<u8>, attr: SetAttr },
    /// Extended attribute `name` of `obj` was set to `value`.
    SetXattr { obj: Vec<u8>, name: Vec<u8>, value: Vec<u8> },
    /// Extended attribute `name` of `obj` was removed.
    RemoveXattr { obj: Vec<u8>, name: Vec<u8> },
}

const OP_CREATE: u8 = 1;
const OP_LINK: u8 = 2;
const OP_REMOVE: u8 = 3;
const OP_RENAME: u8 = 4;
const OP_SETATTR: u8 = 5;
const OP_SETXATTR: u8 = 6;
const OP_REMOVEXATTR: u8 = 7;

const WHAT_FILE: u8 = 1;
const WHAT_DIR: u8 = 2;
const WHAT_SYMLINK: u8 = 3;
const WHAT_CHAR: u8 = 4;
const WHAT_BLOCK: u8 = 5;
const WHAT_SOCKET: u8 = 6;
const WHAT_FIFO: u8 = 7;

impl Meta {
    /// A short name for logs.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Meta::Create { .. } => "create",
            Meta::Link { .. } => "link",
            Meta::Remove { .. } => "remove",
            Meta::Rename { .. } => "rename",
            Meta::SetAttr { .. } => "setattr",
            Meta::SetXattr { .. } => "setxattr",
            Meta::RemoveXattr { .. } => "removexattr",
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Vec::with_capacity(128);
        match self {
            Meta::Create { dir, name, obj, what, attr } => {
                w.push(OP_CREATE);
                put(&mut w, dir);
                put(&mut w, name);
                put(&mut w, obj);
                match what {
                    What::File => w.push(WHAT_FILE),
                    What::Dir => w.push(WHAT_DIR),
                    What::Symlink(target) => {
                        w.push(WHAT_SYMLINK);
                        put(&mut w, target);
                    }
                    What::Node(NodeKind::CharDevice { major, minor }) => {
                        w.push(WHAT_CHAR);
                        w.extend_from_slice(&major.to_le_bytes());
                        w.extend_from_slice(&minor.to_le_bytes());
                    }
                    What::Node(NodeKind::BlockDevice { major, minor }) => {
                        w.push(WHAT_BLOCK);
                        w.extend_from_slice(&major.to_le_bytes());
                        w.extend_from_slice(&minor.to_le_bytes());
                    }
                    What::Node(NodeKind::Socket) => w.push(WHAT_SOCKET),
                    What::Node(NodeKind::Fifo) => w.push(WHAT_FIFO),
                }
                put_attr(&mut w, attr);
            }
            Meta::Link { obj, dir, name } => {
                w.push(OP_LINK);
                put(&mut w, obj);
                put(&mut w, dir);
                put(&mut w, name);
            }
            Meta::Remove { dir, name } => {
                w.push(OP_REMOVE);
                put(&mut w, dir);
                put(&mut w, name);
            }
            Meta::Rename { from_dir, from_name, to_dir, to_name, obj } => {
                w.push(OP_RENAME);
                for f in [from_dir, from_name, to_dir, to_name, obj] {
                    put(&mut w, f);
                }
            }
            Meta::SetAttr { obj, attr } => {
                w.push(OP_SETATTR);
                put(&mut w, obj);
                put_attr(&mut w, attr);
            }
            Meta::SetXattr { obj, name, value } => {
                w.push(OP_SETXATTR);
                put(&mut w, obj);
                put(&mut w, name);
                w.extend_from_slice(&(value.len() as u32).to_le_bytes());
                w.extend_from_slice(value);
            }
            Meta::RemoveXattr { obj, name } => {
                w.push(OP_REMOVEXATTR);
                put(&mut w, obj);
                put(&mut w, name);
            }
        }
        w
    }

    pub(crate) fn decode(b: &[u8]) -> Option<Meta> {
        let mut r = Reader(b);
        let handle = |r: &mut Reader<'_>| r.bytes(HANDLE_MAX);
        let name = |r: &mut Reader<'_>| r.bytes(NAME_MAX).filter(|n| !n.is_empty());
        let m = match r.u8()? {
            OP_CREATE => {
                let (dir, name, obj) = (handle(&mut r)?, name(&mut r)?, handle(&mut r)?);
                let what = match r.u8()? {
                    WHAT_FILE => What::File,
                    WHAT_DIR => What::Dir,
                    WHAT_SYMLINK => What::Symlink(r.bytes(SYMLINK_TARGET_BYTES_MAX)?),
                    WHAT_CHAR => What::Node(NodeKind::CharDevice { major: r.u32()?, minor: r.u32()? }),
                    WHAT_BLOCK => What::Node(NodeKind::BlockDevice { major: r.u32()?, minor: r.u32()? }),
                    WHAT_SOCKET => What::Node(NodeKind::Socket),
                    WHAT_FIFO => What::Node(NodeKind::Fifo),
                    _ => return None,
                };
                Meta::Create { dir, name, obj, what, attr: r.attr()? }
            }
            OP_LINK => Meta::Link { obj: handle(&mut r)?, dir: handle(&mut r)?, name: name(&mut r)? },
            OP_REMOVE => Meta::Remove { dir: handle(&mut r)?, name: name(&mut r)? },
            OP_RENAME => Meta::Rename {
                from_dir: handle(&mut r)?,
                from_name: name(&mut r)?,
                to_dir: handle(&mut r)?,
                to_name: name(&mut r)?,
                obj: handle(&mut r)?,
            },
            OP_SETATTR => Meta::SetAttr { obj: handle(&mut r)?, attr: r.attr()? },
            OP_SETXATTR => {
                let (obj, name) = (handle(&mut r)?, name(&mut r)?);
                let len = r.u32()? as usize;
                if len > XATTR_VALUE_MAX {
                    return None;
                }
                Meta::SetXattr { obj, name, value: r.take(len)?.to_vec() }
            }
            OP_REMOVEXATTR => Meta::RemoveXattr { obj: handle(&mut r)?, name: name(&mut r)? },
            _ => return None,
        };
        // Nothing may follow: a record is exactly one change.
        r.0.is_empty().then_some(m)
    }
}

fn put(w: &mut Vec<u8>, b: &[u8]) {
    w.extend_from_slice(&(b.len() as u16).to_le_bytes());
    w.extend_from_slice(b);
}

fn put_opt(w: &mut Vec<u8>, v: Option<u64>) {
    match v {
        None => w.push(0),
        Some(v) => {
            w.push(1);
            w.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// Times are recorded only as client times (a time set to "now" is recorded
/// as the time it became), or not at all.
fn put_time(w: &mut Vec<u8>, t: SetTime) {
    match t {
        SetTime::ClientTime(ts) => {
            w.push(1);
            w.extend_from_slice(&ts.secs.to_le_bytes());
            w.extend_from_slice(&ts.nsecs.to_le_bytes());
        }
        SetTime::DontChange | SetTime::ServerTime => w.push(0),
    }
}

fn put_attr(w: &mut Vec<u8>, a: &SetAttr) {
    put_opt(w, a.mode.map(u64::from));
    put_opt(w, a.uid.map(u64::from));
    put_opt(w, a.gid.map(u64::from));
    put_opt(w, a.size);
    put_time(w, a.atime);
    put_time(w, a.mtime);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    fn bytes(&mut self, max: usize) -> Option<Vec<u8>> {
        let len = u16::from_le_bytes(self.take(2)?.try_into().expect("2 bytes")) as usize;
        if len > max {
            return None;
        }
        self.take(len).map(<[u8]>::to_vec)
    }

    fn opt(&mut self) -> Option<Option<u64>> {
        match self.u8()? {
            0 => Some(None),
            1 => Some(Some(self.u64()?)),
            _ => None,
        }
    }

    fn opt_u32(&mut self) -> Option<Option<u32>> {
        match self.opt()? {
            None => Some(None),
            Some(v) => u32::try_from(v).ok().map(Some),
        }
    }

    fn time(&mut self) -> Option<SetTime> {
        match self.u8()? {
            0 => Some(SetTime::DontChange),
            1 => {
                let secs = i64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes"));
                let nsecs = self.u32()?;
                (nsecs < 1_000_000_000).then_some(SetTime::ClientTime(Timestamp { secs, nsecs }))
            }
            _ => None,
        }
    }

    fn attr(&mut self) -> Option<SetAttr> {
        Some(SetAttr {
            mode: self.opt_u32()?.map(|m| m & 0o7777),
            uid: self.opt_u32()?,
            gid: self.opt_u32()?,
            size: self.opt()?,
            atime: self.time()?,
            mtime: self.time()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Meta> {
        let h = |b: u8| vec![b; 20];
        let t = |s| SetTime::ClientTime(Timestamp { secs: s, nsecs: 7 });
        let full = SetAttr {
            mode: Some(0o4755),
            uid: Some(1000),
            gid: Some(100),
            size: Some(9),
            atime: t(1),
            mtime: t(-2),
        };
        vec![
            Meta::Create { dir: h(1), name: b"a".to_vec(), obj: h(2), what: What::File, attr: full.clone() },
            Meta::Create {
                dir: h(1),
                name: b"d".to_vec(),
                obj: h(3),
                what: What::Dir,
                attr: SetAttr::default(),
            },
            Meta::Create {
                dir: h(1),
                name: b"s".to_vec(),
                obj: h(4),
                what: What::Symlink(b"../x".to_vec()),
                attr: full.clone(),
            },
            Meta::Create {
                dir: h(1),
                name: b"n".to_vec(),
                obj: h(5),
                what: What::Node(NodeKind::CharDevice { major: 1, minor: 5 }),
                attr: full.clone(),
            },
            Meta::Create {
                dir: h(1),
                name: b"p".to_vec(),
                obj: h(6),
                what: What::Node(NodeKind::Fifo),
                attr: full,
            },
            Meta::Link { obj: h(2), dir: h(3), name: b"b".to_vec() },
            Meta::Remove { dir: h(1), name: b"a".to_vec() },
            Meta::Rename {
                from_dir: h(1),
                from_name: b"a".to_vec(),
                to_dir: h(3),
                to_name: b"c".to_vec(),
                obj: h(2),
            },
            Meta::SetAttr { obj: h(2), attr: SetAttr { mode: Some(0o600), ..SetAttr::default() } },
            Meta::SetXattr { obj: h(2), name: b"k".to_vec(), value: vec![0; 300] },
            Meta::RemoveXattr { obj: h(2), name: b"k".to_vec() },
        ]
    }

    #[test]
    fn every_change_decodes_to_itself() {
        for m in samples() {
            assert_eq!(Meta::decode(&m.encode()), Some(m.clone()), "{}", m.kind());
        }
    }

    /// Cut short, extended or with any byte changed, a record decodes to
    /// something or nothing, never a panic; cut short or extended, to nothing.
    #[test]
    fn damaged_records_never_panic() {
        for m in samples() {
            let b = m.encode();
            for n in 0..b.len() {
                assert_eq!(Meta::decode(&b[..n]), None, "{} cut at {n}", m.kind());
            }
            let mut longer = b.clone();
            longer.push(0);
            assert_eq!(Meta::decode(&longer), None);
            for i in 0..b.len() {
                for x in [0u8, 1, 0x7f, 0xff] {
                    let mut d = b.clone();
                    d[i] = x;
                    let _ = Meta::decode(&d);
                }
            }
        }
    }
}
