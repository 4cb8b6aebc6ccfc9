use super::*;

/// Frame `seq` of a run of `num_envs` envs, every env recorded: 3 observations and 2
/// actions a row, each value a function of the frame, the env and the index.
fn frame(seq: u64, num_envs: u32) -> RecFrame {
    let (obs_size, act_size) = (3usize, 2usize);
    let v = |e: u32, i: usize, k: f32| seq as f32 * 0.5 + e as f32 * 10.0 + i as f32 + k;
    RecFrame {
        frame_seq: seq,
        // Lock-step, copied in time: the actions that made the frame.
        action_seq: seq,
        rewards: (0..num_envs).map(|e| v(e, 0, 0.25)).collect(),
        dones: vec![0; num_envs as usize],
        truncateds: Some(vec![0; num_envs as usize]),
        resets: vec![0; num_envs as usize],
        envs: (0..num_envs).collect(),
        observations: (0..num_envs)
            .flat_map(|e| (0..obs_size).map(move |i| v(e, i, 0.0)))
            .collect(),
        actions: (0..num_envs)
            .flat_map(|e| (0..act_size).map(move |i| v(e, i, 0.125)))
            .collect(),
        obs_size,
        act_size,
        ..RecFrame::default()
    }
}

/// Runs A and B of `frames` frames each (B's first `frame_seq` 100 later: alignment is
/// from each run's start), B changed at its frame `at` by `plant`; every divergence.
fn compare(
    frames: u64,
    tol: Tolerance,
    mut plant: impl FnMut(u64, &mut RecFrame),
) -> (Vec<Divergence>, CompareCounts) {
    let mut c = Comparer::new(tol);
    let mut found = Vec::new();
    for k in 0..frames {
        let a = frame(1 + k, 4);
        let mut b = frame(1 + k, 4);
        b.frame_seq += 100;
        b.action_seq += 100;
        plant(k, &mut b);
        found.extend(c.frame(k, &a, &b));
    }
    // The comparer keeps each env's first divergence, the one it reported.
    let mut by_env = found.clone();
    by_env.sort_by_key(|d| d.env);
    assert_eq!(c.divergences().copied().collect::<Vec<_>>(), by_env);
    (found, c.counts())
}

#[test]
fn identical_runs_have_no_divergence_and_every_env_is_identical() {
    let (found, counts) = compare(20, Tolerance::EXACT, |_, _| {});
    assert!(found.is_empty(), "{found:?}");
    assert_eq!(counts.frames_compared, 20);
    assert_eq!(counts.envs_identical, 4);
    assert_eq!((counts.envs_diverged, counts.envs_not_compared), (0, 0));
}

#[test]
fn each_origin_is_told_at_its_env_frame_and_index_with_both_values() {
    // env 0: its action 1 and its first observation from frame 5 (the actions made the
    // frame: the policy); env 1: its observation 2 at frame 3 with equal
    // actions; env 2: its reward at frame 7; env 3: its done flag at frame 9.
    let (found, counts) = compare(12, Tolerance::EXACT, |k, b| {
        if k >= 5 {
            b.actions[1] += 1.0;
        }
        if k >= 5 {
            b.observations[0] += 1.0;
        }
        if k >= 3 {
            b.observations[3 + 2] = -7.0;
        }
        if k == 7 {
            b.rewards[2] = 99.0;
        }
        if k == 9 {
            b.dones[3] = 1;
        }
    });
    let at = |env: u32, k: u64| (env, k, 1 + k, 101 + k);
    let got: Vec<_> = found
        .iter()
        .map(|d| {
            (
                (d.env, d.frame, d.frame_seq_a, d.frame_seq_b),
                d.origin,
                d.difference,
            )
        })
        .collect();
    let obs_a = |seq: u64, e: usize, i: usize| frame(seq, 4).observations[e * 3 + i];
    assert_eq!(
        got,
        vec![
            (
                at(1, 3),
                DivergenceOrigin::Simulator,
                Difference::Value {
                    channel: Channel::Obs(2),
                    a: obs_a(4, 1, 2),
                    b: -7.0
                }
            ),
            (
                at(0, 5),
                DivergenceOrigin::Policy,
                Difference::Value {
                    channel: Channel::Act(1),
                    a: frame(6, 4).actions[1],
                    b: frame(6, 4).actions[1] + 1.0
                }
            ),
            (
                at(2, 7),
                DivergenceOrigin::Reward,
                Difference::Value {
                    channel: Channel::Reward,
                    a: frame(8, 4).rewards[2],
                    b: 99.0
                }
            ),
            (
                at(3, 9),
                DivergenceOrigin::Reward,
                Difference::Flag {
                    flag: Flag::Done,
                    a: 0,
                    b: 1
                }
            ),
        ]
    );
    assert_eq!((counts.envs_diverged, counts.envs_identical), (4, 0));
}

