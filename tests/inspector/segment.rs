//! Segment access across real processes: an independent Python writer creates segments
//! in /dev/shm; the inspector binary reads them. Linux only: Windows segments are named
//! mappings, tested in `tests/windows.rs`.

#![cfg(unix)]
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::process::Stdio;

use common::*;
use serde_json::Value;

fn dump_json(args: &[&str]) -> Value {
    let (code, out, err) = run_inspector(args);
    assert_eq!(code, 0, "dump failed: {err}");
    serde_json::from_str(&out).expect("dump --json prints one JSON object")
}

fn assert_dump_matches(layout: &str, extra: &[&str]) {
    let mut args = vec!["--layout", layout, "--env", "4"];
    args.extend_from_slice(extra);
    let w = PyWriter::start(layout, &args);
    let got = dump_json(&["dump", "--shm", &w.name, "--env", "4", "--json"]);
    let mut expected = w.expected.clone();
    expected.as_object_mut().unwrap().remove("pid");
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&got), keys(&expected), "top-level keys");
    for key in keys(&expected) {
        if key == "header" {
            // Compare field by field for a readable failure.
            for (field, value) in expected["header"].as_object().unwrap() {
                assert_eq!(
                    &got["header"][field], value,
                    "{layout}: header field {field}"
                );
            }
            assert_eq!(
                keys(&got["header"]),
                keys(&expected["header"]),
                "{layout}: header fields"
            );
        } else {
            assert_eq!(got[&key], expected[&key], "{layout}: {key}");
        }
    }
}

#[test]
fn dump_json_matches_an_independent_writer_with_the_extension_block() {
    assert_dump_matches("ext", &[]);
}

#[test]
fn dump_json_matches_an_independent_writer_with_the_seed_header_only() {
    assert_dump_matches("seed", &[]);
}

#[test]
fn dump_json_matches_an_independent_writer_of_the_luckyrobots_layout() {
    assert_dump_matches("lucky", &[]);
}

#[test]
fn dump_json_matches_a_segment_without_names_or_images() {
    assert_dump_matches("ext", &["--no-names", "--image", "", "--mode", "1"]);
}

#[test]
fn forcing_the_luckyrobots_layout_on_an_lrbc_segment_fails_validation() {
    let w = PyWriter::start("force", &["--layout", "seed"]);
    let (code, _, err) = run_inspector(&["dump", "--shm", &w.name, "--layout", "luckyrobots-ipc"]);
    assert_ne!(code, 0);
    assert_eq!(err.lines().count(), 1, "{err}");
    let (code, out, _) =
        run_inspector(&["dump", "--shm", &w.name, "--layout", "lrbc-v1", "--json"]);
    assert_eq!(code, 0);
    assert!(out.contains("\"layout\":\"lrbc-v1\""));
}

#[test]
fn every_validation_error_is_one_line_with_a_non_zero_exit() {
    let cases = [
        ("bad_magic", "bad magic 0x12345678"),
        ("bad_version", "unsupported version 7"),
        ("small", "smaller than the 4096-byte header"),
        ("region_outside", "region rewards at offset"),
        ("overlap", "overlaps region act"),
        ("overflow", "size overflows"),
        ("names_unterminated", "names are not terminated"),
        ("names_not_utf8", "is not UTF-8"),
        ("ring_not_pow2", "cmd_ring_size is 1000, not a power of two"),
    ];
    for (corruption, message) in cases {
        let w = PyWriter::start(corruption, &["--corrupt", corruption]);
        let (code, out, err) = run_inspector(&["dump", "--shm", &w.name]);
        assert_eq!(code, 1, "{corruption}: exit code");
        assert!(out.is_empty(), "{corruption}: printed {out}");
        assert_eq!(err.lines().count(), 1, "{corruption}: {err}");
        assert!(err.starts_with("error: "), "{corruption}: {err}");
        assert!(err.contains(message), "{corruption}: {err}");
        // --verbose adds the detail below the line.
        let (_, _, verbose) = run_inspector(&["dump", "--shm", &w.name, "--verbose"]);
        assert!(verbose.lines().count() > 1, "{corruption}: {verbose}");
    }
}

