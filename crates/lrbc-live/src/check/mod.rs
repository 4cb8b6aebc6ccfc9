//! The value check of one frame: every reward, and every observation and action it is
//! given, tested for NaN and infinities and against the bounds the user set; the envs
//! whose episode ended counted; actions held at a saturation bound counted frame after
//! frame. Pure: fed a frame's arrays in pieces (the frame follower as it copies them, a
//! recording frame by frame), it says what it found in a [`FrameCheck`]. What the
//! findings mean over time (one event for a fault that lasts, its origin) is `detect`'s.
//!
//! The check of a block of values is one branch-free pass (vectorised) that only asks
//! whether every value lies within its bound; the values of a block that fails are then
//! looked at one by one. With no bound set a value's bound is the finite range, so that
//! NaN and both infinities fail the same test.

use serde::{Deserialize, Serialize};

use lrbc::layout::Names;

/// Where a value sits in a frame: an observation or action index, or the reward.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Channel {
    Obs(u32),
    Act(u32),
    Reward,
}

impl Channel {
    pub fn kind(self) -> ChannelKind {
        match self {
            Self::Obs(_) => ChannelKind::Observation,
            Self::Act(_) => ChannelKind::Action,
            Self::Reward => ChannelKind::Reward,
        }
    }

    /// The observation or action index (none for the reward).
    pub fn index(self) -> Option<u32> {
        match self {
            Self::Obs(i) | Self::Act(i) => Some(i),
            Self::Reward => None,
        }
    }

    /// The value's label: its name from the names region, else `obs[i]` / `act[i]`.
    pub fn label(self, names: &Names) -> String {
        match self {
            Self::Obs(i) => names.obs_label(i as usize),
            Self::Act(i) => names.act_label(i as usize),
            Self::Reward => "reward".into(),
        }
    }
}

/// The three arrays of values a frame holds per env.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelKind {
    Observation,
    Action,
    Reward,
}

impl ChannelKind {
    pub const ALL: [Self; 3] = [Self::Observation, Self::Action, Self::Reward];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Observation => "observation",
            Self::Action => "action",
            Self::Reward => "reward",
        }
    }

    /// The short name of bounds and names: `obs`, `act`, `reward`.
    pub fn short(self) -> &'static str {
        match self {
            Self::Observation => "obs",
            Self::Action => "act",
            Self::Reward => "reward",
        }
    }

    /// `obs`, `act` or `reward` (or the long names).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.short() == s || k.as_str() == s)
    }
}

/// An inclusive range of values; either end may be infinite.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    pub lo: f32,
    pub hi: f32,
}

/// A bound or a bound's rule that does not read, as one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BoundError {
    #[error("{0:?} is not LO:HI (e.g. -1:1, or :10 for no lower bound)")]
    NotLoHi(String),
    #[error("{side:?} in {text:?} is not a number")]
    NotANumber { side: String, text: String },
    #[error("{0:?}: a bound cannot be NaN")]
    NaN(String),
    #[error("{0:?}: the low end is above the high end")]
    Reversed(String),
    #[error("{0:?} is not CHANNEL=LO:HI (e.g. obs=-10:10, act[2]=-1:1, obs.pole_angle=-0.5:0.5)")]
    NotARule(String),
    #[error("{0:?}: expected an index, as in act[2]")]
    NoIndex(String),
    #[error("{0:?}: a name is missing after the dot")]
    NoName(String),
    #[error("{what:?}: the channel is obs, act or reward, not {channel:?}")]
    NoChannel { what: String, channel: String },
    #[error("{0:?}: the reward has one value per env, no index")]
    RewardIndexed(String),
}

/// A bound that names a value the segment does not have, as one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    #[error("bound {rule}: {channel} has {len} values, no index {index}")]
    NoSuchIndex {
        rule: String,
        channel: &'static str,
        len: usize,
        index: u32,
    },
    #[error("bound {rule}: no {channel} is named {name:?} in the names region")]
    NoSuchName {
        rule: String,
        channel: &'static str,
        name: String,
    },
}

