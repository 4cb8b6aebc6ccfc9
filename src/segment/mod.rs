//! Mapping segments. The only module with `unsafe`: every other module reads and writes
//! segments through the bounds-checked methods here, which load and store the spec's
//! atomic words atomically and copy bytes out (or in) without ever handing out a
//! reference into the live mapping.
//!
//! - [`Segment`]: a read-only mapping (the inspector). No method writes.
//! - [`SegmentRw`]: a writable mapping (the simulated engine and client).
//! - [`ControlPages`]: the pages of the two control rings only, mapped writable to claim,
//!   use and release the control lease (spec 7).
//!
//! A segment may shrink under any of them; see [`sigbus`].

pub mod sigbus;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::{Mmap, MmapMut, MmapOptions};

use crate::layout::ByteSource;
pub use crate::platform::monotonic_now_ns;

#[cfg(not(target_endian = "little"))]
compile_error!("LRBC is little-endian and this tool copies words natively");

/// The directory POSIX shared-memory objects live in on Linux.
pub const SHM_DIR: &str = "/dev/shm";

/// Identity of a file, to tell a replacement under the same name from the original.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
}

impl FileIdentity {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
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

/// Why a file cannot be opened or mapped.
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
            _ if source.raw_os_error() == Some(libc::ELOOP) => Self::Symlink { path },
            _ => Self::Io { path, source },
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
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "not a file"
    }
}

/// Opens a regular file. Anything else (FIFO, socket, device, directory) is refused
/// before it is opened, since opening a FIFO for reading blocks until a writer comes and
/// opening a device may act on it; the open itself is non-blocking, so a file swapped
/// for a FIFO between the check and the open cannot block either.
fn open_file(path: &Path, write: bool, follow: Follow) -> Result<File, OpenError> {
    let before = match follow {
        Follow::Symlinks => std::fs::metadata(path),
        Follow::NoSymlinks => std::fs::symlink_metadata(path),
    }
    .map_err(|e| OpenError::from_io(path, e))?;
    let not_regular = |t: std::fs::FileType| OpenError::NotRegular {
        path: path.to_path_buf(),
        kind: file_kind(t),
    };
    if before.file_type().is_symlink() {
        return Err(OpenError::Symlink {
            path: path.to_path_buf(),
        });
    }
    if !before.file_type().is_file() {
        return Err(not_regular(before.file_type()));
    }
    let mut flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    if follow == Follow::NoSymlinks {
        flags |= libc::O_NOFOLLOW;
    }
    let file = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| OpenError::from_io(path, e))?;
    let meta = file.metadata().map_err(|e| OpenError::from_io(path, e))?;
    if !meta.file_type().is_file() {
        return Err(not_regular(meta.file_type()));
    }
    Ok(file)
}

/// The part shared by every mapping: base pointer, length, and the SIGBUS guard.
#[derive(Debug)]
struct Raw {
    // Declared before the map so it is dropped (deregistered) before the unmap.
    guard: sigbus::Guard,
    base: *mut u8,
    len: usize,
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
            guard: sigbus::register(base as usize, len),
            base,
            len,
        }
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
        let ptr = self.word::<u32>(offset)?;
        // SAFETY: as in `load_u64`.
        let atomic = unsafe { AtomicU32::from_ptr(ptr) };
        // Acquire: pairs with the writer's Release store of this word.
        Some(atomic.load(Ordering::Acquire))
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
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
    raw: Raw,
    _map: Option<Mmap>,
    file: File,
    path: PathBuf,
    follow: Follow,
    identity: FileIdentity,
}

