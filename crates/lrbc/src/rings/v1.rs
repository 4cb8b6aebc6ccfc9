//! The LRBC ring (spec 4): a 64-byte header (`write_pos`, `read_pos`, `owner_pid`) and a
//! power-of-two data area. Entries are `[length u32][payload][zero pad to 8]`, start at
//! multiples of 8 and never wrap: a `0xFFFFFFFF` length marks the rest of the data area
//! as skipped. Positions are free-running u32 counters.

use super::confirm::{Item, Positions};
use super::cursor::{Cursor, CursorRead, EntryFormat};
use super::{MAX_RAW_BYTES, RingRead, RingWrite, align8};
use crate::layout::RingGeometry;
use crate::layout::headers::RingHeader;

/// Where the ring header's words and the data area are, from the ring's start.
pub const WRITE_POS: u64 = RingHeader::WRITE_POS_OFFSET;
pub const READ_POS: u64 = RingHeader::READ_POS_OFFSET;
pub const OWNER_PID: u64 = RingHeader::OWNER_PID_OFFSET;
pub const DATA: u64 = RingHeader::SIZE_BYTES as u64;
/// The length word that sends the reader to the start of the data area.
pub const WRAP_MARKER: u32 = 0xFFFF_FFFF;

fn data_at(ring: &RingGeometry, pos: u32) -> u64 {
    ring.offset_bytes + DATA + u64::from(pos & (ring.capacity_bytes - 1))
}

/// Why an entry could not be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum V1PushError {
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
pub struct V1Producer {
    ring: RingGeometry,
    write_pos: u32,
}

impl V1Producer {
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
    pub fn try_push(&mut self, mem: &impl RingWrite, payload: &[u8]) -> Result<u32, V1PushError> {
        let cap = self.ring.capacity_bytes;
        if payload.is_empty() {
            return Err(V1PushError::Empty);
        }
        if payload.len() > (cap - 4) as usize {
            return Err(V1PushError::TooLarge {
                len: payload.len(),
                capacity: cap,
            });
        }
        let size = align8(4 + payload.len() as u64) as u32;
        // Acquire: pairs with the consumer's Release store of read_pos, so the bytes it
        // has finished reading may be overwritten.
        let read_pos = mem
            .load_u32(self.ring.offset_bytes + READ_POS)
            .ok_or(V1PushError::OutOfRange)?;
        let used = self.write_pos.wrapping_sub(read_pos);
        let index = self.write_pos & (cap - 1);
        let contiguous = cap - index;
        let skip = if contiguous < size { contiguous } else { 0 };
        let need = skip + size;
        if used > cap || need > cap - used {
            return Err(V1PushError::Full {
                used,
                need,
                capacity: cap,
            });
        }
        let mut at = self.write_pos;
        if skip > 0 {
            if !mem.write_at(data_at(&self.ring, at), &WRAP_MARKER.to_le_bytes()) {
                return Err(V1PushError::OutOfRange);
            }
            at = at.wrapping_add(skip);
        }
        let mut entry = Vec::with_capacity(size as usize);
        entry.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        entry.extend_from_slice(payload);
        entry.resize(size as usize, 0);
        if !mem.write_at(data_at(&self.ring, at), &entry) {
            return Err(V1PushError::OutOfRange);
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
pub struct V1Consumer {
    ring: RingGeometry,
    read_pos: u32,
}

impl V1Consumer {
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

/// The LRBC ring format for a [`Cursor`].
#[derive(Debug)]
pub struct Lrbc;

/// Watches an LRBC v1 ring without consuming it (spec 4.1).
pub type V1Watcher = Cursor<Lrbc>;

impl EntryFormat for Lrbc {
    fn positions(ring: &RingGeometry) -> Positions {
        Positions {
            mask: u64::from(u32::MAX),
            capacity: u64::from(ring.capacity_bytes),
        }
    }

    fn load_write(mem: &impl RingRead, ring: &RingGeometry) -> Option<u64> {
        // Acquire: pairs with the producer's Release store of write_pos.
        mem.load_u32(ring.offset_bytes + WRITE_POS).map(u64::from)
    }

    fn load_read(mem: &impl RingRead, ring: &RingGeometry) -> Option<u64> {
        // Acquire: pairs with the consumer's Release store of read_pos.
        mem.load_u32(ring.offset_bytes + READ_POS).map(u64::from)
    }

    fn read_item(mem: &impl RingRead, ring: &RingGeometry, p: u64, end: u64) -> CursorRead {
        let cap = ring.capacity_bytes;
        let p32 = p as u32;
        let index = p32 & (cap - 1);
        let mut word = [0u8; 4];
        if !mem.read_at(data_at(ring, p32), &mut word) {
            return CursorRead::Unreadable;
        }
        let len = u32::from_le_bytes(word);
        let available = (end as u32).wrapping_sub(p32);
        let malformed = |error: String| {
            let mut raw = vec![0u8; MAX_RAW_BYTES.min((cap - index) as usize)];
            if !mem.read_at(data_at(ring, p32), &mut raw) || raw.get(..4) != Some(&word[..]) {
                raw = word.to_vec();
            }
            CursorRead::Copied {
                end: p,
                bytes: raw,
                item: Item::Malformed { error },
            }
        };
        if len == WRAP_MARKER {
            if index == 0 {
                return malformed(
                    "wrap marker at the start of the data area, where no wrap is possible".into(),
                );
            }
            if available < cap - index {
                return malformed("wrap marker beyond write_pos".into());
            }
            return CursorRead::Copied {
                end: u64::from(p32.wrapping_add(cap - index)),
                bytes: word.to_vec(),
                item: Item::Skip,
            };
        }
        if len == 0 {
            return malformed("length 0".into());
        }
        if len > cap - 4 {
            return malformed(format!("length {len} exceeds the capacity of {cap} bytes"));
        }
        let size = align8(4 + u64::from(len)) as u32;
        if size > cap - index {
            return malformed(format!(
                "a {len}-byte entry crosses the end of the data area"
            ));
        }
        if size > available {
            return malformed(format!("a {len}-byte entry extends past write_pos"));
        }
        let mut bytes = vec![0u8; 4 + len as usize];
        if !mem.read_at(data_at(ring, p32), &mut bytes) {
            return CursorRead::Unreadable;
        }
        if bytes[..4] != word {
            return CursorRead::Torn;
        }
        CursorRead::Copied {
            end: u64::from(p32.wrapping_add(size)),
            bytes,
            item: Item::Entry {
                header: 4,
                lucky: None,
            },
        }
    }

    fn recopy(mem: &impl RingRead, ring: &RingGeometry, p: u64, buf: &mut [u8]) -> bool {
        mem.read_at(data_at(ring, p as u32), buf)
    }

    fn margin(ring: &RingGeometry, w: u64, largest_entry: u64) -> u64 {
        let cap = u64::from(ring.capacity_bytes);
        let entry = (cap / 4).max(largest_entry).min(cap);
        // The next entry starts at w unless it does not fit before the end of the data
        // area; then the producer writes a wrap marker at w and skips to the start.
        let contiguous = cap - (w & (cap - 1));
        if contiguous < entry {
            (contiguous + entry).min(cap)
        } else {
            entry
        }
    }
}

#[cfg(test)]
mod tests;
