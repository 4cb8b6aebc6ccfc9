//! The Events panel, driven headlessly by egui_kittest: live, against a simulated engine
//! and client on threads of this process whose engine plants a NaN and a done burst,
//! the panel lists them, its kind and env filters narrow the list, and a click on a row
//! pauses the view at the event's frame, watches its env and shows its camera, while the
//! status bar counts the events; on a recording, a click moves the timeline to the
//! event's frame.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::window::{Window, app, harness, labels_with, only_pane, settings_in, step_until};
use common::{temp_dir, unique_name};
use egui_kittest::kittest::Queryable as _;
use lrbc::attach::Target;
use lrbc_inspector::ui::InspectorApp;
use lrbc_inspector::ui::settings::Pane;
use lrbc_live::detect::{Event, EventKind, Origin};
use lrbc_sim::client::{self, ClientConfig, Policy};
use lrbc_sim::engine::{Engine, EngineConfig, Mode, Plant};

/// An in-process engine with planted faults, stepping once [`PlantedRun::step`] starts
/// its client: its frame `K` is the client's step `K`.
struct PlantedRun {
    name: String,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl PlantedRun {
    /// An engine of 8 envs × obs 4 × act 2 with 32 × 32 RGB cameras, planting `plants`;
    /// it waits at frame 0 for its client.
    fn create(tag: &str, plants: &[&str]) -> Self {
        let name = unique_name(tag);
        let mut engine = Engine::create(EngineConfig {
            name: name.clone(),
            layout: lrbc::layout::plan::PlanLayout::Lrbc { ext: true },
            num_envs: 8,
            obs_size: 4,
            act_size: 2,
            image: Some((32, 32, 3)),
            mode: Mode::Training,
            hz: 60.0,
            ring_size: 64 * 1024,
            ctl_ring_size: None,
            force: false,
            dynamics: true,
            camera_hz: 30.0,
            seed: 7,
            nan_at_step: None,
            plants: plants
                .iter()
                .map(|p| Plant::parse(p).expect("a plant"))
                .collect(),
        })
        .expect("the engine starts");
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let engine = std::thread::Builder::new()
            .name("events-engine".into())
            .spawn(move || {
                engine.run(&s);
            })
            .expect("spawn the engine");
        Self {
            name,
            stop,
            threads: vec![engine],
        }
    }

    /// Starts the client: 100 steps a second, a policy that keeps the poles up (no done
    /// bursts but the planted one).
    fn step(&mut self) {
        let cfg = ClientConfig {
            name: self.name.clone(),
            steps: None,
            hz: Some(100.0),
            policy: Policy::Balance,
            commands: false,
            record_latency: false,
            step_timeout: Duration::from_secs(5),
            rollout: None,
        };
        let s = Arc::clone(&self.stop);
        self.threads.push(
            std::thread::Builder::new()
                .name("events-client".into())
                .spawn(move || {
                    let _ = client::run(&cfg, &s);
                })
                .expect("spawn the client"),
        );
    }
}

impl Drop for PlantedRun {
    /// Stops the client and the engine: the engine removes its segment.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..).rev() {
            let _ = t.join();
        }
    }
}

/// The events the window's session holds (the newest form of each).
fn events(a: &InspectorApp) -> Vec<Event> {
    a.session
        .as_ref()
        .and_then(|s| s.events())
        .map(|l| l.lock().unwrap().events().iter().cloned().collect())
        .unwrap_or_default()
}

/// Chooses `option` in the panel's kind combo box.
fn choose_kind(h: &mut Window, option: &str) {
    h.get_by_label("Kind").click();
    h.run_steps(2);
    h.get_by_label(option).click();
    h.run_steps(3);
}

