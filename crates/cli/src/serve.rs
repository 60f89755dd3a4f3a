//! `eagernfs serve`: build exports from the command line or an exports file and run the server.

use anyhow::{bail, Context, Result};
use eagernfs_server::exports::{self, Export, ExportSource};
use eagernfs_server::{export_id_for_path, ExportSpec, PoolMode, Server, ServerConfig, SvcConfig};
use eagernfs_vfs::cephfs::{CephBackend, CephConfig, CephFsSource};
use eagernfs_vfs::local::{LocalBackend, LocalConfig};
use eagernfs_vfs::memory::{MemoryBackend, MemoryConfig};
use eagernfs_vfs::Backend;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub(crate) struct ServeArgs {
    /// Directory to export (mounted by its absolute path; `/` names it too),
    /// or a CephFS directory: `cephfs://[ID@]FSNAME/PATH?conf=CONF` (client
    /// ID defaults to admin, CONF to /etc/ceph/ceph.conf; mounted as PATH).
    /// Not used with --exports.
    #[arg(required_unless_present = "exports")]
    dir: Option<PathBuf>,

    /// Address to listen on for NFS, MOUNT and portmap (repeatable). Port 0 picks a free port.
    #[arg(long, default_value = "0.0.0.0:2049")]
    listen: Vec<SocketAddr>,

    /// Export options for DIR, in exports(5) syntax.
    /// `async` is unsafe: COMMIT and FILE_SYNC then return before data is on disk.
    #[arg(short = 'o', long = "options", default_value = "rw,sync,secure,root_squash")]
    options: String,

    /// Clients allowed to mount DIR (address, CIDR or host name; repeatable).
    #[arg(long = "allow", default_values = ["127.0.0.0/8", "::1"])]
    allow: Vec<String>,

    /// Read exports from this file (/etc/exports syntax) instead of DIR.
    #[arg(long, conflicts_with_all = ["dir", "memory"])]
    exports: Option<PathBuf>,

    /// Serve an in-memory file system at export path DIR instead of a directory.
    #[arg(long)]
    memory: bool,

    /// Capacity of the in-memory file system, in MiB.
    #[arg(long, default_value_t = 4096)]
    memory_size_mib: u64,

    /// Where the file-handle key lives (keep it: handles stay valid across restarts only with it).
    #[arg(long)]
    state_dir: Option<PathBuf>,

    /// Also register with the rpcbind/portmapper at this address (e.g. 127.0.0.1:111).
    #[arg(long)]
    register: Option<SocketAddr>,

    /// Most simultaneous connections.
    #[arg(long, default_value_t = 4096)]
    max_connections: usize,

    /// Most simultaneous connections from one client address; further ones are closed at once
    /// (logged once per host, counted in `eagernfs stat`), so one host cannot take them all.
    #[arg(long, default_value_t = 1024)]
    max_connections_per_host: usize,

    /// Seconds a call may take to arrive once it has begun (and a new connection to send its
    /// first): slower senders are closed (slowloris).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    record_timeout: f64,

    /// Seconds a connection may stay idle (nothing in flight) before it is closed; clients
    /// reconnect when they need to (knfsd: 6 minutes).
    #[arg(long, value_name = "SECONDS", default_value_t = 360.0)]
    idle_timeout: f64,

    /// Most requests of one connection executing at once.
    #[arg(long, default_value_t = 128)]
    max_requests_per_connection: usize,

    /// At shutdown, write per-procedure call counts here (`NAME count` lines;
    /// `WRITE/UNSTABLE n` etc. split WRITEs by stability).
    #[arg(long)]
    stats_file: Option<PathBuf>,

    /// At shutdown, write every READ/WRITE as `R|W fileid offset count`, in the
    /// order the backend ran them (for `eagernfs bench stream`). Keeps at most 10M entries.
    #[arg(long)]
    trace_io: Option<PathBuf>,

    /// Most service threads (each receives a call, runs it and replies). A pool
    /// keeps one thread per CPU running quick calls and adds threads only while
    /// calls are blocked (COMMIT, stable writes, the disk), up to this many.
    #[arg(long, alias = "io-threads", default_value_t = 64)]
    threads_max: usize,

    /// Service threads kept when idle (per pool; at least one per CPU).
    #[arg(long, default_value_t = 2)]
    threads_min: usize,

    /// Which clients get READs of 32 KiB and more (over TCP, where the backend
    /// can) answered by splicing the file's pages into the socket instead of
    /// copying them through a buffer: `remote` (clients on other hosts; a client
    /// on this host, such as a mount, gets copies, which a mount reads faster),
    /// `always` or `never`.
    /// The data sent is the same.
    #[arg(long, value_name = "WHEN", default_value = "remote")]
    splice: eagernfs_server::SpliceReads,

    /// The same as `--splice never`.
    #[arg(long, conflicts_with = "splice")]
    no_splice: bool,

    /// Also serve NFS, MOUNT and portmap over UDP, on the same ports. Off by
    /// default (as on Linux since 5.6): replies go to whatever source address a
    /// datagram claims, and transfers are capped at 32 KiB.
    #[arg(long)]
    udp: bool,

    /// RPC-with-TLS (RFC 9289): this server's certificate chain (PEM). Clients that ask
    /// (`xprtsec=tls`) get TLS 1.3; exports can require it (`xprtsec=tls:mtls` in exports(5)).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// The private key of `--tls-cert` (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// Accept client certificates signed by this CA (PEM): mutual TLS (`xprtsec=mtls`; an
    /// exports host rule then also covers a client whose certificate is for that host name).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,

    /// Serve no byte-range locks (NLM and NSM): clients must then mount with
    /// `nolock` or `local_lock=all`, as with a kernel server without lockd.
    #[arg(long)]
    no_locks: bool,

    /// Seconds after a restart during which only locks held before it may be
    /// reclaimed (clients had locks when the server stopped; otherwise no grace).
    #[arg(long, value_name = "SECONDS", default_value_t = 90.0)]
    grace_period: f64,

    /// Serve NFSv3 only: no NFSv4.1/4.2 (clients then mount with `vers=3`).
    #[arg(long)]
    no_nfs4: bool,

    /// NFSv4 lease: seconds a client's opens, locks and delegations last
    /// without a call from it (a lapsed client keeps them until someone else
    /// needs them).
    #[arg(long, value_name = "SECONDS", default_value_t = 90)]
    lease_time: u32,

    /// Grant NFSv4 read delegations only: a client that alone has a file
    /// open for writing then sends every write and attribute change as it
    /// makes it, instead of keeping them until it is asked.
    #[arg(long)]
    no_write_delegations: bool,

    /// NFSv4 id domain: owners written `name@DOMAIN` are looked up in the
    /// system's user and group databases (numeric owners always work).
    #[arg(long, value_name = "DOMAIN", default_value = "localdomain")]
    nfs4_domain: String,

    /// Serve Prometheus /metrics, the JSON /api/stats and a status page on this
    /// address (PORT alone means 127.0.0.1:PORT; nothing there changes the server).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,

    /// The control socket `eagernfs stat` and `eagernfs reload` use (default:
    /// STATE_DIR/control.sock, mode 0600).
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,

    /// Intent journal (a file or block device, ideally on faster storage than
    /// DIR): every WRITE (answered FILE_SYNC) and every change of names or
    /// attributes is answered once it is in the journal, many calls sharing one
    /// sync; DIR's file system catches up in the background and the journal is
    /// replayed before serving after any crash. Created if missing.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["memory", "exports"])]
    journal: Option<PathBuf>,

    /// Size of the journal (units: KiB MiB GiB). Writers wait when it is full
    /// until the export's files are synced and the space is freed.
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = parse_size)]
    journal_size: u64,

    /// Most seconds between journal checkpoints (syncing the export's files and freeing the
    /// log; one also runs whenever the log is half full). Longer: fewer syncs, longer replay.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    journal_checkpoint: f64,

    /// `global`: one pool, the scheduler places threads. `percpu`: one pool per
    /// CPU, its threads bound to it, each connection served by one pool (Banks).
    #[arg(long, value_enum, default_value_t = Pools::Global)]
    pools: Pools,

    /// CephFS exports (last: their help heading covers what follows).
    #[command(flatten)]
    ceph: Box<CephArgs>,

    /// Several servers on one CephFS (a heading of its own).
    #[command(flatten)]
    cluster: Box<crate::cluster::ClusterArgs>,
}