#[test]
fn a_missing_name_lists_the_segments_that_exist() {
    let w = PyWriter::start("exists", &[]);
    let missing = unique_name("missing");
    let (code, _, err) = run_inspector(&["dump", "--shm", &missing]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("no segment named \"{missing}\"")),
        "{err}"
    );
    assert!(err.contains(&w.name), "{err}");
}

#[test]
fn bad_targets_and_arguments_are_clear_errors() {
    let w = PyWriter::start("args", &[]);
    let (code, _, err) = run_inspector(&["dump", "--shm", "../etc/passwd"]);
    assert_eq!(code, 1);
    assert!(err.contains("must not contain '/'"), "{err}");
    let (code, _, err) = run_inspector(&["dump", "--shm", &w.name, "--env", "6"]);
    assert_eq!(code, 1);
    assert!(err.contains("--env 6 is out of range"), "{err}");
    let (code, _, err) = run_inspector(&["dump", "--pid", &dead_pid().to_string()]);
    assert_eq!(code, 1);
    assert!(err.contains("no segment found for pid"), "{err}");
    let (code, _, _) = run_inspector(&["dump", "--shm", &w.name, "--pid", "1"]);
    assert_eq!(code, 2, "conflicting targets are a usage error");
    let (code, _, err) = run_inspector(&["watch", "--shm", &w.name, "--interval", "-1"]);
    assert_eq!(code, 2);
    assert!(err.contains("--interval"), "{err}");
    let (code, _, err) = run_inspector(&["dump", "--path", "/nonexistent/file"]);
    assert_eq!(code, 1);
    assert!(err.contains("not found"), "{err}");
}

#[test]
fn a_symlink_in_dev_shm_is_refused() {
    let w = PyWriter::start("symlink-target", &[]);
    let link = unique_name("symlink");
    let link_path = std::path::PathBuf::from("/dev/shm").join(&link);
    std::os::unix::fs::symlink(w.path(), &link_path).unwrap();
    let (code, _, err) = run_inspector(&["dump", "--shm", &link]);
    let _ = std::fs::remove_file(&link_path);
    assert_eq!(code, 1);
    assert!(err.contains("symbolic link"), "{err}");
}

#[test]
fn permission_denied_is_reported_as_such() {
    let w = PyWriter::start("perm", &[]);
    let is_root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let output = if is_root {
        // Root reads anything: drop to nobody for this one run.
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_lrbc-inspector"))
            .args(["dump", "--shm", &w.name])
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("setpriv runs");
        wait_with_deadline(out)
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(w.path(), std::fs::Permissions::from_mode(0o000)).unwrap();
        wait_with_deadline(
            inspector()
                .args(["dump", "--shm", &w.name])
                .stderr(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        )
    };
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("permission denied"), "{err}");
}

#[test]
fn attach_by_pid_finds_the_engine_segment() {
    let w = PyWriter::start("bypid", &[]);
    let got = dump_json(&["dump", "--pid", &w.pid().to_string(), "--json"]);
    assert_eq!(got["header"]["server_pid"], w.expected["pid"]);
    assert_eq!(got["size"], w.expected["size"]);
}

#[test]
fn attach_by_pid_falls_back_to_the_processes_mappings() {
    // server_pid names a dead process; the writer still maps the file.
    let dead = dead_pid().to_string();
    let w = PyWriter::start("bymaps", &["--server-pid", &dead]);
    let got = dump_json(&["dump", "--pid", &w.pid().to_string(), "--json"]);
    assert_eq!(got["size"], w.expected["size"]);
}

#[test]
fn lucky_shm_name_is_the_default_target() {
    let w = PyWriter::start("envname", &[]);
    let out = wait_with_deadline(
        inspector()
            .args(["dump", "--json"])
            .env("LUCKY_SHM_NAME", &w.name)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert_eq!(out.status.code(), Some(0));
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["size"], w.expected["size"]);
}

