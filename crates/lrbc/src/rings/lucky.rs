//! The luckyrobots ring (spec 8): u64 `head` (producer) at 0, u64 `tail` (consumer) at
//! 64, the u32 capacity at 128, data at 192. Entries are a 16-byte envelope header
//! `[correlation_id u32][method_id or status u32][payload_length u32][reserved u32]`,
//! then the payload; the whole entry is padded to 8 and the padding counts in the
//! positions. Entries split across the end of the data area.

use super::confirm::{Item, Positions};
use super::cursor::{Cursor, CursorRead, EntryFormat};
use super::{LuckyEntryHeader, MAX_RAW_BYTES, RingRead, RingWrite, align8};
use crate::layout::RingGeometry;
use crate::layout::headers::LuckyRingHeader;

/// Where the ring header's words and the data area are, from the ring's start.
pub const HEAD: u64 = LuckyRingHeader::HEAD_OFFSET;
pub const TAIL: u64 = LuckyRingHeader::TAIL_OFFSET;
pub const CAPACITY: u64 = core::mem::offset_of!(LuckyRingHeader, capacity) as u64;
pub const DATA: u64 = LuckyRingHeader::SIZE_BYTES as u64;
pub const ENTRY_HEADER_BYTES: u64 = 16;

/// Copies `buf.len()` bytes starting at ring position `pos`, splitting at the end.
fn read_wrapping(mem: &impl RingRead, ring: &RingGeometry, pos: u64, buf: &mut [u8]) -> bool {
    let cap = u64::from(ring.capacity_bytes);
    let index = pos & (cap - 1);
    let first = (cap - index).min(buf.len() as u64) as usize;
    let base = ring.offset_bytes + DATA;
    let (a, b) = buf.split_at_mut(first);
    mem.read_at(base + index, a) && (b.is_empty() || mem.read_at(base, b))
}

fn write_wrapping(mem: &impl RingWrite, ring: &RingGeometry, pos: u64, bytes: &[u8]) -> bool {
    let cap = u64::from(ring.capacity_bytes);
    let index = pos & (cap - 1);
    let first = (cap - index).min(bytes.len() as u64) as usize;
    let base = ring.offset_bytes + DATA;
    mem.write_at(base + index, &bytes[..first])
        && (first == bytes.len() || mem.write_at(base, &bytes[first..]))
}

fn entry_size(payload_len: u64) -> u64 {
    align8(ENTRY_HEADER_BYTES + payload_len)
}

/// The producer of a luckyrobots ring.
#[derive(Debug)]
pub struct LuckyProducer {
    ring: RingGeometry,
    head: u64,
}

/// Why an entry could not be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LuckyPushError {
    #[error("a {len}-byte entry does not fit a ring of {capacity} bytes")]
    TooLarge { len: usize, capacity: u32 },
    #[error("the ring is full")]
    Full,
    #[error("the ring lies outside the mapping")]
    OutOfRange,
}

impl LuckyProducer {
    pub fn new(mem: &impl RingRead, ring: RingGeometry) -> Self {
        Self {
            head: mem.load_u64(ring.offset_bytes + HEAD).unwrap_or(0),
            ring,
        }
    }

    pub fn try_push(
        &mut self,
        mem: &impl RingWrite,
        header: LuckyEntryHeader,
        payload: &[u8],
    ) -> Result<u64, LuckyPushError> {
        let cap = u64::from(self.ring.capacity_bytes);
        let size = entry_size(payload.len() as u64);
        if size > cap {
            return Err(LuckyPushError::TooLarge {
                len: payload.len(),
                capacity: self.ring.capacity_bytes,
            });
        }
        // Acquire: pairs with the consumer's Release store of tail.
        let tail = mem
            .load_u64(self.ring.offset_bytes + TAIL)
            .ok_or(LuckyPushError::OutOfRange)?;
        if self.head.wrapping_sub(tail) + size > cap {
            return Err(LuckyPushError::Full);
        }
        let mut entry = Vec::with_capacity(size as usize);
        entry.extend_from_slice(&header.correlation_id.to_le_bytes());
        entry.extend_from_slice(&header.method_or_status.to_le_bytes());
        entry.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        entry.extend_from_slice(&0u32.to_le_bytes());
        entry.extend_from_slice(payload);
        entry.resize(size as usize, 0);
        if !write_wrapping(mem, &self.ring, self.head, &entry) {
            return Err(LuckyPushError::OutOfRange);
        }
        let at = self.head;
        self.head += size;
        // Release: publishes the entry; pairs with the consumer's Acquire load of head.
        mem.store_u64(self.ring.offset_bytes + HEAD, self.head);
        Ok(at)
    }
}

