//! A recording's events and loop rhythm: as its recorder's detector wrote them on
//! `/lrbc/events` and `/lrbc/rhythm`, or, for a file written before recorders had them
//! (or when asked), found again from its frames, ring entries and state changes by the
//! same detector as live (`lrbc_live::detect`). Found again, the actions of a recorded
//! frame count as checked (the recorder did not say whether the trainer was writing them
//! while it copied), and the side a pause waited on comes from the frames' stamps (the
//! engine's and the trainer's times), or is not known in a layout without them.

use lrbc_live::check::{Checker, Coverage, FrameCheck, LimitsError};
use lrbc_live::detect::{
    DetectSettings, Detector, Event, EventLog, EventTotals, RingFault, SettingsError,
};
use lrbc_live::rhythm::{Flags, FrameTimes, RhythmSummary};
use lrbc_live::traffic::{EntryDecoder, RingEntry, TrafficEvent};
use lrbc_live::watch::State;

use super::player::traffic::ring_format;
use super::reader::{Damage, Recording, Topic};
use crate::format::{CountsError, RecFrame, event_of, lucky_header_of, ring_event_of};

/// Why a recording's events were neither read nor found again, as one line.
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    /// The file is damaged where the events, the state changes or the frames are.
    #[error(transparent)]
    Damage(#[from] Damage),
    /// The counts its recorder wrote do not read ([`Recording::counts`]).
    #[error(transparent)]
    Counts(#[from] CountsError),
    /// The detector's settings cannot be used.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// A bound of the settings names a value the recorded segment does not have.
    #[error(transparent)]
    Limits(#[from] LimitsError),
    /// Its progress said to stop before the end of the file.
    #[error("stopped")]
    Stopped,
}

/// The events of a recording.
#[derive(Clone, Debug)]
pub struct RecordingEvents {
    /// The newest form of each, in the order found.
    pub events: Vec<Event>,
    pub totals: EventTotals,
    /// The loop's rhythm: its recorder's newest, or found again (None: the file holds
    /// its events but no rhythm, written before recorders had one).
    pub rhythm: Option<RhythmSummary>,
    /// Found again from the frames (the file has no `/lrbc/events`, or it was asked).
    pub found_again: bool,
}

impl RecordingEvents {
    /// The events as a log (for the window's Events panel).
    pub fn into_log(self, kept: usize) -> EventLog {
        let mut log = EventLog::new(kept);
        let totals = self.totals;
        for e in self.events {
            log.apply(e);
        }
        log.set_figures(&totals);
        if let Some(r) = self.rhythm {
            log.set_rhythm(r);
        }
        log
    }
}

/// Checks one recorded frame: every env's rewards and flags, the recorded envs' values.
pub fn check_frame<'a>(checker: &'a mut Checker, f: &RecFrame) -> &'a FrameCheck {
    checker.begin();
    checker.rewards(&f.rewards);
    checker.flags(&f.dones, f.truncateds.as_deref());
    let (o, a) = (f.obs_size, f.act_size);
    for (k, &env) in f.envs.iter().enumerate() {
        if let Some(row) = f.observations.get(k * o..(k + 1) * o) {
            checker.obs_rows(env, row);
        }
        if let Some(row) = f.actions.get(k * a..(k + 1) * a) {
            checker.act_rows(env, row);
        }
    }
    let covered = if f.envs.is_empty() {
        Coverage::None
    } else {
        Coverage::Envs(f.envs.clone())
    };
    checker.finish(f.frame_seq, covered.clone(), covered)
}

/// The events of `rec`: those its recorder wrote, else found again with `settings`.
/// `progress` is told the share of the file read so far while finding them again, and
/// stops the pass when it returns false ([`EventsError::Stopped`]).
pub fn recording_events(
    rec: &mut Recording,
    settings: &DetectSettings,
    progress: impl FnMut(f64) -> bool,
) -> Result<RecordingEvents, EventsError> {
    match rec.recorded_events()? {
        Some((events, totals)) => Ok(RecordingEvents {
            events,
            totals,
            rhythm: rec.recorded_rhythm()?,
            found_again: false,
        }),
        None => find_again(rec, settings, progress),
    }
}

