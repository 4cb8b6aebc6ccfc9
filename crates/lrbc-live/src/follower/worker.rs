//! The follower's thread: looks at `frame_seq` when the pace says a frame is due, copies
//! it, counts it and hands the copy to the sinks.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::accounting::{Copied, FrameAccounting};
use super::pace::Pace;
use super::{FollowerShared, FrameCopy, MAX_TICK_NS, TICK_NS, Tick};
use crate::busy::{CpuBudget, CpuTimes};
use crate::check::{Checker, Coverage, Limits};
use lrbc::attach::Attached;
use lrbc::clock::{Clock, monotonic_now_ns};
use lrbc::layout::{Geometry, RegionKind};
use lrbc::segment::{Health, Segment};
use lrbc::snapshot;

/// Copies kept for reuse: a sink that holds a frame for a while (the newest one, say)
/// does not make the follower allocate every frame.
const POOL: usize = 3;

/// The time slice the follower asks for: the shortest Linux grants (0.1 ms).
const FOLLOWER_SLICE_NS: u64 = 100_000;

/// The time before the next look that leaves room for the housekeeping: a tick takes
/// up to a few hundred microseconds.
const TICK_ROOM_NS: u64 = 1_000_000;

/// The checks a sink asked for, as the follower runs them.
struct Checks {
    limits: Arc<Limits>,
    checker: Checker,
    /// Why the limits asked for could not all be applied.
    note: Option<String>,
    /// Every env's observations, tested a block at a time under the guard where they
    /// lie: only the blocks that fail are kept (`failed`, from the env `first_env` on),
    /// and checked row by row once the read is known to be consistent. A copy of the
    /// whole frame would go out to memory and come back. `block`: where a block is
    /// copied when the values are not aligned for f32.
    block: Vec<f32>,
    failed: Vec<FailedBlock>,
    /// Every env's actions, copied under the guard and checked after it (the saturation
    /// runs follow every value).
    act: Vec<f32>,
    /// The last copy of the values came out torn while copies of them usually take more
    /// than half a frame's interval: the next copies the rewards and flags without the
    /// values, so that a machine too slow to copy a frame within its life still gets
    /// samples (the frames whose values were not checked are counted). One copy slowed
    /// by the machine (the follower not run for a while) says nothing of the usual.
    torn_last: bool,
    /// How long a copy with the values usually takes: a moving mean, each copy weighing
    /// an eighth.
    usual_copy_ns: u64,
}

impl Checks {
    fn new(limits: Arc<Limits>, g: &Geometry) -> Option<Self> {
        let make = |l: &Limits| Checker::new(l, g.num_envs, g.obs_size, g.act_size, &g.names);
        let (checker, note) = match make(&limits) {
            Ok(c) => (c, None),
            Err(e) => (make(&Limits::default()).ok()?, Some(e.to_string())),
        };
        Some(Self {
            limits,
            checker,
            note,
            block: Vec::new(),
            failed: Vec::new(),
            act: Vec::new(),
            torn_last: false,
            usual_copy_ns: 0,
        })
    }
}

/// A block of observation rows that failed its test as it was read.
struct FailedBlock {
    first_env: u32,
    values: Vec<f32>,
}

/// Tests every env's observations a block at a time where they lie in the segment (or,
/// where they are not aligned for f32, each block copied into `k.block` first), and keeps
/// the blocks that fail in `k.failed`. False: they could not be read.
fn scan_obs(seg: &Segment, g: &Geometry, k: &mut Checks) -> bool {
    k.failed.clear();
    let row_len = g.obs_size as usize;
    if row_len == 0 || g.num_envs == 0 {
        return true;
    }
    let Some(region) = g.region(RegionKind::Obs) else {
        return false;
    };
    let rows_per_block = k.checker.obs_block_rows().max(1);
    let block_len = rows_per_block.saturating_mul(row_len);
    let count = (g.num_envs as usize).saturating_mul(row_len);
    let Checks {
        checker,
        failed,
        block,
        ..
    } = k;
    let mut test = |first_env: usize, values: &[f32]| {
        if !checker.obs_block_passes(values) {
            failed.push(FailedBlock {
                first_env: first_env as u32,
                values: values.to_vec(),
            });
        }
    };
    let in_place = seg.with_f32s(region.offset_bytes, count, |all| {
        for (b, values) in all.chunks(block_len).enumerate() {
            test(b * rows_per_block, values);
        }
    });
    if in_place.is_some() {
        return true;
    }
    block.resize(block_len, 0.0);
    for (b, first) in (0..count).step_by(block_len).enumerate() {
        let values = &mut block[..block_len.min(count - first)];
        let at = region.offset_bytes.saturating_add(first as u64 * 4);
        if !seg.read_f32s(at, values) {
            return false;
        }
        test(b * rows_per_block, values);
    }
    true
}

