use std::io::Cursor;

use super::*;
use crate::attach::{Target, attach};
use crate::layout::LayoutChoice;
use crate::layout::plan::PlanLayout;
use crate::sim::engine::{Engine, EngineConfig};
use crate::testutil::unique_name;

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

#[test]
fn each_new_frame_is_recorded_once_and_frames_that_came_and_went_are_counted_missed() {
    let mut e = engine();
    let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
    let mut rec = Recorder::new(a, vec![1, 4], Cursor::new(Vec::new())).unwrap();
    e.step_once(Some(1));
    assert!(rec.poll().unwrap());
    // Nothing new: nothing written.
    assert!(!rec.poll().unwrap());
    e.step_once(Some(2));
    e.step_once(Some(3));
    e.step_once(Some(4));
    assert!(rec.poll().unwrap());
    let counts = rec.counts();
    assert_eq!(
        (
            counts.frames_seen,
            counts.frames_recorded,
            counts.frames_missed,
            counts.frames_torn
        ),
        (2, 2, 2, 0)
    );
    assert!(rec.bytes_written() > 0);
    let written = finish_into_bytes(rec);
    assert_eq!(frames(&written), [1, 4]);
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
            PlanLayout::Lucky => names.max(crate::layout::headers::LUCKY_SCHEMA_MAX_BYTES),
            _ => names,
        };
        let most = crate::layout::HEADER_REGION_BYTES + names + 64 * want.rings.len() as u64;
        assert!(stored <= most, "{stored} > {most}");
        let got = crate::layout::inspect(&sparse, LayoutChoice::Auto).unwrap();
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
    capture.poll(&mut messages);
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
        capture.poll(&mut messages);
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
fn machine(idle_share: u64) -> Option<crate::busy::CpuTimes> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static TICKS: AtomicU64 = AtomicU64::new(0);
    // Relaxed: a counter with no data behind it.
    let total = TICKS.fetch_add(100, Ordering::Relaxed) + 100;
    Some(crate::busy::CpuTimes {
        idle: total * idle_share / 100,
        total,
        cores: 2,
    })
}

#[test]
fn on_a_busy_machine_the_capture_holds_off_and_counts_the_frames_it_lets_pass_as_skipped() {
    fn busy() -> Option<crate::busy::CpuTimes> {
        machine(0)
    }
    fn idle() -> Option<crate::busy::CpuTimes> {
        machine(100)
    }
    for (load, yields) in [
        (busy as fn() -> Option<crate::busy::CpuTimes>, true),
        (idle, false),
    ] {
        let mut e = engine();
        let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
        let mut c = Capture::new(a, vec![0]).unwrap().with_load_reading(load);
        c.set_busy_budget(Some(1.0));
        // Two readings of the machine's load, a check interval apart.
        let t0 = crate::segment::monotonic_now_ns();
        assert_eq!(c.hold_ns(t0), None);
        assert_eq!(c.hold_ns(t0 + crate::busy::CHECK_INTERVAL_NS), None);
        assert_eq!(c.yielding(), yields);
        let mut out = Vec::new();
        e.step_once(Some(1));
        c.poll(&mut out);
        // After a copy, a busy machine holds the next look off for at least the shortest
        // hold; an idle one does not.
        let hold = c.hold_ns(crate::segment::monotonic_now_ns());
        assert_eq!(hold.is_some(), yields, "{hold:?}");
        e.step_once(Some(2));
        e.step_once(Some(3));
        e.step_once(Some(4));
        c.poll(&mut out);
        let n = c.counts();
        assert_eq!((n.frames_seen, n.frames_recorded), (2, 2), "{n:?}");
        let (skipped, missed) = if yields { (2, 0) } else { (0, 2) };
        assert_eq!(
            (n.frames_skipped, n.frames_missed),
            (skipped, missed),
            "{n:?}"
        );
        // Without a budget, nothing holds off, busy or not.
        c.set_busy_budget(None);
        assert_eq!(c.hold_ns(crate::segment::monotonic_now_ns()), None);
        assert!(!c.yielding());
    }
}

#[test]
fn ring_losses_and_malformed_entries_are_recorded_as_ring_events() {
    use crate::rings::lrbc::{Consumer, Producer};
    use crate::testutil::{TestSegment, spec};
    let seg = TestSegment::create("recevents", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let a = seg.attach();
    let c2s = *a.geometry.ring(RegionKind::CmdC2s).unwrap();
    let mut c = Capture::new(a, vec![0]).unwrap();
    let mut out = Vec::new();
    c.poll(&mut out);
    let (mut client, mut engine) = (Producer::new(&seg.rw, c2s), Consumer::new(&seg.rw, c2s));
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
            crate::traffic::TrafficEvent::Malformed {
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
            crate::traffic::TrafficEvent::Lost {
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

#[test]
fn a_ring_event_reads_back_as_the_event_written_and_nothing_else_does() {
    use crate::traffic::TrafficEvent;
    let lost = TrafficEvent::Lost {
        ring: RegionKind::CtlS2c,
        lost_bytes: 96,
        lost_entries: None,
    };
    let malformed = TrafficEvent::Malformed {
        ring: RegionKind::CmdS2c,
        position: 4096,
        error: "length 9999 is past the ring".into(),
        raw: vec![0, 1, 0xfe, 0xff],
    };
    for e in [&lost, &malformed] {
        let json = ring_event_json(e).unwrap();
        let back = ring_event_of(json.as_bytes()).unwrap();
        assert_eq!(format!("{back:?}"), format!("{e:?}"));
    }
    assert!(
        ring_event_json(&TrafficEvent::Answered {
            request: 1,
            response: 2
        })
        .is_none()
    );
    for bad in [
        &b"not json"[..],
        br#"{"event":"lost","ring":"obs","lost_bytes":1}"#,
        br#"{"event":"malformed","ring":"cmd_c2s","position":0,"error":"e","raw_hex":"zz"}"#,
        br#"{"event":"other","ring":"cmd_c2s"}"#,
    ] {
        assert!(
            ring_event_of(bad).is_none(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn the_spotter_copies_the_frames_the_capture_comes_late_for() {
    let mut e = engine();
    let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
    let mut c = Capture::new(a, vec![2]).unwrap().with_spotter().unwrap();
    let mut out = Vec::new();
    // The capture does not look while two frames come and go: the spotter copies each.
    for (f, spotted) in [(1, 1), (2, 2)] {
        e.step_once(Some(f));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while c.spotted() < spotted {
            assert!(
                std::time::Instant::now() < deadline,
                "frame {f} not spotted"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    c.poll(&mut out);
    let n = c.counts();
    assert_eq!(
        (n.frames_seen, n.frames_recorded, n.frames_missed),
        (2, 2, 0),
        "{n:?}"
    );
    let seqs: Vec<u64> = out
        .iter()
        .filter(|m| m.is_frame())
        .map(|m| fb::root_as_frame(&m.data).unwrap().frame_seq())
        .collect();
    assert_eq!(seqs, [1, 2]);
    // A frame the capture takes itself is not taken again from the spotter.
    e.step_once(Some(3));
    c.poll(&mut out);
    std::thread::sleep(std::time::Duration::from_millis(5));
    c.poll(&mut out);
    assert_eq!(c.counts().frames_recorded, 3, "{:?}", c.counts());
}
