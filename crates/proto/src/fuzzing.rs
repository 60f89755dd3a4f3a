//! Decode entry points for fuzz targets (`fuzz/`) and robustness tests.
//!
//! Each function decodes arbitrary bytes as the body of one procedure and,
//! when that succeeds, checks the codec's invariants: re-encoding yields
//! exactly as many bytes as were consumed, a multiple of 4, and decoding
//! those bytes gives the same value. A malformed input is an `Err`, never a
//! panic; a panic here means a codec bug (which is what a fuzzer looks for).

use eagernfs_xdr::{decode_array, decode_opaque, to_vec, Bytes, Decode, Encode, Opaque};

use crate::mount::{MountArgs, MountRes};
use crate::nfs3::{Nfs3Args, Nfs3Res};
use crate::portmap::{PortmapArgs, PortmapRes};
use crate::Error;

/// Decode `data` with `decode`, and if it succeeds check that the value
/// re-encodes to the consumed length and decodes back to itself.
fn check<T, F>(data: &[u8], decode: F) -> Result<(), Error>
where
    T: Encode + PartialEq + std::fmt::Debug,
    F: Fn(&mut Bytes) -> Result<T, Error>,
{
    let mut buf = Bytes::copy_from_slice(data);
    let value = decode(&mut buf)?;
    let consumed_len = data.len() - buf.len();
    let encoded = to_vec(&value);
    // XDR is canonical apart from the content of padding bytes, so the
    // encoding must be exactly as long as what was read.
    assert_eq!(encoded.len(), consumed_len, "re-encoded length differs from consumed length: {value:?}");
    assert_eq!(encoded.len() % 4, 0, "encoding not a multiple of 4 bytes: {value:?}");
    let mut again = Bytes::from(encoded);
    let decoded = decode(&mut again).expect("re-encoded value does not decode");
    assert!(again.is_empty(), "re-decoding left bytes unread");
    assert_eq!(decoded, value, "value changed across encode/decode");
    Ok(())
}

/// Decode `data` as the arguments of NFSv3 procedure `procedure`.
pub fn decode_nfs3_args(procedure: u32, data: &[u8]) -> Result<(), Error> {
    check(data, |b| Nfs3Args::decode(procedure, b))
}

/// Decode `data` as the result of NFSv3 procedure `procedure`.
pub fn decode_nfs3_res(procedure: u32, data: &[u8]) -> Result<(), Error> {
    check(data, |b| Nfs3Res::decode(procedure, b))
}

/// Decode `data` as the arguments of MOUNT procedure `procedure`.
pub fn decode_mount_args(procedure: u32, data: &[u8]) -> Result<(), Error> {
    check(data, |b| MountArgs::decode(procedure, b))
}

/// Decode `data` as the result of MOUNT procedure `procedure` of `version`.
pub fn decode_mount_res(version: u32, procedure: u32, data: &[u8]) -> Result<(), Error> {
    check(data, |b| MountRes::decode(version, procedure, b))
}

/// Decode `data` as the arguments of portmap procedure `procedure`.
pub fn decode_portmap_args(procedure: u32, data: &[u8]) -> Result<(), Error> {
    check(data, |b| PortmapArgs::decode(procedure, b))
}

/// Decode `data` as the result of portmap procedure `procedure`.
pub fn decode_portmap_res(procedure: u32, data: &[u8]) -> Result<(), Error> {
    check(data, |b| PortmapRes::decode(procedure, b))
}

/// Decode `data` as the arguments of NLM v4 procedure `procedure`.
pub fn decode_nlm_args(procedure: u32, data: &[u8]) -> Result<(), Error> {
    check(data, |b| crate::nlm::NlmArgs::decode(procedure, b))
}

/// Decode `data` as the arguments of NSM procedure `procedure`.
pub fn decode_nsm_args(procedure: u32, data: &[u8]) -> Result<(), Error> {
    check(data, |b| crate::nlm::NsmArgs::decode(procedure, b))
}

