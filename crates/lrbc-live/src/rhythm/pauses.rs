//! [`Rhythm`]: the state machine of the loop's steps and pauses. Fed every frame taken
//! (its `frame_seq`, when it was seen, and the engine's and trainer's stamps where the
//! layout has them) and every look at the counters (`frame_seq`, `action_seq`), it
//! learns the step interval, the pauses (a time between two frames much longer than the
//! step), which side each pause waited on, the rollout (frames between the loop's
//! pauses) and the update (their usual length), and judges a wait: a pause of the loop,
//! a pause where the loop has none, or one before the loop is known.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::summary::{LoopKind, Pause, RECENT_PAUSES, RhythmSummary};

/// A time between two frames longer than this multiple of the step interval...
pub const PAUSE_INTERVALS: u64 = 10;
/// ...and than this is a pause (shorter waits are part of the loop's step).
pub const PAUSE_MIN_NS: u64 = 50_000_000;
/// Step intervals kept to take the median of.
const INTERVALS: usize = 64;
/// Times between frames seen before a pause (or a stall) can be told at all.
const INTERVALS_TO_JUDGE: usize = 8;
/// Pauses of the loop its figures are the medians of.
const LOOP_PAUSES: usize = 16;
/// No pause for this many frames and this long: the loop steps without pauses.
pub const CONTINUOUS_FRAMES: u64 = 4096;
pub const CONTINUOUS_NS: u64 = 30_000_000_000;
/// A pause at the loop's place this many times shorter than its usual update is a
/// short one (a hiccup before the update), not the loop's.
const SHORT_DIVISOR: f64 = 4.0;
/// Two pauses whose lengths are within this factor are alike (one loop's pauses).
const ALIKE: f64 = 3.0;

/// Which side a wait was on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// `action_seq = frame_seq`: the engine waits for the trainer's actions.
    Trainer,
    /// `action_seq` ahead of `frame_seq`: the trainer waits for the engine's frame.
    Engine,
    /// Not known (no stamps, no look at `action_seq` during the wait).
    Unknown,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trainer => "trainer",
            Self::Engine => "engine",
            Self::Unknown => "unknown",
        }
    }

    /// What waited, in words.
    pub fn waiting_text(self) -> &'static str {
        match self {
            Self::Trainer => "waiting for the trainer's actions (action_seq = frame_seq)",
            Self::Engine => "waiting for the engine's frame (action_seq ahead of frame_seq)",
            Self::Unknown => "which side waited is not known",
        }
    }

    /// Whether a wait on this side can be one of `other`'s (an unknown side can be
    /// either).
    fn may_be(self, other: Side) -> bool {
        self == other || self == Self::Unknown || other == Self::Unknown
    }
}

/// What a pause was judged, once over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseVerdict {
    /// A pause of the loop: at its place after a rollout, not longer than the set
    /// multiple of its usual update.
    Loop,
    /// A pause before the loop was known.
    Learning,
    /// Longer than the loop explains: a stall.
    Stall,
    /// A pause the loop does not explain, too short for a stall.
    Short,
    /// A pause among frames not taken: where in them it fell is not known, so it is not
    /// judged (its time is counted).
    Unplaced,
}

impl PauseVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Loop => "loop",
            Self::Learning => "learning",
            Self::Stall => "stall",
            Self::Short => "short",
            Self::Unplaced => "unplaced",
        }
    }
}

/// What judges a wait, as the user sets it (the detector's settings).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RhythmSettings {
    /// Learn the loop; off, every wait is judged by `stall_factor` and `stall_min_ns`.
    pub learn: bool,
    /// A wait the loop does not explain is a stall past this multiple of the step...
    pub stall_factor: f64,
    /// ...and past this (any stall is at least this long).
    pub stall_min_ns: u64,
    /// A pause of the loop is a stall past this multiple of its usual update.
    pub update_factor: f64,
}

/// Why the loop does not explain a wait.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Why {
    /// It came `after_frames` frames into a rollout of `rollout_frames`.
    MidRollout {
        after_frames: u64,
        rollout_frames: u64,
    },
    /// The loop's pauses are on the other side.
    OtherSide { usual: Side },
    /// The loop steps without pauses.
    Continuous,
    /// Rhythm learning is off.
    Off,
}

