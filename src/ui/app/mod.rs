//! The inspector window: attach view, top and status bars, and the panels as tiles.
//! `pacing` sets how often it redraws, `save_dialog` runs the screenshot save dialog
//! on its own thread, `settings_menu` and `status_bar` draw those, `panes` the tiles,
//! `timeline` the bar that moves through a recording (and its open dialog); `flight` runs
//! the flight recorder (`lrbc_recording::recorder::flight`) for a live session.

mod detection;
mod events;
mod flight;
mod nodes;
mod pacing;
mod panes;
mod save_dialog;
mod settings_menu;
mod status_bar;
mod timeline;
mod top_bar;

pub use pacing::{
    BUSY_REDRAW_HZ, Pacing, software_renderer, software_rendering_likely, throttled_waker,
};

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::panels::attach::{self as attach_view, AttachForm, remembered};
use super::panels::cameras::{CamerasView, ShotRequest};

use super::panels::traffic::TrafficView;
use super::screenshot;
use super::settings::{Pane, Settings, Theme, default_tree};
use crate::session::Session;
use crate::ui::discovery::Discovery;
use lrbc::attach::Target;
use lrbc::clock::{Clock, MonotonicClock, monotonic_now_ns};
use lrbc::layout::LayoutChoice;

pub use panes::PanelViews;
use panes::{Panes, SegmentProcesses};
use save_dialog::{SaveDialogs, saved_text};
pub use timeline::{EpisodeSpan, TimelineUi};

/// A message in the status bar.
#[derive(Clone, Debug)]
struct Message {
    text: String,
    error: bool,
    at_ns: u64,
}

/// The whole window's state.
pub struct InspectorApp {
    pub settings: Settings,
    pub tree: egui_tiles::Tree<Pane>,
    pub session: Option<Session>,
    /// Servers connected and not shown: their viewers go on, and the Attach view shows
    /// a row for each.
    pub nodes: Vec<Session>,
    pub choice: LayoutChoice,
    pub show_attach: bool,
    pub form: AttachForm,
    /// The panels' own state: filters, selections, caches.
    pub views: PanelViews,
    discovery: Discovery,
    message: Option<Message>,
    waker: Arc<dyn Fn() + Send + Sync>,
    /// How often the window redraws, and what a redraw costs.
    pub pacing: Pacing,
    /// The engine's and the client's processes.
    processes: SegmentProcesses,
    save_dialogs: SaveDialogs,
    /// The timeline's state: its dialog, the kind "next event" looks for, the episode
    /// marked.
    pub timeline: TimelineUi,
    shown_title: String,
    /// The clock of the sessions this window starts (their frames' stamps) and of the
    /// time rows count from: the monotonic clock unless a test sets one.
    clock: Arc<dyn Clock>,
    t0_ns: u64,
    /// The flight recorder of the session.
    flight: flight::FlightUi,
    /// The detector's settings as the Settings menu edits them.
    detection_form: detection::DetectionForm,
    /// The recording compared with the one shown, and the Divergence panel's state.
    pub baseline: Option<super::baseline::Baseline>,
    /// The window closes itself when this is set.
    pub close_when: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// Start recording once the flight recorder runs on a live segment (`--record`).
    pub record_when_attached: bool,
}

