//! The export table: which directories are served, to which clients, and
//! with which options.
//!
//! eagernfs reads the Linux `/etc/exports` syntax (exports(5)) so that a file
//! people already have works unchanged, and so that mistakes in it are
//! reported the way an operator can act on: every [`ExportsError`] names the
//! 1-based line, quotes the offending text and says what to write instead.
//!
//! # Layout
//! - [`parse`] / [`parse_with_resolver`]: text → [`Exports`] plus
//!   [`Warning`]s, or the first [`ExportsError`].
//! - [`Exports::find`] / [`Exports::find_covering`]: look an export up by the
//!   path a MOUNT request names.
//! - [`Export::options_for`]: the options for one client address (the most
//!   specific matching rule wins); `None` means the client is not allowed.
//! - [`ExportOptions::squash`] / [`ExportOptions::port_allowed`]: applying
//!   the options to one request's AUTH_SYS credential and source port.
//! - [`Exports::to_exports_syntax`]: back to text that [`parse`] reads to the
//!   same table.
//!
//! # Syntax accepted
//! ```text
//! # comment                       (also after an entry: /srv *  # comment)
//! /srv/data   10.0.0.0/8(rw) 192.168.1.5 fd00::/8(rw,no_root_squash)
//! /srv/pub    -ro,insecure  *  host.example.org(rw)   # "-opts": defaults for the hosts after it
//! "/srv/my dir"  localhost(rw)                         # or /srv/my\040dir
//! /srv/long   10.0.0.1(rw) \
//!             10.0.0.2(rw)                             # backslash-newline continues a line
//! cephfs://nfs@cephfs/shared?conf=/etc/ceph/ceph.conf  10.0.0.0/8(rw)   # a CephFS directory
//! ```
//!
//! A `cephfs://[ID@]FSNAME/PATH?conf=CONF` URL in place of the path exports
//! PATH of that CephFS ([`eagernfs_vfs::cephfs::CephFsSource`]); clients
//! mount it as PATH, as they would a local directory of that name.
//!
//! # Where eagernfs differs from Linux, and why
//! - Host names are resolved once, at parse time, with the system resolver
//!   (`localhost` is fixed to 127.0.0.1 and ::1 so it never depends on DNS);
//!   a name that does not resolve is an error rather than an export that
//!   silently matches no one.
//! - Wildcard names (`*.example.com`) need a reverse lookup of each client,
//!   which eagernfs does not do; they are kept (so the file round-trips) but
//!   never match, and a [`Warning`] says so. Netgroups (`@group`) are an error.
//! - `..` in an export path is an error instead of being resolved lexically,
//!   since lexical resolution is wrong across symlinks and an export path is a
//!   security boundary.
//! - A `-opts` default block must come before the first client (Linux also
//!   accepts it later, where it is easy to misread).
//! - Whitespace inside a client's parentheses is allowed (`host(rw, sync)`).
//! - Only `sec=sys` is accepted: eagernfs implements AUTH_SYS only.
//! - `wdelay`, `subtree_check`, `hide`, `crossmnt`, `secure_locks`, `acl`,
//!   `mountpoint` and their negations are accepted and ignored: they tune
//!   kernel-nfsd behaviour that has no counterpart here.
//! - Error and warning line numbers are those of the offending token, even on
//!   a continuation line; [`Export::line`] is the line of the path.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, ToSocketAddrs};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use eagernfs_vfs::cephfs::{self, CephFsSource};
use eagernfs_vfs::Credentials;

/// The uid and gid of "nobody" on Linux: where squashed users land by default.
pub const NOBODY_ID: u32 = 65534;

/// The whole export table, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exports {
    /// One entry per exported path; paths are unique (a duplicate is a parse
    /// error, because two lines for one path are almost always a merge gone
    /// wrong and silently picking one would hide it).
    pub entries: Vec<Export>,
}

/// One exported directory and who may mount it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Export {
    /// Absolute path as written, normalised lexically: no trailing `/`, no
    /// `//`, no `.`; `..` is rejected. Not canonicalised against the file
    /// system: the file may be checked on a machine where it does not exist.
    pub path: PathBuf,
    /// Where the files are: the local directory `path`, or a CephFS.
    pub source: ExportSource,
    /// Client rules in file order; never empty after [`parse`] (a line with
    /// no client exports to everyone, as on Linux).
    pub clients: Vec<ClientRule>,
    /// 1-based line of the path, for messages that point back at the file.
    pub line: usize,
}

/// Where an export's files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExportSource {
    /// The directory [`Export::path`] of this machine.
    Directory,
    /// A directory of a CephFS (a `cephfs://` URL in the path field);
    /// [`Export::path`] is its path in that file system.
    CephFs(CephFsSource),
}

/// Which clients one rule covers and what they get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRule {
    /// Who the rule is for.
    pub matcher: ClientMatch,
    /// What they get (the line's `-opts` defaults with the rule's own
    /// parenthesised options applied on top).
    pub options: ExportOptions,
}

/// How a rule names its clients.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientMatch {
    /// `*`, a bare `(opts)`, or no client at all on the line: everyone.
    Any,
    /// One address. IPv4-mapped IPv6 addresses are stored as IPv4 so that
    /// they compare equal to what a dual-stack socket reports.
    Addr(IpAddr),
    /// A network, from `addr/len` or (IPv4) `addr/255.255.0.0`. `addr` has
    /// its host bits cleared.
    Net { addr: IpAddr, prefix_len: u8 },
    /// A host name, resolved when the file was parsed. `addrs` is what it
    /// resolved to (IPv4-mapped forms stored as IPv4), never empty.
    Host { name: String, addrs: Vec<IpAddr> },
    /// A wildcard name such as `*.example.com`. Matching it needs a reverse
    /// DNS lookup per client, which eagernfs does not do: it never matches.
    Wildcard(String),
}

/// What an export allows one client. Field meanings follow exports(5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExportOptions {
    /// `ro` (default) / `rw`: refuse every operation that changes anything.
    pub read_only: bool,
    /// `sync` (default) / `async`. With `async` the server may reply to a
    /// WRITE or COMMIT before the data is on stable storage: faster, but a
    /// server crash then loses data the client believes is safe. Unsafe;
    /// use only for scratch data.
    pub sync: bool,
    /// `secure` (default) / `insecure`: require the request's source port to
    /// be below 1024, i.e. sent by a client's root, which is what makes the
    /// AUTH_SYS uid claim mean anything on a trusted network.
    pub secure: bool,
    /// `root_squash` (default) / `no_root_squash`: map uid 0 and gid 0
    /// (also in the supplementary groups) to `anonuid` / `anongid`.
    pub root_squash: bool,
    /// `all_squash` / `no_all_squash` (default): map every user to
    /// `anonuid` / `anongid` with no supplementary groups.
    pub all_squash: bool,
    /// `anonuid=N`: where squashed users go (default 65534, "nobody").
    pub anonuid: u32,
    /// `anongid=N`: where squashed groups go (default 65534, "nogroup").
    pub anongid: u32,
    /// `fsid=N` (`fsid=root` is 0; `fsid=<uuid>` is stored as a 32-bit hash
    /// of the UUID's hex digits). Lets file handles stay stable when the
    /// underlying device number changes; `None` lets the server choose.
    pub fsid: Option<u32>,
    /// `xprtsec=none:tls:mtls` (the default allows all three): which
    /// transport security a client must use (RFC 9289 RPC-with-TLS).
    pub xprtsec: Xprtsec,
}

/// The transport security policies an export accepts (`xprtsec=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Xprtsec {
    /// Plain TCP or UDP.
    pub none: bool,
    /// TLS, the server authenticated by its certificate.
    pub tls: bool,
    /// TLS with a client certificate the server verified (mutual TLS).
    pub mtls: bool,
}

impl Default for Xprtsec {
    fn default() -> Self {
        Xprtsec { none: true, tls: true, mtls: true }
    }
}

/// How a connection is secured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransportSecurity {
    None,
    Tls,
    Mtls,
}

impl Xprtsec {
    /// Whether a connection secured as `t` may use the export.
    pub fn allows(&self, t: TransportSecurity) -> bool {
        match t {
            TransportSecurity::None => self.none,
            TransportSecurity::Tls => self.tls,
            TransportSecurity::Mtls => self.mtls,
        }
    }
}

impl fmt::Display for Xprtsec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = [(self.none, "none"), (self.tls, "tls"), (self.mtls, "mtls")]
            .into_iter()
            .filter_map(|(on, n)| on.then_some(n))
            .collect();
        f.write_str(&names.join(":"))
    }
}

impl Default for ExportOptions {
    /// The Linux defaults: ro, sync, secure, root_squash, no_all_squash,
    /// anonuid=anongid=65534, no fsid.
    fn default() -> Self {
        ExportOptions {
            read_only: true,
            sync: true,
            secure: true,
            root_squash: true,
            all_squash: false,
            anonuid: NOBODY_ID,
            anongid: NOBODY_ID,
            fsid: None,
            xprtsec: Xprtsec::default(),
        }
    }
}

/// Why an exports file was rejected. `message` quotes the offending text and
/// says how to fix it; Display prefixes the line: `line 3: ...`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ExportsError {
    /// 1-based line of the offending text.
    pub line: usize,
    /// What is wrong and what to write instead.
    pub message: String,
}

/// Something accepted but probably not what was meant. Display: `line N: text`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// 1-based line the warning is about.
    pub line: usize,
    /// What was understood and how to say it unambiguously.
    pub text: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.text)
    }
}

/// Parses an exports file, resolving host names with the system resolver.
///
/// Returns the table and the warnings (see [`Warning`]), or the first error.
/// Blocks while host names resolve: call it at start-up or on reload, not on
/// a request path.
pub fn parse(text: &str) -> Result<(Exports, Vec<Warning>), ExportsError> {
    parse_with_resolver(text, system_resolve)
}

/// The resolver [`parse`] uses: the system's (`/etc/hosts`, DNS, ...) via
/// [`ToSocketAddrs`].
pub fn system_resolve(name: &str) -> io::Result<Vec<IpAddr>> {
    Ok((name, 0u16).to_socket_addrs()?.map(|sa| sa.ip()).collect())
}

