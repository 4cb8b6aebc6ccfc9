//! The names of the flight recorder's files.

use std::path::{Path, PathBuf};

/// A flight recording's file that could not be made or written, as one line.
#[derive(Debug, thiserror::Error)]
pub enum FlightFileError {
    /// The folder or the file could not be created.
    #[error("{}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing {}: {cause}", path.display())]
    Write { path: PathBuf, cause: String },
}

/// `DIR/lrbc-<segment>-<UTC time>.mcap` (`…-<tag>.mcap` with a tag: the event a save
/// is for), creating `DIR`; a number is added when the name is taken.
pub fn new_file_path(
    dir: &Path,
    label: &str,
    tag: Option<&str>,
) -> Result<PathBuf, FlightFileError> {
    std::fs::create_dir_all(dir).map_err(|source| FlightFileError::Create {
        path: dir.to_path_buf(),
        source,
    })?;
    let segment: String = label
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(label)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let stamp = utc_stamp(std::time::SystemTime::now());
    let mut base = format!("lrbc-{segment}-{stamp}");
    if let Some(tag) = tag {
        base.push('-');
        base.extend(tag.chars().map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        }));
    }
    let mut path = dir.join(format!("{base}.mcap"));
    let mut n = 1;
    while path.exists() {
        n += 1;
        path = dir.join(format!("{base}-{n}.mcap"));
    }
    Ok(path)
}

/// `YYYYMMDDTHHMMSSZ` of `t`.
pub fn utc_stamp(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (proleptic Gregorian).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
