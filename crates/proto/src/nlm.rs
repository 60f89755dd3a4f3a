//! The Network Lock Manager, version 4 (X/Open XNFS "Protocols for
//! Interworking", chapter 10; the NFSv3 form of NLM, with 64-bit offsets),
//! and the Network Status Monitor (NSM, version 1), which tells a lock
//! manager that a peer rebooted.
//!
//! NFSv3 has no locks of its own: a client asks the server's lock manager
//! (program 100021) for a byte-range lock on a file handle, naming itself
//! (`caller_name`) and the lock owner (`oh`, `svid`). When a client
//! reboots, its status monitor sends SM_NOTIFY to the server's (program
//! 100024), which drops the client's locks; when the server reboots, clients
//! reclaim their locks during a grace period.
//!
//! # Layout
//! - constants, procedure numbers and [`NLM4_PROCEDURES`], [`NSM_PROCEDURES`];
//! - data types: [`Nlm4Stats`], [`Nlm4Lock`], [`Nlm4Holder`] and the
//!   argument/result structs of each procedure;
//! - [`NlmArgs`] / [`NlmRes`], [`NsmArgs`] / [`NsmRes`]: the body of any
//!   procedure by number.

use eagernfs_xdr::{xdr_enum, xdr_struct, BufMut, Bytes, Decode, Encode, Opaque};

use crate::{Error, ProcInfo};

/// The NLM program number.
pub const NLM_PROGRAM: u32 = 100021;
/// NLM version 4 (for NFSv3: 64-bit offsets and lengths).
pub const NLM_V4: u32 = 4;
/// The NSM (status monitor) program number.
pub const NSM_PROGRAM: u32 = 100024;
/// NSM version 1.
pub const NSM_V1: u32 = 1;

/// Longest `caller_name`, in bytes (`LM_MAXSTRLEN`).
pub const LM_MAXSTRLEN: usize = 1024;
/// Longest `netobj` (cookie, owner handle, file handle), in bytes (`MAXNETOBJ_SZ`).
pub const MAXNETOBJ_SZ: usize = 1024;
/// Longest host name in FREE_ALL (`MAXNAMELEN`).
pub const MAXNAMELEN: usize = 1025;
/// Longest host name in NSM calls (`SM_MAXSTRLEN`).
pub const SM_MAXSTRLEN: usize = 1024;

/// A `netobj`: opaque bytes a peer gives back unchanged (cookies, owners, handles).
#[doc(alias = "netobj")]
pub type Netobj = Opaque<MAXNETOBJ_SZ>;
/// A lock manager's host name (`caller_name`).
pub type CallerName = Opaque<LM_MAXSTRLEN>;

/// Procedure numbers of NLM version 4.
pub mod proc4 {
    pub const NULL: u32 = 0;
    pub const TEST: u32 = 1;
    pub const LOCK: u32 = 2;
    pub const CANCEL: u32 = 3;
    pub const UNLOCK: u32 = 4;
    /// Server → client: a blocked lock was granted.
    pub const GRANTED: u32 = 5;
    pub const TEST_MSG: u32 = 6;
    pub const LOCK_MSG: u32 = 7;
    pub const CANCEL_MSG: u32 = 8;
    pub const UNLOCK_MSG: u32 = 9;
    pub const GRANTED_MSG: u32 = 10;
    pub const TEST_RES: u32 = 11;
    pub const LOCK_RES: u32 = 12;
    pub const CANCEL_RES: u32 = 13;
    pub const UNLOCK_RES: u32 = 14;
    pub const GRANTED_RES: u32 = 15;
    pub const SHARE: u32 = 20;
    pub const UNSHARE: u32 = 21;
    /// LOCK without monitoring (the client will not send SM_NOTIFY).
    pub const NM_LOCK: u32 = 22;
    /// Release every lock of a host (its lock manager restarted).
    pub const FREE_ALL: u32 = 23;
}

