use super::*;
use lrbc::attach::Target;
use lrbc::layout::LayoutChoice;
use lrbc::testutil::unique_name;
use std::time::Instant;

fn config(layout: PlanLayout) -> EngineConfig {
    EngineConfig {
        image: (layout != PlanLayout::Lucky).then_some((16, 12, 3)),
        ctl_ring_size: Some(4096),
        camera_hz: 1000.0,
        seed: 5,
        ..EngineConfig::small(unique_name("engine"), layout, 3, 10, 2)
    }
}

#[test]
fn a_created_segment_is_complete_when_it_appears_and_removed_on_drop() {
    let engine = Engine::create(config(PlanLayout::Lrbc { ext: true })).unwrap();
    let a =
        lrbc::attach::attach(&Target::Shm(engine.name().to_string()), LayoutChoice::Auto).unwrap();
    assert_eq!(a.geometry.layout, lrbc::layout::Layout::LrbcV1Ext);
    assert_eq!(a.geometry.names.obs[0], "cart_x");
    assert_eq!(a.geometry.names.act[1], "goal_shift");
    assert_eq!(
        a.segment.load_u32(LrbcHeader::SERVICE_FLAGS_OFFSET),
        Some(0x7f)
    );
    assert!(
        a.segment.load_u64(LrbcHeader::IMAGE_SEQ_OFFSET).unwrap() >= 1,
        "the first images are written before publishing"
    );
    assert_eq!(
        a.segment.load_u64(LrbcHeader::WRITE_SEQ_OFFSET).unwrap() % 2,
        0
    );
    let location = a.segment.location().clone();
    drop(engine);
    // A named mapping lives while any handle is open: the reader's too.
    drop(a);
    assert!(!location.exists());
}

#[test]
fn each_step_publishes_one_frame_with_every_counter() {
    let mut engine = Engine::create(config(PlanLayout::Lrbc { ext: true })).unwrap();
    let a =
        lrbc::attach::attach(&Target::Shm(engine.name().to_string()), LayoutChoice::Auto).unwrap();
    let ws0 = a.segment.load_u64(LrbcHeader::WRITE_SEQ_OFFSET).unwrap();
    let t0 = a
        .segment
        .load_u64(LrbcHeader::FRAME_TIME_NS_OFFSET)
        .unwrap();
    engine.step_once(Some(1));
    assert_eq!(a.segment.load_u64(LrbcHeader::FRAME_SEQ_OFFSET), Some(1));
    assert_eq!(
        a.segment.load_u64(LrbcHeader::WRITE_SEQ_OFFSET),
        Some(ws0 + 2)
    );
    assert!(
        a.segment
            .load_u64(LrbcHeader::FRAME_TIME_NS_OFFSET)
            .unwrap()
            >= t0
    );
    assert_eq!(engine.stats().steps, 1);
}

#[test]
fn the_luckyrobots_engine_sets_engine_ready_and_clears_it() {
    let engine = Engine::create(config(PlanLayout::Lucky)).unwrap();
    let a =
        lrbc::attach::attach(&Target::Shm(engine.name().to_string()), LayoutChoice::Auto).unwrap();
    assert_eq!(a.geometry.layout, lrbc::layout::Layout::LuckyrobotsIpc);
    assert_eq!(
        a.segment.load_u32(LuckyHeader::ENGINE_READY_OFFSET),
        Some(1)
    );
    drop(engine);
    assert_eq!(
        a.segment.load_u32(LuckyHeader::ENGINE_READY_OFFSET),
        Some(0)
    );
}

