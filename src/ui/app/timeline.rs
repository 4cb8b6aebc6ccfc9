//! The timeline of a recording or of the live view paused, a bar under the top bar:
//! play and pause, a slider over the time, speed, steps, and searches forward for the
//! next done, NaN or error (on a recording, done on the player's thread); the current
//! frame_seq and time. Space plays and pauses, the left and right arrows step a frame.
//! Also the open dialog for recordings, on a thread of its own.

use std::path::PathBuf;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::InspectorApp;
use crate::ui::widgets::{BAD, WARN};
use lrbc::clock::monotonic_now_ns;
use lrbc_recording::replay::{Find, StateChange};

/// The file dialog for recordings; its choice comes back through a bounded channel.
#[derive(Debug)]
pub(super) struct OpenDialog {
    tx: Sender<Option<PathBuf>>,
    rx: Receiver<Option<PathBuf>>,
}

impl Default for OpenDialog {
    fn default() -> Self {
        let (tx, rx) = bounded(4);
        Self { tx, rx }
    }
}

/// Seconds from the start of the recording, as shown.
fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl InspectorApp {
    /// Asks for a recording to open, on a thread named `lrbc-open-dialog`.
    pub(super) fn ask_for_recording(&mut self) {
        let tx = self.open_dialog.tx.clone();
        let spawned = std::thread::Builder::new()
            .name("lrbc-open-dialog".into())
            .spawn(move || {
                let picked = rfd::FileDialog::new()
                    .set_title("Open a recording")
                    .add_filter("MCAP", &["mcap"])
                    .pick_file();
                let _ = tx.send(picked);
            });
        if let Err(e) = spawned {
            self.say(format!("cannot open the file dialog: {e}"), true);
        }
    }

    /// Opens what the open dialog chose.
    pub(super) fn open_dialog_results(&mut self) {
        let picked: Vec<_> = self.open_dialog.rx.try_iter().collect();
        for p in picked {
            match p {
                Some(path) => self.open_recording(&path),
                None => self.say("no recording chosen".into(), false),
            }
        }
    }

    /// The timeline as shown, for a recording or the live view paused.
    fn timeline_view(&self) -> Option<TimelineView> {
        let s = self.session.as_ref()?;
        if let Some((info, player)) = s.recording() {
            let st = player.state();
            return Some(TimelineView {
                range: st.range,
                cursor_ns: st.cursor_ns,
                playing: st.playing,
                speed: st.speed,
                frame_seq: st.frame_seq,
                frame_time_ns: st.frame_time_ns,
                searching: st.searching,
                note: st.note,
                frame_count: info.frame_count,
                unfinished: info.unfinished.clone(),
                states: info.state_changes.clone(),
                live: false,
            });
        }
        let f = s.paused.as_ref()?;
        let frame = f.frame();
        Some(TimelineView {
            range: f.range,
            cursor_ns: f.cursor_ns,
            playing: f.playing,
            speed: f.speed,
            frame_seq: frame.map(|(seq, _)| seq),
            frame_time_ns: None,
            searching: None,
            note: f.note.clone(),
            frame_count: None,
            unfinished: None,
            states: Vec::new(),
            live: true,
        })
    }

    /// Applies a move of the timeline to the recording's player or the paused view.
    fn timeline_do(&mut self, action: TimelineAction) {
        let Some(s) = self.session.as_mut() else {
            return;
        };
        if let Some((_, player)) = s.recording() {
            match action {
                TimelineAction::PlayPause { restart } => player.request(|s| {
                    s.playing = !s.playing;
                    if s.playing
                        && let Some(t) = restart
                    {
                        s.seek_to = Some(t);
                    }
                }),
                TimelineAction::Step(n) => player.request(|s| {
                    s.playing = false;
                    s.step += n;
                }),
                TimelineAction::Seek(t) => player.request(|s| s.seek_to = Some(t)),
                TimelineAction::Speed(x) => player.request(|s| s.speed = x.clamp(0.1, 10.0)),
                TimelineAction::Find(what) => player.request(|s| {
                    s.playing = false;
                    s.find = Some(what);
                }),
            }
            return;
        }
        let Some(f) = s.paused.as_mut() else {
            return;
        };
        match action {
            TimelineAction::PlayPause { restart } => {
                f.playing = !f.playing;
                if f.playing
                    && let Some(t) = restart
                {
                    f.seek(t);
                }
                self.timeline_tick_ns = monotonic_now_ns();
            }
            TimelineAction::Step(n) => {
                f.playing = false;
                f.step(n);
            }
            TimelineAction::Seek(t) => f.seek(t),
            TimelineAction::Speed(x) => f.speed = x.clamp(0.1, 10.0),
            TimelineAction::Find(what) => {
                f.playing = false;
                f.find(what);
            }
        }
    }

    /// Plays the paused live view (the recording's player plays on its own thread).
    pub(super) fn timeline_logic(&mut self, ctx: &egui::Context) {
        let now = monotonic_now_ns();
        let last = std::mem::replace(&mut self.timeline_tick_ns, now);
        if let Some(f) = self.session.as_mut().and_then(|s| s.paused.as_mut())
            && f.playing
        {
            f.tick(now.saturating_sub(last));
            ctx.request_repaint_after(std::time::Duration::from_millis(30));
        }
    }

    /// Space, ← and → on a recording or the live view paused; true when they apply.
    pub(super) fn timeline_keys(&mut self, ui: &egui::Ui) -> bool {
        let Some(view) = self.timeline_view() else {
            return false;
        };
        if ui.ctx().egui_wants_keyboard_input() {
            return true;
        }
        let (space, left, right) = ui.input(|i| {
            (
                i.key_pressed(egui::Key::Space),
                i.key_pressed(egui::Key::ArrowLeft),
                i.key_pressed(egui::Key::ArrowRight),
            )
        });
        if space {
            let restart = (view.cursor_ns >= view.range.1).then_some(view.range.0);
            self.timeline_do(TimelineAction::PlayPause { restart });
        }
        if left || right {
            self.timeline_do(TimelineAction::Step(if right { 1 } else { -1 }));
        }
        true
    }

    /// The timeline bar.
    pub(super) fn timeline(&mut self, ui: &mut egui::Ui) {
        let Some(st) = self.timeline_view() else {
            return;
        };
        if let Some(action) = timeline_ui(ui, &st) {
            self.timeline_do(action);
        }
    }
}

