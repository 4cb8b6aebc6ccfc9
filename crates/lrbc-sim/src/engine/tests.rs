use super::*;
use lrbc::attach::Target;
use lrbc::layout::LayoutChoice;
use lrbc::testutil::unique_name;

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
