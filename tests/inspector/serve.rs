//! `serve` against a simulated engine and client, each in its own process, read with
//! the crate's own client (`lrbc_remote::view`); the frames are compared with a
//! `record` of the same run; and clients that misbehave on loopback: one that stops
//! reading, and 200 that connect and drop.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::served::{Serve, channels, collect, messages};
use common::{DEADLINE, Guarded, SimEngine, inspector, sim_client};
use lrbc::rpc::recording_fb;
use lrbc_remote::view::wire::ServerMessage;

/// The engine of most tests here: six envs, no images.
const SMALL_ENGINE: &[&str] = &["--envs", "6", "--obs", "5", "--act", "2", "--image", "none"];

#[test]
fn a_served_run_matches_a_recording_of_it_and_says_what_it_is() {
    let engine = SimEngine::start("serve", SMALL_ENGINE);
    let mut client = sim_client(&engine.name, "200");
    let serve = Serve::start(&engine.name, &["--envs", "0,2,5"]);
    let mut c = serve.connect();
    assert!(
        c.server_name.starts_with("lrbc-inspector"),
        "{}",
        c.server_name
    );
    // Without --allow-control, no service.
    assert!(c.services.is_empty());
    let ids = channels(
        &mut c,
        &[
            "/lrbc/frame",
            "/lrbc/metadata",
            "/lrbc/serve/status",
            "/lrbc/ring/cmd_c2s",
        ],
    );
    let frame = c.channels[&ids[0]].clone();
    assert_eq!(frame.encoding, "flatbuffer");
    assert_eq!(frame.schema_name, "lrbc.recording.Frame");
    assert_eq!(frame.schema, lrbc::rpc::RECORDING_BFBS);
    assert!(
        c.channels
            .values()
            .any(|ch| ch.topic == "/lrbc/ring/cmd_c2s"
                && ch.schema_name == "lrbc.recording.RingEntry"
                && ch.schema_encoding.as_deref() == Some("jsonschema")
                && ch.encoding == "json"),
        "{:?}",
        c.channels.values().map(|ch| &ch.topic).collect::<Vec<_>>()
    );
    // A recording of the same run, started now.
    let out = common::temp_file("serve-rec", "mcap");
    let record = inspector()
        .args([
            "record",
            "--shm",
            &engine.name,
            "--busy-budget",
            "0",
            "--envs",
            "0,2,5",
        ])
        .args(["--duration", "3", "-o"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.subscribe(&ids[..3]).unwrap();
    let mut got = collect(
        &mut c,
        &[
            ("/lrbc/frame", 300),
            ("/lrbc/metadata", 6),
            ("/lrbc/serve/status", 1),
        ],
    );
    let output = common::wait_with_deadline(record);
    assert!(output.status.success());
    // The metadata records came on subscribing, the status once a second.
    let meta: BTreeMap<String, serde_json::Value> = got["/lrbc/metadata"]
        .iter()
        .map(|(_, d)| {
            let v: serde_json::Value = serde_json::from_slice(d).unwrap();
            (
                v["name"].as_str().unwrap().to_string(),
                v["metadata"].clone(),
            )
        })
        .collect();
    assert_eq!(meta["lrbc.geometry"]["recorded_envs"], "0,2,5");
    assert_eq!(meta["lrbc.geometry"]["num_envs"], "6");
    assert_eq!(meta["lrbc.tool"]["name"], "lrbc-inspector");
    assert!(meta["lrbc.clock"]["unix_minus_monotonic_ns"].is_string());
    assert!(meta.contains_key("lrbc.names") && meta.contains_key("lrbc.header"));
    let served = got.remove("/lrbc/frame").unwrap();
    let status: serde_json::Value =
        serde_json::from_slice(&got["/lrbc/serve/status"][0].1).unwrap();
    assert_eq!(status["state"], "attached", "{status}");
    assert!(status["clients"].as_u64() >= Some(1), "{status}");
    // The capture's counts are a recording's, in the same typed form.
    let capture = lrbc_recording::format::Counts::from_json(&status["capture"]).unwrap();
    assert_eq!(capture.version, lrbc_recording::format::COUNTS_VERSION);
    assert!(
        capture.frames_published() >= capture.frames_recorded,
        "{status}"
    );

    let mut by_seq = BTreeMap::new();
    let now_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    for (log_time, data) in &served {
        // Served times are Unix times: within a minute of now.
        assert!(now_unix.abs_diff(*log_time) < 60_000_000_000, "{log_time}");
        let f = recording_fb::root_as_frame(data).unwrap();
        assert_eq!(f.envs().unwrap().iter().collect::<Vec<_>>(), [0, 2, 5]);
        assert_eq!(f.rewards().unwrap().len(), 6);
        assert_eq!(f.observations().unwrap().len(), 15);
        by_seq.insert(f.frame_seq(), data.clone());
    }
    let seqs: Vec<u64> = served
        .iter()
        .map(|(_, d)| recording_fb::root_as_frame(d).unwrap().frame_seq())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "frame_seq does not increase"
    );
    // Every frame both saw holds the same values.
    let bytes = std::fs::read(&out).unwrap();
    let mut same = 0;
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        if m.channel.topic != "/lrbc/frame" {
            continue;
        }
        let r = recording_fb::root_as_frame(&m.data).unwrap();
        let Some(s) = by_seq.get(&r.frame_seq()) else {
            continue;
        };
        let s = recording_fb::root_as_frame(s).unwrap();
        let floats = |v: Option<flatbuffers::Vector<'_, f32>>| {
            v.unwrap().iter().map(f32::to_bits).collect::<Vec<_>>()
        };
        assert_eq!(
            floats(r.rewards()),
            floats(s.rewards()),
            "frame {}",
            r.frame_seq()
        );
        assert_eq!(floats(r.observations()), floats(s.observations()));
        // (Actions are the trainer's, published under action_seq: a copy of frame N
        // holds the actions of step N or of N+1, whichever were there when it was made.)
        assert_eq!(r.dones().unwrap().bytes(), s.dones().unwrap().bytes());
        same += 1;
    }
    assert!(same > 100, "only {same} frames in both");
    let _ = std::fs::remove_file(&out);
    c.close();
    let _ = client.kill();
    let _ = client.wait();
    drop(serve);
}

