//! ONC RPC message headers (call or reply) and AUTH_SYS credentials.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    eagernfs_rpc::fuzzing::decode_message(data);
});
