//! Header and region parsing over arbitrary bytes (body: `lrbc_inspector::fuzzing`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lrbc_inspector::fuzzing::layout_inspect(data));