#[test]
fn control_is_refused_by_default_and_toggles_a_service_when_allowed() {
    let engine = SimEngine::start("serve-ctl", SMALL_ENGINE);
    let mut client = sim_client(&engine.name, "200");
    let serve = Serve::start(&engine.name, &[]);
    let mut c = serve.connect();
    // A service call to a server without services: refused, and the run goes on.
    assert!(c.call("/lrbc/control/set_service", b"{}").is_err());
    c.send_binary(lrbc_remote::view::wire::service_call(1, 1, "json", b"{}"))
        .unwrap();
    let deadline = Instant::now() + DEADLINE;
    loop {
        assert!(Instant::now() < deadline, "a service call was not refused");
        if let Some(ServerMessage::ServiceCallFailure { message, .. }) =
            c.next(Duration::from_millis(100)).unwrap()
        {
            assert!(message.contains("does not support services"), "{message}");
            break;
        }
    }
    let ids = channels(&mut c, &["/lrbc/frame"]);
    c.subscribe(&ids).unwrap();
    messages(&mut c, "/lrbc/frame", 10);
    c.close();
    drop(serve);

    let serve = Serve::start(&engine.name, &["--allow-control"]);
    let mut c = serve.connect();
    let deadline = Instant::now() + DEADLINE;
    while !c.services.contains_key("/lrbc/control/set_service") {
        assert!(Instant::now() < deadline, "no control service advertised");
        c.next(Duration::from_millis(100)).unwrap();
    }
    // The call shows in the control ring's traffic channel.
    let ring = channels(&mut c, &["/lrbc/ring/ctl_c2s"]);
    c.subscribe(&ring).unwrap();
    let call = c
        .call(
            "/lrbc/control/set_service",
            br#"{"service":"camera","enabled":false}"#,
        )
        .unwrap();
    let mut answered = None;
    let mut entries = Vec::new();
    let deadline = Instant::now() + DEADLINE;
    while answered.is_none() || entries.is_empty() {
        assert!(Instant::now() < deadline, "no answer, or no ring entry");
        match c.next(Duration::from_millis(100)).unwrap() {
            Some(ServerMessage::ServiceResponse { call_id, data, .. }) if call_id == call => {
                answered = Some(serde_json::from_slice::<serde_json::Value>(&data).unwrap());
            }
            Some(ServerMessage::ServiceCallFailure { message, .. }) => panic!("{message}"),
            Some(ServerMessage::MessageData { data, .. }) => {
                entries.push(serde_json::from_slice::<serde_json::Value>(&data).unwrap());
            }
            _ => {}
        }
    }
    let answer = answered.unwrap();
    assert_eq!(answer["method"], "SetServiceEnabled", "{answer}");
    // The request as Foxglove shows it: decoded, with its correlation id.
    let request = &entries[0];
    assert_eq!(request["ring"], "ctl_c2s", "{request}");
    assert_eq!(request["method"], "SetServiceEnabled", "{request}");
    assert_eq!(
        request["correlation_id"], answer["correlation_id"],
        "{request}"
    );
    assert!(request["bytes"].as_str().is_some_and(|b| !b.is_empty()));
    let (code, out, err) = common::run_inspector(&["dump", "--shm", &engine.name, "--json"]);
    assert_eq!(code, 0, "{err}");
    let dump: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        dump["header"]["service_flags"],
        0x7f & !(1 << 4),
        "camera off"
    );
    // A bad request is answered with why.
    let bad = c
        .call(
            "/lrbc/control/set_service",
            br#"{"service":"warp","enabled":true}"#,
        )
        .unwrap();
    let deadline = Instant::now() + DEADLINE;
    loop {
        assert!(Instant::now() < deadline, "no failure for a bad request");
        if let Some(ServerMessage::ServiceCallFailure { call_id, message }) =
            c.next(Duration::from_millis(100)).unwrap()
        {
            assert_eq!(call_id, bad);
            assert!(message.contains("unknown service"), "{message}");
            break;
        }
    }
    c.close();
    let _ = client.kill();
    let _ = client.wait();
}

