//! What the wire-level tools (`load`, `mountstorm`, `stream`) share: a tokio runtime for a
//! synchronous command, one loopback source address per virtual client, the open-files limit,
//! and failure causes as short stable strings that can be counted.

use crate::error::BenchError;
use eagernfs_client::NfsError;
use std::net::{IpAddr, Ipv4Addr};

/// Most virtual clients one run may play: 254 host numbers × 200 subnets of one 127.B/16,
/// far past Banks's 2000 and below the point where the addresses would run out.
pub const CLIENTS_MAX: u32 = 254 * 200;

/// A multi-threaded runtime for one command: the library's API stays synchronous (typed config
/// in, typed report out) like `bench write`, and the runtime lives only as long as the run.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, BenchError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bench-wire")
        .build()
        .map_err(|e| BenchError::io("start", "tokio runtime", e))
}

/// Source address of virtual client `index` in `127.second.x.y`: `x` counts up from
/// `third_first`, `y` runs 1..=254 (0 and 255 are avoided: some stacks treat them as network
/// and broadcast addresses even on loopback). Linux routes all of 127/8 to `lo`, so each
/// client looks like its own host to the server (its export rules, its per-client state)
/// without any setup.
pub fn source_addr(second: u8, third_first: u8, index: u32) -> Option<Ipv4Addr> {
    let third = u32::from(third_first) + index / 254;
    let fourth = 1 + index % 254;
    let third = u8::try_from(third).ok()?;
    Some(Ipv4Addr::new(127, second, third, fourth as u8))
}

/// How virtual clients pick their source addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceAddrs {
    /// Distinct 127.x.y.z addresses when the server is on loopback, the system's choice
    /// otherwise (a 127/8 source cannot reach another host).
    Auto,
    /// Always distinct 127.x.y.z addresses.
    Distinct,
    /// The system's choice for every client (one host, many connections).
    System,
}

impl SourceAddrs {
    /// Whether clients of a run against `server` bind distinct loopback addresses.
    pub fn distinct_for(self, server: IpAddr) -> bool {
        match self {
            SourceAddrs::Auto => server.is_loopback() && server.is_ipv4(),
            SourceAddrs::Distinct => true,
            SourceAddrs::System => false,
        }
    }
}

/// The open-files limit before and after [`raise_nofile_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NofileLimit {
    /// Soft limit when the tool started.
    pub soft_before: u64,
    /// Soft limit it runs with (the hard limit, if raising worked).
    pub soft: u64,
    /// Hard limit.
    pub hard: u64,
}

/// Raises the soft RLIMIT_NOFILE to the hard limit: every virtual client holds a socket (two
/// while it mounts), and the usual soft limit of 1024 would turn a 2000-client storm into a
/// test of `EMFILE`. Failing to raise it is not fatal; the report shows the limit used.
pub fn raise_nofile_limit() -> NofileLimit {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit struct to a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return NofileLimit { soft_before: 0, soft: 0, hard: 0 };
    }
    // rlim_t is u64 on Linux; `From` keeps this compiling where it is narrower.
    #[allow(clippy::useless_conversion)]
    let before = u64::from(rl.rlim_cur);
    #[allow(clippy::useless_conversion)]
    let hard = u64::from(rl.rlim_max);
    if rl.rlim_cur < rl.rlim_max {
        let raised = libc::rlimit { rlim_cur: rl.rlim_max, rlim_max: rl.rlim_max };
        // SAFETY: setrlimit reads one rlimit struct from a valid pointer.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return NofileLimit { soft_before: before, soft: hard, hard };
        }
    }
    NofileLimit { soft_before: before, soft: before, hard }
}

/// A failure as a short string to count failures by: `NFS3ERR_NOENT`, `timed out`, or the
/// client's sentence (`cannot connect to 127.0.0.1:2049: connection refused (...)`).
pub fn error_kind(e: &NfsError) -> String {
    match e {
        NfsError::Nfs(status) => format!("NFS3ERR_{}", format!("{status:?}").to_ascii_uppercase()),
        NfsError::TimedOut => "timed out".to_string(),
        NfsError::Rpc(m) => format!("RPC: {m}"),
        NfsError::Connection(m) => m.clone(),
        NfsError::BadReply(m) => format!("malformed reply: {m}"),
        NfsError::Mount(m) => m.clone(),
        NfsError::NoLocks => "NLM4_DENIED_NOLOCKS".to_string(),
        NfsError::Nfs4(status) => format!("NFS4ERR_{status:?}"),
    }
}

/// [`error_kind`] with this client's own address replaced by `<client>`, so that the same
/// refusal of 2000 clients counts as one cause, not 2000.
pub fn error_kind_for(e: &NfsError, source: Option<IpAddr>) -> String {
    let kind = error_kind(e);
    match source {
        Some(ip) => replace_address(&kind, &ip.to_string()),
        None => kind,
    }
}

/// Replaces whole occurrences of `address` (not a prefix of a longer one: 127.1.0.1 in
/// 127.1.0.12 stays).
fn replace_address(text: &str, address: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(address) {
        let after = &rest[at + address.len()..];
        let continues = after.chars().next().is_some_and(|c| c.is_ascii_digit());
        out.push_str(&rest[..at]);
        out.push_str(if continues { address } else { "<client>" });
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_addresses_skip_network_and_broadcast_numbers() {
        assert_eq!(source_addr(1, 0, 0), Some(Ipv4Addr::new(127, 1, 0, 1)));
        assert_eq!(source_addr(1, 0, 253), Some(Ipv4Addr::new(127, 1, 0, 254)));
        assert_eq!(source_addr(1, 0, 254), Some(Ipv4Addr::new(127, 1, 1, 1)));
        assert_eq!(source_addr(0, 1, 1999), Some(Ipv4Addr::new(127, 0, 8, 222)));
        assert_eq!(source_addr(0, 255, 254), None, "past 127.0.255.254");
        assert!(source_addr(1, 0, CLIENTS_MAX - 1).is_some());
    }

    #[test]
    fn error_kinds_group_by_cause() {
        assert_eq!(error_kind(&NfsError::Nfs(eagernfs_proto::nfs3::Nfsstat3::Noent)), "NFS3ERR_NOENT");
        assert_eq!(error_kind(&NfsError::TimedOut), "timed out");
        let e =
            NfsError::Mount("export /x not allowed for this client address 127.1.0.1 (MNT3ERR_ACCES)".into());
        let ip: IpAddr = "127.1.0.1".parse().unwrap();
        assert_eq!(
            error_kind_for(&e, Some(ip)),
            "export /x not allowed for this client address <client> (MNT3ERR_ACCES)"
        );
        assert_eq!(replace_address("a 127.1.0.12 b", "127.1.0.1"), "a 127.1.0.12 b");
    }
}
