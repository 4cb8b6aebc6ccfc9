use super::*;

fn names(obs: &[&str], act: &[&str]) -> Names {
    Names {
        obs: obs.iter().map(|s| s.to_string()).collect(),
        act: act.iter().map(|s| s.to_string()).collect(),
    }
}

fn checker(limits: &Limits, envs: u32, obs: u32, act: u32) -> Checker {
    Checker::new(
        limits,
        envs,
        obs,
        act,
        &names(&["x", "pole_angle", "v"], &["force"]),
    )
    .unwrap()
}

/// Checks one frame of every env: rewards, observations and actions whole.
fn check_all(c: &mut Checker, f: u64, rewards: &[f32], obs: &[f32], act: &[f32]) -> FrameCheck {
    c.begin();
    c.rewards(rewards);
    c.flags(&vec![0; rewards.len()], None);
    c.obs_rows(0, obs);
    c.act_rows(0, act);
    c.finish(f, Coverage::All, Coverage::All).clone()
}

#[test]
fn nan_and_infinities_are_found_in_every_channel_with_their_env_and_index() {
    let mut c = checker(&Limits::default(), 4, 3, 2);
    let mut obs = vec![0.5f32; 12];
    let mut act = vec![0.0f32; 8];
    let mut rewards = vec![1.0f32; 4];
    obs[2 * 3 + 1] = f32::NAN;
    obs[2 * 3 + 2] = f32::INFINITY;
    act[3 * 2] = f32::NEG_INFINITY;
    rewards[1] = f32::NAN;
    let found = check_all(&mut c, 7, &rewards, &obs, &act);
    assert_eq!(found.frame_seq, 7);
    assert_eq!(
        (
            found.nan_values,
            found.inf_values,
            found.out_of_range_values
        ),
        (2, 2, 0)
    );
    let mut hits: Vec<(u32, Channel, u32)> = found
        .hits
        .iter()
        .map(|h| {
            assert_eq!(h.fault, Fault::NonFinite);
            (h.env, h.channel, h.values)
        })
        .collect();
    hits.sort();
    // One hit per env and channel: env 2's observations hold two bad values, the first
    // at index 1.
    assert_eq!(
        hits,
        vec![
            (1, Channel::Reward, 1),
            (2, Channel::Obs(1), 2),
            (3, Channel::Act(0), 1)
        ]
    );
    let clean = check_all(&mut c, 8, &[1.0; 4], &[0.5; 12], &[0.0; 8]);
    assert!(clean.is_clean(), "{:?}", clean.hits);
}

#[test]
fn huge_finite_values_are_no_fault_without_a_bound_and_out_of_range_with_one() {
    let big = vec![3e38f32; 12];
    let mut c = checker(&Limits::default(), 4, 3, 2);
    assert!(check_all(&mut c, 1, &[f32::MAX; 4], &big, &[f32::MIN; 8]).is_clean());
    let limits = Limits {
        bounds: vec![BoundRule::parse("obs=-10:10").unwrap()],
        saturation: None,
    };
    let mut c = checker(&limits, 4, 3, 2);
    let found = check_all(&mut c, 1, &[f32::MAX; 4], &big, &[f32::MIN; 8]);
    assert_eq!(found.out_of_range_values, 12);
    assert!(
        found
            .hits
            .iter()
            .all(|h| h.fault == Fault::OutOfRange && h.values == 3)
    );
    assert_eq!(found.hits.len(), 4);
    assert!(c.bounded(ChannelKind::Observation) && !c.bounded(ChannelKind::Action));
}

#[test]
fn a_rule_for_one_value_by_index_or_name_replaces_the_channels_bound_for_it() {
    let limits = Limits {
        bounds: vec![
            BoundRule::parse("obs=-1:1").unwrap(),
            BoundRule::parse("obs.pole_angle=-0.2:0.2").unwrap(),
            BoundRule::parse("obs[2]=:").unwrap(),
            BoundRule::parse("reward=0:").unwrap(),
        ],
        saturation: None,
    };
    let mut c = checker(&limits, 2, 3, 1);
    // env 0: x within, pole_angle 0.5 out of its own bound, v 100 unbounded.
    // env 1: x 2 out of the channel's bound; its reward below 0.
    let found = check_all(
        &mut c,
        1,
        &[1.0, -1.0],
        &[0.5, 0.5, 100.0, 2.0, 0.0, 0.0],
        &[0.0, 0.0],
    );
    let mut hits: Vec<(u32, Channel)> = found.hits.iter().map(|h| (h.env, h.channel)).collect();
    hits.sort();
    assert_eq!(
        hits,
        vec![
            (0, Channel::Obs(1)),
            (1, Channel::Obs(0)),
            (1, Channel::Reward)
        ]
    );
}

