//! Command-ring traffic: watches the rings (never consuming), decodes every entry
//! (FlatBuffers envelopes on LRBC rings, JSON on luckyrobots rings), pairs requests
//! with responses by correlation id, and counts everything: entries, bytes, losses,
//! malformed entries, unanswered requests, items of streams subscribed before the tap
//! started, and orphan responses.

//!
//! `follower` holds [`Traffic`], which does the watching; `decode` the
//! [`EntryDecoder`], which decodes each entry and pairs it, for a live ring as for a
//! recording's entries (the replay's player); `store` the bounded list a window keeps
//! of it ([`TrafficStore`], filled by [`TrafficStore::apply`]); `tap` the thread that
//! fills one ([`TrafficTap`]).

mod decode;
mod reader;
mod store;
mod tap;

pub use decode::{DecodedEntry, EntryDecoder, MalformedEntry, RingEntry, decode_entry};
pub use reader::Traffic;
pub use store::{StreamedImage, TrafficLimits, TrafficRow, TrafficStore};
pub use tap::{OnTraffic, TrafficTap};

use serde_json::{Value, json};

use lrbc::layout::RegionKind;
use lrbc::rings::LuckyEntryHeader;
use lrbc::rpc::DecodedEnvelope;

/// How long a ring reader naps between polls: not at all right after entries came (a
/// burst is drained at once), then doubling from [`PollPace::MIN`] while the rings
/// stay quiet, up to [`PollPace::MAX`] ([`PollPace::BUSY_MAX`] while the machine has
/// no spare CPU): few wakeups of a busy machine while little happens. At the longest
/// nap, a 512 KiB ring is lapped only by more than 250 MB/s (25 MB/s while busy).
#[derive(Debug)]
pub struct PollPace {
    nap: std::time::Duration,
    longest: std::time::Duration,
}

impl Default for PollPace {
    fn default() -> Self {
        Self {
            nap: Self::MIN,
            longest: Self::MAX,
        }
    }
}

impl PollPace {
    pub const MIN: std::time::Duration = std::time::Duration::from_micros(100);
    pub const MAX: std::time::Duration = std::time::Duration::from_millis(2);
    pub const BUSY_MAX: std::time::Duration = std::time::Duration::from_millis(20);

    /// Whether the machine has no spare CPU: quiet naps then grow up to
    /// [`PollPace::BUSY_MAX`].
    pub fn set_busy(&mut self, busy: bool) {
        self.longest = if busy { Self::BUSY_MAX } else { Self::MAX };
        self.nap = self.nap.min(self.longest);
    }

    /// The nap after a poll that found entries or not (zero: poll again at once).
    pub fn after_poll(&mut self, had_events: bool) -> std::time::Duration {
        if had_events {
            self.nap = Self::MIN;
            return std::time::Duration::ZERO;
        }
        let nap = self.nap;
        self.nap = (nap * 2).min(self.longest);
        nap
    }
}

/// Which rings to read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RingSelection {
    /// cmd_c2s and cmd_s2c.
    Cmd,
    /// ctl_c2s and ctl_s2c.
    Ctl,
    /// Every ring present.
    #[default]
    All,
}

impl RingSelection {
    pub fn includes(self, kind: RegionKind) -> bool {
        match self {
            Self::Cmd => matches!(kind, RegionKind::CmdC2s | RegionKind::CmdS2c),
            Self::Ctl => matches!(kind, RegionKind::CtlC2s | RegionKind::CtlS2c),
            Self::All => true,
        }
    }
}

/// What an entry decoded to.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded {
    Envelope(DecodedEnvelope),
    /// A luckyrobots entry: its JSON payload.
    Json(Value),
}

/// How a record relates to its partner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pairing {
    /// A request not (yet) answered.
    Pending,
    /// A request whose response was seen.
    Answered,
    /// A request flagged unanswered after the timeout.
    Unanswered,
    /// A response matched to its request.
    Response,
    /// An item of a stream whose request was seen.
    StreamItem,
    /// An item of a stream whose request was not seen: subscribed before the tap started
    /// (or, rarely, a subscription the tap lost to lapping). Not an error.
    SubscribedBeforeAttach,
    /// A response that no request seen explains.
    Orphan,
}

impl Pairing {
    /// In words, for the window and the CLI.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Pending => "waiting for its response",
            Self::Answered => "answered",
            Self::Unanswered => "unanswered",
            Self::Response => "response to a request",
            Self::StreamItem => "stream item",
            Self::SubscribedBeforeAttach => "stream item, subscribed before attach",
            Self::Orphan => "orphan: a response to no request seen",
        }
    }
}

/// One decoded ring entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Sequence number among records (stable id for the UI).
    pub index: u64,
    /// When the inspector read it (monotonic ns).
    pub seen_ns: u64,
    pub ring: RegionKind,
    /// Free-running ring position.
    pub position: u64,
    pub payload: Vec<u8>,
    pub lucky: Option<LuckyEntryHeader>,
    pub decoded: Decoded,
    pub correlation_id: u64,
    pub method: String,
    pub error: Option<String>,
    pub is_request: bool,
    /// For responses: request to response.
    pub latency_ns: Option<u64>,
    /// The index of the paired record (a response's request, a request's response).
    pub partner: Option<u64>,
    pub pairing: Pairing,
}

