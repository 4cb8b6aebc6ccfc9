//! Golden images of the window: every panel of a recording drawn through wgpu on the
//! CPU (Mesa's lavapipe) and compared with `tests/snapshots/` by egui_kittest, within
//! the tolerance of `kittest.toml`. The recording is synthetic (`export::synthetic`:
//! the same bytes every run) and opened from a fixed name, so that each picture is the
//! same on every run; a panel that draws differently fails and leaves
//! `tests/snapshots/NAME.diff.png` beside the golden image.
//! `UPDATE_SNAPSHOTS=true cargo test --test inspector snapshots` writes them again.

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
use lrbc_inspector::ui::settings::{Pane, Settings};
use lrbc_recording::export::synthetic;

/// A synthetic recording of 16 envs (obs 4, act 2, every env recorded), 3,000 frames 1 ms
/// apart, a NaN at frame 1,500, each env's episode ending every 200 frames, at a fixed
/// path.
fn recording() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lrbc-snapshots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("synthetic.mcap");
    let spec = synthetic::Spec {
        num_envs: 16,
        obs_size: 4,
        act_size: 2,
        recorded: (0..16).collect(),
        frames: 3000,
        frame_interval_ns: 1_000_000,
        chunk_size: None,
        nan_at: Some(1500),
        compression: lrbc_recording::format::Compression::default(),
    };
    let file = std::fs::File::create(&path).unwrap();
    synthetic::write(&spec, std::io::BufWriter::new(file)).unwrap();
    path
}

fn settings() -> Settings {
    Settings {
        watched_envs: vec![0, 1, 2],
        plot_window_secs: 2.0,
        ..Settings::default()
    }
}

/// The recording open, its events and episodes read, the cursor at its first frame.
fn opened(path: &std::path::Path) -> Window {
    let mut a = app(settings(), None);
    a.open_recording(path);
    let mut h = harness(a);
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
    // The cursor 1.6 s in (frame 1,601): the plots have history, the NaN of frame 1,500
    // is behind it.
    let seek = |a: &InspectorApp| {
        if let Some((_, p)) = a.session.as_ref().and_then(|s| s.recording()) {
            p.request(|st| {
                st.playing = false;
                st.seek_to = Some(st.range.0 + 1_600_000_000);
            });
        }
    };
    seek(h.state());
    step_until(&mut h, "the cursor at frame 1,601", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.recording())
            .is_some_and(|(_, p)| p.state().seek_to.is_none() && p.state().frame_seq == Some(1601))
    });
    h.state_mut().clear_status_message();
    h
}

#[test]
fn every_panel_of_a_recording_matches_its_golden_image() {
    let path = recording();
    let mut h = opened(&path);
    let mut failed = Vec::new();
    for pane in Pane::ALL {
        only_pane(h.state_mut(), pane);
        h.run_steps(4);
        let name = format!("recording-{}", pane.title().to_lowercase());
        if let Err(e) = h.try_snapshot(&name) {
            failed.push(format!("{name}: {e}"));
        }
    }
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
