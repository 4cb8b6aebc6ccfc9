//! The frame follower: one thread per attached segment in a process follows
//! `frame_seq`, copies each frame it can under the guard of spec 3.2, counts what it
//! saw, took, missed, found torn or unreadable, and hands the copies to its consumers
//! (the window's sampler, `watch`, `record`, the flight recorder). However many
//! consumers are attached to one segment, the segment is followed once.
//!
//! The follower sleeps until just after the next frame is due ([`pace`]) and looks
//! closely only while a frame is late. Consumers are [`FrameSink`]s called on the
//! follower's thread: a frame (an `Arc` that a sink may keep), and a tick every few
//! milliseconds with the counts since the last one, where a sink says what it wants
//! (the envs whose observation and action rows it needs, its busy-machine budget).
//!
//! A copy that the SIGBUS guard served in part (a file that shrank: zeros where the
//! data was), or a frame published while the segment is shorter than its geometry, is
//! not a frame: it is counted `unreadable` and never handed to a consumer.
//!
//! When a sink asks for the values to be checked (the detector's, `crate::detect`), the
//! follower checks each frame it copies with a [`Checker`](crate::check::Checker): every
//! env's rewards and flags, and every env's observations and actions as it copies them
//! in cache-sized pieces, so that a finding always comes from a consistent copy. When a
//! whole copy tears, the frame's rewards and flags (a few bytes per env) are copied and
//! checked again alone, and go to the sinks that asked for checks or for every frame (the
//! episodes' accountant, `crate::episodes`) with `FrameCopy::sample` false.
//!
//! The run comes first: while the machine has no spare CPU the follower keeps to its
//! busy-machine budget whatever its sinks want, and counts the frames it lets pass
//! (skipped). Following every frame at any cost is the choice of no budget.

pub mod accounting;
pub mod pace;
mod worker;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::busy::CpuTimes;
use crate::check::{FrameCheck, Limits};
use lrbc::attach::Attached;
use lrbc::clock::Clock;
use lrbc::segment::Location;
use lrbc::snapshot::HotData;

pub use accounting::{Copied, FrameAccounting, FrameCounts, frames_ahead};

/// How often the sinks are ticked: at the first look this long after the last tick (a
/// tick costs no wake-up of its own while frames come), and at least every
/// [`MAX_TICK_NS`].
pub const TICK_NS: u64 = 5_000_000;
pub const MAX_TICK_NS: u64 = 50_000_000;

/// How long [`Subscription::leave`] waits for the follower's last look at most.
pub const LEAVE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// One consistent copy of a frame: the hot arrays of every env and the observation and
/// action rows of the envs the sinks want.
#[derive(Clone, Debug, Default)]
pub struct FrameCopy {
    /// The attachment the frame belongs to: the follower's count of re-attachments, which
    /// a sink compares with the one it joined at.
    pub generation: u64,
    pub frame_seq: u64,
    pub action_seq: u64,
    /// The engine's stamp of the frame (`frame_time_ns`, ext layout), if any.
    pub frame_time_ns: Option<u64>,
    /// When the follower copied it, by the follower's clock (CLOCK_MONOTONIC unless a
    /// test gave another).
    pub sampled_ns: u64,
    /// `frame_time_ns - action_time_ns`, when both are set and in order.
    pub latency_ns: Option<u64>,
    pub hot: HotData,
    /// The envs whose rows were copied, ascending.
    pub envs: Vec<u32>,
    /// `obs_size + act_size` values per env of `envs`, in that order.
    pub rows: Vec<f32>,
    /// Values per row.
    pub row_len: usize,
    /// A sample: the rows the sinks want were copied, and every sink gets it. False: a
    /// copy of the rewards and flags only, made after a whole copy tore; only the sinks
    /// that asked for checks or every frame get it.
    pub sample: bool,
    /// What the check of the frame found, when a sink asked for checks.
    pub check: Option<FrameCheck>,
}

