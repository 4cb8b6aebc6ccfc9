use super::*;
use crate::check::{Checker, Coverage, FrameCheck};
use crate::rhythm::{Flags, FrameTimes};
use crate::watch::State;
use lrbc::layout::{Names, RegionKind};

const MS: u64 = 1_000_000;

fn names() -> Names {
    Names {
        obs: vec!["x".into(), "pole_angle".into()],
        act: vec!["force".into()],
    }
}

/// Frames of 16 envs, 2 observations and 1 action each, checked as the follower does.
struct Run {
    checker: Checker,
    detector: Detector,
    events: Vec<Event>,
}

impl Run {
    fn new() -> Self {
        Self::with(DetectSettings::default())
    }

    fn with(settings: DetectSettings) -> Self {
        Self {
            checker: Checker::new(&settings.limits, 16, 2, 1, &names()).unwrap(),
            detector: Detector::new(settings, 16, names()),
            events: Vec::new(),
        }
    }

    /// Frame `f` at `f` ms, every env checked; `edit` plants faults.
    fn frame(&mut self, f: u64, edit: impl FnOnce(&mut [f32], &mut [f32], &mut [f32], &mut [u8])) {
        self.frame_covered(f, Coverage::All, Coverage::All, edit);
    }

    fn frame_covered(
        &mut self,
        f: u64,
        obs_cover: Coverage,
        act_cover: Coverage,
        edit: impl FnOnce(&mut [f32], &mut [f32], &mut [f32], &mut [u8]),
    ) {
        let (mut obs, mut act, mut rew, mut dones) = (
            vec![0.1f32; 32],
            vec![0.2f32; 16],
            vec![1.0f32; 16],
            vec![0u8; 16],
        );
        edit(&mut obs, &mut act, &mut rew, &mut dones);
        let c = &mut self.checker;
        c.begin();
        c.rewards(&rew);
        c.flags(&dones, None);
        if !obs_cover.is_none() {
            c.obs_rows(0, &obs);
        }
        if !act_cover.is_none() {
            c.act_rows(0, &act);
        }
        let check: FrameCheck = c.finish(f, obs_cover, act_cover).clone();
        let times = FrameTimes {
            frame_seq: f,
            seen_ns: f * MS,
            ..FrameTimes::default()
        };
        let flags = Flags {
            dones: &dones,
            truncateds: None,
            resets: &[0; 16],
        };
        self.detector.frame(times, &check, flags, &mut self.events);
    }

    /// The newest form of each event, by id.
    fn latest(&self) -> Vec<Event> {
        let mut log = EventLog::default();
        for e in &self.events {
            log.apply(e.clone());
        }
        log.events().iter().cloned().collect()
    }
}

#[test]
fn a_one_frame_nan_in_an_observation_is_one_event_of_the_simulator_that_ends_at_the_next_frame() {
    let mut r = Run::new();
    for f in 1..=10 {
        r.frame(f, |obs, _, _, _| {
            if f == 5 {
                obs[5 * 2 + 1] = f32::NAN;
            }
        });
    }
    let events = r.latest();
    assert_eq!(events.len(), 1, "{events:?}");
    let e = &events[0];
    assert_eq!(e.kind, EventKind::Nonfinite);
    assert_eq!((e.first_frame, e.last_frame, e.count), (5, 5, 1));
    assert_eq!(
        (e.env, e.channel, e.index),
        (
            Some(5),
            Some(crate::check::ChannelKind::Observation),
            Some(1)
        )
    );
    assert_eq!(e.name.as_deref(), Some("pole_angle"));
    assert!(e.value.is_some_and(f64::is_nan));
    assert_eq!(e.origin, Some(Origin::Simulator));
    assert!(!e.ongoing, "ended at frame 6, which was clean");
    assert_eq!(e.time_ns, 5 * MS);
    // Written twice: found, and ended; never once per frame.
    assert_eq!(r.events.len(), 2);
    let json = e.to_json();
    assert_eq!(json["kind"], "nonfinite");
    assert_eq!(json["value"], "NaN");
    assert_eq!(json["origin"], "simulator");
    assert_eq!(
        Event::from_json(&json).as_ref().map(|x| x.to_json()),
        Some(json)
    );
}

