//! NFSv3 sizes (RFC 1813 §2.4) and the bounds our decoders enforce where the RFC sets none: the
//! data types and procedures below check every length from the wire against these.

/// Largest file handle, in bytes (`NFS3_FHSIZE`).
pub const NFS3_FHSIZE: usize = 64;
/// Size of a READDIR cookie verifier (`NFS3_COOKIEVERFSIZE`).
pub const NFS3_COOKIEVERFSIZE: usize = 8;
/// Size of an exclusive-CREATE verifier (`NFS3_CREATEVERFSIZE`).
pub const NFS3_CREATEVERFSIZE: usize = 8;
/// Size of a WRITE/COMMIT verifier (`NFS3_WRITEVERFSIZE`).
pub const NFS3_WRITEVERFSIZE: usize = 8;
/// Longest file name we decode, in bytes (the RFC sets no limit; every
/// common file system stops at 255).
pub const NFS3_NAME_MAX: usize = 255;
/// Longest path (symbolic link target) we decode, in bytes: Linux's
/// `PATH_MAX`, as knfsd's `NFS3_MAXPATHLEN` (the RFC sets no limit). The
/// longest target a Linux file system stores is one byte less, since
/// `PATH_MAX` counts the NUL that ends a path in a system call.
pub const NFS3_PATH_MAX: usize = 4096;
/// Largest READ or WRITE payload we decode, in bytes. The server's
/// `rtmax`/`wtmax` must not exceed it.
pub const MAX_IO_SIZE: usize = 1 << 20;
