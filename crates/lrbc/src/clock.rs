//! The clocks, injected so that time-dependent logic (stale detection, rates, timeouts) is
//! tested without sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Nanoseconds of `CLOCK_MONOTONIC` (on Windows, the performance counter): the clock
/// of the spec's `*_time_ns` words and of every time this program measures.
pub use lrbc_platform::monotonic_now_ns;

/// A monotonic nanosecond clock.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ns(&self) -> u64;
}

/// A shared clock is a clock: one [`ManualClock`] (or any other) handed to several
/// threads as `Arc<dyn Clock>`.
impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

/// `CLOCK_MONOTONIC`, the clock of the spec's `*_time_ns` words.
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        monotonic_now_ns()
    }
}

/// A clock that moves only when told to.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    pub fn new(start_ns: u64) -> Self {
        Self(Arc::new(AtomicU64::new(start_ns)))
    }

    pub fn advance_ns(&self, delta_ns: u64) {
        // Relaxed: a test clock; no other data is published through it.
        self.0.fetch_add(delta_ns, Ordering::Relaxed);
    }

    pub fn advance_secs(&self, secs: f64) {
        self.advance_ns((secs * 1e9) as u64);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        // Relaxed: see `advance_ns`.
        self.0.load(Ordering::Relaxed)
    }
}

/// Seconds between two clock readings.
pub fn secs_between(earlier_ns: u64, later_ns: u64) -> f64 {
    later_ns.saturating_sub(earlier_ns) as f64 / 1e9
}
