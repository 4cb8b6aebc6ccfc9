//! What the detector looks for, as the user sets it (the window's settings, the command
//! line): kept across runs by the window.

use serde::{Deserialize, Serialize};

use crate::check::Limits;

/// The detector's settings. Non-finite values are always looked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DetectSettings {
    /// Bounds of values (out of range) and the saturation of actions.
    pub limits: Limits,
    /// A done burst: more than this share of the envs terminated (or truncated at
    /// differing episode lengths) in one frame. Truncations of envs in step at one
    /// length are the time limit, and resets of envs by the trainer are counted, never
    /// a burst.
    pub done_burst_share: f32,
    /// A stall where the loop's rhythm has no pause (mid-rollout, on the other side, in a
    /// loop without pauses, or with learning off): `frame_seq` still for more than this
    /// multiple of the loop's step...
    pub stall_factor: f32,
    /// ...and for at least this long (any stall is).
    pub stall_min_secs: f32,
    /// A stall at the loop's pause: longer than this multiple of its usual update.
    pub update_factor: f32,
    /// Learn the loop's rhythm (rollouts and updates); off, every pause is judged by
    /// `stall_factor` and `stall_min_secs` alone.
    pub learn_rhythm: bool,
}

impl Default for DetectSettings {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            done_burst_share: 0.5,
            stall_factor: 20.0,
            stall_min_secs: 0.25,
            update_factor: 4.0,
            learn_rhythm: true,
        }
    }
}

/// Why the detector's settings cannot be used, as one line.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SettingsError {
    #[error("the done-burst share must be above 0 and at most 1, not {0}")]
    DoneBurstShare(f32),
    #[error("the stall factor must be at least 2, not {0}")]
    StallFactor(f32),
    #[error("the shortest stall must be 0 to 3600 s, not {0}")]
    StallMin(f32),
    #[error("the update factor must be 1.5 to 1000, not {0}")]
    UpdateFactor(f32),
    #[error("saturation needs at least 1 frame")]
    SaturationFrames,
    /// A bound names a value the segment does not have.
    #[error(transparent)]
    Limits(#[from] crate::check::LimitsError),
}

impl DetectSettings {
    /// Why these settings cannot be used, if they cannot (on any segment).
    pub fn check(&self) -> Result<(), SettingsError> {
        let share = self.done_burst_share;
        if !(share > 0.0 && share <= 1.0) {
            return Err(SettingsError::DoneBurstShare(share));
        }
        if !(self.stall_factor.is_finite() && self.stall_factor >= 2.0) {
            return Err(SettingsError::StallFactor(self.stall_factor));
        }
        if !(self.stall_min_secs.is_finite() && (0.0..=3600.0).contains(&self.stall_min_secs)) {
            return Err(SettingsError::StallMin(self.stall_min_secs));
        }
        if !(self.update_factor.is_finite() && (1.5..=1000.0).contains(&self.update_factor)) {
            return Err(SettingsError::UpdateFactor(self.update_factor));
        }
        if let Some(s) = self.limits.saturation
            && s.frames == 0
        {
            return Err(SettingsError::SaturationFrames);
        }
        Ok(())
    }

    /// What the loop's rhythm judges waits by.
    pub fn rhythm(&self) -> crate::rhythm::RhythmSettings {
        crate::rhythm::RhythmSettings {
            learn: self.learn_rhythm,
            stall_factor: f64::from(self.stall_factor),
            stall_min_ns: (f64::from(self.stall_min_secs) * 1e9) as u64,
            update_factor: f64::from(self.update_factor),
        }
    }
}

/// Changes to the settings given for one run (a command line's options): each one given
/// replaces that setting.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DetectChanges {
    /// The bounds, all of them (none given: the bounds stay).
    pub bounds: Option<Vec<crate::check::BoundRule>>,
    pub saturation: Option<crate::check::Saturation>,
    pub done_burst_share: Option<f32>,
    pub stall_factor: Option<f32>,
    pub stall_min_secs: Option<f32>,
    pub update_factor: Option<f32>,
    pub learn_rhythm: Option<bool>,
}

impl DetectChanges {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// `settings` with these changes; Err: the result cannot be used.
    pub fn applied_to(&self, settings: &DetectSettings) -> Result<DetectSettings, SettingsError> {
        let mut s = settings.clone();
        if let Some(b) = &self.bounds {
            s.limits.bounds.clone_from(b);
        }
        if let Some(sat) = self.saturation {
            s.limits.saturation = Some(sat);
        }
        if let Some(x) = self.done_burst_share {
            s.done_burst_share = x;
        }
        if let Some(x) = self.stall_factor {
            s.stall_factor = x;
        }
        if let Some(x) = self.stall_min_secs {
            s.stall_min_secs = x;
        }
        if let Some(x) = self.update_factor {
            s.update_factor = x;
        }
        if let Some(x) = self.learn_rhythm {
            s.learn_rhythm = x;
        }
        s.check()?;
        Ok(s)
    }
}
