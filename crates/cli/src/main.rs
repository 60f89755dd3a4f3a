//! The `eagernfs` command: `serve`, `reload`, `mount`/`umount`, the file tools (`ls`, `cat`,
//! `cp`, `stat`, `mkdir`, `rm`), `bench`, and what a packager needs (`completions`, `manpages`).
//!
//! This is the only place that reads flags, files and the environment:
//! it turns them into typed configuration and hands that to the libraries.

mod cluster;
mod manual;
mod mount;
mod mount_helper;
mod mount_options;
mod observe;
mod sd_notify;
mod serve;
mod tools;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "eagernfs",
    // The package version and the git revision (build.rs), so a report names its source.
    version = env!("EAGERNFS_VERSION"),
    about = "A fast, trustworthy user-space NFSv3 server, client and benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve directories over NFSv3 (MOUNT and portmap on the same port).
    Serve(serve::ServeArgs),
    /// Run the papers' benchmarks: write, load, mountstorm, stream, and compare against other servers.
    Bench(eagernfs_bench::cli_args::BenchArgs),
    /// Mount an NFS export with FUSE: eagernfs mount nfs://host/export DIR [-o opts] [-f].
    Mount(mount::MountArgs),
    /// Unmount a FUSE mount made by `eagernfs mount`.
    Umount(mount::UmountArgs),
    /// Write back and commit everything an `eagernfs mount` holds (sync(1) does not reach its daemon).
    Sync(mount::SyncArgs),
    /// Make the running server re-read its exports file (as SIGHUP does; like exportfs -r).
    Reload(ReloadArgs),
    /// ls, cat, cp, stat, mkdir, rm on nfs:// URLs.
    #[command(flatten)]
    Tools(tools::ToolCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on standard output.
    Completions(manual::CompletionsArgs),
    /// Write the man pages (eagernfs.1, eagernfs-serve.1, …) into a directory.
    Manpages(manual::ManpagesArgs),
}

#[derive(clap::Args)]
struct ReloadArgs {
    /// The server's state directory (its control socket is STATE_DIR/control.sock).
    #[arg(long)]
    state_dir: Option<std::path::PathBuf>,
    /// The server's control socket, if not in its state directory.
    #[arg(long)]
    control: Option<std::path::PathBuf>,
}

impl ReloadArgs {
    fn run(self) -> anyhow::Result<()> {
        let path = self.control.unwrap_or_else(|| {
            observe::control_socket_path(&self.state_dir.unwrap_or_else(observe::default_state_dir))
        });
        let answer = observe::control::request(&path, "reload")?;
        if answer["ok"].as_bool() == Some(true) {
            println!("{}", answer["message"].as_str().unwrap_or("reloaded"));
            Ok(())
        } else {
            anyhow::bail!(
                "reload refused, the previous exports stay in force: {}",
                answer["error"].as_str().unwrap_or("?")
            )
        }
    }
}

fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> std::process::ExitCode {
    // Installed as /sbin/mount.fuse.eagernfs (a symlink), the binary is mount(8)'s helper.
    if let Some(helper) = std::env::args_os().next().and_then(|a| mount_helper::Helper::for_program(&a)) {
        init_logging();
        return helper.run();
    }
    let cli = Cli::parse();
    init_logging();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Mount(args) => mount::run_mount(args),
        Command::Umount(args) => mount::run_umount(args),
        Command::Sync(args) => mount::run_sync(args),
        Command::Reload(args) => args.run(),
        Command::Tools(cmd) => return tools::run(cmd),
        Command::Completions(args) => manual::completions(args, Cli::command()),
        Command::Manpages(args) => manual::manpages(args, Cli::command()),
        Command::Bench(args) => {
            eagernfs_bench::cli_args::run(args, &mut std::io::stdout()).map_err(anyhow::Error::from)
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("eagernfs: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
