//! The command line over arbitrary arguments (body: `lrbc_inspector::fuzzing`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lrbc_inspector::fuzzing::cli_args(data));
