//! The spotter thread: a second pair of eyes on `frame_seq`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::accounting::frames_ahead;
use super::copy::{copy_frame, reopen_if_reattached};
use super::data::{SamplerData, SamplerSettings};
use super::pace::{FramePace, SPOTTER_QUIET_NAP_NS};
use super::{SAMPLER_NICE, lock};
use crate::attach::Attached;
use crate::snapshot::HotData;

/// A consistent copy the spotter took of a frame the frame thread had not taken.
#[derive(Debug)]
pub(super) struct SpotCopy {
    pub generation: u64,
    pub frame_seq: u64,
    pub t_ns: u64,
    pub latency: Option<u64>,
    pub watched: Vec<u32>,
    pub hot: HotData,
    pub watched_buf: Vec<f32>,
}

/// Shared by the frame thread and the spotter.
#[derive(Debug, Default)]
pub(super) struct Handover {
    /// The newest frame the frame thread has taken.
    pub taken: AtomicU64,
    /// The frame thread is yielding to a busy machine: the spotter rests too.
    pub yielding: AtomicBool,
    pub copies: Mutex<VecDeque<SpotCopy>>,
}

/// Copies handed over but not yet taken, at most (the oldest go first).
const SPOT_QUEUE: usize = 16;

/// A second pair of eyes on `frame_seq`. On this kind of machine a thread's nap of a
/// hundred microseconds now and then lasts milliseconds; when the frame thread has not
/// taken a frame some time after it appeared, the spotter copies it and hands it over,
/// so that one thread's late wakeup does not lose the frame.
pub(super) struct Spotter {
    pub attached: Attached,
    pub start_frame: u64,
    pub generation: u64,
    pub handover: Arc<Handover>,
    pub data: Arc<Mutex<SamplerData>>,
    pub settings: Arc<Mutex<SamplerSettings>>,
    pub stop: Arc<AtomicBool>,
}

impl Spotter {
    pub(super) fn run(mut self) {
        crate::platform::set_timer_slack_ns(1_000);
        crate::platform::lower_thread_priority(SAMPLER_NICE);
        // Never on the frame thread's cores: a stall of one core must not blind both.
        if let Some(cores) = crate::platform::CoreSet::of_this_thread() {
            cores.keep_to(Some(1));
        }
        let mut watched_envs = lock(&self.settings).watched_envs.clone();
        let mut housekeeping_ns = 0u64;
        let seg_frame = |a: &Attached| a.segment.load_u64(a.geometry.counters.frame_seq);
        // From the frame at attach, as the frame thread, however late this thread starts.
        let mut last = self.start_frame;
        let mut tried = last;
        let mut pace = FramePace::new(crate::segment::monotonic_now_ns());
        // Relaxed: a flag with no data behind it.
        while !self.stop.load(Ordering::Relaxed) {
            let now = crate::segment::monotonic_now_ns();
            if now.saturating_sub(housekeeping_ns) >= 5_000_000 {
                housekeeping_ns = now;
                if let Ok(s) = self.settings.try_lock() {
                    watched_envs.clone_from(&s.watched_envs);
                }
                if reopen_if_reattached(&self.data, &mut self.attached, &mut self.generation) {
                    last = seg_frame(&self.attached).unwrap_or(0);
                    tried = last;
                }
            }
            // Relaxed: a flag with no data behind it.
            if self.handover.yielding.load(Ordering::Relaxed) {
                // Rests without waking the busy machine; the frame thread unparks it when
                // the yielding ends (the timeout is for the housekeeping above).
                std::thread::park_timeout(Duration::from_millis(250));
                continue;
            }
            let f = seg_frame(&self.attached).unwrap_or(0);
            // The first frame after a pause: the frame thread naps long, take it now.
            let after_pause = f != last && pace.quiet(now);
            if f != last {
                pace.saw(now, f.wrapping_sub(last));
                last = f;
            }
            // Relaxed: a hint, with no data behind it.
            let taken = self.handover.taken.load(Ordering::Relaxed);
            // A frame the frame thread has not taken an eighth of an interval after it
            // appeared: it is late, copy the frame for it.
            if f != tried
                && frames_ahead(f, taken).is_some()
                && (after_pause || pace.since_new_ns(now) >= pace.eighth_ns())
            {
                let mut hot = HotData::default();
                let mut watched_buf = Vec::new();
                let t = copy_frame(&self.attached, &watched_envs, &mut hot, &mut watched_buf);
                // Relaxed: as above.
                let taken = self.handover.taken.load(Ordering::Relaxed);
                if t.consistent && frames_ahead(t.frame_seq, taken).is_some() {
                    let mut q = lock(&self.handover.copies);
                    if q.len() >= SPOT_QUEUE {
                        q.pop_front();
                    }
                    q.push_back(SpotCopy {
                        generation: self.generation,
                        frame_seq: t.frame_seq,
                        t_ns: now,
                        latency: t.latency,
                        watched: t.watched,
                        hot,
                        watched_buf,
                    });
                }
                // One try per frame.
                tried = f;
            }
            std::thread::sleep(pace.nap(now, SPOTTER_QUIET_NAP_NS));
        }
    }
}
