//! A few objects in a RADOS pool, read and written whole: the state the heads
//! of one cluster share (`--node-id`; see the server's `cluster` module).
//!
//! librados is loaded at run time ([`ffi`](self::ffi)), like libcephfs: the
//! binary needs no Ceph library unless a cluster is asked for. Every
//! operation is bounded (`rados_osd_op_timeout`, `rados_mon_op_timeout`).
//!
//! What the state needs and nothing more:
//! - [`Rados::read`]: an object's bytes and its version;
//! - [`Rados::write`]: replace an object only if it is still at the version
//!   read, or only if it does not exist yet ([`Expect`]): two heads updating
//!   one object never lose each other's change (the loser re-reads);
//! - [`Rados::watch`] / [`Rados::notify`]: tell the other heads an object
//!   changed, without polling, and learn which of them answered (are up);
//! - [`Rados::blocklist`]: fence a client.

mod ffi;

pub use ffi::{LoadError, LIBRARY};

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Arc;
use std::time::Duration;

/// Whether librados `library` loads here (and has every function used).
pub fn available(library: &str) -> Result<(), LoadError> {
    ffi::lib(library).map(drop)
}

/// A pointer librados hands out; its objects are used from any thread.
#[derive(Clone, Copy, Debug)]
struct Ptr(*mut c_void);
// SAFETY: librados handles are thread-safe (its API is made for that).
unsafe impl Send for Ptr {}
// SAFETY: as above.
unsafe impl Sync for Ptr {}

/// Where the shared objects live.
#[derive(Clone, Debug)]
pub struct RadosSpec {
    /// The librados shared object (a file name on the library path, or a path).
    pub library: String,
    /// The cluster's `ceph.conf`.
    pub conf: std::path::PathBuf,
    /// The cephx client id (`admin` for `client.admin`).
    pub client_id: String,
    /// The pool, and the namespace in it.
    pub pool: String,
    pub namespace: String,
    /// How long connecting and each operation may take.
    pub timeout: Duration,
}

/// Why an operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RadosError {
    #[error(transparent)]
    Library(#[from] LoadError),
    #[error("RADOS: {what}: {errno}{hint}")]
    Failed { what: String, errno: std::io::Error, hint: &'static str },
    /// The object changed since it was read (or exists, or is gone): read it again.
    #[error("RADOS: {0} changed meanwhile")]
    Conflict(String),
}

impl RadosError {
    fn failed(what: impl Into<String>, r: c_int) -> Self {
        let hint = match -r {
            libc::ENOENT => " (no such pool? create it: `ceph osd pool create POOL`, or give --cluster-pool)",
            libc::EACCES | libc::EPERM => " (the client's caps do not allow it: it needs `mon 'allow r'` and `osd 'allow rw pool=POOL'`)",
            libc::ETIMEDOUT => " (the cluster did not answer in time)",
            _ => "",
        };
        RadosError::Failed { what: what.into(), errno: std::io::Error::from_raw_os_error(-r), hint }
    }

    /// The errno, when the cluster answered with one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            RadosError::Failed { errno, .. } => errno.raw_os_error(),
            _ => None,
        }
    }
}

/// An object's bytes and the version they are at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    pub data: Vec<u8>,
    pub version: u64,
}

/// The condition a write needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// The object does not exist (it is created).
    Absent,
    /// The object is at this version (what [`Rados::read`] returned).
    Version(u64),
}

/// Seconds the OSD keeps a watch whose client stopped answering (a dead
/// head's watch goes after this; notifies wait for it until then).
const WATCH_TIMEOUT_S: u32 = 10;

/// Largest object read (the shared objects are a few KiB).
const OBJECT_BYTES_MAX: usize = 4 << 20;

/// What a watch reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchEvent {
    /// Someone notified: the object changed.
    Notified,
    /// The watch is gone (connection or OSD trouble): re-read, watch again.
    Lost(i32),
}

