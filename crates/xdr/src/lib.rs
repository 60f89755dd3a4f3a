//! XDR (RFC 4506) encoding and decoding, sans-IO.
//!
//! This crate has no I/O, no clock and no allocation it cannot bound: every
//! length read from the wire is checked against a maximum *before* anything
//! is allocated or sliced, so a 4-byte header can never force a 2 GiB buffer.
//!
//! # Layout
//! - [`Encode`] / [`Decode`]: the one codec trait pair. Encoding cannot fail
//!   (it writes into a growable [`BufMut`]); decoding returns a typed [`Error`].
//! - Primitive impls for `u32`, `i32`, `u64`, `i64`, `bool`, `()` and `Option<T>`
//!   (XDR "optional-data", a bool discriminant).
//! - [`Opaque`]: variable-length opaque data with a compile-time maximum,
//!   backed by [`Bytes`] so payloads (READ/WRITE data) are sliced, not copied.
//! - Free functions ([`decode_opaque`], [`decode_fixed_opaque`], [`encode_opaque`],
//!   [`pad_len`]) for types that wrap opaque data with a run-time maximum.
//! - [`xdr_struct!`] and [`xdr_enum!`]: declarative macros that generate the
//!   codec for plain structs and C-like enums, so protocol crates stay
//!   one-line-per-field.
//!
//! Decoding reads from `&mut Bytes`: consumed bytes are split off the front,
//! which is cheap (reference counted) and lets opaque fields keep a slice of
//! the original receive buffer.

use bytes::Buf;
pub use bytes::{BufMut, Bytes};

/// Why a decode failed. Every variant is a property of the input, never a bug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input ended before the value did.
    #[error("truncated XDR: needed {needed} more bytes, {remaining} remain")]
    Truncated { needed: usize, remaining: usize },
    /// A length prefix exceeded the maximum allowed for that field.
    #[error("XDR length {len} exceeds maximum {max}")]
    TooLong { len: usize, max: usize },
    /// A boolean was neither 0 nor 1.
    #[error("invalid XDR bool {0}")]
    BadBool(u32),
    /// An enum or union discriminant had no meaning for its type.
    #[error("invalid value {value} for XDR enum {name}")]
    BadEnum { name: &'static str, value: u32 },
    /// Bytes remained after a complete value where none were expected.
    #[error("{0} trailing bytes after XDR value")]
    Trailing(usize),
}

/// Result of a decode.
pub type Result<T> = std::result::Result<T, Error>;

/// A value that can be written as XDR. Encoding cannot fail.
pub trait Encode {
    /// Append the XDR form of `self` to `buf`.
    fn encode<B: BufMut>(&self, buf: &mut B);
}

/// A value that can be read from XDR.
pub trait Decode: Sized {
    /// Read one value from the front of `buf`, consuming exactly its bytes.
    fn decode(buf: &mut Bytes) -> Result<Self>;
}

/// Decode a complete message: the value must use every byte of `buf`.
pub fn decode_exact<T: Decode>(mut buf: Bytes) -> Result<T> {
    let v = T::decode(&mut buf)?;
    if buf.has_remaining() {
        return Err(Error::Trailing(buf.remaining()));
    }
    Ok(v)
}

/// Encode a value into a fresh `Vec<u8>` (convenient for tests and small messages).
pub fn to_vec<T: Encode + ?Sized>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode(&mut out);
    out
}

/// Number of zero bytes that pad `len` bytes of opaque data to a 4-byte boundary.
#[inline]
pub const fn pad_len(len: usize) -> usize {
    (4 - (len & 3)) & 3
}

#[inline]
fn need(buf: &Bytes, n: usize) -> Result<()> {
    if buf.remaining() < n {
        Err(Error::Truncated { needed: n, remaining: buf.remaining() })
    } else {
        Ok(())
    }
}

