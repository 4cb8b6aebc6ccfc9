//! The window as a viewer of a served run, driven headlessly with egui_kittest: a
//! simulated engine and client and `serve`, each in its own process, the window in this
//! one, connected over loopback.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use common::served::Serve;
use common::window::{Window, app, harness, only_pane, record_frames, step_until};
use common::{Guarded, SimEngine, sim_client, temp_dir};
use egui_kittest::kittest::Queryable as _;
use lrbc_inspector::ui::InspectorApp;
use lrbc_inspector::ui::settings::{Pane, Settings};

fn settings(tag: &str) -> Settings {
    let dir = temp_dir(tag);
    Settings {
        screenshot_dir: dir.clone(),
        recordings_dir: dir.join("recordings"),
        ..Settings::default()
    }
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn frames(a: &InspectorApp) -> u64 {
    a.session
        .as_ref()
        .map_or(0, |s| s.sampler.stats().frames.sampled)
}

fn described(a: &InspectorApp) -> u64 {
    a.session
        .as_ref()
        .and_then(|s| s.remote())
        .filter(|(r, _)| r.geometry.size_bytes > 0)
        .map_or(0, |(r, _)| r.generation)
}

/// Steps until the window has the run's description and some frames.
fn wait_for_frames(h: &mut Window, more_than: u64) {
    step_until(h, "the run's description", |a| described(a) > 0);
    step_until(h, "frames", |a| frames(a) > more_than);
}

#[test]
fn the_window_connected_to_a_served_run_shows_its_panels_names_the_server_and_toggles_through_its_service()
 {
    let engine = SimEngine::start("remote-window", &["--preset", "cams64"]);
    let _client = Guarded::new(sim_client(&engine.name, "200"));
    let serve = Serve::start(&engine.name, &["--images", "--allow-control"]);
    let addr = serve.url.trim_start_matches("ws://").to_string();
    let mut a = app(settings("remote-window"), None);
    a.connect(&serve.url);
    let mut h = harness(a);
    wait_for_frames(&mut h, 20);
    let title = h.state().title();
    assert_eq!(title, format!("lrbc-inspector — {addr} (served)"));
    // The panels: the run's geometry, the envs' history, the traffic, the cameras.
    {
        let s = h.state().session.as_ref().unwrap();
        assert_eq!(s.geometry().num_envs, 64);
        let d = s.data();
        assert!(d.frames.len() > 20, "{} frames of overview", d.frames.len());
        assert!(
            d.envs.values().any(|e| e.points.len() > 10),
            "the watched envs' history"
        );
    }
    step_until(&mut h, "the server's state and rates", |a| {
        a.session
            .as_ref()
            .is_some_and(|s| s.data().report.is_some())
    });
    step_until(&mut h, "traffic rows", |a| {
        a.session.as_ref().is_some_and(|s| s.store().rows.len() > 5)
    });
    step_until(&mut h, "a camera image", |a| {
        a.session.as_ref().is_some_and(|s| s.data().image.is_some())
    });
    // The status bar shows the link.
    step_until(&mut h, "a latency figure", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.link())
            .is_some_and(|l| l.latency_ms.is_some())
    });
    assert!(
        h.query_by_label_contains("connected · link").is_some(),
        "the link in the status bar"
    );
    // The header panel shows the header the server described.
    assert!(
        h.query_by_label_contains("num_envs").is_some() || {
            only_pane(h.state_mut(), Pane::Header);
            h.run_steps(2);
            h.query_by_label_contains("num_envs").is_some()
        }
    );
    // A toggle goes through the server's service and the engine's flags follow.
    only_pane(h.state_mut(), Pane::Rpc);
    let flags = |a: &InspectorApp| {
        a.session
            .as_ref()
            .and_then(|s| s.sampler.lock().counters.service_flags)
    };
    step_until(&mut h, "service_flags from the server", |a| {
        flags(a) == Some(0x7f)
    });
    h.get_by_label("Camera").click();
    step_until(&mut h, "the camera bit to clear", |a| {
        flags(a) == Some(0x7f & !(1 << 4))
    });
    step_until(&mut h, "the response", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.control_state())
            .is_some_and(|c| c.last.is_some())
    });
    h.step();
    assert!(
        h.query_by_label_contains("Camera is now disabled")
            .is_some()
    );
}

