//! FUSE mount of an NFSv3 export over eagernfs's caching client.
//!
//! `eagernfs mount nfs://host/export MOUNTPOINT -o opts` lands here: the
//! options are split between NFS ([`eagernfs_client::MountOptions`], nfs(5)
//! names) and FUSE ([`FuseOptions`]), the export is MOUNTed, a
//! [`CachedFs`](eagernfs_client::cache::CachedFs) is set up over the wire
//! client, and [`NfsFuse`] answers the kernel's requests by calling it.
//!
//! Requests run concurrently: each is a task on a tokio runtime that
//! replies when done, with no lock around requests; see [`fs`].
//!
//! # Layout
//! - [`options`]: `-o` parsing, NFS first, FUSE's own names second.
//! - [`mount`]: [`MountSpec`] → [`Mount`] (ready when returned) → served
//!   until unmounted; [`unmount()`](mount::unmount) via fusermount3.
//! - [`fs`]: [`NfsFuse`], the `fuser::Filesystem` implementation.
//! - [`attr`]: NFS ↔ FUSE attribute conversions.
//! - [`creds`]: callers' supplementary groups from /proc, briefly cached.
//! - `callbacks`: NFSv4 callbacks answered from the cache (a recall writes
//!   back first, CB_GETATTR, CB_NOTIFY_LOCK).
//! - `locks4`: byte-range locks over NFSv4 (LOCK, LOCKU, LOCKT).

pub mod attr;
mod callbacks;
pub mod creds;
pub mod fs;
mod inline;
mod locks4;
pub mod mount;
pub mod options;

pub use fs::NfsFuse;
/// How the mount runs a request from its FUSE reader thread, for benchmarks that measure
/// the mount's own call path (`crates/bench/examples/rtt.rs`).
pub use inline::run as run_inline;
pub use mount::{unmount, Mount, MountError, MountSpec, UnmountError};
pub use options::{apply_mount_options, FuseOptions};
