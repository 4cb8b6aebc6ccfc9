//! The frame accounting: every frame the engine publishes while the follower is attached
//! is counted once as seen and once as sampled, missed, torn, unreadable or skipped. A
//! pure state machine: the follower tells it what it saw and what it took; the tests
//! replay interleavings with it, without threads.

/// How far `newer` is ahead of `older` in frames, when it is (a frame_seq that went back
/// is a new run, not 2^64 frames).
pub fn frames_ahead(newer: u64, older: u64) -> Option<u64> {
    let delta = newer.wrapping_sub(older);
    (delta > 0 && delta < 1 << 40).then_some(delta)
}

/// Frames counted since the counts were last taken, or since the follower attached when
/// added up (the sampler's [`crate::sampler::SamplerStats`], `watch --json`).
///
/// Its JSON form is the balance under the names `frames_seen`, `frames_sampled`,
/// `frames_missed`, `frames_missed_late`, `frames_torn`, `frames_skipped` and
/// `frames_unreadable`, in that order; the checks' counts are left out (the detector
/// reports the frames it checked), and every count of the balance must be there to read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FrameCounts {
    /// Frames the engine published.
    #[serde(rename = "frames_seen")]
    pub seen: u64,
    /// Frames with a consistent copy kept.
    #[serde(rename = "frames_sampled")]
    pub sampled: u64,
    /// Frames that passed between two looks.
    #[serde(rename = "frames_missed")]
    pub missed: u64,
    /// Of the frames missed, those that passed while the follower was woken later than
    /// it asked to be (the machine ran something else, or not this program at all): the
    /// machine's loss, not the pace's. Part of `missed`, not of the balance.
    #[serde(rename = "frames_missed_late")]
    pub missed_late: u64,
    /// Frames whose copy was torn.
    #[serde(rename = "frames_torn")]
    pub torn: u64,
    /// Frames let pass on purpose while holding off on a busy machine.
    #[serde(rename = "frames_skipped")]
    pub skipped: u64,
    /// Frames whose copy was served, in whole or in part, by the guard against a file
    /// that shrank (zeros where the data was), or that were published while the segment
    /// was shorter than its geometry: not a frame, never kept.
    #[serde(rename = "frames_unreadable")]
    pub unreadable: u64,
    /// Frames whose rewards and flags were checked (when a sink asked for checks): the
    /// samples and the check-only copies. Not part of the balance above.
    #[serde(skip)]
    pub checked: u64,
    /// Frames whose every observation and action was checked too.
    #[serde(skip)]
    pub values_checked: u64,
}

impl FrameCounts {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: &FrameCounts) {
        self.seen += other.seen;
        self.sampled += other.sampled;
        self.missed += other.missed;
        self.missed_late += other.missed_late;
        self.torn += other.torn;
        self.skipped += other.skipped;
        self.unreadable += other.unreadable;
        self.checked += other.checked;
        self.values_checked += other.values_checked;
    }

    /// These counts without the checks' (what their JSON form holds).
    pub fn balance(&self) -> Self {
        Self {
            checked: 0,
            values_checked: 0,
            ..*self
        }
    }

    /// Frames lost: missed between two looks, torn, or not readable (those let pass on
    /// purpose are not lost: they were the budget's choice).
    pub fn lost(&self) -> u64 {
        self.missed
            .saturating_add(self.torn)
            .saturating_add(self.unreadable)
    }
}

/// What a copy of the newest frame gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Copied {
    /// Consistent: kept.
    Whole,
    /// The engine wrote during every attempt.
    Torn,
    /// The guard served part of it (a file that shrank), or the segment is shorter than
    /// its geometry.
    Unreadable,
}

/// The accounting of one attachment's frames. Invariant: `seen = sampled + missed +
/// torn + unreadable + skipped` over the counts taken so far plus those pending, and every frame
/// between the `frame_seq` at attach and `last_frame` has been counted exactly once.
#[derive(Debug)]
pub struct FrameAccounting {
    /// The newest frame taken, let pass or handed over.
    last_frame: u64,
    /// The thread held off (yielding to a busy machine) since it last took a frame: the
    /// frames that pass meanwhile are skipped on purpose, not missed.
    held: bool,
    /// The look under way was woken later than the follower asked: frames missed before
    /// it are counted `missed_late` too.
    woken_late: bool,
    counts: FrameCounts,
}

