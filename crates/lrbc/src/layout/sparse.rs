//! The bytes of a segment that detection reads, kept apart from the segment: a flight
//! recording stores them so that the segment's geometry can be detected again without
//! the segment (`Sparse`), and `Traced` finds out which bytes those are.

use std::cell::RefCell;

use super::ByteSource;

/// Some ranges of a segment of `len_bytes` bytes. A read succeeds only inside one piece.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sparse {
    pub len_bytes: u64,
    /// Offset and bytes, sorted by offset, not overlapping.
    pub pieces: Vec<(u64, Vec<u8>)>,
}

impl ByteSource for Sparse {
    fn len_bytes(&self) -> u64 {
        self.len_bytes
    }

    fn read_at(&self, offset_bytes: u64, buf: &mut [u8]) -> bool {
        // The last piece starting at or before the offset.
        let i = self.pieces.partition_point(|(o, _)| *o <= offset_bytes);
        let Some((start, bytes)) = i.checked_sub(1).and_then(|i| self.pieces.get(i)) else {
            return false;
        };
        bytes.read_at(offset_bytes - start, buf)
    }
}

/// A byte source that remembers every range read from it.
#[derive(Debug)]
pub struct Traced<'a, S: ?Sized> {
    inner: &'a S,
    read: RefCell<Vec<(u64, Vec<u8>)>>,
}

impl<'a, S: ByteSource + ?Sized> Traced<'a, S> {
    pub fn new(inner: &'a S) -> Self {
        Self {
            inner,
            read: RefCell::new(Vec::new()),
        }
    }

    /// What was read, merged into sorted pieces that do not overlap.
    pub fn into_sparse(self) -> Sparse {
        let mut read = self.read.into_inner();
        read.sort_by_key(|(o, b)| (*o, std::cmp::Reverse(b.len())));
        let mut pieces: Vec<(u64, Vec<u8>)> = Vec::new();
        for (offset, bytes) in read {
            if let Some((start, last)) = pieces.last_mut() {
                let end = *start + last.len() as u64;
                if offset <= end {
                    // Overlapping or adjacent: keep what extends past the piece's end.
                    let skip = (end - offset) as usize;
                    if let Some(tail) = bytes.get(skip..) {
                        last.extend_from_slice(tail);
                    }
                    continue;
                }
            }
            pieces.push((offset, bytes));
        }
        Sparse {
            len_bytes: self.inner.len_bytes(),
            pieces,
        }
    }
}

impl<S: ByteSource + ?Sized> ByteSource for Traced<'_, S> {
    fn len_bytes(&self) -> u64 {
        self.inner.len_bytes()
    }

    fn read_at(&self, offset_bytes: u64, buf: &mut [u8]) -> bool {
        let ok = self.inner.read_at(offset_bytes, buf);
        if ok && !buf.is_empty() {
            self.read.borrow_mut().push((offset_bytes, buf.to_vec()));
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traced_read_is_merged_and_read_back_from_the_pieces_alone() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let traced = Traced::new(&bytes);
        let mut buf = [0u8; 10];
        for offset in [500, 0, 5, 100, 505, 510] {
            assert!(traced.read_at(offset, &mut buf));
        }
        assert!(!traced.read_at(995, &mut buf));
        let sparse = traced.into_sparse();
        assert_eq!(sparse.len_bytes, 1000);
        let spans: Vec<(u64, usize)> = sparse.pieces.iter().map(|(o, b)| (*o, b.len())).collect();
        assert_eq!(spans, vec![(0, 15), (100, 10), (500, 20)]);
        for (offset, len) in [(0u64, 15usize), (3, 4), (100, 10), (500, 20), (510, 10)] {
            let mut got = vec![0u8; len];
            assert!(sparse.read_at(offset, &mut got), "{offset}+{len}");
            assert_eq!(got, bytes[offset as usize..offset as usize + len]);
        }
        // Not recorded, or across two pieces: no bytes.
        for (offset, len) in [(15u64, 1usize), (99, 2), (110, 1), (520, 1), (10, 100)] {
            assert!(
                !sparse.read_at(offset, &mut vec![0u8; len]),
                "{offset}+{len}"
            );
        }
    }
}