#[test]
fn a_server_without_control_says_so_and_a_restarted_server_is_followed() {
    let engine = SimEngine::start(
        "remote-restart",
        &["--envs", "6", "--obs", "5", "--act", "2", "--image", "none"],
    );
    let _client = Guarded::new(sim_client(&engine.name, "200"));
    let listen = format!("127.0.0.1:{}", free_port());
    let serve = Serve::start_on(&engine.name, &listen, &[]);
    let mut a = app(settings("remote-restart"), None);
    only_pane(&mut a, Pane::Rpc);
    a.connect(&serve.url);
    let mut h = harness(a);
    wait_for_frames(&mut h, 5);
    assert!(
        h.query_by_label_contains("does not offer control (serve it with --allow-control)")
            .is_some(),
        "the RPC panel says why its toggles are off"
    );
    let session = |a: &InspectorApp| a.session.as_ref().and_then(|s| s.link());
    let first = session(h.state()).unwrap().session_id;
    // The server goes away: the link says so and tries again.
    drop(serve);
    step_until(&mut h, "the link to wait", |a| {
        session(a).is_some_and(|l| l.state != lrbc_remote::view::LinkState::Connected)
    });
    assert!(h.query_by_label_contains("trying again in").is_some());
    // Another server on the same address: a new session, the run described again.
    let _serve = Serve::start_on(&engine.name, &listen, &[]);
    step_until(&mut h, "the new session", |a| {
        session(a).is_some_and(|l| l.restarts == 1 && l.session_id != first)
    });
    step_until(&mut h, "the run described again", |a| described(a) >= 2);
    let before = frames(h.state());
    step_until(&mut h, "frames of the new session", |a| {
        frames(a) > before + 5
    });
    assert_eq!(session(h.state()).unwrap().reconnects, 1);
}

#[test]
fn an_address_that_is_not_a_server_is_one_line_in_the_attach_view() {
    let mut a = app(settings("remote-bad"), None);
    a.connect("http://node:1");
    let mut h = harness(a);
    h.step();
    assert!(h.state().session.is_none());
    let e = h.state().form.error.clone().unwrap();
    assert!(
        e.contains("is not a ws://HOST:PORT or wss://HOST:PORT address"),
        "{e}"
    );
}

