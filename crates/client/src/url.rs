//! `nfs://host[:port]/export/path?options` URLs, as libnfs writes them.
//!
//! The host may be a name, an IPv4 address or a bracketed IPv6 address
//! (`nfs://[::1]:2049/x`). The port, if given, is the NFS port. Ours: several
//! addresses separated by commas (`nfs://h1,h2:2050,[::1]/x`) name the heads
//! of one cluster serving the same export with the same file handles; the
//! client mounts through the first that answers and moves to the next when
//! its connection fails (see `driver.rs`). The path is
//! the export followed by a path inside it; which part is the export is
//! found at mount time (the longest prefix the server's MOUNT accepts, see
//! `mount.rs`) unless the query names it with `export=/x` (ours). The query
//! holds mount options `name[=value]` separated by `&` (or `,`): libnfs's
//! (`nfsport`, `mountport`, `version`, `uid`, `gid`) and every option of
//! [`MountOptions`]. Path and values are percent-decoded.
//!
//! # Layout
//! - [`NfsUrl`]: the parsed URL; `FromStr` parses, `Display` writes a URL
//!   that parses back to the same value.
//! - [`UrlError`]: what was wrong, naming the part.

use crate::options::{MountOptions, OptionError};
use std::fmt;
use std::str::FromStr;

/// A parsed `nfs://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NfsUrl {
    /// Host name or address, without IPv6 brackets (the first address).
    pub host: String,
    /// The port after the host: the NFS port.
    pub port: Option<u16>,
    /// The addresses after the first (`nfs://h1,h2,h3/…`): other heads
    /// serving the same export with the same file handles, in order.
    pub alternates: Vec<Address>,
    /// The absolute path after the host, normalised (no empty or `.`
    /// components, no trailing slash; `/` for none).
    pub path: String,
    /// The export, when the URL says which prefix of `path` it is
    /// (`?export=/x`); otherwise found at mount time.
    pub export: Option<String>,
    /// The options of the query.
    pub options: MountOptions,
}

/// One address of a URL: a host and, if given, its NFS port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    /// Host name or address, without IPv6 brackets.
    pub host: String,
    pub port: Option<u16>,
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

/// Most addresses one URL may name.
pub const ADDRESSES_MAX: usize = 32;

/// Why a URL did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("not an NFS URL (expected nfs://host[:port]/path): {0}")]
    Scheme(String),
    #[error("NFS URL has no host: {0}")]
    NoHost(String),
    #[error("empty address number {0} in NFS URL (expected nfs://host1[:port],host2[:port]/path): {1}")]
    EmptyAddress(usize, String),
    #[error("too many addresses in NFS URL ({0}; at most {ADDRESSES_MAX}): {1}")]
    TooManyAddresses(usize, String),
    #[error("IPv6 address '{0}' in NFS URL must be in brackets ([{0}]): {1}")]
    Ipv6NoBrackets(String, String),
    #[error("bad port '{0}' in NFS URL (expected 1-65535)")]
    Port(String),
    #[error("bad IPv6 host in NFS URL (expected [address]): {0}")]
    Ipv6(String),
    #[error("path in NFS URL may not contain '..': {0}")]
    DotDot(String),
    #[error("bad percent-encoding in NFS URL: {0}")]
    Encoding(String),
    #[error("export {export} is not a prefix of the URL path {path}")]
    ExportNotPrefix { export: String, path: String },
    #[error("in NFS URL: {0}")]
    Option(#[from] OptionError),
}

impl NfsUrl {
    /// Every address of the URL, the first (`host`, `port`) first.
    pub fn addresses(&self) -> Vec<Address> {
        let first = Address { host: self.host.clone(), port: self.port };
        std::iter::once(first).chain(self.alternates.iter().cloned()).collect()
    }

    /// The addresses as the URL writes them: `h1:2049,[::1],h3`.
    pub fn authority(&self) -> String {
        self.addresses().iter().map(Address::to_string).collect::<Vec<_>>().join(",")
    }

    /// The NFS port the URL asks for: `nfsport=` wins over the URL's port.
    pub fn nfs_port(&self) -> Option<u16> {
        self.options.nfsport.or(self.port)
    }

    /// `host:port` as a string for `ToSocketAddrs`, with IPv6 brackets.
    pub fn host_port(&self, port: u16) -> String {
        if self.host.contains(':') {
            format!("[{}]:{port}", self.host)
        } else {
            format!("{}:{port}", self.host)
        }
    }

