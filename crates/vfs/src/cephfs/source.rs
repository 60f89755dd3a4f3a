//! `cephfs://[ID@]FSNAME/PATH?conf=CONF`: how a user names a directory of a
//! CephFS, on the command line and in exports(5) files.
//!
//! - `ID`: the cephx client name without `client.` (default `admin`), whose
//!   key the keyring named in CONF holds.
//! - `FSNAME`: the file system (`ceph fs ls`).
//! - `PATH`: the directory of that file system to serve (default `/`); it
//!   is also the path clients mount, as a local directory's is.
//! - `conf=CONF`: the cluster's configuration file (default
//!   `/etc/ceph/ceph.conf`).
//!
//! Bytes that would end a field can be written as `%XX` (`%20` is a space).

use std::fmt;
use std::path::PathBuf;

/// The URL scheme.
pub const SCHEME: &str = "cephfs://";

/// The configuration file used when the URL names none.
pub const DEFAULT_CONF: &str = "/etc/ceph/ceph.conf";

/// The client name used when the URL names none.
pub const DEFAULT_CLIENT: &str = "admin";

/// A parsed `cephfs://` URL.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CephFsSource {
    /// cephx client name, without `client.`.
    pub client_id: String,
    /// File system name.
    pub fs_name: String,
    /// Absolute, normalised path inside the file system (`/` for its root).
    pub path: String,
    /// `ceph.conf` to read.
    pub conf: PathBuf,
}

/// Why a `cephfs://` URL was refused: says what to write instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

fn err(url: &str, what: impl fmt::Display) -> SourceError {
    SourceError(format!(
        "{url:?}: {what}; write cephfs://[ID@]FSNAME/PATH?conf=CONF, e.g. cephfs://admin@cephfs/shared?conf=/etc/ceph/ceph.conf"
    ))
}

/// `%XX` escapes to bytes; any other `%` is an error.
fn unescape(url: &str, s: &str) -> Result<String, SourceError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let v = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
            match v {
                Some(v) if v != 0 => out.push(v),
                _ => return Err(err(url, "a '%' must start an escape of two hex digits, such as %20")),
            }
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| err(url, "escapes must make UTF-8 text"))
}

/// True if `s` names a CephFS (starts with the scheme).
pub fn is_cephfs_url(s: &str) -> bool {
    s.as_bytes().get(..SCHEME.len()).is_some_and(|b| b.eq_ignore_ascii_case(SCHEME.as_bytes()))
}

impl CephFsSource {
    /// Parse a `cephfs://` URL.
    pub fn parse(url: &str) -> Result<CephFsSource, SourceError> {
        if !is_cephfs_url(url) {
            return Err(err(url, "not a cephfs:// URL"));
        }
        let rest = &url[SCHEME.len()..];
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (client_id, fs_name) = match authority.split_once('@') {
            Some((id, fs)) => (unescape(url, id)?, unescape(url, fs)?),
            None => (DEFAULT_CLIENT.to_string(), unescape(url, authority)?),
        };
        let client_id = client_id.strip_prefix("client.").map(str::to_string).unwrap_or(client_id);
        if client_id.is_empty() || client_id.contains(|c: char| c.is_whitespace() || c == '/') {
            return Err(err(url, format!("{client_id:?} is not a client name (the part before '@')")));
        }
        if fs_name.is_empty() {
            return Err(err(url, "the file system name (after '//') is missing"));
        }
        if fs_name.contains(|c: char| c.is_whitespace() || c == '@' || c == ':') {
            return Err(err(url, format!("{fs_name:?} is not a file system name")));
        }
        let path = unescape(url, path)?;
        let mut parts = Vec::new();
        for c in path.split('/') {
            match c {
                "" | "." => {}
                ".." => return Err(err(url, "the path may not contain \"..\"")),
                c => parts.push(c),
            }
        }
        let path = format!("/{}", parts.join("/"));
        let mut conf = PathBuf::from(DEFAULT_CONF);
        if let Some(q) = query {
            for pair in q.split('&').filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                match k {
                    "conf" if !v.is_empty() => conf = PathBuf::from(unescape(url, v)?),
                    "conf" => return Err(err(url, "conf= needs the path of a ceph.conf")),
                    other => {
                        return Err(err(url, format!("unknown option {other:?} (the one option is conf=)")))
                    }
                }
            }
        }
        if !conf.is_absolute() {
            return Err(err(url, format!("conf={} must be an absolute path", conf.display())));
        }
        Ok(CephFsSource { client_id, fs_name, path, conf })
    }

    /// The path clients mount: the directory's path in its file system.
    pub fn export_path(&self) -> PathBuf {
        PathBuf::from(&self.path)
    }
}

/// `%XX` for every byte that could end a field here or in an exports(5)
/// line (whitespace, `#`, quotes, parentheses, `?`, `&`, `%`, controls).
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl fmt::Display for CephFsSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let esc = escape;
        write!(
            f,
            "{SCHEME}{}@{}{}?conf={}",
            esc(&self.client_id),
            esc(&self.fs_name),
            esc(&self.path),
            esc(&self.conf.to_string_lossy())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_full_form() {
        let s = CephFsSource::parse("cephfs://cephfs").unwrap();
        assert_eq!(
            s,
            CephFsSource {
                client_id: "admin".into(),
                fs_name: "cephfs".into(),
                path: "/".into(),
                conf: DEFAULT_CONF.into()
            }
        );
        let s = CephFsSource::parse("cephfs://nfs@data/a//b/./c/?conf=/tmp/c%20d/ceph.conf").unwrap();
        assert_eq!((s.client_id.as_str(), s.fs_name.as_str(), s.path.as_str()), ("nfs", "data", "/a/b/c"));
        assert_eq!(s.conf, PathBuf::from("/tmp/c d/ceph.conf"));
        assert_eq!(CephFsSource::parse("CEPHFS://client.x@fs/").unwrap().client_id, "x");
    }

    #[test]
    fn display_parses_back() {
        for u in
            ["cephfs://cephfs", "cephfs://nfs@data/a b/c?conf=/x%3Fy/ceph.conf", "cephfs://f/(a)#b/\u{e9}"]
        {
            let s = CephFsSource::parse(u).unwrap();
            let shown = s.to_string();
            assert!(!shown.contains(|c: char| c.is_whitespace() || "#()\"".contains(c)), "{shown}");
            assert_eq!(CephFsSource::parse(&shown).unwrap(), s, "{s}");
        }
    }

    #[test]
    fn mistakes_are_named() {
        for (u, says) in [
            ("cephfs://", "file system name"),
            ("cephfs://@fs/x", "client name"),
            ("cephfs://fs/a/../b", ".."),
            ("cephfs://fs/a?conf=rel/ceph.conf", "absolute"),
            ("cephfs://fs/a?conff=/x", "unknown option"),
            ("cephfs://fs/a%2", "escape"),
            ("nfs://fs/a", "not a cephfs"),
            ("/srv/caf\u{e9}", "not a cephfs"),
        ] {
            let e = CephFsSource::parse(u).unwrap_err().to_string();
            assert!(e.contains(says), "{u}: {e}");
            assert!(e.contains("cephfs://[ID@]FSNAME/PATH?conf=CONF"), "{e}");
        }
    }
}
