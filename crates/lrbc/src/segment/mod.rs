//! The mappings of segments. It is the only module of this crate with `unsafe` (the
//! other operating-system calls are `lrbc_platform`'s): every other module reads and
//! writes segments through the bounds-checked methods here, which load and store the
//! spec's atomic words atomically and copy bytes out (or in) without ever handing out a
//! reference into the live mapping.
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

mod control_pages;
mod location;
mod raw;
mod read;
mod write;

use std::io;
use std::path::{Path, PathBuf};

pub use control_pages::ControlPages;
pub use location::{
    Location, NameError, SHM_DIR, SHM_PLACE, Symlinks, shm_location, shm_path, validate_name,
};
pub use read::Segment;
pub use write::SegmentRw;

#[cfg(not(target_endian = "little"))]
compile_error!("LRBC is little-endian and this tool copies words natively");

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
mod tests;
