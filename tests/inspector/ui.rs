//! The window, driven headlessly with egui_kittest against a simulated engine and
//! client running in this test process.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::time::{Duration, Instant};

use common::window::{Window, app, harness, only_pane, step_until};
use common::{DEADLINE, temp_dir};
use egui_kittest::kittest::Queryable as _;
use lrbc::attach::Target;
use lrbc::layout::LayoutChoice;
use lrbc_inspector::ui::InspectorApp;
use lrbc_inspector::ui::settings::{Pane, Settings};
use lrbc_sim::engine::Preset;
use lrbc_sim::inprocess::SimRun;

fn settings(shots: &std::path::Path) -> Settings {
    Settings {
        screenshot_dir: shots.to_path_buf(),
        recordings_dir: shots.join("recordings"),
        ..Settings::default()
    }
}

/// Focuses the labelled field and types into it.
fn type_into(h: &mut Window, label: &str, text: &str) {
    h.get_by_label(label).click();
    h.run_steps(2);
    h.get_by_label(label).type_text(text);
    h.run_steps(2);
}

/// Waits until the simulated engine has stepped a few frames: by then the client has
/// subscribed to its streams and the engine has taken the subscriptions off the ring.
fn wait_for_steps(sim: &SimRun) {
    let a = lrbc::attach::attach(&sim.target(), LayoutChoice::Auto).unwrap();
    let deadline = Instant::now() + DEADLINE;
    while a
        .segment
        .load_u64(a.geometry.counters.frame_seq)
        .unwrap_or(0)
        < 10
    {
        assert!(Instant::now() < deadline, "the engine did not step");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn attaching_by_typed_name_opens_the_panels_and_names_the_target() {
    let sim = SimRun::start(Preset::Cams64, Some(300.0)).unwrap();
    let mut h = harness(app(settings(&temp_dir("ui-attach")), None));
    h.step();
    assert!(h.state().session.is_none());
    assert!(h.state().title().starts_with("lrbc-inspector"));
    // An unknown name gives an error on the attach view.
    type_into(&mut h, "Name", "no-such-segment-here");
    h.get_by_label("Attach by name").click();
    h.run_steps(2);
    assert!(h.state().session.is_none());
    assert!(
        h.state()
            .form
            .error
            .as_deref()
            .unwrap()
            .contains("no segment named")
    );
    // The real name attaches.
    h.state_mut().form.name.clear();
    h.step();
    type_into(&mut h, "Name", &sim.name);
    h.get_by_label("Attach by name").click();
    step_until(&mut h, "the session", |a| a.session.is_some());
    let title = h.state().title();
    assert!(
        title.starts_with("lrbc-inspector") && title.contains(&sim.name),
        "{title}"
    );
    step_until(&mut h, "sampled frames", |a| {
        a.session
            .as_ref()
            .is_some_and(|s| s.sampler.stats().frames.sampled > 10)
    });
    // The status bar names the target and its state.
    h.step();
    assert!(
        !h.query_all_by_label(&sim.name)
            .collect::<Vec<_>>()
            .is_empty()
    );
    assert!(h.query_by_label("attached").is_some());
    assert!(
        h.state().settings.recent_targets.contains(&sim.name),
        "recent targets remembered"
    );
}

#[test]
fn panels_switch_envs_change_and_the_traffic_list_pauses() {
    let sim = SimRun::start(Preset::Cams64, Some(300.0)).unwrap();
    wait_for_steps(&sim);
    let mut h = harness(app(settings(&temp_dir("ui-panels")), Some(sim.target())));
    step_until(&mut h, "traffic", |a| {
        a.session
            .as_ref()
            .is_some_and(|s| s.traffic.lock().total_rows() > 5)
    });
    // Default layout: Envs, Counters and Header are tabs; switch to Counters.
    h.get_by_label("Counters").click();
    h.run_steps(3);
    assert!(
        h.query_by_label("frame_seq").is_some(),
        "the counters panel shows"
    );
    h.get_by_label("Header").click();
    h.run_steps(3);
    assert!(
        h.query_by_label("cmd_ring_size").is_some(),
        "the header panel shows"
    );
    // Enumerations and flag words with their meaning beside the numbers.
    for meaning in [
        "(LRBC)",
        "(training)",
        "(CPU)",
        "(Agent Mujoco Telemetry Scene Camera Viewport Debug)",
    ] {
        assert!(
            h.query_by_label(meaning).is_some(),
            "the header panel shows {meaning}"
        );
    }
    h.get_by_label("Envs").click();
    h.run_steps(3);
    let before = h.state().settings.watched_envs.clone();
    h.get_by_label("Next >").click();
    h.step();
    let after = h.state().settings.watched_envs.clone();
    assert_eq!(
        Vec::from(after.clone()),
        before.iter().map(|e| e + 1).collect::<Vec<_>>()
    );
    assert_eq!(
        h.state()
            .session
            .as_ref()
            .unwrap()
            .sampler
            .settings()
            .watched_envs,
        after,
        "the sampler follows the selection"
    );
    step_until(&mut h, "the new env's history", |a| {
        let s = a.session.as_ref().unwrap();
        let d = s.sampler.lock();
        after
            .iter()
            .all(|e| d.envs.get(&e).is_some_and(|hist| hist.points.len() > 3))
    });
    // Traffic: the streams were subscribed before the window attached; their items are
    // counted as such, not as orphans.
    step_until(&mut h, "streamed items", |a| {
        a.session.as_ref().is_some_and(|s| {
            s.traffic
                .lock()
                .totals
                .iter()
                .any(|(_, t)| t.subscribed_before_attach > 0)
        })
    });
    h.get_by_label("Traffic").click();
    h.run_steps(3);
    assert!(
        h.query_by_label_contains("streamed (subscribed before attach)")
            .is_some(),
        "the totals count the items of streams subscribed before the attach"
    );
    // Rows streaming into the list never make the window redraw at once: every pass
    // asks for the next only through the throttled waker (a widget whose id moves on with
    // the list would be new in each pass, and egui asks for another pass at once to style
    // it).
    let rows_before = h
        .state()
        .session
        .as_ref()
        .unwrap()
        .traffic
        .lock()
        .total_rows();
    // Passes until ten new rows have come into the list (however long they take).
    let mut first_seen = Vec::new();
    let rows = |h: &Window| {
        h.state()
            .session
            .as_ref()
            .unwrap()
            .traffic
            .lock()
            .total_rows()
    };
    let deadline = Instant::now() + DEADLINE;
    while rows(&h) < rows_before + 10 {
        assert!(
            Instant::now() < deadline,
            "no new rows: {} after {rows_before}",
            rows(&h)
        );
        h.step();
        std::thread::sleep(Duration::from_millis(10));
        first_seen.extend(
            h.ctx
                .repaint_causes()
                .into_iter()
                .filter(|c| c.file.contains("theme")),
        );
    }
    assert!(
        first_seen.is_empty(),
        "passes asked for at once to style new widgets: {first_seen:?}"
    );
    // Once the list holds more rows than it shows, following the newest: the first row
    // shown is whole, below the rings' totals, never half under them.
    step_until(&mut h, "more rows than the list shows", |a| {
        a.session.as_ref().unwrap().traffic.lock().total_rows() > 80
    });
    h.run_steps(3);
    let totals_bottom = (h.get_all_by_label_contains(" entries, "))
        .map(|n| n.rect().bottom())
        .fold(f32::MIN, f32::max);
    // The rows laid out that reach below the totals (egui lays out one more above the
    // list's top, clipped away): the first of them starts below the totals, whole.
    let shown: Vec<egui::Rect> = (h.get_all_by_label_contains(" B  "))
        .map(|n| n.rect())
        .filter(|r| r.bottom() > totals_bottom)
        .collect();
    assert!(shown.len() > 3, "{shown:?}");
    let top = shown.iter().map(|r| r.top()).fold(f32::MAX, f32::min);
    assert!(
        top >= totals_bottom,
        "the first row shown ({top}) is half under the totals (their bottom: {totals_bottom})"
    );
    // Scrolled up by hand, the list stays put while rows keep coming.
    let first_shown = |h: &Window| {
        let rows: Vec<(f32, String)> = (h.get_all_by_label_contains(" B  "))
            .filter(|n| n.rect().bottom() > totals_bottom)
            .map(|n| {
                use egui_kittest::kittest::NodeT as _;
                let label = n.accesskit_node().label();
                (
                    n.rect().top(),
                    label.or_else(|| n.value()).unwrap_or_default(),
                )
            })
            .collect();
        rows.into_iter()
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, label)| label)
    };
    let before_wheel = first_shown(&h);
    let row = h.get_all_by_label_contains(" B  ").last().unwrap().rect();
    h.hover_at(row.center());
    h.event(egui::Event::MouseWheel {
        unit: egui::MouseWheelUnit::Line,
        delta: egui::vec2(0.0, 3.0),
        phase: egui::TouchPhase::Move,
        source: egui::MouseWheelSource::Unknown,
        modifiers: egui::Modifiers::NONE,
    });
    // Until the wheel's smooth scroll has come to rest (the same first row for three
    // looks in a row).
    let mut held = first_shown(&h);
    let mut still = 0;
    for _ in 0..200 {
        h.run_steps(5);
        let now = first_shown(&h);
        still = if now == held { still + 1 } else { 0 };
        held = now;
        if still == 3 {
            break;
        }
    }
    // The wheel moved the list back to earlier rows (each row starts with its time).
    let time = |row: &Option<String>| -> f64 {
        row.as_deref()
            .and_then(|r| r.split_whitespace().next())
            .and_then(|t| t.parse().ok())
            .unwrap_or(f64::NAN)
    };
    assert!(
        time(&held) < time(&before_wheel),
        "{held:?} after {before_wheel:?}"
    );
    let rows_then = rows(&h);
    step_until(&mut h, "ten more rows", |a| {
        a.session.as_ref().unwrap().traffic.lock().total_rows() >= rows_then + 10
    });
    h.run_steps(3);
    assert_eq!(
        first_shown(&h),
        held,
        "the list moved on while scrolled back"
    );
    // Pause freezes the list while capture goes on.
    h.get_by_label("Pause").click();
    h.run_steps(2);
    assert!(h.state().views.traffic.is_paused());
    assert!(h.query_by_label("Resume").is_some());
    let deadline = Instant::now() + DEADLINE;
    while h.query_by_label_contains("new rows").is_none() && Instant::now() < deadline {
        h.step();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        h.query_by_label_contains("new rows").is_some(),
        "capture went on while paused"
    );
    h.get_by_label("Resume").click();
    h.run_steps(2);
    assert!(!h.state().views.traffic.is_paused());
    // The history size is a setting the user can reach.
    h.get_by_label("Settings").click();
    h.run_steps(2);
    assert!(h.query_by_label("History (frames)").is_some());
    assert!(h.query_by_label("Quick-save folder").is_some());
    // The memory budget, with what each part of the window's data uses of it.
    assert!(h.query_by_label("Memory budget (MiB)").is_some());
    for part in [
        "histories",
        "episodes",
        "traffic list",
        "camera images",
        "streamed frames",
        "flight recorder",
    ] {
        assert!(
            h.query_by_label_contains(part).is_some(),
            "Settings shows what {part} use"
        );
    }
    assert!(h.query_by_label_contains("MiB in use").is_some());
    assert!(
        h.query_by_label_contains("of 44.8 MiB").is_some(),
        "histories' share: seven twentieths of 128 MiB"
    );
}

