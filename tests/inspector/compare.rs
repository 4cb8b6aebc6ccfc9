//! `compare` of recordings of real runs (`sim engine`, `record --all-envs` and a `sim
//! client` with a deterministic policy, each a process of its own): two runs of one seed
//! and one policy are identical; values planted in a third run are found at their env,
//! frame and value, with their origin (an action the engine overwrote after reading the
//! trainer's: the policy's; an observation: the simulator's; a reward: the reward's).

#![cfg(target_os = "linux")]

use crate::common;

use std::path::PathBuf;

use common::events::start_record;
use common::*;
use serde_json::{Value, json};

/// Records a run of 300 frames of the sine policy on a cams64 engine with `plants`, at
/// 50 Hz: the trainer sends its next actions 20 ms after a frame, so that the recorder
/// (however late a busy machine makes it) catches each frame's own actions, planted
/// ones included.
fn recorded_run(tag: &str, plants: &[&str]) -> PathBuf {
    recorded_run_of(tag, plants, &["--steps", "300", "--policy", "sine"])
}

/// Records a run on a cams64 engine with `plants` of a client at 50 Hz given `client`.
fn recorded_run_of(tag: &str, plants: &[&str], client: &[&str]) -> PathBuf {
    let mut args = vec!["--preset", "cams64"];
    for p in plants {
        args.extend(["--plant", p]);
    }
    let engine = SimEngine::start(tag, &args);
    let file = temp_file(tag, "mcap");
    let record = start_record(&engine.name, &[], &file);
    let mut argv = vec![
        "sim",
        "client",
        "--shm",
        &engine.name,
        "--hz",
        "50",
        "--no-commands",
    ];
    argv.extend(client);
    let (code, _, stderr) = run_inspector(&argv);
    assert_eq!(code, 0, "sim client: {stderr}");
    // Every run here is of 300 steps (a replay of one too).
    record.stop_once_recorded(300);
    drop(engine);
    file
}

#[test]
fn runs_of_one_seed_are_identical_and_planted_values_diverge_where_and_as_planted() {
    let a = recorded_run("compare-a", &[]);
    let b = recorded_run("compare-b", &[]);
    let c = recorded_run(
        "compare-c",
        &[
            "nan@150:env=3,channel=obs,index=1",
            "nan@220:env=7,channel=act,index=0",
            "inf@260:env=9,channel=reward",
        ],
    );
    let (a_, b_, c_) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
    );

    let table = temp_file("compare-episodes", "csv");
    let (code, stdout, stderr) = run_inspector(&[
        "compare",
        a_,
        b_,
        "--fail-on",
        "diverged",
        "--episodes",
        table.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("300 frames compared (0 only in A, 0 only in B); envs: 64 identical, 0 diverged, 0 not compared"),
        "{stderr}"
    );
    // Identical runs: the same episodes, B's mean return not distinguishable from A's.
    assert!(
        stderr.contains("B's mean return is not distinguishable from A's"),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&table).unwrap();
    let _ = std::fs::remove_file(&table);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 65, "a header and a row per env: {text}");
    assert!(
        rows[0].starts_with("env,finished_a,finished_b,"),
        "{}",
        rows[0]
    );
    for row in &rows[1..] {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells[1], cells[2], "the same episodes finished: {row}");
        assert_eq!(cells[5], "0", "return difference: {row}");
    }

    let (code, stdout, stderr) =
        run_inspector(&["compare", a_, c_, "--json", "--fail-on", "diverged"]);
    assert_eq!(code, 3, "--fail-on diverged: {stderr}");
    let objects: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (summary, divergences) = objects.split_last().unwrap();
    let fields = [
        "env",
        "frame",
        "frame_seq_b",
        "origin",
        "channel",
        "index",
        "b",
    ];
    let got: Vec<Value> = divergences
        .iter()
        .map(|d| Value::Array(fields.iter().map(|f| d[*f].clone()).collect()))
        .collect();
    assert_eq!(
        got,
        vec![
            json!([3, 149, 150, "simulator", "observation", 1, "NaN"]),
            json!([7, 219, 220, "policy", "action", 0, "NaN"]),
            json!([9, 259, 260, "reward", "reward", null, "inf"]),
        ]
    );
    let s = &summary["summary"];
    assert_eq!(s["envs_diverged"], 3, "{s}");
    assert_eq!(s["envs_identical"], 61, "{s}");
    assert_eq!(s["earliest"]["frame"], 149, "{s}");
    assert_eq!(s["by_origin"]["policy"], 1, "{s}");
    // Each planted value ends its env's episode as nonfinite, in C alone, and is an event.
    let e = &s["episodes"];
    assert_eq!(e["a"]["endings"]["nonfinite"], 0, "{e}");
    assert_eq!(e["b"]["endings"]["nonfinite"], 3, "{e}");
    assert_eq!(
        s["events"]["by_kind"]["nonfinite"],
        json!({"a": 0, "b": 3}),
        "{s}"
    );

    for f in [a, b, c] {
        let _ = std::fs::remove_file(f);
    }
}

