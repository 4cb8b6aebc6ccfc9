//! Golden images of the window on recordings: every panel of a recording, the Envs and
//! Episodes panels of a 4,096-env one and the overview in the light theme, drawn through
//! wgpu on the CPU (Mesa's lavapipe) and compared with `tests/snapshots/` by
//! egui_kittest, within the tolerance of `kittest.toml` (a test here shows that it fails
//! a widget moved by two pixels). The recordings are synthetic (`export::synthetic`: the
//! same bytes every run) and opened from fixed names, so that each picture is the same on
//! every run; a panel that draws differently fails and leaves
//! `tests/snapshots/NAME.diff.png` beside the golden image.
//! `UPDATE_SNAPSHOTS=true cargo test --test inspector snapshots` writes them again (and
//! those of `snapshots_live.rs`).

#![cfg(target_os = "linux")]
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::path::PathBuf;

use common::window::{Window, app, harness, only_pane, step_until};
use lrbc_inspector::ui::InspectorApp;
use lrbc_inspector::ui::settings::{Pane, Settings, Theme};
use lrbc_recording::export::synthetic;

/// A synthetic recording of `num_envs` envs (obs 4, act 2, the first 16 envs recorded),
/// `frames` frames 1 ms apart, a NaN at frame `nan_at`, each env's episode ending every
/// 200 frames, at a fixed name (`file`) in a folder of this test's own.
fn recording(file: &str, num_envs: u32, frames: u64, nan_at: u64) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "lrbc-snapshots-{}-{}",
        std::process::id(),
        file.trim_end_matches(".mcap")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(file);
    let spec = synthetic::Spec {
        recorded: (0..num_envs.min(16)).collect(),
        nan_at: Some(nan_at),
        ..synthetic::Spec::of(num_envs, 4, 2, frames)
    };
    let file = std::fs::File::create(&path).unwrap();
    synthetic::write(&spec, std::io::BufWriter::new(file)).unwrap();
    path
}

fn settings() -> Settings {
    Settings {
        watched_envs: lrbc_live::sampler::WatchedEnvs::new([0, 1, 2]),
        plot_window_secs: 2.0,
        ..Settings::default()
    }
}

/// The recording open with `settings`, its events and episodes read, the cursor at frame
/// `frame` (paused).
fn opened(path: &std::path::Path, settings: Settings, frame: u64) -> Window {
    let theme = settings.theme;
    let mut a = app(settings, None);
    a.open_recording(path);
    let mut h = harness(a);
    // The app set its theme on a context of its own: the harness draws on this one.
    lrbc_inspector::ui::app::apply_theme(&h.ctx, theme);
    let ready = |a: &InspectorApp| {
        let Some(s) = a.session.as_ref() else {
            return false;
        };
        let events = s.events().is_some_and(|l| {
            let l = l.lock().unwrap();
            // Found again from the frames (the file has no events of its own): the note
            // says so once they are all found.
            !l.events().is_empty() && l.note.as_deref().is_none_or(|n| !n.contains(" %"))
        });
        let episodes = s.episodes().is_some_and(|b| {
            let b = b.lock().unwrap();
            b.note.is_none() && b.totals.finished() > 0
        });
        let frame = s
            .recording()
            .is_some_and(|(_, p)| p.state().frame_seq.is_some());
        events && episodes && frame
    };
    step_until(&mut h, "the recording read", ready);
    // Frames are 1 ms apart from frame 1.
    let seek = |a: &InspectorApp| {
        if let Some((_, p)) = a.session.as_ref().and_then(|s| s.recording()) {
            p.request(|st| {
                st.playing = false;
                st.seek_to = Some(st.range.0 + (frame - 1) * 1_000_000);
            });
        }
    };
    seek(h.state());
    step_until(&mut h, "the cursor at its frame", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.recording())
            .is_some_and(|(_, p)| p.state().seek_to.is_none() && p.state().frame_seq == Some(frame))
    });
    h.state_mut().clear_status_message();
    h
}

/// Shows each of `panes` alone and compares it with `tests/snapshots/PREFIX-PANE.png`;
/// every failure, not only the first.
fn compare_panes(h: &mut Window, prefix: &str, panes: &[Pane]) -> Vec<String> {
    let mut failed = Vec::new();
    for &pane in panes {
        only_pane(h.state_mut(), pane);
        h.run_steps(4);
        let name = format!("{prefix}-{}", pane.title().to_lowercase());
        if let Err(e) = h.try_snapshot(&name) {
            failed.push(format!("{name}: {e}"));
        }
    }
    failed
}

#[test]
fn every_panel_of_a_recording_matches_its_golden_image() {
    let path = recording("synthetic.mcap", 16, 3000, 1500);
    // The cursor 1.6 s in (frame 1,601): the plots have history, the NaN of frame 1,500
    // is behind it.
    let mut h = opened(&path, settings(), 1601);
    let failed = compare_panes(&mut h, "recording", &Pane::ALL);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn the_envs_and_episodes_of_a_4096_env_recording_match_their_golden_images() {
    let path = recording("synthetic-4096.mcap", 4096, 1000, 500);
    let mut h = opened(&path, settings(), 601);
    let failed = compare_panes(&mut h, "recording-4096", &[Pane::Envs, Pane::Episodes]);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn the_overview_of_a_recording_in_the_light_theme_matches_its_golden_image() {
    let path = recording("synthetic-light.mcap", 16, 3000, 1500);
    let light = Settings {
        theme: Theme::Light,
        ..settings()
    };
    let mut h = opened(&path, light, 1601);
    h.run_steps(4);
    let result = h.try_snapshot("recording-light-overview");
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
    result.unwrap();
}

/// A button at `dx` points right of (20, 20), drawn by the golden images' renderer.
fn button_at(dx: f32) -> image::RgbaImage {
    let mut h = egui_kittest::Harness::builder()
        .with_size(egui::vec2(200.0, 64.0))
        .build_ui(move |ui| {
            let rect =
                egui::Rect::from_min_size(egui::pos2(20.0 + dx, 20.0), egui::vec2(120.0, 24.0));
            ui.put(rect, egui::Button::new("Record"));
        });
    h.run_steps(2);
    h.render().expect("the renderer draws")
}

#[test]
fn the_golden_images_tolerance_passes_the_same_drawing_and_fails_a_widget_moved_by_two_pixels() {
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        // Writing golden images, not comparing them.
        return;
    }
    let dir = std::env::temp_dir().join(format!("lrbc-snapshots-{}-tolerance", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    button_at(0.0).save(dir.join("button.png")).unwrap();
    // kittest.toml's tolerance, the golden image in the scratch folder.
    let options = egui_kittest::SnapshotOptions::new().output_path(&dir);
    let again = egui_kittest::try_image_snapshot_options(&button_at(0.0), "button", &options);
    let moved = egui_kittest::try_image_snapshot_options(&button_at(2.0), "button", &options);
    let diff_left = dir.join("button.diff.png").exists();
    let _ = std::fs::remove_dir_all(&dir);
    again.expect("the same drawing passes");
    assert!(moved.is_err(), "a button moved by 2 pixels fails");
    assert!(diff_left, "the failure leaves its diff image");
}
