//! The detector: a pure state machine that turns the checks of frames, the passing of
//! time (judged by the loop's rhythm, `crate::rhythm`), the endings of envs, the
//! segment's state changes and ring faults into events. The same code runs live (on the
//! frame follower's thread) and over a recording.

use std::collections::HashMap;

use super::event::{Event, EventKind, EventTotals, Origin};
use super::ring_fault::RingFault;
use super::settings::DetectSettings;
use crate::check::{ChannelKind, Fault, FrameCheck, Hit};
use crate::rhythm::{
    EndingsInStep, Flags, FrameEndings, FrameTimes, Judgment, Rhythm, RhythmSummary, Side, Waiting,
    Why,
};
use crate::watch::State;
use lrbc::layout::{Names, RegionKind};

/// Envs below this number never make a done burst (one env in two done is no burst).
pub const BURST_MIN_ENVS: u32 = 8;
/// Ring faults of one kind, ring and method this close together are one event.
pub const RING_MERGE_NS: u64 = 1_000_000_000;
/// An event that goes on is written again at most this often (its count and last frame).
pub const REFRESH_NS: u64 = 1_000_000_000;

/// A value fault's identity: the same fault of the same env in the same channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    Value(EventKind, u32, ChannelKind),
    Burst,
    /// A ring fault: its kind, ring and a hash of its method.
    Ring(EventKind, RegionKind, u64),
    /// The segment's state (one open at a time).
    State,
}

/// An event not over yet.
#[derive(Clone, Debug)]
struct Open {
    event: Event,
    /// The frame it was last seen in.
    seen_frame: u64,
    /// When it was last written (found or refreshed).
    written_ns: u64,
    /// Changed since it was last written.
    dirty: bool,
    /// A ring fault's first occurrence, for the message.
    ring_fault: Option<RingFault>,
}

impl Open {
    /// An event just found (and written) at `t_ns`, seen in frame `frame`.
    fn new(event: Event, frame: u64, t_ns: u64) -> Self {
        Self {
            event,
            seen_frame: frame,
            written_ns: t_ns,
            dirty: false,
            ring_fault: None,
        }
    }
}

/// The detector of one run.
#[derive(Clone, Debug)]
pub struct Detector {
    settings: DetectSettings,
    num_envs: u32,
    names: Names,
    next_id: u64,
    open: HashMap<Key, Open>,
    /// Per env with a non-finite event open: the origin judged at its first bad frame.
    origins: HashMap<u32, Origin>,
    /// The newest frame whose every env was checked whole (rewards, observations and
    /// actions), and the same per env for frames that held some envs' values only.
    checked_all: Option<u64>,
    checked_env: HashMap<u32, u64>,
    /// Envs of the current segment that held a non-finite or out-of-range value (a
    /// saturated action does not count), a bit each: set at the env's first such value
    /// so that `envs_affected` counts it once, and never cleared while the segment
    /// lasts. `restart` (a new segment) starts an empty set; `envs_affected` keeps its
    /// count, so an env bad in two segments counts twice.
    bad_envs: Vec<u64>,
    /// The loop's steps and pauses, which judge a wait.
    rhythm: Rhythm,
    /// The stall (or the pause of unknown rhythm) going on.
    stall: Option<Open>,
    /// The one pause of unknown rhythm was told.
    told_pause: bool,
    /// Each env's episode start, to tell a frame's endings apart.
    endings: EndingsInStep,
    /// Frames whose truncations were the time limit of envs in step; the newest's length.
    time_limits: u64,
    time_limit_frames: Option<u64>,
    /// Frames in which the trainer reset more than the burst share of the envs.
    resets_in_step: u64,
    state: State,
    /// The newest frame checked.
    frame_seq: Option<u64>,
    totals: EventTotals,
}

