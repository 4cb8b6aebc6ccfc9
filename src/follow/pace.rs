//! When the follower looks at `frame_seq` next. A pure function of what it has seen, so
//! that the tests give it times instead of sleeping.
//!
//! Frames come at an interval the follower measures; a frame stays readable until the
//! engine starts the next one, almost the whole interval when the run is paced. So the
//! follower sleeps until just after the next frame is due and looks once; only when the
//! frame is late does it look again, at short steps. A paced run costs about one
//! wakeup per frame, instead of the fixed short naps of a poller.

/// The first guess of the frame interval, before two frames were seen.
const FIRST_INTERVAL_NS: u64 = 1_000_000;
/// No frame for this long: the run is paused or stopped.
const QUIET_NS: u64 = 500_000_000;
/// The look interval while quiet: the first frame after a pause is caught within it.
pub const QUIET_LOOK_NS: u64 = 1_000_000;
/// How long after the due time the first look is (the engine's own jitter).
const AFTER_DUE_MIN_NS: u64 = 10_000;
const AFTER_DUE_MAX_NS: u64 = 50_000;
/// The steps between looks while a frame is late: a sixteenth of the interval within
/// these bounds.
const LATE_STEP_MIN_NS: u64 = 20_000;
const LATE_STEP_MAX_NS: u64 = 250_000;

/// The pace of frames as the follower sees it.
#[derive(Clone, Debug)]
pub struct Pace {
    /// The frame interval, smoothed.
    interval_ns: u64,
    /// When the newest frame was published (the engine's `frame_time_ns` when it is on
    /// this clock, else when the follower saw it).
    published_ns: u64,
    /// When the follower last saw a new frame.
    seen_ns: u64,
    /// At least two frames were seen: the interval is measured, not guessed.
    measured: bool,
    /// The last frame came well off the interval (a stall, or a run catching up on
    /// frames it owes): the next ones may come at any time, so look often until one
    /// comes on time again.
    irregular: bool,
    /// How long after the engine's stamp a frame is seen, at the least of late: the
    /// engine stamps a frame when it starts the step and publishes it when the step is
    /// written, and the first look goes that much after the due time.
    lag_ns: u64,
    /// The last look that found no new frame since the newest one was seen: the next
    /// frame was published after it.
    empty_look_ns: Option<u64>,
}

impl Pace {
    pub fn new(now_ns: u64) -> Self {
        Self {
            interval_ns: FIRST_INTERVAL_NS,
            published_ns: now_ns,
            seen_ns: now_ns,
            measured: false,
            irregular: false,
            lag_ns: 0,
            empty_look_ns: None,
        }
    }

    /// A look at `now_ns` found no new frame.
    pub fn nothing_new(&mut self, now_ns: u64) {
        self.empty_look_ns = Some(now_ns);
    }

    /// The measured frame interval.
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// `delta` new frames were seen at `now_ns`; the newest was published at
    /// `frame_time_ns` by the engine's clock (0: unknown).
    pub fn saw(&mut self, now_ns: u64, frame_time_ns: u64, delta: u64) {
        // The engine's stamp is on this clock (CLOCK_MONOTONIC, spec 2.1) when it is not
        // in the future and not older than the interval allows; else the time seen.
        let stamped = frame_time_ns != 0
            && frame_time_ns <= now_ns
            && now_ns - frame_time_ns < QUIET_NS
            && frame_time_ns >= self.published_ns;
        let published = if stamped { frame_time_ns } else { now_ns };
        if stamped && delta == 1 && self.measured && !self.irregular {
            // When was it published? Seen at the first look for it, on time or woken
            // late, it was there no later than now: the next first look probes a little
            // earlier, by a sixteenth of a step (a late wake-up says nothing of the
            // engine, and must not push the looks later). Seen after a look that found
            // nothing, it was published between that look and now: the first look goes
            // to the middle of that, at once. So the first look follows the slower steps
            // of the engine, and catches most frames at once.
            let i = self.interval_ns;
            let step = (i / 16).clamp(LATE_STEP_MIN_NS, LATE_STEP_MAX_NS);
            self.lag_ns = match self.empty_look_ns.filter(|&e| e >= frame_time_ns) {
                Some(e) => (e - frame_time_ns + now_ns.saturating_sub(e) / 2).min(i / 2),
                None => self.lag_ns.saturating_sub(step / 16),
            };
        } else if !stamped {
            self.lag_ns = 0;
        }
        self.empty_look_ns = None;
        let quiet = self.quiet(now_ns);
        let per_frame = published.saturating_sub(self.published_ns) / delta.clamp(1, 1 << 20);
        if !quiet && per_frame > 0 {
            if self.measured {
                // One stall or one burst does not make a new pace: the interval moves by
                // at most a quarter of itself per frame, and while it is off the frames
                // are looked for often.
                let (low, high) = (self.interval_ns * 3 / 4, self.interval_ns * 5 / 4);
                self.irregular = !(low..=high).contains(&per_frame);
                self.interval_ns = (self.interval_ns * 3 + per_frame.clamp(low, high)) / 4;
            } else {
                self.interval_ns = per_frame;
            }
            self.measured = true;
        }
        self.published_ns = published;
        self.seen_ns = now_ns;
    }