/// [`parse`] with a caller-supplied host-name resolver, so tests and tools
/// can check a file without touching DNS. `localhost` never reaches the
/// resolver (it is always 127.0.0.1 and ::1).
pub fn parse_with_resolver<R>(text: &str, mut resolve: R) -> Result<(Exports, Vec<Warning>), ExportsError>
where
    R: FnMut(&str) -> io::Result<Vec<IpAddr>>,
{
    let mut entries: Vec<Export> = Vec::new();
    let mut warnings = Vec::new();
    // Path → line of its first export, to point at both lines of a duplicate.
    let mut seen: HashMap<PathBuf, usize> = HashMap::new();

    for logical in logical_lines(text) {
        let tokens = tokenize(&logical)?;
        let Some((path_token, client_tokens)) = tokens.split_first() else {
            continue;
        };
        let line = logical.line_at(path_token.offset);
        let (path, source) = if cephfs::is_cephfs_url(path_token.text) {
            let src = CephFsSource::parse(path_token.text).map_err(|e| err(line, e.0))?;
            (src.export_path(), ExportSource::CephFs(src))
        } else {
            (parse_path(path_token.text, line)?, ExportSource::Directory)
        };
        if let Some(&first) = seen.get(&path) {
            return Err(err(
                line,
                format!(
                    "{} exported twice (also on line {first}); merge the client lists onto one line",
                    path.display()
                ),
            ));
        }

        let mut defaults = ExportOptions::default();
        let mut clients: Vec<ClientRule> = Vec::new();
        for token in client_tokens {
            let line = logical.line_at(token.offset);
            if let Some(list) = token.text.strip_prefix('-') {
                if !clients.is_empty() {
                    return Err(err(
                        line,
                        format!(
                            "default options {} must come right after the path, before any client; move it there",
                            quote(token.text)
                        ),
                    ));
                }
                if list.trim().is_empty() {
                    return Err(err(
                        line,
                        format!(
                            "{} has no options after the dash; write e.g. \"-rw\" or remove it",
                            quote(token.text)
                        ),
                    ));
                }
                defaults = parse_options(list, defaults, line, "the default options")?;
                continue;
            }

            let (host, list) = split_client(token.text, line)?;
            let matcher = if host.is_empty() {
                let list = list.unwrap_or_default();
                warnings.push(Warning {
                    line,
                    text: format!(
                        "\"({list})\" has no host before \"(\", so these options apply to everyone; \
                         if they were meant for the client before it, remove the space \
                         (e.g. \"host({list})\"), or write \"*({list})\" to say everyone and \
                         silence this warning"
                    ),
                });
                ClientMatch::Any
            } else {
                parse_client(host, line, &mut resolve, &mut warnings)?
            };
            let who = if host.is_empty() { "everyone" } else { host };
            let options = match list {
                Some(list) => parse_options(list, defaults, line, who)?,
                None => defaults,
            };
            if clients.iter().any(|rule| rule.matcher == matcher) {
                return Err(err(
                    line,
                    format!(
                        "client {} listed twice for {}; keep one entry with all its options",
                        quote(if host.is_empty() { token.text } else { host }),
                        path.display()
                    ),
                ));
            }
            clients.push(ClientRule { matcher, options });
        }

        if clients.is_empty() {
            warnings.push(Warning {
                line,
                text: format!(
                    "no client given for {path}, so it is exported to everyone; \
                     write \"{path} *\" (or list the clients) to silence this warning",
                    path = path.display()
                ),
            });
            clients.push(ClientRule { matcher: ClientMatch::Any, options: defaults });
        }
        seen.insert(path.clone(), line);
        entries.push(Export { path, source, clients, line });
    }
    Ok((Exports { entries }, warnings))
}

impl Exports {
    /// The export whose path is exactly `path` (after the same lexical
    /// normalisation the file gets). `None` for relative paths or `..`.
    pub fn find(&self, path: &Path) -> Option<&Export> {
        let wanted = normalise_request(path)?;
        self.entries.iter().find(|export| export.path == wanted)
    }

    /// The export that contains `path` (the longest exported prefix, whole
    /// components only), and `path` relative to it. For MOUNT requests that
    /// name a directory below an export, which Linux allows.
    pub fn find_covering(&self, path: &Path) -> Option<(&Export, PathBuf)> {
        let wanted = normalise_request(path)?;
        self.entries
            .iter()
            .filter_map(|export| {
                let rest = wanted.strip_prefix(&export.path).ok()?;
                Some((export, rest.to_path_buf()))
            })
            .max_by_key(|(export, _)| export.path.components().count())
    }

    /// The table in exports(5) syntax, one line per export with every
    /// client's options spelled out. [`parse`] reads it back to an equal
    /// table (with a resolver that gives the same addresses for host names).
    /// An [`Export`] with no clients is written as a bare path, which parses
    /// back as everyone with default options.
    pub fn to_exports_syntax(&self) -> String {
        let mut out = String::new();
        for export in &self.entries {
            match &export.source {
                ExportSource::Directory => out.push_str(&escape_path(&export.path)),
                ExportSource::CephFs(src) => out.push_str(&src.to_string()),
            }
            for rule in &export.clients {
                out.push(' ');
                out.push_str(&format!("{}({})", rule.matcher, rule.options));
            }
            out.push('\n');
        }
        out
    }
}

impl Export {
    /// The options for `client`, or `None` if no rule lets it in.
    ///
    /// The most specific matching rule wins, whatever the order on the line:
    /// an address or host name, then the matching network with the longest
    /// prefix, then `*`. Between equally specific rules the first wins.
    /// IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`, as a dual-stack socket
    /// reports IPv4 peers) are matched as the IPv4 address.
    pub fn options_for(&self, client: IpAddr) -> Option<&ExportOptions> {
        self.options_for_peer(client, &|_| false)
    }

    /// [`Export::options_for`] for a client that may also have proved a name: with mutual TLS,
    /// a rule naming a host matches a client whose certificate is valid for that name
    /// (`proves(name)`), from whatever address it connects.
    pub fn options_for_peer(&self, client: IpAddr, proves: &dyn Fn(&str) -> bool) -> Option<&ExportOptions> {
        let client = canonical_ip(client);
        let mut best: Option<(u16, &ExportOptions)> = None;
        for rule in &self.clients {
            let by_name = match &rule.matcher {
                ClientMatch::Host { name, .. } => proves(name).then_some(200),
                _ => None,
            };
            let Some(rank) = rule.matcher.specificity(client).or(by_name) else {
                continue;
            };
            let better = match best {
                None => true,
                Some((best_rank, _)) => rank > best_rank,
            };
            if better {
                best = Some((rank, &rule.options));
            }
        }
        best.map(|(_, options)| options)
    }
}

impl ClientMatch {
    /// Whether the rule covers `client` (IPv4-mapped addresses match as IPv4).
    pub fn matches(&self, client: IpAddr) -> bool {
        self.specificity(canonical_ip(client)).is_some()
    }

    /// `None` if `client` (already canonical) is not covered; otherwise a
    /// rank where higher is more specific: `*` 0, a network 1 + prefix
    /// length, an address or host 200.
    fn specificity(&self, client: IpAddr) -> Option<u16> {
        match self {
            ClientMatch::Any => Some(0),
            ClientMatch::Net { addr, prefix_len } => {
                let same_family = addr.is_ipv4() == client.is_ipv4();
                (same_family && mask(client, *prefix_len) == *addr).then_some(1 + u16::from(*prefix_len))
            }
            ClientMatch::Addr(addr) => (*addr == client).then_some(200),
            ClientMatch::Host { addrs, .. } => addrs.contains(&client).then_some(200),
            ClientMatch::Wildcard(_) => None,
        }
    }
}

impl fmt::Display for ClientMatch {
    /// The client as written in an exports file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientMatch::Any => f.write_str("*"),
            ClientMatch::Addr(addr) => write!(f, "{addr}"),
            ClientMatch::Net { addr, prefix_len } => write!(f, "{addr}/{prefix_len}"),
            ClientMatch::Host { name, .. } => f.write_str(name),
            ClientMatch::Wildcard(pattern) => f.write_str(pattern),
        }
    }
}

impl ExportOptions {
    /// The credentials a request runs with after the squash rules.
    ///
    /// `all_squash`: everyone becomes `anonuid`/`anongid` with no
    /// supplementary groups. `root_squash`: uid 0 → `anonuid`, gid 0 →
    /// `anongid`, and each 0 in `groups` → `anongid` (each independently, as
    /// the Linux server does, so a non-root user in group 0 also loses it).
    pub fn squash(&self, uid: u32, gid: u32, groups: &[u32]) -> Credentials {
        if self.all_squash {
            return Credentials { uid: self.anonuid, gid: self.anongid, groups: Vec::new() };
        }
        if !self.root_squash {
            return Credentials { uid, gid, groups: groups.to_vec() };
        }
        let squash_gid = |g: u32| if g == 0 { self.anongid } else { g };
        Credentials {
            uid: if uid == 0 { self.anonuid } else { uid },
            gid: squash_gid(gid),
            groups: groups.iter().map(|&g| squash_gid(g)).collect(),
        }
    }

    /// Whether a request from source `port` is acceptable: with `secure`
    /// only reserved ports (below 1024) are.
    pub fn port_allowed(&self, port: u16) -> bool {
        !self.secure || port < 1024
    }
}

impl fmt::Display for ExportOptions {
    /// Every option spelled out, comma-separated, as inside `host(...)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pick = |on: bool, yes: &'static str, no: &'static str| if on { yes } else { no };
        write!(
            f,
            "{},{},{},{},{},anonuid={},anongid={}",
            pick(self.read_only, "ro", "rw"),
            pick(self.sync, "sync", "async"),
            pick(self.secure, "secure", "insecure"),
            pick(self.root_squash, "root_squash", "no_root_squash"),
            pick(self.all_squash, "all_squash", "no_all_squash"),
            self.anonuid,
            self.anongid,
        )?;
        if let Some(fsid) = self.fsid {
            write!(f, ",fsid={fsid}")?;
        }
        if self.xprtsec != Xprtsec::default() {
            write!(f, ",xprtsec={}", self.xprtsec)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Lines and tokens

/// One entry after comments are stripped and continuation lines joined.
struct LogicalLine {
    text: String,
    /// (byte offset in `text` where a physical line's content starts, that
    /// line's 1-based number), ascending: maps a token back to its line.
    starts: Vec<(usize, usize)>,
}

impl LogicalLine {
    fn line_at(&self, offset: usize) -> usize {
        let after = self.starts.partition_point(|&(start, _)| start <= offset);
        self.starts.get(after.saturating_sub(1)).map_or(1, |&(_, line)| line)
    }
}

/// Splits `text` into entries: `#` starts a comment (outside double quotes),
/// and a backslash ending a line's content (after any comment is removed)
/// joins the next line as if by a space.
fn logical_lines(text: &str) -> Vec<LogicalLine> {
    let mut out = Vec::new();
    let mut current: Option<LogicalLine> = None;
    for (index, raw) in text.split('\n').enumerate() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let content = strip_comment(raw).trim_end();
        let (content, continues) = match content.strip_suffix('\\') {
            Some(rest) => (rest, true),
            None => (content, false),
        };
        let logical = current.get_or_insert_with(|| LogicalLine { text: String::new(), starts: Vec::new() });
        if !logical.text.is_empty() {
            logical.text.push(' ');
        }
        logical.starts.push((logical.text.len(), index + 1));
        logical.text.push_str(content);
        if !continues {
            out.extend(current.take());
        }
    }
    out.extend(current);
    out
}

fn strip_comment(line: &str) -> &str {
    let mut in_quote = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_quote = !in_quote,
            '#' if !in_quote => return &line[..i],
            _ => {}
        }
    }
    line
}