/// The NLM v4 procedure table, indexed by procedure number; numbers 16–19
/// are unassigned (rows named "UNUSED": PROC_UNAVAIL). Lock calls change no
/// file data (`mutates` false) and repeating one gives the same lock state
/// (a lock is owned, so a retransmitted LOCK or UNLOCK finds it done).
pub const NLM4_PROCEDURES: [ProcInfo; 24] = [
    ProcInfo::new(proc4::NULL, "NULL", false, true),
    ProcInfo::new(proc4::TEST, "TEST", false, true),
    ProcInfo::new(proc4::LOCK, "LOCK", false, true),
    ProcInfo::new(proc4::CANCEL, "CANCEL", false, true),
    ProcInfo::new(proc4::UNLOCK, "UNLOCK", false, true),
    ProcInfo::new(proc4::GRANTED, "GRANTED", false, true),
    ProcInfo::new(proc4::TEST_MSG, "TEST_MSG", false, true),
    ProcInfo::new(proc4::LOCK_MSG, "LOCK_MSG", false, true),
    ProcInfo::new(proc4::CANCEL_MSG, "CANCEL_MSG", false, true),
    ProcInfo::new(proc4::UNLOCK_MSG, "UNLOCK_MSG", false, true),
    ProcInfo::new(proc4::GRANTED_MSG, "GRANTED_MSG", false, true),
    ProcInfo::new(proc4::TEST_RES, "TEST_RES", false, true),
    ProcInfo::new(proc4::LOCK_RES, "LOCK_RES", false, true),
    ProcInfo::new(proc4::CANCEL_RES, "CANCEL_RES", false, true),
    ProcInfo::new(proc4::UNLOCK_RES, "UNLOCK_RES", false, true),
    ProcInfo::new(proc4::GRANTED_RES, "GRANTED_RES", false, true),
    ProcInfo::new(16, "UNUSED", false, true),
    ProcInfo::new(17, "UNUSED", false, true),
    ProcInfo::new(18, "UNUSED", false, true),
    ProcInfo::new(19, "UNUSED", false, true),
    ProcInfo::new(proc4::SHARE, "SHARE", false, true),
    ProcInfo::new(proc4::UNSHARE, "UNSHARE", false, true),
    ProcInfo::new(proc4::NM_LOCK, "NM_LOCK", false, true),
    ProcInfo::new(proc4::FREE_ALL, "FREE_ALL", false, true),
];

/// The table row of NLM v4 procedure `procedure`, or `None` (PROC_UNAVAIL).
pub fn nlm_procedure(procedure: u32) -> Option<&'static ProcInfo> {
    NLM4_PROCEDURES.get(procedure as usize).filter(|p| p.name != "UNUSED")
}

/// Procedure numbers of NSM version 1.
pub mod sm {
    pub const NULL: u32 = 0;
    pub const STAT: u32 = 1;
    pub const MON: u32 = 2;
    pub const UNMON: u32 = 3;
    pub const UNMON_ALL: u32 = 4;
    pub const SIMU_CRASH: u32 = 5;
    pub const NOTIFY: u32 = 6;
}

/// The NSM v1 procedure table, indexed by procedure number.
pub const NSM_PROCEDURES: [ProcInfo; 7] = [
    ProcInfo::new(sm::NULL, "NULL", false, true),
    ProcInfo::new(sm::STAT, "STAT", false, true),
    ProcInfo::new(sm::MON, "MON", false, true),
    ProcInfo::new(sm::UNMON, "UNMON", false, true),
    ProcInfo::new(sm::UNMON_ALL, "UNMON_ALL", false, true),
    ProcInfo::new(sm::SIMU_CRASH, "SIMU_CRASH", false, true),
    ProcInfo::new(sm::NOTIFY, "NOTIFY", false, true),
];

/// The table row of NSM procedure `procedure`, or `None` (PROC_UNAVAIL).
pub fn nsm_procedure(procedure: u32) -> Option<&'static ProcInfo> {
    NSM_PROCEDURES.get(procedure as usize)
}

