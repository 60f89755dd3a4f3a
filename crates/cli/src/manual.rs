//! `eagernfs completions SHELL` and `eagernfs manpages DIR`: shell completions and man pages
//! generated from the clap definition itself, so they cannot drift from what the binary
//! accepts. A packager runs them once at build time (see `dist/install.sh`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;

#[derive(clap::Args, Debug)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for (`bash`: source the output, or install it as
    /// /usr/share/bash-completion/completions/eagernfs).
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ManpagesArgs {
    /// The directory to write the pages into (created if missing); files are named as man(1)
    /// expects: eagernfs.1, eagernfs-serve.1, eagernfs-bench-write.1, …, and
    /// mount.fuse.eagernfs.8, umount.fuse.eagernfs.8 for the mount(8) helpers.
    dir: PathBuf,
}

/// Completions for `cmd`, the binary's whole command (main.rs gives it, so this module needs
/// nothing above it).
pub(crate) fn completions(args: CompletionsArgs, mut cmd: clap::Command) -> anyhow::Result<()> {
    clap_complete::generate(args.shell, &mut cmd, "eagernfs", &mut std::io::stdout().lock());
    Ok(())
}

/// Man pages for `cmd`, the binary's whole command, and for the mount(8) helpers.
pub(crate) fn manpages(args: ManpagesArgs, cmd: clap::Command) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let mut written = Vec::new();
    // Section 1: the command and every subcommand, each on its own page as git does, so
    // `man eagernfs-mount` answers directly. `build` names the subcommands `eagernfs-mount`.
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    write_tree(&cmd, "1", &args.dir, &mut written)?;
    // Section 8, beside mount.nfs(8): the helpers mount(8) and umount(8) run.
    for helper in
        [crate::mount_helper::MountHelperArgs::command(), crate::mount_helper::UmountHelperArgs::command()]
    {
        write_tree(&helper, "8", &args.dir, &mut written)?;
    }
    for path in &written {
        println!("{}", path.display());
    }
    Ok(())
}

/// Write `cmd`'s page and those of its subcommands (depth first), in `section`.
fn write_tree(
    cmd: &clap::Command,
    section: &str,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_tree(sub, section, dir, written)?;
    }
    let page = clap_mangen::Man::new(cmd.clone())
        .section(section)
        .manual("eagernfs manual")
        .source(format!("eagernfs {}", env!("EAGERNFS_VERSION")));
    let path = page.generate_to(dir).with_context(|| format!("writing a man page into {}", dir.display()))?;
    written.push(path);
    Ok(())
}
