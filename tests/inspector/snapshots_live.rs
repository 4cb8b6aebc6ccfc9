//! Golden images of the window on a live segment and on `serve` of one. The run is an
//! engine of this process with a fixed name and seed and no images, stepped one frame at
//! a time after the test wrote a trainer's actions and resets, each frame in the window's
//! data before the next is published: the window holds the same frames, values, events
//! and episodes on every run. The window on a live segment runs on a manual clock from a
//! fixed start that moves one engine period before each frame, so the times it shows (plots, events,
//! timeline, the segment's state) are the same on every run; only the engine's process
//! id is masked (magenta). The window on `serve` is on the same clock, `serve` running in
//! a thread of this process: only its status bar is masked, which shows the port and the
//! link's measures (see the test). Compared with `tests/snapshots/live-*.png` and
//! `remote-*.png` as `snapshots.rs` compares its own.

#![cfg(target_os = "linux")]
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::window::{Window, app, harness, harness_sized, only_pane, step_until};
use egui_kittest::kittest::Queryable as _;
use lrbc::clock::{Clock as _, ManualClock};
use lrbc::layout::plan::PlanLayout;
use lrbc_inspector::ui::InspectorApp;
use lrbc_inspector::ui::settings::{Pane, Settings};
use lrbc_sim::engine::{Engine, EngineConfig, Mode, Plant};

/// An engine named `name` (it need not be gone), `num_envs` envs × obs 4 × act 2, seed
/// 7, a NaN observation planted at step 300 and an infinite reward at step 420. Nothing
/// steps it but the test.
fn engine(name: &str, num_envs: u32) -> Engine {
    Engine::create(EngineConfig {
        name: name.to_string(),
        layout: PlanLayout::Lrbc { ext: true },
        num_envs,
        obs_size: 4,
        act_size: 2,
        image: None,
        mode: Mode::Training,
        hz: 60.0,
        ring_size: 4096,
        ctl_ring_size: None,
        force: true,
        dynamics: true,
        camera_hz: 30.0,
        seed: 7,
        nan_at_step: None,
        plants: vec![
            Plant::parse("nan@300:env=1,channel=obs,index=2").unwrap(),
            Plant::parse("inf@420:env=0,channel=reward").unwrap(),
        ],
    })
    .expect("the engine starts")
}

fn settings() -> Settings {
    let mut s = Settings {
        watched_envs: lrbc_live::sampler::WatchedEnvs::new([0, 1, 2]),
        // Every frame followed, a busy machine or not.
        busy_budget_percent: 0.0,
        // No flight recording saved around the planted faults (nor its note shown).
        flight_on: Vec::new(),
        recordings_dir: std::env::temp_dir().join(format!(
            "lrbc-snapshots-live-{}-recordings",
            std::process::id()
        )),
        ..Settings::default()
    };
    // A stall is a time the engine waits: none here (the test publishes at its own pace).
    s.detect.stall_min_secs = 3600.0;
    // No done burst (more than every env done in a frame): the count of a burst that goes
    // on is published at times of the detector's own.
    s.detect.done_burst_share = 1.0;
    s
}

/// The newest frame the window's sampler took.
fn taken(a: &InspectorApp) -> u64 {
    a.session
        .as_ref()
        .and_then(|s| s.sampler.lock().frames.back().map(|f| f.frame_seq))
        .unwrap_or(0)
}

/// What a trainer writes before each step: every env's action (a slow sine, its phase
/// the env's) and a reset of each env the last frame ended.
struct Trainer {
    seg: lrbc::segment::SegmentRw,
    num_envs: usize,
    act_at: u64,
    dones_at: u64,
    resets_at: u64,
    actions: Vec<f32>,
    flags: Vec<u8>,
}

impl Trainer {
    fn of(name: &str) -> Self {
        use lrbc::layout::RegionKind;
        let location = lrbc::segment::shm_location(name).unwrap();
        let g = lrbc::attach::attach(
            &lrbc::attach::Target::Shm(name.to_string()),
            lrbc::layout::LayoutChoice::Auto,
        )
        .unwrap()
        .geometry;
        let at = |k| g.region(k).map(|r| r.offset_bytes).unwrap();
        let num_envs = g.num_envs as usize;
        Self {
            seg: lrbc::segment::SegmentRw::open_at(&location).unwrap(),
            num_envs,
            act_at: at(RegionKind::Act),
            dones_at: at(RegionKind::Dones),
            resets_at: at(RegionKind::Resets),
            actions: vec![0.0; num_envs * g.act_size as usize],
            flags: vec![0; num_envs],
        }
    }

