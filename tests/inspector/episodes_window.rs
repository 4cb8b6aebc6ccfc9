//! The Episodes panel, driven headlessly by egui_kittest on a recording of the simulated
//! engine (its cart-poles fall and end episodes) made from the run's first frame: the
//! panel lists every env, a click on a column header sorts the table by it, a click on an
//! env watches it, and a click on a recent episode marks it on the timeline and moves
//! the cursor to its last frame, the env plots showing the whole episode. Live, the panel counts the episodes of a
//! simulated run as they end.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use common::window::{app, harness, labels_with, on_recording, only_pane, settings_in, step_until};
use common::{temp_dir, unique_name};
use egui_kittest::kittest::NodeT as _;
use egui_kittest::kittest::Queryable as _;
use lrbc_inspector::ui::InspectorApp;
use lrbc_inspector::ui::panels::episodes::{EnvColumn, EnvRow, Section};
use lrbc_inspector::ui::settings::Pane;
use lrbc_live::episodes::{Episode, EpisodeBook};

/// A copy of the session's episode book.
fn book(a: &InspectorApp) -> Option<EpisodeBook> {
    let b = a.session.as_ref()?.episodes()?;
    let b = b.lock().unwrap().clone();
    Some(b)
}

#[test]
fn the_episodes_of_a_recording_sort_and_a_click_goes_to_an_env_or_an_episode() {
    // A synthetic recording: the same frames on every run, every one of them, however
    // loaded the machine (a live run's recorder may let frames pass when it is).
    let dir = temp_dir("episodes-window-rec");
    std::fs::create_dir_all(&dir).expect("a folder for the recording");
    let path = dir.join("synthetic.mcap");
    let spec = lrbc_recording::export::synthetic::Spec {
        frame_interval_ns: 5_000_000,
        compression: lrbc_recording::format::Compression::None,
        ..lrbc_recording::export::synthetic::Spec::of(8, 4, 2, 1500)
    };
    let file = std::fs::File::create(&path).expect("create the recording");
    lrbc_recording::export::synthetic::write(&spec, std::io::BufWriter::new(file))
        .expect("write the recording");
    let mut h = on_recording(settings_in(&dir), &path, Pane::Episodes);
    step_until(&mut h, "the recording's episodes", |a| {
        book(a).is_some_and(|b| b.note.is_none() && b.totals.finished() >= 8)
    });
    let b = book(h.state()).unwrap();
    assert_eq!(b.totals.incomplete, 0, "recorded from the first frame");
    h.run_steps(2);
    assert!(
        !labels_with(&h, "episodes ended").is_empty(),
        "the headline"
    );
    // Sorted by mean return, the greatest first.
    let header = labels_with(&h, "mean return")
        .into_iter()
        .find(|t| t.trim() == "mean return")
        .expect("the column's header");
    h.get_by_label(&header).click();
    h.run_steps(3);
    let view = &h.state().views.episodes;
    assert_eq!((view.sort, view.descending), (EnvColumn::MeanReturn, true));
    let best = (0..b.num_envs)
        .filter_map(|e| Some((e, b.envs[e as usize].mean_return()?)))
        .max_by(|x, y| x.1.total_cmp(&y.1).then(y.0.cmp(&x.0)))
        .expect("an env with a mean return");
    let row_text = |env: u32| {
        EnvRow {
            env,
            totals: b.envs[env as usize],
            since_ending: b.frames_since_ending(env),
        }
        .text()
    };
    // The rows shown, top to bottom.
    let mut shown: Vec<(f64, u32)> = (0..b.num_envs)
        .filter_map(|env| {
            let text = row_text(env);
            let node = h.query_by_label(&text)?;
            Some((node.accesskit_node().raw_bounds()?.y0, env))
        })
        .collect();
    shown.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first_env = shown.first().map(|r| r.1).expect("a row");
    assert_eq!(first_env, best.0, "the best mean return first: {shown:?}");
    // A click on an env watches it.
    let target = (0..b.num_envs)
        .find(|e| !h.state().settings.watched_envs.contains(*e))
        .unwrap();
    h.get_by_label(&row_text(target)).click();
    h.run_steps(2);
    assert!(h.state().settings.watched_envs.contains(target));
    // A recent episode: the timeline goes to its last frame, the plots show it whole.
    h.state_mut().views.episodes.section = Section::Recent;
    h.run_steps(3);
    let e: Episode = *b.recent().back().expect("an episode");
    let row = labels_with(&h, &format!("{}–{}", e.first_frame, e.last_frame))
        .into_iter()
        .next()
        .expect("the newest episode's row");
    h.get_by_label(&row).click();
    let frame_seq = |a: &InspectorApp| {
        a.session
            .as_ref()
            .and_then(|s| s.recording())
            .filter(|(_, p)| p.state().seek_to.is_none())
            .and_then(|(_, p)| p.state().frame_seq)
    };
    step_until(&mut h, "the timeline at the episode's end", |a| {
        frame_seq(a) == Some(e.last_frame)
    });
    let secs = (e.last_ns - e.first_ns) as f32 / 1e9;
    let window = h.state().settings.plot_window_secs;
    assert!(
        window >= secs && window <= secs * 1.1 + 0.05,
        "{window} for {secs}"
    );
    assert!(h.state().settings.watched_envs.contains(e.env));
    assert_eq!(
        h.state().timeline.episode,
        Some(lrbc_inspector::ui::app::EpisodeSpan {
            env: e.env,
            first_ns: e.first_ns,
            last_ns: e.last_ns
        }),
        "the timeline marks the episode"
    );
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_live_runs_episodes_are_counted_as_they_end() {
    let sim = lrbc_sim::inprocess::SimRun::start(lrbc_sim::engine::Preset::Cams64, Some(500.0))
        .expect("a simulated run");
    let dir = temp_dir(&unique_name("episodes-window-live"));
    let mut h = harness(app(settings_in(&dir), Some(sim.target())));
    only_pane(h.state_mut(), Pane::Episodes);
    step_until(&mut h, "64 envs' episodes", |a| {
        book(a).is_some_and(|b| b.totals.finished() >= 64)
    });
    h.run_steps(2);
    let b = book(h.state()).unwrap();
    assert_eq!(b.num_envs, 64);
    // Every env is a row.
    assert!(!labels_with(&h, "since ending").is_empty());
    assert!(
        (0..64).all(|e| b.envs[e].finished > 0 || b.running[e].is_some()),
        "every env followed"
    );
    drop(h);
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
}
