//! The capture: follows `frame_seq` and the rings of one attachment and turns what it
//! sees into encoded messages, with the schemas, channels and metadata that describe them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::images::Images;
use super::inbox::{CaptureSink, Inbox};
use super::{Counts, RecordError, lock};
use crate::format::{
    EVENT_JSON_SCHEMA, EVENT_SCHEMA, EVENTS_TOPIC, FRAME_SCHEMA, FRAME_TOPIC, FrameRef,
    GEOMETRY_METADATA, HEADER_METADATA, LOG_JSON_SCHEMA, LOG_SCHEMA, LOG_TOPIC, NAMES_METADATA,
    RHYTHM_JSON_SCHEMA, RHYTHM_SCHEMA, RHYTHM_TOPIC, RING_ENTRY_JSON_SCHEMA, RING_ENTRY_SCHEMA,
    RING_EVENTS_TOPIC, SEGMENT_METADATA, STATE_TOPIC, TOOL_METADATA, event_json, event_log_json,
    lucky_header_json, rhythm_json, ring_entry_json, ring_event_json, ring_header_topic,
    ring_topic, segment_metadata,
};
use lrbc::attach::Attached;
use lrbc::clock::{Clock, MonotonicClock};
use lrbc::layout::{Layout, RegionKind};
use lrbc::rpc::RECORDING_BFBS;
use lrbc_live::busy::CpuTimes;
use lrbc_live::detect::{DetectSettings, Diagnosis, DiagnosisError, Event, EventKind};
use lrbc_live::follower::{FrameCopy, Subscription};
use lrbc_live::traffic::{RingSelection, Traffic, TrafficEvent};
use lrbc_live::watch::{AttachmentWatch, State};

pub use super::message::{ChannelDef, Kind, Message, Prelude, SchemaDef};

/// How often the segment's state (truncated, unlinked, replaced, engine gone) is read.
const STATE_EVERY_NS: u64 = 250_000_000;
/// The loop's rhythm is written when a pause ends, and at most this often otherwise.
const RHYTHM_EVERY_NS: u64 = 1_000_000_000;

/// The index of `/lrbc/frame` in the prelude's channels.
pub(super) const FRAME_CHANNEL: usize = 0;

fn strings(pairs: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    pairs.into_iter().collect()
}

/// Follows one attachment: frames of the recorded envs and ring entries.
pub struct Capture {
    attached: Attached,
    envs: Vec<u32>,
    prelude: Prelude,
    /// The channels the messages go to.
    channels: Channels,
    /// The clock of the follower's stamps, the state's reads and the messages' times.
    clock: Arc<dyn Clock>,
    /// Frames come from the process's follower of the segment through the inbox.
    inbox: Arc<Inbox>,
    subscription: Option<Subscription>,
    builder: flatbuffers::FlatBufferBuilder<'static>,
    counts: Counts,
    rings: Rings,
    state: StateWatch,
    detection: Detection,
    images: Option<Images>,
    encoding: Encoding,
}

/// The command rings as the capture reads them.
struct Rings {
    traffic: Traffic,
    /// When they were last read.
    read_ns: u64,
    /// What the last read found (kept for its room).
    events: Vec<TrafficEvent>,
}

/// The segment's state as the capture records it.
struct StateWatch {
    /// The state, on a mapping of its own; None when it could not be mapped.
    watcher: Option<AttachmentWatch<Arc<dyn Clock>>>,
    /// The state last recorded on `/lrbc/state`.
    last: State,
    /// When it was last read.
    read_ns: u64,
}

/// The detector on the same follower (`lrbc_live::detect`) and what of it was recorded.
struct Detection {
    diagnosis: Option<Diagnosis>,
    settings: DetectSettings,
    /// How far its events were read.
    cursor: u64,
    /// When the loop's rhythm was last written and the pauses it had then; whether the
    /// next poll writes it whatever (the follower was left: the last one).
    rhythm_written: Option<(u64, u64)>,
    rhythm_final: bool,
    /// The first event of each kind, in the form it was found.
    first_events: BTreeMap<EventKind, Event>,
    /// The forms read at a poll (kept for their room).
    forms: Vec<Event>,
}

/// What the capture encodes: frames, and the image region's images (a server with no
/// subscriber to them turns them off).
struct Encoding {
    frames: bool,
    region_images: bool,
}