impl FrameAccounting {
    /// Counting starts after `frame_seq` (the frame at attach is not counted).
    pub fn new(frame_seq: u64) -> Self {
        Self {
            last_frame: frame_seq,
            held: false,
            woken_late: false,
            counts: FrameCounts::default(),
        }
    }

    pub fn last_frame(&self) -> u64 {
        self.last_frame
    }

    pub fn is_held(&self) -> bool {
        self.held
    }

    /// A look begins, woken `late` (later than the follower asked by more than the pace
    /// allows) or not.
    pub fn looking(&mut self, late: bool) {
        self.woken_late = late;
    }

    /// The thread held off before its next look.
    pub fn hold(&mut self) {
        self.held = true;
    }

    /// How many new frames `frame_seq == f` means, if any (none for a new run).
    pub fn ahead(&self, f: u64) -> Option<u64> {
        frames_ahead(f, self.last_frame)
    }

    /// Follows `f` without counting it or the frames before it: a new run (frame_seq
    /// went back) or a new segment. Counts not yet taken stay (a new segment's caller
    /// discards them).
    pub fn restart_at(&mut self, f: u64) {
        self.last_frame = f;
    }

    /// `frame_seq` read `f` and a copy was taken: the frames before `f` passed, and the
    /// copy gave `what`. Nothing is counted when `f` is not ahead.
    pub fn copied(&mut self, f: u64, what: Copied) {
        let Some(delta) = self.ahead(f) else {
            return;
        };
        self.pass(delta);
        match what {
            Copied::Whole => self.counts.sampled += 1,
            Copied::Torn => self.counts.torn += 1,
            Copied::Unreadable => self.counts.unreadable += 1,
        }
        self.held = false;
        self.last_frame = f;
    }

    /// `frame_seq` read `f` after holding off, and the engine was already writing the
    /// next frame: the new frames are let pass (skipped) rather than copied torn.
    pub fn skipped_to(&mut self, f: u64) {
        let Some(delta) = self.ahead(f) else {
            return;
        };
        self.counts.seen += delta;
        self.counts.skipped += delta;
        self.last_frame = f;
    }

    /// A frame's rewards and flags were checked, and its observations and actions too
    /// when `values`.
    pub fn checked(&mut self, values: bool) {
        self.counts.checked += 1;
        self.counts.values_checked += u64::from(values);
    }

    /// The counts since the last call.
    pub fn take(&mut self) -> FrameCounts {
        std::mem::take(&mut self.counts)
    }

    /// Forgets the counts not yet taken (they belong to a segment that was replaced).
    pub fn discard(&mut self) {
        self.counts = FrameCounts::default();
    }

