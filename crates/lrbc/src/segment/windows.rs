//! The Windows side of `segment`: named file mappings (what the engine's
//! `MemoryMappedFile.CreateNew(name, …)` creates, backed by the paging file) and files
//! given by path.
//!
//! A named mapping lives while any handle or view of it is open, in any process, and
//! cannot change size: it cannot shrink or be replaced under a reader. A view is rounded
//! up to whole pages; the segment's size comes from its header (see
//! [`super::logical_size`]).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::windows::ffi::OsStrExt as _;
use std::os::windows::fs::OpenOptionsExt as _;
use std::os::windows::io::AsRawHandle as _;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, Weak};

use memmap2::{MmapOptions, MmapRaw};
use windows_sys::Win32::Foundation::{
    CloseHandle, ERROR_ACCESS_DENIED, ERROR_ALREADY_EXISTS, ERROR_FILE_NOT_FOUND, GetLastError,
    HANDLE, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::Storage::FileSystem::{
    BY_HANDLE_FILE_INFORMATION, FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE,
    GetFileInformationByHandle, MOVEFILE_REPLACE_EXISTING, MoveFileExW,
};
use windows_sys::Win32::System::Memory::{
    CreateFileMappingW, FILE_MAP_READ, FILE_MAP_WRITE, MEMORY_BASIC_INFORMATION,
    MEMORY_MAPPED_VIEW_ADDRESS, MapViewOfFile, OpenFileMappingW, PAGE_READWRITE, UnmapViewOfFile,
    VirtualQuery,
};

use super::{FileIdentity, Health, Location, OpenError, Symlinks};

const SHARE_ALL: u32 = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;

/// One view of a named mapping and the handle it came from; both closed when dropped.
#[derive(Debug)]
pub(super) struct NamedView {
    handle: HANDLE,
    base: *mut u8,
}

// SAFETY: a mapping handle and a view address are valid in every thread of the process;
// the view is only reached through `Raw` (atomic words and bounds-checked copies).
unsafe impl Send for NamedView {}
// SAFETY: as above; `NamedView` itself only closes them, once, in `drop`.
unsafe impl Sync for NamedView {}

impl Drop for NamedView {
    fn drop(&mut self) {
        // SAFETY: `base` is the address MapViewOfFile returned and is unmapped once, after
        // every `Raw` over it was dropped (the owners declare their `Raw` first).
        unsafe {
            UnmapViewOfFile(MEMORY_MAPPED_VIEW_ADDRESS {
                Value: self.base.cast(),
            })
        };
        // SAFETY: `handle` was opened by this module and is closed once.
        unsafe { CloseHandle(self.handle) };
    }
}

/// A view of a named mapping that can be closed while other threads read through it:
/// every access holds the read lock for its duration, and closing takes the write
/// lock, so no access ever touches an unmapped view.
#[derive(Debug)]
pub(super) struct Gate {
    view: RwLock<Option<NamedView>>,
    /// The name the mapping was asked for (`Location::Named`).
    name: String,
    /// Whether `release_named` closes it: the inspector's views, whose every access
    /// enters the gate; never a writer's whole-segment view (`SegmentRw`), which does
    /// not.
    releasable: bool,
}

impl Gate {
    /// Holds the view open for one access; None once it was released.
    pub(super) fn enter(&self) -> Option<RwLockReadGuard<'_, Option<NamedView>>> {
        let guard = self.view.read().ok()?;
        guard.is_some().then_some(guard)
    }

    fn is_open(&self) -> bool {
        self.view.read().is_ok_and(|v| v.is_some())
    }
}

/// Every gated view of this process, to release them all by name.
static GATES: Mutex<Vec<Weak<Gate>>> = Mutex::new(Vec::new());

fn gate(view: NamedView, name: &str, releasable: bool) -> Arc<Gate> {
    let g = Arc::new(Gate {
        view: RwLock::new(Some(view)),
        name: name.to_string(),
        releasable,
    });
    if let Ok(mut all) = GATES.lock() {
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&g));
    }
    g
}

