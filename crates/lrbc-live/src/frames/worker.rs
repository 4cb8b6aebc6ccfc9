//! The follower's thread: looks at `frame_seq` when the pace says a frame is due, copies
//! it, counts it and hands the copy to the sinks.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::accounting::{Copied, FrameAccounting};
use super::pace::Pace;
use super::{FOLLOWER_NICE, FrameCopy, MAX_TICK_NS, Shared, TICK_NS, Tick};
use crate::busy::{Budget, CpuTimes};
use lrbc::attach::Attached;
use lrbc::clock::monotonic_now_ns;
use lrbc::segment::Health;
use lrbc::snapshot;

/// Copies kept for reuse: a sink that holds a frame for a while (the newest one, say)
/// does not make the follower allocate every frame.
const POOL: usize = 3;

/// The time slice the follower asks for: the shortest Linux grants (0.1 ms).
const FOLLOWER_SLICE_NS: u64 = 100_000;

pub(super) struct Worker {
    attached: Attached,
    generation: u64,
    shared: Arc<Shared>,
    accounting: FrameAccounting,
    budget: Budget,
    read_load: fn() -> Option<CpuTimes>,
    /// The union of the envs the sinks want, ascending.
    envs: Vec<u32>,
    health: Health,
    pool: Vec<Arc<FrameCopy>>,
}

impl Worker {
    pub(super) fn new(
        attached: Attached,
        shared: Arc<Shared>,
        read_load: fn() -> Option<CpuTimes>,
    ) -> Self {
        // Frames count from the moment of attach, not from when the thread starts.
        let f = frame_seq(&attached);
        Self {
            attached,
            generation: 0,
            shared,
            accounting: FrameAccounting::new(f),
            budget: Budget::new(None, 0),
            read_load,
            envs: Vec::new(),
            health: Health::Intact,
            pool: Vec::new(),
        }
    }

    pub(super) fn run(mut self) {
        // A sleep of a few tens of microseconds must not turn into a hundred; and the
        // follower takes only the time the engine and trainer leave over.
        lrbc::platform::set_timer_slack_ns(1_000);
        lrbc::platform::lower_thread_priority(FOLLOWER_NICE);
        // It runs a few microseconds per look: with a short slice the scheduler gives it
        // the CPU as it wakes instead of after a busy thread's slice, which at 1 kHz is
        // longer than a frame lives.
        lrbc::platform::request_short_slice(FOLLOWER_SLICE_NS);
        let mut pace = Pace::new(monotonic_now_ns());
        let mut last_tick = 0u64;
        // Relaxed: a flag with no data behind it (set before the unpark that wakes us).
        while !self.shared.stop.load(Ordering::Relaxed) {
            let now = monotonic_now_ns();
            // Relaxed: asks for a tick; the sinks themselves are behind their mutex.
            let joined = self.shared.joined.swap(false, Ordering::Relaxed);
            if joined || now.saturating_sub(last_tick) >= TICK_NS {
                last_tick = now;
                self.tick(now);
            }
            // On a busy machine, no look before the budget allows one.
            if let Some(hold) = self.budget.hold_ns(now) {
                self.accounting.hold();
                std::thread::park_timeout(Duration::from_nanos(hold.min(MAX_TICK_NS)));
                continue;
            }
            self.look(now, &mut pace);
            let after = monotonic_now_ns();
            // Having taken a sample on a busy machine, the next look waits for the hold
            // (one wakeup per sample, not a look at the pace's time and then the hold).
            let next = match self.budget.hold_ns(after) {
                Some(hold) => {
                    self.accounting.hold();
                    after + hold
                }
                None => pace.next_look_ns(now),
            }
            .min(last_tick + MAX_TICK_NS);
            if next > after {
                std::thread::park_timeout(Duration::from_nanos(next - after));
            }
        }
    }

