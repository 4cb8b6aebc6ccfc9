use super::*;

/// Frames of `n` envs: rewards, dones, truncateds and resets per frame.
struct Run {
    a: Accountant,
    out: Vec<Episode>,
    n: usize,
}

impl Run {
    fn new(n: u32, after: u64) -> Self {
        Self {
            a: Accountant::new(n, after),
            out: Vec::new(),
            n: n as usize,
        }
    }

    /// Frame `f` with `rewards` of every env, and the envs `done`, `trunc`, `reset`.
    fn frame(&mut self, f: u64, rewards: &[f32], done: &[u32], trunc: &[u32], reset: &[u32]) {
        self.frame_nonfinite(f, rewards, done, trunc, reset, &[]);
    }

    fn frame_nonfinite(
        &mut self,
        f: u64,
        rewards: &[f32],
        done: &[u32],
        trunc: &[u32],
        reset: &[u32],
        nonfinite: &[u32],
    ) {
        let flags = |envs: &[u32]| {
            let mut v = vec![0u8; self.n];
            for &e in envs {
                v[e as usize] = 1;
            }
            v
        };
        let (d, t, r) = (flags(done), flags(trunc), flags(reset));
        let view = FrameView {
            frame_seq: f,
            time_ns: f * 1_000_000,
            rewards,
            dones: &d,
            truncateds: Some(&t),
            resets: &r,
        };
        self.a
            .frame(&view, nonfinite.iter().copied(), &mut self.out);
    }

    fn ended(&mut self) -> Vec<Episode> {
        std::mem::take(&mut self.out)
    }
}

#[test]
fn an_episode_runs_from_the_frame_after_an_ending_to_the_frame_that_ends_it() {
    let mut r = Run::new(2, 0);
    r.frame(1, &[1.0, 0.5], &[], &[], &[]);
    r.frame(2, &[2.0, 0.5], &[], &[], &[]);
    r.frame(3, &[-4.0, 0.5], &[0], &[], &[]);
    let e = r.ended();
    assert_eq!(e.len(), 1);
    let e = e[0];
    assert_eq!((e.env, e.first_frame, e.last_frame), (0, 1, 3));
    assert_eq!((e.first_ns, e.last_ns), (1_000_000, 3_000_000));
    assert_eq!(e.length(), 3);
    assert_eq!(e.ret, -1.0);
    assert_eq!((e.min_reward, e.max_reward), (-4.0, 2.0));
    assert_eq!(e.ending, Ending::Done);
    assert!(e.complete(), "{e:?}");
    assert_eq!(e.exact_return(), Some(-1.0));
    // The next one begins at the frame after.
    r.frame(4, &[3.0, 0.5], &[], &[0], &[]);
    let e = r.ended();
    assert_eq!(e.len(), 1);
    assert_eq!((e[0].first_frame, e[0].last_frame, e[0].ret), (4, 4, 3.0));
    assert_eq!(e[0].ending, Ending::Truncated);
    assert!(e[0].complete());
}

#[test]
fn done_wins_over_truncated_and_a_reset_ends_an_episode_after_its_frame() {
    let mut r = Run::new(3, 0);
    r.frame(1, &[1.0; 3], &[0], &[0, 1], &[2]);
    let e = r.ended();
    let endings: Vec<(u32, Ending)> = e.iter().map(|e| (e.env, e.ending)).collect();
    assert_eq!(
        endings,
        vec![
            (0, Ending::Done),
            (1, Ending::Truncated),
            (2, Ending::Reset)
        ]
    );
    // A reset flag beside a done is the trainer's answer to the done: one ending.
    r.frame(2, &[1.0; 3], &[1], &[], &[1]);
    assert_eq!(
        r.ended().iter().map(|e| e.ending).collect::<Vec<_>>(),
        vec![Ending::Done]
    );
}

