//! NFSv4.1/4.2: round trips of every modelled operation's arguments and
//! results, a COMPOUND checked word by word, bounds on wire lengths, the
//! one-operation-at-a-time decoder's answers to unknown and malformed
//! operations, typed attributes, and the operation table.

use eagernfs_xdr::{decode_exact, to_vec, Bytes, Decode, Encode, Opaque};
use proptest::collection::vec;
use proptest::option::of;
use proptest::prelude::*;
use proptest::sample::select;

use crate::arbitrary::opaque;
use crate::nfs4::*;

fn round_trip<T: Encode + Decode + PartialEq + std::fmt::Debug>(v: &T) -> Result<(), TestCaseError> {
    let bytes = to_vec(v);
    prop_assert_eq!(bytes.len() % 4, 0);
    let back = decode_exact::<T>(Bytes::from(bytes.clone()));
    prop_assert_eq!(back.as_ref(), Ok(v));
    for cut in (0..bytes.len()).step_by(4) {
        prop_assert!(
            decode_exact::<T>(Bytes::copy_from_slice(&bytes[..cut])).is_err(),
            "prefix {} decoded",
            cut
        );
    }
    Ok(())
}

// ------------------------------------------------------------ strategies

fn status() -> impl Strategy<Value = Nfsstat4> {
    (0u32..10100).prop_filter_map("a defined status", Nfsstat4::from_u32)
}
fn fail() -> impl Strategy<Value = Nfsstat4> {
    status().prop_filter("not OK", |s| !s.is_ok())
}
fn stateid() -> impl Strategy<Value = Stateid4> {
    (any::<u32>(), any::<[u8; 12]>()).prop_map(|(seqid, other)| Stateid4 { seqid, other })
}
fn fh() -> impl Strategy<Value = NfsFh4> {
    opaque::<NFS4_FHSIZE>().prop_map(|data| NfsFh4 { data })
}
fn bitmap() -> impl Strategy<Value = Bitmap4> {
    vec(any::<u32>(), 0..=4).prop_map(Bitmap4)
}
fn name() -> impl Strategy<Value = Component4> {
    vec(any::<u8>(), 0..40).prop_map(|v| Opaque(Bytes::from(v)))
}
fn utf8() -> impl Strategy<Value = Utf8Str> {
    "[a-z@.0-9]{0,20}".prop_map(|s| Opaque(Bytes::from(s)))
}
fn fattr() -> impl Strategy<Value = Fattr4> {
    (bitmap(), vec(any::<u8>(), 0..64))
        .prop_map(|(attrmask, v)| Fattr4 { attrmask, attr_vals: Opaque(Bytes::from(v)) })
}
fn owner() -> impl Strategy<Value = StateOwner4> {
    (any::<u64>(), opaque::<64>()).prop_map(|(clientid, o)| StateOwner4 { clientid, owner: Opaque(o.0) })
}
fn time() -> impl Strategy<Value = Nfstime4> {
    (any::<i64>(), any::<u32>()).prop_map(|(seconds, nseconds)| Nfstime4 { seconds, nseconds })
}
fn cinfo() -> impl Strategy<Value = ChangeInfo4> {
    (any::<bool>(), any::<u64>(), any::<u64>()).prop_map(|(atomic, before, after)| ChangeInfo4 {
        atomic,
        before,
        after,
    })
}
fn lock_type() -> impl Strategy<Value = NfsLockType4> {
    select(vec![NfsLockType4::ReadLt, NfsLockType4::WriteLt, NfsLockType4::ReadwLt, NfsLockType4::WritewLt])
}
fn stable() -> impl Strategy<Value = StableHow4> {
    select(vec![StableHow4::Unstable4, StableHow4::DataSync4, StableHow4::FileSync4])
}
fn channel() -> impl Strategy<Value = ChannelAttrs4> {
    (any::<[u32; 6]>(), of(any::<u32>())).prop_map(|(a, ird)| ChannelAttrs4 {
        ca_headerpadsize: a[0],
        ca_maxrequestsize: a[1],
        ca_maxresponsesize: a[2],
        ca_maxresponsesize_cached: a[3],
        ca_maxoperations: a[4],
        ca_maxrequests: a[5],
        ca_rdma_ird: RdmaIrd(ird),
    })
}
fn sec_parms() -> impl Strategy<Value = SecParmsList> {
    let sys = (any::<u32>(), opaque::<255>(), any::<u32>(), any::<u32>(), vec(any::<u32>(), 0..=16))
        .prop_map(|(stamp, machinename, uid, gid, gids)| {
            CallbackSecParms4::Sys(AuthsysParms { stamp, machinename, uid, gid, gids: Gids(gids) })
        });
    let gss = (any::<u32>(), opaque::<64>(), opaque::<64>()).prop_map(|(s, a, b)| {
        CallbackSecParms4::Gss(GssCbHandles4 {
            gcbp_service: s,
            gcbp_handle_from_server: Opaque(a.0),
            gcbp_handle_from_client: Opaque(b.0),
        })
    });
    vec(prop_oneof![Just(CallbackSecParms4::None), sys, gss], 0..3).prop_map(SecParmsList)
}
fn impl_id() -> impl Strategy<Value = ImplIdOpt> {
    of((utf8(), utf8(), time()).prop_map(|(nii_domain, nii_name, nii_date)| NfsImplId4 {
        nii_domain,
        nii_name,
        nii_date,
    }))
    .prop_map(ImplIdOpt)
}
fn protect_ops() -> impl Strategy<Value = StateProtectOps4> {
    (bitmap(), bitmap())
        .prop_map(|(spo_must_enforce, spo_must_allow)| StateProtectOps4 { spo_must_enforce, spo_must_allow })
}
fn createhow() -> impl Strategy<Value = Createhow4> {
    prop_oneof![
        fattr().prop_map(Createhow4::Unchecked),
        fattr().prop_map(Createhow4::Guarded),
        any::<[u8; 8]>().prop_map(Createhow4::Exclusive),
        (any::<[u8; 8]>(), fattr()).prop_map(|(verf, attrs)| Createhow4::Exclusive41 { verf, attrs }),
    ]
}
fn deleg_type() -> impl Strategy<Value = OpenDelegationType4> {
    select(vec![
        OpenDelegationType4::None,
        OpenDelegationType4::Read,
        OpenDelegationType4::Write,
        OpenDelegationType4::NoneExt,
    ])
}
fn claim() -> impl Strategy<Value = OpenClaim4> {
    prop_oneof![
        name().prop_map(OpenClaim4::Null),
        deleg_type().prop_map(OpenClaim4::Previous),
        (stateid(), name())
            .prop_map(|(delegate_stateid, file)| OpenClaim4::DelegateCur { delegate_stateid, file }),
        name().prop_map(OpenClaim4::DelegatePrev),
        Just(OpenClaim4::Fh),
        stateid().prop_map(OpenClaim4::DelegCurFh),
        Just(OpenClaim4::DelegPrevFh),
    ]
}
fn ace() -> impl Strategy<Value = Nfsace4> {
    (any::<u32>(), any::<u32>(), any::<u32>(), utf8()).prop_map(|(acetype, flag, access_mask, who)| Nfsace4 {
        acetype,
        flag,
        access_mask,
        who,
    })
}
fn delegation() -> impl Strategy<Value = OpenDelegation4> {
    prop_oneof![
        Just(OpenDelegation4::None),
        (stateid(), any::<bool>(), ace()).prop_map(|(stateid, recall, permissions)| OpenDelegation4::Read(
            OpenReadDelegation4 { stateid, recall, permissions }
        )),
        (stateid(), any::<bool>(), any::<u64>(), ace()).prop_map(|(stateid, recall, l, permissions)| {
            OpenDelegation4::Write(OpenWriteDelegation4 {
                stateid,
                recall,
                space_limit: NfsSpaceLimit4::Size(l),
                permissions,
            })
        }),
        (0u32..=8, any::<bool>()).prop_map(|(why, f)| {
            let later = matches!(why, 1 | 2).then_some(f);
            OpenDelegation4::NoneExt(OpenNoneDelegation4 { why, later })
        }),
        (stateid(), any::<bool>(), ace()).prop_map(|(stateid, recall, permissions)| {
            OpenDelegation4::ReadAttrsDeleg(OpenReadDelegation4 { stateid, recall, permissions })
        }),
        (stateid(), any::<bool>(), any::<u32>(), any::<u32>(), ace()).prop_map(
            |(stateid, recall, num_blocks, bytes_per_block, permissions)| {
                OpenDelegation4::WriteAttrsDeleg(OpenWriteDelegation4 {
                    stateid,
                    recall,
                    space_limit: NfsSpaceLimit4::Blocks { num_blocks, bytes_per_block },
                    permissions,
                })
            }
        ),
    ]
}