    /// When the first look for the next frame goes: when it is due, and the engine's lag
    /// from its stamp to publishing it, and a margin for its jitter.
    fn first_look_ns(&self) -> u64 {
        let i = self.interval_ns;
        self.published_ns.saturating_add(i)
            + self.lag_ns
            + (i / 32).clamp(AFTER_DUE_MIN_NS, AFTER_DUE_MAX_NS)
    }

    /// No new frame for a while (a paused or stopped run).
    pub fn quiet(&self, now_ns: u64) -> bool {
        now_ns.saturating_sub(self.seen_ns) > QUIET_NS
    }

    /// When to look next, having looked at `now_ns` and seen nothing new (or just taken
    /// a frame): just after the next frame is due; while it is late, a short step; while
    /// the run is quiet, [`QUIET_LOOK_NS`].
    pub fn next_look_ns(&self, now_ns: u64) -> u64 {
        if self.quiet(now_ns) {
            return now_ns + QUIET_LOOK_NS;
        }
        let i = self.interval_ns;
        let step = (i / 16).clamp(LATE_STEP_MIN_NS, LATE_STEP_MAX_NS);
        if self.irregular {
            return now_ns + step;
        }
        let first = self.first_look_ns();
        if first > now_ns { first } else { now_ns + step }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_paced_run_is_looked_at_once_just_after_each_frame_is_due() {
        let mut p = Pace::new(0);
        // Frames every millisecond, published as stamped by the engine.
        let looks: u32 = follow(&mut p, 1..=100, 0).iter().sum();
        assert_eq!(p.interval_ns(), MS);
        // After the first frames, one look per frame.
        assert!(looks <= 100 + 20, "{looks} looks for 100 frames");
        let next = p.next_look_ns(100 * MS + 30_000);
        assert!(
            (101 * MS..101 * MS + 60_000).contains(&next),
            "the look after frame 100 is just after 101 ms, not {next}"
        );
    }

    #[test]
    fn a_late_frame_is_looked_for_in_short_steps() {
        let mut p = Pace::new(0);
        p.saw(MS, MS, 1);
        p.saw(2 * MS, 2 * MS, 1);
        let late = 3 * MS + 100_000;
        let next = p.next_look_ns(late);
        assert_eq!(next, late + MS / 16);
    }

    #[test]
    fn the_interval_follows_a_faster_engine_within_a_few_frames() {
        let mut p = Pace::new(0);
        // At 2 kHz, first seen only every other frame by the 1 ms guess.
        p.saw(MS, MS, 2);
        assert_eq!(p.interval_ns(), MS / 2);
        for k in 3..10 {
            p.saw(k * MS / 2, k * MS / 2, 1);
        }
        assert_eq!(p.interval_ns(), MS / 2);
    }

    #[test]
    fn after_a_stall_the_frames_that_catch_up_are_looked_for_often() {
        let mut p = Pace::new(0);
        for k in 1..=10 {
            p.saw(k * MS, k * MS, 1);
        }
        // A 3 ms stall: the interval barely moves, and the next look is a short step,
        // not a whole interval later (the run may catch up with frames in a burst).
        p.saw(13 * MS, 13 * MS, 1);
        assert!(p.interval_ns() <= MS * 5 / 4, "{}", p.interval_ns());
        let now = 13 * MS + 10_000;
        assert_eq!(p.next_look_ns(now), now + p.interval_ns() / 16);
        // The burst: two frames 200 µs apart, still looked for often.
        p.saw(13 * MS + 200_000, 13 * MS + 200_000, 1);
        assert_eq!(
            p.next_look_ns(13 * MS + 210_000),
            13 * MS + 210_000 + p.interval_ns() / 16
        );
        // Back on the pace: a frame on time, and the next look is at the next due time.
        for k in 14..=20 {
            p.saw(k * MS + 200_000, k * MS + 200_000, 1);
        }
        let next = p.next_look_ns(20 * MS + 230_000);
        assert!(next > 21 * MS, "{next}");
    }

    /// Looks as the follower does for frames stamped at `k` ms and published `delay`
    /// later; returns the looks each frame took.
    fn follow(p: &mut Pace, frames: std::ops::RangeInclusive<u64>, delay: u64) -> Vec<u32> {
        follow_published(p, frames, |k| k * MS + delay)
            .into_iter()
            .map(|(looks, _)| looks)
            .collect()
    }

    /// Looks as the follower does for frames stamped at `k` ms and published at
    /// `published(k)`; returns the looks each frame took, and how late after its
    /// publication it was seen.
    fn follow_published(
        p: &mut Pace,
        frames: std::ops::RangeInclusive<u64>,
        mut published: impl FnMut(u64) -> u64,
    ) -> Vec<(u32, u64)> {
        let mut now = *frames.start() * MS - MS;
        let mut out = Vec::new();
        for k in frames {
            let published = published(k);
            let mut n = 0;
            loop {
                let next = p.next_look_ns(now);
                assert!(next > now, "never a look in the past");
                now = next;
                n += 1;
                if now >= published {
                    break;
                }
                p.nothing_new(now);
            }
            out.push((n, now - published));
            p.saw(now, k * MS, 1);
        }
        out
    }

    #[test]
    fn an_engine_that_publishes_after_its_stamp_is_looked_at_when_it_publishes() {
        // Stamped at the step's start, published 300 µs later.
        let mut p = Pace::new(0);
        let looks = follow(&mut p, 1..=200, 300_000);
        let settled: u32 = looks[100..].iter().sum();
        assert!(
            settled <= 100 + 20,
            "{settled} looks for 100 frames: {looks:?}"
        );
        assert!(looks[100..].iter().all(|&n| n <= 3), "{looks:?}");
    }

    #[test]
    fn an_engine_whose_step_time_varies_costs_little_more_than_a_look_per_frame() {
        let mut p = Pace::new(0);
        // Published 250 to 350 µs after the stamp, in no order.
        let mut x = 12345u64;
        let seen = follow_published(&mut p, 1..=400, |k| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            k * MS + 250_000 + (x >> 33) % 100_000
        });
        // Seen within the spread of the step times, the margin and a step of when it
        // was published.
        for (k, &(_, late)) in seen.iter().enumerate().skip(19) {
            assert!(
                late < 200_000,
                "frame {} seen {} µs late",
                k + 1,
                late / 1000
            );
        }
        let looks: u32 = seen[200..].iter().map(|&(n, _)| n).sum();
        assert!(looks <= 200 * 3 / 2, "{looks} looks for 200 frames");
    }

