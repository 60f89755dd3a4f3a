//! NLM v4 and NSM call bodies (first byte picks the procedure; its top bit the program).
#![no_main]

use eagernfs_proto::fuzzing::{decode_nlm_args, decode_nsm_args};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&selector, body)) = data.split_first() {
        let procedure = u32::from(selector & 0x7f) % 25;
        if selector & 0x80 == 0 {
            let _ = decode_nlm_args(procedure, body);
        } else {
            let _ = decode_nsm_args(procedure % 8, body);
        }
    }
});
