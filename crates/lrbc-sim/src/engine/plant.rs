//! Faults the engine plants in the frames it publishes, for diagnosis tools to find: a
//! NaN or an infinity in one observation, action or reward, a burst of done flags, a
//! stall of the engine, one observation drifted by a little in one frame. Pure: [`Plant::parse`] reads the `--plant` grammar and
//! [`Plant::check`] holds a plant against the segment's sizes; the step loop plants them.

use std::fmt;
use std::time::Duration;

/// The longest stall that can be planted: an hour.
pub const MAX_STALL: Duration = Duration::from_secs(3600);
/// How long a stall lasts when its spec gives no `secs`.
pub const DEFAULT_STALL: Duration = Duration::from_secs(2);
/// The share of the envs a done burst marks when its spec gives no `share`.
pub const DEFAULT_DONE_SHARE: f64 = 0.75;
/// What a drift adds to the observation when its spec gives no `delta`.
pub const DEFAULT_DRIFT: f32 = 1e-3;

/// A fault and the step at which the engine plants it.
#[derive(Clone, Debug, PartialEq)]
pub struct Plant {
    /// The engine's step count at which the fault first shows: the step that publishes
    /// the frame (at least 1; step 0 is the frame written when the segment is created).
    pub step: u64,
    pub fault: PlantedFault,
}

/// What is planted.
#[derive(Clone, Debug, PartialEq)]
pub enum PlantedFault {
    /// `value` in env `env`'s slot of `channel`, in the `frames` consecutive frames from
    /// the plant's step (`frames` at least 1).
    Value {
        value: NonFinite,
        env: u32,
        channel: PlantChannel,
        frames: u64,
    },
    /// The done flags of the first [`done_count`] envs set, in the `frames` consecutive
    /// frames from the plant's step (`share` in (0, 1], `frames` at least 1).
    DoneBurst { share: f64, frames: u64 },
    /// The engine waits `duration` (more than zero, at most [`MAX_STALL`]) before it
    /// steps and publishes the frame of the plant's step.
    Stall { duration: Duration },
    /// Env `env`'s observation `index` in the frame of the plant's step is the value the
    /// dynamics gave plus `delta` (finite, not zero): an engine that computed one value a
    /// little differently. The dynamics go on from their own value.
    Drift { env: u32, index: u32, delta: f32 },
}

/// A value that is not a finite number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NonFinite {
    Nan,
    Inf,
    NegInf,
}

/// Where in an env's data a value is planted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlantChannel {
    /// The observation region: the env's observation `index` (below `obs_size`).
    Obs { index: u32 },
    /// The action region: the env's action `index` (below `act_size`), as if the trainer
    /// had written it.
    Act { index: u32 },
    /// The reward region: the env's reward.
    Reward,
}

/// Why a spec or a plant is refused: one line, without the spec (the caller names it).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PlantError {
    #[error("unknown fault {0:?}: expected nan, inf, -inf, done-burst, stall or drift")]
    UnknownKind(String),
    #[error("missing @STEP after the fault (e.g. nan@3000)")]
    MissingStep,
    #[error("STEP {0:?} is not a step count")]
    BadStep(String),
    #[error("STEP must be at least 1 (step 0 is the frame written when the segment is created)")]
    StepZero,
    #[error("expected key=value after ':', not {0:?}")]
    BadPair(String),
    #[error("{kind} takes no key {key:?} (its keys: {keys})")]
    UnknownKey {
        kind: &'static str,
        key: String,
        keys: &'static str,
    },
    #[error("key {0:?} is given twice")]
    RepeatedKey(String),
    #[error("{key}={value:?}: expected {expected}")]
    BadValue {
        key: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("a reward is one value per env: channel=reward takes no index")]
    IndexForReward,
    #[error(
        "side=trainer cannot be planted by the engine: only the engine side can (a trainer stalls by not bumping action_seq)"
    )]
    TrainerStall,
    #[error("{frames} frames from step {step} run past the largest step count")]
    PastLastStep { step: u64, frames: u64 },
    #[error("env {env} is out of range: the engine has {num_envs} envs")]
    EnvOutOfRange { env: u32, num_envs: u32 },
    #[error("index {index} is out of range: an env has {size} {values}")]
    IndexOutOfRange {
        /// What the index counts: `observations` or `actions`.
        values: &'static str,
        index: u32,
        size: u32,
    },
    #[error("the engine writes no observations, rewards or dones without its dynamics")]
    NeedsDynamics,
}

