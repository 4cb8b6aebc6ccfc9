//! Copies of ring entries that wait for proof that the producer did not overwrite them
//! while they were copied. `docs/rings.md` states the rule and what it relies on; in
//! short, for a copy of the bytes at `[p, end)` followed by loads of the producer's
//! position `w` and the consumer's `r`:
//!
//! 1. `w - p > capacity`: lapped, lost.
//! 2. `p >= r` (not consumed yet): kept at once. The producer never writes beyond the
//!    consumer's position plus the capacity.
//! 3. Otherwise the copy waits for the producer's next publication `w' > w`: it is kept if
//!    `w' - p <= capacity` (every byte the producer can have been writing during the copy
//!    lies before `w'`), lost otherwise.
//! 4. While `w` stays put: after [`GRACE_NS`] the copy is kept if a second copy matches
//!    it and it is more than one margin away from being lapped; after [`GIVE_UP_NS`] it
//!    is counted lost.
//!
//! Copies are settled strictly in ring order: once one is lost, every copy after it was
//! parsed from bytes that cannot be trusted, and the watcher starts over at the
//! consumer's or producer's position.

use std::collections::VecDeque;

use super::LuckyEntryHeader;

/// How long a copy waits for the producer to publish before a second copy may confirm
/// it (the producer is idle, or stopped).
pub const GRACE_NS: u64 = 20_000_000;
/// How long a copy within one margin of being lapped waits for the producer before it
/// is counted lost.
pub const GIVE_UP_NS: u64 = 1_000_000_000;

/// What the copied bytes turned out to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A whole entry; `header` bytes of `bytes` precede the payload.
    Entry {
        header: usize,
        lucky: Option<LuckyEntryHeader>,
    },
    /// A wrap marker: the bytes to the end of the data area are skipped.
    Skip,
    /// Bytes that are not an entry; what follows them is unknown.
    Malformed { error: String },
}

/// One copy and the positions loaded after it.
#[derive(Clone, Debug)]
pub struct Copy {
    /// Where it starts (free-running position).
    pub position: u64,
    /// The position after it (where the next entry starts); `position` for a malformed
    /// entry, whose size is unknown.
    pub end: u64,
    /// Every byte the decision rests on, as copied (the entry with its header, the wrap
    /// marker, the bad length word).
    pub bytes: Vec<u8>,
    pub item: Item,
    /// The producer's position loaded after the copy.
    pub checked_w: u64,
    /// The consumer had not read it yet: rule 2 applies.
    pub unread: bool,
    pub copied_ns: u64,
}

/// What to do with the oldest copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    /// Kept, but within one margin of being lapped when it was settled.
    KeepAtRisk,
    Lost,
    Wait,
    /// Rule 4 applies: keep if a second copy of `bytes` matches.
    Recopy,
}

/// Position arithmetic of one ring: free-running counters of `mask + 1` values.
#[derive(Clone, Copy, Debug)]
pub struct Positions {
    pub mask: u64,
    pub capacity: u64,
}

impl Positions {
    /// `a - b` in the ring's counter width.
    pub fn distance(self, a: u64, b: u64) -> u64 {
        a.wrapping_sub(b) & self.mask
    }

    /// True if `a` is at or after `b` (within half the counter range).
    pub fn at_or_after(self, a: u64, b: u64) -> bool {
        self.distance(a, b) <= self.mask / 2
    }

    /// The checks right after a copy of `[p, …)`, given the positions loaded after it:
    /// `None` if it is lapped already (rule 1), else whether the consumer had yet to
    /// read it (rule 2).
    pub fn check(self, p: u64, w: u64, r: u64) -> Option<bool> {
        if self.distance(w, p) > self.capacity {
            return None;
        }
        Some(self.at_or_after(p, r) && self.distance(w, r) <= self.capacity)
    }

