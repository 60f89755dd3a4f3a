//! How the server behaves ([`ServerConfig`]): every limit and choice the operator makes, which
//! the binary builds from flags and files. Below everything that runs.

use crate::drc::drc_entries_for_memory;
use crate::svc::SvcConfig;
use crate::{cluster, nfs4, nlm};
use std::sync::Arc;

/// Physical memory, for defaults sized from it (0 if unknown).
pub fn physical_memory_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    if pages <= 0 || page <= 0 {
        return 0;
    }
    pages as u64 * page as u64
}

/// Limits and behaviour of the server. Every field is a bound or a choice the
/// operator makes; the binary builds this from flags and files.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Most simultaneous TCP connections (a mount storm of 2000 clients fits).
    pub max_connections: usize,
    /// Most simultaneous TCP connections from one client address: one host
    /// (or a flood from it) cannot take every connection. Further ones are
    /// closed at once (logged once per host, counted in stats).
    pub max_connections_per_host: usize,
    /// A record (one call) that has begun arriving must be whole within
    /// this, or the connection is closed: a sender trickling bytes
    /// (slowloris) cannot hold a connection and its buffer for ever.
    pub record_timeout: std::time::Duration,
    /// A connection with no call for this long and nothing in flight is
    /// closed (knfsd uses 6 minutes); clients reconnect when they need to.
    pub idle_timeout: std::time::Duration,
    /// Most calls of one connection executing at once; further records wait
    /// unread, which pushes back on the client through TCP.
    pub max_requests_per_connection: usize,
    /// Largest RPC record accepted; must exceed the largest WRITE (wtmax) plus headers.
    pub max_record_bytes: usize,
    /// Largest READ payload returned and advertised (FSINFO rtmax).
    pub read_max_bytes: u32,
    /// Largest WRITE payload accepted and advertised (FSINFO wtmax).
    pub write_max_bytes: u32,
    /// Replies of non-idempotent calls remembered for retransmissions
    /// (RENAME, REMOVE, CREATE, …). Should cover the calls of a client's
    /// retry time (about 1.1 s over UDP, a minute over TCP, where losses
    /// are rare) at the highest call rate. Default: from the machine's
    /// memory ([`drc_entries_for_memory`]).
    pub drc_entries: usize,
    /// Record the offsets of READ/WRITE in backend order, keeping at most
    /// this many (`None`: off). See [`crate::Server::io_trace`].
    pub io_trace_max_events: Option<usize>,
    /// Service threads: pools and how many.
    pub svc: SvcConfig,
    /// Also serve NFS, MOUNT and portmap over UDP on every listening
    /// address (same port). Off by default, as on Linux since 5.6: UDP
    /// lets a spoofed source address get replies, and large transfers over
    /// it lose whole calls to one dropped fragment. Transfers are capped at
    /// 32 KiB over UDP; the duplicate reply cache covers retransmissions.
    pub udp: bool,
    /// Byte-range locks (NLM v4 and NSM on the same port).
    pub locks: nlm::LockConfig,
    /// NFSv4.1 and NFSv4.2 (version 4 of the NFS program, same port).
    pub nfs4: nfs4::Nfs4Config,
    /// RPC-with-TLS (RFC 9289): clients that ask get TLS 1.3 with this
    /// configuration ([`crate::tls::server_config`]). `None`: probes are answered
    /// without STARTTLS, and exports that need TLS are unreachable.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// For which clients large READs over TCP are answered by splicing the
    /// file's pages into the socket (no copy through user space) when the
    /// backend can ([`eagernfs_vfs::Backend::read_spliced`]).
    pub splice_reads: SpliceReads,
    /// A head of a cluster answers only while its lease holds (see
    /// [`cluster::Lease`]): NFSv3 calls get NFS3ERR_JUKEBOX, others no reply.
    pub lease: Option<Arc<cluster::Lease>>,
}

/// Which clients get READ data spliced from the page cache into the socket
/// rather than copied through a buffer (READs of 32 KiB and more, over TCP).
///
/// Splicing saves the server both of its copies, and to a client on another
/// host the pages go to the network card untouched. A client on this host (a
/// loopback address: a mount beside its server) copies the bytes out of the
/// socket on this machine's CPUs whichever way they were sent; spliced, its
/// copy is the first touch of pages fresh from the disk, a cost that copying
/// leaves with the server. Measured through `eagernfs mount` on a 2-CPU VM,
/// mount on CPU 0, server on CPU 1 (scripts/bench-dd-read.sh): copied READs
/// read 1 GiB faster than spliced ones cold and warm, and a cold 1 GiB stream
/// cost the client 0.15-0.18 s of CPU copied against 0.65-1.29 s spliced.
/// So by default only clients on other hosts get spliced replies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SpliceReads {
    /// Copy every READ through a buffer.
    Never,
    /// Splice for clients on other hosts; copy for loopback clients.
    #[default]
    Remote,
    /// Splice for every client, also on this host.
    Always,
}

impl SpliceReads {
    /// Whether a READ from `peer` may be spliced.
    pub fn for_peer(self, peer: std::net::IpAddr) -> bool {
        match self {
            SpliceReads::Never => false,
            SpliceReads::Always => true,
            SpliceReads::Remote => !peer.to_canonical().is_loopback(),
        }
    }
}

impl std::str::FromStr for SpliceReads {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "never" => Ok(SpliceReads::Never),
            "remote" => Ok(SpliceReads::Remote),
            "always" => Ok(SpliceReads::Always),
            _ => Err(format!("`{s}` is not a splice mode: use never, remote or always")),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_connections: 4096,
            max_connections_per_host: 1024,
            record_timeout: std::time::Duration::from_secs(30),
            idle_timeout: std::time::Duration::from_secs(360),
            max_requests_per_connection: 128,
            max_record_bytes: (1 << 20) + 64 * 1024,
            read_max_bytes: 1 << 20,
            write_max_bytes: 1 << 20,
            drc_entries: drc_entries_for_memory(physical_memory_bytes()),
            io_trace_max_events: None,
            svc: SvcConfig::default(),
            udp: false,
            locks: nlm::LockConfig::default(),
            nfs4: nfs4::Nfs4Config::default(),
            tls: None,
            splice_reads: SpliceReads::default(),
            lease: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SpliceReads;
    use std::net::IpAddr;

    #[test]
    fn remote_splicing_copies_for_loopback_clients_only() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for local in ["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"] {
            assert!(!SpliceReads::Remote.for_peer(ip(local)), "{local} is this host");
            assert!(SpliceReads::Always.for_peer(ip(local)));
        }
        for remote in ["10.0.0.7", "192.168.1.2", "2001:db8::1", "::ffff:10.1.2.3"] {
            assert!(SpliceReads::Remote.for_peer(ip(remote)), "{remote} is another host");
            assert!(!SpliceReads::Never.for_peer(ip(remote)));
        }
        assert_eq!("remote".parse(), Ok(SpliceReads::Remote));
        assert_eq!(SpliceReads::default(), SpliceReads::Remote);
        let e = "sometimes".parse::<SpliceReads>().unwrap_err();
        assert!(e.contains("never, remote or always"), "{e}");
    }
}