impl Bound {
    /// `LO:HI`, either side empty for no bound on that side (`:10`, `-1:`); `inf` and
    /// `-inf` allowed; no NaN; LO at most HI.
    pub fn parse(text: &str) -> Result<Self, BoundError> {
        let (lo, hi) = text
            .split_once(':')
            .ok_or_else(|| BoundError::NotLoHi(text.into()))?;
        let side = |s: &str, default: f32| -> Result<f32, BoundError> {
            let s = s.trim();
            if s.is_empty() {
                return Ok(default);
            }
            let v: f32 = s.parse().map_err(|_| BoundError::NotANumber {
                side: s.into(),
                text: text.into(),
            })?;
            if v.is_nan() {
                return Err(BoundError::NaN(text.into()));
            }
            Ok(v)
        };
        let b = Self {
            lo: side(lo, f32::NEG_INFINITY)?,
            hi: side(hi, f32::INFINITY)?,
        };
        if b.lo > b.hi {
            return Err(BoundError::Reversed(text.into()));
        }
        Ok(b)
    }

    pub fn contains(self, v: f32) -> bool {
        v >= self.lo && v <= self.hi
    }

    /// `LO:HI` as [`Bound::parse`] reads it.
    pub fn display(self) -> String {
        let side = |v: f32| {
            if v.is_infinite() {
                String::new()
            } else {
                format!("{v}")
            }
        };
        format!("{}:{}", side(self.lo), side(self.hi))
    }
}

/// Which value of a channel a bound is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundTarget {
    /// Every value of the channel.
    All,
    Index(u32),
    /// The value of this name in the names region.
    Name(String),
}

/// A bound on a channel, or on one value of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoundRule {
    pub channel: ChannelKind,
    pub target: BoundTarget,
    pub bound: Bound,
}

impl BoundRule {
    /// `obs=LO:HI`, `act[3]=LO:HI`, `obs.pole_angle=LO:HI`, `reward=LO:HI`.
    pub fn parse(text: &str) -> Result<Self, BoundError> {
        let (what, range) = text
            .split_once('=')
            .ok_or_else(|| BoundError::NotARule(text.into()))?;
        let what = what.trim();
        let bound = Bound::parse(range)?;
        let (channel, target) = if let Some((c, rest)) = what.split_once('[') {
            let index = rest
                .strip_suffix(']')
                .and_then(|i| i.trim().parse::<u32>().ok())
                .ok_or_else(|| BoundError::NoIndex(what.into()))?;
            (c, BoundTarget::Index(index))
        } else if let Some((c, name)) = what.split_once('.') {
            if name.is_empty() {
                return Err(BoundError::NoName(what.into()));
            }
            (c, BoundTarget::Name(name.to_string()))
        } else {
            (what, BoundTarget::All)
        };
        let channel = ChannelKind::parse(channel.trim()).ok_or_else(|| BoundError::NoChannel {
            what: what.into(),
            channel: channel.into(),
        })?;
        if channel == ChannelKind::Reward && target != BoundTarget::All {
            return Err(BoundError::RewardIndexed(what.into()));
        }
        Ok(Self {
            channel,
            target,
            bound,
        })
    }

    /// The rule as [`BoundRule::parse`] reads it.
    pub fn display(&self) -> String {
        let c = self.channel.short();
        let what = match &self.target {
            BoundTarget::All => c.to_string(),
            BoundTarget::Index(i) => format!("{c}[{i}]"),
            BoundTarget::Name(n) => format!("{c}.{n}"),
        };
        format!("{what}={}", self.bound.display())
    }
}

/// Actions held at a bound: at or beyond `bound.lo` or `bound.hi` in `frames` frames in
/// a row.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Saturation {
    pub bound: Bound,
    pub frames: u32,
}

impl Saturation {
    /// Frames in a row at the bound, unless set.
    pub const DEFAULT_FRAMES: u32 = 50;
}

/// What the check tests besides NaN and infinities: the user's bounds and saturation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Applied in order: a later rule for the same value replaces an earlier one.
    pub bounds: Vec<BoundRule>,
    pub saturation: Option<Saturation>,
}

/// The envs whose values of a channel a frame's check covered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Coverage {
    #[default]
    None,
    All,
    /// These envs, ascending.
    Envs(Vec<u32>),
}

impl Coverage {
    pub fn covers(&self, env: u32) -> bool {
        match self {
            Self::None => false,
            Self::All => true,
            Self::Envs(envs) => envs.binary_search(&env).is_ok(),
        }
    }

