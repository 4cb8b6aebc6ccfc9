//! Going to an event clicked in the Events panel: on a recording the timeline moves to
//! its time; live (or a served run), the view pauses there. Its env becomes a watched
//! env and its camera is shown.

use super::InspectorApp;
use lrbc_live::detect::Event;

impl InspectorApp {
    pub(super) fn go_to_event(&mut self, e: &Event) {
        let Some(s) = self.session.as_mut() else {
            return;
        };
        let num_envs = s.geometry().num_envs;
        let has_images = s.geometry().image.is_some();
        let mut note = format!("frame {}: {}", e.first_frame, e.message);
        if let Some((_, player)) = s.recording() {
            let t = e.time_ns;
            player.request(|st| {
                st.playing = false;
                st.seek_to = Some(t.clamp(st.range.0, st.range.1));
            });
        } else {
            s.pause_live();
            if let Some(f) = s.paused.as_mut() {
                f.playing = false;
                // By its frame: a served run's event times are the server's clock.
                if !f.seek_frame(e.first_frame) {
                    note.push_str(
                        " (older than the history kept: the view shows its oldest frame)",
                    );
                } else if let Some((shown, _)) = f.frame().filter(|(seq, _)| *seq < e.first_frame) {
                    note.push_str(&format!(
                        " (not in the history kept: the view shows frame {shown})"
                    ));
                }
            }
        }
        if let Some(env) = e.env.filter(|&env| env < num_envs) {
            if !self.settings.watched_envs.contains(&env) {
                self.settings.watched_envs.push(env);
                if self.settings.watched_envs.len() > 16 {
                    self.settings.watched_envs.remove(0);
                }
                if let Some(s) = &self.session {
                    // Only the watched envs changed: nothing the detector checks.
                    let _ = s.sampler.set_settings(self.settings.sampler());
                }
                note.push_str(&format!("; env {env} is watched from now on"));
            }
            if has_images {
                self.cameras_view.selected = env;
                self.cameras_view.zoom = true;
            }
        }
        self.say(note, false);
    }
}
