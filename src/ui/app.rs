//! The inspector window: attach view, status bar, and the panels as tiles.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::panels::attach::{self as attach_view, AttachForm, remembered};
use super::panels::cameras::{CamerasView, ShotRequest};
use super::panels::rpc::RpcInfo;
use super::panels::traffic::TrafficView;
use super::panels::{cameras, counters, envs, header, rpc, traffic};
use super::screenshot::{self, Shot};
use super::settings::{Pane, Settings, Theme, default_tree};
use super::widgets::{BAD, WARN, state_color, state_text};
use crate::attach::Target;
use crate::discovery::Discovery;
use crate::layout::LayoutChoice;
use crate::procinfo::{ProcInfo, Processes};
use crate::segment::monotonic_now_ns;
use crate::session::Session;

/// Wakes the UI from other threads, at most once per `interval_ns` (read at each call,
/// so that the rate can change while the threads run).
pub fn throttled_waker(
    ctx: &egui::Context,
    interval_ns: Arc<AtomicU64>,
) -> Arc<dyn Fn() + Send + Sync> {
    let ctx = ctx.clone();
    let last = AtomicU64::new(0);
    Arc::new(move || {
        let now = monotonic_now_ns();
        // Relaxed: a rate limit; a lost race costs one extra repaint at most.
        let interval = interval_ns.load(Ordering::Relaxed);
        let prev = last.load(Ordering::Relaxed);
        if now.saturating_sub(prev) >= interval {
            last.store(now, Ordering::Relaxed);
            // Not `request_repaint`: egui answers each of those with two passes, which
            // would double the rate; a request with a delay gets one.
            ctx.request_repaint_after(Duration::from_millis(1));
        }
    })
}

/// Whether OpenGL here is most likely Mesa's software rasteriser: no GPU render node, or
/// software rendering asked for. Redrawing then costs whole cores, so the window redraws
/// less often by default.
pub fn software_rendering_likely() -> bool {
    if std::env::var_os("LIBGL_ALWAYS_SOFTWARE").is_some_and(|v| v != "0") {
        return true;
    }
    let has_render_node = std::fs::read_dir("/dev/dri").is_ok_and(|d| {
        d.filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with("renderD"))
    });
    !has_render_node
}

/// Redraws per second while the machine has no spare CPU (the sampler is yielding) and
/// the rate is automatic: a redraw is the window's largest cost, and the run pays it.
pub const BUSY_REDRAW_HZ: u32 = 10;

/// Redraws per second: the setting, else 60, or 20 under software rendering, and at
/// most [`BUSY_REDRAW_HZ`] while the machine is `busy`. Input redraws at once anyway.
pub fn redraw_rate(setting: u32, software: bool, busy: bool) -> u32 {
    match (setting, software) {
        (0, _) if busy => BUSY_REDRAW_HZ,
        (0, true) => 20,
        (0, false) => 60,
        (n, _) => n.clamp(5, 240),
    }
}

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
    pub choice: LayoutChoice,
    pub show_attach: bool,
    pub form: AttachForm,
    pub traffic_view: TrafficView,
    pub cameras_view: CamerasView,
    plot_cache: super::decimate::SeriesCache,
    counters_cache: counters::CountersCache,
    discovery: Discovery,
    message: Option<Message>,
    waker: Arc<dyn Fn() + Send + Sync>,
    /// How often the background threads may wake the window.
    repaint_interval_ns: Arc<AtomicU64>,
    /// Set by the window when OpenGL is most likely a software rasteriser.
    pub software_rendering: bool,
    /// Start of the current second and redraws in it; the last full second's rate.
    redraws: (u64, u32),
    pub redraws_per_sec: f32,
    processes: Processes,
    processes_at_ns: u64,
    client: ProcInfo,
    server: ProcInfo,
    dialog_tx: Sender<Result<Vec<std::path::PathBuf>, String>>,
    dialog_rx: Receiver<Result<Vec<std::path::PathBuf>, String>>,
    shown_title: String,
    t0_ns: u64,
    /// The window closes itself when this is set.
    pub close_when: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl std::fmt::Debug for InspectorApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InspectorApp")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

