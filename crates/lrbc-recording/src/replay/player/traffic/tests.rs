use std::io::Cursor;
use std::sync::Arc;

use crate::recorder::Recorder;
use crate::replay::tests::{start, wait, write};
use crate::replay::{Player, Recording};
use lrbc::attach::{Target, attach};
use lrbc::layout::plan::PlanLayout;
use lrbc::layout::{LayoutChoice, RegionKind};
use lrbc::testutil::unique_name;
use lrbc_sim::engine::{Engine, EngineConfig};

/// A recording of a `layout` engine's segment (and of frame 1 when the capture sees it
/// at once), then `entries` (ring, payload) 1 ms apart, written as the recorder writes ring entries (their payload on
/// `/lrbc/ring/<ring>` at the time it saw them).
fn recording_with_entries(layout: PlanLayout, entries: &[(RegionKind, Vec<u8>)]) -> Vec<u8> {
    recording_in_format(layout, entries, false)
}

/// [`recording_with_entries`], the ring entries as JSON with their exact bytes, or, when
/// `earlier`, as recordings of earlier versions hold them (the payload itself on a
/// channel of schema `hazel.rpc.Envelope`, or schemaless JSON on the luckyrobots layout).
fn recording_in_format(
    layout: PlanLayout,
    entries: &[(RegionKind, Vec<u8>)],
    earlier: bool,
) -> Vec<u8> {
    use crate::recorder::{Capture, FileSink, Kind, Message};
    let mut e = Engine::create(EngineConfig::small(
        unique_name("replay-ring"),
        layout,
        2,
        1,
        1,
    ))
    .unwrap();
    let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
    let mut capture = Capture::new(a, vec![0]).unwrap();
    let mut prelude = capture.prelude().clone();
    if earlier {
        let lucky = layout == PlanLayout::Lucky;
        prelude.schemas.push(crate::recorder::SchemaDef {
            name: crate::format::ENVELOPE_SCHEMA.into(),
            encoding: "flatbuffer".into(),
            data: std::borrow::Cow::Borrowed(lrbc::rpc::schema::SCHEMA_BFBS),
        });
        let envelope = prelude.schemas.len() - 1;
        for c in &mut prelude.channels {
            if crate::format::ring_of_topic(&c.topic).is_some() {
                c.schema = (!lucky).then_some(envelope);
                c.message_encoding = if lucky { "json" } else { "flatbuffer" }.into();
            }
        }
    }
    let mut file = FileSink::new(Cursor::new(Vec::new()), &prelude).unwrap();
    let mut messages = Vec::new();
    // Frames count from the attach: the first seen is the next one (torn: this engine
    // writes no action_seq).
    e.step_once(Some(1));
    capture.poll_until(&mut messages, |n| n.frames_seen == 1);
    if !earlier {
        file.sync(capture.prelude()).unwrap();
    }
    let mut t = 0;
    for m in &messages {
        file.write(m).unwrap();
        t = t.max(m.log_time);
    }
    for (ring, payload) in entries {
        let topic = format!("/lrbc/ring/{}", ring.as_str());
        let channel = capture
            .prelude()
            .channels
            .iter()
            .position(|c| c.topic == topic)
            .unwrap();
        t += 1_000_000;
        let data: Arc<[u8]> = if earlier {
            Arc::from(&payload[..])
        } else {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD.encode(payload);
            let json = serde_json::json!({"ring": ring.as_str(), "seen_ns": t, "bytes": bytes});
            Arc::from(json.to_string().into_bytes())
        };
        file.write(&Message {
            channel,
            kind: Kind::RingEntry,
            log_time: t,
            publish_time: t,
            data,
        })
        .unwrap();
    }
    file.finish(&capture.counts()).unwrap().into_inner()
}

