//! Consistent copies of the hot data (spec 3.2): the engine may write while we copy,
//! so every copy is bracketed by sequence counters and kept only if they did not move.

use crate::layout::{Geometry, Layout, RegionKind};
use crate::segment::{Segment, f32s_from_bytes};

/// How a copy is known to be whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CopyGuard {
    /// `write_seq` was even and unchanged across the copy.
    WriteSeq,
    /// Lock-step: `frame_seq == action_seq`, both unchanged across the copy.
    LockStep,
    /// Neither applies (inference mode without `write_seq`): the copy may be torn.
    Unguarded,
}

/// Which method applies to this segment right now.
pub fn guard_for(segment: &Segment, geometry: &Geometry) -> CopyGuard {
    if let Some(ext) = geometry.counters.ext
        && segment.load_u64(ext.write_seq).unwrap_or(0) != 0
    {
        return CopyGuard::WriteSeq;
    }
    let lock_step = match geometry.layout {
        Layout::LuckyrobotsIpc => true,
        Layout::LrbcV1 | Layout::LrbcV1Ext => geometry.mode == Some(0),
    };
    if lock_step {
        CopyGuard::LockStep
    } else {
        CopyGuard::Unguarded
    }
}

/// Whether a copy started now would find the hot arrays settled (no write under way),
/// by the guard [`guarded_read`] uses: a cheap look before deciding to copy.
pub fn settled_now(segment: &Segment, geometry: &Geometry) -> bool {
    let c = geometry.counters;
    let load = |off| segment.load_u64(off).unwrap_or(0);
    match guard_for(segment, geometry) {
        CopyGuard::WriteSeq => c.ext.is_none_or(|e| load(e.write_seq) % 2 == 0),
        CopyGuard::LockStep => load(c.frame_seq) == load(c.action_seq),
        CopyGuard::Unguarded => true,
    }
}

/// The result of a guarded copy.
#[derive(Clone, Debug, PartialEq)]
pub struct Guarded<T> {
    pub value: T,
    /// The engine did not write during the copy.
    pub consistent: bool,
    pub guard: CopyGuard,
    /// `frame_seq` as read just before the copy that was kept.
    pub frame_seq: u64,
    pub action_seq: u64,
    /// Copies thrown away because the engine wrote during them.
    pub torn_attempts: u32,
}

/// Copies with `copy` until a copy is known to be whole, at most `max_attempts` times.
/// The last copy is returned with `consistent: false` if none was.
pub fn guarded_read<T>(
    segment: &Segment,
    geometry: &Geometry,
    max_attempts: u32,
    mut copy: impl FnMut(&Segment) -> T,
) -> Guarded<T> {
    let c = geometry.counters;
    let guard = guard_for(segment, geometry);
    let load = |off| segment.load_u64(off).unwrap_or(0);
    let mut torn_attempts = 0;
    let attempts = max_attempts.max(1);
    for attempt in 0..attempts {
        let last = attempt + 1 == attempts;
        let (ok, value, frame_seq, action_seq) = match guard {
            CopyGuard::WriteSeq => {
                let ws = c.ext.map_or(0, |e| e.write_seq);
                let s1 = load(ws);
                if s1 % 2 == 1 && !last {
                    torn_attempts += 1;
                    backoff(attempt);
                    continue;
                }
                let (f, a) = (load(c.frame_seq), load(c.action_seq));
                let value = copy(segment);
                // The copy ends with an Acquire fence (`Segment::read_at`), so this load
                // is ordered after it: the seqlock read side of spec 3.2.
                let s2 = load(ws);
                // The engine stores frame_seq after it made write_seq even: a frame_seq
                // that moved during the copy means the copy may hold the next frame's
                // values under this frame's number.
                let f2 = load(c.frame_seq);
                (s1 % 2 == 0 && s1 == s2 && f2 == f, value, f, a)
            }
            CopyGuard::LockStep => {
                let (f1, a1) = (load(c.frame_seq), load(c.action_seq));
                if f1 != a1 && !last {
                    torn_attempts += 1;
                    backoff(attempt);
                    continue;
                }
                let value = copy(segment);
                let (f2, a2) = (load(c.frame_seq), load(c.action_seq));
                (f1 == a1 && f2 == f1 && a2 == a1, value, f1, a1)
            }
            CopyGuard::Unguarded => {
                let (f, a) = (load(c.frame_seq), load(c.action_seq));
                let value = copy(segment);
                return Guarded {
                    value,
                    consistent: false,
                    guard,
                    frame_seq: f,
                    action_seq: a,
                    torn_attempts,
                };
            }
        };
        if ok || last {
            return Guarded {
                value,
                consistent: ok,
                guard,
                frame_seq,
                action_seq,
                torn_attempts,
            };
        }
        torn_attempts += 1;
        backoff(attempt);
    }
    unreachable!("the last attempt always returns")
}

