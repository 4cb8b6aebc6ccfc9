//! The LRBC ring (spec 4): a 64-byte header (`write_pos`, `read_pos`, `owner_pid`) and a
//! power-of-two data area. Entries are `[length u32][payload][zero pad to 8]`, start at
//! multiples of 8 and never wrap: a `0xFFFFFFFF` length marks the rest of the data area
//! as skipped. Positions are free-running u32 counters.

use super::{MAX_RAW_BYTES, RingRead, RingStats, RingWrite, WatchEvent, align8};
use crate::layout::RingGeometry;

pub const WRITE_POS: u64 = 0;
pub const READ_POS: u64 = 4;
pub const OWNER_PID: u64 = 8;
pub const DATA: u64 = 64;
/// The length word that sends the reader to the start of the data area.
pub const WRAP_MARKER: u32 = 0xFFFF_FFFF;

fn data_at(ring: &RingGeometry, pos: u32) -> u64 {
    ring.offset_bytes + DATA + u64::from(pos & (ring.capacity_bytes - 1))
}

/// Why an entry could not be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    #[error("an entry must have at least one byte")]
    Empty,
    #[error("a {len}-byte entry does not fit a ring of {capacity} bytes")]
    TooLarge { len: usize, capacity: u32 },
    #[error("the ring is full ({used} of {capacity} bytes used, {need} needed)")]
    Full { used: u32, need: u32, capacity: u32 },
    #[error("the ring lies outside the mapping")]
    OutOfRange,
}

/// The single producer of a ring. Keeps `write_pos` to itself; publishes each entry with
/// one Release store.
#[derive(Debug)]
pub struct Producer {
    ring: RingGeometry,
    write_pos: u32,
}

impl Producer {
    /// Takes over a ring at its current `write_pos`.
    pub fn new(mem: &impl RingRead, ring: RingGeometry) -> Self {
        Self {
            write_pos: mem.load_u32(ring.offset_bytes + WRITE_POS).unwrap_or(0),
            ring,
        }
    }

    pub fn write_pos(&self) -> u32 {
        self.write_pos
    }

    /// Writes one entry if there is room; returns its position.
    pub fn try_push(&mut self, mem: &impl RingWrite, payload: &[u8]) -> Result<u32, PushError> {
        let cap = self.ring.capacity_bytes;
        if payload.is_empty() {
            return Err(PushError::Empty);
        }
        if payload.len() > (cap - 4) as usize {
            return Err(PushError::TooLarge {
                len: payload.len(),
                capacity: cap,
            });
        }
        let size = align8(4 + payload.len() as u64) as u32;
        // Acquire: pairs with the consumer's Release store of read_pos, so the bytes it
        // has finished reading may be overwritten.
        let read_pos = mem
            .load_u32(self.ring.offset_bytes + READ_POS)
            .ok_or(PushError::OutOfRange)?;
        let used = self.write_pos.wrapping_sub(read_pos);
        let index = self.write_pos & (cap - 1);
        let contiguous = cap - index;
        let skip = if contiguous < size { contiguous } else { 0 };
        let need = skip + size;
        if used > cap || need > cap - used {
            return Err(PushError::Full {
                used,
                need,
                capacity: cap,
            });
        }
        let mut at = self.write_pos;
        if skip > 0 {
            if !mem.write_at(data_at(&self.ring, at), &WRAP_MARKER.to_le_bytes()) {
                return Err(PushError::OutOfRange);
            }
            at = at.wrapping_add(skip);
        }
        let mut entry = Vec::with_capacity(size as usize);
        entry.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        entry.extend_from_slice(payload);
        entry.resize(size as usize, 0);
        if !mem.write_at(data_at(&self.ring, at), &entry) {
            return Err(PushError::OutOfRange);
        }
        self.write_pos = at.wrapping_add(size);
        // Release: publishes the entry bytes (and wrap marker) written above; pairs with
        // the consumer's and watchers' Acquire loads of write_pos.
        mem.store_u32(self.ring.offset_bytes + WRITE_POS, self.write_pos);
        Ok(at)
    }
}

/// Why the consumer stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PopError {
    #[error("malformed entry at position {position}: {reason}; skipped to write_pos")]
    Malformed { position: u32, reason: String },
    #[error("the ring lies outside the mapping")]
    OutOfRange,
}

/// The single consumer of a ring.
#[derive(Debug)]
pub struct Consumer {
    ring: RingGeometry,
    read_pos: u32,
}

impl Consumer {
    pub fn new(mem: &impl RingRead, ring: RingGeometry) -> Self {
        Self {
            read_pos: mem.load_u32(ring.offset_bytes + READ_POS).unwrap_or(0),
            ring,
        }
    }

