//! Mapping segments. The only module with `unsafe` besides `platform`: every other
//! module reads and writes segments through the bounds-checked methods here, which load
//! and store the spec's atomic words atomically and copy bytes out (or in) without ever
//! handing out a reference into the live mapping.
//!
//! - [`Segment`]: a read-only mapping (the inspector). No method writes.
//! - [`SegmentRw`]: a writable mapping (the simulated engine and client).
//! - [`ControlPages`]: the two control rings only, mapped writable to claim, use and
//!   release the control lease (spec 7). Only the rings' own bytes can be reached.
//!
//! A segment is found at a [`Location`]: a file (Linux `/dev/shm/NAME`, or any path) or,
//! on Windows, a named file mapping. The operating-system side of each lives in a
//! backend (`unix.rs`, `windows.rs`). On Linux a file may shrink under a mapping; see
//! [`sigbus`]. Windows refuses to shrink a mapped file, and a named mapping cannot
//! change size.

#[cfg(unix)]
pub mod sigbus;
#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as sys;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as sys;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::layout::ByteSource;
use crate::layout::headers::{LrbcHeader, LuckyHeader};
pub use crate::platform::monotonic_now_ns;
use core::mem::offset_of;

#[cfg(not(target_endian = "little"))]
compile_error!("LRBC is little-endian and this tool copies words natively");

/// The directory POSIX shared-memory objects live in on Linux.
pub const SHM_DIR: &str = "/dev/shm";

/// Where `--shm NAME` looks on this platform, for messages.
pub const SHM_PLACE: &str = if cfg!(windows) {
    "the named file mappings of this session"
} else {
    SHM_DIR
};

/// Where a segment is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A file: `/dev/shm/NAME` on Linux (symlinks never followed), or a path given by
    /// the user (followed).
    File { path: PathBuf, follow: Follow },
    /// A named file mapping (Windows): the name as given, then `Local\NAME`, then
    /// `Global\NAME`.
    Named(String),
}

impl Location {
    /// Where `--shm NAME` points on this platform.
    pub fn shm(name: &str) -> Self {
        if cfg!(windows) {
            Self::Named(name.to_string())
        } else {
            Self::File {
                path: Path::new(SHM_DIR).join(name),
                follow: Follow::NoSymlinks,
            }
        }
    }

    /// A path given by the user (symlinks followed).
    pub fn path(path: &Path) -> Self {
        Self::File {
            path: path.to_path_buf(),
            follow: Follow::Symlinks,
        }
    }

    /// The file's path, for a file.
    pub fn file_path(&self) -> Option<&Path> {
        match self {
            Self::File { path, .. } => Some(path),
            Self::Named(_) => None,
        }
    }

    /// Removes the file, if this is a file and it is there (tests and benchmarks clean
    /// up their own segments with it). A named mapping goes with its last handle.
    pub fn remove_file(&self) {
        if let Self::File { path, .. } = self {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Whether something is there now (a file of any kind, or a mapping of that name).
    pub fn exists(&self) -> bool {
        match self {
            Self::File { path, .. } => std::fs::symlink_metadata(path).is_ok(),
            Self::Named(name) => sys::name_exists(name),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File { path, .. } => write!(f, "{}", path.display()),
            Self::Named(name) => write!(f, "{name}"),
        }
    }
}

/// Identity of a file, to tell a replacement under the same name from the original
/// (device and inode; on Windows volume serial number and file index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
}

/// What has happened to the file behind a mapping since it was mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Same file, same size, still linked under its name.
    Intact,
    /// The file is shorter than the mapping: reads past its end see zeros.
    Truncated { size_bytes: u64 },
    /// The file is longer than the mapping (re-initialised in place).
    Grown { size_bytes: u64 },
    /// The name no longer exists (or names nothing of ours) and nothing replaced it.
    Unlinked,
    /// Another file now has the name.
    Replaced,
}

