//! Round trips for every message type, exact wire layouts checked against
//! RFC 1813 by hand, bounds on wire lengths, and the procedure tables.

use std::fmt::Debug;

use eagernfs_xdr::{decode_exact, encode_opaque, to_vec, BufMut, Bytes, Decode, Encode, Opaque};
use proptest::prelude::*;

use crate::arbitrary::*;
use crate::mount::*;
use crate::nfs3::*;
use crate::portmap::*;
use crate::{fuzzing, Error, ProcInfo, XdrError};

/// Encode, check the length is a multiple of 4, decode exactly, compare;
/// then check that every strict prefix fails to decode.
fn round_trip<T: Encode + Decode + PartialEq + Debug>(v: &T) -> Result<(), TestCaseError> {
    let bytes = to_vec(v);
    prop_assert_eq!(bytes.len() % 4, 0);
    let back = decode_exact::<T>(Bytes::from(bytes.clone()));
    prop_assert_eq!(back.as_ref(), Ok(v));
    // Cutting at word boundaries is enough: XDR items are whole words.
    for cut in (0..bytes.len()).step_by(4) {
        prop_assert!(
            decode_exact::<T>(Bytes::copy_from_slice(&bytes[..cut])).is_err(),
            "prefix {} decoded",
            cut
        );
    }
    Ok(())
}

macro_rules! round_trips {
    ($($name:ident: $strategy:expr;)*) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            $(
                #[test]
                fn $name(v in $strategy) {
                    round_trip(&v)?;
                }
            )*
        }
    };
}

