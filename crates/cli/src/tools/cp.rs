//! `eagernfs cp [-r] SOURCE DEST`: copy a local path to an `nfs://` URL,
//! a URL to a local path, or a URL to a URL.
//!
//! **Up** (to a URL) the target is created UNCHECKED (truncating an
//! existing file) with the source's mode; then WRITEs of wsize bytes go out
//! UNSTABLE, `--inflight` of them at once, and when all are acknowledged
//! exactly one COMMIT (offset 0, count 0) makes them durable. This is the
//! point of Callaghan's and the FreeBSD write-ups: a FILE_SYNC per block
//! makes the server wait for the disk on every block.
//!
//! Each acknowledged chunk is remembered by the write verifier its WRITE
//! returned, as ranges of chunk numbers per verifier (a few entries, however
//! large the file). If the COMMIT's verifier differs from a chunk's, the
//! server restarted and may have lost that chunk: it is read again from the
//! source (never held in memory) and resent UNSTABLE, and COMMIT is sent
//! again, at most [`COMMIT_ROUNDS_MAX`] times.
//!
//! **Down** (from a URL) READs of rsize bytes, `--inflight` at once, are
//! written with pwrite at their offsets as they arrive; the file is fsynced
//! at the end (`--no-fsync` skips it).
//!
//! A progress bar (bytes, rate, ETA) is drawn on stderr when it is a
//! terminal and `--quiet` is not given; a one-line summary follows.
//!
//! Test hook: if `EAGERNFS_CP_PAUSE_BEFORE_COMMIT=PATH` is set and PATH
//! exists, cp creates `PATH.ready` after the last WRITE is acknowledged and
//! waits for PATH to disappear before it sends the first COMMIT, so a test
//! can restart the server exactly there.
//!
//! # Layout
//! - [`CpArgs`], [`run`]: which direction, then the summary.
//! - `upload_*` / `download_*`: one file or a tree, each way.
//! - [`Source`]: where upload data is (re-)read from.
//! - [`Upload`]: the UNSTABLE pipeline, COMMIT and resend rounds.
//! - [`RangeSet`], [`Verifiers`]: which chunks were acknowledged under
//!   which verifier.

use super::remote::{
    fetch, is_url, list_dir, nfs_error, read_range, split_parent, strerror, Delivery, Remote,
};
use super::Outcome;
use anyhow::{anyhow, bail};
use bytes::Bytes;
use eagernfs_client::{AnyClient, Cred, NfsError, NfsOps};
use eagernfs_proto::nfs3::{Createhow3, Fattr3, Ftype3, NfsFh3, Nfsstat3, Sattr3, StableHow, Writeverf3};
use futures::stream::{FuturesUnordered, StreamExt};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::IsTerminal;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, Instant};

/// COMMIT rounds before giving up: each round after the first means the
/// server restarted again during the copy, so a few is already unusual.
pub(crate) const COMMIT_ROUNDS_MAX: u32 = 5;

/// The test hook's environment variable (see the module docs).
const PAUSE_ENV: &str = "EAGERNFS_CP_PAUSE_BEFORE_COMMIT";

/// How often the test hook looks for its file to disappear.
const PAUSE_POLL: Duration = Duration::from_millis(10);

#[derive(clap::Args)]
pub(crate) struct CpArgs {
    /// Copy directories recursively (local <-> URL).
    #[arg(short = 'r', short_alias = 'R', long = "recursive")]
    recursive: bool,
    /// No progress bar and no summary line.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Requests in flight at once: WRITEs going up, READs coming down.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
    inflight: u32,
    /// Do not fsync downloaded files before exiting.
    #[arg(long)]
    no_fsync: bool,
    /// A local path or nfs://host[:port]/export/path?options
    #[arg(value_name = "SOURCE")]
    src: String,
    /// A local path or nfs://host[:port]/export/path?options
    #[arg(value_name = "DEST")]
    dst: String,
}

