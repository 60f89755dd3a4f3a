//! Mount options: one typed, bounds-checked [`MountOptions`] parsed from
//! either a URL query (`?nfsport=2049&uid=1000`, as libnfs writes them) or a
//! `-o a,b=c` string (as mount(8) and the FUSE mount take them).
//!
//! Option names and defaults follow nfs(5) where nfs(5) has the option
//! (`timeo`, `retrans`, `hard`/`soft`, `nconnect`, `rsize`, `wsize`,
//! `resvport`, `ac`/`noac`, `acregmin`…`actimeo`, `cto`/`nocto`,
//! `lookupcache`, `ro`/`rw`, `vers`/`nfsvers`/`minorversion`), libnfs where it has it (`nfsport`,
//! `mountport`, `version`, `uid`, `gid`), and are ours otherwise
//! (`cache=DIR`, `cachesize`, `dirtymax`, `eager`, `deleg`/`nodeleg`, `deleg_max`,
//! `deleg_close`, `deleg_chmod`, `readahead_files`, `dirops`,
//! `pmapport`, `srcaddr`).
//!
//! # Layout
//! - [`MountOptions`]: the typed result, with nfs(5) defaults.
//! - [`MountOptions::parse`] / [`MountOptions::apply_list`] /
//!   [`MountOptions::apply_option`]: the parser; unknown names are an
//!   [`OptionError::Unknown`] so a caller (the FUSE mount) can claim its
//!   own options before failing.
//! - `Display` writes only the options that differ from the defaults, in a
//!   form [`MountOptions::parse`] reads back.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The largest rsize/wsize we ask for: Linux's limit, and what eagernfs
/// and ganesha offer by default.
pub const TRANSFER_SIZE_MAX: u32 = 1024 * 1024;
/// The smallest rsize/wsize accepted; smaller values only make every
/// transfer slower and are almost certainly a typo.
pub const TRANSFER_SIZE_MIN: u32 = 4096;
/// Linux caps `nconnect` at 16; more connections to one server do not help.
pub const NCONNECT_MAX: u32 = 16;
/// nfs(5)'s default `timeo` over TCP (60 s) and over UDP (1.1 s).
pub const TIMEO_TCP_DEFAULT: Duration = Duration::from_secs(60);
pub const TIMEO_UDP_DEFAULT: Duration = Duration::from_millis(1100);
/// Largest rsize/wsize over UDP: a reply must fit one datagram (Linux's
/// limit too).
pub const UDP_TRANSFER_SIZE_MAX: u32 = 32 * 1024;
/// Delegations a client holds at most unless `deleg_max=` says otherwise:
/// enough for a source tree (/usr/include has about 8,000 files), a few
/// hundred bytes each on either side.
pub const DELEGATIONS_MAX_DEFAULT: u32 = 16384;
/// Small files read ahead per round trip at most (`readahead_files=`),
/// and the default: what one COMPOUND of 64 operations holds, six each.
pub const READAHEAD_FILES_MAX: u32 = 10;
/// The largest `deleg_max=` accepted.
pub const DELEGATIONS_MAX_LIMIT: u32 = 1 << 20;
/// nfs(5): "the maximum timeout is 600 seconds" for retransmissions.
pub const TIMEO_MAX: Duration = Duration::from_secs(600);
/// Attribute cache timeouts above this are refused: nfs(5) has no limit,
/// but a day is already far beyond any sensible value and a bound keeps
/// `Instant` arithmetic from overflowing.
pub const AC_TIMEOUT_MAX: Duration = Duration::from_secs(24 * 3600);

/// Which lookup results the client may cache (nfs(5) `lookupcache=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum LookupCache {
    /// Cache both positive and negative (ENOENT) lookups.
    #[default]
    All,
    /// Cache only lookups that found something.
    Positive,
    /// Revalidate every lookup with the server.
    None,
}

impl LookupCache {
    fn as_str(self) -> &'static str {
        match self {
            LookupCache::All => "all",
            LookupCache::Positive => "pos",
            LookupCache::None => "none",
        }
    }
}

/// Which locks stay on this client (nfs(5) `local_lock=`; `nolock` is `all`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum LocalLock {
    /// Both `fcntl` and `flock` locks go to the server's lock manager (NLM).
    #[default]
    None,
    /// Both stay local: they exclude only processes on this client.
    All,
    /// `flock` locks stay local; `fcntl` locks go to the server.
    Flock,
    /// `fcntl` locks stay local; `flock` locks go to the server.
    Posix,
}

impl LocalLock {
    fn as_str(self) -> &'static str {
        match self {
            LocalLock::None => "none",
            LocalLock::All => "all",
            LocalLock::Flock => "flock",
            LocalLock::Posix => "posix",
        }
    }

    /// `fcntl` (POSIX) locks go to the server.
    pub fn posix_remote(self) -> bool {
        matches!(self, LocalLock::None | LocalLock::Flock)
    }

    /// `flock` locks go to the server.
    pub fn flock_remote(self) -> bool {
        matches!(self, LocalLock::None | LocalLock::Posix)
    }
}

/// Transport security (nfs(5) `xprtsec=`, RFC 9289 RPC-with-TLS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Xprtsec {
    /// Plain TCP (or UDP).
    #[default]
    None,
    /// TLS 1.3; the server proves itself with a certificate.
    Tls,
    /// TLS 1.3 with this client's certificate too (`tls_cert=`, `tls_key=`).
    Mtls,
}

impl Xprtsec {
    fn as_str(self) -> &'static str {
        match self {
            Xprtsec::None => "none",
            Xprtsec::Tls => "tls",
            Xprtsec::Mtls => "mtls",
        }
    }
}