impl Detector {
    /// A detector of a run of `num_envs` envs whose values are named by `names`.
    pub fn new(settings: DetectSettings, num_envs: u32, names: Names) -> Self {
        Self {
            rhythm: Rhythm::new(settings.rhythm()),
            settings,
            num_envs,
            names,
            next_id: 1,
            open: HashMap::new(),
            origins: HashMap::new(),
            checked_all: None,
            checked_env: HashMap::new(),
            bad_envs: vec![0; num_envs.div_ceil(64) as usize],
            stall: None,
            told_pause: false,
            endings: EndingsInStep::new(),
            time_limits: 0,
            time_limit_frames: None,
            resets_in_step: 0,
            state: State::Attached,
            frame_seq: None,
            totals: EventTotals::default(),
        }
    }

    pub fn settings(&self) -> &DetectSettings {
        &self.settings
    }

    /// New thresholds from now on; events open go on, and what the rhythm learned stays.
    pub fn set_settings(&mut self, settings: DetectSettings) {
        self.rhythm.set_settings(settings.rhythm());
        self.settings = settings;
    }

    /// The loop's rhythm and the endings in step, as of `now_ns`.
    pub fn rhythm(&self, now_ns: u64) -> RhythmSummary {
        RhythmSummary {
            time_limits: self.time_limits,
            time_limit_frames: self.time_limit_frames,
            resets_in_step: self.resets_in_step,
            ..self.rhythm.summary(now_ns)
        }
    }

    /// Pauses the rhythm saw end (moves when one ends).
    pub fn pauses(&self) -> u64 {
        self.rhythm.pauses()
    }

    /// Events found per kind, frames checked, bad values counted.
    pub fn totals(&self) -> EventTotals {
        self.totals
    }

    /// Frames the engine published that the detector was told of (live: the follower's
    /// counts; a recording: its frames and those let pass).
    pub fn add_frames_seen(&mut self, n: u64) {
        self.totals.frames_seen += n;
    }

    fn new_event(&mut self, kind: EventKind, frame: u64, t_ns: u64) -> Event {
        let id = self.next_id;
        self.next_id += 1;
        if let Some(n) = self.totals.by_kind.get_mut(kind.position()) {
            *n += 1;
        }
        Event::new(id, kind, frame, t_ns)
    }

    /// A frame taken at `times.seen_ns` (its stamps in `times`), its check and its done,
    /// truncated and reset flags. Found, ended and refreshed events are appended to
    /// `out`.
    pub fn frame(
        &mut self,
        times: FrameTimes,
        check: &FrameCheck,
        flags: Flags<'_>,
        out: &mut Vec<Event>,
    ) {
        let t_ns = times.seen_ns;
        let f = check.frame_seq;
        if self.frame_seq.is_some_and(|p| f <= p) {
            // frame_seq went back (a new run), or a frame came twice: what was open
            // belongs to the old frames.
            if self.frame_seq.is_some_and(|p| f < p) {
                self.end_values(t_ns, out);
                self.end_stall(f, t_ns, out);
                self.rhythm.restart();
                self.endings = EndingsInStep::new();
                self.checked_all = None;
                self.checked_env.clear();
            } else {
                return;
            }
        }
        self.rhythm.frame(FrameTimes {
            frame_seq: f,
            ..times
        });
        if self.stall.as_ref().is_some_and(|o| f > o.event.first_frame) {
            self.end_stall(f, t_ns, out);
        }
        self.frame_seq = Some(f);
        let t = &mut self.totals;
        t.frames_flags_checked += u64::from(check.rewards);
        t.frames_checked += u64::from(!check.obs.is_none());
        t.nan_values += check.nan_values;
        t.inf_values += check.inf_values;
        t.out_of_range_values += check.out_of_range_values;
        if !check.hits.is_empty() {
            self.judge_origins(check);
            for hit in &check.hits {
                self.hit(f, t_ns, hit, out);
            }
        }
        // The endings told apart: a done burst is more than the set share of the envs
        // terminated (or truncated at differing lengths) in one frame; envs in step
        // meeting the time limit, and resets by the trainer, are counted.
        if check.rewards {
            let ends = self.endings.frame(f, flags);
            if ends.num_envs >= BURST_MIN_ENVS {
                let share = f64::from(self.settings.done_burst_share);
                if ends.time_limit(share) {
                    self.time_limits += 1;
                    self.time_limit_frames = ends.truncated_length;
                }
                if ends.resets_in_step(share) {
                    self.resets_in_step += 1;
                }
                if ends.above(ends.burst_envs(), share) {
                    self.burst(f, t_ns, &ends, out);
                }
            }
        }
        // Events of values this frame checked and found clean have ended.
        let ended: Vec<Key> = self
            .open
            .iter()
            .filter(|(k, o)| {
                o.seen_frame != f
                    && match **k {
                        Key::Value(_, env, channel) => check.covers(env, channel),
                        Key::Burst => check.rewards,
                        Key::Ring(..) | Key::State => false,
                    }
            })
            .map(|(k, _)| *k)
            .collect();
        for k in ended {
            self.end(k, t_ns, out);
        }
        // What was checked whole, for the origin of the next frame's faults.
        let whole = check.rewards && !check.obs.is_none() && !check.act.is_none();
        if whole {
            match (&check.obs, &check.act) {
                (crate::check::Coverage::All, crate::check::Coverage::All) => {
                    self.checked_all = Some(f);
                    self.checked_env.clear();
                }
                (crate::check::Coverage::Envs(envs), act) => {
                    for &e in envs {
                        if act.covers(e) {
                            self.checked_env.insert(e, f);
                        }
                    }
                }
                _ => {}
            }
        }
        self.refresh(t_ns, out);
    }

