//! MOUNT v3: from a server and a path to the export's root handle.
//!
//! Where MOUNT is found: at `mountport=` if given; else on the NFS port
//! (eagernfs serves MOUNT, NFS and portmap on one port); else where the
//! portmapper (`pmapport=`, default 111) says. Which part of the path is the
//! export: the one given explicitly, else the longest prefix of the path
//! that MNT accepts (as libnfs does), trying shorter prefixes while the
//! server says "no such export" or "not a directory".
//!
//! Failures are sentences: "cannot connect to h:2049: connection refused",
//! "export /x not allowed for this client address 10.1.2.3
//! (MNT3ERR_ACCES)", "no such export /x (MNT3ERR_NOENT) — exports are: /a, /b".
//!
//! # Layout
//! - [`Mounted`]: what a successful mount yields.
//! - [`mount`]: the whole dance; [`getport`], [`mnt`], [`umnt`], [`exports`]
//!   are the single calls.

use crate::driver::{RpcClient, TransportConfig};
use crate::ops::{Cred, NfsError, NfsResult};
use crate::options::MountOptions;
use eagernfs_proto::mount::{
    Dirpath, Exports, Mountres3, Mountstat3, MOUNTPROC_EXPORT, MOUNTPROC_MNT, MOUNTPROC_UMNT, MOUNT_PROGRAM,
    MOUNT_V3,
};
use eagernfs_proto::nfs3::{NfsFh3, NFS_PORT, NFS_PROGRAM, NFS_V3};
use eagernfs_proto::portmap::{Mapping, IPPROTO_TCP, IPPROTO_UDP, PMAPPROC_GETPORT, PMAP_PROGRAM, PMAP_V2};
use eagernfs_xdr::{Decode, Opaque};
use std::net::SocketAddr;
use std::time::Duration;

/// A mounted export.
#[derive(Clone, Debug)]
pub struct Mounted {
    /// The server's NFS address.
    pub nfs_addr: SocketAddr,
    /// Where MOUNT answered (for UMNT).
    pub mount_addr: SocketAddr,
    /// The path MNT accepted.
    pub export: String,
    /// The rest of the requested path, inside the export (`/` for none).
    pub path_inside: String,
    /// The root handle of `export`.
    pub root: NfsFh3,
    /// Authentication flavors the server accepts for the export.
    pub auth_flavors: Vec<u32>,
}

/// A short-lived RPC client for MOUNT and portmap calls: soft, so an
/// unanswered call fails instead of hanging the mount.
pub fn side_client(addr: SocketAddr, options: &MountOptions) -> RpcClient {
    let mut o = options.clone();
    o.hard = false;
    o.nconnect = 1;
    o.timeo = o.timeo.min(Duration::from_secs(10));
    o.retrans = o.retrans.min(2);
    RpcClient::new(TransportConfig::new(addr, &o))
}

/// Ask the portmapper at `pmap` for the port of `prog`/`vers` over the
/// transport `options` choose; `Ok(None)` if it is not registered.
pub async fn getport(
    pmap: &RpcClient,
    cred: &Cred,
    prog: u32,
    vers: u32,
    options: &MountOptions,
) -> NfsResult<Option<u16>> {
    let prot = if options.udp { IPPROTO_UDP } else { IPPROTO_TCP };
    let args = Mapping { prog, vers, prot, port: 0 };
    let mut body = pmap.call(PMAP_PROGRAM, PMAP_V2, PMAPPROC_GETPORT, cred, &args).await?;
    let port =
        u32::decode(&mut body).map_err(|e| NfsError::BadReply(format!("portmap GETPORT reply: {e}")))?;
    Ok(u16::try_from(port).ok().filter(|p| *p != 0))
}

/// One MNT call.
pub async fn mnt(client: &RpcClient, cred: &Cred, path: &str) -> NfsResult<Mountres3> {
    let arg = dirpath(path)?;
    let mut body = client.call(MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC_MNT, cred, &arg).await?;
    Mountres3::decode(&mut body).map_err(|e| NfsError::BadReply(format!("MOUNT MNT reply: {e}")))
}