/// A connection to the cluster and one pool/namespace in it.
pub struct Rados {
    lib: &'static ffi::Lib,
    cluster: Ptr,
    io: Ptr,
    /// Read-then-`rados_get_last_version` must not interleave with another
    /// operation of this context.
    io_lock: parking_lot::Mutex<()>,
}

fn cstr(what: &str, s: &str) -> Result<CString, RadosError> {
    CString::new(s).map_err(|_| RadosError::failed(format!("{what} {s:?} holds a NUL byte"), -libc::EINVAL))
}

impl Rados {
    /// Connect (bounded by `spec.timeout`) and open the pool's namespace.
    pub fn connect(spec: &RadosSpec) -> Result<Rados, RadosError> {
        let lib = ffi::lib(&spec.library)?;
        let id = cstr("client id", &spec.client_id)?;
        let mut cluster = std::ptr::null_mut();
        // SAFETY: a valid out-pointer and a NUL-terminated id.
        let r = unsafe { (lib.rados_create)(&mut cluster, id.as_ptr()) };
        if r < 0 {
            return Err(RadosError::failed("rados_create", r));
        }
        // Released on every path from here (Drop), the ioctx too once made.
        let mut me =
            Rados { lib, cluster: Ptr(cluster), io: Ptr(std::ptr::null_mut()), io_lock: Default::default() };
        let conf = CString::new(spec.conf.as_os_str().as_encoded_bytes())
            .map_err(|_| RadosError::failed("conf path", -libc::EINVAL))?;
        // SAFETY: a live handle and a NUL-terminated path.
        let r = unsafe { (lib.rados_conf_read_file)(cluster, conf.as_ptr()) };
        if r < 0 {
            return Err(RadosError::failed(format!("reading {}", spec.conf.display()), r));
        }
        let secs = spec.timeout.as_secs().max(1).to_string();
        for (name, value) in [
            ("client_mount_timeout", secs.as_str()),
            ("rados_mon_op_timeout", secs.as_str()),
            ("rados_osd_op_timeout", secs.as_str()),
            // Quiet: the server logs what matters itself.
            ("log_to_stderr", "false"),
            ("err_to_stderr", "false"),
            // Several heads (and tools) run as one client name on a machine.
            ("admin_socket", ""),
        ] {
            let (n, v) = (cstr("option", name)?, cstr("value", value)?);
            // SAFETY: a live handle and NUL-terminated strings.
            let r = unsafe { (lib.rados_conf_set)(cluster, n.as_ptr(), v.as_ptr()) };
            if r < 0 {
                return Err(RadosError::failed(format!("setting {name}"), r));
            }
        }
        // SAFETY: a configured handle.
        let r = unsafe { (lib.rados_connect)(cluster) };
        if r < 0 {
            return Err(RadosError::failed(
                format!("connecting to the cluster of {}", spec.conf.display()),
                r,
            ));
        }
        let pool = cstr("pool", &spec.pool)?;
        let mut io = std::ptr::null_mut();
        // SAFETY: a connected handle, a NUL-terminated name, a valid out-pointer.
        let r = unsafe { (lib.rados_ioctx_create)(cluster, pool.as_ptr(), &mut io) };
        if r < 0 {
            return Err(RadosError::failed(format!("opening pool {:?}", spec.pool), r));
        }
        me.io = Ptr(io);
        let ns = cstr("namespace", &spec.namespace)?;
        // SAFETY: a live ioctx; librados copies the name.
        unsafe { (lib.rados_ioctx_set_namespace)(io, ns.as_ptr()) };
        Ok(me)
    }

    /// This client's id in the cluster (`client.N`: what notify replies name).
    pub fn instance_id(&self) -> u64 {
        // SAFETY: a connected handle.
        unsafe { (self.lib.rados_get_instance_id)(self.cluster.0) }
    }

