//! [`EntryDecoder`]: what becomes of one ring entry, wherever it was read (a live ring
//! by [`super::Traffic`], or a recording by the replay's player): its decoding into a
//! [`Record`] (or a malformed entry), the pairing of requests with responses, the
//! requests flagged unanswered, and the counts of what went wrong.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use super::{Decoded, Pairing, Record, RingTotals, TrafficEvent, lucky_method_name};
use lrbc::layout::{RegionKind, RingFormat};
use lrbc::rings::{LuckyEntryHeader, is_request_ring};
use lrbc::rpc;

/// One ring entry as read: live from a ring, or from a recording (which keeps the
/// payload and the time it was seen, but not its position nor a luckyrobots entry's
/// header).
#[derive(Clone, Debug)]
pub struct RingEntry {
    pub ring: RegionKind,
    pub format: RingFormat,
    /// Free-running ring position (0 when not known).
    pub position: u64,
    pub payload: Vec<u8>,
    /// A luckyrobots entry's header (correlation id, method or status); `None` when not
    /// known (a recording).
    pub lucky: Option<LuckyEntryHeader>,
    /// Kept while the producer was within one margin of lapping it: if it does not
    /// decode, it was overwritten (lost), not malformed.
    pub at_risk: bool,
}

/// An entry's payload decoded, before pairing.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedEntry {
    pub decoded: Decoded,
    pub correlation_id: u64,
    /// The envelope's method number (LRBC rings).
    pub method_id: Option<u16>,
    pub method: String,
    pub error: Option<String>,
}

/// Why a ring entry's payload does not decode, as one line.
#[derive(Debug, thiserror::Error)]
pub enum MalformedEntry {
    #[error(transparent)]
    Envelope(#[from] rpc::EnvelopeError),
    #[error("payload is not JSON: {0}")]
    NotJson(serde_json::Error),
}

/// Decodes an entry's payload as the traffic list shows it: an LRBC ring's FlatBuffers
/// envelope, or a luckyrobots ring's JSON with its entry header. Without the header (a
/// recording keeps only the payload), what the JSON says: the method of a request from
/// the fields spec 8 gives each method, a response's error from its `error` field, and
/// correlation id 0 (so that a response pairs with the latest request of its ring
/// pair). `Err`: why the entry is malformed.
pub fn decode_entry(
    ring: RegionKind,
    format: RingFormat,
    payload: &[u8],
    lucky: Option<LuckyEntryHeader>,
) -> Result<DecodedEntry, MalformedEntry> {
    match format {
        RingFormat::Lrbc => {
            let d = rpc::decode_envelope(payload)?;
            Ok(DecodedEntry {
                correlation_id: d.correlation_id,
                method_id: Some(d.method),
                method: d.method_label(),
                error: d.error.clone(),
                decoded: Decoded::Envelope(d),
            })
        }
        RingFormat::Lucky => {
            let value = if payload.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice::<Value>(payload).map_err(MalformedEntry::NotJson)?
            };
            let error_field = || match value.get("error") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => Some(other.to_string()),
            };
            let is_request = is_request_ring(ring);
            let (method, error) = match (lucky, is_request) {
                (Some(h), true) => (lucky_method_name(h.method_or_status), None),
                (Some(h), false) => (
                    String::new(),
                    (h.method_or_status != 0).then(|| {
                        error_field().unwrap_or_else(|| format!("status {}", h.method_or_status))
                    }),
                ),
                (None, true) => (lucky_method_of(&value).unwrap_or_default(), None),
                (None, false) => (String::new(), error_field()),
            };
            Ok(DecodedEntry {
                decoded: Decoded::Json(value),
                correlation_id: lucky.map_or(0, |h| u64::from(h.correlation_id)),
                method_id: None,
                method,
                error,
            })
        }
    }
}

/// A luckyrobots request's method told by its fields (spec 8), for an entry whose
/// header is not known.
fn lucky_method_of(request: &Value) -> Option<String> {
    let has = |k: &str| request.get(k).is_some();
    let id = if has("agent_name") || has("simulation_contract") {
        1
    } else if has("mode") {
        2
    } else {
        return None;
    };
    Some(lucky_method_name(id))
}

