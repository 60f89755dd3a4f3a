//! The wire form of a local-backend file handle.
//!
//! ```text
//!  0        1       2      3 .. 3+len        3+len .. 3+len+16
//! +--------+-------+------+-----------------+------------------------+
//! |version | ktype | len  | kernel handle   | SipHash-2-4-128 MAC    |
//! +--------+-------+------+-----------------+------------------------+
//! ```
//!
//! The kernel handle (from `name_to_handle_at`) names an inode on the
//! export's file system *anywhere* on that file system, and
//! `open_by_handle_at` would open it for anyone who can forge one. So every
//! handle carries a keyed MAC over everything before it, and a handle whose
//! MAC does not verify is refused before any system call sees it. The key
//! is per export: another export's handles do not verify here. The MAC
//! also covers the export root's own kernel handle, so a key reused for a
//! different root does not carry handles over either. The layout
//! holds nothing that changes across a restart, so handles survive one as
//! long as the key does.
//!
//! A 128-bit MAC costs 8 bytes more than the 64-bit one and still leaves 41
//! bytes for the kernel handle (ext4 uses 8, tmpfs 12, btrfs 20, XFS ≤ 24).

use bytes::{BufMut, Bytes, BytesMut};
use std::hash::Hasher;

use siphasher::sip128::{Hasher128, SipHasher24};

use super::sys::{KernelHandle, KERNEL_HANDLE_MAX};
use crate::{FileHandle, FsError, FsResult, MAX_BACKEND_HANDLE};

/// Bumped if the layout ever changes, so old handles fail cleanly.
const VERSION: u8 = 1;
const HEADER_LEN: usize = 3;
const MAC_LEN: usize = 16;

// The layout must fit in what the server leaves us.
const _: () = assert!(HEADER_LEN + KERNEL_HANDLE_MAX + MAC_LEN <= MAX_BACKEND_HANDLE);

/// Issues and checks handles for one export.
pub(super) struct HandleCodec {
    key: [u8; 16],
    /// The root's kernel handle, prefixed with its length.
    root: Vec<u8>,
}

impl HandleCodec {
    pub(super) fn new(key: [u8; 16], root: &[u8]) -> Self {
        let mut bound = Vec::with_capacity(root.len() + 1);
        bound.push(root.len() as u8);
        bound.extend_from_slice(root);
        HandleCodec { key, root: bound }
    }

    fn mac(&self, body: &[u8]) -> [u8; MAC_LEN] {
        let mut h = SipHasher24::new_with_key(&self.key);
        h.write(&self.root);
        h.write(body);
        h.finish128().as_bytes()
    }

    /// The handle for a kernel handle.
    pub(super) fn encode(&self, kh: &KernelHandle) -> FileHandle {
        let mut buf = BytesMut::with_capacity(HEADER_LEN + kh.len as usize + MAC_LEN);
        buf.put_u8(VERSION);
        buf.put_u8(kh.htype);
        buf.put_u8(kh.len);
        buf.put_slice(kh.data());
        let mac = self.mac(&buf);
        buf.put_slice(&mac);
        FileHandle(buf.freeze())
    }

    /// Check a handle from a client and extract the kernel handle. Pure
    /// computation: nothing here reaches the kernel.
    pub(super) fn decode(&self, fh: &FileHandle) -> FsResult<KernelHandle> {
        let b: &Bytes = &fh.0;
        if b.len() < HEADER_LEN + MAC_LEN || b.len() > MAX_BACKEND_HANDLE {
            return Err(FsError::BadHandle);
        }
        let (body, mac) = b.split_at(b.len() - MAC_LEN);
        if !constant_time_eq(&self.mac(body), mac) {
            return Err(FsError::BadHandle);
        }
        // Only handles we built get this far, so these checks cannot fail
        // unless the key was reused with another layout; keep them anyway.
        let len = body[2] as usize;
        if body[0] != VERSION || len > KERNEL_HANDLE_MAX || body.len() != HEADER_LEN + len {
            return Err(FsError::BadHandle);
        }
        let mut bytes = [0u8; KERNEL_HANDLE_MAX];
        bytes[..len].copy_from_slice(&body[HEADER_LEN..]);
        Ok(KernelHandle { htype: body[1], len: len as u8, bytes })
    }
}

/// Compare MACs without an early exit, so the time taken does not tell an
/// attacker how many leading bytes of a guess were right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kh(data: &[u8]) -> KernelHandle {
        let mut bytes = [0u8; KERNEL_HANDLE_MAX];
        bytes[..data.len()].copy_from_slice(data);
        KernelHandle { htype: 1, len: data.len() as u8, bytes }
    }

    #[test]
    fn round_trip_and_size() {
        let c = HandleCodec::new([7; 16], b"root");
        let k = kh(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let fh = c.encode(&k);
        assert_eq!(fh.0.len(), 3 + 8 + 16);
        assert_eq!(c.decode(&fh).unwrap(), k);
        let big = kh(&[9; KERNEL_HANDLE_MAX]);
        assert!(c.encode(&big).0.len() <= MAX_BACKEND_HANDLE);
        assert_eq!(c.decode(&c.encode(&big)).unwrap(), big);
    }

    #[test]
    fn every_bit_flip_and_truncation_is_refused() {
        let c = HandleCodec::new([7; 16], b"root");
        let fh = c.encode(&kh(&[1, 2, 3, 4, 5, 6, 7, 8]));
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
    fn another_key_refuses() {
        let fh = HandleCodec::new([7; 16], b"root").encode(&kh(&[1, 2, 3]));
        assert_eq!(HandleCodec::new([8; 16], b"root").decode(&fh), Err(FsError::BadHandle));
    }

    #[test]
    fn another_root_refuses() {
        let fh = HandleCodec::new([7; 16], b"root").encode(&kh(&[1, 2, 3]));
        assert_eq!(HandleCodec::new([7; 16], b"other").decode(&fh), Err(FsError::BadHandle));
    }
}