    pub fn is_none(&self) -> bool {
        matches!(self, Self::None)
    }
}

/// What is wrong with a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// NaN, +Inf or -Inf.
    NonFinite,
    /// Outside its bound.
    OutOfRange,
    /// An action at a saturation bound for the set number of frames (or more).
    Saturated,
}

/// A fault of one env in one channel in one frame: the first value found (the lowest
/// index), and how many values of the channel have it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub env: u32,
    pub channel: Channel,
    pub fault: Fault,
    pub value: f32,
    pub values: u32,
    /// Saturated: the frames in a row the value has been at the bound, this one included.
    pub run_frames: u32,
}

/// What the check of one frame found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrameCheck {
    pub frame_seq: u64,
    pub num_envs: u32,
    /// Whether the rewards (every env's) were checked.
    pub rewards: bool,
    pub obs: Coverage,
    pub act: Coverage,
    /// At most one hit per env, channel kind and fault, in the order found.
    pub hits: Vec<Hit>,
    pub nan_values: u64,
    pub inf_values: u64,
    pub out_of_range_values: u64,
    /// Envs whose done or truncated flag is set.
    pub envs_ended: u32,
}

impl FrameCheck {
    /// The check found nothing wrong.
    pub fn is_clean(&self) -> bool {
        self.hits.is_empty()
    }

    /// Whether `channel` of `env` was checked in this frame.
    pub fn covers(&self, env: u32, channel: ChannelKind) -> bool {
        match channel {
            ChannelKind::Reward => self.rewards,
            ChannelKind::Observation => self.obs.covers(env),
            ChannelKind::Action => self.act.covers(env),
        }
    }
}

/// Values tested per block: a block passes or fails as a whole in one vectorised pass.
const BLOCK_VALUES: usize = 1024;

/// The bounds of one channel's values, repeated over the rows of a block so that a
/// block is tested as one flat array.
#[derive(Clone, Debug)]
struct RowBounds {
    row_len: usize,
    rows_per_block: usize,
    lo: Vec<f32>,
    hi: Vec<f32>,
    /// Some value has a bound narrower than the finite range.
    bounded: Vec<bool>,
    /// Any value has: blocks are tested against the bounds, not for finiteness alone.
    any_bounded: bool,
}

/// The bounds of one channel's values as the rules set them, before they are repeated
/// over a block's rows.
struct ValueBounds {
    lo: Vec<f32>,
    hi: Vec<f32>,
    /// The value's bound is narrower than the finite range.
    narrower: Vec<bool>,
}

impl ValueBounds {
    /// `len` values, each bounded by the finite range only.
    fn finite(len: usize) -> Self {
        Self {
            lo: vec![f32::MIN; len],
            hi: vec![f32::MAX; len],
            narrower: vec![false; len],
        }
    }

    fn set(&mut self, i: usize, lo: f32, hi: f32, narrower: bool) {
        self.lo[i] = lo;
        self.hi[i] = hi;
        self.narrower[i] = narrower;
    }
}

impl RowBounds {
    fn new(row_len: usize, values: ValueBounds) -> Self {
        let ValueBounds { lo, hi, narrower } = values;
        let rows_per_block = (BLOCK_VALUES / row_len.max(1)).max(1);
        let repeat = |v: &[f32]| {
            let mut out = Vec::with_capacity(rows_per_block * row_len);
            for _ in 0..rows_per_block {
                out.extend_from_slice(v);
            }
            out
        };
        Self {
            row_len,
            rows_per_block,
            lo: repeat(&lo),
            hi: repeat(&hi),
            any_bounded: narrower.iter().any(|&b| b),
            bounded: narrower,
        }
    }

    /// Whether a block of whole rows (at most `rows_per_block`) passes: every value
    /// finite, or within its bound where one is narrower.
    fn block_passes(&self, values: &[f32]) -> bool {
        if self.any_bounded {
            lrbc_platform::vector::all_within(values, &self.lo, &self.hi)
        } else {
            lrbc_platform::vector::all_finite(values)
        }
    }

    fn bound(&self, i: usize) -> (f32, f32) {
        (
            self.lo.get(i).copied().unwrap_or(f32::MIN),
            self.hi.get(i).copied().unwrap_or(f32::MAX),
        )
    }
}