/// Which NFS version to speak (nfs(5) `vers=`, `nfsvers=`; libnfs's `version=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NfsVersion {
    /// `vers=3`: NFSv3 (MOUNT, NLM).
    V3,
    /// `vers=4`: the highest NFSv4 minor version both sides speak (4.2,
    /// else 4.1; NFSv4.0 is not spoken).
    V4,
    /// `vers=4.1` (or `vers=4,minorversion=1`).
    V41,
    /// `vers=4.2` (or `vers=4,minorversion=2`).
    V42,
}

impl NfsVersion {
    /// The option value that names it (`4.1`).
    pub fn as_str(self) -> &'static str {
        match self {
            NfsVersion::V3 => "3",
            NfsVersion::V4 => "4",
            NfsVersion::V41 => "4.1",
            NfsVersion::V42 => "4.2",
        }
    }
}

/// Typed NFS mount options. `Default` gives the nfs(5) defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountOptions {
    // --- where the server is -------------------------------------------
    /// TCP port of the NFS service (`nfsport=`, or the URL's `:port`).
    /// `None`: ask the portmapper, falling back to 2049.
    pub nfsport: Option<u16>,
    /// TCP port of the MOUNT service (`mountport=`). `None`: try MOUNT on
    /// the NFS port (eagernfs serves it there), then ask the portmapper.
    pub mountport: Option<u16>,
    /// Port of the portmapper (`pmapport=`, ours; default 111). Setting it
    /// to the NFS port asks an eagernfs server, which answers GETPORT on
    /// its own port, without rpcbind running.
    pub pmapport: u16,

    // --- who we are ----------------------------------------------------
    /// libnfs `uid=`: the uid tools send when they have no better idea.
    /// `None`: the calling process's uid.
    pub uid: Option<u32>,
    /// libnfs `gid=`: as `uid`.
    pub gid: Option<u32>,
    /// `resvport`/`noresvport`: bind a source port below 1024 so servers
    /// with the default `secure` export option accept us. `None`: on when
    /// running as root (as Linux does), off otherwise.
    pub resvport: Option<bool>,
    /// `srcaddr=IP` (ours): the local address to connect from. Benchmarks
    /// play many client hosts as distinct 127.x.y.z addresses; exports
    /// grant access by client address.
    pub srcaddr: Option<IpAddr>,

    // --- protocol --------------------------------------------------------
    /// `vers=3|4|4.1|4.2` (also `nfsvers=`, `version=`, `minorversion=`).
    /// `None`: try 4.2, then 4.1, then 3, as Linux's mount does.
    pub vers: Option<NfsVersion>,

    // --- transport -----------------------------------------------------
    /// `timeo=` (tenths of a second): the first retransmission timeout;
    /// each retry waits `timeo` longer than the last over TCP, twice as
    /// long over UDP, capped at [`TIMEO_MAX`]. Default 60 s over TCP,
    /// 1.1 s over UDP (nfs(5)).
    pub timeo: Duration,
    /// `timeo=` was given (so `proto=udp` does not replace it with UDP's
    /// default).
    pub timeo_given: bool,
    /// `proto=udp` (or `udp`): one datagram per call, for servers that
    /// offer it; `proto=tcp` (or `tcp`, the default). Transfers over UDP
    /// are at most [`UDP_TRANSFER_SIZE_MAX`].
    pub udp: bool,
    /// `retrans=`: retransmissions before a "major timeout" (soft: fail
    /// with ETIMEDOUT/EIO; hard: log "server not responding"). Default 2.
    pub retrans: u32,
    /// `hard` (default) retries for ever; `soft` fails after `retrans`.
    pub hard: bool,
    /// `nconnect=`: TCP connections to the server (1..=16), calls spread
    /// round-robin.
    pub nconnect: u32,
    /// `rsize=`: largest READ to send; `None` lets the server's FSINFO
    /// rtmax decide (capped at [`TRANSFER_SIZE_MAX`]).
    pub rsize: Option<u32>,
    /// `wsize=`: as `rsize`, for WRITE and wtmax.
    pub wsize: Option<u32>,
    /// `ro`: refuse every modifying operation locally.
    pub ro: bool,

    // --- cache (consumed by the cache layer) ---------------------------
    /// `ac` (default) / `noac`: whether attributes are cached at all.
    /// `noac` also makes the cache layer write synchronously, as on Linux.
    pub ac: bool,
    /// `sync` / `async` (default): with `sync` every write() returns once
    /// the server holds its data stably (WRITE FILE_SYNC), as nfs(5)'s
    /// `sync` and as an `O_SYNC` open does for one file.
    pub sync: bool,
    /// `acregmin=` seconds: least time a regular file's attributes are
    /// trusted. Default 3 s.
    pub acregmin: Duration,
    /// `acregmax=` seconds. Default 60 s.
    pub acregmax: Duration,
    /// `acdirmin=` seconds: as `acregmin` for directories. Default 30 s.
    pub acdirmin: Duration,
    /// `acdirmax=` seconds. Default 60 s.
    pub acdirmax: Duration,
    /// `cto` (default) / `nocto`: close-to-open consistency (GETATTR on
    /// open, flush and COMMIT before close returns).
    pub cto: bool,
    /// `lookupcache=all|pos|none`.
    pub lookupcache: LookupCache,
    /// `cache=DIR` (ours): persistent local-disk cache directory.
    pub cache_dir: Option<PathBuf>,
    /// `cachesize=SIZE` (ours; K/M/G suffixes): bound on the disk cache.
    /// `None`: the cache layer's default.
    pub cache_size_bytes_max: Option<u64>,
    /// `dirtymax=SIZE` (ours): bound on dirty (unwritten) data per mount.
    /// `None`: the cache layer's default.
    pub dirty_bytes_max: Option<u64>,
    /// `eager` (ours): eager write-back (one in-order flusher per file that
    /// starts at once) instead of write-behind on close/fsync/pressure.
    pub eager: bool,
    /// `deleg` (default) / `nodeleg` / `deleg=on|off` (ours): over NFSv4,
    /// ask for delegations and use them as the cache (a file this client
    /// holds a delegation of is opened, stat'ed and read with no round
    /// trip until the server recalls it). No effect over NFSv3.
    pub delegations: bool,
    /// `deleg_max=N` (ours): delegations held at most; past it the least
    /// recently used are returned. Default [`DELEGATIONS_MAX_DEFAULT`].
    pub delegations_max: u32,
    /// `deleg_close=sync|writeback` (ours): what a close of a file this
    /// client holds a write delegation of waits for. `sync` (the default):
    /// the data is on the server's stable storage when close returns, as
    /// without a delegation. `writeback`: close starts the write-back and
    /// returns, as Linux's client does under a write delegation; the data
    /// is durable at fsync, sync or unmount, and is on the server before
    /// anyone else can open the file (the recall waits for it).
    pub deleg_close_writeback: bool,
    /// `deleg_chmod=sync|hold` (ours): what a chmod of a file this client
    /// made, has open for writing and holds a write delegation of waits
    /// for. `sync` (the default): the server's answer, as a kernel NFS
    /// client does. `hold`: the new mode goes with the file's data at its
    /// write-back (after the data, in one COMPOUND), as its times already
    /// do; no other client can open the file before that (the recall of
    /// the delegation writes back first), but one that only `stat`s it
    /// may see the old mode until then. tar creates every file 0600 and
    /// `fchmod`s it at the end: with `deleg_close=writeback` its close then
    /// waits for nothing. Owner and set-id changes are never held.
    pub deleg_chmod_hold: bool,
    /// `dirops=sync|async` (ours; Linux's CephFS client calls its like
    /// `nowsync`): what an unlink or rmdir in a directory this client holds
    /// a delegation of waits for. `sync` (the default): the server's
    /// answer, as a kernel NFS client does. `async`: the REMOVE is sent
    /// and the call returns; another client that changes the directory
    /// waits for it (the recall of the delegation does), one that only
    /// reads it may still see the name until it lands (milliseconds); a
    /// failure is logged and reported by the next `fsync` of a directory
    /// or `sync` of the mount. `async` also answers a create of a regular
    /// file in a directory the mount made and holds a delegation of before
    /// the server has made it (the file's writes, owner's chmod and utimes
    /// and close kept and done once it is made; see `cache::early`).
    pub dirops_async: bool,
    /// `readahead_files=N` (ours): over NFSv4 with delegations, a program
    /// opening a directory's small files in listing order has up to N of
    /// the next ones read ahead per round trip, each whole and under a
    /// read delegation, so their opens ask nothing. 0 turns it off.
    /// Default and largest: [`READAHEAD_FILES_MAX`].
    pub readahead_files: u32,

    // --- locks (consumed by the FUSE layer) -----------------------------
    /// `local_lock=none|all|flock|posix`; `lock` is `none`, `nolock` is `all`.
    pub local_lock: LocalLock,

    // --- transport security ---------------------------------------------
    /// `xprtsec=none|tls|mtls`.
    pub xprtsec: Xprtsec,
    /// `tls_ca=FILE` (ours): PEM CA certificates the server's certificate must chain to
    /// (default: the system's store).
    pub tls_ca: Option<PathBuf>,
    /// `tls_cert=FILE`, `tls_key=FILE` (ours): this client's certificate chain and key, PEM,
    /// for `xprtsec=mtls`.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// `tls_name=NAME` (ours): the name the server's certificate must be valid for
    /// (default: the host in the URL, else the server's address).
    pub tls_name: Option<String>,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            nfsport: None,
            mountport: None,
            pmapport: 111,
            uid: None,
            gid: None,
            resvport: None,
            srcaddr: None,
            vers: None,
            timeo: TIMEO_TCP_DEFAULT,
            timeo_given: false,
            udp: false,
            retrans: 2,
            hard: true,
            nconnect: 1,
            rsize: None,
            wsize: None,
            ro: false,
            ac: true,
            sync: false,
            acregmin: Duration::from_secs(3),
            acregmax: Duration::from_secs(60),
            acdirmin: Duration::from_secs(30),
            acdirmax: Duration::from_secs(60),
            cto: true,
            lookupcache: LookupCache::All,
            cache_dir: None,
            cache_size_bytes_max: None,
            dirty_bytes_max: None,
            eager: false,
            delegations: true,
            delegations_max: DELEGATIONS_MAX_DEFAULT,
            readahead_files: READAHEAD_FILES_MAX,
            deleg_close_writeback: false,
            deleg_chmod_hold: false,
            dirops_async: false,
            local_lock: LocalLock::None,
            xprtsec: Xprtsec::None,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            tls_name: None,
        }
    }
}

