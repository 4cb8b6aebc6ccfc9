use std::io::Cursor;
use std::path::PathBuf;

use super::*;
use crate::attach::{Target, attach};
use crate::layout::LayoutChoice;
use crate::layout::plan::PlanLayout;
use crate::layout::{Geometry, RegionKind};
use crate::record::Recorder;
use crate::sampler::{Counters, FrameAgg, Ring, SamplerData};
use crate::sim::engine::{Engine, EngineConfig};
use crate::testutil::unique_name;
use crate::traffic::TrafficStore;
use std::collections::BTreeMap;
use std::sync::Arc;

fn engine_with_nan(nan_at_step: Option<u64>) -> Engine {
    Engine::create(EngineConfig {
        nan_at_step,
        ..EngineConfig::small(
            unique_name("replay"),
            PlanLayout::Lrbc { ext: true },
            5,
            3,
            2,
        )
    })
    .unwrap()
}

/// A finished recording of `steps` frames (envs 1 and 3), with a small chunk size so
/// that it has many chunks.
fn recording(steps: u64) -> (Vec<u8>, Vec<u64>) {
    recording_with_nan(steps, None)
}

fn recording_with_nan(steps: u64, nan_at_step: Option<u64>) -> (Vec<u8>, Vec<u64>) {
    let mut e = engine_with_nan(nan_at_step);
    let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
    let mut rec = Recorder::new(a, vec![3, 1], Cursor::new(Vec::new())).unwrap();
    let mut seqs = Vec::new();
    for i in 1..=steps {
        e.step_once(Some(i));
        rec.poll_until_recorded(i);
        seqs.push(i);
    }
    (rec.finish_into_inner().unwrap().1.into_inner(), seqs)
}