#[test]
fn the_origin_is_the_policy_when_the_actions_are_bad_first_and_unknown_when_nothing_tells() {
    let mut r = Run::new();
    r.frame(1, |_, _, _, _| {});
    // Frame 2: env 3's action NaN, its observation finite: the policy.
    r.frame(2, |_, act, _, _| act[3] = f32::INFINITY);
    // Frame 3: env 7's action and observation both bad, frame 2 checked clean for env 7:
    // the action came first.
    r.frame(3, |obs, act, _, _| {
        act[7] = f32::NAN;
        obs[14] = f32::NAN;
    });
    // Frame 5 (frame 4 not checked): env 9 both bad, nothing tells which came first.
    r.frame(5, |obs, act, _, _| {
        act[9] = f32::NAN;
        obs[18] = f32::NAN;
    });
    // Frame 6: env 11's reward bad, its actions not checked.
    r.frame_covered(6, Coverage::None, Coverage::None, |_, _, rew, _| {
        rew[11] = f32::NAN;
    });
    let origin = |env: u32| {
        r.latest()
            .iter()
            .filter(|e| e.env == Some(env))
            .map(|e| e.origin)
            .collect::<Vec<_>>()
    };
    assert_eq!(origin(3), vec![Some(Origin::Policy)]);
    assert_eq!(
        origin(7),
        vec![Some(Origin::Policy), Some(Origin::Policy)],
        "both of env 7's events"
    );
    assert_eq!(
        origin(9),
        vec![Some(Origin::Unknown), Some(Origin::Unknown)]
    );
    assert_eq!(origin(11), vec![Some(Origin::Unknown)]);
}

#[test]
fn a_bad_observation_that_makes_the_next_action_bad_keeps_the_simulators_origin() {
    let mut r = Run::new();
    r.frame(1, |_, _, _, _| {});
    r.frame(2, |obs, _, _, _| obs[4] = f32::NAN);
    // The policy read the NaN and answered with one.
    r.frame(3, |_, act, _, _| act[2] = f32::NAN);
    let events = r.latest();
    assert_eq!(events.len(), 2);
    assert!(
        events.iter().all(|e| e.origin == Some(Origin::Simulator)),
        "{events:?}"
    );
}

#[test]
fn a_fault_that_lasts_is_one_event_with_its_frames_counted_even_across_frames_not_checked() {
    let mut r = Run::new();
    for f in 1..=400u64 {
        // Frames 100..=300 of env 2 hold an infinite reward; frames 150..=160 had their
        // rewards checked but not their values (the event goes on regardless).
        let cover = if (150..=160).contains(&f) {
            Coverage::None
        } else {
            Coverage::All
        };
        r.frame_covered(f, cover.clone(), cover, |_, _, rew, _| {
            if (100..=300).contains(&f) {
                rew[2] = f32::NEG_INFINITY;
            }
        });
    }
    let events = r.latest();
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert_eq!((e.first_frame, e.last_frame, e.count), (100, 300, 201));
    assert!(!e.ongoing);
    // Found, refreshed at most once a second of the run (200 ms here: none), ended.
    assert_eq!(r.events.len(), 2, "never written once per frame");
    assert_eq!(r.detector.totals().inf_values, 201);
    assert_eq!(r.detector.totals().envs_affected, 1);
    assert_eq!(r.detector.totals().frames_checked, 400 - 11);
    assert_eq!(r.detector.totals().frames_flags_checked, 400);
}