/// What a copy needs to know besides its endpoints.
struct Settings {
    inflight: usize,
    recursive: bool,
    /// Draw progress bars (stderr is a terminal and not `--quiet`).
    progress: bool,
    fsync: bool,
    /// The test hook's file, when set.
    pause_before_commit: Option<PathBuf>,
}

/// What was copied, for the summary.
#[derive(Default)]
struct Totals {
    files: u64,
    bytes: u64,
    /// Bytes sent a second time because a COMMIT's verifier showed the
    /// server had restarted.
    resent_bytes: u64,
}

pub(crate) async fn run(args: CpArgs) -> anyhow::Result<Outcome> {
    let settings = Settings {
        inflight: args.inflight as usize,
        recursive: args.recursive,
        progress: !args.quiet && std::io::stderr().is_terminal(),
        fsync: !args.no_fsync,
        pause_before_commit: std::env::var_os(PAUSE_ENV).map(PathBuf::from),
    };
    let start = Instant::now();
    let mut totals = Totals::default();
    match (is_url(&args.src), is_url(&args.dst)) {
        (false, false) => {
            bail!("neither {} nor {} is an nfs:// URL (use cp(1) for local copies)", args.src, args.dst)
        }
        (false, true) => upload_cmd(Path::new(&args.src), &args.dst, &settings, &mut totals).await?,
        (true, false) => download_cmd(&args.src, Path::new(&args.dst), &settings, &mut totals).await?,
        (true, true) => remote_copy_cmd(&args.src, &args.dst, &settings, &mut totals).await?,
    }
    if !args.quiet {
        eprintln!("eagernfs: cp: {}", summary(&totals, start.elapsed()));
    }
    Ok(Outcome::AllOk)
}

/// `copied 67108864 bytes in 0.52 s (129.1 MB/s)`, plus the resend note.
fn summary(t: &Totals, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    let rate_mb_s = if secs > 0.0 { t.bytes as f64 / secs / 1e6 } else { 0.0 };
    let files = if t.files == 1 { String::new() } else { format!("{} files, ", t.files) };
    let mut s = format!("copied {files}{} bytes in {secs:.2} s ({rate_mb_s:.1} MB/s)", t.bytes);
    if t.resent_bytes > 0 {
        s.push_str(&format!(
            "; resent {} bytes after the server restarted (write verifier changed)",
            t.resent_bytes
        ));
    }
    s
}

/// A local I/O failure as `path: No such file or directory`.
fn local_error(path: &Path, e: std::io::Error) -> anyhow::Error {
    match e.raw_os_error() {
        Some(errno) => anyhow!("{}: {}", path.display(), strerror(errno)),
        None => anyhow!("{}: {e}", path.display()),
    }
}

fn progress_bar(settings: &Settings, len: u64, name: &str) -> ProgressBar {
    if !settings.progress {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{msg:20!} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(name.to_string());
    bar
}

/// Where an upload's bytes come from. Chunks are read when sent and read
/// again if they must be resent, so a copy never holds the file in memory.
enum Source<'a> {
    Local { file: &'a File, path: &'a Path },
    Remote { client: &'a AnyClient, cred: &'a Cred, fh: &'a NfsFh3, display: &'a str },
}

impl Source<'_> {
    /// Exactly `len` bytes at `offset`; a source that became shorter is an
    /// error (the copy would otherwise silently differ).
    async fn read(&self, offset: u64, len: usize) -> anyhow::Result<Bytes> {
        match self {
            Source::Local { file, path } => {
                let buf = pread_exact(file, offset, len).map_err(|e| match e.kind() {
                    std::io::ErrorKind::UnexpectedEof => {
                        anyhow!("{}: file shrank during the copy", path.display())
                    }
                    _ => local_error(path, e),
                })?;
                Ok(Bytes::from(buf))
            }
            Source::Remote { client, cred, fh, display } => {
                let (data, _) = read_range(client, cred, fh, offset, len as u32)
                    .await
                    .map_err(|e| nfs_error(display, e))?;
                if data.len() < len {
                    bail!("{display}: file shrank during the copy");
                }
                Ok(data)
            }
        }
    }
}

