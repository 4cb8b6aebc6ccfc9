use super::*;
use crate::check::Limits;
use lrbc::layout::LrbcHeader;
use lrbc::layout::plan::PlanLayout;
use lrbc::testutil::{TestSegment, spec};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// What a test sink saw, sent to the test.
#[derive(Debug)]
enum Seen {
    Frame {
        frame_seq: u64,
        reward1: f32,
        row: Option<Vec<f32>>,
        sample: bool,
        sampled_ns: u64,
        /// What the check found: (env, channel) of each hit, and whether every env's
        /// observations were checked.
        check: Option<(Vec<(u32, crate::check::Channel)>, bool)>,
    },
    Counts(FrameCounts),
    /// The follower holds off on a busy machine.
    Yielding,
    /// The first tick: the follower knows what the sink wants.
    Joined,
}

/// A sink that reports everything to the test, and wants the rows of `envs`.
struct Probe {
    tx: mpsc::SyncSender<Seen>,
    envs: Vec<u32>,
    ticked: bool,
    check: Option<Arc<Limits>>,
    budget: Option<f32>,
    min_hold_ns: u64,
    every_frame: bool,
}

impl FrameSink for Probe {
    fn frame(&mut self, c: &Arc<FrameCopy>) {
        let _ = self.tx.try_send(Seen::Frame {
            frame_seq: c.frame_seq,
            reward1: c.hot.rewards.get(1).copied().unwrap_or(f32::NAN),
            row: self
                .envs
                .first()
                .and_then(|&e| c.row(e))
                .map(<[f32]>::to_vec),
            sample: c.sample,
            sampled_ns: c.sampled_ns,
            check: c.check.as_ref().map(|k| {
                (
                    k.hits.iter().map(|h| (h.env, h.channel)).collect(),
                    k.obs == crate::check::Coverage::All,
                )
            }),
        });
    }

    fn tick(&mut self, t: &Tick<'_>) -> Wants {
        if !self.ticked {
            self.ticked = true;
            let _ = self.tx.try_send(Seen::Joined);
        }
        if t.counts != FrameCounts::default() {
            let _ = self.tx.try_send(Seen::Counts(t.counts));
        }
        if t.yielding {
            let _ = self.tx.try_send(Seen::Yielding);
        }
        Wants {
            envs: self.envs.clone(),
            busy_budget_percent: self.budget,
            min_hold_ns: self.min_hold_ns,
            check: self.check.clone(),
            every_frame: self.every_frame,
        }
    }
}

fn probe(envs: Vec<u32>) -> (Box<Probe>, Received) {
    // Room for every report of a test; a full channel would fail the test, never block
    // the follower.
    let (tx, rx) = mpsc::sync_channel(1 << 16);
    let rx = Received {
        rx,
        counts: FrameCounts::default(),
    };
    (
        Box::new(Probe {
            tx,
            envs,
            ticked: false,
            check: None,
            budget: None,
            min_hold_ns: 0,
            every_frame: false,
        }),
        rx,
    )
}

fn idle_machine() -> Option<CpuTimes> {
    None
}

/// Publishes `frame` as the engine does: env 1's reward is twice the frame number, env
/// 1's first observation three times.
fn publish(seg: &TestSegment, frame: u64) {
    seg.rw.seqlock_begin(LrbcHeader::WRITE_SEQ_OFFSET);
    seg.rw
        .write_f32s(seg.plan.rewards_offset, &[0.0, frame as f32 * 2.0]);
    let obs_size = 4;
    seg.rw.write_f32s(
        seg.plan.obs_offset + obs_size * 4,
        &[frame as f32 * 3.0, 0.0, 0.0, 0.0],
    );
    seg.rw.fetch_add_u64(LrbcHeader::WRITE_SEQ_OFFSET, 1);
    seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, frame);
    seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, frame);
}

