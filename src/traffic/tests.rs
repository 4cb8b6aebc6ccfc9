use super::decode::MAX_PENDING;
use super::*;
use crate::attach::Attached;
use crate::layout::plan::PlanLayout;
use crate::rings::lrbc::Producer;
use crate::rings::lucky;
use crate::rpc::{self, fb};
use crate::testutil::{TestSegment, spec};

fn request(corr: u64, sent_ns: u64) -> Vec<u8> {
    rpc::build_envelope(corr, fb::MethodId::GetJointState, None, sent_ns, |fbb| {
        let name = fbb.create_string("robot");
        let req = fb::GetJointStateReq::create(
            fbb,
            &fb::GetJointStateReqArgs {
                robot_name: Some(name),
            },
        );
        Some((fb::Payload::GetJointStateReq, req.as_union_value()))
    })
}

fn response(corr: u64, sent_ns: u64, error: Option<&str>) -> Vec<u8> {
    rpc::build_envelope(corr, fb::MethodId::GetJointState, error, sent_ns, |_| None)
}

fn records(events: &[TrafficEvent]) -> Vec<&Record> {
    events
        .iter()
        .filter_map(|e| match e {
            TrafficEvent::Record(r) => Some(&**r),
            _ => None,
        })
        .collect()
}

#[test]
fn requests_and_responses_pair_by_correlation_id_with_latency() {
    let seg = TestSegment::create("pair", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let a = seg.attach();
    let mut t = Traffic::new(&a, RingSelection::Cmd);
    let c2s = *a.geometry.ring(RegionKind::CmdC2s).unwrap();
    let s2c = *a.geometry.ring(RegionKind::CmdS2c).unwrap();
    let mut client = Producer::new(&seg.rw, c2s);
    let mut engine = Producer::new(&seg.rw, s2c);
    client.try_push(&seg.rw, &request(1, 1_000)).unwrap();
    client.try_push(&seg.rw, &request(2, 0)).unwrap();
    engine.try_push(&seg.rw, &response(1, 4_500, None)).unwrap();
    engine
        .try_push(&seg.rw, &response(99, 5_000, Some("no such request")))
        .unwrap();
    let mut out = Vec::new();
    t.poll(&a.segment, 10_000, usize::MAX, &mut out);
    let r = records(&out);
    assert_eq!(r.len(), 4);
    let req1 = r
        .iter()
        .find(|r| r.is_request && r.correlation_id == 1)
        .unwrap();
    let resp1 = r
        .iter()
        .find(|r| !r.is_request && r.correlation_id == 1)
        .unwrap();
    assert_eq!(
        resp1.latency_ns,
        Some(3_500),
        "from sent_ns when both set it"
    );
    assert_eq!(resp1.partner, Some(req1.index));
    assert_eq!(resp1.method, "GetJointState");
    assert!(
        out.iter()
            .any(|e| matches!(e, TrafficEvent::Answered { request, .. } if *request == req1.index))
    );
    let orphan = r.iter().find(|r| r.correlation_id == 99).unwrap();
    assert_eq!(orphan.pairing, Pairing::Orphan);
    assert_eq!(orphan.error.as_deref(), Some("no such request"));
    assert_eq!(orphan.to_json()["orphan"], true);
    // Request 2 never gets an answer: flagged once the timeout passes.
    out.clear();
    t.poll(
        &a.segment,
        10_000 + t.decoder.timeout_ns + 1,
        usize::MAX,
        &mut out,
    );
    assert!(matches!(
        &out[..],
        [TrafficEvent::Unanswered {
            correlation_id: 2,
            ..
        }]
    ));
    // A late answer to request 2 is paired, with the observed latency.
    engine.try_push(&seg.rw, &response(2, 0, None)).unwrap();
    out.clear();
    let now = 20_000 + t.decoder.timeout_ns;
    t.poll(&a.segment, now, usize::MAX, &mut out);
    assert_eq!(records(&out)[0].latency_ns, Some(now - 10_000));
    let totals = t.totals();
    let s2c_totals = totals
        .iter()
        .find(|(k, _)| *k == RegionKind::CmdS2c)
        .unwrap()
        .1;
    assert_eq!(s2c_totals.entries, 3);
    assert_eq!(s2c_totals.orphans, 1);
    let c2s_totals = totals
        .iter()
        .find(|(k, _)| *k == RegionKind::CmdC2s)
        .unwrap()
        .1;
    assert_eq!(c2s_totals.unanswered, 1);
}

#[test]
fn entries_that_are_not_envelopes_are_malformed_with_their_bytes() {
    let seg = TestSegment::create("notfb", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let a = seg.attach();
    let mut t = Traffic::new(&a, RingSelection::All);
    let c2s = *a.geometry.ring(RegionKind::CmdC2s).unwrap();
    let mut client = Producer::new(&seg.rw, c2s);
    client
        .try_push(&seg.rw, b"hello, not a flatbuffer")
        .unwrap();
    client.try_push(&seg.rw, &request(5, 1)).unwrap();
    let mut out = Vec::new();
    t.poll(&a.segment, 0, usize::MAX, &mut out);
    let TrafficEvent::Malformed { error, raw, .. } = &out[0] else {
        panic!("{out:?}")
    };
    assert!(error.contains("identifier"), "{error}");
    assert_eq!(raw.as_slice(), b"hello, not a flatbuffer");
    assert_eq!(
        out[0].to_json().unwrap()["raw_hex"],
        crate::layout::fields::hex_string(b"hello, not a flatbuffer")
    );
    assert_eq!(records(&out).len(), 1, "the watcher keeps going");
    let c2s_totals = t
        .totals()
        .into_iter()
        .find(|(k, _)| *k == RegionKind::CmdC2s)
        .unwrap()
        .1;
    assert_eq!(c2s_totals.malformed, 1);
}

#[test]
fn luckyrobots_entries_show_their_json() {
    let seg = TestSegment::create("luckytraffic", &spec(PlanLayout::Lucky, 2));
    let a = seg.attach();
    let mut t = Traffic::new(&a, RingSelection::All);
    let c2s = *a.geometry.ring(RegionKind::CmdC2s).unwrap();
    let s2c = *a.geometry.ring(RegionKind::CmdS2c).unwrap();
    let mut client = lucky::Producer::new(&seg.rw, c2s);
    let mut engine = lucky::Producer::new(&seg.rw, s2c);
    let h = |corr, word| LuckyEntryHeader {
        correlation_id: corr,
        method_or_status: word,
        payload_length: 0,
    };
    client
        .try_push(&seg.rw, h(1, 2), br#"{"mode": "warp"}"#)
        .unwrap();
    engine
        .try_push(&seg.rw, h(1, 1), br#"{"error": "unknown mode warp"}"#)
        .unwrap();
    let mut out = Vec::new();
    t.poll(&a.segment, 0, usize::MAX, &mut out);
    let r = records(&out);
    assert_eq!(r[0].method, "SetSimulationMode");
    assert_eq!(r[0].to_json()["fields"]["mode"], "warp");
    assert_eq!(
        r[1].method, "SetSimulationMode",
        "a response takes its request's method"
    );
    assert_eq!(r[1].error.as_deref(), Some("unknown mode warp"));
    assert_eq!(r[1].pairing, Pairing::Response);
}

#[test]
fn a_reader_polls_again_at_once_after_entries_and_naps_longer_while_quiet() {
    use std::time::Duration;
    let mut pace = FollowPace::default();
    assert_eq!(pace.after_poll(true), Duration::ZERO);
    let naps: Vec<Duration> = (0..8).map(|_| pace.after_poll(false)).collect();
    assert_eq!(naps[0], FollowPace::MIN);
    assert!(naps.windows(2).all(|w| w[1] >= w[0]), "{naps:?}");
    assert_eq!(naps[7], FollowPace::MAX, "{naps:?}");
    // Entries again: at once, then the shortest nap.
    assert_eq!(pace.after_poll(true), Duration::ZERO);
    assert_eq!(pace.after_poll(false), FollowPace::MIN);
}

/// Requests and responses through real rings, consumed as an engine and client would.
struct Exchange {
    seg: TestSegment,
    client: Producer,
    engine: Producer,
    c2s_reader: crate::rings::lrbc::Consumer,
    s2c_reader: crate::rings::lrbc::Consumer,
    buf: Vec<u8>,
}

impl Exchange {
    fn new(tag: &str) -> (Self, Attached) {
        let seg = TestSegment::create(tag, &spec(PlanLayout::Lrbc { ext: true }, 2));
        let a = seg.attach();
        let c2s = *a.geometry.ring(RegionKind::CmdC2s).unwrap();
        let s2c = *a.geometry.ring(RegionKind::CmdS2c).unwrap();
        let x = Self {
            client: Producer::new(&seg.rw, c2s),
            engine: Producer::new(&seg.rw, s2c),
            c2s_reader: crate::rings::lrbc::Consumer::new(&seg.rw, c2s),
            s2c_reader: crate::rings::lrbc::Consumer::new(&seg.rw, s2c),
            seg,
            buf: Vec::new(),
        };
        (x, a)
    }

    /// One request (and its response, if any), read by the tap, then consumed.
    fn step(
        &mut self,
        t: &mut Traffic,
        mem: &Segment,
        request: &[u8],
        response: Option<&[u8]>,
        now_ns: u64,
        out: &mut Vec<TrafficEvent>,
    ) {
        self.client.try_push(&self.seg.rw, request).unwrap();
        if let Some(r) = response {
            self.engine.try_push(&self.seg.rw, r).unwrap();
        }
        t.poll(mem, now_ns, usize::MAX, out);
        self.consume();
    }

    /// The engine and client take everything published.
    fn consume(&mut self) {
        while self
            .c2s_reader
            .try_pop(&self.seg.rw, &mut self.buf)
            .unwrap()
            .is_some()
        {}
        while self
            .s2c_reader
            .try_pop(&self.seg.rw, &mut self.buf)
            .unwrap()
            .is_some()
        {}
    }
}

use crate::segment::Segment;

#[test]
fn answered_requests_leave_nothing_behind_however_many_there_are() {
    let (mut x, a) = Exchange::new("leak");
    let mut t = Traffic::new(&a, RingSelection::Cmd);
    let mut out = Vec::new();
    let mut peak = 0;
    for i in 0..40_000u64 {
        out.clear();
        let (req, resp) = (request(i, 1), response(i, 2, None));
        x.step(&mut t, &a.segment, &req, Some(&resp), i * 1_000, &mut out);
        assert_eq!(records(&out).len(), 2, "request {i} and its response");
        peak = peak.max(t.bookkeeping_len());
    }
    // Every request was answered: the pairing keeps (almost) nothing, and never did.
    assert!(t.decoder.pending.is_empty());
    assert!(peak <= 80, "peak bookkeeping {peak} entries");
}

#[test]
fn unanswered_requests_are_flagged_once_and_their_bookkeeping_is_capped() {
    let (mut x, a) = Exchange::new("unanswered");
    let mut t = Traffic::new(&a, RingSelection::Cmd);
    t.decoder.timeout_ns = 1_000_000;
    let mut out = Vec::new();
    let mut flagged = 0u64;
    let n = MAX_PENDING as u64 + 5_000;
    for i in 0..n {
        out.clear();
        // Time moves 10 µs per request: each is flagged 100 requests after it came.
        x.step(
            &mut t,
            &a.segment,
            &request(i, 1),
            None,
            i * 10_000,
            &mut out,
        );
        flagged += out
            .iter()
            .filter(|e| matches!(e, TrafficEvent::Unanswered { .. }))
            .count() as u64;
    }
    assert!(
        flagged >= n - 101 && flagged < n,
        "{flagged} of {n} flagged"
    );
    assert!(
        t.bookkeeping_len() <= 3 * MAX_PENDING + 200,
        "{} entries",
        t.bookkeeping_len()
    );
    assert_eq!(
        t.decoder.pending.len(),
        MAX_PENDING,
        "the oldest are let go"
    );
    // A late response to a request still remembered pairs; one too old is an orphan.
    out.clear();
    x.step(
        &mut t,
        &a.segment,
        &request(n, 1),
        Some(&response(n - 10, 3, None)),
        n * 10_000,
        &mut out,
    );
    assert!(records(&out).iter().any(|r| r.pairing == Pairing::Response));
    out.clear();
    x.step(
        &mut t,
        &a.segment,
        &request(n + 1, 1),
        Some(&response(0, 3, None)),
        n * 10_000,
        &mut out,
    );
    assert!(records(&out).iter().any(|r| r.pairing == Pairing::Orphan));
}

#[test]
fn a_response_waits_for_its_request_while_the_request_is_being_confirmed() {
    let (mut x, a) = Exchange::new("gate");
    let mut t = Traffic::new(&a, RingSelection::Cmd);
    // The engine takes the request before the tap looks, and answers it: the tap's copy
    // of the consumed request must wait for the client's next publication (or a quiet
    // while), and the response must not be shown before it, as an orphan.
    x.client.try_push(&x.seg.rw, &request(7, 1)).unwrap();
    while x
        .c2s_reader
        .try_pop(&x.seg.rw, &mut x.buf)
        .unwrap()
        .is_some()
    {}
    x.engine.try_push(&x.seg.rw, &response(7, 2, None)).unwrap();
    let mut out = Vec::new();
    t.poll(&a.segment, 0, usize::MAX, &mut out);
    assert!(records(&out).is_empty(), "nothing shown yet: {out:?}");
    assert!(!t.caught_up(&a.segment));
    // The client publishes its next request: the first is confirmed, then its response.
    x.client.try_push(&x.seg.rw, &request(8, 3)).unwrap();
    t.poll(&a.segment, 1_000, usize::MAX, &mut out);
    let r = records(&out);
    assert_eq!(r.len(), 3, "{out:?}");
    assert_eq!((r[0].correlation_id, r[0].is_request), (7, true));
    let resp = r.iter().find(|r| !r.is_request).unwrap();
    assert_eq!(resp.pairing, Pairing::Response, "paired, not an orphan");
    assert_eq!(resp.partner, Some(r[0].index));
    // The second request was not consumed: kept at once. A quiet ring settles.
    t.poll(
        &a.segment,
        1_000 + crate::rings::confirm::GIVE_UP_NS,
        usize::MAX,
        &mut out,
    );
    assert!(t.caught_up(&a.segment));
    let totals = t.totals();
    assert!(
        totals
            .iter()
            .all(|(_, t)| t.orphans == 0 && t.lost_bytes == 0)
    );
}

fn telemetry_subscription(corr: u64) -> Vec<u8> {
    rpc::build_envelope(corr, fb::MethodId::TelemetryStream, None, 1, |fbb| {
        let req =
            fb::TelemetryStreamReq::create(fbb, &fb::TelemetryStreamReqArgs { target_fps: 10 });
        Some((fb::Payload::TelemetryStreamReq, req.as_union_value()))
    })
}

fn telemetry_frame(corr: u64, frame_number: u32) -> Vec<u8> {
    rpc::build_envelope(corr, fb::MethodId::TelemetryFrame, None, 2, |fbb| {
        let frame = fb::TelemetryFrame::create(
            fbb,
            &fb::TelemetryFrameArgs {
                frame_number,
                ..Default::default()
            },
        );
        Some((fb::Payload::TelemetryFrame, frame.as_union_value()))
    })
}

fn totals_of(t: &Traffic, ring: RegionKind) -> Totals {
    t.totals()
        .into_iter()
        .find(|(k, _)| *k == ring)
        .map(|(_, t)| t)
        .unwrap_or_default()
}

#[test]
fn items_of_a_stream_subscribed_before_the_attach_are_labelled_so_and_are_not_orphans() {
    let (mut x, a) = Exchange::new("preattach");
    // The client subscribes, the engine acknowledges and sends a first item, all
    // consumed before the tap starts: the tap begins at read_pos and never sees the
    // subscription.
    x.client
        .try_push(&x.seg.rw, &telemetry_subscription(40))
        .unwrap();
    x.engine
        .try_push(
            &x.seg.rw,
            &rpc::build_envelope(40, fb::MethodId::TelemetryStream, None, 2, |_| None),
        )
        .unwrap();
    x.engine
        .try_push(&x.seg.rw, &telemetry_frame(40, 0))
        .unwrap();
    x.consume();
    let mut t = Traffic::new(&a, RingSelection::Cmd);
    for n in 1..=3 {
        x.engine
            .try_push(&x.seg.rw, &telemetry_frame(40, n))
            .unwrap();
    }
    let mut out = Vec::new();
    t.poll(&a.segment, 1_000, usize::MAX, &mut out);
    let r = records(&out);
    assert_eq!(r.len(), 3, "{out:?}");
    for item in &r {
        assert_eq!(item.pairing, Pairing::SubscribedBeforeAttach);
        assert_eq!(item.method, "TelemetryFrame");
        let json = item.to_json();
        assert_eq!(json["subscribed_before_attach"], true);
        assert!(json.get("orphan").is_none(), "{json}");
    }
    assert_eq!(
        r[0].pairing.describe(),
        "stream item, subscribed before attach"
    );
    let s2c = totals_of(&t, RegionKind::CmdS2c);
    assert_eq!(s2c.orphans, 0);
    assert_eq!(s2c.subscribed_before_attach, 3);
    assert_eq!(s2c.entries, 3);
    assert_eq!(
        serde_json::to_value(s2c).unwrap()["subscribed_before_attach"],
        3
    );
}

#[test]
fn a_plain_response_whose_request_was_not_seen_is_still_an_orphan() {
    let (x, a) = Exchange::new("stillorphan");
    let mut t = Traffic::new(&a, RingSelection::Cmd);
    let mut engine = x.engine;
    engine.try_push(&x.seg.rw, &response(12, 1, None)).unwrap();
    // The acknowledgement of a stream request is a plain response too.
    engine
        .try_push(
            &x.seg.rw,
            &rpc::build_envelope(13, fb::MethodId::TelemetryStream, None, 2, |_| None),
        )
        .unwrap();
    let mut out = Vec::new();
    t.poll(&a.segment, 1_000, usize::MAX, &mut out);
    let r = records(&out);
    assert_eq!(r.len(), 2, "{out:?}");
    assert!(r.iter().all(|r| r.pairing == Pairing::Orphan), "{r:?}");
    assert!(r.iter().all(|r| r.to_json()["orphan"] == true));
    assert!(
        r.iter()
            .all(|r| r.to_json().get("subscribed_before_attach").is_none())
    );
    let s2c = totals_of(&t, RegionKind::CmdS2c);
    assert_eq!((s2c.orphans, s2c.subscribed_before_attach), (2, 0));
}

#[test]
fn streams_seen_subscribing_pair_their_items_and_every_count_stays_right() {
    let (mut x, a) = Exchange::new("streamcounts");
    let mut t = Traffic::new(&a, RingSelection::Cmd);
    let mut out = Vec::new();
    // Seen: a subscription (acknowledged), its items; a request and its answer.
    x.step(
        &mut t,
        &a.segment,
        &telemetry_subscription(1),
        Some(&rpc::build_envelope(
            1,
            fb::MethodId::TelemetryStream,
            None,
            2,
            |_| None,
        )),
        1_000,
        &mut out,
    );
    x.step(
        &mut t,
        &a.segment,
        &request(2, 3),
        Some(&response(2, 4, None)),
        2_000,
        &mut out,
    );
    for n in 0..4 {
        x.engine
            .try_push(&x.seg.rw, &telemetry_frame(1, n))
            .unwrap();
    }
    // Unseen subscription (correlation id 50), and a response to no request (99).
    x.engine
        .try_push(&x.seg.rw, &telemetry_frame(50, 0))
        .unwrap();
    x.engine
        .try_push(&x.seg.rw, &telemetry_frame(50, 1))
        .unwrap();
    x.engine
        .try_push(&x.seg.rw, &response(99, 5, None))
        .unwrap();
    t.poll(&a.segment, 3_000, usize::MAX, &mut out);
    // Long after: the stream subscription is never flagged unanswered.
    t.poll(
        &a.segment,
        3_000 + t.decoder.timeout_ns + 1,
        usize::MAX,
        &mut out,
    );
    let r = records(&out);
    let count = |p: Pairing| r.iter().filter(|r| r.pairing == p).count();
    assert_eq!(count(Pairing::StreamItem), 4);
    assert_eq!(count(Pairing::SubscribedBeforeAttach), 2);
    assert_eq!(count(Pairing::Orphan), 1);
    assert_eq!(
        count(Pairing::Response),
        2,
        "the acknowledgement and the answer"
    );
    assert!(
        r.iter()
            .filter(|r| r.pairing == Pairing::SubscribedBeforeAttach)
            .all(|r| r.correlation_id == 50)
    );
    assert!(
        !out.iter()
            .any(|e| matches!(e, TrafficEvent::Unanswered { .. })),
        "{out:?}"
    );
    let s2c = totals_of(&t, RegionKind::CmdS2c);
    assert_eq!(s2c.entries, 9);
    assert_eq!(s2c.orphans, 1);
    assert_eq!(s2c.subscribed_before_attach, 2);
    assert_eq!(s2c.unanswered, 0);
    let c2s = totals_of(&t, RegionKind::CmdC2s);
    assert_eq!(c2s.entries, 2);
    assert_eq!(
        (c2s.orphans, c2s.subscribed_before_attach, c2s.unanswered),
        (0, 0, 0)
    );
}

#[test]
fn a_luckyrobots_payload_without_its_header_decodes_from_its_json_fields() {
    use crate::layout::RingFormat;
    let decode = |ring, payload: &[u8]| decode_entry(ring, RingFormat::Lucky, payload, None);
    let req = decode(RegionKind::CmdC2s, br#"{"mode": "fast"}"#).unwrap();
    assert_eq!(
        (req.method.as_str(), req.correlation_id),
        ("SetSimulationMode", 0)
    );
    let req = decode(RegionKind::CmdC2s, br#"{"agent_name": "a"}"#).unwrap();
    assert_eq!(req.method, "ResetAgent");
    assert_eq!(decode(RegionKind::CmdC2s, b"{}").unwrap().method, "");
    let resp = decode(RegionKind::CmdS2c, br#"{"error": {"code": 3}}"#).unwrap();
    assert_eq!(resp.error.as_deref(), Some(r#"{"code":3}"#));
    assert_eq!(
        decode(RegionKind::CmdS2c, br#"{"success": true}"#)
            .unwrap()
            .error,
        None
    );
    // With its header, the status decides, as live.
    let h = LuckyEntryHeader {
        correlation_id: 4,
        method_or_status: 0,
        payload_length: 0,
    };
    let ok = decode_entry(
        RegionKind::CmdS2c,
        RingFormat::Lucky,
        br#"{"error": "ignored"}"#,
        Some(h),
    )
    .unwrap();
    assert_eq!((ok.error, ok.correlation_id), (None, 4));
    assert!(
        decode(RegionKind::CmdS2c, b"nope")
            .unwrap_err()
            .starts_with("payload is not JSON")
    );
}