/// The check of a segment's frames (or a recording's): the bounds resolved for its
/// sizes and names, the saturation runs carried from frame to frame, and the findings of
/// the frame being checked.
#[derive(Clone, Debug)]
pub struct Checker {
    num_envs: u32,
    obs: RowBounds,
    act: RowBounds,
    reward: Bound,
    reward_bounded: bool,
    saturation: Option<Saturation>,
    /// Frames in a row each action value has been at its saturation bound.
    runs: Vec<u32>,
    /// This frame's actions at the low bound (1), the high one (2) or neither (0), for the
    /// envs checked; applied to
    /// `runs` when the frame is finished (a torn frame is discarded, runs untouched).
    at_bound: Vec<u8>,
    /// The frame whose actions last advanced the runs.
    runs_frame: Option<u64>,
    found: FrameCheck,
}

impl Checker {
    /// A check of frames of `num_envs` envs of `obs_size` observations and `act_size`
    /// actions, named by `names`. Err: a bound names a value the segment does not have.
    pub fn new(
        limits: &Limits,
        num_envs: u32,
        obs_size: u32,
        act_size: u32,
        names: &Names,
    ) -> Result<Self, LimitsError> {
        let (o, a) = (obs_size as usize, act_size as usize);
        let mut obs = ValueBounds::finite(o);
        let mut act = ValueBounds::finite(a);
        let mut reward = Bound {
            lo: f32::MIN,
            hi: f32::MAX,
        };
        let mut reward_bounded = false;
        for rule in &limits.bounds {
            // NaN and infinities are faults of their own: a bound never admits them.
            let lo = rule.bound.lo.max(f32::MIN);
            let hi = rule.bound.hi.min(f32::MAX);
            let narrower = rule.bound.lo > f32::MIN || rule.bound.hi < f32::MAX;
            let (target, names, len) = match rule.channel {
                ChannelKind::Reward => {
                    reward = Bound { lo, hi };
                    reward_bounded = narrower;
                    continue;
                }
                ChannelKind::Observation => (&mut obs, &names.obs, o),
                ChannelKind::Action => (&mut act, &names.act, a),
            };
            let indices: Vec<usize> = match &rule.target {
                BoundTarget::All => (0..len).collect(),
                BoundTarget::Index(i) if (*i as usize) < len => vec![*i as usize],
                BoundTarget::Index(i) => {
                    return Err(LimitsError::NoSuchIndex {
                        rule: rule.display(),
                        channel: rule.channel.as_str(),
                        len,
                        index: *i,
                    });
                }
                BoundTarget::Name(n) => match names.iter().position(|x| x == n) {
                    Some(i) if i < len => vec![i],
                    _ => {
                        return Err(LimitsError::NoSuchName {
                            rule: rule.display(),
                            channel: rule.channel.as_str(),
                            name: n.clone(),
                        });
                    }
                },
            };
            for i in indices {
                target.set(i, lo, hi, narrower);
            }
        }
        let values = (num_envs as usize).saturating_mul(a);
        let saturation = limits.saturation.filter(|s| s.frames > 0 && a > 0);
        Ok(Self {
            num_envs,
            obs: RowBounds::new(o, obs),
            act: RowBounds::new(a, act),
            reward,
            reward_bounded,
            runs: if saturation.is_some() {
                vec![0; values]
            } else {
                Vec::new()
            },
            at_bound: if saturation.is_some() {
                vec![0; values]
            } else {
                Vec::new()
            },
            saturation,
            runs_frame: None,
            found: FrameCheck::default(),
        })
    }

    pub fn num_envs(&self) -> u32 {
        self.num_envs
    }

    /// Starts the check of a frame: nothing found yet, nothing covered.
    pub fn begin(&mut self) {
        let f = &mut self.found;
        f.num_envs = self.num_envs;
        f.rewards = false;
        f.obs = Coverage::None;
        f.act = Coverage::None;
        f.hits.clear();
        f.nan_values = 0;
        f.inf_values = 0;
        f.out_of_range_values = 0;
        f.envs_ended = 0;
    }