    /// Skips everything published so far (a new lease holder ignores stale responses).
    pub fn skip_to_end(&mut self, mem: &impl RingWrite) {
        if let Some(w) = mem.load_u32(self.ring.offset_bytes + WRITE_POS) {
            self.read_pos = w;
            // Release: pairs with the producer's Acquire load of read_pos.
            mem.store_u32(self.ring.offset_bytes + READ_POS, w);
        }
    }

    /// Takes the next entry into `payload`; `Ok(None)` when the ring is empty.
    pub fn try_pop(
        &mut self,
        mem: &impl RingWrite,
        payload: &mut Vec<u8>,
    ) -> Result<Option<u32>, PopError> {
        let cap = self.ring.capacity_bytes;
        loop {
            // Acquire: pairs with the producer's Release store of write_pos.
            let w = mem
                .load_u32(self.ring.offset_bytes + WRITE_POS)
                .ok_or(PopError::OutOfRange)?;
            if w == self.read_pos {
                return Ok(None);
            }
            let p = self.read_pos;
            let index = p & (cap - 1);
            let mut word = [0u8; 4];
            if !mem.read_at(data_at(&self.ring, p), &mut word) {
                return Err(PopError::OutOfRange);
            }
            let len = u32::from_le_bytes(word);
            let available = w.wrapping_sub(p);
            let malformed = |reason: String| PopError::Malformed {
                position: p,
                reason,
            };
            let result = if len == WRAP_MARKER {
                if index == 0 || available < cap - index {
                    Err(malformed("wrap marker where no wrap is possible".into()))
                } else {
                    self.read_pos = p.wrapping_add(cap - index);
                    continue;
                }
            } else if len == 0 || len > cap - 4 {
                Err(malformed(format!("length {len}")))
            } else {
                let size = align8(4 + u64::from(len)) as u32;
                if size > cap - index {
                    Err(malformed(format!(
                        "a {len}-byte entry crosses the end of the data area"
                    )))
                } else if size > available {
                    Err(malformed(format!(
                        "a {len}-byte entry extends past write_pos"
                    )))
                } else {
                    payload.resize(len as usize, 0);
                    if !mem.read_at(data_at(&self.ring, p) + 4, payload) {
                        return Err(PopError::OutOfRange);
                    }
                    self.read_pos = p.wrapping_add(size);
                    Ok(Some(p))
                }
            };
            if result.is_err() {
                self.read_pos = w;
            }
            // Release: the bytes read above may now be overwritten; pairs with the
            // producer's Acquire load of read_pos.
            mem.store_u32(self.ring.offset_bytes + READ_POS, self.read_pos);
            return result;
        }
    }
}

/// Follows a ring without consuming it (spec 4.1): its own cursor, copies checked
/// against `write_pos` after the copy, losses counted.
#[derive(Debug)]
pub struct Watcher {
    pub ring: RingGeometry,
    pub cursor: u32,
    largest_entry: u32,
    pub stats: RingStats,
}

impl Watcher {
    /// Starts at the consumer's `read_pos` (entries before it have unknown boundaries).
    pub fn new(mem: &impl RingRead, ring: RingGeometry) -> Self {
        Self {
            cursor: mem.load_u32(ring.offset_bytes + READ_POS).unwrap_or(0),
            ring,
            largest_entry: 8,
            stats: RingStats::default(),
        }
    }

    pub fn write_pos(&self, mem: &impl RingRead) -> u32 {
        mem.load_u32(self.ring.offset_bytes + WRITE_POS)
            .unwrap_or(self.cursor)
    }

    /// Bytes the producer may be writing beyond `write_pos`: a quarter of the ring, or
    /// twice the largest entry seen (an entry plus the skip before it), if larger.
    pub fn margin(&self) -> u32 {
        (self.ring.capacity_bytes / 4).max(self.largest_entry.saturating_mul(2))
    }

    /// True if the bytes at `p` cannot have been overwritten: either the producer is not
    /// within `margin` of lapping it, or the consumer has not read it yet (the producer
    /// never overwrites unread bytes).
    fn intact(&self, mem: &impl RingRead, p: u32) -> bool {
        let cap = self.ring.capacity_bytes;
        let w = self.write_pos(mem);
        let r = mem.load_u32(self.ring.offset_bytes + READ_POS).unwrap_or(w);
        let unread = (p.wrapping_sub(r) as i32) >= 0 && w.wrapping_sub(p) <= cap;
        let behind = w.wrapping_sub(p);
        unread || behind <= cap.saturating_sub(self.margin())
    }

