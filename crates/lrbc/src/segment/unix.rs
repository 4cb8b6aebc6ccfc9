//! The Unix side of `segment`: segments are files (`/dev/shm/NAME` on Linux, or any
//! path), mapped shared with `mmap`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{
    FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _,
};
use std::path::Path;

use memmap2::{MmapOptions, MmapRaw};

use super::{FileIdentity, Health, Location, OpenError, Symlinks};

/// A mapped view: unmapped when dropped.
pub(super) type View = MmapRaw;

/// Views that can be released while read exist only on Windows (named mappings).
#[derive(Debug)]
pub(super) enum Gate {}

impl Gate {
    pub(super) fn enter(&self) -> Option<()> {
        match *self {}
    }
}

pub(super) fn view_gate(_view: &View) -> Option<std::sync::Arc<Gate>> {
    None
}

/// Nothing to release: a file's name is removed by whoever created it.
pub(super) fn release_named(_name: &str) -> usize {
    0
}

/// What keeps a segment's mapping alive, and what its health is checked against.
#[derive(Debug)]
pub(super) struct Backing {
    _map: Option<MmapRaw>,
    file: File,
    identity: FileIdentity,
}

fn identity_of(meta: &std::fs::Metadata) -> FileIdentity {
    FileIdentity {
        dev: meta.dev(),
        ino: meta.ino(),
    }
}

