#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a step that fails fails the test"
)]

use super::*;
use crate::export::synthetic::{self, Spec};

/// A finished, complete and finite episode of env `env` from frame `first` to `last`.
fn episode(env: u32, first: u64, last: u64) -> Episode {
    Episode {
        env,
        first_frame: first,
        last_frame: last,
        first_ns: first * 1_000_000,
        last_ns: last * 1_000_000,
        ret: 1.0,
        min_reward: 0.0,
        max_reward: 1.0,
        ending: Ending::Done,
        lacking: 0,
        began_before: false,
        nonfinite_frame: None,
    }
}

/// The counts of what was left out: going on, incomplete, non-finite, without rows,
/// without an image.
fn left_out(c: &ChosenEpisodes) -> [u64; 5] {
    let s = &c.summary;
    [
        s.running,
        s.incomplete,
        s.nonfinite,
        s.without_rows,
        s.without_image,
    ]
}

/// `e` taken alone (its env's rows in every frame, an image before its first frame).
fn taken_alone(e: &Episode) -> ChosenEpisodes {
    let mut c = ChosenEpisodes::default();
    take(&mut c, e, false, true);
    c
}

#[test]
fn a_finished_complete_finite_episode_with_its_rows_goes_in() {
    for ending in [Ending::Done, Ending::Truncated, Ending::Reset] {
        let c = taken_alone(&Episode {
            ending,
            ..episode(2, 10, 20)
        });
        assert_eq!(left_out(&c), [0; 5], "{ending:?}");
        assert_eq!(c.keys, HashSet::from([(2, 10)]), "{ending:?}");
        assert_eq!(c.envs, BTreeSet::from([2]), "{ending:?}");
    }
}

#[test]
fn an_episode_going_on_at_the_end_is_left_out_as_running() {
    let c = taken_alone(&Episode {
        ending: Ending::Running,
        ..episode(2, 10, 20)
    });
    assert_eq!(left_out(&c), [1, 0, 0, 0, 0]);
    assert!(c.keys.is_empty() && c.envs.is_empty());
}

#[test]
fn an_episode_lacking_frames_is_left_out_as_incomplete() {
    let c = taken_alone(&Episode {
        lacking: 1,
        ..episode(2, 10, 20)
    });
    assert_eq!(left_out(&c), [0, 1, 0, 0, 0]);
    assert!(c.keys.is_empty() && c.envs.is_empty());
}

#[test]
fn an_episode_begun_before_the_first_frame_is_left_out_as_incomplete() {
    let c = taken_alone(&Episode {
        began_before: true,
        ..episode(2, 1, 20)
    });
    assert_eq!(left_out(&c), [0, 1, 0, 0, 0]);
    assert!(c.keys.is_empty() && c.envs.is_empty());
}

#[test]
fn an_episode_with_a_non_finite_value_is_left_out_as_nonfinite() {
    let c = taken_alone(&Episode {
        ending: Ending::NonFinite,
        ret: f64::NAN,
        nonfinite_frame: Some(15),
        ..episode(2, 10, 20)
    });
    assert_eq!(left_out(&c), [0, 0, 1, 0, 0]);
    assert!(c.keys.is_empty() && c.envs.is_empty());
}

#[test]
fn an_episode_of_an_env_whose_row_a_frame_lacked_is_left_out_without_rows() {
    let mut c = ChosenEpisodes::default();
    take(&mut c, &episode(2, 10, 20), true, true);
    assert_eq!(left_out(&c), [0, 0, 0, 1, 0]);
    assert!(c.keys.is_empty() && c.envs.is_empty());
}

/// An episode that breaks several rules is left out once, for the first rule in the
/// order the export prints them.
#[test]
fn an_episode_that_breaks_several_rules_is_counted_once_by_the_first() {
    let bad = Episode {
        ending: Ending::NonFinite,
        lacking: 3,
        ..episode(2, 10, 20)
    };
    let mut c = ChosenEpisodes::default();
    take(&mut c, &bad, true, false);
    assert_eq!(left_out(&c), [0, 1, 0, 0, 0]);
    let mut c = ChosenEpisodes::default();
    take(&mut c, &Episode { lacking: 0, ..bad }, true, false);
    assert_eq!(left_out(&c), [0, 0, 1, 0, 0]);
    assert!(c.keys.is_empty() && c.imageless.is_empty());
}

/// Envs 0 and 1 each with an episode from frame 1 (before any image) and one from frame
/// 50 (after their env's first image).
fn chosen_before_and_after_images() -> ChosenEpisodes {
    let mut c = ChosenEpisodes::default();
    for env in [0, 1] {
        take(&mut c, &episode(env, 1, 49), false, false);
        take(&mut c, &episode(env, 50, 90), false, true);
    }
    assert_eq!(c.keys.len(), 4);
    assert_eq!(c.imageless, HashSet::from([(0, 1), (1, 1)]));
    c
}

