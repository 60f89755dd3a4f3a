//! Proptest strategies for every message type, for round-trip tests.
//!
//! Lengths are drawn up to each type's wire maximum (so the bounds
//! themselves are exercised), except payloads, which are kept small for
//! speed; the oversize tests in `tests.rs` cover the payload bound.

use eagernfs_xdr::{Bytes, Opaque};
use proptest::collection::vec;
use proptest::option::of;
use proptest::prelude::*;
use proptest::sample::select;

use crate::mount::*;
use crate::nfs3::*;
use crate::portmap::*;

pub(crate) fn opaque<const MAX: usize>() -> impl Strategy<Value = Opaque<MAX>> {
    vec(any::<u8>(), 0..=MAX.min(2048)).prop_map(|v| Opaque(Bytes::from(v)))
}

pub(crate) fn payload() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..600).prop_map(Bytes::from)
}

// ------------------------------------------------------------ NFSv3 shared types

/// Any status a `Fail` arm may carry (all but NFS3_OK).
pub(crate) fn fail_status() -> impl Strategy<Value = Nfsstat3> {
    select(&Nfsstat3::ALL[1..])
}

pub(crate) fn ftype3() -> impl Strategy<Value = Ftype3> {
    select(vec![Ftype3::Reg, Ftype3::Dir, Ftype3::Blk, Ftype3::Chr, Ftype3::Lnk, Ftype3::Sock, Ftype3::Fifo])
}

pub(crate) fn stable_how() -> impl Strategy<Value = StableHow> {
    select(vec![StableHow::Unstable, StableHow::DataSync, StableHow::FileSync])
}

pub(crate) fn specdata3() -> impl Strategy<Value = Specdata3> {
    (any::<u32>(), any::<u32>()).prop_map(|(specdata1, specdata2)| Specdata3 { specdata1, specdata2 })
}

pub(crate) fn nfs_fh3() -> impl Strategy<Value = NfsFh3> {
    opaque::<NFS3_FHSIZE>().prop_map(|data| NfsFh3 { data })
}

pub(crate) fn nfstime3() -> impl Strategy<Value = Nfstime3> {
    (any::<u32>(), any::<u32>()).prop_map(|(seconds, nseconds)| Nfstime3 { seconds, nseconds })
}