fn write(bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(unique_name("replay-test"));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("r.mcap");
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Waits (up to 10 s, then fails saying `what`) until `ok`.
fn wait(what: &str, ok: &dyn Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ok() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A player on `r` with the default settings and traffic `limits`.
fn start(r: Recording, limits: crate::traffic::TrafficLimits) -> Player {
    Player::start(
        r,
        crate::sampler::SamplerSettings::default(),
        limits,
        Arc::new(|| {}),
    )
    .unwrap()
}

/// A player on `r` with the default settings, once it shows the first frame.
fn play(r: Recording) -> Player {
    let p = start(r, crate::traffic::TrafficLimits::default());
    wait("the first frame", &|| p.state().frame_seq == Some(1));
    p
}

fn all_frames(r: &mut Recording) -> Vec<RecFrame> {
    let mut out = Vec::new();
    let Some((t0, t1)) = r.time_range() else {
        return out;
    };
    r.frames_between(t0, t1, |f| {
        out.push(f);
        true
    })
    .unwrap();
    out
}

#[test]
fn a_finished_recording_opens_from_its_summary_with_every_frame() {
    let (bytes, seqs) = recording(40);
    let mut r = Recording::open(&write(&bytes)).unwrap();
    assert_eq!(r.unfinished_at, None);
    assert_eq!(r.frame_count, Some(40));
    assert_eq!((r.geometry.num_envs, r.geometry.obs_size), (5, 3));
    let frames = all_frames(&mut r);
    assert_eq!(frames.iter().map(|f| f.frame_seq).collect::<Vec<_>>(), seqs);
    assert_eq!(frames[0].envs, [1, 3]);
    assert_eq!(frames[0].rewards.len(), 5);
    assert_eq!(frames[0].row(3, 3, 2).unwrap().len(), 5);
    assert!(frames[0].row(0, 3, 2).is_none());
    // The frame at a time is the last one at or before it.
    let tenth = frames[9].log_ns;
    assert_eq!(r.frame_at(tenth).unwrap().unwrap().frame_seq, 10);
    assert_eq!(
        r.frame_at(frames[10].log_ns - 1)
            .unwrap()
            .unwrap()
            .frame_seq,
        10
    );
    assert!(r.frame_at(frames[0].log_ns - 1).unwrap().is_none());
}

#[test]
fn a_recording_cut_short_is_read_up_to_its_last_complete_chunk() {
    let (bytes, _) = recording(40);
    let whole = Recording::open(&write(&bytes)).unwrap();
    let chunks = whole.chunks.clone();
    assert!(!chunks.is_empty());
    // Cut in the middle of the last chunk: the earlier chunks are read.
    let last = chunks.last().unwrap();
    let cut = (last.offset + last.length / 2) as usize;
    let mut r = Recording::open(&write(&bytes[..cut])).unwrap();
    let note = r.unfinished_note().unwrap();
    assert!(note.starts_with("not finished"), "{note}");
    assert_eq!(r.chunks.len(), chunks.len() - 1);
    let frames = all_frames(&mut r);
    if let Some(f) = frames.last() {
        assert!(f.frame_seq < 40);
    }
    // Cut right after the last chunk: everything is there.
    let end = (last.offset + last.length) as usize;
    let mut r = Recording::open(&write(&bytes[..end])).unwrap();
    assert!(r.unfinished_at.is_some());
    assert_eq!(all_frames(&mut r).len(), 40);
    // Its message indexes were cut off: the count is not known.
    assert_eq!(r.frame_count, None);
}

#[test]
fn files_that_are_not_recordings_are_one_line_errors() {
    let p = write(b"hello, this is not mcap at all");
    let e = Recording::open(&p).unwrap_err().to_string();
    assert!(e.ends_with("not an MCAP file"), "{e}");
    // A valid MCAP file without the frame channel.
    let mut w = mcap::Writer::new(Cursor::new(Vec::new())).unwrap();
    let s = w.add_schema("other.Thing", "json", b"{}").unwrap();
    let c = w
        .add_channel(s, "/other", "json", &Default::default())
        .unwrap();
    w.write_to_known_channel(
        &mcap::records::MessageHeader {
            channel_id: c,
            sequence: 0,
            log_time: 1,
            publish_time: 1,
        },
        b"{}",
    )
    .unwrap();
    w.finish().unwrap();
    let bytes = w.into_inner().into_inner();
    let e = Recording::open(&write(&bytes)).unwrap_err().to_string();
    assert!(e.contains("not an lrbc recording"), "{e}");
    assert!(!e.contains('\n'));
    // Only the magic.
    let e = Recording::open(&write(mcap::MAGIC))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unreadable"), "{e}");
}

#[test]
fn the_player_fills_the_data_as_of_its_cursor_steps_and_finds_the_next_nan() {
    let (bytes, _) = recording_with_nan(30, Some(12));
    let r = Recording::open(&write(&bytes)).unwrap();
    let (t0, t1) = r.time_range().unwrap();
    let p = play(r);
    p.request(|s| s.seek_to = Some(t1));
    wait("the last frame", &|| p.state().frame_seq == Some(30));
    {
        let d = p.data.lock().unwrap();
        assert_eq!(d.latest.as_ref().unwrap().0, 30);
        assert_eq!(d.frames.len(), 30);
        assert_eq!(d.envs[&1].points.len(), 30);
        assert_eq!(d.envs[&1].detail.len(), 30);
        // Env 0 was not recorded: points, no rows.
        assert_eq!(d.envs[&0].points.len(), 30);
        assert!(d.envs[&0].detail.is_empty());
    }
    p.request(|s| s.seek_to = Some(t0));
    wait("back to the first", &|| p.state().frame_seq == Some(1));
    p.request(|s| s.step = 2);
    wait("two steps", &|| p.state().frame_seq == Some(3));
    p.request(|s| s.step = -1);
    wait("one back", &|| p.state().frame_seq == Some(2));
    // The NaN written at step 12 is the only one: found once, then not again.
    p.request(|s| s.find = Some(Find::Nan));
    wait("the NaN", &|| p.state().frame_seq == Some(12));
    assert!(p.data.lock().unwrap().scan.nan > 0);
    p.request(|s| s.find = Some(Find::Nan));
    wait("no other NaN", &|| p.state().note.is_some());
    assert_eq!(p.state().note.as_deref(), Some("no NaN after this frame"));
    assert_eq!(p.state().frame_seq, Some(12));
}

fn agg(seq: u64, dones: u32, nan: u32) -> FrameAgg {
    FrameAgg {
        frame_seq: seq,
        t_ns: seq * 1000,
        reward_min: 0.0,
        reward_p10: 0.0,
        reward_p50: 0.0,
        reward_mean: 0.0,
        reward_p90: 0.0,
        reward_max: 0.0,
        dones,
        truncateds: 0,
        resets: 0,
        nan_rewards: nan,
        step_latency_ns: None,
    }
}

fn data(frames: &[FrameAgg], geometry: Geometry) -> SamplerData {
    let mut ring = Ring::new(100);
    for f in frames {
        ring.push(*f);
    }
    SamplerData {
        counters: Counters {
            frame_seq: frames.last().map_or(0, |f| f.frame_seq),
            ..Counters::default()
        },
        frames: ring,
        ..SamplerData::empty(Arc::new(geometry), "x".into(), 1)
    }
}

#[test]
fn a_paused_view_scrubs_steps_and_finds_through_the_history() {
    let e = engine_with_nan(None);
    let e = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto)
        .unwrap()
        .geometry;
    let frames: Vec<_> = (1..=10)
        .map(|s| agg(s, u32::from(s == 7), u32::from(s == 4)))
        .collect();
    let mut f = Frozen::freeze(&data(&frames, e), &TrafficStore::default());
    assert_eq!(f.range, (1000, 10_000));
    assert_eq!(f.frame(), Some((10, 10_000)));
    f.seek(5500);
    assert_eq!(f.frame(), Some((5, 5000)));
    assert_eq!(f.view.lock().unwrap().frames.len(), 5);
    assert_eq!(f.view.lock().unwrap().counters.frame_seq, 5);
    f.step(-2);
    assert_eq!(f.frame(), Some((3, 3000)));
    f.find(Find::Nan);
    assert_eq!(f.frame(), Some((4, 4000)));
    f.find(Find::Done);
    assert_eq!(f.frame(), Some((7, 7000)));
    f.find(Find::Done);
    assert_eq!(f.frame(), Some((7, 7000)));
    assert!(f.note.as_deref().unwrap().starts_with("no done after"));
    f.playing = true;
    f.tick(2500);
    assert_eq!(f.frame(), Some((9, 9000)));
    f.tick(5000);
    assert!(!f.playing);
    assert_eq!(f.frame(), Some((10, 10_000)));
}

#[test]
fn a_seek_forward_publishes_the_cursor_from_scratch_and_a_step_adds_to_the_history() {
    let (bytes, _) = recording(30);
    let r = Recording::open(&write(&bytes)).unwrap();
    let (_, t1) = r.time_range().unwrap();
    let p = play(r);
    let generation = p.data.lock().unwrap().generation;
    // Forward within the history window: the frame at the new cursor is set first, as
    // for any seek (a new generation), then the history behind it.
    p.request(|s| s.seek_to = Some(t1));
    wait("the last frame", &|| p.state().frame_seq == Some(30));
    let after_seek = {
        let d = p.data.lock().unwrap();
        assert_eq!(d.frames.len(), 30);
        d.generation
    };
    assert!(after_seek > generation);
    p.request(|s| s.step = -1);
    wait("one back", &|| p.state().frame_seq == Some(29));
    let generation = p.data.lock().unwrap().generation;
    // A step forward adds to the history.
    p.request(|s| s.step = 1);
    wait("one forward", &|| p.state().frame_seq == Some(30));
    assert_eq!(p.data.lock().unwrap().generation, generation);
}

/// A `foxglove.RawImage` as the recorder writes one.
fn raw_image(width: u32, height: u32, encoding: &str, step: u32, data: &[u8]) -> Arc<[u8]> {
    use crate::rpc::foxglove_fb as fox;
    let mut b = flatbuffers::FlatBufferBuilder::new();
    let encoding = b.create_string(encoding);
    let data = b.create_vector(data);
    let img = fox::RawImage::create(
        &mut b,
        &fox::RawImageArgs {
            width,
            height,
            encoding: Some(encoding),
            step,
            data: Some(data),
            ..Default::default()
        },
    );
    b.finish(img, None);
    Arc::from(b.finished_data())
}

#[test]
fn the_image_region_of_a_recording_is_the_recorded_envs_pixels_and_bad_images_are_explained() {
    let name = unique_name("replay-img");
    let e = Engine::create(EngineConfig {
        image: Some((4, 2, 4)),
        ..EngineConfig::small(name, PlanLayout::Lrbc { ext: true }, 3, 1, 1)
    })
    .unwrap();
    let g = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto)
        .unwrap()
        .geometry;
    let px: Vec<u8> = (0..32u8).collect();
    // A step wider than the row: the padding is not copied.
    let mut padded = Vec::new();
    for row in px.chunks(16) {
        padded.extend_from_slice(row);
        padded.extend_from_slice(&[9, 9]);
    }
    let mut cameras = BTreeMap::new();
    cameras.insert(1, (50, raw_image(4, 2, "rgba8", 18, &padded)));
    let (img, note) = player::region_image(&g, &cameras, usize::MAX, (7, 3), true);
    let img = img.unwrap();
    assert_eq!(note, None);
    assert_eq!((img.image_seq, img.frame_seq, img.captured_ns), (7, 3, 50));
    assert_eq!(&img.pixels[32..64], &px[..]);
    // The envs not recorded are opaque black.
    assert!(img.pixels[..32].chunks(4).all(|p| p == [0, 0, 0, 255]));
    assert!(img.pixels[64..].chunks(4).all(|p| p == [0, 0, 0, 255]));

    // Wrong size, wrong encoding, too few bytes, not a RawImage: a note, no panic.
    for bad in [
        raw_image(5, 2, "rgba8", 20, &[0; 40]),
        raw_image(4, 2, "rgb8", 12, &[0; 24]),
        raw_image(4, 2, "rgba8", 16, &[0; 20]),
        raw_image(4, 2, "rgba8", u32::MAX, &[0; 32]),
        Arc::from(&b"not a flatbuffer"[..]),
    ] {
        let mut cameras = BTreeMap::new();
        cameras.insert(0, (1, bad));
        let (img, note) = player::region_image(&g, &cameras, usize::MAX, (1, 1), true);
        assert!(img.is_none());
        assert!(note.unwrap().contains("not 4×2 rgba8"));
    }
    let (img, note) = player::region_image(&g, &BTreeMap::new(), usize::MAX, (1, 1), false);
    assert!(img.is_none() && note.unwrap().contains("no camera images"));
    let (_, note) = player::region_image(&g, &cameras, 10, (1, 1), true);
    assert!(note.unwrap().contains("memory budget"));
}