/// A recorder that copies a frame late catches the trainer's next actions with it: they
/// are compared as the next frame's (no divergence where the runs are equal), and a frame
/// whose actions neither copy caught has its observations' differences of unknown origin.
#[test]
fn actions_caught_with_the_frame_before_are_the_ones_compared() {
    let mut c = Comparer::new(Tolerance::EXACT);
    let a = |seq| frame(seq, 2);
    // B copied frame 2 late: it holds step 3's actions; frame 3 then also holds step 4's.
    let late = |seq: u64| {
        let mut f = frame(seq, 2);
        f.action_seq = seq + 1;
        f.actions = frame(seq + 1, 2).actions;
        f
    };
    assert!(c.frame(0, &a(1), &a(1)).is_empty());
    assert!(
        c.frame(1, &a(2), &late(2)).is_empty(),
        "step 2's actions not caught"
    );
    assert!(
        c.frame(2, &a(3), &late(3)).is_empty(),
        "step 3's, caught with frame 2"
    );
    // B's frame 4 is late again (step 5's actions): step 4's, caught with B's frame 3,
    // are equal to A's, so an observation that differs is the simulator's.
    let mut b4 = late(4);
    b4.observations[0] += 1.0;
    let found = c.frame(3, &a(4), &b4);
    assert_eq!(
        found.iter().map(|d| (d.env, d.origin)).collect::<Vec<_>>(),
        vec![(0, DivergenceOrigin::Simulator)],
        "step 4's actions were caught with B's frame 3 and are equal"
    );
    // A frame whose actions no copy holds: an observation's difference has no origin.
    let mut c = Comparer::new(Tolerance::EXACT);
    let mut b = late(7);
    b.observations[3] += 1.0;
    let found = c.frame(0, &a(7), &b);
    assert_eq!(
        found.iter().map(|d| (d.env, d.origin)).collect::<Vec<_>>(),
        vec![(1, DivergenceOrigin::Unknown)]
    );
}

/// The engine clears a reset flag as it reads it: a copy of the frame made before that
/// holds it and one made after does not, in the same run. A reset flag alone is no
/// divergence; the reset's effect, the env's next observations, is compared.
#[test]
fn a_reset_flag_one_copy_caught_and_the_other_did_not_is_no_divergence() {
    let mut c = Comparer::new(Tolerance::EXACT);
    let a = frame(1, 3);
    let mut b = frame(1, 3);
    b.resets = vec![0, 1, 1];
    assert!(
        c.frame(0, &a, &b).is_empty(),
        "a reset flag only: no divergence"
    );
    let mut b = frame(2, 3);
    b.resets = vec![0, 1, 0];
    b.observations[3] = 0.0;
    let found = c.frame(1, &frame(2, 3), &b);
    assert_eq!(
        found.iter().map(|d| (d.env, d.origin)).collect::<Vec<_>>(),
        vec![(1, DivergenceOrigin::Simulator)],
        "the reset that took effect, by its observations"
    );
}

