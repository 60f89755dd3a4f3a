//! RPC authentication: the opaque credential/verifier and AUTH_SYS (RFC 5531 §8–9, Appendix A).

use bytes::{BufMut, Bytes};
use eagernfs_xdr::{decode_array, decode_exact, encode_array, Decode, Encode, Opaque};

/// The largest credential or verifier body (RFC 5531 §8.2: `opaque body<400>`).
pub const MAX_AUTH_BYTES: usize = 400;
/// Longest AUTH_SYS machine name (RFC 5531 Appendix A).
pub const MAX_MACHINE_NAME: usize = 255;
/// Most supplementary groups in AUTH_SYS.
pub const MAX_AUTH_SYS_GROUPS: usize = 16;

/// Authentication flavors we know by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFlavor {
    None = 0,
    Sys = 1,
    Short = 2,
    Dh = 3,
    RpcsecGss = 6,
    /// AUTH_TLS (RFC 9289): only on a NULL call, asking the server to start TLS.
    Tls = 7,
}

/// The body of the verifier that accepts an RPC-with-TLS probe.
pub const STARTTLS: &[u8] = b"STARTTLS";

/// Why authentication failed (`auth_stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum AuthStat {
    Ok = 0,
    /// Bad credential (seal broken): also used for a malformed AUTH_SYS body.
    BadCred = 1,
    /// The client must begin a new session.
    RejectedCred = 2,
    BadVerf = 3,
    RejectedVerf = 4,
    /// Rejected for security reasons: an unsupported flavor, or AUTH_NONE where AUTH_SYS is required.
    TooWeak = 5,
    InvalidResp = 6,
    Failed = 7,
}

impl AuthStat {
    pub fn from_u32(v: u32) -> Option<Self> {
        use AuthStat::*;
        Some(match v {
            0 => Ok,
            1 => BadCred,
            2 => RejectedCred,
            3 => BadVerf,
            4 => RejectedVerf,
            5 => TooWeak,
            6 => InvalidResp,
            7 => Failed,
            _ => return None,
        })
    }
}

/// A credential or verifier: a flavor and an opaque body of at most 400 bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[doc(alias = "opaque_auth")]
pub struct OpaqueAuth {
    pub flavor: u32,
    pub body: Opaque<MAX_AUTH_BYTES>,
}

impl OpaqueAuth {
    /// AUTH_NONE with an empty body.
    pub const fn none() -> Self {
        OpaqueAuth { flavor: AuthFlavor::None as u32, body: Opaque(Bytes::new()) }
    }

    /// The AUTH_TLS credential of an RPC-with-TLS probe (RFC 9289 §4.1): empty.
    pub const fn tls() -> Self {
        OpaqueAuth { flavor: AuthFlavor::Tls as u32, body: Opaque(Bytes::new()) }
    }

    /// The verifier a server that will start TLS answers the probe with: AUTH_NONE whose body
    /// is the eight bytes "STARTTLS".
    pub fn starttls() -> Self {
        OpaqueAuth { flavor: AuthFlavor::None as u32, body: Opaque(Bytes::from_static(STARTTLS)) }
    }

    /// An AUTH_SYS credential carrying `sys`.
    pub fn sys(sys: &AuthSys) -> Self {
        let body = eagernfs_xdr::to_vec(sys);
        OpaqueAuth { flavor: AuthFlavor::Sys as u32, body: Opaque(Bytes::from(body)) }
    }
}

impl Encode for OpaqueAuth {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.flavor.encode(buf);
        self.body.encode(buf);
    }
}
impl Decode for OpaqueAuth {
    fn decode(buf: &mut Bytes) -> eagernfs_xdr::Result<Self> {
        Ok(OpaqueAuth { flavor: u32::decode(buf)?, body: Decode::decode(buf)? })
    }
}

/// The AUTH_SYS credential (`authsys_parms`): who the client says the caller is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[doc(alias = "authsys_parms")]
pub struct AuthSys {
    /// Arbitrary id the client made up.
    pub stamp: u32,
    pub machine_name: Opaque<MAX_MACHINE_NAME>,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups, at most 16.
    pub gids: Vec<u32>,
}

impl AuthSys {
    /// Parse the body of an AUTH_SYS credential. The whole body must be used.
    pub fn from_body(body: &Bytes) -> eagernfs_xdr::Result<Self> {
        decode_exact(body.clone())
    }
}

impl Encode for AuthSys {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.stamp.encode(buf);
        self.machine_name.encode(buf);
        self.uid.encode(buf);
        self.gid.encode(buf);
        encode_array(buf, &self.gids);
    }
}
impl Decode for AuthSys {
    fn decode(buf: &mut Bytes) -> eagernfs_xdr::Result<Self> {
        Ok(AuthSys {
            stamp: u32::decode(buf)?,
            machine_name: Decode::decode(buf)?,
            uid: u32::decode(buf)?,
            gid: u32::decode(buf)?,
            gids: decode_array(buf, MAX_AUTH_SYS_GROUPS)?,
        })
    }
}
