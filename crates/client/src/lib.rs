//! The eagernfs NFSv3 client.
//!
//! # Layout
//! - [`ops`]: the [`ops::NfsOps`] trait — every NFSv3 procedure as an async
//!   call with the caller's credentials. The wire client implements it; the
//!   caching layer and the tools are written against it.
//! - `core`: the sans-IO RPC state machine (xid table, slot table,
//!   retransmission timers with `now` passed in, hard/soft semantics).
//! - `driver`: the thin tokio driver around `core` (connections, nconnect,
//!   reconnect with backoff).
//! - `mount`: MOUNT through the server's port or the portmapper.
//! - `url`: `nfs://host[:port]/export/path?options` as libnfs writes them.
//! - [`cache`]: attribute cache, close-to-open, write-back with
//!   UNSTABLE+COMMIT, read-ahead, READDIRPLUS, persistent disk cache.

pub mod cache;
pub mod core;
pub mod driver;
pub mod lane;
pub mod lock;
pub mod mount;
pub mod nfs;
pub mod ops;
pub mod options;
mod tls;
pub mod url;

pub use driver::{RpcClient, TransportConfig, TransportEvent};
pub use lock::LockClient;
pub use nfs::NfsClient;
pub use ops::{Cred, NfsError, NfsOps, NfsResult};
pub use options::{LocalLock, LookupCache, MountOptions, OptionError, Xprtsec};
pub use url::{NfsUrl, UrlError};
