//! Filling the data as of the cursor: the frame at the cursor as `latest`, the frames of
//! the history window before it reduced to the sampler's figures, the watched envs'
//! points and rows. The reductions are public so that a reader of served messages
//! (`lrbc-remote`'s feed) shows a frame as the player does.

use std::sync::Arc;

use super::{HISTORY_WINDOW_NS, PlayerThread};
use crate::format::RecFrame;
use crate::replay::Damage;
use lrbc::layout::Geometry;
use lrbc::sync::lock;
use lrbc_live::sampler::{
    Counters, EnvDetail, EnvHistory, EnvPoint, FLAG_DONE, FLAG_RESET, FLAG_TRUNCATED, FrameAgg,
    Ring, SamplerData, SamplerSettings, SamplerStats, history_capacities,
};
use lrbc_live::traffic::{EntryDecoder, TrafficLimits, TrafficStore};

/// What a frame adds to the histories.
#[derive(Debug)]
pub struct Reduced {
    pub agg: FrameAgg,
    pub points: Vec<(u32, EnvPoint)>,
    pub rows: Vec<(u32, EnvDetail)>,
}

/// The all-env figures of a frame.
pub fn aggregate(f: &RecFrame) -> FrameAgg {
    let mut values: Vec<f32> = f.rewards.iter().copied().filter(|r| !r.is_nan()).collect();
    let mean = if values.is_empty() {
        0.0
    } else {
        (values.iter().map(|&r| f64::from(r)).sum::<f64>() / values.len() as f64) as f32
    };
    // Nearest-rank quantiles in linear time (the same ranks as sorting would give).
    let [min, p10, p50, p90, max] =
        lrbc_live::stats::select_quantiles(&mut values, [0.0, 0.1, 0.5, 0.9, 1.0])
            .unwrap_or([0.0; 5]);
    let count = |v: &[u8]| v.iter().filter(|&&x| x != 0).count() as u32;
    FrameAgg {
        frame_seq: f.frame_seq,
        t_ns: f.log_ns,
        reward_min: min,
        reward_p10: p10,
        reward_p50: p50,
        reward_mean: mean,
        reward_p90: p90,
        reward_max: max,
        dones: count(&f.dones),
        truncateds: f.truncateds.as_deref().map_or(0, count),
        resets: count(&f.resets),
        nan_rewards: f.rewards.iter().filter(|r| r.is_nan()).count() as u32,
        step_latency_ns: None,
    }
}

/// The reward and flags of each of `envs` at a frame.
pub fn points(f: &RecFrame, envs: &[u32]) -> Vec<(u32, EnvPoint)> {
    let flag = |v: Option<&[u8]>, i: usize, bit: u8| {
        if v.and_then(|v| v.get(i)).is_some_and(|&x| x != 0) {
            bit
        } else {
            0
        }
    };
    let mut points = Vec::with_capacity(envs.len());
    for &env in envs {
        let i = env as usize;
        let Some(&reward) = f.rewards.get(i) else {
            continue;
        };
        let flags = flag(Some(&f.dones), i, FLAG_DONE)
            | flag(f.truncateds.as_deref(), i, FLAG_TRUNCATED)
            | flag(Some(&f.resets), i, FLAG_RESET);
        points.push((
            env,
            EnvPoint {
                frame_seq: f.frame_seq,
                t_ns: f.log_ns,
                reward,
                flags,
            },
        ));
    }
    points
}

pub fn reduce(f: &RecFrame, watched: &[u32], g: &Geometry) -> Reduced {
    Reduced {
        agg: aggregate(f),
        points: points(f, watched),
        rows: rows(f, watched, g),
    }
}

/// The observations and actions of each of `envs` at a frame (of those it carries).
pub fn rows(f: &RecFrame, envs: &[u32], g: &Geometry) -> Vec<(u32, EnvDetail)> {
    let (o, a) = (g.obs_size as usize, g.act_size as usize);
    let mut rows = Vec::new();
    for &env in envs {
        if let Some(values) = f.row(env, o, a) {
            rows.push((
                env,
                EnvDetail {
                    frame_seq: f.frame_seq,
                    t_ns: f.log_ns,
                    values: values.into_boxed_slice(),
                },
            ));
        }
    }
    rows
}

/// A reduced frame into the histories (of the watched envs that have one).
pub fn push(d: &mut SamplerData, r: Reduced) {
    d.frames.push(r.agg);
    d.stats.frames.seen += 1;
    d.stats.frames.sampled += 1;
    push_envs(d, r.points, r.rows);
}

