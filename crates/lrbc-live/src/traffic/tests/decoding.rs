use super::*;

#[test]
fn requests_and_responses_pair_by_correlation_id_with_latency() {
    let seg = TestSegment::create("pair", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let a = seg.attach();
    let mut t = Traffic::new(&a, RingSelection::Cmd);
    let c2s = *a.geometry.ring(RegionKind::CmdC2s).unwrap();
    let s2c = *a.geometry.ring(RegionKind::CmdS2c).unwrap();
    let mut client = V1Producer::new(&seg.rw, c2s);
    let mut engine = V1Producer::new(&seg.rw, s2c);
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
    let mut client = V1Producer::new(&seg.rw, c2s);
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
        lrbc::layout::fields::hex_string(b"hello, not a flatbuffer")
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
    let mut client = lucky::LuckyProducer::new(&seg.rw, c2s);
    let mut engine = lucky::LuckyProducer::new(&seg.rw, s2c);
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
    let mut pace = PollPace::default();
    assert_eq!(pace.after_poll(true), Duration::ZERO);
    let naps: Vec<Duration> = (0..8).map(|_| pace.after_poll(false)).collect();
    assert_eq!(naps[0], PollPace::MIN);
    assert!(naps.windows(2).all(|w| w[1] >= w[0]), "{naps:?}");
    assert_eq!(naps[7], PollPace::MAX, "{naps:?}");
    // Entries again: at once, then the shortest nap.
    assert_eq!(pace.after_poll(true), Duration::ZERO);
    assert_eq!(pace.after_poll(false), PollPace::MIN);
}

#[test]
fn on_a_busy_machine_a_quiet_reader_naps_longer_and_back_once_it_is_not() {
    use std::time::Duration;
    let mut pace = PollPace::default();
    pace.set_busy(true);
    let naps: Vec<Duration> = (0..12).map(|_| pace.after_poll(false)).collect();
    assert_eq!(naps[11], PollPace::BUSY_MAX, "{naps:?}");
    assert!(PollPace::BUSY_MAX > PollPace::MAX);
    // Entries still come at once, busy or not.
    assert_eq!(pace.after_poll(true), Duration::ZERO);
    // Spare CPU again: the longest nap falls back at once.
    for _ in 0..12 {
        let _ = pace.after_poll(false);
    }
    pace.set_busy(false);
    assert_eq!(pace.after_poll(false), PollPace::MAX);
}

#[test]
fn a_luckyrobots_payload_without_its_header_decodes_from_its_json_fields() {
    use lrbc::layout::RingFormat;
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
            .to_string()
            .starts_with("payload is not JSON")
    );
}
