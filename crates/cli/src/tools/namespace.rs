//! `eagernfs mkdir [-p] URL...` and `eagernfs rm [-r] [-f] URL...`.
//!
//! mkdir makes the last component (with `-p` every missing one, and an
//! existing directory is fine). rm REMOVEs files; a directory needs `-r`,
//! which empties it depth-first (READDIR, then REMOVE/RMDIR of each entry)
//! before RMDIR. The export's root is never removed: it has no parent
//! inside the export.

use super::remote::{list_dir, nfs_error, Remote};
use super::{Failures, Outcome};
use anyhow::anyhow;
use eagernfs_client::{AnyClient, Cred, NfsError, NfsOps};
use eagernfs_proto::nfs3::{Ftype3, NfsFh3, Nfsstat3, Sattr3};
use std::future::Future;
use std::pin::Pin;

#[derive(clap::Args)]
pub(crate) struct MkdirArgs {
    /// Make missing parents too; an existing directory is not an error.
    #[arg(short = 'p', long = "parents")]
    parents: bool,
    /// Permission bits in octal (default 0777 less the umask, as mkdir(1)).
    #[arg(short = 'm', long = "mode", value_parser = parse_octal_mode)]
    mode: Option<u32>,
    /// nfs://host[:port]/export/path?options
    #[arg(required = true, value_name = "URL")]
    urls: Vec<String>,
}

#[derive(clap::Args)]
pub(crate) struct RmArgs {
    /// Remove directories and everything below them.
    #[arg(short = 'r', short_alias = 'R', long = "recursive")]
    recursive: bool,
    /// A missing file is not an error.
    #[arg(short = 'f', long = "force")]
    force: bool,
    /// nfs://host[:port]/export/path?options
    #[arg(required = true, value_name = "URL")]
    urls: Vec<String>,
}

fn parse_octal_mode(s: &str) -> Result<u32, String> {
    match u32::from_str_radix(s, 8) {
        Ok(m) if m <= 0o7777 => Ok(m),
        _ => Err(format!("'{s}' is not an octal mode (0-7777)")),
    }
}

/// This process's umask (read by setting and restoring it; single-threaded
/// at this point of a tool's life, so nothing sees the transient value).
pub(crate) fn umask() -> u32 {
    // SAFETY: umask cannot fail and touches no memory.
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
    }
}

pub(crate) async fn mkdir(args: MkdirArgs) -> anyhow::Result<Outcome> {
    let mut failures = Failures::new("mkdir");
    let mode = args.mode.unwrap_or(0o777 & !umask());
    for url in &args.urls {
        if let Err(e) = mkdir_one(url, args.parents, mode).await {
            failures.report(&e);
        }
    }
    Ok(failures.outcome())
}

async fn mkdir_one(url: &str, parents: bool, mode: u32) -> anyhow::Result<()> {
    let remote = Remote::connect_with_parent(url).await?;
    let attrs = Sattr3 { mode: Some(mode), ..Default::default() };
    if !parents {
        let Some((dir, name)) = remote.parent().await? else {
            return Err(nfs_error(&remote.display, Nfsstat3::Exist.into()));
        };
        remote
            .client
            .mkdir(&remote.cred, &dir, name.as_bytes(), attrs)
            .await
            .map_err(|e| nfs_error(&remote.display, e))?;
        return Ok(());
    }
    let (client, cred) = (&remote.client, &remote.cred);
    let mut dir = client.root();
    let mut walked = String::new();
    for comp in remote.path.split('/').filter(|c| !c.is_empty()) {
        walked.push('/');
        walked.push_str(comp);
        let what = remote.child_display(&walked);
        let (fh, ftype) = match client.lookup(cred, &dir, comp.as_bytes()).await {
            Ok(r) => {
                let ftype = match r.obj_attributes {
                    Some(a) => a.ftype,
                    None => client.getattr(cred, &r.object).await.map_err(|e| nfs_error(&what, e))?.ftype,
                };
                (r.object, ftype)
            }
            Err(NfsError::Nfs(Nfsstat3::Noent)) => match client
                .mkdir(cred, &dir, comp.as_bytes(), attrs)
                .await
            {
                Ok(r) => match r.obj {
                    Some(fh) => (fh, Ftype3::Dir),
                    None => {
                        let r = client
                            .lookup(cred, &dir, comp.as_bytes())
                            .await
                            .map_err(|e| nfs_error(&what, e))?;
                        (r.object, Ftype3::Dir)
                    }
                },
                // Someone else made it meanwhile: use theirs.
                Err(NfsError::Nfs(Nfsstat3::Exist)) => {
                    let r =
                        client.lookup(cred, &dir, comp.as_bytes()).await.map_err(|e| nfs_error(&what, e))?;
                    let ftype = r.obj_attributes.map_or(Ftype3::Dir, |a| a.ftype);
                    (r.object, ftype)
                }
                Err(e) => return Err(nfs_error(&what, e)),
            },
            Err(e) => return Err(nfs_error(&what, e)),
        };
        if ftype != Ftype3::Dir {
            return Err(nfs_error(&what, Nfsstat3::Exist.into()));
        }
        dir = fh;
    }
    Ok(())
}