xdr_enum! {
    /// The result of a lock call (`nlm4_stats`).
    #[doc(alias = "nlm4_stats")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Nlm4Stats {
        /// The lock was granted (or released, or the test found no conflict).
        Granted = 0,
        /// A conflicting lock is held.
        Denied = 1,
        /// The server is out of lock resources.
        DeniedNolocks = 2,
        /// The lock is queued; a GRANTED call will follow.
        Blocked = 3,
        /// The server restarted recently: only reclaims are accepted.
        DeniedGracePeriod = 4,
        /// Granting would deadlock.
        Deadlck = 5,
        /// The file system is read-only.
        Rofs = 6,
        /// The file handle is stale.
        StaleFh = 7,
        /// The offset or length is too large.
        Fbig = 8,
        /// Any other failure.
        Failed = 9,
    }
}

xdr_struct! {
    /// A lock request (`nlm4_lock`): who asks, for which file, which range.
    /// `l_len` 0 means "to the end of the file, however it grows".
    #[doc(alias = "nlm4_lock")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4Lock {
        /// The client host's name for itself.
        pub caller_name: CallerName,
        /// The NFS file handle.
        pub fh: Netobj,
        /// The lock owner, opaque to the server.
        pub oh: Netobj,
        /// The owner's process id on the client (part of its identity).
        pub svid: i32,
        /// First byte of the range.
        pub l_offset: u64,
        /// Bytes in the range; 0: to the end of the file.
        pub l_len: u64,
    }
}

xdr_struct! {
    /// Who holds a conflicting lock (`nlm4_holder`).
    #[doc(alias = "nlm4_holder")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4Holder {
        pub exclusive: bool,
        pub svid: i32,
        pub oh: Netobj,
        pub l_offset: u64,
        pub l_len: u64,
    }
}

/// TEST's answer (`nlm4_testrply`): the conflicting holder when denied.
#[doc(alias = "nlm4_testrply")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nlm4TestReply {
    /// A lock that conflicts with the one tested.
    Denied(Nlm4Holder),
    /// Any other status (GRANTED: no conflict).
    Other(Nlm4Stats),
}

impl Encode for Nlm4TestReply {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Nlm4TestReply::Denied(h) => {
                Nlm4Stats::Denied.encode(buf);
                h.encode(buf);
            }
            Nlm4TestReply::Other(s) => s.encode(buf),
        }
    }
}

impl Decode for Nlm4TestReply {
    fn decode(buf: &mut Bytes) -> eagernfs_xdr::Result<Self> {
        Ok(match Nlm4Stats::decode(buf)? {
            Nlm4Stats::Denied => Nlm4TestReply::Denied(Nlm4Holder::decode(buf)?),
            s => Nlm4TestReply::Other(s),
        })
    }
}

xdr_struct! {
    /// TEST arguments (`nlm4_testargs`).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4TestArgs {
        pub cookie: Netobj,
        pub exclusive: bool,
        pub alock: Nlm4Lock,
    }
}

xdr_struct! {
    /// TEST result (`nlm4_testres`).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Nlm4TestRes {
        pub cookie: Netobj,
        pub stat: Nlm4TestReply,
    }
}

xdr_struct! {
    /// LOCK and NM_LOCK arguments (`nlm4_lockargs`).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4LockArgs {
        pub cookie: Netobj,
        /// Wait (BLOCKED, then a GRANTED call) instead of DENIED.
        pub block: bool,
        pub exclusive: bool,
        pub alock: Nlm4Lock,
        /// This is a lock the client held before the server restarted.
        pub reclaim: bool,
        /// The client's NSM state number.
        pub state: i32,
    }
}

xdr_struct! {
    /// CANCEL arguments (`nlm4_cancargs`): withdraw a blocked LOCK.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4CancArgs {
        pub cookie: Netobj,
        pub block: bool,
        pub exclusive: bool,
        pub alock: Nlm4Lock,
    }
}

xdr_struct! {
    /// UNLOCK arguments (`nlm4_unlockargs`).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4UnlockArgs {
        pub cookie: Netobj,
        pub alock: Nlm4Lock,
    }
}

