//! Portmap call bodies (first byte picks the procedure) and, from the same
//! input, portmap reply bodies.
#![no_main]

use eagernfs_proto::fuzzing::{decode_portmap_args, decode_portmap_res};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&selector, body)) = data.split_first() {
        let procedure = u32::from(selector) % 8;
        let _ = decode_portmap_args(procedure, body);
        let _ = decode_portmap_res(procedure, body);
    }
});