#[test]
fn clicking_an_event_pauses_the_live_view_at_its_frame_and_watches_its_env() {
    let mut run = PlantedRun::create(
        "evwin",
        &["nan@40:env=2,channel=obs,index=1", "done-burst@70"],
    );
    let dir = temp_dir("events-window");
    let mut h = harness(app(settings_in(&dir), Some(Target::Shm(run.name.clone()))));
    only_pane(h.state_mut(), Pane::Events);
    // The frame follower has ticked its consumers twice (the sampler's reads of the
    // counters), so the detector beside them has started: the run may start.
    let read_ns = |a: &InspectorApp| {
        a.session
            .as_ref()
            .map_or(0, |s| s.sampler.lock().counters.read_ns)
    };
    step_until(&mut h, "the follower's first tick", |a| read_ns(a) > 0);
    let first_tick = read_ns(h.state());
    step_until(&mut h, "the follower's next tick", |a| {
        read_ns(a) > first_tick
    });
    run.step();
    step_until(&mut h, "the NaN and the done burst, ended", |a| {
        let e = events(a);
        let ended = |k: EventKind| e.iter().any(|e| e.kind == k && !e.ongoing);
        ended(EventKind::Nonfinite) && ended(EventKind::DoneBurst)
    });
    let found = events(h.state());
    let nan = found
        .iter()
        .find(|e| e.kind == EventKind::Nonfinite)
        .cloned()
        .unwrap();
    assert_eq!(
        (nan.first_frame, nan.env, nan.index, nan.value_text()),
        (40, Some(2), Some(1), "NaN".to_string()),
        "{nan:?}"
    );
    assert_eq!(nan.origin, Some(Origin::Simulator), "{nan:?}");
    // The policy keeps the pole up from the observations it is given: the NaN may come
    // back in the env's next actions, which the simulator's NaN started.
    for e in found.iter().filter(|e| e.kind == EventKind::Nonfinite) {
        assert!(
            e.id == nan.id
                || (e.env == Some(2) && e.first_frame > 40 && e.origin == Some(Origin::Simulator)),
            "{found:?}"
        );
    }

    // The status bar counts them.
    let total = h
        .state()
        .session
        .as_ref()
        .and_then(|s| s.events())
        .map(|l| l.lock().unwrap().totals().events())
        .unwrap();
    assert!(total >= 2, "{found:?}");
    h.run_steps(2);
    assert!(
        h.query_by_label(&format!("events {total}")).is_some(),
        "the status bar does not show events {total}"
    );

    // Its row: time, frame, kind, env, channel (name and index), value, origin.
    let row_text = |h: &Window| {
        labels_with(h, "nonfinite")
            .into_iter()
            .find(|t| t.contains("(obs[1])"))
    };
    let row = row_text(&h).expect("the NaN's row");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert!(cells[0].parse::<f64>().is_ok(), "{row}");
    assert_eq!(&cells[1..4], ["40", "nonfinite", "2"], "{row}");
    assert!(row.contains(&nan.channel_text()), "{row}");
    assert!(row.contains(" NaN ") && row.contains("simulator"), "{row}");
    assert_eq!(
        labels_with(&h, "done_burst").len(),
        1,
        "the done burst's row"
    );

    // The kind filter: done bursts only, then every kind again.
    choose_kind(&mut h, "done_burst (1)");
    assert_eq!(h.state().views.events.kind, Some(EventKind::DoneBurst));
    assert!(
        row_text(&h).is_none(),
        "the NaN's row shows under done_burst"
    );
    assert_eq!(labels_with(&h, "done_burst").len(), 1);
    choose_kind(&mut h, "every kind");
    assert!(row_text(&h).is_some());
    // The env filter: env 2's events only (the done burst has no env).
    h.get_by_label("Env").click();
    h.run_steps(2);
    h.get_by_label("Env").type_text("2");
    h.run_steps(3);
    assert_eq!(h.state().views.events.env, "2");
    assert!(row_text(&h).is_some());
    assert!(labels_with(&h, "done_burst").is_empty());

    // A click goes to the event: the view paused at its frame, its env watched, its
    // camera shown.
    assert!(h.state().session.as_ref().unwrap().paused.is_none());
    assert!(!h.state().settings.watched_envs.contains(2));
    let label = row_text(&h).unwrap();
    h.get_by_label(&label).click();
    h.run_steps(3);
    let app = h.state();
    let paused = app.session.as_ref().unwrap().paused.as_ref();
    let frame = paused.and_then(|f| f.frame()).map(|(seq, _)| seq);
    assert_eq!(frame, Some(40), "the paused view's frame");
    assert!(app.settings.watched_envs.contains(2), "env 2 is watched");
    assert_eq!(app.views.cameras.selected, 2, "env 2's camera is shown");
    drop(h);
    drop(run);
    let _ = std::fs::remove_dir_all(&dir);
}

// Unix: the recording is made by `sim engine`, `sim client` and `record` processes,
// `record` stopped with SIGINT.
#[cfg(unix)]
#[test]
fn clicking_an_event_of_a_recording_moves_the_timeline_to_its_frame() {
    use common::events::record_from_the_first_step;
    use common::window::on_recording;
    let path = record_from_the_first_step(
        "evwin-rec",
        &[
            "--envs",
            "8",
            "--obs",
            "4",
            "--act",
            "2",
            "--image",
            "none",
            "--plant",
            "nan@300:env=2,channel=obs,index=1",
        ],
        400,
    );
    let dir = temp_dir("events-window-rec");
    let mut h = on_recording(settings_in(&dir), &path, Pane::Events);
    let frame_seq = |a: &InspectorApp| {
        a.session
            .as_ref()
            .and_then(|s| s.recording())
            .and_then(|(_, p)| p.state().frame_seq)
    };
    step_until(&mut h, "the recording's events", |a| !events(a).is_empty());
    // The timeline starts at the first frame, though the file's first message is a ring
    // entry (the client's first request).
    step_until(&mut h, "the first frame", |a| frame_seq(a).is_some());
    let start = frame_seq(h.state());
    assert!(
        start.is_some_and(|f| f < 300),
        "the timeline starts at frame {start:?}"
    );
    let found = events(h.state());
    let nan = found
        .iter()
        .find(|e| e.kind == EventKind::Nonfinite)
        .unwrap_or_else(|| panic!("{found:?}"));
    assert_eq!((nan.first_frame, nan.env), (300, Some(2)), "{nan:?}");
    h.run_steps(2);
    let label = labels_with(&h, "nonfinite")
        .into_iter()
        .find(|t| t.contains("(obs[1])"))
        .expect("the NaN's row");
    h.get_by_label(&label).click();
    step_until(&mut h, "the timeline moved", |a| {
        frame_seq(a).is_some()
            && frame_seq(a) != start
            && a.session
                .as_ref()
                .and_then(|s| s.recording())
                .is_some_and(|(_, p)| p.state().seek_to.is_none())
    });
    assert_eq!(frame_seq(h.state()), Some(300), "the timeline's frame");
    assert!(
        h.state().settings.watched_envs.contains(2),
        "env 2 is watched"
    );
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&dir);
}
