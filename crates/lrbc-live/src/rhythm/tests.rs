use super::*;

const MS: u64 = 1_000_000;
/// How often the follower looks at the counters while it waits.
const LOOK: u64 = 5 * MS;

fn settings() -> RhythmSettings {
    RhythmSettings {
        learn: true,
        stall_factor: 20.0,
        stall_min_ns: 250 * MS,
        update_factor: 4.0,
    }
}

/// A lock-step loop driven step by step: the trainer's turn, then the engine's, the
/// counters looked at every [`LOOK`] meanwhile, and each frame taken with both stamps
/// (unless `stamps` is off).
struct Loop {
    rhythm: Rhythm,
    t: u64,
    frame: u64,
    stamps: bool,
    /// The judgments of the waits seen over their limits, by frame.
    over: Vec<(u64, Side, Judgment)>,
}

impl Loop {
    fn new(settings: RhythmSettings) -> Self {
        let mut rhythm = Rhythm::new(settings);
        rhythm.frame(FrameTimes {
            frame_seq: 0,
            seen_ns: 1_000 * MS,
            frame_time_ns: Some(1_000 * MS),
            action_time_ns: None,
        });
        Self {
            rhythm,
            t: 1_000 * MS,
            frame: 0,
            stamps: true,
            over: Vec::new(),
        }
    }

    fn look(&mut self, at: u64, action_seq: u64) {
        self.rhythm.look(at, self.frame, Some(action_seq));
        if let Some(w) = self.rhythm.waiting(at)
            && w.wait_ns > w.judgment.limit_ns()
            && self.over.last().is_none_or(|o| o.0 != w.frame)
        {
            self.over.push((w.frame, w.side, w.judgment));
        }
    }

    /// One step: the trainer takes `trainer_ns`, the engine `engine_ns`.
    fn step(&mut self, trainer_ns: u64, engine_ns: u64) {
        let f = self.frame;
        let acted = self.t + trainer_ns;
        let published = acted + engine_ns;
        let mut look = self.t + LOOK;
        while look < acted {
            self.look(look, f);
            look += LOOK;
        }
        while look < published {
            self.look(look, f + 1);
            look += LOOK;
        }
        self.frame += 1;
        self.t = published;
        self.rhythm.frame(FrameTimes {
            frame_seq: f + 1,
            seen_ns: published,
            frame_time_ns: self.stamps.then_some(published),
            action_time_ns: self.stamps.then_some(acted),
        });
    }

    /// `n` steps of 4 ms (3 the trainer's, 1 the engine's).
    fn rollout(&mut self, n: u64) {
        for _ in 0..n {
            self.step(3 * MS, MS);
        }
    }

    /// A rollout of `n` frames: `n - 1` steps, then a step whose trainer's turn holds an
    /// update of `update_ms`.
    fn iteration(&mut self, n: u64, update_ms: u64) {
        self.rollout(n - 1);
        self.step(update_ms * MS, MS);
    }
}

#[test]
fn a_ppo_loop_is_learned_from_its_first_two_pauses_with_its_rollout_update_side_and_shares() {
    let mut l = Loop::new(settings());
    assert_eq!(l.rhythm.kind(), LoopKind::Learning);
    // Attached mid-rollout: 20 frames, then the first update.
    l.rollout(19);
    l.step(800 * MS, MS);
    assert_eq!(l.rhythm.kind(), LoopKind::Learning, "one pause");
    // Rollouts of 32 frames: frames 21..=52, the update after frame 52 (the step that
    // publishes frame 53 holds it).
    for _ in 0..10 {
        l.rollout(31);
        l.step(800 * MS, MS);
    }
    let s = l.rhythm.summary(l.t);
    assert_eq!(s.kind, LoopKind::Periodic);
    assert_eq!(s.rollout_frames, Some(32), "{s:?}");
    let u = s.update_secs.unwrap();
    assert!((u - 0.8).abs() < 0.002, "{u}");
    assert_eq!(s.update_side, Some(Side::Trainer));
    assert!((s.step_secs.unwrap() - 0.004).abs() < 1e-6, "{s:?}");
    assert_eq!((s.pauses, s.stalls), (11, 0));
    // 11 steps holding an update (0.8 s the trainer's, 1 ms the engine's), and
    // 19 + 10 × 31 = 329 steps of 4 ms.
    let followed = 11.0 * 0.801 + 329.0 * 0.004;
    assert!((s.followed_secs - followed).abs() < 1e-6, "{s:?}");
    assert!((s.trainer_secs - 11.0 * 0.8).abs() < 1e-6, "{s:?}");
    assert!((s.engine_secs - 11.0 * 0.001).abs() < 1e-6, "{s:?}");
    assert_eq!(s.unknown_secs, 0.0);
    assert!((s.share(s.trainer_secs) - 8.8 / followed).abs() < 1e-9);
    assert!(
        l.over
            .iter()
            .all(|o| matches!(o.2, Judgment::Learning { .. })),
        "{:?}",
        l.over
    );
    assert_eq!(s.recent.len(), 11);
    let last = s.recent.last().unwrap();
    assert_eq!(
        (last.verdict, last.side, last.after_frames),
        (PauseVerdict::Loop, Side::Trainer, Some(32))
    );
}

