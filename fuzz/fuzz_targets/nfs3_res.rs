//! NFSv3 reply bodies, as the client decodes them: the first byte picks the
//! procedure, the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&selector, body)) = data.split_first() {
        let _ = eagernfs_proto::fuzzing::decode_nfs3_res(u32::from(selector) % 24, body);
    }
});
