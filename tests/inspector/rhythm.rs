//! The loop's rhythm against the independent peer (`tests/py/lrbc_fault_peer.py`)
//! running an on-policy trainer's loop: rollouts of 32 frames at 250 Hz, an update after
//! each, its envs in step at a time limit, and the faults that break the rhythm (a hang
//! at an update, an engine-side wait mid-rollout, a burst of terminations). Live with
//! `events`, recorded with `record` (the recorder's events, and found again from the
//! frames), and the rhythm's figures against the peer's own measure of its loop, read
//! from the recording by an independent reader (`tests/py/read_recording.py`).

use crate::common;

use common::events::{EventsRun, Forms, frame_of, start_record};
use common::fault_peer::{FaultPeer, PeerArgs};
use common::*;
use serde_json::{Value, json};

/// Frames of a rollout, rollouts of the run, the update after each (s).
const ROLLOUT: u64 = 32;
const ROLLOUTS: u64 = 14;
const UPDATE_SECS: f64 = 0.5;
/// The peer's pace, steps per second.
const HZ: f64 = 250.0;
/// Every env's episode is truncated at its 100th frame.
const TIME_LIMIT: u64 = 100;
/// The update after this frame hangs [`HANG_SECS`] more (over 4 × the usual update).
const HANG_AT: u64 = 8 * ROLLOUT;
const HANG_SECS: f64 = 3.0;
/// The engine waits [`ENGINE_WAIT_SECS`] after the actions of the frame after this one,
/// half-way through a rollout.
const ENGINE_WAIT_AT: u64 = 10 * ROLLOUT + 16;
const ENGINE_WAIT_SECS: f64 = 0.6;
/// Three quarters of the envs terminate in this frame, mid-episode.
const BURST_AT: u64 = 250;

/// Check every frame whole, whatever the machine's load.
const EVERY_FRAME: [&str; 2] = ["--busy-budget", "0"];

fn ppo_peer(tag: &str) -> FaultPeer {
    let faults = json!([
        {"kind": "stall", "step": HANG_AT + 1, "secs": HANG_SECS, "side": "trainer"},
        {"kind": "stall", "step": ENGINE_WAIT_AT + 1, "secs": ENGINE_WAIT_SECS, "side": "engine"},
        {"kind": "done_burst", "step": BURST_AT, "share": 0.75},
    ]);
    FaultPeer::start(
        tag,
        &PeerArgs {
            rollout: Some((ROLLOUT, UPDATE_SECS)),
            time_limit: Some(TIME_LIMIT),
            ..PeerArgs::small(ROLLOUT * ROLLOUTS, HZ, faults)
        },
    )
}

/// Whether the peer fell behind its schedule by more than the shortest stall at a step
/// (a loaded machine): `frame_seq` then really stood still mid-rollout, a stall of the
/// run's own.
fn peer_fell_behind(done: &Value) -> bool {
    done["max_late_ms"].as_f64().is_some_and(|ms| ms >= 200.0)
}

/// Whether `forms` hold the hang's and the engine's stalls and the burst, ended.
fn faults_shown(f: &Forms) -> bool {
    f.ended("stall", |v| v["first_frame"] == HANG_AT)
        && f.ended("stall", |v| v["first_frame"] == ENGINE_WAIT_AT)
        && f.ended("done_burst", |_| true)
}

