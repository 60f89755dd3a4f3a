//! Watching and steering a running server: its control socket (`eagernfs
//! stat`, `eagernfs reload`), Prometheus `/metrics`, the status page.
//!
//! # Layout
//! - `control`: the Unix control socket (server side and client side).
//! - `http`: the `--metrics` listener: `/metrics`, `/api/stats`, `/`.
//! - `mount`: a mount daemon's statistics (mountstats-like).
//! - `prom`: the Prometheus text exposition of the server's statistics.
//! - `stat`: `eagernfs stat`'s reports (nfsstat- and mountstats-like).
//! - `status.html`: the status page (no external assets).

pub(crate) mod control;
pub(crate) mod http;
pub(crate) mod mount;
pub(crate) mod prom;
pub(crate) mod stat;

use eagernfs_server::{ServerHandle, Stats};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a server with state directory `state_dir` listens for control
/// commands (each server its own, so several can run on one host).
pub(crate) fn control_socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join("control.sock")
}

/// The state directory when none is given: `/var/lib/eagernfs` for root,
/// the XDG state directory otherwise.
pub(crate) fn default_state_dir() -> PathBuf {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/var/lib/eagernfs");
    }
    match std::env::var_os("XDG_STATE_HOME") {
        Some(d) => PathBuf::from(d).join("eagernfs"),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| ".".into()))
            .join(".local/state/eagernfs"),
    }
}

/// An export's intent journal (`--journal`) as `eagernfs stat --json` shows it.
fn journal_json(j: &eagernfs_vfs::journal::JournalStats) -> serde_json::Value {
    serde_json::json!({
        "records": j.records,
        "bytes": j.bytes,
        "log_writes": j.groups,
        "space_waits": j.space_waits,
        "checkpoints": j.checkpoints,
        "used_bytes": j.used_bytes,
        "size_bytes": j.size_bytes,
    })
}

/// Re-reads the exports: returns a sentence saying what changed, or why
/// nothing did.
pub(crate) type Reload = Box<dyn Fn() -> anyhow::Result<String> + Send + Sync>;

/// What a running server shows and does through its control socket and
/// `--metrics` listener.
pub(crate) struct ServerObserver {
    pub(crate) stats: Arc<Stats>,
    pub(crate) handle: ServerHandle,
    pub(crate) listen: Vec<SocketAddr>,
    pub(crate) reload: Reload,
    /// This server's part in a cluster of heads (`--node-id`).
    pub(crate) cluster: Option<Arc<eagernfs_server::cluster::Head>>,
}

impl ServerObserver {
    fn json(&self) -> serde_json::Value {
        let exports: Vec<serde_json::Value> = self
            .handle
            .exports()
            .iter()
            .map(|e| {
                let clients: Vec<String> = e.access.clients.iter().map(|c| c.matcher.to_string()).collect();
                serde_json::json!({
                    "path": e.mount_paths[0].display().to_string(),
                    "clients": clients.join(" "),
                    "journal": e.backend.journal_stats().map(|j| journal_json(&j)),
                })
            })
            .collect();
        serde_json::json!({
            "stats": self.stats.snapshot(),
            "exports": exports,
            "listen": self.listen.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "latency_bounds_s": eagernfs_server::stats::PROM_BOUNDS_S,
            "cluster": self.cluster.as_deref().map(crate::cluster::status_json),
        })
    }

    /// Run a reload and say how it went, logging it too.
    pub(crate) fn reload_now(&self) -> serde_json::Value {
        match (self.reload)() {
            Ok(msg) => {
                tracing::info!("reload: {msg}");
                serde_json::json!({ "ok": true, "message": msg })
            }
            Err(e) => {
                let msg = format!("{e:#}");
                tracing::error!("reload refused, the previous exports stay in force: {msg}");
                serde_json::json!({ "ok": false, "error": msg })
            }
        }
    }
}

impl control::Responder for ServerObserver {
    fn respond(&self, command: &str) -> serde_json::Value {
        match command {
            "stats" => self.json(),
            "reload" => self.reload_now(),
            other => {
                serde_json::json!({ "ok": false, "error": format!("unknown command {other:?} (stats, reload)") })
            }
        }
    }
}

impl http::Source for ServerObserver {
    fn json(&self) -> serde_json::Value {
        ServerObserver::json(self)
    }

    fn prometheus(&self) -> String {
        let journals: Vec<(String, eagernfs_vfs::journal::JournalStats)> = self
            .handle
            .exports()
            .iter()
            .filter_map(|e| Some((e.mount_paths[0].display().to_string(), e.backend.journal_stats()?)))
            .collect();
        let mut text = prom::render_server(&self.stats.snapshot());
        text.push_str(&prom::render_journals(&journals));
        text
    }
}
