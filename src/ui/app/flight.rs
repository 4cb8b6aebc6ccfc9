//! The window's flight recorder ([`lrbc_recording::recorder::flight::Flight`]): started for each
//! live segment, it keeps the last seconds; it saves the seconds around the first event of
//! the kinds chosen in the settings (non-finite values unless changed) by itself, and the
//! last seconds when the engine goes and when the segment is replaced, on "Save" in the
//! status bar or the settings menu, and records from now on "Record". Files go to the
//! recordings folder; the status bar says where, or why not.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use super::InspectorApp;
use crate::ui::widgets::BAD;
use lrbc::clock::monotonic_now_ns;
use lrbc_live::watch::State;
use lrbc_recording::recorder::flight::{Flight, FlightConfig, FlightError, FlightStatus, Note};

/// Envs whose observations and actions the flight recorder keeps when none are watched.
const DEFAULT_ENVS: u32 = 4;

/// The flight recorder of the current session and what it told.
pub struct FlightUi {
    flight: Option<Flight>,
    /// The sampler generation the flight recorder maps.
    generation: u64,
    /// The segment's state last seen, to save once as the engine goes.
    state: Option<State>,
    /// Why the flight recorder could not start (shown in the settings menu).
    error: Option<String>,
    notes_tx: Sender<Note>,
    notes_rx: Receiver<Note>,
    /// The last file the flight recorder wrote.
    pub last_file: Option<std::path::PathBuf>,
    /// What it last told (a file written, or why not), and when: shown in the status bar
    /// next to the window's own messages.
    note: Option<(Note, u64)>,
    status: FlightStatus,
}

impl Default for FlightUi {
    fn default() -> Self {
        let (notes_tx, notes_rx) = crossbeam_channel::bounded(64);
        Self {
            flight: None,
            generation: 0,
            state: None,
            error: None,
            notes_tx,
            notes_rx,
            last_file: None,
            note: None,
            status: FlightStatus::default(),
        }
    }
}

impl std::fmt::Debug for FlightUi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightUi")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

fn is_gone(state: Option<State>) -> bool {
    matches!(
        state,
        Some(State::EngineGone | State::Unlinked | State::Truncated)
    )
}

/// Why a save as the segment went: an engine that stops removes its segment, so an
/// unlinked segment is said as the engine gone too.
fn gone_reason(state: Option<State>) -> &'static str {
    match state {
        Some(State::Truncated) => "the segment was truncated",
        _ => "the engine is gone",
    }
}

impl InspectorApp {
    /// The last file the flight recorder wrote (saved or recorded).
    pub fn flight_last_file(&self) -> Option<&std::path::Path> {
        self.flight.last_file.as_deref()
    }

    /// What the flight recorder last told: a file written, or why not.
    pub fn flight_note(&self) -> Option<&str> {
        self.flight.note.as_ref().map(|(n, _)| n.text.as_str())
    }

    /// What the flight recorder holds now (as of the last pass).
    pub fn flight_status(&self) -> &FlightStatus {
        &self.flight.status
    }

    /// Stops the flight recorder (another session is shown).
    pub(super) fn flight_stop(&mut self) {
        self.flight.flight = None;
        self.flight.state = None;
    }