fn empty_proc() -> ProcInfo {
    ProcInfo {
        pid: 0,
        name: None,
        alive: false,
        cpu_percent: 0.0,
        memory_bytes: 0,
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
        let repaint_interval_ns = Arc::new(AtomicU64::new(1_000_000_000 / 60));
        let waker = throttled_waker(ctx, Arc::clone(&repaint_interval_ns));
        let (dialog_tx, dialog_rx) = bounded(8);
        apply_theme(ctx, settings.theme);
        let mut app = Self {
            discovery: Discovery::start(Arc::clone(&waker)),
            settings,
            tree: tree.unwrap_or_else(default_tree),
            session: None,
            choice,
            show_attach: true,
            form: AttachForm::default(),
            traffic_view: TrafficView::default(),
            cameras_view: CamerasView::default(),
            plot_cache: super::decimate::SeriesCache::default(),
            counters_cache: counters::CountersCache::default(),
            message: None,
            waker,
            repaint_interval_ns,
            software_rendering: false,
            redraws: (0, 0),
            redraws_per_sec: 0.0,
            processes: Processes::new(),
            processes_at_ns: 0,
            client: empty_proc(),
            server: empty_proc(),
            dialog_tx,
            dialog_rx,
            shown_title: String::new(),
            t0_ns: monotonic_now_ns(),
            close_when: None,
        };
        if let Some(t) = target {
            app.attach(t);
        }
        app
    }

    /// Attaches to a target; on failure the attach view shows why.
    pub fn attach(&mut self, target: Target) {
        self.session = None;
        match Session::start(
            target.clone(),
            self.choice,
            self.settings.sampler(),
            self.settings.traffic_limits(),
            Arc::clone(&self.waker),
        ) {
            Ok(s) => {
                self.settings.remember(&remembered(&target));
                self.say(format!("attached to {}", s.attached.label()), false);
                self.session = Some(s);
                self.show_attach = false;
                self.form.error = None;
                self.traffic_view = TrafficView::default();
                self.cameras_view = CamerasView::default();
                self.t0_ns = monotonic_now_ns();
                self.discovery.active.store(false, Ordering::Relaxed);
            }
            Err(e) => {
                self.form.error = Some(e.clone());
                self.say(e, true);
                self.show_attach = true;
                self.discovery.active.store(true, Ordering::Relaxed);
            }
        }
    }

    pub fn detach(&mut self) {
        if let Some(s) = self.session.take() {
            self.say(format!("detached from {}", s.attached.label()), false);
        }
        self.show_attach = true;
        // Relaxed: a flag with no data behind it.
        self.discovery.active.store(true, Ordering::Relaxed);
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
            Some(s) => format!("lrbc-inspector — {}", s.attached.label()),
            None => "lrbc-inspector — not attached".to_string(),
        }
    }

    /// The message in the status bar now.
    pub fn status_message(&self) -> Option<&str> {
        self.message.as_ref().map(|m| m.text.as_str())
    }

    /// Work that is not drawing: follow replacements, dialog results, process liveness.
    pub fn logic(&mut self) {
        let mut note = None;
        if let Some(s) = &mut self.session
            && s.follow_replacement()
        {
            note = Some(format!(
                "the segment was replaced; re-attached to {}",
                s.attached.label()
            ));
        }
        if let Some(n) = note {
            self.cameras_view = CamerasView::default();
            self.traffic_view = TrafficView::default();
            self.say(n, false);
        }
        while let Ok(r) = self.dialog_rx.try_recv() {
            match r {
                Ok(paths) if paths.is_empty() => self.say("screenshot cancelled".into(), false),
                Ok(paths) => self.say(saved_text(&paths), false),
                Err(e) => self.say(e, true),
            }
        }
        let now = monotonic_now_ns();
        if now.saturating_sub(self.processes_at_ns) > 1_000_000_000
            && let Some(s) = &self.session
        {
            self.processes_at_ns = now;
            let c = s.attached.geometry.counters;
            let server = s.attached.segment.load_u32(c.server_pid).unwrap_or(0);
            let client = s.attached.segment.load_u32(c.client_pid).unwrap_or(0);
            self.processes.refresh(&[server, client]);
            self.server = self.processes.info(server);
            self.client = self.processes.info(client);
        }
    }

    /// Takes a screenshot of the cameras.
    pub fn screenshot(&mut self, req: ShotRequest) {
        let Some(s) = &self.session else { return };
        let Some(frame) = s.sampler.lock().image.clone() else {
            self.say("no camera image to capture yet".into(), true);
            return;
        };
        let columns = (frame.num_envs as f32).sqrt().ceil() as u32;
        let label = s.attached.label();
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
                let tx = self.dialog_tx.clone();
                let dir = self.settings.screenshot_dir.clone();
                let name = format!("{label}_frame{}.png", frame.frame_seq);
                let spawned = std::thread::Builder::new().name("lrbc-save-dialog".into()).spawn(move || {
                    let dialog = rfd::FileDialog::new().set_directory(&dir);
                    let picked = match shot {
                        Shot::AllEnvs => dialog.set_title("Folder for every env's image").pick_folder(),
                        _ => dialog.set_title("Save screenshot").set_file_name(&name).add_filter("PNG", &["png"]).save_file(),
                    };
                    let result = match picked {
                        Some(path) => screenshot::save_to(&frame, shot, &path, columns),
                        None => Err(format!(
                            "no file chosen (the save dialog did not open or was cancelled); quick save writes to {} without one",
                            dir.display()
                        )),
                    };
                    let _ = tx.send(result);
                });
                if let Err(e) = spawned {
                    self.say(format!("cannot open the save dialog: {e}"), true);
                }
            }
        }
    }

    /// The whole window.
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        self.count_redraw();
        self.logic();
        if let Some(stop) = &self.close_when {
            // Relaxed: a flag with no data behind it.
            if stop.load(Ordering::Relaxed) {
                ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
            }
            // Look again soon even when nothing else wakes the window.
            ui.ctx().request_repaint_after(Duration::from_millis(250));
        }
        self.shortcuts(ui);
        let title = self.title();
        if title != self.shown_title {
            ui.ctx()
                .send_viewport_cmd(egui::ViewportCommand::Title(title.clone()));
            self.shown_title = title;
        }
        egui::Panel::top("top_bar").show(ui, |ui| self.top_bar(ui));
        egui::Panel::bottom("status_bar").show(ui, |ui| self.status_bar(ui));
        let hz = redraw_rate(
            self.settings.max_fps,
            self.software_rendering,
            self.machine_busy(),
        );
        // Relaxed: a rate the waker reads; no data behind it.
        self.repaint_interval_ns
            .store(1_000_000_000 / u64::from(hz), Ordering::Relaxed);
        let attach_shows = self.session.is_none() || self.show_attach;
        self.discovery.set_active(attach_shows);
        egui::CentralPanel::default().show(ui, |ui| {
            if attach_shows {
                let listing = self.discovery.snapshot();
                let recent = self.settings.recent_targets.clone();
                egui::ScrollArea::vertical()
                    .id_salt("attach_scroll")
                    .show(ui, |ui| {
                        if let Some(t) = attach_view::ui(ui, &mut self.form, &listing, &recent) {
                            self.attach(t);
                        }
                    });
                return;
            }
            let Self {
                tree,
                session,
                settings,
                traffic_view,
                cameras_view,
                plot_cache,
                counters_cache,
                server,
                client,
                t0_ns,
                ..
            } = self;
            let Some(session) = session.as_mut() else {
                return;
            };
            let mut behavior = Panes {
                session,
                settings,
                traffic_view,
                cameras_view,
                plot_cache,
                counters_cache,
                server,
                client,
                t0_ns: *t0_ns,
                shot: None,
            };
            tree.ui(&mut behavior, ui);
            if let Some(req) = behavior.shot {
                self.screenshot(req);
            }
        });
    }

    fn shortcuts(&mut self, ui: &egui::Ui) {
        let typing = ui.ctx().egui_wants_keyboard_input();
        let (space, f12, next, prev, theme) = ui.input(|i| {
            (
                i.key_pressed(egui::Key::Space),
                i.key_pressed(egui::Key::F12),
                i.key_pressed(egui::Key::CloseBracket),
                i.key_pressed(egui::Key::OpenBracket),
                i.modifiers.command && i.key_pressed(egui::Key::T),
            )
        });
        if typing {
            return;
        }
        if space && let Some(s) = &self.session {
            let store = s.traffic.lock();
            self.traffic_view.toggle_pause(&store);
        }
        if f12 {
            let env = self.cameras_view.selected;
            self.screenshot(ShotRequest::Quick(Shot::Env(env)));
        }
        if (next || prev)
            && let Some(s) = &self.session
        {
            let g = s.attached.geometry.clone();
            envs::shift_envs(&mut self.settings, &g, if next { 1 } else { -1 });
            s.sampler.set_settings(self.settings.sampler());
        }
        if theme {
            self.toggle_theme(ui.ctx());
        }
    }

    pub fn toggle_theme(&mut self, ctx: &egui::Context) {
        self.settings.theme = match self.settings.theme {
            Theme::Dark => Theme::Light,
            Theme::Light => Theme::Dark,
        };
        apply_theme(ctx, self.settings.theme);
    }

    fn top_bar(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            ui.strong("lrbc-inspector");
            ui.separator();
            match &self.session {
                Some(s) => {
                    ui.monospace(s.attached.label());
                    if ui
                        .button(if self.show_attach {
                            "Back to panels"
                        } else {
                            "Attach…"
                        })
                        .clicked()
                    {
                        self.show_attach = !self.show_attach;
                        // Relaxed: flags with no data behind them.
                        self.discovery
                            .active
                            .store(self.show_attach, Ordering::Relaxed);
                        self.discovery.refresh_now.store(true, Ordering::Relaxed);
                    }
                    if ui.button("Detach").clicked() {
                        self.detach();
                    }
                }
                None => {
                    ui.weak("not attached");
                }
            }
            ui.separator();
            let theme = match self.settings.theme {
                Theme::Dark => "Light theme",
                Theme::Light => "Dark theme",
            };
            if ui.button(theme).on_hover_text("Ctrl+T").clicked() {
                self.toggle_theme(ui.ctx());
            }
            if ui.button("Reset layout").clicked() {
                self.tree = default_tree();
            }
            ui.menu_button("Panels", |ui| {
                for p in Pane::ALL {
                    let present = self
                        .tree
                        .tiles
                        .iter()
                        .any(|(_, t)| matches!(t, egui_tiles::Tile::Pane(x) if *x == p));
                    if !present && ui.button(format!("Show {}", p.title())).clicked() {
                        let id = self.tree.tiles.insert_pane(p);
                        if let Some(root) = self.tree.root()
                            && let Some(egui_tiles::Tile::Container(c)) =
                                self.tree.tiles.get_mut(root)
                        {
                            c.add_child(id);
                        }
                    }
                }
            });
            ui.menu_button("Settings", |ui| self.settings_menu(ui));
            ui.weak("Space pause traffic · F12 screenshot · [ ] previous/next env");
        });
    }

    /// The machine has no spare CPU: the sampler is yielding to it.
    fn machine_busy(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| s.sampler.lock().yielding)
    }

    /// Counts redraws per second (shown in the Settings menu).
    fn count_redraw(&mut self) {
        let now = monotonic_now_ns();
        self.redraws.1 += 1;
        if now.saturating_sub(self.redraws.0) >= 1_000_000_000 {
            let secs = now.saturating_sub(self.redraws.0) as f32 / 1e9;
            self.redraws_per_sec = if self.redraws.0 == 0 {
                0.0
            } else {
                self.redraws.1 as f32 / secs
            };
            self.redraws = (now, 0);
        }
    }

    /// The sampler's history sizes, the value limits of the scans and the quick-save
    /// folder; changes apply at once and are kept across runs.
    fn settings_menu(&mut self, ui: &mut egui::Ui) {
        let mut changed = false;
        let mut memory_changed = false;
        // What the budget holds now, next to what is asked for.
        let held = self.session.as_ref().map(|s| {
            let d = s.sampler.lock();
            let detail = d.envs.values().map(|h| h.detail.capacity()).max();
            (d.frames.capacity(), detail)
        });
        egui::Grid::new("settings_grid")
            .num_columns(2)
            .show(ui, |ui| {
                ui.label("History (frames)")
                    .on_hover_text("per-frame aggregates and watched-env points kept, at most (the memory budget may hold fewer); 180 000 is three minutes at 1 kHz");
                ui.horizontal(|ui| {
                    changed |= ui
                        .add(
                            egui::DragValue::new(&mut self.settings.history_frames)
                                .range(1_000..=10_000_000)
                                .speed(1_000),
                        )
                        .changed();
                    if let Some((frames, _)) = held {
                        ui.weak(format!("holding {frames}"));
                    }
                });
                ui.end_row();
                ui.label("Observation history (frames)")
                    .on_hover_text("full observation and action rows of the watched envs, at most (the memory budget may hold fewer)");
                ui.horizontal(|ui| {
                    changed |= ui
                        .add(
                            egui::DragValue::new(&mut self.settings.detail_frames)
                                .range(100..=1_000_000)
                                .speed(100),
                        )
                        .changed();
                    if let Some((_, Some(rows))) = held {
                        ui.weak(format!("holding {rows}"));
                    }
                });
                ui.end_row();
                ui.label("Out of range: |obs| >");
                changed |= ui
                    .add(egui::DragValue::new(&mut self.settings.obs_limit).range(0.0..=f32::MAX))
                    .changed();
                ui.end_row();
                ui.label("Out of range: |act| >");
                changed |= ui
                    .add(egui::DragValue::new(&mut self.settings.act_limit).range(0.0..=f32::MAX))
                    .changed();
                ui.end_row();
                ui.label("Sampler on a busy machine (% of a core)").on_hover_text(
                    "while the machine has no spare CPU, the sampler uses at most this share of one core and skips frames (counted) so as not to slow the run; 0 follows every frame",
                );
                changed |= ui
                    .add(
                        egui::DragValue::new(&mut self.settings.busy_budget_percent)
                            .range(0.0..=100.0)
                            .speed(0.1),
                    )
                    .changed();
                ui.end_row();
                ui.label("Redraws per second").on_hover_text(
                    "0: automatic (60; 20 when OpenGL is a software rasteriser, which costs whole cores; 10 while the machine has no spare CPU and the sampler yields)",
                );
                ui.horizontal(|ui| {
                    ui.add(egui::DragValue::new(&mut self.settings.max_fps).range(0..=240));
                    ui.weak(format!(
                        "at most {}, drawing {:.0}/s",
                        redraw_rate(
                            self.settings.max_fps,
                            self.software_rendering,
                            self.machine_busy()
                        ),
                        self.redraws_per_sec
                    ));
                });
                ui.end_row();
                ui.label("Memory budget (MiB)").on_hover_text(
                    "what the window keeps of the run: histories half, the traffic list three tenths, camera images an eighth, streamed frames the rest; the oldest go first when a part is full",
                );
                ui.horizontal(|ui| {
                    if ui
                        .add(
                            egui::DragValue::new(&mut self.settings.memory_budget_mib)
                                .range(crate::memory::MIN_BUDGET_MIB..=crate::memory::MAX_BUDGET_MIB)
                                .speed(4),
                        )
                        .changed()
                    {
                        memory_changed = true;
                    }
                    if let Some(s) = &self.session {
                        let used = s.memory().total() + self.cameras_view.texture_bytes();
                        ui.weak(format!("{} in use", mib(used)));
                    }
                });
                ui.end_row();
                if let Some(s) = &self.session {
                    let b = self.settings.memory_budget();
                    let m = s.memory();
                    let (tex, stream_tex) = self.cameras_view.texture_bytes_split();
                    let rows = s.traffic.lock().rows.len();
                    for (label, used, share, extra) in [
                        ("  histories", m.histories, b.histories(), String::new()),
                        (
                            "  traffic list",
                            m.traffic,
                            b.traffic(),
                            format!(", {rows} rows"),
                        ),
                        ("  camera images", m.camera_images + tex, b.camera_images(), String::new()),
                        (
                            "  streamed frames",
                            m.streamed_frames + stream_tex,
                            b.streamed_frames(),
                            String::new(),
                        ),
                    ] {
                        ui.weak(label);
                        ui.weak(format!("{} of {}{extra}", mib(used), mib(share)));
                        ui.end_row();
                    }
                }
                ui.label("Quick-save folder");
                let mut dir = self.settings.screenshot_dir.display().to_string();
                if ui.text_edit_singleline(&mut dir).changed() {
                    self.settings.screenshot_dir = dir.into();
                }
                ui.end_row();
            });
        if memory_changed && let Some(s) = &self.session {
            s.set_limits(self.settings.sampler(), self.settings.traffic_limits());
        } else if changed && let Some(s) = &self.session {
            s.sampler.set_settings(self.settings.sampler());
        }
    }

    fn status_bar(&mut self, ui: &mut egui::Ui) {
        ui.horizontal_wrapped(|ui| {
            match &self.session {
                None => {
                    ui.label("not attached");
                }
                Some(s) => {
                    let ended = s.sampler.ended_threads();
                    if !ended.is_empty() {
                        ui.colored_label(
                            BAD,
                            format!(
                                "sampler thread {} stopped: figures are stale, re-attach",
                                ended.join(", ")
                            ),
                        );
                    }
                    let d = s.sampler.lock();
                    ui.monospace(s.attached.label());
                    ui.label(d.geometry.layout.as_str());
                    match &d.report {
                        Some(r) => ui.colored_label(state_color(r.state), state_text(r.state)),
                        None => ui.weak("…"),
                    };
                    let pid = |ui: &mut egui::Ui, role: &str, p: &ProcInfo| {
                        if p.pid == 0 {
                            ui.weak(format!("{role}: none"));
                        } else if p.alive {
                            ui.label(format!(
                                "{role}: {} {}",
                                p.pid,
                                p.name.as_deref().unwrap_or("")
                            ));
                        } else {
                            ui.colored_label(BAD, format!("{role}: {} dead", p.pid));
                        }
                    };
                    pid(ui, "engine", &self.server);
                    pid(ui, "client", &self.client);
                    let st = d.stats;
                    ui.label(format!("sampled {}/{}", st.frames_sampled, st.frames_seen));
                    if st.frames_torn > 0 || st.frames_missed > 0 {
                        ui.colored_label(
                            WARN,
                            format!("missed {} torn {}", st.frames_missed, st.frames_torn),
                        );
                    }
                    if st.frames_skipped > 0 {
                        let busy = if d.yielding { " (machine busy)" } else { "" };
                        ui.label(format!("skipped {}{busy}", st.frames_skipped))
                            .on_hover_text("frames let pass on purpose while the machine had no spare CPU, so as not to slow the run (Settings: 'Sampler on a busy machine')");
                    }
                    drop(d);
                    let lost: u64 = s
                        .traffic
                        .lock()
                        .totals
                        .iter()
                        .map(|(_, t)| t.lost_bytes)
                        .sum();
                    if lost > 0 {
                        ui.colored_label(BAD, format!("traffic lost {lost} bytes"));
                    }
                }
            }
            if let Some(m) = &self.message {
                ui.separator();
                let age = monotonic_now_ns().saturating_sub(m.at_ns);
                if age < 30_000_000_000 {
                    if m.error {
                        ui.colored_label(BAD, &m.text);
                    } else {
                        ui.label(&m.text);
                    }
                }
            }
        });
    }
}