/// Publishes `frame` with every env's observations `obs`, written at byte `obs_at`
/// (aligned for f32 or not).
fn publish_obs(seg: &TestSegment, obs_at: u64, obs: &[f32], frame: u64) {
    seg.rw.seqlock_begin(LrbcHeader::WRITE_SEQ_OFFSET);
    let bytes: Vec<u8> = obs.iter().flat_map(|v| v.to_le_bytes()).collect();
    seg.rw.write_at(obs_at, &bytes);
    seg.rw.fetch_add_u64(LrbcHeader::WRITE_SEQ_OFFSET, 1);
    seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, frame);
    seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, frame);
}

/// The test's end of a probe: what it received, the counts summed.
struct Received {
    rx: mpsc::Receiver<Seen>,
    counts: FrameCounts,
}

impl Received {
    /// Receives until `done` says so; fails after 20 s without anything received.
    fn until(&mut self, mut done: impl FnMut(&Seen) -> bool) {
        loop {
            let s = self
                .rx
                .recv_timeout(Duration::from_secs(20))
                .expect("the follower reports within 20 s");
            if let Seen::Counts(c) = &s {
                self.counts.add(c);
            }
            if done(&s) {
                return;
            }
        }
    }

    fn joined(&mut self) {
        self.until(|s| matches!(s, Seen::Joined));
    }

    fn frame(&mut self, frame: u64) {
        self.until(|s| matches!(s, Seen::Frame { frame_seq, .. } if *frame_seq == frame));
    }

    /// What the check of `frame` found; fails unless every env was checked.
    fn hits_of(&mut self, frame: u64) -> Vec<(u32, crate::check::Channel)> {
        let mut found = Vec::new();
        self.until(|s| match s {
            Seen::Frame {
                frame_seq, check, ..
            } if *frame_seq == frame => {
                let (hits, all) = check.clone().expect("a check with each frame");
                assert!(all, "frame {frame}: every env checked");
                found = hits;
                true
            }
            _ => false,
        });
        found
    }

    /// The reports waiting now, without waiting for more: the counts summed, the rest
    /// to `out`.
    fn ready(&mut self, out: &mut Vec<Seen>) {
        while let Ok(s) = self.rx.try_recv() {
            self.keep(s, out);
        }
    }

    /// The counts once they account for `frames` frames; every other report until then,
    /// and those waiting then, to `out`.
    fn reports_until_counts_of(&mut self, frames: u64, out: &mut Vec<Seen>) -> FrameCounts {
        while self.counts.seen < frames {
            let s = self
                .rx
                .recv_timeout(Duration::from_secs(20))
                .expect("the follower reports within 20 s");
            self.keep(s, out);
        }
        self.ready(out);
        self.counts
    }

    fn keep(&mut self, s: Seen, out: &mut Vec<Seen>) {
        match s {
            Seen::Counts(c) => self.counts.add(&c),
            s => out.push(s),
        }
    }

    /// The counts once they account for `frames` frames.
    fn counts_of(&mut self, frames: u64) -> FrameCounts {
        while self.counts.seen < frames {
            self.until(|s| matches!(s, Seen::Counts(_)));
        }
        self.counts
    }
}

