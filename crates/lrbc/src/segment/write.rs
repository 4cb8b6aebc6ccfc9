//! [`SegmentRw`]: a writable mapping of a whole segment (the simulated engine and
//! client).

use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::raw::{Raw, segment_len};
use super::{FileIdentity, Location, OpenError, Symlinks, sys};
use crate::layout::ByteSource;

/// A writable mapping of a whole segment: the simulated engine and client only.
#[derive(Debug)]
pub struct SegmentRw {
    raw: Raw,
    backing: sys::Backing,
    location: Location,
}

impl SegmentRw {
    /// Creates a file with the given size, zero-filled (mode 0600 on Unix), and maps it.
    /// Fails if it exists unless `replace` is set (then the old file is removed first, so
    /// processes attached to it see it replaced, not rewritten).
    pub fn create(path: &Path, size_bytes: u64, replace: bool) -> Result<Self, OpenError> {
        Self::create_at(
            &Location::File {
                path: path.to_path_buf(),
                symlinks: Symlinks::Refused,
            },
            size_bytes,
            replace,
        )
    }

    /// Creates the segment at `location`: a file as [`SegmentRw::create`], or a named
    /// mapping backed by the paging file (Windows; `replace` cannot apply: a live name
    /// belongs to whoever holds it, so it is refused as existing).
    pub fn create_at(
        location: &Location,
        size_bytes: u64,
        replace: bool,
    ) -> Result<Self, OpenError> {
        let (backing, base, len) = sys::Backing::create(location, size_bytes, replace)?;
        Ok(Self {
            raw: Raw::new(base, len),
            backing,
            location: location.clone(),
        })
    }

    /// Maps an existing file read-write (the simulated client).
    pub fn open(path: &Path, symlinks: Symlinks) -> Result<Self, OpenError> {
        Self::open_at(&Location::File {
            path: path.to_path_buf(),
            symlinks,
        })
    }

    /// Maps an existing segment read-write (the simulated client).
    pub fn open_at(location: &Location) -> Result<Self, OpenError> {
        let (backing, base, len) = sys::Backing::open_write(location)?;
        Ok(Self {
            raw: Raw::new(base, segment_len(location, base, len)),
            backing,
            location: location.clone(),
        })
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Moves the file to `target` in one step, so that readers see it appear fully
    /// initialised. Refuses to replace an existing file unless `replace` is set.
    pub fn publish(&mut self, target: &Path, replace: bool) -> Result<(), OpenError> {
        let Location::File { path, symlinks } = &self.location else {
            return Err(OpenError::other(
                target,
                "a named mapping cannot be moved to a path",
            ));
        };
        sys::rename(path, target, replace)?;
        self.location = Location::File {
            path: target.to_path_buf(),
            symlinks: *symlinks,
        };
        Ok(())
    }

    /// Identity of the mapped file (None for a named mapping).
    pub fn identity(&self) -> Option<FileIdentity> {
        self.backing.identity()
    }

    /// Removes the file's name if it still names this file (not a replacement). A named
    /// mapping has nothing to remove: its name goes with the last handle.
    pub fn unlink_if_ours(&self) -> bool {
        let Location::File { path, .. } = &self.location else {
            return false;
        };
        let ours = self.identity();
        match sys::path_identity(path, Symlinks::Refused) {
            Ok(id) if Some(id) == ours => std::fs::remove_file(path).is_ok(),
            _ => false,
        }
    }

    pub fn len(&self) -> u64 {
        self.raw.len as u64
    }

    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }

    pub fn load_u64(&self, offset: u64) -> Option<u64> {
        self.raw.load_u64(offset)
    }

