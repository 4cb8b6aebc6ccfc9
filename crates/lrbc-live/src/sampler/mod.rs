//! The sampler: the window's and `watch`'s consumer of the frame follower
//! ([`crate::follower`]), which copies every frame it can under the guard of spec 3.2. The
//! sampler keeps an aggregate of each frame (rewards, dones, truncateds and resets of
//! all envs), the observations and actions of the watched envs, and camera images when
//! `image_seq` moves; and, when asked, it runs the detector ([`crate::detect`]) on the
//! same follower, told the segment's state by the auxiliary thread, and counts every
//! env's episodes ([`crate::episodes`]). History is bounded.
//! The UI thread only reads the shared data and never waits on the engine.
//!
//! One file per part: the shared data (`data`), bounded histories (`history`), the
//! per-frame reductions (`reduce`), the live counters (`counters`), the follower's sink
//! (`sink`), the watched envs and their rule (`watched`), and the auxiliary thread
//! (`auxiliary`: state, re-attachment, images). On a busy machine the follower keeps to
//! the budget of [`crate::busy`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::detect::{DetectSettings, Diagnosis, EventLog, SettingsError};
use crate::episodes::{EpisodeBook, EpisodeTracker};
use crate::follower::Subscription;
use crate::watch::AttachmentWatch;
use lrbc::attach::Attached;
use lrbc::clock::Clock;
pub(super) use lrbc::sync::lock;

mod auxiliary;
mod counters;
mod data;
mod history;
mod reduce;
mod sink;
mod watched;

pub use data::{
    BUSY_READER_WAKE_NS, Counters, DEFAULT_BUSY_BUDGET_PERCENT, EnvDetail, EnvHistory, EnvPoint,
    FLAG_DONE, FLAG_RESET, FLAG_TRUNCATED, FrameAgg, ImageFrame, SamplerData, SamplerSettings,
    SamplerStats, WINDOW_BUSY_BUDGET_PERCENT, history_capacities,
};
pub use history::Ring;
pub use watched::{MAX_WATCHED_ENVS, Watched, WatchedEnvs};

use crate::busy::CpuTimes;
use auxiliary::AuxWorker;
use sink::SamplerSink;

/// Wakes the reader (the UI's `request_repaint`), at most at the given rate.
pub type Waker = Box<dyn Fn() + Send>;

/// A running sampler: its place at the frame follower, its auxiliary thread, and the
/// data they share.
#[derive(Debug)]
pub struct Sampler {
    data: Arc<Mutex<SamplerData>>,
    settings: Arc<Mutex<SamplerSettings>>,
    stop: Arc<AtomicBool>,
    follower: Option<Arc<Subscription>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    diagnosis: Option<Diagnosis>,
    episodes: Option<EpisodeTracker>,
}

fn spawn(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name(name.into()).spawn(f)
}

