//! NFSv4.1/4.2 data types shared by several operations (RFC 8881 §3, §18;
//! RFC 7862 §4–§7).
//!
//! Every variable-length field is bounded when decoded: file handles by
//! [`NFS4_FHSIZE`], owners and ids by [`NFS4_OPAQUE_LIMIT`], names by
//! [`COMPONENT_WIRE_MAX`], bitmaps by [`BITMAP4_WORDS_MAX`], attribute
//! values by [`ATTRLIST_MAX`]. Names are bounded generously on the wire and
//! checked against the server's limit by the operation, so a long name is
//! NFS4ERR_NAMETOOLONG, not a decoding error.

use eagernfs_xdr::{
    decode_array, encode_array, xdr_enum, xdr_struct, BufMut, Bytes, Decode, Encode, Error, Opaque, Result,
};

/// Largest file handle (`NFS4_FHSIZE`).
pub const NFS4_FHSIZE: usize = 128;
/// Size of a verifier (`NFS4_VERIFIER_SIZE`).
pub const NFS4_VERIFIER_SIZE: usize = 8;
/// Size of a stateid's `other` field (`NFS4_OTHER_SIZE`).
pub const NFS4_OTHER_SIZE: usize = 12;
/// Longest client owner, state owner or server major id (`NFS4_OPAQUE_LIMIT`).
pub const NFS4_OPAQUE_LIMIT: usize = 1024;
/// Size of a session id (`NFS4_SESSIONID_SIZE`).
pub const NFS4_SESSIONID_SIZE: usize = 16;
/// Longest name component decoded; the server answers NFS4ERR_NAMETOOLONG
/// past its own limit (255), so this only bounds memory.
pub const COMPONENT_WIRE_MAX: usize = 4096;
/// Longest symbolic link target decoded (`linktext4`): Linux's `PATH_MAX`.
pub const LINKTEXT_MAX: usize = 4096;
/// Longest UTF-8 string decoded for owners, domains, implementation names and tags.
pub const UTF8STR_MAX: usize = 1024;
/// Most words in a `bitmap4` (RFC 8881 defines attributes up to 86: three words).
pub const BITMAP4_WORDS_MAX: usize = 16;
/// Longest attribute value list (`attrlist4`).
pub const ATTRLIST_MAX: usize = 64 * 1024;
/// Longest security mechanism OID (`sec_oid4`) or GSS handle.
pub const SEC_OID_MAX: usize = 1024;
/// Most security parameter sets in CREATE_SESSION or BACKCHANNEL_CTL.
pub const SEC_PARMS_MAX: usize = 16;
/// Most stateids in one TEST_STATEID.
pub const TEST_STATEIDS_MAX: usize = 1024;
/// Largest READ or WRITE payload decoded (the server advertises no more).
pub const MAX_IO_SIZE: usize = 1 << 20;

/// A name component (`component4`, `utf8str_cs`): opaque on the wire, UTF-8 by contract.
#[doc(alias = "component4")]
pub type Component4 = Opaque<COMPONENT_WIRE_MAX>;
/// A UTF-8 string (`utf8str_cs`, `utf8str_cis`, `utf8str_mixed`).
#[doc(alias = "utf8string")]
pub type Utf8Str = Opaque<UTF8STR_MAX>;
/// A symbolic link's target (`linktext4`).
#[doc(alias = "linktext4")]
pub type Linktext4 = Opaque<LINKTEXT_MAX>;
/// A verifier (`verifier4`).
#[doc(alias = "verifier4")]
pub type Verifier4 = [u8; NFS4_VERIFIER_SIZE];
/// A session id (`sessionid4`).
#[doc(alias = "sessionid4")]
pub type Sessionid4 = [u8; NFS4_SESSIONID_SIZE];
/// A client id (`clientid4`).
#[doc(alias = "clientid4")]
pub type Clientid4 = u64;
/// A session slot's sequence id (`sequenceid4`).
#[doc(alias = "sequenceid4")]
pub type Sequenceid4 = u32;
/// A slot number (`slotid4`).
#[doc(alias = "slotid4")]
pub type Slotid4 = u32;
/// A state owner sequence id (`seqid4`); ignored in NFSv4.1.
#[doc(alias = "seqid4")]
pub type Seqid4 = u32;