/// What the timeline bar shows.
#[derive(Clone, Debug)]
struct TimelineView {
    range: (u64, u64),
    cursor_ns: u64,
    playing: bool,
    speed: f32,
    frame_seq: Option<u64>,
    frame_time_ns: Option<u64>,
    searching: Option<Find>,
    note: Option<String>,
    frame_count: Option<u64>,
    unfinished: Option<String>,
    /// The segment's state changes in a recording, marked on the slider.
    states: Vec<StateChange>,
    /// The live view paused, rather than a recording.
    live: bool,
}

/// A move asked for on the timeline.
#[derive(Clone, Copy, Debug)]
enum TimelineAction {
    /// Play from `restart` when given (play at the end starts again).
    PlayPause {
        restart: Option<u64>,
    },
    Step(i64),
    Seek(u64),
    Speed(f32),
    Find(Find),
}

fn timeline_ui(ui: &mut egui::Ui, st: &TimelineView) -> Option<TimelineAction> {
    let mut action = None;
    let (start, end) = st.range;
    let length = secs(end.saturating_sub(start));
    ui.horizontal(|ui| {
        if st.live {
            ui.colored_label(WARN, "live view paused");
        }
        let play = if st.playing { "Pause" } else { "Play" };
        if ui.button(play).on_hover_text("Space").clicked() {
            let restart = (st.cursor_ns >= end).then_some(start);
            action = Some(TimelineAction::PlayPause { restart });
        }
        if ui
            .button("< frame")
            .on_hover_text("previous frame (←)")
            .clicked()
        {
            action = Some(TimelineAction::Step(-1));
        }
        if ui
            .button("frame >")
            .on_hover_text("next frame (→)")
            .clicked()
        {
            action = Some(TimelineAction::Step(1));
        }
        let mut at = secs(st.cursor_ns.saturating_sub(start));
        let time_label = ui.label("time");
        let width = (ui.available_width() - 560.0).max(120.0);
        ui.spacing_mut().slider_width = width;
        let slider = ui
            .add(
                egui::Slider::new(&mut at, 0.0..=length.max(1e-9))
                    .suffix(" s")
                    .trailing_fill(true),
            )
            .labelled_by(time_label.id);
        // Only the user's moves seek: the player moves the value too.
        let by_user = slider.dragged() || slider.clicked();
        mark_states(ui, &slider, st, width);
        if slider.changed() && by_user {
            let t = start.saturating_add((at.max(0.0) * 1e9) as u64);
            action = Some(TimelineAction::Seek(t));
        }
        ui.label(format!("of {length:.3} s"));
        let mut speed = st.speed;
        let speed_label = ui.label("speed");
        let r = ui
            .add(
                egui::DragValue::new(&mut speed)
                    .range(0.1..=10.0)
                    .speed(0.05)
                    .suffix("×"),
            )
            .labelled_by(speed_label.id)
            .on_hover_text("playback speed, 0.1× to 10×");
        if r.changed() {
            action = Some(TimelineAction::Speed(speed));
        }
    });
    ui.horizontal(|ui| {
        ui.label("next:");
        for what in [Find::Done, Find::Nan, Find::Error] {
            let busy = st.searching == Some(what);
            let b = ui.add_enabled(!busy, egui::Button::new(what.describe()));
            if b.clicked() {
                action = Some(TimelineAction::Find(what));
            }
        }
        let next_state = st.states.iter().find(|c| c.log_ns > st.cursor_ns);
        let b = ui
            .add_enabled(next_state.is_some(), egui::Button::new("state change"))
            .on_hover_text("the next change of the segment's state (truncated, unlinked, replaced, engine gone)");
        if b.clicked()
            && let Some(c) = next_state
        {
            action = Some(TimelineAction::Seek(c.log_ns));
        }
        if st.searching.is_some() {
            ui.spinner();
        }
        ui.separator();
        match st.frame_seq {
            Some(seq) => ui.monospace(format!("frame_seq {seq}")),
            None => ui.weak("no frame yet at this time"),
        };
        if let Some(t) = st.frame_time_ns.filter(|&t| t != 0) {
            ui.monospace(format!("frame_time {:.6} s", secs(t)));
        }
        ui.monospace(format!(
            "t {:.3} s",
            secs(st.cursor_ns.saturating_sub(start))
        ));
        if let Some(n) = st.frame_count {
            ui.weak(format!("{n} frames"));
        }
        if let Some(u) = &st.unfinished {
            ui.colored_label(WARN, u);
        }
        // The segment's state at the cursor, as the status bar shows it live.
        if let Some(c) = st.states.iter().rev().find(|c| c.log_ns <= st.cursor_ns)
            && c.is_trouble()
        {
            ui.colored_label(BAD, format!("segment {}", c.describe()));
        }
        if let Some(n) = &st.note {
            ui.colored_label(BAD, n);
        }
    });
    action
}