impl FrameCopy {
    /// The trainer's stamp of the actions that made this frame (`action_time_ns`), when
    /// the layout has both stamps and it is not after the frame's.
    pub fn action_time_ns(&self) -> Option<u64> {
        Some(self.frame_time_ns?.saturating_sub(self.latency_ns?))
    }

    /// The observation and action values of `env`, if its row was copied.
    pub fn row(&self, env: u32) -> Option<&[f32]> {
        let k = self.envs.binary_search(&env).ok()?;
        self.rows.get(k * self.row_len..(k + 1) * self.row_len)
    }
}

/// What a sink is told every tick.
#[derive(Debug)]
pub struct Tick<'a> {
    /// Frames counted since the last tick (a sink that joined since gets them too).
    pub counts: FrameCounts,
    /// The follower is holding off on a busy machine.
    pub yielding: bool,
    pub generation: u64,
    /// The follower's mapping, for reading counters.
    pub attached: &'a Attached,
    /// The newest frame the follower has dealt with (taken or counted): a sink that joins
    /// now gets the frames after it, or their counts.
    pub last_frame: u64,
    /// Why the checks do less than asked (a bound names a value this segment does not
    /// have: the check goes on without that sink's bounds).
    pub check_note: Option<&'a str>,
    /// The time of the tick by the clock of the follower's stamps (the monotonic clock
    /// unless the subscription that started it gave another).
    pub now_ns: u64,
}

/// What a sink wants of the follower, said at each tick.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Wants {
    /// Envs whose observation and action rows to copy with each frame.
    pub envs: Vec<u32>,
    /// Share of one core the follower may use on a busy machine, in percent; None or 0:
    /// follow every frame. The follower keeps to the largest budget its sinks set, and
    /// to none if one of them sets none.
    pub busy_budget_percent: Option<f32>,
    /// While yielding, no more than one frame per this interval (u64::MAX: no say).
    pub min_hold_ns: u64,
    /// Check every frame's values against these limits (see the module's doc). The
    /// follower keeps to the first sink's limits when several ask.
    pub check: Option<Arc<Limits>>,
    /// Every frame matters (the episodes' accountant), as to the sinks that ask for
    /// checks: when a whole copy of a frame tears, its rewards and flags are copied again
    /// alone and handed over (`FrameCopy::sample` false). On a busy machine the follower
    /// still keeps to its budget: following every frame whatever the load is the choice
    /// of no budget.
    pub every_frame: bool,
}

/// A consumer of the follower's frames. Called on the follower's thread: keep it short.
pub trait FrameSink: Send {
    /// A consistent copy of a new frame.
    fn frame(&mut self, copy: &Arc<FrameCopy>);
    /// Every [`TICK_NS`] or so, and as soon as the sink joined.
    fn tick(&mut self, tick: &Tick<'_>) -> Wants;
}

struct Entry {
    id: u64,
    sink: Box<dyn FrameSink>,
    /// It asked for checks or every frame at its last tick: it also gets the copies of
    /// the rewards and flags alone.
    every_frame: bool,
}

/// What the follower's thread and its handles share.
struct FollowerShared {
    location: Location,
    sinks: Mutex<Vec<Entry>>,
    /// A sink joined: tick it now.
    joined: AtomicBool,
    /// The segment was re-attached: the new mapping.
    retarget: Mutex<Option<Attached>>,
    /// Subscriptions leaving after a last look ([`Subscription::leave`]): their ids, and
    /// where to say it is done.
    leaving: Mutex<Vec<(u64, std::sync::mpsc::SyncSender<()>)>>,
    /// A subscription asked to leave after a last look.
    leave_asked: AtomicBool,
    stop: AtomicBool,
    next_id: AtomicU64,
}

/// The thread following one segment; it stops when the last subscription is dropped.
struct Follower {
    shared: Arc<FollowerShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        // Relaxed: a flag with no data behind it; the unpark wakes the thread to read it.
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            // Only waits for the thread's end: a panic in it was printed when it happened.
            let _ = t.join();
        }
    }
}

/// The followers of this process, by segment location.
static FOLLOWERS: Mutex<Vec<(Location, Weak<Follower>)>> = Mutex::new(Vec::new());