fn backoff(attempt: u32) {
    if attempt < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Per-env hot data of every env.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HotData {
    pub rewards: Vec<f32>,
    pub dones: Vec<u8>,
    /// `None` when the segment has no truncateds (seed-only layouts).
    pub truncateds: Option<Vec<u8>>,
    pub resets: Vec<u8>,
}

/// One env's observations and actions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnvData {
    pub index: u32,
    pub obs: Vec<f32>,
    pub act: Vec<f32>,
}

fn region_bytes(segment: &Segment, geometry: &Geometry, kind: RegionKind) -> Option<Vec<u8>> {
    let r = geometry.region(kind)?;
    segment.read_vec(r.offset_bytes, usize::try_from(r.length_bytes).ok()?)
}

/// Copies rewards, dones, truncateds and resets of all envs (not guarded by itself).
pub fn copy_hot(segment: &Segment, geometry: &Geometry) -> HotData {
    HotData {
        rewards: region_bytes(segment, geometry, RegionKind::Rewards)
            .map(|b| f32s_from_bytes(&b))
            .unwrap_or_default(),
        dones: region_bytes(segment, geometry, RegionKind::Dones).unwrap_or_default(),
        truncateds: region_bytes(segment, geometry, RegionKind::Truncateds),
        resets: region_bytes(segment, geometry, RegionKind::Resets).unwrap_or_default(),
    }
}

/// Copies a whole region of f32s into `out`, a buffer kept between calls (no allocation
/// once sized); `out` is left empty if the region is absent or cannot be read (not
/// guarded by itself).
pub fn region_f32s_into(
    segment: &Segment,
    geometry: &Geometry,
    kind: RegionKind,
    out: &mut Vec<f32>,
) {
    let region = geometry
        .region(kind)
        .and_then(|r| Some((r.offset_bytes, usize::try_from(r.length_bytes).ok()? / 4)));
    match region {
        Some((at, n)) => {
            out.resize(n, 0.0);
            if !segment.read_f32s(at, out) {
                out.clear();
            }
        }
        None => out.clear(),
    }
}

/// Like [`copy_hot`], into buffers reused between calls (no allocation once sized).
pub fn copy_hot_into(segment: &Segment, geometry: &Geometry, out: &mut HotData) {
    let n = geometry.num_envs as usize;
    let region = |kind| geometry.region(kind).map(|r| r.offset_bytes);
    region_f32s_into(segment, geometry, RegionKind::Rewards, &mut out.rewards);
    for (kind, buf) in [
        (RegionKind::Dones, &mut out.dones),
        (RegionKind::Resets, &mut out.resets),
    ] {
        buf.resize(n, 0);
        match region(kind) {
            Some(at) if segment.read_at(at, buf) => {}
            _ => buf.clear(),
        }
    }
    match region(RegionKind::Truncateds) {
        Some(at) => {
            let t = out.truncateds.get_or_insert_with(Vec::new);
            t.resize(n, 0);
            if !segment.read_at(at, t) {
                out.truncateds = None;
            }
        }
        None => out.truncateds = None,
    }
}

/// Copies the observation and action rows of `envs` (each below `num_envs`) into `out`,
/// one row of `obs_size + act_size` values per env, observations first (not guarded by
/// itself).
pub fn copy_rows_into(segment: &Segment, geometry: &Geometry, envs: &[u32], out: &mut Vec<f32>) {
    let (o, a) = (geometry.obs_size as usize, geometry.act_size as usize);
    out.resize(envs.len() * (o + a), 0.0);
    for (k, &e) in envs.iter().enumerate() {
        let row = &mut out[k * (o + a)..(k + 1) * (o + a)];
        let (obs, act) = row.split_at_mut(o);
        if let Some(r) = geometry.region(RegionKind::Obs) {
            segment.read_f32s(r.offset_bytes + u64::from(e) * o as u64 * 4, obs);
        }
        if let Some(r) = geometry.region(RegionKind::Act) {
            segment.read_f32s(r.offset_bytes + u64::from(e) * a as u64 * 4, act);
        }
    }
}

/// Copies one env's observations and actions (not guarded by itself).
pub fn copy_env(segment: &Segment, geometry: &Geometry, index: u32) -> Option<EnvData> {
    if index >= geometry.num_envs {
        return None;
    }
    let slice = |kind, per_env: u32| -> Option<Vec<f32>> {
        let r = geometry.region(kind)?;
        let mut out = vec![0f32; per_env as usize];
        let offset = r.offset_bytes + u64::from(index) * u64::from(per_env) * 4;
        segment.read_f32s(offset, &mut out).then_some(out)
    };
    Some(EnvData {
        index,
        obs: slice(RegionKind::Obs, geometry.obs_size)?,
        act: slice(RegionKind::Act, geometry.act_size)?,
    })
}

