//! [`Player`]: a named thread that moves a cursor over a recording (play, pause, seek,
//! step, speed, search) and fills a [`SamplerData`] and a [`TrafficStore`] as of the
//! cursor: the frame at the cursor as `latest`, the frames of the history window before
//! it, the watched envs' points and rows (rows only for the recorded envs), the ring
//! entries of the window decoded into traffic rows, and the newest camera images at or
//! before the cursor (the image region's, and each stream's frame); and, on a thread of
//! their own, the recording's events (`super::events`). The thread's loop is here;
//! `publish` fills the data as of the cursor, with the ring entries (`traffic`) and the
//! camera images (`images`).

mod images;
pub mod publish;
pub(in crate::replay) mod traffic;

pub use images::{ImageOrigin, image_rate, region_image};
pub use traffic::ring_format;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::reader::{Damage, Recording};
use lrbc::sync::lock;
use lrbc_live::detect::{DetectSettings, EventLog};
use lrbc_live::episodes::{BookDetail, EpisodeBook};
use lrbc_live::sampler::{SamplerData, SamplerSettings};
use lrbc_live::traffic::{EntryDecoder, TrafficEvent, TrafficLimits, TrafficStore};

/// How far back of the cursor the history reaches, at most.
pub const HISTORY_WINDOW_NS: u64 = 30_000_000_000;

/// The timeline: what the window asks for and what the player shows. The window sets
/// the requests (`seek_to`, `step`, `playing`, `speed`), the player the rest.
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
    /// An error reading the file.
    pub note: Option<String>,
    stop: bool,
}

impl PlayState {
    /// A request the player has not taken yet, or the player is stopping.
    fn interrupted(&self) -> bool {
        self.stop || self.seek_to.is_some() || self.step != 0
    }
}

/// The play state the window sets and the player's thread obeys, with its wake-up.
struct PlayControl {
    state: Mutex<PlayState>,
    wake: Condvar,
}

/// A recording played into the structures the panels draw.
pub struct Player {
    pub data: Arc<Mutex<SamplerData>>,
    pub store: Arc<Mutex<TrafficStore>>,
    /// The recording's events (`super::events`): read on a thread of their own, or found
    /// again from the frames of a file that has none; its note says how far.
    pub events: Arc<Mutex<EventLog>>,
    /// The recording's episodes (`super::episodes`), counted over the whole file on the
    /// same thread after the events; its note says how far.
    pub episodes: Arc<Mutex<EpisodeBook>>,
    shared: Arc<PlayControl>,
    settings: Arc<Mutex<(SamplerSettings, TrafficLimits)>>,
    thread: Option<std::thread::JoinHandle<()>>,
    events_stop: Arc<AtomicBool>,
    events_thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Player {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Player").finish_non_exhaustive()
    }
}

