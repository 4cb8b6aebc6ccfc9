//! The Settings menu: history sizes, the detector's settings (`detection`), the
//! busy-machine budget, redraws per second, the memory budget and what uses it, the
//! quick-save folder.

use super::InspectorApp;

impl InspectorApp {
    /// The sampler's history sizes, the detector's settings and the quick-save folder;
    /// changes apply at once and are kept across runs.
    pub(super) fn settings_menu(&mut self, ui: &mut egui::Ui) {
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
                changed |= self.detection_settings(ui);
                ui.label("Sampler on a busy machine (% of a core)").on_hover_text(
                    "while the machine has no spare CPU, the sampler uses at most this share of one core and skips frames (counted) so as not to slow the run, whatever the detector and the episodes want; 0 follows every frame",
                );
                ui.horizontal(|ui| {
                    changed |= ui
                        .add(
                            egui::DragValue::new(&mut self.settings.busy_budget_percent)
                                .range(0.0..=100.0)
                                .speed(0.1),
                        )
                        .changed();
                    let mut every = self.settings.busy_budget_percent <= 0.0;
                    if ui
                        .checkbox(&mut every, "Every frame, whatever the load")
                        .on_hover_text(
                            "follow, copy and check every frame even while the machine has no spare CPU: the run slows down (by about a fifth unpaced on two cores), nothing is skipped",
                        )
                        .changed()
                    {
                        self.settings.busy_budget_percent = if every {
                            0.0
                        } else {
                            lrbc_live::sampler::WINDOW_BUSY_BUDGET_PERCENT
                        };
                        changed = true;
                    }
                });
                ui.end_row();
                ui.label("Redraws per second").on_hover_text(
                    "0: automatic (60; 20 when OpenGL is a software rasteriser, which costs whole cores; while the machine has no spare CPU and the sampler yields, as many from 1 to 10 as keep drawing within half a percent of a core). Input redraws at once.",
                );
                ui.horizontal(|ui| {
                    ui.add(egui::DragValue::new(&mut self.settings.max_fps).range(0..=240));
                    ui.weak(format!(
                        "at most {:.0}, drawing {:.0}/s",
                        1e9 / self.redraw_interval_ns().max(1) as f64,
                        self.pacing.redraws_per_sec
                    ));
                });
                ui.end_row();
                ui.label("Memory budget (MiB)").on_hover_text(
                    "what the window keeps of the run: histories seven twentieths, the traffic list a fifth, the flight recorder a quarter, camera images a tenth, episodes a fortieth, streamed frames the rest; the oldest go first when a part is full",
                );
                ui.horizontal(|ui| {
                    if ui
                        .add(
                            egui::DragValue::new(&mut self.settings.memory_budget_mib)
                                .range(lrbc_live::memory::MIN_BUDGET_MIB..=lrbc_live::memory::MAX_BUDGET_MIB)
                                .speed(4),
                        )
                        .changed()
                    {
                        memory_changed = true;
                    }
                    if self.session.is_some() {
                        ui.weak(format!("{} in use", mib(self.memory_in_use())));
                    }
                });
                ui.end_row();
                if let Some(s) = &self.session {
                    let b = self.settings.memory_budget();
                    let m = s.memory();
                    let (tex, stream_tex) = self.views.cameras.texture_bytes_split();
                    let rows = s.traffic.lock().rows.len();
                    for (label, used, share, extra) in [
                        ("  histories", m.histories, b.histories(), String::new()),
                        ("  episodes", m.episodes, b.episodes(), String::new()),
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
                        (
                            "  flight recorder",
                            self.flight_status().rolling_bytes as usize,
                            b.flight(),
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
                self.flight_settings(ui);
            });
        if memory_changed {
            self.flight_apply_limits();
        }
        // The servers connected in the background keep to the same settings.
        let mut refused = None;
        for s in self.session.iter().chain(&self.nodes) {
            if memory_changed {
                s.set_limits(self.settings.sampler(), self.settings.traffic_limits());
            } else if changed {
                s.sampler.set_settings(self.settings.sampler());
            }
            if changed && let Err(e) = s.sampler.set_detect(self.settings.detect.clone()) {
                refused = Some(e);
            }
        }
        if let Some(e) = refused {
            self.say(format!("detector: {e}"), true);
        }
        if changed {
            self.flight_apply_busy_budget();
        }
    }
}

/// Bytes as MiB with one decimal.
fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / 1048576.0)
}