#[test]
fn a_non_finite_value_marks_the_episode_it_ends() {
    let mut r = Run::new(3, 0);
    r.frame(1, &[1.0, f32::NAN, 1.0], &[], &[], &[]);
    r.frame_nonfinite(2, &[1.0, 1.0, 1.0], &[], &[], &[], &[2]);
    r.frame(3, &[1.0, 1.0, 1.0], &[0, 1, 2], &[], &[]);
    let e = r.ended();
    assert_eq!(e[0].ending, Ending::Done);
    assert_eq!(
        (e[1].ending, e[1].nonfinite_frame),
        (Ending::NonFinite, Some(1))
    );
    assert!(e[1].ret.is_nan());
    assert_eq!(e[1].exact_return(), None, "a NaN return is no figure");
    assert_eq!((e[1].min_reward, e[1].max_reward), (1.0, 1.0));
    assert_eq!(
        (e[2].ending, e[2].nonfinite_frame),
        (Ending::NonFinite, Some(2))
    );
    assert_eq!(e[2].ret, 3.0);
    // The next episodes are clean again.
    r.frame(4, &[1.0; 3], &[1], &[], &[]);
    assert_eq!(r.ended()[0].ending, Ending::Done);
}

#[test]
fn frames_not_taken_make_every_episode_they_fall_in_incomplete() {
    let mut r = Run::new(2, 0);
    r.frame(1, &[1.0, 1.0], &[1], &[], &[]);
    assert!(r.ended()[0].complete());
    // Frames 2 and 3 are not taken.
    r.frame(4, &[1.0, 1.0], &[], &[], &[]);
    r.frame(5, &[1.0, 1.0], &[0, 1], &[], &[]);
    let e = r.ended();
    assert_eq!(e.len(), 2);
    for e in &e {
        assert_eq!(e.lacking, 2, "{e:?}");
        assert!(!e.complete());
        assert_eq!(e.exact_return(), None);
        assert!(
            e.return_text().contains("2 frames lacking"),
            "{}",
            e.return_text()
        );
    }
    // Env 0 began at frame 1, env 1 after its ending at 1.
    assert_eq!((e[0].first_frame, e[0].length()), (1, 5));
    assert_eq!((e[1].first_frame, e[1].length()), (2, 4));
    assert_eq!(r.a.frames(), (3, 2));
    // The episodes after the gap are whole.
    r.frame(6, &[1.0, 1.0], &[0], &[], &[]);
    assert!(r.ended()[0].complete());
}

#[test]
fn episodes_going_on_at_the_attach_began_before_it() {
    let mut r = Run::new(2, 100);
    r.frame(101, &[1.0, 1.0], &[0], &[], &[]);
    let e = r.ended();
    assert!(e[0].began_before && !e[0].complete(), "{e:?}");
    assert_eq!(e[0].lacking, 0);
    assert!(e[0].return_text().contains("began before"));
    r.frame(102, &[1.0, 1.0], &[0, 1], &[], &[]);
    let e = r.ended();
    assert!(e[0].complete(), "{:?}", e[0]);
    assert!(e[1].began_before);
    // The frame shown at the attach is not taken again.
    let mut r = Run::new(1, 100);
    r.frame(100, &[1.0], &[0], &[], &[]);
    assert!(r.ended().is_empty());
    assert_eq!(r.a.frames(), (0, 0));
}

#[test]
fn the_end_of_what_is_followed_cuts_the_episodes_going_on() {
    let mut r = Run::new(2, 0);
    r.frame(1, &[1.0, 2.0], &[0], &[], &[]);
    r.frame(2, &[1.0, 2.0], &[], &[], &[]);
    r.ended();
    let running: Vec<(u32, u64, f64)> =
        r.a.running()
            .map(|e| (e.env, e.first_frame, e.ret))
            .collect();
    assert_eq!(running, vec![(0, 2, 1.0), (1, 1, 4.0)]);
    r.a.finish(&mut r.out);
    let e = r.ended();
    assert!(e.iter().all(|e| e.ending == Ending::Running));
    assert_eq!(e.len(), 2);
    // A frame number that goes back is a new run: the episodes going on are cut.
    let mut r = Run::new(1, 0);
    r.frame(5, &[1.0], &[], &[], &[]);
    r.frame(5, &[1.0], &[], &[], &[]);
    assert!(r.ended().is_empty(), "the same frame twice counts once");
    r.frame(1, &[7.0], &[0], &[], &[]);
    let e = r.ended();
    assert_eq!(
        e.iter().map(|e| (e.ending, e.ret)).collect::<Vec<_>>(),
        vec![(Ending::Running, 1.0), (Ending::Done, 7.0)]
    );
    assert!(e[1].complete(), "a run that starts at frame 1 is whole");
}

