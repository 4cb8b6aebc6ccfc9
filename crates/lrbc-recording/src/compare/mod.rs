//! Two runs compared frame by frame: [`Comparer`] is handed the frames of run A and of
//! run B that stand at the same place from each run's start, and finds, env by env, the
//! first frame where B differs from A, in which value, and where it started:
//!
//! - **policy**: the env's actions differ first (the trainer chose differently);
//! - **simulator**: its observations differ after equal actions (the engine stepped
//!   differently);
//! - **reward**: its observations and actions are equal, its reward or a flag is not.
//!
//! A frame's actions are those that made it, so at one frame the actions are compared
//! before the observations. In lock-step those are the actions of `action_seq =
//! frame_seq`: a recorder that copied a frame late caught the trainer's next actions with
//! it, and they are compared with the next frame. Equal is bit for bit
//! unless a [`Tolerance`] says otherwise. What one run lacks (a frame, an env, the
//! observations of an env the recording did not keep) is counted as not compared, never
//! as equal. Pure: the file pass and the live pass feed it.

mod episodes;
mod files;
mod live;
mod table;
#[cfg(test)]
mod tests;

pub use episodes::{
    ComparedRun, EpisodeTally, EpisodesCompared, EventsCompared, FINISHED_ENDINGS, ReturnVerdict,
    TalliesSideBySide,
};
pub use files::{CompareError, FilesCompared, compare_files};
pub use live::{AgainstBaseline, LiveFrames, rec_frame_of};
use lrbc_live::check::Channel;
pub use table::{COMPARED_EPISODES_SCHEMA, write_compared_episodes};

use crate::format::RecFrame;

/// How far apart two values may be and still count as equal: `|a - b| <= abs + rel ×
/// max(|a|, |b|)`. The default is bit for bit (0.0 and -0.0 differ; a NaN equals only
/// the same NaN).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tolerance {
    pub abs: f32,
    pub rel: f32,
}

impl Tolerance {
    /// Bit for bit.
    pub const EXACT: Self = Self { abs: 0.0, rel: 0.0 };

    pub fn is_exact(self) -> bool {
        self.abs == 0.0 && self.rel == 0.0
    }

    /// Whether `a` and `b` count as equal. With a tolerance, two NaNs are equal, a NaN
    /// and a number are not, and infinities are equal only to themselves.
    pub fn equal(self, a: f32, b: f32) -> bool {
        if a.to_bits() == b.to_bits() {
            return true;
        }
        if self.is_exact() {
            return false;
        }
        if a.is_nan() || b.is_nan() {
            return a.is_nan() && b.is_nan();
        }
        if a.is_infinite() || b.is_infinite() {
            return a == b;
        }
        (a - b).abs() <= self.abs + self.rel * a.abs().max(b.abs())
    }

    /// The first index where `a` and `b` differ.
    fn first_difference(self, a: &[f32], b: &[f32]) -> Option<usize> {
        a.iter().zip(b).position(|(&x, &y)| !self.equal(x, y))
    }
}

/// Where a divergence started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DivergenceOrigin {
    /// The actions differ first: the trainer.
    Policy,
    /// The observations differ after equal actions: the engine.
    Simulator,
    /// Only the reward or a flag differs; the observations and actions are equal.
    Reward,
    /// Where it started is not known: the env's observations, or the actions that made
    /// the frame, are not in both recordings (an env recorded without its values, or a
    /// frame whose actions neither copy caught).
    Unknown,
}

impl DivergenceOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Policy => "policy",
            Self::Simulator => "simulator",
            Self::Reward => "reward",
            Self::Unknown => "unknown",
        }
    }
}

/// One of an env's per-frame flags that the comparison reads (the trainer's reset flags
/// are not among them: see `first_difference`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Flag {
    Done,
    Truncated,
}

impl Flag {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Truncated => "truncated",
        }
    }
}

/// The value in which B first differs from A, and both values. Two differences are equal
/// when their values are bit for bit (a NaN equals the same NaN), as the comparison is.
#[derive(Clone, Copy, Debug)]
pub enum Difference {
    /// An observation, an action or the reward.
    Value { channel: Channel, a: f32, b: f32 },
    /// A flag set in one run and clear in the other, as each run's byte reads (0: clear).
    Flag { flag: Flag, a: u8, b: u8 },
}

impl PartialEq for Difference {
    fn eq(&self, other: &Self) -> bool {
        match (*self, *other) {
            (
                Self::Value { channel, a, b },
                Self::Value {
                    channel: c,
                    a: x,
                    b: y,
                },
            ) => channel == c && a.to_bits() == x.to_bits() && b.to_bits() == y.to_bits(),
            (
                Self::Flag { flag, a, b },
                Self::Flag {
                    flag: f,
                    a: x,
                    b: y,
                },
            ) => (flag, a, b) == (f, x, y),
            _ => false,
        }
    }
}

