//! `events`: the detector's events of a live run and of a recording, checked against an
//! independent peer that plays engine and trainer of a segment and writes the faults
//! (`tests/py/lrbc_fault_peer.py`, from the spec alone; its done line says in which
//! frame each fault was published), and against the simulated engine's planted faults.
//! Live, each fault is one event with its frame, env, channel, index, name, value and
//! origin and nothing else is found; a recording's events equal those found live, and
//! are found again from its frames; `--fail-on`, `--count`, bad kinds, a run without
//! faults and `watch`'s counts.
//!
//! Every `events` that must see a given frame checks every frame whole
//! (`--busy-budget 0`): with the default budget, a loaded machine lets the values of
//! some frames pass unchecked on purpose.

#![cfg(target_os = "linux")]

use crate::common;

use std::collections::BTreeSet;
use std::process::Stdio;

use common::events::{
    BURST_SHARE, EVERY_FAULT_HZ, EVERY_FAULT_STEPS, EventsRun, Forms, RING_KINDS, STALL_SECS,
    Summary, Tuple, applied, envs_ended, every_fault, frame_of, start_record,
};
use common::fault_peer::{FaultPeer, PeerArgs, wait_until_mapped};
use common::*;
use serde_json::{Value, json};

/// Check every frame whole, whatever the machine's load.
const EVERY_FRAME: [&str; 2] = ["--busy-budget", "0"];
/// [`EVERY_FRAME`], and every pause judged as a stall past the step's multiple and the
/// minimum: the peer of [`every_fault`] steps without pauses for less than the loop's
/// rhythm takes to learn (before it, a long wait is a pause of unknown rhythm).
const EVERY_FRAME_NO_RHYTHM: [&str; 3] = ["--busy-budget", "0", "--no-rhythm"];

/// A peer of 64 envs (obs 8, obs 1 named `pole_angle`; act 4) writing [`every_fault`].
fn peer_with_every_fault(tag: &str) -> FaultPeer {
    FaultPeer::start(
        tag,
        &PeerArgs::small(EVERY_FAULT_STEPS, EVERY_FAULT_HZ, every_fault()),
    )
}

/// Whether `f` shows every fault of [`every_fault`] (as the peer's done line `done`
/// says it applied them) ended, and the stall of the trainer that stops after the last
/// step, which goes on until the end.
fn every_fault_shown(f: &Forms, done: &Value) -> bool {
    let last = done["frame_seq"].as_u64().unwrap_or(u64::MAX);
    let ended_at = |kind: &str, frame: u64| f.ended(kind, |v| v["first_frame"] == frame);
    ["nan", "inf", "-inf"]
        .iter()
        .all(|k| ended_at("nonfinite", frame_of(done, k, None)))
        && ended_at("done_burst", frame_of(done, "done_burst", None))
        && ["engine", "trainer"]
            .iter()
            .all(|&side| ended_at("stall", frame_of(done, "stall", Some(side)) - 1))
        && f.of_kind("stall").iter().any(|v| v["first_frame"] == last)
        && ["rpc_error", "unanswered", "malformed"]
            .iter()
            .all(|k| f.ended(k, |_| true))
}

/// Whether the peer fell behind its schedule by more than the detector's shortest stall
/// (0.25 s) at some step, as a loaded machine can make it: `frame_seq` then really
/// stood still, and the stalls found there are events of the run.
fn peer_fell_behind(done: &Value) -> bool {
    done["max_late_ms"].as_f64().is_some_and(|ms| ms >= 200.0)
}

/// Whether `v` is a stall the peer was not asked for: not at the frame before one it
/// delayed, nor at the last frame.
fn unplanned_stall(v: &Value, done: &Value) -> bool {
    let mut planned: Vec<u64> = done["faults"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] == "stall")
        .filter_map(|f| f["frame_seq"].as_u64())
        .map(|f| f - 1)
        .collect();
    planned.extend(done["frame_seq"].as_u64());
    v["kind"] == "stall"
        && !v["first_frame"]
            .as_u64()
            .is_some_and(|f| planned.contains(&f))
}

/// The last forms of `forms`, without the stalls the peer was not asked for when it
/// fell behind its schedule.
fn kept(forms: &Forms, done: &Value) -> Vec<Value> {
    forms
        .last()
        .into_values()
        .filter(|v| !(peer_fell_behind(done) && unplanned_stall(v, done)))
        .collect()
}