xdr_enum! {
    /// Status of every operation and of COMPOUND itself (RFC 8881 §15.1, `nfsstat4`).
    #[doc(alias = "nfsstat4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Nfsstat4 {
        Ok = 0,
        Perm = 1,
        Noent = 2,
        Io = 5,
        Nxio = 6,
        Access = 13,
        Exist = 17,
        Xdev = 18,
        Notdir = 20,
        Isdir = 21,
        Inval = 22,
        Fbig = 27,
        Nospc = 28,
        Rofs = 30,
        Mlink = 31,
        Nametoolong = 63,
        Notempty = 66,
        Dquot = 69,
        Stale = 70,
        Badhandle = 10001,
        BadCookie = 10003,
        Notsupp = 10004,
        Toosmall = 10005,
        Serverfault = 10006,
        Badtype = 10007,
        Delay = 10008,
        Same = 10009,
        Denied = 10010,
        Expired = 10011,
        Locked = 10012,
        Grace = 10013,
        Fhexpired = 10014,
        ShareDenied = 10015,
        Wrongsec = 10016,
        ClidInuse = 10017,
        Resource = 10018,
        Moved = 10019,
        Nofilehandle = 10020,
        MinorVersMismatch = 10021,
        StaleClientid = 10022,
        StaleStateid = 10023,
        OldStateid = 10024,
        BadStateid = 10025,
        BadSeqid = 10026,
        NotSame = 10027,
        LockRange = 10028,
        Symlink = 10029,
        Restorefh = 10030,
        LeaseMoved = 10031,
        Attrnotsupp = 10032,
        NoGrace = 10033,
        ReclaimBad = 10034,
        ReclaimConflict = 10035,
        Badxdr = 10036,
        LocksHeld = 10037,
        Openmode = 10038,
        Badowner = 10039,
        Badchar = 10040,
        Badname = 10041,
        BadRange = 10042,
        LockNotsupp = 10043,
        OpIllegal = 10044,
        Deadlock = 10045,
        FileOpen = 10046,
        AdminRevoked = 10047,
        CbPathDown = 10048,
        Badiomode = 10049,
        Badlayout = 10050,
        BadSessionDigest = 10051,
        Badsession = 10052,
        Badslot = 10053,
        CompleteAlready = 10054,
        ConnNotBoundToSession = 10055,
        DelegAlreadyWanted = 10056,
        BackChanBusy = 10057,
        Layouttrylater = 10058,
        Layoutunavailable = 10059,
        NomatchingLayout = 10060,
        Recallconflict = 10061,
        UnknownLayouttype = 10062,
        SeqMisordered = 10063,
        SequencePos = 10064,
        ReqTooBig = 10065,
        RepTooBig = 10066,
        RepTooBigToCache = 10067,
        RetryUncachedRep = 10068,
        UnsafeCompound = 10069,
        TooManyOps = 10070,
        OpNotInSession = 10071,
        HashAlgUnsupp = 10072,
        ClientidBusy = 10074,
        PnfsIoHole = 10075,
        SeqFalseRetry = 10076,
        BadHighSlot = 10077,
        Deadsession = 10078,
        EncrAlgUnsupp = 10079,
        PnfsNoLayout = 10080,
        NotOnlyOp = 10081,
        WrongCred = 10082,
        WrongType = 10083,
        DirdelegUnavail = 10084,
        RejectDeleg = 10085,
        Returnconflict = 10086,
        DelegRevoked = 10087,
        PartnerNotsupp = 10088,
        PartnerNoAuth = 10089,
        UnionNotsupp = 10090,
        OffloadDenied = 10091,
        WrongLfs = 10092,
        Badlabel = 10093,
        OffloadNoReqs = 10094,
        Noxattr = 10095,
        Xattr2big = 10096,
    }
}

