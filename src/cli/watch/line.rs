//! What `watch --json` prints each interval ([`WatchLine`]), in one typed form for
//! both sides.
//!
//! `watch` writes a [`WatchLine`] (its `Serialize`: one JSON object a line) and the
//! benchmarks read it back with [`WatchLine::from_json`]: no reader looks a count up by
//! its name, and the figures derived from the counts (the frames lost, the frames the
//! detector did not check) are methods, the same for every reader.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use lrbc_live::detect::{EventKind, EventTotals};
use lrbc_live::episodes::{Ending, RunTotals};
use lrbc_live::follower::FrameCounts;
use lrbc_live::rhythm::RhythmSummary;
use lrbc_live::sampler::SamplerStats;
use lrbc_live::watch::Report;

/// A line that is not one `watch --json` prints.
#[derive(Debug, thiserror::Error)]
#[error("not a line of watch --json: {0}")]
pub struct WatchLineError(#[from] serde_json::Error);

/// One line of `watch --json`: the attachment's report, the sampler's counts, and the
/// detector's, the loop's rhythm and the episodes when they are followed.
///
/// Its JSON form is one object of the fields below under their names, in this order (the
/// report's fields first, then the frames'); the names are the format, so a field is
/// never renamed. The groups of a mode that is off (no detector: no `events`,
/// `events_by_kind`, `frames_checked`, `frames_flags_checked`, no `rhythm`; no episodes:
/// no `episodes`) are left out of the line. It carries no version: the benchmarks read
/// the lines of the `watch` built beside them, and a line that lacks a count (or has
/// some of the detector's and not all) is refused rather than read as 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "LineForm")]
pub struct WatchLine {
    #[serde(flatten)]
    pub report: Report,
    /// The sampler's frames since it attached, their balance (`frames_*` keys; the
    /// frames checked are the detector's).
    #[serde(flatten)]
    pub frames: FrameCounts,
    /// The machine is busy and the sampler keeps within its budget.
    pub sampler_yielding: bool,
    /// The detector's counts (None: no detector).
    #[serde(flatten)]
    pub detector: Option<WatchDetector>,
    /// The loop's rhythm: [`RhythmSummary`]'s JSON without its pauses, with the shares of
    /// wall time (`shares`) and the newest pause (`last_pause`). None: no detector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rhythm: Option<serde_json::Value>,
    /// The episodes of every env (None: not counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub episodes: Option<WatchEpisodes>,
}

/// The detector's counts in a line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WatchDetector {
    /// Events found, of every kind.
    pub events: u64,
    pub events_by_kind: EventsByKind,
    /// Frames whose every observation and action the detector checked.
    pub frames_checked: u64,
    /// Frames whose rewards and done and truncated flags it checked.
    pub frames_flags_checked: u64,
}

/// A line as read, before its detector's keys are found all there or all absent.
#[derive(Deserialize)]
struct LineForm {
    #[serde(flatten)]
    report: Report,
    #[serde(flatten)]
    frames: FrameCounts,
    sampler_yielding: bool,
    events: Option<u64>,
    events_by_kind: Option<EventsByKind>,
    frames_checked: Option<u64>,
    frames_flags_checked: Option<u64>,
    rhythm: Option<serde_json::Value>,
    episodes: Option<WatchEpisodes>,
}

impl TryFrom<LineForm> for WatchLine {
    type Error = String;

    fn try_from(f: LineForm) -> Result<Self, String> {
        let detector = match (
            f.events,
            f.events_by_kind,
            f.frames_checked,
            f.frames_flags_checked,
        ) {
            (
                Some(events),
                Some(events_by_kind),
                Some(frames_checked),
                Some(frames_flags_checked),
            ) => Some(WatchDetector {
                events,
                events_by_kind,
                frames_checked,
                frames_flags_checked,
            }),
            (None, None, None, None) => None,
            _ => {
                return Err(
                    "events, events_by_kind, frames_checked and frames_flags_checked come \
                     together: some are missing"
                        .into(),
                );
            }
        };
        Ok(Self {
            report: f.report,
            frames: f.frames,
            sampler_yielding: f.sampler_yielding,
            detector,
            rhythm: f.rhythm,
            episodes: f.episodes,
        })
    }
}