xdr_struct! {
    /// The result of LOCK, CANCEL, UNLOCK and GRANTED (`nlm4_res`).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Nlm4Res {
        pub cookie: Netobj,
        pub stat: Nlm4Stats,
    }
}

xdr_struct! {
    /// A DOS-style share reservation (`nlm4_share`).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4Share {
        pub caller_name: CallerName,
        pub fh: Netobj,
        pub oh: Netobj,
        /// Modes denied to others (`fsh4_mode`: 0 none, 1 read, 2 write, 3 both).
        pub mode: u32,
        /// Access wanted (`fsh4_access`: 0 none, 1 read, 2 write, 3 both).
        pub access: u32,
    }
}

xdr_struct! {
    /// SHARE and UNSHARE arguments (`nlm4_shareargs`).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4ShareArgs {
        pub cookie: Netobj,
        pub share: Nlm4Share,
        pub reclaim: bool,
    }
}

xdr_struct! {
    /// SHARE and UNSHARE result (`nlm4_shareres`).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Nlm4ShareRes {
        pub cookie: Netobj,
        pub stat: Nlm4Stats,
        pub sequence: i32,
    }
}

xdr_struct! {
    /// FREE_ALL arguments (`nlm4_notify`).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Nlm4Notify {
        pub name: Opaque<MAXNAMELEN>,
        pub state: i32,
    }
}

/// The call body of any NLM v4 procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NlmArgs {
    Null,
    Test(Nlm4TestArgs),
    Lock(Nlm4LockArgs),
    Cancel(Nlm4CancArgs),
    Unlock(Nlm4UnlockArgs),
    Granted(Nlm4TestArgs),
    /// The asynchronous `_MSG` calls carry the same arguments as their
    /// synchronous twins; the answer goes back as a separate `_RES` call.
    TestMsg(Nlm4TestArgs),
    LockMsg(Nlm4LockArgs),
    CancelMsg(Nlm4CancArgs),
    UnlockMsg(Nlm4UnlockArgs),
    GrantedMsg(Nlm4TestArgs),
    TestRes(Nlm4TestRes),
    LockRes(Nlm4Res),
    CancelRes(Nlm4Res),
    UnlockRes(Nlm4Res),
    GrantedRes(Nlm4Res),
    Share(Nlm4ShareArgs),
    Unshare(Nlm4ShareArgs),
    NmLock(Nlm4LockArgs),
    FreeAll(Nlm4Notify),
}

impl NlmArgs {
    /// Decode the arguments of NLM v4 procedure `procedure` from the front of `buf`.
    pub fn decode(procedure: u32, buf: &mut Bytes) -> Result<Self, Error> {
        use proc4::*;
        Ok(match procedure {
            NULL => NlmArgs::Null,
            TEST => NlmArgs::Test(Decode::decode(buf)?),
            LOCK => NlmArgs::Lock(Decode::decode(buf)?),
            CANCEL => NlmArgs::Cancel(Decode::decode(buf)?),
            UNLOCK => NlmArgs::Unlock(Decode::decode(buf)?),
            GRANTED => NlmArgs::Granted(Decode::decode(buf)?),
            TEST_MSG => NlmArgs::TestMsg(Decode::decode(buf)?),
            LOCK_MSG => NlmArgs::LockMsg(Decode::decode(buf)?),
            CANCEL_MSG => NlmArgs::CancelMsg(Decode::decode(buf)?),
            UNLOCK_MSG => NlmArgs::UnlockMsg(Decode::decode(buf)?),
            GRANTED_MSG => NlmArgs::GrantedMsg(Decode::decode(buf)?),
            TEST_RES => NlmArgs::TestRes(Decode::decode(buf)?),
            LOCK_RES => NlmArgs::LockRes(Decode::decode(buf)?),
            CANCEL_RES => NlmArgs::CancelRes(Decode::decode(buf)?),
            UNLOCK_RES => NlmArgs::UnlockRes(Decode::decode(buf)?),
            GRANTED_RES => NlmArgs::GrantedRes(Decode::decode(buf)?),
            SHARE => NlmArgs::Share(Decode::decode(buf)?),
            UNSHARE => NlmArgs::Unshare(Decode::decode(buf)?),
            NM_LOCK => NlmArgs::NmLock(Decode::decode(buf)?),
            FREE_ALL => NlmArgs::FreeAll(Decode::decode(buf)?),
            _ => return Err(Error::UnknownProcedure { program: "NLM", procedure }),
        })
    }
}