/// `len` bytes of `file` at `offset`, read into a buffer that is never
/// zeroed first: zeroing a whole wsize buffer before pread overwrites it
/// cost a tenth of an upload's CPU in profiles.
fn pread_exact(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    use std::os::fd::AsRawFd;
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    while buf.len() < len {
        let filled = buf.len();
        let spare = &mut buf.spare_capacity_mut()[..len - filled];
        // SAFETY: pread writes at most `spare.len()` bytes into `spare`,
        // which is allocated (uninitialised) capacity of `buf`; the return
        // value says how many it wrote.
        let n = unsafe {
            libc::pread(
                file.as_raw_fd(),
                spare.as_mut_ptr().cast(),
                spare.len(),
                (offset + filled as u64) as libc::off_t,
            )
        };
        match n {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n if n < 0 => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            // SAFETY: the first `n` bytes of the spare capacity were just
            // written by pread, so they are initialised.
            n => unsafe { buf.set_len(filled + n as usize) },
        }
    }
    Ok(buf)
}

/// A set of chunk numbers as disjoint half-open ranges. Chunks are
/// acknowledged nearly in order (at most `inflight` out of place), so the
/// set stays a handful of ranges however many chunks it holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RangeSet {
    /// start -> end (exclusive); ranges neither overlap nor touch.
    ranges: BTreeMap<u64, u64>,
}

impl RangeSet {
    pub(crate) fn from_range(start: u64, end: u64) -> Self {
        let mut s = RangeSet::default();
        s.insert_range(start, end);
        s
    }

    pub(crate) fn insert(&mut self, i: u64) {
        self.insert_range(i, i + 1);
    }

    pub(crate) fn insert_range(&mut self, mut start: u64, mut end: u64) {
        if start >= end {
            return;
        }
        if let Some((&s, &e)) = self.ranges.range(..=start).next_back() {
            if e >= start {
                start = s;
                end = end.max(e);
                self.ranges.remove(&s);
            }
        }
        while let Some((&s, &e)) = self.ranges.range(start..=end).next() {
            end = end.max(e);
            self.ranges.remove(&s);
        }
        self.ranges.insert(start, end);
    }