#[test]
fn a_flag_set_with_another_byte_is_the_same_flag() {
    let mut c = Comparer::new(Tolerance::EXACT);
    let (mut a, mut b) = (frame(1, 2), frame(1, 2));
    a.truncateds = Some(vec![0, 1]);
    b.truncateds = Some(vec![0, 255]);
    assert!(c.frame(0, &a, &b).is_empty(), "1 and 255 both set the flag");
    b.truncateds = Some(vec![0, 0]);
    let d = c.frame(1, &a, &b);
    assert_eq!(
        d.iter().map(|d| d.difference).collect::<Vec<_>>(),
        vec![Difference::Flag {
            flag: Flag::Truncated,
            a: 1,
            b: 0
        }]
    );
}

#[test]
fn an_env_whose_values_one_recording_lacks_diverges_of_unknown_origin() {
    let mut c = Comparer::new(Tolerance::EXACT);
    let a = frame(1, 3);
    let mut b = frame(1, 3);
    // B kept env 1's values only (not --all-envs); env 2's reward differs.
    b.envs = vec![1];
    b.observations = b.observations[3..6].to_vec();
    b.actions = b.actions[2..4].to_vec();
    b.rewards[2] = -1.0;
    let found = c.frame(0, &a, &b);
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].env, found[0].origin),
        (2, DivergenceOrigin::Unknown)
    );
    // Env 1 is compared in full and equal.
    b.observations[0] += 1.0;
    let found = c.frame(1, &a, &b);
    assert_eq!(
        found.iter().map(|d| (d.env, d.origin)).collect::<Vec<_>>(),
        vec![(1, DivergenceOrigin::Simulator)]
    );
}

#[test]
fn a_tolerance_hides_differences_below_it_and_none_above() {
    let tol = Tolerance {
        abs: 1e-3,
        rel: 1e-2,
    };
    assert!(tol.equal(1.0, 1.0 + 1e-3 + 1e-2 * 0.999));
    assert!(!tol.equal(1.0, 1.0 + 1e-3 + 1e-2 * 1.0101 + 1e-4));
    assert!(tol.equal(f32::NAN, f32::NAN));
    assert!(!tol.equal(f32::NAN, 0.0));
    assert!(!tol.equal(f32::INFINITY, f32::MAX));
    assert!(
        !Tolerance::EXACT.equal(0.0, -0.0),
        "bit for bit: -0 is not 0"
    );
    assert!(tol.equal(0.0, -0.0));
    // Env 0's observation moves by half the tolerance every frame from frame 2: equal
    // until the drift passes it.
    let (found, _) = compare(10, tol, |k, b| {
        if k >= 2 {
            let x = b.observations[1];
            b.observations[1] = x + (k - 1) as f32 * 0.5 * (1e-3 + 1e-2 * x.abs());
        }
    });
    let want = (2..10)
        .find(|&k| {
            let x = frame(1 + k, 4).observations[1];
            !tol.equal(x, x + (k - 1) as f32 * 0.5 * (1e-3 + 1e-2 * x.abs()))
        })
        .expect("the drift passes the tolerance");
    assert_eq!(
        found.iter().map(|d| (d.env, d.frame)).collect::<Vec<_>>(),
        vec![(0, want)]
    );
}

#[test]
fn envs_and_frames_one_run_lacks_are_not_compared() {
    let mut c = Comparer::new(Tolerance::EXACT);
    c.frame(0, &frame(1, 4), &frame(1, 6));
    c.only_b(1);
    c.only_b(1);
    c.only_a(1);
    let counts = c.counts();
    assert_eq!(counts.envs_identical, 4);
    assert_eq!(counts.envs_not_compared, 2, "B's envs 4 and 5");
    assert_eq!(
        (
            counts.frames_compared,
            counts.frames_only_a,
            counts.frames_only_b
        ),
        (1, 1, 2)
    );
}

