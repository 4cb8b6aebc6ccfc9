//! The simulated engine: creates a segment, steps batched cart-poles in lock-step with
//! the client (or free-running), keeps every counter of the spec, renders camera
//! images, answers every request on the command and control rings, and plants the
//! faults it is asked to (`plant`).

mod plant;
mod respond;
mod step;

use std::path::PathBuf;
use std::time::Duration;

use super::dynamics::CartPoles;
use super::services::Services;
use lrbc::clock::{Clock, MonotonicClock};
use lrbc::layout::plan::{Plan, PlanError, PlanLayout, PlanSpec};
use lrbc::layout::{LrbcHeader, LuckyHeader, Names, Preamble};
use lrbc::segment::{
    Location, NameError, OpenError, SegmentRw, shm_location, shm_path, validate_name,
};
pub use plant::{
    DEFAULT_DONE_SHARE, DEFAULT_STALL, MAX_STALL, NonFinite, Plant, PlantChannel, PlantError,
    PlantedFault, done_count,
};
use respond::Rings;
pub use respond::lucky_response;

/// Observations are computed in chunks of this many floats (64 KiB) and copied into the
/// segment chunk by chunk, so they never make a round trip through main memory.
const OBS_CHUNK_FLOATS: usize = 16 * 1024;

/// Training is lock-step with the client; inference free-runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Training,
    Inference,
}

/// What the engine should create and how it should run.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    pub name: String,
    pub layout: PlanLayout,
    pub num_envs: u32,
    pub obs_size: u32,
    pub act_size: u32,
    pub image: Option<(u32, u32, u32)>,
    pub mode: Mode,
    /// Steps per second in inference mode.
    pub hz: f64,
    pub ring_size: u32,
    /// Control rings (LRBC with the extension only).
    pub ctl_ring_size: Option<u32>,
    pub force: bool,
    /// `false`: move the counters only (the transport's own cost, for `sim bench`).
    pub dynamics: bool,
    /// Camera images per second.
    pub camera_hz: f64,
    pub seed: u64,
    /// At this step, env 0's first observation and its reward are written as NaN (a
    /// fault for recorders and NaN guards to find).
    pub nan_at_step: Option<u64>,
    /// Faults planted in the frames, for diagnosis tools to find; held against the
    /// sizes by [`EngineConfig::check_plants`].
    pub plants: Vec<Plant>,
}

/// The seed's size examples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// 4096 envs, obs 100, act 12, no images.
    Train4096,
    /// 64 envs, obs 32, act 8, 64×64 RGB.
    Cams64,
    /// 16 envs, obs 32, act 8, 256×256 RGB.
    Cams16,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Self; 3] = [Self::Train4096, Self::Cams64, Self::Cams16];

    /// `(num_envs, obs_size, act_size, image)`.
    pub fn sizes(self) -> (u32, u32, u32, Option<(u32, u32, u32)>) {
        match self {
            Self::Train4096 => (4096, 100, 12, None),
            Self::Cams64 => (64, 32, 8, Some((64, 64, 3))),
            Self::Cams16 => (16, 32, 8, Some((256, 256, 3))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Train4096 => "train4096",
            Self::Cams64 => "cams64",
            Self::Cams16 => "cams16",
        }
    }
}

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{0}")]
    Name(#[from] NameError),
    #[error("{0}")]
    Plan(#[from] PlanError),
    #[error("segment {name} already exists (use --force to replace it)")]
    Exists { name: String },
    #[error("{0}")]
    Open(#[from] OpenError),
    #[error(
        "the segment needs {need_bytes} bytes but only {available_bytes} bytes of memory are available"
    )]
    NoMemory {
        need_bytes: u64,
        available_bytes: u64,
    },
    #[error("{0}")]
    Config(String),
}

/// What happened during a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineStats {
    pub steps: u64,
    pub requests: u64,
    pub responses_dropped: u64,
    pub images: u64,
}

/// A running simulated engine. Dropping it removes the segment.
pub struct Engine {
    cfg: EngineConfig,
    seg: SegmentRw,
    plan: Plan,
    sim: CartPoles,
    services: Services,
    obs_names: Vec<String>,
    act_names: Vec<String>,
    obs: Vec<f32>,
    actions: Vec<f32>,
    resets: Vec<u8>,
    images: Vec<u8>,
    rings: Rings,
    last_action_seq: u64,
    frame_seq: u64,
    step: u64,
    next_image_ns: u64,
    stats: EngineStats,
    scratch: Vec<u8>,
    frames: Vec<Vec<u8>>,
    /// The configuration's plants, and `nan_at_step`'s as plants.
    plants: Vec<Plant>,
    /// The action slots the last frame planted a value in.
    planted_actions: Vec<PlantedAction>,
    /// The engine's time: the frames' stamps (`frame_time_ns`), the cameras' schedule,
    /// the time the services answer with. The monotonic clock unless a test sets one;
    /// the pace of [`Engine::run`] keeps to real time either way.
    clock: std::sync::Arc<dyn Clock>,
}

