//! Attaching: a target (name, PID or path) resolved to a segment, mapped read-only, with
//! its validated layout. Names are checked by [`crate::segment::validate_name`].

use std::fmt;
use std::path::PathBuf;

use crate::discovery;
use crate::layout::{self, Geometry, LayoutChoice, LayoutError};
use crate::segment::{Location, NameError, OpenError, SHM_PLACE, Segment, shm_location};

/// What the user pointed the tool at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A name: under `/dev/shm` on Linux, a named file mapping on Windows.
    Shm(String),
    /// A process: the engine or client of a segment, or one that maps it.
    Pid(u32),
    /// Any file.
    Path(PathBuf),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Shm(name) => write!(f, "{name}"),
            Self::Pid(pid) => write!(f, "pid {pid}"),
            Self::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Why attaching failed. Each displays as one line; [`AttachError::detail`] adds more.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("no target: give --shm NAME, --pid PID or --path FILE, or set LUCKY_SHM_NAME")]
    NoTarget,
    #[error("bad segment name {name:?}: {reason}")]
    BadName { name: String, reason: &'static str },
    #[error("no segment named {name:?} in {SHM_PLACE}{}", existing_suffix(.existing))]
    NotFound { name: String, existing: Vec<String> },
    #[error("pid 0 is not a process (in a segment's header 0 means \"none\")")]
    ZeroPid,
    #[error("no segment found for pid {pid}{}", existing_suffix(.existing))]
    PidNotFound { pid: u32, existing: Vec<String> },
    #[error("pid {pid} has {} segments ({}): choose one with --shm", .names.len(), .names.join(", "))]
    PidAmbiguous { pid: u32, names: Vec<String> },
    #[error("{0}")]
    Open(#[from] OpenError),
    #[error("{location}: {source}")]
    Layout {
        location: Location,
        #[source]
        source: LayoutError,
    },
    #[error("{location}: the file could not be mapped so that a shrinking segment is survivable")]
    Unprotected { location: Location },
}

fn existing_suffix(existing: &[String]) -> String {
    if existing.is_empty() {
        " (there are no LRBC segments on this machine)".into()
    } else {
        format!(" (LRBC segments here: {})", existing.join(", "))
    }
}

impl AttachError {
    /// More than the one line: shown with `--verbose`.
    pub fn detail(&self) -> Option<String> {
        use std::error::Error as _;
        let mut lines = Vec::new();
        let mut source = self.source();
        while let Some(s) = source {
            lines.push(format!("caused by: {s}"));
            source = s.source();
        }
        if let Self::Layout { source, .. } = self {
            lines.push(format!("layout error: {source:?}"));
        }
        (!lines.is_empty()).then(|| lines.join("\n"))
    }
}

impl From<NameError> for AttachError {
    fn from(e: NameError) -> Self {
        Self::BadName {
            name: e.name,
            reason: e.reason,
        }
    }
}

/// A segment mapped read-only with its validated geometry.
#[derive(Debug)]
pub struct Attached {
    pub segment: Segment,
    pub geometry: Geometry,
    /// The name (under /dev/shm, or of the mapping), when attached by name or PID.
    pub name: Option<String>,
    pub choice: LayoutChoice,
}

impl Attached {
    /// "NAME" or the path, for titles and status lines.
    pub fn label(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| self.segment.location().to_string())
    }

    /// Maps and validates the segment at `location`.
    pub fn open_at(
        location: &Location,
        name: Option<String>,
        choice: LayoutChoice,
    ) -> Result<Self, AttachError> {
        let segment = Segment::open_at(location)?;
        if !segment.is_shrink_safe() {
            return Err(AttachError::Unprotected {
                location: location.clone(),
            });
        }
        let geometry = layout::inspect(&segment, choice).map_err(|source| AttachError::Layout {
            location: location.clone(),
            source,
        })?;
        Ok(Self {
            segment,
            geometry,
            name,
            choice,
        })
    }

    /// The header's fields by spec name, padding excluded; atomic words are loaded live,
    /// the rest come from the copy taken at attach.
    pub fn header_values(&self) -> Vec<(&'static layout::FieldSpec, layout::FieldValue)> {
        use layout::{FieldKind, FieldValue};
        self.geometry
            .fields()
            .filter_map(|f| {
                let copy = f.decode(&self.geometry.header)?;
                if !f.atomic {
                    return Some((f, copy));
                }
                let off = f.offset_bytes as u64;
                let live = match (f.kind, f.size_bytes) {
                    (FieldKind::I64, 8) => self
                        .segment
                        .load_u64(off)
                        .map(|v| FieldValue::Signed(v as i64)),
                    (_, 8) => self.segment.load_u64(off).map(FieldValue::Unsigned),
                    (_, 4) => self
                        .segment
                        .load_u32(off)
                        .map(|v| FieldValue::Unsigned(u64::from(v))),
                    _ => None,
                };
                Some((f, live.unwrap_or(copy)))
            })
            .collect()
    }

    /// Maps the segment again from its location (after a replacement).
    pub fn reopen(&self) -> Result<Self, AttachError> {
        Self::open_at(self.segment.location(), self.name.clone(), self.choice)
    }
}

