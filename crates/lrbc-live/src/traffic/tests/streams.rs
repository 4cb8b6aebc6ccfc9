use super::*;

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

fn totals_of(t: &Traffic, ring: RegionKind) -> RingTotals {
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
