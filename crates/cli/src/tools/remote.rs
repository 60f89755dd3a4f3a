//! What every tool needs on the NFS side: connecting to a URL, walking its
//! path, listing directories, reading files with several READs in flight,
//! and errors that read like a local tool's.
//!
//! # Layout
//! - [`Remote`]: one URL, connected: client, credential, path below the
//!   export, and the URL as the user wrote it (for messages).
//! - [`describe`] / [`nfs_error`]: `Permission denied (NFS3ERR_ACCES)`.
//! - [`list_dir`]: READDIRPLUS, falling back to READDIR + LOOKUP.
//! - [`read_range`] / [`fetch`]: pipelined READs delivered in order or as
//!   they arrive.

use anyhow::anyhow;
use bytes::{Bytes, BytesMut};
use eagernfs_client::{AnyClient, Cred, NfsError, NfsOps, NfsResult, NfsUrl};
use eagernfs_proto::nfs3::{Fattr3, Ftype3, NfsFh3, Nfsstat3};
use futures::stream::{FuturesOrdered, FuturesUnordered, StreamExt};
use std::future::Future;

/// `true` for an `nfs://` URL (any case), `false` for a local path.
pub(crate) fn is_url(s: &str) -> bool {
    s.get(..6).is_some_and(|p| p.eq_ignore_ascii_case("nfs://"))
}

/// One connected URL.
pub(crate) struct Remote {
    /// The mounted export (clones share the connections).
    pub(crate) client: AnyClient,
    /// Who we act as: `uid=`/`gid=` from the URL, else this process.
    pub(crate) cred: Cred,
    /// The URL without its query: what messages call the object, and the
    /// base for naming things below it.
    pub(crate) display: String,
    /// The URL's path below the export (`/` for the export's root).
    pub(crate) path: String,
}

impl Remote {
    /// Mount the export `url` names and connect.
    pub(crate) async fn connect(url: &str) -> anyhow::Result<Remote> {
        let display = url.split('?').next().unwrap_or(url).trim_end_matches('/').to_string();
        let client = connect_client(url, &display).await?;
        let cred = client.default_cred();
        let path = client.path_inside().to_string();
        Ok(Remote { client, cred, display, path })
    }

    /// Like [`Remote::connect`], but so that the URL's object has a parent
    /// inside the mount whenever the server allows: a server that mounts
    /// subdirectories (eagernfs, Linux) would otherwise make a URL naming a
    /// directory the root of its own mount, and `rm` or `mkdir` could not
    /// reach the directory it lives in. So the parent is tried as the export
    /// first; if that is refused, the URL is mounted as [`Remote::connect`]
    /// does (its object is then below the export, or is an export itself).
    ///
    /// The parent goes first so that only one NFS connection is ever made:
    /// mounting the URL and then its parent would open (and FSINFO) a
    /// connection only to throw it away.
    pub(crate) async fn connect_with_parent(url: &str) -> anyhow::Result<Remote> {
        let display = url.split('?').next().unwrap_or(url).trim_end_matches('/').to_string();
        let parsed = url.parse::<NfsUrl>().ok();
        let parent = parsed.as_ref().filter(|p| p.export.is_none()).and_then(|p| {
            // `export=` in the URL: the user said where the export is.
            let (parent, name) = split_parent(&p.path)?;
            Some((NfsUrl { path: parent.to_string(), export: Some(parent.to_string()), ..p.clone() }, name))
        });
        if let Some((parent_url, name)) = parent {
            match AnyClient::connect_url(&parent_url).await {
                Ok(client) => {
                    let cred = client.default_cred();
                    return Ok(Remote { client, cred, display, path: format!("/{name}") });
                }
                // The server is unreachable: asking again for the URL itself
                // would only wait as long a second time.
                Err(e @ (NfsError::Connection(_) | NfsError::TimedOut)) => {
                    return Err(nfs_error(&display, e))
                }
                Err(_) => {}
            }
        }
        Remote::connect(url).await
    }

    /// The handle and attributes of the URL's own object.
    pub(crate) async fn resolve(&self) -> anyhow::Result<(NfsFh3, Fattr3)> {
        self.client.lookup_path(&self.cred, &self.path).await.map_err(|e| nfs_error(&self.display, e))
    }

    /// The URL's parent directory and last name; `None` for the export's
    /// root, which has no parent inside the export.
    pub(crate) async fn parent(&self) -> anyhow::Result<Option<(NfsFh3, String)>> {
        let Some((parent, name)) = split_parent(&self.path) else { return Ok(None) };
        let (fh, attrs) =
            self.client.lookup_path(&self.cred, parent).await.map_err(|e| nfs_error(&self.display, e))?;
        if attrs.ftype != Ftype3::Dir {
            return Err(nfs_error(&self.display, NfsError::Nfs(Nfsstat3::Notdir)));
        }
        Ok(Some((fh, name.to_string())))
    }

