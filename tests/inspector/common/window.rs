//! The window driven headlessly by egui_kittest (no display, no GPU): the app, its
//! harness, and stepping it until a condition holds, with a deadline.

use std::path::Path;
use std::time::{Duration, Instant};

use egui_kittest::Harness;
use egui_kittest::kittest::NodeT as _;
use egui_kittest::kittest::Queryable as _;
use lrbc::attach::Target;
use lrbc::layout::LayoutChoice;
use lrbc::layout::plan::PlanLayout;
use lrbc_inspector::ui::InspectorApp;
use lrbc_inspector::ui::settings::{Pane, Settings};
use lrbc_sim::engine::{Engine, EngineConfig, Mode};

use super::DEADLINE;

/// The window under test.
pub type Window = Harness<'static, InspectorApp>;

/// The window with `settings` and its default panels, attaching to `target` if one is
/// given (the layout detected).
pub fn app(settings: Settings, target: Option<Target>) -> InspectorApp {
    InspectorApp::new(
        &egui::Context::default(),
        settings,
        None,
        target,
        LayoutChoice::Auto,
    )
}

/// Settings whose files go to `dir`, every frame checked whatever the load, no flight
/// recording saved by itself, env 0 watched.
pub fn settings_in(dir: &Path) -> Settings {
    Settings {
        recordings_dir: dir.to_path_buf(),
        screenshot_dir: dir.to_path_buf(),
        busy_budget_percent: 0.0,
        flight_on: Vec::new(),
        watched_envs: lrbc_live::sampler::WatchedEnvs::new([0]),
        ..Settings::default()
    }
}

/// The window with `settings` on the recording `path`, showing `pane` alone.
pub fn on_recording(settings: Settings, path: &Path, pane: Pane) -> Window {
    let mut app = app(settings, None);
    app.open_recording(path);
    let mut h = harness(app);
    only_pane(h.state_mut(), pane);
    h
}

/// The texts (values, else labels) of the window's widgets that contain `text`.
pub fn labels_with(h: &Window, text: &str) -> Vec<String> {
    h.query_all_by_label_contains(text)
        .filter_map(|n| {
            let a = n.accesskit_node();
            a.value().or_else(|| a.label())
        })
        .filter(|t| t.contains(text))
        .collect()
}

/// `app` in a harness of 1400 × 900.
pub fn harness(app: InspectorApp) -> Window {
    harness_sized(app, egui::vec2(1400.0, 900.0))
}

/// `app` in a harness of `size`.
pub fn harness_sized(app: InspectorApp, size: egui::Vec2) -> Window {
    Harness::builder()
        .with_size(size)
        .build_ui_state(|ui, app: &mut InspectorApp| app.run_frame(ui), app)
}

/// Steps the UI (real time passes for the background threads) until `done`; fails the
/// test after `DEADLINE`.
pub fn step_until(h: &mut Window, what: &str, mut done: impl FnMut(&InspectorApp) -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done(h.state()) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        h.step();
        std::thread::sleep(Duration::from_millis(20));
    }
    // The background threads update the state between frames: draw it once more so
    // that what the condition saw is on screen before the test looks for it.
    h.step();
}

/// Shows `pane` alone.
pub fn only_pane(app: &mut InspectorApp, pane: Pane) {
    app.tree = egui_tiles::Tree::new_tabs(egui::Id::unique(("test", pane.title())), vec![pane]);
}

/// An in-process engine that takes over the segment `name` (it need not be gone): no
/// images, 60 Hz, act 1, its values from `seed`. Nothing steps it.
pub fn replacement_engine(name: &str, num_envs: u32, obs_size: u32, seed: u64) -> Engine {
    Engine::create(EngineConfig {
        name: name.to_string(),
        layout: PlanLayout::Lrbc { ext: true },
        num_envs,
        obs_size,
        act_size: 1,
        image: None,
        mode: Mode::Training,
        hz: 60.0,
        ring_size: 4096,
        ctl_ring_size: None,
        force: true,
        dynamics: true,
        camera_hz: 30.0,
        seed,
        nan_at_step: None,
        plants: Vec::new(),
    })
    .expect("the replacing engine starts")
}

/// Presses Record in the status bar, waits until the recording holds `frames` frames,
/// presses Stop recording and waits for the file; its path.
pub fn record_frames(h: &mut Window, frames: u64) -> std::path::PathBuf {
    h.get_by_label("Record").click();
    h.run_steps(2);
    step_until(h, "frames recorded", |a| {
        a.flight_status()
            .recording
            .as_ref()
            .is_some_and(|r| r.frames >= frames)
    });
    h.get_by_label("Stop recording").click();
    h.run_steps(2);
    step_until(h, "the recording finished", |a| {
        a.flight_last_file().is_some()
    });
    h.state()
        .flight_last_file()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}
