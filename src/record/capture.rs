//! The capture: follows `frame_seq` and the rings of one attachment and turns what it
//! sees into encoded messages, with the schemas, channels and metadata that describe them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::images::Images;
use super::spot::{FrameStamp, Spotter, copy_frame};
use super::{
    Counts, FRAME_SCHEMA, FRAME_TOPIC, RING_EVENTS_TOPIC, RecordError, SEGMENT_METADATA,
    lucky_header_json, ring_event_json, ring_header_topic, segment_metadata,
};
use crate::attach::Attached;
use crate::busy::{Budget, CpuTimes};
use crate::layout::{Layout, RegionKind};
use crate::rpc::{RECORDING_BFBS, recording_fb as fb};
use crate::segment::monotonic_now_ns;
use crate::snapshot::{self, HotData};
use crate::traffic::{RingSelection, Traffic, TrafficEvent};

/// A schema record.
#[derive(Clone, Debug)]
pub struct SchemaDef {
    pub name: String,
    pub encoding: String,
    pub data: &'static [u8],
}

/// A channel record; `schema` indexes [`Prelude::schemas`] (None: no schema).
#[derive(Clone, Debug)]
pub struct ChannelDef {
    pub topic: String,
    pub schema: Option<usize>,
    pub message_encoding: String,
}

/// What a file starts with: schemas, channels and metadata records.
#[derive(Clone, Debug, Default)]
pub struct Prelude {
    pub schemas: Vec<SchemaDef>,
    pub channels: Vec<ChannelDef>,
    pub metadata: Vec<(String, BTreeMap<String, String>)>,
}

/// What a message holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Frame,
    RingEntry,
    /// A loss or a malformed entry of a ring, on `/lrbc/ring_events`.
    RingEvent,
    /// A luckyrobots entry's header, on `/lrbc/ring/<ring>/header`, just before its
    /// payload.
    RingHeader,
    Image,
}

/// One encoded message; `channel` indexes [`Prelude::channels`].
#[derive(Clone, Debug)]
pub struct Message {
    pub channel: usize,
    pub kind: Kind,
    pub log_time: u64,
    pub publish_time: u64,
    pub data: Arc<[u8]>,
}

impl Message {
    pub fn is_frame(&self) -> bool {
        self.kind == Kind::Frame
    }
}

/// The index of `/lrbc/frame` in the prelude's channels.
pub(super) const FRAME_CHANNEL: usize = 0;

fn strings(pairs: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    pairs.into_iter().collect()
}

