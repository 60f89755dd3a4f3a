//! The HTTP listener of `--metrics ADDR`: Prometheus `/metrics`, the JSON
//! `/api/stats`, and the status page at `/`.
//!
//! It serves statistics only (nothing on it changes the server), and binds
//! loopback unless told otherwise: a bare port means `127.0.0.1:PORT`.

use anyhow::{Context, Result};
use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;

/// What the listener shows.
pub(crate) trait Source: Send + Sync + 'static {
    /// The statistics as JSON (what the status page polls).
    fn json(&self) -> serde_json::Value;
    /// The Prometheus exposition.
    fn prometheus(&self) -> String;
}

/// `9587` → 127.0.0.1:9587; `HOST:PORT` as given.
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().with_context(|| format!("--metrics {s}: expected PORT or ADDRESS:PORT (e.g. 127.0.0.1:9587)"))
}

const STATUS_PAGE: &str = include_str!("status.html");

/// Start serving on `addr`; returns the address bound (port 0 resolved).
pub(crate) async fn serve(addr: SocketAddr, source: Arc<dyn Source>) -> Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} for --metrics"))?;
    let bound = listener.local_addr()?;
    let (s1, s2) = (source.clone(), source);
    let app = Router::new()
        .route("/", get(|| async { Html(STATUS_PAGE) }))
        .route(
            "/metrics",
            get(move || {
                let s = s1.clone();
                async move {
                    let text = tokio::task::spawn_blocking(move || s.prometheus()).await.unwrap_or_default();
                    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text)
                        .into_response()
                }
            }),
        )
        .route(
            "/api/stats",
            get(move || {
                let s = s2.clone();
                async move {
                    let v = tokio::task::spawn_blocking(move || s.json()).await.unwrap_or_default();
                    ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
                }
            }),
        );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("metrics listener stopped: {e}");
        }
    });
    Ok(bound)
}
