//! Bad command lines of every class (durations, rates, non-regular files, pid 0,
//! counts, names, sizes, unknown values): each ends within seconds with exit code 1 or
//! 2 and exactly one line on stderr, never a panic or a hang.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

/// What one bad command line did.
struct Outcome {
    code: Option<i32>,
    stderr: String,
    stdout: String,
    hung: bool,
}

/// Runs the inspector with a short deadline; a hang is killed and reported, not waited
/// out.
fn run(args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let mut cmd = inspector();
    cmd.args(args)
        .env_remove("LUCKY_SHM_NAME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("inspector runs");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut hung = false;
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        if Instant::now() >= deadline {
            hung = true;
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("output");
    Outcome {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        hung,
    }
}

/// Every case: exit 1 or 2, one line on stderr starting "error:", no panic.
fn check_all(cases: &[Vec<String>]) {
    let mut failures = Vec::new();
    for args in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&a, &[]);
        let lines: Vec<&str> = o.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        let ok = !o.hung
            && matches!(o.code, Some(1 | 2))
            && lines.len() == 1
            && lines[0].starts_with("error: ")
            && !o.stderr.contains("panicked");
        if !ok {
            failures.push(format!(
                "{a:?}: hung={} code={:?} stderr={:?} stdout={:?}",
                o.hung,
                o.code,
                o.stderr,
                o.stdout.chars().take(200).collect::<String>()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} bad command lines misbehaved:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

fn case(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_string()).collect()
}

#[test]
fn bad_durations_rates_counts_and_pids_are_one_line_errors() {
    // A live segment, so that a value that slipped through would start real work.
    let w = PyWriter::start("bad-args", &["--layout", "ext"]);
    let shm = w.name.as_str();
    let mut cases = Vec::new();
    for v in [
        "1e20", "1e308", "1e400", "inf", "-inf", "NaN", "-1", "0", "0.001", "abc", "", "5 days",
    ] {
        cases.push(case(&["watch", "--shm", shm, "--interval", v]));
    }
    for v in ["1e308", "1e20", "inf", "NaN", "-1", "0", "x"] {
        cases.push(case(&[
            "traffic",
            "--shm",
            shm,
            "--follow",
            "--duration",
            v,
        ]));
    }
    for v in ["1e308", "1e20", "inf", "NaN", "-1", "0"] {
        cases.push(case(&[
            "control",
            "--shm",
            shm,
            "--service",
            "camera",
            "--status",
            "--timeout",
            v,
        ]));
    }
    // The benchmarks are not the product's: `lrbc-bench` refuses its own bad values.
    cases.push(case(&["bench", "ring", "--secs", "1"]));
    for v in ["1e-300", "0", "-5", "inf", "NaN", "1e300"] {
        cases.push(case(&["sim", "engine", "--name", "unused", "--hz", v]));
        cases.push(case(&["sim", "client", "--shm", shm, "--hz", v]));
        cases.push(case(&["demo", "--hz", v]));
    }
    cases.push(case(&[
        "sim",
        "engine",
        "--name",
        "unused",
        "--camera-hz",
        "0",
    ]));
    for v in ["0", "-1", "abc", "18446744073709551616"] {
        cases.push(case(&["traffic", "--shm", shm, "--follow", "--count", v]));
        cases.push(case(&["traffic", "--shm", shm, "--count", v]));
        cases.push(case(&["watch", "--shm", shm, "--count", v]));
    }
    cases.push(case(&["sim", "client", "--shm", shm, "--steps", "0"]));
    for v in ["0", "-1", "4294967296", "abc", ""] {
        cases.push(case(&["dump", "--pid", v]));
        cases.push(case(&["watch", "--pid", v]));
    }
    cases.push(case(&["traffic", "--pid", "0"]));
    cases.push(case(&[
        "control",
        "--pid",
        "0",
        "--service",
        "camera",
        "--status",
    ]));
    let dead = dead_pid().to_string();
    cases.push(case(&["dump", "--pid", &dead]));
    // The detector's options and `events`.
    for v in [
        &["--fail-on", "nan"][..],
        &["--fail-on", ","],
        &["--bound", "obs"],
        &["--bound", "obs=2:1"],
        &["--bound", "speed=-1:1"],
        &["--bound", "reward[0]=-1:1"],
        &["--bound", "obs=NaN:1"],
        &["--saturation", "1"],
        &["--saturation-frames", "5"],
        &["--saturation=-1:1", "--saturation-frames", "0"],
        &["--done-burst", "0"],
        &["--done-burst", "1.5"],
        &["--done-burst", "NaN"],
        &["--stall", "1"],
        &["--stall", "inf"],
        &["--stall-min", "-1"],
        &["--stall-min", "4000"],
        &["--secs", "0"],
        &["--count", "0"],
        &["--find-again"],
        // A bound naming an observation the segment does not have.
        &["--bound", "obs.no_such_name=-1:1"],
        &["--bound", "act[99]=-1:1"],
    ] {
        let mut c = case(&["events", "--shm", shm]);
        c.extend(v.iter().map(|s| (*s).to_string()));
        cases.push(c);
    }
    cases.push(case(&["events", "--shm", shm, "/no/such/file.mcap"]));
    cases.push(case(&["events", "/no/such/file.mcap"]));
    cases.push(case(&["events", "--shm", "no_such_segment_anywhere"]));
    cases.push(case(&["watch", "--shm", shm, "--bound", "obs.none=0:1"]));
    cases.push(case(&[
        "record",
        "--shm",
        shm,
        "-o",
        "/tmp/x.mcap",
        "--stall",
        "0",
    ]));
    cases.push(case(&[
        "sim", "engine", "--name", "unused", "--plant", "nan",
    ]));
    cases.push(case(&["demo", "--plant", "stall@3:side=trainer"]));
    cases.push(case(&["demo", "--no-faults", "--plant", "nan@3"]));
    check_all(&cases);
}

#[test]
#[cfg(unix)]
fn files_that_are_not_segments_are_refused_without_blocking() {
    let dir = std::env::temp_dir().join(unique_name("bad-files"));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let sock = dir.join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let empty = dir.join("empty");
    std::fs::write(&empty, b"").unwrap();
    let short = dir.join("short");
    std::fs::write(&short, b"CBRL").unwrap();
    let text = dir.join("text");
    std::fs::write(&text, "not a segment at all, just some text\n".repeat(200)).unwrap();
    let paths = [
        fifo.display().to_string(),
        sock.display().to_string(),
        dir.display().to_string(),
        "/dev/null".into(),
        "/dev/zero".into(),
        empty.display().to_string(),
        short.display().to_string(),
        text.display().to_string(),
        dir.join("missing").display().to_string(),
    ];
    let mut cases = Vec::new();
    for p in &paths {
        cases.push(case(&["dump", "--path", p]));
        cases.push(case(&["watch", "--path", p, "--count", "1"]));
        cases.push(case(&["traffic", "--path", p]));
        cases.push(case(&[
            "control",
            "--path",
            p,
            "--service",
            "camera",
            "--status",
        ]));
    }
    check_all(&cases);
    // A FIFO as a name under /dev/shm is refused the same way (and `list` skips it).
    let name = unique_name("fifo");
    let shm_fifo = std::path::Path::new("/dev/shm").join(&name);
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&shm_fifo)
            .status()
            .unwrap()
            .success()
    );
    check_all(&[case(&["dump", "--shm", &name])]);
    let listed = run(&["list", "--json"], &[]);
    let _ = std::fs::remove_file(&shm_fifo);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!listed.hung && listed.code == Some(0), "{}", listed.stderr);
}