/// Tell the server we no longer use `path` (advisory: its DUMP list).
pub async fn umnt(client: &RpcClient, cred: &Cred, path: &str) -> NfsResult<()> {
    client.call(MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC_UMNT, cred, &dirpath(path)?).await.map(|_| ())
}

/// The server's export list.
pub async fn exports(client: &RpcClient, cred: &Cred) -> NfsResult<Vec<String>> {
    let mut body = client.call(MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC_EXPORT, cred, &()).await?;
    let list =
        Exports::decode(&mut body).map_err(|e| NfsError::BadReply(format!("MOUNT EXPORT reply: {e}")))?;
    Ok(list.0.iter().map(|e| String::from_utf8_lossy(&e.ex_dir).into_owned()).collect())
}

fn dirpath(path: &str) -> NfsResult<Dirpath> {
    Opaque::new(path.as_bytes().to_vec())
        .map_err(|_| NfsError::Mount(format!("path too long for MOUNT ({} bytes, at most 1024)", path.len())))
}

/// Resolve `host` (a name or address; IPv6 without brackets) with `port`.
pub async fn resolve(host: &str, port: u16) -> NfsResult<SocketAddr> {
    let mut addrs = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| NfsError::Connection(format!("cannot resolve host {host}: {e}")))?;
    addrs.next().ok_or_else(|| NfsError::Connection(format!("host {host} has no address")))
}

/// Mount `path` on `host`: find the NFS and MOUNT ports, find the export
/// (exactly `export` if given), and get its root handle.
pub async fn mount(
    host: &str,
    nfs_port: Option<u16>,
    path: &str,
    export: Option<&str>,
    options: &MountOptions,
    cred: &Cred,
) -> NfsResult<Mounted> {
    let pmap_addr = resolve(host, options.pmapport).await?;
    let ip = pmap_addr.ip();
    // The NFS port: given, or from the portmapper, or the well-known one.
    let nfs_port = match nfs_port {
        Some(p) => p,
        None => {
            let pmap = side_client(pmap_addr, options);
            match getport(&pmap, cred, NFS_PROGRAM, NFS_V3, options).await {
                Ok(Some(p)) => p,
                _ => NFS_PORT,
            }
        }
    };
    let nfs_addr = SocketAddr::new(ip, nfs_port);

    // MOUNT: where told; else on the NFS port, falling back to the portmapper.
    let (client, mount_addr) = match options.mountport {
        Some(p) => {
            let addr = SocketAddr::new(ip, p);
            (side_client(addr, options), addr)
        }
        None => {
            let on_nfs_port = side_client(nfs_addr, options);
            match on_nfs_port.call(MOUNT_PROGRAM, MOUNT_V3, 0, cred, &()).await {
                Ok(_) => (on_nfs_port, nfs_addr),
                // Nothing answers at the NFS port: whatever the portmapper
                // says of MOUNT, NFS calls could not be made (and a URL of
                // several addresses moves on to the next).
                Err(first @ (NfsError::Connection(_) | NfsError::TimedOut)) => return Err(first),
                Err(first) => {
                    let pmap = side_client(pmap_addr, options);
                    match getport(&pmap, cred, MOUNT_PROGRAM, MOUNT_V3, options).await {
                        Ok(Some(p)) => {
                            let addr = SocketAddr::new(ip, p);
                            (side_client(addr, options), addr)
                        }
                        Ok(None) => {
                            return Err(NfsError::Mount(format!(
                                "no MOUNT service: {nfs_addr} answered: {first}; the portmapper at {pmap_addr} has no MOUNT v3 over {}",
                                if options.udp { "UDP" } else { "TCP" }
                            )))
                        }
                        Err(e) => {
                            return Err(match first {
                                // Nothing listens at the NFS port: that is the news.
                                NfsError::Connection(_) => first,
                                _ => NfsError::Mount(format!(
                                    "no MOUNT service: {nfs_addr} answered: {first}; asking the portmapper at {pmap_addr} failed: {e}"
                                )),
                            })
                        }
                    }
                }
            }
        }
    };

    let candidates: Vec<String> = match export {
        Some(e) => vec![e.to_string()],
        None => prefixes(path),
    };
    // The first refusal (not "no such export"), reported if no prefix works.
    let mut refused: Option<(String, Mountstat3)> = None;
    for candidate in &candidates {
        match mnt(&client, cred, candidate).await? {
            Mountres3::Ok(ok) => {
                let path_inside = inside(path, candidate);
                return Ok(Mounted {
                    nfs_addr,
                    mount_addr,
                    export: candidate.clone(),
                    path_inside,
                    root: NfsFh3 { data: ok.fhandle },
                    auth_flavors: ok.auth_flavors,
                });
            }
            // A shorter prefix may be the export.
            Mountres3::Fail(Mountstat3::Noent | Mountstat3::Notdir) if export.is_none() => continue,
            // Some servers (nfs-ganesha) refuse a path *below* an export with
            // ACCES rather than NOENT: keep looking, but remember the refusal.
            Mountres3::Fail(status @ (Mountstat3::Acces | Mountstat3::Perm)) if export.is_none() => {
                refused.get_or_insert((candidate.clone(), status));
                continue;
            }
            Mountres3::Fail(status) => return Err(mount_error(&client, cred, candidate, status).await),
        }
    }
    if let Some((candidate, status)) = refused {
        return Err(mount_error(&client, cred, &candidate, status).await);
    }
    Err(mount_error(&client, cred, &normalised(path), Mountstat3::Noent).await)
}