#[test]
fn bounds_that_name_nothing_or_are_not_bounds_are_refused_in_one_line() {
    for (text, says) in [
        ("obs", "CHANNEL=LO:HI"),
        ("obs=1", "LO:HI"),
        ("obs=2:1", "above"),
        ("obs=a:1", "not a number"),
        ("obs=NaN:1", "NaN"),
        ("speed=-1:1", "obs, act or reward"),
        ("reward[0]=-1:1", "no index"),
        ("obs[x]=-1:1", "index"),
        ("obs.=-1:1", "name is missing"),
    ] {
        let e = BoundRule::parse(text).unwrap_err().to_string();
        assert!(e.contains(says), "{text}: {e}");
        assert!(!e.contains('\n'));
    }
    let n = names(&["x"], &["f"]);
    for (text, says) in [
        ("obs[3]=-1:1", "no index 3"),
        ("act.speed=-1:1", "named \"speed\""),
    ] {
        let limits = Limits {
            bounds: vec![BoundRule::parse(text).unwrap()],
            saturation: None,
        };
        let e = Checker::new(&limits, 1, 1, 1, &n).unwrap_err().to_string();
        assert!(e.contains(says), "{text}: {e}");
    }
    for text in [
        "obs=-1:1",
        "act[2]=:0.5",
        "obs.pole_angle=-0.5:",
        "reward=-1e3:1e3",
    ] {
        let r = BoundRule::parse(text).unwrap();
        assert_eq!(BoundRule::parse(&r.display()).unwrap(), r, "{text}");
    }
}

#[test]
fn an_action_held_at_its_bound_is_saturated_from_the_set_frame_on_and_a_gap_starts_over() {
    let limits = Limits {
        bounds: Vec::new(),
        saturation: Some(Saturation {
            bound: Bound { lo: -1.0, hi: 1.0 },
            frames: 3,
        }),
    };
    let mut c = checker(&limits, 2, 1, 2);
    let obs = [0.0f32; 2];
    // env 1's second action at +1 from frame 1 on; env 0 moves.
    let act = [0.3f32, -0.2, 0.5, 1.0];
    let sat = |found: &FrameCheck| -> Vec<(u32, Channel, f32, u32)> {
        found
            .hits
            .iter()
            .filter(|h| h.fault == Fault::Saturated)
            .map(|h| (h.env, h.channel, h.value, h.run_frames))
            .collect()
    };
    assert!(sat(&check_all(&mut c, 1, &[0.0; 2], &obs, &act)).is_empty());
    assert!(sat(&check_all(&mut c, 2, &[0.0; 2], &obs, &act)).is_empty());
    assert_eq!(
        sat(&check_all(&mut c, 3, &[0.0; 2], &obs, &act)),
        vec![(1, Channel::Act(1), 1.0, 3)]
    );
    assert_eq!(sat(&check_all(&mut c, 4, &[0.0; 2], &obs, &act))[0].3, 4);
    // Frame 5's actions were not checked (a copy of the flags only): the run starts over.
    c.begin();
    c.rewards(&[0.0; 2]);
    c.finish(5, Coverage::None, Coverage::None);
    for f in 6..8 {
        assert!(
            sat(&check_all(&mut c, f, &[0.0; 2], &obs, &act)).is_empty(),
            "frame {f}"
        );
    }
    assert_eq!(sat(&check_all(&mut c, 8, &[0.0; 2], &obs, &act)).len(), 1);
    // A frame missed (9 never checked) starts it over too; so does a value off the bound.
    assert!(sat(&check_all(&mut c, 10, &[0.0; 2], &obs, &act)).is_empty());
    let low = [-1.0f32, -1.0, 0.5, 0.9];
    for f in 11..13 {
        assert!(sat(&check_all(&mut c, f, &[0.0; 2], &obs, &low)).is_empty());
    }
    assert_eq!(
        sat(&check_all(&mut c, 13, &[0.0; 2], &obs, &low)),
        vec![(0, Channel::Act(0), -1.0, 3)],
        "env 0 held both actions at -1: one hit, at its first index"
    );
}

