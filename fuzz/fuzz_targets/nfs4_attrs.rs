//! A `fattr4` and its values decoded as typed attributes; what decodes
//! must encode back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    eagernfs_proto::fuzzing::decode_nfs4_attrs(data);
});