    /// Whether every value of `env` was checked in frame `f`.
    fn checked_whole(&self, env: u32, f: u64) -> bool {
        self.checked_all == Some(f) || self.checked_env.get(&env) == Some(&f)
    }

    /// The origin of each env's first bad frame, for the envs whose non-finite values
    /// start in this frame.
    fn judge_origins(&mut self, check: &FrameCheck) {
        let f = check.frame_seq;
        // Per env: (non-finite action, non-finite observation or reward).
        let mut bad: HashMap<u32, (bool, bool)> = HashMap::new();
        for h in check.hits.iter().filter(|h| h.fault == Fault::NonFinite) {
            let e = bad.entry(h.env).or_default();
            if h.channel.kind() == ChannelKind::Action {
                e.0 = true;
            } else {
                e.1 = true;
            }
        }
        for (env, (act_bad, sim_bad)) in bad {
            if self.origins.contains_key(&env) {
                continue;
            }
            let origin = if !check.act.covers(env) {
                Origin::Unknown
            } else if act_bad && !sim_bad {
                Origin::Policy
            } else if !act_bad && sim_bad {
                // The actions the env was stepped with were checked and finite.
                Origin::Simulator
            } else if f > 0 && self.checked_whole(env, f - 1) {
                // Both sides bad at once: the actions came first, from a frame the
                // policy saw whole and finite.
                Origin::Policy
            } else {
                Origin::Unknown
            };
            self.origins.insert(env, origin);
        }
    }

