//! `eagernfs ls [-l] [-a] [-R] URL...`: list directories like ls(1).
//!
//! Names come from READDIRPLUS (READDIR + LOOKUP on servers without it),
//! sorted bytewise (ls in the C locale), one per line. `-l` prints mode,
//! links, owner, group, size (or device numbers), modification time and
//! name, with `-> target` for symbolic links. A URL naming a file lists
//! that file.

use super::format::{ls_time, mode_string, now_secs};
use super::remote::{list_dir, nfs_error, split_parent, DirEntry, Remote};
use super::{Failures, Outcome};
use eagernfs_client::NfsOps;
use eagernfs_proto::nfs3::{Fattr3, Ftype3, NfsFh3};
use std::io::Write;

#[derive(clap::Args)]
pub(crate) struct LsArgs {
    /// Long format: mode, links, owner, group, size, modification time, name.
    #[arg(short = 'l')]
    long: bool,
    /// Also show names starting with '.'.
    #[arg(short = 'a')]
    all: bool,
    /// List subdirectories recursively.
    #[arg(short = 'R')]
    recursive: bool,
    /// nfs://host[:port]/export/path?options
    #[arg(required = true, value_name = "URL")]
    urls: Vec<String>,
}

pub(crate) async fn run(args: LsArgs) -> anyhow::Result<Outcome> {
    let mut failures = Failures::new("ls");
    let headers = args.recursive || args.urls.len() > 1;
    let mut first = true;
    for url in &args.urls {
        if let Err(e) = list_url(&args, url, headers, &mut first).await {
            failures.report(&e);
        }
    }
    Ok(failures.outcome())
}

async fn list_url(args: &LsArgs, url: &str, headers: bool, first: &mut bool) -> anyhow::Result<()> {
    let remote = Remote::connect(url).await?;
    let (fh, attrs) = remote.resolve().await?;
    let mut out = std::io::stdout().lock();
    if attrs.ftype != Ftype3::Dir {
        let name = split_parent(&remote.path).map_or(remote.display.clone(), |(_, n)| n.to_string());
        let entry = DirEntry { name: name.into_bytes().into(), attrs: Some(attrs), fh: Some(fh) };
        print_entries(&remote, args.long, false, &[entry], &mut out).await?;
        *first = false;
        return Ok(());
    }
    // Depth-first, parents before children, siblings in name order: the
    // order ls -R prints. An explicit stack keeps deep trees off the
    // (async) call stack.
    let mut stack: Vec<(String, NfsFh3)> = vec![(remote.display.clone(), fh)];
    while let Some((display, dir)) = stack.pop() {
        let mut entries = list_dir(&remote.client, &remote.cred, &dir, args.long || args.recursive)
            .await
            .map_err(|e| nfs_error(&display, e))?;
        entries.retain(|e| args.all || !e.name.starts_with(b"."));
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        if headers {
            if !*first {
                writeln!(out)?;
            }
            writeln!(out, "{display}:")?;
        }
        *first = false;
        print_entries(&remote, args.long, true, &entries, &mut out).await?;
        if args.recursive {
            for e in entries.iter().rev() {
                let is_dir = e.attrs.is_some_and(|a| a.ftype == Ftype3::Dir);
                if let (true, false, Some(fh)) = (is_dir, e.is_dot_or_dotdot(), &e.fh) {
                    stack.push((format!("{display}/{}", e.name_lossy()), fh.clone()));
                }
            }
        }
    }
    Ok(())
}

/// Print entries, one per line; with `long`, in aligned `ls -l` columns,
/// after a `total` line (1 KiB blocks in use) when listing a directory.
async fn print_entries(
    remote: &Remote,
    long: bool,
    total: bool,
    entries: &[DirEntry],
    out: &mut impl Write,
) -> anyhow::Result<()> {
    if !long {
        for e in entries {
            writeln!(out, "{}", e.name_lossy())?;
        }
        return Ok(());
    }
    let now = now_secs();
    let mut rows = Vec::with_capacity(entries.len());
    for e in entries {
        let Some(a) = e.attrs else {
            // Gone between the listing and its attributes.
            rows.push([
                "?".repeat(10),
                "?".into(),
                "?".into(),
                "?".into(),
                "?".into(),
                "?".into(),
                e.name_lossy(),
            ]);
            continue;
        };
        let mut name = e.name_lossy();
        if let (Ftype3::Lnk, Some(fh)) = (a.ftype, &e.fh) {
            // A link that cannot be read is still listed, as ls does.
            if let Ok(l) = remote.client.readlink(&remote.cred, fh).await {
                name = format!("{name} -> {}", String::from_utf8_lossy(l.data.as_bytes()));
            }
        }
        rows.push([
            mode_string(a.ftype, a.mode),
            a.nlink.to_string(),
            a.uid.to_string(),
            a.gid.to_string(),
            size_column(&a),
            ls_time(a.mtime, now),
            name,
        ]);
    }
    let total_kib: u64 = entries.iter().filter_map(|e| e.attrs).map(|a| a.used.div_ceil(1024)).sum();
    if total {
        writeln!(out, "total {total_kib}")?;
    }
    let width = |i: usize| rows.iter().map(|r| r[i].len()).max().unwrap_or(0);
    let (w_links, w_uid, w_gid, w_size) = (width(1), width(2), width(3), width(4));
    for r in &rows {
        writeln!(
            out,
            "{} {:>w_links$} {:<w_uid$} {:<w_gid$} {:>w_size$} {} {}",
            r[0], r[1], r[2], r[3], r[4], r[5], r[6]
        )?;
    }
    Ok(())
}

/// The size column: bytes, or `major, minor` for device files.
fn size_column(a: &Fattr3) -> String {
    match a.ftype {
        Ftype3::Blk | Ftype3::Chr => format!("{}, {}", a.rdev.specdata1, a.rdev.specdata2),
        _ => a.size.to_string(),
    }
}