/// A frame's points and rows into the histories of the watched envs, not its all-env
/// figures: a frame whose figures are there already.
pub fn push_envs(d: &mut SamplerData, points: Vec<(u32, EnvPoint)>, rows: Vec<(u32, EnvDetail)>) {
    for (env, p) in points {
        if let Some(h) = d.envs.get_mut(&env) {
            h.points.push(p);
        }
    }
    for (env, row) in rows {
        if let Some(h) = d.envs.get_mut(&env) {
            h.detail.push(row);
        }
    }
}

impl PlayerThread {
    /// Fills the data as of `cursor`: incrementally when it moved forward within the
    /// window with the same settings and not by a seek, else from scratch (a seek shows
    /// the frame at the cursor at once).
    pub(super) fn publish(
        &mut self,
        cursor: u64,
        seek: bool,
        settings: &SamplerSettings,
        limits: TrafficLimits,
    ) -> Result<(), Damage> {
        let incremental = match self.shown {
            Some(_) if seek => false,
            Some(shown) => {
                cursor > shown
                    && cursor - shown < HISTORY_WINDOW_NS
                    && self.applied.as_ref() == Some(settings)
            }
            None => false,
        };
        let g = self.rec.geometry.clone();
        let watched: Vec<u32> = settings.watched_envs.within(g.num_envs).collect();
        let from = if incremental {
            self.shown.unwrap_or(cursor).saturating_add(1)
        } else {
            // The frame at the cursor first, so that a scrub shows at once.
            let latest = self.rec.frame_at(cursor)?;
            let (frames, detail) =
                history_capacities(settings, watched.len(), (g.obs_size + g.act_size) as usize);
            {
                let mut d = lock(&self.data);
                d.generation += 1;
                d.frames = Ring::new(frames);
                d.envs = watched
                    .iter()
                    .map(|&e| {
                        (
                            e,
                            EnvHistory {
                                points: Ring::new(frames),
                                detail: Ring::new(detail),
                            },
                        )
                    })
                    .collect();
                d.stats = SamplerStats::default();
                set_latest(&mut d, latest.as_ref());
            }
            *lock(&self.store) = TrafficStore::default();
            // Record indexes go on from those shown before (the panels key on them).
            self.decoder = EntryDecoder::starting_at(self.decoder.next_index());
            (self.waker)();
            cursor.saturating_sub(HISTORY_WINDOW_NS)
        };
        let mut batch = Vec::new();
        let mut last = None;
        let data = Arc::clone(&self.data);
        let flush = |batch: &mut Vec<Reduced>, last: Option<&RecFrame>| {
            let mut d = lock(&data);
            for r in batch.drain(..) {
                push(&mut d, r);
            }
            if let Some(f) = last {
                set_latest(&mut d, Some(f));
            }
        };
        let shared = Arc::clone(&self.shared);
        let mut seen = 0u32;
        let mut cut_short = false;
        self.rec.frames_between(from, cursor, |f| {
            batch.push(reduce(&f, &watched, &g));
            seen = seen.wrapping_add(1);
            // A new request cuts a history filled from scratch short (its newest
            // frame is already shown); filling forward while playing goes on to the
            // cursor.
            if !incremental && seen.is_multiple_of(256) && lock(&shared.state).interrupted() {
                cut_short = true;
                return false;
            }
            if batch.len() >= 4096 {
                flush(&mut batch, None);
            }
            last = Some(f);
            true
        })?;
        // Cut short, the newest frame read is not the cursor's (set at the start).
        flush(&mut batch, if cut_short { None } else { last.as_ref() });
        self.fill_traffic(&g, from, cursor, limits)?;
        if let Err(e) = self.publish_images(cursor, settings, limits) {
            // The frames stand; the cameras panel says why it has no image.
            self.images_shown = None;
            let mut d = lock(&self.data);
            d.image = None;
            d.image_note = Some(format!("camera images unreadable: {e}"));
        }
        self.shown = Some(cursor);
        self.applied = Some(settings.clone());
        Ok(())
    }
}

/// The frame `f` as the data's `latest` (None: no frame).
pub fn set_latest(d: &mut SamplerData, f: Option<&RecFrame>) {
    let Some(f) = f else {
        d.latest = None;
        d.counters = Counters::default();
        return;
    };
    d.latest = Some((
        f.frame_seq,
        lrbc::snapshot::HotData {
            rewards: f.rewards.clone(),
            dones: f.dones.clone(),
            truncateds: f.truncateds.clone(),
            resets: f.resets.clone(),
        },
    ));
    d.counters.frame_seq = f.frame_seq;
    d.counters.action_seq = f.action_seq;
    d.counters.frame_time_ns = (f.frame_time_ns != 0).then_some(f.frame_time_ns);
    d.counters.read_ns = f.log_ns;
}