/// The flags of CephFS exports (`cephfs://` operands or exports lines).
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "CephFS exports")]
pub(crate) struct CephArgs {
    /// The libcephfs shared object CephFS exports load (a file name looked up on the
    /// library path, or a path). Only loaded when a CephFS export is served.
    #[arg(long, value_name = "LIB", default_value = eagernfs_vfs::cephfs::LIBRARY)]
    pub(crate) libcephfs: String,

    /// Seconds a CephFS export may take to connect to its cluster (monitors,
    /// authentication, MDS) at start before the server gives up with an error.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub(crate) ceph_connect_timeout: f64,

    /// Seconds a call may wait for the CephFS cluster before the export counts it as
    /// stalled: calls are then answered "try again later" (NFS3ERR_JUKEBOX) at once
    /// until the cluster answers, instead of every call taking a server thread.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    pub(crate) ceph_stall_after: f64,

    /// Seconds a call of a CephFS export may wait for its cluster before it is answered
    /// "try again later" (NFS3ERR_JUKEBOX), so no client waits for ever on an MDS that is
    /// down; clients retry after a few seconds. The call's own answer, if it comes
    /// later, is dropped. Calls that move data (COMMIT, stable or large WRITEs, large
    /// READs) get six times as long.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub(crate) cluster_reply_after: f64,

    /// Threads running quick calls at once per CPU (default: 1, or 4 when an export is a CephFS,
    /// whose calls wait on the cluster's round trips when its cache misses).
    #[arg(long, value_name = "N")]
    pub(crate) slots_per_cpu: Option<usize>,

    /// Memory for each CephFS export's data cache (libcephfs's object cache; units: KiB MiB
    /// GiB). Half of it may hold UNSTABLE writes until their COMMIT; write-back starts once an
    /// eighth is dirty or data is 30 s old.
    #[arg(long, value_name = "SIZE", default_value = "512MiB", value_parser = parse_size)]
    pub(crate) ceph_cache: u64,
}

/// Whether any export is a CephFS (the operand, or a line of the exports file).
fn serves_cephfs(args: &ServeArgs) -> Result<bool> {
    if let Some(dir) = &args.dir {
        return Ok(eagernfs_vfs::cephfs::is_cephfs_url(&dir.to_string_lossy()));
    }
    let Some(file) = &args.exports else { return Ok(false) };
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    Ok(text.lines().any(|l| eagernfs_vfs::cephfs::is_cephfs_url(l.trim_start())))
}

