//! The simulated client (trainer): attaches to a segment, writes actions and reset
//! flags, bumps `action_seq` and waits for `frame_seq` (lock-step), and sends a
//! realistic mix of commands, consuming the responses. In rollouts, it pauses after
//! each as an on-policy trainer updating its policy does, the engine waiting for it.
//! The stepping is here; the requests and responses are `commands`'.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::schedule::{resume_at, sleep_until, wait_for_next_tick};
use super::wait::Waiter;
use ::lrbc::clock::monotonic_now_ns;
use ::lrbc::layout::{self, Geometry, Layout, LayoutChoice, RegionKind};
use ::lrbc::rings::{lucky, v1};
use ::lrbc::segment::{NameError, SegmentRw, shm_location};
use commands::CmdRings;

mod commands;

/// How actions are chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Uniform in [-1, 1].
    #[default]
    Random,
    /// All zeros.
    Zero,
    /// A sine per env, phase-shifted by the env index.
    Sine,
    /// A noisy balancing controller reading each env's observations (cart-pole
    /// channels 0..4): episodes last long, as in a policy that has learned something.
    Balance,
}

/// An on-policy (PPO-like) trainer's loop: rollouts of `frames` steps, each followed by
/// an update of its policy that lasts `update`, during which it writes no action (the
/// engine waits: `frame_seq == action_seq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rollout {
    /// Steps in each rollout, at least 1.
    pub frames: u64,
    /// How long each update lasts, at most [`Rollout::MAX_UPDATE`].
    pub update: Duration,
}

impl Rollout {
    /// The longest update a run accepts: an hour.
    pub const MAX_UPDATE: Duration = Duration::from_secs(3600);

    /// Whether the update follows the step that made `steps_done` steps of a run that
    /// stops after `steps` (`None`: until stopped): after every `frames` steps, never
    /// after the last step of the run (nothing follows it to wait for the update).
    pub fn update_after(&self, steps_done: u64, steps: Option<u64>) -> bool {
        self.frames != 0
            && steps_done != 0
            && steps_done.is_multiple_of(self.frames)
            && steps.is_none_or(|s| steps_done < s)
    }

