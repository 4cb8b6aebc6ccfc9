//! The sampler: a background thread that follows `frame_seq` and takes a consistent
//! snapshot of every frame it can (spec 3.2): rewards, dones, truncateds and resets of
//! all envs, the observations and actions of the watched envs, camera images when
//! `image_seq` moves, and a periodic scan of every env for NaN, Inf and out-of-range
//! values. History is bounded. Torn snapshots are retried, then counted, never kept.
//! The UI thread only reads the shared data and never waits on the engine.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::attach::Attached;
use crate::clock::Clock;
use crate::layout::{Geometry, RegionKind};
use crate::segment::{Segment, f32s_from_bytes};
use crate::snapshot::{self, HotData};
use crate::watch::{Report, Watcher};

mod budget;
use budget::{Budget, CpuTimes};

/// Reward percentiles are taken over at most this many envs per frame.
const PERCENTILE_SAMPLE: usize = 512;

/// The sampler's threads run at this nice value: observing must not slow the run.
const SAMPLER_NICE: i32 = 10;

/// The shortest and longest nap of the frame thread while frames come: an eighth of
/// the measured frame interval within these bounds, so that a frame is caught early in
/// the time it stays stable without waking dozens of times per frame.
const SAMPLER_NAP_MIN_NS: u64 = 20_000;
const SAMPLER_NAP_MAX_NS: u64 = 200_000;
/// The nap once no frame has come for this long (a paused or stopped run).
const SAMPLER_QUIET_NS: u64 = 500_000_000;
const SAMPLER_QUIET_NAP_NS: u64 = 2_000_000;
/// The spotter's nap while quiet: the first frame after a pause (a run that starts, or
/// resumes) is stable for as little as a quarter of a millisecond, and the frame thread
/// naps 2 ms; the spotter copies it as soon as it sees it.
const SPOTTER_QUIET_NAP_NS: u64 = 200_000;
/// How often the auxiliary thread looks at the segment's state (liveness, re-attach).
const AUX_TICK_NS: u64 = 250_000_000;
/// The auxiliary thread's longest sleep: a change of settings is taken up within it.
const AUX_MAX_SLEEP_NS: u64 = 50_000_000;

/// The frame thread's share of one core on a busy machine, by default (percent).
pub const DEFAULT_BUSY_BUDGET_PERCENT: f32 = 1.0;

/// `done` in [`EnvPoint::flags`].
pub const FLAG_DONE: u8 = 1;
/// `truncated` in [`EnvPoint::flags`].
pub const FLAG_TRUNCATED: u8 = 2;
/// The client asked for a reset before this frame.
pub const FLAG_RESET: u8 = 4;

/// A bounded history: the oldest entries go when it is full.
#[derive(Clone, Debug)]
pub struct Ring<T> {
    items: VecDeque<T>,
    capacity: usize,
}

impl<T> Ring<T> {
    pub fn new(capacity: usize) -> Self {
        Self {
            items: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    pub fn push(&mut self, item: T) {
        if self.items.len() >= self.capacity {
            self.items.pop_front();
        } else if self.items.len() == self.items.capacity() {
            // Grow by doubling, but never past the capacity: a full ring's allocation
            // is exactly what the budget gave it.
            let want = (self.items.len() * 2).max(64).min(self.capacity);
            self.items.reserve_exact(want - self.items.len());
        }
        self.items.push_back(item);
    }

    /// Keeps the newest `capacity` items at most, and frees what it no longer needs.
    pub fn set_capacity(&mut self, capacity: usize) {
        let capacity = capacity.max(1);
        if capacity == self.capacity {
            return;
        }
        self.capacity = capacity;
        let excess = self.items.len().saturating_sub(capacity);
        self.items.drain(..excess);
        self.items.shrink_to(capacity);
    }

    /// Bytes of the ring's allocation (the items' own heap data not included).
    pub fn heap_bytes(&self) -> usize {
        crate::memory::heap(self.items.capacity() * size_of::<T>())
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.items.iter()
    }

    pub fn back(&self) -> Option<&T> {
        self.items.back()
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }
}

/// What the sampler keeps of each frame for the all-env overview.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameAgg {
    pub frame_seq: u64,
    /// When it was sampled (the sampler's clock).
    pub t_ns: u64,
    pub reward_min: f32,
    pub reward_p10: f32,
    pub reward_p50: f32,
    pub reward_mean: f32,
    pub reward_p90: f32,
    pub reward_max: f32,
    pub dones: u32,
    pub truncateds: u32,
    pub resets: u32,
    pub nan_rewards: u32,
    /// `frame_time_ns − action_time_ns` of this frame, when the extension gives both.
    pub step_latency_ns: Option<u64>,
}

/// One watched env at one frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnvPoint {
    pub frame_seq: u64,
    pub t_ns: u64,
    pub reward: f32,
    pub flags: u8,
}

/// Observations then actions of one watched env at one frame.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvDetail {
    pub frame_seq: u64,
    pub t_ns: u64,
    pub values: Box<[f32]>,
}

/// The history of one watched env.
#[derive(Clone, Debug)]
pub struct EnvHistory {
    pub points: Ring<EnvPoint>,
    pub detail: Ring<EnvDetail>,
}

/// Which channel a value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    Obs(u32),
    Act(u32),
    Reward,
}

/// A value that should not be there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BadValue {
    pub env: u32,
    pub channel: Channel,
    pub value: f32,
    pub frame_seq: u64,
}

/// The last scan of every env's values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scan {
    pub frame_seq: u64,
    pub scans: u64,
    pub nan: u64,
    pub inf: u64,
    pub out_of_range: u64,
    /// Envs with at least one problem in the last scan.
    pub envs_affected: u32,
    /// The first problems found in the last scan (at most 16).
    pub examples: Vec<BadValue>,
}

/// A camera frame: every env's image, copied whole.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageFrame {
    pub image_seq: u64,
    pub frame_seq: u64,
    pub width: u32,
    pub height: u32,
    pub channels: u32,
    pub num_envs: u32,
    pub pixels: Arc<Vec<u8>>,
    pub captured_ns: u64,
    pub consistent: bool,
}

/// The live words of the header, loaded atomically.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub frame_seq: u64,
    pub action_seq: u64,
    pub write_seq: Option<u64>,
    pub image_seq: Option<u64>,
    pub frame_time_ns: Option<u64>,
    pub action_time_ns: Option<u64>,
    pub service_flags: Option<u32>,
    pub server_pid: u32,
    pub client_pid: u32,
    pub read_ns: u64,
}

