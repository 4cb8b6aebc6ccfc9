//! What a recorder saw, kept and lost ([`Counts`]), in one typed form for every side.
//!
//! The recorder writes it at the end of a file as the metadata record
//! [`COUNTS_METADATA`](super::COUNTS_METADATA) ([`Counts::to_metadata`]: each field's
//! JSON text under its name), `serve` sends it each second as its status's `capture`
//! (the JSON object of [`Counts`]' `Serialize`), and the readers (the replay's events,
//! the remote viewer, the benchmarks) read it back with [`Counts::from_metadata`] and
//! [`Counts::from_json`]: no reader looks a count up by its name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The version of [`Counts`]' form that this build writes, as `version` in its JSON and
/// its metadata record. A count added later is no new version (a reader that lacks it
/// skips it, one that expects it reads 0 from an older form); a new version is for a
/// count whose meaning changes or that goes, and a reader refuses a form newer than its
/// own.
pub const COUNTS_VERSION: u32 = 1;

/// The version of counts written before they said one: the same names and meanings as
/// version 1.
const UNVERSIONED: u32 = 1;

/// Counts that could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum CountsError {
    /// A value of the metadata record is not JSON (every value the recorder writes is).
    #[error("lrbc.counts: {key} is {value:?}, not a number")]
    NotANumber { key: String, value: String },
    /// A count of the wrong type, or a form newer than this build reads.
    #[error("lrbc.counts: {0}")]
    Form(#[from] serde_json::Error),
}

/// What the recorder saw, kept and lost: the counts of a recording (`lrbc.counts`) and
/// of `serve`'s capture (its status's `capture`).
///
/// Its JSON form is an object of the fields below under their names, `version` first;
/// the names are the format, so a field is never renamed. A field that an older form
/// lacks reads as 0 (its recorder did not count it: files written before the detector
/// have no `frames_checked`, a synthetic file only `frames_recorded`); a form without
/// `version` is version 1; a form of a version above [`COUNTS_VERSION`] is refused.
/// Names it does not know are left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Counts {
    /// The version of the form these counts were read from ([`COUNTS_VERSION`] for
    /// counts of this build).
    #[serde(default = "unversioned", deserialize_with = "known_version")]
    pub version: u32,
    /// Frames whose `frame_seq` the recorder saw (copied, torn or not).
    pub frames_seen: u64,
    pub frames_recorded: u64,
    /// Frames that came and went between two looks (`frame_seq` jumped by more than one).
    pub frames_missed: u64,
    /// Of the frames missed, those that passed while the machine did not run the
    /// recorder's follower when it asked to be woken (part of `frames_missed`).
    pub frames_missed_late: u64,
    /// Frames copied while the engine wrote them, so not kept.
    pub frames_torn: u64,
    /// Frames let pass on purpose while the recorder held off, keeping to its budget on
    /// a machine without spare CPU.
    pub frames_skipped: u64,
    /// Frames published while the segment's file was shorter than its layout (their data
    /// read as zeros), so not kept.
    pub frames_unreadable: u64,
    /// Changes of the segment's state recorded on `/lrbc/state`.
    pub state_changes: u64,
    pub ring_entries: u64,
    /// Ring losses and malformed ring entries recorded on `/lrbc/ring_events`.
    pub ring_events: u64,
    /// Ring bytes overwritten before the recorder read them.
    pub ring_lost_bytes: u64,
    /// Frames recorded and then dropped from the front of a rolling buffer (its seconds
    /// or bytes were full); 0 in a file recorded from start to end.
    pub frames_dropped: u64,
    /// Ring entries dropped from the front of a rolling buffer.
    pub ring_entries_dropped: u64,
    /// Camera images recorded (image region and streamed frames), when asked for.
    pub images: u64,
    /// Events the detector found (`/lrbc/events`).
    pub events_found: u64,
    /// Frames whose rewards and done and truncated flags the detector checked.
    pub frames_flags_checked: u64,
    /// Frames whose every observation and action the detector checked too.
    pub frames_checked: u64,
    /// NaN, infinite and out-of-range values the detector counted.
    pub nan_values: u64,
    pub inf_values: u64,
    pub out_of_range_values: u64,
    /// Forms of events the capture read too late to write (it fell far behind).
    pub events_missed: u64,
}

fn unversioned() -> u32 {
    UNVERSIONED
}