#[test]
fn lucky_commands_answer_as_the_spec_says() {
    assert_eq!(lucky_response(2, br#"{"mode": "realtime"}"#).0, 0);
    let (status, body) = lucky_response(2, br#"{"mode": "nope"}"#);
    assert_eq!(status, 1);
    assert!(body["error"].as_str().unwrap().contains("nope"));
    assert_eq!(lucky_response(1, br#"{"agent_name": "a"}"#).0, 0);
    assert_eq!(lucky_response(7, b"{}").0, 2);
    assert_eq!(lucky_response(1, b"not json").0, 3);
}

#[test]
fn an_existing_name_is_refused_without_force() {
    let first = Engine::create(config(PlanLayout::Lrbc { ext: false })).unwrap();
    let mut cfg = config(PlanLayout::Lrbc { ext: false });
    cfg.name = first.name().to_string();
    assert!(matches!(
        Engine::create(cfg.clone()),
        Err(EngineError::Exists { .. })
    ));
    cfg.force = true;
    if cfg!(windows) {
        // A live named mapping belongs to whoever holds it: --force cannot take it.
        assert!(matches!(
            Engine::create(cfg),
            Err(EngineError::Exists { .. })
        ));
        return;
    }
    let second = Engine::create(cfg).unwrap();
    drop(first);
    // The first engine's drop leaves the replacement alone.
    assert!(shm_path(second.name()).unwrap().exists());
}

#[test]
fn nan_at_step_writes_nan_into_env_0s_first_observation_and_reward_at_that_frame_only() {
    let mut cfg = config(PlanLayout::Lrbc { ext: true });
    cfg.nan_at_step = Some(2);
    let mut engine = Engine::create(cfg).unwrap();
    let a =
        lrbc::attach::attach(&Target::Shm(engine.name().to_string()), LayoutChoice::Auto).unwrap();
    let (obs_at, rewards_at) = (engine.plan.obs_offset, engine.plan.rewards_offset);
    let read = |offset: u64| {
        let mut v = [0f32; 2];
        assert!(a.segment.read_f32s(offset, &mut v));
        v
    };
    let mut seen = Vec::new();
    for step in 1..=3 {
        engine.step_once(Some(step));
        let (obs, rew) = (read(obs_at), read(rewards_at));
        // Only the first value is the fault; the next one stays finite.
        assert!(obs[1].is_finite() && rew[1].is_finite());
        seen.push((obs[0].is_nan(), rew[0].is_nan()));
    }
    assert_eq!(seen, [(false, false), (true, true), (false, false)]);
}

/// An engine running its own loop on a thread, and the trainer's side of the lock-step
/// on the test's thread through a mapping of its own. Stops the engine when dropped.
struct Trainer {
    seg: SegmentRw,
    plan: Plan,
    cfg: EngineConfig,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    engine: Option<std::thread::JoinHandle<EngineStats>>,
}

/// What a reader sees once a frame is published (the engine then waits for the next
/// action_seq, so nothing moves while it is copied).
#[derive(Debug)]
struct Seen {
    frame_seq: u64,
    obs: Vec<f32>,
    actions: Vec<f32>,
    rewards: Vec<f32>,
    dones: Vec<u8>,
}

/// The longest a test waits for a frame that should come.
const FRAME_DEADLINE: Duration = Duration::from_secs(20);

impl Trainer {
    /// 8 envs of 10 observations and 4 actions, no images.
    fn config(plants: Vec<Plant>) -> EngineConfig {
        EngineConfig {
            plants,
            ..EngineConfig::small(
                unique_name("plant"),
                PlanLayout::Lrbc { ext: true },
                8,
                10,
                4,
            )
        }
    }

    fn start(cfg: EngineConfig) -> Self {
        let engine = Engine::create(cfg.clone()).unwrap();
        let plan = engine.plan.clone();
        let seg = SegmentRw::open_at(&shm_location(engine.name()).unwrap()).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let engine_stop = std::sync::Arc::clone(&stop);
        let engine = std::thread::Builder::new()
            .name("test-engine".into())
            .spawn(move || {
                let mut engine = engine;
                engine.run(&engine_stop)
            })
            .unwrap();
        Self {
            seg,
            plan,
            cfg,
            stop,
            engine: Some(engine),
        }
    }

    /// Finite actions that differ from frame to frame.
    fn actions(&self, frame: u64) -> Vec<f32> {
        let n = (self.cfg.num_envs * self.cfg.act_size) as usize;
        (0..n)
            .map(|i| (frame as f32 * 0.3 + i as f32 * 0.7).sin())
            .collect()
    }

    /// Writes the actions of `frame` and bumps action_seq; the new action_seq.
    fn send(&self, frame: u64) -> u64 {
        assert!(
            self.seg
                .write_f32s(self.plan.act_offset, &self.actions(frame))
        );
        // Release (fetch_add AcqRel): publishes the actions written above; pairs with the
        // engine's Acquire load of action_seq.
        self.seg
            .fetch_add_u64(LrbcHeader::ACTION_SEQ_OFFSET, 1)
            .unwrap()
    }

    /// Waits until frame_seq is `action_seq`, calling `meanwhile` with frame_seq and
    /// action_seq at each look before it.
    fn wait_for_frame(&self, action_seq: u64, mut meanwhile: impl FnMut(u64, u64)) {
        let started = Instant::now();
        loop {
            // Acquire: pairs with the engine's Release store of frame_seq.
            let frame_seq = self.seg.load_u64(LrbcHeader::FRAME_SEQ_OFFSET).unwrap();
            if frame_seq == action_seq {
                return;
            }
            // Acquire: the word the test itself bumps; read back as a reader would.
            let now_action_seq = self.seg.load_u64(LrbcHeader::ACTION_SEQ_OFFSET).unwrap();
            meanwhile(frame_seq, now_action_seq);
            assert!(
                started.elapsed() < FRAME_DEADLINE,
                "no frame {action_seq} within {FRAME_DEADLINE:?}"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// A copy of the published frame.
    fn seen(&self) -> Seen {
        let (n, obs, act) = (
            self.cfg.num_envs as usize,
            self.cfg.obs_size as usize,
            self.cfg.act_size as usize,
        );
        let mut seen = Seen {
            // Acquire: pairs with the engine's Release store of frame_seq.
            frame_seq: self.seg.load_u64(LrbcHeader::FRAME_SEQ_OFFSET).unwrap(),
            obs: vec![0.0; n * obs],
            actions: vec![0.0; n * act],
            rewards: vec![0.0; n],
            dones: vec![0; n],
        };
        assert!(self.seg.read_f32s(self.plan.obs_offset, &mut seen.obs));
        assert!(self.seg.read_f32s(self.plan.act_offset, &mut seen.actions));
        assert!(
            self.seg
                .read_f32s(self.plan.rewards_offset, &mut seen.rewards)
        );
        assert!(self.seg.read_at(self.plan.dones_offset, &mut seen.dones));
        // Acquire: pairs with the engine's increment that made write_seq even again.
        let write_seq = self.seg.load_u64(LrbcHeader::WRITE_SEQ_OFFSET).unwrap();
        assert_eq!(write_seq % 2, 0, "the frame is complete");
        seen
    }

    /// One lock-step: the actions of `frame` in, the frame out.
    fn step(&self, frame: u64) -> Seen {
        let action_seq = self.send(frame);
        assert_eq!(
            action_seq, frame,
            "the trainer bumps action_seq once a frame"
        );
        self.wait_for_frame(action_seq, |_, _| {});
        let seen = self.seen();
        assert_eq!(seen.frame_seq, frame);
        seen
    }

    /// Stops the engine; its statistics.
    fn finish(mut self) -> EngineStats {
        self.stop_engine().unwrap()
    }

    fn stop_engine(&mut self) -> Option<EngineStats> {
        // Relaxed: a flag with no data behind it.
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.engine.take().map(|t| t.join().unwrap())
    }
}

impl Drop for Trainer {
    fn drop(&mut self) {
        self.stop_engine();
    }
}

/// Where a planted frame differs from the same frame of an engine without the plants
/// (bit for bit: a NaN differs from everything): region, env, index, planted value.
fn differences(
    planted: &Seen,
    reference: &Seen,
    cfg: &EngineConfig,
) -> Vec<(&'static str, usize, usize, f32)> {
    let mut out = Vec::new();
    let mut floats = |region, per_env: usize, p: &[f32], r: &[f32]| {
        for (i, (a, b)) in p.iter().zip(r).enumerate() {
            if a.to_bits() != b.to_bits() {
                out.push((region, i / per_env, i % per_env, *a));
            }
        }
    };
    floats("obs", cfg.obs_size as usize, &planted.obs, &reference.obs);
    floats(
        "act",
        cfg.act_size as usize,
        &planted.actions,
        &reference.actions,
    );
    floats("reward", 1, &planted.rewards, &reference.rewards);
    for (env, (a, b)) in planted.dones.iter().zip(&reference.dones).enumerate() {
        if a != b {
            out.push(("done", env, 0, f32::from(*a)));
        }
    }
    out
}

/// Steps an engine with `plants` and one without, with the same seed and actions, for
/// `frames` frames; every difference with its frame.
fn planted_against_reference(
    plants: Vec<Plant>,
    frames: u64,
    mut check: impl FnMut(u64, &Seen, &Seen),
) -> Vec<(u64, &'static str, usize, usize, f32)> {
    let planted = Trainer::start(Trainer::config(plants));
    let reference = Trainer::start(Trainer::config(Vec::new()));
    let mut found = Vec::new();
    for frame in 1..=frames {
        let (p, r) = (planted.step(frame), reference.step(frame));
        check(frame, &p, &r);
        for (region, env, index, value) in differences(&p, &r, &planted.cfg) {
            found.push((frame, region, env, index, value));
        }
    }
    found
}

fn plant(spec: &str) -> Plant {
    Plant::parse(spec).unwrap()
}

#[test]
fn a_planted_value_shows_at_its_frames_env_channel_and_index_and_nowhere_else() {
    // Frame, region, env and index.
    type Place = (u64, &'static str, usize, usize);
    type Kind = fn(f32) -> bool;
    let cases: [(&str, &[Place], Kind); 4] = [
        (
            "nan@3:env=5,index=7,frames=2",
            &[(3, "obs", 5, 7), (4, "obs", 5, 7)],
            f32::is_nan,
        ),
        ("inf@2:env=1,channel=reward", &[(2, "reward", 1, 0)], |v| {
            v == f32::INFINITY
        }),
        (
            "-inf@4:env=6,channel=act,index=3",
            &[(4, "act", 6, 3)],
            |v| v == f32::NEG_INFINITY,
        ),
        (
            "nan@2:env=7,channel=act,index=1,frames=3",
            &[(2, "act", 7, 1), (3, "act", 7, 1), (4, "act", 7, 1)],
            f32::is_nan,
        ),
    ];
    for (spec, expected, is_planted_value) in cases {
        let found = planted_against_reference(vec![plant(spec)], 6, |_, _, _| {});
        let at: Vec<_> = found.iter().map(|&(f, r, e, i, _)| (f, r, e, i)).collect();
        assert_eq!(at, expected, "{spec}");
        assert!(
            found.iter().all(|d| is_planted_value(d.4)),
            "{spec}: {found:?}"
        );
    }
}

#[test]
fn a_drift_moves_one_observation_in_one_frame_by_its_delta_and_nothing_else() {
    let mut delta_seen = None;
    let found = planted_against_reference(
        vec![plant("drift@3:env=5,index=7,delta=0.5")],
        6,
        |frame, p, r| {
            if frame == 3 {
                let at = 5 * 10 + 7;
                delta_seen = Some(p.obs[at] - r.obs[at]);
            }
        },
    );
    let at: Vec<_> = found.iter().map(|&(f, r, e, i, _)| (f, r, e, i)).collect();
    assert_eq!(at, [(3, "obs", 5, 7)], "one value, one frame: {found:?}");
    let d = delta_seen.unwrap();
    assert!((d - 0.5).abs() < 1e-6, "{d}");
}

#[test]
fn a_planted_action_is_in_its_frame_s_action_slot_while_that_frame_s_observations_and_rewards_are_finite()
 {
    let trainer = Trainer::start(Trainer::config(vec![plant(
        "nan@3:env=2,channel=act,index=1",
    )]));
    let slot = 2 * 4 + 1;
    for frame in 1..=5 {
        let seen = trainer.step(frame);
        assert!(seen.obs.iter().all(|v| v.is_finite()), "frame {frame}");
        assert!(seen.rewards.iter().all(|v| v.is_finite()), "frame {frame}");
        let sent = trainer.actions(frame);
        for (i, (a, s)) in seen.actions.iter().zip(&sent).enumerate() {
            if frame == 3 && i == slot {
                assert!(a.is_nan(), "the planted action of frame 3");
            } else {
                assert_eq!(a, s, "frame {frame}, action slot {i}: the trainer's");
            }
        }
    }
}

#[test]
fn a_planted_action_no_trainer_overwrites_is_given_back_after_its_frame() {
    let mut engine = Engine::create(Trainer::config(vec![plant(
        "inf@2:env=1,channel=act,index=2",
    )]))
    .unwrap();
    let act_at = engine.plan.act_offset + (4 + 2) * 4;
    let trainer_value = 0.5f32;
    assert!(engine.seg.write_f32s(act_at, &[trainer_value]));
    let mut slot = Vec::new();
    for step in 1..=3 {
        engine.step_once(Some(step));
        let mut v = [0f32];
        assert!(engine.seg.read_f32s(act_at, &mut v));
        slot.push(v[0]);
        let mut obs = vec![0f32; 8 * 10];
        assert!(engine.seg.read_f32s(engine.plan.obs_offset, &mut obs));
        assert!(obs.iter().all(|o| o.is_finite()), "step {step}");
    }
    assert_eq!(slot, [trainer_value, f32::INFINITY, trainer_value]);
}

#[test]
fn a_done_burst_sets_the_done_flags_of_the_first_share_of_the_envs_at_its_frames() {
    // ceil(0.3 × 8) = 3 envs.
    let count = done_count(0.3, 8);
    assert_eq!(count, 3);
    let found = planted_against_reference(
        vec![plant("done-burst@3:share=0.3,frames=2")],
        5,
        |frame, p, r| {
            if (3..=4).contains(&frame) {
                assert_eq!(p.dones[..count], [1, 1, 1], "frame {frame}");
                assert_eq!(p.dones[count..], r.dones[count..], "frame {frame}");
            } else {
                assert_eq!(p.dones, r.dones, "frame {frame}");
            }
        },
    );
    assert!(
        found
            .iter()
            .all(|&(frame, region, env, _, value)| (3..=4).contains(&frame)
                && region == "done"
                && env < count
                && value == 1.0),
        "{found:?}"
    );
}

#[test]
fn a_stall_delays_its_frame_while_action_seq_is_one_ahead_of_frame_seq() {
    let stall = Duration::from_millis(300);
    let trainer = Trainer::start(Trainer::config(vec![plant("stall@3:secs=0.3")]));
    trainer.step(1);
    trainer.step(2);
    let started = Instant::now();
    let action_seq = trainer.send(3);
    let mut looks = 0;
    trainer.wait_for_frame(action_seq, |frame_seq, action_seq| {
        assert_eq!((frame_seq, action_seq), (2, 3), "during the stall");
        looks += 1;
    });
    let waited = started.elapsed();
    assert!(waited >= stall, "frame 3 came after {waited:?}");
    assert!(looks > 0);
    assert_eq!(trainer.seen().frame_seq, 3);
    trainer.step(4);
    assert_eq!(trainer.finish().steps, 4);
}

#[test]
fn in_inference_mode_a_stall_delays_the_publication_of_its_frame() {
    let cfg = EngineConfig {
        mode: Mode::Inference,
        hz: 1000.0,
        ..Trainer::config(vec![plant("stall@1:secs=0.3")])
    };
    let started = Instant::now();
    let mut engine = Trainer::start(cfg);
    // Acquire: pairs with the engine's Release store of frame_seq.
    let frame_seq = |e: &Trainer| e.seg.load_u64(LrbcHeader::FRAME_SEQ_OFFSET).unwrap();
    let wait_for = |e: &Trainer, least: u64| {
        while frame_seq(e) < least {
            assert!(started.elapsed() < FRAME_DEADLINE, "no frame {least}");
            std::thread::sleep(Duration::from_micros(200));
        }
    };
    // Frame 1 is the first the engine publishes: it waits out the stall before it.
    wait_for(&engine, 1);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300),
        "frame 1 came after {waited:?}"
    );
    // In inference mode frame_seq counts the steps.
    wait_for(&engine, 5);
    let stats = engine.stop_engine().unwrap();
    assert_eq!(frame_seq(&engine), stats.steps);
}

#[test]
fn stopping_the_engine_ends_a_long_stall_promptly_without_publishing_its_frame() {
    let mut trainer = Trainer::start(Trainer::config(vec![plant("stall@2:secs=3600")]));
    trainer.step(1);
    let action_seq = trainer.send(2);
    // The engine takes the new action_seq within microseconds; frame 2 stays away.
    let looked = Instant::now();
    while looked.elapsed() < Duration::from_millis(100) {
        // Acquire: pairs with the engine's Release store of frame_seq.
        let frame_seq = trainer.seg.load_u64(LrbcHeader::FRAME_SEQ_OFFSET);
        assert_eq!(frame_seq, Some(action_seq - 1));
        std::thread::sleep(Duration::from_millis(5));
    }
    let stopped = Instant::now();
    // Relaxed: a flag with no data behind it.
    trainer
        .stop
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let engine = trainer.engine.take().unwrap();
    while !engine.is_finished() {
        assert!(
            stopped.elapsed() < Duration::from_secs(5),
            "the engine is still stalling"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(engine.join().unwrap().steps, 1);
    // Acquire: pairs with the engine's Release store of frame_seq.
    assert_eq!(trainer.seg.load_u64(LrbcHeader::FRAME_SEQ_OFFSET), Some(1));
}

#[test]
fn a_stall_ends_within_a_slice_of_the_stop_flag() {
    // Long against the stop flag's 100 ms, short enough that a stall that ignores the flag
    // fails the test rather than hanging it.
    let engine = Engine::create(Trainer::config(vec![plant("stall@1:secs=10")])).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let setter_stop = std::sync::Arc::clone(&stop);
    let setter = std::thread::Builder::new()
        .name("test-stop".into())
        .spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let set = Instant::now();
            // Relaxed: a flag with no data behind it.
            setter_stop.store(true, std::sync::atomic::Ordering::Relaxed);
            set
        })
        .unwrap();
    let finished = engine.wait_out_stalls(&stop);
    let returned = Instant::now();
    let set = setter.join().unwrap();
    assert!(!finished, "the stall was cut short");
    let late = returned.saturating_duration_since(set);
    assert!(
        late < Duration::from_millis(1000),
        "{late:?} after the stop flag"
    );
}

#[test]
fn plants_that_do_not_fit_the_segment_are_refused_before_it_is_created() {
    let refused = |spec: &str, dynamics: bool| {
        let cfg = EngineConfig {
            dynamics,
            ..Trainer::config(vec![plant(spec)])
        };
        match cfg.plan() {
            Err(EngineError::Config(line)) => line,
            other => panic!("{spec}: {other:?}"),
        }
    };
    // 8 envs, obs 10, act 4.
    let line = refused("nan@5:env=8", true);
    assert!(
        line.starts_with("--plant nan@5:env=8: env 8 is out of range"),
        "{line}"
    );
    assert!(refused("nan@5:index=10", true).contains("index 10 is out of range"));
    assert!(refused("inf@5:channel=act,index=4", true).contains("index 4 is out of range"));
    assert!(refused("nan@5:env=8,channel=reward", true).contains("env 8"));
    assert!(refused("done-burst@5", false).contains("without its dynamics"));
    assert!(refused("drift@5:env=8", true).contains("env 8 is out of range"));
    assert!(refused("drift@5:index=10", true).contains("index 10 is out of range"));
    assert!(refused("drift@5", false).contains("without its dynamics"));
    for spec in [
        "nan@5:env=7,index=9",
        "inf@5:channel=act,index=3",
        "stall@5",
    ] {
        assert!(
            Trainer::config(vec![plant(spec)]).check_plants().is_ok(),
            "{spec}"
        );
    }
    let no_dynamics = EngineConfig {
        dynamics: false,
        ..Trainer::config(vec![plant("nan@5:channel=act"), plant("stall@5")])
    };
    assert!(no_dynamics.check_plants().is_ok());
    // Plants built in code are held to the parser's bounds too.
    let built = |step, fault| Plant { step, fault };
    let cfg = |p| Trainer::config(vec![p]);
    for p in [
        built(
            0,
            PlantedFault::DoneBurst {
                share: 0.5,
                frames: 1,
            },
        ),
        built(
            1,
            PlantedFault::DoneBurst {
                share: 1.5,
                frames: 1,
            },
        ),
        built(
            1,
            PlantedFault::DoneBurst {
                share: 0.5,
                frames: 0,
            },
        ),
        built(
            1,
            PlantedFault::Stall {
                duration: Duration::ZERO,
            },
        ),
        built(
            1,
            PlantedFault::Stall {
                duration: MAX_STALL + Duration::from_secs(1),
            },
        ),
        built(
            u64::MAX,
            PlantedFault::Value {
                value: NonFinite::Nan,
                env: 0,
                channel: PlantChannel::Reward,
                frames: 2,
            },
        ),
    ] {
        assert!(
            matches!(cfg(p.clone()).check_plants(), Err(EngineError::Config(_))),
            "{p:?}"
        );
    }
}
