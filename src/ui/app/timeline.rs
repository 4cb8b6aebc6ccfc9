//! The timeline of a recording or of the live view paused, a bar under the top bar:
//! play and pause, a slider over the time with the events and state changes marked
//! under it, speed, steps, and the next event (of any kind, or of one kind); the current
//! frame_seq and time. Space plays and pauses, the left and right arrows step a frame.
//! Also the open dialog for recordings (to open, or to compare with as a baseline), on a
//! thread of its own.

use std::path::PathBuf;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::InspectorApp;
use crate::ui::widgets::{BAD, WARN};
use lrbc::clock::monotonic_now_ns;
use lrbc_live::detect::EventKind;
use lrbc_recording::replay::StateChange;

/// Events marked under the slider, at most (spread over the time).
const EVENT_MARKS: usize = 400;

/// What a recording is picked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Picked {
    /// To open.
    Open,
    /// To compare the recording shown with.
    Baseline,
}

/// The file dialog for recordings; its choice comes back through a bounded channel.
#[derive(Debug)]
pub(super) struct OpenDialog {
    tx: Sender<(Picked, Option<PathBuf>)>,
    rx: Receiver<(Picked, Option<PathBuf>)>,
}

impl Default for OpenDialog {
    fn default() -> Self {
        let (tx, rx) = bounded(4);
        Self { tx, rx }
    }
}

/// The timeline's own state, kept from one pass to the next.
#[derive(Debug, Default)]
pub struct TimelineUi {
    open_dialog: OpenDialog,
    /// When the paused live view last played on.
    tick_ns: u64,
    /// The kind of event "next event" looks for (None: any).
    next_kind: Option<EventKind>,
    /// The episode clicked in the Episodes panel, marked on a recording's timeline.
    pub episode: Option<EpisodeSpan>,
}

/// An episode as the timeline marks it: its env, and its first and last frame's times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpisodeSpan {
    pub env: u32,
    pub first_ns: u64,
    pub last_ns: u64,
}