/// How a wait is judged, and from which length it is a stall.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Judgment {
    /// The loop is not known yet.
    Learning { limit_ns: u64 },
    /// A pause at the loop's place: its usual update and rollout.
    Update {
        usual_ns: u64,
        rollout_frames: u64,
        limit_ns: u64,
    },
    /// A wait the loop does not explain.
    Unexplained { why: Why, limit_ns: u64 },
}

impl Judgment {
    /// A wait longer than this is a stall (or, before the loop is known, a pause of
    /// unknown rhythm worth telling).
    pub fn limit_ns(&self) -> u64 {
        match *self {
            Self::Learning { limit_ns }
            | Self::Update { limit_ns, .. }
            | Self::Unexplained { limit_ns, .. } => limit_ns,
        }
    }
}

/// The wait going on: `frame_seq` still at `frame`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Waiting {
    pub frame: u64,
    /// When the wait of `side` began (the engine's: when `action_seq` moved on).
    pub since_ns: u64,
    pub side: Side,
    pub wait_ns: u64,
    pub judgment: Judgment,
}

/// A frame taken, as the rhythm reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FrameTimes {
    pub frame_seq: u64,
    /// When it was seen (the follower's clock; a recording's log time).
    pub seen_ns: u64,
    /// The engine's stamp of the frame (`frame_time_ns`), if the layout has it.
    pub frame_time_ns: Option<u64>,
    /// The trainer's stamp of the actions that made it (`action_time_ns`), when known
    /// and not after the frame's.
    pub action_time_ns: Option<u64>,
}

/// The newest frame.
#[derive(Clone, Copy, Debug)]
struct Last {
    frame: u64,
    seen_ns: u64,
    frame_time_ns: Option<u64>,
}

/// The time since the newest frame, as the looks at the counters saw it.
#[derive(Clone, Copy, Debug, Default)]
struct Gap {
    /// The last look (or the frame).
    look_ns: u64,
    trainer_ns: u64,
    engine_ns: u64,
    unknown_ns: u64,
    /// The side the last look saw (None: no look yet).
    side: Option<Side>,
    /// When the engine's side began.
    engine_since_ns: Option<u64>,
    /// It began before the first frame followed: its start is not known.
    partial: bool,
}

/// A pause of the loop, as its figures need it.
#[derive(Clone, Copy, Debug)]
struct LoopPause {
    frame: u64,
    after_frames: Option<u64>,
    length_ns: Option<u64>,
    side: Side,
}

/// A time between two frames, ended.
#[derive(Clone, Copy, Debug)]
struct Closed {
    /// The frame it began at.
    last: Last,
    /// The frame that ended it, and when it was seen.
    frame_seq: u64,
    seen_ns: u64,
    /// Frames between (1: the next frame).
    d: u64,
    total: u64,
    /// The trainer's, the engine's and an unknown side's parts of it.
    parts: (u64, u64, u64),
    /// It began before the first look: its start is not known.
    partial: bool,
}

/// The loop's figures: medians of its pauses.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Learned {
    rollout_frames: u64,
    update_ns: u64,
    side: Side,
}

/// The loop's steps and pauses, learned as they come.
#[derive(Clone, Debug)]
pub struct Rhythm {
    settings: RhythmSettings,
    last: Option<Last>,
    first_seen_ns: Option<u64>,
    gap: Gap,
    /// Recent step intervals, ns per frame.
    intervals: VecDeque<u64>,
    /// The step is known: the first gaps were classified.
    step_known: bool,
    /// The first gaps, until the step is known.
    early: Vec<Closed>,
    /// The loop's pauses (while learning: the pauses it is learned from), newest last.
    loop_pauses: VecDeque<LoopPause>,
    /// The newest two pauses that were not short, whatever their verdict: alike and
    /// evenly spaced with a third, they make a new loop.
    latest: VecDeque<LoopPause>,
    /// The loop steps without pauses.
    continuous: bool,
    /// The frame and time of the newest pause's end (or of the first frame).
    since_pause: (u64, u64),
    recent: VecDeque<Pause>,
    pauses: u64,
    stalls: u64,
    stepping_ns: u64,
    trainer_ns: u64,
    engine_ns: u64,
    unknown_ns: u64,
}

