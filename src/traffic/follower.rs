//! [`Traffic`]: follows the selected rings of one segment, decodes their entries, pairs
//! requests with responses and counts what goes wrong.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use super::{Decoded, Pairing, Record, RingSelection, Totals, TrafficEvent, lucky_method_name};
use crate::attach::Attached;
use crate::layout::{RegionKind, RingFormat};
use crate::rings::{AnyWatcher, LuckyEntryHeader, RingRead, WatchEvent, is_request_ring};
use crate::rpc;

#[derive(Clone, Debug)]
pub(super) struct PendingRequest {
    index: u64,
    seen_ns: u64,
    sent_ns: Option<u64>,
    method: String,
    ring: RegionKind,
    flagged: bool,
}

/// The ring pair a ring belongs to.
fn pair_of(kind: RegionKind) -> u8 {
    match kind {
        RegionKind::CtlC2s | RegionKind::CtlS2c => 1,
        _ => 0,
    }
}

/// Checkpoints kept per response ring (one per poll while requests wait to be
/// confirmed, which lasts at most `rings::confirm::GIVE_UP_NS`).
const MAX_CHECKPOINTS: usize = 1024;

/// An entry as a watcher kept it.
struct Copied {
    ring: RegionKind,
    format: RingFormat,
    position: u64,
    payload: Vec<u8>,
    lucky: Option<LuckyEntryHeader>,
    at_risk: bool,
}

/// Requests waiting for their response are kept at most this many per tap.
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

/// Follows the selected rings of one segment.
#[derive(Debug)]
pub struct Traffic {
    watchers: Vec<AnyWatcher>,
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
    /// Per response ring: (its producer's position, the request ring's) loaded
    /// together, oldest first; see `poll`.
    checkpoints: Vec<VecDeque<(u64, Option<u64>)>>,
    unanswered: HashMap<RegionKind, u64>,
    orphans: HashMap<RegionKind, u64>,
    subscribed_before_attach: HashMap<RegionKind, u64>,
    /// Requests unanswered for this long are flagged.
    pub timeout_ns: u64,
    scratch: Vec<WatchEvent>,
}

impl Traffic {
    /// Starts following at each ring's `read_pos` (spec 4.1).
    pub fn new(a: &Attached, selection: RingSelection) -> Self {
        let watchers: Vec<AnyWatcher> = a
            .geometry
            .rings
            .iter()
            .filter(|r| selection.includes(r.kind))
            .map(|r| AnyWatcher::new(&a.segment, *r))
            .collect();
        let checkpoints = watchers.iter().map(|_| VecDeque::new()).collect();
        Self {
            checkpoints,
            watchers,
            pending: HashMap::new(),
            pending_order: KeyQueue::default(),
            expiry: KeyQueue::default(),
            streams: HashMap::new(),
            streams_order: KeyQueue::default(),
            next_index: 0,
            decode_malformed: HashMap::new(),
            verify_lost: HashMap::new(),
            unanswered: HashMap::new(),
            orphans: HashMap::new(),
            subscribed_before_attach: HashMap::new(),
            timeout_ns: 5_000_000_000,
            scratch: Vec::new(),
        }
    }

    /// The watcher of the request ring paired with a response ring.
    fn request_of(&self, response: RegionKind) -> Option<usize> {
        let pair = pair_of(response);
        self.watchers
            .iter()
            .position(|w| is_request_ring(w.ring().kind) && pair_of(w.ring().kind) == pair)
    }

    pub fn rings(&self) -> Vec<RegionKind> {
        self.watchers.iter().map(|w| w.ring().kind).collect()
    }

    /// Reads everything published since the last poll, at most `max_per_ring` entries
    /// of each ring.
    pub fn poll(
        &mut self,
        mem: &impl RingRead,
        now_ns: u64,
        max_per_ring: usize,
        out: &mut Vec<TrafficEvent>,
    ) {
        // A response is published after its request. For each response ring, load its
        // producer's position E, then the position W of the request ring of its pair:
        // every response before E answers a request published before W. Responses up
        // to E are read once every request before W has been reported (read, or counted
        // lost), so no response is shown before its request, even while the newest
        // requests wait to be confirmed (`rings::confirm`).
        for i in 0..self.watchers.len() {
            let kind = self.watchers[i].ring().kind;
            if is_request_ring(kind) {
                continue;
            }
            let e = self.watchers[i].end_position(mem);
            let w = self
                .request_of(kind)
                .map(|j| self.watchers[j].end_position(mem));
            let queue = &mut self.checkpoints[i];
            if queue.len() < MAX_CHECKPOINTS {
                queue.push_back((e, w));
            }
        }
        let mut order: Vec<usize> = (0..self.watchers.len()).collect();
        order.sort_by_key(|&i| !is_request_ring(self.watchers[i].ring().kind));
        for i in order {
            let mut events = std::mem::take(&mut self.scratch);
            events.clear();
            let ring = self.watchers[i].ring();
            if is_request_ring(ring.kind) {
                self.watchers[i].poll(mem, &mut events, max_per_ring, now_ns);
            } else {
                let request = self.request_of(ring.kind);
                let mut end = None;
                while let Some(&(e, w)) = self.checkpoints[i].front() {
                    let ready = match (request, w) {
                        (Some(j), Some(w)) => self.watchers[j].settled_past(w),
                        _ => true,
                    };
                    if !ready {
                        break;
                    }
                    end = Some(e);
                    self.checkpoints[i].pop_front();
                }
                if let Some(end) = end {
                    self.watchers[i].poll_to(mem, &mut events, max_per_ring, end, now_ns);
                }
            }
            for e in events.drain(..) {
                match e {
                    WatchEvent::Entry {
                        position,
                        payload,
                        lucky,
                        at_risk,
                    } => self.entry(
                        Copied {
                            ring: ring.kind,
                            format: ring.format,
                            position,
                            payload,
                            lucky,
                            at_risk,
                        },
                        now_ns,
                        out,
                    ),
                    WatchEvent::Lost {
                        lost_bytes,
                        lost_entries,
                    } => out.push(TrafficEvent::Lost {
                        ring: ring.kind,
                        lost_bytes,
                        lost_entries,
                    }),
                    WatchEvent::Malformed {
                        position,
                        error,
                        raw,
                    } => out.push(TrafficEvent::Malformed {
                        ring: ring.kind,
                        position,
                        error,
                        raw,
                    }),
                }
            }
            self.scratch = events;
        }
        self.expire(now_ns, out);
    }

