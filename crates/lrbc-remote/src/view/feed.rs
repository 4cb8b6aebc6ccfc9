//! [`MessageFeed`]: a recording that arrives live, one message at a time (a run served by
//! `serve`), into the structures the panels draw. The same decoders as the player's: each
//! frame is decoded by [`RecFrame`] and reduced as the player reduces it, each ring entry
//! goes through the traffic's `EntryDecoder` into the store (streamed camera frames with
//! it, as a live tap keeps them), and the image region is put together from the newest
//! image of each env as the player does. Histories are bounded by the settings, as the
//! live sampler's are.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use crate::summary::{FrameSummary, SUMMARY_TOPIC};
use lrbc::layout::{Geometry, RegionKind};
use lrbc::sync::lock;
use lrbc_live::detect::EventLog;
use lrbc_live::sampler::{
    EnvDetail, EnvHistory, EnvPoint, Ring, SamplerData, SamplerSettings, history_capacities,
};
use lrbc_live::traffic::{EntryDecoder, RingEntry, TrafficEvent, TrafficLimits, TrafficStore};
use lrbc_recording::format::{
    EVENTS_TOPIC, FRAME_TOPIC, RHYTHM_TOPIC, RING_EVENTS_TOPIC, RecFrame, camera_env_of_topic,
    event_of, lucky_header_of, rhythm_of, ring_event_of, ring_of_header_topic, ring_of_topic,
};
use lrbc_recording::replay::player::{ImageOrigin, image_rate, publish, region_image, ring_format};

/// The shortest time between two image regions put together (20 a second).
const IMAGE_EVERY_NS: u64 = 50_000_000;

/// What a message was, for the caller's counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fed {
    /// A frame; `gap` frames between it and the previous one never arrived (as a
    /// frame or a summary).
    Frame { frame_seq: u64, gap: u64 },
    /// A frame's summary (`serve`'s summary channel); `gap` as for a frame.
    Summary { gap: u64 },
    /// A ring entry, a luckyrobots entry header or a ring event.
    Ring,
    /// A form of an event of the server's detector.
    Event,
    /// A camera image of the image region.
    Image,
    /// A frame that does not decode, or a message of a topic this feed does not read.
    Unread,
}

/// A frame reduced for the histories.
enum Batched {
    /// A frame, or a frame's summary, new to the histories.
    New(publish::Reduced),
    /// A whole frame whose summary came first: the points of the watched envs the
    /// summary has no row for, and the rows of its watched envs.
    Envs(Vec<(u32, EnvPoint)>, Vec<(u32, EnvDetail)>),
}

/// Fills a [`SamplerData`] and a [`TrafficStore`] from messages as they arrive.
pub struct MessageFeed {
    pub data: Arc<Mutex<SamplerData>>,
    pub store: Arc<Mutex<TrafficStore>>,
    /// The events the server's detector found, the newest form of each.
    pub events: Arc<Mutex<EventLog>>,
    geometry: Arc<Geometry>,
    decoder: EntryDecoder,
    traffic_events: Vec<TrafficEvent>,
    /// A luckyrobots entry's header, sent just before its payload.
    headers: HashMap<RegionKind, Arc<[u8]>>,
    /// The newest image of each env of the image region, and whether it changed since
    /// the region was last put together.
    cameras: BTreeMap<u32, (u64, Arc<[u8]>)>,
    images_changed: bool,
    /// When the image region was last put together (the window's clock).
    images_built_ns: u64,
    image_seq: u64,
    image_times: std::collections::VecDeque<u64>,
    image_fps: f32,
    /// Frames reduced and not yet moved under the data's lock, as they came.
    batch: Vec<Batched>,
    last: Option<RecFrame>,
    last_seq: Option<u64>,
    /// The newest whole frame whose watched envs' rows went into the histories.
    rows_seq: Option<u64>,
    /// The envs the newest summary has rows for.
    summary_envs: Vec<u32>,
    /// Frames between two that arrived, not yet counted as missed.
    gaps: u64,
    /// The server's clock to the window's: the least of (arrival − the event's newest
    /// time) over the forms of events that came (an event is written as it is seen).
    event_clock: Option<i128>,
}

