use super::*;
use lrbc::clock::MonotonicClock;
use lrbc::layout::LrbcHeader;
use lrbc::layout::plan::PlanLayout;
use lrbc::testutil::{TestSegment, spec};
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use std::time::Instant;

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until `count` reaches `target`. A slow or loaded host may take its time: the
/// wait fails only when the count stands still for 20 s short of the target, or passes it.
fn wait_for_count(what: &str, target: u64, mut count: impl FnMut() -> u64) {
    let mut last = count();
    let mut deadline = Instant::now() + Duration::from_secs(20);
    while last != target {
        assert!(
            last < target,
            "{what}: {last} counted, more than the {target} there are"
        );
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {last} of {target}, no progress in 20 s"
        );
        std::thread::sleep(Duration::from_millis(2));
        let now = count();
        if now != last {
            deadline = Instant::now() + Duration::from_secs(20);
            last = now;
        }
    }
}

/// A sampler on `seg`, on a machine whose cores are idle (whatever the host's load).
fn start_sampler(seg: &TestSegment, settings: SamplerSettings) -> Sampler {
    start_sampler_with_load(seg, settings, idle_machine)
}

/// A sampler on `seg`, the machine's load read by `load`.
fn start_sampler_with_load(
    seg: &TestSegment,
    settings: SamplerSettings,
    load: fn() -> Option<CpuTimes>,
) -> Sampler {
    Sampler::start_with_load(
        seg.attach(),
        settings,
        MonotonicClock,
        Box::new(|| {}),
        60.0,
        load,
    )
    .unwrap()
}

#[test]
fn every_frame_of_a_paced_engine_is_sampled_with_its_rewards() {
    let mut s = spec(PlanLayout::Lrbc { ext: true }, 8);
    s.obs_size = 3;
    s.act_size = 1;
    let seg = TestSegment::create("sampler", &s);
    let settings = SamplerSettings {
        watched_envs: WatchedEnvs::new([2, 7]),
        busy_budget_percent: None,
        ..SamplerSettings::default()
    };
    let mut sampler = start_sampler(&seg, settings);
    // An engine publishing 200 frames, each rewarding env i with frame + i, waiting for
    // the sampler to have seen each one (a client at the sampler's pace).
    for frame in 1..=200u64 {
        let rewards: Vec<f32> = (0..8).map(|i| frame as f32 + i as f32).collect();
        let obs: Vec<f32> = (0..24).map(|i| frame as f32 * 10.0 + i as f32).collect();
        seg.rw.seqlock_begin(LrbcHeader::WRITE_SEQ_OFFSET);
        seg.rw.write_f32s(seg.plan.rewards_offset, &rewards);
        seg.rw.write_f32s(seg.plan.obs_offset, &obs);
        seg.rw.write_at(
            seg.plan.dones_offset,
            &[0, 0, u8::from(frame % 50 == 0), 0, 0, 0, 0, 0],
        );
        seg.rw.fetch_add_u64(LrbcHeader::WRITE_SEQ_OFFSET, 1);
        seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, frame);
        seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, frame);
        wait_until(
            &format!("frame {frame} to be sampled ({:?})", sampler.stats()),
            || {
                let d = sampler.lock();
                d.stats.frames.sampled + d.stats.frames.missed + d.stats.frames.torn >= frame
            },
        );
    }
    sampler.stop();
    let d = sampler.lock();
    assert_eq!(d.stats.frames.seen, 200);
    assert_eq!(d.stats.frames.sampled, 200, "{:?}", d.stats);
    assert_eq!(d.stats.frames.missed, 0);
    assert_eq!(d.stats.frames.torn, 0);
    let last = d.frames.back().unwrap();
    assert_eq!(last.frame_seq, 200);
    assert_eq!(last.reward_min, 200.0);
    assert_eq!(last.reward_max, 207.0);
    let env2 = &d.envs[&2];
    assert_eq!(env2.points.len(), 200);
    assert!(
        env2.points
            .iter()
            .all(|p| p.reward == p.frame_seq as f32 + 2.0)
    );
    assert_eq!(
        env2.points
            .iter()
            .filter(|p| p.flags & FLAG_DONE != 0)
            .count(),
        4
    );
    let detail = env2.detail.back().unwrap();
    assert_eq!(detail.values[0], 2000.0 + 6.0, "obs of env 2 at frame 200");
    assert_eq!(detail.values.len(), 4, "3 obs + 1 act");
    assert!(!d.envs.contains_key(&0), "only watched envs keep histories");
}

