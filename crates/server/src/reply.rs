//! A reply record on its way to the socket: the encoded head and, for a
//! READ, the data straight from the backend.

use bytes::{Bytes, BytesMut};
use eagernfs_rpc::record::{begin_record, finish_record, finish_record_with_tail};
use eagernfs_rpc::ReplyHeader;
use eagernfs_xdr::Encode;

/// A reply record: a head (record mark, RPC header, results) and, for a
/// READ, the data straight from the backend (its buffer, or a pipe holding
/// the file's pages) and its XDR padding.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) head: BytesMut,
    pub(crate) tail: Option<Piece>,
    /// The answer to an RPC-with-TLS probe: once it is written, the
    /// connection goes to the TLS relay.
    pub(crate) starttls: bool,
}

/// One piece of a reply on its way to the socket; a READ's data is one
/// (the reply's tail).
#[derive(Debug)]
pub(crate) enum Piece {
    /// In a buffer.
    Bytes(Bytes),
    /// In a pipe, to be spliced into the socket (never copied by us).
    Spliced(eagernfs_vfs::spliced::Spliced),
}

impl Piece {
    pub(crate) fn len(&self) -> usize {
        match self {
            Piece::Bytes(b) => b.len(),
            Piece::Spliced(s) => s.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The data in a buffer (a spliced piece is read out of its pipe).
    fn into_bytes(self) -> Bytes {
        match self {
            Piece::Bytes(b) => b,
            Piece::Spliced(s) => {
                let want = s.len();
                match s.into_bytes() {
                    Ok(b) if b.len() == want => b,
                    // Reading our own pipe cannot fail short; if it ever
                    // did, zeros keep the record's length true.
                    r => {
                        tracing::error!("reading a READ's data back from its pipe failed: {r:?}");
                        let mut b = BytesMut::zeroed(want);
                        if let Ok(got) = r {
                            b[..got.len()].copy_from_slice(&got);
                        }
                        b.freeze()
                    }
                }
            }
        }
    }
}

/// XDR padding after opaque data.
static PAD: [u8; 3] = [0; 3];

impl From<BytesMut> for Reply {
    /// A finished record with no tail.
    fn from(head: BytesMut) -> Reply {
        Reply { head, tail: None, starttls: false }
    }
}

impl Reply {
    /// Frame the record begun at `at` in `head`, counting `tail` and its padding.
    pub(crate) fn new(mut head: BytesMut, at: usize, tail: Option<Piece>) -> Reply {
        let extra = tail.as_ref().map_or(0, |t| t.len() + pad_len(t.len()));
        finish_record_with_tail(&mut head, at, extra);
        Reply { head, tail, starttls: false }
    }

    /// The pieces to send, in order (each its own buffer or pipe: no copy).
    pub(crate) fn into_pieces(self) -> impl Iterator<Item = Piece> {
        let pad = self.tail.as_ref().map_or(0, |t| pad_len(t.len()));
        let pad = (pad > 0).then(|| Piece::Bytes(Bytes::from_static(&PAD[..pad])));
        let tail = self.tail.filter(|t| !t.is_empty());
        std::iter::once(Piece::Bytes(self.head.freeze())).chain(tail).chain(pad)
    }

    /// The whole record in one buffer (a datagram, the reply cache). A
    /// spliced tail is read into a buffer first.
    pub(crate) fn take_bytes(&mut self) -> Bytes {
        let tail = self.tail.take().map(Piece::into_bytes);
        let all = match &tail {
            None => Bytes::copy_from_slice(&self.head),
            Some(t) => {
                let mut all = BytesMut::with_capacity(self.head.len() + t.len() + 3);
                all.extend_from_slice(&self.head);
                all.extend_from_slice(t);
                all.extend_from_slice(&PAD[..pad_len(t.len())]);
                all.freeze()
            }
        };
        self.tail = tail.map(Piece::Bytes);
        all
    }
}

fn pad_len(n: usize) -> usize {
    (4 - n % 4) % 4
}

/// A reply with no results (every RPC-level error).
pub(crate) fn reply_header_only(h: ReplyHeader) -> BytesMut {
    let mut out = BytesMut::with_capacity(48);
    let at = begin_record(&mut out);
    h.encode(&mut out);
    finish_record(&mut out, at);
    out
}