#[test]
fn list_shows_lrbc_segments_and_skips_other_files() {
    let ext = PyWriter::start("list-ext", &[]);
    let lucky = PyWriter::start("list-lucky", &["--layout", "lucky"]);
    let bad = PyWriter::start("list-bad", &["--corrupt", "overlap"]);
    let junk = std::path::PathBuf::from("/dev/shm").join(unique_name("junk"));
    std::fs::write(&junk, b"not a segment at all").unwrap();
    let (code, out, err) = run_inspector(&["list", "--json"]);
    let _ = std::fs::remove_file(&junk);
    assert_eq!(code, 0, "{err}");
    let list: Vec<Value> = serde_json::from_str(&out).unwrap();
    let find = |name: &str| list.iter().find(|e| e["name"] == name).cloned();
    let e = find(&ext.name).expect("ext segment listed");
    assert_eq!(e["layout"], "lrbc-v1-ext");
    assert_eq!(e["num_envs"], 6);
    assert_eq!(e["obs_size"], 5);
    assert_eq!(e["act_size"], 3);
    assert_eq!(e["server"]["pid"], ext.expected["pid"]);
    assert_eq!(e["server"]["alive"], true);
    assert_eq!(e["server"]["name"], "python3");
    assert_eq!(e["client"]["pid"], 0);
    assert_eq!(e["frame_seq"], 41);
    assert!(e["secs_since_frame"].as_f64().unwrap() >= 0.0);
    let l = find(&lucky.name).expect("lucky segment listed");
    assert_eq!(l["layout"], "luckyrobots-ipc");
    assert_eq!(l["secs_since_frame"], Value::Null);
    let b = find(&bad.name).expect("invalid segment listed with its reason");
    assert!(b["error"].as_str().unwrap().contains("overlaps"));
    assert!(find(junk.file_name().unwrap().to_str().unwrap()).is_none());
    // The table form names them too.
    let (_, table, _) = run_inspector(&["list"]);
    assert!(table.contains(&ext.name) && table.contains(&lucky.name));
}

/// Reads `watch --json` lines until one satisfies `pred`.
fn wait_for_report(
    rx: &crossbeam_channel::Receiver<String>,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    loop {
        let line = next_line(rx, what);
        let report: Value = serde_json::from_str(&line).expect("watch --json prints JSON lines");
        if pred(&report) {
            return report;
        }
    }
}

#[test]
fn watch_survives_shrink_unlink_and_replace_and_reattaches() {
    let mut w = PyWriter::start("watch", &[]);
    let (mut watch, rx) =
        inspector_lines(&["watch", "--shm", &w.name, "--interval", "0.05", "--json"]);
    let r = wait_for_report(&rx, "attached", |r| r["state"] == "attached");
    assert_eq!(r["frame_seq"], 41);
    for _ in 0..5 {
        assert_eq!(w.send("tick"), "ok");
    }
    let before = wait_for_report(&rx, "frame_seq 46 followed", |r| {
        r["frame_seq"] == 46 && r["lag"] == 0 && r["frames_seen"] == 5
    });

    // Shrink to the header page, then to nothing: reads past the end must not kill it.
    assert_eq!(w.send("shrink 4096"), "ok");
    let r = wait_for_report(&rx, "truncated", |r| r["state"] == "truncated");
    assert!(r["note"].as_str().unwrap().contains("to 4096 bytes"));
    // The engine goes on publishing frame_seq in the header page: those frames are
    // counted unreadable (their data reads as zeros), never sampled.
    for _ in 0..5 {
        assert_eq!(w.send("tick"), "ok");
    }
    let r = wait_for_report(&rx, "the frames of the truncated segment", |r| {
        r["frames_seen"] == 10
    });
    assert_eq!(r["frames_sampled"], before["frames_sampled"], "{r}");
    let (unreadable, missed) = (
        r["frames_unreadable"].as_u64().unwrap(),
        r["frames_missed"].as_u64().unwrap() - before["frames_missed"].as_u64().unwrap(),
    );
    assert!(unreadable >= 1 && unreadable + missed == 5, "{r}");
    assert_eq!(w.send("shrink 0"), "ok");
    wait_for_report(&rx, "truncated to 0", |r| {
        r["state"] == "truncated" && r["note"].as_str().unwrap().contains("to 0 bytes")
    });

    // A new segment under the same name: re-attached, and the new geometry is followed.
    w.replace(9);
    let r = wait_for_report(&rx, "replaced", |r| r["state"] == "replaced");
    assert!(r["note"].as_str().unwrap().contains("re-attached"), "{r}");
    assert!(r["note"].as_str().unwrap().contains("9 envs"), "{r}");
    let r = wait_for_report(&rx, "attached again", |r| r["state"] == "attached");
    assert_eq!(r["frame_seq"], 41);
    assert_eq!(w.send("tick"), "ok");
    wait_for_report(&rx, "new segment ticks", |r| r["frame_seq"] == 42);

    // Unlinked, nothing in its place.
    assert_eq!(w.send("unlink"), "ok");
    wait_for_report(&rx, "unlinked", |r| r["state"] == "unlinked");

    // Still running; Ctrl-C ends it cleanly.
    assert!(watch.try_wait().unwrap().is_none(), "watch died");
    interrupt(watch.id());
    assert_clean_exit(&wait_with_deadline(watch));
}