#[test]
fn once_learned_updates_are_no_stall_a_hang_at_an_update_is_and_says_the_usual_pause() {
    let mut l = Loop::new(settings());
    for _ in 0..4 {
        l.iteration(32, 800);
    }
    l.over.clear();
    for _ in 0..5 {
        // Updates vary by up to ±25 %.
        l.iteration(32, 600);
        l.iteration(32, 1000);
    }
    assert!(l.over.is_empty(), "{:?}", l.over);
    // A hang of 6 s at the next update: over 4 × 0.8 s.
    l.iteration(32, 6_000);
    assert_eq!(l.over.len(), 1, "{:?}", l.over);
    let (frame, side, j) = l.over[0];
    assert_eq!((frame, side), (l.frame - 1, Side::Trainer));
    match j {
        Judgment::Update {
            usual_ns,
            rollout_frames,
            limit_ns,
        } => {
            assert_eq!(rollout_frames, 32);
            assert!((600 * MS..=1000 * MS).contains(&usual_ns), "{usual_ns}");
            assert_eq!(limit_ns, usual_ns * 4);
        }
        other => panic!("{other:?}"),
    }
    let s = l.rhythm.summary(l.t);
    assert_eq!(s.stalls, 1);
    assert_eq!(s.recent.last().unwrap().verdict, PauseVerdict::Stall);
    // The hang is not the loop's: the next updates are judged as before.
    l.over.clear();
    l.iteration(32, 800);
    l.iteration(32, 800);
    assert!(l.over.is_empty(), "{:?}", l.over);
}

#[test]
fn a_wait_mid_rollout_or_on_the_engines_side_is_one_the_loop_does_not_explain() {
    let mut l = Loop::new(settings());
    for _ in 0..4 {
        l.iteration(32, 800);
    }
    l.over.clear();
    // The trainer waits 0.5 s at the 11th frame of a rollout.
    l.rollout(10);
    l.step(500 * MS, MS);
    l.rollout(32 - 12);
    l.step(800 * MS, MS);
    assert_eq!(l.over.len(), 1, "{:?}", l.over);
    assert!(
        matches!(
            l.over[0].2,
            Judgment::Unexplained {
                why: Why::MidRollout {
                    after_frames: 11,
                    rollout_frames: 32
                },
                limit_ns
            } if limit_ns == 250 * MS
        ),
        "{:?}",
        l.over
    );
    // The mid-rollout wait did not move the loop's place: that update was at it.
    assert_eq!(
        l.rhythm.summary(l.t).recent.last().unwrap().verdict,
        PauseVerdict::Loop
    );
    // The engine waits 0.4 s after the trainer's actions, mid-rollout.
    l.over.clear();
    l.rollout(5);
    l.step(3 * MS, 400 * MS);
    assert_eq!(l.over.len(), 1, "{:?}", l.over);
    assert_eq!(l.over[0].1, Side::Engine);
    assert!(
        matches!(
            l.over[0].2,
            Judgment::Unexplained {
                why: Why::OtherSide {
                    usual: Side::Trainer
                },
                ..
            }
        ),
        "{:?}",
        l.over
    );
    let p = l.rhythm.summary(l.t).recent.last().cloned().unwrap();
    assert_eq!((p.side, p.verdict), (Side::Engine, PauseVerdict::Stall));
    assert!((p.engine_secs - 0.4).abs() < 1e-9, "{p:?}");
}