impl Encode for u32 {
    #[inline]
    fn encode<B: BufMut>(&self, buf: &mut B) {
        buf.put_u32(*self)
    }
}
impl Decode for u32 {
    #[inline]
    fn decode(buf: &mut Bytes) -> Result<Self> {
        need(buf, 4)?;
        Ok(buf.get_u32())
    }
}
impl Encode for i32 {
    #[inline]
    fn encode<B: BufMut>(&self, buf: &mut B) {
        buf.put_i32(*self)
    }
}
impl Decode for i32 {
    #[inline]
    fn decode(buf: &mut Bytes) -> Result<Self> {
        need(buf, 4)?;
        Ok(buf.get_i32())
    }
}
impl Encode for u64 {
    #[inline]
    fn encode<B: BufMut>(&self, buf: &mut B) {
        buf.put_u64(*self)
    }
}
impl Decode for u64 {
    #[inline]
    fn decode(buf: &mut Bytes) -> Result<Self> {
        need(buf, 8)?;
        Ok(buf.get_u64())
    }
}
impl Encode for i64 {
    #[inline]
    fn encode<B: BufMut>(&self, buf: &mut B) {
        buf.put_i64(*self)
    }
}
impl Decode for i64 {
    #[inline]
    fn decode(buf: &mut Bytes) -> Result<Self> {
        need(buf, 8)?;
        Ok(buf.get_i64())
    }
}
impl Encode for bool {
    #[inline]
    fn encode<B: BufMut>(&self, buf: &mut B) {
        buf.put_u32(*self as u32)
    }
}
impl Decode for bool {
    #[inline]
    fn decode(buf: &mut Bytes) -> Result<Self> {
        match u32::decode(buf)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(Error::BadBool(v)),
        }
    }
}
impl Encode for () {
    #[inline]
    fn encode<B: BufMut>(&self, _buf: &mut B) {}
}
impl Decode for () {
    #[inline]
    fn decode(_buf: &mut Bytes) -> Result<Self> {
        Ok(())
    }
}

/// XDR optional-data (`T *x`): a bool, then the value if true.
impl<T: Encode> Encode for Option<T> {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            None => buf.put_u32(0),
            Some(v) => {
                buf.put_u32(1);
                v.encode(buf)
            }
        }
    }
}
impl<T: Decode> Decode for Option<T> {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        if bool::decode(buf)? {
            Ok(Some(T::decode(buf)?))
        } else {
            Ok(None)
        }
    }
}

impl<T: Encode> Encode for Box<T> {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        (**self).encode(buf)
    }
}
impl<T: Decode> Decode for Box<T> {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(Box::new(T::decode(buf)?))
    }
}

/// Read variable-length opaque data of at most `max` bytes, without copying.
pub fn decode_opaque(buf: &mut Bytes, max: usize) -> Result<Bytes> {
    let len = u32::decode(buf)? as usize;
    if len > max {
        return Err(Error::TooLong { len, max });
    }
    decode_fixed_opaque(buf, len)
}

/// Read fixed-length opaque data of exactly `len` bytes (plus padding), without copying.
pub fn decode_fixed_opaque(buf: &mut Bytes, len: usize) -> Result<Bytes> {
    let padded = len + pad_len(len);
    need(buf, padded)?;
    let data = buf.split_to(len);
    buf.advance(pad_len(len));
    Ok(data)
}

/// Write variable-length opaque data (length, bytes, zero padding).
pub fn encode_opaque<B: BufMut>(buf: &mut B, data: &[u8]) {
    buf.put_u32(data.len() as u32);
    encode_fixed_opaque(buf, data);
}

/// Write fixed-length opaque data (bytes, zero padding).
pub fn encode_fixed_opaque<B: BufMut>(buf: &mut B, data: &[u8]) {
    buf.put_slice(data);
    buf.put_bytes(0, pad_len(data.len()));
}

/// Decode a counted array (`T x<MAX>`) of at most `max` elements.
///
/// The element count is bounded first, and the vector is preallocated only
/// up to what the remaining input could possibly hold (each element is at
/// least 4 bytes), so a forged count cannot force a large allocation.
pub fn decode_array<T: Decode>(buf: &mut Bytes, max: usize) -> Result<Vec<T>> {
    let n = u32::decode(buf)? as usize;
    if n > max {
        return Err(Error::TooLong { len: n, max });
    }
    let mut v = Vec::with_capacity(n.min(buf.remaining() / 4));
    for _ in 0..n {
        v.push(T::decode(buf)?);
    }
    Ok(v)
}

