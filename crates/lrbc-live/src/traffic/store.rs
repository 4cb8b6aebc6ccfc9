//! What a traffic tap keeps: a bounded list of rows ([`TrafficStore`]) and the newest
//! frame of each image stream, within [`TrafficLimits`].

use std::collections::VecDeque;
use std::sync::Arc;

use super::{Pairing, Record, RingTotals, TrafficEvent};
use lrbc::layout::RegionKind;

/// A row of the traffic list: a record, or a loss, malformed entry or unanswered
/// request.
#[derive(Clone, Debug)]
pub enum TrafficRow {
    Record(Box<Record>),
    Lost {
        seen_ns: u64,
        ring: RegionKind,
        lost_bytes: u64,
        lost_entries: Option<u64>,
    },
    Malformed {
        seen_ns: u64,
        ring: RegionKind,
        position: u64,
        error: String,
        raw: Vec<u8>,
    },
    Unanswered {
        seen_ns: u64,
        ring: RegionKind,
        correlation_id: u64,
        method: String,
        waited_ns: u64,
    },
}

impl TrafficRow {
    pub fn seen_ns(&self) -> u64 {
        match self {
            Self::Record(r) => r.seen_ns,
            Self::Lost { seen_ns, .. }
            | Self::Malformed { seen_ns, .. }
            | Self::Unanswered { seen_ns, .. } => *seen_ns,
        }
    }

    /// Bytes the row holds on the heap (its slot in the list not included).
    pub fn heap_bytes(&self) -> usize {
        use crate::memory::heap;
        match self {
            Self::Record(r) => r.heap_bytes(),
            Self::Malformed { raw, error, .. } => {
                crate::memory::vec_bytes(raw) + heap(error.capacity())
            }
            Self::Unanswered { method, .. } => heap(method.capacity()),
            Self::Lost { .. } => 0,
        }
    }
}

/// What the traffic tap has collected.
#[derive(Debug, Default)]
pub struct TrafficStore {
    pub rows: VecDeque<TrafficRow>,
    /// The newest image frame of each stream seen in traffic (camera, viewport).
    pub streams: std::collections::BTreeMap<String, StreamedImage>,
    /// Absolute index of `rows[0]` (rows dropped from the front so far).
    pub first_index: u64,
    pub totals: Vec<(RegionKind, RingTotals)>,
    /// Heap bytes of the rows (their slots in `rows` not included).
    bytes_held: usize,
    /// Bytes of the streams' newest frames.
    stream_bytes: usize,
    /// Rows let go to stay within the limits.
    pub rows_dropped: u64,
    /// Streamed frames not kept to stay within the limits.
    pub frames_not_kept: u64,
    pub error: Option<String>,
}

impl TrafficStore {
    /// Bytes of the list (rows and their slots) and of the streamed frames.
    pub fn memory(&self) -> (usize, usize) {
        let slots = crate::memory::heap(self.rows.capacity() * size_of::<TrafficRow>());
        (self.bytes_held + slots, self.stream_bytes)
    }

    /// Shows an event of an [`EntryDecoder`](super::EntryDecoder) seen at `now_ns`: a
    /// record as a row (a streamed image frame also as its stream's newest frame), a
    /// response's request marked answered, a request flagged unanswered marked so and
    /// the flag as a row, a loss or malformed entry as a row; within `limits`.
    pub fn apply(&mut self, event: TrafficEvent, now_ns: u64, limits: TrafficLimits) {
        let row = match event {
            TrafficEvent::Record(mut r) => {
                if r.method.ends_with("Frame")
                    && let Some(source) = lrbc::rpc::image::image_source(&r.payload)
                {
                    self.keep_frame(source, r.index, &r.payload, limits);
                }
                r.shrink();
                TrafficRow::Record(r)
            }
            TrafficEvent::Answered { request, response } => {
                if let Some(r) = self.record_mut(request) {
                    r.partner = Some(response);
                    r.pairing = Pairing::Answered;
                }
                return;
            }
            TrafficEvent::Lost {
                ring,
                lost_bytes,
                lost_entries,
            } => TrafficRow::Lost {
                seen_ns: now_ns,
                ring,
                lost_bytes,
                lost_entries,
            },
            TrafficEvent::Malformed {
                ring,
                position,
                error,
                raw,
            } => TrafficRow::Malformed {
                seen_ns: now_ns,
                ring,
                position,
                error,
                raw,
            },
            TrafficEvent::Unanswered {
                ring,
                correlation_id,
                method,
                waited_ns,
                request,
            } => {
                if let Some(r) = self.record_mut(request) {
                    r.pairing = Pairing::Unanswered;
                }
                TrafficRow::Unanswered {
                    seen_ns: now_ns,
                    ring,
                    correlation_id,
                    method,
                    waited_ns,
                }
            }
        };
        self.push_row(row, limits);
    }