fn images(of: &[(u32, (u32, u32, &str))]) -> BTreeMap<u32, (u32, u32, String)> {
    of.iter()
        .map(|(env, (w, h, enc))| (*env, (*w, *h, (*enc).to_string())))
        .collect()
}

#[test]
fn episodes_begun_before_their_envs_first_image_are_left_out_when_the_images_go_in() {
    let mut c = chosen_before_and_after_images();
    put_images(
        &mut c,
        &images(&[(0, (32, 24, "rgb8")), (1, (32, 24, "rgb8"))]),
    );
    assert_eq!(c.image, Some((32, 24, "rgb8".to_string())));
    assert_eq!(left_out(&c), [0, 0, 0, 0, 2]);
    assert_eq!(c.keys, HashSet::from([(0, 50), (1, 50)]));
    assert_eq!(c.envs, BTreeSet::from([0, 1]));
    assert_eq!(c.summary.image_note, None);
}

#[test]
fn an_env_whose_every_episode_began_before_its_image_is_left_out_whole() {
    let mut c = ChosenEpisodes::default();
    take(&mut c, &episode(0, 1, 49), false, true);
    take(&mut c, &episode(1, 1, 49), false, false);
    put_images(
        &mut c,
        &images(&[(0, (32, 24, "mono8")), (1, (32, 24, "mono8"))]),
    );
    assert_eq!(left_out(&c), [0, 0, 0, 0, 1]);
    assert_eq!(c.keys, HashSet::from([(0, 1)]));
    assert_eq!(c.envs, BTreeSet::from([0]));
}

#[test]
fn images_that_do_not_go_in_leave_no_episode_out() {
    for (first_images, note) in [
        (
            images(&[(0, (32, 24, "rgb8")), (1, (16, 12, "rgb8"))]),
            "the envs' camera images differ in size or format",
        ),
        (
            images(&[(0, (32, 24, "jpeg")), (1, (32, 24, "jpeg"))]),
            "camera images of encoding \"jpeg\" are not colour or grey images",
        ),
    ] {
        let mut c = chosen_before_and_after_images();
        put_images(&mut c, &first_images);
        assert_eq!(c.image, None, "{note}");
        assert_eq!(c.summary.image_note.as_deref(), Some(note));
        assert_eq!(left_out(&c), [0; 5], "{note}");
        assert_eq!(c.keys.len(), 4, "{note}");
    }
    // No image at all: nothing to say, nothing left out.
    let mut c = chosen_before_and_after_images();
    put_images(&mut c, &BTreeMap::new());
    assert_eq!(
        (c.image.clone(), c.summary.image_note.clone()),
        (None, None)
    );
    assert_eq!(left_out(&c), [0; 5]);
}

/// The whole first pass over a recording of 6 envs (rows of envs 0, 2 and 5 only), each
/// env's episodes ending every 20 frames (env `i` `i` frames earlier), a NaN in env 0's
/// frame 25, 110 frames: each env ends 5 episodes and has one going on at the end.
#[test]
fn the_first_pass_leaves_out_each_episode_by_its_rule() {
    let spec = Spec {
        episode_frames: 20,
        ..Spec::small(110, Some(25))
    };
    let path =
        std::env::temp_dir().join(format!("lrbc-lerobot-choose-{}.mcap", std::process::id()));
    let file = File::create(&path).unwrap();
    synthetic::write(&spec, file).unwrap();
    let c = choose(&path, |_| {});
    let _ = std::fs::remove_file(&path);
    let c = c.unwrap();
    // Going on: one per env; without rows: the 5 of each of envs 1, 3 and 4; non-finite:
    // env 0's episode of frames 21 to 40.
    assert_eq!(left_out(&c), [6, 0, 1, 15, 0]);
    let mut keys: Vec<Key> = c.keys.iter().copied().collect();
    keys.sort_unstable();
    let firsts: [(u32, &[u64]); 3] = [
        (0, &[1, 41, 61, 81]),
        (2, &[1, 19, 39, 59, 79]),
        (5, &[1, 16, 36, 56, 76]),
    ];
    let expected: Vec<Key> = firsts
        .iter()
        .flat_map(|(env, firsts)| firsts.iter().map(move |f| (*env, *f)))
        .collect();
    assert_eq!(keys, expected);
    assert_eq!(c.envs, BTreeSet::from([0, 2, 5]));
}