    /// Skips to the consumer's `read_pos` if it is ahead, else to `write_pos`, and
    /// reports the bytes skipped as lost.
    fn resync(&mut self, mem: &impl RingRead, out: &mut Vec<WatchEvent>) {
        let w = self.write_pos(mem);
        let r = mem.load_u32(self.ring.offset_bytes + READ_POS).unwrap_or(w);
        let r_ahead = (r.wrapping_sub(self.cursor) as i32) > 0
            && w.wrapping_sub(r) <= self.ring.capacity_bytes;
        let target = if r_ahead { r } else { w };
        let lost = target.wrapping_sub(self.cursor);
        self.cursor = target;
        if lost > 0 {
            let e = WatchEvent::Lost {
                lost_bytes: u64::from(lost),
                lost_entries: None,
            };
            self.stats.record(&e);
            out.push(e);
        }
    }

    fn malformed(&mut self, mem: &impl RingRead, out: &mut Vec<WatchEvent>, p: u32, error: String) {
        let mut raw = vec![
            0u8;
            MAX_RAW_BYTES.min(
                self.ring.capacity_bytes as usize - (p & (self.ring.capacity_bytes - 1)) as usize
            )
        ];
        if !mem.read_at(data_at(&self.ring, p), &mut raw) {
            raw.clear();
        }
        let e = WatchEvent::Malformed {
            position: u64::from(p),
            error,
            raw,
        };
        self.stats.record(&e);
        out.push(e);
        // The entry's size is unknown: what follows it up to write_pos is lost.
        self.resync(mem, out);
    }

    /// Reads every entry published up to the `write_pos` loaded now, at most
    /// `max_events` events.
    pub fn poll(&mut self, mem: &impl RingRead, out: &mut Vec<WatchEvent>, max_events: usize) {
        // Acquire: pairs with the producer's Release store of write_pos.
        let w = self.write_pos(mem);
        self.poll_to(mem, out, max_events, w);
    }

    /// Like `poll`, but stops at `w`, a `write_pos` loaded earlier.
    pub fn poll_to(
        &mut self,
        mem: &impl RingRead,
        out: &mut Vec<WatchEvent>,
        max_events: usize,
        w: u32,
    ) {
        let cap = self.ring.capacity_bytes;
        if (w.wrapping_sub(self.cursor) as i32) < 0 {
            let e = WatchEvent::Malformed {
                position: u64::from(self.cursor),
                error: format!(
                    "write_pos went back from {} to {w}: the ring was re-initialised",
                    self.cursor
                ),
                raw: Vec::new(),
            };
            self.stats.record(&e);
            out.push(e);
            self.cursor = w;
            return;
        }
        let start = out.len();
        while self.cursor != w && out.len() - start < max_events {
            let p = self.cursor;
            if !self.intact(mem, p) {
                self.resync(mem, out);
                break;
            }
            let index = p & (cap - 1);
            let mut word = [0u8; 4];
            if !mem.read_at(data_at(&self.ring, p), &mut word) {
                break;
            }
            let len = u32::from_le_bytes(word);
            let available = w.wrapping_sub(p);
            if len == WRAP_MARKER {
                if !self.intact(mem, p) {
                    self.resync(mem, out);
                    break;
                }
                if index == 0 {
                    self.malformed(
                        mem,
                        out,
                        p,
                        "wrap marker at the start of the data area, where no wrap is possible"
                            .into(),
                    );
                    break;
                }
                if available < cap - index {
                    self.malformed(mem, out, p, "wrap marker beyond write_pos".into());
                    break;
                }
                self.stats.bytes += u64::from(cap - index);
                self.cursor = p.wrapping_add(cap - index);
                continue;
            }
            let problem = if len == 0 {
                Some("length 0".to_string())
            } else if len > cap - 4 {
                Some(format!("length {len} exceeds the capacity of {cap} bytes"))
            } else {
                let size = align8(4 + u64::from(len)) as u32;
                if size > cap - index {
                    Some(format!(
                        "a {len}-byte entry crosses the end of the data area"
                    ))
                } else if size > available {
                    Some(format!("a {len}-byte entry extends past write_pos"))
                } else {
                    None
                }
            };
            if let Some(error) = problem {
                if self.intact(mem, p) {
                    self.malformed(mem, out, p, error);
                } else {
                    self.resync(mem, out);
                }
                break;
            }
            let size = align8(4 + u64::from(len)) as u32;
            let mut payload = vec![0u8; len as usize];
            if !mem.read_at(data_at(&self.ring, p) + 4, &mut payload) {
                break;
            }
            // The copy ended with an Acquire fence; re-check that the producer did not
            // reach these bytes while we copied them.
            if !self.intact(mem, p) {
                self.resync(mem, out);
                break;
            }
            self.largest_entry = self.largest_entry.max(size);
            self.stats.bytes += u64::from(size);
            self.cursor = p.wrapping_add(size);
            let e = WatchEvent::Entry {
                position: u64::from(p),
                payload,
                lucky: None,
            };
            self.stats.record(&e);
            out.push(e);
        }
    }
}

#[cfg(test)]
mod tests;