mod files {
    use super::*;
    use crate::export::synthetic::{self, Spec};
    use std::path::PathBuf;

    /// A recording of 6 envs (envs 0, 2 and 5 with their values) of `frames` frames, env
    /// 0's reward and first observation NaN at `nan_at`; removed when dropped.
    struct File(PathBuf);

    impl File {
        fn write(name: &str, frames: u64, nan_at: Option<u64>) -> Self {
            Self::of(name, &Spec::small(frames, nan_at))
        }

        fn of(name: &str, spec: &Spec) -> Self {
            let path = std::env::temp_dir()
                .join(format!("lrbc-compare-{}-{name}.mcap", std::process::id()));
            let out = std::fs::File::create(&path).unwrap();
            synthetic::write(spec, out).unwrap();
            Self(path)
        }
    }

    impl Drop for File {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn two_recordings_of_one_run_are_identical_and_a_changed_one_diverges_where_it_changed() {
        let a = File::write("a", 300, None);
        let same = File::write("same", 300, None);
        let r = compare_files(&a.0, &same.0, Tolerance::EXACT, false, |_| {}).unwrap();
        assert!(r.divergences.is_empty(), "{:?}", r.divergences);
        assert_eq!(r.counts.frames_compared, 300);
        assert_eq!(
            (r.counts.envs_identical, r.counts.envs_not_compared),
            (6, 0)
        );

        // Env 0's first observation (and its reward) at frame_seq 120: the simulator, at
        // place 119 from the start; env 0 alone.
        let b = File::write("b", 300, Some(120));
        let mut told = Vec::new();
        let r = compare_files(&a.0, &b.0, Tolerance::EXACT, false, |d| told.push(*d)).unwrap();
        assert_eq!(told, r.divergences);
        assert_eq!(r.divergences.len(), 1, "{:?}", r.divergences);
        let d = r.divergences[0];
        assert_eq!(
            (d.env, d.frame, d.frame_seq_a, d.frame_seq_b),
            (0, 119, 120, 120)
        );
        assert_eq!(d.origin, DivergenceOrigin::Simulator);
        match d.difference {
            Difference::Value {
                channel: Channel::Obs(0),
                a,
                b,
            } => assert!(a.is_finite() && b.is_nan(), "{a} {b}"),
            other => panic!("{other:?}"),
        }
        assert_eq!((r.counts.envs_identical, r.counts.envs_diverged), (5, 1));
        assert_eq!(r.name_of(Channel::Obs(0)), Some("obs_0"), "A's names");
    }

    #[test]
    fn frames_one_recording_lacks_are_counted_and_a_missing_file_is_one_line() {
        let a = File::write("long", 300, None);
        let b = File::write("short", 200, None);
        let r = compare_files(&a.0, &b.0, Tolerance::EXACT, false, |_| {}).unwrap();
        assert_eq!(
            (
                r.counts.frames_compared,
                r.counts.frames_only_a,
                r.counts.frames_only_b
            ),
            (200, 100, 0)
        );
        let r = compare_files(&b.0, &a.0, Tolerance::EXACT, false, |_| {}).unwrap();
        assert_eq!((r.counts.frames_only_a, r.counts.frames_only_b), (0, 100));

        let gone = a.0.with_extension("gone");
        let e = compare_files(&a.0, &gone, Tolerance::EXACT, false, |_| {}).unwrap_err();
        let line = e.to_string();
        assert!(line.starts_with("B: ") && line.contains("gone"), "{line}");
        assert!(!line.contains('\n'));
    }

    #[test]
    fn stopping_at_the_first_divergence_reads_no_further() {
        let a = File::write("stop-a", 400, None);
        let b = File::write("stop-b", 400, Some(50));
        let r = compare_files(&a.0, &b.0, Tolerance::EXACT, true, |_| {}).unwrap();
        assert_eq!(r.divergences.len(), 1);
        assert_eq!(r.counts.frames_compared, 50, "frames 1 to 50, and no more");
    }