/// A mount option that could not be used. The message names the option.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    /// No such option. The FUSE mount checks for this variant to pick out
    /// options that are its own (`allow_other`, …).
    #[error("unknown mount option '{0}'")]
    Unknown(String),
    /// The option needs a value (`timeo=600`) and has none.
    #[error("mount option '{0}' needs a value ({0}=…)")]
    MissingValue(String),
    /// The option is a flag and was given a value.
    #[error("mount option '{0}' takes no value")]
    UnexpectedValue(String),
    /// The value does not parse or is out of range.
    #[error("bad value '{value}' for mount option '{name}': {why}")]
    BadValue { name: String, value: String, why: String },
}

impl MountOptions {
    /// Parse a comma-separated option list (`hard,timeo=100,nconnect=4`)
    /// over the defaults. Empty items are ignored, so `""` is the default.
    pub fn parse(s: &str) -> Result<Self, OptionError> {
        let mut o = MountOptions::default();
        o.apply_list(s, ',')?;
        Ok(o)
    }

    /// Apply every `name[=value]` item of `s`, split at `sep` (`,` for
    /// `-o`, `&` for a URL query), in order: later items win, as in mount(8).
    pub fn apply_list(&mut self, s: &str, sep: char) -> Result<(), OptionError> {
        for item in s.split(sep) {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let (name, value) = match item.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (item, None),
            };
            self.apply_option(name, value)?;
        }
        Ok(())
    }

    /// Apply one option. Unknown names give [`OptionError::Unknown`] and
    /// leave `self` unchanged.
    pub fn apply_option(&mut self, name: &str, value: Option<&str>) -> Result<(), OptionError> {
        let flag = |v: Option<&str>| match v {
            None => Ok(()),
            Some(_) => Err(OptionError::UnexpectedValue(name.to_string())),
        };
        match name {
            "nfsport" | "port" => self.nfsport = Some(num(name, value, 1, u16::MAX as u64)? as u16),
            "mountport" => self.mountport = Some(num(name, value, 1, u16::MAX as u64)? as u16),
            "pmapport" => self.pmapport = num(name, value, 1, u16::MAX as u64)? as u16,
            "version" | "vers" | "nfsvers" => {
                let v = need(name, value)?;
                self.vers = Some(match v {
                    "3" => NfsVersion::V3,
                    "4" => NfsVersion::V4,
                    "4.1" => NfsVersion::V41,
                    "4.2" => NfsVersion::V42,
                    "4.0" => return Err(bad(name, v, "NFS version 4.0 is not supported; use 4.1, 4.2 or 3")),
                    _ => return Err(bad(name, v, "expected NFS version 3, 4, 4.1 or 4.2")),
                });
            }
            "minorversion" => {
                let v = need(name, value)?;
                self.vers = Some(match v {
                    "1" => NfsVersion::V41,
                    "2" => NfsVersion::V42,
                    _ => return Err(bad(name, v, "expected 1 or 2 (NFS version 4.0 is not supported)")),
                });
            }
            "uid" => self.uid = Some(num(name, value, 0, u32::MAX as u64)? as u32),
            "gid" => self.gid = Some(num(name, value, 0, u32::MAX as u64)? as u32),
            "resvport" => {
                flag(value)?;
                self.resvport = Some(true)
            }
            "noresvport" => {
                flag(value)?;
                self.resvport = Some(false)
            }
            "srcaddr" => {
                let v = need(name, value)?;
                let v6 = v.strip_prefix('[').and_then(|x| x.strip_suffix(']')).unwrap_or(v);
                self.srcaddr = Some(v6.parse().map_err(|_| bad(name, v, "expected an IP address"))?);
            }
            "timeo" => {
                // Tenths of a second; nfs(5) caps the timeout at 600 s.
                let ds = num(name, value, 1, TIMEO_MAX.as_millis() as u64 / 100)?;
                self.timeo = Duration::from_millis(ds * 100);
                self.timeo_given = true;
            }
            "proto" | "mountproto" => {
                let v = need(name, value)?;
                let udp = match v {
                    "tcp" => false,
                    "udp" => true,
                    _ => return Err(bad(name, v, "expected tcp or udp")),
                };
                // mountproto= is accepted for fstab compatibility; MOUNT
                // goes over the same transport as NFS here.
                self.set_udp(udp);
            }
            "udp" => {
                flag(value)?;
                self.set_udp(true)
            }
            "tcp" => {
                flag(value)?;
                self.set_udp(false)
            }
            "retrans" => self.retrans = num(name, value, 0, 1000)? as u32,
            "hard" => {
                flag(value)?;
                self.hard = true
            }
            "soft" => {
                flag(value)?;
                self.hard = false
            }
            "nconnect" => self.nconnect = num(name, value, 1, NCONNECT_MAX as u64)? as u32,
            "rsize" => self.rsize = Some(transfer_size(name, value)?),
            "wsize" => self.wsize = Some(transfer_size(name, value)?),
            "ro" => {
                flag(value)?;
                self.ro = true
            }
            "rw" => {
                flag(value)?;
                self.ro = false
            }
            "ac" => {
                flag(value)?;
                self.ac = true
            }
            "noac" => {
                flag(value)?;
                self.ac = false
            }
            "sync" => {
                flag(value)?;
                self.sync = true
            }
            "async" => {
                flag(value)?;
                self.sync = false
            }
            "acregmin" => self.acregmin = ac_secs(name, value)?,
            "acregmax" => self.acregmax = ac_secs(name, value)?,
            "acdirmin" => self.acdirmin = ac_secs(name, value)?,
            "acdirmax" => self.acdirmax = ac_secs(name, value)?,
            "actimeo" => {
                let t = ac_secs(name, value)?;
                self.acregmin = t;
                self.acregmax = t;
                self.acdirmin = t;
                self.acdirmax = t;
            }
            "cto" => {
                flag(value)?;
                self.cto = true
            }
            "nocto" => {
                flag(value)?;
                self.cto = false
            }
            "lock" => {
                flag(value)?;
                self.local_lock = LocalLock::None
            }
            "nolock" => {
                flag(value)?;
                self.local_lock = LocalLock::All
            }
            "local_lock" => {
                let v = need(name, value)?;
                self.local_lock = match v {
                    "none" => LocalLock::None,
                    "all" => LocalLock::All,
                    "flock" => LocalLock::Flock,
                    "posix" => LocalLock::Posix,
                    _ => return Err(bad(name, v, "expected none, all, flock or posix")),
                };
            }
            "xprtsec" => {
                let v = need(name, value)?;
                self.xprtsec = match v {
                    "none" => Xprtsec::None,
                    "tls" => Xprtsec::Tls,
                    "mtls" => Xprtsec::Mtls,
                    _ => return Err(bad(name, v, "expected none, tls or mtls")),
                };
            }
            "tls_ca" | "tls_cert" | "tls_key" => {
                let v = need(name, value)?;
                if v.is_empty() {
                    return Err(bad(name, v, "expected a file"));
                }
                let slot = match name {
                    "tls_ca" => &mut self.tls_ca,
                    "tls_cert" => &mut self.tls_cert,
                    _ => &mut self.tls_key,
                };
                *slot = Some(PathBuf::from(v));
            }
            "tls_name" => {
                let v = need(name, value)?;
                if v.is_empty() {
                    return Err(bad(name, v, "expected a host name"));
                }
                self.tls_name = Some(v.to_string());
            }
            "lookupcache" => {
                let v = need(name, value)?;
                self.lookupcache = match v {
                    "all" => LookupCache::All,
                    "pos" | "positive" => LookupCache::Positive,
                    "none" => LookupCache::None,
                    _ => return Err(bad(name, v, "expected all, pos or none")),
                };
            }
            "cache" => {
                let v = need(name, value)?;
                if v.is_empty() {
                    return Err(bad(name, v, "expected a directory"));
                }
                self.cache_dir = Some(PathBuf::from(v));
            }
            "cachesize" => self.cache_size_bytes_max = Some(size(name, value)?),
            "dirtymax" => self.dirty_bytes_max = Some(size(name, value)?),
            "eager" => {
                flag(value)?;
                self.eager = true
            }
            "noeager" => {
                flag(value)?;
                self.eager = false
            }
            "deleg" => {
                self.delegations = match value {
                    None | Some("on") => true,
                    Some("off") => false,
                    Some(v) => return Err(bad(name, v, "expected on or off")),
                }
            }
            "nodeleg" => {
                flag(value)?;
                self.delegations = false
            }
            "deleg_max" => {
                let v = need(name, value)?;
                self.delegations_max = match v.parse::<u32>() {
                    Ok(n) if (1..=DELEGATIONS_MAX_LIMIT).contains(&n) => n,
                    _ => return Err(bad(name, v, "expected a count from 1 to 1048576")),
                }
            }
            "readahead_files" => {
                let v = need(name, value)?;
                self.readahead_files = match v.parse::<u32>() {
                    Ok(n) if n <= READAHEAD_FILES_MAX => n,
                    _ => return Err(bad(name, v, "expected a count from 0 to 10")),
                }
            }
            "dirops" => {
                self.dirops_async = match need(name, value)? {
                    "sync" => false,
                    "async" => true,
                    v => return Err(bad(name, v, "expected sync or async")),
                }
            }
            "deleg_chmod" => {
                self.deleg_chmod_hold = match need(name, value)? {
                    "sync" => false,
                    "hold" => true,
                    v => return Err(bad(name, v, "expected sync or hold")),
                }
            }
            "deleg_close" => {
                self.deleg_close_writeback = match need(name, value)? {
                    "sync" => false,
                    "writeback" => true,
                    v => return Err(bad(name, v, "expected sync or writeback")),
                }
            }
            _ => return Err(OptionError::Unknown(name.to_string())),
        }
        Ok(())
    }

    /// The largest rsize/wsize this transport allows.
    pub fn transfer_size_max(&self) -> u32 {
        if self.udp {
            UDP_TRANSFER_SIZE_MAX
        } else {
            TRANSFER_SIZE_MAX
        }
    }

    /// Choose the transport; the default `timeo` follows it unless given.
    fn set_udp(&mut self, udp: bool) {
        self.udp = udp;
        if !self.timeo_given {
            self.timeo = if udp { TIMEO_UDP_DEFAULT } else { TIMEO_TCP_DEFAULT };
        }
    }

    /// Whether to bind a privileged source port: the explicit option, or
    /// "yes when root" as Linux decides.
    pub fn resvport_effective(&self) -> bool {
        // SAFETY: geteuid cannot fail and touches no memory.
        self.resvport.unwrap_or_else(|| unsafe { libc::geteuid() } == 0)
    }

    /// The options that differ from the defaults as `name[=value]` items.
    /// Joined with `,` this is the `Display` form; joined with `&` a URL
    /// query.
    pub fn to_items(&self) -> Vec<String> {
        let d = MountOptions::default();
        let mut v = Vec::new();
        if let Some(p) = self.nfsport {
            v.push(format!("nfsport={p}"));
        }
        if let Some(p) = self.mountport {
            v.push(format!("mountport={p}"));
        }
        if self.pmapport != d.pmapport {
            v.push(format!("pmapport={}", self.pmapport));
        }
        if let Some(u) = self.uid {
            v.push(format!("uid={u}"));
        }
        if let Some(g) = self.gid {
            v.push(format!("gid={g}"));
        }
        match self.resvport {
            Some(true) => v.push("resvport".into()),
            Some(false) => v.push("noresvport".into()),
            None => {}
        }
        if let Some(a) = self.srcaddr {
            v.push(format!("srcaddr={a}"));
        }
        if let Some(vers) = self.vers {
            v.push(format!("vers={}", vers.as_str()));
        }
        if self.udp {
            v.push("proto=udp".into());
        }
        if self.timeo_given {
            v.push(format!("timeo={}", self.timeo.as_millis() / 100));
        }
        if self.retrans != d.retrans {
            v.push(format!("retrans={}", self.retrans));
        }
        if !self.hard {
            v.push("soft".into());
        }
        if self.nconnect != d.nconnect {
            v.push(format!("nconnect={}", self.nconnect));
        }
        if let Some(r) = self.rsize {
            v.push(format!("rsize={r}"));
        }
        if let Some(w) = self.wsize {
            v.push(format!("wsize={w}"));
        }
        if self.ro {
            v.push("ro".into());
        }
        if !self.ac {
            v.push("noac".into());
        }
        if self.sync {
            v.push("sync".into());
        }
        for (name, mine, def) in [
            ("acregmin", self.acregmin, d.acregmin),
            ("acregmax", self.acregmax, d.acregmax),
            ("acdirmin", self.acdirmin, d.acdirmin),
            ("acdirmax", self.acdirmax, d.acdirmax),
        ] {
            if mine != def {
                v.push(format!("{name}={}", mine.as_secs()));
            }
        }
        if !self.cto {
            v.push("nocto".into());
        }
        if self.xprtsec != d.xprtsec {
            v.push(format!("xprtsec={}", self.xprtsec.as_str()));
        }
        for (name, path) in
            [("tls_ca", &self.tls_ca), ("tls_cert", &self.tls_cert), ("tls_key", &self.tls_key)]
        {
            if let Some(p) = path {
                v.push(format!("{name}={}", p.display()));
            }
        }
        if let Some(n) = &self.tls_name {
            v.push(format!("tls_name={n}"));
        }
        if self.local_lock != d.local_lock {
            v.push(format!("local_lock={}", self.local_lock.as_str()));
        }
        if self.lookupcache != d.lookupcache {
            v.push(format!("lookupcache={}", self.lookupcache.as_str()));
        }
        if let Some(dir) = &self.cache_dir {
            v.push(format!("cache={}", dir.display()));
        }
        if let Some(s) = self.cache_size_bytes_max {
            v.push(format!("cachesize={s}"));
        }
        if let Some(s) = self.dirty_bytes_max {
            v.push(format!("dirtymax={s}"));
        }
        if self.eager {
            v.push("eager".into());
        }
        if !self.delegations {
            v.push("nodeleg".into());
        }
        if self.delegations_max != d.delegations_max {
            v.push(format!("deleg_max={}", self.delegations_max));
        }
        if self.deleg_close_writeback {
            v.push("deleg_close=writeback".into());
        }
        if self.deleg_chmod_hold {
            v.push("deleg_chmod=hold".into());
        }
        if self.dirops_async {
            v.push("dirops=async".into());
        }
        if self.readahead_files != d.readahead_files {
            v.push(format!("readahead_files={}", self.readahead_files));
        }
        v
    }
}