    /// This client's network address, as `ceph osd blocklist` takes it.
    pub fn addrs(&self) -> Result<String, RadosError> {
        let mut out: *mut c_char = std::ptr::null_mut();
        // SAFETY: a connected handle and a valid out-pointer.
        let r = unsafe { (self.lib.rados_getaddrs)(self.cluster.0, &mut out) };
        if r < 0 || out.is_null() {
            return Err(RadosError::failed("rados_getaddrs", r.min(-libc::EIO)));
        }
        // SAFETY: a NUL-terminated string librados allocated with malloc.
        let s = unsafe { CStr::from_ptr(out) }.to_string_lossy().into_owned();
        // SAFETY: allocated by librados with malloc, freed once.
        unsafe { libc::free(out.cast()) };
        Ok(s)
    }

    /// Fence the client at `addr` (as `rados_getaddrs` gave it) for `expire`.
    pub fn blocklist(&self, addr: &str, expire: Duration) -> Result<(), RadosError> {
        let a = cstr("address", addr)?;
        // SAFETY: librados only reads the string (the pointer is not const in its header).
        let r = unsafe {
            (self.lib.rados_blocklist_add)(self.cluster.0, a.as_ptr().cast_mut(), expire.as_secs() as u32)
        };
        if r < 0 {
            return Err(RadosError::failed(format!("blocklisting {addr}"), r));
        }
        Ok(())
    }

