//! The ring watchers over arbitrary ring bytes (body: `lrbc::fuzzing`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lrbc::fuzzing::ring_watch(data));