/// A recording of a `layout` engine's segment (and of frame 1 when the capture sees it
/// at once), then `entries` (ring, payload) 1 ms apart, written as the recorder writes ring entries (their payload on
/// `/lrbc/ring/<ring>` at the time it saw them).
fn recording_with_entries(layout: PlanLayout, entries: &[(RegionKind, Vec<u8>)]) -> Vec<u8> {
    use crate::record::{Capture, FileSink, Kind, Message};
    let mut e = Engine::create(EngineConfig::small(
        unique_name("replay-ring"),
        layout,
        2,
        1,
        1,
    ))
    .unwrap();
    let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
    let mut capture = Capture::new(a, vec![0]).unwrap();
    let mut file = FileSink::new(Cursor::new(Vec::new()), capture.prelude()).unwrap();
    let mut messages = Vec::new();
    // Frames count from the attach: the first seen is the next one (torn: this engine
    // writes no action_seq).
    e.step_once(Some(1));
    capture.poll_until(&mut messages, |n| n.frames_seen == 1);
    file.sync(capture.prelude()).unwrap();
    let mut t = 0;
    for m in &messages {
        file.write(m).unwrap();
        t = t.max(m.log_time);
    }
    for (ring, payload) in entries {
        let topic = format!("/lrbc/ring/{}", ring.as_str());
        let channel = capture
            .prelude()
            .channels
            .iter()
            .position(|c| c.topic == topic)
            .unwrap();
        t += 1_000_000;
        file.write(&Message {
            channel,
            kind: Kind::RingEntry,
            log_time: t,
            publish_time: t,
            data: Arc::from(&payload[..]),
        })
        .unwrap();
    }
    file.finish(&capture.counts()).unwrap().into_inner()
}