/// The channels a capture writes to, by what they carry.
struct Channels {
    rings: HashMap<RegionKind, usize>,
    /// The header channel of each luckyrobots ring.
    ring_headers: HashMap<RegionKind, usize>,
    ring_events: usize,
    state: usize,
    events: usize,
    log: usize,
    rhythm: usize,
}

impl Channels {
    /// Declares the frame channel, a channel per ring (and per luckyrobots ring's
    /// headers), the ring events', the state's, the detector's events and the log, with
    /// their schemas.
    fn declare(prelude: &mut Prelude, traffic: &Traffic, lucky: bool) -> Self {
        prelude.schemas.push(SchemaDef {
            name: FRAME_SCHEMA.into(),
            encoding: "flatbuffer".into(),
            data: std::borrow::Cow::Borrowed(RECORDING_BFBS),
        });
        prelude.channels.push(ChannelDef {
            topic: FRAME_TOPIC.into(),
            schema: Some(0),
            message_encoding: "flatbuffer".into(),
        });
        // Ring entries as JSON that Foxglove decodes, their exact bytes inside.
        prelude.schemas.push(SchemaDef {
            name: RING_ENTRY_SCHEMA.into(),
            encoding: "jsonschema".into(),
            data: std::borrow::Cow::Borrowed(RING_ENTRY_JSON_SCHEMA.as_bytes()),
        });
        let entry_schema = Some(prelude.schemas.len() - 1);
        let mut rings = HashMap::new();
        for kind in traffic.rings() {
            prelude.channels.push(ChannelDef {
                topic: ring_topic(kind),
                schema: entry_schema,
                message_encoding: "json".into(),
            });
            rings.insert(kind, prelude.channels.len() - 1);
        }
        // The luckyrobots entry header (correlation id, method or status) is not part of
        // the payload: a channel of its own per ring, for pairing on replay.
        let mut ring_headers = HashMap::new();
        if lucky {
            for kind in traffic.rings() {
                prelude.channels.push(ChannelDef {
                    topic: ring_header_topic(kind),
                    schema: None,
                    message_encoding: "json".into(),
                });
                ring_headers.insert(kind, prelude.channels.len() - 1);
            }
        }
        let mut schemaless = |topic: &str| {
            prelude.channels.push(ChannelDef {
                topic: topic.into(),
                schema: None,
                message_encoding: "json".into(),
            });
            prelude.channels.len() - 1
        };
        let ring_events = schemaless(RING_EVENTS_TOPIC);
        let state = schemaless(STATE_TOPIC);
        // The detector's events, and the same as Foxglove's log messages.
        let mut json_channel = |topic: &str, name: &str, schema: &'static str| {
            prelude.schemas.push(SchemaDef {
                name: name.into(),
                encoding: "jsonschema".into(),
                data: std::borrow::Cow::Borrowed(schema.as_bytes()),
            });
            prelude.channels.push(ChannelDef {
                topic: topic.into(),
                schema: Some(prelude.schemas.len() - 1),
                message_encoding: "json".into(),
            });
            prelude.channels.len() - 1
        };
        let events = json_channel(EVENTS_TOPIC, EVENT_SCHEMA, EVENT_JSON_SCHEMA);
        let log = json_channel(LOG_TOPIC, LOG_SCHEMA, LOG_JSON_SCHEMA);
        let rhythm = json_channel(RHYTHM_TOPIC, RHYTHM_SCHEMA, RHYTHM_JSON_SCHEMA);
        Self {
            rings,
            ring_headers,
            ring_events,
            state,
            events,
            log,
            rhythm,
        }
    }
}

