//! Faults read off the command and control rings, as the detector makes them events:
//! error responses, requests not answered, malformed entries and bytes lost.

use super::event::EventKind;
use lrbc::layout::RegionKind;

/// A fault read off the rings.
#[derive(Clone, Debug, PartialEq)]
pub enum RingFault {
    /// A response that carries an error.
    Error {
        ring: RegionKind,
        method: String,
        correlation_id: u64,
        error: String,
    },
    Unanswered {
        ring: RegionKind,
        method: String,
        correlation_id: u64,
        waited_ns: u64,
    },
    Malformed {
        ring: RegionKind,
        position: u64,
        error: String,
    },
    Lost {
        ring: RegionKind,
        lost_bytes: u64,
        lost_entries: Option<u64>,
    },
}

impl RingFault {
    /// The fault a traffic event is, if any.
    pub fn from_traffic(e: &crate::traffic::TrafficEvent) -> Option<Self> {
        use crate::traffic::TrafficEvent as T;
        Some(match e {
            T::Record(r) => Self::Error {
                ring: r.ring,
                method: r.method.clone(),
                correlation_id: r.correlation_id,
                error: r.error.clone()?,
            },
            T::Unanswered {
                ring,
                correlation_id,
                method,
                waited_ns,
                ..
            } => Self::Unanswered {
                ring: *ring,
                method: method.clone(),
                correlation_id: *correlation_id,
                waited_ns: *waited_ns,
            },
            T::Malformed {
                ring,
                position,
                error,
                ..
            } => Self::Malformed {
                ring: *ring,
                position: *position,
                error: error.clone(),
            },
            T::Lost {
                ring,
                lost_bytes,
                lost_entries,
            } => Self::Lost {
                ring: *ring,
                lost_bytes: *lost_bytes,
                lost_entries: *lost_entries,
            },
            T::Answered { .. } => return None,
        })
    }

    pub(super) fn kind(&self) -> EventKind {
        match self {
            Self::Error { .. } => EventKind::RpcError,
            Self::Unanswered { .. } => EventKind::Unanswered,
            Self::Malformed { .. } => EventKind::Malformed,
            Self::Lost { .. } => EventKind::RingLoss,
        }
    }

    pub(super) fn ring(&self) -> RegionKind {
        match self {
            Self::Error { ring, .. }
            | Self::Unanswered { ring, .. }
            | Self::Malformed { ring, .. }
            | Self::Lost { ring, .. } => *ring,
        }
    }

    pub(super) fn method(&self) -> Option<&str> {
        match self {
            Self::Error { method, .. } | Self::Unanswered { method, .. } => Some(method),
            _ => None,
        }
    }

    pub(super) fn message(&self, count: u64) -> String {
        let times = if count > 1 {
            format!(" ({count} times)")
        } else {
            String::new()
        };
        match self {
            Self::Error {
                ring,
                method,
                correlation_id,
                error,
            } => format!(
                "{}: {} (correlation id {correlation_id}) answered with an error: {error}{times}",
                ring.as_str(),
                method_or(method)
            ),
            Self::Unanswered {
                ring,
                method,
                correlation_id,
                waited_ns,
            } => format!(
                "{}: {} (correlation id {correlation_id}) unanswered after {:.1} s{times}",
                ring.as_str(),
                method_or(method),
                *waited_ns as f64 / 1e9
            ),
            Self::Malformed {
                ring,
                position,
                error,
            } => format!(
                "{}: a malformed entry at position {position}: {error}{times}",
                ring.as_str()
            ),
            Self::Lost {
                ring, lost_entries, ..
            } => {
                let entries = lost_entries.map_or(String::new(), |n| format!(" ({n} entries)"));
                format!(
                    "{}: bytes{entries} overwritten before they were read{times}",
                    ring.as_str()
                )
            }
        }
    }
}

fn method_or(m: &str) -> &str {
    if m.is_empty() { "a request" } else { m }
}
