use std::collections::BTreeMap;
use std::sync::Arc;

use super::images::{ImageOrigin, region_image};

const RECORDED: ImageOrigin = ImageOrigin::Recording { has_cameras: true };
use crate::replay::Recording;
use crate::replay::tests::{play, recording, recording_with_nan, wait, write};
use lrbc::attach::{Target, attach};
use lrbc::layout::LayoutChoice;
use lrbc::layout::plan::PlanLayout;
use lrbc::testutil::unique_name;
use lrbc_sim::engine::{Engine, EngineConfig};

#[test]
fn the_player_fills_the_data_as_of_its_cursor_steps_and_goes_to_the_recordings_event() {
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
    // The NaN written at step 12 (env 0's first observation and its reward) is the
    // recording's two events; their time is frame 12's.
    wait("the recording's events", &|| {
        !p.events.lock().unwrap().events().is_empty()
    });
    let events: Vec<_> = p.events.lock().unwrap().events().iter().cloned().collect();
    assert_eq!(events.len(), 2, "{events:?}");
    for e in &events {
        assert_eq!(
            (e.kind, e.first_frame, e.env),
            (lrbc_live::detect::EventKind::Nonfinite, 12, Some(0))
        );
    }
    p.request(|s| s.seek_to = Some(events[0].time_ns));
    wait("the NaN", &|| p.state().frame_seq == Some(12));
    let latest = p.data.lock().unwrap().latest.clone();
    assert!(latest.is_some_and(|(_, h)| h.rewards.iter().any(|r| r.is_nan())));
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
    use lrbc::rpc::foxglove_fb as fox;
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
    let (img, note) = region_image(&g, &cameras, usize::MAX, (7, 3), RECORDED);
    let img = img.unwrap();
    let note = note.expect("the black tiles are explained");
    assert!(note.contains("env 1 ") && note.contains("black"), "{note}");
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
        let (img, note) = region_image(&g, &cameras, usize::MAX, (1, 1), RECORDED);
        assert!(img.is_none());
        assert!(note.unwrap().contains("not 4×2 rgba8"));
    }
    let none = ImageOrigin::Recording { has_cameras: false };
    let (img, note) = region_image(&g, &BTreeMap::new(), usize::MAX, (1, 1), none);
    assert!(img.is_none() && note.unwrap().contains("no camera images"));
    let (_, note) = region_image(
        &g,
        &BTreeMap::new(),
        usize::MAX,
        (1, 1),
        ImageOrigin::Served,
    );
    assert!(note.unwrap().contains("serve --images"));
    let (_, note) = region_image(&g, &cameras, 10, (1, 1), RECORDED);
    assert!(note.unwrap().contains("memory budget"));
}
