//! What the window holds while attached: the UI's own read-only mapping, the sampler,
//! a traffic tap thread and a control worker thread. Nothing here blocks the UI thread:
//! readers take short locks on data that background threads fill.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded};

use crate::attach::{Attached, Target, attach};
use crate::clock::MonotonicClock;
use crate::control::{Lease, lease_holder, unavailable_reason};
use crate::layout::{LayoutChoice, RegionKind};
use crate::rpc::tree::NodeValue;
use crate::sampler::{Sampler, SamplerSettings};
use crate::segment::monotonic_now_ns;
use crate::traffic::{FollowPace, Record, RingSelection, Totals, Traffic, TrafficEvent};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A row of the traffic list: a record, or a loss, malformed entry or unanswered
/// request.
#[derive(Clone, Debug)]
pub enum TrafficRow {
    Record(Box<Record>),
    Lost {
        seen_ns: u64,
        ring: RegionKind,
        lost_bytes: u64,
        lost_entries: Option<u64>,
    },
    Malformed {
        seen_ns: u64,
        ring: RegionKind,
        position: u64,
        error: String,
        raw: Vec<u8>,
    },
    Unanswered {
        seen_ns: u64,
        ring: RegionKind,
        correlation_id: u64,
        method: String,
        waited_ns: u64,
    },
}

impl TrafficRow {
    pub fn seen_ns(&self) -> u64 {
        match self {
            Self::Record(r) => r.seen_ns,
            Self::Lost { seen_ns, .. }
            | Self::Malformed { seen_ns, .. }
            | Self::Unanswered { seen_ns, .. } => *seen_ns,
        }
    }

    fn payload_bytes(&self) -> usize {
        match self {
            Self::Record(r) => r.payload.len() + 256,
            Self::Malformed { raw, .. } => raw.len() + 128,
            _ => 64,
        }
    }
}

/// What the traffic tap has collected.
#[derive(Debug, Default)]
pub struct TrafficStore {
    pub rows: VecDeque<TrafficRow>,
    /// The newest image frame of each stream seen in traffic (camera, viewport).
    pub streams: std::collections::BTreeMap<String, StreamedImage>,
    /// Absolute index of `rows[0]` (rows dropped from the front so far).
    pub first_index: u64,
    pub totals: Vec<(RegionKind, Totals)>,
    bytes_held: usize,
    pub error: Option<String>,
}

impl TrafficStore {
    pub fn total_rows(&self) -> u64 {
        self.first_index + self.rows.len() as u64
    }

    pub fn get(&self, index: u64) -> Option<&TrafficRow> {
        index
            .checked_sub(self.first_index)
            .and_then(|i| self.rows.get(usize::try_from(i).ok()?))
    }

    /// The row of the record with this record index.
    pub fn find_record(&self, record_index: u64) -> Option<u64> {
        // Records are in order: binary search among them.
        let pos = self.rows.partition_point(|r| match r {
            TrafficRow::Record(rec) => rec.index < record_index,
            _ => true,
        });
        match self.rows.get(pos) {
            Some(TrafficRow::Record(rec)) if rec.index == record_index => {
                Some(self.first_index + pos as u64)
            }
            _ => self
                .rows
                .iter()
                .position(|r| matches!(r, TrafficRow::Record(rec) if rec.index == record_index))
                .map(|p| self.first_index + p as u64),
        }
    }
}

/// The image streams kept (their newest frame each); frames of further streams stay in
/// the traffic list only.
const MAX_STREAMS: usize = 64;

/// The newest frame of one image stream seen in the command rings.
#[derive(Clone, Debug)]
pub struct StreamedImage {
    /// The record that carried it.
    pub record_index: u64,
    /// Frames of this stream seen since attach.
    pub frames: u64,
    /// The whole envelope (decoded by the window when it shows the image).
    pub envelope: Arc<[u8]>,
}

/// Limits of what the traffic list keeps.
#[derive(Clone, Copy, Debug)]
pub struct TrafficLimits {
    pub max_rows: usize,
    pub max_bytes: usize,
}

