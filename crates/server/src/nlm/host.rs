//! The hosts that hold locks here ([`LockHost`]): what the lock manager records, the status
//! monitor notifies after a restart, and a cluster's heads hand over.

use std::net::IpAddr;

/// A host that holds (or held, before a restart) locks here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHost {
    /// Its `caller_name`.
    pub name: String,
    /// The address its calls came from.
    pub addr: IpAddr,
}
