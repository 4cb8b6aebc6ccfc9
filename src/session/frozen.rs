//! [`Frozen`]: the live view paused. A copy of the sampler's histories and of the
//! traffic list taken at the pause, and a view of them as of a cursor that the
//! timeline moves back and forth through that in-memory history (play, seek, step,
//! speed), as it moves through a recording.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use lrbc::sync::lock;
use lrbc_live::sampler::{EnvHistory, Ring, SamplerData};
use lrbc_live::traffic::TrafficStore;

/// A copy of the rows of `s` up to `until` (all with None).
fn copy_store(s: &TrafficStore, until: Option<u64>) -> TrafficStore {
    let mut out = TrafficStore::default();
    out.streams = s.streams.clone();
    out.first_index = s.first_index;
    out.totals = s.totals.clone();
    out.rows_dropped = s.rows_dropped;
    out.frames_not_kept = s.frames_not_kept;
    out.error = s.error.clone();
    out.rows = s
        .rows
        .iter()
        .take_while(|r| until.is_none_or(|t| r.seen_ns() <= t))
        .cloned()
        .collect();
    out
}

/// `r` in frame order with times that never go back: two sampler threads push frames,
/// so a late copy can come after a newer frame, with a later sample time. Such a time
/// is moved back to just before its successor's, so that the cursor's time orders
/// frames.
fn in_frame_order<T: Clone>(
    r: &Ring<T>,
    seq: impl Fn(&T) -> u64,
    time: impl Fn(&mut T) -> &mut u64,
) -> Ring<T> {
    let mut items: Vec<T> = r.iter().cloned().collect();
    items.sort_by_key(&seq);
    let mut next = u64::MAX;
    for item in items.iter_mut().rev() {
        let t = time(item);
        *t = (*t).min(next.saturating_sub(1));
        next = *t;
    }
    let mut out = Ring::new(r.capacity());
    for item in items {
        out.push(item);
    }
    out
}

/// Items of `r` up to `t` (ascending times), in a ring of the same capacity.
fn ring_until<T: Clone>(r: &Ring<T>, t: u64, time: impl Fn(&T) -> u64) -> Ring<T> {
    let mut out = Ring::new(r.capacity());
    for item in r.iter().take_while(|x| time(x) <= t) {
        out.push(item.clone());
    }
    out
}

/// The live view, paused.
#[derive(Debug)]
pub struct Frozen {
    full: SamplerData,
    store: TrafficStore,
    /// The data as of the cursor, for the panels.
    pub view: Arc<Mutex<SamplerData>>,
    pub view_store: Arc<Mutex<TrafficStore>>,
    /// Times of the oldest and newest frame kept (ns, the sampler's clock).
    pub range: (u64, u64),
    pub cursor_ns: u64,
    pub playing: bool,
    pub speed: f32,
}

impl Frozen {
    /// Copies what the sampler and the traffic list hold now; the cursor at the newest
    /// frame.
    pub fn freeze(d: &SamplerData, s: &TrafficStore) -> Self {
        let mut full = d.clone();
        full.frames = in_frame_order(&d.frames, |f| f.frame_seq, |f| &mut f.t_ns);
        for h in full.envs.values_mut() {
            h.points = in_frame_order(&h.points, |p| p.frame_seq, |p| &mut p.t_ns);
            h.detail = in_frame_order(&h.detail, |p| p.frame_seq, |p| &mut p.t_ns);
        }
        let store = copy_store(s, None);
        let first = full.frames.iter().next().map_or(0, |f| f.t_ns);
        let last = full.frames.back().map_or(first, |f| f.t_ns);
        let view = Arc::new(Mutex::new(full.clone()));
        let view_store = Arc::new(Mutex::new(copy_store(&store, None)));
        Self {
            full,
            store,
            view,
            view_store,
            range: (first, last),
            cursor_ns: last,
            playing: false,
            speed: 1.0,
        }
    }

    /// The frame at the cursor: (frame_seq, time).
    pub fn frame(&self) -> Option<(u64, u64)> {
        lock(&self.view)
            .frames
            .back()
            .map(|f| (f.frame_seq, f.t_ns))
    }

    /// Moves the cursor to `t` (within the range) and rebuilds the view.
    /// Moves the cursor to the frame `frame_seq` (or the last one kept before it); false
    /// when no frame kept is that old (the cursor then goes to the oldest).
    pub fn seek_frame(&mut self, frame_seq: u64) -> bool {
        let at = self
            .full
            .frames
            .iter()
            .take_while(|f| f.frame_seq <= frame_seq)
            .last()
            .map(|f| f.t_ns);
        self.seek(at.unwrap_or(self.range.0));
        at.is_some()
    }