/// The first frame where an env of B differs from A.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Divergence {
    pub env: u32,
    /// Frames from each run's start (0: each run's first frame).
    pub frame: u64,
    /// That frame's `frame_seq` in A and in B.
    pub frame_seq_a: u64,
    pub frame_seq_b: u64,
    /// When each run's copy of that frame was taken (`sampled_ns`: a recording's time).
    pub time_a_ns: u64,
    pub time_b_ns: u64,
    pub origin: DivergenceOrigin,
    pub difference: Difference,
}

/// What one env's comparison came to.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct EnvState {
    /// Frames at which the env was compared in full (its values too) or in part.
    compared: u64,
    diverged: Option<Divergence>,
}

/// The comparison so far, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompareCounts {
    /// Frames both runs hold (at the same place from their starts).
    pub frames_compared: u64,
    /// Frames only A holds, and only B.
    pub frames_only_a: u64,
    pub frames_only_b: u64,
    /// Envs compared at one frame at least and equal at every one.
    pub envs_identical: u64,
    pub envs_diverged: u64,
    /// Envs one run has and the other has not, or never compared.
    pub envs_not_compared: u64,
}

/// Finds each env's first divergence between two runs.
#[derive(Clone, Debug)]
pub struct Comparer {
    tolerance: Tolerance,
    envs: Vec<EnvState>,
    /// Envs of the run with more (those beyond the other's are not compared).
    envs_max: u32,
    frames_compared: u64,
    frames_only_a: u64,
    frames_only_b: u64,
    /// Each run's previous frame's actions: a recorder that copied that frame late holds
    /// the trainer's next actions there, those that made the frame after it.
    prev_a: Actions,
    prev_b: Actions,
}

/// A copy of the actions of the recorded envs, and the step they are of (`action_seq`).
#[derive(Clone, Debug, Default)]
struct Actions {
    action_seq: Option<u64>,
    envs: Vec<u32>,
    values: Vec<f32>,
    act_size: usize,
}

impl Actions {
    fn of(f: &RecFrame) -> ActionsRef<'_> {
        ActionsRef {
            envs: &f.envs,
            values: &f.actions,
            act_size: f.act_size,
        }
    }

    fn keep(&mut self, f: &RecFrame) {
        self.action_seq = Some(f.action_seq);
        self.envs.clone_from(&f.envs);
        self.values.clone_from(&f.actions);
        self.act_size = f.act_size;
    }

    fn as_ref(&self) -> ActionsRef<'_> {
        ActionsRef {
            envs: &self.envs,
            values: &self.values,
            act_size: self.act_size,
        }
    }
}

/// The actions that made a frame: the frame's own copy when it holds that step's
/// (`action_seq = frame_seq`), else the previous frame's when it does (copied late, it
/// caught them), else none (recorded neither time: not compared).
fn actions_that_made<'f>(f: &'f RecFrame, prev: &'f Actions) -> Option<ActionsRef<'f>> {
    if f.action_seq == f.frame_seq {
        Some(Actions::of(f))
    } else if prev.action_seq == Some(f.frame_seq) {
        Some(prev.as_ref())
    } else {
        None
    }
}

#[derive(Clone, Copy)]
struct ActionsRef<'f> {
    envs: &'f [u32],
    values: &'f [f32],
    act_size: usize,
}

impl<'f> ActionsRef<'f> {
    fn row(self, env: u32) -> Option<&'f [f32]> {
        let i = self.envs.binary_search(&env).ok()?;
        self.values.get(i * self.act_size..(i + 1) * self.act_size)
    }
}

/// Env `env`'s observations in frame `f`, when recorded.
fn obs_row(f: &RecFrame, env: u32) -> Option<&[f32]> {
    let i = f.envs.binary_search(&env).ok()?;
    f.observations.get(i * f.obs_size..(i + 1) * f.obs_size)
}

impl Comparer {
    pub fn new(tolerance: Tolerance) -> Self {
        Self {
            tolerance,
            prev_a: Actions::default(),
            prev_b: Actions::default(),
            envs: Vec::new(),
            envs_max: 0,
            frames_compared: 0,
            frames_only_a: 0,
            frames_only_b: 0,
        }
    }

    /// `frames` frames only run A holds (B lacks them).
    pub fn only_a(&mut self, frames: u64) {
        self.frames_only_a += frames;
    }

    /// `frames` frames only run B holds.
    pub fn only_b(&mut self, frames: u64) {
        self.frames_only_b += frames;
    }

