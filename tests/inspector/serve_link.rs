//! `serve` for viewers on slow links (a network namespace whose loopback is limited by
//! `tc`, `common::netns`; skipped where the machine cannot make one), and a client that
//! stops reading while serve is asked to stop. The engine and client run outside the
//! namespace; serve and the viewer (`lrbc-bench link-viewer`, a process of its own) inside.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::process::Stdio;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use common::netns::slow_link;
use common::served::{Serve, channels, messages};
use common::{DEADLINE, Guarded, SimEngine, line_channel, next_line, sim_client};
use serde_json::Value;
use tungstenite::client::IntoClientRequest as _;

/// The link, Mbit/s: a user viewing a run on a cloud node over a slow connection.
const LINK_MBIT: f64 = 5.0;
/// Ring entries (commands and responses: small, a few a second) all reach a viewer on a
/// slow link, whatever the frames do: at least this share of those serve captured.
const RING_SHARE_MIN: f64 = 0.99;
/// What a viewer gets on a slow link is fresh, not seconds old in a queue: the age
/// (arrival minus log time, ms) of its frames, and of every message, at the 99th
/// percentile.
const AGE_P99_MAX_MS: f64 = 300.0;
/// The viewer's seconds: those measured, after those skipped while the link's queues fill.
const VIEW_SECS: &str = "8";
const SKIP_SECS: &str = "4";
/// How long serve may take to stop on SIGINT.
const STOP_WITHIN: Duration = Duration::from_secs(2);

/// One test at a time: the other's engine, client and serve would load the machine
/// (two cores) while this one measures.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    // A failed test poisons the lock; the next one runs all the same.
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}

fn inspector_path() -> &'static str {
    env!("CARGO_BIN_EXE_lrbc-inspector")
}

/// The benchmarks' binary, whose `link-viewer` is the viewer: built beside
/// lrbc-inspector (with this test's profile) on first use, as it is another package's.
fn bench_path() -> &'static std::path::Path {
    static PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        // The binary that lrbc-bench's own tests run, built by the workspace's test build
        // with the features of this test's build: after `cargo test --workspace` nothing
        // is compiled.
        let status = lrbc_testkit::cargo::cargo()
            .args(["test", "--no-run", "--quiet", "--locked", "--workspace"])
            .args(["--test", "commands"])
            .status()
            .expect("run cargo test --no-run --test commands");
        assert!(
            status.success(),
            "cargo test --no-run --test commands: {status}"
        );
        let path = std::path::Path::new(inspector_path())
            .with_file_name(format!("lrbc-bench{}", std::env::consts::EXE_SUFFIX));
        assert!(path.is_file(), "{} after its build", path.display());
        path
    })
}

#[test]
fn a_viewer_on_a_5_mbit_link_gets_every_ring_entry_and_fresh_messages() {
    let Some(ns) = slow_link(LINK_MBIT) else {
        return;
    };
    let _one = one_at_a_time();
    // Built before the run starts, so that the build does not load the machine during it.
    let bench = bench_path();
    let engine = SimEngine::start("link", &["--preset", "train4096"]);
    let _client = Guarded::new(sim_client(&engine.name, "1000"));
    let mut serve = ns
        .command(inspector_path())
        .args(["serve", "--shm", &engine.name, "--listen", "127.0.0.1:0"])
        .args(["--busy-budget", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("serve in namespace {}: {e}", ns.name));
    let out = line_channel(serve.stdout.take().unwrap());
    let log = line_channel(serve.stderr.take().unwrap());
    let _serve = Guarded::new(serve);
    let first = next_line(&out, "serve's first line");
    let url = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("first line: {first}"));
    let viewer = ns
        .command(bench)
        .args(["link-viewer", "--url", url])
        .args(["--secs", VIEW_SECS, "--skip-secs", SKIP_SECS])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("the viewer in namespace {}: {e}", ns.name));
    let report = common::wait_with_deadline(viewer);
    common::assert_clean_exit(&report);
    let v: Value = serde_json::from_slice(&report.stdout)
        .unwrap_or_else(|e| panic!("the viewer's report: {e}"));
    let serve_log: Vec<String> = log.try_iter().collect();
    let last_lines = serve_log[serve_log.len().saturating_sub(3)..].join("\n");
    let figures = format!(
        "{LINK_MBIT} Mbit/s, train4096 at 1 kHz: frames {}/s (age p50 {} ms, p99 {} ms), ring \
         entries {} of {} captured, all messages age p99 {} ms, {:.3} MB/s; serve's last lines:\n{last_lines}",
        v["frame"]["per_sec"],
        v["frame"]["age_p50_ms"],
        v["frame"]["age_p99_ms"],
        v["ring_share"]["delivered"],
        v["ring_share"]["captured"],
        v["all"]["age_p99_ms"],
        v["bytes_per_sec"].as_f64().unwrap_or(0.0) / 1e6,
    );
    eprintln!("{figures}");
    assert!(v["error"].is_null(), "the viewer's connection ended: {v}");
    assert!(
        v["frame"]["count"].as_u64() > Some(0),
        "no frames: {figures}"
    );
    let share = v["ring_share"]["share"].as_f64().unwrap_or_else(|| {
        panic!("no ring share (no two status messages with ring counts in the window): {figures}")
    });
    assert!(
        share >= RING_SHARE_MIN,
        "ring entries delivered {share:.4} < {RING_SHARE_MIN}: {figures}"
    );
    for what in ["frame", "all"] {
        let age = v[what]["age_p99_ms"].as_f64().unwrap_or(f64::INFINITY);
        assert!(
            age < AGE_P99_MAX_MS,
            "{what} age p99 {age:.0} ms >= {AGE_P99_MAX_MS} ms: {figures}"
        );
    }
}

