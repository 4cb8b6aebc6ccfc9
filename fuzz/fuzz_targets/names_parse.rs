//! The names region parser over arbitrary bytes (body: `lrbc::fuzzing`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lrbc::fuzzing::names_parse(data));