/// The determinism workflow: a run of a random policy recorded, then its actions replayed
/// on a new engine of the same seed while recording, and the two compared.
#[test]
fn a_replayed_run_is_identical_to_its_recording_and_a_planted_drift_is_found() {
    let a = recorded_run_of("replay-a", &[], &["--steps", "300", "--policy", "random"]);
    let a_ = a.to_str().unwrap();
    let b = recorded_run_of("replay-b", &[], &["--replay", a_]);
    let (code, stdout, stderr) =
        run_inspector(&["compare", a_, b.to_str().unwrap(), "--fail-on", "diverged"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "300 frames compared (0 only in A, 0 only in B); envs: 64 identical, 0 diverged"
        ),
        "{stderr}"
    );

    let c = recorded_run_of(
        "replay-c",
        &["drift@150:env=4,index=2,delta=0.01"],
        &["--replay", a_],
    );
    let (code, stdout, stderr) = run_inspector(&[
        "compare",
        a_,
        c.to_str().unwrap(),
        "--json",
        "--fail-on",
        "diverged",
    ]);
    assert_eq!(code, 3, "{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (summary, divergences) = lines.split_last().unwrap();
    assert_eq!(divergences.len(), 1, "{stdout}");
    let d = &divergences[0];
    let fields = ["env", "frame", "frame_seq_b", "origin", "channel", "index"];
    let got: Vec<Value> = fields.iter().map(|f| d[*f].clone()).collect();
    assert_eq!(
        got,
        [
            json!(4),
            json!(149),
            json!(150),
            json!("simulator"),
            json!("observation"),
            json!(2)
        ]
    );
    let (va, vb): (f32, f32) = (
        d["a"].as_str().unwrap().parse().unwrap(),
        d["b"].as_str().unwrap().parse().unwrap(),
    );
    assert!((vb - va - 0.01).abs() < 1e-4, "{d}");
    assert_eq!(summary["summary"]["envs_diverged"], 1);

    // A recording of other sizes than the segment's, refused in one line before a step.
    let small = SimEngine::start("replay-small", &["--preset", "cams16"]);
    let (code, _, stderr) = run_inspector(&[
        "sim",
        "client",
        "--shm",
        &small.name,
        "--replay",
        a_,
        "--no-commands",
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stderr.trim(),
        "error: --replay: the recording has 64 envs of 8 actions; the segment 16 envs of 8",
    );
    for f in [a, b, c] {
        let _ = std::fs::remove_file(f);
    }
}

/// `compare A --shm NAME` started in the background: its first line said, the rest kept.
fn start_live_compare(args: &[&str]) -> (Guarded, crossbeam_channel::Receiver<String>) {
    let mut child = inspector()
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("compare runs");
    let stderr = line_channel(child.stderr.take().expect("stderr"));
    let guarded = Guarded::new(child);
    let first = next_line(&stderr, "compare's first line");
    assert!(
        first.contains("each env's first divergence as the run reaches it"),
        "{first}"
    );
    (guarded, stderr)
}

/// Each diverged env's line as (env, frame, frame_seq_b, origin, channel, index), and
/// the summary.
fn divergences_and_summary(stdout: &[u8]) -> (Vec<Value>, Value) {
    let mut lines: Vec<Value> = String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = lines.pop().expect("a summary");
    let fields = ["env", "frame", "frame_seq_b", "origin", "channel", "index"];
    let got = lines
        .iter()
        .map(|d| Value::Array(fields.iter().map(|f| d[*f].clone()).collect()))
        .collect();
    (got, summary["summary"].clone())
}

#[test]
fn a_live_run_is_compared_with_a_recording_as_it_runs_and_fail_on_stops_at_the_first() {
    let a = recorded_run_of("live-a", &[], &["--steps", "300", "--policy", "random"]);
    let a_ = a.to_str().unwrap();
    let plants = [
        "--preset",
        "cams64",
        "--plant",
        "drift@120:env=4,index=2,delta=0.01",
        "--plant",
        "nan@200:env=9,channel=act,index=1",
    ];
    let replay = |name: &str| {
        let (code, _, stderr) = run_inspector(&[
            "sim",
            "client",
            "--shm",
            name,
            "--replay",
            a_,
            "--hz",
            "50",
            "--no-commands",
        ]);
        assert_eq!(code, 0, "sim client: {stderr}");
    };

    // A new engine with the plants, compared live while A's actions are replayed.
    let live = |tag: &str, extra: &[&str]| {
        let engine = SimEngine::start(tag, &plants);
        let mut args = vec![
            "compare",
            a_,
            "--shm",
            &engine.name,
            "--json",
            "--busy-budget",
            "0",
        ];
        args.extend(extra);
        let (compare, _) = start_live_compare(&args);
        replay(&engine.name);
        compare.finish()
    };
    // It ends by itself at the recording's last frame.
    let out = live("live-b", &[]);
    assert_eq!(out.status.code(), Some(0));
    let (found, summary) = divergences_and_summary(&out.stdout);
    assert_eq!(
        found,
        vec![
            json!([4, 119, 120, "simulator", "observation", 2]),
            json!([9, 199, 200, "policy", "action", 1]),
        ]
    );
    assert_eq!(summary["frames_compared"], 300, "{summary}");
    assert_eq!(summary["envs_diverged"], 2, "{summary}");
    assert_eq!(
        summary["episodes"],
        Value::Null,
        "a live run's are not whole"
    );

    let out = live("live-c", &["--fail-on", "diverged"]);
    assert_eq!(out.status.code(), Some(3));
    let (found, summary) = divergences_and_summary(&out.stdout);
    assert_eq!(
        found,
        vec![json!([4, 119, 120, "simulator", "observation", 2])]
    );
    assert_eq!(
        summary["frames_compared"], 120,
        "stopped at the first: {summary}"
    );
    let _ = std::fs::remove_file(a);
}

#[test]
fn bad_arguments_and_missing_files_are_one_line_errors() {
    let (code, _, stderr) = run_inspector(&["compare", "a.mcap", "b.mcap", "--tolerance", "-1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not a tolerance"), "{stderr}");
    let missing = temp_file("compare-missing", "mcap");
    let (code, _, stderr) = run_inspector(&[
        "compare",
        missing.to_str().unwrap(),
        missing.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: A: "), "{stderr}");
    let m = missing.to_str().unwrap();
    for (args, code_wanted, says) in [
        (vec!["compare", m], 2, "compare needs B.mcap, or a live run"),
        (
            vec!["compare", m, m, "--shm", "x"],
            2,
            "cannot be used with",
        ),
        (
            vec!["compare", m, "--shm", "x", "--episodes", "t.csv"],
            2,
            "--episodes compares two recordings",
        ),
        (
            vec!["compare", m, "--shm", "no-such-segment"],
            1,
            "error: A: ",
        ),
    ] {
        let (code, _, stderr) = run_inspector(&args);
        assert_eq!(code, code_wanted, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