pub(crate) fn fattr3() -> impl Strategy<Value = Fattr3> {
    (
        (ftype3(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
        (any::<u64>(), any::<u64>(), specdata3(), any::<u64>(), any::<u64>()),
        (nfstime3(), nfstime3(), nfstime3()),
    )
        .prop_map(
            |((ftype, mode, nlink, uid, gid), (size, used, rdev, fsid, fileid), (atime, mtime, ctime))| {
                Fattr3 { ftype, mode, nlink, uid, gid, size, used, rdev, fsid, fileid, atime, mtime, ctime }
            },
        )
}

pub(crate) fn post_op_attr() -> impl Strategy<Value = PostOpAttr> {
    of(fattr3())
}

pub(crate) fn wcc_attr() -> impl Strategy<Value = WccAttr> {
    (any::<u64>(), nfstime3(), nfstime3()).prop_map(|(size, mtime, ctime)| WccAttr { size, mtime, ctime })
}

pub(crate) fn wcc_data() -> impl Strategy<Value = WccData> {
    (of(wcc_attr()), post_op_attr()).prop_map(|(before, after)| WccData { before, after })
}

pub(crate) fn post_op_fh3() -> impl Strategy<Value = PostOpFh3> {
    of(nfs_fh3())
}

pub(crate) fn set_time() -> impl Strategy<Value = SetTime> {
    prop_oneof![
        Just(SetTime::DontChange),
        Just(SetTime::SetToServerTime),
        nfstime3().prop_map(SetTime::SetToClientTime),
    ]
}

pub(crate) fn sattr3() -> impl Strategy<Value = Sattr3> {
    (of(any::<u32>()), of(any::<u32>()), of(any::<u32>()), of(any::<u64>()), set_time(), set_time())
        .prop_map(|(mode, uid, gid, size, atime, mtime)| Sattr3 { mode, uid, gid, size, atime, mtime })
}

pub(crate) fn diropargs3() -> impl Strategy<Value = Diropargs3> {
    (nfs_fh3(), opaque::<NFS3_NAME_MAX>()).prop_map(|(dir, name)| Diropargs3 { dir, name })
}

pub(crate) fn createhow3() -> impl Strategy<Value = Createhow3> {
    prop_oneof![
        sattr3().prop_map(Createhow3::Unchecked),
        sattr3().prop_map(Createhow3::Guarded),
        any::<[u8; 8]>().prop_map(Createhow3::Exclusive),
    ]
}

pub(crate) fn mknoddata3() -> impl Strategy<Value = Mknoddata3> {
    let device =
        || (sattr3(), specdata3()).prop_map(|(dev_attributes, spec)| Devicedata3 { dev_attributes, spec });
    prop_oneof![
        device().prop_map(Mknoddata3::Chr),
        device().prop_map(Mknoddata3::Blk),
        sattr3().prop_map(Mknoddata3::Sock),
        sattr3().prop_map(Mknoddata3::Fifo),
        Just(Mknoddata3::Reg),
        Just(Mknoddata3::Dir),
        Just(Mknoddata3::Lnk),
    ]
}

pub(crate) fn entry3() -> impl Strategy<Value = Entry3> {
    (any::<u64>(), opaque::<NFS3_NAME_MAX>(), any::<u64>()).prop_map(|(fileid, name, cookie)| Entry3 {
        fileid,
        name,
        cookie,
    })
}

pub(crate) fn entryplus3() -> impl Strategy<Value = Entryplus3> {
    (any::<u64>(), opaque::<NFS3_NAME_MAX>(), any::<u64>(), post_op_attr(), post_op_fh3()).prop_map(
        |(fileid, name, cookie, name_attributes, name_handle)| Entryplus3 {
            fileid,
            name,
            cookie,
            name_attributes,
            name_handle,
        },
    )
}

// ------------------------------------------------------------ NFSv3 procedures

/// A result strategy: the ok arm, or any error status with the fail arm.
macro_rules! res {
    ($res:ident, $ok:expr, $fail:expr) => {
        prop_oneof![$ok.prop_map($res::Ok), (fail_status(), $fail).prop_map(|(s, f)| $res::Fail(s, f))]
    };
}

pub(crate) fn null3_args() -> impl Strategy<Value = Null3Args> {
    Just(Null3Args {})
}
pub(crate) fn null3_res() -> impl Strategy<Value = Null3Res> {
    Just(Null3Res {})
}

pub(crate) fn getattr3_args() -> impl Strategy<Value = Getattr3Args> {
    nfs_fh3().prop_map(|object| Getattr3Args { object })
}
pub(crate) fn getattr3_res() -> impl Strategy<Value = Getattr3Res> {
    res!(Getattr3Res, fattr3().prop_map(|obj_attributes| Getattr3ResOk { obj_attributes }), Just(()))
}

pub(crate) fn setattr3_args() -> impl Strategy<Value = Setattr3Args> {
    (nfs_fh3(), sattr3(), of(nfstime3())).prop_map(|(object, new_attributes, guard)| Setattr3Args {
        object,
        new_attributes,
        guard,
    })
}
pub(crate) fn setattr3_res() -> impl Strategy<Value = Setattr3Res> {
    res!(
        Setattr3Res,
        wcc_data().prop_map(|obj_wcc| Setattr3ResOk { obj_wcc }),
        wcc_data().prop_map(|obj_wcc| Setattr3ResFail { obj_wcc })
    )
}

pub(crate) fn lookup3_args() -> impl Strategy<Value = Lookup3Args> {
    diropargs3().prop_map(|what| Lookup3Args { what })
}
pub(crate) fn lookup3_res() -> impl Strategy<Value = Lookup3Res> {
    res!(
        Lookup3Res,
        (nfs_fh3(), post_op_attr(), post_op_attr()).prop_map(|(object, obj_attributes, dir_attributes)| {
            Lookup3ResOk { object, obj_attributes, dir_attributes }
        }),
        post_op_attr().prop_map(|dir_attributes| Lookup3ResFail { dir_attributes })
    )
}

pub(crate) fn access3_args() -> impl Strategy<Value = Access3Args> {
    (nfs_fh3(), any::<u32>()).prop_map(|(object, access)| Access3Args { object, access })
}
pub(crate) fn access3_res() -> impl Strategy<Value = Access3Res> {
    res!(
        Access3Res,
        (post_op_attr(), any::<u32>())
            .prop_map(|(obj_attributes, access)| Access3ResOk { obj_attributes, access }),
        post_op_attr().prop_map(|obj_attributes| Access3ResFail { obj_attributes })
    )
}

pub(crate) fn readlink3_args() -> impl Strategy<Value = Readlink3Args> {
    nfs_fh3().prop_map(|symlink| Readlink3Args { symlink })
}
pub(crate) fn readlink3_res() -> impl Strategy<Value = Readlink3Res> {
    res!(
        Readlink3Res,
        (post_op_attr(), opaque::<NFS3_PATH_MAX>())
            .prop_map(|(symlink_attributes, data)| Readlink3ResOk { symlink_attributes, data }),
        post_op_attr().prop_map(|symlink_attributes| Readlink3ResFail { symlink_attributes })
    )
}

pub(crate) fn read3_args() -> impl Strategy<Value = Read3Args> {
    (nfs_fh3(), any::<u64>(), any::<u32>()).prop_map(|(file, offset, count)| Read3Args {
        file,
        offset,
        count,
    })
}
pub(crate) fn read3_res() -> impl Strategy<Value = Read3Res> {
    res!(
        Read3Res,
        (post_op_attr(), any::<u32>(), any::<bool>(), payload())
            .prop_map(|(file_attributes, count, eof, data)| Read3ResOk { file_attributes, count, eof, data }),
        post_op_attr().prop_map(|file_attributes| Read3ResFail { file_attributes })
    )
}

pub(crate) fn write3_args() -> impl Strategy<Value = Write3Args> {
    (nfs_fh3(), any::<u64>(), 0..=MAX_IO_SIZE as u32, stable_how(), payload())
        .prop_map(|(file, offset, count, stable, data)| Write3Args { file, offset, count, stable, data })
}
pub(crate) fn write3_res() -> impl Strategy<Value = Write3Res> {
    res!(
        Write3Res,
        (wcc_data(), any::<u32>(), stable_how(), any::<[u8; 8]>())
            .prop_map(|(file_wcc, count, committed, verf)| Write3ResOk { file_wcc, count, committed, verf }),
        wcc_data().prop_map(|file_wcc| Write3ResFail { file_wcc })
    )
}

pub(crate) fn create3_args() -> impl Strategy<Value = Create3Args> {
    (diropargs3(), createhow3()).prop_map(|(where_, how)| Create3Args { where_, how })
}

/// The `{ obj, obj_attributes, dir_wcc }` / `{ dir_wcc }` result shared by
/// CREATE, MKDIR, SYMLINK and MKNOD.
macro_rules! create_like_res {
    ($name:ident, $res:ident, $ok:ident, $fail:ident) => {
        pub(crate) fn $name() -> impl Strategy<Value = $res> {
            res!(
                $res,
                (post_op_fh3(), post_op_attr(), wcc_data()).prop_map(|(obj, obj_attributes, dir_wcc)| $ok {
                    obj,
                    obj_attributes,
                    dir_wcc
                }),
                wcc_data().prop_map(|dir_wcc| $fail { dir_wcc })
            )
        }
    };
}
create_like_res!(create3_res, Create3Res, Create3ResOk, Create3ResFail);
create_like_res!(mkdir3_res, Mkdir3Res, Mkdir3ResOk, Mkdir3ResFail);
create_like_res!(symlink3_res, Symlink3Res, Symlink3ResOk, Symlink3ResFail);
create_like_res!(mknod3_res, Mknod3Res, Mknod3ResOk, Mknod3ResFail);

pub(crate) fn mkdir3_args() -> impl Strategy<Value = Mkdir3Args> {
    (diropargs3(), sattr3()).prop_map(|(where_, attributes)| Mkdir3Args { where_, attributes })
}

pub(crate) fn symlink3_args() -> impl Strategy<Value = Symlink3Args> {
    (diropargs3(), sattr3(), opaque::<NFS3_PATH_MAX>()).prop_map(
        |(where_, symlink_attributes, symlink_data)| Symlink3Args {
            where_,
            symlink: Symlinkdata3 { symlink_attributes, symlink_data },
        },
    )
}

pub(crate) fn mknod3_args() -> impl Strategy<Value = Mknod3Args> {
    (diropargs3(), mknoddata3()).prop_map(|(where_, what)| Mknod3Args { where_, what })
}

pub(crate) fn remove3_args() -> impl Strategy<Value = Remove3Args> {
    diropargs3().prop_map(|object| Remove3Args { object })
}
pub(crate) fn remove3_res() -> impl Strategy<Value = Remove3Res> {
    res!(
        Remove3Res,
        wcc_data().prop_map(|dir_wcc| Remove3ResOk { dir_wcc }),
        wcc_data().prop_map(|dir_wcc| Remove3ResFail { dir_wcc })
    )
}

pub(crate) fn rmdir3_args() -> impl Strategy<Value = Rmdir3Args> {
    diropargs3().prop_map(|object| Rmdir3Args { object })
}
pub(crate) fn rmdir3_res() -> impl Strategy<Value = Rmdir3Res> {
    res!(
        Rmdir3Res,
        wcc_data().prop_map(|dir_wcc| Rmdir3ResOk { dir_wcc }),
        wcc_data().prop_map(|dir_wcc| Rmdir3ResFail { dir_wcc })
    )
}

pub(crate) fn rename3_args() -> impl Strategy<Value = Rename3Args> {
    (diropargs3(), diropargs3()).prop_map(|(from, to)| Rename3Args { from, to })
}
pub(crate) fn rename3_res() -> impl Strategy<Value = Rename3Res> {
    res!(
        Rename3Res,
        (wcc_data(), wcc_data()).prop_map(|(fromdir_wcc, todir_wcc)| Rename3ResOk { fromdir_wcc, todir_wcc }),
        (wcc_data(), wcc_data())
            .prop_map(|(fromdir_wcc, todir_wcc)| Rename3ResFail { fromdir_wcc, todir_wcc })
    )
}

pub(crate) fn link3_args() -> impl Strategy<Value = Link3Args> {
    (nfs_fh3(), diropargs3()).prop_map(|(file, link)| Link3Args { file, link })
}
pub(crate) fn link3_res() -> impl Strategy<Value = Link3Res> {
    res!(
        Link3Res,
        (post_op_attr(), wcc_data())
            .prop_map(|(file_attributes, linkdir_wcc)| Link3ResOk { file_attributes, linkdir_wcc }),
        (post_op_attr(), wcc_data())
            .prop_map(|(file_attributes, linkdir_wcc)| Link3ResFail { file_attributes, linkdir_wcc })
    )
}

pub(crate) fn readdir3_args() -> impl Strategy<Value = Readdir3Args> {
    (nfs_fh3(), any::<u64>(), any::<[u8; 8]>(), any::<u32>())
        .prop_map(|(dir, cookie, cookieverf, count)| Readdir3Args { dir, cookie, cookieverf, count })
}
pub(crate) fn readdir3_resok() -> impl Strategy<Value = Readdir3ResOk> {
    (post_op_attr(), any::<[u8; 8]>(), vec(entry3(), 0..8), any::<bool>()).prop_map(
        |(dir_attributes, cookieverf, entries, eof)| Readdir3ResOk {
            dir_attributes,
            cookieverf,
            reply: Dirlist3 { entries, eof },
        },
    )
}
pub(crate) fn readdir3_res() -> impl Strategy<Value = Readdir3Res> {
    res!(
        Readdir3Res,
        readdir3_resok(),
        post_op_attr().prop_map(|dir_attributes| Readdir3ResFail { dir_attributes })
    )
}

pub(crate) fn readdirplus3_args() -> impl Strategy<Value = Readdirplus3Args> {
    (nfs_fh3(), any::<u64>(), any::<[u8; 8]>(), any::<u32>(), any::<u32>()).prop_map(
        |(dir, cookie, cookieverf, dircount, maxcount)| Readdirplus3Args {
            dir,
            cookie,
            cookieverf,
            dircount,
            maxcount,
        },
    )
}
pub(crate) fn readdirplus3_resok() -> impl Strategy<Value = Readdirplus3ResOk> {
    (post_op_attr(), any::<[u8; 8]>(), vec(entryplus3(), 0..8), any::<bool>()).prop_map(
        |(dir_attributes, cookieverf, entries, eof)| Readdirplus3ResOk {
            dir_attributes,
            cookieverf,
            reply: Dirlistplus3 { entries, eof },
        },
    )
}
pub(crate) fn readdirplus3_res() -> impl Strategy<Value = Readdirplus3Res> {
    res!(
        Readdirplus3Res,
        readdirplus3_resok(),
        post_op_attr().prop_map(|dir_attributes| Readdirplus3ResFail { dir_attributes })
    )
}

pub(crate) fn fsstat3_args() -> impl Strategy<Value = Fsstat3Args> {
    nfs_fh3().prop_map(|fsroot| Fsstat3Args { fsroot })
}
pub(crate) fn fsstat3_res() -> impl Strategy<Value = Fsstat3Res> {
    res!(
        Fsstat3Res,
        (post_op_attr(), any::<[u64; 6]>(), any::<u32>()).prop_map(
            |(obj_attributes, [tbytes, fbytes, abytes, tfiles, ffiles, afiles], invarsec)| Fsstat3ResOk {
                obj_attributes,
                tbytes,
                fbytes,
                abytes,
                tfiles,
                ffiles,
                afiles,
                invarsec,
            }
        ),
        post_op_attr().prop_map(|obj_attributes| Fsstat3ResFail { obj_attributes })
    )
}

pub(crate) fn fsinfo3_args() -> impl Strategy<Value = Fsinfo3Args> {
    nfs_fh3().prop_map(|fsroot| Fsinfo3Args { fsroot })
}
pub(crate) fn fsinfo3_res() -> impl Strategy<Value = Fsinfo3Res> {
    res!(
        Fsinfo3Res,
        (post_op_attr(), any::<[u32; 7]>(), any::<u64>(), nfstime3(), any::<u32>()).prop_map(
            |(
                obj_attributes,
                [rtmax, rtpref, rtmult, wtmax, wtpref, wtmult, dtpref],
                maxfilesize,
                time_delta,
                properties,
            )| {
                Fsinfo3ResOk {
                    obj_attributes,
                    rtmax,
                    rtpref,
                    rtmult,
                    wtmax,
                    wtpref,
                    wtmult,
                    dtpref,
                    maxfilesize,
                    time_delta,
                    properties,
                }
            }
        ),
        post_op_attr().prop_map(|obj_attributes| Fsinfo3ResFail { obj_attributes })
    )
}

pub(crate) fn pathconf3_args() -> impl Strategy<Value = Pathconf3Args> {
    nfs_fh3().prop_map(|object| Pathconf3Args { object })
}
pub(crate) fn pathconf3_res() -> impl Strategy<Value = Pathconf3Res> {
    res!(
        Pathconf3Res,
        (post_op_attr(), any::<u32>(), any::<u32>(), any::<[bool; 4]>()).prop_map(
            |(
                obj_attributes,
                linkmax,
                name_max,
                [no_trunc, chown_restricted, case_insensitive, case_preserving],
            )| {
                Pathconf3ResOk {
                    obj_attributes,
                    linkmax,
                    name_max,
                    no_trunc,
                    chown_restricted,
                    case_insensitive,
                    case_preserving,
                }
            }
        ),
        post_op_attr().prop_map(|obj_attributes| Pathconf3ResFail { obj_attributes })
    )
}

pub(crate) fn commit3_args() -> impl Strategy<Value = Commit3Args> {
    (nfs_fh3(), any::<u64>(), any::<u32>()).prop_map(|(file, offset, count)| Commit3Args {
        file,
        offset,
        count,
    })
}
pub(crate) fn commit3_res() -> impl Strategy<Value = Commit3Res> {
    res!(
        Commit3Res,
        (wcc_data(), any::<[u8; 8]>()).prop_map(|(file_wcc, verf)| Commit3ResOk { file_wcc, verf }),
        wcc_data().prop_map(|file_wcc| Commit3ResFail { file_wcc })
    )
}

/// Arguments of any NFSv3 procedure.
pub(crate) fn nfs3_args() -> impl Strategy<Value = Nfs3Args> {
    prop_oneof![
        null3_args().prop_map(Nfs3Args::from),
        getattr3_args().prop_map(Nfs3Args::from),
        setattr3_args().prop_map(Nfs3Args::from),
        lookup3_args().prop_map(Nfs3Args::from),
        access3_args().prop_map(Nfs3Args::from),
        readlink3_args().prop_map(Nfs3Args::from),
        read3_args().prop_map(Nfs3Args::from),
        write3_args().prop_map(Nfs3Args::from),
        create3_args().prop_map(Nfs3Args::from),
        mkdir3_args().prop_map(Nfs3Args::from),
        symlink3_args().prop_map(Nfs3Args::from),
        mknod3_args().prop_map(Nfs3Args::from),
        remove3_args().prop_map(Nfs3Args::from),
        rmdir3_args().prop_map(Nfs3Args::from),
        rename3_args().prop_map(Nfs3Args::from),
        link3_args().prop_map(Nfs3Args::from),
        readdir3_args().prop_map(Nfs3Args::from),
        readdirplus3_args().prop_map(Nfs3Args::from),
        fsstat3_args().prop_map(Nfs3Args::from),
        fsinfo3_args().prop_map(Nfs3Args::from),
        pathconf3_args().prop_map(Nfs3Args::from),
        commit3_args().prop_map(Nfs3Args::from),
    ]
}

/// Result of any NFSv3 procedure.
pub(crate) fn nfs3_res() -> impl Strategy<Value = Nfs3Res> {
    prop_oneof![
        null3_res().prop_map(Nfs3Res::from),
        getattr3_res().prop_map(Nfs3Res::from),
        setattr3_res().prop_map(Nfs3Res::from),
        lookup3_res().prop_map(Nfs3Res::from),
        access3_res().prop_map(Nfs3Res::from),
        readlink3_res().prop_map(Nfs3Res::from),
        read3_res().prop_map(Nfs3Res::from),
        write3_res().prop_map(Nfs3Res::from),
        create3_res().prop_map(Nfs3Res::from),
        mkdir3_res().prop_map(Nfs3Res::from),
        symlink3_res().prop_map(Nfs3Res::from),
        mknod3_res().prop_map(Nfs3Res::from),
        remove3_res().prop_map(Nfs3Res::from),
        rmdir3_res().prop_map(Nfs3Res::from),
        rename3_res().prop_map(Nfs3Res::from),
        link3_res().prop_map(Nfs3Res::from),
        readdir3_res().prop_map(Nfs3Res::from),
        readdirplus3_res().prop_map(Nfs3Res::from),
        fsstat3_res().prop_map(Nfs3Res::from),
        fsinfo3_res().prop_map(Nfs3Res::from),
        pathconf3_res().prop_map(Nfs3Res::from),
        commit3_res().prop_map(Nfs3Res::from),
    ]
}

// ------------------------------------------------------------ MOUNT

pub(crate) fn mountstat3_fail() -> impl Strategy<Value = Mountstat3> {
    select(vec![
        Mountstat3::Perm,
        Mountstat3::Noent,
        Mountstat3::Io,
        Mountstat3::Acces,
        Mountstat3::Notdir,
        Mountstat3::Inval,
        Mountstat3::Nametoolong,
        Mountstat3::Notsupp,
        Mountstat3::Serverfault,
    ])
}

pub(crate) fn mountres3() -> impl Strategy<Value = Mountres3> {
    prop_oneof![
        (opaque::<FHSIZE3>(), vec(any::<u32>(), 0..=MAX_AUTH_FLAVORS))
            .prop_map(|(fhandle, auth_flavors)| Mountres3::Ok(Mountres3Ok { fhandle, auth_flavors })),
        mountstat3_fail().prop_map(Mountres3::Fail),
    ]
}

pub(crate) fn fhstatus() -> impl Strategy<Value = Fhstatus> {
    prop_oneof![any::<[u8; FHSIZE]>().prop_map(Fhstatus::Ok), (1..=u32::MAX).prop_map(Fhstatus::Fail)]
}

pub(crate) fn mountlist() -> impl Strategy<Value = Mountlist> {
    vec(
        (opaque::<MNTNAMLEN>(), opaque::<MNTPATHLEN>())
            .prop_map(|(ml_hostname, ml_directory)| Mountbody { ml_hostname, ml_directory }),
        0..5,
    )
    .prop_map(Mountlist)
}

pub(crate) fn exports() -> impl Strategy<Value = Exports> {
    vec(
        (opaque::<MNTPATHLEN>(), vec(opaque::<MNTNAMLEN>(), 0..4))
            .prop_map(|(ex_dir, groups)| Exportnode { ex_dir, ex_groups: Groups(groups) }),
        0..5,
    )
    .prop_map(Exports)
}

pub(crate) fn mount_args() -> impl Strategy<Value = MountArgs> {
    prop_oneof![
        Just(MountArgs::Null),
        opaque::<MNTPATHLEN>().prop_map(MountArgs::Mnt),
        Just(MountArgs::Dump),
        opaque::<MNTPATHLEN>().prop_map(MountArgs::Umnt),
        Just(MountArgs::Umntall),
        Just(MountArgs::Export),
    ]
}

/// A MOUNT result and the version it belongs to (MNT differs by version).
pub(crate) fn mount_res() -> impl Strategy<Value = (u32, MountRes)> {
    let any_version = select(vec![MOUNT_V1, MOUNT_V3]);
    prop_oneof![
        any_version.clone().prop_map(|v| (v, MountRes::Null)),
        mountres3().prop_map(|r| (MOUNT_V3, MountRes::Mnt3(r))),
        fhstatus().prop_map(|r| (MOUNT_V1, MountRes::Mnt1(r))),
        (any_version.clone(), mountlist()).prop_map(|(v, l)| (v, MountRes::Dump(l))),
        any_version.clone().prop_map(|v| (v, MountRes::Umnt)),
        any_version.clone().prop_map(|v| (v, MountRes::Umntall)),
        (any_version, exports()).prop_map(|(v, e)| (v, MountRes::Export(e))),
    ]
}

// ------------------------------------------------------------ portmap

pub(crate) fn mapping() -> impl Strategy<Value = Mapping> {
    (any::<u32>(), any::<u32>(), select(vec![IPPROTO_TCP, IPPROTO_UDP]), any::<u32>())
        .prop_map(|(prog, vers, prot, port)| Mapping { prog, vers, prot, port })
}

pub(crate) fn portmap_args() -> impl Strategy<Value = PortmapArgs> {
    prop_oneof![
        Just(PortmapArgs::Null),
        mapping().prop_map(PortmapArgs::Set),
        mapping().prop_map(PortmapArgs::Unset),
        mapping().prop_map(PortmapArgs::Getport),
        Just(PortmapArgs::Dump),
        (any::<u32>(), any::<u32>(), any::<u32>(), opaque::<CALLIT_BODY_MAX>())
            .prop_map(|(prog, vers, proc_, args)| PortmapArgs::Callit(CallArgs { prog, vers, proc_, args })),
    ]
}

pub(crate) fn portmap_res() -> impl Strategy<Value = PortmapRes> {
    prop_oneof![
        Just(PortmapRes::Null),
        any::<bool>().prop_map(PortmapRes::Set),
        any::<bool>().prop_map(PortmapRes::Unset),
        any::<u32>().prop_map(PortmapRes::Getport),
        vec(mapping(), 0..6).prop_map(|m| PortmapRes::Dump(Pmaplist(m))),
        (any::<u32>(), opaque::<CALLIT_BODY_MAX>())
            .prop_map(|(port, res)| PortmapRes::Callit(CallResult { port, res })),
    ]
}
