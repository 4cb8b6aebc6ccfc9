//! `record` against a simulated engine and client, each in its own process: the file is
//! read back with the `mcap` crate and the generated code of `schema/recording.fbs`,
//! and by an independent Python reader (`tests/py/read_recording.py`, the PyPI `mcap`
//! package).

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

mod common;

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Instant;

use common::{DEADLINE, inspector, python_path, unique_name, wait_with_deadline};
use lrbc_inspector::rpc::recording_fb;
use serde_json::Value;

/// A `sim engine` process, stopped on drop.
struct Engine {
    child: Child,
    name: String,
}

impl Engine {
    fn start(args: &[&str]) -> Self {
        let name = unique_name("record");
        let child = inspector()
            .args(["sim", "engine", "--name", &name])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let path = PathBuf::from("/dev/shm").join(&name);
        let deadline = Instant::now() + DEADLINE;
        while !path.exists() {
            assert!(
                Instant::now() < deadline,
                "engine did not create its segment"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Self { child, name }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        common::interrupt(self.child.id());
        let _ = self.child.wait();
    }
}

/// Records 2 s of an engine with 6 envs (obs 5, act 2) that writes a NaN at step 20,
/// stepped by a client, recording envs 0, 2 and 5. Returns the file.
fn record_a_live_run(tag: &str) -> PathBuf {
    let engine = Engine::start(&[
        "--envs",
        "6",
        "--obs",
        "5",
        "--act",
        "2",
        "--image",
        "none",
        "--nan-at-step",
        "20",
    ]);
    let mut client = inspector()
        .args(["sim", "client", "--shm", &engine.name, "--hz", "200"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join(format!("{}-{tag}.mcap", unique_name("record")));
    let record = inspector()
        .args([
            "record",
            "--shm",
            &engine.name,
            "--duration",
            "2",
            "--envs",
            "0,2,5",
            "-o",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_with_deadline(record);
    let _ = client.kill();
    let _ = client.wait();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "record failed: {stderr}");
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
    for message in mcap::MessageStream::new(&bytes).unwrap() {
        let message = message.unwrap();
        if message.channel.topic != "/lrbc/frame" {
            assert!(message.channel.topic.starts_with("/lrbc/ring/"));
            ring_entries += 1;
            continue;
        }
        let schema = message.channel.schema.as_ref().unwrap();
        assert_eq!(schema.name, "lrbc.recording.Frame");
        assert_eq!(schema.encoding, "flatbuffer");
        assert_eq!(&schema.data[..], lrbc_inspector::rpc::RECORDING_BFBS);
        assert_eq!(message.channel.message_encoding, "flatbuffer");
        let frame = recording_fb::root_as_frame(&message.data).unwrap();
        assert_eq!(frame.envs().unwrap().iter().collect::<Vec<_>>(), [0, 2, 5]);
        assert_eq!(frame.rewards().unwrap().len(), 3);
        assert_eq!(frame.dones().unwrap().len(), 3);
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
    // Lock-step: the engine's step N publishes frame_seq N.
    assert_eq!(nan_frames, [20]);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn an_independent_python_reader_counts_the_channels_and_decodes_a_frame() {
    let path = record_a_live_run("py");
    let out = wait_with_deadline(
        std::process::Command::new("python3")
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/read_recording.py"))
            .arg(&path)
            .env("PYTHONPATH", python_path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert!(
        out.status.success(),
        "read_recording.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let frames = v["counts"]["/lrbc/frame"].as_u64().unwrap();
    assert!(frames > 50, "{v}");
    assert_eq!(v["schema_encodings"]["/lrbc/frame"], "flatbuffer");
    assert_eq!(v["schema_names"]["/lrbc/frame"], "lrbc.recording.Frame");
    assert_eq!(v["schema_encodings"]["/lrbc/ring/cmd_c2s"], "flatbuffer");
    assert!(
        v["counts"]["/lrbc/ring/cmd_s2c"].as_u64().unwrap() > 0,
        "{v}"
    );
    assert_eq!(v["first_frame"]["envs"], serde_json::json!([0, 2, 5]));
    assert_eq!(v["first_frame"]["rewards"], 3);
    assert_eq!(v["first_frame"]["observations"], 15);
    assert_eq!(v["frame_seq_increasing"], true);
    assert_eq!(v["nan_frames"], serde_json::json!([20]));
    // The counts written at the end agree with the frames in the file.
    let counts = &v["metadata"]["lrbc.counts"];
    assert_eq!(counts["frames_recorded"], frames.to_string());
    assert_eq!(v["metadata"]["lrbc.geometry"]["recorded_envs"], "0,2,5");
    assert_eq!(v["metadata"]["lrbc.tool"]["name"], "lrbc-inspector");
    let _ = std::fs::remove_file(&path);
}
