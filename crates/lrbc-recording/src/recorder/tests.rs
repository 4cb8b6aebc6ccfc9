use std::io::Cursor;

use super::*;
use crate::format::{
    FRAME_TOPIC, RING_EVENTS_TOPIC, SEGMENT_METADATA, ring_event_of, segment_from_metadata,
};
use lrbc::attach::{Target, attach};
use lrbc::layout::plan::PlanLayout;
use lrbc::layout::{LayoutChoice, RegionKind};
use lrbc::testutil::unique_name;
use lrbc_sim::engine::{Engine, EngineConfig};

fn engine() -> Engine {
    engine_with(PlanLayout::Lrbc { ext: true })
}

fn engine_with(layout: PlanLayout) -> Engine {
    Engine::create(EngineConfig::small(unique_name("record"), layout, 5, 3, 2)).unwrap()
}

fn frames(bytes: &[u8]) -> Vec<u64> {
    mcap::MessageStream::new(bytes)
        .unwrap()
        .map(Result::unwrap)
        .filter(|m| m.channel.topic == FRAME_TOPIC)
        .map(|m| fb::root_as_frame(&m.data).unwrap().frame_seq())
        .collect()
}

fn poll_until(c: &mut Capture, out: &mut Vec<Message>, done: impl Fn(&Counts) -> bool) {
    c.poll_until(out, done);
}

/// Every frame published is counted once: seen (recorded, torn or unreadable), missed or
/// skipped.
fn balanced(n: &Counts, published: u64) -> bool {
    n.frames_seen + n.frames_missed + n.frames_skipped == published
        && n.frames_seen == n.frames_recorded + n.frames_torn + n.frames_unreadable
}

#[test]
fn each_new_frame_is_recorded_once_and_every_frame_published_is_counted() {
    let mut e = engine();
    let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
    let mut rec = Recorder::new(a, vec![1, 4], Cursor::new(Vec::new())).unwrap();
    e.step_once(Some(1));
    rec.poll_until_recorded(1);
    // Nothing new: nothing written.
    assert!(!rec.poll().unwrap());
    // Three frames at once: the follower sees some of them or only the last; the others
    // are missed, and none is counted twice.
    e.step_once(Some(2));
    e.step_once(Some(3));
    e.step_once(Some(4));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !balanced(&rec.counts(), 4) {
        assert!(std::time::Instant::now() < deadline, "{:?}", rec.counts());
        rec.wait(std::time::Duration::from_millis(10));
        rec.poll().unwrap();
    }
    assert!(rec.bytes_written() > 0);
    let counts = rec.counts();
    let written = finish_into_bytes(rec);
    let recorded = frames(&written);
    assert_eq!(recorded.len() as u64, counts.frames_recorded);
    assert_eq!((recorded.first(), recorded.last()), (Some(&1), Some(&4)));
    assert!(recorded.windows(2).all(|w| w[0] < w[1]), "{recorded:?}");
}

#[test]
fn a_frame_published_just_before_the_recorder_finishes_is_recorded() {
    let mut e = engine();
    let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
    let mut rec = Recorder::new(a, vec![1], Cursor::new(Vec::new())).unwrap();
    e.step_once(Some(1));
    rec.poll_until_recorded(1);
    // The run's last step, and at once the end of the recording (a Ctrl-C): the
    // follower, asleep until a frame is due, has not looked yet; its last look takes it.
    e.step_once(Some(2));
    let (counts, out) = rec.finish_into_inner().unwrap();
    assert_eq!(frames(&out.into_inner()), vec![1, 2]);
    assert_eq!(counts.frames_recorded, 2, "{counts:?}");
}

#[test]
fn an_env_the_segment_does_not_have_is_refused_in_one_line() {
    let e = engine();
    let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
    let err = Recorder::new(a, vec![0, 5], Cursor::new(Vec::new())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "env 5 does not exist (the segment has 5 envs)"
    );
}

/// Finishes a recorder writing into memory and returns the file's bytes.
fn finish_into_bytes(rec: Recorder<Cursor<Vec<u8>>>) -> Vec<u8> {
    rec.finish_into_inner().unwrap().1.into_inner()
}