/// The consumer of a luckyrobots ring.
#[derive(Debug)]
pub struct LuckyConsumer {
    ring: RingGeometry,
    tail: u64,
}

/// Why the consumer stopped (a malformed entry skips to head).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LuckyPopError {
    #[error("ring outside the mapping")]
    OutOfRange,
    #[error("payload length {0} is impossible")]
    ImpossibleLength(u32),
}

impl LuckyConsumer {
    pub fn new(mem: &impl RingRead, ring: RingGeometry) -> Self {
        Self {
            tail: mem.load_u64(ring.offset_bytes + TAIL).unwrap_or(0),
            ring,
        }
    }

    /// Takes the next entry; `Ok(None)` when empty; a malformed entry skips to head.
    pub fn try_pop(
        &mut self,
        mem: &impl RingWrite,
        payload: &mut Vec<u8>,
    ) -> Result<Option<LuckyEntryHeader>, LuckyPopError> {
        let cap = u64::from(self.ring.capacity_bytes);
        // Acquire: pairs with the producer's Release store of head.
        let head = mem
            .load_u64(self.ring.offset_bytes + HEAD)
            .ok_or(LuckyPopError::OutOfRange)?;
        if head == self.tail {
            return Ok(None);
        }
        let mut h = [0u8; 16];
        let result = if !read_wrapping(mem, &self.ring, self.tail, &mut h) {
            Err(LuckyPopError::OutOfRange)
        } else {
            let header = parse_header(&h);
            let size = entry_size(u64::from(header.payload_length));
            if size > cap || size > head.wrapping_sub(self.tail) {
                Err(LuckyPopError::ImpossibleLength(header.payload_length))
            } else {
                payload.resize(header.payload_length as usize, 0);
                read_wrapping(mem, &self.ring, self.tail + ENTRY_HEADER_BYTES, payload);
                self.tail += size;
                Ok(Some(header))
            }
        };
        if result.is_err() {
            self.tail = head;
        }
        // Release: the bytes read may now be overwritten; pairs with the producer's
        // Acquire load of tail.
        mem.store_u64(self.ring.offset_bytes + TAIL, self.tail);
        result
    }
}

fn parse_header(h: &[u8; 16]) -> LuckyEntryHeader {
    let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    LuckyEntryHeader {
        correlation_id: word(0),
        method_or_status: word(4),
        payload_length: word(8),
    }
}

/// The luckyrobots ring format for a [`Cursor`].
#[derive(Debug)]
pub struct Lucky;

/// Watches a luckyrobots ring without consuming it (the rules of spec 4.1).
pub type LuckyWatcher = Cursor<Lucky>;

impl EntryFormat for Lucky {
    fn positions(ring: &RingGeometry) -> Positions {
        Positions {
            mask: u64::MAX,
            capacity: u64::from(ring.capacity_bytes),
        }
    }

    fn load_write(mem: &impl RingRead, ring: &RingGeometry) -> Option<u64> {
        // Acquire: pairs with the producer's Release store of head.
        mem.load_u64(ring.offset_bytes + HEAD)
    }

    fn load_read(mem: &impl RingRead, ring: &RingGeometry) -> Option<u64> {
        // Acquire: pairs with the consumer's Release store of tail.
        mem.load_u64(ring.offset_bytes + TAIL)
    }

    fn read_item(mem: &impl RingRead, ring: &RingGeometry, p: u64, end: u64) -> CursorRead {
        let cap = u64::from(ring.capacity_bytes);
        let available = end.wrapping_sub(p);
        let malformed = |error: String| {
            let mut raw = vec![0u8; MAX_RAW_BYTES.min(ring.capacity_bytes as usize)];
            if !read_wrapping(mem, ring, p, &mut raw) {
                raw.clear();
            }
            CursorRead::Copied {
                end: p,
                bytes: raw,
                item: Item::Malformed { error },
            }
        };
        let mut h = [0u8; 16];
        if available < ENTRY_HEADER_BYTES {
            return malformed("an entry header extends past head".into());
        }
        if !read_wrapping(mem, ring, p, &mut h) {
            return CursorRead::Unreadable;
        }
        let header = parse_header(&h);
        let size = entry_size(u64::from(header.payload_length));
        if size > cap || size > available {
            return malformed(format!(
                "payload length {} is beyond {}",
                header.payload_length,
                if size > cap { "the capacity" } else { "head" }
            ));
        }
        let mut bytes = vec![0u8; ENTRY_HEADER_BYTES as usize + header.payload_length as usize];
        if !read_wrapping(mem, ring, p, &mut bytes) {
            return CursorRead::Unreadable;
        }
        if bytes[..16] != h {
            return CursorRead::Torn;
        }
        CursorRead::Copied {
            end: p.wrapping_add(size),
            bytes,
            item: Item::Entry {
                header: ENTRY_HEADER_BYTES as usize,
                lucky: Some(header),
            },
        }
    }