round_trips! {
    rt_null3_args: null3_args();
    rt_null3_res: null3_res();
    rt_getattr3_args: getattr3_args();
    rt_getattr3_res: getattr3_res();
    rt_setattr3_args: setattr3_args();
    rt_setattr3_res: setattr3_res();
    rt_lookup3_args: lookup3_args();
    rt_lookup3_res: lookup3_res();
    rt_access3_args: access3_args();
    rt_access3_res: access3_res();
    rt_readlink3_args: readlink3_args();
    rt_readlink3_res: readlink3_res();
    rt_read3_args: read3_args();
    rt_read3_res: read3_res();
    rt_write3_args: write3_args();
    rt_write3_res: write3_res();
    rt_create3_args: create3_args();
    rt_create3_res: create3_res();
    rt_mkdir3_args: mkdir3_args();
    rt_mkdir3_res: mkdir3_res();
    rt_symlink3_args: symlink3_args();
    rt_symlink3_res: symlink3_res();
    rt_mknod3_args: mknod3_args();
    rt_mknod3_res: mknod3_res();
    rt_remove3_args: remove3_args();
    rt_remove3_res: remove3_res();
    rt_rmdir3_args: rmdir3_args();
    rt_rmdir3_res: rmdir3_res();
    rt_rename3_args: rename3_args();
    rt_rename3_res: rename3_res();
    rt_link3_args: link3_args();
    rt_link3_res: link3_res();
    rt_readdir3_args: readdir3_args();
    rt_readdir3_res: readdir3_res();
    rt_readdirplus3_args: readdirplus3_args();
    rt_readdirplus3_res: readdirplus3_res();
    rt_fsstat3_args: fsstat3_args();
    rt_fsstat3_res: fsstat3_res();
    rt_fsinfo3_args: fsinfo3_args();
    rt_fsinfo3_res: fsinfo3_res();
    rt_pathconf3_args: pathconf3_args();
    rt_pathconf3_res: pathconf3_res();
    rt_commit3_args: commit3_args();
    rt_commit3_res: commit3_res();
    rt_mountres3: mountres3();
    rt_fhstatus: fhstatus();
    rt_mountlist: mountlist();
    rt_exports: exports();
    rt_mapping: mapping();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The by-number decoders pick the right type for every procedure, and
    /// the decoded value names the procedure it was decoded as.
    #[test]
    fn nfs3_args_round_trip_by_procedure(v in nfs3_args()) {
        let proc_ = v.procedure();
        let bytes = Bytes::from(to_vec(&v));
        prop_assert_eq!(bytes.len() % 4, 0);
        let mut buf = bytes.clone();
        prop_assert_eq!(Nfs3Args::decode(proc_, &mut buf), Ok(v));
        prop_assert!(buf.is_empty());
        prop_assert!(fuzzing::decode_nfs3_args(proc_, &bytes).is_ok());
    }

    #[test]
    fn nfs3_res_round_trip_by_procedure(v in nfs3_res()) {
        let proc_ = v.procedure();
        let bytes = Bytes::from(to_vec(&v));
        prop_assert_eq!(bytes.len() % 4, 0);
        let mut buf = bytes.clone();
        prop_assert_eq!(Nfs3Res::decode(proc_, &mut buf), Ok(v));
        prop_assert!(buf.is_empty());
        prop_assert!(fuzzing::decode_nfs3_res(proc_, &bytes).is_ok());
    }

    #[test]
    fn mount_round_trip_by_procedure(args in mount_args(), (version, res) in mount_res()) {
        let bytes = to_vec(&args);
        prop_assert_eq!(bytes.len() % 4, 0);
        let mut buf = Bytes::from(bytes);
        prop_assert_eq!(MountArgs::decode(args.procedure(), &mut buf), Ok(args));
        prop_assert!(buf.is_empty());

        let bytes = to_vec(&res);
        prop_assert_eq!(bytes.len() % 4, 0);
        let mut buf = Bytes::from(bytes);
        prop_assert_eq!(MountRes::decode(version, res.procedure(), &mut buf), Ok(res));
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn portmap_round_trip_by_procedure(args in portmap_args(), res in portmap_res()) {
        let bytes = to_vec(&args);
        prop_assert_eq!(bytes.len() % 4, 0);
        let mut buf = Bytes::from(bytes);
        prop_assert_eq!(PortmapArgs::decode(args.procedure(), &mut buf), Ok(args));
        prop_assert!(buf.is_empty());

        let bytes = to_vec(&res);
        prop_assert_eq!(bytes.len() % 4, 0);
        let mut buf = Bytes::from(bytes);
        prop_assert_eq!(PortmapRes::decode(res.procedure(), &mut buf), Ok(res));
        prop_assert!(buf.is_empty());
    }

    /// `encoded_len` is exact, so the server can fill a READDIR reply to
    /// the byte without encoding it twice.
    #[test]
    fn readdir_sizes_are_exact(ok in readdir3_resok()) {
        prop_assert_eq!(ok.encoded_len(), to_vec(&ok).len());
        for e in &ok.reply.entries {
            prop_assert_eq!(e.encoded_len(), 4 + to_vec(e).len());
        }
        let empty = Readdir3ResOk { reply: Dirlist3 { entries: vec![], eof: true }, ..ok.clone() };
        prop_assert_eq!(Readdir3ResOk::fixed_len(&ok.dir_attributes), to_vec(&empty).len());
        let res = Readdir3Res::Ok(ok.clone());
        prop_assert_eq!(NFS3_STATUS_LEN + ok.encoded_len(), to_vec(&res).len());
    }

    #[test]
    fn readdirplus_sizes_are_exact(ok in readdirplus3_resok()) {
        prop_assert_eq!(ok.encoded_len(), to_vec(&ok).len());
        for e in &ok.reply.entries {
            prop_assert_eq!(e.encoded_len(), 4 + to_vec(e).len());
            let plain = Entry3 { fileid: e.fileid, name: e.name.clone(), cookie: e.cookie };
            prop_assert_eq!(e.dircount_len(), plain.encoded_len());
        }
        let empty = Readdirplus3ResOk { reply: Dirlistplus3 { entries: vec![], eof: false }, ..ok.clone() };
        prop_assert_eq!(Readdirplus3ResOk::fixed_len(&ok.dir_attributes), to_vec(&empty).len());
    }

    /// Random bytes thrown at every procedure of every program decode or
    /// fail; they never panic (the fuzzing functions also assert that any
    /// value that does decode re-encodes consistently).
    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        for p in 0..NFS3_PROCEDURES.len() as u32 + 2 {
            let _ = fuzzing::decode_nfs3_args(p, &data);
            let _ = fuzzing::decode_nfs3_res(p, &data);
        }
        for p in 0..MOUNT_PROCEDURES.len() as u32 + 2 {
            let _ = fuzzing::decode_mount_args(p, &data);
            let _ = fuzzing::decode_mount_res(MOUNT_V1, p, &data);
            let _ = fuzzing::decode_mount_res(MOUNT_V3, p, &data);
        }
        for p in 0..PORTMAP_PROCEDURES.len() as u32 + 2 {
            let _ = fuzzing::decode_portmap_args(p, &data);
            let _ = fuzzing::decode_portmap_res(p, &data);
        }
        for p in 0..26 {
            let _ = fuzzing::decode_nlm_args(p, &data);
            let _ = fuzzing::decode_nsm_args(p % 8, &data);
        }
        fuzzing::decode_xdr_opaque(&data);
    }

    /// Random words are likelier than random bytes to look like valid
    /// discriminants and small lengths, reaching deeper into the decoders.
    #[test]
    fn random_small_words_never_panic(words in proptest::collection::vec(0u32..4, 0..128)) {
        let mut data = Vec::new();
        for w in &words {
            data.put_u32(*w);
        }
        for p in 0..NFS3_PROCEDURES.len() as u32 {
            let _ = fuzzing::decode_nfs3_args(p, &data);
            let _ = fuzzing::decode_nfs3_res(p, &data);
        }
        for p in 0..MOUNT_PROCEDURES.len() as u32 {
            let _ = fuzzing::decode_mount_res(MOUNT_V3, p, &data);
        }
        let _ = fuzzing::decode_portmap_res(PMAPPROC_DUMP, &data);
        for p in 0..24 {
            let _ = fuzzing::decode_nlm_args(p, &data);
        }
        let _ = fuzzing::decode_nsm_args(crate::nlm::sm::MON, &data);
    }
}

