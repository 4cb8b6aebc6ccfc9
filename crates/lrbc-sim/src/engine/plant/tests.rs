//! The `--plant` grammar: specs parse into their faults and print back, and bad specs
//! are refused with what is wrong. Pure: no segment.

use super::*;

fn plant(spec: &str) -> Plant {
    Plant::parse(spec).unwrap()
}

#[test]
fn done_count_is_the_ceiling_of_the_share_of_the_envs_at_least_one() {
    assert_eq!(done_count(DEFAULT_DONE_SHARE, 64), 48);
    assert_eq!(
        done_count(0.7, 10),
        7,
        "0.7 × 10 is a rounding error above 7"
    );
    assert_eq!(done_count(0.71, 10), 8);
    assert_eq!(done_count(1.0, 4096), 4096);
    assert_eq!(done_count(1e-9, 16), 1);
}

#[test]
fn plant_specs_parse_into_their_faults_and_print_back() {
    let value = |value, env, channel, frames| PlantedFault::Value {
        value,
        env,
        channel,
        frames,
    };
    let cases = [
        (
            "nan@3000:env=5,channel=act,index=3",
            3000,
            value(NonFinite::Nan, 5, PlantChannel::Act { index: 3 }, 1),
        ),
        (
            "nan@1",
            1,
            value(NonFinite::Nan, 0, PlantChannel::Obs { index: 0 }, 1),
        ),
        (
            "inf@7:index=9,frames=4",
            7,
            value(NonFinite::Inf, 0, PlantChannel::Obs { index: 9 }, 4),
        ),
        (
            "-inf@2:channel=reward,env=3",
            2,
            value(NonFinite::NegInf, 3, PlantChannel::Reward, 1),
        ),
        (
            "NaN@5:Channel=OBS",
            5,
            value(NonFinite::Nan, 0, PlantChannel::Obs { index: 0 }, 1),
        ),
        (
            "done-burst@10",
            10,
            PlantedFault::DoneBurst {
                share: 0.75,
                frames: 1,
            },
        ),
        (
            "done-burst@10:share=1,frames=3",
            10,
            PlantedFault::DoneBurst {
                share: 1.0,
                frames: 3,
            },
        ),
        (
            "stall@4",
            4,
            PlantedFault::Stall {
                duration: Duration::from_secs(2),
            },
        ),
        (
            "stall@4:secs=0.3,side=engine",
            4,
            PlantedFault::Stall {
                duration: Duration::from_millis(300),
            },
        ),
        (
            "stall@4:secs=3600",
            4,
            PlantedFault::Stall {
                duration: MAX_STALL,
            },
        ),
        (
            "drift@9",
            9,
            PlantedFault::Drift {
                env: 0,
                index: 0,
                delta: 1e-3,
            },
        ),
        (
            "Drift@150:env=4,index=2,delta=-0.25",
            150,
            PlantedFault::Drift {
                env: 4,
                index: 2,
                delta: -0.25,
            },
        ),
    ];
    for (spec, step, fault) in cases {
        let parsed = Plant::parse(spec).unwrap();
        assert_eq!(parsed, Plant { step, fault }, "{spec}");
        assert_eq!(
            Plant::parse(&parsed.to_string()),
            Ok(parsed.clone()),
            "{spec}"
        );
        assert_eq!(spec.parse::<Plant>(), Ok(parsed));
    }
    assert_eq!(
        plant("nan@3000:env=5,channel=act,index=3").to_string(),
        "nan@3000:env=5,channel=act,index=3"
    );
    assert_eq!(plant("-inf@2:channel=obs,index=0").to_string(), "-inf@2");
}

/// Whether an error is the one a spec should give.
type IsExpected = Box<dyn Fn(&PlantError) -> bool>;

/// Whether an error is a bad value of `key`.
fn bad_value(key: &'static str) -> IsExpected {
    Box::new(move |e| matches!(e, PlantError::BadValue { key: k, .. } if *k == key))
}

