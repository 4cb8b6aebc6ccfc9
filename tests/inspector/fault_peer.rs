//! The inspector against an independent peer that plays engine and trainer of a segment
//! (`tests/py/lrbc_fault_peer.py`, written from the spec alone) and writes faults the
//! project's own simulated engine never writes: `dump` reads its segment, and `traffic`
//! lists its failed, malformed and unanswered ring entries.

#![cfg(target_os = "linux")]

use crate::common;

use std::time::Duration;

use crossbeam_channel::RecvTimeoutError;

use common::fault_peer::{FaultPeer, PeerArgs, wait_until_mapped};
use common::*;
use serde_json::{Value, json};

const STEPS: u64 = 300;

fn dump_json(name: &str) -> Value {
    let (code, out, err) = run_inspector(&["dump", "--shm", name, "--json"]);
    assert_eq!(code, 0, "dump failed: {err}");
    serde_json::from_str(&out).expect("dump --json prints one JSON object")
}

/// The applied fault of `kind` (and `side`, for stalls) in the peer's done line.
fn applied<'a>(done: &'a Value, kind: &str, side: Option<&str>) -> &'a Value {
    done["faults"]
        .as_array()
        .expect("faults")
        .iter()
        .find(|f| f["kind"] == kind && side.is_none_or(|s| f["side"] == s))
        .unwrap_or_else(|| panic!("no applied {kind} fault in {done}"))
}