    /// The object's bytes and version, or `None` if it does not exist.
    pub fn read(&self, oid: &str) -> Result<Option<Versioned>, RadosError> {
        let o = cstr("object", oid)?;
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let _g = self.io_lock.lock();
            // SAFETY: a live ioctx, a NUL-terminated name and a buffer of `len` bytes.
            let r = unsafe {
                (self.lib.rados_read)(self.io.0, o.as_ptr(), buf.as_mut_ptr().cast(), buf.len(), 0)
            };
            if r == -libc::ENOENT {
                return Ok(None);
            }
            if r < 0 {
                return Err(RadosError::failed(format!("reading {oid}"), r));
            }
            let n = r as usize;
            if n == buf.len() {
                // Perhaps more: read again with room to tell.
                if buf.len() >= OBJECT_BYTES_MAX {
                    return Err(RadosError::failed(
                        format!("{oid} is larger than {OBJECT_BYTES_MAX} bytes"),
                        -libc::EFBIG,
                    ));
                }
                buf.resize(buf.len() * 4, 0);
                continue;
            }
            // SAFETY: a live ioctx; the last operation on it was this read (io_lock).
            let version = unsafe { (self.lib.rados_get_last_version)(self.io.0) };
            buf.truncate(n);
            return Ok(Some(Versioned { data: buf, version }));
        }
    }

    /// Replace the object's bytes with `data` if `expect` holds, else [`RadosError::Conflict`].
    pub fn write(&self, oid: &str, data: &[u8], expect: Expect) -> Result<(), RadosError> {
        let o = cstr("object", oid)?;
        let _g = self.io_lock.lock();
        // SAFETY: a new operation, released below on every path.
        let op = unsafe { (self.lib.rados_create_write_op)() };
        if op.is_null() {
            return Err(RadosError::failed("rados_create_write_op", -libc::ENOMEM));
        }
        // SAFETY: `op` is live; `data` outlives the operate call, which copies nothing later.
        let r = unsafe {
            match expect {
                Expect::Absent => {
                    (self.lib.rados_write_op_create)(op, ffi::CREATE_EXCLUSIVE, std::ptr::null())
                }
                Expect::Version(v) => (self.lib.rados_write_op_assert_version)(op, v),
            }
            (self.lib.rados_write_op_write_full)(op, data.as_ptr().cast(), data.len());
            let r = (self.lib.rados_write_op_operate)(op, self.io.0, o.as_ptr(), std::ptr::null_mut(), 0);
            (self.lib.rados_release_write_op)(op);
            r
        };
        match -r {
            0 => Ok(()),
            // EEXIST: created by another; ERANGE/EOVERFLOW: another version; ENOENT: removed.
            libc::EEXIST | libc::ERANGE | libc::EOVERFLOW | libc::ENOENT => {
                Err(RadosError::Conflict(oid.into()))
            }
            _ => Err(RadosError::failed(format!("writing {oid}"), r)),
        }
    }

    /// Tell the watchers of `oid` it changed, waiting at most `timeout` for
    /// their acknowledgements: the client ids that acknowledged (watchers
    /// that did not answer in time are not an error here; a dead client's
    /// watch lingers until the OSD's watch timeout).
    pub fn notify(&self, oid: &str, timeout: Duration) -> Result<Vec<u64>, RadosError> {
        let o = cstr("object", oid)?;
        let (mut reply, mut len): (*mut c_char, usize) = (std::ptr::null_mut(), 0);
        let ms = notify_timeout_ms(timeout);
        // SAFETY: a live ioctx, valid out-pointers; the reply is freed below.
        let r = unsafe {
            (self.lib.rados_notify2)(self.io.0, o.as_ptr(), std::ptr::null(), 0, ms, &mut reply, &mut len)
        };
        let acked = if reply.is_null() {
            Vec::new()
        } else {
            // SAFETY: `len` bytes librados allocated for us, copied before they are freed.
            let bytes = unsafe { std::slice::from_raw_parts(reply as *const u8, len) }.to_vec();
            // SAFETY: as above.
            unsafe { (self.lib.rados_buffer_free)(reply) };
            notify_acks(&bytes).unwrap_or_default()
        };
        match -r {
            0 | libc::ETIMEDOUT => Ok(acked),
            _ => Err(RadosError::failed(format!("notifying the watchers of {oid}"), r)),
        }
    }

    /// Watch `oid`: `on_event` runs (on a librados thread; keep it short) for
    /// each notification and when the watch is lost. Notifications are
    /// acknowledged after `on_event` returns.
    pub fn watch(
        self: &Arc<Self>,
        oid: &str,
        on_event: Box<dyn Fn(WatchEvent) + Send + Sync>,
    ) -> Result<Watch, RadosError> {
        let o = cstr("object", oid)?;
        // Lives as long as the process: librados may call it until unwatch
        // returns, and a watch is made once per server.
        let ctx: &'static WatchCtx = Box::leak(Box::new(WatchCtx {
            rados: Arc::downgrade(self),
            oid: o.clone(),
            cookie: std::sync::atomic::AtomicU64::new(0),
            on_event,
        }));
        let mut cookie = 0u64;
        // SAFETY: a live ioctx; `ctx` is 'static; the callbacks match the C types.
        let r = unsafe {
            (self.lib.rados_watch3)(
                self.io.0,
                o.as_ptr(),
                &mut cookie,
                watch_cb,
                watch_err_cb,
                WATCH_TIMEOUT_S,
                ctx as *const WatchCtx as *mut c_void,
            )
        };
        if r < 0 {
            return Err(RadosError::failed(format!("watching {oid}"), r));
        }
        ctx.cookie.store(cookie, std::sync::atomic::Ordering::Release);
        Ok(Watch { rados: self.clone(), cookie })
    }
}

impl Drop for Rados {
    fn drop(&mut self) {
        // SAFETY: ours, released once; no operation is running (we are the last owner).
        unsafe {
            if !self.io.0.is_null() {
                (self.lib.rados_ioctx_destroy)(self.io.0);
            }
            (self.lib.rados_shutdown)(self.cluster.0);
        }
    }
}

/// The timeout librados is given for a notify: whole seconds, at least one.
/// librados passes `ms / 1000` to the OSD, and 0 there means the OSD's default
/// (30 s): a notify asked to wait half a second would wait thirty.
fn notify_timeout_ms(timeout: Duration) -> u64 {
    let secs = timeout.as_millis().div_ceil(1000).clamp(1, u32::MAX as u128) as u64;
    secs * 1000
}

