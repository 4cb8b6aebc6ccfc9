//! `record` against a simulated engine and client, each in its own process: the file is
//! read back with the `mcap` crate and the generated code of `schema/recording.fbs`,
//! and by an independent Python reader (`tests/py/read_recording.py`, the PyPI `mcap`
//! package).

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::path::PathBuf;
use std::process::{Child, Stdio};

use common::{
    SimEngine, inspector, line_channel, next_line, node, python, record_live_run,
    record_nan_run_with, temp_file, wait_with_deadline,
};
use crossbeam_channel::Receiver;
use lrbc::rpc::recording_fb;

/// Records 2 s of an engine with 6 envs (obs 5, act 2) that writes a NaN at step 20,
/// stepped by a client, recording envs 0, 2 and 5. Returns the file.
fn record_a_live_run(tag: &str) -> PathBuf {
    record_a_live_run_with(tag, &[])
}

/// [`record_a_live_run`] with more options of `record`.
fn record_a_live_run_with(tag: &str, more: &[&str]) -> PathBuf {
    let (out, stderr) = record_nan_run_with(tag, "5", more);
    assert!(stderr.contains("duration reached"), "{stderr}");
    out
}

#[test]
fn a_recording_reads_back_with_the_mcap_crate_and_the_generated_frame_code() {
    let path = record_a_live_run("rust");
    let bytes = std::fs::read(&path).unwrap();
    let mut seqs = Vec::new();
    let mut nan_frames = Vec::new();
    let mut ring_entries = 0;
    let (mut events, mut logs, mut rhythms) = (Vec::new(), Vec::new(), Vec::new());
    for message in mcap::MessageStream::new(&bytes).unwrap() {
        let message = message.unwrap();
        let schema = message.channel.schema.as_ref();
        // The loop's rhythm, as JSON of its JSON schema.
        if message.channel.topic == "/lrbc/rhythm" {
            let schema = schema.expect("a schema");
            assert_eq!(
                (schema.name.as_str(), schema.encoding.as_str()),
                ("lrbc.Rhythm", "jsonschema")
            );
            let v: serde_json::Value = serde_json::from_slice(&message.data).unwrap();
            rhythms.push(v);
            continue;
        }
        // The detector's events, as JSON of their JSON schema and as Foxglove's log.
        if message.channel.topic == "/lrbc/events" || message.channel.topic == "/lrbc/log" {
            let schema = schema.expect("a schema");
            assert_eq!(schema.encoding, "jsonschema");
            assert_eq!(message.channel.message_encoding, "json");
            let v: serde_json::Value = serde_json::from_slice(&message.data).unwrap();
            if message.channel.topic == "/lrbc/events" {
                assert_eq!(schema.name, "lrbc.Event");
                events.push(v);
            } else {
                assert_eq!(schema.name, "foxglove.Log");
                logs.push(v);
            }
            continue;
        }
        if message.channel.topic != "/lrbc/frame" {
            assert!(message.channel.topic.starts_with("/lrbc/ring/"));
            ring_entries += 1;
            continue;
        }
        let schema = message.channel.schema.as_ref().unwrap();
        assert_eq!(schema.name, "lrbc.recording.Frame");
        assert_eq!(schema.encoding, "flatbuffer");
        assert_eq!(&schema.data[..], lrbc::rpc::RECORDING_BFBS);
        assert_eq!(message.channel.message_encoding, "flatbuffer");
        let frame = recording_fb::root_as_frame(&message.data).unwrap();
        assert_eq!(frame.envs().unwrap().iter().collect::<Vec<_>>(), [0, 2, 5]);
        assert_eq!(frame.rewards().unwrap().len(), 6);
        assert_eq!(frame.dones().unwrap().len(), 6);
        assert_eq!(frame.resets().unwrap().len(), 6);
        assert_eq!(frame.observations().unwrap().len(), 3 * 5);
        assert_eq!(frame.actions().unwrap().len(), 3 * 2);
        if frame.observations().unwrap().get(0).is_nan() {
            assert!(frame.rewards().unwrap().get(0).is_nan());
            nan_frames.push(frame.frame_seq());
        }
        seqs.push(frame.frame_seq());
    }
    assert!(seqs.len() > 50, "only {} frames recorded", seqs.len());
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "frame_seq does not increase"
    );
    assert!(ring_entries > 0, "no ring entry recorded");
    // The client steps without pauses, for less than the loop takes to learn: the
    // rhythm's last summary is learning, its step the client's (200 Hz).
    let rhythm = rhythms.last().expect("the loop's rhythm recorded");
    // (Periodic only when a loaded machine paused it alike twice.)
    assert!(
        rhythm["kind"] == "learning" || rhythm["kind"] == "periodic",
        "{rhythm}"
    );
    let step = rhythm["step_secs"].as_f64().expect("the step");
    assert!((0.003..0.05).contains(&step), "{rhythm}");
    // Lock-step: the engine's step N publishes frame_seq N.
    assert_eq!(nan_frames, [20]);
    // Env 0's NaN observation and reward of frame 20: two events, of the simulator.
    let nonfinite: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["kind"] == "nonfinite" && e["ongoing"] == false)
        .map(|e| {
            assert_eq!(
                (e["frame_seq"].as_u64(), e["env"].as_u64()),
                (Some(20), Some(0)),
                "{e}"
            );
            assert_eq!(e["value"], "NaN", "{e}");
            assert_eq!(e["origin"], "simulator", "{e}");
            (
                e["channel"].as_str().unwrap(),
                e["name"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(nonfinite.len(), 2, "{events:?}");
    assert!(nonfinite.iter().any(|(c, _)| *c == "observation"));
    assert!(nonfinite.iter().any(|(c, _)| *c == "reward"));
    assert!(
        logs.iter().any(|l| l["level"] == 4
            && l["message"]
                .as_str()
                .unwrap()
                .starts_with("frame 20: nonfinite")),
        "{logs:?}"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn an_independent_python_reader_counts_the_channels_and_decodes_a_frame() {
    // zstd chunks (the default) here; lz4 and none below.
    let path = record_a_live_run("py");
    let v = python("read_recording.py", &[&path.to_string_lossy()]);
    assert_eq!(v["compressions"], serde_json::json!(["zstd"]), "{v}");
    let frames = v["counts"]["/lrbc/frame"].as_u64().unwrap();
    assert!(frames > 50, "{v}");
    assert_eq!(v["schema_encodings"]["/lrbc/frame"], "flatbuffer");
    assert_eq!(v["schema_names"]["/lrbc/frame"], "lrbc.recording.Frame");
    // Ring entries as JSON that Foxglove decodes, with their exact bytes.
    assert_eq!(v["schema_encodings"]["/lrbc/ring/cmd_c2s"], "jsonschema");
    assert_eq!(
        v["schema_names"]["/lrbc/ring/cmd_c2s"],
        "lrbc.recording.RingEntry"
    );
    assert_eq!(v["message_encodings"]["/lrbc/ring/cmd_c2s"], "json");
    let entry = &v["first_ring_entry"];
    assert_eq!(entry["ring"], "cmd_c2s", "{v}");
    assert!(entry["correlation_id"].as_u64() > Some(0), "{v}");
    assert!(
        entry["method"].as_str().is_some_and(|m| !m.is_empty()),
        "{v}"
    );
    assert!(entry["bytes_len"].as_u64() > Some(8), "{v}");
    assert_eq!(entry["bytes_identifier"], "LRPC", "{v}");
    assert!(
        v["counts"]["/lrbc/ring/cmd_s2c"].as_u64().unwrap() > 0,
        "{v}"
    );
    assert_eq!(v["first_frame"]["envs"], serde_json::json!([0, 2, 5]));
    assert_eq!(v["first_frame"]["rewards"], 6);
    assert_eq!(v["first_frame"]["observations"], 15);
    assert_eq!(v["frame_seq_increasing"], true);
    assert_eq!(v["nan_frames"], serde_json::json!([20]));
    // The counts written at the end agree with the frames in the file.
    let counts = &v["metadata"]["lrbc.counts"];
    assert_eq!(counts["frames_recorded"], frames.to_string());
    assert_eq!(v["metadata"]["lrbc.geometry"]["recorded_envs"], "0,2,5");
    assert_eq!(v["metadata"]["lrbc.tool"]["name"], "lrbc-inspector");
    let _ = std::fs::remove_file(&path);
    for (kind, chunks) in [("lz4", "lz4"), ("none", "")] {
        let path = record_a_live_run_with(&format!("py-{kind}"), &["--compression", kind]);
        let v = python("read_recording.py", &[&path.to_string_lossy()]);
        assert_eq!(
            v["compressions"],
            serde_json::json!([chunks]),
            "{kind}: {v}"
        );
        assert_eq!(v["nan_frames"], serde_json::json!([20]), "{kind}: {v}");
        assert!(
            v["counts"]["/lrbc/frame"].as_u64() > Some(50),
            "{kind}: {v}"
        );
        let _ = std::fs::remove_file(&path);
    }
}

/// Starts `record` with no end of its own on a live engine and client, and waits for its
/// first progress line.
fn start_open_ended(engine: &SimEngine, tag: &str) -> (Child, Child, PathBuf, Receiver<String>) {
    let client = inspector()
        .args(["sim", "client", "--shm", &engine.name, "--hz", "200"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let out = temp_file(&format!("record-{tag}"), "mcap");
    let mut record = inspector()
        .args(["record", "--shm", &engine.name, "-o"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = line_channel(record.stderr.take().unwrap());
    let first = next_line(&lines, "the first progress line");
    assert!(
        first.starts_with("record: ") && first.contains("frames"),
        "{first}"
    );
    (record, client, out, lines)
}

/// An engine of 2 envs × obs 3 × act 1 without images, in its own process.
fn small_engine() -> SimEngine {
    SimEngine::start(
        "record",
        &["--envs", "2", "--obs", "3", "--act", "1", "--image", "none"],
    )
}

/// Frames in a finished file (reading fails on a file without its summary and footer).
fn frames_in(path: &PathBuf) -> usize {
    let bytes = std::fs::read(path).unwrap();
    mcap::Summary::read(&bytes)
        .unwrap()
        .expect("a finished file has a summary");
    mcap::MessageStream::new(&bytes)
        .unwrap()
        .map(Result::unwrap)
        .filter(|m| m.channel.topic == "/lrbc/frame")
        .count()
}

#[test]
fn ctrl_c_finishes_the_file() {
    let engine = small_engine();
    let (record, mut client, out, lines) = start_open_ended(&engine, "sigint");
    common::interrupt(record.id());
    let output = wait_with_deadline(record);
    assert!(output.status.success());
    let last = next_line(&lines, "the closing line");
    assert!(last.starts_with("record: stopped;"), "{last}");
    assert!(frames_in(&out) > 0);
    let _ = client.kill();
    let _ = client.wait();
    let _ = std::fs::remove_file(&out);
}

#[test]
fn the_engine_dying_ends_the_recording_with_one_line_and_a_finished_file() {
    let mut engine = small_engine();
    let (record, mut client, out, lines) = start_open_ended(&engine, "death");
    let mut child = engine.child.take().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let output = wait_with_deadline(record);
    assert!(output.status.success());
    let last = loop {
        let line = next_line(&lines, "the closing line");
        if !line.contains("frames/s") || line.contains("is gone") {
            break line;
        }
    };
    assert!(
        last.contains("the engine (pid") && last.contains("is gone"),
        "{last}"
    );
    assert!(frames_in(&out) > 0);
    let _ = client.kill();
    let _ = client.wait();
    let _ = std::fs::remove_file(&out);
    // The killed engine left its segment behind.
    let _ = std::fs::remove_file(PathBuf::from("/dev/shm").join(&engine.name));
}

/// Frames of a file read linearly up to its first error (a killed recorder's file ends in
/// the middle of a chunk and has no summary).
fn frames_up_to_the_first_error(bytes: &[u8]) -> usize {
    let Ok(stream) = mcap::MessageStream::new(bytes) else {
        return 0;
    };
    stream
        .map_while(Result::ok)
        .filter(|m| m.channel.topic == "/lrbc/frame")
        .count()
}

#[test]
fn a_killed_recorder_leaves_a_file_that_reads_up_to_its_last_whole_chunk() {
    let engine = small_engine();
    let (mut record, mut client, out, lines) = start_open_ended(&engine, "sigkill");
    // A chunk ends each second before the progress line: after two lines, two chunks
    // are in the file.
    let second = next_line(&lines, "the second progress line");
    assert!(second.contains("frames"), "{second}");
    record.kill().unwrap();
    let _ = record.wait();
    let bytes = std::fs::read(&out).unwrap();
    assert!(
        mcap::Summary::read(&bytes).map_or(true, |s| s.is_none()),
        "a killed recorder wrote no summary"
    );
    let frames = frames_up_to_the_first_error(&bytes);
    assert!(
        frames > 0,
        "no whole chunk with frames in {} bytes",
        bytes.len()
    );
    let _ = client.kill();
    let _ = client.wait();
    let _ = std::fs::remove_file(&out);
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_is_one_line_and_exit_1() {
    let engine = small_engine();
    let record = inspector()
        .args([
            "record",
            "--shm",
            &engine.name,
            "--duration",
            "5",
            "-o",
            "/dev/full",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_with_deadline(record);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("record: "))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("writing /dev/full: No space left on device"),
        "{stderr}"
    );
}

#[test]
fn images_are_recorded_as_foxglove_images_of_the_region_and_the_streams() {
    let engine = SimEngine::start(
        "record",
        &[
            "--envs", "3", "--obs", "3", "--act", "1", "--image", "32x24x3",
        ],
    );
    let mut client = inspector()
        .args(["sim", "client", "--shm", &engine.name, "--hz", "200"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let out = temp_file("record-images", "mcap");
    let record = inspector()
        .args([
            "record",
            "--shm",
            &engine.name,
            "--duration",
            "3",
            "--envs",
            "0,2",
        ])
        .args(["--images", "-o"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_with_deadline(record);
    let _ = client.kill();
    let _ = client.wait();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let bytes = std::fs::read(&out).unwrap();
    let mut region = std::collections::BTreeMap::<String, usize>::new();
    let mut streamed = 0;
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        let topic = m.channel.topic.clone();
        if let Some(env) = topic.strip_prefix("/lrbc/camera/") {
            let schema = m.channel.schema.as_ref().unwrap();
            assert_eq!(schema.name, "foxglove.RawImage");
            assert_eq!(schema.encoding, "flatbuffer");
            assert_eq!(&schema.data[..], lrbc::rpc::FOXGLOVE_RAW_IMAGE_BFBS);
            let img = lrbc::rpc::foxglove_fb::root_as_raw_image(&m.data).unwrap();
            assert_eq!((img.width(), img.height(), img.step()), (32, 24, 96));
            assert_eq!(img.encoding(), Some("rgb8"));
            assert_eq!(img.frame_id(), Some(env));
            assert_eq!(img.data().unwrap().len(), 32 * 24 * 3);
            *region.entry(env.to_string()).or_default() += 1;
        } else if topic.starts_with("/lrbc/stream/") {
            let schema = m.channel.schema.as_ref().unwrap();
            match schema.name.as_str() {
                "foxglove.RawImage" => {
                    let img = lrbc::rpc::foxglove_fb::root_as_raw_image(&m.data).unwrap();
                    let need = img.step() as usize * img.height() as usize;
                    assert!(need > 0 && img.data().unwrap().len() >= need);
                }
                "foxglove.CompressedImage" => {
                    let img =
                        flatbuffers::root::<lrbc::rpc::foxglove_fb::CompressedImage<'_>>(&m.data)
                            .unwrap();
                    assert!(matches!(img.format(), Some("jpeg" | "png")));
                }
                other => panic!("{topic}: schema {other}"),
            }
            streamed += 1;
        }
    }
    assert_eq!(
        region.keys().cloned().collect::<Vec<_>>(),
        ["env0", "env2"],
        "{region:?}"
    );
    assert!(region.values().all(|&n| n > 2), "{region:?}");
    assert!(streamed > 0, "no streamed image recorded");
    // The independent reader decodes them too.
    let v = python("read_recording.py", &[&out.to_string_lossy()]);
    assert_eq!(
        v["schema_names"]["/lrbc/camera/env2"], "foxglove.RawImage",
        "{v}"
    );
    let image = &v["images"]["/lrbc/camera/env2"];
    assert_eq!(
        image,
        &serde_json::json!({"width": 32, "height": 24, "step": 96, "encoding": "rgb8",
            "frame_id": "env2", "data_len": 32 * 24 * 3}),
    );
    let _ = std::fs::remove_file(&out);
}

#[test]
fn foxglove_s_packages_decode_every_channel_of_a_recording() {
    // Images of the region and streamed camera frames, every ring, zstd chunks.
    let (path, stderr) = record_live_run(
        "foxglove-decode",
        &[
            "--envs",
            "4",
            "--obs",
            "3",
            "--act",
            "2",
            "--image",
            "16x16x3",
            "--camera-hz",
            "30",
        ],
        &["--duration", "2", "--envs", "0,1", "--images"],
    );
    assert!(stderr.contains("duration reached"), "{stderr}");
    let v = node("read_recording.cjs", &[&path.to_string_lossy()]);
    assert_eq!(v["compressions"], serde_json::json!(["zstd"]), "{v}");
    let topics = v["topics"].as_object().unwrap();
    for (topic, t) in topics {
        assert_eq!(t["failures"], 0, "{topic}: {t}");
        assert!(t["error"].is_null(), "{topic}: {t}");
    }
    for topic in [
        "/lrbc/frame",
        "/lrbc/ring/cmd_c2s",
        "/lrbc/ring/cmd_s2c",
        "/lrbc/camera/env0",
    ] {
        assert!(topics[topic]["messages"].as_u64() > Some(0), "{topic}: {v}");
    }
    assert!(
        topics.keys().any(|t| t.starts_with("/lrbc/stream/")),
        "a streamed camera: {v}"
    );
    // The first frame's rewards as the engine wrote them (read by this tool's reader).
    let mut rec = lrbc_recording::replay::Recording::open(&path).unwrap();
    let (t0, t1) = rec.time_range().unwrap();
    let mut first = None;
    rec.frames_between(t0, t1, |f| {
        first = Some(f);
        false
    })
    .unwrap();
    let first = first.unwrap();
    assert_eq!(v["firstFrame"]["frame_seq"], first.frame_seq.to_string());
    let rewards: Vec<f64> = (v["firstFrame"]["rewards"].as_array().unwrap().iter())
        .map(|r| r.as_f64().unwrap())
        .collect();
    let expected: Vec<f64> = first.rewards.iter().map(|&r| f64::from(r)).collect();
    assert_eq!(rewards, expected);
    // Ring entries with the correlation ids of their exact bytes.
    let mut ids = Vec::new();
    for m in mcap::MessageStream::new(&std::fs::read(&path).unwrap()).unwrap() {
        let m = m.unwrap();
        if m.channel.topic.starts_with("/lrbc/ring/") {
            let bytes = lrbc_recording::format::ring_entry_payload(&m.data).unwrap();
            let envelope = lrbc::rpc::fb::root_as_envelope(&bytes).unwrap();
            ids.push(envelope.correlation_id());
        }
    }
    let mut shown: Vec<u64> = (v["ringEntries"].as_array().unwrap().iter())
        .map(|e| e["correlation_id"].as_u64().unwrap())
        .collect();
    assert!(!shown.is_empty(), "{v}");
    // The app reads in log-time order, the crate in file order.
    shown.sort_unstable();
    ids.sort_unstable();
    assert_eq!(shown, ids);
    let _ = std::fs::remove_file(&path);
}