#[test]
fn two_consumers_of_one_segment_share_one_follower_and_each_gets_every_frame() {
    let seg = TestSegment::create("follow-two", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let (a, mut rx_a) = probe(vec![1]);
    let (b, mut rx_b) = probe(vec![]);
    let sub_a = subscribe_with_load(&seg.attach(), a, idle_machine).unwrap();
    let sub_b = subscribe_with_load(&seg.attach(), b, idle_machine).unwrap();
    assert!(sub_a.same_follower(&sub_b), "one follower for the segment");
    assert_eq!(sub_a.sinks(), 2);
    // Both sinks have told the follower what they want before the first frame.
    rx_a.joined();
    rx_b.joined();
    for frame in 1..=100u64 {
        publish(&seg, frame);
        // An engine at the follower's pace: the next frame once both have this one.
        rx_a.frame(frame);
        rx_b.frame(frame);
    }
    let (ca, cb) = (rx_a.counts_of(100), rx_b.counts_of(100));
    for c in [ca, cb] {
        assert_eq!(
            (c.seen, c.sampled, c.missed, c.torn),
            (100, 100, 0, 0),
            "{c:?}"
        );
    }
    drop(sub_b);
    assert_eq!(
        sub_a.sinks(),
        1,
        "a dropped subscription leaves the follower"
    );
}

#[test]
fn copies_are_stamped_by_the_clock_of_the_subscription_that_started_the_follower() {
    use lrbc::clock::ManualClock;
    let seg = TestSegment::create("follow-clock", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let clock = ManualClock::new(5_000);
    let (a, mut rx_a) = probe(vec![]);
    let (b, mut rx_b) = probe(vec![]);
    let sub_a =
        subscribe_with_clock(&seg.attach(), a, idle_machine, Arc::new(clock.clone())).unwrap();
    // A follower runs already: this clock is not the one of its stamps.
    let sub_b = subscribe_with_clock(
        &seg.attach(),
        b,
        idle_machine,
        Arc::new(ManualClock::new(9)),
    )
    .unwrap();
    assert!(sub_a.same_follower(&sub_b));
    rx_a.joined();
    rx_b.joined();
    for frame in 1..=3u64 {
        clock.advance_ns(1_000);
        publish(&seg, frame);
        for rx in [&mut rx_a, &mut rx_b] {
            rx.until(|s| match s {
                Seen::Frame {
                    frame_seq,
                    sampled_ns,
                    ..
                } if *frame_seq == frame => {
                    assert_eq!(*sampled_ns, 5_000 + frame * 1_000, "frame {frame}");
                    true
                }
                _ => false,
            });
        }
    }
}

#[test]
fn a_frame_carries_the_rows_of_the_envs_its_consumers_want() {
    let seg = TestSegment::create("follow-rows", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let (a, mut rx) = probe(vec![1]);
    let _sub = subscribe_with_load(&seg.attach(), a, idle_machine).unwrap();
    rx.joined();
    publish(&seg, 7);
    rx.until(|s| match s {
        Seen::Frame {
            frame_seq: 7,
            reward1,
            row,
            ..
        } => {
            assert_eq!(*reward1, 14.0);
            let row = row.as_ref().expect("env 1's row");
            assert_eq!(row.len(), 6, "4 obs + 2 act");
            assert_eq!(row[0], 21.0);
            true
        }
        _ => false,
    });
}

#[test]
fn frames_of_the_follower_stop_when_the_last_consumer_leaves() {
    let seg = TestSegment::create("follow-stop", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let (a, _rx) = probe(vec![]);
    let sub = subscribe_with_load(&seg.attach(), a, idle_machine).unwrap();
    let follower = Arc::downgrade(&sub.follower);
    drop(sub);
    assert!(follower.upgrade().is_none(), "the follower is gone");
    // A new consumer starts a new follower.
    let (b, _rx) = probe(vec![]);
    let sub = subscribe_with_load(&seg.attach(), b, idle_machine).unwrap();
    assert!(!sub.thread_ended());
}

/// A frame published just before a sink leaves reaches it when it leaves after the
/// follower's last look, even while the follower holds off on a busy machine.
#[test]
fn a_sink_that_leaves_after_a_last_look_gets_the_frame_published_before_it_left() {
    let seg = TestSegment::create("follow-leave", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let (mut sink, mut rx) = probe(vec![]);
    // On a busy machine, samples at least 100 ms apart: a frame published just after one
    // would wait that long for the next.
    sink.budget = Some(1.0);
    sink.min_hold_ns = 100_000_000;
    let sub = subscribe_with_load(&seg.attach(), sink, busy_machine).unwrap();
    rx.joined();
    rx.until(|s| matches!(s, Seen::Yielding));
    publish(&seg, 1);
    rx.frame(1);
    publish(&seg, 2);
    sub.leave();
    rx.frame(2);
    // The counts up to the last look came with it, and nothing after.
    let mut rest = Vec::new();
    rx.ready(&mut rest);
    assert_eq!(rx.counts.seen, 2, "{:?}", rx.counts);
    assert_eq!(rx.counts.sampled, 2, "{:?}", rx.counts);
    assert!(
        matches!(rx.rx.try_recv(), Err(mpsc::TryRecvError::Disconnected)),
        "the sink was dropped"
    );
}

/// A segment truncated under the follower: the engine goes on publishing frame_seq in
/// the header page, but the data is gone. No frame is handed over, and every one is
/// counted unreadable.
#[cfg(unix)]
#[test]
fn frames_of_a_truncated_segment_are_counted_unreadable_and_never_handed_over() {
    use std::time::Instant;
    let seg = TestSegment::create("follow-trunc", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let (a, mut rx) = probe(vec![1]);
    let _sub = subscribe_with_load(&seg.attach(), a, idle_machine).unwrap();
    rx.joined();
    publish(&seg, 1);
    rx.frame(1);
    seg.truncate_to_header_page();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut total = rx.counts;
    let mut frame = 1;
    while total.unreadable < 20 {
        assert!(Instant::now() < deadline, "{total:?}");
        frame += 1;
        // The header page is still there: only frame_seq moves.
        seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, frame);
        seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, frame);
        std::thread::sleep(Duration::from_millis(2));
        while let Ok(s) = rx.rx.try_recv() {
            match s {
                Seen::Frame { frame_seq, .. } => {
                    panic!("frame {frame_seq} of a truncated segment was handed over")
                }
                Seen::Counts(c) => total.add(&c),
                Seen::Joined | Seen::Yielding => {}
            }
        }
    }
    assert_eq!(
        total.sampled, 1,
        "only the frame before the truncation: {total:?}"
    );
    assert_eq!(
        total.seen,
        total.sampled + total.missed + total.torn + total.unreadable + total.skipped
    );
}

#[test]
fn a_consumer_that_joins_after_a_reattachment_gets_the_new_segments_frames() {
    let seg = TestSegment::create("follow-gen", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let (a, mut rx_a) = probe(vec![]);
    let sub_a = subscribe_with_load(&seg.attach(), a, idle_machine).unwrap();
    rx_a.joined();
    // The segment mapped again (as after a replacement): the follower moves on.
    sub_a.retarget(seg.attach());
    let (b, mut rx_b) = probe(vec![1]);
    let _sub_b = subscribe_with_load(&seg.attach(), b, idle_machine).unwrap();
    rx_b.joined();
    publish(&seg, 3);
    // Both get it: the one that joined before and the one that joined after.
    rx_a.frame(3);
    rx_b.until(|s| matches!(s, Seen::Frame { frame_seq: 3, row: Some(r), .. } if r[0] == 9.0));
}

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

/// Publishes frame `frame` with env 1's second observation NaN when `nan`, and its
/// action +Inf when `inf_action` (the action written as the client does, before
/// action_seq moves).
fn publish_values(seg: &TestSegment, frame: u64, nan: bool, inf_action: bool) {
    let act = if inf_action { f32::INFINITY } else { 0.5 };
    seg.rw.write_f32s(seg.plan.act_offset + 2 * 4, &[act, 0.0]);
    seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, frame);
    seg.rw.seqlock_begin(LrbcHeader::WRITE_SEQ_OFFSET);
    let v = if nan { f32::NAN } else { 1.0 };
    seg.rw
        .write_f32s(seg.plan.obs_offset + 4 * 4, &[0.0, v, 0.0, 0.0]);
    seg.rw.fetch_add_u64(LrbcHeader::WRITE_SEQ_OFFSET, 1);
    seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, frame);
}

#[test]
fn a_sink_that_asks_for_checks_gets_every_frames_findings_over_every_env() {
    use crate::check::Channel;
    let seg = TestSegment::create("follow-check", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let (mut a, mut rx) = probe(vec![]);
    a.check = Some(Arc::new(Limits::default()));
    let _sub = subscribe_with_load(&seg.attach(), a, idle_machine).unwrap();
    rx.joined();
    let mut found = Vec::new();
    for frame in 1..=30u64 {
        publish_values(&seg, frame, frame == 10, frame == 20);
        rx.until(|s| match s {
            Seen::Frame {
                frame_seq,
                sample,
                check,
                ..
            } if *frame_seq == frame => {
                let (hits, all) = check.clone().expect("a check with each frame");
                assert!(*sample && all, "frame {frame}: a sample, every env checked");
                found.extend(hits.into_iter().map(|h| (frame, h)));
                true
            }
            _ => false,
        });
    }
    assert_eq!(
        found,
        vec![(10, (1, Channel::Obs(1))), (20, (1, Channel::Act(0)))]
    );
    let c = rx.counts_of(30);
    assert_eq!((c.checked, c.values_checked), (30, 30), "{c:?}");
}

/// The observations are read and tested a block of rows at a time: a bad value is
/// reported at its own env in every block, the last (shorter) one included.
#[test]
fn a_bad_value_in_any_block_of_rows_is_found_at_its_env() {
    use crate::check::Channel;
    // 4 observations a row: 256 rows a block; 700 envs are two blocks and a shorter one.
    let num_envs = 700u32;
    let seg = TestSegment::create(
        "follow-blocks",
        &spec(PlanLayout::Lrbc { ext: true }, num_envs),
    );
    let (mut a, mut rx) = probe(vec![]);
    a.check = Some(Arc::new(Limits::default()));
    let _sub = subscribe_with_load(&seg.attach(), a, idle_machine).unwrap();
    rx.joined();
    let bad = [
        (0u32, 0u32),
        (255, 3),
        (256, 0),
        (511, 2),
        (600, 1),
        (699, 3),
    ];
    let mut found = Vec::new();
    for (frame, &(env, index)) in (1u64..).zip(&bad) {
        // Each frame one bad value; the one before made good again.
        let mut obs = vec![0.25; num_envs as usize * 4];
        obs[env as usize * 4 + index as usize] = f32::NAN;
        publish_obs(&seg, seg.plan.obs_offset, &obs, frame);
        found.extend(rx.hits_of(frame));
    }
    let want: Vec<(u32, Channel)> = bad.iter().map(|&(e, i)| (e, Channel::Obs(i))).collect();
    assert_eq!(found, want);
}

/// Regions need not be aligned (spec 3): observations two bytes off the alignment of
/// an f32 are copied a block at a time and tested, and a bad value is found at its env.
#[test]
fn observations_not_aligned_for_f32_are_checked_too() {
    use crate::check::Channel;
    let mut plan = spec(PlanLayout::Lrbc { ext: true }, 2);
    // 2 envs × 3 values: 24 bytes of the 64 the plan gives the region.
    plan.obs_size = 3;
    let seg = TestSegment::create("follow-unaligned", &plan);
    let obs_at = seg.plan.obs_offset + 2;
    seg.rw.store_u64(48, obs_at);
    let (mut a, mut rx) = probe(vec![]);
    a.check = Some(Arc::new(Limits::default()));
    let attached = seg.attach();
    assert_eq!(
        attached
            .geometry
            .region(lrbc::layout::RegionKind::Obs)
            .map(|r| r.offset_bytes),
        Some(obs_at),
        "the header names the shifted region"
    );
    let _sub = subscribe_with_load(&attached, a, idle_machine).unwrap();
    rx.joined();
    let mut found = Vec::new();
    for frame in 1..=3u64 {
        let mut values = [0.5f32; 6];
        if frame == 2 {
            values[5] = f32::NEG_INFINITY;
        }
        publish_obs(&seg, obs_at, &values, frame);
        found.extend(rx.hits_of(frame).into_iter().map(|h| (frame, h)));
    }
    assert_eq!(found, vec![(2, (1, Channel::Obs(2)))]);
}

#[test]
fn on_a_busy_machine_a_checking_sink_keeps_to_the_budget_and_the_frames_let_pass_are_counted() {
    let seg = TestSegment::create(
        "follow-busy-check",
        &spec(PlanLayout::Lrbc { ext: true }, 2),
    );
    let (mut checks, mut rx_check) = probe(vec![]);
    checks.check = Some(Arc::new(Limits::default()));
    checks.every_frame = true;
    checks.budget = Some(1.0);
    let (mut plots, mut rx_plots) = probe(vec![1]);
    plots.budget = Some(1.0);
    let _a = subscribe_with_load(&seg.attach(), checks, busy_machine).unwrap();
    let _b = subscribe_with_load(&seg.attach(), plots, busy_machine).unwrap();
    rx_check.joined();
    rx_plots.joined();
    rx_check.until(|s| matches!(s, Seen::Yielding));
    // Frames one every 2 ms or more (a sleep's least on the platform), at least 300, env
    // 1's second observation NaN from frame 150 on: every sample from then holds it.
    // Frames go on until a sample at or after 150 had every env's values checked, so that
    // the NaN is seen there (the budget may let a sample's values pass, never for long).
    let started = std::time::Instant::now();
    let mut reports = Vec::new();
    let nan_checked = |reports: &[Seen]| {
        reports.iter().any(|s| {
            matches!(s, Seen::Frame { frame_seq, sample: true, check: Some((_, true)), .. }
                if *frame_seq >= 150)
        })
    };
    let mut last = 0u64;
    while last < 300 || !nan_checked(&reports) {
        assert!(
            last < 10_000,
            "no sample of frames 150 to {last} had its values checked"
        );
        last += 1;
        publish_values(&seg, last, last >= 150, false);
        std::thread::sleep(Duration::from_millis(2));
        rx_check.ready(&mut reports);
    }
    let c = rx_check.reports_until_counts_of(last, &mut reports);
    // Every frame is counted once: taken, let pass on purpose, or torn; none missed
    // (between two samples the follower holds off, and what passes then is skipped).
    assert_eq!(c.seen, last, "{c:?}");
    assert_eq!(c.sampled + c.skipped + c.torn, last, "{c:?}");
    assert_eq!(c.missed, 0, "{c:?}");
    assert!(c.skipped > 0, "{c:?}");
    // On a busy machine samples are at least the shortest hold apart, however many
    // frames the sinks want checked.
    let allowed = started.elapsed().as_nanos() / u128::from(crate::busy::MIN_HOLD_NS) + 2;
    assert!(
        u128::from(c.sampled) <= allowed,
        "samples keep to the budget: {} of {last} in {:?} (at most {allowed})",
        c.sampled,
        started.elapsed()
    );
    // Only the frames taken are checked: the copies of rewards and flags alone come
    // only after a copy tore. Every sample's rewards and flags are checked, and its
    // values too unless the budget still owes for a check that cost more than its longest
    // hold pays for (a slow machine).
    assert!(c.checked >= c.sampled, "{c:?}");
    assert!(c.checked <= c.sampled + c.torn, "{c:?}");
    assert!(
        c.values_checked >= 1 && c.values_checked <= c.sampled,
        "{c:?}"
    );
    // A sample whose every env's values were checked holds the NaN exactly from frame
    // 150 on; one checked in part finds no more than that.
    let nan = vec![(1, crate::check::Channel::Obs(1))];
    let mut samples = 0;
    for s in reports {
        if let Seen::Frame {
            frame_seq,
            sample: true,
            check,
            ..
        } = s
        {
            samples += 1;
            let (hits, all) = check.expect("a check");
            let want = if frame_seq >= 150 {
                nan.clone()
            } else {
                vec![]
            };
            if all {
                assert_eq!(hits, want, "frame {frame_seq}");
            } else {
                assert!(
                    hits.iter().all(|h| want.contains(h)),
                    "{frame_seq}: {hits:?}"
                );
            }
        }
    }
    assert!(samples <= c.sampled, "{samples} samples, {c:?}");
    // The sink that does not check got the same samples.
    let mut plotted = 0;
    while let Ok(s) = rx_plots.rx.try_recv() {
        if let Seen::Frame { sample, .. } = s {
            assert!(sample);
            plotted += 1;
        }
    }
    assert!(
        plotted <= c.sampled + 1,
        "{plotted} frames to the plots, {} samples",
        c.sampled
    );
}

#[test]
fn with_no_budget_a_sink_gets_every_frame_whole_on_a_busy_machine() {
    let seg = TestSegment::create(
        "follow-busy-every",
        &spec(PlanLayout::Lrbc { ext: true }, 2),
    );
    let (mut every, mut rx) = probe(vec![]);
    every.every_frame = true;
    every.budget = None;
    let _a = subscribe_with_load(&seg.attach(), every, busy_machine).unwrap();
    rx.joined();
    for frame in 1..=100u64 {
        publish(&seg, frame);
        rx.until(|s| match s {
            Seen::Frame {
                frame_seq,
                reward1,
                sample,
                ..
            } if *frame_seq == frame => {
                assert_eq!(*reward1, frame as f32 * 2.0, "the frame's own rewards");
                assert!(*sample, "frame {frame} copied whole");
                true
            }
            Seen::Yielding => panic!("no budget: the follower never yields"),
            _ => false,
        });
        std::thread::sleep(Duration::from_millis(2));
    }
    let c = rx.counts_of(100);
    assert_eq!((c.sampled, c.skipped), (100, 0), "{c:?}");
}

#[test]
fn the_detector_joining_a_follower_times_stalls_by_the_follower_clock() {
    use crate::detect::{DetectSettings, Diagnosis, EventKind};
    use lrbc::clock::ManualClock;
    let seg = TestSegment::create("follow-stall", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let clock = ManualClock::new(5_000_000_000);
    let (a, mut rx) = probe(vec![]);
    let _sub =
        subscribe_with_clock(&seg.attach(), a, idle_machine, Arc::new(clock.clone())).unwrap();
    rx.joined();
    // A stall is an hour without a frame: no real time of this test comes near it.
    let settings = DetectSettings {
        stall_min_secs: 3600.0,
        ..DetectSettings::default()
    };
    let diagnosis =
        Diagnosis::start_with_load(&seg.attach(), settings, None, 16, idle_machine).unwrap();
    for frame in 1..=20u64 {
        clock.advance_ns(10_000_000);
        publish(&seg, frame);
        rx.frame(frame);
    }
    // (frames seen, stalls) in the log, once `done` holds of them.
    let log_until = |what: &str, done: &dyn Fn(u64, usize) -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (seen, stalls) = {
                let log = lrbc::sync::lock(diagnosis.log());
                // Before the loop's rhythm is known, the first long wait is a pause of
                // unknown rhythm: timed the same.
                let stalls = log
                    .events()
                    .iter()
                    .filter(|e| matches!(e.kind, EventKind::Stall | EventKind::Pause));
                (log.totals().frames_seen, stalls.count())
            };
            if done(seen, stalls) {
                return (seen, stalls);
            }
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    // The tick that counted the frames judged the stalls too (its events and figures go
    // to the log together): none, the clock has not moved since the last frame.
    let (_, stalls) = log_until("the frames counted", &|seen, _| seen >= 20);
    assert_eq!(stalls, 0, "no stall on the follower's clock yet");
    clock.advance_secs(7200.0);
    log_until(
        "a stall after two hours of the follower's clock",
        &|_, stalls| stalls > 0,
    );
}
