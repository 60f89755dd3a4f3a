//! RPC-with-TLS (RFC 9289) end to end (issue 8, point 6): `eagernfs serve --tls-cert/--tls-key
//! [--tls-client-ca]` and the client's `xprtsec=tls|mtls` with `tls_ca=`, `tls_cert=`,
//! `tls_key=`. Data goes through TLS both ways; exports' `xprtsec=` is enforced; a wrong CA, an
//! expired certificate and a server without TLS each fail with a sentence naming the cause, and
//! never fall back to plain TCP. (libnfs's TLS client needs kTLS, which this kernel lacks: our
//! client is the TLS peer here.)

#[macro_use]
mod common;

use common::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
use std::fs;
use std::path::{Path, PathBuf};

/// A CA and what it signed, as PEM files in a directory.
struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        let ca = p.self_signed(&ca_key).unwrap();
        fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        Pki { dir, ca, ca_key }
    }

    fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A certificate for `names` (and 127.0.0.1), as `NAME.pem` and `NAME.key`; `expired`
    /// makes it valid only in 2020.
    fn issue(&self, file: &str, names: &[&str], expired: bool) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        p.subject_alt_names.push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        p.distinguished_name.push(DnType::CommonName, names[0]);
        if expired {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2020, 12, 31);
        }
        let cert = p.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let (c, k) =
            (self.dir.path().join(format!("{file}.pem")), self.dir.path().join(format!("{file}.key")));
        fs::write(&c, cert.pem()).unwrap();
        fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn eagernfs(args: &[&str]) -> ToolOutput {
    run_tool(eagernfs_bin(), args)
}

#[test]
fn data_goes_through_tls_and_every_failure_names_its_cause() {
    let pki = Pki::new("eagernfs test CA");
    let (cert, key) = pki.issue("server", &["localhost"], false);
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(
        export.path(),
        &["-o", "rw,no_root_squash", "--tls-cert", s(&cert), "--tls-key", s(&key)],
    );
    let tls = format!("xprtsec=tls&tls_ca={}", s(&pki.ca()));
    // A file out and back in through TLS.
    let src = tempfile::NamedTempFile::new().unwrap();
    let data = pattern_bytes(9, 0, 3 << 20);
    fs::write(src.path(), &data).unwrap();
    eagernfs(&["cp", s(src.path()), &server.url_with("/f", &tls)]).assert_success("cp over TLS");
    assert_eq!(fs::read(export.path().join("f")).unwrap(), data, "what the server stored");
    let back = eagernfs(&["cat", &server.url_with("/f", &tls)]);
    back.assert_success("cat over TLS");
    assert!(back.stdout == data, "what came back over TLS");
    // Through a FUSE mount too.
    if fuse_unavailable().is_none() {
        let m = FuseMount::new(&server.url_with("", &tls), "");
        assert!(fs::read(m.path("f")).unwrap() == data, "read through a TLS mount");
        fs::write(m.path("g"), b"written through a TLS mount").unwrap();
        drop(m);
        assert_eq!(fs::read(export.path().join("g")).unwrap(), b"written through a TLS mount");
    }
    // The server's name: by address (the default) and by name (tls_name=).
    let named = format!("{tls}&tls_name=localhost");
    eagernfs(&["cat", &server.url_with("/f", &named)]).assert_success("tls_name=localhost");

    // A CA that did not sign the server's certificate.
    let other = Pki::new("another CA");
    let out = eagernfs(&["cat", &server.url_with("/f", &format!("xprtsec=tls&tls_ca={}", s(&other.ca())))]);
    assert!(!out.status.success() && out.stderr.contains("UnknownIssuer"), "wrong CA: {}", out.stderr);
    // A name the certificate is not for.
    let out = eagernfs(&["cat", &server.url_with("/f", &format!("{tls}&tls_name=elsewhere.example"))]);
    assert!(!out.status.success() && out.stderr.contains("not valid for name"), "wrong name: {}", out.stderr);

    // An expired server certificate.
    let (old_cert, old_key) = pki.issue("expired", &["localhost"], true);
    let old_export = tempfile::tempdir().unwrap();
    let old = Server::eagernfs(
        old_export.path(),
        &["-o", "rw", "--tls-cert", s(&old_cert), "--tls-key", s(&old_key)],
    );
    let out = eagernfs(&["ls", &old.url_with("/", &tls)]);
    assert!(!out.status.success() && out.stderr.contains("certificate expired"), "expired: {}", out.stderr);

    // A server without TLS: refused, never plain TCP instead.
    let plain_export = tempfile::tempdir().unwrap();
    let plain = Server::eagernfs(plain_export.path(), &["-o", "rw"]);
    let out = eagernfs(&["ls", &plain.url_with("/", &tls)]);
    assert!(
        !out.status.success() && out.stderr.contains("does not offer RPC-with-TLS"),
        "no TLS on the server: {}",
        out.stderr
    );
}