impl Nfsstat4 {
    /// True for NFS4_OK.
    pub fn is_ok(self) -> bool {
        self == Nfsstat4::Ok
    }
}

xdr_enum! {
    /// The type of an object (RFC 8881 §3.3.8? `nfs_ftype4`).
    #[doc(alias = "nfs_ftype4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum NfsFtype4 {
        Reg = 1,
        Dir = 2,
        Blk = 3,
        Chr = 4,
        Lnk = 5,
        Sock = 6,
        Fifo = 7,
        Attrdir = 8,
        Namedattr = 9,
    }
}

xdr_struct! {
    /// A file handle (`nfs_fh4`): at most [`NFS4_FHSIZE`] bytes only the server interprets.
    #[doc(alias = "nfs_fh4")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct NfsFh4 {
        pub data: Opaque<NFS4_FHSIZE>,
    }
}

xdr_struct! {
    /// A state id (RFC 8881 §8.2, `stateid4`): a sequence number and 12 bytes the server chose.
    #[doc(alias = "stateid4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Stateid4 {
        pub seqid: u32,
        pub other: [u8; NFS4_OTHER_SIZE],
    }
}

impl Stateid4 {
    /// The anonymous stateid (all zeros, RFC 8881 §8.2.3).
    pub const ANONYMOUS: Stateid4 = Stateid4 { seqid: 0, other: [0; 12] };
    /// The READ bypass stateid (all ones).
    pub const BYPASS: Stateid4 = Stateid4 { seqid: u32::MAX, other: [0xff; 12] };
    /// The current stateid (seqid 1, other zero): "the stateid of the previous operation".
    pub const CURRENT: Stateid4 = Stateid4 { seqid: 1, other: [0; 12] };
    /// The invalid stateid (seqid all ones, other zero).
    pub const INVALID: Stateid4 = Stateid4 { seqid: u32::MAX, other: [0; 12] };
}

/// An attribute bitmap (`bitmap4`): bit `n` of word `n / 32` set means attribute `n`.
#[doc(alias = "bitmap4")]
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Bitmap4(pub Vec<u32>);

impl Bitmap4 {
    /// A bitmap with the given bits set.
    pub fn from_bits(bits: &[u32]) -> Bitmap4 {
        let mut b = Bitmap4::default();
        for &n in bits {
            b.set(n);
        }
        b
    }

    /// Whether bit `n` is set.
    pub fn contains(&self, n: u32) -> bool {
        let (w, bit) = ((n / 32) as usize, n % 32);
        self.0.get(w).is_some_and(|x| x & (1 << bit) != 0)
    }

    /// Set bit `n`.
    pub fn set(&mut self, n: u32) {
        let (w, bit) = ((n / 32) as usize, n % 32);
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << bit;
    }

    /// Clear bit `n`.
    pub fn clear(&mut self, n: u32) {
        let (w, bit) = ((n / 32) as usize, n % 32);
        if let Some(x) = self.0.get_mut(w) {
            *x &= !(1 << bit);
        }
    }

    /// The bits set in both.
    pub fn and(&self, other: &Bitmap4) -> Bitmap4 {
        let mut b = Bitmap4(self.0.iter().zip(&other.0).map(|(a, b)| a & b).collect());
        b.trim();
        b
    }

    /// The bits of `self` not in `other`.
    pub fn minus(&self, other: &Bitmap4) -> Bitmap4 {
        let mut b = Bitmap4(
            self.0.iter().enumerate().map(|(i, a)| a & !other.0.get(i).copied().unwrap_or(0)).collect(),
        );
        b.trim();
        b
    }

    /// Drop trailing zero words.
    pub fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    /// No bit set.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    /// The set bits, in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().enumerate().flat_map(|(w, word)| {
            (0..32).filter(move |b| word & (1 << b) != 0).map(move |b| w as u32 * 32 + b)
        })
    }
}

impl Encode for Bitmap4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_array(buf, &self.0)
    }
}
impl Decode for Bitmap4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        decode_array(buf, BITMAP4_WORDS_MAX).map(Bitmap4)
    }
}

