//! File contents survive a round trip through the server with the stock libnfs tools:
//! nfs-cp up, nfs-cp down and nfs-cat, for sizes around the page/block boundaries and beyond
//! one READ/WRITE transfer. The same scenario runs against nfs-ganesha to prove the harness
//! itself (URLs, tools, comparisons) is right.

mod common;

use common::*;
use std::fs;
use std::path::Path;

/// Sizes that straddle 4 KiB pages, a 64 KiB transfer, 1 MiB transfers, and a file large
/// enough to need many pipelined requests.
const SIZES: &[usize] = &[0, 1, 4095, 4096, 65537, (1 << 20) + 3, 64 << 20];

/// Copies every size up and down through `server` and compares with the original and with the
/// bytes on the server's disk.
fn round_trip_all_sizes(server: &Server, scratch: &Path) {
    for &size in SIZES {
        let data = pattern_bytes(size as u64, 0, size);
        let local = scratch.join(format!("local-{size}"));
        fs::write(&local, &data).unwrap();

        // Up: local -> server, then check what landed on disk.
        let up_name = format!("up-{size}");
        nfs_cp(&local, server.url(&format!("/{up_name}"))).assert_success(&format!("nfs-cp up {size}"));
        let on_disk = fs::read(server.dir().join(&up_name)).unwrap();
        assert_eq!(on_disk.len(), size, "uploaded size on disk for {size}");
        assert!(on_disk == data, "uploaded bytes on disk differ for size {size}");

        // Down: a file created directly on disk, copied and catted through the server.
        let down_name = format!("down-{size}");
        fs::write(server.dir().join(&down_name), &data).unwrap();
        let fetched = scratch.join(format!("fetched-{size}"));
        nfs_cp(server.url(&format!("/{down_name}")), &fetched).assert_success(&format!("nfs-cp down {size}"));
        let got = fs::read(&fetched).unwrap();
        assert_eq!(got.len(), size, "downloaded size for {size}");
        assert!(got == data, "downloaded bytes differ for size {size}");

        let cat = nfs_cat(&server.url(&format!("/{down_name}")));
        cat.assert_success(&format!("nfs-cat {size}"));
        assert_eq!(cat.stdout.len(), size, "nfs-cat length for {size}");
        assert!(cat.stdout == data, "nfs-cat bytes differ for size {size}");

        // The uploaded copy reads back identically too (exercises files the server created).
        let cat_up = nfs_cat(&server.url(&format!("/{up_name}")));
        cat_up.assert_success(&format!("nfs-cat up {size}"));
        assert!(cat_up.stdout == data, "nfs-cat of uploaded file differs for size {size}");

        for p in [&local, &fetched] {
            fs::remove_file(p).unwrap();
        }
    }
}

#[test]
fn file_sizes_round_trip_through_eagernfs() {
    let export = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    // Default options squash root to 65534, which must be able to create files here.
    chmod(export.path(), 0o777);
    let server = Server::eagernfs(export.path(), &[]);
    round_trip_all_sizes(&server, scratch.path());
}

/// The reference run: if this fails, the harness or the machine is broken, not eagernfs.
#[test]
fn file_sizes_round_trip_through_ganesha_reference() {
    let export = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let Some(server) = Server::ganesha(export.path()) else { return };
    round_trip_all_sizes(&server, scratch.path());
}