fn saved_text(paths: &[std::path::PathBuf]) -> String {
    match paths {
        [one] => format!("screenshot saved to {}", one.display()),
        many => format!(
            "{} screenshots saved to {}",
            many.len(),
            many.first()
                .and_then(|p| p.parent())
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        ),
    }
}

pub fn apply_theme(ctx: &egui::Context, theme: Theme) {
    ctx.set_theme(match theme {
        Theme::Dark => egui::Theme::Dark,
        Theme::Light => egui::Theme::Light,
    });
}

/// Draws each pane with the state it needs.
struct Panes<'a> {
    session: &'a mut Session,
    settings: &'a mut Settings,
    traffic_view: &'a mut TrafficView,
    cameras_view: &'a mut CamerasView,
    plot_cache: &'a mut super::decimate::SeriesCache,
    counters_cache: &'a mut counters::CountersCache,
    server: &'a ProcInfo,
    client: &'a ProcInfo,
    t0_ns: u64,
    shot: Option<ShotRequest>,
}

impl egui_tiles::Behavior<Pane> for Panes<'_> {
    fn tab_title_for_pane(&mut self, pane: &Pane) -> egui::WidgetText {
        pane.title().into()
    }

    fn pane_ui(
        &mut self,
        ui: &mut egui::Ui,
        _tile_id: egui_tiles::TileId,
        pane: &mut Pane,
    ) -> egui_tiles::UiResponse {
        let frame = egui::Frame::NONE.inner_margin(6.0);
        frame.show(ui, |ui| {
            ui.set_min_size(ui.available_size());
            match pane {
                Pane::Header => header::ui(ui, &self.session.attached),
                Pane::Counters => {
                    let d = self.session.sampler.lock();
                    egui::ScrollArea::vertical()
                        .id_salt("counters")
                        .show(ui, |ui| {
                            counters::ui(ui, &self.session.attached, &d, self.counters_cache);
                        });
                }
                Pane::Envs => {
                    let actions = {
                        let d = self.session.sampler.lock();
                        egui::ScrollArea::vertical()
                            .id_salt("envs")
                            .show(ui, |ui| envs::ui(ui, &d, self.settings, self.plot_cache))
                            .inner
                    };
                    if actions.watched_changed {
                        self.session.sampler.set_settings(self.settings.sampler());
                    }
                }
                Pane::Traffic => {
                    let store = self.session.traffic.lock();
                    traffic::ui(
                        ui,
                        &store,
                        self.traffic_view,
                        &mut self.settings.traffic_filter,
                        self.t0_ns,
                    );
                }
                Pane::Cameras => {
                    // The traffic lock is held only to copy the newest frame per stream.
                    let streams = self.session.traffic.lock().streams.clone();
                    let d = self.session.sampler.lock();
                    if let Some(r) = cameras::ui(ui, &d, &streams, self.cameras_view) {
                        self.shot = Some(r);
                    }
                }
                Pane::Rpc => {
                    let (report, flags) = {
                        let d = self.session.sampler.lock();
                        (d.report.clone(), d.counters.service_flags)
                    };
                    let holder = self.session.lease_holder();
                    let control = self
                        .session
                        .control
                        .as_ref()
                        .map(crate::control::ControlWorker::state);
                    let label = self.session.attached.label();
                    let unavailable = self.session.control_unavailable.clone();
                    let info = RpcInfo {
                        label: &label,
                        report: report.as_ref(),
                        server: self.server,
                        client: self.client,
                        service_flags: flags,
                        unavailable: unavailable.as_deref(),
                        lease_holder: holder,
                        control,
                    };
                    if let Some(req) = rpc::ui(ui, &info) {
                        match self.session.control() {
                            Ok(w) => {
                                w.send(req);
                            }
                            Err(e) => {
                                ui.colored_label(BAD, e);
                            }
                        }
                    }
                }
            }
        });
        egui_tiles::UiResponse::None
    }

    fn simplification_options(&self) -> egui_tiles::SimplificationOptions {
        egui_tiles::SimplificationOptions {
            all_panes_must_have_tabs: true,
            ..Default::default()
        }
    }
}