#[test]
fn an_event_that_goes_on_is_written_again_about_once_a_second_and_stays_ongoing_at_the_end() {
    let mut r = Run::new();
    for f in 1..=3500u64 {
        r.frame(f, |obs, _, _, _| obs[0] = f32::NAN);
    }
    let mut out = Vec::new();
    r.detector.finish(3600 * MS, &mut out);
    r.events.extend(out);
    let forms = r.events.len();
    assert!(
        (3..=6).contains(&forms),
        "found, three refreshes, the end form: {forms}"
    );
    let e = &r.latest()[0];
    assert!(e.ongoing);
    assert_eq!((e.first_frame, e.last_frame, e.count), (1, 3500, 3500));
}

#[test]
fn more_than_the_set_share_of_envs_ending_in_one_frame_is_a_done_burst() {
    let mut r = Run::new();
    for f in 1..=20u64 {
        r.frame(f, |_, _, _, dones| {
            // 8 of 16 is no burst (at most half), 9 is; frames 10 and 11 in a row.
            let n = match f {
                5 => 8,
                10 | 11 => 9,
                _ => 1,
            };
            dones[..n].fill(1);
        });
    }
    let events = r.latest();
    assert_eq!(events.len(), 1, "{events:?}");
    let e = &events[0];
    assert_eq!(e.kind, EventKind::DoneBurst);
    assert_eq!((e.first_frame, e.last_frame, e.count), (10, 11, 2));
    assert_eq!(e.values, Some(9));
}

#[test]
fn with_rhythm_learning_off_frame_seq_still_for_longer_than_the_set_multiple_is_a_stall_told_by_which_side_waits()
 {
    let mut r = Run::with(DetectSettings {
        learn_rhythm: false,
        ..DetectSettings::default()
    });
    let mut out = Vec::new();
    // 10 ms a frame.
    for f in 1..=40u64 {
        r.detector.tick(f * 10 * MS, f, Some(f), &mut out);
    }
    // Still at 40 for 180 ms: under 20 × 10 ms = 200 ms (and the 250 ms minimum).
    r.detector.tick(580 * MS, 40, Some(40), &mut out);
    assert!(out.is_empty(), "{out:?}");
    // 260 ms: over both.
    r.detector.tick(660 * MS, 40, Some(40), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].kind, EventKind::Stall);
    assert_eq!(
        out[0].origin,
        Some(Origin::Policy),
        "action_seq == frame_seq: the trainer"
    );
    assert_eq!((out[0].first_frame, out[0].time_ns), (40, 400 * MS));
    assert!(out[0].ongoing);
    r.detector.tick(2_000 * MS, 41, Some(41), &mut out);
    let end = out.last().unwrap();
    assert!(!end.ongoing);
    assert_eq!(end.last_frame, 41);
    assert!((end.value.unwrap() - 1.6).abs() < 1e-9, "{:?}", end.value);
    // The stall's length is no interval of the run: the next one is found as soon.
    out.clear();
    for f in 42..=60u64 {
        r.detector
            .tick(2_000 * MS + (f - 41) * 10 * MS, f, Some(f + 1), &mut out);
    }
    r.detector
        .tick(2_190 * MS + 300 * MS, 60, Some(61), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].origin,
        Some(Origin::Simulator),
        "action_seq ahead: the engine"
    );
}