/// A player with traffic `limits` at the end of `bytes`, once its traffic list has had
/// `rows` rows.
fn replayed(bytes: &[u8], rows: u64, limits: lrbc_live::traffic::TrafficLimits) -> Player {
    let r = Recording::open(&write(bytes)).unwrap();
    let (_, t1) = r.time_range().unwrap();
    let p = start(r, limits);
    p.request(|s| s.seek_to = Some(t1));
    wait("every entry in the traffic list", &|| {
        p.state().cursor_ns == t1 && p.store.lock().unwrap().total_rows() == rows
    });
    p
}

/// The rows of the player's traffic list at the end of `bytes` (`rows` of them).
fn replayed_traffic(bytes: &[u8], rows: u64) -> Vec<lrbc_live::traffic::TrafficRow> {
    let p = replayed(bytes, rows, lrbc_live::traffic::TrafficLimits::default());
    p.store.lock().unwrap().rows.iter().cloned().collect()
}

/// The records among traffic rows.
fn records_of(rows: &[lrbc_live::traffic::TrafficRow]) -> Vec<&lrbc_live::traffic::Record> {
    rows.iter()
        .filter_map(|r| match r {
            lrbc_live::traffic::TrafficRow::Record(r) => Some(&**r),
            _ => None,
        })
        .collect()
}

fn envelope(
    corr: u64,
    method: lrbc::rpc::fb::MethodId,
    error: Option<&str>,
    sent_ns: u64,
) -> Vec<u8> {
    lrbc::rpc::build_envelope(corr, method, error, sent_ns, |_| None)
}

/// Envelopes of a session: requests answered, one with an error, an orphan response,
/// and bytes that are no envelope.
fn lrbc_entries() -> Vec<(RegionKind, Vec<u8>)> {
    use lrbc::rpc::fb::MethodId;
    let (c2s, s2c) = (RegionKind::CmdC2s, RegionKind::CmdS2c);
    vec![
        (c2s, envelope(1, MethodId::GetJointState, None, 1_000)),
        (s2c, envelope(1, MethodId::GetJointState, None, 4_500)),
        (c2s, envelope(2, MethodId::GetJointState, None, 0)),
        (
            s2c,
            envelope(2, MethodId::GetJointState, Some("no such joint"), 0),
        ),
        (s2c, envelope(99, MethodId::GetJointState, None, 0)),
        (c2s, b"hello, not a flatbuffer".to_vec()),
    ]
}

