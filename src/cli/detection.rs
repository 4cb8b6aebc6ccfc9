//! The detector's options, shared by the window, `events`, `record`, `serve`, `watch`,
//! `open` and `demo`: bounds of values, saturation, done bursts, stalls and the loop's
//! rhythm.

use clap::Args;

use super::CliError;
use lrbc_live::check::{Bound, BoundRule, Saturation};
use lrbc_live::detect::{DetectChanges, DetectSettings};

/// What the detector looks for besides NaN and infinities (always looked for).
#[derive(Debug, Clone, Default, Args)]
#[allow(
    rustdoc::broken_intra_doc_links,
    reason = "the fields' docs are the options' help text, whose `obs[I]` is no link"
)]
pub struct DetectArgs {
    /// A bound of values: CHANNEL=LO:HI for a channel (obs, act, reward), obs[I]=LO:HI or
    /// act[I]=LO:HI for one value, obs.NAME=LO:HI by its name; LO or HI may be left out
    /// (obs=:100). Repeat for more; a later rule for a value replaces an earlier one.
    #[arg(long = "bound", value_name = "RULE", value_parser = BoundRule::parse)]
    pub bounds: Vec<BoundRule>,
    /// Actions at or beyond LO or HI are saturated once held there --saturation-frames
    /// frames in a row.
    #[arg(long, value_name = "LO:HI", allow_hyphen_values = true, value_parser = Bound::parse)]
    pub saturation: Option<Bound>,
    /// Frames in a row at a saturation bound before an action is saturated (default 50).
    #[arg(long, value_name = "N", requires = "saturation", value_parser = clap::value_parser!(u32).range(1..))]
    pub saturation_frames: Option<u32>,
    /// A done burst: more than this share of the envs terminated (or truncated at
    /// differing episode lengths) in one frame (above 0, at most 1; default 0.5). Envs in
    /// step truncated at one length are the time limit, and resets of envs by the
    /// trainer are counted: never a burst.
    #[arg(long, value_name = "SHARE", value_parser = share)]
    pub done_burst: Option<f32>,
    /// A stall where the loop has no pause (mid-rollout, on the other side, in a loop
    /// without pauses; every pause with --no-rhythm): frame_seq still for more than this
    /// multiple of the loop's step (at least 2; default 20)...
    #[arg(long, value_name = "FACTOR", value_parser = factor)]
    pub stall: Option<f32>,
    /// ...and for at least this long (seconds, 0 to 3600; default 0.25; any stall is).
    #[arg(long, value_name = "SECS", value_parser = min_secs)]
    pub stall_min: Option<f32>,
    /// A stall at the loop's pause after a rollout: longer than this multiple of its
    /// usual update (1.5 to 1000; default 4).
    #[arg(long, value_name = "FACTOR", value_parser = update_factor)]
    pub stall_update: Option<f32>,
    /// Learn no rhythm: every pause is judged by --stall and --stall-min alone, a policy
    /// update's included.
    #[arg(long)]
    pub no_rhythm: bool,
}

fn number(text: &str) -> Result<f32, String> {
    let v: f32 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("{text:?} is not a finite number"))
    }
}

fn share(text: &str) -> Result<f32, String> {
    let v = number(text)?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("a share is above 0 and at most 1, not {v}"))
    }
}

fn factor(text: &str) -> Result<f32, String> {
    let v = number(text)?;
    if v >= 2.0 {
        Ok(v)
    } else {
        Err(format!("the stall factor is at least 2, not {v}"))
    }
}

fn update_factor(text: &str) -> Result<f32, String> {
    let v = number(text)?;
    if (1.5..=1000.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("the update factor is 1.5 to 1000, not {v}"))
    }
}

fn min_secs(text: &str) -> Result<f32, String> {
    let v = number(text)?;
    if (0.0..=3600.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("the shortest stall is 0 to 3600 s, not {v}"))
    }
}

impl DetectArgs {
    /// The settings these options change.
    pub fn changes(&self) -> DetectChanges {
        DetectChanges {
            bounds: (!self.bounds.is_empty()).then(|| self.bounds.clone()),
            saturation: self.saturation.map(|bound| Saturation {
                bound,
                frames: self.saturation_frames.unwrap_or(Saturation::DEFAULT_FRAMES),
            }),
            done_burst_share: self.done_burst,
            stall_factor: self.stall,
            stall_min_secs: self.stall_min,
            update_factor: self.stall_update,
            learn_rhythm: self.no_rhythm.then_some(false),
        }
    }

    /// The defaults with these options.
    pub fn settings(&self) -> Result<DetectSettings, CliError> {
        Ok(self.changes().applied_to(&DetectSettings::default())?)
    }
}