pub(super) fn is_symlink_loop(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

pub(super) fn special_file_kind(t: std::fs::FileType) -> &'static str {
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

/// Named mappings exist only on Windows.
pub(super) fn name_exists(_name: &str) -> bool {
    false
}

fn named_unsupported(name: &str) -> OpenError {
    OpenError::other(
        Path::new(name),
        "named mappings exist only on Windows; give --shm NAME or --path FILE",
    )
}

fn metadata(path: &Path, symlinks: Symlinks) -> io::Result<std::fs::Metadata> {
    match symlinks {
        Symlinks::Resolved => std::fs::metadata(path),
        Symlinks::Refused => std::fs::symlink_metadata(path),
    }
}

pub(super) fn path_identity(path: &Path, symlinks: Symlinks) -> io::Result<FileIdentity> {
    metadata(path, symlinks).map(|m| identity_of(&m))
}

/// Opens a regular file. Anything else (FIFO, socket, device, directory) is refused
/// before it is opened, since opening a FIFO for reading blocks until a writer comes and
/// opening a device may act on it; the open itself is non-blocking, so a file swapped
/// for a FIFO between the check and the open cannot block either.
fn open_file(path: &Path, write: bool, symlinks: Symlinks) -> Result<File, OpenError> {
    let before = metadata(path, symlinks).map_err(|e| OpenError::from_io(path, e))?;
    let not_regular = |t: std::fs::FileType| OpenError::NotRegular {
        path: path.to_path_buf(),
        kind: super::file_kind(t),
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
    if symlinks == Symlinks::Refused {
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

impl Backing {
    /// Maps the whole file, shared; returns the base and the length.
    fn map(file: File, path: &Path, write: bool) -> Result<(Self, *mut u8, usize), OpenError> {
        let meta = file.metadata().map_err(|e| OpenError::from_io(path, e))?;
        let len = usize::try_from(meta.len())
            .map_err(|_| OpenError::other(path, "file is larger than the address space"))?;
        if write && len == 0 {
            return Err(OpenError::other(path, "cannot map an empty file"));
        }
        let map = if len == 0 {
            None
        } else {
            let mut options = MmapOptions::new();
            options.len(len);
            // The file is mapped shared. Other processes may change or shrink it; `segment`
            // never hands out references into the mapping (only atomic words and
            // bounds-checked copies), and shrinking is handled by the SIGBUS guard.
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
        let backing = Self {
            _map: map,
            identity: identity_of(&meta),
            file,
        };
        Ok((backing, base, len))
    }

    fn file_location(location: &Location) -> Result<(&Path, Symlinks), OpenError> {
        match location {
            Location::File { path, symlinks } => Ok((path, *symlinks)),
            Location::Named(name) => Err(named_unsupported(name)),
        }
    }

    pub(super) fn open_read(location: &Location) -> Result<(Self, *mut u8, usize), OpenError> {
        let (path, symlinks) = Self::file_location(location)?;
        Self::map(open_file(path, false, symlinks)?, path, false)
    }

    pub(super) fn open_write(location: &Location) -> Result<(Self, *mut u8, usize), OpenError> {
        let (path, symlinks) = Self::file_location(location)?;
        Self::map(open_file(path, true, symlinks)?, path, true)
    }

    /// Creates the file with mode 0600, sized and zero-filled.
    pub(super) fn create(
        location: &Location,
        size_bytes: u64,
        replace: bool,
    ) -> Result<(Self, *mut u8, usize), OpenError> {
        let (path, _) = Self::file_location(location)?;
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
        Self::map(file, path, true)
    }

    pub(super) fn gate(&self) -> Option<std::sync::Arc<Gate>> {
        None
    }

    pub(super) fn identity(&self) -> Option<FileIdentity> {
        Some(self.identity)
    }

    /// `fstat` on our descriptor for size and link count, `lstat` (or `stat`) on the
    /// path for a replacement.
    pub(super) fn health(&self, location: &Location, mapped_len: u64) -> Health {
        let Ok(meta) = self.file.metadata() else {
            return Health::Unlinked;
        };
        let Some(path) = location.file_path() else {
            return Health::Intact;
        };
        let symlinks = match location {
            Location::File { symlinks, .. } => *symlinks,
            Location::Named(_) => Symlinks::Refused,
        };
        match path_identity(path, symlinks) {
            Ok(id) if id != self.identity => return Health::Replaced,
            Ok(_) => {}
            Err(_) => return Health::Unlinked,
        }
        if meta.nlink() == 0 {
            return Health::Unlinked;
        }
        let size_bytes = meta.len();
        match size_bytes.cmp(&mapped_len) {
            std::cmp::Ordering::Less => Health::Truncated { size_bytes },
            std::cmp::Ordering::Greater => Health::Grown { size_bytes },
            std::cmp::Ordering::Equal => Health::Intact,
        }
    }

    /// Maps `[view_start, view_start + view_len)` of the same file writable, through a
    /// new descriptor, refusing a file that is no longer this one.
    pub(super) fn map_writable(
        &self,
        location: &Location,
        view_start: u64,
        view_len: u64,
    ) -> Result<(View, *mut u8, usize), OpenError> {
        let (path, symlinks) = Self::file_location(location)?;
        let file = open_file(path, true, symlinks)?;
        let meta = file.metadata().map_err(|e| OpenError::from_io(path, e))?;
        if identity_of(&meta) != self.identity {
            return Err(OpenError::other(
                path,
                "the segment was replaced since it was attached",
            ));
        }
        if view_start.saturating_add(view_len) > meta.len() {
            return Err(OpenError::other(
                path,
                format!(
                    "control ring pages [{view_start}, {}) lie outside the {}-byte segment",
                    view_start.saturating_add(view_len),
                    meta.len()
                ),
            ));
        }
        let len =
            usize::try_from(view_len).map_err(|_| OpenError::other(path, "ring too large"))?;
        // Maps only the pages of one control ring, shared and writable; reached only
        // through `ControlPages`, which uses atomic words and bounds-checked copies inside
        // the ring, never references; shrinking is handled by the SIGBUS guard.
        let map = MmapOptions::new()
            .offset(view_start)
            .len(len)
            .map_raw(&file)
            .map_err(|e| OpenError::from_io(path, e))?;
        let base = map.as_mut_ptr();
        Ok((map, base, len))
    }
}

/// Moves `from` to `to` in one step, refusing to replace an existing file unless
/// `replace` is set (elsewhere than Linux: a hard link, which fails on an existing
/// name, then the removal of `from`).
#[cfg(not(target_os = "linux"))]
pub(super) fn rename(from: &Path, to: &Path, replace: bool) -> Result<(), OpenError> {
    let moved = if replace {
        std::fs::rename(from, to)
    } else {
        std::fs::hard_link(from, to).and_then(|()| std::fs::remove_file(from))
    };
    moved.map_err(|e| OpenError::from_io(to, e))
}

/// Moves `from` to `to` in one step (`renameat2`), refusing to replace an existing file
/// unless `replace` is set.
#[cfg(target_os = "linux")]
pub(super) fn rename(from: &Path, to: &Path, replace: bool) -> Result<(), OpenError> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).ok();
    let (Some(from), Some(to_c)) = (c(from), c(to)) else {
        return Err(OpenError::other(to, "path contains a NUL byte"));
    };
    let flags = if replace { 0 } else { libc::RENAME_NOREPLACE };
    // SAFETY: both are valid NUL-terminated paths; renameat2 only reads them.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to_c.as_ptr(),
            flags,
        )
    };
    if rc != 0 {
        return Err(OpenError::from_io(to, io::Error::last_os_error()));
    }
    Ok(())
}