impl eframe::App for InspectorApp {
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

/// Bytes as MiB with one decimal.
fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / 1048576.0)
}

#[cfg(test)]
mod tests {
    use super::{BUSY_REDRAW_HZ, redraw_rate, throttled_waker};
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn a_wake_from_another_thread_asks_for_one_pass_and_wakes_are_throttled() {
        let ctx = egui::Context::default();
        let pass = |ctx: &egui::Context| {
            let mut out = ctx.run_ui(egui::RawInput::default(), |_| {});
            // Nothing paints here: the font atlas is let go on purpose.
            out.textures_delta.clear();
        };
        // A new context asks for a few passes of its own first.
        for _ in 0..4 {
            pass(&ctx);
        }
        assert!(!ctx.has_requested_repaint());
        let waker = throttled_waker(&ctx, Arc::new(AtomicU64::new(1_000_000_000)));
        waker();
        assert!(
            ctx.has_requested_repaint(),
            "the first wake asks for a pass"
        );
        pass(&ctx);
        assert!(
            !ctx.has_requested_repaint(),
            "one pass answers it (a plain request_repaint asks for two)"
        );
        waker();
        assert!(!ctx.has_requested_repaint(), "within the interval: no pass");
    }

    #[test]
    fn the_automatic_redraw_rate_gives_way_to_software_raster_and_to_a_busy_machine() {
        assert_eq!(redraw_rate(0, false, false), 60);
        assert_eq!(redraw_rate(0, true, false), 20);
        assert_eq!(redraw_rate(0, false, true), BUSY_REDRAW_HZ);
        assert_eq!(redraw_rate(0, true, true), BUSY_REDRAW_HZ);
        // A rate the user set is kept, busy machine or not, within bounds.
        assert_eq!(redraw_rate(30, true, true), 30);
        assert_eq!(redraw_rate(1, false, false), 5);
        assert_eq!(redraw_rate(1000, false, false), 240);
    }
}
