//! RPC-with-TLS (RFC 9289) on the client: `xprtsec=tls|mtls`.
//!
//! Each new TCP connection first asks the server with a NULL call whose credential is AUTH_TLS;
//! a server that will start TLS answers with the STARTTLS verifier, and the TLS 1.3 handshake
//! (rustls, ALPN `sunrpc`) follows on the same connection before any other call. The server's
//! certificate must chain to `tls_ca=` (default: the system's store) and be valid for
//! `tls_name=` (default: the URL's host, else the server's address); with `xprtsec=mtls` the
//! client presents `tls_cert=`/`tls_key=`. Every failure is a sentence that names its cause (an
//! unknown issuer, an expired certificate, a server that does not offer TLS) and fails the
//! connection attempt, so a mount never falls back to plain TCP.

use crate::options::{MountOptions, Xprtsec};
use bytes::BytesMut;
use eagernfs_proto::nfs3::{NFS_PROGRAM, NFS_V3};
use eagernfs_rpc::record::{begin_record, finish_record};
use eagernfs_rpc::{AcceptStat, CallHeader, Message, OpaqueAuth, RecordDecoder, ReplyBody, STARTTLS};
use eagernfs_xdr::Encode;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The ALPN protocol name RFC 9289 registers.
const ALPN: &[u8] = b"sunrpc";
/// Longest the probe and the handshake may take together.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// What a connection needs to start TLS. The configuration is built once per transport; an
/// error in it (a missing file) is kept and reported by every connection attempt.
#[derive(Clone)]
pub(crate) struct TlsSetup {
    config: Result<Arc<rustls::ClientConfig>, String>,
    name: Result<ServerName<'static>, String>,
}

impl std::fmt::Debug for TlsSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSetup").field("name", &self.name).finish_non_exhaustive()
    }
}

fn read_pem(path: &std::path::Path, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {what} {}: {e}", path.display()))
}

fn certs(pem: &[u8], what: &str, path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Result<Vec<_>, _> = rustls_pemfile::certs(&mut &pem[..]).collect();
    let certs = certs.map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{what} {} holds no PEM certificate", path.display()));
    }
    Ok(certs)
}

fn client_config(options: &MountOptions) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    match &options.tls_ca {
        Some(path) => {
            for c in certs(&read_pem(path, "tls_ca")?, "tls_ca", path)? {
                roots.add(c).map_err(|e| format!("tls_ca {}: {e}", path.display()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for c in found.certs {
                let _ = roots.add(c);
            }
            if roots.is_empty() {
                return Err("no CA certificates in the system store: give tls_ca=FILE".into());
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let mut config = match options.xprtsec {
        Xprtsec::Mtls => {
            let (Some(cert), Some(key)) = (&options.tls_cert, &options.tls_key) else {
                return Err(
                    "xprtsec=mtls needs tls_cert=FILE and tls_key=FILE (this client's certificate)".into()
                );
            };
            let chain = certs(&read_pem(cert, "tls_cert")?, "tls_cert", cert)?;
            let key_pem = read_pem(key, "tls_key")?;
            let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut &key_pem[..])
                .map_err(|e| format!("tls_key {}: {e}", key.display()))?
                .ok_or_else(|| format!("tls_key {} holds no PEM private key", key.display()))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| format!("tls_cert/tls_key: {e}"))?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(Arc::new(config))
}

/// The TLS setup `options` ask for, for connections to `server`; `None` for plain TCP.
pub(crate) fn setup(options: &MountOptions, server: SocketAddr) -> Option<TlsSetup> {
    if options.xprtsec == Xprtsec::None {
        return None;
    }
    let name = match &options.tls_name {
        Some(n) => ServerName::try_from(n.clone()).map_err(|e| format!("tls_name={n}: {e}")),
        None => Ok(ServerName::IpAddress(server.ip().into())),
    };
    Some(TlsSetup { config: client_config(options), name })
}

fn fail(server: SocketAddr, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionRefused, format!("TLS with {server}: {why}"))
}

/// Ask `server` to start TLS on `stream` and do the handshake.
pub(crate) async fn start(
    mut stream: TcpStream,
    setup: &TlsSetup,
    server: SocketAddr,
) -> io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let config = setup.config.clone().map_err(|e| fail(server, e))?;
    let name = setup.name.clone().map_err(|e| fail(server, e))?;
    let run = async {
        // The probe: NULL with AUTH_TLS.
        let xid: u32 = rand::random();
        let record = null_call(&mut stream, xid, OpaqueAuth::tls()).await?;
        let Some(mut record) = record else {
            return Err(fail(server, "the server closed the connection at the AUTH_TLS probe"));
        };
        match Message::decode(&mut record) {
            Ok(Message::Reply(r)) if r.xid == xid => match r.body {
                ReplyBody::Accepted { verf, stat: AcceptStat::Success } if verf.body.as_bytes() == STARTTLS => {}
                _ => {
                    return Err(fail(
                        server,
                        "the server does not offer RPC-with-TLS (no STARTTLS in its answer to the AUTH_TLS probe); \
                         configure TLS on it (eagernfs serve --tls-cert/--tls-key) or mount with xprtsec=none",
                    ))
                }
            },
            _ => return Err(fail(server, "unexpected answer to the AUTH_TLS probe")),
        }
        let connector = tokio_rustls::TlsConnector::from(config);
        let mut tls = connector.connect(name, stream).await.map_err(|e| fail(server, e))?;
        // In TLS 1.3 the server judges our certificate after our side of the handshake is done:
        // one NULL call through TLS surfaces its verdict (an alert) here, as a clear error,
        // instead of as a connection that dies on every call.
        match null_call(&mut tls, xid.wrapping_add(1), OpaqueAuth::none()).await {
            Ok(Some(_)) => Ok(tls),
            Ok(None) => Err(fail(
                server,
                "the server closed the connection after the handshake (does it accept this client's certificate?)",
            )),
            Err(e) => Err(fail(server, e)),
        }
    };
    match tokio::time::timeout(START_TIMEOUT, run).await {
        Ok(r) => r,
        Err(_) => Err(fail(server, "no answer to the AUTH_TLS probe or the handshake")),
    }
}

/// Send a NULL call with credential `cred` on `s` and read one reply record; `None` if the
/// server closed the connection first. Reads a byte at a time: nothing past the reply may be
/// consumed (on a plain connection, TLS follows it).
async fn null_call<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    xid: u32,
    cred: OpaqueAuth,
) -> io::Result<Option<bytes::Bytes>> {
    let mut out = BytesMut::new();
    let at = begin_record(&mut out);
    CallHeader { xid, rpcvers: 2, prog: NFS_PROGRAM, vers: NFS_V3, proc_: 0, cred, verf: OpaqueAuth::none() }
        .encode(&mut out);
    finish_record(&mut out, at);
    s.write_all(&out).await?;
    s.flush().await?;
    let mut dec = RecordDecoder::new(64 * 1024);
    let mut buf = BytesMut::with_capacity(256);
    loop {
        if let Some(r) = dec.decode(&mut buf).map_err(io::Error::other)? {
            return Ok(Some(r));
        }
        match s.read_u8().await {
            Ok(b) => buf.extend_from_slice(&[b]),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
    }
}