    /// One look at `frame_seq`: a new frame is copied, counted and handed over.
    fn look(&mut self, now: u64, pace: &mut Pace) {
        let f = frame_seq(&self.attached);
        let Some(delta) = self.accounting.ahead(f) else {
            if f == self.accounting.last_frame() {
                pace.nothing_new(now);
            } else {
                // frame_seq went back: a new run; count nothing.
                self.accounting.restart_at(f);
            }
            return;
        };
        let frame_time = {
            let (seg, g) = (&self.attached.segment, &self.attached.geometry);
            g.counters.ext.and_then(|e| seg.load_u64(e.frame_time_ns))
        };
        pace.saw(now, frame_time.unwrap_or(0), delta);
        if matches!(self.health, Health::Truncated { .. }) {
            // Past the file's end the mapping reads zeros: not a frame.
            self.accounting.copied(f, Copied::Unreadable);
            return;
        }
        if self.accounting.is_held()
            && !snapshot::settled_now(&self.attached.segment, &self.attached.geometry)
        {
            // Back from holding off, the engine is already writing the next frame: wait
            // for that one rather than copy a torn one.
            self.accounting.skipped_to(f);
            return;
        }
        let mut copy = self.spare_copy();
        let (seg, g) = (&self.attached.segment, &self.attached.geometry);
        let c = Arc::make_mut(&mut copy);
        // Few attempts: when the engine is already writing the next frame, this one is
        // gone; retrying would only take CPU from the engine.
        let envs = &self.envs;
        let taken = snapshot::guarded_read(seg, g, 3, |s| {
            snapshot::copy_hot_into(s, g, &mut c.hot);
            snapshot::copy_rows_into(s, g, envs, &mut c.rows);
        });
        // Once the guard has served a page of this mapping, that page reads zeros for
        // good, even if the file grows back: no copy from this mapping is a frame any
        // more (a re-attachment maps the segment afresh).
        let what = if seg.sigbus_faults() != 0 {
            Copied::Unreadable
        } else if taken.consistent {
            Copied::Whole
        } else {
            Copied::Torn
        };
        // The engine may have published again between the look and the copy: the copy is
        // of the frame the guard saw, and counting it as the one looked at would take that
        // frame a second time at the next look.
        let copied = if self.accounting.ahead(taken.frame_seq).is_some() {
            taken.frame_seq
        } else {
            f
        };
        self.accounting.copied(copied, what);
        self.budget
            .sampled(monotonic_now_ns(), lrbc::platform::thread_cpu_ns());
        if what != Copied::Whole {
            self.pool.push(copy);
            return;
        }
        c.generation = self.generation;
        c.frame_seq = copied;
        c.action_seq = taken.action_seq;
        c.frame_time_ns = frame_time;
        c.sampled_ns = now;
        c.latency_ns = g.counters.ext.and_then(|e| {
            let f = seg.load_u64(e.frame_time_ns)?;
            let a = seg.load_u64(e.action_time_ns)?;
            (f >= a && a != 0).then(|| f - a)
        });
        c.envs.clone_from(&self.envs);
        c.row_len = (g.obs_size as usize).saturating_add(g.act_size as usize);
        for e in lrbc::sync::lock(&self.shared.sinks).iter_mut() {
            e.sink.frame(&copy);
        }
        self.pool.push(copy);
    }

    /// A copy no sink holds any more, to fill (or a new one).
    fn spare_copy(&mut self) -> Arc<FrameCopy> {
        if let Some(k) = self.pool.iter().position(|c| Arc::strong_count(c) == 1) {
            return self.pool.swap_remove(k);
        }
        if self.pool.len() >= POOL {
            // Every copy is held: the oldest goes to its holders alone.
            self.pool.remove(0);
        }
        Arc::new(FrameCopy::default())
    }

    /// Housekeeping: a re-attachment, the segment's health, the machine's load, and the
    /// sinks' ticks (their counts, and what they want).
    fn tick(&mut self, now: u64) {
        let retarget = lrbc::sync::lock(&self.shared.retarget).take();
        if let Some(attached) = retarget {
            let f = frame_seq(&attached);
            self.attached = attached;
            self.generation += 1;
            // The counts belong to the segment that was replaced.
            self.accounting.discard();
            self.accounting.restart_at(f);
            self.pool.clear();
        }
        self.health = self.attached.segment.health();
        if self.budget.check_due(now) {
            self.budget.observe(now, (self.read_load)());
        }
        let tick = Tick {
            counts: self.accounting.take(),
            yielding: self.budget.yielding(),
            generation: self.generation,
            attached: &self.attached,
        };
        let mut sinks = lrbc::sync::lock(&self.shared.sinks);
        let mut envs = Vec::new();
        let mut budget: Option<Option<f32>> = None;
        let mut min_hold = u64::MAX;
        for e in sinks.iter_mut() {
            let wants = e.sink.tick(&tick);
            envs.extend_from_slice(&wants.envs);
            let b = wants.busy_budget_percent.filter(|p| *p > 0.0);
            budget = Some(match (budget, b) {
                (None, b) => b,
                (Some(Some(x)), Some(y)) => Some(x.max(y)),
                _ => None,
            });
            min_hold = min_hold.min(wants.min_hold_ns);
        }
        drop(sinks);
        let num_envs = self.attached.geometry.num_envs;
        envs.retain(|&e| e < num_envs);
        envs.sort_unstable();
        envs.dedup();
        self.envs = envs;
        self.budget.set_percent(budget.flatten());
        if min_hold != u64::MAX {
            self.budget.set_min_hold_ns(min_hold);
        }
    }
}

fn frame_seq(a: &Attached) -> u64 {
    a.segment
        .load_u64(a.geometry.counters.frame_seq)
        .unwrap_or(0)
}