// ------------------------------------------------------------ exact wire layouts

fn fh(bytes: &'static [u8]) -> NfsFh3 {
    NfsFh3 { data: Opaque::from_static(bytes) }
}

#[test]
fn read3_args_layout() {
    let args = Read3Args { file: fh(b"\x01\x02\x03\x04\x05"), offset: 0x0102_0304_0506_0708, count: 0x8000 };
    let expected: &[u8] = &[
        0, 0, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0, // nfs_fh3: length 5, bytes, 3 padding
        1, 2, 3, 4, 5, 6, 7, 8, // offset
        0, 0, 0x80, 0, // count
    ];
    assert_eq!(to_vec(&args), expected);
    assert_eq!(to_vec(&Nfs3Args::Read(args)), expected);
}

#[test]
fn fattr3_is_84_bytes_in_rfc_order() {
    let attr = Fattr3 {
        ftype: Ftype3::Lnk,
        mode: 0o777,
        nlink: 1,
        uid: 2,
        gid: 3,
        size: 4,
        used: 5,
        rdev: Specdata3 { specdata1: 6, specdata2: 7 },
        fsid: 8,
        fileid: 9,
        atime: Nfstime3 { seconds: 10, nseconds: 11 },
        mtime: Nfstime3 { seconds: 12, nseconds: 13 },
        ctime: Nfstime3 { seconds: 14, nseconds: 15 },
    };
    let bytes = to_vec(&attr);
    assert_eq!(bytes.len(), FATTR3_LEN);
    let words: Vec<u32> = bytes.chunks(4).map(|c| u32::from_be_bytes(c.try_into().unwrap())).collect();
    assert_eq!(
        words,
        [5, 0o777, 1, 2, 3, 0, 4, 0, 5, 6, 7, 0, 8, 0, 9, 10, 11, 12, 13, 14, 15],
        "type, mode, nlink, uid, gid, size, used, rdev, fsid, fileid, atime, mtime, ctime"
    );
    assert_eq!(post_op_attr_len(&Some(attr)), to_vec(&Some(attr)).len());
    assert_eq!(post_op_attr_len(&None), 4);
}