#[test]
fn ring_faults_of_one_ring_and_method_within_a_second_are_one_event() {
    let mut r = Run::new();
    let mut out = Vec::new();
    let err = |m: &str| RingFault::Error {
        ring: RegionKind::CmdS2c,
        method: m.into(),
        correlation_id: 4,
        error: "no such agent".into(),
    };
    r.detector.ring(err("GetAgentSchema"), 0, &mut out);
    r.detector.ring(err("GetAgentSchema"), 500 * MS, &mut out);
    r.detector.ring(err("ResetAgent"), 600 * MS, &mut out);
    r.detector.tick(1_400 * MS, 0, Some(0), &mut out);
    r.detector.ring(err("GetAgentSchema"), 2_000 * MS, &mut out);
    r.detector.ring(
        RingFault::Lost {
            ring: RegionKind::CmdC2s,
            lost_bytes: 4096,
            lost_entries: Some(3),
        },
        2_000 * MS,
        &mut out,
    );
    r.detector.finish(2_100 * MS, &mut out);
    r.events = out;
    let events = r.latest();
    let summary: Vec<(EventKind, Option<&str>, u64, bool)> = events
        .iter()
        .map(|e| (e.kind, e.method.as_deref(), e.count, e.ongoing))
        .collect();
    assert_eq!(
        summary,
        vec![
            (EventKind::RpcError, Some("GetAgentSchema"), 2, false),
            (EventKind::RpcError, Some("ResetAgent"), 1, false),
            (EventKind::RpcError, Some("GetAgentSchema"), 1, false),
            (EventKind::RingLoss, None, 1, false),
        ]
    );
    assert_eq!(events[3].value, Some(4096.0));
    assert_eq!(events[3].ring.as_deref(), Some("cmd_c2s"));
    assert!(
        events[0].message.contains("no such agent"),
        "{}",
        events[0].message
    );
}

#[test]
fn a_state_change_is_an_event_until_the_segment_is_back() {
    let mut r = Run::new();
    let mut out = Vec::new();
    r.detector.state(State::Stale, None, 1, &mut out);
    assert!(out.is_empty(), "stale is a stall's business");
    r.detector
        .state(State::EngineGone, Some("pid 42"), 2, &mut out);
    r.detector.state(State::EngineGone, None, 3, &mut out);
    r.detector.state(State::Attached, None, 9, &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].kind, EventKind::State);
    assert!(out[0].ongoing && !out[1].ongoing);
    assert_eq!(out[1].end_time_ns, 9);
    assert_eq!(out[0].message, "the engine is gone (pid 42)");
}

#[test]
fn a_new_run_ends_what_was_open() {
    let mut r = Run::new();
    r.frame(100, |obs, _, _, _| obs[0] = f32::NAN);
    r.frame(5, |_, _, _, _| {});
    let events = r.latest();
    assert_eq!(events.len(), 1);
    assert!(!events[0].ongoing);
    assert_eq!(events[0].last_frame, 100);
}

#[test]
fn the_log_keeps_the_newest_form_of_each_event_within_its_bound_and_counts_every_one() {
    let mut log = EventLog::new(3);
    let e = |id: u64, ongoing: bool| Event {
        ongoing,
        env: Some(0),
        ..Event::new(id, EventKind::Nonfinite, id, id)
    };
    log.apply(e(1, true));
    log.apply(e(1, false));
    for id in 2..=5 {
        log.apply(e(id, true));
    }
    // A later form of a dropped event changes nothing.
    log.apply(e(1, false));
    let ids: Vec<u64> = log.events().iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![3, 4, 5]);
    assert_eq!(log.dropped, 2);
    assert_eq!(log.totals().of(EventKind::Nonfinite), 5);
    let mut out = Vec::new();
    let (next, missed) = log.updates_since(0, &mut out);
    assert_eq!((next, missed, out.len()), (7, 0, 7));
    out.clear();
    assert_eq!(log.updates_since(next, &mut out), (7, 0));
    assert!(out.is_empty());
}

/// A lock-step loop of 16 envs through the detector, as the follower feeds it: the
/// counters looked at every 5 ms, each frame taken with both stamps and its flags.
struct LoopRun {
    checker: Checker,
    detector: Detector,
    events: Vec<Event>,
    t: u64,
    frame: u64,
    /// Each env's episode length at which it is truncated (0: never).
    time_limit: u64,
    /// Frames each env's episode has run.
    ran: Vec<u64>,
}

impl LoopRun {
    fn new(settings: DetectSettings, time_limit: u64) -> Self {
        Self {
            checker: Checker::new(&settings.limits, 16, 2, 1, &names()).unwrap(),
            detector: Detector::new(settings, 16, names()),
            events: Vec::new(),
            t: 1_000 * MS,
            frame: 0,
            time_limit,
            ran: vec![0; 16],
        }
    }