xdr_struct! {
    /// Attributes on the wire (`fattr4`): which are present, then their values in bit order.
    #[doc(alias = "fattr4")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Fattr4 {
        pub attrmask: Bitmap4,
        pub attr_vals: Opaque<ATTRLIST_MAX>,
    }
}

xdr_struct! {
    /// A time (`nfstime4`): signed seconds and nanoseconds since the Unix epoch.
    #[doc(alias = "nfstime4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Nfstime4 {
        pub seconds: i64,
        pub nseconds: u32,
    }
}

/// How SETATTR sets a time (`settime4`).
#[doc(alias = "settime4")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Settime4 {
    /// SET_TO_SERVER_TIME4.
    ServerTime,
    /// SET_TO_CLIENT_TIME4.
    ClientTime(Nfstime4),
}

impl Encode for Settime4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Settime4::ServerTime => 0u32.encode(buf),
            Settime4::ClientTime(t) => {
                1u32.encode(buf);
                t.encode(buf)
            }
        }
    }
}
impl Decode for Settime4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        match u32::decode(buf)? {
            0 => Ok(Settime4::ServerTime),
            1 => Ok(Settime4::ClientTime(Nfstime4::decode(buf)?)),
            value => Err(Error::BadEnum { name: "time_how4", value }),
        }
    }
}

xdr_struct! {
    /// A file system id (`fsid4`).
    #[doc(alias = "fsid4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Fsid4 {
        pub major: u64,
        pub minor: u64,
    }
}

xdr_struct! {
    /// Device numbers of a special file (`specdata4`).
    #[doc(alias = "specdata4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Specdata4 {
        pub specdata1: u32,
        pub specdata2: u32,
    }
}

xdr_struct! {
    /// A directory's change attribute around an operation (`change_info4`).
    #[doc(alias = "change_info4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct ChangeInfo4 {
        /// True if nothing else changed the directory between `before` and `after`.
        pub atomic: bool,
        pub before: u64,
        pub after: u64,
    }
}

xdr_struct! {
    /// Who a client is (`client_owner4`): its boot verifier and a name unique to it.
    #[doc(alias = "client_owner4")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct ClientOwner4 {
        pub co_verifier: Verifier4,
        pub co_ownerid: Opaque<NFS4_OPAQUE_LIMIT>,
    }
}

xdr_struct! {
    /// Who the server is (`server_owner4`): clients trunk connections to equal owners.
    #[doc(alias = "server_owner4")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct ServerOwner4 {
        pub so_minor_id: u64,
        pub so_major_id: Opaque<NFS4_OPAQUE_LIMIT>,
    }
}

xdr_struct! {
    /// An open or lock owner (`state_owner4`, `open_owner4`, `lock_owner4`).
    #[doc(alias = "state_owner4")]
    #[doc(alias = "open_owner4")]
    #[doc(alias = "lock_owner4")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct StateOwner4 {
        pub clientid: Clientid4,
        pub owner: Opaque<NFS4_OPAQUE_LIMIT>,
    }
}

xdr_struct! {
    /// An implementation's name and date (`nfs_impl_id4`).
    #[doc(alias = "nfs_impl_id4")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct NfsImplId4 {
        pub nii_domain: Utf8Str,
        pub nii_name: Utf8Str,
        pub nii_date: Nfstime4,
    }
}

/// At most one implementation id (`nfs_impl_id4 x<1>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ImplIdOpt(pub Option<NfsImplId4>);

impl Encode for ImplIdOpt {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        // A counted array of 0 or 1 elements: the same words as XDR optional-data.
        self.0.encode(buf)
    }
}
impl Decode for ImplIdOpt {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        match u32::decode(buf)? {
            0 => Ok(ImplIdOpt(None)),
            1 => Ok(ImplIdOpt(Some(NfsImplId4::decode(buf)?))),
            len => Err(Error::TooLong { len: len as usize, max: 1 }),
        }
    }
}