impl NonFinite {
    pub fn value(self) -> f32 {
        match self {
            Self::Nan => f32::NAN,
            Self::Inf => f32::INFINITY,
            Self::NegInf => f32::NEG_INFINITY,
        }
    }

    /// Its name in a spec.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Nan => "nan",
            Self::Inf => "inf",
            Self::NegInf => "-inf",
        }
    }
}

impl PlantChannel {
    /// Its name in a spec.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Obs { .. } => "obs",
            Self::Act { .. } => "act",
            Self::Reward => "reward",
        }
    }
}

/// How many envs, from env 0, a done burst of `share` marks: `ceil(share × num_envs)`,
/// at least 1 and at most `num_envs`. A product a rounding error above a whole number
/// (0.7 × 10) counts as that number.
pub fn done_count(share: f64, num_envs: u32) -> usize {
    let exact = share * f64::from(num_envs);
    // A float's conversion saturates; the bounds are applied after it.
    let count = (exact * (1.0 - 1e-12)).ceil() as usize;
    count.max(1).min(num_envs as usize)
}

/// The keys each kind of fault takes, as the errors list them.
const VALUE_KEYS: &str = "env, channel, index, frames";
const DONE_BURST_KEYS: &str = "share, frames";
const STALL_KEYS: &str = "secs, side";
const DRIFT_KEYS: &str = "env, index, delta";

impl Plant {
    /// Parses a spec: `KIND@STEP`, then optionally `:key=value,key=value`.
    ///
    /// - `nan@STEP`, `inf@STEP`, `-inf@STEP`, keys `env` (default 0), `channel` (`obs`,
    ///   `act` or `reward`; default `obs`), `index` (default 0; none for `reward`),
    ///   `frames` (default 1);
    /// - `done-burst@STEP`, keys `share` (in (0, 1], default 0.75), `frames` (default 1);
    /// - `stall@STEP`, keys `secs` (more than 0, at most 3600; default 2), `side`
    ///   (`engine`, the default; `trainer` is refused);
    /// - `drift@STEP`, keys `env` (default 0), `index` (of the observation; default 0),
    ///   `delta` (finite, not zero; default 0.001).
    ///
    /// Kinds and names are taken in any case. Whether `env` and `index` fit the segment
    /// is [`Plant::check`]'s.
    pub fn parse(spec: &str) -> Result<Self, PlantError> {
        let (head, pairs) = match spec.split_once(':') {
            Some((head, pairs)) => (head, Some(pairs)),
            None => (spec, None),
        };
        let (kind, step) = match head.split_once('@') {
            Some((kind, step)) => (kind, Some(step)),
            None => (head, None),
        };
        let kind_text = kind;
        let kind = kind.to_ascii_lowercase();
        let value = match kind.as_str() {
            "nan" => Some(NonFinite::Nan),
            "inf" => Some(NonFinite::Inf),
            "-inf" => Some(NonFinite::NegInf),
            "done-burst" | "stall" | "drift" => None,
            _ => return Err(PlantError::UnknownKind(kind_text.to_string())),
        };
        let step = match step {
            None | Some("") => return Err(PlantError::MissingStep),
            Some(text) => text
                .parse::<u64>()
                .map_err(|_| PlantError::BadStep(text.to_string()))?,
        };
        if step == 0 {
            return Err(PlantError::StepZero);
        }
        let pairs = match pairs {
            Some(text) => split_pairs(text)?,
            None => Vec::new(),
        };
        let fault = match (value, kind.as_str()) {
            (Some(value), _) => value_fault(value, &pairs)?,
            (None, "done-burst") => done_burst(&pairs)?,
            (None, "drift") => drift(&pairs)?,
            (None, _) => stall(&pairs)?,
        };
        let plant = Self { step, fault };
        plant.last_step()?;
        Ok(plant)
    }