/// Luckyrobots entries (JSON): a request refused, one answered, and bytes that are no
/// JSON.
fn lucky_entries() -> Vec<(RegionKind, Vec<u8>)> {
    let (c2s, s2c) = (RegionKind::CmdC2s, RegionKind::CmdS2c);
    vec![
        (c2s, br#"{"mode": "warp"}"#.to_vec()),
        (s2c, br#"{"error": "unknown mode warp"}"#.to_vec()),
        (c2s, br#"{"agent_name": "a"}"#.to_vec()),
        (s2c, br#"{"success": true}"#.to_vec()),
        (s2c, b"not json".to_vec()),
    ]
}

#[test]
fn recorded_envelopes_show_decoded_and_paired_as_the_same_entries_did_live() {
    use lrbc::rings::v1::V1Producer;
    use lrbc_live::traffic::{Pairing, RingSelection, Traffic, TrafficEvent, TrafficRow};
    let (c2s, s2c) = (RegionKind::CmdC2s, RegionKind::CmdS2c);
    let entries = lrbc_entries();
    let rows = replayed_traffic(
        &recording_with_entries(PlanLayout::Lrbc { ext: true }, &entries),
        entries.len() as u64,
    );

    // The same entries through live rings.
    let seg = lrbc::testutil::TestSegment::create(
        "replay-live",
        &lrbc::testutil::spec(PlanLayout::Lrbc { ext: true }, 2),
    );
    let a = seg.attach();
    let mut live = Traffic::new(&a, RingSelection::Cmd);
    let mut client = V1Producer::new(&seg.rw, *a.geometry.ring(c2s).unwrap());
    let mut engine = V1Producer::new(&seg.rw, *a.geometry.ring(s2c).unwrap());
    for (ring, payload) in &entries {
        let p = if *ring == c2s {
            &mut client
        } else {
            &mut engine
        };
        p.try_push(&seg.rw, payload).unwrap();
    }
    let mut events = Vec::new();
    live.poll(&a.segment, 1_000_000, usize::MAX, &mut events);
    let live_records: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            TrafficEvent::Record(r) => Some(r),
            _ => None,
        })
        .collect();
    let records = records_of(&rows);
    assert_eq!(records.len(), 5);
    for r in &records {
        let l = live_records
            .iter()
            .find(|l| l.ring == r.ring && l.correlation_id == r.correlation_id)
            .unwrap();
        assert_eq!(
            (&r.decoded, &r.method, &r.error, r.is_request),
            (&l.decoded, &l.method, &l.error, l.is_request),
            "{} {}",
            r.ring.as_str(),
            r.correlation_id
        );
        // Live, a request is answered by the end of the poll; the store shows it so.
        let live_pairing = match l.pairing {
            Pairing::Pending if r.correlation_id != 99 => Pairing::Answered,
            p => p,
        };
        assert_eq!(r.pairing, live_pairing, "{}", r.correlation_id);
    }
    let response = |corr| {
        records
            .iter()
            .find(|r| !r.is_request && r.correlation_id == corr)
            .unwrap()
    };
    let request = |corr| {
        records
            .iter()
            .find(|r| r.is_request && r.correlation_id == corr)
            .unwrap()
    };
    // From the senders' clocks when both set them, as live; else from the times the
    // recorder saw them (1 ms apart).
    assert_eq!(response(1).latency_ns, Some(3_500));
    assert_eq!(response(1).partner, Some(request(1).index));
    assert_eq!(request(1).partner, Some(response(1).index));
    assert_eq!(response(2).latency_ns, Some(1_000_000));
    assert_eq!(response(2).error.as_deref(), Some("no such joint"));
    assert_eq!(response(99).pairing, Pairing::Orphan);
    // The entry that is no envelope is malformed, with the live error and its bytes.
    let live_error = events.iter().find_map(|e| match e {
        TrafficEvent::Malformed { error, .. } => Some(error),
        _ => None,
    });
    let malformed = rows.iter().find_map(|r| match r {
        TrafficRow::Malformed {
            ring, error, raw, ..
        } => Some((*ring, error, raw)),
        _ => None,
    });
    let (ring, error, raw) = malformed.unwrap();
    assert_eq!((ring, Some(error)), (c2s, live_error));
    assert!(error.contains("identifier"), "{error}");
    assert_eq!(raw.as_slice(), b"hello, not a flatbuffer");
}

#[test]
fn recordings_of_earlier_versions_replay_their_entries_as_the_json_form_does() {
    for (layout, entries) in [
        (PlanLayout::Lrbc { ext: true }, lrbc_entries()),
        (PlanLayout::Lucky, lucky_entries()),
    ] {
        let n = entries.len() as u64;
        let now = replayed_traffic(&recording_in_format(layout, &entries, false), n);
        let earlier = replayed_traffic(&recording_in_format(layout, &entries, true), n);
        assert_eq!(now.len(), entries.len(), "{layout:?}: {now:?}");
        // The same rows, but for when their engine ran and the list's row ids (which
        // count the player's passes, not the file).
        let shown = |rows: &[lrbc_live::traffic::TrafficRow]| {
            let mut text = format!("{rows:?}");
            for key in ["seen_ns: ", "index: ", "partner: Some("] {
                let mut out = String::new();
                for (i, part) in text.split(key).enumerate() {
                    if i > 0 {
                        out.push_str(key);
                        out.push('_');
                    }
                    out.push_str(part.trim_start_matches(|c: char| c.is_ascii_digit() && i > 0));
                }
                text = out;
            }
            text
        };
        assert_eq!(shown(&now), shown(&earlier), "{layout:?}");
    }
}

#[test]
fn recorded_luckyrobots_entries_show_their_json_error_and_pairing_without_their_headers() {
    use lrbc_live::traffic::{Pairing, TrafficRow};
    let entries = lucky_entries();
    let rows = replayed_traffic(
        &recording_with_entries(PlanLayout::Lucky, &entries),
        entries.len() as u64,
    );
    let records = records_of(&rows);
    let shown: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r.method.as_str(),
                r.error.as_deref(),
                r.pairing,
                r.latency_ns,
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("SetSimulationMode", None, Pairing::Answered, None),
            (
                "SetSimulationMode",
                Some("unknown mode warp"),
                Pairing::Response,
                Some(1_000_000)
            ),
            ("ResetAgent", None, Pairing::Answered, None),
            ("ResetAgent", None, Pairing::Response, Some(1_000_000)),
        ]
    );
    assert_eq!(records[0].to_json()["fields"]["mode"], "warp");
    let Some(TrafficRow::Malformed { error, .. }) = rows.last() else {
        panic!("{rows:?}")
    };
    assert!(error.starts_with("payload is not JSON"), "{error}");
}