    /// Starts, keeps up to date and stops the flight recorder with the session; saves by itself
    /// when the segment is replaced or the engine goes (and, by its own thread, around the
    /// first event of the kinds chosen); shows what it wrote. Nothing here blocks: short
    /// locks and non-blocking sends.
    pub(super) fn flight_logic(&mut self) {
        let notes: Vec<Note> = self.flight.notes_rx.try_iter().collect();
        for n in notes {
            if let Some(p) = &n.path {
                self.flight.last_file = Some(p.clone());
            }
            self.flight.note = Some((n, monotonic_now_ns()));
        }
        // A live segment or a served run (once described) has a run to record.
        let Some(s) = self.session.as_ref().filter(|s| {
            s.live().is_some() || s.remote().is_some_and(|(r, _)| r.geometry.size_bytes > 0)
        }) else {
            self.flight.flight = None;
            self.flight.state = None;
            return;
        };
        let (state, generation) = {
            let d = s.sampler.lock();
            (d.report.as_ref().map(|r| r.state), d.generation)
        };
        let dir = self.settings.recordings_dir.clone();
        let mut errors: Vec<String> = Vec::new();
        if let Some(f) = &self.flight.flight {
            if generation != self.flight.generation {
                // After the engine went (saved then), nothing new came from the old segment.
                if !is_gone(self.flight.state)
                    && let Err(e) = f.save(&dir, "the segment was replaced")
                {
                    errors.push(e.to_string());
                }
                // Dropping it stops its thread after the save is under way.
                self.flight.flight = None;
            } else {
                if is_gone(state)
                    && !is_gone(self.flight.state)
                    && let Err(e) = f.save(&dir, gone_reason(state))
                {
                    errors.push(e.to_string());
                }
                self.flight.status = f.status();
            }
        }
        self.flight.state = state;
        if self.flight.flight.is_none() && !is_gone(state) {
            let num_envs = s.geometry().num_envs;
            let mut envs: Vec<u32> = self.settings.watched_envs.within(num_envs).collect();
            if envs.is_empty() {
                envs = (0..num_envs.min(DEFAULT_ENVS)).collect();
            }
            let w = Arc::clone(&self.waker);
            let config = FlightConfig {
                save_on_event: Some((dir, self.settings.flight_kinds())),
                notes: self.flight.notes_tx.clone(),
                waker: Arc::new(move || w()),
                create: lrbc_recording::recorder::flight::create_file,
            };
            let limits = self.settings.flight_limits();
            let started = match (s.live(), s.remote()) {
                (Some(live), _) => Flight::start(live, envs, limits, config),
                // The served run's messages as they arrive: the envs the server sends.
                (None, Some((_, viewer))) => {
                    Flight::start_from(Box::new(viewer.tap()), s.label(), limits, config)
                }
                (None, None) => Err(FlightError::NothingToRecord),
            };
            match started {
                Ok(f) => {
                    // The sampler's budget on a busy machine holds for the recorder too.
                    if let Err(e) = f.set_busy_budget(self.settings.sampler().busy_budget_percent) {
                        errors.push(format!("flight recorder: {e}"));
                    }
                    self.flight.flight = Some(f);
                    self.flight.generation = generation;
                    self.flight.error = None;
                }
                Err(e) => self.flight.error = Some(format!("flight recorder: {e}")),
            }
        }
        if self.record_when_attached
            && let Some(f) = &self.flight.flight
        {
            self.record_when_attached = false;
            if let Err(e) = f.start_recording(&self.settings.recordings_dir) {
                errors.push(format!("flight recorder: {e}"));
            }
        }
        for e in errors {
            self.say(e, true);
        }
    }

    /// The flight recorder keeps to the sampler's budget on a busy machine, as set now.
    /// The flight recorder's share of the memory budget and its seconds, after a change.
    pub(super) fn flight_apply_limits(&mut self) {
        if let Some(f) = &self.flight.flight
            && let Err(e) = f.set_limits(self.settings.flight_limits())
        {
            self.say(format!("flight recorder: {e}"), true);
        }
    }

    /// What the window's data takes of its memory budget: the session's parts, the
    /// textures, the flight recorder's buffer.
    pub fn memory_in_use(&self) -> usize {
        self.session.as_ref().map_or(0, |s| s.memory().total())
            + self.views.cameras.texture_bytes()
            + usize::try_from(self.flight.status.rolling_bytes).unwrap_or(usize::MAX)
    }

    pub(super) fn flight_apply_busy_budget(&mut self) {
        if let Some(f) = &self.flight.flight
            && let Err(e) = f.set_busy_budget(self.settings.sampler().busy_budget_percent)
        {
            self.say(format!("flight recorder: {e}"), true);
        }
    }

    /// Saves the last seconds now.
    pub fn flight_save(&mut self) {
        let r = match &self.flight.flight {
            Some(f) => f.save(&self.settings.recordings_dir, "saved on request"),
            None => Err(FlightError::NotRunning),
        };
        if let Err(e) = r {
            self.say(e.to_string(), true);
        }
    }

    /// Starts recording into a new file, or stops the recording under way.
    pub fn flight_toggle_recording(&mut self) {
        let r = match &self.flight.flight {
            Some(f) if self.flight.status.recording.is_some() => {
                // Shown as stopped at once; the thread finishes the file.
                self.flight.status.recording = None;
                f.stop_recording()
            }
            Some(f) => f.start_recording(&self.settings.recordings_dir),
            None => Err(FlightError::NotRunning),
        };
        if let Err(e) = r {
            self.say(e.to_string(), true);
        }
    }

