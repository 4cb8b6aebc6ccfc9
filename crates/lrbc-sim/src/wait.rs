//! Waiting for the other side on a 2-core machine: spin briefly (lowest latency), then
//! yield the core, then nap, so that engine, client and inspector all stay responsive.
//! How long it yields adapts to how long waits usually last: a partner that answers
//! within a few hundred microseconds (an unpaced trainer) is waited for by yielding,
//! one that answers after a millisecond (a paced trainer) by napping, so busy waiting
//! never takes a core that the inspector's sampler needs.

use std::time::{Duration, Instant};

/// Spin iterations before yielding (a few microseconds).
const SPINS: u32 = 1_000;
/// The least and the most time spent yielding before napping.
const YIELD_MIN: Duration = Duration::from_micros(30);
const YIELD_MAX: Duration = Duration::from_micros(1_000);

/// Naps grow the longer nothing happens (the timer slack is lowered so that short ones
/// stay short): 20 µs for the first half millisecond, 100 µs up to 5 ms, then 1 ms.
fn nap_for(waited: Duration) -> Duration {
    if waited < Duration::from_micros(500) {
        Duration::from_micros(20)
    } else if waited < Duration::from_millis(5) {
        Duration::from_micros(100)
    } else {
        Duration::from_millis(1)
    }
}

/// Back-off state for repeated waits.
#[derive(Debug)]
pub struct Waiter {
    spins: u32,
    started: Option<Instant>,
    /// Typical length of a wait (exponential average), in microseconds.
    typical_us: f64,
}

impl Default for Waiter {
    fn default() -> Self {
        Self::new()
    }
}

impl Waiter {
    pub fn new() -> Self {
        // Naps of tens of microseconds must stay that short.
        lrbc_platform::set_timer_slack_ns(1_000);
        Self {
            spins: 0,
            started: None,
            typical_us: 0.0,
        }
    }

    /// Starts over: the awaited thing happened.
    pub fn reset(&mut self) {
        if let Some(s) = self.started.take() {
            let us = s.elapsed().as_secs_f64() * 1e6;
            self.typical_us = 0.8 * self.typical_us + 0.2 * us;
        }
        self.spins = 0;
    }

    pub fn spins(&self) -> u32 {
        self.spins
    }

    /// How long to yield before napping: twice the typical wait when waits are short,
    /// the minimum when they are long.
    fn yield_window(&self) -> Duration {
        let typical = Duration::from_secs_f64(self.typical_us * 2.0 / 1e6);
        if typical <= YIELD_MAX {
            typical.max(YIELD_MIN)
        } else {
            YIELD_MIN
        }
    }

    /// Waits a little: a spin, a yield or a nap depending on how long it has been.
    pub fn wait(&mut self) {
        let started = *self.started.get_or_insert_with(Instant::now);
        self.spins = self.spins.saturating_add(1);
        if self.spins < SPINS {
            std::hint::spin_loop();
            return;
        }
        let waited = started.elapsed();
        if waited < self.yield_window() {
            std::thread::yield_now();
        } else {
            std::thread::sleep(nap_for(waited));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_waits_earn_a_longer_yield_window_and_long_ones_a_short_one() {
        let mut w = Waiter::new();
        assert_eq!(w.yield_window(), YIELD_MIN);
        w.typical_us = 100.0;
        assert_eq!(w.yield_window(), Duration::from_micros(200));
        w.typical_us = 1000.0;
        assert_eq!(w.yield_window(), YIELD_MIN);
        assert_eq!(nap_for(Duration::from_millis(10)), Duration::from_millis(1));
    }
}