#[test]
fn failure_layout_is_status_then_fail_arm() {
    let res = Lookup3Res::Fail(Nfsstat3::Noent, Lookup3ResFail { dir_attributes: None });
    assert_eq!(to_vec(&res), [0, 0, 0, 2, 0, 0, 0, 0]);
    assert_eq!(res.status(), Nfsstat3::Noent);
    let res = Getattr3Res::Fail(Nfsstat3::Jukebox, ());
    assert_eq!(to_vec(&res), 10008u32.to_be_bytes());
    assert_eq!(decode_exact::<Getattr3Res>(Bytes::from(to_vec(&res))), Ok(res));
    // A status word with no meaning is an error, not a failure arm.
    assert_eq!(
        decode_exact::<Getattr3Res>(Bytes::from_static(&[0, 0, 0, 3])),
        Err(XdrError::BadEnum { name: "Nfsstat3", value: 3 })
    );
}

#[test]
fn nfsstat3_wire_values_match_rfc() {
    let expected = [
        0, 1, 2, 5, 6, 13, 17, 18, 19, 20, 21, 22, 27, 28, 30, 31, 63, 66, 69, 70, 71, 10001, 10002, 10003,
        10004, 10005, 10006, 10007, 10008,
    ];
    let actual: Vec<u32> = Nfsstat3::ALL.iter().map(|s| *s as u32).collect();
    assert_eq!(actual, expected);
    for s in Nfsstat3::ALL {
        assert_eq!(Nfsstat3::from_u32(s as u32), Some(s));
    }
}

#[test]
fn union_arms_layout() {
    // SET_TO_CLIENT_TIME carries the time; the other arms are bare.
    assert_eq!(to_vec(&SetTime::DontChange), [0, 0, 0, 0]);
    assert_eq!(to_vec(&SetTime::SetToServerTime), [0, 0, 0, 1]);
    assert_eq!(
        to_vec(&SetTime::SetToClientTime(Nfstime3 { seconds: 1, nseconds: 2 })),
        [0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2]
    );
    // sattr3 with nothing set: six zero discriminants.
    assert_eq!(to_vec(&Sattr3::default()), [0u8; 24]);
    assert_eq!(to_vec(&Createhow3::Exclusive(*b"verifier")), [&[0, 0, 0, 2][..], b"verifier"].concat());
    assert_eq!(to_vec(&Mknoddata3::Dir), [0, 0, 0, 2]);
    assert_eq!(to_vec(&Mknoddata3::Fifo(Sattr3::default())), [&[0, 0, 0, 7][..], &[0; 24]].concat());
}

#[test]
fn readdir_entry_list_layout() {
    let ok = Readdir3ResOk {
        dir_attributes: None,
        cookieverf: [0; 8],
        reply: Dirlist3 {
            entries: vec![Entry3 { fileid: 7, name: Opaque::from_static(b"a"), cookie: 9 }],
            eof: true,
        },
    };
    let expected: &[u8] = &[
        0, 0, 0, 0, // no dir attributes
        0, 0, 0, 0, 0, 0, 0, 0, // cookieverf
        0, 0, 0, 1, // value_follows
        0, 0, 0, 0, 0, 0, 0, 7, // fileid
        0, 0, 0, 1, b'a', 0, 0, 0, // name
        0, 0, 0, 0, 0, 0, 0, 9, // cookie
        0, 0, 0, 0, // no more entries
        0, 0, 0, 1, // eof
    ];
    assert_eq!(to_vec(&ok), expected);
    assert_eq!(ok.encoded_len(), expected.len());
    assert_eq!(Readdir3ResOk::fixed_len(&None), 20);
    assert_eq!(Readdir3ResOk::fixed_len(&Some(sample_attr())), 104);
    assert_eq!(Readdirplus3ResOk::fixed_len(&Some(sample_attr())), 104);
}

fn sample_attr() -> Fattr3 {
    Fattr3 {
        ftype: Ftype3::Dir,
        mode: 0o755,
        nlink: 2,
        uid: 0,
        gid: 0,
        size: 4096,
        used: 4096,
        rdev: Specdata3::default(),
        fsid: 1,
        fileid: 2,
        atime: Nfstime3::default(),
        mtime: Nfstime3::default(),
        ctime: Nfstime3::default(),
    }
}