    pub(crate) fn extend(&mut self, other: &RangeSet) {
        for (&s, &e) in &other.ranges {
            self.insert_range(s, e);
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of ranges (what the set costs in memory).
    #[cfg(test)]
    pub(crate) fn range_count(&self) -> usize {
        self.ranges.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.ranges.iter().flat_map(|(&s, &e)| s..e)
    }

    /// Bytes these chunks cover in a file of `size` bytes cut into
    /// `chunk` byte pieces.
    pub(crate) fn bytes(&self, size: u64, chunk: u64) -> u64 {
        self.ranges.iter().map(|(&s, &e)| (e * chunk).min(size).saturating_sub(s * chunk)).sum()
    }
}

/// Acknowledged but uncommitted chunks, by the verifier their WRITE
/// returned.
#[derive(Default, Debug)]
pub(crate) struct Verifiers {
    by_verf: HashMap<Writeverf3, RangeSet>,
    /// Chunks whose pieces came back under different verifiers (a restart
    /// in the middle of a short-write sequence): always resent.
    mixed: RangeSet,
}

impl Verifiers {
    pub(crate) fn record(&mut self, chunk: u64, verf: Writeverf3) {
        self.by_verf.entry(verf).or_default().insert(chunk);
    }

    pub(crate) fn record_mixed(&mut self, chunk: u64) {
        self.mixed.insert(chunk);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_verf.is_empty() && self.mixed.is_empty()
    }

    /// The chunks a COMMIT answered with `committed` did not cover: those
    /// written under any other verifier.
    pub(crate) fn lost(&self, committed: &Writeverf3) -> RangeSet {
        let mut lost = self.mixed.clone();
        for (verf, chunks) in &self.by_verf {
            if verf != committed {
                lost.extend(chunks);
            }
        }
        lost
    }
}

/// How one chunk's WRITEs came back.
enum ChunkAck {
    /// The server stored it durably anyway (FILE_SYNC or DATA_SYNC reply).
    Stable,
    /// Stored UNSTABLE under this verifier.
    Unstable(Writeverf3),
    /// Pieces stored under different verifiers.
    Mixed,
}

/// One file's UNSTABLE WRITE pipeline and COMMIT rounds.
struct Upload<'a> {
    client: &'a AnyClient,
    cred: &'a Cred,
    fh: &'a NfsFh3,
    /// Names the target in errors.
    display: &'a str,
    size: u64,
    /// Bytes per WRITE (the client's wsize).
    chunk: u64,
    inflight: usize,
    progress: &'a ProgressBar,
    pause_before_commit: Option<&'a Path>,
}

impl Upload<'_> {
    /// Send the whole file and make it durable; returns the bytes resent.
    async fn run(&self, source: &Source<'_>) -> anyhow::Result<u64> {
        let chunks = self.size.div_ceil(self.chunk);
        let mut todo = RangeSet::from_range(0, chunks);
        let mut resent = 0u64;
        for round in 1..=COMMIT_ROUNDS_MAX {
            let unstable = self.send(source, &todo).await?;
            if unstable.is_empty() {
                return Ok(resent); // nothing to commit (empty file, or the server synced)
            }
            if round == 1 {
                if let Some(path) = self.pause_before_commit {
                    pause_before_commit(path).await?;
                }
            }
            let commit =
                self.client.commit(self.cred, self.fh, 0, 0).await.map_err(|e| nfs_error(self.display, e))?;
            todo = unstable.lost(&commit.verf);
            if todo.is_empty() {
                return Ok(resent);
            }
            let again = todo.bytes(self.size, self.chunk);
            resent += again;
            self.progress.inc_length(again);
            tracing::debug!(
                "{}: write verifier changed (server restarted); resending {again} bytes",
                self.display
            );
        }
        bail!(
            "{}: the server's write verifier changed at each of {COMMIT_ROUNDS_MAX} COMMITs (is it restarting \
             over and over?); the file may be incomplete",
            self.display
        )
    }

    /// WRITE the chunks of `todo` UNSTABLE with up to `inflight` in flight;
    /// returns what each acknowledged chunk's verifier was.
    async fn send(&self, source: &Source<'_>, todo: &RangeSet) -> anyhow::Result<Verifiers> {
        let mut verifiers = Verifiers::default();
        let mut next = todo.iter();
        let mut queue = FuturesUnordered::new();
        loop {
            while queue.len() < self.inflight {
                match next.next() {
                    Some(i) => queue.push(self.write_chunk(source, i)),
                    None => break,
                }
            }
            let Some(result) = queue.next().await else { break };
            let (i, ack, len) = result?;
            match ack {
                ChunkAck::Stable => {}
                ChunkAck::Unstable(v) => verifiers.record(i, v),
                ChunkAck::Mixed => verifiers.record_mixed(i),
            }
            self.progress.inc(len);
        }
        Ok(verifiers)
    }

