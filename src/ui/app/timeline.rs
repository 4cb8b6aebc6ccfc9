//! The timeline of a recording, a bar under the top bar: play and pause, a slider over
//! the recording's time, speed, steps, and searches forward for the next done, NaN or
//! error (done on the player's thread); the current frame_seq and time. Space plays
//! and pauses, the left and right arrows step a frame. Also the open dialog for
//! recordings, on a thread of its own.

use std::path::PathBuf;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::InspectorApp;
use crate::replay::Find;
use crate::ui::widgets::{BAD, WARN};

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

    /// Space, ← and → on a recording; true when the source is one.
    pub(super) fn timeline_keys(&mut self, ui: &egui::Ui) -> bool {
        let Some((_, player)) = self.session.as_ref().and_then(|s| s.recording()) else {
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
            player.request(|s| s.playing = !s.playing);
        }
        if left || right {
            player.request(|s| {
                s.playing = false;
                s.step += if right { 1 } else { -1 };
            });
        }
        true
    }

    /// The timeline bar of a recording.
    pub(super) fn timeline(&mut self, ui: &mut egui::Ui) {
        let Some((info, player)) = self.session.as_ref().and_then(|s| s.recording()) else {
            return;
        };
        let st = player.state();
        let (start, end) = st.range;
        let length = secs(end.saturating_sub(start));
        ui.horizontal(|ui| {
            let play = if st.playing { "Pause" } else { "Play" };
            if ui.button(play).on_hover_text("Space").clicked() {
                let at_end = st.cursor_ns >= end;
                player.request(|s| {
                    s.playing = !s.playing;
                    if s.playing && at_end {
                        s.seek_to = Some(start);
                    }
                });
            }
            if ui
                .button("< frame")
                .on_hover_text("previous frame (←)")
                .clicked()
            {
                player.request(|s| {
                    s.playing = false;
                    s.step -= 1;
                });
            }
            if ui
                .button("frame >")
                .on_hover_text("next frame (→)")
                .clicked()
            {
                player.request(|s| {
                    s.playing = false;
                    s.step += 1;
                });
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
            let by_user = slider.dragged() || slider.clicked() || slider.has_focus();
            if slider.changed() && by_user {
                let t = start.saturating_add((at.max(0.0) * 1e9) as u64);
                player.request(|s| s.seek_to = Some(t));
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
                player.request(|s| s.speed = speed.clamp(0.1, 10.0));
            }
        });
        ui.horizontal(|ui| {
            ui.label("next:");
            for what in [Find::Done, Find::Nan, Find::Error] {
                let busy = st.searching == Some(what);
                let b = ui.add_enabled(!busy, egui::Button::new(what.describe()));
                if b.clicked() {
                    player.request(|s| {
                        s.playing = false;
                        s.find = Some(what);
                    });
                }
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
            if let Some(n) = info.frame_count {
                ui.weak(format!("{n} frames"));
            }
            if let Some(u) = &info.unfinished {
                ui.colored_label(WARN, u);
            }
            if let Some(n) = &st.note {
                ui.colored_label(BAD, n);
            }
        });
    }
}