/// The tuples of [`kept`].
fn tuples(forms: &Forms, done: &Value) -> BTreeSet<Tuple> {
    kept(forms, done).iter().map(Tuple::of).collect()
}

/// The frame_seq the peer's counters held when `name` was dumped.
fn frame_seq_now(name: &str) -> u64 {
    let (code, out, err) = run_inspector(&["dump", "--shm", name, "--json"]);
    assert_eq!(code, 0, "dump failed: {err}");
    let d: Value = serde_json::from_str(&out).expect("dump --json prints one JSON object");
    d["header"]["frame_seq"].as_u64().expect("frame_seq")
}

/// The one event (its last form) where `pred` holds.
fn the_one(forms: &Forms, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let found: Vec<Value> = forms.last().into_values().filter(|v| pred(v)).collect();
    assert_eq!(
        found.len(),
        1,
        "{what}: {} events, not one, in:\n{}",
        found.len(),
        forms.dump()
    );
    found.into_iter().next().unwrap_or_default()
}

/// Asserts that `forms` (what `events --json` printed, live, while the peer ran
/// [`every_fault`]) hold each fault exactly once, where the peer's done line `done` says
/// it was published, and nothing else but the stall of the trainer that stopped after
/// the last frame (and stalls where the peer says it fell behind its schedule by more
/// than the shortest stall, as on a loaded machine: the run's own).
///
/// A ring fault's frame is the newest frame when the ring reader came by, so it is held
/// to a window: from the frame before the entry was written to a second of frames
/// later. A stall's frame is the one `frame_seq` stood still at: the frame before the
/// one the peer's fault delayed.
fn assert_every_fault(forms: &Forms, done: &Value) {
    let all = || forms.dump();
    let last_frame = done["frame_seq"].as_u64().expect("frame_seq");
    let mut expected_ids = BTreeSet::new();

    // Each event is printed once as it ends, or (while it goes on at a later look) once
    // as going on and once more when it ends.
    for (id, v) in forms.last() {
        let printed = forms.of(id);
        match printed.as_slice() {
            [one] => assert!(
                one["ongoing"] == false
                    || (one["kind"] == "stall" && one["first_frame"] == last_frame),
                "event {id} printed only as going on: {}",
                all()
            ),
            [first, second] => assert!(
                first["ongoing"] == true && second["ongoing"] == false,
                "event {id} printed twice, not going on then ended: {}",
                all()
            ),
            more => panic!("event {id} printed {} times: {}", more.len(), all()),
        }
        assert_eq!(v["frame_seq"], v["first_frame"], "{v}");
    }

    // Non-finite values: one frame each, the peer's env, channel and index, the name of
    // obs[1] from the names region, and the side the value came from.
    let value_faults = [
        (
            "nan",
            3,
            "observation",
            Some(1),
            Some("pole_angle"),
            "NaN",
            "simulator",
        ),
        ("inf", 5, "action", Some(2), Some("a2"), "inf", "policy"),
        ("-inf", 7, "reward", None, None, "-inf", "simulator"),
    ];
    assert_eq!(forms.of_kind("nonfinite").len(), 3, "{}", all());
    for (kind, env, channel, index, name, value, origin) in value_faults {
        let frame = frame_of(done, kind, None);
        let e = the_one(forms, kind, |v| v["kind"] == "nonfinite" && v["env"] == env);
        expected_ids.insert(e["id"].as_u64().unwrap_or_default());
        assert_eq!(e["frame_seq"], frame, "{kind}: {e}");
        assert_eq!(e["last_frame"], frame, "{kind}: {e}");
        assert_eq!(e["count"], 1, "{kind}: {e}");
        assert_eq!(e["ongoing"], false, "{kind}: {e}");
        assert_eq!(e["channel"], channel, "{kind}: {e}");
        assert_eq!(e["index"], json!(index), "{kind}: {e}");
        assert_eq!(e["name"], json!(name), "{kind}: {e}");
        assert_eq!(e["value"], value, "{kind}: {e}");
        assert_eq!(e["values"], 1, "{kind}: {e}");
        assert_eq!(e["origin"], origin, "{kind}: {e}");
        let id = e["id"].as_u64().unwrap_or_default();
        assert_eq!(
            forms.of(id).len(),
            1,
            "a one-frame event printed once: {}",
            all()
        );
    }

    // The done burst: the peer's share of the envs plus those its formulas end there.
    let frame = frame_of(done, "done_burst", None);
    let ended = envs_ended(frame, 64, BURST_SHARE);
    assert_eq!(
        applied(done, "done_burst", None)["envs"],
        (BURST_SHARE * 64.0).ceil() as u64,
        "{done}"
    );
    let e = the_one(forms, "the done burst", |v| v["kind"] == "done_burst");
    expected_ids.insert(e["id"].as_u64().unwrap_or_default());
    assert_eq!(e["frame_seq"], frame, "{e}");
    assert_eq!(e["last_frame"], frame, "{e}");
    assert_eq!(e["count"], 1, "{e}");
    assert_eq!(e["ongoing"], false, "{e}");
    assert_eq!(e["values"], ended, "{e}");
    assert_eq!(e["value"].as_f64(), Some(ended as f64 / 64.0), "{e}");
    for absent in ["env", "channel", "origin"] {
        assert!(e.get(absent).is_none(), "{absent} in {e}");
    }
    let id = e["id"].as_u64().unwrap_or_default();
    assert_eq!(
        forms.of(id).len(),
        1,
        "a one-frame burst printed once: {}",
        all()
    );

    // The stalls: `frame_seq` still at the frame before the delayed one; the engine's
    // side is the simulator's, the trainer's the policy's; as long as the peer slept.
    for (side, origin) in [("engine", "simulator"), ("trainer", "policy")] {
        let frame = frame_of(done, "stall", Some(side));
        let measured = applied(done, "stall", Some(side))["measured_secs"]
            .as_f64()
            .expect("measured_secs");
        let e = the_one(forms, side, |v| {
            v["kind"] == "stall" && v["first_frame"] == frame - 1
        });
        expected_ids.insert(e["id"].as_u64().unwrap_or_default());
        assert_eq!(e["last_frame"], frame, "{side} stall: {e}");
        assert_eq!(e["count"], 1, "{side} stall: {e}");
        assert_eq!(e["ongoing"], false, "{side} stall: {e}");
        assert_eq!(e["origin"], origin, "{side} stall: {e}");
        let secs = e["value"].as_f64().expect("a stall's length");
        assert!(
            secs >= STALL_SECS * 0.9 && secs <= measured + 0.3,
            "{side} stall of {secs} s (the peer slept {measured} s): {e}"
        );
    }
    // The trainer stops after the last step (action_seq = frame_seq): a stall of the
    // policy at the last frame, going on until the end; the only stall there.
    let trailing = the_one(forms, "the stall after the last frame", |v| {
        v["kind"] == "stall" && v["first_frame"].as_u64() >= Some(last_frame)
    });
    expected_ids.insert(trailing["id"].as_u64().unwrap_or_default());
    assert_eq!(trailing["first_frame"], last_frame, "{trailing}");
    assert_eq!(trailing["origin"], "policy", "{trailing}");

    // Ring faults.
    let hz = EVERY_FAULT_HZ as u64;
    let within = |kind: &str, e: &Value, frame: u64| {
        let at = e["frame_seq"].as_u64().expect("frame_seq");
        assert!(
            at + 1 >= frame && at <= (frame + hz).min(last_frame),
            "{kind} at frame {at}, written in frame {frame}: {e}"
        );
    };
    let failed = applied(done, "rpc_error", None);
    let error_message = failed["error_message"].as_str().expect("error_message");
    let e = the_one(forms, "rpc_error", |v| v["kind"] == "rpc_error");
    within("rpc_error", &e, frame_of(done, "rpc_error", None));
    assert_eq!(e["ring"], "cmd_s2c", "{e}");
    assert_eq!(e["method"], "GetAgentSchema", "{e}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(error_message)
            && message.contains(&format!("correlation id {}", failed["correlation_id"])),
        "{e}"
    );
    let error_time = e["time_ns"].as_u64().expect("time_ns");
    expected_ids.insert(e["id"].as_u64().unwrap_or_default());

    let malformed = applied(done, "malformed", None);
    let e = the_one(forms, "malformed", |v| v["kind"] == "malformed");
    within("malformed", &e, frame_of(done, "malformed", None));
    assert_eq!(e["ring"], "cmd_s2c", "{e}");
    assert!(
        e["message"].as_str().unwrap_or_default().contains(&format!(
            "a malformed entry at position {}",
            malformed["position"]
        )),
        "{e}"
    );
    expected_ids.insert(e["id"].as_u64().unwrap_or_default());

    // Unanswered: flagged 5 s after the request was seen, so later than the error
    // response (read after a request sent before it) by nearly that.
    let unanswered = applied(done, "unanswered", None);
    let e = the_one(forms, "unanswered", |v| v["kind"] == "unanswered");
    assert!(
        e["frame_seq"].as_u64() >= unanswered["frame_seq"].as_u64(),
        "{e}"
    );
    assert_eq!(e["ring"], "cmd_c2s", "{e}");
    assert_eq!(e["method"], "GetAgentSchema", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("correlation id {}", unanswered["correlation_id"])),
        "{e}"
    );
    let flagged = e["time_ns"].as_u64().expect("time_ns");
    assert!(
        flagged >= error_time + 4_000_000_000,
        "unanswered {:.2} s after the error response: {e}",
        (flagged as f64 - error_time as f64) / 1e9
    );
    expected_ids.insert(e["id"].as_u64().unwrap_or_default());
    for kind in RING_KINDS {
        for e in forms.of_kind(kind) {
            assert_eq!(e["count"], 1, "{e}");
            assert!(e.get("env").is_none() && e.get("channel").is_none(), "{e}");
        }
    }

    // Nothing else (but the stalls of a peer that fell behind its schedule, which are
    // the run's).
    let others: Vec<Value> = forms
        .last()
        .into_iter()
        .filter(|(id, _)| !expected_ids.contains(id))
        .map(|(_, v)| v)
        .collect();
    if peer_fell_behind(done) && others.iter().all(|v| unplanned_stall(v, done)) {
        if !others.is_empty() {
            eprintln!(
                "the peer fell behind its schedule by {} ms: stalls of the run {others:?}",
                done["max_late_ms"]
            );
        }
    } else {
        assert!(others.is_empty(), "events other than the faults: {}", all());
    }
}