/// A `version` this build reads: none above [`COUNTS_VERSION`].
fn known_version<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let version = u32::deserialize(d)?;
    if version > COUNTS_VERSION {
        return Err(serde::de::Error::custom(format!(
            "counts of version {version}, newer than this build reads ({COUNTS_VERSION})"
        )));
    }
    Ok(version)
}

impl Default for Counts {
    /// No counts yet, of this build's version.
    fn default() -> Self {
        Self {
            version: COUNTS_VERSION,
            frames_seen: 0,
            frames_recorded: 0,
            frames_missed: 0,
            frames_missed_late: 0,
            frames_torn: 0,
            frames_skipped: 0,
            frames_unreadable: 0,
            state_changes: 0,
            ring_entries: 0,
            ring_events: 0,
            ring_lost_bytes: 0,
            frames_dropped: 0,
            ring_entries_dropped: 0,
            images: 0,
            events_found: 0,
            frames_flags_checked: 0,
            frames_checked: 0,
            nan_values: 0,
            inf_values: 0,
            out_of_range_values: 0,
            events_missed: 0,
        }
    }
}

impl Counts {
    /// The frames the engine published while the recorder followed it: those it saw
    /// (copied or torn), those that passed between two looks and those it let pass
    /// while it held off.
    pub fn frames_published(&self) -> u64 {
        self.frames_seen
            .saturating_add(self.frames_missed)
            .saturating_add(self.frames_skipped)
    }

    /// The share of the frames published that were recorded (0 to 1); None when none
    /// was published.
    pub fn share_recorded(&self) -> Option<f64> {
        let published = self.frames_published();
        (published > 0).then(|| self.frames_recorded as f64 / published as f64)
    }

    /// What was counted since `earlier` (a file recorded from the middle of a capture).
    pub fn since(&self, earlier: &Self) -> Self {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        Self {
            version: self.version,
            frames_seen: d(self.frames_seen, earlier.frames_seen),
            frames_recorded: d(self.frames_recorded, earlier.frames_recorded),
            frames_missed: d(self.frames_missed, earlier.frames_missed),
            frames_missed_late: d(self.frames_missed_late, earlier.frames_missed_late),
            frames_torn: d(self.frames_torn, earlier.frames_torn),
            frames_skipped: d(self.frames_skipped, earlier.frames_skipped),
            frames_unreadable: d(self.frames_unreadable, earlier.frames_unreadable),
            state_changes: d(self.state_changes, earlier.state_changes),
            ring_entries: d(self.ring_entries, earlier.ring_entries),
            ring_events: d(self.ring_events, earlier.ring_events),
            ring_lost_bytes: d(self.ring_lost_bytes, earlier.ring_lost_bytes),
            frames_dropped: d(self.frames_dropped, earlier.frames_dropped),
            ring_entries_dropped: d(self.ring_entries_dropped, earlier.ring_entries_dropped),
            images: d(self.images, earlier.images),
            events_found: d(self.events_found, earlier.events_found),
            frames_flags_checked: d(self.frames_flags_checked, earlier.frames_flags_checked),
            frames_checked: d(self.frames_checked, earlier.frames_checked),
            nan_values: d(self.nan_values, earlier.nan_values),
            inf_values: d(self.inf_values, earlier.inf_values),
            out_of_range_values: d(self.out_of_range_values, earlier.out_of_range_values),
            events_missed: d(self.events_missed, earlier.events_missed),
        }
    }

    /// The counts of a JSON object (`serve`'s status's `capture`), as the type's doc
    /// says: a missing count is 0, a newer version refused.
    pub fn from_json(json: &serde_json::Value) -> Result<Self, CountsError> {
        Ok(Self::deserialize(json)?)
    }