impl Rhythm {
    pub fn new(settings: RhythmSettings) -> Self {
        Self {
            settings,
            last: None,
            first_seen_ns: None,
            gap: Gap::default(),
            intervals: VecDeque::new(),
            step_known: false,
            early: Vec::new(),
            loop_pauses: VecDeque::new(),
            latest: VecDeque::new(),
            continuous: false,
            since_pause: (0, 0),
            recent: VecDeque::new(),
            pauses: 0,
            stalls: 0,
            stepping_ns: 0,
            trainer_ns: 0,
            engine_ns: 0,
            unknown_ns: 0,
        }
    }

    /// New settings from now on (what was learned stays).
    pub fn set_settings(&mut self, settings: RhythmSettings) {
        self.settings = settings;
    }

    /// A new run (`frame_seq` went back, a new segment): everything starts over.
    pub fn restart(&mut self) {
        *self = Self::new(self.settings);
    }

    /// The median step interval, once enough steps were seen.
    pub fn step_ns(&self) -> Option<u64> {
        if !self.step_known || self.intervals.is_empty() {
            return None;
        }
        let mut v: Vec<u64> = self.intervals.iter().copied().collect();
        let mid = v.len() / 2;
        Some(*v.select_nth_unstable(mid).1)
    }

    /// A time between two frames longer than this (beyond the steps between them) is a
    /// pause.
    fn pause_threshold_ns(&self) -> Option<u64> {
        self.step_ns()
            .map(|m| m.saturating_mul(PAUSE_INTERVALS).max(PAUSE_MIN_NS))
    }

    /// What the loop is now.
    pub fn kind(&self) -> LoopKind {
        if !self.settings.learn {
            LoopKind::Off
        } else if self.learned().is_some() {
            LoopKind::Periodic
        } else if self.continuous {
            LoopKind::Continuous
        } else {
            LoopKind::Learning
        }
    }

    /// The loop's rollout, update and side, once two pauses (one rollout between them)
    /// are known.
    fn learned(&self) -> Option<Learned> {
        if self.loop_pauses.len() < 2 {
            return None;
        }
        let mut rollouts: Vec<u64> = self
            .loop_pauses
            .iter()
            .filter_map(|p| p.after_frames)
            .collect();
        let mut lengths: Vec<u64> = self
            .loop_pauses
            .iter()
            .filter_map(|p| p.length_ns)
            .collect();
        if rollouts.is_empty() || lengths.is_empty() {
            return None;
        }
        rollouts.sort_unstable();
        lengths.sort_unstable();
        let (t, e) = self
            .loop_pauses
            .iter()
            .fold((0usize, 0usize), |(t, e), p| match p.side {
                Side::Trainer => (t + 1, e),
                Side::Engine => (t, e + 1),
                Side::Unknown => (t, e),
            });
        let side = if t > e {
            Side::Trainer
        } else if e > t {
            Side::Engine
        } else {
            Side::Unknown
        };
        Some(Learned {
            rollout_frames: crate::stats::quantile(&rollouts, 0.5)?,
            update_ns: crate::stats::quantile(&lengths, 0.5)?,
            side,
        })
    }

    /// A stall past this when the loop does not explain a wait: the set multiple of the
    /// step, and the set minimum.
    fn unexplained_limit(&self, step_ns: u64) -> u64 {
        ((step_ns as f64 * self.settings.stall_factor) as u64).max(self.settings.stall_min_ns)
    }

    /// The loop that the newest two pauses would make with a wait at `frame` on `side`,
    /// if the three are alike and evenly spaced (a loop that changed its rollout).
    fn new_loop(&self, frame: u64, side: Side) -> Option<Learned> {
        if self.latest.len() < 2 {
            return None;
        }
        let [a, b] = [self.latest.front()?, self.latest.back()?];
        let spacing = b.frame.checked_sub(a.frame).filter(|&s| s > 0)?;
        let tol = (spacing / 8).max(1);
        let after = frame.checked_sub(b.frame)?;
        let (la, lb) = (a.length_ns?, b.length_ns?);
        let alike = la.max(lb) as f64 <= ALIKE * la.min(lb).max(1) as f64;
        (after.abs_diff(spacing) <= tol && alike && a.side.may_be(b.side) && side.may_be(b.side))
            .then_some(Learned {
                rollout_frames: spacing,
                update_ns: la.max(lb),
                side: b.side,
            })
    }

