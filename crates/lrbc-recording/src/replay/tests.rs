//! The replay's shared fixtures: recordings that the recorder makes of a simulated
//! engine, players on them. The reader's and the player's tests are next to them
//! (`reader/tests.rs`, `player/tests.rs`, `player/traffic/tests.rs`).

use std::io::Cursor;
use std::path::PathBuf;

use super::*;
use crate::recorder::Recorder;
use lrbc::attach::{Target, attach};
use lrbc::layout::LayoutChoice;
use lrbc::layout::plan::PlanLayout;
use lrbc::testutil::unique_name;
use lrbc_sim::engine::{Engine, EngineConfig};
use std::sync::Arc;

pub(super) fn engine_with_nan(nan_at_step: Option<u64>) -> Engine {
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
pub(super) fn recording(steps: u64) -> (Vec<u8>, Vec<u64>) {
    recording_with_nan(steps, None)
}

pub(super) fn recording_with_nan(steps: u64, nan_at_step: Option<u64>) -> (Vec<u8>, Vec<u64>) {
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

pub(super) fn write(bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(unique_name("replay-test"));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("r.mcap");
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Waits (up to 10 s, then fails saying `what`) until `ok`.
pub(super) fn wait(what: &str, ok: &dyn Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ok() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A player on `r` with the default settings and traffic `limits`.
pub(super) fn start(r: Recording, limits: lrbc_live::traffic::TrafficLimits) -> Player {
    Player::start(
        r,
        lrbc_live::sampler::SamplerSettings::default(),
        limits,
        lrbc_live::detect::DetectSettings::default(),
        Arc::new(|| {}),
    )
    .unwrap()
}

/// A player on `r` with the default settings, once it shows the first frame.
pub(super) fn play(r: Recording) -> Player {
    let p = start(r, lrbc_live::traffic::TrafficLimits::default());
    wait("the first frame", &|| p.state().frame_seq == Some(1));
    p
}
