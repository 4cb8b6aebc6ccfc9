//! The detector of a live segment: a sink of the frame follower ([`Diagnosis`]) that
//! runs the detector on the follower's thread over the checks of every frame it copies,
//! and on its ticks over the passing of time and what the segment's readers tell it (the
//! state, the rings' faults: [`DetectorFeed`]). Events go to a shared [`EventLog`] in batches
//! under a short lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, TrySendError};

use super::detector::Detector;
use super::event::Event;
use super::log::EventLog;
use super::ring_fault::RingFault;
use super::settings::{DetectSettings, SettingsError};
use crate::check::{Checker, Limits};
use crate::follower::{FollowError, FrameCopy, FrameSink, Tick, Wants};
use crate::live_sink::{Handoff, SinkControl};
use crate::rhythm::{Flags, FrameTimes};
use crate::watch::State;
use lrbc::attach::Attached;
use lrbc::sync::lock;

/// A detector that could not be started, as one line.
#[derive(Debug, thiserror::Error)]
pub enum DiagnosisError {
    /// Its settings cannot be used on this segment.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    Follow(#[from] FollowError),
}

/// Facts waiting for the detector, at most.
const FACTS_QUEUED: usize = 4096;
/// The loop's rhythm goes to the log at most this often (and when a pause ends).
const RHYTHM_EVERY_NS: u64 = 250_000_000;

/// Something a reader of the segment tells the detector.
#[derive(Debug)]
enum Fact {
    State {
        state: State,
        note: Option<String>,
        now_ns: u64,
    },
    Ring {
        fault: RingFault,
        now_ns: u64,
    },
}

/// Where the segment's readers send what the detector cannot see in frames: the state
/// (from a watcher), the rings' faults (from a traffic reader). Sends never block; a
/// full queue drops the fact and counts it.
#[derive(Clone, Debug)]
pub struct DetectorFeed {
    tx: Sender<Fact>,
    dropped: Arc<AtomicU64>,
}

impl DetectorFeed {
    fn send(&self, fact: Fact) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(fact) {
            // Relaxed: a count with no data behind it.
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The segment's state as of `now_ns`.
    pub fn state(&self, state: State, note: Option<&str>, now_ns: u64) {
        self.send(Fact::State {
            state,
            note: note.map(str::to_string),
            now_ns,
        });
    }

    /// A traffic event read at `now_ns` (only faults are sent on).
    pub fn traffic(&self, e: &crate::traffic::TrafficEvent, now_ns: u64) {
        if let Some(fault) = RingFault::from_traffic(e) {
            self.send(Fact::Ring { fault, now_ns });
        }
    }
}

/// The detector running on a segment's follower.
pub struct Diagnosis {
    /// The sizes and names of the segment attached to, to check settings against.
    shape: (u32, u32, u32, lrbc::layout::Names),
    log: Arc<Mutex<EventLog>>,
    settings: Arc<Mutex<DetectSettings>>,
    feed: DetectorFeed,
    control: SinkControl,
}

impl std::fmt::Debug for Diagnosis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Diagnosis").finish_non_exhaustive()
    }
}

impl Diagnosis {
    /// Starts the detector on the follower of `attached`'s segment. The follower keeps to
    /// `busy_budget_percent` (the owner's budget on a busy machine) for its samples; the
    /// rewards and flags of every frame are checked whatever the load. Err: the settings
    /// cannot be used on this segment (one line).
    pub fn start(
        attached: &Attached,
        settings: DetectSettings,
        busy_budget_percent: Option<f32>,
        kept: usize,
    ) -> Result<Self, DiagnosisError> {
        Self::start_with_load(
            attached,
            settings,
            busy_budget_percent,
            kept,
            crate::busy::read_cpu_times,
        )
    }