#[test]
fn the_stored_segment_bytes_detect_the_recorded_geometry_again() {
    for layout in [PlanLayout::Lrbc { ext: true }, PlanLayout::Lucky] {
        let e = engine_with(layout);
        let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
        let want = a.geometry.clone();
        let rec = Recorder::new(a, vec![0], Cursor::new(Vec::new())).unwrap();
        let (_, out) = rec.finish_into_inner().unwrap();
        let bytes = out.into_inner();
        let summary = mcap::Summary::read(&bytes).unwrap().unwrap();
        let index = summary
            .metadata_indexes
            .iter()
            .find(|m| m.name == SEGMENT_METADATA)
            .unwrap();
        let meta = mcap::read::metadata(&bytes, index).unwrap();
        let sparse = segment_from_metadata(&meta.metadata).unwrap();
        // Only what detection reads is stored: the header, the names, ring headers.
        let stored: u64 = sparse.pieces.iter().map(|(_, b)| b.len() as u64).sum();
        let names = want.region(RegionKind::Names).map_or(0, |r| r.length_bytes);
        // The luckyrobots layout's schema is read up to its longest before parsing.
        let names = match layout {
            PlanLayout::Lucky => names.max(lrbc::layout::headers::LUCKY_SCHEMA_MAX_BYTES),
            _ => names,
        };
        let most = lrbc::layout::HEADER_REGION_BYTES + names + 64 * want.rings.len() as u64;
        assert!(stored <= most, "{stored} > {most}");
        let got = lrbc::layout::inspect(&sparse, LayoutChoice::Auto).unwrap();
        assert!(got.same_shape(&want), "{:?}", layout);
        assert_eq!(got.names, want.names);
        assert_eq!(got.regions, want.regions);
    }
}

#[test]
fn a_rolling_buffer_keeps_the_newest_frames_within_its_bytes_and_writes_a_whole_file() {
    let mut e = engine();
    let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
    let mut capture = Capture::new(a, vec![0, 2]).unwrap();
    let mut messages = Vec::new();
    e.step_once(Some(1));
    poll_until(&mut capture, &mut messages, |n| n.frames_recorded == 1);
    let one = messages.iter().find(|m| m.is_frame()).unwrap().data.len() as u64;
    // Room for three frames (and their overhead) in the three quarters of the budget
    // that are not for images, with seconds to spare.
    let mut rolling = Rolling::new(RollingLimits {
        seconds: 3600.0,
        max_bytes: 4 * (one + 64) + 40,
    });
    for m in messages.drain(..).filter(Message::is_frame) {
        rolling.push(m);
    }
    for step in 2..=6 {
        e.step_once(Some(step));
        poll_until(&mut capture, &mut messages, |n| n.frames_recorded == step);
        for m in messages.drain(..).filter(Message::is_frame) {
            rolling.push(m);
        }
    }
    assert_eq!(rolling.frames(), 3);
    assert!(rolling.bytes() <= rolling.limits().max_bytes * 3 / 4);
    let copy = rolling.copy(capture.counts());
    assert_eq!(copy.counts.frames_dropped, 3);
    assert_eq!(copy.counts.frames_seen, 6);
    let bytes = copy
        .write(capture.prelude(), Cursor::new(Vec::new()))
        .unwrap()
        .into_inner();
    assert_eq!(frames(&bytes), [4, 5, 6]);
    let summary = mcap::Summary::read(&bytes).unwrap().unwrap();
    let index = summary
        .metadata_indexes
        .iter()
        .find(|m| m.name == "lrbc.counts")
        .unwrap();
    let counts = mcap::read::metadata(&bytes, index).unwrap().metadata;
    assert_eq!(counts["frames_dropped"], "3");
    assert_eq!(counts["frames_recorded"], "3");
    // The same schemas and metadata as a file recorded from the start.
    assert!(
        summary
            .metadata_indexes
            .iter()
            .any(|m| m.name == SEGMENT_METADATA)
    );
    // With no seconds kept, only the newest frame stays.
    rolling.set_limits(RollingLimits {
        seconds: 0.0,
        max_bytes: u64::MAX,
    });
    assert_eq!(rolling.frames(), 1);
}

#[test]
fn a_write_error_is_the_cause_in_one_line() {
    struct Full;
    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("the disk is full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl Seek for Full {
        fn seek(&mut self, _: std::io::SeekFrom) -> std::io::Result<u64> {
            Ok(0)
        }
    }
    let e = engine();
    let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
    let err = Recorder::new(a, vec![0], Full).unwrap_err();
    assert_eq!(err.cause(), "the disk is full", "{err}");
}

#[test]
fn a_rolling_buffer_drops_what_is_older_than_its_seconds_against_the_newest() {
    let message = |channel, t_ms: u64| Message {
        channel,
        kind: if channel == 0 {
            Kind::Frame
        } else {
            Kind::RingEntry
        },
        log_time: t_ms * 1_000_000,
        publish_time: t_ms * 1_000_000,
        data: std::sync::Arc::from(vec![0u8; 100]),
    };
    let mut rolling = Rolling::new(RollingLimits {
        seconds: 2.0,
        max_bytes: u64::MAX,
    });
    // Frames each 500 ms, a ring entry (channel 1) between.
    for i in 0..10 {
        rolling.push(message(0, i * 500));
        rolling.push(message(1, i * 500 + 250));
    }
    // The newest is at 4750 ms: kept from 2750 ms on (two seconds old is kept).
    assert_eq!(rolling.frames(), 4);
    assert!(
        (rolling.seconds() - 2.0).abs() < 1e-9,
        "{}",
        rolling.seconds()
    );
    let copy = rolling.copy(Counts::default());
    assert_eq!(
        copy.messages.first().map(|m| m.log_time),
        Some(2_750_000_000)
    );
    assert_eq!(
        (
            copy.counts.frames_recorded,
            copy.counts.ring_entries,
            copy.counts.frames_dropped,
            copy.counts.ring_entries_dropped
        ),
        (4, 5, 6, 5)
    );
    assert_eq!(rolling.bytes(), 9 * (100 + 64));
}

