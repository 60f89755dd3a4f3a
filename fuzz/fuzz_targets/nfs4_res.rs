//! NFSv4 COMPOUND replies decoded whole (as a client does); must fail
//! cleanly or round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = eagernfs_proto::fuzzing::decode_nfs4_res(data);
});