/// Asserts the summary counts the events of `forms` and that (nearly) every frame was
/// checked of the `last_frame` the run published.
fn assert_summary(s: &Summary, forms: &Forms, last_frame: u64) {
    let last = forms.last();
    assert_eq!(s.events, last.len() as u64, "{}", s.line);
    for (kind, n) in &s.by_kind {
        let found = last.values().filter(|v| v["kind"] == kind.as_str()).count() as u64;
        assert_eq!(*n, found, "{kind} in {}", s.line);
    }
    assert_eq!(s.by_kind.values().sum::<u64>(), s.events, "{}", s.line);
    assert_eq!(
        s.seen, last_frame,
        "every frame the run published: {}",
        s.line
    );
    assert!(
        s.checked * 100 >= s.seen * 95,
        "frames checked of those seen: {}",
        s.line
    );
}

/// Live: attached to the peer before its first step, `events --json` finds each fault
/// exactly once (its frame, env, channel, index and name, value, origin), and nothing
/// else but the stall of the trainer that stops after the last step; its summary counts
/// them and says every frame was checked. It ends on Ctrl-C.
#[test]
fn events_finds_each_fault_of_the_independent_peer_once_with_its_frame_env_channel_and_origin() {
    let mut peer = peer_with_every_fault("events-live");
    let mut events = EventsRun::start(&peer.name, &EVERY_FRAME_NO_RHYTHM);
    peer.go();
    let done = peer.wait_done();
    let last_frame = done["frame_seq"].as_u64().expect("frame_seq");
    assert_eq!(last_frame, EVERY_FAULT_STEPS, "{done}");
    assert_eq!(done["faults"].as_array().map(Vec::len), Some(9), "{done}");
    events.read_until("every fault", |f| every_fault_shown(f, &done));
    let ended = events.interrupt();
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    assert_every_fault(&ended.forms, &done);
    assert_summary(&ended.summary(), &ended.forms, last_frame);
}