    /// [`Diagnosis::start`] with the machine's load read by `read_load` (tests).
    pub fn start_with_load(
        attached: &Attached,
        settings: DetectSettings,
        busy_budget_percent: Option<f32>,
        kept: usize,
        read_load: fn() -> Option<crate::busy::CpuTimes>,
    ) -> Result<Self, DiagnosisError> {
        settings.check()?;
        let g = &attached.geometry;
        Checker::new(
            &settings.limits,
            g.num_envs,
            g.obs_size,
            g.act_size,
            &g.names,
        )
        .map_err(SettingsError::from)?;
        let log = Arc::new(Mutex::new(EventLog::new(kept)));
        let (tx, rx) = crossbeam_channel::bounded(FACTS_QUEUED);
        let feed = DetectorFeed {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        };
        let shared = Arc::new(Mutex::new(settings.clone()));
        let budget = Arc::new(Mutex::new(busy_budget_percent));
        let sink = DetectorSink {
            detector: None,
            generation: None,
            handoff: Handoff::new(Arc::clone(&log)),
            facts: rx,
            settings: Arc::clone(&shared),
            current: settings.clone(),
            limits: Arc::new(settings.limits),
            busy_budget_percent: Arc::clone(&budget),
            note: None,
            facts_dropped: Arc::clone(&feed.dropped),
            last_tick: None,
            rhythm_sent: None,
        };
        let control = SinkControl::subscribe(attached, Box::new(sink), read_load, budget)?;
        Ok(Self {
            shape: (g.num_envs, g.obs_size, g.act_size, g.names.clone()),
            log,
            settings: shared,
            feed,
            control,
        })
    }

    /// The events found so far (lock briefly).
    pub fn log(&self) -> &Arc<Mutex<EventLog>> {
        &self.log
    }

    /// Where the state and the rings' faults go.
    pub fn feed(&self) -> DetectorFeed {
        self.feed.clone()
    }

    /// New settings, taken up at the follower's next tick. Err: they cannot be used on
    /// this segment (the old ones stay).
    pub fn set_settings(&self, settings: DetectSettings) -> Result<(), SettingsError> {
        settings.check()?;
        let (envs, obs, act, names) = &self.shape;
        Checker::new(&settings.limits, *envs, *obs, *act, names)?;
        *lock(&self.settings) = settings;
        Ok(())
    }

    pub fn settings(&self) -> DetectSettings {
        lock(&self.settings).clone()
    }

    /// The owner's budget on a busy machine changed (the follower keeps to the largest
    /// of its sinks').
    pub fn set_busy_budget(&self, percent_of_a_core: Option<f32>) {
        self.control.set_busy_budget(percent_of_a_core);
    }

    /// Whether the follower's thread ended (only a panic ends it early).
    pub fn thread_ended(&self) -> bool {
        self.control.thread_ended()
    }

    /// Leaves the follower: nothing is found after this.
    pub fn stop(&mut self) {
        self.control.stop();
    }
}

/// The detector as a sink of the follower.
struct DetectorSink {
    /// Made at the first tick (and again for a new segment), from the follower's
    /// mapping.
    detector: Option<Detector>,
    generation: Option<u64>,
    /// Events found, on their way to the log.
    handoff: Handoff<Event, EventLog>,
    facts: Receiver<Fact>,
    settings: Arc<Mutex<DetectSettings>>,
    current: DetectSettings,
    limits: Arc<Limits>,
    busy_budget_percent: Arc<Mutex<Option<f32>>>,
    note: Option<String>,
    facts_dropped: Arc<AtomicU64>,
    /// The last tick's time by the follower's clock, and by the monotonic clock.
    last_tick: Option<(u64, u64)>,
    /// When the rhythm last went to the log, and the pauses it had seen then.
    rhythm_sent: Option<(u64, u64)>,
}

impl DetectorSink {
    /// The time now by the follower's clock: the last tick's, moved on by the monotonic
    /// time since (a sink that leaves gets no tick).
    fn now_ns(&self) -> u64 {
        let now = lrbc::clock::monotonic_now_ns();
        self.last_tick
            .map_or(now, |(t, m)| t.saturating_add(now.saturating_sub(m)))
    }

    /// Moves the pending events and the totals into the log if its lock is free (readers
    /// never make the follower wait), or when they have piled up, or when `wait`.
    fn flush(&mut self, wait: bool) {
        let Some(d) = &self.detector else {
            return;
        };
        let totals = d.totals();
        // The rhythm as of the last tick (by the follower's clock alone), or of now when
        // the sink leaves.
        let now = match self.last_tick {
            Some((t, _)) if !wait => t,
            _ => self.now_ns(),
        };
        let rhythm = match self.rhythm_sent {
            Some((at, pauses))
                if !wait && pauses == d.pauses() && now.saturating_sub(at) < RHYTHM_EVERY_NS =>
            {
                None
            }
            _ => Some(d.rhythm(now)),
        };
        let pauses = d.pauses();
        let Some((mut guard, pending)) = self.handoff.take(wait) else {
            return;
        };
        for e in pending {
            guard.apply(e);
        }
        guard.set_figures(&totals);
        if let Some(r) = rhythm {
            guard.set_rhythm(r);
            self.rhythm_sent = Some((now, pauses));
        }
        // Relaxed: a count with no data behind it.
        let dropped = self.facts_dropped.load(Ordering::Relaxed);
        let note = match (&self.note, dropped) {
            (Some(n), 0) => Some(n.clone()),
            (Some(n), d) => Some(format!("{n}; {d} state and ring facts dropped")),
            (None, 0) => None,
            (None, d) => Some(format!(
                "{d} state and ring facts came faster than the detector took them and were dropped"
            )),
        };
        if guard.note != note {
            guard.note = note;
            guard.version += 1;
        }
    }
}

