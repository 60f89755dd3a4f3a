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
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
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
    // Connections drain on their own (see DRAIN_*), but one whose client
    // stops reading replies could hold shutdown for ever: cut those off.
    let drained =
        tokio::time::timeout(DRAIN_MAX * 2, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!("{} connection(s) did not drain in time; closing them", tasks.len());
        tasks.shutdown().await;
    }
}

/// At shutdown, a connection stops once its client has sent nothing for this long…
const DRAIN_IDLE: std::time::Duration = std::time::Duration::from_millis(50);
/// …or after this long in any case.
const DRAIN_MAX: std::time::Duration = std::time::Duration::from_secs(2);

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
    // Each reply travels with its call's permit, which the writer releases
    // only once the reply is written: at most `max_inflight` replies exist,
    // so the channel never fills and a worker never blocks on it.
    let (tx, mut rx) = mpsc::channel::<(BytesMut, OwnedSemaphorePermit)>(max_inflight);
    let conn = Arc::new(dispatch::Connection::new(Peer { addr: peer, local_port }));

    let writer = tokio::spawn(async move {
        let mut batch = BytesMut::new();
        let mut permits = Vec::new();
        while let Some((first, permit)) = rx.recv().await {
            batch.unsplit(first);
            permits.push(permit);
            // Coalesce replies that are already waiting, up to a bound.
            while batch.len() < 256 * 1024 {
                match rx.try_recv() {
                    Ok((more, permit)) => {
                        batch.unsplit(more);
                        permits.push(permit);
                    }
                    Err(_) => break,
                }
            }
            wr.write_all(&batch).await?;
            batch.clear();
            permits.clear();
        }
        wr.shutdown().await
    });

    let mut decoder = RecordDecoder::new(state.config.max_record_bytes);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let result: std::io::Result<()> = async {
        let mut drain_until = None;
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
                // A call that has been read is answered, shutdown or not.
                let permit = inflight.clone().acquire_owned().await.expect("semaphore never closed");
                let state = state.clone();
                let conn = conn.clone();
                let tx = tx.clone();
                tokio::task::spawn_blocking(move || {
                    if let Some(reply) = dispatch::handle_record(&state, &conn, record) {
                        // The receiver is gone only if the connection failed; nothing to do then.
                        let _ = tx.blocking_send((reply, permit));
                    }
                });
            }
            if buf.capacity() - buf.len() < 4096 {
                buf.reserve(64 * 1024);
            }
            let n = match drain_until {
                // Shutting down: keep taking what the client already sent
                // until it has been quiet for a moment, never for long.
                Some(deadline) => {
                    let idle = tokio::time::sleep(DRAIN_IDLE);
                    tokio::select! {
                        _ = idle => return Ok(()),
                        _ = tokio::time::sleep_until(deadline) => return Ok(()),
                        n = rd.read_buf(&mut buf) => n?,
                    }
                }
                None => tokio::select! {
                    _ = shutdown.cancelled() => {
                        drain_until = Some(tokio::time::Instant::now() + DRAIN_MAX);
                        continue;
                    }
                    n = rd.read_buf(&mut buf) => n?,
                },
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