    /// Runs of 1,000 frames whose episodes last `episode_frames` frames, every reward
    /// raised by `offset`.
    fn episodes_run(name: &str, episode_frames: u64, offset: f32, nan_at: Option<u64>) -> File {
        File::of(
            name,
            &Spec {
                episode_frames,
                reward_offset: offset,
                ..Spec::small(1000, nan_at)
            },
        )
    }

    #[test]
    fn episodes_of_equal_runs_are_not_distinguished_and_higher_rewards_are_told() {
        use lrbc_live::episodes::Ending;
        let a = episodes_run("ep-a", 20, 0.0, None);
        let same = episodes_run("ep-same", 20, 0.0, None);
        let r = compare_files(&a.0, &same.0, Tolerance::EXACT, false, |_| {}).unwrap();
        let run = r.episodes.run;
        // Each env's episodes end every 20 frames: about 50 each, the first began
        // before the recording's start only if the env's first frame is not frame 1.
        assert_eq!(run.a, run.b);
        assert!(run.a.finished >= 6 * 49, "{:?}", run.a);
        assert_eq!(run.a.of(Ending::Done), run.a.finished);
        assert_eq!(run.mean_return().unwrap().estimate, 0.0);
        assert_eq!(run.verdict(), ReturnVerdict::NotDistinguishable);
        assert_eq!(run.finished().estimate, 0.0);
        assert_eq!(r.episodes.envs.len(), 6);
        assert!(
            r.episodes
                .envs
                .iter()
                .all(|t| t.verdict() == ReturnVerdict::NotDistinguishable)
        );

        // Every reward 1 higher: every return as many higher as the episode has frames,
        // 20 (an env's first episode, from frame 1, fewer).
        let b = episodes_run("ep-b", 20, 1.0, None);
        let r = compare_files(&a.0, &b.0, Tolerance::EXACT, false, |_| {}).unwrap();
        let i = r.episodes.run.mean_return().unwrap();
        let lengths = r.episodes.run.a.lengths.mean;
        assert!((i.estimate - lengths).abs() < 1e-3, "{i:?} {lengths}");
        assert!(i.low > 15.0 && i.high < 25.0, "{i:?}");
        assert_eq!(r.episodes.run.verdict(), ReturnVerdict::Higher);
        assert_eq!(r.episodes.run.mean_length().unwrap().estimate, 0.0);
        assert!(
            r.episodes
                .envs
                .iter()
                .all(|t| t.verdict() == ReturnVerdict::Higher)
        );
        let r = compare_files(&b.0, &a.0, Tolerance::EXACT, false, |_| {}).unwrap();
        assert_eq!(r.episodes.run.verdict(), ReturnVerdict::Lower);

        // Longer episodes: fewer finished, 5 frames longer.
        let long = episodes_run("ep-long", 25, 0.0, None);
        let r = compare_files(&a.0, &long.0, Tolerance::EXACT, false, |_| {}).unwrap();
        let run = r.episodes.run;
        assert!(run.b.finished < run.a.finished, "{run:?}");
        assert!(run.finished().high < 0.0, "{:?}", run.finished());
        let len = run.mean_length().unwrap();
        assert!(
            (4.5..=5.0).contains(&len.estimate) && len.sign() == Some(true),
            "{len:?}"
        );
    }