#[test]
fn before_the_loop_is_known_waits_are_judged_learning_and_hiccups_do_not_teach_it() {
    let mut l = Loop::new(settings());
    l.rollout(40);
    // A hiccup of 60 ms (a pause: over 10 steps and 50 ms), then the real updates.
    l.step(60 * MS, MS);
    l.rollout(7);
    l.step(900 * MS, MS);
    assert_eq!(
        l.rhythm.kind(),
        LoopKind::Learning,
        "the hiccup is no update"
    );
    l.rollout(31);
    l.step(900 * MS, MS);
    let s = l.rhythm.summary(l.t);
    assert_eq!(s.kind, LoopKind::Periodic);
    assert_eq!(s.rollout_frames, Some(32), "{s:?}");
    assert!((s.update_secs.unwrap() - 0.9).abs() < 0.002);
    assert!(
        l.over
            .iter()
            .all(|o| matches!(o.2, Judgment::Learning { .. }))
    );
    // A later hiccup at the loop's place is short, and leaves the place where it was.
    l.rollout(31);
    l.step(60 * MS, MS);
    l.step(900 * MS, MS);
    let s = l.rhythm.summary(l.t);
    let n = s.recent.len();
    assert_eq!(s.recent[n - 2].verdict, PauseVerdict::Short);
    assert_eq!(s.recent[n - 1].verdict, PauseVerdict::Loop);
    assert_eq!(s.stalls, 0);
}

#[test]
fn a_loop_without_pauses_is_continuous_and_then_any_long_wait_is_one_it_does_not_explain() {
    let mut l = Loop::new(settings());
    // 4096 frames at 4 ms is 16 s: not yet long enough.
    l.rollout(4096);
    assert_eq!(l.rhythm.kind(), LoopKind::Learning);
    l.rollout(4000);
    assert_eq!(l.rhythm.kind(), LoopKind::Continuous);
    assert_eq!(l.rhythm.summary(l.t).loop_text(), "steps without pauses");
    l.step(600 * MS, MS);
    assert_eq!(l.over.len(), 1);
    assert!(matches!(
        l.over[0].2,
        Judgment::Unexplained {
            why: Why::Continuous,
            ..
        }
    ));
}

#[test]
fn alike_pauses_at_a_new_place_are_a_new_loop_after_at_most_two_of_them() {
    for rollout in [16, 20, 45] {
        let mut l = Loop::new(settings());
        for _ in 0..4 {
            l.iteration(32, 800);
        }
        l.over.clear();
        // The trainer now updates every `rollout` frames, for 0.5 s.
        for _ in 0..6 {
            l.iteration(rollout, 500);
        }
        assert!(l.over.len() <= 2, "{rollout}: {:?}", l.over);
        let s = l.rhythm.summary(l.t);
        assert_eq!(s.rollout_frames, Some(rollout), "{s:?}");
        assert!((s.update_secs.unwrap() - 0.501).abs() < 0.002, "{s:?}");
        l.over.clear();
        l.iteration(rollout, 500);
        assert!(l.over.is_empty(), "{rollout}: {:?}", l.over);
    }
}

#[test]
fn learning_off_judges_every_wait_by_the_step_and_the_minimum() {
    let mut l = Loop::new(RhythmSettings {
        learn: false,
        ..settings()
    });
    for _ in 0..3 {
        l.iteration(32, 800);
    }
    assert_eq!(l.rhythm.kind(), LoopKind::Off);
    // The first update comes before 8 steps... no: after 31; each is over 250 ms.
    assert_eq!(l.over.len(), 3, "{:?}", l.over);
    assert!(l.over.iter().all(|o| matches!(
        o.2,
        Judgment::Unexplained {
            why: Why::Off,
            limit_ns
        } if limit_ns == 250 * MS
    )));
}

#[test]
fn without_stamps_the_looks_tell_the_side_and_without_looks_it_is_not_known() {
    let mut l = Loop::new(settings());
    l.stamps = false;
    for _ in 0..4 {
        l.iteration(32, 800);
    }
    let s = l.rhythm.summary(l.t);
    assert_eq!(s.update_side, Some(Side::Trainer));
    // The looks are every 5 ms: the split is within a look of the truth.
    assert!((s.trainer_secs - 3.2).abs() < 0.05, "{s:?}");
    // A recording's frames alone: no looks, no stamps.
    let mut r = Rhythm::new(settings());
    let mut t = 0;
    for f in 0..200u64 {
        t += if f > 0 && f % 32 == 0 {
            800 * MS
        } else {
            4 * MS
        };
        r.frame(FrameTimes {
            frame_seq: f,
            seen_ns: t,
            ..FrameTimes::default()
        });
    }
    let s = r.summary(t);
    assert_eq!(s.kind, LoopKind::Periodic);
    assert_eq!(
        (s.rollout_frames, s.update_side),
        (Some(32), Some(Side::Unknown))
    );
    assert!(s.unknown_secs > 4.0 && s.trainer_secs == 0.0, "{s:?}");
}

