//! A flight recorder: follows `frame_seq` and writes each consistent frame of the
//! recorded envs as a FlatBuffers `lrbc.recording.Frame` (`schema/recording.fbs`) on the
//! MCAP channel `/lrbc/frame`, and each command or control ring entry's payload, as
//! written, on `/lrbc/ring/<ring>`. Metadata records describe the segment (`lrbc.header`,
//! `lrbc.geometry`, `lrbc.names`, `lrbc.tool`) and, at the end, what was kept and lost
//! (`lrbc.counts`). Chunks are uncompressed.

use std::collections::{BTreeMap, HashMap};
use std::io::{Seek, SeekFrom, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::attach::Attached;
use crate::layout::{Layout, RegionKind};
use crate::rpc::{RECORDING_BFBS, recording_fb as fb};
use crate::segment::monotonic_now_ns;
use crate::snapshot::{self, HotData};
use crate::traffic::{RingSelection, Traffic, TrafficEvent};

/// The channel of frames.
pub const FRAME_TOPIC: &str = "/lrbc/frame";
/// The schema name of frames.
pub const FRAME_SCHEMA: &str = "lrbc.recording.Frame";

/// The metadata record holding the bytes of the segment that layout detection reads
/// (header, names, ring headers): `size_bytes`, and `bytes@OFFSET` as lowercase hex.
pub const SEGMENT_METADATA: &str = "lrbc.segment";

/// The `lrbc.segment` metadata of `sparse`.
pub fn segment_metadata(sparse: &crate::layout::Sparse) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("size_bytes".into(), sparse.len_bytes.to_string());
    for (offset, bytes) in &sparse.pieces {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        m.insert(format!("bytes@{offset}"), hex);
    }
    m
}

/// The bytes stored by [`segment_metadata`]; None when a value is not what it writes.
pub fn segment_from_metadata(m: &BTreeMap<String, String>) -> Option<crate::layout::Sparse> {
    let len_bytes = m.get("size_bytes")?.parse().ok()?;
    let mut pieces = Vec::new();
    for (key, hex) in m {
        let Some(offset) = key.strip_prefix("bytes@") else {
            continue;
        };
        let offset: u64 = offset.parse().ok()?;
        if hex.len() % 2 != 0 {
            return None;
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        pieces.push((offset, bytes));
    }
    pieces.sort_by_key(|(o, _)| *o);
    let overlapping = pieces
        .windows(2)
        .any(|w| w[0].0 + w[0].1.len() as u64 > w[1].0);
    (!overlapping).then_some(crate::layout::Sparse { len_bytes, pieces })
}

/// A recording that could not be written or started, as one line.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("writing the recording: {0}")]
    Mcap(#[from] mcap::McapError),
    #[error("env {env} does not exist (the segment has {num_envs} envs)")]
    NoSuchEnv { env: u32, num_envs: u32 },
}

/// What the recorder saw, kept and lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Frames whose `frame_seq` the recorder saw (copied, torn or not).
    pub frames_seen: u64,
    pub frames_recorded: u64,
    /// Frames that came and went between two looks (`frame_seq` jumped by more than one).
    pub frames_missed: u64,
    /// Frames copied while the engine wrote them, so not kept.
    pub frames_torn: u64,
    pub ring_entries: u64,
    /// Ring bytes overwritten before the recorder read them.
    pub ring_lost_bytes: u64,
}

/// A writer that counts the bytes of the file (its length, shared with the recorder).
#[derive(Debug)]
struct Counting<W> {
    inner: W,
    pos: u64,
    len: Arc<AtomicU64>,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.pos += n as u64;
        // Relaxed: a figure for progress lines, with no data behind it.
        self.len.fetch_max(self.pos, Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Seek> Seek for Counting<W> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = self.inner.seek(to)?;
        Ok(self.pos)
    }
}

/// Records one attachment into an MCAP file.
pub struct Recorder<W: Write + Seek> {
    writer: mcap::Writer<Counting<W>>,
    written: Arc<AtomicU64>,
    attached: Attached,
    traffic: Traffic,
    envs: Vec<u32>,
    frame_channel: u16,
    ring_channels: HashMap<RegionKind, u16>,
    frame_sequence: u32,
    ring_sequence: u32,
    last_frame_seq: Option<u64>,
    hot: HotData,
    rows: Vec<f32>,
    builder: flatbuffers::FlatBufferBuilder<'static>,
    events: Vec<TrafficEvent>,
    counts: Counts,
}

impl<W: Write + Seek> std::fmt::Debug for Recorder<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("envs", &self.envs)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

fn strings(pairs: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    pairs.into_iter().collect()
}

