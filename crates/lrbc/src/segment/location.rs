//! Where a segment lives: the shared-memory directory, names in it (checked so that
//! they never leave it), and [`Location`], a file or a named mapping.

use std::fmt;
use std::path::{Path, PathBuf};

use super::sys;

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
    File { path: PathBuf, symlinks: Symlinks },
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
                symlinks: Symlinks::Refused,
            }
        }
    }

    /// A path given by the user (symlinks followed).
    pub fn path(path: &Path) -> Self {
        Self::File {
            path: path.to_path_buf(),
            symlinks: Symlinks::Resolved,
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
            // Cleanup: there may be nothing to remove.
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

/// What opening a path does with a symbolic link: names under `/dev/shm` refuse them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Symlinks {
    /// The link is resolved and its target opened.
    Resolved,
    /// Opening a link fails.
    Refused,
}

/// Why a name cannot be a segment's: it would not stay inside [`SHM_DIR`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad segment name {name:?}: {reason}")]
pub struct NameError {
    pub name: String,
    pub reason: &'static str,
}

/// Checks that a name stays inside `/dev/shm`: no separators, no `.`/`..`, no NUL.
pub fn validate_name(name: &str) -> Result<(), NameError> {
    let reason = if name.is_empty() {
        Some("it is empty")
    } else if name.contains('/') {
        Some("names must not contain '/'; give the name as it appears in /dev/shm")
    } else if name == "." || name == ".." {
        Some("'.' and '..' are not names")
    } else if name.contains('\0') {
        Some("it contains a NUL byte")
    } else if name.len() > 255 {
        Some("it is longer than 255 bytes")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(NameError {
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// The path of a validated name under `/dev/shm`.
pub fn shm_path(name: &str) -> Result<PathBuf, NameError> {
    validate_name(name)?;
    Ok(Path::new(SHM_DIR).join(name))
}

/// Where a validated name is on this platform (`/dev/shm/NAME`, or a named mapping).
pub fn shm_location(name: &str) -> Result<Location, NameError> {
    validate_name(name)?;
    Ok(Location::shm(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_never_leave_dev_shm() {
        for bad in ["", "a/b", "/x", "..", ".", "../etc/passwd", "a\0b"] {
            assert!(
                matches!(validate_name(bad), Err(NameError { .. })),
                "{bad:?} accepted"
            );
            assert!(shm_location(bad).is_err(), "{bad:?} located");
        }
        assert!(validate_name("LuckyEngine_123").is_ok());
        assert_eq!(shm_path("x").unwrap(), PathBuf::from("/dev/shm/x"));
    }
}