struct Token<'a> {
    text: &'a str,
    /// Byte offset in the logical line, for [`LogicalLine::line_at`].
    offset: usize,
}

/// Splits an entry at whitespace that is outside double quotes and outside
/// parentheses (so `host(rw, sync)` stays one token).
fn tokenize(logical: &LogicalLine) -> Result<Vec<Token<'_>>, ExportsError> {
    let text = logical.text.as_str();
    let mut tokens = Vec::new();
    let mut start: Option<usize> = None;
    let mut in_quote = false;
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        let begin = match start {
            Some(begin) => begin,
            None if c.is_ascii_whitespace() => continue,
            None => *start.insert(i),
        };
        match c {
            '"' => in_quote = !in_quote,
            '(' if !in_quote => depth += 1,
            ')' if !in_quote => depth = depth.saturating_sub(1),
            c if c.is_ascii_whitespace() && !in_quote && depth == 0 => {
                tokens.push(Token { text: &text[begin..i], offset: begin });
                start = None;
            }
            _ => {}
        }
    }
    if let Some(begin) = start {
        let token = &text[begin..];
        let line = logical.line_at(begin);
        if in_quote {
            return Err(err(
                line,
                format!("{} has no closing double quote; add the missing '\"'", quote(token)),
            ));
        }
        if depth > 0 {
            return Err(err(
                line,
                format!("{} has no closing parenthesis; add the missing ')'", quote(token)),
            ));
        }
        tokens.push(Token { text: token, offset: begin });
    }
    Ok(tokens)
}

// ---------------------------------------------------------------------------
// Paths

/// Decodes quotes and `\NNN` octal escapes, then normalises.
fn parse_path(raw: &str, line: usize) -> Result<PathBuf, ExportsError> {
    let bytes = raw.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i += 1,
            b'\\' => {
                let digits = bytes.get(i + 1..i + 4).filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
                let value = digits.map(|d| d.iter().fold(0u32, |acc, &b| acc * 8 + u32::from(b - b'0')));
                match value {
                    Some(value @ 1..=255) => decoded.push(value as u8),
                    _ => {
                        return Err(err(
                            line,
                            format!(
                                "bad escape in path {}: write a byte as a backslash and three octal digits \
                                 from \\001 to \\377 (a space is \\040), or put the path in double quotes",
                                quote(raw)
                            ),
                        ))
                    }
                }
                i += 4;
            }
            b => {
                decoded.push(b);
                i += 1;
            }
        }
    }
    if decoded.first() != Some(&b'/') {
        let shown = String::from_utf8_lossy(&decoded);
        let suggestion = format!("/{}", shown.trim_start_matches("./"));
        return Err(err(
            line,
            format!("export path {} must be absolute, e.g. {}", quote(raw), quote(&suggestion)),
        ));
    }
    normalise(&decoded).ok_or_else(|| {
        err(
            line,
            format!("export path {} contains \"..\"; write the directory's real path without it", quote(raw)),
        )
    })
}

/// Lexical normalisation of an absolute path: drops empty and `.`
/// components; `None` if there is a `..`.
fn normalise(bytes: &[u8]) -> Option<PathBuf> {
    let mut out = Vec::with_capacity(bytes.len());
    for component in bytes.split(|&b| b == b'/') {
        match component {
            b"" | b"." => {}
            b".." => return None,
            name => {
                out.push(b'/');
                out.extend_from_slice(name);
            }
        }
    }
    if out.is_empty() {
        out.push(b'/');
    }
    Some(PathBuf::from(OsString::from_vec(out)))
}

fn normalise_request(path: &Path) -> Option<PathBuf> {
    let bytes = path.as_os_str().as_bytes();
    if bytes.first() != Some(&b'/') {
        return None;
    }
    normalise(bytes)
}

/// The path as the first field of an exports line: bytes that would end the
/// field, start a comment or be read as syntax are written as `\NNN`.
fn escape_path(path: &Path) -> String {
    let bytes = path.as_os_str().as_bytes();
    let needs_escape = |b: u8| b <= b' ' || b == 0x7f || b"#\"\\()".contains(&b);
    let mut out = String::with_capacity(bytes.len());
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            for c in text.chars() {
                if c.is_ascii() && needs_escape(c as u8) {
                    out.push_str(&format!("\\{:03o}", c as u8));
                } else {
                    out.push(c);
                }
            }
        }
        Err(_) => {
            for &b in bytes {
                if needs_escape(b) || !b.is_ascii() {
                    out.push_str(&format!("\\{b:03o}"));
                } else {
                    out.push(char::from(b));
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Clients

/// `host(opts)` → (`host`, Some(`opts`)); `host` → (`host`, None).
fn split_client(token: &str, line: usize) -> Result<(&str, Option<&str>), ExportsError> {
    let Some(open) = token.find('(') else {
        if token.contains(')') {
            return Err(err(
                line,
                format!("{} has a ')' with no '('; write options as host(rw,sync)", quote(token)),
            ));
        }
        return Ok((token, None));
    };
    let host = &token[..open];
    let Some(list) = token[open + 1..].strip_suffix(')') else {
        return Err(err(
            line,
            format!("unexpected text after ')' in {}; put a space between clients", quote(token)),
        ));
    };
    if list.contains(['(', ')']) {
        return Err(err(
            line,
            format!(
                "{} has parentheses inside the option list; write options as host(rw,sync)",
                quote(token)
            ),
        ));
    }
    Ok((host, Some(list)))
}

fn parse_client<R>(
    host: &str,
    line: usize,
    resolve: &mut R,
    warnings: &mut Vec<Warning>,
) -> Result<ClientMatch, ExportsError>
where
    R: FnMut(&str) -> io::Result<Vec<IpAddr>>,
{
    if host == "*" {
        return Ok(ClientMatch::Any);
    }
    if host.starts_with('@') {
        return Err(err(
            line,
            format!(
                "netgroups such as {} are not supported; list the hosts or a network instead",
                quote(host)
            ),
        ));
    }
    if host.starts_with("gss/") {
        return Err(err(
            line,
            format!(
                "{} is not supported: eagernfs only does AUTH_SYS; list the clients by address instead",
                quote(host)
            ),
        ));
    }
    if host.contains('/') {
        return parse_net(host, line, warnings);
    }
    if looks_like_address(host) {
        return match parse_ip(host) {
            Some(addr) => Ok(ClientMatch::Addr(canonical_ip(addr))),
            None => Err(bad_address(host, line)),
        };
    }
    let name_chars = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    let wildcard_chars = |c: char| name_chars(c) || matches!(c, '*' | '?' | '[' | ']');
    if host.len() > 253 || !host.chars().all(wildcard_chars) {
        return Err(err(
            line,
            format!(
                "bad client {}: write a host name, an address, a network like 10.0.0.0/8, or \"*\"",
                quote(host)
            ),
        ));
    }
    if !host.chars().all(name_chars) {
        warnings.push(Warning {
            line,
            text: format!(
                "{} is a wildcard host name; eagernfs does no reverse DNS, so it never matches \
                 any client: list the addresses or a network instead",
                quote(host)
            ),
        });
        return Ok(ClientMatch::Wildcard(host.to_string()));
    }
    if host.eq_ignore_ascii_case("localhost") {
        // Fixed so that `localhost` works even without /etc/hosts and always
        // means this machine, whatever a resolver says.
        return Ok(ClientMatch::Host {
            name: host.to_string(),
            addrs: vec![IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST)],
        });
    }
    let unresolved = |why: String| {
        err(
            line,
            format!(
                "cannot resolve host {} ({why}); write its IP address instead, or add it to /etc/hosts",
                quote(host)
            ),
        )
    };
    let found = resolve(host).map_err(|e| unresolved(e.to_string()))?;
    let mut addrs: Vec<IpAddr> = Vec::new();
    for addr in found.into_iter().map(canonical_ip) {
        if !addrs.contains(&addr) {
            addrs.push(addr);
        }
    }
    if addrs.is_empty() {
        return Err(unresolved("no addresses".to_string()));
    }
    Ok(ClientMatch::Host { name: host.to_string(), addrs })
}

/// An IPv6 literal has a ':'; an IPv4 one is digits and dots. Anything else
/// is a name (which may itself start with a digit).
fn looks_like_address(text: &str) -> bool {
    text.contains(':') || text.chars().all(|c| c.is_ascii_digit() || c == '.')
}

fn parse_ip(text: &str) -> Option<IpAddr> {
    let text = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(text);
    text.parse().ok()
}

fn parse_net(host: &str, line: usize, warnings: &mut Vec<Warning>) -> Result<ClientMatch, ExportsError> {
    let (addr_text, len_text) = host.split_once('/').unwrap_or((host, ""));
    let Some(addr) = parse_ip(addr_text) else {
        return Err(bad_address(host, line));
    };
    let (family, max) = if addr.is_ipv4() { ("IPv4", 32) } else { ("IPv6", 128) };
    let prefix_len: u32 = if !len_text.is_empty() && len_text.bytes().all(|b| b.is_ascii_digit()) {
        // A prefix too long for u32 is as wrong as 33: report it the same way.
        len_text.parse().unwrap_or(u32::MAX)
    } else if let (IpAddr::V4(_), Ok(netmask)) = (addr, len_text.parse::<Ipv4Addr>()) {
        let bits = u32::from(netmask);
        let ones = bits.leading_ones();
        // Contiguous means nothing is left once the leading ones are shifted out.
        if bits.checked_shl(ones).unwrap_or(0) != 0 {
            return Err(err(
                line,
                format!(
                    "netmask {} in {} is not contiguous; write a prefix length such as {addr_text}/24",
                    quote(len_text),
                    quote(host)
                ),
            ));
        }
        ones
    } else {
        return Err(err(
            line,
            format!(
                "bad network {}: write an address and a prefix length, e.g. 10.0.0.0/8 or fd00::/8",
                quote(host)
            ),
        ));
    };
    if prefix_len > max {
        let shown = if len_text.len() > 12 { "that" } else { len_text };
        return Err(err(
            line,
            format!("prefix length {shown} too long for {family} in {}; at most /{max}", quote(host)),
        ));
    }
    let mut addr = addr;
    let mut prefix_len = prefix_len as u8;
    // ::ffff:a.b.c.d/N with N ≥ 96 is an IPv4 network; store it as one so it
    // matches canonicalised clients.
    if let IpAddr::V6(v6) = addr {
        if let (Some(v4), true) = (v6.to_ipv4_mapped(), prefix_len >= 96) {
            addr = IpAddr::V4(v4);
            prefix_len -= 96;
        }
    }
    let masked = mask(addr, prefix_len);
    if masked != addr {
        warnings.push(Warning {
            line,
            text: format!(
                "{} has host bits set; it is read as {masked}/{prefix_len} — write that to silence this warning",
                quote(host)
            ),
        });
    }
    Ok(ClientMatch::Net { addr: masked, prefix_len })
}

fn bad_address(host: &str, line: usize) -> ExportsError {
    err(
        line,
        format!(
            "bad address {}: write an IPv4 address such as 10.0.0.1 or 10.0.0.0/8, \
             or an IPv6 one such as fd00::1 or fd00::/8",
            quote(host)
        ),
    )
}

/// IPv4-mapped IPv6 (`::ffff:a.b.c.d`) → IPv4, so a dual-stack socket's view
/// of an IPv4 peer matches IPv4 rules.
fn canonical_ip(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

/// `addr` with all but the first `prefix_len` bits cleared.
fn mask(addr: IpAddr, prefix_len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let keep = u32::MAX.checked_shl(32 - u32::from(prefix_len.min(32))).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & keep))
        }
        IpAddr::V6(v6) => {
            let keep = u128::MAX.checked_shl(128 - u32::from(prefix_len.min(128))).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & keep))
        }
    }
}