impl Sampler {
    /// Starts sampling `attached`. The reader repaints at `repaint_hz`: `waker` is called
    /// at that rate, and while yielding to a busy machine the follower takes no more than
    /// one frame per repaint. `clock` decides the segment's state and rates, and stamps
    /// the frames when this sampler starts the segment's follower (see
    /// [`crate::follower::subscribe_with_clock`]).
    pub fn start<C: Clock + Clone + 'static>(
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
    fn start_with_load<C: Clock + Clone + 'static>(
        attached: Attached,
        settings: SamplerSettings,
        clock: C,
        waker: Waker,
        repaint_hz: f32,
        read_load: fn() -> Option<CpuTimes>,
    ) -> std::io::Result<Self> {
        let data = Arc::new(Mutex::new(SamplerData::new(&attached, &settings)));
        let repaint_interval_ns = (1e9 / repaint_hz.max(1.0)) as u64;
        let detect = settings.detect.clone();
        let episodes_detail = settings.episodes;
        let busy_budget_percent = settings.busy_budget_percent;
        let settings = Arc::new(Mutex::new(settings));
        let stop = Arc::new(AtomicBool::new(false));
        // The sampler joins the follower first: when it starts the follower, the frames
        // (and so the detector's events and the episodes) are stamped by its clock.
        let sink = SamplerSink::new(&data, &settings, repaint_interval_ns);
        let follower = Arc::new(crate::follower::subscribe_with_clock(
            &attached,
            Box::new(sink),
            read_load,
            Arc::new(clock.clone()),
        )?);
        let diagnosis = match &detect {
            Some((detect, kept)) => Some(
                Diagnosis::start_with_load(
                    &attached,
                    detect.clone(),
                    busy_budget_percent,
                    *kept,
                    read_load,
                )
                .map_err(std::io::Error::other)?,
            ),
            None => None,
        };
        let episodes = match episodes_detail {
            Some(detail) => Some(
                EpisodeTracker::start_with_load(&attached, detail, busy_budget_percent, read_load)
                    .map_err(std::io::Error::other)?,
            ),
            None => None,
        };
        // The auxiliary thread keeps the watcher (state, re-attachment) and the images,
        // so that the follower's looks stay short; it tells the detector the state.
        let aux = AuxWorker {
            watcher: AttachmentWatch::new(attached, clock.clone()),
            clock,
            data: Arc::clone(&data),
            settings: Arc::clone(&settings),
            stop: Arc::clone(&stop),
            waker,
            repaint_interval_ns,
            follower: Arc::clone(&follower),
            feed: diagnosis.as_ref().map(Diagnosis::feed),
        };
        let aux_thread = spawn("lrbc-sampler-aux", move || aux.run())?;
        Ok(Self {
            data,
            settings,
            stop,
            follower: Some(follower),
            threads: vec![aux_thread],
            diagnosis,
            episodes,
        })
    }

    /// Every env's episodes, when the sampler counts them (lock briefly).
    pub fn episodes(&self) -> Option<&Arc<Mutex<EpisodeBook>>> {
        self.episodes.as_ref().map(EpisodeTracker::book)
    }

    /// The events the detector found, when the sampler runs it (lock briefly).
    pub fn events(&self) -> Option<&Arc<Mutex<EventLog>>> {
        self.diagnosis.as_ref().map(Diagnosis::log)
    }

    /// The detector, when the sampler runs it: where the rings' faults go, its settings.
    pub fn diagnosis(&self) -> Option<&Diagnosis> {
        self.diagnosis.as_ref()
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

    /// New settings, all but the detector's: those are checked against the segment
    /// first, and change only through [`Self::set_detect`].
    pub fn set_settings(&self, mut s: SamplerSettings) {
        if let Some(d) = &self.diagnosis {
            d.set_busy_budget(s.busy_budget_percent);
        }
        if let Some(e) = &self.episodes {
            e.set_busy_budget(s.busy_budget_percent);
        }
        let mut current = lock(&self.settings);
        s.detect.clone_from(&current.detect);
        *current = s;
    }

    /// What the detector looks for from its next frame. Err: these settings cannot be
    /// used on this segment, and the detector keeps its own. No detector runs: nothing
    /// to change.
    pub fn set_detect(&self, detect: DetectSettings) -> Result<(), SettingsError> {
        let Some(d) = &self.diagnosis else {
            return Ok(());
        };
        if detect != d.settings() {
            d.set_settings(detect.clone())?;
        }
        if let Some((kept, _)) = &mut lock(&self.settings).detect {
            *kept = detect;
        }
        Ok(())
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
        let mut ended: Vec<String> = self
            .threads
            .iter()
            .filter(|t| t.is_finished())
            .map(|t| t.thread().name().unwrap_or("sampler").to_string())
            .collect();
        let follower_ended = self.follower.as_ref().is_some_and(|f| f.thread_ended())
            || self.diagnosis.as_ref().is_some_and(Diagnosis::thread_ended)
            || self
                .episodes
                .as_ref()
                .is_some_and(EpisodeTracker::thread_ended);
        if follower_ended {
            ended.push("lrbc-follower".into());
        }
        ended
    }

    /// Stops the threads and waits for them.
    pub fn stop(&mut self) {
        // Relaxed: a flag with no data behind it.
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            // A resting thread wakes now rather than at the end of its rest.
            t.thread().unpark();
            // Only waits for the thread's end: a panic in it was printed when it happened.
            let _ = t.join();
        }
        // The last holder of the subscription: the sink leaves the follower.
        self.follower = None;
        if let Some(d) = &mut self.diagnosis {
            d.stop();
        }
        if let Some(e) = &mut self.episodes {
            e.stop();
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