    /// The status bar's buttons (Record or Stop recording, Save), drawn first so that
    /// the counts that grow after them never move them from under the pointer.
    pub(super) fn flight_buttons(&mut self, ui: &mut egui::Ui) {
        if self.session.is_none() {
            return;
        }
        let recording = self.flight.status.recording.is_some();
        let clicked = if recording {
            ui.button("Stop recording").clicked()
        } else {
            ui.button("Record")
                .on_hover_text(format!(
                    "record from now into a file in {}",
                    self.settings.recordings_dir.display()
                ))
                .clicked()
        };
        if clicked {
            self.flight_toggle_recording();
        }
        let secs = self.settings.flight_limits().seconds;
        if ui
            .button(format!("Save last {secs:.0} s"))
            .on_hover_text(format!(
                "write what the flight recorder holds ({:.0} s, {} frames) into {}{}",
                self.flight.status.rolling_seconds,
                self.flight.status.rolling_frames,
                self.settings.recordings_dir.display(),
                if self.flight.status.frames_skipped > 0 {
                    format!(
                        "\n{} frames let pass to keep to the CPU budget on a busy machine (Settings){}",
                        self.flight.status.frames_skipped,
                        if self.flight.status.yielding { ", now too" } else { "" }
                    )
                } else {
                    String::new()
                }
            ))
            .clicked()
        {
            self.flight_save();
        }
        ui.separator();
    }

    /// The status bar's part after the session's: the recording under way and what the
    /// flight recorder last told (for a minute).
    pub(super) fn flight_status_bar(&mut self, ui: &mut egui::Ui) {
        if let Some(r) = self
            .flight
            .status
            .recording
            .as_ref()
            .filter(|_| self.session.is_some())
        {
            ui.separator();
            ui.colored_label(
                BAD,
                format!("REC {:.1} MB, {} frames", r.bytes as f64 / 1e6, r.frames),
            )
            .on_hover_text(r.path.display().to_string());
        }
        if let Some((n, at)) = &self.flight.note
            && monotonic_now_ns().saturating_sub(*at) < 60_000_000_000
        {
            ui.separator();
            if n.error {
                ui.colored_label(BAD, &n.text);
            } else {
                ui.label(&n.text);
            }
        }
    }

    /// The settings menu's rows: seconds, budget and use, folder, the actions.
    pub(super) fn flight_settings(&mut self, ui: &mut egui::Ui) {
        let mut changed = false;
        ui.label("Flight recorder (s)").on_hover_text(
            "seconds of frames and ring entries kept to save on demand and by itself (first NaN/Inf, engine gone, segment replaced)",
        );
        changed |= ui
            .add(egui::DragValue::new(&mut self.settings.flight_seconds).range(1.0..=3600.0))
            .changed();
        ui.end_row();
        ui.label("Flight recorder holds").on_hover_text(
            "its share of the memory budget: a quarter; the oldest go first when either the seconds or the share is full",
        );
        let st = &self.flight.status;
        ui.weak(format!(
            "{:.1} of {:.1} MiB: {:.0} s, {} frames",
            st.rolling_bytes as f64 / 1048576.0,
            self.settings.memory_budget().flight() as f64 / 1048576.0,
            st.rolling_seconds,
            st.rolling_frames
        ));
        ui.end_row();
        if let Some(e) = &self.flight.error {
            ui.label("");
            ui.colored_label(BAD, e);
            ui.end_row();
        }
        ui.label("Recordings folder");
        let mut dir = self.settings.recordings_dir.display().to_string();
        if ui.text_edit_singleline(&mut dir).changed() {
            self.settings.recordings_dir = dir.into();
        }
        ui.end_row();
        ui.label("");
        ui.horizontal(|ui| {
            let secs = self.settings.flight_limits().seconds;
            if ui.button(format!("Save last {secs:.0} s")).clicked() {
                self.flight_save();
            }
            let rec = if self.flight.status.recording.is_some() {
                "Stop recording"
            } else {
                "Record"
            };
            if ui.button(rec).clicked() {
                self.flight_toggle_recording();
            }
        });
        ui.end_row();
        if changed
            && let Some(f) = &self.flight.flight
            && let Err(e) = f.set_limits(self.settings.flight_limits())
        {
            self.say(e.to_string(), true);
        }
    }
}
