//! Wire file handles: a 4-byte export id followed by the backend's handle.
//!
//! The export id routes a handle to its backend; the backend authenticates
//! its own part (the local backend with a per-export keyed MAC), so a handle
//! moved from one export to another fails there.

use eagernfs_proto::nfs3::{NfsFh3, Nfsstat3};
use eagernfs_vfs::FileHandle;
use eagernfs_xdr::{Bytes, Opaque};

/// Bytes of export id at the front of every handle.
pub(crate) const EXPORT_ID_BYTES: usize = 4;

/// Build the wire handle for `fh` in export `export_id`.
pub(crate) fn to_wire(export_id: u32, fh: &FileHandle) -> NfsFh3 {
    let mut v = Vec::with_capacity(EXPORT_ID_BYTES + fh.0.len());
    v.extend_from_slice(&export_id.to_be_bytes());
    v.extend_from_slice(&fh.0);
    debug_assert!(v.len() <= eagernfs_proto::nfs3::NFS3_FHSIZE, "backend handle too long");
    NfsFh3 { data: Opaque(Bytes::from(v)) }
}

/// Split a wire handle into export id and backend handle.
///
/// A handle too short to hold an export id is NFS3ERR_BADHANDLE; the
/// backend judges the rest.
pub(crate) fn from_wire(fh: &NfsFh3) -> Result<(u32, FileHandle), Nfsstat3> {
    let b = &fh.data.0;
    if b.len() <= EXPORT_ID_BYTES {
        return Err(Nfsstat3::Badhandle);
    }
    let id = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Ok((id, FileHandle(b.slice(EXPORT_ID_BYTES..))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(id: u32, body in proptest::collection::vec(any::<u8>(), 1..=60)) {
            let fh = FileHandle(Bytes::from(body));
            let wire = to_wire(id, &fh);
            prop_assert!(wire.data.len() <= 64);
            prop_assert_eq!(from_wire(&wire).unwrap(), (id, fh));
        }
    }

    #[test]
    fn short_handles_are_bad() {
        for n in 0..=4 {
            let fh = NfsFh3 { data: Opaque(Bytes::from(vec![0u8; n])) };
            assert_eq!(from_wire(&fh), Err(Nfsstat3::Badhandle));
        }
    }
}
