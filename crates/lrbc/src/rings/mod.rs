//! The command and control rings: producers and consumers (spec 4, for the simulated
//! engine and client and the control lease), and watchers that read a ring without
//! consuming it (spec 4.1), counting every loss. `v1` is the LRBC v1 format, `lucky` the
//! luckyrobots one (spec 8).

pub mod confirm;
pub mod cursor;
pub mod lucky;
pub mod v1;

use crate::layout::RegionKind;
use crate::segment::{ControlPages, Segment, SegmentRw};

/// Read access to the words and bytes of a ring. Offsets are from the segment start.
pub trait RingRead {
    /// Acquire load of an aligned u32.
    fn load_u32(&self, offset: u64) -> Option<u32>;
    /// Acquire load of an aligned u64.
    fn load_u64(&self, offset: u64) -> Option<u64>;
    /// Copies bytes out.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool;
}

/// Write access, for producers, consumers and the control lease.
pub trait RingWrite: RingRead {
    /// Release store of an aligned u32.
    fn store_u32(&self, offset: u64, value: u32) -> bool;
    /// Release store of an aligned u64.
    fn store_u64(&self, offset: u64, value: u64) -> bool;
    fn write_at(&self, offset: u64, bytes: &[u8]) -> bool;
    /// Compare-and-swap of an aligned u32; returns the value found.
    fn compare_exchange_u32(&self, offset: u64, current: u32, new: u32) -> Option<u32>;
}

impl RingRead for Segment {
    fn load_u32(&self, offset: u64) -> Option<u32> {
        Segment::load_u32(self, offset)
    }
    fn load_u64(&self, offset: u64) -> Option<u64> {
        Segment::load_u64(self, offset)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        Segment::read_at(self, offset, buf)
    }
}

impl RingRead for SegmentRw {
    fn load_u32(&self, offset: u64) -> Option<u32> {
        SegmentRw::load_u32(self, offset)
    }
    fn load_u64(&self, offset: u64) -> Option<u64> {
        SegmentRw::load_u64(self, offset)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        SegmentRw::read_at(self, offset, buf)
    }
}

impl RingWrite for SegmentRw {
    fn store_u32(&self, offset: u64, value: u32) -> bool {
        SegmentRw::store_u32(self, offset, value)
    }
    fn store_u64(&self, offset: u64, value: u64) -> bool {
        SegmentRw::store_u64(self, offset, value)
    }
    fn write_at(&self, offset: u64, bytes: &[u8]) -> bool {
        SegmentRw::write_at(self, offset, bytes)
    }
    fn compare_exchange_u32(&self, offset: u64, current: u32, new: u32) -> Option<u32> {
        SegmentRw::compare_exchange_u32(self, offset, current, new)
    }
}

/// Plain bytes as ring memory (tests and fuzzing; single-threaded).
impl RingRead for Vec<u8> {
    fn load_u32(&self, offset: u64) -> Option<u32> {
        let at = usize::try_from(offset).ok()?;
        Some(u32::from_le_bytes(
            self.get(at..at.checked_add(4)?)?.try_into().ok()?,
        ))
    }
    fn load_u64(&self, offset: u64) -> Option<u64> {
        let at = usize::try_from(offset).ok()?;
        Some(u64::from_le_bytes(
            self.get(at..at.checked_add(8)?)?.try_into().ok()?,
        ))
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        crate::layout::ByteSource::read_at(self.as_slice(), offset, buf)
    }
}

impl RingRead for ControlPages {
    fn load_u32(&self, offset: u64) -> Option<u32> {
        ControlPages::load_u32(self, offset)
    }
    fn load_u64(&self, offset: u64) -> Option<u64> {
        ControlPages::load_u64(self, offset)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        ControlPages::read_at(self, offset, buf)
    }
}

impl RingWrite for ControlPages {
    fn store_u32(&self, offset: u64, value: u32) -> bool {
        ControlPages::store_u32(self, offset, value)
    }
    fn store_u64(&self, _offset: u64, _value: u64) -> bool {
        // LRBC control rings have no u64 words.
        false
    }
    fn write_at(&self, offset: u64, bytes: &[u8]) -> bool {
        ControlPages::write_at(self, offset, bytes)
    }
    fn compare_exchange_u32(&self, offset: u64, current: u32, new: u32) -> Option<u32> {
        ControlPages::compare_exchange_u32(self, offset, current, new)
    }
}

/// What a watcher saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchEvent {
    /// A whole entry, copied out and known not to have been overwritten during the copy.
    Entry {
        /// Free-running ring position of the entry (its length word).
        position: u64,
        payload: Vec<u8>,
        /// The luckyrobots envelope header; `None` for LRBC rings.
        lucky: Option<LuckyEntryHeader>,
        /// The producer was within one margin of lapping it when it was kept: bytes that
        /// then fail verification are counted lost (lapping), not malformed.
        at_risk: bool,
    },
    /// Entries the watcher could not read: overwritten (lapped) or consumed before it got
    /// to them. Bytes are exact; entries are `None` when their count cannot be known.
    Lost {
        lost_bytes: u64,
        lost_entries: Option<u64>,
    },
    /// Bytes that are not a valid entry.
    Malformed {
        position: u64,
        error: String,
        raw: Vec<u8>,
    },
}

