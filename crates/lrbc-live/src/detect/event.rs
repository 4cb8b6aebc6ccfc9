//! An event: what the detector found, where and when, in the form every consumer shares
//! (the window's Events panel, `events`, a recording's `/lrbc/events`, `serve`).

use serde_json::{Map, Value, json};

use crate::check::ChannelKind;
use crate::text::thousands;

/// What kind of thing went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// NaN, +Inf or -Inf in a reward, observation or action.
    Nonfinite,
    /// A value outside the bound the user set.
    OutOfRange,
    /// An action at a saturation bound for the set number of frames.
    Saturated,
    /// More than the set share of envs done or truncated in one frame.
    DoneBurst,
    /// `frame_seq` still for longer than the loop's rhythm explains: a pause several
    /// times the loop's usual update, or one where the loop has none (mid-rollout, on the
    /// other side, in a loop without pauses).
    Stall,
    /// A long pause before the loop's rhythm was known (at most one per run): told, not
    /// judged a fault.
    Pause,
    /// The segment's state changed: engine gone, replaced, truncated, unlinked.
    State,
    /// A response that carries an error.
    RpcError,
    /// A request with no response in time.
    Unanswered,
    /// A ring entry that does not decode.
    Malformed,
    /// Ring bytes overwritten before they were read.
    RingLoss,
}

impl EventKind {
    pub const ALL: [Self; 11] = [
        Self::Nonfinite,
        Self::OutOfRange,
        Self::Saturated,
        Self::DoneBurst,
        Self::Stall,
        Self::Pause,
        Self::State,
        Self::RpcError,
        Self::Unanswered,
        Self::Malformed,
        Self::RingLoss,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Nonfinite => "nonfinite",
            Self::OutOfRange => "out_of_range",
            Self::Saturated => "saturated",
            Self::DoneBurst => "done_burst",
            Self::Stall => "stall",
            Self::Pause => "pause",
            Self::State => "state",
            Self::RpcError => "rpc_error",
            Self::Unanswered => "unanswered",
            Self::Malformed => "malformed",
            Self::RingLoss => "ring_loss",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Its place in [`EventKind::ALL`] (per-kind counts are arrays in that order).
    pub fn position(self) -> usize {
        self as usize
    }

    /// In words, for the window.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Nonfinite => "NaN or Inf",
            Self::OutOfRange => "out of range",
            Self::Saturated => "saturated action",
            Self::DoneBurst => "done burst",
            Self::Stall => "stall",
            Self::Pause => "pause of unknown rhythm",
            Self::State => "segment state",
            Self::RpcError => "error response",
            Self::Unanswered => "unanswered request",
            Self::Malformed => "malformed entry",
            Self::RingLoss => "ring loss",
        }
    }

    /// Whether the kind is a fault (a pause of unknown rhythm is told, not judged one).
    pub fn is_fault(self) -> bool {
        self != Self::Pause
    }

    /// Whether the kind is about values of one env (it has an env and a channel).
    pub fn is_value(self) -> bool {
        matches!(self, Self::Nonfinite | Self::OutOfRange | Self::Saturated)
    }
}

/// Which side of the segment a non-finite value (or a stall) came from, judged at the
/// env's first bad frame (for a stall: which side had not moved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The actions held the value while the observation and reward were finite (a stall:
    /// the trainer had not sent its actions).
    Policy,
    /// The observation or reward held it while the actions the env was stepped with were
    /// finite (a stall: the engine had not published the next frame).
    Simulator,
    /// The frame's actions were not checked, or both sides were bad with nothing checked
    /// before to tell which came first.
    Unknown,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Policy => "policy",
            Self::Simulator => "simulator",
            Self::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Policy, Self::Simulator, Self::Unknown]
            .into_iter()
            .find(|o| o.as_str() == s)
    }
}