    fn recopy(mem: &impl RingRead, ring: &RingGeometry, p: u64, buf: &mut [u8]) -> bool {
        read_wrapping(mem, ring, p, buf)
    }

    fn margin(ring: &RingGeometry, _w: u64, largest_entry: u64) -> u64 {
        // Entries split at the end of the data area: no skip.
        let cap = u64::from(ring.capacity_bytes);
        (cap / 4).max(largest_entry).min(cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{RegionKind, RingFormat};
    use crate::rings::WatchEvent;
    use crate::segment::{Location, SegmentRw};
    use crate::testutil::unique_name;

    fn ring(capacity: u32) -> (Location, SegmentRw, RingGeometry) {
        let location = Location::shm(&unique_name("lucky-ring"));
        let mem = SegmentRw::create_at(&location, 192 + u64::from(capacity), false).unwrap();
        mem.store_u32(CAPACITY, capacity);
        let g = RingGeometry {
            kind: RegionKind::CmdC2s,
            format: RingFormat::Lucky,
            offset_bytes: 0,
            capacity_bytes: capacity,
        };
        (location, mem, g)
    }

    #[test]
    fn entries_split_across_the_end_and_round_trip() {
        let (path, mem, g) = ring(128);
        let mut prod = LuckyProducer::new(&mem, g);
        let mut cons = LuckyConsumer::new(&mem, g);
        let mut watcher = LuckyWatcher::new(&mem, g);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        for i in 0..40u32 {
            let body = format!("{{\"mode\": \"fast\", \"i\": {i}}}");
            let h = LuckyEntryHeader {
                correlation_id: i + 1,
                method_or_status: 2,
                payload_length: 0,
            };
            prod.try_push(&mem, h, body.as_bytes()).unwrap();
            watcher.poll(&mem, &mut out, usize::MAX, 0);
            let got = cons.try_pop(&mem, &mut buf).unwrap().unwrap();
            assert_eq!(got.correlation_id, i + 1);
            assert_eq!(buf, body.as_bytes());
        }
        assert_eq!(watcher.stats.entries, 40);
        assert_eq!(watcher.stats.lost_bytes, 0);
        let bodies: Vec<String> = out
            .iter()
            .filter_map(|e| match e {
                WatchEvent::Entry {
                    payload,
                    lucky: Some(h),
                    ..
                } => {
                    assert_eq!(h.method_or_status, 2);
                    Some(String::from_utf8(payload.clone()).unwrap())
                }
                _ => None,
            })
            .collect();
        assert_eq!(bodies[39], "{\"mode\": \"fast\", \"i\": 39}");
        path.remove_file();
    }

    #[test]
    fn lapping_is_counted_to_the_byte() {
        let (path, mem, g) = ring(256);
        let mut prod = LuckyProducer::new(&mem, g);
        let mut cons = LuckyConsumer::new(&mem, g);
        let mut watcher = LuckyWatcher::new(&mem, g);
        let (mut buf, mut out) = (Vec::new(), Vec::new());
        let h = LuckyEntryHeader {
            correlation_id: 1,
            method_or_status: 1,
            payload_length: 0,
        };
        for i in 0..1000usize {
            prod.try_push(&mem, h, &vec![b'x'; 1 + i % 30]).unwrap();
            cons.try_pop(&mem, &mut buf).unwrap();
            if i % 50 == 0 {
                watcher.poll(&mem, &mut out, usize::MAX, 0);
            }
        }
        // Consumed entries wait for the producer to publish again; a quiet ring settles
        // them after a while.
        watcher.poll(
            &mem,
            &mut out,
            usize::MAX,
            crate::rings::confirm::GIVE_UP_NS,
        );
        assert_eq!(watcher.held_len(), 0);
        let s = watcher.stats;
        assert!(s.lost_bytes > 0);
        assert_eq!(s.bytes + s.lost_bytes, mem.load_u64(HEAD).unwrap());
        path.remove_file();
    }

    #[test]
    fn an_impossible_length_is_malformed() {
        let (path, mem, g) = ring(128);
        let mut watcher = LuckyWatcher::new(&mem, g);
        let mut h = [0u8; 16];
        h[8..12].copy_from_slice(&5000u32.to_le_bytes());
        mem.write_at(DATA, &h);
        mem.store_u64(HEAD, 16);
        let mut out = Vec::new();
        watcher.poll(&mem, &mut out, usize::MAX, 0);
        assert!(matches!(&out[0], WatchEvent::Malformed { error, .. } if error.contains("5000")));
        path.remove_file();
    }
}
