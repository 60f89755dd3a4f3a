//! NFSv4 COMPOUND calls decoded as the server does: the head, then one
//! operation at a time until an error or an undecodable operation. Every
//! operation that decodes must round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = eagernfs_proto::fuzzing::decode_nfs4_compound(data);
});
