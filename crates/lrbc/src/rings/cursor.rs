//! The cursor of a watcher, which reads a ring without consuming it (spec 4.1), for
//! either ring format: a position of its own, every entry copied out and kept only once
//! it is known that the producer did not overwrite it during the copy (`confirm`), every
//! byte passed counted as seen or lost.

use super::confirm::{Copy, Held, Item, Positions, Verdict};
use super::{RingRead, RingStats, WatchEvent};
use crate::layout::RingGeometry;

/// What a ring format reads at a cursor.
#[derive(Debug)]
pub enum CursorRead {
    /// The bytes and what they are; `end` is where the next entry starts.
    Copied {
        end: u64,
        bytes: Vec<u8>,
        item: Item,
    },
    /// The bytes changed between two reads of the same copy: the producer is writing
    /// over them.
    Torn,
    /// The mapping could not be read (the ring lies outside it).
    Unreadable,
}

/// The parts of a ring format a cursor needs.
pub trait EntryFormat: std::fmt::Debug {
    fn positions(ring: &RingGeometry) -> Positions;
    /// The producer's position (Acquire: pairs with the producer's Release store).
    fn load_write(mem: &impl RingRead, ring: &RingGeometry) -> Option<u64>;
    /// The consumer's position (Acquire: pairs with the consumer's Release store).
    fn load_read(mem: &impl RingRead, ring: &RingGeometry) -> Option<u64>;
    /// Reads the item at `p`, knowing that the producer has published up to `end`.
    fn read_item(mem: &impl RingRead, ring: &RingGeometry, p: u64, end: u64) -> CursorRead;
    /// Copies `buf.len()` bytes from position `p` again.
    fn recopy(mem: &impl RingRead, ring: &RingGeometry, p: u64, buf: &mut [u8]) -> bool;
    /// The most the producer may be writing beyond `w` (the entry in flight, with the
    /// wrap skip in front of it if the format has one), given the largest entry seen.
    fn margin(ring: &RingGeometry, w: u64, largest_entry: u64) -> u64;
}

/// Watches one ring of format `F`.
#[derive(Debug)]
pub struct Cursor<F: EntryFormat> {
    pub ring: RingGeometry,
    /// Where the next item will be read. Copies held lie between the first held copy's
    /// position and this.
    pub cursor: u64,
    largest_entry: u64,
    pub stats: RingStats,
    held: Held,
    _format: std::marker::PhantomData<F>,
}

impl<F: EntryFormat> Cursor<F> {
    /// Starts at the consumer's position (entries before it have unknown boundaries).
    pub fn new(mem: &impl RingRead, ring: RingGeometry) -> Self {
        Self {
            cursor: F::load_read(mem, &ring).unwrap_or(0),
            ring,
            largest_entry: 8,
            stats: RingStats::default(),
            held: Held::default(),
            _format: std::marker::PhantomData,
        }
    }

    /// The producer's position now (the cursor if it cannot be read).
    pub fn write_pos(&self, mem: &impl RingRead) -> u64 {
        F::load_write(mem, &self.ring).unwrap_or(self.cursor)
    }

    /// Where everything before is accounted for (seen or lost): the first held copy, or
    /// the cursor.
    pub fn settled(&self) -> u64 {
        self.held.front().map_or(self.cursor, |c| c.position)
    }

    /// Copies waiting to be settled.
    pub fn held_len(&self) -> usize {
        self.held.len()
    }

    /// Reads every item published up to the producer's position loaded now, at most
    /// `max_events` events; `now_ns` is the monotonic clock (for copies of a quiet ring).
    pub fn poll(
        &mut self,
        mem: &impl RingRead,
        out: &mut Vec<WatchEvent>,
        max_events: usize,
        now_ns: u64,
    ) {
        let w = self.write_pos(mem);
        self.poll_to(mem, out, max_events, w, now_ns);
    }

    /// Like `poll`, but reads no further than `end`, a producer position loaded earlier.
    pub fn poll_to(
        &mut self,
        mem: &impl RingRead,
        out: &mut Vec<WatchEvent>,
        max_events: usize,
        end: u64,
        now_ns: u64,
    ) {
        let pos = F::positions(&self.ring);
        let start = out.len();
        if !pos.at_or_after(end, self.cursor) {
            self.lose_held(out);
            let e = WatchEvent::Malformed {
                position: self.cursor,
                error: format!(
                    "the producer's position went back from {} to {end}: the ring was re-initialised",
                    self.cursor
                ),
                raw: Vec::new(),
            };
            self.stats.record(&e);
            out.push(e);
            self.cursor = end;
            return;
        }
        self.settle(mem, out, now_ns);
        // A resynchronisation may have taken the cursor past `end`: stop there too.
        while self.cursor != end
            && pos.at_or_after(end, self.cursor)
            && out.len() - start < max_events
            && !self.held.blocked()
        {
            let p = self.cursor;
            let Some(w) = F::load_write(mem, &self.ring) else {
                break;
            };
            if pos.distance(w, p) > pos.capacity {
                // Lapped before it was read.
                self.lose_from_settled(mem, out);
                break;
            }
            let (end_of_item, bytes, item) = match F::read_item(mem, &self.ring, p, end) {
                CursorRead::Copied { end, bytes, item } => (end, bytes, item),
                CursorRead::Torn => {
                    self.lose_from_settled(mem, out);
                    break;
                }
                CursorRead::Unreadable => break,
            };
            let (Some(w2), Some(r2)) = (
                F::load_write(mem, &self.ring),
                F::load_read(mem, &self.ring),
            ) else {
                break;
            };
            let Some(unread) = pos.check(p, w2, r2) else {
                self.lose_from_settled(mem, out);
                break;
            };
            let malformed = matches!(item, Item::Malformed { .. });
            self.held.push(Copy {
                position: p,
                end: end_of_item,
                bytes,
                item,
                checked_w: w2,
                unread,
                copied_ns: now_ns,
            });
            if !malformed {
                self.cursor = end_of_item;
            }
            self.settle(mem, out, now_ns);
        }
    }