/// Copies every env's actions (`act_size` values a row) into `out`. False: they could not
/// be read. (The observations are tested where they lie: [`scan_obs`].)
fn copy_actions(seg: &Segment, g: &Geometry, out: &mut Vec<f32>) -> bool {
    out.resize(
        (g.num_envs as usize).saturating_mul(g.act_size as usize),
        0.0,
    );
    if out.is_empty() {
        return true;
    }
    g.region(RegionKind::Act)
        .is_some_and(|region| seg.read_f32s(region.offset_bytes, out))
}

/// What the follower's thread holds while it follows one segment.
pub(super) struct FollowerThread {
    attached: Attached,
    generation: u64,
    shared: Arc<FollowerShared>,
    accounting: FrameAccounting,
    budget: CpuBudget,
    read_load: fn() -> Option<CpuTimes>,
    /// The union of the envs the sinks want, ascending.
    envs: Vec<u32>,
    health: Health,
    pool: Vec<Arc<FrameCopy>>,
    checks: Option<Checks>,
    /// A sink asked for every frame (or its checks): when a whole copy tears, the
    /// frame's rewards and flags are copied again alone.
    every_frame: bool,
    /// What stamps the copies (`FrameCopy::sampled_ns`); None: the monotonic time of the
    /// look. Pacing keeps to the monotonic clock either way.
    clock: Option<Arc<dyn Clock>>,
}

impl FollowerThread {
    pub(super) fn new(
        attached: Attached,
        shared: Arc<FollowerShared>,
        read_load: fn() -> Option<CpuTimes>,
        clock: Option<Arc<dyn Clock>>,
    ) -> Self {
        // Frames count from the moment of attach, not from when the thread starts.
        let f = frame_seq(&attached);
        Self {
            attached,
            generation: 0,
            shared,
            accounting: FrameAccounting::new(f),
            budget: CpuBudget::new(None, 0),
            read_load,
            envs: Vec::new(),
            health: Health::Intact,
            pool: Vec::new(),
            checks: None,
            every_frame: false,
            clock,
        }
    }

    pub(super) fn run(mut self) {
        // A sleep of a few tens of microseconds must not turn into a hundred; and the
        // follower takes only the time the engine and trainer leave over.
        lrbc_platform::set_timer_slack_ns(1_000);
        lrbc_platform::set_thread_role(lrbc_platform::ThreadRole::Follower);
        // It runs a few microseconds per look: with a short slice the scheduler gives it
        // the CPU as it wakes instead of after a busy thread's slice, which at 1 kHz is
        // longer than a frame lives.
        lrbc_platform::request_short_slice(FOLLOWER_SLICE_NS);
        let mut pace = Pace::new(monotonic_now_ns());
        let mut last_tick = 0u64;
        // When the follower asked to look next (None: it held off, or has not looked).
        let mut planned: Option<u64> = None;
        // Relaxed: a flag with no data behind it (set before the unpark that wakes us).
        while !self.shared.stop.load(Ordering::Relaxed) {
            let now = monotonic_now_ns();
            // Relaxed: asks for a tick; the sinks themselves are behind their mutex.
            if self.shared.joined.swap(false, Ordering::Relaxed) {
                last_tick = now;
                self.tick(now);
            }
            // Acquire: pairs with `Subscription::leave`'s Release store, made after it
            // pushed its request.
            if self.shared.leave_asked.swap(false, Ordering::Acquire) {
                last_tick = now;
                self.last_look(now, &mut pace);
            }
            // On a busy machine, no look before the budget allows one, whatever the sinks
            // want: every wake-up is paid for by the run. The frames let pass are counted
            // (skipped); following every frame at any cost is the sinks' choice of no
            // budget.
            if let Some(hold) = self.budget.hold_ns(now) {
                if now.saturating_sub(last_tick) >= TICK_NS {
                    last_tick = now;
                    self.tick(now);
                }
                self.accounting.hold();
                planned = None;
                std::thread::park_timeout(Duration::from_nanos(hold.min(MAX_TICK_NS)));
                continue;
            }
            // Frames that pass while the machine does not run the follower when it asked
            // to be woken are the machine's loss, and are counted as such.
            let late = planned.is_some_and(|p| now.saturating_sub(p) > pace.late_wake_ns());
            self.accounting.looking(late);
            let took = self.look(now, &mut pace);
            let mut after = monotonic_now_ns();
            // Having taken a sample on a busy machine, the next look waits for the hold
            // (one wakeup per sample, not a look at the pace's time and then the hold).
            let next = match self.budget.hold_ns(after) {
                Some(hold) => {
                    self.accounting.hold();
                    after + hold
                }
                None => pace.next_look_ns(now),
            };
            // The housekeeping (and the sinks' ticks, which may take a few hundred
            // microseconds) goes where no frame is due: just after one was taken, or
            // with time before the next look; and, overdue, anyway.
            let since_tick = after.saturating_sub(last_tick);
            if since_tick >= TICK_NS
                && (took || next >= after + TICK_ROOM_NS || since_tick >= 2 * TICK_NS)
            {
                last_tick = after;
                self.tick(after);
                after = monotonic_now_ns();
            }
            let next = next.min(last_tick + MAX_TICK_NS);
            planned = Some(next);
            if next > after {
                std::thread::park_timeout(Duration::from_nanos(next - after));
            }
        }
    }

