//! ONC RPC version 2 (RFC 5531): message headers, authentication, record marking.
//!
//! Sans-IO: this crate turns bytes into typed messages and back. It owns no
//! sockets, no tasks and no clock; the server and the client drive it.
//!
//! # Layout
//! - [`message`]: call and reply headers ([`CallHeader`], [`ReplyHeader`]),
//!   accept/reject status, and helpers that encode each RPC-level error reply.
//! - [`auth`]: [`OpaqueAuth`] and the AUTH_SYS credential ([`AuthSys`]).
//! - [`record`]: record marking for stream transports (RFC 5531 §11):
//!   multi-fragment records reassembled under a size limit, replies framed
//!   in place.
//! - [`fuzzing`]: entry points for the fuzz targets.

pub mod auth;
pub mod message;
pub mod record;

pub use auth::{AuthFlavor, AuthStat, AuthSys, OpaqueAuth, STARTTLS};
pub use message::{AcceptStat, CallHeader, Message, RejectedReply, ReplyBody, ReplyHeader};
pub use record::{RecordDecoder, RecordError};

/// The only RPC protocol version this crate speaks.
pub const RPC_VERSION: u32 = 2;

/// Entry points for fuzz targets: decode arbitrary bytes, never panic.
pub mod fuzzing {
    use bytes::{Bytes, BytesMut};

    /// Decode an RPC message header (and an AUTH_SYS body if present).
    pub fn decode_message(data: &[u8]) {
        let mut b = Bytes::copy_from_slice(data);
        if let Ok(crate::Message::Call(c)) = crate::Message::decode(&mut b) {
            let _ = c.auth_sys();
        }
    }

    /// Feed bytes through the record-marking decoder in two chunks.
    pub fn record_marking(data: &[u8]) {
        let split = data.first().map(|b| *b as usize % (data.len() + 1)).unwrap_or(0);
        let mut dec = crate::RecordDecoder::new(1 << 16);
        let mut src = BytesMut::from(&data[..split]);
        while let Ok(Some(_)) = dec.decode(&mut src) {}
        src.extend_from_slice(&data[split..]);
        while let Ok(Some(_)) = dec.decode(&mut src) {}
    }
}