    /// How a wait at `frame` on `side` is judged; None before the step is known.
    /// The second value: the judgment comes from a new loop (see [`Rhythm::new_loop`]).
    fn judge_at(&self, frame: u64, side: Side) -> Option<(Judgment, bool)> {
        let m = self.step_ns()?;
        let unexplained = self.unexplained_limit(m);
        if !self.settings.learn {
            return Some((
                Judgment::Unexplained {
                    why: Why::Off,
                    limit_ns: unexplained,
                },
                false,
            ));
        }
        let update = |l: Learned| Judgment::Update {
            usual_ns: l.update_ns,
            rollout_frames: l.rollout_frames,
            limit_ns: ((l.update_ns as f64 * self.settings.update_factor) as u64)
                .max(self.settings.stall_min_ns),
        };
        let why = match self.learned() {
            None if !self.continuous => {
                return Some((
                    Judgment::Learning {
                        limit_ns: unexplained,
                    },
                    false,
                ));
            }
            None => Why::Continuous,
            Some(l) => {
                let after = self
                    .loop_pauses
                    .back()
                    .map_or(u64::MAX, |p| frame.saturating_sub(p.frame));
                let tol = (l.rollout_frames / 8).max(1);
                if !side.may_be(l.side) {
                    Why::OtherSide { usual: l.side }
                } else if after.saturating_add(tol) < l.rollout_frames {
                    Why::MidRollout {
                        after_frames: after,
                        rollout_frames: l.rollout_frames,
                    }
                } else {
                    return Some((update(l), false));
                }
            }
        };
        Some(match self.new_loop(frame, side) {
            Some(l) => (update(l), true),
            None => (
                Judgment::Unexplained {
                    why,
                    limit_ns: unexplained,
                },
                false,
            ),
        })
    }

    /// How a wait at `frame` on `side` is judged now; None before the step is known.
    pub fn judge(&self, frame: u64, side: Side) -> Option<Judgment> {
        self.judge_at(frame, side).map(|(j, _)| j)
    }

    /// The wait going on at `now_ns`, judged; None before the first frame or while the
    /// step is not known.
    pub fn waiting(&self, now_ns: u64) -> Option<Waiting> {
        let last = self.last?;
        let side = self.gap.side.unwrap_or(Side::Unknown);
        let since_ns = match (side, self.gap.engine_since_ns) {
            (Side::Engine, Some(t)) => t,
            _ => last.seen_ns,
        };
        let judgment = self.judge(last.frame, side)?;
        Some(Waiting {
            frame: last.frame,
            since_ns,
            side,
            wait_ns: now_ns.saturating_sub(since_ns),
            judgment,
        })
    }

    /// A frame taken.
    pub fn frame(&mut self, t: FrameTimes) {
        let Some(last) = self.last else {
            self.start(t.frame_seq, t.seen_ns, t.frame_time_ns, false);
            return;
        };
        if t.frame_seq == last.frame {
            return;
        }
        if t.frame_seq < last.frame {
            self.restart();
            self.start(t.frame_seq, t.seen_ns, t.frame_time_ns, false);
            return;
        }
        self.close_gap(t);
    }

    /// A look at the counters at `now_ns`: `frame_seq`, and `action_seq` when known.
    pub fn look(&mut self, now_ns: u64, frame_seq: u64, action_seq: Option<u64>) {
        self.look_stamped(now_ns, frame_seq, action_seq, None);
    }