/// Exercise the XDR primitives that take lengths from the wire: bounded
/// opaque data (as a file handle, a name and a READ payload would be) and
/// counted arrays. Every decode must fail cleanly or consume only bytes
/// that exist.
pub fn decode_xdr_opaque(data: &[u8]) {
    let input = Bytes::copy_from_slice(data);
    for max in [0, 1, 64, 255, 1024, crate::nfs3::MAX_IO_SIZE] {
        let mut buf = input.clone();
        if let Ok(bytes) = decode_opaque(&mut buf, max) {
            assert!(bytes.len() <= max, "opaque longer than its maximum");
            assert_eq!(
                crate::opaque_len(bytes.len()),
                data.len() - buf.len(),
                "opaque consumed wrong length"
            );
        }
    }
    let _ = check(data, |b| Ok(Opaque::<64>::decode(b)?));
    let mut buf = input.clone();
    if let Ok(items) = decode_array::<u64>(&mut buf, 1 << 16) {
        assert_eq!(4 + items.len() * 8, data.len() - buf.len(), "array consumed wrong length");
    }
}

/// Decode `data` as an NFSv4 COMPOUND the way a server does: the head, then
/// one operation at a time, each checked to round-trip, until the count is
/// reached or an operation cannot be decoded (as a server stops there).
pub fn decode_nfs4_compound(data: &[u8]) -> Result<(), Error> {
    use crate::nfs4::{ArgOp, Compound4Head};
    let mut buf = Bytes::copy_from_slice(data);
    let head = Compound4Head::decode(&mut buf)?;
    for _ in 0..head.count.min(crate::nfs4::COMPOUND_OPS_MAX as u32) {
        let before = buf.clone();
        let op = match ArgOp::decode(&mut buf) {
            Ok(op) => op,
            Err(e) => return Err(Error::Xdr(e.error)),
        };
        let consumed = &before[..before.len() - buf.len()];
        check(consumed, |b| <ArgOp as Decode>::decode(b).map_err(Error::from))?;
        if matches!(op, ArgOp::NotDecoded(_) | ArgOp::Illegal(_)) {
            break;
        }
    }
    Ok(())
}

/// Decode `data` as a whole NFSv4 COMPOUND reply (as a client does).
pub fn decode_nfs4_res(data: &[u8]) -> Result<(), Error> {
    check(data, |b| Ok(crate::nfs4::Compound4Res::decode(b)?))
}

/// Decode `data` as a CB_COMPOUND call and as its reply.
pub fn decode_nfs4_callback(data: &[u8]) -> Result<(), Error> {
    let a = check(data, |b| Ok(crate::nfs4::CbCompound4Args::decode(b)?));
    let r = check(data, |b| Ok(crate::nfs4::CbCompound4Res::decode(b)?));
    let g = check(data, |b| Ok(crate::nfs4::CbGetattr4Args::decode(b)?));
    // A server reads CB_GETATTR's answer (it never encodes one): it must not panic.
    let _ = crate::nfs4::CbGetattrCompound4Res::decode(&mut Bytes::copy_from_slice(data));
    a.or(r).or(g)
}

/// Decode `data` as a `fattr4` and its values as typed attributes; those
/// that decode must encode back to the same bytes.
pub fn decode_nfs4_attrs(data: &[u8]) {
    use crate::nfs4::{Fattr4, FileAttrs};
    let mut buf = Bytes::copy_from_slice(data);
    if let Ok(f) = Fattr4::decode(&mut buf) {
        if let Ok(a) = FileAttrs::from_fattr(&f) {
            let again = a.to_fattr();
            assert_eq!(again.attr_vals.0, f.attr_vals.0, "attribute values changed across decode/encode");
            assert_eq!(again.attrmask.iter().collect::<Vec<_>>(), f.attrmask.iter().collect::<Vec<_>>());
        }
    }
}
