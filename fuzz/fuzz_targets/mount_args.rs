//! MOUNT call bodies (first byte picks the procedure) and, from the same
//! input, MOUNT v1 and v3 reply bodies.
#![no_main]

use eagernfs_proto::fuzzing::{decode_mount_args, decode_mount_res};
use eagernfs_proto::mount::{MOUNT_V1, MOUNT_V3};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&selector, body)) = data.split_first() {
        let procedure = u32::from(selector) % 8;
        let _ = decode_mount_args(procedure, body);
        let _ = decode_mount_res(MOUNT_V1, procedure, body);
        let _ = decode_mount_res(MOUNT_V3, procedure, body);
    }
});