    /// Read chunk `i` from the source and WRITE it UNSTABLE, continuing
    /// after short writes. Returns (chunk, how it was stored, bytes).
    async fn write_chunk(&self, source: &Source<'_>, i: u64) -> anyhow::Result<(u64, ChunkAck, u64)> {
        let offset = i * self.chunk;
        let len = self.chunk.min(self.size - offset) as usize;
        let data = source.read(offset, len).await?;
        let mut sent = 0usize;
        let mut verf: Option<Writeverf3> = None;
        let mut mixed = false;
        while sent < len {
            let piece = data.slice(sent..);
            let piece_len = piece.len();
            let r = self
                .client
                .write(self.cred, self.fh, offset + sent as u64, piece, StableHow::Unstable)
                .await
                .map_err(|e| nfs_error(self.display, e))?;
            let n = r.count as usize;
            if n == 0 || n > piece_len {
                bail!("{}: server acknowledged {n} bytes of a {piece_len}-byte WRITE", self.display);
            }
            if r.committed == StableHow::Unstable {
                mixed |= verf.is_some_and(|v| v != r.verf);
                verf = Some(r.verf);
            }
            sent += n;
        }
        let ack = match (verf, mixed) {
            (None, _) => ChunkAck::Stable,
            (Some(_), true) => ChunkAck::Mixed,
            (Some(v), false) => ChunkAck::Unstable(v),
        };
        Ok((i, ack, len as u64))
    }
}

/// The test hook: announce, then wait for the go-ahead (see module docs).
async fn pause_before_commit(path: &Path) -> anyhow::Result<()> {
    if !path.exists() {
        return Ok(());
    }
    let ready = PathBuf::from(format!("{}.ready", path.display()));
    File::create(&ready).map_err(|e| local_error(&ready, e))?;
    while path.exists() {
        tokio::time::sleep(PAUSE_POLL).await;
    }
    Ok(())
}

/// The last component of a local path, for naming a copy inside a
/// destination directory.
fn local_name(path: &Path) -> anyhow::Result<String> {
    let name = path.file_name().ok_or_else(|| anyhow!("{}: has no file name to copy to", path.display()))?;
    Ok(name.to_string_lossy().into_owned())
}

/// Where a copy named `name` goes under the URL `dst`: inside it if it is
/// an existing directory, else at it (its parent must exist). Returns the
/// directory handle, the name in it, and how messages call the target.
async fn remote_target(dst: &Remote, name: &str) -> anyhow::Result<(NfsFh3, String, String)> {
    match dst.client.lookup_path(&dst.cred, &dst.path).await {
        Ok((fh, a)) if a.ftype == Ftype3::Dir => {
            let display = dst.child_display(name);
            Ok((fh, name.to_string(), display))
        }
        Ok(_) | Err(NfsError::Nfs(Nfsstat3::Noent)) => match dst.parent().await? {
            Some((dir, last)) => Ok((dir, last, dst.display.clone())),
            None => Err(nfs_error(&dst.display, Nfsstat3::Isdir.into())),
        },
        Err(e) => Err(nfs_error(&dst.display, e)),
    }
}

/// CREATE `name` in `dir` UNCHECKED, truncating an existing file, with
/// `mode`; returns its handle.
async fn create_file(
    client: &AnyClient,
    cred: &Cred,
    dir: &NfsFh3,
    name: &str,
    mode: u32,
    display: &str,
) -> anyhow::Result<NfsFh3> {
    let attrs = Sattr3 { mode: Some(mode & 0o7777), size: Some(0), ..Default::default() };
    let r = client
        .create(cred, dir, name.as_bytes(), Createhow3::Unchecked(attrs))
        .await
        .map_err(|e| nfs_error(display, e))?;
    match r.obj {
        Some(fh) => Ok(fh),
        // The server may leave the handle out; LOOKUP finds it.
        None => {
            Ok(client.lookup(cred, dir, name.as_bytes()).await.map_err(|e| nfs_error(display, e))?.object)
        }
    }
}

// ------------------------------------------------------------------ up

async fn upload_cmd(src: &Path, dst_url: &str, s: &Settings, totals: &mut Totals) -> anyhow::Result<()> {
    let meta = std::fs::metadata(src).map_err(|e| local_error(src, e))?;
    let remote = Remote::connect_with_parent(dst_url).await?;
    let (dir, name, display) = remote_target(&remote, &local_name(src)?).await?;
    if meta.is_dir() {
        if !s.recursive {
            bail!("{}: is a directory (use -r)", src.display());
        }
        return upload_tree(&remote, src.to_path_buf(), dir, name, display, s, totals).await;
    }
    upload_file(&remote, src, &meta, &dir, &name, &display, s, totals).await
}

