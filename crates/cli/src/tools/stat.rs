//! `eagernfs stat URL...`: every field of the server's `fattr3`, laid out
//! like stat(1). `eagernfs stat` with no URL: the statistics of the server
//! running on this host (see `observe::stat`).

use super::format::{full_time, mode_string, type_name};
use super::remote::{split_parent, Remote};
use super::{Failures, Outcome};
use eagernfs_client::NfsOps;
use eagernfs_proto::nfs3::{Fattr3, Ftype3, NfsFh3};
use std::io::Write;

#[derive(clap::Args)]
pub(crate) struct StatArgs {
    /// nfs://host[:port]/export/path?options; none: the statistics of the eagernfs
    /// server running here (like nfsstat -s), read from its control socket; a mount
    /// point: the statistics of the eagernfs mount there (like mountstats).
    #[arg(value_name = "URL")]
    urls: Vec<String>,
    /// Server statistics: refresh every SECS seconds (default 2) with rates per interval.
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "2")]
    watch: Option<f64>,
    /// Server statistics as JSON.
    #[arg(long)]
    json: bool,
    /// The server's state directory (its control socket is STATE_DIR/control.sock).
    #[arg(long)]
    state_dir: Option<std::path::PathBuf>,
    /// The server's control socket, if not in its state directory.
    #[arg(long)]
    control: Option<std::path::PathBuf>,
}

impl StatArgs {
    /// No URL, or a local path (a mount point): statistics, not a file's
    /// attributes.
    pub(crate) fn is_server_stats(&self) -> bool {
        self.urls.is_empty() || (self.urls.len() == 1 && !self.urls[0].starts_with("nfs://"))
    }

    /// `eagernfs stat` (no URL): the local server's statistics.
    pub(crate) fn run_server_stats(&self) -> anyhow::Result<()> {
        let path = self.control.clone().unwrap_or_else(|| {
            crate::observe::control_socket_path(
                &self.state_dir.clone().unwrap_or_else(crate::observe::default_state_dir),
            )
        });
        let watch = match self.watch {
            Some(s) if !(0.1..=3600.0).contains(&s) => anyhow::bail!("--watch {s}: give 0.1 to 3600 seconds"),
            Some(s) => Some(std::time::Duration::from_secs_f64(s)),
            None => None,
        };
        if let Some(mountpoint) = self.urls.first() {
            return crate::observe::stat::run_mount(std::path::Path::new(mountpoint), watch, self.json);
        }
        crate::observe::stat::run_server(&path, watch, self.json)
    }
}

pub(crate) async fn run(args: StatArgs) -> anyhow::Result<Outcome> {
    let mut failures = Failures::new("stat");
    for url in &args.urls {
        if let Err(e) = stat_one(url).await {
            failures.report(&e);
        }
    }
    Ok(failures.outcome())
}

async fn stat_one(url: &str) -> anyhow::Result<()> {
    let remote = Remote::connect(url).await?;
    let (fh, a) = remote.resolve().await?;
    let mut name = split_parent(&remote.path).map_or(remote.display.clone(), |(_, n)| n.to_string());
    if a.ftype == Ftype3::Lnk {
        if let Ok(l) = remote.client.readlink(&remote.cred, &fh).await {
            name = format!("{name} -> {}", String::from_utf8_lossy(l.data.as_bytes()));
        }
    }
    let mut out = std::io::stdout().lock();
    out.write_all(render(&name, &fh, &a).as_bytes())?;
    Ok(())
}

/// The stat(1)-style report. Blocks are 512-byte units of `used`, as
/// stat(1) counts them; the handle is shown because it is what NFS names
/// the file by.
fn render(name: &str, fh: &NfsFh3, a: &Fattr3) -> String {
    let mut s = String::new();
    s.push_str(&format!("  File: {name}\n"));
    s.push_str(&format!(
        "  Size: {:<15} Used: {:<15} Blocks: {:<10} {}\n",
        a.size,
        a.used,
        a.used.div_ceil(512),
        type_name(a.ftype)
    ));
    let device = match a.ftype {
        Ftype3::Blk | Ftype3::Chr => format!("  Device type: {},{}", a.rdev.specdata1, a.rdev.specdata2),
        _ => String::new(),
    };
    s.push_str(&format!("Fsid: {:<#18x} Inode: {:<12} Links: {}{device}\n", a.fsid, a.fileid, a.nlink));
    s.push_str(&format!(
        "Access: ({:04o}/{})  Uid: ({:>5})   Gid: ({:>5})\n",
        a.mode & 0o7777,
        mode_string(a.ftype, a.mode),
        a.uid,
        a.gid
    ));
    s.push_str(&format!("Access: {}\n", full_time(a.atime)));
    s.push_str(&format!("Modify: {}\n", full_time(a.mtime)));
    s.push_str(&format!("Change: {}\n", full_time(a.ctime)));
    let handle: String = fh.data.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
    s.push_str(&format!("Handle: {handle}\n"));
    s
}
