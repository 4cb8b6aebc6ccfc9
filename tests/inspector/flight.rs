//! The window's flight recorder, driven headlessly with egui_kittest against a simulated
//! engine and client on threads of this process: it saves the last seconds by itself
//! when a NaN shows, when the engine stops or is killed and when the segment is
//! replaced, and records on "Record".

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::path::Path;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::temp_dir;
use common::window::{Window, app, harness, record_frames, step_until};
use egui_kittest::kittest::Queryable as _;
use lrbc::attach::Target;
use lrbc::rpc::recording_fb;
use lrbc_inspector::ui::InspectorApp;
use lrbc_inspector::ui::settings::Settings;
use lrbc_sim::client::{self, ClientConfig, Policy};
use lrbc_sim::engine::{Engine, EngineConfig, Mode};

/// An in-process engine (writing a NaN at `nan_at_step`) and a client stepping it.
struct Sim {
    name: String,
    engine_stop: Arc<AtomicBool>,
    client_stop: Arc<AtomicBool>,
    engine: Option<std::thread::JoinHandle<()>>,
    client: Option<std::thread::JoinHandle<()>>,
}

impl Sim {
    fn start(tag: &str, nan_at_step: Option<u64>) -> Self {
        let name = format!("lrbc-flight-{tag}-{}", std::process::id());
        let mut engine = Engine::create(EngineConfig {
            name: name.clone(),
            layout: lrbc::layout::plan::PlanLayout::Lrbc { ext: true },
            num_envs: 8,
            obs_size: 6,
            act_size: 2,
            image: None,
            mode: Mode::Training,
            hz: 60.0,
            ring_size: 64 * 1024,
            ctl_ring_size: None,
            force: false,
            dynamics: true,
            camera_hz: 30.0,
            seed: 5,
            nan_at_step,
            plants: Vec::new(),
        })
        .unwrap();
        let engine_stop = Arc::new(AtomicBool::new(false));
        let client_stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&engine_stop);
        let engine = std::thread::Builder::new()
            .name("sim-engine".into())
            .spawn(move || {
                engine.run(&s);
            })
            .unwrap();
        let s = Arc::clone(&client_stop);
        let cfg = ClientConfig {
            name: name.clone(),
            steps: None,
            hz: Some(100.0),
            policy: Policy::Balance,
            commands: true,
            record_latency: false,
            step_timeout: Duration::from_secs(5),
            rollout: None,
        };
        let client = std::thread::Builder::new()
            .name("sim-client".into())
            .spawn(move || {
                let _ = client::run(&cfg, &s);
            })
            .unwrap();
        Self {
            name,
            engine_stop,
            client_stop,
            engine: Some(engine),
            client: Some(client),
        }
    }

    /// Stops the engine: it removes its segment.
    fn stop_engine(&mut self) {
        self.client_stop.store(true, Ordering::Relaxed);
        self.engine_stop.store(true, Ordering::Relaxed);
        for t in [self.client.take(), self.engine.take()]
            .into_iter()
            .flatten()
        {
            t.join().unwrap();
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.stop_engine();
    }
}

/// The window attached to `target`, its recordings and screenshots going to `dir`
/// (emptied first).
fn window(target: Target, dir: &Path) -> Window {
    let _ = std::fs::remove_dir_all(dir);
    let settings = Settings {
        recordings_dir: dir.to_path_buf(),
        screenshot_dir: dir.to_path_buf(),
        // Every frame, whatever the machine's load: the tests look for given frames (the
        // NaN at a given step) in what the flight recorder saved.
        busy_budget_percent: 0.0,
        ..Settings::default()
    };
    harness(app(settings, Some(target)))
}

/// The frame_seqs of a file's frames and those holding a NaN.
fn frames(path: &Path) -> (Vec<u64>, Vec<u64>) {
    let bytes = std::fs::read(path).unwrap();
    let (mut seqs, mut nan) = (Vec::new(), Vec::new());
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        if m.channel.topic != "/lrbc/frame" {
            continue;
        }
        let f = recording_fb::root_as_frame(&m.data).unwrap();
        seqs.push(f.frame_seq());
        let values = f.observations().unwrap().iter().chain(f.rewards().unwrap());
        if values.into_iter().any(f32::is_nan) {
            nan.push(f.frame_seq());
        }
    }
    (seqs, nan)
}

