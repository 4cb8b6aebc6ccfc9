//! A second pair of eyes on `frame_seq` for the recorder. On this kind of machine a
//! thread's nap of a hundred microseconds now and then lasts milliseconds; when the
//! capture has not taken a frame a little while after it appeared, the spotter (on the
//! other half of the cores) copies it and hands the copy over, so that one thread's late
//! wakeup does not lose the frame. The window's sampler does the same for its frames.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::lock;
use crate::attach::Attached;
use crate::segment::monotonic_now_ns;
use crate::snapshot::{self, HotData};

/// How long after a frame appears the spotter copies it when the capture has not.
const LATE_NS: u64 = 100_000;
/// The spotter's nap between looks.
const NAP_NS: u64 = 50_000;
/// Copies handed over and not yet taken, at most (the oldest go first).
const QUEUE: usize = 16;

/// When and which frame a copy is of.
#[derive(Clone, Copy, Debug)]
pub(super) struct FrameStamp {
    pub frame_seq: u64,
    pub action_seq: u64,
    pub frame_time_ns: u64,
    pub sampled_ns: u64,
}

/// A guarded copy of the newest frame's hot data and `envs`' rows into `hot` and `rows`
/// (the capture's and the spotter's): whether it is consistent, and its stamp.
pub(super) fn copy_frame(
    a: &Attached,
    envs: &[u32],
    hot: &mut HotData,
    rows: &mut Vec<f32>,
) -> (bool, FrameStamp) {
    let (seg, g) = (&a.segment, &a.geometry);
    let copy = snapshot::guarded_read(seg, g, 3, |s| {
        snapshot::copy_hot_into(s, g, hot);
        snapshot::copy_rows_into(s, g, envs, rows);
    });
    let stamp = FrameStamp {
        frame_seq: copy.frame_seq,
        action_seq: copy.action_seq,
        frame_time_ns: g
            .counters
            .ext
            .and_then(|e| seg.load_u64(e.frame_time_ns))
            .unwrap_or(0),
        sampled_ns: monotonic_now_ns(),
    };
    (copy.consistent, stamp)
}

/// A consistent copy of a frame the capture had not taken.
#[derive(Debug)]
pub(super) struct SpotCopy {
    pub stamp: FrameStamp,
    pub hot: HotData,
    pub rows: Vec<f32>,
}

/// Shared by the capture and the spotter.
#[derive(Debug, Default)]
struct Handover {
    /// The newest frame the capture has taken.
    taken: AtomicU64,
    /// The capture holds off on a busy machine: the spotter rests too.
    resting: AtomicBool,
    /// The spotter is copying a frame (it will be handed over, or found torn).
    copying: AtomicBool,
    stop: AtomicBool,
    copies: Mutex<VecDeque<SpotCopy>>,
}

/// The spotter thread, stopped when dropped.
#[derive(Debug)]
pub(super) struct Spotter {
    handover: Arc<Handover>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Spotter {
    /// Starts a spotter on its own mapping of `attached`, copying `envs`' rows, for the
    /// frames after `taken`.
    pub fn start(attached: &Attached, envs: Vec<u32>, taken: u64) -> std::io::Result<Self> {
        let mapped = attached.reopen().map_err(std::io::Error::other)?;
        let handover = Arc::new(Handover {
            taken: AtomicU64::new(taken),
            ..Handover::default()
        });
        let h = Arc::clone(&handover);
        let thread = std::thread::Builder::new()
            .name("lrbc-record-spot".into())
            .spawn(move || run(&mapped, &envs, &h))?;
        Ok(Self {
            handover,
            thread: Some(thread),
        })
    }

    /// The capture took frame `f`.
    pub fn taken(&self, f: u64) {
        // Relaxed: a hint for the spotter, with no data behind it (a stale value costs
        // at most a copy that is then dropped).
        self.handover.taken.store(f, Ordering::Relaxed);
    }

    /// The copies handed over since the last call, oldest first. With `wait`, a copy
    /// under way is waited for first (at most a millisecond): the caller is about to
    /// take a newer frame, and the one being copied would otherwise be missed.
    pub fn take(&self, wait: bool) -> Vec<SpotCopy> {
        if wait {
            let deadline = monotonic_now_ns() + 1_000_000;
            // Acquire: pairs with the Release store that ends a copy, after its push.
            while self.handover.copying.load(Ordering::Acquire) && monotonic_now_ns() < deadline {
                std::thread::yield_now();
            }
        }
        lock(&self.handover.copies).drain(..).collect()
    }

    /// Copies waiting to be taken.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        lock(&self.handover.copies).len()
    }

    /// Rests while the capture holds off on a busy machine (no wakeups of its own).
    pub fn rest(&self, resting: bool) {
        // Relaxed: a flag with no data behind it; the unpark wakes the thread to read it.
        let was = self.handover.resting.swap(resting, Ordering::Relaxed);
        if was
            && !resting
            && let Some(t) = &self.thread
        {
            t.thread().unpark();
        }
    }
}

impl Drop for Spotter {
    fn drop(&mut self) {
        // Relaxed: a flag with no data behind it; the join waits for the thread.
        self.handover.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

fn run(a: &Attached, envs: &[u32], h: &Handover) {
    crate::platform::set_timer_slack_ns(1_000);
    crate::platform::lower_thread_priority(19);
    // Never on the capture's cores: a stall of one core must not blind both.
    if let Some(cores) = crate::platform::CoreSet::of_this_thread() {
        cores.keep_to(Some(1));
    }
    let (seg, g) = (&a.segment, &a.geometry);
    let mut last = 0u64;
    let mut seen_at = monotonic_now_ns();
    let mut tried = 0u64;
    // Relaxed: flags with no data behind them.
    while !h.stop.load(Ordering::Relaxed) {
        if h.resting.load(Ordering::Relaxed) {
            std::thread::park_timeout(Duration::from_millis(250));
            continue;
        }
        let now = monotonic_now_ns();
        let f = seg.load_u64(g.counters.frame_seq).unwrap_or(0);
        if f != last {
            last = f;
            seen_at = now;
        }
        // Relaxed: a hint, with no data behind it.
        let late = |f: u64| f > h.taken.load(Ordering::Relaxed);
        if f != tried && late(f) && now.saturating_sub(seen_at) >= LATE_NS {
            tried = f;
            // Relaxed: the Release store below, after the push, ends the copy.
            h.copying.store(true, Ordering::Relaxed);
            let (mut hot, mut rows) = (HotData::default(), Vec::new());
            let (consistent, stamp) = copy_frame(a, envs, &mut hot, &mut rows);
            if consistent && late(stamp.frame_seq) {
                let mut q = lock(&h.copies);
                if q.len() >= QUEUE {
                    q.pop_front();
                }
                q.push_back(SpotCopy { stamp, hot, rows });
            }
            // Release: pairs with the Acquire load in `Spotter::take`, so that a copy
            // pushed is seen once the flag is down.
            h.copying.store(false, Ordering::Release);
        }
        std::thread::sleep(Duration::from_nanos(NAP_NS));
    }
}
