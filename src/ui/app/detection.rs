//! The detector's settings in the Settings menu: bounds of values (one rule a line),
//! saturation, done bursts, stalls, and the kinds of event the flight recorder saves
//! around. A change applies when it reads; what does not read is said next to it and
//! the settings in force stay.

use super::InspectorApp;
use crate::ui::widgets::BAD;
use lrbc_live::check::{Bound, BoundRule, Saturation};
use lrbc_live::detect::{DetectSettings, EventKind};

/// The detector's settings as the menu edits them: the text fields, and why they do not
/// read when they do not.
#[derive(Debug, Default)]
pub(super) struct DetectionForm {
    /// Shown from the settings once (at the first draw).
    loaded: bool,
    bounds: String,
    saturation: String,
    saturation_frames: u32,
    error: Option<String>,
}

impl DetectionForm {
    fn load(&mut self, s: &DetectSettings) {
        self.bounds = s
            .limits
            .bounds
            .iter()
            .map(BoundRule::display)
            .collect::<Vec<_>>()
            .join("\n");
        match s.limits.saturation {
            Some(sat) => {
                self.saturation = sat.bound.display();
                self.saturation_frames = sat.frames;
            }
            None => {
                self.saturation.clear();
                self.saturation_frames = Saturation::DEFAULT_FRAMES;
            }
        }
        self.loaded = true;
    }

    /// The settings the text fields say, on top of `base`.
    fn read(&self, base: &DetectSettings) -> Result<DetectSettings, String> {
        let mut s = base.clone();
        s.limits.bounds = self
            .bounds
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(BoundRule::parse)
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        s.limits.saturation = match self.saturation.trim() {
            "" => None,
            text => Some(Saturation {
                bound: Bound::parse(text).map_err(|e| e.to_string())?,
                frames: self.saturation_frames.max(1),
            }),
        };
        s.check().map_err(|e| e.to_string())?;
        Ok(s)
    }
}

impl InspectorApp {
    /// The detector's rows of the Settings grid; true when the settings changed.
    pub(super) fn detection_settings(&mut self, ui: &mut egui::Ui) -> bool {
        if !self.detection_form.loaded {
            self.detection_form.load(&self.settings.detect);
        }
        let mut edited = false;
        let mut changed = false;
        ui.label("Bounds of values").on_hover_text(
            "one rule a line: obs=-10:10 for every observation, act[2]=-1:1 for one action, obs.pole_angle=-0.5:0.5 by name, reward=:100; a value outside its bound is an out_of_range event (NaN and Inf are always found)",
        );
        edited |= ui
            .add(
                egui::TextEdit::multiline(&mut self.detection_form.bounds)
                    .desired_rows(2)
                    .hint_text("none: only NaN and Inf")
                    .desired_width(220.0),
            )
            .changed();
        ui.end_row();
        ui.label("Saturated actions").on_hover_text(
            "LO:HI: an action at or beyond LO or HI for this many frames in a row is a saturated event; empty: not looked for",
        );
        ui.horizontal(|ui| {
            edited |= ui
                .add(
                    egui::TextEdit::singleline(&mut self.detection_form.saturation)
                        .hint_text("-1:1")
                        .desired_width(80.0),
                )
                .changed();
            ui.label("for");
            edited |= ui
                .add(
                    egui::DragValue::new(&mut self.detection_form.saturation_frames)
                        .range(1..=1_000_000),
                )
                .changed();
            ui.label("frames");
        });
        ui.end_row();
        let d = &mut self.settings.detect;
        ui.label("Done burst (share of envs)").on_hover_text(
            "more than this share of the envs terminated (or truncated at differing episode lengths) in one frame is a done_burst event; envs in step truncated at one length are the time limit, counted in the Episodes panel, never a burst",
        );
        changed |= ui
            .add(
                egui::DragValue::new(&mut d.done_burst_share)
                    .range(0.01..=1.0)
                    .speed(0.01),
            )
            .changed();
        ui.end_row();
        ui.label("Learn the loop's rhythm").on_hover_text(
            "on: a pause at the loop's place after a rollout is its update, a stall only past the multiple of its usual update below; off: every pause is judged by the step's multiple and the seconds below",
        );
        changed |= ui
            .checkbox(&mut d.learn_rhythm, "rollouts and updates")
            .changed();
        ui.end_row();
        ui.label("Stall at an update (× the usual)").on_hover_text(
            "a pause at the loop's place longer than this multiple of its usual update (and at least the seconds below) is a stall event",
        );
        changed |= ui
            .add_enabled(
                d.learn_rhythm,
                egui::DragValue::new(&mut d.update_factor)
                    .range(1.5..=1000.0)
                    .speed(0.1),
            )
            .changed();
        ui.end_row();
        ui.label("Stall elsewhere (× the step)").on_hover_text(
            "a wait where the loop has no pause (mid-rollout, on the other side, in a loop without pauses; every wait with rhythm learning off) longer than this multiple of the loop's step, and at least the seconds beside, is a stall event",
        );
        ui.horizontal(|ui| {
            changed |= ui
                .add(egui::DragValue::new(&mut d.stall_factor).range(2.0..=100_000.0))
                .changed();
            ui.label("and at least");
            changed |= ui
                .add(
                    egui::DragValue::new(&mut d.stall_min_secs)
                        .range(0.0..=3600.0)
                        .speed(0.05)
                        .suffix(" s"),
                )
                .changed();
        });
        ui.end_row();
        ui.label("Flight recorder saves on").on_hover_text(
            "the first event of these kinds: the seconds before it and two after are saved to the recordings folder (from the next attach)",
        );
        ui.horizontal_wrapped(|ui| {
            for k in EventKind::ALL {
                let name = k.as_str();
                let mut on = self.settings.flight_on.iter().any(|x| x == name);
                if ui.checkbox(&mut on, name).changed() {
                    self.settings.flight_on.retain(|x| x != name);
                    if on {
                        self.settings.flight_on.push(name.into());
                    }
                }
            }
        });
        ui.end_row();
        if edited {
            match self.detection_form.read(&self.settings.detect) {
                Ok(s) => {
                    self.detection_form.error = None;
                    changed |= s != self.settings.detect;
                    self.settings.detect = s;
                }
                Err(e) => self.detection_form.error = Some(e),
            }
        }
        if let Some(e) = &self.detection_form.error {
            ui.label("");
            ui.colored_label(BAD, e);
            ui.end_row();
        }
        changed
    }
}
