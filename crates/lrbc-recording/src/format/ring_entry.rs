//! A ring entry as recorded and served: one JSON object (schema [`RING_ENTRY_SCHEMA`],
//! encoding `jsonschema`) that Foxglove's app decodes and plots like any JSON channel,
//! carrying what the entry says (ring, position, method, correlation id, payload type,
//! decoded fields) and its exact bytes (`bytes`, base64), from which the window,
//! `open` and `export` replay it as it was written. The FlatBuffers envelope's union
//! cannot be read by Foxglove's FlatBuffers decoder; this form can.

use base64::Engine as _;
use serde_json::{Value, json};

use lrbc_live::traffic::Record;

/// The schema name of recorded ring entries.
pub const RING_ENTRY_SCHEMA: &str = "lrbc.recording.RingEntry";

/// The JSON Schema of [`RING_ENTRY_SCHEMA`] (encoding `jsonschema`).
pub const RING_ENTRY_JSON_SCHEMA: &str = r#"{
  "title": "lrbc.recording.RingEntry",
  "description": "One entry of an LRBC command or control ring: what it says, decoded, and its exact bytes.",
  "type": "object",
  "properties": {
    "ring": {"type": "string", "description": "cmd_c2s, cmd_s2c, ctl_c2s or ctl_s2c"},
    "position": {"type": "integer", "description": "the entry's free-running position in its ring"},
    "seen_ns": {"type": "integer", "description": "when the inspector read it (monotonic clock, ns)"},
    "method": {"type": "string"},
    "correlation_id": {"type": "integer"},
    "request": {"type": "boolean", "description": "a request (else a response or a stream item)"},
    "payload_type": {"type": ["string", "null"], "description": "the envelope's payload table"},
    "error": {"type": ["string", "null"], "description": "why the entry did not decode, or the response's error"},
    "fields": {"description": "the decoded entry; byte vectors over 512 bytes as \"<N bytes>\""},
    "bytes": {"type": "string", "contentEncoding": "base64", "description": "the entry's payload exactly as written"}
  }
}"#;

/// Byte vectors of the fields longer than this are shown by their length (the entry's
/// bytes carry them).
const SHOWN_BYTES: usize = 512;

/// The JSON message of a decoded ring entry.
pub fn ring_entry_json(r: &Record) -> Vec<u8> {
    let mut fields = r.fields_json();
    clip_bytes(&mut fields);
    let payload_type = fields
        .get("payload")
        .and_then(Value::as_object)
        .filter(|m| m.len() == 1)
        .and_then(|m| m.keys().next().cloned());
    let v = json!({
        "ring": r.ring.as_str(),
        "position": r.position,
        "seen_ns": r.seen_ns,
        "method": r.method,
        "correlation_id": r.correlation_id,
        "request": r.is_request,
        "payload_type": payload_type,
        "error": r.error,
        "fields": fields,
        "bytes": base64::engine::general_purpose::STANDARD.encode(&r.payload),
    });
    serde_json::to_vec(&v).unwrap_or_default()
}

/// The exact bytes of a ring entry's JSON message; None when it is not one.
pub fn ring_entry_payload(message: &[u8]) -> Option<Vec<u8>> {
    #[derive(serde::Deserialize)]
    struct Bytes {
        bytes: String,
    }
    let b: Bytes = serde_json::from_slice(message).ok()?;
    base64::engine::general_purpose::STANDARD
        .decode(b.bytes)
        .ok()
}

/// Replaces the hex strings of long byte vectors with their length.
fn clip_bytes(v: &mut Value) {
    match v {
        Value::String(s)
            if s.len() > 2 * SHOWN_BYTES && s.bytes().all(|c| c.is_ascii_hexdigit()) =>
        {
            *s = format!("<{} bytes>", s.len() / 2);
        }
        Value::Array(a) => a.iter_mut().for_each(clip_bytes),
        Value::Object(m) => m.values_mut().for_each(clip_bytes),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lrbc::layout::RegionKind;
    use lrbc_live::traffic::{Decoded, Pairing};

    fn record(payload: Vec<u8>, fields: Value) -> Record {
        Record {
            index: 1,
            seen_ns: 42,
            ring: RegionKind::CmdC2s,
            position: 4096,
            payload,
            lucky: None,
            decoded: Decoded::Json(fields),
            correlation_id: 7,
            method: "step".into(),
            error: None,
            is_request: true,
            latency_ns: None,
            partner: None,
            pairing: Pairing::Pending,
        }
    }

    #[test]
    fn the_exact_bytes_come_back_and_long_byte_vectors_are_shown_by_length() {
        let payload: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
        let hex: String = payload.iter().map(|b| format!("{b:02x}")).collect();
        let r = record(
            payload.clone(),
            json!({"payload": {"CameraImageFrame": {"data": hex, "width": 64}}, "short": "ab12"}),
        );
        let m = ring_entry_json(&r);
        assert_eq!(ring_entry_payload(&m), Some(payload));
        let v: Value = serde_json::from_slice(&m).unwrap();
        assert_eq!(v["ring"], "cmd_c2s");
        assert_eq!(v["position"], 4096);
        assert_eq!(v["correlation_id"], 7);
        assert_eq!(v["method"], "step");
        assert_eq!(v["payload_type"], "CameraImageFrame");
        assert_eq!(
            v["fields"]["payload"]["CameraImageFrame"]["data"],
            "<3000 bytes>"
        );
        assert_eq!(v["fields"]["payload"]["CameraImageFrame"]["width"], 64);
        assert_eq!(v["fields"]["short"], "ab12");
        assert_eq!(ring_entry_payload(b"{\"ring\":1}"), None);
        assert_eq!(ring_entry_payload(b"\x10\x00\x00\x00LRBC"), None);
        let schema: Value = serde_json::from_str(RING_ENTRY_JSON_SCHEMA).unwrap();
        assert_eq!(schema["title"], RING_ENTRY_SCHEMA);
    }
}
