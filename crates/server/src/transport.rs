//! TCP transport: accept connections, frame records, run calls concurrently.
//!
//! Each connection has a reader task and a writer task. The reader
//! reassembles records and hands each call to the blocking worker pool
//! (backends do disk I/O); at most `max_requests_per_connection` calls of one
//! connection are in flight, so a client cannot queue unbounded work. Replies
//! go out in completion order, not arrival order, as RPC allows. The writer
//! batches whatever replies are ready into one `write` to cut syscalls.
//!
//! Shutdown: a [`CancellationToken`] stops the accept loops and the readers;
//! calls already running finish and their replies are written before the
//! connection closes.

use crate::dispatch::{self, Peer};
use crate::ServerState;
use bytes::BytesMut;
use eagernfs_rpc::RecordDecoder;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Accept connections on `listener` until `shutdown` fires, then wait for
/// every connection to drain.
pub(crate) async fn serve_tcp(state: Arc<ServerState>, listener: TcpListener, shutdown: CancellationToken) {
    let connections = Arc::new(Semaphore::new(state.config.max_connections));
    let mut tasks = JoinSet::new();
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            p = connections.clone().acquire_owned() => p.expect("semaphore never closed"),
        };
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and friends: log and keep serving the connections we have.
                    tracing::warn!("accept failed: {e}");
                    tokio::task::yield_now().await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let shutdown = shutdown.clone();
        tasks.spawn(async move {
            if let Err(e) = serve_connection(state, stream, peer, shutdown).await {
                tracing::debug!(%peer, "connection ended: {e}");
            }
            drop(permit);
        });
        // Reap finished connections so the set does not grow without bound.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
}

async fn serve_connection(
    state: Arc<ServerState>,
    stream: TcpStream,
    peer: SocketAddr,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let local_port = stream.local_addr()?.port();
    let (mut rd, mut wr) = stream.into_split();
    let max_inflight = state.config.max_requests_per_connection;
    let inflight = Arc::new(Semaphore::new(max_inflight));
    // The channel holds at most one reply per in-flight call, so it never blocks a worker.
    let (tx, mut rx) = mpsc::channel::<BytesMut>(max_inflight);
    let conn = Arc::new(dispatch::Connection::new(Peer { addr: peer, local_port }));

    let writer = tokio::spawn(async move {
        let mut batch = BytesMut::new();
        while let Some(first) = rx.recv().await {
            batch.unsplit(first);
            // Coalesce replies that are already waiting, up to a bound.
            while batch.len() < 256 * 1024 {
                match rx.try_recv() {
                    Ok(more) => batch.unsplit(more),
                    Err(_) => break,
                }
            }
            wr.write_all(&batch).await?;
            batch.clear();
        }
        wr.shutdown().await
    });

    let mut decoder = RecordDecoder::new(state.config.max_record_bytes);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let result: std::io::Result<()> = async {
        loop {
            // Drain every complete record already buffered before reading more.
            loop {
                let record = match decoder.decode(&mut buf) {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(%peer, "closing connection: {e}");
                        return Ok(());
                    }
                };
                let permit = tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    p = inflight.clone().acquire_owned() => p.expect("semaphore never closed"),
                };
                let state = state.clone();
                let conn = conn.clone();
                let tx = tx.clone();
                tokio::task::spawn_blocking(move || {
                    if let Some(reply) = dispatch::handle_record(&state, &conn, record) {
                        // The receiver is gone only if the connection failed; nothing to do then.
                        let _ = tx.blocking_send(reply);
                    }
                    drop(permit);
                });
            }
            if buf.capacity() - buf.len() < 4096 {
                buf.reserve(64 * 1024);
            }
            let n = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                n = rd.read_buf(&mut buf) => n?,
            };
            if n == 0 {
                return Ok(());
            }
        }
    }
    .await;
    // Wait for the calls still running (they hold permits), then let the writer finish.
    let _all = inflight.acquire_many(max_inflight as u32).await;
    drop(tx);
    writer.await.map_err(std::io::Error::other)??;
    result
}