/// Asserts what `forms` hold of the run (`done`, the peer's done line), as `source`
/// found it: two stalls (the hang at its update, the policy's, with the usual update;
/// the engine's wait, the simulator's), no update a stall, at most one pause of unknown
/// rhythm, one done burst (the terminations), no burst at the time limits.
fn assert_events(forms: &Forms, done: &Value, source: &str) {
    let last_frame = done["frame_seq"].as_u64().expect("frame_seq");
    let all = || format!("{source}:\n{}", forms.dump());
    let stalls: Vec<Value> = forms
        .of_kind("stall")
        .into_iter()
        // The trainer stops after the last frame: a stall of the run's end.
        .filter(|v| v["first_frame"] != last_frame)
        .filter(|v| {
            !peer_fell_behind(done)
                || [HANG_AT, ENGINE_WAIT_AT].contains(&v["first_frame"].as_u64().unwrap_or(0))
        })
        .collect();
    assert_eq!(stalls.len(), 2, "{}", all());
    let hang = &stalls[0];
    assert_eq!(hang["first_frame"], HANG_AT, "{}", all());
    assert_eq!(hang["last_frame"], HANG_AT + 1, "{hang}");
    assert_eq!(hang["origin"], "policy", "{hang}");
    let usual = hang["usual_secs"].as_f64().expect("the usual update");
    assert!((usual - UPDATE_SECS).abs() < 0.05, "{hang}");
    let secs = hang["value"].as_f64().expect("its length");
    assert!(
        (UPDATE_SECS + HANG_SECS - 0.05..UPDATE_SECS + HANG_SECS + 1.0).contains(&secs),
        "{hang}"
    );
    let message = hang["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("waiting for the trainer's actions")
            && message.contains("the loop's usual update of 0.5"),
        "{hang}"
    );
    let wait = &stalls[1];
    assert_eq!(wait["first_frame"], ENGINE_WAIT_AT, "{}", all());
    assert_eq!(wait["origin"], "simulator", "{wait}");
    assert!(wait.get("usual_secs").is_none(), "{wait}");
    let secs = wait["value"].as_f64().expect("its length");
    assert!(
        (ENGINE_WAIT_SECS - 0.05..ENGINE_WAIT_SECS + 1.0).contains(&secs),
        "{wait}"
    );
    // No update was a stall: the updates are at frames that are multiples of the rollout.
    for s in forms.of_kind("stall") {
        let f = s["first_frame"].as_u64().unwrap_or(0);
        assert!(
            f == HANG_AT || f == last_frame || f % ROLLOUT != 0,
            "an update judged a stall: {s}\n{}",
            all()
        );
    }
    assert!(forms.of_kind("pause").len() <= 1, "{}", all());
    let bursts = forms.of_kind("done_burst");
    assert_eq!(bursts.len(), 1, "no burst at the time limits: {}", all());
    assert_eq!(bursts[0]["first_frame"], BURST_AT, "{}", all());
    assert_eq!(bursts[0]["values"], 48, "{}", all());
    assert_eq!(frame_of(done, "done_burst", None), BURST_AT, "{done}");
}