/// A sink's place at a follower: dropping it removes the sink (and stops the follower
/// when it was the last).
pub struct Subscription {
    follower: Arc<Follower>,
    id: u64,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("location", &self.follower.shared.location)
            .field("id", &self.id)
            .finish()
    }
}

impl Subscription {
    /// The follower's thread, while it runs (None once it ended, which only a panic does).
    pub fn thread_ended(&self) -> bool {
        self.follower
            .thread
            .as_ref()
            .is_none_or(|t| t.is_finished())
    }

    /// The segment was replaced and mapped again as `attached`: the follower follows it
    /// from now on, and its generation moves on by one (every sink sees it at its next
    /// tick, and the frames of the new segment carry it).
    pub fn retarget(&self, attached: Attached) {
        *lrbc::sync::lock(&self.follower.shared.retarget) = Some(attached);
        if let Some(t) = &self.follower.thread {
            t.thread().unpark();
        }
    }

    /// Leaves the follower after its last look at the segment: a frame published before
    /// this call reaches the sink (unless the engine already overwrote it), with the
    /// counts up to it, whatever the follower's budget on a busy machine; then the sink is
    /// dropped. Waits for the follower's thread at most [`LEAVE_WAIT`]. Dropping a
    /// subscription instead leaves at once: frames published since the follower's last
    /// look do not reach it.
    pub fn leave(self) {
        let shared = &self.follower.shared;
        let (done, finished) = std::sync::mpsc::sync_channel(1);
        lrbc::sync::lock(&shared.leaving).push((self.id, done));
        // Release: pairs with the follower's Acquire swap, after which it takes the
        // requests' lock (the request is pushed before this store).
        shared.leave_asked.store(true, Ordering::Release);
        if let Some(t) = &self.follower.thread {
            t.thread().unpark();
            if !t.is_finished() {
                // A follower that does not answer in time (or ended) leaves the sink to
                // this subscription's drop, at once.
                let _ = finished.recv_timeout(LEAVE_WAIT);
            }
        }
    }

    /// How many sinks the follower of this subscription serves.
    pub fn sinks(&self) -> usize {
        lrbc::sync::lock(&self.follower.shared.sinks).len()
    }

    /// Whether `other` is served by the same follower (thread) as this one.
    pub fn same_follower(&self, other: &Subscription) -> bool {
        Arc::ptr_eq(&self.follower, &other.follower)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        lrbc::sync::lock(&self.follower.shared.sinks).retain(|e| e.id != self.id);
    }
}

/// Adds `sink` to the follower of `attached`'s segment, starting one (on its own
/// mapping) when this process has none.
pub fn subscribe(attached: &Attached, sink: Box<dyn FrameSink>) -> std::io::Result<Subscription> {
    subscribe_with_load(attached, sink, crate::busy::read_cpu_times)
}

/// [`subscribe`], the machine's load read by `read_load` when a follower is started
/// (tests inject one).
pub fn subscribe_with_load(
    attached: &Attached,
    sink: Box<dyn FrameSink>,
    read_load: fn() -> Option<CpuTimes>,
) -> std::io::Result<Subscription> {
    join(attached, sink, read_load, None)
}

/// [`subscribe_with_load`], the copies stamped by `clock` when this subscription starts
/// the follower (a follower already running keeps the clock it was started with).
pub fn subscribe_with_clock(
    attached: &Attached,
    sink: Box<dyn FrameSink>,
    read_load: fn() -> Option<CpuTimes>,
    clock: Arc<dyn Clock>,
) -> std::io::Result<Subscription> {
    join(attached, sink, read_load, Some(clock))
}