    /// Every env's reward.
    pub fn rewards(&mut self, rewards: &[f32]) {
        self.found.rewards = true;
        let b = self.reward;
        let (lo, hi) = (b.lo, b.hi);
        let bounded = self.reward_bounded;
        for (block, chunk) in rewards.chunks(BLOCK_VALUES).enumerate() {
            let ok = if bounded {
                chunk.iter().fold(true, |ok, &v| ok & (v >= lo) & (v <= hi))
            } else {
                lrbc_platform::vector::all_finite(chunk)
            };
            if ok {
                continue;
            }
            for (k, &v) in chunk.iter().enumerate() {
                if !(v >= lo && v <= hi) {
                    let env = (block * BLOCK_VALUES + k) as u32;
                    self.note(env, Channel::Reward, v, None);
                }
            }
        }
    }

    /// Every env's done and truncated flags.
    pub fn flags(&mut self, dones: &[u8], truncateds: Option<&[u8]>) {
        let ended = match truncateds {
            Some(t) => dones
                .iter()
                .zip(t)
                .fold(0u32, |n, (&d, &t)| n + u32::from((d | t) != 0)),
            None => dones.iter().fold(0u32, |n, &d| n + u32::from(d != 0)),
        };
        self.found.envs_ended = ended;
    }

    /// The observations of the envs from `first_env` on, whole rows.
    pub fn obs_rows(&mut self, first_env: u32, values: &[f32]) {
        self.rows(first_env, values, ChannelKind::Observation);
    }

    /// The observation rows tested as one block: reading them a block at a time, a
    /// caller can test each with [`Checker::obs_block_passes`] as it reads, and pass only
    /// the blocks that fail to [`Checker::obs_rows`].
    pub fn obs_block_rows(&self) -> usize {
        self.obs.rows_per_block
    }

    /// Whether a block of whole observation rows (at most [`Checker::obs_block_rows`])
    /// holds nothing [`Checker::obs_rows`] would find.
    pub fn obs_block_passes(&self, values: &[f32]) -> bool {
        self.obs.block_passes(values)
    }

    /// The actions of the envs from `first_env` on, whole rows.
    pub fn act_rows(&mut self, first_env: u32, values: &[f32]) {
        self.rows(first_env, values, ChannelKind::Action);
    }

    /// The rows of `kind`'s values (observations or actions) of the envs from
    /// `first_env` on.
    fn rows(&mut self, first_env: u32, values: &[f32], kind: ChannelKind) {
        let act = match kind {
            ChannelKind::Observation => false,
            ChannelKind::Action => true,
            // One value per env, checked by `rewards`.
            ChannelKind::Reward => return,
        };
        let bounds = if act { &self.act } else { &self.obs };
        let row_len = bounds.row_len;
        if row_len == 0 {
            return;
        }
        let block = bounds.rows_per_block * row_len;
        let mut bad_rows = Vec::new();
        for (b, chunk) in values.chunks(block).enumerate() {
            if bounds.block_passes(chunk) {
                continue;
            }
            for (r, row) in chunk.chunks_exact(row_len).enumerate() {
                if !bounds.block_passes(row) {
                    bad_rows.push((b * bounds.rows_per_block + r, row));
                }
            }
        }
        for (r, row) in bad_rows {
            let env = first_env.saturating_add(r as u32);
            for (i, &v) in row.iter().enumerate() {
                let (lo, hi) = if act {
                    self.act.bound(i)
                } else {
                    self.obs.bound(i)
                };
                if !(v >= lo && v <= hi) {
                    let channel = if act {
                        Channel::Act(i as u32)
                    } else {
                        Channel::Obs(i as u32)
                    };
                    self.note(env, channel, v, None);
                }
            }
        }
        if act && let Some(s) = self.saturation {
            let (lo, hi) = (s.bound.lo, s.bound.hi);
            let at = (first_env as usize).saturating_mul(row_len);
            if let Some(dst) = self.at_bound.get_mut(at..at + values.len()) {
                for (d, &v) in dst.iter_mut().zip(values) {
                    *d = u8::from(v <= lo) | (u8::from(v >= hi) << 1);
                }
            }
        }
    }