    /// Whether the rollout can run: at least one frame, an update of at most
    /// [`Rollout::MAX_UPDATE`].
    fn check(&self) -> Result<(), ClientError> {
        if self.frames == 0 {
            return Err(ClientError::Config(
                "a rollout must have at least 1 frame".into(),
            ));
        }
        if self.update > Self::MAX_UPDATE {
            return Err(ClientError::Config(format!(
                "an update must last at most {} s, not {:.3} s",
                Self::MAX_UPDATE.as_secs(),
                self.update.as_secs_f64()
            )));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClientConfig {
    pub name: String,
    /// Stop after this many steps (else until stopped).
    pub steps: Option<u64>,
    /// Steps per second (else as fast as the engine goes).
    pub hz: Option<f64>,
    pub policy: Policy,
    /// Send commands (GetAgentSchema, ResetAgent, streams, debug draws).
    pub commands: bool,
    /// Keep every step's round-trip time (for `sim bench`).
    pub record_latency: bool,
    /// How long to wait for one frame before giving up (an update is not part of it:
    /// the wait starts when the actions are published).
    pub step_timeout: Duration,
    /// Step in rollouts with an update after each (else without pauses).
    pub rollout: Option<Rollout>,
}

/// What happened during a run.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ClientStats {
    pub steps: u64,
    pub env_resets: u64,
    pub requests: u64,
    pub responses: u64,
    pub error_responses: u64,
    /// Frames whose `frame_seq` was not exactly the `action_seq` just sent.
    pub frame_mismatches: u64,
    pub elapsed_secs: f64,
    /// Updates made after rollouts (an update cut short by a stop counts).
    pub updates: u64,
    /// Time spent in updates, in total (part of `elapsed_secs`).
    pub update_secs: f64,
    #[serde(skip)]
    pub latencies_ns: Vec<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Name(#[from] NameError),
    #[error("{0}")]
    Open(#[from] ::lrbc::segment::OpenError),
    #[error("{0}")]
    Layout(#[from] layout::LayoutError),
    #[error(
        "no frame within {secs:.1} s of action_seq {action_seq} (is the engine running in training mode?)"
    )]
    StepTimeout { action_seq: u64, secs: f64 },
    #[error("{0}")]
    Config(String),
    /// The replayed actions: a source that cannot drive this segment, or cannot be read.
    #[error("--replay: {0}")]
    Replay(SourceError),
}

struct Offsets {
    frame_seq: u64,
    action_seq: u64,
    client_pid: u64,
    action_time_ns: Option<u64>,
    client_ready: Option<u64>,
}

/// Uniform actions in [-1, 1): twelve 5-bit values from each 64-bit draw (coarse, but a
/// random policy needs no more, and it keeps the client's share of a step small).
fn random_actions(actions: &mut [f32], state: &mut u64) {
    for chunk in actions.chunks_mut(12) {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let mut bits = *state;
        for a in chunk {
            *a = (bits & 31) as f32 * (2.0 / 32.0) - 1.0;
            bits >>= 5;
        }
    }
}

/// Why an action source cannot drive the client or give it a step: the source's own
/// error (a recording's reader's, above this crate).
pub type SourceError = Box<dyn std::error::Error + Send + Sync>;

/// Where a replaying client's actions come from: each step's in turn, instead of the
/// policy's.
pub trait ActionSource {
    /// Whether it can drive a segment of `num_envs` envs of `act_size` actions (Err: why
    /// not, one line).
    fn fits(&self, num_envs: usize, act_size: usize) -> Result<(), SourceError>;

    /// Writes the next step's actions into `actions` (`num_envs × act_size`, env by
    /// env); Ok(false): no step is left.
    fn next_actions(&mut self, actions: &mut [f32]) -> Result<bool, SourceError>;
}

/// Runs the client until `stop`, `steps`, or an error.
pub fn run(cfg: &ClientConfig, stop: &AtomicBool) -> Result<ClientStats, ClientError> {
    run_with(cfg, stop, None)
}

/// Runs the client with the actions of `source` instead of its policy's, until `stop`,
/// `steps`, the source's last step, or an error. Reset flags are set as without it:
/// every env that ended at the frame before.
pub fn run_replaying(
    cfg: &ClientConfig,
    stop: &AtomicBool,
    source: &mut dyn ActionSource,
) -> Result<ClientStats, ClientError> {
    run_with(cfg, stop, Some(source))
}

fn run_with(
    cfg: &ClientConfig,
    stop: &AtomicBool,
    mut source: Option<&mut dyn ActionSource>,
) -> Result<ClientStats, ClientError> {
    let period = step_period(cfg.hz)?;
    if let Some(r) = &cfg.rollout {
        r.check()?;
    }
    let seg = SegmentRw::open_at(&shm_location(&cfg.name)?)?;
    let g: Geometry = layout::inspect(&seg, LayoutChoice::Auto)?;
    let mut client = Client::new(&seg, &g, cfg)?;
    if let Some(src) = &source {
        src.fits(client.num_envs, client.act_size)
            .map_err(ClientError::Replay)?;
    }
    let guard = client.announce();
    if cfg.commands {
        client.send_opening_requests(g.image);
    }

    let started = Instant::now();
    let mut next_tick = Instant::now();
    let mut last_frame = seg.load_u64(client.offsets.frame_seq).unwrap_or(0);
    let mut waiter = Waiter::new();
    // Relaxed: a flag with no data behind it.
    while !stop.load(Ordering::Relaxed) && cfg.steps.is_none_or(|s| client.stats.steps < s) {
        match source.as_deref_mut() {
            None => client.choose_actions(),
            Some(src) => {
                if !src
                    .next_actions(&mut client.actions)
                    .map_err(ClientError::Replay)?
                {
                    break;
                }
            }
        }
        client.flag_resets();
        if cfg.commands {
            client.send_step_requests();
        }
        let (action_seq, t0) = client.publish_step();
        let Some(frame) = client.wait_for_frame(last_frame, action_seq, t0, &mut waiter, stop)?
        else {
            break;
        };
        let arrived = Instant::now();
        client.count_step(frame, action_seq, t0);
        last_frame = frame;
        client.drain_responses();
        let updated = match cfg.rollout {
            Some(r) if r.update_after(client.stats.steps, cfg.steps) => {
                client.update_policy(r.update, stop);
                true
            }
            _ => false,
        };
        if let Some(p) = period {
            next_tick = if updated {
                // A trainer back from an update steps on at its pace: the schedule
                // starts over rather than catching up on the steps the update took.
                let resume = resume_at(Instant::now(), p, t0, arrived);
                sleep_until(resume, stop);
                resume
            } else {
                wait_for_next_tick(next_tick, p, t0, arrived, stop)
            };
        }
    }
    let mut stats = std::mem::take(&mut client.stats);
    stats.elapsed_secs = started.elapsed().as_secs_f64();
    drop(guard);
    Ok(stats)
}

/// The time between two steps at `hz` steps per second (`None`: as fast as the engine
/// goes).
fn step_period(hz: Option<f64>) -> Result<Option<Duration>, ClientError> {
    match hz {
        None => Ok(None),
        Some(hz) if hz.is_finite() && hz > 0.0 => Ok(Some(
            Duration::try_from_secs_f64(1.0 / hz)
                .map_err(|_| ClientError::Config(format!("--hz {hz} is too slow a pace")))?,
        )),
        Some(hz) => Err(ClientError::Config(format!(
            "--hz must be positive, not {hz}"
        ))),
    }
}

/// The client's side of one attached segment: where its words and regions are, the
/// command rings, the buffers of each step and what it counted.
struct Client<'s> {
    seg: &'s SegmentRw,
    cfg: &'s ClientConfig,
    offsets: Offsets,
    num_envs: usize,
    act_size: usize,
    obs_size: usize,
    act_at: u64,
    resets_at: u64,
    dones_at: u64,
    truncs_at: Option<u64>,
    obs_at: Option<u64>,
    rings: CmdRings,
    actions: Vec<f32>,
    resets: Vec<u8>,
    dones: Vec<u8>,
    truncs: Vec<u8>,
    obs: Vec<f32>,
    buf: Vec<u8>,
    stats: ClientStats,
    rng: u64,
    correlation_id: u64,
}

impl<'s> Client<'s> {
    /// Finds the header's words, the hot regions and the command rings of `g`.
    fn new(seg: &'s SegmentRw, g: &Geometry, cfg: &'s ClientConfig) -> Result<Self, ClientError> {
        let lucky_layout = g.layout == Layout::LuckyrobotsIpc;
        // The header's words, through the wire structs the geometry was read with.
        let c = g.counters;
        let offsets = Offsets {
            frame_seq: c.frame_seq,
            action_seq: c.action_seq,
            client_pid: c.client_pid,
            action_time_ns: c.ext.map(|e| e.action_time_ns),
            client_ready: lucky_layout.then_some(layout::headers::LuckyHeader::CLIENT_READY_OFFSET),
        };
        let region = |k| g.region(k).map(|r| r.offset_bytes);
        let (Some(act_at), Some(resets_at), Some(dones_at)) = (
            region(RegionKind::Act),
            region(RegionKind::Resets),
            region(RegionKind::Dones),
        ) else {
            return Err(ClientError::Config("the segment lacks hot regions".into()));
        };
        let truncs_at = region(RegionKind::Truncateds);
        let obs_at = region(RegionKind::Obs);
        let obs = if cfg.policy == Policy::Balance {
            vec![0f32; g.num_envs as usize * g.obs_size as usize]
        } else {
            Vec::new()
        };
        let (Some(c2s), Some(s2c)) = (
            g.ring(RegionKind::CmdC2s).copied(),
            g.ring(RegionKind::CmdS2c).copied(),
        ) else {
            return Err(ClientError::Config(
                "the segment has no command rings".into(),
            ));
        };
        let rings = if lucky_layout {
            CmdRings::Lucky {
                out: lucky::LuckyProducer::new(seg, c2s),
                inbound: lucky::LuckyConsumer::new(seg, s2c),
            }
        } else {
            CmdRings::Lrbc {
                out: v1::V1Producer::new(seg, c2s),
                inbound: v1::V1Consumer::new(seg, s2c),
            }
        };
        let n = g.num_envs as usize;
        let act_size = g.act_size as usize;
        let mut stats = ClientStats::default();
        if cfg.record_latency {
            stats
                .latencies_ns
                .reserve(cfg.steps.unwrap_or(100_000) as usize);
        }
        Ok(Self {
            seg,
            cfg,
            offsets,
            num_envs: n,
            act_size,
            obs_size: g.obs_size as usize,
            act_at,
            resets_at,
            dones_at,
            truncs_at,
            obs_at,
            rings,
            actions: vec![0f32; n * act_size],
            resets: vec![0u8; n],
            dones: vec![0u8; n],
            truncs: vec![0u8; n],
            obs,
            buf: Vec::new(),
            stats,
            rng: 0x2545_F491_4F6C_DD1D_u64 ^ u64::from(std::process::id()),
            correlation_id: 1,
        })
    }

    /// Writes `client_pid` (and `client_ready`); the guard clears them however the
    /// client ends.
    fn announce(&self) -> ClientGuard<'s> {
        let o = &self.offsets;
        self.seg.store_u32(o.client_pid, std::process::id());
        if let Some(w) = o.client_ready {
            self.seg.store_u32(w, 1);
        }
        ClientGuard {
            seg: self.seg,
            client_pid: o.client_pid,
            client_ready: o.client_ready,
        }
    }

    /// This step's actions, by the policy.
    fn choose_actions(&mut self) {
        let t = self.stats.steps as f32 * 0.05;
        let act_size = self.act_size;
        match self.cfg.policy {
            Policy::Random => random_actions(&mut self.actions, &mut self.rng),
            Policy::Zero => self.actions.fill(0.0),
            Policy::Sine => {
                for (i, a) in self.actions.iter_mut().enumerate() {
                    *a = (t + (i / act_size.max(1)) as f32 * 0.7).sin();
                }
            }
            Policy::Balance => {
                random_actions(&mut self.actions, &mut self.rng);
                if let Some(at) = self.obs_at {
                    self.seg.read_f32s(at, &mut self.obs);
                    let per = self.obs_size;
                    for env in 0..self.num_envs {
                        let o = &self.obs[env * per..(env + 1) * per];
                        let (x, v, theta, omega) = (o.first(), o.get(1), o.get(2), o.get(3));
                        let u = match (x, v, theta, omega) {
                            (Some(x), Some(v), Some(th), Some(om)) => {
                                1.2 * th + 0.35 * om + 0.02 * x + 0.06 * v
                            }
                            _ => 0.0,
                        };
                        let row = &mut self.actions[env * act_size..(env + 1) * act_size];
                        // 0.1 of the random draw as noise on the force; other channels stay random.
                        row[0] = (u * 1.0 + 0.1 * row[0]).clamp(-1.0, 1.0);
                    }
                }
            }
        }
    }

    /// Reset flags for the envs that ended last frame (done or truncated).
    fn flag_resets(&mut self) {
        self.seg.read_at(self.dones_at, &mut self.dones);
        if let Some(at) = self.truncs_at {
            self.seg.read_at(at, &mut self.truncs);
        }
        let mut any_reset = false;
        for i in 0..self.num_envs {
            self.resets[i] = u8::from(self.dones[i] != 0 || self.truncs[i] != 0);
            any_reset |= self.resets[i] != 0;
        }
        if any_reset {
            self.stats.env_resets += self.resets.iter().filter(|&&r| r != 0).count() as u64;
        }
    }

    /// Writes the actions and reset flags and bumps `action_seq`; returns the
    /// `action_seq` before the bump and when it was published.
    fn publish_step(&mut self) -> (u64, Instant) {
        self.seg.write_f32s(self.act_at, &self.actions);
        self.seg.write_at(self.resets_at, &self.resets);
        let t0 = Instant::now();
        if let Some(w) = self.offsets.action_time_ns {
            self.seg.store_u64(w, monotonic_now_ns());
        }
        // Release (fetch_add AcqRel): publishes the actions and reset flags written
        // above; pairs with the engine's Acquire load of action_seq.
        let action_seq = self
            .seg
            .fetch_add_u64(self.offsets.action_seq, 1)
            .unwrap_or(0);
        (action_seq, t0)
    }

    /// Waits until `frame_seq` moves past `last_frame` and returns it; `None` if
    /// stopped first.
    fn wait_for_frame(
        &self,
        last_frame: u64,
        action_seq: u64,
        t0: Instant,
        waiter: &mut Waiter,
        stop: &AtomicBool,
    ) -> Result<Option<u64>, ClientError> {
        let frame = loop {
            // Acquire: pairs with the engine's Release store of frame_seq.
            let f = self.seg.load_u64(self.offsets.frame_seq).unwrap_or(0);
            if f != last_frame {
                break Some(f);
            }
            if waiter.spins() % 1024 == 1023 && t0.elapsed() > self.cfg.step_timeout {
                return Err(ClientError::StepTimeout {
                    action_seq,
                    secs: self.cfg.step_timeout.as_secs_f64(),
                });
            }
            // Relaxed: a flag with no data behind it.
            if stop.load(Ordering::Relaxed) {
                break None;
            }
            waiter.wait();
        };
        // The wait is over: its length tunes the next one.
        waiter.reset();
        Ok(frame)
    }

    /// Counts a step whose frame came: its round trip and whether the frame answered
    /// the action just sent.
    fn count_step(&mut self, frame: u64, action_seq: u64, t0: Instant) {
        if self.cfg.record_latency {
            self.stats.latencies_ns.push(t0.elapsed().as_nanos() as u64);
        }
        if frame != action_seq {
            self.stats.frame_mismatches += 1;
        }
        self.stats.steps += 1;
    }

    /// The update after a rollout: no actions for `update` (the engine waits), or until
    /// stopped; counted, with the time it took.
    fn update_policy(&mut self, update: Duration, stop: &AtomicBool) {
        let started = Instant::now();
        // An update is at most Rollout::MAX_UPDATE (checked before the run), so the
        // deadline fits an Instant.
        sleep_until(started + update, stop);
        self.stats.updates += 1;
        self.stats.update_secs += started.elapsed().as_secs_f64();
    }
}

/// Clears `client_pid` (and `client_ready`) however the client ends.
struct ClientGuard<'a> {
    seg: &'a SegmentRw,
    client_pid: u64,
    client_ready: Option<u64>,
}

