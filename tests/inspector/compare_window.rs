//! A recording against a baseline in the window, driven headlessly by egui_kittest: the
//! Divergence panel lists each env where the run departs from its baseline (synthetic
//! recordings, identical but for values planted at chosen envs, frames and channels), a
//! click on a row moves the timeline to that frame and watches the env, and the panel
//! matches its golden image (`tests/snapshots/compare-divergence.png`).

#![cfg(target_os = "linux")]
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::path::{Path, PathBuf};

use common::temp_dir;
use common::window::{Window, app, harness, labels_with, only_pane, settings_in, step_until};
use egui_kittest::kittest::Queryable as _;
use lrbc_inspector::ui::InspectorApp;
use lrbc_inspector::ui::panels::divergence::{BaselineState, row_text};
use lrbc_inspector::ui::settings::Pane;
use lrbc_recording::export::synthetic::{self, PlantedValue, Spec, SyntheticPlant};

/// A synthetic run of 16 envs (every one recorded, obs 4, act 2), 2,000 frames 1 ms
/// apart, with `plants`, at `dir/name`.
fn run(dir: &Path, name: &str, plants: Vec<SyntheticPlant>) -> PathBuf {
    let path = dir.join(name);
    let spec = Spec {
        compression: lrbc_recording::format::Compression::None,
        plants,
        ..Spec::of(16, 4, 2, 2000)
    };
    let file = std::fs::File::create(&path).unwrap();
    synthetic::write(&spec, std::io::BufWriter::new(file)).unwrap();
    path
}

/// The window on `shown` against `baseline`, the Divergence panel alone, the comparison
/// done.
fn compared(dir: &Path, shown: &Path, baseline: &Path) -> Window {
    let mut a = app(settings_in(dir), None);
    a.open_recording(shown);
    a.set_baseline(baseline);
    let mut h = harness(a);
    only_pane(h.state_mut(), Pane::Divergence);
    step_until(
        &mut h,
        "the comparison with the baseline",
        |a: &InspectorApp| {
            let recording_ready = a.session.as_ref().is_some_and(|s| {
                let events_found = s.events().is_some_and(|l| {
                    // Found again from the frames (the file has none of its own): the note
                    // says so once they are all found.
                    let l = l.lock().unwrap();
                    l.note.as_deref().is_none_or(|n| !n.contains(" %"))
                });
                events_found
                    && s.recording()
                        .is_some_and(|(_, p)| p.state().frame_seq.is_some())
            });
            recording_ready
                && a.baseline
                    .as_ref()
                    .is_some_and(|b| matches!(b.state(), BaselineState::Done(_)))
        },
    );
    h
}

#[test]
fn the_divergence_panel_lists_where_a_run_departs_from_its_baseline_and_goes_there() {
    let dir = temp_dir("compare-window");
    std::fs::create_dir_all(&dir).unwrap();
    let baseline = run(&dir, "baseline.mcap", Vec::new());
    let plant = |env, frame, value| SyntheticPlant { frame, env, value };
    let shown = run(
        &dir,
        "run.mcap",
        vec![
            plant(
                3,
                500,
                PlantedValue::Obs {
                    index: 2,
                    delta: 0.25,
                },
            ),
            plant(
                7,
                800,
                PlantedValue::Act {
                    index: 1,
                    delta: -0.5,
                },
            ),
            plant(12, 1200, PlantedValue::Reward { delta: 1.0 }),
        ],
    );
    let mut h = compared(&dir, &shown, &baseline);
    let BaselineState::Done(r) = h.state().baseline.as_ref().unwrap().state() else {
        unreachable!("waited for it")
    };
    assert_eq!(r.counts.envs_diverged, 3);
    assert!(
        !labels_with(&h, "envs: 13 identical, 3 diverged").is_empty(),
        "the headline"
    );
    let rows: Vec<String> = r.divergences.iter().map(row_text).collect();
    for (row, origin) in rows.iter().zip(["simulator", "policy", "reward"]) {
        assert!(row.contains(origin), "{row}");
        assert!(h.query_by_label(row).is_some(), "the row {row} is shown");
    }
    // The golden image, before the click selects a row.
    h.state_mut().clear_status_message();
    h.run_steps(2);
    let golden = h.try_snapshot("compare-divergence");

    // A click on env 7's row: the timeline at frame 800, env 7 watched.
    h.get_by_label(&rows[1]).click();
    step_until(&mut h, "the timeline at the divergence's frame", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.recording())
            .is_some_and(|(_, p)| p.state().seek_to.is_none() && p.state().frame_seq == Some(800))
    });
    assert!(h.state().settings.watched_envs.contains(&7));
    let said = h.state().status_message().unwrap_or_default().to_string();
    assert!(
        said.contains("env 7 diverged from the baseline at frame 799"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    golden.unwrap();
}

#[test]
fn without_a_baseline_the_panel_says_how_to_set_one_and_a_bad_one_is_one_line() {
    let dir = temp_dir("compare-window-none");
    std::fs::create_dir_all(&dir).unwrap();
    let shown = run(&dir, "run.mcap", Vec::new());
    let mut a = app(settings_in(&dir), None);
    a.open_recording(&shown);
    let mut h = harness(a);
    only_pane(h.state_mut(), Pane::Divergence);
    h.run_steps(3);
    assert!(!labels_with(&h, "No baseline").is_empty());
    // A baseline that is not a recording: the panel says why.
    let bad = dir.join("not-a-recording.mcap");
    std::fs::write(&bad, b"hello").unwrap();
    h.state_mut().set_baseline(&bad);
    step_until(&mut h, "the comparison to fail", |a| {
        a.baseline
            .as_ref()
            .is_some_and(|b| matches!(b.state(), BaselineState::Failed(_)))
    });
    assert!(!labels_with(&h, "the comparison failed: A: not an MCAP file").is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