/// Adds `sink` to the follower of `attached`'s segment, starting one with `read_load` and
/// `clock` (None: the copies are stamped with the monotonic time of the look) when this
/// process has none.
fn join(
    attached: &Attached,
    sink: Box<dyn FrameSink>,
    read_load: fn() -> Option<CpuTimes>,
    clock: Option<Arc<dyn Clock>>,
) -> std::io::Result<Subscription> {
    let mut followers = lrbc::sync::lock(&FOLLOWERS);
    followers.retain(|(_, w)| w.strong_count() > 0);
    let location = attached.segment.location();
    let existing = followers
        .iter()
        .find(|(l, _)| l == location)
        .and_then(|(_, w)| w.upgrade())
        .filter(|f| f.thread.as_ref().is_some_and(|t| !t.is_finished()));
    let follower = match existing {
        Some(f) => f,
        None => {
            let f = Arc::new(start(attached, read_load, clock)?);
            followers.retain(|(l, _)| l != location);
            followers.push((location.clone(), Arc::downgrade(&f)));
            f
        }
    };
    let shared = &follower.shared;
    // Relaxed: an id counter with no data behind it.
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    lrbc::sync::lock(&shared.sinks).push(Entry {
        id,
        sink,
        every_frame: false,
    });
    // Relaxed: the sink list is published by its mutex; this only asks for a tick.
    shared.joined.store(true, Ordering::Relaxed);
    if let Some(t) = &follower.thread {
        t.thread().unpark();
    }
    Ok(Subscription { follower, id })
}

/// A request to start a thread, with where to send its handle.
type Launch = (
    Box<dyn FnOnce() -> std::io::Result<std::thread::JoinHandle<()>> + Send>,
    std::sync::mpsc::SyncSender<std::io::Result<std::thread::JoinHandle<()>>>,
);

/// A follower that could not be started (its thread), as one line.
#[derive(Debug, thiserror::Error)]
#[error("cannot follow the segment: {0}")]
pub struct FollowError(#[from] pub std::io::Error);

/// The thread that starts followers, once [`keep_priority_for_followers`] made it.
static LAUNCHER: std::sync::OnceLock<Mutex<std::sync::mpsc::SyncSender<Launch>>> =
    std::sync::OnceLock::new();

/// Followers started from now on keep the calling thread's priority, whatever priority it
/// takes later: a thread's priority passes to the threads it starts, and an unprivileged
/// process cannot raise it back. The window calls this before it lowers its own.
pub fn keep_priority_for_followers() {
    LAUNCHER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Launch>(4);
        let spawned = std::thread::Builder::new()
            .name("lrbc-follow-start".into())
            .spawn(move || {
                while let Ok((launch, reply)) = rx.recv() {
                    // The caller is gone: the follower started for it ends with its dropped
                    // handle.
                    let _ = reply.send(launch());
                }
            });
        if let Err(e) = spawned {
            eprintln!("warning: followers start at the window's priority: {e}");
        }
        Mutex::new(tx)
    });
}

/// Starts `f` on a thread named `name`: from the launcher if there is one.
fn spawn(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let builder = std::thread::Builder::new().name(name.into());
    let Some(launcher) = LAUNCHER.get() else {
        return builder.spawn(f);
    };
    let (reply, handle) = std::sync::mpsc::sync_channel(1);
    let launch: Launch = (Box::new(move || builder.spawn(f)), reply);
    let sent = lrbc::sync::lock(launcher).send(launch);
    match sent {
        Ok(()) => handle
            .recv()
            .map_err(|_| std::io::Error::other("the follower launcher stopped"))?,
        Err(std::sync::mpsc::SendError((launch, _))) => launch(),
    }
}

fn start(
    attached: &Attached,
    read_load: fn() -> Option<CpuTimes>,
    clock: Option<Arc<dyn Clock>>,
) -> std::io::Result<Follower> {
    let mapped = attached
        .reopen()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let shared = Arc::new(FollowerShared {
        location: attached.segment.location().clone(),
        sinks: Mutex::new(Vec::new()),
        joined: AtomicBool::new(false),
        retarget: Mutex::new(None),
        leaving: Mutex::new(Vec::new()),
        leave_asked: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        next_id: AtomicU64::new(0),
    });
    let worker = worker::FollowerThread::new(mapped, Arc::clone(&shared), read_load, clock);
    let thread = spawn("lrbc-follower", move || worker.run())?;
    Ok(Follower {
        shared,
        thread: Some(thread),
    })
}

#[cfg(test)]
mod tests;