    /// One hit of a frame: a new event, or the one it continues.
    fn hit(&mut self, f: u64, t_ns: u64, hit: &Hit, out: &mut Vec<Event>) {
        let kind = match hit.fault {
            Fault::NonFinite => EventKind::Nonfinite,
            Fault::OutOfRange => EventKind::OutOfRange,
            Fault::Saturated => EventKind::Saturated,
        };
        let channel = hit.channel.kind();
        let key = Key::Value(kind, hit.env, channel);
        if hit.fault != Fault::Saturated
            && let Some(word) = self.bad_envs.get_mut(hit.env as usize / 64)
        {
            let bit = 1u64 << (hit.env % 64);
            if *word & bit == 0 {
                *word |= bit;
                self.totals.envs_affected += 1;
            }
        }
        if let Some(o) = self.open.get_mut(&key) {
            if o.seen_frame != f {
                o.seen_frame = f;
                o.event.last_frame = f;
                o.event.count += 1;
                o.event.end_time_ns = t_ns;
                o.dirty = true;
            }
            return;
        }
        let first = if hit.fault == Fault::Saturated {
            f.saturating_sub(u64::from(hit.run_frames.max(1)) - 1)
        } else {
            f
        };
        let mut e = self.new_event(kind, first, t_ns);
        e.last_frame = f;
        e.count = if hit.fault == Fault::Saturated {
            u64::from(hit.run_frames.max(1))
        } else {
            1
        };
        e.env = Some(hit.env);
        e.channel = Some(channel);
        e.index = hit.channel.index();
        e.name = match hit.channel {
            crate::check::Channel::Obs(i) => self.names.obs.get(i as usize).cloned(),
            crate::check::Channel::Act(i) => self.names.act.get(i as usize).cloned(),
            crate::check::Channel::Reward => None,
        };
        e.value = Some(f64::from(hit.value));
        e.values = Some(hit.values);
        if kind == EventKind::Nonfinite {
            e.origin = Some(
                self.origins
                    .get(&hit.env)
                    .copied()
                    .unwrap_or(Origin::Unknown),
            );
        }
        e.message = value_message(&e, &self.names, hit);
        out.push(e.clone());
        self.open.insert(key, Open::new(e, f, t_ns));
    }

    fn burst(&mut self, f: u64, t_ns: u64, ends: &FrameEndings, out: &mut Vec<Event>) {
        if let Some(o) = self.open.get_mut(&Key::Burst) {
            o.seen_frame = f;
            o.event.last_frame = f;
            o.event.count += 1;
            o.event.end_time_ns = t_ns;
            o.dirty = true;
            return;
        }
        let envs = ends.burst_envs();
        let n = ends.num_envs;
        let share = f64::from(envs) / f64::from(n.max(1));
        let mut e = self.new_event(EventKind::DoneBurst, f, t_ns);
        e.value = Some(share);
        e.values = Some(envs);
        let pct = share * 100.0;
        let truncated = envs - ends.terminated;
        e.message = match (ends.terminated, truncated) {
            (t, 0) => format!("{t} of {n} envs terminated (done) in one frame ({pct:.0} %)"),
            (0, k) => format!(
                "{k} of {n} envs truncated in one frame at differing episode lengths ({pct:.0} %)"
            ),
            (t, k) => format!(
                "{} of {n} envs ended in one frame ({pct:.0} %): {t} terminated (done), {k} truncated at differing episode lengths",
                t + k
            ),
        };
        out.push(e.clone());
        self.open.insert(Key::Burst, Open::new(e, f, t_ns));
    }

    /// Ends the open event of `key` (its end time is when it was last seen; a state
    /// change ends at `t_ns`).
    fn end(&mut self, key: Key, t_ns: u64, out: &mut Vec<Event>) {
        let Some(mut o) = self.open.remove(&key) else {
            return;
        };
        o.event.ongoing = false;
        if key == Key::State {
            o.event.end_time_ns = t_ns;
        }
        if let Key::Value(kind, env, _) = key {
            if o.event.count > 1 {
                o.event.message = format!(
                    "{} (in {} frames, {}–{})",
                    o.event.message, o.event.count, o.event.first_frame, o.event.last_frame
                );
            }
            if kind == EventKind::Nonfinite
                && !self
                    .open
                    .keys()
                    .any(|k| matches!(k, Key::Value(EventKind::Nonfinite, e, _) if *e == env))
            {
                self.origins.remove(&env);
            }
        }
        if let (Key::Ring(..), Some(f)) = (key, &o.ring_fault) {
            o.event.message = f.message(o.event.count);
        }
        if key == Key::Burst && o.event.count > 1 {
            o.event.message = format!("{} (in {} frames in a row)", o.event.message, o.event.count);
        }
        out.push(o.event);
    }

    /// Ends every value event and the done burst (a new run, a new segment).
    fn end_values(&mut self, t_ns: u64, out: &mut Vec<Event>) {
        let keys: Vec<Key> = self
            .open
            .keys()
            .filter(|k| matches!(k, Key::Value(..) | Key::Burst))
            .copied()
            .collect();
        for k in keys {
            self.end(k, t_ns, out);
        }
        self.origins.clear();
    }