/// Attempts a one-shot reader (`dump`) makes before it reports "may be torn".
pub const DUMP_ATTEMPTS: u32 = 10_000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::LrbcHeader;
    use crate::layout::plan::PlanLayout;
    use crate::testutil::{TestSegment, spec};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// What a reader saw while the engine wrote.
    #[derive(Debug, Default)]
    struct Hammered {
        /// Guarded reads made.
        reads: u64,
        /// Reads whose copy was known whole.
        consistent: u64,
        /// Copies the guard threw away (summed over the reads).
        torn_attempts: u64,
        /// Copies that mixed two writes, kept or not: the engine wrote during them.
        mixed_copies: u64,
    }

    /// Consistent copies a run of [`hammer`] makes at least.
    const CONSISTENT: u64 = 2000;
    /// Guarded reads a run of [`hammer`] makes at most before it gives up on the race.
    const MAX_READS: u64 = 2_000_000;

    /// The engine writes the same value into every env's reward; a copy that mixes two
    /// writes has unequal rewards. Consistent copies must never mix. Reads go on until
    /// the engine was seen writing during a copy (a copy mixed two writes and the guard
    /// threw a copy away) and [`CONSISTENT`] copies were whole, or [`MAX_READS`].
    fn hammer(layout: PlanLayout, write_seq: bool) -> Hammered {
        let mut s = spec(layout, 4096);
        s.obs_size = 1;
        s.act_size = 1;
        let seg = Arc::new(TestSegment::create("torn", &s));
        let a = seg.attach();
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (seg, stop) = (Arc::clone(&seg), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("test-engine".into())
                .spawn(move || {
                    let rewards_at = seg.plan.rewards_offset;
                    let mut step = 0u64;
                    // Relaxed: a stop flag with no data behind it.
                    while !stop.load(Ordering::Relaxed) {
                        step += 1;
                        let values = vec![step as f32; 4096];
                        if write_seq {
                            seg.rw.seqlock_begin(LrbcHeader::WRITE_SEQ_OFFSET);
                        } else {
                            // Lock-step: the client's action arrives first.
                            seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, step);
                        }
                        seg.rw.write_f32s(rewards_at, &values);
                        if write_seq {
                            seg.rw.fetch_add_u64(LrbcHeader::WRITE_SEQ_OFFSET, 1);
                        }
                        seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, step);
                    }
                })
                .unwrap()
        };
        // The engine's first frame, before the reads: they all race with its writes.
        while a
            .segment
            .load_u64(a.geometry.counters.frame_seq)
            .unwrap_or(0)
            == 0
        {
            assert!(!writer.is_finished(), "the engine stopped");
            std::thread::yield_now();
        }
        let whole = |h: &HotData| h.rewards.iter().all(|&r| r == h.rewards[0]);
        let mut h = Hammered::default();
        while h.reads < MAX_READS
            && (h.consistent < CONSISTENT || h.mixed_copies == 0 || h.torn_attempts == 0)
        {
            let mut mixed = 0;
            let g = guarded_read(&a.segment, &a.geometry, 1000, |seg| {
                let copy = copy_hot(seg, &a.geometry);
                mixed += u64::from(!whole(&copy));
                copy
            });
            h.reads += 1;
            h.mixed_copies += mixed;
            h.torn_attempts += u64::from(g.torn_attempts);
            if g.consistent {
                assert!(whole(&g.value), "a consistent snapshot mixed two writes");
                h.consistent += 1;
            }
        }
        // Relaxed: see above.
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        h
    }

    /// The race happened and the guard won it: copies mixed two writes, none was kept as
    /// consistent (`hammer` asserts that), and whole copies were kept.
    fn assert_the_race_was_run(h: &Hammered) {
        assert!(
            h.mixed_copies > 0,
            "the engine never wrote during a copy in {MAX_READS} reads: {h:?}"
        );
        assert!(h.torn_attempts > 0, "the guard threw no copy away: {h:?}");
        assert!(
            h.consistent >= CONSISTENT,
            "too few consistent snapshots: {h:?}"
        );
    }

    #[test]
    fn write_seq_snapshots_are_never_torn() {
        assert_the_race_was_run(&hammer(PlanLayout::Lrbc { ext: true }, true));
    }

    #[test]
    fn lock_step_snapshots_are_never_torn() {
        assert_the_race_was_run(&hammer(PlanLayout::Lrbc { ext: false }, false));
    }

    #[test]
    fn inference_mode_without_write_seq_is_marked_may_be_torn() {
        let mut s = spec(PlanLayout::Lrbc { ext: false }, 4);
        s.mode = 1;
        let seg = TestSegment::create("unguarded", &s);
        let a = seg.attach();
        let g = guarded_read(&a.segment, &a.geometry, 10, |seg| {
            copy_hot(seg, &a.geometry)
        });
        assert_eq!(g.guard, CopyGuard::Unguarded);
        assert!(!g.consistent);
    }

    #[test]
    fn env_slices_come_from_the_env_offsets() {
        let seg = TestSegment::create("env", &spec(PlanLayout::Lrbc { ext: true }, 3));
        let obs: Vec<f32> = (0..12).map(|i| i as f32).collect();
        assert!(seg.rw.write_f32s(seg.plan.obs_offset, &obs));
        let a = seg.attach();
        let e = copy_env(&a.segment, &a.geometry, 2).unwrap();
        assert_eq!(e.obs, vec![8.0, 9.0, 10.0, 11.0]);
        assert_eq!(e.act.len(), 2);
        assert!(copy_env(&a.segment, &a.geometry, 3).is_none());
    }
}