#[test]
fn a_recordings_traffic_list_keeps_within_the_bytes_of_its_limits_as_a_live_one() {
    use lrbc::rpc::fb::MethodId;
    let entries: Vec<_> = (0..200)
        .map(|i| {
            let error = "e".repeat(1_000);
            (
                RegionKind::CmdS2c,
                envelope(i, MethodId::GetJointState, Some(&error), 0),
            )
        })
        .collect();
    let limits = lrbc_live::traffic::TrafficLimits {
        max_rows: 1_000,
        max_bytes: 64 << 10,
        max_stream_bytes: 1 << 20,
    };
    let p = replayed(
        &recording_with_entries(PlanLayout::Lrbc { ext: true }, &entries),
        200,
        limits,
    );
    let store = p.store.lock().unwrap();
    assert!(store.rows_dropped > 0);
    assert!(store.memory().0 <= limits.max_bytes, "{:?}", store.memory());
}

#[test]
fn a_recordings_ring_losses_and_malformed_entries_show_in_its_traffic_list_as_they_did_live() {
    use lrbc::rings::v1::{V1Consumer, V1Producer};
    use lrbc::testutil::{TestSegment, spec};
    use lrbc_live::traffic::TrafficRow;
    let seg = TestSegment::create("replayevents", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let a = seg.attach();
    let c2s = *a.geometry.ring(RegionKind::CmdC2s).unwrap();
    let mut rec = Recorder::new(a, vec![0], Cursor::new(Vec::new())).unwrap();
    let (mut client, mut engine) = (V1Producer::new(&seg.rw, c2s), V1Consumer::new(&seg.rw, c2s));
    // A frame, so that the recording has a time range.
    seg.rw
        .store_u64(lrbc::layout::headers::LrbcHeader::FRAME_SEQ_OFFSET, 1);
    client
        .try_push(&seg.rw, b"hello, not a flatbuffer")
        .unwrap();
    // (Torn: this engine writes no action_seq; seen all the same.)
    rec.poll_until(|c| c.frames_seen >= 1);
    // The engine takes requests faster than the recorder looks: the ring laps it.
    let mut buf = Vec::new();
    let request = envelope(7, lrbc::rpc::fb::MethodId::GetServiceStatus, None, 1);
    for _ in 0..(4 * c2s.capacity_bytes as usize / request.len()) {
        client.try_push(&seg.rw, &request).unwrap();
        engine.try_pop(&seg.rw, &mut buf).unwrap();
    }
    seg.rw
        .store_u64(lrbc::layout::headers::LrbcHeader::FRAME_SEQ_OFFSET, 2);
    rec.poll_until(|c| c.frames_seen >= 2);
    let (counts, out) = rec.finish_into_inner().unwrap();
    assert!(
        counts.ring_lost_bytes > 0 && counts.ring_events >= 2,
        "{counts:?}"
    );
    let r = Recording::open(&write(&out.into_inner())).unwrap();
    let (_, t1) = r.time_range().unwrap();
    let p = start(r, lrbc_live::traffic::TrafficLimits::default());
    p.request(|s| s.seek_to = Some(t1));
    let shown = || {
        let store = p.store.lock().unwrap();
        let lost: u64 = store
            .rows
            .iter()
            .filter_map(|r| match r {
                TrafficRow::Lost { lost_bytes, .. } => Some(*lost_bytes),
                _ => None,
            })
            .sum();
        let malformed = store.rows.iter().any(|r| {
            matches!(r, TrafficRow::Malformed { ring: RegionKind::CmdC2s, raw, error, .. }
                if raw.as_slice() == b"hello, not a flatbuffer" && error.contains("identifier"))
        });
        (lost, malformed)
    };
    wait("the loss and the malformed entry in the list", &|| {
        p.state().cursor_ns == t1 && shown() == (counts.ring_lost_bytes, true)
    });
}

#[test]
fn recorded_luckyrobots_headers_pair_responses_by_correlation_id_and_give_status_errors() {
    use lrbc::rings::{LuckyEntryHeader, lucky};
    use lrbc::testutil::{TestSegment, spec};
    use lrbc_live::traffic::{Pairing, TrafficRow};
    let seg = TestSegment::create("replaylucky", &spec(PlanLayout::Lucky, 2));
    let a = seg.attach();
    let (c2s, s2c) = (
        *a.geometry.ring(RegionKind::CmdC2s).unwrap(),
        *a.geometry.ring(RegionKind::CmdS2c).unwrap(),
    );
    let mut rec = Recorder::new(a, vec![0], Cursor::new(Vec::new())).unwrap();
    let (mut client, mut engine) = (
        lucky::LuckyProducer::new(&seg.rw, c2s),
        lucky::LuckyProducer::new(&seg.rw, s2c),
    );
    let h = |corr, word| LuckyEntryHeader {
        correlation_id: corr,
        method_or_status: word,
        payload_length: 0,
    };
    // Two requests, answered in the other order; the second answer has a bad status.
    client
        .try_push(&seg.rw, h(5, 2), br#"{"mode": "warp"}"#)
        .unwrap();
    client
        .try_push(&seg.rw, h(6, 1), br#"{"agent_name": "a"}"#)
        .unwrap();
    engine
        .try_push(&seg.rw, h(6, 0), br#"{"success": true}"#)
        .unwrap();
    engine.try_push(&seg.rw, h(5, 3), br#"{}"#).unwrap();
    let header = lrbc::layout::headers::LuckyHeader::FRAME_SEQ_OFFSET;
    seg.rw.store_u64(header, 1);
    rec.poll_until(|c| c.frames_seen >= 1);
    let (counts, out) = rec.finish_into_inner().unwrap();
    assert_eq!(counts.ring_entries, 4, "{counts:?}");
    let rows = replayed_traffic(&out.into_inner(), 4);
    let records = records_of(&rows);
    let by_corr = |corr: u64, request: bool| {
        records
            .iter()
            .find(|r| r.correlation_id == corr && r.is_request == request)
            .unwrap_or_else(|| panic!("no {corr} {request} in {records:?}"))
    };
    assert_eq!(by_corr(5, true).method, "SetSimulationMode");
    assert_eq!(by_corr(6, true).method, "ResetAgent");
    assert_eq!(by_corr(6, false).partner, Some(by_corr(6, true).index));
    assert_eq!(by_corr(5, false).partner, Some(by_corr(5, true).index));
    assert_eq!(by_corr(5, false).error.as_deref(), Some("status 3"));
    assert_eq!(by_corr(6, false).error, None);
    assert!(records.iter().all(|r| r.pairing != Pairing::Orphan));
    assert!(
        !rows
            .iter()
            .any(|r| matches!(r, TrafficRow::Malformed { .. }))
    );
}
