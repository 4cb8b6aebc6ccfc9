//! The sampler: background threads that follow `frame_seq` and take a consistent
//! snapshot of every frame they can (spec 3.2): rewards, dones, truncateds and resets of
//! all envs, the observations and actions of the watched envs, camera images when
//! `image_seq` moves, and a periodic scan of every env for NaN, Inf and out-of-range
//! values. History is bounded. Torn snapshots are retried, then counted, never kept.
//! The UI thread only reads the shared data and never waits on the engine.
//!
//! One file per part: the shared data (`data`), bounded histories (`history`), the
//! per-frame reductions (`reduce`), the frame accounting (`accounting`, a pure state
//! machine), the guarded copy (`copy`), the polling pace (`pace`), and the three threads:
//! `frames`, `spotter` and `auxiliary`. On a busy machine the frame thread keeps to the
//! budget of `crate::busy`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::attach::Attached;
use crate::clock::Clock;
use crate::watch::Watcher;

mod accounting;
mod auxiliary;
mod copy;
mod data;
mod frames;
mod history;
mod pace;
mod reduce;
mod spotter;

pub use data::{
    BadValue, Channel, Counters, DEFAULT_BUSY_BUDGET_PERCENT, EnvDetail, EnvHistory, EnvPoint,
    FLAG_DONE, FLAG_RESET, FLAG_TRUNCATED, FrameAgg, ImageFrame, SamplerData, SamplerSettings,
    SamplerStats, Scan, history_capacities,
};
pub use history::Ring;
pub use reduce::scan_values;

use crate::busy::{Budget, CpuTimes};
use auxiliary::AuxWorker;
use frames::FrameWorker;
use spotter::{Handover, Spotter};

/// The sampler's threads run at this nice value: observing must not slow the run.
const SAMPLER_NICE: i32 = 10;

/// Wakes the reader (the UI's `request_repaint`), at most at the given rate.
pub type Waker = Box<dyn Fn() + Send>;

/// A running sampler: its three named threads and the data they share.
#[derive(Debug)]
pub struct Sampler {
    data: Arc<Mutex<SamplerData>>,
    settings: Arc<Mutex<SamplerSettings>>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another holder leaves the data usable (plain values).
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A sampler's parts before their threads start.
struct Parts<C: Clock> {
    data: Arc<Mutex<SamplerData>>,
    settings: Arc<Mutex<SamplerSettings>>,
    stop: Arc<AtomicBool>,
    frames: FrameWorker,
    spotter: Spotter,
    aux: AuxWorker<C>,
}

impl<C: Clock + 'static> Parts<C> {
    fn new(
        attached: Attached,
        settings: SamplerSettings,
        clock: C,
        waker: Waker,
        repaint_hz: f32,
        read_load: fn() -> Option<CpuTimes>,
    ) -> std::io::Result<Self> {
        let data = Arc::new(Mutex::new(SamplerData::new(&attached, &settings)));
        let repaint_interval_ns = (1e9 / repaint_hz.max(1.0)) as u64;
        let budget = Budget::new(settings.busy_budget_percent, repaint_interval_ns);
        let settings = Arc::new(Mutex::new(settings));
        let stop = Arc::new(AtomicBool::new(false));
        // Frames count from the moment of attach, not from when the thread starts.
        let frame_at_attach = attached
            .segment
            .load_u64(attached.geometry.counters.frame_seq)
            .unwrap_or(0);
        // The frame thread and the spotter have a mapping each; the auxiliary thread
        // keeps the watcher (state, re-attachment), the images and the value scans, so
        // that the frame thread's loop stays tight enough to catch frames that come in
        // bursts.
        let handover = Arc::new(Handover::default());
        // Relaxed: a hint for the spotter, with no data behind it.
        handover.taken.store(frame_at_attach, Ordering::Relaxed);
        let reopen = |a: &Attached| a.reopen().map_err(|e| std::io::Error::other(e.to_string()));
        let frames = FrameWorker::new(
            reopen(&attached)?,
            frame_at_attach,
            (&data, &settings, &stop),
            budget,
            read_load,
            Arc::clone(&handover),
        );
        let spotter = Spotter {
            attached: reopen(&attached)?,
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
        Ok(Self {
            data,
            settings,
            stop,
            frames,
            spotter,
            aux,
        })
    }
}

fn spawn(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name(name.into()).spawn(f)
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
            crate::busy::read_cpu_times,
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
        let Parts {
            data,
            settings,
            stop,
            mut frames,
            spotter,
            aux,
        } = Parts::new(attached, settings, clock, waker, repaint_hz, read_load)?;
        let spotter_thread = spawn("lrbc-spotter", move || spotter.run())?;
        frames.spotter = Some(spotter_thread.thread().clone());
        let frame_thread = spawn("lrbc-sampler", move || frames.run())?;
        let aux_thread = spawn("lrbc-sampler-aux", move || aux.run())?;
        Ok(Self {
            data,
            settings,
            stop,
            threads: vec![frame_thread, aux_thread, spotter_thread],
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

    /// Stops the threads and waits for them.
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

#[cfg(test)]
mod tests;