/// The peer's run, live and recorded: no update is a stall once the loop is known, the
/// hang at an update and the engine's wait mid-rollout are, at their frames; the time
/// limits of envs in step are no done burst and the terminations are; the same events
/// come from the recording, as its recorder found them and found again from its frames;
/// and the recorded rhythm is the peer's loop: its rollout, its updates one by one, and
/// the seconds stepping and waiting on each side.
#[test]
fn a_ppo_loop_is_learned_and_only_what_breaks_its_rhythm_is_an_event_live_and_recorded() {
    let mut peer = ppo_peer("rhythm-ppo");
    let file = temp_file("rhythm-ppo", "mcap");
    let record = start_record(&peer.name, &[], &file);
    let mut events = EventsRun::start(&peer.name, &EVERY_FRAME);
    peer.go();
    let done = peer.wait_done();
    assert_eq!(done["frame_seq"], ROLLOUT * ROLLOUTS, "{done}");
    events.read_until("the hang, the engine's wait and the burst", faults_shown);
    record.stop();
    let live = events.interrupt();
    assert_eq!(live.code, Some(0), "{}", live.stderr);
    assert_events(&live.forms, &done, "live");
    let line = live
        .stderr
        .lines()
        .find(|l| l.starts_with("rhythm: "))
        .unwrap_or_default();
    assert!(
        line.starts_with("rhythm: rollouts of 32 frames, updates of 0.5")
            && line.contains("(the trainer)")
            && line.contains("; 3 time limits of envs in step (truncated together at 100 frames)"),
        "{}",
        live.stderr
    );

    let path = file.to_str().expect("a UTF-8 path");
    for (source, find_again) in [("recorded", false), ("found again", true)] {
        let mut args = vec!["events", path, "--json"];
        if find_again {
            args.push("--find-again");
        }
        let (code, out, err) = run_inspector(&args);
        assert_eq!(code, 0, "{err}");
        assert_events(&Forms::parse(&out), &done, source);
        assert!(
            err.contains("rhythm: rollouts of 32 frames, updates of 0.5"),
            "{source}: {err}"
        );
    }

    // The recorded rhythm, read by the independent reader, against the peer's.
    let v = python("read_recording.py", &[path]);
    // The frames carry the trainer's stamp (a frame copied after the trainer stamped
    // the next actions, on a loaded machine, does not).
    assert!(
        v["frames_with_action_time"].as_u64() >= Some(ROLLOUT * ROLLOUTS * 3 / 4),
        "the frames carry the trainer's stamp: {}",
        v["frames_with_action_time"]
    );
    let r = &v["rhythm"];
    let p = &done["rhythm"];
    assert_eq!(r["kind"], "periodic", "{r}");
    assert_eq!(r["rollout_frames"], ROLLOUT, "{r}");
    assert_eq!(r["update_side"], "trainer", "{r}");
    let update = r["update_secs"].as_f64().expect("update_secs");
    let peer_update = p["update_secs"].as_f64().expect("the peer's update");
    assert!((update - peer_update).abs() < 0.03, "{update} against {p}");
    assert_eq!(
        (r["time_limits"].as_u64(), r["time_limit_frames"].as_u64()),
        (Some(3), Some(TIME_LIMIT)),
        "{r}"
    );
    // Each update, one by one: its frame, its length, the loop's (the hang a stall).
    let recent = r["recent"].as_array().expect("the pauses");
    let updates = p["updates_at"].as_array().expect("the peer's updates");
    assert_eq!(updates.len() as u64, ROLLOUTS - 1, "{p}");
    for u in updates {
        let (frame, secs) = (u[0].as_u64().unwrap_or(0), u[2].as_f64().unwrap_or(0.0));
        let pause = recent
            .iter()
            .find(|q| q["frame"] == frame)
            .unwrap_or_else(|| panic!("no pause at frame {frame}: {r}"));
        let length = pause["secs"].as_f64().expect("its length");
        let hang = if frame == HANG_AT { HANG_SECS } else { 0.0 };
        assert!(
            (length - secs - hang).abs() < 0.03 + if hang > 0.0 { 0.1 } else { 0.0 },
            "the update at {frame}: {pause} against {secs} s"
        );
        assert_eq!(pause["side"], "trainer", "{pause}");
        let verdict = if frame == HANG_AT { "stall" } else { "loop" };
        assert!(
            pause["verdict"] == verdict || (pause["verdict"] == "learning" && frame <= 2 * ROLLOUT),
            "{pause}"
        );
    }
    let engine = recent
        .iter()
        .find(|q| q["frame"] == ENGINE_WAIT_AT)
        .unwrap_or_else(|| panic!("no pause of the engine: {r}"));
    assert_eq!(
        (&engine["side"], &engine["verdict"]),
        (&json!("engine"), &json!("stall")),
        "{engine}"
    );
    // The seconds: from the segment's creation (the attach saw frame 0 and its stamp) to
    // the last frame the peer's; after it the inspector's own (the trainer stopped).
    let ns = |k: &str| p[k].as_u64().unwrap_or_else(|| panic!("{k}: {p}"));
    let secs = |v: &Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k}: {v}"));
    let startup = (ns("first_frame_ns") - ns("created_ns")) as f64 / 1e9;
    let run = (ns("last_frame_ns") - ns("created_ns")) as f64 / 1e9;
    // (The seconds followed run from the copies' times after the first: short of the
    // stamps' by the copy's delay of frame 1, milliseconds on a loaded machine.)
    let after = secs(r, "followed_secs") - run;
    assert!(
        (-0.1..30.0).contains(&after),
        "followed {r} against the run's {run} s"
    );
    let pauses = recent.len() as f64;
    let close = |what: &str, ours: f64, theirs: f64| {
        assert!(
            (ours - theirs).abs() < 0.05 + 0.005 * pauses,
            "{what}: {ours} s against the peer's {theirs} s\n{r}\n{p}"
        );
    };
    close(
        "waiting for the trainer",
        secs(r, "trainer_secs"),
        secs(p, "trainer_wait_secs") + startup + after,
    );
    close(
        "waiting for the engine",
        secs(r, "engine_secs"),
        secs(p, "engine_wait_secs"),
    );
    let peer_stepping =
        secs(p, "elapsed_secs") - secs(p, "trainer_wait_secs") - secs(p, "engine_wait_secs");
    close("stepping", secs(r, "stepping_secs"), peer_stepping);
    assert_eq!(secs(r, "unknown_secs"), 0.0, "{r}");
    let _ = std::fs::remove_file(&file);
}