xdr_struct! {
    /// A channel's limits (`channel_attrs4`), asked for by the client and granted by the server.
    #[doc(alias = "channel_attrs4")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct ChannelAttrs4 {
        pub ca_headerpadsize: u32,
        pub ca_maxrequestsize: u32,
        pub ca_maxresponsesize: u32,
        pub ca_maxresponsesize_cached: u32,
        pub ca_maxoperations: u32,
        pub ca_maxrequests: u32,
        pub ca_rdma_ird: RdmaIrd,
    }
}

/// RDMA's inbound read queue depth (`uint32_t ca_rdma_ird<1>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RdmaIrd(pub Option<u32>);

impl Encode for RdmaIrd {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.0.encode(buf)
    }
}
impl Decode for RdmaIrd {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        match u32::decode(buf)? {
            0 => Ok(RdmaIrd(None)),
            1 => Ok(RdmaIrd(Some(u32::decode(buf)?))),
            len => Err(Error::TooLong { len: len as usize, max: 1 }),
        }
    }
}

xdr_struct! {
    /// AUTH_SYS parameters for the back channel (`authsys_parms`, RFC 5531).
    #[doc(alias = "authsys_parms")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct AuthsysParms {
        pub stamp: u32,
        pub machinename: Opaque<255>,
        pub uid: u32,
        pub gid: u32,
        pub gids: Gids,
    }
}

/// Supplementary groups (`unsigned int gids<16>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Gids(pub Vec<u32>);

impl Encode for Gids {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_array(buf, &self.0)
    }
}
impl Decode for Gids {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        decode_array(buf, 16).map(Gids)
    }
}

xdr_struct! {
    /// RPCSEC_GSS handles for the back channel (`gss_cb_handles4`).
    #[doc(alias = "gss_cb_handles4")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct GssCbHandles4 {
        pub gcbp_service: u32,
        pub gcbp_handle_from_server: Opaque<SEC_OID_MAX>,
        pub gcbp_handle_from_client: Opaque<SEC_OID_MAX>,
    }
}

/// How the server authenticates its back-channel calls (`callback_sec_parms4`).
#[doc(alias = "callback_sec_parms4")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CallbackSecParms4 {
    /// AUTH_NONE.
    None,
    /// AUTH_SYS with these parameters.
    Sys(AuthsysParms),
    /// RPCSEC_GSS (not offered by this server, but decoded).
    Gss(GssCbHandles4),
}

impl Encode for CallbackSecParms4 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            CallbackSecParms4::None => 0u32.encode(buf),
            CallbackSecParms4::Sys(p) => {
                1u32.encode(buf);
                p.encode(buf)
            }
            CallbackSecParms4::Gss(g) => {
                6u32.encode(buf);
                g.encode(buf)
            }
        }
    }
}
impl Decode for CallbackSecParms4 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        match u32::decode(buf)? {
            0 => Ok(CallbackSecParms4::None),
            1 => Ok(CallbackSecParms4::Sys(AuthsysParms::decode(buf)?)),
            6 => Ok(CallbackSecParms4::Gss(GssCbHandles4::decode(buf)?)),
            value => Err(Error::BadEnum { name: "callback_sec_parms4", value }),
        }
    }
}

/// A list of back-channel security parameters (`callback_sec_parms4 x<>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SecParmsList(pub Vec<CallbackSecParms4>);

impl Encode for SecParmsList {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_array(buf, &self.0)
    }
}
impl Decode for SecParmsList {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        decode_array(buf, SEC_PARMS_MAX).map(SecParmsList)
    }
}

xdr_struct! {
    /// Operations state protection covers (`state_protect_ops4`).
    #[doc(alias = "state_protect_ops4")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct StateProtectOps4 {
        pub spo_must_enforce: Bitmap4,
        pub spo_must_allow: Bitmap4,
    }
}

/// A list of OIDs (`sec_oid4 x<>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct OidList(pub Vec<Opaque<SEC_OID_MAX>>);

impl Encode for OidList {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_array(buf, &self.0)
    }
}
impl Decode for OidList {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        decode_array(buf, SEC_PARMS_MAX).map(OidList)
    }
}

