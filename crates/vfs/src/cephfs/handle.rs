//! The wire form of a CephFS-backend file handle.
//!
//! ```text
//!  0         1 .. 9        9 .. 17      17 .. 25       25 .. 41
//! +---------+-------------+------------+--------------+--------------------+
//! | version | fs id (i64) | inode no.  | snapshot id  | SipHash-2-4-128 MAC|
//! +---------+-------------+------------+--------------+--------------------+
//! ```
//!
//! CephFS names every object by (inode number, snapshot id) within a file
//! system, for as long as the object exists, whichever client asks: that is
//! what the handle holds, with the file system's id (FSCID) so a handle of
//! one file system is never taken for an object of another. Nothing in it
//! depends on this server, its mount or its cache, so a handle stays valid
//! across a restart and on every server that shares the handle key (several
//! heads serving one CephFS).
//!
//! `ceph_ll_lookup_vino` would open any inode of the file system, outside
//! the exported directory too, for anyone who can write one: so every handle
//! carries a keyed MAC over the bytes before it and over the export's root
//! (its file system and inode), checked before libcephfs sees the handle, as
//! the local backend does with kernel handles.

use bytes::{BufMut, Bytes, BytesMut};
use std::hash::Hasher;

use siphasher::sip128::{Hasher128, SipHasher24};

use super::ffi::vinodeno_t;
use crate::{FileHandle, FsError, FsResult, MAX_BACKEND_HANDLE};

/// Bumped if the layout ever changes, so old handles fail cleanly.
const VERSION: u8 = 1;
const BODY_LEN: usize = 1 + 8 + 8 + 8;
const MAC_LEN: usize = 16;
pub(crate) const HANDLE_LEN: usize = BODY_LEN + MAC_LEN;

const _: () = assert!(HANDLE_LEN <= MAX_BACKEND_HANDLE);

/// Issues and checks handles for one export.
pub(crate) struct HandleCodec {
    key: [u8; 16],
    fs_cid: i64,
    /// The export root, bound into every MAC.
    root: vinodeno_t,
}

impl HandleCodec {
    pub(crate) fn new(key: [u8; 16], fs_cid: i64, root: vinodeno_t) -> Self {
        HandleCodec { key, fs_cid, root }
    }

    fn mac(&self, body: &[u8]) -> [u8; MAC_LEN] {
        let mut h = SipHasher24::new_with_key(&self.key);
        h.write(b"eagernfs cephfs handle v1");
        h.write(&self.fs_cid.to_be_bytes());
        h.write(&self.root.ino.to_be_bytes());
        h.write(&self.root.snapid.to_be_bytes());
        h.write(body);
        h.finish128().as_bytes()
    }

    pub(crate) fn encode(&self, vino: vinodeno_t) -> FileHandle {
        let mut buf = BytesMut::with_capacity(HANDLE_LEN);
        buf.put_u8(VERSION);
        buf.put_i64(self.fs_cid);
        buf.put_u64(vino.ino);
        buf.put_u64(vino.snapid);
        let mac = self.mac(&buf);
        buf.put_slice(&mac);
        FileHandle(buf.freeze())
    }

    /// Check a handle from a client and extract the inode it names. Pure
    /// computation: nothing here reaches libcephfs.
    pub(crate) fn decode(&self, fh: &FileHandle) -> FsResult<vinodeno_t> {
        let b: &Bytes = &fh.0;
        if b.len() != HANDLE_LEN {
            return Err(FsError::BadHandle);
        }
        let (body, mac) = b.split_at(BODY_LEN);
        if !constant_time_eq(&self.mac(body), mac) || body[0] != VERSION {
            return Err(FsError::BadHandle);
        }
        let word = |at: usize| u64::from_be_bytes(body[at..at + 8].try_into().expect("8 bytes"));
        if word(1) as i64 != self.fs_cid {
            return Err(FsError::BadHandle);
        }
        Ok(vinodeno_t { ino: word(9), snapid: word(17) })
    }
}

/// Compare MACs without an early exit.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cephfs::ffi::CEPH_NOSNAP;

    fn codec(key: u8, cid: i64, root: u64) -> HandleCodec {
        HandleCodec::new([key; 16], cid, vinodeno_t { ino: root, snapid: CEPH_NOSNAP })
    }

    #[test]
    fn round_trip_and_size() {
        let c = codec(7, 1, 0x1000);
        let v = vinodeno_t { ino: 0x1_0000_0042, snapid: CEPH_NOSNAP };
        let fh = c.encode(v);
        assert_eq!(fh.0.len(), HANDLE_LEN);
        assert_eq!(c.decode(&fh).unwrap(), v);
        let snap = vinodeno_t { ino: 5, snapid: 3 };
        assert_eq!(c.decode(&c.encode(snap)).unwrap(), snap);
    }

    #[test]
    fn the_same_object_gets_the_same_handle_on_every_server_sharing_the_key() {
        let v = vinodeno_t { ino: 99, snapid: CEPH_NOSNAP };
        assert_eq!(codec(7, 1, 0x1000).encode(v), codec(7, 1, 0x1000).encode(v));
    }

    #[test]
    fn every_bit_flip_and_truncation_is_refused() {
        let c = codec(7, 1, 0x1000);
        let fh = c.encode(vinodeno_t { ino: 0x1_0000_0042, snapid: CEPH_NOSNAP });
        for i in 0..fh.0.len() * 8 {
            let mut v = fh.0.to_vec();
            v[i / 8] ^= 1 << (i % 8);
            assert_eq!(c.decode(&FileHandle(v.into())), Err(FsError::BadHandle), "bit {i}");
        }
        for n in 0..fh.0.len() {
            assert_eq!(c.decode(&FileHandle(fh.0.slice(..n))), Err(FsError::BadHandle));
        }
    }

    #[test]
    fn another_key_file_system_or_root_refuses() {
        let v = vinodeno_t { ino: 99, snapid: CEPH_NOSNAP };
        let fh = codec(7, 1, 0x1000).encode(v);
        assert_eq!(codec(8, 1, 0x1000).decode(&fh), Err(FsError::BadHandle));
        assert_eq!(codec(7, 2, 0x1000).decode(&fh), Err(FsError::BadHandle));
        assert_eq!(codec(7, 1, 0x1001).decode(&fh), Err(FsError::BadHandle));
    }
}