    fn act(&mut self, step: u64) {
        let per_env = self.actions.len() / self.num_envs.max(1);
        for (i, a) in self.actions.iter_mut().enumerate() {
            let env = (i / per_env.max(1)) as f32;
            *a = if i % per_env.max(1) == 0 {
                (step as f32 * 0.05 + env * 0.7).sin() * 0.5
            } else {
                0.0
            };
        }
        assert!(self.seg.write_f32s(self.act_at, &self.actions));
        assert!(self.seg.read_at(self.dones_at, &mut self.flags));
        assert!(self.seg.write_at(self.resets_at, &self.flags));
    }
}

/// Where the manual clocks start (1,000 s).
const START_NS: u64 = 1_000_000_000_000;

/// The window's clock moves by this much before each frame: the engine's period at 60 Hz.
const FRAME_NS: u64 = 16_666_667;

/// Steps `engine` to the frames `frames` after a trainer's actions and resets, each
/// frame in the window's data before the next is published; `clock`, the window's,
/// moves by [`FRAME_NS`] before each.
fn step_each_taken(
    h: &mut Window,
    engine: &mut Engine,
    name: &str,
    frames: std::ops::RangeInclusive<u64>,
    clock: &ManualClock,
) {
    let mut trainer = Trainer::of(name);
    let deadline = Instant::now() + common::DEADLINE;
    for k in frames {
        trainer.act(k);
        clock.advance_ns(FRAME_NS);
        engine.step_once(None);
        while taken(h.state()) < k {
            assert!(Instant::now() < deadline, "frame {k} not taken");
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// [`step_each_taken`]; then waits until the detector and the episodes' accountant have
/// seen every frame.
fn step_taken(h: &mut Window, engine: &mut Engine, name: &str, frames: u64, clock: &ManualClock) {
    step_each_taken(h, engine, name, 1..=frames, clock);
    step_until(h, "every frame checked and counted", |a| {
        let Some(s) = a.session.as_ref() else {
            return false;
        };
        let checked = s
            .events()
            .is_some_and(|l| l.lock().unwrap().totals().frames_checked >= frames);
        let counted = s
            .episodes()
            .is_some_and(|b| b.lock().unwrap().totals.frames_taken >= frames);
        checked && counted
    });
}

/// The window on a manual clock attached to a fresh engine `name` of `num_envs` envs,
/// `frames` frames published and taken, the clock moved by [`FRAME_NS`] before each.
fn attached(name: &str, num_envs: u32, frames: u64) -> (Window, Engine) {
    let mut engine = engine(name, num_envs);
    // A fixed start: the follower, its sinks and the window keep to this clock.
    let clock = ManualClock::new(START_NS);
    // The engine stamps its frames (`frame_time_ns`) by the same clock.
    engine.set_clock(Arc::new(clock.clone()));
    let mut a = app(settings(), None);
    a.set_clock(Arc::new(clock.clone()));
    a.attach(lrbc::attach::Target::Shm(name.to_string()));
    let mut h = harness(a);
    assert!(h.state().session.is_some(), "attached");
    h.run_steps(2);
    step_taken(&mut h, &mut engine, name, frames, &clock);
    h.state_mut().clear_status_message();
    (h, engine)
}

/// Masks the status bar of the window on `serve` right of its buttons: the server's
/// port and the engine's process id, which no clock decides, and the link's measures
/// (the kernel's rate of the connection; the ages and rates the viewer takes by the
/// machine's time), which the clock of the test does not reach.
fn mask_status_bar(h: &mut Window) {
    let save = h.get_by_label_contains("Save last").rect();
    let size = h.ctx.content_rect().size();
    h.mask(egui::Rect::from_min_max(
        egui::pos2(save.right() + 4.0, save.top() - 4.0),
        size.to_pos2(),
    ));
}

/// Masks the line of the label holding `text`, from the label to the right edge: what
/// follows moves with the label's width.
fn mask_to_the_right_of(h: &mut Window, text: &str) {
    let label = h.get_by_label_contains(text).rect();
    let right = h.ctx.content_rect().right();
    h.mask(egui::Rect::from_min_max(
        label.min,
        egui::pos2(right, label.bottom()),
    ));
}

/// Masks the status bar from its engine on: the process id and name of this process,
/// which no clock decides, and the rest of the line, which the id's width moves.
fn mask_engine_pid(h: &mut Window) {
    mask_to_the_right_of(h, "engine: ");
}

/// Masks the value of the Header panel's `server_pid` row: this process's id.
fn mask_server_pid(h: &mut Window) {
    let row = h.get_by_label("server_pid").rect();
    let from = h.get_by_label("value").rect().left();
    let to = h.get_by_label("meaning").rect().left();
    h.mask(egui::Rect::from_min_max(
        egui::pos2(from, row.top()),
        egui::pos2(to, row.bottom()),
    ));
}

/// Masks the Counters panel's frame and action rates: the window measures them at ticks
/// of its own in real time, each between two of the test's frames or after the last.
fn mask_rates(h: &mut Window) {
    let label = h.get_by_label("frame rate").rect();
    let below = h.get_by_label_contains("state:").rect().top();
    let right = h.ctx.content_rect().right();
    h.mask(egui::Rect::from_min_max(
        label.min,
        egui::pos2(right, below - 2.0),
    ));
}

/// Masks the Counters panel's shares of wall time (the bar and its legend): the served
/// run's time since its last frame counts as a wait in them, and the window shows the
/// server's newest rhythm, which comes about once a second of the clock, the second
/// before or the last.
fn mask_rhythm_shares(h: &mut Window) {
    let above = h.get_by_label_contains("Learning the loop").rect().bottom();
    let legend = h.get_by_label_contains("stepping ").rect().bottom();
    let right = h.ctx.content_rect().right();
    h.mask(egui::Rect::from_min_max(
        egui::pos2(0.0, above + 1.0),
        egui::pos2(right, legend + 1.0),
    ));
}

/// Masks the RPC panel's engine: this process's id and name (the test binary's, whose
/// width the build decides), to the right edge.
fn mask_engine_process(h: &mut Window) {
    mask_to_the_right_of(h, "(alive)");
}

/// Shows `pane` alone and compares it with `tests/snapshots/NAME.png` after `mask`.
fn compare(h: &mut Window, pane: Pane, name: &str, mask: impl Fn(&mut Window)) -> Option<String> {
    only_pane(h.state_mut(), pane);
    h.run_steps(4);
    mask_engine_pid(h);
    mask(h);
    h.try_snapshot(name).err().map(|e| format!("{name}: {e}"))
}

#[test]
fn the_panels_of_a_live_segment_stepped_frame_by_frame_match_their_golden_images() {
    let (mut h, engine) = attached("lrbc-golden-live", 16, 600);
    let failed: Vec<String> = [
        compare(&mut h, Pane::Episodes, "live-episodes", |_| {}),
        compare(&mut h, Pane::Events, "live-events", |_| {}),
        compare(&mut h, Pane::Header, "live-header", mask_server_pid),
        compare(&mut h, Pane::Counters, "live-counters", mask_rates),
        compare(&mut h, Pane::Envs, "live-envs", |_| {}),
        compare(&mut h, Pane::Traffic, "live-traffic", |_| {}),
        compare(&mut h, Pane::Rpc, "live-rpc", mask_engine_process),
        compare(&mut h, Pane::Cameras, "live-cameras", |_| {}),
    ]
    .into_iter()
    .flatten()
    .collect();
    drop(h);
    drop(engine);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn the_episodes_of_a_live_4096_env_segment_match_their_golden_image() {
    let (mut h, engine) = attached("lrbc-golden-live-4096", 4096, 400);
    let failed = compare(&mut h, Pane::Episodes, "live-4096-episodes", |_| {});
    drop(h);
    drop(engine);
    assert!(failed.is_none(), "{}", failed.unwrap_or_default());
}

#[test]
fn the_envs_panel_of_the_paused_live_view_matches_its_golden_image() {
    let (mut h, engine) = attached("lrbc-golden-live-paused", 16, 600);
    assert!(
        h.state_mut().session.as_mut().unwrap().pause_live(),
        "paused"
    );
    let failed = compare(&mut h, Pane::Envs, "live-paused-envs", |_| {});
    drop(h);
    drop(engine);
    assert!(failed.is_none(), "{}", failed.unwrap_or_default());
}

#[test]
fn the_overview_of_a_served_run_stepped_frame_by_frame_matches_its_golden_image() {
    let name = "lrbc-golden-remote";
    let mut engine = engine(name, 16);
    // The engine stamps its frames, and `serve` (in this process) stamps its copies,
    // times its messages and sends its status each second, by one manual clock.
    let clock = ManualClock::new(START_NS);
    engine.set_clock(Arc::new(clock.clone()));
    // The server's detector, as the window's: no stalls, no done bursts (see `settings`).
    let serve = common::served::ServeHere::start(
        name,
        &["--stall-min", "3600", "--done-burst", "1"],
        Arc::new(clock.clone()),
    );
    // Plots of the last 5 s: the frames before the window's subscriptions reached the
    // server are not in them (see below), and a plot column is shorter than a frame, so
    // that each frame has a column of its own wherever the columns' edges fall.
    let mut a = app(
        Settings {
            plot_window_secs: 5.0,
            ..settings()
        },
        None,
    );
    a.set_clock(Arc::new(clock.clone()));
    a.connect(&serve.url);
    // Wide enough that the status bar's figures of the link stay on one line, whatever
    // their width (a second line would move the panels up).
    let mut h = harness_sized(a, egui::vec2(1800.0, 900.0));
    step_until(&mut h, "the run's description", |a| {
        a.session
            .as_ref()
            .and_then(|s| s.remote())
            .is_some_and(|(r, _)| r.geometry.size_bytes > 0)
    });
    // The server's events are timed by the window as the frames are (its clock to the
    // window's: the least delay of an event's message after its frame): each event is
    // in the window before the clock moves on from its frame.
    let events = |n: usize| {
        move |a: &InspectorApp| {
            a.session
                .as_ref()
                .and_then(|s| s.events())
                .is_some_and(|l| l.lock().unwrap().events().len() >= n)
        }
    };
    // Frames before 150 are outside the plots of the last 5 s. Among them a frame came
    // whole: the frames channel's subscription holds for every later frame (a frame
    // published before it lands comes only as its summary).
    step_each_taken(&mut h, &mut engine, name, 1..=149, &clock);
    step_until(&mut h, "a whole frame before the plotted ones", |a| {
        a.session
            .as_ref()
            .is_some_and(|s| s.sampler.lock().envs.values().any(|h| !h.detail.is_empty()))
    });
    step_each_taken(&mut h, &mut engine, name, 150..=300, &clock);
    step_until(&mut h, "the NaN's event", events(1));
    step_each_taken(&mut h, &mut engine, name, 301..=420, &clock);
    step_until(&mut h, "the infinity's event", events(2));
    step_each_taken(&mut h, &mut engine, name, 421..=450, &clock);
    // The server's figures come with its status, once a second of the clock: seconds
    // pass until a status says that every frame was checked, and at least three (the
    // segment is stale after two without a frame, as the server's watcher sees it).
    let served = |a: &InspectorApp| a.session.as_ref().and_then(|s| s.link()?.served);
    let checked = |a: &InspectorApp| {
        a.session
            .as_ref()
            .and_then(|s| s.events())
            .is_some_and(|l| l.lock().unwrap().totals().frames_checked >= 450)
    };
    for second in 0.. {
        assert!(second < 30, "no status of every frame checked");
        let before = served(h.state());
        clock.advance_ns(1_000_000_000);
        step_until(&mut h, "the status of the second", |a| served(a) != before);
        if second >= 2 && checked(h.state()) {
            break;
        }
    }
    h.state_mut().clear_status_message();
    h.run_steps(4);
    mask_served(&mut h);
    let mut failed: Vec<String> = (h.try_snapshot("remote-overview").err())
        .map(|e| format!("remote-overview: {e}"))
        .into_iter()
        .collect();
    let panes: [(Pane, &str, Mask); 5] = [
        (Pane::Episodes, "remote-episodes", |_| {}),
        (Pane::Header, "remote-header", mask_server_pid),
        (Pane::Counters, "remote-counters", |h| {
            mask_rates(h);
            mask_rhythm_shares(h);
        }),
        (Pane::Traffic, "remote-traffic", |_| {}),
        (Pane::Rpc, "remote-rpc", |_| {}),
    ];
    for (pane, name, mask) in panes {
        failed.extend(compare(&mut h, pane, name, |h| {
            mask_served(h);
            mask(h);
        }));
    }
    drop(h);
    drop(serve);
    drop(engine);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// What a picture masks beyond what every picture of its run does.
type Mask = fn(&mut Window);

/// Masks the window on `serve`: its status bar (see [`mask_status_bar`]) and the
/// server's address in the top bar (its port).
fn mask_served(h: &mut Window) {
    mask_status_bar(h);
    let addrs: Vec<egui::Rect> = h
        .query_all_by_label_contains("127.0.0.1:")
        .map(|n| n.rect())
        .collect();
    for addr in addrs {
        h.mask(addr);
    }
}

/// A trainer that keeps the lock-step protocol on a manual clock: it takes 3 ms for each
/// step's actions (and `update` more before the first step of each rollout), stamps and
/// publishes them (`action_time_ns`, `action_seq`), and the engine takes 1 ms (and
/// `engine_wait` more where asked) before it publishes the frame.
struct LoopTrainer {
    trainer: Trainer,
    action_seq_at: u64,
    action_time_at: u64,
}

impl LoopTrainer {
    fn of(name: &str) -> Self {
        let g = lrbc::attach::attach(
            &lrbc::attach::Target::Shm(name.to_string()),
            lrbc::layout::LayoutChoice::Auto,
        )
        .unwrap()
        .geometry;
        Self {
            trainer: Trainer::of(name),
            action_seq_at: g.counters.action_seq,
            action_time_at: g.counters.ext.unwrap().action_time_ns,
        }
    }

    /// Step `k`: the trainer's turn of `trainer_ns`, the engine's of `engine_ns`, the
    /// frame in the window's data before this returns.
    fn step(
        &mut self,
        h: &mut Window,
        engine: &mut Engine,
        clock: &ManualClock,
        k: u64,
        (trainer_ns, engine_ns): (u64, u64),
    ) {
        clock.advance_ns(trainer_ns);
        self.trainer.act(k);
        let seg = &self.trainer.seg;
        assert!(seg.store_u64(self.action_time_at, clock.now_ns()));
        assert!(seg.store_u64(self.action_seq_at, k));
        clock.advance_ns(engine_ns);
        engine.step_once(Some(k));
        let deadline = Instant::now() + common::DEADLINE;
        while taken(h.state()) < k {
            assert!(Instant::now() < deadline, "frame {k} not taken");
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

#[test]
fn the_counters_panel_of_a_ppo_loop_shows_its_rhythm_as_its_golden_image() {
    let name = "lrbc-golden-live-rhythm";
    let mut engine = engine(name, 16);
    let clock = ManualClock::new(START_NS);
    engine.set_clock(Arc::new(clock.clone()));
    let mut a = app(settings(), None);
    // Stalls judged as by default (the Counters panel shows their verdicts; the events
    // raised between two frames are not pictured).
    a.settings.detect.stall_min_secs = 0.25;
    a.set_clock(Arc::new(clock.clone()));
    a.attach(lrbc::attach::Target::Shm(name.to_string()));
    let mut h = harness(a);
    h.run_steps(2);
    let mut t = LoopTrainer::of(name);
    const MS: u64 = 1_000_000;
    let mut k = 0;
    // Rollouts of 32 frames at 4 ms, each followed by a 0.8 s update; the eighth update
    // hangs 5 s; the engine waits 0.5 s in the middle of the sixth rollout.
    for rollout in 1..=12u64 {
        for i in 0..32u64 {
            k += 1;
            let trainer = match (i, rollout) {
                (0, 1) => 3 * MS,
                (0, 9) => 5_000 * MS,
                (0, _) => 800 * MS,
                _ => 3 * MS,
            };
            let engine_wait = if rollout == 6 && i == 16 {
                500 * MS
            } else {
                MS
            };
            t.step(&mut h, &mut engine, &clock, k, (trainer, engine_wait));
        }
    }
    // The last frame ends an update: the rhythm the window shows is as of it.
    t.step(&mut h, &mut engine, &clock, k + 1, (800 * MS, MS));
    step_until(&mut h, "the rhythm of the last update", |a| {
        a.session.as_ref().is_some_and(|s| {
            s.events().is_some_and(|l| {
                l.lock()
                    .unwrap()
                    .rhythm()
                    .is_some_and(|r| r.pauses == 13 && r.at_ns >= clock.now_ns())
            })
        })
    });
    h.state_mut().clear_status_message();
    let failed = compare(&mut h, Pane::Counters, "live-counters-rhythm", mask_rates);
    drop(h);
    drop(engine);
    assert!(failed.is_none(), "{}", failed.unwrap_or_default());
}