impl std::fmt::Debug for InspectorApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InspectorApp")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl InspectorApp {
    /// A window on `ctx`; attaches to `target` when given.
    pub fn new(
        ctx: &egui::Context,
        settings: Settings,
        tree: Option<egui_tiles::Tree<Pane>>,
        target: Option<Target>,
        choice: LayoutChoice,
    ) -> Self {
        let (pacing, waker) = Pacing::new(ctx);
        apply_theme(ctx, settings.theme);
        let mut app = Self {
            discovery: Discovery::start(Arc::clone(&waker)),
            settings,
            tree: tree.unwrap_or_else(default_tree),
            session: None,
            nodes: Vec::new(),
            choice,
            show_attach: true,
            form: AttachForm::default(),
            views: PanelViews::default(),
            message: None,
            waker,
            pacing,
            processes: SegmentProcesses::new(),
            save_dialogs: SaveDialogs::default(),
            timeline: TimelineUi::default(),
            shown_title: String::new(),
            clock: Arc::new(MonotonicClock),
            t0_ns: monotonic_now_ns(),
            close_when: None,
            record_when_attached: false,
            flight: flight::FlightUi::default(),
            detection_form: detection::DetectionForm::default(),
            baseline: None,
        };
        if let Some(t) = target {
            app.attach(t);
        }
        app
    }

    /// The clock of the live sessions started from now on (see the field `clock`), and of
    /// the start a served run's times count from: tests set a manual one, so that the
    /// times the window shows are the same on every run.
    pub fn set_clock(&mut self, clock: Arc<dyn Clock>) {
        self.clock = clock;
    }

    /// Attaches to a target; on failure the attach view shows why.
    pub fn attach(&mut self, target: Target) {
        self.park_session();
        match Session::start_with_clock(
            target.clone(),
            self.choice,
            self.settings.sampler(),
            self.settings.traffic_limits(),
            Arc::clone(&self.waker),
            Arc::clone(&self.clock),
        ) {
            Ok(s) => {
                self.settings.remember(&remembered(&target));
                self.say(format!("attached to {}", s.label()), false);
                self.shown(s);
            }
            Err(e) => self.not_shown(e),
        }
    }

    /// Opens a recording (its timeline at the start); on failure the attach view shows
    /// why.
    pub fn open_recording(&mut self, path: &std::path::Path) {
        self.timeline.episode = None;
        self.baseline = None;
        self.views.divergence = super::panels::divergence::DivergenceView::default();
        self.park_session();
        match Session::open_recording(
            path,
            self.settings.sampler(),
            self.settings.traffic_limits(),
            Arc::clone(&self.waker),
        ) {
            Ok(s) => {
                let note = s
                    .recording()
                    .and_then(|(r, _)| r.unfinished.clone())
                    .map_or_else(String::new, |n| format!(" ({n})"));
                self.say(format!("opened {}{note}", path.display()), false);
                self.shown(s);
            }
            Err(e) => self.not_shown(e),
        }
    }

    /// Compares the run shown (a recording, or a live run as it goes) with the baseline
    /// recording `path` (run A), on threads of their own: the Divergence panel shows what
    /// they find, the Envs and Episodes panels draw the baseline over the run.
    pub fn set_baseline(&mut self, path: &std::path::Path) {
        let Some(s) = self.session.as_ref() else {
            self.say("open a recording or attach to a run first".into(), true);
            return;
        };
        let waker = Arc::clone(&self.waker);
        let baseline = match (&s.target, s.recording(), s.live()) {
            (Target::Path(shown), Some(_), _) => {
                super::baseline::Baseline::start(path, shown, waker)
            }
            (_, None, Some(attached)) => {
                let budget = self.settings.busy_budget_percent;
                super::baseline::Baseline::start_live(
                    path,
                    attached,
                    (budget > 0.0).then_some(budget),
                    waker,
                )
            }
            _ => {
                self.say(
                    "a baseline is compared with a recording or a live run, not a served one"
                        .into(),
                    true,
                );
                return;
            }
        };
        self.baseline = Some(baseline);
        self.views.divergence = super::panels::divergence::DivergenceView::default();
        self.say(
            format!("comparing with the baseline {}", path.display()),
            false,
        );
    }

    fn shown(&mut self, s: Session) {
        // The flight recorder records the session shown: it starts again on this one.
        self.flight_stop();
        // A baseline is the shown run's: another run drops it.
        self.baseline = None;
        // A live session's frames are stamped by the window's clock, and the viewer puts
        // a served run's times on the monotonic clock, the window's unless a test set
        // another; a recording's rows carry their own times.
        self.t0_ns = if s.live().is_some() || s.remote().is_some() {
            self.clock.now_ns()
        } else {
            monotonic_now_ns()
        };
        self.session = Some(s);
        self.show_attach = false;
        self.form.error = None;
        self.views.traffic = TrafficView::default();
        self.views.cameras = CamerasView::default();
        self.discovery.set_active(false);
    }

    fn not_shown(&mut self, e: String) {
        self.form.error = Some(e.clone());
        self.say(e, true);
        self.show_attach = true;
        self.discovery.set_active(true);
    }

    pub fn detach(&mut self) {
        if let Some(s) = self.session.take() {
            let what = if s.recording().is_some() {
                "closed"
            } else if s.remote().is_some() {
                "disconnected from"
            } else {
                "detached from"
            };
            self.say(format!("{what} {}", s.label()), false);
        }
        self.show_attach = true;
        self.discovery.set_active(true);
    }

    fn say(&mut self, text: String, error: bool) {
        self.message = Some(Message {
            text,
            error,
            at_ns: monotonic_now_ns(),
        });
    }

    /// The window title: starts with `lrbc-inspector` and names the target.
    pub fn title(&self) -> String {
        match &self.session {
            Some(s) if s.recording().is_some() => {
                format!("lrbc-inspector — {} (recording)", s.label())
            }
            Some(s) if s.remote().is_some() => {
                format!("lrbc-inspector — {} (served)", s.label())
            }
            Some(s) => format!("lrbc-inspector — {}", s.label()),
            None => "lrbc-inspector — not attached".to_string(),
        }
    }

    /// The message in the status bar now.
    pub fn status_message(&self) -> Option<&str> {
        self.message.as_ref().map(|m| m.text.as_str())
    }

    /// Clears the status bar's message (the golden images' tests: it names a file's
    /// path, which differs from checkout to checkout).
    pub fn clear_status_message(&mut self) {
        self.message = None;
    }

    /// Work that is not drawing, run before each pass and also while the window shows
    /// nothing (minimised, hidden): Ctrl-C (the stop flag), taking up a replaced segment,
    /// the save dialog's results, process liveness, the title, the redraw rate and
    /// whether discovery runs. Nothing here draws.
    pub fn logic(&mut self, ctx: &egui::Context) {
        if let Some(stop) = &self.close_when {
            // Relaxed: a flag with no data behind it.
            if stop.load(Ordering::Relaxed) {
                ctx.send_viewport_cmd(egui::ViewportCommand::Close);
            }
            // Look again soon even when nothing else wakes the window.
            ctx.request_repaint_after(Duration::from_millis(250));
        }
        let mut note = None;
        if let Some(s) = &mut self.session
            && s.adopt_replacement()
        {
            note = Some(match s.remote() {
                Some((r, _)) if r.geometry.size_bytes == 0 => format!(
                    "{} restarted: waiting for it to describe its run",
                    s.label()
                ),
                Some((r, _)) => {
                    format!("{} serves a run of {} envs", s.label(), r.geometry.num_envs)
                }
                None => format!("the segment was replaced; re-attached to {}", s.label()),
            });
        }
        // Servers in the background take up their new runs too (shown, they are current).
        for n in &mut self.nodes {
            n.adopt_replacement();
        }
        if let Some(n) = note {
            self.views.cameras = CamerasView::default();
            self.views.traffic = TrafficView::default();
            self.say(n, false);
        }
        if self
            .session
            .as_ref()
            .and_then(Session::link)
            .is_some_and(|l| l.state != lrbc_remote::view::LinkState::Connected)
        {
            // The link's countdown to its next attempt.
            ctx.request_repaint_after(Duration::from_millis(500));
        }
        self.flight_logic();
        let results: Vec<_> = self.save_dialogs.results().collect();
        for r in results {
            match r {
                Ok(paths) if paths.is_empty() => self.say("screenshot cancelled".into(), false),
                Ok(paths) => self.say(saved_text(&paths), false),
                Err(e) => self.say(e, true),
            }
        }
        self.open_dialog_results();
        self.timeline_logic(ctx);
        let now = monotonic_now_ns();
        if let Some(a) = self.session.as_ref().and_then(Session::live) {
            self.processes.refresh(a, now);
        }
        let title = self.title();
        if title != self.shown_title {
            ctx.send_viewport_cmd(egui::ViewportCommand::Title(title.clone()));
            self.shown_title = title;
        }
        self.pacing.set_interval(self.redraw_interval_ns());
        self.discovery
            .set_active(self.session.is_none() || self.show_attach);
    }

    /// One shown frame as eframe runs it: [`Self::logic`], then [`Self::ui`]. For the
    /// headless drivers of the window (tests, screenshots, benchmarks).
    pub fn run_frame(&mut self, ui: &mut egui::Ui) {
        self.logic(ui.ctx());
        self.ui(ui);
    }

    /// Takes a screenshot of the cameras.
    pub fn screenshot(&mut self, req: ShotRequest) {
        let Some(s) = &self.session else { return };
        let Some(frame) = s.sampler.lock().image.clone() else {
            self.say("no camera image to capture yet".into(), true);
            return;
        };
        let columns = (frame.num_envs as f32).sqrt().ceil() as u32;
        let label = s.label();
        match req {
            ShotRequest::Quick(shot) => match screenshot::quick_save(
                &frame,
                shot,
                &self.settings.screenshot_dir,
                &label,
                columns,
            ) {
                Ok(paths) => self.say(saved_text(&paths), false),
                Err(e) => self.say(e, true),
            },
            ShotRequest::Dialog(shot) => {
                // The dialog runs on its own thread so the window keeps drawing.
                let dir = self.settings.screenshot_dir.clone();
                let name = format!("{label}_frame{}.png", frame.frame_seq);
                if let Err(e) = self.save_dialogs.open(frame, shot, dir, name, columns) {
                    self.say(format!("cannot open the save dialog: {e}"), true);
                }
            }
        }
    }

    /// The whole window: draws it and answers its input (eframe runs [`Self::logic`]
    /// first).
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        self.pacing.count_redraw();
        self.shortcuts(ui);
        egui::Panel::top("top_bar").show(ui, |ui| self.top_bar(ui));
        let timeline = self
            .session
            .as_ref()
            .is_some_and(|s| s.recording().is_some() || s.paused.is_some());
        if timeline && !self.show_attach {
            egui::Panel::top("timeline").show(ui, |ui| self.timeline(ui));
        }
        egui::Panel::bottom("status_bar").show(ui, |ui| self.status_bar(ui));
        let attach_shows = self.session.is_none() || self.show_attach;
        egui::CentralPanel::default().show(ui, |ui| {
            if attach_shows {
                let listing = self.discovery.snapshot();
                let recent = self.settings.recent_targets.clone();
                let nodes = self.node_rows();
                egui::ScrollArea::vertical()
                    .id_salt("attach_scroll")
                    .show(ui, |ui| {
                        match attach_view::ui(ui, &mut self.form, &listing, &recent, &nodes) {
                            Some(attach_view::Chosen::Target(t)) => self.attach(t),
                            Some(attach_view::Chosen::Server(url)) => self.connect(&url),
                            Some(attach_view::Chosen::Node(addr)) => self.show_node(&addr),
                            None => {}
                        }
                    });
                return;
            }
            let Self {
                tree,
                session,
                settings,
                views,
                processes,
                t0_ns,
                baseline,
                ..
            } = self;
            let Some(session) = session.as_mut() else {
                return;
            };
            if let Some((info, viewer)) = session.remote()
                && info.geometry.size_bytes == 0
            {
                ui.vertical_centered(|ui| {
                    ui.add_space(40.0);
                    ui.heading(format!("Waiting for {}", info.addr));
                    ui.label(viewer.link().summary());
                    ui.weak("The panels show once the server has described the run it serves.");
                });
                return;
            }
            // Rows of a recording carry its log times: they count from its start, as
            // live rows count from the attach.
            let t0_ns = session
                .recording()
                .map_or(*t0_ns, |(_, player)| player.state().range.0);
            let mut behavior = Panes {
                session,
                settings,
                views,
                processes,
                t0_ns,
                shot: None,
                go: None,
                episode: None,
                baseline: baseline.as_ref(),
                divergence: None,
            };
            tree.ui(&mut behavior, ui);
            let go = behavior.go.take();
            let episode = behavior.episode.take();
            let divergence = behavior.divergence.take();
            if let Some(req) = behavior.shot {
                self.screenshot(req);
            }
            if let Some(e) = go {
                self.go_to_event(&e);
            }
            if let Some(a) = episode {
                self.go_to_episode(a);
            }
            if let Some(super::panels::divergence::DivergenceAction::Go(d)) = divergence {
                self.go_to_divergence(&d);
            }
        });
    }
}

pub fn apply_theme(ctx: &egui::Context, theme: Theme) {
    ctx.set_theme(match theme {
        Theme::Dark => egui::Theme::Dark,
        Theme::Light => egui::Theme::Light,
    });
}

impl eframe::App for InspectorApp {
    fn logic(&mut self, ctx: &egui::Context, _frame: &mut eframe::Frame) {
        InspectorApp::logic(self, ctx);
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        InspectorApp::ui(self, ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::set_value(storage, SETTINGS_KEY, &self.settings);
        eframe::set_value(storage, TREE_KEY, &self.tree);
    }

    fn auto_save_interval(&self) -> Duration {
        Duration::from_secs(10)
    }
}

pub const SETTINGS_KEY: &str = "lrbc_inspector_settings";
pub const TREE_KEY: &str = "lrbc_inspector_tiles";
