//! [`ControlPages`]: the two control rings, mapped writable while the control lease is
//! claimed or held.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use super::raw::Raw;
use super::{OpenError, Segment, sys};

/// The two control rings, mapped writable (spec 7): the only writable mapping the
/// inspector ever makes, and only while it holds or claims the lease. Offsets stay
/// absolute (from the segment start), and only the rings' own bytes (their 64-byte
/// header and their data) can be read or written: any other offset is refused, even
/// where the view around a ring covers more.
///
/// A view starts where the platform allows one to start: a page (Linux; a ring starts
/// on a page, so its view covers its own pages only) or the 64 KiB allocation
/// granularity (Windows; the view then also covers up to 64 KiB of whatever precedes
/// the ring, which this type never reaches).
#[derive(Debug)]
pub struct ControlPages {
    pieces: Vec<Piece>,
}

#[derive(Debug)]
struct Piece {
    /// The ring's bytes, `[start, start + len)` from the segment start.
    start: u64,
    len: u64,
    /// Where the view begins, from the segment start.
    view_start: u64,
    // Declared before the view so that it is dropped before the unmap.
    raw: Raw,
    _view: sys::View,
}

impl ControlPages {
    /// Maps `ranges` (offset, length) of `segment` writable, through a new handle on the
    /// same file or mapping, after checking that it is still the one `segment` maps.
    pub fn map(segment: &Segment, ranges: &[(u64, u64)]) -> Result<Self, OpenError> {
        let granule = lrbc_platform::allocation_granularity();
        let page = lrbc_platform::page_size();
        let mut pieces = Vec::new();
        for &(start, len) in ranges {
            let end = start
                .checked_add(len)
                .filter(|&e| e <= segment.len())
                .ok_or_else(|| {
                    OpenError::other(
                        Path::new(&segment.location.to_string()),
                        format!(
                            "control ring [{start}, +{len}) lies outside the {}-byte segment",
                            segment.len()
                        ),
                    )
                })?;
            let view_start = start - start % granule;
            let view_len = (end - view_start).div_ceil(page) * page;
            let (view, base, mapped) =
                segment
                    .backing
                    .map_writable(&segment.location, view_start, view_len)?;
            pieces.push(Piece {
                start,
                len,
                view_start,
                raw: Raw::new(base, mapped).gated(sys::view_gate(&view)),
                _view: view,
            });
        }
        Ok(Self { pieces })
    }

    /// The view holding `[offset, offset + len)` of one ring, and the offset inside it.
    fn locate(&self, offset: u64, len: usize) -> Option<(&Raw, u64)> {
        let end = offset.checked_add(len as u64)?;
        self.pieces.iter().find_map(|p| {
            (offset >= p.start && end <= p.start + p.len).then(|| (&p.raw, offset - p.view_start))
        })
    }

    pub fn load_u32(&self, offset: u64) -> Option<u32> {
        let (raw, rel) = self.locate(offset, 4)?;
        raw.load_u32(rel)
    }

    pub fn load_u64(&self, offset: u64) -> Option<u64> {
        let (raw, rel) = self.locate(offset, 8)?;
        raw.load_u64(rel)
    }

    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        self.locate(offset, buf.len())
            .is_some_and(|(raw, rel)| raw.read_at(rel, buf))
    }

    pub fn store_u32(&self, offset: u64, value: u32) -> bool {
        let Some((raw, rel)) = self.locate(offset, 4) else {
            return false;
        };
        let Some(_open) = raw.enter() else {
            return false;
        };
        let Some(ptr) = raw.word::<u32>(rel) else {
            return false;
        };
        // SAFETY: aligned and inside the writable control-ring mapping; ring words are
        // only ever accessed atomically.
        let atomic = unsafe { AtomicU32::from_ptr(ptr) };
        // Release: pairs with the engine's Acquire loads of ring words (write_pos of
        // ctl_c2s publishes a request; read_pos of ctl_s2c frees a response's bytes).
        atomic.store(value, Ordering::Release);
        true
    }

    pub fn write_at(&self, offset: u64, bytes: &[u8]) -> bool {
        let Some((raw, rel)) = self.locate(offset, bytes.len()) else {
            return false;
        };
        let Some(_open) = raw.enter() else {
            return false;
        };
        let Some(dst) = raw.range(rel, bytes.len()) else {
            return false;
        };
        // SAFETY: inside the writable control-ring mapping, not overlapping `bytes`;
        // the engine reads these bytes only after the Release store of write_pos.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
        true
    }

    pub fn compare_exchange_u32(&self, offset: u64, current: u32, new: u32) -> Option<u32> {
        let (raw, rel) = self.locate(offset, 4)?;
        let _open = raw.enter()?;
        let ptr = raw.word::<u32>(rel)?;
        // SAFETY: as in `store_u32`.
        let atomic = unsafe { AtomicU32::from_ptr(ptr) };
        // AcqRel: the lease word; pairs with the previous holder's Release store of 0
        // (release) and publishes our claim to later claimants.
        Some(
            match atomic.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(v) | Err(v) => v,
            },
        )
    }
}