/// A positive, finite number of seconds from a flag.
fn seconds(flag: &str, s: f64) -> Result<std::time::Duration> {
    if !(s.is_finite() && s > 0.0 && s <= 1e7) {
        bail!("{flag} {s}: give a number of seconds above 0");
    }
    Ok(std::time::Duration::from_secs_f64(s))
}

fn parse_size(text: &str) -> Result<u64, String> {
    eagernfs_bench::units::parse_size(text)
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Pools {
    Global,
    Percpu,
}

/// The lock manager's state across restarts (statd's `/var/lib/nfs/sm`): this
/// start's NSM state number (odd, two more than the last) and the hosts that
/// held locks when the server last stopped, to tell of the restart and to
/// give a grace period for reclaims.
fn lock_config(
    args: &ServeArgs,
    state_dir: &Path,
    member: Option<&crate::cluster::Member>,
) -> Result<eagernfs_server::LockConfig> {
    use eagernfs_server::{LockConfig, LockHost};
    if !(args.grace_period.is_finite() && (0.0..=86_400.0).contains(&args.grace_period)) {
        bail!("--grace-period {}: give seconds from 0 (no grace) to 86400", args.grace_period);
    }
    let grace_period = std::time::Duration::from_secs_f64(args.grace_period);
    if args.no_locks {
        return Ok(LockConfig { enabled: false, ..LockConfig::default() });
    }
    if args.memory {
        // Nothing survives a restart of the memory backend, locks included.
        return Ok(LockConfig { grace_period, ..LockConfig::default() });
    }
    if let Some(m) = member {
        // A head: node N's state lives in RADOS, not in this machine's state directory.
        return Ok(m.lock_config(grace_period));
    }
    let dir = state_dir.join("nsm");
    // 0700 like the rest of the state directory (it may be made here first: the handle key
    // lives there too).
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let state_path = dir.join("state");
    let last: i32 = match std::fs::read_to_string(&state_path) {
        Ok(t) => t.trim().parse().with_context(|| {
            format!("{} does not hold a number; remove it (clients then see a restart)", state_path.display())
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e).with_context(|| format!("reading {}", state_path.display())),
    };
    // Odd while up: the next odd number after the last, wrapping before overflow.
    let nsm_state = match last {
        l if l <= 0 || l >= i32::MAX - 2 => 1,
        l if l % 2 == 1 => l + 2,
        l => l + 1,
    };
    write_durably(&state_path, format!("{nsm_state}\n").as_bytes(), 0o644)?;
    let hosts_path = dir.join("hosts");
    let previous_hosts: Vec<LockHost> = std::fs::read_to_string(&hosts_path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (addr, name) = l.split_once(' ')?;
            Some(LockHost { addr: addr.parse().ok()?, name: name.to_string() })
        })
        .collect();
    let on_hosts_changed: eagernfs_server::HostsChanged = Arc::new(move |hosts: &[LockHost]| {
        let text: String =
            hosts.iter().map(|h| format!("{} {}\n", h.addr, h.name.replace('\n', " "))).collect();
        if let Err(e) = write_durably(&hosts_path, text.as_bytes(), 0o644) {
            tracing::error!("cannot record the hosts holding locks in {}: {e:#}", hosts_path.display());
        }
    });
    Ok(LockConfig {
        grace_period,
        previous_hosts,
        nsm_state,
        on_hosts_changed: Some(on_hosts_changed),
        ..LockConfig::default()
    })
}

/// The NFSv4 service's state across restarts (STATE_DIR/nfs4): a boot epoch
/// that grows with every start (client ids, session ids and stateids carry
/// it), and the owners of clients that may reclaim their state in the grace
/// period after a restart.
fn nfs4_config(args: &ServeArgs, state_dir: &Path) -> Result<eagernfs_server::Nfs4Config> {
    use eagernfs_server::Nfs4Config;
    if !(1..=3600).contains(&args.lease_time) {
        bail!("--lease-time {}: give seconds from 1 to 3600", args.lease_time);
    }
    let base = Nfs4Config {
        enabled: !args.no_nfs4,
        lease: std::time::Duration::from_secs(args.lease_time as u64),
        grace_period: std::time::Duration::from_secs_f64(args.grace_period),
        id_domain: args.nfs4_domain.clone(),
        write_delegations: !args.no_write_delegations,
        ..Nfs4Config::default()
    };
    if args.no_nfs4 {
        return Ok(base);
    }
    if args.memory {
        // Nothing survives a restart of the memory backend; ids still differ per start.
        let secs =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_secs());
        return Ok(Nfs4Config { boot_epoch: (secs as u32).max(1), ..base });
    }
    let dir = state_dir.join("nfs4");
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let epoch_path = dir.join("epoch");
    let last: u32 = match std::fs::read_to_string(&epoch_path) {
        Ok(t) => t.trim().parse().with_context(|| {
            format!("{} does not hold a number; remove it (clients then see a restart)", epoch_path.display())
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e).with_context(|| format!("reading {}", epoch_path.display())),
    };
    let boot_epoch = last.checked_add(1).filter(|e| *e != 0).unwrap_or(1);
    write_durably(&epoch_path, format!("{boot_epoch}\n").as_bytes(), 0o644)?;
    let clients_path = dir.join("clients");
    let previous_clients: Vec<bytes::Bytes> = std::fs::read_to_string(&clients_path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| hex_decode(l.trim()))
        .map(bytes::Bytes::from)
        .collect();
    // The server calls this on a thread of its own, as the process (not as a client), one
    // list at a time, and logs and counts failures.
    let on_clients_changed: eagernfs_server::ClientsChanged = Arc::new(move |owners: &[bytes::Bytes]| {
        let text: String = owners.iter().map(|o| format!("{}\n", hex_encode(o))).collect();
        write_durably(&clients_path, text.as_bytes(), 0o600).map_err(|e| format!("{e:#}"))
    });
    Ok(Nfs4Config { boot_epoch, previous_clients, on_clients_changed: Some(on_clients_changed), ..base })
}

fn hex_encode(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if s.is_empty() || !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// The TLS configuration from `--tls-cert`, `--tls-key`, `--tls-client-ca`.
fn tls_config(args: &ServeArgs) -> Result<Option<Arc<rustls::ServerConfig>>> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else { return Ok(None) };
    let read = |flag: &str, p: &Path| std::fs::read(p).with_context(|| format!("{flag} {}", p.display()));
    let cert_pem = read("--tls-cert", cert)?;
    let key_pem = read("--tls-key", key)?;
    let ca_pem = args.tls_client_ca.as_deref().map(|p| read("--tls-client-ca", p)).transpose()?;
    let config = eagernfs_server::tls::server_config(&cert_pem, &key_pem, ca_pem.as_deref())
        .context("setting up TLS (check that --tls-key is the key of --tls-cert)")?;
    tracing::info!(
        "RPC-with-TLS offered (TLS 1.3){}",
        if ca_pem.is_some() { ", client certificates verified (mutual TLS)" } else { "" }
    );
    Ok(Some(config))
}

/// Replace `path` with `data` (a new file gets `mode`), synced, by a rename: never half written,
/// and on stable storage (the file and the directory's new entry) when this returns. The
/// temporary file's name is this call's own, so writers of the same file never share one.
fn write_durably(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".{}.{n}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(data).with_context(|| format!("writing {}", tmp.display()))?;
        f.sync_all().with_context(|| format!("syncing {}", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match std::fs::File::open(dir).and_then(|d| d.sync_all()) {
        Ok(()) => Ok(()),
        // A file system that cannot sync a directory (it has nothing to sync there).
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP)) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("syncing the directory {}", dir.display())),
    }
}

