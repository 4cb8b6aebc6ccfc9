//! `open`: a recording made by the real binary (`record` against `sim engine` and
//! `sim client` processes) opened in the window, driven headlessly by egui_kittest:
//! every panel shows the recorded data and the timeline moves it. A copy cut short,
//! and the file of a recorder killed with SIGKILL, open and say they are not finished;
//! files that are not recordings are one line and exit 1. The live view pauses and
//! scrubs back through its history.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::window::{Window, app, harness_sized, only_pane, step_until};
use common::{
    DEADLINE, SimEngine, inspector, record_live_run, run_inspector, sim_client, temp_dir, temp_file,
};
use egui_kittest::kittest::NodeT as _;
use egui_kittest::kittest::Queryable as _;
use lrbc_inspector::ui::InspectorApp;
use lrbc_inspector::ui::settings::{Pane, Settings};
use lrbc_live::traffic::{Decoded, TrafficRow};

fn target_file(tag: &str) -> PathBuf {
    temp_file(&format!("replay-{tag}"), "mcap")
}

/// Records 2 s of an engine with 24 envs (obs 48, act 2) that writes a NaN at step 150,
/// stepped by a client at 200 Hz, every env recorded: several MiB, several chunks.
fn record_a_live_run() -> PathBuf {
    let engine = [
        "--envs",
        "24",
        "--obs",
        "48",
        "--act",
        "2",
        "--image",
        "none",
        "--nan-at-step",
        "150",
    ];
    record_live_run("replay", &engine, &["--duration", "2", "--all-envs"]).0
}

/// `app` in a harness tall enough for the envs panel's values report below its plots.
fn harness(app: InspectorApp) -> Window {
    harness_sized(app, egui::vec2(1400.0, 2400.0))
}

fn frame_seq(app: &InspectorApp) -> Option<u64> {
    let (_, p) = app.session.as_ref()?.recording()?;
    p.state().frame_seq
}

/// The frame the panels draw (the player's data, not its timeline state).
fn latest_seq(app: &InspectorApp) -> Option<u64> {
    let s = app.session.as_ref()?;
    s.sampler.lock().latest.as_ref().map(|(seq, _)| *seq)
}

/// The frames of the panels' data: how many, and the newest one's frame_seq.
fn panel_frames(app: &InspectorApp) -> (usize, u64) {
    let data = app.session.as_ref().unwrap().data();
    (data.frames.len(), data.frames.back().unwrap().frame_seq)
}

fn opened(path: &Path) -> Window {
    let mut app = app(
        Settings {
            screenshot_dir: temp_dir("replay-ui"),
            ..Settings::default()
        },
        None,
    );
    app.open_recording(path);
    harness(app)
}

