//! [`Viewer`]: a served run, live, into the structures the panels draw. A named thread
//! holds the connection: it subscribes to every channel the server advertises, feeds
//! each message to a [`MessageFeed`] (the recording's decoders: a served stream is a
//! recording that arrives live), takes the geometry from the `lrbc.segment` metadata
//! record, the state and rates from the server's status, and calls the server's control
//! services for the RPC panel. It reconnects with backoff; a new session id is a
//! restarted server, and the run's data start over.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, bounded};

mod calls;

use super::feed::{Fed, MessageFeed};
use super::link::{Link, LinkState};
use super::tap::{Tap, TapSender, Tapped, tap};
use super::wire::ServerMessage;
use super::{Connection, RemoteError};
use crate::protocol::{METADATA_TOPIC, SET_SERVICE, STATUS_TOPIC};
use lrbc::layout::{Geometry, LayoutChoice};
use lrbc::sync::lock;
use lrbc_live::controller::{CallError, ControlRequest, ControlState, ControlWorker};
use lrbc_live::sampler::{SamplerData, SamplerSettings};
use lrbc_live::traffic::{TrafficLimits, TrafficStore};
use lrbc_live::watch::{Report, State};
use lrbc_recording::format::{Counts, SEGMENT_METADATA, segment_from_metadata};

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The first wait before connecting again, doubled after each failure up to
/// [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How often the data the panels draw is brought up to date while messages come.
const FLUSH_EVERY: Duration = Duration::from_millis(15);

/// What the thread and the window share.
struct ViewerShared {
    link: Mutex<Link>,
    /// The run's geometry and how many times it changed.
    geometry: Mutex<(u64, Geometry)>,
    settings: Mutex<(SamplerSettings, TrafficLimits)>,
    /// A recorder's tap asked for, not yet taken by the thread.
    new_tap: Mutex<Option<TapSender>>,
    stop: AtomicBool,
}

/// A served run viewed live.
pub struct Viewer {
    pub data: Arc<Mutex<SamplerData>>,
    pub store: Arc<Mutex<TrafficStore>>,
    /// The events the server's detector found (`/lrbc/events`).
    pub events: Arc<Mutex<lrbc_live::detect::EventLog>>,
    shared: Arc<ViewerShared>,
    control: ControlWorker,
}

impl std::fmt::Debug for Viewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Viewer")
            .field("addr", &lock(&self.shared.link).addr)
            .finish_non_exhaustive()
    }
}