/// Cumulative since attach.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SamplerStats {
    /// Frames the engine produced while the sampler was attached.
    pub frames_seen: u64,
    /// Frames with a consistent snapshot kept.
    pub frames_sampled: u64,
    /// Frames that passed between two looks.
    pub frames_missed: u64,
    /// Frames whose every copy was torn (discarded).
    pub frames_torn: u64,
    /// Frames let pass on purpose while the machine was busy (see
    /// [`SamplerSettings::busy_budget_percent`]).
    pub frames_skipped: u64,
    pub images_captured: u64,
    pub images_torn: u64,
}

/// What the sampler shares with its readers.
#[derive(Debug)]
pub struct SamplerData {
    pub geometry: Arc<Geometry>,
    /// Bumped when the sampler re-attaches to a replaced segment.
    pub generation: u64,
    pub label: String,
    pub report: Option<Report>,
    pub stats: SamplerStats,
    pub counters: Counters,
    pub frames: Ring<FrameAgg>,
    pub envs: BTreeMap<u32, EnvHistory>,
    /// The last consistent snapshot of all envs.
    pub latest: Option<(u64, HotData)>,
    pub scan: Scan,
    pub image: Option<ImageFrame>,
    /// Image frames per second, from `image_seq`.
    pub image_fps: f32,
    /// The machine is busy and the frame thread keeps within its budget.
    pub yielding: bool,
    /// Why camera images are not copied, when they are not.
    pub image_note: Option<String>,
}

/// The frames of history and of observation rows that `history_bytes` holds, each at
/// most what the settings ask: up to half for the overview and the watched envs'
/// points, the rest for their rows of `values` floats.
pub fn history_capacities(s: &SamplerSettings, watched: usize, values: usize) -> (usize, usize) {
    let budget = s.history_bytes;
    let per_frame = size_of::<FrameAgg>() + watched * size_of::<EnvPoint>();
    let detail_each = size_of::<EnvDetail>() + crate::memory::heap(values * 4);
    let overview = if watched == 0 { budget } else { budget / 2 };
    let frames = (overview / per_frame).clamp(1, s.history_frames.max(1));
    // The rows take the rest, what the overview leaves of its half included.
    let rows = budget.saturating_sub(frames * per_frame);
    let detail = (rows / (watched * detail_each).max(1)).clamp(1, s.detail_frames.max(1));
    (frames, detail)
}

impl SamplerData {
    /// Bytes of the histories and of the image copy.
    pub fn memory(&self) -> (usize, usize) {
        let envs: usize = self
            .envs
            .values()
            .map(|h| {
                h.points.heap_bytes()
                    + h.detail.heap_bytes()
                    + h.detail
                        .iter()
                        .map(|d| crate::memory::heap(d.values.len() * 4))
                        .sum::<usize>()
            })
            .sum();
        let latest = self.latest.as_ref().map_or(0, |(_, h)| {
            crate::memory::vec_bytes(&h.rewards)
                + crate::memory::vec_bytes(&h.dones)
                + h.truncateds.as_ref().map_or(0, crate::memory::vec_bytes)
                + crate::memory::vec_bytes(&h.resets)
        });
        let image = self
            .image
            .as_ref()
            .map_or(0, |i| crate::memory::vec_bytes(&i.pixels));
        (self.frames.heap_bytes() + envs + latest, image)
    }
}

/// What the sampler should do; readers may change it at any time.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerSettings {
    pub watched_envs: Vec<u32>,
    /// Frames of overview and reward history kept.
    pub history_frames: usize,
    /// Frames of observation/action history kept per watched env.
    pub detail_frames: usize,
    /// |obs| above this is out of range.
    pub obs_limit: f32,
    /// |act| above this is out of range.
    pub act_limit: f32,
    /// Bytes the histories may hold (overview, watched envs' points and rows): the
    /// frames kept are the fewer of `history_frames` and what fits.
    pub history_bytes: usize,
    /// Bytes a copy of the image region and its textures may take; a larger region
    /// is not copied (and the reason is shown).
    pub image_bytes: usize,
    /// Camera images copied at most this often; 0 copies none.
    pub max_image_hz: f32,
    /// Every env scanned for NaN/Inf/out-of-range this often; 0 scans never.
    pub scan_hz: f32,
    /// While the machine has no spare CPU, the frame thread uses at most this share of
    /// one core (percent), skipping frames to stay within it; None (or 0) follows every
    /// frame whatever it costs the run.
    pub busy_budget_percent: Option<f32>,
}

impl Default for SamplerSettings {
    fn default() -> Self {
        Self {
            watched_envs: vec![0, 1, 2, 3],
            history_frames: 180_000,
            detail_frames: 30_000,
            history_bytes: crate::memory::MemoryBudget::default().histories(),
            image_bytes: crate::memory::MemoryBudget::default().camera_images(),
            obs_limit: 1e4,
            act_limit: 1.0,
            max_image_hz: 30.0,
            scan_hz: 10.0,
            busy_budget_percent: Some(DEFAULT_BUSY_BUDGET_PERCENT),
        }
    }
}

/// Wakes the reader (the UI's `request_repaint`), at most at the given rate.
pub type Waker = Box<dyn Fn() + Send>;

/// A running sampler thread.
#[derive(Debug)]
pub struct Sampler {
    data: Arc<Mutex<SamplerData>>,
    settings: Arc<Mutex<SamplerSettings>>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    #[cfg(test)]
    handover: Arc<Handover>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another holder leaves the data usable (plain values).
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Sampler {
    /// Starts sampling `attached` on named threads. The reader repaints at `repaint_hz`:
    /// `waker` is called at that rate, and while yielding to a busy machine the sampler
    /// takes no more than one frame per repaint.
    pub fn start<C: Clock + 'static>(
        attached: Attached,
        settings: SamplerSettings,
        clock: C,
        waker: Waker,
        repaint_hz: f32,
    ) -> std::io::Result<Self> {
        Self::start_with_load(
            attached,
            settings,
            clock,
            waker,
            repaint_hz,
            budget::read_cpu_times,
        )
    }