#[test]
fn mount_and_portmap_layouts() {
    let res = Mountres3::Ok(Mountres3Ok { fhandle: Opaque::from_static(b"root"), auth_flavors: vec![1] });
    assert_eq!(to_vec(&res), [0, 0, 0, 0, 0, 0, 0, 4, b'r', b'o', b'o', b't', 0, 0, 0, 1, 0, 0, 0, 1]);
    assert_eq!(to_vec(&Mountres3::Fail(Mountstat3::Acces)), [0, 0, 0, 13]);
    let v1 = Fhstatus::Ok([0xaa; FHSIZE]);
    assert_eq!(to_vec(&v1).len(), 4 + FHSIZE);
    assert_eq!(to_vec(&Fhstatus::Fail(2)), [0, 0, 0, 2]);
    let exports = Exports(vec![Exportnode {
        ex_dir: Opaque::from_static(b"/x"),
        ex_groups: Groups(vec![Opaque::from_static(b"g")]),
    }]);
    assert_eq!(
        to_vec(&exports),
        [
            0, 0, 0, 1, // an export follows
            0, 0, 0, 2, b'/', b'x', 0, 0, // ex_dir
            0, 0, 0, 1, 0, 0, 0, 1, b'g', 0, 0, 0, // one group
            0, 0, 0, 0, // no more groups
            0, 0, 0, 0, // no more exports
        ]
    );
    let getport =
        PortmapArgs::Getport(Mapping { prog: MOUNT_PROGRAM, vers: MOUNT_V3, prot: IPPROTO_TCP, port: 0 });
    let words: Vec<u8> = [100005u32, 3, 6, 0].iter().flat_map(|w| w.to_be_bytes()).collect();
    assert_eq!(to_vec(&getport), words);
}

// ------------------------------------------------------------ bounds on wire lengths

/// A GETATTR whose handle claims `len` bytes and carries them.
fn handle_of_len(len: usize) -> Bytes {
    let mut buf = Vec::new();
    encode_opaque(&mut buf, &vec![0x5a; len]);
    Bytes::from(buf)
}

#[test]
fn oversized_handle_is_an_error() {
    assert!(decode_exact::<Getattr3Args>(handle_of_len(64)).is_ok());
    assert_eq!(decode_exact::<Getattr3Args>(handle_of_len(65)), Err(XdrError::TooLong { len: 65, max: 64 }));
    assert_eq!(
        Nfs3Args::decode(NFSPROC3_GETATTR, &mut handle_of_len(65)),
        Err(Error::Xdr(XdrError::TooLong { len: 65, max: 64 }))
    );
    let mut mnt = Vec::new();
    encode_opaque(&mut mnt, &[1; 65]);
    assert!(matches!(
        MountRes::decode(MOUNT_V3, MOUNTPROC_MNT, &mut Bytes::from([&[0u8; 4][..], &mnt].concat())),
        Err(Error::Xdr(XdrError::TooLong { len: 65, max: 64 }))
    ));
}

#[test]
fn oversized_name_and_path_are_errors() {
    let mut buf = to_vec(&fh(b"dir"));
    encode_opaque(&mut buf, &[b'n'; 256]);
    assert_eq!(decode_exact::<Lookup3Args>(Bytes::from(buf)), Err(XdrError::TooLong { len: 256, max: 255 }));

    let mut buf = Vec::new();
    encode_opaque(&mut buf, &[b'/'; MNTPATHLEN + 1]);
    assert!(matches!(
        MountArgs::decode(MOUNTPROC_MNT, &mut Bytes::from(buf)),
        Err(Error::Xdr(XdrError::TooLong { len: 1025, max: 1024 }))
    ));
}

/// WRITE arguments with the given `count` field and `data_len` bytes of data.
fn write_args_bytes(count: u32, data_len: usize) -> Bytes {
    let mut buf = to_vec(&fh(b"file"));
    buf.put_u64(0);
    buf.put_u32(count);
    buf.put_u32(StableHow::Unstable as u32);
    encode_opaque(&mut buf, &vec![0; data_len]);
    Bytes::from(buf)
}