#[test]
fn a_recording_opens_in_the_window_and_every_panel_shows_it() {
    let path = record_a_live_run();
    let (code, out, err) = run_inspector(&["open", path.to_str().unwrap(), "--info"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("24 envs × obs 48 × act 2"), "{out}");
    assert!(out.contains("\nfinished"), "{out}");

    let mut h = opened(&path);
    assert!(
        h.state().session.is_some(),
        "{:?}",
        h.state().status_message()
    );
    assert!(h.state().title().ends_with("(recording)"));
    step_until(&mut h, "the first frame", |a| frame_seq(a).is_some());
    let first = frame_seq(h.state()).unwrap();

    // The timeline: → steps one frame; "next event" goes to the recording's first event,
    // the NaN of step 150 (env 0's first observation and its reward).
    h.key_press(egui::Key::ArrowRight);
    // (The next recorded frame: the recorder may have missed some.)
    step_until(&mut h, "a step", |a| {
        frame_seq(a).is_some_and(|s| s > first)
    });
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
    step_until(&mut h, "the recording's events", |a| !events(a).is_empty());
    let found = events(h.state());
    assert!(
        found
            .iter()
            .any(|e| e.kind == lrbc_live::detect::EventKind::Nonfinite
                && e.env == Some(0)
                && e.first_frame == 150),
        "{found:?}"
    );
    h.get_by_label("next event").click();
    step_until(&mut h, "the next event", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.sampler.lock().latest.clone())
            .is_some_and(|(_, hot)| hot.rewards.iter().any(|r| r.is_nan()))
    });
    let at_nan = latest_seq(h.state()).unwrap();
    assert_eq!(at_nan, 150);
    // The Values line counts the recording's bad values: env 0's NaN observation and
    // reward of frame 150.
    only_pane(h.state_mut(), Pane::Envs);
    h.run_steps(2);
    assert!(
        h.query_by_label("NaN 2").is_some(),
        "the envs panel does not show NaN 2"
    );
    // The Events panel lists them; a click on one keeps the cursor there.
    only_pane(h.state_mut(), Pane::Events);
    h.run_steps(2);
    let rows = h
        .query_all_by_label_contains("nonfinite")
        .filter(|n| {
            n.accesskit_node()
                .label()
                .or_else(|| n.accesskit_node().value())
                .is_some_and(|t| t.contains("150"))
        })
        .count();
    assert!(
        rows >= 2,
        "the Events panel does not list the two events of frame 150"
    );

    // Counters and header show the frame at the cursor.
    only_pane(h.state_mut(), Pane::Counters);
    h.run_steps(2);
    assert!(
        h.query_all_by_label(&at_nan.to_string()).count() > 0,
        "counters do not show frame_seq {at_nan}"
    );
    only_pane(h.state_mut(), Pane::Header);
    h.run_steps(2);
    assert!(h.query_by_label("frame_seq").is_some());
    assert!(
        h.query_all_by_label(&at_nan.to_string()).count() > 0,
        "the header does not show frame_seq {at_nan}"
    );

    // The envs: the watched envs' points and rows up to the cursor.
    {
        let s = h.state().session.as_ref().unwrap();
        let d = s.sampler.lock();
        let env0 = d.envs.get(&0).expect("env 0 is watched");
        assert!(env0.points.len() > 1);
        assert_eq!(env0.points.back().unwrap().frame_seq, at_nan);
        assert_eq!(env0.detail.back().unwrap().values.len(), 50);
        assert!(d.frames.len() > 1);
    }

    // To the end: the traffic of the recording, decoded.
    {
        let (_, p) = h.state().session.as_ref().unwrap().recording().unwrap();
        let end = p.state().range.1;
        p.request(|s| s.seek_to = Some(end));
    }
    step_until(&mut h, "the last frame", |a| {
        frame_seq(a).is_some_and(|s| s > at_nan)
            && a.session.as_ref().is_some_and(|s| {
                s.traffic.lock().rows.iter().any(|r| {
                    matches!(r, TrafficRow::Record(r) if matches!(r.decoded, Decoded::Envelope(_)))
                })
            })
    });
    let method = {
        let s = h.state().session.as_ref().unwrap();
        let store = s.traffic.lock();
        store
            .rows
            .iter()
            .rev()
            .find_map(|r| match r {
                TrafficRow::Record(r) if !r.method.is_empty() => Some(r.method.clone()),
                _ => None,
            })
            .expect("a decoded method")
    };
    only_pane(h.state_mut(), Pane::Traffic);
    h.run_steps(3);
    let rows: Vec<String> = h
        .query_all_by_label_contains(&method)
        .filter_map(|n| {
            // A label's text is its value.
            let a = n.accesskit_node();
            a.label().or_else(|| a.value())
        })
        .collect();
    assert!(!rows.is_empty(), "the traffic panel does not show {method}");
    // Its rows' times count from the recording's start, not all 0.000.
    let times: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(times.iter().any(|&t| t > 0.0), "rows at time 0: {rows:?}");
    // Control is refused on a recording, with the reason.
    only_pane(h.state_mut(), Pane::Rpc);
    h.run_steps(2);
    assert!(
        h.query_by_label_contains("control needs a live segment")
            .is_some()
    );
    // Space plays: the frame moves on by itself (from the start).
    {
        let (_, p) = h.state().session.as_ref().unwrap().recording().unwrap();
        let start = p.state().range.0;
        p.request(|s| s.seek_to = Some(start));
    }
    step_until(&mut h, "back at the start", |a| frame_seq(a) == Some(first));
    h.key_press(egui::Key::Space);
    step_until(&mut h, "playing", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.recording())
            .is_some_and(|(_, p)| p.state().playing)
    });
    step_until(&mut h, "frames played", |a| {
        frame_seq(a).is_some_and(|s| s > first + 2)
    });
}

