//! A record header announcing 2 GiB must close the connection without the
//! server reserving the memory (STYLE.md: bound every wire length before
//! allocating).
//!
//! This binary holds one test only: it watches the process's peak virtual
//! memory (`VmPeak`), which other tests running in parallel would disturb.
//! A server that reserved the announced size would raise the peak by 2 GiB
//! even if it never touched the pages.

mod common;

use common::*;
use eagernfs_proto::nfs3::{NFSPROC3_NULL, NFS_PROGRAM, NFS_V3};
use eagernfs_rpc::AcceptStat;

/// Peak virtual memory of this process, in KiB.
fn vm_peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmPeak:")).expect("VmPeak line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_two_gib_record_header_closes_the_connection_without_allocating() {
    let s = TestServer::start(vec![spec(1, &["/mem"], "/mem *(rw,insecure)", memory())]);
    // Warm up: the connection machinery and worker threads exist before we measure.
    let mut warm = s.client();
    assert_eq!(warm.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &()).accept_stat(), AcceptStat::Success);

    let before_kib = vm_peak_kib();
    for header in [0xffff_ffffu32, 0x8000_0000 | (1 << 30), 0x7fff_ffff] {
        let mut c = s.client();
        // A valid call first, so the connection is known to work, then the
        // header (last-fragment bit set or not) and a few bytes of "payload".
        assert_eq!(c.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &()).accept_stat(), AcceptStat::Success);
        let mut bytes = header.to_be_bytes().to_vec();
        bytes.extend_from_slice(&[0u8; 64]);
        let _ = c.try_send_raw(&bytes);
        assert!(c.closed(), "header {header:#x}: the server must close the connection");
    }
    let grown_kib = vm_peak_kib().saturating_sub(before_kib);
    assert!(grown_kib < 256 * 1024, "peak virtual memory grew by {grown_kib} KiB after 2 GiB record headers");

    // The server is healthy: the old connection and a new one both work.
    assert_eq!(warm.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &()).accept_stat(), AcceptStat::Success);
    let mut fresh = s.client();
    assert_eq!(fresh.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &()).accept_stat(), AcceptStat::Success);
    s.stop();
}