#[test]
fn with_no_overview_kept_the_frames_are_counted_and_no_overview_is_worked_out() {
    let seg = TestSegment::create("no-overview", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let settings = SamplerSettings {
        watched_envs: WatchedEnvs::new([1]),
        history_frames: 0,
        busy_budget_percent: None,
        ..SamplerSettings::default()
    };
    let mut sampler = start_sampler(&seg, settings);
    for frame in 1..=20u64 {
        seg.rw.seqlock_begin(LrbcHeader::WRITE_SEQ_OFFSET);
        seg.rw
            .write_f32s(seg.plan.rewards_offset, &[0.0, frame as f32]);
        seg.rw.fetch_add_u64(LrbcHeader::WRITE_SEQ_OFFSET, 1);
        seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, frame);
        seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, frame);
        wait_until(&format!("frame {frame} to be sampled"), || {
            let d = sampler.lock();
            d.stats.frames.sampled + d.stats.frames.missed + d.stats.frames.torn >= frame
        });
    }
    sampler.stop();
    let d = sampler.lock();
    assert_eq!(d.stats.frames.sampled, 20, "{:?}", d.stats);
    assert!(d.frames.is_empty(), "no overview kept");
    let newest = d.envs[&1].points.back().map(|p| (p.frame_seq, p.reward));
    assert_eq!(newest, Some((20, 20.0)), "the watched env's points go on");
}

#[test]
fn frames_that_pass_unseen_are_counted_missed() {
    let seg = TestSegment::create("missed", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let mut sampler = start_sampler(&seg, SamplerSettings::default());
    // Ten frames published at once: the sampler sees only the last one.
    seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, 10);
    seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, 10);
    wait_until("the sampler", || sampler.stats().frames.seen == 10);
    sampler.stop();
    let s = sampler.stats();
    assert_eq!(s.frames.sampled, 1);
    assert_eq!(s.frames.missed, 9);
}

/// A machine whose every core is busy: no idle tick between two readings.
fn busy_machine() -> Option<CpuTimes> {
    static TICKS: AtomicU64 = AtomicU64::new(0);
    // Relaxed: a counter with no data behind it.
    let total = TICKS.fetch_add(100, Ordering::Relaxed) + 100;
    Some(CpuTimes {
        idle: 0,
        total,
        cores: 2,
    })
}

/// A machine with every core idle.
fn idle_machine() -> Option<CpuTimes> {
    static TICKS: AtomicU64 = AtomicU64::new(0);
    // Relaxed: a counter with no data behind it.
    let total = TICKS.fetch_add(100, Ordering::Relaxed) + 100;
    Some(CpuTimes {
        idle: total,
        total,
        cores: 2,
    })
}

/// Publishes frames as fast as it can (with the seqlock) until `until` says stop;
/// returns how many.
fn publish_until(seg: &TestSegment, mut until: impl FnMut() -> bool) -> u64 {
    let mut frame = 0u64;
    while !until() {
        for _ in 0..100 {
            frame += 1;
            seg.rw.seqlock_begin(LrbcHeader::WRITE_SEQ_OFFSET);
            seg.rw
                .write_f32s(seg.plan.rewards_offset, &[frame as f32, frame as f32]);
            seg.rw.fetch_add_u64(LrbcHeader::WRITE_SEQ_OFFSET, 1);
            seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, frame);
            seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, frame);
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    frame
}

