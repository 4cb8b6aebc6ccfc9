//! The envelope decoder over arbitrary bytes: verification rejects what it must, and
//! whatever decodes renders to JSON and text without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lrbc_inspector::rpc::decode_envelope;

fuzz_target!(|data: &[u8]| {
    let mut bytes = data.to_vec();
    // Most inputs would stop at the identifier; stamp it on half of them.
    if bytes.len() >= 8 && bytes[0] & 1 == 1 {
        bytes[4..8].copy_from_slice(b"LRPC");
    }
    if let Ok(d) = decode_envelope(&bytes) {
        let _ = d.tree.to_json(&bytes);
        let _ = d.tree.summary(&bytes, 0, 200);
        assert!(d.tree.nodes.len() <= lrbc_inspector::rpc::tree::MAX_NODES);
    }
});