impl fmt::Display for MountOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_items().join(","))
    }
}

impl std::str::FromStr for MountOptions {
    type Err = OptionError;
    fn from_str(s: &str) -> Result<Self, OptionError> {
        MountOptions::parse(s)
    }
}

fn bad(name: &str, value: &str, why: &str) -> OptionError {
    OptionError::BadValue { name: name.to_string(), value: value.to_string(), why: why.to_string() }
}

fn need<'a>(name: &str, value: Option<&'a str>) -> Result<&'a str, OptionError> {
    value.ok_or_else(|| OptionError::MissingValue(name.to_string()))
}

fn num(name: &str, value: Option<&str>, min: u64, max: u64) -> Result<u64, OptionError> {
    let v = need(name, value)?;
    let n: u64 = v.parse().map_err(|_| bad(name, v, "expected a whole number"))?;
    if n < min || n > max {
        return Err(bad(name, v, &format!("must be between {min} and {max}")));
    }
    Ok(n)
}

fn transfer_size(name: &str, value: Option<&str>) -> Result<u32, OptionError> {
    Ok(num(name, value, TRANSFER_SIZE_MIN as u64, TRANSFER_SIZE_MAX as u64)? as u32)
}

fn ac_secs(name: &str, value: Option<&str>) -> Result<Duration, OptionError> {
    Ok(Duration::from_secs(num(name, value, 0, AC_TIMEOUT_MAX.as_secs())?))
}