impl Encode for NlmArgs {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            NlmArgs::Null => {}
            NlmArgs::Test(a) | NlmArgs::Granted(a) | NlmArgs::TestMsg(a) | NlmArgs::GrantedMsg(a) => {
                a.encode(buf)
            }
            NlmArgs::Lock(a) | NlmArgs::LockMsg(a) | NlmArgs::NmLock(a) => a.encode(buf),
            NlmArgs::Cancel(a) | NlmArgs::CancelMsg(a) => a.encode(buf),
            NlmArgs::Unlock(a) | NlmArgs::UnlockMsg(a) => a.encode(buf),
            NlmArgs::TestRes(r) => r.encode(buf),
            NlmArgs::LockRes(r) | NlmArgs::CancelRes(r) | NlmArgs::UnlockRes(r) | NlmArgs::GrantedRes(r) => {
                r.encode(buf)
            }
            NlmArgs::Share(a) | NlmArgs::Unshare(a) => a.encode(buf),
            NlmArgs::FreeAll(n) => n.encode(buf),
        }
    }
}

// ---- NSM ----

xdr_struct! {
    /// SM_STAT argument (`sm_name`).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct SmName {
        pub mon_name: Opaque<SM_MAXSTRLEN>,
    }
}

xdr_struct! {
    /// Who to call back when a monitored host reboots (`my_id`).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct MyId {
        pub my_name: Opaque<SM_MAXSTRLEN>,
        pub my_prog: u32,
        pub my_vers: u32,
        pub my_proc: u32,
    }
}

xdr_struct! {
    /// A monitored host and its watcher (`mon_id`).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct MonId {
        pub mon_name: Opaque<SM_MAXSTRLEN>,
        pub my_id: MyId,
    }
}

xdr_struct! {
    /// SM_MON argument (`mon`).
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Mon {
        pub mon_id: MonId,
        pub priv_: [u8; 16],
    }
}

xdr_struct! {
    /// SM_NOTIFY argument (`stat_chge`): `mon_name` restarted and is now at `state`.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct StatChge {
        pub mon_name: Opaque<SM_MAXSTRLEN>,
        pub state: i32,
    }
}

xdr_struct! {
    /// SM_STAT and SM_MON result (`sm_stat_res`): `res` 0 success, 1 failure.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct SmStatRes {
        pub res: u32,
        pub state: i32,
    }
}

/// The call body of any NSM procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NsmArgs {
    Null,
    Stat(SmName),
    Mon(Mon),
    Unmon(MonId),
    UnmonAll(MyId),
    SimuCrash,
    Notify(StatChge),
}

impl NsmArgs {
    /// Decode the arguments of NSM procedure `procedure` from the front of `buf`.
    pub fn decode(procedure: u32, buf: &mut Bytes) -> Result<Self, Error> {
        Ok(match procedure {
            sm::NULL => NsmArgs::Null,
            sm::STAT => NsmArgs::Stat(Decode::decode(buf)?),
            sm::MON => NsmArgs::Mon(Decode::decode(buf)?),
            sm::UNMON => NsmArgs::Unmon(Decode::decode(buf)?),
            sm::UNMON_ALL => NsmArgs::UnmonAll(Decode::decode(buf)?),
            sm::SIMU_CRASH => NsmArgs::SimuCrash,
            sm::NOTIFY => NsmArgs::Notify(Decode::decode(buf)?),
            _ => return Err(Error::UnknownProcedure { program: "NSM", procedure }),
        })
    }
}