/// An action slot the engine planted a value in, and the trainer's value it replaced.
#[derive(Clone, Copy, Debug)]
struct PlantedAction {
    /// The slot's index in the action region, in floats.
    slot: usize,
    trainer_value: f32,
    planted_bits: u32,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("name", &self.cfg.name)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl EngineConfig {
    /// A training-mode engine named `name` with `num_envs` envs of `obs_size`
    /// observations and `act_size` actions: no images, a 4 KiB command ring, no control
    /// rings, dynamics on, seed 3. Change what else a caller needs with `..`.
    pub fn small(
        name: String,
        layout: PlanLayout,
        num_envs: u32,
        obs_size: u32,
        act_size: u32,
    ) -> Self {
        Self {
            name,
            layout,
            num_envs,
            obs_size,
            act_size,
            image: None,
            mode: Mode::Training,
            hz: 60.0,
            ring_size: 4096,
            ctl_ring_size: None,
            force: false,
            dynamics: true,
            camera_hz: 30.0,
            seed: 3,
            nan_at_step: None,
            plants: Vec::new(),
        }
    }

    /// Holds every plant against the sizes (and the dynamics, which the values of
    /// observations, rewards and dones need): the first that does not fit, as one line
    /// naming its spec.
    pub fn check_plants(&self) -> Result<(), EngineError> {
        for plant in &self.plants {
            let checked = plant
                .check(self.num_envs, self.obs_size, self.act_size)
                .and_then(|()| {
                    if plant.needs_dynamics() && !self.dynamics {
                        Err(PlantError::NeedsDynamics)
                    } else {
                        Ok(())
                    }
                });
            if let Err(e) = checked {
                return Err(EngineError::Config(format!("--plant {plant}: {e}")));
            }
        }
        Ok(())
    }

    /// The segment this configuration describes, checked before anything is created.
    pub fn plan(&self) -> Result<(PlanSpec, Plan), EngineError> {
        validate_name(&self.name)?;
        if self.layout == PlanLayout::Lucky && self.image.is_some() {
            return Err(EngineError::Config(
                "the luckyrobots layout has no image region: drop --image (or use a preset without images)".into(),
            ));
        }
        if !(self.hz.is_finite() && self.hz > 0.0)
            || Duration::try_from_secs_f64(1.0 / self.hz).is_err()
        {
            return Err(EngineError::Config(format!(
                "--hz must be a positive rate whose period fits a duration, not {}",
                self.hz
            )));
        }
        self.check_plants()?;
        let ext = self.layout == PlanLayout::Lrbc { ext: true };
        let mut spec = PlanSpec {
            layout: self.layout,
            num_envs: self.num_envs,
            obs_size: self.obs_size,
            act_size: self.act_size,
            image: self.image,
            cmd_ring_size: self.ring_size,
            ctl_ring_size: if ext { self.ctl_ring_size } else { None },
            // Sizes are checked (below) before names are made for them.
            names: Names::default(),
            mode: u8::from(self.mode == Mode::Inference),
            server_pid: std::process::id(),
            max_size_bytes: u64::MAX,
        };
        Plan::new(&spec)?;
        let names_bytes = 16 * (u64::from(self.obs_size) + u64::from(self.act_size));
        if names_bytes > lrbc::layout::headers::LUCKY_SCHEMA_MAX_BYTES.max(1 << 20) {
            return Err(EngineError::Config(format!(
                "obs_size {} and act_size {} are too large for a names region",
                self.obs_size, self.act_size
            )));
        }
        spec.names = Names {
            obs: CartPoles::obs_names(self.obs_size as usize),
            act: CartPoles::act_names(self.act_size as usize),
        };
        let plan = Plan::new(&spec)?;
        // The engine keeps a private copy of obs, actions and images besides the segment.
        let need = plan.size_bytes.saturating_mul(2);
        let available = lrbc_platform::available_memory_bytes().unwrap_or(u64::MAX);
        if need > available {
            return Err(EngineError::NoMemory {
                need_bytes: need,
                available_bytes: available,
            });
        }
        Ok((spec, plan))
    }
}

impl Engine {
    /// Creates the segment, fully initialised before it can be attached to. On Linux a
    /// file (mode 0600) is written under a temporary name and then renamed to
    /// `/dev/shm/NAME`; on Windows the named mapping is created as the engine creates it
    /// (`CreateFileMappingW` on the paging file), and its first word (magic and version)
    /// is stored last, so that a reader sees no LRBC segment until it is complete.
    pub fn create(cfg: EngineConfig) -> Result<Self, EngineError> {
        let (spec, plan) = cfg.plan()?;
        let location = shm_location(&cfg.name)?;
        if !cfg.force && location.exists() {
            return Err(EngineError::Exists {
                name: cfg.name.clone(),
            });
        }
        let exists = |e: OpenError| match e {
            OpenError::Exists { .. } => EngineError::Exists {
                name: cfg.name.clone(),
            },
            other => EngineError::Open(other),
        };
        let (seg, publish_to) = match &location {
            Location::File { path, .. } => {
                let tmp: PathBuf = shm_path(&format!(".{}.{}.tmp", cfg.name, std::process::id()))?;
                let seg = SegmentRw::create(&tmp, plan.size_bytes, true)?;
                (seg, Some(path.clone()))
            }
            Location::Named(_) => (
                SegmentRw::create_at(&location, plan.size_bytes, false).map_err(exists)?,
                None,
            ),
        };
        let initial = plan.initial_bytes(&spec);
        // The preamble (magic and version) is one word, stored last.
        let first_word = initial
            .first_chunk::<{ Preamble::SIZE_BYTES }>()
            .map_or(0, |w| u64::from_le_bytes(*w));
        seg.write_at(
            Preamble::OFFSET + Preamble::SIZE_BYTES as u64,
            initial.get(Preamble::SIZE_BYTES..).unwrap_or_default(),
        );
        let n = cfg.num_envs as usize;
        let sim = CartPoles::new(n, cfg.obs_size as usize, cfg.act_size as usize, cfg.seed);
        let services = Services::default();
        if spec.layout == (PlanLayout::Lrbc { ext: true }) {
            seg.store_u32(LrbcHeader::SERVICE_FLAGS_OFFSET, services.flags());
        }
        let rings = Rings::new(&seg, &cfg, &spec, &plan);
        let nan_at_step = cfg.nan_at_step.into_iter().flat_map(|step| {
            [PlantChannel::Obs { index: 0 }, PlantChannel::Reward].map(|channel| Plant {
                step,
                fault: PlantedFault::Value {
                    value: NonFinite::Nan,
                    env: 0,
                    channel,
                    frames: 1,
                },
            })
        });
        let plants = cfg.plants.iter().cloned().chain(nan_at_step).collect();
        let mut engine = Self {
            obs: vec![
                0.0;
                (n * cfg.obs_size as usize).min(OBS_CHUNK_FLOATS.max(cfg.obs_size as usize))
            ],
            actions: vec![0.0; n * cfg.act_size as usize],
            resets: vec![0; n],
            images: cfg
                .image
                .map_or_else(Vec::new, |(w, h, c)| vec![0u8; n * (w * h * c) as usize]),
            obs_names: spec.names.obs.clone(),
            act_names: spec.names.act.clone(),
            cfg,
            seg,
            plan,
            sim,
            services,
            rings,
            last_action_seq: 0,
            frame_seq: 0,
            step: 0,
            next_image_ns: 0,
            stats: EngineStats::default(),
            scratch: Vec::new(),
            frames: Vec::new(),
            plants,
            planted_actions: Vec::new(),
            clock: std::sync::Arc::new(MonotonicClock),
        };
        // The first frame: initial observations and images, before anyone can attach.
        engine.write_frame(false);
        // Release: pairs with the Acquire fence after a reader's copy of the first word
        // (`layout::inspect` copies the rest of the header after it), so a reader that
        // sees the magic sees the whole segment.
        engine.seg.store_u64(Preamble::OFFSET, first_word);
        if let Some(path) = publish_to {
            let force = engine.cfg.force;
            let name = engine.cfg.name.clone();
            engine.seg.publish(&path, force).map_err(|e| match e {
                OpenError::Exists { .. } => EngineError::Exists { name },
                other => EngineError::Open(other),
            })?;
        }
        if engine.cfg.layout == PlanLayout::Lucky {
            // Release: the client waits for engine_ready, then reads the header.
            engine.seg.store_u32(LuckyHeader::ENGINE_READY_OFFSET, 1);
        }
        Ok(engine)
    }

    pub fn name(&self) -> &str {
        &self.cfg.name
    }

    /// The engine's time from now on (see the field `clock`): tests stepping the engine
    /// themselves set a manual clock, so that its stamps are the same on every run.
    pub fn set_clock(&mut self, clock: std::sync::Arc<dyn Clock>) {
        self.clock = clock;
    }

    pub fn size_bytes(&self) -> u64 {
        self.plan.size_bytes
    }

    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    fn is_ext(&self) -> bool {
        self.cfg.layout == PlanLayout::Lrbc { ext: true }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if self.cfg.layout == PlanLayout::Lucky {
            self.seg.store_u32(LuckyHeader::ENGINE_READY_OFFSET, 0);
        }
        self.seg.unlink_if_ours();
    }
}

#[cfg(test)]
mod tests;
