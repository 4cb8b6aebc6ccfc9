//! When the follower looks at `frame_seq` next. A pure function of what it has seen, so
//! that the tests give it times instead of sleeping.
//!
//! A frame stays readable from its publication until the engine starts the next one,
//! which is most of the interval when the run keeps its pace, and as little as a quarter
//! of it when a trainer catches up after a late step. So the follower sleeps until the
//! earliest the next frame is likely to be published (the shortest recent interval and
//! the lowest recent lag from the engine's stamp to publication) and then looks at short
//! steps until it comes. A paced run costs one or two wake-ups per frame, instead of the
//! fixed short naps of a poller.

/// The first guess of the frame interval, before two frames were seen.
const FIRST_INTERVAL_NS: u64 = 1_000_000;
/// No frame for this long: the run is paused or stopped.
const QUIET_NS: u64 = 500_000_000;
/// The look interval while quiet: the first frame after a pause is caught within it.
pub const QUIET_LOOK_NS: u64 = 1_000_000;
/// The look interval while quiet once the trainer has sent its actions (lock-step): the
/// frame they step comes within the engine's step, and the trainer may answer it within
/// a fraction of its period (a quarter of a millisecond at 1 kHz).
pub const ACTIONS_SENT_LOOK_NS: u64 = 50_000;
/// How long after the actions were seen a quiet run is looked at so often: an engine
/// that does not answer them is stalled, and is looked at as a quiet run.
const ACTIONS_SENT_FOR_NS: u64 = 20_000_000;
/// How long after the due time the first look is (the engine's own jitter).
const AFTER_DUE_MIN_NS: u64 = 10_000;
const AFTER_DUE_MAX_NS: u64 = 50_000;
/// The least lateness of a wake-up that excuses the frames missed meanwhile.
pub const LATE_WAKE_MIN_NS: u64 = 100_000;
/// A frame later than this many intervals after its time on the schedule starts a new
/// schedule (the run stalled or paused, it is not catching up).
const SCHEDULE_LATE_INTERVALS: u64 = 4;
/// Frames a run may take to catch up on its schedule after a late one.
const SCHEDULE_CATCH_UP_FRAMES: u32 = 3;
/// The intervals measured before the first look for a frame goes by the pace.
const SETTLED_AFTER: u32 = 8;
/// The steps between looks while a frame is late: an eighth of the interval within
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
    /// A frame was seen: `published_ns` is a frame's, not the moment of attach.
    anchored: bool,
    /// At least two frames were seen: the interval is measured, not guessed.
    measured: bool,
    /// Intervals measured since attach (up to [`SETTLED_AFTER`]): until then the run's
    /// first frames (a slow first step, and the frames a trainer sends to catch up on
    /// its schedule) are looked for at short steps.
    intervals: u32,
    /// The last frame came well after the interval (a stall): the frames the run owes
    /// may come at any time, so look often until one comes on time again.
    irregular: bool,
    /// How long after the engine's stamp a frame is published, a low estimate: the
    /// engine stamps a frame when it starts the step and publishes it when the step is
    /// written, and the first look goes that much after the earliest due time.
    lag_ns: u64,
    /// The last look that found no new frame since the newest one was seen: the next
    /// frame was published after it.
    empty_look_ns: Option<u64>,
    /// A low estimate of the interval: the shortest a frame may live is what decides
    /// when to look first. Falls at once to a shorter interval, rises slowly.
    short_ns: u64,
    /// Where the newest frame was due on the run's schedule: its stamp when it came on
    /// time, else the time it was due. A trainer that keeps a schedule sends the actions
    /// after a late frame sooner, to catch up: the next frame may come as early as the
    /// schedule, not an interval after the late one.
    scheduled_ns: u64,
    /// Frames in a row that came late on the schedule: a run that does not catch up
    /// within a few frames has a new schedule.
    late_frames: u32,
    /// When a look first found the trainer's actions sent and their frame not yet
    /// published (lock-step), since the newest frame.
    actions_sent_ns: Option<u64>,
}

