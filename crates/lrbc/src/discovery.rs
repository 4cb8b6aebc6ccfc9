//! The scan for LRBC segments on this machine. Linux: every file in `/dev/shm` whose first
//! bytes are the LRBC magic, and the shared-memory files a process maps. Windows: the
//! named mappings of the session's namespace (or, where it cannot be listed, those
//! under the default names of every running process, `LuckyEngine_<pid>` and
//! `luckyengine_<pid>`) and `LUCKY_SHM_NAME`, kept when their first bytes are the LRBC
//! magic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::clock::{monotonic_now_ns, secs_between};
use crate::layout::{self, Layout, LayoutChoice, LayoutError};
use crate::procinfo::{ProcInfo, Processes};
use crate::segment::{Location, OpenError, SHM_DIR, Segment};

/// One segment found.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ListEntry {
    pub name: String,
    pub path: PathBuf,
    pub size_bytes: Option<u64>,
    /// The segment's summary, or why it cannot be read.
    #[serde(flatten)]
    pub outcome: ListOutcome,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum ListOutcome {
    Ok(SegmentSummary),
    Err { error: String },
}

/// What `list` shows of a readable segment.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SegmentSummary {
    pub layout: Layout,
    pub num_envs: u32,
    pub obs_size: u32,
    pub act_size: u32,
    pub server: ProcInfo,
    pub client: ProcInfo,
    pub frame_seq: u64,
    /// From `frame_time_ns` (extension block only).
    pub secs_since_frame: Option<f64>,
}

impl ListEntry {
    pub fn summary(&self) -> Option<&SegmentSummary> {
        match &self.outcome {
            ListOutcome::Ok(s) => Some(s),
            ListOutcome::Err { .. } => None,
        }
    }
}

/// Every LRBC segment found, sorted by name. Files that are not LRBC are skipped;
/// files that cannot be read are listed with the reason.
pub fn list() -> Vec<ListEntry> {
    if cfg!(windows) {
        list_named()
    } else {
        list_in(Path::new(SHM_DIR))
    }
}

/// The default names of a process's segment (spec 1).
pub fn default_names(pid: u32) -> [String; 2] {
    [format!("LuckyEngine_{pid}"), format!("luckyengine_{pid}")]
}