    /// The last step whose frame shows the fault.
    pub fn last_step(&self) -> Result<u64, PlantError> {
        let frames = match self.fault {
            PlantedFault::Value { frames, .. } | PlantedFault::DoneBurst { frames, .. } => frames,
            PlantedFault::Stall { .. } | PlantedFault::Drift { .. } => 1,
        };
        frames
            .checked_sub(1)
            .and_then(|more| self.step.checked_add(more))
            .ok_or(PlantError::PastLastStep {
                step: self.step,
                frames,
            })
    }

    /// Whether the frame of step `step` shows the fault (a stall: whether the engine
    /// waits before that step).
    pub fn shows_at(&self, step: u64) -> bool {
        step >= self.step && self.last_step().is_ok_and(|last| step <= last)
    }

    /// Holds the plant against an engine of `num_envs` envs with `obs_size`
    /// observations and `act_size` actions each; also what [`Plant::parse`] checks, for
    /// a plant built in code.
    pub fn check(&self, num_envs: u32, obs_size: u32, act_size: u32) -> Result<(), PlantError> {
        if self.step == 0 {
            return Err(PlantError::StepZero);
        }
        match self.fault {
            PlantedFault::Value { frames: 0, .. } | PlantedFault::DoneBurst { frames: 0, .. } => {
                return Err(bad_frames(0));
            }
            PlantedFault::DoneBurst { share, .. } if !share_in_range(share) => {
                return Err(bad_share(share.to_string()));
            }
            PlantedFault::Stall { duration } if duration.is_zero() || duration > MAX_STALL => {
                return Err(bad_secs(duration.as_secs_f64().to_string()));
            }
            PlantedFault::Drift { delta, .. } if !drift_in_range(delta) => {
                return Err(bad_delta(delta.to_string()));
            }
            _ => {}
        }
        self.last_step()?;
        let (env, channel) = match self.fault {
            PlantedFault::Value { env, channel, .. } => (env, channel),
            PlantedFault::Drift { env, index, .. } => (env, PlantChannel::Obs { index }),
            PlantedFault::DoneBurst { .. } | PlantedFault::Stall { .. } => return Ok(()),
        };
        if env >= num_envs {
            return Err(PlantError::EnvOutOfRange { env, num_envs });
        }
        let (index, size, values) = match channel {
            PlantChannel::Obs { index } => (index, obs_size, "observations"),
            PlantChannel::Act { index } => (index, act_size, "actions"),
            PlantChannel::Reward => return Ok(()),
        };
        if index >= size {
            return Err(PlantError::IndexOutOfRange {
                values,
                index,
                size,
            });
        }
        Ok(())
    }

    /// Whether the engine needs its dynamics to plant it: it writes the observations,
    /// rewards and dones that carry the fault only when it steps them.
    pub fn needs_dynamics(&self) -> bool {
        match self.fault {
            PlantedFault::Value { channel, .. } => !matches!(channel, PlantChannel::Act { .. }),
            PlantedFault::DoneBurst { .. } | PlantedFault::Drift { .. } => true,
            PlantedFault::Stall { .. } => false,
        }
    }
}

impl std::str::FromStr for Plant {
    type Err = PlantError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        Self::parse(spec)
    }
}