/// Follows one attachment: frames of the recorded envs and ring entries.
pub struct Capture {
    attached: Attached,
    traffic: Traffic,
    envs: Vec<u32>,
    prelude: Prelude,
    ring_channels: HashMap<RegionKind, usize>,
    /// The header channel of each luckyrobots ring.
    header_channels: HashMap<RegionKind, usize>,
    /// The channel of losses and malformed entries.
    ring_events_channel: usize,
    /// When the rings were last read.
    traffic_now_ns: u64,
    last_frame_seq: Option<u64>,
    hot: HotData,
    rows: Vec<f32>,
    builder: flatbuffers::FlatBufferBuilder<'static>,
    events: Vec<TrafficEvent>,
    counts: Counts,
    first_nonfinite: Option<u64>,
    images: Option<Images>,
    /// How much CPU the capture may take from a busy machine.
    budget: Budget,
    read_load: fn() -> Option<CpuTimes>,
    /// The capture held off (yielding to a busy machine) since its last copy: frames
    /// that pass meanwhile are skipped on purpose, not missed.
    held: bool,
    /// A second thread copying the frames this one is late for.
    spotter: Option<Spotter>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("envs", &self.envs)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl Capture {
    /// A capture of `envs` of `attached`, with the prelude describing it.
    pub fn new(attached: Attached, mut envs: Vec<u32>) -> Result<Self, RecordError> {
        envs.sort_unstable();
        envs.dedup();
        let g = &attached.geometry;
        if let Some(&env) = envs.iter().find(|&&e| e >= g.num_envs) {
            return Err(RecordError::NoSuchEnv {
                env,
                num_envs: g.num_envs,
            });
        }
        let mut prelude = Prelude::default();
        prelude.schemas.push(SchemaDef {
            name: FRAME_SCHEMA.into(),
            encoding: "flatbuffer".into(),
            data: RECORDING_BFBS,
        });
        prelude.channels.push(ChannelDef {
            topic: FRAME_TOPIC.into(),
            schema: Some(0),
            message_encoding: "flatbuffer".into(),
        });
        let traffic = Traffic::new(&attached, RingSelection::All);
        let lucky = g.layout == Layout::LuckyrobotsIpc;
        let envelope_schema = if lucky {
            None
        } else {
            prelude.schemas.push(SchemaDef {
                name: "hazel.rpc.Envelope".into(),
                encoding: "flatbuffer".into(),
                data: crate::rpc::schema::SCHEMA_BFBS,
            });
            Some(prelude.schemas.len() - 1)
        };
        let mut ring_channels = HashMap::new();
        for kind in traffic.rings() {
            prelude.channels.push(ChannelDef {
                topic: format!("/lrbc/ring/{}", kind.as_str()),
                schema: envelope_schema,
                message_encoding: if lucky { "json" } else { "flatbuffer" }.into(),
            });
            ring_channels.insert(kind, prelude.channels.len() - 1);
        }
        // The luckyrobots entry header (correlation id, method or status) is not part of
        // the payload: a channel of its own per ring, for pairing on replay.
        let mut header_channels = HashMap::new();
        if lucky {
            for kind in traffic.rings() {
                prelude.channels.push(ChannelDef {
                    topic: ring_header_topic(kind),
                    schema: None,
                    message_encoding: "json".into(),
                });
                header_channels.insert(kind, prelude.channels.len() - 1);
            }
        }
        prelude.channels.push(ChannelDef {
            topic: RING_EVENTS_TOPIC.into(),
            schema: None,
            message_encoding: "json".into(),
        });
        let ring_events_channel = prelude.channels.len() - 1;
        let header = strings(g.fields().filter_map(|f| {
            let v = f.decode(&g.header)?;
            Some((f.name.to_string(), v.display()))
        }));
        prelude.metadata.push(("lrbc.header".into(), header));
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
        prelude.metadata.push(("lrbc.geometry".into(), geometry));
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
        prelude.metadata.push(("lrbc.names".into(), names));
        let traced = crate::layout::Traced::new(&attached.segment);
        // The same bytes as at attach, bar the counters: the geometry is detected again
        // only to learn which bytes detection reads.
        let _ = crate::layout::inspect(&traced, attached.choice);
        prelude.metadata.push((
            SEGMENT_METADATA.into(),
            segment_metadata(&traced.into_sparse()),
        ));
        prelude.metadata.push((
            "lrbc.tool".into(),
            strings([
                ("name".into(), "lrbc-inspector".into()),
                ("version".into(), env!("CARGO_PKG_VERSION").into()),
            ]),
        ));
        Ok(Self {
            attached,
            traffic,
            envs,
            prelude,
            ring_channels,
            header_channels,
            ring_events_channel,
            traffic_now_ns: 0,
            last_frame_seq: None,
            hot: HotData::default(),
            rows: Vec::new(),
            builder: flatbuffers::FlatBufferBuilder::new(),
            events: Vec::new(),
            counts: Counts::default(),
            first_nonfinite: None,
            images: None,
            budget: Budget::new(None, crate::busy::MIN_HOLD_NS),
            read_load: crate::busy::read_cpu_times,
            held: false,
            spotter: None,
        })
    }

    /// A second thread, on the other half of the cores, copies the frames that the
    /// caller's polls come late for (a nap that lasts milliseconds on a loaded machine)
    /// and hands them over: for a recorder that should keep every frame of a paced run.
    /// It rests while the capture holds off on a busy machine.
    pub fn with_spotter(mut self) -> Result<Self, RecordError> {
        if self.spotter.is_none() {
            let (seg, g) = (&self.attached.segment, &self.attached.geometry);
            let from = self
                .last_frame_seq
                .or_else(|| seg.load_u64(g.counters.frame_seq))
                .unwrap_or(0);
            self.spotter = Some(Spotter::start(&self.attached, self.envs.clone(), from)?);
        }
        Ok(self)
    }

    /// On a machine without spare CPU, keeps the capture's CPU time within
    /// `percent_of_a_core` (None or 0: follows every frame whatever the load); see
    /// [`Capture::hold_ns`].
    pub fn set_busy_budget(&mut self, percent_of_a_core: Option<f32>) {
        self.budget.set_percent(percent_of_a_core);
    }

    /// Reads the machine's load with `read_load` (tests give a busy or an idle machine).
    pub fn with_load_reading(mut self, read_load: fn() -> Option<CpuTimes>) -> Self {
        self.read_load = read_load;
        self
    }

    /// How long to wait before the next [`Capture::poll`], while the machine has no spare
    /// CPU and the capture keeps to its budget; None: poll as often as frames come. The
    /// frames that pass while the capture holds off are counted as skipped.
    pub fn hold_ns(&mut self, now_ns: u64) -> Option<u64> {
        if self.budget.check_due(now_ns) {
            self.budget.observe(now_ns, (self.read_load)());
        }
        let hold = self.budget.hold_ns(now_ns);
        if hold.is_some() {
            self.held = true;
        }
        if let Some(spot) = &self.spotter {
            spot.rest(self.budget.yielding());
        }
        hold
    }

    /// Copies the spotter handed over and the capture has not taken yet.
    #[cfg(test)]
    pub(super) fn spotted(&self) -> usize {
        self.spotter.as_ref().map_or(0, Spotter::pending)
    }

    /// True while the capture keeps to its budget on a busy machine.
    pub fn yielding(&self) -> bool {
        self.budget.yielding()
    }

    /// Also captures camera images: the recorded envs' images of the image region when
    /// `image_seq` moves (`/lrbc/camera/env<N>`) and the camera and viewport frames
    /// streamed through the command rings (`/lrbc/stream/<name>`), as Foxglove's
    /// `foxglove.RawImage` and `foxglove.CompressedImage`. Streams add channels to the
    /// prelude as they show up.
    pub fn with_images(mut self) -> Self {
        if self.images.is_none() {
            self.images = Some(Images::new(&self.attached, &self.envs, &mut self.prelude));
        }
        self
    }

    /// Bytes of one copy of the recorded envs' images of the image region.
    pub fn image_region_bytes(attached: &Attached, envs: usize) -> u64 {
        Images::region_bytes(attached, envs)
    }

    pub fn attached(&self) -> &Attached {
        &self.attached
    }

    pub fn prelude(&self) -> &Prelude {
        &self.prelude
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The `frame_seq` of the first captured frame holding a NaN or an infinity (in
    /// rewards or the recorded envs' observations and actions).
    pub fn first_nonfinite(&self) -> Option<u64> {
        self.first_nonfinite
    }

    /// Appends a new frame, if one was published, and the ring entries published since
    /// the last call, to `out`.
    pub fn poll(&mut self, out: &mut Vec<Message>) {
        self.poll_frame(out);
        if let Some(images) = &mut self.images {
            let (seg, g) = (&self.attached.segment, &self.attached.geometry);
            let now = monotonic_now_ns();
            let frame_time_ns = g
                .counters
                .ext
                .and_then(|e| seg.load_u64(e.frame_time_ns))
                .filter(|&t| t != 0)
                .unwrap_or(now);
            images.poll_region(&self.attached, frame_time_ns, now, out);
        }
        self.poll_rings(out);
        if let Some(images) = &self.images {
            self.counts.images = images.images;
        }
    }

    fn poll_frame(&mut self, out: &mut Vec<Message>) {
        let (seg, g) = (&self.attached.segment, &self.attached.geometry);
        let now_seq = seg.load_u64(g.counters.frame_seq).unwrap_or(0);
        self.take_spotted(now_seq, false, out);
        if self.last_frame_seq == Some(now_seq) {
            return;
        }
        let (seg, g) = (&self.attached.segment, &self.attached.geometry);
        let passed = self
            .last_frame_seq
            .map_or(0, |last| now_seq.saturating_sub(last));
        if self.held && passed > 0 && !snapshot::settled_now(seg, g) {
            // Back from holding off, the engine is already writing the next frame: let
            // these pass rather than copy a torn one (its retries cost the run).
            self.counts.frames_skipped += passed;
            self.last_frame_seq = Some(now_seq);
            return;
        }
        let (mut hot, mut rows) = (
            std::mem::take(&mut self.hot),
            std::mem::take(&mut self.rows),
        );
        let (consistent, stamp) = copy_frame(&self.attached, &self.envs, &mut hot, &mut rows);
        // The spotter may have copied frames before this one meanwhile (this thread
        // stalled between its looks): those first.
        self.take_spotted(stamp.frame_seq, true, out);
        if self.last_frame_seq != Some(stamp.frame_seq) {
            self.account(stamp.frame_seq);
            self.budget
                .sampled(monotonic_now_ns(), crate::platform::thread_cpu_ns());
            if consistent {
                self.emit(stamp, &hot, &rows, out);
            } else {
                self.counts.frames_torn += 1;
            }
        }
        (self.hot, self.rows) = (hot, rows);
    }

    /// Records the copies the spotter handed over, in order: those after the last frame
    /// taken and, when this thread `copied` frame `newest` itself, before it. When frames
    /// passed since the last one taken, a copy the spotter is making is waited for.
    fn take_spotted(&mut self, newest: u64, copied: bool, out: &mut Vec<Message>) {
        let Some(spot) = &self.spotter else {
            return;
        };
        let late = self
            .last_frame_seq
            .is_some_and(|last| newest.saturating_sub(last) > 1);
        for c in spot.take(late) {
            let f = c.stamp.frame_seq;
            if self.last_frame_seq.is_some_and(|last| f <= last) || (copied && f >= newest) {
                continue;
            }
            self.account(f);
            self.emit(c.stamp, &c.hot, &c.rows, out);
        }
    }

    /// Frame `f` was taken (copied by this thread or the spotter): counts it seen, and
    /// the frames since the last one missed, or skipped after holding off.
    fn account(&mut self, f: u64) {
        let jumped = self
            .last_frame_seq
            .map_or(0, |last| f.saturating_sub(last).saturating_sub(1));
        if std::mem::take(&mut self.held) {
            self.counts.frames_skipped += jumped;
        } else {
            self.counts.frames_missed += jumped;
        }
        self.counts.frames_seen += 1;
        self.last_frame_seq = Some(f);
        if let Some(spot) = &self.spotter {
            spot.taken(f);
        }
    }

    /// Encodes a consistent copy of a frame into a `/lrbc/frame` message.
    fn emit(&mut self, stamp: FrameStamp, hot: &HotData, rows: &[f32], out: &mut Vec<Message>) {
        let (g, envs) = (&self.attached.geometry, &self.envs);
        if self.first_nonfinite.is_none()
            && (hot
                .rewards
                .iter()
                .chain(rows.iter())
                .any(|v| !v.is_finite()))
        {
            self.first_nonfinite = Some(stamp.frame_seq);
        }
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
                frame_seq: stamp.frame_seq,
                frame_time_ns: stamp.frame_time_ns,
                action_seq: stamp.action_seq,
                sampled_ns: stamp.sampled_ns,
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
        out.push(Message {
            channel: FRAME_CHANNEL,
            kind: Kind::Frame,
            log_time: stamp.sampled_ns,
            publish_time: if stamp.frame_time_ns != 0 {
                stamp.frame_time_ns
            } else {
                stamp.sampled_ns
            },
            data: Arc::from(self.builder.finished_data()),
        });
        self.counts.frames_recorded += 1;
    }

    fn poll_rings(&mut self, out: &mut Vec<Message>) {
        self.events.clear();
        self.traffic_now_ns = monotonic_now_ns();
        self.traffic.poll(
            &self.attached.segment,
            self.traffic_now_ns,
            4096,
            &mut self.events,
        );
        for e in self.events.drain(..) {
            let r = match e {
                TrafficEvent::Record(r) => r,
                TrafficEvent::Lost { .. } | TrafficEvent::Malformed { .. } => {
                    if let Some(json) = ring_event_json(&e) {
                        out.push(Message {
                            channel: self.ring_events_channel,
                            kind: Kind::RingEvent,
                            log_time: self.traffic_now_ns,
                            publish_time: self.traffic_now_ns,
                            data: Arc::from(json.into_bytes()),
                        });
                        self.counts.ring_events += 1;
                    }
                    continue;
                }
                _ => continue,
            };
            let Some(&channel) = self.ring_channels.get(&r.ring) else {
                continue;
            };
            if let Some(images) = &mut self.images {
                images.poll_entry(&r.payload, r.seen_ns, &mut self.prelude, out);
            }
            if let (Some(h), Some(&header_channel)) = (r.lucky, self.header_channels.get(&r.ring)) {
                out.push(Message {
                    channel: header_channel,
                    kind: Kind::RingHeader,
                    log_time: r.seen_ns,
                    publish_time: r.seen_ns,
                    data: Arc::from(lucky_header_json(h).into_bytes()),
                });
            }
            out.push(Message {
                channel,
                kind: Kind::RingEntry,
                log_time: r.seen_ns,
                publish_time: r.seen_ns,
                data: Arc::from(r.payload),
            });
            self.counts.ring_entries += 1;
        }
        self.counts.ring_lost_bytes = self
            .traffic
            .totals()
            .iter()
            .map(|(_, t)| t.lost_bytes)
            .sum();
    }
}