/// One event: a fault, where it applies, and the frames it spans. The same fault of the
/// same env and channel over consecutive frames is one event (`first_frame`,
/// `last_frame`, `count`); consumers keep the newest form of each `id`.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Unique within one detector's run (a recording's, a live session's).
    pub id: u64,
    pub kind: EventKind,
    /// The `frame_seq` of the first frame it was seen in (a stall: the frame it stalled
    /// at; a ring or state event: the newest frame when it happened).
    pub first_frame: u64,
    pub last_frame: u64,
    /// Frames it was seen in (a stall or state change: 1; ring faults: occurrences).
    pub count: u64,
    /// When it began, on the monotonic clock of the spec's `*_time_ns` words.
    pub time_ns: u64,
    /// When it was last seen, or ended.
    pub end_time_ns: u64,
    /// Not over yet: a later form of the same id follows.
    pub ongoing: bool,
    pub env: Option<u32>,
    pub channel: Option<ChannelKind>,
    /// The observation or action index of the first value found.
    pub index: Option<u32>,
    /// That value's name in the names region, if it has one.
    pub name: Option<String>,
    /// The first value found (a stall or pause: its length in seconds; a done burst: the
    /// share of envs; a ring loss: bytes lost).
    pub value: Option<f64>,
    /// A stall: the loop's usual pause where it stalled, in seconds (the usual update at
    /// a rollout's end; none where the loop has no pause).
    pub usual: Option<f64>,
    /// Values of the channel with the fault in the first frame.
    pub values: Option<u32>,
    pub origin: Option<Origin>,
    pub ring: Option<String>,
    pub method: Option<String>,
    /// One line for people.
    pub message: String,
}

impl Event {
    /// An event of `kind` found at frame `frame` at `t_ns`, going on, where it applies
    /// still to be said.
    pub fn new(id: u64, kind: EventKind, frame: u64, t_ns: u64) -> Self {
        Self {
            id,
            kind,
            first_frame: frame,
            last_frame: frame,
            count: 1,
            time_ns: t_ns,
            end_time_ns: t_ns,
            ongoing: true,
            env: None,
            channel: None,
            index: None,
            name: None,
            value: None,
            usual: None,
            values: None,
            origin: None,
            ring: None,
            method: None,
            message: String::new(),
        }
    }