    /// [`Rhythm::look`], with the engine's stamp of the frame `frame_seq` names
    /// (`frame_time_ns`), which tells when a first look's frame came.
    pub fn look_stamped(
        &mut self,
        now_ns: u64,
        frame_seq: u64,
        action_seq: Option<u64>,
        frame_time_ns: Option<u64>,
    ) {
        let Some(last) = self.last else {
            // The frame came before the look: when, only its stamp tells.
            self.start(frame_seq, now_ns, frame_time_ns, frame_time_ns.is_none());
            return;
        };
        if frame_seq < last.frame {
            self.restart();
            self.start(frame_seq, now_ns, frame_time_ns, frame_time_ns.is_none());
            return;
        }
        if frame_seq > last.frame {
            // A frame the follower did not copy (torn, or passed between two looks): the
            // side this look sees is the new frame's.
            self.close_gap(FrameTimes {
                frame_seq,
                seen_ns: now_ns,
                ..FrameTimes::default()
            });
        }
        let side = match action_seq {
            Some(a) if a == frame_seq => Side::Trainer,
            Some(a) if a > frame_seq => Side::Engine,
            _ => Side::Unknown,
        };
        let g = &mut self.gap;
        let dt = now_ns.saturating_sub(g.look_ns);
        match g.side {
            Some(prev) if prev != side => {
                // It changed between the looks: half to each.
                add_to(g, prev, dt / 2);
                add_to(g, side, dt - dt / 2);
            }
            _ => add_to(g, side, dt),
        }
        if side == Side::Engine && g.engine_since_ns.is_none() {
            g.engine_since_ns = Some(match g.side {
                Some(Side::Engine) => g.look_ns,
                _ => g.look_ns + dt / 2,
            });
        }
        g.side = Some(side);
        g.look_ns = g.look_ns.max(now_ns);
    }

    fn start(&mut self, frame: u64, seen_ns: u64, frame_time_ns: Option<u64>, partial: bool) {
        self.last = Some(Last {
            frame,
            seen_ns,
            frame_time_ns,
        });
        self.first_seen_ns = Some(seen_ns);
        self.gap = Gap {
            look_ns: seen_ns,
            partial,
            ..Gap::default()
        };
        self.since_pause = (frame, seen_ns);
    }

    /// Frame `t` ends the time since the newest frame: a step, or a pause.
    fn close_gap(&mut self, t: FrameTimes) {
        let Some(last) = self.last else {
            return;
        };
        let d = t.frame_seq - last.frame;
        let g = self.gap;
        let mut total = t.seen_ns.saturating_sub(last.seen_ns);
        let first_gap = Some(last.seen_ns) == self.first_seen_ns;
        // A gap that began before the first look is as long as the engine's stamps say.
        let mut partial = g.partial || (first_gap && last.frame_time_ns.is_none());
        if first_gap
            && let (Some(a), Some(b)) = (last.frame_time_ns, t.frame_time_ns)
            && b >= a
        {
            total = total.max(b - a);
            partial = false;
        }
        let rest = t.seen_ns.saturating_sub(g.look_ns);
        let (mut trainer, mut engine, mut unknown) = (g.trainer_ns, g.engine_ns, g.unknown_ns);
        match g.side {
            Some(Side::Trainer) => {
                trainer += rest / 2;
                engine += rest - rest / 2;
            }
            Some(Side::Engine) => engine += rest,
            Some(Side::Unknown) | None => unknown += rest,
        }
        if d == 1
            && let (Some(ft), Some(at)) = (t.frame_time_ns, t.action_time_ns)
            && ft >= at
        {
            // The stamps split the step exactly: the engine's part since the actions.
            engine = (ft - at).min(total);
            trainer = total - engine;
            unknown = 0;
        }
        let closed = Closed {
            last,
            frame_seq: t.frame_seq,
            seen_ns: t.seen_ns,
            d,
            total,
            parts: (trainer, engine, unknown),
            partial,
        };
        self.last = Some(Last {
            frame: t.frame_seq,
            seen_ns: t.seen_ns,
            frame_time_ns: t.frame_time_ns,
        });
        self.gap = Gap {
            look_ns: t.seen_ns,
            ..Gap::default()
        };
        if self.step_known {
            self.classify(closed);
            return;
        }
        // The first gaps wait until the step is known (the median of their times per
        // frame): then each is a step or a pause, in order.
        self.early.push(closed);
        if self.early.len() >= INTERVALS_TO_JUDGE {
            let mut per_frame: Vec<u64> = self.early.iter().map(|c| c.total / c.d).collect();
            per_frame.sort_unstable();
            self.intervals
                .extend(crate::stats::quantile(&per_frame, 0.5));
            self.step_known = true;
            for c in std::mem::take(&mut self.early) {
                self.classify(c);
            }
        }
    }

