//! The frame thread: follows `frame_seq` and copies every frame it can.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::accounting::FrameAccounting;
use super::copy::{copy_frame, load_counters, reopen_if_reattached};
use super::data::{
    EnvDetail, EnvHistory, EnvPoint, FLAG_DONE, FLAG_RESET, FLAG_TRUNCATED, FrameAgg, SamplerData,
    SamplerSettings, history_capacities,
};
use super::history::Ring;
use super::pace::{FramePace, SAMPLER_QUIET_NAP_NS};
use super::reduce::aggregate;
use super::spotter::{Handover, SpotCopy};
use super::{SAMPLER_NICE, lock};
use crate::attach::Attached;
use crate::busy::{Budget, CpuTimes};
use crate::snapshot::{self, HotData};

/// Samples not yet moved into the shared data (the lock was busy).
#[derive(Default)]
struct Pending {
    frames: Vec<FrameAgg>,
    points: Vec<(u32, EnvPoint)>,
    details: Vec<(u32, EnvDetail)>,
}

/// Follows frame_seq and copies every frame it can.
pub(super) struct FrameWorker {
    pub attached: Attached,
    pub scratch: Vec<f32>,
    /// The copy being taken, and the newest consistent one (swapped, never reallocated).
    pub hot: HotData,
    pub last_good: HotData,
    pub last_good_frame: u64,
    pub watched_buf: Vec<f32>,
    pub generation: u64,
    /// Which frames were taken, missed, torn or skipped.
    pub accounting: FrameAccounting,
    pub data: Arc<Mutex<SamplerData>>,
    pub settings: Arc<Mutex<SamplerSettings>>,
    pub stop: Arc<AtomicBool>,
    pending: Pending,
    pub budget: Budget,
    pub read_load: fn() -> Option<CpuTimes>,
    pub handover: Arc<Handover>,
    /// Woken when the yielding ends.
    pub spotter: Option<std::thread::Thread>,
}

impl FrameWorker {
    /// A frame thread for `attached`, counting frames after `frame_at_attach`.
    pub(super) fn new(
        attached: Attached,
        frame_at_attach: u64,
        shared: (
            &Arc<Mutex<SamplerData>>,
            &Arc<Mutex<SamplerSettings>>,
            &Arc<AtomicBool>,
        ),
        budget: Budget,
        read_load: fn() -> Option<CpuTimes>,
        handover: Arc<Handover>,
    ) -> Self {
        let (data, settings, stop) = shared;
        Self {
            attached,
            scratch: Vec::new(),
            hot: HotData::default(),
            last_good: HotData::default(),
            last_good_frame: 0,
            watched_buf: Vec::new(),
            generation: 0,
            accounting: FrameAccounting::new(frame_at_attach),
            data: Arc::clone(data),
            settings: Arc::clone(settings),
            stop: Arc::clone(stop),
            pending: Pending::default(),
            budget,
            read_load,
            handover,
            spotter: None,
        }
    }

    pub(super) fn run(mut self) {
        // Naps of a few tens of microseconds must not turn into a hundred; and the
        // sampler takes only the time the engine and trainer leave over.
        crate::platform::set_timer_slack_ns(1_000);
        crate::platform::lower_thread_priority(SAMPLER_NICE);
        // The spotter keeps to the other half (see `Spotter`), except while yielding to a
        // busy machine: then the spotter rests, and any core may do.
        let cores = crate::platform::CoreSet::of_this_thread();
        let mut kept_to_half = cores.is_some_and(|c| c.keep_to(Some(0)));
        let mut settings = lock(&self.settings).clone();
        let mut housekeeping_ns = 0u64;
        let mut pace = FramePace::new(crate::segment::monotonic_now_ns());
        // Relaxed: a flag with no data behind it.
        while !self.stop.load(Ordering::Relaxed) {
            let now = crate::segment::monotonic_now_ns();
            // On a busy machine, no look before the budget allows one.
            if let Some(hold) = self.budget.hold_ns(now) {
                self.accounting.hold();
                std::thread::sleep(Duration::from_nanos(hold));
                continue;
            }
            let yielding = self.budget.yielding();
            // Relaxed: a flag with no data behind it; the unpark below wakes the spotter
            // to read it.
            let was_yielding = self.handover.yielding.swap(yielding, Ordering::Relaxed);
            if was_yielding
                && !yielding
                && let Some(spotter) = &self.spotter
            {
                spotter.unpark();
            }
            if let Some(c) = &cores
                && kept_to_half == yielding
            {
                c.keep_to((!yielding).then_some(0));
                kept_to_half = !yielding;
            }
            // Frames the spotter copied while this thread was late.
            if let Some(passed) = self.take_handed_over(false) {
                pace.saw(now, passed);
            }
            let new_frame = self.look(now, self.frame_seq(), &settings, &mut pace);
            // The rest is done every few milliseconds, not on every look at frame_seq.
            if now.saturating_sub(housekeeping_ns) >= 5_000_000 {
                housekeeping_ns = now;
                if let Ok(s) = self.settings.try_lock() {
                    settings.clone_from(&s);
                }
                self.budget.set_percent(settings.busy_budget_percent);
                if self.budget.check_due(now) {
                    self.budget.observe(now, (self.read_load)());
                }
                self.follow_generation();
                self.flush(&settings, true);
            } else if new_frame {
                self.flush(&settings, false);
            }
            if !new_frame {
                std::thread::sleep(pace.nap(now, SAMPLER_QUIET_NAP_NS));
            }
        }
    }