impl Viewer {
    /// Starts viewing `url` (`ws://HOST:PORT`); the connection is made on the thread, so
    /// this returns at once (an address that is not one is an error).
    pub fn start(
        url: &str,
        settings: SamplerSettings,
        limits: TrafficLimits,
        waker: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<Self, RemoteError> {
        let addr = super::client::host_port(url)?;
        let url = super::client::normalize(url)?;
        let feed = MessageFeed::new(Geometry::none(), addr.clone(), &settings);
        let shared = Arc::new(ViewerShared {
            link: Mutex::new(Link::new(addr.clone())),
            geometry: Mutex::new((0, Geometry::none())),
            settings: Mutex::new((settings.clone(), limits)),
            new_tap: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let (tx, rx) = bounded(16);
        let control_state = Arc::new(Mutex::new(ControlState::default()));
        let data = Arc::clone(&feed.data);
        let store = Arc::clone(&feed.store);
        let events = Arc::clone(&feed.events);
        let worker_addr = addr.clone();
        let mut worker = ViewerThread {
            url,
            addr,
            feed,
            shared: Arc::clone(&shared),
            requests: rx,
            control: Arc::clone(&control_state),
            waker,
            pending: BTreeMap::new(),
            latencies: Vec::new(),
            metadata: BTreeMap::new(),
            tap: None,
            settings: (settings, limits),
        };
        std::thread::Builder::new()
            .name("lrbc-remote".into())
            .spawn(move || worker.run())
            .map_err(|e| RemoteError::Connect {
                addr: worker_addr,
                cause: e.to_string(),
            })?;
        Ok(Self {
            data,
            store,
            events,
            shared,
            control: ControlWorker::elsewhere(tx, control_state),
        })
    }

    pub fn link(&self) -> Link {
        lock(&self.shared.link).clone()
    }

    /// The run's geometry (none until the server described it) and its generation,
    /// bumped each time it changes.
    pub fn geometry(&self) -> (u64, Geometry) {
        lock(&self.shared.geometry).clone()
    }

    /// The control requests' worker: its calls go to the server's services.
    pub fn control(&self) -> &ControlWorker {
        &self.control
    }

    pub fn settings(&self) -> SamplerSettings {
        lock(&self.shared.settings).0.clone()
    }

    pub fn set_settings(&self, s: SamplerSettings) {
        lock(&self.shared.settings).0 = s;
    }

    pub fn set_limits(&self, l: TrafficLimits) {
        lock(&self.shared.settings).1 = l;
    }

    /// The run's messages from now on, with its channels and metadata records, for a
    /// recorder (the window's flight recorder); a new tap replaces the previous one,
    /// and a new run (another description, a restarted server) ends it.
    pub fn tap(&self) -> Tap {
        let (tx, rx) = tap();
        *lock(&self.shared.new_tap) = Some(tx);
        rx
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        // The thread sees it within a read's timeout (or after a connection attempt)
        // and ends; it holds nothing but shared memory, so nobody waits for it.
        // Relaxed: a flag with no data behind it.
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

/// What the viewer's thread holds: the connection's address, the feed, the queues.
struct ViewerThread {
    /// `ws://HOST:PORT` or `wss://HOST:PORT`.
    url: String,
    addr: String,
    feed: MessageFeed,
    shared: Arc<ViewerShared>,
    requests: Receiver<ControlRequest>,
    control: Arc<Mutex<ControlState>>,
    waker: Arc<dyn Fn() + Send + Sync>,
    /// Service calls sent and not answered: call id → request.
    pending: BTreeMap<u32, ControlRequest>,
    /// Latencies of the current second (ns).
    latencies: Vec<u64>,
    /// The run's metadata records, by name, as the server sent them.
    metadata: BTreeMap<String, BTreeMap<String, String>>,
    /// The recorder's tap, when one records the run.
    tap: Option<TapSender>,
    /// The window's settings as of the last flush (taken once per flush, not per
    /// message).
    settings: (SamplerSettings, TrafficLimits),
}

/// Unix time now (ns).
fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl ViewerThread {
    fn stopped(&self) -> bool {
        // Relaxed: a flag with no data behind it (pairs with the store in Drop).
        self.shared.stop.load(Ordering::Relaxed)
    }

    fn run(&mut self) {
        let url = self.url.clone();
        let mut backoff = FIRST_BACKOFF;
        let mut session: Option<Option<String>> = None;
        let mut connected_before = false;
        while !self.stopped() {
            lock(&self.shared.link).state = LinkState::Connecting;
            (self.waker)();
            let error = match Connection::connect(&url, CONNECT_TIMEOUT) {
                Ok(c) => {
                    backoff = FIRST_BACKOFF;
                    {
                        let mut l = lock(&self.shared.link);
                        l.state = LinkState::Connected;
                        l.server_name.clone_from(&c.server_name);
                        l.session_id.clone_from(&c.session_id);
                        if connected_before {
                            l.reconnects += 1;
                        }
                    }
                    connected_before = true;
                    // Another session id: the server restarted, and what it serves
                    // now is another run (or the same one, described again).
                    if session.as_ref().is_some_and(|s| *s != c.session_id) {
                        lock(&self.shared.link).restarts += 1;
                        self.restart(Geometry::none());
                    }
                    session = Some(c.session_id.clone());
                    match self.connected(c) {
                        Ok(()) => return,
                        Err(e) => e.to_string(),
                    }
                }
                Err(e) => e.to_string(),
            };
            let since = Instant::now();
            lock(&self.shared.link).state = LinkState::Waiting {
                error,
                since,
                retry_in: backoff,
            };
            (self.waker)();
            while since.elapsed() < backoff && !self.stopped() {
                std::thread::sleep(Duration::from_millis(50));
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// A new run: the data start over, with `geometry`.
    fn restart(&mut self, geometry: Geometry) {
        self.feed.restart(geometry.clone(), self.addr.clone());
        // A recording holds one run: its recorder stops getting messages.
        self.tap = None;
        if geometry.size_bytes == 0 {
            self.metadata.clear();
        }
        let mut g = lock(&self.shared.geometry);
        g.0 += 1;
        g.1 = geometry;
        drop(g);
        (self.waker)();
    }

    /// Reads the connection until it ends (Err) or the viewer stops (Ok).
    fn connected(&mut self, mut c: Connection) -> Result<(), RemoteError> {
        let mut subscribed: HashSet<u64> = HashSet::new();
        let mut last_flush = Instant::now();
        let mut second = (Instant::now(), 0u64, 0u64, 0u64);
        let unix_minus_mono =
            i128::from(unix_now_ns()) - i128::from(lrbc::clock::monotonic_now_ns());
        // Requests made before the connection came are answered now.
        self.pending.clear();
        loop {
            if self.stopped() {
                c.close();
                return Ok(());
            }
            let new: Vec<u64> = (c.channels.keys().copied())
                .filter(|id| !subscribed.contains(id))
                .collect();
            if !new.is_empty() {
                c.subscribe(&new)?;
                subscribed.extend(new.iter().copied());
            }
            subscribed.retain(|id| c.channels.contains_key(id));
            self.take_tap(&c, &new);
            while let Ok(req) = self.requests.try_recv() {
                self.call(&mut c, req);
            }
            let msg = c.next(Duration::from_millis(10))?;
            if let Some(m) = msg {
                self.message(&c, m, unix_minus_mono);
            }
            let now = Instant::now();
            if now.duration_since(last_flush) >= FLUSH_EVERY {
                last_flush = now;
                self.settings = lock(&self.shared.settings).clone();
                let (settings, limits) = &self.settings;
                self.feed
                    .flush(settings, *limits, lrbc::clock::monotonic_now_ns());
                (self.waker)();
            }
            if now.duration_since(second.0) >= Duration::from_secs(1) {
                let secs = now.duration_since(second.0).as_secs_f64();
                let mut l = lock(&self.shared.link);
                l.bytes_per_sec = l.bytes.saturating_sub(second.1) as f64 / secs;
                l.messages_per_sec = l.messages.saturating_sub(second.2) as f64 / secs;
                l.frames_per_sec = l.frames.saturating_sub(second.3) as f64 / secs;
                second = (now, l.bytes, l.messages, l.frames);
                self.latencies.sort_unstable();
                let q =
                    |p: f64| lrbc_live::stats::quantile(&self.latencies, p).map(|n| n as f64 / 1e6);
                l.latency_ms = q(0.5).zip(q(0.99)).or(l.latency_ms);
                l.control = c.services.contains_key(SET_SERVICE);
                self.latencies.clear();
            }
        }
    }

    /// A new tap gets the channels and the metadata records; a tap gets the channels
    /// advertised since (`new`).
    fn take_tap(&mut self, c: &Connection, new: &[u64]) {
        if let Some(t) = lock(&self.shared.new_tap).take() {
            let mut ok = c
                .channels
                .values()
                .all(|ch| t.send(Tapped::Channel(ch.clone())));
            for (name, m) in &self.metadata {
                ok &= t.send(Tapped::Metadata(name.clone(), m.clone()));
            }
            self.tap = ok.then_some(t);
        } else if let Some(t) = &self.tap {
            let ok = (new.iter())
                .filter_map(|id| c.channels.get(id))
                .all(|ch| t.send(Tapped::Channel(ch.clone())));
            if !ok {
                self.tap = None;
            }
        }
    }

    fn message(&mut self, c: &Connection, m: ServerMessage, unix_minus_mono: i128) {
        match m {
            ServerMessage::MessageData {
                subscription,
                log_time,
                data,
            } => {
                let arrived = unix_now_ns();
                if self.latencies.len() < 100_000 {
                    self.latencies.push(arrived.saturating_sub(log_time));
                }
                {
                    let mut l = lock(&self.shared.link);
                    l.bytes += data.len() as u64;
                    l.messages += 1;
                }
                let Some((topic, channel, entry_json)) = c.channel_of(subscription).map(|ch| {
                    let entry_json = ch.schema_name == lrbc_recording::format::RING_ENTRY_SCHEMA;
                    (ch.topic.clone(), ch.id, entry_json)
                }) else {
                    return;
                };
                // The server's Unix time on this machine's clock of the panels.
                let local = (i128::from(log_time) - unix_minus_mono).max(0) as u64;
                if topic == METADATA_TOPIC {
                    self.metadata(&data);
                } else if topic == STATUS_TOPIC {
                    self.status(&data);
                } else {
                    let (settings, limits) = &self.settings;
                    // A ring entry as JSON: the exact bytes it carries (the tap records
                    // the message as it came).
                    let payload = entry_json
                        .then(|| lrbc_recording::format::ring_entry_payload(&data))
                        .flatten();
                    let bytes = payload.as_deref().unwrap_or(&data);
                    let fed = self.feed.message(&topic, local, bytes, settings, *limits);
                    let (frame, gap) = match fed {
                        Fed::Frame { gap, .. } => (1, gap),
                        Fed::Summary { gap } => (0, gap),
                        _ => (0, 0),
                    };
                    {
                        let mut l = lock(&self.shared.link);
                        l.frames_not_received += gap;
                        l.frames += frame;
                    }
                    if let Some(t) = &self.tap
                        && !t.send(Tapped::Message {
                            channel,
                            log_time: local,
                            data: Arc::from(data),
                            gap,
                        })
                    {
                        self.tap = None;
                    }
                }
            }
            ServerMessage::ServiceResponse { call_id, data, .. } => {
                if let Some(req) = self.pending.remove(&call_id) {
                    self.answered(req, Ok(data));
                }
            }
            ServerMessage::ServiceCallFailure { call_id, message } => {
                if let Some(req) = self.pending.remove(&call_id) {
                    self.answered(req, Err(CallError::Remote(message)));
                }
            }
            ServerMessage::Status { message, .. } => {
                lock(&self.shared.link).note = Some(message);
            }
            ServerMessage::AdvertiseServices(_) | ServerMessage::UnadvertiseServices(_) => {
                lock(&self.shared.link).control = c.services.contains_key(SET_SERVICE);
            }
            _ => {}
        }
    }

    /// A metadata record: the segment's description gives the geometry; a new one (the
    /// server re-attached to another segment) starts the data over.
    fn metadata(&mut self, json: &[u8]) {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(json) else {
            return;
        };
        let (Some(name), Some(m)) = (v["name"].as_str(), v["metadata"].as_object()) else {
            return;
        };
        let m: BTreeMap<String, String> = m
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect();
        if let Some(t) = &self.tap
            && !t.send(Tapped::Metadata(name.to_string(), m.clone()))
        {
            self.tap = None;
        }
        self.metadata.insert(name.to_string(), m.clone());
        if name != SEGMENT_METADATA {
            return;
        }
        let Some(g) = segment_from_metadata(&m)
            .and_then(|s| lrbc::layout::inspect(&s, LayoutChoice::Auto).ok())
        else {
            lock(&self.shared.link).note =
                Some("the server's description of the segment is not readable".into());
            return;
        };
        let current = self.feed.geometry();
        let same = current.header == g.header
            && current.size_bytes == g.size_bytes
            && current.regions == g.regions;
        if !same {
            self.restart(g);
        }
    }

    /// The server's status: the segment's state and rates, as `watch` reports them.
    fn status(&mut self, json: &[u8]) {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(json) else {
            return;
        };
        let state = v["state"].as_str().and_then(State::parse);
        let report = state.map(|state| Report {
            t_secs: 0.0,
            state,
            frame_seq: v["frame_seq"].as_u64().unwrap_or(0),
            action_seq: v["action_seq"].as_u64().unwrap_or(0),
            frame_hz: v["frame_hz"].as_f64(),
            action_hz: v["action_hz"].as_f64(),
            lag: v["lag"].as_i64().unwrap_or(0),
            server_pid: v["server_pid"].as_u64().unwrap_or(0) as u32,
            server_alive: state != State::EngineGone,
            note: v["note"].as_str().map(str::to_string),
        });
        {
            let mut d = lock(&self.feed.data);
            if let Some(r) = &report {
                d.counters.server_pid = r.server_pid;
            }
            d.counters.service_flags = v["service_flags"].as_u64().map(|f| f as u32);
            d.report = report;
        }
        // The server's detector: its frames checked and bad values counted. Counts of a
        // newer form than this build reads (or none) leave the figures as they were.
        match Counts::from_json(&v["capture"]) {
            Ok(c) => {
                let mut log = lock(&self.feed.events);
                let figures = detector_figures(&c, log.envs_with_bad_values());
                log.set_figures(&figures);
            }
            Err(e) => {
                lock(&self.shared.link).note =
                    Some(format!("the server's counts are not readable: {e}"));
            }
        }
        lock(&self.shared.link).served = Some(v);
    }
}

/// The figures of the server's detector beside its events, from its capture's counts:
/// the frames the engine published while the capture followed it (those it saw, missed
/// and let pass, as a recording's are read), those checked, and the bad values counted.
fn detector_figures(c: &Counts, envs_affected: u32) -> lrbc_live::detect::EventTotals {
    lrbc_live::detect::EventTotals {
        frames_seen: c.frames_published(),
        frames_flags_checked: c.frames_flags_checked,
        frames_checked: c.frames_checked,
        nan_values: c.nan_values,
        inf_values: c.inf_values,
        out_of_range_values: c.out_of_range_values,
        envs_affected,
        ..lrbc_live::detect::EventTotals::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frames_a_server_let_pass_count_among_those_its_detector_did_not_check() {
        // A busy server: its capture saw 60 frames and checked them, missed 10 and let
        // 30 pass.
        let c = Counts {
            frames_seen: 60,
            frames_missed: 10,
            frames_skipped: 30,
            frames_checked: 60,
            frames_flags_checked: 60,
            nan_values: 2,
            ..Counts::default()
        };
        let t = detector_figures(&c, 1);
        assert_eq!(t.frames_seen, 100);
        assert_eq!(t.checked_text(), "checked 60 of 100 frames");
        assert_eq!((t.nan_values, t.envs_affected), (2, 1));
    }
}