/// Closes every view and handle this process has of the mapping `name`; returns how
/// many it closed.
pub(super) fn release_named(name: &str) -> usize {
    let gates: Vec<Arc<Gate>> = GATES.lock().map_or_else(
        |_| Vec::new(),
        |all| all.iter().filter_map(Weak::upgrade).collect(),
    );
    gates
        .iter()
        .filter(|g| g.releasable && g.name == name)
        .filter(|g| g.view.write().is_ok_and(|mut v| v.take().is_some()))
        .count()
}

/// A mapped view (of a file, or of a named mapping), unmapped when dropped.
#[derive(Debug)]
pub(super) enum View {
    File { _map: MmapRaw },
    Named { gate: Arc<Gate> },
}

impl View {
    pub(super) fn gate(&self) -> Option<Arc<Gate>> {
        match self {
            Self::File { .. } => None,
            Self::Named { gate } => Some(Arc::clone(gate)),
        }
    }
}

/// What keeps a segment's mapping alive, and what its health is checked against.
#[derive(Debug)]
pub(super) enum Backing {
    File {
        _map: Option<MmapRaw>,
        file: File,
        identity: FileIdentity,
    },
    Named {
        gate: Arc<Gate>,
        /// The name that opened it (as given, `Local\…` or `Global\…`).
        resolved: String,
    },
}

fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(std::iter::once(0)).collect()
}

fn last_error() -> io::Error {
    // SAFETY: GetLastError only reads this thread's last-error value.
    io::Error::from_raw_os_error(unsafe { GetLastError() } as i32)
}

pub(super) fn is_symlink_loop(_e: &io::Error) -> bool {
    false
}

pub(super) fn special_file_kind(_t: std::fs::FileType) -> &'static str {
    "not a regular file"
}

/// The names a mapping is looked up under: as given, then in the session's (`Local\`)
/// and the global namespace, unless the name already says which.
fn candidates(name: &str) -> Vec<String> {
    if name.contains('\\') {
        vec![name.to_string()]
    } else {
        vec![
            name.to_string(),
            format!("Local\\{name}"),
            format!("Global\\{name}"),
        ]
    }
}

/// Opens the first of the candidate names that exists, with `access`.
fn open_mapping(name: &str, access: u32) -> Result<(HANDLE, String), OpenError> {
    let mut denied = false;
    for candidate in candidates(name) {
        let w = wide(&candidate);
        // SAFETY: `w` is a NUL-terminated UTF-16 name that outlives the call; a null
        // result is checked.
        let h = unsafe { OpenFileMappingW(access, 0, w.as_ptr()) };
        if !h.is_null() {
            return Ok((h, candidate));
        }
        // SAFETY: as in `last_error`.
        denied |= unsafe { GetLastError() } == ERROR_ACCESS_DENIED;
    }
    let path = Path::new(name).to_path_buf();
    Err(if denied {
        OpenError::PermissionDenied { path }
    } else {
        OpenError::NotFound { path }
    })
}

/// Maps a view of `h` with `access`; `len` 0 maps the whole mapping. Returns the view
/// and its length (the page-rounded size of the view when `len` is 0).
fn map_view(
    h: HANDLE,
    access: u32,
    offset: u64,
    len: usize,
    shown: &str,
) -> Result<(NamedView, *mut u8, usize), OpenError> {
    // SAFETY: `h` is a mapping handle opened or created with at least `access`; a null
    // view is checked.
    let addr = unsafe { MapViewOfFile(h, access, (offset >> 32) as u32, offset as u32, len) };
    let base = addr.Value.cast::<u8>();
    if base.is_null() {
        let e = last_error();
        // SAFETY: `h` is ours and not used again.
        unsafe { CloseHandle(h) };
        return Err(OpenError::from_io(Path::new(shown), e));
    }
    let view = NamedView { handle: h, base };
    let mapped = if len > 0 {
        len
    } else {
        // SAFETY: MEMORY_BASIC_INFORMATION is plain data; zeroes are valid.
        let mut info: MEMORY_BASIC_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: `base` is the start of the view just mapped; `info` is writable and its
        // size is passed.
        let got = unsafe {
            VirtualQuery(
                base.cast(),
                &mut info,
                size_of::<MEMORY_BASIC_INFORMATION>(),
            )
        };
        if got == 0 {
            return Err(OpenError::from_io(Path::new(shown), last_error()));
        }
        info.RegionSize
    };
    Ok((view, base, mapped))
}