impl Pace {
    pub fn new(now_ns: u64) -> Self {
        Self {
            interval_ns: FIRST_INTERVAL_NS,
            published_ns: now_ns,
            seen_ns: now_ns,
            anchored: false,
            measured: false,
            intervals: 0,
            irregular: false,
            lag_ns: 0,
            empty_look_ns: None,
            short_ns: FIRST_INTERVAL_NS,
            scheduled_ns: now_ns,
            late_frames: 0,
            actions_sent_ns: None,
        }
    }

    /// A look at `now_ns` found no new frame.
    pub fn nothing_new(&mut self, now_ns: u64) {
        self.empty_look_ns = Some(now_ns);
    }

    /// A look at `now_ns` found no new frame, but the trainer's actions for the next one
    /// sent (lock-step: `action_seq` ahead of `frame_seq`): the frame is on its way.
    pub fn actions_sent(&mut self, now_ns: u64) {
        self.nothing_new(now_ns);
        self.actions_sent_ns.get_or_insert(now_ns);
    }

    /// How much later than it asked the follower may be woken before the frames it then
    /// finds gone are the machine's loss, not the pace's: a quarter of the interval (the
    /// least a frame lives when a trainer catches up), and no less than
    /// [`LATE_WAKE_MIN_NS`].
    pub fn late_wake_ns(&self) -> u64 {
        (self.interval_ns / 4).max(LATE_WAKE_MIN_NS)
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
            && (!self.anchored || frame_time_ns >= self.published_ns);
        let published = if stamped { frame_time_ns } else { now_ns };
        if !self.anchored {
            // The first frame since attach: the time from attach to it is no interval.
            self.anchored = true;
            self.published_ns = published;
            self.scheduled_ns = published;
            self.seen_ns = now_ns;
            self.empty_look_ns = None;
            return;
        }
        if stamped && delta == 1 && self.measured && !self.irregular {
            // When was it published? Seen after a look that found nothing, it was
            // published between that look and now: the middle of the two is the sample.
            // Seen at the first look (on time or woken late), it was there no later than
            // now, which bounds the lag from above only. The lag kept is a low one: it
            // falls at once to a lower sample and rises by a sixteenth towards a higher
            // one, so the first look goes near the earliest the engine publishes, and a
            // slow step or a late wake-up does not push the looks later.
            let sample = match self.empty_look_ns.filter(|&e| e >= frame_time_ns) {
                Some(e) => Some(e - frame_time_ns + now_ns.saturating_sub(e) / 2),
                None => (now_ns - frame_time_ns < self.lag_ns).then_some(now_ns - frame_time_ns),
            };
            if let Some(x) = sample.map(|x| x.min(self.interval_ns / 2)) {
                self.lag_ns = if x < self.lag_ns {
                    x
                } else {
                    self.lag_ns + (x - self.lag_ns) / 16
                };
            }
        } else if !stamped {
            self.lag_ns = 0;
        }
        self.empty_look_ns = None;
        self.actions_sent_ns = None;
        let quiet = self.quiet(now_ns);
        let per_frame = published.saturating_sub(self.published_ns) / delta.clamp(1, 1 << 20);
        // On the schedule: due an interval (per frame) after the frame before. A frame on
        // time (within a sixteenth) or early sets it anew, and so does one very late (a
        // stall, a pause) or the last of a few late in a row (a run that does not catch
        // up).
        let due = self
            .scheduled_ns
            .saturating_add(self.interval_ns.saturating_mul(delta.clamp(1, 1 << 20)));
        let late = published.saturating_sub(due);
        let catching_up = self.measured
            && !quiet
            && late > self.interval_ns / 16
            && late < SCHEDULE_LATE_INTERVALS * self.interval_ns
            && self.late_frames < SCHEDULE_CATCH_UP_FRAMES;
        (self.scheduled_ns, self.late_frames) = if catching_up {
            (due, self.late_frames + 1)
        } else {
            (published, 0)
        };
        if !quiet && per_frame > 0 {
            if self.measured {
                // One stall or one burst does not make a new pace: the interval moves by
                // at most a quarter of itself per frame. After a stall the frames owed may
                // come at any time: they are looked for at short steps until one comes
                // on time. A short interval lowers the first look at once.
                let (low, high) = (self.interval_ns * 3 / 4, self.interval_ns * 5 / 4);
                self.irregular = per_frame > high;
                self.interval_ns = (self.interval_ns * 3 + per_frame.clamp(low, high)) / 4;
                self.short_ns = if per_frame < self.short_ns {
                    per_frame.max(self.interval_ns / 4)
                } else {
                    self.short_ns + (per_frame - self.short_ns) / 8
                };
            } else {
                self.interval_ns = per_frame;
                self.short_ns = per_frame;
            }
            self.short_ns = self.short_ns.min(self.interval_ns);
            self.measured = true;
            self.intervals = (self.intervals + 1).min(SETTLED_AFTER);
        }
        self.published_ns = published;
        self.seen_ns = now_ns;
    }