    /// The path components (after normalisation) as strings.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.path.split('/').filter(|c| !c.is_empty())
    }

    /// Split the path at `export`: the path inside the export, normalised
    /// (`/` for the export's root).
    pub fn path_inside(&self, export: &str) -> Option<String> {
        let export = normalise(export).ok()?;
        if export == "/" {
            return Some(self.path.clone());
        }
        let rest = self.path.strip_prefix(&export)?;
        if rest.is_empty() {
            Some("/".into())
        } else if rest.starts_with('/') {
            Some(rest.to_string())
        } else {
            None // "/exports" is not a prefix of "/exportsfoo"
        }
    }
}

/// Normalise an absolute path: no empty or `.` components; `..` refused.
pub fn normalise(path: &str) -> Result<String, UrlError> {
    let mut out = String::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err(UrlError::DotDot(path.to_string())),
            c => {
                out.push('/');
                out.push_str(c);
            }
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

impl FromStr for NfsUrl {
    type Err = UrlError;

    fn from_str(s: &str) -> Result<Self, UrlError> {
        let rest = s
            .strip_prefix("nfs://")
            .or_else(|| s.get(..6).filter(|p| p.eq_ignore_ascii_case("nfs://")).map(|_| &s[6..]))
            .ok_or_else(|| UrlError::Scheme(s.to_string()))?;
        let (authority, rest) = match rest.find(['/', '?']) {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(UrlError::NoHost(s.to_string()));
        }
        let n = authority.split(',').count();
        if n > ADDRESSES_MAX {
            return Err(UrlError::TooManyAddresses(n, s.to_string()));
        }
        let mut addresses = Vec::with_capacity(n);
        for (i, a) in authority.split(',').enumerate() {
            addresses.push(parse_address(a, i + 1, s)?);
        }
        let first = addresses.remove(0);
        let (host, port, alternates) = (first.host, first.port, addresses);
        let (raw_path, query) = match rest.split_once('?') {
            Some((p, q)) => (p, q),
            None => (rest, ""),
        };
        let path = normalise(&percent_decode(raw_path)?)?;
        let mut options = MountOptions::default();
        let mut export = None;
        // libnfs separates options with `&`; mount(8) habit writes `,`.
        // Both work (a literal comma in a value is written %2C).
        for item in query.split(['&', ',']).filter(|i| !i.is_empty()) {
            let (name, value) = match item.split_once('=') {
                Some((n, v)) => (percent_decode(n)?, Some(percent_decode(v)?)),
                None => (percent_decode(item)?, None),
            };
            if name == "export" {
                let v = value.ok_or_else(|| OptionError::MissingValue("export".into()))?;
                export = Some(normalise(&v)?);
            } else {
                options.apply_option(&name, value.as_deref())?;
            }
        }
        let url = NfsUrl { host, port, alternates, path, export, options };
        if let Some(e) = &url.export {
            if url.path_inside(e).is_none() {
                return Err(UrlError::ExportNotPrefix { export: e.clone(), path: url.path.clone() });
            }
        }
        Ok(url)
    }
}

/// One `host[:port]` of the authority (number `n`, from 1, of URL `s`).
fn parse_address(a: &str, n: usize, s: &str) -> Result<Address, UrlError> {
    if a.is_empty() {
        return Err(if n == 1 && !s.contains(',') {
            UrlError::NoHost(s.to_string())
        } else {
            UrlError::EmptyAddress(n, s.to_string())
        });
    }
    let (host, port) = if let Some(v6) = a.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(|| UrlError::Ipv6(s.to_string()))?;
        if h.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(UrlError::Ipv6(s.to_string()));
        }
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| UrlError::Ipv6(s.to_string()))?),
        };
        (h.to_string(), port)
    } else if a.contains(']') {
        return Err(UrlError::Ipv6(s.to_string()));
    } else {
        // `nfs://::1/x` or `nfs://h,fe80::1:2049/x`: which colon starts the port?
        let v6 = if a.parse::<std::net::Ipv6Addr>().is_ok() {
            Some(a)
        } else {
            a.rsplit_once(':').map(|(h, _)| h).filter(|h| h.parse::<std::net::Ipv6Addr>().is_ok())
        };
        if let Some(v6) = v6 {
            return Err(UrlError::Ipv6NoBrackets(v6.to_string(), s.to_string()));
        }
        match a.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (a.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err(if s.contains(',') {
            UrlError::EmptyAddress(n, s.to_string())
        } else {
            UrlError::NoHost(s.to_string())
        });
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(UrlError::Port(p.to_string())),
        },
    };
    Ok(Address { host, port })
}