impl Player {
    /// Starts the player on `rec`, its cursor at the start; its events are read (or,
    /// for a file that has none, found again with `detect`) on a thread of their own.
    pub fn start(
        mut rec: Recording,
        settings: SamplerSettings,
        limits: TrafficLimits,
        detect: DetectSettings,
        waker: Arc<dyn Fn() + Send + Sync>,
    ) -> std::io::Result<Self> {
        let range = rec.time_range().unwrap_or((0, 0));
        // The cursor starts at the first frame (a ring entry may come before it).
        let mut first_frame_ns = None;
        // A recording whose frames cannot be read starts at its first record; playing it
        // says why.
        let _ = rec.frames_between(range.0, range.1, |f| {
            first_frame_ns = Some(f.log_ns);
            false
        });
        let start_ns = first_frame_ns.unwrap_or(range.0);
        let events = Arc::new(Mutex::new(EventLog::new(usize::MAX)));
        let detail = settings.episodes.unwrap_or_default();
        let episodes = Arc::new(Mutex::new(EpisodeBook::new(rec.geometry.num_envs, 1)));
        lock(&episodes).note = Some("counting the episodes: waiting for the events".into());
        let events_stop = Arc::new(AtomicBool::new(false));
        let events_thread = {
            let (path, events, episodes, stop, waker) = (
                rec.path().to_path_buf(),
                Arc::clone(&events),
                Arc::clone(&episodes),
                Arc::clone(&events_stop),
                Arc::clone(&waker),
            );
            std::thread::Builder::new()
                .name("lrbc-player-events".into())
                .spawn(move || {
                    load_events(&path, &detect, &events, &stop, &*waker);
                    load_episodes(&path, detail, &episodes, &stop, &*waker);
                })?
        };
        let data = Arc::new(Mutex::new(SamplerData::empty(
            Arc::new(rec.geometry.clone()),
            rec.label(),
            1,
        )));
        let store = Arc::new(Mutex::new(TrafficStore::default()));
        let shared = Arc::new(PlayControl {
            state: Mutex::new(PlayState {
                range,
                cursor_ns: start_ns,
                playing: false,
                speed: 1.0,
                frame_seq: None,
                frame_time_ns: None,
                seek_to: Some(start_ns),
                step: 0,
                note: None,
                stop: false,
            }),
            wake: Condvar::new(),
        });
        let settings = Arc::new(Mutex::new((settings, limits)));
        let mut worker = PlayerThread {
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
            image_times: std::collections::VecDeque::new(),
        };
        let thread = std::thread::Builder::new()
            .name("lrbc-player".into())
            .spawn(move || worker.run())?;
        Ok(Self {
            data,
            store,
            events,
            episodes,
            shared,
            settings,
            thread: Some(thread),
            events_stop,
            events_thread: Some(events_thread),
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
        // Relaxed: a flag with no data behind it.
        self.events_stop.store(true, Ordering::Relaxed);
        for t in [self.thread.take(), self.events_thread.take()]
            .into_iter()
            .flatten()
        {
            // Only waits for the thread's end: a panic in it was printed when it happened.
            let _ = t.join();
        }
    }
}

/// Fills `events` with the recording's events: those its recorder wrote, else found
/// again from its frames (the note tells how far), unless `stop` is set first.
fn load_events(
    path: &std::path::Path,
    detect: &DetectSettings,
    events: &Mutex<EventLog>,
    stop: &AtomicBool,
    waker: &(dyn Fn() + Send + Sync),
) {
    let note = |text: Option<String>| {
        let mut log = lock(events);
        log.note = text;
        log.version += 1;
        drop(log);
        waker();
    };
    let mut rec = match Recording::open(path) {
        Ok(r) => r,
        Err(e) => return note(Some(format!("events not read: {e}"))),
    };
    let mut shown = -1i64;
    let progress = |share: f64| {
        let pct = (share * 100.0) as i64;
        if pct != shown {
            shown = pct;
            note(Some(format!(
                "finding the events again from the frames (a recording written without them): {pct} %"
            )));
        }
        // Relaxed: a flag with no data behind it.
        !stop.load(Ordering::Relaxed)
    };
    match super::events::recording_events(&mut rec, detect, progress) {
        Ok(found) => {
            let again = found.found_again;
            let filled = found.into_log(usize::MAX);
            let mut log = lock(events);
            *log = filled;
            log.note = again.then(|| {
                "found again from the recorded frames (the recording was written without events)".into()
            });
            log.version += 1;
            drop(log);
            waker();
        }
        // Relaxed: a flag with no data behind it.
        Err(_) if stop.load(Ordering::Relaxed) => {}
        Err(e) => note(Some(format!("events not read: {e}"))),
    }
}

/// Fills `episodes` with every episode of the recording, the `kept` most recent in full
/// (the note tells how far), unless `stop` is set first.
fn load_episodes(
    path: &std::path::Path,
    detail: BookDetail,
    episodes: &Mutex<EpisodeBook>,
    stop: &AtomicBool,
    waker: &(dyn Fn() + Send + Sync),
) {
    let note = |text: Option<String>| {
        let mut book = lock(episodes);
        book.note = text;
        book.version += 1;
        drop(book);
        waker();
    };
    let mut rec = match Recording::open(path) {
        Ok(r) => r,
        Err(e) => return note(Some(format!("episodes not counted: {e}"))),
    };
    let mut shown = -1i64;
    let progress = |share: f64| {
        let pct = (share * 100.0) as i64;
        if pct != shown {
            shown = pct;
            note(Some(format!("counting the episodes: {pct} %")));
        }
        // Relaxed: a flag with no data behind it.
        !stop.load(Ordering::Relaxed)
    };
    match super::episodes::recording_episodes(&mut rec, detail, progress) {
        Ok(book) => {
            *lock(episodes) = book;
            waker();
        }
        // Relaxed: a flag with no data behind it.
        Err(_) if stop.load(Ordering::Relaxed) => {}
        Err(e) => note(Some(format!("episodes not counted: {e}"))),
    }
}

/// What the player's thread holds: the open recording and what it fills.
struct PlayerThread {
    rec: Recording,
    data: Arc<Mutex<SamplerData>>,
    store: Arc<Mutex<TrafficStore>>,
    shared: Arc<PlayControl>,
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
    /// Log times of the newest image of the sets shown over the last second of the
    /// recording: their rate is the Cameras panel's FPS.
    image_times: std::collections::VecDeque<u64>,
}

impl PlayerThread {
    fn run(&mut self) {
        let mut tick = Instant::now();
        loop {
            let (seek, step, playing, speed, range) = {
                let mut s = lock(&self.shared.state);
                if s.stop {
                    return;
                }
                (
                    s.seek_to.take(),
                    std::mem::take(&mut s.step),
                    s.playing,
                    s.speed,
                    s.range,
                )
            };
            let now = Instant::now();
            let elapsed = now.duration_since(tick);
            tick = now;
            let mut cursor = self.shown.unwrap_or(range.0);
            if let Some(t) = seek {
                cursor = t;
            }
            if step != 0 {
                cursor = self.stepped(cursor, step, range).unwrap_or(cursor);
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
                if !still_playing {
                    s.playing = false;
                }
                if let Some(n) = error {
                    s.note = Some(n.to_string());
                } else if seek.is_some() || step != 0 {
                    s.note = None;
                }
                if let Some((seq, t)) = self.frame_now() {
                    s.frame_seq = Some(seq);
                    s.frame_time_ns = Some(t);
                }
                let idle = !s.playing && s.seek_to.is_none() && s.step == 0;
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
    fn stepped(&mut self, cursor: u64, step: i64, range: (u64, u64)) -> Result<u64, Damage> {
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
            // Back from the frame at the cursor (the cursor may be past it: at the end of
            // the file, after the messages that follow the last frame).
            if let Some(f) = self.rec.frame_at(t)? {
                t = f.log_ns;
            }
            for _ in 0..step.unsigned_abs() {
                match self.rec.frame_at(t.saturating_sub(1))? {
                    Some(f) if t > range.0 => t = f.log_ns,
                    _ => break,
                }
            }
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests;