    /// When the first look for the next frame goes: the earliest it is likely to be due
    /// (the short interval), the engine's lag from its stamp to publishing it, and a
    /// margin for its jitter.
    fn first_look_ns(&self) -> u64 {
        let i = self.interval_ns;
        let due = self
            .scheduled_ns
            .saturating_add(self.short_ns)
            .max(self.published_ns.saturating_add(i / 4));
        due + self.lag_ns + (i / 32).clamp(AFTER_DUE_MIN_NS, AFTER_DUE_MAX_NS)
    }

    /// No new frame for a while (a paused or stopped run).
    pub fn quiet(&self, now_ns: u64) -> bool {
        now_ns.saturating_sub(self.seen_ns) > QUIET_NS
    }

    /// When to look next, having looked at `now_ns` and seen nothing new (or just taken
    /// a frame): the first look for the next frame; from then on, after a stall, or
    /// while the pace is not yet known, a short step; while the run is quiet, [`QUIET_LOOK_NS`], or [`ACTIONS_SENT_LOOK_NS`]
    /// once the trainer has sent the actions of the next frame (a trainer back from a
    /// long policy update: the first frame of its rollout may live a fraction of a
    /// millisecond).
    pub fn next_look_ns(&self, now_ns: u64) -> u64 {
        if self.quiet(now_ns) {
            let stepping = self
                .actions_sent_ns
                .is_some_and(|t| now_ns.saturating_sub(t) < ACTIONS_SENT_FOR_NS);
            return now_ns
                + if stepping {
                    ACTIONS_SENT_LOOK_NS
                } else {
                    QUIET_LOOK_NS
                };
        }
        let i = self.interval_ns;
        let step = (i / 8).clamp(LATE_STEP_MIN_NS, LATE_STEP_MAX_NS);
        if self.irregular || (self.anchored && self.intervals < SETTLED_AFTER) {
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
        let looks = follow(&mut p, 1..=100, 0);
        assert_eq!(p.interval_ns(), MS);
        // The first frames are looked for at short steps, until the pace is known; then
        // one look per frame.
        let settling: u32 = looks[..10].iter().sum();
        assert!(
            settling <= 10 * 9,
            "{settling} looks for the first 10 frames"
        );
        let settled: u32 = looks[10..].iter().sum();
        assert!(settled <= 90 + 5, "{settled} looks for 90 frames");
        let next = p.next_look_ns(100 * MS + 30_000);
        assert!(
            (101 * MS..101 * MS + 60_000).contains(&next),
            "the look after frame 100 is just after 101 ms, not {next}"
        );
    }

    #[test]
    fn the_time_from_attach_to_the_first_frame_is_not_an_interval() {
        // Attached 0.9 ms into a run at 1 kHz; the first frame comes 0.1 ms later.
        let mut p = Pace::new(900_000);
        for k in 1..=10 {
            p.saw(k * MS + 20_000, k * MS, 1);
        }
        assert_eq!(p.interval_ns(), MS);
        // And once the pace is known, the next look is at the next frame, not in short
        // steps.
        let next = p.next_look_ns(10 * MS + 30_000);
        assert!((11 * MS..11 * MS + 100_000).contains(&next), "{next}");
    }

    #[test]
    fn a_late_frame_is_looked_for_in_short_steps() {
        let mut p = Pace::new(0);
        p.saw(MS, MS, 1);
        p.saw(2 * MS, 2 * MS, 1);
        let late = 3 * MS + 100_000;
        let next = p.next_look_ns(late);
        assert_eq!(next, late + MS / 8);
    }

    #[test]
    fn the_interval_follows_a_faster_engine_within_a_few_frames() {
        let mut p = Pace::new(0);
        // At 2 kHz, first seen only every other frame by the 1 ms guess.
        p.saw(MS / 2, MS / 2, 1);
        p.saw(3 * MS / 2, 3 * MS / 2, 2);
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
        assert_eq!(p.next_look_ns(now), now + p.interval_ns() / 8);
        // The burst: two frames 200 µs apart; the next first look comes within a
        // third of the interval, not at the next due time.
        p.saw(13 * MS + 200_000, 13 * MS + 200_000, 1);
        let next = p.next_look_ns(13 * MS + 210_000);
        assert!(next <= 13 * MS + 200_000 + MS / 3, "{next}");
        // Back on the pace, the first look comes near the due time again within about a
        // hundred frames (a run that once lived short frames may do so again).
        for k in 14..=120 {
            p.saw(k * MS + 200_000, k * MS + 200_000, 1);
        }
        let next = p.next_look_ns(120 * MS + 230_000);
        assert!(next > 121 * MS + 100_000, "{next}");
    }

    #[test]
    fn frames_that_live_short_are_all_seen_at_a_few_looks_each() {
        // A trainer paced at 1 kHz that wakes up to 800 µs late one step in ten and
        // catches up as `sim client` does: an action at its tick, never less than half a
        // period after the last one nor a quarter period after the frame it answers. The
        // engine publishes 250 to 350 µs after each action. A frame lives from its
        // publication to the next action: at times only 250 µs.
        let mut x = 99u64;
        let mut rand = |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        let (mut stamps, mut published) = (vec![MS], vec![MS + 300_000]);
        let mut tick = MS;
        for _ in 0..4000 {
            tick += MS;
            let late = if rand(10) == 0 { rand(800_000) } else { 0 };
            let (last, arrived) = (stamps[stamps.len() - 1], published[published.len() - 1]);
            let action = (tick + late).max(last + MS / 2).max(arrived + MS / 4);
            stamps.push(action);
            published.push(action + 250_000 + rand(100_000));
        }
        let mut p = Pace::new(0);
        let (mut now, mut k, mut seen, mut looks, mut lost) = (0u64, 0usize, 0usize, 0u32, 0u32);
        while k + 1 < stamps.len() {
            now = p.next_look_ns(now);
            looks += 1;
            // The newest frame published by now.
            let mut newest = None;
            while k + 1 < stamps.len() && published[k] <= now {
                newest = Some(k);
                k += 1;
            }
            match newest {
                Some(j) => {
                    let delta = (k - seen) as u64;
                    // Frames published before the newest and not seen are lost, and so
                    // is the newest when the engine is already writing the next one.
                    let torn = stamps.get(j + 1).is_some_and(|&next| next <= now);
                    lost += (delta - 1) as u32 + u32::from(torn);
                    seen = k;
                    p.saw(now, stamps[j], delta);
                }
                None => p.nothing_new(now),
            }
        }
        // A poller napping 250 µs would take four looks a frame, and lose the frames
        // that live less than its nap.
        assert!(lost == 0, "{lost} of {} frames lost", stamps.len());
        assert!(looks <= 7 * stamps.len() as u32 / 2, "{looks} looks");
    }

    #[test]
    fn the_frames_after_a_slow_first_step_are_all_seen() {
        // The first step takes 3 ms; the trainer then catches up on its 1 kHz schedule,
        // half a period between its actions, and goes on at its pace. Each frame lives
        // until the next action.
        let mut actions = vec![0u64, 3 * MS + 200_000];
        while actions.len() < 60 {
            let last = actions[actions.len() - 1];
            let tick = actions.len() as u64 * MS;
            actions.push(tick.max(last + MS / 2));
        }
        let published: Vec<u64> = actions.iter().map(|a| a + 150_000).collect();
        let mut p = Pace::new(0);
        let (mut now, mut next_frame, mut lost) = (0u64, 1usize, Vec::new());
        while next_frame + 1 < actions.len() {
            now = p.next_look_ns(now);
            // The newest frame published by now, alive until the next action.
            let newest = (next_frame..actions.len() - 1)
                .take_while(|&k| published[k] <= now)
                .last();
            match newest {
                Some(j) => {
                    lost.extend(next_frame..j);
                    if actions[j + 1] <= now {
                        lost.push(j);
                    }
                    p.saw(now, actions[j], (j + 1 - next_frame) as u64);
                    next_frame = j + 1;
                }
                None => p.nothing_new(now),
            }
        }
        assert!(lost.is_empty(), "frames lost: {lost:?}");
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
    fn one_late_frame_moves_the_first_look_a_little_and_a_slower_engine_moves_it_for_good() {
        let mut p = Pace::new(0);
        follow(&mut p, 1..=20, 0);
        // Frame 21 is not there at 21.05 ms, and is at 21.45 ms: one slow step.
        p.nothing_new(21 * MS + 50_000);
        p.saw(21 * MS + 450_000, 21 * MS, 1);
        let next = p.next_look_ns(21 * MS + 460_000);
        assert!((22 * MS..22 * MS + 100_000).contains(&next), "{next}");
        // From now on every step takes 400 µs: within a hundred frames the first look
        // goes near then.
        follow(&mut p, 22..=120, 400_000);
        let next = p.next_look_ns(120 * MS + 410_000);
        assert!(
            (121 * MS + 250_000..=121 * MS + 450_000).contains(&next),
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

    #[test]
    fn a_quiet_run_whose_trainer_sent_its_actions_is_looked_at_closely_until_the_frame() {
        let mut p = Pace::new(0);
        p.saw(MS, MS, 1);
        p.saw(2 * MS, 2 * MS, 1);
        // A policy update of two seconds; the trainer's actions are seen at a quiet look.
        let t = 2 * MS + 2_000 * MS;
        assert_eq!(p.next_look_ns(t), t + QUIET_LOOK_NS);
        p.actions_sent(t);
        assert_eq!(p.next_look_ns(t), t + ACTIONS_SENT_LOOK_NS);
        // The first look that saw them counts: still close 10 ms on, not 30 ms on (an
        // engine that does not answer is looked at as a quiet run).
        p.actions_sent(t + 10 * MS);
        let at = t + 10 * MS;
        assert_eq!(p.next_look_ns(at), at + ACTIONS_SENT_LOOK_NS);
        let stalled = t + 30 * MS;
        assert_eq!(p.next_look_ns(stalled), stalled + QUIET_LOOK_NS);
        // The frame came: the next quiet spell starts with the quiet look again.
        p.saw(t + 31 * MS, t + 31 * MS, 1);
        let later = t + 31 * MS + QUIET_NS + 1;
        assert_eq!(p.next_look_ns(later), later + QUIET_LOOK_NS);
    }
}