    /// One step: the trainer's turn takes `trainer_ms`, the engine's `engine_ms`; the
    /// envs in `terminate` are done in the new frame, and those at the time limit
    /// truncated.
    fn step(&mut self, trainer_ms: u64, engine_ms: u64, terminate: &[usize]) {
        let f = self.frame;
        let acted = self.t + trainer_ms * MS;
        let published = acted + engine_ms * MS;
        let mut look = self.t + 5 * MS;
        while look < published {
            let a = if look < acted { f } else { f + 1 };
            self.detector.tick(look, f, Some(a), &mut self.events);
            look += 5 * MS;
        }
        self.frame += 1;
        self.t = published;
        let (mut dones, mut truncs) = (vec![0u8; 16], vec![0u8; 16]);
        for e in 0..16 {
            self.ran[e] += 1;
            if terminate.contains(&e) {
                dones[e] = 1;
            } else if self.time_limit > 0 && self.ran[e] == self.time_limit {
                truncs[e] = 1;
            }
            if dones[e] + truncs[e] > 0 {
                self.ran[e] = 0;
            }
        }
        let c = &mut self.checker;
        c.begin();
        c.rewards(&[1.0; 16]);
        c.flags(&dones, Some(&truncs));
        c.obs_rows(0, &[0.1; 32]);
        c.act_rows(0, &[0.2; 16]);
        let check = c.finish(self.frame, Coverage::All, Coverage::All).clone();
        let times = FrameTimes {
            frame_seq: self.frame,
            seen_ns: published,
            frame_time_ns: Some(published),
            action_time_ns: Some(acted),
        };
        let flags = Flags {
            dones: &dones,
            truncateds: Some(&truncs),
            resets: &[0; 16],
        };
        self.detector.frame(times, &check, flags, &mut self.events);
    }

    /// A rollout of `n` frames of 4 ms, its last step holding an update of `update_ms`.
    fn iteration(&mut self, n: u64, update_ms: u64) {
        for _ in 1..n {
            self.step(3, 1, &[]);
        }
        self.step(update_ms, 1, &[]);
    }

    fn of_kind(&self, kind: EventKind) -> Vec<Event> {
        let mut log = EventLog::default();
        for e in &self.events {
            log.apply(e.clone());
        }
        log.events()
            .iter()
            .filter(|e| e.kind == kind)
            .cloned()
            .collect()
    }
}

#[test]
fn a_ppo_loop_gives_at_most_one_pause_of_unknown_rhythm_and_no_stall_and_a_hang_is_a_stall() {
    let mut r = LoopRun::new(DetectSettings::default(), 0);
    for _ in 0..15 {
        r.iteration(32, 800);
    }
    assert!(r.of_kind(EventKind::Stall).is_empty(), "{:?}", r.events);
    let pauses = r.of_kind(EventKind::Pause);
    assert_eq!(pauses.len(), 1, "{pauses:?}");
    let p = &pauses[0];
    assert_eq!((p.first_frame, p.last_frame, p.ongoing), (31, 32, false));
    assert_eq!(p.origin, Some(Origin::Policy));
    assert!(
        p.message.contains("a pause of unknown rhythm"),
        "{}",
        p.message
    );
    assert!(!EventKind::Pause.is_fault());
    // A 6 s hang at the next update: one stall, the trainer's, at its frame.
    r.iteration(32, 6_000);
    let stalls = r.of_kind(EventKind::Stall);
    assert_eq!(stalls.len(), 1, "{stalls:?}");
    let s = &stalls[0];
    assert_eq!((s.first_frame, s.last_frame), (15 * 32 + 31, 16 * 32));
    assert_eq!(s.origin, Some(Origin::Policy));
    assert!((s.usual.unwrap() - 0.801).abs() < 0.002, "{s:?}");
    assert!((s.value.unwrap() - 6.0).abs() < 0.01, "{s:?}");
    assert!(
        s.message
            .contains("the loop's usual update of 0.80 s after a rollout of 32 frames"),
        "{}",
        s.message
    );
    assert!(
        s.message.contains("waiting for the trainer's actions"),
        "{}",
        s.message
    );
    // The rhythm the detector tells.
    let rh = r.detector.rhythm(r.t);
    assert_eq!((rh.rollout_frames, rh.stalls, rh.pauses), (Some(32), 1, 16));
    // An engine-side wait mid-rollout is a stall of the simulator.
    for _ in 0..10 {
        r.step(3, 1, &[]);
    }
    r.step(3, 400, &[]);
    let stalls = r.of_kind(EventKind::Stall);
    assert_eq!(stalls.len(), 2, "{stalls:?}");
    assert_eq!(stalls[1].origin, Some(Origin::Simulator));
    assert!(
        stalls[1]
            .message
            .contains("The loop's pauses are the trainer's"),
        "{}",
        stalls[1].message
    );
    assert_eq!(stalls[1].usual, None);
}