impl std::fmt::Debug for MessageFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageFeed")
            .field("envs", &self.geometry.num_envs)
            .finish_non_exhaustive()
    }
}

/// Why the cameras panel has no image yet: a run with an image region whose server
/// sends no images.
fn no_image(g: &Geometry) -> Option<String> {
    g.image.map(|_| ImageOrigin::Served.none().to_string())
}

impl MessageFeed {
    /// A feed of a run of `geometry`, labelled `label`.
    pub fn new(geometry: Geometry, label: String, settings: &SamplerSettings) -> Self {
        let geometry = Arc::new(geometry);
        let mut data = SamplerData::empty(Arc::clone(&geometry), label, settings.history_frames);
        data.image_note = no_image(&geometry);
        Self {
            data: Arc::new(Mutex::new(data)),
            store: Arc::new(Mutex::new(TrafficStore::default())),
            events: Arc::new(Mutex::new(EventLog::default())),
            geometry,
            decoder: EntryDecoder::default(),
            traffic_events: Vec::new(),
            headers: HashMap::new(),
            cameras: BTreeMap::new(),
            images_changed: false,
            images_built_ns: 0,
            image_seq: 0,
            image_times: std::collections::VecDeque::new(),
            image_fps: 0.0,
            batch: Vec::new(),
            last: None,
            last_seq: None,
            rows_seq: None,
            summary_envs: Vec::new(),
            gaps: 0,
            event_clock: None,
        }
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// A new run (the server re-attached, or restarted): its geometry; the histories,
    /// the traffic and the images start over, in the same shared structures.
    pub fn restart(&mut self, geometry: Geometry, label: String) {
        self.geometry = Arc::new(geometry);
        {
            let mut d = lock(&self.data);
            let generation = d.generation + 1;
            let frames = d.frames.capacity();
            *d = SamplerData::empty(Arc::clone(&self.geometry), label, frames);
            d.generation = generation;
            d.image_note = no_image(&self.geometry);
        }
        *lock(&self.store) = TrafficStore::default();
        // A new run's events count their ids from the start again.
        *lock(&self.events) = EventLog::default();
        // Record indexes go on from those shown before (the panels key on them).
        self.decoder = EntryDecoder::starting_at(self.decoder.next_index());
        self.headers.clear();
        self.cameras.clear();
        self.images_changed = false;
        self.image_times.clear();
        self.image_fps = 0.0;
        self.batch.clear();
        self.last = None;
        self.last_seq = None;
        self.rows_seq = None;
        self.summary_envs.clear();
        self.gaps = 0;
        self.event_clock = None;
    }

    /// One message of `topic`, logged at `log_ns` (the window's clock).
    pub fn message(
        &mut self,
        topic: &str,
        log_ns: u64,
        bytes: &[u8],
        settings: &SamplerSettings,
        limits: TrafficLimits,
    ) -> Fed {
        if topic == FRAME_TOPIC {
            let Some(f) = RecFrame::decode(log_ns, bytes) else {
                return Fed::Unread;
            };
            let frame_seq = f.frame_seq;
            let watched: Vec<u32> = settings
                .watched_envs
                .within(self.geometry.num_envs)
                .collect();
            let new_rows = self.rows_seq.is_none_or(|s| frame_seq > s);
            let gap = if self.last_seq.is_some_and(|s| frame_seq <= s) {
                // Its summary came first, with the all-env figures: the frame adds the
                // watched envs' observations and actions, and the rewards of those
                // the summary has no row for.
                if new_rows {
                    let mut points = publish::points(&f, &watched);
                    points.retain(|(env, _)| !self.summary_envs.contains(env));
                    let rows = publish::rows(&f, &watched, &self.geometry);
                    self.batch.push(Batched::Envs(points, rows));
                }
                0
            } else {
                let gap = self.gap_to(frame_seq);
                self.batch
                    .push(Batched::New(publish::reduce(&f, &watched, &self.geometry)));
                gap
            };
            if new_rows {
                self.rows_seq = Some(frame_seq);
            }
            self.last = Some(f);
            return Fed::Frame { frame_seq, gap };
        }
        if topic == SUMMARY_TOPIC {
            // A frame's summary fills the histories for a frame that did not come whole
            // (a link too thin for every frame); one that came whole is not counted twice.
            let Some(s) = FrameSummary::decode(bytes) else {
                return Fed::Unread;
            };
            if self.last_seq.is_some_and(|last| s.frame_seq <= last) {
                return Fed::Summary { gap: 0 };
            }
            let gap = self.gap_to(s.frame_seq);
            self.summary_envs.clone_from(&s.rows.env);
            self.batch.push(Batched::New(s.reduced(log_ns)));
            return Fed::Summary { gap };
        }
        if let Some(ring) = ring_of_topic(topic) {
            let lucky =
                (self.headers.remove(&ring)).and_then(|h| lucky_header_of(&h[..], bytes.len()));
            let entry = RingEntry {
                ring,
                format: ring_format(&self.geometry, ring),
                position: 0,
                payload: bytes.to_vec(),
                lucky,
                at_risk: false,
            };
            self.decoder.entry(entry, log_ns, &mut self.traffic_events);
            self.decoder.expire(log_ns, &mut self.traffic_events);
            let mut store = lock(&self.store);
            for ev in self.traffic_events.drain(..) {
                store.apply(ev, log_ns, limits);
            }
            return Fed::Ring;
        }
        if let Some(ring) = ring_of_header_topic(topic) {
            self.headers.insert(ring, Arc::from(bytes));
            return Fed::Ring;
        }
        if topic == RING_EVENTS_TOPIC {
            if let Some(ev) = ring_event_of(bytes) {
                lock(&self.store).apply(ev, log_ns, limits);
            }
            return Fed::Ring;
        }
        if topic == RHYTHM_TOPIC {
            let Some(r) = rhythm_of(bytes) else {
                return Fed::Unread;
            };
            // The pauses' times are the server's clock: on the window's, by the message's
            // arrival.
            let shift = i128::from(log_ns) - i128::from(r.at_ns);
            lock(&self.events).set_rhythm(r.shifted(shift));
            return Fed::Event;
        }
        if topic == EVENTS_TOPIC {
            let Some(mut e) = event_of(bytes) else {
                return Fed::Unread;
            };
            // The event's times are the server's clock: on the window's (as the frames'
            // times are, their arrival), the plots and the timeline mark it where it was.
            let offset = i128::from(log_ns) - i128::from(e.end_time_ns);
            let clock = *self.event_clock.get_or_insert(offset);
            let clock = clock.min(offset);
            self.event_clock = Some(clock);
            let shift = |t: u64| u64::try_from((i128::from(t) + clock).max(0)).unwrap_or(0);
            e.time_ns = shift(e.time_ns);
            e.end_time_ns = shift(e.end_time_ns);
            lock(&self.events).apply(e);
            return Fed::Event;
        }
        if let Some(env) = camera_env_of_topic(topic) {
            // The envs' images of one copy of the region share its time: a new time is a
            // new set, whose rate is the cameras panel's FPS.
            let newest = self.cameras.values().map(|(t, _)| *t).max();
            if newest.is_none_or(|t| log_ns > t) {
                self.image_fps = image_rate(&mut self.image_times, log_ns);
            }
            self.cameras.insert(env, (log_ns, Arc::from(bytes)));
            self.images_changed = true;
            return Fed::Image;
        }
        Fed::Unread
    }

    /// The frames between the newest in the histories and `frame_seq`, counted as not
    /// received; `frame_seq` becomes the newest.
    fn gap_to(&mut self, frame_seq: u64) -> u64 {
        let gap = self
            .last_seq
            .filter(|&s| frame_seq > s)
            .map_or(0, |s| frame_seq - s - 1);
        self.last_seq = Some(frame_seq);
        self.gaps += gap;
        gap
    }

    /// Moves the frames reduced since the last call under the data's lock (histories
    /// sized by `settings`), sets the newest frame, puts the image region
    /// together when an image came, and expires unanswered requests as of `now_ns`.
    pub fn flush(&mut self, settings: &SamplerSettings, limits: TrafficLimits, now_ns: u64) {
        let g = Arc::clone(&self.geometry);
        let watched: Vec<u32> = settings.watched_envs.within(g.num_envs).collect();
        let values = (g.obs_size as usize).saturating_add(g.act_size as usize);
        let (frames_cap, detail_cap) = history_capacities(settings, watched.len(), values);
        // The region is put together at most [`IMAGE_EVERY_NS`] apart: a camera image
        // of each env comes on a channel of its own.
        let due = now_ns.saturating_sub(self.images_built_ns) >= IMAGE_EVERY_NS;
        let image = if self.images_changed && due {
            self.images_changed = false;
            self.images_built_ns = now_ns;
            self.image_seq += 1;
            let frame_seq = self.last_seq.unwrap_or(0);
            let (image, note) = region_image(
                &g,
                &self.cameras,
                settings.image_bytes,
                (self.image_seq, frame_seq),
                ImageOrigin::Served,
            );
            Some((image, note, self.image_fps))
        } else {
            None
        };
        {
            let mut d = lock(&self.data);
            d.frames.set_capacity(frames_cap);
            d.envs.retain(|e, _| watched.contains(e));
            for &e in &watched {
                let h = d.envs.entry(e).or_insert_with(|| EnvHistory {
                    points: Ring::new(frames_cap),
                    detail: Ring::new(detail_cap),
                });
                h.points.set_capacity(frames_cap);
                h.detail.set_capacity(detail_cap);
            }
            // Frames that never arrived: missed by the server's capture, held back by
            // its limits, or dropped from this client's queue.
            d.stats.frames.seen += self.gaps;
            d.stats.frames.missed += std::mem::take(&mut self.gaps);
            for b in self.batch.drain(..) {
                match b {
                    Batched::New(r) => publish::push(&mut d, r),
                    Batched::Envs(points, rows) => publish::push_envs(&mut d, points, rows),
                }
            }
            if let Some(f) = self.last.take() {
                publish::set_latest(&mut d, Some(&f));
            }
            if let Some((image, note, fps)) = image {
                d.image = image;
                d.image_note = note;
                d.image_fps = fps;
            }
        }
        self.decoder.expire(now_ns, &mut self.traffic_events);
        if !self.traffic_events.is_empty() {
            let mut store = lock(&self.store);
            for ev in self.traffic_events.drain(..) {
                store.apply(ev, now_ns, limits);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lrbc::attach::{Target, attach};
    use lrbc::layout::LayoutChoice;
    use lrbc::layout::plan::PlanLayout;
    use lrbc::testutil::unique_name;
    use lrbc_recording::format::FrameRef;
    use lrbc_sim::engine::{Engine, EngineConfig};

    /// The geometry of a small simulated run: 5 envs, 3 observations, 2 actions.
    fn geometry() -> Geometry {
        let name = unique_name("feed");
        let config = EngineConfig::small(name, PlanLayout::Lrbc { ext: true }, 5, 3, 2);
        let engine = Engine::create(config).unwrap_or_else(|e| panic!("{e}"));
        attach(&Target::Shm(engine.name().to_string()), LayoutChoice::Auto)
            .unwrap_or_else(|e| panic!("{e}"))
            .geometry
    }

    /// A frame of `g` with the reward `reward` everywhere, served with `envs`' rows.
    fn frame_bytes(g: &Geometry, seq: u64, reward: f32, envs: &[u32]) -> Vec<u8> {
        let n = g.num_envs as usize;
        let rewards = vec![reward; n];
        let flags = vec![0u8; n];
        let obs = vec![0.5; g.obs_size as usize * envs.len()];
        let act = vec![0.1; g.act_size as usize * envs.len()];
        FrameRef {
            frame_seq: seq,
            frame_time_ns: 0,
            action_seq: seq,
            action_time_ns: 0,
            sampled_ns: 0,
            rewards: &rewards,
            dones: &flags,
            truncateds: None,
            resets: &flags,
            envs,
            observations: &obs,
            actions: &act,
        }
        .encode(&mut flatbuffers::FlatBufferBuilder::new())
        .to_vec()
    }

    #[test]
    fn a_whole_frame_after_its_summary_adds_its_observations_and_actions_once() {
        let g = geometry();
        // Env 1 has a row in the summary; env 3 is served whole but has none.
        let settings = SamplerSettings {
            watched_envs: lrbc_live::sampler::WatchedEnvs::new([1, 3]),
            ..SamplerSettings::default()
        };
        let limits = TrafficLimits::default();
        let mut feed = MessageFeed::new(g.clone(), "node:1".into(), &settings);
        let whole = frame_bytes(&g, 1, 0.25, &[1, 3]);
        let mut summary = FrameSummary::of(&RecFrame::decode(10, &whole).unwrap());
        summary.rows.env.truncate(1);
        let summary = serde_json::to_vec(&summary).unwrap();
        assert_eq!(
            feed.message(SUMMARY_TOPIC, 10, &summary, &settings, limits),
            Fed::Summary { gap: 0 }
        );
        for _ in 0..2 {
            assert_eq!(
                feed.message(FRAME_TOPIC, 10, &whole, &settings, limits),
                Fed::Frame {
                    frame_seq: 1,
                    gap: 0
                }
            );
        }
        feed.flush(&settings, limits, 20);
        let d = lock(&feed.data);
        assert_eq!((d.frames.len(), d.stats.frames.seen), (1, 1), "one frame");
        for env in [1, 3] {
            let h = d.envs.get(&env).unwrap();
            assert_eq!(
                (h.points.len(), h.detail.len()),
                (1, 1),
                "env {env}: one reward, one row of observations and actions"
            );
            assert_eq!(h.detail.iter().next().map(|r| r.values.len()), Some(5));
        }
    }

    #[test]
    fn frames_fill_the_histories_gaps_count_as_missed_and_a_new_run_starts_over() {
        let g = geometry();
        let n = g.num_envs as usize;
        let settings = SamplerSettings {
            watched_envs: lrbc_live::sampler::WatchedEnvs::new([1]),
            ..SamplerSettings::default()
        };
        let limits = TrafficLimits::default();
        let mut feed = MessageFeed::new(g.clone(), "node:1".into(), &settings);
        let (first, later) = (
            frame_bytes(&g, 1, 1.0, &[1]),
            frame_bytes(&g, 4, f32::NAN, &[1]),
        );
        let mut fed =
            |topic: &str, t: u64, bytes: &[u8]| feed.message(topic, t, bytes, &settings, limits);
        assert_eq!(
            fed(FRAME_TOPIC, 10, &first),
            Fed::Frame {
                frame_seq: 1,
                gap: 0
            }
        );
        assert_eq!(
            fed(FRAME_TOPIC, 20, &later),
            Fed::Frame {
                frame_seq: 4,
                gap: 2
            }
        );
        assert_eq!(fed(FRAME_TOPIC, 30, b"not a frame"), Fed::Unread);
        assert_eq!(fed("/somebody/else", 30, b"{}"), Fed::Unread);
        feed.flush(&settings, limits, 40);
        {
            let d = lock(&feed.data);
            assert_eq!(d.frames.len(), 2);
            assert_eq!((d.stats.frames.seen, d.stats.frames.missed), (4, 2));
            assert_eq!(d.envs.get(&1).map(|h| h.points.len()), Some(2));
            assert_eq!(d.envs.get(&1).map(|h| h.detail.len()), Some(2));
            assert_eq!(d.latest.as_ref().map(|(s, _)| *s), Some(4));
            let nan = |h: &lrbc::snapshot::HotData| h.rewards.iter().filter(|r| r.is_nan()).count();
            assert_eq!(
                d.latest.as_ref().map(|(_, h)| nan(h)),
                Some(n),
                "the newest frame's NaN rewards"
            );
        }
        feed.restart(g, "node:1".into());
        let d = lock(&feed.data);
        assert_eq!(
            (d.generation, d.frames.len(), d.stats.frames.seen),
            (1, 0, 0)
        );
    }
}