#[test]
fn bad_arguments_and_a_port_in_use_are_one_line_each() {
    let engine = SimEngine::start("serve-bad", SMALL_ENGINE);
    let serve = Serve::start(&engine.name, &[]);
    let port = serve.url.rsplit(':').next().unwrap().to_string();
    let (code, _, err) = common::run_inspector(&[
        "serve",
        "--shm",
        &engine.name,
        "--listen",
        &format!("127.0.0.1:{port}"),
    ]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("cannot listen on 127.0.0.1:"), "{err}");
    for (args, says) in [
        (&["--listen", "nowhere"][..], "HOST:PORT"),
        (
            &["--listen", "0.0.0.0:0", "--allow-control"][..],
            "--tls-cert and --tls-key",
        ),
        (&["--max-hz", "-3"][..], "rate"),
        (&["--tls-cert", "c.pem"][..], "--tls-key"),
        (
            &["--tls-cert", "/no/such.pem", "--tls-key", "/no/such.key"][..],
            "cannot read /no/such.pem",
        ),
        (&["--envs", "9"][..], "env 9 does not exist"),
    ] {
        let mut all = vec!["serve", "--shm", &engine.name];
        all.extend_from_slice(args);
        let (code, _, err) = common::run_inspector(&all);
        assert_ne!(code, 0, "{args:?}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // A subprotocol that is not the Foxglove protocol is refused at the handshake; serve
    // goes on.
    let addr = serve.url.trim_start_matches("ws://").to_string();
    let stream = std::net::TcpStream::connect(&addr).unwrap();
    let mut req =
        tungstenite::client::IntoClientRequest::into_client_request(serve.url.as_str()).unwrap();
    req.headers_mut()
        .insert("Sec-WebSocket-Protocol", "foxglove.sdk.v2".parse().unwrap());
    assert!(tungstenite::client(req, stream).is_err());
    let mut c = serve.connect();
    // Malformed messages: a line in the log each, and the connection serves on.
    c.send_text("{not json").unwrap();
    serve.log_line("malformed message: not JSON");
    c.send_text(r#"{"op":"subscribe","subscriptions":[{"id":5,"channelId":999}]}"#)
        .unwrap();
    serve.log_line("1 unknown channel (999)");
    c.send_text(r#"{"op":"unsubscribe","subscriptionIds":[77]}"#)
        .unwrap();
    let ids = channels(&mut c, &["/lrbc/serve/status"]);
    c.subscribe(&ids).unwrap();
    messages(&mut c, "/lrbc/serve/status", 1);
}

#[test]
fn foxglove_s_own_client_library_decodes_every_channel() {
    let engine = SimEngine::start("serve-node", &["--preset", "cams64", "--camera-hz", "50"]);
    let mut client = sim_client(&engine.name, "200");
    let serve = Serve::start(&engine.name, &["--images", "--envs", "0"]);
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/node/foxglove_client.cjs");
    let node = std::process::Command::new("node")
        .arg(script)
        .args([serve.url.as_str(), "100", "3"])
        .env("NODE_PATH", common::node_modules())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    let out = common::wait_with_deadline(node);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert!(
        v["server"]["name"]
            .as_str()
            .unwrap()
            .starts_with("lrbc-inspector"),
        "{v}"
    );
    let topics: Vec<&str> = v["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["topic"].as_str().unwrap())
        .collect();
    assert!(
        topics.contains(&"/lrbc/frame") && topics.contains(&"/lrbc/camera/env0"),
        "{v}"
    );
    let frame = v["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["topic"] == "/lrbc/frame")
        .unwrap();
    assert_eq!(frame["schemaName"], "lrbc.recording.Frame");
    assert_eq!(frame["schemaEncoding"], "flatbuffer");
    assert!(v["frames"].as_u64() >= Some(100), "{v}");
    assert_eq!(v["seqsIncreasing"], true, "{v}");
    assert_eq!(v["rewards"], 64, "{v}");
    assert!(v["images"].as_u64() >= Some(3), "{v}");
    assert_eq!(v["imageSchema"], "foxglove.RawImage");
    // Every channel decodes as the app decodes it; ring entries with their ids.
    assert_eq!(v["failures"], serde_json::json!({}), "{v}");
    let entries = v["ringEntries"].as_array().unwrap();
    assert!(!entries.is_empty(), "{v}");
    for e in entries {
        assert!(e["correlation_id"].as_u64() > Some(0), "{e}");
        assert!(e["method"].as_str().is_some_and(|m| !m.is_empty()), "{e}");
    }
    let _ = client.kill();
    let _ = client.wait();
}

/// The RawImage and CompressedImage messages of `topic` by their image's time.
fn images_by_time(got: &common::served::ByTopic, topic: &str) -> BTreeMap<(u32, u32), Vec<u8>> {
    use lrbc::rpc::foxglove_fb as fox;
    let time = |t: Option<&fox::Time>| t.map(|t| (t.sec(), t.nsec())).unwrap();
    got.get(topic)
        .into_iter()
        .flatten()
        .map(|(_, bytes)| {
            let t = match fox::root_as_raw_image(bytes) {
                Ok(r) if r.encoding().is_some() => time(r.timestamp()),
                _ => time(
                    flatbuffers::root::<fox::CompressedImage<'_>>(bytes)
                        .unwrap()
                        .timestamp(),
                ),
            };
            (t, bytes.clone())
        })
        .collect()
}

#[test]
fn images_served_as_png_are_the_raw_pixels_and_as_jpeg_are_smaller() {
    use lrbc_recording::format::region_pixels;
    let engine = SimEngine::start("serve-png", &["--preset", "cams64", "--camera-hz", "50"]);
    let _client = Guarded::new(sim_client(&engine.name, "200"));
    let every = ["--images", "--envs", "0", "--image-hz", "0"];
    let raw = Serve::start(&engine.name, &every);
    let png = Serve::start(
        &engine.name,
        &[&every[..], &["--image-format", "png"]].concat(),
    );
    let jpeg = Serve::start(
        &engine.name,
        &[&every[..], &["--image-format", "jpeg"]].concat(),
    );
    let topic = "/lrbc/camera/env0";
    let mut got = Vec::new();
    for (serve, schema) in [
        (&raw, "foxglove.RawImage"),
        (&png, "foxglove.CompressedImage"),
        (&jpeg, "foxglove.CompressedImage"),
    ] {
        let mut c = serve.connect();
        let ids = channels(&mut c, &[topic]);
        assert_eq!(c.channels[&ids[0]].schema_name, schema);
        c.subscribe(&ids).unwrap();
        got.push(c);
    }
    // Images at 50 a second: a second of each, read side by side.
    let mut read: Vec<common::served::ByTopic> =
        got.iter_mut().map(|c| collect(c, &[(topic, 20)])).collect();
    for (c, r) in got.iter_mut().zip(&mut read) {
        for (t, more) in collect(c, &[(topic, 30)]) {
            r.entry(t).or_default().extend(more);
        }
    }
    let [raw_images, png_images, jpeg_images] = [0, 1, 2].map(|i| images_by_time(&read[i], topic));
    let dims = (64, 64, 3);
    let mut same = 0;
    for (t, r) in &raw_images {
        let Some(p) = png_images.get(t) else { continue };
        let (r, p) = (
            region_pixels(r, dims).unwrap(),
            region_pixels(p, dims).unwrap(),
        );
        for y in 0..64 {
            assert_eq!(
                r.data[y * r.step..y * r.step + 192],
                p.data[y * p.step..y * p.step + 192],
                "row {y} of the image of {t:?}"
            );
        }
        same += 1;
    }
    assert!(
        same > 0,
        "no image of the same time: {:?} and {:?}",
        raw_images.keys(),
        png_images.keys()
    );
    let size =
        |m: &BTreeMap<(u32, u32), Vec<u8>>| m.values().map(Vec::len).sum::<usize>() / m.len();
    let (raw_size, jpeg_size) = (size(&raw_images), size(&jpeg_images));
    assert!(
        jpeg_size * 3 < raw_size,
        "jpeg {jpeg_size} B, raw {raw_size} B"
    );
    for j in jpeg_images.values() {
        assert!(
            region_pixels(j, dims).is_some(),
            "a JPEG image of the region's size"
        );
    }
}

#[test]
fn serve_follows_the_engine_across_a_restart_and_re_advertises() {
    let engine = SimEngine::start("serve-restart", SMALL_ENGINE);
    let name = engine.name.clone();
    let mut client = sim_client(&name, "200");
    let serve = Serve::start(&name, &[]);
    let mut c = serve.connect();
    let ids = channels(&mut c, &["/lrbc/frame"]);
    c.subscribe(&ids).unwrap();
    let before = messages(&mut c, "/lrbc/frame", 20);
    let f = recording_fb::root_as_frame(&before[0].1).unwrap();
    assert_eq!(f.rewards().unwrap().len(), 6);
    let _ = client.kill();
    let _ = client.wait();
    // The engine stops (removing its segment), and another starts under the same name
    // with 9 envs.
    drop(engine);
    let mut second = Guarded::new(
        inspector()
            .args([
                "sim", "engine", "--name", &name, "--envs", "9", "--obs", "3",
            ])
            .args(["--act", "1", "--image", "none"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let path = std::path::Path::new("/dev/shm").join(&name);
    let deadline = Instant::now() + DEADLINE;
    while !path.exists() {
        assert!(Instant::now() < deadline, "the second engine did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut client = sim_client(&name, "200");
    // The old frame channel goes, a new one comes: subscribe to it.
    let old = ids[0];
    let deadline = Instant::now() + DEADLINE;
    let new = loop {
        assert!(
            Instant::now() < deadline,
            "the frame channel was not re-advertised"
        );
        let _ = c.next(Duration::from_millis(100)).unwrap();
        if let Some(ch) = c
            .channels
            .values()
            .find(|ch| ch.topic == "/lrbc/frame" && ch.id != old)
        {
            assert!(
                !c.channels.contains_key(&old),
                "the old channel is withdrawn"
            );
            break ch.id;
        }
    };
    c.subscribe(&[new]).unwrap();
    let after = messages(&mut c, "/lrbc/frame", 20);
    let f = recording_fb::root_as_frame(&after[0].1).unwrap();
    assert_eq!(f.rewards().unwrap().len(), 9);
    serve.log_line("re-attached");
    let _ = client.kill();
    let _ = client.wait();
    common::interrupt(second.child().id());
    let _ = std::fs::remove_file(&path);
}

#[test]
fn serve_and_record_in_one_process_share_one_capture() {
    let engine = SimEngine::start("serve-rec", SMALL_ENGINE);
    let mut client = sim_client(&engine.name, "200");
    let out = common::temp_file("serve-record", "mcap");
    let out_text = out.to_string_lossy().to_string();
    let mut serve = Serve::start(&engine.name, &["--record", &out_text, "--duration", "3"]);
    let mut c = serve.connect();
    let ids = channels(&mut c, &["/lrbc/frame"]);
    c.subscribe(&ids).unwrap();
    let served: Vec<u64> = messages(&mut c, "/lrbc/frame", 100)
        .iter()
        .map(|(_, d)| recording_fb::root_as_frame(d).unwrap().frame_seq())
        .collect();
    let line = serve.log_line("written");
    assert!(line.contains(&out_text), "{line}");
    let status = serve.child.child().wait().unwrap();
    assert!(status.success());
    let bytes = std::fs::read(&out).unwrap();
    let mut recorded = std::collections::BTreeSet::new();
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        if m.channel.topic == "/lrbc/frame" {
            recorded.insert(recording_fb::root_as_frame(&m.data).unwrap().frame_seq());
        }
    }
    // One capture: every frame served is in the file.
    assert!(served.iter().all(|s| recorded.contains(s)), "{served:?}");
    assert!(recorded.len() >= served.len());
    let _ = std::fs::remove_file(&out);
    let _ = client.kill();
    let _ = client.wait();
}

/// serve's resident memory, KiB.
fn resident_kib(pid: u32) -> u64 {
    lrbc_platform::resident_kib(pid).unwrap()
}

#[test]
fn a_client_that_stops_reading_holds_up_neither_memory_nor_the_other_clients() {
    let engine = SimEngine::start("serve-stall", &["--preset", "cams64", "--camera-hz", "100"]);
    let mut client = sim_client(&engine.name, "1000");
    let mut serve = Serve::start(&engine.name, &["--images", "--image-hz", "0"]);
    // The stalled client subscribes to everything and never reads again.
    let mut stalled = serve.connect();
    let ids: Vec<u64> = channels(&mut stalled, &["/lrbc/frame", "/lrbc/camera/env0"]);
    let all: Vec<u64> = stalled.channels.keys().copied().collect();
    assert!(all.len() >= ids.len());
    stalled.subscribe(&all).unwrap();
    let mut other = serve.connect();
    let ids = channels(&mut other, &["/lrbc/frame", "/lrbc/serve/status"]);
    other.subscribe(&ids).unwrap();
    messages(&mut other, "/lrbc/frame", 100);
    let pid = serve.child.child().id();
    let start = resident_kib(pid);
    // While the stalled client's queue and socket fill and stay full, the other client
    // gets every frame serve had, but for those it was too slow to take at the moment
    // (a loaded machine): a frame it did not get is one the frame follower missed, tore
    // or skipped, or one serve replaced by a newer one for this client (conflated), as
    // serve's status counts them. The conflated ones stay few: the stalled client costs
    // the other nothing.
    let frames = messages(&mut other, "/lrbc/frame", 3000);
    let seqs: Vec<u64> = frames
        .iter()
        .map(|(_, d)| recording_fb::root_as_frame(d).unwrap().frame_seq())
        .collect();
    let status = messages(&mut other, "/lrbc/serve/status", 1);
    let status: serde_json::Value = serde_json::from_slice(&status[0].1).unwrap();
    // The capture's counts read back as the typed counts, of this build's form.
    let c = lrbc_recording::format::Counts::from_json(&status["capture"]).unwrap();
    assert_eq!(c.version, lrbc_recording::format::COUNTS_VERSION);
    let lost_by_capture = c.frames_missed + c.frames_torn + c.frames_skipped + c.frames_unreadable;
    let mine = &status["client"]["counts"]["frames"];
    let conflated = mine["conflated"].as_u64().unwrap() + mine["dropped"].as_u64().unwrap();
    let span = seqs[seqs.len() - 1] - seqs[0] + 1;
    let not_received = span - seqs.len() as u64;
    assert!(
        not_received <= lost_by_capture + conflated,
        "{not_received} frames not received, {lost_by_capture} lost by the capture, {conflated} conflated: {status}"
    );
    assert!(
        conflated * 20 < span,
        "{conflated} of {span} frames conflated for a client that reads: {status}"
    );
    let grown = resident_kib(pid).saturating_sub(start);
    assert!(grown < 64 * 1024, "serve grew by {grown} KiB");
    drop(stalled);
    let _ = client.kill();
    let _ = client.wait();
}

#[test]
fn two_hundred_clients_that_connect_and_drop_leave_serve_as_it_was() {
    let engine = SimEngine::start("serve-churn", SMALL_ENGINE);
    let mut client = sim_client(&engine.name, "200");
    let mut serve = Serve::start(&engine.name, &[]);
    let mut reader = serve.connect();
    let ids = channels(&mut reader, &["/lrbc/frame"]);
    reader.subscribe(&ids).unwrap();
    messages(&mut reader, "/lrbc/frame", 10);
    let pid = serve.child.child().id();
    let start = resident_kib(pid);
    for i in 0..200 {
        let mut c = serve.connect();
        if i % 2 == 0 {
            let ids = channels(&mut c, &["/lrbc/frame"]);
            c.subscribe(&ids).unwrap();
            let _ = c.next(Duration::from_millis(5));
        }
        // Half close properly, half just drop the socket.
        if i % 4 < 2 {
            c.close();
        }
        // The reader keeps reading throughout.
        let _ = reader.next(Duration::from_millis(1)).unwrap();
    }
    messages(&mut reader, "/lrbc/frame", 50);
    let grown = resident_kib(pid).saturating_sub(start);
    assert!(
        grown < 16 * 1024,
        "serve grew by {grown} KiB over 200 clients"
    );
    // One line for each client registered and each gone: the reader and the 200 each
    // registered (a client's line comes before its going), the 200 gone.
    let mut registered = 0;
    let mut gone = 0;
    let deadline = Instant::now() + DEADLINE;
    while gone < 200 {
        assert!(
            Instant::now() < deadline,
            "{registered} registered, {gone} gone"
        );
        let line = serve.log.recv_timeout(DEADLINE).unwrap();
        registered += usize::from(line.ends_with(" connected"));
        gone += usize::from(line.contains(" gone: "));
    }
    assert_eq!((registered, gone), (201, 200));
    let _ = client.kill();
    let _ = client.wait();
}
