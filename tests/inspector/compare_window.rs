//! A recording against a baseline in the window, driven headlessly by egui_kittest: the
//! Divergence panel lists each env where the run departs from its baseline (synthetic
//! recordings, identical but for values planted at chosen envs, frames and channels), a
//! click on a row moves the timeline to that frame and watches the env, and the panel
//! matches its golden image (`tests/snapshots/compare-divergence.png`). The Envs panel
//! draws the baseline's values of the watched envs as dashed lines at the shown run's
//! frames, and the Episodes panel the baseline's distributions over the run's
//! (`compare-envs.png`, `compare-episodes.png`).

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
use lrbc_inspector::ui::baseline::BaselineState;
use lrbc_inspector::ui::panels::divergence::row_text;
use lrbc_inspector::ui::settings::Pane;
use lrbc_recording::export::synthetic::{self, PlantedValue, Spec, SyntheticPlant};

/// A synthetic run of 16 envs (every one recorded, obs 4, act 2), 2,000 frames 1 ms
/// apart, with `plants`, at `dir/name`.
fn run(dir: &Path, name: &str, plants: Vec<SyntheticPlant>) -> PathBuf {
    run_with(dir, name, plants, 0.0)
}

/// [`run`], every reward raised by `reward_offset`; episodes of 50 frames.
fn run_with(dir: &Path, name: &str, plants: Vec<SyntheticPlant>, reward_offset: f32) -> PathBuf {
    let path = dir.join(name);
    let spec = Spec {
        compression: lrbc_recording::format::Compression::None,
        plants,
        reward_offset,
        episode_frames: 50,
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
    assert!(h.state().settings.watched_envs.contains(7));
    let said = h.state().status_message().unwrap_or_default().to_string();
    assert!(
        said.contains("env 7 diverged from the baseline at frame 799"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    golden.unwrap();
}

#[test]
fn the_envs_and_episodes_panels_draw_the_baseline_over_the_run() {
    let dir = temp_dir("compare-window-plots");
    std::fs::create_dir_all(&dir).unwrap();
    let baseline = run(&dir, "baseline.mcap", Vec::new());
    // Every reward a quarter higher, env 1's first observation moved at frame 1,500.
    let shown = run_with(
        &dir,
        "run.mcap",
        vec![SyntheticPlant {
            frame: 1500,
            env: 1,
            value: PlantedValue::Obs {
                index: 0,
                delta: 0.5,
            },
        }],
        0.25,
    );
    let settings = lrbc_inspector::ui::settings::Settings {
        watched_envs: lrbc_live::sampler::WatchedEnvs::new([0, 1]),
        plot_window_secs: 0.5,
        obs_channels: vec![0],
        act_channels: vec![0],
        ..settings_in(&dir)
    };
    let mut a = app(settings, None);
    a.open_recording(&shown);
    a.set_baseline(&baseline);
    let mut h = harness(a);
    only_pane(h.state_mut(), Pane::Envs);
    step_until(&mut h, "the baseline's episodes", |a| {
        a.baseline.as_ref().is_some_and(|b| b.book().is_some())
            && a.session.as_ref().is_some_and(|s| {
                s.episodes()
                    .is_some_and(|b| b.lock().unwrap().note.is_none())
                    && s.events().is_some_and(|l| {
                        l.lock()
                            .unwrap()
                            .note
                            .as_deref()
                            .is_none_or(|n| !n.contains(" %"))
                    })
            })
    });
    // The cursor at frame 1,600: the moved observation 0.1 s before it.
    if let Some((_, p)) = h.state().session.as_ref().and_then(|s| s.recording()) {
        p.request(|st| {
            st.playing = false;
            st.seek_to = Some(st.range.0 + 1599 * 1_000_000);
        });
    }
    step_until(&mut h, "the cursor at frame 1,600", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.recording())
            .is_some_and(|(_, p)| p.state().seek_to.is_none() && p.state().frame_seq == Some(1600))
    });
    step_until(&mut h, "the baseline's values of the frames shown", |a| {
        a.baseline.as_ref().is_some_and(|b| {
            let (s, _) = b.series();
            s.span.0 <= 1100 && s.span.1 >= 1600 && s.envs.len() == 2
        })
    });
    let (series, note) = h.state().baseline.as_ref().unwrap().series();
    assert_eq!(note, None);
    // Env 1's first observation: the baseline's is the run's but at frame 1,500.
    let env1 = &series.envs[&1];
    let at = |seq: u64| env1.iter().find(|p| p.frame_seq == seq).unwrap();
    let v = |seq: u64| at(seq).values.as_ref().unwrap()[0];
    let (base_1500, base_1499) = (v(1500), v(1499));
    assert!(
        (base_1500 - base_1499).abs() < 0.01,
        "the baseline is smooth there"
    );
    h.state_mut().clear_status_message();
    h.run_steps(3);
    let envs = h.try_snapshot("compare-envs");
    only_pane(h.state_mut(), Pane::Episodes);
    h.state_mut().views.episodes.section =
        lrbc_inspector::ui::panels::episodes::Section::Distributions;
    h.run_steps(3);
    assert!(
        !labels_with(&h, "line: the baseline's last").is_empty(),
        "the baseline's distributions are drawn"
    );
    let episodes = h.try_snapshot("compare-episodes");
    let _ = std::fs::remove_dir_all(&dir);
    envs.unwrap();
    episodes.unwrap();
}

/// A live run against a baseline: the simulated run (its own policy) departs from a
/// synthetic recording of its sizes at once, env by env, as its frames come; a click on a
/// row pauses the view at that frame and watches the env.
#[test]
fn a_live_run_is_compared_with_its_baseline_as_it_goes_and_a_click_pauses_there() {
    let dir = temp_dir("compare-window-live");
    std::fs::create_dir_all(&dir).unwrap();
    let baseline = dir.join("baseline.mcap");
    let spec = Spec {
        compression: lrbc_recording::format::Compression::None,
        ..Spec::of(64, 32, 8, 20_000)
    };
    synthetic::write(
        &spec,
        std::io::BufWriter::new(std::fs::File::create(&baseline).unwrap()),
    )
    .unwrap();
    let sim =
        lrbc_sim::inprocess::SimRun::start(lrbc_sim::engine::Preset::Cams64, Some(200.0)).unwrap();
    let mut h = harness(app(settings_in(&dir), Some(sim.target())));
    h.state_mut().set_baseline(&baseline);
    only_pane(h.state_mut(), Pane::Divergence);
    step_until(&mut h, "every env diverged", |a| {
        a.baseline.as_ref().is_some_and(|b| {
            b.is_live()
                && matches!(b.state(), BaselineState::Comparing(found) if found.len() == 64)
                && b.live_counts().is_some_and(|c| c.frames_compared > 0)
        })
    });
    assert!(!labels_with(&h, "comparing the live run as it goes").is_empty());
    let BaselineState::Comparing(found) = h.state().baseline.as_ref().unwrap().state() else {
        unreachable!("waited for it")
    };
    let d = found.iter().find(|d| d.env == 5).copied().unwrap();
    h.get_by_label(&row_text(&d)).click();
    h.run_steps(2);
    let paused = h
        .state()
        .session
        .as_ref()
        .and_then(|s| s.paused.as_ref())
        .and_then(|f| f.frame())
        .map(|(seq, _)| seq);
    assert_eq!(
        paused,
        Some(d.frame_seq_b),
        "paused at the divergence's frame"
    );
    assert!(h.state().settings.watched_envs.contains(5));
    drop(h);
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
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