/// A player with traffic `limits` at the end of `bytes`, once its traffic list has had
/// `rows` rows.
fn replayed(bytes: &[u8], rows: u64, limits: crate::traffic::TrafficLimits) -> Player {
    let r = Recording::open(&write(bytes)).unwrap();
    let (_, t1) = r.time_range().unwrap();
    let p = start(r, limits);
    p.request(|s| s.seek_to = Some(t1));
    wait("every entry in the traffic list", &|| {
        p.state().cursor_ns == t1 && p.store.lock().unwrap().total_rows() == rows
    });
    p
}

/// The rows of the player's traffic list at the end of `bytes` (`rows` of them).
fn replayed_traffic(bytes: &[u8], rows: u64) -> Vec<crate::traffic::TrafficRow> {
    let p = replayed(bytes, rows, crate::traffic::TrafficLimits::default());
    p.store.lock().unwrap().rows.iter().cloned().collect()
}

/// The records among traffic rows.
fn records_of(rows: &[crate::traffic::TrafficRow]) -> Vec<&crate::traffic::Record> {
    rows.iter()
        .filter_map(|r| match r {
            crate::traffic::TrafficRow::Record(r) => Some(&**r),
            _ => None,
        })
        .collect()
}

fn envelope(
    corr: u64,
    method: crate::rpc::fb::MethodId,
    error: Option<&str>,
    sent_ns: u64,
) -> Vec<u8> {
    crate::rpc::build_envelope(corr, method, error, sent_ns, |_| None)
}