/// The episodes of every env in a line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchEpisodes {
    /// Episodes that ended (by anything but the end of what was followed).
    pub ended: u64,
    pub by_ending: EpisodesByEnding,
    /// Of those ended, the complete ones and those that lack frames or began before the
    /// attach.
    pub complete: u64,
    pub incomplete: u64,
    /// Means over the complete episodes with a finite return (None: none yet).
    pub mean_return: Option<f64>,
    pub mean_length: Option<f64>,
}

/// Events found per kind, in [`EventKind::ALL`]'s order; in JSON, an object of every
/// kind's name and its count, in that order (a name this build does not know is left out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventsByKind(pub [u64; EventKind::ALL.len()]);

/// Episodes that ended, per ending, in [`Ending::ALL`]'s order; in JSON, an object of the
/// name and count of every ending but `running` (0 here: an episode still running has not
/// ended).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EpisodesByEnding(pub [u64; Ending::ALL.len()]);

impl WatchLine {
    /// The line of a report and the figures that join it.
    pub fn new(
        report: Report,
        stats: &SamplerStats,
        yielding: bool,
        events: Option<&EventTotals>,
        rhythm: Option<&RhythmSummary>,
        episodes: Option<&RunTotals>,
    ) -> Self {
        Self {
            report,
            frames: stats.frames.balance(),
            sampler_yielding: yielding,
            detector: events.map(WatchDetector::from),
            rhythm: rhythm.map(rhythm_json),
            episodes: episodes.map(WatchEpisodes::from),
        }
    }

    /// The line of a JSON object (one line of `watch --json`, parsed).
    pub fn from_json(json: &serde_json::Value) -> Result<Self, WatchLineError> {
        Ok(Self::deserialize(json)?)
    }

    /// Frames seen that the detector did not check whole (None: no detector).
    pub fn frames_unchecked(&self) -> Option<u64> {
        self.detector
            .map(|d| self.frames.seen.saturating_sub(d.frames_checked))
    }
}

impl From<&EventTotals> for WatchDetector {
    fn from(t: &EventTotals) -> Self {
        Self {
            events: t.events(),
            events_by_kind: EventsByKind(t.by_kind),
            frames_checked: t.frames_checked,
            frames_flags_checked: t.frames_flags_checked,
        }
    }
}

impl From<&RunTotals> for WatchEpisodes {
    fn from(t: &RunTotals) -> Self {
        let mut by_ending = t.by_ending;
        if let Some(running) = by_ending.get_mut(Ending::Running.position()) {
            *running = 0;
        }
        Self {
            ended: t.finished(),
            by_ending: EpisodesByEnding(by_ending),
            complete: t.complete,
            incomplete: t.incomplete,
            mean_return: t.mean_return(),
            mean_length: t.mean_length(),
        }
    }
}

/// The loop's rhythm in `watch --json`: the summary without its list of pauses, with
/// the shares of wall time and the newest pause.
fn rhythm_json(r: &RhythmSummary) -> serde_json::Value {
    let mut v = r.to_json();
    if let Some(m) = v.as_object_mut() {
        m.remove("recent");
        m.insert(
            "shares".into(),
            serde_json::json!({
                "stepping": r.share(r.stepping_secs),
                "trainer": r.share(r.trainer_secs),
                "engine": r.share(r.engine_secs),
                "unknown": r.share(r.unknown_secs),
            }),
        );
        m.insert(
            "last_pause".into(),
            serde_json::to_value(r.recent.last()).unwrap_or_default(),
        );
    }
    v
}

impl EventsByKind {
    pub fn of(&self, kind: EventKind) -> u64 {
        self.0.get(kind.position()).copied().unwrap_or(0)
    }
}

impl EpisodesByEnding {
    pub fn of(&self, ending: Ending) -> u64 {
        self.0.get(ending.position()).copied().unwrap_or(0)
    }
}

