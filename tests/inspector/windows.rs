//! Windows across processes, under Wine in CI (`.ci/windows`): named mappings created by
//! another Windows process (not ours) and by the simulated engine, read by the
//! inspector by name and by PID; the control channel; an engine that dies.

#![cfg(windows)]
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;
use lrbc::layout::Names;
use lrbc::layout::plan::{Plan, PlanLayout, PlanSpec};
use serde_json::Value;

/// Where the Windows checks keep what they share with the Linux side of `.ci/windows`.
fn shared_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/wine");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `tests/windows/lrbc_writer.c`, built by `.ci/windows`.
fn writer_exe() -> PathBuf {
    let exe = shared_dir().join("lrbc_writer.exe");
    assert!(
        exe.exists(),
        "{} is missing: .ci/windows builds it from tests/windows/lrbc_writer.c",
        exe.display()
    );
    exe
}

fn json_of(args: &[&str]) -> Value {
    let (code, out, err) = run_inspector(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// Runs `args` until it succeeds (a segment being created), within the deadline.
fn json_when_ready(args: &[&str]) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (code, out, err) = run_inspector(args);
        if code == 0 {
            return serde_json::from_str(&out).unwrap();
        }
        assert!(Instant::now() < deadline, "{args:?} kept failing: {err}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A segment's bytes, as an engine with a control ring lays them out.
fn segment_bytes() -> Vec<u8> {
    let spec = PlanSpec {
        layout: PlanLayout::Lrbc { ext: true },
        num_envs: 3,
        obs_size: 5,
        act_size: 2,
        image: Some((8, 4, 3)),
        cmd_ring_size: 4096,
        ctl_ring_size: Some(4096),
        names: Names::default(),
        mode: 0,
        server_pid: 0,
        max_size_bytes: 1 << 30,
    };
    let plan = Plan::new(&spec).unwrap();
    plan.initial_bytes(&spec)
}

struct Writer {
    child: Child,
    name: String,
    pid: u32,
}

impl Writer {
    fn start(bytes_file: &std::path::Path) -> Self {
        let mut child = std::process::Command::new(writer_exe())
            .arg(bytes_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = line_channel(child.stdout.take().unwrap());
        let line = next_line(&lines, "the writer's name and pid");
        let (name, pid) = line.split_once(' ').unwrap();
        Self {
            name: name.to_string(),
            pid: pid.trim().parse().unwrap(),
            child,
        }
    }

    /// Closes its standard input: it unmaps, closes its handle and exits.
    fn finish(mut self) {
        drop(self.child.stdin.take());
        let out = wait_with_deadline(self.child);
        assert!(out.status.success());
    }
}

#[test]
fn a_mapping_made_by_another_windows_process_is_read_by_name_and_by_pid() {
    let bytes = segment_bytes();
    let file = shared_dir().join("same-bytes.bin");
    std::fs::write(&file, &bytes).unwrap();
    let writer = Writer::start(&file);
    assert_eq!(writer.name, format!("LuckyEngine_{}", writer.pid));

    let by_name = json_of(&["dump", "--shm", &writer.name, "--json"]);
    let by_pid = json_of(&["dump", "--pid", &writer.pid.to_string(), "--json"]);
    assert_eq!(by_name, by_pid, "by name and by pid read the same segment");
    assert_eq!(by_name["layout"], "lrbc-v1-ext");
    assert_eq!(
        by_name["size"].as_u64(),
        Some(bytes.len() as u64),
        "the header's size, not the page-rounded view's"
    );
    assert_eq!(by_name["header"]["num_envs"], 3);
    // `Local\NAME` is the same object in this session.
    let local = json_of(&[
        "dump",
        "--shm",
        &format!("Local\\{}", writer.name),
        "--json",
    ]);
    assert_eq!(local, by_name);
    // The same bytes from a file, for the Linux build to read in `.ci/windows`.
    let from_file = json_of(&["dump", "--path", file.to_str().unwrap(), "--json"]);
    assert_eq!(from_file, by_name);
    std::fs::write(
        shared_dir().join("same-bytes.windows.json"),
        serde_json::to_string_pretty(&by_name).unwrap(),
    )
    .unwrap();

    let list = json_of(&["list", "--json"]);
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == writer.name.as_str()),
        "list finds it: {list}"
    );

    writer.finish();
    let (code, _, err) = run_inspector(&["dump", "--shm", &format!("LuckyEngine_{}", 1)]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// A `sim engine` child, killed on drop.
struct Engine {
    child: Child,
    name: String,
}

impl Engine {
    /// Under the engine's default name, `LuckyEngine_<pid>`.
    fn start() -> Self {
        let child = inspector()
            .args(["sim", "engine", "--envs", "4", "--obs", "3"])
            .args(["--act", "2", "--image", "8x8x3"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Self {
            name: format!("LuckyEngine_{}", child.id()),
            child,
        }
    }
}

impl Engine {
    fn start_named(name: &str) -> Self {
        let child = inspector()
            .args(["sim", "engine", "--name", name, "--envs", "2", "--obs", "3"])
            .args(["--act", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Self {
            child,
            name: name.to_string(),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_simulated_engine_is_attached_watched_and_controlled_and_its_death_seen() {
    let mut engine = Engine::start();
    let name = engine.name.clone();
    let by_name = json_when_ready(&["dump", "--shm", &name, "--json"]);
    assert_eq!(by_name["layout"], "lrbc-v1-ext");
    assert_eq!(by_name["header"]["server_pid"], engine.child.id());
    let by_pid = json_of(&["dump", "--pid", &engine.child.id().to_string(), "--json"]);
    assert_eq!(
        by_pid["header"]["total_size"],
        by_name["header"]["total_size"]
    );

    // A second engine under the same live name is refused.
    let (code, _, err) = run_inspector(&[
        "sim", "engine", "--name", &name, "--envs", "1", "--obs", "1", "--act", "1",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("already exists"), "{err}");

    // A client steps it and sends commands; traffic follows and decodes them.
    let (mut traffic, rx) = follow_traffic(&name, "25");
    let client = inspector()
        .args(["sim", "client", "--shm", &name, "--steps", "200"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_with_deadline(client);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut commands = 0;
    while commands < 4 {
        let v: Value = serde_json::from_str(&next_line(&rx, "command ring entries")).unwrap();
        assert!(v.get("ring").is_some(), "{v}");
        if v["ring"].as_str().unwrap().starts_with("cmd_") {
            commands += 1;
        }
    }
    traffic.kill().unwrap();
    traffic.wait().unwrap();
    let (code, out, err) = run_inspector(&[
        "watch",
        "--shm",
        &name,
        "--count",
        "3",
        "--interval",
        "0.2",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let reports: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(reports.len(), 3, "{out}");
    assert!(reports.iter().all(|r| r["state"] != "engine_gone"), "{out}");
    assert!(reports[2]["frame_seq"].as_u64().unwrap() >= 200, "{out}");

    // The control channel: the camera service off, then its status.
    let (code, out, err) = run_inspector(&[
        "control",
        "--shm",
        &name,
        "--service",
        "camera",
        "--disable",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let flags = json_of(&["dump", "--shm", &name, "--json"])["header"]["service_flags"]
        .as_u64()
        .unwrap();
    assert_eq!(flags & (1 << 4), 0, "camera bit cleared: {flags:#x}");

    // The engine dies: its mapping goes with its handles, and attaching says so.
    engine.child.kill().unwrap();
    engine.child.wait().unwrap();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (code, _, err) = run_inspector(&["dump", "--shm", &engine.name]);
        if code == 1 {
            assert!(err.contains("no segment named"), "{err}");
            break;
        }
        assert!(Instant::now() < deadline, "the mapping outlived its engine");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::io::stderr().flush();
}

/// The next `watch --json` line that satisfies `done`.
fn watch_until(
    lines: &crossbeam_channel::Receiver<String>,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no watch line showed {what}"));
        let v: Value = serde_json::from_str(&line).unwrap();
        if done(&v) {
            return v;
        }
    }
}

#[test]
fn an_engine_restarted_under_the_same_name_while_watched_can_create_it_and_is_followed() {
    // `watch` and `traffic --follow` both hold views of the first engine's mapping.
    let name = unique_name("win-restart");
    let mut first = Engine::start_named(&name);
    json_when_ready(&["dump", "--shm", &name, "--json"]);
    // Not a default name: --pid and list find it by listing the session's mappings.
    let by_pid = json_of(&["dump", "--pid", &first.child.id().to_string(), "--json"]);
    assert_eq!(by_pid["header"]["server_pid"], first.child.id());
    let list = json_of(&["list", "--json"]);
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == name.as_str()),
        "{list}"
    );
    let mut watch = inspector()
        .args(["watch", "--shm", &name, "--interval", "0.1", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = line_channel(watch.stdout.take().unwrap());
    let (traffic, traffic_lines) =
        inspector_lines(&["traffic", "--shm", &name, "--follow", "--ring", "cmd"]);
    // A client's commands show that traffic is attached.
    let client = inspector()
        .args(["sim", "client", "--shm", &name, "--steps", "100"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    next_line(&traffic_lines, "a command in traffic");
    assert!(wait_with_deadline(client).status.success());
    let first_pid = first.child.id();
    watch_until(&lines, "the first engine", |v| {
        v["state"] == "attached" && v["server_pid"] == first_pid
    });

    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let gone = watch_until(&lines, "engine_gone", |v| v["state"] == "engine_gone");
    assert_eq!(gone["server_pid"], first_pid, "{gone}");
    // `traffic --follow` lets go of the mapping too, and says why it ended.
    let out = wait_with_deadline(traffic);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("is gone"), "{err}");

    // The watcher closed its views: the name died with the engine, so a new engine
    // can create it.
    let mut second = Engine::start_named(&name);
    let second_pid = second.child.id();
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(status) = second.child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read as _;
            let _ = second.child.stderr.take().unwrap().read_to_string(&mut err);
            panic!("the restarted engine exited ({status}): {err}");
        }
        let (code, out, _) = run_inspector(&["dump", "--shm", &name, "--json"]);
        if code == 0 {
            let v: Value = serde_json::from_str(&out).unwrap();
            if v["header"]["server_pid"] == second_pid {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the restarted engine never appeared"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let back = watch_until(&lines, "the re-attachment", |v| {
        v["server_pid"] == second_pid && v["state"] == "attached"
    });
    assert!(back["frame_seq"].is_u64(), "{back}");
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn serve_is_read_by_the_tool_s_client_and_toggles_a_service_when_allowed() {
    use lrbc_remote::view::Connection;
    use lrbc_remote::view::wire::ServerMessage;
    let engine = Engine::start();
    let name = engine.name.clone();
    json_when_ready(&["dump", "--shm", &name, "--json"]);
    let mut client = Guarded::new(
        inspector()
            .args(["sim", "client", "--shm", &name, "--hz", "200"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut serve = inspector()
        .args([
            "serve",
            "--shm",
            &name,
            "--listen",
            "127.0.0.1:0",
            "--allow-control",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = line_channel(serve.stdout.take().unwrap());
    let mut serve = Guarded::new(serve);
    let first = next_line(&out, "serve's first line");
    let url = first.strip_prefix("listening on ").unwrap().to_string();
    let mut c = Connection::connect(&url, Duration::from_secs(10)).unwrap();
    let deadline = Instant::now() + DEADLINE;
    let frame = loop {
        assert!(
            Instant::now() < deadline,
            "no frame channel, or no control service"
        );
        c.next(Duration::from_millis(100)).unwrap();
        let frame = c.channels.values().find(|ch| ch.topic == "/lrbc/frame");
        if let Some(f) = frame
            && c.services.contains_key("/lrbc/control/set_service")
        {
            break f.id;
        }
    };
    let sub = c.subscribe(&[frame]).unwrap()[0];
    let mut seqs = Vec::new();
    while seqs.len() < 20 {
        assert!(Instant::now() < deadline, "{} frames", seqs.len());
        if let Some(ServerMessage::MessageData {
            subscription, data, ..
        }) = c.next(Duration::from_millis(100)).unwrap()
            && subscription == sub
        {
            let f = lrbc::rpc::recording_fb::root_as_frame(&data).unwrap();
            assert_eq!(f.rewards().unwrap().len(), 4);
            seqs.push(f.frame_seq());
        }
    }
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    served::camera_off(&mut c);
    let flags = json_of(&["dump", "--shm", &name, "--json"])["header"]["service_flags"]
        .as_u64()
        .unwrap();
    assert_eq!(flags & (1 << 4), 0, "camera bit cleared: {flags:#x}");
    c.close();
    // The window as its viewer (headless): the run described, frames and traffic.
    let mut a = window::app(lrbc_inspector::ui::settings::Settings::default(), None);
    a.connect(&url);
    let mut h = window::harness(a);
    window::step_until(&mut h, "frames and traffic from the server", |a| {
        a.session.as_ref().is_some_and(|s| {
            s.geometry().num_envs == 4
                && s.sampler.stats().frames.sampled > 10
                && !s.store().rows.is_empty()
        })
    });
    assert!(h.state().title().ends_with("(served)"));
    drop(h);
    let _ = serve.child().kill();
    let _ = client.child().kill();
    drop(engine);
}
