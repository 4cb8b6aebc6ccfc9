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

    /// Bytes the row holds on the heap (its slot in the list not included).
    pub fn heap_bytes(&self) -> usize {
        use crate::memory::heap;
        match self {
            Self::Record(r) => r.heap_bytes(),
            Self::Malformed { raw, error, .. } => {
                crate::memory::vec_bytes(raw) + heap(error.capacity())
            }
            Self::Unanswered { method, .. } => heap(method.capacity()),
            Self::Lost { .. } => 0,
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
    /// Heap bytes of the rows (their slots in `rows` not included).
    bytes_held: usize,
    /// Bytes of the streams' newest frames.
    stream_bytes: usize,
    /// Rows let go to stay within the limits.
    pub rows_dropped: u64,
    /// Streamed frames not kept to stay within the limits.
    pub frames_not_kept: u64,
    pub error: Option<String>,
}

impl TrafficStore {
    /// Bytes of the list (rows and their slots) and of the streamed frames.
    pub fn memory(&self) -> (usize, usize) {
        let slots = crate::memory::heap(self.rows.capacity() * size_of::<TrafficRow>());
        (self.bytes_held + slots, self.stream_bytes)
    }

    /// Appends a row, then lets the oldest go while the list is over its limits.
    fn push_row(&mut self, row: TrafficRow, limits: TrafficLimits) {
        self.bytes_held += row.heap_bytes();
        self.rows.push_back(row);
        while self.rows.len() > limits.max_rows || self.memory().0 > limits.max_bytes {
            // A list cut short (by a smaller budget) gives its spare slots back first.
            let keep = self.rows.len().max(64);
            if self.rows.capacity() > 2 * keep {
                self.rows.shrink_to(keep);
                continue;
            }
            let Some(old) = self.rows.pop_front() else {
                break;
            };
            self.bytes_held = self.bytes_held.saturating_sub(old.heap_bytes());
            self.first_index += 1;
            self.rows_dropped += 1;
        }
    }

    /// Keeps `envelope` as the newest frame of `source`, within the limit for streamed
    /// frames: other streams' frames go first, the least recently updated first; a frame
    /// over the limit alone is not kept (and counted).
    fn keep_frame(
        &mut self,
        source: String,
        record_index: u64,
        envelope: &[u8],
        limits: TrafficLimits,
    ) {
        if self.streams.len() >= MAX_STREAMS && !self.streams.contains_key(&source) {
            return;
        }
        let cost = crate::memory::heap(envelope.len());
        let s = self
            .streams
            .entry(source.clone())
            .or_insert_with(|| StreamedImage {
                record_index,
                frames: 0,
                envelope: Arc::from(&[][..]),
                not_kept: None,
            });
        s.record_index = record_index;
        s.frames += 1;
        self.stream_bytes = self
            .stream_bytes
            .saturating_sub(crate::memory::heap(s.envelope.len()));
        s.envelope = Arc::from(&[][..]);
        if cost > limits.max_stream_bytes {
            s.not_kept = Some(envelope.len());
            self.frames_not_kept += 1;
            return;
        }
        while self.stream_bytes + cost > limits.max_stream_bytes {
            let oldest = self
                .streams
                .iter()
                .filter(|(k, v)| **k != source && !v.envelope.is_empty())
                .min_by_key(|(_, v)| v.record_index)
                .map(|(k, _)| k.clone());
            let Some(k) = oldest else { break };
            if let Some(v) = self.streams.get_mut(&k) {
                self.stream_bytes = self
                    .stream_bytes
                    .saturating_sub(crate::memory::heap(v.envelope.len()));
                v.not_kept = Some(v.envelope.len());
                v.envelope = Arc::from(&[][..]);
                self.frames_not_kept += 1;
            }
        }
        if let Some(s) = self.streams.get_mut(&source) {
            s.envelope = Arc::from(envelope);
            s.not_kept = None;
            self.stream_bytes += cost;
        }
    }

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
    /// The whole envelope (decoded by the window when it shows the image); empty when
    /// it was not kept.
    pub envelope: Arc<[u8]>,
    /// The size of the newest frame, when it was not kept to stay within the memory
    /// budget.
    pub not_kept: Option<usize>,
}

/// Limits of what the traffic list keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrafficLimits {
    pub max_rows: usize,
    /// Bytes of the rows, decoded trees included, and of their slots in the list.
    pub max_bytes: usize,
    /// Bytes of the streams' newest frames.
    pub max_stream_bytes: usize,
}

impl Default for TrafficLimits {
    fn default() -> Self {
        Self::of(crate::memory::MemoryBudget::default())
    }
}