    /// Rules 2 to 4 for a copy, with the producer's position `w` loaded now. A copy
    /// kept by rule 3 while the producer is within `margin` of lapping it is kept "at
    /// risk": if its bytes then fail verification, the reader counts it lost, not
    /// malformed.
    pub fn verdict(self, c: &Copy, w: u64, now_ns: u64, margin: u64) -> Verdict {
        if c.unread {
            return Verdict::Keep;
        }
        let behind = self.distance(w, c.position);
        if behind > self.capacity {
            return Verdict::Lost;
        }
        let slack = self.capacity - behind;
        if w != c.checked_w {
            // The entry in flight during the copy has been published: it ended at or
            // before w, which is within one capacity of the copy.
            return if slack < margin {
                Verdict::KeepAtRisk
            } else {
                Verdict::Keep
            };
        }
        let age = now_ns.saturating_sub(c.copied_ns);
        if age >= GRACE_NS && slack >= margin {
            Verdict::Recopy
        } else if age >= GIVE_UP_NS {
            Verdict::Lost
        } else {
            Verdict::Wait
        }
    }
}

/// Copies in ring order, waiting to be settled.
#[derive(Debug, Default)]
pub struct Held {
    copies: VecDeque<Copy>,
}

impl Held {
    pub fn push(&mut self, c: Copy) {
        self.copies.push_back(c);
    }

    pub fn front(&self) -> Option<&Copy> {
        self.copies.front()
    }

    pub fn pop(&mut self) -> Option<Copy> {
        self.copies.pop_front()
    }

    pub fn is_empty(&self) -> bool {
        self.copies.is_empty()
    }

    pub fn len(&self) -> usize {
        self.copies.len()
    }

    pub fn clear(&mut self) {
        self.copies.clear();
    }

    /// A malformed entry waits at the end: nothing after it can be parsed until it is
    /// settled.
    pub fn blocked(&self) -> bool {
        self.copies
            .back()
            .is_some_and(|c| matches!(c.item, Item::Malformed { .. }))
    }

    /// Bytes of the copies held.
    pub fn bytes(&self) -> usize {
        self.copies.iter().map(|c| c.bytes.capacity()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Positions = Positions {
        mask: u32::MAX as u64,
        capacity: 4096,
    };

    fn copy(position: u64, checked_w: u64, unread: bool) -> Copy {
        Copy {
            position,
            end: position + 64,
            bytes: vec![0; 64],
            item: Item::Skip,
            checked_w,
            unread,
            copied_ns: 0,
        }
    }

    #[test]
    fn unread_copies_are_kept_at_once_and_lapped_ones_are_lost() {
        assert_eq!(P.check(1000, 2000, 900), Some(true));
        assert_eq!(P.check(1000, 2000, 1100), Some(false));
        assert_eq!(P.check(1000, 1000 + 4097, 900), None);
        // Across the wrap of the counter.
        let p = u64::from(u32::MAX) - 10;
        assert_eq!(P.check(p, 100, p - 5), Some(true));
        assert_eq!(
            P.verdict(&copy(1000, 2000, true), 2000, 0, 1024),
            Verdict::Keep
        );
        // Lapped after an unread copy was made: the copy is still good.
        assert_eq!(
            P.verdict(&copy(1000, 2000, true), 5097, 0, 1024),
            Verdict::Keep
        );
    }

    #[test]
    fn a_consumed_copy_waits_for_the_next_publication() {
        let c = copy(1000, 2000, false);
        assert_eq!(P.verdict(&c, 2000, 1_000_000, 1024), Verdict::Wait);
        // Published, and still within a capacity: the entry in flight ended before it.
        assert_eq!(P.verdict(&c, 2100, 1_000_000, 1024), Verdict::Keep);
        assert_eq!(P.verdict(&c, 4500, 1_000_000, 1024), Verdict::KeepAtRisk);
        // Published past a capacity: the copy may hold bytes of the entry in flight.
        assert_eq!(P.verdict(&c, 5097, 1_000_000, 1024), Verdict::Lost);
    }

    #[test]
    fn a_quiet_producer_settles_copies_by_a_second_copy_or_gives_up() {
        let c = copy(1000, 2000, false);
        assert_eq!(P.verdict(&c, 2000, GRACE_NS, 1024), Verdict::Recopy);
        // Within one margin of being lapped: only a publication can tell.
        let close = copy(1000, 4500, false);
        assert_eq!(P.verdict(&close, 4500, GRACE_NS, 1024), Verdict::Wait);
        assert_eq!(P.verdict(&close, 4500, GIVE_UP_NS, 1024), Verdict::Lost);
    }
}
