//! The pictures of `screenshots/` (README.md and docs/window.md show them): the window
//! on a simulated run (engine and client on threads of this process, faults planted for
//! the Events panel) and on `serve` of that run, drawn by egui_kittest's wgpu renderer,
//! the same path as the golden images of `snapshots.rs`. They are pictures of a run in
//! real time, compared with nothing:
//! `cargo test --test inspector screenshots -- --ignored` writes them again.
//! (`windows-wine*.png` are the real window under Wine, written by `.ci/wine/screenshot`.)

#![cfg(target_os = "linux")]
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::path::{Path, PathBuf};

use common::served::Serve;
use common::window::{Window, app, harness, only_pane, step_until};
use egui_kittest::kittest::Queryable as _;
use lrbc_inspector::ui::InspectorApp;
use lrbc_inspector::ui::settings::{Pane, Settings};
use lrbc_sim::engine::{Plant, Preset};
use lrbc_sim::inprocess::SimRun;

/// The run's newest frame the window has.
fn newest_frame(a: &InspectorApp) -> u64 {
    a.session
        .as_ref()
        .and_then(|s| s.sampler.lock().frames.back().map(|f| f.frame_seq))
        .unwrap_or(0)
}

/// Writes the window at `size` to `out/name` (the status line's messages cleared: they
/// name this machine's folders).
fn save(h: &mut Window, size: egui::Vec2, out: &Path, name: &str) {
    h.state_mut().clear_status_message();
    h.set_size(size);
    h.run_steps(4);
    let img = h.render().expect("the window renders");
    let path = out.join(name);
    img.save_with_format(&path, image::ImageFormat::Png)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    println!("{}", path.display());
}

fn settings(scratch: &Path) -> Settings {
    Settings {
        screenshot_dir: scratch.join("captures"),
        recordings_dir: scratch.join("recordings"),
        // No flight recording saved around the planted faults (its note would show).
        flight_on: Vec::new(),
        watched_envs: lrbc_live::sampler::WatchedEnvs::new([0, 1, 2]),
        plot_window_secs: 10.0,
        // Every frame followed, a busy machine or not: each planted fault is found.
        busy_budget_percent: 0.0,
        ..Settings::default()
    }
}