    pub fn load_u32(&self, offset: u64) -> Option<u32> {
        self.raw.load_u32(offset)
    }

    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        self.raw.read_at(offset, buf)
    }

    /// Release store of an aligned u64 (publishes everything written before it).
    pub fn store_u64(&self, offset: u64, value: u64) -> bool {
        let Some(ptr) = self.raw.word::<u64>(offset) else {
            return false;
        };
        // SAFETY: aligned, in bounds, writable shared memory valid while `self` lives;
        // all accesses to spec atomic words are atomic.
        let atomic = unsafe { AtomicU64::from_ptr(ptr) };
        // Release: pairs with readers' Acquire loads of this word (`Raw::load_u64`).
        atomic.store(value, Ordering::Release);
        true
    }

    /// Release store of an aligned u32.
    pub fn store_u32(&self, offset: u64, value: u32) -> bool {
        let Some(ptr) = self.raw.word::<u32>(offset) else {
            return false;
        };
        // SAFETY: as in `store_u64`.
        let atomic = unsafe { AtomicU32::from_ptr(ptr) };
        // Release: pairs with readers' Acquire loads of this word.
        atomic.store(value, Ordering::Release);
        true
    }

    /// Atomically adds to an aligned u64 and returns the new value.
    pub fn fetch_add_u64(&self, offset: u64, delta: u64) -> Option<u64> {
        let ptr = self.raw.word::<u64>(offset)?;
        // SAFETY: as in `store_u64`.
        let atomic = unsafe { AtomicU64::from_ptr(ptr) };
        // AcqRel: Release publishes the writes before the increment (pairs with readers'
        // Acquire loads); Acquire orders it after the previous owner's increments.
        Some(
            atomic
                .fetch_add(delta, Ordering::AcqRel)
                .wrapping_add(delta),
        )
    }

    /// Makes `write_seq` odd (the engine is about to write) for the seqlock of spec 3.2.
    pub fn seqlock_begin(&self, offset: u64) -> Option<u64> {
        let ptr = self.raw.word::<u64>(offset)?;
        // SAFETY: as in `store_u64`.
        let atomic = unsafe { AtomicU64::from_ptr(ptr) };
        // Relaxed increment followed by a Release fence: the fence keeps the data writes
        // that follow from being seen before the odd value by a reader that pairs with
        // it through its Acquire fence after copying (`Raw::read_at`).
        let odd = atomic.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        std::sync::atomic::fence(Ordering::Release);
        Some(odd)
    }

    /// Copies bytes in; false when the range is outside the mapping.
    pub fn write_at(&self, offset: u64, bytes: &[u8]) -> bool {
        let Some(dst) = self.raw.range(offset, bytes.len()) else {
            return false;
        };
        // SAFETY: `dst..dst+len` is inside the writable mapping and cannot overlap the
        // caller's slice. Concurrent readers detect the write through the counters that
        // the caller updates afterwards.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
        true
    }

    /// Copies f32s in (little-endian).
    pub fn write_f32s(&self, offset: u64, values: &[f32]) -> bool {
        use zerocopy::IntoBytes as _;
        self.write_at(offset, values.as_bytes())
    }

    /// Copies f32s out.
    pub fn read_f32s(&self, offset: u64, out: &mut [f32]) -> bool {
        use zerocopy::IntoBytes as _;
        self.raw.read_at(offset, out.as_mut_bytes())
    }

    /// Atomic compare-and-swap of an aligned u32; returns the value found.
    pub fn compare_exchange_u32(&self, offset: u64, current: u32, new: u32) -> Option<u32> {
        let ptr = self.raw.word::<u32>(offset)?;
        // SAFETY: as in `store_u64`.
        let atomic = unsafe { AtomicU32::from_ptr(ptr) };
        // AcqRel: pairs with the previous holder's Release store of the word.
        Some(
            match atomic.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(v) | Err(v) => v,
            },
        )
    }
}

impl ByteSource for SegmentRw {
    fn len_bytes(&self) -> u64 {
        self.len()
    }

    fn read_at(&self, offset_bytes: u64, buf: &mut [u8]) -> bool {
        SegmentRw::read_at(self, offset_bytes, buf)
    }
}
