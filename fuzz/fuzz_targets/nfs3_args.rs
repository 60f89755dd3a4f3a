//! NFSv3 call bodies: the first byte picks the procedure (including a few
//! numbers past the last one, to cover the unknown-procedure path), the
//! rest is the body. Decoding must fail cleanly or round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&selector, body)) = data.split_first() {
        let _ = eagernfs_proto::fuzzing::decode_nfs3_args(u32::from(selector) % 24, body);
    }
});