#[test]
fn on_a_busy_machine_the_sampler_keeps_to_its_budget_and_counts_the_frames_it_skips() {
    let seg = TestSegment::create("busy", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let mut sampler = start_sampler_with_load(&seg, SamplerSettings::default(), busy_machine);
    // Frames keep coming until the sampler has yielded and skipped a good many.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut at_yield: Option<SamplerStats> = None;
    let published = publish_until(&seg, || {
        assert!(Instant::now() < deadline, "{:?}", sampler.stats());
        let d = sampler.lock();
        if d.yielding && at_yield.is_none() {
            at_yield = Some(d.stats);
        }
        at_yield.is_some_and(|s0| d.stats.frames.skipped >= s0.frames.skipped + 1_000)
    });
    wait_for_count("every frame to be accounted for", published, || {
        sampler.stats().frames.seen
    });
    sampler.stop();
    let d = sampler.lock();
    let s = d.stats;
    assert!(d.yielding);
    assert_eq!(
        s.frames.sampled + s.frames.missed + s.frames.torn + s.frames.skipped,
        s.frames.seen,
        "{s:?}"
    );
    assert!(s.frames.sampled >= 1, "{s:?}");
    let s0 = at_yield.unwrap_or_default();
    assert!(
        s.frames.skipped - s0.frames.skipped > 10 * (s.frames.missed - s0.frames.missed),
        "frames that pass while holding off are skipped, not missed: {s0:?} then {s:?}"
    );
    assert!(
        s.frames.sampled - s0.frames.sampled < s.frames.skipped - s0.frames.skipped,
        "while yielding, most frames pass: {s0:?} then {s:?}"
    );
}

#[test]
fn with_spare_cpu_or_without_a_budget_no_frame_is_skipped() {
    for (settings, load) in [
        (
            SamplerSettings::default(),
            idle_machine as fn() -> Option<CpuTimes>,
        ),
        (
            SamplerSettings {
                busy_budget_percent: None,
                ..SamplerSettings::default()
            },
            busy_machine,
        ),
    ] {
        let seg = TestSegment::create("spare", &spec(PlanLayout::Lrbc { ext: true }, 2));
        let mut sampler = start_sampler_with_load(&seg, settings, load);
        // Past two readings of the load, so that the sampler has judged the machine.
        let until = Instant::now() + Duration::from_millis(700);
        let published = publish_until(&seg, || Instant::now() >= until);
        wait_for_count("every frame to be accounted for", published, || {
            sampler.stats().frames.seen
        });
        sampler.stop();
        let d = sampler.lock();
        assert!(!d.yielding);
        assert_eq!(d.stats.frames.skipped, 0, "{:?}", d.stats);
        assert!(d.stats.frames.sampled >= 1);
    }
}

#[test]
fn on_a_busy_machine_the_reader_is_woken_no_more_than_it_redraws() {
    let seg = TestSegment::create("wakes", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let wakes = Arc::new(AtomicU64::new(0));
    let w = Arc::clone(&wakes);
    let mut sampler = Sampler::start_with_load(
        seg.attach(),
        SamplerSettings::default(),
        MonotonicClock,
        // Relaxed: a counter with no data behind it.
        Box::new(move || {
            w.fetch_add(1, Ordering::Relaxed);
        }),
        60.0,
        busy_machine,
    )
    .unwrap();
    wait_until("the sampler to yield", || sampler.lock().yielding);
    // The auxiliary thread sees the yielding at its next wakeup; from the one after on,
    // it wakes the reader at most every BUSY_READER_WAKE_NS (not 60 times a second).
    let first = wakes.load(Ordering::Relaxed);
    wait_until("two wakeups of the reader", || {
        wakes.load(Ordering::Relaxed) >= first + 2
    });
    let (from, at) = (wakes.load(Ordering::Relaxed), Instant::now());
    let span = BUSY_READER_WAKE_NS * 8;
    wait_until("a span of eight redraws", || {
        at.elapsed() >= Duration::from_nanos(span)
    });
    let (woken, took) = (wakes.load(Ordering::Relaxed) - from, at.elapsed());
    sampler.stop();
    let most = took.as_nanos() / u128::from(BUSY_READER_WAKE_NS) + 1;
    assert!(
        u128::from(woken) <= most,
        "{woken} wakeups of the reader in {took:?}, more than {most}"
    );
    assert!(woken >= 1, "the view stays live: no wakeup in {took:?}");
}

#[test]
fn torn_frames_are_discarded_and_counted() {
    let seg = TestSegment::create("torn", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let mut sampler = start_sampler(&seg, SamplerSettings::default());
    // The engine "writes" forever: write_seq stays odd, so no copy can be trusted.
    seg.rw.seqlock_begin(LrbcHeader::WRITE_SEQ_OFFSET);
    seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, 1);
    seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, 1);
    wait_until("the torn frame", || sampler.stats().frames.torn == 1);
    sampler.stop();
    let d = sampler.lock();
    assert_eq!(d.stats.frames.sampled, 0);
    assert!(d.latest.is_none(), "a torn snapshot is never shown");
}

#[test]
fn the_detector_in_the_sampler_finds_each_bad_value_of_a_frame() {
    use crate::check::{BoundRule, ChannelKind, Limits};
    use crate::detect::{DetectSettings, EventKind};
    let seg = TestSegment::create("sampler-detect", &spec(PlanLayout::Lrbc { ext: true }, 4));
    let detect = DetectSettings {
        limits: Limits {
            bounds: vec![BoundRule::parse("obs=-1e4:1e4").unwrap()],
            saturation: None,
        },
        ..DetectSettings::default()
    };
    let settings = SamplerSettings {
        detect: Some((detect, 100)),
        busy_budget_percent: None,
        ..SamplerSettings::default()
    };
    let mut sampler = start_sampler(&seg, settings);
    let log = Arc::clone(sampler.events().expect("the sampler runs the detector"));
    // Frame 1: env 2's fourth observation NaN, env 3's second 1e9.
    let mut obs = vec![0.5f32; 16];
    obs[2 * 4 + 3] = f32::NAN;
    obs[3 * 4 + 1] = 1e9;
    seg.rw.seqlock_begin(LrbcHeader::WRITE_SEQ_OFFSET);
    seg.rw.write_f32s(seg.plan.obs_offset, &obs);
    seg.rw.fetch_add_u64(LrbcHeader::WRITE_SEQ_OFFSET, 1);
    seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, 1);
    seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, 1);
    wait_until("two events", || lock(&log).events().len() >= 2);
    {
        let l = lock(&log);
        let found = |kind: EventKind, env: u32, index: u32| {
            l.events().iter().any(|e| {
                (e.kind, e.env, e.channel, e.index)
                    == (kind, Some(env), Some(ChannelKind::Observation), Some(index))
            })
        };
        assert!(found(EventKind::Nonfinite, 2, 3), "{:?}", l.events());
        assert!(found(EventKind::OutOfRange, 3, 1), "{:?}", l.events());
        let t = l.totals();
        assert_eq!(
            (t.nan_values, t.out_of_range_values, t.envs_affected),
            (1, 1, 2)
        );
    }
    sampler.stop();
}

