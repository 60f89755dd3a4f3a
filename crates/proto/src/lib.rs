//! NFSv3 (RFC 1813), NFSv4.1/4.2 (RFC 8881, RFC 7862), MOUNT v1/v3 (RFC 1813 appendix I), portmap v2
//! (RFC 1833 §3), NLM v4 and NSM v1 (X/Open XNFS) message types and procedure tables, sans-IO.
//!
//! This crate only turns bytes into typed values and back, with the codec of
//! [`eagernfs_xdr`]. It has no sockets, no clock and no file-system access;
//! the server and the client drive it. Every length read from the wire is
//! bounded before anything is allocated: file handles by
//! [`nfs3::NFS3_FHSIZE`], names by [`nfs3::NFS3_NAME_MAX`], READ/WRITE
//! payloads by [`nfs3::MAX_IO_SIZE`], and linked lists (READDIR entries,
//! export lists, …) grow one decoded element at a time, so their memory is
//! proportional to the input actually received.
//!
//! # Layout
//! - [`nfs3`]: NFSv3 constants, data types, the Args/Res pair of each of the
//!   22 procedures, [`nfs3::Nfs3Args`] / [`nfs3::Nfs3Res`] (decode any
//!   procedure by number) and [`nfs3::NFS3_PROCEDURES`].
//! - [`mount`]: the MOUNT program (versions 1 and 3) and its table.
//! - [`portmap`]: portmap v2 and its table.
//! - [`nfs4`]: NFSv4.1 (RFC 8881) and the NFSv4.2 operations (RFC 7862):
//!   types, COMPOUND decoded one operation at a time, the callback
//!   program, typed attributes and the operation table ([`nfs4::OpInfo`]).
//! - [`nlm`]: the lock manager (NLM v4) and status monitor (NSM v1), and their tables.
//! - [`ProcInfo`]: one row of a procedure table; the server's dispatch,
//!   duplicate reply cache, read-only check and statistics all read it.
//! - [`fuzzing`]: decode entry points for fuzz targets and robustness tests.

use eagernfs_xdr::{BufMut, Bytes, Decode, Encode};

/// Generate a newtype over `Vec<$elem>` coded as an XDR linked list
/// (see [`encode_list`]); a newtype because the codec traits cannot be
/// implemented for `Vec` outside the XDR crate.
macro_rules! linked_list {
    ($(#[$meta:meta])* $name:ident($elem:ty)) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name(pub Vec<$elem>);

        impl eagernfs_xdr::Encode for $name {
            fn encode<B: eagernfs_xdr::BufMut>(&self, buf: &mut B) {
                crate::encode_list(buf, &self.0)
            }
        }
        impl eagernfs_xdr::Decode for $name {
            fn decode(buf: &mut eagernfs_xdr::Bytes) -> eagernfs_xdr::Result<Self> {
                crate::decode_list(buf).map($name)
            }
        }
    };
}

pub mod fuzzing;
pub mod mount;
pub mod nfs3;
pub mod nfs4;
pub mod nlm;
pub mod portmap;

#[cfg(test)]
mod arbitrary;
#[cfg(test)]
mod nfs4_tests;
#[cfg(test)]
mod tests;

pub use eagernfs_xdr::Error as XdrError;

/// Metadata of one remote procedure: a row of a dispatch table.
///
/// The tables ([`nfs3::NFS3_PROCEDURES`], [`mount::MOUNT_PROCEDURES`],
/// [`portmap::PORTMAP_PROCEDURES`]) are indexed by procedure number, so
/// `TABLE.get(proc as usize)` both finds the row and answers PROC_UNAVAIL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcInfo {
    /// The procedure number on the wire (equal to the row's index).
    pub number: u32,
    /// The RFC name without program prefix ("READ", "MNT", "GETPORT"), for
    /// logs and per-procedure statistics.
    pub name: &'static str,
    /// The procedure changes the exported file system, so a read-only export
    /// must refuse it (NFS3ERR_ROFS) before calling the backend.
    pub mutates: bool,
    /// Executing the procedure twice has the same effect as once, so a
    /// retransmitted call may simply be re-executed. A non-idempotent
    /// procedure (REMOVE, CREATE, …) must be answered from the duplicate
    /// reply cache instead, or a retransmission turns success into an error.
    pub idempotent: bool,
}

impl ProcInfo {
    pub(crate) const fn new(number: u32, name: &'static str, mutates: bool, idempotent: bool) -> Self {
        ProcInfo { number, name, mutates, idempotent }
    }
}

/// Why a call or reply body could not be decoded for a given procedure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The procedure number is not in the program's table: answer the call
    /// with PROC_UNAVAIL.
    #[error("{program} has no procedure {procedure}")]
    UnknownProcedure { program: &'static str, procedure: u32 },
    /// The procedure (or version) exists but the body is malformed: answer
    /// the call with GARBAGE_ARGS.
    #[error(transparent)]
    Xdr(#[from] XdrError),
}

/// Size in bytes of XDR variable-length opaque data of `len` bytes:
/// the length word, the bytes and their padding.
pub const fn opaque_len(len: usize) -> usize {
    4 + len + eagernfs_xdr::pad_len(len)
}

/// Encode an XDR linked list (`struct node { T item; node *next; }`, the
/// shape of READDIR entries, export lists and pmaplist): a `true` word before
/// each element, then a `false` word.
pub(crate) fn encode_list<B: BufMut, T: Encode>(buf: &mut B, items: &[T]) {
    for item in items {
        true.encode(buf);
        item.encode(buf);
    }
    false.encode(buf);
}

/// Decode an XDR linked list element by element.
///
/// Nothing is preallocated from the wire: each element consumes at least one
/// 4-byte word plus its own body, so the vector can never hold more elements
/// than the input has words, and a forged endless list ends in
/// [`XdrError::Truncated`] rather than a large allocation.
pub(crate) fn decode_list<T: Decode>(buf: &mut Bytes) -> Result<Vec<T>, XdrError> {
    let mut items = Vec::new();
    while bool::decode(buf)? {
        items.push(T::decode(buf)?);
    }
    Ok(items)
}