#[test]
fn a_new_run_starts_the_rhythm_over() {
    let mut l = Loop::new(settings());
    for _ in 0..4 {
        l.iteration(32, 800);
    }
    assert_eq!(l.rhythm.kind(), LoopKind::Periodic);
    l.rhythm.frame(FrameTimes {
        frame_seq: 1,
        seen_ns: l.t + MS,
        ..FrameTimes::default()
    });
    assert_eq!(l.rhythm.kind(), LoopKind::Learning);
    assert_eq!(l.rhythm.summary(l.t).pauses, 0);
}

#[test]
fn a_summary_round_trips_through_json_and_reads_in_a_line() {
    let mut l = Loop::new(settings());
    for _ in 0..4 {
        l.iteration(32, 800);
    }
    let s = RhythmSummary {
        time_limits: 2,
        time_limit_frames: Some(200),
        ..l.rhythm.summary(l.t)
    };
    assert_eq!(RhythmSummary::from_json(&s.to_json()), Some(s.clone()));
    let line = s.line();
    assert!(
        line.starts_with(
            "rhythm: rollouts of 32 frames, updates of 0.80 s (the trainer); stepping "
        ),
        "{line}"
    );
    assert!(
        line.ends_with("; 2 time limits of envs in step (truncated together at 200 frames)"),
        "{line}"
    );
    assert_eq!(
        RhythmSummary::from_json(&serde_json::json!({"kind": 3})),
        None
    );
}

fn flags<'a>(dones: &'a [u8], truncs: &'a [u8], resets: &'a [u8]) -> Flags<'a> {
    Flags {
        dones,
        truncateds: Some(truncs),
        resets,
    }
}

#[test]
fn truncations_of_envs_in_step_share_one_length_and_terminations_do_not() {
    let mut e = EndingsInStep::new();
    let zero = [0u8; 8];
    let one = [1u8; 8];
    // Followed from the run's frame 0: the first episodes are whole.
    let none = FrameEndings {
        num_envs: 8,
        ..FrameEndings::default()
    };
    assert_eq!(
        e.frame(0, flags(&zero, &one, &zero)),
        none,
        "frame 0 ends nothing followed"
    );
    assert_eq!(e.frame(1, flags(&zero, &zero, &zero)), none);
    // Every env truncated at frame 200: its 200th frame.
    let x = e.frame(200, flags(&zero, &one, &zero));
    assert_eq!(
        (x.truncated, x.truncated_length, x.lengths_from_attach),
        (8, Some(200), 0)
    );
    assert!(x.time_limit(0.5) && x.burst_envs() == 0);
    // Half of them terminate at 250; then the time limit at 350 is the others' alone,
    // at 400 the first half's, and at 450 they truncate together at differing lengths.
    let half = [1, 1, 1, 1, 0, 0, 0, 0];
    let other = [0, 0, 0, 0, 1, 1, 1, 1];
    let x = e.frame(250, flags(&half, &zero, &zero));
    assert_eq!((x.terminated, x.burst_envs()), (4, 4));
    assert!(!x.time_limit(0.4));
    let x = e.frame(400, flags(&zero, &other, &zero));
    assert_eq!((x.truncated, x.truncated_length), (4, Some(200)));
    let x = e.frame(450, flags(&zero, &one, &zero));
    assert_eq!((x.truncated, x.truncated_length), (8, None));
    assert_eq!(x.burst_envs(), 8);
    // The trainer resets every env.
    let x = e.frame(500, flags(&zero, &zero, &one));
    assert_eq!(x.resets, 8);
    assert!(x.resets_in_step(0.5) && x.burst_envs() == 0);
    // Done wins over truncated, and a frame seen twice ends nothing more.
    let x = e.frame(600, flags(&one, &one, &zero));
    assert_eq!((x.terminated, x.truncated), (8, 0));
    assert_eq!(e.frame(600, flags(&one, &one, &zero)).terminated, 0);
    // Attached mid-episode at frame 50: lengths count from frame 51.
    let mut e = EndingsInStep::new();
    e.frame(50, flags(&zero, &zero, &zero));
    let x = e.frame(200, flags(&zero, &one, &zero));
    assert_eq!((x.truncated_length, x.lengths_from_attach), (Some(150), 8));
}