    /// `events --json`'s object, also a recording's `/lrbc/events` message: `kind`,
    /// `frame_seq` and `time_ns` always, the rest where it applies. A value that is not
    /// finite is the string `NaN`, `inf` or `-inf` (JSON has no number for them).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("kind".into(), json!(self.kind.as_str()));
        m.insert("frame_seq".into(), json!(self.first_frame));
        m.insert("time_ns".into(), json!(self.time_ns));
        m.insert("first_frame".into(), json!(self.first_frame));
        m.insert("last_frame".into(), json!(self.last_frame));
        m.insert("count".into(), json!(self.count));
        m.insert("end_time_ns".into(), json!(self.end_time_ns));
        m.insert("ongoing".into(), json!(self.ongoing));
        if let Some(e) = self.env {
            m.insert("env".into(), json!(e));
        }
        if let Some(c) = self.channel {
            m.insert("channel".into(), json!(c.as_str()));
        }
        if let Some(i) = self.index {
            m.insert("index".into(), json!(i));
        }
        if let Some(n) = &self.name {
            m.insert("name".into(), json!(n));
        }
        if let Some(v) = self.value {
            m.insert("value".into(), value_json(v));
        }
        if let Some(u) = self.usual {
            m.insert("usual_secs".into(), value_json(u));
        }
        if let Some(v) = self.values {
            m.insert("values".into(), json!(v));
        }
        if let Some(o) = self.origin {
            m.insert("origin".into(), json!(o.as_str()));
        }
        if let Some(r) = &self.ring {
            m.insert("ring".into(), json!(r));
        }
        if let Some(me) = &self.method {
            m.insert("method".into(), json!(me));
        }
        m.insert("message".into(), json!(self.message));
        Value::Object(m)
    }

    /// An event as [`Event::to_json`] writes it; None when `kind`, `frame_seq` or
    /// `time_ns` is missing or not what it should be.
    pub fn from_json(v: &Value) -> Option<Self> {
        let u64_of = |k: &str| v.get(k).and_then(Value::as_u64);
        let str_of = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let kind = EventKind::parse(v.get("kind")?.as_str()?)?;
        let first = u64_of("first_frame").or_else(|| u64_of("frame_seq"))?;
        let time_ns = u64_of("time_ns")?;
        Some(Self {
            id: u64_of("id").unwrap_or(0),
            kind,
            first_frame: first,
            last_frame: u64_of("last_frame").unwrap_or(first),
            count: u64_of("count").unwrap_or(1),
            time_ns,
            end_time_ns: u64_of("end_time_ns").unwrap_or(time_ns),
            ongoing: v.get("ongoing").and_then(Value::as_bool).unwrap_or(false),
            env: u64_of("env").and_then(|e| u32::try_from(e).ok()),
            channel: v
                .get("channel")
                .and_then(Value::as_str)
                .and_then(ChannelKind::parse),
            index: u64_of("index").and_then(|e| u32::try_from(e).ok()),
            name: str_of("name"),
            value: v.get("value").and_then(value_from_json),
            usual: v.get("usual_secs").and_then(value_from_json),
            values: u64_of("values").and_then(|e| u32::try_from(e).ok()),
            origin: v
                .get("origin")
                .and_then(Value::as_str)
                .and_then(Origin::parse),
            ring: str_of("ring"),
            method: str_of("method"),
            message: str_of("message").unwrap_or_default(),
        })
    }

    /// The value as shown: `NaN`, `inf`, `-inf`, or the number.
    pub fn value_text(&self) -> String {
        self.value.map_or_else(String::new, format_value)
    }

    /// The channel and its value's label: `observation pole_angle (obs[1])`.
    pub fn channel_text(&self) -> String {
        let Some(c) = self.channel else {
            return self.ring.clone().unwrap_or_default();
        };
        match (self.index, &self.name) {
            (Some(i), Some(n)) => format!("{} {n} ({}[{i}])", c.as_str(), c.short()),
            (Some(i), None) => format!("{} {}[{i}]", c.as_str(), c.short()),
            _ => c.as_str().to_string(),
        }
    }
}

/// A value as JSON: the number, or `NaN`, `inf`, `-inf`.
fn value_json(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        json!(format_value(v))
    }
}

fn value_from_json(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

/// `NaN`, `inf`, `-inf`, or the shortest form of the number.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "inf".into()
    } else if v == f64::NEG_INFINITY {
        "-inf".into()
    } else {
        format!("{v}")
    }
}

/// The events of a run a consumer keeps, and the figures every view shows beside them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EventTotals {
    /// Events found, per kind, in [`EventKind::ALL`]'s order.
    #[serde(skip)]
    pub by_kind: [u64; 11],
    /// Frames the engine published while attached (a recording: its frames and those
    /// its recorder counted as let pass).
    pub frames_seen: u64,
    /// Frames whose rewards and done and truncated flags were checked.
    pub frames_flags_checked: u64,
    /// Frames whose observations and actions were checked too.
    pub frames_checked: u64,
    pub nan_values: u64,
    pub inf_values: u64,
    pub out_of_range_values: u64,
    /// Envs with at least one bad value since the start.
    pub envs_affected: u32,
}

impl EventTotals {
    pub fn events(&self) -> u64 {
        self.by_kind.iter().sum()
    }

    pub fn of(&self, kind: EventKind) -> u64 {
        self.by_kind.get(kind.position()).copied().unwrap_or(0)
    }

    /// `checked 18,210 of 19,315 frames`.
    pub fn checked_text(&self) -> String {
        format!(
            "checked {} of {} frames",
            thousands(self.frames_checked),
            thousands(self.frames_seen.max(self.frames_checked))
        )
    }
}