#[derive(Clone, Debug)]
pub(super) struct PendingRequest {
    pub(super) index: u64,
    seen_ns: u64,
    sent_ns: Option<u64>,
    method: String,
    ring: RegionKind,
    flagged: bool,
}

/// The ring pair a ring belongs to.
pub(super) fn pair_of(kind: RegionKind) -> u8 {
    match kind {
        RegionKind::CtlC2s | RegionKind::CtlS2c => 1,
        _ => 0,
    }
}

/// Requests waiting for their response are kept at most this many per decoder.
pub(super) const MAX_PENDING: usize = 65_536;
/// Stream subscriptions remembered (to tell their items from orphans), at most.
const MAX_STREAMS: usize = 4_096;

/// A request's key (ring pair, correlation id).
type Key = (u8, u64);

/// Keys in arrival order, each with the record index it was queued for. An entry whose
/// request has since been answered, replaced or evicted is stale: it is skipped when it
/// reaches the front, and all stale entries are dropped once they outnumber the live
/// ones, so the queue never holds more than about twice what it tracks.
#[derive(Debug, Default)]
struct KeyQueue {
    items: VecDeque<(Key, u64)>,
}

impl KeyQueue {
    fn push(&mut self, key: Key, index: u64, live: usize, is_live: impl Fn(&(Key, u64)) -> bool) {
        self.items.push_back((key, index));
        if self.items.len() > 2 * live + 64 {
            self.items.retain(is_live);
        }
    }

    /// The oldest live entry, after dropping the stale ones in front of it.
    fn front(&mut self, is_live: impl Fn(&(Key, u64)) -> bool) -> Option<(Key, u64)> {
        while let Some(&front) = self.items.front() {
            if is_live(&front) {
                return Some(front);
            }
            self.items.pop_front();
        }
        None
    }

    fn pop_front(&mut self) {
        self.items.pop_front();
    }

    fn len(&self) -> usize {
        self.items.len()
    }
}

/// Decodes ring entries in the order they were read and pairs requests with responses
/// by (ring pair, correlation id). Everything it keeps is bounded.
#[derive(Debug)]
pub struct EntryDecoder {
    pub(super) pending: HashMap<Key, PendingRequest>,
    /// Pending requests, oldest first: the one evicted when `MAX_PENDING` are pending.
    pending_order: KeyQueue,
    /// Pending requests not yet flagged unanswered, oldest first (arrival times grow
    /// along it), so that flagging looks only at those due.
    expiry: KeyQueue,
    /// Stream subscriptions: key to the request's record index.
    streams: HashMap<Key, u64>,
    streams_order: KeyQueue,
    next_index: u64,
    decode_malformed: HashMap<RegionKind, u64>,
    /// Entries kept at risk of lapping that failed verification: (bytes, entries).
    verify_lost: HashMap<RegionKind, (u64, u64)>,
    unanswered: HashMap<RegionKind, u64>,
    orphans: HashMap<RegionKind, u64>,
    subscribed_before_attach: HashMap<RegionKind, u64>,
    /// Requests unanswered for this long are flagged.
    pub timeout_ns: u64,
}

impl Default for EntryDecoder {
    fn default() -> Self {
        Self::starting_at(0)
    }
}

impl EntryDecoder {
    /// A decoder whose first record has index `first_index` (a reader starting over
    /// keeps its records' indexes apart from those it showed before).
    pub fn starting_at(first_index: u64) -> Self {
        Self {
            pending: HashMap::new(),
            pending_order: KeyQueue::default(),
            expiry: KeyQueue::default(),
            streams: HashMap::new(),
            streams_order: KeyQueue::default(),
            next_index: first_index,
            decode_malformed: HashMap::new(),
            verify_lost: HashMap::new(),
            unanswered: HashMap::new(),
            orphans: HashMap::new(),
            subscribed_before_attach: HashMap::new(),
            timeout_ns: 5_000_000_000,
        }
    }

