//! librados, loaded when a server joins a cluster of heads (`--node-id`).
//!
//! As with libcephfs ([`crate::cephfs`]), the binary links nothing of Ceph:
//! `librados.so.2` is opened with `dlopen` the first time it is needed, and a
//! machine without it gets [`LoadError`], which names the package. The
//! declarations follow `rados/librados.h` of Ceph 16 (Pacific).

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

use crate::dylib::{dynamic_library, load_once, Loaded};

/// The shared object and the package that ships it (Debian and Ubuntu).
pub const LIBRARY: &str = "librados.so.2";
pub(crate) const PACKAGE: &str = "librados2";

pub(crate) type rados_t = *mut c_void;
pub(crate) type rados_ioctx_t = *mut c_void;
pub(crate) type rados_write_op_t = *mut c_void;

/// `rados_watchcb2_t`: a notification arrived on a watched object.
pub(crate) type WatchCb = unsafe extern "C" fn(
    arg: *mut c_void,
    notify_id: u64,
    handle: u64,
    notifier_id: u64,
    data: *mut c_void,
    data_len: usize,
);
/// `rados_watcherrcb_t`: the watch was lost (the OSD or the connection).
pub(crate) type WatchErrCb = unsafe extern "C" fn(pre: *mut c_void, cookie: u64, err: c_int);

/// `rados_write_op_create`: fail with EEXIST if the object exists.
pub(crate) const CREATE_EXCLUSIVE: c_int = 1;

dynamic_library! {
    /// Every librados function eagernfs calls, resolved once.
    struct Lib, error LoadError;

    fn rados_create(cluster: *mut rados_t, id: *const c_char) -> c_int;
    fn rados_conf_read_file(cluster: rados_t, path: *const c_char) -> c_int;
    fn rados_conf_set(cluster: rados_t, option: *const c_char, value: *const c_char) -> c_int;
    fn rados_connect(cluster: rados_t) -> c_int;
    fn rados_shutdown(cluster: rados_t) -> ();
    fn rados_get_instance_id(cluster: rados_t) -> u64;
    fn rados_getaddrs(cluster: rados_t, addrs: *mut *mut c_char) -> c_int;
    fn rados_blocklist_add(cluster: rados_t, addr: *mut c_char, expire_seconds: u32) -> c_int;
    fn rados_ioctx_create(cluster: rados_t, pool: *const c_char, io: *mut rados_ioctx_t) -> c_int;
    fn rados_ioctx_destroy(io: rados_ioctx_t) -> ();
    fn rados_ioctx_set_namespace(io: rados_ioctx_t, nspace: *const c_char) -> ();
    fn rados_read(io: rados_ioctx_t, oid: *const c_char, buf: *mut c_char, len: usize, off: u64) -> c_int;
    fn rados_get_last_version(io: rados_ioctx_t) -> u64;
    fn rados_create_write_op() -> rados_write_op_t;
    fn rados_release_write_op(op: rados_write_op_t) -> ();
    fn rados_write_op_assert_version(op: rados_write_op_t, ver: u64) -> ();
    fn rados_write_op_create(op: rados_write_op_t, exclusive: c_int, category: *const c_char) -> ();
    fn rados_write_op_write_full(op: rados_write_op_t, buf: *const c_char, len: usize) -> ();
    fn rados_write_op_operate(
        op: rados_write_op_t,
        io: rados_ioctx_t,
        oid: *const c_char,
        mtime: *mut libc::time_t,
        flags: c_int,
    ) -> c_int;
    fn rados_watch3(
        io: rados_ioctx_t,
        oid: *const c_char,
        cookie: *mut u64,
        cb: WatchCb,
        errcb: WatchErrCb,
        timeout: u32,
        arg: *mut c_void,
    ) -> c_int;
    fn rados_unwatch2(io: rados_ioctx_t, cookie: u64) -> c_int;
    fn rados_notify_ack(
        io: rados_ioctx_t,
        oid: *const c_char,
        notify_id: u64,
        cookie: u64,
        buf: *const c_char,
        len: c_int,
    ) -> c_int;
    fn rados_notify2(
        io: rados_ioctx_t,
        oid: *const c_char,
        buf: *const c_char,
        len: c_int,
        timeout_ms: u64,
        reply: *mut *mut c_char,
        reply_len: *mut usize,
    ) -> c_int;
    fn rados_buffer_free(buf: *mut c_char) -> ();
}

/// Why librados could not be used.
#[derive(Clone, Debug, thiserror::Error)]
pub enum LoadError {
    #[error(
        "a cluster of heads (--node-id) keeps its shared state in RADOS and needs librados, which is not \
         installed here ({0}): install the package {PACKAGE} (apt-get install {PACKAGE}), or the librados \
         package of your distribution"
    )]
    Missing(String),
    #[error(
        "the installed {LIBRARY} lacks {0}: eagernfs needs librados from Ceph 16 (Pacific) or later; \
         upgrade the package {PACKAGE}"
    )]
    Symbol(&'static str),
}

/// The library `name`, loaded on first use; the outcome is kept for the
/// life of the process.
pub(crate) fn lib(name: &str) -> Result<&'static Lib, LoadError> {
    static LOADED: Loaded<Lib, LoadError> = OnceLock::new();
    load_once(&LOADED, name, Lib::open)
}