fn arg_op() -> impl Strategy<Value = ArgOp> {
    let fh_ops = prop_oneof![
        any::<u32>().prop_map(|access| ArgOp::Access(Access4Args { access })),
        (any::<u32>(), stateid())
            .prop_map(|(seqid, open_stateid)| ArgOp::Close(Close4Args { seqid, open_stateid })),
        (any::<u64>(), any::<u32>()).prop_map(|(offset, count)| ArgOp::Commit(Commit4Args { offset, count })),
        (
            prop_oneof![
                opaque::<64>().prop_map(|l| Createtype4::Lnk(Opaque(l.0))),
                Just(Createtype4::Dir),
                Just(Createtype4::Fifo),
                (any::<u32>(), any::<u32>())
                    .prop_map(|(a, b)| Createtype4::Chr(Specdata4 { specdata1: a, specdata2: b })),
                select(vec![0u32, 1, 8, 9, 1000]).prop_map(Createtype4::Other),
            ],
            name(),
            fattr()
        )
            .prop_map(|(objtype, objname, createattrs)| ArgOp::Create(Create4Args {
                objtype,
                objname,
                createattrs
            })),
        bitmap().prop_map(|attr_request| ArgOp::Getattr(Getattr4Args { attr_request })),
        Just(ArgOp::Getfh(())),
        name().prop_map(|newname| ArgOp::Link(Link4Args { newname })),
        name().prop_map(|objname| ArgOp::Lookup(Lookup4Args { objname })),
        Just(ArgOp::Lookupp(())),
        fattr().prop_map(|obj_attributes| ArgOp::Nverify(Verify4Args { obj_attributes })),
        fh().prop_map(|object| ArgOp::Putfh(Putfh4Args { object })),
        Just(ArgOp::Putrootfh(())),
        (stateid(), any::<u64>(), any::<u32>()).prop_map(|(stateid, offset, count)| ArgOp::Read(Read4Args {
            stateid,
            offset,
            count
        })),
        (any::<u64>(), any::<[u8; 8]>(), any::<u32>(), any::<u32>(), bitmap()).prop_map(
            |(cookie, cookieverf, dircount, maxcount, attr_request)| {
                ArgOp::Readdir(Readdir4Args { cookie, cookieverf, dircount, maxcount, attr_request })
            }
        ),
        name().prop_map(|target| ArgOp::Remove(Remove4Args { target })),
        (name(), name()).prop_map(|(oldname, newname)| ArgOp::Rename(Rename4Args { oldname, newname })),
        (stateid(), fattr())
            .prop_map(|(stateid, obj_attributes)| ArgOp::Setattr(Setattr4Args { stateid, obj_attributes })),
        (stateid(), any::<u64>(), stable(), vec(any::<u8>(), 0..100)).prop_map(
            |(stateid, offset, stable, d)| {
                ArgOp::Write(Write4Args { stateid, offset, stable, data: Bytes::from(d) })
            }
        ),
    ];
    let state_ops = prop_oneof![
        (
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            owner(),
            prop_oneof![Just(Openflag4::NoCreate), createhow().prop_map(Openflag4::Create)],
            claim()
        )
            .prop_map(|(seqid, share_access, share_deny, owner, openhow, claim)| {
                ArgOp::Open(Open4Args { seqid, share_access, share_deny, owner, openhow, claim })
            }),
        (stateid(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
            |(open_stateid, seqid, share_access, share_deny)| {
                ArgOp::OpenDowngrade(OpenDowngrade4Args { open_stateid, seqid, share_access, share_deny })
            }
        ),
        (
            lock_type(),
            any::<bool>(),
            any::<u64>(),
            any::<u64>(),
            prop_oneof![
                (any::<u32>(), stateid(), any::<u32>(), owner()).prop_map(
                    |(open_seqid, open_stateid, lock_seqid, lock_owner)| {
                        Locker4::NewOwner(OpenToLockOwner4 {
                            open_seqid,
                            open_stateid,
                            lock_seqid,
                            lock_owner,
                        })
                    }
                ),
                (stateid(), any::<u32>()).prop_map(|(lock_stateid, lock_seqid)| Locker4::Existing(
                    ExistLockOwner4 { lock_stateid, lock_seqid }
                )),
            ]
        )
            .prop_map(|(locktype, reclaim, offset, length, locker)| ArgOp::Lock(Lock4Args {
                locktype,
                reclaim,
                offset,
                length,
                locker
            })),
        (lock_type(), any::<u64>(), any::<u64>(), owner()).prop_map(|(locktype, offset, length, owner)| {
            ArgOp::Lockt(Lockt4Args { locktype, offset, length, owner })
        }),
        (lock_type(), any::<u32>(), stateid(), any::<u64>(), any::<u64>()).prop_map(
            |(locktype, seqid, lock_stateid, offset, length)| {
                ArgOp::Locku(Locku4Args { locktype, seqid, lock_stateid, offset, length })
            }
        ),
        stateid().prop_map(|deleg_stateid| ArgOp::Delegreturn(Delegreturn4Args { deleg_stateid })),
        stateid().prop_map(|stateid| ArgOp::FreeStateid(FreeStateid4Args { stateid })),
        vec(stateid(), 0..4).prop_map(|s| ArgOp::TestStateid(TestStateid4Args(s))),
        (
            any::<u32>(),
            prop_oneof![
                Just(DelegClaim4::Fh),
                Just(DelegClaim4::DelegPrevFh),
                deleg_type().prop_map(DelegClaim4::Previous)
            ]
        )
            .prop_map(|(want, claim)| ArgOp::WantDelegation(WantDelegation4Args { want, claim })),
        (any::<bool>(), bitmap(), time(), time(), bitmap(), bitmap()).prop_map(|(s, n, c, d, ca, da)| {
            ArgOp::GetDirDelegation(GetDirDelegation4Args {
                signal_deleg_avail: s,
                notification_types: n,
                child_attr_delay: c,
                dir_attr_delay: d,
                child_attributes: ca,
                dir_attributes: da,
            })
        }),
        owner().prop_map(|lock_owner| ArgOp::ReleaseLockowner(ReleaseLockowner4Args { lock_owner })),
    ];
    let session_ops = prop_oneof![
        (
            any::<[u8; 8]>(),
            opaque::<64>(),
            any::<u32>(),
            prop_oneof![Just(StateProtect4A::None), protect_ops().prop_map(StateProtect4A::MachCred),],
            impl_id()
        )
            .prop_map(|(v, id, flags, state_protect, client_impl_id)| {
                ArgOp::ExchangeId(ExchangeId4Args {
                    clientowner: ClientOwner4 { co_verifier: v, co_ownerid: Opaque(id.0) },
                    flags,
                    state_protect,
                    client_impl_id,
                })
            }),
        (any::<u64>(), any::<u32>(), any::<u32>(), channel(), channel(), any::<u32>(), sec_parms()).prop_map(
            |(clientid, sequence, flags, fore_chan_attrs, back_chan_attrs, cb_program, sec_parms)| {
                ArgOp::CreateSession(CreateSession4Args {
                    clientid,
                    sequence,
                    flags,
                    fore_chan_attrs,
                    back_chan_attrs,
                    cb_program,
                    sec_parms,
                })
            }
        ),
        (any::<[u8; 16]>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<bool>()).prop_map(
            |(sessionid, sequenceid, slotid, highest_slotid, cachethis)| {
                ArgOp::Sequence(Sequence4Args { sessionid, sequenceid, slotid, highest_slotid, cachethis })
            }
        ),
        any::<[u8; 16]>().prop_map(|sessionid| ArgOp::DestroySession(DestroySession4Args { sessionid })),
        any::<u64>().prop_map(|clientid| ArgOp::DestroyClientid(DestroyClientid4Args { clientid })),
        any::<bool>().prop_map(|one_fs| ArgOp::ReclaimComplete(ReclaimComplete4Args { one_fs })),
        (
            any::<[u8; 16]>(),
            select(vec![
                ChannelDirFromClient4::Fore,
                ChannelDirFromClient4::Back,
                ChannelDirFromClient4::ForeOrBoth,
                ChannelDirFromClient4::BackOrBoth
            ]),
            any::<bool>()
        )
            .prop_map(|(sessid, dir, r)| ArgOp::BindConnToSession(BindConnToSession4Args {
                sessid,
                dir,
                use_conn_in_rdma_mode: r
            })),
        (any::<u32>(), sec_parms()).prop_map(|(cb_program, sec_parms)| ArgOp::BackchannelCtl(
            BackchannelCtl4Args { cb_program, sec_parms }
        )),
        select(vec![SecinfoStyle4::CurrentFh, SecinfoStyle4::Parent]).prop_map(ArgOp::SecinfoNoName),
        name().prop_map(|name| ArgOp::Secinfo(Secinfo4Args { name })),
    ];
    let v42_ops = prop_oneof![
        (stateid(), any::<u64>(), any::<u64>())
            .prop_map(|(stateid, offset, length)| ArgOp::Allocate(Allocate4Args { stateid, offset, length })),
        (stateid(), any::<u64>(), any::<u64>()).prop_map(|(stateid, offset, length)| ArgOp::Deallocate(
            Allocate4Args { stateid, offset, length }
        )),
        (stateid(), any::<u64>(), select(vec![DataContent4::Data, DataContent4::Hole]))
            .prop_map(|(stateid, offset, what)| ArgOp::Seek(Seek4Args { stateid, offset, what })),
        (stateid(), stateid(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
            |(src_stateid, dst_stateid, src_offset, dst_offset, count)| {
                ArgOp::Clone(Clone4Args { src_stateid, dst_stateid, src_offset, dst_offset, count })
            }
        ),
        (
            stateid(),
            stateid(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<bool>(),
            any::<bool>(),
            vec(utf8().prop_map(Netloc4::Name), 0..2)
        )
            .prop_map(
                |(src_stateid, dst_stateid, src_offset, dst_offset, count, consecutive, synchronous, s)| {
                    ArgOp::Copy(Copy4Args {
                        src_stateid,
                        dst_stateid,
                        src_offset,
                        dst_offset,
                        count,
                        consecutive,
                        synchronous,
                        source_server: NetlocList(s),
                    })
                }
            ),
    ];
    prop_oneof![fh_ops, state_ops, session_ops, v42_ops]
}

fn res_op() -> impl Strategy<Value = ResOp> {
    prop_oneof![
        fail().prop_map(|s| ResOp::Access(Res4::Err(s))),
        (any::<u32>(), any::<u32>())
            .prop_map(|(supported, access)| ResOp::Access(Res4::Ok(Access4ResOk { supported, access }))),
        stateid().prop_map(|s| ResOp::Close(Res4::Ok(s))),
        (cinfo(), bitmap())
            .prop_map(|(cinfo, attrset)| ResOp::Create(Res4::Ok(Create4ResOk { cinfo, attrset }))),
        fattr().prop_map(|f| ResOp::Getattr(Res4::Ok(f))),
        fh().prop_map(|f| ResOp::Getfh(Res4::Ok(f))),
        stateid().prop_map(|s| ResOp::Lock(Lock4Res::Ok(s))),
        (any::<u64>(), any::<u64>(), lock_type(), owner()).prop_map(|(offset, length, locktype, owner)| {
            ResOp::Lockt(Lockt4Res::Denied(Lock4Denied { offset, length, locktype, owner }))
        }),
        fail()
            .prop_filter("not DENIED", |s| *s != Nfsstat4::Denied)
            .prop_map(|s| ResOp::Lock(Lock4Res::Err(s))),
        Just(ResOp::Lookup(Res4::OK)),
        (stateid(), cinfo(), any::<u32>(), bitmap(), delegation()).prop_map(
            |(stateid, cinfo, rflags, attrset, delegation)| {
                ResOp::Open(Res4::Ok(Open4ResOk { stateid, cinfo, rflags, attrset, delegation }))
            }
        ),
        (any::<bool>(), vec(any::<u8>(), 0..100))
            .prop_map(|(eof, d)| ResOp::Read(Res4::Ok(Read4ResOk { eof, data: Bytes::from(d) }))),
        (
            any::<[u8; 8]>(),
            vec(
                (any::<u64>(), name(), fattr()).prop_map(|(cookie, name, attrs)| Entry4 {
                    cookie,
                    name,
                    attrs
                }),
                0..4
            ),
            any::<bool>()
        )
            .prop_map(|(cookieverf, entries, eof)| ResOp::Readdir(Res4::Ok(Readdir4ResOk {
                cookieverf,
                entries,
                eof
            }))),
        (cinfo(), cinfo()).prop_map(|(source_cinfo, target_cinfo)| ResOp::Rename(Res4::Ok(Rename4ResOk {
            source_cinfo,
            target_cinfo
        }))),
        vec(
            prop_oneof![
                select(vec![0u32, 1, 390003]).prop_map(Secinfo4::Flavor),
                (opaque::<16>(), any::<u32>(), any::<u32>()).prop_map(|(oid, qop, service)| Secinfo4::Gss(
                    RpcsecGssInfo { oid: Opaque(oid.0), qop, service }
                ))
            ],
            0..3
        )
        .prop_map(|v| ResOp::Secinfo(Res4::Ok(Secinfo4ResOk(v)))),
        (status(), bitmap()).prop_map(|(status, attrsset)| ResOp::Setattr(Setattr4Res { status, attrsset })),
        (any::<u32>(), stable(), any::<[u8; 8]>()).prop_map(|(count, committed, writeverf)| ResOp::Write(
            Res4::Ok(Write4ResOk { count, committed, writeverf })
        )),
        (any::<u64>(), any::<u32>(), any::<u32>(), opaque::<64>(), any::<u64>(), opaque::<64>(), impl_id())
            .prop_map(|(clientid, sequenceid, flags, major, minor, scope, server_impl_id)| {
                ResOp::ExchangeId(Res4::Ok(ExchangeId4ResOk {
                    clientid,
                    sequenceid,
                    flags,
                    state_protect: StateProtect4R::None,
                    server_owner: ServerOwner4 { so_minor_id: minor, so_major_id: Opaque(major.0) },
                    server_scope: Opaque(scope.0),
                    server_impl_id,
                }))
            }),
        (any::<[u8; 16]>(), any::<u32>(), any::<u32>(), channel(), channel()).prop_map(
            |(sessionid, sequence, flags, fore_chan_attrs, back_chan_attrs)| {
                ResOp::CreateSession(Res4::Ok(CreateSession4ResOk {
                    sessionid,
                    sequence,
                    flags,
                    fore_chan_attrs,
                    back_chan_attrs,
                }))
            }
        ),
        (any::<[u8; 16]>(), any::<[u32; 5]>()).prop_map(|(sessionid, a)| {
            ResOp::Sequence(Res4::Ok(Sequence4ResOk {
                sessionid,
                sequenceid: a[0],
                slotid: a[1],
                highest_slotid: a[2],
                target_highest_slotid: a[3],
                status_flags: a[4],
            }))
        }),
        vec(status(), 0..5).prop_map(|v| ResOp::TestStateid(Res4::Ok(TestStateid4ResOk(v)))),
        (any::<u64>(), stable(), any::<[u8; 8]>(), of(stateid()), any::<bool>(), any::<bool>()).prop_map(
            |(count, committed, writeverf, cb, c, s)| {
                ResOp::Copy(Copy4Res::Ok(Copy4ResOk {
                    response: WriteResponse4 { callback_id: CallbackId(cb), count, committed, writeverf },
                    requirements: CopyRequirements4 { consecutive: c, synchronous: s },
                }))
            }
        ),
        (any::<bool>(), any::<u64>())
            .prop_map(|(eof, offset)| ResOp::Seek(Res4::Ok(Seek4ResOk { eof, offset }))),
        vec(any::<u8>(), 0..64).prop_map(|v| ResOp::Getxattr(Res4::Ok(Opaque(Bytes::from(v))))),
        (any::<u64>(), vec(name(), 0..4), any::<bool>()).prop_map(|(cookie, n, eof)| ResOp::Listxattrs(
            Res4::Ok(Listxattrs4ResOk { cookie, names: XattrNames(n), eof })
        )),
        cinfo().prop_map(|c| ResOp::Removexattr(Res4::Ok(c))),
        (any::<[u8; 8]>(), stateid(), bitmap(), bitmap(), bitmap()).prop_map(
            |(cookieverf, stateid, n, c, d)| {
                ResOp::GetDirDelegation(Res4::Ok(GetDirDelegation4Res::Granted(GetDirDelegation4ResOk {
                    cookieverf,
                    stateid,
                    notification: n,
                    child_attributes: c,
                    dir_attributes: d,
                })))
            }
        ),
        any::<bool>().prop_map(|will_signal| ResOp::GetDirDelegation(Res4::Ok(
            GetDirDelegation4Res::Unavail { will_signal }
        ))),
        fail().prop_map(|s| ResOp::GetDirDelegation(Res4::Err(s))),
        fail().prop_map(|s| ResOp::NotDecoded(OP_LAYOUTGET, s)),
        Just(ResOp::Illegal(Nfsstat4::OpIllegal)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_argument_round_trips(op in arg_op()) {
        round_trip(&op)?;
    }

    #[test]
    fn every_result_round_trips(r in res_op()) {
        round_trip(&r)?;
    }

    #[test]
    fn whole_compounds_round_trip(ops in vec(arg_op(), 0..6), results in vec(res_op(), 0..6), tag in utf8()) {
        round_trip(&Compound4Args { tag: tag.clone(), minorversion: 1, argarray: ops })?;
        round_trip(&Compound4Res { status: Nfsstat4::Ok, tag, resarray: results })?;
    }

    #[test]
    fn the_one_at_a_time_decoder_never_panics(data in vec(any::<u8>(), 0..256)) {
        let _ = crate::fuzzing::decode_nfs4_compound(&data);
        let _ = crate::fuzzing::decode_nfs4_res(&data);
        let _ = crate::fuzzing::decode_nfs4_callback(&data);
        crate::fuzzing::decode_nfs4_attrs(&data);
    }

    #[test]
    fn typed_attributes_round_trip(size in of(any::<u64>()), mode in of(any::<u32>()), owner in of(utf8()), change in of(any::<u64>()), atime in of(time()), set in of(prop_oneof![Just(Settime4::ServerTime), time().prop_map(Settime4::ClientTime)])) {
        let a = FileAttrs { size, mode, owner, change, time_access: atime, time_modify_set: set, ..Default::default() };
        let f = a.to_fattr();
        prop_assert_eq!(FileAttrs::from_fattr(&f), Ok(a.clone()));
        round_trip(&f)?;
    }
}

// ------------------------------------------------------------ wire layouts

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks(4).map(|c| u32::from_be_bytes(c.try_into().unwrap())).collect()
}

/// SEQUENCE, PUTROOTFH, GETATTR(type, size) as RFC 8881's XDR lays it out.
#[test]
fn a_compound_word_by_word() {
    let sessionid = [0x11u8; 16];
    let c = Compound4Args {
        tag: Opaque::from_static(b"ab"),
        minorversion: 1,
        argarray: vec![
            ArgOp::Sequence(Sequence4Args {
                sessionid,
                sequenceid: 7,
                slotid: 2,
                highest_slotid: 3,
                cachethis: true,
            }),
            ArgOp::Putrootfh(()),
            ArgOp::Getattr(Getattr4Args {
                attr_request: Bitmap4::from_bits(&[FATTR4_TYPE, FATTR4_SIZE, FATTR4_MODE]),
            }),
        ],
    };
    let w = words(&to_vec(&c));
    let mut expect = vec![2, u32::from_be_bytes(*b"ab\0\0"), 1, 3, OP_SEQUENCE];
    expect.extend([0x1111_1111; 4]);
    expect.extend([7, 2, 3, 1, OP_PUTROOTFH, OP_GETATTR, 2, (1 << 1) | (1 << 4), 1 << 1]);
    assert_eq!(w, expect);
}

/// A GETATTR result: the bitmap, then the values' byte length, then type and size.
#[test]
fn attributes_layout() {
    let a = FileAttrs { ftype: Some(NfsFtype4::Dir), size: Some(0x1_0000_0002), ..Default::default() };
    let w = words(&to_vec(&a.to_fattr()));
    assert_eq!(w, vec![1, (1 << 1) | (1 << 4), 12, 2, 1, 2]);
    let unknown =
        Fattr4 { attrmask: Bitmap4::from_bits(&[FATTR4_ACL]), attr_vals: Opaque::from_static(&[0, 0, 0, 0]) };
    assert_eq!(FileAttrs::from_fattr(&unknown), Err(AttrError::Unknown(FATTR4_ACL)));
    let short = Fattr4 {
        attrmask: Bitmap4::from_bits(&[FATTR4_SIZE]),
        attr_vals: Opaque::from_static(&[0, 0, 0, 1]),
    };
    assert!(matches!(FileAttrs::from_fattr(&short), Err(AttrError::Xdr(_))));
    let long = Fattr4 {
        attrmask: Bitmap4::from_bits(&[FATTR4_MODE]),
        attr_vals: Opaque::from_static(&[0, 0, 0, 1, 0, 0, 0, 0]),
    };
    assert!(matches!(FileAttrs::from_fattr(&long), Err(AttrError::Xdr(_))));
}

/// The status-only result of an error, and LOCK's denied arm.
#[test]
fn result_layouts() {
    let w = words(&to_vec(&ResOp::Lookup(Res4::Err(Nfsstat4::Noent))));
    assert_eq!(w, vec![OP_LOOKUP, 2]);
    let d = Lock4Denied {
        offset: 1,
        length: 2,
        locktype: NfsLockType4::WriteLt,
        owner: StateOwner4 { clientid: 3, owner: Opaque::from_static(b"o") },
    };
    let w = words(&to_vec(&ResOp::Lock(Lock4Res::Denied(d))));
    assert_eq!(w, vec![OP_LOCK, 10010, 0, 1, 0, 2, 2, 0, 3, 1, u32::from_be_bytes(*b"o\0\0\0")]);
    let w =
        words(&to_vec(&ResOp::Setattr(Setattr4Res { status: Nfsstat4::Perm, attrsset: Bitmap4::default() })));
    assert_eq!(w, vec![OP_SETATTR, 1, 0], "SETATTR's bitmap follows an error too");
    assert_eq!(words(&to_vec(&ResOp::Illegal(Nfsstat4::OpIllegal))), vec![OP_ILLEGAL, 10044]);
}

// ------------------------------------------------------------ the one-at-a-time decoder

#[test]
fn unknown_undecoded_and_malformed_operations() {
    let mut b = Bytes::from(to_vec(&2u32));
    assert_eq!(ArgOp::decode(&mut b), Ok(ArgOp::Illegal(2)));
    let mut b = Bytes::from(to_vec(&76u32));
    assert_eq!(ArgOp::decode(&mut b), Ok(ArgOp::Illegal(76)));
    let mut b = Bytes::from(to_vec(&OP_LAYOUTGET));
    assert_eq!(ArgOp::decode(&mut b), Ok(ArgOp::NotDecoded(OP_LAYOUTGET)));
    // READ with its arguments cut short: BADXDR for READ, not a failed COMPOUND.
    let mut v = to_vec(&ArgOp::Read(Read4Args::default()));
    v.truncate(v.len() - 4);
    let e = ArgOp::decode(&mut Bytes::from(v)).unwrap_err();
    assert_eq!(e.opnum, OP_READ);
    // No operation number at all.
    assert_eq!(ArgOp::decode(&mut Bytes::new()).unwrap_err().opnum, OP_ILLEGAL);
}

#[test]
fn lengths_are_bounded_before_allocating() {
    // A file handle of 129 bytes.
    let mut v = to_vec(&OP_PUTFH);
    v.extend(to_vec(&129u32));
    v.extend([0u8; 132]);
    assert!(ArgOp::decode(&mut Bytes::from(v)).is_err());
    // A client owner of 1025 bytes.
    let mut v = Vec::new();
    [0u8; 8].encode(&mut v);
    v.extend(to_vec(&1025u32));
    assert!(matches!(decode_exact::<ClientOwner4>(Bytes::from(v)), Err(eagernfs_xdr::Error::TooLong { .. })));
    // A bitmap of a billion words.
    let v = to_vec(&1_000_000_000u32);
    assert!(matches!(decode_exact::<Bitmap4>(Bytes::from(v)), Err(eagernfs_xdr::Error::TooLong { .. })));
    // A WRITE claiming 2 GiB.
    let mut v = to_vec(&OP_WRITE);
    Stateid4::default().encode(&mut v);
    0u64.encode(&mut v);
    0u32.encode(&mut v);
    0x8000_0000u32.encode(&mut v);
    assert!(ArgOp::decode(&mut Bytes::from(v)).is_err());
    // A COMPOUND result claiming a billion operations.
    let mut v = to_vec(&0u32);
    0u32.encode(&mut v);
    1_000_000_000u32.encode(&mut v);
    assert!(decode_exact::<Compound4Res>(Bytes::from(v)).is_err());
}

// ------------------------------------------------------------ the table

#[test]
fn the_operation_table_is_indexed_by_number() {
    for (i, o) in NFS4_OPERATIONS.iter().enumerate() {
        assert_eq!(o.number, i as u32 + 3, "{}", o.name);
        assert_eq!(op_info(o.number).unwrap().name, o.name);
    }
    assert!(op_info(0).is_none() && op_info(2).is_none() && op_info(76).is_none());
    assert_eq!(op_name(OP_ILLEGAL), "ILLEGAL");
    assert_eq!(op_info(OP_SEQUENCE).unwrap().position, Position::First);
    for sole in
        [OP_EXCHANGE_ID, OP_CREATE_SESSION, OP_DESTROY_SESSION, OP_BIND_CONN_TO_SESSION, OP_DESTROY_CLIENTID]
    {
        assert_eq!(op_info(sole).unwrap().position, Position::SoleOrInSession);
    }
    for gone in [OP_OPEN_CONFIRM, OP_RENEW, OP_SETCLIENTID, OP_SETCLIENTID_CONFIRM, OP_RELEASE_LOCKOWNER] {
        assert_eq!(op_info(gone).unwrap().minor_max, 0, "NFSv4.0 only");
    }
    assert_eq!(op_info(OP_SEEK).unwrap().minor_min, 2);
    assert!(op_info(OP_WRITE).unwrap().mutates && !op_info(OP_READ).unwrap().mutates);
    assert!(op_info(OP_READ).unwrap().needs_fh && !op_info(OP_PUTFH).unwrap().needs_fh);
}

#[test]
fn bitmap_helpers() {
    let b = Bitmap4::from_bits(&[0, 31, 32, 75]);
    assert_eq!(b.0.len(), 3);
    assert_eq!(b.iter().collect::<Vec<_>>(), vec![0, 31, 32, 75]);
    assert!(b.contains(75) && !b.contains(74) && !b.contains(500));
    let c = b.and(&Bitmap4::from_bits(&[31, 75, 80]));
    assert_eq!(c.iter().collect::<Vec<_>>(), vec![31, 75]);
    assert_eq!(b.minus(&c).iter().collect::<Vec<_>>(), vec![0, 32]);
    assert!(Bitmap4(vec![0, 0]).is_empty());
}

#[test]
fn callbacks_round_trip() {
    let c = CbCompound4Args {
        tag: Opaque::from_static(b""),
        minorversion: 1,
        callback_ident: 0,
        argarray: vec![
            CbArgOp::Sequence(CbSequence4Args {
                sessionid: [1; 16],
                sequenceid: 1,
                slotid: 0,
                highest_slotid: 0,
                cachethis: false,
                referring_call_lists: vec![],
            }),
            CbArgOp::Recall(CbRecall4Args {
                stateid: Stateid4 { seqid: 1, other: [2; 12] },
                truncate: false,
                fh: NfsFh4 { data: Opaque::from_static(b"fh") },
            }),
        ],
    };
    let back: CbCompound4Args = decode_exact(Bytes::from(to_vec(&c))).unwrap();
    assert_eq!(back, c);
    let r = CbCompound4Res {
        status: Nfsstat4::Ok,
        tag: Opaque::default(),
        resarray: vec![CbResOp::Sequence(Res4::Err(Nfsstat4::Badsession)), CbResOp::Recall(Res4::OK)],
    };
    let back: CbCompound4Res = decode_exact(Bytes::from(to_vec(&r))).unwrap();
    assert_eq!(back, r);
}