    fn entry(&mut self, copied: Copied, now_ns: u64, out: &mut Vec<TrafficEvent>) {
        let Copied {
            ring,
            format,
            position,
            payload,
            lucky,
            at_risk,
        } = copied;
        // The entry's bytes in the ring, should it be counted lost.
        let ring_bytes = crate::rings::align8(
            payload.len() as u64
                + match format {
                    RingFormat::Lrbc => 4,
                    RingFormat::Lucky => crate::rings::lucky::ENTRY_HEADER_BYTES,
                },
        );
        let at_risk = at_risk.then_some(ring_bytes);
        let is_request = is_request_ring(ring);
        let (decoded, correlation_id, method_id, method, error) = match format {
            RingFormat::Lrbc => match rpc::decode_envelope(&payload) {
                Ok(d) => {
                    let (c, m, label, err) = (
                        d.correlation_id,
                        d.method,
                        d.method_label(),
                        d.error.clone(),
                    );
                    (Decoded::Envelope(d), c, Some(m), label, err)
                }
                Err(e) => {
                    self.malformed(ring, position, e.to_string(), payload, at_risk, out);
                    return;
                }
            },
            RingFormat::Lucky => {
                let header = lucky.unwrap_or(LuckyEntryHeader {
                    correlation_id: 0,
                    method_or_status: 0,
                    payload_length: 0,
                });
                let value = if payload.is_empty() {
                    Value::Null
                } else {
                    match serde_json::from_slice::<Value>(&payload) {
                        Ok(v) => v,
                        Err(e) => {
                            self.malformed(
                                ring,
                                position,
                                format!("payload is not JSON: {e}"),
                                payload,
                                at_risk,
                                out,
                            );
                            return;
                        }
                    }
                };
                let (method, error) = if is_request {
                    (lucky_method_name(header.method_or_status), None)
                } else {
                    let error = (header.method_or_status != 0).then(|| {
                        value.get("error").and_then(Value::as_str).map_or_else(
                            || format!("status {}", header.method_or_status),
                            str::to_string,
                        )
                    });
                    (String::new(), error)
                };
                (
                    Decoded::Json(value),
                    u64::from(header.correlation_id),
                    None,
                    method,
                    error,
                )
            }
        };
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
        raw.truncate(crate::rings::MAX_RAW_BYTES);
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

    /// Flags the requests that waited longer than the timeout, oldest first; stream
    /// subscriptions are never flagged.
    fn expire(&mut self, now_ns: u64, out: &mut Vec<TrafficEvent>) {
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
    /// their queues. Bounded however long the tap runs.
    pub fn bookkeeping_len(&self) -> usize {
        self.pending.len()
            + self.streams.len()
            + self.pending_order.len()
            + self.expiry.len()
            + self.streams_order.len()
    }

    /// Totals per ring.
    pub fn totals(&self) -> Vec<(RegionKind, Totals)> {
        self.watchers
            .iter()
            .map(|w| {
                let kind = w.ring().kind;
                let s = w.stats();
                let get = |m: &HashMap<RegionKind, u64>| m.get(&kind).copied().unwrap_or(0);
                let (vl_bytes, vl_entries) = self.verify_lost.get(&kind).copied().unwrap_or((0, 0));
                (
                    kind,
                    Totals {
                        entries: s.entries.saturating_sub(vl_entries),
                        bytes: s.bytes.saturating_sub(vl_bytes),
                        lost_bytes: s.lost_bytes + vl_bytes,
                        lost_entries: s.lost_entries + vl_entries,
                        loss_events: s.loss_events + vl_entries,
                        malformed: s.malformed + get(&self.decode_malformed),
                        unanswered: get(&self.unanswered),
                        orphans: get(&self.orphans),
                        subscribed_before_attach: get(&self.subscribed_before_attach),
                    },
                )
            })
            .collect()
    }

    /// Everything published so far has been reported (for one-shot listings).
    pub fn caught_up(&self, mem: &impl RingRead) -> bool {
        self.watchers
            .iter()
            .all(|w| w.held() == 0 && w.cursor() == w.end_position(mem))
            && self.checkpoints.iter().all(VecDeque::is_empty)
    }
}
