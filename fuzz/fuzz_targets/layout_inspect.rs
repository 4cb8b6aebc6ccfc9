//! Header and region parsing over arbitrary bytes (body: `lrbc::fuzzing`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lrbc::fuzzing::layout_inspect(data));