    /// Writes again the events that went on and changed, at most every [`REFRESH_NS`].
    fn refresh(&mut self, t_ns: u64, out: &mut Vec<Event>) {
        for o in self.open.values_mut() {
            if o.dirty && t_ns.saturating_sub(o.written_ns) >= REFRESH_NS {
                o.dirty = false;
                o.written_ns = t_ns;
                out.push(o.event.clone());
            }
        }
    }

    /// Ends the stall (or pause) going on: `frame_seq` moved to `f` at `t_ns`.
    fn end_stall(&mut self, f: u64, t_ns: u64, out: &mut Vec<Event>) {
        let Some(mut o) = self.stall.take() else {
            return;
        };
        let secs = t_ns.saturating_sub(o.event.time_ns) as f64 / 1e9;
        o.event.ongoing = false;
        o.event.last_frame = f.max(o.event.first_frame);
        o.event.end_time_ns = t_ns;
        o.event.value = Some(secs);
        o.event.message = format!("{} The run went on after {secs:.2} s.", o.event.message);
        out.push(o.event);
    }

    /// Time passes: at `now_ns` the counters read `frame_seq` and `action_seq` (None:
    /// not known, as between two recorded frames). A wait longer than the loop's rhythm
    /// explains is a stall (before the rhythm is known, the first such wait is a pause
    /// of unknown rhythm, and no other is told); ring faults not repeated for a while
    /// end.
    pub fn tick(
        &mut self,
        now_ns: u64,
        frame_seq: u64,
        action_seq: Option<u64>,
        out: &mut Vec<Event>,
    ) {
        self.tick_stamped(now_ns, frame_seq, action_seq, None, out);
    }

    /// [`Detector::tick`], with the engine's stamp of the frame `frame_seq` names (the
    /// layout's `frame_time_ns`): a first look learns from it when that frame came.
    pub fn tick_stamped(
        &mut self,
        now_ns: u64,
        frame_seq: u64,
        action_seq: Option<u64>,
        frame_time_ns: Option<u64>,
        out: &mut Vec<Event>,
    ) {
        self.rhythm
            .look_stamped(now_ns, frame_seq, action_seq, frame_time_ns);
        if self
            .stall
            .as_ref()
            .is_some_and(|o| frame_seq > o.event.first_frame)
        {
            self.end_stall(frame_seq, now_ns, out);
        }
        if self.stall.is_none()
            && let Some(w) = self.rhythm.waiting(now_ns)
            && w.wait_ns > w.judgment.limit_ns()
        {
            self.open_stall(&w, now_ns, out);
        }
        if let Some(o) = &mut self.stall {
            o.event.end_time_ns = now_ns;
            o.event.value = Some(now_ns.saturating_sub(o.event.time_ns) as f64 / 1e9);
            if now_ns.saturating_sub(o.written_ns) >= REFRESH_NS {
                o.written_ns = now_ns;
                out.push(o.event.clone());
            }
        }
        let quiet: Vec<Key> = self
            .open
            .iter()
            .filter(|(k, o)| {
                matches!(k, Key::Ring(..))
                    && now_ns.saturating_sub(o.event.end_time_ns) >= RING_MERGE_NS
            })
            .map(|(k, _)| *k)
            .collect();
        for k in quiet {
            self.end(k, now_ns, out);
        }
        self.refresh(now_ns, out);
    }