#[test]
fn watch_reports_a_dead_engine() {
    let dead = dead_pid().to_string();
    let w = PyWriter::start("gone", &["--server-pid", &dead]);
    let (code, out, err) = run_inspector(&[
        "watch",
        "--shm",
        &w.name,
        "--interval",
        "0.05",
        "--count",
        "2",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "--count 2 prints two lines");
    assert!(lines.iter().all(|r| r["state"] == "engine_gone"), "{out}");
}

#[test]
fn watch_text_lines_show_state_counters_rates_and_lag() {
    let w = PyWriter::start("watch-text", &["--layout", "lucky"]);
    let (code, out, err) = run_inspector(&[
        "watch",
        "--shm",
        &w.name,
        "--interval",
        "0.05",
        "--count",
        "1",
    ]);
    assert_eq!(code, 0, "{err}");
    let line = out.lines().next().unwrap();
    for part in [
        "attached",
        "frame_seq=41",
        "action_seq=41",
        "frame_hz=0.0",
        "action_hz=0.0",
        "lag=0",
    ] {
        assert!(line.contains(part), "{part} missing from {line}");
    }
}

#[test]
fn watch_json_carries_the_samplers_cumulative_figures() {
    let mut w = PyWriter::start("sampler", &[]);
    let (watch, rx) = inspector_lines(&["watch", "--shm", &w.name, "--interval", "0.05", "--json"]);
    let first = wait_for_report(&rx, "a first line", |_| true);
    for key in [
        "frames_seen",
        "frames_sampled",
        "frames_missed",
        "frames_missed_late",
        "frames_torn",
    ] {
        assert!(first[key].is_u64(), "{key} missing: {first}");
    }
    for _ in 0..5 {
        assert_eq!(w.send("tick"), "ok");
    }
    let r = wait_for_report(&rx, "five frames seen", |r| r["frames_seen"] == 5);
    let accounted = r["frames_sampled"].as_u64().unwrap()
        + r["frames_missed"].as_u64().unwrap()
        + r["frames_torn"].as_u64().unwrap();
    assert_eq!(accounted, 5, "{r}");
    assert!(r["frames_sampled"].as_u64().unwrap() >= 1);
    interrupt(watch.id());
    assert_eq!(wait_with_deadline(watch).status.code(), Some(0));
}

#[test]
fn the_window_without_a_display_is_one_clear_line() {
    let child = inspector()
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("WAYLAND_SOCKET")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("inspector runs");
    let out = wait_with_deadline(child);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: no display to open the window on"),
        "{err}"
    );
}