#[test]
fn exports_require_tls_or_mutual_tls() {
    let pki = Pki::new("eagernfs test CA");
    let (cert, key) = pki.issue("server", &["localhost"], false);
    let (ccert, ckey) = pki.issue("client", &["client.test"], false);
    let stranger = Pki::new("someone else's CA");
    let (scert, skey) = stranger.issue("stranger", &["client.test"], false);
    let root = tempfile::tempdir().unwrap();
    for d in ["tls", "mtls", "any"] {
        fs::create_dir(root.path().join(d)).unwrap();
        fs::write(root.path().join(d).join("f"), d).unwrap();
    }
    let dir = root.path().canonicalize().unwrap();
    let exports = root.path().join("exports");
    fs::write(
        &exports,
        format!(
            "{d}/tls 127.0.0.1(rw,insecure,no_root_squash,xprtsec=tls:mtls)\n\
             {d}/mtls 127.0.0.1(rw,insecure,no_root_squash,xprtsec=mtls)\n\
             {d}/any 127.0.0.1(rw,insecure,no_root_squash)\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let server = Server::eagernfs(
        root.path(),
        &[
            "--exports",
            s(&exports),
            "--tls-cert",
            s(&cert),
            "--tls-key",
            s(&key),
            "--tls-client-ca",
            s(&pki.ca()),
        ],
    );
    let cat = |sub: &str, query: &str| {
        eagernfs(&["cat", &server.url_for_path(&format!("{}/{sub}/f", dir.display()), query)])
    };
    let tls = format!("xprtsec=tls&tls_ca={}", s(&pki.ca()));
    let mtls = format!("xprtsec=mtls&tls_ca={}&tls_cert={}&tls_key={}", s(&pki.ca()), s(&ccert), s(&ckey));
    // Plain TCP: only the export that allows it.
    assert_eq!(cat("any", "").assert_success("plain, any").stdout_text(), "any");
    // Refused: by MOUNT over NFSv3 (ACCES), by the operation over NFSv4 (WRONGSEC).
    let refused = |out: &ToolOutput| out.stderr.contains("ACCES") || out.stderr.contains("WRONGSEC");
    let out = cat("tls", "");
    assert!(!out.status.success() && refused(&out), "plain to a TLS export: {}", out.stderr);
    // TLS without a client certificate: not enough for mtls.
    assert_eq!(cat("tls", &tls).assert_success("tls, tls").stdout_text(), "tls");
    assert_eq!(cat("any", &tls).assert_success("tls, any").stdout_text(), "any");
    let out = cat("mtls", &tls);
    assert!(!out.status.success() && refused(&out), "tls to an mtls export: {}", out.stderr);
    // Mutual TLS.
    assert_eq!(cat("mtls", &mtls).assert_success("mtls, mtls").stdout_text(), "mtls");
    assert_eq!(cat("tls", &mtls).assert_success("mtls, tls").stdout_text(), "tls");
    // A client certificate from a CA the server does not trust: the handshake fails.
    let bad = format!("xprtsec=mtls&tls_ca={}&tls_cert={}&tls_key={}", s(&pki.ca()), s(&scert), s(&skey));
    let out = cat("mtls", &bad);
    assert!(
        !out.status.success() && out.stderr.contains("alert"),
        "untrusted client certificate: {}",
        out.stderr
    );
    // mtls without a certificate of one's own is a usage error.
    let out = cat("mtls", &format!("xprtsec=mtls&tls_ca={}", s(&pki.ca())));
    assert!(!out.status.success() && out.stderr.contains("tls_cert"), "mtls without a cert: {}", out.stderr);
}