impl Drop for ClientGuard<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.client_ready {
            self.seg.store_u32(w, 0);
        }
        self.seg.store_u32(self.client_pid, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Engine, EngineConfig, EngineStats};
    use ::lrbc::attach::{Attached, Target, attach};
    use ::lrbc::layout::plan::PlanLayout;
    use ::lrbc::testutil::unique_name;
    use std::sync::Arc;

    /// The longest a test waits for something that should happen.
    const DEADLINE: Duration = Duration::from_secs(20);

    #[test]
    fn an_update_follows_every_rollout_but_not_the_last_step_of_the_run() {
        let r = Rollout {
            frames: 8,
            update: Duration::from_millis(300),
        };
        let after: Vec<u64> = (1..=40).filter(|&k| r.update_after(k, Some(40))).collect();
        assert_eq!(after, [8, 16, 24, 32]);
        assert!(
            r.update_after(40, None),
            "a run without end goes on after 40"
        );
        assert!(!r.update_after(0, None), "no update before the first step");
        let every = Rollout { frames: 1, ..r };
        assert_eq!(
            (1..=3).filter(|&k| every.update_after(k, Some(3))).count(),
            2
        );
    }

    #[test]
    fn a_rollout_of_no_frames_or_an_update_over_an_hour_is_refused() {
        let ok = Rollout {
            frames: 1,
            update: Duration::ZERO,
        };
        assert!(ok.check().is_ok());
        let max = Rollout {
            update: Rollout::MAX_UPDATE,
            ..ok
        };
        assert!(max.check().is_ok());
        let e = Rollout { frames: 0, ..ok }.check().unwrap_err();
        assert!(e.to_string().contains("at least 1 frame"), "{e}");
        let e = Rollout {
            update: Rollout::MAX_UPDATE + Duration::from_nanos(1),
            ..ok
        }
        .check()
        .unwrap_err();
        assert!(e.to_string().contains("at most 3600 s"), "{e}");
    }

    /// An engine stepping a small lrbc-v1 segment (4 envs) on a thread of its own, in
    /// lock-step; a read-only attachment to watch its counters.
    struct Stepped {
        name: String,
        watch: Attached,
        stop: Arc<AtomicBool>,
        engine: Option<std::thread::JoinHandle<EngineStats>>,
    }

    impl Stepped {
        fn start(tag: &str) -> Self {
            let name = unique_name(tag);
            let cfg = EngineConfig::small(name.clone(), PlanLayout::Lrbc { ext: true }, 4, 8, 2);
            let mut engine = Engine::create(cfg).unwrap();
            let watch = attach(&Target::Shm(name.clone()), LayoutChoice::Auto).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let s = Arc::clone(&stop);
            let engine = std::thread::Builder::new()
                .name("test-engine".into())
                .spawn(move || engine.run(&s))
                .unwrap();
            Self {
                name,
                watch,
                stop,
                engine: Some(engine),
            }
        }

        /// A client of the segment: `steps` steps, rollouts of `frames` with updates of
        /// `update`, no commands.
        fn client(&self, steps: Option<u64>, frames: u64, update: Duration) -> ClientConfig {
            ClientConfig {
                name: self.name.clone(),
                steps,
                hz: Some(500.0),
                policy: Policy::Zero,
                commands: false,
                record_latency: false,
                step_timeout: Duration::from_secs(5),
                rollout: Some(Rollout { frames, update }),
            }
        }

        /// (frame_seq, action_seq) as a reader sees them.
        fn counters(&self) -> (u64, u64) {
            let c = self.watch.geometry.counters;
            // Acquire: pairs with the engine's Release store of frame_seq.
            let frame_seq = self.watch.segment.load_u64(c.frame_seq).unwrap();
            // Acquire: pairs with the client's AcqRel fetch_add of action_seq.
            let action_seq = self.watch.segment.load_u64(c.action_seq).unwrap();
            (frame_seq, action_seq)
        }

        /// Stops the engine: how many steps it made.
        fn finish(mut self) -> u64 {
            self.stop_engine().unwrap().steps
        }

        fn stop_engine(&mut self) -> Option<EngineStats> {
            // Relaxed: a flag with no data behind it.
            self.stop.store(true, Ordering::Relaxed);
            self.engine.take().map(|t| t.join().unwrap())
        }
    }

    impl Drop for Stepped {
        fn drop(&mut self) {
            self.stop_engine();
        }
    }

    #[test]
    fn a_client_in_rollouts_updates_after_each_but_the_last_and_the_timeout_leaves_updates_out() {
        let engine = Stepped::start("rollout");
        // Each update lasts longer than the step timeout: were the update part of the
        // next step's wait, that step would time out.
        let update = Duration::from_millis(1100);
        let cfg = ClientConfig {
            step_timeout: Duration::from_secs(1),
            ..engine.client(Some(8), 4, update)
        };
        let started = Instant::now();
        let stats = run(&cfg, &AtomicBool::new(false)).unwrap();
        let took = started.elapsed();
        assert_eq!(stats.steps, 8);
        assert_eq!(stats.frame_mismatches, 0);
        assert_eq!(stats.updates, 1, "after step 4; none after the last, 8");
        assert!(stats.update_secs >= update.as_secs_f64(), "{stats:?}");
        assert!(stats.elapsed_secs >= stats.update_secs, "{stats:?}");
        assert!(took >= update, "{took:?}");
        assert_eq!(engine.counters(), (8, 8));
        assert_eq!(engine.finish(), 8, "one engine step per action");
    }

    #[test]
    fn during_an_update_the_engine_waits_on_the_rollouts_last_frame_until_the_client_stops() {
        let engine = Stepped::start("update");
        let cfg = engine.client(None, 5, Duration::from_secs(600));
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let client = std::thread::Builder::new()
            .name("test-client".into())
            .spawn(move || run(&cfg, &s))
            .unwrap();
        let deadline = Instant::now() + DEADLINE;
        while engine.counters().0 < 5 {
            assert!(Instant::now() < deadline, "the client did not step to 5");
            std::thread::sleep(Duration::from_millis(1));
        }
        // The rollout's last frame came; the client updates for 600 s without writing
        // actions, so nothing moves, however long the test looks.
        for _ in 0..20 {
            assert_eq!(engine.counters(), (5, 5));
            std::thread::sleep(Duration::from_millis(5));
        }
        // Relaxed: a flag with no data behind it.
        stop.store(true, Ordering::Relaxed);
        let stats = client.join().unwrap().unwrap();
        assert_eq!(stats.steps, 5);
        assert_eq!(stats.updates, 1, "the update cut short counts");
        assert!(
            stats.update_secs < 600.0,
            "the stop ended the update: {stats:?}"
        );
        assert_eq!(engine.counters(), (5, 5));
    }
}