/// The recording's frames, ring entries and state changes through the detector.
pub fn find_again(
    rec: &mut Recording,
    settings: &DetectSettings,
    mut progress: impl FnMut(f64) -> bool,
) -> Result<RecordingEvents, EventsError> {
    settings.check()?;
    let g = rec.geometry.clone();
    let mut checker = Checker::new(
        &settings.limits,
        g.num_envs,
        g.obs_size,
        g.act_size,
        &g.names,
    )?;
    let mut detector = Detector::new(settings.clone(), g.num_envs, g.names.clone());
    let mut out: Vec<Event> = Vec::new();
    let mut decoder = EntryDecoder::default();
    let mut traffic: Vec<TrafficEvent> = Vec::new();
    let mut headers = std::collections::HashMap::new();
    let states = rec.state_changes()?;
    let mut states = states.into_iter().peekable();
    let (t0, t1) = rec.time_range().unwrap_or((0, 0));
    let span = t1.saturating_sub(t0).max(1) as f64;
    let mut last: Option<(u64, u64)> = None;
    let (mut first_frame, mut last_frame) = (None, None);
    let mut stopped = false;
    let mut messages = 0u64;
    rec.each_message(0, u64::MAX, |topic, log_ns, data| {
        messages += 1;
        if messages.is_multiple_of(1024) && !progress((log_ns.saturating_sub(t0)) as f64 / span) {
            stopped = true;
            return false;
        }
        while let Some(s) = states.next_if(|s| s.log_ns <= log_ns) {
            if let Some(state) = State::parse(&s.state) {
                let note = (!s.note.is_empty()).then_some(s.note.as_str());
                detector.state(state, note, s.log_ns, &mut out);
            }
        }
        match topic {
            Topic::Frame => {
                let Some(f) = RecFrame::decode(log_ns, data) else {
                    return true;
                };
                // Only between frames in a row is a pause of frame_seq known to be one.
                if let Some((pf, pt)) = last
                    && f.frame_seq == pf + 1
                {
                    look_between(&mut detector, pf, pt, &f, &mut out);
                }
                let check = check_frame(&mut checker, &f);
                let times = FrameTimes {
                    frame_seq: f.frame_seq,
                    seen_ns: log_ns,
                    frame_time_ns: (f.frame_time_ns != 0).then_some(f.frame_time_ns),
                    action_time_ns: (f.action_time_ns != 0 && f.action_time_ns <= f.frame_time_ns)
                        .then_some(f.action_time_ns),
                };
                let flags = Flags {
                    dones: &f.dones,
                    truncateds: f.truncateds.as_deref(),
                    resets: &f.resets,
                };
                detector.frame(times, check, flags, &mut out);
                // Requests are flagged unanswered as time passes, as live.
                decoder.expire(log_ns, &mut traffic);
                for e in traffic.drain(..) {
                    if let Some(fault) = RingFault::from_traffic(&e) {
                        detector.ring(fault, log_ns, &mut out);
                    }
                }
                last = Some((f.frame_seq, log_ns));
                first_frame.get_or_insert(f.frame_seq);
                last_frame = Some(f.frame_seq);
            }
            Topic::Ring(ring) => {
                let lucky = headers
                    .remove(&ring)
                    .and_then(|h: std::sync::Arc<[u8]>| lucky_header_of(&h[..], data.len()));
                let entry = RingEntry {
                    ring,
                    format: ring_format(&g, ring),
                    position: 0,
                    payload: data.to_vec(),
                    lucky,
                    at_risk: false,
                };
                decoder.entry(entry, log_ns, &mut traffic);
                decoder.expire(log_ns, &mut traffic);
                for e in traffic.drain(..) {
                    if let Some(fault) = RingFault::from_traffic(&e) {
                        detector.ring(fault, log_ns, &mut out);
                    }
                }
            }
            Topic::RingEvent => {
                if let Some(fault) = ring_event_of(data)
                    .as_ref()
                    .and_then(RingFault::from_traffic)
                {
                    detector.ring(fault, log_ns, &mut out);
                }
            }
            Topic::RingHeader(ring) => {
                headers.insert(ring, std::sync::Arc::clone(data));
            }
        }
        true
    })?;
    if stopped {
        return Err(EventsError::Stopped);
    }
    for s in states {
        if let Some(state) = State::parse(&s.state) {
            detector.state(
                state,
                Some(s.note.as_str()).filter(|n| !n.is_empty()),
                s.log_ns,
                &mut out,
            );
        }
    }
    decoder.expire(t1, &mut traffic);
    for e in traffic.drain(..) {
        if let Some(fault) = RingFault::from_traffic(&e) {
            detector.ring(fault, t1, &mut out);
        }
    }
    detector.finish(t1, &mut out);
    // Frames the engine published over the recording: those recorded and those let pass.
    if let (Some(a), Some(b)) = (first_frame, last_frame) {
        detector.add_frames_seen(b.saturating_sub(a) + 1);
    }
    let log = newest_forms(out);
    let mut totals = detector.totals();
    totals.by_kind = log.totals().by_kind;
    Ok(RecordingEvents {
        events: log.events().iter().cloned().collect(),
        totals,
        rhythm: Some(detector.rhythm(t1)),
        found_again: true,
    })
}