    /// [`Sampler::start`] with the machine's load read by `read_load` (tests inject one).
    fn start_with_load<C: Clock + 'static>(
        attached: Attached,
        settings: SamplerSettings,
        clock: C,
        waker: Waker,
        repaint_hz: f32,
        read_load: fn() -> Option<CpuTimes>,
    ) -> std::io::Result<Self> {
        let data = Arc::new(Mutex::new(SamplerData {
            geometry: Arc::new(attached.geometry.clone()),
            generation: 0,
            label: attached.label(),
            report: None,
            stats: SamplerStats::default(),
            counters: Counters::default(),
            frames: Ring::new(settings.history_frames),
            envs: BTreeMap::new(),
            latest: None,
            scan: Scan::default(),
            image: None,
            image_fps: 0.0,
            yielding: false,
            image_note: None,
        }));
        let repaint_interval_ns = (1e9 / repaint_hz.max(1.0)) as u64;
        let budget = Budget::new(settings.busy_budget_percent, repaint_interval_ns);
        let settings = Arc::new(Mutex::new(settings));
        let stop = Arc::new(AtomicBool::new(false));
        // Frames count from the moment of attach, not from when the thread starts.
        let frame_at_attach = attached
            .segment
            .load_u64(attached.geometry.counters.frame_seq)
            .unwrap_or(0);
        // The frame thread has a mapping of its own; the auxiliary thread keeps the
        // watcher (state, re-attachment), the images and the value scans, so that the
        // frame thread's loop stays tight enough to catch frames that come in bursts.
        let handover = Arc::new(Handover::default());
        // Relaxed: a hint for the spotter, with no data behind it.
        handover.taken.store(frame_at_attach, Ordering::Relaxed);
        let frames_attached = attached
            .reopen()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let mut frames = FrameWorker {
            attached: frames_attached,
            scratch: Vec::new(),
            hot: HotData::default(),
            last_good: HotData::default(),
            last_good_frame: 0,
            watched_buf: Vec::new(),
            generation: 0,
            last_frame: frame_at_attach,
            data: Arc::clone(&data),
            settings: Arc::clone(&settings),
            stop: Arc::clone(&stop),
            pending: Pending::default(),
            budget,
            held: false,
            read_load,
            handover: Arc::clone(&handover),
            spotter: None,
        };
        #[cfg(test)]
        let test_handover = Arc::clone(&handover);
        let spotter = Spotter {
            attached: attached
                .reopen()
                .map_err(|e| std::io::Error::other(e.to_string()))?,
            start_frame: frame_at_attach,
            generation: 0,
            handover,
            data: Arc::clone(&data),
            settings: Arc::clone(&settings),
            stop: Arc::clone(&stop),
        };
        let aux = AuxWorker {
            watcher: Watcher::new(attached, clock),
            data: Arc::clone(&data),
            settings: Arc::clone(&settings),
            stop: Arc::clone(&stop),
            waker,
            repaint_interval_ns,
        };
        let spotter_thread = std::thread::Builder::new()
            .name("lrbc-spotter".into())
            .spawn(move || spotter.run())?;
        frames.spotter = Some(spotter_thread.thread().clone());
        let frame_thread = std::thread::Builder::new()
            .name("lrbc-sampler".into())
            .spawn(move || frames.run())?;
        let aux_thread = std::thread::Builder::new()
            .name("lrbc-sampler-aux".into())
            .spawn(move || aux.run())?;
        Ok(Self {
            data,
            settings,
            stop,
            threads: vec![frame_thread, aux_thread, spotter_thread],
            #[cfg(test)]
            handover: test_handover,
        })
    }

    /// The shared data (lock briefly).
    pub fn data(&self) -> &Arc<Mutex<SamplerData>> {
        &self.data
    }

    pub fn lock(&self) -> MutexGuard<'_, SamplerData> {
        lock(&self.data)
    }

    pub fn settings(&self) -> SamplerSettings {
        lock(&self.settings).clone()
    }

    pub fn set_settings(&self, s: SamplerSettings) {
        *lock(&self.settings) = s;
    }

    pub fn stats(&self) -> SamplerStats {
        lock(&self.data).stats
    }

    /// Stops the thread and waits for it.
    /// The names of the sampler's threads that ended while it runs (a thread only ends
    /// early by panicking): their work stopped, which the caller must show.
    pub fn ended_threads(&self) -> Vec<String> {
        // Relaxed: a flag with no data behind it.
        if self.stop.load(Ordering::Relaxed) {
            return Vec::new();
        }
        self.threads
            .iter()
            .filter(|t| t.is_finished())
            .map(|t| t.thread().name().unwrap_or("sampler").to_string())
            .collect()
    }

    pub fn stop(&mut self) {
        // Relaxed: a flag with no data behind it.
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            // A resting thread wakes now rather than at the end of its rest.
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Samples not yet moved into the shared data (the lock was busy).
#[derive(Default)]
struct Pending {
    frames: Vec<FrameAgg>,
    points: Vec<(u32, EnvPoint)>,
    details: Vec<(u32, EnvDetail)>,
    seen: u64,
    sampled: u64,
    missed: u64,
    torn: u64,
    skipped: u64,
}

/// Follows frame_seq and copies every frame it can.
struct FrameWorker {
    attached: Attached,
    scratch: Vec<f32>,
    /// The copy being taken, and the newest consistent one (swapped, never reallocated).
    hot: HotData,
    last_good: HotData,
    last_good_frame: u64,
    watched_buf: Vec<f32>,
    generation: u64,
    last_frame: u64,
    data: Arc<Mutex<SamplerData>>,
    settings: Arc<Mutex<SamplerSettings>>,
    stop: Arc<AtomicBool>,
    pending: Pending,
    budget: Budget,
    /// The thread held off (yielding) since it last saw a new frame.
    held: bool,
    read_load: fn() -> Option<CpuTimes>,
    handover: Arc<Handover>,
    /// Woken when the yielding ends.
    spotter: Option<std::thread::Thread>,
}

/// Watches the segment's state, re-attaches, copies images, scans values, wakes the
/// reader.
struct AuxWorker<C: Clock> {
    watcher: Watcher<C>,
    data: Arc<Mutex<SamplerData>>,
    settings: Arc<Mutex<SamplerSettings>>,
    stop: Arc<AtomicBool>,
    waker: Waker,
    repaint_interval_ns: u64,
}

fn load_counters(seg: &Segment, g: &Geometry, now_ns: u64) -> Counters {
    let c = g.counters;
    Counters {
        frame_seq: seg.load_u64(c.frame_seq).unwrap_or(0),
        action_seq: seg.load_u64(c.action_seq).unwrap_or(0),
        write_seq: c.ext.and_then(|e| seg.load_u64(e.write_seq)),
        image_seq: c.ext.and_then(|e| seg.load_u64(e.image_seq)),
        frame_time_ns: c.ext.and_then(|e| seg.load_u64(e.frame_time_ns)),
        action_time_ns: c.ext.and_then(|e| seg.load_u64(e.action_time_ns)),
        service_flags: c.ext.and_then(|e| seg.load_u32(e.service_flags)),
        server_pid: seg.load_u32(c.server_pid).unwrap_or(0),
        client_pid: seg.load_u32(c.client_pid).unwrap_or(0),
        read_ns: now_ns,
    }
}

/// Percentiles of a copy of the rewards (NaNs excluded), in linear time: `scratch`
/// is reused between frames.
/// Minimum, maximum, sum and count of the finite values.
#[derive(Clone, Copy, Debug, PartialEq)]
struct RewardStats {
    min: f32,
    max: f32,
    sum: f64,
    finite: usize,
}

/// [`RewardStats`] over `values`, eight lanes at a time and without branches, so that
/// the compiler vectorises it (this runs on every frame of 4096 envs).
// Not inlined: compiled on its own it vectorises, inlined into the frame loop it did not.
#[inline(never)]
fn reward_stats(values: &[f32]) -> RewardStats {
    const LANES: usize = 8;
    let mut min = [f32::INFINITY; LANES];
    let mut max = [f32::NEG_INFINITY; LANES];
    let mut finite = [0u32; LANES];
    let mut sums = [0f64; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for k in 0..LANES {
            let v = chunk[k];
            let ok = v.is_finite();
            min[k] = if ok { min[k].min(v) } else { min[k] };
            max[k] = if ok { max[k].max(v) } else { max[k] };
            sums[k] += if ok { f64::from(v) } else { 0.0 };
            finite[k] += u32::from(ok);
        }
    }
    let mut out = RewardStats {
        min: min.iter().copied().fold(f32::INFINITY, f32::min),
        max: max.iter().copied().fold(f32::NEG_INFINITY, f32::max),
        sum: sums.iter().sum(),
        finite: finite.iter().map(|&n| n as usize).sum(),
    };
    for &v in rest {
        if v.is_finite() {
            out.min = out.min.min(v);
            out.max = out.max.max(v);
            out.sum += f64::from(v);
            out.finite += 1;
        }
    }
    out
}

/// How many bytes are not zero, 64 at a time in byte counters that are added up before
/// they can overflow (vectorised: this runs three times per frame over every env).
fn count_nonzero(bytes: &[u8]) -> u32 {
    const LANES: usize = 64;
    // 255 chunks at most per round, so that no byte counter wraps.
    const ROUND: usize = 255 * LANES;
    let mut total = 0u32;
    for round in bytes.chunks(ROUND) {
        let mut counts = [0u8; LANES];
        let chunks = round.chunks_exact(LANES);
        let rest = chunks.remainder();
        for chunk in chunks {
            for k in 0..LANES {
                counts[k] += u8::from(chunk[k] != 0);
            }
        }
        total += counts.iter().map(|&c| u32::from(c)).sum::<u32>();
        total += rest.iter().filter(|&&b| b != 0).count() as u32;
    }
    total
}

fn aggregate(
    frame_seq: u64,
    t_ns: u64,
    hot: &HotData,
    latency: Option<u64>,
    scratch: &mut Vec<f32>,
) -> FrameAgg {
    // Exact minimum, maximum, mean and counts over every env; the percentiles over at
    // most PERCENTILE_SAMPLE envs spread evenly (exact below that many envs).
    let RewardStats {
        min,
        max,
        sum,
        finite,
    } = reward_stats(&hot.rewards);
    let nan_rewards = (hot.rewards.len() - finite) as u32;
    let stride = hot.rewards.len().div_ceil(PERCENTILE_SAMPLE).max(1);
    scratch.clear();
    scratch.extend(
        hot.rewards
            .iter()
            .step_by(stride)
            .copied()
            .filter(|r| r.is_finite()),
    );
    let (p10, p50, p90) = percentiles(scratch);
    let count = count_nonzero;
    FrameAgg {
        frame_seq,
        t_ns,
        reward_min: if finite == 0 { f32::NAN } else { min },
        reward_p10: p10,
        reward_p50: p50,
        reward_mean: if finite == 0 {
            f32::NAN
        } else {
            (sum / finite as f64) as f32
        },
        reward_p90: p90,
        reward_max: if finite == 0 { f32::NAN } else { max },
        dones: count(&hot.dones),
        truncateds: hot.truncateds.as_deref().map_or(0, count),
        resets: count(&hot.resets),
        nan_rewards,
        step_latency_ns: latency,
    }
}

/// The 10th, 50th and 90th percentiles (nearest rank) of `values`, which it reorders:
/// one selection for the median, then each outer one within its half only.
fn percentiles(values: &mut [f32]) -> (f32, f32, f32) {
    let len = values.len();
    if len == 0 {
        return (f32::NAN, f32::NAN, f32::NAN);
    }
    let rank = |p: f32| (((len - 1) as f32 * p).round() as usize).min(len - 1);
    let (i10, i50, i90) = (rank(0.1), rank(0.5), rank(0.9));
    let (below, &mut p50, above) = values.select_nth_unstable_by(i50, f32::total_cmp);
    // Everything below the median's index sorts at or before it, everything above at
    // or after, so the outer ranks are found within their side.
    let p10 = if i10 < i50 {
        *below.select_nth_unstable_by(i10, f32::total_cmp).1
    } else {
        p50
    };
    let p90 = if i90 > i50 {
        *above
            .select_nth_unstable_by(i90 - i50 - 1, f32::total_cmp)
            .1
    } else {
        p50
    };
    (p10, p50, p90)
}

/// Scans every env's observations and actions (and rewards) for NaN, Inf and values
/// beyond the limits.
pub fn scan_values(
    g: &Geometry,
    obs: &[f32],
    act: &[f32],
    rewards: &[f32],
    limits: (f32, f32),
    frame_seq: u64,
) -> Scan {
    let mut s = Scan {
        frame_seq,
        ..Scan::default()
    };
    let mut affected = vec![false; g.num_envs as usize];
    let mut check = |env: usize, channel: Channel, v: f32, limit: f32, s: &mut Scan| {
        let bad = if v.is_nan() {
            s.nan += 1;
            true
        } else if v.is_infinite() {
            s.inf += 1;
            true
        } else if v.abs() > limit {
            s.out_of_range += 1;
            true
        } else {
            false
        };
        if bad {
            if let Some(a) = affected.get_mut(env) {
                *a = true;
            }
            if s.examples.len() < 16 {
                s.examples.push(BadValue {
                    env: env as u32,
                    channel,
                    value: v,
                    frame_seq,
                });
            }
        }
    };
    let (o, a) = (g.obs_size as usize, g.act_size as usize);
    for (i, &v) in obs.iter().enumerate() {
        check(
            i / o.max(1),
            Channel::Obs((i % o.max(1)) as u32),
            v,
            limits.0,
            &mut s,
        );
    }
    for (i, &v) in act.iter().enumerate() {
        check(
            i / a.max(1),
            Channel::Act((i % a.max(1)) as u32),
            v,
            limits.1,
            &mut s,
        );
    }
    for (env, &v) in rewards.iter().enumerate() {
        check(env, Channel::Reward, v, f32::INFINITY, &mut s);
    }
    s.envs_affected = affected.iter().filter(|&&a| a).count() as u32;
    s
}

/// How far `newer` is ahead of `older` in frames, when it is (a frame_seq that went back
/// is a new run, not 2^64 frames).
fn frames_ahead(newer: u64, older: u64) -> Option<u64> {
    let delta = newer.wrapping_sub(older);
    (delta > 0 && delta < 1 << 40).then_some(delta)
}

/// The pace of frames as one polling thread sees it: the frame interval, smoothed, and
/// when a new frame was last seen; its naps follow from them.
struct FramePace {
    interval_ns: u64,
    last_new_ns: u64,
}

impl FramePace {
    fn new(now: u64) -> Self {
        Self {
            interval_ns: 1_000_000,
            last_new_ns: now,
        }
    }

    /// `delta` new frames were seen at `now`.
    fn saw(&mut self, now: u64, delta: u64) {
        let per_frame = now.saturating_sub(self.last_new_ns) / delta.clamp(1, 1 << 20);
        self.interval_ns = (self.interval_ns * 7 + per_frame.min(SAMPLER_QUIET_NS)) / 8;
        self.last_new_ns = now;
    }

    /// An eighth of the frame interval, within bounds: a frame is caught early in the
    /// time it stays stable without waking dozens of times per frame.
    fn eighth_ns(&self) -> u64 {
        (self.interval_ns / 8).clamp(SAMPLER_NAP_MIN_NS, SAMPLER_NAP_MAX_NS)
    }

    /// The next nap: an eighth of the interval, or `quiet_nap_ns` once it has been quiet.
    fn nap(&self, now: u64, quiet_nap_ns: u64) -> Duration {
        Duration::from_nanos(if self.quiet(now) {
            quiet_nap_ns
        } else {
            self.eighth_ns()
        })
    }

    /// No new frame for a while (a paused or stopped run).
    fn quiet(&self, now: u64) -> bool {
        self.since_new_ns(now) > SAMPLER_QUIET_NS
    }

    fn since_new_ns(&self, now: u64) -> u64 {
        now.saturating_sub(self.last_new_ns)
    }
}

/// What one guarded copy of a frame gave.
struct Taken {
    consistent: bool,
    frame_seq: u64,
    latency: Option<u64>,
    /// The watched envs that exist, in the order of the rows copied.
    watched: Vec<u32>,
}

/// Copies the hot arrays of every env and the observation and action rows of the
/// watched envs into `hot` and `watched_buf`, under the guard of spec 3.2.
fn copy_frame(
    attached: &Attached,
    watched_envs: &[u32],
    hot: &mut HotData,
    watched_buf: &mut Vec<f32>,
) -> Taken {
    let (g, seg) = (&attached.geometry, &attached.segment);
    let watched: Vec<u32> = watched_envs
        .iter()
        .copied()
        .filter(|&e| e < g.num_envs)
        .collect();
    let (o, a) = (g.obs_size as usize, g.act_size as usize);
    watched_buf.resize(watched.len() * (o + a), 0.0);
    // Few attempts: when the engine is already writing the next frame, this one is
    // gone; retrying would only take CPU from the engine.
    let copy = snapshot::guarded_read(seg, g, 3, |s| {
        snapshot::copy_hot_into(s, g, hot);
        for (k, &e) in watched.iter().enumerate() {
            let row = &mut watched_buf[k * (o + a)..(k + 1) * (o + a)];
            let (obs, act) = row.split_at_mut(o);
            if let Some(r) = g.region(RegionKind::Obs) {
                s.read_f32s(r.offset_bytes + u64::from(e) * o as u64 * 4, obs);
            }
            if let Some(r) = g.region(RegionKind::Act) {
                s.read_f32s(r.offset_bytes + u64::from(e) * a as u64 * 4, act);
            }
        }
    });
    let latency = g.counters.ext.and_then(|e| {
        let f = seg.load_u64(e.frame_time_ns)?;
        let a = seg.load_u64(e.action_time_ns)?;
        (f >= a && a != 0).then(|| f - a)
    });
    Taken {
        consistent: copy.consistent,
        frame_seq: copy.frame_seq,
        latency,
        watched,
    }
}

/// Maps the new segment when the auxiliary thread has re-attached (the shared data's
/// generation moved on): true when `attached` and `generation` now follow it. Never
/// waits for the data's lock; a busy lock is tried again at the next look.
fn reopen_if_reattached(
    data: &Mutex<SamplerData>,
    attached: &mut Attached,
    generation: &mut u64,
) -> bool {
    let Ok(current) = data.try_lock().map(|d| d.generation) else {
        return false;
    };
    if current == *generation {
        return false;
    }
    match attached.reopen() {
        Ok(a) => {
            *attached = a;
            *generation = current;
            true
        }
        Err(_) => false,
    }
}

/// A consistent copy the spotter took of a frame the frame thread had not taken.
#[derive(Debug)]
struct SpotCopy {
    generation: u64,
    frame_seq: u64,
    t_ns: u64,
    latency: Option<u64>,
    watched: Vec<u32>,
    hot: HotData,
    watched_buf: Vec<f32>,
}

/// Shared by the frame thread and the spotter.
#[derive(Debug, Default)]
struct Handover {
    /// The newest frame the frame thread has taken.
    taken: AtomicU64,
    /// The frame thread is yielding to a busy machine: the spotter rests too.
    yielding: AtomicBool,
    copies: Mutex<VecDeque<SpotCopy>>,
    /// Tests: the frame thread takes only what the spotter hands over.
    #[cfg(test)]
    blind: AtomicBool,
    /// Tests: the frame thread does not take handed-over copies before it looks at
    /// `frame_seq` (as when the spotter hands one over just after it checked).
    #[cfg(test)]
    late: AtomicBool,
}

/// Copies handed over but not yet taken, at most (the oldest go first).
const SPOT_QUEUE: usize = 16;

/// A second pair of eyes on `frame_seq`. On this kind of machine a thread's nap of a
/// hundred microseconds now and then lasts milliseconds; when the frame thread has not
/// taken a frame some time after it appeared, the spotter copies it and hands it over,
/// so that one thread's late wakeup does not lose the frame.
struct Spotter {
    attached: Attached,
    start_frame: u64,
    generation: u64,
    handover: Arc<Handover>,
    data: Arc<Mutex<SamplerData>>,
    settings: Arc<Mutex<SamplerSettings>>,
    stop: Arc<AtomicBool>,
}

impl Spotter {
    fn run(mut self) {
        crate::platform::set_timer_slack_ns(1_000);
        crate::platform::lower_thread_priority(SAMPLER_NICE);
        // Never on the frame thread's cores: a stall of one core must not blind both.
        if let Some(cores) = crate::platform::CoreSet::of_this_thread() {
            cores.keep_to(Some(1));
        }
        let mut watched_envs = lock(&self.settings).watched_envs.clone();
        let mut housekeeping_ns = 0u64;
        let seg_frame = |a: &Attached| a.segment.load_u64(a.geometry.counters.frame_seq);
        // From the frame at attach, as the frame thread, however late this thread starts.
        let mut last = self.start_frame;
        let mut tried = last;
        let mut pace = FramePace::new(crate::segment::monotonic_now_ns());
        // Relaxed: a flag with no data behind it.
        while !self.stop.load(Ordering::Relaxed) {
            let now = crate::segment::monotonic_now_ns();
            if now.saturating_sub(housekeeping_ns) >= 5_000_000 {
                housekeeping_ns = now;
                if let Ok(s) = self.settings.try_lock() {
                    watched_envs.clone_from(&s.watched_envs);
                }
                if reopen_if_reattached(&self.data, &mut self.attached, &mut self.generation) {
                    last = seg_frame(&self.attached).unwrap_or(0);
                    tried = last;
                }
            }
            // Relaxed: a flag with no data behind it.
            if self.handover.yielding.load(Ordering::Relaxed) {
                // Rests without waking the busy machine; the frame thread unparks it when
                // the yielding ends (the timeout is for the housekeeping above).
                std::thread::park_timeout(Duration::from_millis(250));
                continue;
            }
            let f = seg_frame(&self.attached).unwrap_or(0);
            // The first frame after a pause: the frame thread naps long, take it now.
            let after_pause = f != last && pace.quiet(now);
            if f != last {
                pace.saw(now, f.wrapping_sub(last));
                last = f;
            }
            // Relaxed: a hint, with no data behind it.
            let taken = self.handover.taken.load(Ordering::Relaxed);
            // A frame the frame thread has not taken an eighth of an interval after it
            // appeared: it is late, copy the frame for it.
            if f != tried
                && frames_ahead(f, taken).is_some()
                && (after_pause || pace.since_new_ns(now) >= pace.eighth_ns())
            {
                let mut hot = HotData::default();
                let mut watched_buf = Vec::new();
                let t = copy_frame(&self.attached, &watched_envs, &mut hot, &mut watched_buf);
                // Relaxed: as above.
                let taken = self.handover.taken.load(Ordering::Relaxed);
                if t.consistent && frames_ahead(t.frame_seq, taken).is_some() {
                    let mut q = lock(&self.handover.copies);
                    if q.len() >= SPOT_QUEUE {
                        q.pop_front();
                    }
                    q.push_back(SpotCopy {
                        generation: self.generation,
                        frame_seq: t.frame_seq,
                        t_ns: now,
                        latency: t.latency,
                        watched: t.watched,
                        hot,
                        watched_buf,
                    });
                }
                // One try per frame.
                tried = f;
            }
            std::thread::sleep(pace.nap(now, SPOTTER_QUIET_NAP_NS));
        }
    }
}

impl FrameWorker {
    fn run(mut self) {
        // Naps of a few tens of microseconds must not turn into a hundred; and the
        // sampler takes only the time the engine and trainer leave over.
        crate::platform::set_timer_slack_ns(1_000);
        crate::platform::lower_thread_priority(SAMPLER_NICE);
        // The spotter keeps to the other half (see `Spotter`), except while yielding to a
        // busy machine: then the spotter rests, and any core may do.
        let cores = crate::platform::CoreSet::of_this_thread();
        let mut kept_to_half = cores.is_some_and(|c| c.keep_to(Some(0)));
        let mut settings = lock(&self.settings).clone();
        let mut housekeeping_ns = 0u64;
        let mut pace = FramePace::new(crate::segment::monotonic_now_ns());
        // Relaxed: a flag with no data behind it.
        while !self.stop.load(Ordering::Relaxed) {
            let now = crate::segment::monotonic_now_ns();
            // On a busy machine, no look before the budget allows one.
            if let Some(hold) = self.budget.hold_ns(now) {
                self.held = true;
                std::thread::sleep(Duration::from_nanos(hold));
                continue;
            }
            let yielding = self.budget.yielding();
            // Relaxed: a flag with no data behind it; the unpark below wakes the spotter
            // to read it.
            let was_yielding = self.handover.yielding.swap(yielding, Ordering::Relaxed);
            if was_yielding
                && !yielding
                && let Some(spotter) = &self.spotter
            {
                spotter.unpark();
            }
            if let Some(c) = &cores
                && kept_to_half == yielding
            {
                c.keep_to((!yielding).then_some(0));
                kept_to_half = !yielding;
            }
            // Frames the spotter copied while this thread was late.
            #[cfg(test)]
            let drain_first = !self.handover.late.load(Ordering::Relaxed);
            #[cfg(not(test))]
            let drain_first = true;
            if drain_first && let Some(passed) = self.take_handed_over(false) {
                pace.saw(now, passed);
            }
            let f = self.frame_seq();
            // Tests: a frame thread that never sees a new frame itself.
            #[cfg(test)]
            let f = if self.handover.blind.load(Ordering::Relaxed) {
                self.last_frame
            } else {
                f
            };
            // More than one new frame: the spotter may have handed over the ones between
            // since the look above. Take them first (in order), or they would be counted
            // missed while their copies wait.
            if frames_ahead(f, self.last_frame).is_some_and(|d| d > 1)
                && let Some(passed) = self.take_handed_over(true)
            {
                pace.saw(now, passed);
            }
            let new_frame = f != self.last_frame;
            if new_frame {
                let delta = f.wrapping_sub(self.last_frame);
                // A frame_seq that went back means a new run: count nothing.
                if frames_ahead(f, self.last_frame).is_some() {
                    self.pending.seen += delta;
                    let (seg, g) = (&self.attached.segment, &self.attached.geometry);
                    if self.held && !snapshot::settled_now(seg, g) {
                        // Back from holding off, the engine is already writing the next
                        // frame: wait for that one rather than copy a torn one.
                        self.pending.skipped += delta;
                    } else {
                        self.sample(&settings, now, delta);
                        self.budget.sampled(
                            crate::segment::monotonic_now_ns(),
                            crate::platform::thread_cpu_ns(),
                        );
                        self.held = false;
                    }
                }
                self.last_frame = f;
                // Relaxed: a hint for the spotter, with no data behind it.
                self.handover.taken.store(f, Ordering::Relaxed);
                pace.saw(now, delta);
            }
            // The rest is done every few milliseconds, not on every look at frame_seq.
            if now.saturating_sub(housekeeping_ns) >= 5_000_000 {
                housekeeping_ns = now;
                if let Ok(s) = self.settings.try_lock() {
                    settings.clone_from(&s);
                }
                self.budget.set_percent(settings.busy_budget_percent);
                if self.budget.check_due(now) {
                    self.budget.observe(now, (self.read_load)());
                }
                self.follow_generation();
                self.flush(&settings, true);
            } else if new_frame {
                self.flush(&settings, false);
            }
            if !new_frame {
                std::thread::sleep(pace.nap(now, SAMPLER_QUIET_NAP_NS));
            }
        }
    }

    /// Maps the new segment when the auxiliary thread re-attached.
    fn follow_generation(&mut self) {
        if reopen_if_reattached(&self.data, &mut self.attached, &mut self.generation) {
            self.pending = Pending::default();
            self.last_frame = self.frame_seq();
            // Relaxed: a hint for the spotter, with no data behind it.
            self.handover
                .taken
                .store(self.last_frame, Ordering::Relaxed);
        }
    }

    fn frame_seq(&self) -> u64 {
        self.attached
            .segment
            .load_u64(self.attached.geometry.counters.frame_seq)
            .unwrap_or(0)
    }

    /// Copies the frame just published (and records the frames that went by).
    fn sample(&mut self, settings: &SamplerSettings, now: u64, delta: u64) {
        let taken = copy_frame(
            &self.attached,
            &settings.watched_envs,
            &mut self.hot,
            &mut self.watched_buf,
        );
        self.count_passed(delta);
        if !taken.consistent {
            self.pending.torn += 1;
            return;
        }
        self.record(taken.frame_seq, now, taken.latency, &taken.watched);
    }

    /// Frames that went by unseen: skipped while the thread held off on purpose, else
    /// missed.
    fn count_passed(&mut self, delta: u64) {
        if self.held {
            self.pending.skipped += delta - 1;
        } else {
            self.pending.missed += delta - 1;
        }
    }

    /// Takes the copies the spotter made of frames this thread had not seen (it was not
    /// scheduled in time); `wait`: even if the spotter is handing one over right now.
    /// Returns how many frames went by, if any copy was taken.
    fn take_handed_over(&mut self, wait: bool) -> Option<u64> {
        let copies: Vec<SpotCopy> = if wait {
            lock(&self.handover.copies).drain(..).collect()
        } else {
            match self.handover.copies.try_lock() {
                Ok(mut q) => q.drain(..).collect(),
                Err(_) => return None,
            }
        };
        if copies.is_empty() {
            return None;
        }
        let mut passed = None;
        for c in copies {
            let Some(delta) = frames_ahead(c.frame_seq, self.last_frame)
                .filter(|_| c.generation == self.generation)
            else {
                continue;
            };
            self.pending.seen += delta;
            self.count_passed(delta);
            self.held = false;
            self.hot = c.hot;
            self.watched_buf = c.watched_buf;
            self.record(c.frame_seq, c.t_ns, c.latency, &c.watched);
            self.last_frame = c.frame_seq;
            // Relaxed: a hint for the spotter, with no data behind it.
            self.handover.taken.store(c.frame_seq, Ordering::Relaxed);
            *passed.get_or_insert(0) += delta;
        }
        passed
    }

    /// Keeps a consistent copy now in `self.hot` and `self.watched_buf`.
    fn record(&mut self, frame_seq: u64, now: u64, latency: Option<u64>, watched: &[u32]) {
        let g = &self.attached.geometry;
        let (o, a) = (g.obs_size as usize, g.act_size as usize);
        self.pending.sampled += 1;
        // The newest consistent copy is kept; the other buffer takes the next copy.
        std::mem::swap(&mut self.hot, &mut self.last_good);
        self.last_good_frame = frame_seq;
        let hot = &self.last_good;
        let agg = aggregate(frame_seq, now, hot, latency, &mut self.scratch);
        self.pending.frames.push(agg);
        for (k, &e) in watched.iter().enumerate() {
            let i = e as usize;
            let flag = |v: &[u8], bit: u8| {
                if v.get(i).is_some_and(|&x| x != 0) {
                    bit
                } else {
                    0
                }
            };
            let flags = flag(&hot.dones, FLAG_DONE)
                | hot
                    .truncateds
                    .as_deref()
                    .map_or(0, |t| flag(t, FLAG_TRUNCATED))
                | flag(&hot.resets, FLAG_RESET);
            self.pending.points.push((
                e,
                EnvPoint {
                    frame_seq,
                    t_ns: now,
                    reward: hot.rewards.get(i).copied().unwrap_or(f32::NAN),
                    flags,
                },
            ));
            let Some(values) = self.watched_buf.get(k * (o + a)..(k + 1) * (o + a)) else {
                continue;
            };
            self.pending.details.push((
                e,
                EnvDetail {
                    frame_seq,
                    t_ns: now,
                    values: values.into(),
                },
            ));
        }
    }

    /// Moves pending samples into the shared data if the lock is free (readers never
    /// make the sampler wait), or when they have piled up.
    fn flush(&mut self, settings: &SamplerSettings, counters: bool) {
        let data = Arc::clone(&self.data);
        let Ok(mut d) = data.try_lock() else {
            if self.pending.frames.len() < 100_000 {
                return;
            }
            self.flush_locked(&mut lock(&data), settings, counters);
            return;
        };
        self.flush_locked(&mut d, settings, counters);
    }

    fn flush_locked(&mut self, d: &mut SamplerData, settings: &SamplerSettings, counters: bool) {
        if d.generation != self.generation {
            // The samples belong to the segment that was replaced.
            self.pending = Pending::default();
            return;
        }
        let p = std::mem::take(&mut self.pending);
        d.stats.frames_seen += p.seen;
        d.stats.frames_sampled += p.sampled;
        d.stats.frames_missed += p.missed;
        d.stats.frames_torn += p.torn;
        d.stats.frames_skipped += p.skipped;
        d.yielding = self.budget.yielding();
        let g = &self.attached.geometry;
        let watched = settings
            .watched_envs
            .iter()
            .filter(|&&e| e < g.num_envs)
            .count();
        let values = (g.obs_size as usize).saturating_add(g.act_size as usize);
        let (frames_cap, detail_cap) = history_capacities(settings, watched, values);
        d.frames.set_capacity(frames_cap);
        for f in p.frames {
            d.frames.push(f);
        }
        d.envs.retain(|e, _| settings.watched_envs.contains(e));
        for h in d.envs.values_mut() {
            h.points.set_capacity(frames_cap);
            h.detail.set_capacity(detail_cap);
        }
        for (e, point) in p.points {
            d.envs
                .entry(e)
                .or_insert_with(|| EnvHistory {
                    points: Ring::new(frames_cap),
                    detail: Ring::new(detail_cap),
                })
                .points
                .push(point);
        }
        for (e, detail) in p.details {
            if let Some(h) = d.envs.get_mut(&e) {
                h.detail.push(detail);
            }
        }
        if counters {
            if self.last_good_frame != 0
                && d.latest
                    .as_ref()
                    .is_none_or(|(f, _)| *f != self.last_good_frame)
            {
                d.latest = Some((self.last_good_frame, self.last_good.clone()));
            }
            d.counters = load_counters(
                &self.attached.segment,
                &self.attached.geometry,
                crate::segment::monotonic_now_ns(),
            );
        }
    }
}

impl<C: Clock> AuxWorker<C> {
    fn run(mut self) {
        crate::platform::lower_thread_priority(SAMPLER_NICE);
        let mut settings = lock(&self.settings).clone();
        let (mut last_tick, mut last_wake, mut last_image, mut last_scan) =
            (0u64, 0u64, 0u64, 0u64);
        let mut last_image_seq = None;
        let mut fps_window: (u64, u64) = (0, 0);
        self.tick();
        // Relaxed: a flag with no data behind it.
        while !self.stop.load(Ordering::Relaxed) {
            let now = crate::segment::monotonic_now_ns();
            if let Ok(s) = self.settings.try_lock() {
                settings.clone_from(&s);
            }
            let period = |hz: f32| (hz > 0.0).then(|| (1e9 / hz) as u64);
            let (image_period, scan_period) =
                (period(settings.max_image_hz), period(settings.scan_hz));
            if now.saturating_sub(last_tick) >= AUX_TICK_NS {
                last_tick = now;
                self.tick();
            }
            if image_period.is_some_and(|p| now.saturating_sub(last_image) >= p) {
                last_image = now;
                if let Some((seq, took)) =
                    self.capture_image(now, last_image_seq, settings.image_bytes)
                {
                    fps_window.1 += u64::from(took);
                    last_image_seq = Some(seq);
                }
            }
            if now.saturating_sub(fps_window.0) >= 1_000_000_000 {
                let secs = now.saturating_sub(fps_window.0) as f32 / 1e9;
                lock(&self.data).image_fps = fps_window.1 as f32 / secs;
                fps_window = (now, 0);
            }
            if scan_period.is_some_and(|p| now.saturating_sub(last_scan) >= p) {
                last_scan = now;
                self.scan(&settings);
            }
            if now.saturating_sub(last_wake) >= self.repaint_interval_ns {
                last_wake = now;
                (self.waker)();
            }
            // Asleep until the next thing is due: a wakeup costs a busy machine a context
            // switch. Settings are read again within AUX_MAX_SLEEP_NS.
            let due = [
                Some(last_tick + AUX_TICK_NS),
                Some(fps_window.0 + 1_000_000_000),
                Some(last_wake + self.repaint_interval_ns),
                image_period.map(|p| last_image + p),
                scan_period.map(|p| last_scan + p),
            ];
            let next = due.into_iter().flatten().min().unwrap_or(now);
            let after = crate::segment::monotonic_now_ns();
            std::thread::sleep(Duration::from_nanos(
                next.saturating_sub(after)
                    .clamp(1_000_000, AUX_MAX_SLEEP_NS),
            ));
        }
    }

    fn seg(&self) -> &Segment {
        &self.watcher.attached().segment
    }

    fn geometry(&self) -> &Geometry {
        &self.watcher.attached().geometry
    }

    fn tick(&mut self) {
        let before = self.watcher.reattach_count;
        let report = self.watcher.tick();
        let mut d = lock(&self.data);
        if self.watcher.reattach_count != before {
            // A new segment: start the histories over.
            let a = self.watcher.attached();
            d.geometry = Arc::new(a.geometry.clone());
            d.generation = u64::from(self.watcher.reattach_count);
            d.label = a.label();
            d.frames.clear();
            d.envs.clear();
            d.latest = None;
            d.image = None;
            d.scan = Scan::default();
        }
        d.report = Some(report);
    }

    /// Copies the image region when `image_seq` moved. Returns (image_seq, copied).
    fn capture_image(&mut self, now: u64, last: Option<u64>, budget: usize) -> Option<(u64, bool)> {
        let g = self.geometry().clone();
        let img = g.image?;
        // The copy, and the window's RGBA textures of it.
        let pixels = u64::from(g.num_envs) * u64::from(img.width) * u64::from(img.height);
        let cost = pixels.saturating_mul(u64::from(img.channels) + 4);
        if cost > budget as u64 {
            let mut d = lock(&self.data);
            d.image = None;
            if d.image_note.is_none() {
                d.image_note = Some(format!(
                    "camera images are not copied: {:.1} MiB with their textures, over the {:.1} MiB the memory budget gives them (Settings)",
                    cost as f64 / 1048576.0,
                    budget as f64 / 1048576.0
                ));
            }
            return None;
        }
        let seg = self.seg();
        let seq = g
            .counters
            .ext
            .and_then(|e| seg.load_u64(e.image_seq))
            .unwrap_or(0);
        if Some(seq) == last {
            return Some((seq, false));
        }
        let region = g.region(RegionKind::Image)?;
        let len = usize::try_from(region.length_bytes).ok()?;
        let copy = snapshot::guarded_read(seg, &g, 16, |s| {
            s.read_vec(region.offset_bytes, len).unwrap_or_default()
        });
        let mut d = lock(&self.data);
        d.image_note = None;
        if copy.consistent || copy.guard == snapshot::Guard::Unguarded {
            d.stats.images_captured += 1;
            d.image = Some(ImageFrame {
                image_seq: seq,
                frame_seq: copy.frame_seq,
                width: img.width,
                height: img.height,
                channels: img.channels,
                num_envs: g.num_envs,
                pixels: Arc::new(copy.value),
                captured_ns: now,
                consistent: copy.consistent,
            });
            Some((seq, true))
        } else {
            d.stats.images_torn += 1;
            None
        }
    }

    fn scan(&mut self, settings: &SamplerSettings) {
        let g = self.geometry().clone();
        let seg = self.seg();
        let read = |kind| -> Vec<f32> {
            g.region(kind)
                .and_then(|r| seg.read_vec(r.offset_bytes, usize::try_from(r.length_bytes).ok()?))
                .map(|b| f32s_from_bytes(&b))
                .unwrap_or_default()
        };
        let copy = snapshot::guarded_read(seg, &g, 16, |_| {
            (
                read(RegionKind::Obs),
                read(RegionKind::Act),
                read(RegionKind::Rewards),
            )
        });
        if !copy.consistent && copy.guard != snapshot::Guard::Unguarded {
            return;
        }
        let (obs, act, rewards) = copy.value;
        let mut scan = scan_values(
            &g,
            &obs,
            &act,
            &rewards,
            (settings.obs_limit, settings.act_limit),
            copy.frame_seq,
        );
        let mut d = lock(&self.data);
        scan.scans = d.scan.scans + 1;
        d.scan = scan;
    }
}

#[cfg(test)]
mod tests;