#[allow(clippy::too_many_arguments)]
async fn upload_file(
    remote: &Remote,
    src: &Path,
    meta: &std::fs::Metadata,
    dir: &NfsFh3,
    name: &str,
    display: &str,
    s: &Settings,
    totals: &mut Totals,
) -> anyhow::Result<()> {
    let file = File::open(src).map_err(|e| local_error(src, e))?;
    let size = meta.len();
    let fh = create_file(&remote.client, &remote.cred, dir, name, meta.permissions().mode(), display).await?;
    let bar = progress_bar(s, size, name);
    let upload = Upload {
        client: &remote.client,
        cred: &remote.cred,
        fh: &fh,
        display,
        size,
        chunk: remote.client.wsize() as u64,
        inflight: s.inflight,
        progress: &bar,
        pause_before_commit: s.pause_before_commit.as_deref(),
    };
    let resent = upload.run(&Source::Local { file: &file, path: src }).await;
    bar.finish_and_clear();
    totals.resent_bytes += resent?;
    totals.files += 1;
    totals.bytes += size;
    Ok(())
}

/// Copy the local directory `src` to `name` in `dir` (made if missing),
/// then everything below it: files, directories, symbolic links.
fn upload_tree<'a>(
    remote: &'a Remote,
    src: PathBuf,
    dir: NfsFh3,
    name: String,
    display: String,
    s: &'a Settings,
    totals: &'a mut Totals,
) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + 'a>> {
    Box::pin(async move {
        let (client, cred) = (&remote.client, &remote.cred);
        let meta = std::fs::metadata(&src).map_err(|e| local_error(&src, e))?;
        let attrs = Sattr3 { mode: Some(meta.permissions().mode() & 0o7777), ..Default::default() };
        let here = match client.mkdir(cred, &dir, name.as_bytes(), attrs).await {
            Ok(r) => match r.obj {
                Some(fh) => fh,
                None => {
                    client
                        .lookup(cred, &dir, name.as_bytes())
                        .await
                        .map_err(|e| nfs_error(&display, e))?
                        .object
                }
            },
            Err(NfsError::Nfs(Nfsstat3::Exist)) => {
                let r =
                    client.lookup(cred, &dir, name.as_bytes()).await.map_err(|e| nfs_error(&display, e))?;
                if r.obj_attributes.is_some_and(|a| a.ftype != Ftype3::Dir) {
                    return Err(nfs_error(&display, Nfsstat3::Notdir.into()));
                }
                r.object
            }
            Err(e) => return Err(nfs_error(&display, e)),
        };
        let mut children: Vec<_> = std::fs::read_dir(&src)
            .map_err(|e| local_error(&src, e))?
            .collect::<Result<_, _>>()
            .map_err(|e| local_error(&src, e))?;
        children.sort_by_key(|e| e.file_name());
        for child in children {
            let path = child.path();
            let child_name = child.file_name().to_string_lossy().into_owned();
            let child_display = format!("{display}/{child_name}");
            let ftype = child.file_type().map_err(|e| local_error(&path, e))?;
            if ftype.is_dir() {
                upload_tree(remote, path, here.clone(), child_name, child_display, s, totals).await?;
            } else if ftype.is_file() {
                let meta = child.metadata().map_err(|e| local_error(&path, e))?;
                upload_file(remote, &path, &meta, &here, &child_name, &child_display, s, totals).await?;
            } else if ftype.is_symlink() {
                let target = std::fs::read_link(&path).map_err(|e| local_error(&path, e))?;
                let target = target.to_string_lossy();
                match client
                    .symlink(cred, &here, child_name.as_bytes(), target.as_bytes(), Sattr3::default())
                    .await
                {
                    Ok(_) => {}
                    Err(NfsError::Nfs(Nfsstat3::Exist)) => {
                        eprintln!("eagernfs: cp: {child_display}: exists, left as it is");
                    }
                    Err(e) => return Err(nfs_error(&child_display, e)),
                }
            } else {
                eprintln!(
                    "eagernfs: cp: {}: not a file, directory or symbolic link; skipped",
                    path.display()
                );
            }
        }
        Ok(())
    })
}