/// A mark under the slider at each state change, its description on hover.
fn mark_states(ui: &egui::Ui, slider: &egui::Response, st: &TimelineView, width: f32) {
    let (start, end) = st.range;
    let span = end.saturating_sub(start).max(1) as f64;
    let rail = slider.rect;
    for (k, c) in st.states.iter().enumerate() {
        let x =
            rail.left() + (c.log_ns.saturating_sub(start) as f64 / span).min(1.0) as f32 * width;
        let mark = egui::Rect::from_min_max(
            egui::pos2(x - 2.0, rail.bottom() - 5.0),
            egui::pos2(x + 2.0, rail.bottom()),
        );
        let color = if c.is_trouble() { BAD } else { WARN };
        ui.painter().rect_filled(mark, 0.0, color);
        let hover = ui.interact(
            mark.expand(2.0),
            slider.id.with(("state", k)),
            egui::Sense::hover(),
        );
        hover.on_hover_text(format!(
            "{:.3} s: segment {}",
            secs(c.log_ns.saturating_sub(start)),
            c.describe()
        ));
    }
}

impl InspectorApp {
    /// Pauses the live view (a copy of the history to scrub) or goes back to live.
    pub(super) fn pause_button(&mut self, ui: &mut egui::Ui) {
        let Some(s) = self.session.as_mut() else {
            return;
        };
        let paused = s.paused.is_some();
        let b = if paused {
            ui.button("Resume live")
                .on_hover_text("back to the live data")
        } else {
            ui.button("Pause live view").on_hover_text(
                "freeze the panels and move back through the history kept in memory (sampling goes on)",
            )
        };
        if b.clicked() {
            // The keys go to the timeline, not to a button that is gone.
            b.surrender_focus();
            if paused {
                s.resume_live();
            } else {
                s.pause_live();
            }
        }
    }
}