/// Records a peer run of every fault with `record --all-envs` while `events --json`
/// follows it live; the recording's events (those its recorder found) equal those found
/// live, and found again from its frames and ring entries, the value events and the done
/// burst are the same, and the stalls are at the same frames (their side is not in the
/// frames: unknown).
#[test]
fn a_recordings_events_equal_those_found_live_and_are_found_again_from_its_frames() {
    let mut peer = peer_with_every_fault("events-rec");
    let file = temp_file("events-rec", "mcap");
    // Every frame checked whatever the load (`--busy-budget 0`).
    let record = start_record(&peer.name, &["--no-rhythm"], &file);
    let mut live = EventsRun::start(&peer.name, &EVERY_FRAME_NO_RHYTHM);
    peer.go();
    let done = peer.wait_done();
    let last_frame = done["frame_seq"].as_u64().expect("frame_seq");
    live.read_until("every fault", |f| every_fault_shown(f, &done));
    record.stop();
    let live = live.interrupt();
    assert_eq!(live.code, Some(0), "{}", live.stderr);
    assert_every_fault(&live.forms, &done);
    let live_tuples = tuples(&live.forms, &done);

    // The recorder's events, as the file holds them.
    let path = file.to_str().expect("a UTF-8 path");
    let (code, out, err) = run_inspector(&["events", path, "--json"]);
    assert_eq!(code, 0, "{err}");
    let recorded = Forms::parse(&out);
    let summary = Summary::find(&err);
    assert!(!summary.line.contains("found again"), "{}", summary.line);
    assert_eq!(
        summary.events,
        recorded.last().len() as u64,
        "{}",
        summary.line
    );
    // Of every frame the run published while it was recorded (the recorder started
    // before the first step), those its recorder missed included.
    assert_eq!(summary.seen, last_frame, "{}", summary.line);
    assert!(
        summary.checked <= summary.seen && summary.checked * 100 >= last_frame * 95,
        "{}",
        summary.line
    );
    for (id, forms) in recorded.last().keys().map(|&id| (id, recorded.of(id))) {
        assert_eq!(forms.len(), 1, "event {id} listed more than once: {out}");
    }
    let recorded_tuples = tuples(&recorded, &done);
    assert_eq!(
        recorded_tuples,
        live_tuples,
        "the recording's events are not those found live:\nrecorded:\n{}\nlive:\n{}",
        recorded.dump(),
        live.forms.dump()
    );

    // Found again from the recorded frames and ring entries.
    let (code, out, err) =
        run_inspector(&["events", path, "--find-again", "--json", "--no-rhythm"]);
    assert_eq!(code, 0, "{err}");
    let again = Forms::parse(&out);
    let summary = Summary::find(&err);
    assert!(
        summary
            .line
            .ends_with("; found again from the recorded frames"),
        "{}",
        summary.line
    );
    let of_kinds = |tuples: &BTreeSet<Tuple>, kinds: &[&str]| -> BTreeSet<Tuple> {
        tuples
            .iter()
            .filter(|t| kinds.contains(&t.kind.as_str()))
            .cloned()
            .collect()
    };
    let again_tuples = tuples(&again, &done);
    let values = ["nonfinite", "done_burst"];
    assert_eq!(
        of_kinds(&again_tuples, &values),
        of_kinds(&live_tuples, &values),
        "value events and done bursts found again:\n{}",
        again.dump()
    );
    assert_eq!(of_kinds(&again_tuples, &values).len(), 4);
    for side in ["engine", "trainer"] {
        let frame = frame_of(&done, "stall", Some(side));
        let e = the_one(&again, side, |v| {
            v["kind"] == "stall" && v["first_frame"] == frame - 1
        });
        assert_eq!(e["last_frame"], frame, "{side} stall found again: {e}");
        assert_eq!(e["ongoing"], false, "{side} stall found again: {e}");
        let origin = e["origin"].as_str().unwrap_or_default();
        let live_origin = if side == "engine" {
            "simulator"
        } else {
            "policy"
        };
        assert!(
            origin == "unknown" || origin == live_origin,
            "{side} stall found again with origin {origin}: {e}"
        );
    }
    // Found again, a stall needs a frame after it: the trainer's after the last frame is
    // not there; the ring faults are found again from the recorded entries.
    let again_kept = kept(&again, &done);
    let stalls = again_kept.iter().filter(|v| v["kind"] == "stall").count();
    assert_eq!(stalls, 2, "{}", again.dump());
    let rings = ["rpc_error", "malformed", "unanswered"];
    assert_eq!(
        of_kinds(&again_tuples, &rings),
        of_kinds(&live_tuples, &rings),
        "ring faults found again:\n{}",
        again.dump()
    );
    assert_eq!(
        again_kept.len(),
        4 + 2 + rings.len(),
        "nothing else found again:\n{}",
        again.dump()
    );
    let _ = std::fs::remove_file(&file);
}