/// Counts under names, read into `counts` at the places `place` gives each name it knows.
fn named_counts<'de, D: Deserializer<'de>>(
    d: D,
    counts: &mut [u64],
    place: impl Fn(&str) -> Option<usize>,
) -> Result<(), D::Error> {
    for (name, n) in BTreeMap::<String, u64>::deserialize(d)? {
        if let Some(c) = place(&name).and_then(|i| counts.get_mut(i)) {
            *c = n;
        }
    }
    Ok(())
}

impl Serialize for EventsByKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(EventKind::ALL.iter().map(|&k| (k.as_str(), self.of(k))))
    }
}

impl<'de> Deserialize<'de> for EventsByKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = Self::default();
        named_counts(d, &mut out.0, |name| {
            EventKind::parse(name).map(EventKind::position)
        })?;
        Ok(out)
    }
}

impl Serialize for EpisodesByEnding {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(
            Ending::ALL
                .iter()
                .filter(|e| e.finished())
                .map(|&e| (e.as_str(), self.of(e))),
        )
    }
}

impl<'de> Deserialize<'de> for EpisodesByEnding {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = Self::default();
        named_counts(d, &mut out.0, |name| {
            Ending::parse(name)
                .filter(|e| e.finished())
                .map(Ending::position)
        })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lrbc_live::rhythm::LoopKind;
    use lrbc_live::watch::State;

    fn report() -> Report {
        Report {
            t_secs: 3.0000001,
            state: State::Attached,
            frame_seq: 1234,
            action_seq: 1236,
            frame_hz: Some(249.87654321),
            action_hz: None,
            lag: -2,
            server_pid: 4242,
            server_alive: true,
            note: None,
        }
    }

    fn stats() -> SamplerStats {
        SamplerStats {
            frames: FrameCounts {
                seen: 750,
                sampled: 700,
                missed: 30,
                missed_late: 4,
                torn: 12,
                skipped: 6,
                unreadable: 2,
                checked: 745,
                values_checked: 740,
            },
            images_captured: 9,
            images_torn: 1,
        }
    }

    fn events() -> EventTotals {
        let mut t = EventTotals {
            frames_seen: 750,
            frames_checked: 740,
            frames_flags_checked: 745,
            ..EventTotals::default()
        };
        t.by_kind[EventKind::Nonfinite.position()] = 3;
        t.by_kind[EventKind::Stall.position()] = 1;
        t
    }

    fn rhythm() -> RhythmSummary {
        RhythmSummary {
            at_ns: 5,
            kind: LoopKind::Periodic,
            step_secs: Some(0.004),
            rollout_frames: Some(32),
            update_secs: Some(0.8),
            followed_secs: 3.0,
            stepping_secs: 2.0,
            trainer_secs: 0.7,
            engine_secs: 0.2,
            unknown_secs: 0.1,
            pauses: 3,
            ..RhythmSummary::default()
        }
    }

    fn episodes() -> RunTotals {
        RunTotals {
            by_ending: [5, 2, 1, 0, 64],
            complete: 6,
            exact: 5,
            incomplete: 2,
            sum_return: 12.5,
            sum_length: 333,
            frames_taken: 700,
            frames_lacking: 3,
        }
    }

    fn every_mode() -> WatchLine {
        WatchLine::new(
            report(),
            &stats(),
            true,
            Some(&events()),
            Some(&rhythm()),
            Some(&episodes()),
        )
    }

