use std::fs::OpenOptions;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::*;
use crate::layout::headers::LrbcHeader;

fn temp_shm(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    Path::new(SHM_DIR).join(format!(
        "lrbc-unit-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Cuts the file at `path` to `len` bytes, as an engine that shrinks its segment does.
fn shrink(path: &Path, len: u64) -> io::Result<()> {
    OpenOptions::new().write(true).open(path)?.set_len(len)
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
    let ro = Segment::open(&path, Symlinks::Refused).unwrap();
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
    let ro = Segment::open(&path, Symlinks::Refused).unwrap();
    assert!(ro.is_shrink_safe());
    drop(rw);
    shrink(&path, 4096).unwrap();
    let mut buf = vec![0u8; size as usize];
    assert!(ro.read_at(0, &mut buf));
    assert!(buf[..4096].iter().all(|&b| b == 0xAB));
    assert!(buf[8192..].iter().all(|&b| b == 0));
    assert_eq!(ro.load_u64(size - 8), Some(0));
    assert!(ro.sigbus_faults() >= 62, "faults: {}", ro.sigbus_faults());
    assert_eq!(ro.health(), Health::Truncated { size_bytes: 4096 });
}

/// Values read in place: inside the mapping and aligned for f32, or None; a shrunk
/// file's pages read as zeros there too.
#[test]
fn values_in_place_are_handed_out_only_in_range_and_aligned() {
    let path = temp_shm("in-place");
    let _rm = Remove(path.clone());
    let size = 16 * 4096u64;
    let rw = SegmentRw::create(&path, size, false).unwrap();
    let ones: Vec<u8> = (0..size / 4).flat_map(|_| 1.0f32.to_le_bytes()).collect();
    assert!(rw.write_at(0, &ones));
    let ro = Segment::open(&path, Symlinks::Refused).unwrap();
    let sum = |offset: u64, count: usize| ro.with_f32s(offset, count, |v| v.iter().sum::<f32>());
    assert_eq!(sum(8, 4), Some(4.0));
    assert_eq!(sum(0, (size / 4) as usize), Some((size / 4) as f32));
    assert_eq!(sum(size - 4, 1), Some(1.0));
    assert_eq!(sum(size - 4, 2), None, "past the end");
    assert_eq!(sum(u64::MAX - 3, 1), None, "an offset past any mapping");
    assert_eq!(sum(0, usize::MAX), None, "a length that overflows");
    assert_eq!(sum(2, 1), None, "not aligned for f32");
    drop(rw);
    shrink(&path, 4096).unwrap();
    assert_eq!(sum(0, 1024), Some(1024.0), "the page left");
    assert_eq!(sum(8192, 1024), Some(0.0), "a page past the shrunk end");
}

#[test]
fn health_tells_unlinked_from_replaced() {
    let path = temp_shm("health");
    let _rm = Remove(path.clone());
    let rw = SegmentRw::create(&path, 4096, false).unwrap();
    let ro = Segment::open(&path, Symlinks::Refused).unwrap();
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
            for symlinks in [Symlinks::Resolved, Symlinks::Refused] {
                let ro = Segment::open(&path, symlinks).map(|_| ());
                let rw = SegmentRw::open(&path, symlinks).map(|_| ());
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
        Segment::open(&link, Symlinks::Refused),
        Err(OpenError::Symlink { .. })
    ));
    assert!(Segment::open(&link, Symlinks::Resolved).is_ok());
}