/// Why a segment cannot be opened or mapped. `path` is the location as shown to the user
/// (a path, or a mapping's name).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: not found")]
    NotFound { path: PathBuf },
    #[error("{path}: permission denied")]
    PermissionDenied { path: PathBuf },
    #[error("{path}: is a symbolic link; names in {SHM_DIR} are never followed")]
    Symlink { path: PathBuf },
    #[error("{path}: not a regular file but {kind}; a segment is a regular file")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{path}: already exists (use --force to replace it)")]
    Exists { path: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl OpenError {
    fn from_io(path: &Path, source: io::Error) -> Self {
        let path = path.to_path_buf();
        match source.kind() {
            io::ErrorKind::NotFound => Self::NotFound { path },
            io::ErrorKind::PermissionDenied => Self::PermissionDenied { path },
            io::ErrorKind::AlreadyExists => Self::Exists { path },
            _ if sys::is_symlink_loop(&source) => Self::Symlink { path },
            _ => Self::Io { path, source },
        }
    }

    fn other(path: &Path, msg: impl Into<String>) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source: io::Error::other(msg.into()),
        }
    }
}

/// How to open a path: names under `/dev/shm` never follow symlinks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Follow {
    Symlinks,
    NoSymlinks,
}

/// What a file that is not a regular file is, for the error that refuses it.
fn file_kind(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        sys::special_file_kind(t)
    }
}

/// The size of a named mapping's segment, from the header words that give it
/// (`total_size` at 256 in the extension block, or at 112 in the luckyrobots layout):
/// a view is rounded up to whole pages, so its length is the segment's only when
/// neither says otherwise. A word counts when the view is that size rounded up to a
/// page; anything else (a header that claims more than the view, or garbage) leaves the
/// view's length, against which the layout is then validated.
pub fn logical_size(view_bytes: u64, ext_total: u64, lucky_total: u64, page_bytes: u64) -> u64 {
    let fits = |t: u64| t > 0 && t <= view_bytes && view_bytes - t < page_bytes.max(1);
    [ext_total, lucky_total]
        .into_iter()
        .find(|&t| fits(t))
        .unwrap_or(view_bytes)
}

/// The part shared by every mapping: base pointer, length, and the SIGBUS guard.
#[derive(Debug)]
struct Raw {
    // Declared before the map so it is dropped (deregistered) before the unmap.
    #[cfg(unix)]
    guard: sigbus::Guard,
    base: *mut u8,
    len: usize,
    /// For a view that can be released while read (Windows named mappings): every
    /// access holds it open (`enter`).
    gate: Option<std::sync::Arc<sys::Gate>>,
}

// SAFETY: `Raw` is a pointer into a shared mapping that lives as long as its owner;
// all access through it is atomic or bounds-checked copying, which is sound from any
// thread (the memory is shared with other processes anyway).
unsafe impl Send for Raw {}
// SAFETY: as above; no method hands out references into the mapping.
unsafe impl Sync for Raw {}

impl Raw {
    fn new(base: *mut u8, len: usize) -> Self {
        Self {
            #[cfg(unix)]
            guard: sigbus::register(base as usize, len),
            base,
            len,
            gate: None,
        }
    }

    fn gated(mut self, gate: Option<std::sync::Arc<sys::Gate>>) -> Self {
        self.gate = gate;
        self
    }