xdr_struct! {
    /// SSV state protection parameters (`ssv_sp_parms4`); decoded so the server can refuse them.
    #[doc(alias = "ssv_sp_parms4")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct SsvSpParms4 {
        pub ssp_ops: StateProtectOps4,
        pub ssp_hash_algs: OidList,
        pub ssp_encr_algs: OidList,
        pub ssp_window: u32,
        pub ssp_num_gss_handles: u32,
    }
}

xdr_struct! {
    /// SSV protection the server grants (`ssv_prot_info4`).
    #[doc(alias = "ssv_prot_info4")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct SsvProtInfo4 {
        pub spi_ops: StateProtectOps4,
        pub spi_hash_alg: u32,
        pub spi_encr_alg: u32,
        pub spi_ssv_len: u32,
        pub spi_window: u32,
        pub spi_handles: OidList,
    }
}

/// State protection the client asks for (`state_protect4_a`).
#[doc(alias = "state_protect4_a")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StateProtect4A {
    /// SP4_NONE.
    None,
    /// SP4_MACH_CRED.
    MachCred(StateProtectOps4),
    /// SP4_SSV.
    Ssv(SsvSpParms4),
}

impl Encode for StateProtect4A {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            StateProtect4A::None => 0u32.encode(buf),
            StateProtect4A::MachCred(o) => {
                1u32.encode(buf);
                o.encode(buf)
            }
            StateProtect4A::Ssv(s) => {
                2u32.encode(buf);
                s.encode(buf)
            }
        }
    }
}
impl Decode for StateProtect4A {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        match u32::decode(buf)? {
            0 => Ok(StateProtect4A::None),
            1 => Ok(StateProtect4A::MachCred(StateProtectOps4::decode(buf)?)),
            2 => Ok(StateProtect4A::Ssv(SsvSpParms4::decode(buf)?)),
            value => Err(Error::BadEnum { name: "state_protect_how4", value }),
        }
    }
}

/// State protection the server grants (`state_protect4_r`).
#[doc(alias = "state_protect4_r")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StateProtect4R {
    /// SP4_NONE.
    None,
    /// SP4_MACH_CRED.
    MachCred(StateProtectOps4),
    /// SP4_SSV.
    Ssv(SsvProtInfo4),
}

impl Encode for StateProtect4R {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            StateProtect4R::None => 0u32.encode(buf),
            StateProtect4R::MachCred(o) => {
                1u32.encode(buf);
                o.encode(buf)
            }
            StateProtect4R::Ssv(s) => {
                2u32.encode(buf);
                s.encode(buf)
            }
        }
    }
}
impl Decode for StateProtect4R {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        match u32::decode(buf)? {
            0 => Ok(StateProtect4R::None),
            1 => Ok(StateProtect4R::MachCred(StateProtectOps4::decode(buf)?)),
            2 => Ok(StateProtect4R::Ssv(SsvProtInfo4::decode(buf)?)),
            value => Err(Error::BadEnum { name: "state_protect_how4", value }),
        }
    }
}

xdr_enum! {
    /// A byte-range lock's kind (`nfs_lock_type4`); the `W` kinds ask to be waited for.
    #[doc(alias = "nfs_lock_type4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum NfsLockType4 {
        ReadLt = 1,
        WriteLt = 2,
        ReadwLt = 3,
        WritewLt = 4,
    }
}

impl NfsLockType4 {
    /// A write (exclusive) lock.
    pub fn is_write(self) -> bool {
        matches!(self, NfsLockType4::WriteLt | NfsLockType4::WritewLt)
    }
}

xdr_enum! {
    /// How durable a WRITE must be (`stable_how4`).
    #[doc(alias = "stable_how4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum StableHow4 {
        Unstable4 = 0,
        DataSync4 = 1,
        FileSync4 = 2,
    }
}

xdr_struct! {
    /// A netid and universal address (`netaddr4`).
    #[doc(alias = "netaddr4")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct Netaddr4 {
        pub na_r_netid: Utf8Str,
        pub na_r_addr: Utf8Str,
    }
}
