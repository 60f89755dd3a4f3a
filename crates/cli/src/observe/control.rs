//! The local control socket of a running server or mount daemon.
//!
//! A Unix socket (mode 0600: only its owner, root for a system service, may
//! use it) that takes one command per connection, a line (`stats`,
//! `reload`), and answers with one JSON document, then closes. `eagernfs
//! stat` and `eagernfs reload` are its clients.

use anyhow::{bail, Context, Result};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// What a control socket answers.
pub(crate) trait Responder: Send + Sync + 'static {
    /// The answer to `command` (without its newline), as JSON.
    fn respond(&self, command: &str) -> serde_json::Value;
}

/// Longest command line accepted (they are single words).
const COMMAND_BYTES_MAX: usize = 256;
/// A client that connects and says nothing is dropped after this.
const COMMAND_WAIT: Duration = Duration::from_secs(5);

/// Listen on `path` (replacing a stale socket; refusing if another process
/// answers there) and answer commands with `responder` until the runtime
/// ends. The socket is removed when the returned guard is dropped.
pub(crate) fn serve(path: &Path, responder: Arc<dyn Responder>) -> Result<SocketGuard> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            bail!(
                "{} is in use by another running eagernfs (give this one --state-dir or --control of its own)",
                path.display()
            );
        }
        // Left by a process that died: ours now.
        let _ = std::fs::remove_file(path);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let listener = UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("restricting {}", path.display()))?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let responder = responder.clone();
            tokio::spawn(async move {
                if let Err(e) = answer(stream, responder).await {
                    tracing::debug!("control socket: {e}");
                }
            });
        }
    });
    Ok(SocketGuard(path.to_path_buf()))
}

async fn answer(stream: UnixStream, responder: Arc<dyn Responder>) -> Result<()> {
    let (rd, mut wr) = stream.into_split();
    let mut line = String::new();
    let mut rd = BufReader::new(rd).take(COMMAND_BYTES_MAX as u64);
    tokio::time::timeout(COMMAND_WAIT, rd.read_line(&mut line)).await.context("no command")??;
    let command = line.trim().to_string();
    // Statistics are gathered from locks the service threads take: answer
    // off the runtime's threads.
    let reply = tokio::task::spawn_blocking(move || responder.respond(&command)).await?;
    let mut text = serde_json::to_vec(&reply)?;
    text.push(b'\n');
    wr.write_all(&text).await?;
    wr.shutdown().await?;
    Ok(())
}

/// Removes the socket file when dropped (a clean exit leaves nothing).
pub(crate) struct SocketGuard(PathBuf);

impl Drop for SocketGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Send `command` to the control socket at `path`; the JSON answer.
pub(crate) fn request(path: &Path, command: &str) -> Result<serde_json::Value> {
    request_waiting(path, command, Duration::from_secs(30))
}

/// [`request`], waiting up to `wait` for the answer (a command that writes back).
pub(crate) fn request_waiting(path: &Path, command: &str, wait: Duration) -> Result<serde_json::Value> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(path).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::NotFound => " (is the server running? give its --state-dir)",
            std::io::ErrorKind::PermissionDenied => " (the control socket is its owner's only: run as root)",
            std::io::ErrorKind::ConnectionRefused => " (nothing answers: the server has exited)",
            _ => "",
        };
        anyhow::anyhow!("cannot reach {}: {e}{hint}", path.display())
    })?;
    s.set_read_timeout(Some(wait))?;
    s.write_all(format!("{command}\n").as_bytes())?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    serde_json::from_str(&text).with_context(|| format!("bad answer from {}", path.display()))
}