    /// The metadata record [`COUNTS_METADATA`](super::COUNTS_METADATA): each field's
    /// JSON text (a number's digits) under its name.
    pub fn to_metadata(&self) -> BTreeMap<String, String> {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(m)) => {
                m.into_iter().map(|(k, v)| (k, v.to_string())).collect()
            }
            // A struct of numbers is always an object.
            _ => BTreeMap::new(),
        }
    }

    /// The counts of a metadata record written by [`Counts::to_metadata`] (or by a
    /// recorder of an earlier version), as the type's doc says.
    pub fn from_metadata(m: &BTreeMap<String, String>) -> Result<Self, CountsError> {
        let object = m
            .iter()
            .map(|(k, v)| {
                let value = serde_json::from_str(v).map_err(|_| CountsError::NotANumber {
                    key: k.clone(),
                    value: v.clone(),
                })?;
                Ok((k.clone(), value))
            })
            .collect::<Result<serde_json::Map<_, _>, CountsError>>()?;
        Self::from_json(&serde_json::Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some_counts() -> Counts {
        Counts {
            frames_seen: 90,
            frames_recorded: 80,
            frames_missed: 7,
            frames_skipped: 3,
            frames_checked: 85,
            nan_values: 2,
            events_missed: 1,
            ..Counts::default()
        }
    }

    #[test]
    fn the_json_form_keeps_the_names_files_hold() {
        // The names are the format: files of earlier versions hold them, Python reads
        // them. A field renamed fails here.
        let json = serde_json::to_value(Counts::default()).unwrap();
        let names: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            names,
            [
                "version",
                "frames_seen",
                "frames_recorded",
                "frames_missed",
                "frames_missed_late",
                "frames_torn",
                "frames_skipped",
                "frames_unreadable",
                "state_changes",
                "ring_entries",
                "ring_events",
                "ring_lost_bytes",
                "frames_dropped",
                "ring_entries_dropped",
                "images",
                "events_found",
                "frames_flags_checked",
                "frames_checked",
                "nan_values",
                "inf_values",
                "out_of_range_values",
                "events_missed",
            ]
        );
        assert_eq!(json["version"], COUNTS_VERSION);
    }

    #[test]
    fn counts_come_back_from_their_json_and_their_metadata() {
        let c = some_counts();
        let json = serde_json::to_value(c).unwrap();
        assert_eq!(Counts::from_json(&json).unwrap(), c);
        let m = c.to_metadata();
        assert_eq!(m["frames_checked"], "85");
        assert_eq!(m["version"], COUNTS_VERSION.to_string());
        assert_eq!(Counts::from_metadata(&m).unwrap(), c);
    }

    #[test]
    fn an_older_form_reads_its_missing_counts_as_zero_and_its_version_as_one() {
        // As a recorder of an earlier version wrote them: no version, no detector's
        // counts.
        let m: BTreeMap<String, String> = [
            ("frames_seen", "10"),
            ("frames_recorded", "9"),
            ("frames_missed", "2"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let c = Counts::from_metadata(&m).unwrap();
        assert_eq!(c.version, 1);
        assert_eq!((c.frames_seen, c.frames_recorded), (10, 9));
        assert_eq!((c.frames_checked, c.frames_skipped), (0, 0));
        assert_eq!(c.frames_published(), 12);
        // A name it does not know (a count added later, or one renamed) is left out.
        let renamed = serde_json::json!({"frames_seen_renamed": 5, "frames_recorded": 4});
        let c = Counts::from_json(&renamed).unwrap();
        assert_eq!((c.frames_seen, c.frames_recorded), (0, 4));
    }

    #[test]
    fn a_newer_form_or_a_count_that_is_no_number_is_refused() {
        let newer = serde_json::json!({"version": COUNTS_VERSION + 1, "frames_seen": 1});
        let e = Counts::from_json(&newer).unwrap_err().to_string();
        assert!(e.contains("newer than this build reads"), "{e}");
        let mut m = some_counts().to_metadata();
        m.insert("frames_seen".into(), "many".into());
        let e = Counts::from_metadata(&m).unwrap_err().to_string();
        assert_eq!(e, "lrbc.counts: frames_seen is \"many\", not a number");
        m.insert("frames_seen".into(), "\"12\"".into());
        assert!(Counts::from_metadata(&m).is_err());
        assert!(Counts::from_json(&serde_json::Value::Null).is_err());
    }

    #[test]
    fn the_frames_published_are_those_seen_missed_and_skipped() {
        let c = some_counts();
        assert_eq!(c.frames_published(), 100);
        assert_eq!(c.share_recorded(), Some(0.8));
        assert_eq!(Counts::default().share_recorded(), None);
        let huge = Counts {
            frames_seen: u64::MAX,
            frames_missed: 1,
            ..Counts::default()
        };
        assert_eq!(huge.frames_published(), u64::MAX);
    }
}
