//! Bounded histories: the oldest entries go when one is full.

use std::collections::VecDeque;

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

    /// The item at `i`, oldest first.
    pub fn get(&self, i: usize) -> Option<&T> {
        self.items.get(i)
    }

    /// The index of the first item for which `pred` is false, the items being those for
    /// which it holds and then those for which it does not (a binary search).
    pub fn partition_point(&self, pred: impl FnMut(&T) -> bool) -> usize {
        self.items.partition_point(pred)
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }
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
}
