//! The client's side of NLM callbacks: a small RPC service that takes the
//! server's GRANTED call (a request it queued was granted), so a waiting
//! `F_SETLKW` asks again at once instead of at its next poll.
//!
//! A server finds a client's lock manager through the portmapper on the
//! client's host, where one program number has one port: the first mount on
//! a host that finds NLM unregistered (or registered to a port nobody answers
//! on) registers its service, and later mounts on the host rely on polling
//! alone, as they would behind any other host lock manager. The registration
//! is removed when the mount stops, if it is still ours.

use crate::driver::RpcClient;
use crate::mount::side_client;
use crate::ops::{Cred, NfsError, NfsResult};
use crate::options::MountOptions;
use bytes::BytesMut;
use eagernfs_proto::nlm::{proc4, Nlm4Res, Nlm4Stats, Nlm4TestArgs, NLM_PROGRAM, NLM_V4};
use eagernfs_proto::portmap::{
    Mapping, IPPROTO_TCP, PMAPPROC_GETPORT, PMAPPROC_SET, PMAPPROC_UNSET, PMAP_PROGRAM, PMAP_V2,
};
use eagernfs_rpc::record::{begin_record, finish_record};
use eagernfs_rpc::{AcceptStat, Message, RecordDecoder, ReplyHeader};
use eagernfs_xdr::{Decode, Encode};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

/// Largest callback record read (a GRANTED call is well under 4 KiB).
const RECORD_MAX: usize = 64 * 1024;

/// The running callback service.
pub(crate) struct Callbacks {
    pub(crate) port: u16,
    /// Where we registered (to unregister), if we did.
    registered: parking_lot::Mutex<Option<SocketAddr>>,
    options: MountOptions,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Callbacks {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Listen on `ip`, answer GRANTED calls by waking `news`, and count them in `received`.
pub(crate) async fn start(
    ip: IpAddr,
    news: Arc<Notify>,
    received: Arc<AtomicU64>,
    options: &MountOptions,
) -> std::io::Result<Callbacks> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(ip, 0)).await?;
    let port = listener.local_addr()?.port();
    let task = tokio::spawn(async move {
        loop {
            let Ok((conn, _)) = listener.accept().await else { continue };
            tokio::spawn(serve(conn, news.clone(), received.clone()));
        }
    });
    Ok(Callbacks { port, registered: parking_lot::Mutex::new(None), options: options.clone(), task })
}

async fn serve(mut conn: tokio::net::TcpStream, news: Arc<Notify>, received: Arc<AtomicU64>) {
    let mut dec = RecordDecoder::new(RECORD_MAX);
    let mut buf = BytesMut::with_capacity(4096);
    loop {
        let record = match dec.decode(&mut buf) {
            Ok(Some(r)) => r,
            Ok(None) => {
                let mut chunk = [0u8; 4096];
                match tokio::time::timeout(Duration::from_secs(60), conn.read(&mut chunk)).await {
                    Ok(Ok(n)) if n > 0 => {
                        buf.extend_from_slice(&chunk[..n]);
                        continue;
                    }
                    _ => return,
                }
            }
            Err(_) => return,
        };
        let mut body = record;
        let Ok(Message::Call(call)) = Message::decode(&mut body) else { return };
        let mut out = BytesMut::with_capacity(128);
        let at = begin_record(&mut out);
        if call.prog != NLM_PROGRAM {
            ReplyHeader::accepted_error(call.xid, AcceptStat::ProgUnavail).encode(&mut out);
        } else if call.vers != NLM_V4 {
            ReplyHeader::accepted_error(call.xid, AcceptStat::ProgMismatch { low: NLM_V4, high: NLM_V4 })
                .encode(&mut out);
        } else {
            match call.proc_ {
                proc4::NULL => ReplyHeader::success(call.xid).encode(&mut out),
                proc4::GRANTED => match Nlm4TestArgs::decode(&mut body) {
                    Ok(args) => {
                        received.fetch_add(1, Ordering::Relaxed);
                        news.notify_waiters();
                        ReplyHeader::success(call.xid).encode(&mut out);
                        Nlm4Res { cookie: args.cookie, stat: Nlm4Stats::Granted }.encode(&mut out);
                    }
                    Err(_) => ReplyHeader::accepted_error(call.xid, AcceptStat::GarbageArgs).encode(&mut out),
                },
                _ => ReplyHeader::accepted_error(call.xid, AcceptStat::ProcUnavail).encode(&mut out),
            }
        }
        finish_record(&mut out, at);
        if conn.write_all(&out).await.is_err() {
            return;
        }
    }
}

async fn pmap_call(pmap: &RpcClient, proc_: u32, m: &Mapping) -> NfsResult<u32> {
    let mut body = pmap.call(PMAP_PROGRAM, PMAP_V2, proc_, &Cred::root(), m).await?;
    u32::decode(&mut body).map_err(|e| NfsError::BadReply(format!("portmap reply: {e}")))
}

impl Callbacks {
    /// Register with this host's portmapper unless a live lock manager
    /// already is. Returns whether we did.
    pub(crate) async fn register(&self) -> NfsResult<bool> {
        let pmap_addr = SocketAddr::new(IpAddr::from([127, 0, 0, 1]), self.options.pmapport);
        let pmap = side_client(pmap_addr, &self.options);
        let mut m = Mapping { prog: NLM_PROGRAM, vers: NLM_V4, prot: IPPROTO_TCP, port: 0 };
        let current = pmap_call(&pmap, PMAPPROC_GETPORT, &m).await?;
        if current != 0 {
            let alive = tokio::time::timeout(
                Duration::from_secs(1),
                tokio::net::TcpStream::connect(SocketAddr::new(pmap_addr.ip(), current as u16)),
            )
            .await
            .is_ok_and(|c| c.is_ok());
            if alive {
                return Ok(false);
            }
            // A dead registration (a mount that was killed): take its place.
            pmap_call(&pmap, PMAPPROC_UNSET, &m).await?;
        }
        m.port = self.port as u32;
        let ok = pmap_call(&pmap, PMAPPROC_SET, &m).await? != 0;
        if ok {
            *self.registered.lock() = Some(pmap_addr);
        }
        Ok(ok)
    }

    /// Remove our registration if it is still ours.
    pub(crate) async fn unregister(&self) {
        let Some(pmap_addr) = self.registered.lock().take() else { return };
        let pmap = side_client(pmap_addr, &self.options);
        let m = Mapping { prog: NLM_PROGRAM, vers: NLM_V4, prot: IPPROTO_TCP, port: 0 };
        if pmap_call(&pmap, PMAPPROC_GETPORT, &m).await.ok() == Some(self.port as u32) {
            let _ = pmap_call(&pmap, PMAPPROC_UNSET, &m).await;
        }
    }
}
