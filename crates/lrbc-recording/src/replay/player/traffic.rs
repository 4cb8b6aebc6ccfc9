//! The recording's ring traffic in the player's traffic store.
//!
//! The ring entries, losses and malformed entries of the history window are decoded and
//! paired by the traffic's `EntryDecoder`, as a live traffic tap does.

use std::sync::Arc;

use super::PlayerThread;
use crate::format::lucky_header_of;
use crate::replay::{Damage, RingMessage};
use lrbc::layout::{Geometry, Layout, RegionKind, RingFormat};
use lrbc::sync::lock;
use lrbc_live::traffic::{RingEntry, TrafficLimits};

impl PlayerThread {
    /// The ring entries, losses and malformed entries of `[from, cursor]` into the
    /// traffic store, as a traffic tap would have shown them when the recorder saw them.
    pub(super) fn fill_traffic(
        &mut self,
        g: &Geometry,
        from: u64,
        cursor: u64,
        limits: TrafficLimits,
    ) -> Result<(), Damage> {
        let entries = self.rec.ring_between(from, cursor, limits.max_rows)?;
        let mut store = lock(&self.store);
        // A luckyrobots entry's header, recorded just before its payload.
        let mut headers: std::collections::HashMap<RegionKind, Arc<[u8]>> =
            std::collections::HashMap::new();
        for e in entries {
            let (ring, log_ns, payload) = match e {
                RingMessage::Entry {
                    log_ns,
                    ring,
                    payload,
                } => (ring, log_ns, payload),
                // A loss or a malformed entry, as the traffic tap showed it.
                RingMessage::Event { log_ns, event } => {
                    store.apply(event, log_ns, limits);
                    continue;
                }
                RingMessage::Header { ring, json } => {
                    headers.insert(ring, json);
                    continue;
                }
            };
            let lucky = headers
                .remove(&ring)
                .and_then(|h| lucky_header_of(&h[..], payload.len()));
            // As a traffic tap would have shown it when the recorder saw it.
            let entry = RingEntry {
                ring,
                format: ring_format(g, ring),
                position: 0,
                payload: payload.to_vec(),
                lucky,
                at_risk: false,
            };
            self.decoder.entry(entry, log_ns, &mut self.events);
            self.decoder.expire(log_ns, &mut self.events);
            for ev in self.events.drain(..) {
                store.apply(ev, log_ns, limits);
            }
        }
        self.decoder.expire(cursor, &mut self.events);
        for ev in self.events.drain(..) {
            store.apply(ev, cursor, limits);
        }
        Ok(())
    }
}

/// The format of a recorded ring's entries: the recorded geometry's, else the layout's.
pub fn ring_format(g: &Geometry, ring: RegionKind) -> RingFormat {
    g.ring(ring).map_or(
        if g.layout == Layout::LuckyrobotsIpc {
            RingFormat::Lucky
        } else {
            RingFormat::Lrbc
        },
        |r| r.format,
    )
}

#[cfg(test)]
mod tests;