fn ep(env: u32, first: u64, last: u64, ret: f64, ending: Ending) -> Episode {
    Episode {
        env,
        first_frame: first,
        last_frame: last,
        first_ns: first * 1_000_000,
        last_ns: last * 1_000_000,
        ret,
        min_reward: 0.0,
        max_reward: 1.0,
        ending,
        lacking: 0,
        began_before: false,
        nonfinite_frame: None,
    }
}

#[test]
fn the_book_keeps_totals_of_every_episode_and_the_recent_ones_within_its_bound() {
    let mut b = EpisodeBook::new(2, 3);
    b.apply(&ep(0, 1, 10, 5.0, Ending::Done));
    b.apply(&ep(0, 11, 30, 7.0, Ending::Truncated));
    let mut lacking = ep(1, 1, 40, 100.0, Ending::Done);
    lacking.lacking = 3;
    b.apply(&lacking);
    b.apply(&ep(1, 41, 41, f64::NAN, Ending::NonFinite));
    b.apply(&ep(1, 42, 50, 1.0, Ending::Running));
    let t = b.totals;
    assert_eq!(t.by_ending, [2, 1, 0, 1, 1]);
    assert_eq!(t.finished(), 4);
    assert_eq!((t.complete, t.exact, t.incomplete), (3, 2, 1));
    assert_eq!(
        t.mean_return(),
        Some(6.0),
        "incomplete and NaN returns left out"
    );
    assert_eq!(t.mean_length(), Some(15.0));
    let e0 = b.envs[0];
    assert_eq!((e0.finished, e0.truncated), (2, 1));
    assert_eq!(e0.truncated_share(), Some(0.5));
    assert_eq!(e0.mean_return(), Some(6.0));
    assert_eq!(e0.last.map(|e| e.ret), Some(7.0));
    let e1 = b.envs[1];
    assert_eq!((e1.finished, e1.nonfinite, e1.exact), (2, 1, 0));
    assert_eq!(e1.mean_return(), None);
    assert_eq!(b.recent().len(), 3);
    assert_eq!(b.dropped, 1);
    assert_eq!(b.recent().front().map(|e| e.ret), Some(7.0));
    // A reader that saw the first episode: three more ended, the oldest of them no longer
    // kept.
    let (new, missed) = b.ended_since(1);
    assert_eq!(new.iter().map(|e| e.ret).collect::<Vec<_>>().len(), 3);
    assert_eq!(missed, 0);
    let (new, missed) = b.ended_since(0);
    assert_eq!((new.len(), missed), (3, 1));
    assert!(b.ended_since(4).0.is_empty());
}

#[test]
fn a_book_of_totals_counts_what_a_full_book_counts_and_keeps_nothing_more() {
    let mut full = EpisodeBook::new(2, 10);
    let mut totals = EpisodeBook::with_detail(2, BookDetail::Totals);
    let mut lacking = ep(1, 1, 40, 100.0, Ending::Done);
    lacking.lacking = 3;
    let episodes = [
        ep(0, 1, 10, 5.0, Ending::Done),
        ep(0, 11, 30, 7.0, Ending::Truncated),
        lacking,
        ep(1, 41, 41, f64::NAN, Ending::NonFinite),
        ep(1, 42, 50, 1.0, Ending::Running),
    ];
    let mut a = Accountant::new(2, 0);
    let mut out = Vec::new();
    for f in 1..=7u64 {
        let view = FrameView {
            frame_seq: if f == 7 { 9 } else { f },
            time_ns: f,
            rewards: &[1.0, 2.0],
            dones: &[u8::from(f == 3), 0],
            truncateds: None,
            resets: &[0; 2],
        };
        a.frame(&view, [], &mut out);
    }
    for b in [&mut full, &mut totals] {
        for e in &episodes {
            b.apply(e);
        }
        b.progress(&a, 99);
    }
    assert_eq!(totals.totals, full.totals);
    assert_eq!(
        (totals.totals.frames_taken, totals.totals.frames_lacking),
        (7, 2)
    );
    assert_eq!(
        (totals.last_frame, totals.last_ns),
        (full.last_frame, full.last_ns)
    );
    assert_eq!(full.recent().len(), 4);
    assert!(full.running.iter().all(Option::is_some));
    assert!(totals.recent().is_empty() && totals.bins().0.is_empty());
    assert!(totals.envs.is_empty() && totals.running.is_empty());
}