#[test]
fn the_segment_and_the_ring_faults_of_an_independent_peer_are_read_right() {
    let faults = json!([
        {"kind": "nan", "step": 40, "env": 3, "channel": "obs", "index": 1},
        {"kind": "inf", "step": 60, "env": 5, "channel": "reward"},
        {"kind": "-inf", "step": 80, "env": 7, "channel": "act", "index": 2},
        {"kind": "rpc_error", "step": 100},
        {"kind": "unanswered", "step": 110},
        {"kind": "malformed", "step": 120},
        {"kind": "done_burst", "step": 150, "share": 0.25},
        {"kind": "stall", "step": 200, "secs": 0.2, "side": "engine"},
        {"kind": "stall", "step": 250, "secs": 0.2, "side": "trainer"},
    ]);
    let mut peer = FaultPeer::start("faultpeer", &PeerArgs::small(STEPS, 500.0, faults));
    assert_eq!(peer.ready["pid"], peer.pid);
    assert_eq!(peer.ready["frame_seq"], 0);

    // The segment as created: the extension block, names, rings, idle at frame 0.
    let d = dump_json(&peer.name);
    assert_eq!(d["layout"], "lrbc-v1-ext", "{d}");
    let h = &d["header"];
    for (field, value) in [
        ("num_envs", json!(64)),
        ("obs_size", json!(8)),
        ("act_size", json!(4)),
        ("mode", json!(0)),
        ("server_pid", json!(peer.pid)),
        ("client_pid", json!(peer.pid)),
        ("frame_seq", json!(0)),
        ("action_seq", json!(0)),
        ("cmd_ring_size", json!(65536)),
        ("image_offset", json!(0)),
        ("ctl_s2c_offset", json!(0)),
        ("ctl_c2s_offset", json!(0)),
        ("total_size", d["size"].clone()),
    ] {
        assert_eq!(h[field], value, "header field {field}: {h}");
    }
    assert_eq!(d["names"]["obs"][1], "pole_angle", "{}", d["names"]);
    assert_eq!(d["names"]["obs"].as_array().map(Vec::len), Some(8));
    assert_eq!(d["names"]["act"], json!(["a0", "a1", "a2", "a3"]));
    let regions: Vec<&str> = d["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for r in ["truncateds", "names", "cmd_s2c", "cmd_c2s"] {
        assert!(regions.contains(&r), "no region {r}: {regions:?}");
    }
    assert_eq!(d["snapshot"]["consistent"], true, "{}", d["snapshot"]);

    // A ring follower attached before the first step starts at read_pos 0, so it sees
    // every entry, though the peer consumes each as soon as it is written.
    let (traffic, lines) = inspector_lines(&[
        "traffic",
        "--shm",
        &peer.name,
        "--ring",
        "cmd",
        "--follow",
        "--json",
        "--duration",
        "10",
    ]);
    let mut traffic = Guarded::new(traffic);
    wait_until_mapped(traffic.child().id(), &peer.name);
    std::thread::sleep(Duration::from_millis(200));

    peer.go();
    let done = peer.wait_done();
    assert_eq!(done["steps"], STEPS, "{done}");
    assert_eq!(done["frame_seq"], STEPS, "{done}");
    assert_eq!(done["action_seq"], STEPS, "{done}");
    assert_eq!(done["nonfinite_actions_seen"], 1, "{done}");
    let fs = done["faults"].as_array().expect("faults");
    assert_eq!(fs.len(), 9, "{done}");
    for f in fs {
        assert_eq!(f["frame_seq"], f["step"], "{f}");
    }
    assert_eq!(applied(&done, "done_burst", None)["envs"], 16, "{done}");
    for side in ["engine", "trainer"] {
        let secs = applied(&done, "stall", Some(side))["measured_secs"]
            .as_f64()
            .expect("measured_secs");
        assert!((0.2..5.0).contains(&secs), "{side} stall: {secs} s");
    }
    let failed = applied(&done, "rpc_error", None);
    let error_message = failed["error_message"].as_str().expect("error_message");
    assert_eq!(failed["response_error_seen"], error_message, "{failed}");
    let failed_id = failed["correlation_id"].as_u64().expect("correlation id");
    let unanswered_id = applied(&done, "unanswered", None)["correlation_id"]
        .as_u64()
        .expect("correlation id");

    // After the run: idle at the last step, every write of the seqlock complete.
    let d = dump_json(&peer.name);
    let h = &d["header"];
    assert_eq!(h["frame_seq"], STEPS, "{h}");
    assert_eq!(h["action_seq"], STEPS, "{h}");
    assert_eq!(h["write_seq"], 2 + 2 * STEPS, "{h}");
    assert!(
        h["frame_time_ns"].as_u64() >= h["action_time_ns"].as_u64()
            && h["action_time_ns"].as_u64() > Some(0),
        "{h}"
    );
    assert_eq!(d["snapshot"]["consistent"], true, "{}", d["snapshot"]);
    assert_eq!(d["snapshot"]["frame_seq"], STEPS, "{}", d["snapshot"]);

    // What `traffic` listed: the request and its error response, the malformed entry,
    // the request flagged unanswered (after 5 s), and nothing lost.
    let out = traffic.finish();
    assert_clean_exit(&out);
    // Every line, up to the end of its output (the reader thread may still hold some).
    let mut events: Vec<Value> = Vec::new();
    loop {
        match lines.recv_timeout(DEADLINE) {
            Ok(l) => events.push(serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"))),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => panic!("traffic's output did not end"),
        }
    }
    let all = || format!("{events:#?}");
    let find = |pred: &dyn Fn(&Value) -> bool, what: &str| -> Value {
        events
            .iter()
            .find(|e| pred(e))
            .cloned()
            .unwrap_or_else(|| panic!("traffic listed no {what}: {}", all()))
    };
    let request = find(
        &|e| e["ring"] == "cmd_c2s" && e["correlation_id"] == failed_id && e.get("size").is_some(),
        "request of the failed call",
    );
    assert_eq!(request["method"], "GetAgentSchema", "{request}");
    assert_eq!(request["error"], Value::Null, "{request}");
    let response = find(
        &|e| e["ring"] == "cmd_s2c" && e["correlation_id"] == failed_id,
        "error response",
    );
    assert_eq!(response["error"], error_message, "{response}");
    assert_eq!(response["method"], "GetAgentSchema", "{response}");
    assert!(response["latency_ns"].is_u64(), "not paired: {response}");
    assert!(response.get("orphan").is_none(), "{response}");
    let malformed = find(
        &|e| e["ring"] == "cmd_s2c" && e.get("raw_hex").is_some(),
        "malformed entry",
    );
    assert_eq!(malformed["raw_hex"], "ab".repeat(24), "{malformed}");
    let unanswered = find(
        &|e| e["correlation_id"] == unanswered_id && e.get("unanswered_after_ns").is_some(),
        "unanswered request",
    );
    assert_eq!(unanswered["ring"], "cmd_c2s", "{unanswered}");
    assert_eq!(unanswered["method"], "GetAgentSchema", "{unanswered}");
    assert!(
        unanswered["unanswered_after_ns"].as_u64() >= Some(5_000_000_000),
        "{unanswered}"
    );
    let totals = &find(&|e| e.get("totals").is_some(), "totals")["totals"];
    let c2s = &totals["cmd_c2s"];
    let s2c = &totals["cmd_s2c"];
    assert_eq!(c2s["entries"], 2, "{totals}");
    assert_eq!(c2s["unanswered"], 1, "{totals}");
    assert_eq!(s2c["malformed"], 1, "{totals}");
    assert_eq!(s2c["orphans"], 0, "{totals}");
    for t in [c2s, s2c] {
        assert_eq!(t["lost_bytes"], 0, "{totals}");
    }
}