#[test]
fn camera_images_keep_to_their_quarter_of_a_rolling_buffer() {
    let message = |kind, t_ms: u64, len| Message {
        channel: usize::from(kind == Kind::Image),
        kind,
        log_time: t_ms * 1_000_000,
        publish_time: t_ms * 1_000_000,
        data: std::sync::Arc::from(vec![0u8; len]),
    };
    let mut rolling = Rolling::new(RollingLimits {
        seconds: 3600.0,
        max_bytes: 40_000,
    });
    for i in 0..50 {
        rolling.push(message(Kind::Frame, i * 10, 136));
        rolling.push(message(Kind::Image, i * 10 + 5, 1936));
    }
    // Frames: 50 × 200 bytes fit the three quarters; images: 5 × 2000 bytes the quarter.
    assert_eq!(rolling.frames(), 50);
    let copy = rolling.copy(Counts::default());
    assert_eq!((copy.counts.frames_recorded, copy.counts.images), (50, 5));
    assert_eq!(copy.counts.frames_dropped, 0);
    assert_eq!(rolling.bytes(), 50 * 200 + 5 * 2000);
    // Oldest first, images among the frames.
    assert!(
        copy.messages
            .windows(2)
            .all(|w| w[0].log_time <= w[1].log_time)
    );
    assert_eq!(
        copy.messages.iter().position(|m| m.kind == Kind::Image),
        Some(46)
    );
}

/// A machine whose cores are all busy, or all idle, whatever the host's load.
fn machine(idle_share: u64) -> Option<lrbc_live::busy::CpuTimes> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static TICKS: AtomicU64 = AtomicU64::new(0);
    // Relaxed: a counter with no data behind it.
    let total = TICKS.fetch_add(100, Ordering::Relaxed) + 100;
    Some(lrbc_live::busy::CpuTimes {
        idle: total * idle_share / 100,
        total,
        cores: 2,
    })
}

#[test]
fn on_a_busy_machine_the_follower_holds_off_and_the_capture_counts_the_frames_let_pass_as_skipped()
{
    fn busy() -> Option<lrbc_live::busy::CpuTimes> {
        machine(0)
    }
    fn idle() -> Option<lrbc_live::busy::CpuTimes> {
        machine(100)
    }
    for (load, yields) in [
        (busy as fn() -> Option<lrbc_live::busy::CpuTimes>, true),
        (idle, false),
    ] {
        let mut e = engine();
        let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
        let mut c = Capture::new(a, vec![0])
            .unwrap()
            .with_load_reading(load)
            .unwrap();
        c.set_busy_budget(Some(1.0));
        let mut out = Vec::new();
        // The follower reads the machine's load twice, a check interval apart.
        let t0 = std::time::Instant::now();
        let check = std::time::Duration::from_nanos(lrbc_live::busy::CHECK_INTERVAL_NS);
        while t0.elapsed() < 3 * check && c.yielding() != yields {
            c.wait(std::time::Duration::from_millis(10));
        }
        assert_eq!(c.yielding(), yields);
        // A frame every 2 ms or so (the engine's pace). On a busy machine the follower
        // holds off at least 10 ms after each copy (the shortest hold): frames pass
        // meanwhile, skipped, not missed. Frames come until one is, however slow this
        // machine (at most 2,000); on an idle one, 50 come and none is.
        let mut published = 0;
        while published < 50 || (yields && c.counts().frames_skipped == 0) {
            assert!(published < 2_000, "no frame let pass: {:?}", c.counts());
            published += 1;
            e.step_once(Some(published));
            std::thread::sleep(std::time::Duration::from_millis(2));
            c.poll(&mut out);
        }
        poll_until(&mut c, &mut out, |n| balanced(n, published));
        let n = c.counts();
        if yields {
            assert!(n.frames_skipped >= 1, "{n:?}");
            assert!(n.frames_recorded >= 1, "the follower still copies: {n:?}");
        } else {
            assert_eq!(n.frames_skipped, 0, "{n:?}");
        }
        // Without a budget, nothing holds off, busy or not.
        c.set_busy_budget(None);
        let t0 = std::time::Instant::now();
        while c.yielding() && t0.elapsed() < std::time::Duration::from_secs(20) {
            c.wait(std::time::Duration::from_millis(10));
        }
        assert!(!c.yielding());
    }
}