impl TrafficLimits {
    /// The traffic list's and the streamed frames' shares of a budget.
    pub fn of(budget: crate::memory::MemoryBudget) -> Self {
        Self {
            max_rows: 50_000,
            max_bytes: budget.traffic(),
            max_stream_bytes: budget.streamed_frames(),
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
        limits: Arc<Mutex<TrafficLimits>>,
        waker: Arc<dyn Fn() + Send + Sync>,
    ) -> std::io::Result<Self> {
        let store = Arc::new(Mutex::new(TrafficStore::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (target, s, st) = (target.clone(), Arc::clone(&store), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("lrbc-traffic".into())
            .spawn(move || {
                // An observer: it runs in the time the engine and trainer leave over.
                crate::platform::lower_thread_priority(19);
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
                    let limits = *lock(&limits);
                    let mut store = lock(&s);
                    for e in events.drain(..) {
                        let row = match e {
                            TrafficEvent::Record(mut r) => {
                                if r.method.ends_with("Frame")
                                    && let Some(source) =
                                        crate::rpc::image::image_source(&r.payload)
                                {
                                    store.keep_frame(source, r.index, &r.payload, limits);
                                }
                                r.shrink();
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
                        store.push_row(row, limits);
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
    /// What the traffic tap may keep; changed with the memory budget.
    pub traffic_limits: Arc<Mutex<TrafficLimits>>,
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
        limits: TrafficLimits,
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
        let traffic_limits = Arc::new(Mutex::new(limits));
        let traffic = TrafficTap::start(
            &target,
            choice,
            Arc::clone(&traffic_limits),
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
            traffic_limits,
            control: None,
            control_unavailable,
            generation: 0,
            waker,
        })
    }

    /// Applies a new memory budget to the sampler's settings and the traffic tap.
    pub fn set_limits(&self, settings: SamplerSettings, limits: TrafficLimits) {
        self.sampler.set_settings(settings);
        *lock(&self.traffic_limits) = limits;
    }

    /// Bytes in use against the budget (textures of the window not included).
    pub fn memory(&self) -> crate::memory::MemoryUse {
        let (histories, camera_images) = self.sampler.lock().memory();
        let (traffic, streamed_frames) = self.traffic.lock().memory();
        crate::memory::MemoryUse {
            histories,
            traffic,
            camera_images,
            streamed_frames,
        }
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
            Arc::clone(&self.traffic_limits),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::{self, fb};
    use crate::traffic::{Decoded, Pairing};

    fn record(index: u64, payload: Vec<u8>) -> Box<Record> {
        let decoded = rpc::decode_envelope(&payload).unwrap();
        Box::new(Record {
            index,
            seen_ns: index,
            ring: RegionKind::CmdC2s,
            position: 0,
            method: decoded.method_label(),
            decoded: Decoded::Envelope(decoded),
            payload,
            lucky: None,
            correlation_id: index,
            error: None,
            is_request: true,
            latency_ns: None,
            partner: None,
            pairing: Pairing::Pending,
        })
    }

    fn telemetry(n: usize) -> Vec<u8> {
        rpc::build_envelope(1, fb::MethodId::TelemetryFrame, None, 5, |fbb| {
            let q = fbb.create_vector(&vec![0.5f32; n]);
            let f = fb::TelemetryFrame::create(
                fbb,
                &fb::TelemetryFrameArgs {
                    observation_qpos: Some(q),
                    ..Default::default()
                },
            );
            Some((fb::Payload::TelemetryFrame, f.as_union_value()))
        })
    }

    #[test]
    fn the_list_counts_real_bytes_and_keeps_within_them() {
        let limits = TrafficLimits {
            max_rows: 1_000_000,
            max_bytes: 1 << 20,
            max_stream_bytes: 1 << 20,
        };
        let mut store = TrafficStore::default();
        for i in 0..20_000 {
            let mut r = record(i, telemetry(1 + (i as usize % 40)));
            r.shrink();
            // What the record holds is at least its payload and its decoded nodes.
            let Decoded::Envelope(d) = &r.decoded else {
                unreachable!()
            };
            assert!(
                r.heap_bytes()
                    >= r.payload.len() + d.tree.nodes.len() * size_of::<rpc::tree::Node>()
            );
            store.push_row(TrafficRow::Record(r), limits);
            assert!(store.memory().0 <= limits.max_bytes);
        }
        assert!(store.rows_dropped > 0);
        let held: usize = store.rows.iter().map(TrafficRow::heap_bytes).sum();
        assert_eq!(held, store.bytes_held, "bytes are tracked exactly");
        // A smaller budget lets rows go and gives their slots back.
        let small = TrafficLimits {
            max_bytes: 64 << 10,
            ..limits
        };
        store.push_row(TrafficRow::Record(record(20_000, telemetry(4))), small);
        assert!(store.memory().0 <= small.max_bytes);
    }

    #[test]
    fn streamed_frames_keep_within_their_limit_oldest_stream_first() {
        let limits = TrafficLimits {
            max_rows: 100,
            max_bytes: 1 << 20,
            max_stream_bytes: 10_000,
        };
        let mut store = TrafficStore::default();
        store.keep_frame("a".into(), 1, &[1; 4000], limits);
        store.keep_frame("b".into(), 2, &[2; 4000], limits);
        assert_eq!(store.memory().1, 2 * crate::memory::heap(4000));
        // A third stream: the least recently updated frame goes.
        store.keep_frame("c".into(), 3, &[3; 4000], limits);
        assert!(store.memory().1 <= limits.max_stream_bytes);
        assert!(store.streams["a"].envelope.is_empty());
        assert_eq!(store.streams["a"].not_kept, Some(4000));
        assert_eq!(store.streams["c"].envelope.len(), 4000);
        // A frame over the limit alone is not kept, and says so.
        store.keep_frame("d".into(), 4, &[4; 20_000], limits);
        assert!(store.streams["d"].envelope.is_empty());
        assert_eq!(store.streams["d"].not_kept, Some(20_000));
        assert_eq!(store.streams["d"].frames, 1);
        assert!(store.frames_not_kept >= 2);
        assert!(store.memory().1 <= limits.max_stream_bytes);
    }
}
