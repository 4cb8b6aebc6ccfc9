//! What the sampler shares with its readers, and the settings they give it.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::history::Ring;
use crate::follower::FrameCounts;
use crate::watch::Report;
use lrbc::attach::Attached;
use lrbc::layout::Geometry;
use lrbc::snapshot::HotData;

pub use crate::busy::{
    BUSY_READER_WAKE_NS, DEFAULT_BUSY_BUDGET_PERCENT, WINDOW_BUSY_BUDGET_PERCENT,
};

/// `done` in [`EnvPoint::flags`].
pub const FLAG_DONE: u8 = 1;
/// `truncated` in [`EnvPoint::flags`].
pub const FLAG_TRUNCATED: u8 = 2;
/// The client asked for a reset before this frame.
pub const FLAG_RESET: u8 = 4;

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
    /// The follower's frames while the sampler was attached, added up; in JSON, their
    /// `frames_*` keys. Those let pass on purpose (`skipped`) are the budget's on a busy
    /// machine (see [`SamplerSettings::busy_budget_percent`]).
    #[serde(flatten)]
    pub frames: FrameCounts,
    pub images_captured: u64,
    pub images_torn: u64,
}

/// What the sampler shares with its readers.
#[derive(Clone, Debug)]
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
    /// The data of a sampler just attached: empty histories sized by `settings`.
    pub(super) fn new(attached: &Attached, settings: &SamplerSettings) -> Self {
        Self::empty(
            Arc::new(attached.geometry.clone()),
            attached.label(),
            settings.history_frames,
        )
    }

    /// Nothing yet of the source `label` of `geometry`; room for `frames` frames of
    /// overview.
    pub fn empty(geometry: Arc<Geometry>, label: String, frames: usize) -> Self {
        Self {
            geometry,
            generation: 0,
            label,
            report: None,
            stats: SamplerStats::default(),
            counters: Counters::default(),
            frames: Ring::new(frames),
            envs: BTreeMap::new(),
            latest: None,
            image: None,
            image_fps: 0.0,
            yielding: false,
            image_note: None,
        }
    }

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
    pub watched_envs: super::WatchedEnvs,
    /// Frames of overview and reward history kept; 0 keeps none, and no frame's overview
    /// figures are worked out (a command that prints lines shows none).
    pub history_frames: usize,
    /// Frames of observation/action history kept per watched env.
    pub detail_frames: usize,
    /// Bytes the histories may hold (overview, watched envs' points and rows): the
    /// frames kept are the fewer of `history_frames` and what fits.
    pub history_bytes: usize,
    /// Bytes a copy of the image region and its textures may take; a larger region
    /// is not copied (and the reason is shown).
    pub image_bytes: usize,
    /// Camera images copied at most this often; 0 copies none.
    pub max_image_hz: f32,
    /// Run the detector (`crate::detect`) over every frame, with these settings; the
    /// events it finds are kept within this many.
    pub detect: Option<(crate::detect::DetectSettings, usize)>,
    /// Count every env's episodes (`crate::episodes`) over every frame, keeping what
    /// this says of them.
    pub episodes: Option<crate::episodes::BookDetail>,
    /// While the machine has no spare CPU, the frame thread uses at most this share of
    /// one core (percent), skipping frames to stay within it; None (or 0) follows every
    /// frame whatever it costs the run.
    pub busy_budget_percent: Option<f32>,
}

impl Default for SamplerSettings {
    fn default() -> Self {
        Self {
            watched_envs: super::WatchedEnvs::new(0..4),
            history_frames: 180_000,
            detail_frames: 30_000,
            history_bytes: crate::memory::MemoryBudget::default().histories(),
            image_bytes: crate::memory::MemoryBudget::default().camera_images(),
            max_image_hz: 30.0,
            detect: None,
            episodes: None,
            busy_budget_percent: Some(DEFAULT_BUSY_BUDGET_PERCENT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histories_are_sized_to_their_bytes_or_to_the_frames_asked_for() {
        let per_frame = size_of::<FrameAgg>() + 4 * size_of::<EnvPoint>();
        let per_row = size_of::<EnvDetail>() + crate::memory::heap(112 * 4);
        // The default budget holds train4096's (112 values per env, four envs watched)
        // two minutes of overview at 1 kHz at least (half the histories' share), and rows
        // for the rest of the budget.
        let s = SamplerSettings::default();
        let (frames, detail) = history_capacities(&s, 4, 112);
        assert!((120_000..=s.history_frames).contains(&frames), "{frames}");
        assert!(frames * per_frame <= s.history_bytes / 2);
        assert!(detail > 10_000 && detail <= s.detail_frames, "{detail}");
        assert!(frames * per_frame + 4 * detail * per_row <= s.history_bytes);
        // A small segment gets all the rows it asks for (the overview costs the same
        // per frame whatever the segment).
        assert_eq!(history_capacities(&s, 4, 6), (frames, s.detail_frames));
        // A budget of twice the default holds all the overview asked for.
        let big = SamplerSettings {
            history_bytes: 2 * s.history_bytes,
            ..SamplerSettings::default()
        };
        assert_eq!(history_capacities(&big, 4, 6).0, big.history_frames);
        // A tight budget: the overview takes at most half, the rows the rest.
        let tight = SamplerSettings {
            history_bytes: 4 << 20,
            ..SamplerSettings::default()
        };
        let (frames, detail) = history_capacities(&tight, 4, 112);
        assert!(frames < tight.history_frames && detail < tight.detail_frames);
        assert!(frames * per_frame <= tight.history_bytes / 2);
        let used = frames * per_frame + 4 * detail * per_row;
        assert!(used <= tight.history_bytes);
        assert!(
            used + 4 * per_row > tight.history_bytes,
            "{frames} {detail}"
        );
        // No env watched: the overview takes it all.
        assert_eq!(
            history_capacities(&tight, 0, 112).0,
            tight.history_bytes / size_of::<FrameAgg>()
        );
    }
}
