//! A live run compared against a recorded one as it runs (`compare A.mcap --shm NAME`):
//! [`LiveFrames`] takes the follower's copy of each frame, every env's values with it,
//! and hands it to the comparison's thread, where [`AgainstBaseline`] compares it with
//! the recording's frame at the same place from the run's start.
//!
//! A live frame's place is its `frame_seq` − 1 (a run's first step publishes `frame_seq`
//! 1; `frame_seq` 0 is the frame written when the segment was created, which no actions
//! made). Frames of the recording the live run lacks (published before the attach, or
//! not taken: missed, torn, let pass on a busy machine, dropped by a comparison behind)
//! count as only in A; live frames past the recording's end as only in B. Frames of the
//! recording the live run has not reached when it stops are not counted.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use lrbc_live::follower::{FrameCopy, FrameSink, Tick, Wants};

use super::files::{ReadFrame, ReadWork, Reader, recycle};
use super::{CompareError, ComparedRun, Comparer, Divergence, FilesCompared, Tolerance};
use crate::format::RecFrame;

/// Frames waiting for the comparison, at most; more are dropped (and counted).
const WAITING: usize = 16;

/// How often a comparison waiting for live frames looks whether it should stop.
const QUIT_POLL: Duration = Duration::from_millis(100);

/// The follower's sink: each frame's copy, every env's rows, to the comparison.
pub struct LiveFrames {
    tx: Sender<Arc<FrameCopy>>,
    envs: Vec<u32>,
    busy_budget_percent: Option<f32>,
    /// The follower's generation at the first frame or tick: the compared segment's.
    generation: Option<u64>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for LiveFrames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveFrames")
            .field("envs", &self.envs.len())
            .finish_non_exhaustive()
    }
}

impl LiveFrames {
    /// A sink wanting the rows of the first `num_envs` envs, keeping to `busy_budget_percent` of a
    /// core on a busy machine; the frames come out of the receiver, and the count of
    /// those dropped because the comparison was behind out of the counter.
    pub fn new(
        num_envs: u32,
        busy_budget_percent: Option<f32>,
    ) -> (Self, Receiver<Arc<FrameCopy>>, Arc<AtomicU64>) {
        let (tx, rx) = bounded(WAITING);
        let dropped = Arc::new(AtomicU64::new(0));
        let sink = Self {
            tx,
            envs: (0..num_envs).collect(),
            busy_budget_percent,
            generation: None,
            dropped: Arc::clone(&dropped),
        };
        (sink, rx, dropped)
    }
}