#[test]
fn the_first_nan_saves_the_last_seconds_by_itself_once() {
    let sim = Sim::start("nan", Some(40));
    let dir = temp_dir("flight-nan");
    let mut h = window(Target::Shm(sim.name.clone()), &dir);
    step_until(&mut h, "a file saved for the NaN", |a| {
        a.flight_last_file().is_some()
    });
    let first = h.state().flight_last_file().unwrap().to_path_buf();
    // The status line and the file name the event.
    let note = h.state().flight_note().unwrap_or_default().to_string();
    assert!(note.contains("nonfinite at frame 40, env 0"), "{note}");
    assert!(note.contains(&first.display().to_string()), "{note}");
    let file_name = first.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        file_name.starts_with(&format!("lrbc-{}-", sim.name)),
        "{file_name}"
    );
    assert!(
        file_name.ends_with("Z-nonfinite-f40-env0.mcap"),
        "{file_name}"
    );
    let (seqs, nan) = frames(&first);
    assert!(!seqs.is_empty());
    assert_eq!(nan, vec![40], "the NaN's frame in {seqs:?}");
    // The seconds around it: frames before and after the event.
    assert!(
        seqs.first() < Some(&40) && seqs.last() > Some(&40),
        "{seqs:?}"
    );
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    // The independent reader (the PyPI mcap package) reads the saved file (where the
    // tests' Python is: not under Wine).
    #[cfg(not(windows))]
    {
        let v = common::python("read_recording.py", &[&first.to_string_lossy()]);
        assert_eq!(
            v["schema_names"]["/lrbc/frame"], "lrbc.recording.Frame",
            "{v}"
        );
        assert_eq!(v["nan_frames"], serde_json::json!(nan), "{v}");
        let counts = &v["metadata"]["lrbc.counts"];
        assert_eq!(counts["frames_recorded"], seqs.len().to_string(), "{v}");
        assert_eq!(counts["frames_dropped"], "0", "{v}");
    }
    // The window's detector found it too, and frames go on: still one file.
    let totals = |a: &InspectorApp| {
        a.session
            .as_ref()
            .and_then(|s| s.events())
            .map(|l| l.lock().unwrap().totals())
            .unwrap_or_default()
    };
    assert!(
        totals(h.state()).of(lrbc_live::detect::EventKind::Nonfinite) >= 1,
        "{:?}",
        totals(h.state())
    );
    let checked = totals(h.state()).frames_checked;
    step_until(&mut h, "a hundred frames more", |a| {
        totals(a).frames_checked >= checked + 100
    });
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
}