#[test]
fn record_on_a_served_run_writes_a_recording_that_opens_as_a_local_one() {
    let engine = SimEngine::start(
        "remote-record",
        &[
            "--envs", "6", "--obs", "5", "--act", "2", "--image", "16x16x3",
        ],
    );
    let _client = Guarded::new(sim_client(&engine.name, "200"));
    // Images as PNG: the window decodes them, and records them as they came.
    let serve = Serve::start(&engine.name, &["--images", "--image-format", "png"]);
    let dir = temp_dir("remote-record");
    let mut s = settings("remote-record");
    s.recordings_dir = dir.clone();
    let mut a = app(s, None);
    a.connect(&serve.url);
    let mut h = harness(a);
    wait_for_frames(&mut h, 5);
    step_until(&mut h, "a camera image decoded from PNG", |a| {
        a.session.as_ref().is_some_and(|s| s.data().image.is_some())
    });
    step_until(&mut h, "the flight recorder", |a| {
        a.flight_status().rolling_frames > 0
    });
    let path = record_frames(&mut h, 30);
    assert!(path.starts_with(&dir), "{}", path.display());
    let mut rec = lrbc_recording::replay::Recording::open(&path).unwrap();
    assert_eq!(rec.geometry.num_envs, 6);
    assert_eq!(rec.geometry.obs_size, 5);
    let (start, end) = rec.time_range().unwrap();
    let mut seqs = Vec::new();
    rec.frames_between(start, end, |f| {
        seqs.push(f.frame_seq);
        true
    })
    .unwrap();
    assert!(seqs.len() >= 30, "{} frames", seqs.len());
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "frames in order");
    assert!(
        !rec.ring_between(start, end, 10_000).unwrap().is_empty(),
        "the rings' entries"
    );
    let cameras = rec.images_at(end).unwrap().cameras;
    let (_, image) = cameras.values().next().expect("the camera images");
    assert!(
        lrbc_recording::format::region_pixels(image, (16, 16, 3)).is_some(),
        "a recorded PNG image reads back as the region's pixels"
    );
    let counts = rec.counts().unwrap().unwrap();
    assert_eq!(counts.frames_recorded, seqs.len() as u64);
    // Save writes the last seconds too.
    h.state_mut().settings.recordings_dir = dir.join("saved");
    h.get_by_label_contains("Save last").click();
    h.run_steps(2);
    step_until(&mut h, "the save", |a| {
        a.flight_last_file()
            .is_some_and(|p| p.starts_with(dir.join("saved")))
    });
    let saved = h.state().flight_last_file().unwrap().to_path_buf();
    let saved = lrbc_recording::replay::Recording::open(&saved).unwrap();
    assert!(saved.frame_count.unwrap_or(0) > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn several_servers_each_have_a_row_and_choosing_one_shows_it_while_the_others_go_on() {
    let engines: Vec<SimEngine> = ["remote-node-a", "remote-node-b"]
        .iter()
        .map(|tag| {
            SimEngine::start(
                tag,
                &["--envs", "6", "--obs", "5", "--act", "2", "--image", "none"],
            )
        })
        .collect();
    let _clients: Vec<Guarded> = engines
        .iter()
        .map(|e| Guarded::new(sim_client(&e.name, "200")))
        .collect();
    let serves: Vec<Serve> = engines.iter().map(|e| Serve::start(&e.name, &[])).collect();
    let addrs: Vec<String> = serves
        .iter()
        .map(|s| s.url.trim_start_matches("ws://").to_string())
        .collect();
    // The first goes to the background before the window has seen its description.
    let mut a = app(settings("remote-nodes"), None);
    a.connect(&serves[0].url);
    a.connect(&serves[1].url);
    assert_eq!(a.nodes.len(), 1);
    let mut h = harness(a);
    assert_eq!(h.state().session.as_ref().unwrap().label(), addrs[1]);
    wait_for_frames(&mut h, 5);
    // Both servers have a row, with their figures.
    h.state_mut().show_attach = true;
    step_until(&mut h, "both rows with frame rates", |a| {
        let rows = a.node_rows();
        rows.len() == 2 && rows.iter().all(|r| r.frame_hz.is_some() && r.envs == 6)
    });
    for addr in &addrs {
        assert!(
            h.query_all_by_label(addr).next().is_some(),
            "a row for {addr}"
        );
    }
    let background = |a: &InspectorApp, addr: &str| {
        a.nodes
            .iter()
            .find(|n| n.label() == addr)
            .map_or(0, |n| n.sampler.stats().frames.sampled)
    };
    // The one not shown goes on.
    let before = background(h.state(), &addrs[0]);
    step_until(&mut h, "the node in the background to go on", |a| {
        background(a, &addrs[0]) > before + 5
    });
    // Connecting to a server connected already shows it (the field, as a user would).
    h.get_by_label("Connect to a server…").click();
    h.run_steps(2);
    h.get_by_label("Connect to a server…")
        .type_text(&serves[0].url);
    h.run_steps(2);
    h.get_by_label("Connect").click();
    h.run_steps(2);
    assert_eq!(h.state().session.as_ref().unwrap().label(), addrs[0]);
    assert!(!h.state().show_attach);
    assert_eq!(h.state().nodes.len(), 1, "no second connection to it");
    assert!(h.state().title().contains(&addrs[0]));
    // Choosing the other's row shows it.
    h.state_mut().show_attach = true;
    h.run_steps(2);
    let rows: Vec<_> = h.query_all_by_label("Show").collect();
    assert_eq!(rows.len(), 2);
    rows[1].click();
    h.run_steps(2);
    assert_eq!(h.state().session.as_ref().unwrap().label(), addrs[1]);
    assert_eq!(h.state().nodes.len(), 1);
}

#[test]
fn the_events_of_a_served_run_show_in_the_window_and_a_click_pauses_the_view_there() {
    // The engine plants a NaN in env 5's second observation at step 150.
    let engine = SimEngine::start(
        "remote-events",
        &[
            "--preset",
            "cams64",
            "--plant",
            "nan@150:env=5,channel=obs,index=1",
        ],
    );
    // The origin is the simulator's only if the server copied the frame before the
    // client sent its next actions: 20 ms a step leaves room for a loaded machine.
    let _client = Guarded::new(sim_client(&engine.name, "50"));
    let serve = Serve::start(&engine.name, &[]);
    let mut a = app(settings("remote-events"), None);
    a.connect(&serve.url);
    let mut h = harness(a);
    wait_for_frames(&mut h, 20);
    let events = |a: &InspectorApp| {
        a.session
            .as_ref()
            .and_then(|s| s.events())
            .map(|l| {
                l.lock()
                    .unwrap()
                    .events()
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    step_until(&mut h, "the server's event", |a| {
        events(a)
            .iter()
            .any(|e| e.kind == lrbc_live::detect::EventKind::Nonfinite && !e.ongoing)
    });
    let e = events(h.state())
        .into_iter()
        .find(|e| e.kind == lrbc_live::detect::EventKind::Nonfinite)
        .unwrap();
    assert_eq!((e.first_frame, e.env, e.index), (150, Some(5), Some(1)));
    assert_eq!(e.origin, Some(lrbc_live::detect::Origin::Simulator));
    // The server's detector checked the frames it saw.
    step_until(&mut h, "the server's figures", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.events())
            .is_some_and(|l| l.lock().unwrap().totals().frames_checked > 100)
    });
    // The window holds frame 150 (frames and events come on channels of their own).
    step_until(&mut h, "frames past the event", |a| {
        a.session
            .as_ref()
            .is_some_and(|s| s.data().frames.back().is_some_and(|f| f.frame_seq > 150))
    });
    // The Events panel lists it; a click pauses the view at its frame.
    only_pane(h.state_mut(), Pane::Events);
    h.run_steps(2);
    h.get_by_label_contains("nonfinite").click();
    h.run_steps(2);
    let s = h.state().session.as_ref().unwrap();
    let paused = s.paused.as_ref().expect("the view paused at the event");
    assert_eq!(paused.frame().map(|(seq, _)| seq), Some(150));
    assert!(h.state().settings.watched_envs.contains(5));
}
