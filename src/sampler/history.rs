//! Bounded histories and how many frames of them the memory budget holds.

use std::collections::VecDeque;

use super::data::{EnvDetail, EnvPoint, FrameAgg, SamplerSettings};

/// A bounded history: the oldest entries go when it is full.
#[derive(Clone, Debug)]
pub struct Ring<T> {
    items: VecDeque<T>,
    capacity: usize,
}

impl<T> Ring<T> {
    pub fn new(capacity: usize) -> Self {
        Self {
            items: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    pub fn push(&mut self, item: T) {
        if self.items.len() >= self.capacity {
            self.items.pop_front();
        } else if self.items.len() == self.items.capacity() {
            // Grow by doubling, but never past the capacity: a full ring's allocation
            // is exactly what the budget gave it.
            let want = (self.items.len() * 2).max(64).min(self.capacity);
            self.items.reserve_exact(want - self.items.len());
        }
        self.items.push_back(item);
    }

    /// Keeps the newest `capacity` items at most, and frees what it no longer needs.
    pub fn set_capacity(&mut self, capacity: usize) {
        let capacity = capacity.max(1);
        if capacity == self.capacity {
            return;
        }
        self.capacity = capacity;
        let excess = self.items.len().saturating_sub(capacity);
        self.items.drain(..excess);
        self.items.shrink_to(capacity);
    }

    /// Bytes of the ring's allocation (the items' own heap data not included).
    pub fn heap_bytes(&self) -> usize {
        crate::memory::heap(self.items.capacity() * size_of::<T>())
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.items.iter()
    }

    pub fn back(&self) -> Option<&T> {
        self.items.back()
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }
}

/// The frames of history and of observation rows that `history_bytes` holds, each at
/// most what the settings ask: up to half for the overview and the watched envs'
/// points, the rest for their rows of `values` floats.
pub fn history_capacities(s: &SamplerSettings, watched: usize, values: usize) -> (usize, usize) {
    let budget = s.history_bytes;
    let per_frame = size_of::<FrameAgg>() + watched * size_of::<EnvPoint>();
    let detail_each = size_of::<EnvDetail>() + crate::memory::heap(values * 4);
    let overview = if watched == 0 { budget } else { budget / 2 };
    let frames = (overview / per_frame).clamp(1, s.history_frames.max(1));
    // The rows take the rest, what the overview leaves of its half included.
    let rows = budget.saturating_sub(frames * per_frame);
    let detail = (rows / (watched * detail_each).max(1)).clamp(1, s.detail_frames.max(1));
    (frames, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_newest_entries() {
        let mut r = Ring::new(3);
        for i in 0..5 {
            r.push(i);
        }
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![2, 3, 4]);
    }

    #[test]
    fn rings_smaller_than_their_first_allocation_work() {
        for capacity in [1, 2, 63, 64, 65] {
            let mut r: Ring<u64> = Ring::new(capacity);
            for i in 0..200 {
                r.push(i);
            }
            assert_eq!(r.len(), capacity);
            assert_eq!(r.back(), Some(&199));
            assert!(r.heap_bytes() <= crate::memory::heap(capacity.max(64) * 8));
        }
    }

    #[test]
    fn a_full_ring_holds_exactly_its_capacity_and_gives_back_what_a_smaller_one_frees() {
        let mut r: Ring<u64> = Ring::new(1_000);
        for i in 0..10_000 {
            r.push(i);
        }
        assert_eq!(r.len(), 1_000);
        assert_eq!(r.heap_bytes(), crate::memory::heap(1_000 * 8));
        r.set_capacity(100);
        assert_eq!(
            r.iter().copied().collect::<Vec<_>>(),
            (9_900..10_000).collect::<Vec<_>>()
        );
        assert!(r.heap_bytes() <= crate::memory::heap(100 * 8));
    }

    #[test]
    fn histories_are_sized_to_their_bytes_or_to_the_frames_asked_for() {
        let per_frame = size_of::<FrameAgg>() + 4 * size_of::<EnvPoint>();
        let per_row = size_of::<EnvDetail>() + crate::memory::heap(112 * 4);
        // The default budget holds train4096's (112 values per env, four envs watched)
        // three minutes of overview at 1 kHz, and rows for the rest of the budget.
        let s = SamplerSettings::default();
        let (frames, detail) = history_capacities(&s, 4, 112);
        assert_eq!(frames, s.history_frames);
        assert!(detail > 10_000 && detail <= s.detail_frames, "{detail}");
        assert!(frames * per_frame + 4 * detail * per_row <= s.history_bytes);
        // A small segment gets all it asks for.
        assert_eq!(
            history_capacities(&s, 4, 6),
            (s.history_frames, s.detail_frames)
        );
        // A tight budget: the overview takes at most half, the rows the rest.
        let tight = SamplerSettings {
            history_bytes: 4 << 20,
            ..SamplerSettings::default()
        };
        let (frames, detail) = history_capacities(&tight, 4, 112);
        assert!(frames < tight.history_frames && detail < tight.detail_frames);
        assert!(frames * per_frame <= tight.history_bytes / 2);
        let used = frames * per_frame + 4 * detail * per_row;
        assert!(used <= tight.history_bytes);
        assert!(
            used + 4 * per_row > tight.history_bytes,
            "{frames} {detail}"
        );
        // No env watched: the overview takes it all.
        assert_eq!(
            history_capacities(&tight, 0, 112).0,
            tight.history_bytes / size_of::<FrameAgg>()
        );
    }
}