/// Resolves a target and attaches to it.
pub fn attach(target: &Target, choice: LayoutChoice) -> Result<Attached, AttachError> {
    match target {
        Target::Path(path) => Attached::open_at(&Location::path(path), None, choice),
        Target::Shm(name) => attach_name(name, choice),
        Target::Pid(pid) => {
            let name = resolve_pid(*pid)?;
            attach_name(&name, choice)
        }
    }
}

fn attach_name(name: &str, choice: LayoutChoice) -> Result<Attached, AttachError> {
    let location = shm_location(name)?;
    match Attached::open_at(&location, Some(name.to_string()), choice) {
        Err(AttachError::Open(OpenError::NotFound { .. })) => Err(AttachError::NotFound {
            name: name.to_string(),
            existing: discovery::lrbc_names(),
        }),
        other => other,
    }
}

/// Finds the segment of a process (spec 1): one whose `server_pid` or `client_pid` is
/// `pid`, one that the process maps, or the default names `LuckyEngine_<pid>` and
/// `luckyengine_<pid>`. The strongest kind of match wins; two of the same kind are
/// ambiguous.
pub fn resolve_pid(pid: u32) -> Result<String, AttachError> {
    // A pid field of 0 means "no process": pid 0 must never match one.
    if pid == 0 {
        return Err(AttachError::ZeroPid);
    }
    let listing = discovery::list();
    let ok = || listing.iter().filter_map(|e| e.summary().map(|s| (e, s)));
    let by_server: Vec<String> = ok()
        .filter(|(_, s)| s.server.pid == pid)
        .map(|(e, _)| e.name.clone())
        .collect();
    let by_client: Vec<String> = ok()
        .filter(|(_, s)| s.client.pid == pid)
        .map(|(e, _)| e.name.clone())
        .collect();
    let by_maps: Vec<String> = discovery::mapped_shm_names(pid)
        .into_iter()
        .filter(|n| {
            listing
                .iter()
                .any(|e| &e.name == n && e.summary().is_some())
        })
        .collect();
    let by_default: Vec<String> = discovery::default_names(pid)
        .into_iter()
        .filter(|n| Location::shm(n).exists())
        .collect();
    for mut names in [by_server, by_client, by_maps, by_default] {
        names.sort();
        names.dedup();
        match names.len() {
            0 => continue,
            1 => return Ok(names.remove(0)),
            _ => return Err(AttachError::PidAmbiguous { pid, names }),
        }
    }
    Err(AttachError::PidNotFound {
        pid,
        existing: discovery::lrbc_names(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_would_leave_dev_shm_is_refused_before_anything_is_opened() {
        for bad in ["", "a/b", "/x", "..", ".", "../etc/passwd", "a\0b"] {
            assert!(
                matches!(
                    attach(&Target::Shm(bad.into()), LayoutChoice::Auto),
                    Err(AttachError::BadName { .. })
                ),
                "{bad:?} accepted"
            );
        }
    }

    #[test]
    fn pid_0_never_matches_a_segment_without_a_client() {
        // A segment whose client_pid is 0 ("no client"), as an engine leaves it before
        // a trainer attaches: it is listed, so a pid-0 match would find it.
        use crate::layout::plan::PlanLayout;
        let _seg = crate::testutil::TestSegment::create(
            "pid0",
            &crate::testutil::spec(PlanLayout::Lrbc { ext: true }, 2),
        );
        // (Windows lists only the default names of running processes.)
        #[cfg(unix)]
        assert!(
            discovery::list()
                .iter()
                .any(|e| e.name == _seg.name && e.summary().is_some_and(|s| s.client.pid == 0))
        );
        assert!(matches!(resolve_pid(0), Err(AttachError::ZeroPid)));
        assert!(matches!(
            attach(&Target::Pid(0), LayoutChoice::Auto),
            Err(AttachError::ZeroPid)
        ));
    }

    #[test]
    fn not_found_names_the_segments_that_exist() {
        let e = AttachError::NotFound {
            name: "nope".into(),
            existing: vec!["a".into(), "b".into()],
        };
        assert_eq!(
            e.to_string(),
            format!("no segment named \"nope\" in {SHM_PLACE} (LRBC segments here: a, b)")
        );
    }
}
