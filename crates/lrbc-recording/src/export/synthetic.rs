//! Synthetic recordings, for the export benchmark and the tests.
//!
//! They are written as `recorder::Recorder` writes them, without a segment: profile `lrbc`,
//! the frame schema and channel, `lrbc.geometry`, `lrbc.names`, `lrbc.tool`, frames, then
//! `lrbc.counts`.

use std::collections::BTreeMap;
use std::io::{Seek, Write};

use crate::format::{
    COUNTS_METADATA, FRAME_SCHEMA, FRAME_TOPIC, FrameRef, GEOMETRY_METADATA, NAMES_METADATA,
    PROFILE, SEGMENT_METADATA, TOOL_METADATA, segment_metadata,
};
use lrbc::rpc::RECORDING_BFBS;

/// What a synthetic recording holds.
#[derive(Clone, Debug)]
pub struct Spec {
    pub num_envs: u32,
    pub obs_size: u32,
    pub act_size: u32,
    /// Envs whose observations and actions are recorded, ascending.
    pub recorded: Vec<u32>,
    pub frames: u64,
    /// Frames are this far apart on the engine's clock.
    pub frame_interval_ns: u64,
    /// MCAP chunk size in bytes (the recorder's default when None).
    pub chunk_size: Option<u64>,
    /// At this frame, env 0's reward and first observation are NaN.
    pub nan_at: Option<u64>,
    /// How the chunks are compressed.
    pub compression: crate::format::Compression,
    /// Each env's episode ends (done, then reset) every this many frames, env `i`'s `i`
    /// frames earlier than env 0's.
    pub episode_frames: u64,
    /// Added to every reward.
    pub reward_offset: f32,
    /// Values changed at chosen frames: a run that diverges from the same spec without
    /// them exactly there.
    pub plants: Vec<SyntheticPlant>,
}

/// One value of one frame changed, in a synthetic recording.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SyntheticPlant {
    /// The frame's `frame_seq` (from 1).
    pub frame: u64,
    pub env: u32,
    pub value: PlantedValue,
}

/// Which value a [`SyntheticPlant`] changes, and how.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PlantedValue {
    /// Observation `index` plus `delta` (the env must be recorded).
    Obs { index: u32, delta: f32 },
    /// Action `index` plus `delta`: the action that made the frame (the env must be
    /// recorded).
    Act { index: u32, delta: f32 },
    /// The reward plus `delta`.
    Reward { delta: f32 },
    /// The done flag flipped.
    Done,
}

impl Spec {
    /// `frames` frames of `num_envs` envs with `obs_size` observations and `act_size`
    /// actions, every env recorded, 1 kHz, the recorder's chunks and compression,
    /// episodes of 200 frames, no NaN.
    pub fn of(num_envs: u32, obs_size: u32, act_size: u32, frames: u64) -> Self {
        Self {
            num_envs,
            obs_size,
            act_size,
            recorded: (0..num_envs).collect(),
            frames,
            frame_interval_ns: 1_000_000,
            chunk_size: None,
            nan_at: None,
            compression: crate::format::Compression::default(),
            episode_frames: 200,
            reward_offset: 0.0,
            plants: Vec::new(),
        }
    }

    /// The tests' small recording: 6 envs (envs 0, 2 and 5 with their values), 5
    /// observations, 2 actions, 100 Hz, chunks of 4 KiB, uncompressed.
    pub fn small(frames: u64, nan_at: Option<u64>) -> Self {
        Self {
            recorded: vec![0, 2, 5],
            frame_interval_ns: 10_000_000,
            chunk_size: Some(4096),
            compression: crate::format::Compression::None,
            nan_at,
            ..Self::of(6, 5, 2, frames)
        }
    }
}

/// The bytes of the segment a recording of `spec` was made of, as the recorder keeps
/// them (`lrbc.segment`, what detection reads): an LRBC v1 segment with the extension,
/// planned as an engine plans it, so that `open` detects its geometry again. Empty when
/// no segment of these sizes can be planned.
fn segment_of(spec: &Spec) -> BTreeMap<String, String> {
    use lrbc::layout::plan::{Plan, PlanLayout, PlanSpec};
    let plan_spec = PlanSpec {
        layout: PlanLayout::Lrbc { ext: true },
        num_envs: spec.num_envs,
        obs_size: spec.obs_size.max(1),
        act_size: spec.act_size.max(1),
        image: None,
        cmd_ring_size: 4096,
        ctl_ring_size: Some(4096),
        names: lrbc::layout::Names {
            obs: (0..spec.obs_size).map(|i| format!("obs_{i}")).collect(),
            act: (0..spec.act_size).map(|i| format!("act_{i}")).collect(),
        },
        mode: 0,
        server_pid: 0,
        max_size_bytes: 1 << 40,
    };
    let Ok(plan) = Plan::new(&plan_spec) else {
        return BTreeMap::new();
    };
    let bytes = plan.initial_bytes(&plan_spec);
    let traced = lrbc::layout::Traced::new(&bytes);
    // Only to learn which bytes detection reads.
    let _ = lrbc::layout::inspect(&traced, lrbc::layout::LayoutChoice::Auto);
    segment_metadata(&traced.into_sparse())
}

