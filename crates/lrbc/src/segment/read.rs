//! [`Segment`]: a read-only mapping of a whole segment (the inspector).

use std::path::Path;

use super::raw::{Raw, segment_len};
use super::{Health, Location, OpenError, Symlinks, sys};
use crate::layout::ByteSource;

/// A read-only mapping of a whole segment. Nothing can be written through it.
#[derive(Debug)]
pub struct Segment {
    // Declared before the backing so that it is dropped before the unmap.
    raw: Raw,
    pub(super) backing: sys::Backing,
    pub(super) location: Location,
}

impl Segment {
    /// Maps `path` read-only (the file is opened read-only, the mapping read-only).
    pub fn open(path: &Path, symlinks: Symlinks) -> Result<Self, OpenError> {
        Self::open_at(&Location::File {
            path: path.to_path_buf(),
            symlinks,
        })
    }

    /// Maps the segment at `location` read-only.
    pub fn open_at(location: &Location) -> Result<Self, OpenError> {
        let (backing, base, len) = sys::Backing::open_read(location)?;
        Ok(Self {
            raw: Raw::new(base, segment_len(location, base, len)).gated(backing.gate()),
            backing,
            location: location.clone(),
        })
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Length of the mapping (the file's size when it was mapped; for a named mapping,
    /// the size its header gives, see [`logical_size`](super::logical_size)).
    pub fn len(&self) -> u64 {
        self.raw.len as u64
    }

    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }

    /// Atomic (Acquire) load of an aligned u64; `None` when out of range or misaligned.
    pub fn load_u64(&self, offset: u64) -> Option<u64> {
        self.raw.load_u64(offset)
    }

    /// Atomic (Acquire) load of an aligned u32; `None` when out of range or misaligned.
    pub fn load_u32(&self, offset: u64) -> Option<u32> {
        self.raw.load_u32(offset)
    }

    /// Copies bytes out; false when the range is outside the mapping.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        self.raw.read_at(offset, buf)
    }

    /// Copies `len` bytes out.
    pub fn read_vec(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let mut v = vec![0u8; len];
        self.read_at(offset, &mut v).then_some(v)
    }

    /// Copies f32s out.
    pub fn read_f32s(&self, offset: u64, out: &mut [f32]) -> bool {
        use zerocopy::IntoBytes as _;
        self.raw.read_at(offset, out.as_mut_bytes())
    }

    /// Calls `f` with the `count` f32s at `offset` where they lie, without a copy (for a
    /// test of many values at once). Another process may write them meanwhile: what `f`
    /// makes of them holds only if the spec's sequence counters say no write happened
    /// (as for a copy). None: the range is outside the mapping or not aligned for f32.
    pub fn with_f32s<R>(
        &self,
        offset: u64,
        count: usize,
        f: impl FnOnce(&[f32]) -> R,
    ) -> Option<R> {
        self.raw.with_f32s(offset, count, f)
    }

    /// Pages of this mapping that were read as zeros because the file had shrunk.
    pub fn sigbus_faults(&self) -> u64 {
        self.raw.faults()
    }

    /// True when a shrinking file cannot crash reads from this mapping.
    pub fn is_shrink_safe(&self) -> bool {
        self.raw.shrink_safe()
    }

    /// What has happened to the segment since it was mapped. For a file: its size and
    /// link count through our handle, and a replacement through its path. A named
    /// mapping cannot shrink, grow or be replaced while it is open.
    pub fn health(&self) -> Health {
        self.backing.health(&self.location, self.len())
    }
}

impl ByteSource for Segment {
    fn len_bytes(&self) -> u64 {
        self.len()
    }

    fn read_at(&self, offset_bytes: u64, buf: &mut [u8]) -> bool {
        Segment::read_at(self, offset_bytes, buf)
    }
}