    /// Holds a releasable view open for one access (Some(None) when there is no gate);
    /// None once the view was released: every access then fails, as out of range.
    fn enter(&self) -> Option<Option<impl Sized + '_>> {
        match &self.gate {
            None => Some(None),
            Some(g) => g.enter().map(Some),
        }
    }

    /// Pages read as zeros because the file had shrunk (Linux only).
    fn faults(&self) -> u64 {
        #[cfg(unix)]
        return self.guard.faults();
        #[cfg(not(unix))]
        0
    }

    /// True when a shrinking file cannot crash reads (always, where files mapped cannot
    /// shrink).
    fn shrink_safe(&self) -> bool {
        #[cfg(unix)]
        return self.guard.is_protected() || self.len == 0;
        #[cfg(not(unix))]
        true
    }

    /// Checks `[offset, offset + len)` is inside the mapping and returns its start.
    fn range(&self, offset: u64, len: usize) -> Option<*mut u8> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: start <= end <= self.len, so the result is inside (or one past) the mapping.
        Some(unsafe { self.base.add(start) })
    }

    fn word<T>(&self, offset: u64) -> Option<*mut T> {
        let size = size_of::<T>();
        let ptr = self.range(offset, size)?;
        (ptr as usize).is_multiple_of(size).then_some(ptr.cast())
    }

    fn load_u64(&self, offset: u64) -> Option<u64> {
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

    fn load_u32(&self, offset: u64) -> Option<u32> {
        let _open = self.enter()?;
        let ptr = self.word::<u32>(offset)?;
        // SAFETY: as in `load_u64`.
        let atomic = unsafe { AtomicU32::from_ptr(ptr) };
        // Acquire: pairs with the writer's Release store of this word.
        Some(atomic.load(Ordering::Acquire))
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
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
fn segment_len(location: &Location, base: *mut u8, len: usize) -> usize {
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
    let page = crate::platform::page_size();
    usize::try_from(logical_size(len as u64, ext_total, lucky_total, page)).unwrap_or(len)
}

/// Closes every view and handle this process has of the named mapping `name` (Windows),
/// so that the name can die with its engine and a restarted engine can create it again.
/// Every access through a released view fails as out of range; `health` then says
/// `Unlinked` until a mapping of that name exists again (`Replaced`). Returns how many
/// views it closed (always 0 on Unix, where files are not held by their readers).
pub fn release_named(name: &str) -> usize {
    sys::release_named(name)
}

/// Bytes read as f32s, native (little-endian) order.
pub fn f32s_from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A read-only mapping of a whole segment. Nothing can be written through it.
#[derive(Debug)]
pub struct Segment {
    // Declared before the backing so that it is dropped before the unmap.
    raw: Raw,
    backing: sys::Backing,
    location: Location,
}

impl Segment {
    /// Maps `path` read-only (the file is opened read-only, the mapping read-only).
    pub fn open(path: &Path, follow: Follow) -> Result<Self, OpenError> {
        Self::open_at(&Location::File {
            path: path.to_path_buf(),
            follow,
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
    /// the size its header gives, see [`logical_size`]).
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
                follow: Follow::NoSymlinks,
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
    pub fn open(path: &Path, follow: Follow) -> Result<Self, OpenError> {
        Self::open_at(&Location::File {
            path: path.to_path_buf(),
            follow,
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
        let Location::File { path, follow } = &self.location else {
            return Err(OpenError::other(
                target,
                "a named mapping cannot be moved to a path",
            ));
        };
        sys::rename(path, target, replace)?;
        self.location = Location::File {
            path: target.to_path_buf(),
            follow: *follow,
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
        match sys::path_identity(path, Follow::NoSymlinks) {
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
        let granule = crate::platform::allocation_granularity();
        let page = crate::platform::page_size();
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

#[cfg(test)]
mod size_tests {
    use super::logical_size;

    #[test]
    fn a_named_view_is_as_long_as_its_header_says_when_that_rounds_up_to_it() {
        // 10_000 bytes in a view of 12_288 (three 4 KiB pages).
        assert_eq!(logical_size(12_288, 10_000, 0, 4096), 10_000);
        assert_eq!(logical_size(12_288, 0, 10_000, 4096), 10_000, "luckyrobots");
        assert_eq!(
            logical_size(12_288, 12_288, 0, 4096),
            12_288,
            "a whole page"
        );
        // A header that claims more than the view, or a size far below it, or nothing:
        // the view's length, against which the layout is then validated (and fails).
        assert_eq!(logical_size(12_288, 20_000, 0, 4096), 12_288);
        assert_eq!(logical_size(12_288, 4_000, 0, 4096), 12_288);
        assert_eq!(logical_size(12_288, 0, 0, 4096), 12_288);
        // The extension block's word wins over the luckyrobots word.
        assert_eq!(logical_size(12_288, 9_000, 10_000, 4096), 9_000);
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::fs::OpenOptions;
    use std::os::unix::fs::PermissionsExt as _;

    fn temp_shm(tag: &str) -> PathBuf {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        Path::new(SHM_DIR).join(format!(
            "lrbc-unit-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ))
    }

    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn a_created_segment_is_owner_only_and_readable_read_only() {
        let path = temp_shm("mode");
        let _rm = Remove(path.clone());
        let rw = SegmentRw::create(&path, 8192, false).unwrap();
        let word = LrbcHeader::FRAME_SEQ_OFFSET;
        assert!(rw.store_u64(word, 77));
        assert!(rw.write_at(100, b"hello"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let ro = Segment::open(&path, Follow::NoSymlinks).unwrap();
        assert_eq!(ro.load_u64(word), Some(77));
        assert_eq!(ro.read_vec(100, 5).as_deref(), Some(&b"hello"[..]));
        assert_eq!(ro.load_u64(word + 1), None, "misaligned loads are refused");
        assert_eq!(ro.load_u64(8192), None, "out of range loads are refused");
        assert!(!ro.read_at(8190, &mut [0u8; 4]));
        assert_eq!(ro.health(), Health::Intact);
        assert!(matches!(
            SegmentRw::create(&path, 8192, false),
            Err(OpenError::Exists { .. })
        ));
    }

    #[test]
    fn reading_a_shrunk_segment_sees_zeros_instead_of_crashing() {
        let path = temp_shm("shrink");
        let _rm = Remove(path.clone());
        let size = 64 * 4096;
        let rw = SegmentRw::create(&path, size, false).unwrap();
        assert!(rw.write_at(0, &vec![0xAB; size as usize]));
        let ro = Segment::open(&path, Follow::NoSymlinks).unwrap();
        assert!(ro.is_shrink_safe());
        drop(rw);
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4096)
            .unwrap();
        let mut buf = vec![0u8; size as usize];
        assert!(ro.read_at(0, &mut buf));
        assert!(buf[..4096].iter().all(|&b| b == 0xAB));
        assert!(buf[8192..].iter().all(|&b| b == 0));
        assert_eq!(ro.load_u64(size - 8), Some(0));
        assert!(ro.sigbus_faults() >= 62, "faults: {}", ro.sigbus_faults());
        assert_eq!(ro.health(), Health::Truncated { size_bytes: 4096 });
    }

    #[test]
    fn health_tells_unlinked_from_replaced() {
        let path = temp_shm("health");
        let _rm = Remove(path.clone());
        let rw = SegmentRw::create(&path, 4096, false).unwrap();
        let ro = Segment::open(&path, Follow::NoSymlinks).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(ro.health(), Health::Unlinked);
        let _new = SegmentRw::create(&path, 4096, false).unwrap();
        assert_eq!(ro.health(), Health::Replaced);
        drop(rw);
    }

    #[test]
    fn fifos_sockets_devices_and_directories_are_refused_without_blocking() {
        let fifo = temp_shm("fifo");
        let _rm = Remove(fifo.clone());
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let sock = temp_shm("sock");
        let _rm2 = Remove(sock.clone());
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        // Opening a FIFO for reading with no writer blocks forever: run the opens on a
        // thread and wait for their answer with a deadline instead of hanging the test.
        let (tx, rx) = std::sync::mpsc::sync_channel(8);
        let paths = [
            (fifo.clone(), "a FIFO"),
            (sock.clone(), "a socket"),
            (PathBuf::from("/dev/null"), "a character device"),
            (PathBuf::from(SHM_DIR), "a directory"),
        ];
        let opener = std::thread::Builder::new().name("test-open".into());
        let _ = opener.spawn(move || {
            for (path, kind) in paths {
                for follow in [Follow::Symlinks, Follow::NoSymlinks] {
                    let ro = Segment::open(&path, follow).map(|_| ());
                    let rw = SegmentRw::open(&path, follow).map(|_| ());
                    let _ = tx.send((path.clone(), kind, ro, rw));
                }
            }
        });
        for _ in 0..8 {
            let (path, kind, ro, rw) = rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("opening a non-regular file blocked");
            for r in [ro, rw] {
                match r {
                    Err(e @ OpenError::NotRegular { .. }) => {
                        let line = e.to_string();
                        assert!(line.contains(kind), "{line}");
                        assert!(!line.contains('\n'));
                    }
                    other => panic!("{} gave {other:?}", path.display()),
                }
            }
        }
    }

    #[test]
    fn symlinks_are_not_followed_for_shm_names() {
        let target = temp_shm("target");
        let link = temp_shm("link");
        let _rm = (Remove(target.clone()), Remove(link.clone()));
        let _rw = SegmentRw::create(&target, 4096, false).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(
            Segment::open(&link, Follow::NoSymlinks),
            Err(OpenError::Symlink { .. })
        ));
        assert!(Segment::open(&link, Follow::Symlinks).is_ok());
    }
}