    /// How messages name `rel` below this URL.
    pub(crate) fn child_display(&self, rel: &str) -> String {
        format!("{}/{}", self.display, rel.trim_start_matches('/'))
    }
}

/// Mount the export `url` names (the client finds it among the path's prefixes).
async fn connect_client(url: &str, display: &str) -> anyhow::Result<AnyClient> {
    // The client tries the URL's path prefixes as the export itself (longest first).
    AnyClient::connect(url).await.map_err(|e| nfs_error(display, e))
}

/// `/a/b/c` → (`/a/b`, `c`); `/c` → (`/`, `c`); `/` → `None`.
pub(crate) fn split_parent(path: &str) -> Option<(&str, &str)> {
    let path = path.trim_end_matches('/');
    let (parent, name) = path.rsplit_once('/')?;
    if name.is_empty() {
        return None;
    }
    Some((if parent.is_empty() { "/" } else { parent }, name))
}

/// The NFS3ERR_ name RFC 1813 gives a status.
pub(crate) fn nfsstat_name(s: Nfsstat3) -> &'static str {
    use Nfsstat3::*;
    match s {
        Ok => "NFS3_OK",
        Perm => "NFS3ERR_PERM",
        Noent => "NFS3ERR_NOENT",
        Io => "NFS3ERR_IO",
        Nxio => "NFS3ERR_NXIO",
        Acces => "NFS3ERR_ACCES",
        Exist => "NFS3ERR_EXIST",
        Xdev => "NFS3ERR_XDEV",
        Nodev => "NFS3ERR_NODEV",
        Notdir => "NFS3ERR_NOTDIR",
        Isdir => "NFS3ERR_ISDIR",
        Inval => "NFS3ERR_INVAL",
        Fbig => "NFS3ERR_FBIG",
        Nospc => "NFS3ERR_NOSPC",
        Rofs => "NFS3ERR_ROFS",
        Mlink => "NFS3ERR_MLINK",
        Nametoolong => "NFS3ERR_NAMETOOLONG",
        Notempty => "NFS3ERR_NOTEMPTY",
        Dquot => "NFS3ERR_DQUOT",
        Stale => "NFS3ERR_STALE",
        Remote => "NFS3ERR_REMOTE",
        Badhandle => "NFS3ERR_BADHANDLE",
        NotSync => "NFS3ERR_NOT_SYNC",
        BadCookie => "NFS3ERR_BAD_COOKIE",
        Notsupp => "NFS3ERR_NOTSUPP",
        Toosmall => "NFS3ERR_TOOSMALL",
        Serverfault => "NFS3ERR_SERVERFAULT",
        Badtype => "NFS3ERR_BADTYPE",
        Jukebox => "NFS3ERR_JUKEBOX",
    }
}