/// `watch --json` on the peer's loop: its lines carry the rhythm as it is learned, then
/// the loop (its rollout, its update on the trainer's side), the shares of wall time,
/// and the newest pause; the text lines the same as words.
#[test]
fn watch_shows_the_loops_rhythm_as_it_is_learned() {
    let args = PeerArgs {
        rollout: Some((16, 0.3)),
        ..PeerArgs::small(16 * 12, HZ, json!([]))
    };
    let mut peer = FaultPeer::start("rhythm-watch", &args);
    let (watch, lines) = inspector_lines(&[
        "watch",
        "--shm",
        &peer.name,
        "--json",
        "--interval",
        "0.5",
        "--busy-budget",
        "0",
    ]);
    let watch = Guarded::new(watch);
    let first: Value = serde_json::from_str(&next_line(&lines, "watch's first line"))
        .expect("watch --json prints JSON");
    assert_eq!(first["rhythm"]["kind"], "learning", "{first}");
    assert_eq!(first["rhythm"]["pauses"], 0, "{first}");
    peer.go();
    let periodic = loop {
        let v: Value = serde_json::from_str(&next_line(&lines, "a line of the loop"))
            .expect("watch --json prints JSON");
        if v["rhythm"]["kind"] == "periodic" {
            break v;
        }
    };
    let r = &periodic["rhythm"];
    assert_eq!(
        (&r["rollout_frames"], &r["update_side"]),
        (&json!(16), &json!("trainer")),
        "{r}"
    );
    let update = r["update_secs"].as_f64().expect("update_secs");
    assert!((0.29..0.35).contains(&update), "{r}");
    let shares = &r["shares"];
    let sum: f64 = ["stepping", "trainer", "engine", "unknown"]
        .iter()
        .map(|k| shares[k].as_f64().unwrap_or(f64::NAN))
        .sum();
    assert!((sum - 1.0).abs() < 1e-6, "{r}");
    assert!(shares["trainer"].as_f64() > Some(0.5), "{r}");
    assert!(r.get("recent").is_none(), "{r}");
    let last = &r["last_pause"];
    assert_eq!(last["side"], "trainer", "{r}");
    assert!(last["frame"].as_u64().is_some_and(|f| f % 16 == 0), "{r}");
    drop(watch);
    peer.wait_done();
    // The text line, on the run's last frame: the loop in words.
    let (code, out, err) = run_inspector(&["watch", "--shm", &peer.name, "--count", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(" loop=learning pauses=0 stepping="), "{out}");
}