// ---------------------------------------------------------------------------
// Options

/// What an option sets; two options in one list that set the same thing with
/// different words (`ro` and `rw`, `anonuid=1` and `anonuid=2`) conflict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    Access,
    Sync,
    Secure,
    RootSquash,
    AllSquash,
    AnonUid,
    AnonGid,
    Fsid,
    Sec,
    Xprtsec,
    Wdelay,
    SubtreeCheck,
    Hide,
    Crossmnt,
    Locks,
    Acl,
    Mountpoint,
}

/// Options that change behaviour (listed in the "unknown option" message).
const VALID_OPTIONS: &str = "ro, rw, sync, async, secure, insecure, root_squash, no_root_squash, \
     all_squash, no_all_squash, anonuid=N, anongid=N, fsid=N, sec=sys, xprtsec=none:tls:mtls";

/// Every option name, for "did you mean".
const OPTION_NAMES: &[&str] = &[
    "ro",
    "rw",
    "sync",
    "async",
    "secure",
    "insecure",
    "root_squash",
    "no_root_squash",
    "all_squash",
    "no_all_squash",
    "anonuid",
    "anongid",
    "fsid",
    "sec",
    "xprtsec",
    "wdelay",
    "no_wdelay",
    "subtree_check",
    "no_subtree_check",
    "hide",
    "nohide",
    "crossmnt",
    "nocrossmnt",
    "secure_locks",
    "insecure_locks",
    "auth_nlm",
    "no_auth_nlm",
    "acl",
    "no_acl",
    "mountpoint",
    "mp",
];

/// Linux options that eagernfs knows but cannot honour: named in the error
/// rather than called unknown.
const UNSUPPORTED_OPTIONS: &[&str] = &[
    "refer",
    "replicas",
    "pnfs",
    "no_pnfs",
    "security_label",
    "no_security_label",
    "nordirplus",
    "rdirplus",
    "root_dir",
    "uuid",
];

/// Applies a comma-separated option list on top of `base`. `who` names the
/// client (or "the default options") in conflict messages.
fn parse_options(
    list: &str,
    base: ExportOptions,
    line: usize,
    who: &str,
) -> Result<ExportOptions, ExportsError> {
    let mut options = base;
    let mut given: Vec<(Setting, &str)> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|item| !item.is_empty()) {
        let (key, value) = match item.split_once('=') {
            Some((key, value)) => (key.trim(), Some(value.trim())),
            None => (item, None),
        };
        let setting = apply_option(&mut options, key, value, item, line)?;
        match given.iter().find(|(s, _)| *s == setting) {
            Some(&(_, earlier)) if earlier != item => {
                return Err(err(
                    line,
                    format!("{} and {} both given for {who}; keep one", quote(earlier), quote(item)),
                ));
            }
            Some(_) => {}
            None => given.push((setting, item)),
        }
    }
    Ok(options)
}

fn apply_option(
    options: &mut ExportOptions,
    key: &str,
    value: Option<&str>,
    item: &str,
    line: usize,
) -> Result<Setting, ExportsError> {
    let flag = |setting: Setting| match value {
        None => Ok(setting),
        Some(_) => Err(err(line, format!("{} takes no value; write just {}", quote(key), quote(key)))),
    };
    let setting = match key {
        "ro" | "rw" => {
            options.read_only = key == "ro";
            flag(Setting::Access)?
        }
        "sync" | "async" => {
            options.sync = key == "sync";
            flag(Setting::Sync)?
        }
        "secure" | "insecure" => {
            options.secure = key == "secure";
            flag(Setting::Secure)?
        }
        "root_squash" | "no_root_squash" => {
            options.root_squash = key == "root_squash";
            flag(Setting::RootSquash)?
        }
        "all_squash" | "no_all_squash" => {
            options.all_squash = key == "all_squash";
            flag(Setting::AllSquash)?
        }
        "anonuid" => {
            options.anonuid = id_value(key, value, line)?;
            Setting::AnonUid
        }
        "anongid" => {
            options.anongid = id_value(key, value, line)?;
            Setting::AnonGid
        }
        "fsid" => {
            options.fsid = Some(fsid_value(value, line)?);
            Setting::Fsid
        }
        "sec" => {
            check_sec(value, line)?;
            Setting::Sec
        }
        "xprtsec" => {
            options.xprtsec = xprtsec_value(value, line)?;
            Setting::Xprtsec
        }
        "wdelay" | "no_wdelay" => flag(Setting::Wdelay)?,
        "subtree_check" | "no_subtree_check" => flag(Setting::SubtreeCheck)?,
        "hide" | "nohide" => flag(Setting::Hide)?,
        "crossmnt" | "nocrossmnt" => flag(Setting::Crossmnt)?,
        "secure_locks" | "insecure_locks" | "auth_nlm" | "no_auth_nlm" => flag(Setting::Locks)?,
        "acl" | "no_acl" => flag(Setting::Acl)?,
        // `mountpoint` may carry a path (`mp=/mnt/x`); ignored either way.
        "mountpoint" | "mp" => Setting::Mountpoint,
        _ if UNSUPPORTED_OPTIONS.contains(&key) => {
            return Err(err(
                line,
                format!("export option {} is not supported by eagernfs; remove it", quote(item)),
            ));
        }
        _ => {
            let hint = suggest(key)
                .map(|name| match value {
                    Some(value) => format!(" — did you mean \"{name}={value}\"?"),
                    None => format!(" — did you mean \"{name}\"?"),
                })
                .unwrap_or_default();
            return Err(err(
                line,
                format!("unknown export option {}{hint} (valid: {VALID_OPTIONS})", quote(item)),
            ));
        }
    };
    Ok(setting)
}

fn xprtsec_value(value: Option<&str>, line: usize) -> Result<Xprtsec, ExportsError> {
    let bad = |why: String| {
        err(
            line,
            format!(
                "xprtsec {why}: write a colon-separated list of none, tls and mtls, e.g. xprtsec=tls:mtls"
            ),
        )
    };
    let v = value.ok_or_else(|| bad("needs a value".into()))?;
    let mut x = Xprtsec { none: false, tls: false, mtls: false };
    for word in v.split(':') {
        match word {
            "none" => x.none = true,
            "tls" => x.tls = true,
            "mtls" => x.mtls = true,
            other => return Err(bad(format!("has {} in it", quote(other)))),
        }
    }
    Ok(x)
}

fn id_value(key: &str, value: Option<&str>, line: usize) -> Result<u32, ExportsError> {
    let parsed = value.filter(|v| v.bytes().all(|b| b.is_ascii_digit())).and_then(|v| v.parse().ok());
    parsed.ok_or_else(|| {
        let got = value.map(|v| format!(" (got {})", quote(v))).unwrap_or_default();
        err(line, format!("{key} needs a number: {key}={NOBODY_ID}{got}; ids go from 0 to 4294967295"))
    })
}

fn fsid_value(value: Option<&str>, line: usize) -> Result<u32, ExportsError> {
    let bad = |got: &str| err(line, format!("fsid needs a number or a UUID: fsid=1{got}"));
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Err(bad(""));
    };
    if value == "root" {
        return Ok(0);
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        return value
            .parse()
            .map_err(|_| err(line, format!("fsid {} too large; at most 4294967295", quote(value))));
    }
    let hex: Vec<u8> =
        value.bytes().filter(|b| !matches!(b, b'-' | b':')).map(|b| b.to_ascii_lowercase()).collect();
    if hex.len() == 32 && hex.iter().all(u8::is_ascii_hexdigit) {
        return Ok(fnv1a_32(&hex));
    }
    Err(bad(&format!(" (got {})", quote(value))))
}

/// FNV-1a, 32 bits: a stable, dependency-free way to fold a UUID into the
/// 32-bit fsid the file handle carries. Stability across releases matters
/// more than quality here (handles must survive restarts).
fn fnv1a_32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |hash, &b| (hash ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

fn check_sec(value: Option<&str>, line: usize) -> Result<(), ExportsError> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Err(err(line, "sec needs a flavour: sec=sys".to_string()));
    };
    match value.split(':').map(str::trim).find(|flavour| *flavour != "sys") {
        None => Ok(()),
        Some(flavour) => Err(err(
            line,
            format!("sec={flavour} is not supported: eagernfs only does AUTH_SYS; write sec=sys"),
        )),
    }
}

/// The known option closest to `key`, if it is close enough to be a typo.
fn suggest(key: &str) -> Option<&'static str> {
    if key.len() > 40 {
        return None;
    }
    // Lower-cased so that "RW" suggests "rw": options are case-sensitive.
    let key = key.to_ascii_lowercase();
    OPTION_NAMES
        .iter()
        .map(|name| (edit_distance(&key, name), *name))
        .filter(|&(distance, name)| distance <= 2 && distance < name.len())
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, name)| name)
}

/// Levenshtein distance (inputs are short: option names).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

fn err(line: usize, message: String) -> ExportsError {
    ExportsError { line, message }
}