/// True for a progress line of serve on which a client takes no frame and has frames
/// conflated: `…: 0 frames/s (998 conflated), …`.
fn held_back(line: &str) -> bool {
    line.split(" | ").any(|client| {
        let Some((_, rest)) = client.split_once(": 0 frames/s (") else {
            return false;
        };
        rest.split(' ')
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n > 0)
    })
}

/// A WebSocket client (the handshake with `foxglove.sdk.v1`) that subscribes to every
/// channel advertised in its first second after the frame channel, then never reads.
fn client_that_stops_reading(url: &str) -> tungstenite::WebSocket<TcpStream> {
    let stream = TcpStream::connect(url.trim_start_matches("ws://")).unwrap();
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", "foxglove.sdk.v1".parse().unwrap());
    let (mut ws, _) =
        tungstenite::client(request, stream).unwrap_or_else(|e| panic!("handshake: {e}"));
    ws.get_ref()
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut channels = BTreeMap::new();
    let deadline = Instant::now() + DEADLINE;
    let mut frames_since: Option<Instant> = None;
    while frames_since.is_none_or(|t| t.elapsed() < Duration::from_secs(1)) {
        assert!(Instant::now() < deadline, "no frame channel advertised");
        let text = match ws.read() {
            Ok(tungstenite::Message::Text(t)) => t,
            Ok(_) => continue,
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => panic!("reading the advertisements: {e}"),
        };
        let m: Value = serde_json::from_str(text.as_str()).unwrap();
        if m["op"] == "advertise" {
            for c in m["channels"].as_array().unwrap() {
                let topic = c["topic"].as_str().unwrap().to_string();
                if topic == "/lrbc/frame" {
                    frames_since.get_or_insert_with(Instant::now);
                }
                channels.insert(c["id"].as_u64().unwrap(), topic);
            }
        }
    }
    assert!(
        channels.values().any(|t| t.starts_with("/lrbc/camera/")),
        "no image channel advertised: {channels:?}"
    );
    let subscriptions: Vec<Value> = (channels.keys().enumerate())
        .map(|(i, c)| serde_json::json!({"id": i + 1, "channelId": c}))
        .collect();
    let subscribe = serde_json::json!({"op": "subscribe", "subscriptions": subscriptions});
    ws.send(tungstenite::Message::text(subscribe.to_string()))
        .unwrap();
    ws
}

#[test]
fn serve_stops_within_two_seconds_while_a_client_has_stopped_reading() {
    let _one = one_at_a_time();
    let engine = SimEngine::start("link-stop", &["--preset", "cams64"]);
    let _client = Guarded::new(sim_client(&engine.name, "1000"));
    let mut serve = Serve::start(&engine.name, &["--images", "--all-envs"]);
    let stalled = client_that_stops_reading(&serve.url);
    // Its queue and the sockets' buffers fill: serve's progress line says that client
    // takes no frame and has frames conflated.
    let deadline = Instant::now() + DEADLINE;
    loop {
        assert!(
            Instant::now() < deadline,
            "the stalled client was never held back"
        );
        let Ok(line) = serve.log.recv_timeout(DEADLINE) else {
            continue;
        };
        if held_back(&line) {
            break;
        }
    }
    let child = serve.child.child();
    common::interrupt(child.id());
    let asked = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if asked.elapsed() > STOP_WITHIN {
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = asked.elapsed();
    drop(stalled);
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        let log: Vec<String> = serve.log.try_iter().collect();
        panic!(
            "serve did not stop within {STOP_WITHIN:?} of SIGINT while a client had stopped reading (killed); its last lines:\n{}",
            log[log.len().saturating_sub(3)..].join("\n")
        );
    };
    eprintln!("serve stopped {:.2} s after SIGINT", took.as_secs_f64());
    assert_eq!(
        status.code(),
        Some(0),
        "serve's exit after SIGINT: {status}"
    );
}

