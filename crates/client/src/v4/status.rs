//! NFSv4 statuses as the client's errors: a status NFSv3 also has (same
//! meaning, mostly the same number) becomes [`NfsError::Nfs`], so the
//! caching layer and the tools react to ENOENT, ESTALE or JUKEBOX alike over
//! both versions; the rest is [`NfsError::Nfs4`].

use crate::ops::NfsError;
use eagernfs_proto::nfs3::Nfsstat3;
use eagernfs_proto::nfs4::Nfsstat4;

/// The NFSv3 status with the meaning of `s`, if NFSv3 has one.
pub(crate) fn v3_twin(s: Nfsstat4) -> Option<Nfsstat3> {
    use Nfsstat4 as S;
    Some(match s {
        S::Ok => Nfsstat3::Ok,
        S::Perm => Nfsstat3::Perm,
        S::Noent => Nfsstat3::Noent,
        S::Io => Nfsstat3::Io,
        S::Nxio => Nfsstat3::Nxio,
        S::Access => Nfsstat3::Acces,
        S::Exist => Nfsstat3::Exist,
        S::Xdev => Nfsstat3::Xdev,
        S::Notdir => Nfsstat3::Notdir,
        S::Isdir => Nfsstat3::Isdir,
        S::Inval => Nfsstat3::Inval,
        S::Fbig => Nfsstat3::Fbig,
        S::Nospc => Nfsstat3::Nospc,
        S::Rofs => Nfsstat3::Rofs,
        S::Mlink => Nfsstat3::Mlink,
        S::Nametoolong => Nfsstat3::Nametoolong,
        S::Notempty => Nfsstat3::Notempty,
        S::Dquot => Nfsstat3::Dquot,
        S::Stale | S::Fhexpired => Nfsstat3::Stale,
        S::Badhandle => Nfsstat3::Badhandle,
        S::BadCookie => Nfsstat3::BadCookie,
        S::Notsupp => Nfsstat3::Notsupp,
        S::Toosmall => Nfsstat3::Toosmall,
        S::Serverfault => Nfsstat3::Serverfault,
        S::Badtype => Nfsstat3::Badtype,
        // "Busy, try again later": what the caching layer retries.
        S::Delay => Nfsstat3::Jukebox,
        _ => return None,
    })
}

/// The error for a failed operation's status.
pub(crate) fn error(s: Nfsstat4) -> NfsError {
    match v3_twin(s) {
        Some(v3) => NfsError::Nfs(v3),
        None => NfsError::Nfs4(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_statuses_keep_their_nfsv3_meaning() {
        assert_eq!(error(Nfsstat4::Noent), NfsError::Nfs(Nfsstat3::Noent));
        assert_eq!(error(Nfsstat4::Access), NfsError::Nfs(Nfsstat3::Acces));
        assert_eq!(error(Nfsstat4::Delay), NfsError::Nfs(Nfsstat3::Jukebox));
        assert_eq!(error(Nfsstat4::Stale).errno(), libc::ESTALE);
        // The rest is its own, with Linux's errno.
        assert_eq!(error(Nfsstat4::ShareDenied), NfsError::Nfs4(Nfsstat4::ShareDenied));
        assert_eq!(error(Nfsstat4::ShareDenied).errno(), libc::EACCES);
        assert_eq!(error(Nfsstat4::FileOpen).errno(), libc::EBUSY);
        assert_eq!(error(Nfsstat4::Symlink).errno(), libc::ELOOP);
        assert_eq!(error(Nfsstat4::BadStateid).errno(), libc::EIO);
    }
}
