//! File tools on `nfs://` URLs: `ls`, `cat`, `cp`, `stat`, `mkdir`, `rm`.
//!
//! Each tool connects to the export its URL names with the wire client
//! ([`eagernfs_client::AnyClient`]: NFSv4.2, 4.1 or 3, as `vers=` says or
//! the server speaks), walks to the path with LOOKUP (one COMPOUND over
//! NFSv4) and does its work with the `NfsOps` calls, pipelined where it
//! moves data. Nothing
//! here caches: a tool runs once and exits, so every answer comes straight
//! from the server.
//!
//! Errors are printed the way coreutils print them, naming the tool and the
//! object, with the NFS status for the curious:
//! `eagernfs: cp: nfs://h/x/f: Permission denied (NFS3ERR_ACCES)`; the exit
//! status is then 1.
//!
//! # Layout
//! - [`ToolCommand`]: the subcommands, flattened into the binary's command
//!   enum; [`run`] runs one and turns its outcome into an exit code.
//! - `remote`: connecting, resolving paths, errors a person understands,
//!   pipelined reads.
//! - `format`: `ls -l` mode strings and times.
//! - `outcome`: how a tool ended ([`Outcome`]) and the failures it reported
//!   ([`Failures`]), below the tools and this file.
//! - `ls`, `cat`, `cp`, `stat`, `namespace` (`mkdir`, `rm`): the tools.

mod cat;
mod cp;
mod format;
mod ls;
mod namespace;
mod outcome;
mod remote;
mod stat;

pub(crate) use outcome::{Failures, Outcome};

use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub(crate) enum ToolCommand {
    /// List a directory (or show a file) on an NFS server.
    Ls(ls::LsArgs),
    /// Write NFS files to standard output, in order.
    Cat(cat::CatArgs),
    /// Copy between local paths and nfs:// URLs (either direction, or URL to URL).
    Cp(cp::CpArgs),
    /// Show every attribute the server keeps for a file (all of fattr3); with no
    /// URL, the statistics of the eagernfs server running here (--watch, --json).
    Stat(stat::StatArgs),
    /// Make directories on an NFS server.
    Mkdir(namespace::MkdirArgs),
    /// Remove files (and with -r, directory trees) on an NFS server.
    Rm(namespace::RmArgs),
}

/// Run one tool; 0 when everything succeeded, 1 when anything failed (each
/// failure has been printed to stderr as `eagernfs: TOOL: message`).
pub(crate) fn run(cmd: ToolCommand) -> ExitCode {
    let (name, result) = match cmd {
        ToolCommand::Ls(a) => ("ls", block_on(ls::run(a))),
        ToolCommand::Cat(a) => ("cat", block_on(cat::run(a))),
        ToolCommand::Cp(a) => ("cp", block_on(cp::run(a))),
        ToolCommand::Stat(a) if a.is_server_stats() => {
            ("stat", a.run_server_stats().map(|()| Outcome::AllOk))
        }
        ToolCommand::Stat(a) => ("stat", block_on(stat::run(a))),
        ToolCommand::Mkdir(a) => ("mkdir", block_on(namespace::mkdir(a))),
        ToolCommand::Rm(a) => ("rm", block_on(namespace::rm(a))),
    };
    match result {
        Ok(Outcome::AllOk) => ExitCode::SUCCESS,
        Ok(Outcome::SomeFailed) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("eagernfs: {name}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// One tool invocation on its own single-threaded runtime: the tools are
/// I/O-bound on one server, and one thread keeps a `taskset -c 0`
/// benchmark honest (no hidden second core doing the copying).
fn block_on<F: std::future::Future<Output = anyhow::Result<Outcome>>>(f: F) -> anyhow::Result<Outcome> {
    keep_large_buffers_in_the_heap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(f)
}

/// Every READ reply and WRITE call is a buffer of about rsize/wsize (1 MiB)
/// that lives for one round trip. glibc serves allocations that large with a
/// fresh mmap each time, so every page of every buffer is faulted in and
/// zeroed by the kernel and unmapped again: a tenth of a download's CPU in
/// profiles. Raising the mmap threshold above the largest transfer keeps
/// them in the heap, where freed buffers are reused.
fn keep_large_buffers_in_the_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const THRESHOLD_BYTES: libc::c_int = 32 << 20;
        // SAFETY: mallopt only changes allocator tuning; it is called before
        // any other thread of ours exists. A refusal (0) leaves the defaults.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD_BYTES);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 2 * THRESHOLD_BYTES);
        }
    }
}