#[test]
fn bad_names_sizes_and_values_are_one_line_errors() {
    let w = PyWriter::start("bad-values", &["--layout", "ext"]);
    let shm = w.name.as_str();
    let long = "n".repeat(300);
    let mut cases = Vec::new();
    for name in [
        "",
        "a/b",
        "..",
        ".",
        "/dev/shm/x",
        long.as_str(),
        "no-such-segment-here",
    ] {
        cases.push(case(&["dump", "--shm", name]));
        cases.push(case(&["sim", "engine", "--name", name, "--ring-size", "3"]));
    }
    // Addresses that are not a server's, and a server with a segment.
    for url in [
        "http://node:1",
        "wss://node",
        "node",
        "ws://node:99999",
        "ws://:1",
        "",
    ] {
        cases.push(case(&["--connect", url]));
    }
    cases.push(case(&["--connect", "ws://127.0.0.1:1", "--shm", shm]));
    cases.push(case(&["--tls-ca", "ca.pem"]));
    cases.push(case(&[
        "--connect",
        "wss://127.0.0.1:1",
        "--tls-ca",
        "/no/such.pem",
    ]));
    for name in ["a/b", "..", long.as_str()] {
        cases.push(case(&["sim", "engine", "--name", name]));
        cases.push(case(&["sim", "client", "--shm", name, "--steps", "1"]));
    }
    for sizes in [
        ["--envs", "0", "--obs", "1", "--act", "1"],
        ["--envs", "4294967295", "--obs", "4294967295", "--act", "1"],
        ["--envs", "1", "--obs", "0", "--act", "0"],
        ["--envs", "-1", "--obs", "1", "--act", "1"],
        ["--envs", "1", "--obs", "1", "--act", "4294967296"],
    ] {
        let mut c = case(&["sim", "engine", "--name", "unused-sizes"]);
        c.extend(sizes.iter().map(|s| (*s).to_string()));
        cases.push(c);
    }
    for ring in ["0", "3", "63", "4294967295", "-8", "1e6"] {
        cases.push(case(&[
            "sim",
            "engine",
            "--name",
            "unused-ring",
            "--ring-size",
            ring,
        ]));
        if ring == "0" {
            // --ctl-ring-size 0 is valid: an engine without control rings.
            continue;
        }
        cases.push(case(&[
            "sim",
            "engine",
            "--name",
            "unused-ring",
            "--ctl-ring-size",
            ring,
        ]));
    }
    for image in [
        "0x0x0",
        "1x1x2",
        "100000x100000x4",
        "abc",
        "64x64",
        "64x64x3x1",
        "-1x2x3",
    ] {
        cases.push(case(&[
            "sim",
            "engine",
            "--name",
            "unused-image",
            "--image",
            image,
        ]));
    }
    for env in ["4294967295", "-1", "99999", "x"] {
        cases.push(case(&["dump", "--shm", shm, "--env", env]));
    }
    for v in ["-1", "101", "NaN", "inf"] {
        cases.push(case(&["watch", "--shm", shm, "--busy-budget", v]));
        cases.push(case(&[
            "record",
            "--shm",
            shm,
            "-o",
            "unused.mcap",
            "--busy-budget",
            v,
        ]));
    }
    // The window's settings file: in a folder that does not exist, or a folder.
    for file in ["/no/such/folder/app.ron", "/tmp", ""] {
        cases.push(case(&["--shm", shm, "--settings", file]));
    }
    cases.push(case(&["dump", "--shm", shm, "--layout", "bogus"]));
    cases.push(case(&[
        "control",
        "--shm",
        shm,
        "--service",
        "warp-drive",
        "--status",
    ]));
    cases.push(case(&["control", "--shm", shm, "--service", "camera"]));
    cases.push(case(&[
        "control",
        "--shm",
        shm,
        "--service",
        "camera",
        "--enable",
        "--disable",
    ]));
    cases.push(case(&["traffic", "--shm", shm, "--ring", "sideways"]));
    cases.push(case(&["dump", "--shm", shm, "--pid", "1"]));
    cases.push(case(&["dump"]));
    cases.push(case(&["no-such-command"]));
    cases.push(case(&["dump", "--shm", shm, "--no-such-flag"]));
    cases.push(case(&[
        "sim",
        "engine",
        "--name",
        "unused",
        "--layout",
        "luckyrobots-ipc",
        "--bare",
    ]));
    check_all(&cases);
    // A bad name from the environment is refused the same way.
    let o = run(&["dump"], &[("LUCKY_SHM_NAME", "../etc/passwd")]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
}