/// Encode a counted array.
pub fn encode_array<B: BufMut, T: Encode>(buf: &mut B, items: &[T]) {
    buf.put_u32(items.len() as u32);
    for i in items {
        i.encode(buf);
    }
}

/// Variable-length opaque data of at most `MAX` bytes, shared not copied.
///
/// `Opaque<64>` is an NFSv3 file handle's bytes, `Opaque<255>` a file name.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Opaque<const MAX: usize>(pub Bytes);

impl<const MAX: usize> Opaque<MAX> {
    /// The maximum length this type accepts from the wire.
    pub const MAX: usize = MAX;

    /// Wrap bytes, refusing more than `MAX` of them.
    pub fn new(b: impl Into<Bytes>) -> std::result::Result<Self, Error> {
        let b = b.into();
        if b.len() > MAX {
            return Err(Error::TooLong { len: b.len(), max: MAX });
        }
        Ok(Opaque(b))
    }

    /// Wrap a static byte string (panics if too long: for constants only).
    pub fn from_static(b: &'static [u8]) -> Self {
        assert!(b.len() <= MAX, "static opaque longer than its maximum");
        Opaque(Bytes::from_static(b))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<const MAX: usize> std::fmt::Debug for Opaque<MAX> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match std::str::from_utf8(&self.0) {
            Ok(s) if self.0.len() <= 64 => write!(f, "{s:?}"),
            _ if self.0.len() <= 64 => {
                for b in self.0.iter() {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
            _ => write!(f, "<{} bytes>", self.0.len()),
        }
    }
}

impl<const MAX: usize> std::ops::Deref for Opaque<MAX> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl<const MAX: usize> Encode for Opaque<MAX> {
    #[inline]
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_opaque(buf, &self.0)
    }
}
impl<const MAX: usize> Decode for Opaque<MAX> {
    #[inline]
    fn decode(buf: &mut Bytes) -> Result<Self> {
        decode_opaque(buf, MAX).map(Opaque)
    }
}

/// Fixed-length opaque data of exactly `N` bytes (`opaque x[N]`), e.g. a write verifier.
impl<const N: usize> Encode for [u8; N] {
    #[inline]
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_fixed_opaque(buf, self)
    }
}
impl<const N: usize> Decode for [u8; N] {
    #[inline]
    fn decode(buf: &mut Bytes) -> Result<Self> {
        let b = decode_fixed_opaque(buf, N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&b);
        Ok(out)
    }
}

/// Generate [`Encode`] and [`Decode`] for a struct whose fields are encoded in order.
///
/// ```
/// eagernfs_xdr::xdr_struct! {
///     /// A point.
///     #[derive(Debug, Clone, PartialEq)]
///     pub struct Point { pub x: u32, pub y: u32 }
/// }
/// let p = Point { x: 1, y: 2 };
/// let b = eagernfs_xdr::to_vec(&p);
/// assert_eq!(b, [0, 0, 0, 1, 0, 0, 0, 2]);
/// ```
#[macro_export]
macro_rules! xdr_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $ty ),*
        }
        impl $crate::Encode for $name {
            #[inline]
            fn encode<B: $crate::BufMut>(&self, buf: &mut B) {
                $( $crate::Encode::encode(&self.$field, buf); )*
                let _ = buf;
            }
        }
        impl $crate::Decode for $name {
            #[inline]
            fn decode(buf: &mut $crate::Bytes) -> $crate::Result<Self> {
                let _ = &buf;
                Ok(Self { $( $field: <$ty as $crate::Decode>::decode(buf)? ),* })
            }
        }
    };
}