impl Record {
    /// Bytes the record holds on the heap, its box included.
    pub fn heap_bytes(&self) -> usize {
        use crate::memory::{heap, vec_bytes};
        let decoded = match &self.decoded {
            Decoded::Envelope(d) => {
                vec_bytes(&d.tree.nodes) + d.error.as_ref().map_or(0, |e| heap(e.capacity()))
            }
            Decoded::Json(v) => json_bytes(v),
        };
        heap(size_of::<Self>())
            + vec_bytes(&self.payload)
            + heap(self.method.capacity())
            + self.error.as_ref().map_or(0, |e| heap(e.capacity()))
            + decoded
    }

    /// Gives back the spare capacity of its vectors (before it is kept for long).
    pub fn shrink(&mut self) {
        self.payload.shrink_to_fit();
        if let Decoded::Envelope(d) = &mut self.decoded {
            d.tree.nodes.shrink_to_fit();
        }
    }

    /// The entry's decoded fields as JSON.
    pub fn fields_json(&self) -> Value {
        match &self.decoded {
            Decoded::Envelope(d) => d.tree.to_json(&self.payload),
            Decoded::Json(v) => v.clone(),
        }
    }

    /// The sender's clock (`sent_ns`), if it set one.
    pub fn sent_ns(&self) -> Option<u64> {
        match &self.decoded {
            Decoded::Envelope(d) if d.sent_ns != 0 => Some(d.sent_ns),
            _ => None,
        }
    }

    /// `traffic --json`'s object for this entry.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "ring": self.ring.as_str(),
            "position": self.position,
            "correlation_id": self.correlation_id,
            "method": self.method,
            "size": self.payload.len(),
            "error": self.error,
            "latency_ns": self.latency_ns,
            "fields": self.fields_json(),
        });
        let flag = match self.pairing {
            Pairing::Orphan => Some("orphan"),
            Pairing::SubscribedBeforeAttach => Some("subscribed_before_attach"),
            _ => None,
        };
        if let Some(flag) = flag
            && let Some(map) = v.as_object_mut()
        {
            map.insert(flag.into(), Value::Bool(true));
        }
        v
    }
}

/// Something to show.
#[derive(Clone, Debug, PartialEq)]
pub enum TrafficEvent {
    Record(Box<Record>),
    /// A response arrived for an earlier request: update that request's row.
    Answered {
        request: u64,
        response: u64,
    },
    Lost {
        ring: RegionKind,
        lost_bytes: u64,
        lost_entries: Option<u64>,
    },
    Malformed {
        ring: RegionKind,
        position: u64,
        error: String,
        raw: Vec<u8>,
    },
    Unanswered {
        ring: RegionKind,
        request: u64,
        correlation_id: u64,
        method: String,
        waited_ns: u64,
    },
}

impl TrafficEvent {
    /// `traffic --json`'s object; `None` for UI-only events.
    pub fn to_json(&self) -> Option<Value> {
        Some(match self {
            Self::Record(r) => r.to_json(),
            Self::Answered { .. } => return None,
            Self::Lost {
                ring,
                lost_bytes,
                lost_entries,
            } => {
                json!({"ring": ring.as_str(), "lost_bytes": lost_bytes, "lost_entries": lost_entries})
            }
            Self::Malformed {
                ring, error, raw, ..
            } => json!({
                "ring": ring.as_str(),
                "error": error,
                "raw_hex": lrbc::layout::fields::hex_string(raw),
            }),
            Self::Unanswered {
                ring,
                correlation_id,
                method,
                waited_ns,
                ..
            } => json!({
                "ring": ring.as_str(),
                "correlation_id": correlation_id,
                "method": method,
                "unanswered_after_ns": waited_ns,
            }),
        })
    }
}

/// Totals of one ring since the traffic tap started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RingTotals {
    pub entries: u64,
    pub bytes: u64,
    pub lost_bytes: u64,
    pub lost_entries: u64,
    pub loss_events: u64,
    /// Ring-level and decode-level malformed entries.
    pub malformed: u64,
    pub unanswered: u64,
    /// Responses that no request seen explains.
    pub orphans: u64,
    /// Items of streams subscribed before the tap started (not orphans).
    pub subscribed_before_attach: u64,
}

/// Heap bytes of a JSON value (its children's; the value itself lives in its parent).
fn json_bytes(v: &Value) -> usize {
    use crate::memory::heap;
    match v {
        Value::String(s) => heap(s.capacity()),
        Value::Array(a) => {
            heap(a.capacity() * size_of::<Value>()) + a.iter().map(json_bytes).sum::<usize>()
        }
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| heap(k.capacity()) + size_of::<Value>() + 2 * 8 + json_bytes(v))
            .sum(),
        _ => 0,
    }
}

/// The luckyrobots method ids (spec 8).
pub fn lucky_method_name(id: u32) -> String {
    match id {
        1 => "ResetAgent".into(),
        2 => "SetSimulationMode".into(),
        other => format!("method {other}"),
    }
}

#[cfg(test)]
mod tests;
