//! Diagnosis: the events of a run, found as they happen. One detector, the same code
//! live and over a recording, turns what it is given into events: the checks of frames
//! (`crate::check`: non-finite values, values out of their bounds, saturated actions),
//! the done and truncated flags of every env (done bursts), the passing of time (stalls
//! of `frame_seq`), the segment's state (engine gone, replaced, truncated, unlinked) and
//! the rings' faults (error responses, unanswered requests, malformed entries, lost
//! bytes). The same fault of the same env and channel over consecutive frames is one
//! event; a non-finite value's origin (the policy's or the simulator's) is judged at the
//! env's first bad frame.
//!
//! `event` (what an event is, its JSON), `settings` (what the user sets), `ring_fault`
//! (the rings' faults as events), `detector` (the state machine), `log` (the events a
//! consumer keeps, and the run's totals), `live` (the detector on the frame follower's
//! thread, fed the segment's state and the rings' faults by their readers:
//! [`Diagnosis`]).

mod detector;
mod event;
mod live;
mod log;
mod ring_fault;
mod settings;

pub use detector::{BURST_MIN_ENVS, Detector, REFRESH_NS, RING_MERGE_NS};
pub use event::{Event, EventKind, EventTotals, Origin, format_value};
pub use live::{DetectorFeed, Diagnosis, DiagnosisError};
pub use log::{DEFAULT_EVENTS_KEPT, EventLog};
pub use ring_fault::RingFault;
pub use settings::{DetectChanges, DetectSettings, SettingsError};

#[cfg(test)]
mod tests;
