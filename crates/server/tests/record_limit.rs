//! A record header announcing 2 GiB must close the connection without the
//! server reserving the memory (STYLE.md: bound every wire length before
//! allocating).
//!
//! This binary holds one test only, and its own global allocator that
//! remembers the largest single allocation asked for: a server that reserved
//! the announced size would ask for 1–2 GiB at once, even if it never touched
//! the pages. (It used to watch `VmPeak`, which also grows by 64 MiB per new
//! malloc arena: with both CPUs busy the server starts more threads, and the
//! peak crossed the bound without any large allocation.)

mod common;

use common::*;
use eagernfs_proto::nfs3::{NFSPROC3_NULL, NFS_PROGRAM, NFS_V3};
use eagernfs_rpc::AcceptStat;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, recording the largest request since the last reset.
struct Watched;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Watched {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is passed through.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed through.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is passed through.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed through.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Watched = Watched;

/// Above any buffer the server uses for one call (records are capped at
/// 1 MiB + 64 KiB), far below the 1 GiB the smallest header here announces.
const LARGEST_ALLOWED: usize = 64 << 20;

#[test]
fn a_two_gib_record_header_closes_the_connection_without_allocating() {
    let s = TestServer::start(vec![spec(1, &["/mem"], "/mem *(rw,insecure)", memory())]);
    // Warm up: the connection machinery and worker threads exist before we measure.
    let mut warm = s.client();
    assert_eq!(warm.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &()).accept_stat(), AcceptStat::Success);

    LARGEST.store(0, Ordering::Relaxed);
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
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(
        largest < LARGEST_ALLOWED,
        "an allocation of {largest} bytes was asked for while 1-2 GiB record headers arrived"
    );

    // The server is healthy: the old connection and a new one both work.
    assert_eq!(warm.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &()).accept_stat(), AcceptStat::Success);
    let mut fresh = s.client();
    assert_eq!(fresh.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &()).accept_stat(), AcceptStat::Success);
    s.stop();
}
