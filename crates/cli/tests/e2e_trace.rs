//! `serve --trace-io FILE`: every READ and WRITE, in the order the backend ran them, with the
//! file's fileid (its inode number on disk). libnfs's nfs-cp sends one call at a time, so the
//! trace of an upload must be the file's offsets in order, covering it exactly.

mod common;

use common::*;
use std::os::unix::fs::MetadataExt;

#[test]
fn trace_records_backend_order_of_reads_and_writes() {
    if ganesha_override() && skip("trace_records_backend_order", "eagernfs-only feature") {
        return;
    }
    let export = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let trace = scratch.path().join("io.trace");
    let trace_arg = trace.to_str().unwrap().to_string();
    let mut server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash", "--trace-io", &trace_arg]);
    let size = 5 * (1 << 20) + 123;
    let src = scratch.path().join("src");
    std::fs::write(&src, pattern_bytes(3, 0, size)).unwrap();
    nfs_cp(&src, server.url("/f")).assert_success("upload");
    let back = scratch.path().join("back");
    nfs_cp(server.url("/f"), &back).assert_success("download");
    let ino = std::fs::metadata(server.dir().join("f")).unwrap().ino();
    server.stop();

    let text = std::fs::read_to_string(&trace).expect("trace written at shutdown");
    let mut writes = Vec::new();
    let mut reads = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 4, "bad trace line {line:?}");
        let (fileid, offset, count): (u64, u64, u64) =
            (f[1].parse().unwrap(), f[2].parse().unwrap(), f[3].parse().unwrap());
        assert_eq!(fileid, ino, "trace names another file: {line}");
        match f[0] {
            "W" => writes.push((offset, count)),
            "R" => reads.push((offset, count)),
            other => panic!("unknown kind {other}"),
        }
    }
    // Writes come in order and tile the file exactly.
    let mut next = 0;
    for (offset, count) in &writes {
        assert_eq!(*offset, next, "write out of order or with a gap: {writes:?}");
        next += count;
    }
    assert_eq!(next, size as u64);
    assert!(!reads.is_empty() && reads.windows(2).all(|w| w[0].0 < w[1].0), "reads not in order: {reads:?}");
}