#[test]
fn recorded_envelopes_show_decoded_and_paired_as_the_same_entries_did_live() {
    use crate::rings::lrbc::Producer;
    use crate::rpc::fb::MethodId;
    use crate::traffic::{Pairing, RingSelection, Traffic, TrafficEvent, TrafficRow};
    let (c2s, s2c) = (RegionKind::CmdC2s, RegionKind::CmdS2c);
    let entries = vec![
        (c2s, envelope(1, MethodId::GetJointState, None, 1_000)),
        (s2c, envelope(1, MethodId::GetJointState, None, 4_500)),
        (c2s, envelope(2, MethodId::GetJointState, None, 0)),
        (
            s2c,
            envelope(2, MethodId::GetJointState, Some("no such joint"), 0),
        ),
        (s2c, envelope(99, MethodId::GetJointState, None, 0)),
        (c2s, b"hello, not a flatbuffer".to_vec()),
    ];
    let rows = replayed_traffic(
        &recording_with_entries(PlanLayout::Lrbc { ext: true }, &entries),
        entries.len() as u64,
    );

    // The same entries through live rings.
    let seg = crate::testutil::TestSegment::create(
        "replay-live",
        &crate::testutil::spec(PlanLayout::Lrbc { ext: true }, 2),
    );
    let a = seg.attach();
    let mut live = Traffic::new(&a, RingSelection::Cmd);
    let mut client = Producer::new(&seg.rw, *a.geometry.ring(c2s).unwrap());
    let mut engine = Producer::new(&seg.rw, *a.geometry.ring(s2c).unwrap());
    for (ring, payload) in &entries {
        let p = if *ring == c2s {
            &mut client
        } else {
            &mut engine
        };
        p.try_push(&seg.rw, payload).unwrap();
    }
    let mut events = Vec::new();
    live.poll(&a.segment, 1_000_000, usize::MAX, &mut events);
    let live_records: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            TrafficEvent::Record(r) => Some(r),
            _ => None,
        })
        .collect();
    let records = records_of(&rows);
    assert_eq!(records.len(), 5);
    for r in &records {
        let l = live_records
            .iter()
            .find(|l| l.ring == r.ring && l.correlation_id == r.correlation_id)
            .unwrap();
        assert_eq!(
            (&r.decoded, &r.method, &r.error, r.is_request),
            (&l.decoded, &l.method, &l.error, l.is_request),
            "{} {}",
            r.ring.as_str(),
            r.correlation_id
        );
        // Live, a request is answered by the end of the poll; the store shows it so.
        let live_pairing = match l.pairing {
            Pairing::Pending if r.correlation_id != 99 => Pairing::Answered,
            p => p,
        };
        assert_eq!(r.pairing, live_pairing, "{}", r.correlation_id);
    }
    let response = |corr| {
        records
            .iter()
            .find(|r| !r.is_request && r.correlation_id == corr)
            .unwrap()
    };
    let request = |corr| {
        records
            .iter()
            .find(|r| r.is_request && r.correlation_id == corr)
            .unwrap()
    };
    // From the senders' clocks when both set them, as live; else from the times the
    // recorder saw them (1 ms apart).
    assert_eq!(response(1).latency_ns, Some(3_500));
    assert_eq!(response(1).partner, Some(request(1).index));
    assert_eq!(request(1).partner, Some(response(1).index));
    assert_eq!(response(2).latency_ns, Some(1_000_000));
    assert_eq!(response(2).error.as_deref(), Some("no such joint"));
    assert_eq!(response(99).pairing, Pairing::Orphan);
    // The entry that is no envelope is malformed, with the live error and its bytes.
    let live_error = events.iter().find_map(|e| match e {
        TrafficEvent::Malformed { error, .. } => Some(error),
        _ => None,
    });
    let malformed = rows.iter().find_map(|r| match r {
        TrafficRow::Malformed {
            ring, error, raw, ..
        } => Some((*ring, error, raw)),
        _ => None,
    });
    let (ring, error, raw) = malformed.unwrap();
    assert_eq!((ring, Some(error)), (c2s, live_error));
    assert!(error.contains("identifier"), "{error}");
    assert_eq!(raw.as_slice(), b"hello, not a flatbuffer");
}