/// `--fail-on nonfinite`: exit code 3 once the NaN is found, while the run goes on.
#[test]
fn fail_on_nonfinite_exits_3_soon_after_the_nan_while_the_run_goes_on() {
    const STEPS: u64 = 600;
    let faults = json!([{"kind": "nan", "step": 40, "env": 9, "channel": "obs", "index": 0}]);
    let mut peer = FaultPeer::start("events-fail", &PeerArgs::small(STEPS, 200.0, faults));
    let events = EventsRun::start(
        &peer.name,
        &[&EVERY_FRAME[..], &["--fail-on", "nonfinite"]].concat(),
    );
    peer.go();
    let ended = events.finish();
    // (The run's 600 frames take 3 s at 200 Hz; the NaN is in its frame 40.)
    let frame_at_exit = frame_seq_now(&peer.name);
    assert_eq!(ended.code, Some(3), "{}", ended.stderr);
    assert!(
        frame_at_exit < STEPS,
        "events ended only at frame {frame_at_exit}"
    );
    assert!(
        ended
            .stderr
            .lines()
            .any(|l| l == "found nonfinite (--fail-on)"),
        "{}",
        ended.stderr
    );
    let e = the_one(&ended.forms, "the NaN", |v| v["kind"] == "nonfinite");
    assert_eq!(
        (&e["frame_seq"], &e["env"], &e["index"], &e["value"]),
        (&json!(40), &json!(9), &json!(0), &json!("NaN")),
        "{e}"
    );
    assert_eq!(ended.summary().by_kind.get("nonfinite"), Some(&1));
    let done = peer.wait_done();
    assert_eq!(kept(&ended.forms, &done).len(), 1, "{}", ended.forms.dump());
}

