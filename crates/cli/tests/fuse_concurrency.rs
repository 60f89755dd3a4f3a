//! The mount under concurrency and mmap (issue 22): a program that maps a
//! file must never fault because the mount's cached size lags, and a read
//! racing writes must return data, never an error.
//!
//! - `mapped_writes_and_truncates_keep_the_size_right`: `tests/clients/fsx.c`
//!   with mapped reads and writes mixed with write, truncate and read on
//!   one file; it checks every byte and, after every operation, the size
//!   `fstat` reports. A stale size shows as a size error or a SIGBUS.
//! - `reads_beside_writers_never_fail`: fio with four writers (O_DIRECT,
//!   buffered, splice and mmap) and six readers (four O_DIRECT, two
//!   buffered) on the same files; every job must finish without an error.

#[macro_use]
mod common;

use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Random seeds: from the environment to replay a failure, else new ones.
fn seeds(n: usize) -> Vec<u64> {
    if let Ok(s) = std::env::var("EAGERNFS_FSX_SEED") {
        return vec![s.parse().expect("EAGERNFS_FSX_SEED must be a number")];
    }
    let base = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    (0..n as u64).map(|i| base.wrapping_add(i.wrapping_mul(0x9e37_79b9))).collect()
}

fn fsx(file: &Path, args: &[&str], seed: u64, timeout: Duration) -> ToolOutput {
    let mut cmd = Command::new(fsx_binary());
    cmd.args(args).arg("-S").arg(seed.to_string()).arg(file);
    run_command(cmd, timeout)
}

#[test]
fn mapped_writes_and_truncates_keep_the_size_right() {
    require_fuse!("mapped_writes_and_truncates_keep_the_size_right");
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let mount = FuseMount::new(&server.url(""), "");
    // Files up to 10 MB with operations up to 200 KB: writes past the end,
    // truncates down and up, and mapped accesses near the end, where a
    // size that lags makes the kernel fault. Three files at once, as
    // several programs would.
    let runs: Vec<_> = seeds(3)
        .into_iter()
        .enumerate()
        .map(|(i, seed)| {
            let file = mount.path(&format!("mapped{i}"));
            std::thread::spawn(move || {
                let args = ["-M", "-N", "6000", "-l", "10000000", "-o", "200000"];
                (seed, fsx(&file, &args, seed, Duration::from_secs(300)))
            })
        })
        .collect();
    for run in runs {
        let (seed, out) = run.join().unwrap();
        assert!(
            out.status.success(),
            "fsx with mmap failed (replay: EAGERNFS_FSX_SEED={seed}):\n{}{}\nserver log:\n{}",
            out.stdout_text(),
            out.stderr,
            server.log_tail(20)
        );
    }
    // The same through O_DIRECT descriptors (aligned reads and writes,
    // which go to the server at once) with truncates in between.
    let seed = seeds(1)[0];
    let out =
        fsx(&mount.path("direct"), &["-D", "-N", "1500", "-l", "4000000"], seed, Duration::from_secs(300));
    assert!(
        out.status.success(),
        "fsx with O_DIRECT failed (seed {seed}):\n{}{}",
        out.stdout_text(),
        out.stderr
    );
}

/// fio's job file: writers of every kind and O_DIRECT and buffered readers
/// on the same four files for `seconds`.
fn mix_job(dir: &Path, seconds: u32) -> String {
    let mut job = format!(
        "[global]\ndirectory={}\nnrfiles=4\nfilename_format=f.$filenum\nfilesize=4m\n\
         file_service_type=random\nbsrange=4k-64k\ntime_based=1\nruntime={seconds}\n\n",
        dir.display()
    );
    for (name, engine, direct) in [
        ("w-direct", "psync", 1),
        ("w-buffered", "psync", 0),
        ("w-splice", "splice", 0),
        ("w-mmap", "mmap", 0),
    ] {
        job += &format!("[{name}]\nrw=randwrite\nioengine={engine}\ndirect={direct}\n\n");
    }
    for i in 1..=4 {
        job += &format!("[r-direct-{i}]\nrw=randread\nioengine=psync\ndirect=1\n\n");
    }
    for i in 1..=2 {
        job += &format!("[r-buffered-{i}]\nrw=randread\nioengine=psync\n\n");
    }
    job
}

#[test]
fn reads_beside_writers_never_fail() {
    require_fuse!("reads_beside_writers_never_fail");
    if Command::new("fio").arg("--version").output().is_err() {
        // scripts/install-deps.sh installs it; CI must not skip.
        assert!(std::env::var_os("CI").is_none(), "fio is missing (apt install fio)");
        skip("reads_beside_writers_never_fail", "fio is not installed (apt install fio)");
        return;
    }
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let mount = FuseMount::new(&server.url(""), "");
    let dir = mount.path("mix");
    std::fs::create_dir(&dir).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let jobfile = scratch.path().join("mix.fio");
    std::fs::write(&jobfile, mix_job(&dir, 15)).unwrap();
    let mut cmd = Command::new("fio");
    cmd.arg(&jobfile);
    let out = run_command(cmd, Duration::from_secs(180));
    let stdout = out.stdout_text();
    let errors: Vec<&str> = stdout
        .lines()
        .chain(out.stderr.lines())
        .filter(|l| l.contains("error") && !l.contains("err= 0"))
        .collect();
    assert!(
        out.status.success() && errors.is_empty(),
        "fio reported errors:\n{}\nmount and server logs:\n{}",
        errors.join("\n"),
        server.log_tail(20)
    );
    // Every job ran (a job fio could not set up would not show).
    let finished = stdout.lines().filter(|l| l.contains(": (groupid=") && l.contains("err= 0")).count();
    assert_eq!(finished, 10, "every fio job reports; output:\n{stdout}");
}