#[test]
fn bad_plant_specs_are_refused_with_what_is_wrong() {
    use PlantError as E;
    let cases: Vec<(&str, IsExpected)> = vec![
        (
            "nope@3",
            Box::new(|e| matches!(e, E::UnknownKind(k) if k == "nope")),
        ),
        ("", Box::new(|e| matches!(e, E::UnknownKind(_)))),
        ("nan3", Box::new(|e| matches!(e, E::UnknownKind(_)))),
        ("+inf@3", Box::new(|e| matches!(e, E::UnknownKind(_)))),
        ("nan", Box::new(|e| *e == E::MissingStep)),
        ("nan@", Box::new(|e| *e == E::MissingStep)),
        ("stall:secs=1", Box::new(|e| *e == E::MissingStep)),
        (
            "nan@x",
            Box::new(|e| matches!(e, E::BadStep(s) if s == "x")),
        ),
        ("nan@-1", Box::new(|e| matches!(e, E::BadStep(_)))),
        ("nan@1.5", Box::new(|e| matches!(e, E::BadStep(_)))),
        (
            "nan@99999999999999999999",
            Box::new(|e| matches!(e, E::BadStep(_))),
        ),
        ("nan@0", Box::new(|e| *e == E::StepZero)),
        ("nan@3:", Box::new(|e| matches!(e, E::BadPair(_)))),
        ("nan@3:env", Box::new(|e| matches!(e, E::BadPair(_)))),
        ("nan@3:env=1,", Box::new(|e| matches!(e, E::BadPair(_)))),
        ("nan@3:=1", Box::new(|e| matches!(e, E::BadPair(_)))),
        (
            "nan@3:share=0.5",
            Box::new(|e| matches!(e, E::UnknownKey { key, .. } if key == "share")),
        ),
        (
            "done-burst@3:env=1",
            Box::new(|e| matches!(e, E::UnknownKey { .. })),
        ),
        (
            "stall@3:frames=2",
            Box::new(|e| matches!(e, E::UnknownKey { .. })),
        ),
        (
            "nan@3:env=1,env=2",
            Box::new(|e| matches!(e, E::RepeatedKey(k) if k == "env")),
        ),
        ("nan@3:env=x", bad_value("env")),
        ("nan@3:env=-1", bad_value("env")),
        ("nan@3:channel=dones", bad_value("channel")),
        ("nan@3:index=1.5", bad_value("index")),
        ("nan@3:frames=0", bad_value("frames")),
        ("done-burst@3:frames=0", bad_value("frames")),
        (
            "nan@3:channel=reward,index=0",
            Box::new(|e| *e == E::IndexForReward),
        ),
        ("done-burst@3:share=0", bad_value("share")),
        ("done-burst@3:share=1.01", bad_value("share")),
        ("done-burst@3:share=-0.5", bad_value("share")),
        ("done-burst@3:share=nan", bad_value("share")),
        ("stall@3:secs=0", bad_value("secs")),
        ("stall@3:secs=-2", bad_value("secs")),
        ("stall@3:secs=3600.5", bad_value("secs")),
        ("stall@3:secs=inf", bad_value("secs")),
        ("stall@3:secs=1e-12", bad_value("secs")),
        ("stall@3:side=both", bad_value("side")),
        ("stall@3:side=trainer", Box::new(|e| *e == E::TrainerStall)),
        ("drift@3:delta=0", bad_value("delta")),
        ("drift@3:delta=nan", bad_value("delta")),
        ("drift@3:delta=inf", bad_value("delta")),
        ("drift@3:index=x", bad_value("index")),
        (
            "drift@3:channel=act",
            Box::new(|e| matches!(e, E::UnknownKey { key, .. } if key == "channel")),
        ),
        (
            "drift@3:frames=2",
            Box::new(|e| matches!(e, E::UnknownKey { .. })),
        ),
        (
            "nan@18446744073709551615:frames=2",
            Box::new(|e| matches!(e, E::PastLastStep { .. })),
        ),
    ];
    for (spec, is_expected) in cases {
        let e = Plant::parse(spec).unwrap_err();
        assert!(is_expected(&e), "{spec:?}: {e:?}");
        let line = e.to_string();
        assert!(!line.is_empty() && !line.contains('\n'), "{spec:?}: {line}");
    }
    assert!(
        PlantError::TrainerStall
            .to_string()
            .contains("only the engine side")
    );
}