/// Generate a C-like enum with explicit `u32` discriminants and its codec.
/// Decoding an unknown value is [`Error::BadEnum`].
#[macro_export]
macro_rules! xdr_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:expr ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(u32)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant = $value ),*
        }
        impl $name {
            /// Map a wire value to the enum, if it names a variant.
            $vis fn from_u32(v: u32) -> Option<Self> {
                match v {
                    $( x if x == $value => Some(Self::$variant), )*
                    _ => None,
                }
            }
        }
        impl $crate::Encode for $name {
            #[inline]
            fn encode<B: $crate::BufMut>(&self, buf: &mut B) {
                $crate::BufMut::put_u32(buf, *self as u32)
            }
        }
        impl $crate::Decode for $name {
            #[inline]
            fn decode(buf: &mut $crate::Bytes) -> $crate::Result<Self> {
                let v = <u32 as $crate::Decode>::decode(buf)?;
                Self::from_u32(v).ok_or($crate::Error::BadEnum { name: stringify!($name), value: v })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    xdr_struct! {
        #[derive(Debug, Clone, PartialEq)]
        struct Sample {
            a: u32,
            b: i64,
            c: bool,
            d: Option<u64>,
            e: Opaque<16>,
            f: [u8; 8],
        }
    }

    xdr_enum! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Colour { Red = 1, Green = 2 }
    }

    #[test]
    fn opaque_is_padded_and_bounded() {
        let o = Opaque::<16>::new(&b"abcde"[..]).unwrap();
        let v = to_vec(&o);
        assert_eq!(v, [0, 0, 0, 5, b'a', b'b', b'c', b'd', b'e', 0, 0, 0]);
        let mut long = Vec::new();
        encode_opaque(&mut long, &[7u8; 17]);
        assert_eq!(decode_exact::<Opaque<16>>(Bytes::from(long)), Err(Error::TooLong { len: 17, max: 16 }));
    }

    #[test]
    fn huge_length_prefix_is_rejected_before_allocating() {
        let buf = Bytes::from_static(&[0xff, 0xff, 0xff, 0xfc, 1, 2, 3, 4]);
        assert!(matches!(decode_exact::<Opaque<1024>>(buf.clone()), Err(Error::TooLong { .. })));
        assert!(matches!(decode_array::<u32>(&mut buf.clone(), usize::MAX), Err(Error::Truncated { .. })));
        assert!(matches!(decode_array::<u32>(&mut buf.clone(), 16), Err(Error::TooLong { .. })));
    }

    #[test]
    fn bad_bool_and_enum_are_errors() {
        assert_eq!(decode_exact::<bool>(Bytes::from_static(&[0, 0, 0, 2])), Err(Error::BadBool(2)));
        assert_eq!(
            decode_exact::<Colour>(Bytes::from_static(&[0, 0, 0, 3])),
            Err(Error::BadEnum { name: "Colour", value: 3 })
        );
        assert_eq!(decode_exact::<Colour>(Bytes::from_static(&[0, 0, 0, 2])), Ok(Colour::Green));
    }

    #[test]
    fn trailing_bytes_are_reported() {
        assert_eq!(decode_exact::<u32>(Bytes::from_static(&[0, 0, 0, 1, 9])), Err(Error::Trailing(1)));
    }

    fn sample() -> impl Strategy<Value = Sample> {
        (
            any::<u32>(),
            any::<i64>(),
            any::<bool>(),
            any::<Option<u64>>(),
            proptest::collection::vec(any::<u8>(), 0..=16),
            any::<[u8; 8]>(),
        )
            .prop_map(|(a, b, c, d, e, f)| Sample { a, b, c, d, e: Opaque(Bytes::from(e)), f })
    }

    proptest! {
        #[test]
        fn round_trip(s in sample()) {
            let bytes = to_vec(&s);
            prop_assert_eq!(bytes.len() % 4, 0);
            prop_assert_eq!(decode_exact::<Sample>(Bytes::from(bytes)).unwrap(), s);
        }

        #[test]
        fn decode_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_exact::<Sample>(Bytes::from(data));
        }

        #[test]
        fn every_truncation_is_an_error(s in sample(), cut in 0usize..64) {
            let bytes = to_vec(&s);
            let cut = cut % bytes.len();
            prop_assert!(decode_exact::<Sample>(Bytes::copy_from_slice(&bytes[..cut])).is_err());
        }
    }
}