    /// The record with this record index, if the list still holds it.
    fn record_mut(&mut self, record_index: u64) -> Option<&mut Record> {
        let i = self.find_record(record_index)? - self.first_index;
        match self.rows.get_mut(usize::try_from(i).ok()?) {
            Some(TrafficRow::Record(r)) => Some(r),
            _ => None,
        }
    }

    /// Appends a row, then lets the oldest go while the list is over its limits.
    pub(super) fn push_row(&mut self, row: TrafficRow, limits: TrafficLimits) {
        self.bytes_held += row.heap_bytes();
        self.rows.push_back(row);
        while self.rows.len() > limits.max_rows || self.memory().0 > limits.max_bytes {
            // A list cut short (by a smaller budget) gives its spare slots back first.
            let keep = self.rows.len().max(64);
            if self.rows.capacity() > 2 * keep {
                self.rows.shrink_to(keep);
                continue;
            }
            let Some(old) = self.rows.pop_front() else {
                break;
            };
            self.bytes_held = self.bytes_held.saturating_sub(old.heap_bytes());
            self.first_index += 1;
            self.rows_dropped += 1;
        }
    }

    /// Keeps `envelope` as the newest frame of `source`, within the limit for streamed
    /// frames: other streams' frames go first, the least recently updated first; a frame
    /// over the limit alone is not kept (and counted).
    pub(super) fn keep_frame(
        &mut self,
        source: String,
        record_index: u64,
        envelope: &[u8],
        limits: TrafficLimits,
    ) {
        if self.streams.len() >= MAX_STREAMS && !self.streams.contains_key(&source) {
            return;
        }
        let cost = crate::memory::heap(envelope.len());
        let s = self
            .streams
            .entry(source.clone())
            .or_insert_with(|| StreamedImage {
                record_index,
                frames: 0,
                envelope: Arc::from(&[][..]),
                not_kept: None,
            });
        s.record_index = record_index;
        s.frames += 1;
        self.stream_bytes = self
            .stream_bytes
            .saturating_sub(crate::memory::heap(s.envelope.len()));
        s.envelope = Arc::from(&[][..]);
        if cost > limits.max_stream_bytes {
            s.not_kept = Some(envelope.len());
            self.frames_not_kept += 1;
            return;
        }
        while self.stream_bytes + cost > limits.max_stream_bytes {
            let oldest = self
                .streams
                .iter()
                .filter(|(k, v)| **k != source && !v.envelope.is_empty())
                .min_by_key(|(_, v)| v.record_index)
                .map(|(k, _)| k.clone());
            let Some(k) = oldest else { break };
            if let Some(v) = self.streams.get_mut(&k) {
                self.stream_bytes = self
                    .stream_bytes
                    .saturating_sub(crate::memory::heap(v.envelope.len()));
                v.not_kept = Some(v.envelope.len());
                v.envelope = Arc::from(&[][..]);
                self.frames_not_kept += 1;
            }
        }
        if let Some(s) = self.streams.get_mut(&source) {
            s.envelope = Arc::from(envelope);
            s.not_kept = None;
            self.stream_bytes += cost;
        }
    }

    pub fn total_rows(&self) -> u64 {
        self.first_index + self.rows.len() as u64
    }

    pub fn get(&self, index: u64) -> Option<&TrafficRow> {
        index
            .checked_sub(self.first_index)
            .and_then(|i| self.rows.get(usize::try_from(i).ok()?))
    }

    /// The row of the record with this record index.
    pub fn find_record(&self, record_index: u64) -> Option<u64> {
        // Records are in order: binary search among them.
        let pos = self.rows.partition_point(|r| match r {
            TrafficRow::Record(rec) => rec.index < record_index,
            _ => true,
        });
        match self.rows.get(pos) {
            Some(TrafficRow::Record(rec)) if rec.index == record_index => {
                Some(self.first_index + pos as u64)
            }
            _ => self
                .rows
                .iter()
                .position(|r| matches!(r, TrafficRow::Record(rec) if rec.index == record_index))
                .map(|p| self.first_index + p as u64),
        }
    }
}

/// The image streams kept (their newest frame each); frames of further streams stay in
/// the traffic list only.
const MAX_STREAMS: usize = 64;

/// The newest frame of one image stream seen in the command rings.
#[derive(Clone, Debug)]
pub struct StreamedImage {
    /// The record that carried it.
    pub record_index: u64,
    /// Frames of this stream seen since attach.
    pub frames: u64,
    /// The whole envelope (decoded by the window when it shows the image); empty when
    /// it was not kept.
    pub envelope: Arc<[u8]>,
    /// The size of the newest frame, when it was not kept to stay within the memory
    /// budget.
    pub not_kept: Option<usize>,
}