impl Drop for DetectorSink {
    /// The sink leaves the follower (the run is over for its owner): ring faults end,
    /// what goes on is written in its newest form, and all of it reaches the log.
    fn drop(&mut self) {
        let now = self.now_ns();
        if let Some(d) = &mut self.detector {
            d.finish(now, self.handoff.pending());
        }
        self.flush(true);
    }
}

impl FrameSink for DetectorSink {
    fn frame(&mut self, c: &Arc<FrameCopy>) {
        if Some(c.generation) != self.generation {
            return;
        }
        if let (Some(d), Some(check)) = (&mut self.detector, &c.check) {
            let times = FrameTimes {
                frame_seq: c.frame_seq,
                seen_ns: c.sampled_ns,
                frame_time_ns: c.frame_time_ns,
                action_time_ns: c.action_time_ns(),
            };
            let flags = Flags {
                dones: &c.hot.dones,
                truncateds: c.hot.truncateds.as_deref(),
                resets: &c.hot.resets,
            };
            d.frame(times, check, flags, self.handoff.pending());
        }
    }

    fn tick(&mut self, tick: &Tick<'_>) -> Wants {
        // Stalls and bursts are timed by the clock of the frames' stamps.
        let now = tick.now_ns;
        self.last_tick = Some((now, lrbc::clock::monotonic_now_ns()));
        if let Ok(s) = self.settings.try_lock()
            && *s != self.current
        {
            self.current = s.clone();
            self.limits = Arc::new(s.limits.clone());
            // The thresholds change; what is open goes on.
            if let Some(d) = &mut self.detector {
                d.set_settings(self.current.clone());
            }
        }
        let g = &tick.attached.geometry;
        if Some(tick.generation) != self.generation {
            match &mut self.detector {
                Some(d) => d.restart(g.num_envs, g.names.clone(), now, self.handoff.pending()),
                None => {
                    self.detector = Some(Detector::new(
                        self.current.clone(),
                        g.num_envs,
                        g.names.clone(),
                    ));
                }
            }
            self.generation = Some(tick.generation);
        }
        self.note = tick.check_note.map(str::to_string);
        if let Some(d) = &mut self.detector {
            d.add_frames_seen(tick.counts.seen);
            for fact in self.facts.try_iter().take(FACTS_QUEUED) {
                match fact {
                    Fact::State {
                        state,
                        note,
                        now_ns,
                    } => d.state(state, note.as_deref(), now_ns, self.handoff.pending()),
                    Fact::Ring { fault, now_ns } => d.ring(fault, now_ns, self.handoff.pending()),
                }
            }
            let seg = &tick.attached.segment;
            let c = g.counters;
            // Acquire loads (`load_u64`): pair with the engine's Release store of
            // frame_seq and the client's Release increment of action_seq. The frame's
            // stamp is read after frame_seq: it is that frame's or a newer one's, and
            // serves only a first look (when the frame it names came).
            let f = seg.load_u64(c.frame_seq).unwrap_or(0);
            let a = seg.load_u64(c.action_seq).unwrap_or(0);
            let stamp = c
                .ext
                .and_then(|e| seg.load_u64(e.frame_time_ns))
                .filter(|&t| t != 0);
            d.tick_stamped(now, f, Some(a), stamp, self.handoff.pending());
        }
        self.flush(false);
        Wants {
            envs: Vec::new(),
            busy_budget_percent: *lock(&self.busy_budget_percent),
            min_hold_ns: u64::MAX,
            check: Some(Arc::clone(&self.limits)),
            every_frame: false,
        }
    }
}