/// The named mappings (Windows) of this session whose first bytes are LRBC: every
/// "Section" object of the session's namespace, or, where that cannot be read, the
/// default names of every running process; and `LUCKY_SHM_NAME`.
fn list_named() -> Vec<ListEntry> {
    let mut processes = Processes::new();
    processes.refresh_all();
    let sections = lrbc_platform::named_sections().filter(|s| !s.is_empty());
    let candidates = sections.unwrap_or_else(|| {
        processes
            .pids()
            .into_iter()
            .flat_map(default_names)
            .collect()
    });
    let mut names: Vec<String> = candidates
        .into_iter()
        .chain(std::env::var("LUCKY_SHM_NAME").ok())
        .collect();
    names.sort();
    names.dedup();
    let mut out: Vec<ListEntry> = names
        .into_iter()
        .filter_map(|name| entry(&Location::shm(&name), name, &processes))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Names of the readable LRBC segments (for "not found" messages).
pub fn lrbc_names() -> Vec<String> {
    list()
        .into_iter()
        .filter(|e| e.summary().is_some())
        .map(|e| e.name)
        .collect()
}

pub(crate) fn list_in(dir: &Path) -> Vec<ListEntry> {
    let Ok(read_dir) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut processes = Processes::new();
    processes.refresh_all();
    let mut out: Vec<ListEntry> = read_dir
        .filter_map(Result::ok)
        .filter(|d| d.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|d| {
            let name = d.file_name().to_string_lossy().into_owned();
            let location = Location::File {
                path: d.path(),
                symlinks: crate::segment::Symlinks::Refused,
            };
            entry(&location, name, &processes)
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn entry(location: &Location, name: String, processes: &Processes) -> Option<ListEntry> {
    let path = PathBuf::from(location.to_string());
    let segment = match Segment::open_at(location) {
        Ok(s) => s,
        Err(e @ (OpenError::PermissionDenied { .. } | OpenError::Io { .. })) => {
            return Some(ListEntry {
                name,
                size_bytes: std::fs::symlink_metadata(&path).ok().map(|m| m.len()),
                path,
                outcome: ListOutcome::Err {
                    error: short_open_error(&e),
                },
            });
        }
        // Vanished, or not a regular file any more: not a segment.
        Err(_) => return None,
    };
    let size_bytes = Some(segment.len());
    let geometry = match layout::inspect(&segment, LayoutChoice::Auto) {
        Ok(g) => g,
        Err(LayoutError::BadMagic { .. }) => return None,
        Err(LayoutError::TooSmall { size_bytes, .. }) if size_bytes < 8 => return None,
        Err(e) => {
            return Some(ListEntry {
                name,
                path,
                size_bytes,
                outcome: ListOutcome::Err {
                    error: e.to_string(),
                },
            });
        }
    };
    let c = geometry.counters;
    let server_pid = segment.load_u32(c.server_pid).unwrap_or(0);
    let client_pid = segment.load_u32(c.client_pid).unwrap_or(0);
    let secs_since_frame = c.ext.and_then(|e| {
        let t = segment.load_u64(e.frame_time_ns)?;
        (t != 0).then(|| secs_between(t, monotonic_now_ns()))
    });
    Some(ListEntry {
        name,
        path,
        size_bytes,
        outcome: ListOutcome::Ok(SegmentSummary {
            layout: geometry.layout,
            num_envs: geometry.num_envs,
            obs_size: geometry.obs_size,
            act_size: geometry.act_size,
            server: processes.info(server_pid),
            client: processes.info(client_pid),
            frame_seq: segment.load_u64(c.frame_seq).unwrap_or(0),
            secs_since_frame,
        }),
    })
}

fn short_open_error(e: &OpenError) -> String {
    match e {
        OpenError::PermissionDenied { .. } => "permission denied".into(),
        OpenError::Io { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

/// Names of files under /dev/shm that `pid` maps (from `/proc/<pid>/maps`).
pub fn mapped_shm_names(pid: u32) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map(|maps| parse_maps(&maps))
        .unwrap_or_default()
}

/// Extracts the /dev/shm file names from the text of a `/proc/<pid>/maps` file.
pub fn parse_maps(maps: &str) -> Vec<String> {
    let prefix = format!("{SHM_DIR}/");
    let mut names: Vec<String> = maps
        .lines()
        .filter_map(|line| {
            let at = line.find(&prefix)?;
            let rest = &line[at + prefix.len()..];
            let rest = rest.strip_suffix(" (deleted)").unwrap_or(rest);
            (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_string())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The processes that map each segment (Linux: from `/proc/*/maps`; empty elsewhere).
/// Keep `processes` across calls: CPU use is measured between two refreshes.
pub fn mappers(processes: &mut Processes) -> BTreeMap<String, Vec<ProcInfo>> {
    processes.refresh_all();
    let mut out: BTreeMap<String, Vec<ProcInfo>> = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.filter_map(Result::ok) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        for name in mapped_shm_names(pid) {
            out.entry(name).or_default().push(processes.info(pid));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_under_dev_shm_give_names() {
        let maps = "\
7f00-7f01 r--s 00000000 00:1a 123 /dev/shm/LuckyEngine_42
7f01-7f02 rw-s 00000000 00:1a 124 /dev/shm/LuckyEngine_42
7f02-7f03 r--s 00000000 00:1a 125 /dev/shm/old (deleted)
7f03-7f04 r-xp 00000000 08:01 9 /usr/lib/libc.so.6
7f04-7f05 rw-p 00000000 00:00 0 [heap]
";
        assert_eq!(parse_maps(maps), ["LuckyEngine_42", "old"]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_segment_this_process_maps_lists_this_process_among_its_mappers() {
        let seg = crate::testutil::TestSegment::create(
            "mappers",
            &crate::testutil::spec(layout::plan::PlanLayout::Lrbc { ext: false }, 1),
        );
        let found = mappers(&mut Processes::new());
        let procs = found.get(&seg.name).expect("the segment is mapped here");
        assert!(
            procs.iter().any(|p| p.pid == std::process::id() && p.alive),
            "{procs:?}"
        );
    }

    #[test]
    fn non_lrbc_files_are_skipped_and_bad_lrbc_files_listed() {
        let dir = std::env::temp_dir().join(format!("lrbc-list-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("not-lrbc"), b"hello world, not a segment").unwrap();
        std::fs::write(dir.join("tiny"), b"ab").unwrap();
        let mut bad = vec![0u8; 100];
        bad[0..4].copy_from_slice(&layout::LRBC_MAGIC.to_le_bytes());
        std::fs::write(dir.join("short-lrbc"), &bad).unwrap();
        let entries = list_in(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(entries.len(), 1, "{entries:?}");
        assert_eq!(entries[0].name, "short-lrbc");
        assert!(
            matches!(&entries[0].outcome, ListOutcome::Err { error } if error.contains("smaller than"))
        );
    }
}