    /// A wait longer than its judgment allows: a stall, or the one pause of unknown
    /// rhythm told before the rhythm is known.
    fn open_stall(&mut self, w: &Waiting, now_ns: u64, out: &mut Vec<Event>) {
        let f = w.frame;
        let limit = w.judgment.limit_ns() as f64 / 1e9;
        let side = w.side.waiting_text();
        let (kind, usual, why) = match w.judgment {
            Judgment::Learning { .. } => {
                if self.told_pause {
                    return;
                }
                self.told_pause = true;
                (
                    EventKind::Pause,
                    None,
                    "The loop's rhythm is not known yet: a pause of unknown rhythm (a policy update?), not judged a fault".to_string(),
                )
            }
            Judgment::Update {
                usual_ns,
                rollout_frames,
                ..
            } => (
                EventKind::Stall,
                Some(usual_ns as f64 / 1e9),
                format!(
                    "That is more than {}× the loop's usual update of {:.2} s after a rollout of {rollout_frames} frames",
                    self.settings.update_factor,
                    usual_ns as f64 / 1e9
                ),
            ),
            Judgment::Unexplained { why, .. } => {
                let why = match why {
                    Why::MidRollout {
                        after_frames,
                        rollout_frames,
                    } => format!(
                        "It came {after_frames} frames into a rollout of {rollout_frames}, where the loop has no pause"
                    ),
                    Why::OtherSide { usual } => format!(
                        "The loop's pauses are the {}'s, not this side's",
                        usual.as_str()
                    ),
                    Why::Continuous => "The loop steps without pauses".to_string(),
                    Why::Off => {
                        let step = self.rhythm.step_ns().map_or_else(String::new, |m| {
                            format!(
                                ": {}× the step of {:.1} ms, at least {} s",
                                self.settings.stall_factor,
                                m as f64 / 1e6,
                                self.settings.stall_min_secs
                            )
                        });
                        format!("Rhythm learning is off{step}")
                    }
                };
                (EventKind::Stall, None, why)
            }
        };
        let mut e = self.new_event(kind, f, w.since_ns);
        e.end_time_ns = now_ns;
        e.value = Some(w.wait_ns as f64 / 1e9);
        e.usual = usual;
        e.origin = Some(match w.side {
            Side::Trainer => Origin::Policy,
            Side::Engine => Origin::Simulator,
            Side::Unknown => Origin::Unknown,
        });
        e.message = format!("frame_seq still at {f} for more than {limit:.2} s, {side}. {why}.");
        out.push(e.clone());
        self.stall = Some(Open::new(e, f, now_ns));
    }

    /// The segment's state is `state` as of `now_ns` (`note`: what the watcher said).
    /// Engine gone, replaced, truncated and unlinked are events; back to attached ends
    /// them.
    pub fn state(&mut self, state: State, note: Option<&str>, now_ns: u64, out: &mut Vec<Event>) {
        if state == self.state {
            return;
        }
        let previous = std::mem::replace(&mut self.state, state);
        let bad = |s: State| {
            matches!(
                s,
                State::EngineGone | State::Replaced | State::Truncated | State::Unlinked
            )
        };
        if bad(previous)
            && let Some(mut o) = self.open.remove(&Key::State)
        {
            o.event.ongoing = false;
            o.event.end_time_ns = now_ns;
            out.push(o.event);
        }
        if !bad(state) {
            return;
        }
        let f = self.frame_seq.or(self.rhythm.last_frame()).unwrap_or(0);
        let mut e = self.new_event(EventKind::State, f, now_ns);
        let what = match state {
            State::EngineGone => "the engine is gone",
            State::Replaced => "the segment was replaced",
            State::Truncated => "the segment was truncated",
            State::Unlinked => "the segment was unlinked",
            State::Attached | State::Stale => "",
        };
        e.method = Some(state.as_str().into());
        e.message = match note {
            Some(n) if !n.is_empty() => format!("{what} ({n})"),
            _ => what.to_string(),
        };
        out.push(e.clone());
        // State events end when the state does: one open at a time.
        self.open.insert(Key::State, Open::new(e, f, now_ns));
    }

