//! What a source holds for the window. A live segment: its own read-only mapping, the
//! sampler, a traffic tap thread ([`lrbc_live::traffic::TrafficTap`]) and, once used, a
//! control worker thread ([`lrbc_live::controller::ControlWorker`]). A recording: a
//! [`lrbc_recording::replay::Player`] thread filling the same kinds of data as of its timeline.
//! A served run: a [`lrbc_remote::view::Viewer`] thread filling them as messages arrive.
//! The live view paused is [`Frozen`] (`frozen`): a copy of the sampler's history and the
//! traffic list, moved through as a recording is. Nothing here draws, and nothing here
//! blocks its caller: readers take short locks on data that background threads fill.

mod frozen;

pub use frozen::Frozen;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use lrbc::attach::{Attached, Target, attach};
use lrbc::clock::{Clock, MonotonicClock};
use lrbc::control::{lease_holder, unavailable_reason};
use lrbc::layout::{FieldKind, FieldSpec, FieldValue, Geometry, LayoutChoice};
use lrbc::sync::lock;
use lrbc_live::controller::ControlWorker;
use lrbc_live::detect::{DetectSettings, EventKind, EventLog, SettingsError};
use lrbc_live::episodes::EpisodeBook;
use lrbc_live::sampler::{Sampler, SamplerData, SamplerSettings, SamplerStats};
use lrbc_live::traffic::{OnTraffic, TrafficLimits, TrafficStore, TrafficTap};
use lrbc_recording::replay::{Player, Recording};
use lrbc_remote::view::{Link, Viewer};

/// Where the window's data comes from.
pub enum Source {
    /// The UI thread's own read-only mapping (live words, header panel).
    Live(Attached),
    /// A recording (see [`Session::open_recording`]).
    Recording(RecordingInfo),
    /// A served run (see [`Session::connect`]).
    Remote(RemoteInfo),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Live(a) => f.debug_tuple("Live").field(&a.label()).finish(),
            Self::Recording(r) => f.debug_tuple("Recording").field(&r.path).finish(),
            Self::Remote(r) => f.debug_tuple("Remote").field(&r.addr).finish(),
        }
    }
}

/// What the window shows of an open recording besides its data.
#[derive(Clone, Debug)]
pub struct RecordingInfo {
    pub path: PathBuf,
    pub label: String,
    pub geometry: Geometry,
    /// "not finished: …" when its recorder did not finish the file.
    pub unfinished: Option<String>,
    pub frame_count: Option<u64>,
    /// The segment's state changes the recorder saw (`/lrbc/state`), in order.
    pub state_changes: Vec<lrbc_recording::replay::StateChange>,
}

/// What the window shows of a served run besides its data.
#[derive(Clone, Debug)]
pub struct RemoteInfo {
    /// `HOST:PORT` of the server.
    pub addr: String,
    /// The run's geometry as the server described it (none until it did).
    pub geometry: Geometry,
    /// The viewer's geometry generation this copy is of.
    pub generation: u64,
}

/// What the Attach view shows of a served run, one row per server.
#[derive(Clone, Debug)]
pub struct NodeRow {
    pub addr: String,
    /// The segment's state as the server reports it.
    pub state: Option<lrbc_live::watch::State>,
    pub frame_hz: Option<f64>,
    /// The median reward over the envs of the newest frame.
    pub reward_median: Option<f32>,
    /// Events of NaN or Inf values the server's detector found.
    pub nonfinite: u64,
    pub envs: u32,
    pub link: Link,
}

/// The frames: a live sampler, a recording's player, or a served run's viewer.
#[derive(Debug)]
pub enum Frames {
    Live(Sampler),
    Recording(Player),
    Remote(Viewer),
}

