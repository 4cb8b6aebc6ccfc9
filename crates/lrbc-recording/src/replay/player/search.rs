//! Searching forward from the cursor for a frame where an env is done, a NaN, or a ring
//! entry carrying an error.

use std::sync::Arc;

use super::traffic::ring_format;
use super::{Find, Worker};
use crate::format::{RecFrame, lucky_header_of, ring_event_of};
use crate::replay::Topic;
use lrbc::sync::lock;
use lrbc_live::traffic::TrafficEvent;

fn has_nan(f: &RecFrame) -> bool {
    f.rewards
        .iter()
        .chain(&f.observations)
        .chain(&f.actions)
        .any(|v| v.is_nan())
}

impl Worker {
    /// The log time of the first message after `from` that `what` looks for.
    pub(super) fn search(
        &mut self,
        from: u64,
        end: u64,
        what: Find,
    ) -> Result<Option<u64>, String> {
        let mut found = None;
        let g = self.rec.geometry.clone();
        let shared = Arc::clone(&self.shared);
        // A luckyrobots entry's header, recorded just before its payload.
        let mut headers = std::collections::HashMap::new();
        self.rec
            .each_message(from.saturating_add(1), end, |kind, log_ns, data| {
                if lock(&shared.state).interrupted() {
                    return false;
                }
                let hit = match (what, kind) {
                    (Find::Done, Topic::Frame) => RecFrame::decode(log_ns, data)
                        .is_some_and(|f| f.dones.iter().any(|&d| d != 0)),
                    (Find::Nan, Topic::Frame) => {
                        RecFrame::decode(log_ns, data).is_some_and(|f| has_nan(&f))
                    }
                    (Find::Error, Topic::Ring(ring)) => {
                        let lucky = headers
                            .remove(&ring)
                            .and_then(|h: Arc<[u8]>| lucky_header_of(&h, data.len()));
                        lrbc_live::traffic::decode_entry(ring, ring_format(&g, ring), data, lucky)
                            .map_or(true, |d| d.error.is_some())
                    }
                    (_, Topic::RingHeader(ring)) => {
                        headers.insert(ring, Arc::clone(data));
                        false
                    }
                    // A malformed entry is an error; a loss is not.
                    (Find::Error, Topic::RingEvent) => {
                        matches!(ring_event_of(data), Some(TrafficEvent::Malformed { .. }))
                    }
                    _ => false,
                };
                if hit {
                    found = Some(log_ns);
                }
                !hit
            })?;
        Ok(found)
    }
}