    pub fn seek(&mut self, t: u64) {
        let t = t.clamp(self.range.0, self.range.1);
        self.cursor_ns = t;
        let at_end = t >= self.range.1;
        let d = &self.full;
        let view = SamplerData {
            frames: ring_until(&d.frames, t, |f| f.t_ns),
            envs: d
                .envs
                .iter()
                .map(|(&e, h)| {
                    (
                        e,
                        EnvHistory {
                            points: ring_until(&h.points, t, |p| p.t_ns),
                            detail: ring_until(&h.detail, t, |p| p.t_ns),
                        },
                    )
                })
                .collect::<BTreeMap<_, _>>(),
            ..d.clone()
        };
        let mut view = view;
        if !at_end {
            // Only the newest frame's whole copy and scan are kept.
            view.latest = None;
            if let Some(f) = view.frames.back() {
                view.counters.frame_seq = f.frame_seq;
            }
        }
        // The counters panel's figures are recomputed when the generation moves.
        view.generation = d.generation.wrapping_add(1 + u64::from(!at_end));
        *lock(&self.view) = view;
        *lock(&self.view_store) = copy_store(&self.store, (!at_end).then_some(t));
    }

    /// Moves `n` frames forward (or back) from the cursor.
    pub fn step(&mut self, n: i64) {
        let frames: Vec<u64> = self.full.frames.iter().map(|f| f.t_ns).collect();
        let at = frames.partition_point(|&t| t <= self.cursor_ns);
        // `at` frames are at or before the cursor; the cursor's own is `at - 1`.
        let i = (at as i64 - 1 + n).clamp(0, frames.len() as i64 - 1);
        if let Some(&t) = usize::try_from(i).ok().and_then(|i| frames.get(i)) {
            self.seek(t);
        }
    }

    /// Advances the cursor by `elapsed_ns` of play at the speed; stops at the end.
    pub fn tick(&mut self, elapsed_ns: u64) {
        if !self.playing {
            return;
        }
        let advance = (elapsed_ns as f64 * f64::from(self.speed.clamp(0.1, 10.0))) as u64;
        let t = self.cursor_ns.saturating_add(advance);
        if t >= self.range.1 {
            self.playing = false;
        }
        self.seek(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lrbc::layout::Geometry;
    use lrbc::layout::plan::PlanLayout;
    use lrbc::testutil::{TestSegment, spec};
    use lrbc_live::sampler::{Counters, FrameAgg};

    fn agg(seq: u64, dones: u32, nan: u32) -> FrameAgg {
        FrameAgg {
            frame_seq: seq,
            t_ns: seq * 1000,
            reward_min: 0.0,
            reward_p10: 0.0,
            reward_p50: 0.0,
            reward_mean: 0.0,
            reward_p90: 0.0,
            reward_max: 0.0,
            dones,
            truncateds: 0,
            resets: 0,
            nan_rewards: nan,
            step_latency_ns: None,
        }
    }

    fn data(frames: &[FrameAgg], geometry: Geometry) -> SamplerData {
        let mut ring = Ring::new(100);
        for f in frames {
            ring.push(*f);
        }
        SamplerData {
            counters: Counters {
                frame_seq: frames.last().map_or(0, |f| f.frame_seq),
                ..Counters::default()
            },
            frames: ring,
            ..SamplerData::empty(Arc::new(geometry), "x".into(), 1)
        }
    }

    #[test]
    fn a_paused_view_scrubs_and_steps_through_the_history() {
        let seg = TestSegment::create("frozen", &spec(PlanLayout::Lrbc { ext: true }, 2));
        let e = seg.attach().geometry;
        let frames: Vec<_> = (1..=10)
            .map(|s| agg(s, u32::from(s == 7), u32::from(s == 4)))
            .collect();
        let mut f = Frozen::freeze(&data(&frames, e), &TrafficStore::default());
        assert_eq!(f.range, (1000, 10_000));
        assert_eq!(f.frame(), Some((10, 10_000)));
        f.seek(5500);
        assert_eq!(f.frame(), Some((5, 5000)));
        assert_eq!(f.view.lock().unwrap().frames.len(), 5);
        assert_eq!(f.view.lock().unwrap().counters.frame_seq, 5);
        f.step(-2);
        assert_eq!(f.frame(), Some((3, 3000)));
        f.playing = true;
        f.tick(2500);
        assert_eq!(f.frame(), Some((5, 5000)));
        f.tick(5000);
        assert!(!f.playing);
        assert_eq!(f.frame(), Some((10, 10_000)));
    }
}
