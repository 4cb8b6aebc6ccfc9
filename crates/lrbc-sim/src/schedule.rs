//! A paced trainer's schedule: a tick every period; behind it after a late step, it
//! catches up without a burst of frames that live only microseconds; back from a
//! policy update, it starts over rather than catching up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Waits for the next step's tick after `next_tick` and returns it.
pub(crate) fn wait_for_next_tick(
    next_tick: Instant,
    p: Duration,
    t0: Instant,
    arrived: Instant,
    stop: &AtomicBool,
) -> Instant {
    let next_tick = tick_after(next_tick, p, Instant::now());
    // Behind after a late step (a slow frame, a descheduled thread): catch up
    // over the next steps, never sending two actions less than half a period
    // apart, so the average rate stays at the pace without a burst of frames
    // that live only microseconds. And like a trainer whose policy takes time
    // on each observation, never answering a frame less than a quarter period
    // after it came: a frame answered at once is overwritten before anyone else
    // can read it.
    sleep_until(resume_at(next_tick, p, t0, arrived), stop);
    next_tick
}

/// The tick after `next_tick` at period `p`, at `now`: the next one on the schedule, or
/// `now` when far behind it (a stall), the schedule starting over rather than bursting.
fn tick_after(next_tick: Instant, p: Duration, now: Instant) -> Instant {
    let next_tick = next_tick + p;
    if now > next_tick && now - next_tick > p * 10 {
        now
    } else {
        next_tick
    }
}

/// When the next actions may go at `tick`: not less than half a period `p` after the
/// last actions went (`t0`), nor less than a quarter period after their frame came
/// (`arrived`).
pub(crate) fn resume_at(tick: Instant, p: Duration, t0: Instant, arrived: Instant) -> Instant {
    tick.max(t0 + p / 2).max(arrived + p / 4)
}

/// Waits until `deadline`: sleeps while far from it (timers here overshoot by a few
/// hundred microseconds), then yields until it, so paced steps stay evenly spaced.
/// Wakes early when stopped.
pub(crate) fn sleep_until(deadline: Instant, stop: &AtomicBool) {
    const SPIN_WINDOW: Duration = Duration::from_micros(120);
    loop {
        let now = Instant::now();
        // Relaxed: a flag with no data behind it.
        if now >= deadline || stop.load(Ordering::Relaxed) {
            return;
        }
        let left = deadline - now;
        if left > SPIN_WINDOW {
            std::thread::sleep((left - SPIN_WINDOW).min(Duration::from_millis(20)));
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_an_update_the_pace_starts_over_instead_of_catching_up() {
        let p = Duration::from_millis(5);
        let t0 = Instant::now();
        let arrived = t0 + Duration::from_millis(1);
        let next_tick = t0;
        // Back from an update of 6 periods: the schedule's next tick is long past, and
        // each tick after it would go at half a period (a burst of catching up).
        let back = arrived + 6 * p;
        assert!(tick_after(next_tick, p, back) < back);
        // Started over: the next actions go now, the ones after a period later.
        let resume = resume_at(back, p, t0, arrived);
        assert_eq!(resume, back);
        assert_eq!(tick_after(resume, p, resume + p / 10), resume + p);
        // An update of no time still leaves the frame a quarter period, the last
        // actions half a period.
        assert_eq!(resume_at(arrived, p, t0, arrived), t0 + p / 2);
        assert_eq!(resume_at(arrived, p, arrived, arrived), arrived + p / 2);
    }
}