    #[test]
    fn without_the_engines_stamp_the_time_seen_serves() {
        let mut p = Pace::new(0);
        for k in 1..=10 {
            p.saw(k * 4 * MS, 0, 1);
        }
        assert_eq!(p.interval_ns(), 4 * MS);
        // A stamp from another clock (in the future) is not believed.
        p.saw(44 * MS, u64::MAX / 2, 1);
        assert_eq!(p.interval_ns(), 4 * MS);
    }

    #[test]
    fn a_late_wake_up_does_not_push_the_next_first_look_later() {
        // Published 300 µs after the stamp; the follower settles on looking then.
        let mut p = Pace::new(0);
        follow(&mut p, 1..=100, 300_000);
        let settled = p.next_look_ns(100 * MS + 310_000);
        assert!(
            (101 * MS + 250_000..101 * MS + 400_000).contains(&settled),
            "{settled}"
        );
        // Frame 101 is seen at the first look, but the follower was woken 600 µs late.
        p.saw(101 * MS + 900_000, 101 * MS, 1);
        let next = p.next_look_ns(101 * MS + 910_000);
        assert!(
            next <= settled + MS,
            "the first look for frame 102 at {next}, later than {}",
            settled + MS
        );
    }

    #[test]
    fn a_frame_found_after_an_empty_look_sets_the_first_look_between_the_two() {
        let mut p = Pace::new(0);
        follow(&mut p, 1..=20, 0);
        // Frame 21 is not there at 21.05 ms, and is at 21.45 ms.
        p.nothing_new(21 * MS + 50_000);
        p.saw(21 * MS + 450_000, 21 * MS, 1);
        let next = p.next_look_ns(21 * MS + 460_000);
        assert!(
            (22 * MS + 250_000..=22 * MS + 300_000).contains(&next),
            "{next}"
        );
    }

    #[test]
    fn a_quiet_run_is_looked_at_every_millisecond_and_its_pause_is_not_an_interval() {
        let mut p = Pace::new(0);
        p.saw(MS, MS, 1);
        p.saw(2 * MS, 2 * MS, 1);
        let t = 2 * MS + QUIET_NS + 1;
        assert!(p.quiet(t));
        assert_eq!(p.next_look_ns(t), t + QUIET_LOOK_NS);
        // The first frame after the pause does not make the interval half a second.
        p.saw(t + 5 * MS, t + 5 * MS, 1);
        assert_eq!(p.interval_ns(), MS);
    }
}