/// `--fail-on stall` on a run whose only fault is a NaN: exit code 0 at the end of
/// `--secs`, the NaN listed.
#[test]
fn fail_on_stall_exits_0_on_a_run_without_a_stall() {
    let faults = json!([{"kind": "nan", "step": 40, "env": 2, "channel": "reward"}]);
    let mut peer = FaultPeer::start("events-nostall", &PeerArgs::small(600, 200.0, faults));
    let events = EventsRun::start(
        &peer.name,
        &[&EVERY_FRAME[..], &["--fail-on", "stall", "--secs", "1.5"]].concat(),
    );
    peer.go();
    let ended = events.finish();
    let done = peer.wait_done();
    if ended.code == Some(3) && peer_fell_behind(&done) {
        // The peer fell behind its schedule by more than the shortest stall: the run
        // really stalled.
        eprintln!(
            "the peer fell behind by {} ms: {}",
            done["max_late_ms"], ended.stderr
        );
        return;
    }
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    let s = ended.summary();
    assert_eq!(s.by_kind.get("stall"), None, "{}", s.line);
    assert_eq!(s.by_kind.get("nonfinite"), Some(&1), "{}", s.line);
    assert!(s.checked >= 40, "{}", s.line);
    let e = the_one(&ended.forms, "the NaN", |v| v["kind"] == "nonfinite");
    assert_eq!((&e["frame_seq"], &e["env"]), (&json!(40), &json!(2)), "{e}");
}

/// `--count 2` ends after the first two events, before the third and the run's end.
#[test]
fn count_2_stops_after_two_events() {
    const STEPS: u64 = 600;
    let faults = json!([
        {"kind": "nan", "step": 40, "env": 1, "channel": "obs", "index": 2},
        {"kind": "inf", "step": 60, "env": 2, "channel": "act", "index": 0},
        {"kind": "-inf", "step": 300, "env": 3, "channel": "reward"},
    ]);
    let mut peer = FaultPeer::start("events-count", &PeerArgs::small(STEPS, 200.0, faults));
    let events = EventsRun::start(&peer.name, &[&EVERY_FRAME[..], &["--count", "2"]].concat());
    peer.go();
    let ended = events.finish();
    let frame_at_exit = frame_seq_now(&peer.name);
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    assert!(
        frame_at_exit < STEPS,
        "events ended only at frame {frame_at_exit}"
    );
    assert_eq!(ended.forms.last().len(), 2, "{}", ended.forms.dump());
    assert_eq!(ended.summary().events, 2, "{}", ended.stderr);
    let done = peer.wait_done();
    // The first two events: the NaN and the infinity (a stall of a peer that fell
    // behind its schedule may come first).
    if !peer_fell_behind(&done) {
        let frames: Vec<(Value, Value)> = ended
            .forms
            .last()
            .values()
            .map(|v| (v["kind"].clone(), v["frame_seq"].clone()))
            .collect();
        assert_eq!(
            frames,
            [
                (json!("nonfinite"), json!(40)),
                (json!("nonfinite"), json!(60))
            ],
            "{}",
            ended.forms.dump()
        );
    }
}

