//! The part every mapping shares: a base pointer and length into a mapping, atomic
//! loads and bounds-checked copies, and the SIGBUS guard.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use core::mem::offset_of;

#[cfg(unix)]
use super::sigbus;
use super::{Location, logical_size, sys};
use crate::layout::headers::{LrbcHeader, LuckyHeader};

/// The part shared by every mapping: base pointer, length, and the SIGBUS guard.
#[derive(Debug)]
pub(super) struct Raw {
    // Declared before the map so it is dropped (deregistered) before the unmap.
    #[cfg(unix)]
    guard: sigbus::SigbusGuard,
    base: *mut u8,
    pub(super) len: usize,
    /// For a view that can be released while read (Windows named mappings): every
    /// access holds it open (`enter`).
    gate: Option<std::sync::Arc<sys::Gate>>,
}

// SAFETY: `Raw` is a pointer into a shared mapping that lives as long as its owner;
// all access through it is atomic or bounds-checked copying, which is sound from any
// thread (the memory is shared with other processes anyway).
unsafe impl Send for Raw {}
// SAFETY: as above; the one reference into the mapping handed out (`with_f32s`) is
// shared, read-only and lives for the time of one call.
unsafe impl Sync for Raw {}

impl Raw {
    pub(super) fn new(base: *mut u8, len: usize) -> Self {
        Self {
            #[cfg(unix)]
            guard: sigbus::register(base as usize, len),
            base,
            len,
            gate: None,
        }
    }

    pub(super) fn gated(mut self, gate: Option<std::sync::Arc<sys::Gate>>) -> Self {
        self.gate = gate;
        self
    }

    /// Holds a releasable view open for one access (Some(None) when there is no gate);
    /// None once the view was released: every access then fails, as out of range.
    pub(super) fn enter(&self) -> Option<Option<impl Sized + '_>> {
        match &self.gate {
            None => Some(None),
            Some(g) => g.enter().map(Some),
        }
    }

    /// Pages read as zeros because the file had shrunk (Linux only).
    pub(super) fn faults(&self) -> u64 {
        #[cfg(unix)]
        return self.guard.faults();
        #[cfg(not(unix))]
        0
    }

    /// True when a shrinking file cannot crash reads (always, where files mapped cannot
    /// shrink).
    pub(super) fn shrink_safe(&self) -> bool {
        #[cfg(unix)]
        return self.guard.is_protected() || self.len == 0;
        #[cfg(not(unix))]
        true
    }

    /// Checks `[offset, offset + len)` is inside the mapping and returns its start.
    pub(super) fn range(&self, offset: u64, len: usize) -> Option<*mut u8> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: start <= end <= self.len, so the result is inside (or one past) the mapping.
        Some(unsafe { self.base.add(start) })
    }

    pub(super) fn word<T>(&self, offset: u64) -> Option<*mut T> {
        let size = size_of::<T>();
        let ptr = self.range(offset, size)?;
        (ptr as usize).is_multiple_of(size).then_some(ptr.cast())
    }

    pub(super) fn load_u64(&self, offset: u64) -> Option<u64> {
        let _open = self.enter()?;
        let ptr = self.word::<u64>(offset)?;
        // SAFETY: aligned and in bounds (checked by `word`), valid while `self` lives.
        // Every writer of a spec atomic word uses atomic stores. Acquire loads of up to
        // pointer size are allowed on read-only memory (std::sync::atomic, "Atomic
        // accesses to read-only memory"), which covers the read-only mapping.
        let atomic = unsafe { AtomicU64::from_ptr(ptr) };
        // Acquire: pairs with the writer's Release store of this word (frame_seq,
        // action_seq, write_seq, ring positions), so data written before it is visible.
        Some(atomic.load(Ordering::Acquire))
    }

    pub(super) fn load_u32(&self, offset: u64) -> Option<u32> {
        let _open = self.enter()?;
        let ptr = self.word::<u32>(offset)?;
        // SAFETY: as in `load_u64`.
        let atomic = unsafe { AtomicU32::from_ptr(ptr) };
        // Acquire: pairs with the writer's Release store of this word.
        Some(atomic.load(Ordering::Acquire))
    }

    /// Calls `f` with the `count` f32s at `offset`, in place. None: the range is outside
    /// the mapping, not aligned for f32, or the view was released.
    pub(super) fn with_f32s<R>(
        &self,
        offset: u64,
        count: usize,
        f: impl FnOnce(&[f32]) -> R,
    ) -> Option<R> {
        let _open = self.enter()?;
        let src = self.range(offset, count.checked_mul(size_of::<f32>())?)?;
        if src.align_offset(align_of::<f32>()) != 0 {
            return None;
        }
        // SAFETY: `src..src + count * 4` is inside the mapping (checked by `range`), held
        // open for the call (`_open`), aligned for f32 (checked above), and every bit
        // pattern is an f32. Other processes may write these bytes while `f` reads them,
        // as they may during a copy (`read_at`): callers detect that with the spec's
        // sequence counters and discard what `f` made of a torn frame. The slice lives
        // for the call only. Pages past a shrunk file's end read as zeros (the SIGBUS
        // guard).
        let values = unsafe { std::slice::from_raw_parts(src.cast::<f32>().cast_const(), count) };
        let r = f(values);
        // Acquire fence: orders `f`'s reads before any following re-read of a sequence
        // counter (the seqlock read side of spec 3.2), as after a copy.
        std::sync::atomic::fence(Ordering::Acquire);
        Some(r)
    }

    pub(super) fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        let Some(_open) = self.enter() else {
            return false;
        };
        let Some(src) = self.range(offset, buf.len()) else {
            return false;
        };
        // SAFETY: `src..src+len` is inside the mapping and cannot overlap the caller's
        // buffer. Other processes may write these bytes concurrently; callers detect that
        // with the spec's sequence counters and discard torn copies. Pages past a shrunk
        // file's end are patched with zeros by the SIGBUS guard instead of faulting.
        unsafe { std::ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), buf.len()) };
        // Acquire fence: orders the copy before any following re-read of a sequence
        // counter (the seqlock read side of spec 3.2 and 4.1).
        std::sync::atomic::fence(Ordering::Acquire);
        true
    }
}

/// The length of the segment in a whole mapping of `len` bytes at `base`: a file's
/// size, or what the header of a named mapping says (its view is page-rounded; see
/// [`logical_size`]).
pub(super) fn segment_len(location: &Location, base: *mut u8, len: usize) -> usize {
    if !matches!(location, Location::Named(_)) {
        return len;
    }
    let view = Raw::new(base, len);
    let ext_total = view
        .load_u64(offset_of!(LrbcHeader, total_size) as u64)
        .unwrap_or(0);
    let lucky_total = view
        .load_u64(offset_of!(LuckyHeader, total_size) as u64)
        .unwrap_or(0);
    let page = lrbc_platform::page_size();
    usize::try_from(logical_size(len as u64, ext_total, lucky_total, page)).unwrap_or(len)
}
