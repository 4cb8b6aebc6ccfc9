//! What the views show of the loop's rhythm ([`RhythmSummary`]): the loop's kind, its
//! rollouts and updates, the shares of wall time, the endings in step and the newest
//! pauses, as one value that a recording, `serve` and `watch --json` carry as JSON.

use serde::{Deserialize, Serialize};

use super::pauses::{PauseVerdict, Side};
use crate::text::plural;

/// Pauses a summary keeps, the newest.
pub const RECENT_PAUSES: usize = 64;

/// What the loop is, as far as it is known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopKind {
    /// Not known yet: too few pauses, and not long enough without one.
    #[default]
    Learning,
    /// Steps without pauses (an off-policy trainer, an evaluation, the simulated client).
    Continuous,
    /// Rollouts, each followed by a pause (an on-policy trainer updating its policy).
    Periodic,
    /// Rhythm learning is off: every pause is judged by the stall factor and minimum.
    Off,
}

impl LoopKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Learning => "learning",
            Self::Continuous => "continuous",
            Self::Periodic => "periodic",
            Self::Off => "off",
        }
    }
}

/// One pause of `frame_seq`: a time between two frames much longer than the loop's step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pause {
    /// The frame `frame_seq` stood at.
    pub frame: u64,
    /// When it began (the time that frame was seen, by the follower's clock).
    pub start_ns: u64,
    /// Its length (None: it began before the first frame followed).
    pub secs: Option<f64>,
    /// Of it, waiting for the trainer's actions, for the engine's frame, and for either
    /// (which side is not known: no stamps, no look at `action_seq` during it).
    pub trainer_secs: f64,
    pub engine_secs: f64,
    pub unknown_secs: f64,
    /// The side that waited longer.
    pub side: Side,
    /// Frames stepped since the previous pause of the loop's rhythm (None: not known).
    pub after_frames: Option<u64>,
    pub verdict: PauseVerdict,
}

/// The loop's rhythm as the views show it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RhythmSummary {
    /// When it was made (the follower's clock, the clock of the pauses' `start_ns`).
    pub at_ns: u64,
    pub kind: LoopKind,
    /// The loop's step: the median time between frames while it steps, in seconds.
    pub step_secs: Option<f64>,
    /// Frames stepped between two pauses of the loop (the rollout), and the pauses'
    /// usual length (the update) and side: medians of the loop's recent pauses.
    pub rollout_frames: Option<u64>,
    pub update_secs: Option<f64>,
    pub update_side: Option<Side>,
    /// Wall time followed, and of it: stepping, waiting for the trainer, waiting for the
    /// engine, waiting on a side not known. The four add up to `followed_secs`.
    pub followed_secs: f64,
    pub stepping_secs: f64,
    pub trainer_secs: f64,
    pub engine_secs: f64,
    pub unknown_secs: f64,
    /// Pauses seen, and those judged stalls.
    pub pauses: u64,
    pub stalls: u64,
    /// Frames whose truncations were the time limit of envs in step (more than the burst
    /// share of the envs truncated at one episode length), and that length, the newest.
    pub time_limits: u64,
    pub time_limit_frames: Option<u64>,
    /// Frames in which the trainer reset more than the burst share of the envs at once.
    pub resets_in_step: u64,
    /// The newest pauses, oldest first (at most [`RECENT_PAUSES`]).
    pub recent: Vec<Pause>,
}

impl RhythmSummary {
    /// `part` as a share of the wall time followed (0 when nothing was followed).
    pub fn share(&self, part: f64) -> f64 {
        if self.followed_secs > 0.0 {
            (part / self.followed_secs).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// The loop in a few words: `rollouts of 32 frames, updates of 0.80 s (the trainer)`.
    pub fn loop_text(&self) -> String {
        match self.kind {
            LoopKind::Off => "rhythm learning off".into(),
            LoopKind::Continuous => "steps without pauses".into(),
            LoopKind::Learning => match self.pauses {
                0 => "learning the loop (no pause yet)".into(),
                1 => "learning the loop (1 pause so far)".into(),
                n => format!("learning the loop ({n} pauses so far)"),
            },
            LoopKind::Periodic => {
                let rollout = self
                    .rollout_frames
                    .map_or_else(|| "rollouts".into(), |r| format!("rollouts of {r} frames"));
                let update = self
                    .update_secs
                    .map_or_else(|| "pauses".into(), |u| format!("updates of {u:.2} s"));
                let side = match self.update_side {
                    Some(Side::Trainer) => " (the trainer)",
                    Some(Side::Engine) => " (the engine)",
                    _ => "",
                };
                format!("{rollout}, {update}{side}")
            }
        }
    }

    /// The shares of wall time: `stepping 28 % · trainer 72 % · engine 0 %` (and
    /// `unknown` when some waits' side is not known).
    pub fn shares_text(&self) -> String {
        let pct = |v: f64| format!("{:.0} %", 100.0 * self.share(v));
        let mut s = format!(
            "stepping {} · trainer {} · engine {}",
            pct(self.stepping_secs),
            pct(self.trainer_secs),
            pct(self.engine_secs)
        );
        if self.unknown_secs > 0.0 {
            s.push_str(&format!(" · side unknown {}", pct(self.unknown_secs)));
        }
        s
    }

    /// One line for `watch` and `open --info`.
    pub fn line(&self) -> String {
        let mut s = format!("rhythm: {}", self.loop_text());
        if self.followed_secs > 0.0 {
            s.push_str("; ");
            s.push_str(&self.shares_text());
        }
        if self.stalls > 0 {
            s.push_str(&format!(
                "; {} of {} pauses were stalls",
                self.stalls, self.pauses
            ));
        }
        if self.time_limits > 0 || self.resets_in_step > 0 {
            s.push_str(&format!("; {}", self.endings_text()));
        }
        s
    }

    /// The endings in step, for every view: `3 time limits of envs in step (truncated
    /// together at 100 frames) · 1 reset of envs in step by the trainer`.
    pub fn endings_text(&self) -> String {
        let mut parts = Vec::new();
        if self.time_limits > 0 {
            let at = self.time_limit_frames.map_or_else(String::new, |l| {
                format!(" (truncated together at {l} frames)")
            });
            parts.push(format!(
                "{} time limit{} of envs in step{at}",
                self.time_limits,
                plural(self.time_limits)
            ));
        }
        if self.resets_in_step > 0 {
            parts.push(format!(
                "{} reset{} of envs in step by the trainer",
                self.resets_in_step,
                plural(self.resets_in_step)
            ));
        }
        if parts.is_empty() {
            "no endings in step".into()
        } else {
            parts.join(" · ")
        }
    }

    /// The same summary with its times moved by `shift_ns` (onto another clock).
    pub fn shifted(mut self, shift_ns: i128) -> Self {
        let shift = |t: u64| u64::try_from((i128::from(t) + shift_ns).max(0)).unwrap_or(0);
        self.at_ns = shift(self.at_ns);
        for p in &mut self.recent {
            p.start_ns = shift(p.start_ns);
        }
        self
    }

    /// As JSON (a recording's `/lrbc/rhythm`, what `serve` sends, `watch --json`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// A summary as [`RhythmSummary::to_json`] writes it; None when it is not one.
    pub fn from_json(v: &serde_json::Value) -> Option<Self> {
        serde_json::from_value(v.clone()).ok()
    }
}