// ---------------------------------------------------------------- down

async fn download_cmd(src_url: &str, dst: &Path, s: &Settings, totals: &mut Totals) -> anyhow::Result<()> {
    let remote = Remote::connect(src_url).await?;
    let (fh, attrs) = remote.resolve().await?;
    let name = match split_parent(&remote.path) {
        Some((_, n)) => n.to_string(),
        None => split_parent(remote.client.export()).map_or("export".to_string(), |(_, n)| n.to_string()),
    };
    let target = if dst.is_dir() { dst.join(&name) } else { dst.to_path_buf() };
    match attrs.ftype {
        Ftype3::Dir if s.recursive => {
            download_tree(&remote, fh, attrs.mode, remote.display.clone(), target, s, totals).await
        }
        Ftype3::Dir => bail!("{}: is a directory (use -r)", remote.display),
        Ftype3::Reg => download_file(&remote, &fh, &attrs, &remote.display, &target, s, totals).await,
        _ => bail!("{}: not a regular file (symbolic links are not followed)", remote.display),
    }
}

async fn download_file(
    remote: &Remote,
    fh: &NfsFh3,
    attrs: &Fattr3,
    display: &str,
    target: &Path,
    s: &Settings,
    totals: &mut Totals,
) -> anyhow::Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(attrs.mode & 0o7777)
        .open(target)
        .map_err(|e| local_error(target, e))?;
    let name = target.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let bar = progress_bar(s, attrs.size, &name);
    let len = fetch(
        display,
        &remote.client,
        &remote.cred,
        fh,
        attrs.size,
        s.inflight,
        Delivery::AsArrived,
        |offset, data| {
            file.write_all_at(&data, offset).map_err(|e| local_error(target, e))?;
            bar.inc(data.len() as u64);
            Ok(())
        },
    )
    .await;
    bar.finish_and_clear();
    let len = len?;
    // The server's end of file is the copy's, even where the last bytes
    // were a hole no READ data landed in.
    file.set_len(len).map_err(|e| local_error(target, e))?;
    if s.fsync {
        file.sync_all().map_err(|e| local_error(target, e))?;
    }
    totals.files += 1;
    totals.bytes += len;
    Ok(())
}

/// Copy the remote directory `dir` to the local path `target` (made if
/// missing, given `mode` at the end), then everything below it.
fn download_tree<'a>(
    remote: &'a Remote,
    dir: NfsFh3,
    mode: u32,
    display: String,
    target: PathBuf,
    s: &'a Settings,
    totals: &'a mut Totals,
) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + 'a>> {
    Box::pin(async move {
        let (client, cred) = (&remote.client, &remote.cred);
        match std::fs::create_dir(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && target.is_dir() => {}
            Err(e) => return Err(local_error(&target, e)),
        }
        let mut entries = list_dir(client, cred, &dir, true).await.map_err(|e| nfs_error(&display, e))?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for e in entries.iter().filter(|e| !e.is_dot_or_dotdot()) {
            let name = e.name_lossy();
            let child_display = format!("{display}/{name}");
            let child_target = target.join(&name);
            let (Some(attrs), Some(fh)) = (e.attrs, &e.fh) else {
                eprintln!("eagernfs: cp: {child_display}: vanished during the copy; skipped");
                continue;
            };
            match attrs.ftype {
                Ftype3::Dir => {
                    download_tree(remote, fh.clone(), attrs.mode, child_display, child_target, s, totals)
                        .await?;
                }
                Ftype3::Reg => {
                    download_file(remote, fh, &attrs, &child_display, &child_target, s, totals).await?
                }
                Ftype3::Lnk => {
                    let link = client.readlink(cred, fh).await.map_err(|e| nfs_error(&child_display, e))?;
                    let link = String::from_utf8_lossy(link.data.as_bytes()).into_owned();
                    std::os::unix::fs::symlink(&link, &child_target)
                        .map_err(|e| local_error(&child_target, e))?;
                }
                _ => eprintln!(
                    "eagernfs: cp: {child_display}: not a file, directory or symbolic link; skipped"
                ),
            }
        }
        // Last, so a read-only directory does not stop its own copy.
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode & 0o7777))
            .map_err(|e| local_error(&target, e))?;
        Ok(())
    })
}

