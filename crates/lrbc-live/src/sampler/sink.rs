//! The sampler as a consumer of the frame follower: each frame's aggregate, the watched
//! envs' points and rows, moved into the shared data at each tick.

use std::sync::{Arc, Mutex};

use super::counters::load_counters;
use super::data::{
    EnvDetail, EnvHistory, EnvPoint, FLAG_DONE, FLAG_RESET, FLAG_TRUNCATED, FrameAgg, SamplerData,
    SamplerSettings, history_capacities,
};
use super::history::Ring;
use super::lock;
use super::reduce::aggregate;
use crate::follower::{FrameCopy, FrameCounts, FrameSink, Tick, Wants};

/// Samples not yet moved into the shared data (the lock was busy).
#[derive(Default)]
struct Pending {
    frames: Vec<FrameAgg>,
    points: Vec<(u32, EnvPoint)>,
    details: Vec<(u32, EnvDetail)>,
    counts: FrameCounts,
}

/// The sampler's sink at the follower.
pub(super) struct SamplerSink {
    data: Arc<Mutex<SamplerData>>,
    settings: Arc<Mutex<SamplerSettings>>,
    /// The settings as of the last tick (the follower never waits for their lock).
    current: SamplerSettings,
    repaint_interval_ns: u64,
    /// The follower's generation whose frames are kept (None before the first tick), and
    /// the shared data's generation it goes with: the auxiliary thread moves both on when
    /// the segment is replaced (the data's first, then the follower).
    generation: Option<u64>,
    data_generation: u64,
    scratch: Vec<f32>,
    pending: Pending,
    /// The newest frame, for the envs table.
    latest: Option<Arc<FrameCopy>>,
}

impl SamplerSink {
    pub(super) fn new(
        data: &Arc<Mutex<SamplerData>>,
        settings: &Arc<Mutex<SamplerSettings>>,
        repaint_interval_ns: u64,
    ) -> Self {
        Self {
            data: Arc::clone(data),
            current: lock(settings).clone(),
            settings: Arc::clone(settings),
            repaint_interval_ns,
            generation: None,
            data_generation: 0,
            scratch: Vec::new(),
            pending: Pending::default(),
            latest: None,
        }
    }

    /// Moves pending samples into the shared data if the lock is free (readers never
    /// make the follower wait), or when they have piled up.
    fn flush(&mut self, tick: &Tick<'_>) {
        let data = Arc::clone(&self.data);
        let Ok(mut d) = data.try_lock() else {
            if self.pending.frames.len() < 100_000 {
                return;
            }
            self.flush_locked(&mut lock(&data), tick);
            return;
        };
        self.flush_locked(&mut d, tick);
    }

    fn flush_locked(&mut self, d: &mut SamplerData, tick: &Tick<'_>) {
        if d.generation != self.data_generation {
            // The samples belong to the segment that was replaced, or the follower has
            // not yet followed the new one.
            self.pending = Pending::default();
            self.latest = None;
            return;
        }
        let p = std::mem::take(&mut self.pending);
        let s = &mut d.stats;
        s.frames.add(&p.counts);
        d.yielding = tick.yielding;
        let settings = &self.current;
        let g = &tick.attached.geometry;
        let watched = settings.watched_envs.within(g.num_envs).count();
        let values = (g.obs_size as usize).saturating_add(g.act_size as usize);
        let (frames_cap, detail_cap) = history_capacities(settings, watched, values);
        d.frames.set_capacity(frames_cap);
        for f in p.frames {
            d.frames.push(f);
        }
        d.envs.retain(|&e, _| settings.watched_envs.contains(e));
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
        if let Some(latest) = self.latest.take()
            && d.latest
                .as_ref()
                .is_none_or(|(f, _)| *f != latest.frame_seq)
        {
            match &mut d.latest {
                Some((f, hot)) => {
                    *f = latest.frame_seq;
                    hot.clone_from(&latest.hot);
                }
                None => d.latest = Some((latest.frame_seq, latest.hot.clone())),
            }
        }
        d.counters = load_counters(&tick.attached.segment, g, lrbc::clock::monotonic_now_ns());
    }
}

impl FrameSink for SamplerSink {
    fn frame(&mut self, c: &Arc<FrameCopy>) {
        if Some(c.generation) != self.generation {
            return;
        }
        let (f, now, hot) = (c.frame_seq, c.sampled_ns, &c.hot);
        if self.current.history_frames > 0 {
            self.pending
                .frames
                .push(aggregate(f, now, hot, c.latency_ns, &mut self.scratch));
        }
        for e in self.current.watched_envs.iter() {
            let i = e as usize;
            let Some(&reward) = hot.rewards.get(i) else {
                continue;
            };
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
                    frame_seq: f,
                    t_ns: now,
                    reward,
                    flags,
                },
            ));
            if let Some(values) = c.row(e) {
                self.pending.details.push((
                    e,
                    EnvDetail {
                        frame_seq: f,
                        t_ns: now,
                        values: values.into(),
                    },
                ));
            }
        }
        self.latest = Some(Arc::clone(c));
    }

    fn tick(&mut self, tick: &Tick<'_>) -> Wants {
        if let Ok(s) = self.settings.try_lock() {
            self.current.clone_from(&s);
        }
        if Some(tick.generation) != self.generation {
            // The first tick, or a new segment: what was pending belongs to the old one,
            // and the shared data's generation is already the new segment's.
            self.pending = Pending::default();
            self.latest = None;
            self.generation = Some(tick.generation);
            self.data_generation = lock(&self.data).generation;
        }
        self.pending.counts.add(&tick.counts);
        self.flush(tick);
        Wants {
            envs: self.current.watched_envs.iter().collect(),
            busy_budget_percent: self.current.busy_budget_percent,
            min_hold_ns: self.repaint_interval_ns,
            check: None,
            every_frame: false,
        }
    }
}