#[test]
fn time_bins_stay_bounded_over_a_long_run_and_keep_every_episode() {
    let mut b = EpisodeBook::new(1, 10);
    let n = 3 * MAX_BINS as u64;
    for k in 0..n {
        // One episode a second.
        let mut e = ep(0, k, k, 2.0, Ending::Done);
        e.last_ns = k * FIRST_BIN_NS;
        b.apply(&e);
    }
    let (bins, width) = b.bins();
    assert!(bins.len() <= MAX_BINS, "{}", bins.len());
    assert_eq!(width, 4 * FIRST_BIN_NS);
    assert_eq!(bins.iter().map(|b| b.ended).sum::<u64>(), n);
    assert!(bins.iter().all(|b| b.mean_return() == Some(2.0)));
    assert_eq!(bins[1].start_ns, width);
}

#[test]
fn outliers_are_returns_beyond_the_far_fences_and_envs_running_long_without_an_ending() {
    let mut b = EpisodeBook::new(3, 1000);
    for k in 0..40u64 {
        b.apply(&ep(
            0,
            k * 10 + 1,
            k * 10 + 10,
            10.0 + (k % 4) as f64,
            Ending::Done,
        ));
    }
    b.apply(&ep(1, 1, 10, 500.0, Ending::Done));
    b.apply(&ep(1, 11, 20, -400.0, Ending::Done));
    let out = b.outlier_returns(100);
    assert_eq!(
        out.iter().map(|e| e.ret).collect::<Vec<_>>(),
        vec![-400.0, 500.0]
    );
    // Median length 10: env 2 has run 35 frames without an ending, env 1 five.
    let mut a = Accountant::new(3, 0);
    let mut sink = Vec::new();
    for f in 1..=35u64 {
        let dones = [u8::from(f % 10 == 0), u8::from(f == 30), 0];
        let view = FrameView {
            frame_seq: f,
            time_ns: f,
            rewards: &[0.0; 3],
            dones: &dones,
            truncateds: None,
            resets: &[0; 3],
        };
        a.frame(&view, [], &mut sink);
    }
    b.progress(&a, 35);
    assert_eq!(b.frames_since_ending(2), Some(35));
    assert_eq!(b.frames_since_ending(1), Some(5));
    assert_eq!(b.stuck_envs(3.0, 100), vec![(2, 35)]);
    assert!(b.stuck_envs(4.0, 100).is_empty());
}

mod live {
    use super::*;
    use lrbc::layout::LrbcHeader;
    use lrbc::layout::plan::PlanLayout;
    use lrbc::testutil::{TestSegment, spec};
    use std::time::{Duration, Instant};