    /// Records a value that failed its bound: NaN, an infinity, or out of range.
    fn note(&mut self, env: u32, channel: Channel, v: f32, run: Option<u32>) {
        let fault = if run.is_some() {
            Fault::Saturated
        } else if v.is_nan() {
            self.found.nan_values += 1;
            Fault::NonFinite
        } else if v.is_infinite() {
            self.found.inf_values += 1;
            Fault::NonFinite
        } else {
            self.found.out_of_range_values += 1;
            Fault::OutOfRange
        };
        let kind = channel.kind();
        // Hits of one env come together (a row at a time): look back over its own.
        let same = self
            .found
            .hits
            .iter_mut()
            .rev()
            .take_while(|h| h.env == env)
            .find(|h| h.channel.kind() == kind && h.fault == fault);
        match same {
            Some(h) => h.values += 1,
            None => self.found.hits.push(Hit {
                env,
                channel,
                fault,
                value: v,
                values: 1,
                run_frames: run.unwrap_or(0),
            }),
        }
    }

    /// Ends the check of frame `frame_seq`: `obs` and `act` say whose values were
    /// checked (whole, not torn). Advances the saturation runs and returns the findings
    /// (valid until the next `begin`).
    pub fn finish(&mut self, frame_seq: u64, obs: Coverage, act: Coverage) -> &FrameCheck {
        self.found.frame_seq = frame_seq;
        if let Some(s) = self.saturation {
            let f = frame_seq;
            // A run counts frames in a row: a frame whose actions were not checked, or a
            // gap, starts every run over.
            let in_row = self.runs_frame.is_some_and(|p| p.wrapping_add(1) == f);
            if !in_row {
                self.runs.fill(0);
            }
            let row_len = self.act.row_len;
            if !act.is_none() {
                self.runs_frame = Some(f);
            }
            // Every run moves on (one more frame at the bound, or none); only when one
            // reached the set number of frames are the envs looked at one by one.
            let longest = match &act {
                Coverage::None => {
                    self.runs.fill(0);
                    0
                }
                Coverage::All => {
                    let mut longest = 0u32;
                    for (r, &b) in self.runs.iter_mut().zip(&self.at_bound) {
                        *r = if b != 0 { r.saturating_add(1) } else { 0 };
                        longest = longest.max(*r);
                    }
                    longest
                }
                Coverage::Envs(envs) => {
                    let mut longest = 0u32;
                    for env in 0..self.num_envs as usize {
                        let at = env * row_len;
                        let (Some(runs), Some(now)) = (
                            self.runs.get_mut(at..at + row_len),
                            self.at_bound.get(at..at + row_len),
                        ) else {
                            break;
                        };
                        if envs.binary_search(&(env as u32)).is_err() {
                            runs.fill(0);
                            continue;
                        }
                        for (r, &b) in runs.iter_mut().zip(now) {
                            *r = if b != 0 { r.saturating_add(1) } else { 0 };
                            longest = longest.max(*r);
                        }
                    }
                    longest
                }
            };
            if longest >= s.frames && row_len > 0 {
                let rows = self
                    .runs
                    .chunks_exact(row_len)
                    .zip(self.at_bound.chunks_exact(row_len));
                for (env, (runs, now)) in rows.enumerate() {
                    let mut first = None;
                    let mut count = 0u32;
                    for (i, (&r, &b)) in runs.iter().zip(now).enumerate() {
                        if r >= s.frames {
                            count += 1;
                            first.get_or_insert((i, r, b));
                        }
                    }
                    if let Some((i, run, b)) = first {
                        let value = if b & 2 != 0 { s.bound.hi } else { s.bound.lo };
                        self.found.hits.push(Hit {
                            env: env as u32,
                            channel: Channel::Act(i as u32),
                            fault: Fault::Saturated,
                            value,
                            values: count,
                            run_frames: run,
                        });
                    }
                }
            }
        }
        self.found.obs = obs;
        self.found.act = act;
        &self.found
    }

    /// Whether a channel has a bound narrower than the finite range (out-of-range
    /// values can be found at all).
    pub fn bounded(&self, channel: ChannelKind) -> bool {
        match channel {
            ChannelKind::Observation => self.obs.bounded.iter().any(|&b| b),
            ChannelKind::Action => self.act.bounded.iter().any(|&b| b),
            ChannelKind::Reward => self.reward_bounded,
        }
    }
}

#[cfg(test)]
mod tests;