/// The looks at the counters a live detector would have made between frame `pf` (seen
/// at `pt`) and `f`, the next: while the trainer's turn lasted (`action_seq` still at
/// `pf`) and while the engine's did, as the frame's stamps split the time between them
/// (the engine's part since the trainer's stamp). Without stamps, one look just before
/// `f`, which side waited not known.
fn look_between(detector: &mut Detector, pf: u64, pt: u64, f: &RecFrame, out: &mut Vec<Event>) {
    let before = f.log_ns.saturating_sub(1);
    if f.frame_time_ns != 0 && f.action_time_ns != 0 && f.action_time_ns <= f.frame_time_ns {
        let acted = f
            .log_ns
            .saturating_sub(f.frame_time_ns - f.action_time_ns)
            .max(pt);
        detector.tick(acted.saturating_sub(1).max(pt), pf, Some(pf), out);
        detector.tick(acted, pf, Some(pf + 1), out);
        detector.tick(before.max(acted), pf, Some(pf + 1), out);
    } else {
        detector.tick(before, pf, None, out);
    }
}

/// The newest form of each event, in the order found.
fn newest_forms(forms: Vec<Event>) -> EventLog {
    let mut log = EventLog::new(usize::MAX);
    for e in forms {
        log.apply(e);
    }
    log
}

impl Recording {
    /// The events its recorder wrote (the newest form of each, in the order found) and
    /// their totals as far as the file tells them (0 frames checked in a file its
    /// recorder did not finish); None when the file has no `/lrbc/events` (written
    /// before recorders had a detector); an error when its counts are not readable
    /// ([`Recording::counts`]).
    pub fn recorded_events(&mut self) -> Result<Option<(Vec<Event>, EventTotals)>, EventsError> {
        let Some(messages) = self.events_messages()? else {
            return Ok(None);
        };
        let log = newest_forms(messages.iter().filter_map(|m| event_of(m)).collect());
        let mut totals = log.totals();
        let counts = self.counts()?.unwrap_or_default();
        // The frames the engine published while it recorded: those it copied (or found
        // torn), and those that passed between two looks or while it held off.
        totals.frames_seen = counts.frames_published();
        totals.frames_checked = counts.frames_checked;
        totals.frames_flags_checked = counts.frames_flags_checked;
        totals.nan_values = counts.nan_values;
        totals.inf_values = counts.inf_values;
        totals.out_of_range_values = counts.out_of_range_values;
        // The envs the events were in (a recording keeps no count of its own).
        totals.envs_affected = log.envs_with_bad_values();
        Ok(Some((log.events().iter().cloned().collect(), totals)))
    }
}