/// `--fail-on nan` names no kind of event: a usage error, one line, exit code 2.
#[test]
fn fail_on_an_unknown_kind_is_a_usage_error_of_one_line() {
    let (code, out, err) = run_inspector(&["events", "--shm", "no-such-seg", "--fail-on", "nan"]);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains("\"nan\" is not a kind of event"),
        "{err}"
    );
    assert!(lines[0].contains("nonfinite"), "the kinds are named: {err}");
}

/// A recording of a run without faults (ended while the run goes on): `events` on it
/// prints nothing and exits 0, as text, as JSON and found again.
#[test]
fn events_of_a_recording_of_a_run_without_faults_prints_nothing() {
    let mut peer = FaultPeer::start("events-clean", &PeerArgs::small(600, 200.0, json!([])));
    let file = temp_file("events-clean", "mcap");
    let mut record = Guarded::new(
        inspector()
            .args([
                "record",
                "--shm",
                &peer.name,
                "--all-envs",
                "--duration",
                "1.5",
            ])
            .args(EVERY_FRAME)
            .arg("-o")
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("record runs"),
    );
    wait_until_mapped(record.child().id(), &peer.name);
    peer.go();
    let out = record.finish();
    assert_clean_exit(&out);
    let done = peer.wait_done();
    // (Unless the peer fell behind its schedule by more than the shortest stall: the
    // run then really stalled.)
    let without_stalls = !peer_fell_behind(&done);
    let path = file.to_str().expect("a UTF-8 path");
    for args in [
        vec!["events", path],
        vec!["events", path, "--json"],
        vec!["events", path, "--find-again", "--json"],
    ] {
        let (code, out, err) = run_inspector(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        let s = Summary::find(&err);
        if without_stalls {
            assert!(out.is_empty(), "{args:?} printed: {out}");
            assert_eq!(s.events, 0, "{args:?}: {}", s.line);
        } else {
            assert_eq!(
                s.by_kind.get("stall").copied().unwrap_or(0),
                s.events,
                "{}",
                s.line
            );
        }
        assert!(s.checked > 0 && s.checked <= s.seen, "{args:?}: {}", s.line);
    }
    let _ = std::fs::remove_file(&file);
}

/// `watch --json --count 2`: its second line, after a NaN, counts the event and the
/// frames checked.
#[test]
fn watch_json_counts_the_events_and_the_frames_checked() {
    let faults = json!([{"kind": "nan", "step": 20, "env": 4, "channel": "obs", "index": 5}]);
    let mut peer = FaultPeer::start("events-watch", &PeerArgs::small(300, 200.0, faults));
    let (watch, lines) = inspector_lines(&[
        "watch",
        "--shm",
        &peer.name,
        "--json",
        "--count",
        "2",
        "--busy-budget",
        "0",
    ]);
    let watch = Guarded::new(watch);
    // The first line: the sampler and its detector are running; the run starts, and
    // its NaN is 0.1 s in, well before the second line a second later.
    let first: Value = serde_json::from_str(&next_line(&lines, "watch's first line"))
        .expect("watch --json prints JSON");
    assert_eq!(first["events"], 0, "{first}");
    peer.go();
    let second: Value = serde_json::from_str(&next_line(&lines, "watch's second line"))
        .expect("watch --json prints JSON");
    assert!(second["events"].as_u64() >= Some(1), "{second}");
    assert!(
        second["events_by_kind"]["nonfinite"].as_u64() >= Some(1),
        "{second}"
    );
    let checked = second["frames_checked"].as_u64().expect("frames_checked");
    assert!(
        checked >= 20 && checked <= second["frames_seen"].as_u64().unwrap_or_default(),
        "{second}"
    );
    let out = watch.finish();
    assert_clean_exit(&out);
    peer.wait_done();
}

/// The simulated engine's planted faults (`sim engine --plant`, stepped by `sim
/// client` in rollouts of 64 frames with 0.3 s updates), as the demo plants them: each
/// found once, an action's NaN with the policy as its origin, an observation's infinity
/// with the simulator, the engine's stall mid-rollout with the simulator; no update is a
/// stall, and at most one pause of unknown rhythm is told.
#[test]
fn the_simulated_engines_planted_faults_are_found_with_their_origin() {
    let engine = SimEngine::start(
        "events-plant",
        &[
            "--envs",
            "16",
            "--obs",
            "4",
            "--act",
            "3",
            "--image",
            "none",
            "--plant",
            "nan@300:env=5,channel=act,index=2",
            "--plant",
            "inf@350:env=1,channel=obs,index=3",
            "--plant",
            "-inf@400:env=9,channel=reward",
            "--plant",
            "done-burst@450",
            "--plant",
            "stall@500:secs=0.6",
        ],
    );
    let mut events = EventsRun::start(&engine.name, &EVERY_FRAME);
    let client = Guarded::new(
        inspector()
            .args(["sim", "client", "--shm", &engine.name, "--hz", "200"])
            .args(["--rollout", "64", "--update", "0.3"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sim client runs"),
    );
    events.read_until("every planted fault", |f| {
        let ended_at = |kind: &str, frame: u64| f.ended(kind, |v| v["first_frame"] == frame);
        [300, 350, 400].iter().all(|&k| ended_at("nonfinite", k))
            && ended_at("done_burst", 450)
            && ended_at("stall", 499)
    });
    let ended = events.interrupt();
    drop(client);
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    let forms = &ended.forms;
    let act_name = lrbc_sim::dynamics::CartPoles::act_names(3)[2].clone();
    let obs_name = lrbc_sim::dynamics::CartPoles::obs_names(4)[3].clone();
    for (frame, env, channel, index, name, value, origin) in [
        (300, 5, "action", Some(2), Some(act_name), "NaN", "policy"),
        (
            350,
            1,
            "observation",
            Some(3),
            Some(obs_name),
            "inf",
            "simulator",
        ),
        (400, 9, "reward", None, None, "-inf", "simulator"),
    ] {
        let e = the_one(forms, channel, |v| {
            v["kind"] == "nonfinite" && v["env"] == env
        });
        assert_eq!(
            (
                &e["frame_seq"],
                &e["last_frame"],
                &e["channel"],
                &e["index"],
                &e["name"],
                &e["value"],
                &e["origin"]
            ),
            (
                &json!(frame),
                &json!(frame),
                &json!(channel),
                &json!(index),
                &json!(name),
                &json!(value),
                &json!(origin)
            ),
            "{e}"
        );
    }
    let burst = the_one(forms, "the done burst", |v| v["kind"] == "done_burst");
    assert_eq!(burst["frame_seq"], 450, "{burst}");
    // 0.75 of the 16 envs, and any the dynamics ended there.
    assert!(burst["values"].as_u64() >= Some(12), "{burst}");
    let stall = the_one(forms, "the stall", |v| {
        v["kind"] == "stall" && v["first_frame"] == 499
    });
    assert_eq!(
        (&stall["last_frame"], &stall["origin"]),
        (&json!(500), &json!("simulator")),
        "{stall}"
    );
    let secs = stall["value"].as_f64().unwrap_or_default();
    assert!((0.55..5.0).contains(&secs), "{stall}");
    // No update is a stall: every stall is mid-rollout (the planted one, or the engine
    // and client kept from stepping by a loaded machine, a stall of the run).
    for s in forms.of_kind("stall") {
        let frame = s["first_frame"].as_u64().unwrap_or_default();
        assert!(frame % 64 != 0, "a stall at an update: {}", forms.dump());
    }
    let pauses = forms.of_kind("pause");
    assert!(pauses.len() <= 1, "{}", forms.dump());
    // Nothing else.
    let others: Vec<Value> = forms
        .last()
        .into_values()
        .filter(|v| v["kind"] != "stall" && v["kind"] != "pause")
        .collect();
    assert_eq!(others.len(), 4, "nothing else: {}", forms.dump());
}
