//! Record-marking reassembly over a stream delivered in two chunks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    eagernfs_rpc::fuzzing::record_marking(data);
});
