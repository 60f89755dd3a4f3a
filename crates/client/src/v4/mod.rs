//! The NFSv4.1 and NFSv4.2 client (RFC 8881, RFC 7862): sessions with
//! exactly-once semantics, the back channel, recovery after a lost session
//! or a server restart, opens and locks, and [`Nfs4Client`], which
//! implements [`crate::NfsOps`] so everything written for NFSv3 runs over
//! it. The wire types are `eagernfs_proto::nfs4`'s; docs/nfs4-client.md
//! lists the COMPOUND each call sends.
//!
//! # Layout (each file uses only those above it in this list)
//! - `status`: NFSv4 statuses as the client's errors.
//! - `attrs`: `fattr4` ⇄ `fattr3`/`sattr3`, owners ⇄ ids, attribute masks.
//! - `compound`: encoding a COMPOUND (WRITE data not copied), reading its results.
//! - `slots`: a session's slot table, sans-IO.
//! - `state`: the opens, locks and delegations held, sans-IO.
//! - `callback`: the back channel's calls, answered ([`CallbackHooks`]).
//! - `session`: client id, session, SEQUENCE, retries, recovery and
//!   reclaim, the lease.
//! - `client`: [`Nfs4Client`].

mod attrs;
mod callback;
mod client;
mod compound;
mod session;
mod slots;
mod state;
mod status;

pub use attrs::{IdMapper, NOBODY};
pub use callback::{CallbackHooks, CallbackStats};
pub(crate) use client::minors_for;
pub use client::{CreateHow, LockConflict, Nfs4Client, OpenFile, ReadWhole, WriteClose};
pub use session::{CompoundKind, SessionStats};
pub use state::{GrantedAttrs, OpenAccess};