#[test]
fn oversized_write_is_an_error() {
    let two_mib = 2 << 20;
    let max = MAX_IO_SIZE;
    // Both count and data too long: refused on count, before the data.
    assert_eq!(
        decode_exact::<Write3Args>(write_args_bytes(two_mib as u32, two_mib)),
        Err(XdrError::TooLong { len: two_mib, max })
    );
    // A small count does not let a large payload through.
    assert_eq!(
        decode_exact::<Write3Args>(write_args_bytes(1, two_mib)),
        Err(XdrError::TooLong { len: two_mib, max })
    );
    // A large count with small data is refused too.
    assert_eq!(
        decode_exact::<Write3Args>(write_args_bytes(max as u32 + 1, 4)),
        Err(XdrError::TooLong { len: max + 1, max })
    );
    // Exactly the maximum is fine, and the data is a slice of the input, not a copy.
    let input = write_args_bytes(max as u32, max);
    let args = decode_exact::<Write3Args>(input.clone()).unwrap();
    assert_eq!(args.data.len(), max);
    assert_eq!(args.count as usize, max);
    let offset = args.data.as_ptr() as usize - input.as_ptr() as usize;
    assert_eq!(&input[offset..offset + max], &args.data[..]);
    // count and data length may disagree; both are kept for the server to judge.
    let args = decode_exact::<Write3Args>(write_args_bytes(10, 4)).unwrap();
    assert_eq!((args.count, args.data.len()), (10, 4));
}

#[test]
fn write_args_head_is_the_encoding_up_to_the_data() {
    for n in [0usize, 1, 3, 4, 5, 4097] {
        let args = Write3Args {
            file: fh(b"file"),
            offset: 77,
            count: n as u32,
            stable: StableHow::FileSync,
            data: Bytes::from(vec![0xa5; n]),
        };
        let mut split = to_vec(&Write3ArgsHead(&args));
        encode_opaque(&mut split, &args.data);
        assert_eq!(split, to_vec(&args), "{n} bytes of data");
    }
}

#[test]
fn claimed_length_without_data_is_truncated_not_allocated() {
    // A READ reply claiming a 1 MiB payload but carrying none.
    let mut buf = Vec::new();
    buf.put_u32(0); // NFS3_OK
    buf.put_u32(0); // no attributes
    buf.put_u32(1 << 20); // count
    buf.put_u32(0); // eof
    buf.put_u32(1 << 20); // data length
    assert!(matches!(decode_exact::<Read3Res>(Bytes::from(buf.clone())), Err(XdrError::Truncated { .. })));
    buf.truncate(16);
    buf.put_u32((1 << 20) + 1);
    assert!(matches!(decode_exact::<Read3Res>(Bytes::from(buf)), Err(XdrError::TooLong { .. })));
    // A MNT reply claiming 2^32-1 auth flavors.
    let mut buf = vec![0, 0, 0, 0];
    encode_opaque(&mut buf, b"fh");
    buf.put_u32(u32::MAX);
    assert!(matches!(decode_exact::<Mountres3>(Bytes::from(buf)), Err(XdrError::TooLong { .. })));
}

#[test]
fn endless_linked_lists_are_errors() {
    // 100 000 READDIR entries with no terminator: the input runs out.
    let entry = Entry3 { fileid: 1, name: Opaque::from_static(b"x"), cookie: 1 };
    let mut buf = Vec::new();
    buf.put_u32(0); // NFS3_OK
    buf.put_u32(0); // no attributes
    buf.put_bytes(0, 8); // cookieverf
    for _ in 0..100_000 {
        buf.put_u32(1);
        entry.encode(&mut buf);
    }
    assert!(matches!(decode_exact::<Readdir3Res>(Bytes::from(buf.clone())), Err(XdrError::Truncated { .. })));
    // The same list, terminated, decodes: the bound is the input, not a count.
    buf.put_u32(0);
    buf.put_u32(1);
    match decode_exact::<Readdir3Res>(Bytes::from(buf)).unwrap() {
        Readdir3Res::Ok(ok) => assert_eq!((ok.reply.entries.len(), ok.reply.eof), (100_000, true)),
        other => panic!("unexpected {other:?}"),
    }
    // A value_follows word that is not a bool.
    assert_eq!(decode_exact::<Pmaplist>(Bytes::from_static(&[0, 0, 0, 2])), Err(XdrError::BadBool(2)));
    // Export and group lists cut off part way.
    let exports =
        Exports(vec![Exportnode { ex_dir: Opaque::from_static(b"/"), ex_groups: Groups(vec![]) }; 1000]);
    let bytes = to_vec(&exports);
    assert!(decode_exact::<Exports>(Bytes::copy_from_slice(&bytes[..bytes.len() - 4])).is_err());
    assert!(decode_exact::<Exports>(Bytes::from(bytes)).is_ok());
}

