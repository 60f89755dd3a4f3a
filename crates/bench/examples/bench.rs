//! `eagernfs bench` without the rest of the binary, for running the benchmarks before (or
//! apart from) the `eagernfs` CLI:
//!
//!     cargo run --release -p eagernfs-bench --example bench -- write /tmp --size 64MiB

use clap::Parser;
use eagernfs_bench::cli_args::{run, BenchArgs};

/// Benchmarks: the papers' experiments, JSON reports and plots.
#[derive(Parser)]
#[command(name = "bench")]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli.args, &mut std::io::stdout()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