    /// The index the next record gets.
    pub fn next_index(&self) -> u64 {
        self.next_index
    }

    /// Decodes an entry seen at `now_ns` and pairs it: a record (and, for a response to
    /// a request seen, `Answered`), or a malformed entry, or a loss (an entry at risk
    /// that does not decode).
    pub fn entry(&mut self, entry: RingEntry, now_ns: u64, out: &mut Vec<TrafficEvent>) {
        let RingEntry {
            ring,
            format,
            position,
            payload,
            lucky,
            at_risk,
        } = entry;
        let decoded = match decode_entry(ring, format, &payload, lucky) {
            Ok(d) => d,
            Err(error) => {
                // The entry's bytes in the ring, should it be counted lost.
                let ring_bytes = lrbc::rings::align8(
                    payload.len() as u64
                        + match format {
                            RingFormat::Lrbc => 4,
                            RingFormat::Lucky => lrbc::rings::lucky::ENTRY_HEADER_BYTES,
                        },
                );
                self.malformed(
                    ring,
                    position,
                    error.to_string(),
                    payload,
                    at_risk.then_some(ring_bytes),
                    out,
                );
                return;
            }
        };
        let DecodedEntry {
            decoded,
            correlation_id,
            method_id,
            method,
            error,
        } = decoded;
        let is_request = is_request_ring(ring);
        let index = self.next_index;
        self.next_index += 1;
        let mut record = Record {
            index,
            seen_ns: now_ns,
            ring,
            position,
            payload,
            lucky,
            decoded,
            correlation_id,
            method,
            error,
            is_request,
            latency_ns: None,
            partner: None,
            pairing: if is_request {
                Pairing::Pending
            } else {
                Pairing::Orphan
            },
        };
        let key = (pair_of(ring), correlation_id);
        if is_request {
            self.track_request(key, &record, ring, now_ns);
        } else if method_id.is_some_and(rpc::is_stream_item) {
            // A stream item needs no request of its own: with its subscription unseen,
            // the stream was subscribed before the tap started.
            record.pairing = if self.streams.contains_key(&key) {
                Pairing::StreamItem
            } else {
                *self.subscribed_before_attach.entry(ring).or_default() += 1;
                Pairing::SubscribedBeforeAttach
            };
        } else if let Some(req) = self.pending.remove(&key) {
            if record.method.is_empty() {
                record.method = req.method.clone();
            }
            record.pairing = Pairing::Response;
            record.partner = Some(req.index);
            record.latency_ns = Some(match (req.sent_ns, record.sent_ns()) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => now_ns.saturating_sub(req.seen_ns),
            });
            out.push(TrafficEvent::Record(Box::new(record)));
            out.push(TrafficEvent::Answered {
                request: req.index,
                response: index,
            });
            return;
        } else {
            *self.orphans.entry(ring).or_default() += 1;
        }
        out.push(TrafficEvent::Record(Box::new(record)));
    }

    /// An entry that is not a valid payload. Kept while the producer was within one
    /// margin of lapping it (`at_risk`: its bytes in the ring), it may hold bytes of a
    /// newer entry: counted lost (lapping), not malformed.
    fn malformed(
        &mut self,
        ring: RegionKind,
        position: u64,
        error: String,
        mut raw: Vec<u8>,
        at_risk: Option<u64>,
        out: &mut Vec<TrafficEvent>,
    ) {
        if let Some(lost_bytes) = at_risk {
            let t = self.verify_lost.entry(ring).or_default();
            t.0 += lost_bytes;
            t.1 += 1;
            out.push(TrafficEvent::Lost {
                ring,
                lost_bytes,
                lost_entries: Some(1),
            });
            return;
        }
        raw.truncate(lrbc::rings::MAX_RAW_BYTES);
        *self.decode_malformed.entry(ring).or_default() += 1;
        out.push(TrafficEvent::Malformed {
            ring,
            position,
            error,
            raw,
        });
    }

    /// Remembers a request until its response comes, it is flagged and evicted, or a
    /// newer request takes its key. Everything kept is bounded: at most `MAX_PENDING`
    /// requests, `MAX_STREAMS` subscriptions, and queues of about twice those.
    fn track_request(&mut self, key: Key, record: &Record, ring: RegionKind, now_ns: u64) {
        let index = record.index;
        if self.pending.len() >= MAX_PENDING && !self.pending.contains_key(&key) {
            let pending = &self.pending;
            if let Some((old, _)) = self
                .pending_order
                .front(|(k, i)| pending.get(k).is_some_and(|p| p.index == *i))
            {
                self.pending.remove(&old);
                self.pending_order.pop_front();
            }
        }
        if record.method.ends_with("Stream") {
            if self.streams.len() >= MAX_STREAMS && !self.streams.contains_key(&key) {
                let streams = &self.streams;
                if let Some((old, _)) = self.streams_order.front(|(k, i)| streams.get(k) == Some(i))
                {
                    self.streams.remove(&old);
                    self.streams_order.pop_front();
                }
            }
            self.streams.insert(key, index);
            let streams = &self.streams;
            self.streams_order
                .push(key, index, streams.len(), |(k, i)| {
                    streams.get(k) == Some(i)
                });
        }
        self.pending.insert(
            key,
            PendingRequest {
                index,
                seen_ns: now_ns,
                sent_ns: record.sent_ns(),
                method: record.method.clone(),
                ring,
                flagged: false,
            },
        );
        let pending = &self.pending;
        let live = |(k, i): &(Key, u64)| pending.get(k).is_some_and(|p| p.index == *i);
        self.pending_order.push(key, index, pending.len(), live);
        let unflagged =
            |(k, i): &(Key, u64)| pending.get(k).is_some_and(|p| p.index == *i && !p.flagged);
        self.expiry.push(key, index, pending.len(), unflagged);
    }

    /// Flags the requests that waited longer than the timeout as of `now_ns`, oldest
    /// first; stream subscriptions are never flagged.
    pub fn expire(&mut self, now_ns: u64, out: &mut Vec<TrafficEvent>) {
        loop {
            let pending = &self.pending;
            let Some((key, _)) = self
                .expiry
                .front(|(k, i)| pending.get(k).is_some_and(|p| p.index == *i && !p.flagged))
            else {
                break;
            };
            let Some(req) = self.pending.get_mut(&key) else {
                break;
            };
            if now_ns.saturating_sub(req.seen_ns) <= self.timeout_ns {
                break;
            }
            self.expiry.pop_front();
            if self.streams.contains_key(&key) {
                continue;
            }
            req.flagged = true;
            *self.unanswered.entry(req.ring).or_default() += 1;
            out.push(TrafficEvent::Unanswered {
                ring: req.ring,
                request: req.index,
                correlation_id: key.1,
                method: req.method.clone(),
                waited_ns: now_ns.saturating_sub(req.seen_ns),
            });
        }
    }

    /// Entries of the pairing bookkeeping: requests pending, stream subscriptions, and
    /// their queues. Bounded however long it runs.
    pub fn bookkeeping_len(&self) -> usize {
        self.pending.len()
            + self.streams.len()
            + self.pending_order.len()
            + self.expiry.len()
            + self.streams_order.len()
    }

    /// What the decoder counted of one ring: malformed entries, unanswered requests,
    /// orphans and items of streams subscribed before it started (the entries, bytes
    /// and losses are the reader's).
    pub fn totals(&self, kind: RegionKind) -> RingTotals {
        let get = |m: &HashMap<RegionKind, u64>| m.get(&kind).copied().unwrap_or(0);
        RingTotals {
            malformed: get(&self.decode_malformed),
            unanswered: get(&self.unanswered),
            orphans: get(&self.orphans),
            subscribed_before_attach: get(&self.subscribed_before_attach),
            ..RingTotals::default()
        }
    }

    /// Entries at risk of lapping that did not decode, counted lost: (bytes, entries).
    pub(super) fn verify_lost(&self, kind: RegionKind) -> (u64, u64) {
        self.verify_lost.get(&kind).copied().unwrap_or((0, 0))
    }
}