/// The 16-byte header in front of each luckyrobots entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LuckyEntryHeader {
    pub correlation_id: u32,
    /// The method id in a request, the status in a response (0 = ok).
    pub method_or_status: u32,
    pub payload_length: u32,
}

/// Running totals of one watched ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RingStats {
    pub entries: u64,
    /// Ring bytes of the entries seen (length word, payload and padding) and of wrap
    /// skips.
    pub bytes: u64,
    pub lost_bytes: u64,
    /// Lost entries whose count was known.
    pub lost_entries: u64,
    /// Loss events (each a `WatchEvent::Lost`).
    pub loss_events: u64,
    pub malformed: u64,
}

impl RingStats {
    pub fn record(&mut self, e: &WatchEvent) {
        match e {
            WatchEvent::Entry { .. } => self.entries += 1,
            WatchEvent::Lost {
                lost_bytes,
                lost_entries,
            } => {
                self.lost_bytes += lost_bytes;
                self.lost_entries += lost_entries.unwrap_or(0);
                self.loss_events += 1;
            }
            WatchEvent::Malformed { .. } => self.malformed += 1,
        }
    }
}

/// The largest raw excerpt kept of a malformed entry.
pub const MAX_RAW_BYTES: usize = 256;

/// Rounds up to a multiple of 8.
pub fn align8(v: u64) -> u64 {
    (v + 7) & !7
}

/// `cmd_s2c`, `cmd_c2s`, … for a ring region.
pub fn ring_name(kind: RegionKind) -> &'static str {
    kind.as_str()
}

/// Rings carrying requests (client or tool to engine).
pub fn is_request_ring(kind: RegionKind) -> bool {
    matches!(kind, RegionKind::CmdC2s | RegionKind::CtlC2s)
}

fn cursor_positions<F: cursor::EntryFormat>(w: &cursor::Cursor<F>) -> confirm::Positions {
    F::positions(&w.ring)
}

/// A ring watcher of either format.
#[derive(Debug)]
pub enum AnyWatcher {
    Lrbc(v1::V1Watcher),
    Lucky(lucky::LuckyWatcher),
}

impl AnyWatcher {
    pub fn new(mem: &impl RingRead, ring: crate::layout::RingGeometry) -> Self {
        match ring.format {
            crate::layout::RingFormat::Lrbc => Self::Lrbc(v1::V1Watcher::new(mem, ring)),
            crate::layout::RingFormat::Lucky => Self::Lucky(lucky::LuckyWatcher::new(mem, ring)),
        }
    }

    /// Reads what was published since the last poll (at most `max_events` events).
    pub fn poll(
        &mut self,
        mem: &impl RingRead,
        out: &mut Vec<WatchEvent>,
        max_events: usize,
        now_ns: u64,
    ) {
        match self {
            Self::Lrbc(w) => w.poll(mem, out, max_events, now_ns),
            Self::Lucky(w) => w.poll(mem, out, max_events, now_ns),
        }
    }

    /// Reads up to `end`, a position from `end_position` loaded earlier.
    pub fn poll_to(
        &mut self,
        mem: &impl RingRead,
        out: &mut Vec<WatchEvent>,
        max_events: usize,
        end: u64,
        now_ns: u64,
    ) {
        match self {
            Self::Lrbc(w) => w.poll_to(mem, out, max_events, end, now_ns),
            Self::Lucky(w) => w.poll_to(mem, out, max_events, end, now_ns),
        }
    }

    /// True if every entry before `position` has been reported (seen or lost): none
    /// waits to be confirmed and the cursor has passed it.
    pub fn settled_past(&self, position: u64) -> bool {
        match self {
            Self::Lrbc(w) => cursor_positions(w).at_or_after(w.settled(), position),
            Self::Lucky(w) => cursor_positions(w).at_or_after(w.settled(), position),
        }
    }

    /// Copies waiting to be confirmed.
    pub fn held(&self) -> usize {
        match self {
            Self::Lrbc(w) => w.held_len(),
            Self::Lucky(w) => w.held_len(),
        }
    }

    pub fn stats(&self) -> RingStats {
        match self {
            Self::Lrbc(w) => w.stats,
            Self::Lucky(w) => w.stats,
        }
    }

    pub fn ring(&self) -> crate::layout::RingGeometry {
        match self {
            Self::Lrbc(w) => w.ring,
            Self::Lucky(w) => w.ring,
        }
    }

    /// Where the next entry will be read.
    pub fn cursor(&self) -> u64 {
        match self {
            Self::Lrbc(w) => w.cursor,
            Self::Lucky(w) => w.cursor,
        }
    }

    /// The producer's current position (where a one-shot listing stops).
    pub fn end_position(&self, mem: &impl RingRead) -> u64 {
        match self {
            Self::Lrbc(w) => w.write_pos(mem),
            Self::Lucky(w) => w.write_pos(mem),
        }
    }
}