// Unix: the in-process engine's segment goes when it stops (on Windows the window's own
// mapping keeps it, and the engine's pid, this process's, stays alive).
#[cfg(unix)]
#[test]
fn a_stopped_engine_saves_the_last_seconds_by_itself() {
    let mut sim = Sim::start("stop", None);
    let dir = temp_dir("flight-stop");
    let mut h = window(Target::Shm(sim.name.clone()), &dir);
    step_until(&mut h, "frames in the flight recorder", |a| {
        a.flight_status().rolling_frames > 5
    });
    let last = h.state().flight_status().rolling_frames;
    sim.stop_engine();
    step_until(&mut h, "a file saved as the engine went", |a| {
        a.flight_last_file().is_some()
    });
    let path = h.state().flight_last_file().unwrap().to_path_buf();
    let note = h.state().flight_note().unwrap_or_default().to_string();
    assert!(note.starts_with("the engine is gone: saved"), "{note}");
    let (seqs, _) = frames(&path);
    assert!(seqs.len() as u64 >= last, "{} < {last}", seqs.len());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn record_writes_from_now_until_pressed_again() {
    let sim = Sim::start("rec", None);
    let dir = temp_dir("flight-rec");
    let mut h = window(Target::Shm(sim.name.clone()), &dir);
    step_until(&mut h, "the flight recorder", |a| {
        a.flight_status().rolling_frames > 0
    });
    // The buttons of the status bar.
    h.get_by_label("Record").click();
    h.run_steps(2);
    step_until(&mut h, "frames recorded", |a| {
        a.flight_status()
            .recording
            .as_ref()
            .is_some_and(|r| r.frames >= 20)
    });
    assert!(h.query_by_label_contains("REC ").is_some());
    h.get_by_label("Stop recording").click();
    h.run_steps(2);
    step_until(&mut h, "the recording finished", |a| {
        a.flight_last_file().is_some()
    });
    assert!(h.query_by_label_contains("REC ").is_none());
    // The settings menu shows the flight recorder's settings and what it holds.
    h.get_by_label("Settings").click();
    h.run_steps(2);
    assert!(h.query_by_label("Flight recorder (s)").is_some());
    assert!(h.query_by_label("Recordings folder").is_some());
    assert!(h.query_by_label_contains(" MiB: ").is_some());
    let path = h.state().flight_last_file().unwrap().to_path_buf();
    let message = h.state().flight_note().unwrap_or_default().to_string();
    assert!(message.starts_with("recorded "), "{message}");
    let (seqs, _) = frames(&path);
    assert!(seqs.len() >= 20, "{}", seqs.len());
    // Its counts are the file's, not the flight recorder's since it started.
    let counts = lrbc_recording::replay::Recording::open(&path)
        .unwrap()
        .counts()
        .unwrap()
        .unwrap();
    assert_eq!(counts.frames_recorded, seqs.len() as u64);
    let bytes = std::fs::read(&path).unwrap();
    // A finished file: its summary is there.
    assert!(mcap::Summary::read(&bytes).unwrap().is_some());
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
}

// Unix: a segment's name is taken over by a new one while the window is attached.
#[cfg(unix)]
#[test]
fn a_replaced_segment_saves_the_last_seconds_of_the_old_one() {
    use common::window::replacement_engine;
    let sim = Sim::start("replaced", None);
    let dir = temp_dir("flight-replaced");
    let mut h = window(Target::Shm(sim.name.clone()), &dir);
    step_until(&mut h, "the flight recorder", |a| {
        a.flight_status().rolling_frames > 5
    });
    let engine = replacement_engine(&sim.name, 3, 2, 2);
    step_until(&mut h, "a file saved as the segment was replaced", |a| {
        a.flight_note()
            .is_some_and(|n| n.starts_with("the segment was replaced: saved"))
    });
    let path = h.state().flight_last_file().unwrap().to_path_buf();
    // The old segment's frames: 8 envs' rewards.
    let bytes = std::fs::read(&path).unwrap();
    let first = mcap::MessageStream::new(&bytes)
        .unwrap()
        .map(Result::unwrap)
        .find(|m| m.channel.topic == "/lrbc/frame")
        .unwrap();
    let frame = recording_fb::root_as_frame(&first.data).unwrap();
    assert_eq!(frame.rewards().unwrap().len(), 8);
    drop(engine);
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
}

// Unix: a killed engine process leaves its segment behind with its dead pid.
#[cfg(unix)]
#[test]
fn a_killed_engine_process_saves_the_last_seconds() {
    use common::{SimEngine, sim_client};
    let mut engine = SimEngine::start(
        "flight-kill",
        &[
            "--envs", "3", "--obs", "4", "--act", "1", "--image", "none", "--hz", "200",
        ],
    );
    let name = engine.name.clone();
    let shm = std::path::PathBuf::from("/dev/shm").join(&name);
    let mut client = sim_client(&name, "200");
    let dir = temp_dir("flight-kill");
    let mut h = window(Target::Shm(name), &dir);
    step_until(&mut h, "frames in the flight recorder", |a| {
        a.flight_status().rolling_frames > 5
    });
    let mut process = engine.child.take().unwrap();
    process.kill().unwrap();
    let _ = process.wait();
    step_until(&mut h, "a file saved as the engine died", |a| {
        a.flight_note()
            .is_some_and(|n| n.starts_with("the engine is gone: saved"))
    });
    let path = h.state().flight_last_file().unwrap().to_path_buf();
    let (seqs, _) = frames(&path);
    assert!(seqs.len() > 5, "{seqs:?}");
    let _ = client.kill();
    let _ = client.wait();
    let _ = std::fs::remove_file(&shm);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn save_writes_camera_images_with_the_frames() {
    let sim =
        lrbc_sim::inprocess::SimRun::start(lrbc_sim::engine::Preset::Cams64, Some(300.0)).unwrap();
    let dir = temp_dir("flight-images");
    let mut h = window(sim.target(), &dir);
    step_until(&mut h, "frames in the flight recorder", |a| {
        a.flight_status().rolling_frames > 30
    });
    h.get_by_label_contains("Save last").click();
    step_until(&mut h, "the saved file", |a| a.flight_last_file().is_some());
    let note = h.state().flight_note().unwrap_or_default().to_string();
    assert!(
        note.starts_with("saved on request: saved the last"),
        "{note}"
    );
    let bytes = std::fs::read(h.state().flight_last_file().unwrap()).unwrap();
    let mut images = 0;
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        if !m.channel.topic.starts_with("/lrbc/camera/env") {
            continue;
        }
        assert_eq!(m.channel.schema.as_ref().unwrap().name, "foxglove.RawImage");
        let img = lrbc::rpc::foxglove_fb::root_as_raw_image(&m.data).unwrap();
        assert_eq!(
            (img.width(), img.height(), img.encoding()),
            (64, 64, Some("rgb8"))
        );
        assert_eq!(img.data().unwrap().len(), 64 * 64 * 3);
        images += 1;
    }
    assert!(images > 0, "no camera image in the saved file");
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A segment truncated under the window while its writer goes on publishing `frame_seq`
/// in the header page (a separate process): the frames after it are counted unreadable
/// and kept nowhere, neither in the panels' history nor in the flight recorder, which
/// saves the last seconds by itself with the truncation recorded on `/lrbc/state`.
#[cfg(unix)]
#[test]
fn a_truncated_segment_keeps_no_zero_frame_and_its_saved_file_says_truncated() {
    let mut w = common::PyWriter::start("wintrunc", &[]);
    let dir = temp_dir("flight-trunc");
    let mut h = window(Target::Shm(w.name.clone()), &dir);
    let stats = |a: &InspectorApp| a.session.as_ref().map(|s| s.sampler.stats());
    step_until(&mut h, "attached", |a| stats(a).is_some());
    // The flight recorder joins the frame follower from a thread of its own after the
    // attach: a frame published before it joined is not its. Tick until it has one.
    let mut ticks = 0u64;
    let deadline = std::time::Instant::now() + common::DEADLINE;
    while h.state().flight_status().rolling_frames < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for a tick in the flight recorder"
        );
        assert_eq!(w.send("tick"), "ok");
        ticks += 1;
        let wait = std::time::Instant::now() + Duration::from_secs(1);
        while h.state().flight_status().rolling_frames < 1 && std::time::Instant::now() < wait {
            h.step();
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    while ticks < 5 {
        assert_eq!(w.send("tick"), "ok");
        ticks += 1;
    }
    step_until(&mut h, "frames sampled", |a| {
        stats(a).is_some_and(|s| s.frames.sampled >= 1)
    });
    // The writer starts at frame_seq 41: each tick publishes the next, the last good one.
    let last_good = 41 + ticks;
    let seen = |a: &InspectorApp| stats(a).map_or(0, |s| s.frames.seen);
    step_until(&mut h, "the last good frame seen", |a| {
        a.session.as_ref().is_some_and(|s| {
            s.sampler
                .lock()
                .report
                .as_ref()
                .is_some_and(|r| r.frame_seq == last_good)
        })
    });
    let sampled = stats(h.state()).unwrap().frames.sampled;
    assert_eq!(w.send("shrink 4096"), "ok");
    for _ in 0..5 {
        assert_eq!(w.send("tick"), "ok");
    }
    step_until(&mut h, "the frames after the truncation counted", |a| {
        seen(a) >= 10 && a.flight_last_file().is_some()
    });
    let s = stats(h.state()).unwrap();
    assert_eq!(s.frames.sampled, sampled, "nothing sampled after it: {s:?}");
    assert!(s.frames.unreadable >= 1, "{s:?}");
    assert_eq!(
        s.frames.unreadable + s.frames.missed + s.frames.torn + s.frames.skipped + s.frames.sampled,
        s.frames.seen,
        "every frame seen is accounted for: {s:?}"
    );
    let note = h.state().flight_note().unwrap_or_default().to_string();
    assert!(
        note.starts_with("the segment was truncated: saved"),
        "{note}"
    );
    let path = h.state().flight_last_file().unwrap().to_path_buf();
    let (seqs, _) = frames(&path);
    assert!(!seqs.is_empty());
    assert!(
        seqs.iter().all(|&q| q <= last_good),
        "no frame after the truncation: {seqs:?} (last good {last_good})"
    );
    let bytes = std::fs::read(&path).unwrap();
    let mut states = Vec::new();
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        match m.channel.topic.as_str() {
            "/lrbc/frame" => {
                let f = recording_fb::root_as_frame(&m.data).unwrap();
                let rewards: Vec<f32> = f.rewards().unwrap().iter().collect();
                assert!(
                    rewards.iter().any(|&r| r != 0.0),
                    "a frame of zeros kept: {} {rewards:?}",
                    f.frame_seq()
                );
            }
            "/lrbc/state" => {
                let v: serde_json::Value = serde_json::from_slice(&m.data).unwrap();
                states.push(v["state"].as_str().unwrap_or_default().to_string());
            }
            _ => {}
        }
    }
    assert_eq!(states, ["truncated"], "the truncation is recorded");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn attaching_to_another_segment_moves_the_flight_recorder_to_it() {
    use lrbc_sim::engine::Preset;
    use lrbc_sim::inprocess::SimRun;
    let first = SimRun::start(Preset::Cams64, Some(200.0)).unwrap();
    let second = SimRun::start(Preset::Cams16, Some(200.0)).unwrap();
    let dir = temp_dir("flight-switch");
    let mut h = window(first.target(), &dir);
    step_until(&mut h, "the flight recorder", |a| {
        a.flight_status().rolling_frames > 0
    });
    h.state_mut().attach(second.target());
    h.run_steps(2);
    let path = record_frames(&mut h, 10);
    let rec = lrbc_recording::replay::Recording::open(&path).unwrap();
    assert_eq!(rec.geometry.num_envs, 16, "the segment attached last");
    let _ = std::fs::remove_dir_all(&dir);
}