#[test]
fn a_service_toggle_goes_through_the_control_ring_and_flips_service_flags() {
    let sim = SimRun::start(Preset::Cams64, Some(300.0)).unwrap();
    let mut app = app(settings(&temp_dir("ui-toggle")), Some(sim.target()));
    only_pane(&mut app, Pane::Rpc);
    let mut h = harness(app);
    let flags = |a: &InspectorApp| {
        a.session
            .as_ref()
            .and_then(|s| s.sampler.lock().counters.service_flags)
    };
    step_until(&mut h, "service_flags", |a| flags(a) == Some(0x7f));
    h.get_by_label("Camera").click();
    step_until(&mut h, "the camera bit to clear", |a| {
        flags(a) == Some(0x7f & !(1 << 4))
    });
    step_until(&mut h, "the response", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.control.as_ref())
            .is_some_and(|c| c.state().last.is_some())
    });
    h.step();
    assert!(
        h.query_by_label_contains("Camera is now disabled")
            .is_some()
    );
    assert!(
        h.query_by_label_contains("held by this inspector")
            .is_some(),
        "the lease holder is shown"
    );
    h.get_by_label("Refresh counters (GetServiceStatus)")
        .click();
    step_until(&mut h, "status counters", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.control.as_ref())
            .is_some_and(|c| !c.state().statuses.is_empty())
    });
    let statuses = h
        .state()
        .session
        .as_ref()
        .unwrap()
        .control
        .as_ref()
        .unwrap()
        .state()
        .statuses;
    assert!(statuses.iter().any(|s| s.service == "Camera" && !s.enabled));
    // Detaching releases the lease.
    h.state_mut().detach();
    h.step();
    let a = lrbc::attach::attach(&sim.target(), LayoutChoice::Auto).unwrap();
    let deadline = Instant::now() + DEADLINE;
    while lrbc::control::lease_holder(&a).is_some() {
        assert!(Instant::now() < deadline, "the lease was not released");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn quick_save_writes_the_selected_env_image_as_png() {
    let sim = SimRun::start(Preset::Cams64, Some(300.0)).unwrap();
    let dir = temp_dir("ui-shots");
    let _ = std::fs::remove_dir_all(&dir);
    let mut app = app(settings(&dir), Some(Target::Shm(sim.name.clone())));
    only_pane(&mut app, Pane::Cameras);
    let mut h = harness(app);
    step_until(&mut h, "camera images", |a| {
        a.session
            .as_ref()
            .is_some_and(|s| s.sampler.lock().image.is_some())
    });
    h.step();
    h.state_mut().views.cameras.selected = 5;
    h.get_by_label("Quick save env").click();
    // The PNG is written off the UI thread; the status bar says when it is done.
    step_until(&mut h, "env 5 saved", |a| {
        a.status_message()
            .is_some_and(|m| m.ends_with("_env0005.png"))
    });
    let message = h.state().status_message().unwrap_or_default().to_string();
    assert!(message.starts_with("screenshot saved to "), "{message}");
    let path = std::path::PathBuf::from(message.trim_start_matches("screenshot saved to "));
    assert!(path.starts_with(&dir));
    let png = image::open(&path).unwrap().to_rgba8();
    assert_eq!(png.dimensions(), (64, 64));
    let [r, g, b] = lrbc_sim::render::background(5, 0, 64);
    assert_eq!(
        png.get_pixel(0, 0).0,
        [r, g, b, 255],
        "the top-left pixel is env 5's background"
    );
    let distinct: std::collections::HashSet<[u8; 4]> = png.pixels().map(|p| p.0).collect();
    assert!(distinct.len() > 5, "a cart-pole, not a blank image");
    // F12 saves the selected env too; the grid is one image of every env.
    h.state_mut().views.cameras.selected = 6;
    h.key_press(egui::Key::F12);
    step_until(&mut h, "F12 saves env 6", |a| {
        a.status_message()
            .is_some_and(|m| m.starts_with("screenshot saved to") && m.ends_with("_env0006.png"))
    });
    h.get_by_label("Quick save grid").click();
    step_until(&mut h, "the grid saved", |a| {
        a.status_message().is_some_and(|m| m.ends_with("_grid.png"))
    });
    let grid_msg = h.state().status_message().unwrap_or_default().to_string();
    let grid = image::open(grid_msg.trim_start_matches("screenshot saved to "))
        .unwrap()
        .to_rgba8();
    assert_eq!(
        grid.dimensions(),
        (8 * 66 + 2, 8 * 66 + 2),
        "8 × 8 envs of 64 px with 2 px gaps"
    );
    // The client streams camera frames through the command rings: the panel shows them.
    step_until(&mut h, "a camera stream in traffic", |a| {
        a.session
            .as_ref()
            .is_some_and(|s| !s.traffic.lock().streams.is_empty())
    });
    h.run_steps(2);
    assert!(h.query_by_label_contains("Streamed in traffic").is_some());
    assert!(
        h.query_by_label_contains("frames seen").is_some(),
        "a stream is listed"
    );
    assert!(
        h.query_by_label_contains("cannot show").is_none(),
        "and its image decodes"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
// Unix: the in-process engine's segment is unlinked and replaced under its name. On
// Windows the window's own views keep a named mapping alive while its engine (here this
// very process) lives; tests/windows.rs covers an engine's death across processes.
#[cfg(unix)]
fn engine_death_and_replacement_never_freeze_the_window() {
    use common::window::replacement_engine;
    let sim = SimRun::start(Preset::Cams64, Some(300.0)).unwrap();
    let name = sim.name.clone();
    let mut h = harness(app(settings(&temp_dir("ui-gone")), Some(sim.target())));
    step_until(&mut h, "frames", |a| {
        a.session
            .as_ref()
            .is_some_and(|s| s.sampler.stats().frames.sampled > 5)
    });
    // The simulated run stops and removes its segment; the window keeps drawing.
    drop(sim);
    let started = Instant::now();
    step_until(&mut h, "the unlinked state", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.sampler.lock().report.clone())
            .is_some_and(|r| r.state == lrbc_live::watch::State::Unlinked)
    });
    assert!(started.elapsed() < Duration::from_secs(10));
    // A new run under the same name: the window follows it.
    let engine = replacement_engine(&name, 9, 4, 1);
    step_until(&mut h, "the replacement", |a| {
        a.session
            .as_ref()
            .is_some_and(|s| s.geometry().num_envs == 9)
    });
    assert!(
        h.state()
            .status_message()
            .unwrap_or_default()
            .contains("re-attached")
    );
    drop(engine);
}

/// Input of a logic-only run for a minimised window: eframe runs no pass then, only
/// `App::logic` through `Context::run_logic`. `close` adds a close request from the
/// window manager.
fn minimised_input(close: bool) -> egui::RawInput {
    let mut input = egui::RawInput::default();
    let root = input.viewports.entry(egui::ViewportId::ROOT).or_default();
    root.minimized = Some(true);
    if close {
        root.events.push(egui::ViewportEvent::Close);
    }
    input
}

#[test]
fn ctrl_c_and_a_close_request_are_handled_while_the_window_is_minimised() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let ctx = egui::Context::default();
    let mut app = InspectorApp::new(
        &ctx,
        settings(&temp_dir("ui-minimised")),
        None,
        None,
        LayoutChoice::Auto,
    );
    // What the demo hands the window: the flag that SIGINT (Ctrl-C) sets.
    let stop = Arc::new(AtomicBool::new(false));
    app.close_when = Some(Arc::clone(&stop));
    let mut frame = eframe::Frame::_new_kittest();
    let mut logic_only = |app: &mut InspectorApp, close: bool| {
        let input = minimised_input(close);
        assert_eq!(input.viewport().minimized, Some(true));
        ctx.run_logic(&input, |ctx| {
            assert_eq!(ctx.input(|i| i.viewport().minimized), Some(true));
            eframe::App::logic(app, ctx, &mut frame);
        })
    };
    let commands = |out: &egui::LogicOutput| {
        out.viewport_commands
            .get(&egui::ViewportId::ROOT)
            .cloned()
            .unwrap_or_default()
    };

    // No Ctrl-C yet: the window stays.
    let out = logic_only(&mut app, false);
    assert!(!commands(&out).contains(&egui::ViewportCommand::Close));

    // Ctrl-C: the next logic-only run asks the window to close, with no pass drawn.
    stop.store(true, Ordering::Relaxed);
    let out = logic_only(&mut app, false);
    assert!(
        commands(&out).contains(&egui::ViewportCommand::Close),
        "Ctrl-C closes a minimised window: {:?}",
        commands(&out)
    );

    // A close request from the window manager while minimised goes through: logic runs
    // and does not cancel it.
    stop.store(false, Ordering::Relaxed);
    let out = logic_only(&mut app, true);
    assert!(
        !commands(&out).contains(&egui::ViewportCommand::CancelClose),
        "{:?}",
        commands(&out)
    );
    assert!(app.session.is_none());
}