    /// Publishes frame `f` of two envs as an engine does: rewards `f` and 1, env 0 done
    /// every fifth frame, env 1 truncated at frame 10.
    fn publish(seg: &TestSegment, f: u64) {
        let p = &seg.plan;
        seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, f);
        seg.rw.seqlock_begin(LrbcHeader::WRITE_SEQ_OFFSET);
        seg.rw.write_f32s(p.rewards_offset, &[f as f32, 1.0]);
        seg.rw
            .write_at(p.dones_offset, &[u8::from(f.is_multiple_of(5)), 0]);
        seg.rw
            .write_at(p.truncateds_offset, &[0, u8::from(f == 10)]);
        seg.rw.fetch_add_u64(LrbcHeader::WRITE_SEQ_OFFSET, 1);
        seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, f);
    }

    fn idle() -> Option<crate::busy::CpuTimes> {
        None
    }

    #[test]
    fn the_tracker_finds_a_live_segments_episodes_frame_by_frame() {
        let seg = TestSegment::create("episodes-live", &spec(PlanLayout::Lrbc { ext: true }, 2));
        let mut t = EpisodeTracker::start_with_load(
            &seg.attach(),
            BookDetail::Full { recent: 100 },
            None,
            idle,
        )
        .unwrap();
        for f in 1..=22u64 {
            publish(&seg, f);
            // The next frame once this one is taken: none is missed, however slow the
            // machine.
            let deadline = Instant::now() + Duration::from_secs(20);
            while lrbc::sync::lock(t.book()).last_frame < f {
                assert!(Instant::now() < deadline, "frame {f} not taken in 20 s");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        {
            let b = lrbc::sync::lock(t.book());
            assert_eq!(b.frames_since_ending(0), Some(2));
            assert_eq!(
                b.running[1].map(|e| (e.first_frame, e.ret)),
                Some((11, 12.0))
            );
        }
        // Frames 23 and 24 go by unseen (frame_seq jumps to 25, env 0's ending): the
        // episodes they fall in lack them.
        publish(&seg, 25);
        let deadline = Instant::now() + Duration::from_secs(20);
        while lrbc::sync::lock(t.book()).last_frame < 25 {
            assert!(Instant::now() < deadline, "frame 25 not taken in 20 s");
            std::thread::sleep(Duration::from_millis(1));
        }
        {
            let b = lrbc::sync::lock(t.book());
            let last = b.recent().back().copied().unwrap();
            assert_eq!((last.env, last.first_frame, last.last_frame), (0, 21, 25));
            assert_eq!(last.lacking, 2);
            assert_eq!(last.ret, 21.0 + 22.0 + 25.0, "the frames taken only");
            assert_eq!(b.totals.frames_lacking, 2);
        }
        t.stop();
        let b = lrbc::sync::lock(t.book());
        let got: Vec<(u32, u64, u64, f64, Ending, bool)> = b
            .recent()
            .iter()
            .map(|e| {
                (
                    e.env,
                    e.first_frame,
                    e.last_frame,
                    e.ret,
                    e.ending,
                    e.complete(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 1, 5, 15.0, Ending::Done, true),
                (0, 6, 10, 40.0, Ending::Done, true),
                (1, 1, 10, 10.0, Ending::Truncated, true),
                (0, 11, 15, 65.0, Ending::Done, true),
                (0, 16, 20, 90.0, Ending::Done, true),
                (0, 21, 25, 68.0, Ending::Done, false),
            ]
        );
        // Stopping cut the episodes going on.
        assert_eq!(
            b.totals.by_ending,
            [5, 1, 0, 0, 1],
            "env 0 had no frame since"
        );
        assert_eq!(b.totals.frames_taken, 23);
        assert_eq!(b.totals.frames_lacking, 2);
        assert_eq!(b.envs[0].mean_return(), Some(52.5));
    }
}

/// The accountant as a plain loop over every env and frame: each env's episode carries
/// its own sums, last frame and frames lacking.
mod plain {
    use super::*;

    #[derive(Clone, Copy)]
    struct Env {
        first_frame: u64,
        first_ns: u64,
        last_frame: u64,
        last_ns: u64,
        ret: f64,
        min: f32,
        max: f32,
        lacking: u64,
        began_before: bool,
        nonfinite: Option<u64>,
        taken: bool,
    }

    fn open(first_frame: u64, began_before: bool) -> Env {
        Env {
            first_frame,
            first_ns: 0,
            last_frame: first_frame,
            last_ns: 0,
            ret: 0.0,
            min: f32::NAN,
            max: f32::NAN,
            lacking: 0,
            began_before,
            nonfinite: None,
            taken: false,
        }
    }

    fn close(env: usize, o: &Env, ending: Ending) -> Episode {
        Episode {
            env: env as u32,
            first_frame: o.first_frame,
            last_frame: o.last_frame,
            first_ns: o.first_ns,
            last_ns: o.last_ns,
            ret: o.ret,
            min_reward: o.min,
            max_reward: o.max,
            ending,
            lacking: o.lacking,
            began_before: o.began_before,
            nonfinite_frame: o.nonfinite,
        }
    }

    pub struct Plain {
        envs: Vec<Env>,
        last: u64,
    }

    impl Plain {
        pub fn new(n: usize, after: u64) -> Self {
            Self {
                envs: vec![open(after + 1, after > 0); n],
                last: after,
            }
        }

        pub fn frame(&mut self, f: &FrameView<'_>, nonfinite: &[u32], out: &mut Vec<Episode>) {
            let gap = f.frame_seq - self.last - 1;
            self.last = f.frame_seq;
            for &e in nonfinite {
                if let Some(o) = self.envs.get_mut(e as usize) {
                    o.nonfinite.get_or_insert(f.frame_seq);
                }
            }
            let flag = |a: &[u8], e: usize| a.get(e).is_some_and(|&v| v != 0);
            for (e, o) in self.envs.iter_mut().enumerate() {
                o.lacking += gap;
                let r = f.rewards.get(e).copied().unwrap_or(0.0);
                if !o.taken {
                    o.first_ns = f.time_ns;
                    o.taken = true;
                }
                o.last_frame = f.frame_seq;
                o.last_ns = f.time_ns;
                o.ret += f64::from(r);
                if r.is_finite() {
                    o.min = if o.min.is_nan() { r } else { o.min.min(r) };
                    o.max = if o.max.is_nan() { r } else { o.max.max(r) };
                } else {
                    o.nonfinite.get_or_insert(f.frame_seq);
                }
                let ending = if flag(f.dones, e) {
                    Ending::Done
                } else if f.truncateds.is_some_and(|t| flag(t, e)) {
                    Ending::Truncated
                } else if flag(f.resets, e) {
                    Ending::Reset
                } else {
                    continue;
                };
                let ending = if o.nonfinite.is_some() {
                    Ending::NonFinite
                } else {
                    ending
                };
                out.push(close(e, o, ending));
                *o = open(f.frame_seq + 1, false);
            }
        }

        pub fn running(&self) -> Vec<Episode> {
            let taken = self.envs.iter().enumerate().filter(|(_, o)| o.taken);
            taken.map(|(e, o)| close(e, o, Ending::Running)).collect()
        }
    }
}

/// Episodes as bits: NaN returns and rewards compare equal.
fn same(a: &[Episode], b: &[Episode]) -> bool {
    let bits = |e: &Episode| {
        (
            e.env,
            e.first_frame,
            e.last_frame,
            e.first_ns,
            e.last_ns,
            e.ret.to_bits(),
            e.min_reward.to_bits(),
            e.max_reward.to_bits(),
            e.ending,
            e.lacking,
            e.began_before,
            e.nonfinite_frame,
        )
    };
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| bits(x) == bits(y))
}

proptest::proptest! {
    /// Over many envs (several blocks of them, flag arrays of every length), frames with
    /// gaps, flags and non-finite rewards, the accountant ends the episodes a plain loop
    /// over every env ends, with the same figures, and holds the same ones going on.
    #[test]
    fn the_accountant_ends_what_a_plain_loop_over_every_env_ends(
        n in 1usize..100,
        after in 0u64..3,
        frames in proptest::collection::vec(
            (
                0u64..3,
                proptest::collection::vec(
                    proptest::prop_oneof![
                        12 => -5.0f32..5.0,
                        1 => proptest::strategy::Just(f32::NAN),
                        1 => proptest::strategy::Just(f32::INFINITY),
                    ],
                    0..100,
                ),
                proptest::collection::vec(0u8..20, 0..100),
                proptest::collection::vec(0u8..2, 0..100),
            ),
            1..40,
        ),
    ) {
        let mut a = Accountant::new(n as u32, after);
        let mut p = plain::Plain::new(n, after);
        let (mut got, mut want) = (Vec::new(), Vec::new());
        let mut f = after;
        for (gap, rewards, flags, nonfinite) in &frames {
            f += 1 + gap;
            // 0 done, 1 truncated, 2 reset, 3 done and truncated; the rest none.
            let pick = |k: &[u8]| flags.iter().map(|&x| u8::from(k.contains(&x))).collect::<Vec<u8>>();
            let (dones, truncs, resets) = (pick(&[0, 3]), pick(&[1, 3]), pick(&[2]));
            let nonfinite: Vec<u32> = nonfinite
                .iter()
                .enumerate()
                .filter(|(_, x)| **x == 1)
                .map(|(e, _)| (e * 7 % n) as u32)
                .take(3)
                .collect();
            let view = FrameView {
                frame_seq: f,
                time_ns: f * 1_000,
                rewards,
                dones: &dones,
                truncateds: (f % 5 != 0).then_some(&truncs[..]),
                resets: &resets,
            };
            a.frame(&view, nonfinite.iter().copied(), &mut got);
            p.frame(&view, &nonfinite, &mut want);
            proptest::prop_assert!(same(&got, &want), "frame {}: {:?} against {:?}", f, got, want);
            let running: Vec<Episode> = a.running().collect();
            proptest::prop_assert!(same(&running, &p.running()));
        }
        proptest::prop_assert_eq!(a.frames().0, frames.len() as u64);
    }
}