    /// One look at `frame_seq`, which reads `f`: copies the newest frame if it is new.
    /// Returns whether it was.
    pub(super) fn look(
        &mut self,
        now: u64,
        f: u64,
        settings: &SamplerSettings,
        pace: &mut FramePace,
    ) -> bool {
        // More than one new frame: the spotter may have handed over the ones between
        // since the last take. Take them first (in order), or they would be counted
        // missed while their copies wait.
        if self.accounting.ahead(f).is_some_and(|d| d > 1)
            && let Some(passed) = self.take_handed_over(true)
        {
            pace.saw(now, passed);
        }
        let last = self.accounting.last_frame();
        if f == last {
            return false;
        }
        if self.accounting.ahead(f).is_none() {
            // A frame_seq that went back means a new run: count nothing.
            self.accounting.restart_at(f);
        } else {
            let (seg, g) = (&self.attached.segment, &self.attached.geometry);
            if self.accounting.is_held() && !snapshot::settled_now(seg, g) {
                // Back from holding off, the engine is already writing the next frame:
                // wait for that one rather than copy a torn one.
                self.accounting.skipped_to(f);
            } else {
                self.sample(settings, now, f);
                self.budget.sampled(
                    crate::segment::monotonic_now_ns(),
                    crate::platform::thread_cpu_ns(),
                );
            }
        }
        // Relaxed: a hint for the spotter, with no data behind it.
        self.handover.taken.store(f, Ordering::Relaxed);
        pace.saw(now, f.wrapping_sub(last));
        true
    }

    /// Maps the new segment when the auxiliary thread re-attached.
    fn follow_generation(&mut self) {
        if reopen_if_reattached(&self.data, &mut self.attached, &mut self.generation) {
            self.pending = Pending::default();
            let f = self.frame_seq();
            // The counts belong to the segment that was replaced.
            self.accounting.discard();
            self.accounting.restart_at(f);
            // Relaxed: a hint for the spotter, with no data behind it.
            self.handover.taken.store(f, Ordering::Relaxed);
        }
    }

    pub(super) fn frame_seq(&self) -> u64 {
        self.attached
            .segment
            .load_u64(self.attached.geometry.counters.frame_seq)
            .unwrap_or(0)
    }

    /// Copies the frame just published (`frame_seq` read `f`).
    fn sample(&mut self, settings: &SamplerSettings, now: u64, f: u64) {
        let taken = copy_frame(
            &self.attached,
            &settings.watched_envs,
            &mut self.hot,
            &mut self.watched_buf,
        );
        self.accounting.copied(f, taken.consistent);
        if taken.consistent {
            self.record(taken.frame_seq, now, taken.latency, &taken.watched);
        }
    }

    /// Takes the copies the spotter made of frames this thread had not seen (it was not
    /// scheduled in time); `wait`: even if the spotter is handing one over right now.
    /// Returns how many frames went by, if any copy was taken.
    pub(super) fn take_handed_over(&mut self, wait: bool) -> Option<u64> {
        let copies: Vec<SpotCopy> = if wait {
            lock(&self.handover.copies).drain(..).collect()
        } else {
            match self.handover.copies.try_lock() {
                Ok(mut q) => q.drain(..).collect(),
                Err(_) => return None,
            }
        };
        let mut passed = None;
        for c in copies {
            if c.generation != self.generation {
                continue;
            }
            let Some(delta) = self.accounting.handed_over(c.frame_seq) else {
                continue;
            };
            self.hot = c.hot;
            self.watched_buf = c.watched_buf;
            self.record(c.frame_seq, c.t_ns, c.latency, &c.watched);
            // Relaxed: a hint for the spotter, with no data behind it.
            self.handover.taken.store(c.frame_seq, Ordering::Relaxed);
            *passed.get_or_insert(0) += delta;
        }
        passed
    }

