//! A simulated engine and client on threads of this process: what the screenshots
//! command, the UI benchmark and the window's tests inspect.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use crate::client::{self, ClientConfig, Policy};
use crate::engine::{Engine, EngineConfig, Preset};

/// A run that could not be started, as one line.
#[derive(Debug, thiserror::Error)]
pub enum SimRunError {
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    #[error("cannot start a thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// A simulated engine and client running on threads of this process.
pub struct SimRun {
    pub name: String,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for SimRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimRun")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl SimRun {
    /// The run's segment, as a target to attach to.
    pub fn target(&self) -> lrbc::attach::Target {
        lrbc::attach::Target::Shm(self.name.clone())
    }

    /// Starts an engine with `preset` and a client paced at `hz` (commands on).
    pub fn start(preset: Preset, hz: Option<f64>) -> Result<Self, SimRunError> {
        Self::start_planted(preset, hz, Vec::new(), None)
    }

    /// [`SimRun::start`], the engine planting `plants` (`sim engine --plant`), the client
    /// in `rollout`s (`sim client --rollout --update`) when given.
    pub fn start_planted(
        preset: Preset,
        hz: Option<f64>,
        plants: Vec<crate::engine::Plant>,
        rollout: Option<client::Rollout>,
    ) -> Result<Self, SimRunError> {
        // The count keeps two runs of one process apart (a clock read twice in one tick,
        // as Windows' can be, gives one value); the time keeps this process's runs apart
        // from a segment a dead process of the same id left behind. Relaxed: a counter
        // with nothing published behind it, paired with no other access.
        static RUNS: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "lrbc-sim-{}-{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed),
            lrbc::clock::monotonic_now_ns() % 1_000_000
        );
        let (num_envs, obs_size, act_size, image) = preset.sizes();
        let cfg = EngineConfig {
            image,
            ring_size: 512 * 1024,
            ctl_ring_size: Some(64 * 1024),
            seed: 7,
            plants,
            ..EngineConfig::small(
                name.clone(),
                lrbc::layout::plan::PlanLayout::Lrbc { ext: true },
                num_envs,
                obs_size,
                act_size,
            )
        };
        let mut engine = Engine::create(cfg)?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let s = Arc::clone(&stop);
        threads.push(
            std::thread::Builder::new()
                .name("sim-engine".into())
                .spawn(move || {
                    engine.run(&s);
                })?,
        );
        let s = Arc::clone(&stop);
        let client_cfg = ClientConfig {
            name: name.clone(),
            steps: None,
            hz,
            policy: Policy::Balance,
            commands: true,
            record_latency: false,
            step_timeout: Duration::from_secs(5),
            rollout,
        };
        threads.push(
            std::thread::Builder::new()
                .name("sim-client".into())
                .spawn(move || {
                    // A client that stops early (the engine gone) leaves the run to its
                    // engine: the tests and benchmarks that use it watch the frames.
                    let _ = client::run(&client_cfg, &s);
                })?,
        );
        Ok(Self {
            name,
            stop,
            threads,
        })
    }
}

impl Drop for SimRun {
    fn drop(&mut self) {
        // Relaxed: a flag with no data behind it.
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            // Only waits for the thread's end: a panic in it was printed when it happened.
            let _ = t.join();
        }
    }
}