#[test]
fn done_and_truncated_envs_are_counted_once_each() {
    let mut c = checker(&Limits::default(), 4, 0, 0);
    c.begin();
    c.flags(&[1, 0, 1, 0], Some(&[1, 1, 0, 0]));
    assert_eq!(c.finish(1, Coverage::None, Coverage::None).envs_ended, 3);
    c.begin();
    c.flags(&[1, 0, 1, 0], None);
    assert_eq!(c.finish(2, Coverage::None, Coverage::None).envs_ended, 2);
}

/// The faults a plain loop finds: per env, channel kind and fault, the first index and
/// the number of values.
fn plain(
    obs: &[f32],
    act: &[f32],
    o: usize,
    a: usize,
    lo: f32,
    hi: f32,
) -> Vec<(u32, Channel, u32)> {
    let mut out: Vec<(u32, Channel, Fault, u32)> = Vec::new();
    let mut note = |env: u32, ch: Channel, v: f32| {
        let fault = if !v.is_finite() {
            Fault::NonFinite
        } else if v < lo || v > hi {
            Fault::OutOfRange
        } else {
            return;
        };
        match out
            .iter_mut()
            .find(|x| x.0 == env && x.1.kind() == ch.kind() && x.2 == fault)
        {
            Some(x) => x.3 += 1,
            None => out.push((env, ch, fault, 1)),
        }
    };
    for (i, &v) in obs.iter().enumerate() {
        note((i / o) as u32, Channel::Obs((i % o) as u32), v);
    }
    for (i, &v) in act.iter().enumerate() {
        note((i / a) as u32, Channel::Act((i % a) as u32), v);
    }
    let mut v: Vec<(u32, Channel, u32)> = out.into_iter().map(|x| (x.0, x.1, x.3)).collect();
    v.sort();
    v
}

proptest::proptest! {
    #[test]
    fn the_block_check_finds_what_a_plain_loop_finds(
        envs in 1u32..300,
        o in 1u32..40,
        a in 1u32..12,
        seed in proptest::collection::vec((0u32..1_000_000, 0u8..8), 0..30),
    ) {
        let (on, an) = ((envs * o) as usize, (envs * a) as usize);
        let mut obs = vec![0.25f32; on];
        let mut act = vec![-0.25f32; an];
        for (at, what) in seed {
            let v = match what {
                0 => f32::NAN,
                1 => f32::INFINITY,
                2 => f32::NEG_INFINITY,
                3 => 11.0,
                4 => -11.0,
                _ => 9.0,
            };
            if at % 2 == 0 {
                obs[at as usize % on] = v;
            } else {
                act[at as usize % an] = v;
            }
        }
        let limits = Limits {
            bounds: vec![
                BoundRule::parse("obs=-10:10").unwrap(),
                BoundRule::parse("act=-10:10").unwrap(),
            ],
            saturation: None,
        };
        let mut c = Checker::new(&limits, envs, o, a, &Names::default()).unwrap();
        c.begin();
        // Observations in pieces of odd sizes, as a follower copies them.
        let mut env = 0u32;
        for rows in [1u32, 7, 64, 1000] {
            let rows = rows.min(envs - env);
            let at = (env * o) as usize;
            c.obs_rows(env, &obs[at..at + (rows * o) as usize]);
            env += rows;
            if env == envs { break; }
        }
        if env < envs {
            c.obs_rows(env, &obs[(env * o) as usize..]);
        }
        c.act_rows(0, &act);
        let found = c.finish(1, Coverage::All, Coverage::All);
        let mut got: Vec<(u32, Channel, u32)> = found.hits.iter().map(|h| (h.env, h.channel, h.values)).collect();
        got.sort();
        proptest::prop_assert_eq!(got, plain(&obs, &act, o as usize, a as usize, -10.0, 10.0));
    }
}