pub(crate) async fn rm(args: RmArgs) -> anyhow::Result<Outcome> {
    let mut failures = Failures::new("rm");
    for url in &args.urls {
        if let Err(e) = rm_one(url, args.recursive, args.force).await {
            failures.report(&e);
        }
    }
    Ok(failures.outcome())
}

async fn rm_one(url: &str, recursive: bool, force: bool) -> anyhow::Result<()> {
    let remote = Remote::connect_with_parent(url).await?;
    let Some((parent, name)) = remote.parent().await? else {
        return Err(anyhow!("{}: refusing to remove the root of the export", remote.display));
    };
    let (client, cred) = (&remote.client, &remote.cred);
    let found = match client.lookup(cred, &parent, name.as_bytes()).await {
        Ok(r) => r,
        Err(NfsError::Nfs(Nfsstat3::Noent)) if force => return Ok(()),
        Err(e) => return Err(nfs_error(&remote.display, e)),
    };
    let ftype = match found.obj_attributes {
        Some(a) => a.ftype,
        None => client.getattr(cred, &found.object).await.map_err(|e| nfs_error(&remote.display, e))?.ftype,
    };
    if ftype != Ftype3::Dir {
        return client
            .remove(cred, &parent, name.as_bytes())
            .await
            .map(|_| ())
            .map_err(|e| nfs_error(&remote.display, e));
    }
    if !recursive {
        return Err(anyhow!("{}: Is a directory (use -r)", remote.display));
    }
    empty_dir(client, cred, &found.object, remote.display.clone()).await?;
    client.rmdir(cred, &parent, name.as_bytes()).await.map_err(|e| nfs_error(&remote.display, e))?;
    Ok(())
}

/// Remove everything inside `dir` (`display` names it in errors). Each
/// level lists the whole directory first and then removes, so removals
/// never race the server's READDIR cookies.
fn empty_dir<'a>(
    client: &'a AnyClient,
    cred: &'a Cred,
    dir: &'a NfsFh3,
    display: String,
) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + 'a>> {
    Box::pin(async move {
        let entries = list_dir(client, cred, dir, true).await.map_err(|e| nfs_error(&display, e))?;
        for e in entries.iter().filter(|e| !e.is_dot_or_dotdot()) {
            let what = format!("{display}/{}", e.name_lossy());
            let is_dir = e.attrs.is_some_and(|a| a.ftype == Ftype3::Dir);
            if let (true, Some(fh)) = (is_dir, &e.fh) {
                empty_dir(client, cred, fh, what.clone()).await?;
                client.rmdir(cred, dir, &e.name).await.map_err(|err| nfs_error(&what, err))?;
            } else {
                match client.remove(cred, dir, &e.name).await {
                    // Already gone (someone else removing too): fine.
                    Ok(_) | Err(NfsError::Nfs(Nfsstat3::Noent)) => {}
                    Err(err) => return Err(nfs_error(&what, err)),
                }
            }
        }
        Ok(())
    })
}
