//! The JSON messages and the metadata that the recorder writes and the readers read
//! back: a luckyrobots entry's header, a ring's loss or malformed entry, and the bytes
//! of the segment that layout detection reads.

use std::collections::BTreeMap;

use lrbc::layout::RegionKind;

/// The message of a luckyrobots entry header.
pub fn lucky_header_json(h: lrbc::rings::LuckyEntryHeader) -> String {
    serde_json::json!({
        "correlation_id": h.correlation_id,
        "method_or_status": h.method_or_status,
    })
    .to_string()
}

/// The luckyrobots entry header of a `/lrbc/ring/<ring>/header` message (its payload
/// length is the payload's, which follows).
pub fn lucky_header_of(
    json: &[u8],
    payload_length: usize,
) -> Option<lrbc::rings::LuckyEntryHeader> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    let field = |k: &str| u32::try_from(v.get(k)?.as_u64()?).ok();
    Some(lrbc::rings::LuckyEntryHeader {
        correlation_id: field("correlation_id")?,
        method_or_status: field("method_or_status")?,
        payload_length: u32::try_from(payload_length).ok()?,
    })
}

/// The `/lrbc/ring_events` message of a loss or a malformed entry; None for other events:
/// the event's `traffic --json` object, with `event` and a malformed entry's `position`.
pub fn ring_event_json(e: &lrbc_live::traffic::TrafficEvent) -> Option<String> {
    use lrbc_live::traffic::TrafficEvent;
    let (event, position) = match e {
        TrafficEvent::Lost { .. } => ("lost", None),
        TrafficEvent::Malformed { position, .. } => ("malformed", Some(*position)),
        _ => return None,
    };
    let mut v = e.to_json()?;
    v["event"] = event.into();
    if let Some(p) = position {
        v["position"] = p.into();
    }
    Some(v.to_string())
}

/// The loss or malformed entry of a `/lrbc/ring_events` message; None when the message
/// is not one ([`ring_event_json`] writes them).
pub fn ring_event_of(json: &[u8]) -> Option<lrbc_live::traffic::TrafficEvent> {
    use lrbc_live::traffic::TrafficEvent;
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    let ring = RegionKind::ring_named(v.get("ring")?.as_str()?)?;
    match v.get("event")?.as_str()? {
        "lost" => Some(TrafficEvent::Lost {
            ring,
            lost_bytes: v.get("lost_bytes")?.as_u64()?,
            lost_entries: v.get("lost_entries").and_then(serde_json::Value::as_u64),
        }),
        "malformed" => {
            let hex = v.get("raw_hex")?.as_str()?;
            Some(TrafficEvent::Malformed {
                ring,
                position: v.get("position")?.as_u64()?,
                error: v.get("error")?.as_str()?.to_string(),
                raw: lrbc::layout::fields::bytes_of_hex(hex)?,
            })
        }
        _ => None,
    }
}

/// The `lrbc.segment` metadata of `sparse`.
pub fn segment_metadata(sparse: &lrbc::layout::Sparse) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("size_bytes".into(), sparse.len_bytes.to_string());
    for (offset, bytes) in &sparse.pieces {
        m.insert(
            format!("bytes@{offset}"),
            lrbc::layout::fields::hex_string(bytes),
        );
    }
    m
}

/// The bytes stored by [`segment_metadata`]; None when a value is not what it writes.
pub fn segment_from_metadata(m: &BTreeMap<String, String>) -> Option<lrbc::layout::Sparse> {
    let len_bytes = m.get("size_bytes")?.parse().ok()?;
    let mut pieces = Vec::new();
    for (key, hex) in m {
        let Some(offset) = key.strip_prefix("bytes@") else {
            continue;
        };
        let offset: u64 = offset.parse().ok()?;
        pieces.push((offset, lrbc::layout::fields::bytes_of_hex(hex)?));
    }
    pieces.sort_by_key(|(o, _)| *o);
    let overlapping = pieces
        .windows(2)
        .any(|w| w[0].0 + w[0].1.len() as u64 > w[1].0);
    (!overlapping).then_some(lrbc::layout::Sparse { len_bytes, pieces })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_event_reads_back_as_the_event_written_and_nothing_else_does() {
        use lrbc_live::traffic::TrafficEvent;
        let lost = TrafficEvent::Lost {
            ring: RegionKind::CtlS2c,
            lost_bytes: 96,
            lost_entries: None,
        };
        let malformed = TrafficEvent::Malformed {
            ring: RegionKind::CmdS2c,
            position: 4096,
            error: "length 9999 is past the ring".into(),
            raw: vec![0, 1, 0xfe, 0xff],
        };
        for e in [&lost, &malformed] {
            let json = ring_event_json(e).unwrap();
            let back = ring_event_of(json.as_bytes()).unwrap();
            assert_eq!(format!("{back:?}"), format!("{e:?}"));
        }
        assert!(
            ring_event_json(&TrafficEvent::Answered {
                request: 1,
                response: 2
            })
            .is_none()
        );
        for bad in [
            &b"not json"[..],
            br#"{"event":"lost","ring":"obs","lost_bytes":1}"#,
            br#"{"event":"malformed","ring":"cmd_c2s","position":0,"error":"e","raw_hex":"zz"}"#,
            br#"{"event":"other","ring":"cmd_c2s"}"#,
        ] {
            assert!(
                ring_event_of(bad).is_none(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
