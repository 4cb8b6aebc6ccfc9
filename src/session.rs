//! What an attachment holds for the window: its own read-only mapping, the sampler, a
//! traffic tap thread ([`crate::traffic::TrafficTap`]) and, once used, a control worker
//! thread ([`crate::control::ControlWorker`]). Nothing here draws, and nothing here
//! blocks its caller: readers take short locks on data that background threads fill.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::attach::{Attached, Target, attach};
use crate::clock::MonotonicClock;
use crate::control::{ControlWorker, lease_holder, unavailable_reason};
use crate::layout::LayoutChoice;
use crate::sampler::{Sampler, SamplerSettings};
use crate::traffic::{TrafficLimits, TrafficTap};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