/// Whether a mapping of that name exists now.
pub(super) fn name_exists(name: &str) -> bool {
    match open_mapping(name, FILE_MAP_READ) {
        Ok((h, _)) => {
            // SAFETY: `h` was just opened and is closed once.
            unsafe { CloseHandle(h) };
            true
        }
        Err(_) => false,
    }
}

fn file_information(file: &File) -> io::Result<BY_HANDLE_FILE_INFORMATION> {
    // SAFETY: BY_HANDLE_FILE_INFORMATION is plain data; zeroes are valid.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: the handle belongs to `file`, which outlives the call; `info` is writable.
    let ok = unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

fn identity_of(info: &BY_HANDLE_FILE_INFORMATION) -> FileIdentity {
    FileIdentity {
        dev: u64::from(info.dwVolumeSerialNumber),
        ino: (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow),
    }
}

/// The identity of the file at `path` now (opened without read or write access).
pub(super) fn path_identity(path: &Path, _symlinks: Symlinks) -> io::Result<FileIdentity> {
    let file = OpenOptions::new()
        .access_mode(0)
        .share_mode(SHARE_ALL)
        .open(path)?;
    file_information(&file).map(|i| identity_of(&i))
}

/// Opens a regular file (a directory or a device is refused with one line).
fn open_file(path: &Path, write: bool) -> Result<File, OpenError> {
    let before = std::fs::metadata(path).map_err(|e| OpenError::from_io(path, e))?;
    if !before.file_type().is_file() {
        return Err(OpenError::NotRegular {
            path: path.to_path_buf(),
            kind: super::file_kind(before.file_type()),
        });
    }
    OpenOptions::new()
        .read(true)
        .write(write)
        .share_mode(SHARE_ALL)
        .open(path)
        .map_err(|e| OpenError::from_io(path, e))
}

impl Backing {
    fn map_file(file: File, path: &Path, write: bool) -> Result<(Self, *mut u8, usize), OpenError> {
        let info = file_information(&file).map_err(|e| OpenError::from_io(path, e))?;
        let size = file
            .metadata()
            .map_err(|e| OpenError::from_io(path, e))?
            .len();
        let len = usize::try_from(size)
            .map_err(|_| OpenError::other(path, "file is larger than the address space"))?;
        if write && len == 0 {
            return Err(OpenError::other(path, "cannot map an empty file"));
        }
        let map = if len == 0 {
            None
        } else {
            let mut options = MmapOptions::new();
            options.len(len);
            // Shared; `segment` never hands out references into it. Windows refuses to
            // shrink a file that is mapped, so reads cannot fault.
            let map = if write {
                options.map_raw(&file)
            } else {
                options.map_raw_read_only(&file)
            };
            Some(map.map_err(|e| OpenError::from_io(path, e))?)
        };
        let base = map
            .as_ref()
            .map_or(std::ptr::null_mut(), MmapRaw::as_mut_ptr);
        let backing = Self::File {
            _map: map,
            file,
            identity: identity_of(&info),
        };
        Ok((backing, base, len))
    }

    fn open_named(name: &str, write: bool) -> Result<(Self, *mut u8, usize), OpenError> {
        let access = if write {
            FILE_MAP_READ | FILE_MAP_WRITE
        } else {
            FILE_MAP_READ
        };
        let (h, resolved) = open_mapping(name, access)?;
        let (view, base, len) = map_view(h, access, 0, 0, name)?;
        Ok((
            Self::Named {
                gate: gate(view, name, !write),
                resolved,
            },
            base,
            len,
        ))
    }

    pub(super) fn open_read(location: &Location) -> Result<(Self, *mut u8, usize), OpenError> {
        match location {
            Location::File { path, .. } => Self::map_file(open_file(path, false)?, path, false),
            Location::Named(name) => Self::open_named(name, false),
        }
    }

    pub(super) fn open_write(location: &Location) -> Result<(Self, *mut u8, usize), OpenError> {
        match location {
            Location::File { path, .. } => Self::map_file(open_file(path, true)?, path, true),
            Location::Named(name) => Self::open_named(name, true),
        }
    }

    /// Creates a file, or a named mapping backed by the paging file (zero-filled). A
    /// live name is refused as existing.
    pub(super) fn create(
        location: &Location,
        size_bytes: u64,
        replace: bool,
    ) -> Result<(Self, *mut u8, usize), OpenError> {
        let name = match location {
            Location::File { path, .. } => {
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
                    .share_mode(SHARE_ALL)
                    .open(path)
                    .map_err(|e| OpenError::from_io(path, e))?;
                file.set_len(size_bytes)
                    .map_err(|e| OpenError::from_io(path, e))?;
                return Self::map_file(file, path, true);
            }
            Location::Named(name) => name,
        };
        let shown = Path::new(name);
        let len = usize::try_from(size_bytes)
            .ok()
            .filter(|&l| l > 0)
            .ok_or_else(|| {
                OpenError::other(shown, "cannot create an empty or oversized mapping")
            })?;
        let w = wide(name);
        // SAFETY: INVALID_HANDLE_VALUE asks for a mapping backed by the paging file; null
        // attributes give the default security (this user only); `w` is a NUL-terminated
        // name that outlives the call; a null result is checked.
        let h = unsafe {
            CreateFileMappingW(
                INVALID_HANDLE_VALUE,
                std::ptr::null(),
                PAGE_READWRITE,
                (size_bytes >> 32) as u32,
                size_bytes as u32,
                w.as_ptr(),
            )
        };
        // SAFETY: as in `last_error`; read at once, before any other call.
        let err = unsafe { GetLastError() };
        if h.is_null() {
            return Err(OpenError::from_io(
                shown,
                io::Error::from_raw_os_error(err as i32),
            ));
        }
        if err == ERROR_ALREADY_EXISTS {
            // SAFETY: `h` is a handle to someone else's live mapping; close ours at once.
            unsafe { CloseHandle(h) };
            return Err(OpenError::Exists {
                path: shown.to_path_buf(),
            });
        }
        let (view, base, mapped) = map_view(h, FILE_MAP_READ | FILE_MAP_WRITE, 0, len, name)?;
        Ok((
            Self::Named {
                gate: gate(view, name, false),
                resolved: name.clone(),
            },
            base,
            mapped,
        ))
    }

    /// The gate of a named mapping's view.
    pub(super) fn gate(&self) -> Option<Arc<Gate>> {
        match self {
            Self::File { .. } => None,
            Self::Named { gate, .. } => Some(Arc::clone(gate)),
        }
    }

    pub(super) fn identity(&self) -> Option<FileIdentity> {
        match self {
            Self::File { identity, .. } => Some(*identity),
            Self::Named { .. } => None,
        }
    }

    /// A file: its size and link count through our handle, a replacement through its
    /// path. A named mapping cannot change while it is open; once released it is
    /// unlinked until a mapping of that name exists again (replaced).
    pub(super) fn health(&self, location: &Location, mapped_len: u64) -> Health {
        let (file, identity) = match self {
            Self::File { file, identity, .. } => (file, identity),
            Self::Named { gate, .. } if gate.is_open() => return Health::Intact,
            Self::Named { gate, .. } if name_exists(&gate.name) => return Health::Replaced,
            Self::Named { .. } => return Health::Unlinked,
        };
        let Some(path) = location.file_path() else {
            return Health::Intact;
        };
        let Ok(info) = file_information(file) else {
            return Health::Unlinked;
        };
        match path_identity(path, Symlinks::Resolved) {
            Ok(id) if id != *identity => return Health::Replaced,
            Ok(_) => {}
            Err(_) => return Health::Unlinked,
        }
        if info.nNumberOfLinks == 0 {
            return Health::Unlinked;
        }
        let size_bytes = (u64::from(info.nFileSizeHigh) << 32) | u64::from(info.nFileSizeLow);
        match size_bytes.cmp(&mapped_len) {
            std::cmp::Ordering::Less => Health::Truncated { size_bytes },
            std::cmp::Ordering::Greater => Health::Grown { size_bytes },
            std::cmp::Ordering::Equal => Health::Intact,
        }
    }

    /// Maps `[view_start, view_start + view_len)` of the same file or mapping writable,
    /// through a new handle. `view_start` is a multiple of the allocation granularity.
    pub(super) fn map_writable(
        &self,
        location: &Location,
        view_start: u64,
        view_len: u64,
    ) -> Result<(View, *mut u8, usize), OpenError> {
        let shown = location.to_string();
        let len = usize::try_from(view_len)
            .map_err(|_| OpenError::other(Path::new(&shown), "ring too large"))?;
        match self {
            Self::Named {
                resolved,
                gate: ours,
            } => {
                // While our handle is open the name cannot name another mapping.
                if !ours.is_open() {
                    return Err(OpenError::other(
                        Path::new(&shown),
                        "the mapping was released (its engine is gone)",
                    ));
                }
                let (h, _) = open_mapping(resolved, FILE_MAP_READ | FILE_MAP_WRITE)?;
                let (view, base, mapped) =
                    map_view(h, FILE_MAP_READ | FILE_MAP_WRITE, view_start, len, &shown)?;
                let gate = gate(view, &ours.name, true);
                Ok((View::Named { gate }, base, mapped))
            }
            Self::File { identity, .. } => {
                let Some(path) = location.file_path() else {
                    return Err(OpenError::other(Path::new(&shown), "not a file"));
                };
                let file = open_file(path, true)?;
                let info = file_information(&file).map_err(|e| OpenError::from_io(path, e))?;
                if identity_of(&info) != *identity {
                    return Err(OpenError::other(
                        path,
                        "the segment was replaced since it was attached",
                    ));
                }
                let map = MmapOptions::new()
                    .offset(view_start)
                    .len(len)
                    .map_raw(&file)
                    .map_err(|e| OpenError::from_io(path, e))?;
                let base = map.as_mut_ptr();
                Ok((View::File { _map: map }, base, len))
            }
        }
    }
}

/// Moves `from` to `to` in one step (`MoveFileExW`), refusing to replace an existing
/// file unless `replace` is set.
pub(super) fn rename(from: &Path, to: &Path, replace: bool) -> Result<(), OpenError> {
    let w = |p: &Path| -> Vec<u16> {
        p.as_os_str()
            .encode_wide()
            .chain(std::iter::once(0))
            .collect()
    };
    let (from_w, to_w) = (w(from), w(to));
    let flags = if replace {
        MOVEFILE_REPLACE_EXISTING
    } else {
        0
    };
    // SAFETY: both are NUL-terminated UTF-16 paths that outlive the call.
    if unsafe { MoveFileExW(from_w.as_ptr(), to_w.as_ptr(), flags) } == 0 {
        let e = last_error();
        let e = if e.raw_os_error() == Some(ERROR_FILE_NOT_FOUND as i32) {
            io::Error::from(io::ErrorKind::NotFound)
        } else {
            e
        };
        return Err(OpenError::from_io(to, e));
    }
    Ok(())
}

pub(super) fn view_gate(view: &View) -> Option<Arc<Gate>> {
    view.gate()
}
