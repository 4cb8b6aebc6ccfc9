//! [`Traffic`]: reads the selected rings of one segment (never consuming), in an order
//! that shows no response before its request, and hands each entry to its
//! [`EntryDecoder`], which decodes, pairs and counts.

use std::collections::VecDeque;

use super::decode::{EntryDecoder, RingEntry, pair_of};
use super::{RingSelection, RingTotals, TrafficEvent};
use lrbc::attach::Attached;
use lrbc::layout::RegionKind;
use lrbc::rings::{AnyWatcher, RingRead, WatchEvent, is_request_ring};

/// Checkpoints kept per response ring (one per poll while requests wait to be
/// confirmed, which lasts at most `rings::confirm::GIVE_UP_NS`).
const MAX_CHECKPOINTS: usize = 1024;

/// Reads the selected rings of one segment; its [`EntryDecoder`] decodes and pairs
/// what they read.
#[derive(Debug)]
pub struct Traffic {
    watchers: Vec<AnyWatcher>,
    pub(super) decoder: EntryDecoder,
    /// Per response ring: (its producer's position, the request ring's) loaded
    /// together, oldest first; see `poll`.
    checkpoints: Vec<VecDeque<(u64, Option<u64>)>>,
    scratch: Vec<WatchEvent>,
}

impl Traffic {
    /// Starts reading at each ring's `read_pos` (spec 4.1).
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
            decoder: EntryDecoder::default(),
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
                    } => self.decoder.entry(
                        RingEntry {
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
        self.decoder.expire(now_ns, out);
    }

    /// Entries of the pairing bookkeeping (see [`EntryDecoder::bookkeeping_len`]).
    pub fn bookkeeping_len(&self) -> usize {
        self.decoder.bookkeeping_len()
    }

    /// Totals per ring.
    pub fn totals(&self) -> Vec<(RegionKind, RingTotals)> {
        self.watchers
            .iter()
            .map(|w| {
                let kind = w.ring().kind;
                let s = w.stats();
                let decoded = self.decoder.totals(kind);
                let (vl_bytes, vl_entries) = self.decoder.verify_lost(kind);
                (
                    kind,
                    RingTotals {
                        entries: s.entries.saturating_sub(vl_entries),
                        bytes: s.bytes.saturating_sub(vl_bytes),
                        lost_bytes: s.lost_bytes + vl_bytes,
                        lost_entries: s.lost_entries + vl_entries,
                        loss_events: s.loss_events + vl_entries,
                        malformed: s.malformed + decoded.malformed,
                        ..decoded
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
