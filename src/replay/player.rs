//! [`Player`]: a named thread that moves a cursor over a recording (play, pause, seek,
//! step, speed, search) and fills a [`SamplerData`] and a [`TrafficStore`] as of the
//! cursor: the frame at the cursor as `latest`, the frames of the history window before
//! it, the watched envs' points and rows (rows only for the recorded envs), the ring
//! entries of the window decoded into traffic rows, and the newest camera images at or
//! before the cursor (the image region's, and each stream's frame).

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::reader::{LatestImages, RecFrame, Recording, RingMessage, Topic};
use crate::layout::RingFormat;
use crate::layout::{Geometry, Layout, RegionKind};
use crate::sampler::{
    BadValue, Channel, Counters, EnvDetail, EnvHistory, EnvPoint, FLAG_DONE, FLAG_RESET,
    FLAG_TRUNCATED, FrameAgg, ImageFrame, Ring, SamplerData, SamplerSettings, SamplerStats, Scan,
    history_capacities,
};
use crate::sync::lock;
use crate::traffic::{
    EntryDecoder, RingEntry, StreamedImage, TrafficEvent, TrafficLimits, TrafficStore,
};

/// How far back of the cursor the history reaches, at most.
pub const HISTORY_WINDOW_NS: u64 = 30_000_000_000;

/// What a search forward looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Find {
    /// A frame where an env is done.
    Done,
    /// A frame with a NaN reward, observation or action.
    Nan,
    /// A ring entry carrying an error.
    Error,
}

impl Find {
    pub fn describe(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Nan => "NaN",
            Self::Error => "error",
        }
    }
}

/// The timeline: what the window asks for and what the player shows. The window sets
/// the requests (`seek_to`, `step`, `find`, `playing`, `speed`), the player the rest.
#[derive(Clone, Debug, PartialEq)]
pub struct PlayState {
    /// First and last message's log time (ns).
    pub range: (u64, u64),
    /// Where the data stands (ns, within `range`).
    pub cursor_ns: u64,
    pub playing: bool,
    /// 0.1 to 10.
    pub speed: f32,
    pub frame_seq: Option<u64>,
    pub frame_time_ns: Option<u64>,
    pub seek_to: Option<u64>,
    /// Frames to step (negative: back).
    pub step: i64,
    pub find: Option<Find>,
    /// The search under way.
    pub searching: Option<Find>,
    /// The outcome of the last search, or an error reading the file.
    pub note: Option<String>,
    stop: bool,
}

impl PlayState {
    /// A request the player has not taken yet, or the player is stopping.
    fn interrupted(&self) -> bool {
        self.stop || self.seek_to.is_some() || self.step != 0 || self.find.is_some()
    }
}

struct Shared {
    state: Mutex<PlayState>,
    wake: Condvar,
}

/// A recording played into the structures the panels draw.
pub struct Player {
    pub data: Arc<Mutex<SamplerData>>,
    pub store: Arc<Mutex<TrafficStore>>,
    shared: Arc<Shared>,
    settings: Arc<Mutex<(SamplerSettings, TrafficLimits)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Player {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Player").finish_non_exhaustive()
    }
}

impl Player {
    /// Starts the player on `rec`, its cursor at the start.
    pub fn start(
        rec: Recording,
        settings: SamplerSettings,
        limits: TrafficLimits,
        waker: Arc<dyn Fn() + Send + Sync>,
    ) -> std::io::Result<Self> {
        let range = rec.time_range().unwrap_or((0, 0));
        let data = Arc::new(Mutex::new(SamplerData::empty(
            Arc::new(rec.geometry.clone()),
            rec.label(),
            1,
        )));
        let store = Arc::new(Mutex::new(TrafficStore::default()));
        let shared = Arc::new(Shared {
            state: Mutex::new(PlayState {
                range,
                cursor_ns: range.0,
                playing: false,
                speed: 1.0,
                frame_seq: None,
                frame_time_ns: None,
                seek_to: Some(range.0),
                step: 0,
                find: None,
                searching: None,
                note: None,
                stop: false,
            }),
            wake: Condvar::new(),
        });
        let settings = Arc::new(Mutex::new((settings, limits)));
        let mut worker = Worker {
            rec,
            data: Arc::clone(&data),
            store: Arc::clone(&store),
            shared: Arc::clone(&shared),
            settings: Arc::clone(&settings),
            waker,
            shown: None,
            applied: None,
            decoder: EntryDecoder::default(),
            events: Vec::new(),
            images_shown: None,
            image_seq: 0,
            stream_marks: 0,
        };
        let thread = std::thread::Builder::new()
            .name("lrbc-player".into())
            .spawn(move || worker.run())?;
        Ok(Self {
            data,
            store,
            shared,
            settings,
            thread: Some(thread),
        })
    }

