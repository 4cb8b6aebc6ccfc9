//! The capture's place at the frame follower (`lrbc_live::follower`): the follower's thread
//! puts each frame's copy in the inbox, and the capture takes them on its own thread,
//! where they are encoded and written.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::lock;
use lrbc_live::follower::{FrameCopy, FrameCounts, FrameSink, Tick, Wants};

/// Frames waiting for the capture, at most: a capture that falls this far behind loses
/// the oldest (counted missed).
const INBOX_FRAMES: usize = 4096;

/// What the follower has told the capture and not yet taken.
#[derive(Debug, Default)]
pub(super) struct Delivered {
    pub frames: VecDeque<Arc<FrameCopy>>,
    pub counts: FrameCounts,
    /// Frames the inbox let go because the capture did not take them in time.
    pub overflowed: u64,
    /// The follower holds off on a busy machine.
    pub yielding: bool,
    /// The follower moved to a segment that replaced the recorded one.
    pub moved_on: bool,
}

/// Shared by the capture and its sink.
#[derive(Debug, Default)]
pub(super) struct Inbox {
    pub delivered: Mutex<Delivered>,
    ready: Condvar,
    /// The capture's budget on a busy machine (percent of one core; None: every frame).
    pub busy_budget: Mutex<Option<f32>>,
}

impl Inbox {
    /// Waits up to `timeout` for a frame to take (returns at once if one is there).
    pub fn wait(&self, timeout: Duration) {
        let d = lock(&self.delivered);
        if d.frames.is_empty() {
            // A spurious or timed-out wake-up is fine: the caller polls either way.
            let _ = self.ready.wait_timeout(d, timeout);
        }
    }
}

/// The sink the follower calls: envs of the recording, frames into the inbox.
pub(super) struct CaptureSink {
    pub inbox: Arc<Inbox>,
    pub envs: Vec<u32>,
    /// The follower's generation at the first frame or tick: the recorded segment's.
    pub generation: Option<u64>,
}

impl FrameSink for CaptureSink {
    fn frame(&mut self, copy: &Arc<FrameCopy>) {
        let mut d = lock(&self.inbox.delivered);
        if *self.generation.get_or_insert(copy.generation) != copy.generation {
            // Frames of a segment that replaced the recorded one are not this recording's.
            return;
        }
        if d.frames.len() >= INBOX_FRAMES {
            d.frames.pop_front();
            d.overflowed += 1;
        }
        d.frames.push_back(Arc::clone(copy));
        // On a busy machine the capture takes its frames when it next looks (within a few
        // tens of milliseconds): a wakeup per frame would be paid for by the run.
        let wake = !d.yielding;
        drop(d);
        if wake {
            self.inbox.ready.notify_one();
        }
    }

    fn tick(&mut self, tick: &Tick<'_>) -> Wants {
        let mut d = lock(&self.inbox.delivered);
        if *self.generation.get_or_insert(tick.generation) != tick.generation {
            d.moved_on = true;
        } else {
            d.counts.add(&tick.counts);
        }
        d.yielding = tick.yielding;
        drop(d);
        Wants {
            envs: self.envs.clone(),
            busy_budget_percent: *lock(&self.inbox.busy_budget),
            min_hold_ns: lrbc_live::busy::MIN_HOLD_NS,
            check: None,
            every_frame: false,
        }
    }
}