/// Remove what a crash in the middle of [`write_durably`] left in `dir`: `NAME.PID.N.tmp`
/// files of processes that are gone, and the `NAME.tmp` files of earlier versions. Called
/// before this process writes anything, so a file with its own pid is an earlier process's
/// (a service started at boot often gets the same pid again).
fn remove_stale_temporaries(dir: &Path) {
    const EARLIER: [&str; 6] = ["clients", "epoch", "hosts", "state", "handle", "ceph-session-id"];
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".tmp")) else { continue };
        let mut parts = stem.rsplitn(3, '.');
        let (n, pid) = (parts.next().and_then(|n| n.parse::<u64>().ok()), parts.next());
        let stale = match (n, pid.and_then(|p| p.parse::<i32>().ok()), parts.next()) {
            (Some(_), Some(pid), Some(_)) => pid == std::process::id() as i32 || !process_alive(pid),
            _ => EARLIER.contains(&stem),
        };
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether process `pid` exists.
fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    unsafe { libc::kill(pid, 0) == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) }
}

/// Load the 16-byte master key for file handles, creating it (0600) on first run.
fn master_key(state_dir: &Path) -> Result<[u8; 16]> {
    use std::os::unix::fs::DirBuilderExt;
    let path = state_dir.join("handle.key");
    match std::fs::read(&path) {
        Ok(b) if b.len() == 16 => return Ok(b.try_into().expect("length checked")),
        Ok(b) => bail!(
            "{} holds {} bytes, expected 16; remove it to make a new key (existing client handles become stale)",
            path.display(),
            b.len()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state_dir)
        .with_context(|| format!("creating state directory {}", state_dir.display()))?;
    let key: [u8; 16] = rand::random();
    write_durably(&path, &key, 0o600)?;
    Ok(key)
}

/// The CephFS session name of one export of this server: the server's own
/// random id (kept in the state directory, so every start of this server
/// has it and no other server does) and a hash of the export's URL. A
/// session left by a crash is ended with it at the next start.
fn ceph_session_uuid(state_dir: &Path, export: &str) -> Result<String> {
    use siphasher::sip::SipHasher24;
    use std::hash::Hasher;
    let path = state_dir.join("ceph-session-id");
    let id = match std::fs::read_to_string(&path) {
        Ok(t) if t.trim().len() == 16 && t.trim().bytes().all(|b| b.is_ascii_hexdigit()) => {
            t.trim().to_string()
        }
        Ok(_) => bail!("{} is not 16 hex digits; remove it to make a new one", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
                .create(state_dir)
                .with_context(|| format!("creating state directory {}", state_dir.display()))?;
            let id = format!("{:016x}", rand::random::<u64>());
            write_durably(&path, format!("{id}\n").as_bytes(), 0o600)?;
            id
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut h = SipHasher24::new_with_keys(0, 0);
    h.write(export.as_bytes());
    Ok(format!("eagernfs-{id}-{:016x}", h.finish()))
}

/// A per-export key: the master key's MAC of the export path, so one
/// export's handles are useless on another.
fn export_key(master: &[u8; 16], export_path: &Path) -> [u8; 16] {
    use siphasher::sip128::{Hasher128, SipHasher24};
    use std::hash::Hasher;
    let mut h = SipHasher24::new_with_key(master);
    h.write(export_path.as_os_str().as_encoded_bytes());
    h.finish128().as_bytes()
}

/// The exports(5) line for the quick `serve DIR` case.
fn quick_exports_line(dir: &Path, allow: &[String], options: &str) -> String {
    let path = dir.to_string_lossy().replace('\\', "\\\\").replace('"', "\\\"");
    let clients: Vec<String> = allow.iter().map(|c| format!("{c}({options})")).collect();
    format!("\"{path}\" {}", clients.join(" "))
}

/// Builds the export set from the flags or the exports file, now and at
/// each reload, keeping the backend of an export whose path and
/// durability did not change (its open files, caches and write verifier:
/// a reload must not make clients resend what they already wrote).
struct ExportBuilder {
    args: ServeArgs,
    state_dir: PathBuf,
    /// This server's part in a cluster of heads (`--node-id`).
    member: Option<crate::cluster::Member>,
    /// Backends by (export path, unsafe `async`).
    backends: parking_lot::Mutex<std::collections::HashMap<(PathBuf, bool), Arc<dyn Backend>>>,
}

impl ExportBuilder {
    fn build(&self) -> Result<Vec<ExportSpec>> {
        let mut kept = self.backends.lock();
        let mut now = std::collections::HashMap::new();
        let member = self.member.as_ref();
        let specs = build_exports(&self.args, &self.state_dir, member, &mut |path, unsafe_async, make| {
            let key = (path.to_path_buf(), unsafe_async);
            let b = match kept.get(&key) {
                Some(b) => b.clone(),
                None => make()?,
            };
            now.insert(key, b.clone());
            Ok(b)
        })?;
        *kept = now;
        Ok(specs)
    }

    /// Re-read the exports file; a sentence saying what changed.
    fn reload(&self, handle: &eagernfs_server::ServerHandle) -> Result<String> {
        if self.args.exports.is_none() {
            bail!("nothing to reload: this server was started with a directory, not --exports FILE");
        }
        let before: Vec<PathBuf> = handle.exports().iter().map(|e| e.mount_paths[0].clone()).collect();
        let specs = self.build()?;
        let after: Vec<PathBuf> = specs.iter().map(|e| e.mount_paths[0].clone()).collect();
        handle.replace_exports(specs)?;
        let added: Vec<String> =
            after.iter().filter(|p| !before.contains(p)).map(|p| p.display().to_string()).collect();
        let removed: Vec<String> =
            before.iter().filter(|p| !after.contains(p)).map(|p| p.display().to_string()).collect();
        Ok(format!(
            "{} export(s) now; added: {}; removed: {}; options and client lists apply from the next call",
            after.len(),
            if added.is_empty() { "none".into() } else { added.join(", ") },
            if removed.is_empty() { "none".into() } else { removed.join(", ") },
        ))
    }
}

/// Get a backend for (path, unsafe async), making it with the closure if
/// there is none to keep.
type BackendFor<'a> =
    dyn FnMut(&Path, bool, &mut dyn FnMut() -> Result<Arc<dyn Backend>>) -> Result<Arc<dyn Backend>> + 'a;

fn build_exports(
    args: &ServeArgs,
    state_dir: &Path,
    member: Option<&crate::cluster::Member>,
    backend_for: &mut BackendFor<'_>,
) -> Result<Vec<ExportSpec>> {
    let (table, quick) = match (&args.exports, &args.dir) {
        (Some(file), _) => {
            let text =
                std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
            let (table, warnings) =
                exports::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            for w in warnings {
                tracing::warn!("{}: {w}", file.display());
            }
            (table, false)
        }
        (None, Some(dir)) if eagernfs_vfs::cephfs::is_cephfs_url(&dir.to_string_lossy()) => {
            if args.memory {
                bail!("--memory serves an in-memory file system; give it a path such as /mem, not a cephfs:// URL");
            }
            let src = CephFsSource::parse(&dir.to_string_lossy()).map_err(|e| anyhow::anyhow!("{e}"))?;
            let clients: Vec<String> = args.allow.iter().map(|c| format!("{c}({})", args.options)).collect();
            let line = format!("{src} {}", clients.join(" "));
            let (table, warnings) =
                exports::parse(&line).map_err(|e| anyhow::anyhow!("in -o/--allow: {}", e.message))?;
            for w in warnings {
                tracing::warn!("-o/--allow: {}", w.text);
            }
            (table, true)
        }
        (None, Some(dir)) => {
            let abs = if args.memory {
                if !dir.is_absolute() {
                    bail!(
                        "with --memory, DIR is the export path clients mount and must be absolute, e.g. /mem"
                    );
                }
                dir.clone()
            } else {
                std::fs::canonicalize(dir).with_context(|| format!("cannot export {}", dir.display()))?
            };
            let line = quick_exports_line(&abs, &args.allow, &args.options);
            let (table, warnings) =
                exports::parse(&line).map_err(|e| anyhow::anyhow!("in -o/--allow: {}", e.message))?;
            for w in warnings {
                tracing::warn!("-o/--allow: {}", w.text);
            }
            (table, true)
        }
        (None, None) => bail!("give a directory to serve, or --exports FILE"),
    };
    let master = match member {
        // Every head the same key: a handle from one works on all.
        Some(m) => m.key,
        None if args.memory => [0; 16],
        None => master_key(state_dir)?,
    };
    let mut specs = Vec::new();
    for export in table.entries {
        let backend: Arc<dyn Backend> = if let ExportSource::CephFs(src) = &export.source {
            let unsafe_async = export.clients.iter().all(|c| !c.options.sync);
            if args.journal.is_some() {
                bail!(
                    "--journal with the CephFS export {src}: the journal is for local directories (CephFS keeps \
                     its own); serve CephFS exports without --journal"
                );
            }
            if unsafe_async {
                tracing::warn!(
                    "export {src} is `async`: COMMIT, FILE_SYNC and metadata changes return before the cluster has them; \
                     a server crash loses what clients think is safe"
                );
            }
            // Kept across reloads by the URL (a path of a CephFS is not a local path).
            backend_for(Path::new(&src.to_string()), unsafe_async, &mut || {
                let mut cfg = CephConfig::new(src.clone(), export_key(&master, &export.path));
                cfg.unsafe_async = unsafe_async;
                cfg.library = args.ceph.libcephfs.clone();
                cfg.session_uuid = Some(match member {
                    // Node N's session, whichever machine runs node N.
                    Some(m) => m.session_uuid(src),
                    None => ceph_session_uuid(state_dir, &src.to_string())?,
                });
                // A head's session is never replaced under the node's name (docs/cluster.md).
                cfg.fence = member.map(|m| m.lease().fence_flag());
                cfg.mount_timeout = seconds("--ceph-connect-timeout", args.ceph.ceph_connect_timeout)?;
                cfg.stall_after = seconds("--ceph-stall-after", args.ceph.ceph_stall_after)?;
                if args.ceph.ceph_cache < 16 << 20 {
                    bail!("--ceph-cache {}: give at least 16MiB", args.ceph.ceph_cache);
                }
                cfg.cache_bytes = args.ceph.ceph_cache;
                // The errors name the export themselves, except a missing library.
                let backend = CephBackend::open(cfg).map_err(|e| match e {
                    eagernfs_vfs::cephfs::OpenError::Library(_) => {
                        anyhow::anyhow!("cannot export {src}: {e}")
                    }
                    e => anyhow::anyhow!("{e}"),
                })?;
                Ok(Arc::new(backend))
            })?
        } else if args.memory {
            backend_for(&export.path, false, &mut || {
                Ok(Arc::new(MemoryBackend::new(MemoryConfig {
                    max_bytes: args.memory_size_mib << 20,
                    ..MemoryConfig::default()
                })))
            })?
        } else {
            // Unsafe async only when every client rule asks for it: one `sync`
            // client must not get acknowledgements that lie.
            let unsafe_async = export.clients.iter().all(|c| !c.options.sync);
            if unsafe_async {
                tracing::warn!(
                    "export {} is `async`: COMMIT, FILE_SYNC writes and changes of names and attributes \
                     return before they are on disk; a server crash loses what clients think is safe",
                    export.path.display()
                );
            }
            backend_for(&export.path, unsafe_async, &mut || {
                let key = export_key(&master, &export.path);
                let backend = LocalBackend::open(LocalConfig {
                    root: export.path.clone(),
                    handle_key: key,
                    unsafe_async,
                    // Behind the journal, changes and data are durable once logged;
                    // the files catch up in the background.
                    journaled: args.journal.is_some(),
                })
                .with_context(|| format!("cannot export {}", export.path.display()))?;
                if !unsafe_async && args.journal.is_none() {
                    tracing::info!(
                        "export {}: changes of names and attributes are answered once on disk: {}",
                        export.path.display(),
                        backend.metadata_syncs().how
                    );
                }
                match &args.journal {
                    None => Ok(Arc::new(backend)),
                    Some(path) => {
                        if unsafe_async {
                            bail!(
                                "--journal with an `async` export: the journal makes writes durable and `async` \
                                 says not to bother; drop one of them (use -o rw,sync with --journal)"
                            );
                        }
                        if !(0.01..=3600.0).contains(&args.journal_checkpoint) {
                            bail!(
                                "--journal-checkpoint {}: give 0.01 to 3600 seconds",
                                args.journal_checkpoint
                            );
                        }
                        let every = std::time::Duration::from_secs_f64(args.journal_checkpoint);
                        journaled(Arc::new(backend), path, args.journal_size, every, &key)
                    }
                }
            })?
        };
        let id = fsid(&export).unwrap_or_else(|| export_id_for_path(&export.path));
        let mut mount_paths = vec![export.path.clone()];
        if quick && export.path != Path::new("/") {
            mount_paths.push(PathBuf::from("/"));
        }
        specs.push(ExportSpec { id, mount_paths, access: export, backend });
    }
    Ok(specs)
}

/// Put the intent journal at `path` in front of `backend`, replaying it first.
fn journaled(
    backend: Arc<dyn Backend>,
    path: &Path,
    size: u64,
    checkpoint_interval: std::time::Duration,
    key: &[u8; 16],
) -> Result<Arc<dyn Backend>> {
    use eagernfs_vfs::journal::{JournalOptions, Journaled};
    use siphasher::sip128::{Hasher128, SipHasher24};
    use std::hash::Hasher;
    // The journal names its export by a hash of the export's handle key
    // (not the key itself: the journal file need not be kept secret).
    let mut h = SipHasher24::new_with_key(key);
    h.write(b"eagernfs journal owner");
    let opts = JournalOptions { size_bytes: size, owner: h.finish128().as_bytes(), checkpoint_interval };
    let (journal, replay) =
        Journaled::open_file(backend, path, opts).with_context(|| format!("journal {}", path.display()))?;
    if replay.fresh {
        tracing::info!("journal {}: new, {} MiB", path.display(), size >> 20);
    } else {
        tracing::info!(
            "journal {}: replayed {} records ({} bytes; {} of removed files; {} names the file system had right) in {:.1} ms; write verifier {}",
            path.display(),
            replay.records,
            replay.bytes,
            replay.stale,
            replay.already,
            replay.duration.as_secs_f64() * 1e3,
            if replay.verifier_kept {
                "kept: clients resend nothing"
            } else {
                "changed: clients resend unstable data"
            }
        );
    }
    if replay.remade > 0 {
        tracing::warn!(
            "journal {}: {} files, directories or links created before the crash were lost by the file system \
             and made again from the journal: same names, contents and attributes, new file handles \
             (clients holding the old ones get ESTALE and look the names up again)",
            path.display(),
            replay.remade
        );
    }
    if replay.failed > 0 || replay.damaged {
        tracing::error!(
            "journal {}: {} records could not be applied{}; writes acknowledged before the restart may be lost",
            path.display(),
            replay.failed,
            if replay.damaged { " and the log was damaged in the middle" } else { "" }
        );
    }
    Ok(Arc::new(journal))
}

fn fsid(export: &Export) -> Option<u32> {
    export.clients.iter().find_map(|c| c.options.fsid)
}

pub(crate) fn run(args: ServeArgs) -> Result<()> {
    // Every connection holds a descriptor and the backends cache open files
    // sized from the limit: take the hard limit before opening anything.
    let nofile = eagernfs_bench::load::clients::raise_nofile_limit();
    tracing::info!("open-file limit {} (was {}, hard {})", nofile.soft, nofile.soft_before, nofile.hard);
    if nofile.soft < args.max_connections as u64 * 2 {
        tracing::warn!(
            "open-file limit {} is low for --max-connections {}: connections beyond the limit wait in the backlog (raise LimitNOFILE= or ulimit -Hn)",
            nofile.soft,
            args.max_connections
        );
    }
    let state_dir = args.state_dir.clone().unwrap_or_else(crate::observe::default_state_dir);
    for dir in [state_dir.clone(), state_dir.join("nsm"), state_dir.join("nfs4")] {
        remove_stale_temporaries(&dir);
    }
    let control_path =
        args.control.clone().unwrap_or_else(|| crate::observe::control_socket_path(&state_dir));
    let metrics = args.metrics.as_deref().map(crate::observe::http::parse_addr).transpose()?;
    let listen = args.listen.clone();
    let (register, trace_io, stats_file) = (args.register, args.trace_io.clone(), args.stats_file.clone());
    if args.threads_max < 1 || args.threads_min > args.threads_max {
        bail!(
            "--threads-min {} and --threads-max {}: need 1 <= min <= max",
            args.threads_min,
            args.threads_max
        );
    }
    // A head joins its cluster first: the handle key, node N's lock holders and the
    // grace period come from there, and the other heads confirm the grace period
    // before the exports open (which ends node N's previous CephFS session).
    let member = crate::cluster::join(
        &args.cluster,
        crate::cluster::first_cephfs_source(args.dir.as_deref(), args.exports.as_deref())?,
        std::time::Duration::from_secs_f64(args.grace_period.clamp(0.0, 86_400.0)),
        seconds("--ceph-connect-timeout", args.ceph.ceph_connect_timeout)?,
        !args.no_locks,
        &state_dir,
    )?;
    let config = ServerConfig {
        max_connections: args.max_connections,
        max_requests_per_connection: args.max_requests_per_connection,
        max_connections_per_host: args.max_connections_per_host.max(1),
        record_timeout: seconds("--record-timeout", args.record_timeout)?,
        idle_timeout: seconds("--idle-timeout", args.idle_timeout)?,
        io_trace_max_events: args.trace_io.as_ref().map(|_| 10_000_000),
        svc: SvcConfig {
            pools: match args.pools {
                Pools::Global => PoolMode::Global,
                Pools::Percpu => PoolMode::PerCpu,
            },
            threads_min: args.threads_min,
            threads_max: args.threads_max,
            writes_block: args.journal.is_some(),
            // Local `sync` exports sync every change of names or attributes before
            // answering it (a journal commit, milliseconds on a disk).
            metadata_blocks: args.journal.is_none() && !args.memory,
            remote_reply_after: seconds("--cluster-reply-after", args.ceph.cluster_reply_after)?,
            slots_per_cpu: match args.ceph.slots_per_cpu {
                Some(n) if (1..=64).contains(&n) => n,
                Some(n) => bail!("--slots-per-cpu {n}: give 1 to 64"),
                None if serves_cephfs(&args)? => 4,
                None => 1,
            },
            ..SvcConfig::default()
        },
        udp: args.udp,
        splice_reads: if args.no_splice { eagernfs_server::SpliceReads::Never } else { args.splice },
        locks: lock_config(&args, &state_dir, member.as_ref())?,
        nfs4: nfs4_config(&args, &state_dir)?,
        tls: tls_config(&args)?,
        lease: member.as_ref().map(|m| m.lease()),
        ..ServerConfig::default()
    };
    let locks = !args.no_locks;
    let builder = Arc::new(ExportBuilder { args, state_dir, member, backends: Default::default() });
    let exports = builder.build()?;
    // Calls run on the server's own threads; the runtime only binds, waits
    // for a signal and registers with rpcbind.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .thread_name("eagernfs")
        .build()?;
    let drc_entries = config.drc_entries;
    runtime.block_on(async move {
        let paths: Vec<String> = exports.iter().map(|e| e.mount_paths[0].display().to_string()).collect();
        let server = Server::bind(config, exports, &listen).await?;
        let addrs = server.local_addrs();
        let handle = server.handle();
        let observer = {
            let (builder, handle) = (builder.clone(), handle.clone());
            Arc::new(crate::observe::ServerObserver {
                stats: server.stats(),
                handle: handle.clone(),
                listen: addrs.clone(),
                cluster: builder.member.as_ref().map(|m| m.head.clone()),
                reload: Box::new(move || builder.reload(&handle)),
            })
        };
        // Root only (mode 0600); gone when the server exits.
        let _control = crate::observe::control::serve(&control_path, observer.clone())?;
        if let Some(addr) = metrics {
            let bound = crate::observe::http::serve(addr, observer.clone()).await?;
            tracing::info!("metrics and status page on http://{bound}/");
        }
        // Register before announcing readiness, so whoever waits for the
        // "listening" line can rely on the portmapper knowing us too.
        if let Some(pm) = register {
            let port = addrs[0].port();
            let udp = server.serves_udp();
            let notes =
                tokio::task::spawn_blocking(move || eagernfs_server::rpcbind::register(pm, port, udp, locks))
                    .await??;
            for note in notes {
                tracing::warn!("portmapper at {pm}: {note}");
            }
            tracing::info!("registered with the portmapper at {pm}");
        }
        // Signal handlers before the announcement: a SIGTERM or SIGHUP sent by
        // whoever waited for the line must find them (not the default action).
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing a SIGTERM handler")?;
        let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .context("installing a SIGINT handler")?;
        let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        let mut stdout = std::io::stdout().lock();
        for a in &addrs {
            // Scripts and tests wait for this exact line (no sleeps needed).
            writeln!(stdout, "eagernfs: listening on {a}")?;
        }
        stdout.flush()?;
        drop(stdout);
        // Under systemd (Type=notify) units ordered after ours start now, not before the
        // socket is bound: the same moment as the line above.
        let listening: Vec<String> = addrs.iter().map(ToString::to_string).collect();
        crate::sd_notify::notify_or_log(&format!(
            "READY=1\nSTATUS=exporting {} on {}",
            paths.join(", "),
            listening.join(", ")
        ));
        tracing::info!("exporting {}", paths.join(", "));
        if server.serves_udp() {
            tracing::info!("serving UDP too, on the same ports");
        }
        tracing::info!("duplicate reply cache: {} entries", drc_entries);
        let shutdown = tokio_util::sync::CancellationToken::new();
        let trigger = shutdown.clone();
        // SIGHUP re-reads the exports file, as exportfs -r does.
        let hup_observer = observer.clone();
        tokio::spawn(async move {
            let Some(mut hup) = hup else { return };
            while hup.recv().await.is_some() {
                let o = hup_observer.clone();
                let _ = tokio::task::spawn_blocking(move || o.reload_now()).await;
            }
        });
        let (stopping_stats, stopping) = (server.stats(), builder.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            // A head whose clients hold locks hands them over before its CephFS session ends.
            let held = stopping_stats.locks_held();
            if held > 0 && stopping.member.is_some() {
                let b = stopping.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    if let Some(m) = &b.member {
                        let hold_for =
                            std::time::Duration::from_secs_f64(b.args.grace_period.clamp(1.0, 86_400.0));
                        let confirm =
                            std::time::Duration::from_secs_f64(b.args.cluster.cluster_confirm_timeout);
                        m.stop_cleanly(held, hold_for, confirm);
                    }
                })
                .await;
            }
            tracing::info!("shutting down: finishing calls in flight and syncing exports");
            crate::sd_notify::notify_or_log("STOPPING=1\nSTATUS=finishing calls in flight, syncing exports");
            trigger.cancel();
        });
        let stats = server.stats();
        let trace = server.io_trace();
        server.run(shutdown).await?;
        if let Some(pm) = register {
            let port = addrs[0].port();
            if let Err(e) =
                tokio::task::spawn_blocking(move || eagernfs_server::rpcbind::unregister(pm, port, locks))
                    .await?
            {
                tracing::warn!("{e}");
            }
        }
        let summary = stats.summary();
        tracing::info!("calls served:\n{summary}");
        if let Some(path) = &trace_io {
            let mut text = String::new();
            for e in trace.events() {
                text.push_str(&e.to_line());
                text.push('\n');
            }
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(path) = &stats_file {
            std::fs::write(path, &summary).with_context(|| format!("writing {}", path.display()))?;
        }
        anyhow::Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_durable_writes_of_one_file_never_share_a_temporary_and_leave_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clients");
        std::thread::scope(|s| {
            for t in 0..8 {
                let path = &path;
                s.spawn(move || {
                    for i in 0..50 {
                        write_durably(path, format!("{t} {i}\n").as_bytes(), 0o600)
                            .expect("every write succeeds");
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with(" 49\n"), "one writer's last list, whole: {text:?}");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, [std::ffi::OsString::from("clients")], "no temporary left behind");
    }

    #[test]
    fn temporaries_of_gone_processes_are_removed_and_others_kept() {
        let dir = tempfile::tempdir().unwrap();
        let gone = {
            let mut child = std::process::Command::new("true").spawn().unwrap();
            let pid = child.id();
            child.wait().unwrap();
            pid
        };
        let live_other = std::os::unix::process::parent_id();
        let ours = std::process::id();
        for name in [
            format!("clients.{gone}.0.tmp"),
            format!("handle.key.{ours}.3.tmp"),
            "clients.tmp".to_string(),
            format!("epoch.{live_other}.1.tmp"),
            "clients".to_string(),
            "notes.tmp".to_string(),
        ] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        remove_stale_temporaries(dir.path());
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["clients".to_string(), format!("epoch.{live_other}.1.tmp"), "notes.tmp".to_string()]
        );
    }
}