/// The client ids in a notify reply: a map of acknowledgements, (client id,
/// watch cookie) to the ack's bytes, then the set of (id, cookie) that timed
/// out; little-endian, counts as u32, byte strings as u32 length + bytes.
fn notify_acks(b: &[u8]) -> Option<Vec<u64>> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Option<&[u8]> {
        let s = b.get(at..at.checked_add(n)?)?;
        at += n;
        Some(s)
    };
    let count = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
    let mut ids = Vec::new();
    for _ in 0..count.min(1 << 16) {
        let id = u64::from_le_bytes(take(8)?.try_into().ok()?);
        take(8)?;
        let len = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
        take(len)?;
        ids.push(id);
    }
    Some(ids)
}

struct WatchCtx {
    rados: std::sync::Weak<Rados>,
    oid: CString,
    cookie: std::sync::atomic::AtomicU64,
    on_event: Box<dyn Fn(WatchEvent) + Send + Sync>,
}

unsafe extern "C" fn watch_cb(
    arg: *mut c_void,
    notify_id: u64,
    handle: u64,
    _notifier: u64,
    _data: *mut c_void,
    _len: usize,
) {
    // SAFETY: `arg` is the leaked, 'static WatchCtx given to rados_watch3.
    let ctx = unsafe { &*(arg as *const WatchCtx) };
    (ctx.on_event)(WatchEvent::Notified);
    if let Some(r) = ctx.rados.upgrade() {
        // SAFETY: a live ioctx and the watch's own ids.
        unsafe { (r.lib.rados_notify_ack)(r.io.0, ctx.oid.as_ptr(), notify_id, handle, std::ptr::null(), 0) };
    }
}

unsafe extern "C" fn watch_err_cb(arg: *mut c_void, _cookie: u64, err: c_int) {
    // SAFETY: as in `watch_cb`.
    let ctx = unsafe { &*(arg as *const WatchCtx) };
    (ctx.on_event)(WatchEvent::Lost(-err));
}

/// A watch; ended when dropped.
pub struct Watch {
    rados: Arc<Rados>,
    cookie: u64,
}

impl Drop for Watch {
    fn drop(&mut self) {
        // SAFETY: a live ioctx and the cookie rados_watch3 gave.
        unsafe { (self.rados.lib.rados_unwatch2)(self.rados.io.0, self.cookie) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_replies_name_who_acknowledged() {
        let mut b = Vec::new();
        b.extend_from_slice(&2u32.to_le_bytes());
        for (id, ack) in [(4100u64, &b""[..]), (4200, &b"hi"[..])] {
            b.extend_from_slice(&id.to_le_bytes());
            b.extend_from_slice(&7u64.to_le_bytes());
            b.extend_from_slice(&(ack.len() as u32).to_le_bytes());
            b.extend_from_slice(ack);
        }
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&4300u64.to_le_bytes());
        b.extend_from_slice(&9u64.to_le_bytes());
        assert_eq!(notify_acks(&b), Some(vec![4100, 4200]));
        assert_eq!(notify_acks(&b[..30]), None, "cut short");
        assert_eq!(notify_acks(&[]), None);
    }

    #[test]
    fn a_notify_waits_whole_seconds_never_the_osds_default() {
        assert_eq!(notify_timeout_ms(Duration::from_millis(1)), 1000);
        assert_eq!(notify_timeout_ms(Duration::from_millis(500)), 1000);
        assert_eq!(notify_timeout_ms(Duration::ZERO), 1000);
        assert_eq!(notify_timeout_ms(Duration::from_secs(1)), 1000);
        assert_eq!(notify_timeout_ms(Duration::from_millis(1001)), 2000);
        assert_eq!(notify_timeout_ms(Duration::from_secs(10)), 10_000);
    }

    #[test]
    fn a_missing_library_names_the_package() {
        let spec = RadosSpec {
            library: "libnot-rados-eagernfs.so.9".into(),
            conf: "/nonexistent/ceph.conf".into(),
            client_id: "admin".into(),
            pool: ".nfs".into(),
            namespace: "eagernfs".into(),
            timeout: Duration::from_secs(1),
        };
        let e = Rados::connect(&spec).err().expect("no such library");
        let text = e.to_string();
        assert!(text.contains("apt-get install librados2"), "{text}");
    }
}