impl FrameSink for LiveFrames {
    fn frame(&mut self, copy: &Arc<FrameCopy>) {
        if *self.generation.get_or_insert(copy.generation) != copy.generation || !copy.sample {
            // Another segment's (one that replaced the compared one), or a copy without
            // its rows.
            return;
        }
        if let Err(TrySendError::Full(_)) = self.tx.try_send(Arc::clone(copy)) {
            // Relaxed: a count read once the comparison ends.
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn tick(&mut self, tick: &Tick<'_>) -> Wants {
        self.generation.get_or_insert(tick.generation);
        Wants {
            envs: self.envs.clone(),
            busy_budget_percent: self.busy_budget_percent,
            min_hold_ns: lrbc_live::busy::MIN_HOLD_NS,
            check: None,
            every_frame: false,
        }
    }
}

/// The follower's copy as a recorded frame (`obs_size` observations first in each row):
/// the rows of its envs below `max_envs` (those the comparison can compare).
pub fn rec_frame_of(copy: &FrameCopy, obs_size: usize, max_envs: usize, out: &mut RecFrame) {
    let hot = &copy.hot;
    out.log_ns = copy.sampled_ns;
    out.frame_seq = copy.frame_seq;
    out.frame_time_ns = copy.frame_time_ns.unwrap_or(0);
    out.action_seq = copy.action_seq;
    out.action_time_ns = copy.action_time_ns().unwrap_or(0);
    out.sampled_ns = copy.sampled_ns;
    out.rewards.clone_from(&hot.rewards);
    out.dones.clone_from(&hot.dones);
    out.truncateds.clone_from(&hot.truncateds);
    out.resets.clone_from(&hot.resets);
    let kept = copy.envs.partition_point(|&e| (e as usize) < max_envs);
    out.envs.clear();
    out.envs.extend_from_slice(&copy.envs[..kept]);
    let o = obs_size.min(copy.row_len);
    out.obs_size = o;
    out.act_size = copy.row_len - o;
    out.observations.clear();
    out.actions.clear();
    for row in copy.rows.chunks_exact(copy.row_len.max(1)).take(kept) {
        let (obs, act) = row.split_at(o);
        out.observations.extend_from_slice(obs);
        out.actions.extend_from_slice(act);
    }
}

/// A recording, read ahead on a thread of its own, compared with live frames as they come.
pub struct AgainstBaseline {
    comparer: Comparer,
    reader: Reader,
    /// The first `frame_seq` of the recording still wanted: the reader skips those
    /// before it undecoded.
    wanted_from: Arc<AtomicU64>,
    /// The recording's envs (its first frame's).
    num_envs: usize,
    /// The recording's first `frame_seq`: its place 0.
    first: Option<u64>,
    next: Option<Box<ReadFrame>>,
    ended: bool,
}

impl std::fmt::Debug for AgainstBaseline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgainstBaseline")
            .field("first", &self.first)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl AgainstBaseline {
    /// Opens the recording `a` to compare live frames with, within `tolerance`.
    pub fn open(a: &Path, tolerance: Tolerance) -> Result<Self, CompareError> {
        let wanted_from = Arc::new(AtomicU64::new(0));
        let work = ReadWork {
            episodes: false,
            wanted_from: Some(Arc::clone(&wanted_from)),
            role: Some(lrbc_platform::ThreadRole::Background),
        };
        let reader = Reader::spawn(ComparedRun::A, a, work)?;
        let mut this = Self {
            comparer: Comparer::new(tolerance),
            reader,
            wanted_from,
            num_envs: 0,
            first: None,
            next: None,
            ended: false,
        };
        this.advance();
        this.num_envs = this.next.as_ref().map_or(0, |f| f.frame.rewards.len());
        Ok(this)
    }

    /// The recording's envs: a live frame's others are not compared (the follower need
    /// not copy their values).
    pub fn num_envs(&self) -> usize {
        self.num_envs
    }

    fn advance(&mut self) {
        recycle(&self.reader.spares, self.next.take());
        self.next = self.reader.frames.recv().ok();
        self.ended = self.next.is_none();
        if let Some(f) = &self.next {
            // Frames the reader skipped were behind the live run: only in A.
            self.comparer.only_a(f.skipped_before);
        }
    }

    /// The place of the recording's next frame (None: it ended).
    fn next_place(&mut self) -> Option<u64> {
        let f = &self.next.as_ref()?.frame;
        let first = *self.first.get_or_insert(f.frame_seq);
        // A frame before the recording's first (a second run in one file) is placed
        // before every live frame, and so left uncompared.
        Some(f.frame_seq.saturating_sub(first))
    }

    /// Compares live frame `live` with the recording's frame at its place; each env's
    /// first divergence it finds.
    pub fn frame(&mut self, live: &RecFrame) -> Vec<Divergence> {
        let Some(place) = live.frame_seq.checked_sub(1) else {
            return Vec::new();
        };
        if let Some(first) = self.first {
            // Release: pairs with the reader's Acquire load; the frames before this
            // place are not wanted any more.
            self.wanted_from
                .store(first.saturating_add(place), Ordering::Release);
        }
        loop {
            match self.next_place() {
                None => {
                    self.comparer.only_b(1);
                    return Vec::new();
                }
                Some(p) if p < place => {
                    self.comparer.only_a(1);
                    self.advance();
                }
                Some(p) if p == place => {
                    let found = match &self.next {
                        Some(a) => self.comparer.frame(place, &a.frame, live),
                        None => Vec::new(),
                    };
                    self.advance();
                    return found;
                }
                Some(_) => {
                    self.comparer.only_b(1);
                    return Vec::new();
                }
            }
        }
    }

    /// Compares each live frame that comes out of `frames` ([`LiveFrames`]' receiver;
    /// rows of `obs_size` observations, then the actions) until `quit`, the recording's
    /// last frame, or `then` says to stop. `then` is told each frame's divergences (most
    /// often none) and the comparison so far; true goes on.
    pub fn follow(
        &mut self,
        frames: &Receiver<Arc<FrameCopy>>,
        obs_size: usize,
        quit: &AtomicBool,
        mut then: impl FnMut(&[Divergence], &Self) -> bool,
    ) {
        let mut f = RecFrame::default();
        // Relaxed: a flag with no data behind it.
        while !quit.load(Ordering::Relaxed) {
            let Ok(copy) = frames.recv_timeout(QUIT_POLL) else {
                continue;
            };
            rec_frame_of(&copy, obs_size, self.num_envs, &mut f);
            let found = self.frame(&f);
            if !then(&found, self) || self.baseline_ended() {
                break;
            }
        }
    }

    /// The recording has no frame left to compare.
    pub fn baseline_ended(&self) -> bool {
        self.ended
    }

    /// The comparison so far, counted.
    pub fn counts(&self) -> super::CompareCounts {
        self.comparer.counts()
    }

    /// What the comparison found (no episodes or events: a live run's are not whole).
    pub fn finish(self) -> Result<FilesCompared, CompareError> {
        let Self {
            comparer,
            reader,
            next,
            ..
        } = self;
        drop(next);
        let out = reader.finish()?;
        Ok(FilesCompared {
            counts: comparer.counts(),
            divergences: comparer.divergences().copied().collect(),
            end_a: out.end,
            names: out.names,
            ..FilesCompared::default()
        })
    }
}