    /// A fault read off the rings at `now_ns`. The same fault of one ring and method
    /// within [`RING_MERGE_NS`] of the last is the same event.
    pub fn ring(&mut self, fault: RingFault, now_ns: u64, out: &mut Vec<Event>) {
        let kind = fault.kind();
        let method_key = fault.method().map_or(0, fnv);
        let key = Key::Ring(kind, fault.ring(), method_key);
        let f = self.frame_seq.or(self.rhythm.last_frame()).unwrap_or(0);
        let lost = match &fault {
            RingFault::Lost { lost_bytes, .. } => Some(*lost_bytes),
            _ => None,
        };
        if self
            .open
            .get(&key)
            .is_some_and(|o| now_ns.saturating_sub(o.event.end_time_ns) >= RING_MERGE_NS)
        {
            self.end(key, now_ns, out);
        }
        if let Some(o) = self.open.get_mut(&key) {
            o.event.count += 1;
            o.event.last_frame = f;
            o.event.end_time_ns = now_ns;
            if let (Some(v), Some(l)) = (&mut o.event.value, lost) {
                *v += l as f64;
            }
            o.dirty = true;
            return;
        }
        let mut e = self.new_event(kind, f, now_ns);
        e.ring = Some(fault.ring().as_str().into());
        e.method = fault.method().filter(|m| !m.is_empty()).map(str::to_string);
        e.value = lost.map(|l| l as f64);
        e.message = fault.message(1);
        out.push(e.clone());
        self.open.insert(
            key,
            Open {
                ring_fault: Some(fault),
                ..Open::new(e, f, now_ns)
            },
        );
    }

    /// The run ended (a recording's last frame, a command's end) at `now_ns`: ring
    /// faults end; value faults and a stall stay ongoing, written in their newest form.
    pub fn finish(&mut self, now_ns: u64, out: &mut Vec<Event>) {
        let rings: Vec<Key> = self
            .open
            .keys()
            .filter(|k| matches!(k, Key::Ring(..)))
            .copied()
            .collect();
        for k in rings {
            self.end(k, now_ns, out);
        }
        for o in self.open.values_mut() {
            if o.dirty {
                o.dirty = false;
                o.written_ns = now_ns;
                out.push(o.event.clone());
            }
        }
        if let Some(o) = &self.stall {
            out.push(o.event.clone());
        }
    }

    /// A new segment (the old one was replaced): what was open ends; the loop's rhythm
    /// and the episodes' starts are learned again.
    pub fn restart(&mut self, num_envs: u32, names: Names, now_ns: u64, out: &mut Vec<Event>) {
        self.end_values(now_ns, out);
        if let Some(mut o) = self.stall.take() {
            o.event.ongoing = false;
            o.event.end_time_ns = now_ns;
            out.push(o.event);
        }
        self.rhythm.restart();
        self.endings = EndingsInStep::new();
        self.told_pause = false;
        self.num_envs = num_envs;
        self.names = names;
        self.checked_all = None;
        self.checked_env.clear();
        self.frame_seq = None;
        self.bad_envs = vec![0; num_envs.div_ceil(64) as usize];
    }

    pub fn num_envs(&self) -> u32 {
        self.num_envs
    }
}

/// A small hash of a method name (to tell ring faults of different methods apart).
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The message of a value fault when found.
fn value_message(e: &Event, names: &Names, hit: &Hit) -> String {
    let what = hit.channel.label(names);
    let channel = hit.channel.kind().as_str();
    let place = match hit.channel {
        crate::check::Channel::Reward => format!("the reward of env {}", hit.env),
        crate::check::Channel::Obs(i) | crate::check::Channel::Act(i) => {
            let index = format!("{}[{i}]", hit.channel.kind().short());
            if what == index {
                format!("{channel} {index} of env {}", hit.env)
            } else {
                format!("{channel} {what} ({index}) of env {}", hit.env)
            }
        }
    };
    let more = if hit.values > 1 {
        format!(" and {} more values", hit.values - 1)
    } else {
        String::new()
    };
    let value = super::event::format_value(f64::from(hit.value));
    match e.kind {
        EventKind::Nonfinite => {
            let origin = e.origin.unwrap_or(Origin::Unknown).as_str();
            format!("{value} in {place}{more}; origin: {origin}")
        }
        EventKind::OutOfRange => format!("{place} is {value}, out of its bound{more}"),
        EventKind::Saturated => format!(
            "{place} held at {value} for {} frames{more}",
            hit.run_frames
        ),
        _ => String::new(),
    }
}