impl Segment {
    /// Maps `path` read-only (the file is opened `O_RDONLY`, the mapping `PROT_READ`).
    pub fn open(path: &Path, follow: Follow) -> Result<Self, OpenError> {
        let file = open_file(path, false, follow)?;
        let meta = file.metadata().map_err(|e| OpenError::from_io(path, e))?;
        let len = usize::try_from(meta.len()).map_err(|_| OpenError::Io {
            path: path.to_path_buf(),
            source: io::Error::other("file is larger than the address space"),
        })?;
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the file is mapped shared and read-only. Other processes may change
            // or shrink it; this type never hands out references into the mapping (only
            // atomic loads and copies), and shrinking is handled by the SIGBUS guard.
            Some(
                unsafe { MmapOptions::new().len(len).map(&file) }
                    .map_err(|e| OpenError::from_io(path, e))?,
            )
        };
        let base = map
            .as_ref()
            .map_or(std::ptr::null_mut(), |m| m.as_ptr().cast_mut());
        Ok(Self {
            raw: Raw::new(base, if map.is_some() { len } else { 0 }),
            _map: map,
            identity: FileIdentity::of(&meta),
            file,
            path: path.to_path_buf(),
            follow,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn identity(&self) -> FileIdentity {
        self.identity
    }

    /// Length of the mapping (the file's size when it was mapped).
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

    /// Pages of this mapping that were read as zeros because the file had shrunk.
    pub fn sigbus_faults(&self) -> u64 {
        self.raw.guard.faults()
    }

    /// True when a shrinking file cannot crash reads from this mapping.
    pub fn is_shrink_safe(&self) -> bool {
        self.raw.guard.is_protected() || self.raw.len == 0
    }

    /// What has happened to the file since it was mapped: `fstat` on our descriptor for
    /// size and link count, `lstat` on the path for a replacement.
    pub fn health(&self) -> Health {
        let Ok(meta) = self.file.metadata() else {
            return Health::Unlinked;
        };
        let by_path = match self.follow {
            Follow::Symlinks => std::fs::metadata(&self.path),
            Follow::NoSymlinks => std::fs::symlink_metadata(&self.path),
        };
        match by_path {
            Ok(p) if FileIdentity::of(&p) != self.identity => return Health::Replaced,
            Ok(_) => {}
            Err(_) => return Health::Unlinked,
        }
        if meta.nlink() == 0 {
            return Health::Unlinked;
        }
        let size_bytes = meta.len();
        match size_bytes.cmp(&self.len()) {
            std::cmp::Ordering::Less => Health::Truncated { size_bytes },
            std::cmp::Ordering::Greater => Health::Grown { size_bytes },
            std::cmp::Ordering::Equal => Health::Intact,
        }
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
    _map: MmapMut,
    _file: File,
    path: PathBuf,
}

impl SegmentRw {
    /// Creates `path` with mode 0600 and the given size, zero-filled, and maps it.
    /// Fails if it exists unless `replace` is set (then the old file is unlinked first,
    /// so processes attached to it see it replaced, not rewritten).
    pub fn create(path: &Path, size_bytes: u64, replace: bool) -> Result<Self, OpenError> {
        if replace {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(OpenError::from_io(path, e)),
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| OpenError::from_io(path, e))?;
        // The umask cannot widen 0600, but make sure of the mode the spec requires.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .and_then(|()| file.set_len(size_bytes))
            .map_err(|e| OpenError::from_io(path, e))?;
        Self::map(file, path)
    }

    /// Maps an existing file read-write (the simulated client).
    pub fn open(path: &Path, follow: Follow) -> Result<Self, OpenError> {
        let file = open_file(path, true, follow)?;
        Self::map(file, path)
    }

    fn map(file: File, path: &Path) -> Result<Self, OpenError> {
        let len = file
            .metadata()
            .map_err(|e| OpenError::from_io(path, e))?
            .len();
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l > 0)
            .ok_or_else(|| OpenError::Io {
                path: path.to_path_buf(),
                source: io::Error::other("cannot map an empty or oversized file"),
            })?;
        // SAFETY: mapped shared read-write; the mapping is only accessed through atomic
        // words and bounds-checked copies, never through references; shrinking is
        // handled by the SIGBUS guard.
        let mut map = unsafe { MmapOptions::new().len(len).map_mut(&file) }
            .map_err(|e| OpenError::from_io(path, e))?;
        Ok(Self {
            raw: Raw::new(map.as_mut_ptr(), len),
            _map: map,
            _file: file,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Moves the file to `target` in one step, so that readers see it appear fully
    /// initialised. Refuses to replace an existing file unless `replace` is set.
    pub fn publish(&mut self, target: &Path, replace: bool) -> Result<(), OpenError> {
        use std::os::unix::ffi::OsStrExt as _;
        let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).ok();
        let (Some(from), Some(to)) = (c(&self.path), c(target)) else {
            return Err(OpenError::Io {
                path: target.to_path_buf(),
                source: io::Error::other("path contains a NUL byte"),
            });
        };
        let flags = if replace { 0 } else { libc::RENAME_NOREPLACE };
        // SAFETY: both are valid NUL-terminated paths; renameat2 only reads them.
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                flags,
            )
        };
        if rc != 0 {
            return Err(OpenError::from_io(target, io::Error::last_os_error()));
        }
        self.path = target.to_path_buf();
        Ok(())
    }

    /// Identity of the mapped file.
    pub fn identity(&self) -> Option<FileIdentity> {
        self._file.metadata().ok().map(|m| FileIdentity::of(&m))
    }

    /// Removes the file's name if it still names this file (not a replacement).
    pub fn unlink_if_ours(&self) -> bool {
        let ours = self.identity();
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if Some(FileIdentity::of(&m)) == ours => std::fs::remove_file(&self.path).is_ok(),
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

/// Reads f32s out of a read-only segment.
impl Segment {
    pub fn read_f32s(&self, offset: u64, out: &mut [f32]) -> bool {
        use zerocopy::IntoBytes as _;
        self.raw.read_at(offset, out.as_mut_bytes())
    }
}

/// The pages of the two control rings, mapped writable (spec 7): the only writable
/// mapping the inspector ever makes, and only while it holds or claims the lease.
/// Offsets stay absolute (from the segment start); anything outside the rings' pages
/// is refused.
#[derive(Debug)]
pub struct ControlPages {
    pieces: Vec<(u64, Raw, MmapMut)>,
    _file: File,
}

impl ControlPages {
    /// Maps `ranges` (offset, length) of the file at `path` writable. Each offset must
    /// be page-aligned; lengths are rounded up to whole pages. The file must still be the
    /// one with `identity` (not a replacement).
    pub fn map(
        path: &Path,
        follow: Follow,
        identity: FileIdentity,
        ranges: &[(u64, u64)],
    ) -> Result<Self, OpenError> {
        let file = open_file(path, true, follow)?;
        let meta = file.metadata().map_err(|e| OpenError::from_io(path, e))?;
        let other = |msg: String| OpenError::Io {
            path: path.to_path_buf(),
            source: io::Error::other(msg),
        };
        if FileIdentity::of(&meta) != identity {
            return Err(other(
                "the segment was replaced since it was attached".into(),
            ));
        }
        let page = crate::platform::page_size();
        let mut pieces = Vec::new();
        for &(offset, len) in ranges {
            if offset % page != 0 {
                return Err(other(format!(
                    "control ring at offset {offset} is not aligned to the {page}-byte page"
                )));
            }
            let mapped_len = len.div_ceil(page) * page;
            if offset + mapped_len > meta.len() {
                return Err(other(format!(
                    "control ring pages [{offset}, {}) lie outside the {}-byte segment",
                    offset + mapped_len,
                    meta.len()
                )));
            }
            let mapped = usize::try_from(mapped_len).map_err(|_| other("ring too large".into()))?;
            // SAFETY: maps only the page-aligned pages of one control ring, shared and
            // writable; accessed only through atomic words and bounds-checked copies
            // (below), never references; shrinking is handled by the SIGBUS guard.
            let mut map = unsafe { MmapOptions::new().offset(offset).len(mapped).map_mut(&file) }
                .map_err(|e| OpenError::from_io(path, e))?;
            let raw = Raw::new(map.as_mut_ptr(), mapped);
            pieces.push((offset, raw, map));
        }
        Ok(Self {
            pieces,
            _file: file,
        })
    }

    /// The piece holding `[offset, offset + len)` and the offset inside it.
    fn locate(&self, offset: u64, len: usize) -> Option<(&Raw, u64)> {
        self.pieces.iter().find_map(|(start, raw, _)| {
            let rel = offset.checked_sub(*start)?;
            (rel + len as u64 <= raw.len as u64).then_some((raw, rel))
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
mod tests {
    use super::*;

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
        assert!(rw.store_u64(32, 77));
        assert!(rw.write_at(100, b"hello"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let ro = Segment::open(&path, Follow::NoSymlinks).unwrap();
        assert_eq!(ro.load_u64(32), Some(77));
        assert_eq!(ro.read_vec(100, 5).as_deref(), Some(&b"hello"[..]));
        assert_eq!(ro.load_u64(33), None, "misaligned loads are refused");
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