    #[test]
    fn episodes_and_events_count_only_within_the_frames_both_runs_hold() {
        use lrbc_live::detect::EventKind;
        let short = File::of(
            "ev-short",
            &Spec {
                episode_frames: 20,
                ..Spec::small(500, None)
            },
        );
        let long = episodes_run("ev-long", 20, 0.0, Some(800));
        let r = compare_files(&short.0, &long.0, Tolerance::EXACT, false, |_| {}).unwrap();
        assert_eq!(
            r.episodes.run.a, r.episodes.run.b,
            "the long run's tail is left out"
        );
        assert_eq!(r.events.b[EventKind::Nonfinite.position()], 0);
        // Synthetic recordings hold no events of their recorder's.
        assert!(!r.events.recorded_a && !r.events.recorded_b);

        let nan = episodes_run("ev-nan", 20, 0.0, Some(300));
        let a = episodes_run("ev-a", 20, 0.0, None);
        let r = compare_files(&a.0, &nan.0, Tolerance::EXACT, false, |_| {}).unwrap();
        assert_eq!(
            r.events.kinds().count(),
            0,
            "none recorded, none found again"
        );
        // Env 0's episode holding the NaN ends as nonfinite, in B alone.
        assert_eq!(
            r.episodes.envs[0]
                .a
                .of(lrbc_live::episodes::Ending::NonFinite),
            0
        );
        assert_eq!(
            r.episodes.envs[0]
                .b
                .of(lrbc_live::episodes::Ending::NonFinite),
            1
        );
        // A comparison stopped at its first divergence tallies nothing.
        let r = compare_files(&a.0, &nan.0, Tolerance::EXACT, true, |_| {}).unwrap();
        assert_eq!(r.episodes, EpisodesCompared::default());
        assert_eq!(r.events, EventsCompared::default());
    }

    #[test]
    fn the_per_env_table_is_written_as_csv_and_parquet_with_a_row_per_env() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let a = episodes_run("tab-a", 20, 0.0, None);
        let b = episodes_run("tab-b", 20, 1.0, None);
        let r = compare_files(&a.0, &b.0, Tolerance::EXACT, false, |_| {}).unwrap();
        let csv = a.0.with_extension("csv");
        write_compared_episodes(&r.episodes, &csv, crate::export::ExportFormat::Csv).unwrap();
        let text = std::fs::read_to_string(&csv).unwrap();
        let _ = std::fs::remove_file(&csv);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 7, "{text}");
        let header: Vec<&str> = lines[0].split(',').collect();
        assert_eq!(header.first(), Some(&"env"));
        assert_eq!(header.last(), Some(&"verdict"));
        assert_eq!(header.len(), 22);
        for (env, line) in lines[1..].iter().enumerate() {
            let cells: Vec<&str> = line.split(',').collect();
            assert_eq!(cells.len(), header.len(), "{line}");
            assert_eq!(cells[0], env.to_string());
            assert_eq!(cells[21], "higher");
            let diff: f64 = cells[header.iter().position(|h| *h == "return_diff").unwrap()]
                .parse()
                .unwrap();
            assert!((19.0..=20.0).contains(&diff), "{line}");
        }