    /// Settles held copies, oldest first, as far as the rules allow.
    fn settle(&mut self, mem: &impl RingRead, out: &mut Vec<WatchEvent>, now_ns: u64) {
        let pos = F::positions(&self.ring);
        while let Some(front) = self.held.front() {
            let Some(w) = F::load_write(mem, &self.ring) else {
                return;
            };
            let margin = F::margin(&self.ring, w, self.largest_entry);
            match pos.verdict(front, w, now_ns, margin) {
                Verdict::Keep => self.keep(mem, out, false),
                Verdict::KeepAtRisk => self.keep(mem, out, true),
                Verdict::Wait => return,
                Verdict::Lost => {
                    self.lose_from_settled(mem, out);
                    return;
                }
                Verdict::Recopy => {
                    let mut again = vec![0u8; front.bytes.len()];
                    let same = F::recopy(mem, &self.ring, front.position, &mut again)
                        && again == front.bytes;
                    let still = F::load_write(mem, &self.ring) == Some(w);
                    if !still {
                        // The producer published meanwhile: rule 3 decides.
                        continue;
                    }
                    if same {
                        self.keep(mem, out, false);
                    } else {
                        self.lose_from_settled(mem, out);
                        return;
                    }
                }
            }
        }
    }

    /// Emits the oldest held copy.
    fn keep(&mut self, mem: &impl RingRead, out: &mut Vec<WatchEvent>, at_risk: bool) {
        let Some(c) = self.held.pop() else {
            return;
        };
        let size = F::positions(&self.ring).distance(c.end, c.position);
        match c.item {
            Item::Entry { header, lucky } => {
                self.largest_entry = self.largest_entry.max(size);
                self.stats.bytes += size;
                let mut payload = c.bytes;
                payload.drain(..header.min(payload.len()));
                let e = WatchEvent::Entry {
                    position: c.position,
                    payload,
                    lucky,
                    at_risk,
                };
                self.stats.record(&e);
                out.push(e);
            }
            Item::Skip => self.stats.bytes += size,
            Item::Malformed { error } => {
                let e = WatchEvent::Malformed {
                    position: c.position,
                    error,
                    raw: c.bytes,
                };
                self.stats.record(&e);
                out.push(e);
                // The entry's size is unknown: what follows it up to the resync is lost.
                self.cursor = c.position;
                self.lose_from_settled(mem, out);
            }
        }
    }

    /// Drops every held copy and what follows, and resynchronises: to the consumer's
    /// position if it is ahead (its boundaries are known), else to the producer's. The
    /// bytes passed are reported lost.
    fn lose_from_settled(&mut self, mem: &impl RingRead, out: &mut Vec<WatchEvent>) {
        let pos = F::positions(&self.ring);
        let from = self.settled();
        self.held.clear();
        let w = F::load_write(mem, &self.ring).unwrap_or(self.cursor);
        let r = F::load_read(mem, &self.ring).unwrap_or(w);
        let r_ahead = pos.at_or_after(r, from) && r != from && pos.distance(w, r) <= pos.capacity;
        let target = if r_ahead { r } else { w };
        let target = if pos.at_or_after(target, from) {
            target
        } else {
            from
        };
        self.cursor = target;
        self.report_lost(out, pos.distance(target, from));
    }

    /// Drops the held copies as lost without moving the cursor back.
    fn lose_held(&mut self, out: &mut Vec<WatchEvent>) {
        let pos = F::positions(&self.ring);
        let from = self.settled();
        self.held.clear();
        self.report_lost(out, pos.distance(self.cursor, from));
    }

    fn report_lost(&mut self, out: &mut Vec<WatchEvent>, lost_bytes: u64) {
        if lost_bytes > 0 {
            let e = WatchEvent::Lost {
                lost_bytes,
                lost_entries: None,
            };
            self.stats.record(&e);
            out.push(e);
        }
    }

    /// Bytes of the copies held.
    pub fn held_bytes(&self) -> usize {
        self.held.bytes()
    }
}
