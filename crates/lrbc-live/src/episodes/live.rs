//! The episodes of a live segment: a sink of the frame follower ([`EpisodeTracker`])
//! that runs the [`Accountant`] on the follower's thread over every frame it looks at (on
//! a busy machine, the copies of the rewards and flags alone, which the follower makes of
//! every frame), and moves what ended into a shared [`EpisodeBook`] in batches under a
//! short lock.

use std::sync::{Arc, Mutex};

use super::accountant::{Accountant, Episode, FrameView};
use super::book::{BookDetail, EpisodeBook};
use crate::check::{ChannelKind, Fault};
use crate::follower::{FollowError, FrameCopy, FrameSink, Tick, Wants};
use crate::live_sink::{Handoff, SinkControl};
use lrbc::attach::Attached;
use lrbc::sync::lock;

/// The accountant running on a segment's follower, and the book it fills.
pub struct EpisodeTracker {
    book: Arc<Mutex<EpisodeBook>>,
    control: SinkControl,
}

impl std::fmt::Debug for EpisodeTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpisodeTracker").finish_non_exhaustive()
    }
}

impl EpisodeTracker {
    /// Starts the accounting on the follower of `attached`'s segment, into a book that
    /// keeps what `detail` says. The follower looks at every frame whatever the load (the
    /// rewards and flags alone while it holds off on a busy machine), and keeps to
    /// `busy_budget_percent` for its whole copies.
    pub fn start(
        attached: &Attached,
        detail: BookDetail,
        busy_budget_percent: Option<f32>,
    ) -> Result<Self, FollowError> {
        Self::start_with_load(
            attached,
            detail,
            busy_budget_percent,
            crate::busy::read_cpu_times,
        )
    }

    /// [`EpisodeTracker::start`] with the machine's load read by `read_load` (tests).
    pub fn start_with_load(
        attached: &Attached,
        detail: BookDetail,
        busy_budget_percent: Option<f32>,
        read_load: fn() -> Option<crate::busy::CpuTimes>,
    ) -> Result<Self, FollowError> {
        let num_envs = attached.geometry.num_envs;
        let book = Arc::new(Mutex::new(EpisodeBook::with_detail(num_envs, detail)));
        let budget = Arc::new(Mutex::new(busy_budget_percent));
        let sink = AccountantSink {
            accountant: None,
            num_envs,
            detail,
            generation: None,
            handoff: Handoff::new(Arc::clone(&book)),
            last_ns: 0,
            busy_budget_percent: Arc::clone(&budget),
        };
        let control = SinkControl::subscribe(attached, Box::new(sink), read_load, budget)?;
        Ok(Self { book, control })
    }

    /// The episodes so far (lock briefly).
    pub fn book(&self) -> &Arc<Mutex<EpisodeBook>> {
        &self.book
    }

    /// The owner's budget on a busy machine changed.
    pub fn set_busy_budget(&self, percent_of_a_core: Option<f32>) {
        self.control.set_busy_budget(percent_of_a_core);
    }

    /// Whether the follower's thread ended (only a panic ends it early).
    pub fn thread_ended(&self) -> bool {
        self.control.thread_ended()
    }

    /// Leaves the follower: the episodes going on are cut (ending `running`) and reach
    /// the book.
    pub fn stop(&mut self) {
        self.control.stop();
    }
}

/// The envs with a non-finite observation or action in a frame's check.
pub fn nonfinite_envs(copy: &FrameCopy) -> impl Iterator<Item = u32> + '_ {
    copy.check.iter().flat_map(|c| {
        c.hits
            .iter()
            .filter(|h| h.fault == Fault::NonFinite && h.channel.kind() != ChannelKind::Reward)
            .map(|h| h.env)
    })
}

/// The accountant as a sink of the follower.
struct AccountantSink {
    /// Made at the first frame or tick (and again for a new segment).
    accountant: Option<Accountant>,
    num_envs: u32,
    detail: BookDetail,
    generation: Option<u64>,
    /// Episodes that ended (or were cut), on their way to the book.
    handoff: Handoff<Episode, EpisodeBook>,
    last_ns: u64,
    busy_budget_percent: Arc<Mutex<Option<f32>>>,
}

impl AccountantSink {
    /// Moves what ended and the episodes going on into the book if its lock is free
    /// (readers never make the follower wait), or when they have piled up, or `wait`.
    fn flush(&mut self, wait: bool) {
        let Some((mut guard, pending)) = self.handoff.take(wait) else {
            return;
        };
        if guard.num_envs != self.num_envs {
            *guard = EpisodeBook::with_detail(self.num_envs, self.detail);
        }
        for e in pending {
            guard.apply(&e);
        }
        if let Some(a) = &self.accountant {
            guard.progress(a, self.last_ns);
        }
    }
}

impl Drop for AccountantSink {
    /// The sink leaves the follower: the episodes going on are cut, and all of it reaches
    /// the book.
    fn drop(&mut self) {
        if let Some(a) = &mut self.accountant {
            a.finish(self.handoff.pending());
        }
        self.flush(true);
    }
}

impl FrameSink for AccountantSink {
    fn frame(&mut self, c: &Arc<FrameCopy>) {
        if *self.generation.get_or_insert(c.generation) != c.generation {
            return;
        }
        let n = self.num_envs;
        let a = self
            .accountant
            .get_or_insert_with(|| Accountant::new(n, c.frame_seq.saturating_sub(1)));
        let view = FrameView {
            frame_seq: c.frame_seq,
            time_ns: c.sampled_ns,
            rewards: &c.hot.rewards,
            dones: &c.hot.dones,
            truncateds: c.hot.truncateds.as_deref(),
            resets: &c.hot.resets,
        };
        a.frame(&view, nonfinite_envs(c), self.handoff.pending());
        self.last_ns = c.sampled_ns;
    }

    fn tick(&mut self, tick: &Tick<'_>) -> Wants {
        let g = &tick.attached.geometry;
        match self.generation {
            Some(g0) if g0 != tick.generation => {
                // A segment that replaced the one followed: its episodes start afresh.
                if let Some(a) = &mut self.accountant {
                    a.finish(self.handoff.pending());
                }
                self.num_envs = g.num_envs;
                self.accountant = Some(Accountant::new(g.num_envs, tick.last_frame));
                self.generation = Some(tick.generation);
            }
            Some(_) => {}
            None => self.generation = Some(tick.generation),
        }
        if self.accountant.is_none() {
            self.accountant = Some(Accountant::new(self.num_envs, tick.last_frame));
        }
        self.flush(false);
        Wants {
            envs: Vec::new(),
            busy_budget_percent: *lock(&self.busy_budget_percent),
            min_hold_ns: u64::MAX,
            check: None,
            every_frame: true,
        }
    }
}