impl Frames {
    pub fn lock(&self) -> MutexGuard<'_, SamplerData> {
        match self {
            Self::Live(s) => s.lock(),
            Self::Recording(p) => lock(&p.data),
            Self::Remote(v) => lock(&v.data),
        }
    }

    pub fn stats(&self) -> SamplerStats {
        match self {
            Self::Live(s) => s.stats(),
            Self::Recording(p) => lock(&p.data).stats,
            Self::Remote(v) => lock(&v.data).stats,
        }
    }

    pub fn settings(&self) -> SamplerSettings {
        match self {
            Self::Live(s) => s.settings(),
            Self::Recording(p) => p.settings(),
            Self::Remote(v) => v.settings(),
        }
    }

    /// New settings, all but the detector's (see [`Self::set_detect`]).
    pub fn set_settings(&self, settings: SamplerSettings) {
        match self {
            Self::Live(s) => s.set_settings(settings),
            Self::Recording(p) => p.set_settings(settings),
            Self::Remote(v) => v.set_settings(settings),
        }
    }

    /// What the live detector looks for. Err: these settings cannot be used on this
    /// segment (the detector keeps its own). A recording's and a served run's events
    /// come with them: nothing to change.
    pub fn set_detect(&self, detect: DetectSettings) -> Result<(), SettingsError> {
        match self {
            Self::Live(s) => s.set_detect(detect),
            Self::Recording(_) | Self::Remote(_) => Ok(()),
        }
    }

    /// Every env's episodes: the live accountant's, a recording's (none for a served
    /// run).
    pub fn episodes(&self) -> Option<Arc<Mutex<EpisodeBook>>> {
        match self {
            Self::Live(s) => s.episodes().cloned(),
            Self::Recording(p) => Some(Arc::clone(&p.episodes)),
            Self::Remote(_) => None,
        }
    }

    /// The events found: the live detector's, a recording's, a served run's.
    pub fn events(&self) -> Option<Arc<Mutex<EventLog>>> {
        match self {
            Self::Live(s) => s.events().cloned(),
            Self::Recording(p) => Some(Arc::clone(&p.events)),
            Self::Remote(v) => Some(Arc::clone(&v.events)),
        }
    }

    /// The sampler's threads that have ended (none for a recording or a served run).
    pub fn ended_threads(&self) -> Vec<String> {
        match self {
            Self::Live(s) => s.ended_threads(),
            Self::Recording(_) | Self::Remote(_) => Vec::new(),
        }
    }
}

/// The ring traffic: a live tap, or the store a recording's player or a served run's
/// viewer fills.
#[derive(Debug)]
pub enum Taps {
    Live(TrafficTap),
    Filled(Arc<Mutex<TrafficStore>>),
}

impl Taps {
    pub fn lock(&self) -> MutexGuard<'_, TrafficStore> {
        match self {
            Self::Live(t) => t.lock(),
            Self::Filled(s) => lock(s),
        }
    }
}

/// Whether the sampler's follower is yielding to a busy machine: the one reading of the
/// machine's load that the session's other threads (the traffic tap) go by.
fn yielding_of(sampler: &Sampler) -> Arc<dyn Fn() -> bool + Send + Sync> {
    let data = Arc::clone(sampler.data());
    Arc::new(move || lock(&data).yielding)
}

/// The sampler's detector is told of the rings' faults by the traffic tap.
fn faults_to(sampler: &Sampler) -> Option<OnTraffic> {
    let feed = sampler.diagnosis()?.feed();
    Some(Box::new(move |e, now| feed.traffic(e, now)))
}