impl Encode for NsmArgs {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            NsmArgs::Null | NsmArgs::SimuCrash => {}
            NsmArgs::Stat(a) => a.encode(buf),
            NsmArgs::Mon(a) => a.encode(buf),
            NsmArgs::Unmon(a) => a.encode(buf),
            NsmArgs::UnmonAll(a) => a.encode(buf),
            NsmArgs::Notify(a) => a.encode(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eagernfs_xdr::to_vec;

    fn lock() -> Nlm4Lock {
        Nlm4Lock {
            caller_name: Opaque::from_static(b"client-a"),
            fh: Opaque::from_static(&[1, 2, 3, 4, 5]),
            oh: Opaque::from_static(b"owner"),
            svid: 42,
            l_offset: 1 << 40,
            l_len: 0,
        }
    }

    #[test]
    fn every_call_round_trips_by_procedure_number() {
        let la = Nlm4LockArgs {
            cookie: Opaque::from_static(b"c"),
            block: true,
            exclusive: true,
            alock: lock(),
            reclaim: false,
            state: 3,
        };
        let ta = Nlm4TestArgs { cookie: Opaque::from_static(b"t"), exclusive: false, alock: lock() };
        let calls = [
            NlmArgs::Null,
            NlmArgs::Test(ta.clone()),
            NlmArgs::Lock(la.clone()),
            NlmArgs::Cancel(Nlm4CancArgs {
                cookie: Netobj::default(),
                block: true,
                exclusive: true,
                alock: lock(),
            }),
            NlmArgs::Unlock(Nlm4UnlockArgs { cookie: Netobj::default(), alock: lock() }),
            NlmArgs::Granted(ta),
            NlmArgs::NmLock(la),
            NlmArgs::FreeAll(Nlm4Notify { name: Opaque::from_static(b"client-a"), state: 5 }),
        ];
        let numbers = [0, 1, 2, 3, 4, 5, 22, 23];
        for (args, n) in calls.iter().zip(numbers) {
            let mut bytes = Bytes::from(to_vec(args));
            assert_eq!(&NlmArgs::decode(n, &mut bytes).unwrap(), args, "procedure {n}");
            assert!(bytes.is_empty());
        }
    }

    #[test]
    fn a_denied_test_carries_the_holder_and_others_do_not() {
        let denied = Nlm4TestRes {
            cookie: Opaque::from_static(b"x"),
            stat: Nlm4TestReply::Denied(Nlm4Holder {
                exclusive: true,
                svid: 7,
                oh: Opaque::from_static(b"o"),
                l_offset: 10,
                l_len: 5,
            }),
        };
        let granted =
            Nlm4TestRes { cookie: Opaque::from_static(b"x"), stat: Nlm4TestReply::Other(Nlm4Stats::Granted) };
        for r in [denied, granted.clone()] {
            assert_eq!(eagernfs_xdr::decode_exact::<Nlm4TestRes>(Bytes::from(to_vec(&r))).unwrap(), r);
        }
        // cookie (4 + 4 bytes) and one status word: nothing else.
        assert_eq!(to_vec(&granted).len(), 12);
    }

    #[test]
    fn unassigned_and_unknown_procedures_are_unavailable() {
        assert!(nlm_procedure(16).is_none());
        assert!(nlm_procedure(24).is_none());
        assert_eq!(nlm_procedure(proc4::FREE_ALL).map(|p| p.name), Some("FREE_ALL"));
        assert!(NlmArgs::decode(17, &mut Bytes::new()).is_err());
        assert!(nsm_procedure(7).is_none());
    }

    #[test]
    fn oversized_names_are_refused_before_allocation() {
        let mut wire = Vec::new();
        eagernfs_xdr::Encode::encode(&(LM_MAXSTRLEN as u32 + 1), &mut wire);
        wire.extend(std::iter::repeat_n(b'a', LM_MAXSTRLEN + 4));
        // As the caller_name of a TEST: cookie first.
        let mut call = to_vec(&Netobj::default());
        eagernfs_xdr::Encode::encode(&true, &mut call);
        call.extend_from_slice(&wire);
        assert!(NlmArgs::decode(proc4::TEST, &mut Bytes::from(call)).is_err());
    }
}