/// `/a/b/c`, `/a/b`, `/a`, `/`: the prefixes of a path, longest first.
fn prefixes(path: &str) -> Vec<String> {
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty() && *c != ".").take(64).collect();
    let mut out: Vec<String> =
        (1..=comps.len()).rev().map(|n| format!("/{}", comps[..n].join("/"))).collect();
    out.push("/".into());
    out
}

fn normalised(path: &str) -> String {
    prefixes(path).into_iter().next().unwrap_or_else(|| "/".into())
}

/// The part of `path` below `export` (`/` for none).
fn inside(path: &str, export: &str) -> String {
    let p: Vec<&str> = path.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    let e = export.split('/').filter(|c| !c.is_empty() && *c != ".").count();
    format!("/{}", p.get(e..).unwrap_or_default().join("/"))
}

/// A refused MNT as a sentence.
async fn mount_error(client: &RpcClient, cred: &Cred, path: &str, status: Mountstat3) -> NfsError {
    let msg = match status {
        Mountstat3::Acces | Mountstat3::Perm => {
            let who = client.local_addr().map(|a| a.ip().to_string()).unwrap_or_else(|| "this host".into());
            format!("export {path} not allowed for this client address {who} (MNT3ERR_{})", stat_name(status))
        }
        Mountstat3::Noent | Mountstat3::Notdir => {
            let list = match exports(client, cred).await {
                Ok(l) if l.is_empty() => "none".to_string(),
                Ok(l) => l.join(", "),
                Err(e) => format!("(could not list them: {e})"),
            };
            format!("no such export {path} (MNT3ERR_{}) — exports are: {list}", stat_name(status))
        }
        s => format!("mount of {path} refused (MNT3ERR_{})", stat_name(s)),
    };
    NfsError::Mount(msg)
}

fn stat_name(s: Mountstat3) -> &'static str {
    match s {
        Mountstat3::Ok => "OK",
        Mountstat3::Perm => "PERM",
        Mountstat3::Noent => "NOENT",
        Mountstat3::Io => "IO",
        Mountstat3::Acces => "ACCES",
        Mountstat3::Notdir => "NOTDIR",
        Mountstat3::Inval => "INVAL",
        Mountstat3::Nametoolong => "NAMETOOLONG",
        Mountstat3::Notsupp => "NOTSUPP",
        Mountstat3::Serverfault => "SERVERFAULT",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_longest_first() {
        assert_eq!(prefixes("/a/b//c/"), vec!["/a/b/c", "/a/b", "/a", "/"]);
        assert_eq!(prefixes("/"), vec!["/"]);
        assert_eq!(inside("/a/b/c", "/a"), "/b/c");
        assert_eq!(inside("/a/b", "/a/b"), "/");
        assert_eq!(inside("/a", "/"), "/a");
    }
}