    /// The timeline as the player last left it.
    pub fn state(&self) -> PlayState {
        lock(&self.shared.state).clone()
    }

    /// Changes the requests of the timeline and wakes the player.
    pub fn request(&self, f: impl FnOnce(&mut PlayState)) {
        f(&mut lock(&self.shared.state));
        self.shared.wake.notify_all();
    }

    pub fn set_settings(&self, s: SamplerSettings) {
        lock(&self.settings).0 = s;
        self.shared.wake.notify_all();
    }

    pub fn set_limits(&self, l: TrafficLimits) {
        lock(&self.settings).1 = l;
        self.shared.wake.notify_all();
    }

    pub fn settings(&self) -> SamplerSettings {
        lock(&self.settings).0.clone()
    }
}

impl Drop for Player {
    fn drop(&mut self) {
        self.request(|s| s.stop = true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Worker {
    rec: Recording,
    data: Arc<Mutex<SamplerData>>,
    store: Arc<Mutex<TrafficStore>>,
    shared: Arc<Shared>,
    settings: Arc<Mutex<(SamplerSettings, TrafficLimits)>>,
    waker: Arc<dyn Fn() + Send + Sync>,
    /// The cursor the data stands at.
    shown: Option<u64>,
    /// The settings the data was filled with.
    applied: Option<SamplerSettings>,
    /// Decodes and pairs the ring entries put in the traffic store, as a live traffic
    /// tap does.
    decoder: EntryDecoder,
    events: Vec<TrafficEvent>,
    /// The camera images the data shows: (env, log time) of each, and the settings'
    /// image budget.
    images_shown: Option<(Vec<(u32, u64)>, usize)>,
    /// Counts the image sets shown (their `image_seq`, so that the panel uploads anew).
    image_seq: u64,
    /// Counts the streamed frames put in the store from the file's index.
    stream_marks: u64,
}

/// `record_index` of streamed frames taken from the index rather than from a traffic
/// row (above any row index, so that the cameras panel sees a new frame).
const STREAM_MARK_BASE: u64 = 1 << 62;

/// What a frame adds to the histories.
struct Reduced {
    agg: FrameAgg,
    points: Vec<(u32, EnvPoint)>,
    rows: Vec<(u32, EnvDetail)>,
}

fn reduce(f: &RecFrame, watched: &[u32], g: &Geometry) -> Reduced {
    let mut sorted: Vec<f32> = f.rewards.iter().copied().filter(|r| !r.is_nan()).collect();
    sorted.sort_by(f32::total_cmp);
    let q = |p: f64| crate::stats::quantile(&sorted, p).unwrap_or(0.0);
    let mean = if sorted.is_empty() {
        0.0
    } else {
        sorted.iter().sum::<f32>() / sorted.len() as f32
    };
    let count = |v: &[u8]| v.iter().filter(|&&x| x != 0).count() as u32;
    let agg = FrameAgg {
        frame_seq: f.frame_seq,
        t_ns: f.log_ns,
        reward_min: q(0.0),
        reward_p10: q(0.1),
        reward_p50: q(0.5),
        reward_mean: mean,
        reward_p90: q(0.9),
        reward_max: q(1.0),
        dones: count(&f.dones),
        truncateds: f.truncateds.as_deref().map_or(0, count),
        resets: count(&f.resets),
        nan_rewards: f.rewards.iter().filter(|r| r.is_nan()).count() as u32,
        step_latency_ns: None,
    };
    let flag = |v: Option<&[u8]>, i: usize, bit: u8| {
        if v.and_then(|v| v.get(i)).is_some_and(|&x| x != 0) {
            bit
        } else {
            0
        }
    };
    let (o, a) = (g.obs_size as usize, g.act_size as usize);
    let mut points = Vec::with_capacity(watched.len());
    let mut rows = Vec::new();
    for &env in watched {
        let i = env as usize;
        let Some(&reward) = f.rewards.get(i) else {
            continue;
        };
        let flags = flag(Some(&f.dones), i, FLAG_DONE)
            | flag(f.truncateds.as_deref(), i, FLAG_TRUNCATED)
            | flag(Some(&f.resets), i, FLAG_RESET);
        points.push((
            env,
            EnvPoint {
                frame_seq: f.frame_seq,
                t_ns: f.log_ns,
                reward,
                flags,
            },
        ));
        if let Some(values) = f.row(env, o, a) {
            rows.push((
                env,
                EnvDetail {
                    frame_seq: f.frame_seq,
                    t_ns: f.log_ns,
                    values: values.into_boxed_slice(),
                },
            ));
        }
    }
    Reduced { agg, points, rows }
}

fn has_nan(f: &RecFrame) -> bool {
    f.rewards
        .iter()
        .chain(&f.observations)
        .chain(&f.actions)
        .any(|v| v.is_nan())
}

impl Worker {
    fn run(&mut self) {
        let mut tick = Instant::now();
        loop {
            let (seek, step, find, playing, speed, range) = {
                let mut s = lock(&self.shared.state);
                if s.stop {
                    return;
                }
                let r = (
                    s.seek_to.take(),
                    std::mem::take(&mut s.step),
                    s.find.take(),
                    s.playing,
                    s.speed,
                    s.range,
                );
                s.searching = r.2;
                r
            };
            let now = Instant::now();
            let elapsed = now.duration_since(tick);
            tick = now;
            let mut cursor = self.shown.unwrap_or(range.0);
            let mut note = None;
            if let Some(t) = seek {
                cursor = t;
            }
            if step != 0 {
                cursor = self.stepped(cursor, step, range).unwrap_or(cursor);
            }
            if let Some(what) = find {
                match self.search(cursor, range.1, what) {
                    Ok(Some(t)) => cursor = t,
                    Ok(None) => note = Some(format!("no {} after this frame", what.describe())),
                    Err(e) => note = Some(e),
                }
            }
            let mut still_playing = playing;
            if playing && seek.is_none() {
                let advance =
                    (elapsed.as_nanos() as f64 * f64::from(speed.clamp(0.1, 10.0))) as u64;
                cursor = cursor.saturating_add(advance);
                if cursor >= range.1 {
                    still_playing = false;
                }
            }
            cursor = cursor.clamp(range.0, range.1.max(range.0));
            let settings = lock(&self.settings).clone();
            let moved = self.shown != Some(cursor) || self.applied.as_ref() != Some(&settings.0);
            let mut error = None;
            if moved && let Err(e) = self.publish(cursor, seek.is_some(), &settings.0, settings.1) {
                error = Some(e);
            }
            {
                let mut s = lock(&self.shared.state);
                s.cursor_ns = cursor;
                s.searching = None;
                if !still_playing {
                    s.playing = false;
                }
                if let Some(n) = note.or(error) {
                    s.note = Some(n);
                } else if find.is_some() || seek.is_some() || step != 0 {
                    s.note = None;
                }
                if let Some((seq, t)) = self.frame_now() {
                    s.frame_seq = Some(seq);
                    s.frame_time_ns = Some(t);
                }
                let idle = !s.playing && s.seek_to.is_none() && s.step == 0 && s.find.is_none();
                if idle || s.playing {
                    let wait = if s.playing {
                        Duration::from_millis(15)
                    } else {
                        Duration::from_millis(500)
                    };
                    drop(
                        self.shared
                            .wake
                            .wait_timeout(s, wait)
                            .unwrap_or_else(std::sync::PoisonError::into_inner),
                    );
                }
            }
            (self.waker)();
        }
    }

    fn frame_now(&self) -> Option<(u64, u64)> {
        let d = lock(&self.data);
        d.latest
            .as_ref()
            .map(|(seq, _)| (*seq, d.counters.frame_time_ns.unwrap_or(0)))
    }

    /// The log time of the frame `step` frames after (or before) `cursor`.
    fn stepped(&mut self, cursor: u64, step: i64, range: (u64, u64)) -> Result<u64, String> {
        let mut t = cursor;
        if step > 0 {
            let mut left = step;
            self.rec
                .frames_between(cursor.saturating_add(1), range.1, |f| {
                    t = f.log_ns;
                    left -= 1;
                    left > 0
                })?;
        } else {
            for _ in 0..step.unsigned_abs() {
                match self.rec.frame_at(t.saturating_sub(1))? {
                    Some(f) if t > range.0 => t = f.log_ns,
                    _ => break,
                }
            }
        }
        Ok(t)
    }

    /// The log time of the first message after `from` that `what` looks for.
    fn search(&mut self, from: u64, end: u64, what: Find) -> Result<Option<u64>, String> {
        let mut found = None;
        let g = self.rec.geometry.clone();
        let shared = Arc::clone(&self.shared);
        // A luckyrobots entry's header, recorded just before its payload.
        let mut headers = std::collections::HashMap::new();
        self.rec
            .each_message(from.saturating_add(1), end, |kind, log_ns, data| {
                if lock(&shared.state).interrupted() {
                    return false;
                }
                let hit = match (what, kind) {
                    (Find::Done, Topic::Frame) => RecFrame::decode(log_ns, data)
                        .is_some_and(|f| f.dones.iter().any(|&d| d != 0)),
                    (Find::Nan, Topic::Frame) => {
                        RecFrame::decode(log_ns, data).is_some_and(|f| has_nan(&f))
                    }
                    (Find::Error, Topic::Ring(ring)) => {
                        let lucky = headers.remove(&ring).and_then(|h: Arc<[u8]>| {
                            crate::record::lucky_header_of(&h, data.len())
                        });
                        crate::traffic::decode_entry(ring, ring_format(&g, ring), data, lucky)
                            .map_or(true, |d| d.error.is_some())
                    }
                    (_, Topic::RingHeader(ring)) => {
                        headers.insert(ring, Arc::clone(data));
                        false
                    }
                    // A malformed entry is an error; a loss is not.
                    (Find::Error, Topic::RingEvent) => matches!(
                        crate::record::ring_event_of(data),
                        Some(TrafficEvent::Malformed { .. })
                    ),
                    _ => false,
                };
                if hit {
                    found = Some(log_ns);
                }
                !hit
            })?;
        Ok(found)
    }

    /// Fills the data as of `cursor`: incrementally when it moved forward within the
    /// window with the same settings and not by a seek, else from scratch (a seek shows
    /// the frame at the cursor at once).
    fn publish(
        &mut self,
        cursor: u64,
        seek: bool,
        settings: &SamplerSettings,
        limits: TrafficLimits,
    ) -> Result<(), String> {
        let incremental = match self.shown {
            Some(_) if seek => false,
            Some(shown) => {
                cursor > shown
                    && cursor - shown < HISTORY_WINDOW_NS
                    && self.applied.as_ref() == Some(settings)
            }
            None => false,
        };
        let g = self.rec.geometry.clone();
        let watched: Vec<u32> = settings
            .watched_envs
            .iter()
            .copied()
            .filter(|&e| e < g.num_envs)
            .collect();
        let from = if incremental {
            self.shown.unwrap_or(cursor).saturating_add(1)
        } else {
            // The frame at the cursor first, so that a scrub shows at once.
            let latest = self.rec.frame_at(cursor)?;
            let (frames, detail) =
                history_capacities(settings, watched.len(), (g.obs_size + g.act_size) as usize);
            {
                let mut d = lock(&self.data);
                d.generation += 1;
                d.frames = Ring::new(frames);
                d.envs = watched
                    .iter()
                    .map(|&e| {
                        (
                            e,
                            EnvHistory {
                                points: Ring::new(frames),
                                detail: Ring::new(detail),
                            },
                        )
                    })
                    .collect();
                d.stats = SamplerStats::default();
                set_latest(&mut d, latest.as_ref(), limits_of(settings));
            }
            *lock(&self.store) = TrafficStore::default();
            // Record indexes go on from those shown before (the panels key on them).
            self.decoder = EntryDecoder::starting_at(self.decoder.next_index());
            (self.waker)();
            cursor.saturating_sub(HISTORY_WINDOW_NS)
        };
        let mut batch = Vec::new();
        let mut last = None;
        let data = Arc::clone(&self.data);
        let scan_limits = limits_of(settings);
        let flush = |batch: &mut Vec<Reduced>, last: Option<&RecFrame>| {
            let mut d = lock(&data);
            for r in batch.drain(..) {
                d.frames.push(r.agg);
                d.stats.frames_seen += 1;
                d.stats.frames_sampled += 1;
                for (env, p) in r.points {
                    if let Some(h) = d.envs.get_mut(&env) {
                        h.points.push(p);
                    }
                }
                for (env, row) in r.rows {
                    if let Some(h) = d.envs.get_mut(&env) {
                        h.detail.push(row);
                    }
                }
            }
            if let Some(f) = last {
                set_latest(&mut d, Some(f), scan_limits);
            }
        };
        let shared = Arc::clone(&self.shared);
        let mut seen = 0u32;
        let mut cut_short = false;
        self.rec.frames_between(from, cursor, |f| {
            batch.push(reduce(&f, &watched, &g));
            seen = seen.wrapping_add(1);
            // A new request cuts a history filled from scratch short (its newest
            // frame is already shown); filling forward while playing goes on to the
            // cursor.
            if !incremental && seen.is_multiple_of(256) && lock(&shared.state).interrupted() {
                cut_short = true;
                return false;
            }
            if batch.len() >= 4096 {
                flush(&mut batch, None);
            }
            last = Some(f);
            true
        })?;
        // Cut short, the newest frame read is not the cursor's (set at the start).
        flush(&mut batch, if cut_short { None } else { last.as_ref() });
        let entries = self.rec.ring_between(from, cursor, limits.max_rows)?;
        {
            let mut store = lock(&self.store);
            // A luckyrobots entry's header, recorded just before its payload.
            let mut headers: std::collections::HashMap<RegionKind, Arc<[u8]>> =
                std::collections::HashMap::new();
            for e in entries {
                let (ring, log_ns, payload) = match e {
                    RingMessage::Entry {
                        log_ns,
                        ring,
                        payload,
                    } => (ring, log_ns, payload),
                    // A loss or a malformed entry, as the traffic tap showed it.
                    RingMessage::Event { log_ns, event } => {
                        store.apply(event, log_ns, limits);
                        continue;
                    }
                    RingMessage::Header { ring, json } => {
                        headers.insert(ring, json);
                        continue;
                    }
                };
                let lucky = headers
                    .remove(&ring)
                    .and_then(|h| crate::record::lucky_header_of(&h[..], payload.len()));
                // As a traffic tap would have shown it when the recorder saw it.
                let entry = RingEntry {
                    ring,
                    format: ring_format(&g, ring),
                    position: 0,
                    payload: payload.to_vec(),
                    lucky,
                    at_risk: false,
                };
                self.decoder.entry(entry, log_ns, &mut self.events);
                self.decoder.expire(log_ns, &mut self.events);
                for ev in self.events.drain(..) {
                    store.apply(ev, log_ns, limits);
                }
            }
            self.decoder.expire(cursor, &mut self.events);
            for ev in self.events.drain(..) {
                store.apply(ev, cursor, limits);
            }
        }
        if let Err(e) = self.publish_images(cursor, settings, limits) {
            // The frames stand; the cameras panel says why it has no image.
            self.images_shown = None;
            let mut d = lock(&self.data);
            d.image = None;
            d.image_note = Some(format!("camera images unreadable: {e}"));
        }
        self.shown = Some(cursor);
        self.applied = Some(settings.clone());
        Ok(())
    }

    /// The newest camera images at or before `cursor` into the data (the image region's)
    /// and the traffic store (the streams').
    fn publish_images(
        &mut self,
        cursor: u64,
        settings: &SamplerSettings,
        limits: TrafficLimits,
    ) -> Result<(), String> {
        let LatestImages { cameras, streams } = self.rec.images_at(cursor)?;
        let key = (
            cameras
                .iter()
                .map(|(&e, &(t, _))| (e, t))
                .collect::<Vec<_>>(),
            settings.image_bytes,
        );
        if self.images_shown.as_ref() != Some(&key) {
            self.images_shown = Some(key);
            self.image_seq += 1;
            // The frame recorded last before the newest image.
            let newest = cameras.values().map(|(t, _)| *t).max();
            let frame_seq = match newest {
                Some(t) => self.rec.frame_at(t)?.map_or(0, |f| f.frame_seq),
                None => 0,
            };
            let (image, note) = region_image(
                &self.rec.geometry,
                &cameras,
                settings.image_bytes,
                (self.image_seq, frame_seq),
                self.rec.has_camera_images(),
            );
            let mut d = lock(&self.data);
            d.image = image;
            d.image_note = note;
        }
        let mut store = lock(&self.store);
        for (_, (_, envelope)) in streams {
            let Some(source) = crate::rpc::image::image_source(&envelope) else {
                continue;
            };
            let too_big = envelope.len() > limits.max_stream_bytes;
            if store
                .streams
                .get(&source)
                .is_some_and(|s| s.envelope == envelope || (too_big && s.not_kept.is_some()))
            {
                continue;
            }
            self.stream_marks += 1;
            let s = store
                .streams
                .entry(source)
                .or_insert_with(|| StreamedImage {
                    record_index: 0,
                    frames: 0,
                    envelope: Arc::from(&[][..]),
                    not_kept: None,
                });
            s.record_index = STREAM_MARK_BASE + self.stream_marks;
            s.frames = s.frames.max(1);
            if too_big {
                s.envelope = Arc::from(&[][..]);
                s.not_kept = Some(envelope.len());
            } else {
                s.envelope = envelope;
                s.not_kept = None;
            }
        }
        Ok(())
    }
}

/// The image region as of the newest recorded images: the recorded envs' pixels, the
/// other envs black. No image: why, for the cameras panel.
pub(super) fn region_image(
    g: &Geometry,
    cameras: &BTreeMap<u32, (u64, Arc<[u8]>)>,
    budget: usize,
    (image_seq, frame_seq): (u64, u64),
    has_cameras: bool,
) -> (Option<ImageFrame>, Option<String>) {
    let Some(img) = g.image else {
        return (None, None);
    };
    if cameras.is_empty() {
        let why = if has_cameras {
            "no camera image recorded at or before this point"
        } else {
            "this recording has no camera images (record --images records them)"
        };
        return (None, Some(why.into()));
    }
    let pixels = u64::from(g.num_envs) * u64::from(img.width) * u64::from(img.height);
    let cost = pixels.saturating_mul(u64::from(img.channels) + 4);
    if cost > budget as u64 {
        return (
            None,
            Some(format!(
                "camera images are not shown: {:.1} MiB with their textures, over the {:.1} MiB the memory budget gives them (Settings)",
                cost as f64 / 1048576.0,
                budget as f64 / 1048576.0
            )),
        );
    }
    let encoding = match img.channels {
        1 => "mono8",
        3 => "rgb8",
        4 => "rgba8",
        c => return (None, Some(format!("images of {c} channels are not shown"))),
    };
    let (w, h, c) = (
        img.width as usize,
        img.height as usize,
        img.channels as usize,
    );
    let row = w * c;
    let per = row * h;
    let Some(total) = per.checked_mul(g.num_envs as usize) else {
        return (None, Some("the image region is too large".into()));
    };
    let mut buf = vec![0u8; total];
    if c == 4 {
        // Opaque black.
        for p in buf.chunks_exact_mut(4) {
            p[3] = 255;
        }
    }
    let mut shown = 0usize;
    let mut newest = 0u64;
    for (&env, (log_ns, bytes)) in cameras {
        let Ok(raw) = crate::rpc::foxglove_fb::root_as_raw_image(bytes) else {
            continue;
        };
        let step = raw.step() as usize;
        let data = raw.data().map(|d| d.bytes()).unwrap_or_default();
        let fits = row > 0
            && h > 0
            && raw.width() == img.width
            && raw.height() == img.height
            && raw.encoding() == Some(encoding)
            && step >= row
            && step
                .checked_mul(h - 1)
                .and_then(|n| n.checked_add(row))
                .is_some_and(|need| data.len() >= need);
        let Some(dest) = buf.get_mut(env as usize * per..(env as usize + 1) * per) else {
            continue;
        };
        if !fits {
            continue;
        }
        for (y, out) in dest.chunks_exact_mut(row).enumerate() {
            out.copy_from_slice(&data[y * step..y * step + row]);
        }
        shown += 1;
        newest = newest.max(*log_ns);
    }
    if shown == 0 {
        return (
            None,
            Some(format!(
                "the recorded camera images are not {}×{} {encoding} as the image region",
                img.width, img.height
            )),
        );
    }
    (
        Some(ImageFrame {
            image_seq,
            frame_seq,
            width: img.width,
            height: img.height,
            channels: img.channels,
            num_envs: g.num_envs,
            pixels: Arc::new(buf),
            captured_ns: newest,
            consistent: true,
        }),
        None,
    )
}

fn limits_of(s: &SamplerSettings) -> (f32, f32) {
    (s.obs_limit, s.act_limit)
}

/// The format of a recorded ring's entries: the recorded geometry's, else the layout's.
fn ring_format(g: &Geometry, ring: RegionKind) -> RingFormat {
    g.ring(ring).map_or(
        if g.layout == Layout::LuckyrobotsIpc {
            RingFormat::Lucky
        } else {
            RingFormat::Lrbc
        },
        |r| r.format,
    )
}

/// NaN, Inf and out-of-range values of a frame: every env's reward, the recorded envs'
/// observations and actions.
fn scan(f: &RecFrame, g: &Geometry, limits: (f32, f32), scans: u64) -> Scan {
    let mut s = Scan {
        frame_seq: f.frame_seq,
        scans,
        ..Scan::default()
    };
    let mut affected = std::collections::BTreeSet::new();
    let mut bad = |env: u32, channel: Channel, value: f32, limit: Option<f32>, s: &mut Scan| {
        if value.is_nan() {
            s.nan += 1;
        } else if value.is_infinite() {
            s.inf += 1;
        } else if limit.is_some_and(|l| value.abs() > l) {
            s.out_of_range += 1;
        } else {
            return;
        }
        affected.insert(env);
        if s.examples.len() < 16 {
            s.examples.push(BadValue {
                env,
                channel,
                value,
                frame_seq: f.frame_seq,
            });
        }
    };
    for (env, &r) in f.rewards.iter().enumerate() {
        bad(env as u32, Channel::Reward, r, None, &mut s);
    }
    let (o, a) = (g.obs_size as usize, g.act_size as usize);
    for (i, &env) in f.envs.iter().enumerate() {
        for (j, &v) in f.observations.iter().skip(i * o).take(o).enumerate() {
            bad(env, Channel::Obs(j as u32), v, Some(limits.0), &mut s);
        }
        for (j, &v) in f.actions.iter().skip(i * a).take(a).enumerate() {
            bad(env, Channel::Act(j as u32), v, Some(limits.1), &mut s);
        }
    }
    s.envs_affected = affected.len() as u32;
    s
}

fn set_latest(d: &mut SamplerData, f: Option<&RecFrame>, limits: (f32, f32)) {
    let Some(f) = f else {
        d.latest = None;
        d.counters = Counters::default();
        d.scan = Scan::default();
        return;
    };
    let scans = d.scan.scans + 1;
    d.scan = scan(f, &d.geometry, limits, scans);
    d.latest = Some((
        f.frame_seq,
        crate::snapshot::HotData {
            rewards: f.rewards.clone(),
            dones: f.dones.clone(),
            truncateds: f.truncateds.clone(),
            resets: f.resets.clone(),
        },
    ));
    d.counters.frame_seq = f.frame_seq;
    d.counters.action_seq = f.action_seq;
    d.counters.frame_time_ns = (f.frame_time_ns != 0).then_some(f.frame_time_ns);
    d.counters.read_ns = f.log_ns;
}