/// The spec that parses back into the plant, keys at their defaults left out.
impl fmt::Display for Plant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut keys = Vec::new();
        match self.fault {
            PlantedFault::Value {
                value,
                env,
                channel,
                frames,
            } => {
                write!(f, "{}@{}", value.as_str(), self.step)?;
                if env != 0 {
                    keys.push(format!("env={env}"));
                }
                match channel {
                    PlantChannel::Obs { index } if index != 0 => {
                        keys.push(format!("index={index}"));
                    }
                    PlantChannel::Obs { .. } => {}
                    PlantChannel::Act { index } => {
                        keys.push(format!("channel={}", channel.as_str()));
                        if index != 0 {
                            keys.push(format!("index={index}"));
                        }
                    }
                    PlantChannel::Reward => keys.push(format!("channel={}", channel.as_str())),
                }
                if frames != 1 {
                    keys.push(format!("frames={frames}"));
                }
            }
            PlantedFault::DoneBurst { share, frames } => {
                write!(f, "done-burst@{}", self.step)?;
                if share != DEFAULT_DONE_SHARE {
                    keys.push(format!("share={share}"));
                }
                if frames != 1 {
                    keys.push(format!("frames={frames}"));
                }
            }
            PlantedFault::Stall { duration } => {
                write!(f, "stall@{}", self.step)?;
                if duration != DEFAULT_STALL {
                    keys.push(format!("secs={}", duration.as_secs_f64()));
                }
            }
            PlantedFault::Drift { env, index, delta } => {
                write!(f, "drift@{}", self.step)?;
                if env != 0 {
                    keys.push(format!("env={env}"));
                }
                if index != 0 {
                    keys.push(format!("index={index}"));
                }
                if delta != DEFAULT_DRIFT {
                    keys.push(format!("delta={delta}"));
                }
            }
        }
        if !keys.is_empty() {
            write!(f, ":{}", keys.join(","))?;
        }
        Ok(())
    }
}

/// `key=value` pairs separated by commas, each key once, keys in lower case.
fn split_pairs(text: &str) -> Result<Vec<(String, &str)>, PlantError> {
    let mut pairs: Vec<(String, &str)> = Vec::new();
    for pair in text.split(',') {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(PlantError::BadPair(pair.to_string()));
        };
        let key = key.to_ascii_lowercase();
        if key.is_empty() {
            return Err(PlantError::BadPair(pair.to_string()));
        }
        if pairs.iter().any(|(k, _)| *k == key) {
            return Err(PlantError::RepeatedKey(key));
        }
        pairs.push((key, value));
    }
    Ok(pairs)
}

fn value_fault(value: NonFinite, pairs: &[(String, &str)]) -> Result<PlantedFault, PlantError> {
    let (mut env, mut channel, mut index, mut frames) = (0, "obs".to_string(), None, 1);
    for (key, text) in pairs {
        match key.as_str() {
            "env" => env = number(text, "env", "an env number")?,
            "channel" => channel = text.to_ascii_lowercase(),
            "index" => index = Some(number(text, "index", "an index (0 for the first)")?),
            "frames" => frames = frames_of(text)?,
            _ => return Err(unknown_key(value.as_str(), key, VALUE_KEYS)),
        }
    }
    let channel = match (channel.as_str(), index) {
        ("obs", index) => PlantChannel::Obs {
            index: index.unwrap_or(0),
        },
        ("act", index) => PlantChannel::Act {
            index: index.unwrap_or(0),
        },
        ("reward", None) => PlantChannel::Reward,
        ("reward", Some(_)) => return Err(PlantError::IndexForReward),
        _ => {
            return Err(PlantError::BadValue {
                key: "channel",
                value: channel,
                expected: "obs, act or reward",
            });
        }
    };
    Ok(PlantedFault::Value {
        value,
        env,
        channel,
        frames,
    })
}