    /// The frames `a` and `b`, each `frame` frames from its run's start: the envs that
    /// diverge at it for the first time, ascending.
    pub fn frame(&mut self, frame: u64, a: &RecFrame, b: &RecFrame) -> Vec<Divergence> {
        self.frames_compared += 1;
        let num_a = a.rewards.len();
        let num_b = b.rewards.len();
        let common = num_a.min(num_b);
        self.envs_max = self.envs_max.max(num_a.max(num_b) as u32);
        if self.envs.len() < common {
            self.envs.resize(common, EnvState::default());
        }
        // In lock-step the actions that made each frame, as each recording caught them.
        let made = actions_that_made(a, &self.prev_a).zip(actions_that_made(b, &self.prev_b));
        let mut found = Vec::new();
        for env in 0..common {
            let e = env as u32;
            let values = Values {
                obs: obs_row(a, e)
                    .zip(obs_row(b, e))
                    .filter(|(x, y)| x.len() == y.len()),
                act: made
                    .and_then(|(x, y)| x.row(e).zip(y.row(e)))
                    .filter(|(x, y)| x.len() == y.len()),
            };
            let state = &mut self.envs[env];
            if state.diverged.is_some() {
                continue;
            }
            state.compared += 1;
            if let Some((origin, difference)) = first_difference(self.tolerance, a, b, env, values)
            {
                let d = Divergence {
                    env: env as u32,
                    frame,
                    frame_seq_a: a.frame_seq,
                    frame_seq_b: b.frame_seq,
                    time_a_ns: a.sampled_ns,
                    time_b_ns: b.sampled_ns,
                    origin,
                    difference,
                };
                state.diverged = Some(d);
                found.push(d);
            }
        }
        self.prev_a.keep(a);
        self.prev_b.keep(b);
        found
    }

    /// Each diverged env's first divergence, ascending by env.
    pub fn divergences(&self) -> impl Iterator<Item = &Divergence> {
        self.envs.iter().filter_map(|s| s.diverged.as_ref())
    }

    /// Whether env `env` has diverged.
    pub fn diverged(&self, env: u32) -> bool {
        self.envs
            .get(env as usize)
            .is_some_and(|s| s.diverged.is_some())
    }

    pub fn counts(&self) -> CompareCounts {
        let identical = self
            .envs
            .iter()
            .filter(|s| s.diverged.is_none() && s.compared > 0)
            .count() as u64;
        let diverged = self.envs.iter().filter(|s| s.diverged.is_some()).count() as u64;
        CompareCounts {
            frames_compared: self.frames_compared,
            frames_only_a: self.frames_only_a,
            frames_only_b: self.frames_only_b,
            envs_identical: identical,
            envs_diverged: diverged,
            envs_not_compared: u64::from(self.envs_max) - identical - diverged,
        }
    }
}

/// An env's observation and action rows in A and in B, where both recordings hold them
/// (the actions: those that made the frame).
#[derive(Clone, Copy)]
struct Values<'f> {
    obs: Option<(&'f [f32], &'f [f32])>,
    act: Option<(&'f [f32], &'f [f32])>,
}

/// Where env `env` of `b` first differs from `a` at this frame, and how it started.
fn first_difference(
    tol: Tolerance,
    a: &RecFrame,
    b: &RecFrame,
    env: usize,
    values: Values<'_>,
) -> Option<(DivergenceOrigin, Difference)> {
    let value = |channel: fn(u32) -> Channel, (x, y): (&[f32], &[f32])| {
        tol.first_difference(x, y).map(|i| Difference::Value {
            channel: channel(i as u32),
            a: x[i],
            b: y[i],
        })
    };
    // The actions first: they made the frame. An observation that differs where the
    // actions could not be compared has no known origin.
    if let Some(d) = values.act.and_then(|v| value(Channel::Act, v)) {
        return Some((DivergenceOrigin::Policy, d));
    }
    if let Some(d) = values.obs.and_then(|v| value(Channel::Obs, v)) {
        let origin = if values.act.is_some() {
            DivergenceOrigin::Simulator
        } else {
            DivergenceOrigin::Unknown
        };
        return Some((origin, d));
    }
    let origin = if values.obs.is_some() && values.act.is_some() {
        DivergenceOrigin::Reward
    } else {
        DivergenceOrigin::Unknown
    };
    let (ra, rb) = (a.rewards[env], b.rewards[env]);
    if !tol.equal(ra, rb) {
        let d = Difference::Value {
            channel: Channel::Reward,
            a: ra,
            b: rb,
        };
        return Some((origin, d));
    }
    // A flag is set or clear: any byte but 0 counts as set. The trainer's reset flags
    // are not compared: the engine clears each as it reads it, so whether a copy of the
    // frame holds one depends on when the copy was made. A reset that took effect
    // shows in the env's next observations.
    let flag = |flag: Flag, x: Option<&Vec<u8>>, y: Option<&Vec<u8>>| {
        let (fa, fb) = (x?.get(env).copied()?, y?.get(env).copied()?);
        ((fa != 0) != (fb != 0)).then_some(Difference::Flag { flag, a: fa, b: fb })
    };
    flag(Flag::Done, Some(&a.dones), Some(&b.dones))
        .or_else(|| {
            flag(
                Flag::Truncated,
                a.truncateds.as_ref(),
                b.truncateds.as_ref(),
            )
        })
        .map(|d| (origin, d))
}