proptest::proptest! {
    /// The envs a frame's flags end are those a plain loop over every env finds, in order,
    /// whatever the arrays' lengths against the envs' count (a word of eight envs, or a
    /// block of 64, cut by either), with and without truncation flags.
    #[test]
    fn the_endings_are_those_a_plain_loop_over_every_env_finds(
        n in 0usize..200,
        dones in proptest::collection::vec(proptest::prop_oneof![8 => proptest::strategy::Just(0u8), 1 => 1u8..=255], 0..210),
        truncs in proptest::option::of(proptest::collection::vec(proptest::prop_oneof![8 => proptest::strategy::Just(0u8), 1 => 1u8..=255], 0..210)),
        resets in proptest::collection::vec(proptest::prop_oneof![8 => proptest::strategy::Just(0u8), 1 => 1u8..=255], 0..210),
    ) {
        let flags = Flags { dones: &dones, truncateds: truncs.as_deref(), resets: &resets };
        let got: Vec<(usize, FlagEnding)> = flags.endings(n).collect();
        let on = |a: &[u8], e: usize| a.get(e).is_some_and(|&v| v != 0);
        let want: Vec<(usize, FlagEnding)> = (0..n)
            .filter_map(|e| {
                let ending = if on(&dones, e) {
                    FlagEnding::Done
                } else if truncs.as_deref().is_some_and(|t| on(t, e)) {
                    FlagEnding::Truncated
                } else if on(&resets, e) {
                    FlagEnding::Reset
                } else {
                    return None;
                };
                Some((e, ending))
            })
            .collect();
        proptest::prop_assert_eq!(got, want);
    }
}

proptest::proptest! {
    /// Over many envs (several blocks of them) and flag arrays of every length, a frame's
    /// endings are those a plain loop over every env counts, episode lengths included.
    #[test]
    fn endings_in_step_count_what_a_plain_loop_over_every_env_counts(
        n in 1usize..100,
        frames in proptest::collection::vec(
            (0u64..3, proptest::collection::vec(0u8..16, 0..100), 0usize..100, 0usize..100),
            1..30,
        ),
    ) {
        let mut endings = EndingsInStep::new();
        let mut starts = vec![1u64; n];
        let mut from_attach = vec![true; n];
        let mut f = 0u64;
        for (k, (gap, flags, t_len, r_len)) in frames.iter().enumerate() {
            f += 1 + gap;
            // 0 done, 1 truncated, 2 reset, 3 done and truncated; the rest none.
            let pick = |set: &[u8], len: usize| {
                let mut v: Vec<u8> = flags.iter().map(|&x| u8::from(set.contains(&x))).collect();
                v.resize(len, 0);
                v
            };
            let dones = pick(&[0, 3], n);
            let truncs = pick(&[1, 3], *t_len);
            let resets = pick(&[2], *r_len);
            let got = endings.frame(f, Flags { dones: &dones, truncateds: Some(&truncs), resets: &resets });
            if k == 0 {
                starts.fill(f + 1);
                from_attach.fill(f > 0);
                continue;
            }
            let mut want = FrameEndings { num_envs: n as u32, ..FrameEndings::default() };
            let mut lengths = Vec::new();
            let on = |a: &[u8], e: usize| a.get(e).is_some_and(|&v| v != 0);
            for e in 0..n {
                if on(&dones, e) {
                    want.terminated += 1;
                } else if on(&truncs, e) {
                    want.truncated += 1;
                    lengths.push(f - starts[e] + 1);
                    want.lengths_from_attach += u32::from(from_attach[e]);
                } else if on(&resets, e) {
                    want.resets += 1;
                } else {
                    continue;
                }
                starts[e] = f + 1;
                from_attach[e] = false;
            }
            lengths.dedup();
            want.truncated_length = (lengths.len() == 1).then(|| lengths[0]);
            proptest::prop_assert_eq!(got, want, "frame {}", f);
        }
    }
}