/// `text` in double quotes, with control characters escaped so a message
/// stays on one line.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn xprtsec_lists_the_allowed_security_and_a_proven_name_matches_a_host_rule() {
        assert_eq!(
            only_options("/srv *(xprtsec=mtls)").xprtsec,
            Xprtsec { none: false, tls: false, mtls: true }
        );
        assert_eq!(
            only_options("/srv *(xprtsec=none:tls)").xprtsec,
            Xprtsec { none: true, tls: true, mtls: false }
        );
        let e = fails("/srv *(xprtsec=ssl)");
        assert!(e.message.contains("xprtsec") && e.message.contains("tls:mtls"), "{e}");
        let x = only_options("/srv *(xprtsec=tls:mtls)").xprtsec;
        assert!(!x.allows(TransportSecurity::None) && x.allows(TransportSecurity::Tls));
        assert_eq!(only_options("/srv *(xprtsec=mtls)").to_string().rsplit(',').next(), Some("xprtsec=mtls"));
        let export = Export {
            path: PathBuf::from("/srv"),
            source: ExportSource::Directory,
            clients: vec![ClientRule {
                matcher: ClientMatch::Host {
                    name: "client.test".into(),
                    addrs: vec!["10.9.9.9".parse().unwrap()],
                },
                options: ExportOptions::default(),
            }],
            line: 1,
        };
        let from: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(export.options_for(from).is_none());
        assert!(export.options_for_peer(from, &|n| n == "other.test").is_none());
        assert!(export.options_for_peer(from, &|n| n == "client.test").is_some());
    }
    use super::*;
    use proptest::prelude::*;

    /// A resolver that never touches the network.
    fn fake_resolve(name: &str) -> io::Result<Vec<IpAddr>> {
        let addrs: &[&str] = match name {
            "alpha" => &["10.1.1.1"],
            "beta.example.org" => &["192.168.7.7", "fd00::7", "192.168.7.7"],
            "mapped" => &["::ffff:10.9.9.9"],
            "nothing" => &[],
            _ => return Err(io::Error::new(io::ErrorKind::NotFound, "no such host")),
        };
        Ok(addrs.iter().map(|a| ip(a)).collect())
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn ok(text: &str) -> (Exports, Vec<Warning>) {
        match parse_with_resolver(text, fake_resolve) {
            Ok(parsed) => parsed,
            Err(e) => panic!("{text:?} should parse, got: {e}"),
        }
    }

    fn fails(text: &str) -> ExportsError {
        match parse_with_resolver(text, fake_resolve) {
            Ok(parsed) => panic!("{text:?} should fail, parsed as {parsed:?}"),
            Err(e) => e,
        }
    }

    /// Asserts the error is on `line` and its message contains each of `parts`.
    fn assert_error(text: &str, line: usize, parts: &[&str]) {
        let error = fails(text);
        let shown = error.to_string();
        assert_eq!(error.line, line, "wrong line in {shown:?}");
        assert!(shown.starts_with(&format!("line {line}: ")), "{shown:?}");
        for part in parts {
            assert!(shown.contains(part), "{shown:?} should contain {part:?}");
        }
    }

    fn only_options(text: &str) -> ExportOptions {
        let (exports, _) = ok(text);
        assert_eq!(exports.entries.len(), 1);
        assert_eq!(exports.entries[0].clients.len(), 1);
        exports.entries[0].clients[0].options
    }

    #[test]
    fn a_cephfs_url_exports_its_path() {
        let (exports, _) = ok("cephfs://nfs@data/shared/x?conf=/etc/ceph/a.conf 10.0.0.0/8(rw)\n/srv *");
        let e = &exports.entries[0];
        assert_eq!(e.path, PathBuf::from("/shared/x"));
        let ExportSource::CephFs(src) = &e.source else { panic!("not a CephFS: {e:?}") };
        assert_eq!((src.client_id.as_str(), src.fs_name.as_str()), ("nfs", "data"));
        assert_eq!(src.conf, PathBuf::from("/etc/ceph/a.conf"));
        assert!(!e.clients[0].options.read_only);
        assert_eq!(exports.entries[1].source, ExportSource::Directory);
        assert_eq!(exports.find(Path::new("/shared/x")).map(|e| e.line), Some(1));
        // Written back and read again: the same table.
        let (again, _) = ok(&exports.to_exports_syntax());
        assert_eq!(again, exports);
        // The same path from a directory and a CephFS is one path twice.
        assert_error("/a *\ncephfs://fs/a *", 2, &["/a exported twice (also on line 1)"]);
        assert_error(
            "/a *\ncephfs://fs/a/../b *",
            2,
            &["may not contain \"..\"", "cephfs://[ID@]FSNAME/PATH"],
        );
    }

    #[test]
    fn defaults_are_the_linux_ones() {
        let d = ExportOptions::default();
        assert!(d.read_only && d.sync && d.secure && d.root_squash && !d.all_squash);
        assert_eq!((d.anonuid, d.anongid, d.fsid), (65534, 65534, None));
    }

    #[test]
    fn a_typical_file() {
        let text = "\
# exports for the lab
/srv/data   10.0.0.0/8(rw,no_root_squash) 192.168.1.5   # trailing comment

/srv/pub    *(ro,insecure)
";
        let (exports, warnings) = ok(text);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(exports.entries.len(), 2);
        let data = &exports.entries[0];
        assert_eq!(data.path, Path::new("/srv/data"));
        assert_eq!(data.line, 2);
        assert_eq!(data.clients[0].matcher, ClientMatch::Net { addr: ip("10.0.0.0"), prefix_len: 8 });
        assert!(!data.clients[0].options.read_only);
        assert!(!data.clients[0].options.root_squash);
        assert_eq!(data.clients[1].matcher, ClientMatch::Addr(ip("192.168.1.5")));
        assert_eq!(data.clients[1].options, ExportOptions::default());
        let public = &exports.entries[1];
        assert_eq!(public.line, 4);
        assert_eq!(public.clients[0].matcher, ClientMatch::Any);
        assert!(!public.clients[0].options.secure);
    }

    #[test]
    fn every_option_sets_its_field() {
        let base = ExportOptions::default();
        let cases: Vec<(&str, ExportOptions)> = vec![
            ("ro", base),
            ("rw", ExportOptions { read_only: false, ..base }),
            ("sync", base),
            ("async", ExportOptions { sync: false, ..base }),
            ("secure", base),
            ("insecure", ExportOptions { secure: false, ..base }),
            ("root_squash", base),
            ("no_root_squash", ExportOptions { root_squash: false, ..base }),
            ("all_squash", ExportOptions { all_squash: true, ..base }),
            ("no_all_squash", base),
            ("anonuid=1000", ExportOptions { anonuid: 1000, ..base }),
            ("anongid=4294967295", ExportOptions { anongid: u32::MAX, ..base }),
            ("fsid=7", ExportOptions { fsid: Some(7), ..base }),
            ("fsid=0", ExportOptions { fsid: Some(0), ..base }),
            ("fsid=root", ExportOptions { fsid: Some(0), ..base }),
            ("sec=sys", base),
        ];
        for (option, expected) in cases {
            assert_eq!(only_options(&format!("/e 10.0.0.1({option})")), expected, "{option}");
        }
    }

    #[test]
    fn the_default_side_of_each_pair_overrides_a_default_block() {
        let got = only_options("/e -rw,async,insecure,no_root_squash,all_squash 1.2.3.4(ro,sync,secure,root_squash,no_all_squash)");
        assert_eq!(got, ExportOptions::default());
    }

    #[test]
    fn fsid_uuid_is_hashed_stably_whatever_its_separators() {
        let a = only_options("/e *(fsid=6ba7b810-9dad-11d1-80b4-00c04fd430c8)").fsid;
        let b = only_options("/e *(fsid=6BA7B8109DAD11D180B400C04FD430C8)").fsid;
        let c = only_options("/e *(fsid=6ba7b810:9dad11d1:80b400c0:4fd430c8)").fsid;
        assert_eq!(a, Some(fnv1a_32(b"6ba7b8109dad11d180b400c04fd430c8")));
        assert_eq!(a, b);
        assert_eq!(a, c);
        let other = only_options("/e *(fsid=6ba7b810-9dad-11d1-80b4-00c04fd430c9)").fsid;
        assert_ne!(a, other);
    }

    #[test]
    fn no_op_options_are_accepted_silently_and_change_nothing() {
        for option in [
            "wdelay",
            "no_wdelay",
            "subtree_check",
            "no_subtree_check",
            "hide",
            "nohide",
            "crossmnt",
            "nocrossmnt",
            "secure_locks",
            "insecure_locks",
            "auth_nlm",
            "no_auth_nlm",
            "acl",
            "no_acl",
            "mountpoint",
            "mp",
            "mountpoint=/srv",
            "mp=/mnt/x",
        ] {
            let (exports, warnings) = ok(&format!("/e 10.0.0.1({option})"));
            assert!(warnings.is_empty(), "{option}: {warnings:?}");
            assert_eq!(exports.entries[0].clients[0].options, ExportOptions::default(), "{option}");
        }
    }

    #[test]
    fn option_lists_tolerate_spaces_and_empty_items() {
        let got = only_options("/e 10.0.0.1( rw , async ,, )");
        assert!(!got.read_only && !got.sync);
        assert_eq!(only_options("/e 10.0.0.1()"), ExportOptions::default());
        // Repeating the same option is harmless.
        assert!(!only_options("/e 10.0.0.1(rw,rw)").read_only);
    }

    #[test]
    fn default_block_applies_to_every_following_host() {
        let (exports, warnings) = ok("/e -rw,anonuid=7 10.0.0.1 10.0.0.2(ro) 10.0.0.3(all_squash)");
        assert!(warnings.is_empty());
        let options: Vec<_> = exports.entries[0].clients.iter().map(|c| c.options).collect();
        let defaults = ExportOptions { read_only: false, anonuid: 7, ..ExportOptions::default() };
        assert_eq!(options[0], defaults);
        assert_eq!(options[1], ExportOptions { read_only: true, ..defaults });
        assert_eq!(options[2], ExportOptions { all_squash: true, ..defaults });
        // Two default blocks accumulate, the later one winning.
        let got = only_options("/e -rw -async,ro 10.0.0.1");
        assert!(got.read_only && !got.sync);
        // With no host, the defaults go to everyone.
        let (exports, warnings) = ok("/e -rw");
        assert_eq!(exports.entries[0].clients[0].matcher, ClientMatch::Any);
        assert!(!exports.entries[0].clients[0].options.read_only);
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn a_line_without_clients_exports_to_everyone_with_a_warning() {
        let (exports, warnings) = ok("\n/srv/x\n");
        assert_eq!(
            exports.entries[0].clients,
            vec![ClientRule { matcher: ClientMatch::Any, options: ExportOptions::default() }]
        );
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].line, 2);
        assert!(warnings[0].to_string().contains("write \"/srv/x *\""), "{}", warnings[0]);
    }

    #[test]
    fn space_before_parenthesis_means_everyone_and_warns() {
        let (exports, warnings) = ok("/srv 10.0.0.1 (rw)");
        let clients = &exports.entries[0].clients;
        // The host gets the defaults (read-only) and everyone gets rw: the
        // classic mistake, which is why it warns.
        assert_eq!(clients[0].matcher, ClientMatch::Addr(ip("10.0.0.1")));
        assert!(clients[0].options.read_only);
        assert_eq!(clients[1].matcher, ClientMatch::Any);
        assert!(!clients[1].options.read_only);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].text.contains("\"*(rw)\""), "{}", warnings[0]);
        assert!(warnings[0].text.contains("remove the space"), "{}", warnings[0]);
    }

    #[test]
    fn whitespace_inside_parentheses_keeps_the_client_together() {
        let (exports, warnings) = ok("/srv 10.0.0.1(rw, async)");
        assert!(warnings.is_empty());
        let options = exports.entries[0].clients[0].options;
        assert!(!options.read_only && !options.sync);
    }

    #[test]
    fn comments_blank_lines_and_crlf() {
        let (exports, _) =
            ok("# only a comment\r\n\r\n   \t\n/a *(rw)# touching comment\r\n  # indented comment\n/b *\n");
        let paths: Vec<_> = exports.entries.iter().map(|e| e.path.clone()).collect();
        assert_eq!(paths, vec![PathBuf::from("/a"), PathBuf::from("/b")]);
        assert!(!exports.entries[0].clients[0].options.read_only);
        assert_eq!(exports.entries[1].line, 6);
        assert_eq!(ok("").0, Exports::default());
    }

    #[test]
    fn continuation_lines_join_and_keep_their_own_line_numbers() {
        let text = "/srv/long 10.0.0.1(rw) \\\n   10.0.0.2(rw)\\\n\t10.0.0.3\n/next *\n";
        let (exports, _) = ok(text);
        assert_eq!(exports.entries.len(), 2);
        let matchers: Vec<_> = exports.entries[0].clients.iter().map(|c| c.matcher.clone()).collect();
        assert_eq!(
            matchers,
            vec![
                ClientMatch::Addr(ip("10.0.0.1")),
                ClientMatch::Addr(ip("10.0.0.2")),
                ClientMatch::Addr(ip("10.0.0.3")),
            ]
        );
        assert_eq!(exports.entries[0].line, 1);
        assert_eq!(exports.entries[1].line, 4);
        // An error on a continuation line names that line.
        assert_error("/srv 10.0.0.1 \\\n 10.0.0.2 \\\n 10.0.0.3(rww)\n", 3, &["\"rww\""]);
        // A comment after the backslash's line content still continues.
        let (exports, _) = ok("/srv 10.0.0.1 \\ # first client\n 10.0.0.2\n");
        assert_eq!(exports.entries[0].clients.len(), 2);
        // The path itself may be alone on the first line.
        let (exports, _) = ok("/srv \\\n*(rw)");
        assert!(!exports.entries[0].clients[0].options.read_only);
        // A trailing backslash at the end of the file is harmless.
        assert_eq!(ok("/srv *\\").0.entries.len(), 1);
    }

    #[test]
    fn paths_escapes_quotes_and_normalisation() {
        let path_of = |text: &str| ok(text).0.entries[0].path.clone();
        assert_eq!(path_of("/srv/my\\040dir *"), PathBuf::from("/srv/my dir"));
        assert_eq!(path_of("\"/srv/my dir\" *"), PathBuf::from("/srv/my dir"));
        assert_eq!(path_of("/srv/\"a # b\" *"), PathBuf::from("/srv/a # b"));
        assert_eq!(path_of("/srv/tab\\011x\\043 *"), PathBuf::from("/srv/tab\tx#"));
        assert_eq!(path_of("//srv///a/./b/ *"), PathBuf::from("/srv/a/b"));
        assert_eq!(path_of("/ *"), PathBuf::from("/"));
        assert_eq!(path_of("/./ *"), PathBuf::from("/"));
        assert_eq!(
            path_of("/srv/\\377 *").as_os_str().as_bytes(),
            b"/srv/\xff",
            "escapes may produce bytes that are not UTF-8"
        );
        assert_eq!(path_of("/srv/caf\u{e9} *"), PathBuf::from("/srv/caf\u{e9}"));
    }

    #[test]
    fn path_errors() {
        assert_error("\n\n\n\ndata *", 5, &["export path \"data\" must be absolute", "e.g. \"/data\""]);
        assert_error("./data *", 1, &["e.g. \"/data\""]);
        assert_error("/srv/../etc *", 1, &["\"/srv/../etc\"", "\"..\"", "real path"]);
        assert_error("/srv/a\\04 *", 1, &["bad escape", "\\040"]);
        assert_error("/srv/a\\400 *", 1, &["bad escape", "\\377"]);
        assert_error("/srv/a\\000 *", 1, &["bad escape"]);
        assert_error("/srv/a\\x *", 1, &["bad escape", "double quotes"]);
        assert_error("\"/srv/a b *", 1, &["closing double quote"]);
    }

    #[test]
    fn duplicate_export_names_both_lines() {
        assert_error(
            "/srv/a 10.0.0.1\n/srv/b *\n\n/srv/a/ 10.0.0.2\n",
            4,
            &["/srv/a exported twice (also on line 1)", "merge the client lists onto one line"],
        );
    }

    #[test]
    fn duplicate_client_is_an_error() {
        assert_error(
            "/srv 10.0.0.1(rw) 10.0.0.1(ro)",
            1,
            &["\"10.0.0.1\" listed twice for /srv", "keep one"],
        );
        assert_error("/srv *(rw) (ro)", 1, &["listed twice"]);
        // The same network written two ways is the same client.
        assert_error("/srv 10.0.0.0/8 10.0.0.0/255.0.0.0", 1, &["listed twice"]);
    }

    #[test]
    fn unknown_option_suggests_the_nearest() {
        assert_error(
            "/a *\n/b *\n/srv 10.0.0.1(rww)",
            3,
            &["unknown export option \"rww\" — did you mean \"rw\"?", "(valid: ro, rw, sync, async"],
        );
        assert_error("/srv *(no_root_sqash)", 1, &["did you mean \"no_root_squash\"?"]);
        assert_error("/srv *(RW)", 1, &["did you mean \"rw\"?"]);
        assert_error("/srv *(anonid=5)", 1, &["did you mean \"anonuid=5\"?"]);
        let error = fails("/srv *(frobnicate)");
        assert!(!error.message.contains("did you mean"), "{error}");
        assert!(error.message.contains("valid:"), "{error}");
    }

    #[test]
    fn option_value_errors_give_the_right_form() {
        assert_error(
            "/a *\n/b *\n/c *\n/d *\n/e *\n/f *\n/srv *(anonuid)",
            7,
            &["anonuid needs a number: anonuid=65534"],
        );
        assert_error("/srv *(anonuid=nobody)", 1, &["anonuid needs a number: anonuid=65534", "\"nobody\""]);
        assert_error("/srv *(anonuid=-2)", 1, &["anonuid needs a number"]);
        assert_error("/srv *(anongid=4294967296)", 1, &["anongid needs a number: anongid=65534"]);
        assert_error("/srv *(fsid)", 1, &["fsid needs a number or a UUID: fsid=1"]);
        assert_error("/srv *(fsid=abc)", 1, &["fsid needs a number or a UUID", "\"abc\""]);
        assert_error("/srv *(fsid=99999999999)", 1, &["too large", "4294967295"]);
        assert_error("/srv *(ro=1)", 1, &["\"ro\" takes no value; write just \"ro\""]);
        assert_error("/srv *(sec)", 1, &["sec=sys"]);
        assert_error("/srv *(sec=krb5p)", 1, &["sec=krb5p is not supported", "AUTH_SYS", "write sec=sys"]);
        assert_error("/srv *(sec=sys:krb5)", 1, &["sec=krb5 is not supported"]);
        assert_error("/srv *(refer=/a@b)", 1, &["not supported by eagernfs; remove it"]);
    }

    #[test]
    fn contradictory_options_name_both() {
        assert_error(
            "/a *\n/srv 10.0.0.0/8(ro,rw)",
            2,
            &["\"ro\" and \"rw\" both given for 10.0.0.0/8; keep one"],
        );
        assert_error("/srv *(sync,async)", 1, &["\"sync\" and \"async\" both given for *"]);
        assert_error("/srv *(secure,insecure)", 1, &["both given"]);
        assert_error("/srv *(root_squash,no_root_squash)", 1, &["both given"]);
        assert_error("/srv *(all_squash,no_all_squash)", 1, &["both given"]);
        assert_error("/srv *(anonuid=1,anonuid=2)", 1, &["\"anonuid=1\" and \"anonuid=2\""]);
        assert_error("/srv *(wdelay,no_wdelay)", 1, &["both given"]);
        assert_error("/srv -ro,rw *", 1, &["both given for the default options"]);
        assert_error("/srv (ro,rw)", 1, &["both given for everyone"]);
    }

    #[test]
    fn default_block_placement_errors() {
        assert_error("/srv 10.0.0.1 -rw", 1, &["\"-rw\" must come right after the path"]);
        assert_error("/srv - *", 1, &["no options after the dash"]);
    }

    #[test]
    fn parenthesis_errors() {
        assert_error("/srv 10.0.0.1(rw", 1, &["no closing parenthesis"]);
        assert_error("/srv 10.0.0.1)", 1, &["')' with no '('"]);
        assert_error("/srv 10.0.0.1(rw)10.0.0.2", 1, &["unexpected text after ')'", "put a space"]);
        assert_error("/srv 10.0.0.1((rw))", 1, &["parentheses inside"]);
    }

    #[test]
    fn addresses_and_networks() {
        let matcher = |client: &str| ok(&format!("/e {client}")).0.entries[0].clients[0].matcher.clone();
        assert_eq!(matcher("fd00::1"), ClientMatch::Addr(ip("fd00::1")));
        assert_eq!(matcher("[fd00::1]"), ClientMatch::Addr(ip("fd00::1")));
        assert_eq!(matcher("::ffff:10.0.0.1"), ClientMatch::Addr(ip("10.0.0.1")));
        assert_eq!(matcher("fd00::/8"), ClientMatch::Net { addr: ip("fd00::"), prefix_len: 8 });
        assert_eq!(
            matcher("192.168.0.0/255.255.0.0"),
            ClientMatch::Net { addr: ip("192.168.0.0"), prefix_len: 16 }
        );
        assert_eq!(matcher("0.0.0.0/0.0.0.0"), ClientMatch::Net { addr: ip("0.0.0.0"), prefix_len: 0 });
        assert_eq!(matcher("10.1.2.3/32"), ClientMatch::Net { addr: ip("10.1.2.3"), prefix_len: 32 });
        assert_eq!(matcher("::/0"), ClientMatch::Net { addr: ip("::"), prefix_len: 0 });
        assert_eq!(matcher("::ffff:10.0.0.0/104"), ClientMatch::Net { addr: ip("10.0.0.0"), prefix_len: 8 });
        // Host bits are cleared, with a warning that shows the result.
        let (exports, warnings) = ok("/e 10.1.2.3/8");
        assert_eq!(
            exports.entries[0].clients[0].matcher,
            ClientMatch::Net { addr: ip("10.0.0.0"), prefix_len: 8 }
        );
        assert!(warnings[0].text.contains("10.0.0.0/8"), "{}", warnings[0]);
    }

    #[test]
    fn address_errors() {
        assert_error("/a *\n/b 10.0.0.0/8 10.0.0.300/8", 2, &["bad address \"10.0.0.300/8\""]);
        assert_error("/srv 10.0.0.300", 1, &["bad address \"10.0.0.300\"", "10.0.0.0/8"]);
        assert_error("/srv fe80::1%eth0", 1, &["bad address"]);
        assert_error("/srv 10.0.0", 1, &["bad address"]);
        assert_error("/srv 10.0.0.0/33", 1, &["prefix length 33 too long for IPv4"]);
        assert_error("/srv fd00::/129", 1, &["prefix length 129 too long for IPv6"]);
        assert_error("/srv 10.0.0.0/99999999999999999999", 1, &["too long for IPv4"]);
        assert_error("/srv 10.0.0.0/255.0.255.0", 1, &["not contiguous", "prefix length"]);
        assert_error("/srv fd00::/ffff::", 1, &["bad network", "fd00::/8"]);
        assert_error("/srv 10.0.0.0/", 1, &["bad network"]);
        assert_error("/srv @trusted", 1, &["netgroups", "\"@trusted\"", "list the hosts"]);
        assert_error("/srv gss/krb5", 1, &["AUTH_SYS"]);
        assert_error("/srv host!name", 1, &["bad client \"host!name\""]);
        assert_error("/srv \"quoted\"", 1, &["bad client"]);
    }

    #[test]
    fn host_names_resolve_at_parse_time() {
        let (exports, warnings) = ok("/e alpha(rw) beta.example.org mapped");
        assert!(warnings.is_empty());
        let clients = &exports.entries[0].clients;
        assert_eq!(
            clients[0].matcher,
            ClientMatch::Host { name: "alpha".into(), addrs: vec![ip("10.1.1.1")] }
        );
        assert_eq!(
            clients[1].matcher,
            ClientMatch::Host {
                name: "beta.example.org".into(),
                addrs: vec![ip("192.168.7.7"), ip("fd00::7")]
            },
            "duplicates are dropped"
        );
        assert_eq!(
            clients[2].matcher,
            ClientMatch::Host { name: "mapped".into(), addrs: vec![ip("10.9.9.9")] }
        );
        let export = &exports.entries[0];
        assert!(!export.options_for(ip("10.1.1.1")).unwrap().read_only);
        assert!(export.options_for(ip("fd00::7")).unwrap().read_only);
        assert!(export.options_for(ip("::ffff:10.9.9.9")).is_some());
        assert!(export.options_for(ip("10.1.1.2")).is_none());
    }

    #[test]
    fn unresolvable_host_is_an_error() {
        assert_error(
            "/a *\n/srv nosuchhost(rw)",
            2,
            &["cannot resolve host \"nosuchhost\"", "no such host", "write its IP address"],
        );
        assert_error("/srv nothing", 1, &["cannot resolve host \"nothing\""]);
    }

    #[test]
    fn localhost_is_fixed_and_needs_no_resolver() {
        let (exports, _) = parse_with_resolver("/e localhost(rw)", |_: &str| -> io::Result<Vec<IpAddr>> {
            panic!("localhost must not be resolved")
        })
        .unwrap();
        let export = &exports.entries[0];
        for client in ["127.0.0.1", "::1", "::ffff:127.0.0.1"] {
            assert!(!export.options_for(ip(client)).unwrap().read_only, "{client}");
        }
        assert!(export.options_for(ip("127.0.0.2")).is_none());
    }

    #[test]
    fn system_resolver_parse_works_offline_for_addresses_and_localhost() {
        let (exports, _) = parse("/e localhost 127.0.0.0/8(rw)").unwrap();
        assert_eq!(exports.entries[0].clients.len(), 2);
    }

    #[test]
    fn wildcards_are_kept_never_match_and_warn() {
        let (exports, warnings) = ok("/e *.example.com(rw) host?? 10.0.0.1");
        let export = &exports.entries[0];
        assert_eq!(export.clients[0].matcher, ClientMatch::Wildcard("*.example.com".into()));
        assert_eq!(export.clients[1].matcher, ClientMatch::Wildcard("host??".into()));
        assert_eq!(warnings.len(), 2);
        assert!(warnings[0].text.contains("\"*.example.com\"") && warnings[0].text.contains("never matches"));
        assert!(!export.clients[0].matcher.matches(ip("10.0.0.2")));
        assert!(export.options_for(ip("10.0.0.2")).is_none());
        assert!(export.options_for(ip("10.0.0.1")).is_some());
    }

    #[test]
    fn most_specific_rule_wins_whatever_the_order() {
        let text = "/e *(ro,anonuid=1) 10.0.0.0/8(anonuid=8) 10.1.0.0/16(anonuid=16) 10.1.2.3(anonuid=99) alpha(anonuid=50)";
        let reversed = "/e alpha(anonuid=50) 10.1.2.3(anonuid=99) 10.1.0.0/16(anonuid=16) 10.0.0.0/8(anonuid=8) *(ro,anonuid=1)";
        for text in [text, reversed] {
            let (exports, _) = ok(text);
            let export = &exports.entries[0];
            let uid = |client: &str| export.options_for(ip(client)).map(|o| o.anonuid);
            assert_eq!(uid("10.1.2.3"), Some(99), "address beats networks");
            assert_eq!(uid("10.1.1.1"), Some(50), "host name beats networks");
            assert_eq!(uid("10.1.9.9"), Some(16), "longer prefix beats shorter");
            assert_eq!(uid("10.9.9.9"), Some(8));
            assert_eq!(uid("192.0.2.1"), Some(1), "anyone else gets *");
            assert_eq!(uid("fd00::1"), Some(1), "IPv6 clients match * too");
        }
        // Equally specific: the first wins.
        let (exports, _) = ok("/e 10.0.0.1(anonuid=1) alpha(anonuid=2) 10.1.1.1(anonuid=3)");
        assert_eq!(exports.entries[0].options_for(ip("10.1.1.1")).unwrap().anonuid, 2);
    }

    #[test]
    fn clients_not_listed_are_refused() {
        let (exports, _) = ok("/e 10.0.0.0/8 fd00::/16");
        let export = &exports.entries[0];
        assert!(export.options_for(ip("11.0.0.1")).is_none());
        assert!(export.options_for(ip("fd01::1")).is_none());
        assert!(export.options_for(ip("fd00:1::1")).is_some());
        // An IPv4 network never matches an IPv6 client that is not IPv4-mapped.
        let (exports, _) = ok("/e 0.0.0.0/0");
        assert!(exports.entries[0].options_for(ip("::1")).is_none());
        assert!(exports.entries[0].options_for(ip("::ffff:1.2.3.4")).is_some());
        // ... and the IPv6 default route covers no IPv4 client.
        let (exports, _) = ok("/e ::/0");
        assert!(exports.entries[0].options_for(ip("1.2.3.4")).is_none());
        assert!(exports.entries[0].options_for(ip("::1")).is_some());
    }

    #[test]
    fn ipv4_mapped_clients_match_ipv4_rules() {
        let (exports, _) = ok("/e 127.0.0.0/8(rw) 10.0.0.5(anonuid=5)");
        let export = &exports.entries[0];
        assert!(!export.options_for(ip("::ffff:127.0.0.1")).unwrap().read_only);
        assert_eq!(export.options_for(ip("::ffff:10.0.0.5")).unwrap().anonuid, 5);
        assert!(export.options_for(ip("::ffff:10.0.0.6")).is_none());
        assert!(export.clients[0].matcher.matches(ip("::ffff:127.255.0.1")));
    }

    #[test]
    fn squash_mappings() {
        let root_squash = ExportOptions { anonuid: 900, anongid: 901, ..ExportOptions::default() };
        let creds = |uid, gid, groups: &[u32]| Credentials { uid, gid, groups: groups.to_vec() };
        assert_eq!(root_squash.squash(0, 0, &[0, 5, 0]), creds(900, 901, &[901, 5, 901]));
        assert_eq!(root_squash.squash(1000, 100, &[5, 6]), creds(1000, 100, &[5, 6]));
        // uid and gid are squashed independently.
        assert_eq!(root_squash.squash(1000, 0, &[]), creds(1000, 901, &[]));
        assert_eq!(root_squash.squash(0, 100, &[]), creds(900, 100, &[]));

        let no_squash = ExportOptions { root_squash: false, ..root_squash };
        assert_eq!(no_squash.squash(0, 0, &[0, 3]), creds(0, 0, &[0, 3]));

        let all = ExportOptions { all_squash: true, ..root_squash };
        assert_eq!(all.squash(1000, 100, &[5, 6]), creds(900, 901, &[]));
        assert_eq!(all.squash(0, 0, &[0]), creds(900, 901, &[]));
        // all_squash wins even with no_root_squash.
        let all_no_root = ExportOptions { all_squash: true, root_squash: false, ..root_squash };
        assert_eq!(all_no_root.squash(0, 0, &[]), creds(900, 901, &[]));
    }

    #[test]
    fn port_check_follows_secure() {
        let secure = ExportOptions::default();
        assert!(secure.port_allowed(0) && secure.port_allowed(1023));
        assert!(!secure.port_allowed(1024) && !secure.port_allowed(65535));
        let insecure = ExportOptions { secure: false, ..secure };
        assert!(insecure.port_allowed(1023) && insecure.port_allowed(65535));
    }

    #[test]
    fn find_and_find_covering() {
        let (exports, _) = ok("/srv *\n/srv/data *\n/home/a\\040b *\n/ 10.0.0.1\n");
        assert_eq!(exports.find(Path::new("/srv/data/")).unwrap().line, 2);
        assert_eq!(exports.find(Path::new("//srv/./data")).unwrap().line, 2);
        assert_eq!(exports.find(Path::new("/home/a b")).unwrap().line, 3);
        assert!(exports.find(Path::new("/srv/dat")).is_none());
        assert!(exports.find(Path::new("srv")).is_none());
        assert!(exports.find(Path::new("/srv/data/../data")).is_none());

        let (export, rest) = exports.find_covering(Path::new("/srv/data/x/y")).unwrap();
        assert_eq!((export.line, rest), (2, PathBuf::from("x/y")));
        let (export, rest) = exports.find_covering(Path::new("/srv/database")).unwrap();
        assert_eq!((export.line, rest), (1, PathBuf::from("database")), "whole components only");
        let (export, rest) = exports.find_covering(Path::new("/srv")).unwrap();
        assert_eq!((export.line, rest), (1, PathBuf::new()));
        let (export, _) = exports.find_covering(Path::new("/etc")).unwrap();
        assert_eq!(export.line, 4, "/ covers everything else");
        assert!(exports.find_covering(Path::new("/srv/../etc")).is_none());
    }

    #[test]
    fn syntax_output_round_trips_a_tricky_table() {
        let text = "\"/srv/a b\" -rw alpha 10.0.0.0/8(ro,fsid=3) *.example.com\n/srv/x\\043\\050y\\051\\134 fd00::/8(async,insecure) ::1(all_squash,anonuid=1,anongid=2)\n/ (no_root_squash)\n/srv/\\377 localhost\n";
        let (exports, _) = ok(text);
        let written = exports.to_exports_syntax();
        let (again, _) = ok(&written);
        assert_eq!(again, exports, "{written}");
        assert!(
            written.starts_with(
                "/srv/a\\040b alpha(rw,sync,secure,root_squash,no_all_squash,anonuid=65534,anongid=65534) "
            ),
            "{written}"
        );
        assert!(written.contains("/srv/x\\043\\050y\\051\\134 "), "{written}");
        assert!(written.contains("/srv/\\377 localhost("), "{written}");
    }

    #[test]
    fn messages_display_with_line_prefix() {
        let warning = Warning { line: 4, text: "careful".into() };
        assert_eq!(warning.to_string(), "line 4: careful");
        let error = ExportsError { line: 3, message: "bad".into() };
        assert_eq!(error.to_string(), "line 3: bad");
    }

    // -------------------------------------------------------------------
    // Properties

    fn arb_options() -> impl Strategy<Value = ExportOptions> {
        (
            any::<[bool; 5]>(),
            any::<u32>(),
            any::<u32>(),
            proptest::option::of(any::<u32>()),
            any::<[bool; 3]>(),
        )
            .prop_map(|(flags, anonuid, anongid, fsid, x)| ExportOptions {
                read_only: flags[0],
                sync: flags[1],
                secure: flags[2],
                root_squash: flags[3],
                all_squash: flags[4],
                anonuid,
                anongid,
                fsid,
                // An empty list cannot be written: it stands for the default.
                xprtsec: if x == [false; 3] {
                    Xprtsec::default()
                } else {
                    Xprtsec { none: x[0], tls: x[1], mtls: x[2] }
                },
            })
    }

    fn arb_matcher() -> impl Strategy<Value = ClientMatch> {
        prop_oneof![
            Just(ClientMatch::Any),
            any::<Ipv4Addr>().prop_map(|a| ClientMatch::Addr(IpAddr::V4(a))),
            // Canonical form: IPv4-mapped addresses are stored as IPv4.
            any::<Ipv6Addr>().prop_map(|a| ClientMatch::Addr(canonical_ip(IpAddr::V6(a)))),
            (any::<Ipv4Addr>(), 0u8..=32)
                .prop_map(|(a, len)| ClientMatch::Net { addr: mask(IpAddr::V4(a), len), prefix_len: len }),
            (any::<Ipv6Addr>(), 0u8..=128)
                .prop_filter("mapped networks are stored as IPv4", |(a, len)| {
                    !(*len >= 96 && a.to_ipv4_mapped().is_some())
                })
                .prop_map(|(a, len)| ClientMatch::Net { addr: mask(IpAddr::V6(a), len), prefix_len: len }),
            prop::sample::select(vec!["alpha", "beta.example.org", "mapped", "localhost"]).prop_map(|name| {
                let addrs = match parse_client(name, 1, &mut fake_resolve, &mut Vec::new()) {
                    Ok(ClientMatch::Host { addrs, .. }) => addrs,
                    other => panic!("{other:?}"),
                };
                ClientMatch::Host { name: name.to_string(), addrs }
            }),
            "[a-z*?]{0,6}\\*[a-z.]{0,8}"
                .prop_filter("a lone * means everyone", |w| w != "*")
                .prop_map(ClientMatch::Wildcard),
        ]
    }

    fn arb_path() -> impl Strategy<Value = PathBuf> {
        let component =
            prop::collection::vec(any::<u8>().prop_filter("no / or NUL", |b| *b != b'/' && *b != 0), 1..8)
                .prop_filter("not . or ..", |c| c != b"." && c != b"..");
        prop::collection::vec(component, 0..4).prop_map(|components| {
            let mut bytes = Vec::new();
            for component in components {
                bytes.push(b'/');
                bytes.extend(component);
            }
            if bytes.is_empty() {
                bytes.push(b'/');
            }
            PathBuf::from(OsString::from_vec(bytes))
        })
    }

    fn arb_exports() -> impl Strategy<Value = Exports> {
        let export = (arb_path(), prop::collection::vec((arb_matcher(), arb_options()), 1..5));
        prop::collection::vec(export, 0..5).prop_map(|raw| {
            let mut entries: Vec<Export> = Vec::new();
            for (path, rules) in raw {
                if entries.iter().any(|e| e.path == path) {
                    continue;
                }
                let mut clients: Vec<ClientRule> = Vec::new();
                for (matcher, options) in rules {
                    if !clients.iter().any(|c| c.matcher == matcher) {
                        clients.push(ClientRule { matcher, options });
                    }
                }
                // One export per output line.
                entries.push(Export {
                    path,
                    source: ExportSource::Directory,
                    clients,
                    line: entries.len() + 1,
                });
            }
            Exports { entries }
        })
    }

    /// Text built from the file's own vocabulary, so the generator reaches
    /// deep into the parser rather than failing on the first byte.
    fn syntax_soup() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "/",
            "/srv",
            "a",
            " ",
            "\t",
            "\n",
            "\\\n",
            "\\",
            "\\040",
            "\\0",
            "\"",
            "#",
            "(",
            ")",
            ",",
            "=",
            "-",
            "*",
            "rw",
            "ro",
            "sync",
            "anonuid",
            "fsid",
            "sec=sys",
            "sec=krb5",
            "10.0.0.1",
            "10.0.0.0/8",
            "/33",
            "/255.255.0.0",
            "::ffff:1.2.3.4",
            "fd00::/8",
            "alpha",
            "nosuch",
            "localhost",
            ".",
            "..",
            "@g",
            "é",
            "\r",
            "no_root_squash",
            "mp",
        ]);
        // Most lines start like an entry so that the client and option code
        // is reached; the pieces may still break the path or the line.
        let start = prop::sample::select(vec!["/srv ", "/a/b ", "\"/x y\" ", "/s\\040z ", "/ ", ""]);
        let line = (start, prop::collection::vec(pieces, 0..12))
            .prop_map(|(start, pieces)| format!("{start}{}", pieces.concat()));
        prop::collection::vec(line, 0..6).prop_map(|lines| lines.join("\n"))
    }

    proptest! {
        // Failures print their minimal input; no regression file is written
        // because this module owns only exports.rs.
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn random_text_never_panics(text in any::<String>()) {
            let _ = parse_with_resolver(&text, fake_resolve);
        }

        #[test]
        fn syntax_soup_never_panics_and_errors_name_a_real_line(text in syntax_soup()) {
            let lines = text.split('\n').count();
            match parse_with_resolver(&text, fake_resolve) {
                Ok((exports, warnings)) => {
                    for export in &exports.entries {
                        prop_assert!(export.line >= 1 && export.line <= lines);
                        prop_assert!(!export.clients.is_empty());
                        prop_assert!(export.path.is_absolute());
                    }
                    for warning in warnings {
                        prop_assert!(warning.line >= 1 && warning.line <= lines);
                    }
                    // Whatever was accepted is written back to the same table.
                    let written = exports.to_exports_syntax();
                    let (again, _) = parse_with_resolver(&written, fake_resolve).map_err(|e| {
                        TestCaseError::fail(format!("{e} in {written:?}"))
                    })?;
                    let strip = |e: &Exports| e.entries.iter().map(|x| (x.path.clone(), x.clients.clone())).collect::<Vec<_>>();
                    prop_assert_eq!(strip(&again), strip(&exports));
                }
                Err(error) => prop_assert!(error.line >= 1 && error.line <= lines, "{}", error),
            }
        }

        #[test]
        fn to_exports_syntax_round_trips(exports in arb_exports()) {
            let written = exports.to_exports_syntax();
            let (again, warnings) = parse_with_resolver(&written, fake_resolve)
                .map_err(|e| TestCaseError::fail(format!("{e} in {written:?}")))?;
            prop_assert_eq!(&again, &exports, "{}", written);
            // The only warnings come from wildcards, which are said to never match.
            let wildcards = exports.entries.iter().flat_map(|e| &e.clients)
                .filter(|c| matches!(c.matcher, ClientMatch::Wildcard(_))).count();
            prop_assert_eq!(warnings.len(), wildcards);
        }

        #[test]
        fn options_for_agrees_with_a_brute_force_ranking(
            rules in prop::collection::vec((arb_matcher(), arb_options()), 1..6),
            client in prop_oneof![
                any::<Ipv4Addr>().prop_map(IpAddr::V4),
                any::<Ipv6Addr>().prop_map(IpAddr::V6),
                (0u8..4, any::<u8>()).prop_map(|(a, b)| ip(&format!("10.{a}.{b}.1"))),
            ],
        ) {
            let export = Export {
                path: PathBuf::from("/e"),
                source: ExportSource::Directory,
                clients: rules.into_iter().map(|(matcher, options)| ClientRule { matcher, options }).collect(),
                line: 1,
            };
            let got = export.options_for(client);
            // Brute force: among rules that match, the best by
            // (exact > longest network > any), first on ties.
            let canon = canonical_ip(client);
            let rank = |m: &ClientMatch| -> Option<i32> {
                match m {
                    ClientMatch::Any => Some(-1),
                    ClientMatch::Addr(a) => (*a == canon).then_some(1000),
                    ClientMatch::Host { addrs, .. } => addrs.contains(&canon).then_some(1000),
                    ClientMatch::Net { addr, prefix_len } => {
                        let inside = match (addr, canon) {
                            (IpAddr::V4(n), IpAddr::V4(c)) => *prefix_len == 0 || (u32::from(*n) ^ u32::from(c)) >> (32 - u32::from(*prefix_len)) == 0,
                            (IpAddr::V6(n), IpAddr::V6(c)) => *prefix_len == 0 || (u128::from(*n) ^ u128::from(c)) >> (128 - u32::from(*prefix_len)) == 0,
                            _ => false,
                        };
                        inside.then_some(i32::from(*prefix_len))
                    }
                    ClientMatch::Wildcard(_) => None,
                }
            };
            let mut expected: Option<(i32, &ExportOptions)> = None;
            for rule in &export.clients {
                let Some(r) = rank(&rule.matcher) else { continue };
                match expected {
                    Some((best, _)) if best >= r => {}
                    _ => expected = Some((r, &rule.options)),
                }
            }
            prop_assert_eq!(got, expected.map(|(_, o)| o));
        }
    }
}