fn done_burst(pairs: &[(String, &str)]) -> Result<PlantedFault, PlantError> {
    let (mut share, mut frames) = (DEFAULT_DONE_SHARE, 1);
    for (key, text) in pairs {
        match key.as_str() {
            "share" => {
                share = text
                    .parse::<f64>()
                    .ok()
                    .filter(|&s| share_in_range(s))
                    .ok_or_else(|| bad_share((*text).to_string()))?;
            }
            "frames" => frames = frames_of(text)?,
            _ => return Err(unknown_key("done-burst", key, DONE_BURST_KEYS)),
        }
    }
    Ok(PlantedFault::DoneBurst { share, frames })
}

fn stall(pairs: &[(String, &str)]) -> Result<PlantedFault, PlantError> {
    let mut duration = DEFAULT_STALL;
    for (key, text) in pairs {
        match key.as_str() {
            "secs" => {
                duration = text
                    .parse::<f64>()
                    .ok()
                    .filter(|&s| s.is_finite() && s > 0.0 && s <= MAX_STALL.as_secs_f64())
                    .map(Duration::from_secs_f64)
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| bad_secs((*text).to_string()))?;
            }
            "side" => match text.to_ascii_lowercase().as_str() {
                "engine" => {}
                "trainer" => return Err(PlantError::TrainerStall),
                _ => {
                    return Err(PlantError::BadValue {
                        key: "side",
                        value: (*text).to_string(),
                        expected: "engine (trainer cannot be planted by the engine)",
                    });
                }
            },
            _ => return Err(unknown_key("stall", key, STALL_KEYS)),
        }
    }
    Ok(PlantedFault::Stall { duration })
}

fn drift(pairs: &[(String, &str)]) -> Result<PlantedFault, PlantError> {
    let (mut env, mut index, mut delta) = (0, 0, DEFAULT_DRIFT);
    for (key, text) in pairs {
        match key.as_str() {
            "env" => env = number(text, "env", "an env number")?,
            "index" => index = number(text, "index", "an index (0 for the first)")?,
            "delta" => {
                delta = text
                    .parse::<f32>()
                    .ok()
                    .filter(|&d| drift_in_range(d))
                    .ok_or_else(|| bad_delta((*text).to_string()))?;
            }
            _ => return Err(unknown_key("drift", key, DRIFT_KEYS)),
        }
    }
    Ok(PlantedFault::Drift { env, index, delta })
}

fn drift_in_range(delta: f32) -> bool {
    delta.is_finite() && delta != 0.0
}

fn bad_delta(value: String) -> PlantError {
    PlantError::BadValue {
        key: "delta",
        value,
        expected: "a finite number other than 0, such as 1e-3",
    }
}

fn number<T: std::str::FromStr>(
    text: &str,
    key: &'static str,
    expected: &'static str,
) -> Result<T, PlantError> {
    text.parse().map_err(|_| PlantError::BadValue {
        key,
        value: text.to_string(),
        expected,
    })
}

fn frames_of(text: &str) -> Result<u64, PlantError> {
    number::<u64>(text, "frames", "a number of frames, at least 1")
        .and_then(|n| if n == 0 { Err(bad_frames(n)) } else { Ok(n) })
}

fn share_in_range(share: f64) -> bool {
    share > 0.0 && share <= 1.0
}

fn unknown_key(kind: &'static str, key: &str, keys: &'static str) -> PlantError {
    PlantError::UnknownKey {
        kind,
        key: key.to_string(),
        keys,
    }
}

fn bad_frames(frames: u64) -> PlantError {
    PlantError::BadValue {
        key: "frames",
        value: frames.to_string(),
        expected: "a number of frames, at least 1",
    }
}

fn bad_share(value: String) -> PlantError {
    PlantError::BadValue {
        key: "share",
        value,
        expected: "a share of the envs, more than 0 and at most 1",
    }
}

fn bad_secs(value: String) -> PlantError {
    PlantError::BadValue {
        key: "secs",
        value,
        expected: "a number of seconds, more than 0 and at most 3600",
    }
}

#[cfg(test)]
mod tests;