#[test]
fn camera_images_are_copied_when_image_seq_moves() {
    let mut s = spec(PlanLayout::Lrbc { ext: true }, 2);
    s.image = Some((4, 2, 3));
    let seg = TestSegment::create("images", &s);
    let mut sampler = start_sampler(&seg, SamplerSettings::default());
    let pixels: Vec<u8> = (0..48).collect();
    seg.rw.seqlock_begin(LrbcHeader::WRITE_SEQ_OFFSET);
    seg.rw.write_at(seg.plan.image_offset, &pixels);
    seg.rw.fetch_add_u64(LrbcHeader::WRITE_SEQ_OFFSET, 1);
    seg.rw.fetch_add_u64(LrbcHeader::IMAGE_SEQ_OFFSET, 1);
    wait_until("an image", || {
        sampler
            .lock()
            .image
            .as_ref()
            .is_some_and(|i| i.image_seq == 1)
    });
    sampler.stop();
    let d = sampler.lock();
    let img = d.image.as_ref().unwrap();
    assert_eq!(img.pixels.as_slice(), pixels.as_slice());
    assert_eq!(
        (img.width, img.height, img.channels, img.num_envs),
        (4, 2, 3, 2)
    );
}

#[test]
fn an_image_region_over_its_budget_is_not_copied_and_the_window_says_why() {
    let mut s = spec(PlanLayout::Lrbc { ext: true }, 2);
    s.image = Some((64, 64, 3));
    let seg = TestSegment::create("bigimages", &s);
    // Two envs of 64×64×3, with RGBA textures: 56 KiB; the budget gives 40.
    let mut sampler = start_sampler(
        &seg,
        SamplerSettings {
            image_bytes: 40 << 10,
            ..SamplerSettings::default()
        },
    );
    seg.rw.fetch_add_u64(LrbcHeader::IMAGE_SEQ_OFFSET, 1);
    wait_until("the note", || sampler.lock().image_note.is_some());
    sampler.stop();
    let d = sampler.lock();
    assert!(d.image.is_none());
    let note = d.image_note.as_deref().unwrap_or_default();
    assert!(
        note.contains("not copied") && note.contains("Settings"),
        "{note}"
    );
    assert_eq!(d.memory().1, 0);
}