    /// `delta` new frames, the last of which is being taken: the ones before it passed
    /// unseen, skipped while holding off on purpose, else missed.
    fn pass(&mut self, delta: u64) {
        self.counts.seen += delta;
        if self.held {
            self.counts.skipped += delta - 1;
        } else {
            self.counts.missed += delta - 1;
            if self.woken_late {
                self.counts.missed_late += delta - 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balanced(c: FrameCounts) -> bool {
        c.seen == c.sampled + c.missed + c.torn + c.unreadable + c.skipped
    }

    #[test]
    fn a_frame_copied_on_every_look_is_sampled_and_nothing_is_missed() {
        let mut a = FrameAccounting::new(10);
        for f in 11..=20 {
            assert_eq!(a.ahead(f), Some(1));
            a.copied(f, Copied::Whole);
        }
        let c = a.take();
        assert_eq!((c.seen, c.sampled, c.missed), (10, 10, 0));
        assert_eq!(a.take(), FrameCounts::default(), "taken once");
    }

    #[test]
    fn frames_between_two_looks_are_missed_and_a_torn_copy_is_counted_torn() {
        let mut a = FrameAccounting::new(0);
        a.copied(10, Copied::Torn);
        let c = a.take();
        assert_eq!((c.seen, c.missed, c.torn, c.sampled), (10, 9, 1, 0));
        assert!(balanced(c));
    }

    #[test]
    fn frames_missed_at_a_late_wake_up_are_counted_late_too() {
        let mut a = FrameAccounting::new(0);
        a.looking(false);
        a.copied(3, Copied::Whole);
        a.looking(true);
        a.copied(7, Copied::Whole);
        a.looking(false);
        a.copied(8, Copied::Whole);
        let c = a.take();
        assert_eq!((c.seen, c.sampled, c.missed, c.missed_late), (8, 3, 5, 3));
        assert!(balanced(c));
    }

    #[test]
    fn frames_that_pass_while_holding_off_are_skipped_not_missed() {
        let mut a = FrameAccounting::new(0);
        a.hold();
        a.copied(5, Copied::Whole);
        assert!(!a.is_held(), "a copy ends the holding off");
        a.copied(7, Copied::Whole);
        let c = a.take();
        assert_eq!((c.seen, c.skipped, c.missed, c.sampled), (7, 4, 1, 2));
        assert!(balanced(c));
    }

    #[test]
    fn frames_let_pass_after_holding_off_are_all_skipped_and_the_hold_goes_on() {
        let mut a = FrameAccounting::new(3);
        a.hold();
        a.skipped_to(6);
        assert!(a.is_held());
        assert_eq!(a.last_frame(), 6);
        let c = a.take();
        assert_eq!((c.seen, c.skipped), (3, 3));
        assert!(balanced(c));
    }

    #[test]
    fn a_copy_the_guard_served_is_counted_unreadable_never_sampled() {
        let mut a = FrameAccounting::new(0);
        a.copied(1, Copied::Whole);
        a.copied(3, Copied::Unreadable);
        let c = a.take();
        assert_eq!((c.seen, c.sampled, c.missed, c.unreadable), (3, 1, 1, 1));
        assert!(balanced(c));
    }

    #[test]
    fn a_frame_seq_that_goes_back_is_a_new_run_and_counts_nothing() {
        let mut a = FrameAccounting::new(1_000);
        assert_eq!(a.ahead(5), None);
        a.copied(5, Copied::Whole);
        a.skipped_to(5);
        assert_eq!(a.take(), FrameCounts::default());
        a.restart_at(5);
        a.copied(6, Copied::Whole);
        assert_eq!(a.take().sampled, 1);
    }

    #[test]
    fn counts_not_yet_taken_when_a_new_run_starts_are_kept() {
        let mut a = FrameAccounting::new(0);
        a.copied(5, Copied::Whole);
        a.restart_at(2);
        let c = a.take();
        assert_eq!((c.seen, c.sampled, c.missed), (5, 1, 4));
        a.copied(3, Copied::Whole);
        assert_eq!(a.take().seen, 1, "counting goes on from the new run");
    }

    #[test]
    fn discarded_counts_are_gone_and_counting_goes_on_from_the_last_frame() {
        let mut a = FrameAccounting::new(0);
        a.copied(3, Copied::Whole);
        a.discard();
        assert_eq!(a.take(), FrameCounts::default());
        a.copied(4, Copied::Whole);
        assert_eq!(a.take().seen, 1);
    }

    proptest::proptest! {
        #[test]
        fn every_frame_is_counted_once_whatever_the_interleaving(
            steps in proptest::collection::vec((0u8..5, 1u64..6), 1..200)
        ) {
            let mut a = FrameAccounting::new(0);
            let mut total = FrameCounts::default();
            let mut f = 0u64;
            for (what, step) in steps {
                f += step;
                match what {
                    0 => a.copied(f, Copied::Whole),
                    1 => a.copied(f, Copied::Torn),
                    2 => { a.hold(); a.skipped_to(f) }
                    3 => a.copied(f, Copied::Unreadable),
                    _ => a.hold(),
                }
                total.add(&a.take());
            }
            proptest::prop_assert!(balanced(total));
            proptest::prop_assert_eq!(total.seen, a.last_frame());
        }
    }
}