impl Default for TrafficLimits {
    fn default() -> Self {
        Self {
            max_rows: 50_000,
            max_bytes: 64 << 20,
        }
    }
}

/// A thread that follows the rings and fills a [`TrafficStore`].
#[derive(Debug)]
pub struct TrafficTap {
    pub store: Arc<Mutex<TrafficStore>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TrafficTap {
    pub fn start(
        target: &Target,
        choice: LayoutChoice,
        limits: TrafficLimits,
        waker: Arc<dyn Fn() + Send + Sync>,
    ) -> std::io::Result<Self> {
        let store = Arc::new(Mutex::new(TrafficStore::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (target, s, st) = (target.clone(), Arc::clone(&store), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("lrbc-traffic".into())
            .spawn(move || {
                // An observer: it runs in the time the engine and trainer leave over.
                crate::segment::lower_thread_priority(19);
                let a = match attach(&target, choice) {
                    Ok(a) => a,
                    Err(e) => {
                        lock(&s).error = Some(e.to_string());
                        return;
                    }
                };
                let mut traffic = Traffic::new(&a, RingSelection::All);
                let mut events = Vec::new();
                let mut idle = 0u32;
                let mut pace = FollowPace::default();
                // Relaxed: a flag with no data behind it.
                while !st.load(Ordering::Relaxed) {
                    events.clear();
                    let now = monotonic_now_ns();
                    traffic.poll(&a.segment, now, 4096, &mut events);
                    if events.is_empty() {
                        idle = idle.saturating_add(1);
                        std::thread::sleep(pace.after_poll(false));
                        if idle.is_multiple_of(100) {
                            lock(&s).totals = traffic.totals();
                        }
                        continue;
                    }
                    idle = 0;
                    // Entries came: poll again at once, and nap short once quiet.
                    let _ = pace.after_poll(true);
                    let mut store = lock(&s);
                    for e in events.drain(..) {
                        let row = match e {
                            TrafficEvent::Record(r) => {
                                if r.method.ends_with("Frame")
                                    && let Some(source) =
                                        crate::rpc::image::image_source(&r.payload)
                                    && (store.streams.len() < MAX_STREAMS
                                        || store.streams.contains_key(&source))
                                {
                                    let s = store.streams.entry(source).or_insert_with(|| {
                                        StreamedImage {
                                            record_index: r.index,
                                            frames: 0,
                                            envelope: Arc::from(&[][..]),
                                        }
                                    });
                                    s.record_index = r.index;
                                    s.frames += 1;
                                    s.envelope = Arc::from(&r.payload[..]);
                                }
                                TrafficRow::Record(r)
                            }
                            TrafficEvent::Answered { request, response } => {
                                let first = store.first_index;
                                if let Some(i) = store.find_record(request)
                                    && let Some(TrafficRow::Record(r)) =
                                        store.rows.get_mut((i - first) as usize)
                                {
                                    r.partner = Some(response);
                                    r.pairing = crate::traffic::Pairing::Answered;
                                }
                                continue;
                            }
                            TrafficEvent::Lost {
                                ring,
                                lost_bytes,
                                lost_entries,
                            } => TrafficRow::Lost {
                                seen_ns: now,
                                ring,
                                lost_bytes,
                                lost_entries,
                            },
                            TrafficEvent::Malformed {
                                ring,
                                position,
                                error,
                                raw,
                            } => TrafficRow::Malformed {
                                seen_ns: now,
                                ring,
                                position,
                                error,
                                raw,
                            },
                            TrafficEvent::Unanswered {
                                ring,
                                correlation_id,
                                method,
                                waited_ns,
                                request,
                            } => {
                                let first = store.first_index;
                                if let Some(i) = store.find_record(request)
                                    && let Some(TrafficRow::Record(r)) =
                                        store.rows.get_mut((i - first) as usize)
                                {
                                    r.pairing = crate::traffic::Pairing::Unanswered;
                                }
                                TrafficRow::Unanswered {
                                    seen_ns: now,
                                    ring,
                                    correlation_id,
                                    method,
                                    waited_ns,
                                }
                            }
                        };
                        store.bytes_held += row.payload_bytes();
                        store.rows.push_back(row);
                        while store.rows.len() > limits.max_rows
                            || store.bytes_held > limits.max_bytes
                        {
                            let Some(old) = store.rows.pop_front() else {
                                break;
                            };
                            store.bytes_held = store.bytes_held.saturating_sub(old.payload_bytes());
                            store.first_index += 1;
                        }
                    }
                    store.totals = traffic.totals();
                    drop(store);
                    waker();
                }
            })?;
        Ok(Self {
            store,
            stop,
            thread: Some(thread),
        })
    }

    pub fn lock(&self) -> MutexGuard<'_, TrafficStore> {
        lock(&self.store)
    }
}

impl Drop for TrafficTap {
    fn drop(&mut self) {
        // Relaxed: a flag with no data behind it.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A request for the control worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlRequest {
    SetEnabled { service: u8, enabled: bool },
    Status,
}

/// One service as `GetServiceStatus` reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRow {
    pub service: String,
    pub enabled: bool,
    pub requests: u64,
    pub errors: u64,
}

/// What the control worker reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlState {
    pub busy: bool,
    /// The last response, one line.
    pub last: Option<String>,
    pub last_error: Option<String>,
    pub statuses: Vec<ServiceRow>,
    /// This process holds the lease.
    pub holding: bool,
}

/// A thread that owns the control lease (claimed on first use) and makes calls
/// without blocking the UI. Dropping it releases the lease.
#[derive(Debug)]
pub struct ControlWorker {
    requests: Sender<ControlRequest>,
    pub state: Arc<Mutex<ControlState>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControlWorker {
    pub fn start(
        target: &Target,
        choice: LayoutChoice,
        waker: Arc<dyn Fn() + Send + Sync>,
    ) -> std::io::Result<Self> {
        let (tx, rx): (Sender<ControlRequest>, Receiver<ControlRequest>) = bounded(16);
        let state = Arc::new(Mutex::new(ControlState::default()));
        let (target, st) = (target.clone(), Arc::clone(&state));
        let thread = std::thread::Builder::new()
            .name("lrbc-control".into())
            .spawn(move || {
                let mut attached: Option<Attached> = None;
                let mut lease: Option<Lease> = None;
                loop {
                    let req = match rx.recv_timeout(Duration::from_millis(200)) {
                        Ok(r) => r,
                        Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
                        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
                    };
                    lock(&st).busy = true;
                    waker();
                    let result = (|| -> Result<String, String> {
                        if attached.is_none() {
                            attached = Some(attach(&target, choice).map_err(|e| e.to_string())?);
                        }
                        let a = attached.as_ref().ok_or("not attached")?;
                        if lease.is_none() {
                            lease = Some(Lease::claim(a).map_err(|e| e.to_string())?);
                        }
                        let l = lease.as_mut().ok_or("no lease")?;
                        let timeout = Duration::from_secs(3);
                        let (resp, bytes) = match req {
                            ControlRequest::SetEnabled { service, enabled } => {
                                l.set_service_enabled(service, enabled, timeout, None)
                            }
                            ControlRequest::Status => l.service_status(timeout, None),
                        }
                        .map_err(|e| e.to_string())?;
                        if let Some(e) = &resp.error {
                            return Err(format!(
                                "{}: the engine refused: {e}",
                                resp.method_label()
                            ));
                        }
                        let fields = resp.tree.to_json(&bytes);
                        if let Some(list) =
                            fields["payload"]["GetServiceStatusResp"]["services"].as_array()
                        {
                            lock(&st).statuses = list
                                .iter()
                                .map(|s| ServiceRow {
                                    service: s["service"].as_str().unwrap_or("?").to_string(),
                                    enabled: s["enabled"].as_bool().unwrap_or(false),
                                    requests: s["requests"].as_u64().unwrap_or(0),
                                    errors: s["errors"].as_u64().unwrap_or(0),
                                })
                                .collect();
                        }
                        let enabled = resp
                            .tree
                            .nodes
                            .iter()
                            .find(|n| n.name == "enabled")
                            .map(|n| n.value == NodeValue::Bool(true));
                        Ok(match (req, enabled) {
                            (ControlRequest::SetEnabled { service, .. }, Some(e)) => format!(
                                "SetServiceEnabled: {} is now {}",
                                crate::control::service_label(service),
                                if e { "enabled" } else { "disabled" }
                            ),
                            _ => format!(
                                "{}: {}",
                                resp.method_label(),
                                resp.tree.summary(&bytes, 0, 160)
                            ),
                        })
                    })();
                    let mut s = lock(&st);
                    s.busy = false;
                    s.holding = lease.is_some();
                    match result {
                        Ok(line) => {
                            s.last = Some(line);
                            s.last_error = None;
                        }
                        Err(e) => s.last_error = Some(e),
                    }
                    drop(s);
                    waker();
                }
                // The lease is released here, when `lease` drops.
            })?;
        Ok(Self {
            requests: tx,
            state,
            thread: Some(thread),
        })
    }

    /// Queues a request; false when the queue is full.
    pub fn send(&self, r: ControlRequest) -> bool {
        self.requests.try_send(r).is_ok()
    }

    pub fn state(&self) -> ControlState {
        lock(&self.state).clone()
    }
}

impl Drop for ControlWorker {
    fn drop(&mut self) {
        // Closing the channel ends the thread, which releases the lease.
        let (dead, _) = bounded(1);
        self.requests = dead;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Everything the window holds for one attached segment.
pub struct Session {
    pub target: Target,
    pub choice: LayoutChoice,
    /// The UI thread's own read-only mapping (live words, header panel).
    pub attached: Attached,
    pub sampler: Sampler,
    pub traffic: TrafficTap,
    pub control: Option<ControlWorker>,
    /// Why the control channel is unavailable, if it is.
    pub control_unavailable: Option<String>,
    /// The sampler generation this session's mapping and taps belong to.
    pub generation: u64,
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
        waker: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<Self, String> {
        let attached = attach(&target, choice).map_err(|e| e.to_string())?;
        // The sampler and taps map the segment themselves (one mapping per thread).
        let target = match (&target, &attached.name) {
            (Target::Pid(_), Some(name)) => Target::Shm(name.clone()),
            _ => target,
        };
        let sampler_attach = attach(&target, choice).map_err(|e| e.to_string())?;
        let w = Arc::clone(&waker);
        let sampler = Sampler::start(
            sampler_attach,
            settings,
            MonotonicClock,
            Box::new(move || w()),
            60.0,
        )
        .map_err(|e| e.to_string())?;
        let traffic = TrafficTap::start(
            &target,
            choice,
            TrafficLimits::default(),
            Arc::clone(&waker),
        )
        .map_err(|e| e.to_string())?;
        let control_unavailable = unavailable_reason(&attached);
        Ok(Self {
            target,
            choice,
            attached,
            sampler,
            traffic,
            control: None,
            control_unavailable,
            generation: 0,
            waker,
        })
    }

    /// The control worker, started on first use.
    pub fn control(&mut self) -> Result<&ControlWorker, String> {
        if let Some(reason) = &self.control_unavailable {
            return Err(reason.clone());
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

    /// The pid in the control lease word now.
    pub fn lease_holder(&self) -> Option<u32> {
        lease_holder(&self.attached)
    }

    /// Follows a re-attachment of the sampler: maps the new segment for the UI and
    /// restarts the taps. Returns true when it did.
    pub fn follow_replacement(&mut self) -> bool {
        let generation = self.sampler.lock().generation;
        if generation == self.generation {
            return false;
        }
        self.generation = generation;
        if let Ok(a) = attach(&self.target, self.choice) {
            self.control_unavailable = unavailable_reason(&a);
            self.attached = a;
        }
        self.control = None;
        if let Ok(t) = TrafficTap::start(
            &self.target,
            self.choice,
            TrafficLimits::default(),
            Arc::clone(&self.waker),
        ) {
            self.traffic = t;
        }
        true
    }
}

/// Drains a receiver without blocking.
pub fn drain<T>(rx: &Receiver<T>) -> Vec<T> {
    let mut out = Vec::new();
    loop {
        match rx.try_recv() {
            Ok(v) => out.push(v),
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => return out,
        }
    }
}