#[test]
fn ring_losses_and_malformed_entries_are_recorded_as_ring_events() {
    use lrbc::rings::v1::{V1Consumer, V1Producer};
    use lrbc::testutil::{TestSegment, spec};
    let seg = TestSegment::create("recevents", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let a = seg.attach();
    let c2s = *a.geometry.ring(RegionKind::CmdC2s).unwrap();
    let mut c = Capture::new(a, vec![0]).unwrap();
    let mut out = Vec::new();
    c.poll(&mut out);
    let (mut client, mut engine) = (V1Producer::new(&seg.rw, c2s), V1Consumer::new(&seg.rw, c2s));
    client.try_push(&seg.rw, b"not a flatbuffer").unwrap();
    c.poll(&mut out);
    // The engine takes entries faster than the recorder looks: the ring laps the recorder.
    let mut buf = Vec::new();
    let entry = vec![7u8; 64];
    let mut pushed = 0u64;
    while pushed < 4 * u64::from(c2s.capacity_bytes) {
        client.try_push(&seg.rw, &entry).unwrap();
        engine.try_pop(&seg.rw, &mut buf).unwrap();
        pushed += entry.len() as u64;
    }
    c.poll(&mut out);
    let events: Vec<_> = out
        .iter()
        .filter(|m| m.kind == Kind::RingEvent)
        .map(|m| ring_event_of(&m.data).unwrap())
        .collect();
    let malformed: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            lrbc_live::traffic::TrafficEvent::Malformed {
                ring, raw, error, ..
            } => Some((*ring, raw.clone(), error.clone())),
            _ => None,
        })
        .collect();
    assert!(
        malformed
            .iter()
            .any(|(ring, raw, error)| *ring == RegionKind::CmdC2s
                && raw == b"not a flatbuffer"
                && !error.is_empty()),
        "{events:?}"
    );
    let lost: u64 = events
        .iter()
        .filter_map(|e| match e {
            lrbc_live::traffic::TrafficEvent::Lost {
                ring: RegionKind::CmdC2s,
                lost_bytes,
                ..
            } => Some(*lost_bytes),
            _ => None,
        })
        .sum();
    assert!(lost > 0, "{events:?}");
    let n = c.counts();
    assert_eq!(n.ring_events, events.len() as u64);
    assert_eq!(n.ring_lost_bytes, lost, "every lost byte is in an event");
    // Each event's channel is /lrbc/ring_events, JSON.
    let ch = &c.prelude().channels[out
        .iter()
        .find(|m| m.kind == Kind::RingEvent)
        .unwrap()
        .channel];
    assert_eq!(
        (ch.topic.as_str(), ch.message_encoding.as_str()),
        (RING_EVENTS_TOPIC, "json")
    );
}

/// A segment truncated under the recorder: the engine goes on publishing `frame_seq` in
/// the header page, but the data is gone. No frame of zeros is recorded, the frames are
/// counted unreadable, and the truncation is a message on `/lrbc/state`.
#[cfg(unix)]
#[test]
fn frames_of_a_truncated_segment_are_not_recorded_and_the_truncation_is() {
    use lrbc::layout::LrbcHeader;
    use lrbc::testutil::{TestSegment, spec};
    let seg = TestSegment::create("rectrunc", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let publish = |frame: u64| {
        seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, frame);
        seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, frame);
    };
    let mut c = Capture::new(seg.attach(), vec![1]).unwrap();
    let mut out = Vec::new();
    seg.rw.write_f32s(seg.plan.rewards_offset, &[1.0, 2.0]);
    publish(1);
    poll_until(&mut c, &mut out, |n| n.frames_recorded == 1);
    seg.truncate_to_header_page();
    let mut frame = 1;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while c.counts().frames_unreadable < 5 || c.counts().state_changes == 0 {
        assert!(std::time::Instant::now() < deadline, "{:?}", c.counts());
        frame += 1;
        publish(frame);
        c.wait(std::time::Duration::from_millis(5));
        c.poll(&mut out);
    }
    let n = c.counts();
    assert_eq!(
        n.frames_recorded, 1,
        "no frame of the truncated segment: {n:?}"
    );
    let states: Vec<serde_json::Value> = out
        .iter()
        .filter(|m| m.kind == Kind::State)
        .map(|m| serde_json::from_slice(&m.data).unwrap())
        .collect();
    assert_eq!(states[0]["state"], "truncated", "{states:?}");
    assert!(
        states[0]["note"].as_str().unwrap().contains("4096"),
        "{states:?}"
    );
}