/// Everything the window holds for one source.
pub struct Session {
    /// The segment attached to; a recording's file as a path.
    pub target: Target,
    pub choice: LayoutChoice,
    pub source: Source,
    pub sampler: Frames,
    pub traffic: Taps,
    /// What the traffic tap may keep; changed with the memory budget.
    pub traffic_limits: Arc<Mutex<TrafficLimits>>,
    pub control: Option<ControlWorker>,
    /// Why the attached segment's control channel cannot be used, as found at attach
    /// (see [`Self::control_unavailable`], which also answers for a served run).
    control_refused: Option<String>,
    /// The sampler generation this session's mapping and taps belong to.
    pub generation: u64,
    /// The live view paused: the panels draw this copy of the history while the
    /// sampler goes on.
    pub paused: Option<Frozen>,
    waker: Arc<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Attaches and starts the background threads.
    pub fn start(
        target: Target,
        choice: LayoutChoice,
        settings: SamplerSettings,
        limits: TrafficLimits,
        waker: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<Self, String> {
        Self::start_with_clock(
            target,
            choice,
            settings,
            limits,
            waker,
            Arc::new(MonotonicClock),
        )
    }

    /// [`Session::start`], the sampler on `clock`: it stamps the frames (the times of the
    /// plots, events and episodes) when no follower of this process follows the segment
    /// yet, and decides the segment's state and rates.
    pub fn start_with_clock(
        target: Target,
        choice: LayoutChoice,
        settings: SamplerSettings,
        limits: TrafficLimits,
        waker: Arc<dyn Fn() + Send + Sync>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, String> {
        let attached = attach(&target, choice).map_err(|e| e.to_string())?;
        // The sampler and taps map the segment themselves (one mapping per thread).
        let target = match (&target, &attached.name) {
            (Target::Pid(_), Some(name)) => Target::Shm(name.clone()),
            _ => target,
        };
        let sampler_attach = attach(&target, choice).map_err(|e| e.to_string())?;
        let w = Arc::clone(&waker);
        let sampler = Sampler::start(sampler_attach, settings, clock, Box::new(move || w()), 60.0)
            .map_err(|e| e.to_string())?;
        let traffic_limits = Arc::new(Mutex::new(limits));
        let traffic = TrafficTap::start(
            &target,
            choice,
            Arc::clone(&traffic_limits),
            Arc::clone(&waker),
            yielding_of(&sampler),
            faults_to(&sampler),
        )
        .map_err(|e| e.to_string())?;
        let control_refused = unavailable_reason(&attached);
        Ok(Self {
            target,
            choice,
            source: Source::Live(attached),
            sampler: Frames::Live(sampler),
            traffic: Taps::Live(traffic),
            traffic_limits,
            control: None,
            control_refused,
            generation: 0,
            paused: None,
            waker,
        })
    }

    /// Opens a recording and starts its player, the cursor at its start.
    pub fn open_recording(
        path: &Path,
        settings: SamplerSettings,
        limits: TrafficLimits,
        waker: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<Self, String> {
        let mut rec = Recording::open(path).map_err(|e| e.to_string())?;
        let state_changes = rec.state_changes().map_err(|e| e.to_string())?;
        let info = RecordingInfo {
            path: path.to_path_buf(),
            label: rec.label(),
            geometry: rec.geometry.clone(),
            unfinished: rec.unfinished_note(),
            frame_count: rec.frame_count,
            state_changes,
        };
        let detect = settings.detect.clone().map(|(d, _)| d).unwrap_or_default();
        let player = Player::start(rec, settings, limits, detect, Arc::clone(&waker))
            .map_err(|e| e.to_string())?;
        let store = Arc::clone(&player.store);
        Ok(Self {
            target: Target::Path(path.to_path_buf()),
            choice: LayoutChoice::Auto,
            source: Source::Recording(info),
            sampler: Frames::Recording(player),
            traffic: Taps::Filled(store),
            traffic_limits: Arc::new(Mutex::new(limits)),
            control: None,
            control_refused: Some(
                "a recording: control needs a live segment (attach to one)".into(),
            ),
            generation: 0,
            paused: None,
            waker,
        })
    }

    /// Views the run served at `url` (`ws://HOST:PORT`). Returns at once: the
    /// connection is made, and made again when it ends, on the viewer's thread.
    pub fn connect(
        url: &str,
        settings: SamplerSettings,
        limits: TrafficLimits,
        waker: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<Self, String> {
        let viewer =
            Viewer::start(url, settings, limits, Arc::clone(&waker)).map_err(|e| e.to_string())?;
        let addr = viewer.link().addr;
        let store = Arc::clone(&viewer.store);
        Ok(Self {
            target: Target::Shm(addr.clone()),
            choice: LayoutChoice::Auto,
            source: Source::Remote(RemoteInfo {
                addr,
                geometry: Geometry::none(),
                generation: 0,
            }),
            sampler: Frames::Remote(viewer),
            traffic: Taps::Filled(store),
            traffic_limits: Arc::new(Mutex::new(limits)),
            control: None,
            control_refused: None,
            generation: 0,
            paused: None,
            waker,
        })
    }

    /// The served run's viewer and what the window shows of it, when the source is one.
    pub fn remote(&self) -> Option<(&RemoteInfo, &Viewer)> {
        match (&self.source, &self.sampler) {
            (Source::Remote(r), Frames::Remote(v)) => Some((r, v)),
            _ => None,
        }
    }

    /// One row of the Attach view's servers, when the source is a served run.
    pub fn node_row(&self) -> Option<NodeRow> {
        let (info, viewer) = self.remote()?;
        let link = viewer.link();
        let nonfinite = lock(&viewer.events).totals().of(EventKind::Nonfinite);
        let d = lock(&viewer.data);
        Some(NodeRow {
            addr: info.addr.clone(),
            state: d.report.as_ref().map(|r| r.state),
            frame_hz: d.report.as_ref().and_then(|r| r.frame_hz),
            reward_median: d.frames.back().map(|f| f.reward_p50),
            nonfinite,
            // The viewer's: a server in the background is not watched by the window.
            envs: viewer.geometry().1.num_envs,
            link,
        })
    }

    /// The events found in the source (none while a live sampler runs no detector).
    pub fn events(&self) -> Option<Arc<Mutex<EventLog>>> {
        self.sampler.events()
    }

    /// Every env's episodes (none for a served run).
    pub fn episodes(&self) -> Option<Arc<Mutex<EpisodeBook>>> {
        self.sampler.episodes()
    }

    /// The link to the server, when the source is a served run.
    pub fn link(&self) -> Option<Link> {
        self.remote().map(|(_, v)| v.link())
    }

    /// The data the panels draw: the sampler's, the player's, or the paused view's.
    pub fn data(&self) -> MutexGuard<'_, SamplerData> {
        match &self.paused {
            Some(f) => lock(&f.view),
            None => self.sampler.lock(),
        }
    }

    /// The traffic list the panels draw.
    pub fn store(&self) -> MutexGuard<'_, TrafficStore> {
        match &self.paused {
            Some(f) => lock(&f.view_store),
            None => self.traffic.lock(),
        }
    }

    /// Pauses the live view (a copy of the history, the cursor at its newest frame);
    /// false for a recording or a view already paused.
    pub fn pause_live(&mut self) -> bool {
        if self.recording().is_some() || self.paused.is_some() {
            return false;
        }
        let frozen = {
            let d = self.sampler.lock();
            let s = self.traffic.lock();
            Frozen::freeze(&d, &s)
        };
        self.paused = Some(frozen);
        true
    }

    /// Goes back to the live data.
    pub fn resume_live(&mut self) {
        self.paused = None;
    }

    /// The segment's name or path, or the recording's file name.
    pub fn label(&self) -> String {
        match &self.source {
            Source::Live(a) => a.label(),
            Source::Recording(r) => r.label.clone(),
            Source::Remote(r) => r.addr.clone(),
        }
    }

    pub fn geometry(&self) -> &Geometry {
        match &self.source {
            Source::Live(a) => &a.geometry,
            Source::Recording(r) => &r.geometry,
            Source::Remote(r) => &r.geometry,
        }
    }

    /// The live mapping, when the source is a segment.
    pub fn live(&self) -> Option<&Attached> {
        match &self.source {
            Source::Live(a) => Some(a),
            Source::Recording(_) | Source::Remote(_) => None,
        }
    }

    /// The recording and its player, when the source is one.
    pub fn recording(&self) -> Option<(&RecordingInfo, &Player)> {
        match (&self.source, &self.sampler) {
            (Source::Recording(r), Frames::Recording(p)) => Some((r, p)),
            _ => None,
        }
    }

    /// `frame_seq` and `action_seq` now: loaded live, or of the recording's current
    /// frame.
    pub fn seqs(&self) -> (u64, u64) {
        if let Some(f) = &self.paused {
            let c = lock(&f.view).counters;
            return (c.frame_seq, c.action_seq);
        }
        match &self.source {
            Source::Live(a) => {
                let c = a.geometry.counters;
                (
                    a.segment.load_u64(c.frame_seq).unwrap_or(0),
                    a.segment.load_u64(c.action_seq).unwrap_or(0),
                )
            }
            Source::Recording(_) | Source::Remote(_) => {
                let d = self.sampler.lock();
                (d.counters.frame_seq, d.counters.action_seq)
            }
        }
    }

    /// The header's fields: atomic words loaded live; for a recording, the header as
    /// recorded with `frame_seq`, `action_seq` and `frame_time_ns` of the current frame;
    /// for the live view paused, the header at attach with the cursor's counters.
    pub fn header_values(&self) -> Vec<(&'static FieldSpec, FieldValue)> {
        let (g, c) = match (&self.source, &self.paused) {
            (Source::Live(a), None) => return a.header_values(),
            (Source::Live(a), Some(f)) => (&a.geometry, lock(&f.view).counters),
            (Source::Recording(r), _) => (&r.geometry, self.sampler.lock().counters),
            (Source::Remote(r), _) => (&r.geometry, self.sampler.lock().counters),
        };
        g.fields()
            .filter_map(|f| {
                let copy = f.decode(&g.header)?;
                let now = match f.name {
                    "frame_seq" => Some(c.frame_seq),
                    "action_seq" => Some(c.action_seq),
                    "frame_time_ns" => c.frame_time_ns,
                    _ => None,
                };
                let v = match (now, f.kind) {
                    (Some(n), FieldKind::I64) => FieldValue::Signed(n as i64),
                    (Some(n), _) => FieldValue::Unsigned(n),
                    (None, _) => copy,
                };
                Some((f, v))
            })
            .collect()
    }

    /// Applies a new memory budget to the sampler's settings and the traffic tap.
    pub fn set_limits(&self, settings: SamplerSettings, limits: TrafficLimits) {
        self.sampler.set_settings(settings);
        *lock(&self.traffic_limits) = limits;
        match &self.sampler {
            Frames::Recording(p) => p.set_limits(limits),
            Frames::Remote(v) => v.set_limits(limits),
            Frames::Live(_) => {}
        }
    }

    /// Bytes in use against the budget (textures of the window not included).
    pub fn memory(&self) -> lrbc_live::memory::MemoryUse {
        let (histories, camera_images) = self.sampler.lock().memory();
        let (traffic, streamed_frames) = self.traffic.lock().memory();
        let episodes = self.sampler.episodes().map_or(0, |b| lock(&b).heap_bytes());
        lrbc_live::memory::MemoryUse {
            histories,
            episodes,
            traffic,
            camera_images,
            streamed_frames,
        }
    }

    /// Why the control channel is unavailable now, if it is (a served run: when its
    /// server does not offer control).
    pub fn control_unavailable(&self) -> Option<String> {
        match self.link() {
            Some(l) if !l.control => Some(format!(
                "{} does not offer control (serve it with --allow-control)",
                l.addr
            )),
            Some(_) => None,
            None => self.control_refused.clone(),
        }
    }

    /// The control worker, started on first use.
    pub fn control(&mut self) -> Result<&ControlWorker, String> {
        if let Some(reason) = self.control_unavailable() {
            return Err(reason);
        }
        if let Frames::Remote(v) = &self.sampler {
            return Ok(v.control());
        }
        if self.control.is_none() {
            self.control = Some(
                ControlWorker::start(&self.target, self.choice, Arc::clone(&self.waker))
                    .map_err(|e| e.to_string())?,
            );
        }
        self.control
            .as_ref()
            .ok_or_else(|| "no control worker".to_string())
    }

    /// The control requests' state: the worker's, once started; a served run's always.
    pub fn control_state(&self) -> Option<lrbc_live::controller::ControlState> {
        match &self.sampler {
            Frames::Remote(v) => Some(v.control().state()),
            _ => self.control.as_ref().map(ControlWorker::state),
        }
    }

    /// The pid in the control lease word now.
    pub fn lease_holder(&self) -> Option<u32> {
        self.live().and_then(lease_holder)
    }

    /// Takes up a re-attachment of the sampler: maps the new segment for the UI and
    /// restarts the taps. Returns true when it did.
    pub fn adopt_replacement(&mut self) -> bool {
        if self.recording().is_some() {
            return false;
        }
        if let (Source::Remote(r), Frames::Remote(v)) = (&mut self.source, &self.sampler) {
            let (generation, geometry) = v.geometry();
            if generation == r.generation {
                return false;
            }
            r.generation = generation;
            r.geometry = geometry;
            self.paused = None;
            return true;
        }
        let generation = self.sampler.lock().generation;
        if generation == self.generation {
            return false;
        }
        self.generation = generation;
        if let Ok(a) = attach(&self.target, self.choice) {
            self.control_refused = unavailable_reason(&a);
            self.source = Source::Live(a);
        }
        self.control = None;
        let Frames::Live(sampler) = &self.sampler else {
            return true;
        };
        if let Ok(t) = TrafficTap::start(
            &self.target,
            self.choice,
            Arc::clone(&self.traffic_limits),
            Arc::clone(&self.waker),
            yielding_of(sampler),
            faults_to(sampler),
        ) {
            self.traffic = Taps::Live(t);
        }
        true
    }
}