/// The run's metadata records: the header's fields, the geometry and the recorded envs,
/// the names, the segment's bytes that detection reads, and the tool.
fn describe_run(prelude: &mut Prelude, attached: &Attached, envs: &[u32]) {
    let g = &attached.geometry;
    let header = strings(g.fields().filter_map(|f| {
        let v = f.decode(&g.header)?;
        Some((f.name.to_string(), v.display()))
    }));
    prelude.metadata.push((HEADER_METADATA.into(), header));
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
    prelude.metadata.push((GEOMETRY_METADATA.into(), geometry));
    prelude.metadata.push((
        NAMES_METADATA.into(),
        crate::format::names_metadata(&g.names),
    ));
    let traced = lrbc::layout::Traced::new(&attached.segment);
    // The same bytes as at attach, bar the counters: the geometry is detected again
    // only to learn which bytes detection reads.
    let _ = lrbc::layout::inspect(&traced, attached.choice);
    prelude.metadata.push((
        SEGMENT_METADATA.into(),
        segment_metadata(&traced.into_sparse()),
    ));
    prelude.metadata.push((
        TOOL_METADATA.into(),
        strings([
            ("name".into(), "lrbc-inspector".into()),
            ("version".into(), env!("CARGO_PKG_VERSION").into()),
        ]),
    ));
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
    pub fn new(attached: Attached, envs: Vec<u32>) -> Result<Self, RecordError> {
        Self::with_clock(attached, envs, Arc::new(MonotonicClock))
    }

    /// [`Capture::new`] on `clock`: the follower (when this capture starts it) stamps
    /// the frames by it, and the state's reads and the messages' times keep to it. Tests
    /// give a manual clock, so that a run's times are the same on every run.
    pub fn with_clock(
        attached: Attached,
        mut envs: Vec<u32>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, RecordError> {
        envs.sort_unstable();
        envs.dedup();
        let g = &attached.geometry;
        if let Some(&env) = envs.iter().find(|&&e| e >= g.num_envs) {
            return Err(RecordError::NoSuchEnv {
                env,
                num_envs: g.num_envs,
            });
        }
        let traffic = Traffic::new(&attached, RingSelection::All);
        let mut prelude = Prelude::default();
        let channels =
            Channels::declare(&mut prelude, &traffic, g.layout == Layout::LuckyrobotsIpc);
        describe_run(&mut prelude, &attached, &envs);
        let watcher = attached
            .reopen()
            .ok()
            .map(|a| AttachmentWatch::new(a, Arc::clone(&clock)));
        let mut capture = Self {
            attached,
            envs,
            prelude,
            channels,
            clock,
            inbox: Arc::new(Inbox::default()),
            subscription: None,
            builder: flatbuffers::FlatBufferBuilder::new(),
            counts: Counts::default(),
            rings: Rings {
                traffic,
                read_ns: 0,
                events: Vec::new(),
            },
            state: StateWatch {
                watcher,
                last: State::Attached,
                read_ns: 0,
            },
            detection: Detection {
                diagnosis: None,
                settings: DetectSettings::default(),
                cursor: 0,
                rhythm_written: None,
                rhythm_final: false,
                first_events: BTreeMap::new(),
                forms: Vec::new(),
            },
            images: None,
            encoding: Encoding {
                frames: true,
                region_images: true,
            },
        };
        capture.follow(lrbc_live::busy::read_cpu_times)?;
        Ok(capture)
    }

    /// Joins the process's follower of the segment (starting one if there is none, which
    /// reads the machine's load with `read_load`), with the detector beside.
    fn follow(&mut self, read_load: fn() -> Option<CpuTimes>) -> Result<(), RecordError> {
        self.subscription = None;
        self.detection.diagnosis = None;
        let sink = CaptureSink {
            inbox: Arc::clone(&self.inbox),
            envs: self.envs.clone(),
            generation: None,
        };
        self.subscription = Some(lrbc_live::follower::subscribe_with_clock(
            &self.attached,
            Box::new(sink),
            read_load,
            Arc::clone(&self.clock),
        )?);
        // Read apart: the follower's ticks take this lock while the subscription below
        // waits for them.
        let busy_budget = *lock(&self.inbox.busy_budget);
        let diagnosis = Diagnosis::start_with_load(
            &self.attached,
            self.detection.settings.clone(),
            busy_budget,
            lrbc_live::detect::DEFAULT_EVENTS_KEPT,
            read_load,
        )?;
        self.detection.cursor = lock(diagnosis.log()).cursor_now();
        self.detection.diagnosis = Some(diagnosis);
        Ok(())
    }

    /// Finds events with `settings` (by default the detector's defaults). Err: they
    /// cannot be used on this segment (a bound names a value it does not have).
    pub fn detect_with(&mut self, settings: DetectSettings) -> Result<(), RecordError> {
        settings.check().map_err(DiagnosisError::from)?;
        if let Some(d) = &self.detection.diagnosis {
            d.set_settings(settings.clone())
                .map_err(DiagnosisError::from)?;
        }
        self.detection.settings = settings;
        Ok(())
    }

    /// The first event found of each kind, in the form it was found.
    pub fn first_events(&self) -> &BTreeMap<EventKind, Event> {
        &self.detection.first_events
    }

    /// The detector's events so far, when it runs (lock briefly).
    pub fn events(&self) -> Option<&Arc<std::sync::Mutex<lrbc_live::detect::EventLog>>> {
        self.detection.diagnosis.as_ref().map(Diagnosis::log)
    }

    /// On a machine without spare CPU, keeps the follower's CPU time within
    /// `percent_of_a_core` (None or 0: follows every frame whatever the load). The
    /// frames that pass while it holds off are counted as skipped. The follower keeps to
    /// the largest budget of its consumers, and to none if one of them sets none.
    pub fn set_busy_budget(&mut self, percent_of_a_core: Option<f32>) {
        *lock(&self.inbox.busy_budget) = percent_of_a_core;
        if let Some(d) = &self.detection.diagnosis {
            d.set_busy_budget(percent_of_a_core);
        }
    }

    /// Reads the machine's load with `read_load` (tests give a busy or an idle machine):
    /// joins a follower started with it.
    pub fn with_load_reading(
        mut self,
        read_load: fn() -> Option<CpuTimes>,
    ) -> Result<Self, RecordError> {
        self.follow(read_load)?;
        Ok(self)
    }

    /// Leaves the follower after its last look: a frame published before this call comes
    /// too (unless the engine already overwrote it), and none after (the next
    /// [`Capture::poll`] takes them).
    pub fn stop_following(&mut self) {
        if let Some(s) = self.subscription.take() {
            s.leave();
        }
        if let Some(d) = &mut self.detection.diagnosis {
            d.stop();
        }
        self.detection.rhythm_final = true;
    }

    /// Waits up to `timeout` for a frame (at once if one is waiting): the caller's loop
    /// polls when frames come, and for the rings at least every `timeout`.
    pub fn wait(&self, timeout: std::time::Duration) {
        self.inbox.wait(timeout);
    }

    /// Polls as frames come from the follower until `done` says so (tests; fails after
    /// 20 s without it).
    #[cfg(test)]
    pub(crate) fn poll_until(&mut self, out: &mut Vec<Message>, done: impl Fn(&Counts) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            self.poll(out);
            if done(&self.counts) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "waited 20 s: {:?}",
                self.counts
            );
            self.wait(std::time::Duration::from_millis(10));
        }
    }

    /// True while the follower keeps to its budget on a busy machine.
    pub fn yielding(&self) -> bool {
        lock(&self.inbox.delivered).yielding
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

    /// Whether frames, and the image region's images, are encoded (both are by default).
    /// Frames not encoded are counted as seen, not recorded; streamed frames are always
    /// read, since they make the channels a client subscribes to.
    pub fn set_encoding(&mut self, frames: bool, region_images: bool) {
        self.encoding.frames = frames;
        self.encoding.region_images = region_images;
    }

    pub fn prelude(&self) -> &Prelude {
        &self.prelude
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Appends a new frame, if one was published, and the ring entries published since
    /// the last call, to `out`.
    pub fn poll(&mut self, out: &mut Vec<Message>) {
        self.poll_frame(out);
        self.poll_state(self.clock.now_ns(), out);
        if let Some(images) = self.images.as_mut().filter(|_| self.encoding.region_images) {
            let (seg, g) = (&self.attached.segment, &self.attached.geometry);
            let now = self.clock.now_ns();
            let frame_time_ns = g
                .counters
                .ext
                .and_then(|e| seg.load_u64(e.frame_time_ns))
                .filter(|&t| t != 0)
                .unwrap_or(now);
            images.poll_region(&self.attached, frame_time_ns, now, out);
        }
        self.poll_rings(out);
        self.poll_events(out);
        if let Some(images) = &self.images {
            self.counts.images = images.images;
        }
    }

    /// The detector's events found, going on and ended since the last call: each form on
    /// `/lrbc/events`, and as a log message on `/lrbc/log` when found and when it ends.
    fn poll_events(&mut self, out: &mut Vec<Message>) {
        let Some(d) = &self.detection.diagnosis else {
            return;
        };
        self.detection.forms.clear();
        let (next, missed, totals, rhythm) = {
            let log = lock(d.log());
            let (next, missed) =
                log.updates_since(self.detection.cursor, &mut self.detection.forms);
            let now = self.clock.now_ns();
            let rhythm = log
                .rhythm()
                .filter(|r| match self.detection.rhythm_written {
                    None => true,
                    Some((at, pauses)) => {
                        self.detection.rhythm_final
                            || r.pauses != pauses
                            || now.saturating_sub(at) >= RHYTHM_EVERY_NS
                    }
                });
            (next, missed, log.totals(), rhythm.cloned())
        };
        self.counts.frames_checked = totals.frames_checked;
        self.counts.frames_flags_checked = totals.frames_flags_checked;
        self.counts.nan_values = totals.nan_values;
        self.counts.inf_values = totals.inf_values;
        self.counts.out_of_range_values = totals.out_of_range_values;
        self.detection.cursor = next;
        self.counts.events_missed += missed;
        // Written when read (their log times keep the file in order); the time each
        // event began is in its JSON.
        let now = self.clock.now_ns();
        for e in self.detection.forms.drain(..) {
            // Ids go up by one as events are found: a form of a new id is its first.
            let first_form = e.id > self.counts.events_found;
            if first_form {
                self.counts.events_found = e.id;
                self.detection
                    .first_events
                    .entry(e.kind)
                    .or_insert_with(|| e.clone());
            }
            out.push(Message {
                channel: self.channels.events,
                kind: Kind::Event,
                log_time: now,
                publish_time: now,
                data: Arc::from(event_json(&e).into_bytes()),
            });
            let stamp = if first_form { e.time_ns } else { e.end_time_ns };
            if let Some(log) = event_log_json(&e, stamp, first_form) {
                out.push(Message {
                    channel: self.channels.log,
                    kind: Kind::Event,
                    log_time: now,
                    publish_time: now,
                    data: Arc::from(log.into_bytes()),
                });
            }
        }
        if let Some(r) = rhythm {
            self.detection.rhythm_written = Some((now, r.pauses));
            self.detection.rhythm_final = false;
            out.push(Message {
                channel: self.channels.rhythm,
                kind: Kind::Event,
                log_time: now,
                publish_time: now,
                data: Arc::from(rhythm_json(&r).into_bytes()),
            });
        }
    }

    /// Records the frames the follower delivered, and its counts.
    fn poll_frame(&mut self, out: &mut Vec<Message>) {
        let (frames, counts, overflowed) = {
            let mut d = lock(&self.inbox.delivered);
            (
                std::mem::take(&mut d.frames),
                std::mem::take(&mut d.counts),
                std::mem::take(&mut d.overflowed),
            )
        };
        let c = &mut self.counts;
        // Frames recorded count as seen when they are (below); the follower's counts
        // add those it saw and did not deliver.
        c.frames_seen += counts.torn + counts.unreadable;
        c.frames_missed += counts.missed + overflowed;
        c.frames_missed_late += counts.missed_late;
        c.frames_torn += counts.torn;
        c.frames_skipped += counts.skipped;
        c.frames_unreadable += counts.unreadable;
        for f in &frames {
            self.counts.frames_seen += 1;
            if self.encoding.frames {
                self.emit(f, out);
            }
        }
    }

    /// Reads the segment's state now, whenever it was read last: a save asked for because
    /// the segment went keeps the message that says how.
    pub fn poll_state_now(&mut self, out: &mut Vec<Message>) {
        self.state.read_ns = 0;
        self.poll_state(self.clock.now_ns(), out);
    }

    /// Reads the segment's state every [`STATE_EVERY_NS`]; a change is a message on
    /// [`STATE_TOPIC`] (`{"state": …, "note": …, "frame_seq": …}`).
    fn poll_state(&mut self, now: u64, out: &mut Vec<Message>) {
        if now.saturating_sub(self.state.read_ns) < STATE_EVERY_NS {
            return;
        }
        self.state.read_ns = now;
        let moved_on = lock(&self.inbox.delivered).moved_on;
        let Some(w) = &mut self.state.watcher else {
            return;
        };
        let report = w.tick();
        // Once replaced, this recording's segment is gone for good, whatever the watcher
        // attached to since.
        let state = if moved_on || self.state.last == State::Replaced {
            State::Replaced
        } else {
            report.state
        };
        if self.state.last == state {
            return;
        }
        self.state.last = state;
        if let Some(d) = &self.detection.diagnosis {
            d.feed().state(state, report.note.as_deref(), now);
        }
        let json = serde_json::json!({
            "state": state.as_str(),
            "note": report.note,
            "frame_seq": report.frame_seq,
        });
        out.push(Message {
            channel: self.channels.state,
            kind: Kind::State,
            log_time: now,
            publish_time: now,
            data: Arc::from(json.to_string().into_bytes()),
        });
        self.counts.state_changes += 1;
    }

    /// Encodes a consistent copy of a frame into a `/lrbc/frame` message: the hot data of
    /// every env and the rows of the recorded envs.
    fn emit(&mut self, copy: &FrameCopy, out: &mut Vec<Message>) {
        let (g, envs) = (&self.attached.geometry, &self.envs);
        let hot = &copy.hot;
        let frame_time_ns = copy.frame_time_ns.unwrap_or(0);
        let (o, a) = (g.obs_size as usize, g.act_size as usize);
        let mut observations = Vec::with_capacity(envs.len() * o);
        let mut actions = Vec::with_capacity(envs.len() * a);
        // The follower copies the rows of every env its consumers want: these envs' only.
        for row in envs.iter().filter_map(|&e| copy.row(e)) {
            let (obs, act) = row.split_at(o.min(row.len()));
            observations.extend_from_slice(obs);
            actions.extend_from_slice(act);
        }
        let frame = FrameRef {
            frame_seq: copy.frame_seq,
            frame_time_ns,
            action_seq: copy.action_seq,
            action_time_ns: copy.action_time_ns().unwrap_or(0),
            sampled_ns: copy.sampled_ns,
            rewards: &hot.rewards,
            dones: &hot.dones,
            truncateds: hot.truncateds.as_deref(),
            resets: &hot.resets,
            envs,
            observations: &observations,
            actions: &actions,
        };
        out.push(Message {
            channel: FRAME_CHANNEL,
            kind: Kind::Frame,
            log_time: copy.sampled_ns,
            publish_time: if frame_time_ns != 0 {
                frame_time_ns
            } else {
                copy.sampled_ns
            },
            data: Arc::from(frame.encode(&mut self.builder)),
        });
        self.counts.frames_recorded += 1;
    }

    fn poll_rings(&mut self, out: &mut Vec<Message>) {
        self.rings.events.clear();
        self.rings.read_ns = self.clock.now_ns();
        self.rings.traffic.poll(
            &self.attached.segment,
            self.rings.read_ns,
            4096,
            &mut self.rings.events,
        );
        if let Some(d) = &self.detection.diagnosis {
            let feed = d.feed();
            for e in &self.rings.events {
                feed.traffic(e, self.rings.read_ns);
            }
        }
        for e in self.rings.events.drain(..) {
            let r = match e {
                TrafficEvent::Record(r) => r,
                TrafficEvent::Lost { .. } | TrafficEvent::Malformed { .. } => {
                    if let Some(json) = ring_event_json(&e) {
                        out.push(Message {
                            channel: self.channels.ring_events,
                            kind: Kind::RingEvent,
                            log_time: self.rings.read_ns,
                            publish_time: self.rings.read_ns,
                            data: Arc::from(json.into_bytes()),
                        });
                        self.counts.ring_events += 1;
                    }
                    continue;
                }
                _ => continue,
            };
            let Some(&channel) = self.channels.rings.get(&r.ring) else {
                continue;
            };
            if let Some(images) = &mut self.images {
                images.poll_entry(&r.payload, r.seen_ns, &mut self.prelude, out);
            }
            if let (Some(h), Some(&header_channel)) =
                (r.lucky, self.channels.ring_headers.get(&r.ring))
            {
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
                data: Arc::from(ring_entry_json(&r)),
            });
            self.counts.ring_entries += 1;
        }
        self.counts.ring_lost_bytes = self
            .rings
            .traffic
            .totals()
            .iter()
            .map(|(_, t)| t.lost_bytes)
            .sum();
    }
}