/// A byte count with an optional K/M/G/T suffix, or KiB/MiB/GiB/TiB
/// (both powers of 1024).
fn size(name: &str, value: Option<&str>) -> Result<u64, OptionError> {
    let whole = need(name, value)?;
    let v = match whole.len().checked_sub(2) {
        Some(at) if whole.is_char_boundary(at) && whole[at..].eq_ignore_ascii_case("ib") => &whole[..at],
        _ => whole,
    };
    let (digits, shift) = match v.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&v[..v.len() - 1], 10),
        Some(b'M') => (&v[..v.len() - 1], 20),
        Some(b'G') => (&v[..v.len() - 1], 30),
        Some(b'T') => (&v[..v.len() - 1], 40),
        _ => (v, 0),
    };
    let n: u64 = digits.parse().map_err(|_| bad(name, whole, "expected a size like 512M, 512MiB or 4G"))?;
    n.checked_mul(1u64 << shift)
        .filter(|b| *b > 0)
        .ok_or_else(|| bad(name, whole, "size must be positive and below 16 EiB"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn versions_as_nfs5_names_them() {
        let v = |s: &str| MountOptions::parse(s).unwrap().vers;
        assert_eq!(v(""), None, "no vers: negotiate");
        assert_eq!(v("vers=3"), Some(NfsVersion::V3));
        assert_eq!(v("nfsvers=4"), Some(NfsVersion::V4));
        assert_eq!(v("vers=4.1"), Some(NfsVersion::V41));
        assert_eq!(v("version=4.2"), Some(NfsVersion::V42));
        assert_eq!(v("vers=4,minorversion=1"), Some(NfsVersion::V41));
        assert_eq!(MountOptions::parse("vers=4.2").unwrap().to_string(), "vers=4.2");
    }

    #[test]
    fn defaults_are_nfs5s() {
        let o = MountOptions::parse("").unwrap();
        assert_eq!(o.timeo, Duration::from_secs(60));
        assert_eq!(o.retrans, 2);
        assert!(o.hard && o.ac && o.cto);
        assert_eq!(o.acregmin, Duration::from_secs(3));
        assert_eq!(o.acdirmin, Duration::from_secs(30));
        assert_eq!(o.to_string(), "");
    }

    #[test]
    fn delegations_are_on_unless_turned_off_and_their_count_is_bounded() {
        let d = MountOptions::default();
        assert!(d.delegations);
        assert_eq!(d.delegations_max, DELEGATIONS_MAX_DEFAULT);
        for off in ["nodeleg", "deleg=off"] {
            let o = MountOptions::parse(off).unwrap();
            assert!(!o.delegations, "{off}");
            assert_eq!(o.to_string(), "nodeleg");
        }
        assert!(MountOptions::parse("nodeleg,deleg").unwrap().delegations);
        assert!(MountOptions::parse("deleg=on").unwrap().delegations);
        assert!(MountOptions::parse("deleg=maybe").is_err());
        // A close under a write delegation is durable unless asked otherwise.
        assert!(!d.deleg_close_writeback);
        let wb = MountOptions::parse("deleg_close=writeback").unwrap();
        assert!(wb.deleg_close_writeback);
        assert_eq!(wb.to_string(), "deleg_close=writeback");
        assert!(
            !MountOptions::parse("deleg_close=writeback,deleg_close=sync").unwrap().deleg_close_writeback
        );
        assert!(MountOptions::parse("deleg_close=later").is_err());
        assert!(!d.dirops_async);
        let a = MountOptions::parse("dirops=async").unwrap();
        assert!(a.dirops_async);
        assert_eq!(a.to_string(), "dirops=async");
        assert!(!MountOptions::parse("dirops=async,dirops=sync").unwrap().dirops_async);
        assert!(MountOptions::parse("dirops=later").is_err());
        assert!(!d.deleg_chmod_hold);
        let h = MountOptions::parse("deleg_chmod=hold").unwrap();
        assert!(h.deleg_chmod_hold);
        assert_eq!(h.to_string(), "deleg_chmod=hold");
        assert!(!MountOptions::parse("deleg_chmod=hold,deleg_chmod=sync").unwrap().deleg_chmod_hold);
        assert!(MountOptions::parse("deleg_chmod=later").is_err());
        assert!(MountOptions::parse("deleg_chmod").is_err());
        assert!(MountOptions::parse("deleg_close").is_err());
        let o = MountOptions::parse("deleg_max=100").unwrap();
        assert_eq!(o.delegations_max, 100);
        assert_eq!(MountOptions::parse(&o.to_string()).unwrap().delegations_max, 100);
        assert!(MountOptions::parse("deleg_max=0").is_err());
        assert!(MountOptions::parse("deleg_max=2000000").is_err());
    }

    #[test]
    fn parses_a_mount_string() {
        let o = MountOptions::parse(
            "soft,timeo=15,retrans=3,nconnect=4,rsize=65536,actimeo=7,nocto,lookupcache=pos,cache=/var/cache/x,eager,cachesize=2G",
        )
        .unwrap();
        assert!(!o.hard);
        assert_eq!(o.timeo, Duration::from_millis(1500));
        assert_eq!(o.retrans, 3);
        assert_eq!(o.nconnect, 4);
        assert_eq!(o.rsize, Some(65536));
        assert_eq!(o.acdirmax, Duration::from_secs(7));
        assert_eq!(o.acregmin, Duration::from_secs(7));
        assert!(!o.cto);
        assert_eq!(o.lookupcache, LookupCache::Positive);
        assert_eq!(o.cache_dir, Some(PathBuf::from("/var/cache/x")));
        assert_eq!(o.cache_size_bytes_max, Some(2 << 30));
        assert!(o.eager);
    }

    #[test]
    fn udp_has_its_own_timeo_default_unless_one_is_given() {
        let o = MountOptions::parse("proto=udp").unwrap();
        assert!(o.udp);
        assert_eq!(o.timeo, TIMEO_UDP_DEFAULT);
        let o = MountOptions::parse("timeo=30,udp").unwrap();
        assert_eq!(o.timeo, Duration::from_secs(3));
        let o = MountOptions::parse("udp,tcp").unwrap();
        assert_eq!((o.udp, o.timeo), (false, TIMEO_TCP_DEFAULT));
        assert!(MountOptions::parse("proto=sctp").is_err());
    }

    #[test]
    fn later_options_win() {
        let o = MountOptions::parse("soft,hard,actimeo=5,acregmax=9").unwrap();
        assert!(o.hard);
        assert_eq!(o.acregmin, Duration::from_secs(5));
        assert_eq!(o.acregmax, Duration::from_secs(9));
    }

    #[test]
    fn errors_name_the_option() {
        let e = MountOptions::parse("hard,version=5").unwrap_err();
        assert!(e.to_string().contains("'version'"), "{e}");
        assert!(e.to_string().contains("3, 4, 4.1 or 4.2"), "{e}");
        let e = MountOptions::parse("vers=4.0").unwrap_err();
        assert!(e.to_string().contains("4.0 is not supported"), "{e}");
        assert!(MountOptions::parse("minorversion=0").is_err());
        let e = MountOptions::parse("timeo=abc").unwrap_err();
        assert!(e.to_string().contains("'timeo'") && e.to_string().contains("abc"), "{e}");
        let e = MountOptions::parse("nconnect=17").unwrap_err();
        assert!(e.to_string().contains("between 1 and 16"), "{e}");
        assert_eq!(MountOptions::parse("frob=1").unwrap_err(), OptionError::Unknown("frob".into()));
        assert_eq!(MountOptions::parse("hard=1").unwrap_err(), OptionError::UnexpectedValue("hard".into()));
        assert_eq!(MountOptions::parse("uid").unwrap_err(), OptionError::MissingValue("uid".into()));
        assert!(MountOptions::parse("lookupcache=some").is_err());
        assert!(MountOptions::parse("local_lock=some").is_err());
        assert!(MountOptions::parse("xprtsec=ssl").is_err());
        let o = MountOptions::parse(
            "xprtsec=mtls,tls_ca=/etc/ca.pem,tls_cert=/c.pem,tls_key=/k.pem,tls_name=nfs.example",
        )
        .unwrap();
        assert_eq!((o.xprtsec, o.tls_name.as_deref()), (Xprtsec::Mtls, Some("nfs.example")));
        assert_eq!(MountOptions::parse("nolock").unwrap().local_lock, LocalLock::All);
        assert_eq!(MountOptions::parse("nolock,lock").unwrap().local_lock, LocalLock::None);
        assert!(MountOptions::parse("local_lock=posix").unwrap().local_lock.flock_remote());
        assert!(MountOptions::parse("rsize=100").is_err());
        assert!(MountOptions::parse("cachesize=0").is_err());
        // Sizes: a bare count, K/M/G/T or KiB/MiB/GiB/TiB, all powers of 1024.
        for (text, bytes) in
            [("4096", 4096u64), ("64M", 64 << 20), ("64MiB", 64 << 20), ("2gib", 2 << 30), ("8k", 8192)]
        {
            assert_eq!(
                MountOptions::parse(&format!("dirtymax={text}")).unwrap().dirty_bytes_max,
                Some(bytes),
                "{text}"
            );
        }
        for text in ["64MB", "iB", "M", "MiBiB", "1.5G"] {
            let e = MountOptions::parse(&format!("dirtymax={text}")).unwrap_err().to_string();
            assert!(e.contains(text) && e.contains("512MiB"), "{text}: {e}");
        }
        assert!(MountOptions::parse("srcaddr=127.0.0.300").unwrap_err().to_string().contains("'srcaddr'"));
        assert_eq!(MountOptions::parse("srcaddr=[::1]").unwrap().srcaddr, Some("::1".parse().unwrap()));
    }

    fn arb_options() -> impl Strategy<Value = MountOptions> {
        let ports = (
            proptest::option::of(1u16..),
            proptest::option::of(1u16..),
            1u16..,
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<std::net::IpAddr>()),
        );
        let transport = (
            1u64..=6000,
            0u32..=1000,
            any::<bool>(),
            1u32..=NCONNECT_MAX,
            proptest::option::of(TRANSFER_SIZE_MIN..=TRANSFER_SIZE_MAX),
            proptest::option::of(TRANSFER_SIZE_MIN..=TRANSFER_SIZE_MAX),
            any::<bool>(),
            any::<bool>(),
        );
        let cache = (
            any::<bool>(),
            proptest::array::uniform4(0u64..=AC_TIMEOUT_MAX.as_secs()),
            any::<bool>(),
            prop_oneof![Just(LookupCache::All), Just(LookupCache::Positive), Just(LookupCache::None)],
            proptest::option::of("/[a-z0-9_/.-]{0,20}"),
            proptest::option::of(1u64..u64::MAX >> 1),
            proptest::option::of(1u64..u64::MAX >> 1),
            any::<bool>(),
            any::<bool>(),
            prop_oneof![
                Just(LocalLock::None),
                Just(LocalLock::All),
                Just(LocalLock::Flock),
                Just(LocalLock::Posix)
            ],
        );
        let security = (
            prop_oneof![Just(Xprtsec::None), Just(Xprtsec::Tls), Just(Xprtsec::Mtls)],
            proptest::option::of(prop_oneof![
                Just(NfsVersion::V3),
                Just(NfsVersion::V4),
                Just(NfsVersion::V41),
                Just(NfsVersion::V42)
            ]),
            proptest::option::of("/[a-z0-9_/.-]{1,20}"),
            proptest::option::of("/[a-z0-9_/.-]{1,20}"),
            proptest::option::of("/[a-z0-9_/.-]{1,20}"),
            proptest::option::of("[a-z0-9.-]{1,20}"),
            any::<bool>(),
            1u32..=DELEGATIONS_MAX_LIMIT,
            any::<bool>(),
            0u32..=READAHEAD_FILES_MAX,
            any::<bool>(),
            any::<bool>(),
        );
        (ports, transport, cache, security).prop_map(|(p, t, c, x)| MountOptions {
            nfsport: p.0,
            mountport: p.1,
            pmapport: p.2,
            uid: p.3,
            gid: p.4,
            resvport: p.5,
            srcaddr: p.6,
            // timeo=6000 stands for "not given": the transport's default.
            timeo: match (t.0, t.7) {
                (6000, false) => TIMEO_TCP_DEFAULT,
                (6000, true) => TIMEO_UDP_DEFAULT,
                (ds, _) => Duration::from_millis(ds * 100),
            },
            timeo_given: t.0 != 6000,
            udp: t.7,
            retrans: t.1,
            hard: t.2,
            nconnect: t.3,
            rsize: t.4,
            wsize: t.5,
            ro: t.6,
            ac: c.0,
            acregmin: Duration::from_secs(c.1[0]),
            acregmax: Duration::from_secs(c.1[1]),
            acdirmin: Duration::from_secs(c.1[2]),
            acdirmax: Duration::from_secs(c.1[3]),
            cto: c.2,
            lookupcache: c.3,
            cache_dir: c.4.map(PathBuf::from),
            cache_size_bytes_max: c.5,
            dirty_bytes_max: c.6,
            eager: c.7,
            sync: c.8,
            local_lock: c.9,
            vers: x.1,
            xprtsec: x.0,
            tls_ca: x.2.map(PathBuf::from),
            tls_cert: x.3.map(PathBuf::from),
            tls_key: x.4.map(PathBuf::from),
            tls_name: x.5,
            delegations: x.6,
            delegations_max: x.7,
            deleg_close_writeback: x.8,
            readahead_files: x.9,
            dirops_async: x.10,
            deleg_chmod_hold: x.11,
        })
    }

    proptest! {
        #[test]
        fn display_parse_round_trip(o in arb_options()) {
            let s = o.to_string();
            prop_assert_eq!(MountOptions::parse(&s).unwrap(), o.clone());
            let mut q = MountOptions::default();
            q.apply_list(&o.to_items().join("&"), '&').unwrap();
            prop_assert_eq!(q, o);
        }

        #[test]
        fn junk_never_panics(s in "[a-z=,0-9&]{0,40}") {
            let _ = MountOptions::parse(&s);
        }
    }
}
