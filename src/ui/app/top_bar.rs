//! The top bar (the target, Attach/Detach, pause, open, theme, layout, panels,
//! settings) and the keyboard shortcuts.

use super::{InspectorApp, apply_theme};
use crate::ui::panels::cameras::ShotRequest;
use crate::ui::screenshot::Shot;
use crate::ui::settings::{Pane, Theme, default_tree};

impl InspectorApp {
    pub(super) fn shortcuts(&mut self, ui: &egui::Ui) {
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
        if self.timeline_keys(ui) {
            // Space and the arrows move the timeline (a recording, or paused).
        } else if space && let Some(s) = &self.session {
            let store = s.traffic.lock();
            self.views.traffic.toggle_pause(&store);
        }
        if f12 {
            let env = self.views.cameras.selected;
            self.screenshot(ShotRequest::Quick(Shot::Env(env)));
        }
        if (next || prev)
            && let Some(s) = &self.session
        {
            let g = s.geometry().clone();
            (self.settings.watched_envs).shift(if next { 1 } else { -1 }, g.num_envs);
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

    pub(super) fn top_bar(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            ui.strong("lrbc-inspector");
            ui.separator();
            match &self.session {
                Some(s) => {
                    ui.monospace(s.label());
                    let recording = s.recording().is_some();
                    if ui
                        .button(if self.show_attach {
                            "Back to panels"
                        } else {
                            "Attach…"
                        })
                        .clicked()
                    {
                        self.show_attach = !self.show_attach;
                        self.discovery.set_active(self.show_attach);
                    }
                    if ui
                        .button(if recording { "Close" } else { "Detach" })
                        .clicked()
                    {
                        self.detach();
                    }
                    if !recording {
                        self.pause_button(ui);
                    }
                }
                None => {
                    ui.weak("not attached");
                }
            }
            if ui
                .button("Open recording…")
                .on_hover_text("an MCAP file of lrbc-inspector record")
                .clicked()
            {
                self.ask_for_recording();
            }
            if self
                .session
                .as_ref()
                .is_some_and(|s| s.recording().is_some() || s.live().is_some())
                && ui
                    .button("Baseline…")
                    .on_hover_text(
                        "compare this run with a recording of another: the Divergence panel lists where each env departs from it",
                    )
                    .clicked()
            {
                self.ask_for_baseline();
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
}
