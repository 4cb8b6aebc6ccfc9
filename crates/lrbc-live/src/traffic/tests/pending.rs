use super::*;

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
        1_000 + lrbc::rings::confirm::GIVE_UP_NS,
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
