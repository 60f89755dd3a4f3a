//! The eagernfs client: NFSv3, NFSv4.1 and NFSv4.2.
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
//! - [`v4`]: NFSv4.1/4.2 — sessions, the back channel, recovery, opens
//!   and locks; [`v4::Nfs4Client`] implements [`ops::NfsOps`] too.
//! - [`any`]: [`AnyClient`], the version `vers=` asks for or the server
//!   speaks (4.2, 4.1, then 3).
//! - [`cache`]: attribute cache, close-to-open, write-back with
//!   UNSTABLE+COMMIT, read-ahead, READDIRPLUS, persistent disk cache.

pub mod any;
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
pub mod v4;

pub use any::AnyClient;
pub use driver::{RpcClient, TransportConfig, TransportEvent};
pub use lock::LockClient;
pub use nfs::NfsClient;
pub use ops::{
    CreatedWritten, Cred, FileOpened, FileRead, FileToRead, NameToRemove, NfsError, NfsOps, NfsResult,
    OpenAccess, OpenWant, WriteClosed,
};
pub use options::{LocalLock, LookupCache, MountOptions, NfsVersion, OptionError, Xprtsec};
pub use url::{NfsUrl, UrlError};
pub use v4::Nfs4Client;