    /// A time between two frames, once the step is known: a step (its time per frame
    /// joins the intervals) or a pause.
    fn classify(&mut self, c: Closed) {
        let m = self.step_ns();
        let threshold = self.pause_threshold_ns();
        let (trainer, engine, unknown) = c.parts;
        let total = c.total;
        let steps_ns = m.map_or(0, |m| m.saturating_mul(c.d - 1));
        let excess = total.saturating_sub(steps_ns);
        if threshold.is_some_and(|th| excess > th) {
            // Only the time beyond the steps between the frames is the pause's.
            let scale = |v: u64| {
                if total == 0 {
                    0
                } else {
                    (u128::from(v) * u128::from(excess) / u128::from(total)) as u64
                }
            };
            let (tr, en, un) = (scale(trainer), scale(engine), scale(unknown));
            self.stepping_ns += total - excess;
            self.trainer_ns += tr;
            self.engine_ns += en;
            self.unknown_ns += un;
            self.pause_ended(c.last, excess, (tr, en, un), c.partial, c.d == 1);
            self.since_pause = (c.frame_seq, c.seen_ns);
        } else {
            if c.d < 1 << 20 {
                self.intervals.push_back(total / c.d);
                if self.intervals.len() > INTERVALS {
                    self.intervals.pop_front();
                }
            }
            self.stepping_ns += total;
            let (f0, t0) = self.since_pause;
            if self.settings.learn
                && c.frame_seq.saturating_sub(f0) >= CONTINUOUS_FRAMES
                && c.seen_ns.saturating_sub(t0) >= CONTINUOUS_NS
                && self.learned().is_none()
            {
                self.continuous = true;
            }
        }
    }

    /// A pause of `length_ns` at `last`'s frame ended, with its parts (trainer, engine,
    /// unknown): judged, learned from, kept; `placed`: it ended at the frame after
    /// `last`'s (else frames between were not taken, and it is not judged).
    fn pause_ended(
        &mut self,
        last: Last,
        length_ns: u64,
        parts: (u64, u64, u64),
        partial: bool,
        placed: bool,
    ) {
        let (tr, en, un) = parts;
        let side = if un > tr + en {
            Side::Unknown
        } else if tr >= en {
            Side::Trainer
        } else {
            Side::Engine
        };
        let frame = last.frame;
        // Each side's wait is judged on its own, as it is while it goes on.
        let mut stall = false;
        for (s, ns) in [(Side::Trainer, tr), (Side::Engine, en), (Side::Unknown, un)] {
            if ns > 0
                && let Some((j, _)) = self.judge_at(frame, s)
                && !matches!(j, Judgment::Learning { .. })
                && ns > j.limit_ns()
            {
                stall = true;
            }
        }
        let judged = self.judge_at(frame, side);
        // The wait before the run's first step (frame 0: the trainer starting) is no
        // update of its loop: counted, not learned from.
        let startup = frame == 0;
        let verdict = match judged {
            _ if !placed => PauseVerdict::Unplaced,
            _ if startup => PauseVerdict::Learning,
            _ if stall => PauseVerdict::Stall,
            None | Some((Judgment::Learning { .. }, _)) => PauseVerdict::Learning,
            Some((Judgment::Update { usual_ns, .. }, _)) => {
                if (length_ns as f64) * SHORT_DIVISOR < usual_ns as f64 {
                    PauseVerdict::Short
                } else {
                    PauseVerdict::Loop
                }
            }
            Some((Judgment::Unexplained { .. }, _)) => PauseVerdict::Short,
        };
        let length = (!partial).then_some(length_ns);
        let after_frames = self
            .loop_pauses
            .back()
            .map(|p| frame.saturating_sub(p.frame));
        let this = LoopPause {
            frame,
            after_frames,
            length_ns: length,
            side,
        };
        match verdict {
            PauseVerdict::Learning if startup => {}
            PauseVerdict::Learning => self.learn_from(this),
            PauseVerdict::Loop => {
                if judged.is_some_and(|(_, new)| new) {
                    // Alike pauses at a new place: the loop changed.
                    let old: Vec<LoopPause> = self.latest.iter().copied().collect();
                    self.loop_pauses.clear();
                    let mut prev: Option<u64> = None;
                    for p in old.into_iter().chain([this]) {
                        self.loop_pauses.push_back(LoopPause {
                            after_frames: prev.map(|f| p.frame.saturating_sub(f)),
                            ..p
                        });
                        prev = Some(p.frame);
                    }
                } else {
                    self.loop_pauses.push_back(this);
                }
                while self.loop_pauses.len() > LOOP_PAUSES {
                    self.loop_pauses.pop_front();
                }
            }
            // Not the loop's: its place stays the last pause of the loop's.
            PauseVerdict::Stall | PauseVerdict::Short | PauseVerdict::Unplaced => {}
        }
        if matches!(
            verdict,
            PauseVerdict::Loop | PauseVerdict::Learning | PauseVerdict::Stall
        ) && length.is_some()
            && !startup
        {
            self.latest.push_back(this);
            while self.latest.len() > 2 {
                self.latest.pop_front();
            }
        }
        self.pauses += 1;
        self.stalls += u64::from(verdict == PauseVerdict::Stall);
        let secs = |ns: u64| ns as f64 / 1e9;
        self.recent.push_back(Pause {
            frame,
            start_ns: last.seen_ns,
            secs: length.map(secs),
            trainer_secs: secs(tr),
            engine_secs: secs(en),
            unknown_secs: secs(un),
            side,
            after_frames,
            verdict,
        });
        while self.recent.len() > RECENT_PAUSES {
            self.recent.pop_front();
        }
    }

