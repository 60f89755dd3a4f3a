//! The XDR primitives that read lengths from the wire: bounded opaque data
//! and counted arrays.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    eagernfs_proto::fuzzing::decode_xdr_opaque(data);
});
