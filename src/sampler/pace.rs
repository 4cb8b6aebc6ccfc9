//! How often the polling threads look at `frame_seq`.

use std::time::Duration;

/// The shortest and longest nap of the frame thread while frames come: an eighth of
/// the measured frame interval within these bounds, so that a frame is caught early in
/// the time it stays stable without waking dozens of times per frame.
const SAMPLER_NAP_MIN_NS: u64 = 20_000;
const SAMPLER_NAP_MAX_NS: u64 = 200_000;
/// The nap once no frame has come for this long (a paused or stopped run).
const SAMPLER_QUIET_NS: u64 = 500_000_000;
pub(super) const SAMPLER_QUIET_NAP_NS: u64 = 2_000_000;
/// The spotter's nap while quiet: the first frame after a pause (a run that starts, or
/// resumes) is stable for as little as a quarter of a millisecond, and the frame thread
/// naps 2 ms; the spotter copies it as soon as it sees it.
pub(super) const SPOTTER_QUIET_NAP_NS: u64 = 200_000;

/// The pace of frames as one polling thread sees it: the frame interval, smoothed, and
/// when a new frame was last seen; its naps follow from them.
pub(super) struct FramePace {
    interval_ns: u64,
    last_new_ns: u64,
}

impl FramePace {
    pub(super) fn new(now: u64) -> Self {
        Self {
            interval_ns: 1_000_000,
            last_new_ns: now,
        }
    }

    /// `delta` new frames were seen at `now`.
    pub(super) fn saw(&mut self, now: u64, delta: u64) {
        let per_frame = now.saturating_sub(self.last_new_ns) / delta.clamp(1, 1 << 20);
        self.interval_ns = (self.interval_ns * 7 + per_frame.min(SAMPLER_QUIET_NS)) / 8;
        self.last_new_ns = now;
    }

    /// An eighth of the frame interval, within bounds: a frame is caught early in the
    /// time it stays stable without waking dozens of times per frame.
    pub(super) fn eighth_ns(&self) -> u64 {
        (self.interval_ns / 8).clamp(SAMPLER_NAP_MIN_NS, SAMPLER_NAP_MAX_NS)
    }

    /// The next nap: an eighth of the interval, or `quiet_nap_ns` once it has been quiet.
    pub(super) fn nap(&self, now: u64, quiet_nap_ns: u64) -> Duration {
        Duration::from_nanos(if self.quiet(now) {
            quiet_nap_ns
        } else {
            self.eighth_ns()
        })
    }

    /// No new frame for a while (a paused or stopped run).
    pub(super) fn quiet(&self, now: u64) -> bool {
        self.since_new_ns(now) > SAMPLER_QUIET_NS
    }

    pub(super) fn since_new_ns(&self, now: u64) -> u64 {
        now.saturating_sub(self.last_new_ns)
    }
}