/// The C library's sentence for an errno ("Permission denied"), without
/// Rust's " (os error 13)" suffix.
pub(crate) fn strerror(errno: i32) -> String {
    let s = std::io::Error::from_raw_os_error(errno).to_string();
    match s.rfind(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// An NFS failure as a person reads it: the local errno's sentence and the
/// protocol status (`Permission denied (NFS3ERR_ACCES)`); transport and
/// mount failures keep their own sentences.
pub(crate) fn describe(e: &NfsError) -> String {
    match e {
        NfsError::Nfs(s) => format!("{} ({})", strerror(e.errno()), nfsstat_name(*s)),
        NfsError::Nfs4(s) => format!("{} (NFS4ERR_{})", strerror(e.errno()), upper_snake(&format!("{s:?}"))),
        other => other.to_string(),
    }
}

/// `ShareDenied` → `SHARE_DENIED` (an NFSv4 status's RFC name from its Rust one).
fn upper_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// `what: <describe(e)>` as an error.
pub(crate) fn nfs_error(what: &str, e: NfsError) -> anyhow::Error {
    anyhow!("{what}: {}", describe(&e))
}

/// One directory entry as the tools need it.
#[derive(Clone, Debug)]
pub(crate) struct DirEntry {
    /// The name, as the server spelled it (not necessarily UTF-8).
    pub(crate) name: Bytes,
    /// Attributes, when asked for and the server gave them.
    pub(crate) attrs: Option<Fattr3>,
    /// Handle, when asked for and the server gave it.
    pub(crate) fh: Option<NfsFh3>,
}

impl DirEntry {
    pub(crate) fn is_dot_or_dotdot(&self) -> bool {
        &self.name[..] == b"." || &self.name[..] == b".."
    }

    pub(crate) fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

/// READDIRPLUS sizes: `dircount` bounds the names and cookies per reply,
/// `maxcount` the whole reply. Modest values keep each reply small enough
/// to decode quickly while a 1000-entry directory still takes only a few
/// round trips.
const READDIRPLUS_DIRCOUNT_BYTES: u32 = 16 * 1024;
const READDIRPLUS_MAXCOUNT_BYTES: u32 = 64 * 1024;
const READDIR_COUNT_BYTES: u32 = 32 * 1024;
/// LOOKUPs in flight when READDIR has to be followed by one per entry.
const LOOKUPS_IN_FLIGHT: usize = 16;

/// Every entry of the directory `dir`, in the server's order (`.` and `..`
/// included if the server sends them). With `want_attrs`, each entry has
/// attributes and a handle: READDIRPLUS gives both at once; a server
/// without it (NFS3ERR_NOTSUPP) gets READDIR and a LOOKUP per entry.
pub(crate) async fn list_dir(
    client: &AnyClient,
    cred: &Cred,
    dir: &NfsFh3,
    want_attrs: bool,
) -> NfsResult<Vec<DirEntry>> {
    if want_attrs {
        match list_dir_plus(client, cred, dir).await {
            Err(NfsError::Nfs(Nfsstat3::Notsupp)) => {}
            other => return other,
        }
    }
    let mut entries = list_dir_plain(client, cred, dir).await?;
    if want_attrs {
        let looked_up: Vec<NfsResult<(NfsFh3, Option<Fattr3>)>> =
            futures::stream::iter(entries.iter().map(|e| async move {
                let r = client.lookup(cred, dir, &e.name).await?;
                Ok((r.object, r.obj_attributes))
            }))
            .buffered(LOOKUPS_IN_FLIGHT)
            .collect()
            .await;
        for (e, r) in entries.iter_mut().zip(looked_up) {
            match r {
                Ok((fh, attrs)) => {
                    e.fh = Some(fh);
                    e.attrs = attrs;
                }
                // Removed between READDIR and LOOKUP: listed without attributes.
                Err(NfsError::Nfs(Nfsstat3::Noent)) => {}
                Err(err) => return Err(err),
            }
        }
    }
    Ok(entries)
}

async fn list_dir_plus(client: &AnyClient, cred: &Cred, dir: &NfsFh3) -> NfsResult<Vec<DirEntry>> {
    let mut out = Vec::new();
    let (mut cookie, mut verf) = (0u64, [0u8; 8]);
    loop {
        let res = client
            .readdirplus(cred, dir, cookie, verf, READDIRPLUS_DIRCOUNT_BYTES, READDIRPLUS_MAXCOUNT_BYTES)
            .await?;
        verf = res.cookieverf;
        let page_empty = res.reply.entries.is_empty();
        for e in res.reply.entries {
            cookie = e.cookie;
            out.push(DirEntry { name: e.name.0, attrs: e.name_attributes, fh: e.name_handle });
        }
        if res.reply.eof {
            return Ok(out);
        }
        if page_empty {
            // Neither progress nor an end: asking again would loop for ever.
            return Err(NfsError::BadReply("READDIRPLUS returned no entries and no end of directory".into()));
        }
    }
}

async fn list_dir_plain(client: &AnyClient, cred: &Cred, dir: &NfsFh3) -> NfsResult<Vec<DirEntry>> {
    let mut out = Vec::new();
    let (mut cookie, mut verf) = (0u64, [0u8; 8]);
    loop {
        let res = client.readdir(cred, dir, cookie, verf, READDIR_COUNT_BYTES).await?;
        verf = res.cookieverf;
        let page_empty = res.reply.entries.is_empty();
        for e in res.reply.entries {
            cookie = e.cookie;
            out.push(DirEntry { name: e.name.0, attrs: None, fh: None });
        }
        if res.reply.eof {
            return Ok(out);
        }
        if page_empty {
            return Err(NfsError::BadReply("READDIR returned no entries and no end of directory".into()));
        }
    }
}

/// Read `[offset, offset + len)`, sending more READs if the server returns
/// less than asked (it may). Returns the bytes (fewer at end of file) and
/// whether the end of the file was reached.
pub(crate) async fn read_range(
    client: &AnyClient,
    cred: &Cred,
    fh: &NfsFh3,
    offset: u64,
    len: u32,
) -> NfsResult<(Bytes, bool)> {
    let first = client.read(cred, fh, offset, len).await?;
    check_read_len(first.data.len(), len)?;
    if first.eof || first.data.len() == len as usize || first.data.is_empty() {
        // An empty reply without eof would make us ask again for ever;
        // treat it as the end, as a local read() returning 0 is.
        let eof = first.eof || first.data.is_empty();
        return Ok((first.data, eof));
    }
    let mut buf = BytesMut::with_capacity(len as usize);
    buf.extend_from_slice(&first.data);
    while buf.len() < len as usize {
        let want = len - buf.len() as u32;
        let more = client.read(cred, fh, offset + buf.len() as u64, want).await?;
        check_read_len(more.data.len(), want)?;
        buf.extend_from_slice(&more.data);
        if more.eof || more.data.is_empty() {
            return Ok((buf.freeze(), true));
        }
    }
    Ok((buf.freeze(), false))
}

fn check_read_len(got: usize, asked: u32) -> NfsResult<()> {
    if got > asked as usize {
        return Err(NfsError::BadReply(format!("READ returned {got} bytes for a request of {asked}")));
    }
    Ok(())
}

/// [`read_range`] tagged with its offset, for a pipeline of them.
async fn read_at(
    client: &AnyClient,
    cred: &Cred,
    fh: &NfsFh3,
    offset: u64,
    len: u32,
) -> (u64, NfsResult<(Bytes, bool)>) {
    (offset, read_range(client, cred, fh, offset, len).await)
}

/// In what order [`fetch`] hands chunks to its sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// File order (for a stream such as stdout).
    InOrder,
    /// As replies arrive (for a sink that writes at offsets).
    AsArrived,
}

/// Futures in flight, handed back in push order or as they finish.
enum Pipeline<F: Future> {
    Ordered(FuturesOrdered<F>),
    Unordered(FuturesUnordered<F>),
}

impl<F: Future> Pipeline<F> {
    fn new(delivery: Delivery) -> Self {
        match delivery {
            Delivery::InOrder => Pipeline::Ordered(FuturesOrdered::new()),
            Delivery::AsArrived => Pipeline::Unordered(FuturesUnordered::new()),
        }
    }
    fn push(&mut self, f: F) {
        match self {
            Pipeline::Ordered(q) => q.push_back(f),
            Pipeline::Unordered(q) => q.push(f),
        }
    }
    fn len(&self) -> usize {
        match self {
            Pipeline::Ordered(q) => q.len(),
            Pipeline::Unordered(q) => q.len(),
        }
    }
    async fn next(&mut self) -> Option<F::Output> {
        match self {
            Pipeline::Ordered(q) => q.next().await,
            Pipeline::Unordered(q) => q.next().await,
        }
    }
}

/// Read a whole file (`what` names it in errors) with up to `inflight` READs of `rsize` bytes in
/// flight, giving each non-empty chunk to `sink(offset, data)`.
///
/// `size_hint` (the size GETATTR/LOOKUP reported) decides how many READs
/// to send at once; the file's real end is where the server says eof, so a
/// file that shrank stops early and one that grew is read on, one READ at
/// a time, until eof. Returns the length read. Memory held is at most
/// `inflight * rsize` bytes (for [`Delivery::InOrder`], finished chunks wait
/// behind a slow one, but no new READ is sent past the window).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn fetch<S>(
    what: &str,
    client: &AnyClient,
    cred: &Cred,
    fh: &NfsFh3,
    size_hint: u64,
    inflight: usize,
    delivery: Delivery,
    mut sink: S,
) -> anyhow::Result<u64>
where
    S: FnMut(u64, Bytes) -> anyhow::Result<()>,
{
    let rsize = client.rsize().max(1);
    let inflight = inflight.max(1);
    let mut queue = Pipeline::new(delivery);
    let mut next = 0u64;
    // Where the server said the file ends (the least such offset).
    let mut end: Option<u64> = None;
    loop {
        while queue.len() < inflight && next < size_hint && !matches!(end, Some(e) if next >= e) {
            let len = (size_hint - next).min(rsize as u64) as u32;
            let offset = next;
            queue.push(read_at(client, cred, fh, offset, len));
            next += len as u64;
        }
        if queue.len() == 0 {
            if end.is_some() {
                break;
            }
            // Everything up to the size we were told has been read and
            // no reply said eof: the file grew, keep reading.
            let offset = next;
            queue.push(read_at(client, cred, fh, offset, rsize));
            next += rsize as u64;
        }
        let Some((offset, result)) = queue.next().await else { break };
        let (data, eof) = result.map_err(|e| nfs_error(what, e))?;
        if eof {
            let here = offset + data.len() as u64;
            end = Some(end.map_or(here, |e| e.min(here)));
        }
        if !data.is_empty() {
            sink(offset, data)?;
        }
    }
    Ok(end.unwrap_or(next))
}