impl fmt::Display for NfsUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("nfs://")?;
        f.write_str(&self.authority())?;
        f.write_str(&percent_encode(&self.path))?;
        let mut items: Vec<String> = Vec::new();
        if let Some(e) = &self.export {
            items.push(format!("export={}", percent_encode(e)));
        }
        for item in self.options.to_items() {
            items.push(match item.split_once('=') {
                Some((n, v)) => format!("{n}={}", percent_encode(v)),
                None => item,
            });
        }
        if !items.is_empty() {
            write!(f, "?{}", items.join("&"))?;
        }
        Ok(())
    }
}

/// Percent-encode everything but unreserved characters, `/` and `:`.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn percent_decode(s: &str) -> Result<String, UrlError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or_else(|| UrlError::Encoding(s.to_string()))?;
            let v = u8::from_str_radix(hex, 16).map_err(|_| UrlError::Encoding(s.to_string()))?;
            out.push(v);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| UrlError::Encoding(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    #[test]
    fn libnfs_urls() {
        let u: NfsUrl =
            "nfs://server/export/dir/file.txt?nfsport=2050&mountport=20048&version=3&uid=1000&gid=100"
                .parse()
                .unwrap();
        assert_eq!(u.host, "server");
        assert_eq!(u.port, None);
        assert_eq!(u.path, "/export/dir/file.txt");
        assert_eq!(u.nfs_port(), Some(2050));
        assert_eq!(u.options.mountport, Some(20048));
        assert_eq!((u.options.uid, u.options.gid), (Some(1000), Some(100)));
        let e = "nfs://server/x?version=5".parse::<NfsUrl>().unwrap_err();
        assert!(e.to_string().contains("'version'"), "{e}");
    }

    #[test]
    fn hosts_ports_and_ipv6() {
        let u: NfsUrl = "nfs://[::1]:2049/a//b/./c/?soft&timeo=5".parse().unwrap();
        assert_eq!(u.host, "::1");
        assert_eq!(u.port, Some(2049));
        assert_eq!(u.path, "/a/b/c");
        assert!(!u.options.hard);
        assert_eq!(u.options.timeo, Duration::from_millis(500));
        assert_eq!(u.host_port(2049), "[::1]:2049");
        let u: NfsUrl = "nfs://10.0.0.1:99".parse().unwrap();
        assert_eq!((u.port, u.path.as_str()), (Some(99), "/"));
        let u: NfsUrl = "NFS://h?nconnect=4,soft&timeo=7".parse().unwrap();
        assert!(!u.options.hard && u.options.timeo == Duration::from_millis(700));
        assert_eq!((u.host.as_str(), u.options.nconnect), ("h", 4));
    }

    #[test]
    fn bad_urls_say_what_is_wrong() {
        let cases = [
            ("http://h/x", "not an NFS URL"),
            ("nfs:///x", "no host"),
            ("nfs://h:0/x", "bad port '0'"),
            ("nfs://h:99999/x", "bad port '99999'"),
            ("nfs://[::1/x", "IPv6"),
            ("nfs://[zz]/x", "IPv6"),
            ("nfs://h/a/../b", "'..'"),
            ("nfs://h/a%zz", "percent"),
            ("nfs://h/a?frob=1", "unknown mount option 'frob'"),
            ("nfs://h/a?nconnect=99", "'nconnect'"),
            ("nfs://h/a/b?export=/c", "not a prefix"),
        ];
        for (url, want) in cases {
            let e = url.parse::<NfsUrl>().unwrap_err().to_string();
            assert!(e.contains(want), "{url}: {e:?} lacks {want:?}");
        }
    }

    #[test]
    fn several_addresses() {
        let u: NfsUrl = "nfs://h1,10.0.0.2:2050,[::1]:2049,[fe80::2]/srv/x?soft".parse().unwrap();
        assert_eq!((u.host.as_str(), u.port), ("h1", None));
        let alt: Vec<(String, Option<u16>)> = u.alternates.iter().map(|a| (a.host.clone(), a.port)).collect();
        assert_eq!(
            alt,
            vec![("10.0.0.2".into(), Some(2050)), ("::1".into(), Some(2049)), ("fe80::2".into(), None)]
        );
        assert_eq!(u.addresses().len(), 4);
        assert_eq!(u.authority(), "h1,10.0.0.2:2050,[::1]:2049,[fe80::2]");
        assert_eq!(u.path, "/srv/x");
        assert!(!u.options.hard);
        assert_eq!(u.to_string(), "nfs://h1,10.0.0.2:2050,[::1]:2049,[fe80::2]/srv/x?soft");
        // One address: no alternates, written as before.
        let u: NfsUrl = "nfs://h:2049/x".parse().unwrap();
        assert!(u.alternates.is_empty());
        assert_eq!(u.to_string(), "nfs://h:2049/x");
        // A comma in the query is still an option separator, not an address.
        let u: NfsUrl = "nfs://a,b?soft,timeo=7".parse().unwrap();
        assert_eq!((u.alternates.len(), u.options.hard), (1, false));
    }

    #[test]
    fn bad_address_lists_say_which_address() {
        let cases = [
            ("nfs://a,,b/x", "empty address number 2"),
            ("nfs://a,/x", "empty address number 2"),
            (",b/x", "not an NFS URL"),
            ("nfs://,b/x", "empty address number 1"),
            ("nfs://a,:2049/x", "empty address number 2"),
            ("nfs://a,b:0/x", "bad port '0'"),
            ("nfs://a,b:70000/x", "bad port '70000'"),
            ("nfs://a,b:x/x", "bad port 'x'"),
            ("nfs://a:1,b:2:3/x", "bad port '2:3'"),
            ("nfs://a,::1/x", "IPv6 address '::1' in NFS URL must be in brackets ([::1])"),
            ("nfs://fe80::1:2049/x", "must be in brackets"),
            ("nfs://a,[::1/x", "IPv6"),
            ("nfs://a,::1]/x", "IPv6"),
            ("nfs://[::1],[zz]/x", "IPv6"),
            ("nfs://[::1]2049,b/x", "IPv6"),
        ];
        for (url, want) in cases {
            let e = url.parse::<NfsUrl>().unwrap_err().to_string();
            assert!(e.contains(want), "{url}: {e:?} lacks {want:?}");
        }
        let many = format!("nfs://{}/x", vec!["h"; ADDRESSES_MAX + 1].join(","));
        let e = many.parse::<NfsUrl>().unwrap_err().to_string();
        assert!(e.contains("too many addresses"), "{e}");
        let most = format!("nfs://{}/x", vec!["h"; ADDRESSES_MAX].join(","));
        assert_eq!(most.parse::<NfsUrl>().unwrap().alternates.len(), ADDRESSES_MAX - 1);
    }

    #[test]
    fn explicit_export_and_path_inside() {
        let u: NfsUrl = "nfs://h/srv/data/sub/f?export=/srv/data".parse().unwrap();
        assert_eq!(u.export.as_deref(), Some("/srv/data"));
        assert_eq!(u.path_inside("/srv/data").as_deref(), Some("/sub/f"));
        assert_eq!(u.path_inside("/srv/data/sub/f").as_deref(), Some("/"));
        assert_eq!(u.path_inside("/").as_deref(), Some("/srv/data/sub/f"));
        assert_eq!(u.path_inside("/srv/dat"), None);
    }

    fn arb_url() -> impl Strategy<Value = NfsUrl> {
        let host = prop_oneof![
            "[a-z][a-z0-9.-]{0,15}",
            any::<std::net::Ipv4Addr>().prop_map(|a| a.to_string()),
            any::<std::net::Ipv6Addr>().prop_map(|a| a.to_string()),
        ];
        let comps = proptest::collection::vec(
            "[^/\\x00]{1,8}".prop_filter("not . or ..", |c| c != "." && c != ".."),
            0..4,
        );
        let address =
            (host.clone(), proptest::option::of(1u16..)).prop_map(|(host, port)| Address { host, port });
        (
            host,
            proptest::collection::vec(address, 0..3),
            proptest::option::of(1u16..),
            comps,
            any::<bool>(),
            0u32..4,
            any::<bool>(),
            proptest::option::of("[a-z /&=?%,]{1,10}"),
        )
            .prop_map(|(host, alternates, port, comps, with_export, nconnect, soft, cache)| {
                let path = if comps.is_empty() { "/".to_string() } else { format!("/{}", comps.join("/")) };
                let export = (with_export && !comps.is_empty()).then(|| format!("/{}", comps[0]));
                let mut options = MountOptions { nconnect: nconnect + 1, hard: !soft, ..Default::default() };
                options.cache_dir = cache.map(|c| format!("/{c}").into());
                NfsUrl { host, port, alternates, path, export, options }
            })
    }

    proptest! {
        #[test]
        fn display_parse_round_trip(u in arb_url()) {
            let s = u.to_string();
            let back: NfsUrl = s.parse().map_err(|e| TestCaseError::fail(format!("{s}: {e}")))?;
            prop_assert_eq!(back, u);
        }

        #[test]
        fn junk_never_panics(s in "nfs://[\\[\\]:a-z0-9/?&=%.,]{0,30}") {
            let _ = s.parse::<NfsUrl>();
        }
    }
}