#[test]
#[ignore = "writes screenshots/: cargo test --test inspector screenshots -- --ignored"]
fn the_pictures_of_the_readme_are_drawn_from_a_simulated_run() {
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("screenshots");
    let scratch = common::temp_dir("screenshots");
    // Faults for the Events panel: a NaN observation, an infinite action, a done burst,
    // from about 10 s into the run, when the window has long been attached. The client
    // runs the demo's loop: rollouts of 64 frames at 500 Hz, 0.3 s updates (about 150
    // frames a second), which the Counters panel shows.
    let plants = [
        "nan@1500:env=1,channel=obs,index=2",
        "inf@1700:env=2,channel=act,index=1",
        "done-burst@1900",
        "-inf@2100:env=0,channel=reward",
    ]
    .iter()
    .map(|p| Plant::parse(p).unwrap())
    .collect();
    let rollout = lrbc_sim::client::Rollout {
        frames: 64,
        update: std::time::Duration::from_millis(300),
    };
    let sim = SimRun::start_planted(Preset::Cams64, Some(500.0), plants, Some(rollout)).unwrap();
    let mut h = harness(app(settings(&scratch), Some(sim.target())));
    assert!(h.state().session.is_some(), "attached to the simulated run");
    // The planted faults behind the cursor, and a few seconds of history. (The
    // infinite action is found only when the detector copies that frame's actions
    // before the client writes the next ones.)
    step_until(&mut h, "2,400 frames", |a| newest_frame(a) >= 2400);
    step_until(&mut h, "the faults found", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.events())
            .is_some_and(|l| l.lock().unwrap().events().len() >= 3)
    });
    save(&mut h, egui::vec2(1400.0, 900.0), &out, "overview.png");
    // A traffic entry selected, so that the field tree shows.
    let pick = h.state().session.as_ref().and_then(|s| {
        let store = s.traffic.lock();
        (store.first_index..store.total_rows()).rev().find(|&i| {
            matches!(store.get(i), Some(lrbc_live::traffic::TrafficRow::Record(r))
                if r.method == "GetAgentSchema" || r.method == "ResetAgent")
        })
    });
    h.state_mut().views.traffic.selected = pick;
    // The Divergence panel's picture is of two recordings (below).
    for pane in Pane::ALL.into_iter().filter(|p| *p != Pane::Divergence) {
        only_pane(h.state_mut(), pane);
        let name = format!("panel-{}.png", pane.title().to_lowercase());
        save(&mut h, egui::vec2(1200.0, 800.0), &out, &name);
    }
    // The episodes' distributions, one colour per ending.
    only_pane(h.state_mut(), Pane::Episodes);
    h.state_mut().views.episodes.section =
        lrbc_inspector::ui::panels::episodes::Section::Distributions;
    save(
        &mut h,
        egui::vec2(1200.0, 800.0),
        &out,
        "panel-episodes-distributions.png",
    );
    // The attach view, once discovery lists the run.
    h.state_mut().show_attach = true;
    h.set_size(egui::vec2(1200.0, 700.0));
    let name = sim.name.clone();
    let deadline = std::time::Instant::now() + common::DEADLINE;
    while h.query_all_by_label_contains(&name).next().is_none() {
        assert!(std::time::Instant::now() < deadline, "the run listed");
        h.step();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    save(&mut h, egui::vec2(1200.0, 700.0), &out, "attach.png");
    drop(h);
    // The window connected to `serve` of the same run.
    let serve = Serve::start(&sim.name, &["--images"]);
    let mut a = app(settings(&scratch), None);
    a.connect(&serve.url);
    let mut h = harness(a);
    let start = newest_frame(h.state());
    step_until(&mut h, "the served run's first frames", |a| {
        newest_frame(a) > 0
    });
    let first = newest_frame(h.state()).max(start);
    step_until(&mut h, "5 s of the served run", |a| {
        newest_frame(a) >= first + 2500
    });
    save(&mut h, egui::vec2(1400.0, 900.0), &out, "remote.png");
    drop(h);
    drop(serve);
    drop(sim);
    divergence_picture(&scratch, &out);
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The Divergence panel: a recording against its baseline (synthetic runs of 64 envs,
/// identical but for values planted in three envs).
fn divergence_picture(scratch: &Path, out: &Path) {
    use lrbc_recording::export::synthetic::{self, PlantedValue, Spec, SyntheticPlant};
    std::fs::create_dir_all(scratch).unwrap();
    let write = |name: &str, plants: Vec<SyntheticPlant>| {
        let path = scratch.join(name);
        let spec = Spec {
            plants,
            episode_frames: 120,
            ..Spec::of(64, 32, 8, 4000)
        };
        synthetic::write(
            &spec,
            std::io::BufWriter::new(std::fs::File::create(&path).unwrap()),
        )
        .unwrap();
        path
    };
    let plant = |env, frame, value| SyntheticPlant { frame, env, value };
    let baseline = write("baseline.mcap", Vec::new());
    let run = write(
        "run.mcap",
        vec![
            plant(
                5,
                1200,
                PlantedValue::Obs {
                    index: 2,
                    delta: 0.01,
                },
            ),
            plant(
                17,
                2100,
                PlantedValue::Act {
                    index: 1,
                    delta: -0.5,
                },
            ),
            plant(40, 2900, PlantedValue::Reward { delta: 1.0 }),
            plant(52, 3300, PlantedValue::Done),
        ],
    );
    let mut a = app(settings(scratch), None);
    a.open_recording(&run);
    a.set_baseline(&baseline);
    let mut h = harness(a);
    only_pane(h.state_mut(), Pane::Divergence);
    step_until(&mut h, "the comparison", |a| {
        a.baseline.as_ref().is_some_and(|b| {
            matches!(
                b.state(),
                lrbc_inspector::ui::baseline::BaselineState::Done(_)
            )
        })
    });
    save(
        &mut h,
        egui::vec2(1200.0, 500.0),
        out,
        "panel-divergence.png",
    );
}