    /// The line as `watch --json` printed it when it built the object key by key: the
    /// same keys, in the same order, with the same numbers. A field renamed or moved
    /// fails here.
    #[test]
    fn the_line_keeps_its_keys_their_order_and_their_numbers() {
        let bare = WatchLine::new(report(), &stats(), false, None, None, None);
        assert_eq!(
            serde_json::to_string(&bare).unwrap(),
            concat!(
                r#"{"t_secs":3.0000001,"state":"attached","frame_seq":1234,"action_seq":1236,"#,
                r#""frame_hz":249.87654321,"action_hz":null,"lag":-2,"server_pid":4242,"#,
                r#""server_alive":true,"note":null,"frames_seen":750,"frames_sampled":700,"#,
                r#""frames_missed":30,"frames_missed_late":4,"frames_torn":12,"#,
                r#""frames_skipped":6,"frames_unreadable":2,"sampler_yielding":false}"#,
            )
        );
        assert_eq!(
            serde_json::to_string(&every_mode()).unwrap(),
            concat!(
                r#"{"t_secs":3.0000001,"state":"attached","frame_seq":1234,"action_seq":1236,"#,
                r#""frame_hz":249.87654321,"action_hz":null,"lag":-2,"server_pid":4242,"#,
                r#""server_alive":true,"note":null,"frames_seen":750,"frames_sampled":700,"#,
                r#""frames_missed":30,"frames_missed_late":4,"frames_torn":12,"#,
                r#""frames_skipped":6,"frames_unreadable":2,"sampler_yielding":true,"#,
                r#""events":4,"events_by_kind":{"nonfinite":3,"out_of_range":0,"saturated":0,"#,
                r#""done_burst":0,"stall":1,"pause":0,"state":0,"rpc_error":0,"unanswered":0,"#,
                r#""malformed":0,"ring_loss":0},"frames_checked":740,"frames_flags_checked":745,"#,
                r#""rhythm":{"at_ns":5,"kind":"periodic","step_secs":0.004,"rollout_frames":32,"#,
                r#""update_secs":0.8,"update_side":null,"followed_secs":3.0,"stepping_secs":2.0,"#,
                r#""trainer_secs":0.7,"engine_secs":0.2,"unknown_secs":0.1,"pauses":3,"#,
                r#""stalls":0,"time_limits":0,"time_limit_frames":null,"resets_in_step":0,"#,
                r#""shares":{"stepping":0.6666666666666666,"trainer":0.2333333333333333,"#,
                r#""engine":0.06666666666666667,"unknown":0.03333333333333333},"#,
                r#""last_pause":null},"episodes":{"ended":8,"by_ending":{"done":5,"#,
                r#""truncated":2,"reset":1,"nonfinite":0},"complete":6,"incomplete":2,"#,
                r#""mean_return":2.5,"mean_length":66.6}}"#,
            )
        );
    }

    #[test]
    fn a_line_parses_back_with_its_modes_and_its_derived_figures() {
        let full = every_mode();
        let text = serde_json::to_string(&full).unwrap();
        let back = WatchLine::from_json(&serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(back, full);
        assert_eq!(back.frames.lost(), 30 + 12 + 2);
        assert_eq!(back.frames_unchecked(), Some(10));
        let detector = back.detector.unwrap();
        assert_eq!(detector.events_by_kind.of(EventKind::Nonfinite), 3);
        let episodes = back.episodes.unwrap();
        assert_eq!((episodes.ended, episodes.incomplete), (8, 2));
        // Episodes still running are no ending of the line.
        assert_eq!(episodes.by_ending.of(Ending::Running), 0);

        // Without the detector and the episodes: no detector's counts, nothing
        // unchecked, no episodes.
        let bare = WatchLine::new(report(), &stats(), false, None, None, None);
        let text = serde_json::to_string(&bare).unwrap();
        let back = WatchLine::from_json(&serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(back, bare);
        assert_eq!(back.frames_unchecked(), None);
        assert!(back.episodes.is_none() && back.rhythm.is_none());
    }

    #[test]
    fn a_line_that_lacks_a_count_or_is_no_object_is_refused() {
        let mut json = serde_json::to_value(every_mode()).unwrap();
        json.as_object_mut().unwrap().remove("frames_torn");
        let e = WatchLine::from_json(&json).unwrap_err().to_string();
        assert!(e.starts_with("not a line of watch --json"), "{e}");
        assert!(e.contains("frames_torn"), "{e}");
        assert!(WatchLine::from_json(&serde_json::Value::Null).is_err());
        let mut json = serde_json::to_value(every_mode()).unwrap();
        json.as_object_mut().unwrap().remove("frames_checked");
        let e = WatchLine::from_json(&json).unwrap_err().to_string();
        assert!(e.contains("come together"), "{e}");
        // A kind or an ending this build does not know is left out.
        let mut json = serde_json::to_value(every_mode()).unwrap();
        json["events_by_kind"]["later_kind"] = 9.into();
        json["episodes"]["by_ending"]["running"] = 9.into();
        let back = WatchLine::from_json(&json).unwrap();
        assert_eq!(back, every_mode());
    }
}