    /// Keeps a consistent copy now in `self.hot` and `self.watched_buf`.
    fn record(&mut self, frame_seq: u64, now: u64, latency: Option<u64>, watched: &[u32]) {
        let g = &self.attached.geometry;
        let (o, a) = (g.obs_size as usize, g.act_size as usize);
        // The newest consistent copy is kept; the other buffer takes the next copy.
        std::mem::swap(&mut self.hot, &mut self.last_good);
        self.last_good_frame = frame_seq;
        let hot = &self.last_good;
        let agg = aggregate(frame_seq, now, hot, latency, &mut self.scratch);
        self.pending.frames.push(agg);
        for (k, &e) in watched.iter().enumerate() {
            let i = e as usize;
            let flag = |v: &[u8], bit: u8| {
                if v.get(i).is_some_and(|&x| x != 0) {
                    bit
                } else {
                    0
                }
            };
            let flags = flag(&hot.dones, FLAG_DONE)
                | hot
                    .truncateds
                    .as_deref()
                    .map_or(0, |t| flag(t, FLAG_TRUNCATED))
                | flag(&hot.resets, FLAG_RESET);
            self.pending.points.push((
                e,
                EnvPoint {
                    frame_seq,
                    t_ns: now,
                    reward: hot.rewards.get(i).copied().unwrap_or(f32::NAN),
                    flags,
                },
            ));
            let Some(values) = self.watched_buf.get(k * (o + a)..(k + 1) * (o + a)) else {
                continue;
            };
            self.pending.details.push((
                e,
                EnvDetail {
                    frame_seq,
                    t_ns: now,
                    values: values.into(),
                },
            ));
        }
    }

    /// Moves pending samples into the shared data if the lock is free (readers never
    /// make the sampler wait), or when they have piled up.
    pub(super) fn flush(&mut self, settings: &SamplerSettings, counters: bool) {
        let data = Arc::clone(&self.data);
        let Ok(mut d) = data.try_lock() else {
            if self.pending.frames.len() < 100_000 {
                return;
            }
            self.flush_locked(&mut lock(&data), settings, counters);
            return;
        };
        self.flush_locked(&mut d, settings, counters);
    }

    fn flush_locked(&mut self, d: &mut SamplerData, settings: &SamplerSettings, counters: bool) {
        if d.generation != self.generation {
            // The samples belong to the segment that was replaced.
            self.pending = Pending::default();
            self.accounting.discard();
            return;
        }
        let p = std::mem::take(&mut self.pending);
        let counts = self.accounting.take();
        d.stats.frames_seen += counts.seen;
        d.stats.frames_sampled += counts.sampled;
        d.stats.frames_missed += counts.missed;
        d.stats.frames_torn += counts.torn;
        d.stats.frames_skipped += counts.skipped;
        d.yielding = self.budget.yielding();
        let g = &self.attached.geometry;
        let watched = settings
            .watched_envs
            .iter()
            .filter(|&&e| e < g.num_envs)
            .count();
        let values = (g.obs_size as usize).saturating_add(g.act_size as usize);
        let (frames_cap, detail_cap) = history_capacities(settings, watched, values);
        d.frames.set_capacity(frames_cap);
        for f in p.frames {
            d.frames.push(f);
        }
        d.envs.retain(|e, _| settings.watched_envs.contains(e));
        for h in d.envs.values_mut() {
            h.points.set_capacity(frames_cap);
            h.detail.set_capacity(detail_cap);
        }
        for (e, point) in p.points {
            d.envs
                .entry(e)
                .or_insert_with(|| EnvHistory {
                    points: Ring::new(frames_cap),
                    detail: Ring::new(detail_cap),
                })
                .points
                .push(point);
        }
        for (e, detail) in p.details {
            if let Some(h) = d.envs.get_mut(&e) {
                h.detail.push(detail);
            }
        }
        if counters {
            if self.last_good_frame != 0
                && d.latest
                    .as_ref()
                    .is_none_or(|(f, _)| *f != self.last_good_frame)
            {
                d.latest = Some((self.last_good_frame, self.last_good.clone()));
            }
            d.counters = load_counters(
                &self.attached.segment,
                &self.attached.geometry,
                crate::segment::monotonic_now_ns(),
            );
        }
    }
}
