//! Going to an event clicked in the Events panel: on a recording the timeline moves to
//! its time; live (or a served run), the view pauses there. Its env becomes a watched
//! env and its camera is shown. Going to an env or an episode clicked in the Episodes
//! panel: its env is watched; a recording's timeline goes to the episode. Going to a
//! divergence clicked in the Divergence panel: the timeline goes to its frame and its env
//! is watched.

use super::InspectorApp;
use super::timeline::EpisodeSpan;
use crate::ui::panels::episodes::EpisodesAction;
use lrbc_live::detect::Event;
use lrbc_live::sampler::Watched;

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
            note.push_str(&self.watch_env(env, has_images));
        }
        self.say(note, false);
    }

    pub(super) fn go_to_divergence(&mut self, d: &lrbc_recording::compare::Divergence) {
        let Some(s) = self.session.as_ref() else {
            return;
        };
        let num_envs = s.geometry().num_envs;
        let has_images = s.geometry().image.is_some();
        let mut note = format!(
            "env {} diverged from the baseline at frame {} (frame_seq {}), {}",
            d.env,
            d.frame,
            d.frame_seq_b,
            d.origin.as_str()
        );
        if let Some((_, player)) = s.recording() {
            let t = d.time_b_ns;
            player.request(|st| {
                st.playing = false;
                st.seek_to = Some(t.clamp(st.range.0, st.range.1));
            });
            note.push_str("; the timeline is at that frame");
        } else if let Some(s) = self.session.as_mut() {
            s.pause_live();
            if let Some(f) = s.paused.as_mut() {
                f.playing = false;
                if f.seek_frame(d.frame_seq_b) {
                    note.push_str("; the view is paused at that frame");
                } else {
                    note.push_str(
                        "; the view is paused (the frame is older than the history kept)",
                    );
                }
            }
        }
        if d.env < num_envs {
            note.push_str(&self.watch_env(d.env, has_images));
        }
        self.say(note, false);
    }

    /// Makes `env` a watched env (at the cap, in place of the one watched longest) and
    /// shows its camera: what to add to the status line.
    pub(super) fn watch_env(&mut self, env: u32, has_images: bool) -> String {
        let note = match self.settings.watched_envs.watch(env) {
            Watched::Already => String::new(),
            Watched::Added => format!("; env {env} is watched from now on"),
            Watched::Replacing(old) => {
                format!("; env {env} is watched from now on, in place of env {old}")
            }
        };
        if !note.is_empty()
            && let Some(s) = &self.session
        {
            s.sampler.set_settings(self.settings.sampler());
        }
        if has_images {
            self.views.cameras.selected = env;
            self.views.cameras.zoom = true;
        }
        note
    }

    /// An env or an episode clicked in the Episodes panel: its env is watched and its
    /// camera shown; on a recording, the timeline goes to the episode's last frame and the
    /// env plots show the whole episode (they show the time up to the cursor).
    pub(super) fn go_to_episode(&mut self, a: EpisodesAction) {
        let Some(s) = self.session.as_ref() else {
            return;
        };
        let num_envs = s.geometry().num_envs;
        let has_images = s.geometry().image.is_some();
        let (env, mut note) = match a {
            EpisodesAction::Env(env) => (env, format!("env {env}")),
            EpisodesAction::Episode(e) => {
                let mut note = format!(
                    "env {}: episode of frames {}–{} ({} frames, {})",
                    e.env,
                    e.first_frame,
                    e.last_frame,
                    e.length(),
                    e.ending.as_str()
                );
                if let Some((_, player)) = s.recording() {
                    let (t0, t1) = (e.first_ns, e.last_ns);
                    player.request(|st| {
                        st.playing = false;
                        st.seek_to = Some(t1.clamp(st.range.0, st.range.1));
                    });
                    let secs = (t1.saturating_sub(t0) as f64 / 1e9) as f32;
                    self.settings.plot_window_secs = (secs * 1.05).max(0.05);
                    self.timeline.episode = Some(EpisodeSpan {
                        env: e.env,
                        first_ns: t0,
                        last_ns: t1,
                    });
                    note.push_str(&format!(
                        "; the timeline marks it and is at its last frame, the plots show its {secs:.2} s"
                    ));
                }
                (e.env, note)
            }
        };
        if env < num_envs {
            note.push_str(&self.watch_env(env, has_images));
        }
        self.say(note, false);
    }
}
