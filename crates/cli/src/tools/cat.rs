//! `eagernfs cat URL...`: files to stdout, in order, with several READs
//! in flight per file.

use super::remote::{fetch, Delivery, Remote};
use super::{Failures, Outcome};
use eagernfs_proto::nfs3::Ftype3;
use std::io::Write;

#[derive(clap::Args)]
pub(crate) struct CatArgs {
    /// READs in flight at once (each of rsize bytes).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
    inflight: u32,
    /// nfs://host[:port]/export/path?options
    #[arg(required = true, value_name = "URL")]
    urls: Vec<String>,
}

pub(crate) async fn run(args: CatArgs) -> anyhow::Result<Outcome> {
    let mut failures = Failures::new("cat");
    for url in &args.urls {
        match cat_one(url, args.inflight as usize).await {
            Ok(()) => {}
            // The reader went away (`| head`): stop quietly, as cat does.
            Err(e) if is_broken_pipe(&e) => return Ok(failures.outcome()),
            Err(e) => failures.report(&e),
        }
    }
    Ok(failures.outcome())
}

async fn cat_one(url: &str, inflight: usize) -> anyhow::Result<()> {
    let remote = Remote::connect(url).await?;
    let (fh, attrs) = remote.resolve().await?;
    if attrs.ftype == Ftype3::Dir {
        anyhow::bail!("{}: Is a directory", remote.display);
    }
    let mut out = std::io::stdout().lock();
    fetch(
        &remote.display,
        &remote.client,
        &remote.cred,
        &fh,
        attrs.size,
        inflight,
        Delivery::InOrder,
        |_, data| Ok(out.write_all(&data)?),
    )
    .await?;
    out.flush()?;
    Ok(())
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