impl<W: Write + Seek> Recorder<W> {
    /// Starts a recording of `envs` of `attached` into `out`: writes the schemas,
    /// channels and the segment's metadata.
    pub fn new(attached: Attached, mut envs: Vec<u32>, out: W) -> Result<Self, RecordError> {
        envs.sort_unstable();
        envs.dedup();
        let g = &attached.geometry;
        if let Some(&env) = envs.iter().find(|&&e| e >= g.num_envs) {
            return Err(RecordError::NoSuchEnv {
                env,
                num_envs: g.num_envs,
            });
        }
        let options = mcap::WriteOptions::new()
            .compression(None)
            .profile("lrbc")
            .library(concat!("lrbc-inspector ", env!("CARGO_PKG_VERSION")));
        let written = Arc::new(AtomicU64::new(0));
        let mut writer = options.create(Counting {
            inner: out,
            pos: 0,
            len: Arc::clone(&written),
        })?;
        let frame_schema = writer.add_schema(FRAME_SCHEMA, "flatbuffer", RECORDING_BFBS)?;
        let frame_channel =
            writer.add_channel(frame_schema, FRAME_TOPIC, "flatbuffer", &BTreeMap::new())?;
        let traffic = Traffic::new(&attached, RingSelection::All);
        let mut ring_channels = HashMap::new();
        let lucky = g.layout == Layout::LuckyrobotsIpc;
        let envelope_schema = if lucky {
            0
        } else {
            writer.add_schema(
                "hazel.rpc.Envelope",
                "flatbuffer",
                crate::rpc::schema::SCHEMA_BFBS,
            )?
        };
        for kind in traffic.rings() {
            let topic = format!("/lrbc/ring/{}", kind.as_str());
            let encoding = if lucky { "json" } else { "flatbuffer" };
            let id = writer.add_channel(envelope_schema, &topic, encoding, &BTreeMap::new())?;
            ring_channels.insert(kind, id);
        }
        let header = strings(g.fields().filter_map(|f| {
            let v = f.decode(&g.header)?;
            Some((f.name.to_string(), v.display()))
        }));
        writer.write_metadata(&mcap::records::Metadata {
            name: "lrbc.header".into(),
            metadata: header,
        })?;
        let mut geometry = strings([
            ("layout".into(), g.layout.as_str().into()),
            ("size_bytes".into(), g.size_bytes.to_string()),
            ("num_envs".into(), g.num_envs.to_string()),
            ("obs_size".into(), g.obs_size.to_string()),
            ("act_size".into(), g.act_size.to_string()),
            (
                "recorded_envs".into(),
                envs.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        ]);
        for r in &g.regions {
            geometry.insert(
                format!("region.{}", r.kind.as_str()),
                format!("{}+{}", r.offset_bytes, r.length_bytes),
            );
        }
        writer.write_metadata(&mcap::records::Metadata {
            name: "lrbc.geometry".into(),
            metadata: geometry,
        })?;
        let names = strings(
            g.names
                .obs
                .iter()
                .enumerate()
                .map(|(i, n)| (format!("obs.{i}"), n.clone()))
                .chain(
                    g.names
                        .act
                        .iter()
                        .enumerate()
                        .map(|(i, n)| (format!("act.{i}"), n.clone())),
                ),
        );
        writer.write_metadata(&mcap::records::Metadata {
            name: "lrbc.names".into(),
            metadata: names,
        })?;
        let traced = crate::layout::Traced::new(&attached.segment);
        // The same bytes as at attach, bar the counters: the geometry is detected again
        // only to learn which bytes detection reads.
        let _ = crate::layout::inspect(&traced, attached.choice);
        writer.write_metadata(&mcap::records::Metadata {
            name: SEGMENT_METADATA.into(),
            metadata: segment_metadata(&traced.into_sparse()),
        })?;
        writer.write_metadata(&mcap::records::Metadata {
            name: "lrbc.tool".into(),
            metadata: strings([
                ("name".into(), "lrbc-inspector".into()),
                ("version".into(), env!("CARGO_PKG_VERSION").into()),
            ]),
        })?;
        Ok(Self {
            writer,
            written,
            attached,
            traffic,
            envs,
            frame_channel,
            ring_channels,
            frame_sequence: 0,
            ring_sequence: 0,
            last_frame_seq: None,
            hot: HotData::default(),
            rows: Vec::new(),
            builder: flatbuffers::FlatBufferBuilder::new(),
            events: Vec::new(),
            counts: Counts::default(),
        })
    }

    pub fn attached(&self) -> &Attached {
        &self.attached
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Bytes in the file so far.
    pub fn bytes_written(&self) -> u64 {
        // Relaxed: see `Counting::write`.
        self.written.load(Ordering::Relaxed)
    }

    /// Records a new frame, if one was published, and the ring entries published since
    /// the last call. True when anything was written.
    pub fn poll(&mut self) -> Result<bool, RecordError> {
        let wrote_frame = self.poll_frame()?;
        let wrote_entries = self.poll_rings()?;
        Ok(wrote_frame || wrote_entries)
    }

    fn poll_frame(&mut self) -> Result<bool, RecordError> {
        let (seg, g) = (&self.attached.segment, &self.attached.geometry);
        let now_seq = seg.load_u64(g.counters.frame_seq).unwrap_or(0);
        if self.last_frame_seq == Some(now_seq) {
            return Ok(false);
        }
        let (hot, rows, envs) = (&mut self.hot, &mut self.rows, &self.envs);
        let copy = snapshot::guarded_read(seg, g, 3, |s| {
            snapshot::copy_hot_into(s, g, hot);
            snapshot::copy_rows_into(s, g, envs, rows);
        });
        let sampled_ns = monotonic_now_ns();
        if self.last_frame_seq == Some(copy.frame_seq) {
            return Ok(false);
        }
        let jumped = self.last_frame_seq.map_or(0, |last| {
            copy.frame_seq.saturating_sub(last).saturating_sub(1)
        });
        self.counts.frames_missed += jumped;
        self.counts.frames_seen += 1;
        self.last_frame_seq = Some(copy.frame_seq);
        if !copy.consistent {
            self.counts.frames_torn += 1;
            return Ok(false);
        }
        let frame_time_ns = g
            .counters
            .ext
            .and_then(|e| seg.load_u64(e.frame_time_ns))
            .unwrap_or(0);
        let (o, a) = (g.obs_size as usize, g.act_size as usize);
        let mut observations = Vec::with_capacity(envs.len() * o);
        let mut actions = Vec::with_capacity(envs.len() * a);
        for row in rows.chunks_exact((o + a).max(1)) {
            let (obs, act) = row.split_at(o.min(row.len()));
            observations.extend_from_slice(obs);
            actions.extend_from_slice(act);
        }
        let b = &mut self.builder;
        b.reset();
        let rewards = b.create_vector(&hot.rewards);
        let dones = b.create_vector(&hot.dones);
        let truncateds = hot.truncateds.as_deref().map(|t| b.create_vector(t));
        let resets = b.create_vector(&hot.resets);
        let env_list = b.create_vector(envs);
        let observations = b.create_vector(&observations);
        let actions = b.create_vector(&actions);
        let frame = fb::Frame::create(
            b,
            &fb::FrameArgs {
                frame_seq: copy.frame_seq,
                frame_time_ns,
                action_seq: copy.action_seq,
                sampled_ns,
                rewards: Some(rewards),
                dones: Some(dones),
                truncateds,
                resets: Some(resets),
                envs: Some(env_list),
                observations: Some(observations),
                actions: Some(actions),
            },
        );
        b.finish(frame, None);
        self.writer.write_to_known_channel(
            &mcap::records::MessageHeader {
                channel_id: self.frame_channel,
                sequence: self.frame_sequence,
                log_time: sampled_ns,
                publish_time: if frame_time_ns != 0 {
                    frame_time_ns
                } else {
                    sampled_ns
                },
            },
            self.builder.finished_data(),
        )?;
        self.frame_sequence = self.frame_sequence.wrapping_add(1);
        self.counts.frames_recorded += 1;
        Ok(true)
    }

    fn poll_rings(&mut self) -> Result<bool, RecordError> {
        self.events.clear();
        self.traffic.poll(
            &self.attached.segment,
            monotonic_now_ns(),
            4096,
            &mut self.events,
        );
        let mut wrote = false;
        for e in &self.events {
            let TrafficEvent::Record(r) = e else {
                continue;
            };
            let Some(&channel_id) = self.ring_channels.get(&r.ring) else {
                continue;
            };
            self.writer.write_to_known_channel(
                &mcap::records::MessageHeader {
                    channel_id,
                    sequence: self.ring_sequence,
                    log_time: r.seen_ns,
                    publish_time: r.seen_ns,
                },
                &r.payload,
            )?;
            self.ring_sequence = self.ring_sequence.wrapping_add(1);
            self.counts.ring_entries += 1;
            wrote = true;
        }
        self.counts.ring_lost_bytes = self
            .traffic
            .totals()
            .iter()
            .map(|(_, t)| t.lost_bytes)
            .sum();
        Ok(wrote)
    }

    /// Writes `lrbc.counts` and the summary: the file is complete.
    pub fn finish(self) -> Result<Counts, RecordError> {
        self.finish_into_inner().map(|(c, _)| c)
    }

    /// Like [`Recorder::finish`], and gives back the output.
    pub fn finish_into_inner(mut self) -> Result<(Counts, W), RecordError> {
        let c = self.counts;
        let json = serde_json::to_value(c).unwrap_or_default();
        let metadata = json
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.to_string()))
                    .collect::<BTreeMap<_, _>>()
            })
            .unwrap_or_default();
        self.writer.write_metadata(&mcap::records::Metadata {
            name: "lrbc.counts".into(),
            metadata,
        })?;
        self.writer.finish()?;
        Ok((c, self.writer.into_inner().inner))
    }
}

#[cfg(test)]
mod tests;
