//! eagernfs benchmarks: the experiments of the papers in `shared/reading/` as commands anyone
//! can rerun, each bounded in time and operation count, with JSON reports, a short human
//! summary, Markdown ratio tables and SVG/PNG plots.
//!
//! | command | paper | what it measures |
//! |---|---|---|
//! | `bench write` | Lever & Honeyman 2002 | sequential write of a fresh file in 8 KiB blocks: MB/s after the last write, after fsync, after close; every write()'s latency; periodic spikes (Fig. 1–7) |
//! | `bench plot` | | the paper's figures from saved reports, several targets on one chart |
//! | `bench table` | | a Markdown ratio table of two reports (`eagernfs / ganesha`) |
//!
//! The wire-level tools (`bench load`, `bench mountstorm`, `bench stream`, `bench compare`)
//! come with the client library; their report building blocks are already in [`report`]
//! ([`report::OpStats`], [`report::RatePoint`], [`report::OffsetOrder`]) and their latency
//! arithmetic in [`stats`].
//!
//! # Layout
//! - [`commands`]: one `pub fn` per subcommand, typed config in, typed output out.
//! - [`cli_args`]: the same commands as clap `Args` for the `eagernfs` binary.
//! - [`write`]: the write benchmark and the [`write::WriteTarget`] trait it writes through.
//! - [`stats`], [`spikes`]: latency summaries, periodic-spike detection.
//! - [`report`], [`summary`], [`table`]: JSON schema, human summary, Markdown tables.
//! - [`plot`]: SVG and PNG charts with an embedded font.
//! - [`units`], [`machine`]: size/duration parsing and formatting, machine description.
//!
//! See `crates/bench/README.md` for the command lines that reproduce each figure.

pub mod cli_args;
pub mod commands;
pub mod compare;
pub mod error;
pub mod load;
pub mod machine;
pub mod mountstorm;
pub mod plot;
mod progress;
pub mod report;
pub mod spikes;
pub mod stats;
pub mod stream;
pub mod summary;
pub mod table;
pub mod units;
pub mod write;
pub mod write_nfs;

pub use commands::{
    bench_plot, bench_table, bench_write, PlotCommand, PlotKind, TableCommand, WriteCommand, WriteOutput,
};
pub use error::BenchError;
pub use report::{WriteReport, WriteRun};
pub use write::{run_write, DirectoryTarget, WriteConfig};
