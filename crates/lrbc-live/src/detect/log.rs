//! [`EventLog`]: the events a consumer keeps (bounded), the newest form of each, every
//! form in order for readers that follow along (a recorder writes each), and the run's
//! totals.

use std::collections::VecDeque;

use super::event::{Event, EventKind, EventTotals};
use crate::rhythm::RhythmSummary;

/// Events kept by default; the totals count every one.
pub const DEFAULT_EVENTS_KEPT: usize = 10_000;
/// Forms of events kept for readers that follow along.
const UPDATES_KEPT: usize = 8_192;

/// The events of one run.
#[derive(Clone, Debug)]
pub struct EventLog {
    /// Ascending ids (the order they were found in).
    events: VecDeque<Event>,
    kept: usize,
    /// Events dropped from the front to keep within the bound (the totals still count
    /// them).
    pub dropped: u64,
    totals: EventTotals,
    updates: VecDeque<Event>,
    /// The sequence number of `updates[0]`.
    updates_start: u64,
    /// Moves with every change (readers redraw when it does).
    pub version: u64,
    /// Why the detector cannot do all it was asked (a bound naming a value the segment
    /// does not have), shown beside the events.
    pub note: Option<String>,
    /// The loop's rhythm and the endings in step, as the detector last told them.
    rhythm: Option<RhythmSummary>,
}

impl Default for EventLog {
    fn default() -> Self {
        Self::new(DEFAULT_EVENTS_KEPT)
    }
}

impl EventLog {
    pub fn new(kept: usize) -> Self {
        Self {
            events: VecDeque::new(),
            kept: kept.max(1),
            dropped: 0,
            totals: EventTotals::default(),
            updates: VecDeque::new(),
            updates_start: 0,
            version: 0,
            note: None,
            rhythm: None,
        }
    }

    /// The newest form of an event: added, or replacing the form with its id.
    pub fn apply(&mut self, e: Event) {
        self.version += 1;
        self.updates.push_back(e.clone());
        if self.updates.len() > UPDATES_KEPT {
            self.updates.pop_front();
            self.updates_start += 1;
        }
        match self.events.binary_search_by_key(&e.id, |x| x.id) {
            Ok(k) => {
                if let Some(slot) = self.events.get_mut(k) {
                    *slot = e;
                }
            }
            Err(k) => {
                if k == 0 && !self.events.is_empty() && self.dropped > 0 {
                    // A later form of an event already dropped.
                    return;
                }
                if let Some(n) = self.totals.by_kind.get_mut(e.kind.position()) {
                    *n += 1;
                }
                self.events.insert(k, e);
                if self.events.len() > self.kept {
                    self.events.pop_front();
                    self.dropped += 1;
                }
            }
        }
    }

    /// The events kept, oldest first.
    pub fn events(&self) -> &VecDeque<Event> {
        &self.events
    }

    pub fn get(&self, id: u64) -> Option<&Event> {
        let k = self.events.binary_search_by_key(&id, |x| x.id).ok()?;
        self.events.get(k)
    }

    /// Totals: events per kind as found here, frames and values as the detector counted.
    pub fn totals(&self) -> EventTotals {
        self.totals
    }

    /// The frame and value figures of `t` (the events per kind stay as counted here).
    pub fn set_figures(&mut self, t: &EventTotals) {
        let figures = EventTotals {
            by_kind: self.totals.by_kind,
            ..*t
        };
        if self.totals != figures {
            self.totals = figures;
            self.version += 1;
        }
    }

    /// The loop's rhythm and the endings in step (None: not told yet).
    pub fn rhythm(&self) -> Option<&RhythmSummary> {
        self.rhythm.as_ref()
    }

    /// The loop's rhythm as of now.
    pub fn set_rhythm(&mut self, r: RhythmSummary) {
        if self.rhythm.as_ref() != Some(&r) {
            self.rhythm = Some(r);
            self.version += 1;
        }
    }

    /// The forms of events applied since `cursor` (a sequence number this returns) are
    /// appended to `out`; returns the next cursor and how many forms were missed (the
    /// reader fell behind by more than the log keeps).
    pub fn updates_since(&self, cursor: u64, out: &mut Vec<Event>) -> (u64, u64) {
        let end = self.updates_start + self.updates.len() as u64;
        let missed = self.updates_start.saturating_sub(cursor);
        let from = cursor.max(self.updates_start);
        out.extend(
            self.updates
                .iter()
                .skip(usize::try_from(from - self.updates_start).unwrap_or(usize::MAX))
                .cloned(),
        );
        (end, missed)
    }

    /// The cursor of a reader that starts now.
    pub fn cursor_now(&self) -> u64 {
        self.updates_start + self.updates.len() as u64
    }

    /// The envs of the non-finite and out-of-range events kept (for a log filled from
    /// a file or a server, which keep no such count of their own).
    pub fn envs_with_bad_values(&self) -> u32 {
        let envs: std::collections::BTreeSet<u32> = self
            .events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Nonfinite | EventKind::OutOfRange))
            .filter_map(|e| e.env)
            .collect();
        u32::try_from(envs.len()).unwrap_or(u32::MAX)
    }
}