    /// One look at `frame_seq`: a new frame is copied, counted and handed over. True: a
    /// new frame was there (whatever came of its copy).
    fn look(&mut self, now: u64, pace: &mut Pace) -> bool {
        let f = frame_seq(&self.attached);
        let Some(delta) = self.accounting.ahead(f) else {
            if f == self.accounting.last_frame() {
                // In lock-step, while the run is quiet, the trainer's actions for the next
                // frame say that it is on its way. Acquire (`load_action_seq`): pairs with
                // the client's Release increment.
                if pace.quiet(now)
                    && self.attached.geometry.mode != Some(1)
                    && load_action_seq(&self.attached) > f
                {
                    pace.actions_sent(now);
                } else {
                    pace.nothing_new(now);
                }
            } else {
                // frame_seq went back: a new run; count nothing.
                self.accounting.restart_at(f);
            }
            return false;
        };
        // A new frame: its stamp is of the look's moment.
        let stamp = self.stamp(now);
        let frame_time = {
            let (seg, g) = (&self.attached.segment, &self.attached.geometry);
            g.counters.ext.and_then(|e| seg.load_u64(e.frame_time_ns))
        };
        pace.saw(now, frame_time.unwrap_or(0), delta);
        if matches!(self.health, Health::Truncated { .. }) {
            // Past the file's end the mapping reads zeros: not a frame.
            self.accounting.copied(f, Copied::Unreadable);
            return true;
        }
        if self.accounting.is_held()
            && !snapshot::settled_now(&self.attached.segment, &self.attached.geometry)
        {
            // Back from holding off, the engine is already writing the next frame: wait
            // for that one rather than copy a torn one.
            self.accounting.skipped_to(f);
            return true;
        }
        let mut copy = self.spare_copy();
        let (seg, g) = (&self.attached.segment, &self.attached.geometry);
        let c = Arc::make_mut(&mut copy);
        // Few attempts: when the engine is already writing the next frame, this one is
        // gone; retrying would only take CPU from the engine.
        let envs = &self.envs;
        // The values are copied and checked unless the last copy of them tore, or, on a
        // busy machine, the budget has not yet paid for the last one.
        let fits = self.budget.costly_work_fits();
        let mut checks = self.checks.as_mut().filter(|k| !k.torn_last && fits);
        let copy_from = monotonic_now_ns();
        let taken = snapshot::guarded_read(seg, g, 3, |s| {
            snapshot::copy_hot_into(s, g, &mut c.hot);
            snapshot::copy_rows_into(s, g, envs, &mut c.rows);
            // Every env's values: the observations tested as they are read, the actions
            // copied; what they hold is taken once the read is known to be consistent.
            // The actions first: the trainer writes the next ones a policy step after the
            // frame, and `action_seq` is looked at again just after their copy (the copy
            // ends with an Acquire fence, `Segment::read_at`, so this load follows it;
            // it pairs with the client's Release increment after it wrote the actions).
            checks.as_mut().map(|k| {
                let act = copy_actions(s, g, &mut k.act);
                let action_seq_after = s.load_u64(g.counters.action_seq).unwrap_or(0);
                let obs = scan_obs(s, g, k);
                (obs, act, action_seq_after)
            })
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
        if copied != f {
            // The frames published during the copy passed while the machine kept the
            // follower from finishing it in time (a copy takes microseconds).
            let took = monotonic_now_ns().saturating_sub(now);
            if took > pace.late_wake_ns() {
                self.accounting.looking(true);
            }
        }
        self.accounting.copied(copied, what);
        if let Some(k) = self.checks.as_mut() {
            k.torn_last = false;
            if taken.value.is_some() {
                let took = monotonic_now_ns().saturating_sub(copy_from);
                k.usual_copy_ns = if k.usual_copy_ns == 0 {
                    took
                } else {
                    (k.usual_copy_ns * 7 + took) / 8
                };
                k.torn_last = what == Copied::Torn && k.usual_copy_ns * 2 > pace.interval_ns();
            }
        }
        self.budget
            .sampled(monotonic_now_ns(), lrbc_platform::thread_cpu_ns());
        if what != Copied::Whole {
            self.pool.push(copy);
            if what == Copied::Torn && self.every_frame {
                // The rewards and flags alone are a few bytes per env: copied again, they
                // may still come out whole (the frame stays counted torn).
                self.flags_only(copied, stamp, frame_time);
            }
            return true;
        }
        c.generation = self.generation;
        c.frame_seq = copied;
        c.action_seq = taken.action_seq;
        c.frame_time_ns = frame_time;
        c.sampled_ns = stamp;
        c.latency_ns = step_latency_ns(&self.attached);
        c.envs.clone_from(&self.envs);
        c.row_len = (g.obs_size as usize).saturating_add(g.act_size as usize);
        c.sample = true;
        match self.checks.as_mut() {
            Some(k) => {
                // Copied without the values: the rewards and flags are still checked.
                let (obs, act, a_after) = taken.value.unwrap_or((false, false, 0));
                // The actions are the client's: the guard above covers the engine's
                // writes only. They belong to this frame if action_seq did not move
                // during their copy and, in lock-step, equals frame_seq (the client had
                // not yet sent the next ones).
                let lock_step = g.mode != Some(1);
                let actions_whole = act
                    && a_after == taken.action_seq
                    && (!lock_step || taken.action_seq == copied);
                let cover = |ok: bool| if ok { Coverage::All } else { Coverage::None };
                k.checker.begin();
                if obs {
                    for b in &k.failed {
                        k.checker.obs_rows(b.first_env, &b.values);
                    }
                    if actions_whole {
                        k.checker.act_rows(0, &k.act);
                    }
                }
                let (rewards, flags) = (&c.hot.rewards, &c.hot.dones);
                k.checker.rewards(rewards);
                k.checker.flags(flags, c.hot.truncateds.as_deref());
                let found = k
                    .checker
                    .finish(copied, cover(obs), cover(obs && actions_whole));
                c.check
                    .get_or_insert_with(Default::default)
                    .clone_from(found);
                self.accounting.checked(obs);
            }
            None => c.check = None,
        }
        for e in lrbc::sync::lock(&self.shared.sinks).iter_mut() {
            e.sink.frame(&copy);
        }
        self.pool.push(copy);
        true
    }

    /// The subscriptions that asked to leave after a last look: one look now, whatever
    /// the budget on a busy machine, and a tick (the counts up to it), then their sinks
    /// are dropped (they flush what they hold) and told.
    fn last_look(&mut self, now: u64, pace: &mut Pace) {
        let leaving = std::mem::take(&mut *lrbc::sync::lock(&self.shared.leaving));
        if leaving.is_empty() {
            return;
        }
        // Asked for, not a wake-up: frames missed before it are not the machine's.
        self.accounting.looking(false);
        self.look(now, pace);
        self.tick(monotonic_now_ns());
        let gone: Vec<_> = {
            let mut sinks = lrbc::sync::lock(&self.shared.sinks);
            let (gone, kept) = std::mem::take(&mut *sinks)
                .into_iter()
                .partition(|e| leaving.iter().any(|(id, _)| *id == e.id));
            *sinks = kept;
            gone
        };
        drop(gone);
        for (_, done) in leaving {
            // The subscription may have stopped waiting.
            let _ = done.try_send(());
        }
    }

    /// A whole copy of frame `f` tore: copies its rewards and flags alone (a few bytes
    /// per env), checks them when a sink asked for checks, and hands the copy to the
    /// sinks that want every frame or its checks (the frame stays counted torn).
    fn flags_only(&mut self, f: u64, stamp: u64, frame_time: Option<u64>) {
        let mut copy = self.spare_copy();
        let (seg, g) = (&self.attached.segment, &self.attached.geometry);
        let c = Arc::make_mut(&mut copy);
        let taken = snapshot::guarded_read(seg, g, 3, |s| {
            snapshot::copy_hot_into(s, g, &mut c.hot);
        });
        let frame = if self.accounting.ahead(taken.frame_seq).is_some() {
            taken.frame_seq
        } else {
            f
        };
        if frame != f {
            // The engine moved on: not the frame that tore.
            self.pool.push(copy);
            return;
        }
        let whole = taken.consistent && seg.sigbus_faults() == 0;
        if whole {
            match self.checks.as_mut() {
                Some(k) => {
                    k.checker.begin();
                    k.checker.rewards(&c.hot.rewards);
                    k.checker.flags(&c.hot.dones, c.hot.truncateds.as_deref());
                    let found = k.checker.finish(frame, Coverage::None, Coverage::None);
                    c.check
                        .get_or_insert_with(Default::default)
                        .clone_from(found);
                    self.accounting.checked(false);
                }
                None => c.check = None,
            }
            c.generation = self.generation;
            c.frame_seq = frame;
            c.action_seq = taken.action_seq;
            c.frame_time_ns = frame_time;
            c.sampled_ns = stamp;
            c.latency_ns = step_latency_ns(&self.attached);
            c.envs.clear();
            c.rows.clear();
            c.sample = false;
            for e in lrbc::sync::lock(&self.shared.sinks).iter_mut() {
                if e.every_frame {
                    e.sink.frame(&copy);
                }
            }
        }
        self.pool.push(copy);
    }

    /// The stamp of a copy of a frame looked at at monotonic time `now`.
    fn stamp(&self, now: u64) -> u64 {
        self.clock.as_ref().map_or(now, |c| c.now_ns())
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
        let retargeted = retarget.is_some();
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
            self.budget.observe(
                now,
                (self.read_load)(),
                Some(lrbc_platform::thread_cpu_ns()),
            );
        }
        let tick = Tick {
            last_frame: self.accounting.last_frame(),
            counts: self.accounting.take(),
            yielding: self.budget.yielding(),
            generation: self.generation,
            attached: &self.attached,
            check_note: self.checks.as_ref().and_then(|k| k.note.as_deref()),
            now_ns: self.stamp(now),
        };
        let mut sinks = lrbc::sync::lock(&self.shared.sinks);
        let mut envs = Vec::new();
        let mut budget: Option<Option<f32>> = None;
        let mut min_hold = u64::MAX;
        let mut limits: Option<Arc<Limits>> = None;
        let mut every_frame = false;
        for e in sinks.iter_mut() {
            let wants = e.sink.tick(&tick);
            e.every_frame = wants.every_frame || wants.check.is_some();
            every_frame |= e.every_frame;
            if limits.is_none() {
                limits = wants.check;
            }
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
        self.checks = match (limits, self.checks.take()) {
            (None, _) => None,
            // The same limits on the same segment: the checker (and its saturation runs)
            // goes on.
            (Some(l), Some(k))
                if !retargeted && (Arc::ptr_eq(&l, &k.limits) || *l == *k.limits) =>
            {
                Some(k)
            }
            (Some(l), _) => Checks::new(l, &self.attached.geometry),
        };
        self.every_frame = every_frame;
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

/// Acquire (`load_u64`): pairs with the client's Release increment of action_seq.
fn load_action_seq(a: &Attached) -> u64 {
    a.segment
        .load_u64(a.geometry.counters.action_seq)
        .unwrap_or(0)
}

fn frame_seq(a: &Attached) -> u64 {
    a.segment
        .load_u64(a.geometry.counters.frame_seq)
        .unwrap_or(0)
}

/// `frame_time_ns - action_time_ns` of `attached`'s segment now, when its layout has both
/// stamps, the trainer's is set and not after the engine's (the frame's step time).
fn step_latency_ns(attached: &Attached) -> Option<u64> {
    let e = attached.geometry.counters.ext?;
    // Acquire loads (`load_u64`): pair with the engine's Release store of frame_time_ns
    // and the client's of action_time_ns.
    let f = attached.segment.load_u64(e.frame_time_ns)?;
    let a = attached.segment.load_u64(e.action_time_ns)?;
    (f >= a && a != 0).then(|| f - a)
}
