//! Record marking for RPC over stream transports (RFC 5531 §11).
//!
//! Each record is one or more fragments; a fragment starts with a 4-byte
//! big-endian header whose top bit marks the last fragment and whose low 31
//! bits are the fragment length. The decoder reassembles records without
//! trusting the lengths: a record larger than the configured maximum is an
//! error *before* its bytes are buffered, and a single-fragment record (the
//! common case) is handed out as a slice of the receive buffer, not copied.

use bytes::{Buf, BufMut, Bytes, BytesMut};

const LAST_FRAGMENT: u32 = 0x8000_0000;
const LENGTH_MASK: u32 = 0x7fff_ffff;

/// A framing error: the connection cannot continue after one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The record (all fragments so far plus this one) is larger than allowed.
    #[error("RPC record of at least {len} bytes exceeds the {max}-byte limit")]
    TooLarge { len: usize, max: usize },
}

/// Reassembles records from a byte stream.
#[derive(Debug)]
pub struct RecordDecoder {
    /// Largest record accepted (sum of its fragments).
    max_record_bytes: usize,
    /// Fragments of the record in progress, already stripped of headers.
    partial: BytesMut,
    /// True while `partial` holds at least one non-last fragment.
    in_record: bool,
}

impl RecordDecoder {
    /// A decoder that refuses records over `max_record_bytes`.
    pub fn new(max_record_bytes: usize) -> Self {
        RecordDecoder { max_record_bytes, partial: BytesMut::new(), in_record: false }
    }

    /// Take the next complete record from the front of `src`, if it is all there.
    ///
    /// Returns `Ok(None)` when more bytes are needed: call again after
    /// appending them to `src`. Fragments that are complete are moved out of
    /// `src` even when the record is not, so `src` never holds more than one
    /// fragment of unparsed data.
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, RecordError> {
        loop {
            if src.len() < 4 {
                return Ok(None);
            }
            let header = u32::from_be_bytes([src[0], src[1], src[2], src[3]]);
            let frag_len = (header & LENGTH_MASK) as usize;
            let last = header & LAST_FRAGMENT != 0;
            let total = self.partial.len() + frag_len;
            if total > self.max_record_bytes {
                return Err(RecordError::TooLarge { len: total, max: self.max_record_bytes });
            }
            if src.len() < 4 + frag_len {
                // Make room once for the whole fragment (bounded by the check above).
                src.reserve(4 + frag_len - src.len());
                return Ok(None);
            }
            src.advance(4);
            let frag = src.split_to(frag_len);
            if last && !self.in_record {
                return Ok(Some(frag.freeze()));
            }
            self.partial.extend_from_slice(&frag);
            self.in_record = true;
            if last {
                self.in_record = false;
                return Ok(Some(std::mem::take(&mut self.partial).freeze()));
            }
        }
    }
}

/// Begin a single-fragment record in `buf`: reserves the header, returns its position.
pub fn begin_record(buf: &mut BytesMut) -> usize {
    let at = buf.len();
    buf.put_u32(0);
    at
}

/// Finish the record begun at `at`: writes the header for everything after it.
///
/// # Panics
/// If the record is over 2^31 - 1 bytes (our replies are bounded far below that).
pub fn finish_record(buf: &mut BytesMut, at: usize) {
    let len = buf.len() - at - 4;
    assert!(len <= LENGTH_MASK as usize, "RPC record too large to frame");
    buf[at..at + 4].copy_from_slice(&(LAST_FRAGMENT | len as u32).to_be_bytes());
}

/// Finish the record begun at `at` when `extra` more bytes of it follow
/// `buf` on the wire (sent from their own buffers, not copied in).
///
/// # Panics
/// As [`finish_record`].
pub fn finish_record_with_tail(buf: &mut BytesMut, at: usize, extra: usize) {
    let len = buf.len() - at - 4 + extra;
    assert!(len <= LENGTH_MASK as usize, "RPC record too large to frame");
    buf[at..at + 4].copy_from_slice(&(LAST_FRAGMENT | len as u32).to_be_bytes());
}