#[test]
fn envs_in_step_at_the_time_limit_are_counted_and_a_termination_burst_is_a_done_burst() {
    let mut r = LoopRun::new(DetectSettings::default(), 50);
    for _ in 0..200 {
        r.step(3, 1, &[]);
    }
    assert!(r.of_kind(EventKind::DoneBurst).is_empty(), "{:?}", r.events);
    let rh = r.detector.rhythm(r.t);
    assert_eq!((rh.time_limits, rh.time_limit_frames), (4, Some(50)));
    // Ten of sixteen envs terminate mid-episode: a done burst. Their next episodes run
    // out of step with the other six: at their time limits, 10 of 16 truncate together
    // (a time limit), then 6 (no burst).
    let ten: Vec<usize> = (0..10).collect();
    r.step(3, 1, &ten);
    let bursts = r.of_kind(EventKind::DoneBurst);
    assert_eq!(bursts.len(), 1);
    assert_eq!(bursts[0].values, Some(10));
    assert!(
        bursts[0]
            .message
            .starts_with("10 of 16 envs terminated (done) in one frame"),
        "{}",
        bursts[0].message
    );
    for _ in 0..120 {
        r.step(3, 1, &[]);
    }
    assert_eq!(r.of_kind(EventKind::DoneBurst).len(), 1, "{:?}", r.events);
    assert_eq!(r.detector.rhythm(r.t).time_limits, 6);
}

#[test]
fn the_trainers_reset_of_every_env_at_once_is_counted_and_no_burst() {
    let mut r = Run::new();
    let mut out = Vec::new();
    let checker = &mut r.checker;
    for f in 1..=10u64 {
        // Frame 5: every env's reset flag seen set (a new iteration); frame 8: 9 of 16
        // envs terminated.
        let resets = if f == 5 { [1u8; 16] } else { [0; 16] };
        let mut dones = [0u8; 16];
        if f == 8 {
            dones[..9].fill(1);
        }
        checker.begin();
        checker.rewards(&[1.0; 16]);
        checker.flags(&dones, None);
        let check = checker.finish(f, Coverage::None, Coverage::None).clone();
        let times = FrameTimes {
            frame_seq: f,
            seen_ns: f * MS,
            ..FrameTimes::default()
        };
        let flags = Flags {
            dones: &dones,
            truncateds: None,
            resets: &resets,
        };
        r.detector.frame(times, &check, flags, &mut out);
    }
    let kinds: Vec<EventKind> = out.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [EventKind::DoneBurst, EventKind::DoneBurst],
        "{out:?}"
    );
    assert_eq!(out[0].first_frame, 8);
    let rh = r.detector.rhythm(10 * MS);
    assert_eq!((rh.resets_in_step, rh.time_limits), (1, 0));
}