        let pq = a.0.with_extension("parquet");
        write_compared_episodes(&r.episodes, &pq, crate::export::ExportFormat::Parquet).unwrap();
        let reader = SerializedFileReader::new(std::fs::File::open(&pq).unwrap()).unwrap();
        let rows: Vec<_> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| r.unwrap().to_string())
            .collect();
        let _ = std::fs::remove_file(&pq);
        assert_eq!(rows.len(), 6);
        assert!(rows[0].contains("verdict: \"higher\""), "{}", rows[0]);
        assert!(rows[5].starts_with("{env: 5,"), "{}", rows[5]);

        // No file left behind when the table cannot be written.
        let bad = std::env::temp_dir().join("lrbc-no-such-dir").join("t.csv");
        assert!(
            write_compared_episodes(&r.episodes, &bad, crate::export::ExportFormat::Csv).is_err()
        );
    }

    use crate::export::synthetic::{PlantedValue, SyntheticPlant};

    /// What a plant should be found as: (env, place, origin, channel or flag).
    fn expected(p: &SyntheticPlant) -> (u32, u64, DivergenceOrigin, String) {
        let (origin, what) = match p.value {
            PlantedValue::Obs { index, .. } => (DivergenceOrigin::Simulator, format!("obs{index}")),
            PlantedValue::Act { index, .. } => (DivergenceOrigin::Policy, format!("act{index}")),
            PlantedValue::Reward { .. } => (DivergenceOrigin::Reward, "reward".into()),
            PlantedValue::Done => (DivergenceOrigin::Reward, "done".into()),
        };
        (p.env, p.frame - 1, origin, what)
    }

    fn found(d: &Divergence) -> (u32, u64, DivergenceOrigin, String) {
        let what = match d.difference {
            Difference::Value {
                channel: Channel::Obs(i),
                ..
            } => format!("obs{i}"),
            Difference::Value {
                channel: Channel::Act(i),
                ..
            } => format!("act{i}"),
            Difference::Value {
                channel: Channel::Reward,
                ..
            } => "reward".into(),
            Difference::Flag { flag, .. } => flag.as_str().into(),
        };
        (d.env, d.frame, d.origin, what)
    }

    /// Two runs of 16 envs (every one recorded, 4 observations, 3 actions), B with
    /// `plants`.
    fn planted_pair(tag: &str, plants: Vec<SyntheticPlant>) -> (File, File) {
        let spec = Spec {
            compression: crate::format::Compression::None,
            ..Spec::of(16, 4, 3, 120)
        };
        let a = File::of(&format!("{tag}-a"), &spec);
        let b = File::of(&format!("{tag}-b"), &Spec { plants, ..spec });
        (a, b)
    }

    fn value_strategy() -> impl proptest::strategy::Strategy<Value = PlantedValue> {
        use proptest::prelude::*;
        let delta = prop_oneof![1e-3f32..10.0, -10.0f32..-1e-3];
        prop_oneof![
            (0u32..4, delta.clone()).prop_map(|(index, delta)| PlantedValue::Obs { index, delta }),
            (0u32..3, delta.clone()).prop_map(|(index, delta)| PlantedValue::Act { index, delta }),
            delta.prop_map(|delta| PlantedValue::Reward { delta }),
            Just(PlantedValue::Done),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(24))]

        /// Divergences planted at chosen envs, frames, channels and indices (one per env)
        /// are found exactly there, with their origin, and nothing else is.
        #[test]
        fn every_planted_divergence_is_found_exactly_with_its_origin(
            planted in proptest::collection::btree_map(0u32..16, (1u64..=120, value_strategy()), 0..10),
        ) {
            let plants: Vec<SyntheticPlant> = planted
                .iter()
                .map(|(&env, &(frame, value))| SyntheticPlant { frame, env, value })
                .collect();
            let (a, b) = planted_pair(&format!("prop-{}", plants.len()), plants.clone());
            let r = compare_files(&a.0, &b.0, Tolerance::EXACT, false, |_| {}).unwrap();
            let mut want: Vec<_> = plants.iter().map(expected).collect();
            want.sort_by_key(|w| w.0);
            let got: Vec<_> = r.divergences.iter().map(found).collect();
            proptest::prop_assert_eq!(got, want);
            proptest::prop_assert_eq!(r.counts.envs_diverged, plants.len() as u64);
            proptest::prop_assert_eq!(r.counts.envs_identical, 16 - plants.len() as u64);
            proptest::prop_assert_eq!(r.counts.frames_compared, 120);
        }
    }

    #[test]
    fn a_tolerance_hides_the_differences_below_it_and_nothing_above() {
        let small = |env, frame, value| SyntheticPlant { frame, env, value };
        let plants = vec![
            // Below 1e-3: hidden.
            small(
                0,
                10,
                PlantedValue::Obs {
                    index: 1,
                    delta: 2e-4,
                },
            ),
            small(
                1,
                20,
                PlantedValue::Act {
                    index: 2,
                    delta: -5e-4,
                },
            ),
            small(2, 30, PlantedValue::Reward { delta: 1e-4 }),
            // Above it: found, with the value and origin planted.
            small(
                3,
                40,
                PlantedValue::Obs {
                    index: 0,
                    delta: 3e-3,
                },
            ),
            small(
                4,
                50,
                PlantedValue::Act {
                    index: 0,
                    delta: -0.5,
                },
            ),
            small(5, 60, PlantedValue::Reward { delta: 2e-3 }),
            // A flag is set or clear: no tolerance hides it.
            small(6, 70, PlantedValue::Done),
        ];
        let (a, b) = planted_pair("tolerance", plants.clone());
        let exact = compare_files(&a.0, &b.0, Tolerance::EXACT, false, |_| {}).unwrap();
        assert_eq!(exact.divergences.len(), 7);
        let tol = Tolerance {
            abs: 1e-3,
            rel: 0.0,
        };
        let r = compare_files(&a.0, &b.0, tol, false, |_| {}).unwrap();
        let got: Vec<_> = r.divergences.iter().map(found).collect();
        let want: Vec<_> = plants[3..].iter().map(expected).collect();
        assert_eq!(got, want);
        // A relative tolerance of 1 hides every value's difference up to the larger
        // magnitude, not the flag.
        let loose = Tolerance {
            abs: 1e-3,
            rel: 1.0,
        };
        let r = compare_files(&a.0, &b.0, loose, false, |_| {}).unwrap();
        let got: Vec<_> = r.divergences.iter().map(found).collect();
        assert!(got.contains(&expected(&plants[6])), "{got:?}");
    }

    /// Every frame of the recording `path`, decoded.
    fn frames_of(path: &std::path::Path) -> Vec<RecFrame> {
        let mut out = Vec::new();
        let mut input = std::io::BufReader::new(std::fs::File::open(path).unwrap());
        crate::replay::read_recording(
            &mut input,
            |item| {
                if let crate::replay::StreamItem::Frame { log_ns, data } = item {
                    out.push(RecFrame::decode(log_ns, data).unwrap());
                }
                Ok::<(), crate::replay::ReadError>(())
            },
            |_| {},
        )
        .unwrap();
        out
    }

    #[test]
    fn a_live_run_is_compared_at_its_places_and_what_it_skipped_counts_only_in_the_baseline() {
        let a = File::write("live-a", 200, None);
        let b = File::of(
            "live-b",
            &Spec {
                plants: vec![SyntheticPlant {
                    frame: 60,
                    env: 2,
                    value: PlantedValue::Obs {
                        index: 1,
                        delta: 0.5,
                    },
                }],
                ..Spec::small(200, None)
            },
        );
        let live = frames_of(&b.0);
        let mut baseline = AgainstBaseline::open(&a.0, Tolerance::EXACT).unwrap();
        assert_eq!(baseline.num_envs(), 6);
        let mut found = Vec::new();
        // Frames 1 and 2, then a jump to 50 (the follower fell behind), then on to 70.
        for f in live
            .iter()
            .filter(|f| f.frame_seq <= 2 || (50..=70).contains(&f.frame_seq))
        {
            found.extend(baseline.frame(f));
        }
        assert!(!baseline.baseline_ended());
        let r = baseline.finish().unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (found[0].env, found[0].frame, found[0].origin),
            (2, 59, DivergenceOrigin::Simulator)
        );
        assert_eq!(r.counts.frames_compared, 2 + 21);
        assert_eq!(r.counts.frames_only_a, 47, "frames 3 to 49");
        assert_eq!(r.counts.frames_only_b, 0);
        // Past the baseline's end: only in B.
        let mut baseline = AgainstBaseline::open(&a.0, Tolerance::EXACT).unwrap();
        let mut longer = live[199].clone();
        for f in &live {
            baseline.frame(f);
        }
        assert!(baseline.baseline_ended());
        longer.frame_seq = 201;
        baseline.frame(&longer);
        let r = baseline.finish().unwrap();
        assert_eq!((r.counts.frames_compared, r.counts.frames_only_b), (200, 1));
    }
}
