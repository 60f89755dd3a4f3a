//! sd_notify(3) without libsystemd: one datagram to `$NOTIFY_SOCKET`.
//!
//! Under a `Type=notify` unit, systemd starts the units ordered after ours only once we say
//! `READY=1`, i.e. once clients can really connect (the server is bound and registered, the
//! FUSE mount answers), not when the process merely exists. `STATUS=` is the line `systemctl
//! status` shows; `STOPPING=1` tells systemd a stop we started ourselves (Ctrl-C, unmount) is
//! on purpose. Outside systemd `$NOTIFY_SOCKET` is unset and every call is a no-op.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixDatagram;

/// Send `state` (newline-separated `KEY=value` assignments) to the service manager.
/// `Ok(false)` when there is none to tell.
pub(crate) fn notify(state: &str) -> io::Result<bool> {
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else { return Ok(false) };
    let sock = UnixDatagram::unbound()?;
    match socket.as_bytes() {
        // An abstract socket: systemd's usual choice (`@/org/freedesktop/systemd1/notify`).
        [b'@', name @ ..] => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sock.send_to_addr(state.as_bytes(), &addr)?;
        }
        [b'/', ..] => {
            sock.send_to(state.as_bytes(), &socket)?;
        }
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "NOTIFY_SOCKET={} is neither a path nor an abstract socket",
                    socket.to_string_lossy()
                ),
            ))
        }
    }
    Ok(true)
}

/// [`notify`], logging instead of failing: a service manager that cannot hear us will time
/// the start out and say so itself, and the service works either way.
pub(crate) fn notify_or_log(state: &str) {
    if let Err(e) = notify(state) {
        tracing::warn!("cannot notify the service manager ({state:?}): {e}");
    }
}