/// Frame `payload` as one record split into fragments of at most `max_fragment` bytes.
pub fn frame(payload: &[u8], max_fragment: usize) -> BytesMut {
    assert!(max_fragment > 0 && max_fragment <= LENGTH_MASK as usize);
    let mut out = BytesMut::with_capacity(payload.len() + 4 * (payload.len() / max_fragment + 1));
    let mut chunks = payload.chunks(max_fragment).peekable();
    if chunks.peek().is_none() {
        out.put_u32(LAST_FRAGMENT);
    }
    while let Some(c) = chunks.next() {
        let last = if chunks.peek().is_none() { LAST_FRAGMENT } else { 0 };
        out.put_u32(last | c.len() as u32);
        out.put_slice(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn single_fragment() {
        let mut d = RecordDecoder::new(100);
        let mut src = frame(b"hello", 100);
        assert_eq!(d.decode(&mut src).unwrap().unwrap(), Bytes::from_static(b"hello"));
        assert!(src.is_empty());
        assert_eq!(d.decode(&mut src).unwrap(), None);
    }

    #[test]
    fn multi_fragment_record_is_reassembled() {
        let mut d = RecordDecoder::new(100);
        let mut src = frame(b"hello world", 3);
        src.extend_from_slice(&frame(b"next", 100));
        assert_eq!(d.decode(&mut src).unwrap().unwrap(), Bytes::from_static(b"hello world"));
        assert_eq!(d.decode(&mut src).unwrap().unwrap(), Bytes::from_static(b"next"));
    }

    #[test]
    fn oversized_record_is_refused_before_buffering() {
        let mut d = RecordDecoder::new(10);
        let mut src = BytesMut::from(&[0x80u8, 0, 0, 11][..]);
        assert_eq!(d.decode(&mut src), Err(RecordError::TooLarge { len: 11, max: 10 }));
        // A forged 2 GiB header must not make us reserve 2 GiB.
        let mut d = RecordDecoder::new(1 << 20);
        let mut src = BytesMut::from(&[0xffu8, 0xff, 0xff, 0xff][..]);
        assert!(d.decode(&mut src).is_err());
        assert!(src.capacity() < 1 << 20);
    }

    #[test]
    fn fragments_sum_is_bounded() {
        let mut d = RecordDecoder::new(10);
        let mut src = frame(b"0123456789A", 4);
        assert!(matches!(d.decode(&mut src), Err(RecordError::TooLarge { .. })));
    }

    #[test]
    fn empty_record() {
        let mut d = RecordDecoder::new(10);
        let mut src = frame(b"", 4);
        assert_eq!(d.decode(&mut src).unwrap().unwrap(), Bytes::new());
    }

    #[test]
    fn begin_finish_frames_in_place() {
        let mut b = BytesMut::new();
        let at = begin_record(&mut b);
        b.put_slice(b"abc");
        finish_record(&mut b, at);
        assert_eq!(&b[..], &[0x80, 0, 0, 3, b'a', b'b', b'c']);
    }

    proptest! {
        #[test]
        fn any_split_and_fragmenting_gives_the_records_back(
            records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..50), 1..5),
            frag in 1usize..20,
            chunk in 1usize..30,
        ) {
            let mut stream = Vec::new();
            for r in &records {
                stream.extend_from_slice(&frame(r, frag));
            }
            let mut d = RecordDecoder::new(64);
            let mut src = BytesMut::new();
            let mut got = Vec::new();
            for c in stream.chunks(chunk) {
                src.extend_from_slice(c);
                while let Some(r) = d.decode(&mut src).unwrap() {
                    got.push(r.to_vec());
                }
            }
            prop_assert_eq!(got, records);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            crate::fuzzing::record_marking(&data);
        }
    }
}