// ------------------------------------------------------- URL to URL

async fn remote_copy_cmd(
    src_url: &str,
    dst_url: &str,
    s: &Settings,
    totals: &mut Totals,
) -> anyhow::Result<()> {
    let src = Remote::connect(src_url).await?;
    let (sfh, sattrs) = src.resolve().await?;
    if sattrs.ftype != Ftype3::Reg {
        bail!("{}: not a regular file (URL to URL copies take one file)", src.display);
    }
    let name = split_parent(&src.path).map_or("file".to_string(), |(_, n)| n.to_string());
    let dst = Remote::connect_with_parent(dst_url).await?;
    let (dir, name, display) = remote_target(&dst, &name).await?;
    let fh = create_file(&dst.client, &dst.cred, &dir, &name, sattrs.mode, &display).await?;
    let bar = progress_bar(s, sattrs.size, &name);
    let upload = Upload {
        client: &dst.client,
        cred: &dst.cred,
        fh: &fh,
        display: &display,
        size: sattrs.size,
        chunk: dst.client.wsize().min(src.client.rsize()) as u64,
        inflight: s.inflight,
        progress: &bar,
        pause_before_commit: s.pause_before_commit.as_deref(),
    };
    let source = Source::Remote { client: &src.client, cred: &src.cred, fh: &sfh, display: &src.display };
    let resent = upload.run(&source).await;
    bar.finish_and_clear();
    totals.resent_bytes += resent?;
    totals.files += 1;
    totals.bytes += sattrs.size;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_set_merges_out_of_order_inserts() {
        let mut s = RangeSet::default();
        for i in [3, 1, 0, 2, 7, 5, 6] {
            s.insert(i);
        }
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 5, 6, 7]);
        assert_eq!(s.range_count(), 2);
        s.insert(4);
        assert_eq!(s.range_count(), 1);
        s.insert(4);
        assert_eq!(s.iter().count(), 8);
        s.insert_range(20, 30);
        s.insert_range(10, 25);
        assert_eq!(s.range_count(), 2);
        assert_eq!(s.iter().filter(|&i| i >= 10).count(), 20);
    }

    #[test]
    fn range_set_bytes_counts_a_short_last_chunk() {
        let s = RangeSet::from_range(0, 3);
        assert_eq!(s.bytes(2 * 1024 + 7, 1024), 2 * 1024 + 7);
        let s = RangeSet::from_range(1, 2);
        assert_eq!(s.bytes(2 * 1024 + 7, 1024), 1024);
    }

    #[test]
    fn lost_chunks_are_those_under_other_verifiers() {
        let mut v = Verifiers::default();
        let (old, new) = ([1u8; 8], [2u8; 8]);
        for i in 0..10 {
            v.record(i, if i < 4 { old } else { new });
        }
        v.record_mixed(12);
        let lost = v.lost(&new);
        assert_eq!(lost.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 12]);
        assert_eq!(v.lost(&old).iter().count(), 7);
    }

    #[test]
    fn a_million_chunks_in_order_cost_one_range() {
        let mut v = Verifiers::default();
        for i in 0..1_000_000u64 {
            // Acknowledged up to 16 out of order, as the pipeline does.
            v.record(i ^ 0xf, [7; 8]);
        }
        assert_eq!(v.by_verf[&[7; 8]].range_count(), 1);
    }
}