/// Writes the recording `spec` describes; returns the bytes of one frame message.
pub fn write<W: Write + Seek>(spec: &Spec, out: W) -> Result<(W, usize), mcap::McapError> {
    let mut options = crate::format::write_options(mcap::WriteOptions::new(), spec.compression)
        .map_err(|e| mcap::McapError::UnsupportedCompression(e.into()))?
        .profile(PROFILE)
        .library(concat!("lrbc-inspector ", env!("CARGO_PKG_VERSION")));
    if let Some(size) = spec.chunk_size {
        options = options.chunk_size(Some(size));
    }
    let mut w = options.create(out)?;
    let schema = w.add_schema(FRAME_SCHEMA, "flatbuffer", RECORDING_BFBS)?;
    let channel = w.add_channel(schema, FRAME_TOPIC, "flatbuffer", &BTreeMap::new())?;
    let text = |pairs: Vec<(String, String)>| pairs.into_iter().collect::<BTreeMap<_, _>>();
    let recorded = spec
        .recorded
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    for (name, metadata) in [
        (
            GEOMETRY_METADATA,
            text(vec![
                ("layout".into(), "lrbc-v1-ext".into()),
                ("num_envs".into(), spec.num_envs.to_string()),
                ("obs_size".into(), spec.obs_size.to_string()),
                ("act_size".into(), spec.act_size.to_string()),
                ("recorded_envs".into(), recorded),
            ]),
        ),
        (
            NAMES_METADATA,
            text(
                (0..spec.obs_size)
                    .map(|i| (format!("obs.{i}"), format!("obs_{i}")))
                    .chain((0..spec.act_size).map(|i| (format!("act.{i}"), format!("act_{i}"))))
                    .collect(),
            ),
        ),
        (SEGMENT_METADATA, segment_of(spec)),
        (
            TOOL_METADATA,
            text(vec![
                ("name".into(), "lrbc-inspector".into()),
                ("version".into(), env!("CARGO_PKG_VERSION").into()),
            ]),
        ),
    ] {
        w.write_metadata(&mcap::records::Metadata {
            name: name.into(),
            metadata,
        })?;
    }
    let n = spec.num_envs as usize;
    let (o, a) = (spec.obs_size as usize, spec.act_size as usize);
    let k = spec.recorded.len();
    let mut b = flatbuffers::FlatBufferBuilder::new();
    let (mut rewards, mut flags) = (vec![0f32; n], vec![0u8; n]);
    let (mut obs, mut act) = (vec![0f32; k * o], vec![0f32; k * a]);
    let zeros = vec![0u8; n];
    let mut message_bytes = 0;
    for seq in 1..=spec.frames {
        let x = seq as f32 * 0.01;
        for (i, r) in rewards.iter_mut().enumerate() {
            *r = (x + i as f32).sin() + spec.reward_offset;
        }
        for (i, v) in obs.iter_mut().enumerate() {
            *v = (x * 0.5 + i as f32).cos();
        }
        for (i, v) in act.iter_mut().enumerate() {
            *v = (x * 0.25 + i as f32).sin();
        }
        if spec.nan_at == Some(seq) {
            if let Some(r) = rewards.first_mut() {
                *r = f32::NAN;
            }
            if spec.recorded.first() == Some(&0)
                && let Some(v) = obs.first_mut()
            {
                *v = f32::NAN;
            }
        }
        for (i, f) in flags.iter_mut().enumerate() {
            *f = u8::from((seq + i as u64).is_multiple_of(spec.episode_frames.max(1)));
        }
        let mut dones = flags.clone();
        for p in spec.plants.iter().filter(|p| p.frame == seq) {
            let row = spec.recorded.iter().position(|&e| e == p.env);
            let e = p.env as usize;
            match p.value {
                PlantedValue::Obs { index, delta } => {
                    if let Some(v) = row.and_then(|k| obs.get_mut(k * o + index as usize)) {
                        *v += delta;
                    }
                }
                PlantedValue::Act { index, delta } => {
                    if let Some(v) = row.and_then(|k| act.get_mut(k * a + index as usize)) {
                        *v += delta;
                    }
                }
                PlantedValue::Reward { delta } => {
                    if let Some(r) = rewards.get_mut(e) {
                        *r += delta;
                    }
                }
                PlantedValue::Done => {
                    if let Some(d) = dones.get_mut(e) {
                        *d ^= 1;
                    }
                }
            }
        }
        let frame_time_ns = seq * spec.frame_interval_ns;
        let sampled_ns = 1_000_000_000 + frame_time_ns;
        let frame = FrameRef {
            frame_seq: seq,
            frame_time_ns,
            action_seq: seq,
            action_time_ns: frame_time_ns.saturating_sub(spec.frame_interval_ns / 4),
            sampled_ns,
            rewards: &rewards,
            dones: &dones,
            truncateds: Some(&zeros),
            resets: &flags,
            envs: &spec.recorded,
            observations: &obs,
            actions: &act,
        }
        .encode(&mut b);
        message_bytes = frame.len();
        w.write_to_known_channel(
            &mcap::records::MessageHeader {
                channel_id: channel,
                sequence: seq as u32,
                log_time: sampled_ns,
                publish_time: frame_time_ns,
            },
            frame,
        )?;
    }
    w.write_metadata(&mcap::records::Metadata {
        name: COUNTS_METADATA.into(),
        metadata: text(vec![("frames_recorded".into(), spec.frames.to_string())]),
    })?;
    w.finish()?;
    Ok((w.into_inner(), message_bytes))
}