/// Seconds from the start of the recording, as shown.
fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl InspectorApp {
    /// Asks for a recording to open, on a thread named `lrbc-open-dialog`.
    pub(super) fn ask_for_recording(&mut self) {
        self.ask_for(Picked::Open, "Open a recording");
    }

    /// Asks for a baseline recording to compare the one shown with.
    pub(super) fn ask_for_baseline(&mut self) {
        self.ask_for(Picked::Baseline, "Compare with a baseline recording");
    }

    fn ask_for(&mut self, purpose: Picked, title: &'static str) {
        let tx = self.timeline.open_dialog.tx.clone();
        let spawned = std::thread::Builder::new()
            .name("lrbc-open-dialog".into())
            .spawn(move || {
                let picked = rfd::FileDialog::new()
                    .set_title(title)
                    .add_filter("MCAP", &["mcap"])
                    .pick_file();
                // The receiver is gone: nobody waits for this any more.
                let _ = tx.send((purpose, picked));
            });
        if let Err(e) = spawned {
            self.say(format!("cannot open the file dialog: {e}"), true);
        }
    }

    /// Opens what the open dialog chose, or compares with it.
    pub(super) fn open_dialog_results(&mut self) {
        let picked: Vec<_> = self.timeline.open_dialog.rx.try_iter().collect();
        for p in picked {
            match p {
                (Picked::Open, Some(path)) => self.open_recording(&path),
                (Picked::Baseline, Some(path)) => self.set_baseline(&path),
                (_, None) => self.say("no recording chosen".into(), false),
            }
        }
    }

    /// The timeline as shown, for a recording or the live view paused.
    fn timeline_view(&self) -> Option<TimelineView> {
        let s = self.session.as_ref()?;
        let events = s.events();
        let (marks, next, events_note) = match &events {
            Some(log) => {
                let log = lrbc::sync::lock(log);
                let all = log.events();
                let step = all.len().div_ceil(EVENT_MARKS).max(1);
                let marks: Vec<(u64, EventKind, u64)> = all
                    .iter()
                    .step_by(step)
                    .map(|e| (e.time_ns, e.kind, e.first_frame))
                    .collect();
                let next: Vec<(u64, EventKind)> = all.iter().map(|e| (e.time_ns, e.kind)).collect();
                (marks, next, log.note.clone())
            }
            None => (Vec::new(), Vec::new(), None),
        };
        if let Some((info, player)) = s.recording() {
            let st = player.state();
            return Some(TimelineView {
                range: st.range,
                cursor_ns: st.cursor_ns,
                playing: st.playing,
                speed: st.speed,
                frame_seq: st.frame_seq,
                frame_time_ns: st.frame_time_ns,
                note: st.note,
                frame_count: info.frame_count,
                unfinished: info.unfinished.clone(),
                states: info.state_changes.clone(),
                live: false,
                marks,
                events: next,
                events_note,
                next_kind: self.timeline.next_kind,
                episode: self.timeline.episode,
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
            note: None,
            frame_count: None,
            unfinished: None,
            states: Vec::new(),
            live: true,
            marks,
            events: next,
            events_note,
            next_kind: self.timeline.next_kind,
            episode: None,
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
                TimelineAction::NextKind(k) => self.timeline.next_kind = k,
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
                self.timeline.tick_ns = monotonic_now_ns();
            }
            TimelineAction::Step(n) => {
                f.playing = false;
                f.step(n);
            }
            TimelineAction::Seek(t) => f.seek(t),
            TimelineAction::Speed(x) => f.speed = x.clamp(0.1, 10.0),
            TimelineAction::NextKind(k) => self.timeline.next_kind = k,
        }
    }

    /// Plays the paused live view (the recording's player plays on its own thread).
    pub(super) fn timeline_logic(&mut self, ctx: &egui::Context) {
        let now = monotonic_now_ns();
        let last = std::mem::replace(&mut self.timeline.tick_ns, now);
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
    note: Option<String>,
    frame_count: Option<u64>,
    unfinished: Option<String>,
    /// The segment's state changes in a recording, marked on the slider.
    states: Vec<StateChange>,
    /// The live view paused, rather than a recording.
    live: bool,
    /// Events marked under the slider: time, kind, frame.
    marks: Vec<(u64, EventKind, u64)>,
    /// Every event's time and kind, in the order found, for the next one.
    events: Vec<(u64, EventKind)>,
    /// How far the events of a recording are read.
    events_note: Option<String>,
    /// The kind "next event" looks for (None: any).
    next_kind: Option<EventKind>,
    /// An episode marked on the slider.
    episode: Option<EpisodeSpan>,
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
    /// The kind "next event" looks for.
    NextKind(Option<EventKind>),
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
        mark_events(ui, &slider, st, width);
        mark_episode(ui, &slider, st, width);
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
        let next = st
            .events
            .iter()
            .filter(|(t, k)| *t > st.cursor_ns && st.next_kind.is_none_or(|n| n == *k))
            .map(|(t, _)| *t)
            .min();
        let b = ui
            .add_enabled(next.is_some(), egui::Button::new("next event"))
            .on_hover_text("the next event after the cursor, of the kind beside (Events panel)");
        if b.clicked()
            && let Some(t) = next
        {
            action = Some(TimelineAction::Seek(t));
        }
        let mut kind = st.next_kind;
        let of = ui.label("of");
        egui::ComboBox::from_id_salt("timeline_next_kind")
            .selected_text(kind.map_or("any kind", EventKind::as_str))
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut kind, None, "any kind");
                for k in EventKind::ALL {
                    ui.selectable_value(&mut kind, Some(k), k.as_str());
                }
            })
            .response
            .labelled_by(of.id);
        if kind != st.next_kind {
            action = Some(TimelineAction::NextKind(kind));
        }
        if let Some(n) = &st.events_note {
            ui.weak(n);
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

/// The episode clicked in the Episodes panel: a band under the slider's rail from its
/// first frame to its last, its env and span on hover.
fn mark_episode(ui: &egui::Ui, slider: &egui::Response, st: &TimelineView, width: f32) {
    let Some(EpisodeSpan {
        env,
        first_ns: first,
        last_ns: last,
    }) = st.episode
    else {
        return;
    };
    let (start, end) = st.range;
    let span = end.saturating_sub(start).max(1) as f64;
    let x = |t: u64| {
        slider.rect.left()
            + (t.clamp(start, end).saturating_sub(start) as f64 / span) as f32 * width
    };
    let (x0, x1) = (x(first), x(last).max(x(first) + 2.0));
    let band = egui::Rect::from_min_max(
        egui::pos2(x0, slider.rect.bottom() - 4.0),
        egui::pos2(x1, slider.rect.bottom()),
    );
    ui.painter()
        .rect_filled(band, 0.0, ui.visuals().selection.bg_fill);
    let hover = ui.interact(
        band.expand(2.0),
        slider.id.with("episode"),
        egui::Sense::hover(),
    );
    hover.on_hover_text(format!(
        "env {env}'s episode: {:.3} s to {:.3} s",
        secs(first.saturating_sub(start)),
        secs(last.saturating_sub(start))
    ));
}

/// A tick above the slider's rail at each event, its kind and frame on hover.
fn mark_events(ui: &egui::Ui, slider: &egui::Response, st: &TimelineView, width: f32) {
    let (start, end) = st.range;
    let span = end.saturating_sub(start).max(1) as f64;
    let rail = slider.rect;
    for (k, &(t, kind, frame)) in st.marks.iter().enumerate() {
        if t < start || t > end {
            continue;
        }
        let x = rail.left() + (t.saturating_sub(start) as f64 / span).min(1.0) as f32 * width;
        let mark = egui::Rect::from_min_max(
            egui::pos2(x - 1.0, rail.top()),
            egui::pos2(x + 1.0, rail.top() + 5.0),
        );
        let color = crate::ui::widgets::event_color(kind);
        ui.painter().rect_filled(mark, 0.0, color);
        let hover = ui.interact(
            mark.expand(2.0),
            slider.id.with(("event", k)),
            egui::Sense::hover(),
        );
        hover.on_hover_text(format!(
            "{:.3} s: {} at frame {frame}",
            secs(t.saturating_sub(start)),
            kind.as_str()
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