/// `serve` whose standard error nobody reads (a paused terminal, a stalled pipe to a log
/// collector), its URL: the pipe is held, never drained.
fn serve_with_stderr_unread(name: &str) -> (Guarded, std::process::ChildStderr, String) {
    let mut child = common::inspector()
        .args(["serve", "--shm", name, "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = line_channel(child.stdout.take().unwrap());
    let err = child.stderr.take().unwrap();
    let first = next_line(&out, "serve's first line");
    let url = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("first line: {first}"))
        .to_string();
    (Guarded::new(child), err, url)
}

#[test]
fn a_standard_error_nobody_reads_holds_up_neither_serving_nor_the_stop() {
    let _one = one_at_a_time();
    let engine = SimEngine::start(
        "link-log",
        &["--envs", "6", "--obs", "5", "--act", "2", "--image", "none"],
    );
    let _client = Guarded::new(sim_client(&engine.name, "200"));
    let (mut serve, _unread, url) = serve_with_stderr_unread(&engine.name);
    // Far more log than a pipe holds (64 KiB): two lines for each of 600 clients, and a
    // stream of malformed messages.
    for _ in 0..600 {
        let mut c = lrbc_remote::view::Connection::connect(&url, DEADLINE).unwrap();
        let _ = c.send_text("{not json");
        c.close();
    }
    // A new client is served at once.
    let started = Instant::now();
    let mut c = lrbc_remote::view::Connection::connect(&url, DEADLINE).unwrap();
    let ids = channels(&mut c, &["/lrbc/frame"]);
    c.subscribe(&ids).unwrap();
    messages(&mut c, "/lrbc/frame", 5);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a new client waited {:?} for its first frames",
        started.elapsed()
    );
    let child = serve.child();
    common::interrupt(child.id());
    let asked = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if asked.elapsed() > STOP_WITHIN {
            let _ = child.kill();
            panic!("serve did not stop within {STOP_WITHIN:?} with its standard error unread");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn a_subscription_to_twenty_thousand_unknown_channels_is_one_log_line() {
    let _one = one_at_a_time();
    let engine = SimEngine::start(
        "link-flood",
        &["--envs", "6", "--obs", "5", "--act", "2", "--image", "none"],
    );
    let _client = Guarded::new(sim_client(&engine.name, "200"));
    let serve = Serve::start(&engine.name, &[]);
    let mut c = serve.connect();
    let subscriptions: Vec<Value> = (0..20_000u64)
        .map(|i| serde_json::json!({"id": i, "channelId": 1_000_000 + i}))
        .collect();
    let flood = serde_json::json!({"op": "subscribe", "subscriptions": subscriptions});
    for _ in 0..3 {
        c.send_text(&flood.to_string()).unwrap();
    }
    let first = serve.log_line("unknown channel");
    assert!(first.contains("20000 unknown channels"), "{first}");
    // The next second's line counts the rest; the connection serves on.
    let more = serve.log_line("more subscriptions to unknown channels");
    assert!(more.contains(" 2 more "), "{more}");
    let ids = channels(&mut c, &["/lrbc/serve/status"]);
    c.subscribe(&ids).unwrap();
    messages(&mut c, "/lrbc/serve/status", 1);
    let lines: Vec<String> = serve.log.try_iter().collect();
    assert!(
        !lines.iter().any(|l| l.contains("unknown channel")),
        "{lines:?}"
    );
}

#[test]
fn a_client_that_answers_no_ping_is_dropped_and_said_so() {
    let engine = SimEngine::start(
        "link-silent",
        &["--envs", "6", "--obs", "5", "--act", "2", "--image", "none"],
    );
    let _client = Guarded::new(sim_client(&engine.name, "200"));
    let serve = Serve::start(&engine.name, &[]);
    // A client that makes the handshake and then neither reads nor answers (a laptop
    // asleep, a viewer stopped in a debugger).
    let addr = serve.url.trim_start_matches("ws://").to_string();
    // Before the connection: serve counts the silence from its end of the handshake.
    let started = Instant::now();
    let mut request = serve.url.as_str().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", "foxglove.sdk.v1".parse().unwrap());
    let (silent, _) = tungstenite::client(request, TcpStream::connect(&addr).unwrap())
        .unwrap_or_else(|e| panic!("handshake: {e}"));
    let local = silent.get_ref().local_addr().unwrap();
    let wait = lrbc_remote::server::SILENT + Duration::from_secs(10);
    let line = loop {
        let left = wait.saturating_sub(started.elapsed());
        let line = serve
            .log
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no line about the silent client {local} in {wait:?}"));
        if line.contains(&format!("client {local} gone")) {
            break line;
        }
    };
    assert!(line.contains("no answer to pings"), "{line}");
    assert!(
        started.elapsed() >= lrbc_remote::server::SILENT,
        "dropped after {:?}",
        started.elapsed()
    );
}