#[test]
fn unknown_procedures_are_reported() {
    let empty = Bytes::new();
    assert_eq!(
        Nfs3Args::decode(22, &mut empty.clone()),
        Err(Error::UnknownProcedure { program: "NFSv3", procedure: 22 })
    );
    assert!(matches!(Nfs3Res::decode(u32::MAX, &mut empty.clone()), Err(Error::UnknownProcedure { .. })));
    assert!(matches!(MountArgs::decode(6, &mut empty.clone()), Err(Error::UnknownProcedure { .. })));
    assert!(matches!(
        MountRes::decode(2, MOUNTPROC_MNT, &mut empty.clone()),
        Err(Error::UnknownProcedure { .. })
    ));
    assert!(matches!(PortmapArgs::decode(6, &mut empty.clone()), Err(Error::UnknownProcedure { .. })));
    // Procedures without arguments decode from nothing.
    assert_eq!(Nfs3Args::decode(NFSPROC3_NULL, &mut empty.clone()), Ok(Nfs3Args::Null(Null3Args {})));
    assert_eq!(MountArgs::decode(MOUNTPROC_EXPORT, &mut empty.clone()), Ok(MountArgs::Export));
}

// ------------------------------------------------------------ procedure tables

fn check_table(table: &[ProcInfo], lookup: fn(u32) -> Option<&'static str>) {
    for (i, p) in table.iter().enumerate() {
        assert_eq!(p.number as usize, i, "{} is at the wrong index", p.name);
        assert_eq!(lookup(p.number), Some(p.name));
    }
    let mut names: Vec<_> = table.iter().map(|p| p.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), table.len(), "duplicate names");
    assert_eq!(lookup(table.len() as u32), None);
}

#[test]
fn procedure_tables_are_indexed_by_number() {
    check_table(&NFS3_PROCEDURES, crate::nfs3::name_of);
    check_table(&MOUNT_PROCEDURES, crate::mount::name_of);
    check_table(&PORTMAP_PROCEDURES, crate::portmap::name_of);
    assert_eq!(crate::nfs3::name_of(NFSPROC3_READDIRPLUS), Some("READDIRPLUS"));
    assert_eq!(crate::mount::name_of(MOUNTPROC_UMNTALL), Some("UMNTALL"));
    assert_eq!(crate::portmap::name_of(PMAPPROC_GETPORT), Some("GETPORT"));
}

#[test]
fn nfs3_table_flags() {
    let names = |f: fn(&ProcInfo) -> bool| -> Vec<&str> {
        NFS3_PROCEDURES.iter().filter(|p| f(p)).map(|p| p.name).collect()
    };
    assert_eq!(
        names(|p| p.mutates),
        ["SETATTR", "WRITE", "CREATE", "MKDIR", "SYMLINK", "MKNOD", "REMOVE", "RMDIR", "RENAME", "LINK"]
    );
    assert_eq!(
        names(|p| !p.idempotent),
        ["SETATTR", "CREATE", "MKDIR", "SYMLINK", "MKNOD", "REMOVE", "RMDIR", "RENAME", "LINK"]
    );
    // Every procedure the table knows decodes its (empty-ish) arguments by
    // the same number: the table and the decoder agree on the numbering.
    for p in &NFS3_PROCEDURES {
        assert!(!matches!(
            Nfs3Args::decode(p.number, &mut Bytes::new()),
            Err(Error::UnknownProcedure { .. })
        ));
    }
}