    /// A pause while the loop is being learned: a pause much longer than those so far
    /// starts the learning again from it (those were hiccups); one much shorter is a
    /// hiccup, left out.
    fn learn_from(&mut self, p: LoopPause) {
        let longest = self.loop_pauses.iter().filter_map(|q| q.length_ns).max();
        match (p.length_ns, longest) {
            (Some(l), Some(q)) if l as f64 > ALIKE * q as f64 => {
                self.loop_pauses.clear();
                self.loop_pauses.push_back(LoopPause {
                    after_frames: None,
                    ..p
                });
            }
            (Some(l), Some(q)) if (l as f64) * ALIKE < q as f64 => {}
            _ => self.loop_pauses.push_back(p),
        }
        while self.loop_pauses.len() > LOOP_PAUSES {
            self.loop_pauses.pop_front();
        }
        self.continuous = false;
    }

    /// The rhythm as the views show it, as of `now_ns` (the wait going on counted too).
    pub fn summary(&self, now_ns: u64) -> RhythmSummary {
        let secs = |ns: u64| ns as f64 / 1e9;
        let (mut stepping, mut trainer, mut engine, mut unknown) = (
            self.stepping_ns,
            self.trainer_ns,
            self.engine_ns,
            self.unknown_ns,
        );
        // The first gaps, not classified yet, as steps.
        stepping += self.early.iter().map(|c| c.total).sum::<u64>();
        if let Some(last) = self.last {
            let since = now_ns.saturating_sub(last.seen_ns);
            if self
                .pause_threshold_ns()
                .is_some_and(|th| since > th && !self.gap.partial)
            {
                let g = &self.gap;
                let rest = now_ns.saturating_sub(g.look_ns);
                trainer += g.trainer_ns;
                engine += g.engine_ns;
                unknown += g.unknown_ns;
                match g.side {
                    Some(Side::Trainer) => trainer += rest,
                    Some(Side::Engine) => engine += rest,
                    _ => unknown += rest,
                }
            } else if !self.gap.partial {
                stepping += since;
            }
        }
        let learned = self.learned().filter(|_| self.settings.learn);
        RhythmSummary {
            at_ns: now_ns,
            kind: self.kind(),
            step_secs: self.step_ns().map(secs),
            rollout_frames: learned.map(|l| l.rollout_frames),
            update_secs: learned.map(|l| secs(l.update_ns)),
            update_side: learned.map(|l| l.side),
            followed_secs: secs(stepping + trainer + engine + unknown),
            stepping_secs: secs(stepping),
            trainer_secs: secs(trainer),
            engine_secs: secs(engine),
            unknown_secs: secs(unknown),
            pauses: self.pauses,
            stalls: self.stalls,
            recent: self.recent.iter().cloned().collect(),
            ..RhythmSummary::default()
        }
    }

    /// The newest `frame_seq` seen.
    pub fn last_frame(&self) -> Option<u64> {
        self.last.map(|l| l.frame)
    }

    /// The newest pause's number (moves when one ends).
    pub fn pauses(&self) -> u64 {
        self.pauses
    }
}

fn add_to(g: &mut Gap, side: Side, ns: u64) {
    match side {
        Side::Trainer => g.trainer_ns += ns,
        Side::Engine => g.engine_ns += ns,
        Side::Unknown => g.unknown_ns += ns,
    }
}
