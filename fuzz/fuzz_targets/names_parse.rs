//! The names region parser over arbitrary bytes: never panics; what it accepts
//! re-encodes to the bytes it consumed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lrbc_inspector::layout::names::parse;

fuzz_target!(|data: &[u8]| {
    if let Ok(parsed) = parse(data) {
        assert_eq!(parsed.names.encode(), data[..parsed.consumed_bytes]);
    }
});