#[test]
fn recorded_luckyrobots_entries_show_their_json_error_and_pairing_without_their_headers() {
    use crate::traffic::{Pairing, TrafficRow};
    let (c2s, s2c) = (RegionKind::CmdC2s, RegionKind::CmdS2c);
    let entries = vec![
        (c2s, br#"{"mode": "warp"}"#.to_vec()),
        (s2c, br#"{"error": "unknown mode warp"}"#.to_vec()),
        (c2s, br#"{"agent_name": "a"}"#.to_vec()),
        (s2c, br#"{"success": true}"#.to_vec()),
        (s2c, b"not json".to_vec()),
    ];
    let rows = replayed_traffic(
        &recording_with_entries(PlanLayout::Lucky, &entries),
        entries.len() as u64,
    );
    let records = records_of(&rows);
    let shown: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r.method.as_str(),
                r.error.as_deref(),
                r.pairing,
                r.latency_ns,
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("SetSimulationMode", None, Pairing::Answered, None),
            (
                "SetSimulationMode",
                Some("unknown mode warp"),
                Pairing::Response,
                Some(1_000_000)
            ),
            ("ResetAgent", None, Pairing::Answered, None),
            ("ResetAgent", None, Pairing::Response, Some(1_000_000)),
        ]
    );
    assert_eq!(records[0].to_json()["fields"]["mode"], "warp");
    let Some(TrafficRow::Malformed { error, .. }) = rows.last() else {
        panic!("{rows:?}")
    };
    assert!(error.starts_with("payload is not JSON"), "{error}");
}

#[test]
fn a_recordings_traffic_list_keeps_within_the_bytes_of_its_limits_as_a_live_one() {
    use crate::rpc::fb::MethodId;
    let entries: Vec<_> = (0..200)
        .map(|i| {
            let error = "e".repeat(1_000);
            (
                RegionKind::CmdS2c,
                envelope(i, MethodId::GetJointState, Some(&error), 0),
            )
        })
        .collect();
    let limits = crate::traffic::TrafficLimits {
        max_rows: 1_000,
        max_bytes: 64 << 10,
        max_stream_bytes: 1 << 20,
    };
    let p = replayed(
        &recording_with_entries(PlanLayout::Lrbc { ext: true }, &entries),
        200,
        limits,
    );
    let store = p.store.lock().unwrap();
    assert!(store.rows_dropped > 0);
    assert!(store.memory().0 <= limits.max_bytes, "{:?}", store.memory());
}

#[test]
fn a_recordings_ring_losses_and_malformed_entries_show_in_its_traffic_list_as_they_did_live() {
    use crate::rings::lrbc::{Consumer, Producer};
    use crate::testutil::{TestSegment, spec};
    use crate::traffic::TrafficRow;
    let seg = TestSegment::create("replayevents", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let a = seg.attach();
    let c2s = *a.geometry.ring(RegionKind::CmdC2s).unwrap();
    let mut rec = Recorder::new(a, vec![0], Cursor::new(Vec::new())).unwrap();
    let (mut client, mut engine) = (Producer::new(&seg.rw, c2s), Consumer::new(&seg.rw, c2s));
    // A frame, so that the recording has a time range.
    seg.rw
        .store_u64(crate::layout::headers::LrbcHeader::FRAME_SEQ_OFFSET, 1);
    client
        .try_push(&seg.rw, b"hello, not a flatbuffer")
        .unwrap();
    // (Torn: this engine writes no action_seq; seen all the same.)
    rec.poll_until(|c| c.frames_seen >= 1);
    // The engine takes requests faster than the recorder looks: the ring laps it.
    let mut buf = Vec::new();
    let request = envelope(7, crate::rpc::fb::MethodId::GetServiceStatus, None, 1);
    for _ in 0..(4 * c2s.capacity_bytes as usize / request.len()) {
        client.try_push(&seg.rw, &request).unwrap();
        engine.try_pop(&seg.rw, &mut buf).unwrap();
    }
    seg.rw
        .store_u64(crate::layout::headers::LrbcHeader::FRAME_SEQ_OFFSET, 2);
    rec.poll_until(|c| c.frames_seen >= 2);
    let (counts, out) = rec.finish_into_inner().unwrap();
    assert!(
        counts.ring_lost_bytes > 0 && counts.ring_events >= 2,
        "{counts:?}"
    );
    let r = Recording::open(&write(&out.into_inner())).unwrap();
    let (_, t1) = r.time_range().unwrap();
    let p = start(r, crate::traffic::TrafficLimits::default());
    p.request(|s| s.seek_to = Some(t1));
    let shown = || {
        let store = p.store.lock().unwrap();
        let lost: u64 = store
            .rows
            .iter()
            .filter_map(|r| match r {
                TrafficRow::Lost { lost_bytes, .. } => Some(*lost_bytes),
                _ => None,
            })
            .sum();
        let malformed = store.rows.iter().any(|r| {
            matches!(r, TrafficRow::Malformed { ring: RegionKind::CmdC2s, raw, error, .. }
                if raw.as_slice() == b"hello, not a flatbuffer" && error.contains("identifier"))
        });
        (lost, malformed)
    };
    wait("the loss and the malformed entry in the list", &|| {
        p.state().cursor_ns == t1 && shown() == (counts.ring_lost_bytes, true)
    });
}

#[test]
fn recorded_luckyrobots_headers_pair_responses_by_correlation_id_and_give_status_errors() {
    use crate::rings::{LuckyEntryHeader, lucky};
    use crate::testutil::{TestSegment, spec};
    use crate::traffic::{Pairing, TrafficRow};
    let seg = TestSegment::create("replaylucky", &spec(PlanLayout::Lucky, 2));
    let a = seg.attach();
    let (c2s, s2c) = (
        *a.geometry.ring(RegionKind::CmdC2s).unwrap(),
        *a.geometry.ring(RegionKind::CmdS2c).unwrap(),
    );
    let mut rec = Recorder::new(a, vec![0], Cursor::new(Vec::new())).unwrap();
    let (mut client, mut engine) = (
        lucky::Producer::new(&seg.rw, c2s),
        lucky::Producer::new(&seg.rw, s2c),
    );
    let h = |corr, word| LuckyEntryHeader {
        correlation_id: corr,
        method_or_status: word,
        payload_length: 0,
    };
    // Two requests, answered in the other order; the second answer has a bad status.
    client
        .try_push(&seg.rw, h(5, 2), br#"{"mode": "warp"}"#)
        .unwrap();
    client
        .try_push(&seg.rw, h(6, 1), br#"{"agent_name": "a"}"#)
        .unwrap();
    engine
        .try_push(&seg.rw, h(6, 0), br#"{"success": true}"#)
        .unwrap();
    engine.try_push(&seg.rw, h(5, 3), br#"{}"#).unwrap();
    let header = crate::layout::headers::LuckyHeader::FRAME_SEQ_OFFSET;
    seg.rw.store_u64(header, 1);
    rec.poll_until(|c| c.frames_seen >= 1);
    let (counts, out) = rec.finish_into_inner().unwrap();
    assert_eq!(counts.ring_entries, 4, "{counts:?}");
    let rows = replayed_traffic(&out.into_inner(), 4);
    let records = records_of(&rows);
    let by_corr = |corr: u64, request: bool| {
        records
            .iter()
            .find(|r| r.correlation_id == corr && r.is_request == request)
            .unwrap_or_else(|| panic!("no {corr} {request} in {records:?}"))
    };
    assert_eq!(by_corr(5, true).method, "SetSimulationMode");
    assert_eq!(by_corr(6, true).method, "ResetAgent");
    assert_eq!(by_corr(6, false).partner, Some(by_corr(6, true).index));
    assert_eq!(by_corr(5, false).partner, Some(by_corr(5, true).index));
    assert_eq!(by_corr(5, false).error.as_deref(), Some("status 3"));
    assert_eq!(by_corr(6, false).error, None);
    assert!(records.iter().all(|r| r.pairing != Pairing::Orphan));
    assert!(
        !rows
            .iter()
            .any(|r| matches!(r, TrafficRow::Malformed { .. }))
    );
}