#[test]
fn a_recording_cut_short_opens_and_says_it_is_not_finished() {
    let path = record_a_live_run();
    let bytes = std::fs::read(&path).unwrap();
    let cut = target_file("cut");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let (code, out, err) = run_inspector(&["open", cut.to_str().unwrap(), "--info"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("not finished: read up to"), "{out}");
    let mut h = opened(&cut);
    let said = h.state().status_message().unwrap_or_default().to_string();
    assert!(said.contains("not finished"), "{said}");
    step_until(&mut h, "a frame", |a| frame_seq(a).is_some());
    assert!(h.query_all_by_label_contains("not finished").count() > 0);
}

#[test]
fn a_recorder_killed_with_sigkill_leaves_a_file_open_reads_up_to_its_last_chunk() {
    let engine = SimEngine::start(
        "replay",
        &[
            "--envs", "24", "--obs", "48", "--act", "2", "--image", "none",
        ],
    );
    let mut client = sim_client(&engine.name, "200");
    let out = target_file("killed");
    let mut record = inspector()
        .args(["record", "--shm", &engine.name, "--all-envs", "-o"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Past two chunks of 1 MiB.
    let deadline = Instant::now() + DEADLINE;
    while std::fs::metadata(&out).map_or(0, |m| m.len()) < 2_500_000 {
        assert!(Instant::now() < deadline, "the recording did not grow");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SIGKILL: nothing of the recorder's finishing runs.
    record.kill().unwrap();
    record.wait().unwrap();
    let _ = client.kill();
    let _ = client.wait();
    let (code, text, err) = run_inspector(&["open", out.to_str().unwrap(), "--info"]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("not finished: read up to"), "{text}");
    let frames: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("frames: "))
        .and_then(|n| n.parse().ok())
        .expect("a frame count");
    assert!(frames > 10, "{text}");
}

#[test]
fn files_that_are_not_recordings_are_one_line_and_exit_1() {
    let dir = temp_dir("replay-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("notes.mcap");
    std::fs::write(&text, "not an mcap file\n").unwrap();
    let (code, out, err) = run_inspector(&["open", text.to_str().unwrap()]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not an MCAP file"), "{err}");

    let foreign = dir.join("foreign.mcap");
    let mut w = mcap::Writer::new(std::io::BufWriter::new(
        std::fs::File::create(&foreign).unwrap(),
    ))
    .unwrap();
    let schema = w.add_schema("geometry.Pose", "jsonschema", b"{}").unwrap();
    let channel = w
        .add_channel(schema, "/pose", "json", &Default::default())
        .unwrap();
    w.write_to_known_channel(
        &mcap::records::MessageHeader {
            channel_id: channel,
            sequence: 0,
            log_time: 5,
            publish_time: 5,
        },
        b"{}",
    )
    .unwrap();
    w.finish().unwrap();
    drop(w);
    let (code, _, err) = run_inspector(&["open", foreign.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not an lrbc recording"), "{err}");
}

#[test]
fn the_live_view_pauses_and_scrubs_back_through_its_history() {
    use lrbc_sim::engine::Preset;
    use lrbc_sim::inprocess::SimRun;
    let sim = SimRun::start(Preset::Cams64, Some(300.0)).unwrap();
    let mut h = harness(app(
        Settings {
            screenshot_dir: temp_dir("replay-live"),
            ..Settings::default()
        },
        Some(sim.target()),
    ));
    step_until(&mut h, "sampled frames", |a| {
        a.session
            .as_ref()
            .is_some_and(|s| s.sampler.stats().frames.sampled > 30)
    });
    h.get_by_label("Pause live view").click();
    step_until(&mut h, "the pause", |a| {
        a.session.as_ref().is_some_and(|s| s.paused.is_some())
    });
    h.run_steps(2);
    assert!(h.query_by_label("live view paused").is_some());
    // The newest frame kept when paused.
    let (held, paused_at) = panel_frames(h.state());
    // The sampler goes on; the panels' data does not.
    step_until(&mut h, "more live frames", |a| {
        a.session
            .as_ref()
            .is_some_and(|s| s.sampler.lock().counters.frame_seq > paused_at + 10)
    });
    assert_eq!(panel_frames(h.state()).0, held);
    // A step back to the frame before in the history; the counters panel shows it.
    h.get_by_label("< frame").click();
    h.run_steps(2);
    let (kept, back) = panel_frames(h.state());
    assert!(back < paused_at, "{back} {paused_at}");
    assert_eq!(kept, held - 1);
    only_pane(h.state_mut(), Pane::Counters);
    h.run_steps(2);
    assert!(h.query_all_by_label(&back.to_string()).count() > 0);
    h.get_by_label("Resume live").click();
    step_until(&mut h, "live again", |a| {
        a.session.as_ref().is_some_and(|s| s.paused.is_none())
    });
    assert!(h.query_by_label("live view paused").is_none());
}

/// The newest message kept by `keep` (topic, data) at or before `t` in the file (read
/// whole, up to its last complete chunk: a test).
fn newest_on(bytes: &[u8], t: u64, keep: impl Fn(&str, &[u8]) -> bool) -> Option<(u64, Vec<u8>)> {
    let mut found = None;
    for m in mcap::MessageStream::new(bytes)
        .unwrap()
        .map_while(Result::ok)
    {
        // A ring entry's exact bytes, from its JSON message.
        let data = if m.channel.topic.starts_with("/lrbc/ring/")
            && !m.channel.topic.ends_with("/header")
        {
            lrbc_recording::format::ring_entry_payload(&m.data).unwrap()
        } else {
            m.data.to_vec()
        };
        if m.log_time <= t
            && keep(&m.channel.topic, &data)
            && found.as_ref().is_none_or(|(at, _)| m.log_time >= *at)
        {
            found = Some((m.log_time, data));
        }
    }
    found
}

#[test]
fn a_recording_with_images_shows_them_in_the_cameras_panel_as_of_the_cursor() {
    let engine = [
        "--envs", "3", "--obs", "3", "--act", "1", "--image", "32x24x3",
    ];
    let record = ["--duration", "3", "--envs", "0,2", "--images"];
    let (path, _) = record_live_run("replay-images", &engine, &record);
    let bytes = std::fs::read(&path).unwrap();

    let mut h = opened(&path);
    step_until(&mut h, "the first frame", |a| frame_seq(a).is_some());
    let range = {
        let (_, p) = h.state().session.as_ref().unwrap().recording().unwrap();
        // One traffic row: the streams' frames come from the file's index, not from
        // the rows of the history window.
        p.set_limits(lrbc_live::traffic::TrafficLimits {
            max_rows: 1,
            ..h.state().settings.traffic_limits()
        });
        p.state().range
    };
    // The middle, then the end: the images shown are the newest at or before the cursor.
    for target in [range.0 + (range.1 - range.0) / 2, range.1] {
        {
            let (_, p) = h.state().session.as_ref().unwrap().recording().unwrap();
            p.request(|s| s.seek_to = Some(target));
        }
        step_until(&mut h, "the images at the cursor", |a| {
            a.session.as_ref().is_some_and(|s| {
                s.recording()
                    .is_some_and(|(_, p)| p.state().cursor_ns == target)
                    && s.sampler
                        .lock()
                        .image
                        .as_ref()
                        .is_some_and(|i| i.captured_ns <= target)
                    && !s.traffic.lock().streams.is_empty()
            })
        });
        // Settled: the player published the cursor.
        h.run_steps(3);
        let s = h.state().session.as_ref().unwrap();
        let image = s.sampler.lock().image.clone().unwrap();
        assert_eq!(
            (image.width, image.height, image.channels, image.num_envs),
            (32, 24, 3, 3)
        );
        let per = 32 * 24 * 3;
        for env in [0usize, 2] {
            let (_, raw) = newest_on(&bytes, target, |topic, _| {
                topic == format!("/lrbc/camera/env{env}")
            })
            .expect("a recorded image before the cursor");
            let raw = lrbc::rpc::foxglove_fb::root_as_raw_image(&raw).unwrap();
            assert_eq!(
                &image.pixels[env * per..(env + 1) * per],
                raw.data().unwrap().bytes(),
                "env {env} at {target}"
            );
        }
        assert!(
            image.pixels[per..2 * per].iter().all(|&p| p == 0),
            "env 1 is not recorded: black"
        );
        // Every stream's newest frame at or before the cursor, as its ring entry.
        let streams = s.traffic.lock().streams.clone();
        let mut sources = std::collections::BTreeSet::new();
        for m in mcap::MessageStream::new(&bytes).unwrap() {
            let m = m.unwrap();
            if m.log_time <= target && m.channel.topic.starts_with("/lrbc/ring/") {
                // The entry's exact bytes, from its JSON message.
                let payload = lrbc_recording::format::ring_entry_payload(&m.data).unwrap();
                sources.extend(lrbc::rpc::image::image_source(&payload));
            }
        }
        assert_eq!(
            streams
                .keys()
                .cloned()
                .collect::<std::collections::BTreeSet<_>>(),
            sources
        );
        for (source, st) in &streams {
            let (_, envelope) = newest_on(&bytes, target, |topic, data| {
                topic.starts_with("/lrbc/ring/")
                    && lrbc::rpc::image::image_source(data).as_deref() == Some(source.as_str())
            })
            .expect("the stream's ring entry");
            assert_eq!(&st.envelope[..], &envelope[..], "{source} at {target}");
            let shown = lrbc_recording::format::image_of(&st.envelope).unwrap();
            assert!(shown.is_ok(), "{source}: {shown:?}");
        }
    }
    let streams = h
        .state()
        .session
        .as_ref()
        .unwrap()
        .traffic
        .lock()
        .streams
        .len();
    only_pane(h.state_mut(), Pane::Cameras);
    h.run_steps(3);
    assert!(h.query_by_label_contains("32×24×3").is_some());
    // Env 1 was not recorded with images: its black tile is explained.
    assert!(
        h.query_by_label_contains("images of envs 0, 2 recorded")
            .is_some(),
        "the black tile is explained"
    );
    assert!(
        h.query_by_label(&format!("Streamed in traffic ({streams})"))
            .is_some()
    );
    // A screenshot of the selected env (0) is its recorded image.
    h.get_by_label("Quick save env").click();
    h.run_steps(2);
    let dir = h.state().settings.screenshot_dir.clone();
    let png = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "png"))
        .expect("a screenshot");
    let shot = image::open(&png).unwrap().to_rgb8();
    let image = h
        .state()
        .session
        .as_ref()
        .unwrap()
        .sampler
        .lock()
        .image
        .clone()
        .unwrap();
    assert_eq!(shot.as_raw()[..], image.pixels[..32 * 24 * 3]);

    // Cut short inside a chunk two thirds of the way (no summary: the index is walked),
    // the images up to the last complete chunk.
    let cut = target_file("images-cut");
    let chunks = lrbc_recording::replay::Recording::open(&path)
        .unwrap()
        .chunks;
    let inside = chunks[chunks.len() * 2 / 3];
    let kept = &bytes[..(inside.offset + inside.length / 2) as usize];
    std::fs::write(&cut, kept).unwrap();
    let mut rec = lrbc_recording::replay::Recording::open(&cut).unwrap();
    assert!(rec.unfinished_at.is_some());
    let end = rec.time_range().unwrap().1;
    let latest = rec.images_at(end).unwrap();
    assert_eq!(latest.cameras.keys().copied().collect::<Vec<_>>(), [0, 2]);
    for (env, (at, data)) in &latest.cameras {
        let (t, raw) = newest_on(kept, end, |topic, _| {
            topic == format!("/lrbc/camera/env{env}")
        })
        .unwrap();
        assert_eq!((*at, &data[..]), (t, &raw[..]), "env {env}");
    }
    assert!(!latest.streams.is_empty());
    for (name, (at, envelope)) in &latest.streams {
        let (t, _) = newest_on(kept, end, |topic, _| {
            topic == format!("/lrbc/stream/{name}")
        })
        .unwrap();
        assert_eq!(*at, t, "{name}");
        assert!(lrbc_recording::format::image_of(envelope).unwrap().is_ok());
    }
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&cut);
}
