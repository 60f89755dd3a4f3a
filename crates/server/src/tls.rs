//! RPC-with-TLS (RFC 9289) on the server.
//!
//! A client asks with a NULL call whose credential is AUTH_TLS; when TLS is configured the
//! answer carries the STARTTLS verifier (`dispatch`), and right after that reply the service
//! threads let go of the connection (`svc`) and hand it here. The TLS 1.3 handshake runs on the
//! relay runtime (rustls, ALPN `sunrpc`; no kTLS on this kernel, so TLS is in user space); then
//! the connection's plaintext is relayed to and from one end of a socket pair whose other end
//! the service threads serve like any TCP connection, with the client's address and what the
//! handshake proved (a verified client certificate: mutual TLS) attached for the exports'
//! `xprtsec=` and host rules.
//!
//! What it costs: one copy each way through the socket pair and the encryption itself, on the
//! relay threads (`docs/benchmarks/tls-*`).

use crate::call::TlsPeer;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;
use std::time::Duration;

/// The ALPN protocol name RFC 9289 registers.
pub const ALPN: &[u8] = b"sunrpc";

/// Longest a client may take to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Relay buffer per direction.
const RELAY_BUFFER_BYTES: usize = 256 * 1024;

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{what}: {why}")]
    Pem { what: &'static str, why: String },
    #[error("{what} holds no {kind}")]
    Empty { what: &'static str, kind: &'static str },
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("client CA: {0}")]
    Verifier(String),
}

fn certs(pem: &[u8], what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Result<Vec<_>, _> = rustls_pemfile::certs(&mut &pem[..]).collect();
    let certs = certs.map_err(|e| TlsError::Pem { what, why: e.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::Empty { what, kind: "PEM certificate" });
    }
    Ok(certs)
}

/// The server's TLS settings from PEM: its certificate chain and private key, and, for mutual
/// TLS, the CA whose client certificates are accepted (clients without one still get TLS; an
/// export's `xprtsec=mtls` is what requires one). TLS 1.3 only, ALPN `sunrpc`.
pub fn server_config(
    cert_chain_pem: &[u8],
    key_pem: &[u8],
    client_ca_pem: Option<&[u8]>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let chain = certs(cert_chain_pem, "server certificate")?;
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut &key_pem[..])
        .map_err(|e| TlsError::Pem { what: "server key", why: e.to_string() })?
        .ok_or(TlsError::Empty { what: "server key", kind: "PEM private key" })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let builder = match client_ca_pem {
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs(pem, "client CA")? {
                roots.add(c).map_err(|e| TlsError::Verifier(e.to_string()))?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .allow_unauthenticated()
                    .build()
                    .map_err(|e| TlsError::Verifier(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(Arc::new(config))
}

/// A connection that asked for TLS, handed over by the service threads.
pub(crate) struct Handover {
    pub(crate) stream: std::net::TcpStream,
    pub(crate) peer: crate::call::Peer,
}

/// Handshake with `h`'s client, then relay its plaintext through a socket pair whose service
/// end `adopt` gets. Errors end the connection (logged: a wrong certificate shows here).
pub(crate) async fn serve(
    config: Arc<rustls::ServerConfig>,
    h: Handover,
    adopt: impl FnOnce(std::net::TcpStream, crate::call::Peer, TlsPeer),
) {
    let peer = h.peer;
    let relay = async {
        h.stream.set_nonblocking(true)?;
        let tcp = tokio::net::TcpStream::from_std(h.stream)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let mut tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        let client_cert =
            tls.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| c.clone().into_owned());
        let (service_end, relay_end) = std::os::unix::net::UnixStream::pair()?;
        // The service threads read and write it with the same system calls as a TCP socket.
        let service_end = std::net::TcpStream::from(std::os::fd::OwnedFd::from(service_end));
        tracing::debug!(peer = %peer.addr, mutual = client_cert.is_some(), "TLS established");
        adopt(service_end, peer, TlsPeer { client_cert });
        relay_end.set_nonblocking(true)?;
        let mut relay_end = tokio::net::UnixStream::from_std(relay_end)?;
        tokio::io::copy_bidirectional_with_sizes(
            &mut tls,
            &mut relay_end,
            RELAY_BUFFER_BYTES,
            RELAY_BUFFER_BYTES,
        )
        .await?;
        std::io::Result::Ok(())
    };
    match relay.await {
        Ok(()) => {}
        // Clients close without a TLS close_notify; that is an ordinary end.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            tracing::debug!(peer = %peer.addr, "TLS connection ended: {e}")
        }
        Err(e) => tracing::info!(peer = %peer.addr, "TLS connection ended: {e}"),
    }
}
