//! What RPC-with-TLS proved about a connection's client ([`TlsPeer`]): carried by every call
//! of the connection, for the exports' `xprtsec=` and host rules. The handshake itself is in
//! `tls`.

use rustls::pki_types::{CertificateDer, ServerName};

/// What TLS proved about a connection's client.
#[derive(Clone, Debug, Default)]
pub(crate) struct TlsPeer {
    /// The client's certificate, verified against the configured client CA (mutual TLS).
    pub(crate) client_cert: Option<CertificateDer<'static>>,
}

impl TlsPeer {
    /// Whether the client's certificate is valid for host name `name`.
    pub(crate) fn proves(&self, name: &str) -> bool {
        let Some(der) = &self.client_cert else { return false };
        let Ok(cert) = webpki::EndEntityCert::try_from(der) else { return false };
        let Ok(server_name) = ServerName::try_from(name.to_string()) else { return false };
        cert.verify_is_valid_for_subject_name(&server_name).is_ok()
    }
}