/// Limits of what the traffic list keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrafficLimits {
    pub max_rows: usize,
    /// Bytes of the rows, decoded trees included, and of their slots in the list.
    pub max_bytes: usize,
    /// Bytes of the streams' newest frames.
    pub max_stream_bytes: usize,
}

impl Default for TrafficLimits {
    fn default() -> Self {
        Self::of(crate::memory::MemoryBudget::default())
    }
}

impl TrafficLimits {
    /// The traffic list's and the streamed frames' shares of a budget.
    pub fn of(budget: crate::memory::MemoryBudget) -> Self {
        Self {
            max_rows: 50_000,
            max_bytes: budget.traffic(),
            max_stream_bytes: budget.streamed_frames(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::{Decoded, Pairing};
    use lrbc::rpc::{self, fb};

    fn record(index: u64, payload: Vec<u8>) -> Box<Record> {
        let decoded = rpc::decode_envelope(&payload).unwrap();
        Box::new(Record {
            index,
            seen_ns: index,
            ring: RegionKind::CmdC2s,
            position: 0,
            method: decoded.method_label(),
            decoded: Decoded::Envelope(decoded),
            payload,
            lucky: None,
            correlation_id: index,
            error: None,
            is_request: true,
            latency_ns: None,
            partner: None,
            pairing: Pairing::Pending,
        })
    }

    fn telemetry(n: usize) -> Vec<u8> {
        rpc::build_envelope(1, fb::MethodId::TelemetryFrame, None, 5, |fbb| {
            let q = fbb.create_vector(&vec![0.5f32; n]);
            let f = fb::TelemetryFrame::create(
                fbb,
                &fb::TelemetryFrameArgs {
                    observation_qpos: Some(q),
                    ..Default::default()
                },
            );
            Some((fb::Payload::TelemetryFrame, f.as_union_value()))
        })
    }

    #[test]
    fn the_list_counts_real_bytes_and_keeps_within_them() {
        let limits = TrafficLimits {
            max_rows: 1_000_000,
            max_bytes: 1 << 20,
            max_stream_bytes: 1 << 20,
        };
        let mut store = TrafficStore::default();
        for i in 0..20_000 {
            let mut r = record(i, telemetry(1 + (i as usize % 40)));
            r.shrink();
            // What the record holds is at least its payload and its decoded nodes.
            let Decoded::Envelope(d) = &r.decoded else {
                unreachable!()
            };
            assert!(
                r.heap_bytes()
                    >= r.payload.len() + d.tree.nodes.len() * size_of::<rpc::tree::Node>()
            );
            store.push_row(TrafficRow::Record(r), limits);
            assert!(store.memory().0 <= limits.max_bytes);
        }
        assert!(store.rows_dropped > 0);
        let held: usize = store.rows.iter().map(TrafficRow::heap_bytes).sum();
        assert_eq!(held, store.bytes_held, "bytes are tracked exactly");
        // A smaller budget lets rows go and gives their slots back.
        let small = TrafficLimits {
            max_bytes: 64 << 10,
            ..limits
        };
        store.push_row(TrafficRow::Record(record(20_000, telemetry(4))), small);
        assert!(store.memory().0 <= small.max_bytes);
    }

    #[test]
    fn streamed_frames_keep_within_their_limit_oldest_stream_first() {
        let limits = TrafficLimits {
            max_rows: 100,
            max_bytes: 1 << 20,
            max_stream_bytes: 10_000,
        };
        let mut store = TrafficStore::default();
        store.keep_frame("a".into(), 1, &[1; 4000], limits);
        store.keep_frame("b".into(), 2, &[2; 4000], limits);
        assert_eq!(store.memory().1, 2 * crate::memory::heap(4000));
        // A third stream: the least recently updated frame goes.
        store.keep_frame("c".into(), 3, &[3; 4000], limits);
        assert!(store.memory().1 <= limits.max_stream_bytes);
        assert!(store.streams["a"].envelope.is_empty());
        assert_eq!(store.streams["a"].not_kept, Some(4000));
        assert_eq!(store.streams["c"].envelope.len(), 4000);
        // A frame over the limit alone is not kept, and says so.
        store.keep_frame("d".into(), 4, &[4; 20_000], limits);
        assert!(store.streams["d"].envelope.is_empty());
        assert_eq!(store.streams["d"].not_kept, Some(20_000));
        assert_eq!(store.streams["d"].frames, 1);
        assert!(store.frames_not_kept >= 2);
        assert!(store.memory().1 <= limits.max_stream_bytes);
    }
}
