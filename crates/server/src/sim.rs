//! The server without sockets or threads, for deterministic simulation tests: a call goes
//! straight through dispatch (RPC checks, duplicate reply cache, the programs, the backend) and
//! its reply comes back, in the caller's thread, at the caller's moment. A simulator owns the
//! network (drops, duplicates, delays, reordering) and the clock; `restart` is a server restart
//! that keeps the exports' backends (the disk) and loses everything else (the duplicate reply
//! cache, connections, locks).

use crate::call::{Connection, Peer, Transport};
use crate::dispatch::handle_record;
use crate::{ExportSpec, ServerConfig, ServerState};
use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::Arc;

/// A server driven call by call.
pub struct SimServer {
    state: Arc<ServerState>,
    config: ServerConfig,
}

impl SimServer {
    /// A server with `config` exporting `exports` (nothing is bound).
    pub fn new(config: ServerConfig, exports: Vec<ExportSpec>) -> SimServer {
        SimServer { state: Arc::new(ServerState::new(config.clone(), exports)), config }
    }

    /// Run one call (an RPC message, no record mark) from `from`; its reply message, if the
    /// server sends one.
    pub fn call(&self, from: SocketAddr, message: Bytes) -> Option<Bytes> {
        let conn = Connection::new(Peer { addr: from, local_port: 2049, transport: Transport::Tcp });
        let mut reply = handle_record(&self.state, &conn, message, None)?;
        // Drop the 4-byte record mark.
        Some(reply.take_bytes().slice(4..))
    }

    /// Restart with `exports` (normally over the same backends): the duplicate reply cache,
    /// statistics and locks start empty.
    pub fn restart(&mut self, exports: Vec<ExportSpec>) {
        self.state = Arc::new(ServerState::new(self.config.clone(), exports));
    }
}
